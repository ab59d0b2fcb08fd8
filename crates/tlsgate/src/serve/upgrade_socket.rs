//! The upgrade socket's file (`[server] upgrade_socket`): bound with mode 0600 (only this user
//! may connect; the channel checks the peer's uid as well, SO_PEERCRED), a stale socket left by a
//! process that died replaced, a live one (another gateway answers there) refused, anything
//! that is not a socket never touched, and removed on a plain stop (not after a handover: the
//! successor listens on the same socket then).

use super::channel::UpgradeError;
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// Listens on `path`.
pub fn bind(path: &Path) -> Result<UnixListener, UpgradeError> {
    let fail = |source| UpgradeError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let listener = match UnixListener::bind(path) {
        Ok(l) => l,
        Err(e) if e.kind() == ErrorKind::AddrInUse => {
            let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
            if !is_socket {
                return Err(fail(std::io::Error::new(
                    ErrorKind::AlreadyExists,
                    "the file exists and is not a socket",
                )));
            }
            match UnixStream::connect(path) {
                Ok(_) => return Err(UpgradeError::SocketInUse(path.to_path_buf())),
                Err(c) if c.kind() == ErrorKind::ConnectionRefused => {
                    tracing::info!(path = %path.display(), "removing a stale upgrade socket (no process listens on it)");
                    std::fs::remove_file(path).map_err(fail)?;
                    UnixListener::bind(path).map_err(fail)?
                }
                Err(_) => return Err(fail(e)),
            }
        }
        Err(e) => return Err(fail(e)),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
    Ok(listener)
}

/// Removes the socket file (a plain stop, or a successor moved to another path).
pub fn remove(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove the upgrade socket");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn stale_sockets_are_replaced_live_ones_and_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.sock");
        let live = bind(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let e = bind(&path).unwrap_err();
        assert!(matches!(e, UpgradeError::SocketInUse(_)), "{e}");
        drop(live); // the file stays, nobody listens: stale
        let again = bind(&path).unwrap();
        drop(again);
        remove(&path);
        assert!(!path.exists());
        let file = dir.path().join("not-a-socket");
        std::fs::write(&file, "keep me").unwrap();
        assert!(bind(&file).is_err());
        remove(&file);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    }
}

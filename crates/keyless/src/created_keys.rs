//! Keys the key server creates for gateways (`new_key` requests: a keyless certificate obtained
//! through ACME). The key server makes the key and the CSR for the names asked — never a
//! signature over data a gateway chose — writes the key (PKCS#8, mode 0600) to
//! `[new_keys] dir` as `<hex of the creator's identity>.<first 16 hex digits of its id>.key`, and
//! serves it at once. The key never leaves the key server. Only gateways with its creator's
//! identity (`cn:` preferred: a gateway cluster's nodes share a name) may use it, besides what
//! `[[client]]` tables grant by key id — never everyone, even without tables; at most
//! `max_per_client` keys per creator. At start the directory is loaded with the other keys, the
//! creator read back from each file name.

use crate::keystore::{hex, Key, KeyStore, KeyStoreError};
use crate::new_key::{NewKey, NewKeyKind};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a key could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Key generation or the CSR failed.
    #[error("creating the key or its CSR: {0}")]
    Crypto(String),
    /// The key could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The written key could not be loaded back.
    #[error(transparent)]
    Load(#[from] KeyStoreError),
}

/// The identity that owns the keys a connection creates: its `cn:` identity when it has one
/// (the nodes of a gateway cluster share a name, not a key), else its first.
pub fn creator(identities: &[String]) -> Option<&str> {
    identities
        .iter()
        .find(|i| i.starts_with("cn:"))
        .or(identities.first())
        .map(String::as_str)
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Loads every key of `dir` (created earlier) into `store` with its creator; the directory is
/// made (mode 0700) when missing. Returns how many.
pub fn load(dir: &Path, store: &mut KeyStore) -> Result<usize, KeyStoreError> {
    let read_error = |source| KeyStoreError::Read {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(read_error)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "key"))
        .collect();
    files.sort();
    let mut n = 0;
    for file in files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(creator) = name.split('.').next().and_then(unhex) else {
            tracing::warn!(path = %file.display(), "not a created key's file name: skipped");
            continue;
        };
        let pem = std::fs::read(&file).map_err(|source| KeyStoreError::Read {
            path: file.clone(),
            source,
        })?;
        store.add_file(&file, &pem, Some(creator))?;
        n += 1;
    }
    Ok(n)
}

/// Creates a key of `req.kind` for `creator`, writes it to `dir`, and returns it (ready for the
/// store) with the DER CSR for `req.names`, signed by it. Slow for RSA: run it off the I/O threads.
pub fn create(dir: &Path, req: &NewKey, creator: &str) -> Result<(Arc<Key>, Vec<u8>), CreateError> {
    let crypto = |e: tlsgate_acme::AcmeError| CreateError::Crypto(e.to_string());
    let kind = match req.kind {
        NewKeyKind::EcdsaP256 => tlsgate_acme::csr::KeyKind::EcdsaP256,
        NewKeyKind::Rsa2048 => tlsgate_acme::csr::KeyKind::Rsa2048,
    };
    let key = tlsgate_acme::csr::generate_key(kind).map_err(crypto)?;
    let csr = tlsgate_acme::csr::csr_der(&req.names, &key).map_err(crypto)?;
    let pem = key
        .private_key_to_pem_pkcs8()
        .map_err(|e| CreateError::Crypto(e.to_string()))?;
    let id = crate::keystore::key_id(&key).map_err(|e| CreateError::Crypto(e.to_string()))?;
    let path = dir.join(format!("{}.{}.key", hex(creator.as_bytes()), hex(&id[..8])));
    let tmp = path.with_extension("tmp");
    let write = |p: &Path| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(p)?;
        f.write_all(&pem)?;
        f.sync_all()
    };
    write(&tmp)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| CreateError::Write {
            path: path.clone(),
            source,
        })?;
    let mut one = KeyStore::default();
    let key = one.add_file(&path, &pem, Some(creator.to_string()))?;
    Ok((key, csr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_key_is_written_for_its_creator_and_loaded_back() {
        let dir = tempfile::tempdir().unwrap();
        let req = NewKey {
            kind: NewKeyKind::EcdsaP256,
            names: vec!["a.test".into(), "www.a.test".into()],
        };
        let (key, csr) = create(dir.path(), &req, "spki:ab").unwrap();
        assert_eq!(key.creator.as_deref(), Some("spki:ab"));
        let req_der = boring::x509::X509Req::from_der(&csr).unwrap();
        let public = req_der.public_key().unwrap();
        assert_eq!(
            crate::keystore::key_id(&public).unwrap(),
            key.id,
            "the CSR is for the new key"
        );
        let mode = std::fs::metadata(&key.path).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
        let mut store = KeyStore::default();
        assert_eq!(load(dir.path(), &mut store).unwrap(), 1);
        assert_eq!(store.get(&key.id).unwrap().creator.as_deref(), Some("spki:ab"));
        assert_eq!(creator(&["spki:1".into(), "cn:x".into()]), Some("cn:x"));
        assert_eq!(creator(&["spki:1".into()]), Some("spki:1"));
    }
}

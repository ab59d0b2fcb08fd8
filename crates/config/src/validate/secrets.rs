//! Files that hold secrets (private keys, the keyless client key, cluster secrets) must not be
//! readable by every user of the machine: `tlsgate check` warns when one is (`chmod 600`).

use crate::issue::Issue;
use crate::model::Config;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Every configured secret file with its field name.
fn secret_files(config: &Config) -> Vec<(String, &Path)> {
    let mut out = Vec::new();
    for (i, site) in config.sites.iter().enumerate() {
        for (j, c) in site.certificates.iter().enumerate() {
            if let Some(key) = &c.key {
                out.push((format!("site[{i}].certificate[{j}].key"), key.as_path()));
            }
        }
    }
    if let Some(k) = &config.keyless {
        out.push(("keyless.client_key".to_string(), k.client_key.as_path()));
    }
    if let Some(c) = &config.cluster {
        for (i, f) in c.secret_files.iter().enumerate() {
            out.push((format!("cluster.secret_files[{i}]"), f.as_path()));
        }
    }
    out
}

/// Warnings about secret files that other users can read (or write). Run by `tlsgate check`
/// only: `serve` trusts the operator's file modes.
pub fn secret_file_permissions(config: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    for (field, path) in secret_files(config) {
        let Ok(meta) = std::fs::metadata(path) else {
            continue; // a missing file is reported elsewhere
        };
        let mode = meta.permissions().mode();
        if mode & 0o007 != 0 {
            issues.push(Issue::warning(
                field,
                format!(
                    "{} holds a secret but is accessible to every user (mode {:o}); chmod 600 it",
                    path.display(),
                    mode & 0o777
                ),
            ));
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_readable_keys_are_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open.key");
        let closed = dir.path().join("closed.key");
        for (p, mode) in [(&open, 0o644), (&closed, 0o600)] {
            std::fs::write(p, "secret").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[site]]\nname = \"a\"\nserver_names = [\"a\"]\n\
             [[site.certificate]]\nchain = \"c.pem\"\nkey = {:?}\n[[site.certificate]]\nchain = \"c.pem\"\nkey = {:?}\n\
             [[site.route]]\nfixed_response = {{ body = \"x\" }}\n",
            open.display().to_string(),
            closed.display().to_string()
        );
        let config = crate::parse(&text).unwrap();
        let issues = secret_file_permissions(&config);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].field, "site[0].certificate[0].key");
        assert!(issues[0].message.contains("mode 644"), "{}", issues[0].message);
    }
}

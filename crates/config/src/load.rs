//! Loading a configuration file: read, parse, resolve relative paths against the file's
//! directory, validate.

use crate::error::{ConfigError, ParseError};
use crate::model::Config;
use crate::validate::{self, Severity};
use std::path::{Path, PathBuf};

/// A configuration together with the file it came from (relative paths inside it are resolved
/// against that file's directory).
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// Where it was read from.
    pub path: PathBuf,
    /// The parsed, path-resolved and validated configuration.
    pub config: Config,
}

/// Reads, parses, resolves relative paths and validates a configuration file.
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut config = parse(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        source: e,
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    resolve_paths(&mut config, base);
    let issues = validate::validate(&config);
    if issues.iter().any(|i| i.severity == Severity::Error) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            issues,
        });
    }
    Ok(LoadedConfig {
        path: path.to_path_buf(),
        config,
    })
}

/// Parses TOML text into a [`Config`] (no path resolution, no validation).
pub fn parse(text: &str) -> Result<Config, ParseError> {
    Ok(toml::from_str(text)?)
}

/// Makes every relative certificate/key path (and the access-log file, the upgrade socket)
/// relative to `base`.
pub fn resolve_paths(config: &mut Config, base: &Path) {
    let mut paths: Vec<&mut PathBuf> = Vec::new();
    for site in &mut config.sites {
        for cert in &mut site.certificates {
            paths.push(&mut cert.chain);
            paths.extend(cert.key.as_mut());
            paths.extend(cert.ocsp_file.as_mut());
        }
        paths.extend(site.client_auth.as_mut().and_then(|c| c.ca.as_mut()));
    }
    paths.extend(config.log.access_log_file.as_mut());
    paths.extend(config.server.upgrade_socket.as_mut());
    if let Some(c) = &mut config.cluster {
        paths.extend(c.secret_files.iter_mut());
    }
    if let Some(a) = &mut config.acme {
        paths.push(&mut a.state_dir);
        paths.extend(a.directory_ca.as_mut());
        paths.extend(a.dns_hook.as_mut().filter(|h| h.components().count() > 1));
    }
    if let Some(k) = &mut config.keyless {
        paths.extend([&mut k.client_certificate, &mut k.client_key, &mut k.server_ca]);
    }
    for u in &mut config.upstreams {
        let tls = &mut u.tls;
        paths.extend(tls.ca.as_mut());
        paths.extend(tls.client_certificate.as_mut());
        paths.extend(tls.client_key.as_mut());
    }
    for p in paths {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_follow_the_file() {
        let mut config = parse(
            "[log]\naccess_log_file = \"logs/a.log\"\n[[site]]\nname = \"a\"\nserver_names = [\"a\"]\n\
             [[site.certificate]]\nchain = \"c.pem\"\nkey = \"/abs/k.pem\"\n",
        )
        .unwrap();
        resolve_paths(&mut config, Path::new("/etc/tlsgate"));
        let cert = &config.sites[0].certificates[0];
        assert_eq!(cert.chain, Path::new("/etc/tlsgate/c.pem"));
        assert_eq!(cert.key.as_deref(), Some(Path::new("/abs/k.pem")));
        assert_eq!(
            config.log.access_log_file.as_deref(),
            Some(Path::new("/etc/tlsgate/logs/a.log"))
        );
    }
}

//! The errors of building TLS contexts from the configuration, shared by `context`, `ocsp` and
//! `remote_keys`. A leaf: it imports nothing from the rest of the crate.

use boring::error::ErrorStack;
use tlsgate_error::{BoxError, Classify, Side};

/// Why the TLS configuration could not be built. Every variant names the configuration field.
#[derive(Debug, thiserror::Error)]
pub enum TlsBuildError {
    /// A file could not be read.
    #[error("{field}: {path}: {source}")]
    Read {
        /// Config field, e.g. `site[0].certificate[1].key`.
        field: String,
        /// The file.
        path: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but BoringSSL could not parse it as what the field holds.
    #[error("{field}: {path}: not a {what}: {source}")]
    Parse {
        /// Config field.
        field: String,
        /// The file.
        path: String,
        /// What the file should hold, e.g. `PEM private key`.
        what: &'static str,
        /// BoringSSL's errors.
        #[source]
        source: ErrorStack,
    },
    /// A file parsed but cannot be used (no certificate in it, a key of another certificate).
    #[error("{field}: {path}: {message}")]
    File {
        /// Config field.
        field: String,
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// BoringSSL refused a setting.
    #[error("{field}: {source}")]
    Setting {
        /// Config field.
        field: String,
        /// BoringSSL's errors.
        #[source]
        source: ErrorStack,
    },
    /// A certificate's key servers cannot be used.
    #[error("{field}: {source}")]
    KeyServers {
        /// Config field, `site[i].certificate[j].key_servers`.
        field: String,
        /// Why not.
        #[source]
        source: RemoteKeysError,
    },
}

impl Classify for TlsBuildError {
    fn side(&self) -> Side {
        match self {
            TlsBuildError::KeyServers { source, .. } => source.side(),
            _ => Side::Config,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            TlsBuildError::Read { .. } | TlsBuildError::Parse { .. } | TlsBuildError::File { .. } => "tls_file",
            TlsBuildError::Setting { .. } => "tls_setting",
            TlsBuildError::KeyServers { source, .. } => source.kind(),
        }
    }
}

/// Why a certificate without a key file gets no key-server backend.
#[derive(Debug, thiserror::Error)]
pub enum RemoteKeysError {
    /// The configuration has no `[keyless]` section.
    #[error("key servers need a [keyless] section")]
    NoKeylessSection,
    /// No key-server backend factory was installed in this program.
    #[error("this program was built without keyless support")]
    NotBuiltIn,
    /// `key_server_pool` names no pool.
    #[error("no [[keyless.pool]] named {0:?}")]
    NoSuchPool(String),
    /// The factory (tlsgate-keyless) refused.
    #[error(transparent)]
    Backend(BoxError),
}

impl Classify for RemoteKeysError {
    fn side(&self) -> Side {
        match self {
            RemoteKeysError::NotBuiltIn => Side::Internal,
            _ => Side::Config,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            RemoteKeysError::NotBuiltIn => "keyless_missing",
            _ => "key_servers",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_errors_name_the_field_and_are_config() {
        let e = TlsBuildError::Read {
            field: "site[0].certificate[0].chain".into(),
            path: "/nope.pem".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(
            e.to_string().starts_with("site[0].certificate[0].chain: /nope.pem: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!((e.side(), e.kind(), e.retry_safe()), (Side::Config, "tls_file", false));
        let e = TlsBuildError::KeyServers {
            field: "site[0].certificate[0].key_servers".into(),
            source: RemoteKeysError::NoSuchPool("main".into()),
        };
        assert_eq!(
            e.to_string(),
            "site[0].certificate[0].key_servers: no [[keyless.pool]] named \"main\""
        );
        assert_eq!((e.side(), e.kind()), (Side::Config, "key_servers"));
        let e = TlsBuildError::KeyServers {
            field: "f".into(),
            source: RemoteKeysError::NotBuiltIn,
        };
        assert_eq!(e.side(), Side::Internal);
    }
}

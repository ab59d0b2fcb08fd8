//! Why a configuration was not installed: a reload (SIGHUP, `POST /reload`) that re-read the
//! file, or the control plane laying its document over it. The running generation stays.

use tlsgate_config::ConfigError;
use tlsgate_error::{Classify, Side};
use tlsgate_tls::TlsBuildError;

/// Why a configuration was not installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The file could not be read, parsed or validated.
    #[error(transparent)]
    Load(#[from] ConfigError),
    /// The control-plane document this node applies no longer fits the file (one problem each).
    #[error("the control-plane document no longer fits: {}", .0.join("; "))]
    Overlay(Vec<String>),
    /// The control plane had no configuration read from the file to lay its document over.
    #[error("no base configuration")]
    NoBase,
    /// The gateway could not build a generation from it (certificates, keys, TLS settings).
    #[error(transparent)]
    Gateway(#[from] TlsBuildError),
}

impl Classify for InstallError {
    fn side(&self) -> Side {
        match self {
            Self::NoBase => Side::Internal,
            Self::Load(_) | Self::Overlay(_) => Side::Config,
            Self::Gateway(e) => e.side(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Load(_) => "config_load",
            Self::Overlay(_) => "control_overlay",
            Self::NoBase => "no_base_config",
            Self::Gateway(_) => "config_install",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_classes() {
        let e = InstallError::Overlay(vec!["sites/x: no such site".into(), "b".into()]);
        assert_eq!(
            e.to_string(),
            "the control-plane document no longer fits: sites/x: no such site; b"
        );
        assert_eq!((e.side(), e.kind()), (Side::Config, "control_overlay"));
        let read = TlsBuildError::Read {
            field: "site[0].certificate[0].key".into(),
            path: "key.pem".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let e = InstallError::from(read);
        assert!(e.to_string().starts_with("site[0].certificate[0].key: key.pem: "));
        assert_eq!((e.side(), e.kind()), (Side::Config, "config_install"));
        assert!(!e.retry_safe());
        assert_eq!(InstallError::NoBase.side(), Side::Internal);
    }
}

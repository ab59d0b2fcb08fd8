//! Why a configuration could not be read, parsed or used: [`ConfigError`] (a file) and
//! [`ParseError`] (TOML text). Both are operator errors ([`Side::Config`]): fixed by editing the
//! file, never by retrying.

use crate::issue::Issue;
use std::path::PathBuf;
use tlsgate_error::{Classify, Side};

/// TOML text that did not parse or did not fit the model. The message names the line, the key
/// and what was expected (an unknown field, a bad value, a missing one).
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct ParseError(#[from] toml::de::Error);

impl Classify for ParseError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        "parse"
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML did not parse or did not fit the model (the message names line and key).
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: ParseError,
    },
    /// Parsed, but semantically invalid.
    #[error("{}: {}", path.display(), issues.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every finding (errors and warnings).
        issues: Vec<Issue>,
    },
}

impl Classify for ConfigError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        match self {
            ConfigError::Read { .. } => "io",
            ConfigError::Parse { .. } => "parse",
            ConfigError::Invalid { .. } => "invalid",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_the_field_and_are_config_errors() {
        let err = crate::parse("[server]\nworkerz = 2\n").unwrap_err();
        assert!(err.to_string().contains("workerz"), "{err}");
        assert_eq!(
            (err.side(), err.kind(), err.retry_safe()),
            (Side::Config, "parse", false)
        );
    }

    #[test]
    fn load_errors_keep_their_source_and_class() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.toml");
        let err = crate::load(&missing).unwrap_err();
        assert_eq!(err.kind(), "io");
        assert!(err.to_string().contains("cannot read"), "{err}");
        assert!(std::error::Error::source(&err).is_some());

        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[server]\nworkerz = 2\n").unwrap();
        let err = crate::load(&bad).unwrap_err();
        assert_eq!((err.side(), err.kind()), (Side::Config, "parse"));
        assert!(err.to_string().starts_with(&format!("{}: ", bad.display())), "{err}");
        assert!(err.to_string().contains("workerz"), "{err}");

        let empty = dir.path().join("empty.toml");
        std::fs::write(&empty, "").unwrap();
        let err = crate::load(&empty).unwrap_err();
        assert_eq!(err.kind(), "invalid");
        assert!(err.to_string().contains("at least one [[listener]]"), "{err}");
    }
}

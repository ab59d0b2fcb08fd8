//! Why the console refused to start, or refused a login.

use std::net::SocketAddr;
use std::path::PathBuf;
use tlsgate_admin::guard::GuardError;
use tlsgate_control::ControlError;
use tlsgate_error::{Classify, Side};

/// A console error: its options and files (at start), or a caller's credentials.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// `--token-file` holds fewer than `min` characters.
    #[error("the token must be at least {min} characters")]
    ShortToken {
        /// The shortest token accepted.
        min: usize,
    },
    /// A bind that is not loopback, without `--token-file`.
    #[error("refusing to listen on {0} (not loopback) without --token-file")]
    TokenRequired(SocketAddr),
    /// `--token-file` cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadToken {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A bad `--allowed-host`.
    #[error("--allowed-host: {0}")]
    AllowedHost(#[from] GuardError),
    /// A bad `--redis` URL or `--cluster` name.
    #[error(transparent)]
    Store(ControlError),
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A login with a token that is not the console's.
    #[error("wrong token")]
    WrongToken,
}

impl Classify for ConsoleError {
    fn side(&self) -> Side {
        match self {
            Self::WrongToken => Side::Downstream,
            _ => Side::Config,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::ShortToken { .. } => "token_too_short",
            Self::TokenRequired(_) => "token_required",
            Self::ReadToken { .. } => "token_unreadable",
            Self::AllowedHost(_) => "allowed_host",
            Self::Store(_) => "store_config",
            Self::Listen { .. } => "listen",
            Self::WrongToken => "wrong_token",
        }
    }
}

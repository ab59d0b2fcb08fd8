//! What can go wrong on the QUIC listener, classified like every other error.

use tlsgate_error::{Classify, Side};
use tlsgate_wire::quic_token::TokenError;

/// A failure of the QUIC listener.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// The UDP socket could not be made or bound.
    #[error("cannot listen on UDP {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// The cluster secret the reset and Retry secret is derived from could not be read.
    #[error("cluster.secret_files[0]: {0}")]
    Secret(String),
    /// A Retry token that is not one of the gateway's.
    #[error("retry token: {0}")]
    Token(#[from] TokenError),
    /// A Retry token with a wrong MAC (forged, or made for another address).
    #[error("retry token forged or issued to another address")]
    TokenForged,
    /// A Retry token older than its lifetime.
    #[error("retry token expired")]
    TokenExpired,
    /// The QUIC TLS contexts could not be built.
    #[error("QUIC TLS: {0}")]
    Tls(#[from] tlsgate_tls::TlsBuildError),
    /// quiche refused a setting or a connection.
    #[error("QUIC: {0}")]
    Quiche(#[from] quiche::Error),
    /// quiche's HTTP/3 layer refused a setting.
    #[error("HTTP/3: {0}")]
    H3(#[from] quiche::h3::Error),
}

impl Classify for QuicError {
    fn side(&self) -> Side {
        match self {
            Self::Bind { .. } | Self::Tls(_) | Self::Secret(_) => Side::Config,
            Self::Token(_) | Self::TokenForged | Self::TokenExpired | Self::H3(_) => Side::Downstream,
            Self::Quiche(_) => Side::Internal,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Bind { .. } => "quic_bind",
            Self::Secret(_) => "quic_cluster_secret",
            Self::Token(TokenError::Malformed) => "retry_token_malformed",
            Self::Token(TokenError::CidTooLong) => "retry_token_cid_too_long",
            Self::TokenForged => "retry_token_forged",
            Self::TokenExpired => "retry_token_expired",
            Self::Tls(_) => "quic_tls_config",
            Self::Quiche(_) => "quic",
            Self::H3(_) => "http3",
        }
    }
}

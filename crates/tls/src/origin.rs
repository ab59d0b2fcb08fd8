//! TLS from the gateway to origin servers (`https://` servers of an `[[upstream]]`): one
//! [`OriginTls`] per upstream group, built from `[upstream.tls]`.
//!
//! - Verification on by default: the chain against `ca` (or the system bundle) and the name
//!   against `server_name` or the server's host (an IP address is checked as an IP SAN and sent
//!   without SNI).
//! - Forward-secret AEAD suites only (as on the client side), TLS 1.2 and 1.3, the configured
//!   key-exchange groups (hybrid post-quantum `X25519MLKEM768` first by default).
//! - A client certificate for origins that ask for one (mutual TLS).
//! - Resumption: the newest session each server gave us (TLS 1.3 tickets arrive after the
//!   handshake, so they are kept from BoringSSL's new-session callback) is offered on the next
//!   connection to that server.
//! - ALPN as the group's protocol asks: `h2`, `http/1.1` or both.
//!
//! Failures are [`OriginTlsError`]s, classified by the certificate verification result and the
//! peer's alert, never by message text.

use crate::error::TlsBuildError;
use crate::failure::peer_alert;
use boring::error::ErrorStack;
use boring::ex_data::Index;
use boring::ssl::{
    Ssl, SslConnector, SslFiletype, SslMethod, SslSession, SslSessionCacheMode, SslVerifyMode, SslVersion,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use tlsgate_config::{UpstreamTlsConfig, DEFAULT_TLS12_CIPHERS, SYSTEM_CA_BUNDLE};
use tlsgate_error::{Classify, Side};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_boring::SslStream;

/// Application protocols offered to an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginAlpn {
    /// `http/1.1` only.
    Http1,
    /// `h2` only.
    Http2,
    /// `h2` then `http/1.1`: the origin picks.
    Either,
}

impl OriginAlpn {
    fn wire(self) -> &'static [u8] {
        match self {
            Self::Http1 => b"\x08http/1.1",
            Self::Http2 => b"\x02h2",
            Self::Either => b"\x02h2\x08http/1.1",
        }
    }
}

/// What an origin handshake did.
#[derive(Debug, Clone, Copy)]
pub struct OriginHandshake {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: &'static str,
    /// Key-exchange group, e.g. `X25519MLKEM768`.
    pub group: &'static str,
    /// Resumed from a session the origin gave us earlier.
    pub resumed: bool,
    /// The origin chose `h2` by ALPN.
    pub h2: bool,
}

/// The key of the session kept for one server, stored on each connection for the new-session
/// callback.
static SESSION_KEY: LazyLock<Index<Ssl, Arc<str>>> =
    LazyLock::new(|| Ssl::new_ex_index().expect("allocate an SSL ex_data index"));

/// One upstream group's TLS client side.
pub struct OriginTls {
    connector: SslConnector,
    verify: bool,
    server_name: Option<String>,
    sessions: Arc<Mutex<HashMap<Arc<str>, SslSession>>>,
}

impl std::fmt::Debug for OriginTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginTls")
            .field("verify", &self.verify)
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl OriginTls {
    /// Builds the client context of `[upstream.tls]` (`field` names it in errors, e.g.
    /// `upstream[0].tls`), offering `alpn`.
    pub fn new(config: &UpstreamTlsConfig, alpn: OriginAlpn, field: &str) -> Result<Self, TlsBuildError> {
        let setting = |what: &str| {
            let field = format!("{field}.{what}");
            move |source: ErrorStack| TlsBuildError::Setting { field, source }
        };
        let mut b = SslConnector::builder(SslMethod::tls()).map_err(setting("tls"))?;
        b.set_min_proto_version(Some(SslVersion::TLS1_2))
            .map_err(setting("tls"))?;
        b.set_max_proto_version(Some(SslVersion::TLS1_3))
            .map_err(setting("tls"))?;
        b.set_cipher_list(DEFAULT_TLS12_CIPHERS).map_err(setting("tls"))?;
        b.set_curves_list(&config.groups.join(":")).map_err(setting("groups"))?;
        let ca = config.ca.clone().unwrap_or_else(|| SYSTEM_CA_BUNDLE.into());
        if config.verify {
            b.set_ca_file(&ca).map_err(setting("ca"))?;
        } else {
            b.set_verify(SslVerifyMode::NONE);
        }
        if let (Some(chain), Some(key)) = (&config.client_certificate, &config.client_key) {
            b.set_certificate_chain_file(chain)
                .map_err(setting("client_certificate"))?;
            b.set_private_key_file(key, SslFiletype::PEM)
                .map_err(setting("client_key"))?;
            b.check_private_key().map_err(setting("client_key"))?;
        }
        b.set_alpn_protos(alpn.wire()).map_err(setting("tls"))?;
        let sessions: Arc<Mutex<HashMap<Arc<str>, SslSession>>> = Arc::default();
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        let store = sessions.clone();
        b.set_new_session_callback(move |ssl, session| {
            if let Some(key) = ssl.ex_data(*SESSION_KEY) {
                store.lock().insert(key.clone(), session);
            }
        });
        Ok(Self {
            connector: b.build(),
            verify: config.verify,
            server_name: config.server_name.clone(),
            sessions,
        })
    }

    /// Runs the handshake with the server at `host` (bare: no brackets) over `stream`; `key`
    /// names the server for resumption (its `host:port`); `http1_only` offers `http/1.1` alone.
    pub async fn connect<S>(
        &self,
        stream: S,
        host: &str,
        key: &Arc<str>,
        http1_only: bool,
    ) -> Result<(SslStream<S>, OriginHandshake), OriginTlsError>
    where
        S: AsyncRead + AsyncWrite + Unpin + std::fmt::Debug,
    {
        let name = self.server_name.as_deref().unwrap_or(host);
        let mut config = self.connector.configure().map_err(OriginTlsError::Setup)?;
        config.set_verify_hostname(self.verify);
        let mut ssl = config.into_ssl(name).map_err(OriginTlsError::Setup)?;
        ssl.set_ex_data(*SESSION_KEY, key.clone());
        if http1_only {
            // An upgrade (WebSocket) needs HTTP/1.1 whatever the group usually speaks.
            ssl.set_alpn_protos(OriginAlpn::Http1.wire())
                .map_err(OriginTlsError::Setup)?;
        }
        if let Some(session) = self.sessions.lock().get(key) {
            // A session this connector made; one BoringSSL no longer accepts is just not resumed.
            let _ = crate::ffi::set_client_session(&mut ssl, session);
        }
        let stream = tokio_boring::SslStreamBuilder::new(ssl, stream)
            .connect()
            .await
            .map_err(|e| OriginTlsError::handshake(&e))?;
        let ssl = stream.ssl();
        let info = OriginHandshake {
            version: ssl.version_str(),
            group: ssl.curve_name().unwrap_or("none"),
            resumed: ssl.session_reused(),
            h2: ssl.selected_alpn_protocol() == Some(b"h2"),
        };
        Ok((stream, info))
    }
}

/// Why TLS to an origin failed.
#[derive(Debug, thiserror::Error)]
pub enum OriginTlsError {
    /// BoringSSL could not set up the connection (out of memory, a name it refuses).
    #[error("TLS setup for the origin failed: {0}")]
    Setup(#[source] ErrorStack),
    /// The origin's certificate did not verify (chain or name).
    #[error("the origin's certificate was not accepted: {0}")]
    Certificate(String),
    /// The origin sent an alert (e.g. it wanted a client certificate we did not have).
    #[error("the origin refused the handshake with TLS alert {0}")]
    Alert(u8),
    /// The connection failed during the handshake for another reason.
    #[error("TLS handshake with the origin failed: {0}")]
    Handshake(String),
}

/// The alert an origin sent after the handshake, found in an I/O error's chain (TLS 1.3: a server
/// that refuses our client certificate says so with an alert on our first read, e.g. 116
/// `certificate_required`, after the client side of the handshake has already finished).
pub fn alert_in(error: &(dyn std::error::Error + 'static)) -> Option<u8> {
    let mut next = Some(error);
    while let Some(e) = next {
        let stack = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<boring::ssl::Error>())
            .and_then(|ssl| ssl.ssl_error())
            .or_else(|| e.downcast_ref::<boring::ssl::Error>().and_then(|ssl| ssl.ssl_error()));
        if let Some(alert) = stack.and_then(crate::failure::received_alert) {
            return Some(alert);
        }
        next = e.source();
    }
    None
}

impl OriginTlsError {
    fn handshake<S: std::fmt::Debug>(e: &tokio_boring::HandshakeError<S>) -> Self {
        if let Some(ssl) = e.ssl() {
            if let Err(bad) = ssl.verify_result() {
                return Self::Certificate(bad.error_string().to_string());
            }
        }
        if let Some(alert) = peer_alert(e) {
            return Self::Alert(alert);
        }
        Self::Handshake(e.to_string())
    }
}

impl Classify for OriginTlsError {
    fn side(&self) -> Side {
        match self {
            Self::Setup(_) => Side::Internal,
            _ => Side::Upstream,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Setup(_) => "origin_tls_setup",
            Self::Certificate(_) => "origin_certificate",
            Self::Alert(_) => "origin_alert",
            Self::Handshake(_) => "origin_handshake",
        }
    }

    /// Nothing of the request was sent: another server may take it.
    fn retry_safe(&self) -> bool {
        true
    }
}

//! Opening one connection to an origin server: TCP (connect timeout, `TCP_NODELAY`, keepalive),
//! the PROXY protocol header when the group sends one (`send_proxy_protocol`: written first, before
//! TLS, as HAProxy's `send-proxy`/`send-proxy-v2`), and, for `https://` servers, the TLS
//! handshake of the group's [`OriginTls`]. The result is a [`Transport`] the HTTP/1.1 or HTTP/2
//! client runs on, and what the TLS handshake did. A transport can hold its connection's place in
//! the server's count ([`Transport::counted`]): given back when the socket closes.

use super::limit::ConnSlot;
use crate::read_ahead::ReadAheadStream;
use pin_project_lite::pin_project;
use socket2::{SockRef, TcpKeepalive};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tlsgate_config::SendProxyProtocol;
use tlsgate_error::{Classify, Side};
use tlsgate_tls::origin::{OriginHandshake, OriginTls, OriginTlsError};
use tlsgate_wire::proxy_protocol::{encode, Encoded, Header, Version};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_boring::SslStream;

/// The two ends of a client's connection as a PROXY header names them: the client (`source`) and
/// the gateway address it connected to (`destination`). A connection that announced a pair only
/// ever carries requests of that pair.
pub type ProxyPair = tlsgate_wire::proxy_protocol::Addresses;

/// The PROXY header of `version` for a connection carrying `pair`'s requests (`None`: the
/// gateway's own connection, a health-check probe: v2 `LOCAL`, v1 `UNKNOWN`); no header for
/// `Off`.
pub fn proxy_header(version: SendProxyProtocol, pair: Option<&ProxyPair>) -> Option<Encoded> {
    let version = match version {
        SendProxyProtocol::Off => return None,
        SendProxyProtocol::V1 => Version::V1,
        SendProxyProtocol::V2 => Version::V2,
    };
    Some(encode(&Header {
        version,
        addresses: pair.copied(),
    }))
}

pin_project! {
    /// A connection to an origin, and its place in the server's count of open connections.
    pub struct Transport {
        #[pin]
        stream: Stream,
        slot: Option<ConnSlot>,
    }
}

pin_project! {
    /// Plaintext or TLS.
    #[project = StreamProj]
    enum Stream {
        /// Plaintext TCP.
        Plain { #[pin] tcp: TcpStream },
        /// TLS over TCP.
        Tls { #[pin] tls: SslStream<ReadAheadStream<TcpStream>> },
    }
}

impl Transport {
    fn new(stream: Stream) -> Self {
        Self { stream, slot: None }
    }

    /// The transport holding `slot` until it is dropped (the socket closed).
    pub fn counted(mut self, slot: ConnSlot) -> Self {
        self.slot = Some(slot);
        self
    }
}

/// Why a connection to an origin could not be opened. Nothing of a request was sent, so each
/// is safe to retry on another server.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// TCP connect failed (refused, unreachable, name not resolved).
    #[error("connect to {server} failed: {source}")]
    Tcp {
        /// `host:port`.
        server: Arc<str>,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// TCP connect took longer than `connect_timeout`.
    #[error("connect to {server} timed out after {timeout:?}")]
    Timeout {
        /// `host:port`.
        server: Arc<str>,
        /// The limit.
        timeout: Duration,
    },
    /// The TLS handshake failed.
    #[error("TLS to {server}: {source}")]
    Tls {
        /// `host:port`.
        server: Arc<str>,
        /// Why.
        #[source]
        source: OriginTlsError,
    },
}

impl Classify for ConnectError {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Tcp { .. } => "connect",
            Self::Timeout { .. } => "connect_timeout",
            Self::Tls { source, .. } => source.kind(),
        }
    }

    fn retry_safe(&self) -> bool {
        true
    }
}

/// Opens a connection to `host:port` (`key` is `host:port` as configured, for errors and TLS
/// resumption), writes `proxy` first when given, then runs TLS when `tls` is given (offering only
/// `http/1.1` when `http1_only`).
pub async fn open(
    host: &str,
    port: u16,
    key: &Arc<str>,
    tls: Option<&OriginTls>,
    timeout: Duration,
    http1_only: bool,
    proxy: Option<&Encoded>,
) -> Result<(Transport, Option<OriginHandshake>), ConnectError> {
    let mut tcp = match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(source)) => {
            return Err(ConnectError::Tcp {
                server: key.clone(),
                source,
            })
        }
        Err(_) => {
            return Err(ConnectError::Timeout {
                server: key.clone(),
                timeout,
            })
        }
    };
    let _ = tcp.set_nodelay(true);
    let _ = SockRef::from(&tcp).set_tcp_keepalive(&TcpKeepalive::new().with_time(Duration::from_secs(60)));
    if let Some(header) = proxy {
        // A fresh socket's send buffer takes the few bytes at once.
        tcp.write_all(header.as_bytes())
            .await
            .map_err(|source| ConnectError::Tcp {
                server: key.clone(),
                source,
            })?;
    }
    let Some(tls) = tls else {
        return Ok((Transport::new(Stream::Plain { tcp }), None));
    };
    // Read ahead below BoringSSL: one `recvfrom` for several small records of the origin's
    // (a response's HEADERS and DATA frames), not two per record.
    let tcp = ReadAheadStream::new(tcp);
    let handshake = tokio::time::timeout(timeout, tls.connect(tcp, host, key, http1_only)).await;
    match handshake {
        Ok(Ok((tls, info))) => Ok((Transport::new(Stream::Tls { tls }), Some(info))),
        Ok(Err(source)) => Err(ConnectError::Tls {
            server: key.clone(),
            source,
        }),
        Err(_) => Err(ConnectError::Timeout {
            server: key.clone(),
            timeout,
        }),
    }
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_read(cx, buf)
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }
}

impl super::exchange::MoreFollows for Transport {
    fn poll_write_more(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.project().stream.project() {
            StreamProj::Plain { tcp } => crate::send_more::poll_send_more(&tcp, cx, bufs),
            StreamProj::Tls { tls } => tls.poll_write_vectored(cx, bufs),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.project() {
            StreamProj::Plain { tcp } => tcp.poll_read(cx, buf),
            StreamProj::Tls { tls } => tls.poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.project() {
            StreamProj::Plain { tcp } => tcp.poll_write(cx, buf),
            StreamProj::Tls { tls } => tls.poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.project() {
            StreamProj::Plain { tcp } => tcp.poll_write_vectored(cx, bufs),
            StreamProj::Tls { tls } => tls.poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain { tcp } => tcp.is_write_vectored(),
            Stream::Tls { tls } => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.project() {
            StreamProj::Plain { tcp } => tcp.poll_flush(cx),
            StreamProj::Tls { tls } => tls.poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.project() {
            StreamProj::Plain { tcp } => tcp.poll_shutdown(cx),
            StreamProj::Tls { tls } => tls.poll_shutdown(cx),
        }
    }
}

/// A plaintext connection to `listener` (tests).
#[cfg(test)]
pub(crate) async fn plain_to(listener: &tokio::net::TcpListener) -> Transport {
    let port = listener.local_addr().unwrap().port();
    let key: Arc<str> = Arc::from(format!("127.0.0.1:{port}"));
    let (transport, _) = open("127.0.0.1", port, &key, None, Duration::from_secs(5), true, None)
        .await
        .unwrap();
    transport
}

//! The PROXY protocol header on listeners with `proxy_protocol` (HAProxy's `accept-proxy`,
//! nginx's `listen ... proxy_protocol` with `set_real_ip_from`): a load balancer in
//! `proxy_protocol_from` opens the connection and writes a v1 or v2 header naming the client,
//! which then stands for the peer in everything after (logs, X-Forwarded-For, per-source limits).
//!
//! The header is read before TLS (or plain HTTP) without taking one byte more: the socket is
//! peeked, the bytes are parsed (`tlsgate_wire::proxy_protocol`), and exactly the header's bytes
//! are read off; what follows stays in the kernel for the handshake. Connections from elsewhere,
//! and headers that are missing, malformed or late, are closed, counted
//! (`tlsgate_proxy_protocol_total{result}`) and logged at most once a second per kind.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tlsgate_admin::metrics::{Metrics, ProxyProtocolLabels};
use tlsgate_error::log_limit::LogLimit;
use tlsgate_error::{Classify, Side};
use tlsgate_wire::proxy_protocol::{parse, Addresses, Header, Parsed, ProxyHeaderError, MAX_HEADER_LEN};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Bytes peeked at a time: a v1 header and most v2 headers (and the TLS bytes behind them).
const PEEK: usize = 512;

/// Why a connection on a `proxy_protocol` listener was closed before its own protocol began.
#[derive(Debug, thiserror::Error)]
pub enum ProxyProtocolError {
    /// The connection came from outside `proxy_protocol_from`.
    #[error("connection from {0}, which is not in proxy_protocol_from")]
    UntrustedSource(IpAddr),
    /// The first bytes are not a valid PROXY protocol header.
    #[error("bad PROXY protocol header: {0}")]
    Malformed(#[from] ProxyHeaderError),
    /// No complete header within the handshake timeout.
    #[error("no complete PROXY protocol header within {0:?}")]
    Timeout(Duration),
    /// The peer closed the connection before the header was complete.
    #[error("the connection closed before its PROXY protocol header was complete")]
    Closed,
    /// Reading the socket failed.
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

impl Classify for ProxyProtocolError {
    fn side(&self) -> Side {
        Side::Downstream
    }
    fn kind(&self) -> &'static str {
        match self {
            Self::UntrustedSource(_) => "untrusted_source",
            Self::Malformed(_) => "malformed",
            Self::Timeout(_) => "timeout",
            Self::Closed | Self::Io(_) => "closed",
        }
    }
}

/// A header read off a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// What it said.
    pub header: Header,
    /// Its length in bytes (all read off the socket; nothing after it was).
    pub len: usize,
}

/// Reads the PROXY protocol header at the start of `tcp`, and nothing after it.
///
/// Each round peeks at what has arrived: a complete header is then read off to its last byte;
/// an incomplete one is read off entirely (every byte of it belongs to the header) and the next
/// peek waits for more. Never more than [`MAX_HEADER_LEN`] bytes are buffered.
pub async fn read(tcp: &mut TcpStream) -> Result<Received, ProxyProtocolError> {
    let mut taken: Vec<u8> = Vec::new();
    let mut window = [0u8; PEEK];
    loop {
        let room = MAX_HEADER_LEN.saturating_sub(taken.len()).min(PEEK);
        if room == 0 {
            // `parse` answers before the bound; kept so that no input can loop here.
            return Err(ProxyHeaderError::V2TooLong(taken.len()).into());
        }
        let n = tcp.peek(&mut window[..room]).await?;
        if n == 0 {
            return Err(ProxyProtocolError::Closed);
        }
        let before = taken.len();
        taken.extend_from_slice(&window[..n]);
        match parse(&taken)? {
            Parsed::Done { header, consumed } => {
                tcp.read_exact(&mut window[..consumed - before]).await?;
                return Ok(Received { header, len: consumed });
            }
            Parsed::Incomplete => {
                tcp.read_exact(&mut window[..n]).await?;
            }
        }
    }
}

/// Reads the header of a connection from `peer` within `timeout`; returns the client's address
/// and the one it connected to (the socket's own for `LOCAL`, `UNKNOWN` and address families
/// without an IP) or why the connection must be closed. Either way it is counted, and failures
/// logged (rate-limited).
pub async fn accept(
    tcp: &mut TcpStream,
    peer: SocketAddr,
    timeout: Duration,
    metrics: &Metrics,
) -> Result<Addresses, ProxyProtocolError> {
    let result = match tokio::time::timeout(timeout, read(tcp)).await {
        Ok(r) => r,
        Err(_) => Err(ProxyProtocolError::Timeout(timeout)),
    };
    match result {
        Ok(received) => {
            count(metrics, "ok");
            metrics.bytes_in.inc_by(received.len as u64);
            let ends = received.header.addresses.unwrap_or_else(|| Addresses {
                source: peer,
                destination: tcp.local_addr().unwrap_or(peer),
            });
            tracing::trace!(%peer, client = %ends.source, version = ?received.header.version, "PROXY protocol header");
            Ok(ends)
        }
        Err(e) => {
            refused(metrics, peer, &e);
            Err(e)
        }
    }
}

/// Counts and logs (rate-limited) a connection closed for its header or its source.
pub fn refused(metrics: &Metrics, peer: SocketAddr, e: &ProxyProtocolError) {
    count(metrics, e.kind());
    match e {
        // A trusted balancer that sends no or a broken header is misconfigured: say so.
        ProxyProtocolError::Malformed(_) => {
            if let Some(suppressed) = MALFORMED_LOG.allow() {
                tracing::warn!(%peer, error = %e, suppressed, "connection closed");
            }
        }
        ProxyProtocolError::UntrustedSource(_) => {
            if let Some(suppressed) = UNTRUSTED_LOG.allow() {
                tracing::debug!(%peer, error = %e, suppressed, "connection closed");
            }
        }
        _ => {
            if let Some(suppressed) = OTHER_LOG.allow() {
                tracing::debug!(%peer, error = %e, suppressed, "connection closed");
            }
        }
    }
}

fn count(metrics: &Metrics, result: &'static str) {
    metrics
        .proxy_protocol
        .get_or_create(&ProxyProtocolLabels { result })
        .inc();
}

// At most one log line a second of each kind, shared by every worker; the lines left out are
// counted and reported with the next one (a scan from outside must not flood the log).
static MALFORMED_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
static UNTRUSTED_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
static OTHER_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A connected pair: (the gateway's side, the client's side).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (server, client)
    }

    async fn rest(server: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        server.read_exact(&mut buf).await.unwrap();
        buf
    }

    #[tokio::test]
    async fn reads_the_header_and_not_one_byte_more() {
        let (mut server, mut client) = pair().await;
        client
            .write_all(b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n\x16\x03\x01")
            .await
            .unwrap();
        let got = read(&mut server).await.unwrap();
        assert_eq!(got.header.source(), Some("192.0.2.7:56324".parse().unwrap()));
        assert_eq!(got.len, 45);
        assert_eq!(rest(&mut server, 3).await, b"\x16\x03\x01");
    }

    #[tokio::test]
    async fn a_header_in_pieces_is_put_together() {
        let (mut server, mut client) = pair().await;
        let mut v2 = tlsgate_wire::proxy_protocol::V2_SIGNATURE.to_vec();
        v2.extend_from_slice(&[0x21, 0x11, 0x02, 0x0f]); // 12 address bytes + 515 TLV bytes
        v2.extend_from_slice(&[192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb]);
        v2.extend_from_slice(&[0xe0, 0x02, 0x00]);
        v2.resize(16 + 527, 7);
        let writer = tokio::spawn(async move {
            for piece in [&v2[..5], &v2[5..14], &v2[14..300], &v2[300..]] {
                client.write_all(piece).await.unwrap();
                client.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            client.write_all(b"after").await.unwrap();
            client
        });
        let got = read(&mut server).await.unwrap();
        assert_eq!(got.len, 16 + 527);
        assert_eq!(got.header.source(), Some("192.0.2.7:56324".parse().unwrap()));
        let _client = writer.await.unwrap();
        assert_eq!(rest(&mut server, 5).await, b"after");
    }

    #[tokio::test]
    async fn garbage_and_early_close_are_told_apart() {
        let (mut server, mut client) = pair().await;
        client.write_all(b"\x16\x03\x01\x00\x10").await.unwrap();
        let e = read(&mut server).await.unwrap_err();
        assert_eq!(e.kind(), "malformed", "{e}");

        let (mut server, mut client) = pair().await;
        client.write_all(b"PROXY TCP4 192.0").await.unwrap();
        drop(client);
        let e = read(&mut server).await.unwrap_err();
        assert_eq!(e.kind(), "closed", "{e}");
    }

    #[tokio::test]
    async fn accept_counts_and_keeps_the_socket_address_for_local() {
        let metrics = Metrics::new();
        let peer: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let (mut server, mut client) = pair().await;
        let mut local = tlsgate_wire::proxy_protocol::V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        client.write_all(&local).await.unwrap();
        let got = accept(&mut server, peer, Duration::from_secs(5), &metrics)
            .await
            .unwrap();
        assert_eq!(got.source, peer);
        assert_eq!(Some(got.destination), server.local_addr().ok());

        let (mut server, _client) = pair().await;
        let e = accept(&mut server, peer, Duration::from_millis(50), &metrics)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), "timeout");
        let text = metrics.encode();
        for result in ["ok", "timeout"] {
            let line = format!("tlsgate_proxy_protocol_total{{result=\"{result}\"}} 1");
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
    }
}

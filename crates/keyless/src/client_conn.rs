//! One persistent, pipelined mutual-TLS connection from the gateway to a key server: connect
//! ([`connect`]), prove it with a ping, read responses and route them by request id, ping every
//! `health_interval` ([`Link::serve`]). The task that keeps a server's connection slots filled
//! is `client_server::run_slot`.

use crate::codec::{decode_response, encode_request, FrameError, Request, Response, TooLarge};
use boring::ssl::SslConnector;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_error::{Classify, Side};
use tokio::io::{AsyncReadExt, ReadHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_boring::SslStream;

/// What every connection of a client needs to connect and stay up.
pub struct ConnSettings {
    /// Mutual TLS 1.3 towards key servers ([`crate::tls_setup::connector`]).
    pub connector: SslConnector,
    /// Longest time for TCP, then for TLS, then for the first pong.
    pub connect_timeout: Duration,
    /// How often a proven connection is pinged; a missed pong closes it.
    pub health_interval: Duration,
}

/// Why a request could not be sent on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request does not fit in a frame.
    #[error("request too large: {0}")]
    TooLarge(#[source] TooLarge),
    /// The connection is dead.
    #[error("connection closed")]
    Closed,
}

impl Classify for RequestError {
    fn side(&self) -> Side {
        match self {
            RequestError::TooLarge(_) => Side::Internal,
            RequestError::Closed => Side::Upstream,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            RequestError::TooLarge(_) => "request_too_large",
            RequestError::Closed => "connection_lost",
        }
    }
    fn retry_safe(&self) -> bool {
        matches!(self, RequestError::Closed)
    }
}

/// Why a connection to a key server could not be made, or why it ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// No TCP connection within `connect_timeout`.
    #[error("connect timed out")]
    ConnectTimeout,
    /// TCP connection refused or failed.
    #[error("connect: {0}")]
    Connect(#[source] std::io::Error),
    /// The TLS library could not make a session.
    #[error("TLS setup: {0}")]
    Setup(#[source] boring::error::ErrorStack),
    /// No TLS handshake within `connect_timeout`.
    #[error("TLS handshake timed out")]
    HandshakeTimeout,
    /// The TLS handshake failed (certificate not trusted, name mismatch, …).
    #[error("TLS handshake: {0}")]
    Handshake(#[source] tokio_boring::HandshakeError<TcpStream>),
    /// A ping could not be sent.
    #[error("ping: {0}")]
    Ping(#[source] RequestError),
    /// The key server answered a ping with something else.
    #[error("unexpected answer to ping: {0:?}")]
    UnexpectedPong(Response),
    /// Reading failed.
    #[error("read: {0}")]
    Read(#[source] std::io::Error),
    /// The key server sent a frame that does not decode.
    #[error("{0}")]
    Frame(#[source] FrameError),
    /// The key server closed the connection before its first pong: in TLS 1.3 that is how a
    /// refused client certificate shows.
    #[error("closed by the key server before answering a ping (client certificate refused?)")]
    ClosedBeforePing,
    /// No pong within `connect_timeout` of connecting.
    #[error("no answer to the first ping")]
    NoFirstPong,
    /// A health-check ping was not answered within `health_interval`.
    #[error("missed a health-check pong")]
    MissedPong,
}

impl Classify for ConnError {
    fn side(&self) -> Side {
        match self {
            ConnError::Setup(_) => Side::Internal,
            ConnError::Ping(e) => e.side(),
            _ => Side::Upstream,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            ConnError::ConnectTimeout | ConnError::HandshakeTimeout => "connect_timeout",
            ConnError::Connect(_) => "connect",
            ConnError::Setup(_) => "tls_library",
            ConnError::Handshake(_) => "handshake",
            ConnError::Ping(e) => e.kind(),
            ConnError::UnexpectedPong(_) | ConnError::Frame(_) => "protocol",
            ConnError::Read(_) => "connection_lost",
            ConnError::ClosedBeforePing => "closed_before_ping",
            ConnError::NoFirstPong | ConnError::MissedPong => "missed_pong",
        }
    }
    /// Connecting again is always safe: nothing was asked of the key server yet.
    fn retry_safe(&self) -> bool {
        true
    }
}

/// A live connection: send requests, await their responses.
pub struct Conn {
    tx: UnboundedSender<Vec<u8>>,
    /// `None` once the connection is dead (requests then fail at once).
    pending: Mutex<Option<HashMap<u32, oneshot::Sender<Response>>>>,
    next_id: AtomicU32,
    /// Requests in flight on this connection.
    pub outstanding: AtomicUsize,
    alive: AtomicBool,
}

impl Conn {
    /// Whether requests can be sent.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Sends `req`; the receiver yields the response, or an error when the connection dies.
    pub fn request(&self, req: &Request) -> Result<(u32, oneshot::Receiver<Response>), RequestError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = Vec::with_capacity(256);
        encode_request(&mut frame, id, req).map_err(RequestError::TooLarge)?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            let map = pending.as_mut().ok_or(RequestError::Closed)?;
            map.insert(id, tx);
        }
        if self.tx.send(frame).is_err() {
            self.cancel(id);
            return Err(RequestError::Closed);
        }
        Ok((id, rx))
    }

    /// Forgets a request (timed out).
    pub fn cancel(&self, id: u32) {
        if let Some(map) = self.pending.lock().as_mut() {
            map.remove(&id);
        }
    }

    fn complete(&self, id: u32, resp: Response) {
        let waiter = self.pending.lock().as_mut().and_then(|m| m.remove(&id));
        if let Some(w) = waiter {
            let _ = w.send(resp);
        }
    }

    /// Marks the connection dead and fails every request still in flight (their callers retry).
    pub(crate) fn close(&self) {
        self.alive.store(false, Ordering::Release);
        self.pending.lock().take();
    }
}

/// A connection that is up but not yet proven by a pong.
pub(crate) struct Link {
    /// The connection requests go out on.
    pub(crate) conn: Arc<Conn>,
    rd: ReadHalf<SslStream<TcpStream>>,
    writer: JoinHandle<()>,
}

/// Connects to `addr` and completes mutual TLS, checking the key server's certificate against
/// `host`.
pub(crate) async fn connect(settings: &ConnSettings, addr: &str, host: &str) -> Result<Link, ConnError> {
    let tcp = tokio::time::timeout(settings.connect_timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| ConnError::ConnectTimeout)?
        .map_err(ConnError::Connect)?;
    let _ = tcp.set_nodelay(true);
    let config = settings.connector.configure().map_err(ConnError::Setup)?;
    let tls = tokio::time::timeout(settings.connect_timeout, tokio_boring::connect(config, host, tcp))
        .await
        .map_err(|_| ConnError::HandshakeTimeout)?
        .map_err(ConnError::Handshake)?;
    let (rd, wr) = tokio::io::split(tls);
    let (tx, writer) = crate::frame_writer::spawn(wr);
    let conn = Arc::new(Conn {
        tx,
        pending: Mutex::new(Some(HashMap::new())),
        next_id: AtomicU32::new(1),
        outstanding: AtomicUsize::new(0),
        alive: AtomicBool::new(true),
    });
    Ok(Link { conn, rd, writer })
}

impl Link {
    /// Serves the connection until it dies, then closes it. `proven` is called once, when the
    /// first ping is answered: only then may the connection take traffic. `Ok(())` means it was
    /// proven, then closed by the key server.
    pub(crate) async fn serve(mut self, settings: &ConnSettings, proven: impl FnOnce()) -> Result<(), ConnError> {
        let result = serve(&self.conn, &mut self.rd, settings, proven).await;
        self.conn.close();
        self.writer.abort();
        result
    }
}

async fn serve<R: tokio::io::AsyncRead + Unpin>(
    conn: &Arc<Conn>,
    rd: &mut R,
    settings: &ConnSettings,
    proven: impl FnOnce(),
) -> Result<(), ConnError> {
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut chunk = vec![0u8; 8 * 1024];
    // The first ping proves the key server accepted us (a refused client certificate shows up
    // here in TLS 1.3); only then does the connection take traffic.
    let ping_now = || {
        conn.request(&Request::Ping(vec![]))
            .map(|(_, rx)| rx)
            .map_err(ConnError::Ping)
    };
    let mut ping = ping_now()?;
    let mut proven = Some(proven);
    let first_deadline = tokio::time::Instant::now() + settings.connect_timeout;
    let mut tick = tokio::time::interval_at(first_deadline, settings.health_interval);
    loop {
        if proven.is_some() {
            if let Ok(resp) = ping.try_recv() {
                if !matches!(resp, Response::Pong(_)) {
                    return Err(ConnError::UnexpectedPong(resp));
                }
                if let Some(proven) = proven.take() {
                    proven();
                }
                ping = ping_now()?;
            }
        }
        tokio::select! {
            read = rd.read(&mut chunk) => {
                let n = read.map_err(ConnError::Read)?;
                if n == 0 {
                    return if proven.is_none() { Ok(()) } else { Err(ConnError::ClosedBeforePing) };
                }
                buf.extend_from_slice(&chunk[..n]);
                let mut start = 0;
                while let Some((id, resp, used)) = decode_response(&buf[start..]).map_err(ConnError::Frame)? {
                    start += used;
                    conn.complete(id, resp);
                }
                buf.drain(..start);
            }
            _ = tick.tick() => {
                match ping.try_recv() {
                    Ok(_) if proven.is_none() => ping = ping_now()?,
                    Ok(_) => {}
                    Err(_) if proven.is_none() => return Err(ConnError::MissedPong),
                    Err(_) => return Err(ConnError::NoFirstPong),
                }
            }
        }
    }
}

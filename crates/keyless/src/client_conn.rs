//! One persistent, pipelined mutual-TLS connection from the gateway to a key server, and the
//! task that keeps a connection slot filled: connect, prove it with a ping, read responses and
//! route them by request id, ping every `health_interval`, reconnect with backoff.

use crate::client::ServerState;
use crate::codec::{decode_response, encode_request, Request, Response};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{oneshot, watch};

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
    pub fn request(&self, req: &Request) -> Result<(u32, oneshot::Receiver<Response>), &'static str> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = Vec::with_capacity(256);
        encode_request(&mut frame, id, req).map_err(|_| "request too large")?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock();
            let map = pending.as_mut().ok_or("connection closed")?;
            map.insert(id, tx);
        }
        if self.tx.send(frame).is_err() {
            self.cancel(id);
            return Err("connection closed");
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

    /// Marks the connection dead and fails every request still in flight.
    pub(crate) fn close(&self) {
        self.kill();
    }

    /// Marks the connection dead and fails every request in flight (their callers retry).
    fn kill(&self) {
        self.alive.store(false, Ordering::Release);
        self.pending.lock().take();
    }
}

/// Keeps slot `slot` of `server` connected until `stop` fires.
pub async fn run_slot(server: Arc<ServerState>, slot: usize, mut stop: watch::Receiver<bool>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let attempt = tokio::select! {
            r = connect_and_serve(&server, slot) => r,
            _ = stop.changed() => {
                // Dropping the connection closes its writer, then the socket.
                server.clear_slot(slot);
                return;
            }
        };
        match attempt {
            Ok(()) => backoff = Duration::from_millis(50),
            Err(e) => {
                server.failure();
                if slot == 0 {
                    tracing::warn!(key_server = %server.addr, error = %e, "key server connection failed");
                }
            }
        }
        server.set_slot(slot, None);
        let wait = tokio::time::sleep(backoff);
        tokio::select! {
            _ = wait => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Connects, proves the connection with a ping, installs it, serves it until it dies.
/// `Ok(())` means it was up and then went down.
async fn connect_and_serve(server: &Arc<ServerState>, slot: usize) -> Result<(), String> {
    let s = &server.settings;
    let tcp = tokio::time::timeout(s.connect_timeout, tokio::net::TcpStream::connect(&server.addr))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let config = s.connector.configure().map_err(|e| e.to_string())?;
    let tls = tokio::time::timeout(s.connect_timeout, tokio_boring::connect(config, &server.host, tcp))
        .await
        .map_err(|_| "TLS handshake timed out".to_string())?
        .map_err(|e| format!("TLS handshake: {e}"))?;
    let (mut rd, wr) = tokio::io::split(tls);
    let (tx, writer) = crate::frame_writer::spawn(wr);
    let conn = Arc::new(Conn {
        tx,
        pending: Mutex::new(Some(HashMap::new())),
        next_id: AtomicU32::new(1),
        outstanding: AtomicUsize::new(0),
        alive: AtomicBool::new(true),
    });
    let result = serve(server, slot, &conn, &mut rd).await;
    conn.kill();
    writer.abort();
    if result.is_ok() {
        tracing::info!(key_server = %server.addr, slot, reason = ?result.as_ref().err(), "key server connection closed");
    }
    result.map(|_| ())
}

async fn serve<R: tokio::io::AsyncRead + Unpin>(
    server: &Arc<ServerState>,
    slot: usize,
    conn: &Arc<Conn>,
    rd: &mut R,
) -> Result<(), String> {
    let s = &server.settings;
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut chunk = vec![0u8; 8 * 1024];
    // The first ping proves the key server accepted us (a refused client certificate shows up
    // here in TLS 1.3); only then does the connection take traffic.
    let (_, mut ping) = conn.request(&Request::Ping(vec![])).map_err(str::to_string)?;
    let mut proven = false;
    let first_deadline = tokio::time::Instant::now() + s.connect_timeout;
    let mut tick = tokio::time::interval_at(first_deadline, s.health_interval);
    loop {
        if !proven {
            if let Ok(resp) = ping.try_recv() {
                if !matches!(resp, Response::Pong(_)) {
                    return Err(format!("unexpected answer to ping: {resp:?}"));
                }
                proven = true;
                server.set_slot(slot, Some(conn.clone()));
                server.success();
                if slot == 0 {
                    tracing::info!(key_server = %server.addr, "key server connected");
                }
                let (_, next) = conn.request(&Request::Ping(vec![])).map_err(str::to_string)?;
                ping = next;
            }
        }
        tokio::select! {
            read = rd.read(&mut chunk) => {
                let n = read.map_err(|e| format!("read: {e}"))?;
                if n == 0 {
                    return if proven { Ok(()) } else { Err("closed by the key server before answering a ping (client certificate refused?)".into()) };
                }
                buf.extend_from_slice(&chunk[..n]);
                let mut start = 0;
                while let Some((id, resp, used)) = decode_response(&buf[start..]).map_err(|e| e.to_string())? {
                    start += used;
                    conn.complete(id, resp);
                }
                buf.drain(..start);
            }
            _ = tick.tick() => {
                match ping.try_recv() {
                    Ok(_) if proven => {
                        let (_, next) = conn.request(&Request::Ping(vec![])).map_err(str::to_string)?;
                        ping = next;
                    }
                    Ok(_) => {}
                    Err(_) => return Err(if proven { "missed a health-check pong" } else { "no answer to the first ping" }.into()),
                }
            }
        }
    }
}

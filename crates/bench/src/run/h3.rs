//! `--h3`: HTTP/3 over QUIC with quiche (the gateway's own QUIC stack, on the same BoringSSL).
//! Each connection is a local task with its own UDP socket that drives its quiche connection
//! itself (no task per stream): keep-alive mode keeps `-m` requests in flight on it and sends
//! the next one as each response ends; `--new-conn` opens a QUIC connection per request (the
//! handshake counted, the thread's newest session offered unless `--no-ticket`), then closes it.
//!
//! quiche keeps the `SSL` to itself; the negotiated version, cipher and group are read in
//! BoringSSL's handshake-done callback, which runs on the bench thread inside quiche's calls.

use super::{count_error, record_outcome, Response, Shared};
use crate::args::Mode;
use crate::report::{ErrorKind, Negotiated, Stats};
use boring::ssl::{SslInfoCallbackMode, SslRef};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::time::timeout;

use crate::quic::{H3_NO_ERROR, MAX_DATAGRAM};

thread_local! {
    /// What the last handshake on this thread negotiated (set by the handshake-done callback).
    static NEGOTIATED: Cell<Option<Negotiated>> = const { Cell::new(None) };
    /// The newest session received on this thread (quiche's serialisation), offered by the
    /// next `--new-conn` connection.
    static SESSION: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// The per-thread QUIC and HTTP/3 configuration (quiche's `connect` takes it mutably).
pub(super) struct H3Client {
    config: RefCell<quiche::Config>,
    h3: quiche::h3::Config,
    headers: Vec<quiche::h3::Header>,
}

impl H3Client {
    /// The client of `sh`'s plan, for one bench thread.
    pub(super) fn new(sh: &Shared) -> anyhow::Result<Self> {
        let plan = &sh.plan;
        let mut ctx = plan.opts.quic_context()?;
        ctx.set_info_callback(|ssl: &SslRef, mode, _| {
            if mode == SslInfoCallbackMode::HANDSHAKE_DONE {
                let negotiated = (
                    ssl.version_str(),
                    ssl.current_cipher()
                        .map_or("-", |c| c.standard_name().unwrap_or_else(|| c.name())),
                    ssl.curve_name().unwrap_or("-"),
                );
                NEGOTIATED.with(|n| n.set(Some(negotiated)));
            }
        });
        let config = crate::quic::client_config(ctx, &plan.opts, 1000, false)?;
        let mut headers = vec![
            quiche::h3::Header::new(b":method", plan.method.as_bytes()),
            quiche::h3::Header::new(b":scheme", b"https"),
            quiche::h3::Header::new(b":authority", plan.host_header.as_bytes()),
            quiche::h3::Header::new(b":path", plan.path.as_bytes()),
        ];
        for (name, value) in &plan.headers {
            if !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("connection") {
                headers.push(quiche::h3::Header::new(
                    name.to_ascii_lowercase().as_bytes(),
                    value.as_bytes(),
                ));
            }
        }
        if !plan.body.is_empty() {
            headers.push(quiche::h3::Header::new(
                b"content-length",
                plan.body.len().to_string().as_bytes(),
            ));
        }
        Ok(Self {
            config: RefCell::new(config),
            h3: quiche::h3::Config::new()?,
            headers,
        })
    }
}

/// One QUIC connection on its UDP socket.
struct Link {
    socket: UdpSocket,
    quic: quiche::Connection,
    local: SocketAddr,
    peer: SocketAddr,
    out: Vec<u8>,
    inb: Vec<u8>,
}

/// A QUIC connection with HTTP/3 on it.
struct Conn {
    link: Link,
    h3: quiche::h3::Connection,
}

/// A request in flight: when it started, when its head came, its status and body bytes.
struct InFlight {
    t0: Instant,
    first_byte: Option<Instant>,
    status: u16,
    len: usize,
}

impl Link {
    /// Sends every packet quiche has ready.
    async fn flush(&mut self) -> std::io::Result<()> {
        loop {
            match self.quic.send(&mut self.out) {
                Ok((n, _)) => {
                    self.socket.send(&self.out[..n]).await?;
                }
                Err(quiche::Error::Done) => return Ok(()),
                Err(e) => return Err(std::io::Error::other(e)),
            }
        }
    }

    /// Waits for one datagram (or quiche's next timeout) and hands it to quiche.
    async fn receive(&mut self) -> std::io::Result<()> {
        let wait = self.quic.timeout().unwrap_or(Duration::from_secs(1));
        match timeout(wait, self.socket.recv(&mut self.inb)).await {
            Ok(Ok(n)) => {
                let info = quiche::RecvInfo {
                    from: self.peer,
                    to: self.local,
                };
                match self.quic.recv(&mut self.inb[..n], info) {
                    Ok(_) | Err(quiche::Error::Done) => Ok(()),
                    Err(e) => Err(std::io::Error::other(e)),
                }
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                self.quic.on_timeout();
                Ok(())
            }
        }
    }
}

impl Conn {
    async fn flush(&mut self) -> std::io::Result<()> {
        self.link.flush().await
    }

    async fn receive(&mut self) -> std::io::Result<()> {
        self.link.receive().await
    }

    /// Sends the run's request on a new stream; its id.
    fn send_request(&mut self, client: &H3Client, body: &[u8]) -> Result<u64, quiche::h3::Error> {
        let id = self
            .h3
            .send_request(&mut self.link.quic, &client.headers, body.is_empty())?;
        if !body.is_empty() {
            self.h3.send_body(&mut self.link.quic, id, body, true)?;
        }
        Ok(id)
    }

    /// Handles what arrived: each response that ended is recorded (true) or failed (false).
    fn poll(&mut self, in_flight: &mut HashMap<u64, InFlight>, done: &mut Vec<(InFlight, bool)>) -> Result<(), String> {
        let mut sink = [0u8; 16 * 1024];
        loop {
            match self.h3.poll(&mut self.link.quic) {
                Ok((id, quiche::h3::Event::Headers { list, .. })) => {
                    if let Some(r) = in_flight.get_mut(&id) {
                        use quiche::h3::NameValue;
                        let status = list
                            .iter()
                            .find(|h| h.name() == b":status")
                            .and_then(|h| std::str::from_utf8(h.value()).ok()?.parse::<u16>().ok())
                            .unwrap_or(0);
                        if status >= 200 {
                            r.status = status;
                            r.first_byte.get_or_insert_with(Instant::now);
                        }
                    }
                }
                Ok((id, quiche::h3::Event::Data)) => {
                    while let Ok(n) = self.h3.recv_body(&mut self.link.quic, id, &mut sink) {
                        if let Some(r) = in_flight.get_mut(&id) {
                            r.len += n;
                        }
                    }
                }
                Ok((id, quiche::h3::Event::Finished)) => {
                    if let Some(r) = in_flight.remove(&id) {
                        done.push((r, true));
                    }
                }
                Ok((id, quiche::h3::Event::Reset(_))) => {
                    if let Some(r) = in_flight.remove(&id) {
                        done.push((r, false));
                    }
                }
                Ok(_) => {}
                Err(quiche::h3::Error::Done) => return Ok(()),
                Err(e) => return Err(format!("HTTP/3: {e}")),
            }
        }
    }

    /// Closes the connection (H3_NO_ERROR) and sends the close.
    async fn close(mut self) {
        let _ = self.link.quic.close(true, H3_NO_ERROR, b"");
        let _ = self.link.flush().await;
    }
}

/// Opens a QUIC connection and runs its handshake (recorded); `None` on failure (counted).
async fn connect(sh: &Shared, st: &RefCell<Stats>, client: &H3Client) -> Option<Conn> {
    let t0 = Instant::now();
    match timeout(sh.plan.opts.timeout, handshake(sh, client)).await {
        Ok(Ok((conn, offered))) => {
            let negotiated = NEGOTIATED.with(Cell::take).unwrap_or(("TLSv1.3", "-", "-"));
            let mut s = st.borrow_mut();
            s.record_handshake(t0.elapsed(), offered, conn.link.quic.is_resumed(), negotiated);
            if conn.link.quic.is_resumed() {
                s.record_resumption("tls13_psk");
            }
            drop(s);
            if let Some(p) = &sh.progress {
                p.handshakes.fetch_add(1, Ordering::Relaxed);
            }
            Some(conn)
        }
        Ok(Err((kind, message))) => {
            st.borrow_mut().error_with(kind, &message);
            count_error(sh);
            tokio::time::sleep(Duration::from_millis(10)).await;
            None
        }
        Err(_) => {
            st.borrow_mut().error(ErrorKind::Timeout);
            count_error(sh);
            None
        }
    }
}

async fn handshake(sh: &Shared, client: &H3Client) -> Result<(Conn, bool), (ErrorKind, String)> {
    let plan = &sh.plan;
    let peer = plan.addr;
    let connect_err = |e: std::io::Error| (ErrorKind::Connect, e.to_string());
    let bind: SocketAddr = if peer.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind).await.map_err(connect_err)?;
    socket.connect(peer).await.map_err(connect_err)?;
    let local = socket.local_addr().map_err(connect_err)?;
    let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
    boring::rand::rand_bytes(&mut scid).map_err(|e| (ErrorKind::Handshake, e.to_string()))?;
    let scid = quiche::ConnectionId::from_ref(&scid);
    let name = plan.sni.as_deref().unwrap_or(&plan.host);
    let quic_err = |e: quiche::Error| (ErrorKind::Handshake, format!("QUIC: {e}"));
    let mut quic =
        quiche::connect(Some(name), &scid, local, peer, &mut client.config.borrow_mut()).map_err(quic_err)?;
    let mut offered = false;
    if plan.tickets {
        if let Some(session) = SESSION.with(|s| s.borrow().clone()) {
            offered = quic.set_session(&session).is_ok();
        }
    }
    let mut link = Link {
        socket,
        quic,
        local,
        peer,
        out: vec![0u8; MAX_DATAGRAM],
        inb: vec![0u8; MAX_DATAGRAM],
    };
    loop {
        link.flush().await.map_err(|e| (ErrorKind::Handshake, e.to_string()))?;
        if link.quic.is_established() {
            break;
        }
        if link.quic.is_closed() {
            let why = link.quic.peer_error().map_or_else(
                || "the connection closed during the handshake".to_string(),
                |e| format!("the server closed the connection (code {:#x})", e.error_code),
            );
            return Err((ErrorKind::Handshake, why));
        }
        link.receive().await.map_err(|e| (ErrorKind::Read, e.to_string()))?;
    }
    let h3 = quiche::h3::Connection::with_transport(&mut link.quic, &client.h3)
        .map_err(|e| (ErrorKind::Http, format!("HTTP/3: {e}")))?;
    Ok((Conn { link, h3 }, offered))
}

/// Runs one connection slot of the plan's mode until the run ends.
pub(super) async fn connection(sh: Arc<Shared>, st: Rc<RefCell<Stats>>, client: Rc<H3Client>) {
    match sh.plan.mode {
        Mode::NewConn => new_conn(&sh, &st, &client).await,
        _ => keep_alive(&sh, &st, &client).await,
    }
}

/// Keep-alive: `-m` requests in flight on one connection; a new one after a failure.
async fn keep_alive(sh: &Shared, st: &RefCell<Stats>, client: &H3Client) {
    let m = sh.plan.streams;
    loop {
        if sh.over() {
            return;
        }
        let Some(mut conn) = connect(sh, st, client).await else {
            sh.claim();
            continue;
        };
        let mut in_flight: HashMap<u64, InFlight> = HashMap::with_capacity(m);
        let mut done = Vec::with_capacity(m);
        let mut stopping = false;
        let failed = loop {
            while !stopping && in_flight.len() < m && conn.link.quic.peer_streams_left_bidi() > 0 {
                if !sh.claim() {
                    stopping = true;
                    break;
                }
                let t0 = Instant::now();
                match conn.send_request(client, &sh.plan.body) {
                    Ok(id) => {
                        in_flight.insert(id, InFlight::new(t0));
                    }
                    Err(
                        quiche::h3::Error::StreamBlocked
                        | quiche::h3::Error::TransportError(quiche::Error::StreamLimit),
                    ) => break,
                    Err(e) => {
                        record(sh, st, InFlight::new(t0), Some(format!("HTTP/3: {e}")));
                        break;
                    }
                }
            }
            if in_flight.is_empty() && (stopping || sh.over()) {
                break false;
            }
            if let Err(e) = conn.flush().await {
                break fail_all(sh, st, &mut in_flight, &e.to_string());
            }
            if let Err(e) = conn.receive().await {
                break fail_all(sh, st, &mut in_flight, &e.to_string());
            }
            if let Err(e) = conn.poll(&mut in_flight, &mut done) {
                break fail_all(sh, st, &mut in_flight, &e);
            }
            for (r, ok) in done.drain(..) {
                record(sh, st, r, (!ok).then(|| "the server reset the request".to_string()));
            }
            if conn.link.quic.is_closed() {
                break fail_all(sh, st, &mut in_flight, "the connection closed");
            }
        };
        conn.close().await;
        if !failed && (stopping || sh.over()) {
            return;
        }
    }
}

/// `--new-conn`: a QUIC connection per request, closed after its response.
async fn new_conn(sh: &Shared, st: &RefCell<Stats>, client: &H3Client) {
    while sh.claim() {
        let t0 = Instant::now();
        let Some(mut conn) = connect(sh, st, client).await else {
            continue;
        };
        let mut in_flight = HashMap::with_capacity(1);
        let mut done = Vec::with_capacity(1);
        match conn.send_request(client, &sh.plan.body) {
            Ok(id) => {
                in_flight.insert(id, InFlight::new(t0));
            }
            Err(e) => {
                record(sh, st, InFlight::new(t0), Some(format!("HTTP/3: {e}")));
                conn.close().await;
                continue;
            }
        }
        let exchange = async {
            while !in_flight.is_empty() {
                conn.flush().await.map_err(|e| e.to_string())?;
                conn.receive().await.map_err(|e| e.to_string())?;
                conn.poll(&mut in_flight, &mut done)?;
                if conn.link.quic.is_closed() && !in_flight.is_empty() {
                    return Err("the connection closed".to_string());
                }
            }
            Ok::<(), String>(())
        };
        match timeout(sh.plan.opts.timeout, exchange).await {
            Ok(Ok(())) => {
                for (r, ok) in done.drain(..) {
                    record(sh, st, r, (!ok).then(|| "the server reset the request".to_string()));
                }
            }
            Ok(Err(e)) => record(sh, st, InFlight::new(t0), Some(e)),
            Err(_) => {
                st.borrow_mut().error(ErrorKind::Timeout);
                count_error(sh);
            }
        }
        if let Some(session) = conn.link.quic.session() {
            SESSION.with(|s| *s.borrow_mut() = Some(session.to_vec()));
        }
        conn.close().await;
    }
}

impl InFlight {
    /// A request sent at `t0` (or one that failed before it was).
    fn new(t0: Instant) -> Self {
        Self {
            t0,
            first_byte: None,
            status: 0,
            len: 0,
        }
    }
}

/// Records a request that ended: its latencies, or `error`.
fn record(sh: &Shared, st: &RefCell<Stats>, r: InFlight, error: Option<String>) {
    let outcome = match (error, r.first_byte) {
        (None, Some(first_byte)) => Ok(Response {
            first_byte,
            status: r.status,
            len: r.len,
        }),
        (None, None) => Err((ErrorKind::Read, "a response without a head".to_string())),
        (Some(e), _) => Err((ErrorKind::Read, e)),
    };
    record_outcome(sh, st, r.t0, Ok(outcome));
}

/// Fails every request in flight (the connection broke); true.
fn fail_all(sh: &Shared, st: &RefCell<Stats>, in_flight: &mut HashMap<u64, InFlight>, why: &str) -> bool {
    for (_, r) in in_flight.drain() {
        record(sh, st, r, Some(why.to_string()));
    }
    true
}

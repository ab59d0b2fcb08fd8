//! One QUIC connection, driven on its own task on the worker that accepted it: datagrams from
//! the endpoint in, quiche's packets out through the worker's socket, quiche's timers, then
//! HTTP/3 over it ([`super::streams`]) once the handshake allows (1-RTT, or 0-RTT early data
//! with the TCP path's rule: `ConnContext.early` makes the proxy layer serve only safe requests
//! and mark them `Early-Data: 1`, 425 otherwise).
//!
//! The TLS handshake is BoringSSL's, with the gateway's own asynchronous callbacks (certificate
//! selection, the 0-RTT claim, a key server's signature): quiche maps their "pending" results to
//! `Done`, and the `boring` crate polls their futures with a waker stored on the connection.
//! That waker wakes this task ([`TlsWake`]); the next `send` continues the handshake. The worker
//! serves other connections meanwhile.
//!
//! On drain (shutdown, binary upgrade) the connection sends GOAWAY, lets its requests finish and
//! closes with H3_NO_ERROR; the worker gives it `server.drain_timeout`.

use super::ids::Ids;
use super::metrics::{self as m, HandshakeLabels, ProtocolLabels, PROTOCOL};
use super::send::{self, Sent};
use super::streams::Streams;
use super::udp::QuicSocket;
use crate::context::ConnContext;
use crate::downstream::io::Activity;
use crate::facts::{millis, TlsFacts};
use crate::gateway::{ConnGuard, Gateway, Generation};
use crate::identity::ClientIdentity;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};

/// A datagram for a connection.
pub struct Datagram {
    /// Its bytes.
    pub data: Vec<u8>,
    /// Who sent it.
    pub from: SocketAddr,
}

/// Wakes the connection's task when an asynchronous TLS callback can go on.
#[derive(Default)]
struct TlsWake(Notify);

impl Wake for TlsWake {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }
}

/// What a new connection is given by its endpoint.
pub struct Accepted {
    /// The connection.
    pub conn: quiche::Connection,
    /// Its datagrams.
    pub rx: mpsc::Receiver<Datagram>,
    /// The worker's socket.
    pub socket: Arc<QuicSocket>,
    /// The socket's address.
    pub local: SocketAddr,
    /// The client.
    pub peer: SocketAddr,
    /// The generation whose settings accepted it.
    pub generation: Arc<Generation>,
    /// Its site contexts (ALPN h3).
    pub tls: Arc<tlsgate_tls::TlsService>,
    /// Its place in `max_connections`.
    pub guard: ConnGuard,
    /// The worker's count of handshakes in progress (this one included).
    pub handshaking: Arc<AtomicUsize>,
    /// The IDs the endpoint routes to this connection (spares offered once established).
    pub ids: Ids,
}

/// Serves one connection to its end.
pub async fn run(gateway: Arc<Gateway>, a: Accepted) {
    let Accepted {
        mut conn,
        mut rx,
        socket,
        local,
        peer,
        generation,
        tls,
        guard,
        handshaking,
        mut ids,
    } = a;
    let _guard = guard;
    let started = Instant::now();
    let wake = Arc::new(TlsWake::default());
    {
        let ssl = conn.as_mut();
        ssl.set_task_waker(Some(std::task::Waker::from(wake.clone())));
        tlsgate_tls::handshake_info::attach(ssl);
        gateway.handshake_budget.attach(ssl, peer.ip());
        tls.fingerprints().prepare(ssl, peer.ip());
    }
    let server = &generation.config.server;
    let handshake_deadline = started + server.handshake_timeout.get();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut streams = Streams::new(events_tx, generation.config.http3.max_field_section_size);
    let mut h3: Option<quiche::h3::Connection> = None;
    let mut ctx: Option<Arc<ConnContext>> = None;
    let mut early: Option<Arc<AtomicBool>> = None;
    let mut counted_handshake = false;
    let mut shutdown = gateway.shutdown_signal();
    let mut draining = false;
    let mut drain_deadline: Option<Instant> = None;
    let mut sent = Sent::new(generation.config.http3.pacing);
    loop {
        let release = send::flush(&mut conn, &socket, &mut sent).await;
        if conn.is_closed() {
            break;
        }
        let now = Instant::now();
        let mut wait = conn.timeout().unwrap_or(Duration::from_secs(60));
        if let Some(at) = release {
            // A packet held for pacing: the loop flushes again once it is due within the
            // granularity, so that it leaves at most that much early rather than late (a
            // timer fires at or after its time, at millisecond resolution). `on_timeout` is a
            // no-op for quiche when none of its timers ran out.
            let wake = at.checked_sub(send::PACING_GRANULARITY).unwrap_or(at);
            wait = wait.min(wake.saturating_duration_since(now));
        }
        if !counted_handshake {
            wait = wait.min(handshake_deadline.saturating_duration_since(now));
        }
        if let Some(d) = drain_deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        tokio::select! {
            d = rx.recv() => match d {
                Some(d) => {
                    recv(&mut conn, d, local);
                    // Until the handshake is confirmed, one datagram per turn: the requests of
                    // 0-RTT packets are read while the connection is still in early data, those
                    // after the client's Finished once it is not (a batch can hold both).
                    if h3.is_some() && early.is_none() {
                        while let Ok(d) = rx.try_recv() {
                            recv(&mut conn, d, local);
                        }
                    }
                }
                None => conn.close(false, 0x0, b"").unwrap_or(()),
            },
            Some(e) = events.recv() => {
                if let Some(h) = h3.as_mut() {
                    streams.on_event(&mut conn, h, e);
                    while let Ok(e) = events.try_recv() {
                        streams.on_event(&mut conn, h, e);
                    }
                }
            }
            _ = wake.0.notified() => {}
            _ = tokio::time::sleep(wait) => {
                let now = Instant::now();
                conn.on_timeout();
                if !counted_handshake && now >= handshake_deadline {
                    m::handshake_failed("timeout");
                    let _ = conn.close(false, 0x0, b"handshake timeout");
                }
                if drain_deadline.is_some_and(|d| now >= d) {
                    let _ = conn.close(true, 0x100, b"");
                }
            }
            r = shutdown.changed(), if !draining => {
                let _ = r;
                draining = true;
                drain_deadline = Some(Instant::now() + server.drain_timeout.get());
                match h3.as_mut() {
                    Some(h) => {
                        let next = streams.last_id.map_or(0, |l| l + 4);
                        let _ = h.send_goaway(&mut conn, next);
                    }
                    None => {
                        let _ = conn.close(false, 0x0, b"shutting down");
                    }
                }
            }
        }
        // The handshake done (or 0-RTT accepted): HTTP/3 starts.
        if h3.is_none() && (conn.is_established() || conn.is_in_early_data()) && !conn.is_closed() {
            counted_handshake = true;
            handshaking.fetch_sub(1, Ordering::Relaxed);
            let made = established(&gateway, &generation, &tls, &mut conn, peer, local, started);
            match made {
                Some((c, e, h)) => {
                    ctx = Some(c);
                    early = e;
                    h3 = Some(h);
                }
                None => {
                    let _ = conn.close(true, 0x101, b"");
                }
            }
        }
        if let (Some(h), Some(c)) = (h3.as_mut(), ctx.as_ref()) {
            if conn.is_established() {
                ids.refresh(&mut conn);
            }
            poll_h3(&mut conn, h, c, &mut streams);
            // Confirmed: later requests are not early data (after reading what arrived with
            // the early flag still up: the requests of 0-RTT packets processed late, when
            // their keys came with the handshake's end, are early data too).
            if let Some(flag) = &early {
                if conn.is_established() && !conn.is_in_early_data() {
                    flag.store(false, Ordering::Release);
                    early = None;
                }
            }
            streams.pump(&mut conn, h);
            if draining && streams.is_empty() && !conn.is_draining() {
                // The last responses may still be unacknowledged (closing now would discard
                // them): the client closes itself after GOAWAY, else the gateway does after a
                // grace of a second and three round trips.
                let rtt = conn.path_stats().next().map_or(Duration::ZERO, |p| p.rtt);
                let grace = Instant::now() + Duration::from_secs(1) + rtt * 3;
                drain_deadline = Some(drain_deadline.map_or(grace, |d| d.min(grace)));
            }
        }
    }
    streams.abandon_all();
    if !counted_handshake {
        handshaking.fetch_sub(1, Ordering::Relaxed);
        if started.elapsed() < server.handshake_timeout.get() {
            let reason = if conn.is_timed_out() { "idle" } else { "tls" };
            m::handshake_failed(reason);
        }
    }
    let stats = conn.stats();
    let labels = ProtocolLabels { protocol: PROTOCOL };
    m::metrics()
        .lost_packets
        .get_or_create(&labels)
        .inc_by(stats.lost as u64);
    if let Some(path) = conn.path_stats().next() {
        m::metrics().rtt.get_or_create(&labels).observe(path.rtt.as_secs_f64());
    }
    m::udp_sent(stats.sent as u64, sent.calls);
    m::paced_waits(sent.paced_waits);
    ids.release();
}

/// Hands a datagram to quiche (errors are quiche's to act on: it closes when it must), and
/// takes the path events it queued (new client addresses, migrations, evicted paths): nothing
/// else reads them, and a client whose address keeps changing would grow the queue for the
/// connection's whole life.
fn recv(conn: &mut quiche::Connection, mut d: Datagram, local: SocketAddr) {
    let info = quiche::RecvInfo {
        from: d.from,
        to: local,
    };
    // An error that made quiche close the connection (per-packet failures it drops by itself,
    // and a closed connection answers `Done`): said once per connection, with the client.
    if let Err(e) = conn.recv(&mut d.data, info) {
        if e != quiche::Error::Done && conn.local_error().is_some() {
            tracing::info!(peer = %d.from, error = ?e, "QUIC connection closed: a received packet broke the protocol");
        }
    }
    while let Some(event) = conn.path_event_next() {
        if let quiche::PathEvent::PeerMigrated(_, peer) = event {
            m::migrated();
            tracing::debug!(%peer, "QUIC connection migrated to a new client address");
        }
    }
}

/// Reads the handshake's outcome, counts it and builds the connection's context and HTTP/3.
fn established(
    gateway: &Arc<Gateway>,
    generation: &Arc<Generation>,
    tls: &tlsgate_tls::TlsService,
    conn: &mut quiche::Connection,
    peer: SocketAddr,
    local: SocketAddr,
    started: Instant,
) -> Option<(Arc<ConnContext>, Option<Arc<AtomicBool>>, quiche::h3::Connection)> {
    let in_early_now = conn.is_in_early_data();
    let ssl = conn.as_mut();
    let info = tlsgate_tls::HandshakeInfo::read(ssl);
    // Accepted 0-RTT whose packets were processed only as the handshake ended counts as early
    // data too (`is_in_early_data` is already false then).
    let in_early = in_early_now || info.early_data;
    let site_idx = tls.site_of(ssl).unwrap_or(0);
    let site = generation.sites.get(site_idx)?;
    let handshake_time = started.elapsed();
    let outcome = if info.resumption == tlsgate_tls::Resumption::Full {
        "full"
    } else {
        "resumed"
    };
    m::metrics()
        .handshakes
        .get_or_create(&HandshakeLabels {
            protocol: PROTOCOL,
            site: site.label,
            outcome,
            early_data: if in_early { "yes" } else { "no" },
            group: info.group,
        })
        .inc();
    if in_early {
        gateway
            .sessions
            .early_data
            .stats
            .accepted
            .fetch_add(1, Ordering::Relaxed);
    }
    let client_identity = tlsgate_tls::ClientIdentity::of(ssl).map(|id| Box::new(ClientIdentity::new(id)));
    let facts = TlsFacts {
        sni: ssl.servername(boring::ssl::NameType::HOST_NAME).map(Arc::from),
        version: info.version,
        cipher: info.cipher,
        resumption: info.resumption.as_str(),
        handshake_ms: millis(handshake_time),
        client_subject: client_identity.as_ref().map(|id| id.subject.clone()),
        ja4: tlsgate_tls::fingerprint::ja4_text(ssl),
        ech: false,
        answer_429: tlsgate_tls::handshake_budget::answer_429(ssl),
    };
    let early = in_early.then(|| Arc::new(AtomicBool::new(true)));
    let ctx = Arc::new(ConnContext {
        gateway: gateway.clone(),
        accepted_with: generation.clone(),
        site: site.name.clone(),
        site_label: site.label,
        tls: facts,
        client_identity,
        peer,
        local,
        protocol: PROTOCOL,
        early: early.clone(),
        activity: Activity::new(),
        upstream_slots: Arc::new(tokio::sync::Semaphore::new(
            generation.config.server.max_upstream_requests_per_connection,
        )),
        tunnels: Default::default(),
        interim: None,
        forward_cache: Default::default(),
        ok_requests: Default::default(),
    });
    let h3_config = super::tls::h3_config(&generation.config.http3).ok()?;
    let h3 = match quiche::h3::Connection::with_transport(conn, &h3_config) {
        Ok(h) => h,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot start HTTP/3 on a QUIC connection");
            return None;
        }
    };
    Some((ctx, early, h3))
}

/// Takes every HTTP/3 event quiche has.
fn poll_h3(
    conn: &mut quiche::Connection,
    h3: &mut quiche::h3::Connection,
    ctx: &Arc<ConnContext>,
    streams: &mut Streams,
) {
    use quiche::h3::Event as E;
    loop {
        match h3.poll(conn) {
            Ok((sid, E::Headers { list, more_frames })) => {
                if ctx.gateway.draining() && streams.last_id.is_some_and(|l| sid > l) {
                    // After GOAWAY: refused, the client may retry it elsewhere.
                    let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, 0x10b);
                    let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, 0x10b);
                    continue;
                }
                streams.on_headers(conn, h3, ctx, sid, list, more_frames);
            }
            Ok((sid, E::Data)) => streams.on_data(conn, h3, sid),
            Ok((sid, E::Finished)) => streams.on_finished(sid),
            Ok((sid, E::Reset(_))) => streams.on_reset(conn, sid),
            Ok((_, E::PriorityUpdate | E::GoAway)) => {}
            Err(quiche::h3::Error::Done) => return,
            Err(e) => {
                tracing::debug!(peer = %ctx.peer, error = %e, "HTTP/3 connection error");
                let _ = conn.close(true, 0x101, b"");
                return;
            }
        }
    }
}

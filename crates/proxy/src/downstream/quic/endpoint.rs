//! One worker's QUIC endpoint for one listener: reads the worker's UDP socket, routes each
//! datagram to its connection by destination connection ID, and answers the datagrams no
//! connection owns without keeping state for them:
//!
//! - unparseable datagrams are dropped and counted (`what="garbage"`): they reach no connection;
//! - datagrams arrive one by one or as GRO trains of equal-size datagrams (`udp`), split here;
//! - a packet carrying another worker's connection ID is forwarded to that worker (`forwarded`):
//!   only where the kernel's steering program (`udp`) could not be attached, since with it the
//!   kernel delivers every packet to the socket its ID names;
//! - during a binary upgrade, a packet of a connection this process does not know goes over the
//!   link to the other process (`link`), which may own it; a draining old process passes new
//!   clients' Initials to its successor instead of shedding them;
//! - a short-header packet for no connection gets a stateless reset (rate-limited), so a client
//!   of a restarted or lost connection stops at once instead of timing out;
//! - an Initial of an unsupported version gets Version Negotiation; one under 1200 bytes is
//!   dropped (RFC 9000 §14.1);
//! - a new client passes the same admission as TCP (access rules by source, `max_connections`,
//!   `max_connections_per_source`), then, by `[http3] retry`, proves its address with a Retry
//!   token ([`super::token`]) before any TLS work; until its address is validated quiche sends
//!   it at most 3x the bytes it sent (the anti-amplification limit).

use super::cid::{self, Secret, CID_LEN};
use super::conn::{self, Accepted, Datagram};
use super::ids::{IdChange, Ids};
use super::link::{Link, Peer};
use super::metrics as m;
use super::surplus::{self, Retiring};
use super::tls::QuicTls;
use super::token;
use super::udp::QuicSocket;
use crate::gateway::Gateway;
use quiche::ConnectionId;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tlsgate_config::RetryMode;
use tokio::sync::mpsc;

/// Datagrams queued for one connection before more are dropped.
const CONN_QUEUE: usize = 128;
/// Stateless resets sent per second at most, per endpoint.
const RESETS_PER_SECOND: u32 = 256;

/// A datagram passed to the worker that owns its connection.
pub struct Forwarded {
    /// Its bytes.
    pub data: Vec<u8>,
    /// Who sent it.
    pub from: SocketAddr,
    /// It came over the link from the other process of a binary upgrade.
    pub from_process: bool,
}

/// How a datagram reached this endpoint: read from the socket, or passed on by another worker
/// of this process or by the other process of an upgrade (never passed back).
#[derive(Debug, Clone, Copy, Default)]
struct Via {
    worker: bool,
    process: bool,
}

/// One worker's endpoint on one address.
pub struct Endpoint {
    /// The socket's place in its group: the worker byte of the connection IDs the kernel sends
    /// here (the worker's index, on the worker's own socket).
    pub worker: usize,
    /// On a surplus socket taken over from an old process with more workers: the worker new
    /// connections are passed to (the endpoint accepts none itself).
    pub relay_to: Option<usize>,
    /// Keeps a surplus socket's forwarding queue open (nothing is forwarded to it).
    pub _unused_queue: Option<mpsc::Sender<Forwarded>>,
    /// On a surplus socket: the signal to close it once the old process has exited.
    pub retiring: Option<Retiring>,
    /// Gateway state.
    pub gateway: Arc<Gateway>,
    /// The worker's socket.
    pub socket: Arc<QuicSocket>,
    /// The secret of reset and Retry tokens.
    pub secret: Secret,
    /// Each worker's forwarding queue for this address.
    pub peers: Arc<Vec<mpsc::Sender<Forwarded>>>,
    /// The link a successor takes over with the socket (binary upgrade).
    pub to_successor: Arc<Link>,
    /// The link to the process this one took the socket over from.
    pub to_predecessor: Option<Arc<Link>>,
}

/// The endpoint's running state.
struct State {
    ep: Endpoint,
    local: SocketAddr,
    conns: HashMap<Vec<u8>, mpsc::Sender<Datagram>>,
    handshaking: Arc<AtomicUsize>,
    /// IDs the connections issued or retired.
    ids: mpsc::UnboundedSender<IdChange>,
    tls: Option<QuicTls>,
    tls_failed: Option<u64>,
    draining: bool,
    resets: (Instant, u32),
    out: Vec<u8>,
    /// Datagrams and receive calls not yet added to the metrics.
    received: (u64, u64),
    /// A frame for the link.
    frame: Vec<u8>,
}

impl Endpoint {
    /// Serves the socket until the gateway has drained; `forwarded` brings datagrams that other
    /// workers received for this worker's connections.
    pub async fn run(self, mut forwarded: mpsc::Receiver<Forwarded>) {
        let local = match self.socket.local_addr() {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "QUIC socket has no address");
                return;
            }
        };
        let (ids, mut ids_rx) = mpsc::unbounded_channel();
        let socket = self.socket.clone();
        let mut shutdown = self.gateway.shutdown_signal();
        let mut s = State {
            ep: self,
            local,
            conns: HashMap::new(),
            handshaking: Arc::new(AtomicUsize::new(0)),
            ids,
            tls: None,
            tls_failed: None,
            draining: false,
            resets: (Instant::now(), 0),
            out: vec![0u8; 1500],
            received: (0, 0),
            frame: Vec::new(),
        };
        let (successor, predecessor) = (s.ep.to_successor.clone(), s.ep.to_predecessor.clone());
        let (mut from_successor, mut from_predecessor) = (Vec::new(), Vec::new());
        let mut retire = s.ep.retiring.as_ref().map(|r| r.signal.clone());
        let mut close_at = None;
        // One GRO train at most: 64 KiB.
        let mut buf = vec![0u8; 65_536];
        let mut cmsg = nix::cmsg_space!(i32);
        loop {
            tokio::select! {
                r = socket.recv(&mut buf, &mut cmsg) => match r {
                    Ok(got) => {
                        s.received.1 += 1;
                        for datagram in buf[..got.len].chunks(got.segment) {
                            s.received.0 += 1;
                            s.on_datagram(datagram.to_vec(), got.from, Via::default());
                        }
                        if s.received.1 >= 64 {
                            s.count_received();
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "QUIC receive failed"),
                },
                Some(f) = forwarded.recv() => s.on_datagram(f.data, f.from, Via { worker: true, process: f.from_process }),
                (from, n) = successor.recv(&mut from_successor) => {
                    s.on_datagram(from_successor[..n].to_vec(), from, Via { worker: false, process: true });
                }
                (from, n) = async {
                    match &predecessor {
                        Some(link) => link.recv(&mut from_predecessor).await,
                        None => std::future::pending().await,
                    }
                } => s.on_datagram(from_predecessor[..n].to_vec(), from, Via { worker: false, process: true }),
                Some(change) = ids_rx.recv() => match change {
                    IdChange::Issued { of, id } => {
                        if let Some(tx) = s.conns.get(&of).cloned() {
                            s.conns.insert(id, tx);
                        }
                    }
                    IdChange::Retired(ids) => {
                        for id in ids {
                            s.conns.remove(&id);
                        }
                        s.count_received();
                    }
                },
                r = shutdown.changed(), if !s.draining => {
                    let _ = r;
                    s.draining = true;
                }
                // A surplus socket: nothing is steered here any more; read what was queued.
                r = async {
                    match &mut retire {
                        Some(rx) => rx.wait_for(|closing| *closing).await.map(|_| ()),
                        None => std::future::pending().await,
                    }
                }, if close_at.is_none() => match r {
                    Ok(()) => close_at = Some(Box::pin(tokio::time::sleep(surplus::GRACE))),
                    Err(_) => retire = None,
                },
                () = async {
                    match &mut close_at {
                        Some(t) => t.await,
                        None => std::future::pending().await,
                    }
                } => {
                    s.count_received();
                    // The socket closes before the retiring side hears of it.
                    let retiring = s.ep.retiring.take();
                    drop(s);
                    drop(socket);
                    drop(retiring);
                    return;
                }
            }
            if s.draining && s.conns.is_empty() {
                s.count_received();
                return;
            }
        }
    }
}

impl State {
    /// The link to pass a datagram of no connection here over: a new connection's only to a
    /// successor; another to the predecessor while it runs, else to a successor.
    fn link(&self, initial: bool) -> Option<Arc<Link>> {
        let predecessor = self.ep.to_predecessor.as_ref().filter(|l| !initial && l.active());
        predecessor
            .or(Some(&self.ep.to_successor).filter(|l| l.active()))
            .cloned()
    }

    /// Adds the datagrams received since the last call to the metrics.
    fn count_received(&mut self) {
        let (datagrams, calls) = std::mem::take(&mut self.received);
        if calls > 0 {
            m::udp_received(datagrams, calls);
        }
    }

    fn on_datagram(&mut self, mut data: Vec<u8>, from: SocketAddr, via: Via) {
        let (ty, version, dcid, scid, token) = match quiche::Header::from_slice(&mut data, CID_LEN) {
            Ok(h) => (h.ty, h.version, h.dcid.to_vec(), h.scid.to_vec(), h.token),
            Err(_) => {
                m::datagram("garbage");
                return;
            }
        };
        if let Some(tx) = self.conns.get(&dcid) {
            match tx.try_send(Datagram { data, from }) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => m::datagram("dropped_full"),
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.conns.remove(&dcid);
                }
            }
            return;
        }
        if ty != quiche::Type::Initial && !via.worker {
            if let Some(owner) = cid::owner(&dcid).filter(|w| *w != self.ep.worker) {
                if let Some(peer) = self.ep.peers.get(owner) {
                    let f = Forwarded {
                        data,
                        from,
                        from_process: via.process,
                    };
                    if peer.try_send(f).is_ok() {
                        m::datagram("forwarded");
                    }
                    return;
                }
            }
        }
        // Not this process's: the other process of an upgrade may own it (or, draining, take
        // the new connection).
        if !via.process && (ty != quiche::Type::Initial || self.draining) {
            if let Some(link) = self.link(ty == quiche::Type::Initial) {
                if link.pass(from, &data, &mut self.frame) {
                    m::datagram(match link.peer() {
                        Peer::Successor => "to_successor",
                        Peer::Predecessor => "to_predecessor",
                    });
                    return;
                }
            }
        }
        match ty {
            quiche::Type::Initial => {}
            quiche::Type::Short => {
                self.reset(&dcid, data.len(), from);
                return;
            }
            _ => {
                m::datagram("unknown_connection");
                return;
            }
        }
        if !quiche::version_is_supported(version) {
            let scid = ConnectionId::from_ref(&scid);
            let dcid = ConnectionId::from_ref(&dcid);
            if let Ok(n) = quiche::negotiate_version(&scid, &dcid, &mut self.out) {
                let _ = self.ep.socket.try_send_to(&self.out[..n], from);
            }
            m::datagram("version_negotiation");
            return;
        }
        if data.len() < 1200 {
            m::datagram("short_initial");
            return;
        }
        if self.draining {
            m::datagram("shed");
            return;
        }
        if let Some(worker) = self.ep.relay_to {
            // A surplus socket: its worker's own socket accepts (its IDs lead the kernel there).
            let f = Forwarded {
                data,
                from,
                from_process: via.process,
            };
            let sent = self.ep.peers.get(worker).is_some_and(|p| p.try_send(f).is_ok());
            m::datagram(if sent { "relayed" } else { "dropped_full" });
            return;
        }
        self.accept(data, from, version, dcid, scid, token);
    }

    /// Sends a stateless reset for `dcid` (at most [`RESETS_PER_SECOND`]).
    fn reset(&mut self, dcid: &[u8], len: usize, from: SocketAddr) {
        let now = Instant::now();
        if now.duration_since(self.resets.0).as_secs() >= 1 {
            self.resets = (now, 0);
        }
        if self.resets.1 >= RESETS_PER_SECOND {
            m::datagram("unknown_connection");
            return;
        }
        match cid::stateless_reset(&self.ep.secret, dcid, len) {
            Some(reset) => {
                self.resets.1 += 1;
                let _ = self.ep.socket.try_send_to(&reset, from);
                m::datagram("stateless_reset");
            }
            None => m::datagram("unknown_connection"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn accept(
        &mut self,
        data: Vec<u8>,
        from: SocketAddr,
        version: u32,
        dcid: Vec<u8>,
        scid: Vec<u8>,
        token: Option<Vec<u8>>,
    ) {
        let gateway = self.ep.gateway.clone();
        let generation = gateway.current();
        let server = &generation.config.server;
        if generation.tls.fingerprints().rules().refuses_at_accept(from.ip()) {
            m::datagram("refused");
            return;
        }
        let h3 = &generation.config.http3;
        let (new_scid, odcid) = match token.filter(|t| !t.is_empty()) {
            Some(token) => match token::validate(&self.ep.secret, &token, from, &dcid) {
                Ok(odcid) => (
                    ConnectionId::from_vec(dcid.clone()),
                    Some(ConnectionId::from_vec(odcid)),
                ),
                Err(e) => {
                    tracing::debug!(%from, error = %e, "QUIC Initial with a bad token dropped");
                    m::datagram("retry_token_invalid");
                    return;
                }
            },
            None => {
                let retry = match h3.retry {
                    RetryMode::Always => true,
                    RetryMode::UnderLoad => self.handshaking.load(Ordering::Relaxed) >= h3.retry_threshold,
                    RetryMode::Never => false,
                };
                let new_scid = cid::new_cid(self.ep.worker);
                if retry {
                    let token = token::mint(&self.ep.secret, from, &dcid, &new_scid);
                    let sent = quiche::retry(
                        &ConnectionId::from_ref(&scid),
                        &ConnectionId::from_ref(&dcid),
                        &new_scid,
                        &token,
                        version,
                        &mut self.out,
                    );
                    if let Ok(n) = sent {
                        let _ = self.ep.socket.try_send_to(&self.out[..n], from);
                        m::datagram("retry_sent");
                    }
                    return;
                }
                (new_scid, None)
            }
        };
        let Some(guard) = gateway.admit(server.max_connections, server.max_connections_per_source, from.ip()) else {
            m::datagram("shed");
            return;
        };
        if self.tls.as_ref().is_none_or(|t| t.generation.id != generation.id) && self.tls_failed != Some(generation.id)
        {
            match QuicTls::build(&gateway) {
                Ok(t) => self.tls = Some(t),
                Err(e) => {
                    tracing::error!(error = %e, "cannot build the QUIC TLS settings; keeping the previous ones");
                    self.tls_failed = Some(generation.id);
                }
            }
        }
        let Some(tls) = self.tls.as_mut() else {
            return;
        };
        tls.config
            .set_stateless_reset_token(Some(self.ep.secret.reset_token(&new_scid)));
        let conn = match quiche::accept(&new_scid, odcid.as_ref(), self.local, from, &mut tls.config) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(%from, error = %e, "QUIC accept failed");
                return;
            }
        };
        let (tx, rx) = mpsc::channel(CONN_QUEUE);
        let mut ids = vec![new_scid.to_vec()];
        if odcid.is_none() {
            // The client keeps addressing its Initial and 0-RTT packets to the ID it chose.
            ids.push(dcid);
        }
        for id in &ids {
            self.conns.insert(id.clone(), tx.clone());
        }
        let _ = tx.try_send(Datagram { data, from });
        self.handshaking.fetch_add(1, Ordering::Relaxed);
        let accepted = Accepted {
            conn,
            rx,
            socket: self.ep.socket.clone(),
            local: self.local,
            peer: from,
            generation: tls.generation.clone(),
            tls: tls.service.clone(),
            guard,
            handshaking: self.handshaking.clone(),
            ids: Ids::new(ids, self.ep.worker, self.ep.secret.clone(), self.ids.clone()),
        };
        tokio::spawn(conn::run(gateway, accepted));
    }
}

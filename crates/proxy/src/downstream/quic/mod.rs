//! HTTP/3 over QUIC beside the TCP listeners, on the same BoringSSL contexts (docs/HTTP3.md).
//!
//! quiche (Cloudflare's QUIC and HTTP/3 state machines, over the `boring` crate's BoringSSL) is
//! driven here on tokio UDP sockets, one per worker and listener ([`socket`]) with GSO, GRO and
//! a reuseport program steering datagrams to their connection's worker ([`udp`]); each worker
//! runs an [`endpoint`] that routes datagrams by connection ID ([`cid`]: the first byte names
//! the owning worker), validates addresses with Retry ([`token`]), sends stateless resets, and
//! accepts connections with the generation's [`tls`] settings; each connection offers its client
//! spare IDs to move to a new path with ([`ids`]). Each connection is a task
//! ([`conn`], its packets out in GSO batches: [`send`]) whose HTTP/3 requests ([`streams`],
//! bodies in [`body`]) go to the same proxy layer as HTTP/1.1 and HTTP/2
//! (`request::service::handle`). TCP responses advertise it with `Alt-Svc` ([`alt_svc`]). A
//! binary upgrade's two processes pass each other datagrams over a [`link`]; sockets taken over
//! beyond the workers are closed once the old process has exited ([`surplus`]). Counted in [`metrics`] (protocol="h3"); failures in [`error`].

pub mod alt_svc;
pub mod body;
pub mod cid;
pub mod conn;
pub mod endpoint;
pub mod error;
pub mod ids;
pub mod link;
pub mod metrics;
pub mod send;
pub mod socket;
pub mod streams;
pub mod surplus;
pub mod tls;
pub mod token;
pub mod udp;

use crate::gateway::Gateway;
use endpoint::{Endpoint, Forwarded};
use error::QuicError;
use link::{Link, Peer};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use tlsgate_config::Config;
use tlsgate_wire::handoff::SocketKind;
use tokio::sync::mpsc;

/// Datagrams queued for forwarding to another worker before more are dropped.
const FORWARD_QUEUE: usize = 1024;

/// One worker's share of the QUIC sockets, bound before the workers start.
pub struct QuicWorker {
    endpoints: Vec<WorkerSocket>,
}

struct WorkerSocket {
    socket: std::net::UdpSocket,
    /// Its place in the address's SO_REUSEPORT group: the worker byte of the connection IDs the
    /// steering program sends to it (the worker's own index, except on a surplus socket).
    index: usize,
    /// A surplus socket (taken over from an old process with more workers) passes new
    /// connections to this worker's own socket: it never accepts one itself.
    relay_to: Option<usize>,
    /// Keeps a surplus socket's (never used) forwarding queue open.
    _unused_queue: Option<mpsc::Sender<Forwarded>>,
    /// A surplus socket's signal to close once the old process has exited.
    retiring: Option<surplus::Retiring>,
    peers: Arc<Vec<mpsc::Sender<Forwarded>>>,
    forwarded: mpsc::Receiver<Forwarded>,
    secret: cid::Secret,
    /// This process's end of the link a successor would take with the socket.
    to_successor: UnixDatagram,
    /// The link to the process this one took the socket over from.
    to_predecessor: Option<UnixDatagram>,
}

/// A QUIC socket taken over from the running gateway in a binary upgrade, with its link.
pub struct Adopted {
    /// Its bound address.
    pub addr: SocketAddr,
    /// The socket (the same one the old process reads).
    pub socket: std::net::UdpSocket,
    /// The successor's end of the socket's link to the old process.
    pub link: UnixDatagram,
}

/// The QUIC sockets bound (or taken over) for the workers.
pub struct Bound {
    /// Each worker's share.
    pub workers: Vec<QuicWorker>,
    /// What a successor would take over: per socket, in each group's order, a duplicate of the
    /// socket and the other end of its link (the workers' sockets; the surplus' are in `surplus`).
    pub handed: Vec<(SocketKind, OwnedFd)>,
    /// Sockets taken over beyond the workers (an upgrade to fewer workers), to close once the old
    /// process has exited ([`surplus::Surplus::retire`]).
    pub surplus: Option<surplus::Surplus>,
    /// The reset and Retry secret, for a successor (none when QUIC is off).
    pub secret: Option<[u8; 32]>,
}

/// Binds the QUIC sockets of `config` for `workers` workers (an empty share each when HTTP/3 is
/// off). A successor passes the sockets it took over (`adopted`, in each group's order): an
/// address is served with them, each with its link to the old process, and `inherited` is the
/// old process's reset and Retry secret (used unless a cluster secret gives one).
pub fn bind(
    config: &Config,
    workers: usize,
    adopted: &mut Vec<Adopted>,
    inherited: Option<[u8; 32]>,
) -> Result<Bound, QuicError> {
    let workers = workers.max(1);
    let mut out: Vec<QuicWorker> = (0..workers).map(|_| QuicWorker { endpoints: Vec::new() }).collect();
    let mut handed = Vec::new();
    let mut surplus = surplus::Builder::new();
    let addresses = config.quic_addresses();
    let secret = match config.cluster.as_ref().and_then(|c| c.secret_files.first()) {
        Some(path) if !addresses.is_empty() => {
            let cluster =
                tlsgate_tls::secret::ClusterSecret::load(path).map_err(|e| QuicError::Secret(e.to_string()))?;
            cid::Secret::from_cluster(&cluster)
        }
        _ => inherited.map_or_else(cid::Secret::random, cid::Secret::from_bytes),
    };
    let handed_secret = (!addresses.is_empty()).then(|| *secret.bytes());
    for addr in addresses {
        let (taken, kept): (Vec<Adopted>, Vec<Adopted>) =
            std::mem::take(adopted).into_iter().partition(|a| a.addr == addr);
        *adopted = kept;
        let group = group(addr, workers, taken)?;
        if group.len() > 1 {
            if let Err(e) = udp::steer_by_connection_id(&group[0].0, cid::CID_LEN as u8) {
                // Without it, a packet that reaches another worker is forwarded to its owner.
                tracing::warn!(%addr, error = %e, "cannot attach the QUIC steering program; forwarding between workers instead");
            }
        }
        if group.len() > workers {
            let member = group[0]
                .0
                .try_clone()
                .map_err(|source| QuicError::Bind { addr, source })?;
            surplus.group(addr, member, workers, group.len() - workers);
        }
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..workers).map(|_| mpsc::channel(FORWARD_QUEUE)).unzip();
        let peers = Arc::new(txs);
        let mut rxs = rxs.into_iter();
        for (index, (socket, to_predecessor)) in group.into_iter().enumerate() {
            let fail = |source| QuicError::Bind { addr, source };
            let (to_successor, theirs) = UnixDatagram::pair().map_err(fail)?;
            let dup = OwnedFd::from(socket.try_clone().map_err(fail)?);
            if index < workers {
                handed.push((SocketKind::Quic, dup));
                handed.push((SocketKind::QuicLink, OwnedFd::from(theirs)));
            } else {
                surplus.hand(SocketKind::Quic, dup);
                surplus.hand(SocketKind::QuicLink, OwnedFd::from(theirs));
            }
            let worker = index % workers;
            let (forwarded, relay_to, unused_queue, retiring) = match rxs.next() {
                Some(rx) => (rx, None, None, None),
                None => {
                    let (tx, rx) = mpsc::channel(1);
                    (rx, Some(worker), Some(tx), Some(surplus.retiring()))
                }
            };
            out[worker].endpoints.push(WorkerSocket {
                socket,
                index,
                relay_to,
                _unused_queue: unused_queue,
                retiring,
                peers: peers.clone(),
                forwarded,
                secret: secret.clone(),
                to_successor,
                to_predecessor,
            });
        }
    }
    Ok(Bound {
        workers: out,
        handed,
        surplus: surplus.build(),
        secret: handed_secret,
    })
}

/// The SO_REUSEPORT group of `addr` for `workers` workers, in the group's order, each socket
/// with its link to the old process when it was taken over from one. Taken-over sockets all
/// stay while the old process runs (closing one would move the group's last socket into its
/// place, and the steering program would then send that socket's connections to the wrong
/// process): with fewer workers than the old process had, the surplus ones are read too (their
/// connections are the old process's; new ones are passed to a worker) until the old process
/// has exited ([`surplus`]), with more, new sockets join after them.
fn group(
    addr: SocketAddr,
    workers: usize,
    taken: Vec<Adopted>,
) -> Result<Vec<(std::net::UdpSocket, Option<UnixDatagram>)>, QuicError> {
    if taken.is_empty() {
        return Ok(socket::bind_workers(addr, workers)?
            .into_iter()
            .map(|s| (s, None))
            .collect());
    }
    if taken.len() != workers {
        tracing::info!(%addr, old = taken.len(), new = workers, "upgrade: the old process served QUIC on {addr} with another number of workers; taking its sockets over");
    }
    let mut group: Vec<_> = taken.into_iter().map(|a| (a.socket, Some(a.link))).collect();
    if group.len() < workers {
        let members: Vec<_> = group.iter().map(|(s, _)| s).collect();
        let joined = socket::join(&members, workers - group.len())?;
        group.extend(joined.into_iter().map(|s| (s, None)));
    }
    Ok(group)
}

impl QuicWorker {
    /// Starts this worker's endpoints (call inside the worker's runtime).
    pub fn spawn(self, gateway: Arc<Gateway>) {
        for e in self.endpoints {
            let socket = match udp::QuicSocket::new(e.socket) {
                Ok(s) => Arc::new(s),
                Err(err) => {
                    tracing::error!(error = %err, "cannot register a QUIC socket");
                    continue;
                }
            };
            let links = Link::new(e.to_successor, Peer::Successor).and_then(|s| {
                let p = e.to_predecessor.map(|p| Link::new(p, Peer::Predecessor)).transpose()?;
                Ok((s, p))
            });
            let (to_successor, to_predecessor) = match links {
                Ok(l) => l,
                Err(err) => {
                    tracing::error!(error = %err, "cannot register a QUIC link socket");
                    continue;
                }
            };
            let endpoint = Endpoint {
                worker: e.index,
                relay_to: e.relay_to,
                _unused_queue: e._unused_queue,
                retiring: e.retiring,
                gateway: gateway.clone(),
                socket,
                secret: e.secret,
                peers: e.peers,
                to_successor: Arc::new(to_successor),
                to_predecessor: to_predecessor.map(Arc::new),
            };
            tokio::spawn(endpoint.run(e.forwarded));
        }
    }
}

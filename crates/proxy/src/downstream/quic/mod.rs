//! HTTP/3 over QUIC beside the TCP listeners, on the same BoringSSL contexts (docs/HTTP3.md).
//!
//! quiche (Cloudflare's QUIC and HTTP/3 state machines, over the `boring` crate's BoringSSL) is
//! driven here on tokio UDP sockets, one per worker and listener ([`socket`]) with GSO, GRO and
//! a reuseport program steering datagrams to their connection's worker ([`udp`]); each worker
//! runs an [`endpoint`] that routes datagrams by connection ID ([`cid`]: the first byte names
//! the owning worker), validates addresses with Retry ([`token`]), sends stateless resets, and
//! accepts connections with the generation's [`tls`] settings. Each connection is a task
//! ([`conn`], its packets out in GSO batches: [`send`]) whose HTTP/3 requests ([`streams`],
//! bodies in [`body`]) go to the same proxy layer as HTTP/1.1 and HTTP/2
//! (`request::service::handle`). TCP responses advertise it with `Alt-Svc` ([`alt_svc`]). Counted in [`metrics`] (protocol="h3"); failures in [`error`].

pub mod alt_svc;
pub mod body;
pub mod cid;
pub mod conn;
pub mod endpoint;
pub mod error;
pub mod metrics;
pub mod send;
pub mod socket;
pub mod streams;
pub mod tls;
pub mod token;
pub mod udp;

use crate::gateway::Gateway;
use endpoint::{Endpoint, Forwarded};
use error::QuicError;
use std::net::SocketAddr;
use std::sync::Arc;
use tlsgate_config::{Config, ListenerKind};
use tokio::sync::mpsc;

/// Datagrams queued for forwarding to another worker before more are dropped.
const FORWARD_QUEUE: usize = 1024;

/// One worker's share of the QUIC sockets, bound before the workers start.
pub struct QuicWorker {
    worker: usize,
    endpoints: Vec<WorkerSocket>,
}

struct WorkerSocket {
    socket: std::net::UdpSocket,
    peers: Arc<Vec<mpsc::Sender<Forwarded>>>,
    forwarded: mpsc::Receiver<Forwarded>,
    secret: cid::Secret,
}

/// The UDP addresses QUIC serves under `config` (none unless `[http3] enabled`).
pub fn addresses(config: &Config) -> Vec<SocketAddr> {
    let h3 = &config.http3;
    config
        .listeners
        .iter()
        .filter(|l| l.kind == ListenerKind::Https && h3.serves(l.listen))
        .map(|l| h3.udp_addr(l.listen))
        .collect()
}

/// Binds the QUIC sockets of `config` for `workers` workers (an empty share each when HTTP/3 is
/// off).
pub fn bind(config: &Config, workers: usize) -> Result<Vec<QuicWorker>, QuicError> {
    let workers = workers.max(1);
    let mut out: Vec<QuicWorker> = (0..workers)
        .map(|worker| QuicWorker {
            worker,
            endpoints: Vec::new(),
        })
        .collect();
    let addresses = addresses(config);
    let secret = match config.cluster.as_ref().and_then(|c| c.secret_files.first()) {
        Some(path) if !addresses.is_empty() => {
            let cluster =
                tlsgate_tls::secret::ClusterSecret::load(path).map_err(|e| QuicError::Secret(e.to_string()))?;
            cid::Secret::from_cluster(&cluster)
        }
        _ => cid::Secret::random(),
    };
    for addr in addresses {
        let sockets = socket::bind_workers(addr, workers)?;
        if workers > 1 {
            if let Err(e) = udp::steer_by_connection_id(&sockets[0], cid::CID_LEN as u8) {
                // Without it, a packet that reaches another worker is forwarded to its owner.
                tracing::warn!(%addr, error = %e, "cannot attach the QUIC steering program; forwarding between workers instead");
            }
        }
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..workers).map(|_| mpsc::channel(FORWARD_QUEUE)).unzip();
        let peers = Arc::new(txs);
        for ((w, socket), forwarded) in out.iter_mut().zip(sockets).zip(rxs) {
            w.endpoints.push(WorkerSocket {
                socket,
                peers: peers.clone(),
                forwarded,
                secret: secret.clone(),
            });
        }
    }
    Ok(out)
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
            let endpoint = Endpoint {
                worker: self.worker,
                gateway: gateway.clone(),
                socket,
                secret: e.secret,
                peers: e.peers,
            };
            tokio::spawn(endpoint.run(e.forwarded));
        }
    }
}

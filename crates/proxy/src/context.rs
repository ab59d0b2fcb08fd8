//! What every request of one client connection shares: the gateway, the generation it was
//! accepted with, its site, its TLS facts, its verified client certificate, the client's address,
//! what the connection's watchdog reads, and the connection's share of origin requests.

use crate::downstream::io::Activity;
use crate::facts::TlsFacts;
use crate::gateway::{Gateway, Generation};
use crate::identity::ClientIdentity;
use crate::interim::InterimQueue;
use crate::upstream::tunnel::TunnelSlot;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Marks a request that arrived in 0-RTT early data, set where its head was read (HTTP/3: the
/// connection's task, which may confirm the handshake before the request's own task runs).
#[derive(Debug, Clone, Copy)]
pub struct InEarlyData;

/// What a connection's requests share.
pub struct ConnContext {
    /// Gateway state.
    pub gateway: Arc<Gateway>,
    /// Generation the connection was accepted with (fallback if its site disappears on reload).
    pub accepted_with: Arc<Generation>,
    /// Name of the site selected by SNI.
    pub site: Arc<str>,
    /// The same name as a metric label.
    pub site_label: &'static str,
    /// What the handshake established, for the access log.
    pub tls: TlsFacts,
    /// The verified client certificate (`[site.client_auth]`), read once after the handshake;
    /// forwarded in the site's identity headers (boxed: one pointer when there is none).
    pub client_identity: Option<Box<ClientIdentity>>,
    /// Client address.
    pub peer: SocketAddr,
    /// The address the client connected to (the listener's, or the one a PROXY header named).
    pub local: SocketAddr,
    /// `h1`, `h2` or `h3`.
    pub protocol: &'static str,
    /// True while the connection's handshake is unconfirmed after accepting 0-RTT early data.
    pub early: Option<Arc<AtomicBool>>,
    /// Requests in flight and the client's progress, for the connection's timeouts.
    pub activity: Arc<Activity>,
    /// Origin requests this connection may have at once (`max_upstream_requests_per_connection`).
    pub upstream_slots: Arc<tokio::sync::Semaphore>,
    /// An HTTP/1.1 upgrade's origin side, left for the connection's task to copy to.
    pub tunnels: TunnelSlot,
    /// HTTP/1.1: interim responses (103 Early Hints) waiting to be written below hyper.
    pub interim: Option<Arc<InterimQueue>>,
    /// The forwarding header values of this connection's requests, built once.
    pub forward_cache: crate::upstream::forwarding::ForwardCache,
    /// `requests_total{site,status="200",protocol}` of this connection, looked up once.
    pub ok_requests: std::sync::OnceLock<prometheus_client::metrics::counter::Counter>,
}

impl ConnContext {
    /// Whether the connection is still in 0-RTT early data (handshake unconfirmed).
    pub fn in_early_data(&self) -> bool {
        self.early.as_ref().is_some_and(|f| f.load(Ordering::Acquire))
    }
}

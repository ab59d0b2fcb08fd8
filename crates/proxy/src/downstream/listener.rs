//! Listening sockets and accept loops.
//!
//! Each worker thread binds its own socket per listener with SO_REUSEPORT, so the kernel spreads
//! connections across workers without a shared accept lock (nginx's `reuseport`). Accepted
//! sockets get TCP_NODELAY. Past `max_connections`, new connections are closed at once (shed).
//! With `tcp_fastopen`, each socket also accepts data in the SYN from clients holding a TFO
//! cookie; connections that used it are counted (`tlsgate_tfo_accepted_total`).
//! On a `proxy_protocol` listener only sources in `proxy_protocol_from` are served, and each
//! connection's PROXY protocol header is read first (`proxy_header`): its client address is the
//! connection's peer from then on, and the one the per-source limit counts.
//! `[[access_rule]]`s by source network refuse a connection here, before any TLS work (tlsgate-tls
//! `access_rules`; on a `proxy_protocol` listener, once the header has named the client).

use crate::downstream::proxy_header::{self, ProxyProtocolError};
use crate::gateway::{ConnGuard, Gateway};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::{ListenerConfig, ListenerKind};
use tlsgate_error::log_limit::LogLimit;

/// The kernel's `net.ipv4.tcp_fastopen` (per network namespace), if readable.
pub fn tfo_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Says once at start when listeners use TCP Fast Open but the kernel will not accept SYN data
/// on servers (bit 2 of `net.ipv4.tcp_fastopen`; a stock kernel has 1, client only): the socket
/// option is then set but has no effect. A listener that sets `tcp_fastopen` itself asked for it,
/// so that is a WARN; one that left the default (on when available) gets one INFO line.
pub fn warn_if_tfo_disabled(listeners: &[ListenerConfig]) {
    let with = |explicit: bool| -> Vec<String> {
        listeners
            .iter()
            .filter(|l| l.tfo_queue() > 0 && l.tcp_fastopen.is_some() == explicit)
            .map(|l| l.listen.to_string())
            .collect()
    };
    let (asked, defaulted) = (with(true), with(false));
    if asked.is_empty() && defaulted.is_empty() {
        return;
    }
    match tfo_sysctl() {
        Some(v) if v & 2 != 0 => {}
        Some(v) => {
            if !asked.is_empty() {
                tracing::warn!(
                    listeners = ?asked,
                    "tcp_fastopen is configured but sysctl net.ipv4.tcp_fastopen = {v} does not enable server \
                     TFO (bit 2): connections will not use it; set it to 3 (sysctl -w net.ipv4.tcp_fastopen=3) \
                     or set tcp_fastopen = 0"
                );
            }
            if !defaulted.is_empty() {
                tracing::info!(
                    listeners = ?defaulted,
                    "TCP Fast Open is on when available and sysctl net.ipv4.tcp_fastopen = {v} does not \
                     enable it for servers; sysctl -w net.ipv4.tcp_fastopen=3 turns it on"
                );
            }
        }
        None => tracing::debug!("net.ipv4.tcp_fastopen unreadable; cannot tell whether TFO is enabled"),
    }
}

/// Why a listening address could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another socket (another process: tlsgate, nginx, anything) already listens there.
    #[error("cannot listen on {addr}: address already in use (another process serves it)")]
    InUse {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Any other failure (no such local address, permission denied, ...).
    #[error("cannot listen on {addr}: {error}")]
    Io {
        /// The address asked for.
        addr: SocketAddr,
        /// What the kernel said.
        error: std::io::Error,
    },
}

impl ListenError {
    /// Classifies a bind/listen failure on `addr`.
    pub fn new(addr: SocketAddr, error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::AddrInUse {
            Self::InUse { addr }
        } else {
            Self::Io { addr, error }
        }
    }
}

/// Binds `count` listening sockets for one listener, one per worker, sharing the address
/// through one SO_REUSEPORT group that no other process was in when it was made.
///
/// SO_REUSEPORT lets *any* process of the same user bind the port too, and the kernel then
/// hands part of the connections to it: a second `tlsgate serve` with the same configuration
/// used to start silently and take traffic. So the first socket is bound and put in the listen
/// state *without* SO_REUSEPORT (SO_REUSEADDR only, so TIME_WAIT leftovers of a previous run do
/// not matter): that fails with EADDRINUSE if anything listens on the address (reuseport or not,
/// a wildcard address included), and while it listens without the option no other socket can be
/// bound there. Only then is SO_REUSEPORT switched on for it, and the other workers' sockets
/// join its group (Linux creates the group when the second socket listens).
///
/// Alternatives weighed: a probe bind without SO_REUSEPORT that is closed before the workers
/// bind leaves a window in which two gateways starting together both pass the probe and share
/// the port; a check after binding (counting the port's listening sockets) would already have
/// let the intruder take connections, which are reset when it exits; a reuseport BPF program
/// could only starve an intruder, which would still start "successfully". Here two gateways
/// starting together cannot both succeed: of two sockets bound without SO_REUSEPORT, only one
/// can listen. What no scheme can prevent: a program of the same user that sets SO_REUSEPORT and
/// never checks (an older tlsgate, nginx with `reuseport`) joining the group later; with one
/// worker the option is never switched on, so not even that can happen.
pub fn bind_workers(config: &ListenerConfig, count: usize) -> Result<Vec<std::net::TcpListener>, ListenError> {
    let addr = config.listen;
    let fail = |e| ListenError::new(addr, e);
    let first = bind_with(addr, config.backlog, false).map_err(fail)?;
    if count > 1 {
        socket2::SockRef::from(&first).set_reuse_port(true).map_err(fail)?;
    }
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(bind(addr, config.backlog).map_err(fail)?);
    }
    if config.tfo_queue() > 0 {
        for socket in &sockets {
            tlsgate_tls::set_tcp_fastopen(socket.as_fd(), config.tfo_queue()).map_err(fail)?;
        }
    }
    Ok(sockets)
}

/// Takes over one listener's sockets from the process being upgraded, for `count` workers:
/// `inherited` is what that process listened with (one socket per worker it had, all in one
/// SO_REUSEPORT group, or a single socket without the option). Every inherited socket stays
/// open and accepted from, since closing one would reset the connections waiting in its queue:
/// a surplus is shared out among the workers (some accept from two sockets until the next
/// restart), and workers beyond them get new sockets that join the group. Each socket takes
/// this configuration's backlog (listen(2) again) and TCP Fast Open queue; what cannot change
/// on a bound socket (its address, IPV6_V6ONLY) is the old process's, which had the same address.
pub fn adopt_workers(
    config: &ListenerConfig,
    inherited: Vec<std::net::TcpListener>,
    count: usize,
) -> Result<Vec<Vec<std::net::TcpListener>>, ListenError> {
    let addr = config.listen;
    let fail = |e| ListenError::new(addr, e);
    let count = count.max(1);
    let have = inherited.len();
    let mut per_worker: Vec<Vec<std::net::TcpListener>> = (0..count).map(|_| Vec::new()).collect();
    for (i, socket) in inherited.into_iter().enumerate() {
        let s = socket2::SockRef::from(&socket);
        if have < count {
            // New sockets join only a group whose members have the option (a one-worker
            // process never set it).
            s.set_reuse_port(true).map_err(fail)?;
        }
        s.listen(i32::try_from(config.backlog).unwrap_or(i32::MAX))
            .map_err(fail)?;
        socket.set_nonblocking(true).map_err(fail)?;
        per_worker[i % count].push(socket);
    }
    for sockets in per_worker.iter_mut().skip(have) {
        sockets.push(bind(addr, config.backlog).map_err(fail)?);
    }
    if config.tfo_queue() > 0 {
        for socket in per_worker.iter().flatten() {
            tlsgate_tls::set_tcp_fastopen(socket.as_fd(), config.tfo_queue()).map_err(fail)?;
        }
    }
    Ok(per_worker)
}

/// Whether an accepted connection can have come with TCP Fast Open data: the listener asked for
/// TFO and the kernel accepts SYN data on servers (bit 2 of `net.ipv4.tcp_fastopen`). Where it
/// does not (a stock kernel), no connection pays a `TCP_INFO` read to find out. The sysctl is
/// read again every [`TFO_RECHECK`], so turning it on while the gateway runs is seen.
struct TfoWatch {
    listener: bool,
    kernel: bool,
    checked: Option<std::time::Instant>,
}

/// How often [`TfoWatch`] reads the sysctl again.
const TFO_RECHECK: Duration = Duration::from_secs(5);

impl TfoWatch {
    fn new(listener: bool) -> Self {
        Self {
            listener,
            kernel: false,
            checked: None,
        }
    }

    fn active(&mut self) -> bool {
        if !self.listener {
            return false;
        }
        let now = std::time::Instant::now();
        if self.checked.is_none_or(|t| now.duration_since(t) >= TFO_RECHECK) {
            self.kernel = tfo_sysctl().is_some_and(|v| v & 2 != 0);
            self.checked = Some(now);
        }
        self.kernel
    }
}

/// Binds a listening socket with SO_REUSEADDR and SO_REUSEPORT.
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    bind_with(addr, backlog, true)
}

/// Binds a listening socket with SO_REUSEADDR, and SO_REUSEPORT when `reuse_port`.
fn bind_with(addr: SocketAddr, backlog: u32, reuse_port: bool) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(reuse_port)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// Accepts connections on one socket until the gateway shuts down.
pub async fn accept_loop(gateway: Arc<Gateway>, listener: std::net::TcpListener, config: ListenerConfig) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(addr = %config.listen, error = %e, "cannot register listener");
            return;
        }
    };
    let mut shutdown = gateway.shutdown_signal();
    let label = tlsgate_admin::metrics::intern(&config.listen.to_string());
    // Bound to one address (not a wildcard), every accepted socket's local address is the
    // listener's: no getsockname per connection for it.
    let fixed_local = listener.local_addr().ok().filter(|a| !a.ip().is_unspecified());
    let mut tfo_watch = TfoWatch::new(config.tfo_queue() > 0);
    let config = Arc::new(config);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning; a line a second at
                // most (out of descriptors, every attempt fails: 100 lines a second a worker).
                static ACCEPT_FAILED_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
                if let Some(suppressed) = ACCEPT_FAILED_LOG.allow() {
                    tracing::warn!(addr = %config.listen, error = %e, suppressed, "accept failed");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (limit, per_source, refused) = {
            let g = gateway.current();
            (
                g.config.server.max_connections,
                g.config.server.max_connections_per_source,
                // `[[access_rule]]` by source, before any work (behind a balancer: after its header).
                !config.proxy_protocol && g.tls.fingerprints().rules().refuses_at_accept(peer.ip()),
            )
        };
        if refused {
            drop(tcp);
            continue;
        }
        if config.proxy_protocol && !config.proxy_protocol_trusts(peer.ip()) {
            let refused = ProxyProtocolError::UntrustedSource(peer.ip());
            proxy_header::refused(&gateway.metrics, peer, &refused);
            drop(tcp);
            continue;
        }
        // Behind a balancer the socket's source is the balancer: the client's source is counted
        // once the header names it.
        let socket_per_source = if config.proxy_protocol { 0 } else { per_source };
        let Some(guard) = gateway.admit(limit, socket_per_source, peer.ip()) else {
            tracing::debug!(%peer, limit, per_source, "connection limit reached; connection shed");
            drop(tcp);
            continue;
        };
        // TCP_NODELAY needs no call here: accepted sockets inherit it from the listener (`bind`).
        // One getsockopt per connection, only where SYN data can have been accepted.
        let tfo = (tfo_watch.active() && tlsgate_tls::tcp_syn_data_accepted(tcp.as_fd())).then_some(label);
        let gw = gateway.clone();
        if config.kind == ListenerKind::Redirect && tfo.is_some() {
            let labels = tlsgate_admin::metrics::TfoLabels {
                listener: label,
                site: "-",
            };
            gw.metrics.tfo_accepted.get_or_create(&labels).inc();
        }
        if config.proxy_protocol {
            tokio::spawn(serve_proxied(gw, tcp, peer, guard, config.clone(), tfo, per_source));
        } else {
            serve(gw, tcp, peer, fixed_local, guard, &config, tfo);
        }
    }
}

/// Starts serving an accepted connection on its own task, by the listener's kind.
fn serve(
    gateway: Arc<Gateway>,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    guard: ConnGuard,
    config: &ListenerConfig,
    tfo: Option<&'static str>,
) {
    match config.kind {
        ListenerKind::Https => {
            tokio::spawn(crate::downstream::conn::serve_tls(
                gateway,
                tcp,
                peer,
                local,
                guard,
                tfo,
                std::time::Instant::now(),
            ));
        }
        ListenerKind::Redirect => {
            tokio::spawn(crate::downstream::redirect::serve_redirect(
                gateway,
                tcp,
                peer,
                guard,
                config.clone(),
            ));
        }
    }
}

/// Reads the PROXY protocol header of a connection from a trusted balancer, counts the client it
/// names against `per_source`, then serves the connection as coming from that client. The header
/// and the TLS handshake share one `handshake_timeout`, counted from the accept: a balancer (or
/// whoever reaches its port) that dribbles the header cannot hold a connection twice as long.
async fn serve_proxied(
    gateway: Arc<Gateway>,
    mut tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    mut guard: ConnGuard,
    config: Arc<ListenerConfig>,
    tfo: Option<&'static str>,
    per_source: usize,
) {
    let accepted = std::time::Instant::now();
    let timeout = gateway.current().config.server.handshake_timeout.get();
    let Ok(ends) = proxy_header::accept(&mut tcp, peer, timeout, &gateway.metrics).await else {
        return;
    };
    let client = ends.source;
    if gateway.refuses_source(client.ip()) {
        return;
    }
    if !gateway.admit_source(&mut guard, per_source, client.ip()) {
        tracing::debug!(%peer, %client, per_source, "the client's source has its limit of connections; connection shed");
        return;
    }
    match config.kind {
        ListenerKind::Https => {
            crate::downstream::conn::serve_tls(gateway, tcp, client, Some(ends.destination), guard, tfo, accepted).await
        }
        ListenerKind::Redirect => {
            crate::downstream::redirect::serve_redirect(gateway, tcp, client, guard, (*config).clone()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    /// `accept_loop` relies on accepted sockets inheriting TCP_NODELAY from the listener.
    #[test]
    fn accepted_sockets_inherit_nodelay() {
        let listener = super::bind("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        listener.set_nonblocking(false).unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(
            accepted.nodelay().unwrap(),
            "TCP_NODELAY not inherited from the listener"
        );
    }

    /// One process's workers share a port; a second group, or a plain listener, is refused.
    /// A listener taken over from another process: every inherited socket is kept, workers
    /// beyond them join the group, and connections queued before the takeover are accepted.
    #[test]
    fn inherited_sockets_are_all_kept_and_the_group_grows() {
        let config = |listen| tlsgate_config::ListenerConfig {
            listen,
            kind: tlsgate_config::ListenerKind::Https,
            backlog: 16,
            https_port: None,
            redirect_status: 301,
            tcp_fastopen: Some(0),
            proxy_protocol: false,
            proxy_protocol_from: Vec::new(),
        };
        // An old process with one worker (no SO_REUSEPORT) and a connection waiting in its queue.
        let old = super::bind_workers(&config("127.0.0.1:0".parse().unwrap()), 1).unwrap();
        let addr = old[0].local_addr().unwrap();
        let _waiting = std::net::TcpStream::connect(addr).unwrap();
        let inherited = vec![old[0].try_clone().unwrap()];
        drop(old); // the old process lets go of its own descriptor
        let workers = super::adopt_workers(&config(addr), inherited, 3).unwrap();
        assert_eq!(workers.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1, 1]);
        workers[0][0].set_nonblocking(false).unwrap();
        assert!(workers[0][0].accept().is_ok(), "the queued connection survives");
        // Five inherited sockets for two workers: all five kept, shared out.
        let group = super::bind_workers(&config("127.0.0.1:0".parse().unwrap()), 5).unwrap();
        let addr = group[0].local_addr().unwrap();
        let workers = super::adopt_workers(&config(addr), group, 2).unwrap();
        assert_eq!(workers.iter().map(Vec::len).collect::<Vec<_>>(), [3, 2]);
    }

    #[test]
    fn a_worker_group_owns_its_address() {
        let config = |listen| tlsgate_config::ListenerConfig {
            listen,
            kind: tlsgate_config::ListenerKind::Https,
            backlog: 16,
            https_port: None,
            redirect_status: 301,
            tcp_fastopen: Some(0),
            proxy_protocol: false,
            proxy_protocol_from: Vec::new(),
        };
        let group = super::bind_workers(&config("127.0.0.1:0".parse().unwrap()), 1).unwrap();
        let taken = group[0].local_addr().unwrap();
        drop(group);
        let group = super::bind_workers(&config(taken), 3).unwrap();
        assert_eq!(group.len(), 3);
        let err = super::bind_workers(&config(taken), 2).unwrap_err();
        assert!(matches!(err, super::ListenError::InUse { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("cannot listen on {taken}: address already in use (another process serves it)")
        );
        drop(group);
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let err = super::bind_workers(&config(plain.local_addr().unwrap()), 2).unwrap_err();
        assert!(matches!(err, super::ListenError::InUse { .. }), "{err}");
    }
}

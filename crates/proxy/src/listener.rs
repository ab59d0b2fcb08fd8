//! Listening sockets and accept loops.
//!
//! Each worker thread binds its own socket per listener with SO_REUSEPORT, so the kernel spreads
//! connections across workers without a shared accept lock (nginx's `reuseport`). Accepted
//! sockets get TCP_NODELAY. Past `max_connections`, new connections are closed at once (shed).
//! With `tcp_fastopen`, each socket also accepts data in the SYN from clients holding a TFO
//! cookie; connections that used it are counted (`tlsgate_tfo_accepted_total`).

use crate::gateway::Gateway;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::{ListenerConfig, ListenerKind};

/// Binds a listener's socket (SO_REUSEADDR, SO_REUSEPORT, and TCP Fast Open when configured).
pub fn bind_listener(config: &ListenerConfig) -> std::io::Result<std::net::TcpListener> {
    let socket = bind(config.listen, config.backlog)?;
    if config.tcp_fastopen > 0 {
        tlsgate_tls::set_tcp_fastopen(socket.as_fd(), config.tcp_fastopen)?;
    }
    Ok(socket)
}

/// The kernel's `net.ipv4.tcp_fastopen` (per network namespace), if readable.
pub fn tfo_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Logs one warning when a listener asks for TCP Fast Open but the kernel will not accept SYN
/// data on servers (bit 2 of `net.ipv4.tcp_fastopen`): the option is then set but has no effect.
pub fn warn_if_tfo_disabled(listeners: &[ListenerConfig]) {
    let wanted: Vec<String> = listeners
        .iter()
        .filter(|l| l.tcp_fastopen > 0)
        .map(|l| l.listen.to_string())
        .collect();
    if wanted.is_empty() {
        return;
    }
    match tfo_sysctl() {
        Some(v) if v & 2 != 0 => {}
        Some(v) => tracing::warn!(
            listeners = ?wanted,
            "tcp_fastopen is configured but sysctl net.ipv4.tcp_fastopen = {v} does not enable server \
             TFO (bit 2): connections will not use it; set it to 3 (sysctl -w net.ipv4.tcp_fastopen=3) \
             or set tcp_fastopen = 0"
        ),
        None => tracing::debug!("net.ipv4.tcp_fastopen unreadable; cannot tell whether TFO is enabled"),
    }
}

/// Binds a listening socket with SO_REUSEADDR and SO_REUSEPORT.
pub fn bind(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
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
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(addr = %config.listen, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let limit = gateway.current().config.server.max_connections;
        let Some(guard) = gateway.admit(limit) else {
            tracing::debug!(%peer, limit, "connection limit reached; connection shed");
            drop(tcp);
            continue;
        };
        // TCP_NODELAY needs no call here: accepted sockets inherit it from the listener (`bind`).
        // One getsockopt per connection, only on listeners with TFO on.
        let tfo = (config.tcp_fastopen > 0 && tlsgate_tls::tcp_syn_data_accepted(tcp.as_fd())).then_some(label);
        let gw = gateway.clone();
        match config.kind {
            ListenerKind::Https => {
                tokio::spawn(crate::conn::serve_tls(gw, tcp, peer, guard, tfo));
            }
            ListenerKind::Redirect => {
                if tfo.is_some() {
                    let labels = tlsgate_admin::metrics::TfoLabels {
                        listener: label,
                        site: "-",
                    };
                    gw.metrics.tfo_accepted.get_or_create(&labels).inc();
                }
                tokio::spawn(crate::redirect::serve_redirect(gw, tcp, peer, guard, config.clone()));
            }
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
}

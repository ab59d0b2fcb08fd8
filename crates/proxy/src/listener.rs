//! Listening sockets and accept loops.
//!
//! Each worker thread binds its own socket per listener with SO_REUSEPORT, so the kernel spreads
//! connections across workers without a shared accept lock (nginx's `reuseport`). Accepted
//! sockets get TCP_NODELAY. Past `max_connections`, new connections are closed at once (shed).

use crate::gateway::Gateway;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::{ListenerConfig, ListenerKind};

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
        let _ = tcp.set_nodelay(true);
        let gw = gateway.clone();
        match config.kind {
            ListenerKind::Https => {
                tokio::spawn(crate::conn::serve_tls(gw, tcp, peer, guard));
            }
            ListenerKind::Redirect => {
                tokio::spawn(crate::redirect::serve_redirect(gw, tcp, peer, guard, config.clone()));
            }
        }
    }
}

//! The UDP sockets of the QUIC listeners: one per worker and listener, in one SO_REUSEPORT group
//! per address (the kernel spreads clients by address and port, as for TCP), taken exclusively
//! like the TCP listeners (`listener::bind_workers`): the first socket is bound without
//! SO_REUSEPORT, so an address another process serves is refused, then the others join it.

use super::error::QuicError;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;

/// Receive buffer asked for per socket (the kernel caps it at `net.core.rmem_max`).
const RECV_BUFFER: usize = 4 << 20;

/// Binds `count` UDP sockets on `addr`, one per worker.
pub fn bind_workers(addr: SocketAddr, count: usize) -> Result<Vec<std::net::UdpSocket>, QuicError> {
    let fail = |source| QuicError::Bind { addr, source };
    let first = bind(addr, false).map_err(fail)?;
    let addr = first.local_addr().map_err(fail)?;
    if count > 1 {
        socket2::SockRef::from(&first).set_reuse_port(true).map_err(fail)?;
    }
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(bind(addr, true).map_err(fail)?);
    }
    Ok(sockets)
}

fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(reuse_port)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // Best effort: a small buffer drops bursts, which QUIC recovers from.
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_group_owns_its_address() {
        let group = super::bind_workers("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let addr = group[0].local_addr().unwrap();
        assert!(group.iter().all(|s| s.local_addr().unwrap() == addr));
        assert!(super::bind_workers(addr, 2).is_err(), "a second group is refused");
    }
}

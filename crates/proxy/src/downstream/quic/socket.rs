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

/// Adds `count` sockets to the SO_REUSEPORT group of `members` (sockets taken over from the
/// process being upgraded, bound to `addr`), after them in the group's order: a successor with
/// more workers than the old process had. The members get the option first (a one-worker
/// process never set it; the kernel then makes a group of the first one).
pub fn join(members: &[&std::net::UdpSocket], count: usize) -> Result<Vec<std::net::UdpSocket>, QuicError> {
    let Some(first) = members.first() else {
        return Ok(Vec::new());
    };
    let addr = first.local_addr().map_err(|source| QuicError::Bind {
        addr: "0.0.0.0:0".parse().expect("a valid address"),
        source,
    })?;
    let fail = |source| QuicError::Bind { addr, source };
    for member in members {
        socket2::SockRef::from(member).set_reuse_port(true).map_err(fail)?;
    }
    (0..count).map(|_| bind(addr, true).map_err(fail)).collect()
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

    #[test]
    fn a_successor_with_more_workers_joins_the_group_even_of_a_single_socket() {
        let single = super::bind_workers("127.0.0.1:0".parse().unwrap(), 1).unwrap();
        let addr = single[0].local_addr().unwrap();
        let joined = super::join(&[&single[0]], 2).unwrap();
        assert_eq!(joined.len(), 2);
        assert!(joined.iter().all(|s| s.local_addr().unwrap() == addr));
        // Every member reads the address: datagrams from many source ports reach each.
        let mut got = 0;
        let mut seen = [false; 3];
        for _ in 0..64 {
            let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            sender.send_to(b"x", addr).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
            for (i, s) in single.iter().chain(&joined).enumerate() {
                let mut b = [0u8; 4];
                while s.recv_from(&mut b).is_ok() {
                    seen[i] = true;
                    got += 1;
                }
            }
        }
        assert_eq!(got, 64, "every datagram reached one member");
        assert_eq!(seen, [true; 3], "the kernel spreads senders over all three members");
    }
}

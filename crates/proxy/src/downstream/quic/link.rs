//! The QUIC link between the two processes of a binary upgrade.
//!
//! A successor takes over the running gateway's QUIC sockets (duplicates of the same sockets,
//! in the same SO_REUSEPORT group, so the kernel's steering program still applies). Until the
//! old process has drained, both read them, and either may read a datagram of a connection the
//! other one owns. Each QUIC socket therefore comes with a Unix datagram socket pair: the
//! running gateway keeps one end and hands the other over with the socket. A datagram for a
//! connection ID an endpoint does not know is passed over the link (framed with the client's
//! address: `tlsgate_wire::quic_link`) instead of being answered with a stateless reset; the
//! other process hands it to its connection, or, not knowing it either, answers it as usual.
//! Nothing passed over a link is passed back.
//!
//! The running gateway forwards to its successor only while one has taken the sockets
//! ([`successor_attached`]); before that its end of the pair has no reader. The successor
//! forwards to its predecessor until the predecessor has exited (its end closed: the send is
//! refused), then answers as a single process does.

use nix::libc;
use std::io;
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram as StdUnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use tlsgate_wire::quic_link::{self, MAX_FRAME};
use tokio::net::UnixDatagram;

/// Whether a successor holds this process's link ends (set by the binary upgrade's hand-over).
static SUCCESSOR: AtomicBool = AtomicBool::new(false);

/// Says whether a successor has taken over the QUIC sockets and their links (it is cleared
/// again when that successor fails before taking over).
pub fn successor_attached(attached: bool) {
    SUCCESSOR.store(attached, Ordering::SeqCst);
}

/// Which process is at the other end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// This process is the running gateway; the successor may hold the other end.
    Successor,
    /// This process took over; the old one holds the other end until it exits.
    Predecessor,
}

/// One end of a link.
pub struct Link {
    socket: UnixDatagram,
    /// The same socket for sends: a plain non-blocking send, which fails only when the queue is
    /// really full (the runtime's readiness is not known before its first event).
    sender: StdUnixDatagram,
    peer: Peer,
    alive: AtomicBool,
}

impl Link {
    /// Registers one end of a pair with the runtime.
    pub fn new(socket: StdUnixDatagram, peer: Peer) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        let sender = socket.try_clone()?;
        Ok(Self {
            sender,
            socket: UnixDatagram::from_std(socket)?,
            peer,
            alive: AtomicBool::new(true),
        })
    }

    /// Which process is at the other end.
    pub fn peer(&self) -> Peer {
        self.peer
    }

    /// Whether datagrams should be passed over the link now.
    pub fn active(&self) -> bool {
        self.alive.load(Ordering::Relaxed) && (self.peer == Peer::Predecessor || SUCCESSOR.load(Ordering::SeqCst))
    }

    /// Passes `datagram` from `from` to the other process; `false` when it could not (a full
    /// queue drops it; a closed peer ends the link for good).
    pub fn pass(&self, from: SocketAddr, datagram: &[u8], frame: &mut Vec<u8>) -> bool {
        quic_link::encode(from, datagram, frame);
        match self.sender.send(frame) {
            Ok(_) => true,
            Err(e) => {
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ECONNREFUSED | libc::ENOTCONN | libc::EPIPE)
                ) {
                    tracing::info!(peer = ?self.peer, "QUIC link closed: the other process has exited");
                    self.alive.store(false, Ordering::Relaxed);
                }
                false
            }
        }
    }

    /// The next datagram passed by the other process: its sender and length in `buf`. Pends
    /// for ever once the link is closed.
    pub async fn recv(&self, buf: &mut Vec<u8>) -> (SocketAddr, usize) {
        buf.resize(MAX_FRAME, 0);
        loop {
            if !self.alive.load(Ordering::Relaxed) {
                std::future::pending::<()>().await;
            }
            match self.socket.recv(buf).await {
                Ok(n) => match quic_link::decode(&buf[..n]) {
                    Ok((from, datagram)) => {
                        let len = datagram.len();
                        buf.copy_within(n - len..n, 0);
                        return (from, len);
                    }
                    Err(e) => tracing::debug!(error = %e, "QUIC link: bad frame dropped"),
                },
                Err(e) => {
                    tracing::debug!(error = %e, "QUIC link: receive failed; closed");
                    self.alive.store(false, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_cross_a_link_with_their_sender_and_a_closed_peer_ends_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, b) = StdUnixDatagram::pair().unwrap();
            let old = Link::new(a, Peer::Successor).unwrap();
            let new = Link::new(b, Peer::Predecessor).unwrap();
            assert!(new.active());
            successor_attached(false);
            assert!(!old.active(), "no successor yet: nothing is passed to it");
            let from: SocketAddr = "192.0.2.1:5000".parse().unwrap();
            let mut frame = Vec::new();
            assert!(new.pass(from, b"\x40short", &mut frame));
            let mut buf = Vec::new();
            let (got, n) = old.recv(&mut buf).await;
            assert_eq!((got, &buf[..n]), (from, &b"\x40short"[..]));
            drop(old);
            assert!(!new.pass(from, b"x", &mut frame));
            assert!(!new.active(), "the predecessor exited");
        });
    }
}

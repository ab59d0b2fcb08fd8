//! The surplus QUIC sockets of a binary upgrade to fewer workers, and their closing.
//!
//! A successor takes over every socket of the old process's SO_REUSEPORT group: while the old
//! process's connections live, their IDs name sockets by their place in the group, and closing
//! one would move the group's last socket into its place. The sockets beyond the successor's
//! workers (the surplus) are read by relay endpoints that pass new connections to a worker
//! (`Endpoint::relay_to`) and old connections' datagrams over the link to the old process.
//!
//! Once the old process has exited, [`Surplus::retire`] closes them: it attaches the steering
//! program that takes every index modulo the workers (`udp::within_program`), so the kernel no
//! longer sends anything there; the relay endpoints read what was already queued for a moment
//! and close their sockets; the duplicates kept for a successor are dropped. The kernel fills a
//! closed socket's place with the group's last socket, so closing only sockets beyond the
//! workers never moves a worker's own: the group is the workers' sockets again, in their order,
//! and a later upgrade to more workers joins after them.

use super::udp;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;
use tlsgate_wire::handoff::SocketKind;
use tokio::sync::watch;

/// How long a relay endpoint goes on reading after the steering program changed: datagrams the
/// kernel queued for its socket before are still passed on.
pub const GRACE: Duration = Duration::from_millis(100);

/// The surplus sockets of every QUIC address of this process, until retired.
pub struct Surplus {
    groups: Vec<Group>,
    /// Duplicates of the surplus sockets and the other ends of their links, for a successor that
    /// takes over before they are retired (it must get the whole group, in order).
    handed: Vec<(SocketKind, OwnedFd)>,
    signal: watch::Sender<bool>,
    /// Disconnected once every relay endpoint has closed its socket.
    closed: std_mpsc::Receiver<()>,
}

/// One address's group with sockets beyond the workers.
struct Group {
    addr: SocketAddr,
    /// A member of the group (a duplicate of a worker's socket), to attach the program through.
    member: std::net::UdpSocket,
    workers: u32,
    surplus: usize,
}

/// A relay endpoint's part: told to close, and closing tells [`Surplus::retire`].
pub struct Retiring {
    /// Becomes `true` when the endpoint should close its socket (after [`GRACE`]).
    pub signal: watch::Receiver<bool>,
    /// Dropped with the endpoint, after its socket.
    pub closed: std_mpsc::Sender<()>,
}

/// Collects the surplus of [`super::bind`]: one [`Retiring`] per relay endpoint.
pub struct Builder {
    groups: Vec<Group>,
    handed: Vec<(SocketKind, OwnedFd)>,
    signal: watch::Sender<bool>,
    closed: (std_mpsc::Sender<()>, std_mpsc::Receiver<()>),
}

impl Builder {
    pub fn new() -> Self {
        Self {
            groups: Vec::new(),
            handed: Vec::new(),
            signal: watch::channel(false).0,
            closed: std_mpsc::channel(),
        }
    }

    /// An address whose group has `surplus` sockets beyond `workers`; `member` is any socket of it.
    pub fn group(&mut self, addr: SocketAddr, member: std::net::UdpSocket, workers: usize, surplus: usize) {
        self.groups.push(Group {
            addr,
            member,
            workers: u32::try_from(workers).unwrap_or(u32::MAX),
            surplus,
        });
    }

    /// A surplus socket's duplicate or its link's other end, for a successor.
    pub fn hand(&mut self, kind: SocketKind, fd: OwnedFd) {
        self.handed.push((kind, fd));
    }

    /// The part of one relay endpoint.
    pub fn retiring(&self) -> Retiring {
        Retiring {
            signal: self.signal.subscribe(),
            closed: self.closed.0.clone(),
        }
    }

    /// `None` when no address has a surplus.
    pub fn build(self) -> Option<Surplus> {
        (!self.groups.is_empty()).then(|| Surplus {
            groups: self.groups,
            handed: self.handed,
            signal: self.signal,
            closed: self.closed.1,
        })
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Surplus {
    /// What a successor takes over with the workers' sockets (after them: each address's group
    /// order is kept, the surplus being its last sockets).
    pub fn handed(&self) -> &[(SocketKind, OwnedFd)] {
        &self.handed
    }

    /// Closes the surplus sockets (call once the old process has exited, with no successor
    /// taking over): the program first, then the relay endpoints, waiting for them at most
    /// `timeout`. Returns how many sockets were closed.
    pub fn retire(self, timeout: Duration) -> usize {
        let mut closed = 0;
        for g in &self.groups {
            if let Err(e) = udp::steer_within(&g.member, g.workers) {
                // The first program could not be attached either: the kernel hashes over the
                // group, and a datagram queued on a closing socket is lost (a client resends).
                tracing::warn!(addr = %g.addr, error = %e, "cannot attach the QUIC steering program before closing the surplus sockets");
            }
            closed += g.surplus;
        }
        let _ = self.signal.send(true);
        match self.closed.recv_timeout(timeout + GRACE) {
            Err(std_mpsc::RecvTimeoutError::Disconnected) => {}
            Ok(()) | Err(std_mpsc::RecvTimeoutError::Timeout) => {
                tracing::warn!("QUIC surplus sockets: not every relay endpoint closed in time");
            }
        }
        for g in &self.groups {
            tracing::info!(
                addr = %g.addr,
                workers = g.workers,
                closed = g.surplus,
                "upgrade: the old process has exited; closed {} surplus QUIC socket(s) on {}",
                g.surplus,
                g.addr
            );
        }
        closed
    }
}

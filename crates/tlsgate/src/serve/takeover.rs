//! The successor's side of a binary upgrade (`tlsgate serve --upgrade`): connect to the running
//! gateway's upgrade socket before building anything (so that a second successor is refused
//! meanwhile), build, then receive its listening sockets, ticket keys and sessions, install the
//! state, listen, and once every worker accepts say `Ready` and wait for `Draining`. Any failure
//! before `Ready` is sent to the running gateway (`Failed`), which keeps serving.

use super::channel::{Channel, UpgradeError};
use super::handover::{truncate, HELLO_TIMEOUT, UPGRADE_TIMEOUT};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tlsgate_proxy::Gateway;
use tlsgate_tls::tickets::ExportedTicketKey;
use tlsgate_wire::handoff::{self, Message, SocketKind};

/// How long the running gateway may take to answer `Ready` with `Draining`.
const DRAINING_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to the gateway being taken over.
pub struct Takeover {
    channel: Channel,
    old_pid: u32,
}

/// Sockets received from the gateway being taken over, until claimed by address.
#[derive(Default)]
pub struct Inherited {
    listeners: Vec<(SocketAddr, std::net::TcpListener)>,
    admin: Option<(SocketAddr, std::net::TcpListener)>,
    upgrade: Option<(Option<PathBuf>, UnixListener)>,
    /// QUIC sockets in their groups' order, each waiting for (then with) its link.
    quic: Vec<(SocketAddr, std::net::UdpSocket, Option<UnixDatagram>)>,
    /// The old process's QUIC reset and Retry secret.
    quic_secret: Option<[u8; 32]>,
}

/// How the takeover ended once this process was accepting.
#[derive(Debug)]
pub enum Confirmed {
    /// The old process stopped accepting and drains.
    Draining,
    /// The old process went away without answering (it crashed or was killed): this one serves.
    OldGone(UpgradeError),
}

impl Takeover {
    /// Connects to the running gateway on `path` and introduces this process.
    pub fn connect(path: &Path) -> Result<Self, UpgradeError> {
        let stream = UnixStream::connect(path).map_err(|source| UpgradeError::NotRunning {
            path: path.to_path_buf(),
            source,
        })?;
        let mut channel = Channel::new(stream, HELLO_TIMEOUT)?;
        channel.check_peer()?;
        let sent = channel.send(&Message::Hello {
            version: handoff::VERSION,
            pid: std::process::id(),
        });
        // A busy gateway answers at once and hangs up, maybe before the hello arrives: its
        // answer is read even when the hello could not be sent.
        let answer = channel.recv_with(|m| match m {
            Message::Welcome { pid, .. } => Ok(pid),
            other => Err(UpgradeError::unexpected("welcome", &other)),
        });
        let old_pid = match (sent, answer) {
            (Err(e), Err(UpgradeError::Closed)) => return Err(e),
            (_, answer) => answer?,
        };
        Ok(Self { channel, old_pid })
    }

    /// The process being taken over.
    pub fn old_pid(&self) -> u32 {
        self.old_pid
    }

    /// Asks for the sockets and the session state, and installs the state into `gateway`
    /// (ticket keys, unless the ring is cluster-derived; sessions into the local cache).
    pub fn receive(&mut self, gateway: &Gateway) -> Result<Inherited, UpgradeError> {
        self.channel.set_timeout(UPGRADE_TIMEOUT)?;
        self.channel.send(&Message::SendState)?;
        let mut inherited = Inherited::default();
        let (mut keys, mut keys_installed, mut sessions, mut sessions_installed) = (0, 0, 0, 0);
        loop {
            let frame = self.channel.recv()?;
            match frame.message()? {
                Message::Sockets { kinds } => {
                    let fds = self.channel.take_fds(kinds.len())?;
                    for (kind, fd) in kinds.into_iter().zip(fds) {
                        inherited.add(kind, fd)?;
                    }
                }
                Message::TicketKeys { keys: records } => {
                    let exported: Vec<ExportedTicketKey> = records
                        .iter()
                        .map(|k| ExportedTicketKey {
                            name: *k.name,
                            aes: *k.aes,
                            hmac: *k.hmac,
                            retired_for: k.retired_ms.map(Duration::from_millis),
                        })
                        .collect();
                    keys += exported.len();
                    keys_installed += gateway.sessions.tickets.import(&exported);
                }
                Message::Sessions { sessions: records } => {
                    sessions += records.len();
                    sessions_installed += gateway
                        .sessions
                        .cache
                        .import(records.iter().map(|s| (s.id, s.der, Duration::from_millis(s.ttl_ms))));
                }
                Message::QuicSecret { key } => inherited.quic_secret = Some(*key),
                Message::StateEnd => break,
                other => return Err(UpgradeError::unexpected("sockets or session state", &other)),
            }
        }
        if self.channel.unclaimed_fds() > 0 {
            return Err(UpgradeError::Descriptors("descriptors came that no message listed"));
        }
        tracing::info!(
            old = self.old_pid,
            listener_sockets = inherited.listeners.len(),
            quic_sockets = inherited.quic.len(),
            quic_secret = inherited.quic_secret.is_some(),
            ticket_keys = keys,
            ticket_keys_installed = keys_installed,
            sessions,
            sessions_installed,
            "upgrade: received the running gateway's sockets and session state"
        );
        Ok(inherited)
    }

    /// Tells the running gateway this process cannot start (it keeps serving).
    pub fn fail(mut self, reason: &str) {
        let reason = truncate(reason);
        if let Err(e) = self.channel.send(&Message::Failed { reason: &reason }) {
            tracing::warn!("upgrade: could not tell the running gateway why this process failed: {e}");
        }
    }

    /// This process accepts: says `Ready` and waits for the old one to stop accepting.
    pub fn ready(mut self) -> Result<Confirmed, UpgradeError> {
        self.channel.set_timeout(DRAINING_TIMEOUT)?;
        let answer = self
            .channel
            .send(&Message::Ready {
                pid: std::process::id(),
            })
            .and_then(|()| {
                self.channel.recv_with(|m| match m {
                    Message::Draining => Ok(()),
                    other => Err(UpgradeError::unexpected("draining", &other)),
                })
            });
        match answer {
            Ok(()) => Ok(Confirmed::Draining),
            // No answer at all: the old process is gone, or wedged; either way this one serves.
            Err(e @ (UpgradeError::Closed | UpgradeError::Timeout(_))) => Ok(Confirmed::OldGone(e)),
            Err(e) => Err(e),
        }
    }
}

impl Inherited {
    /// Takes in one received descriptor, checked to be the kind of socket announced.
    fn add(&mut self, kind: SocketKind, fd: OwnedFd) -> Result<(), UpgradeError> {
        if matches!(kind, SocketKind::Quic | SocketKind::QuicLink) {
            return self.add_quic(kind, fd);
        }
        let family = rustix::net::sockopt::socket_domain(&fd).map_err(|e| bad(kind, e.into()))?;
        let listening = rustix::net::sockopt::socket_acceptconn(&fd).map_err(|e| bad(kind, e.into()))?;
        let stream =
            rustix::net::sockopt::socket_type(&fd).map_err(|e| bad(kind, e.into()))? == rustix::net::SocketType::STREAM;
        let tcp = family == rustix::net::AddressFamily::INET || family == rustix::net::AddressFamily::INET6;
        let unix = family == rustix::net::AddressFamily::UNIX;
        if !listening || !stream || (kind == SocketKind::Upgrade && !unix) || (kind != SocketKind::Upgrade && !tcp) {
            return Err(UpgradeError::BadSocket(format!(
                "a {kind:?} socket that is not a listening {} stream socket",
                if kind == SocketKind::Upgrade { "Unix" } else { "TCP" }
            )));
        }
        match kind {
            SocketKind::Listener | SocketKind::Admin => {
                let l = std::net::TcpListener::from(fd);
                let addr = l.local_addr().map_err(|e| bad(kind, e))?;
                if kind == SocketKind::Admin {
                    self.admin = Some((addr, l));
                } else {
                    self.listeners.push((addr, l));
                }
            }
            SocketKind::Upgrade => {
                let l = UnixListener::from(fd);
                let path = l.local_addr().ok().and_then(|a| a.as_pathname().map(Path::to_path_buf));
                self.upgrade = Some((path, l));
            }
            SocketKind::Quic | SocketKind::QuicLink => unreachable!("handled by add_quic"),
        }
        Ok(())
    }

    /// A QUIC socket (a bound UDP socket), or the link of the one received just before it (a
    /// Unix datagram socket).
    fn add_quic(&mut self, kind: SocketKind, fd: OwnedFd) -> Result<(), UpgradeError> {
        let family = rustix::net::sockopt::socket_domain(&fd).map_err(|e| bad(kind, e.into()))?;
        let dgram =
            rustix::net::sockopt::socket_type(&fd).map_err(|e| bad(kind, e.into()))? == rustix::net::SocketType::DGRAM;
        let inet = family == rustix::net::AddressFamily::INET || family == rustix::net::AddressFamily::INET6;
        match kind {
            SocketKind::Quic if dgram && inet => {
                let s = std::net::UdpSocket::from(fd);
                let addr = s.local_addr().map_err(|e| bad(kind, e))?;
                self.quic.push((addr, s, None));
                Ok(())
            }
            SocketKind::QuicLink if dgram && family == rustix::net::AddressFamily::UNIX => match self.quic.last_mut() {
                Some((_, _, link @ None)) => {
                    *link = Some(UnixDatagram::from(fd));
                    Ok(())
                }
                _ => Err(UpgradeError::BadSocket("a QUIC link without its QUIC socket".into())),
            },
            _ => Err(UpgradeError::BadSocket(format!(
                "a {kind:?} socket that is not a {} datagram socket",
                if kind == SocketKind::Quic { "UDP" } else { "Unix" }
            ))),
        }
    }

    /// The QUIC sockets received, each with its link, in their groups' order.
    /// The old process's QUIC reset and Retry secret, when it served HTTP/3.
    pub fn take_quic_secret(&mut self) -> Option<[u8; 32]> {
        self.quic_secret.take()
    }

    pub fn take_quic(&mut self) -> Vec<tlsgate_proxy::downstream::quic::Adopted> {
        std::mem::take(&mut self.quic)
            .into_iter()
            .filter_map(|(addr, socket, link)| {
                let link = link?;
                Some(tlsgate_proxy::downstream::quic::Adopted { addr, socket, link })
            })
            .collect()
    }

    /// The sockets of the listener on `addr` (one per worker the old process had).
    pub fn take_listeners(&mut self, addr: SocketAddr) -> Vec<std::net::TcpListener> {
        let (taken, kept) = std::mem::take(&mut self.listeners)
            .into_iter()
            .partition(|(a, _)| *a == addr);
        self.listeners = kept;
        taken.into_iter().map(|(_, l)| l).collect()
    }

    /// The admin socket, when it listens on `addr`.
    pub fn take_admin(&mut self, addr: SocketAddr) -> Option<std::net::TcpListener> {
        match self.admin.take() {
            Some((a, l)) if a == addr => Some(l),
            other => {
                self.admin = other;
                None
            }
        }
    }

    /// The upgrade socket, when it is bound to `path`.
    pub fn take_upgrade(&mut self, path: &Path) -> Option<UnixListener> {
        match self.upgrade.take() {
            Some((Some(p), l)) if p == path => Some(l),
            other => {
                self.upgrade = other;
                None
            }
        }
    }

    /// Closes what this configuration does not use (listeners it no longer has); returns the
    /// path of an upgrade socket it moved away from, to be removed once the old process drains.
    pub fn close_rest(self) -> Option<PathBuf> {
        for (addr, _) in &self.listeners {
            tracing::info!(%addr, "upgrade: the old process's listener {addr} is not in this configuration; closed");
        }
        if let Some((addr, _)) = &self.admin {
            tracing::info!(%addr, "upgrade: the old admin listener {addr} is not in this configuration; closed");
        }
        self.upgrade.and_then(|(path, _)| path)
    }
}

fn bad(kind: SocketKind, e: std::io::Error) -> UpgradeError {
    UpgradeError::BadSocket(format!("{kind:?} socket: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn fd<T: AsFd>(s: &T) -> OwnedFd {
        s.as_fd().try_clone_to_owned().unwrap()
    }

    #[test]
    fn received_sockets_are_checked_and_claimed_by_address() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.sock");
        let unix = UnixListener::bind(&path).unwrap();
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut got = Inherited::default();
        got.add(SocketKind::Listener, fd(&a)).unwrap();
        got.add(SocketKind::Listener, fd(&a)).unwrap();
        got.add(SocketKind::Listener, fd(&b)).unwrap();
        got.add(SocketKind::Admin, fd(&admin)).unwrap();
        got.add(SocketKind::Upgrade, fd(&unix)).unwrap();
        assert_eq!(got.take_listeners(a.local_addr().unwrap()).len(), 2);
        assert!(got.take_listeners(a.local_addr().unwrap()).is_empty(), "taken once");
        assert!(got.take_admin(b.local_addr().unwrap()).is_none());
        assert!(got.take_admin(admin.local_addr().unwrap()).is_some());
        assert!(got.take_upgrade(&dir.path().join("other.sock")).is_none());
        assert_eq!(
            got.close_rest(),
            Some(path.clone()),
            "an upgrade socket left behind is named"
        );

        let mut got = Inherited::default();
        let connected = std::net::TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let e = got.add(SocketKind::Listener, fd(&connected)).unwrap_err();
        assert_eq!(tlsgate_error::Classify::kind(&e), "upgrade_bad_socket");
        assert!(
            got.add(SocketKind::Upgrade, fd(&a)).is_err(),
            "a TCP socket announced as the Unix one"
        );
        assert!(got.add(SocketKind::Listener, fd(&unix)).is_err());
        assert!(got.take_upgrade(&path).is_none());
    }
}

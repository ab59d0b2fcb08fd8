//! The upgrade channel's transport: handoff frames (`tlsgate_wire::handoff`) over a connected
//! Unix stream socket, listening sockets passed beside them (`SCM_RIGHTS`, received as `OwnedFd`
//! through rustix, close-on-exec), and the peer checked (`SO_PEERCRED`: this user only). It
//! blocks, with a timeout on every read and write: each side runs it on a thread of its own.
//! Read buffers are wiped when dropped (they carry ticket keys and sessions), and a peer can
//! make it hold at most one frame and a bounded number of descriptors.

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;
use tlsgate_error::{Classify, Side};
use tlsgate_wire::handoff::{self, HandoffError, Message};
use zeroize::Zeroizing;

/// Most descriptors one `recvmsg` can carry (the kernel's `SCM_MAX_FD`).
const MAX_FDS_PER_READ: usize = 253;
/// Most descriptors received and not yet claimed by a `Sockets` frame.
const MAX_PENDING_FDS: usize = 4096;
/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;

/// What can go wrong on either side of an upgrade.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// `--upgrade` (or SIGUSR2) without `[server] upgrade_socket`.
    #[error("upgrades need [server] upgrade_socket in {0}")]
    NotConfigured(PathBuf),
    /// Nothing answers on the upgrade socket.
    #[error("no running gateway takes upgrades on {path}: {source}")]
    NotRunning {
        /// The socket's path.
        path: PathBuf,
        /// What connect(2) said.
        source: std::io::Error,
    },
    /// The upgrade socket cannot be listened on.
    #[error("cannot listen on the upgrade socket {path}: {source}")]
    Bind {
        /// The socket's path.
        path: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// Another gateway answers on the upgrade socket this one was to listen on.
    #[error(
        "{0} is the upgrade socket of a running gateway: take it over with `tlsgate serve --upgrade`, or stop it first"
    )]
    SocketInUse(PathBuf),
    /// The peer runs as another user.
    #[error("the upgrade channel's peer (process {pid}) runs as uid {peer}, not as this gateway's uid {ours}")]
    ForeignPeer {
        /// The peer's process ID.
        pid: i32,
        /// Its user ID.
        peer: u32,
        /// Ours.
        ours: u32,
    },
    /// The running gateway is already being taken over by another process.
    #[error("another upgrade is in progress (by process {pid}); try again once it is over")]
    Busy {
        /// The other successor's process ID (0: not known yet).
        pid: u32,
    },
    /// The running gateway said no.
    #[error("the running gateway refused the upgrade: {0}")]
    Refused(String),
    /// The successor said it cannot start (its own log has the details too).
    #[error("the new process could not start: {0}")]
    SuccessorFailed(String),
    /// A frame that is not valid.
    #[error("upgrade channel: {0}")]
    Protocol(#[from] HandoffError),
    /// A valid message, out of turn.
    #[error("upgrade channel: expected {expected}, got {got}")]
    Unexpected {
        /// What the conversation called for.
        expected: &'static str,
        /// What came.
        got: &'static str,
    },
    /// The peer closed the connection.
    #[error("upgrade channel: the other process closed the connection")]
    Closed,
    /// No byte within the timeout.
    #[error("upgrade channel: nothing received within {}s", .0.as_secs())]
    Timeout(Duration),
    /// A read or write failed.
    #[error("upgrade channel: {0}")]
    Io(#[source] std::io::Error),
    /// Descriptors that do not match what the frames announced.
    #[error("upgrade channel: {0}")]
    Descriptors(&'static str),
    /// A descriptor that is not the socket it was announced as.
    #[error("inherited socket: {0}")]
    BadSocket(String),
}

impl Classify for UpgradeError {
    fn side(&self) -> Side {
        match self {
            Self::NotConfigured(_) | Self::SocketInUse(_) | Self::SuccessorFailed(_) => Side::Config,
            Self::NotRunning { .. } | Self::Busy { .. } | Self::Refused(_) => Side::Upstream,
            Self::Bind { .. } | Self::Io(_) => Side::Internal,
            Self::ForeignPeer { .. }
            | Self::Protocol(_)
            | Self::Unexpected { .. }
            | Self::Closed
            | Self::Timeout(_)
            | Self::Descriptors(_)
            | Self::BadSocket(_) => Side::Downstream,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::NotConfigured(_) => "upgrade_not_configured",
            Self::NotRunning { .. } => "upgrade_not_running",
            Self::Bind { .. } => "upgrade_bind",
            Self::SocketInUse(_) => "upgrade_socket_in_use",
            Self::ForeignPeer { .. } => "upgrade_foreign_peer",
            Self::Busy { .. } => "upgrade_busy",
            Self::Refused(_) => "upgrade_refused",
            Self::SuccessorFailed(_) => "upgrade_successor_failed",
            Self::Protocol(_) => "upgrade_protocol",
            Self::Unexpected { .. } => "upgrade_unexpected",
            Self::Closed => "upgrade_closed",
            Self::Timeout(_) => "upgrade_timeout",
            Self::Io(_) => "upgrade_io",
            Self::Descriptors(_) => "upgrade_descriptors",
            Self::BadSocket(_) => "upgrade_bad_socket",
        }
    }

    fn retry_safe(&self) -> bool {
        matches!(self, Self::Busy { .. })
    }
}

impl UpgradeError {
    /// `Unexpected` for a message that came out of turn (a `Refused` says why instead).
    pub fn unexpected(expected: &'static str, got: &Message<'_>) -> Self {
        match got {
            Message::Refused { reason } => Self::Refused(reason.to_string()),
            Message::Busy { pid } => Self::Busy { pid: *pid },
            other => Self::Unexpected {
                expected,
                got: other.name(),
            },
        }
    }
}

/// One received frame; its bytes are wiped when it is dropped.
pub struct Frame(Zeroizing<Vec<u8>>);

impl Frame {
    /// The message (borrowing the frame's bytes).
    pub fn message(&self) -> Result<Message<'_>, UpgradeError> {
        match handoff::decode(&self.0)? {
            Some((message, _)) => Ok(message),
            None => Err(UpgradeError::Protocol(HandoffError::Truncated("frame"))),
        }
    }
}

/// A connected upgrade channel.
pub struct Channel {
    stream: UnixStream,
    buf: Zeroizing<Vec<u8>>,
    fds: VecDeque<OwnedFd>,
    timeout: Duration,
}

impl Channel {
    /// Wraps a connected stream (switched to blocking mode) with `timeout` for each read and
    /// write.
    pub fn new(stream: UnixStream, timeout: Duration) -> Result<Self, UpgradeError> {
        stream.set_nonblocking(false).map_err(UpgradeError::Io)?;
        let mut channel = Self {
            stream,
            buf: Zeroizing::new(Vec::new()),
            fds: VecDeque::new(),
            timeout,
        };
        channel.set_timeout(timeout)?;
        Ok(channel)
    }

    /// Changes the timeout of each read and write.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), UpgradeError> {
        let t = Some(timeout.max(Duration::from_millis(1)));
        self.stream.set_read_timeout(t).map_err(UpgradeError::Io)?;
        self.stream.set_write_timeout(t).map_err(UpgradeError::Io)?;
        self.timeout = timeout;
        Ok(())
    }

    /// The peer's process ID, once checked to run as this process's (effective) user.
    pub fn check_peer(&self) -> Result<i32, UpgradeError> {
        let cred = rustix::net::sockopt::socket_peercred(&self.stream).map_err(|e| UpgradeError::Io(e.into()))?;
        let (peer, ours) = (cred.uid.as_raw(), rustix::process::geteuid().as_raw());
        let pid = cred.pid.as_raw_pid();
        if peer != ours {
            return Err(UpgradeError::ForeignPeer { pid, peer, ours });
        }
        Ok(pid)
    }

    /// Sends one message.
    pub fn send(&mut self, message: &Message<'_>) -> Result<(), UpgradeError> {
        self.send_with_fds(message, &[])
    }

    /// Sends one message with `fds` attached to its first byte.
    pub fn send_with_fds(&mut self, message: &Message<'_>, fds: &[BorrowedFd<'_>]) -> Result<(), UpgradeError> {
        let mut bytes = Zeroizing::new(Vec::new());
        handoff::encode(message, &mut bytes)?;
        let mut sent = 0;
        if !fds.is_empty() {
            let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
            let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
            if !control.push(rustix::net::SendAncillaryMessage::ScmRights(fds)) {
                return Err(UpgradeError::Descriptors("too many descriptors for one message"));
            }
            sent = rustix::net::sendmsg(
                &self.stream,
                &[IoSlice::new(&bytes)],
                &mut control,
                rustix::net::SendFlags::NOSIGNAL,
            )
            .map_err(|e| self.io_error(e.into()))?;
        }
        self.stream.write_all(&bytes[sent..]).map_err(|e| self.io_error(e))
    }

    /// Receives the next frame; descriptors that came with it wait for [`Channel::take_fds`].
    pub fn recv(&mut self) -> Result<Frame, UpgradeError> {
        loop {
            if let Some(len) = handoff::frame_len(&self.buf)? {
                if self.buf.len() >= len {
                    let rest = Zeroizing::new(self.buf[len..].to_vec());
                    let mut frame = std::mem::replace(&mut self.buf, rest);
                    frame.truncate(len);
                    return Ok(Frame(frame));
                }
            }
            self.read_more()?;
        }
    }

    /// Receives the next frame and decodes it with `f` (which may keep nothing borrowed).
    pub fn recv_with<T>(&mut self, f: impl FnOnce(Message<'_>) -> Result<T, UpgradeError>) -> Result<T, UpgradeError> {
        let frame = self.recv()?;
        f(frame.message()?)
    }

    /// The next `n` descriptors received, in order.
    pub fn take_fds(&mut self, n: usize) -> Result<Vec<OwnedFd>, UpgradeError> {
        if self.fds.len() < n {
            return Err(UpgradeError::Descriptors(
                "a sockets message came with fewer descriptors than it lists",
            ));
        }
        Ok(self.fds.drain(..n).collect())
    }

    /// Whether descriptors came that no message claimed.
    pub fn unclaimed_fds(&self) -> usize {
        self.fds.len()
    }

    /// One `recvmsg`: bytes onto the buffer, descriptors onto the queue.
    fn read_more(&mut self) -> Result<(), UpgradeError> {
        let mut chunk = Zeroizing::new(vec![0u8; READ_CHUNK]);
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_READ))];
        let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
        let got = rustix::net::recvmsg(
            &self.stream,
            &mut [IoSliceMut::new(&mut chunk)],
            &mut control,
            rustix::net::RecvFlags::CMSG_CLOEXEC,
        )
        .map_err(|e| self.io_error(e.into()))?;
        for message in control.drain() {
            if let rustix::net::RecvAncillaryMessage::ScmRights(fds) = message {
                self.fds.extend(fds);
            }
        }
        if got.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
            return Err(UpgradeError::Descriptors(
                "descriptors were lost (control data truncated)",
            ));
        }
        if self.fds.len() > MAX_PENDING_FDS {
            return Err(UpgradeError::Descriptors(
                "more descriptors than any gateway has sockets",
            ));
        }
        if got.bytes == 0 {
            return Err(UpgradeError::Closed);
        }
        self.buf.extend_from_slice(&chunk[..got.bytes]);
        Ok(())
    }

    fn io_error(&self, e: std::io::Error) -> UpgradeError {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => UpgradeError::Timeout(self.timeout),
            std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::UnexpectedEof => UpgradeError::Closed,
            _ => UpgradeError::Io(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use tlsgate_wire::handoff::SocketKind;

    fn pair() -> (Channel, Channel) {
        let (a, b) = UnixStream::pair().unwrap();
        let t = Duration::from_secs(5);
        (Channel::new(a, t).unwrap(), Channel::new(b, t).unwrap())
    }

    #[test]
    fn frames_and_listening_sockets_cross_together() {
        let (mut a, mut b) = pair();
        assert_eq!(a.check_peer().unwrap(), std::process::id() as i32);
        let listeners: Vec<_> = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let fds: Vec<_> = listeners.iter().map(|l| l.as_fd()).collect();
        a.send(&Message::Welcome { version: 1, pid: 7 }).unwrap();
        a.send_with_fds(
            &Message::Sockets {
                kinds: vec![SocketKind::Listener; 3],
            },
            &fds,
        )
        .unwrap();
        a.send(&Message::StateEnd).unwrap();
        assert_eq!(
            b.recv().unwrap().message().unwrap(),
            Message::Welcome { version: 1, pid: 7 }
        );
        let n = b
            .recv_with(|m| match m {
                Message::Sockets { kinds } => Ok(kinds.len()),
                other => Err(UpgradeError::unexpected("sockets", &other)),
            })
            .unwrap();
        let got = b.take_fds(n).unwrap();
        for (fd, l) in got.into_iter().zip(&listeners) {
            let same = std::net::TcpListener::from(fd);
            assert_eq!(same.local_addr().unwrap(), l.local_addr().unwrap());
        }
        assert_eq!(b.recv().unwrap().message().unwrap(), Message::StateEnd);
        assert_eq!(b.unclaimed_fds(), 0);
        assert!(matches!(b.take_fds(1), Err(UpgradeError::Descriptors(_))));
    }

    #[test]
    fn a_large_frame_arrives_whole() {
        let (mut a, mut b) = pair();
        let sender = std::thread::spawn(move || {
            let der = vec![0x5a; 60_000];
            let ids: Vec<[u8; 1]> = (0..16u8).map(|i| [i]).collect();
            let sessions = ids
                .iter()
                .map(|id| handoff::SessionRecord {
                    id,
                    der: &der,
                    ttl_ms: 1,
                })
                .collect();
            a.send(&Message::Sessions { sessions }).unwrap();
            a
        });
        let n = b
            .recv_with(|m| match m {
                Message::Sessions { sessions } => Ok(sessions.len()),
                other => Err(UpgradeError::unexpected("sessions", &other)),
            })
            .unwrap();
        assert_eq!(n, 16);
        drop(sender.join().unwrap());
        assert!(matches!(b.recv(), Err(UpgradeError::Closed)));
    }

    #[test]
    fn hostile_bytes_and_silence_are_errors() {
        let (a, mut b) = pair();
        (&a.stream).write_all(&[0xff, 0xff, 0xff, 0xff, 0x01]).unwrap();
        let e = b.recv().err().expect("oversized frame refused");
        assert_eq!((e.kind(), e.side()), ("upgrade_protocol", Side::Downstream));
        let (_a, mut b) = pair();
        b.set_timeout(Duration::from_millis(50)).unwrap();
        let e = b.recv().err().expect("times out");
        assert!(matches!(e, UpgradeError::Timeout(_)), "{e}");
        let refused = UpgradeError::unexpected("welcome", &Message::Refused { reason: "no" });
        assert_eq!(refused.to_string(), "the running gateway refused the upgrade: no");
        assert!(UpgradeError::unexpected("welcome", &Message::Busy { pid: 3 }).retry_safe());
    }
}

//! systemd readiness notification (`Type=notify`): the sd_notify protocol spoken directly over a
//! Unix datagram socket, no libsystemd.
//!
//! When `$NOTIFY_SOCKET` names a socket (a path, or an abstract name written `@name`), `serve`
//! sends one datagram per state change:
//!
//! - `READY=1`, `STATUS=`, `MAINPID=` once every worker's listeners accept (and the signal
//!   handlers are installed, so a reload systemd sends at once is not fatal);
//! - `RELOADING=1` + `MONOTONIC_USEC=` (`CLOCK_MONOTONIC`, µs: systemd 253's `notify-reload`
//!   semantics) when SIGHUP arrives, then `READY=1` + `STATUS=` after the reload, also when it
//!   was refused (the old configuration keeps serving; `STATUS=` says so);
//! - `STOPPING=1` when draining starts (SIGTERM, SIGINT), but not when draining after a binary
//!   upgrade handed over: the successor is the service's main process by then;
//! - in a successor (`serve --upgrade`), once the old process stopped accepting: `READY=1`,
//!   `STATUS=`, `MAINPID=` of the successor, then `BARRIER=1` with a pipe's write end, waiting
//!   until systemd has read everything before it (sd_notify_barrier): only then is the old
//!   process released to drain and exit, so systemd never sees its main process exit.
//!
//! No `$NOTIFY_SOCKET`: every call does nothing. A send that fails is a WARN line, never fatal.
//!
//! `$NOTIFY_SOCKET` is left in the environment (sd_notify's `unset_environment` is false): the
//! gateway starts no child that could be confused by it, removing a variable from a running
//! multi-threaded process is unsound (`std::env::remove_var` is `unsafe` in edition 2024), and a
//! successor process started for an upgrade needs it to report its own `MAINPID=`.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;
use tlsgate_error::{Classify, Side};

/// The environment variable systemd sets for `Type=notify` services.
pub const ENV: &str = "NOTIFY_SOCKET";

/// How long one notification may wait for room in the service manager's queue.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a notification could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `$NOTIFY_SOCKET` is neither an absolute path nor `@abstract-name`.
    #[error("{ENV}={0:?}: not an absolute socket path or @abstract name")]
    BadAddress(String),
    /// The local datagram socket could not be created or set up.
    #[error("cannot create the notification socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The datagram was not delivered (no listener, queue full past the timeout, ...).
    #[error("cannot notify {target}: {source}")]
    Send {
        /// `$NOTIFY_SOCKET` as read.
        target: String,
        /// The system call's error.
        #[source]
        source: std::io::Error,
    },
}

impl Classify for NotifyError {
    fn side(&self) -> Side {
        match self {
            Self::BadAddress(_) => Side::Config,
            Self::Socket(_) => Side::Internal,
            Self::Send { .. } => Side::Upstream,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::BadAddress(_) => "notify_address",
            Self::Socket(_) => "notify_socket",
            Self::Send { .. } => "notify_send",
        }
    }

    fn retry_safe(&self) -> bool {
        matches!(self, Self::Send { .. })
    }
}

/// Where notifications go: `$NOTIFY_SOCKET` resolved, with an unbound socket to send from.
#[derive(Debug)]
pub struct Notifier {
    target: String,
    addr: SocketAddr,
    socket: UnixDatagram,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`: `Ok(None)` when it is unset or empty.
    pub fn from_env() -> Result<Option<Self>, NotifyError> {
        match std::env::var_os(ENV) {
            None => Ok(None),
            Some(v) => match v.into_string() {
                Ok(s) => Self::new(&s),
                Err(raw) => Err(NotifyError::BadAddress(raw.to_string_lossy().into_owned())),
            },
        }
    }

    /// A notifier for one `$NOTIFY_SOCKET` value: `/abs/path` or `@abstract`; "" is `None`.
    pub fn new(value: &str) -> Result<Option<Self>, NotifyError> {
        if value.is_empty() {
            return Ok(None);
        }
        let addr = if let Some(name) = value.strip_prefix('@') {
            SocketAddr::from_abstract_name(name.as_bytes())
        } else if value.starts_with('/') {
            SocketAddr::from_pathname(PathBuf::from(value))
        } else {
            return Err(NotifyError::BadAddress(value.to_string()));
        }
        .map_err(|_| NotifyError::BadAddress(value.to_string()))?;
        let socket = UnixDatagram::unbound().map_err(NotifyError::Socket)?;
        socket
            .set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(NotifyError::Socket)?;
        Ok(Some(Self {
            target: value.to_string(),
            addr,
            socket,
        }))
    }

    /// `BARRIER=1` with the write end of a pipe: returns once the service manager has processed
    /// every notification sent before (it closes the descriptor then), or after `timeout`.
    pub fn barrier(&self, timeout: Duration) -> Result<(), NotifyError> {
        use std::io::IoSlice;
        use std::mem::MaybeUninit;
        use std::os::fd::AsFd;
        let send = |source: std::io::Error| NotifyError::Send {
            target: self.target.clone(),
            source,
        };
        let (read, write) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| NotifyError::Socket(e.into()))?;
        let socket = UnixDatagram::unbound().map_err(NotifyError::Socket)?;
        socket
            .set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(NotifyError::Socket)?;
        socket.connect_addr(&self.addr).map_err(send)?;
        let fds = [write.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
        control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds));
        rustix::net::sendmsg(
            &socket,
            &[IoSlice::new(b"BARRIER=1\n")],
            &mut control,
            rustix::net::SendFlags::empty(),
        )
        .map_err(|e| send(e.into()))?;
        drop(write);
        let mut poll = [rustix::event::PollFd::new(&read, rustix::event::PollFlags::IN)];
        let wait = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as i64,
        };
        match rustix::event::poll(&mut poll, Some(&wait)) {
            Ok(0) => Err(send(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("BARRIER=1 not answered within {}s", timeout.as_secs()),
            ))),
            Ok(_) => Ok(()),
            Err(e) => Err(send(e.into())),
        }
    }

    /// Sends one datagram of `KEY=value` lines.
    pub fn send(&self, message: &str) -> Result<(), NotifyError> {
        self.socket
            .send_to_addr(message.as_bytes(), &self.addr)
            .map(drop)
            .map_err(|source| NotifyError::Send {
                target: self.target.clone(),
                source,
            })
    }
}

/// The message sent once the gateway serves (also after each reload).
pub fn ready_message(status: &str, pid: u32) -> String {
    format!("READY=1\nSTATUS={}\nMAINPID={pid}\n", one_line(status))
}

/// The message sent when a reload starts, stamped with `CLOCK_MONOTONIC` in µs.
pub fn reloading_message(monotonic_usec: u64) -> String {
    format!("RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC={monotonic_usec}\n")
}

/// The message sent when draining starts.
pub fn stopping_message(drain: Duration) -> String {
    format!(
        "STOPPING=1\nSTATUS=draining connections for up to {}s\n",
        drain.as_secs()
    )
}

/// `STATUS=` after a reload: what serves now, and why a refused reload was refused.
pub fn reload_status<T, E: std::fmt::Display>(result: &Result<T, E>, generation: u64) -> String {
    match result {
        Ok(_) => format!("serving generation {generation} (reloaded)"),
        Err(e) => format!("reload failed, still serving generation {generation}: {e}"),
    }
}

/// `CLOCK_MONOTONIC` now, in microseconds (what systemd compares `MONOTONIC_USEC` with).
pub fn monotonic_usec() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(t) => (t.tv_sec() as u64) * 1_000_000 + (t.tv_nsec() as u64) / 1_000,
        Err(_) => 0,
    }
}

/// A value on one line: the protocol separates fields by newlines.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

// ---- The process-wide notifier that `serve` calls into. ----

static NOTIFIER: OnceLock<Option<Notifier>> = OnceLock::new();
static EXPECTED_WORKERS: AtomicUsize = AtomicUsize::new(0);
static ACCEPTING_WORKERS: AtomicUsize = AtomicUsize::new(0);

fn notifier() -> Option<&'static Notifier> {
    NOTIFIER
        .get_or_init(|| match Notifier::from_env() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(kind = e.kind(), "systemd notification disabled: {e}");
                None
            }
        })
        .as_ref()
}

fn send(message: &str) {
    if let Some(n) = notifier() {
        match n.send(message) {
            Ok(()) => tracing::debug!(message = %message.trim_end().replace('\n', " "), "notified systemd"),
            Err(e) => tracing::warn!(kind = e.kind(), "{e}"),
        }
    }
}

/// How many workers [`ready`] waits for.
pub fn expect_workers(n: usize) {
    EXPECTED_WORKERS.store(n, Ordering::SeqCst);
}

/// Called by each worker once its accept loops are spawned: lets them run once (each registers
/// its listener and waits in accept) before counting the worker as accepting.
pub async fn worker_accepting() {
    tokio::task::yield_now().await;
    ACCEPTING_WORKERS.fetch_add(1, Ordering::SeqCst);
}

/// Resolves once every expected worker accepts (never, when one failed to start).
pub async fn workers_accepting() -> usize {
    let workers = EXPECTED_WORKERS.load(Ordering::SeqCst);
    while ACCEPTING_WORKERS.load(Ordering::SeqCst) < workers {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    workers
}

/// Sends `READY=1` once every expected worker accepts. Spawned by the control loop after its
/// signal handlers are in place; never returns early when a worker failed to start (systemd's
/// start timeout then reports the failure).
pub async fn ready(listeners: usize, generation: u64) {
    if notifier().is_none() {
        return;
    }
    let workers = workers_accepting().await;
    let status = format!("serving {listeners} listener(s) with {workers} worker(s), generation {generation}");
    send(&ready_message(&status, std::process::id()));
}

/// How long a successor waits for systemd to acknowledge its `MAINPID=` (sd_notify_barrier's
/// default).
const BARRIER_TIMEOUT: Duration = Duration::from_secs(5);

/// A successor took over from `old_pid`: `READY=1` and `MAINPID=` (this process), then a
/// barrier, so that systemd knows its new main process before the old one may exit. Blocking
/// (up to [`BARRIER_TIMEOUT`]); call it off the event loop.
pub fn took_over(listeners: usize, generation: u64, old_pid: u32) {
    let Some(n) = notifier() else { return };
    let workers = EXPECTED_WORKERS.load(Ordering::SeqCst);
    let status = format!(
        "serving {listeners} listener(s) with {workers} worker(s), generation {generation} (upgraded, took over from process {old_pid})"
    );
    send(&ready_message(&status, std::process::id()));
    match n.barrier(BARRIER_TIMEOUT) {
        Ok(()) => tracing::debug!("systemd acknowledged MAINPID={}", std::process::id()),
        Err(e) => tracing::warn!(kind = e.kind(), "{e}"),
    }
}

/// SIGHUP arrived: `RELOADING=1` with the monotonic time, before the file is re-read.
pub fn reloading() {
    if notifier().is_some() {
        send(&reloading_message(monotonic_usec()));
    }
}

/// The reload is over (installed or refused): `READY=1` and a `STATUS=` saying which.
pub fn reloaded<T, E: std::fmt::Display>(result: &Result<T, E>, generation: u64) {
    if notifier().is_some() {
        send(&ready_message(&reload_status(result, generation), std::process::id()));
    }
}

/// Draining starts: `STOPPING=1`.
pub fn stopping(drain: Duration) {
    if notifier().is_some() {
        send(&stopping_message(drain));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver() -> (tempfile::TempDir, UnixDatagram, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (dir, sock, path.to_str().unwrap().to_string())
    }

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn sends_to_a_path_socket() {
        let (_dir, sock, path) = receiver();
        let n = Notifier::new(&path).unwrap().unwrap();
        n.send(&ready_message("up", 42)).unwrap();
        assert_eq!(recv(&sock), "READY=1\nSTATUS=up\nMAINPID=42\n");
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let name = format!("tlsgate-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = Notifier::new(&format!("@{name}")).unwrap().unwrap();
        n.send("STOPPING=1\n").unwrap();
        assert_eq!(recv(&sock), "STOPPING=1\n");
    }

    #[test]
    fn empty_is_none_and_relative_is_an_error() {
        assert!(Notifier::new("").unwrap().is_none());
        let e = Notifier::new("run/notify").unwrap_err();
        assert_eq!((e.side(), e.kind()), (Side::Config, "notify_address"));
        assert!(e.to_string().contains("run/notify"), "{e}");
        let e = Notifier::new("vsock:2:1234").unwrap_err();
        assert_eq!(e.kind(), "notify_address");
        let long = format!("/{}", "x".repeat(200));
        assert_eq!(Notifier::new(&long).unwrap_err().kind(), "notify_address");
    }

    #[test]
    fn a_missing_listener_is_a_send_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nobody.sock");
        let n = Notifier::new(path.to_str().unwrap()).unwrap().unwrap();
        let e = n.send("READY=1\n").unwrap_err();
        assert_eq!(
            (e.side(), e.kind(), e.retry_safe()),
            (Side::Upstream, "notify_send", true)
        );
        assert!(e.to_string().contains("nobody.sock"), "{e}");
    }

    #[test]
    fn messages() {
        assert_eq!(
            reloading_message(123),
            "RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=123\n"
        );
        assert_eq!(
            stopping_message(Duration::from_secs(30)),
            "STOPPING=1\nSTATUS=draining connections for up to 30s\n"
        );
        // A multi-line reason stays one STATUS= line.
        let failed: Result<(), String> = Err("bad\nfile".into());
        let status = reload_status(&failed, 3);
        assert_eq!(status, "reload failed, still serving generation 3: bad\nfile");
        assert_eq!(
            ready_message(&status, 7),
            "READY=1\nSTATUS=reload failed, still serving generation 3: bad file\nMAINPID=7\n"
        );
        let ok: Result<(), String> = Ok(());
        assert_eq!(reload_status(&ok, 4), "serving generation 4 (reloaded)");
    }

    #[test]
    fn a_barrier_returns_once_the_manager_read_it() {
        let (_dir, sock, path) = receiver();
        let n = Notifier::new(&path).unwrap().unwrap();
        // Nobody reads: the barrier times out, with a clear error.
        let e = n.barrier(Duration::from_millis(50)).unwrap_err();
        assert!(e.to_string().contains("BARRIER=1 not answered"), "{e}");
        // A reader that takes the datagram (and so closes the descriptor it carries).
        let reader = std::thread::spawn(move || {
            let first = recv(&sock);
            let second = recv(&sock);
            (first, second)
        });
        n.barrier(Duration::from_secs(5)).unwrap();
        let (first, second) = reader.join().unwrap();
        assert_eq!((first.as_str(), second.as_str()), ("BARRIER=1\n", "BARRIER=1\n"));
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_usec();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_usec();
        assert!(a > 0 && b >= a + 1_000, "{a} {b}");
    }
}

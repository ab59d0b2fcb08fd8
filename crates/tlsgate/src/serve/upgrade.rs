//! Binary upgrades as the control loop sees them (docs/OPERATIONS.md, "Upgrading the binary"):
//! with `[server] upgrade_socket` the gateway takes successors on it ([`handover`]); SIGUSR2
//! starts one ([`successor`]); `serve --upgrade` makes this process a successor ([`takeover`]),
//! which tells the old process `Ready` once every worker accepts and becomes systemd's main
//! process once that one stopped accepting. Which process may speak to systemd is decided here:
//! the one that is the service's main process (not an old one that handed over, not a successor
//! still taking over).
//!
//! [`handover`]: super::handover
//! [`successor`]: super::successor
//! [`takeover`]: super::takeover

use super::channel::UpgradeError;
use super::handover::{lock, Event, Handover, QuicSurplus, UPGRADE_TIMEOUT};
use super::takeover::{Confirmed, Takeover};
use super::{notify, successor, upgrade_socket};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tlsgate_config::Config;
use tlsgate_error::Classify;
use tlsgate_proxy::downstream::quic::surplus::Surplus;
use tlsgate_proxy::Gateway;
use tlsgate_wire::handoff::SocketKind;
use tokio::sync::mpsc;

/// Connects to the gateway running with this configuration's upgrade socket (`serve --upgrade`).
pub fn connect(config: &Config, path: &Path) -> Result<Takeover, UpgradeError> {
    let socket = config
        .server
        .upgrade_socket
        .as_deref()
        .ok_or_else(|| UpgradeError::NotConfigured(path.to_path_buf()))?;
    let takeover = Takeover::connect(socket)?;
    tracing::info!(
        old = takeover.old_pid(),
        socket = %socket.display(),
        "upgrade: taking over from process {}",
        takeover.old_pid()
    );
    Ok(takeover)
}

/// A successor whose configuration does not load: if the file still names an upgrade socket
/// (it parses, but does not validate: a certificate file is missing, say), the running gateway
/// there is told why (it logs it and keeps serving); the error says whether it was.
pub fn refuse_unloadable(path: &Path, error: anyhow::Error) -> anyhow::Error {
    let socket = std::fs::read_to_string(path).ok().and_then(|text| {
        let mut config = tlsgate_config::parse(&text).ok()?;
        tlsgate_config::resolve_paths(&mut config, path.parent().unwrap_or(Path::new(".")));
        config.server.upgrade_socket
    });
    let Some(socket) = socket else { return error };
    match Takeover::connect(&socket) {
        Ok(takeover) => {
            let old = takeover.old_pid();
            takeover.fail(&format!("{error:#}"));
            error.context(format!("upgrade failed, process {old} keeps serving"))
        }
        Err(e) => error.context(format!("upgrade failed ({e})")),
    }
}

/// What the control loop does next after an upgrade event.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on serving.
    Continue,
    /// SIGTERM or SIGINT: drain and exit 0.
    Stop,
    /// A successor took over: drain (without a word to systemd) and exit 0.
    HandedOver,
    /// This successor could not take over after it started accepting: drain and exit 1.
    Failed,
}

/// The upgrade machinery of one `serve` process.
pub struct Upgrades {
    handover: Option<Arc<Handover>>,
    listener: Option<std::os::unix::net::UnixListener>,
    path: Option<PathBuf>,
    accept_task: Option<tokio::task::JoinHandle<()>>,
    events_tx: mpsc::UnboundedSender<Event>,
    events: mpsc::UnboundedReceiver<Event>,
    /// Set while this process is a successor that has not taken over yet.
    takeover: Option<Takeover>,
    /// An upgrade socket the old process used and this configuration moved away from.
    stale_path: Option<PathBuf>,
    is_main: bool,
    /// QUIC sockets taken over beyond the workers, closed once the old process has exited.
    quic_surplus: QuicSurplus,
}

/// How often a successor looks whether the old process has exited (to close surplus sockets).
const EXIT_POLL: Duration = Duration::from_millis(200);

impl Upgrades {
    /// Sets up for `gateway`: `sockets` are duplicates of every listening socket (with the
    /// upgrade socket's own, if any, added here) for a future successor.
    pub fn new(
        gateway: &Arc<Gateway>,
        config: &Config,
        mut sockets: Vec<(SocketKind, OwnedFd)>,
        quic_secret: Option<[u8; 32]>,
        quic_surplus: Option<Surplus>,
        listener: Option<std::os::unix::net::UnixListener>,
        stale_path: Option<PathBuf>,
    ) -> std::io::Result<Self> {
        let (events_tx, events) = mpsc::unbounded_channel();
        let quic_surplus: QuicSurplus = Arc::new(Mutex::new(quic_surplus));
        let handover = match &listener {
            Some(l) => {
                sockets.push((SocketKind::Upgrade, OwnedFd::from(l.try_clone()?)));
                Some(Handover::new(
                    gateway.clone(),
                    sockets,
                    quic_secret,
                    quic_surplus.clone(),
                    events_tx.clone(),
                ))
            }
            None => None,
        };
        Ok(Self {
            handover,
            listener,
            path: config.server.upgrade_socket.clone(),
            accept_task: None,
            events_tx,
            events,
            takeover: None,
            stale_path,
            is_main: true,
            quic_surplus,
        })
    }

    /// Makes this process a successor: it is not systemd's main process until it took over.
    pub fn taking_over(&mut self, takeover: Takeover) {
        self.takeover = Some(takeover);
        self.is_main = false;
    }

    /// Whether this process may speak for the service to systemd.
    pub fn is_main(&self) -> bool {
        self.is_main && !self.handover.as_ref().is_some_and(|h| h.handed_over())
    }

    /// In the control loop, once its signal handlers are in place: a successor waits for its
    /// workers and says `Ready`; any other process says `READY=1` to systemd and takes
    /// successors.
    pub fn begin(&mut self, listeners: usize, generation: u64) {
        match self.takeover.take() {
            Some(takeover) => {
                let tx = self.events_tx.clone();
                tokio::spawn(async move {
                    // A worker that never starts accepting: the old process would give up on
                    // this one anyway; this one says so itself (dropping the channel) and exits.
                    let result = match tokio::time::timeout(UPGRADE_TIMEOUT, notify::workers_accepting()).await {
                        Ok(_) => tokio::task::spawn_blocking(move || confirm(takeover, listeners, generation))
                            .await
                            .unwrap_or_else(|e| Err(UpgradeError::Io(std::io::Error::other(e)))),
                        Err(_) => Err(UpgradeError::Timeout(UPGRADE_TIMEOUT)),
                    };
                    let _ = tx.send(Event::TakenOver(result));
                });
            }
            None => {
                tokio::spawn(notify::ready(listeners, generation));
                self.accept();
            }
        }
    }

    fn accept(&mut self) {
        let (Some(handover), Some(listener)) = (&self.handover, self.listener.take()) else {
            return;
        };
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixListener::from_std(listener));
        match listener {
            Ok(l) => self.accept_task = Some(tokio::spawn(handover.clone().accept(l))),
            Err(e) => tracing::error!(error = %e, "cannot take upgrades on the upgrade socket"),
        }
    }

    /// The next event (never resolves without upgrades).
    pub async fn next_event(&mut self) -> Event {
        match self.events.recv().await {
            Some(e) => e,
            None => std::future::pending().await,
        }
    }

    /// Acts on an event.
    pub fn on_event(&mut self, event: Event) -> Flow {
        match event {
            Event::HandedOver { pid } => {
                tracing::info!(
                    successor = pid,
                    "upgrade: handed over to process {pid}; draining, then exiting"
                );
                Flow::HandedOver
            }
            Event::TakenOver(Ok(old)) => {
                self.is_main = true;
                if let Some(stale) = self.stale_path.take() {
                    if Some(&stale) != self.path.as_ref() {
                        upgrade_socket::remove(&stale);
                    }
                }
                self.accept();
                tracing::info!(
                    old,
                    "upgrade complete: this process serves; process {old} drains and exits"
                );
                self.close_quic_surplus_after(old);
                Flow::Continue
            }
            Event::TakenOver(Err(e)) => {
                tracing::error!(
                    kind = e.kind(),
                    "upgrade failed after this process started accepting: {e}; the old process keeps serving, this one drains and exits"
                );
                Flow::Failed
            }
        }
    }

    /// Closes the QUIC sockets taken over beyond this process's workers once process `old`
    /// has exited (its connections named them), unless a successor has taken them over by then
    /// (it gets them with the rest and decides for itself).
    fn close_quic_surplus_after(&self, old: u32) {
        if lock(&self.quic_surplus).is_none() {
            return;
        }
        let surplus = self.quic_surplus.clone();
        let handover = self.handover.clone();
        tokio::spawn(async move {
            let watched = ProcessId::read(old);
            while watched.as_ref().is_some_and(ProcessId::running) {
                tokio::time::sleep(EXIT_POLL).await;
            }
            // A successor being served now may still fail and leave them to this process:
            // try again until one has taken over or the sockets are closed.
            loop {
                let (surplus, handover) = (surplus.clone(), handover.clone());
                let retire = move || {
                    let close = || lock(&surplus).take().map(|s| s.retire(Duration::from_secs(2)));
                    match &handover {
                        Some(h) if h.handed_over() => true,
                        Some(h) => h.without_successor(close).is_some(),
                        None => {
                            close();
                            true
                        }
                    }
                };
                match tokio::task::spawn_blocking(retire).await {
                    Ok(false) => tokio::time::sleep(EXIT_POLL).await,
                    Ok(true) | Err(_) => break,
                }
            }
            if handover.as_ref().is_some_and(|h| h.handed_over()) {
                tracing::info!("upgrade: a successor took the surplus QUIC sockets over; not closing them");
            }
        });
    }

    /// SIGUSR2: start a successor.
    pub fn on_usr2(&self, config_path: &Path) {
        let Some(handover) = &self.handover else {
            let e = UpgradeError::NotConfigured(config_path.to_path_buf());
            return tracing::error!(kind = e.kind(), "SIGUSR2 ignored: {e}");
        };
        if !self.is_main() || self.accept_task.is_none() {
            return tracing::warn!("SIGUSR2 ignored: this process is itself still taking over");
        }
        if let Some(pid) = handover.in_progress() {
            return tracing::warn!("SIGUSR2 ignored: process {pid} is taking over already");
        }
        if let Err(e) = successor::spawn() {
            tracing::error!(error = %e, "SIGUSR2: cannot start the new process; still serving");
        }
    }

    /// Draining starts: no more successors; on a plain stop the socket file is removed (after
    /// a handover the successor listens on it).
    pub fn finish(&mut self, flow: &Flow) {
        if let Some(task) = self.accept_task.take() {
            task.abort();
        }
        if let Some(h) = &self.handover {
            h.close();
        }
        if *flow != Flow::HandedOver && self.is_main {
            if let (Some(path), Some(_)) = (&self.path, &self.handover) {
                upgrade_socket::remove(path);
            }
        }
    }
}

/// `Ready` → `Draining`, then `MAINPID=` to systemd; returns the old process's ID. The channel
/// closes on return, which releases the old process to drain and exit.
fn confirm(takeover: Takeover, listeners: usize, generation: u64) -> Result<u32, UpgradeError> {
    let old = takeover.old_pid();
    match takeover.ready()? {
        Confirmed::Draining => {}
        Confirmed::OldGone(e) => {
            tracing::warn!("upgrade: process {old} did not confirm ({e}); this process serves on")
        }
    }
    notify::took_over(listeners, generation, old);
    Ok(old)
}

/// A process, told apart from a later one with the same ID by its start time.
struct ProcessId {
    pid: u32,
    start: String,
}

impl ProcessId {
    /// `None` when no process `pid` runs now.
    fn read(pid: u32) -> Option<Self> {
        let start = process_start(pid)?;
        Some(Self { pid, start })
    }

    /// Whether it still runs (a zombie does not: it has closed its descriptors).
    fn running(&self) -> bool {
        process_start(self.pid).is_some_and(|s| s == self.start)
    }
}

/// The start time of running process `pid` (`/proc/PID/stat` field 22), `None` when it is gone
/// or a zombie.
fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    let mut fields = rest.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    // After the state (field 3), field 22 is the 19th.
    fields.nth(18).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_runs_until_it_has_exited_and_a_zombie_does_not() {
        let me = ProcessId::read(std::process::id()).expect("this process");
        assert!(me.running());
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let watched = ProcessId::read(child.id()).expect("the child runs");
        assert!(watched.running());
        child.kill().unwrap();
        // Killed but not reaped yet: a zombie.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while watched.running() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!watched.running(), "a zombie counts as exited");
        child.wait().unwrap();
        assert!(!watched.running());
        assert!(ProcessId::read(child.id()).is_none());
        let other = ProcessId {
            pid: std::process::id(),
            start: "0".into(),
        };
        assert!(!other.running(), "another start time: another process");
    }
}

//! The running gateway's side of a binary upgrade: it listens on `[server] upgrade_socket`, and
//! to one successor at a time (`tlsgate serve --upgrade`, same user only) it hands duplicates of
//! its listening sockets (listeners, admin, the upgrade socket itself), its ticket keys, its
//! QUIC reset and Retry secret and its session cache. Until the successor says `Ready` nothing changes here: a successor that fails
//! (`Failed`, a crash, silence past [`UPGRADE_TIMEOUT`]) leaves this process serving as before,
//! and the failure is logged. On `Ready` this process stops accepting (the successor accepts
//! from the same sockets, so no connection is refused), answers `Draining`, waits for the
//! successor to confirm to systemd and close the channel, then drains and exits
//! ([`Event::HandedOver`]). A second successor while one is in progress gets `Busy`.

use super::channel::{Channel, UpgradeError};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tlsgate_error::Classify;
use tlsgate_proxy::Gateway;
use tlsgate_wire::handoff::{self, Message, SessionRecord, SocketKind, TicketKeyRecord};

/// How long a successor has to say `Hello` once connected.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a successor may take from `Hello` to `Ready` (building every certificate context,
/// joining the cluster, starting its workers) before this process gives up on it.
pub const UPGRADE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long, after `Draining`, the successor may take to tell systemd and close the channel.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(15);

/// Successors this process turned away or that failed, for `/metrics`
/// (`tlsgate_state{name="upgrades_refused_total"}`, `..."upgrades_failed_total"}`).
pub static STATS: Stats = Stats {
    refused: AtomicU64::new(0),
    failed: AtomicU64::new(0),
};

/// Upgrade counters.
pub struct Stats {
    /// Connections refused: another upgrade in progress, another user, another protocol
    /// version, shutting down.
    pub refused: AtomicU64,
    /// Successors that failed before `Ready`: they could not start, went away, broke the
    /// protocol or took too long.
    pub failed: AtomicU64,
}

/// What the control loop hears from the upgrade machinery.
#[derive(Debug)]
pub enum Event {
    /// This process handed over to the successor `pid`: it no longer accepts; drain and exit.
    HandedOver {
        /// The successor's process ID.
        pid: u32,
    },
    /// (In a successor) the takeover is over: confirmed, or why not.
    TakenOver(Result<u32, UpgradeError>),
}

/// QUIC sockets taken over beyond the workers (`quic::surplus`), shared by the handover (which
/// hands them on) and the upgrade machinery (which closes them once the old process is gone).
pub type QuicSurplus = Arc<Mutex<Option<tlsgate_proxy::downstream::quic::surplus::Surplus>>>;

/// The state a successor takes over, and the one-at-a-time lock.
pub struct Handover {
    gateway: Arc<Gateway>,
    /// Duplicates of every listening socket; dropped when draining starts (so that, on a plain
    /// stop, the closed listeners refuse new connections at once).
    sockets: Mutex<Option<Vec<(SocketKind, OwnedFd)>>>,
    /// The QUIC reset and Retry secret (when HTTP/3 is served).
    quic_secret: Option<[u8; 32]>,
    /// QUIC sockets taken over beyond this process's workers, until closed: a successor gets
    /// them after the workers' (each group whole, in order).
    quic_surplus: QuicSurplus,
    /// The process ID of the successor being served now.
    busy: Mutex<Option<u32>>,
    handed_over: AtomicBool,
    events: tokio::sync::mpsc::UnboundedSender<Event>,
}

impl Handover {
    /// The machinery for `sockets` (each kind with a duplicate of its descriptor).
    pub fn new(
        gateway: Arc<Gateway>,
        sockets: Vec<(SocketKind, OwnedFd)>,
        quic_secret: Option<[u8; 32]>,
        quic_surplus: QuicSurplus,
        events: tokio::sync::mpsc::UnboundedSender<Event>,
    ) -> Arc<Self> {
        Arc::new(Self {
            gateway,
            sockets: Mutex::new(Some(sockets)),
            quic_secret,
            quic_surplus,
            busy: Mutex::new(None),
            handed_over: AtomicBool::new(false),
            events,
        })
    }

    /// Whether a successor took over (this process must then not tell systemd it stops: the
    /// successor is the service's main process now).
    pub fn handed_over(&self) -> bool {
        self.handed_over.load(Ordering::SeqCst)
    }

    /// The successor being served now, if any.
    pub fn in_progress(&self) -> Option<u32> {
        *lock(&self.busy)
    }

    /// Runs `f` while no successor can start (one asking now waits for it); `None` without
    /// running it when one is taking over or has taken over.
    pub fn without_successor<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let busy = lock(&self.busy);
        if busy.is_some() || self.handed_over() {
            return None;
        }
        let r = f();
        drop(busy);
        Some(r)
    }

    /// Draining starts: no successor can be served any more; the duplicates are closed.
    pub fn close(&self) {
        lock(&self.sockets).take();
    }

    /// Accepts successors on the upgrade socket until the task is aborted.
    pub async fn accept(self: Arc<Self>, listener: tokio::net::UnixListener) {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    static ACCEPT_FAILED_LOG: tlsgate_error::log_limit::LogLimit =
                        tlsgate_error::log_limit::LogLimit::new(Duration::from_secs(1));
                    if let Some(suppressed) = ACCEPT_FAILED_LOG.allow() {
                        tracing::warn!(error = %e, suppressed, "upgrade socket: accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let stream = match stream.into_std() {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "upgrade socket: cannot take the connection");
                    continue;
                }
            };
            let me = self.clone();
            if let Err(e) = std::thread::Builder::new()
                .name("tlsgate-upgrade".into())
                .spawn(move || me.serve(stream))
            {
                tracing::error!(error = %e, "upgrade socket: cannot start a thread for a successor");
            }
        }
    }

    /// One successor's connection, on a thread of its own.
    fn serve(&self, stream: UnixStream) {
        let mut channel = match Channel::new(stream, HELLO_TIMEOUT) {
            Ok(c) => c,
            Err(e) => return tracing::warn!(kind = e.kind(), "upgrade connection: {e}"),
        };
        let pid = match channel.check_peer() {
            Ok(pid) => pid.max(0) as u32,
            Err(e) => {
                STATS.refused.fetch_add(1, Ordering::Relaxed);
                return tracing::warn!(kind = e.kind(), "upgrade connection refused: {e}");
            }
        };
        {
            let mut busy = lock(&self.busy);
            if let Some(other) = *busy {
                tracing::warn!(
                    successor = pid,
                    in_progress = other,
                    "upgrade refused: process {other} is taking over already"
                );
                let _ = channel.send(&Message::Busy { pid: other });
                STATS.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if lock(&self.sockets).is_none() {
                let _ = channel.send(&Message::Refused {
                    reason: "the running gateway is shutting down",
                });
                STATS.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            *busy = Some(pid);
        }
        tracing::info!(successor = pid, "upgrade: process {pid} connected to take over");
        let result = self.hand_over(&mut channel, pid);
        if let Ok(false) = result {
            tracing::info!(
                successor = pid,
                "upgrade: process {pid} closed the connection without a word"
            );
        }
        if let Err(e) = &result {
            let counter = match e {
                UpgradeError::Refused(_) => &STATS.refused,
                _ => &STATS.failed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let reason = e.to_string();
            tracing::error!(
                successor = pid,
                kind = e.kind(),
                "upgrade by process {pid} failed, still serving with this process: {reason}"
            );
            if !matches!(
                e,
                UpgradeError::Closed | UpgradeError::Refused(_) | UpgradeError::SuccessorFailed(_)
            ) {
                let reason = truncate(&reason);
                let _ = channel.send(&Message::Refused { reason: &reason });
            }
        }
        drop(channel);
        match result {
            Ok(true) => {
                let _ = self.events.send(Event::HandedOver { pid });
            }
            Ok(false) | Err(_) => {
                tlsgate_proxy::downstream::quic::link::successor_attached(false);
                *lock(&self.busy) = None;
            }
        }
    }

    /// The conversation: `Ok(true)` once the successor is ready and this process stopped
    /// accepting; `Ok(false)` when it left before saying anything (a liveness probe).
    fn hand_over(&self, channel: &mut Channel, pid: u32) -> Result<bool, UpgradeError> {
        let hello = channel.recv_with(|m| match m {
            Message::Hello { version, .. } => Ok(version),
            Message::Failed { reason } => Err(failed(reason)),
            other => Err(UpgradeError::unexpected("hello", &other)),
        });
        let version = match hello {
            Err(UpgradeError::Closed) => return Ok(false),
            other => other?,
        };
        if version != handoff::VERSION {
            let reason = format!(
                "the new process speaks upgrade protocol version {version}, this gateway version {}",
                handoff::VERSION
            );
            let _ = channel.send(&Message::Refused { reason: &reason });
            return Err(UpgradeError::Refused(reason));
        }
        channel.send(&Message::Welcome {
            version: handoff::VERSION,
            pid: std::process::id(),
        })?;
        channel.set_timeout(UPGRADE_TIMEOUT)?;
        channel.recv_with(|m| match m {
            Message::SendState => Ok(()),
            Message::Failed { reason } => Err(failed(reason)),
            other => Err(UpgradeError::unexpected("send_state", &other)),
        })?;
        self.send_state(channel)?;
        // The successor reads the QUIC sockets from now on: datagrams of its connections that
        // this process reads go over the links to it (cleared again if it fails).
        tlsgate_proxy::downstream::quic::link::successor_attached(true);
        channel.recv_with(|m| match m {
            Message::Ready { .. } => Ok(()),
            Message::Failed { reason } => Err(failed(reason)),
            other => Err(UpgradeError::unexpected("ready", &other)),
        })?;
        // From here on the successor serves: stop accepting before saying so.
        self.handed_over.store(true, Ordering::SeqCst);
        self.gateway.begin_shutdown();
        tracing::info!(
            successor = pid,
            open = self.gateway.open_connections(),
            "upgrade: process {pid} is ready; this process stopped accepting and drains"
        );
        // Nothing can be undone now (the accept loops are gone): whatever the successor does
        // next, this process drains and exits.
        let confirmed = channel
            .send(&Message::Draining)
            .and_then(|()| channel.set_timeout(CONFIRM_TIMEOUT))
            .and_then(|()| channel.recv().map(|_| ()));
        match confirmed {
            Err(UpgradeError::Closed) => {}
            Err(e) => tracing::warn!(successor = pid, "upgrade: no confirmation from process {pid}: {e}"),
            Ok(()) => tracing::warn!(successor = pid, "upgrade: unexpected message after draining"),
        }
        Ok(true)
    }

    /// Sockets (with their descriptors), ticket keys, sessions, end.
    fn send_state(&self, channel: &mut Channel) -> Result<(), UpgradeError> {
        {
            let sockets = lock(&self.sockets);
            let Some(sockets) = sockets.as_ref() else {
                let reason = "the running gateway is shutting down";
                let _ = channel.send(&Message::Refused { reason });
                return Err(UpgradeError::Refused(reason.into()));
            };
            let surplus = lock(&self.quic_surplus);
            let surplus = surplus.as_ref().map(|s| s.handed()).unwrap_or_default();
            for chunk in sockets
                .chunks(handoff::MAX_SOCKETS_PER_FRAME)
                .chain(surplus.chunks(handoff::MAX_SOCKETS_PER_FRAME))
            {
                let kinds = chunk.iter().map(|(k, _)| *k).collect();
                let fds: Vec<_> = chunk.iter().map(|(_, fd)| fd.as_fd()).collect();
                channel.send_with_fds(&Message::Sockets { kinds }, &fds)?;
            }
        }
        let keys = self.gateway.sessions.tickets.export();
        let records: Vec<TicketKeyRecord<'_>> = keys
            .iter()
            .take(handoff::MAX_TICKET_KEYS)
            .map(|k| TicketKeyRecord {
                name: &k.name,
                aes: &k.aes,
                hmac: &k.hmac,
                retired_ms: k.retired_for.map(|d| d.as_millis() as u64),
            })
            .collect();
        channel.send(&Message::TicketKeys { keys: records })?;
        if let Some(key) = &self.quic_secret {
            channel.send(&Message::QuicSecret { key })?;
        }
        let sessions = self.gateway.sessions.cache.export();
        let mut batch = Vec::new();
        let mut size = 4;
        for s in &sessions {
            let record = SessionRecord {
                id: &s.id,
                der: &s.der,
                ttl_ms: s.ttl.as_millis() as u64,
            };
            if s.id.is_empty() || s.id.len() > handoff::MAX_SESSION_ID || s.der.len() > handoff::MAX_SESSION_DER {
                continue;
            }
            if size + record.encoded_len() > handoff::MAX_BODY {
                channel.send(&Message::Sessions {
                    sessions: std::mem::take(&mut batch),
                })?;
                size = 4;
            }
            size += record.encoded_len();
            batch.push(record);
        }
        if !batch.is_empty() {
            channel.send(&Message::Sessions { sessions: batch })?;
        }
        channel.send(&Message::StateEnd)?;
        tracing::debug!(
            ticket_keys = keys.len(),
            sessions = sessions.len(),
            "upgrade: sockets and session state sent"
        );
        Ok(())
    }
}

fn failed(reason: &str) -> UpgradeError {
    UpgradeError::SuccessorFailed(reason.to_string())
}

/// A lock that outlives a panic elsewhere (the data is a plain value, never half-written).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A reason cut to what a frame carries, on a character boundary.
pub fn truncate(reason: &str) -> String {
    let mut end = reason.len().min(handoff::MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

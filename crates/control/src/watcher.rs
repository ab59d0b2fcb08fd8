//! [`Watcher`]: follows the cluster's current version and hands the last good one to the
//! gateway through a [`tokio::sync::watch`] channel.
//!
//! - **Notification.** It SUBSCRIBEs to the `changes` channel and checks the store on every
//!   message, so a publish is seen within a round trip.
//! - **Polling fallback.** It also reads the `current` pointer every `poll_interval` (1 s by
//!   default), so a missed notification (a pub/sub connection that broke, a version written
//!   without PUBLISH) costs at most one interval.
//! - **Rejection.** A version that cannot be read or fails validation (structural, plus the
//!   caller's [`Validator`]) is never delivered as current: [`WatchState::rejected`] names it
//!   with its reasons and [`WatchState::current`] keeps the last good version. A rejected
//!   version is re-read on every poll, so repairing it in place is picked up.
//! - **Store down.** [`WatchState::store_error`] says why; the last good version stays; the
//!   watcher retries with exponential backoff (`backoff_min` … `backoff_max`) and resubscribes
//!   when the store answers again.

use crate::document::ClusterDocument;
use crate::store::{ControlStore, Versioned};
use crate::{now_ms, ControlError};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The caller's semantic checks (e.g. every pool and site exists in the static TOML); returns
/// the problems found, empty when the document is acceptable.
pub type Validator = Arc<dyn Fn(&ClusterDocument) -> Vec<String> + Send + Sync>;

/// How a [`Watcher`] behaves.
#[derive(Clone)]
pub struct WatchConfig {
    /// Polling period while the store answers (default 1 s).
    pub poll_interval: Duration,
    /// First retry delay after a store failure (default 250 ms); doubles per failure.
    pub backoff_min: Duration,
    /// Longest retry delay (default 5 s).
    pub backoff_max: Duration,
    /// Extra checks run after the structural ones.
    pub validator: Option<Validator>,
    /// A last good version known before starting (e.g. cached on disk); served until the store
    /// says otherwise.
    pub initial: Option<Versioned>,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(5),
            validator: None,
            initial: None,
        }
    }
}

impl std::fmt::Debug for WatchConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchConfig")
            .field("poll_interval", &self.poll_interval)
            .field("backoff_min", &self.backoff_min)
            .field("backoff_max", &self.backoff_max)
            .field("validator", &self.validator.is_some())
            .field("initial", &self.initial.as_ref().map(|v| v.version))
            .finish()
    }
}

/// A version a node refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedVersion {
    /// The refused version.
    pub version: u64,
    /// Why (validation problems, or why it could not be read).
    pub reasons: Vec<String>,
}

/// What the watcher knows. Receivers are woken when any field but `checked_at` changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchState {
    /// The last good version (`None`: none yet; the node runs on its static TOML alone).
    pub current: Option<Arc<Versioned>>,
    /// The version the store points at, if it was refused (cleared when a good one arrives).
    pub rejected: Option<RejectedVersion>,
    /// Why the store cannot be read, while it cannot.
    pub store_error: Option<String>,
    /// Whether the pub/sub subscription is up (when down, polling alone finds changes).
    pub subscribed: bool,
    /// Last successful check of the store (Unix ms; 0: none yet).
    pub checked_at: u64,
}

/// A running watcher task; dropping it stops the task.
#[derive(Debug)]
pub struct Watcher {
    rx: watch::Receiver<WatchState>,
    task: JoinHandle<()>,
}

impl Watcher {
    /// Starts watching `store` (must be called inside a tokio runtime).
    pub fn spawn(store: ControlStore, config: WatchConfig) -> Self {
        let initial = WatchState {
            current: config.initial.clone().map(Arc::new),
            ..Default::default()
        };
        let (tx, rx) = watch::channel(initial);
        let task = tokio::spawn(run(store, config, tx));
        Self { rx, task }
    }

    /// A receiver of state changes (`changed().await`, `borrow()`).
    pub fn subscribe(&self) -> watch::Receiver<WatchState> {
        self.rx.clone()
    }

    /// The state now.
    pub fn state(&self) -> WatchState {
        self.rx.borrow().clone()
    }

    /// The last good version.
    pub fn current(&self) -> Option<Arc<Versioned>> {
        self.rx.borrow().current.clone()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Applies `f`; wakes receivers only if something other than `checked_at` changed.
fn update(tx: &watch::Sender<WatchState>, f: impl FnOnce(&mut WatchState)) {
    tx.send_if_modified(|s| {
        let before = s.clone();
        f(s);
        let mut cmp = s.clone();
        cmp.checked_at = before.checked_at;
        cmp != before
    });
}

/// What the loop remembers between checks.
#[derive(Default)]
struct Seen {
    /// The pointer value last processed.
    pointer: Option<u64>,
    /// Whether that version was refused (then it is re-read on every check).
    refused: bool,
}

async fn run(store: ControlStore, config: WatchConfig, tx: watch::Sender<WatchState>) {
    let mut seen = Seen::default();
    if let Some(v) = &config.initial {
        seen.pointer = Some(v.version);
    }
    let mut messages: Option<redis::aio::PubSubStream> = None;
    let mut backoff = config.backoff_min;
    loop {
        if messages.is_none() {
            // Subscribe before checking, so a publish between the two is not missed.
            messages = subscribe(&store).await;
            let up = messages.is_some();
            update(&tx, |s| s.subscribed = up);
        }
        let delay = match check(&store, &config, &tx, &mut seen).await {
            Ok(()) => {
                backoff = config.backoff_min;
                config.poll_interval
            }
            Err(e) => {
                let why = e.to_string();
                update(&tx, |s| {
                    if s.store_error.is_none() {
                        tracing::warn!(error = %why, "control store unreachable; keeping the last good version");
                    }
                    s.store_error = Some(why);
                    s.subscribed = false;
                });
                messages = None;
                // The store may come back with another history (data lost, numbers reused):
                // re-read whatever it then points at.
                seen.pointer = None;
                let d = backoff;
                backoff = (backoff * 2).min(config.backoff_max);
                d
            }
        };
        tokio::select! {
            msg = next_message(&mut messages) => {
                if msg.is_none() {
                    tracing::debug!("control: change subscription ended; resubscribing");
                    messages = None;
                    update(&tx, |s| s.subscribed = false);
                }
            }
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

async fn subscribe(store: &ControlStore) -> Option<redis::aio::PubSubStream> {
    let bound = store.config().connect_timeout + store.config().response_timeout;
    let attempt = async {
        let mut ps = store.client().get_async_pubsub().await?;
        ps.subscribe(store.keys().changes()).await?;
        Ok::<_, redis::RedisError>(ps.into_on_message())
    };
    match tokio::time::timeout(bound, attempt).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "control: cannot subscribe to changes");
            None
        }
        Err(_) => {
            tracing::debug!("control: subscribing to changes timed out");
            None
        }
    }
}

/// The next message, or never when not subscribed.
async fn next_message(messages: &mut Option<redis::aio::PubSubStream>) -> Option<redis::Msg> {
    match messages {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

/// One look at the store. `Err` only when the store cannot be read.
async fn check(
    store: &ControlStore,
    config: &WatchConfig,
    tx: &watch::Sender<WatchState>,
    seen: &mut Seen,
) -> Result<(), ControlError> {
    let pointer = match store.current_version().await {
        Ok(p) => p,
        Err(ControlError::Corrupt { key, reason }) => {
            // The store answers, but its pointer is garbage: keep the last good version.
            let why = format!("{key} is unreadable: {reason}");
            update(tx, |s| {
                if s.store_error.as_ref() != Some(&why) {
                    tracing::warn!(error = %why, "control: keeping the last good version");
                }
                s.store_error = Some(why);
                s.checked_at = now_ms();
            });
            seen.pointer = None;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let Some(n) = pointer else {
        update(tx, |s| {
            s.store_error = None;
            s.checked_at = now_ms();
        });
        return Ok(());
    };
    if seen.pointer == Some(n) && !seen.refused {
        update(tx, |s| {
            s.store_error = None;
            s.checked_at = now_ms();
        });
        return Ok(());
    }
    let outcome = match store.get(n).await {
        Ok(rec) => {
            let checked = match &config.validator {
                Some(extra) => rec.document.validate_with(|d| extra(d)),
                None => rec.document.validate(),
            };
            checked.map(|()| rec)
        }
        Err(ControlError::NotFound(_)) => Err(vec![format!("version {n} has no record")]),
        Err(ControlError::Corrupt { key, reason }) => Err(vec![format!("{key}: {reason}")]),
        Err(e) => return Err(e),
    };
    seen.pointer = Some(n);
    seen.refused = outcome.is_err();
    update(tx, |s| {
        s.store_error = None;
        s.checked_at = now_ms();
        match outcome {
            Ok(rec) => {
                if s.current.as_deref() != Some(&rec) {
                    tracing::info!(version = n, author = %rec.author, "control: new configuration version");
                    s.current = Some(Arc::new(rec));
                }
                s.rejected = None;
            }
            Err(reasons) => {
                let r = RejectedVersion { version: n, reasons };
                if s.rejected.as_ref() != Some(&r) {
                    tracing::warn!(version = n, reasons = ?r.reasons, "control: version refused; keeping the last good one");
                }
                s.rejected = Some(r);
            }
        }
    });
    Ok(())
}

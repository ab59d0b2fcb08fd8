//! [`Breaker`]: the circuit breaker in front of a dependency that may stop answering (the
//! cluster's session store, each key server of a keyless pool).
//!
//! Closed, it lets every request through and counts consecutive failures; a success resets the
//! count. After `threshold` consecutive failures it opens, and requests should not be sent. How it
//! closes again is its [`Recovery`]:
//!
//! - [`Recovery::Probe`]: it stays open until the owner's probe reaches the dependency and calls
//!   [`Breaker::close`]; successes of requests started before it opened do not close it.
//! - [`Recovery::Cooldown`]: `cooldown` after opening it lets requests through again on trial
//!   (half-open): the first success closes it; a failure opens it for another `cooldown`. Any
//!   success closes it, also one that arrives during the cooldown.
//!
//! [`Breaker::failure`] and [`Breaker::success`] say when they changed the state, so the owner
//! logs and sets its gauges on transitions only. Reads ([`Breaker::allows`]) take no lock.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How an open [`Breaker`] closes again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Only [`Breaker::close`] (a successful probe) closes it.
    Probe,
    /// After this long open, requests go through again on trial; a success closes it, a failure
    /// opens it again for as long.
    Cooldown(Duration),
}

/// A circuit breaker shared by every request to one dependency.
#[derive(Debug)]
pub struct Breaker {
    threshold: u32,
    recovery: Recovery,
    failures: AtomicU32,
    open: AtomicBool,
    /// [`Recovery::Cooldown`]: when requests may go through again, in nanoseconds after `base`.
    trial_at: AtomicU64,
    base: Instant,
    /// Serialises opening and closing under [`Recovery::Cooldown`] (reads take no lock).
    transition: Mutex<()>,
    opened_total: AtomicU64,
}

impl Breaker {
    /// A closed breaker that opens after `threshold` (at least 1) consecutive failures.
    pub fn new(threshold: u32, recovery: Recovery) -> Self {
        Self {
            threshold: threshold.max(1),
            recovery,
            failures: AtomicU32::new(0),
            open: AtomicBool::new(false),
            trial_at: AtomicU64::new(0),
            base: Instant::now(),
            transition: Mutex::new(()),
            opened_total: AtomicU64::new(0),
        }
    }

    /// The same breaker, but open from the start (not counted in [`opened_total`]): nothing is
    /// asked of the dependency until it is known to answer.
    ///
    /// [`opened_total`]: Self::opened_total
    pub fn starting_open(self) -> Self {
        self.open.store(true, Ordering::Relaxed);
        if let Recovery::Cooldown(cooldown) = self.recovery {
            self.trial_at
                .store(self.nanos() + nanos_of(cooldown), Ordering::Relaxed);
        }
        self
    }

    /// Whether a request may be sent now: closed, or open with its cooldown over (on trial).
    pub fn allows(&self) -> bool {
        if !self.open.load(Ordering::Relaxed) {
            return true;
        }
        match self.recovery {
            Recovery::Probe => false,
            Recovery::Cooldown(_) => self.nanos() >= self.trial_at.load(Ordering::Relaxed),
        }
    }

    /// Whether the breaker is open: it opened and has not been closed since (under
    /// [`Recovery::Cooldown`], it stays open while on trial until a success).
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Times the breaker opened (under [`Recovery::Cooldown`], a failed trial counts again).
    pub fn opened_total(&self) -> u64 {
        self.opened_total.load(Ordering::Relaxed)
    }

    /// A request succeeded: resets the failure count. Under [`Recovery::Cooldown`] it also closes
    /// an open breaker; returns true when this success closed it.
    pub fn success(&self) -> bool {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        match self.recovery {
            Recovery::Probe => false,
            Recovery::Cooldown(_) => {
                if !self.open.load(Ordering::Relaxed) {
                    return false;
                }
                let _transition = self.lock();
                self.open.swap(false, Ordering::Relaxed)
            }
        }
    }

    /// A request failed or timed out; returns true when this failure opened the breaker (under
    /// [`Recovery::Cooldown`], also when it ends a trial and opens it for another cooldown).
    pub fn failure(&self) -> bool {
        let n = self.failures.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if n < self.threshold {
            return false;
        }
        let opened = match self.recovery {
            Recovery::Probe => !self.open.swap(true, Ordering::Relaxed),
            Recovery::Cooldown(cooldown) => {
                let _transition = self.lock();
                let now = self.nanos();
                if self.open.load(Ordering::Relaxed) && now < self.trial_at.load(Ordering::Relaxed) {
                    false
                } else {
                    self.trial_at.store(now + nanos_of(cooldown), Ordering::Relaxed);
                    self.open.store(true, Ordering::Relaxed);
                    true
                }
            }
        };
        if opened {
            self.opened_total.fetch_add(1, Ordering::Relaxed);
        }
        opened
    }

    /// Closes the breaker (a probe reached the dependency) and resets the failure count; returns
    /// true when it was open.
    pub fn close(&self) -> bool {
        let _transition = self.lock();
        self.failures.store(0, Ordering::Relaxed);
        self.open.swap(false, Ordering::Relaxed)
    }

    fn nanos(&self) -> u64 {
        nanos_of(self.base.elapsed())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.transition.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_policy_opens_after_threshold_consecutive_failures_and_closes_on_probe() {
        let b = Breaker::new(3, Recovery::Probe).starting_open();
        assert!(!b.allows(), "starts open until the dependency first answers");
        assert!(b.is_open());
        assert_eq!(b.opened_total(), 0, "starting open is not an opening");
        assert!(b.close());
        assert!(b.allows());
        assert!(!b.failure());
        assert!(!b.failure());
        assert!(!b.success(), "a success never closes under Probe");
        assert!(!b.failure(), "a success resets the count");
        assert!(!b.failure());
        assert!(b.failure(), "third consecutive failure opens");
        assert!(!b.allows());
        assert!(!b.failure(), "already open");
        assert!(!b.success(), "a late success does not close it");
        assert!(!b.allows());
        assert_eq!(b.opened_total(), 1);
        assert!(b.close());
        assert!(!b.close(), "already closed");
        assert!(b.allows());
    }

    #[test]
    fn cooldown_policy_lets_a_trial_through_after_the_cooldown() {
        let cooldown = Duration::from_millis(40);
        let b = Breaker::new(2, Recovery::Cooldown(cooldown));
        assert!(b.allows(), "starts closed");
        assert!(!b.success(), "nothing to close");
        assert!(!b.failure());
        assert!(b.failure(), "second consecutive failure opens");
        assert!(b.is_open());
        assert!(!b.allows(), "open during the cooldown");
        assert!(!b.failure(), "a failure during the cooldown does not reopen");
        std::thread::sleep(cooldown + Duration::from_millis(10));
        assert!(b.allows(), "on trial after the cooldown");
        assert!(b.is_open(), "still open until a success");
        assert!(b.failure(), "a failed trial opens it for another cooldown");
        assert!(!b.allows());
        assert_eq!(b.opened_total(), 2);
        std::thread::sleep(cooldown + Duration::from_millis(10));
        assert!(b.allows());
        assert!(b.success(), "a successful trial closes it");
        assert!(!b.is_open());
        assert!(b.allows());
        assert!(!b.failure(), "the count restarted");
        assert!(b.failure());
        assert!(b.close(), "close works under Cooldown too");
        assert!(b.allows());
    }

    #[test]
    fn cooldown_policy_can_start_open() {
        let b = Breaker::new(1, Recovery::Cooldown(Duration::from_secs(60))).starting_open();
        assert!(!b.allows());
        assert!(
            b.success(),
            "under Cooldown any success closes it, even during the cooldown"
        );
        assert!(b.allows());
        let b = Breaker::new(1, Recovery::Cooldown(Duration::ZERO)).starting_open();
        assert!(b.allows(), "a zero cooldown is on trial at once");
        assert!(b.success());
        assert!(!b.is_open());
    }

    #[test]
    fn threshold_is_at_least_one() {
        let b = Breaker::new(0, Recovery::Probe);
        assert!(b.failure(), "the first failure opens");
    }
}

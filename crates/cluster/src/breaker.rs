//! A circuit breaker in front of the shared store.
//!
//! Closed: handshakes ask the store. After `threshold` consecutive failures (errors or timeouts)
//! it opens: handshakes stop asking (a full handshake at once instead of a wait) and writes are
//! dropped, while a background probe pings the store every `retry`; the first successful probe
//! closes it again. It starts open, and the probe closes it as soon as the store first answers,
//! so a gateway starting before its store never waits on it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Breaker state shared by every handshake and the probe.
#[derive(Debug)]
pub struct Breaker {
    threshold: u32,
    failures: AtomicU32,
    open: AtomicBool,
    /// Times the breaker opened.
    pub opened_total: AtomicU64,
}

impl Breaker {
    /// A breaker that opens after `threshold` consecutive failures; it starts open.
    pub fn new(threshold: u32) -> Self {
        Self {
            threshold: threshold.max(1),
            failures: AtomicU32::new(0),
            open: AtomicBool::new(true),
            opened_total: AtomicU64::new(0),
        }
    }

    /// Whether the store may be asked now.
    pub fn allows(&self) -> bool {
        !self.open.load(Ordering::Relaxed)
    }

    /// Whether the breaker is open.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// The store answered.
    pub fn success(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
    }

    /// The store failed or timed out; returns true if this failure opened the breaker.
    pub fn failure(&self) -> bool {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.threshold && !self.open.swap(true, Ordering::Relaxed) {
            self.opened_total.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// The probe reached the store; returns true if this closed the breaker.
    pub fn close(&self) -> bool {
        self.failures.store(0, Ordering::Relaxed);
        self.open.swap(false, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_consecutive_failures_and_closes_on_probe() {
        let b = Breaker::new(3);
        assert!(!b.allows(), "starts open until the store first answers");
        assert!(b.close());
        assert!(b.allows());
        assert!(!b.failure());
        assert!(!b.failure());
        b.success();
        assert!(!b.failure(), "a success resets the count");
        assert!(!b.failure());
        assert!(b.failure(), "third consecutive failure opens");
        assert!(!b.allows());
        assert!(!b.failure(), "already open");
        assert_eq!(b.opened_total.load(Ordering::Relaxed), 1);
        assert!(b.close());
        assert!(!b.close(), "already closed");
    }
}

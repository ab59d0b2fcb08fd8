//! Rate limits for log lines that a client can trigger at will (a failed private-key operation
//! per handshake, say): at most one line per interval, and the next line says how many were
//! left out, so a flood of bad handshakes cannot flood the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One rate-limited kind of log line.
#[derive(Debug)]
pub struct LogLimit {
    interval_ms: u64,
    /// Milliseconds since the process epoch before which lines are suppressed.
    next_ms: AtomicU64,
    suppressed: AtomicU64,
}

fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl LogLimit {
    /// At most one line per `interval`.
    pub const fn new(interval: Duration) -> Self {
        Self {
            interval_ms: interval.as_millis() as u64,
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when a line may be written now (`n` lines were left out since the last one),
    /// `None` when this one is to be left out.
    pub fn allow(&self) -> Option<u64> {
        let now = now_ms();
        let next = self.next_ms.load(Ordering::Relaxed);
        if now >= next
            && self
                .next_ms
                .compare_exchange(next, now + self.interval_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// For a line written whatever the limit (a change of state, say): the number of lines left
    /// out since the last one; the next rate-limited line waits a whole interval from now.
    pub fn always(&self) -> u64 {
        self.next_ms.store(now_ms() + self.interval_ms, Ordering::Relaxed);
        self.suppressed.swap(0, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_count_of_the_rest() {
        let limit = LogLimit::new(Duration::from_millis(200));
        assert_eq!(limit.allow(), Some(0));
        assert!((0..99).all(|_| limit.allow().is_none()));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(limit.allow(), Some(99));
        assert_eq!(limit.allow(), None);
        assert_eq!(limit.always(), 1, "written anyway, with the count");
        assert_eq!(limit.always(), 0);
        assert_eq!(limit.allow(), None, "an interval from the last line written");
    }
}

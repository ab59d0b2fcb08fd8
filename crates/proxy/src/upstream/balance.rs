//! Server choice within a group: round robin or fewest requests in flight, skipping servers
//! marked down (and one to exclude, for a retry), falling back to every server when all are
//! down so that a group never refuses only because of stale marks.

use super::server::UpstreamServer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tlsgate_config::Balance;

/// A group's balancing policy and its rotation counter.
#[derive(Debug)]
pub struct Balancer {
    policy: Balance,
    next: AtomicUsize,
}

impl Balancer {
    /// A balancer applying `policy`.
    pub fn new(policy: Balance) -> Self {
        Self {
            policy,
            next: AtomicUsize::new(0),
        }
    }

    /// Picks a server, skipping `exclude` and servers down at `now_ms` (if every server is
    /// down, the one the policy would pick anyway); `None` when there is no other server at all.
    /// Allocates nothing: it runs once per forwarded request.
    pub fn pick(&self, servers: &[Arc<UpstreamServer>], now_ms: u64, exclude: Option<usize>) -> Option<usize> {
        let n = servers.len();
        let usable = |i: usize, need_up: bool| Some(i) != exclude && (!need_up || servers[i].is_up(now_ms));
        let healthy = (0..n).filter(|&i| usable(i, true)).count();
        let need_up = healthy > 0;
        let count = if need_up {
            healthy
        } else {
            (0..n).filter(|&i| usable(i, false)).count()
        };
        if count == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        match self.policy {
            Balance::RoundRobin => (0..n).filter(|&i| usable(i, need_up)).nth(start % count),
            // Rotate the start so ties are spread.
            Balance::LeastConn => (0..n)
                .map(|k| (start + k) % n)
                .filter(|&i| usable(i, need_up))
                .min_by_key(|&i| servers[i].in_flight()),
        }
    }
}

//! Server choice within a group: round robin or fewest requests in flight, skipping servers
//! marked down (and one to exclude, for a retry), falling back to every server when all are
//! down so that a group never refuses only because of stale marks.

use super::server::UpstreamServer;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    pub fn pick(&self, servers: &[UpstreamServer], now_ms: u64, exclude: Option<usize>) -> Option<usize> {
        let candidates = (0..servers.len()).filter(|i| Some(*i) != exclude);
        let healthy: Vec<usize> = candidates.clone().filter(|i| servers[*i].is_up(now_ms)).collect();
        let pool: Vec<usize> = if healthy.is_empty() {
            candidates.collect()
        } else {
            healthy
        };
        if pool.is_empty() {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        match self.policy {
            Balance::RoundRobin => Some(pool[start % pool.len()]),
            // Rotate the start so ties are spread.
            Balance::LeastConn => (0..pool.len())
                .map(|k| pool[(start + k) % pool.len()])
                .min_by_key(|i| servers[*i].in_flight()),
        }
    }
}

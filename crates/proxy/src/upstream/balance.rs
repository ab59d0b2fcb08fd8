//! Server choice within a group: round robin or fewest requests in flight, skipping servers
//! marked down (and one to exclude, for a retry). When all are down, it falls back to every
//! server that the active health check does not find unhealthy, so that a group never refuses
//! only because of stale passive marks (a failed connect is a guess that traffic must revisit);
//! a server the active check found unhealthy is never picked (the check itself notices when it
//! recovers), so a group whose servers all fail their check picks none: its requests get a 502 at
//! once instead of piling up on dead origins.
//!
//! With `max_connections_per_server`, a server with as many requests in flight as it may have
//! connections is full: round robin skips full servers while another has room (`least_conn`
//! already prefers the emptiest); when all are full, the rotation goes on and the request waits
//! in the queue of the server it picked.

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
    /// down, the one the policy would pick among those that pass their active health check);
    /// `None` when there is no other server at all, or no other that passes its active check.
    /// Allocates nothing: it runs once per forwarded request.
    pub fn pick(&self, servers: &[Arc<UpstreamServer>], now_ms: u64, exclude: Option<usize>) -> Option<usize> {
        let n = servers.len();
        let usable = |i: usize, need_up: bool| {
            Some(i) != exclude
                && if need_up {
                    servers[i].is_up(now_ms)
                } else {
                    servers[i].passes_check()
                }
        };
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
            // Every server of a group has the same limit, so the first one says whether any has.
            Balance::RoundRobin if servers.first().is_some_and(|s| s.limited()) => {
                let roomy = |i: usize| usable(i, need_up) && servers[i].has_room();
                match (0..n).filter(|&i| roomy(i)).count() {
                    0 => (0..n).filter(|&i| usable(i, need_up)).nth(start % count),
                    with_room => (0..n).filter(|&i| roomy(i)).nth(start % with_room),
                }
            }
            Balance::RoundRobin => (0..n).filter(|&i| usable(i, need_up)).nth(start % count),
            // Rotate the start so ties are spread.
            Balance::LeastConn => (0..n)
                .map(|k| (start + k) % n)
                .filter(|&i| usable(i, need_up))
                .min_by_key(|&i| servers[i].in_flight()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlsgate_config::OriginAddr;

    fn servers(n: u16) -> Vec<Arc<UpstreamServer>> {
        (1..=n)
            .map(|port| {
                let addr = OriginAddr::parse(&format!("127.0.0.1:{port}")).unwrap();
                Arc::new(UpstreamServer::new(&addr).unwrap())
            })
            .collect()
    }

    #[test]
    fn servers_failing_their_health_check_are_never_picked() {
        for policy in [Balance::RoundRobin, Balance::LeastConn] {
            let b = Balancer::new(policy);
            let s = servers(3);
            for server in &s {
                server.set_health(true);
            }
            s[1].set_health(false);
            assert!(
                (0..6).all(|_| b.pick(&s, 0, None).is_some_and(|i| i != 1)),
                "{policy:?}"
            );
            // Passive marks on every server that passes: the fallback still skips the unhealthy one.
            s[0].mark_down_until(u64::MAX);
            s[2].mark_down_until(u64::MAX);
            assert!(
                (0..6).all(|_| b.pick(&s, 0, None).is_some_and(|i| i != 1)),
                "{policy:?}"
            );
            assert_eq!(b.pick(&s, 0, Some(0)), Some(2));
            // Every server unhealthy: none, so the request fails at once.
            s[0].set_health(false);
            s[2].set_health(false);
            assert_eq!(b.pick(&s, 0, None), None, "{policy:?}");
            // Back: picked again.
            s[1].set_health(true);
            assert_eq!(b.pick(&s, 0, None), Some(1), "{policy:?}");
        }
    }

    #[test]
    fn round_robin_skips_full_servers_while_another_has_room() {
        let config = |limit: usize| {
            let text = format!("[[upstream]]\nname = \"g\"\nservers = []\nmax_connections_per_server = {limit}");
            tlsgate_config::parse(&text).unwrap().upstreams.remove(0)
        };
        let limited: Vec<Arc<UpstreamServer>> = (1..=3)
            .map(|port| {
                let addr = OriginAddr::parse(&format!("127.0.0.1:{port}")).unwrap();
                Arc::new(UpstreamServer::new(&addr).unwrap().for_group(&config(2)))
            })
            .collect();
        let b = Balancer::new(Balance::RoundRobin);
        limited[0].in_flight.store(2, Ordering::Relaxed);
        assert!(!limited[0].has_room() && limited[1].has_room());
        let picks: Vec<_> = (0..6).filter_map(|_| b.pick(&limited, 0, None)).collect();
        assert!(picks.iter().all(|&i| i != 0), "{picks:?}");
        assert!(picks.contains(&1) && picks.contains(&2), "{picks:?}");
        // All full: the rotation goes on (the request queues where it lands).
        for s in &limited {
            s.in_flight.store(5, Ordering::Relaxed);
        }
        let picks: Vec<_> = (0..3).filter_map(|_| b.pick(&limited, 0, None)).collect();
        assert_eq!(picks.len(), 3);
        assert!(picks.contains(&0), "{picks:?}");
        // Without a limit a busy server is still picked in turn.
        let plain = servers(2);
        plain[0].in_flight.store(1000, Ordering::Relaxed);
        assert!(plain[0].has_room());
        let picks: Vec<_> = (0..4).filter_map(|_| b.pick(&plain, 0, None)).collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 2, "{picks:?}");
    }

    #[test]
    fn without_health_checks_all_down_still_picks_one() {
        let b = Balancer::new(Balance::RoundRobin);
        let s = servers(2);
        assert_eq!(s[0].health(), None);
        s[0].mark_down_until(u64::MAX);
        s[1].mark_down_until(u64::MAX);
        assert!(b.pick(&s, 0, None).is_some());
        assert_eq!(b.pick(&s, 0, Some(0)), Some(1));
    }
}

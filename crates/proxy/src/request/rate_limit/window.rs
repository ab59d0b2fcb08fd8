//! One key's counts: a sliding-window counter (Cloudflare's approximation of a sliding log: the
//! previous fixed window's count, weighted by how much of it the sliding window still covers,
//! plus the current window's count), kept twice for a cluster-wide limit — what this node
//! admitted, and what the store last said the whole cluster admitted.
//!
//! Windows are numbered from the Unix epoch (`now / window`), so every node of a cluster names
//! the same window the same way without talking to the others.
//!
//! Cluster-wide, a node does not wait for the store: it decides on the cluster's count as last
//! read (`global`) plus what it admitted since (`unsynced`: sent and unanswered, or not sent
//! yet). So that nodes deciding at once on the same stale count do not each spend all that is
//! left, a node spends at most `1 / share` of the room it knows of between two reconciliations
//! (`share` = `cluster_nodes`). The room it knows of counts each other node whose write of the
//! last reconciliation the store has not shown yet as having spent what this node spent in its
//! last interval (`spent_last`): a node whose re-read of the store came before another node's
//! write (a busy machine) would otherwise decide on a count missing that node's interval and
//! spend half of a room that is gone. The store counts the nodes that wrote a key at each
//! reconciliation (`writers`), so a node whose re-read shows every node's write counts no such
//! guess, and a burst spread over the nodes is not held well under the limit by it. With one
//! node active, its spending still converges geometrically to the limit.

/// A limit's quota, in the units of the counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Quota {
    /// Requests per window.
    pub requests: u32,
    /// Window length in nanoseconds.
    pub window_ns: u64,
    /// Cluster-wide: the number of nodes the room is shared by (1 = no sharing).
    pub share: u32,
}

/// What one request was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    /// It may go on.
    pub allowed: bool,
    /// Requests left in the window after this one (the RateLimit header's `r`).
    pub remaining: u32,
    /// Nanoseconds until the current window ends (the RateLimit header's `t`).
    pub reset_ns: u64,
    /// Refused: nanoseconds until a request would be allowed if none came meanwhile.
    pub retry_ns: u64,
}

/// How often cluster-wide counts are reconciled with the store; a request refused only because
/// its node spent its share since the last reconciliation is told to retry after this.
pub(crate) const SYNC_INTERVAL_NS: u64 = 100_000_000;

/// One key's counters (a table slot's payload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// The current window's number (0: never used).
    pub window: u64,
    /// Requests this node admitted in `window`.
    cur: u32,
    /// Requests this node admitted in the window before.
    prev: u32,
    /// Admitted in `window`, not sent to the store yet.
    pub pending: u32,
    /// Admitted in the window before, not sent yet.
    pub pending_prev: u32,
    /// Sent for `window`, not answered yet.
    pub inflight: u32,
    /// The cluster's count of `window` as the store last answered (our sent requests included).
    pub global: u32,
    /// The cluster's count of the window before.
    pub global_prev: u32,
    /// What this node sent at its last reconciliation of `window` (its last interval's spending).
    pub spent_last: u32,
    /// Nodes, this one included, whose write of `window` at the last reconciliation the store's
    /// answers have shown (0 until the first answer).
    pub writers: u32,
}

impl Counts {
    /// Moves to window `w` (a later one; an earlier one, from a clock stepped back, is read as
    /// the current one).
    fn roll(&mut self, w: u64) {
        if w <= self.window {
            return;
        }
        if w == self.window + 1 {
            self.prev = self.cur;
            self.global_prev = self
                .global
                .saturating_add(self.inflight)
                .saturating_add(self.pending)
                .max(self.cur);
            self.pending_prev = self.pending;
        } else {
            self.prev = 0;
            self.global_prev = 0;
            self.pending_prev = 0;
        }
        *self = Self {
            window: w,
            prev: self.prev,
            global_prev: self.global_prev,
            pending_prev: self.pending_prev,
            ..Self::default()
        };
    }

    /// Whether the slot holds nothing a fresh one would not at window `w`: both its windows
    /// are over and nothing is left to send.
    pub fn idle(&self, w: u64) -> bool {
        self.window.saturating_add(1) < w && self.pending == 0 && self.pending_prev == 0 && self.inflight == 0
    }

    /// Counts one request at `now_ns` (since the Unix epoch) if the quota allows it. `shared`:
    /// decide on the cluster's count (a cluster-wide limit whose store answers); otherwise on
    /// this node's alone.
    pub fn take(&mut self, q: Quota, now_ns: u64, shared: bool) -> Decision {
        let w = now_ns / q.window_ns + 1;
        self.roll(w);
        let into = now_ns % q.window_ns;
        let frac = into as f64 / q.window_ns as f64;
        let (cur, prev) = if shared {
            let known = self.global.saturating_add(self.inflight).saturating_add(self.pending);
            (known.max(self.cur), self.global_prev.max(self.prev))
        } else {
            (self.cur, self.prev)
        };
        let carried = f64::from(prev) * (1.0 - frac);
        let weighted = carried + f64::from(cur);
        let quota = f64::from(q.requests);
        let mut allowed = weighted + 1.0 <= quota;
        let mut retry_ns = 0;
        if allowed && shared && q.share > 1 {
            // At most our share of the room we know of, until the next reconciliation; each
            // node whose last write the store has not shown is guessed to have spent as we did.
            let unseen = q.share.saturating_sub(self.writers.max(1));
            let others = f64::from(unseen) * f64::from(self.spent_last);
            let room = (quota - carried - f64::from(self.global) - others).max(0.0);
            let allowance = (room / f64::from(q.share)).ceil().max(1.0);
            if f64::from(self.pending.saturating_add(self.inflight)) + 1.0 > allowance {
                allowed = false;
                retry_ns = SYNC_INTERVAL_NS;
            }
        } else if !allowed {
            retry_ns = wait_ns(q, prev, cur, frac);
        }
        if allowed {
            self.cur = self.cur.saturating_add(1);
            if shared {
                self.pending = self.pending.saturating_add(1);
            }
        }
        let used = weighted + f64::from(u8::from(allowed));
        Decision {
            allowed,
            remaining: (quota - used).floor().max(0.0) as u32,
            reset_ns: q.window_ns - into,
            retry_ns,
        }
    }

    /// Takes `n` requests that were sent for window `w` back as unsent (the store failed).
    pub fn unsend(&mut self, w: u64, n: u32, n_prev: u32) {
        if self.window == w {
            self.inflight = self.inflight.saturating_sub(n);
            self.pending = self.pending.saturating_add(n);
            self.pending_prev = self.pending_prev.saturating_add(n_prev);
        } else if self.window == w + 1 {
            self.pending_prev = self.pending_prev.saturating_add(n);
        }
    }

    /// Marks what is pending as sent: (window, requests of it, requests of the window before).
    pub fn send(&mut self) -> (u64, u32, u32) {
        let out = (self.window, self.pending, self.pending_prev);
        self.spent_last = self.pending;
        self.writers = 0;
        self.inflight = self.inflight.saturating_add(self.pending);
        self.pending = 0;
        self.pending_prev = 0;
        out
    }

    /// The store's answer for window `w`: the cluster's count of it (`total`, our `n` sent
    /// included), of the window before (`total_prev`), and how many nodes wrote the key at this
    /// reconciliation (`writers`, us included).
    pub fn answered(&mut self, w: u64, n: u32, total: u32, total_prev: u32, writers: u32) {
        if self.window == w {
            self.inflight = self.inflight.saturating_sub(n);
            self.global = self.global.max(total);
            self.global_prev = self.global_prev.max(total_prev);
            self.writers = self.writers.max(writers);
        } else if self.window == w + 1 {
            self.global_prev = self.global_prev.max(total);
        }
    }
}

/// Nanoseconds from now (`frac` of the way into the window) until a request would fit under the
/// quota, with `prev` and `cur` counted and nothing more coming.
fn wait_ns(q: Quota, prev: u32, cur: u32, frac: f64) -> u64 {
    let before = f64::from(q.requests) - 1.0; // what may be counted before one more fits
    let window = q.window_ns as f64;
    let (cur, prev) = (f64::from(cur), f64::from(prev));
    let wait = if cur <= before {
        // Within this window, once enough of the previous one has slid out.
        if prev <= 0.0 {
            0.0
        } else {
            ((1.0 - (before - cur) / prev) - frac).max(0.0) * window
        }
    } else {
        // In the next window, once enough of this one has slid out.
        let then = if cur > 0.0 {
            (1.0 - before / cur).clamp(0.0, 1.0)
        } else {
            0.0
        };
        (1.0 - frac + then) * window
    };
    wait.ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * SEC;

    fn quota(requests: u32, share: u32) -> Quota {
        Quota {
            requests,
            window_ns: SEC,
            share,
        }
    }

    #[test]
    fn a_window_allows_its_quota_then_refuses_with_a_retry_time() {
        let q = quota(3, 1);
        let mut c = Counts::default();
        let d: Vec<_> = (0..3).map(|_| c.take(q, T0, false)).collect();
        assert!(d.iter().all(|d| d.allowed));
        assert_eq!(d.iter().map(|d| d.remaining).collect::<Vec<_>>(), [2, 1, 0]);
        assert_eq!(d[0].reset_ns, SEC);
        let refused = c.take(q, T0 + SEC / 4, false);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        // Three counted now: in the next window one fits once a third of them slid out.
        let expected = (SEC * 3 / 4) + SEC / 3;
        assert!(refused.retry_ns.abs_diff(expected) <= 2, "{}", refused.retry_ns);
        // A refusal does not count.
        assert_eq!(c.cur, 3);
    }

    #[test]
    fn the_previous_window_slides_out() {
        let q = quota(10, 1);
        let mut c = Counts::default();
        for _ in 0..10 {
            assert!(c.take(q, T0, false).allowed);
        }
        // Halfway into the next window half of the previous one still counts: 5 fit.
        let mid = T0 + SEC + SEC / 2;
        assert_eq!((0..20).filter(|_| c.take(q, mid, false).allowed).count(), 5);
        // Two windows later nothing carries over.
        assert_eq!((0..20).filter(|_| c.take(q, T0 + 3 * SEC, false).allowed).count(), 10);
        assert!(c.idle(T0 / SEC + 6));
        assert!(!c.idle(T0 / SEC + 4));
    }

    #[test]
    fn the_retry_time_is_when_a_request_fits_again() {
        let q = quota(4, 1);
        let mut c = Counts::default();
        for _ in 0..4 {
            c.take(q, T0, false);
        }
        let mut t = T0 + SEC + SEC / 4;
        assert!(
            c.take(q, t, false).allowed,
            "a quarter slid out: 3 of 4 still count, one fits"
        );
        let d = c.take(q, t, false);
        assert!(!d.allowed);
        t += d.retry_ns;
        assert!(c.take(q, t, false).allowed, "allowed at the time it was told");
    }

    #[test]
    fn shared_counts_include_the_cluster_and_spend_a_share_between_syncs() {
        let q = quota(100, 2);
        let mut c = Counts::default();
        // The store says the cluster already admitted 60 in this window.
        c.take(q, T0, true);
        let (w, n, _) = c.send();
        c.answered(w, n, 61, 0, 1);
        // 39 left, less the 1 the other node may have spent as this one did: this node spends
        // at most half (19) before the next reconciliation.
        let granted = (0..100).filter(|_| c.take(q, T0, true).allowed).count();
        assert_eq!(granted, 19);
        let (w, n, _) = c.send();
        assert_eq!(n, 19);
        // The other node admitted 20 meanwhile: 61 + 19 + 20 = 100, nothing left.
        c.answered(w, n, 100, 0, 2);
        let d = c.take(q, T0, true);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn a_stale_cluster_count_does_not_open_room_the_other_node_spent() {
        let q = quota(40, 2);
        let mut c = Counts::default();
        // Both nodes spend their half (20) before the first reconciliation.
        assert_eq!((0..100).filter(|_| c.take(q, T0, true).allowed).count(), 20);
        let (w, n, _) = c.send();
        // The store answered before the other node's 20 arrived: 20, not 40, one writer.
        c.answered(w, n, 20, 0, 1);
        // The other node is assumed to have spent as much: nothing (or one) more here.
        let granted = (0..100).filter(|_| c.take(q, T0, true).allowed).count();
        assert!(granted <= 1, "{granted}");
        // A node alone converges to the limit over reconciliations.
        let mut alone = Counts::default();
        let mut total = 0;
        for _ in 0..20 {
            total += (0..100).filter(|_| alone.take(q, T0, true).allowed).count();
            let (w, n, _) = alone.send();
            alone.answered(w, n, total as u32, 0, 1);
        }
        assert!((38..=40).contains(&total), "{total}");
    }

    #[test]
    fn a_re_read_that_shows_every_node_s_write_guesses_nothing_for_them() {
        let q = quota(40, 2);
        let mut c = Counts::default();
        // A burst: this node admitted 15 of the first interval's requests, the other 14.
        for _ in 0..15 {
            assert!(c.take(q, T0, true).allowed);
        }
        let (w, n, _) = c.send();
        // The write's answer came before the other node's write; the re-read shows both.
        c.answered(w, n, 15, 0, 1);
        c.answered(w, 0, 29, 0, 2);
        // 11 left, shared by two: this node spends 6 (rounded up) before the next reconciliation.
        assert_eq!((0..100).filter(|_| c.take(q, T0, true).allowed).count(), 6);
        let (w, n, _) = c.send();
        // The other spent 5 meanwhile: 40, nothing left.
        c.answered(w, n, 40, 0, 2);
        assert_eq!((0..100).filter(|_| c.take(q, T0, true).allowed).count(), 0);
        // Had the re-read shown this node's write alone, the other's 15 would be guessed spent
        // again: no room beyond one request.
        let mut c = Counts::default();
        for _ in 0..15 {
            c.take(q, T0, true);
        }
        let (w, n, _) = c.send();
        c.answered(w, n, 29, 0, 1);
        assert_eq!((0..100).filter(|_| c.take(q, T0, true).allowed).count(), 1);
    }

    #[test]
    fn a_failed_send_is_sent_again_and_a_node_alone_spends_its_own_count() {
        let q = quota(5, 2);
        let mut c = Counts::default();
        assert!(c.take(q, T0, true).allowed);
        let (w, n, p) = c.send();
        c.unsend(w, n, p);
        assert_eq!((c.pending, c.inflight), (1, 0));
        // Store down: this node's own counts decide, the whole quota.
        assert_eq!((0..10).filter(|_| c.take(q, T0, false).allowed).count(), 4);
    }

    #[test]
    fn a_window_roll_keeps_what_was_not_sent_for_the_window_before() {
        let q = quota(10, 1);
        let mut c = Counts::default();
        c.take(q, T0, true);
        c.take(q, T0, true);
        c.take(q, T0 + SEC, true);
        let (w, n, p) = c.send();
        assert_eq!((w, n, p), (T0 / SEC + 2, 1, 2));
        assert_eq!(c.global_prev, 2);
    }
}

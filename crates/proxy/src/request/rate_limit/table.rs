//! The bounded table of one limit's keys (the handshake budget's layout: tls `handshake_budget`
//! `table.rs`): `SHARDS` shards, each a mutex over sets of `WAYS` slots; a key (already a 64-bit
//! keyed hash, so clients cannot choose collisions) picks one set of one shard. A slot whose two
//! windows are over is free for any key; when a set has no free slot, the one whose window is
//! oldest is taken over (counted in `evictions`). Memory is fixed when the table is made: a
//! flood of distinct keys evicts, it never grows the table.
//!
//! Cluster-wide limits also keep, per shard, the list of slots touched since the last
//! reconciliation (at most one entry per slot), so a reconciliation visits only those.

use super::window::Counts;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Shards (a power of two): enough that workers rarely meet on one lock.
const SHARDS: usize = 64;
/// Slots per set.
const WAYS: usize = 8;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The key's hash; 0 = never used.
    key: u64,
    counts: Counts,
    /// The slot's index is in its shard's `touched` list.
    listed: bool,
}

#[derive(Debug)]
struct ShardInner {
    slots: Box<[Slot]>,
    /// Slots touched since the last reconciliation (cluster-wide limits only).
    touched: Vec<u32>,
}

/// A shard on its own cache line.
#[repr(align(64))]
#[derive(Debug)]
struct Shard(Mutex<ShardInner>);

/// One limit's keys.
#[derive(Debug)]
pub(crate) struct Table {
    shards: Box<[Shard]>,
    /// Sets per shard, minus one (a power of two, as a mask).
    set_mask: usize,
    evictions: AtomicU64,
}

impl Table {
    /// A table of at least `capacity` slots (rounded up to whole sets per shard, a power of two).
    pub(crate) fn new(capacity: usize) -> Self {
        let sets = capacity.div_ceil(SHARDS * WAYS).max(1).next_power_of_two();
        let shards = (0..SHARDS)
            .map(|_| {
                Shard(Mutex::new(ShardInner {
                    slots: vec![Slot::default(); sets * WAYS].into_boxed_slice(),
                    touched: Vec::new(),
                }))
            })
            .collect();
        Self {
            shards,
            set_mask: sets - 1,
            evictions: AtomicU64::new(0),
        }
    }

    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        SHARDS * (self.set_mask + 1) * WAYS
    }

    /// Keys forgotten because their set was full.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Slots holding a key still counted at window `w` (a scan: for metrics).
    pub(crate) fn tracked(&self, w: u64) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.0.lock()
                    .slots
                    .iter()
                    .filter(|s| s.key != 0 && !s.counts.idle(w))
                    .count()
            })
            .sum()
    }

    fn locate(&self, key: u64) -> (&Shard, usize) {
        // The low bits pick the shard, the next ones the set.
        let shard = &self.shards[(key as usize) & (SHARDS - 1)];
        let set = ((key >> 6) as usize) & self.set_mask;
        (shard, set * WAYS)
    }

    /// Runs `f` on `key`'s counts at window `w` (taking a slot for it if it has none), under its
    /// shard's lock; `touch` lists the slot for the next reconciliation.
    pub(crate) fn with<R>(&self, key: u64, w: u64, touch: bool, f: impl FnOnce(&mut Counts) -> R) -> R {
        let key = key.max(1);
        let (shard, base) = self.locate(key);
        let mut inner = shard.0.lock();
        let ShardInner { slots, touched } = &mut *inner;
        let ways = &mut slots[base..base + WAYS];
        let i = match ways.iter().position(|s| s.key == key) {
            Some(i) => i,
            None => {
                let i = match ways.iter().position(|s| s.key == 0 || s.counts.idle(w)) {
                    Some(free) => free,
                    None => {
                        self.evictions.fetch_add(1, Ordering::Relaxed);
                        (0..WAYS).min_by_key(|&i| ways[i].counts.window).unwrap_or(0)
                    }
                };
                ways[i].key = key;
                ways[i].counts = Counts::default();
                i
            }
        };
        let slot = &mut ways[i];
        if touch && !slot.listed {
            slot.listed = true;
            touched.push((base + i) as u32);
        }
        f(&mut slot.counts)
    }

    /// Runs `f` on `key`'s counts if it still has a slot; `touch` lists it for the next
    /// reconciliation.
    pub(crate) fn with_existing(&self, key: u64, touch: bool, f: impl FnOnce(&mut Counts)) {
        let key = key.max(1);
        let (shard, base) = self.locate(key);
        let mut inner = shard.0.lock();
        let ShardInner { slots, touched } = &mut *inner;
        if let Some(i) = slots[base..base + WAYS].iter().position(|s| s.key == key) {
            let slot = &mut slots[base + i];
            if touch && !slot.listed {
                slot.listed = true;
                touched.push((base + i) as u32);
            }
            f(&mut slot.counts);
        }
    }

    /// Takes every slot touched since the last call, calling `f` with its key and counts (under
    /// its shard's lock, one shard at a time).
    pub(crate) fn drain_touched(&self, mut f: impl FnMut(u64, &mut Counts)) {
        for shard in self.shards.iter() {
            let mut inner = shard.0.lock();
            let ShardInner { slots, touched } = &mut *inner;
            for i in touched.drain(..) {
                let slot = &mut slots[i as usize];
                slot.listed = false;
                if slot.key != 0 {
                    f(slot.key, &mut slot.counts);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::window::Quota;
    use super::*;

    const SEC: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000 * SEC;
    const W: u64 = T0 / SEC + 1;

    fn q(requests: u32) -> Quota {
        Quota {
            requests,
            window_ns: SEC,
            share: 1,
        }
    }

    #[test]
    fn keys_are_apart_and_a_flood_of_keys_stays_within_the_capacity() {
        let t = Table::new(1024);
        assert_eq!(t.capacity(), 1024);
        assert!(t.with(7, W, false, |c| c.take(q(1), T0, false)).allowed);
        assert!(!t.with(7, W, false, |c| c.take(q(1), T0, false)).allowed);
        assert!(t.with(8, W, false, |c| c.take(q(1), T0, false)).allowed);
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            t.with(x, W, false, |c| c.take(q(1), T0, false));
        }
        assert!(t.evictions() >= 10_000 - 1024, "{}", t.evictions());
        assert_eq!(t.tracked(W), 1024, "full, never more");
        // Two windows later every slot is free again, with no sweep.
        assert_eq!(t.tracked(W + 2), 0);
    }

    #[test]
    fn touched_slots_are_listed_once_until_drained() {
        let t = Table::new(512);
        for _ in 0..5 {
            t.with(42, W, true, |c| c.take(q(100), T0, true));
        }
        t.with(43, W, true, |c| c.take(q(100), T0, true));
        let mut seen = Vec::new();
        t.drain_touched(|k, c| seen.push((k, c.send())));
        seen.sort();
        assert_eq!(seen, [(42, (W, 5, 0)), (43, (W, 1, 0))]);
        let mut again = 0;
        t.drain_touched(|_, _| again += 1);
        assert_eq!(again, 0);
        t.with_existing(42, false, |c| c.answered(W, 5, 9, 0, 1));
        assert_eq!(t.with(42, W, false, |c| c.global), 9);
    }
}

//! The bounded table of per-source token buckets behind the handshake budget.
//!
//! Each bucket is kept in GCRA form (the generic cell rate algorithm, equivalent to a token
//! bucket): one *theoretical arrival time* per bucket, the moment at which it would be full
//! again. A handshake conforms when, after adding one emission interval (1 / rate) to
//! `max(tat, now)`, the bucket is no further than `burst` intervals ahead of now. A slot whose
//! buckets are all full (`tat <= now`) holds nothing a fresh bucket would not: it is free for any
//! source, so full buckets are dropped without any sweeping.
//!
//! Memory is fixed when the table is made: `SHARDS` shards of sets of `WAYS` slots of 32 bytes.
//! A source hashes (SipHash with a per-process random key, so sources cannot be chosen to
//! collide) to one set of one shard. When its set has no free slot, the slot nearest to a full
//! bucket is taken over: that source's remaining debt is forgiven (counted in `evictions`).
//! Sources are therefore limited exactly while no more than `WAYS` sources of one set are in
//! debt at once; a flood from many addresses can evict, but never grow the table.
//!
//! Locking: one mutex per shard, held for a scan of eight slots (tens of nanoseconds). Workers
//! collide only when two handshakes hash to the same shard at the same instant; there is no
//! process-wide lock and no per-worker split of the rate (which would make a source's limit
//! depend on how the kernel spreads its connections over workers).

use parking_lot::Mutex;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Shards (a power of two): enough that workers rarely meet on one lock.
const SHARDS: usize = 64;
/// Slots per set.
const WAYS: usize = 8;

/// A token bucket's rate and size, in GCRA terms (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rate {
    /// Time one token takes to refill (1 / rate).
    interval: u64,
    /// How far ahead of now a bucket may run: `burst` intervals.
    tolerance: u64,
}

impl Rate {
    /// `per_second` tokens a second, at most `burst` at once (both above zero).
    pub(crate) fn new(per_second: f64, burst: u32) -> Self {
        let interval = (1e9 / per_second.max(1e-9)).clamp(1.0, u64::MAX as f64 / 4e6) as u64;
        Self {
            interval,
            tolerance: interval.saturating_mul(u64::from(burst.max(1))),
        }
    }

    /// Nanoseconds between two tokens.
    pub(crate) fn interval_nanos(self) -> u64 {
        self.interval
    }

    /// Takes one token from the bucket whose arrival time is `tat`; false (nothing taken) when
    /// it is empty.
    fn take(self, tat: &mut u64, now: u64) -> bool {
        let next = (*tat).max(now).saturating_add(self.interval);
        if next - now > self.tolerance {
            return false;
        }
        *tat = next;
        true
    }

    /// Whether the bucket holds a token (without taking it).
    fn has_token(self, tat: u64, now: u64) -> bool {
        tat.max(now).saturating_add(self.interval) - now <= self.tolerance
    }
}

/// One source's buckets: full and resumed handshakes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Buckets {
    full: u64,
    resumed: u64,
}

impl Buckets {
    /// Takes a full-handshake token.
    pub(crate) fn take_full(&mut self, rate: Rate, now: u64) -> bool {
        rate.take(&mut self.full, now)
    }

    /// Whether a full-handshake token is left.
    pub(crate) fn has_full(&self, rate: Rate, now: u64) -> bool {
        rate.has_token(self.full, now)
    }

    /// Takes a resumed-handshake token.
    pub(crate) fn take_resumed(&mut self, rate: Rate, now: u64) -> bool {
        rate.take(&mut self.resumed, now)
    }

    /// Both buckets full: the slot is free.
    fn idle(&self, now: u64) -> bool {
        self.full.max(self.resumed) <= now
    }

    /// How far in the future the fuller bucket is full again (eviction prefers the smallest).
    fn busy_until(&self) -> u64 {
        self.full.max(self.resumed)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    source: u128,
    buckets: Buckets,
}

/// A shard on its own cache line, so that workers locking neighbouring shards do not share one.
#[repr(align(64))]
struct Shard(Mutex<Box<[Slot]>>);

/// The per-source buckets of one process.
pub(crate) struct Table {
    shards: Box<[Shard]>,
    /// Sets per shard, minus one (a power of two, as a mask).
    set_mask: usize,
    hasher: RandomState,
    epoch: Instant,
    evictions: AtomicU64,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("capacity", &self.capacity())
            .field("evictions", &self.evictions())
            .finish_non_exhaustive()
    }
}

impl Table {
    /// A table of at least `capacity` slots (rounded up to whole sets per shard, a power of two).
    pub(crate) fn new(capacity: usize) -> Self {
        let sets = capacity.div_ceil(SHARDS * WAYS).max(1).next_power_of_two();
        let shards = (0..SHARDS)
            .map(|_| Shard(Mutex::new(vec![Slot::default(); sets * WAYS].into_boxed_slice())))
            .collect();
        Self {
            shards,
            set_mask: sets - 1,
            hasher: RandomState::new(),
            epoch: Instant::now(),
            evictions: AtomicU64::new(0),
        }
    }

    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        SHARDS * (self.set_mask + 1) * WAYS
    }

    /// Sources whose debt was forgiven because their set was full.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Nanoseconds since the table was made (the buckets' clock).
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Runs `f` on `source`'s buckets at time `now`, under its shard's lock.
    pub(crate) fn with<R>(&self, source: u128, now: u64, f: impl FnOnce(&mut Buckets) -> R) -> R {
        let hash = self.hasher.hash_one(source) as usize;
        let shard = &self.shards[hash & (SHARDS - 1)];
        let set = (hash / SHARDS) & self.set_mask;
        let mut slots = shard.0.lock();
        let ways = &mut slots[set * WAYS..(set + 1) * WAYS];
        let i = match ways.iter().position(|s| s.source == source) {
            Some(i) => i,
            None => {
                let i = match ways.iter().position(|s| s.buckets.idle(now)) {
                    Some(free) => free,
                    None => {
                        self.evictions.fetch_add(1, Ordering::Relaxed);
                        (0..WAYS).min_by_key(|&i| ways[i].buckets.busy_until()).unwrap_or(0)
                    }
                };
                ways[i] = Slot {
                    source,
                    buckets: Buckets::default(),
                };
                i
            }
        };
        f(&mut ways[i].buckets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let rate = Rate::new(2.0, 3);
        let mut b = Buckets::default();
        let t0 = 10 * SEC;
        assert!((0..3).all(|_| b.take_full(rate, t0)), "the burst");
        assert!(!b.take_full(rate, t0), "then empty");
        assert!(!b.has_full(rate, t0));
        assert!(!b.take_full(rate, t0 + SEC / 2 - 1), "not yet refilled");
        assert!(b.take_full(rate, t0 + SEC / 2), "one token per 500 ms");
        assert!(!b.take_full(rate, t0 + SEC / 2));
        // A long quiet spell refills to the burst, not beyond.
        let later = t0 + 100 * SEC;
        assert!(b.has_full(rate, later));
        assert!((0..3).all(|_| b.take_full(rate, later)));
        assert!(!b.take_full(rate, later));
        // The resumed bucket is separate.
        assert!(b.take_resumed(Rate::new(1.0, 1), later));
        assert!(!b.take_resumed(Rate::new(1.0, 1), later));
        assert!(!b.take_full(rate, later));
    }

    #[test]
    fn a_failed_take_changes_nothing() {
        let rate = Rate::new(1.0, 1);
        let mut b = Buckets::default();
        assert!(b.take_full(rate, SEC));
        let before = b.full;
        for _ in 0..100 {
            assert!(!b.take_full(rate, SEC));
        }
        assert_eq!(b.full, before, "refusals do not dig the hole deeper");
        assert!(b.take_full(rate, 2 * SEC));
    }

    #[test]
    fn extreme_rates_do_not_overflow() {
        let mut b = Buckets::default();
        let slow = Rate::new(1e-12, u32::MAX);
        assert!(b.take_full(slow, 0));
        assert!(b.take_full(slow, u64::MAX - 10));
        let fast = Rate::new(1e12, 1);
        assert!(b.take_resumed(fast, u64::MAX - 10));
        assert!(!b.take_resumed(fast, u64::MAX - 10));
    }

    #[test]
    fn sources_are_apart_and_full_slots_are_reused() {
        let t = Table::new(1024);
        assert_eq!(t.capacity(), 1024);
        let rate = Rate::new(1.0, 1);
        let now = 5 * SEC;
        assert!(t.with(1, now, |b| b.take_full(rate, now)));
        assert!(!t.with(1, now, |b| b.take_full(rate, now)), "source 1 spent");
        assert!(t.with(2, now, |b| b.take_full(rate, now)), "source 2 has its own");
        // Thousands of sources, each spending once, a second apart: their buckets are full
        // again when the next comes, so nothing is evicted and the table never grows.
        for i in 0..10_000u64 {
            let at = now + (i + 2) * SEC;
            assert!(t.with(u128::from(i) + 100, at, |b| b.take_full(rate, at)));
        }
        assert_eq!(t.evictions(), 0);
    }

    #[test]
    fn a_flood_of_sources_evicts_within_fixed_memory() {
        let t = Table::new(1024);
        let rate = Rate::new(0.001, 1);
        let now = SEC;
        // Far more sources in debt at once than slots: the table stays its size and evicts.
        for i in 0..5_000u128 {
            assert!(t.with(i, now, |b| b.take_full(rate, now)));
        }
        assert!(t.evictions() >= 5_000 - 1024, "{}", t.evictions());
        assert_eq!(t.capacity(), 1024);
    }

    #[test]
    fn capacity_rounds_up_to_whole_sets() {
        assert_eq!(Table::new(1).capacity(), SHARDS * WAYS);
        assert_eq!(Table::new(65_536).capacity(), 65_536);
        assert_eq!(Table::new(65_537).capacity(), 131_072);
    }

    #[test]
    fn shards_are_shared_safely_between_threads() {
        let t = std::sync::Arc::new(Table::new(4096));
        let rate = Rate::new(1e-3, 10);
        let now = SEC;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let t = t.clone();
                std::thread::spawn(move || (0..100).filter(|_| t.with(7, now, |b| b.take_full(rate, now))).count())
            })
            .collect();
        let granted: usize = threads.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(granted, 10, "exactly the burst, whatever the interleaving");
    }
}

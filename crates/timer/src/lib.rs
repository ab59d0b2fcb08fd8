//! Short deadlines on one shared timer per thread.
//!
//! `tokio::time::timeout` arms a timer of its own for every operation. When that timer expires
//! earlier than every timer the event loop knew of when it last went to sleep (the usual case for
//! a 5 ms session-store lookup or a key-server request on a loop whose other timers are seconds
//! away), tokio wakes its own I/O driver through an eventfd `write`, and the next `epoll_wait`
//! returns at once with nothing to do: two system calls and a loop turn per operation, measured
//! at one eventfd write per Redis lookup (docs/BENCHMARKS.md, "Cluster-wide resumption").
//!
//! [`timeout`] behaves like `tokio::time::timeout` (the future is polled first, then the deadline
//! checked; `Err(Elapsed)` once it has passed), but all deadlines of a thread share one `Sleep`.
//! That sleep is re-armed only when a deadline earlier than the armed one arrives, or after it
//! fired; when it fires it wakes every waiting operation of the thread, and each checks its own
//! deadline. Operations that finish before their deadline (nearly all) never touch the timer
//! wheel. A deadline fires no earlier than asked and, like tokio's, within about a millisecond
//! (the wheel's resolution) after.
//!
//! [`breaker`]: the circuit breaker that the same callers put in front of what they wait on
//! ([`Breaker`]: opens after consecutive failures; closed by a probe, or on trial after a
//! cooldown).

#![forbid(unsafe_code)]

pub mod breaker;

pub use breaker::{Breaker, Recovery};

use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The deadline passed before the operation finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `future` until it finishes or `duration` passes, on the thread's shared timer.
/// Must be polled inside a tokio runtime with timers enabled (as `tokio::time::timeout`).
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        deadline: Instant::now() + duration,
        slot: None,
    }
}

pin_project! {
    /// The future returned by [`timeout`].
    pub struct Timeout<F> {
        #[pin]
        future: F,
        deadline: Instant,
        slot: Option<Slot>,
    }

    impl<F> PinnedDrop for Timeout<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(slot) = this.project().slot.take() {
                slot.shared.release(slot.index);
            }
        }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if Instant::now() >= *this.deadline {
            return Poll::Ready(Err(Elapsed));
        }
        let shared = SHARED.with(Arc::clone);
        if let Some(slot) = this.slot.as_ref() {
            if !Arc::ptr_eq(&slot.shared, &shared) {
                // Moved to another thread (multi-threaded runtime): wait on that thread's timer.
                if let Some(old) = this.slot.take() {
                    old.shared.release(old.index);
                }
            }
        }
        let index = match this.slot {
            Some(slot) => slot.index,
            None => {
                let index = shared.register();
                *this.slot = Some(Slot {
                    shared: shared.clone(),
                    index,
                });
                index
            }
        };
        shared.wait(index, *this.deadline, cx.waker());
        Poll::Pending
    }
}

/// A waiting operation's place in its thread's timer.
struct Slot {
    shared: Arc<Shared>,
    index: usize,
}

thread_local! {
    static SHARED: Arc<Shared> = Arc::new(Shared::default());
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The runtime the sleep belongs to: a sleep is only polled within its own runtime.
    runtime: Option<tokio::runtime::Id>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// Deadline of the armed sleep; `None` when it is not armed (new, fired, or being re-armed).
    armed_for: Option<Instant>,
    /// Wakers of the waiting operations (a slab; `free` lists the unused entries).
    waiters: Vec<Option<Waker>>,
    free: Vec<usize>,
    /// How many times the sleep was (re-)armed (tests and diagnostics).
    arms: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state inconsistent in a way that
        // matters (at worst a spurious wake), so keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self) -> usize {
        let mut st = self.lock();
        match st.free.pop() {
            Some(i) => i,
            None => {
                st.waiters.push(None);
                st.waiters.len() - 1
            }
        }
    }

    fn release(&self, index: usize) {
        let mut st = self.lock();
        if let Some(w) = st.waiters.get_mut(index) {
            *w = None;
            st.free.push(index);
        }
    }

    /// Records `waker` for slot `index` and makes sure the shared sleep fires by `deadline`.
    fn wait(self: &Arc<Self>, index: usize, deadline: Instant, waker: &Waker) {
        let runtime = tokio::runtime::Handle::current().id();
        let mut sleep = {
            let mut st = self.lock();
            if !st.waiters[index].as_ref().is_some_and(|w| w.will_wake(waker)) {
                st.waiters[index] = Some(waker.clone());
            }
            if st.runtime != Some(runtime) {
                st.runtime = Some(runtime);
                st.sleep = None;
                st.armed_for = None;
            }
            if st.armed_for.is_some_and(|at| at <= deadline) {
                return;
            }
            st.armed_for = Some(deadline);
            st.arms += 1;
            st.sleep.take()
        };
        // Re-arm outside the lock: tokio may fire (and so call `Fire::wake`) synchronously.
        match sleep.as_mut() {
            Some(s) => s.as_mut().reset(deadline),
            None => sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        let fire = Waker::from(Arc::new(Fire(self.clone())));
        if let Some(s) = sleep.as_mut() {
            if s.as_mut().poll(&mut Context::from_waker(&fire)).is_ready() {
                fire.wake_by_ref();
            }
        }
        let mut st = self.lock();
        if st.sleep.is_none() && st.runtime == Some(runtime) {
            st.sleep = sleep;
        }
    }

    #[cfg(test)]
    fn stats(&self) -> (u64, usize) {
        let st = self.lock();
        (st.arms, st.waiters.iter().filter(|w| w.is_some()).count())
    }
}

/// The shared sleep's waker: wakes every waiting operation of the thread.
struct Fire(Arc<Shared>);

impl Wake for Fire {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let wakers: Vec<Waker> = {
            let mut st = self.0.lock();
            st.armed_for = None;
            st.waiters.iter_mut().filter_map(Option::take).collect()
        };
        for w in wakers {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> (u64, usize) {
        SHARED.with(|s| s.stats())
    }

    #[tokio::test]
    async fn finished_future_is_ok() {
        assert_eq!(timeout(Duration::from_millis(50), async { 7 }).await, Ok(7));
        let slow = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            8
        };
        assert_eq!(timeout(Duration::from_secs(5), slow).await, Ok(8));
    }

    #[tokio::test]
    async fn pending_future_times_out_no_earlier_than_asked() {
        let started = std::time::Instant::now();
        let r = timeout(Duration::from_millis(30), std::future::pending::<()>()).await;
        let took = started.elapsed();
        assert_eq!(r, Err(Elapsed));
        assert!(took >= Duration::from_millis(30), "fired early: {took:?}");
        assert!(took < Duration::from_millis(500), "fired late: {took:?}");
        assert_eq!(stats().1, 0, "the slot was not released");
    }

    #[tokio::test]
    async fn many_deadlines_each_fire_at_their_own_time() {
        let mut tasks = Vec::new();
        for ms in [40u64, 5, 25, 10, 35, 15, 30, 20, 45, 1] {
            tasks.push(tokio::spawn(async move {
                let started = std::time::Instant::now();
                let r = timeout(Duration::from_millis(ms), std::future::pending::<()>()).await;
                (ms, r, started.elapsed())
            }));
        }
        for t in tasks {
            let (ms, r, took) = t.await.unwrap();
            assert_eq!(r, Err(Elapsed));
            assert!(
                took >= Duration::from_millis(ms),
                "{ms} ms deadline fired after {took:?}"
            );
            assert!(
                took < Duration::from_millis(ms + 400),
                "{ms} ms deadline fired after {took:?}"
            );
        }
    }

    /// The point of the crate: operations that finish in time do not re-arm the timer each.
    #[tokio::test]
    async fn quick_operations_share_one_arm() {
        let (before, _) = stats();
        for _ in 0..200 {
            let op = async {
                tokio::task::yield_now().await;
                1
            };
            assert_eq!(timeout(Duration::from_millis(200), op).await, Ok(1));
        }
        let (after, waiting) = stats();
        assert!(after - before <= 2, "{} arms for 200 quick operations", after - before);
        assert_eq!(waiting, 0);
    }

    #[test]
    fn works_across_runtimes_on_one_thread() {
        for _ in 0..3 {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let r = rt.block_on(timeout(Duration::from_millis(10), std::future::pending::<()>()));
            assert_eq!(r, Err(Elapsed));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn works_on_a_multi_threaded_runtime() {
        let mut tasks = Vec::new();
        for i in 0..20u64 {
            tasks.push(tokio::spawn(async move {
                let pending = timeout(Duration::from_millis(5 + i), std::future::pending::<()>()).await;
                let ready = timeout(Duration::from_millis(50), async { i }).await;
                (pending, ready)
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), (Err(Elapsed), Ok(i as u64)));
        }
    }
}

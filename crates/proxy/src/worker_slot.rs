//! Which worker thread runs this code, for state kept per worker. An origin connection's socket
//! is registered with the event loop of the worker that opened it: used by a request on another
//! worker, every read and write readiness of it is first seen by the opener's loop, which then
//! wakes the other worker across threads (an `eventfd` write, and a turn of the opener's loop).
//! So the origin connections a server keeps (`upstream::conns`) are kept per worker, each
//! worker taking its own. A leaf: depends on nothing in the crate.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The gateway's number of workers (1 until told).
static WORKERS: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// This thread's worker index (0 on threads that are not workers).
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// Sets the number of workers; call before the gateway's state is built (its upstream servers
/// size their per-worker state from it).
pub fn set_workers(n: usize) {
    WORKERS.store(n.max(1), Ordering::Relaxed);
}

/// The number of workers (at least 1).
pub fn workers() -> usize {
    WORKERS.load(Ordering::Relaxed)
}

/// Marks the calling thread as worker `index`.
pub fn enter(index: usize) {
    SLOT.with(|s| s.set(index));
}

/// The calling thread's worker index (0 outside a worker).
pub fn current() -> usize {
    SLOT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_thread_has_its_own_index() {
        super::enter(3);
        assert_eq!(super::current(), 3);
        let other = std::thread::spawn(super::current).join().unwrap();
        assert_eq!(other, 0, "a thread that is no worker is slot 0");
        assert_eq!(super::current(), 3);
    }
}

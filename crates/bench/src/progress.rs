//! The progress line of long runs: on a terminal only (stderr), once a second, rewritten in place;
//! nothing at all when stderr is not a terminal or the run is short.

use crate::args::{Limit, Plan};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the load threads count for the line (relaxed atomics, only when a line is shown).
#[derive(Debug, Default)]
pub struct Counters {
    /// Completed requests.
    pub requests: AtomicU64,
    /// Completed handshakes.
    pub handshakes: AtomicU64,
    /// Errors.
    pub errors: AtomicU64,
}

/// The printing thread; stops (and clears its line) when dropped.
pub struct Progress {
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Runs shorter than this get no progress line.
const MIN_RUN: Duration = Duration::from_secs(3);

impl Progress {
    /// Starts the line if stderr is a terminal and the run may last a few seconds.
    pub fn start(plan: &Plan) -> Option<Self> {
        let total = match plan.limit {
            Limit::Duration(d) if d >= MIN_RUN => Some(d),
            Limit::Duration(_) | Limit::Hold(_) => return None,
            Limit::Count(_) => None,
        };
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("bench-progress".into())
            .spawn(move || {
                let start = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let secs = start.elapsed().as_secs_f64();
                    if secs < 1.0 || start.elapsed().subsec_millis() >= 100 {
                        continue;
                    }
                    let of = total.map_or(String::new(), |t| format!("/{}s", t.as_secs()));
                    let req = c.requests.load(Ordering::Relaxed);
                    let _ = write!(
                        std::io::stderr(),
                        "\r\x1b[K  {secs:.0}s{of}: {req} requests ({:.0}/s), {} handshakes, {} errors",
                        req as f64 / secs,
                        c.handshakes.load(Ordering::Relaxed),
                        c.errors.load(Ordering::Relaxed)
                    );
                }
                let _ = write!(std::io::stderr(), "\r\x1b[K");
            })
            .ok()?;
        Some(Self {
            counters,
            stop,
            thread: Some(thread),
        })
    }

    /// The counters the load threads add to.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! The signing worker pool: one thread per core pulling from a bounded queue. A request that
//! finds the queue full is answered `overloaded` at once by the caller, instead of waiting.
//! While jobs keep coming, a worker hands its answers over in small batches (at most
//! [`BATCH_WINDOW`] old), which saves a writer wake-up and a write per fast signature.

use crate::algorithms;
use crate::codec::{encode_response, ErrorCode, Response};
use crate::frame_writer::CountedSender;
use crate::keystore::Key;
use crate::server_metrics::{KeyLabel, OpLabels, ServerMetrics};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One signing request.
pub struct Job {
    /// Request id to answer.
    pub id: u32,
    /// The key.
    pub key: Arc<Key>,
    /// Signature scheme code point (already checked against the key type).
    pub algorithm: u16,
    /// The message.
    pub payload: Vec<u8>,
    /// A delegated credential (counted apart from handshake signatures).
    pub delegate: bool,
    /// Where the encoded response frame goes (the connection's writer).
    pub reply: CountedSender,
    /// When the request arrived.
    pub arrived: Instant,
}

/// Handle to the pool; cheap to clone.
#[derive(Clone)]
pub struct SignerPool {
    tx: SyncSender<Job>,
    metrics: Arc<ServerMetrics>,
}

impl SignerPool {
    /// Starts `threads` signing threads sharing a queue of `queue` jobs.
    pub fn start(threads: usize, queue: usize, metrics: Arc<ServerMetrics>) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel::<Job>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let metrics = metrics.clone();
            std::thread::Builder::new()
                .name(format!("keyserver-sign-{i}"))
                .spawn(move || worker(&rx, &metrics))?;
        }
        Ok(Self { tx, metrics })
    }

    /// Queues a job; gives it back when the queue is full (or the pool is gone).
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.metrics.queue_depth.inc();
        match self.tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                self.metrics.queue_depth.dec();
                Err(job)
            }
        }
    }
}

/// How long a worker may hold finished answers while it keeps finding queued jobs: answers are
/// handed to their connections' writers together, so one wake-up and one write carry several
/// of them (fast ECDSA signatures); a slow signature (RSA) exceeds it alone and goes out at once.
const BATCH_WINDOW: Duration = Duration::from_micros(400);

/// Answers signed but not yet handed to their connections, grouped by connection.
#[derive(Default)]
struct Batch {
    started: Option<Instant>,
    out: Vec<(CountedSender, Vec<u8>)>,
}

impl Batch {
    fn push(&mut self, reply: CountedSender, id: u32, response: &Response) {
        self.started.get_or_insert_with(Instant::now);
        let frames = match self.out.iter_mut().find(|(tx, _)| tx.same_channel(&reply)) {
            Some((_, frames)) => frames,
            None => {
                self.out.push((reply, Vec::with_capacity(600)));
                &mut self.out.last_mut().expect("just pushed").1
            }
        };
        let _ = encode_response(frames, id, response);
    }

    fn due(&self) -> bool {
        self.started.is_some_and(|t| t.elapsed() >= BATCH_WINDOW)
    }

    fn flush(&mut self) {
        for (tx, frames) in self.out.drain(..) {
            tx.send(frames);
        }
        self.started = None;
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, metrics: &ServerMetrics) {
    let mut batch = Batch::default();
    loop {
        let next = if batch.out.is_empty() {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            rx.recv().map_err(|_| TryRecvError::Disconnected)
        } else {
            // Holding answers: never wait, not even for the lock (another worker blocked in
            // `recv` holds it while the queue is empty).
            match rx.try_lock() {
                Ok(rx) => rx.try_recv(),
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().try_recv(),
                Err(std::sync::TryLockError::WouldBlock) => Err(TryRecvError::Empty),
            }
        };
        let job = match next {
            Ok(job) => job,
            Err(TryRecvError::Empty) => {
                batch.flush();
                continue;
            }
            Err(TryRecvError::Disconnected) => {
                batch.flush();
                return;
            }
        };
        metrics.queue_depth.dec();
        let response = sign(&job, metrics);
        batch.push(job.reply, job.id, &response);
        if batch.due() {
            batch.flush();
        }
    }
}

fn sign(job: &Job, metrics: &ServerMetrics) -> Response {
    match algorithms::from_code(job.algorithm) {
        Some(alg) => match job.key.signer.sign(alg, &job.payload) {
            Ok(sig) if job.delegate => {
                metrics
                    .delegations
                    .get_or_create(&KeyLabel {
                        key: job.key.label.clone(),
                    })
                    .inc();
                Response::Signature(sig)
            }
            Ok(sig) => {
                metrics
                    .ops
                    .get_or_create(&OpLabels {
                        key: job.key.label.clone(),
                        algorithm: algorithms::label(job.algorithm),
                    })
                    .inc();
                metrics.latency.observe(job.arrived.elapsed().as_secs_f64());
                Response::Signature(sig)
            }
            Err(e) => {
                tracing::warn!(key = %job.key.label, error = %e, "signing failed");
                metrics.error("internal");
                Response::Error(ErrorCode::Internal)
            }
        },
        None => {
            metrics.error("unsupported_algorithm");
            Response::Error(ErrorCode::UnsupportedAlgorithm)
        }
    }
}

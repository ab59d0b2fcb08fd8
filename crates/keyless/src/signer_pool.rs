//! The signing worker pool: one thread per core pulling from a bounded queue. A request that
//! finds the queue full is answered `overloaded` at once by the caller, instead of waiting.

use crate::algorithms;
use crate::codec::{encode_response, ErrorCode, Response};
use crate::keystore::Key;
use crate::server_metrics::{OpLabels, ServerMetrics};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

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
    /// Where the encoded response frame goes (the connection's writer).
    pub reply: UnboundedSender<Vec<u8>>,
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

fn worker(rx: &Mutex<Receiver<Job>>, metrics: &ServerMetrics) {
    loop {
        let job = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        metrics.queue_depth.dec();
        let response = match algorithms::from_code(job.algorithm) {
            Some(alg) => match job.key.signer.sign_now(alg, &job.payload) {
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
        };
        let mut frame = Vec::with_capacity(600);
        if encode_response(&mut frame, job.id, &response).is_ok() {
            let _ = job.reply.send(frame);
        }
    }
}

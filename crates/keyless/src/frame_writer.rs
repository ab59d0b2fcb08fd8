//! The writing half of a keyless connection, shared by the key server and the gateway client:
//! frames queued by any task go out in order, coalesced into writes of up to 64 KiB, so a burst
//! of pipelined requests or answers costs one TLS record and one syscall instead of one each.
//!
//! The key server's writer ([`spawn_counted`]) also keeps count of the bytes queued and not yet
//! written (its [`Backlog`]), so that the connection's reader can stop reading requests from a
//! peer that does not read its answers instead of queueing them without bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Most bytes gathered into one write.
const COALESCE: usize = 64 * 1024;

/// Spawns the writer task; frames sent on the returned channel are written to `wr`. The task
/// ends (shutting `wr` down) when every sender is gone, or at the first write error.
pub fn spawn<W>(wr: W) -> (UnboundedSender<Vec<u8>>, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = unbounded_channel::<Vec<u8>>();
    (tx, tokio::spawn(write_loop(wr, rx, None)))
}

/// Like [`spawn`], with the bytes not yet written counted in the sender's [`Backlog`].
pub fn spawn_counted<W>(wr: W) -> (CountedSender, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = unbounded_channel::<Vec<u8>>();
    let backlog = Arc::new(Backlog::default());
    let task = tokio::spawn(write_loop(wr, rx, Some(backlog.clone())));
    (CountedSender { tx, backlog }, task)
}

async fn write_loop<W>(mut wr: W, mut rx: UnboundedReceiver<Vec<u8>>, backlog: Option<Arc<Backlog>>)
where
    W: AsyncWrite + Unpin,
{
    while let Some(mut out) = rx.recv().await {
        while out.len() < COALESCE {
            match rx.try_recv() {
                Ok(more) => out.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        let written = wr.write_all(&out).await.is_ok() && wr.flush().await.is_ok();
        if let Some(b) = &backlog {
            b.bytes.fetch_sub(out.len(), Ordering::AcqRel);
            if !written {
                rx.close();
            }
            b.shrunk.notify_one();
        }
        if !written {
            return;
        }
    }
    let _ = wr.shutdown().await;
}

/// Bytes handed to a writer and not written yet, and a wake-up each time some are written.
#[derive(Debug, Default)]
pub struct Backlog {
    bytes: AtomicUsize,
    shrunk: Notify,
}

/// How waiting for a backlog to shrink ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// The backlog is at or below the limit.
    Done,
    /// The writer is gone (write error): the connection is finished.
    Closed,
    /// No byte could be written for the whole patience: the peer is not reading.
    Stuck,
}

/// The sending side of a [`spawn_counted`] writer; cheap to clone.
#[derive(Debug, Clone)]
pub struct CountedSender {
    tx: UnboundedSender<Vec<u8>>,
    backlog: Arc<Backlog>,
}

impl CountedSender {
    /// Queues a frame (or several, concatenated); dropped when the writer is gone.
    pub fn send(&self, frame: Vec<u8>) {
        let n = frame.len();
        self.backlog.bytes.fetch_add(n, Ordering::AcqRel);
        if self.tx.send(frame).is_err() {
            self.backlog.bytes.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Whether both send to the same connection.
    pub fn same_channel(&self, other: &Self) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// Bytes queued and not yet written.
    pub fn backlog(&self) -> usize {
        self.backlog.bytes.load(Ordering::Acquire)
    }

    /// Waits until at most `limit` bytes are queued. Gives up when the writer is gone, or when
    /// nothing at all was written for `patience`.
    pub async fn drained_to(&self, limit: usize, patience: Duration) -> Drain {
        loop {
            if self.backlog() <= limit {
                return Drain::Done;
            }
            if self.tx.is_closed() {
                return Drain::Closed;
            }
            // A write that completed since the check left a permit: no wake-up is lost.
            if tokio::time::timeout(patience, self.backlog.shrunk.notified())
                .await
                .is_err()
            {
                return Drain::Stuck;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn the_backlog_counts_unwritten_bytes_and_drains_when_the_peer_reads() {
        let (near, mut far) = tokio::io::duplex(1024);
        let (tx, task) = spawn_counted(near);
        for _ in 0..64 {
            tx.send(vec![7; 1000]);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The peer reads nothing: the one coalesced write (all 64 frames) cannot complete.
        assert_eq!(tx.backlog(), 64_000);
        assert_eq!(tx.drained_to(1000, Duration::from_millis(100)).await, Drain::Stuck);
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            far.read_to_end(&mut all).await.map(|_| all.len())
        });
        assert_eq!(tx.drained_to(0, Duration::from_secs(5)).await, Drain::Done);
        assert_eq!(tx.backlog(), 0);
        drop(tx);
        task.await.unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), 64_000);
    }

    #[tokio::test]
    async fn a_writer_that_failed_reports_closed() {
        let (near, far) = tokio::io::duplex(16);
        let (tx, task) = spawn_counted(near);
        drop(far);
        tx.send(vec![1; 100]);
        task.await.unwrap();
        assert_eq!(tx.backlog(), 0);
        tx.send(vec![1; 100]);
        assert_eq!(tx.backlog(), 0, "nothing is queued for a closed writer");
        assert_eq!(tx.drained_to(0, Duration::from_secs(5)).await, Drain::Done);
    }
}

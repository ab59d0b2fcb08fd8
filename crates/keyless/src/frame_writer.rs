//! The writing half of a keyless connection, shared by the key server and the gateway client:
//! frames queued by any task go out in order, coalesced into writes of up to 64 KiB, so a burst
//! of pipelined requests or answers costs one TLS record and one syscall instead of one each.

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::JoinHandle;

/// Most bytes gathered into one write.
const COALESCE: usize = 64 * 1024;

/// Spawns the writer task; frames sent on the returned channel are written to `wr`. The task
/// ends (shutting `wr` down) when every sender is gone, or at the first write error.
pub fn spawn<W>(mut wr: W) -> (UnboundedSender<Vec<u8>>, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = unbounded_channel::<Vec<u8>>();
    let task = tokio::spawn(async move {
        while let Some(mut out) = rx.recv().await {
            while out.len() < COALESCE {
                match rx.try_recv() {
                    Ok(more) => out.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            if wr.write_all(&out).await.is_err() || wr.flush().await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    });
    (tx, task)
}

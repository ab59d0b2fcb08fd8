//! The tap between client and server: forwards TLS records, letting a test alter one.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Alters one TLS record in flight (`record.bytes` includes the 5-byte record header).
pub type Edit = Box<dyn FnMut(&mut Record) + Send>;

/// A TLS record seen by the tap.
pub struct Record {
    /// Position among the records sent in this direction.
    pub index: usize,
    pub bytes: Vec<u8>,
}

impl Record {
    /// The record's content type (22 handshake, 23 application data, 20 change_cipher_spec).
    pub fn content_type(&self) -> u8 {
        self.bytes[0]
    }
}

/// Forwards records from `from` to `to`, letting `edit` alter each complete one; closes `to`
/// when `from` ends.
pub(super) async fn pump<R, W>(mut from: R, mut to: W, mut edit: Option<Edit>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut pending = Vec::new();
    let mut index = 0;
    let mut chunk = [0u8; 1 << 14];
    loop {
        let n = from.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            let _ = to.write_all(&pending).await;
            let _ = to.shutdown().await;
            return;
        }
        pending.extend_from_slice(&chunk[..n]);
        while pending.len() >= 5 {
            let len = 5 + usize::from(u16::from_be_bytes([pending[3], pending[4]]));
            if pending.len() < len {
                break;
            }
            let mut record = Record {
                index,
                bytes: pending.drain(..len).collect(),
            };
            index += 1;
            if let Some(edit) = edit.as_mut() {
                edit(&mut record);
            }
            if to.write_all(&record.bytes).await.is_err() {
                return;
            }
        }
    }
}

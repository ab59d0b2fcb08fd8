//! A connection's way out: quiche's packets gathered into GSO batches (equal-size datagrams to
//! one peer, the last may be shorter) in the worker's one send buffer, each batch one `sendmsg`.
//!
//! The buffer is per worker thread, not per connection (an idle connection holds none of it): a
//! batch is filled and handed to the kernel without yielding; only when the socket's buffer is
//! full is the rest copied out and awaited. quiche is given room for exactly one datagram of the
//! batch's size after the first, so a packet can be shorter (then it ends the batch) but never
//! longer; a packet for another address (a migrating client) ends the batch and starts the next.

use super::udp::{QuicSocket, MAX_BATCH, MAX_SEGMENTS};
use std::cell::RefCell;
use std::net::SocketAddr;

/// The largest datagram quiche writes (`http3.max_udp_payload` is at most 1452).
const MAX_DATAGRAM: usize = 1500;

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0u8; MAX_BATCH + MAX_DATAGRAM]);
}

/// What one connection sent, for its metrics at its end.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sent {
    /// `sendmsg`/`sendto` calls.
    pub calls: u64,
}

/// Bytes the socket did not take at once: the rest of a batch, to send after waiting.
struct Blocked {
    bytes: Vec<u8>,
    segment: usize,
    to: SocketAddr,
}

/// Sends every packet quiche has ready. On a send error other than a full buffer the batch is
/// dropped (quiche retransmits what was lost); on quiche's own error the connection is closed.
pub async fn flush(conn: &mut quiche::Connection, socket: &QuicSocket, sent: &mut Sent) {
    loop {
        let blocked = BUFFER.with_borrow_mut(|buf| fill_and_send(conn, socket, buf, sent));
        match blocked {
            None => return,
            Some(b) => match socket.send(&b.bytes, b.segment, b.to).await {
                Ok(calls) => sent.calls += calls as u64,
                Err(e) => tracing::debug!(to = %b.to, error = %e, "QUIC send failed"),
            },
        }
    }
}

/// Fills and sends batches until quiche has nothing more or the socket is full (then returns
/// what is left of the batch).
fn fill_and_send(
    conn: &mut quiche::Connection,
    socket: &QuicSocket,
    buf: &mut [u8],
    sent: &mut Sent,
) -> Option<Blocked> {
    let gso = socket.gso();
    // A packet already in the buffer (written past the previous batch) that starts this one.
    let mut carried: Option<(usize, SocketAddr)> = None;
    loop {
        let (mut len, segment, to) = match carried.take() {
            Some((n, to)) => (n, n, to),
            None => match conn.send(&mut buf[..MAX_DATAGRAM]) {
                Ok((n, info)) => (n, n, info.to),
                Err(e) => return stop(conn, e),
            },
        };
        let mut count = 1;
        let mut finished = false;
        while gso && count < MAX_SEGMENTS && len + segment <= MAX_BATCH {
            match conn.send(&mut buf[len..len + segment]) {
                Ok((n, info)) if info.to != to => {
                    // Another path: this batch ends; the packet moves to the front for the next.
                    carried = Some((n, info.to));
                    let blocked = send_batch(socket, &buf[..len], segment, to, sent);
                    buf.copy_within(len..len + n, 0);
                    if blocked.is_some() {
                        // Rare (a full socket while migrating): the carried packet is dropped
                        // and retransmitted by quiche later.
                        return blocked;
                    }
                    break;
                }
                Ok((n, _)) => {
                    len += n;
                    count += 1;
                    if n < segment {
                        break;
                    }
                }
                Err(quiche::Error::Done) => {
                    finished = true;
                    break;
                }
                Err(e) => {
                    let _ = send_batch(socket, &buf[..len], segment, to, sent);
                    return stop(conn, e);
                }
            }
        }
        if carried.is_some() {
            continue;
        }
        if let Some(blocked) = send_batch(socket, &buf[..len], segment, to, sent) {
            return Some(blocked);
        }
        if finished {
            return None;
        }
    }
}

/// Sends one batch; what the socket did not take comes back.
fn send_batch(socket: &QuicSocket, batch: &[u8], segment: usize, to: SocketAddr, sent: &mut Sent) -> Option<Blocked> {
    match socket.try_send(batch, segment, to) {
        Ok((taken, calls)) => {
            sent.calls += calls as u64;
            (taken < batch.len()).then(|| Blocked {
                bytes: batch[taken..].to_vec(),
                segment,
                to,
            })
        }
        Err(e) => {
            tracing::debug!(%to, error = %e, "QUIC send failed");
            None
        }
    }
}

/// quiche's answer that ends a flush: `Done`, or an error that closes the connection.
fn stop(conn: &mut quiche::Connection, e: quiche::Error) -> Option<Blocked> {
    if e != quiche::Error::Done {
        tracing::debug!(error = %e, "QUIC connection failed to send; closed");
        let _ = conn.close(false, 0x1, b"");
    }
    None
}

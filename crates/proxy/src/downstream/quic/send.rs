//! A connection's way out: quiche's packets gathered into GSO batches (equal-size datagrams to
//! one peer, the last may be shorter) in the worker's one send buffer, each batch one `sendmsg`.
//!
//! The buffer is per worker thread, not per connection (an idle connection holds none of it): a
//! batch is filled and handed to the kernel without yielding; only when the socket's buffer is
//! full is the rest copied out and awaited. quiche is given room for exactly one datagram of the
//! batch's size after the first, so a packet can be shorter (then it ends the batch) but never
//! longer; a packet for another address (a migrating client) ends the batch and starts the next.
//!
//! **Pacing.** quiche stamps each packet with the time its congestion controller wants it sent
//! (`SendInfo.at`; only BBRv2 paces, CUBIC and Reno stamp "now"). A packet due later than
//! [`PACING_GRANULARITY`] from now ends the batch and is held, copied out of the worker's
//! buffer, until its time: the connection's task sleeps until then ([`flush`] returns the time)
//! and asks quiche for nothing more meanwhile, so packets leave in quiche's order. The
//! granularity is the timer's (tokio's timers have millisecond resolution): what is due within
//! it goes out in the same batch, and the task wakes that much before a held packet is due.
//! Packets are not paced before the handshake is confirmed, and a packet due further ahead than
//! [`MAX_PACING_DELAY`] is not held (pacer debt, not pacing).

use super::udp::{QuicSocket, MAX_BATCH, MAX_SEGMENTS};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The largest datagram quiche writes (`http3.max_udp_payload` is at most 1452).
const MAX_DATAGRAM: usize = 1500;

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0u8; MAX_BATCH + MAX_DATAGRAM]);
}

/// Packets due within this time from now are sent now (one batch); a later one is held.
pub const PACING_GRANULARITY: Duration = Duration::from_millis(1);
/// The longest a packet is held (quiche's own bound on pacing into the future, 1/8 RTT
/// clamped to 1–5 ms, at its largest). A release time further ahead is sent at once: it is
/// mostly debt — the pacer counts the handshake's flights, which leave unpaced, against the
/// first packets after it; honoured, that held the first response after a 16 KB chain back a
/// whole round trip at 100 ms RTT in the lab. Below ~2 Mbit/s (a packet per 5 ms) nothing is
/// paced.
pub const MAX_PACING_DELAY: Duration = Duration::from_millis(5);

/// A connection's sending state: what it sent (for its metrics at its end) and the packet it
/// holds for pacing.
#[derive(Debug, Default)]
pub struct Sent {
    /// `sendmsg`/`sendto` calls.
    pub calls: u64,
    /// Times the connection waited for a packet's release time.
    pub paced_waits: u64,
    /// Honour quiche's release times (`[http3] pacing`).
    pub pacing: bool,
    /// A packet quiche released for later, not yet sent.
    held: Option<Held>,
}

impl Sent {
    /// The sending state of a new connection.
    pub fn new(pacing: bool) -> Self {
        Self {
            pacing,
            ..Self::default()
        }
    }
}

/// A packet kept until its release time.
#[derive(Debug)]
struct Held {
    bytes: Vec<u8>,
    to: SocketAddr,
    at: Instant,
}

/// Bytes the socket did not take at once: the rest of a batch, to send after waiting.
struct Blocked {
    bytes: Vec<u8>,
    segment: usize,
    to: SocketAddr,
}

/// How a fill of the buffer ended.
enum Filled {
    /// quiche has nothing more to send.
    Done,
    /// The socket is full: the rest of a batch, to send after waiting.
    Blocked(Blocked),
    /// A packet is held until this time (pacing).
    Wait(Instant),
}

/// Sends every packet quiche has ready and due; returns the release time of a packet held for
/// pacing, when one is (call again then). On a send error other than a full buffer the batch
/// is dropped (quiche retransmits what was lost); on quiche's own error the connection is
/// closed.
pub async fn flush(conn: &mut quiche::Connection, socket: &QuicSocket, sent: &mut Sent) -> Option<Instant> {
    loop {
        let filled = BUFFER.with_borrow_mut(|buf| fill_and_send(conn, socket, buf, sent));
        match filled {
            Filled::Done => return None,
            Filled::Wait(at) => {
                sent.paced_waits += 1;
                return Some(at);
            }
            Filled::Blocked(b) => match socket.send(&b.bytes, b.segment, b.to).await {
                Ok(calls) => sent.calls += calls as u64,
                Err(e) => tracing::debug!(to = %b.to, error = %e, "QUIC send failed"),
            },
        }
    }
}

/// Holds the packet at `buf` until `at`.
fn hold(sent: &mut Sent, buf: &[u8], to: SocketAddr, at: Instant) -> Filled {
    sent.held = Some(Held {
        bytes: buf.to_vec(),
        to,
        at,
    });
    Filled::Wait(at)
}

/// Fills and sends batches until quiche has nothing more, the socket is full (then returns
/// what is left of the batch) or the next packet is not due yet (then holds it).
fn fill_and_send(conn: &mut quiche::Connection, socket: &QuicSocket, buf: &mut [u8], sent: &mut Sent) -> Filled {
    let gso = socket.gso();
    // Due now: released within the granularity (read once per fill). Not paced before the
    // handshake is confirmed: BBRv2 paces its first flights at a rate derived from an assumed
    // RTT (quiche's 333 ms), which held a post-quantum-sized certificate flight back by half a
    // round trip in the lab, and the anti-amplification limit and the window bound them anyway.
    // Without pacing no clock is read: `later` is always false.
    let window = (sent.pacing && conn.is_established()).then(|| {
        let now = Instant::now();
        (now + PACING_GRANULARITY, now + MAX_PACING_DELAY)
    });
    let later = |at: Instant| window.is_some_and(|(due, max)| at > due && at <= max);
    // A packet already in the buffer (written past the previous batch) that starts this one.
    let mut carried: Option<(usize, SocketAddr)> = None;
    if let Some(h) = sent.held.take() {
        if later(h.at) {
            let at = h.at;
            sent.held = Some(h);
            return Filled::Wait(at);
        }
        buf[..h.bytes.len()].copy_from_slice(&h.bytes);
        carried = Some((h.bytes.len(), h.to));
    }
    loop {
        let (mut len, segment, to) = match carried.take() {
            Some((n, to)) => (n, n, to),
            None => match conn.send(&mut buf[..MAX_DATAGRAM]) {
                Ok((n, info)) if later(info.at) => return hold(sent, &buf[..n], info.to, info.at),
                Ok((n, info)) => (n, n, info.to),
                Err(e) => return stop(conn, e),
            },
        };
        let mut count = 1;
        let mut finished = false;
        while gso && count < MAX_SEGMENTS && len + segment <= MAX_BATCH {
            match conn.send(&mut buf[len..len + segment]) {
                Ok((n, info)) if later(info.at) => {
                    // Not due yet: this batch leaves now, the packet when it is due.
                    let held = hold(sent, &buf[len..len + n], info.to, info.at);
                    return match send_batch(socket, &buf[..len], segment, to, sent) {
                        Some(blocked) => Filled::Blocked(blocked),
                        None => held,
                    };
                }
                Ok((n, info)) if info.to != to => {
                    // Another path: this batch ends; the packet moves to the front for the next.
                    carried = Some((n, info.to));
                    let blocked = send_batch(socket, &buf[..len], segment, to, sent);
                    buf.copy_within(len..len + n, 0);
                    if let Some(blocked) = blocked {
                        // Rare (a full socket while migrating): the carried packet is dropped
                        // and retransmitted by quiche later.
                        return Filled::Blocked(blocked);
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
            return Filled::Blocked(blocked);
        }
        if finished {
            return Filled::Done;
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
fn stop(conn: &mut quiche::Connection, e: quiche::Error) -> Filled {
    if e != quiche::Error::Done {
        tracing::debug!(error = %e, "QUIC connection failed to send; closed");
        let _ = conn.close(false, 0x1, b"");
    }
    Filled::Done
}

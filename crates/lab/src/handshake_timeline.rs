//! Per-message TLS handshake timelines from a packet capture (the forwarder's tap,
//! [`crate::Lab::start_capture`]).
//!
//! [`timelines`] takes the delivered packets (time, direction, IP bytes), keeps the IPv4 / IPv6
//! TCP ones, groups them by connection (4-tuple; a connection starts with a delivered SYN, so
//! stray packets of earlier connections are ignored), and reassembles each direction's byte
//! stream by sequence number: retransmitted and duplicate segments are ignored, out-of-order ones
//! wait until the gap is filled. A byte counts as *delivered* when every byte before it has been
//! delivered too (when the receiver's TCP can hand it to TLS). Each stream is then split into TLS
//! records and the plaintext handshake records into messages (a message may span records, a record
//! may hold several messages). Every message or record is reported with the time its last byte
//! was delivered, relative to the delivery of the SYN:
//!
//! - TCP: `SYN` (client→server, time 0), `SYN-ACK`, `ACK` (the client's first ACK);
//! - plaintext handshake messages by type: `ClientHello`, `ServerHello`, `Certificate`,
//!   `CertificateStatus` (the OCSP staple), `ServerKeyExchange`, `ServerHelloDone`,
//!   `ClientKeyExchange`, …; `bytes` = the message with its 4-byte header;
//! - `ChangeCipherSpec`, then `Finished` for the first encrypted handshake record after it (TLS
//!   1.2; in TLS 1.3 that record is EncryptedExtensions and later), `EncryptedHandshake` for
//!   later ones, `ApplicationData` and `Alert` records; `bytes` = the record's payload.

use crate::forward::CapturedPacket;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Direction of a message, by TCP role.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// Client → server.
    #[serde(rename = "c->s")]
    ClientToServer,
    /// Server → client.
    #[serde(rename = "s->c")]
    ServerToClient,
}

impl Side {
    /// `c→s` / `s→c`.
    pub fn arrow(self) -> &'static str {
        match self {
            Side::ClientToServer => "c→s",
            Side::ServerToClient => "s→c",
        }
    }
}

/// One message (or TCP event) of a connection.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    /// `SYN`, `ClientHello`, `CertificateStatus`, `ApplicationData`, …
    pub name: String,
    /// Who sent it.
    pub dir: Side,
    /// When its last byte was delivered, ms after the SYN's delivery.
    pub t_ms: f64,
    /// Handshake messages: with their 4-byte header; records: payload; TCP events: 0.
    pub bytes: usize,
}

/// One connection's timeline, events in time order.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// The side that sent the SYN.
    pub client: SocketAddr,
    /// The other side.
    pub server: SocketAddr,
    /// Capture time of the SYN's delivery, s.
    pub syn_at: f64,
    /// Events.
    pub events: Vec<Event>,
}

impl Timeline {
    /// The first event with this name and direction.
    pub fn find(&self, name: &str, dir: Side) -> Option<&Event> {
        self.events.iter().find(|e| e.name == name && e.dir == dir)
    }
}

/// A parsed TCP segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Source.
    pub src: SocketAddr,
    /// Destination.
    pub dst: SocketAddr,
    /// Sequence number.
    pub seq: u32,
    /// SYN flag.
    pub syn: bool,
    /// ACK flag.
    pub ack: bool,
    /// Payload (as captured).
    pub payload: Vec<u8>,
}

/// Parses an IPv4 or IPv6 packet holding TCP (IPv6: no extension headers); `None` otherwise.
pub fn parse_segment(p: &[u8]) -> Option<Segment> {
    let (src, dst, l4, end) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if p.len() < 20 || ihl < 20 || p[9] != 6 {
                return None;
            }
            let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
            let a = |i: usize| IpAddr::V4(Ipv4Addr::new(p[i], p[i + 1], p[i + 2], p[i + 3]));
            (a(12), a(16), ihl, total.min(p.len()))
        }
        6 => {
            if p.len() < 40 || p[6] != 6 {
                return None;
            }
            let total = 40 + usize::from(u16::from_be_bytes([p[4], p[5]]));
            let a = |i: usize| {
                let b: [u8; 16] = p[i..i + 16].try_into().unwrap_or([0; 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            (a(8), a(24), 40, total.min(p.len()))
        }
        _ => return None,
    };
    let t = p.get(l4..end)?;
    if t.len() < 20 {
        return None;
    }
    let off = usize::from(t[12] >> 4) * 4;
    let flags = t[13];
    Some(Segment {
        src: SocketAddr::new(src, u16::from_be_bytes([t[0], t[1]])),
        dst: SocketAddr::new(dst, u16::from_be_bytes([t[2], t[3]])),
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        syn: flags & 0x02 != 0,
        ack: flags & 0x10 != 0,
        payload: t.get(off..).unwrap_or_default().to_vec(),
    })
}

/// One direction's reassembled byte stream.
#[derive(Debug, Default)]
struct Stream {
    /// Sequence number of the first data byte (ISN + 1), once the SYN is seen.
    start: Option<u32>,
    /// The contiguous bytes delivered so far.
    data: Vec<u8>,
    /// Segments beyond a gap, by stream offset.
    pending: BTreeMap<u64, Vec<u8>>,
    /// (contiguous length, time it was reached), increasing.
    progress: Vec<(u64, f64)>,
}

impl Stream {
    /// Adds a delivered segment whose first payload byte has sequence number `seq`.
    fn add(&mut self, seq: u32, payload: &[u8], t: f64) {
        let Some(start) = self.start else { return };
        if payload.is_empty() {
            return;
        }
        // Offsets beyond 2 GiB are bytes from before the start (e.g. a stray old segment).
        let off = u64::from(seq.wrapping_sub(start));
        if off >= 1 << 31 {
            return;
        }
        let have = self.data.len() as u64;
        let end = off + payload.len() as u64;
        if end <= have {
            return; // a retransmission of delivered bytes
        }
        let e = self.pending.entry(off).or_default();
        if e.len() < payload.len() {
            *e = payload.to_vec();
        }
        while let Some(mut entry) = self.pending.first_entry() {
            let o = *entry.key();
            let have = self.data.len() as u64;
            if o > have {
                break;
            }
            let bytes = std::mem::take(entry.get_mut());
            entry.remove();
            let skip = (have - o) as usize;
            if skip < bytes.len() {
                self.data.extend_from_slice(&bytes[skip..]);
            }
        }
        let now = self.data.len() as u64;
        if now > have {
            self.progress.push((now, t));
        }
    }

    /// When stream offset `end` (exclusive) had been delivered.
    fn time_of(&self, end: u64) -> Option<f64> {
        let i = self.progress.partition_point(|&(len, _)| len < end);
        self.progress.get(i).map(|&(_, t)| t)
    }
}

/// Name of a handshake message type.
pub fn handshake_name(ty: u8) -> String {
    match ty {
        0 => "HelloRequest",
        1 => "ClientHello",
        2 => "ServerHello",
        4 => "NewSessionTicket",
        8 => "EncryptedExtensions",
        11 => "Certificate",
        12 => "ServerKeyExchange",
        13 => "CertificateRequest",
        14 => "ServerHelloDone",
        15 => "CertificateVerify",
        16 => "ClientKeyExchange",
        20 => "Finished",
        22 => "CertificateStatus",
        _ => return format!("Handshake{ty}"),
    }
    .to_string()
}

/// Splits a stream into TLS records and messages: `(name, end offset, bytes)`, in stream order.
/// Stops at the first incomplete record.
fn tls_messages(data: &[u8]) -> Vec<(String, u64, usize)> {
    let mut out = vec![];
    let (mut pos, mut encrypted, mut finished) = (0usize, false, false);
    // Plaintext handshake bytes not yet split into messages, with each byte's stream offset.
    let (mut hs, mut hs_off): (Vec<u8>, Vec<u64>) = (vec![], vec![]);
    while let Some(h) = data.get(pos..pos + 5) {
        let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
        let Some(body) = data.get(pos + 5..pos + 5 + len) else {
            break;
        };
        let end = (pos + 5 + len) as u64;
        match (h[0], encrypted) {
            (22, false) => {
                hs.extend_from_slice(body);
                hs_off.extend((pos + 5..pos + 5 + len).map(|o| o as u64));
                while hs.len() >= 4 {
                    let n = 4 + ((usize::from(hs[1]) << 16) | (usize::from(hs[2]) << 8) | usize::from(hs[3]));
                    if hs.len() < n {
                        break;
                    }
                    out.push((handshake_name(hs[0]), hs_off[n - 1] + 1, n));
                    hs.drain(..n);
                    hs_off.drain(..n);
                }
            }
            (22, true) => {
                let name = if finished { "EncryptedHandshake" } else { "Finished" };
                finished = true;
                out.push((name.to_string(), end, len));
            }
            (20, _) => {
                encrypted = true;
                out.push(("ChangeCipherSpec".to_string(), end, len));
            }
            (21, _) => out.push(("Alert".to_string(), end, len)),
            (23, _) => out.push(("ApplicationData".to_string(), end, len)),
            (ty, _) => out.push((format!("Record{ty}"), end, len)),
        }
        pos += 5 + len;
    }
    out
}

#[derive(Debug)]
struct Conn {
    client: SocketAddr,
    server: SocketAddr,
    syn_at: f64,
    syn_ack_at: Option<f64>,
    ack_at: Option<f64>,
    /// Client → server, server → client.
    streams: [Stream; 2],
}

/// The timelines of every connection whose SYN is in the capture, in order of their SYNs.
/// Packets are taken in capture order (the order the tap recorded deliveries).
pub fn timelines(packets: &[CapturedPacket]) -> Vec<Timeline> {
    let mut conns: Vec<Conn> = vec![];
    let mut by_key: HashMap<(SocketAddr, SocketAddr), usize> = HashMap::new();
    for p in packets {
        let Some(s) = parse_segment(&p.data) else { continue };
        let key = (s.src, s.dst);
        // A SYN with a new ISN on a known 4-tuple starts a new connection (port reuse).
        let known = by_key
            .get(&key)
            .copied()
            .filter(|&i| !(s.syn && !s.ack && conns[i].streams[0].start != Some(s.seq.wrapping_add(1))));
        let idx = match known {
            Some(i) => i,
            None if s.syn && !s.ack => {
                let mut c = Conn {
                    client: s.src,
                    server: s.dst,
                    syn_at: p.t,
                    syn_ack_at: None,
                    ack_at: None,
                    streams: Default::default(),
                };
                c.streams[0].start = Some(s.seq.wrapping_add(1));
                conns.push(c);
                let i = conns.len() - 1;
                by_key.insert((s.src, s.dst), i);
                by_key.insert((s.dst, s.src), i);
                i
            }
            None => continue,
        };
        let c = &mut conns[idx];
        let from_client = s.src == c.client;
        if s.syn && !from_client {
            c.syn_ack_at.get_or_insert(p.t);
            c.streams[1].start.get_or_insert(s.seq.wrapping_add(1));
        }
        if from_client && !s.syn && s.ack && c.syn_ack_at.is_some() {
            c.ack_at.get_or_insert(p.t);
        }
        let seq = if s.syn { s.seq.wrapping_add(1) } else { s.seq };
        c.streams[usize::from(!from_client)].add(seq, &s.payload, p.t);
    }
    conns.into_iter().map(timeline).collect()
}

fn timeline(c: Conn) -> Timeline {
    let ms = |t: f64| (t - c.syn_at) * 1e3;
    let ev = |name: &str, dir, t: f64, bytes| Event {
        name: name.to_string(),
        dir,
        t_ms: ms(t),
        bytes,
    };
    let mut events = vec![ev("SYN", Side::ClientToServer, c.syn_at, 0)];
    if let Some(t) = c.syn_ack_at {
        events.push(ev("SYN-ACK", Side::ServerToClient, t, 0));
    }
    if let Some(t) = c.ack_at {
        events.push(ev("ACK", Side::ClientToServer, t, 0));
    }
    for (st, dir) in c.streams.iter().zip([Side::ClientToServer, Side::ServerToClient]) {
        for (name, end, bytes) in tls_messages(&st.data) {
            if let Some(t) = st.time_of(end) {
                events.push(ev(&name, dir, t, bytes));
            }
        }
    }
    // Stable: messages delivered together keep their stream order.
    events.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    Timeline {
        client: c.client,
        server: c.server,
        syn_at: c.syn_at,
        events,
    }
}

#[cfg(test)]
#[path = "handshake_timeline_tests.rs"]
mod tests;

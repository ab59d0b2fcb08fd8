//! The first flights of each connection in a packet capture (the forwarder's tap): what the client
//! sent before it heard from the server, and what the server sent before it heard the client's
//! answer. For QUIC that is what the anti-amplification limit governs (RFC 9000 §8.1: until the
//! client's address is validated the server sends at most 3× the bytes it received, which for a
//! new connection are the client's Initial datagrams); for TCP, what initcwnd lets through.
//!
//! Times are the forwarder's: a packet's *send* time is when the link's reader took it off the
//! sender's TUN device (the tap's time minus the time the emulator held it and how late the
//! writer was); its *delivery* time is when the writer began to write it to the receiver's
//! (its scheduled departure, the earliest it can have begun: the receiver's kernel may answer
//! within the write, before the tap's own time-stamp after it). So "the server sent X before it
//! received Y" compares X's send time with Y's delivery time, both at the server's end of the
//! link.
//!
//! Bytes are UDP payload bytes for QUIC (what quiche counts against the limit: whole datagrams)
//! and TCP payload bytes for TCP. A QUIC datagram's coalesced packets are split by their long
//! headers (RFC 9000 §17.2), so the Initial and Handshake packets' bytes — the server's
//! handshake flight — are counted apart from 1-RTT ones. Connections are keyed by the client's
//! port: TCP connections start at a SYN; a QUIC connection starts at a client Initial whose
//! destination connection ID the flow has not seen (a probe's next connection reusing a port).

use crate::forward::{CapDir, CapturedPacket};
use crate::handshake_timeline::parse_segment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A QUIC packet type (RFC 9000 §17), version 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuicKind {
    /// Long header, type 0.
    Initial,
    /// Long header, type 1.
    ZeroRtt,
    /// Long header, type 2.
    Handshake,
    /// Long header, type 3 (the rest of the datagram).
    Retry,
    /// Version negotiation (long header, version 0).
    VersionNegotiation,
    /// Short header (the rest of the datagram).
    OneRtt,
    /// Zero bytes after the last packet: a datagram padded outside its packets (quiche pads a
    /// datagram that carries an Initial packet to 1,200 bytes that way).
    Padding,
}

/// One packet of a datagram: its kind, bytes (header included) and, for long headers, the
/// destination and source connection IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicPacket {
    /// Type.
    pub kind: QuicKind,
    /// Bytes of the datagram it takes.
    pub bytes: usize,
    /// Destination connection ID (long headers only).
    pub dcid: Vec<u8>,
    /// Source connection ID (long headers only).
    pub scid: Vec<u8>,
}

/// A QUIC variable-length integer at `b[*i..]`; advances `i`.
fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let first = *b.get(*i)?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(*i..*i + len)?;
    let mut v = u64::from(first & 0x3f);
    for &x in &bytes[1..] {
        v = (v << 8) | u64::from(x);
    }
    *i += len;
    Some(v)
}

/// Splits a UDP payload into its coalesced QUIC packets. A malformed long header ends the list
/// with what was parsed (`None` if nothing was).
pub fn quic_packets(d: &[u8]) -> Option<Vec<QuicPacket>> {
    let mut out = vec![];
    let mut i = 0;
    while i < d.len() {
        let b0 = d[i];
        if b0 & 0x80 == 0 {
            // A short header has its fixed bit (0x40) set; all zeros are padding.
            let padding = !out.is_empty() && d[i..].iter().all(|&b| b == 0);
            out.push(QuicPacket {
                kind: if padding { QuicKind::Padding } else { QuicKind::OneRtt },
                bytes: d.len() - i,
                dcid: vec![],
                scid: vec![],
            });
            break;
        }
        let start = i;
        let Some(parsed) = long_header(d, &mut i) else {
            break;
        };
        let (kind, dcid, scid) = parsed;
        let end = match kind {
            QuicKind::Retry | QuicKind::VersionNegotiation => d.len(),
            _ => {
                if kind == QuicKind::Initial {
                    let Some(token) = varint(d, &mut i) else { break };
                    i += usize::try_from(token).ok()?;
                }
                let Some(len) = varint(d, &mut i) else { break };
                i.saturating_add(usize::try_from(len).ok()?)
            }
        };
        if end > d.len() {
            break;
        }
        out.push(QuicPacket {
            kind,
            bytes: end - start,
            dcid,
            scid,
        });
        i = end;
    }
    (!out.is_empty()).then_some(out)
}

/// A long header's type and connection IDs; leaves `i` after the source connection ID.
fn long_header(d: &[u8], i: &mut usize) -> Option<(QuicKind, Vec<u8>, Vec<u8>)> {
    let b0 = *d.get(*i)?;
    let version = d.get(*i + 1..*i + 5)?;
    *i += 5;
    let dl = usize::from(*d.get(*i)?);
    let dcid = d.get(*i + 1..*i + 1 + dl)?.to_vec();
    *i += 1 + dl;
    let sl = usize::from(*d.get(*i)?);
    let scid = d.get(*i + 1..*i + 1 + sl)?.to_vec();
    *i += 1 + sl;
    let kind = if version == [0, 0, 0, 0] {
        QuicKind::VersionNegotiation
    } else {
        match (b0 >> 4) & 0x03 {
            0 => QuicKind::Initial,
            1 => QuicKind::ZeroRtt,
            2 => QuicKind::Handshake,
            _ => QuicKind::Retry,
        }
    };
    Some((kind, dcid, scid))
}

/// The UDP ports and payload of an IPv4 or IPv6 (no extension headers) UDP packet.
fn udp(p: &[u8]) -> Option<(u16, u16, &[u8])> {
    let (l4, end) = match p.first()? >> 4 {
        4 if p.len() >= 20 && *p.get(9)? == 17 => (
            usize::from(p[0] & 0x0f) * 4,
            usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len()),
        ),
        6 if p.len() >= 40 && *p.get(6)? == 17 => {
            (40, (40 + usize::from(u16::from_be_bytes([p[4], p[5]]))).min(p.len()))
        }
        _ => return None,
    };
    let u = p.get(l4..end)?;
    if u.len() < 8 {
        return None;
    }
    Some((
        u16::from_be_bytes([u[0], u[1]]),
        u16::from_be_bytes([u[2], u[3]]),
        &u[8..],
    ))
}

/// One datagram or segment of a connection, as the analysis needs it.
#[derive(Debug, Clone)]
struct Pkt {
    up: bool,
    sent: f64,
    delivered: f64,
    /// UDP / TCP payload bytes.
    bytes: usize,
    /// QUIC: bytes of its Initial and Handshake packets; TCP: 0.
    handshake_bytes: usize,
    /// QUIC: zero padding after its packets; TCP: 0.
    padding: usize,
    /// TCP: carries payload (QUIC: unused).
    marks: bool,
    /// QUIC: carries a 1-RTT (short header) packet (TCP: unused).
    one_rtt: bool,
}

/// What the first flights of one connection held.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FirstFlight {
    /// The client's port.
    pub client_port: u16,
    /// QUIC (UDP) or TCP.
    pub quic: bool,
    /// Bytes the client sent before any server data reached it (QUIC: its Initial datagram(s),
    /// padded to at least 1,200 bytes each; TCP: the ClientHello).
    pub client_first_bytes: u64,
    /// Datagrams (segments with payload) of that flight.
    pub client_first_packets: u64,
    /// Bytes the server sent before the client's answer to its first data reached it.
    pub server_first_bytes: u64,
    /// Datagrams (segments with payload) of that flight.
    pub server_first_packets: u64,
    /// QUIC: bytes of that flight that are zero padding after the datagrams' packets (quiche
    /// does not charge them to the anti-amplification budget).
    pub server_first_padding: u64,
    /// The server's handshake flight in all: QUIC, the bytes of its Initial and Handshake
    /// packets (retransmissions included); TCP, the payload it sent before the client's second
    /// data (the client's Finished) reached it.
    pub server_handshake_bytes: u64,
    /// Of those, the bytes sent after the first flight: what had to wait for the client's answer.
    pub server_handshake_bytes_later: u64,
    /// Rounds the server's handshake flight took: a round ends when the client's answer to its
    /// first packet reaches the server, and each costs a round trip.
    pub server_rounds: u64,
    /// `server_first_bytes / client_first_bytes` (the anti-amplification limit is 3).
    #[serde(deserialize_with = "nan_if_null")]
    pub ratio: f64,
    /// The same without the padding: what quiche charges against the limit of 3.
    #[serde(deserialize_with = "nan_if_null")]
    pub charged_ratio: f64,
}

/// A ratio that JSON wrote as `null` (NaN: no client bytes) reads back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The first flights of every connection in `packets`, in order of their first packet.
pub fn first_flights(packets: &[CapturedPacket]) -> Vec<FirstFlight> {
    let mut flows: Vec<(FirstFlight, Vec<Pkt>, Vec<Vec<u8>>)> = vec![];
    let mut by_port: BTreeMap<(bool, u16), usize> = BTreeMap::new();
    for p in packets {
        let up = p.dir == CapDir::AToB;
        let sent = p.t - p.scheduled - p.late;
        let delivered = p.t - p.late;
        if let Some((sp, dp, payload)) = udp(&p.data) {
            let port = if up { sp } else { dp };
            let Some(qp) = quic_packets(payload) else { continue };
            let initial_dcid = qp.iter().find(|q| q.kind == QuicKind::Initial).map(|q| q.dcid.clone());
            let known = by_port.get(&(true, port)).copied();
            let fresh = match (up, known, &initial_dcid) {
                (true, None, Some(_)) => true,
                (true, Some(i), Some(d)) => !flows[i].2.contains(d),
                _ => false,
            };
            if fresh {
                by_port.insert((true, port), flows.len());
                let ids = initial_dcid.into_iter().collect();
                let ff = FirstFlight {
                    client_port: port,
                    quic: true,
                    ..FirstFlight::default()
                };
                flows.push((ff, vec![], ids));
            }
            let Some(&i) = by_port.get(&(true, port)) else { continue };
            if !up {
                // The client answers to the server's chosen connection ID from then on.
                for q in qp.iter().filter(|q| q.kind == QuicKind::Initial) {
                    if !flows[i].2.contains(&q.scid) {
                        flows[i].2.push(q.scid.clone());
                    }
                }
            }
            let handshake_bytes = qp
                .iter()
                .filter(|q| matches!(q.kind, QuicKind::Initial | QuicKind::Handshake))
                .map(|q| q.bytes)
                .sum();
            flows[i].1.push(Pkt {
                up,
                sent,
                delivered,
                bytes: payload.len(),
                handshake_bytes,
                padding: qp.iter().filter(|q| q.kind == QuicKind::Padding).map(|q| q.bytes).sum(),
                marks: false,
                one_rtt: qp.iter().any(|q| q.kind == QuicKind::OneRtt),
            });
        } else if let Some(seg) = parse_segment(&p.data) {
            let port = if up { seg.src.port() } else { seg.dst.port() };
            if up && seg.syn {
                by_port.insert((false, port), flows.len());
                let ff = FirstFlight {
                    client_port: port,
                    quic: false,
                    ..FirstFlight::default()
                };
                flows.push((ff, vec![], vec![]));
                continue;
            }
            let Some(&i) = by_port.get(&(false, port)) else {
                continue;
            };
            flows[i].1.push(Pkt {
                up,
                sent,
                delivered,
                bytes: seg.payload.len(),
                handshake_bytes: 0,
                padding: 0,
                marks: !seg.payload.is_empty(),
                one_rtt: false,
            });
        }
    }
    flows.into_iter().map(|(ff, pkts, _)| analyse(ff, &pkts)).collect()
}

fn analyse(mut ff: FirstFlight, pkts: &[Pkt]) -> FirstFlight {
    let data = |p: &&Pkt| p.bytes > 0;
    // When the first server data reached the client.
    let Some(first_down) = pkts
        .iter()
        .filter(|p| !p.up)
        .filter(data)
        .map(|p| p.delivered)
        .reduce(f64::min)
    else {
        return ff;
    };
    let client_first: Vec<&Pkt> = pkts
        .iter()
        .filter(|p| p.up && p.sent < first_down)
        .filter(data)
        .collect();
    ff.client_first_bytes = client_first.iter().map(|p| p.bytes as u64).sum();
    ff.client_first_packets = client_first.len() as u64;
    // The client's answer: its first packet sent after the server's data reached it.
    let answer = pkts
        .iter()
        .filter(|p| p.up && p.sent >= first_down)
        .map(|p| p.delivered)
        .reduce(f64::min)
        .unwrap_or(f64::INFINITY);
    let server_first: Vec<&Pkt> = pkts.iter().filter(|p| !p.up && p.sent < answer).filter(data).collect();
    ff.server_first_bytes = server_first.iter().map(|p| p.bytes as u64).sum();
    ff.server_first_packets = server_first.len() as u64;
    ff.server_first_padding = server_first.iter().map(|p| p.padding as u64).sum();
    if ff.quic {
        let (first, later): (Vec<&Pkt>, Vec<&Pkt>) = pkts.iter().filter(|p| !p.up).partition(|p| p.sent < answer);
        let hs = |v: &[&Pkt]| v.iter().map(|p| p.handshake_bytes as u64).sum::<u64>();
        ff.server_handshake_bytes = hs(&first) + hs(&later);
        ff.server_handshake_bytes_later = hs(&later);
        // The client's first 1-RTT packet says its handshake is complete: a server handshake
        // packet sent after that (the acknowledgement of its Finished, a probe a slow client
        // drew) is on no round trip the handshake waited for.
        let client_done = pkts
            .iter()
            .filter(|p| p.up && p.one_rtt)
            .map(|p| p.sent)
            .reduce(f64::min)
            .unwrap_or(f64::INFINITY);
        ff.server_rounds = rounds(pkts, |p| p.handshake_bytes > 0, client_done);
    } else {
        // The client's second data (its Finished) ends the server's handshake flight.
        let finished = pkts
            .iter()
            .filter(|p| p.up && p.marks && p.sent >= first_down)
            .map(|p| p.delivered)
            .reduce(f64::min)
            .unwrap_or(f64::INFINITY);
        let hs: Vec<&Pkt> = pkts
            .iter()
            .filter(|p| !p.up && p.sent < finished)
            .filter(data)
            .collect();
        ff.server_handshake_bytes = hs.iter().map(|p| p.bytes as u64).sum();
        ff.server_handshake_bytes_later = ff.server_handshake_bytes.saturating_sub(ff.server_first_bytes);
        ff.server_rounds = rounds(pkts, |p| p.bytes > 0, finished);
    }
    let per_client = |b: u64| {
        if ff.client_first_bytes > 0 {
            b as f64 / ff.client_first_bytes as f64
        } else {
            f64::NAN
        }
    };
    ff.ratio = per_client(ff.server_first_bytes);
    ff.charged_ratio = per_client(ff.server_first_bytes - ff.server_first_padding);
    ff
}

/// Rounds of the server's packets that `counts` (sent before `end`): each starts with the first
/// such packet sent once the previous round's answer reached the server, and its answer is the
/// first client packet sent after that packet reached the client.
fn rounds(pkts: &[Pkt], counts: impl Fn(&Pkt) -> bool, end: f64) -> u64 {
    let mut after = f64::NEG_INFINITY;
    let mut n = 0;
    while let Some(first) = pkts
        .iter()
        .filter(|p| !p.up && counts(p) && p.sent >= after && p.sent < end)
        .min_by(|a, b| a.sent.total_cmp(&b.sent))
    {
        n += 1;
        match pkts
            .iter()
            .filter(|p| p.up && p.sent >= first.delivered)
            .map(|p| p.delivered)
            .reduce(f64::min)
        {
            Some(a) if a > after => after = a,
            _ => break,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(kind: u8, dcid: &[u8], scid: &[u8], body: usize) -> Vec<u8> {
        let mut v = vec![0xc0 | (kind << 4), 0, 0, 0, 1, dcid.len() as u8];
        v.extend_from_slice(dcid);
        v.push(scid.len() as u8);
        v.extend_from_slice(scid);
        if kind == 0 {
            v.push(0); // no token
        }
        // 2-byte varint length
        v.extend_from_slice(&[0x40 | (body >> 8) as u8, body as u8]);
        v.extend(std::iter::repeat_n(0xaa, body));
        v
    }

    /// An IPv4/UDP packet 10.77.0.1:port ⇄ 10.77.0.2:443 delivered at `t`, sent `held` before.
    fn dgram(t: f64, held: f64, up: bool, port: u16, payload: &[u8]) -> CapturedPacket {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        let total = (28 + payload.len()) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[9] = 17;
        let (sp, dp) = if up { (port, 443) } else { (443, port) };
        p[20..22].copy_from_slice(&sp.to_be_bytes());
        p[22..24].copy_from_slice(&dp.to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        p.extend_from_slice(payload);
        CapturedPacket {
            t,
            dir: if up { CapDir::AToB } else { CapDir::BToA },
            len: p.len(),
            data: p,
            scheduled: held,
            late: 0.0,
        }
    }

    #[test]
    fn coalesced_packets_are_split() {
        let mut d = long(0, b"abcdefgh", b"s1", 100);
        let init_len = d.len();
        d.extend(long(2, b"abcdefgh", b"s1", 300));
        let hs_len = d.len() - init_len;
        d.extend([0x40, 1, 2, 3]);
        let q = quic_packets(&d).unwrap();
        let kinds: Vec<_> = q.iter().map(|p| (p.kind, p.bytes)).collect();
        assert_eq!(
            kinds,
            [
                (QuicKind::Initial, init_len),
                (QuicKind::Handshake, hs_len),
                (QuicKind::OneRtt, 4)
            ]
        );
        assert_eq!(q[0].dcid, b"abcdefgh");
        assert_eq!(q[0].scid, b"s1");
        // A truncated second packet: only the first is returned.
        assert_eq!(quic_packets(&d[..init_len + 10]).unwrap().len(), 1);
        assert!(quic_packets(&[0xc0, 0]).is_none());
        let mut i = 0;
        assert_eq!(varint(&[0x7b, 0xbd], &mut i), Some(15_293));
        assert_eq!(i, 2);
    }

    #[test]
    fn an_amplification_limited_quic_handshake() {
        // RTT 100 ms (50 each way). The client's Initial (1,200 bytes) at 0; the server sends
        // 3,600 bytes at 50 ms; the client answers at 101 ms (Handshake ACK), the server sends
        // the rest (2,000 bytes of Handshake) at 152 ms, then 1-RTT data.
        let c = b"clientcid";
        let v = vec![
            dgram(0.05, 0.05, true, 5000, &long(0, c, b"", 1180)),
            dgram(0.10, 0.05, false, 5000, &long(0, b"", b"srv", 1300)),
            dgram(0.10, 0.05, false, 5000, &long(2, b"", b"srv", 1280)),
            dgram(0.10, 0.05, false, 5000, &long(2, b"", b"srv", 980)),
            dgram(0.151, 0.05, true, 5000, &long(2, b"srv", b"", 40)),
            dgram(0.202, 0.05, false, 5000, &long(2, b"", b"srv", 1980)),
            dgram(0.30, 0.05, false, 5000, &[0x40; 500]),
        ];
        let f = first_flights(&v);
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert!(f.quic);
        assert_eq!(f.client_first_bytes, v[0].len as u64 - 28);
        assert_eq!(f.client_first_packets, 1);
        assert_eq!(f.server_first_packets, 3);
        let first: u64 = v[1..4].iter().map(|p| p.len as u64 - 28).sum();
        assert_eq!(f.server_first_bytes, first);
        assert_eq!(f.server_handshake_bytes_later, v[5].len as u64 - 28);
        assert_eq!(f.server_handshake_bytes, first + v[5].len as u64 - 28);
        assert!(f.ratio > 2.9 && f.ratio <= 3.0, "{}", f.ratio);
        assert_eq!((f.server_first_padding, f.charged_ratio), (0, f.ratio));
        assert_eq!(f.server_rounds, 2);
        // The client completes (its Finished and its request, 1-RTT, sent at 202 ms); a server
        // Handshake packet sent after that (an acknowledgement, a probe) is not a round.
        let mut done = long(2, b"srv", b"", 60);
        done.extend([0x40; 100]);
        let mut after = v.clone();
        after.push(dgram(0.252, 0.05, true, 5000, &done));
        after.push(dgram(0.31, 0.05, false, 5000, &long(2, b"", b"srv", 30)));
        assert_eq!(first_flights(&after)[0].server_rounds, 2);
        // Without the client's 1-RTT packet it counted as a third round.
        after[7] = dgram(0.252, 0.05, true, 5000, &long(2, b"srv", b"", 60));
        assert_eq!(first_flights(&after)[0].server_rounds, 3);
        // The same port with a new Initial DCID is the next connection.
        let mut w = v.clone();
        w.push(dgram(0.5, 0.05, true, 5000, &long(0, b"othercid", b"", 1180)));
        assert_eq!(first_flights(&w).len(), 2);
    }

    fn seg(t: f64, up: bool, port: u16, flags: u8, payload: usize) -> CapturedPacket {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        p[9] = 6;
        let (sp, dp) = if up { (port, 443) } else { (443, port) };
        p[20..22].copy_from_slice(&sp.to_be_bytes());
        p[22..24].copy_from_slice(&dp.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags | 0x10;
        p.extend(std::iter::repeat_n(0, payload));
        CapturedPacket {
            t,
            dir: if up { CapDir::AToB } else { CapDir::BToA },
            len: p.len(),
            data: p,
            scheduled: 0.01,
            late: 0.0,
        }
    }

    #[test]
    fn a_tcp_flight_cut_by_initcwnd() {
        // RTT 20 ms. SYN, SYN-ACK, ClientHello; 10 segments, the client's ACK, 2 more; Finished.
        let mut v = vec![
            seg(0.010, true, 6000, 0x02, 0),
            seg(0.020, false, 6000, 0x02, 0),
            seg(0.030, true, 6000, 0, 300),
        ];
        for k in 0..10 {
            v.push(seg(0.040 + k as f64 * 1e-4, false, 6000, 0, 1448));
        }
        v.push(seg(0.051, true, 6000, 0, 0));
        v.push(seg(0.062, false, 6000, 0, 1448));
        v.push(seg(0.062, false, 6000, 0, 500));
        v.push(seg(0.071, true, 6000, 0, 80));
        v.push(seg(0.082, false, 6000, 0, 900));
        let f = &first_flights(&v)[0];
        assert!(!f.quic);
        assert_eq!((f.client_first_bytes, f.client_first_packets), (300, 1));
        assert_eq!((f.server_first_bytes, f.server_first_packets), (14_480, 10));
        assert_eq!(f.server_handshake_bytes, 14_480 + 1448 + 500);
        assert_eq!(f.server_handshake_bytes_later, 1948);
        assert_eq!(f.server_rounds, 2);
        // The server's answer to the ACK can leave before the tap's time-stamp of the ACK
        // (the kernel answers within the write): the writer's lateness is taken off.
        let mut w = v.clone();
        w[13].late = 0.001;
        w[13].t += 0.0015;
        let g = &first_flights(&w)[0];
        assert_eq!((g.server_first_bytes, g.server_rounds), (14_480, 2));
    }

    #[test]
    fn padding_after_an_initial_is_not_a_packet() {
        let mut d = long(0, b"c", b"s", 50);
        let n = d.len();
        d.extend([0u8; 100]);
        let q = quic_packets(&d).unwrap();
        assert_eq!(q[1].kind, QuicKind::Padding);
        assert_eq!((q[0].bytes, q[1].bytes), (n, 100));
        // The server's ACK-only Initial padded to 1,200 bytes, then its flight at the limit:
        // the padding is on the wire but not charged.
        let mut ack = long(0, b"", b"srv", 50);
        ack.resize(1200, 0);
        let v = vec![
            dgram(0.05, 0.05, true, 7000, &long(0, b"cid", b"", 1185)),
            dgram(0.0501, 0.05, true, 7000, &long(0, b"cid", b"", 1185)),
            dgram(0.1001, 0.05, false, 7000, &ack),
            dgram(0.1002, 0.05, false, 7000, &long(2, b"", b"srv", 1000)),
        ];
        let f = &first_flights(&v)[0];
        assert_eq!(f.client_first_packets, 2);
        let pkt = long(0, b"", b"srv", 50).len();
        assert_eq!(f.server_first_padding, (1200 - pkt) as u64);
        assert!(f.charged_ratio < f.ratio);
        assert_eq!(f.server_rounds, 1);
    }
}

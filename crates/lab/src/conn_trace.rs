//! What happened to each TCP connection in a packet capture (the forwarder's tap), at the level a
//! failed sample needs: when it started, how many bytes each side delivered in order, and when
//! and after how many bytes each side's FIN or RST reached the other. Used by ttlb-pq to explain
//! a sample that ended with an error ("connection closed before a complete response": did the
//! server close early, and at which stream offset, or did the client stop reading?).
//!
//! Connections are keyed by the client's port and start at a delivered SYN (client → server);
//! they are returned in SYN order, so the i-th connection of a capture that holds one probe run
//! is that run's i-th sample. Sequence numbers are taken relative to each side's ISN (the SYN's
//! and the SYN-ACK's), so offsets are stream bytes.

use crate::forward::{CapDir, CapturedPacket};
use crate::handshake_timeline::parse_segment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;

/// One direction of a connection.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DirTrace {
    /// Stream bytes delivered in order (every byte before them delivered too).
    pub bytes_in_order: u64,
    /// Data segments delivered (retransmissions and duplicates included).
    pub data_segments: u64,
    /// Time the last new in-order byte was delivered, ms after the SYN.
    pub last_data_ms: Option<f64>,
    /// A FIN was delivered: at this time (ms after the SYN) ...
    pub fin_ms: Option<f64>,
    /// ... after this many stream bytes (the FIN's sequence offset).
    pub fin_offset: Option<u64>,
    /// A RST was delivered, at this time (ms after the SYN).
    pub rst_ms: Option<f64>,
}

/// One connection.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnTrace {
    /// The client's port.
    pub client_port: u16,
    /// SYN delivery, seconds since the capture started.
    pub syn_at_s: f64,
    /// Last packet of the connection, ms after the SYN.
    pub last_ms: f64,
    /// Client → server.
    pub up: DirTrace,
    /// Server → client.
    pub down: DirTrace,
}

/// The TCP flags byte of an IPv4 or IPv6 packet (no IPv6 extension headers), if TCP.
fn tcp_flags(p: &[u8]) -> Option<u8> {
    let off = match p.first()? >> 4 {
        4 if *p.get(9)? == 6 => usize::from(p[0] & 0x0f) * 4,
        6 if *p.get(6)? == 6 => 40,
        _ => return None,
    };
    p.get(off + 13).copied()
}

#[derive(Default)]
struct DirState {
    isn: Option<u32>,
    /// Next expected offset, and out-of-order ranges (start → end) waiting for the gap.
    next: u64,
    held: BTreeMap<u64, u64>,
    trace: DirTrace,
}

impl DirState {
    fn offset(&self, seq: u32) -> Option<u64> {
        self.isn.map(|isn| u64::from(seq.wrapping_sub(isn).wrapping_sub(1)))
    }

    fn data(&mut self, seq: u32, len: usize, t_ms: f64) {
        let Some(start) = self.offset(seq) else {
            return;
        };
        self.trace.data_segments += 1;
        let end = start + len as u64;
        if end <= self.next {
            return;
        }
        let e = self.held.entry(start).or_insert(end);
        *e = (*e).max(end);
        let before = self.next;
        while let Some((&s, &e)) = self.held.first_key_value() {
            if s > self.next {
                break;
            }
            self.held.remove(&s);
            self.next = self.next.max(e);
        }
        if self.next > before {
            self.trace.bytes_in_order = self.next;
            self.trace.last_data_ms = Some(t_ms);
        }
    }
}

/// Per-connection traces of `packets`, in SYN order.
pub fn traces(packets: &[CapturedPacket]) -> Vec<ConnTrace> {
    // client port → (trace, up state, down state)
    let mut conns: Vec<(ConnTrace, DirState, DirState)> = vec![];
    let mut by_port: BTreeMap<u16, usize> = BTreeMap::new();
    for p in packets {
        let (Some(seg), Some(flags)) = (parse_segment(&p.data), tcp_flags(&p.data)) else {
            continue;
        };
        let up = p.dir == CapDir::AToB;
        let port = if up { seg.src.port() } else { seg.dst.port() };
        if up && flags & SYN != 0 {
            let fresh = match by_port.get(&port) {
                Some(&i) => conns[i].1.isn != Some(seg.seq),
                None => true,
            };
            if fresh {
                let mut st = DirState {
                    isn: Some(seg.seq),
                    ..DirState::default()
                };
                st.trace = DirTrace::default();
                by_port.insert(port, conns.len());
                conns.push((
                    ConnTrace {
                        client_port: port,
                        syn_at_s: p.t,
                        ..ConnTrace::default()
                    },
                    st,
                    DirState::default(),
                ));
            }
            continue;
        }
        let Some(&i) = by_port.get(&port) else {
            continue;
        };
        let (c, us, ds) = &mut conns[i];
        let t_ms = (p.t - c.syn_at_s) * 1e3;
        c.last_ms = c.last_ms.max(t_ms);
        if !up && flags & SYN != 0 {
            ds.isn.get_or_insert(seg.seq);
            continue;
        }
        let st = if up { us } else { ds };
        if !seg.payload.is_empty() {
            st.data(seg.seq, seg.payload.len(), t_ms);
        }
        if flags & FIN != 0 && st.trace.fin_ms.is_none() {
            st.trace.fin_ms = Some(t_ms);
            st.trace.fin_offset = st.offset(seg.seq).map(|o| o + seg.payload.len() as u64);
        }
        if flags & RST != 0 && st.trace.rst_ms.is_none() {
            st.trace.rst_ms = Some(t_ms);
        }
    }
    conns
        .into_iter()
        .map(|(mut c, us, ds)| {
            c.up = us.trace;
            c.down = ds.trace;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/TCP packet 10.77.0.1:port ⇄ 10.77.0.2:443.
    fn pkt(t: f64, up: bool, port: u16, seq: u32, flags: u8, payload: &[u8]) -> CapturedPacket {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        let total = (40 + payload.len()) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        let (a, b) = ([10, 77, 0, 1], [10, 77, 0, 2]);
        let (src, dst, sp, dp) = if up { (a, b, port, 443) } else { (b, a, 443, port) };
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sp.to_be_bytes());
        p[22..24].copy_from_slice(&dp.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags | 0x10;
        p.extend_from_slice(payload);
        CapturedPacket {
            t,
            dir: if up { CapDir::AToB } else { CapDir::BToA },
            len: p.len(),
            data: p,
            scheduled: 0.0,
            late: 0.0,
        }
    }

    #[test]
    fn offsets_fins_and_resets_per_connection() {
        let isn_c = 1000u32;
        let isn_s = u32::MAX - 5; // wraps
        let mut v = vec![
            pkt(1.0, true, 5000, isn_c, SYN, &[]),
            pkt(1.01, false, 5000, isn_s, SYN, &[]),
            pkt(1.02, true, 5000, isn_c + 1, 0, &[1; 100]),
            // server data: a hole, then filled (out of order), then a duplicate
            pkt(1.03, false, 5000, isn_s.wrapping_add(1 + 10), 0, &[2; 20]),
            pkt(1.04, false, 5000, isn_s.wrapping_add(1), 0, &[2; 10]),
            pkt(1.05, false, 5000, isn_s.wrapping_add(1), 0, &[2; 10]),
            pkt(1.06, false, 5000, isn_s.wrapping_add(31), FIN, &[]),
            // a second connection that the server resets
            pkt(2.0, true, 5001, 7, SYN, &[]),
            pkt(2.5, false, 5001, 9, RST, &[]),
        ];
        // a stray packet of an unknown connection is ignored
        v.insert(0, pkt(0.5, false, 4999, 1, 0, &[3; 5]));
        let t = traces(&v);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].client_port, 5000);
        assert_eq!(t[0].up.bytes_in_order, 100);
        assert_eq!(t[0].down.bytes_in_order, 30);
        assert_eq!(t[0].down.data_segments, 3);
        assert_eq!(t[0].down.fin_offset, Some(30));
        assert!((t[0].down.fin_ms.unwrap() - 60.0).abs() < 1e-6);
        assert!((t[0].down.last_data_ms.unwrap() - 40.0).abs() < 1e-6, "{:?}", t[0].down);
        assert_eq!(t[0].up.fin_ms, None);
        assert_eq!(t[1].client_port, 5001);
        assert!((t[1].down.rst_ms.unwrap() - 500.0).abs() < 1e-6);
    }
}

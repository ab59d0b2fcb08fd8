//! Tests of the handshake timeline with hand-built IPv4 / IPv6 TCP packets.

use super::*;
use crate::forward::CapDir;

const C: [u8; 4] = [10, 77, 0, 1];
const S: [u8; 4] = [10, 77, 0, 2];
const ISN_C: u32 = 1000;
// Near the wrap-around: sequence numbers wrap inside the server's stream.
const ISN_S: u32 = u32::MAX - 100;

/// An IPv4 TCP packet (checksums are not checked by the parser).
fn pkt(from_client: bool, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let (src, dst, sp, dp) = if from_client {
        (C, S, 40000u16, 443u16)
    } else {
        (S, C, 443, 40000)
    };
    let total = (20 + 20 + payload.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend(total.to_be_bytes());
    p.extend([0, 0, 0x40, 0, 64, 6, 0, 0]);
    p.extend(src);
    p.extend(dst);
    p.extend(sp.to_be_bytes());
    p.extend(dp.to_be_bytes());
    p.extend(seq.to_be_bytes());
    p.extend(0u32.to_be_bytes());
    p.extend([0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    p.extend(payload);
    p
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

fn at(t_ms: f64, from_client: bool, data: Vec<u8>) -> CapturedPacket {
    CapturedPacket {
        t: t_ms / 1e3,
        dir: if from_client { CapDir::AToB } else { CapDir::BToA },
        len: data.len(),
        data,
        scheduled: 0.0,
        late: 0.0,
    }
}

/// A handshake message of type `ty` with a body of `n` bytes.
fn msg(ty: u8, n: usize) -> Vec<u8> {
    let mut m = vec![ty, (n >> 16) as u8, (n >> 8) as u8, n as u8];
    m.extend(std::iter::repeat_n(0xab, n));
    m
}

fn record(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut r = vec![ty, 3, 3];
    r.extend((body.len() as u16).to_be_bytes());
    r.extend(body);
    r
}

fn handshake_open() -> Vec<CapturedPacket> {
    vec![
        at(100.0, true, pkt(true, ISN_C, SYN, &[])),
        at(110.0, false, pkt(false, ISN_S, SYN | ACK, &[])),
        at(120.0, true, pkt(true, ISN_C + 1, ACK, &[])),
    ]
}

fn names(t: &Timeline) -> Vec<(String, Side, f64, usize)> {
    // Rounded to µs: times go through seconds as f64.
    t.events
        .iter()
        .map(|e| (e.name.clone(), e.dir, (e.t_ms * 1e3).round() / 1e3, e.bytes))
        .collect()
}

#[test]
fn full_tls12_flight_with_split_retransmitted_and_reordered_segments() {
    let ch = record(22, &msg(1, 200));
    // One record: ServerHello, Certificate, CertificateStatus (two messages and more per record).
    let mut flight = vec![];
    flight.extend(msg(2, 70));
    flight.extend(msg(11, 900));
    flight.extend(msg(22, 300));
    let r1 = record(22, &flight);
    let r2 = record(22, &[msg(12, 100), msg(14, 0)].concat());
    let server: Vec<u8> = [r1.clone(), r2.clone()].concat();
    let (a, b) = server.split_at(1000); // the record (and Certificate) split over two segments
    let (b1, b2) = b.split_at(300);
    let s0 = ISN_S.wrapping_add(1);
    let mut pk = handshake_open();
    pk.push(at(130.0, true, pkt(true, ISN_C + 1, ACK, &ch)));
    // Segment 1; segment 3 arrives before segment 2 (reordered), then segment 1 again
    // (a retransmission) and segment 2.
    pk.push(at(150.0, false, pkt(false, s0, ACK, a)));
    pk.push(at(151.0, false, pkt(false, s0.wrapping_add(1300), ACK, b2)));
    pk.push(at(152.0, false, pkt(false, s0, ACK, a)));
    pk.push(at(160.0, false, pkt(false, s0.wrapping_add(1000), ACK, b1)));
    let tl = timelines(&pk);
    assert_eq!(tl.len(), 1);
    let t = &tl[0];
    assert_eq!(t.client, "10.77.0.1:40000".parse().unwrap());
    let ev = names(t);
    let want = [
        ("SYN", Side::ClientToServer, 0.0, 0),
        ("SYN-ACK", Side::ServerToClient, 10.0, 0),
        ("ACK", Side::ClientToServer, 20.0, 0),
        ("ClientHello", Side::ClientToServer, 30.0, 204),
        // ServerHello and Certificate end at stream offsets 79 and 983 < 1000: complete with
        // the first segment.
        ("ServerHello", Side::ServerToClient, 50.0, 74),
        ("Certificate", Side::ServerToClient, 50.0, 904),
        // The rest needs the gap filled at 160 ms (the segment after it came at 151 ms).
        ("CertificateStatus", Side::ServerToClient, 60.0, 304),
        ("ServerKeyExchange", Side::ServerToClient, 60.0, 104),
        ("ServerHelloDone", Side::ServerToClient, 60.0, 4),
    ];
    assert_eq!(ev.len(), want.len(), "{ev:?}");
    for (got, w) in ev.iter().zip(want) {
        assert_eq!((got.0.as_str(), got.1, got.3), (w.0, w.1, w.3), "{ev:?}");
        assert_eq!(got.2, w.2, "{ev:?}");
    }
    assert!(t.find("CertificateStatus", Side::ServerToClient).is_some());
}

#[test]
fn message_spanning_records_ccs_finished_and_application_data() {
    // ClientKeyExchange split over two records, then CCS, Finished (encrypted), app data.
    let cke = msg(16, 65);
    let mut c = record(22, &cke[..30]);
    c.extend(record(22, &cke[30..]));
    let r1_end = c.len();
    c.extend(record(20, &[1]));
    c.extend(record(22, &[0x55; 40]));
    c.extend(record(23, &[0x66; 100]));
    let mut pk = handshake_open();
    pk.push(at(130.0, true, pkt(true, ISN_C + 1, ACK, &c[..10])));
    pk.push(at(140.0, true, pkt(true, ISN_C + 11, ACK, &c[10..r1_end])));
    pk.push(at(150.0, true, pkt(true, ISN_C + 1 + r1_end as u32, ACK, &c[r1_end..])));
    // A stray segment of a connection whose SYN is not in the capture.
    let mut stray = pkt(true, 5, ACK, &[1, 2, 3]);
    stray[21] = 99; // another source port
    pk.push(at(155.0, true, stray));
    let tl = timelines(&pk);
    assert_eq!(tl.len(), 1);
    let ev = names(&tl[0]);
    let got: Vec<(&str, f64, usize)> = ev.iter().skip(3).map(|e| (e.0.as_str(), e.2, e.3)).collect();
    assert_eq!(
        got,
        [
            ("ClientKeyExchange", 40.0, 69),
            ("ChangeCipherSpec", 50.0, 1),
            ("Finished", 50.0, 40),
            ("ApplicationData", 50.0, 100)
        ]
    );
}

#[test]
fn incomplete_record_and_non_tcp_are_ignored() {
    let mut pk = handshake_open();
    let ch = record(22, &msg(1, 200));
    pk.push(at(130.0, true, pkt(true, ISN_C + 1, ACK, &ch[..100])));
    let mut udp = pkt(true, 0, 0, &[]);
    udp[9] = 17;
    pk.push(at(131.0, true, udp));
    pk.push(at(132.0, true, vec![0x45]));
    let tl = timelines(&pk);
    assert_eq!(tl.len(), 1);
    assert_eq!(tl[0].events.len(), 3, "{:?}", tl[0].events);
    assert!(tl[0].find("ClientHello", Side::ClientToServer).is_none());
}

#[test]
fn syn_retransmission_and_port_reuse() {
    let mut pk = handshake_open();
    // The SYN again (same ISN): the same connection.
    pk.push(at(125.0, true, pkt(true, ISN_C, SYN, &[])));
    // A new SYN with another ISN on the same 4-tuple: a new connection.
    pk.push(at(300.0, true, pkt(true, 77, SYN, &[])));
    pk.push(at(310.0, false, pkt(false, 5, SYN | ACK, &[])));
    let tl = timelines(&pk);
    assert_eq!(tl.len(), 2);
    assert_eq!(tl[1].events.len(), 2);
    assert!((tl[1].events[1].t_ms - 10.0).abs() < 1e-6);
}

#[test]
fn ipv6_segment_parses() {
    let mut p = vec![0x60, 0, 0, 0, 0, 23, 6, 64];
    p.extend([0u8; 15]);
    p.push(1);
    p.extend([0u8; 15]);
    p.push(2);
    let tcp = &pkt(true, 42, ACK, &[9, 9, 9])[20..];
    p.extend(tcp);
    let s = parse_segment(&p).unwrap();
    assert_eq!(s.src, "[::1]:40000".parse().unwrap());
    assert_eq!(s.dst, "[::2]:443".parse().unwrap());
    assert_eq!((s.seq, s.syn, s.ack), (42, false, true));
    assert_eq!(s.payload, [9, 9, 9]);
}

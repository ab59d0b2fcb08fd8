//! An origin's response bytes: the head parser and the chunked decoder must never panic, must
//! agree whether the bytes arrive at once or split anywhere, and must never return more body
//! bytes than they were given.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tlsgate_h1::chunked::{Chunk, Decoder};
use tlsgate_h1::fields::{HOP_BY_HOP, PROXY_AUTH};
use tlsgate_h1::response::{parse, Body, HopByHop};

/// Status, framing, the decoded chunked data and whether its end was seen; `None`: an error or
/// an unfinished head. The bytes arrive in two reads, split at `split`.
fn run(data: &[u8], split: usize) -> Option<(u16, Body, Vec<u8>, bool)> {
    let (first, second) = data.split_at(split.min(data.len()));
    let mut buf = BytesMut::from(first);
    let mut fed_second = second.is_empty();
    let head = loop {
        match parse(&mut buf, false) {
            Ok(Some(head)) => break head,
            Ok(None) if !fed_second => {
                buf.extend_from_slice(second);
                fed_second = true;
            }
            Ok(None) => return None,
            Err(_) => {
                // Parsing is prefix-deterministic: what fails on a prefix never parses whole.
                assert!(!matches!(parse(&mut BytesMut::from(data), false), Ok(Some(_))));
                return None;
            }
        }
    };
    // The connection-specific fields noted while parsing are the ones there: none but
    // `Connection` unless `Others` says so.
    let (hop_by_hop, proxy_auth) = (HOP_BY_HOP, PROXY_AUTH);
    let present = |name| head.headers.contains_key(name);
    let others = hop_by_hop[1..].iter().chain(&proxy_auth).any(present);
    match head.hop_by_hop {
        HopByHop::None => assert!(!others && !present(&hop_by_hop[0])),
        HopByHop::Connection => assert!(!others && present(&hop_by_hop[0])),
        HopByHop::Others => {}
    }
    let status = head.status.as_u16();
    if head.body != Body::Chunked {
        return Some((status, head.body, Vec::new(), false));
    }
    let mut out = Vec::new();
    let mut decoder = Decoder::new();
    loop {
        match decoder.decode(&mut buf, 1000) {
            Ok(Some(Chunk::Data(d))) => out.extend_from_slice(&d),
            Ok(Some(Chunk::Trailers(_))) => {}
            Ok(Some(Chunk::End)) => return Some((status, head.body, out, true)),
            Ok(None) if !fed_second => {
                buf.extend_from_slice(second);
                fed_second = true;
            }
            Ok(None) | Err(_) => return Some((status, head.body, out, false)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let whole = run(data, data.len());
    if let Some((_, _, body, _)) = &whole {
        assert!(body.len() <= data.len());
    }
    let split = data.first().map_or(0, |&b| b as usize);
    if let (Some(a), Some(b)) = (&whole, &run(data, split)) {
        assert_eq!((a.0, a.1), (b.0, b.1));
        if a.3 && b.3 {
            assert_eq!(a.2, b.2);
        }
    }
});

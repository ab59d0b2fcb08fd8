//! Decoding a frame from the other process's QUIC link must never panic, and re-encoding gives
//! it back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::quic_link::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok((from, datagram)) = decode(data) {
        let mut out = Vec::new();
        encode(from, datagram, &mut out);
        assert_eq!(out, data);
    }
});

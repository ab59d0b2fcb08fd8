//! Parsing a QUIC Retry token from a client must never panic, and re-encoding gives it back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::quic_token::{encode, parse};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = parse(data) {
        assert_eq!(encode(t.issued, t.odcid, t.mac), data);
    }
});

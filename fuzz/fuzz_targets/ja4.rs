//! JA4 fingerprinting of untrusted ClientHello bytes must never panic, and what it produces is
//! always a well-formed fingerprint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::ja4::{parse, Ja4};

fuzz_target!(|data: &[u8]| {
    let Ok(input) = parse(data) else { return };
    let _ = input.raw();
    // A stand-in digest: the fuzz build has no SHA-256 (the gateway uses BoringSSL's).
    let fp = input.fingerprint(|text| {
        let mut d = [0u8; 32];
        for (i, b) in text.iter().enumerate() {
            d[i % 32] ^= b.rotate_left(i as u32 % 8);
        }
        d
    });
    assert_eq!(fp.as_str().len(), 36);
    assert_eq!(Ja4::parse(fp.as_str()), Some(fp), "{fp}");
});

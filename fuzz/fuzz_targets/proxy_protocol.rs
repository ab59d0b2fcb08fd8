//! PROXY protocol header parsing must never panic, never claim more bytes than it was given or
//! than a header may hold, and must give the same answer once more bytes follow a complete header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::proxy_protocol::{parse, Parsed, MAX_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(Parsed::Done { header, consumed }) = parse(data) {
        assert!(consumed <= data.len() && consumed <= MAX_HEADER_LEN);
        let mut longer = data[..consumed].to_vec();
        longer.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(parse(&longer), Ok(Parsed::Done { header, consumed }));
    }
    // Every prefix of the input is judged without panicking too (the reader calls `parse` on
    // each partial read).
    for cut in [1, 6, 12, 13, 16, 107] {
        let _ = parse(&data[..cut.min(data.len())]);
    }
});

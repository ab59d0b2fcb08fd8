//! The keyless codec and the new-key payload must never panic on untrusted bytes, and whatever
//! they decode must encode back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_keyless::codec::{decode_request, decode_response, encode_request, encode_response};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((id, req, used))) = decode_request(rest) {
        let mut again = Vec::new();
        encode_request(&mut again, id, &req).expect("a decoded request re-encodes");
        assert_eq!(decode_request(&again).unwrap().map(|(i, r, _)| (i, r)), Some((id, req)));
        rest = &rest[used..];
    }
    // A new-key payload (what a key server creates a key and a CSR for): parsed strictly, and
    // what parses encodes back to the same bytes.
    if let Ok(req) = tlsgate_keyless::new_key::parse(data) {
        assert_eq!(tlsgate_keyless::new_key::encode(&req).expect("re-encodes"), data);
    }
    if let Ok(Some((id, resp, _))) = decode_response(data) {
        let mut again = Vec::new();
        encode_response(&mut again, id, &resp).expect("a decoded response re-encodes");
        assert_eq!(
            decode_response(&again).unwrap().map(|(i, r, _)| (i, r)),
            Some((id, resp))
        );
    }
});

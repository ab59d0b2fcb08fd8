//! Delegated-credential structures (RFC 9345) a key server parses from gateways: parsing never
//! panics, and whatever parses re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::delegated_credential::{
    delegated_credential, offers_scheme, parse_delegated_credential, parse_signing_input, signing_input,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(input) = parse_signing_input(data) {
        let again = signing_input(input.certificate, &input.credential, input.algorithm).expect("re-encodes");
        assert_eq!(again, data);
    }
    if let Ok((credential, algorithm, signature)) = parse_delegated_credential(data) {
        let again = delegated_credential(&credential, algorithm, signature).expect("re-encodes");
        assert_eq!(again, data);
    }
    let _ = offers_scheme(data, 0x0403);
});

//! Reading a TLS 1.3 server's first flight (`bench --lean`) must never panic on untrusted bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::tls13_flight::{
    certificate_has_delegated_credential, certificate_verify_scheme, first_message, inner_plaintext, record_header, server_hello, RECORD_HEADER_LEN,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(sh) = server_hello(data) {
        assert!(sh.key_share.len() < data.len());
    }
    if let Some((_, len)) = first_message(data) {
        assert!(len <= data.len());
    }
    if let Some((_, content)) = inner_plaintext(data) {
        assert!(content.len() < data.len());
    }
    let _ = certificate_verify_scheme(data);
    let _ = certificate_has_delegated_credential(data);
    if let Some(h) = data.first_chunk::<RECORD_HEADER_LEN>() {
        let _ = record_header(h);
    }
});

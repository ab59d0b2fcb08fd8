//! ClientHello inspection must never panic on untrusted bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::client_hello::{
    cipher_suites, first_psk_identity, prefers_chacha20, signature_algorithms, supported_versions, ClientCapabilities,
};

fuzz_target!(|data: &[u8]| {
    let third = data.len() / 3;
    let (a, rest) = data.split_at(third);
    let (b, c) = rest.split_at(rest.len() / 2);
    let _ = signature_algorithms(a);
    let _ = supported_versions(b);
    let _ = cipher_suites(c);
    let _ = prefers_chacha20(c);
    let _ = first_psk_identity(data);
    let caps = ClientCapabilities::from_parts(Some(a), Some(b), c);
    let _ = caps.can_use_ecdsa(true);
    let _ = caps.can_use_ecdsa(false);
    // The encrypted_client_hello extension body, and an ECHConfigList (as DNS and retry configs carry).
    let _ = tlsgate_wire::ech::parse(data);
    let _ = tlsgate_wire::ech::config_ids(data);
    // The delegated_credential extension body (RFC 9345: the schemes a client accepts).
    let _ = tlsgate_wire::delegated_credential::offers_scheme(data, 0x0403);
});

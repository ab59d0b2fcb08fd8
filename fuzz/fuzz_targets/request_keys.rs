//! The rate limit's readers of client-chosen header values never panic: the `X-Forwarded-For`
//! walk answers the peer or an address named in the input, and a cookie value found is a slice
//! of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use tlsgate_wire::request_keys::{cookie_value, forwarded_client};

fuzz_target!(|data: &[u8]| {
    let peer: IpAddr = "10.0.0.1".parse().unwrap();
    let fields: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    // Everything in 10/8 is trusted, so the walk goes as deep as the input lets it.
    let client = forwarded_client(peer, fields.iter().copied(), |ip| match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 10,
        IpAddr::V6(_) => false,
    });
    let _ = client;
    if let Some((name, rest)) = data.split_first() {
        let name = std::slice::from_ref(name);
        if let Some(v) = cookie_value(rest.split(|&b| b == b'\n'), name) {
            let start = v.as_ptr() as usize - rest.as_ptr() as usize;
            assert!(start + v.len() <= rest.len());
        }
    }
});

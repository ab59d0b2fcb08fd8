//! PROXY protocol header parsing must never panic, never claim more bytes than it was given or
//! than a header may hold, and must give the same answer once more bytes follow a complete header.
//! Encoding round-trips: a header built from the input, encoded, parses back to itself (its
//! addresses in one family, as `encode` writes them) and takes exactly the encoded bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tlsgate_wire::proxy_protocol::{encode, parse, Addresses, Header, Parsed, Version, MAX_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(Parsed::Done { header, consumed }) = parse(data) {
        assert!(consumed <= data.len() && consumed <= MAX_HEADER_LEN);
        let mut longer = data[..consumed].to_vec();
        longer.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(parse(&longer), Ok(Parsed::Done { header, consumed }));
        // What was parsed encodes to a header that parses to the same addresses (TLVs and the
        // v2 transport are not kept; `UNKNOWN`, `LOCAL`, AF_UNSPEC and AF_UNIX carry none).
        let again = encode(&header);
        assert_eq!(
            parse(again.as_bytes()),
            Ok(Parsed::Done {
                header,
                consumed: again.as_bytes().len()
            })
        );
    }
    // Every prefix of the input is judged without panicking too (the reader calls `parse` on
    // each partial read).
    for cut in [1, 6, 12, 13, 16, 107] {
        let _ = parse(&data[..cut.min(data.len())]);
    }
    round_trip(data);
});

/// Builds a header from the input's first bytes and checks `parse(encode(h)) == h`.
fn round_trip(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some(rest) = rest.get(..36) else {
        return;
    };
    let end = |v6: bool, ip: &[u8], port: &[u8]| -> SocketAddr {
        let port = u16::from_be_bytes([port[0], port[1]]);
        let ip = if v6 {
            let mut o = [0u8; 16];
            o.copy_from_slice(ip);
            IpAddr::V6(Ipv6Addr::from(o))
        } else {
            IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]))
        };
        SocketAddr::new(ip, port)
    };
    let addresses = (flags & 2 != 0).then(|| Addresses {
        source: end(flags & 4 != 0, &rest[..16], &rest[32..34]),
        destination: end(flags & 8 != 0, &rest[16..32], &rest[34..36]),
    });
    let header = Header {
        version: if flags & 1 == 0 { Version::V1 } else { Version::V2 },
        addresses,
    };
    let bytes = encode(&header);
    let expected = Header {
        addresses: addresses.map(Addresses::same_family),
        ..header
    };
    assert_eq!(
        parse(bytes.as_bytes()),
        Ok(Parsed::Done {
            header: expected,
            consumed: bytes.as_bytes().len()
        })
    );
}

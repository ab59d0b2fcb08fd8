//! The server-address parser (`tlsgate_config::address`): any text is accepted or refused without
//! panicking; what is accepted prints back (Display, authority) to text that parses to the same
//! address; the host:port-only form accepts a subset of the origin form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_config::OriginAddr;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let origin = OriginAddr::parse(text);
    let host_port = OriginAddr::parse_host_port(text);
    if let Ok(a) = &host_port {
        assert_eq!(
            origin.as_ref(),
            Ok(a),
            "host:port accepted what the origin form refused"
        );
        assert!(!a.tls);
    }
    if let Ok(a) = origin {
        assert!(a.port > 0);
        let shown = a.to_string();
        assert_eq!(OriginAddr::parse(&shown).as_ref(), Ok(&a), "{text:?} -> {shown:?}");
        let authority = a.authority();
        let back = OriginAddr::parse_host_port(&authority).expect("authority parses");
        assert_eq!((back.host, back.port), (a.host.clone(), a.port));
        assert!(!authority.chars().any(|c| c.is_whitespace() || c == '/' || c == '@'));
    }
});

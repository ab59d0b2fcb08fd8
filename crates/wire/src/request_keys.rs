//! What a rate limit reads from a request's header values, without allocating: the client a
//! chain of trusted proxies speaks for (`X-Forwarded-For`, read from the right), and one
//! cookie's value (`Cookie`).
//!
//! Both read bytes a client chose; neither panics or allocates whatever they hold, and both
//! answer "not found" (or the nearest trusted hop) for anything malformed.

use std::net::{IpAddr, SocketAddr};

/// The client that `peer` forwards for: `peer` itself unless `trusted(peer)`; then the
/// `X-Forwarded-For` entries (`values`, in the order the header fields came) are read from the
/// right, each trusted hop giving way to the entry before it, and the first untrusted address is
/// the client. An entry that is not an address (`unknown`, an obfuscated name, garbage) stops
/// the walk: the last hop reached is the client (nginx's `real_ip_recursive`). Entries may carry
/// a port (`192.0.2.1:443`, `[2001:db8::1]:443`).
pub fn forwarded_client<'a, I>(peer: IpAddr, values: I, trusted: impl Fn(IpAddr) -> bool) -> IpAddr
where
    I: DoubleEndedIterator<Item = &'a [u8]>,
{
    let mut client = peer;
    if !trusted(client) {
        return client;
    }
    for value in values.rev() {
        for entry in value.rsplit(|&b| b == b',') {
            let Some(ip) = parse_entry(entry) else {
                return client;
            };
            client = ip.to_canonical();
            if !trusted(client) {
                return client;
            }
        }
    }
    client
}

/// One `X-Forwarded-For` entry as an address (surrounding spaces and tabs allowed).
fn parse_entry(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(trim(entry)).ok()?;
    if text.is_empty() || text.len() > 64 {
        return None;
    }
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The value of the first cookie named `name` in the `Cookie` field values `values` (RFC 6265
/// §5.4: `name=value` pairs separated by `;`), without surrounding quotes; None when absent or
/// empty.
pub fn cookie_value<'a, I>(values: I, name: &[u8]) -> Option<&'a [u8]>
where
    I: Iterator<Item = &'a [u8]>,
{
    for value in values {
        for pair in value.split(|&b| b == b';') {
            let pair = trim(pair);
            let Some(eq) = pair.iter().position(|&b| b == b'=') else {
                continue;
            };
            if trim(&pair[..eq]) != name {
                continue;
            }
            let mut v = trim(&pair[eq + 1..]);
            if let [b'"', inner @ .., b'"'] = v {
                v = inner;
            }
            return (!v.is_empty()).then_some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn trusted_10(ip: IpAddr) -> bool {
        matches!(ip, IpAddr::V4(v4) if v4.octets()[0] == 10)
    }

    fn client(peer: &str, values: &[&str]) -> IpAddr {
        forwarded_client(ip(peer), values.iter().map(|v| v.as_bytes()), trusted_10)
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        assert_eq!(client("192.0.2.9", &["198.51.100.1"]), ip("192.0.2.9"));
    }

    #[test]
    fn trusted_hops_are_walked_from_the_right() {
        assert_eq!(client("10.0.0.1", &["198.51.100.1"]), ip("198.51.100.1"));
        assert_eq!(
            client("10.0.0.1", &["203.0.113.5, 198.51.100.1, 10.0.0.7"]),
            ip("198.51.100.1")
        );
        // Several fields are one list, in order.
        assert_eq!(
            client("10.0.0.1", &["203.0.113.5", "10.0.0.8 ,10.0.0.7"]),
            ip("203.0.113.5")
        );
        // Ports and IPv6 forms.
        assert_eq!(client("10.0.0.1", &["[2001:db8::1]:443"]), ip("2001:db8::1"));
        assert_eq!(client("10.0.0.1", &["192.0.2.1:8080"]), ip("192.0.2.1"));
        assert_eq!(client("10.0.0.1", &["::ffff:192.0.2.1"]), ip("192.0.2.1"));
    }

    #[test]
    fn garbage_stops_at_the_last_hop_reached() {
        assert_eq!(client("10.0.0.1", &["unknown"]), ip("10.0.0.1"));
        assert_eq!(client("10.0.0.1", &["198.51.100.1, _hidden, 10.0.0.2"]), ip("10.0.0.2"));
        assert_eq!(client("10.0.0.1", &[""]), ip("10.0.0.1"));
        assert_eq!(client("10.0.0.1", &[]), ip("10.0.0.1"));
        assert_eq!(
            client("10.0.0.1", &["10.0.0.2"]),
            ip("10.0.0.2"),
            "all trusted: the leftmost"
        );
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        fn find<'a>(values: &[&'a str], name: &str) -> Option<&'a str> {
            cookie_value(values.iter().map(|v| v.as_bytes()), name.as_bytes()).map(|v| std::str::from_utf8(v).unwrap())
        }
        assert_eq!(find(&["a=1; session=abc; b=2"], "session"), Some("abc"));
        assert_eq!(find(&["a=1", "session=\"q\""], "session"), Some("q"));
        assert_eq!(find(&["xsession=1; session=2"], "session"), Some("2"));
        assert_eq!(find(&["session="], "session"), None);
        assert_eq!(find(&["a=1;;; =; ==;session"], "session"), None);
        assert_eq!(find(&[], "session"), None);
    }
}

//! A request's key under one limit, as a 64-bit keyed hash, computed without allocating: the
//! client's address (cut to the limit's prefixes), the connection's JA4, a header's value, a
//! cookie's value, or the route.
//!
//! The hash is SipHash-2-4 under a key that is random per process for node-local limits and
//! derived from the cluster secret for cluster-wide ones (every node must name a client's
//! counter alike, and a client must not be able to choose another client's counter).

use http::HeaderMap;
use std::hash::Hasher;
use std::net::IpAddr;
use tlsgate_config::{Cidr, RateLimitKey};

/// What a limit keys on, compiled.
#[derive(Debug, Clone)]
pub(crate) enum KeyKind {
    /// The client's address cut to these prefix lengths.
    ClientAddress { ipv4_prefix: u8, ipv6_prefix: u8 },
    /// The connection's JA4.
    Ja4,
    /// This header's value(s).
    Header(http::HeaderName),
    /// This cookie's value.
    Cookie(Box<[u8]>),
    /// The route.
    Route,
}

impl KeyKind {
    /// From a validated `[[rate_limit]]`.
    pub(crate) fn from_config(c: &tlsgate_config::RateLimitConfig) -> Self {
        match c.key {
            RateLimitKey::ClientAddress => Self::ClientAddress {
                ipv4_prefix: c.ipv4_prefix.clamp(1, 32),
                ipv6_prefix: c.ipv6_prefix.clamp(1, 128),
            },
            RateLimitKey::Ja4 => Self::Ja4,
            RateLimitKey::Header => c
                .header
                .as_deref()
                .and_then(|h| http::HeaderName::from_bytes(h.as_bytes()).ok())
                .map_or(Self::Route, Self::Header),
            RateLimitKey::Cookie => Self::Cookie(c.cookie.clone().unwrap_or_default().into_bytes().into()),
            RateLimitKey::Route => Self::Route,
        }
    }
}

/// The hash key of a limit's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HashKey(pub u64, pub u64);

impl HashKey {
    /// A random key for this process.
    pub(crate) fn random() -> Self {
        use std::hash::{BuildHasher, RandomState};
        let s = RandomState::new();
        Self(s.hash_one(1u8), s.hash_one(2u8))
    }

    #[allow(deprecated)] // SipHash-2-4 itself: a fixed algorithm every node computes alike.
    fn hasher(self) -> std::hash::SipHasher {
        std::hash::SipHasher::new_with_keys(self.0, self.1)
    }
}

/// What a request offers for keys.
pub(crate) struct Request<'a> {
    /// The connection's peer (the PROXY header's client on such a listener).
    pub peer: IpAddr,
    /// The connection's JA4, when computed.
    pub ja4: Option<&'a str>,
    /// The request's headers.
    pub headers: &'a HeaderMap,
    /// The route's identity (host and prefix).
    pub route: u64,
}

/// The key of `req` under a limit keyed by `kind`; None when the request has none (no such
/// header or cookie, no fingerprint).
pub(crate) fn key(kind: &KeyKind, hash: HashKey, req: &Request<'_>, trusted: &[Cidr]) -> Option<u64> {
    let mut h = hash.hasher();
    match kind {
        KeyKind::ClientAddress {
            ipv4_prefix,
            ipv6_prefix,
        } => {
            let client = if trusted.is_empty() {
                req.peer
            } else {
                tlsgate_wire::request_keys::forwarded_client(
                    req.peer,
                    req.headers.get_all("x-forwarded-for").iter().map(|v| v.as_bytes()),
                    |ip| trusted.iter().any(|c| c.contains(ip)),
                )
            };
            h.write_u128(source(client, *ipv4_prefix, *ipv6_prefix));
        }
        KeyKind::Ja4 => h.write(req.ja4?.as_bytes()),
        KeyKind::Header(name) => {
            let mut any = false;
            for v in req.headers.get_all(name) {
                h.write(v.as_bytes());
                h.write_u8(0xff); // not a byte of any field value: values stay apart
                any = true;
            }
            if !any {
                return None;
            }
        }
        KeyKind::Cookie(name) => {
            let cookies = req.headers.get_all(http::header::COOKIE).iter().map(|v| v.as_bytes());
            h.write(tlsgate_wire::request_keys::cookie_value(cookies, name)?);
        }
        KeyKind::Route => h.write_u64(req.route),
    }
    Some(h.finish())
}

/// `client` cut to the prefixes, IPv4 (and IPv4-mapped IPv6) kept apart from IPv6 by the
/// `::ffff:0:0/96` form.
fn source(client: IpAddr, ipv4_prefix: u8, ipv6_prefix: u8) -> u128 {
    match client.to_canonical() {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4) & u32::MAX.checked_shl(32 - u32::from(ipv4_prefix)).unwrap_or(0);
            (0xffff_u128 << 32) | u128::from(bits)
        }
        IpAddr::V6(v6) => u128::from(v6) & u128::MAX.checked_shl(128 - u32::from(ipv6_prefix)).unwrap_or(0),
    }
}

/// A route's identity for `key = "route"`: its host and path prefix (the same on every node).
pub(crate) fn route_id(host: Option<&str>, prefix: &str) -> u64 {
    let mut h = HashKey(0x7472_6f75_7465_6b65, 0x7261_7465_6c69_6d74).hasher();
    h.write(host.unwrap_or("").as_bytes());
    h.write_u8(0xff);
    h.write(prefix.as_bytes());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(peer: &str, headers: &'a HeaderMap) -> Request<'a> {
        Request {
            peer: peer.parse().unwrap(),
            ja4: None,
            headers,
            route: 1,
        }
    }

    #[test]
    fn addresses_are_cut_to_their_prefix() {
        let h = HashKey(1, 2);
        let none = HeaderMap::new();
        let kind = KeyKind::ClientAddress {
            ipv4_prefix: 24,
            ipv6_prefix: 64,
        };
        let k = |ip| key(&kind, h, &req(ip, &none), &[]).unwrap();
        assert_eq!(k("192.0.2.1"), k("192.0.2.200"));
        assert_ne!(k("192.0.2.1"), k("192.0.3.1"));
        assert_eq!(k("2001:db8::1"), k("2001:db8::ffff:1"));
        assert_ne!(k("2001:db8::1"), k("2001:db8:0:1::1"));
        assert_eq!(k("::ffff:192.0.2.1"), k("192.0.2.9"));
        // Another hash key, another value: a limit's keys are its own.
        assert_ne!(
            key(&kind, HashKey(3, 4), &req("192.0.2.1", &none), &[]),
            Some(k("192.0.2.1"))
        );
    }

    #[test]
    fn a_trusted_proxy_speaks_for_its_client() {
        let h = HashKey(1, 2);
        let kind = KeyKind::ClientAddress {
            ipv4_prefix: 32,
            ipv6_prefix: 128,
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "198.51.100.7".parse().unwrap());
        let trusted = [Cidr::try_from("10.0.0.0/8".to_string()).unwrap()];
        let none = HeaderMap::new();
        let behind = key(&kind, h, &req("10.1.1.1", &headers), &trusted);
        assert_eq!(behind, key(&kind, h, &req("198.51.100.7", &none), &[]));
        // The same header from an untrusted peer changes nothing.
        assert_eq!(
            key(&kind, h, &req("192.0.2.1", &headers), &trusted),
            key(&kind, h, &req("192.0.2.1", &none), &[])
        );
    }

    #[test]
    fn headers_and_cookies_key_by_value_and_are_absent_without_one() {
        let h = HashKey(1, 2);
        let by_header = KeyKind::Header(http::HeaderName::from_static("x-user"));
        let by_cookie = KeyKind::Cookie(b"sid".to_vec().into());
        let mut a = HeaderMap::new();
        a.insert("x-user", "alice".parse().unwrap());
        a.insert(http::header::COOKIE, "sid=1; x=2".parse().unwrap());
        let mut b = HeaderMap::new();
        b.insert("x-user", "bob".parse().unwrap());
        b.insert(http::header::COOKIE, "x=2; sid=2".parse().unwrap());
        let none = HeaderMap::new();
        assert_ne!(
            key(&by_header, h, &req("192.0.2.1", &a), &[]),
            key(&by_header, h, &req("192.0.2.1", &b), &[])
        );
        assert_eq!(
            key(&by_header, h, &req("192.0.2.1", &a), &[]),
            key(&by_header, h, &req("192.0.2.2", &a), &[])
        );
        assert_eq!(key(&by_header, h, &req("192.0.2.1", &none), &[]), None);
        assert_ne!(
            key(&by_cookie, h, &req("192.0.2.1", &a), &[]),
            key(&by_cookie, h, &req("192.0.2.1", &b), &[])
        );
        assert_eq!(key(&by_cookie, h, &req("192.0.2.1", &none), &[]), None);
        assert_eq!(key(&KeyKind::Ja4, h, &req("192.0.2.1", &none), &[]), None);
        assert_ne!(route_id(None, "/a"), route_id(None, "/b"));
        assert_ne!(route_id(Some("x"), "/"), route_id(None, "x/"));
    }
}

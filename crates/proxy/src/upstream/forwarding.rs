//! The headers an origin receives: hop-by-hop headers removed, `Cookie` fields joined, the
//! forwarding headers (`X-Forwarded-For`, `-Proto`, `-Host`, RFC 7239 `Forwarded`) set, and the
//! route's own edits applied last.
//!
//! Client-sent forwarding headers are replaced, never trusted, unless the client's address is in
//! `[server] trusted_proxies`; then they are kept and this hop is appended. `TE: trailers` is the
//! one TE value forwarded (the client accepts trailers, and so does the gateway). `Expect` is
//! dropped: the gateway has already answered `100 Continue` itself when it read the body.

use crate::identity::IdentityHop;
use crate::request::router::Edits;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use std::net::IpAddr;
use tlsgate_config::ForwardedHeaders;
// The hop-by-hop fields (RFC 9110 §7.6.1; `Trailer` is not one of them: it announces the trailer
// fields of the message and travels with it) and the proxy authentication fields.
use tlsgate_h1::fields::{HOP_BY_HOP, PROXY_AUTH};

// Header names as `HeaderName` constants: looking a header up by `&str` parses the name on
// every call (measured: `parse_hdr` and friends were ~2 % of a proxied request).
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const FORWARDED: HeaderName = HeaderName::from_static("forwarded");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Forwarding headers a client could forge.
const FORWARDING: [HeaderName; 5] = [
    X_FORWARDED_FOR,
    X_FORWARDED_PROTO,
    X_FORWARDED_HOST,
    FORWARDED,
    X_REAL_IP,
];

/// Removes the hop-by-hop headers, including those the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One copy of each list for the whole call: a `const` array is built (and dropped) wherever
    // it is named, and a `static` one is compared name by name at run time instead of against
    // known values (both measured: ~1 % of a proxied request's instructions).
    let (hop_by_hop, proxy_auth) = (HOP_BY_HOP, PROXY_AUTH);
    let present = present_of(headers, &hop_by_hop) | present_of(headers, &proxy_auth) << hop_by_hop.len();
    if present == 0 {
        return;
    }
    // Nearly every origin response says `Connection: keep-alive`, and nearly every client
    // request names nothing or a hop-by-hop field: those are removed below anyway, so the
    // named fields are collected (a vector, a `HeaderName` each) only when another is named.
    // `CONNECTION` is `HOP_BY_HOP[0]`.
    if present & 1 != 0 {
        let names_others = headers.get_all(header::CONNECTION).iter().any(|v| {
            v.as_bytes()
                .split(|b| *b == b',')
                .map(|t| t.trim_ascii())
                .any(|t| !t.is_empty() && !hop_by_hop.iter().any(|h| t.eq_ignore_ascii_case(h.as_str().as_bytes())))
        });
        if names_others {
            let named: Vec<HeaderName> = headers
                .get_all(header::CONNECTION)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
                .collect();
            for n in named {
                headers.remove(n);
            }
        }
    }
    remove_marked(headers, &hop_by_hop, present);
    remove_marked(headers, &proxy_auth, present >> hop_by_hop.len());
}

/// Which of `names` (at most 16) `headers` holds, as bits in the order of `names`: one pass over
/// the (few) names present, comparing names, instead of a hash lookup per name.
fn present_of(headers: &HeaderMap, names: &[HeaderName]) -> u32 {
    debug_assert!(names.len() <= 16);
    headers
        .keys()
        .fold(0, |bits, k| match names.iter().position(|n| n == k) {
            Some(i) => bits | 1 << i,
            None => bits,
        })
}

/// Removes the names of `names` whose bit is set in `present` ([`present_of`]): a hash lookup
/// only for a name that is there.
fn remove_marked(headers: &mut HeaderMap, names: &[HeaderName], present: u32) {
    for (i, n) in names.iter().enumerate() {
        if present & 1 << i != 0 {
            headers.remove(n);
        }
    }
}

/// A gRPC request: its content type is `application/grpc` or `application/grpc+...`.
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// True when a `TE` header of the request lists `trailers`.
fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("trailers")
        })
}

/// RFC 9113 §8.2.3: an HTTP/2 client may split `Cookie` into several fields; an HTTP/1.1 origin
/// must get one, joined with `"; "`.
fn join_cookies(headers: &mut HeaderMap) {
    let mut values = headers.get_all(header::COOKIE).iter();
    let (Some(first), Some(_)) = (values.next(), values.next()) else {
        return;
    };
    let mut joined = first.as_bytes().to_vec();
    for v in headers.get_all(header::COOKIE).iter().skip(1) {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(v.as_bytes());
    }
    if let Ok(v) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, v);
    }
}

/// What the gateway knows about this hop.
#[derive(Debug, Clone, Copy)]
pub struct Hop<'a> {
    /// The client's address.
    pub client_ip: IpAddr,
    /// The client is a configured trusted proxy.
    pub trusted: bool,
    /// The authority the client asked for (host and port as sent), if any.
    pub authority: Option<&'a HeaderValue>,
    /// The site's client-certificate identity headers and this connection's identity.
    pub client_cert: Option<IdentityHop<'a>>,
    /// The client connection's forwarding values, built once (None: built per request).
    pub cache: Option<&'a ForwardCache>,
}

/// One client connection's forwarding header values, built on its first request: the client
/// address never changes, and the authority rarely does (the last one is kept).
#[derive(Debug, Default)]
pub struct ForwardCache {
    xff: std::sync::OnceLock<HeaderValue>,
    forwarded: parking_lot::Mutex<Option<(HeaderValue, HeaderValue)>>,
}

fn append(headers: &mut HeaderMap, name: HeaderName, keep: bool, value: &str) {
    let joined = match headers.get(&name).and_then(|v| v.to_str().ok()) {
        Some(prev) if keep && !prev.trim().is_empty() => format!("{prev}, {value}"),
        _ => value.to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&joined) {
        headers.insert(name, v);
    }
}

/// Rewrites a request's headers for the origin: `fields` are the forwarding fields the upstream
/// adds (`forwarded_headers`), `edits` the route's.
pub fn prepare_request(headers: &mut HeaderMap, hop: &Hop<'_>, fields: ForwardedHeaders, edits: &Edits) {
    // Room for the forwarding fields below at once: the map a client's head was parsed into is
    // sized for that head, and growing it field by field rehashes it more than once.
    headers.reserve(4);
    // One pass for the three fields most requests lack, instead of a hash lookup each.
    let seen = present_of(headers, &[header::TE, header::EXPECT, header::COOKIE]);
    let trailers = seen & 1 != 0 && accepts_trailers(headers);
    strip_hop_by_hop(headers);
    if seen & 2 != 0 {
        headers.remove(header::EXPECT);
    }
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    if seen & 4 != 0 {
        join_cookies(headers);
    }
    if !hop.trusted {
        // A value split over several fields would survive a plain `insert` otherwise; and a
        // client's own value must not reach the origin even for a field this hop does not add.
        let forwarding = FORWARDING;
        remove_marked(headers, &forwarding, present_of(headers, &forwarding));
    }
    let ip = hop.client_ip.to_canonical();
    // The client's address as a field value: built once per client connection when it can be.
    let address = || match hop.cache {
        Some(cache) => cache.xff.get_or_init(|| header_value(&ip.to_string())).clone(),
        None => header_value(&ip.to_string()),
    };
    if fields.has(ForwardedHeaders::FOR) {
        if hop.trusted {
            append(headers, X_FORWARDED_FOR, true, &ip.to_string());
        } else {
            headers.insert(X_FORWARDED_FOR, address());
        }
    }
    if fields.has(ForwardedHeaders::REAL_IP) && !(hop.trusted && headers.contains_key(X_REAL_IP)) {
        headers.insert(X_REAL_IP, address());
    }
    if fields.has(ForwardedHeaders::PROTO) && !(hop.trusted && headers.contains_key(X_FORWARDED_PROTO)) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("https"));
    }
    if let Some(auth) = hop.authority {
        if fields.has(ForwardedHeaders::HOST) && !(hop.trusted && headers.contains_key(X_FORWARDED_HOST)) {
            headers.insert(X_FORWARDED_HOST, auth.clone());
        }
        headers.insert(header::HOST, auth.clone());
    }
    if fields.has(ForwardedHeaders::FORWARDED) {
        match (hop.cache, hop.authority) {
            (Some(cache), Some(authority)) if !hop.trusted => {
                let mut last = cache.forwarded.lock();
                match &*last {
                    Some((a, value)) if a == authority => {
                        headers.insert(FORWARDED, value.clone());
                    }
                    _ => {
                        let value = header_value(&forwarded_element(ip, hop.authority));
                        headers.insert(FORWARDED, value.clone());
                        // Copied, not cloned: the request's value is a slice of the buffer its
                        // head was read into (hyper's 8 KiB read buffer for HTTP/1.1), and a
                        // clone kept for the connection's life would keep that whole buffer
                        // alive after an idle connection gave it back (issue 18: 4 KiB more per
                        // idle proxied connection).
                        *last = Some((owned(authority), value));
                    }
                }
            }
            _ => append(headers, FORWARDED, hop.trusted, &forwarded_element(ip, hop.authority)),
        }
    }
    if let Some(client_cert) = &hop.client_cert {
        client_cert.apply(headers);
    }
    edits.apply(headers);
}

/// A copy of `v` in an allocation of its own (a clone shares the buffer `v` was sliced from).
fn owned(v: &HeaderValue) -> HeaderValue {
    let mut copy = HeaderValue::from_maybe_shared(bytes::Bytes::copy_from_slice(v.as_bytes()))
        .unwrap_or_else(|_| HeaderValue::from_static(""));
    copy.set_sensitive(v.is_sensitive());
    copy
}

/// A header value from text the gateway wrote (an address, a `Forwarded` element: always valid).
fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// This hop's RFC 7239 element.
fn forwarded_element(ip: IpAddr, authority: Option<&HeaderValue>) -> String {
    // RFC 7239 §4: IPv6 nodes are quoted and bracketed; host is always quoted (it may hold ':').
    let node = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("\"[{v6}]\""),
    };
    let mut element = format!("for={node};proto=https");
    if let Some(host) = authority.and_then(|a| a.to_str().ok()) {
        if host.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
            element.push_str(";host=\"");
            element.push_str(host);
            element.push('"');
        }
    }
    element
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, HeaderValue::from_static(v));
        }
        m
    }

    fn hop(trusted: bool, auth: &HeaderValue) -> Hop<'_> {
        Hop {
            client_ip: "192.0.2.7".parse().unwrap(),
            trusted,
            authority: Some(auth),
            client_cert: None,
            cache: None,
        }
    }

    #[test]
    fn untrusted_forwarding_headers_are_replaced() {
        let auth = HeaderValue::from_static("example.com:8443");
        let mut m = h(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "7.7.7.7"),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-host", "evil.test"),
            ("forwarded", "for=6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("host", "other"),
        ]);
        prepare_request(
            &mut m,
            &hop(false, &auth),
            ForwardedHeaders::default(),
            &Edits::default(),
        );
        assert_eq!(m.get_all("x-forwarded-for").iter().count(), 1);
        assert_eq!(m["x-forwarded-for"], "192.0.2.7");
        assert_eq!(m["x-forwarded-proto"], "https");
        assert_eq!(m["x-forwarded-host"], "example.com:8443");
        assert_eq!(m["host"], "example.com:8443");
        assert_eq!(m["forwarded"], "for=192.0.2.7;proto=https;host=\"example.com:8443\"");
        assert!(!m.contains_key("x-real-ip"));
    }

    #[test]
    fn only_the_chosen_fields_are_added_and_forged_ones_never_pass() {
        let auth = HeaderValue::from_static("example.com");
        let forged = [
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-host", "evil.test"),
            ("forwarded", "for=6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("host", "example.com"),
        ];
        // nginx's usual pair.
        let mut m = h(&forged);
        let pair = ForwardedHeaders::FOR.with(ForwardedHeaders::PROTO);
        prepare_request(&mut m, &hop(false, &auth), pair, &Edits::default());
        let mut names: Vec<_> = m.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["host", "x-forwarded-for", "x-forwarded-proto"]);
        assert_eq!(m["x-forwarded-for"], "192.0.2.7");
        assert_eq!(m["x-forwarded-proto"], "https");
        // X-Real-IP alone, from the connection's cached address.
        let cache = ForwardCache::default();
        let mut with_cache = hop(false, &auth);
        with_cache.cache = Some(&cache);
        for _ in 0..2 {
            let mut m = h(&forged);
            prepare_request(&mut m, &with_cache, ForwardedHeaders::REAL_IP, &Edits::default());
            let names: Vec<_> = m.keys().map(|k| k.as_str()).collect();
            assert_eq!(names.len(), 2, "{names:?}");
            assert_eq!(m["x-real-ip"], "192.0.2.7");
        }
        // None at all: only Host.
        let mut m = h(&forged);
        prepare_request(&mut m, &hop(false, &auth), ForwardedHeaders::none(), &Edits::default());
        assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["host"]);
        // Behind a trusted proxy its X-Real-IP (the original client) is kept.
        let mut m = h(&[("x-real-ip", "203.0.113.1")]);
        prepare_request(&mut m, &hop(true, &auth), ForwardedHeaders::REAL_IP, &Edits::default());
        assert_eq!(m["x-real-ip"], "203.0.113.1");
    }

    #[test]
    fn trusted_proxies_are_extended() {
        let auth = HeaderValue::from_static("example.com");
        let mut m = h(&[
            ("x-forwarded-for", "203.0.113.1"),
            ("x-forwarded-proto", "http"),
            ("forwarded", "for=203.0.113.1"),
        ]);
        prepare_request(
            &mut m,
            &hop(true, &auth),
            ForwardedHeaders::default(),
            &Edits::default(),
        );
        assert_eq!(m["x-forwarded-for"], "203.0.113.1, 192.0.2.7");
        assert_eq!(m["x-forwarded-proto"], "http");
        assert_eq!(
            m["forwarded"],
            "for=203.0.113.1, for=192.0.2.7;proto=https;host=\"example.com\""
        );
    }

    #[test]
    fn ipv6_clients_are_quoted_and_mapped_v4_is_plain() {
        let auth = HeaderValue::from_static("h");
        let mut m = HeaderMap::new();
        let mut hp = hop(false, &auth);
        hp.client_ip = "2001:db8::1".parse().unwrap();
        prepare_request(&mut m, &hp, ForwardedHeaders::default(), &Edits::default());
        assert_eq!(m["forwarded"], "for=\"[2001:db8::1]\";proto=https;host=\"h\"");
        hp.client_ip = "::ffff:192.0.2.9".parse().unwrap();
        prepare_request(&mut m, &hp, ForwardedHeaders::default(), &Edits::default());
        assert_eq!(m["x-forwarded-for"], "192.0.2.9");
    }

    #[test]
    fn hop_by_hop_te_cookies_and_expect() {
        let auth = HeaderValue::from_static("h");
        let mut m = h(&[
            ("connection", "close, x-private"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "gzip, trailers"),
            ("trailer", "grpc-status"),
            ("expect", "100-continue"),
            ("upgrade", "websocket"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("x-kept", "1"),
        ]);
        prepare_request(
            &mut m,
            &hop(false, &auth),
            ForwardedHeaders::default(),
            &Edits::default(),
        );
        for gone in ["connection", "x-private", "keep-alive", "expect", "upgrade"] {
            assert!(!m.contains_key(gone), "{gone}");
        }
        assert_eq!(m["te"], "trailers");
        assert_eq!(m["trailer"], "grpc-status");
        assert_eq!(m.get_all("cookie").iter().count(), 1);
        assert_eq!(m["cookie"], "a=1; b=2");
        assert_eq!(m["x-kept"], "1");
        let mut m = h(&[("te", "gzip")]);
        prepare_request(
            &mut m,
            &hop(false, &auth),
            ForwardedHeaders::default(),
            &Edits::default(),
        );
        assert!(!m.contains_key("te"));
    }

    /// The fields a response's `Connection` names go, whether it names only hop-by-hop fields
    /// (the common `keep-alive`, no list built) or others too, in any field and any case.
    #[test]
    fn strip_hop_by_hop_removes_what_connection_names() {
        let mut m = h(&[
            ("connection", "Keep-Alive"),
            ("keep-alive", "timeout=5"),
            ("content-type", "text/plain"),
        ]);
        strip_hop_by_hop(&mut m);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m["content-type"], "text/plain");
        let mut m = h(&[
            ("connection", "keep-alive, TE"),
            ("connection", " , X-Private "),
            ("x-private", "1"),
            ("close", "named"),
            ("x-kept", "1"),
        ]);
        strip_hop_by_hop(&mut m);
        assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["close", "x-kept"]);
        let mut m = h(&[("connection", "close"), ("close", "named"), ("x-kept", "1")]);
        strip_hop_by_hop(&mut m);
        assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-kept"]);
        // Each name is removed only where present, in any combination: the proxy credentials
        // alone, every one of them together, none.
        let mut m = h(&[("proxy-authorization", "Basic eA=="), ("x-kept", "1")]);
        strip_hop_by_hop(&mut m);
        assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-kept"]);
        let mut m = h(&[
            ("upgrade", "h2c"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("proxy-connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("proxy-authenticate", "Basic"),
            ("proxy-authorization", "Basic eA=="),
            ("x-kept", "1"),
        ]);
        strip_hop_by_hop(&mut m);
        assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-kept"]);
        let mut m = h(&[("x-kept", "1"), ("content-length", "3")]);
        strip_hop_by_hop(&mut m);
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn a_connection_cache_gives_the_same_headers_as_building_them() {
        let (v4, v6) = (ForwardCache::default(), ForwardCache::default());
        for (ip, host, cache) in [
            ("192.0.2.7", "example.com:8443", &v4),
            ("192.0.2.7", "example.com:8443", &v4),
            ("192.0.2.7", "other.example", &v4),
            ("2001:db8::7", "example.com", &v6),
            ("2001:db8::7", "example.com", &v6),
        ] {
            let auth = HeaderValue::from_static(host);
            let fresh = |cache| {
                let mut m = h(&[("x-forwarded-for", "6.6.6.6"), ("forwarded", "for=evil")]);
                let hop = Hop {
                    client_ip: ip.parse().unwrap(),
                    trusted: false,
                    authority: Some(&auth),
                    client_cert: None,
                    cache,
                };
                prepare_request(&mut m, &hop, ForwardedHeaders::default(), &Edits::default());
                m
            };
            let (built, cached) = (fresh(None), fresh(Some(cache)));
            assert_eq!(built, cached, "{ip} {host}");
            if ip.contains(':') {
                continue;
            }
            assert_eq!(cached.get("x-forwarded-for").unwrap(), ip);
            assert_eq!(
                cached.get("forwarded").unwrap(),
                format!("for={ip};proto=https;host=\"{host}\"").as_str()
            );
        }
    }

    #[test]
    fn the_cache_keeps_no_slice_of_the_request_s_read_buffer() {
        // A request head as a server reads it: one buffer, the header values slices of it.
        let mut head = b"GET / HTTP/1.1\r\nhost: example.com:8443\r\n\r\n".to_vec();
        head.resize(8192, 0);
        let buf = bytes::Bytes::from(head);
        let at = 22;
        let auth = HeaderValue::from_maybe_shared(buf.slice(at..at + "example.com:8443".len())).unwrap();
        assert_eq!(auth, "example.com:8443");
        let cache = ForwardCache::default();
        for _ in 0..2 {
            let mut m = HeaderMap::new();
            let hop = Hop {
                client_ip: "192.0.2.7".parse().unwrap(),
                trusted: false,
                authority: Some(&auth),
                client_cert: None,
                cache: Some(&cache),
            };
            prepare_request(&mut m, &hop, ForwardedHeaders::default(), &Edits::default());
            assert_eq!(
                m.get("forwarded").unwrap(),
                "for=192.0.2.7;proto=https;host=\"example.com:8443\""
            );
        }
        let kept = cache.forwarded.lock();
        let (a, _) = kept.as_ref().expect("the authority is cached");
        assert_eq!(a, "example.com:8443");
        let range = buf.as_ptr_range();
        assert!(
            !range.contains(&a.as_bytes().as_ptr()),
            "the cached authority shares the request's buffer: that buffer would live as long as the connection"
        );
    }
}

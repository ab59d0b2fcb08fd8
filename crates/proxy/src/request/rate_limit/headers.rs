//! What a limit tells the client (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy:
//! "name";q=<requests>;w=<window seconds>` and `RateLimit: "name";r=<remaining>;t=<seconds to
//! the window's end>` (both Structured Field lists, one item per limit), and on a refusal a 429
//! with `Retry-After` (RFC 9110 §10.2.3, whole seconds, at least 1).

use crate::body::{full, Body};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

/// `RateLimit-Policy`.
pub(crate) static POLICY: header::HeaderName = header::HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub(crate) static RATELIMIT: header::HeaderName = header::HeaderName::from_static("ratelimit");

const NS_PER_SEC: u64 = 1_000_000_000;

/// Whole seconds, rounded up, at least 1.
pub(crate) fn seconds(ns: u64) -> u64 {
    ns.div_ceil(NS_PER_SEC).max(1)
}

/// A limit's `RateLimit-Policy` item (made once per configuration).
pub(crate) fn policy_item(name: &str, requests: u32, window_ns: u64) -> String {
    format!("\"{name}\";q={requests};w={}", seconds(window_ns))
}

/// A `RateLimit` item.
pub(crate) fn state_item(name: &str, remaining: u32, reset_ns: u64) -> String {
    format!("\"{name}\";r={remaining};t={}", seconds(reset_ns))
}

/// Adds `item` to the list field `name` (a new field, or `, item` after the one there).
pub(crate) fn append(headers: &mut HeaderMap, name: &header::HeaderName, item: &str) {
    let value = match headers.get(name) {
        Some(old) => {
            let mut v = Vec::with_capacity(old.len() + 2 + item.len());
            v.extend_from_slice(old.as_bytes());
            v.extend_from_slice(b", ");
            v.extend_from_slice(item.as_bytes());
            HeaderValue::from_bytes(&v)
        }
        None => HeaderValue::from_str(item),
    };
    if let Ok(v) = value {
        headers.insert(name.clone(), v);
    }
}

/// The 429 of a refused request: `Retry-After` and the refusing limit's two fields.
pub(crate) fn too_many(policy: &HeaderValue, state: &str, retry_ns: u64) -> Response<Body> {
    let mut response = Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .header(header::CONTENT_TYPE, "text/plain")
        .header(header::RETRY_AFTER, seconds(retry_ns))
        .header(POLICY.clone(), policy.clone())
        .body(full(Bytes::from_static(
            b"429 Too Many Requests: rate limit exceeded\n",
        )))
        .expect("static response parts are valid");
    append(response.headers_mut(), &RATELIMIT, state);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_the_draft() {
        assert_eq!(policy_item("api", 100, 60 * NS_PER_SEC), "\"api\";q=100;w=60");
        assert_eq!(policy_item("api", 5, NS_PER_SEC / 2), "\"api\";q=5;w=1");
        assert_eq!(state_item("api", 0, 1), "\"api\";r=0;t=1");
        let policy = HeaderValue::from_static("\"a\";q=1;w=1");
        let r = too_many(&policy, &state_item("a", 0, 2_500_000_000), 2_500_000_000);
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[header::RETRY_AFTER], "3");
        assert_eq!(r.headers()["ratelimit"], "\"a\";r=0;t=3");
        assert_eq!(r.headers()["ratelimit-policy"], "\"a\";q=1;w=1");
        let mut h = HeaderMap::new();
        append(&mut h, &RATELIMIT, "\"a\";r=1;t=1");
        append(&mut h, &RATELIMIT, "\"b\";r=2;t=1");
        assert_eq!(h["ratelimit"], "\"a\";r=1;t=1, \"b\";r=2;t=1");
    }
}

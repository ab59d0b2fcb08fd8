//! The gateway's JSON admin API, served by the admin listener next to `/metrics`:
//!
//! - `GET /keyless/pools`: every key-server pool with its members and their state (weight,
//!   drain, connections, requests in flight, circuit).
//! - `PUT /keyless/pools/NAME` with `{"members": [{"address": "host:port", "weight": 1,
//!   "drain": false}]}`: replaces the members of pool NAME at once, without dropping
//!   connections or handshakes in flight (docs/KEYLESS.md).

use tlsgate_admin::{ApiFuture, Method, StatusCode};
use tlsgate_wire::percent::{self, Plus};

/// Routes one API request; `None` when no API has this path.
pub fn route(method: &Method, path: &str, body: &[u8]) -> Option<ApiFuture> {
    let answer = match (method, path.strip_prefix("/keyless/pools")) {
        (&Method::GET, Some("" | "/")) => (StatusCode::OK, tlsgate_keyless::pools::pools_json()),
        (&Method::PUT, Some(rest)) if rest.len() > 1 && rest.starts_with('/') => {
            let name = pool_name(&rest[1..]);
            let (status, json) = tlsgate_keyless::pools::put_pool_json(&name, body);
            (
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                json,
            )
        }
        (_, Some(_)) => (
            StatusCode::METHOD_NOT_ALLOWED,
            r#"{"error":"use GET /keyless/pools or PUT /keyless/pools/NAME"}"#.to_string(),
        ),
        _ => return None,
    };
    Some(Box::pin(std::future::ready(answer)))
}

/// A pool name from the path: `%XX` escapes decoded (anonymous pools are named after their
/// `host:port` list, so `:` and `,` arrive encoded).
fn pool_name(segment: &str) -> String {
    percent::decode(segment, Plus::Literal).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_are_percent_decoded() {
        assert_eq!(pool_name("main"), "main");
        assert_eq!(pool_name("127.0.0.1%3A1%2C127.0.0.1%3A2"), "127.0.0.1:1,127.0.0.1:2");
        assert_eq!(pool_name("bad%zz%4"), "bad%zz%4");
        assert_eq!(pool_name("a+b"), "a+b", "a path segment's + is a plus");
    }

    #[test]
    fn unknown_paths_fall_through() {
        assert!(route(&Method::GET, "/other", b"").is_none());
        assert!(route(&Method::DELETE, "/keyless/pools/x", b"").is_some());
    }
}

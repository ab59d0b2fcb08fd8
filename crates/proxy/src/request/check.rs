//! The front door of every request, before routing: which authority it is for, whether its
//! framing is one the gateway can forward faithfully, and its path in normal form.
//!
//! - The authority comes from the request target when it has one (absolute-form in HTTP/1.1,
//!   `:authority` in HTTP/2), else from `Host` (RFC 9112 §3.2.2: a Host header next to an
//!   absolute-form target is ignored). HTTP/1.1 without any is refused, as are several `Host`
//!   fields, an authority with user info, and an HTTP/2 `host` that differs from `:authority`
//!   (RFC 9113 §8.3.1).
//! - A `Transfer-Encoding` with any coding besides `chunked` (e.g. `gzip, chunked`) gets 501:
//!   forwarding it as plain chunked would hand the origin a body it reads differently. (hyper's
//!   HTTP/1.1 parser reads a request with both `Transfer-Encoding` and `Content-Length` as
//!   chunked, drops the length and closes the connection after it, RFC 9112 §6.3; the check
//!   below refuses the pair should it ever arrive here, e.g. from another front end.)
//! - The path is normalised (tlsgate-wire's `path`): routing and forwarding both use the normal
//!   form, so `/%61dmin`, `/x/../admin` and `//admin` all are `/admin` to the router and the
//!   origin alike.

use crate::error::ProxyError;
use http::header::{self, HeaderValue};
use http::{Request, Version};
use std::borrow::Cow;
use tlsgate_wire::path::normalize;

/// What routing and forwarding use from the request line and `Host`.
#[derive(Debug)]
pub struct Target<'r> {
    /// The authority as the client sent it (host and optional port), for `Host` upstream.
    pub authority: Option<HeaderValue>,
    /// Its host, lower-case, without port or brackets, for routing (borrowed from the request
    /// unless it had to be lower-cased).
    pub host: Option<Cow<'r, str>>,
    /// The normalised path.
    pub path: Cow<'r, str>,
    /// The query, without `?`.
    pub query: Option<&'r str>,
}

/// The host of an authority, lower-case, without port and IPv6 brackets: tlsgate's one reading
/// of `host[:port]` / `[v6][:port]` (`tlsgate_config::split_authority`: reg-name characters
/// only, so no user info and no spaces; a non-empty host; a numeric port). An empty port
/// (`host:`, which RFC 3986 allows) is read as none. `what` names the source in the error.
fn host_of<'a>(authority: &'a str, what: &'static str) -> Result<Cow<'a, str>, ProxyError> {
    let bare = authority.strip_suffix(':').unwrap_or(authority);
    let (host, _) = tlsgate_config::split_authority(bare).map_err(|_| ProxyError::BadRequest(what))?;
    let host = host.trim_end_matches('.');
    Ok(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    })
}

/// A `Host` field's authority and its host, if it is one (a field is any text until then).
fn valid_authority(v: &HeaderValue) -> Result<(&str, Cow<'_, str>), ProxyError> {
    let text = v.to_str().map_err(|_| ProxyError::BadRequest("Host is not ASCII"))?;
    Ok((text, host_of(text, "malformed Host")?))
}

/// Checks a request and returns its target, or the error to answer with.
///
/// Each authority is read once: the request target's was parsed with the request (`http`'s
/// `Uri`) and is split here, a `Host` field's is split here (`host_of`); the host is a slice of
/// the request unless it needs lower-casing, and the only copy is the authority kept for
/// forwarding.
pub fn inspect<B>(req: &Request<B>) -> Result<Target<'_>, ProxyError> {
    let h2 = req.version() == Version::HTTP_2;
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host_header = hosts.next();
    if hosts.next().is_some() {
        return Err(ProxyError::BadRequest("several Host header fields"));
    }
    let from_uri = req.uri().authority();
    // (the host routed on, the value forwarded)
    let (host, authority) = match (from_uri, host_header) {
        (Some(uri), host) => {
            // Split once (no user info, a non-empty host: `host_of`); `http`'s own `host()`
            // would parse it again.
            let routed = host_of(uri.as_str(), "malformed authority")?;
            if let (true, Some(host)) = (h2, host) {
                if !uri.as_str().eq_ignore_ascii_case(valid_authority(host)?.0) {
                    return Err(ProxyError::BadRequest("host differs from :authority"));
                }
            }
            let value =
                HeaderValue::from_str(uri.as_str()).map_err(|_| ProxyError::BadRequest("malformed authority"))?;
            (Some(routed), Some(value))
        }
        (None, Some(host)) => (Some(valid_authority(host)?.1), Some(host.clone())),
        (None, None) if req.version() == Version::HTTP_11 || h2 => {
            return Err(ProxyError::BadRequest("no Host header"));
        }
        (None, None) => (None, None),
    };
    // An HTTP/2 request has no Transfer-Encoding: `h2` refuses one as malformed (RFC 9113
    // §8.2.2) before the request exists, so only other versions are looked at.
    if !h2 {
        transfer_coding(req)?;
    }
    let path = normalize(req.uri().path()).map_err(|_| ProxyError::BadRequest("malformed path"))?;
    Ok(Target {
        authority,
        host,
        path,
        query: req.uri().query(),
    })
}

/// Refuses a Transfer-Encoding with a Content-Length, or with a coding other than `chunked`.
fn transfer_coding<B>(req: &Request<B>) -> Result<(), ProxyError> {
    let mut te = req.headers().get_all(header::TRANSFER_ENCODING).iter().peekable();
    if te.peek().is_some() && req.headers().contains_key(header::CONTENT_LENGTH) {
        // RFC 9112 §6.3: the classic smuggling shape; refusing is the safe reading.
        return Err(ProxyError::BadRequest("both Content-Length and Transfer-Encoding"));
    }
    for value in te {
        let text = value.to_str().map_err(|_| ProxyError::UnsupportedTransferCoding)?;
        if text.split(',').any(|c| !c.trim().eq_ignore_ascii_case("chunked")) {
            return Err(ProxyError::UnsupportedTransferCoding);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: Version, uri: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().version(version).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    fn err(r: &Request<()>) -> ProxyError {
        inspect(r).unwrap_err()
    }

    #[test]
    fn authority_sources() {
        let r = req(Version::HTTP_11, "/a", &[("host", "Example.COM:8443")]);
        let t = inspect(&r).unwrap();
        assert_eq!(t.authority.unwrap(), "Example.COM:8443");
        assert_eq!(t.host.as_deref(), Some("example.com"));
        // Absolute-form: the URI wins over Host.
        let r = req(Version::HTTP_11, "https://a.test/x", &[("host", "b.test")]);
        assert_eq!(inspect(&r).unwrap().host.as_deref(), Some("a.test"));
        let r = req(Version::HTTP_11, "/x", &[("host", "[::1]:8443")]);
        assert_eq!(inspect(&r).unwrap().host.as_deref(), Some("::1"));
        // HTTP/1.0 may omit Host.
        let r = req(Version::HTTP_10, "/x", &[]);
        assert!(inspect(&r).unwrap().host.is_none());
    }

    #[test]
    fn an_empty_port_is_none_and_a_bad_one_is_refused() {
        let r = req(Version::HTTP_11, "/", &[("host", "a.test:")]);
        assert_eq!(inspect(&r).unwrap().host.as_deref(), Some("a.test"));
        let r = req(Version::HTTP_11, "/", &[("host", "[::1]:")]);
        assert_eq!(inspect(&r).unwrap().host.as_deref(), Some("::1"));
        for bad in ["a.test:99999", "a.test:8x", ":443", "a:b:c", "[::1", "a.test/x"] {
            let r = req(Version::HTTP_11, "/", &[("host", bad)]);
            assert_eq!(err(&r), ProxyError::BadRequest("malformed Host"), "{bad}");
        }
    }

    #[test]
    fn bad_authorities() {
        assert_eq!(
            err(&req(Version::HTTP_11, "/", &[])),
            ProxyError::BadRequest("no Host header")
        );
        assert_eq!(
            err(&req(Version::HTTP_11, "/", &[("host", "a"), ("host", "b")])),
            ProxyError::BadRequest("several Host header fields")
        );
        assert_eq!(
            err(&req(Version::HTTP_2, "https://a.test/", &[("host", "b.test")])),
            ProxyError::BadRequest("host differs from :authority")
        );
        assert!(inspect(&req(Version::HTTP_2, "https://a.test/", &[("host", "A.test")])).is_ok());
        assert_eq!(
            err(&req(Version::HTTP_11, "/", &[("host", "u@h")])),
            ProxyError::BadRequest("malformed Host")
        );
        assert_eq!(
            err(&req(Version::HTTP_11, "/", &[("host", "a b")])),
            ProxyError::BadRequest("malformed Host")
        );
        assert_eq!(
            err(&req(Version::HTTP_2, "https://u@a.test/", &[])),
            ProxyError::BadRequest("malformed authority")
        );
        assert_eq!(
            err(&req(Version::HTTP_11, "https://u@a.test/", &[("host", "a.test")])),
            ProxyError::BadRequest("malformed authority")
        );
        assert_eq!(
            err(&req(Version::HTTP_2, "https://a.test/", &[("host", "a b")])),
            ProxyError::BadRequest("malformed Host")
        );
    }

    #[test]
    fn the_host_is_the_request_s_own_text_unless_it_needs_lower_casing() {
        let r = req(Version::HTTP_2, "https://a.test:8443/", &[]);
        let t = inspect(&r).unwrap();
        assert!(matches!(t.host, Some(Cow::Borrowed("a.test"))), "{t:?}");
        assert_eq!(t.authority.unwrap(), "a.test:8443");
        let r = req(Version::HTTP_11, "/", &[("host", "a.test.")]);
        assert!(matches!(inspect(&r).unwrap().host, Some(Cow::Borrowed("a.test"))));
        let r = req(Version::HTTP_11, "/", &[("host", "A.Test")]);
        let t = inspect(&r).unwrap();
        assert!(matches!(&t.host, Some(Cow::Owned(h)) if h == "a.test"), "{t:?}");
        assert_eq!(t.authority.unwrap(), "A.Test");
    }

    #[test]
    fn transfer_codings_other_than_chunked_are_refused() {
        let r = req(
            Version::HTTP_11,
            "/",
            &[("host", "h"), ("transfer-encoding", "gzip, chunked")],
        );
        assert_eq!(err(&r), ProxyError::UnsupportedTransferCoding);
        let r = req(
            Version::HTTP_11,
            "/",
            &[("host", "h"), ("transfer-encoding", "chunked")],
        );
        assert!(inspect(&r).is_ok());
        let r = req(
            Version::HTTP_11,
            "/",
            &[("host", "h"), ("transfer-encoding", "chunked"), ("content-length", "3")],
        );
        assert_eq!(
            err(&r),
            ProxyError::BadRequest("both Content-Length and Transfer-Encoding")
        );
    }

    #[test]
    fn paths_are_normalised() {
        let r = req(Version::HTTP_11, "/x/../%61dmin//s?q=1", &[("host", "h")]);
        let t = inspect(&r).unwrap();
        assert_eq!(t.path, "/admin/s");
        assert_eq!(t.query, Some("q=1"));
        let r = req(Version::HTTP_11, "/../etc", &[("host", "h")]);
        assert_eq!(err(&r), ProxyError::BadRequest("malformed path"));
    }
}

//! What keeps a browser on the same host from being turned against tlsgate's plain-HTTP control
//! listeners: the gateway's admin listener ([`crate::server`]) and `tlsgate console`. One
//! implementation for both (docs/SECURITY.md, "Admin listener and console").
//!
//! Threats: a page on any web site, open in a browser on a machine that can reach the listener,
//! sends requests to it (cross-site request forgery), or points its own name at 127.0.0.1 and
//! then reads and writes as if same-origin (DNS rebinding). Defences, per request
//! ([`Guard::check`]):
//!
//! - `Host` (or an absolute request target's authority) must name this listener: its listen
//!   IP (any IP literal when it listens on `0.0.0.0`/`[::]`), a loopback IP (`127.0.0.1`,
//!   `[::1]`) or `localhost`, with the listener's port or no port; or a name the operator allowed
//!   (`[admin] allowed_hosts`, `tlsgate console --allowed-host`; an entry without a port matches
//!   any port). Anything else is 421 Misdirected Request, reads included: a rebinding page
//!   always sends its own name.
//! - An `Origin` header must be the listener's own origin (`http`/`https` and an authority that
//!   passes the `Host` rule, the scheme's default port filled in); `null` or anything else is
//!   403, for every method.
//! - `Sec-Fetch-Site: cross-site` or `same-site` is 403, except on a top-level navigation
//!   (`GET`/`HEAD` with `Sec-Fetch-Mode: navigate`: following a link to the console is fine, and
//!   its answer goes to the user, not to the linking page).
//! - A change (any method but `GET` and `HEAD`) needs `Content-Type: application/json` or the
//!   header `X-Tlsgate-Request` ([`REQUEST_HEADER`]); a browser sends either cross-origin only
//!   after a CORS preflight, which these listeners never approve. Else 403.
//!
//! Per connection ([`serve_http1`]): the request head must arrive within [`HEADER_TIMEOUT`]
//! (also the limit for an idle keep-alive connection), a body within [`BODY_TIMEOUT`]
//! ([`read_body`]), and at most [`MAX_CONNECTIONS`] connections are open at once; an extra one is
//! closed as soon as it is accepted.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HOST, ORIGIN};
use hyper::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_error::log_limit::LogLimit;

/// The custom request header that marks a change as sent by a program of ours (any non-empty
/// value; we send `1`). Browsers send it cross-origin only after a CORS preflight.
pub const REQUEST_HEADER: &str = "x-tlsgate-request";
/// How long a connection may take to send a request head (and may stay idle between requests).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may take to arrive once its head has.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections open at once on one listener.
pub const MAX_CONNECTIONS: usize = 256;

/// Why a request was refused; [`Refusal::status`] is the HTTP status to answer with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `Host` header (and no absolute request target), or several.
    #[error("misdirected request: one Host header is required")]
    NoHost,
    /// `Host` names something else than this listener (DNS rebinding, or a missing allowed host).
    #[error("misdirected request: Host {0:?} is not this listener's address, localhost or an allowed host")]
    ForeignHost(String),
    /// `Origin` is not this listener's own origin.
    #[error("cross-origin request refused (Origin: {0})")]
    ForeignOrigin(String),
    /// `Sec-Fetch-Site` says the request comes from another site.
    #[error("cross-site request refused (Sec-Fetch-Site: {0})")]
    CrossSite(String),
    /// A change sent without `Content-Type: application/json` or [`REQUEST_HEADER`].
    #[error("a change needs Content-Type: application/json or the header X-Tlsgate-Request: 1")]
    NotPreflighted,
}

impl Refusal {
    /// 421 for a wrong or missing `Host`, 403 otherwise.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::NoHost | Refusal::ForeignHost(_) => StatusCode::MISDIRECTED_REQUEST,
            _ => StatusCode::FORBIDDEN,
        }
    }
}

/// A bad `allowed_hosts` / `--allowed-host` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// Not `name`, `name:port`, an IP address or `[v6]:port`.
    #[error(
        "allowed host {0:?} is not a host name or IP address with an optional :port (no scheme, path or wildcard)"
    )]
    BadAllowedHost(String),
}

/// The request checks of one listener.
#[derive(Debug, Clone)]
pub struct Guard {
    listen: SocketAddr,
    allowed: Vec<(String, Option<u16>)>,
}

impl Guard {
    /// For a listener bound to `listen` (its actual address, port included) that also answers
    /// to `allowed_hosts` (`name` or `name:port`; without a port any port matches).
    pub fn new(listen: SocketAddr, allowed_hosts: &[String]) -> Result<Self, GuardError> {
        let allowed = allowed_hosts
            .iter()
            .map(|entry| split_authority(entry).ok_or_else(|| GuardError::BadAllowedHost(entry.clone())))
            .collect::<Result<_, _>>()?;
        Ok(Self { listen, allowed })
    }

    /// The address the checks are for.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// Checks one request (see the module documentation).
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_request(method, uri, headers, true)
    }

    /// [`check`](Self::check) for the POST of an HTML form the listener serves itself (the
    /// console's login form): `Host`, `Origin` and `Sec-Fetch-Site` as for any change, but the
    /// body may be form-encoded.
    pub fn check_form_post(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_request(&Method::POST, uri, headers, false)
    }

    /// Whether `authority` (a `Host` header value) names this listener.
    pub fn host_allowed(&self, authority: &str) -> bool {
        split_authority(authority).is_some_and(|(host, port)| self.allows(&host, port))
    }

    /// Whether `origin` (an `Origin` header value) is this listener's own origin.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        split_authority(authority).is_some_and(|(host, port)| self.allows(&host, Some(port.unwrap_or(default_port))))
    }

    fn check_request(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        need_preflight: bool,
    ) -> Result<(), Refusal> {
        // An absolute request target's authority takes the place of Host (RFC 9112, 3.2.2).
        let authority = match uri.authority() {
            Some(a) => a.as_str().to_string(),
            None => {
                let mut hosts = headers.get_all(HOST).iter();
                match (hosts.next(), hosts.next()) {
                    (Some(h), None) => String::from_utf8_lossy(h.as_bytes()).into_owned(),
                    _ => return Err(Refusal::NoHost),
                }
            }
        };
        if !self.host_allowed(&authority) {
            return Err(Refusal::ForeignHost(authority));
        }
        for origin in headers.get_all(ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            if !self.origin_allowed(&origin) {
                return Err(Refusal::ForeignOrigin(origin.into_owned()));
            }
        }
        let safe = method == Method::GET || method == Method::HEAD;
        if let Some(site) = header(headers, "sec-fetch-site") {
            let navigation =
                safe && header(headers, "sec-fetch-mode").is_some_and(|m| m.eq_ignore_ascii_case("navigate"));
            let foreign = site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site");
            if foreign && !navigation {
                return Err(Refusal::CrossSite(site.to_string()));
            }
        }
        if safe || !need_preflight {
            return Ok(());
        }
        let json = header(headers, CONTENT_TYPE.as_str()).is_some_and(|ct| {
            ct.split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
        });
        let marked = headers.get(REQUEST_HEADER).is_some_and(|v| !v.is_empty());
        if json || marked {
            Ok(())
        } else {
            Err(Refusal::NotPreflighted)
        }
    }

    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        if self
            .allowed
            .iter()
            .any(|(name, p)| name == host && p.is_none_or(|p| Some(p) == port))
        {
            return true;
        }
        if port.is_some_and(|p| p != self.listen.port()) {
            return false;
        }
        if host == "localhost" {
            return true;
        }
        host.parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == self.listen.ip() || self.listen.ip().is_unspecified())
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `host[:port]` or `[v6][:port]` as (lowercase host without brackets, an IP in its canonical
/// form; port); `None` when it is neither. The split is the one reading of a request authority,
/// `tlsgate_config::split_authority`; a port of 0 and sub-delimiters are refused here.
fn split_authority(s: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = tlsgate_config::split_authority(s).ok()?;
    // Narrower than RFC 3986 on purpose: a DNS name, an IP, or `_` (no sub-delimiters, so a
    // `*.example` in `allowed_hosts` is refused instead of never matching).
    let plain = host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    if port == Some(0) || !plain {
        return None;
    }
    let host = host.to_ascii_lowercase();
    match host.parse::<IpAddr>() {
        Ok(ip) => Some((ip.to_string(), port)),
        Err(_) => Some((host, port)),
    }
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Larger than the limit given to [`read_body`].
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    /// Not complete within [`BODY_TIMEOUT`].
    #[error("request body not received within {0:?}")]
    Timeout(Duration),
    /// The connection failed while reading it.
    #[error("request body: {0}")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl BodyError {
    /// 413, 408 or 400.
    pub fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            BodyError::Read(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// Reads a request body of at most `max` bytes, within [`BODY_TIMEOUT`].
pub async fn read_body(body: Incoming, max: usize) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, max).collect()).await {
        Err(_) => Err(BodyError::Timeout(BODY_TIMEOUT)),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(BodyError::TooLarge(max)),
        Ok(Err(e)) => Err(BodyError::Read(e)),
    }
}

/// The per-connection limits of [`serve_http1`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// See [`HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// See [`MAX_CONNECTIONS`].
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: HEADER_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Accepts connections on `listener` forever (until the task is dropped) and serves each with
/// HTTP/1.1 and the service `make_service(peer)` returns, within `limits`: a connection over
/// `limits.max_connections` is closed at once, and one that takes longer than
/// `limits.header_timeout` to send a request head is closed. `what` names the listener in logs.
pub async fn serve_http1<F, S>(listener: tokio::net::TcpListener, limits: Limits, what: &'static str, make_service: F)
where
    F: Fn(SocketAddr) -> S,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Full<Bytes>>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut warned: Option<Instant> = None;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors every attempt fails: back off, a line a second at most.
                static ACCEPT_FAILED_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
                if let Some(suppressed) = ACCEPT_FAILED_LOG.allow() {
                    tracing::warn!(error = %e, suppressed, "{what}: accept failed");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                tracing::warn!(%peer, max = limits.max_connections, "{what}: connection limit reached, closing new connections");
                warned = Some(Instant::now());
            }
            drop(stream);
            continue;
        };
        let service = make_service(peer);
        tokio::spawn(async move {
            let _permit = permit;
            let io = hyper_util::rt::TokioIo::new(stream);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            if let Err(e) = builder.serve_connection(io, service).await {
                tracing::debug!(error = %e, %peer, "{what}: connection error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn guard(listen: &str, allowed: &[&str]) -> Guard {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Guard::new(listen.parse().unwrap(), &allowed).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn check(g: &Guard, method: Method, pairs: &[(&'static str, &str)]) -> Result<(), Refusal> {
        g.check(&method, &Uri::from_static("/api/x"), &headers(pairs))
    }

    #[test]
    fn host_must_name_this_listener() {
        let g = guard("127.0.0.1:9090", &[]);
        for ok in [
            "127.0.0.1:9090",
            "127.0.0.1",
            "localhost:9090",
            "LOCALHOST",
            "[::1]:9090",
            "127.0.0.2:9090",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example:9090",
            "evil.example",
            "127.0.0.1:9091",
            "localhost:80",
            "10.0.0.5:9090",
            "",
            "127.0.0.1:",
            "127.0.0.1:+9090",
            "user@127.0.0.1:9090",
            "::1",
            "[::1]9090",
            "localhost.:9090",
            "localhost.evil.example:9090",
        ] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
        // A wildcard bind answers to any IP literal on its port, never to a name.
        let any = guard("0.0.0.0:9800", &[]);
        assert!(any.host_allowed("10.0.0.5:9800") && any.host_allowed("0.0.0.0:9800"));
        assert!(!any.host_allowed("10.0.0.5:9801") && !any.host_allowed("evil.example:9800"));
        // A specific bind answers to its own address.
        assert!(guard("10.0.0.5:9800", &[]).host_allowed("10.0.0.5:9800"));
    }

    #[test]
    fn allowed_hosts_match_by_name_and_optional_port() {
        let g = guard(
            "127.0.0.1:9090",
            &["Console.Example", "gw.internal:8443", "[2001:db8::1]"],
        );
        assert!(g.host_allowed("console.example") && g.host_allowed("console.example:443"));
        assert!(g.host_allowed("gw.internal:8443"));
        assert!(!g.host_allowed("gw.internal:9090") && !g.host_allowed("gw.internal"));
        assert!(g.host_allowed("[2001:db8:0::1]:1"));
        assert!(!g.host_allowed("sub.console.example"));
        for bad in ["http://x.example", "*.example", "x.example/", "", "a b", "x:y"] {
            assert_eq!(
                Guard::new("127.0.0.1:1".parse().unwrap(), &[bad.to_string()]).unwrap_err(),
                GuardError::BadAllowedHost(bad.to_string())
            );
        }
    }

    #[test]
    fn origin_must_be_the_listeners_own() {
        let g = guard("127.0.0.1:9800", &["console.example"]);
        for ok in [
            "http://127.0.0.1:9800",
            "http://localhost:9800",
            "https://console.example",
            "HTTP://[::1]:9800",
        ] {
            assert!(g.origin_allowed(ok), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "http://127.0.0.1",
            "http://127.0.0.1:8080",
            "null",
            "file://",
            "ftp://127.0.0.1:9800",
            "http://127.0.0.1:9800/path",
        ] {
            assert!(!g.origin_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn reads_need_the_right_host_and_no_foreign_origin() {
        let g = guard("127.0.0.1:9090", &[]);
        let host = ("host", "127.0.0.1:9090");
        assert_eq!(check(&g, Method::GET, &[host]), Ok(()));
        assert_eq!(check(&g, Method::GET, &[]), Err(Refusal::NoHost));
        assert_eq!(
            check(&g, Method::GET, &[host, ("host", "127.0.0.1:9090")]),
            Err(Refusal::NoHost)
        );
        let rebound = check(&g, Method::GET, &[("host", "evil.example:9090")]);
        assert_eq!(rebound, Err(Refusal::ForeignHost("evil.example:9090".into())));
        assert_eq!(rebound.unwrap_err().status(), StatusCode::MISDIRECTED_REQUEST);
        // An absolute request target's authority is what counts.
        let absolute = Uri::from_static("http://evil.example:9090/metrics");
        assert!(g.check(&Method::GET, &absolute, &headers(&[host])).is_err());
        let e = check(&g, Method::GET, &[host, ("origin", "https://evil.example")]).unwrap_err();
        assert_eq!(
            (e.status(), e),
            (
                StatusCode::FORBIDDEN,
                Refusal::ForeignOrigin("https://evil.example".into())
            )
        );
        // A cross-site subresource load is refused; following a link is not.
        let cross = ("sec-fetch-site", "cross-site");
        assert!(check(&g, Method::GET, &[host, cross, ("sec-fetch-mode", "no-cors")]).is_err());
        assert_eq!(
            check(&g, Method::GET, &[host, cross, ("sec-fetch-mode", "navigate")]),
            Ok(())
        );
        assert_eq!(
            check(&g, Method::GET, &[host, ("sec-fetch-site", "same-origin")]),
            Ok(())
        );
        assert_eq!(check(&g, Method::GET, &[host, ("sec-fetch-site", "none")]), Ok(()));
    }

    #[test]
    fn changes_need_json_or_the_request_header_and_the_same_origin() {
        let g = guard("127.0.0.1:9090", &[]);
        let host = ("host", "127.0.0.1:9090");
        let json = ("content-type", "application/json; charset=utf-8");
        assert_eq!(check(&g, Method::POST, &[host, json]), Ok(()));
        assert_eq!(
            check(&g, Method::PUT, &[host, ("content-type", "Application/JSON")]),
            Ok(())
        );
        assert_eq!(check(&g, Method::POST, &[host, (REQUEST_HEADER, "1")]), Ok(()));
        for simple in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/plain; application/json",
            "application/jsonp",
        ] {
            assert_eq!(
                check(&g, Method::POST, &[host, ("content-type", simple)]),
                Err(Refusal::NotPreflighted),
                "{simple}"
            );
        }
        assert_eq!(check(&g, Method::POST, &[host]), Err(Refusal::NotPreflighted));
        assert_eq!(
            check(&g, Method::DELETE, &[host, (REQUEST_HEADER, "")]),
            Err(Refusal::NotPreflighted)
        );
        assert_eq!(
            check(&g, Method::POST, &[host, json, ("origin", "https://evil.example")]),
            Err(Refusal::ForeignOrigin("https://evil.example".into()))
        );
        assert_eq!(
            check(&g, Method::POST, &[host, json, ("origin", "null")]),
            Err(Refusal::ForeignOrigin("null".into()))
        );
        assert_eq!(
            check(&g, Method::POST, &[host, json, ("origin", "http://127.0.0.1:9090")]),
            Ok(())
        );
        for site in ["cross-site", "same-site", "Cross-Site"] {
            let e = check(
                &g,
                Method::POST,
                &[host, json, ("sec-fetch-site", site), ("sec-fetch-mode", "navigate")],
            );
            assert_eq!(e, Err(Refusal::CrossSite(site.into())));
        }
        assert_eq!(
            check(&g, Method::POST, &[("host", "evil.example:9090"), json]),
            Err(Refusal::ForeignHost("evil.example:9090".into()))
        );
        // The login form: form-encoded, but same-origin only.
        let uri = Uri::from_static("/login");
        let form = ("content-type", "application/x-www-form-urlencoded");
        assert_eq!(
            g.check_form_post(&uri, &headers(&[host, form, ("origin", "http://127.0.0.1:9090")])),
            Ok(())
        );
        assert!(g
            .check_form_post(&uri, &headers(&[host, form, ("origin", "https://evil.example")]))
            .is_err());
        assert!(g
            .check_form_post(&uri, &headers(&[host, form, ("sec-fetch-site", "cross-site")]))
            .is_err());
    }

    #[tokio::test]
    async fn connections_are_capped_and_slow_heads_closed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::net::TcpStream;
        use tokio::time::timeout;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits {
            header_timeout: Duration::from_millis(300),
            max_connections: 2,
        };
        let server = tokio::spawn(serve_http1(listener, limits, "test", |_| {
            hyper::service::service_fn(|_req| async { Ok(Response::new(Full::new(Bytes::from_static(b"ok")))) })
        }));
        let opened = Instant::now();
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
            held.push(s);
        }
        // The third is closed as soon as it is accepted.
        let mut extra = TcpStream::connect(addr).await.unwrap();
        let mut rest = Vec::new();
        let n = timeout(Duration::from_millis(250), extra.read_to_end(&mut rest)).await;
        assert!(
            matches!(n, Ok(Ok(0)) | Ok(Err(_))),
            "the extra connection stayed open: {n:?}"
        );
        // The half-sent ones are closed after the header timeout, not before.
        for s in &mut held {
            let mut rest = Vec::new();
            let read = timeout(Duration::from_secs(3), s.read_to_end(&mut rest)).await;
            assert!(read.is_ok(), "a half-sent request was kept past the header timeout");
            assert!(!String::from_utf8_lossy(&rest).contains(" 200 "));
        }
        assert!(opened.elapsed() >= Duration::from_millis(290), "{:?}", opened.elapsed());
        // Then a whole request is served.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        timeout(Duration::from_secs(3), s.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
        server.abort();
    }
}

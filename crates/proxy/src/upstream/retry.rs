//! Retries of failed origin requests (nginx's `proxy_next_upstream`, HAProxy's `retry-on`,
//! Envoy's `retry_on`): [`RetryPolicy`] says whether a failed attempt may go again, from the
//! failure, the request's method and what became of its body; [`RetryBudget`] caps the retries
//! in flight of a group (Envoy's retry budget) with one atomic counter and no lock.
//!
//! What may go again, and why:
//! - a **connect failure** (TCP or TLS): nothing of the request reached an origin, so any
//!   request may, as long as its body has not started being read (a gRPC call and an upgrade
//!   too);
//! - a **reset** (the connection reset or closed before the response head) and a **header
//!   timeout**: the origin may have acted on the request, so only idempotent methods
//!   (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE) without a body (the only body
//!   that can be sent again whole), never a gRPC call or an upgrade.

use http::Method;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::{RetryConfig, RetryOn};

/// Why an attempt failed, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No connection could be opened (TCP or TLS): nothing of the request was sent.
    Connect,
    /// The connection was reset or closed before the response head arrived
    /// ([`super::pool::SendError::before_response`]).
    Reset,
    /// No response head within `header_timeout` after the request was sent.
    HeaderTimeout,
    /// Anything else (a malformed response, a stalled body): never retried.
    Other,
}

/// What about a request decides whether it may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestKind {
    /// GET, HEAD, OPTIONS, TRACE, PUT or DELETE (RFC 9110 §9.2.2).
    pub idempotent: bool,
    /// No body at all: the request can be sent again whole.
    pub bodiless: bool,
    /// A gRPC call (`content-type: application/grpc…`).
    pub grpc: bool,
    /// An upgrade (WebSocket).
    pub upgrade: bool,
}

impl RequestKind {
    /// The kind of a request with `method`; `grpc`: its headers say it is a gRPC call
    /// ([`super::forwarding::is_grpc`], read once per request by the caller).
    pub fn of(method: &Method, grpc: bool, bodiless: bool, upgrade: bool) -> Self {
        Self {
            idempotent: is_idempotent(method),
            bodiless,
            grpc,
            upgrade,
        }
    }
}

/// RFC 9110 §9.2.2: the methods whose repetition has the effect of one request.
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

const ON_CONNECT: u8 = 1;
const ON_RESET: u8 = 2;
const ON_HEADER_TIMEOUT: u8 = 4;

fn bit(on: RetryOn) -> u8 {
    match on {
        RetryOn::ConnectFailure => ON_CONNECT,
        RetryOn::Reset => ON_RESET,
        RetryOn::HeaderTimeout => ON_HEADER_TIMEOUT,
    }
}

/// A group's `[upstream.retry]`: how many tries, after which failures, the wait between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    attempts: u32,
    on: u8,
    backoff: Duration,
}

impl RetryPolicy {
    /// The policy of `config` (at least one try).
    pub fn new(config: &RetryConfig) -> Self {
        Self {
            attempts: config.attempts.max(1),
            on: config.on.iter().fold(0, |bits, on| bits | bit(*on)),
            backoff: config.backoff.get(),
        }
    }

    /// Tries in all, the first one included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether a request body must be kept so that it can go again after a connect failure
    /// (retries on connect failures are on).
    pub fn replays_unsent_bodies(&self) -> bool {
        self.attempts > 1 && self.on & ON_CONNECT != 0
    }

    /// The condition under which an attempt that failed with `failure` may go again, or `None`.
    /// `body_unsent`: no byte of the body has been read for the origin (always true without a
    /// body). Whether a try is left and the budget allows it is the caller's to check.
    pub fn retryable(&self, failure: Failure, request: RequestKind, body_unsent: bool) -> Option<RetryOn> {
        let (on, reason) = match failure {
            Failure::Connect => (ON_CONNECT, RetryOn::ConnectFailure),
            Failure::Reset => (ON_RESET, RetryOn::Reset),
            Failure::HeaderTimeout => (ON_HEADER_TIMEOUT, RetryOn::HeaderTimeout),
            Failure::Other => return None,
        };
        if self.attempts < 2 || self.on & on == 0 {
            return None;
        }
        let allowed = match failure {
            Failure::Connect => body_unsent,
            // The request may have been acted on: only what may be applied twice, whole.
            _ => request.idempotent && request.bodiless && !request.grpc && !request.upgrade,
        };
        allowed.then_some(reason)
    }

    /// The wait before retry number `retry` (1 for the first): `backoff` doubled for each
    /// further retry (at most 8 times `backoff`), then a share between half and all of it picked
    /// by `jitter` (any number, e.g. the clock's nanoseconds), so that requests that failed
    /// together do not come back together. Zero when `backoff` is zero.
    pub fn backoff(&self, retry: u32, jitter: u32) -> Duration {
        if self.backoff.is_zero() {
            return Duration::ZERO;
        }
        let ceiling = self.backoff.saturating_mul(1 << retry.clamp(1, 4).saturating_sub(1));
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        let half = nanos / 2;
        Duration::from_nanos(half + u64::from(jitter) % (nanos - half + 1))
    }
}

/// A group's retry budget (Envoy's): the retries in flight may be at most `budget_percent` of
/// the group's requests in flight, and `min_retry_concurrency` are allowed whatever that says.
/// One atomic counter, no lock; nothing is allocated.
#[derive(Debug)]
pub struct RetryBudget {
    retries: AtomicUsize,
    percent: usize,
    min: usize,
}

impl RetryBudget {
    /// The budget of `config`.
    pub fn new(config: &RetryConfig) -> Self {
        Self {
            retries: AtomicUsize::new(0),
            percent: config.budget_percent.min(100) as usize,
            min: config.min_retry_concurrency as usize,
        }
    }

    /// The retries allowed in flight while the group has `active` requests in flight.
    pub fn limit(&self, active: usize) -> usize {
        (active.saturating_mul(self.percent) / 100).max(self.min)
    }

    /// A retry counted in flight until the token is dropped, when one more is within the budget
    /// for `active` requests in flight (the one to retry included); `None` when the budget is
    /// spent.
    pub fn try_acquire(self: &Arc<Self>, active: usize) -> Option<RetryToken> {
        let limit = self.limit(active);
        let mut now = self.retries.load(Ordering::Relaxed);
        loop {
            if now >= limit {
                return None;
            }
            match self
                .retries
                .compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Some(RetryToken(self.clone())),
                Err(actual) => now = actual,
            }
        }
    }

    /// Retries in flight now.
    pub fn in_flight(&self) -> usize {
        self.retries.load(Ordering::Relaxed)
    }
}

/// One retry counted in its group's [`RetryBudget`] until dropped (with the retried request's
/// response body, or its failure).
#[derive(Debug)]
pub struct RetryToken(Arc<RetryBudget>);

impl Drop for RetryToken {
    fn drop(&mut self) {
        self.0.retries.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::super::forwarding::is_grpc;
    use super::*;
    use http::HeaderMap;
    use tlsgate_config::Duration as ConfigDuration;

    fn config(attempts: u32, on: &[RetryOn]) -> RetryConfig {
        RetryConfig {
            attempts,
            on: on.to_vec(),
            ..RetryConfig::default()
        }
    }

    fn kind(method: Method, bodiless: bool) -> RequestKind {
        RequestKind::of(&method, false, bodiless, false)
    }

    const ALL: [RetryOn; 3] = [RetryOn::ConnectFailure, RetryOn::Reset, RetryOn::HeaderTimeout];

    #[test]
    fn idempotent_methods_are_those_of_rfc_9110() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(&Method::from_bytes(m.as_bytes()).unwrap()), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "PROPFIND", "get"] {
            assert!(!is_idempotent(&Method::from_bytes(m.as_bytes()).unwrap()), "{m}");
        }
    }

    #[test]
    fn connect_failures_retry_any_request_whose_body_is_unsent() {
        let p = RetryPolicy::new(&RetryConfig::default());
        let post = kind(Method::POST, false);
        assert_eq!(p.retryable(Failure::Connect, post, true), Some(RetryOn::ConnectFailure));
        assert_eq!(
            p.retryable(Failure::Connect, post, false),
            None,
            "body started: not again"
        );
        assert_eq!(
            p.retryable(Failure::Connect, kind(Method::GET, true), true),
            Some(RetryOn::ConnectFailure)
        );
        let mut grpc_headers = HeaderMap::new();
        grpc_headers.insert(http::header::CONTENT_TYPE, "application/grpc".parse().unwrap());
        let grpc = RequestKind::of(&Method::POST, is_grpc(&grpc_headers), false, false);
        assert!(grpc.grpc && !grpc.idempotent);
        assert_eq!(p.retryable(Failure::Connect, grpc, true), Some(RetryOn::ConnectFailure));
        let upgrade = RequestKind::of(&Method::GET, false, true, true);
        assert_eq!(
            p.retryable(Failure::Connect, upgrade, true),
            Some(RetryOn::ConnectFailure)
        );
    }

    #[test]
    fn resets_retry_only_idempotent_bodiless_requests_never_grpc_or_upgrades() {
        let p = RetryPolicy::new(&config(2, &ALL));
        for failure in [Failure::Reset, Failure::HeaderTimeout] {
            for m in [Method::GET, Method::HEAD, Method::PUT, Method::DELETE, Method::OPTIONS] {
                assert!(
                    p.retryable(failure, kind(m.clone(), true), true).is_some(),
                    "{m} {failure:?}"
                );
                assert_eq!(
                    p.retryable(failure, kind(m.clone(), false), true),
                    None,
                    "{m} with a body"
                );
            }
            for m in [Method::POST, Method::PATCH, Method::CONNECT] {
                assert_eq!(p.retryable(failure, kind(m.clone(), true), true), None, "{m}");
            }
            let mut grpc_headers = HeaderMap::new();
            grpc_headers.insert(http::header::CONTENT_TYPE, "application/grpc+proto".parse().unwrap());
            // Even a bodiless "GET" gRPC request is not sent again once sent.
            let grpc = RequestKind::of(&Method::GET, is_grpc(&grpc_headers), true, false);
            assert_eq!(p.retryable(failure, grpc, true), None);
            let upgrade = RequestKind::of(&Method::GET, false, true, true);
            assert_eq!(p.retryable(failure, upgrade, true), None);
        }
        let get = kind(Method::GET, true);
        assert_eq!(p.retryable(Failure::Reset, get, true), Some(RetryOn::Reset));
        assert_eq!(
            p.retryable(Failure::HeaderTimeout, get, true),
            Some(RetryOn::HeaderTimeout)
        );
        assert_eq!(p.retryable(Failure::Other, get, true), None);
    }

    #[test]
    fn only_the_conditions_named_retry_and_one_attempt_retries_nothing() {
        let get = kind(Method::GET, true);
        let defaults = RetryPolicy::new(&RetryConfig::default());
        assert_eq!(defaults.attempts(), 2);
        assert!(defaults.retryable(Failure::Reset, get, true).is_some());
        assert_eq!(
            defaults.retryable(Failure::HeaderTimeout, get, true),
            None,
            "off by default"
        );
        let resets = RetryPolicy::new(&config(3, &[RetryOn::Reset]));
        assert_eq!(resets.retryable(Failure::Connect, get, true), None);
        assert!(resets.retryable(Failure::Reset, get, true).is_some());
        assert!(!resets.replays_unsent_bodies());
        let once = RetryPolicy::new(&config(1, &ALL));
        for failure in [Failure::Connect, Failure::Reset, Failure::HeaderTimeout] {
            assert_eq!(once.retryable(failure, get, true), None);
        }
        assert!(!once.replays_unsent_bodies());
        assert!(defaults.replays_unsent_bodies());
        assert_eq!(RetryPolicy::new(&config(0, &ALL)).attempts(), 1);
    }

    #[test]
    fn backoff_doubles_within_its_jitter_and_is_zero_without_a_base() {
        let none = RetryPolicy::new(&RetryConfig::default());
        assert_eq!(none.backoff(1, 12345), Duration::ZERO);
        let p = RetryPolicy::new(&RetryConfig {
            backoff: ConfigDuration(Duration::from_millis(20)),
            ..RetryConfig::default()
        });
        for (retry, ceiling) in [(1, 20), (2, 40), (3, 80), (4, 160), (9, 160)] {
            let ceiling = Duration::from_millis(ceiling);
            for jitter in [0, 1, 7, 999_999, u32::MAX] {
                let wait = p.backoff(retry, jitter);
                assert!(wait >= ceiling / 2 && wait <= ceiling, "{retry} {jitter}: {wait:?}");
            }
        }
        assert_eq!(p.backoff(1, 0), Duration::from_millis(10));
        assert_ne!(p.backoff(1, 0), p.backoff(1, 5_000_000), "jitter spreads the waits");
    }

    #[test]
    fn the_budget_is_a_share_of_requests_in_flight_with_a_floor() {
        let budget = Arc::new(RetryBudget::new(&RetryConfig::default()));
        assert_eq!((budget.limit(0), budget.limit(10), budget.limit(100)), (3, 3, 20));
        let tokens: Vec<RetryToken> = (0..3).filter_map(|_| budget.try_acquire(1)).collect();
        assert_eq!((tokens.len(), budget.in_flight()), (3, 3));
        assert!(budget.try_acquire(1).is_none(), "the floor is spent");
        let more = budget.try_acquire(20).expect("20 % of 20 in flight is 4");
        assert!(budget.try_acquire(20).is_none());
        drop(tokens);
        drop(more);
        assert_eq!(budget.in_flight(), 0, "tokens give their retry back");

        let closed = Arc::new(RetryBudget::new(&RetryConfig {
            budget_percent: 0,
            min_retry_concurrency: 0,
            ..RetryConfig::default()
        }));
        assert!(closed.try_acquire(1_000).is_none());
        assert_eq!(closed.in_flight(), 0);
        let full = Arc::new(RetryBudget::new(&RetryConfig {
            budget_percent: 100,
            min_retry_concurrency: 0,
            ..RetryConfig::default()
        }));
        assert!(full.try_acquire(0).is_none());
        let t = full.try_acquire(1);
        assert!(t.is_some() && full.try_acquire(1).is_none());
    }

    #[test]
    fn the_budget_holds_under_threads() {
        let budget = Arc::new(RetryBudget::new(&RetryConfig {
            budget_percent: 0,
            min_retry_concurrency: 5,
            ..RetryConfig::default()
        }));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let b = budget.clone();
                std::thread::spawn(move || {
                    let mut most = 0;
                    for _ in 0..2_000 {
                        if let Some(t) = b.try_acquire(100) {
                            most = most.max(b.in_flight());
                            drop(t);
                        }
                    }
                    most
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().unwrap() <= 5);
        }
        assert_eq!(budget.in_flight(), 0);
    }

    #[test]
    fn failures_in_a_row_mark_a_server_down_and_a_response_ends_the_row() {
        use super::super::server::Marked;
        let addr = tlsgate_config::OriginAddr::parse("127.0.0.1:1").unwrap();
        let s = super::super::server::UpstreamServer::new(&addr).unwrap();
        assert_eq!(
            s.record_failure(1, 0, 500),
            Marked::Down,
            "max_fails 1: the first failure"
        );
        assert!(!s.is_up(499) && s.is_up(500));
        assert_eq!(s.record_failure(1, 400, 900), Marked::Again, "still down at 400");
        assert_eq!(s.record_failure(1, 900, 950), Marked::Down, "up again at 900");
        assert_eq!(s.record_failure(3, 1_000, 2_000), Marked::No);
        assert_eq!(s.record_failure(3, 1_000, 2_000), Marked::No);
        s.record_success();
        assert_eq!(s.failures(), 0);
        assert_eq!(s.record_failure(3, 1_000, 2_000), Marked::No);
        assert_eq!(s.record_failure(3, 1_000, 2_000), Marked::No);
        assert!(s.is_up(1_000), "two in a row of three");
        assert_eq!(s.record_failure(3, 1_000, 2_000), Marked::Down);
        assert!(!s.is_up(1_000) && s.failures() == 0, "the third: down, and a new count");
        let never = super::super::server::UpstreamServer::new(&addr).unwrap();
        assert!((0..10).all(|_| never.record_failure(0, 0, u64::MAX) == Marked::No));
        assert!(never.is_up(0));
    }

    /// What the test origin does once it has read the request head.
    #[derive(Clone, Copy)]
    enum Origin {
        Close,
        Reset,
        Garbage,
    }

    /// The failure of an HTTP/1.1 exchange (hyper, as the pool runs it) with an origin that
    /// reads the request head and then does `origin`.
    async fn exchange_with(origin: Origin) -> super::super::pool::SendError {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let (mut head, mut buf) = (Vec::new(), [0u8; 1024]);
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = tcp.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request head arrives");
                head.extend_from_slice(&buf[..n]);
            }
            match origin {
                Origin::Close => drop(tcp),
                Origin::Reset => {
                    socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO)).unwrap();
                    drop(tcp);
                }
                Origin::Garbage => {
                    tcp.write_all(b"HTTP/1.1 abc Nope\r\n\r\n").await.unwrap();
                    let _ = tcp.shutdown().await;
                }
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(tcp);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let req = http::Request::get("/")
            .header("host", "origin")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let e = sender.send_request(req).await.expect_err("the origin gave no response");
        server.await.unwrap();
        super::super::pool::SendError::Exchange(e)
    }

    #[tokio::test]
    async fn a_connection_closed_or_reset_before_the_response_is_before_response() {
        for origin in [Origin::Close, Origin::Reset] {
            let e = exchange_with(origin).await;
            assert!(e.before_response(), "{e:?}");
        }
        let malformed = exchange_with(Origin::Garbage).await;
        assert!(
            !malformed.before_response(),
            "a malformed response is not a reset: {malformed:?}"
        );
        assert!(!super::super::pool::SendError::Http1Needed.before_response());
    }
}

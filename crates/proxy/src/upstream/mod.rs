//! Upstream groups: origin servers spoken to over HTTP/1.1 or HTTP/2, plaintext or TLS, chosen
//! round robin or by fewest requests in flight; a server that fails `max_fails` times in a row
//! is skipped for `fail_timeout`. Failed requests go again, to another server when there is one,
//! as [`retry`] allows (`[upstream.retry]`: connect failures for any request whose body is unsent,
//! resets before the response for idempotent requests without a body; within a budget).
//!
//! Beside the group: [`server`] (one origin, its connections and its passive-health mark),
//! [`balance`] (server choice), [`connect`] (TCP and TLS to one server), [`pool`] (the
//! connections kept, and sending on them), [`forwarding`] (which headers go to the origin and
//! back), [`request_body`] (the request body's send watch and timeouts), [`tunnel`] (upgrades:
//! WebSocket), [`health`] (active health checks), [`retry`] (what may go again, and the retry
//! budget), `replay` (a body kept for a retry) and `background` (the thread probes and idle
//! sweeps run on).

mod background;
pub mod balance;
pub mod connect;
mod conns;
pub mod exchange;
pub mod forwarding;
mod h2_origin;
pub mod health;
pub mod limit;
pub mod pool;
mod replay;
pub mod request_body;
pub mod retry;
pub mod server;
pub mod tunnel;

use crate::body::ClientBody;
use crate::body::{full, Body, BoxError, Guarded};
use crate::error::{ProxyError, Side};
use crate::facts::UpstreamFacts;
use crate::request::router::Edits;
use crate::upstream::forwarding::{is_grpc, prepare_request, strip_hop_by_hop, Hop};
use crate::upstream::request_body::TrackedBody;
use balance::Balancer;
use bytes::Bytes;
use connect::ConnectError;
use http::{header, Request, Response};
use http_body_util::BodyExt;
use pool::{OriginBody, OriginPool, SendError};
use replay::Replay;
use retry::{Failure, RequestKind, RetryBudget, RetryPolicy, RetryToken};
use server::{InFlight, Marked, UpstreamServer};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_admin::metrics::{UpstreamErrorLabels, UpstreamLabels, UpstreamRetryLabels};
use tlsgate_admin::Metrics;
use tlsgate_config::{OriginAddr, UpstreamConfig};
use tlsgate_error::log_limit::LogLimit;
use tlsgate_tls::TlsBuildError;

/// A group of origin servers with its connection pool.
pub struct UpstreamGroup {
    /// Name from the configuration.
    pub name: String,
    label: &'static str,
    servers: Vec<Arc<UpstreamServer>>,
    balancer: Balancer,
    pool: Arc<OriginPool>,
    header_timeout: Duration,
    fail_timeout: Duration,
    /// Failures in a row that skip a server for `fail_timeout` (0: never).
    max_fails: u32,
    /// What may be retried, how often.
    retry: RetryPolicy,
    /// The retries in flight, within `[upstream.retry]`'s budget.
    retry_budget: Arc<RetryBudget>,
    tunnel_idle: Duration,
    /// `forward_early_hints`.
    early_hints: bool,
    /// `forwarded_headers`.
    forwarded: tlsgate_config::ForwardedHeaders,
    /// `upstream_duration_seconds{upstream}`, looked up in its family once.
    duration: std::sync::OnceLock<prometheus_client::metrics::histogram::Histogram>,
    epoch: Instant,
}

/// Marks a response to a HEAD request that came from an origin (not made by the gateway), in
/// its extensions; responses to other methods are not marked.
#[derive(Debug, Clone, Copy)]
pub struct FromOrigin;

/// A client's upgrade request: what it asked for, where an HTTP/1.1 connection's tunnel goes,
/// and what an HTTP/2 tunnel holds while it runs (the connection's in-flight mark).
pub struct UpgradeRequest<'a> {
    /// The upgrade asked for.
    pub upgrade: tunnel::Upgrade,
    /// The client connection's tunnel slot.
    pub slot: &'a tunnel::TunnelSlot,
    /// Held by an HTTP/2 stream's tunnel until it ends.
    pub hold: Box<dyn Send>,
}

/// Everything the forwarder needs to know about the client side of a request.
pub struct Downstream<'a> {
    /// This hop: client address, whether it is a trusted proxy, the authority it asked for.
    pub hop: Hop<'a>,
    /// The normalised (and possibly rewritten) path with the original query.
    pub path_and_query: &'a str,
    /// The route's request header edits.
    pub edits: &'a Edits,
    /// The client connection's ends (client, and the gateway address it connected to): what a
    /// group with `send_proxy_protocol` announces to its servers.
    pub client_conn: connect::ProxyPair,
    /// Where the origin's 103 Early Hints go.
    pub interim: Option<crate::interim::InterimSink<'a>>,
}

impl UpstreamGroup {
    /// Builds a group (`field` names it in errors, e.g. `upstream[0]`); connections are opened
    /// on demand. Fails when its `[upstream.tls]` cannot be built (a CA or client-certificate
    /// file that does not load).
    pub fn new(config: &UpstreamConfig, field: &str) -> Result<Self, TlsBuildError> {
        // Validation refuses every address that is left out here; one can only arrive through a
        // path that skipped it, and is then named in an error line rather than dropped silently.
        let mut servers = Vec::with_capacity(config.servers.len());
        for text in &config.servers {
            let server = OriginAddr::parse(text)
                .map_err(|e| e.to_string())
                .and_then(|addr| UpstreamServer::new(&addr).map_err(|e| e.to_string()));
            match server {
                Ok(server) => servers.push(Arc::new(server.for_group(config))),
                Err(error) => {
                    tracing::error!(upstream = %config.name, server = %text, %error, "origin address refused; server left out")
                }
            }
        }
        if servers.is_empty() {
            tracing::error!(upstream = %config.name, "upstream group has no usable server: its requests get 502");
        }
        let label = tlsgate_admin::metrics::intern(&config.name);
        let any_tls = servers.iter().any(|s| s.tls);
        let pool = Arc::new(OriginPool::new(config, any_tls, field, label)?);
        health::spawn(config, label, &pool, &servers);
        if let Some(runtime) = background::runtime() {
            runtime.spawn(sweep(Arc::downgrade(&pool), servers.clone()));
        }
        Ok(Self {
            name: config.name.clone(),
            label,
            servers,
            balancer: Balancer::new(config.balance),
            pool,
            header_timeout: config.header_timeout.get(),
            fail_timeout: config.fail_timeout.get(),
            max_fails: config.max_fails,
            retry: RetryPolicy::new(&config.retry),
            retry_budget: Arc::new(RetryBudget::new(&config.retry)),
            tunnel_idle: config.tunnel_idle_timeout.get(),
            early_hints: config.forward_early_hints,
            forwarded: config.forwarded_headers,
            duration: std::sync::OnceLock::new(),
            epoch: Instant::now(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Picks a server, skipping `exclude` and servers marked down; see [`Balancer::pick`].
    pub fn pick(&self, exclude: Option<usize>) -> Option<usize> {
        self.balancer.pick(&self.servers, self.now_ms(), exclude)
    }

    /// Forwards a request and streams the response back. A failure becomes the error response
    /// of its [`ProxyError`], which travels in the response's extensions for the log.
    /// What the access log needs (origin server, time to its header, upload) goes to `facts`.
    /// The request is taken from `slot` (left in place, it is not copied into the futures on the
    /// way); a slot found empty is a 400.
    pub async fn forward(
        self: &Arc<Self>,
        slot: &mut Option<Request<ClientBody>>,
        down: &Downstream<'_>,
        metrics: &Metrics,
        facts: &mut UpstreamFacts,
        upgrade: Option<UpgradeRequest<'_>>,
    ) -> Response<Body> {
        facts.group = Some(self.label);
        let grpc = slot.as_ref().is_some_and(|req| is_grpc(req.headers()));
        // Boxed: the forwarding state is most of a request's future; requests the gateway
        // answers itself never allocate it, and it is built in its box (`pin_in_place`), not
        // copied into it or moved through the futures that await it.
        let forwarding = crate::boxed::pin_in_place(|| self.try_forward(slot, grpc, down, metrics, facts, upgrade));
        match forwarding.await {
            Ok(resp) => resp,
            Err(e) if grpc => e.grpc_response(),
            Err(e) => e.response(),
        }
    }

    async fn try_forward(
        self: &Arc<Self>,
        slot: &mut Option<Request<ClientBody>>,
        grpc: bool,
        down: &Downstream<'_>,
        metrics: &Metrics,
        facts: &mut UpstreamFacts,
        mut upgrade: Option<UpgradeRequest<'_>>,
    ) -> Result<Response<Body>, ProxyError> {
        let (mut parts, body) = slot.take().ok_or(ProxyError::BadRequest("no request"))?.into_parts();
        let bodiless = http_body::Body::is_end_stream(&body);
        prepare_request(&mut parts.headers, &down.hop, self.forwarded, down.edits);
        if let Some(u) = &upgrade {
            u.upgrade.shape(&mut parts);
        }
        if self.servers.is_empty() {
            // Said once at startup too (every server refused); here at most once a second.
            static NO_SERVERS_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
            if let Some(suppressed) = NO_SERVERS_LOG.allow() {
                tracing::warn!(upstream = %self.name, suppressed, "upstream group has no servers");
            }
            self.count_error(metrics, ProxyError::NoUpstreamServer.kind());
            return Err(ProxyError::NoUpstreamServer);
        }

        // Read in place by every attempt (`pool::Outgoing`): never copied for HTTP/1.1.
        if !valid_target(down.path_and_query) {
            return Err(ProxyError::BadRequest("request target"));
        }
        let out = pool::Outgoing {
            parts: &parts,
            target: down.path_and_query,
        };
        let kind = RequestKind::of(&parts.method, grpc, bodiless, upgrade.is_some());
        let (tracked, sent) = TrackedBody::new(body);
        facts.upload = Some(sent.clone());
        // The body for the next attempt while no origin connection has read any of it; a
        // bodiless request goes again with an empty one.
        let mut unsent = Some(tracked);
        // A body is kept where a connect failure may send it again.
        let keep_body = !bodiless && self.retry.replays_unsent_bodies();
        let mut replay: Option<Replay<TrackedBody>> = None;
        // The retry under way, counted in the group's budget until its response body ends.
        let mut token: Option<RetryToken> = None;
        let attempts = self.retry.attempts();
        let mut exclude = None;
        let mut last = ProxyError::UpstreamConnect;
        for attempt in 0..attempts {
            if attempt > 0 {
                let jitter = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let wait = self.retry.backoff(attempt, jitter);
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
            let picked = match self.pick(exclude) {
                // A retry with no other server to go to goes to the same one again.
                None if attempt > 0 => self.pick(None),
                picked => picked,
            };
            let Some(idx) = picked else {
                if attempt > 0 {
                    return Err(last);
                }
                // The group has servers (checked above): every one fails its health check.
                self.count_error(metrics, ProxyError::NoHealthyServer.kind());
                return Err(ProxyError::NoHealthyServer);
            };
            let server = &self.servers[idx];
            // Every server is down (the balancer fell back to one of them): one request at a
            // time tries it again, the others are answered at once instead of piling up on
            // connects that are likely to time out. (The balancer never returns a server that fails
            // its active check, so only the passive mark matters here.)
            let _trial = if !server.marked_down(|| self.now_ms()) {
                None
            } else {
                match server.try_trial() {
                    Some(trial) => Some(trial),
                    None if attempt > 0 => return Err(last),
                    None => {
                        self.count_error(metrics, ProxyError::NoLiveServer.kind());
                        return Err(ProxyError::NoLiveServer);
                    }
                }
            };
            let req_body: Body = match unsent.take() {
                Some(b) if keep_body => {
                    let (hold, b) = Replay::new(b);
                    replay = Some(hold);
                    b.boxed_unsync()
                }
                Some(b) => b.boxed_unsync(),
                None => full(Bytes::new()),
            };
            let started = Instant::now();
            facts.server = Some(server.authority.clone());
            // Counted until the response body ends or is dropped (client gone, stream reset).
            let in_flight = InFlight::enter(self, idx);
            // The response-header timeout starts once the body has been sent (a slow upload is
            // not the origin's fault); a body that stops moving is timed out on its own.
            let pair = server.sends_proxy().then_some(down.client_conn);
            let opts = pool::SendOpts {
                http1_only: upgrade.is_some(),
                pair,
                interim: match down.interim {
                    Some(sink) if !self.early_hints => Some(crate::interim::InterimSink {
                        to: Err("dropped_off"),
                        ..sink
                    }),
                    sink => sink,
                },
            };
            // Pinned where it is: the timeout and the select below hold a reference, not a
            // copy of the exchange's state.
            let send = std::pin::pin!(self.pool.send(server, out, req_body, metrics, opts));
            let result = if sent.is_done() {
                // No body to watch (most requests): the thread's shared timer, not a timer-wheel
                // entry per request.
                tlsgate_timer::timeout(self.header_timeout, send)
                    .await
                    .map_err(|_| ProxyError::UpstreamHeaderTimeout)
            } else {
                tokio::select! {
                    r = send => Ok(r),
                    e = sent.deadline(self.header_timeout) => Err(e),
                }
            };
            let took = started.elapsed();
            facts.header_time = Some(took);
            let labels = UpstreamLabels { upstream: self.label };
            // Counts a failure of the server: whether it marked the server down.
            let failed = |server: &UpstreamServer| {
                let now = self.now_ms();
                server.record_failure(self.max_fails, now, now + self.fail_timeout.as_millis() as u64)
            };
            let skipped = |marked: Marked| match marked {
                Marked::No => String::new(),
                Marked::Down => format!("; server skipped for {:?}", self.fail_timeout),
                Marked::Again => format!("; server skipped for {:?} (it was down already)", self.fail_timeout),
            };
            let (error, failure) = match result {
                Ok(Ok(mut resp)) => {
                    server.record_success();
                    self.duration
                        .get_or_init(|| metrics.upstream_duration.get_or_create(&labels).clone())
                        .observe(took.as_secs_f64());
                    let switched = resp.status() == http::StatusCode::SWITCHING_PROTOCOLS;
                    let origin_side = switched.then(|| hyper::upgrade::on(&mut resp));
                    // The protocol switched to, before hop-by-hop removal takes `Upgrade`.
                    let switched_to = resp.headers().get(header::UPGRADE).cloned();
                    let (mut rparts, rbody) = resp.into_parts();
                    // The HTTP/1.1 exchange's responses come without them already (its parser
                    // noted them: `H1Conn::response`).
                    if !matches!(rbody, OriginBody::H1 { .. }) {
                        strip_hop_by_hop(&mut rparts.headers);
                    }
                    if parts.method == http::Method::HEAD {
                        // Only a HEAD response's handling asks (`service::handle`): an extension
                        // map costs an allocation per response.
                        rparts.extensions.insert(FromOrigin);
                    }
                    if let (Some(origin), Some(u)) = (origin_side, upgrade.take()) {
                        let resp = Response::from_parts(rparts, full(Bytes::new()));
                        drop(in_flight);
                        return Ok(u
                            .upgrade
                            .accept(resp, switched_to, origin, u.slot, self.tunnel_idle, u.hold));
                    }
                    return Ok(Response::from_parts(
                        rparts,
                        Guarded::new(rbody, (in_flight, token))
                            .map_err(|e| Box::new(e) as BoxError)
                            .boxed_unsync(),
                    ));
                }
                Ok(Err(SendError::Connect(e))) => {
                    let marked = failed(server);
                    if let Some(suppressed) = server.failure_line(marked) {
                        let skipped = skipped(marked);
                        tracing::warn!(upstream = %self.name, server = %server.authority, error = %e, kind = tlsgate_error::Classify::kind(&e), suppressed, "upstream connect failed{skipped}");
                    }
                    let error = match e {
                        ConnectError::Tls { .. } => ProxyError::UpstreamTls,
                        _ => ProxyError::UpstreamConnect,
                    };
                    (error, Failure::Connect)
                }
                // hyper's clients refused the target: the client's request, no attempt made.
                Ok(Err(SendError::Target)) => return Err(ProxyError::BadRequest("request target")),
                Ok(Err(SendError::Queue(e))) => {
                    if let Some(suppressed) = server.failure_line(Marked::No) {
                        tracing::warn!(upstream = %self.name, server = %server.authority, error = %e, suppressed, "request not sent");
                    }
                    (ProxyError::from(e), Failure::Other)
                }
                Ok(Err(e)) => match sent.client_error() {
                    // The client broke or abandoned its body: not the origin's fault.
                    Some(client) => {
                        tracing::debug!(upstream = %self.name, server = %server.authority, error = %e, "request body failed on the client side: {client}");
                        return Err(client);
                    }
                    None if e.before_response() => {
                        let marked = failed(server);
                        if let Some(suppressed) = server.failure_line(marked) {
                            let skipped = skipped(marked);
                            tracing::warn!(upstream = %self.name, server = %server.authority, error = %e, suppressed, "upstream connection reset or closed before the response{skipped}");
                        }
                        (ProxyError::UpstreamProtocol, Failure::Reset)
                    }
                    None => {
                        if let Some(suppressed) = server.failure_line(Marked::No) {
                            tracing::warn!(upstream = %self.name, server = %server.authority, error = %e, suppressed, "upstream request failed");
                        }
                        (ProxyError::UpstreamProtocol, Failure::Other)
                    }
                },
                Err(e) => {
                    match e.side() {
                        Side::Downstream => {
                            tracing::debug!(upstream = %self.name, server = %server.authority, "{e} for {:?}", self.header_timeout)
                        }
                        _ => {
                            if let Some(suppressed) = server.failure_line(Marked::No) {
                                tracing::warn!(upstream = %self.name, server = %server.authority, suppressed, "{e} after {:?}", self.header_timeout)
                            }
                        }
                    }
                    let failure = if e == ProxyError::UpstreamHeaderTimeout {
                        Failure::HeaderTimeout
                    } else {
                        Failure::Other
                    };
                    (e, failure)
                }
            };
            if error.side() == Side::Upstream {
                self.count_error(metrics, error.kind());
            }
            exclude = Some(idx);
            if attempt + 1 == attempts {
                return Err(error);
            }
            let body_unsent = bodiless || replay.as_ref().is_some_and(Replay::is_unsent);
            let Some(reason) = self.retry.retryable(failure, kind, body_unsent) else {
                return Err(error);
            };
            // The previous retry is over; this request's attempt still counts as in flight.
            drop(token.take());
            let active = self.servers.iter().map(|s| s.in_flight()).sum();
            let Some(next) = self.retry_budget.try_acquire(active) else {
                tracing::debug!(upstream = %self.name, reason = reason.as_str(), "retry budget spent: not retried");
                metrics.upstream_retries_budget_exhausted.get_or_create(&labels).inc();
                return Err(error);
            };
            if !bodiless {
                // Nothing of the body was read: it goes whole to the next attempt.
                match replay.take().and_then(Replay::take_back) {
                    Some(body) => unsent = Some(body),
                    None => return Err(error),
                }
            }
            token = Some(next);
            metrics
                .upstream_retries
                .get_or_create(&UpstreamRetryLabels {
                    upstream: self.label,
                    reason: reason.as_str(),
                })
                .inc();
            tracing::debug!(upstream = %self.name, server = %server.authority, reason = reason.as_str(), attempt = attempt + 2, "retrying the request");
            drop(in_flight);
            last = error;
        }
        Err(last)
    }

    fn count_error(&self, metrics: &Metrics, kind: &'static str) {
        metrics
            .upstream_errors
            .get_or_create(&UpstreamErrorLabels {
                upstream: self.label,
                kind,
            })
            .inc();
    }
}

/// Whether a forwarded target can go on the HTTP/1.1 wire as it is: origin-form, visible ASCII
/// only (the normalised path and the client's query always are; a route's rewrite is checked
/// here too), so that nothing can split the request head.
fn valid_target(target: &str) -> bool {
    target.starts_with('/') && target.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
}

/// Closes the group's idle connections that outlived `idle_timeout`, until the group is gone.
async fn sweep(pool: std::sync::Weak<OriginPool>, servers: Vec<Arc<UpstreamServer>>) {
    let Some(every) = pool.upgrade().map(|p| p.sweep_interval()) else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match pool.upgrade() {
            Some(pool) => pool.sweep(&servers),
            None => return,
        }
    }
}

/// Copies every current upstream server's requests in flight into `tlsgate_upstream_in_flight`,
/// and whether it is in rotation into `tlsgate_upstream_server_up` (at scrape time; servers no
/// longer configured disappear).
pub fn export_in_flight(gateway: &crate::Gateway) {
    use tlsgate_admin::metrics::{intern, InFlightLabels};
    let (in_flight, up) = (&gateway.metrics.upstream_in_flight, &gateway.metrics.upstream_server_up);
    in_flight.clear();
    up.clear();
    for group in &gateway.current().upstreams {
        let now = group.now_ms();
        for s in &group.servers {
            let labels = InFlightLabels {
                upstream: group.label,
                server: intern(s.authority.as_str()),
            };
            in_flight.get_or_create(&labels).set(s.in_flight() as i64);
            up.get_or_create(&labels).set(i64::from(s.is_up(now)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use tlsgate_config::Balance;

    #[test]
    fn only_origin_form_visible_ascii_targets_go_on_the_wire() {
        for ok in ["/", "/a/b?c=d&e=%20f", "/%2F?x=\"{}\"", "/~user/a.b_c-d"] {
            assert!(valid_target(ok), "{ok}");
        }
        for bad in ["", "a/b", "/a b", "/a\r\nx: y", "/a\tb", "/a#frag", "/caf\u{e9}", "*"] {
            assert!(!valid_target(bad), "{bad:?}");
        }
    }

    fn group(servers: &[&str], balance: Balance) -> UpstreamGroup {
        let text = format!(
            "name = \"g\"\nservers = [{}]\nbalance = \"{}\"\n",
            servers.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(","),
            if balance == Balance::RoundRobin {
                "round_robin"
            } else {
                "least_conn"
            }
        );
        let cfg: UpstreamConfig = toml_cfg(&text);
        UpstreamGroup::new(&cfg, "upstream[0]").unwrap()
    }

    fn toml_cfg(text: &str) -> UpstreamConfig {
        let full = format!("[[upstream]]\n{text}");
        tlsgate_config::parse(&full).unwrap().upstreams.remove(0)
    }

    #[tokio::test]
    async fn round_robin_skips_down_servers() {
        let g = group(&["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], Balance::RoundRobin);
        let picks: Vec<usize> = (0..6).filter_map(|_| g.pick(None)).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        g.servers[1].down_until_ms.store(u64::MAX, Ordering::Relaxed);
        assert!((0..6).map(|_| g.pick(None)).all(|i| i.is_some_and(|i| i != 1)));
    }

    #[tokio::test]
    async fn least_conn_prefers_idle_servers_and_exclude_is_honoured() {
        let g = group(&["127.0.0.1:1", "127.0.0.1:2"], Balance::LeastConn);
        g.servers[0].in_flight.store(5, Ordering::Relaxed);
        assert!((0..4).all(|_| g.pick(None) == Some(1)));
        assert!((0..4).all(|_| g.pick(Some(1)) == Some(0)));
    }

    #[tokio::test]
    async fn all_down_still_picks_someone() {
        let g = group(&["127.0.0.1:1"], Balance::RoundRobin);
        g.servers[0].down_until_ms.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(g.pick(None), Some(0));
        assert_eq!(g.pick(Some(0)), None);
    }

    #[tokio::test]
    async fn servers_come_from_the_address_parser_and_an_empty_group_picks_none() {
        let g = group(&["[::1]:81", "http://localhost", "LOCALHOST:82"], Balance::RoundRobin);
        let authorities: Vec<&str> = g.servers.iter().map(|s| s.authority.as_str()).collect();
        assert_eq!(authorities, ["[::1]:81", "localhost:80", "localhost:82"]);
        // What validation refuses is left out (with an error line), never mis-parsed.
        let g = group(&["::1:80", "https://h", "127.0.0.1:3"], Balance::LeastConn);
        let servers: Vec<(&str, bool)> = g.servers.iter().map(|s| (s.authority.as_str(), s.tls)).collect();
        assert_eq!(servers, [("h:443", true), ("127.0.0.1:3", false)]);
        for balance in [Balance::RoundRobin, Balance::LeastConn] {
            let empty = group(&[], balance);
            assert_eq!(empty.pick(None), None);
            assert_eq!(empty.pick(Some(0)), None);
        }
    }
}

//! Per-request handling on a TLS connection: route, answer or forward, log, count.

use crate::body::ClientBody;
use crate::body::{full, Body};
use crate::context::{ConnContext, InEarlyData};
use crate::downstream::io::Activity;
use crate::error::ProxyError;
use crate::facts::UpstreamFacts;
use crate::gateway::Generation;
use crate::identity::IdentityHop;
use crate::interim::{InterimSink, InterimTo};
use crate::request::access_log::{AccessBody, RequestLog};
use crate::request::check as request_check;
use crate::request::router::Action;
use crate::upstream::forwarding::Hop;
use crate::upstream::tunnel::Upgrade;
use crate::upstream::{Downstream, FromOrigin, UpgradeRequest};
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Keeps an HTTP/2 stream's tunnel counted as a request in flight, so the connection's idle
/// timeout leaves it alone while it runs (the tunnel has its own idle timeout).
struct TunnelHold(Arc<Activity>);

impl TunnelHold {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.request_started();
        Self(activity.clone())
    }
}

impl Drop for TunnelHold {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A short plain-text error response.
pub fn error_response(status: StatusCode, text: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(full(Bytes::from_static(text.as_bytes())))
        .expect("static response parts are valid")
}

/// How long a GET or HEAD read from early data may keep its stream's end waiting.
const EARLY_END_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether a request read from early data is one of those served from it. RFC 8470: early data
/// is replayable, so only requests that are safe to repeat (GET or HEAD without a body) are; the
/// rest get 425 Too Early and the client retries after the handshake.
enum EarlySafety {
    Safe,
    Unsafe,
    /// A GET or HEAD of HTTP/2 or HTTP/3 whose stream has not ended yet and says no length: the
    /// stream's end may come in a later frame or packet than its head (quic-go, for one, sends
    /// them apart when its writer runs between the two), and it decides.
    EndPending,
}

fn early_safety(req: &Request<ClientBody>) -> EarlySafety {
    use hyper::body::Body as _;
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return EarlySafety::Unsafe;
    }
    match req.headers().get(header::CONTENT_LENGTH) {
        _ if req.body().is_end_stream() => EarlySafety::Safe,
        Some(v) if v.as_bytes() == b"0" => EarlySafety::Safe,
        Some(_) => EarlySafety::Unsafe,
        None => EarlySafety::EndPending,
    }
}

/// Reads the rest of a bodiless-looking request's stream, for at most [`EARLY_END_WAIT`]: true
/// when it ends with no content (the request is then safe in early data, and its body is read
/// to its end), false when content arrives, the stream breaks or the end does not come.
async fn ends_without_content(body: &mut ClientBody) -> bool {
    use http_body_util::BodyExt as _;
    let read = async {
        loop {
            match body.frame().await {
                None => return true,
                Some(Ok(frame)) if frame.data_ref().is_some_and(|d| d.is_empty()) => {}
                Some(_) => return false,
            }
        }
    };
    tokio::time::timeout(EARLY_END_WAIT, read).await.unwrap_or(false)
}

/// Turns a response the gateway made itself into its HEAD form: the same headers, with the
/// length of the body that a GET would get, and no body (hyper's HTTP/2 server would otherwise
/// send it as DATA frames after HEADERS, which clients treat as a protocol error).
fn head_response(response: &mut Response<Body>) {
    use http_body::Body as _;
    if let Some(n) = response.body().size_hint().exact() {
        response.headers_mut().insert(header::CONTENT_LENGTH, n.into());
    }
    *response.body_mut() = full(bytes::Bytes::new());
}

/// Checks, routes and answers or forwards one request. `slot` still holds the request afterwards
/// when the gateway answered it itself (its body is then discarded by the caller).
async fn route_request(
    ctx: &ConnContext,
    generation: &Generation,
    site_idx: usize,
    slot: &mut Option<Request<ClientBody>>,
    upstream: &mut UpstreamFacts,
    stream_interim: Option<InterimTo<'_>>,
) -> Result<Response<Body>, ProxyError> {
    let Some(req) = slot.as_ref() else {
        return Err(ProxyError::BadRequest("no request"));
    };
    if let Some(retry_after) = ctx.tls.answer_429 {
        // The source is over its full-handshake budget (`resume_then_429`): the cheapest answer.
        let mut too_many = error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "429 Too Many Requests: this address opened too many new TLS connections; retry later\n",
        );
        too_many.headers_mut().insert(header::RETRY_AFTER, retry_after.into());
        return Ok(too_many);
    }
    let target = request_check::inspect(req)?;
    let host = target.host.as_deref();
    // A Host that names another site than the one the handshake selected (RFC 9110 §15.5.20).
    if let Some(h) = host {
        if generation.tls.site_named(h).is_some_and(|i| i != site_idx) {
            return Err(ProxyError::Misdirected);
        }
    }
    let site = &generation.sites[site_idx];
    let Some(route) = site.router_for(ctx.tls.ja4.as_deref()).route(host, &target.path) else {
        return Ok(error_response(StatusCode::NOT_FOUND, "404 Not Found: no route\n"));
    };
    let limited = match ctx
        .gateway
        .rate_limits
        .check(ctx.peer.ip(), ctx.tls.ja4.as_deref(), req, &route.rate_limit)
    {
        Ok(allowed) => allowed,
        Err(too_many) => return Ok(too_many),
    };
    // What forwarding needs from the request line, before the request itself is taken.
    let forward = match &route.action {
        Action::Upstream(_) => {
            let forward_path = route.forward_path(&target.path);
            let path_and_query = match target.query {
                Some(q) => format!("{forward_path}?{q}"),
                None => forward_path.into_owned(),
            };
            Some((path_and_query, target.authority))
        }
        Action::Fixed(_) => None,
    };
    let mut response = match &route.action {
        Action::Fixed(f) => Response::builder()
            .status(f.status)
            .header(header::CONTENT_TYPE, f.content_type.clone())
            .body(full(f.body.clone()))
            .expect("fixed response parts are valid"),
        Action::Upstream(i) => {
            // The request stays in `slot` until the forwarding takes it apart: every move of it
            // on the way (into each future that awaits the next) was a copy of ~250 bytes.
            let (Some(req), Some((path_and_query, authority))) = (slot.as_mut(), forward) else {
                return Err(ProxyError::BadRequest("no request"));
            };
            let upgrade = Upgrade::wanted(req).map(|upgrade| UpgradeRequest {
                upgrade,
                slot: &ctx.tunnels,
                hold: Box::new(TunnelHold::new(&ctx.activity)),
            });
            // One of the connection's origin slots, held until the response has been sent: a
            // client cannot pin more origin connections than that however many streams it opens.
            upstream.slot = ctx.upstream_slots.clone().acquire_owned().await.ok();
            let group = generation.upstreams[*i].clone();
            let trusted = generation
                .config
                .server
                .trusted_proxies
                .iter()
                .any(|c| c.contains(ctx.peer.ip()));
            let down = Downstream {
                hop: Hop {
                    client_ip: ctx.peer.ip(),
                    trusted,
                    authority: authority.as_ref(),
                    client_cert: site.client_cert.as_ref().map(|names| IdentityHop {
                        names,
                        identity: ctx.client_identity.as_deref(),
                    }),
                    cache: Some(&ctx.forward_cache),
                },
                path_and_query: &path_and_query,
                edits: &route.request_edits,
                client_conn: crate::upstream::connect::ProxyPair {
                    source: ctx.peer,
                    destination: ctx.local,
                },
                interim: Some(InterimSink {
                    to: match (&ctx.interim, stream_interim) {
                        (_, Some(stream)) => Ok(stream),
                        (None, None) => Err("dropped_unsupported"),
                        (Some(_), None) if req.version() != http::Version::HTTP_11 => Err("dropped_http10"),
                        (Some(queue), None) => Ok(InterimTo::Http1(queue.as_ref())),
                    },
                    count: &ctx.gateway.metrics.early_hints,
                }),
            };
            // The forwarding state is boxed inside (`UpstreamGroup::forward`).
            group
                .forward(slot, &down, &ctx.gateway.metrics, upstream, upgrade)
                .await
        }
    };
    route.response_edits.apply(response.headers_mut());
    limited.apply(response.headers_mut());
    Ok(response)
}

/// Handles one request; `stream_interim` is an HTTP/2 stream's own way to send 103s (its
/// response handle), when the request came on one. TCP clients' responses advertise HTTP/3
/// (`Alt-Svc`, when configured); an HTTP/1.1 request that starts while the gateway drains is
/// answered with `Connection: close`, so that a keep-alive client learns that the connection
/// ends instead of finding its next request refused (`drive::DRAIN_GRACE`).
/// Logged and counted when the response's last byte is sent or, when the client goes away
/// first, when the response or this future is dropped ([`RequestLog`]).
pub async fn handle(
    ctx: Arc<ConnContext>,
    mut req: Request<ClientBody>,
    stream_interim: Option<InterimTo<'_>>,
) -> Result<Response<AccessBody>, Infallible> {
    let current = ctx.gateway.current();
    let mut log = RequestLog::new(&ctx, &req, &current.config.log);
    let close = ctx.protocol == "h1" && ctx.gateway.draining();
    // The client's own close (HTTP/1.1 `Connection: close`, HTTP/1.0 without keep-alive).
    let closes_after = ctx.protocol == "h1" && !tlsgate_h1::connection_persists(req.version(), req.headers());
    if ctx.in_early_data() || req.extensions().get::<InEarlyData>().is_some() {
        let stats = &ctx.gateway.sessions.early_data.stats;
        let safe = match early_safety(&req) {
            EarlySafety::Safe => true,
            EarlySafety::Unsafe => false,
            // Rare (boxed: the request's future keeps no room for it).
            EarlySafety::EndPending => Box::pin(ends_without_content(req.body_mut())).await,
        };
        if !safe {
            stats.requests_too_early.fetch_add(1, Ordering::Relaxed);
            return Ok(log.respond(error_response(
                StatusCode::from_u16(425).expect("valid status"),
                "425 Too Early: repeat this request after the TLS handshake\n",
            )));
        }
        stats.requests_served.fetch_add(1, Ordering::Relaxed);
        req.headers_mut()
            .insert("early-data", http::HeaderValue::from_static("1"));
    }
    let (generation, site_idx) = match current.site_index(&ctx.site) {
        Some(i) => (current, i),
        None => (
            ctx.accepted_with.clone(),
            ctx.accepted_with.site_index(&ctx.site).unwrap_or(0),
        ),
    };
    generation.forward_ja4(ctx.tls.ja4.as_deref(), req.headers_mut());
    let method = req.method().clone();
    let site = &generation.sites[site_idx];
    let mut slot = Some(req);
    let routed = route_request(&ctx, &generation, site_idx, &mut slot, log.upstream(), stream_interim).await;
    if let Some(unforwarded) = slot {
        // So HTTP/2 sees the response after the request's END_STREAM (h2spec §5.1, §8.1).
        crate::body::discard(unforwarded.into_body()).await;
    }
    let mut response = match routed {
        Ok(r) => r,
        Err(e) => e.response(),
    };
    if method == http::Method::HEAD && response.extensions().get::<FromOrigin>().is_none() {
        head_response(&mut response);
    }
    if let Some(hsts) = &site.hsts {
        response
            .headers_mut()
            .insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    if ctx.protocol != "h3" {
        crate::downstream::quic::alt_svc::advertise(&generation, ctx.local, &mut response);
    }
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        if close {
            response
                .headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        }
        if close || closes_after {
            log.last_on_connection();
        }
    }
    Ok(log.respond(response))
}

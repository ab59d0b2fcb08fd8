//! The access log and the per-request counters, written once per request when its last byte has
//! been handed to the client connection, not when its response header is ready.
//!
//! [`RequestLog`] is created at the start of `service::handle` and is a drop guard: a request
//! whose future is dropped before it produced a response (the client reset its HTTP/2 stream or
//! closed the connection) is still logged and counted, as 499 (nginx's "client closed request").
//! [`RequestLog::respond`] moves it into the response body ([`AccessBody`]), which writes the line
//! when the body ends, with the total time to the last byte and the bytes sent. A body that ends
//! early tells its cause apart: the origin's body failed (`outcome="upstream_aborted"`, logged
//! with the status that was sent) or the client connection dropped the body before its end
//! (`outcome="client_abandoned"`). Both are counted in `tlsgate_requests_incomplete_total`.
//!
//! The connection's TLS facts ([`TlsFacts`]) are read once per connection into `ConnContext`;
//! a request copies nothing of them. Lines go to tracing target `access`, which the binary routes
//! to the access-log writer (its own file or stderr, never blocking a worker on disk).

use crate::body::{Body, BoxError};
use crate::context::ConnContext;
use crate::error::ProxyError;
pub use crate::facts::{millis, TlsFacts, UpstreamFacts};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body::{Body as _, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tlsgate_admin::metrics::{IncompleteLabels, RequestLabels};

/// The tracing target of access-log lines.
pub const TARGET: &str = "access";

/// The status logged and counted for a request the client gave up before it was answered.
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The whole response was handed to the client connection.
    Complete,
    /// The client went away first (before the response, or during its body).
    ClientAbandoned,
    /// The origin's response body failed part-way (reset, truncated).
    UpstreamAborted,
}

impl Outcome {
    /// The `outcome` field of the log line.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "ok",
            Outcome::ClientAbandoned => "client_abandoned",
            Outcome::UpstreamAborted => "upstream_aborted",
        }
    }

    /// The `reason` label of `tlsgate_requests_incomplete_total`, for incomplete requests.
    fn incomplete_reason(self) -> Option<&'static str> {
        match self {
            Outcome::Complete => None,
            o => Some(o.as_str()),
        }
    }
}

/// What only the log line needs from the request, taken when the access log is on.
struct LineFields {
    uri: Uri,
    host: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
    /// `log.access_log_ja4`.
    ja4: bool,
}

/// One request's record: logged and counted exactly once, when the response body ends or when
/// the record is dropped (see the module documentation).
pub struct RequestLog {
    ctx: Arc<ConnContext>,
    started: Instant,
    method: Method,
    /// `None` with the access log off (the configuration when the request arrived): nothing of
    /// the request is copied for a line that is not written. Boxed: in place its ~170 bytes
    /// were moved with every response (`Response<AccessBody>`) whether the log was on or not.
    line: Option<Box<LineFields>>,
    status: Option<StatusCode>,
    upstream: UpstreamFacts,
    bytes_out: u64,
    done: bool,
    /// The connection closes after this response (HTTP/1.1): its end is held for the close.
    last_on_connection: bool,
}

// A response carries its record through every layer it is returned through.
const _: () = assert!(std::mem::size_of::<RequestLog>() <= 160);

impl RequestLog {
    /// Starts the record of `req` (call first thing: its time is the request's start), with a
    /// log line when `log` (the configuration's `[log]`) has the access log on.
    pub fn new<B>(ctx: &Arc<ConnContext>, req: &Request<B>, log: &tlsgate_config::LogConfig) -> Self {
        // In flight until finished: the connection's idle timeout does not run meanwhile.
        ctx.activity.request_started();
        Self {
            ctx: ctx.clone(),
            started: Instant::now(),
            method: req.method().clone(),
            line: log.access_log.then(|| {
                Box::new(LineFields {
                    uri: req.uri().clone(),
                    host: req.headers().get(header::HOST).cloned(),
                    user_agent: req.headers().get(header::USER_AGENT).cloned(),
                    ja4: log.access_log_ja4,
                })
            }),
            status: None,
            upstream: UpstreamFacts::default(),
            bytes_out: 0,
            done: false,
            last_on_connection: false,
        }
    }

    /// Where `UpstreamGroup::forward` reports the origin, its time and the upload.
    pub fn upstream(&mut self) -> &mut UpstreamFacts {
        &mut self.upstream
    }

    /// The connection closes after this response: when its body ends, the connection's stream
    /// holds the rest for the close (`downstream::io`).
    pub fn last_on_connection(&mut self) {
        self.last_on_connection = true;
    }

    /// Hands the record to the response: it is written when the body ends. A response the
    /// gateway made because the client abandoned its upload is logged at once (nobody reads it).
    pub fn respond(mut self, response: Response<Body>) -> Response<AccessBody> {
        self.status = Some(response.status());
        if response.extensions().get::<ProxyError>() == Some(&ProxyError::ClientAbandoned) {
            self.finish(Outcome::ClientAbandoned);
            return response.map(|inner| AccessBody::new(inner, None));
        }
        let (parts, inner) = response.into_parts();
        Response::from_parts(parts, AccessBody::new(inner, Some(self)))
    }

    /// Whether the client expects body bytes after the header (hyper sends none and drops the
    /// body unread for HEAD, 1xx, 204 and 304).
    fn expects_body(&self) -> bool {
        let status = self.status.map_or(0, |s| s.as_u16());
        self.method != Method::HEAD && !(100..200).contains(&status) && status != 204 && status != 304
    }

    fn finish(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        // The request no longer counts as in flight, and its origin slot is given back.
        self.ctx.activity.request_finished();
        if self.last_on_connection && outcome == Outcome::Complete {
            self.ctx.activity.last_response_ended();
        }
        self.upstream.slot = None;
        let ctx = &*self.ctx;
        let status = self.status.map_or(CLIENT_CLOSED_REQUEST, |s| s.as_u16());
        let metrics = &ctx.gateway.metrics;
        let labels = || RequestLabels {
            site: ctx.site_label,
            status,
            protocol: ctx.protocol,
        };
        if status == 200 {
            // The connection's own handle on its most common series: no label hashing per request.
            ctx.ok_requests
                .get_or_init(|| metrics.requests.get_or_create(&labels()).clone())
                .inc();
        } else {
            metrics.requests.get_or_create(&labels()).inc();
        }
        if let Some(reason) = outcome.incomplete_reason() {
            metrics
                .requests_incomplete
                .get_or_create(&IncompleteLabels {
                    site: ctx.site_label,
                    reason,
                })
                .inc();
        }
        let Some(line) = &self.line else {
            return;
        };
        let tls = &ctx.tls;
        // Only with `log.access_log_ja4` (the fingerprint may be computed for another feature).
        let ja4 = tls.ja4.as_deref().filter(|_| line.ja4);
        let up = &self.upstream;
        fn text(v: &Option<HeaderValue>) -> Option<&str> {
            v.as_ref().and_then(|v| v.to_str().ok())
        }
        let host = text(&line.host).or_else(|| line.uri.authority().map(|a| a.as_str()));
        tracing::info!(
            target: TARGET,
            client = %ctx.peer,
            site = ctx.site_label,
            proto = ctx.protocol,
            sni = %tls.sni.as_deref().unwrap_or("-"),
            tls_version = tls.version,
            cipher = tls.cipher,
            resumption = tls.resumption,
            handshake_ms = tls.handshake_ms,
            client_cert = %tls.client_subject.as_deref().unwrap_or("-"),
            ja4,
            ech = tls.ech,
            method = %self.method,
            host = %host.unwrap_or("-"),
            path = %line.uri.path_and_query().map_or("/", |p| p.as_str()),
            user_agent = text(&line.user_agent).unwrap_or("-"),
            status,
            outcome = outcome.as_str(),
            bytes_in = up.upload.as_ref().map_or(0, |u| u.bytes()),
            bytes_out = self.bytes_out,
            upstream = up.group.unwrap_or("-"),
            upstream_addr = %up.server.as_ref().map_or("-", |a| a.as_str()),
            upstream_ms = up.header_time.map(millis),
            ms = millis(self.started.elapsed()),
        );
    }
}

impl Drop for RequestLog {
    /// Never handed a response, or its body dropped before the end: the client went away.
    fn drop(&mut self) {
        self.finish(Outcome::ClientAbandoned);
    }
}

/// A response body that writes its request's access-log line when it ends (see the module
/// documentation) and counts the body bytes sent.
pub struct AccessBody {
    inner: Body,
    log: Option<RequestLog>,
    /// True from handing data to the HTTP layer until it asks for more (then the log is there,
    /// and through it the connection's activity, which the send timeout reads).
    handed_data: bool,
}

impl AccessBody {
    /// A response body with something to send waits for the client from the start: an HTTP/2
    /// client whose flow-control window is closed is never asked to take the first byte.
    fn new(inner: Body, log: Option<RequestLog>) -> Self {
        let handed_data = match &log {
            Some(log) if !inner.is_end_stream() => {
                log.ctx.activity.body_handed_data();
                true
            }
            _ => false,
        };
        Self {
            inner,
            log,
            handed_data,
        }
    }

    /// The body was asked for more, or dropped: what it handed over was taken.
    fn taken(&mut self) {
        if std::mem::take(&mut self.handed_data) {
            if let Some(log) = &self.log {
                log.ctx.activity.body_taken();
            }
        }
    }

    fn end(&mut self, outcome: Outcome) {
        if let Some(mut log) = self.log.take() {
            log.finish(outcome);
        }
    }
}

impl http_body::Body for AccessBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        this.taken();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(log), Some(data)) = (this.log.as_mut(), frame.data_ref()) {
                    log.bytes_out += data.len() as u64;
                }
                // hyper stops polling a body that says it is complete.
                if this.inner.is_end_stream() {
                    this.end(Outcome::Complete);
                } else if let Some(log) = &this.log {
                    this.handed_data = true;
                    log.ctx.activity.body_handed_data();
                }
            }
            Poll::Ready(Some(Err(_))) => this.end(Outcome::UpstreamAborted),
            Poll::Ready(None) => this.end(Outcome::Complete),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for AccessBody {
    fn drop(&mut self) {
        self.taken();
        let complete = self.inner.is_end_stream() || self.log.as_ref().is_some_and(|l| !l.expects_body());
        self.end(if complete {
            Outcome::Complete
        } else {
            Outcome::ClientAbandoned
        });
    }
}

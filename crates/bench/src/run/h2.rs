//! `--h2`: HTTP/2 over the bench's TLS connections (ALPN h2) with hyper's client. Keep-alive mode
//! runs `-m` streams per connection, each stream a sender with its own `--rate` schedule;
//! `--new-conn` opens a new TLS connection for every request (connection preface, SETTINGS, one
//! stream, GOAWAY and close), the HTTP/2 counterpart of `Connection: close`.

use super::{count_error, open, pace, record_outcome, Conn, Pacer, Response, Shared};
use crate::report::{ErrorKind, Stats};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;
use tokio::time::timeout;

type Driver = JoinHandle<Result<(), hyper::Error>>;

/// One HTTP/2 connection slot: connects (again after a failure) and runs `-m` streams on it.
pub(super) async fn connection(sh: Arc<Shared>, st: Rc<RefCell<Stats>>, index: usize) {
    let m = sh.plan.streams;
    let senders = sh.plan.connections * m;
    let mut pacers: Vec<Option<Pacer>> = (0..m).map(|j| Pacer::new(&sh, index * m + j, senders)).collect();
    loop {
        if sh.over() {
            return;
        }
        let Some((send, driver)) = connect(&sh, &st).await else {
            // A failed attempt uses up one operation, so `-n` ends even when every one fails.
            sh.claim();
            continue;
        };
        let streams: Vec<_> = pacers
            .drain(..)
            .map(|p| tokio::task::spawn_local(stream(sh.clone(), st.clone(), send.clone(), p)))
            .collect();
        drop(send);
        for s in streams {
            if let Ok(p) = s.await {
                pacers.push(p);
            }
        }
        driver.abort();
        if pacers.len() < m {
            return;
        }
    }
}

/// `--h2 --new-conn`: every request on a connection of its own; the request's latency counts
/// from before the TCP connect (or from its intended start under `--rate`), as in HTTP/1.1
/// `--new-conn`.
pub(super) async fn new_conn(sh: Arc<Shared>, st: Rc<RefCell<Stats>>, index: usize) {
    let mut pacer = Pacer::new(&sh, index, sh.plan.connections);
    let Some(req) = Template::new(&sh, &st) else {
        return;
    };
    loop {
        let due = pace(&mut pacer).await;
        if !sh.claim() {
            return;
        }
        let started = due.unwrap_or_else(Instant::now);
        let Some((mut send, driver)) = connect(&sh, &st).await else {
            continue;
        };
        let done = request(&sh, &st, &mut send, &req, started).await;
        // Dropping the last sender lets hyper end the connection (GOAWAY, close_notify, FIN);
        // wait for that so connections do not pile up half-closed, but not past the timeout.
        drop(send);
        if done {
            let _ = timeout(sh.plan.opts.timeout, driver).await;
        } else {
            driver.abort();
        }
    }
}

/// A connection with the HTTP/2 preface sent: TLS from [`open`] (which checked that h2 was
/// selected), then hyper's handshake; its driver runs as a local task. `None` on failure
/// (counted).
async fn connect(sh: &Shared, st: &RefCell<Stats>) -> Option<(SendRequest<Full<Bytes>>, Driver)> {
    let Conn { tls, .. } = open(sh, st).await?;
    let io = hyper_util::rt::TokioIo::new(tls);
    let handshake = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .max_concurrent_reset_streams(0)
        .handshake::<_, Full<Bytes>>(io);
    match timeout(sh.plan.opts.timeout, handshake).await {
        Ok(Ok((send, driver))) => Some((send, tokio::task::spawn_local(driver))),
        Ok(Err(e)) => {
            st.borrow_mut().error_with(ErrorKind::Http, &e);
            count_error(sh);
            None
        }
        Err(_) => {
            st.borrow_mut().error(ErrorKind::Timeout);
            count_error(sh);
            None
        }
    }
}

/// What every request of the run shares, checked once.
struct Template {
    method: hyper::Method,
    uri: hyper::Uri,
    headers: hyper::HeaderMap,
    body: Bytes,
}

impl Template {
    /// The run's request; `None` when hyper refuses it (recorded as an error: no request of the
    /// run could be sent).
    fn new(sh: &Shared, st: &RefCell<Stats>) -> Option<Self> {
        let built = (|| -> Result<Self, hyper::http::Error> {
            let mut headers = hyper::HeaderMap::new();
            for (name, value) in &sh.plan.headers {
                if !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("connection") {
                    headers.append(
                        hyper::header::HeaderName::from_bytes(name.as_bytes())?,
                        hyper::header::HeaderValue::from_str(value)?,
                    );
                }
            }
            Ok(Self {
                method: hyper::Method::from_bytes(sh.plan.method.as_bytes())?,
                uri: format!("https://{}{}", sh.plan.host_header, sh.plan.path).parse()?,
                headers,
                body: Bytes::from(sh.plan.body.clone()),
            })
        })();
        built
            .map_err(|e| {
                st.borrow_mut().error_with(ErrorKind::Http, &e);
                count_error(sh);
            })
            .ok()
    }

    fn request(&self) -> hyper::Request<Full<Bytes>> {
        let mut req = hyper::Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Requests one after the other on one stream slot until the run ends (returns the pacer so a
/// new connection continues the same schedule) or the connection fails.
async fn stream(
    sh: Arc<Shared>,
    st: Rc<RefCell<Stats>>,
    mut send: SendRequest<Full<Bytes>>,
    mut pacer: Option<Pacer>,
) -> Option<Pacer> {
    let req = Template::new(&sh, &st)?;
    loop {
        let due = pace(&mut pacer).await;
        if !sh.claim() {
            return pacer;
        }
        let t0 = due.unwrap_or_else(Instant::now);
        if !request(&sh, &st, &mut send, &req, t0).await {
            return pacer;
        }
    }
}

/// One request and its whole response, recorded with latencies from `t0`; false on failure
/// (counted; the connection is unusable).
async fn request(
    sh: &Shared,
    st: &RefCell<Stats>,
    send: &mut SendRequest<Full<Bytes>>,
    template: &Template,
    t0: Instant,
) -> bool {
    let req = template.request();
    let exchange = async {
        send.ready().await.map_err(|e| (ErrorKind::Write, e.to_string()))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| (ErrorKind::Read, e.to_string()))?;
        let first_byte = Instant::now();
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| (ErrorKind::Read, e.to_string()))?;
        Ok(Response {
            first_byte,
            status,
            len: body.to_bytes().len(),
        })
    };
    record_outcome(sh, st, t0, timeout(sh.plan.opts.timeout, exchange).await)
}

//! `--h2`: HTTP/2 over the bench's TLS connections (ALPN h2) with hyper's client, `-m` streams
//! per connection, each stream a sender with its own `--rate` schedule.

use super::{count_error, open, pace, Pacer, Shared};
use crate::report::{ErrorKind, Stats};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::time::timeout;

/// One HTTP/2 connection slot: connects (again after a failure) and runs `-m` streams on it.
pub(super) async fn connection(sh: Arc<Shared>, st: Rc<RefCell<Stats>>, index: usize) {
    let m = sh.plan.streams;
    let senders = sh.plan.connections * m;
    let mut pacers: Vec<Option<Pacer>> = (0..m).map(|j| Pacer::new(&sh, index * m + j, senders)).collect();
    loop {
        if sh.over() {
            return;
        }
        let Some(conn) = open(&sh, &st).await else {
            sh.claim();
            continue;
        };
        if conn.tls.ssl().selected_alpn_protocol() != Some(b"h2") {
            st.borrow_mut()
                .error_with(ErrorKind::Http, &"the server did not select h2 by ALPN");
            count_error(&sh);
            sh.claim();
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let io = hyper_util::rt::TokioIo::new(conn.tls);
        let handshake = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .max_concurrent_reset_streams(0)
            .handshake::<_, Full<Bytes>>(io);
        let (send, driver) = match timeout(sh.plan.timeout, handshake).await {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                st.borrow_mut().error_with(ErrorKind::Http, &e);
                count_error(&sh);
                sh.claim();
                continue;
            }
            Err(_) => {
                st.borrow_mut().error(ErrorKind::Timeout);
                count_error(&sh);
                sh.claim();
                continue;
            }
        };
        let driver = tokio::task::spawn_local(driver);
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

/// Requests one after the other on one stream slot until the run ends (returns the pacer so a
/// new connection continues the same schedule) or the connection fails.
async fn stream(
    sh: Arc<Shared>,
    st: Rc<RefCell<Stats>>,
    mut send: SendRequest<Full<Bytes>>,
    mut pacer: Option<Pacer>,
) -> Option<Pacer> {
    let uri = format!("https://{}{}", sh.plan.host_header, sh.plan.path);
    let body = Bytes::from(sh.plan.body.clone());
    loop {
        let due = pace(&mut pacer).await;
        if !sh.claim() {
            return pacer;
        }
        let t0 = due.unwrap_or_else(Instant::now);
        let mut req = hyper::Request::builder().method(sh.plan.method.as_str()).uri(&uri);
        for (name, value) in &sh.plan.headers {
            if !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("connection") {
                req = req.header(name.as_str(), value.as_str());
            }
        }
        let req = match req.body(Full::new(body.clone())) {
            Ok(r) => r,
            Err(e) => {
                st.borrow_mut().error_with(ErrorKind::Http, &e);
                return None;
            }
        };
        let exchange = async {
            send.ready().await.map_err(|e| (ErrorKind::Write, e.to_string()))?;
            let resp = send
                .send_request(req)
                .await
                .map_err(|e| (ErrorKind::Read, e.to_string()))?;
            let first = Instant::now();
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| (ErrorKind::Read, e.to_string()))?;
            Ok::<_, (ErrorKind, String)>((first, status, body.to_bytes().len()))
        };
        match timeout(sh.plan.timeout, exchange).await {
            Ok(Ok((first, status, len))) => {
                let mut s = st.borrow_mut();
                s.record_ttfb(first - t0);
                s.record_request(t0.elapsed(), status, len);
                if let Some(p) = &sh.progress {
                    p.requests.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(Err((kind, message))) => {
                st.borrow_mut().error_with(kind, &message);
                count_error(&sh);
                return pacer;
            }
            Err(_) => {
                st.borrow_mut().error(ErrorKind::Timeout);
                count_error(&sh);
                return pacer;
            }
        }
    }
}

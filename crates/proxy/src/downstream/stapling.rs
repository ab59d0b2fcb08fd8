//! OCSP stapling, the moving part: one refresher task per stapled certificate fetches its
//! response over HTTP (RFC 6960 A.1, POST), has tlsgate-tls check it and swaps it into the
//! certificate's [`StapleSlot`], from where every handshake that asks for status reads it.
//!
//! - Refresh: halfway between the response's thisUpdate and nextUpdate, or every `ocsp_refresh`
//!   if that is sooner.
//! - Failure (responder down, HTTP error, invalid response): the last good response is kept
//!   until it expires, then nothing is stapled; retries back off from 1 s to 5 min (at most
//!   `ocsp_refresh`). One warning when a failure streak starts, one info line when it ends.
//! - `revoked`: the staple is dropped at once.
//! - `ocsp_file` staples are read when the configuration is built (start, reload); their task
//!   only drops them when they expire.
//!
//! [`run`] supervises the tasks for the running configuration generation (spawned by
//! `tlsgate serve`'s control loop); [`export_metrics`] copies the per-certificate state into the
//! metrics at scrape time.

use crate::gateway::Gateway;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tlsgate_admin::metrics::{intern, OcspFetchLabels, OcspLabels};
use tlsgate_admin::Metrics;
use tlsgate_tls::ocsp::{format_time, StapleSlot, StapleSource};

/// Longest wait for a responder (connect, request, response).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait between retries while a responder fails.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Largest response accepted from a responder.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Keeps one refresher task running per stapled certificate of the current configuration;
/// returns only if the runtime stops. A reload that keeps a certificate and its OCSP settings
/// keeps its task (and staple); changed or removed certificates get their task stopped.
pub async fn run(gateway: Arc<Gateway>) {
    let metrics = gateway.metrics.clone();
    super::slot_tasks::supervise(
        gateway,
        |generation| generation.tls.staple_slots(),
        |gateway, live| gateway.sessions.staples.retain(live),
        move |slot| refresh(slot, metrics.clone()),
    )
    .await;
}

/// Copies each stapled certificate's state into the metrics (call before a scrape).
pub fn export_metrics(gateway: &Gateway) {
    let now = SystemTime::now();
    let (not_after, chain_bytes) = (
        &gateway.metrics.certificate_not_after,
        &gateway.metrics.certificate_chain_bytes,
    );
    not_after.clear();
    chain_bytes.clear();
    for (site, key_type, expires, bytes) in gateway.current().tls.certificates() {
        let labels = OcspLabels {
            site: intern(site),
            cert: key_type.as_str(),
        };
        not_after.get_or_create(&labels).set(expires);
        chain_bytes
            .get_or_create(&labels)
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
    let m = &gateway.metrics.ocsp;
    // Certificates removed by a reload disappear from the gauges.
    m.present.clear();
    m.age.clear();
    for slot in gateway.current().tls.staple_slots() {
        let labels = OcspLabels {
            site: intern(&slot.site),
            cert: slot.cert,
        };
        let fresh = slot.current().filter(|s| s.is_fresh(now));
        m.present.get_or_create(&labels).set(i64::from(fresh.is_some()));
        if let Some(staple) = fresh {
            let age = i64::try_from(staple.age(now).as_secs()).unwrap_or(i64::MAX);
            m.age.get_or_create(&labels).set(age);
        }
        let stapled = slot.take_stapled();
        if stapled > 0 {
            m.stapled_handshakes.get_or_create(&labels).inc_by(stapled);
        }
    }
}

/// A failed fetch: the metric outcome and a message.
#[derive(Debug)]
struct Failure {
    outcome: &'static str,
    message: String,
}

fn unreachable(message: impl std::fmt::Display) -> Failure {
    Failure {
        outcome: "unreachable",
        message: message.to_string(),
    }
}

fn http_error(message: impl std::fmt::Display) -> Failure {
    Failure {
        outcome: "http_error",
        message: message.to_string(),
    }
}

/// Delay before retry number `failures` (1, 2, 4, ... s), at most `ocsp_refresh` and 5 min.
fn backoff(failures: u32, refresh: Option<Duration>) -> Duration {
    let cap = refresh.map_or(MAX_BACKOFF, |r| r.clamp(Duration::from_secs(1), MAX_BACKOFF));
    Duration::from_secs(1u64 << failures.clamp(1, 10).saturating_sub(1)).min(cap)
}

async fn refresh(slot: Arc<StapleSlot>, metrics: Arc<Metrics>) {
    match slot.source.clone() {
        StapleSource::File(path) => watch_file_staple(&slot, &path).await,
        StapleSource::Responder(url) => fetch_loop(&slot, &url, &metrics).await,
    }
}

/// An `ocsp_file` staple: dropped (with one warning) when it expires; reloads re-read the file.
async fn watch_file_staple(slot: &StapleSlot, path: &std::path::Path) {
    loop {
        let now = SystemTime::now();
        if slot.drop_expired(now) {
            tracing::warn!(
                site = %slot.site,
                field = %slot.field,
                file = %path.display(),
                "{}.ocsp_file: the OCSP response has expired; no longer stapling it (write a fresh one and reload)",
                slot.field
            );
        }
        let wait = slot.current().map_or(Duration::from_secs(60), |s| {
            s.expires
                .duration_since(now)
                .unwrap_or_default()
                .min(Duration::from_secs(60))
        });
        tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
    }
}

async fn fetch_loop(slot: &StapleSlot, url: &str, metrics: &Metrics) {
    let request = match slot.target.request() {
        Ok(r) => Bytes::from(r),
        Err(e) => {
            tracing::warn!(site = %slot.site, field = %slot.field, "cannot build the OCSP request: {e}; not stapling");
            return;
        }
    };
    let site = intern(&slot.site);
    let mut failures: u32 = 0;
    let mut first = true;
    loop {
        let result = match tokio::time::timeout(FETCH_TIMEOUT, post(url, request.clone())).await {
            Ok(Ok(der)) => slot.accept(&der, SystemTime::now()).map_err(|r| Failure {
                outcome: r.outcome(),
                message: r.to_string(),
            }),
            Ok(Err(failure)) => Err(failure),
            Err(_) => Err(unreachable(format!("no answer within {FETCH_TIMEOUT:?}"))),
        };
        let outcome = result.as_ref().map_or_else(|f| f.outcome, |()| "ok");
        metrics
            .ocsp
            .fetches
            .get_or_create(&OcspFetchLabels {
                site,
                cert: slot.cert,
                outcome,
            })
            .inc();
        let wait = match result {
            Ok(()) => {
                let staple = slot.current();
                let expires = staple.as_ref().map_or_else(String::new, |s| format_time(s.expires));
                if failures > 0 {
                    tracing::info!(site = %slot.site, field = %slot.field, %url, %expires, "OCSP responder answers again after {failures} failed attempt(s); stapling a fresh response");
                } else if first {
                    tracing::info!(site = %slot.site, field = %slot.field, %url, %expires, "OCSP response fetched; stapling it");
                } else {
                    tracing::debug!(site = %slot.site, field = %slot.field, %url, %expires, "OCSP response refreshed");
                }
                failures = 0;
                staple.map_or(Duration::from_secs(1), |s| {
                    s.refresh_in(SystemTime::now(), slot.refresh)
                })
            }
            Err(failure) => {
                failures += 1;
                let keeping = match slot.current() {
                    Some(s) if s.is_fresh(SystemTime::now()) => {
                        format!("keeping the last good response until {}", format_time(s.expires))
                    }
                    _ => "nothing is stapled".to_string(),
                };
                let wait = backoff(failures, slot.refresh);
                if failures == 1 {
                    tracing::warn!(
                        site = %slot.site,
                        field = %slot.field,
                        %url,
                        outcome = failure.outcome,
                        "OCSP fetch failed: {}; {keeping}; retrying with backoff (until it answers, further failures are logged at debug level)",
                        failure.message
                    );
                } else {
                    tracing::debug!(site = %slot.site, field = %slot.field, %url, outcome = failure.outcome, attempt = failures, retry_in = ?wait, "OCSP fetch failed again: {}", failure.message);
                }
                if slot.drop_expired(SystemTime::now()) {
                    tracing::warn!(site = %slot.site, field = %slot.field, %url, "the last good OCSP response has expired; no longer stapling until the responder answers");
                }
                wait
            }
        };
        first = false;
        tokio::time::sleep(wait).await;
    }
}

/// POSTs an OCSP request to an `http://` responder and returns the response body.
async fn post(url: &str, body: Bytes) -> Result<Vec<u8>, Failure> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| unreachable(format!("bad responder URL {url:?}: {e}")))?;
    if uri.scheme_str() != Some("http") {
        return Err(unreachable(format!("{url:?} is not an http:// URL")));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| unreachable(format!("no host in {url:?}")))?
        .clone();
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| unreachable(format!("cannot connect to {authority}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(format!("{authority}: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = http::Request::post(path)
        .header(http::header::HOST, authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/ocsp-request")
        .header(http::header::ACCEPT, "application/ocsp-response")
        .header(http::header::CONNECTION, "close")
        .body(Full::new(body))
        .map_err(|e| unreachable(format!("bad request for {url:?}: {e}")))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| http_error(format!("{authority}: {e}")))?;
    if response.status() != http::StatusCode::OK {
        return Err(http_error(format!("{authority} answered HTTP {}", response.status())));
    }
    let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| http_error(format!("{authority}: reading the response: {e}")))?;
    Ok(body.to_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_caps() {
        let none: Vec<u64> = (1..=12).map(|n| backoff(n, None).as_secs()).collect();
        assert_eq!(none, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(backoff(5, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(backoff(1, Some(Duration::from_secs(3600))), Duration::from_secs(1));
        assert_eq!(backoff(30, Some(Duration::from_secs(3600))), MAX_BACKOFF);
    }

    #[tokio::test]
    async fn unreachable_and_http_errors_are_told_apart() {
        // A port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = post(&format!("http://127.0.0.1:{port}/"), Bytes::new())
            .await
            .unwrap_err();
        assert_eq!(err.outcome, "unreachable", "{err:?}");
        // A server answering 404.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        });
        let err = post(&format!("http://{addr}/ocsp"), Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert_eq!(err.outcome, "http_error", "{err:?}");
        assert!(err.message.contains("404"), "{err:?}");
        let err = post("https://127.0.0.1/", Bytes::new()).await.unwrap_err();
        assert!(err.message.contains("not an http:// URL"), "{err:?}");
    }
}

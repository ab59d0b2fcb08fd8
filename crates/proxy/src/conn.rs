//! One client connection on an https listener: admission, TLS handshake (with its timeout and
//! failure classification), handshake metrics, then HTTP/1.1 or HTTP/2 by ALPN until the client
//! leaves, goes idle, or the gateway drains.

use crate::context::ConnContext;
use crate::facts::{millis, TlsFacts};
use crate::gateway::{ConnGuard, Gateway};
use crate::io::{Activity, MeteredStream};
use crate::records::{RecordPolicy, RecordSizer};
use crate::service::handle;
use boring::ssl::NameType;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_admin::metrics::{FailureLabels, HandshakeLabels, OutcomeLabels};
use tlsgate_tls::{HandshakeInfo, Resumption};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a handshake failed, as a metric label.
pub fn classify_failure(text: &str) -> &'static str {
    const TABLE: &[(&str, &str)] = &[
        ("HTTP_REQUEST", "plaintext_http"),
        ("HTTPS_PROXY_REQUEST", "plaintext_http"),
        ("NO_SHARED_CIPHER", "no_shared_parameters"),
        ("NO_SHARED_GROUP", "no_shared_parameters"),
        ("UNSUPPORTED_PROTOCOL", "no_shared_parameters"),
        ("NO_COMMON_SIGNATURE_ALGORITHMS", "no_shared_parameters"),
        ("CERT_CB_ERROR", "unknown_sni"),
        ("CONNECTION_REJECTED", "unknown_sni"),
        ("WRONG_VERSION_NUMBER", "malformed"),
        ("DECODE_ERROR", "malformed"),
        ("CLIENTHELLO_PARSE_FAILED", "malformed"),
        ("PARSE_TLSEXT", "malformed"),
        ("UNEXPECTED_RECORD", "malformed"),
        ("UNEXPECTED_MESSAGE", "malformed"),
        ("BAD_PACKET_LENGTH", "malformed"),
        ("EXCESSIVE_MESSAGE_SIZE", "malformed"),
        ("DATA_LENGTH_TOO_LONG", "malformed"),
        ("ENCRYPTED_LENGTH_TOO_LONG", "malformed"),
        ("RECORD_LENGTH_MISMATCH", "malformed"),
        ("TLSV1_ALERT", "client_alert"),
        ("SSLV3_ALERT", "client_alert"),
    ];
    TABLE.iter().find(|(needle, _)| text.contains(needle)).map_or(
        if text.contains("unexpected EOF") || text.contains("reset by peer") || text.contains("Broken pipe") {
            "client_closed"
        } else {
            "other"
        },
        |(_, label)| label,
    )
}

/// What BoringSSL reports when plain HTTP arrives on a TLS port; we answer it in plain HTTP.
const PLAINTEXT_REPLY: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 52\r\nConnection: close\r\n\r\nThis port speaks HTTPS: use https:// to connect.\r\n\r\n";

/// Serves one accepted TCP connection to completion. `tfo` names the listener when the
/// connection's SYN carried data accepted by TCP Fast Open (counted per site once it is known).
pub async fn serve_tls(
    gateway: Arc<Gateway>,
    tcp: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
    tfo: Option<&'static str>,
) {
    let _guard = guard;
    let count_tfo = |site: &'static str| {
        if let Some(listener) = tfo {
            let labels = tlsgate_admin::metrics::TfoLabels { listener, site };
            gateway.metrics.tfo_accepted.get_or_create(&labels).inc();
        }
    };
    let started = Instant::now();
    let generation = gateway.current();
    let server = &generation.config.server;
    let metrics = gateway.metrics.clone();
    let activity = Activity::new();
    let stream = MeteredStream::new(tcp, activity.clone(), metrics.clone());
    let ssl = match generation.tls.new_ssl() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot create a TLS connection object");
            return;
        }
    };
    let fail = |reason: &'static str| {
        metrics
            .handshake_failures
            .get_or_create(&FailureLabels { reason })
            .inc()
    };
    let accept = tokio_boring::SslStreamBuilder::new(ssl, stream).accept();
    let mut tls = match handshake_deadlines(
        accept,
        &activity,
        server.silent_timeout.get(),
        server.handshake_timeout.get(),
    )
    .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            let text = e.to_string();
            let reason = if e.ssl().is_some_and(tlsgate_tls::handshake_info::sni_rejected) {
                "unknown_sni"
            } else {
                classify_failure(&text)
            };
            fail(reason);
            count_tfo("-");
            tracing::debug!(%peer, reason, error = %text, "TLS handshake failed");
            if reason == "plaintext_http" {
                if let Some(mut raw) = e.into_source_stream() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                        let _ = raw.write_all(PLAINTEXT_REPLY).await;
                        let _ = raw.shutdown().await;
                    })
                    .await;
                }
            }
            return;
        }
        Err(Silent) => {
            fail("silent");
            count_tfo("-");
            tracing::debug!(%peer, "connection sent nothing for {:?}; closed", server.silent_timeout);
            return;
        }
        Err(TimedOut) => {
            fail("timeout");
            count_tfo("-");
            tracing::debug!(%peer, "TLS handshake timed out after {:?}", server.handshake_timeout);
            return;
        }
    };
    let info = HandshakeInfo::read(tls.ssl());
    let site_idx = generation.tls.site_of(tls.ssl()).unwrap_or(0);
    count_tfo(generation.sites[site_idx].label);
    metrics
        .handshakes
        .get_or_create(&HandshakeLabels {
            site: generation.sites[site_idx].label,
            outcome: info.resumption.as_str(),
            version: info.version,
            cipher: info.cipher,
            group: info.group,
            cert: info.cert_type.as_str(),
            stapled: if info.stapled { "yes" } else { "no" },
        })
        .inc();
    let outcome = if info.resumption == Resumption::Full {
        "full"
    } else {
        "resumed"
    };
    let handshake_time = started.elapsed();
    metrics
        .handshake_duration
        .get_or_create(&OutcomeLabels { outcome })
        .observe(handshake_time.as_secs_f64());
    // For the access log, once per connection (the strings are static but the SNI).
    let tls_facts = TlsFacts {
        sni: tls.ssl().servername(NameType::HOST_NAME).map(Arc::from),
        version: info.version,
        cipher: info.cipher,
        resumption: info.resumption.as_str(),
        handshake_ms: millis(handshake_time),
        client_subject: None,
    };
    let h2 = info.alpn.as_deref() == Some(b"h2");
    // TLS 1.3 tickets now, not with the first response: HTTP/2 writes its SETTINGS at once and
    // they go along, but HTTP/1.1 writes nothing before a request comes and is answered.
    if !h2 && info.version == "TLSv1.3" && !send_session_tickets(&mut tls, peer).await {
        return;
    }
    if info.early_data {
        gateway
            .sessions
            .early_data
            .stats
            .accepted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let mut tls = RecordSizer::new(
        tls,
        RecordPolicy::from_config(&generation.config.tls),
        metrics.clone(),
        generation.sites[site_idx].label,
    );
    let early = tls.watch_early_data();
    let ctx = Arc::new(ConnContext {
        gateway: gateway.clone(),
        accepted_with: generation.clone(),
        site: generation.sites[site_idx].name.clone(),
        site_label: generation.sites[site_idx].label,
        tls: tls_facts,
        peer,
        protocol: if h2 { "h2" } else { "h1" },
        early,
    });
    let service = hyper::service::service_fn(move |req| handle(ctx.clone(), req));
    let idle = server.client_idle_timeout.get();
    let shutdown = gateway.shutdown_signal();
    if h2 {
        let h2c = &generation.config.http2;
        let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .max_concurrent_streams(h2c.max_concurrent_streams)
            .max_header_list_size(server.max_request_header_bytes as u32)
            .initial_stream_window_size(h2c.initial_stream_window)
            .initial_connection_window_size(h2c.initial_connection_window)
            .max_frame_size(h2c.max_frame_size)
            .header_table_size(h2c.header_table_size)
            .keep_alive_interval(h2c.keep_alive_interval.map(|d| d.get()))
            .keep_alive_timeout(h2c.keep_alive_timeout.get());
        drive(b.serve_connection(TokioIo::new(tls), service), activity, idle, shutdown).await;
    } else {
        let mut tls = tls;
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new())
            .keep_alive(true)
            .header_read_timeout(server.client_header_timeout.get())
            .max_buf_size(server.max_request_header_bytes.max(8192));
        let failed = drive(
            b.serve_connection(TokioIo::new(&mut tls), service),
            activity,
            idle,
            shutdown,
        )
        .await;
        if failed {
            linger(tls.raw_mut()).await;
        }
    }
}

/// Why a handshake was cut off.
enum Deadline {
    /// No byte arrived within `silent_timeout`.
    Silent,
    /// The handshake did not finish within `handshake_timeout`.
    TimedOut,
}
use Deadline::{Silent, TimedOut};

/// Runs the handshake under two deadlines: a connection that has sent no byte after `silent` is
/// closed then (a bare TCP connection holds its slot for seconds, not the whole handshake
/// timeout); otherwise the handshake has `total` in all. One timer on the common path.
async fn handshake_deadlines<F: Future>(
    accept: F,
    activity: &Activity,
    silent: Duration,
    total: Duration,
) -> Result<F::Output, Deadline> {
    let silent = silent.min(total);
    tokio::pin!(accept);
    tokio::select! {
        r = &mut accept => return Ok(r),
        _ = tokio::time::sleep(silent) => {}
    }
    if activity.silent() {
        return Err(Silent);
    }
    tokio::time::timeout(total - silent, accept).await.map_err(|_| TimedOut)
}

/// Writes the TLS 1.3 NewSessionTicket messages BoringSSL queued at the end of the handshake
/// (it sends them only with the next application write; `tlsgate_tls::take_pending_flight`).
/// A client that reads its tickets before it sends anything — `openssl s_client -sess_out`, a
/// browser's preconnected socket that closes unused — otherwise leaves without a session; OpenSSL
/// servers (nginx) write them with the handshake too. The cost, measured: one more write and TCP
/// segment per TLS 1.3 HTTP/1.1 connection (docs/OPTIMISATIONS.md). The records are a few hundred
/// bytes into the empty send buffer of a fresh connection, so the write does not wait on the
/// client. False when the connection is broken and must be dropped.
async fn send_session_tickets(tls: &mut tokio_boring::SslStream<MeteredStream<TcpStream>>, peer: SocketAddr) -> bool {
    let records = match tlsgate_tls::take_pending_flight(tls.ssl_mut()) {
        Ok(records) => records,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot flush the session tickets");
            return false;
        }
    };
    if records.is_empty() {
        return true;
    }
    match tls.get_mut().write_all(&records).await {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot send the session tickets");
            false
        }
    }
}

/// Lingering close (as nginx does): after an error response such as 431, the client may still be
/// sending; closing at once with unread bytes makes the kernel send a reset that destroys the
/// response in flight. Half-close, then read and discard for a moment before closing.
async fn linger(raw: &mut MeteredStream<TcpStream>) {
    // The TCP half-close itself: `MeteredStream`'s own shutdown only flushes.
    let _ = raw.get_mut().shutdown().await;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0usize;
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Ok(n) = raw.read(&mut buf).await {
            total += n;
            if n == 0 || total > 1 << 20 {
                break;
            }
        }
    })
    .await;
}

/// A hyper connection that can be asked to finish gracefully.
pub trait Graceful: Future {
    /// Stop taking new requests; finish the ones in flight.
    fn graceful(self: Pin<&mut Self>);
}

impl<I, S, B> Graceful for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Graceful for hyper::server::conn::http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Drives a connection until it ends, closing it when idle too long and finishing it gracefully
/// when the gateway drains. Returns true when the connection ended with an error.
pub async fn drive<C, E>(
    conn: C,
    activity: Arc<Activity>,
    idle: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> bool
where
    C: Graceful<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let mut draining = *shutdown.borrow();
    if draining {
        conn.as_mut().graceful();
    }
    let watchdog = async {
        loop {
            let quiet = activity.idle_for();
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    };
    tokio::pin!(watchdog);
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                return match res {
                    Ok(()) => false,
                    Err(e) => {
                        tracing::debug!(error = %e, "client connection ended with an error");
                        true
                    }
                };
            }
            _ = &mut watchdog => {
                tracing::debug!("closing client connection idle for {idle:?}");
                return false;
            }
            changed = shutdown.changed(), if !draining => {
                if changed.is_err() || *shutdown.borrow() {
                    draining = true;
                    conn.as_mut().graceful();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::classify_failure;

    #[test]
    fn failure_reasons() {
        assert_eq!(
            classify_failure("error:10000098:SSL routines:OPENSSL_internal:HTTP_REQUEST"),
            "plaintext_http"
        );
        assert_eq!(classify_failure("...:WRONG_VERSION_NUMBER"), "malformed");
        assert_eq!(classify_failure("...:CLIENTHELLO_PARSE_FAILED"), "malformed");
        assert_eq!(classify_failure("...:NO_SHARED_CIPHER"), "no_shared_parameters");
        assert_eq!(classify_failure("unexpected EOF"), "client_closed");
        assert_eq!(classify_failure("something new"), "other");
    }
}

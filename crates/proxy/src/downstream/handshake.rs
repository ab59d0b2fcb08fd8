//! The TLS handshake of one client connection: run under the silent and total deadlines,
//! failures classified by BoringSSL reason code and counted (plain HTTP on a TLS port answered in
//! plain HTTP), success counted by site, resumption, version, cipher, group and certificate, and
//! the TLS 1.3 session tickets written at once for HTTP/1.1 clients.

use crate::downstream::io::{Activity, MeteredStream};
use crate::facts::{millis, TlsFacts};
use crate::gateway::{Gateway, Generation};
use crate::identity::ClientIdentity;
use boring::ssl::NameType;
use prometheus_client::metrics::{counter::Counter, histogram::Histogram};
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_admin::local_series::LocalSeries;
use tlsgate_admin::metrics::{FailureLabels, HandshakeLabels, OutcomeLabels, RefusedLabels, TfoLabels};
use tlsgate_tls::{HandshakeFailure, HandshakeInfo, Resumption};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_boring::SslStream;

/// What BoringSSL reports when plain HTTP arrives on a TLS port; we answer it in plain HTTP.
const PLAINTEXT_REPLY: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 52\r\nConnection: close\r\n\r\nThis port speaks HTTPS: use https:// to connect.\r\n\r\n";

thread_local! {
    /// This worker's handles on `tlsgate_handshakes_total` series: no shared lock per handshake.
    static HANDSHAKES: RefCell<LocalSeries<HandshakeLabels, Counter>> = RefCell::default();
    /// This worker's handles on `tlsgate_handshake_failures_total` series (a flood of failing
    /// handshakes takes no shared lock either).
    static FAILURES: RefCell<LocalSeries<FailureLabels, Counter>> = RefCell::default();
    /// This worker's handles on `tlsgate_handshake_duration_seconds` series.
    static DURATIONS: RefCell<LocalSeries<OutcomeLabels, Histogram>> = RefCell::default();
}

/// A completed handshake: the stream and what the rest of the connection needs to know.
pub struct Established {
    /// The TLS stream over the metered TCP connection.
    pub tls: SslStream<MeteredStream<TcpStream>>,
    /// The site the certificate selection chose (index into the generation's sites).
    pub site_idx: usize,
    /// What the access log records of the handshake.
    pub facts: TlsFacts,
    /// The client's verified certificate, when the site asks for one and it sent one.
    pub client_identity: Option<Box<ClientIdentity>>,
    /// True when ALPN chose HTTP/2.
    pub h2: bool,
}

/// Runs the handshake of an accepted connection and counts its outcome; `None` when it failed
/// (already counted and logged). `tfo` names the listener when the SYN carried TCP Fast Open
/// data (counted per site once it is known). The deadlines count from `accepted` (what went
/// before the handshake, a PROXY header, spent part of them).
pub async fn accept(
    gateway: &Gateway,
    generation: &Generation,
    stream: MeteredStream<TcpStream>,
    activity: &Activity,
    peer: SocketAddr,
    tfo: Option<&'static str>,
    accepted: Instant,
) -> Option<Established> {
    let count_tfo = |site: &'static str| {
        if let Some(listener) = tfo {
            gateway
                .metrics
                .tfo_accepted
                .get_or_create(&TfoLabels { listener, site })
                .inc();
        }
    };
    let started = accepted;
    let server = &generation.config.server;
    let metrics = &gateway.metrics;
    let mut ssl = match generation.tls.new_ssl() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot create a TLS connection object");
            return None;
        }
    };
    // The client (a PROXY header's, when the listener reads one) under its source's budget.
    gateway.handshake_budget.attach(&mut ssl, peer.ip());
    // The access rules by JA4 try their source networks at the ClientHello (nothing otherwise).
    generation.tls.fingerprints().prepare(&mut ssl, peer.ip());
    let fail = |failure: HandshakeFailure| {
        let labels = FailureLabels {
            reason: failure.label(),
        };
        FAILURES.with_borrow_mut(|local| local.get(metrics.instance, &metrics.handshake_failures, &labels).inc());
        count_tfo("-");
    };
    let accept = tokio_boring::SslStreamBuilder::new(ssl, stream).accept();
    let spent = started.elapsed();
    let mut tls = match handshake_deadlines(
        accept,
        activity,
        server.silent_timeout.get(),
        server.handshake_timeout.get().saturating_sub(spent),
    )
    .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            let failure = HandshakeFailure::of(&e);
            fail(failure);
            if let Some(r) = e.ssl().and_then(tlsgate_tls::handshake_budget::refusal) {
                let labels = RefusedLabels {
                    reason: r.reason(),
                    stage: r.stage(),
                };
                metrics.handshakes_refused.get_or_create(&labels).inc();
            }
            tracing::debug!(%peer, reason = failure.label(), error = %e, "TLS handshake failed");
            if failure == HandshakeFailure::PlaintextHttp {
                if let Some(mut raw) = e.into_source_stream() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                        let _ = raw.write_all(PLAINTEXT_REPLY).await;
                        let _ = raw.shutdown().await;
                    })
                    .await;
                }
            }
            return None;
        }
        Err(Silent) => {
            fail(HandshakeFailure::Silent);
            tracing::debug!(%peer, "connection sent nothing for {:?}; closed", server.silent_timeout);
            return None;
        }
        Err(TimedOut) => {
            fail(HandshakeFailure::Timeout);
            tracing::debug!(%peer, "TLS handshake timed out after {:?}", server.handshake_timeout);
            return None;
        }
    };
    let info = HandshakeInfo::read(tls.ssl());
    let site_idx = generation.tls.site_of(tls.ssl()).unwrap_or(0);
    let site_label = generation.sites[site_idx].label;
    count_tfo(site_label);
    let labels = HandshakeLabels {
        site: site_label,
        outcome: info.resumption.as_str(),
        version: info.version,
        cipher: info.cipher,
        group: info.group,
        cert: info.cert_type.as_str(),
        stapled: if info.stapled { "yes" } else { "no" },
    };
    HANDSHAKES.with_borrow_mut(|local| local.get(metrics.instance, &metrics.handshakes, &labels).inc());
    let outcome = if info.resumption == Resumption::Full {
        "full"
    } else {
        "resumed"
    };
    let handshake_time = started.elapsed();
    DURATIONS.with_borrow_mut(|local| {
        local
            .get(
                metrics.instance,
                &metrics.handshake_duration,
                &OutcomeLabels { outcome },
            )
            .observe(handshake_time.as_secs_f64());
    });
    // Once per connection, resumed or not (the session keeps the client's certificate).
    let client_identity = tlsgate_tls::ClientIdentity::of(tls.ssl()).map(|id| Box::new(ClientIdentity::new(id)));
    // For the access log, once per connection (the strings are static but the SNI).
    let facts = TlsFacts {
        sni: tls.ssl().servername(NameType::HOST_NAME).map(Arc::from),
        version: info.version,
        cipher: info.cipher,
        resumption: info.resumption.as_str(),
        handshake_ms: millis(handshake_time),
        client_subject: client_identity.as_ref().map(|id| id.subject.clone()),
        ja4: tlsgate_tls::fingerprint::ja4_text(tls.ssl()),
        ech: tls.ssl().ech_accepted(),
        answer_429: tlsgate_tls::handshake_budget::answer_429(tls.ssl()),
    };
    if facts.answer_429.is_some() {
        let labels = RefusedLabels {
            reason: "full_handshake_budget",
            stage: "answered_429",
        };
        metrics.handshakes_refused.get_or_create(&labels).inc();
    }
    let h2 = info.alpn.as_deref() == Some(b"h2");
    // TLS 1.3 tickets handed to the stream: HTTP/2 writes its SETTINGS at once and they go
    // along, but HTTP/1.1 writes nothing before a request comes and is answered, and a client
    // that sends none must still get them.
    if !h2 && info.version == "TLSv1.3" && !send_session_tickets(&mut tls, peer) {
        return None;
    }
    if info.early_data {
        gateway
            .sessions
            .early_data
            .stats
            .accepted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Some(Established {
        tls,
        site_idx,
        facts,
        client_identity,
        h2,
    })
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

/// Takes the TLS 1.3 NewSessionTicket messages BoringSSL queued at the end of the handshake (it
/// sends them only with the next application write; `tlsgate_tls::take_pending_flight`) and
/// hands them to the connection's stream, which sends them with the first response or before
/// the gateway first waits for the client, whichever comes first ([`MeteredStream::hold`]). A
/// client that reads its tickets before it sends anything — `openssl s_client -sess_out`, a
/// browser's preconnected socket that closes unused — would otherwise leave without a session
/// (OpenSSL servers, nginx, write them with the handshake); a client whose request came with its
/// Finished gets them in the same write and segment as the answer. False when the connection is
/// broken and must be dropped.
fn send_session_tickets(tls: &mut SslStream<MeteredStream<TcpStream>>, peer: SocketAddr) -> bool {
    match tlsgate_tls::take_pending_flight(tls.ssl_mut()) {
        Ok(records) => {
            if !records.is_empty() {
                tls.get_mut().hold(&records);
            }
            true
        }
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot flush the session tickets");
            false
        }
    }
}

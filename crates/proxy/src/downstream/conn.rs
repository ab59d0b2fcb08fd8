//! One client connection on an https listener: the TLS handshake ([`handshake`]), then the
//! connection's context and HTTP/1.1 ([`http1`]) or HTTP/2 ([`http2`]) by ALPN, with dynamic
//! record sizing below, until the client leaves, goes idle, or the gateway drains.
//!
//! [`handshake`]: super::handshake
//! [`http1`]: super::http1
//! [`http2`]: super::http2

use crate::body::ClientBody;
use crate::context::ConnContext;
use crate::downstream::io::{Activity, MeteredStream};
use crate::downstream::records::{RecordPolicy, RecordSizer};
use crate::downstream::{handshake, http1, http2};
use crate::gateway::{ConnGuard, Gateway};
use crate::interim::InterimQueue;
use crate::request::service::handle;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Serves one accepted TCP connection to completion. `tfo` names the listener when the
/// connection's SYN carried data accepted by TCP Fast Open; `local` is the address a PROXY
/// header said the client connected to (else the socket's own is read); the handshake must end
/// within `handshake_timeout` of `accepted` (a PROXY header's read counts).
pub async fn serve_tls(
    gateway: Arc<Gateway>,
    tcp: TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    guard: ConnGuard,
    tfo: Option<&'static str>,
    accepted: std::time::Instant,
) {
    let _guard = guard;
    // One getsockname per connection: what a group with `send_proxy_protocol` announces.
    let local = local
        .or_else(|| tcp.local_addr().ok())
        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
    let generation = gateway.current();
    let activity = Activity::new();
    let stream = MeteredStream::new(tcp, activity.clone(), gateway.metrics.clone());
    // The handshake's state and each protocol's are boxed: the task's own allocation, which
    // lives as long as the connection, then holds only what they share (an HTTP/1.1 connection
    // does not carry room for HTTP/2's state, nor either for the handshake's).
    let Some(done) = Box::pin(handshake::accept(
        &gateway,
        &generation,
        stream,
        &activity,
        peer,
        tfo,
        accepted,
    ))
    .await
    else {
        return;
    };
    let site = &generation.sites[done.site_idx];
    let mut tls = RecordSizer::new(
        done.tls,
        RecordPolicy::from_config(&generation.config.tls),
        gateway.metrics.clone(),
        site.label,
    );
    let early = tls.watch_early_data();
    let interim = (!done.h2).then(|| {
        let queue = InterimQueue::new(activity.clone());
        tls.set_interim(queue.clone());
        queue
    });
    let ctx = Arc::new(ConnContext {
        gateway: gateway.clone(),
        accepted_with: generation.clone(),
        site: site.name.clone(),
        site_label: site.label,
        tls: done.facts,
        client_identity: done.client_identity,
        peer,
        local,
        protocol: if done.h2 { "h2" } else { "h1" },
        early,
        activity: activity.clone(),
        upstream_slots: Arc::new(tokio::sync::Semaphore::new(
            generation.config.server.max_upstream_requests_per_connection,
        )),
        tunnels: Default::default(),
        interim,
        ok_requests: Default::default(),
        forward_cache: Default::default(),
    });
    let server = &generation.config.server;
    let shutdown = gateway.shutdown_signal();
    if done.h2 {
        Box::pin(http2::serve(
            tls,
            ctx,
            server,
            &generation.config.http2,
            activity,
            &gateway.metrics,
            shutdown,
        ))
        .await;
    } else {
        // Boxed: hyper's manual upgrade (`poll_without_shutdown`) wants an `Unpin` future. What
        // an HTTP/1.1 response needs besides (`Alt-Svc`, `Connection: close` while draining) is
        // added by `handle` itself: no wrapper future to copy per request.
        let tunnels = ctx.clone();
        let service =
            hyper::service::service_fn(move |req| Box::pin(handle(ctx.clone(), req.map(ClientBody::Hyper), None)));
        Box::pin(http1::serve(
            tls,
            service,
            server,
            activity,
            &gateway.metrics,
            shutdown,
            &tunnels.tunnels,
        ))
        .await;
    }
}

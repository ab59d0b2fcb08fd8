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
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::net::TcpStream;

/// A connection's protocol after its handshake: HTTP/1.1 or HTTP/2, boxed, owning all it uses.
type Serving = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One accepted TCP connection served to completion (the future a listener spawns as the
/// connection's task). `tfo` names the listener when the connection's SYN carried data accepted
/// by TCP Fast Open; `local` is the address a PROXY header said the client connected to, or the
/// listener's when it is bound to one address (else the socket's own is read); the handshake must end within `handshake_timeout` of `accepted`
/// (a PROXY header's read counts).
///
/// Two phases, each in a box of its own that holds only its own state: the handshake's
/// ([`start`]), freed once it is done, then the protocol's. The task itself holds the two boxes'
/// pointers and the connection's admission guard: an `async fn` here kept its arguments and the
/// handshake's results in the task's allocation for the connection's whole life (784 bytes;
/// `-Zprint-type-sizes`), on top of what the protocol's box holds.
pub fn serve_tls(
    gateway: Arc<Gateway>,
    tcp: TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    guard: ConnGuard,
    tfo: Option<&'static str>,
    accepted: std::time::Instant,
) -> ServeTls {
    ServeTls {
        phase: Phase::Handshake(crate::boxed::pin_in_place(|| {
            start(gateway, tcp, peer, local, tfo, accepted)
        })),
        _guard: guard,
    }
}

/// The future of [`serve_tls`].
pub struct ServeTls {
    phase: Phase,
    /// Counts the connection against the gateway's and its source's limits while it lives.
    _guard: ConnGuard,
}

enum Phase {
    Handshake(Pin<Box<dyn Future<Output = Option<Serving>> + Send>>),
    Serving(Serving),
    Done,
}

impl Future for ServeTls {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            match &mut this.phase {
                Phase::Handshake(h) => {
                    this.phase = match ready!(h.as_mut().poll(cx)) {
                        Some(serving) => Phase::Serving(serving),
                        None => Phase::Done,
                    };
                }
                Phase::Serving(s) => {
                    ready!(s.as_mut().poll(cx));
                    this.phase = Phase::Done;
                }
                Phase::Done => return Poll::Ready(()),
            }
        }
    }
}

/// The handshake, then the connection's context and its protocol's future by ALPN; `None` when
/// the handshake failed (counted and logged by [`handshake::accept`]).
async fn start(
    gateway: Arc<Gateway>,
    tcp: TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    tfo: Option<&'static str>,
    accepted: std::time::Instant,
) -> Option<Serving> {
    // What a group with `send_proxy_protocol` announces: one getsockname per connection on a
    // wildcard listener.
    let local = local
        .or_else(|| tcp.local_addr().ok())
        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
    let generation = gateway.current();
    let activity = Activity::new();
    let stream = MeteredStream::new(tcp, activity.clone(), gateway.metrics.clone());
    let done = handshake::accept(&gateway, &generation, stream, &activity, peer, tfo, accepted).await?;
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
    Some(if done.h2 {
        // `map`, not an `async` block awaiting it: that would hold the future twice (its
        // capture and the awaited copy).
        use futures_util::FutureExt as _;
        Box::pin(http2::serve(tls, ctx, server, &generation.config.http2, activity, shutdown).map(drop))
    } else {
        // What an HTTP/1.1 response needs besides (`Alt-Svc`, `Connection: close` while
        // draining) is added by `handle` itself: no wrapper future to copy per request.
        let service_ctx = ctx.clone();
        let service = hyper::service::service_fn(move |req| {
            crate::boxed::pin_in_place(|| handle(service_ctx.clone(), req.map(ClientBody::Hyper), None))
        });
        crate::boxed::pin_in_place(|| http1::serve(tls, service, http1::Limits::of(server), ctx, activity, shutdown))
    })
}

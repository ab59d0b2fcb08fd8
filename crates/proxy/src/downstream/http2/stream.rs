//! One HTTP/2 request stream, driven by its connection's task: the request goes to the request path with
//! its body as [`RecvBody`] (credit returned as the proxy takes it) and the stream's response
//! handle as a [`StreamInterim`] (so 103 Early Hints go out while the origin works); the
//! response's head is sent, then its body piped within the client's flow-control windows, with
//! trailers. A client reset stops the request where it is (logged as 499). An extended CONNECT
//! stream whose answer is a 2xx is handed to its tunnel ([`PendingTunnel`]) after the head.

use super::date;
use crate::body::ClientBody;
use crate::context::ConnContext;
use crate::h2_stream::{content_length, send_body, strip_connection_specific, PendingTunnel, RecvBody, StreamIo};
use crate::interim::StreamInterim;
use crate::request::service::handle;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{header, Method, Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt as _;
use std::future::poll_fn;
use std::future::Future as _;
use std::sync::Arc;
use std::task::Poll;

/// Serves one stream until its response has been sent, the client reset it, or the connection
/// went away.
pub async fn serve(ctx: Arc<ConnContext>, req: Request<RecvStream>, respond: SendResponse<Bytes>) {
    let (mut parts, recv) = req.into_parts();
    let respond = StreamInterim::new(respond);
    let mut tunnel = None;
    let body = if parts.method == Method::CONNECT {
        // A CONNECT's stream is the tunnel, not a body (RFC 8441 §4, RFC 9113 §8.5).
        if content_length(&parts.headers).is_some_and(|n| n != 0) {
            respond.respond().send_reset(h2::Reason::PROTOCOL_ERROR);
            return;
        }
        let (pending, tx) = PendingTunnel::new();
        parts.extensions.insert(pending);
        tunnel = Some((tx, recv));
        ClientBody::stream(http_body_util::Empty::<Bytes>::new().map_err(|never| match never {}))
    } else {
        ClientBody::H2(RecvBody::new(recv, content_length(&parts.headers)))
    };
    // The request path runs until it answers or the client resets the stream (it is then dropped
    // where it stands: the origin request is cancelled and the log says 499). Scoped, so that the
    // stream's future does not keep room for the request path's state while the body is piped.
    let answered = {
        let service = handle(
            ctx.clone(),
            Request::from_parts(parts, body),
            Some(crate::interim::InterimTo::Http2(&respond)),
        );
        let mut service = std::pin::pin!(service);
        poll_fn(|cx| {
            if let Poll::Ready(r) = service.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            match respond.respond().poll_reset(cx) {
                Poll::Ready(_) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    };
    let Some(Ok(response)) = answered else {
        return;
    };
    let (mut head, body) = response.into_parts();
    strip_connection_specific(&mut head.headers);
    date::insert_if_missing(&mut head.headers);
    if let Some((tx, recv)) = tunnel {
        if head.status.is_success() {
            head.headers.remove(header::CONTENT_LENGTH);
            if let Ok(send) = respond.respond().send_response(Response::from_parts(head, ()), false) {
                let _ = tx.send(StreamIo::new(send, recv));
            }
            return;
        }
    }
    if body.is_end_stream() {
        let _ = respond.respond().send_response(Response::from_parts(head, ()), true);
        return;
    }
    if let Some(n) = body.size_hint().exact() {
        head.headers.entry(header::CONTENT_LENGTH).or_insert_with(|| n.into());
    }
    let Ok(send) = respond.respond().send_response(Response::from_parts(head, ()), false) else {
        return;
    };
    send_body(body, send, h2::Reason::INTERNAL_ERROR).await;
}

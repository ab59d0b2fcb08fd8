//! One HTTP/2 request stream, driven by its connection's task: the request goes to the request path with
//! its body as [`RequestBody`] (credit returned as the proxy takes it) and the stream's response
//! handle as a [`StreamInterim`] (so 103 Early Hints go out while the origin works); the
//! response's head is sent, then its body piped within the client's flow-control windows, with
//! trailers. A client reset stops the request where it is (logged as 499). An extended CONNECT
//! stream whose answer is a 2xx is handed to its tunnel ([`PendingTunnel`]) after the head.

use super::date;
use crate::body::ClientBody;
use crate::context::ConnContext;
use crate::h2_stream::{PendingTunnel, RequestBody, StreamIo};
use crate::interim::StreamInterim;
use crate::request::access_log::AccessBody;
use crate::request::service::handle;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{header, HeaderMap, Method, Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt as _;
use std::future::poll_fn;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// Connection-specific fields (RFC 9113 §8.2.2): never sent on an HTTP/2 stream.
const CONNECTION_SPECIFIC: [header::HeaderName; 4] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HeaderName::from_static("keep-alive"),
];

/// The request's `content-length`, when it has exactly one valid value.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()?.parse().ok()
}

/// Removes what an HTTP/2 response may not carry (the request path already drops hop-by-hop
/// fields of origin responses; this keeps a gateway answer or an edit from breaking the stream).
fn strip_connection_specific(headers: &mut HeaderMap) {
    for name in &CONNECTION_SPECIFIC {
        if headers.contains_key(name) {
            headers.remove(name);
        }
    }
    if headers.get(header::TE).is_some_and(|v| v != "trailers") {
        headers.remove(header::TE);
    }
}

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
        ClientBody::H2(RequestBody::new(recv, content_length(&parts.headers)))
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
    pipe(body, send).await;
}

/// What the pipe waits for next.
enum Next {
    Frame(Option<Result<http_body::Frame<Bytes>, crate::body::BoxError>>),
    Gone,
}

/// Sends `body` on `send`: each chunk once the stream has some send capacity (so a client that
/// reads nothing holds at most a chunk and `h2`'s bounded send buffer), the end of the stream
/// with the last chunk, trailers as a final HEADERS frame. A body that fails resets the stream.
async fn pipe(body: AccessBody, mut send: SendStream<Bytes>) {
    let mut body = std::pin::pin!(body);
    loop {
        send.reserve_capacity(1);
        let next = poll_fn(|cx| {
            if send.poll_reset(cx).is_ready() {
                return Poll::Ready(Next::Gone);
            }
            if send.capacity() == 0 {
                loop {
                    match send.poll_capacity(cx) {
                        Poll::Ready(Some(Ok(0))) => {}
                        Poll::Ready(Some(Ok(_))) => break,
                        Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(Next::Gone),
                        Poll::Pending => return Poll::Pending,
                    }
                }
            }
            Pin::new(&mut body).poll_frame(cx).map(Next::Frame)
        })
        .await;
        let frame = match next {
            Next::Gone => return,
            Next::Frame(None) => {
                let _ = send.send_data(Bytes::new(), true);
                return;
            }
            Next::Frame(Some(Err(e))) => {
                tracing::debug!(error = %e, "response body failed: resetting the client's stream");
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            Next::Frame(Some(Ok(frame))) => frame,
        };
        match frame.into_data() {
            Ok(data) => {
                let end = body.is_end_stream();
                if send.send_data(data, end).is_err() || end {
                    return;
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    let _ = send.send_trailers(trailers);
                } else {
                    let _ = send.send_data(Bytes::new(), true);
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_is_read_only_when_single_and_valid() {
        let mut h = HeaderMap::new();
        assert_eq!(content_length(&h), None);
        h.insert(header::CONTENT_LENGTH, "12".parse().unwrap());
        assert_eq!(content_length(&h), Some(12));
        h.append(header::CONTENT_LENGTH, "12".parse().unwrap());
        assert_eq!(content_length(&h), None);
        h.insert(header::CONTENT_LENGTH, "x".parse().unwrap());
        assert_eq!(content_length(&h), None);
    }

    #[test]
    fn connection_specific_fields_are_stripped_and_te_trailers_kept() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, "close".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        h.insert(header::TE, "trailers".parse().unwrap());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        strip_connection_specific(&mut h);
        assert_eq!(h.len(), 2, "{h:?}");
        h.insert(header::TE, "gzip".parse().unwrap());
        strip_connection_specific(&mut h);
        assert!(!h.contains_key(header::TE));
    }
}

//! The patched `h2` (third_party/README.md, ninth change) still refuses to send a head with a
//! connection-specific field (RFC 9113 §8.2.2) now that it finds them in one pass over the names
//! present instead of a lookup per forbidden name: each of them alone, in any case, refused;
//! `TE: trailers` and ordinary heads sent.

use bytes::Bytes;

/// Whether the server's `send_response` accepts a 200 with `fields`.
async fn server_sends(fields: &[(&str, &str)]) -> bool {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let fields: Vec<(String, String)> = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let server = tokio::spawn(async move {
        let mut conn = h2::server::handshake(server).await.expect("server handshake");
        let (_req, mut respond) = conn.accept().await.expect("a request").expect("request");
        let mut resp = http::Response::builder().status(200);
        for (k, v) in &fields {
            resp = resp.header(k.as_str(), v.as_str());
        }
        let sent = respond.send_response(resp.body(()).unwrap(), false).map(|mut send| {
            send.send_data(Bytes::from_static(b"ok"), true).expect("body");
        });
        // Serve the connection until the client has what it needs.
        tokio::spawn(async move { while conn.accept().await.is_some() {} });
        sent.is_ok()
    });
    let (send, conn) = h2::client::handshake(client).await.expect("client handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut ready = send.ready().await.expect("ready");
    let req = http::Request::builder().uri("http://localhost/").body(()).unwrap();
    let (resp, _) = ready.send_request(req, true).expect("send");
    let sent = server.await.expect("server task");
    if sent {
        assert_eq!(resp.await.expect("response").status(), 200);
    }
    sent
}

#[tokio::test(flavor = "current_thread")]
async fn connection_specific_fields_are_refused_and_others_sent() {
    for field in [
        ("connection", "close"),
        ("Connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "websocket"),
        ("keep-alive", "timeout=5"),
        ("Keep-Alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("te", "gzip"),
    ] {
        assert!(
            !server_sends(&[("content-type", "text/plain"), field]).await,
            "{field:?} was sent"
        );
    }
    assert!(server_sends(&[]).await);
    assert!(server_sends(&[("content-type", "text/plain"), ("x-keep", "1")]).await);
    assert!(server_sends(&[("te", "trailers"), ("server", "t")]).await);
}

//! Origins that send 103 Early Hints (RFC 8297) before every response, for the Early Hints
//! tests of each client protocol (tests/early_hints.rs, tests/http3.rs): over HTTP/1.1
//! ([`hinting_origin`]) and over HTTP/2 ([`hinting_h2_origin`]).

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

/// An origin that answers every request with a 103 (a `Link` to preload, and a field its
/// `Connection` header names, which must not travel), waits, then answers `hello <path>`.
pub fn hinting_origin() -> String {
    crate::scripted_origin(|path, tcp| {
        let hints = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nConnection: x-secret\r\nX-Secret: 1\r\n\r\n";
        tcp.write_all(hints.as_bytes())?;
        std::thread::sleep(Duration::from_millis(150));
        let body = format!("hello {path}");
        let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        tcp.write_all(resp.as_bytes())
    })
}

/// [`hinting_origin`] over HTTP/2 in cleartext (prior knowledge; the `h2` crate's server): each
/// request's stream gets a 103 with the same `Link`, then after 150 ms `hello <path>`.
pub fn hinting_h2_origin() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((req, respond))) = conn.accept().await {
                        tokio::spawn(answer_with_hints(req.uri().path().to_string(), respond));
                    }
                });
            }
        });
    });
    addr
}

async fn answer_with_hints(path: String, mut respond: h2::server::SendResponse<bytes::Bytes>) {
    let hints = http::Response::builder()
        .status(103)
        .header("link", "</style.css>; rel=preload; as=style")
        .body(())
        .unwrap();
    if respond.send_informational(hints).is_err() {
        return;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let body = format!("hello {path}");
    let head = http::Response::builder()
        .status(200)
        .header("content-length", body.len())
        .body(())
        .unwrap();
    if let Ok(mut send) = respond.send_response(head, false) {
        let _ = send.send_data(body.into(), true);
    }
}

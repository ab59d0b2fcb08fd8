//! Origins that send 103 Early Hints (RFC 8297) before every response, for the Early Hints
//! tests of each client protocol (tests/early_hints.rs, tests/http3.rs): over HTTP/1.1
//! ([`hinting_origin`]) and over HTTP/2 ([`hinting_h2_origin`]).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// An origin that answers every request with a 103 (a `Link` to preload, and a field its
/// `Connection` header names, which must not travel), waits, then answers `hello <path>`.
pub fn hinting_origin() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request head at a time (bodiless GETs).
                    let end = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break end;
                        }
                        match tcp.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end + 4);
                    let path = head.split(' ').nth(1).unwrap_or("?").to_string();
                    let hints = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nConnection: x-secret\r\nX-Secret: 1\r\n\r\n";
                    if tcp.write_all(hints.as_bytes()).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(150));
                    let body = format!("hello {path}");
                    let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                    if tcp.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
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

//! An HTTP/1.1 origin that sends 103 Early Hints (RFC 8297) before every response, for the
//! Early Hints tests of each client protocol (tests/early_hints.rs, tests/http3.rs).

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

//! An origin that records the exact bytes it receives, for request-smuggling and header tests:
//! it reads one request per connection (header block, then a `Content-Length` body or a chunked
//! body up to its last chunk and trailers), answers `200 ok` (or a given body) with
//! `Connection: close`, and keeps
//! every connection's bytes. A connection that ends before a complete request is recorded too.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running raw origin; stopped on drop.
pub struct RawOrigin {
    /// Its port on 127.0.0.1.
    pub port: u16,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawOrigin {
    /// Starts one on a free port, answering `ok`.
    pub fn start() -> Self {
        Self::answering(b"ok".to_vec())
    }

    /// Starts one on a free port, answering `body`.
    pub fn answering(body: Vec<u8>) -> Self {
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        response.extend_from_slice(&body);
        let response: Arc<[u8]> = response.into();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind raw origin");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let (s, r) = (s.clone(), response.clone());
                        std::thread::spawn(move || serve(tcp, &s, &r));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The bytes of every connection so far (each connection carries at most one request).
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The same, as lossy text.
    pub fn texts(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect()
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// True once `buf` holds a complete request (judged from its own framing headers).
fn complete(buf: &[u8]) -> bool {
    let Some(end) = find(buf, b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let body = &buf[end + 4..];
    if head
        .lines()
        .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"))
    {
        // The last chunk, then trailers (possibly none), then an empty line.
        let last = if body.starts_with(b"0\r\n") {
            Some(0)
        } else {
            find(body, b"\r\n0\r\n").map(|i| i + 2)
        };
        return last.is_some_and(|i| body[i..].starts_with(b"0\r\n\r\n") || find(&body[i..], b"\r\n\r\n").is_some());
    }
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= len
}

fn serve(mut tcp: TcpStream, seen: &Mutex<Vec<Vec<u8>>>, response: &[u8]) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match tcp.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if complete(&buf) {
            // Recorded before answering: when the client has the response, the record exists.
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(buf);
            let _ = tcp.write_all(response);
            return;
        }
    }
    seen.lock().unwrap_or_else(|e| e.into_inner()).push(buf);
}

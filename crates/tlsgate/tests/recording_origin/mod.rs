//! A keep-alive HTTP/1.1 origin for the PROXY-protocol and connection-limit tests: it reads the
//! PROXY header a connection may start with (tlsgate-wire's parser), then serves requests on the
//! connection until it closes, answering each after `delay` with the client the header named
//! (`ip:port`, or `-` without one). It records every connection (its header and the request
//! lines it carried) and the most connections it ever had open at once. Stopped on drop.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tlsgate_wire::proxy_protocol::{parse, Header, Parsed};

/// What one connection brought.
#[derive(Debug, Clone, Default)]
pub struct Conn {
    /// The PROXY header, when the connection started with a valid one.
    pub header: Option<Header>,
    /// The header's error kind, when the connection started with something else.
    pub header_error: Option<&'static str>,
    /// The request lines (`GET /path HTTP/1.1`), in order.
    pub requests: Vec<String>,
}

#[derive(Default)]
struct Shared {
    conns: Mutex<Vec<Arc<Mutex<Conn>>>>,
    open: AtomicUsize,
    most_open: AtomicUsize,
    stop: AtomicBool,
}

/// A running origin on 127.0.0.1.
pub struct RecordingOrigin {
    pub port: u16,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordingOrigin {
    /// Starts one answering after `delay`; `expect_proxy`: every connection starts with a PROXY
    /// header (else requests come at once).
    pub fn start(delay: Duration, expect_proxy: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind origin");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::spawn(move || {
            while !s.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let conn = Arc::new(Mutex::new(Conn::default()));
                        s.conns.lock().unwrap().push(conn.clone());
                        let now = s.open.fetch_add(1, Ordering::SeqCst) + 1;
                        s.most_open.fetch_max(now, Ordering::SeqCst);
                        let s = s.clone();
                        std::thread::spawn(move || {
                            serve(tcp, &conn, delay, expect_proxy, &s.stop);
                            s.open.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Self {
            port,
            shared,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Every connection so far.
    pub fn conns(&self) -> Vec<Conn> {
        let conns = self.shared.conns.lock().unwrap();
        conns.iter().map(|c| c.lock().unwrap().clone()).collect()
    }

    /// The most connections open at once so far.
    pub fn most_open(&self) -> usize {
        self.shared.most_open.load(Ordering::SeqCst)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

impl Drop for RecordingOrigin {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut tcp: TcpStream, conn: &Mutex<Conn>, delay: Duration, expect_proxy: bool, stop: &AtomicBool) {
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut client = "-".to_string();
    let mut header_done = !expect_proxy;
    loop {
        if !header_done {
            match parse(&buf) {
                Ok(Parsed::Done { header, consumed }) => {
                    if let Some(a) = header.addresses {
                        client = a.source.to_string();
                    }
                    conn.lock().unwrap().header = Some(header);
                    buf.drain(..consumed);
                    header_done = true;
                    continue;
                }
                Ok(Parsed::Incomplete) => {}
                Err(e) => {
                    conn.lock().unwrap().header_error = Some(e.kind());
                    return;
                }
            }
        } else if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let line = head.lines().next().unwrap_or_default().to_string();
            conn.lock().unwrap().requests.push(line);
            std::thread::sleep(delay);
            let response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{client}", client.len());
            if tcp.write_all(response.as_bytes()).is_err() {
                return;
            }
            continue;
        }
        match tcp.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// The client address a response body names.
pub fn named(body: &str) -> Option<SocketAddr> {
    body.trim().parse().ok()
}

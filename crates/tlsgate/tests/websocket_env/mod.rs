//! Fixtures for the WebSocket tests: a Python `websockets` origin (origin.py, plain HTTP/1.1)
//! run as a child process, a Python `websockets` client (client.py) that runs a plan of steps
//! over wss:// through the gateway and reports each as a JSON line, and a small RFC 8441 client
//! (the `h2` crate over a BoringSSL connection) with hand-built WebSocket frames. The Python
//! scripts run with the Debian `python3-websockets` package, hence `/usr/bin/python3` rather
//! than whatever `python3` the PATH finds first.
#![allow(dead_code)]

use bytes::{Buf, Bytes};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use tlsgate_testkit::python::{require_python_module, run_script, PythonProcess};

const ORIGIN_PY: &str = include_str!("origin.py");
const CLIENT_PY: &str = include_str!("client.py");

/// Fails loudly unless `/usr/bin/python3` can import `websockets`.
pub fn require_websockets() {
    require_python_module("websockets", "python3-websockets");
}

/// The Python WebSocket origin (origin.py) on a free port; killed on drop. Its
/// [`PythonProcess`] methods (`addr`, `log`, `wait_line`, ...) come through `Deref`.
pub struct WsOrigin(PythonProcess);

impl WsOrigin {
    /// Starts origin.py and waits until it listens.
    pub fn start() -> Self {
        require_websockets();
        Self(PythonProcess::start(
            "WebSocket origin",
            "origin.py",
            ORIGIN_PY,
            &[],
            tlsgate_testkit::free_port(),
        ))
    }
}

impl std::ops::Deref for WsOrigin {
    type Target = PythonProcess;
    fn deref(&self) -> &PythonProcess {
        &self.0
    }
}

/// A single-threaded runtime for a test's async client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `n` pseudo-random (incompressible) bytes, the same for the same `seed`.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs client.py against `wss://localhost:PORT{path}` (verified against `ca`) with `plan`;
/// returns its events: the connection's (`open`, `refused`, `error`), then one per step.
pub fn ws_client(port: u16, ca: &Path, path: &str, plan: &[Value]) -> Vec<Value> {
    require_websockets();
    let url = format!("wss://localhost:{port}{path}");
    let out = run_script(
        "client.py",
        CLIENT_PY,
        &[&url, ca.to_str().unwrap()],
        Value::Array(plan.to_vec()).to_string().as_bytes(),
        Duration::from_secs(60),
    );
    assert_eq!(out.status, Some(0), "client.py failed:\n{}", out.all());
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("JSON line from client.py ({e}): {l}")))
        .collect()
}

/// Plan steps for [`ws_client`].
pub fn send_text(text: &str) -> Value {
    json!({"op": "send", "text": text})
}
pub fn send_bytes(bytes: &[u8]) -> Value {
    json!({"op": "send", "hex": hex(bytes)})
}
pub fn recv() -> Value {
    json!({"op": "recv", "timeout": 10})
}
pub fn close() -> Value {
    json!({"op": "close", "code": 1000})
}
pub fn wait_closed(seconds: f64) -> Value {
    json!({"op": "wait_closed", "timeout": seconds})
}
pub fn chatter(every: f64, seconds: f64) -> Value {
    json!({"op": "chatter", "every": every, "for": seconds})
}

/// An event's events summarised for assertion messages (long hex cut short).
pub fn brief(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if let Some(h) = e.get("hex").and_then(Value::as_str).filter(|h| h.len() > 64) {
                e["hex"] = Value::String(format!("{}... ({} bytes)", &h[..64], h.len() / 2));
            }
            e.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of header `name` (any case) in a `[[name, value], ...]` list.
pub fn header<'a>(list: &'a Value, name: &str) -> Option<&'a str> {
    list.as_array()?.iter().find_map(|p| {
        (p[0].as_str()?.eq_ignore_ascii_case(name))
            .then(|| p[1].as_str())
            .flatten()
    })
}

// ---- RFC 6455 frames by hand, for the HTTP/2 client ----

/// A masked client frame (FIN set) with `opcode` (1 text, 2 binary, 8 close).
pub fn client_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n <= 0xffff => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// A frame read back: FIN, opcode, whether it was masked, the (unmasked) payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    pub fin: bool,
    pub opcode: u8,
    pub masked: bool,
    pub payload: Vec<u8>,
}

/// Takes one whole frame off the front of `buf`, if it holds one.
pub fn take_frame(buf: &mut Vec<u8>) -> Option<Frame> {
    if buf.len() < 2 {
        return None;
    }
    let (fin, opcode, masked) = (buf[0] & 0x80 != 0, buf[0] & 0x0f, buf[1] & 0x80 != 0);
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize, 10),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    let mask = if masked {
        let m: [u8; 4] = buf.get(at..at + 4)?.try_into().unwrap();
        at += 4;
        Some(m)
    } else {
        None
    };
    if buf.len() < at + len {
        return None;
    }
    let mut payload = buf[at..at + len].to_vec();
    if let Some(m) = mask {
        payload.iter_mut().enumerate().for_each(|(i, b)| *b ^= m[i % 4]);
    }
    buf.drain(..at + len);
    Some(Frame {
        fin,
        opcode,
        masked,
        payload,
    })
}

// ---- RFC 8441 client: h2 over BoringSSL ----

/// An HTTP/2 connection to the gateway (ALPN h2, verified against `ca`), its driver spawned.
pub async fn h2_connect(port: u16, ca: &Path) -> h2::client::SendRequest<Bytes> {
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(ca).unwrap();
    b.set_alpn_protos(b"\x02h2").unwrap();
    let config = b.build().configure().unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = tokio_boring::connect(config, "localhost", tcp)
        .await
        .expect("TLS handshake with the gateway");
    assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"h2"[..]), "ALPN h2");
    let (send, conn) = h2::client::handshake(tls).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// An open RFC 8441 WebSocket stream: the response status, and both directions.
pub struct H2Ws {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub send: h2::SendStream<Bytes>,
    pub recv: h2::RecvStream,
    buf: Vec<u8>,
}

/// Sends an extended CONNECT (`:protocol websocket`) for `path` and waits for the response.
pub async fn h2_websocket(client: &mut h2::client::SendRequest<Bytes>, port: u16, path: &str) -> H2Ws {
    let req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("https://localhost:{port}{path}"))
        .header("sec-websocket-version", "13")
        .extension(h2::ext::Protocol::from_static("websocket"))
        .body(())
        .unwrap();
    let ready = client.clone().ready().await.expect("connection ready");
    *client = ready;
    let (resp, send) = client.send_request(req, false).expect("send the extended CONNECT");
    let resp = tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .expect("a response within 10 s")
        .expect("a response");
    let (parts, recv) = resp.into_parts();
    H2Ws {
        status: parts.status,
        headers: parts.headers,
        send,
        recv,
        buf: Vec::new(),
    }
}

impl H2Ws {
    /// Sends one masked client frame.
    pub fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        let frame = client_frame(opcode, payload, [0x37, 0xfa, 0x21, 0x3d]);
        self.send.send_data(Bytes::from(frame), false).expect("send DATA");
    }

    /// The next whole frame, or `None` when the stream ended first; panics after 10 s.
    pub async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = take_frame(&mut self.buf) {
                return Some(f);
            }
            let data = tokio::time::timeout(Duration::from_secs(10), self.recv.data())
                .await
                .expect("a frame within 10 s")?;
            let mut data = data.expect("DATA on the stream");
            let _ = self.recv.flow_control().release_capacity(data.len());
            while data.has_remaining() {
                let chunk = data.chunk();
                self.buf.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
    }

    /// How the stream's receiving side ends within `timeout`: `"end"` (END_STREAM),
    /// `"reset: ..."`, or `"open"` if it did not; panics on more data (an empty DATA frame, as
    /// END_STREAM may come in, is not more).
    pub async fn ending(&mut self, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.recv.data()).await {
                Ok(None) => return "end".into(),
                Ok(Some(Err(e))) => return format!("reset: {e}"),
                Ok(Some(Ok(d))) if d.is_empty() => continue,
                Ok(Some(Ok(d))) => panic!("more data on the stream: {d:?}"),
                Err(_) => return "open".into(),
            }
        }
    }
}

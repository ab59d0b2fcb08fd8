//! A minimal Chrome DevTools Protocol client for the console's browser test: starts headless
//! Chromium with `--remote-debugging-port`, opens the page target's websocket (RFC 6455 client
//! framing written here: text frames, masked, no extensions) and sends `Page.navigate`,
//! `Runtime.evaluate` and `Page.captureScreenshot`. Written by hand rather than pulling a
//! websocket or CDP crate: it is ~150 lines and needs nothing but std and serde_json.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A headless Chromium and a websocket to its first page.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: TcpStream,
    next_id: u64,
    shots: Option<PathBuf>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET over HTTP/1.1 from the DevTools endpoint, which keeps the connection open: reads the
/// header, then `Content-Length` bytes.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok());
            if n == 0 || len.is_some_and(|l| body.len() >= l) {
                return Some(body.to_string());
            }
        } else if n == 0 {
            return None;
        }
    }
}

impl Browser {
    /// Starts Chromium (1280×900) and connects to its page.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`Browser::start`] with more command-line flags (e.g. `--origin-to-force-quic-on=...`),
    /// placed before the first URL. Each browser has its own temporary profile
    /// (`--user-data-dir`), so several can run at once, and its own `TMPDIR` inside it.
    pub fn start_with(flags: &[String]) -> Self {
        let port = tlsgate_testkit::free_port();
        let profile = tempfile::tempdir().expect("temp dir");
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--window-size=1280,900",
                &format!("--remote-debugging-port={port}"),
                &format!("--user-data-dir={}", profile.path().display()),
            ])
            .args(flags)
            .arg("about:blank")
            // Its singleton socket's directory (`org.chromium.Chromium.*`) goes with the
            // profile instead of staying in /tmp after every run.
            .env("TMPDIR", profile.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let deadline = Instant::now() + Duration::from_secs(30);
        let ws_url = loop {
            let page = http_get(port, "/json/list")
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| {
                    v.as_array()?
                        .iter()
                        .find(|t| t["type"] == "page")?
                        .get("webSocketDebuggerUrl")?
                        .as_str()
                        .map(str::to_string)
                });
            if let Some(u) = page {
                break u;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium's DevTools endpoint did not come up");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let path = ws_url
            .split_once(&format!("127.0.0.1:{port}"))
            .or_else(|| ws_url.split_once(&format!("localhost:{port}")))
            .expect("a local websocket URL")
            .1
            .to_string();
        let mut ws = TcpStream::connect(("127.0.0.1", port)).expect("connect to chromium");
        ws.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            ws,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            ws.read_exact(&mut byte).expect("websocket handshake");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "websocket upgrade refused: {head}");
        let shots = std::env::var_os("TLSGATE_SCREENSHOTS").map(PathBuf::from);
        let mut b = Self {
            child,
            _profile: profile,
            ws,
            next_id: 0,
            shots,
        };
        b.call("Page.enable", json!({}));
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    fn send_frame(&mut self, payload: &[u8]) {
        let mask = [0x5a, 0x13, 0xc4, 0x7e];
        let mut frame = vec![0x81u8];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.ws.write_all(&frame).expect("websocket write");
    }

    fn read_message(&mut self) -> String {
        let mut message = Vec::new();
        loop {
            let mut h = [0u8; 2];
            self.ws.read_exact(&mut h).expect("websocket read");
            let (fin, opcode) = (h[0] & 0x80 != 0, h[0] & 0x0f);
            let mut len = u64::from(h[1] & 0x7f);
            if len == 126 {
                let mut b = [0u8; 2];
                self.ws.read_exact(&mut b).unwrap();
                len = u64::from(u16::from_be_bytes(b));
            } else if len == 127 {
                let mut b = [0u8; 8];
                self.ws.read_exact(&mut b).unwrap();
                len = u64::from_be_bytes(b);
            }
            let mut payload = vec![0u8; len as usize];
            self.ws.read_exact(&mut payload).unwrap();
            assert_ne!(opcode, 8, "chromium closed the websocket");
            if opcode == 9 || opcode == 10 {
                continue;
            }
            message.extend_from_slice(&payload);
            if fin {
                return String::from_utf8(message).expect("UTF-8 message");
            }
        }
    }

    /// Calls a CDP method and returns its result (panics on a protocol error).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let v = self.call_raw(method, params);
        assert!(v.get("error").is_none(), "{method}: {}", v["error"]);
        v["result"].clone()
    }

    /// Calls a CDP method; the whole answer (`result` or `error`).
    fn call_raw(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let text = json!({"id": id, "method": method, "params": params}).to_string();
        self.send_frame(text.as_bytes());
        loop {
            let v: Value = serde_json::from_str(&self.read_message()).expect("CDP JSON");
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Navigates and waits for the load event.
    pub fn navigate(&mut self, url: &str) {
        self.navigate_result(url);
    }

    /// Navigates and waits for the load event; `Page.navigate`'s result, whose `errorText` says
    /// why a navigation failed (`net::ERR_...`; the error page is what loaded then).
    pub fn navigate_result(&mut self, url: &str) -> Value {
        let r = self.call("Page.navigate", json!({"url": url}));
        self.wait_js("document.readyState === 'complete'", "page load");
        r
    }

    /// Evaluates `expr` in the page; its value (`{"error": ...}` when the page threw or was
    /// navigating away).
    pub fn eval(&mut self, expr: &str) -> Value {
        let v = self.call_raw(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = v.get("error").or_else(|| v["result"].get("exceptionDetails")) {
            return json!({ "error": e });
        }
        v["result"]["result"]["value"].clone()
    }

    /// Waits (10 s) until `expr` is true in the page.
    pub fn wait_js(&mut self, expr: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.eval(&format!(
                "(() => {{ try {{ return !!({expr}); }} catch (e) {{ return false; }} }})()"
            )) == true
            {
                return;
            }
            if Instant::now() > deadline {
                let body = self.eval("document.body ? document.body.innerText.slice(0, 3000) : ''");
                panic!("waited 10 s for {what} ({expr}); page text: {body}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a PNG screenshot as `$TLSGATE_SCREENSHOTS/NAME.png` when that is set.
    pub fn screenshot(&mut self, name: &str) {
        let Some(dir) = self.shots.clone() else { return };
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64_decode(r["data"].as_str().expect("screenshot data"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// Standard base64 (padding optional).
fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .map(val)
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, v)| acc | (u32::from(*v) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// `--ignore-certificate-errors-spki-list=...`: base64 SHA-256 of the SubjectPublicKeyInfo of a
/// test PKI's two leaves (ECDSA and RSA), which Chromium then accepts (with `--user-data-dir`,
/// which every [`Browser`] has).
pub fn spki_flag(pki: &tlsgate_testkit::TestPki) -> String {
    let hashes: Vec<String> = ["ecdsa.pem", "rsa.pem"]
        .iter()
        .map(|name| {
            let pem = std::fs::read(pki.path(name)).expect("leaf certificate");
            let cert = boring::x509::X509::from_pem(&pem).expect("PEM certificate");
            let spki = cert.public_key().unwrap().public_key_to_der().unwrap();
            boring::base64::encode_block(&boring::sha::sha256(&spki))
        })
        .collect();
    format!("--ignore-certificate-errors-spki-list={}", hashes.join(","))
}

/// The `params` of every event of type `event` (e.g. `QUIC_SESSION_CLOSED`) in a Chromium net log
/// (`--log-net-log`), in order: one event a line, and the file lacks its closing brackets while
/// Chromium runs.
pub fn netlog_events(netlog: &std::path::Path, event: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(netlog).unwrap_or_default();
    let Some(constants) = text
        .lines()
        .next()
        .and_then(|l| serde_json::from_str::<Value>(&format!("{}}}", l.trim_end().trim_end_matches(','))).ok())
    else {
        return Vec::new();
    };
    let wanted = &constants["constants"]["logEventTypes"][event];
    text.lines()
        .skip(1)
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim_end().trim_end_matches(',')).ok())
        .filter(|e| &e["type"] == wanted)
        .map(|e| e["params"].clone())
        .collect()
}

//! Fixtures for the gRPC tests: a Python grpcio origin (plaintext HTTP/2, service `test.Echo`,
//! see server.py) run as a child process, and a Python grpcio client (client.py) that makes a
//! plan of calls over TLS through the gateway and reports each as a JSON line. Both run with the
//! Debian `python3-grpcio` package, hence `/usr/bin/python3` rather than whatever `python3` the
//! PATH finds first.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;
use tlsgate_testkit::python::{require_python_module, run_script, PythonProcess};

const SERVER_PY: &str = include_str!("server.py");
const CLIENT_PY: &str = include_str!("client.py");

/// Fails loudly unless `/usr/bin/python3` can import `grpc`.
pub fn require_grpcio() {
    require_python_module("grpc", "python3-grpcio");
}

/// Message `i` of a `ServerStream` reply of `size` bytes (the same formula as server.py).
pub fn pattern(i: usize, size: usize) -> Vec<u8> {
    (0..size).map(|j| ((i * 31 + j) % 251) as u8).collect()
}

/// A gRPC frame: uncompressed flag, big-endian length, the message (what curl sends).
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex from client.py"))
        .collect()
}

/// The Python gRPC origin (server.py) on a free port; killed on drop. Its [`PythonProcess`]
/// methods (`addr`, `log`, `kill`, ...) come through `Deref`.
pub struct GrpcOrigin(PythonProcess);

impl GrpcOrigin {
    /// Starts server.py and waits until its port accepts connections.
    pub fn start() -> Self {
        require_grpcio();
        Self(PythonProcess::start(
            "gRPC origin",
            "server.py",
            SERVER_PY,
            &[],
            tlsgate_testkit::free_port(),
        ))
    }
}

impl std::ops::Deref for GrpcOrigin {
    type Target = PythonProcess;
    fn deref(&self) -> &PythonProcess {
        &self.0
    }
}

impl std::ops::DerefMut for GrpcOrigin {
    fn deref_mut(&mut self) -> &mut PythonProcess {
        &mut self.0
    }
}

/// One call of a client plan.
#[derive(Clone, Debug)]
pub struct Step {
    method: String,
    kind: &'static str,
    msgs: Vec<Vec<u8>>,
    timeout: Option<f64>,
}

impl Step {
    fn new(method: &str, kind: &'static str, msgs: Vec<Vec<u8>>) -> Self {
        Self {
            method: method.to_string(),
            kind,
            msgs,
            timeout: None,
        }
    }

    /// A unary call of `method` (`/test.Echo/Unary`).
    pub fn unary(method: &str, msg: &[u8]) -> Self {
        Self::new(method, "unary", vec![msg.to_vec()])
    }

    /// A server-streaming call.
    pub fn server_stream(method: &str, msg: &[u8]) -> Self {
        Self::new(method, "server_stream", vec![msg.to_vec()])
    }

    /// A client-streaming call.
    pub fn client_stream(method: &str, msgs: &[Vec<u8>]) -> Self {
        Self::new(method, "client_stream", msgs.to_vec())
    }

    /// A bidirectional call in lock step: each message is sent once the previous one's echo has
    /// come back (so it only completes if both directions stream through the gateway).
    pub fn bidi(method: &str, msgs: &[Vec<u8>]) -> Self {
        Self::new(method, "bidi", msgs.to_vec())
    }

    /// With a client deadline (sent as `grpc-timeout`).
    pub fn timeout(mut self, seconds: f64) -> Self {
        self.timeout = Some(seconds);
        self
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "method": self.method,
            "kind": self.kind,
            "msgs": self.msgs.iter().map(|m| hex(m)).collect::<Vec<_>>(),
            "timeout": self.timeout,
        })
    }
}

/// What one call returned.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub method: String,
    /// Status code name (`OK`, `UNAVAILABLE`, ...).
    pub code: String,
    pub code_num: i64,
    pub details: String,
    /// Every response message, in order.
    pub msgs: Vec<Vec<u8>>,
    /// Initial (header) metadata; binary values as `hex:...`.
    pub initial: Vec<(String, String)>,
    /// Trailing metadata; binary values as `hex:...`.
    pub trailing: Vec<(String, String)>,
    /// How long the call took, seen by the client.
    pub seconds: f64,
}

impl Outcome {
    /// The first value of metadata `key` in `initial` or `trailing`.
    pub fn meta<'a>(list: &'a [(String, String)], key: &str) -> Option<&'a str> {
        list.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A short summary for assertion messages (messages as lengths).
    pub fn brief(&self) -> String {
        let lens: Vec<usize> = self.msgs.iter().map(Vec::len).collect();
        format!(
            "{} {} ({}) {:?} msgs={lens:?} initial={:?} trailing={:?} in {} s",
            self.method, self.code, self.code_num, self.details, self.initial, self.trailing, self.seconds
        )
    }
}

fn pairs(v: &serde_json::Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p[0].as_str().unwrap_or_default().to_string(),
                        p[1].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs client.py against the gateway's TLS port `port` (SNI `localhost`, verified against
/// `ca`): every step in order on one channel; returns one outcome per step.
pub fn call(port: u16, ca: &Path, steps: &[Step]) -> Vec<Outcome> {
    require_grpcio();
    let plan = serde_json::Value::Array(steps.iter().map(Step::json).collect()).to_string();
    let target = format!("127.0.0.1:{port}");
    let out = run_script(
        "client.py",
        CLIENT_PY,
        &[&target, ca.to_str().unwrap()],
        plan.as_bytes(),
        Duration::from_secs(60),
    );
    assert_eq!(out.status, Some(0), "client.py failed:\n{}", out.all());
    let outcomes: Vec<Outcome> = out
        .stdout
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON line from client.py");
            Outcome {
                method: v["method"].as_str().unwrap_or_default().to_string(),
                code: v["code"].as_str().unwrap_or_default().to_string(),
                code_num: v["code_num"].as_i64().unwrap_or(-1),
                details: v["details"].as_str().unwrap_or_default().to_string(),
                msgs: v["msgs"]
                    .as_array()
                    .map(|a| a.iter().map(|m| unhex(m.as_str().unwrap_or_default())).collect())
                    .unwrap_or_default(),
                initial: pairs(&v["initial"]),
                trailing: pairs(&v["trailing"]),
                seconds: v["seconds"].as_f64().unwrap_or(-1.0),
            }
        })
        .collect();
    assert_eq!(outcomes.len(), steps.len(), "one line per call:\n{}", out.all());
    outcomes
}

//! Real processes for tests: `tlsgate serve` and client commands with timeouts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tlsgate_error::{Classify, Side};

/// How long [`GatewayProcess::spawn`] waits for the process to get ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// What a client command produced.
#[derive(Debug)]
pub struct Output {
    /// Exit status (None if killed at the timeout).
    pub status: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// stdout and stderr together.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `program args`, feeding `stdin` and then keeping stdin open for `hold` before closing it
/// (some clients, like `openssl s_client`, quit at end of input). Killed after `timeout`.
pub fn run(program: &str, args: &[&str], stdin: &[u8], hold: Duration, timeout: Duration) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
        std::thread::sleep(hold);
        drop(input);
    });
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.code(),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    let _ = writer.join();
    Output {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    }
}

/// Why a process under test did not start. Tests that expect a refusal read what it logged
/// ([`StartError::log`]) or the whole message (the reason, then the log).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The binary could not be executed.
    #[error("cannot start {}: {source}", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It exited before it was ready (it refused its configuration, a port was taken, ...).
    #[error("exited with {status}\n{log}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// Everything it logged.
        log: String,
    },
    /// It kept running but never got ready.
    #[error("not ready after {} s\n{log}", READY_TIMEOUT.as_secs())]
    NotReady {
        /// Everything it logged.
        log: String,
    },
}

impl StartError {
    /// What the process logged before it exited or was given up on (empty when it never ran).
    pub fn log(&self) -> &str {
        match self {
            Self::Spawn { .. } => "",
            Self::Exited { log, .. } | Self::NotReady { log } => log,
        }
    }
}

impl Classify for StartError {
    fn side(&self) -> Side {
        match self {
            Self::Spawn { .. } => Side::Internal,
            Self::Exited { .. } | Self::NotReady { .. } => Side::Upstream,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Spawn { .. } => "spawn",
            Self::Exited { .. } => "exited",
            Self::NotReady { .. } => "not_ready",
        }
    }
}

/// For test helpers that return `Result<_, String>`: the reason and the log.
impl From<StartError> for String {
    fn from(e: StartError) -> String {
        e.to_string()
    }
}

/// A running `tlsgate serve` process; stopped (SIGTERM, then SIGKILL) on drop.
pub struct GatewayProcess {
    child: Option<Child>,
    /// Directory with the config file and the log.
    pub dir: tempfile::TempDir,
    /// The configuration file.
    pub config: PathBuf,
    /// Admin listener port.
    pub admin_port: u16,
    log: PathBuf,
}

impl GatewayProcess {
    /// Writes `config` (TOML) to a file and starts `binary serve --config FILE`; waits until the
    /// admin listener answers /healthz and every `wait_ports` accepts connections.
    pub fn start(binary: &Path, config: &str, admin_port: u16, wait_ports: &[u16]) -> Self {
        Self::try_start(binary, config, admin_port, wait_ports).unwrap_or_else(|e| panic!("tlsgate did not start: {e}"))
    }

    /// Like [`GatewayProcess::start`], returning why (with the log) when the process exits or
    /// never gets ready.
    pub fn try_start(binary: &Path, config: &str, admin_port: u16, wait_ports: &[u16]) -> Result<Self, StartError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let config_path = dir.path().join("tlsgate.toml");
        std::fs::write(&config_path, config).expect("write config");
        let arg = config_path.to_str().expect("utf-8 path").to_string();
        Self::spawn(
            binary,
            &["serve", "--config", &arg],
            dir,
            config_path,
            admin_port,
            wait_ports,
        )
    }

    /// Starts `binary` with arbitrary arguments (e.g. `serve --demo ...`).
    pub fn spawn(
        binary: &Path,
        args: &[&str],
        dir: tempfile::TempDir,
        config: PathBuf,
        admin_port: u16,
        wait_ports: &[u16],
    ) -> Result<Self, StartError> {
        let log = dir.path().join("tlsgate.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(binary)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("TLSGATE_TEST_LOG").unwrap_or_else(|_| "debug".into()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("dup"))
            .stderr(log_file)
            .spawn()
            .map_err(|source| StartError::Spawn {
                binary: binary.to_path_buf(),
                source,
            })?;
        let mut gw = Self {
            child: Some(child),
            dir,
            config,
            admin_port,
            log,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = gw.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(StartError::Exited { status, log: gw.log() });
            }
            let ready = gw.http_get("/healthz").is_some_and(|(code, _)| code == 200)
                && wait_ports.iter().all(|p| crate::listening(*p));
            if ready {
                gw.settle_probes(deadline);
                return Ok(gw);
            }
            if Instant::now() > deadline {
                return Err(StartError::NotReady { log: gw.log() });
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits (until `deadline` at most) for the gateway to see the readiness probes' bare
    /// connections close, so a test starts with no connection open: on a loaded machine the
    /// probe's close can be noticed late and would otherwise hold one of a small
    /// `max_connections` (seen in CI as a held connection shed instead of the fourth one).
    fn settle_probes(&self, deadline: Instant) {
        let deadline = deadline.min(Instant::now() + Duration::from_secs(3));
        while Instant::now() < deadline && self.metric("tlsgate_open_connections", &[]) > 0.0 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends a signal by name (`HUP`, `TERM`, ...).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{name} failed");
    }

    /// Waits for the process to exit; returns its exit code, or None on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status.code().unwrap_or(-1));
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A plain HTTP/1.1 request to the admin listener: (status, body).
    pub fn http_get(&self, path: &str) -> Option<(u16, String)> {
        admin_request(self.admin_port, "GET", path, "")
    }

    /// Any request with a body to the admin listener (JSON APIs): (status, body).
    pub fn admin_call(&self, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
        admin_request(self.admin_port, method, path, body)
    }

    /// POST /reload through the admin listener.
    pub fn reload(&self) -> (u16, String) {
        admin_request(self.admin_port, "POST", "/reload", "").expect("admin reachable")
    }

    /// The Prometheus text.
    pub fn metrics(&self) -> String {
        self.http_get("/metrics").expect("metrics").1
    }

    /// Sum of every sample of `name` whose labels contain all of `labels` (`key="value"` pieces).
    pub fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        metric_sum(&self.metrics(), name, labels)
    }
}

/// Sums samples of `name` in Prometheus text whose label set contains every piece of `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, label_part) = match series.split_once('{') {
                Some((m, rest)) => (m, rest),
                None => (series, ""),
            };
            (metric == name && labels.iter().all(|want| label_part.contains(want)))
                .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

fn admin_request(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_is_a_spawn_error_without_a_log() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("none.toml");
        let e = GatewayProcess::spawn(Path::new("/nonexistent/tlsgate"), &[], dir, config, 1, &[])
            .err()
            .expect("refused");
        assert_eq!((e.side(), e.kind(), e.log()), (Side::Internal, "spawn", ""));
        assert!(e.to_string().starts_with("cannot start /nonexistent/tlsgate: "), "{e}");
        assert!(String::from(e).starts_with("cannot start"));
    }
}

//! Python scripts as test fixtures: a server script run as a child process on a free loopback
//! port ([`PythonProcess`], killed when dropped), a client script run to completion
//! ([`run_script`]), and [`require_python_module`], which fails loudly when a module the script
//! needs does not import.
//!
//! Everything runs with [`PYTHON`], `/usr/bin/python3`, on purpose: the Debian packages the
//! scripts need (`python3-grpcio`, `python3-websockets`) install into it, while the `python3`
//! first on the PATH may be another interpreter (a pyenv) without them.

use crate::Output;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The interpreter the Debian `python3-*` packages install into.
pub const PYTHON: &str = "/usr/bin/python3";

/// Fails loudly unless [`PYTHON`] can import `module`, naming the Debian package that provides
/// it (`require_python_module("grpc", "python3-grpcio")`).
pub fn require_python_module(module: &str, debian_package: &str) {
    let ok = Command::new(PYTHON)
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{PYTHON} cannot import {module}: {debian_package} is not installed; run .ci/run (it installs the test dependencies)"
    );
}

/// Writes `source` as `file_name` into a new temporary directory; the directory and the path.
fn write_script(file_name: &str, source: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join(file_name);
    std::fs::write(&script, source).unwrap_or_else(|e| panic!("write {file_name}: {e}"));
    (dir, script)
}

/// A Python script running as a child process, listening on `port` on 127.0.0.1; killed on drop.
pub struct PythonProcess {
    /// What it is, for panic messages ("gRPC origin").
    what: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
    log: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl PythonProcess {
    /// Writes `source` as `file_name` into a new temporary directory, runs
    /// `PYTHON file_name PORT ARGS...` there with its stdout and stderr in `<stem>.log` (see
    /// [`log`](Self::log)), and waits up to 20 s until `port` accepts connections; panics,
    /// with the log, if the script exits first or never listens. `what` names it in those
    /// messages.
    pub fn start(what: &str, file_name: &str, source: &str, args: &[&str], port: u16) -> Self {
        let (dir, script) = write_script(file_name, source);
        let log = script.with_extension("log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(PYTHON)
            .arg(&script)
            .arg(port.to_string())
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("start the {what}: {e}"));
        let mut process = Self {
            what: what.to_string(),
            child: Some(child),
            dir,
            log,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = process.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("{what} exited with {status}:\n{}", process.log());
            }
            if crate::listening(port) {
                return process;
            }
            assert!(
                Instant::now() < deadline,
                "{what} not listening after 20 s:\n{}",
                process.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `127.0.0.1:PORT`, for `servers = [...]`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The script's temporary directory (removed on drop).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// What the script printed so far (stdout and stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `timeout` for a log line starting with `prefix`; whether one came.
    pub fn wait_line(&self, prefix: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.log().lines().any(|l| l.starts_with(prefix)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Kills the script now (SIGKILL: its connections are reset) and waits until its port
    /// refuses connections.
    pub fn kill(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(5);
        while crate::listening(self.port) {
            assert!(Instant::now() < deadline, "{} port still open after kill", self.what);
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PythonProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes `source` as `file_name` into a new temporary directory and runs
/// `PYTHON file_name ARGS...` to completion with `stdin` (see [`crate::run`]); killed after
/// `timeout`.
pub fn run_script(file_name: &str, source: &str, args: &[&str], stdin: &[u8], timeout: Duration) -> Output {
    let (_dir, script) = write_script(file_name, source);
    let script = script.to_str().expect("UTF-8 temp path");
    let argv: Vec<&str> = std::iter::once(script).chain(args.iter().copied()).collect();
    crate::run(PYTHON, &argv, stdin, Duration::ZERO, timeout)
}

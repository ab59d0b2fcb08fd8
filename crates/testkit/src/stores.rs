//! Real session stores for the cluster tests: `redis-server` (alone or with a Sentinel) and
//! `memcached`, each started on a free loopback port in its own temporary directory and killed
//! when dropped. They can be paused (SIGSTOP: a store that accepts but never answers), resumed,
//! killed and restarted on the same port.

use crate::free_port;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A store process.
pub struct StoreProcess {
    program: &'static str,
    args: Vec<String>,
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Working directory (Redis config and dump files).
    pub dir: tempfile::TempDir,
}

impl StoreProcess {
    fn start(program: &'static str, args: Vec<String>, port: u16, dir: tempfile::TempDir) -> Self {
        crate::require(program);
        let mut s = Self {
            program,
            args,
            child: None,
            port,
            dir,
        };
        s.restart();
        s
    }

    /// `redis-server` on a free port, without persistence.
    pub fn redis() -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().expect("temp dir");
        let args = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            dir.path().display().to_string(),
        ];
        Self::start("redis-server", args, port, dir)
    }

    /// A Redis Cluster of `n` masters (no replicas) on free ports, slots spread by
    /// `redis-cli --cluster create`; returns once every node reports `cluster_state:ok`.
    pub fn redis_cluster(n: usize) -> Vec<Self> {
        let nodes: Vec<Self> = (0..n)
            .map(|_| {
                let port = free_port();
                let dir = tempfile::tempdir().expect("temp dir");
                let args = vec![
                    "--port".into(),
                    port.to_string(),
                    "--bind".into(),
                    "127.0.0.1".into(),
                    "--save".into(),
                    String::new(),
                    "--appendonly".into(),
                    "no".into(),
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-config-file".into(),
                    dir.path().join("nodes.conf").display().to_string(),
                    "--dir".into(),
                    dir.path().display().to_string(),
                ];
                Self::start("redis-server", args, port, dir)
            })
            .collect();
        let mut args = vec!["--cluster".to_string(), "create".into()];
        args.extend(nodes.iter().map(Self::addr));
        args.extend(["--cluster-replicas".into(), "0".into(), "--cluster-yes".into()]);
        let out = Command::new("redis-cli")
            .args(&args)
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !nodes
            .iter()
            .all(|n| n.redis_cli(&["cluster", "info"]).contains("cluster_state:ok"))
        {
            assert!(
                Instant::now() < deadline,
                "the Redis Cluster never reached cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        nodes
    }

    /// A Redis Sentinel on a free port watching `master` as service `name`.
    pub fn sentinel(master: &StoreProcess, name: &str) -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().expect("temp dir");
        let conf: PathBuf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {name} 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds {name} 2000\n",
                dir.path().display(),
                master.port
            ),
        )
        .expect("write sentinel.conf");
        let args = vec![conf.display().to_string(), "--sentinel".into()];
        Self::start("redis-server", args, port, dir)
    }

    /// `memcached` on a free port (64 MB).
    pub fn memcached() -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().expect("temp dir");
        let mut args: Vec<String> = vec!["-l".into(), "127.0.0.1".into(), "-p".into(), port.to_string()];
        args.extend(["-U".into(), "0".into(), "-m".into(), "64".into()]);
        if nix_is_root() {
            args.extend(["-u".into(), "root".into()]);
        }
        Self::start("memcached", args, port, dir)
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// (Re)starts the process on its port and waits until it accepts connections.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(self.program)
            .args(&self.args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !crate::listening(self.port) {
            assert!(
                Instant::now() < deadline,
                "{} did not listen on {}",
                self.program,
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (the port closes: connections are refused).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the process (SIGSTOP): connections are accepted by the kernel but never answered.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Continues a paused process.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill").args([sig, &c.id().to_string()]).status();
        }
    }

    /// Runs `redis-cli -p PORT args…` and returns its stdout (Redis only).
    pub fn redis_cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

impl Drop for StoreProcess {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}

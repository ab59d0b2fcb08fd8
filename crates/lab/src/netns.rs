//! Network namespaces: unique names, creation and removal through `ip`, running code or commands
//! inside one, and the cleanup of what a run leaves behind (Drop, panic, Ctrl-C/SIGTERM, and a
//! sweep of namespaces whose creating process is gone).
//!
//! Names are `tgl<pid>x<counter><random>` plus a side letter, so parallel runs (processes, test
//! threads) never collide; the pid in the name lets a later run remove leftovers of a killed one.

use anyhow::{bail, Context};
use std::collections::BTreeSet;
use std::fs::File;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once};

/// Prefix of every namespace the lab creates.
pub const PREFIX: &str = "tgl";

static COUNTER: AtomicU32 = AtomicU32::new(0);
/// Namespaces alive in this process (removed on Ctrl-C / SIGTERM).
static LIVE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// A fresh run id: `tgl<pid>x<counter><4 hex random>`.
pub fn unique_id() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{PREFIX}{}x{n}{:04x}", std::process::id(), rand::random::<u16>())
}

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    run_checked(Command::new("ip").args(args))
}

/// Runs a command, failing with its stderr.
pub fn run_checked(cmd: &mut Command) -> anyhow::Result<()> {
    let out: Output = cmd.output().with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Sets a sysctl inside a namespace.
pub fn sysctl(ns: &str, key: &str, value: &str) -> anyhow::Result<()> {
    run_checked(Command::new("ip").args(["netns", "exec", ns, "sysctl", "-q", "-w", &format!("{key}={value}")]))
}

/// A namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` with its loopback up.
    pub fn create(name: &str) -> anyhow::Result<Self> {
        install_signal_cleanup();
        sweep_stale();
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string());
        let ns = Self { name: name.to_string() };
        ip(&["netns", "add", name])?;
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Moves the calling thread into this namespace (sockets it creates afterwards live there).
    pub fn enter(&self) -> anyhow::Result<()> {
        enter(&self.name)
    }

    /// Runs `f` on a new thread inside this namespace.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> anyhow::Result<std::thread::JoinHandle<T>> {
        let name = self.name.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::Builder::new().name(format!("ns-{name}")).spawn(move || {
            let r = enter(&name);
            let ok = r.is_ok();
            let _ = tx.send(r);
            if !ok {
                panic!("cannot enter namespace {name}");
            }
            f()
        })?;
        rx.recv().context("namespace thread died")??;
        Ok(h)
    }

    /// A command run inside this namespace (`ip netns exec NAME PROGRAM`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        delete(&self.name);
    }
}

/// Moves the calling thread into namespace `name`.
pub fn enter(name: &str) -> anyhow::Result<()> {
    let f = File::open(format!("/run/netns/{name}")).with_context(|| format!("namespace {name}"))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).with_context(|| format!("setns {name}"))?;
    Ok(())
}

fn delete(name: &str) {
    let _ = Command::new("ip").args(["netns", "del", name]).output();
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
}

/// Child processes running inside lab namespaces (killed on Ctrl-C / SIGTERM).
static CHILDREN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Records a child process to kill on Ctrl-C / SIGTERM.
pub fn register_child(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
}

/// Forgets a child process (it was reaped).
pub fn unregister_child(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
}

/// Kills registered children, then deletes every namespace still alive in this process.
pub fn cleanup_all() {
    let pids: Vec<u32> = CHILDREN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    for pid in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let names: Vec<String> = LIVE.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
    for n in names {
        delete(&n);
    }
}

fn install_signal_cleanup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Fails when the embedding program has its own handler; that one must clean up then.
        let _ = ctrlc::set_handler(|| {
            cleanup_all();
            std::process::exit(130);
        });
    });
}

/// Removes lab namespaces whose creating process no longer exists (a run killed by SIGKILL).
pub fn sweep_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some((pid, _)) = rest.split_once('x') else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// Lists the lab's namespaces that exist now.
pub fn list() -> Vec<String> {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return vec![];
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(str::to_string)
        .collect()
}

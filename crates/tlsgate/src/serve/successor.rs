//! SIGUSR2 (`systemctl kill -s USR2 --kill-whom=main tlsgate`): the running gateway starts its
//! own successor, as nginx does: the program it was started as (`argv[0]`, which after a
//! package upgrade is the new binary) with the same arguments and `--upgrade`. The successor
//! inherits stdout/stderr (the journal) and `$NOTIFY_SOCKET`, is in the service's cgroup, takes
//! over through the upgrade socket and announces itself to systemd (`MAINPID=`); this process
//! logs how it ended.

use std::ffi::OsString;
use std::process::Stdio;

/// The successor's command line: this process's own, with `--upgrade` once.
pub fn command_line(mut args: impl Iterator<Item = OsString>) -> (OsString, Vec<OsString>) {
    let program = args.next().unwrap_or_else(|| "tlsgate".into());
    let mut rest: Vec<OsString> = args.collect();
    if !rest.iter().any(|a| a == "--upgrade") {
        rest.push("--upgrade".into());
    }
    (program, rest)
}

/// Starts the successor; returns its process ID. Its exit is logged (a failure to take over
/// is also logged by the upgrade channel, with the successor's reason).
pub fn spawn() -> std::io::Result<u32> {
    let (program, args) = command_line(std::env::args_os());
    let mut child = tokio::process::Command::new(&program)
        .args(&args)
        .stdin(Stdio::null())
        .spawn()?;
    let pid = child.id().unwrap_or(0);
    tracing::info!(
        successor = pid,
        program = %program.to_string_lossy(),
        "SIGUSR2: started process {pid} to take over"
    );
    tokio::spawn(async move {
        match child.wait().await {
            Ok(status) if status.success() => tracing::info!(successor = pid, "process {pid} exited ({status})"),
            Ok(status) => tracing::warn!(successor = pid, "process {pid} exited with {status}"),
            Err(e) => tracing::warn!(successor = pid, error = %e, "cannot wait for process {pid}"),
        }
    });
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::command_line;

    #[test]
    fn the_successor_runs_the_same_command_with_upgrade_once() {
        let args = |v: &[&str]| v.iter().map(|s| s.into()).collect::<Vec<std::ffi::OsString>>();
        let (p, rest) = command_line(args(&["/usr/bin/tlsgate", "serve", "--config", "/etc/t.toml"]).into_iter());
        assert_eq!(p, "/usr/bin/tlsgate");
        assert_eq!(rest, args(&["serve", "--config", "/etc/t.toml", "--upgrade"]));
        let (_, again) = command_line(args(&["tlsgate", "serve", "--upgrade", "--demo"]).into_iter());
        assert_eq!(again, args(&["serve", "--upgrade", "--demo"]), "--upgrade not doubled");
    }
}

//! `tlsgate reload`: POST /reload to the running gateway's admin listener.
//!
//! Exit status: 0 when the new configuration was installed in full; 1 when it was refused (the
//! old one keeps serving) or the gateway could not be reached; [`EXIT_NOT_APPLIED`] (3) when it
//! was installed but some changes take a restart (listeners, admin address, workers, `[cluster]`,
//! `[control]`, `[log]`): they are listed on stderr, one `not applied, needs a restart: ...` line
//! each, and everything else in the file is in effect.

use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Exit status of a reload that was installed with changes left for the next restart.
pub const EXIT_NOT_APPLIED: u8 = 3;

pub fn run(config: Option<&Path>, admin: Option<SocketAddr>) -> anyhow::Result<ExitCode> {
    let addr = match (admin, config) {
        (Some(a), _) => a,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
            let cfg = tlsgate_config::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            cfg.admin.listen.context(
                "admin.listen is not set: the gateway has no admin listener to reload through (send it SIGHUP instead)",
            )?
        }
        (None, None) => bail!("give --config or --admin"),
    };
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .with_context(|| format!("cannot reach the admin listener at {addr}; is tlsgate running?"))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(
        format!(
            "POST /reload HTTP/1.1\r\nHost: {addr}\r\n{}: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            tlsgate_admin::guard::REQUEST_HEADER
        )
        .as_bytes(),
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split_whitespace().nth(1).unwrap_or("");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let body = body.trim();
    let not_applied = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case(tlsgate_admin::NOT_APPLIED_HEADER))
        .and_then(|(_, n)| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if status != "200" {
        eprintln!("{body}");
        return Ok(ExitCode::FAILURE);
    }
    if not_applied == 0 {
        println!("{body}");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("{body}");
    eprintln!(
        "tlsgate reload: {not_applied} change(s) not applied; restart tlsgate to apply them (exit status {EXIT_NOT_APPLIED})"
    );
    Ok(ExitCode::from(EXIT_NOT_APPLIED))
}

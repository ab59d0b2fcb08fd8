//! `tlsgate reopen-logs`: POST /reopen-logs to the running gateway's admin listener, so it
//! reopens `[log] access_log_file` at its path (logrotate's `postrotate`; SIGUSR1 does the same).

use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

pub fn run(config: Option<&Path>, admin: Option<SocketAddr>) -> anyhow::Result<ExitCode> {
    let addr = match (admin, config) {
        (Some(a), _) => a,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
            let cfg = tlsgate_config::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            cfg.admin
                .listen
                .context("admin.listen is not set: the gateway has no admin listener (send it SIGUSR1 instead)")?
        }
        (None, None) => bail!("give --config or --admin"),
    };
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .with_context(|| format!("cannot reach the admin listener at {addr}; is tlsgate running?"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(
        format!(
            "POST /reopen-logs HTTP/1.1\r\nHost: {addr}\r\n{}: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            tlsgate_admin::guard::REQUEST_HEADER
        )
        .as_bytes(),
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split_whitespace().nth(1).unwrap_or("");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim();
    if status == "200" {
        println!("{body}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{body}");
        Ok(ExitCode::FAILURE)
    }
}

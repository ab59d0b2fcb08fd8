//! The one client of the gateway's admin listener that our commands share (`tlsgate reload`,
//! `tlsgate reopen-logs`): find the admin address from `--admin` or the configuration file, and
//! POST with the header the admin guard requires for state changes.

use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// The admin address: `--admin`, else `[admin] listen` of the configuration; `instead` says what
/// to do when the configuration has no admin listener (e.g. "send it SIGHUP instead").
pub fn address(config: Option<&Path>, admin: Option<SocketAddr>, instead: &str) -> anyhow::Result<SocketAddr> {
    match (admin, config) {
        (Some(a), _) => Ok(a),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
            let cfg = tlsgate_config::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            cfg.admin
                .listen
                .with_context(|| format!("admin.listen is not set: the gateway has no admin listener ({instead})"))
        }
        (None, None) => bail!("give --config or --admin"),
    }
}

/// An admin answer: status code, header block, trimmed body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The value of a response header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }
}

/// POSTs an empty body to `path` on the admin listener at `addr` and reads the answer.
pub fn post(addr: SocketAddr, path: &str, timeout: Duration) -> anyhow::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .with_context(|| format!("cannot reach the admin listener at {addr}; is tlsgate running?"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{}: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            tlsgate_admin::guard::REQUEST_HEADER
        )
        .as_bytes(),
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.trim().to_string(),
    })
}

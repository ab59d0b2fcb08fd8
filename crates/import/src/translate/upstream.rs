//! `upstream { ... }` blocks and `proxy_pass`/`grpc_pass` targets to `[[upstream]]` groups:
//! servers (weights, backups and `down` listed), `least_conn`, `keepalive`, and the timeouts the
//! locations that use a group ask for.

use super::out::{arr, q, Table};
use super::reasons::why_not;
use super::values::{duration_text, parse_time};
use super::Report;
use crate::nginx::{Conf, Directive};

/// A timeout a group got from a location, and where.
#[derive(Debug, Clone)]
pub struct Timeout<'a> {
    /// The directive.
    pub d: &'a Directive,
    /// tlsgate duration text.
    pub text: String,
}

/// An upstream group being built.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    /// Name routes use.
    pub name: String,
    /// The `upstream` block, or None for a group made from a `proxy_pass` address.
    pub block: Option<&'a Directive>,
    /// `host:port` of each server.
    pub servers: Vec<String>,
    /// Reached over TLS (`https://`, `grpcs://`); None until a location uses the group.
    pub tls: Option<bool>,
    /// Spoken to with HTTP/2 (`grpc_pass`).
    pub http2: bool,
    /// Fields from the block (`balance`, `max_idle_per_server`, ...).
    pub fields: Table,
    /// `proxy_connect_timeout` of the first location using the group.
    pub connect_timeout: Option<Timeout<'a>>,
    /// `proxy_read_timeout` of the first location using the group.
    pub header_timeout: Option<Timeout<'a>>,
}

/// `host:port` of an nginx server address, or None for one tlsgate cannot reach.
pub fn host_port(addr: &str, default_port: u16) -> Option<String> {
    if addr.starts_with("unix:") || addr.is_empty() || crate::nginx::has_variable(addr) {
        return None;
    }
    if addr.starts_with('[') {
        return Some(if addr.contains("]:") {
            addr.to_string()
        } else {
            format!("{addr}:{default_port}")
        });
    }
    match addr.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') && p.parse::<u16>().is_ok() => Some(addr.to_string()),
        Some(_) => None,
        None => Some(format!("{addr}:{default_port}")),
    }
}

/// Builds a group from an `upstream` block.
pub fn from_block<'a>(conf: &Conf, d: &'a Directive, report: &mut Report) -> Group<'a> {
    let mut g = Group {
        name: d.arg(0).unwrap_or("upstream").to_string(),
        block: Some(d),
        servers: Vec::new(),
        tls: None,
        http2: false,
        fields: Table::new("[[upstream]]"),
        connect_timeout: None,
        header_timeout: None,
    };
    let mut fail_timeout: Option<(&Directive, u64)> = None;
    for c in d.children() {
        let from = Some(conf.place(c.at));
        match c.name.as_str() {
            "server" => {
                let Some(addr) = c.arg(0).and_then(|a| host_port(a, 80)) else {
                    report.add(
                        c,
                        "not translated: tlsgate reaches origins over TCP by host:port (no unix sockets)",
                    );
                    continue;
                };
                let mut notes = Vec::new();
                let mut keep = true;
                for p in c.args.iter().skip(1).map(|w| w.text.as_str()) {
                    let (k, v) = p.split_once('=').map_or((p, ""), |(k, v)| (k, v));
                    match k {
                        "weight" if v == "1" => {}
                        "weight" => notes.push(format!("{p} ignored: tlsgate balances servers equally")),
                        "max_fails" => notes.push(format!(
                            "{p} ignored: tlsgate skips a server for fail_timeout after one failed connect"
                        )),
                        "fail_timeout" => match parse_time(v) {
                            Some(ms) => match fail_timeout {
                                Some((_, prev)) if prev != ms => notes.push(format!(
                                    "{p} ignored: tlsgate has one fail_timeout per upstream ({} is used)",
                                    duration_text(prev)
                                )),
                                _ => fail_timeout = Some((c, ms)),
                            },
                            None => notes.push(format!("{p}: not a time")),
                        },
                        "backup" => {
                            keep = false;
                            notes.push("backup server left out: tlsgate has no backup servers".into());
                        }
                        "down" => {
                            keep = false;
                            notes.push("marked down: left out".into());
                        }
                        _ => notes.push(format!("{k}: no equivalent in tlsgate")),
                    }
                }
                if !notes.is_empty() {
                    report.add(c, notes.join("; "));
                }
                if keep {
                    g.servers.push(addr);
                }
            }
            "least_conn" => g.fields.set("balance", q("least_conn"), from),
            "ip_hash" | "hash" | "random" | "sticky" | "ntlm" => report.add(
                c,
                "not translated: tlsgate balances round_robin or least_conn (round_robin is used)",
            ),
            "keepalive" => match c.arg(0).and_then(|a| a.parse::<usize>().ok()) {
                Some(n) => g.fields.set(
                    "max_idle_per_server",
                    n.to_string(),
                    from.map(|f| format!("{f} (nginx: idle connections per worker for the group)")),
                ),
                None => report.add(c, "not translated: not a number"),
            },
            "keepalive_timeout" => match c.arg(0).and_then(parse_time).filter(|ms| *ms > 0) {
                Some(ms) => g.fields.set("idle_timeout", q(&duration_text(ms)), from),
                None => report.add(c, "not translated: not a time"),
            },
            "zone" => report.add(c, "not needed: tlsgate shares upstream state between its workers"),
            "keepalive_requests" | "keepalive_time" => report.add(
                c,
                "not translated: tlsgate keeps an origin connection while it is healthy and used",
            ),
            other => report.add(c, why_not(other)),
        }
    }
    if let Some((d, ms)) = fail_timeout {
        g.fields
            .set("fail_timeout", q(&duration_text(ms)), Some(conf.place(d.at)));
    }
    g
}

impl Group<'_> {
    /// The `[[upstream]]` table.
    pub fn table(&self, conf: &Conf) -> Table {
        let mut t = Table::new("[[upstream]]");
        if let Some(b) = self.block {
            t.notes.push(format!("upstream {} at {}", self.name, conf.place(b.at)));
        }
        t.set("name", q(&self.name), None);
        let tls = self.tls.unwrap_or(false);
        let servers: Vec<String> = self
            .servers
            .iter()
            .map(|s| if tls { format!("https://{s}") } else { s.clone() })
            .collect();
        t.set("servers", arr(&servers), None);
        if self.http2 {
            t.set("protocol", q("http2"), None);
        }
        for f in &self.fields.fields {
            t.fields.push(f.clone());
        }
        for (key, timeout) in [
            ("connect_timeout", &self.connect_timeout),
            ("header_timeout", &self.header_timeout),
        ] {
            if let Some(tm) = timeout {
                t.set(key, q(&tm.text), Some(conf.place(tm.d.at)));
            }
        }
        t
    }
}

impl<'a> Group<'a> {
    /// Records a timeout from a location; a different value from another location is listed.
    pub fn timeout(&mut self, conf: &Conf, which: &str, d: &'a Directive, report: &mut Report) {
        let Some(ms) = d.arg(0).and_then(parse_time).filter(|ms| *ms > 0) else {
            report.add(d, "not translated: not a time above zero");
            return;
        };
        let text = duration_text(ms);
        let slot = if which == "connect" {
            &mut self.connect_timeout
        } else {
            &mut self.header_timeout
        };
        match slot {
            None => *slot = Some(Timeout { d, text }),
            Some(prev) if prev.text != text => report.add(
                d,
                format!(
                    "not translated: tlsgate sets timeouts per upstream; {} already has {} from {}",
                    self.name,
                    prev.text,
                    conf.place(prev.d.at)
                ),
            ),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses() {
        assert_eq!(host_port("10.0.0.1:8080", 80).as_deref(), Some("10.0.0.1:8080"));
        assert_eq!(host_port("app.internal", 80).as_deref(), Some("app.internal:80"));
        assert_eq!(host_port("[::1]:9000", 80).as_deref(), Some("[::1]:9000"));
        assert_eq!(host_port("[::1]", 443).as_deref(), Some("[::1]:443"));
        assert_eq!(host_port("unix:/run/app.sock", 80), None);
        assert_eq!(host_port("a:b", 80), None);
    }
}

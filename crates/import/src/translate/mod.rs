//! nginx directives to tlsgate TOML. The walk visits every directive once, in its context
//! (main, `http`, `server`, `location`, `upstream`), and either turns it into TOML fields or
//! lists it as a [`Finding`]: `FILE:LINE: directive: why`.
//!
//! - [`server`]: TLS servers to `[[site]]`s, redirect servers to `redirect` listeners;
//! - [`location`]: locations to `[[site.route]]`s; [`upstream`]: `[[upstream]]` groups;
//! - [`tls`] (with [`ciphers`]): the `[tls]` section; [`listen`]: `[[listener]]` addresses;
//! - [`out`]: the TOML text; [`values`]: nginx times, sizes, inheritance; [`reasons`]: why
//!   the rest is left out.

pub mod ciphers;
pub mod listen;
pub mod location;
pub mod out;
pub mod reasons;
pub mod server;
pub mod tls;
pub mod upstream;
pub mod values;

use crate::error::ImportError;
use crate::nginx::{Conf, Directive, Pos};
use out::{arr, q, Doc, Table};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use values::{duration_text, parse_time, Scope};

/// One directive left out (or changed in meaning), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `FILE:LINE`.
    pub place: String,
    /// The directive's name.
    pub directive: String,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.place, self.directive, self.why)
    }
}

/// The translation: TOML text and the findings, in file and line order.
#[derive(Debug, Clone)]
pub struct Translation {
    /// The tlsgate configuration.
    pub toml: String,
    /// What was not translated.
    pub findings: Vec<Finding>,
}

/// Findings by directive position: each directive is listed once, its reasons joined.
#[derive(Debug, Default)]
pub struct Report {
    entries: BTreeMap<Pos, (String, Vec<String>)>,
}

impl Report {
    /// Lists directive `d` with `why` (once per distinct reason).
    pub fn add(&mut self, d: &Directive, why: impl Into<String>) {
        self.add_at(d.at, &d.name, why);
    }

    /// Lists the directive `name` at `at`.
    pub fn add_at(&mut self, at: Pos, name: &str, why: impl Into<String>) {
        let why = why.into();
        let e = self.entries.entry(at).or_insert_with(|| (name.to_string(), Vec::new()));
        if !e.1.contains(&why) {
            e.1.push(why);
        }
    }

    fn findings(&self, conf: &Conf) -> Vec<Finding> {
        self.entries
            .iter()
            .map(|(at, (name, whys))| Finding {
                place: conf.place(*at),
                directive: name.clone(),
                why: whys.join("; "),
            })
            .collect()
    }
}

/// What the main and `http` contexts hold.
#[derive(Default)]
struct Http<'a> {
    /// http-level directives (main and `http {}` merged), for inheritance.
    level: Vec<&'a Directive>,
    servers: Vec<&'a Directive>,
    upstreams: Vec<&'a Directive>,
}

/// Directives the `http` walk leaves to the servers and locations that inherit them.
fn inherited(name: &str) -> bool {
    tls::TLS_GLOBAL.contains(&name)
        || matches!(
            name,
            "ssl_certificate"
                | "ssl_certificate_key"
                | "ssl_stapling"
                | "ssl_stapling_file"
                | "ssl_stapling_responder"
                | "add_header"
                | "proxy_set_header"
                | "proxy_hide_header"
                | "proxy_read_timeout"
                | "proxy_connect_timeout"
                | "grpc_read_timeout"
                | "grpc_connect_timeout"
                | "http2"
                | "ssl"
                | "default_type"
        )
}

/// Walks main/http, translating what belongs to `[server]` and `[http2]` on the way.
fn walk<'a>(
    conf: &Conf,
    list: &'a [Directive],
    http: &mut Http<'a>,
    server: &mut Table,
    h2: &mut Table,
    report: &mut Report,
) {
    for d in list {
        let from = Some(conf.place(d.at));
        match d.name.as_str() {
            "http" => walk(conf, d.children(), http, server, h2, report),
            "server" if d.block.is_some() => http.servers.push(d),
            "upstream" if d.block.is_some() => http.upstreams.push(d),
            "worker_processes" => match d.arg(0) {
                Some("auto") => server.set("workers", "0".into(), from),
                Some(n) if n.parse::<u16>().is_ok() => server.set("workers", n.to_string(), from),
                _ => report.add(d, "not translated: not a number or auto"),
            },
            name @ ("keepalive_timeout" | "client_header_timeout" | "send_timeout") => {
                let key = match name {
                    "keepalive_timeout" => "client_idle_timeout",
                    "client_header_timeout" => "client_header_timeout",
                    _ => "client_send_timeout",
                };
                match d.arg(0).and_then(parse_time).filter(|ms| *ms > 0) {
                    Some(ms) => server.set(key, q(&duration_text(ms)), from),
                    None => report.add(d, "not translated: tlsgate needs a time above zero"),
                }
            }
            "http2_max_concurrent_streams" => match d.arg(0).and_then(|a| a.parse::<u32>().ok()) {
                Some(n) => h2.set("max_concurrent_streams", n.to_string(), from),
                None => report.add(d, "not translated: not a number"),
            },
            name if inherited(name) => http.level.push(d),
            other => {
                http.level.push(d);
                report.add(d, reasons::why_not(other));
            }
        }
    }
}

/// Translates a loaded configuration.
pub fn translate(conf: &Conf) -> Result<Translation, ImportError> {
    translate_with_prefix(
        conf,
        conf.files.first().and_then(|f| f.parent()).unwrap_or(Path::new(".")),
    )
}

/// Translates a loaded configuration; relative certificate paths resolve against `prefix`.
pub fn translate_with_prefix(conf: &Conf, prefix: &Path) -> Result<Translation, ImportError> {
    let mut report = Report::default();
    for n in &conf.notes {
        report.add_at(n.at, "include", format!("not translated: {}", n.why));
    }
    let mut server_table = Table::new("[server]");
    let mut h2 = Table::new("[http2]");
    let mut http = Http::default();
    walk(
        conf,
        &conf.directives,
        &mut http,
        &mut server_table,
        &mut h2,
        &mut report,
    );
    let root = Scope::root(http.level.clone());

    let mut groups: Vec<upstream::Group<'_>> = http
        .upstreams
        .iter()
        .map(|d| upstream::from_block(conf, d, &mut report))
        .collect();
    let mut sites = Vec::new();
    let mut redirects = Vec::new();
    {
        let mut s = server::Sites {
            conf,
            prefix,
            groups: &mut groups,
            report: &mut report,
            names: Vec::new(),
            site_names: Vec::new(),
            has_default: false,
        };
        for block in &http.servers {
            if server::is_tls(block) {
                if let Some(site) = s.site(block, &root) {
                    sites.push(site);
                }
            } else if let Some(r) = server::redirect(conf, block, s.report) {
                redirects.push(r);
            }
        }
    }
    if sites.is_empty() {
        return Err(ImportError::NoTlsServer);
    }
    let scopes: Vec<Scope<'_>> = sites.iter().map(|s| root.inner(s.block.children())).collect();
    let tls = tls::tls_tables(conf, &scopes, &mut report);
    let mut tls_table = tls.tls;
    // ALPN: one list for every site.
    let any_h2 = sites.iter().any(|s| s.http2);
    if any_h2 {
        tls_table.set("alpn", arr(&["h2", "http/1.1"]), Some("http2 is on".into()));
        for s in sites.iter().filter(|s| !s.http2) {
            report.add(
                s.block,
                "http2 is off for this server, but tlsgate's ALPN is the same for every site: HTTP/2 is offered here too",
            );
        }
    } else {
        tls_table.set("alpn", arr(&["http/1.1"]), Some("no server turns http2 on".into()));
    }

    let listeners = listener_tables(conf, &sites, &redirects, &mut report);

    let mut doc = Doc::default();
    let main = conf.files.first().map_or(String::new(), |f| f.display().to_string());
    doc.preamble.push(format!(
        "tlsgate configuration translated from the nginx configuration {main}"
    ));
    doc.preamble
        .push("by `tlsgate import nginx`. Each value names the nginx line it comes from.".into());
    let findings = report.findings(conf);
    doc.preamble.push(format!(
        "{} directive(s) were not translated as they were; `tlsgate import` listed them on stderr.",
        findings.len()
    ));
    doc.tables.push(server_table);
    doc.tables.push(tls_table);
    doc.tables.push(tls.session_cache);
    doc.tables.push(tls.tickets);
    doc.tables.push(h2);
    doc.tables.extend(listeners);
    for s in sites {
        doc.tables.extend(s.tables);
    }
    for g in groups.iter().filter(|g| !g.servers.is_empty()) {
        doc.tables.push(g.table(conf));
    }
    for g in groups.iter().filter(|g| g.servers.is_empty()) {
        if let Some(b) = g.block {
            report.add(b, "not translated: no server tlsgate can use");
        }
    }
    Ok(Translation {
        toml: doc.render(),
        findings: report.findings(conf),
    })
}

/// `[[listener]]`s: every TLS address of every site (tlsgate serves every site on each), then
/// the redirect listeners.
fn listener_tables(
    conf: &Conf,
    sites: &[server::Site<'_>],
    redirects: &[server::Redirect],
    report: &mut Report,
) -> Vec<Table> {
    let mut out = Vec::new();
    let mut seen: Vec<SocketAddr> = Vec::new();
    for s in sites {
        for l in &s.listens {
            let Ok(addr) = l.addr else { continue };
            if seen.contains(&addr) {
                continue;
            }
            seen.push(addr);
            let mut t = Table::new("[[listener]]");
            let from = Some(conf.place(l.d.at));
            t.set("listen", q(&addr.to_string()), from.clone());
            if let Some(b) = l.backlog {
                t.set("backlog", b.to_string(), from.clone());
            }
            if let Some(f) = l.fastopen {
                t.set("tcp_fastopen", f.to_string(), from);
            }
            out.push(t);
        }
    }
    for s in sites {
        let own: Vec<SocketAddr> = s.listens.iter().filter_map(|l| l.addr.clone().ok()).collect();
        let extra: Vec<String> = seen
            .iter()
            .filter(|a| !own.contains(a))
            .map(ToString::to_string)
            .collect();
        if let (false, Some(first)) = (extra.is_empty(), s.listens.first()) {
            report.add(
                first.d,
                format!(
                    "tlsgate serves every site on every https listener: this server is also served on {}",
                    extra.join(", ")
                ),
            );
        }
    }
    for r in redirects {
        for addr in &r.addrs {
            if seen.contains(addr) {
                continue;
            }
            seen.push(*addr);
            let mut t = Table::new("[[listener]]");
            t.set("listen", q(&addr.to_string()), Some(r.from.clone()));
            t.set("kind", q("redirect"), Some(r.from.clone()));
            if r.status != 301 {
                t.set("redirect_status", r.status.to_string(), Some(r.from.clone()));
            }
            if let Some(p) = r.https_port {
                t.set("https_port", p.to_string(), Some(r.from.clone()));
            }
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests;

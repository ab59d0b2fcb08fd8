//! `server` blocks: a TLS server (any `listen ... ssl`) becomes a `[[site]]` with its names,
//! certificates, HSTS and routes; a plain-HTTP server that only redirects to https becomes a
//! `redirect` listener; any other plain-HTTP server is listed (tlsgate serves HTTP only on TLS).

use super::listen::{self, Listen};
use super::location::{fixed, route, RouteCtx};
use super::out::{arr, boolean, q, Table};
use super::reasons::why_not;
use super::tls::TLS_GLOBAL;
use super::upstream::Group;
use super::values::{duration_text, valid_server_name, Scope};
use super::Report;
use crate::nginx::{has_variable, Conf, Directive};
use std::net::SocketAddr;
use std::path::Path;

/// Directives a TLS server's walk leaves to others (the site, the routes, `[tls]`).
const DEFERRED: [&str; 18] = [
    "default_type",
    "listen",
    "server_name",
    "ssl",
    "http2",
    "ssl_certificate",
    "ssl_certificate_key",
    "ssl_stapling",
    "ssl_stapling_file",
    "ssl_stapling_responder",
    "add_header",
    "proxy_set_header",
    "proxy_hide_header",
    "proxy_read_timeout",
    "proxy_connect_timeout",
    "grpc_read_timeout",
    "grpc_connect_timeout",
    "location",
];

/// A translated TLS server.
pub struct Site<'a> {
    /// `[[site]]` and its sub-tables, in order.
    pub tables: Vec<Table>,
    /// Its TLS listens.
    pub listens: Vec<Listen<'a>>,
    /// Whether HTTP/2 is on.
    pub http2: bool,
    /// The server block.
    pub block: &'a Directive,
}

/// Whether a server block has a TLS listen (or the old `ssl on;`).
pub fn is_tls(server: &Directive) -> bool {
    let ssl_on = server
        .children()
        .iter()
        .any(|d| d.name == "ssl" && d.arg(0) == Some("on"));
    server
        .children()
        .iter()
        .filter(|d| d.name == "listen")
        .any(|d| ssl_on || listen::parse(d).ssl)
}

/// Shared state of the server translations.
pub struct Sites<'c, 'a> {
    /// The configuration.
    pub conf: &'c Conf,
    /// Nginx's prefix (relative certificate paths).
    pub prefix: &'c Path,
    /// Upstream groups.
    pub groups: &'c mut Vec<Group<'a>>,
    /// Findings.
    pub report: &'c mut Report,
    /// Names already served by a site (lowercase) and the site.
    pub names: Vec<(String, String)>,
    /// Site names used.
    pub site_names: Vec<String>,
    /// Whether a site already is the default.
    pub has_default: bool,
}

impl<'a> Sites<'_, 'a> {
    /// Translates one TLS server; None (listed) when it cannot be served.
    pub fn site(&mut self, block: &'a Directive, http: &Scope<'a>) -> Option<Site<'a>> {
        let scope = http.inner(block.children());
        let conf = self.conf;
        let ssl_on = scope.own().iter().any(|d| d.name == "ssl" && d.arg(0) == Some("on"));
        let mut listens = Vec::new();
        for d in block.children().iter().filter(|d| d.name == "listen") {
            let mut l = listen::parse(d);
            l.ssl |= ssl_on;
            let mut notes = l.unsupported.clone();
            if let Err(why) = &l.addr {
                notes.insert(0, format!("not translated: {why}"));
            } else if !l.ssl {
                notes.insert(
                    0,
                    "not translated: plain HTTP in a TLS server; tlsgate answers plain HTTP only with redirects to https (a kind = \"redirect\" listener), so this server is served on its TLS listeners only".into(),
                );
            }
            if !notes.is_empty() {
                self.report.add(d, notes.join("; "));
            }
            if l.ssl && l.addr.is_ok() {
                listens.push(l);
            }
        }
        for c in block.children() {
            let name = c.name.as_str();
            if DEFERRED.contains(&name) || TLS_GLOBAL.contains(&name) || name == "return" {
                continue;
            }
            let why = match name {
                "keepalive_timeout" | "client_header_timeout" | "send_timeout" => {
                    "not translated here: tlsgate sets it once for every site ([server]); set it in http {}"
                }
                other => why_not(other),
            };
            self.report.add(c, why);
        }
        // Names.
        let mut names: Vec<String> = Vec::new();
        let mut bad: Vec<(&Directive, String)> = Vec::new();
        for d in block.children().iter().filter(|d| d.name == "server_name") {
            for w in &d.args {
                let n = w.text.to_ascii_lowercase();
                let candidates = if let Some(rest) = n.strip_prefix('.') {
                    vec![rest.to_string(), format!("*.{rest}")]
                } else {
                    vec![n.clone()]
                };
                if n.is_empty() || n == "_" {
                    continue;
                }
                if n.starts_with('~') {
                    bad.push((d, format!("{} (a regular expression)", w.text)));
                    continue;
                }
                for c in candidates {
                    if !valid_server_name(&c) || has_variable(&c) {
                        bad.push((d, format!("{} (not a host name or *.wildcard)", w.text)));
                    } else if let Some((_, site)) = self.names.iter().find(|(n, _)| *n == c) {
                        bad.push((d, format!("{c} (already served by site {site})")));
                    } else if !names.contains(&c) {
                        names.push(c);
                    }
                }
            }
        }
        let default = !self.has_default && listens.iter().any(|l| l.default_server);
        let mut site_name = names.first().cloned().unwrap_or_else(|| "default".into());
        let mut n = 2;
        while self.site_names.contains(&site_name) {
            site_name = format!("{}-{n}", names.first().map_or("default", String::as_str));
            n += 1;
        }
        if names.is_empty() {
            let placeholder = format!("{site_name}.invalid");
            let at = block
                .children()
                .iter()
                .find(|d| d.name == "server_name")
                .unwrap_or(block);
            let how = if default {
                "as the default site it serves every client whose SNI matches no other site"
            } else {
                "it is reached only as tlsgate's default site (the first site, unless another sets default)"
            };
            self.report.add(
                at,
                format!("no host name to match SNI against: the site gets the placeholder name {placeholder}; {how}"),
            );
            names.push(placeholder);
        }
        for (d, what) in bad {
            self.report.add(d, format!("not translated: {what}"));
        }
        // Certificates.
        let certs = self.certificates(&scope);
        if certs.is_empty() {
            self.report.add(
                block,
                "not translated: a TLS server without a usable ssl_certificate/ssl_certificate_key pair",
            );
            return None;
        }
        self.site_names.push(site_name.clone());
        for n in &names {
            self.names.push((n.clone(), site_name.clone()));
        }
        self.has_default |= default;
        let mut site = Table::new("[[site]]");
        site.notes.push(format!("server at {}", conf.place(block.at)));
        site.set("name", q(&site_name), None);
        site.set("server_names", arr(&names), None);
        if default {
            site.set("default", boolean(true), None);
        }
        let mut tables = vec![site];
        let hsts = self.hsts(&scope);
        let site_hsts = hsts.is_some();
        tables.extend(hsts);
        tables.extend(certs);
        tables.extend(self.routes(block, &scope, site_hsts));
        let http2 = listens.iter().any(|l| l.http2) || scope.last("http2").is_some_and(|d| d.arg(0) == Some("on"));
        Some(Site {
            tables,
            listens,
            http2,
            block,
        })
    }

    fn certificates(&mut self, scope: &Scope<'a>) -> Vec<Table> {
        let chains = scope.all("ssl_certificate");
        let keys = scope.all("ssl_certificate_key");
        let stapling = scope.last("ssl_stapling");
        let file = scope.last("ssl_stapling_file");
        let responder = scope.last("ssl_stapling_responder");
        let mut out = Vec::new();
        for (i, chain) in chains.iter().enumerate() {
            let Some(key) = keys.get(i) else {
                self.report
                    .add(chain, "not translated: no ssl_certificate_key pairs with it");
                continue;
            };
            let (c, k) = (chain.arg(0).unwrap_or(""), key.arg(0).unwrap_or(""));
            if let Some(bad) = [(chain, c), (key, k)]
                .into_iter()
                .find(|(_, p)| has_variable(p) || p.starts_with("data:") || p.starts_with("engine:"))
            {
                self.report.add(bad.0, "not translated: tlsgate loads certificates and keys from files named in the configuration (no variables, data: or engine:)");
                continue;
            }
            let mut t = Table::new("[[site.certificate]]");
            t.set("chain", q(&self.absolute(c)), Some(self.conf.place(chain.at)));
            t.set("key", q(&self.absolute(k)), Some(self.conf.place(key.at)));
            match stapling {
                Some(s) if s.arg(0) == Some("on") => {
                    t.set("ocsp", q("auto"), Some(self.conf.place(s.at)));
                    if let Some(r) = responder.and_then(|r| r.arg(0).map(|u| (r, u))) {
                        t.set("ocsp_url", q(r.1), Some(self.conf.place(r.0.at)));
                    }
                    if let Some(f) = file.filter(|_| i == 0).and_then(|f| f.arg(0).map(|p| (f, p))) {
                        t.set("ocsp_file", q(&self.absolute(f.1)), Some(self.conf.place(f.0.at)));
                        t.fields.retain(|x| x.key != "ocsp_url");
                    }
                }
                Some(s) => t.set("ocsp", q("off"), Some(self.conf.place(s.at))),
                None => {}
            }
            out.push(t);
        }
        for key in keys.iter().skip(chains.len()) {
            self.report.add(key, "not translated: no ssl_certificate pairs with it");
        }
        if chains.len() > 1 {
            if let Some(f) = file {
                self.report.add(
                    f,
                    "applied to the first certificate only: one OCSP response staples one certificate",
                );
            }
        }
        out
    }

    fn absolute(&self, p: &str) -> String {
        let path = Path::new(p);
        if path.is_absolute() {
            p.to_string()
        } else {
            self.prefix.join(path).display().to_string()
        }
    }

    fn hsts(&mut self, scope: &Scope<'a>) -> Option<Table> {
        let d = scope.all("add_header").into_iter().find(|d| {
            d.arg(0)
                .is_some_and(|n| n.eq_ignore_ascii_case("strict-transport-security"))
        })?;
        let value = d.arg(1).unwrap_or("");
        if has_variable(value) {
            self.report.add(d, "not translated: the value has variables");
            return None;
        }
        let from = Some(self.conf.place(d.at));
        let mut t = Table::new("[site.hsts]");
        for part in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let lower = part.to_ascii_lowercase();
            if let Some(age) = lower.strip_prefix("max-age=") {
                match age.trim_matches('"').parse::<u64>() {
                    Ok(secs) => t.set("max_age", q(&duration_text(secs.saturating_mul(1000))), from.clone()),
                    Err(_) => self
                        .report
                        .add(d, format!("not translated: {part:?} is not max-age=SECONDS")),
                }
            } else if lower == "includesubdomains" {
                t.set("include_subdomains", boolean(true), from.clone());
            } else if lower == "preload" {
                t.set("preload", boolean(true), from.clone());
            } else {
                self.report.add(
                    d,
                    format!("{part:?} dropped: tlsgate writes max-age, includeSubDomains and preload"),
                );
            }
        }
        if !t.has("max_age") {
            self.report.add(d, "not translated: no max-age");
            return None;
        }
        Some(t)
    }

    fn routes(&mut self, block: &'a Directive, scope: &Scope<'a>, site_hsts: bool) -> Vec<Table> {
        let mut ctx = RouteCtx {
            conf: self.conf,
            groups: self.groups,
            site_hsts,
            report: self.report,
        };
        let mut out: Vec<Table> = Vec::new();
        let server_return = scope.own().iter().rev().find(|d| d.name == "return").copied();
        if let Some(r) = server_return {
            for loc in block.children().iter().filter(|d| d.name == "location") {
                ctx.report.add(
                    loc,
                    "not translated: never reached, the server-level return answers every request",
                );
            }
            match fixed(r) {
                Ok(f) => {
                    let mut t = Table::new("[[site.route]]");
                    t.set("path_prefix", q("/"), None);
                    t.set(
                        "fixed_response",
                        format!("{{ status = {}, body = {} }}", f.status, q(&f.body)),
                        Some(ctx.conf.place(r.at)),
                    );
                    if let Some(l) = f.location {
                        t.set(
                            "response_headers",
                            super::out::header_edits(&[("Location".into(), l)], &[]),
                            None,
                        );
                    }
                    out.push(t);
                }
                Err(why) => ctx.report.add(r, format!("not translated: {why}")),
            }
        } else {
            let mut prefixes: Vec<(String, String)> = Vec::new();
            for loc in block.children().iter().filter(|d| d.name == "location") {
                let Some(t) = route(&mut ctx, loc, scope) else { continue };
                let prefix = t
                    .fields
                    .iter()
                    .find(|f| f.key == "path_prefix")
                    .map(|f| f.value.clone())
                    .unwrap_or_default();
                if let Some((_, first)) = prefixes.iter().find(|(p, _)| *p == prefix) {
                    ctx.report.add(
                        loc,
                        format!("not translated: the same path prefix as the location at {first}"),
                    );
                    continue;
                }
                prefixes.push((prefix, ctx.conf.place(loc.at)));
                out.push(t);
            }
        }
        if out.is_empty() {
            ctx.report.add(
                block,
                "no location forwards to an origin (tlsgate serves no files): the site gets a fixed 404 route at /; point it at an [[upstream]]",
            );
            let mut t = Table::new("[[site.route]]");
            t.notes.push("placeholder: nginx served files here".into());
            t.set("path_prefix", q("/"), None);
            t.set(
                "fixed_response",
                format!("{{ status = 404, body = {} }}", q("not found\n")),
                None,
            );
            out.push(t);
        }
        out
    }
}

/// A plain-HTTP server that redirects everything to https.
pub struct Redirect {
    /// Addresses it listens on.
    pub addrs: Vec<SocketAddr>,
    /// 301, 302, 307 or 308.
    pub status: u16,
    /// A port other than 443 in the target URL.
    pub https_port: Option<u16>,
    /// Where the redirect was written.
    pub from: String,
}

/// The `return` of a redirect to https: status, port, and how it differs from tlsgate's.
fn https_redirect(d: &Directive) -> Option<(u16, Option<u16>, Vec<String>)> {
    let args = d.arg_texts();
    let (status, url) = match args.as_slice() {
        [code, url] => (code.parse::<u16>().ok()?, *url),
        [url] => (302, *url),
        _ => return None,
    };
    if !(300..400).contains(&status) {
        return None;
    }
    let rest = url.strip_prefix("https://")?;
    let mut notes = Vec::new();
    let host_part = if let Some(h) = rest.strip_suffix("$request_uri") {
        h
    } else if let Some(h) = rest
        .strip_suffix("$uri$is_args$args")
        .or_else(|| rest.strip_suffix("$uri"))
    {
        h
    } else {
        notes.push("tlsgate keeps the requested path and query in the redirect".to_string());
        rest.split('/').next().unwrap_or(rest)
    };
    let host_part = host_part.trim_end_matches('/');
    let (host, port) = match host_part.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => (h, p.parse::<u16>().ok()),
        _ => (host_part, None),
    };
    if !["$host", "${host}", "$http_host"].contains(&host) {
        notes.push(format!(
            "tlsgate redirects to the host the client asked for, not {host}"
        ));
    }
    let status = match status {
        301 | 302 | 307 | 308 => status,
        other => {
            notes.push(format!(
                "{other} became 302 (tlsgate redirects with 301, 302, 307 or 308)"
            ));
            302
        }
    };
    Some((status, port.filter(|p| *p != 443), notes))
}

/// A plain-HTTP server as a redirect listener, or None (listed) when it serves content.
pub fn redirect(conf: &Conf, block: &Directive, report: &mut Report) -> Option<Redirect> {
    let children = block.children();
    let server_return = children.iter().rev().find(|d| d.name == "return");
    let root_location = children
        .iter()
        .find(|d| d.name == "location" && matches!(d.arg_texts().as_slice(), ["/"] | ["^~", "/"]));
    let location_return = root_location.and_then(|l| l.children().iter().rev().find(|d| d.name == "return"));
    // certbot's `if ($host = NAME) { return 301 https://$host$request_uri; }` then `return 404;`.
    let if_return = children
        .iter()
        .filter(|d| d.name == "if")
        .filter_map(|d| match d.children() {
            [only] if only.name == "return" && https_redirect(only).is_some() => Some(only),
            _ => None,
        })
        .next();
    let (ret, via) = match (
        server_return.filter(|r| https_redirect(r).is_some()),
        location_return.filter(|r| https_redirect(r).is_some()),
        if_return,
    ) {
        (Some(r), _, _) => (r, "server"),
        (None, Some(r), _) if server_return.is_none() => (r, "location"),
        (None, _, Some(r)) => (r, "if"),
        _ => {
            report.add(
                block,
                "not translated: a plain-HTTP server that serves content; tlsgate answers plain HTTP only with redirects to https",
            );
            return None;
        }
    };
    let (status, https_port, notes) = https_redirect(ret)?;
    if !notes.is_empty() {
        report.add(ret, format!("translated as a redirect listener; {}", notes.join("; ")));
    }
    let mut addrs = Vec::new();
    let listens: Vec<&Directive> = children.iter().filter(|d| d.name == "listen").collect();
    if listens.is_empty() {
        addrs.push(listen::default_addr());
    }
    for d in listens {
        let l = listen::parse(d);
        match &l.addr {
            Ok(a) => addrs.push(*a),
            Err(why) => report.add(d, format!("not translated: {why}")),
        }
        if !l.unsupported.is_empty() {
            report.add(d, l.unsupported.join("; "));
        }
    }
    for c in children {
        match c.name.as_str() {
            "listen" | "server_name" => {}
            "return" if c.at == ret.at => {}
            "return" if via == "if" => report.add(
                c,
                "not translated: tlsgate's redirect listener redirects requests for every host, not only those the if blocks name",
            ),
            "if" if via == "if"
                && matches!(c.children(), [only] if only.name == "return" && https_redirect(only).is_some()) => {}
            "location" if via == "location" && root_location.is_some_and(|l| l.at == c.at) => {
                for inner in c.children().iter().filter(|d| d.at != ret.at) {
                    report.add(inner, why_not(&inner.name));
                }
            }
            "location" => report.add(
                c,
                "not translated: tlsgate's redirect listener answers every request with the redirect (no ACME HTTP-01 or other content on plain HTTP)",
            ),
            other => report.add(c, why_not(other)),
        }
    }
    Some(Redirect {
        addrs,
        status,
        https_port,
        from: conf.place(ret.at),
    })
}

//! `location` blocks to `[[site.route]]`s: prefix locations with `proxy_pass`/`grpc_pass` (to an
//! `upstream` block or an address; a URI part becomes `rewrite_prefix`) or `return` (a fixed
//! response), with `proxy_set_header`, `add_header` and `proxy_hide_header` as header edits
//! (inherited the nginx way: a level with any of them replaces the outer level's).

use super::out::{header_edits, q, Table};
use super::reasons::why_not;
use super::upstream::{host_port, Group};
use super::values::Scope;
use super::Report;
use crate::error::Untranslatable;
use crate::nginx::{has_variable, Conf, Directive};
use tlsgate_config::request_edit::is_gateway_managed;

/// Everything a route needs from the site.
pub struct RouteCtx<'c, 'a> {
    /// The configuration (for places).
    pub conf: &'c Conf,
    /// Upstream groups, created on first use for `proxy_pass` addresses.
    pub groups: &'c mut Vec<Group<'a>>,
    /// Whether the site sends HSTS.
    pub site_hsts: bool,
    /// Findings.
    pub report: &'c mut Report,
}

/// What a `return` answers.
pub struct Fixed {
    /// Status.
    pub status: u16,
    /// Body.
    pub body: String,
    /// `Location` for redirects.
    pub location: Option<String>,
}

/// A `return` directive as a fixed response, or why it cannot be one.
pub fn fixed(d: &Directive) -> Result<Fixed, Untranslatable> {
    let args = d.arg_texts();
    let (status, text) = match args.as_slice() {
        [code] if code.parse::<u16>().is_ok() => (code.parse::<u16>().unwrap_or(0), None),
        [url] => (302, Some(*url)),
        [code, text] => match code.parse::<u16>() {
            Ok(c) => (c, Some(*text)),
            Err(_) => return Err(Untranslatable(format!("{code:?} is not a status"))),
        },
        _ => return Err("takes a status and a text or URL".into()),
    };
    if status == 444 {
        return Err("444 closes the connection without a response; tlsgate always answers".into());
    }
    if !(200..=599).contains(&status) {
        return Err(Untranslatable(format!(
            "{status} is not a final status tlsgate can answer"
        )));
    }
    if text.is_some_and(has_variable) {
        return Err(Untranslatable(format!(
            "{:?} has variables; a fixed response is fixed text",
            text.unwrap_or("")
        )));
    }
    let redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
    Ok(Fixed {
        status,
        body: if redirect {
            String::new()
        } else {
            text.unwrap_or("").to_string()
        },
        location: if redirect { text.map(str::to_string) } else { None },
    })
}

/// A `proxy_pass`/`grpc_pass` URL: TLS or not, the authority, and the URI part if any.
fn target(url: &str, grpc: bool) -> Result<(bool, String, Option<String>), Untranslatable> {
    if has_variable(url) {
        return Err(Untranslatable(format!(
            "{url:?} has variables; tlsgate's routes name a fixed upstream"
        )));
    }
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("grpcs://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("grpc://") {
        (false, r)
    } else if grpc {
        (false, url)
    } else {
        return Err(Untranslatable(format!("{url:?} is not an http:// or https:// URL")));
    };
    if rest.starts_with("unix:") {
        return Err("unix sockets: tlsgate reaches origins over TCP".into());
    }
    match rest.find('/') {
        Some(i) => Ok((tls, rest[..i].to_string(), Some(rest[i..].to_string()))),
        None => Ok((tls, rest.to_string(), None)),
    }
}

/// Whether a rewrite prefix is one tlsgate accepts (an absolute, normal path).
fn normal_path(p: &str) -> bool {
    p.starts_with('/')
        && !p.contains("//")
        && !p
            .bytes()
            .any(|b| b <= b' ' || b == b'?' || b == b'#' || b == b'\\' || b == 0x7f)
        && !p.split('/').any(|s| s == "." || s == "..")
}

/// The group a location forwards to (created for an address), or why none.
fn group_for(ctx: &mut RouteCtx<'_, '_>, d: &Directive, grpc: bool) -> Result<(usize, Option<String>), Untranslatable> {
    let url = d.arg(0).unwrap_or("");
    let (tls, authority, uri) = target(url, grpc)?;
    let index = match ctx.groups.iter().position(|g| g.block.is_some() && g.name == authority) {
        Some(i) => i,
        None => {
            let port = if tls { 443 } else { 80 };
            let server = host_port(&authority, port).ok_or_else(|| format!("{authority:?} is not host[:port]"))?;
            let name = if tls {
                format!("https://{server}")
            } else {
                server.clone()
            };
            match ctx.groups.iter().position(|g| g.block.is_none() && g.name == name) {
                Some(i) => i,
                None => {
                    ctx.groups.push(Group {
                        name,
                        block: None,
                        servers: vec![server],
                        tls: Some(tls),
                        http2: false,
                        fields: Table::new("[[upstream]]"),
                        connect_timeout: None,
                        header_timeout: None,
                    });
                    ctx.groups.len() - 1
                }
            }
        }
    };
    let g = &mut ctx.groups[index];
    if g.servers.is_empty() {
        return Err(Untranslatable(format!(
            "upstream {} has no server tlsgate can use",
            g.name
        )));
    }
    match g.tls {
        None => g.tls = Some(tls),
        Some(t) if t != tls => {
            return Err(Untranslatable(format!(
                "upstream {} is reached over {} elsewhere; tlsgate speaks one scheme per upstream",
                g.name,
                if t { "https" } else { "http" }
            )))
        }
        Some(_) => {}
    }
    if grpc {
        g.http2 = true;
    }
    if tls {
        ctx.report.add(
            d,
            "translated; note: nginx does not verify the origin's certificate (proxy_ssl_verify off), tlsgate does (system CAs; see [upstream.tls])",
        );
    }
    Ok((index, uri))
}

/// The route of one `location` in a server, or None (with the reason listed).
pub fn route<'a>(ctx: &mut RouteCtx<'_, 'a>, loc: &'a Directive, server: &Scope<'a>) -> Option<Table> {
    let args = loc.arg_texts();
    let (modifier, path) = match args.as_slice() {
        [p] => ("", *p),
        [m, p] => (*m, *p),
        _ => {
            ctx.report.add(loc, "not translated: not a location nginx accepts");
            return None;
        }
    };
    match modifier {
        "" | "^~" | "=" if path.starts_with('/') => {}
        "~" | "~*" => {
            ctx.report.add(
                loc,
                format!("not translated: regular expression {path:?}; tlsgate routes by path prefix"),
            );
            return None;
        }
        _ if path.starts_with('@') => {
            ctx.report
                .add(loc, "not translated: named locations (error_page/try_files targets)");
            return None;
        }
        _ => {
            ctx.report.add(
                loc,
                format!("not translated: {modifier} {path}: tlsgate routes by path prefix"),
            );
            return None;
        }
    }
    let scope = server.inner(loc.children());
    let own = |name: &str| scope.own().iter().rev().find(|d| d.name == name).copied();
    let (ret, proxy, grpc) = (own("return"), own("proxy_pass"), own("grpc_pass"));
    if ret.is_none() && proxy.is_none() && grpc.is_none() {
        let content: Vec<&str> = scope
            .own()
            .iter()
            .map(|d| d.name.as_str())
            .filter(|n| {
                [
                    "root",
                    "alias",
                    "try_files",
                    "index",
                    "fastcgi_pass",
                    "uwsgi_pass",
                    "scgi_pass",
                    "autoindex",
                ]
                .contains(n)
            })
            .collect();
        let how = if content.is_empty() {
            "files from the server's root".to_string()
        } else {
            content.join(", ")
        };
        ctx.report.add(
            loc,
            format!("not translated: serves {how}; tlsgate serves no files (only origins and fixed responses)"),
        );
        return None;
    }
    for c in loc.children() {
        match c.name.as_str() {
            "return"
            | "proxy_pass"
            | "grpc_pass"
            | "proxy_set_header"
            | "add_header"
            | "proxy_hide_header"
            | "proxy_read_timeout"
            | "proxy_connect_timeout"
            | "grpc_read_timeout"
            | "grpc_connect_timeout" => {}
            "default_type" if ret.is_some() => {}
            "proxy_http_version" if c.arg(0) == Some("1.1") => {
                ctx.report.add(c, "not needed: tlsgate speaks HTTP/1.1 to origins")
            }
            "proxy_http_version" => ctx.report.add(c, "not translated: tlsgate speaks HTTP/1.1 to origins"),
            "location" => ctx.report.add(
                c,
                "not translated: nested locations (tlsgate routes by one path prefix)",
            ),
            other => ctx.report.add(c, why_not(other)),
        }
    }
    let mut t = Table::new("[[site.route]]");
    t.notes
        .push(format!("location {} at {}", args.join(" "), ctx.conf.place(loc.at)));
    t.set("path_prefix", q(path), None);
    if modifier == "=" {
        ctx.report.add(
            loc,
            format!("translated as a prefix route: tlsgate matches path prefixes, so {path} also matches {path}/... and {path}x"),
        );
    }
    if let Some(r) = ret {
        match fixed(r) {
            Ok(f) => {
                let content_type = match scope.last("default_type").and_then(|d| d.arg(0)) {
                    Some(ct) if !has_variable(ct) => format!(", content_type = {}", q(ct)),
                    _ => String::new(),
                };
                t.set(
                    "fixed_response",
                    format!("{{ status = {}, body = {}{content_type} }}", f.status, q(&f.body)),
                    Some(ctx.conf.place(r.at)),
                );
                let mut set = response_headers(ctx, &scope);
                if let Some(loc) = f.location {
                    set.push(("Location".into(), loc));
                }
                if !set.is_empty() {
                    t.set("response_headers", header_edits(&set, &[]), None);
                }
            }
            Err(why) => {
                ctx.report.add(r, format!("not translated: {why}"));
                return None;
            }
        }
        return Some(t);
    }
    let (d, is_grpc) = match (proxy, grpc) {
        (Some(p), _) => (p, false),
        (None, Some(g)) => (g, true),
        (None, None) => return None,
    };
    let (index, uri) = match group_for(ctx, d, is_grpc) {
        Ok(x) => x,
        Err(why) => {
            ctx.report.add(d, format!("not translated: {why}"));
            return None;
        }
    };
    t.set("upstream", q(&ctx.groups[index].name), Some(ctx.conf.place(d.at)));
    let sets_host = scope
        .all("proxy_set_header")
        .iter()
        .any(|h| h.arg(0).is_some_and(|n| n.eq_ignore_ascii_case("host")));
    if !sets_host {
        let target = d.arg(0).unwrap_or("");
        let authority = target
            .split("://")
            .nth(1)
            .unwrap_or(target)
            .split('/')
            .next()
            .unwrap_or("");
        ctx.report.add(
            d,
            format!(
                "note: no proxy_set_header Host applies here, so nginx sends Host: {authority} ($proxy_host); tlsgate sends the Host the client asked for"
            ),
        );
    }
    if let Some(uri) = uri {
        if modifier == "=" || !normal_path(&uri) {
            ctx.report.add(
                d,
                format!("not translated: the URI part {uri:?} cannot be a rewrite_prefix"),
            );
        } else if uri != path {
            t.set("rewrite_prefix", q(&uri), Some(ctx.conf.place(d.at)));
        }
    }
    let (connect, read) = if is_grpc {
        ("grpc_connect_timeout", "grpc_read_timeout")
    } else {
        ("proxy_connect_timeout", "proxy_read_timeout")
    };
    if let Some(c) = scope.last(connect) {
        ctx.groups[index].timeout(ctx.conf, "connect", c, ctx.report);
    }
    if let Some(r) = scope.last(read) {
        ctx.groups[index].timeout(ctx.conf, "header", r, ctx.report);
    }
    let (set, remove) = request_headers(ctx, &scope);
    if !set.is_empty() || !remove.is_empty() {
        t.set("request_headers", header_edits(&set, &remove), None);
    }
    let set = response_headers(ctx, &scope);
    let hide: Vec<String> = scope
        .all("proxy_hide_header")
        .iter()
        .filter_map(|d| d.arg(0))
        .filter(|n| !is_gateway_managed(n))
        .map(str::to_string)
        .collect();
    if !set.is_empty() || !hide.is_empty() {
        t.set("response_headers", header_edits(&set, &hide), None);
    }
    Some(t)
}

/// `proxy_set_header` as request header edits; what tlsgate already does is left out silently.
fn request_headers(ctx: &mut RouteCtx<'_, '_>, scope: &Scope<'_>) -> (Vec<(String, String)>, Vec<String>) {
    let (mut set, mut remove) = (Vec::new(), Vec::new());
    for d in scope.all("proxy_set_header") {
        let (Some(name), value) = (d.arg(0), d.arg(1).unwrap_or("")) else {
            continue;
        };
        let lname = name.to_ascii_lowercase();
        let builtin = match lname.as_str() {
            "host" => ["$host", "$http_host"].contains(&value),
            "x-forwarded-for" => value.contains("$proxy_add_x_forwarded_for") || value == "$remote_addr",
            "x-forwarded-proto" => ["$scheme", "https"].contains(&value),
            "x-forwarded-host" => ["$host", "$http_host", "$server_name"].contains(&value),
            "upgrade" | "connection" | "keep-alive" | "proxy-connection" | "te" => true,
            _ => false,
        };
        if builtin {
            continue;
        }
        if is_gateway_managed(&lname) {
            ctx.report.add(
                d,
                format!("not translated: tlsgate manages {name} itself (Host: the authority the client asked for)"),
            );
        } else if lname == "x-real-ip" && value == "$remote_addr" {
            ctx.report.add(
                d,
                "not translated: tlsgate sends the client address in X-Forwarded-For and Forwarded, not X-Real-IP",
            );
        } else if value.is_empty() {
            remove.push(name.to_string());
        } else if has_variable(value) {
            ctx.report.add(
                d,
                format!("not translated: {value:?} has variables; route headers take fixed values"),
            );
        } else {
            set.push((name.to_string(), value.to_string()));
        }
    }
    (set, remove)
}

/// `add_header` (but HSTS, which the site carries) as response headers to set.
fn response_headers(ctx: &mut RouteCtx<'_, '_>, scope: &Scope<'_>) -> Vec<(String, String)> {
    let mut set = Vec::new();
    let headers = scope.all("add_header");
    let own_level = headers.iter().any(|h| scope.own().iter().any(|o| o.at == h.at));
    let has_hsts = headers.iter().any(|h| {
        h.arg(0)
            .is_some_and(|n| n.eq_ignore_ascii_case("strict-transport-security"))
    });
    if ctx.site_hsts && own_level && !has_hsts {
        if let Some(first) = headers.first() {
            ctx.report.add(
                first,
                "note: here nginx drops the server's Strict-Transport-Security (add_header in a location replaces the server's); tlsgate sends HSTS on every response of the site",
            );
        }
    }
    for d in headers {
        let (Some(name), Some(value)) = (d.arg(0), d.arg(1)) else {
            continue;
        };
        if name.eq_ignore_ascii_case("strict-transport-security") {
            continue;
        }
        if is_gateway_managed(name) {
            ctx.report
                .add(d, format!("not translated: tlsgate manages {name} itself"));
        } else if has_variable(value) {
            ctx.report.add(
                d,
                format!("not translated: {value:?} has variables; route headers take fixed values"),
            );
        } else {
            set.push((name.to_string(), value.to_string()));
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::parser::parse;

    #[test]
    fn returns() {
        let d = parse("return 200 \"ok\\n\";", 0).unwrap().remove(0);
        let f = fixed(&d).unwrap();
        assert_eq!((f.status, f.body.as_str()), (200, "ok\n"));
        let d = parse("return 301 https://example.com/;", 0).unwrap().remove(0);
        assert_eq!(fixed(&d).unwrap().location.as_deref(), Some("https://example.com/"));
        let d = parse("return 301 https://$host$request_uri;", 0).unwrap().remove(0);
        assert!(fixed(&d).is_err());
        let d = parse("return 444;", 0).unwrap().remove(0);
        assert!(fixed(&d).is_err());
    }

    #[test]
    fn targets() {
        assert_eq!(target("http://app", false).unwrap(), (false, "app".into(), None));
        assert_eq!(
            target("https://10.0.0.1:8443/v2/", false).unwrap(),
            (true, "10.0.0.1:8443".into(), Some("/v2/".into()))
        );
        assert!(target("http://$backend", false).is_err());
        assert!(target("http://unix:/run/a.sock", false).is_err());
        assert_eq!(target("grpc://127.0.0.1:50051", true).unwrap().1, "127.0.0.1:50051");
        assert!(normal_path("/v2/"));
        assert!(!normal_path("/a/../b"));
        assert!(!normal_path("v2"));
    }
}

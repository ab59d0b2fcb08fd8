//! The `[tls]` section from the TLS servers' `ssl_*` directives. tlsgate has one `[tls]` for
//! every site, nginx one set per server: the first TLS server's values are used, and a server
//! whose value differs is listed.

use super::ciphers;
use super::out::{arr, boolean, q, Table};
use super::values::{duration_text, parse_size, parse_time, Scope};
use super::Report;
use crate::nginx::{Conf, Directive};

/// Directives that become `[tls]` fields.
pub const TLS_GLOBAL: [&str; 9] = [
    "ssl_protocols",
    "ssl_ciphers",
    "ssl_prefer_server_ciphers",
    "ssl_ecdh_curve",
    "ssl_session_cache",
    "ssl_session_timeout",
    "ssl_session_tickets",
    "ssl_early_data",
    "ssl_buffer_size",
];

/// `[tls]`, `[tls.session_cache]` and `[tls.tickets]`.
pub struct TlsTables {
    /// `[tls]`
    pub tls: Table,
    /// `[tls.session_cache]`
    pub session_cache: Table,
    /// `[tls.tickets]`
    pub tickets: Table,
}

/// Builds the TLS tables from the scopes of the TLS servers (in order).
pub fn tls_tables(conf: &Conf, servers: &[Scope<'_>], report: &mut Report) -> TlsTables {
    let mut t = TlsTables {
        tls: Table::new("[tls]"),
        session_cache: Table::new("[tls.session_cache]"),
        tickets: Table::new("[tls.tickets]"),
    };
    let mut prefer = false;
    let mut ciphers_directive = None;
    for name in TLS_GLOBAL {
        let values: Vec<Option<&Directive>> = servers.iter().map(|s| s.last(name)).collect();
        let Some(chosen) = values.iter().flatten().next().copied() else {
            continue;
        };
        for other in values.iter().flatten() {
            if other.at != chosen.at && other.arg_texts() != chosen.arg_texts() {
                report.add(
                    other,
                    format!(
                        "not translated: tlsgate has one [tls] section for every site; the value of {} is used",
                        conf.place(chosen.at)
                    ),
                );
            }
        }
        let from = Some(conf.place(chosen.at));
        match name {
            "ssl_protocols" => protocols(chosen, &mut t.tls, from, report),
            "ssl_ciphers" => ciphers_directive = Some(chosen),
            "ssl_prefer_server_ciphers" => {
                prefer = chosen.arg(0) == Some("on");
                t.tls.set("strict_cipher_order", boolean(prefer), from);
            }
            "ssl_ecdh_curve" => groups(chosen, &mut t.tls, from, report),
            "ssl_session_cache" => session_cache(chosen, &mut t.session_cache, from, report),
            "ssl_session_timeout" => match chosen.arg(0).and_then(parse_time).filter(|ms| *ms > 0) {
                Some(ms) => t.session_cache.set("timeout", q(&duration_text(ms)), from),
                None => report.add(chosen, "not translated: not a time nginx accepts"),
            },
            "ssl_session_tickets" => t.tickets.set("enabled", boolean(chosen.arg(0) == Some("on")), from),
            "ssl_early_data" => t.tickets.set("early_data", boolean(chosen.arg(0) == Some("on")), from),
            "ssl_buffer_size" => match chosen.arg(0).and_then(parse_size) {
                Some(n) => {
                    let size = n.clamp(512, 16_384);
                    if size != n {
                        report.add(
                            chosen,
                            format!("tlsgate records are 512 to 16384 bytes: {size} is used"),
                        );
                    }
                    t.tls.set("max_record_size", size.to_string(), from);
                }
                None => report.add(chosen, "not translated: not a size nginx accepts"),
            },
            _ => {}
        }
    }
    if let Some(d) = ciphers_directive {
        cipher_list(conf, d, prefer, &mut t.tls, report);
    }
    t
}

fn protocols(d: &Directive, tls: &mut Table, from: Option<String>, report: &mut Report) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for p in d.arg_texts() {
        match p {
            "TLSv1.2" => kept.push("1.2"),
            "TLSv1.3" => kept.push("1.3"),
            other => dropped.push(other.to_string()),
        }
    }
    if !dropped.is_empty() {
        report.add(
            d,
            format!("{} dropped: tlsgate offers TLS 1.2 and 1.3 only", dropped.join(", ")),
        );
    }
    let (Some(min), Some(max)) = (kept.iter().min(), kept.iter().max()) else {
        report.add(
            d,
            "not translated: no version tlsgate offers; its default (TLS 1.2 and 1.3) is used",
        );
        return;
    };
    tls.set("min_version", q(min), from.clone());
    tls.set("max_version", q(max), from);
}

fn groups(d: &Directive, tls: &mut Table, from: Option<String>, report: &mut Report) {
    let spec = d.arg(0).unwrap_or("");
    if spec == "auto" {
        return;
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut dropped = Vec::new();
    for g in spec.split(':').filter(|g| !g.is_empty()) {
        let name = match g {
            "X25519" | "x25519" => "X25519",
            "prime256v1" | "secp256r1" | "P-256" => "P-256",
            "secp384r1" | "P-384" => "P-384",
            "secp521r1" | "P-521" => "P-521",
            "X25519MLKEM768" => "X25519MLKEM768",
            other => {
                dropped.push(other.to_string());
                continue;
            }
        };
        if !kept.contains(&name) {
            kept.push(name);
        }
    }
    if !dropped.is_empty() {
        report.add(
            d,
            format!(
                "{} dropped: tlsgate's groups are X25519MLKEM768, X25519, P-256, P-384, P-521",
                dropped.join(", ")
            ),
        );
    }
    if kept.is_empty() {
        report.add(
            d,
            "not translated: no group tlsgate offers; its default groups are used",
        );
        return;
    }
    let note = if kept.first() == Some(&"X25519MLKEM768") {
        String::new()
    } else {
        " (tlsgate's default offers X25519MLKEM768, post-quantum, first: delete this line to keep it)".into()
    };
    tls.set("groups", arr(&kept), from.map(|f| format!("{f}{note}")));
}

fn session_cache(d: &Directive, table: &mut Table, from: Option<String>, report: &mut Report) {
    let mut enabled = true;
    let mut size: u64 = 0;
    for a in d.arg_texts() {
        if a == "off" || a == "none" {
            enabled = false;
        } else if a == "builtin" {
            size += 20_480;
        } else if let Some(n) = a.strip_prefix("builtin:") {
            size += n.parse::<u64>().unwrap_or(20_480);
        } else if let Some(rest) = a.strip_prefix("shared:") {
            match rest.rsplit_once(':').and_then(|(_, s)| parse_size(s)) {
                // nginx: one megabyte holds about 4000 sessions.
                Some(bytes) => size += (bytes * 4000 / (1024 * 1024)).max(1),
                None => report.add(d, format!("not translated: {a:?} is not NAME:SIZE")),
            }
        } else {
            report.add(d, format!("not translated: {a:?} is not off, none, builtin or shared"));
        }
    }
    table.set("enabled", boolean(enabled), from.clone());
    if enabled && size > 0 {
        table.set(
            "size",
            size.to_string(),
            from.map(|f| format!("{f} (about 4000 sessions per MB)")),
        );
    }
}

fn cipher_list(conf: &Conf, d: &Directive, prefer: bool, tls: &mut Table, report: &mut Report) {
    let c = ciphers::evaluate(&d.arg_texts().join(":"));
    if !c.dropped.is_empty() {
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for (name, why) in &c.dropped {
            match by_reason.iter_mut().find(|(w, _)| w == why) {
                Some((_, names)) => names.push(name),
                None => by_reason.push((why, vec![name])),
            }
        }
        let text: Vec<String> = by_reason
            .iter()
            .map(|(why, names)| format!("{} dropped ({why})", names.join(", ")))
            .collect();
        report.add(d, text.join("; "));
    }
    if c.kept.is_empty() {
        report.add(
            d,
            "not translated: no suite tlsgate offers; its default TLS 1.2 suites are used",
        );
        return;
    }
    let from = Some(conf.place(d.at));
    if !prefer && ciphers::is_all(&c.kept) {
        // The client's order decides among all six: exactly tlsgate's default.
        return;
    }
    let value = if prefer {
        c.kept.join(":")
    } else {
        // Client order decides (nginx's ssl_prefer_server_ciphers off): one equal-preference group
        // per certificate type, as tlsgate's default writes it.
        let ecdsa: Vec<&str> = c.kept.iter().copied().filter(|s| ciphers::is_ecdsa(s)).collect();
        let rsa: Vec<&str> = c.kept.iter().copied().filter(|s| !ciphers::is_ecdsa(s)).collect();
        [ecdsa, rsa]
            .iter()
            .filter(|g| !g.is_empty())
            .map(|g| format!("[{}]", g.join("|")))
            .collect::<Vec<_>>()
            .join(":")
    };
    tls.set("ciphers_tls12", q(&value), from);
}

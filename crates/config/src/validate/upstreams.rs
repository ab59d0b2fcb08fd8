//! `[[upstream]]`: unique names, at least one origin server (each one an address that
//! `crate::address` accepts), timeouts above zero, a protocol the servers can speak, and an
//! `[upstream.tls]` that can be built (both halves of a client certificate, known groups, a
//! valid name).

use super::servers;
use crate::address::OriginAddr;
use crate::issue::Issue;
use crate::model::{Config, UpstreamConfig, UpstreamProtocol};
use std::collections::HashSet;

/// Every `[[upstream]]`.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let mut names = HashSet::new();
    for (i, u) in config.upstreams.iter().enumerate() {
        let at = format!("upstream[{i}]");
        if !names.insert(u.name.as_str()) {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("upstream name {:?} is used twice", u.name),
            ));
        }
        if u.servers.is_empty() {
            issues.push(Issue::error(format!("{at}.servers"), "list at least one host:port"));
        }
        servers::check_origins(&format!("{at}.servers"), &u.servers, issues);
        if u.connect_timeout.get().is_zero() {
            issues.push(Issue::error(format!("{at}.connect_timeout"), "must be above zero"));
        }
        if u.header_timeout.get().is_zero() {
            issues.push(Issue::error(format!("{at}.header_timeout"), "must be above zero"));
        }
        check_tls(&at, u, issues);
    }
}

/// `protocol` against the servers' schemes, and `[upstream.tls]`.
fn check_tls(at: &str, u: &UpstreamConfig, issues: &mut Vec<Issue>) {
    let parsed: Vec<OriginAddr> = u.servers.iter().filter_map(|s| OriginAddr::parse(s).ok()).collect();
    let any_tls = parsed.iter().any(|a| a.tls);
    if u.protocol == UpstreamProtocol::Auto {
        if let Some(plain) = u.servers.iter().zip(&parsed).find(|(_, a)| !a.tls) {
            issues.push(Issue::error(
                format!("{at}.protocol"),
                format!(
                    "\"auto\" picks the HTTP version by ALPN, which needs TLS, but {:?} is plaintext: \
                     write https:// servers, or protocol = \"http1\" or \"http2\" (prior knowledge)",
                    plain.0
                ),
            ));
        }
    }
    let tls = &u.tls;
    let at = format!("{at}.tls");
    let default = crate::model::UpstreamTlsConfig::default();
    if !any_tls && *tls != default {
        issues.push(Issue::warning(
            at.clone(),
            "no server of this group is https://, so these settings are not used",
        ));
    }
    if any_tls {
        let ca = tls
            .verify
            .then(|| tls.ca.clone().unwrap_or_else(|| crate::model::SYSTEM_CA_BUNDLE.into()));
        for (field, path) in [
            ("ca", ca.as_ref()),
            ("client_certificate", tls.client_certificate.as_ref()),
            ("client_key", tls.client_key.as_ref()),
        ] {
            if let Some(path) = path.filter(|p| !p.is_file()) {
                issues.push(Issue::error(
                    format!("{at}.{field}"),
                    format!("{}: no such file", path.display()),
                ));
            }
        }
    }
    if tls.client_certificate.is_some() != tls.client_key.is_some() {
        issues.push(Issue::error(
            at.clone(),
            "client_certificate and client_key go together: set both or neither",
        ));
    }
    if !tls.verify && any_tls {
        issues.push(Issue::warning(
            format!("{at}.verify"),
            "origin certificates are not verified: anyone on the path can read and change the traffic",
        ));
    }
    if let Some(name) = &tls.server_name {
        if let Err(e) = OriginAddr::parse_host_port(&format!("{name}:1")) {
            issues.push(Issue::error(format!("{at}.server_name"), format!("{name:?}: {e}")));
        }
    }
    if tls.groups.is_empty() {
        issues.push(Issue::error(
            format!("{at}.groups"),
            "at least one key-exchange group is needed",
        ));
    }
    for (i, g) in tls.groups.iter().enumerate() {
        if !super::tls::KNOWN_GROUPS.contains(&g.as_str()) {
            issues.push(Issue::error(
                format!("{at}.groups[{i}]"),
                format!("unknown group {g:?}; known: {}", super::tls::KNOWN_GROUPS.join(", ")),
            ));
        }
    }
}

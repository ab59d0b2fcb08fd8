//! Semantic validation: what serde cannot check (references between sections, value ranges,
//! the security posture). Each [`Issue`] names the field it is about, e.g. `site[0].route[2].upstream`.

mod edits;
mod log;
mod secrets;
pub use secrets::secret_file_permissions;
mod routes;
mod servers;

use crate::model::*;
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

/// How bad an [`Issue`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The configuration cannot be used.
    Error,
    /// Usable, but probably not what the operator meant.
    Warning,
}

/// One finding about a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Error or warning.
    pub severity: Severity,
    /// The field, as a path: `tls.groups`, `site[1].certificate[0].chain`.
    pub field: String,
    /// What is wrong, and what to do about it.
    pub message: String,
}

impl Issue {
    /// An error about `field`.
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A warning about `field`.
    pub fn warning(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}: {}: {}", self.field, self.message)
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML did not parse or did not fit the model (the message names line and key).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// Parsed, but semantically invalid.
    #[error("{}: {}", path.display(), issues.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every finding (errors and warnings).
        issues: Vec<Issue>,
    },
}

const KNOWN_GROUPS: &[&str] = &[
    "X25519MLKEM768",
    "X25519Kyber768Draft00",
    "X25519",
    "P-256",
    "P-384",
    "P-521",
];
const KNOWN_ALPN: &[&str] = &["h2", "http/1.1"];

/// Checks a parsed configuration and returns every finding; an empty list means all is well.
pub fn validate(config: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    validate_server(config, &mut issues);
    validate_tls(&config.tls, &mut issues);
    validate_listeners(config, &mut issues);
    validate_sites(config, &mut issues);
    validate_upstreams(config, &mut issues);
    validate_keyless(config, &mut issues);
    validate_control(config, &mut issues);
    validate_http2(&config.http2, &mut issues);
    validate_cluster(config, &mut issues);
    log::check(&config.log, &mut issues);
    issues
}

fn validate_http2(h2: &Http2Config, issues: &mut Vec<Issue>) {
    const MAX_WINDOW: u32 = (1 << 31) - 1;
    if h2.max_concurrent_streams == 0 {
        issues.push(Issue::error("http2.max_concurrent_streams", "must be at least 1"));
    }
    for (field, v) in [
        ("http2.initial_stream_window", h2.initial_stream_window),
        ("http2.initial_connection_window", h2.initial_connection_window),
    ] {
        if !(65_535..=MAX_WINDOW).contains(&v) {
            issues.push(Issue::error(
                field,
                format!("must be between 65535 and {MAX_WINDOW} bytes"),
            ));
        }
    }
    if !(16_384..=16_777_215).contains(&h2.max_frame_size) {
        issues.push(Issue::error(
            "http2.max_frame_size",
            "must be between 16384 and 16777215 bytes",
        ));
    }
    if h2.header_table_size > 1 << 20 {
        issues.push(Issue::warning(
            "http2.header_table_size",
            "above 1 MiB: every connection may hold this much HPACK state",
        ));
    }
    if h2.keep_alive_interval.is_some_and(|d| d.get().is_zero()) {
        issues.push(Issue::error(
            "http2.keep_alive_interval",
            "must be above zero (leave it out for no pings)",
        ));
    }
    if h2.keep_alive_timeout.get().is_zero() {
        issues.push(Issue::error("http2.keep_alive_timeout", "must be above zero"));
    }
}

fn validate_server(config: &Config, issues: &mut Vec<Issue>) {
    let s = &config.server;
    if s.max_connections == 0 {
        issues.push(Issue::error("server.max_connections", "must be at least 1"));
    }
    if s.handshake_timeout.get().is_zero() {
        issues.push(Issue::error("server.handshake_timeout", "must be above zero"));
    }
    if s.max_request_header_bytes < 1024 {
        issues.push(Issue::error("server.max_request_header_bytes", "must be at least 1024"));
    }
    if let Some(addr) = config.admin.listen {
        if !addr.ip().is_loopback() && !config.admin.allow_non_loopback {
            issues.push(Issue::error(
                "admin.listen",
                format!("{addr} is not a loopback address; the admin listener has no authentication, set admin.allow_non_loopback = true to bind it anyway"),
            ));
        }
    }
}

fn validate_tls(tls: &TlsConfig, issues: &mut Vec<Issue>) {
    if tls.min_version > tls.max_version {
        issues.push(Issue::error("tls.min_version", "is above tls.max_version"));
    }
    if tls.groups.is_empty() {
        issues.push(Issue::error("tls.groups", "at least one key-exchange group is needed"));
    }
    for (i, g) in tls.groups.iter().enumerate() {
        if !KNOWN_GROUPS.contains(&g.as_str()) {
            issues.push(Issue::error(
                format!("tls.groups[{i}]"),
                format!("unknown group {g:?}; known: {}", KNOWN_GROUPS.join(", ")),
            ));
        }
    }
    if tls.alpn.is_empty() {
        issues.push(Issue::error("tls.alpn", "offer at least one of h2, http/1.1"));
    }
    for (i, p) in tls.alpn.iter().enumerate() {
        if !KNOWN_ALPN.contains(&p.as_str()) {
            issues.push(Issue::error(
                format!("tls.alpn[{i}]"),
                format!("unsupported protocol {p:?}; use h2 or http/1.1"),
            ));
        }
    }
    for part in tls
        .ciphers_tls12
        .split([':', '|', '[', ']', ','])
        .filter(|p| !p.is_empty())
    {
        let forward_secret = part.starts_with("ECDHE-") || part.starts_with("ECDHE+") || part == "ECDHE";
        let aead = part.contains("GCM") || part.contains("CHACHA20") || part.starts_with('!') || part.starts_with('-');
        if part.starts_with('!') || part.starts_with('-') {
            continue;
        }
        if !forward_secret {
            issues.push(Issue::error(
                "tls.ciphers_tls12",
                format!("{part:?} is not a forward-secret ECDHE suite; RSA key exchange is not allowed"),
            ));
        } else if !aead {
            issues.push(Issue::error(
                "tls.ciphers_tls12",
                format!("{part:?} is not an AEAD (GCM or ChaCha20-Poly1305) suite; CBC suites are not allowed"),
            ));
        }
    }
    if !(512..=16_384).contains(&tls.max_record_size) {
        issues.push(Issue::error(
            "tls.max_record_size",
            "must be between 512 and 16384 bytes",
        ));
    }
    if tls.session_cache.enabled && tls.session_cache.size == 0 {
        issues.push(Issue::error(
            "tls.session_cache.size",
            "must be at least 1 when the cache is enabled",
        ));
    }
    if tls.session_cache.timeout.get().is_zero() {
        issues.push(Issue::error("tls.session_cache.timeout", "must be above zero"));
    }
    if tls.tickets.rotation.get().as_secs() < 1 {
        issues.push(Issue::error("tls.tickets.rotation", "must be at least 1s"));
    }
    if tls.tickets.lifetime.get().as_secs() < 1 {
        issues.push(Issue::error("tls.tickets.lifetime", "must be at least 1s"));
    }
    if tls.tickets.rotation.get() > std::time::Duration::from_secs(24 * 3600) {
        issues.push(Issue::warning(
            "tls.tickets.rotation",
            "keys older than a day weaken forward secrecy; rotate at least daily",
        ));
    }
}

fn validate_listeners(config: &Config, issues: &mut Vec<Issue>) {
    if config.listeners.is_empty() {
        issues.push(Issue::error("listener", "at least one [[listener]] is required"));
    }
    let mut seen = HashSet::new();
    for (i, l) in config.listeners.iter().enumerate() {
        if !seen.insert(l.listen) {
            issues.push(Issue::error(
                format!("listener[{i}].listen"),
                format!("{} is used by another listener", l.listen),
            ));
        }
        if l.backlog == 0 {
            issues.push(Issue::error(format!("listener[{i}].backlog"), "must be at least 1"));
        }
        if l.tfo_queue() > 65_535 {
            issues.push(Issue::error(
                format!("listener[{i}].tcp_fastopen"),
                "queue length must be at most 65535 (0 = off)",
            ));
        }
        if l.kind == ListenerKind::Redirect && !matches!(l.redirect_status, 301 | 302 | 307 | 308) {
            issues.push(Issue::error(
                format!("listener[{i}].redirect_status"),
                "must be 301, 302, 307 or 308",
            ));
        }
        if Some(l.listen) == config.admin.listen {
            issues.push(Issue::error(
                format!("listener[{i}].listen"),
                "is the admin listener's address",
            ));
        }
    }
    if !config.listeners.iter().any(|l| l.kind == ListenerKind::Https) && !config.listeners.is_empty() {
        issues.push(Issue::warning(
            "listener",
            "no https listener: tlsgate will only redirect",
        ));
    }
}

fn validate_sites(config: &Config, issues: &mut Vec<Issue>) {
    if config.sites.is_empty() {
        issues.push(Issue::error("site", "at least one [[site]] is required"));
    }
    let defaults = config.sites.iter().filter(|s| s.default).count();
    if defaults > 1 {
        issues.push(Issue::error("site", "more than one site sets default = true"));
    }
    let upstreams: HashSet<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    let mut names = HashSet::new();
    let mut hosts = HashSet::new();
    for (i, site) in config.sites.iter().enumerate() {
        let at = format!("site[{i}]");
        if !names.insert(site.name.as_str()) {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("site name {:?} is used twice", site.name),
            ));
        }
        if site.server_names.is_empty() {
            issues.push(Issue::error(
                format!("{at}.server_names"),
                "list at least one host name",
            ));
        }
        for (j, host) in site.server_names.iter().enumerate() {
            let valid = !host.is_empty()
                && host
                    .trim_start_matches("*.")
                    .split('.')
                    .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
            if !valid {
                issues.push(Issue::error(
                    format!("{at}.server_names[{j}]"),
                    format!("{host:?} is not a host name (or *.wildcard)"),
                ));
            }
            if !hosts.insert(host.to_ascii_lowercase()) {
                issues.push(Issue::error(
                    format!("{at}.server_names[{j}]"),
                    format!("{host:?} belongs to another site too"),
                ));
            }
        }
        if site.certificates.is_empty() {
            issues.push(Issue::error(
                format!("{at}.certificate"),
                "at least one [[site.certificate]] is required",
            ));
        }
        for (j, c) in site.certificates.iter().enumerate() {
            validate_key_source(config, &format!("{at}.certificate[{j}]"), c, issues);
            validate_ocsp(&format!("{at}.certificate[{j}]"), c, issues);
            for (field, path) in [("chain", Some(&c.chain)), ("key", c.key.as_ref())] {
                let Some(path) = path else { continue };
                if !path.is_file() {
                    issues.push(Issue::error(
                        format!("{at}.certificate[{j}].{field}"),
                        format!("{}: no such file", path.display()),
                    ));
                }
            }
        }
        if let Some(h) = &site.hsts {
            if h.preload && (!h.include_subdomains || h.max_age.get().as_secs() < 31_536_000) {
                issues.push(Issue::warning(
                    format!("{at}.hsts.preload"),
                    "the browsers' HSTS preload list requires include_subdomains = true and max_age of at least 365d; \
                     this site would be rejected from it",
                ));
            }
        }
        if site.routes.is_empty() {
            issues.push(Issue::error(
                format!("{at}.route"),
                "at least one [[site.route]] is required",
            ));
        }
        for (j, r) in site.routes.iter().enumerate() {
            let rat = format!("{at}.route[{j}]");
            if !r.path_prefix.starts_with('/') {
                issues.push(Issue::error(format!("{rat}.path_prefix"), "must start with /"));
            }
            edits::validate_route_edits(
                &rat,
                &r.request_headers,
                &r.response_headers,
                r.rewrite_prefix.as_deref(),
                issues,
            );
            match (&r.upstream, &r.fixed_response) {
                (Some(_), Some(_)) => {
                    issues.push(Issue::error(&rat, "set either upstream or fixed_response, not both"))
                }
                (None, None) => issues.push(Issue::error(&rat, "set upstream or fixed_response")),
                (Some(u), None) if !upstreams.contains(u.as_str()) => issues.push(Issue::error(
                    format!("{rat}.upstream"),
                    format!("no [[upstream]] is named {u:?}"),
                )),
                (None, Some(f)) => routes::check_fixed_response(&rat, f, issues),
                _ => {}
            }
        }
    }
}

/// Exactly one of `key`, `key_servers` and `key_server_pool`; key servers need `[keyless]`,
/// `host:port` entries and a pool that exists.
fn validate_key_source(config: &Config, at: &str, c: &CertificateConfig, issues: &mut Vec<Issue>) {
    let sources = usize::from(c.key.is_some())
        + usize::from(!c.key_servers.is_empty())
        + usize::from(c.key_server_pool.is_some());
    if sources > 1 {
        issues.push(Issue::error(
            format!("{at}.key_servers"),
            "set either key, key_servers or key_server_pool, not several",
        ));
    } else if sources == 0 {
        issues.push(Issue::error(
            format!("{at}.key"),
            "set key (a private-key file), key_servers or key_server_pool (keyless TLS)",
        ));
    } else if c.key.is_none() && config.keyless.is_none() {
        issues.push(Issue::error(
            format!("{at}.key_servers"),
            "key servers need a [keyless] section (client certificate and key-server CA)",
        ));
    }
    if let (Some(pool), Some(k)) = (&c.key_server_pool, &config.keyless) {
        if !k.pools.iter().any(|p| &p.name == pool) {
            issues.push(Issue::error(
                format!("{at}.key_server_pool"),
                format!("no [[keyless.pool]] named {pool:?}"),
            ));
        }
    }
    validate_host_ports(&format!("{at}.key_servers"), &c.key_servers, issues);
}

fn validate_host_ports(at: &str, servers: &[String], issues: &mut Vec<Issue>) {
    servers::check_host_ports(at, servers, issues);
}

/// OCSP stapling: one source at a time, an `http://` responder, an existing file, a sane interval.
fn validate_ocsp(at: &str, c: &CertificateConfig, issues: &mut Vec<Issue>) {
    if c.ocsp == OcspMode::Off {
        for (field, set) in [("ocsp_url", c.ocsp_url.is_some()), ("ocsp_file", c.ocsp_file.is_some())] {
            if set {
                issues.push(Issue::error(
                    format!("{at}.{field}"),
                    "is set but ocsp = \"off\"; remove one of them",
                ));
            }
        }
    }
    if c.ocsp_url.is_some() && c.ocsp_file.is_some() {
        issues.push(Issue::error(
            format!("{at}.ocsp_file"),
            "set either ocsp_url (fetch) or ocsp_file (staple a file), not both",
        ));
    }
    if let Some(url) = &c.ocsp_url {
        let host = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split(['/', '?']).next());
        if host.is_none_or(|h| h.is_empty()) {
            issues.push(Issue::error(
                format!("{at}.ocsp_url"),
                format!("{url:?} is not an http:// URL (OCSP responders are reached over plain HTTP)"),
            ));
        }
    }
    if let Some(path) = &c.ocsp_file {
        if !path.is_file() {
            issues.push(Issue::error(
                format!("{at}.ocsp_file"),
                format!("{}: no such file", path.display()),
            ));
        }
    }
    if c.ocsp_refresh
        .is_some_and(|r| r.get() < std::time::Duration::from_secs(1))
    {
        issues.push(Issue::error(format!("{at}.ocsp_refresh"), "must be at least 1s"));
    }
}

fn validate_keyless(config: &Config, issues: &mut Vec<Issue>) {
    let Some(k) = &config.keyless else { return };
    for (field, path) in [
        ("client_certificate", &k.client_certificate),
        ("client_key", &k.client_key),
        ("server_ca", &k.server_ca),
    ] {
        if !path.is_file() {
            issues.push(Issue::error(
                format!("keyless.{field}"),
                format!("{}: no such file", path.display()),
            ));
        }
    }
    if k.connections_per_server == 0 {
        issues.push(Issue::error("keyless.connections_per_server", "must be at least 1"));
    }
    for (i, pool) in k.pools.iter().enumerate() {
        let at = format!("keyless.pool[{i}]");
        let valid_name = !pool.name.is_empty()
            && pool
                .name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-'));
        if !valid_name {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("{:?}: use letters, digits, '.', '_' and '-'", pool.name),
            ));
        }
        if k.pools[..i].iter().any(|p| p.name == pool.name) {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("{:?} is defined twice", pool.name),
            ));
        }
        if pool.servers.is_empty() {
            issues.push(Issue::error(format!("{at}.servers"), "name at least one key server"));
        }
        validate_host_ports(&format!("{at}.servers"), &pool.servers, issues);
    }
    for (field, d) in [
        ("connect_timeout", k.connect_timeout),
        ("request_timeout", k.request_timeout),
        ("health_interval", k.health_interval),
    ] {
        if d.get().is_zero() {
            issues.push(Issue::error(format!("keyless.{field}"), "must be greater than zero"));
        }
    }
}

fn validate_control(config: &Config, issues: &mut Vec<Issue>) {
    let Some(c) = &config.control else { return };
    if !(c.redis_url.starts_with("redis://") || c.redis_url.starts_with("rediss://")) {
        issues.push(Issue::error(
            "control.redis_url",
            format!("{:?}: use redis://host:port or rediss://host:port", c.redis_url),
        ));
    }
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-'))
    };
    if !valid_name(&c.cluster_name) {
        issues.push(Issue::error(
            "control.cluster_name",
            format!("{:?}: use letters, digits, '.', '_' and '-'", c.cluster_name),
        ));
    }
    if c.node_id
        .as_deref()
        .is_some_and(|n| n.is_empty() || n.chars().any(char::is_whitespace))
    {
        issues.push(Issue::error("control.node_id", "must be non-empty, without spaces"));
    }
    for (field, d) in [
        ("poll_interval", c.poll_interval),
        ("heartbeat_interval", c.heartbeat_interval),
    ] {
        if d.get() < std::time::Duration::from_millis(100) {
            issues.push(Issue::error(format!("control.{field}"), "must be at least 100ms"));
        }
    }
}

fn validate_cluster(config: &Config, issues: &mut Vec<Issue>) {
    if config.tls.tickets.early_data && !config.tls.tickets.enabled {
        issues.push(Issue::error(
            "tls.tickets.early_data",
            "0-RTT resumes from TLS 1.3 tickets: set tls.tickets.enabled = true",
        ));
    }
    if config.tls.tickets.early_data && config.tls.max_version != TlsVersion::V1_3 {
        issues.push(Issue::warning(
            "tls.tickets.early_data",
            "0-RTT needs TLS 1.3 (tls.max_version)",
        ));
    }
    let Some(c) = &config.cluster else { return };
    if c.secret_files.is_empty() {
        issues.push(Issue::error(
            "cluster.secret_files",
            "at least one secret file is required (every node must share it)",
        ));
    }
    for (i, path) in c.secret_files.iter().enumerate() {
        if !path.is_file() {
            issues.push(Issue::error(
                format!("cluster.secret_files[{i}]"),
                format!("{}: no such file", path.display()),
            ));
        }
    }
    match c.store {
        StoreKind::Local => {
            if !c.servers.is_empty() {
                issues.push(Issue::warning("cluster.servers", "ignored with store = \"local\""));
            }
        }
        StoreKind::Redis => {
            if c.servers.is_empty() {
                issues.push(Issue::error(
                    "cluster.servers",
                    "store = \"redis\" needs at least one redis:// URL",
                ));
            }
            for (i, url) in c.servers.iter().enumerate() {
                if !url.starts_with("redis://") {
                    issues.push(Issue::error(
                        format!("cluster.servers[{i}]"),
                        format!("{url:?}: expected a redis://host:port URL"),
                    ));
                }
            }
            if c.redis_mode == RedisMode::Sentinel && c.sentinel_service.as_deref().unwrap_or("").is_empty() {
                issues.push(Issue::error(
                    "cluster.sentinel_service",
                    "redis_mode = \"sentinel\" needs the name of the monitored master",
                ));
            }
        }
        StoreKind::Memcached => {
            if c.servers.is_empty() {
                issues.push(Issue::error(
                    "cluster.servers",
                    "store = \"memcached\" needs at least one host:port",
                ));
            }
            servers::check_host_ports("cluster.servers", &c.servers, issues);
        }
    }
    if c.lookup_timeout.get().is_zero() || c.write_timeout.get().is_zero() || c.breaker_retry.get().is_zero() {
        issues.push(Issue::error(
            "cluster.lookup_timeout",
            "lookup_timeout, write_timeout and breaker_retry must be greater than zero",
        ));
    } else if c.lookup_timeout.get() > std::time::Duration::from_millis(100) {
        issues.push(Issue::warning(
            "cluster.lookup_timeout",
            "above 100ms: every handshake may wait this long when the store is slow",
        ));
    }
    if c.breaker_failures == 0 {
        issues.push(Issue::error("cluster.breaker_failures", "must be at least 1"));
    }
    if c.connections == 0 {
        issues.push(Issue::error("cluster.connections", "must be at least 1"));
    }
    if c.key_prefix
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        || c.key_prefix.len() > 64
    {
        issues.push(Issue::error(
            "cluster.key_prefix",
            "at most 64 characters, no spaces or control characters (memcached keys)",
        ));
    }
}

fn validate_upstreams(config: &Config, issues: &mut Vec<Issue>) {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        crate::parse(text).unwrap()
    }

    const MINIMAL: &str = r#"
[[listener]]
listen = "127.0.0.1:8443"

[[site]]
name = "a"
server_names = ["localhost"]
[[site.certificate]]
chain = "/dev/null"
key = "/dev/null"
[[site.route]]
fixed_response = { body = "hi" }
"#;

    fn errors(c: &Config) -> Vec<String> {
        validate(c)
            .into_iter()
            .filter(|i| i.severity == Severity::Error)
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn minimal_config_has_only_file_errors() {
        // /dev/null is not a regular file, so the two file checks fire and nothing else.
        let errs = errors(&parse(MINIMAL));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("site[0].certificate[0].chain"), "{errs:?}");
    }

    #[test]
    fn exactly_one_key_source_is_required() {
        let both = MINIMAL.replace("key = \"/dev/null\"", "key = \"/dev/null\"\nkey_servers = [\"k:1\"]");
        assert!(errors(&parse(&both))
            .iter()
            .any(|e| e.contains("site[0].certificate[0].key_servers: set either")));
        let neither = MINIMAL.replace("key = \"/dev/null\"", "");
        assert!(errors(&parse(&neither))
            .iter()
            .any(|e| e.contains("site[0].certificate[0].key: set key")));
        let keyless = MINIMAL.replace("key = \"/dev/null\"", "key_servers = [\"k:1\", \"nope\"]");
        let errs = errors(&parse(&keyless));
        assert!(
            errs.iter()
                .any(|e| e.contains("key_servers: key servers need a [keyless]")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("key_servers[1]")), "{errs:?}");
        let with_section = format!(
            "{keyless}\n[keyless]\nclient_certificate = \"/x\"\nclient_key = \"/x\"\nserver_ca = \"/x\"\nconnections_per_server = 0\n"
        );
        let errs = errors(&parse(&with_section));
        assert!(errs.iter().any(|e| e.contains("keyless.server_ca")), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.contains("keyless.connections_per_server")),
            "{errs:?}"
        );
        assert!(!errs.iter().any(|e| e.contains("need a [keyless]")), "{errs:?}");
    }

    #[test]
    fn key_server_pools_are_named_once_and_must_exist() {
        let keyless = "[keyless]\nclient_certificate = \"/x\"\nclient_key = \"/x\"\nserver_ca = \"/x\"\n";
        let cert = MINIMAL.replace("key = \"/dev/null\"", "key_server_pool = \"main\"");
        let ok = format!("{cert}\n{keyless}[[keyless.pool]]\nname = \"main\"\nservers = [\"k:1\"]\n");
        let errs = errors(&parse(&ok));
        assert!(!errs.iter().any(|e| e.contains("pool")), "{errs:?}");
        let missing = format!("{cert}\n{keyless}[[keyless.pool]]\nname = \"other\"\nservers = [\"k:1\"]\n");
        let errs = errors(&parse(&missing));
        assert!(
            errs.iter()
                .any(|e| e.contains("key_server_pool: no [[keyless.pool]] named \"main\"")),
            "{errs:?}"
        );
        let bad = format!(
            "{cert}\n{keyless}[[keyless.pool]]\nname = \"main\"\nservers = [\"nope\"]\n[[keyless.pool]]\nname = \"main\"\nservers = []\n[[keyless.pool]]\nname = \"a b\"\nservers = [\"k:1\"]\n"
        );
        let errs = errors(&parse(&bad));
        for want in [
            "keyless.pool[0].servers[0]",
            "keyless.pool[1].name: \"main\" is defined twice",
            "keyless.pool[1].servers: name at least one",
            "keyless.pool[2].name",
        ] {
            assert!(errs.iter().any(|e| e.contains(want)), "{want}: {errs:?}");
        }
        let both = MINIMAL.replace(
            "key = \"/dev/null\"",
            "key_servers = [\"k:1\"]\nkey_server_pool = \"main\"",
        );
        assert!(errors(&parse(&both)).iter().any(|e| e.contains("not several")));
    }

    #[test]
    fn control_settings_are_checked() {
        let ok = format!("{MINIMAL}\n[control]\nredis_url = \"redis://127.0.0.1:6379\"\n");
        assert!(!errors(&parse(&ok)).iter().any(|e| e.contains("control")));
        let bad = format!(
            "{MINIMAL}\n[control]\nredis_url = \"http://x\"\ncluster_name = \"a b\"\nnode_id = \"\"\npoll_interval = \"10ms\"\n"
        );
        let errs = errors(&parse(&bad));
        for want in [
            "control.redis_url",
            "control.cluster_name",
            "control.node_id",
            "control.poll_interval",
        ] {
            assert!(errs.iter().any(|e| e.contains(want)), "{want}: {errs:?}");
        }
    }

    #[test]
    fn rsa_key_exchange_is_refused() {
        let mut c = parse(MINIMAL);
        c.tls.ciphers_tls12 = "AES128-GCM-SHA256".into();
        assert!(errors(&c)
            .iter()
            .any(|e| e.contains("tls.ciphers_tls12") && e.contains("RSA key exchange")));
    }

    #[test]
    fn http2_and_tfo_limits_are_named() {
        let mut c = parse(MINIMAL);
        c.http2.max_concurrent_streams = 0;
        c.http2.max_frame_size = 1000;
        c.http2.initial_stream_window = 10;
        c.listeners[0].tcp_fastopen = Some(100_000);
        let errs = errors(&c);
        for field in [
            "http2.max_concurrent_streams",
            "http2.max_frame_size",
            "http2.initial_stream_window",
            "listener[0].tcp_fastopen",
        ] {
            assert!(errs.iter().any(|e| e.contains(field)), "{field}: {errs:?}");
        }
    }

    #[test]
    fn cbc_is_refused() {
        let mut c = parse(MINIMAL);
        c.tls.ciphers_tls12 = "ECDHE-RSA-AES128-SHA".into();
        assert!(errors(&c).iter().any(|e| e.contains("CBC")));
    }

    #[test]
    fn default_cipher_list_is_accepted() {
        let c = parse(MINIMAL);
        assert!(!errors(&c).iter().any(|e| e.contains("ciphers")));
    }

    #[test]
    fn unknown_upstream_is_named() {
        let mut c = parse(MINIMAL);
        c.sites[0].routes[0].fixed_response = None;
        c.sites[0].routes[0].upstream = Some("nope".into());
        assert!(errors(&c)
            .iter()
            .any(|e| e.contains("site[0].route[0].upstream") && e.contains("\"nope\"")));
    }

    #[test]
    fn admin_must_stay_on_loopback() {
        let mut c = parse(MINIMAL);
        c.admin.listen = Some("0.0.0.0:9090".parse().unwrap());
        assert!(errors(&c).iter().any(|e| e.contains("admin.listen")));
        c.admin.allow_non_loopback = true;
        assert!(!errors(&c).iter().any(|e| e.contains("admin.listen")));
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_name() {
        let err = crate::parse("[server]\nworkerz = 2\n").unwrap_err();
        assert!(err.contains("workerz"), "{err}");
    }

    #[test]
    fn hsts_preload_without_its_requirements_warns() {
        let mut c = parse(&format!("{MINIMAL}[site.hsts]\nmax_age = \"1d\"\npreload = true\n"));
        let warned = |c: &Config| {
            validate(c)
                .iter()
                .any(|i| i.severity == Severity::Warning && i.field == "site[0].hsts.preload")
        };
        assert!(warned(&c));
        {
            let h = c.sites[0].hsts.as_mut().unwrap();
            h.include_subdomains = true;
            h.max_age = crate::Duration::from_secs(31_536_000);
        }
        assert!(!warned(&c));
        assert_eq!(
            c.sites[0].hsts.as_ref().unwrap().header_value(),
            "max-age=31536000; includeSubDomains; preload"
        );
    }

    #[test]
    fn ocsp_settings_are_checked_and_named() {
        let with = |lines: &str| {
            let text = MINIMAL.replace("key = \"/dev/null\"\n", &format!("key = \"/dev/null\"\n{lines}\n"));
            errors(&parse(&text))
        };
        let named = |errs: &[String], field: &str, what: &str| {
            assert!(
                errs.iter().any(|e| e.contains(field) && e.contains(what)),
                "{field} / {what}: {errs:?}"
            );
        };
        let errs = with("ocsp = \"off\"\nocsp_url = \"http://ocsp.example/\"");
        named(&errs, "site[0].certificate[0].ocsp_url", "ocsp = \"off\"");
        let errs = with("ocsp_url = \"https://ocsp.example/\"");
        named(&errs, "site[0].certificate[0].ocsp_url", "not an http:// URL");
        let errs = with("ocsp_url = \"http://ocsp.example/\"\nocsp_file = \"/nonexistent/staple.der\"");
        named(&errs, "site[0].certificate[0].ocsp_file", "not both");
        named(&errs, "site[0].certificate[0].ocsp_file", "no such file");
        let errs = with("ocsp_refresh = \"100ms\"");
        named(&errs, "site[0].certificate[0].ocsp_refresh", "at least 1s");
        let fine = with("ocsp_url = \"http://127.0.0.1:8888\"\nocsp_refresh = \"1h\"");
        assert!(!fine.iter().any(|e| e.contains("ocsp")), "{fine:?}");
        assert!(
            crate::parse(&MINIMAL.replace("key = \"/dev/null\"\n", "key = \"/dev/null\"\nocsp = \"sometimes\"\n"))
                .unwrap_err()
                .contains("sometimes")
        );
    }

    #[test]
    fn bad_groups_and_versions() {
        let mut c = parse(MINIMAL);
        c.tls.groups = vec!["X448".into()];
        c.tls.min_version = TlsVersion::V1_3;
        c.tls.max_version = TlsVersion::V1_2;
        let errs = errors(&c);
        assert!(errs.iter().any(|e| e.contains("tls.groups[0]")));
        assert!(errs.iter().any(|e| e.contains("tls.min_version")));
    }

    #[test]
    fn cluster_settings_name_their_field() {
        let with = |cluster: &str| errors(&parse(&format!("{cluster}\n{MINIMAL}")));
        let errs = with("[cluster]\nsecret_files = []\nstore = \"redis\"");
        assert!(errs.iter().any(|e| e.contains("cluster.secret_files")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("cluster.servers")), "{errs:?}");
        let errs = with("[cluster]\nsecret_files = [\"/nope\"]\nstore = \"redis\"\nservers = [\"10.0.0.1:6379\"]\nredis_mode = \"sentinel\"");
        assert!(errs.iter().any(|e| e.contains("cluster.secret_files[0]")), "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.contains("cluster.servers[0]") && e.contains("redis://")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("cluster.sentinel_service")), "{errs:?}");
        let errs = with("[cluster]\nsecret_files = [\"/dev/null\"]\nstore = \"memcached\"\nservers = [\"nohost\"]\nlookup_timeout = \"0s\"");
        assert!(
            errs.iter()
                .any(|e| e.contains("cluster.servers[0]") && e.contains("host:port")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("cluster.lookup_timeout")), "{errs:?}");
        let secret = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let fine = with(&format!(
            "[cluster]\nsecret_files = [{secret:?}]\nstore = \"memcached\"\nservers = [\"127.0.0.1:11211\"]"
        ));
        assert!(!fine.iter().any(|e| e.contains("cluster")), "{fine:?}");
        let errs = with("[tls.tickets]\nenabled = false\nearly_data = true");
        assert!(errs.iter().any(|e| e.contains("tls.tickets.early_data")), "{errs:?}");
    }
}

//! `[server]`, `[admin] listen`, `[[listener]]` and `[http2]`: limits and timeouts of client
//! connections, the sockets clients reach, and the SETTINGS announced to HTTP/2 clients.

use crate::issue::Issue;
use crate::model::{Config, Http2Config, ListenerConfig, ListenerKind};
use std::collections::HashSet;

/// `[server]` limits and timeouts, and an admin listener that must stay on loopback.
pub(super) fn check_server(config: &Config, issues: &mut Vec<Issue>) {
    let s = &config.server;
    if s.max_connections == 0 {
        issues.push(Issue::error("server.max_connections", "must be at least 1"));
    }
    for (field, d) in [
        ("server.handshake_timeout", s.handshake_timeout),
        ("server.client_idle_timeout", s.client_idle_timeout),
        ("server.client_header_timeout", s.client_header_timeout),
        ("server.client_send_timeout", s.client_send_timeout),
    ] {
        if d.get().is_zero() {
            issues.push(Issue::error(field, "must be above zero"));
        }
    }
    let release = s.memory_release_interval.get();
    if !release.is_zero() && release < std::time::Duration::from_millis(100) {
        // Each release walks the worker's allocator pages: a few times a second is plenty (the
        // allocator's own purge delay is 1 s).
        issues.push(Issue::error(
            "server.memory_release_interval",
            format!(
                "{} is too often; at least 100ms, or 0s for never",
                s.memory_release_interval
            ),
        ));
    }
    if s.max_upstream_requests_per_connection == 0 {
        issues.push(Issue::error(
            "server.max_upstream_requests_per_connection",
            "must be at least 1",
        ));
    }
    if s.max_request_header_bytes < 1024 {
        issues.push(Issue::error("server.max_request_header_bytes", "must be at least 1024"));
    }
    for (i, entry) in config.admin.allowed_hosts.iter().enumerate() {
        if let Some(why) = bad_allowed_host(entry) {
            issues.push(Issue::error(
                format!("admin.allowed_hosts[{i}]"),
                format!("{entry:?}: {why}"),
            ));
        }
    }
    if let Some(path) = &s.upgrade_socket {
        check_upgrade_socket(path, issues);
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

/// `server.upgrade_socket`: a path that fits a Unix socket address (`sun_path`, 108 bytes with
/// its terminating NUL) and names a file, not a directory.
fn check_upgrade_socket(path: &std::path::Path, issues: &mut Vec<Issue>) {
    const FIELD: &str = "server.upgrade_socket";
    let len = path.as_os_str().len();
    if len == 0 {
        issues.push(Issue::error(
            FIELD,
            "must not be empty (leave it out to turn upgrades off)",
        ));
    } else if len > 107 {
        issues.push(Issue::error(
            FIELD,
            format!(
                "{} is {len} bytes long; a Unix socket path holds at most 107",
                path.display()
            ),
        ));
    } else if path.file_name().is_none() || path.as_os_str().to_string_lossy().ends_with('/') {
        issues.push(Issue::error(
            FIELD,
            format!(
                "{} names a directory; name the socket file in it (e.g. upgrade.sock)",
                path.display()
            ),
        ));
    }
}

/// Why an `[admin] allowed_hosts` entry can never match a request's `Host`, if it cannot: the
/// admin guard reads it as a request authority (`split_authority`) of a DNS name, an IP or `_`.
fn bad_allowed_host(entry: &str) -> Option<String> {
    match crate::address::split_authority(entry) {
        Err(e) => Some(format!("{e}; write a host name or IP, with :port or without")),
        Ok((_, Some(0))) => Some("port 0 never matches".into()),
        Ok((host, _)) if !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b)) => {
            Some("a host name has letters, digits, '-', '.' and '_' only (no wildcards)".into())
        }
        Ok(_) => None,
    }
}

/// `[[listener]]`: at least one, distinct addresses, sane queue lengths and redirect statuses.
pub(super) fn check_listeners(config: &Config, issues: &mut Vec<Issue>) {
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
        check_proxy_protocol(i, l, issues);
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

/// `proxy_protocol`: never without the balancers' networks (else anyone could name any client
/// address), and a source list that trusts everyone or does nothing is called out.
fn check_proxy_protocol(i: usize, l: &ListenerConfig, issues: &mut Vec<Issue>) {
    let field = format!("listener[{i}].proxy_protocol_from");
    if l.proxy_protocol && l.proxy_protocol_from.is_empty() {
        issues.push(Issue::error(
            field,
            "required with proxy_protocol = true: the networks of the load balancers that send the \
             header (a listener never takes a client address from just anyone)",
        ));
    } else if !l.proxy_protocol && !l.proxy_protocol_from.is_empty() {
        issues.push(Issue::warning(field, "has no effect without proxy_protocol = true"));
    } else if l.proxy_protocol {
        if let Some(all) = l.proxy_protocol_from.iter().find(|c| c.to_string().ends_with("/0")) {
            issues.push(Issue::warning(
                field,
                format!("{all} lets any host that reaches this listener claim any client address"),
            ));
        }
    }
}

/// `[http2]`: values within what RFC 9113 allows.
pub(super) fn check_http2(h2: &Http2Config, issues: &mut Vec<Issue>) {
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

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};

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
    fn the_memory_release_interval_is_off_or_at_least_100ms() {
        let named = |text: &str| {
            let c = parse(&format!("[server]\n{text}\n{MINIMAL}"));
            errors(&c).iter().any(|e| e.contains("server.memory_release_interval"))
        };
        assert_eq!(parse(MINIMAL).server.memory_release_interval.get().as_secs(), 1);
        assert!(named("memory_release_interval = \"10ms\""));
        assert!(!named("memory_release_interval = \"0s\""), "0 turns it off");
        assert!(!named("memory_release_interval = \"100ms\""));
    }

    #[test]
    fn allowed_hosts_that_can_never_match_are_refused_by_check() {
        let mut c = parse(MINIMAL);
        c.admin.allowed_hosts = ["gw1.internal", "gw2:9090", "[::1]", "*.example", "x:0", "http://x", ""]
            .map(String::from)
            .to_vec();
        let errs = errors(&c);
        for bad in [3, 4, 5, 6] {
            let field = format!("admin.allowed_hosts[{bad}]");
            assert!(errs.iter().any(|e| e.contains(&field)), "{field}: {errs:?}");
        }
        for good in [0, 1, 2] {
            let field = format!("admin.allowed_hosts[{good}]");
            assert!(!errs.iter().any(|e| e.contains(&field)), "{field}: {errs:?}");
        }
    }

    #[test]
    fn proxy_protocol_needs_the_balancers_networks() {
        use crate::validate::{validate, Severity};
        let mut c = parse(MINIMAL);
        c.listeners[0].proxy_protocol = true;
        let errs = errors(&c);
        assert!(
            errs.iter()
                .any(|e| e.contains("listener[0].proxy_protocol_from") && e.contains("required")),
            "{errs:?}"
        );
        c.listeners[0].proxy_protocol_from = vec!["10.0.0.0/8".parse().unwrap()];
        assert!(validate(&c).iter().all(|i| !i.field.contains("proxy_protocol")));
        assert!(c.listeners[0].proxy_protocol_trusts("10.1.2.3".parse().unwrap()));
        assert!(c.listeners[0].proxy_protocol_trusts("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!c.listeners[0].proxy_protocol_trusts("127.0.0.1".parse().unwrap()));
        let warned = |c: &crate::model::Config| {
            validate(c)
                .into_iter()
                .any(|i| i.severity == Severity::Warning && i.field == "listener[0].proxy_protocol_from")
        };
        assert!(!warned(&c));
        c.listeners[0].proxy_protocol_from.push("::/0".parse().unwrap());
        assert!(warned(&c), "a source list that trusts everyone");
        c.listeners[0].proxy_protocol = false;
        assert!(warned(&c), "a source list without proxy_protocol");
        assert!(errors(&c).iter().all(|e| !e.contains("proxy_protocol")));
    }

    #[test]
    fn proxy_protocol_fields_parse_and_bad_networks_are_refused() {
        let text = MINIMAL.replace(
            "listen = \"127.0.0.1:8443\"",
            "listen = \"127.0.0.1:8443\"\nproxy_protocol = true\nproxy_protocol_from = [\"127.0.0.1/32\", \"2001:db8::/32\"]",
        );
        let c = parse(&text);
        assert!(c.listeners[0].proxy_protocol);
        assert_eq!(c.listeners[0].proxy_protocol_from.len(), 2);
        let bad = text.replace("127.0.0.1/32", "10.1.0.0/8");
        assert!(crate::parse(&bad).is_err(), "host bits set below the prefix");
        let defaults = parse(MINIMAL);
        assert!(!defaults.listeners[0].proxy_protocol && defaults.listeners[0].proxy_protocol_from.is_empty());
    }

    #[test]
    fn the_upgrade_socket_must_fit_a_unix_address() {
        let mut c = parse(MINIMAL);
        assert!(c.server.upgrade_socket.is_none(), "off by default");
        let named = |c: &crate::model::Config| {
            errors(c)
                .into_iter()
                .filter(|e| e.contains("server.upgrade_socket"))
                .count()
        };
        c.server.upgrade_socket = Some("/run/tlsgate/upgrade.sock".into());
        assert_eq!(named(&c), 0);
        for bad in ["", "/run/tlsgate/", "/run/tlsgate/.."] {
            c.server.upgrade_socket = Some(bad.into());
            assert_eq!(named(&c), 1, "{bad:?}");
        }
        c.server.upgrade_socket = Some(format!("/{}", "x".repeat(107)).into());
        assert!(errors(&c)
            .iter()
            .any(|e| e.contains("server.upgrade_socket") && e.contains("108 bytes")));
        let parsed = parse(&format!("[server]\nupgrade_socket = \"up.sock\"\n{MINIMAL}"));
        assert_eq!(
            parsed.server.upgrade_socket.as_deref(),
            Some(std::path::Path::new("up.sock"))
        );
    }

    #[test]
    fn admin_must_stay_on_loopback() {
        let mut c = parse(MINIMAL);
        c.admin.listen = Some("0.0.0.0:9090".parse().unwrap());
        assert!(errors(&c).iter().any(|e| e.contains("admin.listen")));
        c.admin.allow_non_loopback = true;
        assert!(!errors(&c).iter().any(|e| e.contains("admin.listen")));
    }
}

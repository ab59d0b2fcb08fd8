//! `[[upstream]]`: unique names, at least one origin server (each one an address that
//! `crate::address` accepts), timeouts above zero, a protocol the servers can speak, and an
//! `[upstream.tls]` that can be built (both halves of a client certificate, known groups, a
//! valid name), `[upstream.health_check]` settings a probe can run with, and `[upstream.retry]`
//! settings within their bounds.

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
        check_health(&at, u, issues);
        check_limits(&at, u, issues);
        check_retry(&at, u, issues);
    }
}

/// The most tries `[upstream.retry] attempts` allows: each one may wait `connect_timeout` or
/// `header_timeout`, and every retry adds load to origins that are already failing.
const MAX_ATTEMPTS: u32 = 10;

/// The longest `[upstream.retry] backoff`.
const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(10);

/// `[upstream.retry]`: 1 to [`MAX_ATTEMPTS`] tries, conditions named once, a budget share of at
/// most 100 %, a backoff of at most [`MAX_BACKOFF`]; settings that cannot matter (retries off,
/// nothing to retry on) are a warning.
fn check_retry(at: &str, u: &UpstreamConfig, issues: &mut Vec<Issue>) {
    let r = &u.retry;
    let at = format!("{at}.retry");
    if r.attempts == 0 {
        issues.push(Issue::error(
            format!("{at}.attempts"),
            "must be at least 1 (1: the first try only, no retries)",
        ));
    } else if r.attempts > MAX_ATTEMPTS {
        issues.push(Issue::error(
            format!("{at}.attempts"),
            format!("{} tries: at most {MAX_ATTEMPTS}", r.attempts),
        ));
    }
    for (i, on) in r.on.iter().enumerate() {
        if r.on[..i].contains(on) {
            issues.push(Issue::warning(
                format!("{at}.on[{i}]"),
                format!("{:?} is named twice", on.as_str()),
            ));
        }
    }
    if r.attempts > 1 && r.on.is_empty() {
        issues.push(Issue::warning(
            format!("{at}.on"),
            "no failure is named, so nothing is retried: set attempts = 1 to say so",
        ));
    }
    if r.budget_percent > 100 {
        issues.push(Issue::error(
            format!("{at}.budget_percent"),
            format!("{} %: at most 100", r.budget_percent),
        ));
    }
    if r.backoff.get() > MAX_BACKOFF {
        issues.push(Issue::error(
            format!("{at}.backoff"),
            format!("{}: at most {}", r.backoff, crate::Duration(MAX_BACKOFF)),
        ));
    }
    if r.attempts == 1 {
        let default = crate::model::RetryConfig::default();
        let unused = r.on != default.on
            || r.budget_percent != default.budget_percent
            || r.min_retry_concurrency != default.min_retry_concurrency
            || r.backoff != default.backoff;
        if unused {
            issues.push(Issue::warning(
                format!("{at}.attempts"),
                "retry settings are given but attempts = 1: nothing is retried",
            ));
        }
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

/// `[upstream.health_check]`: an interval above zero and a timeout within it, `rise` and `fall` of
/// at least one, a request path and `Host` that can be sent, a range of real statuses. Checked
/// when `enabled` is off too (a reload may turn it on); settings given while it is off are a
/// warning.
fn check_health(at: &str, u: &UpstreamConfig, issues: &mut Vec<Issue>) {
    let h = &u.health_check;
    let at = format!("{at}.health_check");
    if !h.enabled && *h != crate::model::HealthCheckConfig::default() {
        issues.push(Issue::warning(
            format!("{at}.enabled"),
            "health-check settings are given but enabled = false: no server is probed",
        ));
    }
    let (interval, timeout) = (h.interval.get(), h.timeout.get());
    if interval.is_zero() {
        issues.push(Issue::error(format!("{at}.interval"), "must be above zero"));
    }
    if timeout.is_zero() {
        issues.push(Issue::error(format!("{at}.timeout"), "must be above zero"));
    } else if timeout > interval && !interval.is_zero() {
        issues.push(Issue::error(
            format!("{at}.timeout"),
            format!(
                "{} is longer than interval ({}): a probe must end before the next one starts",
                h.timeout, h.interval
            ),
        ));
    }
    for (field, value) in [("rise", h.rise), ("fall", h.fall)] {
        if value == 0 {
            issues.push(Issue::error(format!("{at}.{field}"), "must be at least 1"));
        }
    }
    if !h.path.starts_with('/') {
        issues.push(Issue::error(
            format!("{at}.path"),
            format!("{:?} must start with '/'", h.path),
        ));
    } else if let Some(c) = h.path.chars().find(|c| !is_path_char(*c)) {
        issues.push(Issue::error(
            format!("{at}.path"),
            format!("{:?} contains {c:?}; percent-encode it (RFC 3986)", h.path),
        ));
    }
    let status = h.expect_status;
    if !(100..=599).contains(&status.low()) || !(100..=599).contains(&status.high()) {
        issues.push(Issue::error(
            format!("{at}.expect_status"),
            format!("{status}: statuses are 100-599"),
        ));
    } else if status.low() > status.high() {
        issues.push(Issue::error(
            format!("{at}.expect_status"),
            format!("{status}: the first status is above the last"),
        ));
    }
    if let Some(host) = &h.host {
        if let Err(e) = crate::address::split_authority(host) {
            issues.push(Issue::error(format!("{at}.host"), format!("{host:?}: {e}")));
        }
    }
}

/// `send_proxy_protocol`, `max_connections_per_server` and its queue: a queue timeout above zero
/// (`max_queue_per_server = 0` says "no queue"); queue settings without a limit, a queue timeout
/// the header timeout cuts short, and PROXY headers on HTTP/2 connections (never shared between
/// clients) are warnings.
fn check_limits(at: &str, u: &UpstreamConfig, issues: &mut Vec<Issue>) {
    if u.queue_timeout.get().is_zero() {
        issues.push(Issue::error(
            format!("{at}.queue_timeout"),
            "must be above zero; for no queue at all write max_queue_per_server = 0",
        ));
    }
    let queue_set = u.max_queue_per_server != 1024 || u.queue_timeout.get() != std::time::Duration::from_secs(5);
    if u.max_connections_per_server == 0 && queue_set {
        issues.push(Issue::warning(
            format!("{at}.max_connections_per_server"),
            "queue settings are given but there is no connection limit (0): no request ever waits",
        ));
    }
    if u.max_connections_per_server > 0 && u.max_queue_per_server > 0 && u.queue_timeout.get() >= u.header_timeout.get()
    {
        issues.push(Issue::warning(
            format!("{at}.queue_timeout"),
            format!(
                "{} is not below header_timeout ({}), which counts the wait in the queue too: \
                 queued requests get 504 before the queue timeout's 503",
                u.queue_timeout, u.header_timeout
            ),
        ));
    }
    if u.send_proxy_protocol != crate::model::SendProxyProtocol::Off && u.protocol != UpstreamProtocol::Http1 {
        issues.push(Issue::warning(
            format!("{at}.send_proxy_protocol"),
            "an HTTP/2 connection that names a client in its PROXY header is not shared: \
             each request gets a connection of its own (protocol = \"http1\" reuses them per client)",
        ));
    }
}

/// A character a request path and query may hold as is: RFC 3986 `pchar`, `/`, `?` and the `%`
/// of an escape.
fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/?%".contains(c)
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};
    use crate::validate::{validate, Severity};

    fn with_health(table: &str) -> crate::model::Config {
        parse(&format!(
            "{MINIMAL}\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8080\"]\n[upstream.health_check]\n{table}"
        ))
    }

    fn health_errors(table: &str) -> Vec<String> {
        errors(&with_health(table))
            .into_iter()
            .filter(|e| e.contains("health_check"))
            .collect()
    }

    fn with_retry(extra: &str) -> crate::model::Config {
        parse(&format!(
            "{MINIMAL}\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8080\"]\n{extra}"
        ))
    }

    /// The errors and warnings about `upstream[0].retry` of a group with `extra` lines.
    fn retry_issues(extra: &str) -> Vec<String> {
        validate(&with_retry(extra))
            .into_iter()
            .filter(|i| i.field.contains("retry"))
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn sound_retry_settings_pass() {
        for extra in [
            "",
            "max_fails = 0",
            "max_fails = 5\n[upstream.retry]\nattempts = 3\non = [\"connect_failure\", \"reset\", \"header_timeout\"]",
            "[upstream.retry]\nattempts = 10\nbudget_percent = 100\nmin_retry_concurrency = 0\nbackoff = \"10s\"",
            "[upstream.retry]\nbudget_percent = 0\nmin_retry_concurrency = 0",
            "[upstream.retry]\nattempts = 1",
        ] {
            assert_eq!(retry_issues(extra), Vec::<String>::new(), "{extra}");
        }
    }

    #[test]
    fn each_bad_retry_setting_is_named() {
        let cases = [
            ("attempts = 0", "error: upstream[0].retry.attempts: must be at least 1"),
            (
                "attempts = 11",
                "error: upstream[0].retry.attempts: 11 tries: at most 10",
            ),
            (
                "budget_percent = 101",
                "error: upstream[0].retry.budget_percent: 101 %: at most 100",
            ),
            (
                "backoff = \"11s\"",
                "error: upstream[0].retry.backoff: 11s: at most 10s",
            ),
            (
                "on = [\"reset\", \"reset\"]",
                "warning: upstream[0].retry.on[1]: \"reset\" is named twice",
            ),
            ("on = []", "warning: upstream[0].retry.on: no failure is named"),
            (
                "attempts = 1\nbackoff = \"25ms\"",
                "warning: upstream[0].retry.attempts: retry settings are given but attempts = 1",
            ),
        ];
        for (line, want) in cases {
            let found = retry_issues(&format!("[upstream.retry]\n{line}"));
            assert_eq!(found.len(), 1, "{line}: {found:?}");
            assert!(found[0].starts_with(want), "{line}: want {want:?} in {found:?}");
        }
    }

    #[test]
    fn sound_health_checks_pass() {
        for table in [
            "enabled = true",
            "enabled = true\ninterval = \"200ms\"\ntimeout = \"200ms\"\nrise = 1\nfall = 1",
            "enabled = true\npath = \"/status?full=1&x=%2F\"\nexpect_status = 204\nhost = \"app.internal:8443\"",
            "enabled = true\nexpect_status = \"100-599\"\nhost = \"[::1]\"",
        ] {
            assert_eq!(health_errors(table), Vec::<String>::new(), "{table}");
        }
        let warnings = |table: &str| {
            validate(&with_health(table))
                .into_iter()
                .filter(|i| i.severity == Severity::Warning && i.field.contains("health_check"))
                .count()
        };
        assert_eq!(warnings("enabled = true\nrise = 5"), 0);
        assert_eq!(warnings("enabled = false"), 0);
        assert_eq!(warnings("rise = 5"), 1, "settings without enabled = true are unused");
    }

    #[test]
    fn each_bad_health_check_setting_is_named() {
        let cases = [
            (
                "interval = \"0s\"",
                "upstream[0].health_check.interval: must be above zero",
            ),
            (
                "timeout = \"0s\"",
                "upstream[0].health_check.timeout: must be above zero",
            ),
            (
                "interval = \"1s\"\ntimeout = \"2s\"",
                "upstream[0].health_check.timeout: 2s is longer than interval (1s)",
            ),
            ("rise = 0", "upstream[0].health_check.rise: must be at least 1"),
            ("fall = 0", "upstream[0].health_check.fall: must be at least 1"),
            (
                "path = \"healthz\"",
                "upstream[0].health_check.path: \"healthz\" must start with '/'",
            ),
            ("path = \"\"", "upstream[0].health_check.path: \"\" must start with '/'"),
            (
                "path = \"/a b\"",
                "upstream[0].health_check.path: \"/a b\" contains ' '",
            ),
            (
                "path = \"/a#b\"",
                "upstream[0].health_check.path: \"/a#b\" contains '#'",
            ),
            (
                "expect_status = 99",
                "upstream[0].health_check.expect_status: 99: statuses are 100-599",
            ),
            (
                "expect_status = \"200-600\"",
                "upstream[0].health_check.expect_status: 200-600: statuses are 100-599",
            ),
            (
                "expect_status = \"399-200\"",
                "upstream[0].health_check.expect_status: 399-200: the first status is above the last",
            ),
            ("host = \"a b\"", "upstream[0].health_check.host: \"a b\""),
            ("host = \"h:99999\"", "upstream[0].health_check.host: \"h:99999\""),
            ("host = \"\"", "upstream[0].health_check.host: \"\""),
        ];
        for (line, want) in cases {
            for enabled in ["enabled = true", "enabled = false"] {
                let errs = health_errors(&format!("{enabled}\n{line}"));
                assert_eq!(errs.len(), 1, "{line}: {errs:?}");
                assert!(errs[0].contains(want), "{line}: want {want:?} in {errs:?}");
            }
        }
    }

    /// The errors and warnings about `upstream[0]`'s PROXY header and connection limits.
    fn limit_issues(extra: &str) -> Vec<String> {
        let config = parse(&format!(
            "{MINIMAL}\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:8080\"]\n{extra}"
        ));
        validate(&config)
            .into_iter()
            .filter(|i| {
                ["queue", "max_connections", "send_proxy"]
                    .iter()
                    .any(|f| i.field.contains(f))
            })
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn sound_limits_and_proxy_headers_pass() {
        for extra in [
            "",
            "max_connections_per_server = 2",
            "max_connections_per_server = 2\nmax_queue_per_server = 0",
            "max_connections_per_server = 2\nmax_queue_per_server = 10\nqueue_timeout = \"200ms\"",
            "send_proxy_protocol = \"v2\"",
            "send_proxy_protocol = \"v1\"\nprotocol = \"http1\"",
            "send_proxy_protocol = \"off\"\nprotocol = \"http2\"",
        ] {
            assert_eq!(limit_issues(extra), Vec::<String>::new(), "{extra}");
        }
    }

    #[test]
    fn each_doubtful_limit_setting_is_named() {
        let cases = [
            (
                "max_connections_per_server = 2\nqueue_timeout = \"0s\"",
                "error: upstream[0].queue_timeout: must be above zero",
            ),
            (
                "max_queue_per_server = 5",
                "warning: upstream[0].max_connections_per_server: queue settings are given but there is no",
            ),
            (
                "max_connections_per_server = 1\nqueue_timeout = \"60s\"",
                "warning: upstream[0].queue_timeout: 1m is not below header_timeout (1m)",
            ),
            (
                "send_proxy_protocol = \"v2\"\nprotocol = \"http2\"",
                "warning: upstream[0].send_proxy_protocol: an HTTP/2 connection",
            ),
        ];
        for (extra, want) in cases {
            let found = limit_issues(extra);
            assert_eq!(found.len(), 1, "{extra}: {found:?}");
            assert!(found[0].starts_with(want), "{extra}: want {want:?} in {found:?}");
        }
    }
}

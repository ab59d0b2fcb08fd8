//! `[http3]`: QUIC needs an https listener to stand beside, sane transport limits, and no PROXY
//! protocol (UDP has no such header).

use crate::issue::Issue;
use crate::model::{Config, ListenerKind, RetryMode};
use std::time::Duration;

/// Checks `[http3]` against the listeners.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let h3 = &config.http3;
    if !h3.enabled {
        if h3.alt_svc {
            issues.push(Issue::warning(
                "http3.alt_svc",
                "is set but http3.enabled = false: no Alt-Svc is advertised",
            ));
        }
        return;
    }
    let https: Vec<_> = config
        .listeners
        .iter()
        .filter(|l| l.kind == ListenerKind::Https)
        .collect();
    if https.is_empty() {
        issues.push(Issue::error("http3.enabled", "needs at least one https listener"));
    }
    for (i, addr) in h3.listeners.iter().enumerate() {
        if !https.iter().any(|l| l.listen == *addr) {
            issues.push(Issue::error(
                format!("http3.listeners[{i}]"),
                format!("{addr} is not the address of an https listener"),
            ));
        }
    }
    for l in https.iter().filter(|l| h3.serves(l.listen) && l.proxy_protocol) {
        issues.push(Issue::warning(
            "http3.listeners",
            format!(
                "{} reads PROXY protocol headers, which QUIC (UDP) does not carry: QUIC clients are seen \
                 with their packets' source address",
                l.listen
            ),
        ));
    }
    if h3.retry == RetryMode::UnderLoad && h3.retry_threshold == 0 {
        issues.push(Issue::error(
            "http3.retry_threshold",
            "must be at least 1 (retry = \"always\" asks every client)",
        ));
    }
    let idle = h3.idle_timeout.get();
    if idle < Duration::from_secs(1) || idle > Duration::from_secs(600) {
        issues.push(Issue::error("http3.idle_timeout", "must be between 1s and 10m"));
    }
    if !(1..=10_000).contains(&h3.max_concurrent_streams) {
        issues.push(Issue::error(
            "http3.max_concurrent_streams",
            "must be between 1 and 10000",
        ));
    }
    if !(16_384..=(1 << 30)).contains(&h3.initial_stream_window) {
        issues.push(Issue::error(
            "http3.initial_stream_window",
            "must be between 16384 and 2^30",
        ));
    }
    if h3.initial_connection_window < h3.initial_stream_window || h3.initial_connection_window > 1 << 30 {
        issues.push(Issue::error(
            "http3.initial_connection_window",
            "must be at least initial_stream_window and at most 2^30",
        ));
    }
    if !(1024..=(1 << 20)).contains(&h3.max_field_section_size) {
        issues.push(Issue::error(
            "http3.max_field_section_size",
            "must be between 1024 and 1048576",
        ));
    }
    if !(1200..=1452).contains(&h3.max_udp_payload) {
        issues.push(Issue::error("http3.max_udp_payload", "must be between 1200 and 1452"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(extra: &str) -> Vec<String> {
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:8443\"\n[[listener]]\nlisten = \"127.0.0.1:8080\"\nkind = \"redirect\"\n{extra}"
        );
        let config = crate::parse(&text).unwrap();
        let mut issues = Vec::new();
        check(&config, &mut issues);
        issues.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn off_by_default_and_alt_svc_alone_warns() {
        assert!(issues("").is_empty());
        let found = issues("[http3]\nalt_svc = true");
        assert!(
            found[0].starts_with("warning") && found[0].contains("http3.alt_svc"),
            "{found:?}"
        );
        assert!(issues("[http3]\nenabled = true\nalt_svc = true").is_empty());
    }

    #[test]
    fn listeners_must_be_https_listeners() {
        let found = issues("[http3]\nenabled = true\nlisteners = [\"127.0.0.1:8080\"]");
        assert!(found[0].contains("http3.listeners[0]"), "{found:?}");
        assert!(issues("[http3]\nenabled = true\nlisteners = [\"127.0.0.1:8443\"]").is_empty());
    }

    #[test]
    fn limits_are_checked() {
        for (field, bad) in [
            ("http3.idle_timeout", "idle_timeout = \"0s\""),
            ("http3.max_concurrent_streams", "max_concurrent_streams = 0"),
            ("http3.initial_stream_window", "initial_stream_window = 10"),
            ("http3.initial_connection_window", "initial_connection_window = 20000"),
            ("http3.max_field_section_size", "max_field_section_size = 10"),
            ("http3.max_udp_payload", "max_udp_payload = 9000"),
            ("http3.retry_threshold", "retry_threshold = 0"),
        ] {
            let found = issues(&format!("[http3]\nenabled = true\n{bad}"));
            assert!(found.iter().any(|i| i.contains(field)), "{bad}: {found:?}");
        }
        assert!(issues("[http3]\nenabled = true\nretry = \"always\"\nretry_threshold = 0").is_empty());
    }

    #[test]
    fn congestion_control_names_quiche_s_controllers() {
        let parse = |line: &str| {
            crate::parse(&format!(
                "[[listener]]\nlisten = \"127.0.0.1:8443\"\n[http3]\nenabled = true\n{line}"
            ))
        };
        let default = parse("").unwrap();
        assert_eq!(default.http3.congestion_control, crate::CongestionControl::Bbr2);
        assert!(!default.http3.pacing);
        for (name, cc) in [
            ("bbr2", crate::CongestionControl::Bbr2),
            ("cubic", crate::CongestionControl::Cubic),
            ("reno", crate::CongestionControl::Reno),
        ] {
            let c = parse(&format!("congestion_control = \"{name}\"\npacing = true")).unwrap();
            assert_eq!((c.http3.congestion_control, c.http3.pacing), (cc, true));
        }
        let err = parse("congestion_control = \"bbr3\"").unwrap_err().to_string();
        assert!(err.contains("congestion_control") || err.contains("bbr3"), "{err}");
    }
}

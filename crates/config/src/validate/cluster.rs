//! `[cluster]`: the shared secret files exist, and the session store (local, Redis or
//! Memcached) is fully described, with usable timeouts, breaker and key prefix.

use super::servers;
use crate::issue::Issue;
use crate::model::{Config, RedisMode, StoreKind};

/// The `[cluster]` section, when there is one.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
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

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};

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
    }
}

//! `[control]`: a Redis URL for the control documents, a cluster name and node id that fit in
//! Redis keys, and polling and heartbeat intervals that do not hammer Redis.

use crate::issue::Issue;
use crate::model::Config;

/// The `[control]` section, when there is one.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
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

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};

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
}

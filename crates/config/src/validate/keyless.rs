//! `[keyless]`: the mutual-TLS files exist, connection settings are usable, and every
//! `[[keyless.pool]]` has a unique, well-formed name and `host:port` key servers.

use super::servers;
use crate::issue::Issue;
use crate::model::Config;

/// The `[keyless]` section, when there is one.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
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
        servers::check_host_ports(&format!("{at}.servers"), &pool.servers, issues);
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
    let dc = &k.delegated_credentials;
    let week = std::time::Duration::from_secs(7 * 24 * 3600);
    if dc.validity.get() < std::time::Duration::from_secs(60) || dc.validity.get() > week {
        issues.push(Issue::error(
            "keyless.delegated_credentials.validity",
            "must be between 1m and 7d (RFC 9345 §4.1.3)",
        ));
    }
    if dc.renew_before.get().is_zero() || dc.renew_before.get() >= dc.validity.get() {
        issues.push(Issue::error(
            "keyless.delegated_credentials.renew_before",
            "must be greater than zero and shorter than validity",
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};

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
}

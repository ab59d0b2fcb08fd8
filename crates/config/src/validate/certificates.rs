//! `[[site.certificate]]`: the chain and key files exist, exactly one key source (a key file, key
//! servers or a key-server pool), and OCSP stapling settings that fit together.

use super::servers;
use crate::address::{AddressError, OriginAddr};
use crate::issue::Issue;
use crate::model::{CertificateConfig, Config, OcspMode};

/// One certificate; `at` is its field path (`site[0].certificate[1]`).
pub(super) fn check(config: &Config, at: &str, c: &CertificateConfig, issues: &mut Vec<Issue>) {
    check_key_source(config, at, c, issues);
    check_ocsp(at, c, issues);
    for (field, path) in [("chain", Some(&c.chain)), ("key", c.key.as_ref())] {
        let Some(path) = path else { continue };
        if !path.is_file() {
            issues.push(Issue::error(
                format!("{at}.{field}"),
                format!("{}: no such file", path.display()),
            ));
        }
    }
}

/// Exactly one of `key`, `key_servers` and `key_server_pool`; key servers need `[keyless]`,
/// `host:port` entries and a pool that exists.
fn check_key_source(config: &Config, at: &str, c: &CertificateConfig, issues: &mut Vec<Issue>) {
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
    servers::check_host_ports(&format!("{at}.key_servers"), &c.key_servers, issues);
}

/// OCSP stapling: one source at a time, an `http://` responder, an existing file, a sane interval.
fn check_ocsp(at: &str, c: &CertificateConfig, issues: &mut Vec<Issue>) {
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
        match OriginAddr::parse_url(url) {
            Ok((server, _)) if !server.tls => {}
            Ok(_)
            | Err(
                AddressError::NotAUrl
                | AddressError::UnsupportedScheme { .. }
                | AddressError::MissingHost
                | AddressError::Empty,
            ) => issues.push(Issue::error(
                format!("{at}.ocsp_url"),
                format!("{url:?} is not an http:// URL (OCSP responders are reached over plain HTTP)"),
            )),
            Err(e) => issues.push(Issue::error(format!("{at}.ocsp_url"), format!("{url:?}: {e}"))),
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

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};

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
        let errs = with("ocsp_url = \"ocsp.example:80\"");
        named(&errs, "site[0].certificate[0].ocsp_url", "not an http:// URL");
        let errs = with("ocsp_url = \"http://my ocsp/ca\"");
        named(
            &errs,
            "site[0].certificate[0].ocsp_url",
            "host \"my ocsp\" contains ' '",
        );
        let errs = with("ocsp_refresh = \"100ms\"");
        named(&errs, "site[0].certificate[0].ocsp_refresh", "at least 1s");
        let fine = with("ocsp_url = \"http://127.0.0.1:8888\"\nocsp_refresh = \"1h\"");
        assert!(!fine.iter().any(|e| e.contains("ocsp")), "{fine:?}");
        assert!(
            crate::parse(&MINIMAL.replace("key = \"/dev/null\"\n", "key = \"/dev/null\"\nocsp = \"sometimes\"\n"))
                .unwrap_err()
                .to_string()
                .contains("sometimes")
        );
    }
}

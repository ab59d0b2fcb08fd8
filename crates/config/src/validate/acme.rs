//! `[acme]` and `[site.acme]`: an https directory, known challenge and key types, a DNS hook
//! for DNS-01, a usable EAB pair and renewal settings; sites opting in have `[acme]` to use, no
//! `[[site.certificate]]` of their own, and names their certificates can cover.

use crate::issue::Issue;
use crate::model::{Config, ACME_CHALLENGES, ACME_KEY_TYPES};

/// The `[acme]` section and every site's `[site.acme]`.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let uses_dns = check_sites(config, issues);
    let Some(a) = &config.acme else { return };
    if !a.directory.starts_with("https://") || a.directory.len() <= "https://".len() {
        issues.push(Issue::error(
            "acme.directory",
            format!("{:?}: must be an https:// URL", a.directory),
        ));
    }
    if let Some(ca) = &a.directory_ca {
        if !ca.is_file() {
            issues.push(Issue::error(
                "acme.directory_ca",
                format!("{}: no such file", ca.display()),
            ));
        }
    }
    if a.state_dir.as_os_str().is_empty() {
        issues.push(Issue::error("acme.state_dir", "must name a directory"));
    } else if a.state_dir.exists() && !a.state_dir.is_dir() {
        issues.push(Issue::error(
            "acme.state_dir",
            format!("{}: not a directory", a.state_dir.display()),
        ));
    }
    for (i, c) in a.contact.iter().enumerate() {
        if !c.starts_with("mailto:") {
            issues.push(Issue::error(
                format!("acme.contact[{i}]"),
                format!("{c:?}: use mailto:address"),
            ));
        }
    }
    match (&a.eab_key_id, &a.eab_hmac_key) {
        (Some(_), None) => issues.push(Issue::error("acme.eab_hmac_key", "required with eab_key_id")),
        (None, Some(_)) => issues.push(Issue::error("acme.eab_key_id", "required with eab_hmac_key")),
        (Some(_), Some(k)) if !is_base64url(k) => issues.push(Issue::error(
            "acme.eab_hmac_key",
            "must be base64url (as the CA shows it)",
        )),
        _ => {}
    }
    let dns = check_challenges("acme.challenges", &a.challenges, issues) || uses_dns;
    if a.challenges.is_empty() {
        issues.push(Issue::error("acme.challenges", "name at least one challenge type"));
    }
    if dns && a.dns_hook.is_none() {
        issues.push(Issue::error(
            "acme.dns_hook",
            "dns-01 needs a hook command that publishes the TXT record",
        ));
    }
    if !(a.renew_at > 0.0 && a.renew_at < 1.0) {
        issues.push(Issue::error(
            "acme.renew_at",
            "must be a fraction of the lifetime between 0 and 1",
        ));
    }
    if a.check_interval.get().is_zero() {
        issues.push(Issue::error("acme.check_interval", "must be positive"));
    }
    if a.retry_min.get().is_zero() || a.retry_min.get() > a.retry_max.get() {
        issues.push(Issue::error("acme.retry_min", "must be positive and at most retry_max"));
    }
    if a.order_timeout.get().as_secs() < 5 {
        issues.push(Issue::error("acme.order_timeout", "must be at least 5s"));
    }
    if a.lease.get().as_secs() < 3 {
        issues.push(Issue::error("acme.lease", "must be at least 3s"));
    }
}

/// Every `[site.acme]`; whether any names dns-01.
fn check_sites(config: &Config, issues: &mut Vec<Issue>) -> bool {
    let mut dns = false;
    for (i, site) in config.sites.iter().enumerate() {
        let Some(s) = &site.acme else { continue };
        let at = format!("site[{i}].acme");
        if config.acme.is_none() {
            issues.push(Issue::error(at.clone(), "needs an [acme] section"));
        }
        if !site.certificates.is_empty() {
            issues.push(Issue::error(
                format!("site[{i}].certificate"),
                "a site with [site.acme] gets its certificates from the CA; remove [[site.certificate]]",
            ));
        }
        if s.key_types.is_empty() {
            issues.push(Issue::error(format!("{at}.key_types"), "name at least one key type"));
        }
        if s.key_server_pool.is_some() || !s.key_servers.is_empty() {
            if s.key_server_pool.is_some() && !s.key_servers.is_empty() {
                issues.push(Issue::error(at.clone(), "set key_server_pool or key_servers, not both"));
            }
            match (&config.keyless, &s.key_server_pool) {
                (None, _) => issues.push(Issue::error(
                    at.clone(),
                    "keyless ACME needs a [keyless] section (client certificate and key-server CA)",
                )),
                (Some(k), Some(pool)) if !k.pools.iter().any(|p| &p.name == pool) => issues.push(Issue::error(
                    format!("{at}.key_server_pool"),
                    format!("no [[keyless.pool]] named {pool:?}"),
                )),
                _ => {}
            }
        }
        for (j, k) in s.key_types.iter().enumerate() {
            if !ACME_KEY_TYPES.contains(&k.as_str()) {
                issues.push(Issue::error(
                    format!("{at}.key_types[{j}]"),
                    format!("{k:?}: use ecdsa or rsa"),
                ));
            } else if s.key_types[..j].contains(k) {
                issues.push(Issue::error(
                    format!("{at}.key_types[{j}]"),
                    format!("{k:?} is listed twice"),
                ));
            }
        }
        dns |= check_challenges(&format!("{at}.challenges"), &s.challenges, issues);
        let names = if s.names.is_empty() {
            &site.server_names
        } else {
            &s.names
        };
        let challenges = if s.challenges.is_empty() {
            config.acme.as_ref().map_or(&s.challenges, |a| &a.challenges)
        } else {
            &s.challenges
        };
        for (j, n) in names.iter().enumerate() {
            let field = if s.names.is_empty() {
                format!("site[{i}].server_names[{j}]")
            } else {
                format!("{at}.names[{j}]")
            };
            if n.starts_with("*.") && !challenges.iter().any(|c| c == "dns-01") {
                issues.push(Issue::error(
                    field,
                    format!("{n:?}: a wildcard can only be validated with dns-01"),
                ));
            } else if !s.names.is_empty() && !covered(n, &site.server_names) {
                issues.push(Issue::warning(
                    field,
                    format!("{n:?} is not among the site's server_names"),
                ));
            }
        }
    }
    dns
}

/// Checks a challenge list; whether it names dns-01.
fn check_challenges(field: &str, list: &[String], issues: &mut Vec<Issue>) -> bool {
    for (j, c) in list.iter().enumerate() {
        if !ACME_CHALLENGES.contains(&c.as_str()) {
            issues.push(Issue::error(
                format!("{field}[{j}]"),
                format!("{c:?}: use tls-alpn-01, http-01 or dns-01"),
            ));
        }
    }
    list.iter().any(|c| c == "dns-01")
}

fn covered(name: &str, server_names: &[String]) -> bool {
    server_names.iter().any(|s| {
        s.eq_ignore_ascii_case(name)
            || s.strip_prefix("*.").is_some_and(|p| {
                name.split_once('.')
                    .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(p))
            })
    })
}

fn is_base64url(s: &str) -> bool {
    !s.is_empty()
        && s.trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::super::test_config::{errors, parse};

    const SITE: &str = r#"
[[listener]]
listen = "127.0.0.1:8443"
[[site]]
name = "a"
server_names = ["a.test"]
[site.acme]
[[site.route]]
fixed_response = { body = "hi" }
"#;

    fn acme_errors(extra: &str) -> Vec<String> {
        let errs = errors(&parse(&format!("{SITE}{extra}")));
        errs.into_iter().filter(|e| e.contains("acme")).collect()
    }

    #[test]
    fn a_good_section_has_no_errors() {
        let errs = acme_errors(
            "[acme]\ndirectory = \"https://ca.test/dir\"\nstate_dir = \"/tmp/x\"\ncontact = [\"mailto:a@b\"]\n",
        );
        assert!(errs.is_empty(), "{errs:?}");
        let all = errors(&parse(&format!(
            "{SITE}[acme]\ndirectory = \"https://ca.test/dir\"\nstate_dir = \"/tmp/x\"\n"
        )));
        assert!(
            !all.iter().any(|e| e.contains("certificate")),
            "acme sites need no certificate: {all:?}"
        );
    }

    #[test]
    fn site_without_section_and_bad_values() {
        assert!(acme_errors("")
            .iter()
            .any(|e| e.contains("site[0].acme: needs an [acme] section")));
        let errs = acme_errors(
            "[acme]\ndirectory = \"http://ca.test/dir\"\nstate_dir = \"/tmp/x\"\ncontact = [\"a@b\"]\n\
             challenges = [\"dns-01\", \"smoke-01\"]\nrenew_at = 1.5\neab_key_id = \"k\"\n",
        );
        for field in [
            "acme.directory",
            "acme.contact[0]",
            "acme.challenges[1]",
            "acme.dns_hook",
            "acme.renew_at",
            "acme.eab_hmac_key",
        ] {
            assert!(
                errs.iter().any(|e| e.contains(&format!("{field}:"))),
                "{field}: {errs:?}"
            );
        }
    }

    #[test]
    fn wildcards_need_dns_and_key_types_are_known() {
        let text = SITE.replace(
            "[site.acme]",
            "[site.acme]\nnames = [\"*.a.test\"]\nkey_types = [\"ecdsa\", \"dsa\", \"ecdsa\"]",
        );
        let errs = errors(&parse(&format!(
            "{text}[acme]\ndirectory = \"https://ca.test/d\"\nstate_dir = \"/tmp/x\"\n"
        )));
        assert!(
            errs.iter()
                .any(|e| e.contains("site[0].acme.names[0]") && e.contains("dns-01")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("key_types[1]")), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.contains("key_types[2]") && e.contains("twice")),
            "{errs:?}"
        );
    }

    #[test]
    fn certificate_files_and_acme_exclude_each_other() {
        let text = SITE.replace(
            "[site.acme]",
            "[site.acme]\n[[site.certificate]]\nchain = \"/dev/null\"\nkey = \"/dev/null\"",
        );
        let errs = errors(&parse(&format!(
            "{text}[acme]\ndirectory = \"https://ca.test/d\"\nstate_dir = \"/tmp/x\"\n"
        )));
        assert!(
            errs.iter()
                .any(|e| e.contains("site[0].certificate:") && e.contains("[site.acme]")),
            "{errs:?}"
        );
    }

    #[test]
    fn keyless_acme_needs_keyless_and_a_known_pool() {
        let acme = "[acme]\ndirectory = \"https://ca.test/d\"\nstate_dir = \"/tmp/x\"\n";
        let text = SITE.replace("[site.acme]", "[site.acme]\nkey_server_pool = \"main\"");
        let errs = errors(&parse(&format!("{text}{acme}")));
        assert!(
            errs.iter()
                .any(|e| e.contains("site[0].acme") && e.contains("[keyless]")),
            "{errs:?}"
        );
        let keyless = "[keyless]\nclient_certificate = \"/x\"\nclient_key = \"/x\"\nserver_ca = \"/x\"\n";
        let errs = errors(&parse(&format!("{text}{acme}{keyless}")));
        assert!(
            errs.iter()
                .any(|e| e.contains("site[0].acme.key_server_pool") && e.contains("no [[keyless.pool]]")),
            "{errs:?}"
        );
        let both = SITE.replace(
            "[site.acme]",
            "[site.acme]\nkey_server_pool = \"main\"\nkey_servers = [\"k:1\"]",
        );
        let errs = errors(&parse(&format!(
            "{both}{acme}{keyless}[[keyless.pool]]\nname = \"main\"\nservers = [\"k:1\"]\n"
        )));
        assert!(errs.iter().any(|e| e.contains("not both")), "{errs:?}");
    }
}

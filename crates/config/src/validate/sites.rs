//! `[[site]]`: unique names and host names, at most one default, at least one certificate and
//! one route (each checked by its own file), an HSTS preload that browsers would accept, and
//! client certificates (`[site.client_auth]`) with a CA file and usable identity headers.

use super::{certificates, edits, routes};
use crate::issue::Issue;
use crate::model::{ClientAuthConfig, ClientAuthMode, Config};
use std::collections::HashSet;

/// Every `[[site]]`, its certificates and its routes.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
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
        if site.certificates.is_empty() && site.acme.is_none() {
            issues.push(Issue::error(
                format!("{at}.certificate"),
                "at least one [[site.certificate]] is required",
            ));
        }
        for (j, c) in site.certificates.iter().enumerate() {
            certificates::check(config, &format!("{at}.certificate[{j}]"), c, issues);
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
        if let Some(c) = &site.client_auth {
            check_client_auth(&format!("{at}.client_auth"), c, issues);
        }
        if site.routes.is_empty() {
            issues.push(Issue::error(
                format!("{at}.route"),
                "at least one [[site.route]] is required",
            ));
        }
        for (j, r) in site.routes.iter().enumerate() {
            routes::check(&format!("{at}.route[{j}]"), r, &upstreams, issues);
        }
    }
}

/// Headers the gateway writes itself toward the origin besides [`crate::request_edit::GATEWAY_MANAGED`]:
/// an identity header of one of these names would be overwritten or break the request.
const ALSO_WRITTEN: [&str; 5] = [
    "x-forwarded-proto",
    "x-forwarded-host",
    "forwarded",
    "x-real-ip",
    "early-data",
];

/// `[site.client_auth]`: a CA file unless off, a sane depth, two distinct header names the
/// gateway does not manage otherwise. Whether the CA file parses is `tlsgate check`'s lint
/// (tlsgate-tls), which reads it with BoringSSL.
fn check_client_auth(at: &str, c: &ClientAuthConfig, issues: &mut Vec<Issue>) {
    match (&c.ca, c.mode) {
        (None, ClientAuthMode::Optional | ClientAuthMode::Required) => issues.push(Issue::error(
            format!("{at}.ca"),
            "a PEM file of the CAs that issue client certificates is required unless mode = \"off\"",
        )),
        (Some(_), ClientAuthMode::Off) => issues.push(Issue::warning(
            format!("{at}.ca"),
            "is set but mode = \"off\": no client certificate is asked for",
        )),
        _ => {}
    }
    if let Some(ca) = &c.ca {
        if !ca.is_file() {
            issues.push(Issue::error(
                format!("{at}.ca"),
                format!("{}: no such file", ca.display()),
            ));
        }
    }
    if !(1..=16).contains(&c.verify_depth) {
        issues.push(Issue::error(
            format!("{at}.verify_depth"),
            format!(
                "{} is out of range: 1 (issued by a CA of ca directly) to 16",
                c.verify_depth
            ),
        ));
    }
    for (field, name) in [
        ("identity_header", &c.identity_header),
        ("fingerprint_header", &c.fingerprint_header),
    ] {
        if !edits::is_token(name) {
            issues.push(Issue::error(
                format!("{at}.{field}"),
                format!("{name:?} is not a valid header name"),
            ));
        } else if crate::request_edit::is_gateway_managed(name)
            || ALSO_WRITTEN.contains(&name.to_ascii_lowercase().as_str())
        {
            issues.push(Issue::error(
                format!("{at}.{field}"),
                format!("{name:?} is managed by the gateway (framing, hop-by-hop or forwarding)"),
            ));
        }
    }
    if c.identity_header.eq_ignore_ascii_case(&c.fingerprint_header) {
        issues.push(Issue::error(
            format!("{at}.fingerprint_header"),
            "must differ from identity_header",
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{parse, MINIMAL};
    use crate::validate::{validate, Severity};
    use crate::Config;

    fn client_auth(table: &str) -> Vec<String> {
        let c = parse(&format!("{MINIMAL}[site.client_auth]\n{table}"));
        crate::validate::test_config::errors(&c)
            .into_iter()
            .filter(|e| e.contains("client_auth"))
            .collect()
    }

    #[test]
    fn client_auth_needs_a_ca_unless_off() {
        for mode in ["optional", "required"] {
            let errors = client_auth(&format!("mode = \"{mode}\"\n"));
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(
                errors[0].starts_with("error: site[0].client_auth.ca: a PEM file"),
                "{errors:?}"
            );
        }
        assert_eq!(client_auth(""), Vec::<String>::new(), "off (the default) needs no CA");
        let c = parse(&format!("{MINIMAL}[site.client_auth]\nca = \"/nonexistent/ca.pem\"\n"));
        let all = validate(&c);
        assert!(all.iter().any(|i| i.severity == Severity::Warning
            && i.field == "site[0].client_auth.ca"
            && i.message.contains("mode = \"off\"")));
    }

    #[test]
    fn client_auth_ca_file_must_exist() {
        let errors = client_auth("mode = \"required\"\nca = \"/nonexistent/ca.pem\"\n");
        assert_eq!(
            errors,
            ["error: site[0].client_auth.ca: /nonexistent/ca.pem: no such file"]
        );
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "PEM").unwrap();
        let errors = client_auth(&format!("mode = \"optional\"\nca = {:?}\n", ca.display().to_string()));
        assert_eq!(errors, Vec::<String>::new());
    }

    #[test]
    fn client_auth_depth_and_headers() {
        let errors =
            client_auth("verify_depth = 0\nidentity_header = \"X Bad\"\nfingerprint_header = \"X-Forwarded-For\"\n");
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("error: site[0].client_auth.verify_depth: 0 is out of range"));
        assert!(errors[1].starts_with("error: site[0].client_auth.identity_header: \"X Bad\" is not"));
        assert!(errors[2].starts_with("error: site[0].client_auth.fingerprint_header: \"X-Forwarded-For\" is managed"));
        let errors = client_auth("identity_header = \"x-id\"\nfingerprint_header = \"X-ID\"\n");
        assert_eq!(
            errors,
            ["error: site[0].client_auth.fingerprint_header: must differ from identity_header"]
        );
        let c = parse(&format!("{MINIMAL}[site.client_auth]\n"));
        let auth = c.sites[0].client_auth.as_ref().unwrap();
        assert_eq!(auth.mode, crate::ClientAuthMode::Off);
        assert_eq!(
            (
                auth.verify_depth,
                auth.identity_header.as_str(),
                auth.fingerprint_header.as_str()
            ),
            (4, "X-Client-Cert-Subject", "X-Client-Cert-Sha256")
        );
        assert!(crate::parse(&format!("{MINIMAL}[site.client_auth]\nmode = \"on\"\n")).is_err());
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
}

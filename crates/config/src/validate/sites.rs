//! `[[site]]`: unique names and host names, at most one default, at least one certificate and
//! one route (each checked by its own file), and an HSTS preload that browsers would accept.

use super::{certificates, routes};
use crate::issue::Issue;
use crate::model::Config;
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
        if site.certificates.is_empty() {
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

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{parse, MINIMAL};
    use crate::validate::{validate, Severity};
    use crate::Config;

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

//! JA4 fingerprints and access rules: `[[access_rule]]` (valid fingerprints, usable labels, no
//! rule hidden behind a match-all one), `[server] ja4_header` (a header name the gateway may own,
//! which no route edits) and `[[site.route]] match_ja4`.

use super::edits;
use crate::issue::Issue;
use crate::model::{AccessRuleConfig, Config};
use tlsgate_wire::ja4::Ja4;

const JA4_EXAMPLE: &str = "t13d1516h2_8daaf6152771_02713d6af862";

/// Every fingerprint of `list` (field `at`) must be a JA4 as the gateway writes it.
fn check_ja4_list(at: &str, list: &[String], issues: &mut Vec<Issue>) {
    for (i, text) in list.iter().enumerate() {
        if Ja4::parse(text).is_none() {
            issues.push(Issue::error(
                format!("{at}[{i}]"),
                format!("{text:?} is not a JA4 fingerprint (36 characters in lower case, like {JA4_EXAMPLE})"),
            ));
        }
    }
}

/// Checks an `[[access_rule]]` list (the TOML's, or the one the control plane's document puts in
/// its place): valid fingerprints, usable and distinct labels, no rule after a match-all one.
pub fn check_access_rules(rules: &[AccessRuleConfig], issues: &mut Vec<Issue>) {
    let mut labels = std::collections::HashSet::new();
    let mut match_all: Option<usize> = None;
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("access_rule[{i}]");
        check_ja4_list(&format!("{at}.ja4"), &rule.ja4, issues);
        if let Some(name) = &rule.name {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
                issues.push(Issue::error(
                    format!("{at}.name"),
                    "must be printable ASCII without spaces, quotes or backslashes (it is a metric label)",
                ));
            }
        }
        if !labels.insert(rule.label(i)) {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("{:?} names another rule too; each rule needs its own", rule.label(i)),
            ));
        }
        if let Some(all) = match_all {
            issues.push(Issue::warning(
                at.clone(),
                format!("never tried: access_rule[{all}] has neither cidrs nor ja4 and matches every connection first"),
            ));
        } else if rule.cidrs.is_empty() && rule.ja4.is_empty() {
            match_all = Some(i);
        }
    }
}

/// Checks the access rules, the JA4 header and the routes' `match_ja4`.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    check_access_rules(&config.access_rules, issues);
    if let Some(name) = &config.server.ja4_header {
        check_header_name(config, name, issues);
    }
    for (s, site) in config.sites.iter().enumerate() {
        for (r, route) in site.routes.iter().enumerate() {
            check_ja4_list(&format!("site[{s}].route[{r}].match_ja4"), &route.match_ja4, issues);
        }
    }
}

/// `[server] ja4_header`: a token, not a name the gateway already owns, and edited by no route
/// (a route that set it would forge the fingerprint the origin trusts).
fn check_header_name(config: &Config, name: &str, issues: &mut Vec<Issue>) {
    const FIELD: &str = "server.ja4_header";
    if !edits::is_token(name) {
        issues.push(Issue::error(FIELD, format!("{name:?} is not a valid header name")));
        return;
    }
    if crate::request_edit::is_gateway_managed(name) {
        issues.push(Issue::error(
            FIELD,
            format!("{name:?} is managed by the gateway (framing, hop-by-hop or forwarding)"),
        ));
    }
    for (s, site) in config.sites.iter().enumerate() {
        if let Some(auth) = &site.client_auth {
            for (which, other) in [
                ("identity_header", &auth.identity_header),
                ("fingerprint_header", &auth.fingerprint_header),
            ] {
                if other.eq_ignore_ascii_case(name) {
                    issues.push(Issue::error(
                        FIELD,
                        format!("{name:?} is site[{s}].client_auth.{which} too; use another name"),
                    ));
                }
            }
        }
        for (r, route) in site.routes.iter().enumerate() {
            let edits = [
                ("request_headers", &route.request_headers),
                ("response_headers", &route.response_headers),
            ];
            for (which, e) in edits {
                let set = e.set.keys().map(|n| ("set", n));
                for (op, edited) in set.chain(e.remove.iter().map(|n| ("remove", n))) {
                    if edited.eq_ignore_ascii_case(name) {
                        issues.push(Issue::error(
                            format!("site[{s}].route[{r}].{which}.{op}"),
                            format!("{edited:?} is server.ja4_header, which the gateway sets and clients cannot forge; routes may not edit it"),
                        ));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};
    use crate::validate::{validate, Severity};

    const FP: &str = "t13d1516h2_8daaf6152771_02713d6af862";

    #[test]
    fn valid_rules_header_and_routes_pass() {
        let text = format!(
            "[server]\nja4_header = \"X-JA4\"\n{MINIMAL}match_ja4 = [\"{FP}\"]\n\
             [[access_rule]]\naction = \"deny\"\ncidrs = [\"10.0.0.0/8\"]\nja4 = [\"{FP}\"]\n\
             [[access_rule]]\naction = \"allow\"\nname = \"rest\"\n"
        );
        let c = parse(&text);
        assert_eq!(c.access_rules.len(), 2);
        assert_eq!(c.access_rules[0].label(0), "access_rule[0]");
        assert_eq!(c.access_rules[1].label(1), "rest");
        assert_eq!(errors(&c).len(), 2, "only the /dev/null file errors: {:?}", errors(&c));
    }

    #[test]
    fn bad_fingerprints_are_named() {
        let text = format!(
            "{MINIMAL}match_ja4 = [\"T13D\"]\n[[access_rule]]\naction = \"deny\"\nja4 = [\"{FP}\", \"nope\"]\n"
        );
        let errs = errors(&parse(&text));
        assert!(
            errs.iter()
                .any(|e| e.contains("access_rule[0].ja4[1]") && e.contains("\"nope\" is not a JA4 fingerprint")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.contains("site[0].route[0].match_ja4[0]")),
            "{errs:?}"
        );
    }

    #[test]
    fn bad_cidrs_are_refused_by_the_one_parser() {
        let text = format!("{MINIMAL}[[access_rule]]\naction = \"deny\"\ncidrs = [\"10.1.0.0/8\"]\n");
        let e = crate::parse(&text).unwrap_err().to_string();
        assert!(e.contains("bits set after the prefix"), "{e}");
    }

    #[test]
    fn labels_unique_and_unreachable_rules_warned() {
        let text = format!(
            "{MINIMAL}[[access_rule]]\naction = \"deny\"\nname = \"x y\"\n\
             [[access_rule]]\naction = \"allow\"\ncidrs = [\"::1\"]\nname = \"dup\"\n\
             [[access_rule]]\naction = \"allow\"\ncidrs = [\"::2\"]\nname = \"dup\"\n"
        );
        let issues = validate(&parse(&text));
        let has = |sev: Severity, field: &str, words: &str| {
            issues
                .iter()
                .any(|i| i.severity == sev && i.field == field && i.to_string().contains(words))
        };
        assert!(
            has(Severity::Error, "access_rule[0].name", "printable ASCII"),
            "{issues:?}"
        );
        assert!(
            has(Severity::Error, "access_rule[2].name", "names another rule"),
            "{issues:?}"
        );
        assert!(
            has(Severity::Warning, "access_rule[1]", "never tried: access_rule[0]"),
            "{issues:?}"
        );
    }

    #[test]
    fn ja4_header_must_be_owned_by_the_gateway() {
        let bad =
            |server: &str, route_extra: &str| errors(&parse(&format!("[server]\n{server}\n{MINIMAL}{route_extra}")));
        let errs = bad("ja4_header = \"bad name\"", "");
        assert!(errs
            .iter()
            .any(|e| e.contains("server.ja4_header") && e.contains("not a valid header name")));
        let errs = bad("ja4_header = \"X-Forwarded-For\"", "");
        assert!(errs
            .iter()
            .any(|e| e.contains("server.ja4_header") && e.contains("managed by the gateway")));
        let errs = bad(
            "ja4_header = \"X-JA4\"",
            "request_headers = { set = { \"x-ja4\" = \"forged\" } }\n",
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("site[0].route[0].request_headers.set") && e.contains("routes may not edit it")),
            "{errs:?}"
        );
        let text = format!(
            "[server]\nja4_header = \"X-Client-Cert-Subject\"\n{MINIMAL}[site.client_auth]\nca = \"/dev/null\"\n"
        );
        let errs = errors(&parse(&text));
        assert!(
            errs.iter()
                .any(|e| e.contains("server.ja4_header") && e.contains("client_auth.identity_header")),
            "{errs:?}"
        );
    }
}

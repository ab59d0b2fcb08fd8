//! `[[rate_limit]]` and the routes' `rate_limit`: usable names, a key that can be read, a quota
//! and window that limit something, a bounded table, a store for cluster-wide limits, and routes
//! that name limits that exist.

use super::edits;
use crate::issue::Issue;
use crate::model::{Config, RateLimitConfig, RateLimitKey, RateLimitScope, StoreKind};
use std::collections::HashSet;
use std::time::Duration;

/// Largest quota accepted per window.
const MAX_REQUESTS: u32 = 100_000_000;
/// Shortest window: below it the clock's granularity and the work per window dominate.
const MIN_WINDOW: Duration = Duration::from_millis(100);
/// Shortest cluster-wide window: several reconciliations (every 100 ms) must fit in one.
const MIN_CLUSTER_WINDOW: Duration = Duration::from_secs(1);
/// Longest window (the store keeps each window's counter twice as long).
const MAX_WINDOW: Duration = Duration::from_secs(86_400);
/// Table bounds.
const MIN_TRACKED: usize = 512;
const MAX_TRACKED: usize = 16 * 1024 * 1024;

/// Checks every `[[rate_limit]]` and every route's references to them.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let mut names = HashSet::new();
    for (i, limit) in config.rate_limits.iter().enumerate() {
        let at = format!("rate_limit[{i}]");
        check_limit(&at, limit, config, issues);
        if !names.insert(limit.name.as_str()) {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("{:?} names another [[rate_limit]] too; each needs its own", limit.name),
            ));
        }
    }
    let mut used = HashSet::new();
    for (s, site) in config.sites.iter().enumerate() {
        for (r, route) in site.routes.iter().enumerate() {
            let mut seen = HashSet::new();
            for (k, name) in route.rate_limit.iter().enumerate() {
                let at = format!("site[{s}].route[{r}].rate_limit[{k}]");
                if !names.contains(name.as_str()) {
                    issues.push(Issue::error(at, format!("no [[rate_limit]] is named {name:?}")));
                } else if !seen.insert(name.as_str()) {
                    issues.push(Issue::warning(at, format!("{name:?} is named twice; it counts once")));
                }
                used.insert(name.as_str());
            }
        }
    }
    for (i, limit) in config.rate_limits.iter().enumerate() {
        if !used.contains(limit.name.as_str()) {
            issues.push(Issue::warning(
                format!("rate_limit[{i}]"),
                format!(
                    "no route names {:?} (`rate_limit = {:?}` on a [[site.route]])",
                    limit.name, limit.name
                ),
            ));
        }
    }
}

fn check_limit(at: &str, l: &RateLimitConfig, config: &Config, issues: &mut Vec<Issue>) {
    let field = |name: &str| format!("{at}.{name}");
    if l.name.is_empty()
        || l.name.len() > 64
        || !l.name.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
    {
        issues.push(Issue::error(
            field("name"),
            "must be 1 to 64 printable ASCII characters without spaces, quotes or backslashes \
             (it is a metric label and a RateLimit header's policy name)",
        ));
    }
    match (l.key, &l.header) {
        (RateLimitKey::Header, None) => issues.push(Issue::error(
            field("header"),
            "key = \"header\" needs the header's name",
        )),
        (RateLimitKey::Header, Some(h)) if !edits::is_token(h) => issues.push(Issue::error(
            field("header"),
            format!("{h:?} is not a valid header name"),
        )),
        (RateLimitKey::Header, Some(_)) => {}
        (_, Some(_)) => issues.push(Issue::error(field("header"), "only with key = \"header\"")),
        (_, None) => {}
    }
    match (l.key, &l.cookie) {
        (RateLimitKey::Cookie, None) => issues.push(Issue::error(
            field("cookie"),
            "key = \"cookie\" needs the cookie's name",
        )),
        (RateLimitKey::Cookie, Some(c)) if !edits::is_token(c) => issues.push(Issue::error(
            field("cookie"),
            format!("{c:?} is not a valid cookie name"),
        )),
        (RateLimitKey::Cookie, Some(_)) => {}
        (_, Some(_)) => issues.push(Issue::error(field("cookie"), "only with key = \"cookie\"")),
        (_, None) => {}
    }
    if !(1..=MAX_REQUESTS).contains(&l.requests) {
        issues.push(Issue::error(
            field("requests"),
            format!("must be between 1 and {MAX_REQUESTS}"),
        ));
    }
    let window = l.window.get();
    let min = match l.scope {
        RateLimitScope::Local => MIN_WINDOW,
        RateLimitScope::Cluster => MIN_CLUSTER_WINDOW,
    };
    if window < min || window > MAX_WINDOW {
        issues.push(Issue::error(
            field("window"),
            format!("must be between {min:?} and {MAX_WINDOW:?} (scope {:?})", l.scope),
        ));
    } else if window.subsec_millis() != 0 && window > Duration::from_secs(1) {
        issues.push(Issue::warning(
            field("window"),
            "whole seconds are advised: Retry-After counts seconds",
        ));
    }
    if l.ipv4_prefix == 0 || l.ipv4_prefix > 32 {
        issues.push(Issue::error(field("ipv4_prefix"), "must be between 1 and 32"));
    }
    if l.ipv6_prefix == 0 || l.ipv6_prefix > 128 {
        issues.push(Issue::error(field("ipv6_prefix"), "must be between 1 and 128"));
    }
    if !(MIN_TRACKED..=MAX_TRACKED).contains(&l.tracked_keys) {
        issues.push(Issue::error(
            field("tracked_keys"),
            format!("must be between {MIN_TRACKED} and {MAX_TRACKED}"),
        ));
    }
    if l.scope == RateLimitScope::Cluster {
        match &config.cluster {
            Some(c) if c.store != StoreKind::Local => {}
            _ => issues.push(Issue::error(
                field("scope"),
                "scope = \"cluster\" needs [cluster] with store = \"redis\" or \"memcached\"",
            )),
        }
        if !(1..=1024).contains(&l.cluster_nodes) {
            issues.push(Issue::error(field("cluster_nodes"), "must be between 1 and 1024"));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};
    use crate::validate::{validate, Severity};

    fn with(limit: &str, route: &str) -> crate::model::Config {
        let text = MINIMAL.replace("[[site.route]]\n", &format!("[[site.route]]\n{route}\n"));
        parse(&format!("{text}\n[[rate_limit]]\n{limit}\n"))
    }

    fn limit_errors(limit: &str, route: &str) -> Vec<String> {
        errors(&with(limit, route))
            .into_iter()
            .filter(|e| e.contains("rate_limit"))
            .collect()
    }

    #[test]
    fn a_plain_limit_is_valid_and_routes_name_it_alone_or_in_a_list() {
        assert!(limit_errors("name = \"api\"\nrequests = 10", "rate_limit = \"api\"").is_empty());
        let c = with("name = \"api\"\nrequests = 10", "rate_limit = [\"api\"]");
        assert_eq!(c.sites[0].routes[0].rate_limit, vec!["api".to_string()]);
        assert_eq!(c.rate_limits[0].window.get(), std::time::Duration::from_secs(1));
        assert!(
            validate(&c).iter().all(|i| !i.field.contains("rate_limit")),
            "no warnings either"
        );
    }

    #[test]
    fn each_problem_names_its_field() {
        let cases = [
            (
                "name = \"a\"\nrequests = 1\n[[rate_limit]]\nname = \"b c\"\nrequests = 1",
                "rate_limit[1].name",
            ),
            ("name = \"a\"\nrequests = 0", "rate_limit[0].requests"),
            ("name = \"a\"\nrequests = 1\nwindow = \"10ms\"", "rate_limit[0].window"),
            ("name = \"a\"\nrequests = 1\nkey = \"header\"", "rate_limit[0].header"),
            (
                "name = \"a\"\nrequests = 1\nkey = \"header\"\nheader = \"x y\"",
                "rate_limit[0].header",
            ),
            (
                "name = \"a\"\nrequests = 1\nheader = \"x-user\"",
                "rate_limit[0].header",
            ),
            ("name = \"a\"\nrequests = 1\nkey = \"cookie\"", "rate_limit[0].cookie"),
            (
                "name = \"a\"\nrequests = 1\nipv4_prefix = 33",
                "rate_limit[0].ipv4_prefix",
            ),
            (
                "name = \"a\"\nrequests = 1\nipv6_prefix = 0",
                "rate_limit[0].ipv6_prefix",
            ),
            (
                "name = \"a\"\nrequests = 1\ntracked_keys = 1",
                "rate_limit[0].tracked_keys",
            ),
            ("name = \"a\"\nrequests = 1\nscope = \"cluster\"", "rate_limit[0].scope"),
        ];
        for (limit, field) in cases {
            let errs = limit_errors(limit, "rate_limit = \"a\"");
            assert_eq!(errs.len(), 1, "{limit}: {errs:?}");
            assert!(errs[0].contains(&format!("{field}:")), "{limit}: {errs:?}");
        }
    }

    #[test]
    fn a_route_naming_an_unknown_limit_is_an_error_an_unused_limit_a_warning() {
        let errs = limit_errors("name = \"a\"\nrequests = 1", "rate_limit = [\"a\", \"nope\"]");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("site[0].route[0].rate_limit[1]") && errs[0].contains("\"nope\""),
            "{errs:?}"
        );
        let c = with("name = \"a\"\nrequests = 1", "");
        assert!(validate(&c)
            .iter()
            .any(|i| i.severity == Severity::Warning && i.field == "rate_limit[0]"));
    }

    #[test]
    fn duplicate_names_are_refused() {
        let c = parse(&format!(
            "{MINIMAL}\n[[rate_limit]]\nname = \"a\"\nrequests = 1\n[[rate_limit]]\nname = \"a\"\nrequests = 2\n"
        ));
        assert!(errors(&c).iter().any(|e| e.contains("rate_limit[1].name")));
    }

    #[test]
    fn a_cluster_limit_needs_a_shared_store_and_a_window_of_a_second() {
        let cluster =
            "[cluster]\nsecret_files = [\"/dev/null\"]\nstore = \"redis\"\nservers = [\"redis://127.0.0.1:6379\"]\n";
        let text = format!(
            "{}\n{cluster}\n[[rate_limit]]\nname = \"a\"\nrequests = 5\nscope = \"cluster\"\nwindow = \"500ms\"\n",
            MINIMAL.replace("[[site.route]]\n", "[[site.route]]\nrate_limit = \"a\"\n")
        );
        let errs: Vec<_> = errors(&parse(&text))
            .into_iter()
            .filter(|e| e.contains("rate_limit"))
            .collect();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("rate_limit[0].window"), "{errs:?}");
    }
}

//! `[[site.route]]`: a path prefix, exactly one of an existing upstream and a fixed response
//! (with a final status), and header edits and a rewrite that the gateway allows.

use super::edits;
use crate::issue::Issue;
use crate::model::{FixedResponseConfig, RouteConfig};
use std::collections::HashSet;

/// One route; `at` is its field path (`site[0].route[2]`), `upstreams` the names of every
/// `[[upstream]]`.
pub(super) fn check(at: &str, r: &RouteConfig, upstreams: &HashSet<&str>, issues: &mut Vec<Issue>) {
    if !r.path_prefix.starts_with('/') {
        issues.push(Issue::error(format!("{at}.path_prefix"), "must start with /"));
    }
    edits::validate_route_edits(
        at,
        &r.request_headers,
        &r.response_headers,
        r.rewrite_prefix.as_deref(),
        issues,
    );
    match (&r.upstream, &r.fixed_response) {
        (Some(_), Some(_)) => issues.push(Issue::error(at, "set either upstream or fixed_response, not both")),
        (None, None) => issues.push(Issue::error(at, "set upstream or fixed_response")),
        (Some(u), None) if !upstreams.contains(u.as_str()) => issues.push(Issue::error(
            format!("{at}.upstream"),
            format!("no [[upstream]] is named {u:?}"),
        )),
        (None, Some(f)) => check_fixed_response(at, f, issues),
        _ => {}
    }
}

/// A fixed response is a final response: `200..=599` (a `1xx` cannot be answered alone, and HTTP
/// has no status above 599).
fn check_fixed_response(at: &str, f: &FixedResponseConfig, issues: &mut Vec<Issue>) {
    if !(200..=599).contains(&f.status) {
        issues.push(Issue::error(
            format!("{at}.fixed_response.status"),
            format!(
                "{} is not a final HTTP status; use 200..=599 (a fixed response cannot be 1xx)",
                f.status
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};
    use crate::validate::{validate, Severity};

    #[test]
    fn unknown_upstream_is_named() {
        let mut c = parse(MINIMAL);
        c.sites[0].routes[0].fixed_response = None;
        c.sites[0].routes[0].upstream = Some("nope".into());
        assert!(errors(&c)
            .iter()
            .any(|e| e.contains("site[0].route[0].upstream") && e.contains("\"nope\"")));
    }

    fn status_errors(status: u16) -> Vec<String> {
        let text = format!(
            r#"
[[listener]]
listen = "127.0.0.1:8443"
[[site]]
name = "a"
server_names = ["localhost"]
[[site.certificate]]
chain = "/dev/null"
key = "/dev/null"
[[site.route]]
fixed_response = {{ status = {status}, body = "x" }}
"#
        );
        validate(&crate::parse(&text).expect("parses"))
            .into_iter()
            .filter(|i| i.severity == Severity::Error && i.field.contains("fixed_response"))
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn fixed_response_status_is_a_final_status() {
        for ok in [200, 204, 301, 404, 503, 599] {
            assert!(status_errors(ok).is_empty(), "{ok}: {:?}", status_errors(ok));
        }
        for bad in [0, 100, 101, 199, 600, 999, 1000] {
            let errs = status_errors(bad);
            assert_eq!(errs.len(), 1, "{bad}: {errs:?}");
            assert!(
                errs[0].contains("site[0].route[0].fixed_response.status")
                    && errs[0].contains(&format!("{bad} is not a final HTTP status; use 200..=599")),
                "{bad}: {errs:?}"
            );
        }
    }
}

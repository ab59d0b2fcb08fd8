//! Route checks that do not depend on other sections: a fixed response's status.

use super::Issue;
use crate::model::FixedResponseConfig;

/// A fixed response is a final response: `200..=599` (a `1xx` cannot be answered alone, and HTTP
/// has no status above 599).
pub(super) fn check_fixed_response(at: &str, f: &FixedResponseConfig, issues: &mut Vec<Issue>) {
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
    use crate::validate::{validate, Severity};

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

//! Checks of a route's header edits and path rewrite (`[[site.route]]` `request_headers`,
//! `response_headers`, `rewrite_prefix`).

use crate::issue::Issue;
use crate::request_edit::HeaderEdits;
use tlsgate_error::{Classify, Side};

/// RFC 9110 `token` characters.
pub(super) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks one route's header edits and path rewrite; `at` is the route's field path.
pub(super) fn validate_route_edits(
    at: &str,
    request: &HeaderEdits,
    response: &HeaderEdits,
    rewrite: Option<&str>,
    issues: &mut Vec<Issue>,
) {
    for (which, edits) in [("request_headers", request), ("response_headers", response)] {
        let names = edits
            .set
            .keys()
            .map(|n| (format!("{at}.{which}.set"), n))
            .chain(edits.remove.iter().map(|n| (format!("{at}.{which}.remove"), n)));
        for (field, name) in names {
            if !is_token(name) {
                issues.push(Issue::error(&field, format!("{name:?} is not a valid header name")));
            } else if crate::request_edit::is_gateway_managed(name) {
                issues.push(Issue::error(
                    &field,
                    format!(
                        "{name:?} is managed by the gateway (framing, hop-by-hop or forwarding) and cannot be edited"
                    ),
                ));
            }
        }
        for (name, value) in &edits.set {
            if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                issues.push(Issue::error(
                    format!("{at}.{which}.set.{name}"),
                    "header values may not contain control characters (CR, LF, NUL, ...)",
                ));
            }
        }
    }
    if let Some(Err(e)) = rewrite.map(check_rewrite_prefix) {
        issues.push(Issue::error(format!("{at}.rewrite_prefix"), e.to_string()));
    }
}

/// Why a rewrite prefix was refused: it is inserted verbatim in front of normalised paths, so it
/// must be an absolute, normal path itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum RewritePrefixError {
    /// Not starting with `/`.
    #[error("must start with /")]
    NotAbsolute,
    /// A character that does not belong in a normal path.
    #[error("may not contain spaces, control characters, ?, # or \\")]
    BadCharacter,
    /// `.`, `..` or an empty segment.
    #[error("may not contain . or .. segments or //")]
    NotNormal,
}

impl Classify for RewritePrefixError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        "rewrite_prefix"
    }
}

/// Checks a rewrite prefix.
fn check_rewrite_prefix(r: &str) -> Result<(), RewritePrefixError> {
    if !r.starts_with('/') {
        return Err(RewritePrefixError::NotAbsolute);
    }
    if r.bytes()
        .any(|b| b.is_ascii_control() || b == b' ' || b == b'?' || b == b'#' || b == b'\\')
    {
        return Err(RewritePrefixError::BadCharacter);
    }
    if r.split('/').any(|s| s == "." || s == "..") || r.contains("//") {
        return Err(RewritePrefixError::NotNormal);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_edits_are_checked() {
        let mut issues = vec![];
        let mut req = HeaderEdits::default();
        req.set.insert("x ok".into(), "1".into());
        req.set.insert("x-v".into(), "a\r\nb".into());
        req.remove.push("Transfer-Encoding".into());
        validate_route_edits("r", &req, &HeaderEdits::default(), Some("/a/../b"), &mut issues);
        let text: Vec<String> = issues.iter().map(|i| i.to_string()).collect();
        assert_eq!(issues.len(), 4, "{text:?}");
        assert!(text
            .iter()
            .any(|t| t.contains("r.request_headers.set") && t.contains("x ok")));
        assert!(text.iter().any(|t| t.contains("r.request_headers.set.x-v")));
        assert!(text
            .iter()
            .any(|t| t.contains("r.request_headers.remove") && t.contains("managed")));
        assert!(text.iter().any(|t| t.contains("r.rewrite_prefix")));
        let mut ok = vec![];
        validate_route_edits(
            "r",
            &HeaderEdits::default(),
            &HeaderEdits::default(),
            Some("/v2/"),
            &mut ok,
        );
        assert!(ok.is_empty());
    }

    #[test]
    fn rewrite_prefixes_are_normal_absolute_paths() {
        use RewritePrefixError::*;
        for (r, want) in [
            ("/v2/", Ok(())),
            ("/", Ok(())),
            ("v2/", Err(NotAbsolute)),
            ("/a b", Err(BadCharacter)),
            ("/a?b", Err(BadCharacter)),
            ("/a\\b", Err(BadCharacter)),
            ("/a/./b", Err(NotNormal)),
            ("/a//b", Err(NotNormal)),
            ("/..", Err(NotNormal)),
        ] {
            assert_eq!(check_rewrite_prefix(r), want, "{r:?}");
        }
        assert_eq!(
            BadCharacter.to_string(),
            "may not contain spaces, control characters, ?, # or \\"
        );
        assert_eq!(
            (NotAbsolute.side(), NotAbsolute.kind()),
            (Side::Config, "rewrite_prefix")
        );
    }
}

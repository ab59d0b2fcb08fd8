//! Request-path normalisation before routing (RFC 3986 §6.2.2 and §5.2.4), so that every
//! spelling of a path that an origin would read as the same resource matches the same route.
//!
//! Without it, `/%61dmin/secret`, `/x/../admin/secret`, `/./admin/secret` and `//admin/secret`
//! all slip past a route for `/admin` and reach an origin that reads them as `/admin/secret`.
//! The normal form is what is routed AND what is forwarded, so the gateway and the origin agree
//! on the path:
//!
//! 1. percent-encoded *unreserved* characters (`A-Z a-z 0-9 - . _ ~`) are decoded (`%61` → `a`,
//!    `%2e` → `.`); every other escape is kept, with upper-case hex (`%2f` → `%2F`): an encoded
//!    slash stays data, not a separator, as in Envoy's default;
//! 2. runs of slashes collapse to one (nginx's `merge_slashes on`);
//! 3. `.` and `..` segments are removed; a `..` that would climb above the root is refused
//!    (nginx answers 400 as well).
//!
//! Refused outright (the caller answers 400): a path not starting with `/`, a malformed escape
//! (`%`, `%4`, `%zz`), an encoded NUL (`%00`), and raw bytes outside RFC 3986's `pchar` set plus
//! `/` (control characters, space, `"`, `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`, non-ASCII).
//! `\` in particular is refused rather than passed on, because some origins read it as `/`.

use crate::percent::escape_at;
use std::borrow::Cow;

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// The path does not start with `/` (origin-form requires it).
    NotAbsolute,
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// `%00`: no origin should ever see a NUL in a path.
    EncodedNul,
    /// A byte that may not appear unescaped in a path.
    BadByte(u8),
    /// A `..` segment that would leave the root.
    AboveRoot,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAbsolute => f.write_str("the path does not start with /"),
            Self::BadEscape => f.write_str("malformed percent-escape in the path"),
            Self::EncodedNul => f.write_str("%00 in the path"),
            Self::BadByte(b) => write!(f, "byte 0x{b:02x} may not appear unescaped in a path"),
            Self::AboveRoot => f.write_str("a .. segment climbs above the root"),
        }
    }
}

impl std::error::Error for PathError {}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 `pchar` minus `%` (handled separately), plus `/`.
fn allowed_raw(b: u8) -> bool {
    unreserved(b)
        || matches!(
            b,
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':' | b'@' | b'/'
        )
}

/// Returns the normal form of `path` (no query), borrowing it when it is already normal, which
/// is the common case and costs one scan.
pub fn normalize(path: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(PathError::NotAbsolute);
    }
    // Fast path: a single scan proves the path is already normal.
    let mut normal = true;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'%' => {
                let v = escape_at(bytes, i).ok_or(PathError::BadEscape)?;
                if v == 0 {
                    return Err(PathError::EncodedNul);
                }
                if unreserved(v) || bytes[i + 1].is_ascii_lowercase() || bytes[i + 2].is_ascii_lowercase() {
                    normal = false;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => normal = false,
            // A `.` or `..` segment (the first byte is `/`, so `i >= 1`).
            b'.' if bytes[i - 1] == b'/' => {
                let end = |j: usize| matches!(bytes.get(j), None | Some(b'/'));
                if end(i + 1) || (bytes.get(i + 1) == Some(&b'.') && end(i + 2)) {
                    normal = false;
                }
            }
            _ if !allowed_raw(b) => return Err(PathError::BadByte(b)),
            _ => {}
        }
    }
    if normal {
        return Ok(Cow::Borrowed(path));
    }
    // Slow path: decode unreserved escapes, then rebuild segment by segment.
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // Every `%` starts a valid escape: the scan above refused the others.
        if let Some(v) = escape_at(bytes, i) {
            if unreserved(v) {
                decoded.push(v);
            } else {
                decoded.push(b'%');
                decoded.push(bytes[i + 1].to_ascii_uppercase());
                decoded.push(bytes[i + 2].to_ascii_uppercase());
            }
            i += 3;
        } else {
            decoded.push(b);
            i += 1;
        }
    }
    let mut segments: Vec<&[u8]> = Vec::new();
    let parts: Vec<&[u8]> = decoded[1..].split(|&b| b == b'/').collect();
    let last = parts.len() - 1;
    let mut trailing_slash = false;
    for (k, seg) in parts.into_iter().enumerate() {
        match seg {
            b"" => trailing_slash = k == last,
            b"." => trailing_slash = k == last,
            b".." => {
                if segments.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
                trailing_slash = k == last;
            }
            s => {
                segments.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for s in &segments {
        out.push('/');
        // Only ASCII got through the scan, so every segment is valid UTF-8.
        out.push_str(std::str::from_utf8(s).unwrap_or_default());
    }
    if segments.is_empty() || trailing_slash {
        out.push('/');
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(p: &str) -> Result<String, PathError> {
        normalize(p).map(|c| c.into_owned())
    }

    #[test]
    fn the_bypasses_from_the_outside_run_all_become_the_admin_path() {
        for p in [
            "/%61dmin/secret.txt",
            "/x/../admin/secret.txt",
            "/./admin/secret.txt",
            "//admin/secret.txt",
            "/%2e/admin/secret.txt",
            "/x/%2E%2E/admin/secret.txt",
            "/admin//./secret.txt",
            "/ADMIN/../admin/secret.txt",
        ] {
            assert_eq!(n(p).unwrap(), "/admin/secret.txt", "{p}");
        }
    }

    #[test]
    fn normal_paths_are_borrowed_unchanged() {
        for p in [
            "/",
            "/a",
            "/a/b/",
            "/a/b.c",
            "/a/.hidden",
            "/a/..b",
            "/a/b..",
            "/%2F",
            "/a%20b",
            "/~u/x;p=1",
        ] {
            assert!(matches!(normalize(p), Ok(Cow::Borrowed(q)) if q == p), "{p}");
        }
    }

    #[test]
    fn escapes_of_reserved_characters_stay_escaped_in_upper_case() {
        assert_eq!(n("/a%2fb").unwrap(), "/a%2Fb");
        assert_eq!(n("/a%2Fb/../c").unwrap(), "/c");
        assert_eq!(n("/%7e%41").unwrap(), "/~A");
        assert_eq!(n("/a%3f").unwrap(), "/a%3F");
    }

    #[test]
    fn dot_segments_and_trailing_slashes() {
        assert_eq!(n("/a/b/..").unwrap(), "/a/");
        assert_eq!(n("/a/b/.").unwrap(), "/a/b/");
        assert_eq!(n("/a/b/../").unwrap(), "/a/");
        assert_eq!(n("/a/./b").unwrap(), "/a/b");
        assert_eq!(n("/.").unwrap(), "/");
        assert_eq!(n("/a/..").unwrap(), "/");
        assert_eq!(n("///").unwrap(), "/");
        assert_eq!(n("/a//").unwrap(), "/a/");
    }

    #[test]
    fn refusals() {
        assert_eq!(n("a/b"), Err(PathError::NotAbsolute));
        assert_eq!(n(""), Err(PathError::NotAbsolute));
        assert_eq!(n("/.."), Err(PathError::AboveRoot));
        assert_eq!(n("/a/../../b"), Err(PathError::AboveRoot));
        assert_eq!(n("/%2e%2e/x"), Err(PathError::AboveRoot));
        assert_eq!(n("/a%"), Err(PathError::BadEscape));
        assert_eq!(n("/a%4"), Err(PathError::BadEscape));
        assert_eq!(n("/a%zz"), Err(PathError::BadEscape));
        assert_eq!(n("/a%00b"), Err(PathError::EncodedNul));
        assert_eq!(n("/a\\b"), Err(PathError::BadByte(b'\\')));
        assert_eq!(n("/a b"), Err(PathError::BadByte(b' ')));
        assert_eq!(n("/é"), Err(PathError::BadByte(0xc3)));
    }

    #[test]
    fn normal_form_is_a_fixed_point() {
        for p in ["/%61/./b//c/../d%2f", "/x/%2E%2e/y/", "//a/b/./"] {
            let once = n(p).unwrap();
            assert!(matches!(normalize(&once), Ok(Cow::Borrowed(_))), "{p} -> {once}");
        }
    }
}

//! Percent-decoding (RFC 3986 §2.1): the one decoder of `%XX` escapes that path normalisation
//! ([`crate::path`]), the admin API's pool names and the console's form fields and path segments
//! share.
//!
//! [`escape_at`] reads one escape for callers that decide escape by escape what to do (path
//! normalisation keeps some encoded). [`decode`] decodes a whole component leniently, the way
//! browsers and most servers read it: a malformed escape (`%zz`, a truncated `%4`, a lone `%`)
//! is kept as written, never an error, and bytes that do not form UTF-8 become U+FFFD.
//! [`Plus::Space`] reads `+` as a space (`application/x-www-form-urlencoded` values); in a path
//! segment `+` is itself ([`Plus::Literal`]).

use std::borrow::Cow;

/// How `+` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plus {
    /// `+` is a plus sign (path segments, RFC 3986).
    Literal,
    /// `+` is a space (HTML form values, `application/x-www-form-urlencoded`); `%2B` is a plus.
    Space,
}

/// The value of one hex digit.
pub fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte an escape starting at `bytes[i]` stands for: `Some` when `bytes[i..]` starts with
/// `%` and two hex digits.
pub fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    if bytes.get(i) != Some(&b'%') {
        return None;
    }
    let h = hex_digit(*bytes.get(i + 1)?)?;
    let l = hex_digit(*bytes.get(i + 2)?)?;
    Some(h << 4 | l)
}

/// Decodes every well-formed escape of `s` (and `+` as `plus` says) into bytes; malformed
/// escapes are kept as written. Borrows `s` when there is nothing to decode.
pub fn decode_bytes(s: &str, plus: Plus) -> Cow<'_, [u8]> {
    let bytes = s.as_bytes();
    let plus_is_space = plus == Plus::Space;
    if !bytes.iter().any(|&b| b == b'%' || (plus_is_space && b == b'+')) {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], escape_at(bytes, i)) {
            (_, Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', None) if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            (b, None) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// [`decode_bytes`] as text: byte sequences that are not UTF-8 become U+FFFD.
pub fn decode(s: &str, plus: Plus) -> Cow<'_, str> {
    match decode_bytes(s, plus) {
        Cow::Borrowed(_) => Cow::Borrowed(s),
        Cow::Owned(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Cow::Owned(text),
            Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> String {
        decode(s, Plus::Literal).into_owned()
    }

    fn form(s: &str) -> String {
        decode(s, Plus::Space).into_owned()
    }

    #[test]
    fn valid_escapes_decode_in_either_case() {
        assert_eq!(path("a%20b%2Fc"), "a b/c");
        assert_eq!(path("127.0.0.1%3A1%2C127.0.0.1%3A2"), "127.0.0.1:1,127.0.0.1:2");
        assert_eq!(path("%7e%7E%41"), "~~A");
        assert_eq!(path("%C3%A9t%c3%a9"), "été");
        assert_eq!(path("%25"), "%");
        assert_eq!(path("%2541"), "%41", "decoded once, not twice");
    }

    #[test]
    fn nothing_to_decode_is_borrowed() {
        assert!(matches!(decode("main", Plus::Literal), Cow::Borrowed("main")));
        assert!(matches!(decode("a+b", Plus::Literal), Cow::Borrowed("a+b")));
        assert!(matches!(decode_bytes("", Plus::Space), Cow::Borrowed(b"")));
    }

    #[test]
    fn malformed_escapes_are_kept_as_written() {
        assert_eq!(path("bad%zz%4"), "bad%zz%4");
        assert_eq!(path("a%20b%2Fc%zz%4"), "a b/c%zz%4");
        assert_eq!(path("%"), "%");
        assert_eq!(path("x%"), "x%");
        assert_eq!(path("%4"), "%4");
        assert_eq!(path("%g0%0g"), "%g0%0g");
        assert_eq!(path("%%41"), "%A");
    }

    #[test]
    fn plus_is_a_space_in_form_values_only() {
        assert_eq!(path("a+b"), "a+b");
        assert_eq!(form("a+b"), "a b");
        assert_eq!(form("a%2Bb+c"), "a+b c");
        assert_eq!(form("%2B%2b"), "++");
        assert_eq!(form("tok+%zz"), "tok %zz");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced_in_text_and_kept_as_bytes() {
        assert_eq!(path("a%FFb"), "a\u{FFFD}b");
        assert_eq!(path("%C3"), "\u{FFFD}");
        assert_eq!(&*decode_bytes("a%FFb%00", Plus::Literal), b"a\xffb\x00");
    }

    #[test]
    fn single_escapes() {
        assert_eq!(escape_at(b"%41", 0), Some(b'A'));
        assert_eq!(escape_at(b"x%2f", 1), Some(b'/'));
        assert_eq!(escape_at(b"%41", 1), None, "not at a %");
        assert_eq!(escape_at(b"%4", 0), None);
        assert_eq!(escape_at(b"%", 0), None);
        assert_eq!(escape_at(b"%zz", 0), None);
        assert_eq!(escape_at(b"", 0), None);
        assert_eq!(hex_digit(b'f'), Some(15));
        assert_eq!(hex_digit(b'G'), None);
    }
}

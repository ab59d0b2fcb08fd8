//! The `Date` header of responses that lack one (RFC 9110 §6.6.1: the gateway's own answers;
//! origins send theirs), formatted once a second per thread.

use http::{header, HeaderMap, HeaderValue};
use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    static CACHED: RefCell<(u64, Option<HeaderValue>)> = const { RefCell::new((u64::MAX, None)) };
}

/// Adds `Date: <now>` to `headers` unless they have one.
pub fn insert_if_missing(headers: &mut HeaderMap) {
    if headers.contains_key(header::DATE) {
        return;
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let value = CACHED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != second || c.1.is_none() {
            let text = httpdate::fmt_http_date(now);
            *c = (second, HeaderValue::from_str(&text).ok());
        }
        c.1.clone()
    });
    if let Some(v) = value {
        headers.insert(header::DATE, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_added_once_and_an_origin_date_is_kept() {
        let mut h = HeaderMap::new();
        insert_if_missing(&mut h);
        let d = h[header::DATE].to_str().unwrap().to_string();
        assert!(d.ends_with(" GMT") && d.len() == 29, "{d}");
        let mut origin = HeaderMap::new();
        origin.insert(header::DATE, HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
        insert_if_missing(&mut origin);
        assert_eq!(origin[header::DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
    }
}

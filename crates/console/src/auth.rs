//! Authentication: a bearer token (read from a file) or a session cookie obtained by posting
//! that token to the login form. On a loopback bind requests need neither (a token, when
//! sent, still names the author); on any other bind every request but `/healthz` and the login
//! form needs one, and the console refuses to start without a token.

use crate::error::ConsoleError;
use hyper::header::{AUTHORIZATION, COOKIE};
use hyper::HeaderMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "tlsgate_console";
/// How long a login session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Shortest accepted token.
pub const MIN_TOKEN_LEN: usize = 16;

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Presented the token (header or session cookie).
    Token,
    /// No credentials, allowed because the console listens on loopback only.
    Loopback,
}

impl Identity {
    /// The author recorded in the history for changes made by this identity.
    pub fn author(&self) -> &'static str {
        match self {
            Identity::Token => "console:token",
            Identity::Loopback => "console:loopback",
        }
    }
}

/// The authentication state of one console.
#[derive(Debug)]
pub struct Auth {
    token: Option<String>,
    open: bool,
    sessions: Mutex<HashMap<String, Instant>>,
}

impl Auth {
    /// For a console bound to `listen` with `token` (from `--token-file`). Errors when the
    /// bind is not loopback and there is no token, or the token is too short.
    pub fn new(listen: SocketAddr, token: Option<String>) -> Result<Self, ConsoleError> {
        if token.as_ref().is_some_and(|t| t.len() < MIN_TOKEN_LEN) {
            return Err(ConsoleError::ShortToken { min: MIN_TOKEN_LEN });
        }
        let open = listen.ip().is_loopback();
        if !open && token.is_none() {
            return Err(ConsoleError::TokenRequired(listen));
        }
        Ok(Self {
            token,
            open,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// Whether requests without credentials are allowed (loopback bind).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Whether `candidate` is the token (constant time in the candidate's content).
    pub fn token_matches(&self, candidate: &str) -> bool {
        match &self.token {
            Some(t) => constant_time_eq(t.as_bytes(), candidate.trim().as_bytes()),
            None => false,
        }
    }

    /// A login with `candidate` (the form's token): the new session's id for the cookie, or
    /// [`ConsoleError::WrongToken`].
    pub fn login(&self, candidate: &str) -> Result<String, ConsoleError> {
        if self.token_matches(candidate) {
            Ok(self.new_session())
        } else {
            Err(ConsoleError::WrongToken)
        }
    }

    /// The identity of a request, or `None` when it must be refused (401).
    pub fn identify(&self, headers: &HeaderMap) -> Option<Identity> {
        let bearer = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if bearer.is_some_and(|b| self.token_matches(b)) {
            return Some(Identity::Token);
        }
        if self.cookie_session(headers).is_some_and(|s| self.session_valid(&s)) {
            return Some(Identity::Token);
        }
        if bearer.is_some() && !self.open {
            return None;
        }
        self.open.then_some(Identity::Loopback)
    }

    /// Whether the request authenticated with the session cookie (not a header).
    pub fn uses_cookie(&self, headers: &HeaderMap) -> bool {
        !headers.contains_key(AUTHORIZATION) && self.cookie_session(headers).is_some()
    }

    /// Starts a session; returns its id for the cookie.
    pub fn new_session(&self) -> String {
        // BoringSSL's generator, the one source of secrets in tlsgate (it aborts rather than fail).
        let mut id = [0u8; 32];
        boring::rand::rand_bytes(&mut id).expect("BoringSSL's random generator");
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let mut s = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        s.retain(|_, t| now.duration_since(*t) < SESSION_TTL);
        s.insert(id.clone(), now);
        id
    }

    /// Ends a session.
    pub fn end_session(&self, headers: &HeaderMap) {
        if let Some(id) = self.cookie_session(headers) {
            self.sessions.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        }
    }

    fn session_valid(&self, id: &str) -> bool {
        let s = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        s.get(id).is_some_and(|t| t.elapsed() < SESSION_TTL)
    }

    fn cookie_session(&self, headers: &HeaderMap) -> Option<String> {
        headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == COOKIE_NAME)
            .map(|(_, v)| v.to_string())
    }
}

/// Equal contents, compared in time independent of where they differ (BoringSSL's
/// `CRYPTO_memcmp`); only the lengths are compared in the open.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && boring::memcmp::eq(a, b)
}

/// Reads the token from `path` (surrounding whitespace removed).
pub fn read_token(path: &std::path::Path) -> Result<String, ConsoleError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConsoleError::ReadToken {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;
    use tlsgate_error::{Classify, Side};

    const T: &str = "0123456789abcdef0123";

    #[test]
    fn non_loopback_needs_a_token() {
        let any: SocketAddr = "0.0.0.0:9800".parse().unwrap();
        let refused = |token: Option<&str>| Auth::new(any, token.map(str::to_string)).expect_err("refused");
        let e = refused(None);
        assert_eq!((e.side(), e.kind()), (Side::Config, "token_required"));
        assert_eq!(
            e.to_string(),
            "refusing to listen on 0.0.0.0:9800 (not loopback) without --token-file"
        );
        assert_eq!(refused(Some("short")).kind(), "token_too_short");
        let a = Auth::new(any, Some(T.into())).unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(a.identify(&h), None);
        h.insert(
            AUTHORIZATION,
            HeaderValue::from_static("Bearer wrong-token-wrong-token"),
        );
        assert_eq!(a.identify(&h), None);
        h.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {T}")).unwrap());
        assert_eq!(a.identify(&h), Some(Identity::Token));
        let id = a.new_session();
        let mut h = HeaderMap::new();
        h.insert(
            COOKIE,
            HeaderValue::from_str(&format!("x=1; {COOKIE_NAME}={id}")).unwrap(),
        );
        assert_eq!(a.identify(&h), Some(Identity::Token));
        a.end_session(&h);
        assert_eq!(a.identify(&h), None);
    }

    #[test]
    fn a_login_with_the_wrong_token_is_the_callers_fault() {
        let a = Auth::new("0.0.0.0:9800".parse().unwrap(), Some(T.into())).unwrap();
        let e = a.login("wrong-token-wrong-token").unwrap_err();
        assert_eq!((e.side(), e.kind()), (Side::Downstream, "wrong_token"));
        let id = a.login(&format!(" {T}\n")).unwrap();
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_str(&format!("{COOKIE_NAME}={id}")).unwrap());
        assert_eq!(a.identify(&h), Some(Identity::Token));
        let missing = std::path::Path::new("/nonexistent/token");
        let e = read_token(missing).unwrap_err();
        assert_eq!(e.kind(), "token_unreadable");
        assert!(e.to_string().starts_with("cannot read /nonexistent/token: "), "{e}");
    }

    #[test]
    fn session_ids_are_fresh_and_tokens_match_only_exactly() {
        let a = Auth::new("127.0.0.1:9800".parse().unwrap(), Some(T.into())).unwrap();
        let (x, y) = (a.new_session(), a.new_session());
        assert_ne!(x, y);
        assert!(x.len() == 64 && x.bytes().all(|b| b.is_ascii_hexdigit()), "{x}");
        assert!(a.token_matches(T));
        assert!(!a.token_matches(&T[..T.len() - 1]), "a prefix");
        assert!(!a.token_matches(&format!("{T}0")), "longer");
        assert!(!a.token_matches("1123456789abcdef0123"), "one byte differs");
    }

    #[test]
    fn loopback_is_open_but_names_token_holders() {
        let lo: SocketAddr = "127.0.0.1:9800".parse().unwrap();
        let a = Auth::new(lo, None).unwrap();
        assert_eq!(a.identify(&HeaderMap::new()), Some(Identity::Loopback));
        let a = Auth::new(lo, Some(T.into())).unwrap();
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {T}")).unwrap());
        assert_eq!(a.identify(&h), Some(Identity::Token));
    }
}

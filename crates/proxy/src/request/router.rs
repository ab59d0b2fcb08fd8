//! Request routing inside a site: by Host (optional) and longest path prefix, matched against
//! the normalised path (tlsgate-wire's `path`); each route carries its path rewrite and header
//! edits, compiled once per configuration.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use tlsgate_config::{FixedResponseConfig, HeaderEdits, RouteConfig};

/// What a matched route does.
#[derive(Debug, Clone)]
pub enum Action {
    /// Forward to the upstream group with this index.
    Upstream(usize),
    /// Answer with a fixed response.
    Fixed(FixedResponse),
}

/// A response tlsgate answers itself, encoded once at configuration time.
#[derive(Debug, Clone)]
pub struct FixedResponse {
    /// Status code.
    pub status: http::StatusCode,
    /// Content-Type.
    pub content_type: http::HeaderValue,
    /// Body.
    pub body: Bytes,
}

impl FixedResponse {
    /// From configuration (validated beforehand).
    pub fn from_config(c: &FixedResponseConfig) -> Self {
        Self {
            status: http::StatusCode::from_u16(c.status).unwrap_or(http::StatusCode::OK),
            content_type: http::HeaderValue::from_str(&c.content_type)
                .unwrap_or(http::HeaderValue::from_static("text/plain")),
            body: Bytes::from(c.body.clone()),
        }
    }
}

/// Header edits compiled to `http` types (names and values validated by `tlsgate check`).
#[derive(Debug, Clone, Default)]
pub struct Edits {
    set: Vec<(HeaderName, HeaderValue)>,
    remove: Vec<HeaderName>,
}

impl Edits {
    fn new(c: &HeaderEdits) -> Self {
        Self {
            set: c
                .set
                .iter()
                .filter_map(|(n, v)| {
                    Some((
                        HeaderName::from_bytes(n.as_bytes()).ok()?,
                        HeaderValue::from_str(v).ok()?,
                    ))
                })
                .collect(),
            remove: c
                .remove
                .iter()
                .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
                .collect(),
        }
    }

    /// Applies the edits: removals first, then the values set.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for n in &self.remove {
            headers.remove(n);
        }
        for (n, v) in &self.set {
            headers.insert(n.clone(), v.clone());
        }
    }

    /// True when there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }
}

/// One route.
#[derive(Debug, Clone)]
pub struct Route {
    host: Option<String>,
    prefix: String,
    /// What the route does.
    pub action: Action,
    rewrite: Option<String>,
    /// Edits to requests before forwarding.
    pub request_edits: Edits,
    /// Edits to responses before the client.
    pub response_edits: Edits,
    /// The `[[rate_limit]]`s the route names.
    pub rate_limit: crate::request::rate_limit::RouteLimits,
}

impl Route {
    /// The path to forward for a request whose normalised path is `path` (which matched this
    /// route's prefix): `path` itself, or with the prefix replaced by `rewrite_prefix`.
    pub fn forward_path<'p>(&self, path: &'p str) -> std::borrow::Cow<'p, str> {
        let Some(to) = &self.rewrite else {
            return path.into();
        };
        let rest = path.strip_prefix(self.prefix.as_str()).unwrap_or(path);
        let mut out = String::with_capacity(to.len() + rest.len() + 1);
        out.push_str(to);
        // Concatenated as nginx's `proxy_pass` with a URI does, without a doubled slash.
        if to.ends_with('/') && rest.starts_with('/') {
            out.push_str(&rest[1..]);
        } else {
            out.push_str(rest);
        }
        if out.is_empty() {
            out.push('/');
        }
        out.into()
    }
}

/// The routes of one site, longest prefix first.
#[derive(Debug, Clone, Default)]
pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// Builds a router; `upstream_index` maps an upstream name to its index (validated beforehand).
    pub fn new(routes: &[RouteConfig], upstream_index: impl Fn(&str) -> Option<usize>) -> Self {
        let mut out: Vec<Route> = routes
            .iter()
            .filter_map(|r| {
                let action = match (&r.upstream, &r.fixed_response) {
                    (Some(name), _) => Action::Upstream(upstream_index(name)?),
                    (None, Some(f)) => Action::Fixed(FixedResponse::from_config(f)),
                    (None, None) => return None,
                };
                Some(Route {
                    host: r.host.as_ref().map(|h| h.to_ascii_lowercase()),
                    prefix: r.path_prefix.clone(),
                    action,
                    rewrite: r.rewrite_prefix.clone(),
                    request_edits: Edits::new(&r.request_headers),
                    response_edits: Edits::new(&r.response_headers),
                    rate_limit: crate::request::rate_limit::RouteLimits::new(
                        &r.rate_limit,
                        r.host.as_deref(),
                        &r.path_prefix,
                    ),
                })
            })
            .collect();
        // Host-specific routes before host-less ones, then longest prefix first; stable otherwise.
        out.sort_by(|a, b| {
            b.host
                .is_some()
                .cmp(&a.host.is_some())
                .then(b.prefix.len().cmp(&a.prefix.len()))
        });
        Self { routes: out }
    }

    /// The route for a request to `host` (lower-case, without port) and `path` (normalised).
    pub fn route(&self, host: Option<&str>, path: &str) -> Option<&Route> {
        self.routes
            .iter()
            .find(|r| r.host.as_deref().is_none_or(|h| Some(h) == host) && path.starts_with(&r.prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(host: Option<&str>, prefix: &str, upstream: &str) -> RouteConfig {
        RouteConfig {
            host: host.map(str::to_string),
            path_prefix: prefix.into(),
            upstream: Some(upstream.into()),
            fixed_response: None,
            rewrite_prefix: None,
            request_headers: Default::default(),
            response_headers: Default::default(),
            match_ja4: Vec::new(),
            rate_limit: Vec::new(),
        }
    }

    fn idx(name: &str) -> Option<usize> {
        ["a", "b", "c"].iter().position(|n| *n == name)
    }

    #[test]
    fn longest_prefix_wins_and_host_routes_come_first() {
        let r = Router::new(
            &[
                route(None, "/", "a"),
                route(None, "/api/", "b"),
                route(Some("x.test"), "/", "c"),
            ],
            idx,
        );
        let up = |host, path| match r.route(host, path).map(|r| &r.action) {
            Some(Action::Upstream(i)) => *i,
            _ => usize::MAX,
        };
        assert_eq!(up(None, "/index.html"), 0);
        assert_eq!(up(None, "/api/v1"), 1);
        assert_eq!(up(Some("x.test"), "/api/v1"), 2);
        assert_eq!(up(Some("y.test"), "/api/v1"), 1);
    }

    #[test]
    fn rewrite_prefix_replaces_the_matched_prefix() {
        let with = |prefix: &str, to: &str| {
            let mut c = route(None, prefix, "a");
            c.rewrite_prefix = Some(to.into());
            Router::new(&[c], idx)
        };
        let fwd = |r: &Router, p: &str| r.route(None, p).unwrap().forward_path(p).into_owned();
        let strip = with("/api/", "/");
        assert_eq!(fwd(&strip, "/api/x/y"), "/x/y");
        assert_eq!(fwd(&strip, "/api/"), "/");
        let v2 = with("/api/", "/v2/");
        assert_eq!(fwd(&v2, "/api/x"), "/v2/x");
        let no_slash = with("/api", "/v2");
        assert_eq!(fwd(&no_slash, "/api/x"), "/v2/x");
        assert_eq!(fwd(&no_slash, "/api"), "/v2");
        assert_eq!(fwd(&no_slash, "/apix"), "/v2x");
        let plain = Router::new(&[route(None, "/", "a")], idx);
        assert_eq!(fwd(&plain, "/keep/me"), "/keep/me");
    }

    #[test]
    fn no_match_is_none() {
        let r = Router::new(&[route(None, "/api/", "a")], idx);
        assert!(r.route(None, "/other").is_none());
    }
}

//! Request routing inside a site: by Host (optional) and longest path prefix.

use bytes::Bytes;
use tlsgate_config::{FixedResponseConfig, RouteConfig};

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

#[derive(Debug, Clone)]
struct Route {
    host: Option<String>,
    prefix: String,
    action: Action,
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

    /// The action for a request to `host` (lower-case, without port) and `path`.
    pub fn route(&self, host: Option<&str>, path: &str) -> Option<&Action> {
        self.routes
            .iter()
            .find(|r| r.host.as_deref().is_none_or(|h| Some(h) == host) && path.starts_with(&r.prefix))
            .map(|r| &r.action)
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
        let up = |host, path| match r.route(host, path) {
            Some(Action::Upstream(i)) => *i,
            _ => usize::MAX,
        };
        assert_eq!(up(None, "/index.html"), 0);
        assert_eq!(up(None, "/api/v1"), 1);
        assert_eq!(up(Some("x.test"), "/api/v1"), 2);
        assert_eq!(up(Some("y.test"), "/api/v1"), 1);
    }

    #[test]
    fn no_match_is_none() {
        let r = Router::new(&[route(None, "/api/", "a")], idx);
        assert!(r.route(None, "/other").is_none());
    }
}

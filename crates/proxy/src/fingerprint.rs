//! The connection's JA4 fingerprint on the request path: the header that carries it to origins
//! (`[server] ja4_header`) and routing by it (`[[site.route]] match_ja4`). The fingerprint itself
//! is computed once per connection in the TLS layer (tlsgate-tls `fingerprint`) and read into the
//! connection's facts after the handshake (`TlsFacts::ja4`), where a rate limiter can key on it
//! too; nothing here computes it again.
//!
//! The header follows the client-certificate identity headers (`identity`): every field of that
//! name the client sent is removed, whatever it holds, then the connection's own value is set, so
//! a client can never forge another's fingerprint; validation keeps routes from editing it.
//!
//! Routing: a site with `match_ja4` routes gets one extra [`Router`] per fingerprint named, made
//! of the routes naming it (first) and the routes naming none; every other connection routes
//! with the site's plain router, built from the routes naming none. A request of a site without
//! such routes pays one `Option` check. A leaf above `request::router`: `gateway` and
//! `request::service` use it; it imports neither.

use crate::request::router::Router;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::collections::HashMap;
use tlsgate_config::{RouteConfig, ServerConfig};

/// `[server] ja4_header`, compiled once per generation.
#[derive(Debug, Clone)]
pub struct Ja4Header {
    name: HeaderName,
}

impl Ja4Header {
    /// The configured name; None when unset (or not a header name, which validation refuses).
    pub fn from_config(server: &ServerConfig) -> Option<Self> {
        let name = server.ja4_header.as_deref()?;
        Some(Self {
            name: HeaderName::from_bytes(name.as_bytes()).ok()?,
        })
    }

    /// Removes every field of the name the client sent, then sets the connection's fingerprint.
    pub fn apply(&self, headers: &mut HeaderMap, ja4: Option<&str>) {
        headers.remove(&self.name);
        if let Some(value) = ja4.and_then(|j| HeaderValue::from_str(j).ok()) {
            headers.insert(self.name.clone(), value);
        }
    }
}

/// Sets the generation's JA4 header (when it has one) on a request of a connection whose
/// fingerprint is `ja4`.
pub fn forward_header(header: Option<&Ja4Header>, ja4: Option<&str>, headers: &mut HeaderMap) {
    if let Some(header) = header {
        header.apply(headers, ja4);
    }
}

/// A site's routers for the fingerprints its routes name.
#[derive(Debug, Default)]
pub struct FingerprintRoutes {
    by_ja4: HashMap<Box<str>, Router>,
}

/// A site's routers: the plain one (routes without `match_ja4`) and, when some route names
/// fingerprints, one per fingerprint named.
pub fn routers(
    routes: &[RouteConfig],
    upstream_index: impl Fn(&str) -> Option<usize>,
) -> (Router, Option<FingerprintRoutes>) {
    let (named, plain): (Vec<&RouteConfig>, Vec<&RouteConfig>) = routes.iter().partition(|r| !r.match_ja4.is_empty());
    let plain: Vec<RouteConfig> = plain.into_iter().cloned().collect();
    let router = Router::new(&plain, &upstream_index);
    if named.is_empty() {
        return (router, None);
    }
    let mut by_ja4 = HashMap::new();
    for ja4 in named.iter().flat_map(|r| &r.match_ja4) {
        if by_ja4.contains_key(ja4.as_str()) {
            continue;
        }
        // The routes naming this fingerprint first: the router's sort is stable, so at equal host
        // and prefix they are tried before the plain ones.
        let mut own: Vec<RouteConfig> = named
            .iter()
            .filter(|r| r.match_ja4.contains(ja4))
            .map(|r| (*r).clone())
            .collect();
        own.extend(plain.iter().cloned());
        by_ja4.insert(ja4.as_str().into(), Router::new(&own, &upstream_index));
    }
    (router, Some(FingerprintRoutes { by_ja4 }))
}

/// The router for a request of a connection with fingerprint `ja4`, on a site whose plain
/// router is `plain` and whose fingerprint routers are `by_ja4`.
pub fn router_for<'a>(plain: &'a Router, by_ja4: Option<&'a FingerprintRoutes>, ja4: Option<&str>) -> &'a Router {
    by_ja4
        .zip(ja4)
        .and_then(|(routes, ja4)| routes.by_ja4.get(ja4))
        .unwrap_or(plain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::router::Action;

    const A: &str = "t13d1516h2_8daaf6152771_02713d6af862";
    const B: &str = "t12d190800_d83cc789557e_7af1ed941c26";

    fn route(prefix: &str, upstream: &str, ja4: &[&str]) -> RouteConfig {
        let text = format!(
            "[[site]]\nname = \"s\"\nserver_names = [\"s\"]\ncertificate = []\n[[site.route]]\n\
             path_prefix = \"{prefix}\"\nupstream = \"{upstream}\"\nmatch_ja4 = {ja4:?}\n"
        );
        tlsgate_config::parse(&text).unwrap().sites[0].routes[0].clone()
    }

    fn upstream_of(router: &Router, path: &str) -> Option<usize> {
        match router.route(None, path).map(|r| &r.action) {
            Some(Action::Upstream(i)) => Some(*i),
            _ => None,
        }
    }

    #[test]
    fn fingerprint_routes_serve_only_their_clients() {
        let idx = |n: &str| ["plain", "for_a", "for_ab", "api"].iter().position(|x| *x == n);
        let routes = [
            route("/", "plain", &[]),
            route("/", "for_a", &[A]),
            route("/x/", "for_ab", &[A, B]),
            route("/api/", "api", &[]),
        ];
        let (plain, by) = routers(&routes, idx);
        let up = |ja4: Option<&str>, path| upstream_of(router_for(&plain, by.as_ref(), ja4), path);
        assert_eq!(up(None, "/"), Some(0));
        assert_eq!(up(Some(B), "/"), Some(0), "the / route for A is not B's");
        assert_eq!(up(Some(A), "/"), Some(1), "A's route wins at an equal prefix");
        assert_eq!(up(Some(A), "/x/1"), Some(2));
        assert_eq!(up(Some(B), "/x/1"), Some(2));
        assert_eq!(up(None, "/x/1"), Some(0));
        assert_eq!(up(Some(A), "/api/v"), Some(3), "a longer plain prefix still wins");
        let other = "t13d0000h2_000000000000_000000000000";
        assert_eq!(up(Some(other), "/x/1"), Some(0));
    }

    #[test]
    fn sites_without_fingerprint_routes_have_no_table() {
        let (_, by) = routers(&[route("/", "a", &[])], |_| Some(0));
        assert!(by.is_none());
    }

    #[test]
    fn the_header_replaces_every_client_copy() {
        let mut server = ServerConfig::default();
        assert!(Ja4Header::from_config(&server).is_none());
        server.ja4_header = Some("X-JA4".into());
        let h = Ja4Header::from_config(&server).unwrap();
        let mut m = HeaderMap::new();
        m.append("x-ja4", HeaderValue::from_static("forged"));
        m.append("X-Ja4", HeaderValue::from_static("forged-too"));
        m.append("x-kept", HeaderValue::from_static("1"));
        let mut without = m.clone();
        h.apply(&mut m, Some(A));
        assert_eq!(m.get_all("x-ja4").iter().collect::<Vec<_>>(), [A]);
        assert_eq!(m["x-kept"], "1");
        h.apply(&mut without, None);
        assert!(!without.contains_key("x-ja4"), "no fingerprint: removed, not set");
    }
}

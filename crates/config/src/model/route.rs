//! `[[site.route]]`: which requests a route matches and what it does with them (forward to an
//! upstream or answer a fixed response, with header edits and a path rewrite).

use crate::request_edit::HeaderEdits;
use serde::Deserialize;

/// `[[site.route]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Only requests whose Host (without port) equals this; absent = any host of the site.
    #[serde(default)]
    pub host: Option<String>,
    /// Request paths starting with this prefix match. Defaults to `/`.
    #[serde(default = "default_prefix")]
    pub path_prefix: String,
    /// Forward matching requests to this upstream group.
    #[serde(default)]
    pub upstream: Option<String>,
    /// Answer matching requests with this fixed response instead (for health checks and benchmarks).
    #[serde(default)]
    pub fixed_response: Option<FixedResponseConfig>,
    /// Replace the matched `path_prefix` with this before forwarding (`"/"` strips it):
    /// `path_prefix = "/api/"`, `rewrite_prefix = "/v2/"` forwards `/api/x?q` as `/v2/x?q`.
    #[serde(default)]
    pub rewrite_prefix: Option<String>,
    /// Headers set / removed on requests before they are forwarded.
    #[serde(default)]
    pub request_headers: HeaderEdits,
    /// Headers set / removed on responses (the origin's and the gateway's own) of this route.
    #[serde(default)]
    pub response_headers: HeaderEdits,
    /// Only connections whose JA4 TLS fingerprint is one of these; empty = any client. At equal
    /// host and prefix, a route with `match_ja4` is tried before one without.
    #[serde(default)]
    pub match_ja4: Vec<String>,
    /// The `[[rate_limit]]`s (a name or a list of names) every request of this route counts against.
    #[serde(default, deserialize_with = "super::ratelimit::one_or_many")]
    pub rate_limit: Vec<String>,
}

fn default_prefix() -> String {
    "/".into()
}

/// A response tlsgate answers itself.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedResponseConfig {
    /// HTTP status code.
    #[serde(default = "default_fixed_status")]
    pub status: u16,
    /// Body text.
    #[serde(default)]
    pub body: String,
    /// Content-Type header.
    #[serde(default = "default_content_type")]
    pub content_type: String,
}

fn default_fixed_status() -> u16 {
    200
}
fn default_content_type() -> String {
    "text/plain".into()
}

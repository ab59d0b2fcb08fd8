//! The ACME objects tlsgate reads (RFC 8555 §7.1, RFC 9773 §4.2), parsed leniently: unknown
//! members are ignored, missing optional ones default.

use serde::Deserialize;

/// The directory (§7.1.1).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Directory {
    /// newNonce URL.
    pub new_nonce: String,
    /// newAccount URL.
    pub new_account: String,
    /// newOrder URL.
    pub new_order: String,
    /// renewalInfo URL (RFC 9773), when the CA offers it.
    #[serde(default)]
    pub renewal_info: Option<String>,
    /// Metadata.
    #[serde(default)]
    pub meta: Option<DirectoryMeta>,
}

/// The directory's `meta`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryMeta {
    /// Whether newAccount needs an External Account Binding.
    #[serde(default)]
    pub external_account_required: bool,
    /// Certificate profiles offered (name → description).
    #[serde(default)]
    pub profiles: Option<serde_json::Map<String, serde_json::Value>>,
}

/// An identifier (§9.7.7): tlsgate orders `dns` ones.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Identifier {
    /// `dns`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The name.
    pub value: String,
}

/// An order (§7.1.3).
#[derive(Debug, Clone, Deserialize)]
pub struct Order {
    /// pending, ready, processing, valid or invalid.
    pub status: String,
    /// Authorization URLs.
    #[serde(default)]
    pub authorizations: Vec<String>,
    /// Finalize URL.
    pub finalize: String,
    /// Certificate URL, once valid.
    #[serde(default)]
    pub certificate: Option<String>,
    /// The error that made it invalid.
    #[serde(default)]
    pub error: Option<Problem>,
}

/// An authorization (§7.1.4).
#[derive(Debug, Clone, Deserialize)]
pub struct Authorization {
    /// pending, valid, invalid, deactivated, expired or revoked.
    pub status: String,
    /// The name authorized.
    pub identifier: Identifier,
    /// The challenges offered.
    #[serde(default)]
    pub challenges: Vec<Challenge>,
    /// Whether this authorizes a wildcard (`*.` was stripped from the identifier).
    #[serde(default)]
    pub wildcard: bool,
}

/// A challenge (§7.1.5).
#[derive(Debug, Clone, Deserialize)]
pub struct Challenge {
    /// `http-01`, `dns-01`, `tls-alpn-01`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Where to answer it.
    pub url: String,
    /// Its token.
    #[serde(default)]
    pub token: String,
    /// pending, processing, valid or invalid.
    pub status: String,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<Problem>,
}

/// A problem document (RFC 7807, §6.7).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Problem {
    /// The problem type URN.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// A human-readable explanation.
    #[serde(default)]
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

/// A renewalInfo answer (RFC 9773 §4.2).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenewalInfo {
    /// When to renew.
    pub suggested_window: SuggestedWindow,
    /// Why the window is where it is (e.g. a revocation), if the CA says.
    #[serde(default, rename = "explanationURL")]
    pub explanation_url: Option<String>,
}

/// The window, RFC 3339 timestamps.
#[derive(Debug, Clone, Deserialize)]
pub struct SuggestedWindow {
    /// Start.
    pub start: String,
    /// End.
    pub end: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pebble_like_objects() {
        let d: Directory = serde_json::from_str(
            r#"{"keyChange":"k","meta":{"externalAccountRequired":false,"profiles":{"default":"x"},"termsOfService":"t"},
                "newAccount":"a","newNonce":"n","newOrder":"o","renewalInfo":"r","revokeCert":"v"}"#,
        )
        .unwrap();
        assert_eq!(d.renewal_info.as_deref(), Some("r"));
        let a: Authorization = serde_json::from_str(
            r#"{"status":"pending","identifier":{"type":"dns","value":"a.test"},"expires":"x",
                "challenges":[{"type":"http-01","url":"u","token":"t","status":"pending"}]}"#,
        )
        .unwrap();
        assert_eq!(a.challenges[0].kind, "http-01");
        let r: RenewalInfo = serde_json::from_str(
            r#"{"suggestedWindow":{"start":"2025-01-01T00:00:00Z","end":"2025-01-02T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!(r.suggested_window.end, "2025-01-02T00:00:00Z");
        assert!(
            serde_json::from_str::<Order>(r#"{"status":"x"}"#).is_err(),
            "finalize is required"
        );
    }
}

//! ACME Renewal Information (RFC 9773): the certificate's ARI identifier, the CA's suggested
//! window, and the moment tlsgate picks in it; plus what a certificate says about itself
//! (validity) for the lifetime-based fallback.

use crate::b64;
use crate::error::AcmeError;
use crate::http::HttpClient;
use crate::time::parse_rfc3339;
use crate::types::RenewalInfo;
use http::Method;
use x509_parser::extensions::ParsedExtension;

/// What the scheduler needs to know about a served certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    /// notBefore, Unix seconds.
    pub not_before: i64,
    /// notAfter, Unix seconds.
    pub not_after: i64,
    /// The RFC 9773 identifier (`base64url(AKI keyIdentifier).base64url(serial)`), when the
    /// certificate has an authority key identifier.
    pub ari_id: Option<String>,
    /// Issuer equals subject (tlsgate's placeholder before the first issuance).
    pub self_signed: bool,
}

/// Reads the leaf (first certificate) of a DER chain's first element.
pub fn facts(leaf_der: &[u8]) -> Result<CertFacts, AcmeError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(leaf_der).map_err(|e| AcmeError::Malformed(format!("certificate: {e}")))?;
    let tbs = &cert.tbs_certificate;
    let aki = tbs.extensions().iter().find_map(|e| match e.parsed_extension() {
        ParsedExtension::AuthorityKeyIdentifier(aki) => aki.key_identifier.as_ref().map(|k| k.0.to_vec()),
        _ => None,
    });
    Ok(CertFacts {
        not_before: tbs.validity.not_before.timestamp(),
        not_after: tbs.validity.not_after.timestamp(),
        ari_id: aki.map(|k| format!("{}.{}", b64::encode(&k), b64::encode(tbs.raw_serial()))),
        self_signed: tbs.issuer.as_raw() == tbs.subject.as_raw(),
    })
}

/// The lifetime-based renewal moment: when `fraction` of the validity has passed.
pub fn fallback_renew_at(f: &CertFacts, fraction: f64) -> i64 {
    let lifetime = (f.not_after - f.not_before).max(0) as f64;
    f.not_before + (lifetime * fraction.clamp(0.0, 1.0)) as i64
}

/// A CA's window, Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
}

impl Window {
    /// A moment in the window, uniformly spread by `unit` in [0, 1) (RFC 9773 §4.2 asks clients
    /// to pick at random so a CA's customers do not all come at once).
    pub fn pick(&self, unit: f64) -> i64 {
        self.start + ((self.end - self.start).max(0) as f64 * unit.clamp(0.0, 1.0)) as i64
    }
}

/// Parses a renewalInfo answer's window; None when malformed or end before start.
pub fn window(info: &RenewalInfo) -> Option<Window> {
    let start = parse_rfc3339(&info.suggested_window.start)?;
    let end = parse_rfc3339(&info.suggested_window.end)?;
    (end >= start).then_some(Window { start, end })
}

/// GETs the renewalInfo of `ari_id` (unauthenticated); the window and `Retry-After` seconds.
pub async fn fetch(http: &HttpClient, base: &str, ari_id: &str) -> Result<(Window, Option<u64>), AcmeError> {
    let url = format!("{}/{ari_id}", base.trim_end_matches('/'));
    let resp = crate::client::check(http.send(Method::GET, &url, None).await?)?;
    let info: RenewalInfo = crate::client::parse(&resp)?;
    let w = window(&info).ok_or_else(|| AcmeError::Malformed("renewalInfo window".into()))?;
    if let Some(why) = &info.explanation_url {
        tracing::info!(ari_id, explanation = %why, "the CA explains its renewal window");
    }
    Ok((w, resp.retry_after()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::{generate_key, self_signed, KeyKind};

    #[test]
    fn self_signed_facts_and_fallback() {
        let key = generate_key(KeyKind::EcdsaP256).unwrap();
        let cert = self_signed(&["a.test".into()], &key, 3 * 3600, vec![]).unwrap();
        let f = facts(&cert.to_der().unwrap()).unwrap();
        assert!(f.self_signed);
        assert_eq!(f.not_after - f.not_before, 4 * 3600);
        assert_eq!(fallback_renew_at(&f, 0.5), f.not_before + 2 * 3600);
        assert!(facts(b"\x30\x03\x02\x01\x01").is_err());
    }

    #[test]
    fn window_parsing_and_pick() {
        let info: RenewalInfo = serde_json::from_str(
            r#"{"suggestedWindow":{"start":"1970-01-01T00:00:10Z","end":"1970-01-01T00:00:20Z"}}"#,
        )
        .unwrap();
        let w = window(&info).unwrap();
        assert_eq!((w.pick(0.0), w.pick(0.5), w.pick(7.0)), (10, 15, 20));
        let backwards: RenewalInfo = serde_json::from_str(
            r#"{"suggestedWindow":{"start":"1970-01-01T00:00:20Z","end":"1970-01-01T00:00:10Z"}}"#,
        )
        .unwrap();
        assert!(window(&backwards).is_none());
    }
}

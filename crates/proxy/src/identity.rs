//! A client certificate's identity on its way to the origin (`[site.client_auth]`): the site's
//! two header names (built once per configuration generation), the connection's verified
//! identity as header values (built once per connection, after the handshake), and the one step
//! a forwarded request takes: both names removed from what the client sent, whatever it sent,
//! then set from the connection's certificate when it has a verified one. A client can never
//! forge an identity, with or without a certificate of its own.
//!
//! A leaf: `upstream::forwarding` and `context` use it; it imports neither. A request of a site
//! without `[site.client_auth]` pays one `Option` check; a request with an identity clones two
//! `HeaderValue`s (reference counts, no copy of the text).

use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;
use tlsgate_config::ClientAuthConfig;

/// The header names a site forwards the identity in (`identity_header`, `fingerprint_header`).
#[derive(Debug, Clone)]
pub struct IdentityHeaders {
    subject: HeaderName,
    fingerprint: HeaderName,
}

impl IdentityHeaders {
    /// The names of a site's `[site.client_auth]` table (any mode: with `off`, the names are still
    /// removed from requests). None when a name is not a header name (validation refuses that).
    pub fn from_config(config: &ClientAuthConfig) -> Option<Self> {
        Some(Self {
            subject: HeaderName::from_bytes(config.identity_header.as_bytes()).ok()?,
            fingerprint: HeaderName::from_bytes(config.fingerprint_header.as_bytes()).ok()?,
        })
    }
}

/// A connection's verified client certificate, ready to forward and to log.
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    /// The subject (RFC 4514), for the access log.
    pub subject: Arc<str>,
    subject_value: Option<HeaderValue>,
    fingerprint_value: Option<HeaderValue>,
}

impl ClientIdentity {
    /// From what the TLS layer read of the certificate (printable ASCII, so valid header values).
    pub fn new(identity: tlsgate_tls::ClientIdentity) -> Self {
        Self {
            subject_value: HeaderValue::from_str(&identity.subject).ok(),
            fingerprint_value: HeaderValue::from_str(&identity.sha256).ok(),
            subject: Arc::from(identity.subject),
        }
    }
}

/// What forwarding one request needs: the site's names and the connection's identity, if any.
#[derive(Debug, Clone, Copy)]
pub struct IdentityHop<'a> {
    /// The site's header names.
    pub names: &'a IdentityHeaders,
    /// The connection's verified identity; None when it presented no certificate.
    pub identity: Option<&'a ClientIdentity>,
}

impl IdentityHop<'_> {
    /// Removes every field of both names the client sent, then sets them from the identity.
    pub fn apply(&self, headers: &mut HeaderMap) {
        headers.remove(&self.names.subject);
        headers.remove(&self.names.fingerprint);
        let Some(id) = self.identity else { return };
        if let Some(v) = &id.subject_value {
            headers.insert(self.names.subject.clone(), v.clone());
        }
        if let Some(v) = &id.fingerprint_value {
            headers.insert(self.names.fingerprint.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> IdentityHeaders {
        let text = "[[site]]\nname = \"s\"\nserver_names = [\"s\"]\ncertificate = []\n[site.client_auth]\n";
        let config = tlsgate_config::parse(text).unwrap();
        IdentityHeaders::from_config(config.sites[0].client_auth.as_ref().unwrap()).unwrap()
    }

    fn forged() -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in [
            ("x-client-cert-subject", "CN=admin"),
            ("X-Client-Cert-Subject", "CN=root"),
            ("x-client-cert-sha256", "00"),
            ("x-kept", "1"),
        ] {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_static(v),
            );
        }
        m
    }

    #[test]
    fn forged_headers_are_removed_without_a_certificate() {
        let names = names();
        let mut m = forged();
        IdentityHop {
            names: &names,
            identity: None,
        }
        .apply(&mut m);
        assert!(!m.contains_key("x-client-cert-subject"));
        assert!(!m.contains_key("x-client-cert-sha256"));
        assert_eq!(m["x-kept"], "1");
    }

    #[test]
    fn a_verified_identity_replaces_every_forged_field() {
        let names = names();
        let id = ClientIdentity::new(tlsgate_tls::ClientIdentity {
            subject: "O=tlsgate,CN=alice".into(),
            sha256: "ab".repeat(32),
        });
        let mut m = forged();
        IdentityHop {
            names: &names,
            identity: Some(&id),
        }
        .apply(&mut m);
        assert_eq!(m.get_all("x-client-cert-subject").iter().count(), 1);
        assert_eq!(m["x-client-cert-subject"], "O=tlsgate,CN=alice");
        assert_eq!(m["x-client-cert-sha256"], "ab".repeat(32).as_str());
        assert_eq!(&*id.subject, "O=tlsgate,CN=alice");
    }
}

//! ACME challenge answers the gateway serves, shared by every configuration generation (they
//! live in [`crate::context::SessionState`]): HTTP-01 key authorizations by token (the redirect
//! listener answers `/.well-known/acme-challenge/<token>`) and TLS-ALPN-01 certificates by name
//! (RFC 8737: a ClientHello offering only `acme-tls/1` for that name gets the certificate).
//!
//! In a cluster, the node that orders also publishes its answers to the shared store, and every
//! other node asks the store for a token or name it does not hold ([`ChallengeStore`], installed
//! by `tlsgate serve`): the CA's validation may reach any node behind the balancer.

use boring::pkey::{PKey, Private};
use boring::ssl::{AlpnError, ClientHello, ExtensionType, NameType, SslContextBuilder};
use boring::x509::X509;
use futures_util::future::BoxFuture;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A TLS-ALPN-01 challenge certificate and its key.
pub type ChallengeCert = (X509, PKey<Private>);

/// Challenge answers other nodes of the cluster published (the shared store).
pub trait ChallengeStore: Send + Sync + 'static {
    /// The key authorization of HTTP-01 `token`, if a node published one.
    fn http(&self, token: String) -> BoxFuture<'static, Option<String>>;
    /// The TLS-ALPN-01 certificate and key for `name`, if a node published one.
    fn alpn(&self, name: String) -> BoxFuture<'static, Option<ChallengeCert>>;
}

/// The ALPN protocol of TLS-ALPN-01.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The HTTP-01 path prefix.
pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// Pending challenge answers.
#[derive(Default)]
pub struct AcmeChallenges {
    http: RwLock<HashMap<String, String>>,
    alpn: RwLock<HashMap<String, (X509, PKey<Private>)>>,
    /// HTTP-01 requests answered with a key authorization.
    pub http_answered: AtomicU64,
    /// TLS-ALPN-01 handshakes given a challenge certificate.
    pub alpn_answered: AtomicU64,
    /// Answers other nodes published (set once, when the gateway joins a cluster with a store).
    remote: OnceLock<Arc<dyn ChallengeStore>>,
}

impl std::fmt::Debug for AcmeChallenges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AcmeChallenges(http: {}, alpn: {})",
            self.http.read().len(),
            self.alpn.read().len()
        )
    }
}

impl AcmeChallenges {
    /// Answers HTTP-01 `token` with `key_authorization`.
    pub fn set_http(&self, token: &str, key_authorization: &str) {
        self.http
            .write()
            .insert(token.to_string(), key_authorization.to_string());
    }

    /// Stops answering `token`.
    pub fn remove_http(&self, token: &str) {
        self.http.write().remove(token);
    }

    /// The key authorization for a request path under [`HTTP01_PREFIX`], if one is pending.
    pub fn http_answer(&self, path: &str) -> Option<String> {
        let token = path.strip_prefix(HTTP01_PREFIX)?;
        let answer = self.http.read().get(token).cloned()?;
        self.http_answered.fetch_add(1, Ordering::Relaxed);
        Some(answer)
    }

    /// Serves `cert` to TLS-ALPN-01 validations of `name`.
    pub fn set_alpn(&self, name: &str, cert: X509, key: PKey<Private>) {
        self.alpn.write().insert(name.to_ascii_lowercase(), (cert, key));
    }

    /// Stops serving `name`'s challenge certificate.
    pub fn remove_alpn(&self, name: &str) {
        self.alpn.write().remove(&name.to_ascii_lowercase());
    }

    /// Looks up answers other nodes published from now on (once per process).
    pub fn set_remote(&self, store: Arc<dyn ChallengeStore>) {
        let _ = self.remote.set(store);
    }

    /// The HTTP-01 key authorization for a request path under [`HTTP01_PREFIX`]: this node's,
    /// or else one another node published (at most `wait` for the store).
    pub async fn http_answer_anywhere(&self, path: &str, wait: std::time::Duration) -> Option<String> {
        if let Some(answer) = self.http_answer(path) {
            return Some(answer);
        }
        let token = path.strip_prefix(HTTP01_PREFIX)?;
        let remote = self.remote.get()?.clone();
        let answer = tokio::time::timeout(wait, remote.http(token.to_string()))
            .await
            .ok()
            .flatten()?;
        self.http_answered.fetch_add(1, Ordering::Relaxed);
        Some(answer)
    }

    /// For a hello that offers only `acme-tls/1` and names a host this node holds no challenge
    /// for: the lookup of another node's challenge certificate (counted when it finds one).
    pub fn remote_alpn_answer(
        self: &Arc<Self>,
        hello: &ClientHello<'_>,
    ) -> Option<BoxFuture<'static, Option<ChallengeCert>>> {
        let name = acme_tls_name(hello)?;
        let remote = self.remote.get()?.clone();
        let me = self.clone();
        Some(Box::pin(async move {
            let answer = remote.alpn(name).await?;
            me.alpn_answered.fetch_add(1, Ordering::Relaxed);
            Some(answer)
        }))
    }

    /// The challenge certificate for a hello that offers only `acme-tls/1`, for a name with a
    /// pending challenge.
    pub fn alpn_answer(&self, hello: &ClientHello<'_>) -> Option<(X509, PKey<Private>)> {
        let name = acme_tls_name(hello)?;
        let answer = self.alpn.read().get(&name).cloned()?;
        self.alpn_answered.fetch_add(1, Ordering::Relaxed);
        Some(answer)
    }
}

/// The name a TLS-ALPN-01 validation asks for: a hello offering exactly `acme-tls/1`.
fn acme_tls_name(hello: &ClientHello<'_>) -> Option<String> {
    let alpn = hello.get_extension(ExtensionType::APPLICATION_LAYER_PROTOCOL_NEGOTIATION)?;
    if !offers_only_acme_tls(alpn) {
        return None;
    }
    Some(
        hello
            .servername(NameType::HOST_NAME)?
            .trim_end_matches('.')
            .to_ascii_lowercase(),
    )
}

/// Whether an ALPN extension body (RFC 7301: u16 length, then u8-length names) is exactly the
/// list `["acme-tls/1"]`.
pub fn offers_only_acme_tls(ext: &[u8]) -> bool {
    let Some((len, rest)) = ext.split_first_chunk::<2>() else {
        return false;
    };
    usize::from(u16::from_be_bytes(*len)) == rest.len()
        && rest.first().map(|&n| usize::from(n)) == Some(ACME_TLS_ALPN.len())
        && &rest[1..] == ACME_TLS_ALPN
}

/// Makes `b` the challenge context: the certificate, its key, and `acme-tls/1` selected.
pub fn configure(
    b: &mut SslContextBuilder,
    cert: &X509,
    key: &boring::pkey::PKeyRef<Private>,
) -> Result<(), boring::error::ErrorStack> {
    b.set_certificate(cert)?;
    b.set_private_key(key)?;
    b.set_alpn_select_callback(|_ssl, client| {
        if offers_only_acme_tls_list(client) {
            Ok(&client[1..])
        } else {
            Err(AlpnError::NOACK)
        }
    });
    Ok(())
}

/// Like [`offers_only_acme_tls`] for the bare protocol list (no u16 length).
fn offers_only_acme_tls_list(list: &[u8]) -> bool {
    list.first().map(|&n| usize::from(n)) == Some(ACME_TLS_ALPN.len()) && &list[1..] == ACME_TLS_ALPN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_extension_must_be_exactly_acme_tls() {
        assert!(offers_only_acme_tls(b"\x00\x0b\x0aacme-tls/1"));
        assert!(!offers_only_acme_tls(b"\x00\x0e\x0aacme-tls/1\x02h2"));
        assert!(!offers_only_acme_tls(b"\x00\x03\x02h2"));
        assert!(!offers_only_acme_tls(b"\x00\x0b\x0aacme-tls/"));
        assert!(!offers_only_acme_tls(b"\x00"));
        assert!(!offers_only_acme_tls(b""));
        assert!(offers_only_acme_tls_list(b"\x0aacme-tls/1"));
        assert!(!offers_only_acme_tls_list(b"\x02h2"));
    }

    #[test]
    fn http_answers_only_pending_tokens() {
        let c = AcmeChallenges::default();
        c.set_http("tok", "tok.thumb");
        assert_eq!(
            c.http_answer("/.well-known/acme-challenge/tok").as_deref(),
            Some("tok.thumb")
        );
        assert_eq!(c.http_answer("/.well-known/acme-challenge/other"), None);
        assert_eq!(c.http_answer("/tok"), None);
        c.remove_http("tok");
        assert_eq!(c.http_answer("/.well-known/acme-challenge/tok"), None);
        assert_eq!(c.http_answered.load(Ordering::Relaxed), 1);
    }
}

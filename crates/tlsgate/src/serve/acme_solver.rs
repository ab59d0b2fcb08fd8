//! The gateway's answers to ACME challenges: HTTP-01 tokens for the redirect listener and
//! TLS-ALPN-01 certificates for certificate selection (both in the session state every
//! generation shares), DNS-01 through the configured hook command.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_acme::{AcmeError, ChallengeKind, Solver};
use tlsgate_tls::acme_challenges::AcmeChallenges;

/// How long the DNS hook may take (publishing a record may wait for propagation).
const DNS_HOOK_TIMEOUT: Duration = Duration::from_secs(120);

/// Answers challenges on this gateway.
pub struct GatewaySolver {
    /// The shared answers.
    pub challenges: Arc<AcmeChallenges>,
    /// `acme.dns_hook`.
    pub dns_hook: Option<PathBuf>,
    /// In a cluster: where the answers are published for the other nodes.
    pub cluster: Option<Arc<crate::serve::acme_cluster::AcmeCluster>>,
}

impl GatewaySolver {
    async fn dns_hook(&self, action: &str, name: &str, key_authorization: &str) -> Result<(), AcmeError> {
        let hook = self
            .dns_hook
            .as_ref()
            .ok_or_else(|| AcmeError::Solver("dns-01 without acme.dns_hook".into()))?;
        let digest = boring::hash::hash(boring::hash::MessageDigest::sha256(), key_authorization.as_bytes())
            .map_err(AcmeError::Crypto)?;
        let record = format!("_acme-challenge.{}", name.trim_start_matches("*."));
        let value = tlsgate_acme::b64::encode(&digest);
        let run = tokio::process::Command::new(hook)
            .args([action, &record, &value])
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(DNS_HOOK_TIMEOUT, run)
            .await
            .map_err(|_| AcmeError::Solver(format!("{}: no exit within {DNS_HOOK_TIMEOUT:?}", hook.display())))?
            .map_err(|e| AcmeError::Solver(format!("{}: {e}", hook.display())))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(AcmeError::Solver(format!(
                "{} {action} {record}: {}: {}",
                hook.display(),
                out.status,
                stderr.trim()
            )));
        }
        Ok(())
    }
}

/// The name under which another node looks a challenge up (DNS-01 needs no node to answer).
fn shared_name(kind: ChallengeKind, name: &str, token: &str) -> Option<String> {
    match kind {
        ChallengeKind::Http01 => Some(format!("http:{token}")),
        ChallengeKind::TlsAlpn01 => Some(format!("alpn:{}", name.to_ascii_lowercase())),
        ChallengeKind::Dns01 => None,
    }
}

impl Solver for GatewaySolver {
    async fn present(
        &self,
        kind: ChallengeKind,
        name: &str,
        token: &str,
        key_authorization: &str,
    ) -> Result<(), AcmeError> {
        match kind {
            ChallengeKind::Http01 => self.challenges.set_http(token, key_authorization),
            ChallengeKind::TlsAlpn01 => {
                let (cert, key) = tlsgate_acme::alpn::challenge_certificate(name, key_authorization)?;
                self.challenges.set_alpn(name, cert, key);
            }
            ChallengeKind::Dns01 => self.dns_hook("set", name, key_authorization).await?,
        }
        // The CA's validation may reach another node: publish before the CA is told to look.
        if let (Some(cluster), Some(what)) = (&self.cluster, shared_name(kind, name, token)) {
            cluster.publish_challenge(&what, Some(key_authorization)).await;
        }
        Ok(())
    }

    async fn cleanup(&self, kind: ChallengeKind, name: &str, token: &str, key_authorization: &str) {
        if let (Some(cluster), Some(what)) = (&self.cluster, shared_name(kind, name, token)) {
            cluster.publish_challenge(&what, None).await;
        }
        match kind {
            ChallengeKind::Http01 => self.challenges.remove_http(token),
            ChallengeKind::TlsAlpn01 => self.challenges.remove_alpn(name),
            ChallengeKind::Dns01 => {
                if let Err(e) = self.dns_hook("clear", name, key_authorization).await {
                    tracing::warn!(name, error = %e, "ACME DNS-01 record not removed");
                }
            }
        }
    }
}

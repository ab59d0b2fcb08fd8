//! ACME in a cluster, through its shared store (Redis or Memcached; `[cluster]`):
//!
//! - **One order per certificate**: a node orders only while it holds the certificate's lease
//!   (`acme:lease:<site>:<key type>`, written only if absent, with a TTL of `acme.lease`,
//!   renewed every third of it while the holder lives). A node that dies mid-order stops
//!   renewing it, and another node takes over once it lapses.
//! - **The result for everyone**: the issued chain and key are stored sealed under the cluster
//!   secret (AES-256-GCM, bound to the entry's name), and every node installs a stored
//!   certificate newer than the one it serves, without a restart (the same verified install path
//!   as its own orders).
//! - **Challenges answerable by any node**: the ordering node publishes each HTTP-01 and
//!   TLS-ALPN-01 key authorization; a node asked for a token or name it does not hold looks it
//!   up ([`ChallengeStore`]) and answers (a TLS-ALPN-01 certificate is made from the key
//!   authorization on the spot: no key crosses the store).

use std::sync::Arc;
use std::time::Duration;
use tlsgate_cluster::backend::{Backend, StoreError};
use tlsgate_cluster::seal::Sealer;
use tlsgate_cluster::ClusterStore;
use tlsgate_tls::acme_challenges::ChallengeStore;
use tlsgate_tls::secret::ClusterSecret;

/// How long a published challenge answer is kept (an order's validation is over long before).
const CHALLENGE_TTL: Duration = Duration::from_secs(600);
/// How long a published certificate is kept: Memcached reads TTLs above 30 days as dates, and
/// nodes adopt a new certificate within a minute anyway.
const CERTIFICATE_TTL: Duration = Duration::from_secs(29 * 24 * 3600);
/// "Gone": the TTL that releases a lease or withdraws an answer (the backends have no delete).
const GONE: Duration = Duration::from_secs(1);

/// A store lookup a handshake or a request can await.
type Lookup<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Option<T>> + Send + 'static>>;

/// This node's handle on the cluster's ACME state.
pub struct AcmeCluster {
    backend: Arc<dyn Backend>,
    prefix: String,
    sealer: Arc<Sealer>,
    /// Written into the leases this node holds.
    node: String,
}

impl std::fmt::Debug for AcmeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AcmeCluster({})", self.node)
    }
}

/// The entry name of a certificate slot's lease and stored certificate.
fn slot_name(site: &str, key_type: &str) -> String {
    format!("{site}:{key_type}")
}

impl AcmeCluster {
    /// The cluster's ACME state in `store`, sealed under the first of `secrets`.
    pub fn new(store: &ClusterStore, secrets: &[Arc<ClusterSecret>]) -> Arc<Self> {
        let (backend, prefix) = store.backend();
        let mut id = [0u8; 8];
        boring::rand::rand_bytes(&mut id).expect("BoringSSL's random generator");
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let node = format!(
            "{}/{}/{}",
            host.trim(),
            std::process::id(),
            id.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        Arc::new(Self {
            backend,
            prefix: prefix.to_string(),
            sealer: Arc::new(Sealer::new(secrets)),
            node,
        })
    }

    fn key(&self, what: &str) -> String {
        format!("{}acme:{what}", self.prefix)
    }

    fn seal(&self, name: &str, value: &[u8]) -> Vec<u8> {
        self.sealer.seal(format!("acme:{name}").as_bytes(), value)
    }

    fn open(&self, name: &str, entry: &[u8]) -> Option<Vec<u8>> {
        match self.sealer.open(format!("acme:{name}").as_bytes(), entry) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(entry = name, error = %e, "ACME entry in the cluster store refused (another cluster secret, or forged)");
                None
            }
        }
    }

    /// Takes the lease of a certificate slot for `ttl` (or keeps it, when this node holds it).
    /// `Ok(false)`: another node holds it.
    pub async fn acquire(&self, site: &str, key_type: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = self.key(&format!("lease:{}", slot_name(site, key_type)));
        if self
            .backend
            .add(key.clone(), self.node.clone().into_bytes(), ttl)
            .await?
        {
            return Ok(true);
        }
        self.renew(site, key_type, ttl).await
    }

    /// Extends this node's lease; false when it is not (or no longer) this node's.
    pub async fn renew(&self, site: &str, key_type: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = self.key(&format!("lease:{}", slot_name(site, key_type)));
        let holder = self.backend.get(key.clone()).await?;
        if holder.as_deref() != Some(self.node.as_bytes()) {
            return Ok(false);
        }
        self.backend.set(key, self.node.clone().into_bytes(), ttl).await?;
        Ok(true)
    }

    /// Gives the lease up (when this node holds it), so another node may order at once.
    pub async fn release(&self, site: &str, key_type: &str) {
        let key = self.key(&format!("lease:{}", slot_name(site, key_type)));
        if let Ok(Some(holder)) = self.backend.get(key.clone()).await {
            if holder == self.node.as_bytes() {
                let _ = self.backend.set(key, b"released".to_vec(), GONE).await;
            }
        }
    }

    /// Stores an issued certificate (chain and key PEM) for the other nodes, sealed.
    pub async fn publish_certificate(
        &self,
        site: &str,
        key_type: &str,
        chain_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<(), StoreError> {
        let name = format!("cert:{}", slot_name(site, key_type));
        let len = u32::try_from(chain_pem.len()).unwrap_or(u32::MAX);
        let mut plain = Vec::with_capacity(4 + chain_pem.len() + key_pem.len());
        plain.extend_from_slice(&len.to_be_bytes());
        plain.extend_from_slice(chain_pem);
        plain.extend_from_slice(key_pem);
        let sealed = self.seal(&name, &plain);
        self.backend.set(self.key(&name), sealed, CERTIFICATE_TTL).await
    }

    /// The certificate stored for a slot: (chain PEM, key PEM).
    pub async fn certificate(&self, site: &str, key_type: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>, StoreError> {
        let name = format!("cert:{}", slot_name(site, key_type));
        let Some(entry) = self.backend.get(self.key(&name)).await? else {
            return Ok(None);
        };
        let Some(plain) = self.open(&name, &entry) else {
            return Ok(None);
        };
        let Some((len, rest)) = plain.split_first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > rest.len() {
            return Ok(None);
        }
        let (chain, key) = rest.split_at(len);
        Ok(Some((chain.to_vec(), key.to_vec())))
    }

    /// Publishes (or, with `None`, withdraws) the key authorization of a challenge: `http:TOKEN`
    /// or `alpn:NAME`.
    pub async fn publish_challenge(&self, what: &str, key_authorization: Option<&str>) {
        let name = format!("challenge:{what}");
        let (value, ttl) = match key_authorization {
            Some(k) => (self.seal(&name, k.as_bytes()), CHALLENGE_TTL),
            None => (Vec::new(), GONE),
        };
        if let Err(e) = self.backend.set(self.key(&name), value, ttl).await {
            tracing::warn!(challenge = what, error = %e, "ACME challenge answer not shared through the cluster store");
        }
    }

    /// Looks up a published key authorization (`http:TOKEN`, `alpn:NAME`).
    fn challenge(&self, what: String) -> Lookup<String> {
        let name = format!("challenge:{what}");
        let (backend, sealer, key) = (self.backend.clone(), self.sealer.clone(), self.key(&name));
        Box::pin(async move {
            let entry = backend.get(key).await.ok()??;
            if entry.is_empty() {
                return None;
            }
            let plain = sealer.open(format!("acme:{name}").as_bytes(), &entry).ok()?;
            String::from_utf8(plain).ok()
        })
    }
}

impl ChallengeStore for AcmeCluster {
    fn http(&self, token: String) -> Lookup<String> {
        self.challenge(format!("http:{token}"))
    }

    fn alpn(&self, name: String) -> Lookup<tlsgate_tls::acme_challenges::ChallengeCert> {
        let lookup = self.challenge(format!("alpn:{name}"));
        Box::pin(async move {
            let key_authorization = lookup.await?;
            tlsgate_acme::alpn::challenge_certificate(&name, &key_authorization).ok()
        })
    }
}

//! The renewal manager: one task per ACME certificate (site × key type) that decides when to
//! order (at once for a placeholder; in the CA's renewal-information window, RFC 9773; else
//! when `acme.renew_at` of the lifetime has passed), orders one certificate at a time through
//! the shared account, installs it without a restart, and backs off after failures (doubling
//! from `retry_min` to `retry_max`, never sooner than the CA's `Retry-After`). Tasks for sites
//! added by a reload start within seconds; a task whose site left the configuration ends.
//!
//! In a cluster with a shared store (`acme_cluster`), a certificate is ordered only by the node
//! that holds its lease; the holder keeps it through its retries (renewing it in the background)
//! and gives it up after [`LEASE_FAILURES`] failed orders in a row, so that another node may try.
//! Every node installs a newer certificate it finds in the store, checked every
//! [`CLUSTER_SYNC`].

use crate::serve::acme::{self, CertSlot};
use crate::serve::acme_cluster::AcmeCluster;
use crate::serve::acme_metrics::{metrics, CertLabels, ChallengeLabels, ClusterLabels, OrderLabels};
use crate::serve::acme_solver::GatewaySolver;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tlsgate_acme::ari::{self, CertFacts};
use tlsgate_acme::{Account, AccountOptions, AcmeError, ChallengeKind, OrderRequest};
use tlsgate_config::{AcmeConfig, Config};
use tlsgate_error::Classify;
use tlsgate_keyless::new_key::{NewKey, NewKeyKind};
use tlsgate_proxy::Gateway;

/// How often the manager looks for ACME sites a reload added.
const RECONCILE: Duration = Duration::from_secs(2);
/// In a cluster: how often a node looks for a certificate another node stored.
const CLUSTER_SYNC: Duration = Duration::from_secs(30);
/// In a cluster: failed orders in a row after which the lease holder lets another node try.
const LEASE_FAILURES: u32 = 3;

struct Shared {
    cfg: AcmeConfig,
    gateway: Arc<Gateway>,
    solver: GatewaySolver,
    key: Arc<tlsgate_acme::jws::AccountKey>,
    account: tokio::sync::Mutex<Option<Arc<Account>>>,
    /// One order at a time per process.
    ordering: tokio::sync::Mutex<()>,
    running: Mutex<HashSet<(String, String)>>,
    /// Key-server clients of keyless ACME sites, by pool name.
    keyless_clients: Mutex<std::collections::HashMap<String, Arc<tlsgate_keyless::client::Client>>>,
    /// Coordination with the other nodes, in a cluster with a shared store.
    cluster: Option<Arc<AcmeCluster>>,
}

/// Starts the renewal manager on the current runtime when the configuration has `[acme]`.
pub fn start(
    config: &tlsgate_config::Config,
    gateway: &std::sync::Arc<tlsgate_proxy::Gateway>,
    cluster: Option<Arc<AcmeCluster>>,
) {
    if let Some(acme) = &config.acme {
        spawn(acme.clone(), gateway.clone(), cluster);
    }
}

/// Starts the manager on the current runtime.
pub fn spawn(cfg: AcmeConfig, gateway: Arc<Gateway>, cluster: Option<Arc<AcmeCluster>>) {
    let key = match acme::account_key(&cfg) {
        Ok(k) => Arc::new(k),
        Err(e) => {
            tracing::error!(kind = e.kind(), "ACME disabled: account key: {e}");
            return;
        }
    };
    let solver = GatewaySolver {
        challenges: gateway.sessions.acme.clone(),
        dns_hook: cfg.dns_hook.clone(),
        cluster: cluster.clone(),
    };
    let shared = Arc::new(Shared {
        cfg,
        gateway,
        solver,
        key,
        account: Default::default(),
        ordering: Default::default(),
        running: Default::default(),
        keyless_clients: Default::default(),
        cluster,
    });
    tokio::spawn(async move {
        loop {
            let config = shared.gateway.current().config.clone();
            for slot in acme::slots(&config) {
                let id = (slot.site.clone(), slot.key_type.clone());
                if shared.running.lock().expect("not poisoned").insert(id) {
                    tokio::spawn(run_slot(shared.clone(), slot));
                }
            }
            tokio::time::sleep(RECONCILE).await;
        }
    });
}

async fn run_slot(shared: Arc<Shared>, slot: CertSlot) {
    let labels = CertLabels {
        site: slot.site.clone(),
        key_type: slot.key_type.clone(),
    };
    let m = metrics();
    let mut failures: u32 = 0;
    let mut lease: Option<Lease> = None;
    let mut store_down_since: Option<std::time::Instant> = None;
    loop {
        let config = shared.gateway.current().config.clone();
        if !acme::slots(&config).contains(&slot) {
            shared
                .running
                .lock()
                .expect("not poisoned")
                .remove(&(slot.site.clone(), slot.key_type.clone()));
            if let Some(l) = lease.take() {
                l.release().await;
            }
            return;
        }
        if let Some(cluster) = &shared.cluster {
            adopt(&shared, cluster, &slot).await;
        }
        let now = tlsgate_acme::time::now();
        let facts = served_facts(&slot);
        if let Some(f) = &facts {
            m.expiry.get_or_create(&labels).set(f.not_after);
        }
        let issued = slot.issued() && facts.as_ref().is_some_and(|f| !f.self_signed);
        m.issued.get_or_create(&labels).set(i64::from(issued));
        let due = match &facts {
            Some(f) if issued => renewal_due(&shared, f).await,
            _ => now,
        };
        m.renewal.get_or_create(&labels).set(due);
        if due > now {
            let mut wait = Duration::from_secs((due - now) as u64).min(shared.cfg.check_interval.get());
            if shared.cluster.is_some() {
                wait = wait.min(CLUSTER_SYNC);
            }
            tokio::time::sleep(wait).await;
            continue;
        }
        // In a cluster, only the lease holder orders; the others wait for its certificate.
        if let (Some(cluster), None) = (&shared.cluster, &lease) {
            match Lease::take(cluster, &slot, shared.cfg.lease.get()).await {
                Ok(Some(held)) => lease = Some(held),
                Ok(None) => {
                    cluster_event("lease_busy");
                    tracing::debug!(
                        site = slot.site,
                        key_type = slot.key_type,
                        "another node orders this certificate"
                    );
                    tokio::time::sleep(shared.cfg.lease.get() / 3).await;
                    continue;
                }
                Err(e) => {
                    // The store may be connecting (start-up) or briefly gone: wait up to one
                    // lease for it before ordering alone (better one order too many than none).
                    let since = *store_down_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() < shared.cfg.lease.get() {
                        tracing::debug!(site = slot.site, error = %e, "cluster store unavailable; waiting for it before ordering");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                    cluster_event("store_unavailable");
                    tracing::warn!(site = slot.site, key_type = slot.key_type, error = %e, "cluster store unavailable for {:?}: ordering without the cluster's lease", since.elapsed());
                }
            }
            if lease.is_some() {
                store_down_since = None;
            }
        }
        let replaces = facts.filter(|_| issued).and_then(|f| f.ari_id);
        match order(&shared, &slot, &config, replaces).await {
            Ok((generation, chain_pem, key_pem)) => {
                if let Some(cluster) = &shared.cluster {
                    match cluster
                        .publish_certificate(&slot.site, &slot.key_type, &chain_pem, &key_pem)
                        .await
                    {
                        Ok(()) => cluster_event("published"),
                        Err(e) => {
                            tracing::warn!(site = slot.site, key_type = slot.key_type, error = %e, "the new certificate could not be stored for the other nodes; they will order their own")
                        }
                    }
                }
                if let Some(l) = lease.take() {
                    l.release().await;
                }
                failures = 0;
                m.failures.get_or_create(&labels).set(0);
                m.orders.get_or_create(&order_labels(&slot, "issued")).inc();
                tracing::info!(
                    site = slot.site,
                    key_type = slot.key_type,
                    generation,
                    "ACME certificate issued and installed"
                );
            }
            Err((kind, message, retry_after)) => {
                failures = failures.saturating_add(1);
                m.failures.get_or_create(&labels).set(i64::from(failures));
                m.orders.get_or_create(&order_labels(&slot, kind)).inc();
                if failures >= LEASE_FAILURES {
                    // Let another node try (its path to the CA or its DNS hook may work).
                    if let Some(l) = lease.take() {
                        l.release().await;
                    }
                }
                let wait = backoff(&shared.cfg, failures, retry_after);
                m.renewal
                    .get_or_create(&labels)
                    .set(tlsgate_acme::time::now() + wait.as_secs() as i64);
                tracing::error!(
                    site = slot.site,
                    key_type = slot.key_type,
                    kind,
                    failures,
                    retry_in = ?wait,
                    "ACME order failed; the current certificate keeps serving: {message}"
                );
                tokio::time::sleep(wait).await;
            }
        }
    }
}

fn cluster_event(event: &'static str) {
    metrics().cluster.get_or_create(&ClusterLabels { event }).inc();
}

/// A certificate slot's lease in the cluster's store, renewed in the background while held.
struct Lease {
    cluster: Arc<AcmeCluster>,
    site: String,
    key_type: String,
    renewer: tokio::task::JoinHandle<()>,
}

impl Lease {
    /// Takes the lease for `ttl` (renewed every third of it); `None` when another node holds it.
    async fn take(
        cluster: &Arc<AcmeCluster>,
        slot: &CertSlot,
        ttl: Duration,
    ) -> Result<Option<Self>, tlsgate_cluster::backend::StoreError> {
        if !cluster.acquire(&slot.site, &slot.key_type, ttl).await? {
            return Ok(None);
        }
        cluster_event("lease_acquired");
        tracing::info!(
            site = slot.site,
            key_type = slot.key_type,
            "ACME lease taken: this node orders the certificate"
        );
        let (c, site, key_type) = (cluster.clone(), slot.site.clone(), slot.key_type.clone());
        let renewer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 3).await;
                match c.renew(&site, &key_type, ttl).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(site, key_type, "ACME lease lost (it lapsed and another node took it)");
                        return;
                    }
                    Err(e) => tracing::warn!(site, key_type, error = %e, "ACME lease not renewed (store unavailable)"),
                }
            }
        });
        Ok(Some(Self {
            cluster: cluster.clone(),
            site: slot.site.clone(),
            key_type: slot.key_type.clone(),
            renewer,
        }))
    }

    /// Stops renewing and gives the lease up.
    async fn release(self) {
        self.renewer.abort();
        self.cluster.release(&self.site, &self.key_type).await;
        cluster_event("lease_released");
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Installs the certificate another node stored for `slot` when it is newer than the one served
/// (a placeholder, or an older notBefore).
async fn adopt(shared: &Shared, cluster: &AcmeCluster, slot: &CertSlot) {
    let stored = match cluster.certificate(&slot.site, &slot.key_type).await {
        Ok(Some(s)) => s,
        Ok(None) => return,
        Err(e) => {
            tracing::debug!(site = slot.site, error = %e, "cluster store unavailable: no shared certificate check");
            return;
        }
    };
    let leaf = boring::x509::X509::from_pem(&stored.0)
        .ok()
        .and_then(|c| c.to_der().ok())
        .and_then(|der| ari::facts(&der).ok());
    let Some(theirs) = leaf else { return };
    let newer = match served_facts(slot) {
        Some(ours) if slot.issued() && !ours.self_signed => theirs.not_before > ours.not_before,
        _ => true,
    };
    if !newer || theirs.not_after <= tlsgate_acme::time::now() {
        return;
    }
    let installed = if slot.keyless.is_some() {
        acme::install_keyless(&shared.gateway, slot, &stored.0, None)
    } else {
        acme::install(&shared.gateway, slot, &stored.0, &stored.1)
    };
    match installed {
        Ok(generation) => {
            cluster_event("adopted");
            tracing::info!(
                site = slot.site,
                key_type = slot.key_type,
                generation,
                "ACME certificate from another node of the cluster installed"
            );
        }
        Err(e) => {
            tracing::warn!(site = slot.site, key_type = slot.key_type, error = %e, "the certificate another node stored could not be installed")
        }
    }
}

fn order_labels(slot: &CertSlot, result: &str) -> OrderLabels {
    OrderLabels {
        site: slot.site.clone(),
        key_type: slot.key_type.clone(),
        result: result.to_string(),
    }
}

/// The wait after `failures` failed orders: doubling from `retry_min`, at most `retry_max`, and
/// never less than the CA's `Retry-After`.
pub fn backoff(cfg: &AcmeConfig, failures: u32, retry_after: Option<u64>) -> Duration {
    let min = cfg.retry_min.get();
    let doubled = min.saturating_mul(1u32 << failures.saturating_sub(1).min(20));
    let wait = doubled.min(cfg.retry_max.get());
    wait.max(Duration::from_secs(retry_after.unwrap_or(0)))
}

/// What the served certificate (issued or placeholder) says about itself.
fn served_facts(slot: &CertSlot) -> Option<CertFacts> {
    let path = if slot.issued() {
        slot.chain()
    } else {
        slot.placeholder_chain()
    };
    let pem = std::fs::read(&path).ok()?;
    let leaf = boring::x509::X509::from_pem(&pem).ok()?;
    ari::facts(&leaf.to_der().ok()?).ok()
}

/// When to renew an issued certificate: in the CA's ARI window when it offers one, else at
/// `renew_at` of its lifetime.
async fn renewal_due(shared: &Shared, f: &CertFacts) -> i64 {
    let fallback = ari::fallback_renew_at(f, shared.cfg.renew_at);
    let Some(id) = &f.ari_id else { return fallback };
    let Ok(account) = account(shared).await else {
        return fallback;
    };
    let Some(base) = account.directory.renewal_info.clone() else {
        return fallback;
    };
    match ari::fetch(account.http(), &base, id).await {
        Ok((window, _)) => window.pick(unit_random()),
        Err(e) => {
            tracing::warn!(
                kind = e.kind(),
                "ACME renewal information unavailable, using the lifetime: {e}"
            );
            fallback
        }
    }
}

fn unit_random() -> f64 {
    let mut b = [0u8; 4];
    if boring::rand::rand_bytes(&mut b).is_err() {
        return 0.5;
    }
    f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0)
}

async fn account(shared: &Shared) -> Result<Arc<Account>, AcmeError> {
    let mut slot = shared.account.lock().await;
    if let Some(a) = slot.as_ref() {
        return Ok(a.clone());
    }
    let eab = match (&shared.cfg.eab_key_id, &shared.cfg.eab_hmac_key) {
        (Some(id), Some(k)) => Some((
            id.clone(),
            tlsgate_acme::b64::decode(k).ok_or_else(|| AcmeError::Io("acme.eab_hmac_key is not base64url".into()))?,
        )),
        _ => None,
    };
    let options = AccountOptions {
        directory: shared.cfg.directory.clone(),
        contact: shared.cfg.contact.clone(),
        ca_bundle: shared.cfg.directory_ca.clone(),
        eab,
        timeout: Duration::from_secs(30),
    };
    let account = Arc::new(Account::register(&options, shared.key.clone()).await?);
    tracing::info!(
        account = account.kid(),
        directory = shared.cfg.directory,
        "ACME account ready"
    );
    *slot = Some(account.clone());
    Ok(account)
}

type OrderFailure = (&'static str, String, Option<u64>);

/// Orders, installs, and returns the new generation with the chain and key PEM installed.
async fn order(
    shared: &Shared,
    slot: &CertSlot,
    config: &Config,
    replaces: Option<String>,
) -> Result<(u64, Vec<u8>, Vec<u8>), OrderFailure> {
    let fail = |e: &dyn Classify| (e.kind(), e.to_string(), None);
    let _one = shared.ordering.lock().await;
    let account = match account(shared).await {
        Ok(a) => a,
        Err(e) => return Err((e.kind(), e.to_string(), e.retry_after())),
    };
    let site = config.sites.iter().find(|s| s.name == slot.site);
    let site_acme = site.and_then(|s| s.acme.clone()).unwrap_or_default();
    let challenges = if site_acme.challenges.is_empty() {
        &shared.cfg.challenges
    } else {
        &site_acme.challenges
    };
    // Keyless: the key server makes the key and the CSR; the key never exists here.
    let csr = match &slot.keyless {
        Some(k) => Some(keyless_csr(shared, config, slot, k).await?),
        None => None,
    };
    let spki = match &csr {
        Some(der) => Some(
            boring::x509::X509Req::from_der(der)
                .and_then(|r| r.public_key())
                .and_then(|k| k.public_key_to_der())
                .map_err(|e| ("acme_keyless_csr", format!("the key server's CSR: {e}"), None))?,
        ),
        None => None,
    };
    let request = OrderRequest {
        csr,
        names: acme::names(config, &slot.site),
        key: slot.key_kind(),
        challenges: challenges.iter().filter_map(|c| challenge_kind(c)).collect(),
        profile: site_acme.profile.or_else(|| shared.cfg.profile.clone()),
        replaces,
        poll_interval: Duration::from_secs(1),
        deadline: shared.cfg.order_timeout.get(),
    };
    tracing::info!(site = slot.site, key_type = slot.key_type, names = ?request.names, "ACME order");
    let before = account.bad_nonces.load(Ordering::Relaxed);
    let result = tlsgate_acme::order::issue(&account, &shared.solver, &request).await;
    let m = metrics();
    m.bad_nonces
        .inc_by(account.bad_nonces.load(Ordering::Relaxed).saturating_sub(before));
    let c = &shared.solver.challenges;
    for (challenge, n) in [("http-01", &c.http_answered), ("tls-alpn-01", &c.alpn_answered)] {
        let n = i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        m.answered.get_or_create(&ChallengeLabels { challenge }).set(n);
    }
    let issued = match result {
        Ok(i) => i,
        Err(e) => {
            if matches!(e, AcmeError::Transport(_)) {
                // The CA may have moved or restarted: fetch the directory and account again.
                *shared.account.lock().await = None;
            }
            return Err((e.kind(), e.to_string(), e.retry_after()));
        }
    };
    let generation = match &spki {
        Some(spki) => acme::install_keyless(&shared.gateway, slot, &issued.chain_pem, Some(spki)),
        None => acme::install(&shared.gateway, slot, &issued.chain_pem, &issued.key_pem),
    }
    .map_err(|e| fail(&e))?;
    Ok((generation, issued.chain_pem, issued.key_pem))
}

/// Asks the slot's key servers to create its key and answer a CSR for the site's names.
async fn keyless_csr(
    shared: &Shared,
    config: &Config,
    slot: &CertSlot,
    at: &acme::KeylessAt,
) -> Result<Vec<u8>, OrderFailure> {
    let failure = |kind: &'static str, message: String| (kind, message, None);
    let keyless = config
        .keyless
        .as_ref()
        .ok_or_else(|| failure("acme_keyless_config", "keyless ACME without [keyless]".into()))?;
    let servers = match &at.pool {
        Some(pool) => keyless
            .pools
            .iter()
            .find(|p| &p.name == pool)
            .map(|p| p.servers.clone())
            .ok_or_else(|| failure("acme_keyless_config", format!("no [[keyless.pool]] named {pool:?}")))?,
        None => at.servers.clone(),
    };
    let name = at.pool_name();
    let client = {
        let mut clients = shared.keyless_clients.lock().expect("not poisoned");
        match clients.get(&name) {
            Some(c) => c.clone(),
            None => {
                let c = tlsgate_keyless::client::Client::start(keyless, &name, &servers)
                    .map_err(|e| failure(e.kind(), e.to_string()))?;
                clients.insert(name.clone(), c.clone());
                c
            }
        }
    };
    let kind = match slot.key_kind() {
        tlsgate_acme::csr::KeyKind::EcdsaP256 => NewKeyKind::EcdsaP256,
        tlsgate_acme::csr::KeyKind::Rsa2048 => NewKeyKind::Rsa2048,
    };
    let names = acme::names(config, &slot.site)
        .iter()
        .map(|n| n.to_ascii_lowercase())
        .collect();
    let payload = tlsgate_keyless::new_key::encode(&NewKey { kind, names })
        .map_err(|e| failure("acme_keyless_names", e.to_string()))?;
    let csr = client
        .new_key(payload)
        .await
        .map_err(|e| failure(e.kind(), format!("key server: {e}")))?;
    tracing::info!(
        site = slot.site,
        key_type = slot.key_type,
        pool = name,
        "key created on the key servers for the order"
    );
    Ok(csr)
}

fn challenge_kind(name: &str) -> Option<ChallengeKind> {
    match name {
        "http-01" => Some(ChallengeKind::Http01),
        "tls-alpn-01" => Some(ChallengeKind::TlsAlpn01),
        "dns-01" => Some(ChallengeKind::Dns01),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_honours_retry_after() {
        let cfg = tlsgate_config::parse(
            "[acme]\ndirectory = \"https://x/d\"\nstate_dir = \"/tmp\"\nretry_min = \"10s\"\nretry_max = \"60s\"\n",
        )
        .unwrap()
        .acme
        .unwrap();
        let secs = |f, r| backoff(&cfg, f, r).as_secs();
        assert_eq!(
            (secs(1, None), secs(2, None), secs(3, None), secs(4, None)),
            (10, 20, 40, 60)
        );
        assert_eq!(secs(40, None), 60);
        assert_eq!(secs(1, Some(300)), 300);
    }
}

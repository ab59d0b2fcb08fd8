//! The renewal manager: one task per ACME certificate (site × key type) that decides when to
//! order (at once for a placeholder; in the CA's renewal-information window, RFC 9773; else
//! when `acme.renew_at` of the lifetime has passed), orders one certificate at a time through
//! the shared account, installs it without a restart, and backs off after failures (doubling
//! from `retry_min` to `retry_max`, never sooner than the CA's `Retry-After`). Tasks for sites
//! added by a reload start within seconds; a task whose site left the configuration ends.

use crate::serve::acme::{self, CertSlot};
use crate::serve::acme_metrics::{metrics, CertLabels, ChallengeLabels, OrderLabels};
use crate::serve::acme_solver::GatewaySolver;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tlsgate_acme::ari::{self, CertFacts};
use tlsgate_acme::{Account, AccountOptions, AcmeError, ChallengeKind, OrderRequest};
use tlsgate_config::{AcmeConfig, Config};
use tlsgate_error::Classify;
use tlsgate_proxy::Gateway;

/// How often the manager looks for ACME sites a reload added.
const RECONCILE: Duration = Duration::from_secs(2);

struct Shared {
    cfg: AcmeConfig,
    gateway: Arc<Gateway>,
    solver: GatewaySolver,
    key: Arc<tlsgate_acme::jws::AccountKey>,
    account: tokio::sync::Mutex<Option<Arc<Account>>>,
    /// One order at a time per process.
    ordering: tokio::sync::Mutex<()>,
    running: Mutex<HashSet<(String, String)>>,
}

/// Starts the renewal manager on the current runtime when the configuration has `[acme]`.
pub fn start(config: &tlsgate_config::Config, gateway: &std::sync::Arc<tlsgate_proxy::Gateway>) {
    if let Some(acme) = &config.acme {
        spawn(acme.clone(), gateway.clone());
    }
}

/// Starts the manager on the current runtime.
pub fn spawn(cfg: AcmeConfig, gateway: Arc<Gateway>) {
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
    };
    let shared = Arc::new(Shared {
        cfg,
        gateway,
        solver,
        key,
        account: Default::default(),
        ordering: Default::default(),
        running: Default::default(),
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
    loop {
        let config = shared.gateway.current().config.clone();
        if !acme::slots(&config).contains(&slot) {
            shared
                .running
                .lock()
                .expect("not poisoned")
                .remove(&(slot.site.clone(), slot.key_type.clone()));
            return;
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
            let wait = Duration::from_secs((due - now) as u64).min(shared.cfg.check_interval.get());
            tokio::time::sleep(wait).await;
            continue;
        }
        let replaces = facts.filter(|_| issued).and_then(|f| f.ari_id);
        match order(&shared, &slot, &config, replaces).await {
            Ok(generation) => {
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

async fn order(
    shared: &Shared,
    slot: &CertSlot,
    config: &Config,
    replaces: Option<String>,
) -> Result<u64, OrderFailure> {
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
    let request = OrderRequest {
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
    acme::install(&shared.gateway, slot, &issued.chain_pem, &issued.key_pem).map_err(|e| fail(&e))
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

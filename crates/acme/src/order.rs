//! One order from newOrder to the certificate (RFC 8555 §7.4): authorizations answered through a
//! [`Solver`] (the gateway's challenge responders), polled with the CA's `Retry-After`, then
//! a fresh key and CSR, finalize, and the PEM chain.

use crate::client::{parse, Account};
use crate::csr::{csr_der, generate_key, KeyKind};
use crate::error::AcmeError;
use crate::types::{Authorization, Order};
use serde_json::json;
use std::future::Future;
use std::time::{Duration, Instant};

/// A challenge type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChallengeKind {
    /// HTTP-01: a file under `/.well-known/acme-challenge/` on port 80.
    Http01,
    /// TLS-ALPN-01 (RFC 8737): a certificate for ALPN `acme-tls/1` on port 443.
    TlsAlpn01,
    /// DNS-01: a TXT record at `_acme-challenge.<name>`.
    Dns01,
}

impl ChallengeKind {
    /// The ACME name, e.g. `http-01`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChallengeKind::Http01 => "http-01",
            ChallengeKind::TlsAlpn01 => "tls-alpn-01",
            ChallengeKind::Dns01 => "dns-01",
        }
    }
}

/// Sets up and removes challenge answers.
pub trait Solver: Sync {
    /// Makes `name`'s challenge answerable: for HTTP-01 `token` → `key_authorization`, for
    /// TLS-ALPN-01 a certificate, for DNS-01 the TXT record (base64url SHA-256 of it).
    fn present(
        &self,
        kind: ChallengeKind,
        name: &str,
        token: &str,
        key_authorization: &str,
    ) -> impl Future<Output = Result<(), AcmeError>> + Send;
    /// Removes what `present` set up (errors are logged, not returned).
    fn cleanup(
        &self,
        kind: ChallengeKind,
        name: &str,
        token: &str,
        key_authorization: &str,
    ) -> impl Future<Output = ()> + Send;
}

/// What to order.
#[derive(Debug, Clone)]
pub struct OrderRequest {
    /// DNS names (`*.x` wildcards need DNS-01).
    pub names: Vec<String>,
    /// The certificate's key type.
    pub key: KeyKind,
    /// Challenge types to use, preferred first.
    pub challenges: Vec<ChallengeKind>,
    /// A certificate profile the CA offers (draft-aaron-acme-profiles), e.g. `shortlived`.
    pub profile: Option<String>,
    /// The ARI identifier of the certificate this one replaces (RFC 9773 §5).
    pub replaces: Option<String>,
    /// Poll interval when the CA sends no `Retry-After`.
    pub poll_interval: Duration,
    /// The longest the whole order may take.
    pub deadline: Duration,
    /// A CSR (DER) made elsewhere: a key server's, for a keyless certificate whose key never
    /// leaves it. No key is made here then, and [`Issued::key_pem`] is empty.
    pub csr: Option<Vec<u8>>,
}

/// An issued certificate.
#[derive(Debug)]
pub struct Issued {
    /// The PEM chain as the CA sent it (leaf first).
    pub chain_pem: Vec<u8>,
    /// The new private key, PKCS#8 PEM (empty when the CSR came from elsewhere).
    pub key_pem: Vec<u8>,
}

struct Answered {
    kind: ChallengeKind,
    name: String,
    token: String,
    key_authorization: String,
}

/// Orders, validates, finalizes and downloads one certificate.
pub async fn issue<S: Solver>(account: &Account, solver: &S, req: &OrderRequest) -> Result<Issued, AcmeError> {
    let started = Instant::now();
    let mut payload = json!({
        "identifiers": req.names.iter().map(|n| json!({"type": "dns", "value": n})).collect::<Vec<_>>(),
    });
    if let Some(p) = &req.profile {
        payload["profile"] = json!(p);
    }
    let mut with_replaces = payload.clone();
    if let Some(r) = &req.replaces {
        with_replaces["replaces"] = json!(r);
    }
    let new_order = account.directory.new_order.clone();
    let resp = match account.post(&new_order, Some(&with_replaces)).await {
        // A CA that refuses `replaces` (already replaced, unknown) still gets the order.
        Err(AcmeError::Problem { .. }) if req.replaces.is_some() => account.post(&new_order, Some(&payload)).await?,
        other => other?,
    };
    let order_url = resp
        .header("location")
        .ok_or_else(|| AcmeError::Malformed("newOrder answer without Location".into()))?
        .to_string();
    let order: Order = parse(&resp)?;
    let mut answered = Vec::new();
    let result = authorize(account, solver, req, &order, &mut answered, started).await;
    for a in &answered {
        solver.cleanup(a.kind, &a.name, &a.token, &a.key_authorization).await;
    }
    result?;
    let order = poll_order(account, &order_url, req, started, &["ready", "valid"]).await?;
    let (der, key) = match &req.csr {
        Some(csr) => (csr.clone(), None),
        None => {
            let key = generate_key(req.key)?;
            (csr_der(&req.names, &key)?, Some(key))
        }
    };
    let order = if order.status == "ready" {
        let csr = crate::b64::encode(&der);
        account.post(&order.finalize, Some(&json!({ "csr": csr }))).await?;
        poll_order(account, &order_url, req, started, &["valid"]).await?
    } else {
        return Err(AcmeError::Invalid("order was valid before finalize (reused?)".into()));
    };
    let cert_url = order
        .certificate
        .ok_or_else(|| AcmeError::Malformed("valid order without certificate URL".into()))?;
    let resp = account.post(&cert_url, None).await?;
    Ok(Issued {
        chain_pem: resp.body.to_vec(),
        key_pem: match key {
            Some(key) => key.private_key_to_pem_pkcs8()?,
            None => Vec::new(),
        },
    })
}

async fn authorize<S: Solver>(
    account: &Account,
    solver: &S,
    req: &OrderRequest,
    order: &Order,
    answered: &mut Vec<Answered>,
    started: Instant,
) -> Result<(), AcmeError> {
    let mut pending = Vec::new();
    for url in &order.authorizations {
        let (authz, _) = account.get::<Authorization>(url).await?;
        match authz.status.as_str() {
            "valid" => continue,
            "pending" => {}
            other => {
                return Err(AcmeError::Invalid(format!(
                    "authorization for {} is {other}",
                    authz.identifier.value
                )))
            }
        }
        let name = authz.identifier.value.clone();
        let chosen = req
            .challenges
            .iter()
            .filter(|k| !authz.wildcard || **k == ChallengeKind::Dns01)
            .find_map(|k| authz.challenges.iter().find(|c| c.kind == k.as_str()).map(|c| (*k, c)));
        let Some((kind, challenge)) = chosen else {
            return Err(AcmeError::NoChallenge(name));
        };
        let key_authorization = account.key().key_authorization(&challenge.token);
        solver
            .present(kind, &name, &challenge.token, &key_authorization)
            .await?;
        answered.push(Answered {
            kind,
            name: name.clone(),
            token: challenge.token.clone(),
            key_authorization,
        });
        tracing::info!(
            name,
            challenge = kind.as_str(),
            "ACME challenge ready; asking the CA to validate"
        );
        account.post(&challenge.url, Some(&json!({}))).await?;
        pending.push(url.clone());
    }
    for url in pending {
        loop {
            let (authz, resp) = account.get::<Authorization>(&url).await?;
            match authz.status.as_str() {
                "valid" => break,
                "pending" | "processing" => wait(resp.retry_after(), req, started, "authorization").await?,
                other => {
                    let why = authz
                        .challenges
                        .iter()
                        .find_map(|c| c.error.as_ref())
                        .map_or_else(String::new, |p| format!(": {p}"));
                    return Err(AcmeError::Invalid(format!(
                        "authorization for {} is {other}{why}",
                        authz.identifier.value
                    )));
                }
            }
        }
    }
    Ok(())
}

async fn poll_order(
    account: &Account,
    url: &str,
    req: &OrderRequest,
    started: Instant,
    done: &[&str],
) -> Result<Order, AcmeError> {
    loop {
        let (order, resp) = account.get::<Order>(url).await?;
        if done.contains(&order.status.as_str()) {
            return Ok(order);
        }
        if order.status == "invalid" {
            let why = order.error.map_or_else(String::new, |p| format!(": {p}"));
            return Err(AcmeError::Invalid(format!("order is invalid{why}")));
        }
        wait(resp.retry_after(), req, started, "order").await?;
    }
}

/// Sleeps the CA's `Retry-After` (or the poll interval), within the order's deadline.
async fn wait(
    retry_after: Option<u64>,
    req: &OrderRequest,
    started: Instant,
    what: &'static str,
) -> Result<(), AcmeError> {
    let pause = retry_after.map_or(req.poll_interval, Duration::from_secs);
    let left = req.deadline.saturating_sub(started.elapsed());
    if left.is_zero() {
        return Err(AcmeError::Timeout(what));
    }
    tokio::time::sleep(pause.min(left)).await;
    Ok(())
}

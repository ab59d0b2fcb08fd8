//! An ACME account at one CA: the directory, the nonce, signed POSTs (retried once per fresh
//! nonce when the CA answers `badNonce`, RFC 8555 §6.5), and account registration (§7.3).

use crate::error::AcmeError;
use crate::http::{HttpClient, Response};
use crate::jws::AccountKey;
use crate::types::{Directory, Problem};
use http::Method;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How many times one request is re-signed after `badNonce` answers.
const BAD_NONCE_RETRIES: usize = 10;

/// What registering an account needs.
#[derive(Debug, Clone, Default)]
pub struct AccountOptions {
    /// The directory URL.
    pub directory: String,
    /// `mailto:` contacts.
    pub contact: Vec<String>,
    /// A PEM bundle to verify the CA's HTTPS with (system roots without it).
    pub ca_bundle: Option<PathBuf>,
    /// External Account Binding: key id and the raw HMAC key.
    pub eab: Option<(String, Vec<u8>)>,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// A registered account.
pub struct Account {
    http: HttpClient,
    /// The CA's directory.
    pub directory: Directory,
    key: Arc<AccountKey>,
    kid: String,
    nonce: Mutex<Option<String>>,
    /// badNonce answers survived (re-signed with the fresh nonce).
    pub bad_nonces: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Account({})", self.kid)
    }
}

impl Account {
    /// Fetches the directory and registers (or finds) the account of `key`.
    pub async fn register(options: &AccountOptions, key: Arc<AccountKey>) -> Result<Self, AcmeError> {
        let http = HttpClient::new(options.ca_bundle.as_deref(), options.timeout)?;
        let resp = http.send(Method::GET, &options.directory, None).await?;
        let directory: Directory = parse(&check(resp)?)?;
        let mut account = Self {
            http,
            directory,
            key,
            kid: String::new(),
            nonce: Mutex::new(None),
            bad_nonces: Default::default(),
        };
        let url = account.directory.new_account.clone();
        let mut payload = json!({"termsOfServiceAgreed": true, "contact": options.contact});
        if let Some((kid, hmac)) = &options.eab {
            payload["externalAccountBinding"] = account.key.eab(&url, kid, hmac)?;
        } else if account
            .directory
            .meta
            .as_ref()
            .is_some_and(|m| m.external_account_required)
        {
            return Err(AcmeError::Invalid(
                "the CA requires an External Account Binding (acme.eab_key_id, acme.eab_hmac_key)".into(),
            ));
        }
        let resp = account.post(&url, Some(&payload)).await?;
        account.kid = resp
            .header("location")
            .ok_or_else(|| AcmeError::Malformed("newAccount answer without Location".into()))?
            .to_string();
        Ok(account)
    }

    /// The account URL.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The account key.
    pub fn key(&self) -> &AccountKey {
        &self.key
    }

    /// The HTTPS client (for unauthenticated GETs such as renewalInfo).
    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    async fn fresh_nonce(&self) -> Result<String, AcmeError> {
        if let Some(n) = self.nonce.lock().await.take() {
            return Ok(n);
        }
        let resp = self.http.send(Method::HEAD, &self.directory.new_nonce, None).await?;
        resp.header("replay-nonce")
            .map(str::to_string)
            .ok_or_else(|| AcmeError::Malformed("newNonce answer without Replay-Nonce".into()))
    }

    /// A signed POST (`payload` None = POST-as-GET); a problem answer is an error.
    pub async fn post(&self, url: &str, payload: Option<&Value>) -> Result<Response, AcmeError> {
        let mut attempt = 0;
        loop {
            let nonce = self.fresh_nonce().await?;
            let kid = (!self.kid.is_empty()).then_some(self.kid.as_str());
            let body = self.key.sign(url, &nonce, kid, payload)?;
            let resp = self
                .http
                .send(Method::POST, url, Some(body.to_string().into_bytes()))
                .await?;
            if let Some(n) = resp.header("replay-nonce") {
                *self.nonce.lock().await = Some(n.to_string());
            }
            match check(resp) {
                Err(e) if e.is_bad_nonce() && attempt < BAD_NONCE_RETRIES => {
                    attempt += 1;
                    self.bad_nonces.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(url, attempt, "ACME server refused the nonce; retrying with a fresh one");
                }
                other => return other,
            }
        }
    }

    /// POST-as-GET, parsed.
    pub async fn get<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<(T, Response), AcmeError> {
        let resp = self.post(url, None).await?;
        Ok((parse(&resp)?, resp))
    }
}

/// The answer, or its problem document as an error.
pub fn check(resp: Response) -> Result<Response, AcmeError> {
    if resp.status.is_success() {
        return Ok(resp);
    }
    let problem: Problem = serde_json::from_slice(&resp.body).unwrap_or_else(|_| Problem {
        kind: String::new(),
        detail: String::from_utf8_lossy(&resp.body[..resp.body.len().min(200)]).into_owned(),
    });
    Err(AcmeError::Problem {
        status: resp.status.as_u16(),
        problem_type: problem.kind,
        detail: problem.detail,
        retry_after: resp.retry_after(),
    })
}

/// The body as JSON of type `T`.
pub fn parse<T: serde::de::DeserializeOwned>(resp: &Response) -> Result<T, AcmeError> {
    serde_json::from_slice(&resp.body).map_err(|e| AcmeError::Malformed(e.to_string()))
}

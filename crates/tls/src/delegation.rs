//! Delegated credentials (RFC 9345) for keyless certificates.
//!
//! A keyless certificate costs every full handshake a round trip to a key server. With
//! `[keyless.delegated_credentials]` on, the gateway makes an ECDSA P-256 key in memory, asks the
//! key servers once per validity period to sign a credential binding it to the certificate (the
//! keyless protocol's `delegate` operation; the key server checks the certificate carries
//! DelegationUsage and the validity is short), verifies the answer against the certificate's
//! public key, and offers the credential to every client that asks for one in its ClientHello.
//! Those handshakes are signed here, with no key-server round trip; other clients are served
//! through the key servers as before, and so is everyone when no valid credential is held.
//!
//! A [`DelegationSlot`] per certificate holds the current credential; the gateway's renewal task
//! (`tlsgate-proxy`'s `downstream::delegation`) fills it and renews it `renew_before` its
//! expiry. The credential key never leaves memory. Slots are rebuilt by a reload; a rebuilt slot
//! for the same certificate starts with the credential the old one held.

use crate::keys::{KeyBackend, KeyType};
use arc_swap::ArcSwapOption;
use boring::ec::{EcGroup, EcKey};
use boring::nid::Nid;
use boring::pkey::PKey;
use boring::ssl::{SslCredential, SslSignatureAlgorithm};
use boring::x509::X509;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_config::DelegatedCredentialsConfig;
use tlsgate_wire::delegated_credential::{delegated_credential, signing_input, Credential, DELEGATION_USAGE_OID};

/// The scheme the credential's key signs handshakes with: ECDSA P-256, the cheapest to sign
/// and what every client that supports delegated credentials accepts.
pub const CREDENTIAL_SCHEME: u16 = 0x0403;
/// A credential is no longer offered this close to its expiry (clients' clocks differ).
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// One issued credential.
pub struct Issued {
    /// Ready to add to a connection.
    pub credential: SslCredential,
    /// When it expires.
    pub expires: SystemTime,
}

/// Why a credential could not be obtained.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// The key servers refused or failed (their error says which; retry-safe unless refused).
    #[error("key servers: {0}")]
    KeyServers(#[source] crate::keys::KeyError),
    /// The certificate's key backend cannot issue credentials (not a keyless certificate).
    #[error("this certificate's key backend does not issue delegated credentials")]
    NotRemote,
    /// No TLS scheme for the certificate's key type.
    #[error("no signature scheme for a {0} certificate key")]
    KeyType(&'static str),
    /// The certificate expires too soon for a credential worth offering.
    #[error("the certificate expires within 30 s: no credential")]
    CertificateExpiring,
    /// The key server's signature does not verify against the certificate.
    #[error("the key server's credential signature does not verify against the certificate")]
    BadSignature,
    /// Building the credential (key generation, encoding, BoringSSL) failed.
    #[error("building the credential: {0}")]
    Build(String),
}

impl DelegationError {
    /// Metric label (`tlsgate_delegated_credential_issues_total{result}`).
    pub fn result(&self) -> &'static str {
        match self {
            DelegationError::KeyServers(e) if tlsgate_error::Classify::retry_safe(e) => "unavailable",
            DelegationError::KeyServers(_) => "refused",
            DelegationError::BadSignature => "invalid",
            _ => "internal",
        }
    }
}

impl tlsgate_error::Classify for DelegationError {
    fn side(&self) -> tlsgate_error::Side {
        match self {
            DelegationError::KeyServers(e) => e.side(),
            DelegationError::BadSignature => tlsgate_error::Side::Upstream,
            _ => tlsgate_error::Side::Internal,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            DelegationError::KeyServers(e) => e.kind(),
            DelegationError::NotRemote => "delegation_not_remote",
            DelegationError::KeyType(_) => "delegation_key_type",
            DelegationError::CertificateExpiring => "delegation_certificate_expiring",
            DelegationError::BadSignature => "delegation_bad_signature",
            DelegationError::Build(_) => "delegation_build",
        }
    }
    fn retry_safe(&self) -> bool {
        match self {
            DelegationError::KeyServers(e) => e.retry_safe(),
            DelegationError::BadSignature => true,
            _ => false,
        }
    }
}

/// The delegated credential of one keyless certificate.
pub struct DelegationSlot {
    /// Site name.
    pub site: String,
    /// The certificate's key type label.
    pub cert: &'static str,
    /// `site[i].certificate[j]`.
    pub field: String,
    /// Validity and renewal.
    pub settings: DelegatedCredentialsConfig,
    chain: Vec<Vec<u8>>,
    leaf: X509,
    not_before: u64,
    not_after: u64,
    key_type: KeyType,
    backend: Arc<dyn KeyBackend>,
    current: ArcSwapOption<Issued>,
    handshakes: AtomicU64,
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The scheme a certificate key of `key_type` signs a credential with (TLS 1.3 schemes only).
fn certificate_scheme(key_type: KeyType) -> Option<u16> {
    Some(match key_type {
        KeyType::EcdsaP256 => 0x0403,
        KeyType::EcdsaP384 => 0x0503,
        KeyType::Rsa => 0x0804,
        KeyType::Ed25519 => 0x0807,
        KeyType::MlDsa(level) => level.code(),
        KeyType::Other => return None,
    })
}

/// Whether a certificate (DER) carries the DelegationUsage extension.
pub fn has_delegation_usage(der: &[u8]) -> bool {
    x509_parser::parse_x509_certificate(der).is_ok_and(|(_, c)| {
        c.extensions()
            .iter()
            .any(|e| e.oid.to_id_string() == DELEGATION_USAGE_OID)
    })
}

impl DelegationSlot {
    /// The credential to offer now, if one is held and not about to expire.
    pub fn current(&self) -> Option<Arc<Issued>> {
        self.current
            .load_full()
            .filter(|i| i.expires > SystemTime::now() + EXPIRY_MARGIN)
    }

    /// When the current credential expires, if one is held.
    pub fn expires(&self) -> Option<SystemTime> {
        self.current.load().as_ref().map(|i| i.expires)
    }

    /// Serves `issued` from now on.
    pub fn store(&self, issued: Issued) {
        self.current.store(Some(Arc::new(issued)));
    }

    /// Counts a handshake served with the credential.
    pub fn count_handshake(&self) {
        self.handshakes.fetch_add(1, Ordering::Relaxed);
    }

    /// Handshakes counted since the last call (exported at scrape time).
    pub fn take_handshakes(&self) -> u64 {
        self.handshakes.swap(0, Ordering::Relaxed)
    }

    /// How long until a new credential should be asked for (zero: now).
    pub fn renew_in(&self, now: SystemTime) -> Duration {
        match self.expires() {
            Some(expires) => expires
                .checked_sub(self.settings.renew_before.get())
                .and_then(|at| at.duration_since(now).ok())
                .unwrap_or(Duration::ZERO),
            None => Duration::ZERO,
        }
    }

    /// Asks the key servers for a new credential and checks it; the caller stores it.
    pub async fn issue(&self) -> Result<Issued, DelegationError> {
        let now = unix(SystemTime::now());
        let expires = (now + self.settings.validity.get().as_secs()).min(self.not_after);
        if expires <= now + EXPIRY_MARGIN.as_secs() {
            return Err(DelegationError::CertificateExpiring);
        }
        let valid_time = u32::try_from(expires.saturating_sub(self.not_before))
            .map_err(|_| DelegationError::Build("certificate older than a credential can express".into()))?;
        let build = |e: boring::error::ErrorStack| DelegationError::Build(e.to_string());
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).map_err(build)?;
        let key = PKey::from_ec_key(EcKey::generate(&group).map_err(build)?).map_err(build)?;
        let spki = key.public_key_to_der().map_err(build)?;
        let credential = Credential {
            valid_time,
            dc_cert_verify_algorithm: CREDENTIAL_SCHEME,
            spki: &spki,
        };
        let scheme = certificate_scheme(self.key_type).ok_or(DelegationError::KeyType(self.key_type.as_str()))?;
        let wire = |e: tlsgate_wire::delegated_credential::DcError| DelegationError::Build(e.to_string());
        let input = signing_input(&self.chain[0], &credential, scheme).map_err(wire)?;
        let pending = self
            .backend
            .delegate(scheme, input.clone())
            .ok_or(DelegationError::NotRemote)?;
        let signature = pending.await.map_err(DelegationError::KeyServers)?;
        let public = self.leaf.public_key().map_err(build)?;
        if !crate::keys::verify(&public, SslSignatureAlgorithm::from(scheme), &input, &signature) {
            return Err(DelegationError::BadSignature);
        }
        let dc = delegated_credential(&credential, scheme, &signature).map_err(wire)?;
        let credential = crate::ffi::delegated_credential(&self.chain, &dc, &key).map_err(build)?;
        Ok(Issued {
            credential,
            expires: UNIX_EPOCH + Duration::from_secs(expires),
        })
    }
}

/// A credential offered to one connection, and its slot (kept on the connection until its
/// handshake completes, to count whether it was used).
pub(crate) struct Offered {
    slot: Arc<DelegationSlot>,
    issued: Arc<Issued>,
}

static OFFERED: std::sync::LazyLock<boring::ex_data::Index<boring::ssl::Ssl, Offered>> =
    std::sync::LazyLock::new(|| boring::ssl::Ssl::new_ex_index().expect("BoringSSL ex_data index"));

/// The credential to add to a connection whose ClientHello is `hello`: the slot's current one,
/// when the client asked for delegated credentials with [`CREDENTIAL_SCHEME`].
pub(crate) fn offer(slot: Option<&Arc<DelegationSlot>>, hello: &boring::ssl::ClientHello<'_>) -> Option<Offered> {
    let slot = slot?;
    let asked = hello.get_extension(boring::ssl::ExtensionType::DELEGATED_CREDENTIAL)?;
    if !tlsgate_wire::delegated_credential::offers_scheme(asked, CREDENTIAL_SCHEME) {
        return None;
    }
    Some(Offered {
        issued: slot.current()?,
        slot: slot.clone(),
    })
}

/// Adds the offered credential to the connection (ahead of the certificate's own key: BoringSSL
/// prefers added credentials) and counts the handshake if it ends up using it.
pub(crate) fn attach(ssl: &mut boring::ssl::SslRef, offered: Offered) -> Result<(), boring::error::ErrorStack> {
    ssl.add_credential(&offered.issued.credential)?;
    ssl.set_ex_data(*OFFERED, offered);
    crate::ffi::on_handshake_done::<CountUse>(ssl);
    Ok(())
}

/// Counts a completed handshake that used the credential (a resumed one, or one BoringSSL
/// served otherwise, is not counted).
struct CountUse;

impl crate::ffi::HandshakeDone for CountUse {
    fn done(ssl: &boring::ssl::SslRef) {
        if let Some(o) = ssl.ex_data(*OFFERED) {
            if crate::ffi::selected_credential_is(ssl, &o.issued.credential) {
                o.slot.count_handshake();
            }
        }
    }
}

/// Every delegation slot of the running configuration (for the renewal task and the metrics),
/// and the credentials a reload hands on to the rebuilt slots.
#[derive(Default)]
pub struct DelegationRegistry {
    slots: Mutex<Vec<Arc<DelegationSlot>>>,
}

impl std::fmt::Debug for DelegationRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationRegistry")
            .field("slots", &self.slots.lock().len())
            .finish()
    }
}

impl DelegationRegistry {
    /// A slot for a keyless certificate (chain leaf first), when delegation is on and the
    /// certificate carries DelegationUsage; it starts with the credential a slot of the previous
    /// configuration held for the same certificate and settings.
    pub(crate) fn slot_for(
        &self,
        site: &str,
        field: String,
        chain: &[X509],
        backend: &Arc<dyn KeyBackend>,
        settings: DelegatedCredentialsConfig,
    ) -> Option<Arc<DelegationSlot>> {
        let ders: Vec<Vec<u8>> = chain.iter().filter_map(|c| c.to_der().ok()).collect();
        let leaf = chain.first()?;
        if !has_delegation_usage(ders.first()?) {
            tracing::warn!(%field, "{field}: the certificate has no DelegationUsage extension ({DELEGATION_USAGE_OID}): no delegated credential; every full handshake is signed by the key servers");
            return None;
        }
        let (_, parsed) = x509_parser::parse_x509_certificate(&ders[0]).ok()?;
        let validity = parsed.validity();
        let (not_before, not_after) = (
            u64::try_from(validity.not_before.timestamp()).unwrap_or(0),
            u64::try_from(validity.not_after.timestamp()).unwrap_or(0),
        );
        let mut slots = self.slots.lock();
        let seed = slots
            .iter()
            .find(|s| s.site == site && s.field == field && s.chain == ders && s.settings == settings)
            .and_then(|s| s.current.load_full());
        let slot = Arc::new(DelegationSlot {
            site: site.to_string(),
            cert: backend.key_type().as_str(),
            field,
            settings,
            chain: ders,
            leaf: leaf.clone(),
            not_before,
            not_after,
            key_type: backend.key_type(),
            backend: backend.clone(),
            current: ArcSwapOption::new(seed),
            handshakes: AtomicU64::new(0),
        });
        slots.push(slot.clone());
        Some(slot)
    }

    /// Forgets every slot not in `live` (those of the running configuration).
    pub fn retain(&self, live: &[Arc<DelegationSlot>]) {
        self.slots.lock().retain(|s| live.iter().any(|l| Arc::ptr_eq(l, s)));
    }
}

//! OCSP stapling (RFC 6960 responses, RFC 6066 `status_request`, TLS 1.3 certificate-entry
//! status).
//!
//! - [`OcspTarget`]: one certificate with its issuer: builds the OCSP request and checks a
//!   response (signed by the issuer or by a responder certificate the issuer delegated with
//!   `OCSPSigning`, about this certificate, `good`, fresh). Parsing is RustCrypto's `x509-ocsp`;
//!   hashes and signatures are BoringSSL's.
//! - [`StapleSlot`]: the response currently stapled for one configured certificate, swapped
//!   atomically by the refresher (tlsgate-proxy's `stapling`) and read by every handshake that
//!   asks for it, without rebuilding any context.
//! - [`StapleRegistry`]: the slots, kept across configuration reloads so that a reload neither
//!   loses the last good response nor restarts fetching.
//!
//! A handshake is stapled only when the client sent `status_request` and the slot holds a
//! response that has not expired at that moment; an expired, revoked or unverifiable response
//! is never stapled.

use crate::context::TlsBuildError;
use crate::keys::KeyType;
use arc_swap::ArcSwapOption;
use boring::ex_data::Index;
use boring::hash::{hash, MessageDigest};
use boring::pkey::{PKey, Public};
use boring::sign::Verifier;
use boring::ssl::{ClientHello, ExtensionType, Ssl, SslRef};
use boring::x509::X509;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime};
use tlsgate_config::{CertificateConfig, OcspMode, SiteConfig};
use x509_cert::der::asn1::{ObjectIdentifier, OctetString};
use x509_cert::der::{Decode, Encode, Header, Reader, SliceReader};
use x509_cert::ext::pkix::ExtendedKeyUsage;
use x509_cert::spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;
use x509_ocsp::{
    BasicOcspResponse, CertId, CertStatus, OcspRequest, OcspResponse, OcspResponseStatus, Request, ResponderId,
    TbsRequest, Version,
};

/// `id-ad-ocsp`: the access method of an OCSP responder in Authority Information Access.
pub const ID_AD_OCSP: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1");
pub(crate) const ID_PKIX_OCSP_BASIC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1.1");
const ID_KP_OCSP_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.9");
const ID_CE_EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
const ID_SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.14.3.2.26");
const ID_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const ID_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
const ID_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");
pub(crate) const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const ECDSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.4");
pub(crate) const RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

/// How far in the future a response's thisUpdate may be (clock skew between us and the responder).
pub const CLOCK_SKEW: Duration = Duration::from_secs(300);
/// How long a response without nextUpdate ("newer information is always available") is stapled.
pub const VALIDITY_WITHOUT_NEXT_UPDATE: Duration = Duration::from_secs(3600);

/// Why a response is not stapled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Not a usable response: malformed, an error status, wrong certificate, bad signature,
    /// unknown signer, status `unknown`.
    #[error("invalid OCSP response: {0}")]
    Invalid(String),
    /// Well formed and signed, but past its nextUpdate (or not yet valid).
    #[error("stale OCSP response: {0}")]
    Expired(String),
    /// The responder says the certificate is revoked.
    #[error("the certificate is REVOKED according to its OCSP responder ({0})")]
    Revoked(String),
}

impl Rejection {
    /// Metric label: `invalid` or `revoked`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Rejection::Invalid(_) | Rejection::Expired(_) => "invalid",
            Rejection::Revoked(_) => "revoked",
        }
    }
}

/// `2026-01-31T12:00:00Z`, for logs.
pub fn format_time(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::Invalid(message.into())
}

/// A checked OCSP response, ready to staple.
#[derive(Debug, Clone)]
pub struct Staple {
    /// The OCSPResponse DER, as sent to clients.
    pub der: Vec<u8>,
    /// thisUpdate of the certificate's SingleResponse.
    pub this_update: SystemTime,
    /// nextUpdate, when the responder set one.
    pub next_update: Option<SystemTime>,
    /// When it stops being stapled: nextUpdate, or thisUpdate + [`VALIDITY_WITHOUT_NEXT_UPDATE`].
    pub expires: SystemTime,
}

impl Staple {
    /// Whether it may still be stapled at `now`.
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        now < self.expires
    }

    /// Seconds since thisUpdate (0 if thisUpdate is slightly in the future).
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.this_update).unwrap_or_default()
    }

    /// When to fetch the next response: `interval` from now if given, but never later than
    /// halfway between thisUpdate and expiry ("well before nextUpdate"); at least a second away.
    pub fn refresh_in(&self, now: SystemTime, interval: Option<Duration>) -> Duration {
        let window = self.expires.duration_since(self.this_update).unwrap_or_default();
        let halfway = self.this_update + window / 2;
        let until_halfway = halfway.duration_since(now).unwrap_or_default();
        interval
            .map_or(until_halfway, |i| i.min(until_halfway))
            .max(Duration::from_secs(1))
    }
}

/// A certificate whose status can be asked: the leaf's serial and its issuer's name and key.
pub struct OcspTarget {
    serial: Vec<u8>,
    issuer_name_der: Vec<u8>,
    issuer_key_bits: Vec<u8>,
    issuer_key: PKey<Public>,
    /// OCSP responder URLs of the leaf's Authority Information Access, in order.
    pub responders: Vec<String>,
    /// The leaf's subject, for logs.
    pub subject: String,
}

impl std::fmt::Debug for OcspTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OcspTarget")
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

fn parse_cert(cert: &X509) -> Result<Certificate, String> {
    let der = cert.to_der().map_err(|e| e.to_string())?;
    Certificate::from_der(&der).map_err(|e| format!("cannot parse the certificate: {e}"))
}

impl OcspTarget {
    /// The target for `leaf`, issued by `issuer`.
    pub fn new(leaf: &X509, issuer: &X509) -> Result<Self, String> {
        let parsed_leaf = parse_cert(leaf)?;
        let parsed_issuer = parse_cert(issuer)?;
        let tbs = &parsed_issuer.tbs_certificate;
        let issuer_name_der = tbs.subject.to_der().map_err(|e| e.to_string())?;
        if parsed_leaf.tbs_certificate.issuer.to_der().map_err(|e| e.to_string())? != issuer_name_der {
            return Err("the issuer certificate's subject is not the leaf's issuer".into());
        }
        let responders = leaf
            .ocsp_responders()
            .map(|s| s.iter().map(|u| u.to_string()).collect())
            .unwrap_or_default();
        Ok(Self {
            serial: parsed_leaf.tbs_certificate.serial_number.as_bytes().to_vec(),
            issuer_name_der,
            issuer_key_bits: tbs.subject_public_key_info.subject_public_key.raw_bytes().to_vec(),
            issuer_key: issuer.public_key().map_err(|e| e.to_string())?,
            responders,
            subject: parsed_leaf.tbs_certificate.subject.to_string(),
        })
    }

    /// The target for a chain's leaf, with its issuer found among the other certificates.
    pub fn from_chain(chain: &[X509]) -> Result<Self, String> {
        let leaf = chain.first().ok_or("empty chain")?;
        let issuer = chain[1..]
            .iter()
            .find(|c| c.public_key().is_ok_and(|k| leaf.verify(&k).unwrap_or(false)))
            .ok_or("the chain does not contain the leaf's issuer (OCSP needs it: append the intermediate)")?;
        Self::new(leaf, issuer)
    }

    pub(crate) fn cert_id(&self) -> Result<CertId, String> {
        let sha1 = |data: &[u8]| -> Result<OctetString, String> {
            let digest = hash(MessageDigest::sha1(), data).map_err(|e| e.to_string())?;
            OctetString::new(digest.to_vec()).map_err(|e| e.to_string())
        };
        Ok(CertId {
            hash_algorithm: AlgorithmIdentifierOwned {
                oid: ID_SHA1,
                parameters: Some(x509_cert::der::Any::null()),
            },
            issuer_name_hash: sha1(&self.issuer_name_der)?,
            issuer_key_hash: sha1(&self.issuer_key_bits)?,
            serial_number: x509_cert::serial_number::SerialNumber::new(&self.serial).map_err(|e| e.to_string())?,
        })
    }

    /// An unsigned OCSP request (DER) for this certificate, without nonce (a staple is shared by
    /// every client, so it cannot carry one). SHA-1 CertID, as RFC 5019 responders expect.
    pub fn request(&self) -> Result<Vec<u8>, String> {
        OcspRequest {
            tbs_request: TbsRequest {
                version: Version::V1,
                requestor_name: None,
                request_list: vec![Request {
                    req_cert: self.cert_id()?,
                    single_request_extensions: None,
                }],
                request_extensions: None,
            },
            optional_signature: None,
        }
        .to_der()
        .map_err(|e| e.to_string())
    }

    /// Checks an OCSPResponse (DER): successful, basic, signed by the issuer or a delegated
    /// responder, about this certificate, `good`, and fresh at `now`.
    pub fn check(&self, der: &[u8], now: SystemTime) -> Result<Staple, Rejection> {
        let response = OcspResponse::from_der(der).map_err(|e| invalid(format!("not an OCSP response: {e}")))?;
        if response.response_status != OcspResponseStatus::Successful {
            return Err(invalid(format!("responder status {:?}", response.response_status)));
        }
        let bytes = response
            .response_bytes
            .ok_or_else(|| invalid("successful response without a body"))?;
        if bytes.response_type != ID_PKIX_OCSP_BASIC {
            return Err(invalid(format!("unsupported response type {}", bytes.response_type)));
        }
        let basic_der = bytes.response.as_bytes();
        let basic =
            BasicOcspResponse::from_der(basic_der).map_err(|e| invalid(format!("malformed basic response: {e}")))?;
        let tbs = first_element(basic_der).ok_or_else(|| invalid("malformed basic response"))?;
        let signer = self.signer(&basic, now)?;
        let signature = basic
            .signature
            .as_bytes()
            .ok_or_else(|| invalid("signature is not a whole number of bytes"))?;
        if !verify_signature(&signer, &basic.signature_algorithm.oid, signature, tbs)? {
            return Err(invalid("bad signature"));
        }
        let single = basic
            .tbs_response_data
            .responses
            .iter()
            .find(|r| self.matches(&r.cert_id))
            .ok_or_else(|| invalid("the response is not about this certificate"))?;
        match &single.cert_status {
            CertStatus::Good(_) => {}
            CertStatus::Revoked(info) => {
                let at = format_time(info.revocation_time.0.to_system_time());
                let reason = info
                    .revocation_reason
                    .map(|r| format!(", reason {r:?}"))
                    .unwrap_or_default();
                return Err(Rejection::Revoked(format!("revoked at {at}{reason}")));
            }
            CertStatus::Unknown(_) => return Err(invalid("the responder does not know this certificate")),
        }
        let this_update = single.this_update.0.to_system_time();
        let next_update = single.next_update.map(|t| t.0.to_system_time());
        if this_update > now + CLOCK_SKEW {
            return Err(Rejection::Expired(format!(
                "thisUpdate {} is in the future",
                format_time(this_update)
            )));
        }
        let expires = next_update.unwrap_or(this_update + VALIDITY_WITHOUT_NEXT_UPDATE);
        if now >= expires {
            return Err(Rejection::Expired(format!("expired at {}", format_time(expires))));
        }
        Ok(Staple {
            der: der.to_vec(),
            this_update,
            next_update,
            expires,
        })
    }

    fn matches(&self, id: &CertId) -> bool {
        let Some(md) = digest_for_hash(&id.hash_algorithm.oid) else {
            return false;
        };
        let h = |data: &[u8]| hash(md, data).map(|d| d.to_vec()).unwrap_or_default();
        id.serial_number.as_bytes() == self.serial.as_slice()
            && id.issuer_name_hash.as_bytes() == h(&self.issuer_name_der).as_slice()
            && id.issuer_key_hash.as_bytes() == h(&self.issuer_key_bits).as_slice()
    }

    /// The key that must have signed the response: the issuer's, or that of a certificate in the
    /// response that the issuer signed for OCSP signing and that is valid now.
    fn signer(&self, basic: &BasicOcspResponse, now: SystemTime) -> Result<PKey<Public>, Rejection> {
        let key_hash = |bits: &[u8]| {
            hash(MessageDigest::sha1(), bits)
                .map(|d| d.to_vec())
                .unwrap_or_default()
        };
        let names = |name_der: &[u8], key_bits: &[u8]| match &basic.tbs_response_data.responder_id {
            ResponderId::ByName(n) => n.to_der().is_ok_and(|d| d == name_der),
            ResponderId::ByKey(k) => k.as_bytes() == key_hash(key_bits).as_slice(),
        };
        if names(&self.issuer_name_der, &self.issuer_key_bits) {
            return Ok(self.issuer_key.clone());
        }
        for cert in basic.certs.iter().flatten() {
            let tbs = &cert.tbs_certificate;
            let name_der = tbs.subject.to_der().unwrap_or_default();
            if !names(&name_der, tbs.subject_public_key_info.subject_public_key.raw_bytes()) {
                continue;
            }
            let der = cert.to_der().map_err(|e| invalid(e.to_string()))?;
            let x509 = X509::from_der(&der).map_err(|e| invalid(format!("responder certificate: {e}")))?;
            if !x509.verify(&self.issuer_key).unwrap_or(false) {
                return Err(invalid(
                    "the responder certificate is not issued by the certificate's issuer",
                ));
            }
            let delegated = tbs.extensions.iter().flatten().any(|ext| {
                ext.extn_id == ID_CE_EXT_KEY_USAGE
                    && ExtendedKeyUsage::from_der(ext.extn_value.as_bytes())
                        .is_ok_and(|eku| eku.0.contains(&ID_KP_OCSP_SIGNING))
            });
            if !delegated {
                return Err(invalid("the responder certificate is not authorised for OCSP signing"));
            }
            let validity = &tbs.validity;
            if now < validity.not_before.to_system_time() || now > validity.not_after.to_system_time() {
                return Err(invalid("the responder certificate is outside its validity period"));
            }
            return x509.public_key().map_err(|e| invalid(e.to_string()));
        }
        Err(invalid(
            "signed by a responder that is neither the issuer nor delegated by it",
        ))
    }
}

/// The raw bytes of the first element of a DER SEQUENCE (`tbsResponseData`, as signed).
fn first_element(der: &[u8]) -> Option<&[u8]> {
    let mut reader = SliceReader::new(der).ok()?;
    Header::decode(&mut reader).ok()?;
    reader.tlv_bytes().ok()
}

fn digest_for_hash(oid: &ObjectIdentifier) -> Option<MessageDigest> {
    Some(match *oid {
        ID_SHA1 => MessageDigest::sha1(),
        ID_SHA256 => MessageDigest::sha256(),
        ID_SHA384 => MessageDigest::sha384(),
        ID_SHA512 => MessageDigest::sha512(),
        _ => return None,
    })
}

/// Verifies `signature` over `data`. SHA-1 signatures are refused.
fn verify_signature(
    key: &PKey<Public>,
    alg: &ObjectIdentifier,
    signature: &[u8],
    data: &[u8],
) -> Result<bool, Rejection> {
    let digest = match *alg {
        ECDSA_SHA256 | RSA_SHA256 => Some(MessageDigest::sha256()),
        ECDSA_SHA384 | RSA_SHA384 => Some(MessageDigest::sha384()),
        ECDSA_SHA512 | RSA_SHA512 => Some(MessageDigest::sha512()),
        ED25519 => None,
        _ => return Err(invalid(format!("unsupported signature algorithm {alg}"))),
    };
    let expected_key = match *alg {
        ECDSA_SHA256 | ECDSA_SHA384 | ECDSA_SHA512 => boring::pkey::Id::EC,
        ED25519 => boring::pkey::Id::ED25519,
        _ => boring::pkey::Id::RSA,
    };
    if key.id() != expected_key {
        return Err(invalid("the signature algorithm does not match the signer's key"));
    }
    let verifier = match digest {
        Some(md) => Verifier::new(md, key),
        None => Verifier::new_without_digest(key),
    };
    let mut verifier = verifier.map_err(|e| invalid(e.to_string()))?;
    Ok(verifier.verify_oneshot(signature, data).unwrap_or(false))
}

/// Where a certificate's staple comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StapleSource {
    /// Fetched from this `http://` responder.
    Responder(String),
    /// Read from this DER file (at startup and on reload).
    File(PathBuf),
}

/// The staple of one configured certificate (`site[i].certificate[j]`).
pub struct StapleSlot {
    /// Site name.
    pub site: String,
    /// Key type of the certificate (the `cert` metric label, as in `tlsgate_handshakes_total`).
    pub cert: &'static str,
    /// The configuration field, `site[i].certificate[j]`, for logs.
    pub field: String,
    /// Where responses come from.
    pub source: StapleSource,
    /// `ocsp_refresh`.
    pub refresh: Option<Duration>,
    /// The certificate and its issuer.
    pub target: OcspTarget,
    leaf_fingerprint: Vec<u8>,
    current: ArcSwapOption<Staple>,
    stapled: AtomicU64,
}

impl std::fmt::Debug for StapleSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StapleSlot")
            .field("field", &self.field)
            .field("site", &self.site)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl StapleSlot {
    /// The response stapled now (possibly expired: handshakes check again).
    pub fn current(&self) -> Option<Arc<Staple>> {
        self.current.load_full()
    }

    /// Replaces the stapled response (`None`: staple nothing).
    pub fn store(&self, staple: Option<Staple>) {
        self.current.store(staple.map(Arc::new));
    }

    /// Handshakes stapled since the last call.
    pub fn take_stapled(&self) -> u64 {
        self.stapled.swap(0, Ordering::Relaxed)
    }

    /// Checks a response for this certificate and, when good, staples it; returns the verdict.
    pub fn accept(&self, der: &[u8], now: SystemTime) -> Result<(), Rejection> {
        match self.target.check(der, now) {
            Ok(staple) => {
                self.store(Some(staple));
                Ok(())
            }
            Err(rejection) => {
                // A revoked certificate loses its staple at once; otherwise the last good one
                // stays (until it expires).
                if matches!(rejection, Rejection::Revoked(_)) {
                    self.store(None);
                }
                Err(rejection)
            }
        }
    }

    /// Drops the staple if it has expired; returns whether it did.
    pub fn drop_expired(&self, now: SystemTime) -> bool {
        if self.current().is_some_and(|s| !s.is_fresh(now)) {
            self.store(None);
            true
        } else {
            false
        }
    }

    /// Reads and checks `path` (a DER OCSPResponse) into this slot.
    fn load_file(&self, path: &std::path::Path) -> Result<(), TlsBuildError> {
        let der = std::fs::read(path).map_err(|e| TlsBuildError::File {
            field: format!("{}.ocsp_file", self.field),
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if let Err(rejection) = self.accept(&der, SystemTime::now()) {
            tracing::warn!(
                field = %self.field,
                site = %self.site,
                file = %path.display(),
                "{}.ocsp_file: not stapling: {rejection}",
                self.field
            );
            self.store(None);
        }
        Ok(())
    }
}

/// Every certificate's staple slot, kept across reloads (a rebuilt configuration gets the same
/// slot back for an unchanged certificate and staple settings).
#[derive(Debug, Default)]
pub struct StapleRegistry {
    slots: Mutex<Vec<Arc<StapleSlot>>>,
}

impl StapleRegistry {
    /// The slot for `site.certificates[cert_index]` (whose parsed chain is `chain`), or `None`
    /// when it is not stapled (`ocsp = "off"`, no responder and no file, no issuer in the chain).
    pub(crate) fn slot_for(
        &self,
        site_index: usize,
        site: &SiteConfig,
        cert_index: usize,
        cert: &CertificateConfig,
        chain: &[X509],
        key_type: KeyType,
    ) -> Result<Option<Arc<StapleSlot>>, TlsBuildError> {
        let field = format!("site[{site_index}].certificate[{cert_index}]");
        if cert.ocsp == OcspMode::Off {
            return Ok(None);
        }
        let Some(leaf) = chain.first() else {
            return Ok(None);
        };
        let source = if let Some(path) = &cert.ocsp_file {
            StapleSource::File(path.clone())
        } else if let Some(url) = &cert.ocsp_url {
            StapleSource::Responder(url.clone())
        } else {
            let urls: Vec<String> = leaf
                .ocsp_responders()
                .map(|s| s.iter().map(|u| u.to_string()).collect())
                .unwrap_or_default();
            match urls.iter().find(|u| u.starts_with("http://")) {
                Some(url) => StapleSource::Responder(url.clone()),
                None if urls.is_empty() => {
                    // Normal since public CAs dropped OCSP: no staple, nothing to warn about.
                    tracing::debug!(%field, "the certificate names no OCSP responder: no staple");
                    return Ok(None);
                }
                None => {
                    tracing::warn!(%field, ?urls, "{field}: the certificate's OCSP responders are not http:// URLs; not stapling (set ocsp_url)");
                    return Ok(None);
                }
            }
        };
        let target = match OcspTarget::from_chain(chain) {
            Ok(t) => t,
            Err(why) => {
                tracing::warn!(%field, "{field}: not stapling OCSP: {why}");
                return Ok(None);
            }
        };
        let fingerprint = leaf
            .digest(MessageDigest::sha256())
            .map(|d| d.to_vec())
            .unwrap_or_default();
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let existing = slots
            .iter()
            .find(|s| {
                s.site == site.name
                    && s.field == field
                    && s.leaf_fingerprint == fingerprint
                    && s.source == source
                    && s.refresh == cert.ocsp_refresh.map(|d| d.get())
            })
            .cloned();
        let slot = match existing {
            Some(slot) => slot,
            None => {
                // The same certificate with other settings keeps its last good response.
                let seed = slots
                    .iter()
                    .find(|s| s.site == site.name && s.leaf_fingerprint == fingerprint)
                    .and_then(|s| s.current())
                    .filter(|s| s.is_fresh(SystemTime::now()));
                let slot = Arc::new(StapleSlot {
                    site: site.name.clone(),
                    cert: key_type.as_str(),
                    field,
                    source,
                    refresh: cert.ocsp_refresh.map(|d| d.get()),
                    target,
                    leaf_fingerprint: fingerprint,
                    current: ArcSwapOption::new(seed),
                    stapled: AtomicU64::new(0),
                });
                slots.push(slot.clone());
                slot
            }
        };
        drop(slots);
        if let StapleSource::File(path) = &slot.source {
            slot.load_file(path)?;
        }
        Ok(Some(slot))
    }

    /// Forgets every slot not in `live` (those of the running configuration).
    pub fn retain(&self, live: &[Arc<StapleSlot>]) {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| live.iter().any(|l| Arc::ptr_eq(l, s)));
    }

    /// Number of slots kept.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no slot is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connection that was given a staple, counted once when its handshake completes.
struct Stapled {
    slot: Arc<StapleSlot>,
    counted: AtomicBool,
}

static STAPLED: LazyLock<Index<Ssl, Stapled>> = LazyLock::new(|| Ssl::new_ex_index().expect("BoringSSL ex_data index"));

/// In the certificate-selection finish step, after the site context is set: staples the slot's
/// response when the client asked for OCSP status and the response is still fresh.
pub(crate) fn staple(hello: &mut ClientHello<'_>, slot: Option<&Arc<StapleSlot>>) {
    let Some(slot) = slot else { return };
    // status_request with status_type ocsp(1).
    if hello
        .get_extension(ExtensionType::STATUS_REQUEST)
        .and_then(|e| e.first())
        != Some(&1)
    {
        return;
    }
    let current = slot.current.load();
    let Some(staple) = current.as_ref().filter(|s| s.is_fresh(SystemTime::now())) else {
        return;
    };
    let ssl = hello.ssl_mut();
    if ssl.set_ocsp_status(&staple.der).is_ok() {
        ssl.set_ex_data(
            *STAPLED,
            Stapled {
                slot: slot.clone(),
                counted: AtomicBool::new(false),
            },
        );
    }
}

/// Whether a completed handshake sent a staple (resumed handshakes send no certificate, so no
/// staple). The first call per connection counts it for the certificate's metric.
pub fn handshake_stapled(ssl: &SslRef) -> bool {
    if ssl.session_reused() {
        return false;
    }
    let Some(stapled) = ssl.ex_data(*STAPLED) else {
        return false;
    };
    if !stapled.counted.swap(true, Ordering::Relaxed) {
        stapled.slot.stapled.fetch_add(1, Ordering::Relaxed);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{CertSpec, Certified, KeyKind};
    use boring::pkey::Private;
    use boring::sign::Signer;
    use x509_cert::der::asn1::{BitString, GeneralizedTime};
    use x509_ocsp::{OcspGeneralizedTime, ResponseBytes, ResponseData, RevokedInfo, SingleResponse};

    struct Pki {
        ca: Certified,
        leaf: X509,
        issuer: X509,
        ca_key: PKey<Private>,
    }

    fn pki() -> Pki {
        let ca = Certified::issue(&CertSpec::ca("ocsp test CA", KeyKind::EcdsaP256, 30), None).unwrap();
        let mut spec = CertSpec::leaf(&["localhost"], KeyKind::EcdsaP256, 30);
        spec.ocsp_url = Some("http://127.0.0.1:1/ocsp".into());
        let leaf = Certified::issue(&spec, Some(&ca)).unwrap();
        Pki {
            leaf: X509::from_pem(leaf.cert_pem.as_bytes()).unwrap(),
            issuer: X509::from_pem(ca.cert_pem.as_bytes()).unwrap(),
            ca_key: PKey::private_key_from_pem(ca.key_pem.as_bytes()).unwrap(),
            ca,
        }
    }

    fn time(t: SystemTime) -> OcspGeneralizedTime {
        // GeneralizedTime has whole seconds.
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        OcspGeneralizedTime(
            GeneralizedTime::from_system_time(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap(),
        )
    }

    struct Spec {
        status: CertStatus,
        this_update: SystemTime,
        next_update: Option<SystemTime>,
        responder: ResponderId,
        certs: Option<Vec<Certificate>>,
        cert_id: CertId,
    }

    fn spec(p: &Pki, target: &OcspTarget) -> Spec {
        let now = SystemTime::now();
        let name = Certificate::from_der(&p.issuer.to_der().unwrap())
            .unwrap()
            .tbs_certificate
            .subject;
        Spec {
            status: CertStatus::good(),
            this_update: now - Duration::from_secs(60),
            next_update: Some(now + Duration::from_secs(3600)),
            responder: ResponderId::ByName(name),
            certs: None,
            cert_id: target.cert_id().unwrap(),
        }
    }

    fn respond(s: Spec, key: &PKey<Private>) -> Vec<u8> {
        let data = ResponseData {
            version: Version::V1,
            responder_id: s.responder,
            produced_at: time(SystemTime::now()),
            responses: vec![SingleResponse {
                cert_id: s.cert_id,
                cert_status: s.status,
                this_update: time(s.this_update),
                next_update: s.next_update.map(time),
                single_extensions: None,
            }],
            response_extensions: None,
        };
        let tbs = data.to_der().unwrap();
        let mut signer = Signer::new(MessageDigest::sha256(), key).unwrap();
        let sig = signer.sign_oneshot_to_vec(&tbs).unwrap();
        let basic = BasicOcspResponse {
            tbs_response_data: data,
            signature_algorithm: AlgorithmIdentifierOwned {
                oid: ECDSA_SHA256,
                parameters: None,
            },
            signature: BitString::from_bytes(&sig).unwrap(),
            certs: s.certs,
        };
        OcspResponse {
            response_status: OcspResponseStatus::Successful,
            response_bytes: Some(ResponseBytes {
                response_type: ID_PKIX_OCSP_BASIC,
                response: OctetString::new(basic.to_der().unwrap()).unwrap(),
            }),
        }
        .to_der()
        .unwrap()
    }

    fn delegated(p: &Pki, ocsp_signing: bool) -> (Certificate, PKey<Private>) {
        let mut spec = CertSpec::leaf(&["ocsp responder"], KeyKind::EcdsaP256, 30);
        spec.ocsp_signing = ocsp_signing;
        let c = Certified::issue(&spec, Some(&p.ca)).unwrap();
        let der = X509::from_pem(c.cert_pem.as_bytes()).unwrap().to_der().unwrap();
        (
            Certificate::from_der(&der).unwrap(),
            PKey::private_key_from_pem(c.key_pem.as_bytes()).unwrap(),
        )
    }

    #[test]
    fn request_names_the_certificate() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        assert_eq!(target.responders, vec!["http://127.0.0.1:1/ocsp".to_string()]);
        let req = OcspRequest::from_der(&target.request().unwrap()).unwrap();
        let id = &req.tbs_request.request_list[0].req_cert;
        assert!(target.matches(id));
        assert_eq!(id.hash_algorithm.oid, ID_SHA1);
        let from_chain = OcspTarget::from_chain(&[p.leaf.clone(), p.issuer.clone()]).unwrap();
        assert_eq!(from_chain.serial, target.serial);
        assert!(
            OcspTarget::from_chain(std::slice::from_ref(&p.leaf)).is_err(),
            "no issuer in the chain"
        );
    }

    #[test]
    fn good_fresh_response_signed_by_the_issuer_is_accepted() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        let der = respond(spec(&p, &target), &p.ca_key);
        let staple = target.check(&der, SystemTime::now()).unwrap();
        assert_eq!(staple.der, der);
        assert!(staple.is_fresh(SystemTime::now()));
        assert!(staple.age(SystemTime::now()) >= Duration::from_secs(59));
        // Refreshed at the latest halfway through the window (~29 min from now), sooner if asked.
        let r = staple.refresh_in(SystemTime::now(), None);
        assert!(r > Duration::from_secs(1700) && r < Duration::from_secs(1800), "{r:?}");
        assert_eq!(
            staple.refresh_in(SystemTime::now(), Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn revoked_unknown_and_stale_responses_are_refused() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        let now = SystemTime::now();
        let mut s = spec(&p, &target);
        s.status = CertStatus::revoked(RevokedInfo {
            revocation_time: time(now - Duration::from_secs(10)),
            revocation_reason: None,
        });
        let err = target.check(&respond(s, &p.ca_key), now).unwrap_err();
        assert!(matches!(err, Rejection::Revoked(_)), "{err}");
        assert_eq!(err.outcome(), "revoked");

        let mut s = spec(&p, &target);
        s.status = CertStatus::unknown();
        assert_eq!(
            target.check(&respond(s, &p.ca_key), now).unwrap_err().outcome(),
            "invalid"
        );

        let mut s = spec(&p, &target);
        s.this_update = now - Duration::from_secs(7200);
        s.next_update = Some(now - Duration::from_secs(1));
        assert!(matches!(
            target.check(&respond(s, &p.ca_key), now),
            Err(Rejection::Expired(_))
        ));

        let mut s = spec(&p, &target);
        s.this_update = now + Duration::from_secs(3600);
        s.next_update = Some(now + Duration::from_secs(7200));
        assert!(matches!(
            target.check(&respond(s, &p.ca_key), now),
            Err(Rejection::Expired(_))
        ));

        // Without nextUpdate: valid for an hour after thisUpdate.
        let mut s = spec(&p, &target);
        s.next_update = None;
        let der = respond(s, &p.ca_key);
        assert!(target.check(&der, now).is_ok());
        assert!(target.check(&der, now + Duration::from_secs(3600)).is_err());
    }

    #[test]
    fn forged_or_foreign_responses_are_refused() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        let now = SystemTime::now();
        // Signed by another key claiming to be the issuer.
        let other = PKey::private_key_from_pem(
            Certified::issue(&CertSpec::ca("mallory", KeyKind::EcdsaP256, 30), None)
                .unwrap()
                .key_pem
                .as_bytes(),
        )
        .unwrap();
        let err = target.check(&respond(spec(&p, &target), &other), now).unwrap_err();
        assert_eq!(err, Rejection::Invalid("bad signature".into()));
        // One flipped byte in the signed data.
        let mut der = respond(spec(&p, &target), &p.ca_key);
        let at = der.len() / 2;
        der[at] ^= 1;
        assert!(target.check(&der, now).is_err());
        // About another certificate of the same CA.
        let mut s = spec(&p, &target);
        s.cert_id.serial_number = x509_cert::serial_number::SerialNumber::new(&[1, 2, 3]).unwrap();
        let err = target.check(&respond(s, &p.ca_key), now).unwrap_err();
        assert!(err.to_string().contains("not about this certificate"), "{err}");
        // Garbage and error statuses.
        assert!(target.check(b"not der", now).is_err());
        let try_later = OcspResponse {
            response_status: OcspResponseStatus::TryLater,
            response_bytes: None,
        }
        .to_der()
        .unwrap();
        assert!(target
            .check(&try_later, now)
            .unwrap_err()
            .to_string()
            .contains("TryLater"));
    }

    #[test]
    fn delegated_responders_need_the_ocsp_signing_usage() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        let now = SystemTime::now();
        for (eku, ok) in [(true, true), (false, false)] {
            let (cert, key) = delegated(&p, eku);
            let mut s = spec(&p, &target);
            s.responder = ResponderId::ByName(cert.tbs_certificate.subject.clone());
            s.certs = Some(vec![cert]);
            let result = target.check(&respond(s, &key), now);
            assert_eq!(result.is_ok(), ok, "OCSPSigning={eku}: {result:?}");
        }
        // A delegated responder from another CA is refused.
        let stranger = pki();
        let (cert, key) = delegated(&stranger, true);
        let mut s = spec(&p, &target);
        s.responder = ResponderId::ByName(cert.tbs_certificate.subject.clone());
        s.certs = Some(vec![cert]);
        assert!(target.check(&respond(s, &key), now).is_err());
    }

    #[test]
    fn pki_made_responses_check_out() {
        use crate::pki::{ocsp_response, OcspStatus};
        let ca = Certified::issue(&CertSpec::ca("rsa CA", KeyKind::Rsa(2048), 30), None).unwrap();
        let leaf = Certified::issue(&CertSpec::leaf(&["localhost"], KeyKind::EcdsaP256, 30), Some(&ca)).unwrap();
        let target = OcspTarget::new(
            &X509::from_pem(leaf.cert_pem.as_bytes()).unwrap(),
            &X509::from_pem(ca.cert_pem.as_bytes()).unwrap(),
        )
        .unwrap();
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let make = |status, this: SystemTime, next: SystemTime| {
            ocsp_response(&leaf.cert_pem, &ca, status, this, Some(next)).unwrap()
        };
        let staple = target.check(&make(OcspStatus::Good, now, now + day), now).unwrap();
        assert!(staple.next_update.is_some());
        let revoked = target.check(&make(OcspStatus::Revoked, now, now + day), now);
        assert!(matches!(revoked, Err(Rejection::Revoked(_))), "{revoked:?}");
        let old = target.check(&make(OcspStatus::Good, now - 2 * day, now - day), now);
        assert!(matches!(old, Err(Rejection::Expired(_))), "{old:?}");
    }

    #[test]
    fn slot_keeps_the_last_good_response_until_revoked_or_expired() {
        let p = pki();
        let target = OcspTarget::new(&p.leaf, &p.issuer).unwrap();
        let good = respond(spec(&p, &target), &p.ca_key);
        let slot = StapleSlot {
            site: "s".into(),
            cert: "ecdsa_p256",
            field: "site[0].certificate[0]".into(),
            source: StapleSource::Responder("http://127.0.0.1:1/".into()),
            refresh: None,
            target,
            leaf_fingerprint: vec![],
            current: ArcSwapOption::empty(),
            stapled: AtomicU64::new(0),
        };
        let now = SystemTime::now();
        slot.accept(&good, now).unwrap();
        assert!(slot.accept(b"junk", now).is_err());
        assert!(slot.current().is_some(), "an invalid answer keeps the last good staple");
        assert!(!slot.drop_expired(now));
        assert!(slot.drop_expired(now + Duration::from_secs(7200)));
        assert!(slot.current().is_none());
        slot.accept(&good, now).unwrap();
        let mut s = spec(&p, &slot.target);
        s.status = CertStatus::revoked(RevokedInfo {
            revocation_time: time(now),
            revocation_reason: None,
        });
        assert!(slot.accept(&respond(s, &p.ca_key), now).is_err());
        assert!(slot.current().is_none(), "revoked drops the staple at once");
    }
}

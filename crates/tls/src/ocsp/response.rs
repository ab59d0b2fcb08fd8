//! Checking an OCSP response (RFC 6960) before it is stapled: successful, basic, signed by the
//! issuer or by a responder certificate the issuer delegated with `OCSPSigning`, about this
//! certificate, `good`, and fresh. Parsing is RustCrypto's `x509-ocsp`; hashes and signatures are
//! BoringSSL's. A response that passes becomes a [`Staple`], which also says when to fetch the
//! next one.

use super::oid::{
    ECDSA_SHA256, ECDSA_SHA384, ECDSA_SHA512, ED25519, ID_CE_EXT_KEY_USAGE, ID_KP_OCSP_SIGNING, ID_PKIX_OCSP_BASIC,
    ID_SHA1, ID_SHA256, ID_SHA384, ID_SHA512, RSA_SHA256, RSA_SHA384, RSA_SHA512,
};
use super::request::OcspTarget;
use boring::error::ErrorStack;
use boring::hash::{hash, MessageDigest};
use boring::pkey::{PKey, Public};
use boring::sign::Verifier;
use boring::x509::X509;
use std::time::{Duration, SystemTime};
use tlsgate_error::{Classify, Side};
use x509_cert::der::asn1::ObjectIdentifier;
use x509_cert::der::{Decode, Encode, Header, Reader, SliceReader};
use x509_cert::ext::pkix::ExtendedKeyUsage;
use x509_ocsp::{BasicOcspResponse, CertId, CertStatus, OcspResponse, OcspResponseStatus, ResponderId};

/// How far in the future a response's thisUpdate may be (clock skew between us and the responder).
pub const CLOCK_SKEW: Duration = Duration::from_secs(300);
/// How long a response without nextUpdate ("newer information is always available") is stapled.
pub const VALIDITY_WITHOUT_NEXT_UPDATE: Duration = Duration::from_secs(3600);

/// Why a response is not stapled.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// Not a usable response: malformed, an error status, wrong certificate, bad signature,
    /// unknown signer, status `unknown`.
    #[error("invalid OCSP response: {0}")]
    Invalid(#[source] Invalid),
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

/// The responder answered, but not with something to staple: an upstream failure. Asking again
/// is harmless (a fetch changes nothing) and may get a good answer, except after `revoked`.
impl Classify for Rejection {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Rejection::Invalid(_) => "ocsp_invalid",
            Rejection::Expired(_) => "ocsp_stale",
            Rejection::Revoked(_) => "ocsp_revoked",
        }
    }

    fn retry_safe(&self) -> bool {
        !matches!(self, Rejection::Revoked(_))
    }
}

/// What makes a response unusable.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// Not DER of an OCSPResponse.
    #[error("not an OCSP response: {0}")]
    NotOcsp(#[source] x509_cert::der::Error),
    /// The responder answered with an error status.
    #[error("responder status {0:?}")]
    Status(OcspResponseStatus),
    /// Status `successful` without responseBytes.
    #[error("successful response without a body")]
    NoBody,
    /// Not `id-pkix-ocsp-basic`.
    #[error("unsupported response type {0}")]
    ResponseType(ObjectIdentifier),
    /// The BasicOCSPResponse does not parse.
    #[error("malformed basic response: {0}")]
    Malformed(#[source] x509_cert::der::Error),
    /// The signed part of the BasicOCSPResponse cannot be found.
    #[error("malformed basic response")]
    NoSignedData,
    /// The signature BIT STRING has unused bits.
    #[error("signature is not a whole number of bytes")]
    SignatureBits,
    /// The signature does not verify.
    #[error("bad signature")]
    BadSignature,
    /// No SingleResponse names this certificate.
    #[error("the response is not about this certificate")]
    OtherCertificate,
    /// Status `unknown`.
    #[error("the responder does not know this certificate")]
    UnknownCertificate,
    /// A signature algorithm tlsgate does not verify (SHA-1 included).
    #[error("unsupported signature algorithm {0}")]
    SignatureAlgorithm(ObjectIdentifier),
    /// The signature algorithm is for another key type than the signer's.
    #[error("the signature algorithm does not match the signer's key")]
    KeyMismatch,
    /// A delegated responder's certificate does not parse.
    #[error("responder certificate: {0}")]
    ResponderCertificate(#[source] ErrorStack),
    /// A delegated responder's certificate could not be re-encoded.
    #[error("responder certificate: {0}")]
    ResponderEncoding(#[source] x509_cert::der::Error),
    /// The delegated responder was not issued by the certificate's issuer.
    #[error("the responder certificate is not issued by the certificate's issuer")]
    ResponderIssuer,
    /// The delegated responder lacks `OCSPSigning`.
    #[error("the responder certificate is not authorised for OCSP signing")]
    ResponderUsage,
    /// The delegated responder's certificate is expired or not yet valid.
    #[error("the responder certificate is outside its validity period")]
    ResponderValidity,
    /// Signed by someone else.
    #[error("signed by a responder that is neither the issuer nor delegated by it")]
    UnknownSigner,
    /// BoringSSL failed while verifying.
    #[error("{0}")]
    Crypto(#[source] ErrorStack),
}

impl Classify for Invalid {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        "ocsp_invalid"
    }

    fn retry_safe(&self) -> bool {
        true
    }
}

impl From<Invalid> for Rejection {
    fn from(invalid: Invalid) -> Self {
        Rejection::Invalid(invalid)
    }
}

/// `2026-01-31T12:00:00Z`, for logs.
pub fn format_time(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
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

impl OcspTarget {
    /// Checks an OCSPResponse (DER): successful, basic, signed by the issuer or a delegated
    /// responder, about this certificate, `good`, and fresh at `now`.
    pub fn check(&self, der: &[u8], now: SystemTime) -> Result<Staple, Rejection> {
        let response = OcspResponse::from_der(der).map_err(Invalid::NotOcsp)?;
        if response.response_status != OcspResponseStatus::Successful {
            return Err(Invalid::Status(response.response_status).into());
        }
        let bytes = response.response_bytes.ok_or(Invalid::NoBody)?;
        if bytes.response_type != ID_PKIX_OCSP_BASIC {
            return Err(Invalid::ResponseType(bytes.response_type).into());
        }
        let basic_der = bytes.response.as_bytes();
        let basic = BasicOcspResponse::from_der(basic_der).map_err(Invalid::Malformed)?;
        let tbs = first_element(basic_der).ok_or(Invalid::NoSignedData)?;
        let signer = self.signer(&basic, now)?;
        let signature = basic.signature.as_bytes().ok_or(Invalid::SignatureBits)?;
        if !verify_signature(&signer, &basic.signature_algorithm.oid, signature, tbs)? {
            return Err(Invalid::BadSignature.into());
        }
        let single = basic
            .tbs_response_data
            .responses
            .iter()
            .find(|r| self.matches(&r.cert_id))
            .ok_or(Invalid::OtherCertificate)?;
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
            CertStatus::Unknown(_) => return Err(Invalid::UnknownCertificate.into()),
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

    /// Whether `id` names this certificate (under any hash the responder chose).
    pub(crate) fn matches(&self, id: &CertId) -> bool {
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
    fn signer(&self, basic: &BasicOcspResponse, now: SystemTime) -> Result<PKey<Public>, Invalid> {
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
            let der = cert.to_der().map_err(Invalid::ResponderEncoding)?;
            let x509 = X509::from_der(&der).map_err(Invalid::ResponderCertificate)?;
            if !x509.verify(&self.issuer_key).unwrap_or(false) {
                return Err(Invalid::ResponderIssuer);
            }
            let delegated = tbs.extensions.iter().flatten().any(|ext| {
                ext.extn_id == ID_CE_EXT_KEY_USAGE
                    && ExtendedKeyUsage::from_der(ext.extn_value.as_bytes())
                        .is_ok_and(|eku| eku.0.contains(&ID_KP_OCSP_SIGNING))
            });
            if !delegated {
                return Err(Invalid::ResponderUsage);
            }
            let validity = &tbs.validity;
            if now < validity.not_before.to_system_time() || now > validity.not_after.to_system_time() {
                return Err(Invalid::ResponderValidity);
            }
            return x509.public_key().map_err(Invalid::Crypto);
        }
        Err(Invalid::UnknownSigner)
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
) -> Result<bool, Invalid> {
    let digest = match *alg {
        ECDSA_SHA256 | RSA_SHA256 => Some(MessageDigest::sha256()),
        ECDSA_SHA384 | RSA_SHA384 => Some(MessageDigest::sha384()),
        ECDSA_SHA512 | RSA_SHA512 => Some(MessageDigest::sha512()),
        ED25519 => None,
        _ => return Err(Invalid::SignatureAlgorithm(*alg)),
    };
    let expected_key = match *alg {
        ECDSA_SHA256 | ECDSA_SHA384 | ECDSA_SHA512 => boring::pkey::Id::EC,
        ED25519 => boring::pkey::Id::ED25519,
        _ => boring::pkey::Id::RSA,
    };
    if key.id() != expected_key {
        return Err(Invalid::KeyMismatch);
    }
    let verifier = match digest {
        Some(md) => Verifier::new(md, key),
        None => Verifier::new_without_digest(key),
    };
    let mut verifier = verifier.map_err(Invalid::Crypto)?;
    Ok(verifier.verify_oneshot(signature, data).unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocsp::test_responses::{delegated, pki, respond, spec, time};
    use crate::pki::{CertSpec, Certified, KeyKind};
    use x509_ocsp::RevokedInfo;

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
        assert!(matches!(err, Rejection::Invalid(Invalid::BadSignature)), "{err}");
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
    fn rejections_are_upstream_and_retryable_unless_revoked() {
        let invalid = Rejection::from(Invalid::BadSignature);
        assert_eq!(
            (invalid.side(), invalid.kind(), invalid.retry_safe()),
            (Side::Upstream, "ocsp_invalid", true)
        );
        assert!(std::error::Error::source(&invalid).is_some());
        let revoked = Rejection::Revoked("revoked at then".into());
        assert_eq!((revoked.kind(), revoked.retry_safe()), ("ocsp_revoked", false));
    }
}

//! What a key server checks before it issues a delegated credential (RFC 9345): the request
//! must be the RFC's credential signing input, for a certificate of the key it names that
//! carries the DelegationUsage extension, with a credential key fit for its scheme and a validity
//! inside the server's limit. Only then is it signed; so a gateway, compromised or not, obtains
//! credentials for its own certificates, short-lived, and nothing else.
//!
//! The signed message starts with its own context string (`"TLS, server delegated
//! credentials"`), so a signature made here can never stand for a TLS 1.3 CertificateVerify or
//! any other signed object.

use crate::algorithms;
use crate::codec::KeyId;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_tls::keys::KeyType;
use tlsgate_wire::delegated_credential::{parse_signing_input, DcError, DELEGATION_USAGE_OID, MAX_VALIDITY_SECS};

/// The longest validity the key server grants when its configuration says nothing.
pub const DEFAULT_MAX_VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// Why a credential was refused (each a `tlsgate_keyserver_refused_total{reason}` label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `[delegation] enabled` is off.
    Disabled,
    /// Not the RFC 9345 signing input.
    NotCredential(DcError),
    /// The algorithm in the message differs from the request's.
    AlgorithmMismatch,
    /// The certificate does not parse.
    Certificate,
    /// The certificate's public key is not the requested key.
    KeyMismatch,
    /// No DelegationUsage extension in the certificate.
    NoDelegationUsage,
    /// A KeyUsage extension without digitalSignature.
    NoDigitalSignature,
    /// The credential's public key does not parse, or cannot sign with its stated scheme (or
    /// the scheme is not a TLS 1.3 one).
    CredentialKey,
    /// The credential has already expired.
    Expired,
    /// The credential would be valid longer than the server grants.
    TooLong {
        /// Its remaining validity.
        asked: Duration,
        /// The limit.
        max: Duration,
    },
    /// The credential would outlive its certificate.
    OutlivesCertificate,
}

impl Refusal {
    /// Metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Disabled => "delegation_disabled",
            Refusal::NotCredential(_) => "not_credential_input",
            Refusal::AlgorithmMismatch => "credential_algorithm_mismatch",
            Refusal::Certificate => "credential_certificate_unparsable",
            Refusal::KeyMismatch => "credential_certificate_other_key",
            Refusal::NoDelegationUsage => "no_delegation_usage",
            Refusal::NoDigitalSignature => "no_digital_signature_usage",
            Refusal::CredentialKey => "credential_public_key",
            Refusal::Expired => "credential_expired",
            Refusal::TooLong { .. } => "credential_validity_too_long",
            Refusal::OutlivesCertificate => "credential_outlives_certificate",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Disabled => {
                f.write_str("delegated credentials are not enabled on this key server ([delegation] enabled)")
            }
            Refusal::NotCredential(e) => write!(f, "not a delegated-credential signing input: {e}"),
            Refusal::AlgorithmMismatch => f.write_str("the signing input names another algorithm than the request"),
            Refusal::Certificate => f.write_str("the certificate in the signing input does not parse"),
            Refusal::KeyMismatch => f.write_str("the certificate's public key is not the requested key"),
            Refusal::NoDelegationUsage => {
                write!(
                    f,
                    "the certificate has no DelegationUsage extension ({DELEGATION_USAGE_OID})"
                )
            }
            Refusal::NoDigitalSignature => f.write_str("the certificate's KeyUsage lacks digitalSignature"),
            Refusal::CredentialKey => {
                f.write_str("the credential's public key does not parse or does not fit its TLS 1.3 scheme")
            }
            Refusal::Expired => f.write_str("the credential has already expired"),
            Refusal::TooLong { asked, max } => write!(
                f,
                "the credential would be valid for {} s, more than the {} s granted",
                asked.as_secs(),
                max.as_secs()
            ),
            Refusal::OutlivesCertificate => f.write_str("the credential would outlive its certificate"),
        }
    }
}

impl std::error::Error for Refusal {}

/// The key server's delegation policy.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Whether credentials are issued at all.
    pub enabled: bool,
    /// The longest remaining validity granted (at most RFC 9345's seven days).
    pub max_validity: Duration,
}

impl Policy {
    /// Checks a delegate request for the key `key_id` (of type `key_type`), asking for
    /// `algorithm`, at `now`; on success the payload may be signed as it is.
    pub fn check(
        &self,
        key_id: &KeyId,
        key_type: KeyType,
        algorithm: u16,
        payload: &[u8],
        now: SystemTime,
    ) -> Result<(), Refusal> {
        if !self.enabled {
            return Err(Refusal::Disabled);
        }
        let input = parse_signing_input(payload).map_err(Refusal::NotCredential)?;
        if input.algorithm != algorithm {
            return Err(Refusal::AlgorithmMismatch);
        }
        let (rest, cert) = x509_parser::parse_x509_certificate(input.certificate).map_err(|_| Refusal::Certificate)?;
        if !rest.is_empty() {
            return Err(Refusal::Certificate);
        }
        let spki_digest = boring::hash::hash(boring::hash::MessageDigest::sha256(), cert.public_key().raw)
            .map_err(|_| Refusal::Certificate)?;
        if spki_digest[..] != key_id[..] {
            return Err(Refusal::KeyMismatch);
        }
        if !cert
            .extensions()
            .iter()
            .any(|e| e.oid.to_id_string() == DELEGATION_USAGE_OID)
        {
            return Err(Refusal::NoDelegationUsage);
        }
        match cert.key_usage() {
            Ok(Some(ku)) if !ku.value.digital_signature() => return Err(Refusal::NoDigitalSignature),
            Ok(_) => {}
            Err(_) => return Err(Refusal::Certificate),
        }
        let credential = &input.credential;
        let dc_key = boring::pkey::PKey::public_key_from_der(credential.spki).map_err(|_| Refusal::CredentialKey)?;
        let scheme = credential.dc_cert_verify_algorithm;
        // TLS 1.3 handshake schemes only: no PKCS#1 v1.5 (RFC 8446 §4.2.3).
        if matches!(scheme, 0x0401 | 0x0501 | 0x0601) || !algorithms::allowed(KeyType::of(&dc_key), scheme) {
            return Err(Refusal::CredentialKey);
        }
        // The certificate key signs the credential: the request's algorithm was checked against
        // the key type by the caller; here only that it is a TLS 1.3 one.
        if matches!(algorithm, 0x0401 | 0x0501 | 0x0601) || !algorithms::allowed(key_type, algorithm) {
            return Err(Refusal::AlgorithmMismatch);
        }
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let not_before = u64::try_from(cert.validity().not_before.timestamp()).unwrap_or(0);
        let not_after = u64::try_from(cert.validity().not_after.timestamp()).unwrap_or(0);
        let expires = not_before.saturating_add(u64::from(credential.valid_time));
        let now = secs(now);
        if expires <= now {
            return Err(Refusal::Expired);
        }
        let max = self.max_validity.min(Duration::from_secs(MAX_VALIDITY_SECS));
        let asked = Duration::from_secs(expires - now);
        if asked > max {
            return Err(Refusal::TooLong { asked, max });
        }
        if expires > not_after {
            return Err(Refusal::OutlivesCertificate);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::ec::{EcGroup, EcKey};
    use boring::nid::Nid;
    use boring::pkey::PKey;
    use tlsgate_tls::pki::{CertSpec, Certified, KeyKind, RawExtension};
    use tlsgate_wire::delegated_credential::{signing_input, Credential};

    fn delegation_usage() -> RawExtension {
        RawExtension {
            oid: DELEGATION_USAGE_OID.into(),
            der: vec![0x05, 0x00],
        }
    }

    struct Fixture {
        cert_der: Vec<u8>,
        key_id: KeyId,
        not_before: u64,
        dc_spki: Vec<u8>,
    }

    fn fixture(extra: Vec<RawExtension>) -> Fixture {
        let mut spec = CertSpec::leaf(&["dc.test"], KeyKind::EcdsaP256, 30);
        spec.extra = extra;
        let leaf = Certified::issue(&spec, None).unwrap();
        let cert = leaf.certificate();
        let key_id = crate::keystore::key_id(&cert.public_key().unwrap()).unwrap();
        let cert_der = cert.to_der().unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
        let not_before = parsed.validity().not_before.timestamp() as u64;
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let dc_key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
        Fixture {
            cert_der,
            key_id,
            not_before,
            dc_spki: dc_key.public_key_to_der().unwrap(),
        }
    }

    fn policy() -> Policy {
        Policy {
            enabled: true,
            max_validity: Duration::from_secs(24 * 3600),
        }
    }

    /// A request whose credential ends `lifetime` after `now`.
    fn input(f: &Fixture, now: SystemTime, lifetime: u64, scheme: u16) -> Vec<u8> {
        let now = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let credential = Credential {
            valid_time: u32::try_from(now + lifetime - f.not_before).unwrap(),
            dc_cert_verify_algorithm: scheme,
            spki: &f.dc_spki,
        };
        signing_input(&f.cert_der, &credential, 0x0403).unwrap()
    }

    #[test]
    fn a_credential_for_a_delegation_certificate_within_the_limit_is_accepted() {
        let f = fixture(vec![delegation_usage()]);
        let now = SystemTime::now();
        let ok = input(&f, now, 3600, 0x0403);
        assert_eq!(policy().check(&f.key_id, KeyType::EcdsaP256, 0x0403, &ok, now), Ok(()));
    }

    #[test]
    fn every_rule_refuses_what_breaks_it() {
        let f = fixture(vec![delegation_usage()]);
        let now = SystemTime::now();
        let p = policy();
        let check = |key_id: &KeyId, alg, payload: &[u8]| p.check(key_id, KeyType::EcdsaP256, alg, payload, now);
        let ok = input(&f, now, 3600, 0x0403);
        let disabled = Policy { enabled: false, ..p };
        assert_eq!(
            disabled.check(&f.key_id, KeyType::EcdsaP256, 0x0403, &ok, now),
            Err(Refusal::Disabled)
        );
        assert_eq!(check(&[0; 32], 0x0403, &ok), Err(Refusal::KeyMismatch));
        assert_eq!(check(&f.key_id, 0x0503, &ok), Err(Refusal::AlgorithmMismatch));
        assert!(matches!(
            check(&f.key_id, 0x0403, b"hello"),
            Err(Refusal::NotCredential(_))
        ));
        assert!(matches!(
            check(&f.key_id, 0x0403, &input(&f, now, 3 * 24 * 3600, 0x0403)),
            Err(Refusal::TooLong { .. })
        ));
        // A credential key that cannot make its stated scheme (an EC key for RSA-PSS), or a
        // PKCS#1 scheme.
        assert_eq!(
            check(&f.key_id, 0x0403, &input(&f, now, 3600, 0x0804)),
            Err(Refusal::CredentialKey)
        );
        assert_eq!(
            check(&f.key_id, 0x0403, &input(&f, now, 3600, 0x0401)),
            Err(Refusal::CredentialKey)
        );
        // Expired: its end is before now.
        let later = now + Duration::from_secs(7200);
        assert_eq!(
            p.check(&f.key_id, KeyType::EcdsaP256, 0x0403, &ok, later),
            Err(Refusal::Expired)
        );
        // Beyond the certificate's notAfter (30 days): a server allowing long credentials still refuses.
        let long = Policy {
            enabled: true,
            max_validity: Duration::from_secs(40 * 24 * 3600),
        };
        let near_end = now + Duration::from_secs(29 * 24 * 3600);
        let past_cert = input(&f, near_end, 5 * 24 * 3600, 0x0403);
        assert_eq!(
            long.check(&f.key_id, KeyType::EcdsaP256, 0x0403, &past_cert, near_end),
            Err(Refusal::OutlivesCertificate)
        );
        // The RFC's seven days bound the configured limit.
        let eight_days = input(&f, now, 8 * 24 * 3600, 0x0403);
        assert!(matches!(
            long.check(&f.key_id, KeyType::EcdsaP256, 0x0403, &eight_days, now),
            Err(Refusal::TooLong { max, .. }) if max.as_secs() == MAX_VALIDITY_SECS
        ));
    }

    #[test]
    fn a_certificate_without_delegation_usage_is_refused() {
        let f = fixture(Vec::new());
        let now = SystemTime::now();
        let payload = input(&f, now, 3600, 0x0403);
        assert_eq!(
            policy().check(&f.key_id, KeyType::EcdsaP256, 0x0403, &payload, now),
            Err(Refusal::NoDelegationUsage)
        );
    }
}

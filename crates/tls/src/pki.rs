//! Throwaway PKI: the demo gateway's CA and leaves, and the certificates tests need (expired,
//! expiring, intermediates, mismatched keys). Built with rcgen; RSA keys come from BoringSSL.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::time::{Duration, SystemTime};

/// Key algorithm of a generated certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA P-256 with SHA-256.
    EcdsaP256,
    /// ECDSA P-384 with SHA-384.
    EcdsaP384,
    /// RSA of the given size with SHA-256.
    Rsa(u32),
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
#[error("certificate generation failed: {0}")]
pub struct PkiError(String);

fn e(err: impl std::fmt::Display) -> PkiError {
    PkiError(err.to_string())
}

/// A generated key with its PEM.
pub struct GeneratedKey {
    /// rcgen's signing handle; None for keys rcgen refuses to load (RSA under 2048 bits, made
    /// only to test that weak keys are caught), which can still be certified as leaves.
    pub pair: Option<KeyPair>,
    /// SubjectPublicKeyInfo DER.
    pub spki_der: Vec<u8>,
    /// PKCS#8 PEM.
    pub pem: String,
}

/// Generates a key of `kind`.
pub fn generate_key(kind: KeyKind) -> Result<GeneratedKey, PkiError> {
    let pair = match kind {
        KeyKind::EcdsaP256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(e)?,
        KeyKind::EcdsaP384 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).map_err(e)?,
        KeyKind::Rsa(bits) => {
            let rsa = boring::rsa::Rsa::generate(bits).map_err(e)?;
            let pkey = boring::pkey::PKey::from_rsa(rsa).map_err(e)?;
            let pem = String::from_utf8(pkey.private_key_to_pem_pkcs8().map_err(e)?).map_err(e)?;
            let spki_der = pkey.public_key_to_der().map_err(e)?;
            match KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256) {
                Ok(pair) => pair,
                Err(_) if bits < 2048 => {
                    return Ok(GeneratedKey {
                        pair: None,
                        spki_der,
                        pem,
                    })
                }
                Err(err) => return Err(e(err)),
            }
        }
    };
    let pem = pair.serialize_pem();
    let spki_der = rcgen::PublicKeyData::subject_public_key_info(&pair);
    Ok(GeneratedKey {
        pair: Some(pair),
        spki_der,
        pem,
    })
}

/// What to put in a certificate.
#[derive(Debug, Clone)]
pub struct CertSpec {
    /// Common name.
    pub common_name: String,
    /// DNS names and IP addresses for subjectAltName (leaves).
    pub names: Vec<String>,
    /// Key algorithm.
    pub key: KeyKind,
    /// Validity start.
    pub not_before: SystemTime,
    /// Validity end.
    pub not_after: SystemTime,
    /// A CA certificate (can sign others).
    pub is_ca: bool,
    /// OCSP responder URL for the Authority Information Access extension (leaves).
    pub ocsp_url: Option<String>,
    /// A delegated OCSP responder certificate (extended key usage `OCSPSigning`, no server auth).
    pub ocsp_signing: bool,
}

impl CertSpec {
    /// A leaf for `names`, valid from an hour ago for `days`.
    pub fn leaf(names: &[&str], key: KeyKind, days: u64) -> Self {
        let now = SystemTime::now();
        Self {
            common_name: names.first().copied().unwrap_or("localhost").to_string(),
            names: names.iter().map(|s| s.to_string()).collect(),
            key,
            not_before: now - Duration::from_secs(3600),
            not_after: now + Duration::from_secs(days * 86_400),
            is_ca: false,
            ocsp_url: None,
            ocsp_signing: false,
        }
    }

    /// A CA valid from an hour ago for `days`.
    pub fn ca(common_name: &str, key: KeyKind, days: u64) -> Self {
        Self {
            common_name: common_name.into(),
            names: vec![],
            is_ca: true,
            ..Self::leaf(&[], key, days)
        }
    }
}

/// A certificate with its key, able to issue others when it is a CA.
pub struct Certified {
    /// PEM of the certificate alone.
    pub cert_pem: String,
    /// PEM of its private key.
    pub key_pem: String,
    params: CertificateParams,
    key: Option<KeyPair>,
}

impl Certified {
    /// Issues a certificate for `spec`, signed by `issuer` (or self-signed when `None`).
    pub fn issue(spec: &CertSpec, issuer: Option<&Certified>) -> Result<Self, PkiError> {
        let key = generate_key(spec.key)?;
        Self::issue_with_key(spec, key, issuer)
    }

    /// Like [`Certified::issue`] with a given key.
    pub fn issue_with_key(spec: &CertSpec, key: GeneratedKey, issuer: Option<&Certified>) -> Result<Self, PkiError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, spec.common_name.clone());
        dn.push(DnType::OrganizationName, "tlsgate");
        params.distinguished_name = dn;
        params.not_before = spec.not_before.into();
        params.not_after = spec.not_after.into();
        params.serial_number = Some(rand::random::<u64>().into());
        if spec.is_ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
        } else {
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![if spec.ocsp_signing {
                ExtendedKeyUsagePurpose::OcspSigning
            } else {
                ExtendedKeyUsagePurpose::ServerAuth
            }];
            for name in &spec.names {
                params.subject_alt_names.push(match name.parse::<std::net::IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName(name.clone().try_into().map_err(e)?),
                });
            }
        }
        if let Some(url) = &spec.ocsp_url {
            params.custom_extensions.push(ocsp_aia(url)?);
        }
        let cert = match (issuer, &key.pair) {
            (Some(ca), _) => {
                let ca_key = ca
                    .key
                    .as_ref()
                    .ok_or_else(|| PkiError("the issuer has no signing key".into()))?;
                let signer = Issuer::from_params(&ca.params, ca_key);
                let public = rcgen::SubjectPublicKeyInfo::from_der(&key.spki_der).map_err(e)?;
                params.signed_by(&public, &signer).map_err(e)?
            }
            (None, Some(pair)) => params.self_signed(pair).map_err(e)?,
            (None, None) => return Err(PkiError("this key cannot self-sign".into())),
        };
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.pem,
            params,
            key: key.pair,
        })
    }
}

/// An Authority Information Access extension naming `url` as the OCSP responder.
fn ocsp_aia(url: &str) -> Result<rcgen::CustomExtension, PkiError> {
    use x509_cert::der::asn1::Ia5String;
    use x509_cert::der::Encode;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{AccessDescription, AuthorityInfoAccessSyntax};
    let aia = AuthorityInfoAccessSyntax(vec![AccessDescription {
        access_method: crate::ocsp::ID_AD_OCSP,
        access_location: GeneralName::UniformResourceIdentifier(Ia5String::new(url).map_err(e)?),
    }]);
    Ok(rcgen::CustomExtension::from_oid_content(
        &[1, 3, 6, 1, 5, 5, 7, 1, 1],
        aia.to_der().map_err(e)?,
    ))
}

/// What a response made by [`ocsp_response`] says about the certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OcspStatus {
    /// Not revoked.
    Good,
    /// Revoked (at thisUpdate, no reason).
    Revoked,
    /// Unknown to the responder.
    Unknown,
}

/// An OCSP response (DER) about the leaf `leaf_pem`, signed by its issuer `issuer` (responder ID
/// by name), saying `status` with the given thisUpdate and nextUpdate. For tests that need stale
/// or short-lived responses, which real responders do not produce on demand.
pub fn ocsp_response(
    leaf_pem: &str,
    issuer: &Certified,
    status: OcspStatus,
    this_update: SystemTime,
    next_update: Option<SystemTime>,
) -> Result<Vec<u8>, PkiError> {
    use crate::ocsp::{OcspTarget, ECDSA_SHA256, ID_PKIX_OCSP_BASIC, RSA_SHA256};
    use boring::x509::X509;
    use x509_cert::der::asn1::{BitString, GeneralizedTime, OctetString};
    use x509_cert::der::{Any, Decode, Encode};
    use x509_cert::spki::AlgorithmIdentifierOwned;
    use x509_ocsp::{
        BasicOcspResponse, CertStatus, OcspGeneralizedTime, OcspResponse, OcspResponseStatus, ResponderId,
        ResponseBytes, ResponseData, RevokedInfo, SingleResponse, Version,
    };
    // GeneralizedTime holds whole seconds.
    let time = |t: SystemTime| -> Result<OcspGeneralizedTime, PkiError> {
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).map_err(e)?.as_secs();
        let whole = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        Ok(OcspGeneralizedTime(
            GeneralizedTime::from_system_time(whole).map_err(e)?,
        ))
    };
    let leaf = X509::from_pem(leaf_pem.as_bytes()).map_err(e)?;
    let issuer_cert = X509::from_pem(issuer.cert_pem.as_bytes()).map_err(e)?;
    let target = OcspTarget::new(&leaf, &issuer_cert).map_err(PkiError)?;
    let issuer_name = x509_cert::Certificate::from_der(&issuer_cert.to_der().map_err(e)?)
        .map_err(e)?
        .tbs_certificate
        .subject;
    let cert_status = match status {
        OcspStatus::Good => CertStatus::good(),
        OcspStatus::Revoked => CertStatus::revoked(RevokedInfo {
            revocation_time: time(this_update)?,
            revocation_reason: None,
        }),
        OcspStatus::Unknown => CertStatus::unknown(),
    };
    let data = ResponseData {
        version: Version::V1,
        responder_id: ResponderId::ByName(issuer_name),
        produced_at: time(SystemTime::now())?,
        responses: vec![SingleResponse {
            cert_id: target.cert_id().map_err(PkiError)?,
            cert_status,
            this_update: time(this_update)?,
            next_update: next_update.map(time).transpose()?,
            single_extensions: None,
        }],
        response_extensions: None,
    };
    let key = boring::pkey::PKey::private_key_from_pem(issuer.key_pem.as_bytes()).map_err(e)?;
    let algorithm = match key.id() {
        boring::pkey::Id::EC => AlgorithmIdentifierOwned {
            oid: ECDSA_SHA256,
            parameters: None,
        },
        _ => AlgorithmIdentifierOwned {
            oid: RSA_SHA256,
            parameters: Some(Any::null()),
        },
    };
    let tbs = data.to_der().map_err(e)?;
    let mut signer = boring::sign::Signer::new(boring::hash::MessageDigest::sha256(), &key).map_err(e)?;
    let signature = signer.sign_oneshot_to_vec(&tbs).map_err(e)?;
    let basic = BasicOcspResponse {
        tbs_response_data: data,
        signature_algorithm: algorithm,
        signature: BitString::from_bytes(&signature).map_err(e)?,
        certs: None,
    };
    OcspResponse {
        response_status: OcspResponseStatus::Successful,
        response_bytes: Some(ResponseBytes {
            response_type: ID_PKIX_OCSP_BASIC,
            response: OctetString::new(basic.to_der().map_err(e)?).map_err(e)?,
        }),
    }
    .to_der()
    .map_err(e)
}

/// The demo gateway's PKI: a CA, an ECDSA P-256 leaf and an RSA-2048 leaf for localhost.
pub struct DemoPki {
    /// The CA (its PEM goes to `ca.pem`).
    pub ca: Certified,
    /// ECDSA leaf.
    pub ecdsa: Certified,
    /// RSA leaf.
    pub rsa: Certified,
}

/// Generates the demo PKI.
pub fn demo_pki() -> Result<DemoPki, PkiError> {
    let ca = Certified::issue(&CertSpec::ca("tlsgate demo CA", KeyKind::EcdsaP256, 3650), None)?;
    let names = ["localhost", "127.0.0.1", "::1"];
    let ecdsa = Certified::issue(&CertSpec::leaf(&names, KeyKind::EcdsaP256, 365), Some(&ca))?;
    let rsa = Certified::issue(&CertSpec::leaf(&names, KeyKind::Rsa(2048), 365), Some(&ca))?;
    Ok(DemoPki { ca, ecdsa, rsa })
}

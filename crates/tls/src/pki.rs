//! Throwaway PKI: the demo gateway's CA and leaves, and the certificates tests and the lab need
//! (expired, expiring, intermediates, delegated OCSP responders, weak keys, padded chains), plus
//! OCSP responses about them. Built on BoringSSL (`boring::x509`), the library tlsgate links for
//! TLS anyway.
//!
//! What a certificate holds (as the rcgen-built ones of earlier versions did): subject CN and
//! `O=tlsgate`, a random 64-bit serial; a CA has a subject key identifier, critical basic
//! constraints `CA:TRUE` and critical key usage keyCertSign + cRLSign + digitalSignature; a leaf
//! has its names (DNS or IP) as subjectAltName, critical key usage digitalSignature and extended
//! key usage serverAuth (or OCSPSigning for a delegated responder). The issuer signs with SHA-256
//! (SHA-384 for a P-384 issuer).

use boring::asn1::Asn1Time;
use boring::bn::{BigNum, MsbOption};
use boring::ec::{EcGroup, EcKey};
use boring::error::ErrorStack;
use boring::hash::MessageDigest;
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use boring::rsa::Rsa;
use boring::x509::extension::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName, SubjectKeyIdentifier,
};
use boring::x509::{X509Builder, X509Extension, X509NameBuilder, X509Ref, X509};
use std::time::{Duration, SystemTime};
use tlsgate_error::{Classify, Side};

/// Key algorithm of a generated certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA P-256 with SHA-256.
    EcdsaP256,
    /// ECDSA P-384 with SHA-384.
    EcdsaP384,
    /// RSA of the given size with SHA-256.
    Rsa(u32),
    /// ML-DSA of one parameter set (pure ML-DSA, no pre-hash; `mldsa.rs`).
    MlDsa(crate::mldsa::Level),
}

impl KeyKind {
    /// The digest a key of this kind signs certificates with (none: the whole TBSCertificate).
    fn digest(self) -> MessageDigest {
        match self {
            KeyKind::EcdsaP384 => MessageDigest::sha384(),
            KeyKind::EcdsaP256 | KeyKind::Rsa(_) => MessageDigest::sha256(),
            KeyKind::MlDsa(_) => crate::ffi::no_digest(),
        }
    }
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// BoringSSL refused (key generation, a field, an extension, signing, PEM).
    #[error("certificate generation failed: {0}")]
    Boring(#[from] ErrorStack),
    /// A DER structure (an extension, an OCSP response) could not be encoded.
    #[error("certificate generation failed: DER encoding: {0}")]
    Der(#[from] x509_cert::der::Error),
    /// The OCSP request fields of a certificate could not be computed.
    #[error("certificate generation failed: {0}")]
    Ocsp(#[from] crate::ocsp::OcspError),
    /// A time before 1970 (or out of range).
    #[error("certificate generation failed: time out of range")]
    Time,
}

impl Classify for PkiError {
    fn side(&self) -> Side {
        Side::Internal
    }

    fn kind(&self) -> &'static str {
        match self {
            PkiError::Boring(_) => "pki_boring",
            PkiError::Der(_) => "pki_der",
            PkiError::Ocsp(_) => "pki_ocsp",
            PkiError::Time => "pki_time",
        }
    }
}

/// A generated key with its PEM.
pub struct GeneratedKey {
    /// The private key.
    pub key: PKey<Private>,
    /// Its kind.
    pub kind: KeyKind,
    /// SubjectPublicKeyInfo DER.
    pub spki_der: Vec<u8>,
    /// PKCS#8 PEM.
    pub pem: String,
}

/// Generates a key of `kind` (RSA of any size, weak ones included: tests need them).
pub fn generate_key(kind: KeyKind) -> Result<GeneratedKey, PkiError> {
    let ec = |curve: Nid| -> Result<PKey<Private>, ErrorStack> {
        let group = EcGroup::from_curve_name(curve)?;
        PKey::from_ec_key(EcKey::generate(&group)?)
    };
    let key = match kind {
        KeyKind::EcdsaP256 => ec(Nid::X9_62_PRIME256V1)?,
        KeyKind::EcdsaP384 => ec(Nid::SECP384R1)?,
        KeyKind::Rsa(bits) => PKey::from_rsa(Rsa::generate(bits)?)?,
        KeyKind::MlDsa(level) => crate::mldsa::generate(level)?,
    };
    let pem = String::from_utf8_lossy(&key.private_key_to_pem_pkcs8()?).into_owned();
    let spki_der = key.public_key_to_der()?;
    Ok(GeneratedKey {
        key,
        kind,
        spki_der,
        pem,
    })
}

/// A non-critical extension given by its OID and the DER it holds (the content of `extnValue`).
#[derive(Debug, Clone)]
pub struct RawExtension {
    /// Dotted OID, e.g. `1.3.6.1.4.1.55555.77.1`.
    pub oid: String,
    /// DER of the extension's value.
    pub der: Vec<u8>,
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
    /// A client certificate (extended key usage `clientAuth`, no server auth; mutual TLS).
    pub client_auth: bool,
    /// Further extensions, added last (the lab pads chains with one).
    pub extra: Vec<RawExtension>,
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
            client_auth: false,
            extra: vec![],
        }
    }

    /// A client certificate (mutual TLS) for `common_name`, no subjectAltName, valid from an
    /// hour ago for `days`.
    pub fn client(common_name: &str, key: KeyKind, days: u64) -> Self {
        Self {
            common_name: common_name.into(),
            client_auth: true,
            ..Self::leaf(&[], key, days)
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
    cert: X509,
    key: PKey<Private>,
    kind: KeyKind,
}

impl Certified {
    /// Issues a certificate for `spec`, signed by `issuer` (or self-signed when `None`).
    pub fn issue(spec: &CertSpec, issuer: Option<&Certified>) -> Result<Self, PkiError> {
        let key = generate_key(spec.key)?;
        Self::issue_with_key(spec, key, issuer)
    }

    /// Like [`Certified::issue`] with a given key.
    pub fn issue_with_key(spec: &CertSpec, key: GeneratedKey, issuer: Option<&Certified>) -> Result<Self, PkiError> {
        let mut b = X509Builder::new()?;
        b.set_version(2)?;
        let mut serial = BigNum::new()?;
        serial.rand(64, MsbOption::ONE, false)?;
        let serial = serial.to_asn1_integer()?;
        b.set_serial_number(&serial)?;
        let mut name = X509NameBuilder::new()?;
        name.append_entry_by_nid(Nid::COMMONNAME, &spec.common_name)?;
        name.append_entry_by_nid(Nid::ORGANIZATIONNAME, "tlsgate")?;
        let name = name.build();
        b.set_subject_name(&name)?;
        b.set_issuer_name(issuer.map_or(&*name, |ca| ca.cert.subject_name()))?;
        let (not_before, not_after) = (asn1_time(spec.not_before)?, asn1_time(spec.not_after)?);
        b.set_not_before(&not_before)?;
        b.set_not_after(&not_after)?;
        b.set_pubkey(&key.key)?;
        for ext in extensions(&b, spec)? {
            b.append_extension(&ext)?;
        }
        let (signer, digest) = match issuer {
            Some(ca) => (&ca.key, ca.kind.digest()),
            None => (&key.key, key.kind.digest()),
        };
        b.sign(signer, digest)?;
        let cert = b.build();
        Ok(Self {
            cert_pem: String::from_utf8_lossy(&cert.to_pem()?).into_owned(),
            key_pem: key.pem,
            cert,
            key: key.key,
            kind: key.kind,
        })
    }

    /// The certificate.
    pub fn certificate(&self) -> &X509Ref {
        &self.cert
    }
}

/// The extensions of `spec`'s certificate (whose public key `b` already holds).
fn extensions(b: &X509Builder, spec: &CertSpec) -> Result<Vec<X509Extension>, PkiError> {
    let mut exts = vec![];
    if spec.is_ca {
        exts.push(SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None))?);
        exts.push(BasicConstraints::new().critical().ca().build()?);
        exts.push(
            KeyUsage::new()
                .critical()
                .key_cert_sign()
                .crl_sign()
                .digital_signature()
                .build()?,
        );
    } else {
        if !spec.names.is_empty() {
            let mut san = SubjectAlternativeName::new();
            for name in &spec.names {
                match name.parse::<std::net::IpAddr>() {
                    Ok(_) => san.ip(name),
                    Err(_) => san.dns(name),
                };
            }
            exts.push(san.build(&b.x509v3_context(None, None))?);
        }
        exts.push(KeyUsage::new().critical().digital_signature().build()?);
        let mut eku = ExtendedKeyUsage::new();
        if spec.ocsp_signing {
            eku.other("OCSPSigning");
        } else if spec.client_auth {
            eku.client_auth();
        } else {
            eku.server_auth();
        }
        exts.push(eku.build()?);
    }
    if let Some(url) = &spec.ocsp_url {
        exts.push(raw_extension(&ocsp_aia(url)?)?);
    }
    for ext in &spec.extra {
        exts.push(raw_extension(ext)?);
    }
    Ok(exts)
}

/// A non-critical extension of any OID from its DER value (BoringSSL's `DER:` form).
fn raw_extension(ext: &RawExtension) -> Result<X509Extension, ErrorStack> {
    let hex: String = ext.der.iter().map(|b| format!("{b:02X}")).collect();
    X509Extension::new(None, None, &ext.oid, &format!("DER:{hex}"))
}

fn asn1_time(t: SystemTime) -> Result<Asn1Time, PkiError> {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| PkiError::Time)?
        .as_secs();
    Ok(Asn1Time::from_unix(secs.try_into().map_err(|_| PkiError::Time)?)?)
}

/// An Authority Information Access extension naming `url` as the OCSP responder.
fn ocsp_aia(url: &str) -> Result<RawExtension, PkiError> {
    use x509_cert::der::asn1::Ia5String;
    use x509_cert::der::Encode;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{AccessDescription, AuthorityInfoAccessSyntax};
    let aia = AuthorityInfoAccessSyntax(vec![AccessDescription {
        access_method: crate::ocsp::ID_AD_OCSP,
        access_location: GeneralName::UniformResourceIdentifier(Ia5String::new(url)?),
    }]);
    Ok(RawExtension {
        oid: "1.3.6.1.5.5.7.1.1".into(),
        der: aia.to_der()?,
    })
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
    use x509_cert::der::asn1::{BitString, GeneralizedTime, OctetString};
    use x509_cert::der::{Any, Decode, Encode};
    use x509_cert::spki::AlgorithmIdentifierOwned;
    use x509_ocsp::{
        BasicOcspResponse, CertStatus, OcspGeneralizedTime, OcspResponse, OcspResponseStatus, ResponderId,
        ResponseBytes, ResponseData, RevokedInfo, SingleResponse, Version,
    };
    // GeneralizedTime holds whole seconds.
    let time = |t: SystemTime| -> Result<OcspGeneralizedTime, PkiError> {
        let secs = t
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(|_| PkiError::Time)?
            .as_secs();
        let whole = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        Ok(OcspGeneralizedTime(GeneralizedTime::from_system_time(whole)?))
    };
    let leaf = X509::from_pem(leaf_pem.as_bytes())?;
    let target = OcspTarget::new(&leaf, &issuer.cert)?;
    let issuer_name = x509_cert::Certificate::from_der(&issuer.cert.to_der()?)?
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
            cert_id: target.cert_id()?,
            cert_status,
            this_update: time(this_update)?,
            next_update: next_update.map(time).transpose()?,
            single_extensions: None,
        }],
        response_extensions: None,
    };
    let algorithm = match issuer.kind {
        KeyKind::EcdsaP256 | KeyKind::EcdsaP384 => AlgorithmIdentifierOwned {
            oid: ECDSA_SHA256,
            parameters: None,
        },
        KeyKind::Rsa(_) => AlgorithmIdentifierOwned {
            oid: RSA_SHA256,
            parameters: Some(Any::null()),
        },
        KeyKind::MlDsa(level) => AlgorithmIdentifierOwned {
            oid: x509_cert::der::asn1::ObjectIdentifier::new_unwrap(match level {
                crate::mldsa::Level::MlDsa44 => "2.16.840.1.101.3.4.3.17",
                crate::mldsa::Level::MlDsa65 => "2.16.840.1.101.3.4.3.18",
                crate::mldsa::Level::MlDsa87 => "2.16.840.1.101.3.4.3.19",
            }),
            parameters: None,
        },
    };
    let tbs = data.to_der()?;
    let mut signer = match issuer.kind {
        KeyKind::MlDsa(_) => boring::sign::Signer::new_without_digest(&issuer.key)?,
        _ => boring::sign::Signer::new(MessageDigest::sha256(), &issuer.key)?,
    };
    let signature = signer.sign_oneshot_to_vec(&tbs)?;
    let basic = BasicOcspResponse {
        tbs_response_data: data,
        signature_algorithm: algorithm,
        signature: BitString::from_bytes(&signature)?,
        certs: None,
    };
    Ok(OcspResponse {
        response_status: OcspResponseStatus::Successful,
        response_bytes: Some(ResponseBytes {
            response_type: ID_PKIX_OCSP_BASIC,
            response: OctetString::new(basic.to_der()?)?,
        }),
    }
    .to_der()?)
}

/// A chain of ML-DSA certificates: an ML-DSA root, an intermediate and a leaf for `names`, all of
/// `level` (each signed with pure ML-DSA). The leaf's key is `leaf.key_pem`; the chain a server
/// sends is `leaf.cert_pem` + `intermediate.cert_pem`, and clients trust `root.cert_pem`.
pub struct MlDsaChain {
    /// The self-signed root.
    pub root: Certified,
    /// The intermediate CA.
    pub intermediate: Certified,
    /// The leaf.
    pub leaf: Certified,
}

impl MlDsaChain {
    /// Issues root, intermediate and leaf (valid for `days`).
    pub fn issue(level: crate::mldsa::Level, names: &[&str], days: u64) -> Result<Self, PkiError> {
        let kind = KeyKind::MlDsa(level);
        let root = Certified::issue(
            &CertSpec::ca(&format!("tlsgate {} root", level.display()), kind, days),
            None,
        )?;
        let intermediate = Certified::issue(
            &CertSpec::ca(&format!("tlsgate {} intermediate", level.display()), kind, days),
            Some(&root),
        )?;
        let leaf = Certified::issue(&CertSpec::leaf(names, kind, days), Some(&intermediate))?;
        Ok(Self {
            root,
            intermediate,
            leaf,
        })
    }

    /// Leaf + intermediate, PEM: what a server sends.
    pub fn chain_pem(&self) -> String {
        format!("{}{}", self.leaf.cert_pem, self.intermediate.cert_pem)
    }
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

#[cfg(test)]
mod tests;

//! What to fetch: the certificate whose status is asked ([`OcspTarget`]: the leaf's serial and
//! its issuer's name and key, the responders its Authority Information Access names) and the
//! OCSP request (RFC 6960, RFC 5019) that asks it. The HTTP fetch and its schedule run in
//! tlsgate-proxy's `stapling`; the response is checked by [`super::response`].

use super::oid::ID_SHA1;
use boring::error::ErrorStack;
use boring::hash::{hash, MessageDigest};
use boring::pkey::{PKey, Public};
use boring::x509::X509;
use tlsgate_error::{Classify, Side};
use x509_cert::der::asn1::OctetString;
use x509_cert::der::{Decode, Encode};
use x509_cert::spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;
use x509_ocsp::{CertId, OcspRequest, Request, TbsRequest, Version};

/// Why a certificate's status cannot be asked.
#[derive(Debug, thiserror::Error)]
pub enum OcspError {
    /// The chain is empty.
    #[error("empty chain")]
    EmptyChain,
    /// No certificate of the chain signed the leaf.
    #[error("the chain does not contain the leaf's issuer (OCSP needs it: append the intermediate)")]
    NoIssuer,
    /// The issuer given is not the one the leaf names.
    #[error("the issuer certificate's subject is not the leaf's issuer")]
    IssuerMismatch,
    /// A certificate could not be parsed.
    #[error("cannot parse the certificate: {0}")]
    Certificate(#[source] x509_cert::der::Error),
    /// Encoding a request field failed.
    #[error("cannot encode the OCSP request: {0}")]
    Encode(#[from] x509_cert::der::Error),
    /// BoringSSL failed (encoding a certificate, hashing, reading a key).
    #[error("{0}")]
    Crypto(#[from] ErrorStack),
}

impl Classify for OcspError {
    fn side(&self) -> Side {
        match self {
            OcspError::Encode(_) | OcspError::Crypto(_) => Side::Internal,
            _ => Side::Config,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            OcspError::Encode(_) | OcspError::Crypto(_) => "ocsp_request",
            _ => "ocsp_chain",
        }
    }
}

/// A certificate whose status can be asked: the leaf's serial and its issuer's name and key.
pub struct OcspTarget {
    pub(super) serial: Vec<u8>,
    pub(super) issuer_name_der: Vec<u8>,
    pub(super) issuer_key_bits: Vec<u8>,
    pub(super) issuer_key: PKey<Public>,
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

fn parse_cert(cert: &X509) -> Result<Certificate, OcspError> {
    let der = cert.to_der()?;
    Certificate::from_der(&der).map_err(OcspError::Certificate)
}

impl OcspTarget {
    /// The target for `leaf`, issued by `issuer`.
    pub fn new(leaf: &X509, issuer: &X509) -> Result<Self, OcspError> {
        let parsed_leaf = parse_cert(leaf)?;
        let parsed_issuer = parse_cert(issuer)?;
        let tbs = &parsed_issuer.tbs_certificate;
        let issuer_name_der = tbs.subject.to_der()?;
        if parsed_leaf.tbs_certificate.issuer.to_der()? != issuer_name_der {
            return Err(OcspError::IssuerMismatch);
        }
        let responders = leaf
            .ocsp_responders()
            .map(|s| s.iter().map(|u| u.to_string()).collect())
            .unwrap_or_default();
        Ok(Self {
            serial: parsed_leaf.tbs_certificate.serial_number.as_bytes().to_vec(),
            issuer_name_der,
            issuer_key_bits: tbs.subject_public_key_info.subject_public_key.raw_bytes().to_vec(),
            issuer_key: issuer.public_key()?,
            responders,
            subject: parsed_leaf.tbs_certificate.subject.to_string(),
        })
    }

    /// The target for a chain's leaf, with its issuer found among the other certificates.
    pub fn from_chain(chain: &[X509]) -> Result<Self, OcspError> {
        let leaf = chain.first().ok_or(OcspError::EmptyChain)?;
        let issuer = chain[1..]
            .iter()
            .find(|c| c.public_key().is_ok_and(|k| leaf.verify(&k).unwrap_or(false)))
            .ok_or(OcspError::NoIssuer)?;
        Self::new(leaf, issuer)
    }

    /// The CertID naming this certificate in a request (SHA-1, as RFC 5019 responders expect).
    pub(crate) fn cert_id(&self) -> Result<CertId, OcspError> {
        let sha1 = |data: &[u8]| -> Result<OctetString, OcspError> {
            let digest = hash(MessageDigest::sha1(), data)?;
            Ok(OctetString::new(digest.to_vec())?)
        };
        Ok(CertId {
            hash_algorithm: AlgorithmIdentifierOwned {
                oid: ID_SHA1,
                parameters: Some(x509_cert::der::Any::null()),
            },
            issuer_name_hash: sha1(&self.issuer_name_der)?,
            issuer_key_hash: sha1(&self.issuer_key_bits)?,
            serial_number: x509_cert::serial_number::SerialNumber::new(&self.serial)?,
        })
    }

    /// An unsigned OCSP request (DER) for this certificate, without nonce (a staple is shared by
    /// every client, so it cannot carry one). SHA-1 CertID, as RFC 5019 responders expect.
    pub fn request(&self) -> Result<Vec<u8>, OcspError> {
        Ok(OcspRequest {
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
        .to_der()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocsp::test_responses::pki;

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
        let err = OcspTarget::from_chain(std::slice::from_ref(&p.leaf)).unwrap_err();
        assert!(matches!(err, OcspError::NoIssuer), "no issuer in the chain: {err}");
        assert_eq!((err.side(), err.kind()), (Side::Config, "ocsp_chain"));
        assert!(matches!(OcspTarget::from_chain(&[]), Err(OcspError::EmptyChain)));
        assert!(matches!(
            OcspTarget::new(&p.issuer, &p.leaf),
            Err(OcspError::IssuerMismatch)
        ));
    }
}

//! Test fixtures shared by the OCSP modules' tests: a CA, a leaf naming a responder, and
//! responses built and signed field by field (good, revoked, stale, forged, delegated).

use super::oid::{ECDSA_SHA256, ID_PKIX_OCSP_BASIC};
use super::request::OcspTarget;
use crate::pki::{CertSpec, Certified, KeyKind};
use boring::hash::MessageDigest;
use boring::pkey::{PKey, Private};
use boring::sign::Signer;
use boring::x509::X509;
use std::time::{Duration, SystemTime};
use x509_cert::der::asn1::{BitString, GeneralizedTime, OctetString};
use x509_cert::der::{Decode, Encode};
use x509_cert::spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;
use x509_ocsp::{
    BasicOcspResponse, CertId, CertStatus, OcspGeneralizedTime, OcspResponse, OcspResponseStatus, ResponderId,
    ResponseBytes, ResponseData, SingleResponse, Version,
};

pub(crate) struct Pki {
    pub ca: Certified,
    pub leaf: X509,
    pub issuer: X509,
    pub ca_key: PKey<Private>,
}

pub(crate) fn pki() -> Pki {
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

pub(crate) fn time(t: SystemTime) -> OcspGeneralizedTime {
    // GeneralizedTime has whole seconds.
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    OcspGeneralizedTime(GeneralizedTime::from_system_time(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap())
}

pub(crate) struct Spec {
    pub status: CertStatus,
    pub this_update: SystemTime,
    pub next_update: Option<SystemTime>,
    pub responder: ResponderId,
    pub certs: Option<Vec<Certificate>>,
    pub cert_id: CertId,
}

pub(crate) fn spec(p: &Pki, target: &OcspTarget) -> Spec {
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

pub(crate) fn respond(s: Spec, key: &PKey<Private>) -> Vec<u8> {
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

pub(crate) fn delegated(p: &Pki, ocsp_signing: bool) -> (Certificate, PKey<Private>) {
    let mut spec = CertSpec::leaf(&["ocsp responder"], KeyKind::EcdsaP256, 30);
    spec.ocsp_signing = ocsp_signing;
    let c = Certified::issue(&spec, Some(&p.ca)).unwrap();
    let der = X509::from_pem(c.cert_pem.as_bytes()).unwrap().to_der().unwrap();
    (
        Certificate::from_der(&der).unwrap(),
        PKey::private_key_from_pem(c.key_pem.as_bytes()).unwrap(),
    )
}

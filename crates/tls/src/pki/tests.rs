//! Tests of the throwaway PKI: what the certificates hold, that BoringSSL verifies the chains
//! they form, and the OCSP responses about them.

use super::*;
use boring::stack::Stack;
use boring::x509::store::X509StoreBuilder;
use boring::x509::X509StoreContext;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

/// Verifies `leaf` (with `intermediates`) against the trust anchor `root`, checking `host`.
fn verifies(root: &Certified, intermediates: &[&Certified], leaf: &Certified, host: &str) -> bool {
    let mut store = X509StoreBuilder::new().unwrap();
    store.add_cert(root.certificate()).unwrap();
    let store = store.build();
    let mut chain = Stack::new().unwrap();
    for c in intermediates {
        chain.push(c.certificate().to_owned()).unwrap();
    }
    let mut ctx = X509StoreContext::new().unwrap();
    ctx.init(&store, leaf.certificate(), &chain, |c| {
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) => c.verify_param_mut().set_ip(ip)?,
            Err(_) => c.verify_param_mut().set_host(host)?,
        }
        c.verify_cert()
    })
    .unwrap()
}

fn parsed<R>(c: &Certified, f: impl FnOnce(&X509Certificate<'_>) -> R) -> R {
    let der = c.certificate().to_der().unwrap();
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    f(&cert)
}

#[test]
fn a_chain_of_ca_intermediate_and_leaf_verifies_for_every_name() {
    let ca = Certified::issue(&CertSpec::ca("test root", KeyKind::EcdsaP256, 30), None).unwrap();
    let inter = Certified::issue(&CertSpec::ca("test intermediate", KeyKind::EcdsaP384, 30), Some(&ca)).unwrap();
    let names = ["localhost", "127.0.0.1", "::1"];
    let leaf = Certified::issue(&CertSpec::leaf(&names, KeyKind::Rsa(2048), 30), Some(&inter)).unwrap();
    for host in names {
        assert!(verifies(&ca, &[&inter], &leaf, host), "{host}");
    }
    assert!(!verifies(&ca, &[&inter], &leaf, "other.test"));
    assert!(!verifies(&ca, &[], &leaf, "localhost"), "needs the intermediate");
    let stranger = Certified::issue(&CertSpec::ca("test root", KeyKind::EcdsaP256, 30), None).unwrap();
    assert!(
        !verifies(&stranger, &[&inter], &leaf, "localhost"),
        "same name, other key"
    );
    // The P-384 intermediate signs with SHA-384, the others with SHA-256.
    let alg = |c: &Certified| c.certificate().signature_algorithm().object().nid();
    assert_eq!(alg(&inter), Nid::ECDSA_WITH_SHA256);
    assert_eq!(alg(&leaf), Nid::ECDSA_WITH_SHA384);
    assert_eq!(alg(&ca), Nid::ECDSA_WITH_SHA256);
}

#[test]
fn ca_and_leaf_extensions_are_those_of_a_web_pki() {
    let ca = Certified::issue(&CertSpec::ca("test CA", KeyKind::EcdsaP256, 30), None).unwrap();
    parsed(&ca, |c| {
        let bc = c.basic_constraints().unwrap().unwrap();
        assert!(bc.critical && bc.value.ca);
        let ku = c.key_usage().unwrap().unwrap();
        assert!(ku.critical && ku.value.key_cert_sign() && ku.value.crl_sign() && ku.value.digital_signature());
        assert!(c.extended_key_usage().unwrap().is_none());
        assert!(c.subject_alternative_name().unwrap().is_none());
        assert!(c
            .extensions()
            .iter()
            .any(|e| matches!(e.parsed_extension(), ParsedExtension::SubjectKeyIdentifier(_))));
        assert_eq!(c.subject().to_string(), "CN=test CA, O=tlsgate");
        assert_eq!(c.issuer(), c.subject());
    });
    let mut spec = CertSpec::leaf(&["a.test", "10.0.0.1", "2001:db8::1"], KeyKind::EcdsaP256, 30);
    spec.ocsp_url = Some("http://127.0.0.1:9/ocsp".into());
    let leaf = Certified::issue(&spec, Some(&ca)).unwrap();
    parsed(&leaf, |c| {
        assert!(c.basic_constraints().unwrap().is_none());
        let ku = c.key_usage().unwrap().unwrap();
        assert!(ku.critical && ku.value.digital_signature() && !ku.value.key_cert_sign());
        let eku = c.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.ocsp_signing);
        let san = &c.subject_alternative_name().unwrap().unwrap().value.general_names;
        assert_eq!(san.len(), 3);
        assert!(matches!(san[0], GeneralName::DNSName("a.test")));
        assert!(matches!(san[1], GeneralName::IPAddress(ip) if ip == [10, 0, 0, 1]));
        assert!(matches!(san[2], GeneralName::IPAddress(ip) if ip.len() == 16));
        assert_eq!(c.subject().to_string(), "CN=a.test, O=tlsgate");
        assert_eq!(c.issuer().to_string(), "CN=test CA, O=tlsgate");
        assert!(c.tbs_certificate.serial.bits() > 56, "random 64-bit serial");
    });
    let responders = leaf.certificate().ocsp_responders().unwrap();
    assert_eq!(
        responders.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        ["http://127.0.0.1:9/ocsp"]
    );
    let mut spec = CertSpec::leaf(&["ocsp.test"], KeyKind::EcdsaP256, 30);
    spec.ocsp_signing = true;
    let responder = Certified::issue(&spec, Some(&ca)).unwrap();
    parsed(&responder, |c| {
        let eku = c.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.ocsp_signing && !eku.server_auth);
    });
}

#[test]
fn validity_keys_and_extra_extensions_are_as_asked() {
    let now = SystemTime::now();
    let spec = CertSpec {
        not_before: now - Duration::from_secs(30 * 86_400),
        not_after: now - Duration::from_secs(86_400),
        extra: vec![RawExtension {
            oid: "1.3.6.1.4.1.55555.77.1".into(),
            der: vec![0x04, 0x03, 1, 2, 3],
        }],
        ..CertSpec::leaf(&["old.test"], KeyKind::Rsa(1024), 1)
    };
    let ca = Certified::issue(&CertSpec::ca("rsa CA", KeyKind::Rsa(2048), 30), None).unwrap();
    let old = Certified::issue(&spec, Some(&ca)).unwrap();
    assert!(!verifies(&ca, &[], &old, "old.test"), "expired");
    parsed(&old, |c| {
        let secs = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert_eq!(c.validity().not_before.timestamp(), secs(spec.not_before));
        assert_eq!(c.validity().not_after.timestamp(), secs(spec.not_after));
        let ext = c
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.4.1.55555.77.1")
            .unwrap();
        assert!(!ext.critical);
        assert_eq!(ext.value, [0x04, 0x03, 1, 2, 3]);
    });
    let key = PKey::private_key_from_pem(old.key_pem.as_bytes()).unwrap();
    assert_eq!(key.bits(), 1024, "weak keys can be made, for tests that catch them");
    assert!(old.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");
    assert!(old.certificate().public_key().unwrap().public_eq(&key));
    let p384 = generate_key(KeyKind::EcdsaP384).unwrap();
    assert_eq!(p384.key.ec_key().unwrap().group().curve_name(), Some(Nid::SECP384R1));
    assert_eq!(p384.spki_der, p384.key.public_key_to_der().unwrap());
}

#[test]
fn the_demo_pki_verifies_for_localhost_and_both_loopbacks() {
    let demo = demo_pki().unwrap();
    for leaf in [&demo.ecdsa, &demo.rsa] {
        for host in ["localhost", "127.0.0.1", "::1"] {
            assert!(verifies(&demo.ca, &[], leaf, host), "{host}");
        }
    }
    assert_eq!(demo.rsa.certificate().public_key().unwrap().bits(), 2048);
}

#[test]
fn ocsp_responses_name_the_leaf_and_carry_the_status() {
    use x509_cert::der::Decode;
    use x509_ocsp::{BasicOcspResponse, CertStatus, OcspResponse};
    let ca = Certified::issue(&CertSpec::ca("ocsp CA", KeyKind::Rsa(2048), 30), None).unwrap();
    let leaf = Certified::issue(&CertSpec::leaf(&["a.test"], KeyKind::EcdsaP256, 30), Some(&ca)).unwrap();
    let now = SystemTime::now();
    for (status, revoked) in [(OcspStatus::Good, false), (OcspStatus::Revoked, true)] {
        let der = ocsp_response(&leaf.cert_pem, &ca, status, now, Some(now + Duration::from_secs(3600))).unwrap();
        let response = OcspResponse::from_der(&der).unwrap();
        let basic = BasicOcspResponse::from_der(response.response_bytes.unwrap().response.as_bytes()).unwrap();
        let single = &basic.tbs_response_data.responses[0];
        assert_eq!(matches!(single.cert_status, CertStatus::Revoked(_)), revoked);
        let serial = leaf.certificate().serial_number().to_bn().unwrap().to_vec();
        let got = single.cert_id.serial_number.as_bytes();
        assert_eq!(&got[got.iter().take_while(|b| **b == 0).count()..], serial);
        let tbs = x509_cert::der::Encode::to_der(&basic.tbs_response_data).unwrap();
        let mut v = boring::sign::Verifier::new(MessageDigest::sha256(), &ca.key).unwrap();
        v.update(&tbs).unwrap();
        assert!(v.verify(basic.signature.raw_bytes()).unwrap(), "signed by the issuer");
    }
}

//! Certificate keys and CSRs (RFC 2986) for an order, and a self-signed certificate for names
//! (the placeholder a site serves before its first issuance, and the TLS-ALPN-01 certificate).

use crate::error::AcmeError;
use boring::asn1::Asn1Time;
use boring::bn::{BigNum, MsbOption};
use boring::ec::{EcGroup, EcKey};
use boring::hash::MessageDigest;
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use boring::rsa::Rsa;
use boring::stack::Stack;
use boring::x509::extension::SubjectAlternativeName;
use boring::x509::{X509Builder, X509Extension, X509NameBuilder, X509ReqBuilder, X509};

/// The key type of a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA P-256.
    EcdsaP256,
    /// RSA 2048.
    Rsa2048,
}

/// A new private key of `kind`.
pub fn generate_key(kind: KeyKind) -> Result<PKey<Private>, AcmeError> {
    Ok(match kind {
        KeyKind::EcdsaP256 => {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
            PKey::from_ec_key(EcKey::generate(&group)?)?
        }
        KeyKind::Rsa2048 => PKey::from_rsa(Rsa::generate(2048)?)?,
    })
}

/// A DER CSR for `names` (the first is also the subject CN), signed by `key`.
pub fn csr_der(names: &[String], key: &PKey<Private>) -> Result<Vec<u8>, AcmeError> {
    let mut b = X509ReqBuilder::new()?;
    let mut subject = X509NameBuilder::new()?;
    if let Some(first) = names.first().filter(|n| n.len() <= 64) {
        subject.append_entry_by_nid(Nid::COMMONNAME, first)?;
    }
    b.set_subject_name(&subject.build())?;
    b.set_pubkey(key)?;
    let mut san = SubjectAlternativeName::new();
    for n in names {
        san.dns(n);
    }
    let mut exts = Stack::new()?;
    exts.push(san.build(&b.x509v3_context(None))?)?;
    b.add_extensions(&exts)?;
    b.sign(key, MessageDigest::sha256())?;
    Ok(b.build().to_der()?)
}

/// A self-signed certificate for `names`, valid from an hour ago for `valid_secs`, with extra
/// extensions (the TLS-ALPN-01 certificate adds acmeIdentifier).
pub fn self_signed(
    names: &[String],
    key: &PKey<Private>,
    valid_secs: u32,
    extra: Vec<X509Extension>,
) -> Result<X509, AcmeError> {
    let mut b = X509Builder::new()?;
    b.set_version(2)?;
    let mut serial = BigNum::new()?;
    serial.rand(127, MsbOption::MAYBE_ZERO, false)?;
    let serial = serial.to_asn1_integer()?;
    b.set_serial_number(&serial)?;
    let mut name = X509NameBuilder::new()?;
    let cn = names.first().map_or("tlsgate", String::as_str);
    name.append_entry_by_nid(Nid::COMMONNAME, if cn.len() <= 64 { cn } else { "tlsgate" })?;
    let name = name.build();
    b.set_subject_name(&name)?;
    b.set_issuer_name(&name)?;
    let now = crate::time::now();
    let (from, until) = (
        Asn1Time::from_unix(now - 3600)?,
        Asn1Time::from_unix(now + i64::from(valid_secs))?,
    );
    b.set_not_before(&from)?;
    b.set_not_after(&until)?;
    b.set_pubkey(key)?;
    let mut san = SubjectAlternativeName::new();
    for n in names {
        san.dns(n);
    }
    let san = san.build(&b.x509v3_context(None, None))?;
    b.append_extension(&san)?;
    for ext in extra {
        b.append_extension(&ext)?;
    }
    let digest = MessageDigest::sha256();
    b.sign(key, digest)?;
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_carries_names_and_verifies() {
        for kind in [KeyKind::EcdsaP256, KeyKind::Rsa2048] {
            let key = generate_key(kind).unwrap();
            let names = vec!["a.test".to_string(), "b.test".to_string()];
            let der = csr_der(&names, &key).unwrap();
            let req = boring::x509::X509Req::from_der(&der).unwrap();
            assert!(req.verify(&key).unwrap());
            let cert = self_signed(&names, &key, 60, vec![]).unwrap();
            let sans: Vec<String> = cert
                .subject_alt_names()
                .unwrap()
                .iter()
                .filter_map(|g| g.dnsname().map(str::to_string))
                .collect();
            assert_eq!(sans, names);
        }
    }
}

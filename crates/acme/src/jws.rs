//! The account key (ECDSA P-256) and JSON Web Signatures over ACME requests (RFC 7515, ES256),
//! plus the External Account Binding's HS256 signature (RFC 8555 §7.3.4).

use crate::b64;
use crate::error::AcmeError;
use boring::bn::{BigNum, BigNumContext};
use boring::ec::{EcGroup, EcKey};
use boring::ecdsa::EcdsaSig;
use boring::hash::{hash, MessageDigest};
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use serde_json::{json, Value};

/// The ACME account key.
pub struct AccountKey {
    key: EcKey<Private>,
    jwk: Value,
    thumbprint: String,
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AccountKey({})", self.thumbprint)
    }
}

impl AccountKey {
    /// A new random P-256 key.
    pub fn generate() -> Result<Self, AcmeError> {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
        Self::from_ec(EcKey::generate(&group)?)
    }

    /// A key from PEM (PKCS#8 or SEC1); only P-256 is accepted.
    pub fn from_pem(pem: &[u8]) -> Result<Self, AcmeError> {
        let pkey = PKey::private_key_from_pem(pem)?;
        let ec = pkey
            .ec_key()
            .map_err(|_| AcmeError::Io("the ACME account key must be an ECDSA P-256 key".into()))?;
        Self::from_ec(ec)
    }

    /// The key as PKCS#8 PEM, for storing.
    pub fn to_pem(&self) -> Result<Vec<u8>, AcmeError> {
        Ok(PKey::from_ec_key(self.key.clone())?.private_key_to_pem_pkcs8()?)
    }

    fn from_ec(key: EcKey<Private>) -> Result<Self, AcmeError> {
        if key.group().curve_name() != Some(Nid::X9_62_PRIME256V1) {
            return Err(AcmeError::Io("the ACME account key must be an ECDSA P-256 key".into()));
        }
        let mut ctx = BigNumContext::new()?;
        let (mut x, mut y) = (BigNum::new()?, BigNum::new()?);
        key.public_key()
            .affine_coordinates_gfp(key.group(), &mut x, &mut y, &mut ctx)?;
        let x = b64::encode(&pad32(&x.to_vec()));
        let y = b64::encode(&pad32(&y.to_vec()));
        // RFC 7638: members in lexicographic order, no whitespace.
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let thumbprint = b64::encode(&hash(MessageDigest::sha256(), canonical.as_bytes())?);
        let jwk = json!({"crv": "P-256", "kty": "EC", "x": x, "y": y});
        Ok(Self { key, jwk, thumbprint })
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// The JWK thumbprint (RFC 7638), base64url.
    pub fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The key authorization for a challenge token (RFC 8555 §8.1).
    pub fn key_authorization(&self, token: &str) -> String {
        format!("{token}.{}", self.thumbprint)
    }

    /// A flattened JWS: `kid` when the account URL is known, else the `jwk`.
    pub fn sign(&self, url: &str, nonce: &str, kid: Option<&str>, payload: Option<&Value>) -> Result<Value, AcmeError> {
        let mut protected = json!({"alg": "ES256", "nonce": nonce, "url": url});
        match kid {
            Some(kid) => protected["kid"] = json!(kid),
            None => protected["jwk"] = self.jwk.clone(),
        }
        let protected = b64::encode(protected.to_string().as_bytes());
        // POST-as-GET (RFC 8555 §6.3) has an empty payload.
        let payload = payload.map_or(String::new(), |p| b64::encode(p.to_string().as_bytes()));
        let digest = hash(MessageDigest::sha256(), format!("{protected}.{payload}").as_bytes())?;
        let sig = EcdsaSig::sign(&digest, &self.key)?;
        let mut raw = pad32(&sig.r().to_vec());
        raw.extend(pad32(&sig.s().to_vec()));
        Ok(json!({"protected": protected, "payload": payload, "signature": b64::encode(&raw)}))
    }

    /// The `externalAccountBinding` member of a newAccount request (HS256 over our JWK).
    pub fn eab(&self, url: &str, key_id: &str, hmac_key: &[u8]) -> Result<Value, AcmeError> {
        let protected = json!({"alg": "HS256", "kid": key_id, "url": url});
        let protected = b64::encode(protected.to_string().as_bytes());
        let payload = b64::encode(self.jwk.to_string().as_bytes());
        let mac = boring::hash::hmac_sha256(hmac_key, format!("{protected}.{payload}").as_bytes())?;
        Ok(json!({"protected": protected, "payload": payload, "signature": b64::encode(&mac)}))
    }
}

/// Left-pads a big-endian integer to the 32 bytes of a P-256 coordinate or signature half.
fn pad32(v: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 32usize.saturating_sub(v.len())];
    out.extend_from_slice(v);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::ecdsa::EcdsaSig;

    #[test]
    fn signature_verifies_and_pem_round_trips() {
        let key = AccountKey::generate().unwrap();
        let jws = key
            .sign(
                "https://ca/new-order",
                "nonce1",
                Some("https://ca/acct/1"),
                Some(&json!({"a": 1})),
            )
            .unwrap();
        let input = format!(
            "{}.{}",
            jws["protected"].as_str().unwrap(),
            jws["payload"].as_str().unwrap()
        );
        let raw = b64::decode(jws["signature"].as_str().unwrap()).unwrap();
        assert_eq!(raw.len(), 64);
        let sig = EcdsaSig::from_private_components(
            BigNum::from_slice(&raw[..32]).unwrap(),
            BigNum::from_slice(&raw[32..]).unwrap(),
        )
        .unwrap();
        let digest = hash(MessageDigest::sha256(), input.as_bytes()).unwrap();
        assert!(sig.verify(&digest, &key.key).unwrap());
        let protected: Value =
            serde_json::from_slice(&b64::decode(jws["protected"].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(protected["kid"], "https://ca/acct/1");
        assert!(protected.get("jwk").is_none());
        let again = AccountKey::from_pem(&key.to_pem().unwrap()).unwrap();
        assert_eq!(again.thumbprint(), key.thumbprint());
        assert_eq!(key.key_authorization("tok"), format!("tok.{}", key.thumbprint()));
    }

    #[test]
    fn rsa_account_keys_are_refused() {
        let rsa = PKey::from_rsa(boring::rsa::Rsa::generate(2048).unwrap()).unwrap();
        assert!(AccountKey::from_pem(&rsa.private_key_to_pem_pkcs8().unwrap()).is_err());
    }
}

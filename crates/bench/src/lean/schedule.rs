//! The TLS 1.3 key schedule (RFC 8446 section 7) for TLS_AES_128_GCM_SHA256 on BoringSSL's
//! primitives: HKDF-Expand-Label, the handshake and application traffic secrets, record
//! protection with a traffic key and IV, and Finished MACs. Checked against NIST's ACVP TLS 1.3
//! KDF vector and RFC 8448's traffic-key expansion.

use boring::aead::{AeadCtx, Algorithm};
use boring::error::ErrorStack;
use boring::hash::MessageDigest;
use boring::hkdf::HkdfSuite;
use boring::hmac::Hmac;
use tlsgate_wire::tls13_flight::RECORD_HEADER_LEN;

/// SHA-256's output size: every secret of the schedule.
pub const HASH_LEN: usize = 32;
/// A secret of the schedule.
pub type Secret = [u8; HASH_LEN];
/// AES-128-GCM's tag.
const TAG_LEN: usize = 16;

fn hkdf() -> HkdfSuite {
    HkdfSuite::new(MessageDigest::sha256())
}

/// SHA-256 of nothing: the context of each "derived" secret.
fn empty_hash() -> Secret {
    boring::sha::sha256(b"")
}

/// HKDF-Expand-Label(secret, label, context, out.len()).
pub fn expand_label(secret: &[u8], label: &str, context: &[u8], out: &mut [u8]) -> Result<(), ErrorStack> {
    const PREFIX: &[u8] = b"tls13 ";
    let mut info = Vec::with_capacity(4 + PREFIX.len() + label.len() + context.len());
    info.extend_from_slice(&(out.len() as u16).to_be_bytes());
    info.push((PREFIX.len() + label.len()) as u8);
    info.extend_from_slice(PREFIX);
    info.extend_from_slice(label.as_bytes());
    info.push(context.len() as u8);
    info.extend_from_slice(context);
    hkdf().expand(secret, &info, out)
}

/// Derive-Secret(secret, label, transcript hash).
fn derive(secret: &Secret, label: &str, hash: &[u8]) -> Result<Secret, ErrorStack> {
    let mut out = [0; HASH_LEN];
    expand_label(secret, label, hash, &mut out)?;
    Ok(out)
}

fn extract(salt: &Secret, ikm: &[u8]) -> Result<Secret, ErrorStack> {
    let prk = hkdf().extract(salt, ikm)?;
    let mut out = [0; HASH_LEN];
    out.copy_from_slice(&prk);
    Ok(out)
}

/// The schedule up to the key exchange: Derive-Secret(Early Secret, "derived", ""), the same for
/// every connection with the same PSK (all zeros without one), so computed once.
#[derive(Clone)]
pub struct KeySchedule {
    derived_early: Secret,
}

impl KeySchedule {
    /// For a full handshake (`psk` empty) or with a PSK.
    pub fn new(psk: &[u8]) -> Result<Self, ErrorStack> {
        let zeros = [0; HASH_LEN];
        let early = extract(&zeros, if psk.is_empty() { &zeros } else { psk })?;
        Ok(Self {
            derived_early: derive(&early, "derived", &empty_hash())?,
        })
    }

    /// The handshake secrets from the (EC)DHE shared secret and the hash of ClientHello…ServerHello.
    pub fn handshake(&self, dhe: &[u8], hello_hash: &[u8]) -> Result<HandshakeSecrets, ErrorStack> {
        let secret = extract(&self.derived_early, dhe)?;
        Ok(HandshakeSecrets {
            client: derive(&secret, "c hs traffic", hello_hash)?,
            server: derive(&secret, "s hs traffic", hello_hash)?,
            secret,
        })
    }
}

/// The Handshake Secret and both handshake traffic secrets.
pub struct HandshakeSecrets {
    secret: Secret,
    /// client_handshake_traffic_secret
    pub client: Secret,
    /// server_handshake_traffic_secret
    pub server: Secret,
}

impl HandshakeSecrets {
    /// The client and server application traffic secrets from the hash of
    /// ClientHello…server Finished.
    pub fn application(&self, flight_hash: &[u8]) -> Result<(Secret, Secret), ErrorStack> {
        let master = extract(&derive(&self.secret, "derived", &empty_hash())?, &[0; HASH_LEN])?;
        Ok((
            derive(&master, "c ap traffic", flight_hash)?,
            derive(&master, "s ap traffic", flight_hash)?,
        ))
    }
}

/// A Finished message's verify_data: HMAC(finished_key of `base`, transcript hash).
pub fn finished(base: &Secret, transcript_hash: &[u8]) -> Result<Secret, ErrorStack> {
    let mut key = [0; HASH_LEN];
    expand_label(base, "finished", b"", &mut key)?;
    let mut mac = Hmac::init(&key, &MessageDigest::sha256())?;
    mac.update(transcript_hash)?;
    let mut out = [0; HASH_LEN];
    out.copy_from_slice(&mac.finalize()?);
    Ok(out)
}

/// The AES-128-GCM key and the IV of a traffic secret.
pub fn traffic_key(secret: &Secret) -> Result<([u8; 16], [u8; 12]), ErrorStack> {
    let (mut key, mut iv) = ([0; 16], [0; 12]);
    expand_label(secret, "key", b"", &mut key)?;
    expand_label(secret, "iv", b"", &mut iv)?;
    Ok((key, iv))
}

/// One direction's record protection: the key, the IV and the next sequence number.
pub struct Protection {
    aead: AeadCtx,
    iv: [u8; 12],
    seq: u64,
}

impl Protection {
    /// Record protection under `secret`, from sequence number 0.
    pub fn new(secret: &Secret) -> Result<Self, ErrorStack> {
        let (key, iv) = traffic_key(secret)?;
        Ok(Self {
            aead: AeadCtx::new_default_tag(&Algorithm::aes_128_gcm(), &key)?,
            iv,
            seq: 0,
        })
    }

    fn nonce(&mut self) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        nonce
    }

    /// Decrypts a record's body in place (`header` is its authenticated data); the plaintext, or
    /// `None` if it does not authenticate.
    pub fn open<'a>(&mut self, header: &[u8; RECORD_HEADER_LEN], body: &'a mut [u8]) -> Option<&'a [u8]> {
        let split = body.len().checked_sub(TAG_LEN)?;
        let nonce = self.nonce();
        let (text, tag) = body.split_at_mut(split);
        self.aead.open_in_place_mut(&nonce, text, tag, header).ok()?;
        Some(text)
    }

    /// Appends one record carrying `content` of type `kind` (an application-data record on the
    /// wire, the type inside it).
    pub fn seal(&mut self, content: &[u8], kind: u8, out: &mut Vec<u8>) -> Result<(), ErrorStack> {
        let len = content.len() + 1 + TAG_LEN;
        let header = [23, 3, 3, (len >> 8) as u8, len as u8];
        out.extend_from_slice(&header);
        let start = out.len();
        out.extend_from_slice(content);
        out.push(kind);
        let nonce = self.nonce();
        let mut tag = [0; TAG_LEN];
        self.aead
            .seal_in_place_mut(&nonce, &mut out[start..], &mut tag, &header)?;
        out.extend_from_slice(&tag);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::sha::Sha256;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// NIST ACVP's TLS 1.3 KDF test (ACVP-Server, TLS-v1.3-KDF-RFC8446, the vector Go's
    /// crypto/tls checks too): PSK and DHE, with the "random" values standing for the transcript.
    #[test]
    fn the_schedule_matches_the_acvp_vector() {
        let psk = hex("56288B726C73829F7A3E47B103837C8139ACF552E7530C7A710B35ED41191698");
        let dhe = hex("EFFE9EC26AA29FD750DFA6A10B944D74071595B27EE88887D5E11C84590B5CC3");
        let mut transcript = Sha256::new();
        transcript.update(&hex("E9137679E582BA7C1DB41CF725F86C6D09C8C05F297BAD9A65B552EAF524FDE4"));
        transcript.update(&hex("23ECCFD030790748C8F8D8A656FD98D717F1B62AF3712F97211D2070B499F98A"));
        let hs = KeySchedule::new(&psk)
            .unwrap()
            .handshake(&dhe, &transcript.clone().finish())
            .unwrap();
        assert_eq!(
            hs.client.to_vec(),
            hex("B32306C3CE9932C460A1FE6C0F060593974842036B96FA45049B7352E71C2AD2")
        );
        assert_eq!(
            hs.server.to_vec(),
            hex("22787F8CA269D34BC549AC8BA19F2040938A3AA370D7CC9D60F720882B88D01B")
        );
        transcript.update(&hex("C750EDA6696CD101B142BD79E00E6AC8C5F2C0ABC78DD64F4D991326659E9299"));
        let (client, server) = hs.application(&transcript.finish()).unwrap();
        assert_eq!(
            client.to_vec(),
            hex("47D7EA08397B5871154B0FE85584BCC30A87C69E84D69B56007C5B21F76493BA")
        );
        assert_eq!(
            server.to_vec(),
            hex("EFBDB0C873C0480DA57307083839A8984BE25B9A8545E4FCA029940FE2800565")
        );
    }

    /// RFC 8448 section 3: the server handshake traffic secret's key and IV.
    #[test]
    fn traffic_keys_match_rfc_8448() {
        let secret: Secret = hex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
            .try_into()
            .unwrap();
        let (key, iv) = traffic_key(&secret).unwrap();
        assert_eq!(key.to_vec(), hex("3fce516009c21727d0f2e4e86ee403bc"));
        assert_eq!(iv.to_vec(), hex("5d313eb2671276ee13000b30"));
    }

    #[test]
    fn records_sealed_open_in_order_and_tampering_fails() {
        let secret = [7; HASH_LEN];
        let (mut tx, mut rx) = (Protection::new(&secret).unwrap(), Protection::new(&secret).unwrap());
        let mut wire = Vec::new();
        tx.seal(b"hello", 22, &mut wire).unwrap();
        tx.seal(b"GET /", 23, &mut wire).unwrap();
        let (first, second) = wire.split_at_mut(RECORD_HEADER_LEN + 5 + 1 + TAG_LEN);
        let header: [u8; 5] = first[..5].try_into().unwrap();
        assert_eq!(header, [23, 3, 3, 0, 22]);
        assert_eq!(rx.open(&header, &mut first[5..]).unwrap(), b"hello\x16");
        let header: [u8; 5] = second[..5].try_into().unwrap();
        second[7] ^= 1;
        assert!(rx.open(&header, &mut second[5..]).is_none(), "a flipped bit fails");
        assert!(rx.open(&header, &mut [0; 3]).is_none(), "shorter than a tag");
    }

    #[test]
    fn finished_depends_on_secret_and_transcript() {
        let a = finished(&[1; HASH_LEN], &[2; HASH_LEN]).unwrap();
        assert_ne!(a, finished(&[1; HASH_LEN], &[3; HASH_LEN]).unwrap());
        assert_ne!(a, finished(&[4; HASH_LEN], &[2; HASH_LEN]).unwrap());
        assert_eq!(a, finished(&[1; HASH_LEN], &[2; HASH_LEN]).unwrap());
    }
}

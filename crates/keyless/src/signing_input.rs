//! What a key server agrees to sign: the two TLS server signing inputs a gateway produces, and
//! nothing else (no I/O, no BoringSSL: fuzzed by `fuzz/fuzz_targets/keyless_signing_input.rs`).
//!
//! BoringSSL's private-key hook hands the gateway the message *before* hashing, and the gateway
//! forwards it unchanged (`payload` of a sign request), so the key server sees one of:
//!
//! - **TLS 1.3 CertificateVerify** (RFC 8446 §4.4.3): 64 bytes of `0x20`, the context string
//!   `"TLS 1.3, server CertificateVerify"`, a `0x00` byte, then the transcript hash. The
//!   transcript hash is made with the *cipher suite's* hash, not the signature scheme's (a
//!   `TLS_AES_256_GCM_SHA384` handshake signed with `ecdsa_secp256r1_sha256` carries 48 bytes),
//!   and TLS 1.3 suites only use SHA-256 and SHA-384: 32 or 48 bytes. RSA PKCS#1 v1.5 schemes are
//!   not allowed in TLS 1.3 handshake signatures (RFC 8446 §4.2.3).
//!   ML-DSA schemes (0x0904..0x0906) sign this input only.
//! - **TLS 1.2 ServerKeyExchange** (RFC 5246 §7.4.3, RFC 8422 §5.4): client random (32), server
//!   random (32), then `ServerECDHParams`: curve type `3` (named_curve), a named group the
//!   gateway can negotiate in TLS 1.2 (x25519, secp256r1, secp384r1, secp521r1), a one-byte
//!   length and a public key of exactly that group's size (uncompressed `0x04` points for the
//!   NIST curves), and nothing after it.
//!
//! Anything else (arbitrary text, a DER `TBSCertificate`, a truncated or extended input) is
//! refused, so a gateway, compromised or not, cannot obtain signatures over data that could
//! stand for a certificate, a CRL, an OCSP response or any other signed object.

use std::fmt;

/// `0x20` repeated: the start of every TLS 1.3 CertificateVerify input.
const TLS13_PAD: usize = 64;
/// The server's context string, with its terminating zero byte.
const TLS13_SERVER_CONTEXT: &[u8] = b"TLS 1.3, server CertificateVerify\0";
/// Client random + server random.
const RANDOMS: usize = 64;
/// `ECCurveType.named_curve`.
const NAMED_CURVE: u8 = 3;

/// A TLS 1.2 named group and its public-key size in ServerECDHParams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// x25519 (29): 32 bytes.
    X25519,
    /// secp256r1 (23): uncompressed point, 65 bytes.
    P256,
    /// secp384r1 (24): uncompressed point, 97 bytes.
    P384,
    /// secp521r1 (25): uncompressed point, 133 bytes.
    P521,
}

impl Group {
    fn from_code(code: u16) -> Option<Self> {
        Some(match code {
            29 => Group::X25519,
            23 => Group::P256,
            24 => Group::P384,
            25 => Group::P521,
            _ => return None,
        })
    }

    /// The public key's length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Group::X25519 => 32,
            Group::P256 => 65,
            Group::P384 => 97,
            Group::P521 => 133,
        }
    }

    /// Whether the key is an uncompressed point (`0x04 || x || y`).
    fn is_point(self) -> bool {
        !matches!(self, Group::X25519)
    }
}

/// A signing input the key server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningInput {
    /// TLS 1.3 server CertificateVerify with a transcript hash of this many bytes.
    Tls13CertificateVerify {
        /// 32 (SHA-256 suites) or 48 (SHA-384).
        transcript_hash_len: usize,
    },
    /// TLS 1.2 ServerKeyExchange with an ephemeral key of this group.
    Tls12ServerKeyExchange {
        /// The named group.
        group: Group,
    },
}

/// Why a signing input was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Neither a TLS 1.3 CertificateVerify nor a TLS 1.2 ServerKeyExchange input.
    NotTls,
    /// A TLS 1.3 CertificateVerify input whose transcript hash is not 32 or 48 bytes.
    TranscriptHashLength(usize),
    /// An RSA PKCS#1 v1.5 scheme over a TLS 1.3 input (not allowed by RFC 8446).
    Pkcs1InTls13,
    /// An ML-DSA scheme over a TLS 1.2 input (ML-DSA is defined for TLS 1.3 only).
    MlDsaInTls12,
    /// ServerECDHParams naming a group the gateway does not use in TLS 1.2.
    Group(u16),
    /// A public key of the wrong length or form for its group.
    PublicKey,
    /// A ServerKeyExchange input that is cut short or has bytes after the public key.
    Length,
}

impl Refusal {
    /// Label for `tlsgate_keyserver_refused_total{reason}`.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::NotTls => "not_tls_input",
            Refusal::TranscriptHashLength(_) => "transcript_hash_length",
            Refusal::Pkcs1InTls13 => "pkcs1_in_tls13",
            Refusal::MlDsaInTls12 => "mldsa_in_tls12",
            Refusal::Group(_) => "group",
            Refusal::PublicKey => "public_key",
            Refusal::Length => "length",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotTls => f.write_str("not a TLS 1.3 CertificateVerify or TLS 1.2 ServerKeyExchange input"),
            Refusal::TranscriptHashLength(n) => {
                write!(f, "TLS 1.3 transcript hash of {n} bytes (expected 32 or 48)")
            }
            Refusal::Pkcs1InTls13 => f.write_str("RSA PKCS#1 v1.5 is not allowed for TLS 1.3 signatures"),
            Refusal::MlDsaInTls12 => f.write_str("ML-DSA is not allowed for TLS 1.2 signatures"),
            Refusal::Group(g) => write!(f, "ServerKeyExchange group {g:#06x} is not used in TLS 1.2"),
            Refusal::PublicKey => f.write_str("ServerKeyExchange public key of the wrong length or form"),
            Refusal::Length => f.write_str("ServerKeyExchange input truncated or followed by extra bytes"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether `code` is an RSA PKCS#1 v1.5 signature scheme.
fn is_pkcs1(code: u16) -> bool {
    matches!(code, 0x0401 | 0x0501 | 0x0601)
}

/// Whether `code` is an ML-DSA signature scheme (0x0904..=0x0906).
fn is_mldsa(code: u16) -> bool {
    matches!(code, 0x0904..=0x0906)
}

/// Checks that `payload`, to be signed with the TLS signature scheme `algorithm`, is a TLS
/// server signing input (module documentation); says which, or why not.
pub fn check(algorithm: u16, payload: &[u8]) -> Result<SigningInput, Refusal> {
    if let Some(hash) = tls13_transcript_hash(payload) {
        if !matches!(hash.len(), 32 | 48) {
            return Err(Refusal::TranscriptHashLength(hash.len()));
        }
        if is_pkcs1(algorithm) {
            return Err(Refusal::Pkcs1InTls13);
        }
        return Ok(SigningInput::Tls13CertificateVerify {
            transcript_hash_len: hash.len(),
        });
    }
    let params = payload.get(RANDOMS..).ok_or(Refusal::NotTls)?;
    if is_mldsa(algorithm) && params.first() == Some(&NAMED_CURVE) {
        return Err(Refusal::MlDsaInTls12);
    }
    let (&curve_type, rest) = params.split_first().ok_or(Refusal::NotTls)?;
    if curve_type != NAMED_CURVE {
        // Not ServerECDHParams with a named curve (explicit curves are never negotiated).
        return Err(Refusal::NotTls);
    }
    let [g0, g1, key_len, key @ ..] = rest else {
        return Err(Refusal::Length);
    };
    let code = u16::from_be_bytes([*g0, *g1]);
    let group = Group::from_code(code).ok_or(Refusal::Group(code))?;
    if usize::from(*key_len) != group.key_len() {
        return Err(Refusal::PublicKey);
    }
    if key.len() != group.key_len() {
        return Err(Refusal::Length);
    }
    if group.is_point() && key.first() != Some(&0x04) {
        return Err(Refusal::PublicKey);
    }
    Ok(SigningInput::Tls12ServerKeyExchange { group })
}

/// The bytes after the TLS 1.3 server CertificateVerify prefix, when `payload` starts with it.
fn tls13_transcript_hash(payload: &[u8]) -> Option<&[u8]> {
    let (pad, rest) = payload.split_at_checked(TLS13_PAD)?;
    if !pad.iter().all(|&b| b == 0x20) {
        return None;
    }
    rest.strip_prefix(TLS13_SERVER_CONTEXT)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECDSA_P256: u16 = 0x0403;
    const PSS_256: u16 = 0x0804;
    const PKCS1_256: u16 = 0x0401;
    const ED25519: u16 = 0x0807;

    fn tls13(hash_len: usize) -> Vec<u8> {
        let mut v = vec![0x20; 64];
        v.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
        v.extend(std::iter::repeat_n(0xAB, hash_len));
        v
    }

    fn tls12(group: u16, key_len_byte: u8, key: &[u8]) -> Vec<u8> {
        let mut v: Vec<u8> = (0..64).collect();
        v.push(3);
        v.extend_from_slice(&group.to_be_bytes());
        v.push(key_len_byte);
        v.extend_from_slice(key);
        v
    }

    fn point(len: usize) -> Vec<u8> {
        let mut p = vec![0x42; len];
        p[0] = 0x04;
        p
    }

    #[test]
    fn tls13_certificate_verify_with_sha256_and_sha384_transcripts_is_accepted() {
        for alg in [ECDSA_P256, 0x0503, PSS_256, 0x0806, ED25519] {
            for len in [32, 48] {
                assert_eq!(
                    check(alg, &tls13(len)),
                    Ok(SigningInput::Tls13CertificateVerify {
                        transcript_hash_len: len
                    }),
                    "{alg:#06x} {len}"
                );
            }
        }
    }

    #[test]
    fn tls13_with_a_wrong_hash_length_or_pkcs1_is_refused() {
        for len in [0, 1, 20, 31, 33, 47, 49, 64, 1000] {
            assert_eq!(
                check(ECDSA_P256, &tls13(len)),
                Err(Refusal::TranscriptHashLength(len)),
                "{len}"
            );
        }
        assert_eq!(check(PKCS1_256, &tls13(32)), Err(Refusal::Pkcs1InTls13));
        // The client's context string is not a server input.
        let mut client = tls13(32);
        client[64..97].copy_from_slice(b"TLS 1.3, client CertificateVerify");
        assert_eq!(check(ECDSA_P256, &client), Err(Refusal::NotTls));
        // Padding that is not all 0x20.
        let mut pad = tls13(32);
        pad[10] = 0x21;
        assert_eq!(check(ECDSA_P256, &pad), Err(Refusal::NotTls));
        // Cut inside the prefix.
        assert_eq!(check(ECDSA_P256, &tls13(32)[..80]), Err(Refusal::NotTls));
    }

    #[test]
    fn tls12_server_key_exchange_for_each_group_is_accepted() {
        let cases = [
            (29, Group::X25519, vec![0x42; 32]),
            (23, Group::P256, point(65)),
            (24, Group::P384, point(97)),
            (25, Group::P521, point(133)),
        ];
        for (code, group, key) in cases {
            let len = u8::try_from(key.len()).unwrap();
            for alg in [ECDSA_P256, 0x0503, 0x0603, PSS_256, PKCS1_256, 0x0601, ED25519] {
                assert_eq!(
                    check(alg, &tls12(code, len, &key)),
                    Ok(SigningInput::Tls12ServerKeyExchange { group }),
                    "{code} {alg:#06x}"
                );
            }
        }
    }

    #[test]
    fn tls12_with_a_wrong_curve_point_or_length_is_refused() {
        // Groups not usable in TLS 1.2 (X25519MLKEM768 is TLS 1.3 only), or unknown.
        for code in [0x11EC, 0x6399, 22, 30, 0x0100, 0] {
            assert_eq!(
                check(ECDSA_P256, &tls12(code, 32, &[0x42; 32])),
                Err(Refusal::Group(code))
            );
        }
        // Explicit curves (1, 2) instead of a named one.
        let mut explicit = tls12(23, 65, &point(65));
        explicit[64] = 1;
        assert_eq!(check(ECDSA_P256, &explicit), Err(Refusal::NotTls));
        // A length byte that does not match the group.
        assert_eq!(check(ECDSA_P256, &tls12(29, 33, &[0x42; 33])), Err(Refusal::PublicKey));
        assert_eq!(check(ECDSA_P256, &tls12(23, 33, &point(33))), Err(Refusal::PublicKey));
        assert_eq!(check(ECDSA_P256, &tls12(24, 65, &point(65))), Err(Refusal::PublicKey));
        // A compressed point.
        let mut compressed = point(65);
        compressed[0] = 0x02;
        assert_eq!(check(ECDSA_P256, &tls12(23, 65, &compressed)), Err(Refusal::PublicKey));
        // Truncated: the key is shorter than its length byte; or the header is cut.
        let full = tls12(23, 65, &point(65));
        assert_eq!(check(ECDSA_P256, &full[..full.len() - 1]), Err(Refusal::Length));
        assert_eq!(check(ECDSA_P256, &full[..67]), Err(Refusal::Length));
        assert_eq!(check(ECDSA_P256, &full[..65]), Err(Refusal::Length));
        assert_eq!(check(ECDSA_P256, &full[..64]), Err(Refusal::NotTls));
        assert_eq!(check(ECDSA_P256, &full[..30]), Err(Refusal::NotTls));
        // Overlong: anything after the public key.
        let mut long = full.clone();
        long.push(0);
        assert_eq!(check(ECDSA_P256, &long), Err(Refusal::Length));
        let mut long = tls12(29, 32, &[0x42; 32]);
        long.extend_from_slice(b"and then some text");
        assert_eq!(check(ECDSA_P256, &long), Err(Refusal::Length));
    }

    #[test]
    fn mldsa_signs_tls13_inputs_only() {
        for alg in [0x0904, 0x0905, 0x0906] {
            assert_eq!(
                check(alg, &tls13(48)),
                Ok(SigningInput::Tls13CertificateVerify {
                    transcript_hash_len: 48
                })
            );
            assert_eq!(check(alg, &tls12(29, 32, &[0x42; 32])), Err(Refusal::MlDsaInTls12));
            assert_eq!(check(alg, b"a statement to sign"), Err(Refusal::NotTls));
        }
    }

    #[test]
    fn arbitrary_data_and_certificates_are_refused() {
        assert_eq!(check(ECDSA_P256, b""), Err(Refusal::NotTls));
        assert_eq!(check(ECDSA_P256, b"x"), Err(Refusal::NotTls));
        assert_eq!(
            check(PSS_256, b"I, the owner of example.com, transfer it to the bearer."),
            Err(Refusal::NotTls)
        );
        let text = "a longer statement that anyone would like signed by a trusted key ".repeat(4);
        assert_eq!(check(ED25519, text.as_bytes()), Err(Refusal::NotTls));
        // The start of a DER TBSCertificate: SEQUENCE { [0] { INTEGER 2 }, INTEGER serial, ... }.
        let mut tbs = vec![0x30, 0x82, 0x01, 0x0a, 0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x08];
        tbs.extend_from_slice(&[0x11; 8]);
        tbs.extend_from_slice(&[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]);
        tbs.resize(270, 0x31);
        for alg in [ECDSA_P256, PSS_256, PKCS1_256, ED25519] {
            assert_eq!(check(alg, &tbs), Err(Refusal::NotTls), "{alg:#06x}");
        }
        // A bare digest (what a pre-hashing protocol would send) is not an input either.
        assert_eq!(check(ECDSA_P256, &[0x5a; 32]), Err(Refusal::NotTls));
        assert_eq!(check(ECDSA_P256, &[0x5a; 130]), Err(Refusal::NotTls));
    }
}

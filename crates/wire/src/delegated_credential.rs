//! Delegated credentials (RFC 9345): the structures a gateway builds and a key server checks
//! before signing, with no I/O and no crypto (fuzzed by `fuzz/fuzz_targets/delegated_credential.rs`).
//!
//! ```text
//! struct {
//!     uint32 valid_time;                      // seconds after the certificate's notBefore
//!     SignatureScheme dc_cert_verify_algorithm;
//!     opaque ASN1_subjectPublicKeyInfo<1..2^24-1>;
//! } Credential;
//!
//! struct {
//!     Credential cred;
//!     SignatureScheme algorithm;              // the certificate key's signature over it
//!     opaque signature<1..2^16-1>;
//! } DelegatedCredential;
//! ```
//!
//! The certificate's key signs (RFC 9345 §4): 64 bytes `0x20`, the context string
//! `"TLS, server delegated credentials"`, a `0x00` byte, the end-entity certificate (DER),
//! the Credential, and `algorithm`. [`signing_input`] builds exactly that; [`parse_signing_input`]
//! takes it apart again and accepts nothing else (no trailing bytes, a certificate that is one
//! whole DER SEQUENCE), so a key server can check each part before it signs.

use std::fmt;

/// `0x20` repeated at the start of the signed message.
const PAD: usize = 64;
/// The server's context string with its terminating zero byte (RFC 9345 §4).
pub const CONTEXT: &[u8] = b"TLS, server delegated credentials\0";
/// Longest validity a credential may have, counted from when it is checked (RFC 9345 §4.1.3:
/// seven days).
pub const MAX_VALIDITY_SECS: u64 = 7 * 24 * 3600;
/// The DelegationUsage extension's OID, 1.3.6.1.4.1.44363.44, as dotted text.
pub const DELEGATION_USAGE_OID: &str = "1.3.6.1.4.1.44363.44";
/// Largest SubjectPublicKeyInfo accepted (an ML-DSA-87 key is 2.6 KB).
const MAX_SPKI: usize = 4096;

/// A Credential (the part the certificate's key signs, with the algorithm it is signed with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential<'a> {
    /// Seconds after the certificate's notBefore at which the credential expires.
    pub valid_time: u32,
    /// The scheme the credential's own key signs handshakes with.
    pub dc_cert_verify_algorithm: u16,
    /// The credential's public key, DER SubjectPublicKeyInfo.
    pub spki: &'a [u8],
}

impl<'a> Credential<'a> {
    /// Appends the wire form.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), DcError> {
        if self.spki.is_empty() || self.spki.len() > MAX_SPKI {
            return Err(DcError::SpkiLength);
        }
        out.extend_from_slice(&self.valid_time.to_be_bytes());
        out.extend_from_slice(&self.dc_cert_verify_algorithm.to_be_bytes());
        let len = u32::try_from(self.spki.len()).map_err(|_| DcError::SpkiLength)?;
        out.extend_from_slice(&len.to_be_bytes()[1..]);
        out.extend_from_slice(self.spki);
        Ok(())
    }

    /// Parses a Credential at the start of `input`; returns it and the rest.
    fn parse(input: &'a [u8]) -> Result<(Self, &'a [u8]), DcError> {
        let (valid_time, rest) = take_u32(input)?;
        let (dc_cert_verify_algorithm, rest) = take_u16(rest)?;
        let (len, rest) = take_u24(rest)?;
        if len == 0 || len > MAX_SPKI {
            return Err(DcError::SpkiLength);
        }
        let spki = rest.get(..len).ok_or(DcError::Truncated)?;
        Ok((
            Credential {
                valid_time,
                dc_cert_verify_algorithm,
                spki,
            },
            &rest[len..],
        ))
    }
}

/// The message a key server signs to issue a credential, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningInput<'a> {
    /// The end-entity certificate, DER.
    pub certificate: &'a [u8],
    /// The credential.
    pub credential: Credential<'a>,
    /// The scheme the certificate's key signs with.
    pub algorithm: u16,
}

/// Why bytes are not a delegated-credential structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DcError {
    /// The input ends inside a field.
    Truncated,
    /// The fixed prefix (64 spaces, the context string) is not there.
    Prefix,
    /// The certificate is not one DER SEQUENCE with a definite length.
    Certificate,
    /// The public key is empty or larger than any key tlsgate serves.
    SpkiLength,
    /// The signature is empty.
    EmptySignature,
    /// Bytes follow the last field.
    Trailing,
}

impl DcError {
    /// Label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            DcError::Truncated => "truncated",
            DcError::Prefix => "bad_prefix",
            DcError::Certificate => "bad_certificate_encoding",
            DcError::SpkiLength => "bad_public_key_length",
            DcError::EmptySignature => "empty_signature",
            DcError::Trailing => "trailing_bytes",
        }
    }
}

impl fmt::Display for DcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DcError::Truncated => "the structure ends inside a field",
            DcError::Prefix => "not a delegated-credential signing input (wrong prefix or context string)",
            DcError::Certificate => "the certificate is not one DER SEQUENCE",
            DcError::SpkiLength => "the credential's public key is empty or too large",
            DcError::EmptySignature => "the signature is empty",
            DcError::Trailing => "bytes follow the structure",
        })
    }
}

impl std::error::Error for DcError {}

/// The message the certificate's key signs (RFC 9345 §4).
pub fn signing_input(certificate: &[u8], credential: &Credential<'_>, algorithm: u16) -> Result<Vec<u8>, DcError> {
    let mut out = Vec::with_capacity(PAD + CONTEXT.len() + certificate.len() + credential.spki.len() + 12);
    out.resize(PAD, 0x20);
    out.extend_from_slice(CONTEXT);
    out.extend_from_slice(certificate);
    credential.encode(&mut out)?;
    out.extend_from_slice(&algorithm.to_be_bytes());
    Ok(out)
}

/// Takes a signing input apart; anything but exactly the RFC 9345 message is an error.
pub fn parse_signing_input(input: &[u8]) -> Result<SigningInput<'_>, DcError> {
    let prefix = input.get(..PAD + CONTEXT.len()).ok_or(DcError::Truncated)?;
    if prefix[..PAD].iter().any(|&b| b != 0x20) || &prefix[PAD..] != CONTEXT {
        return Err(DcError::Prefix);
    }
    let rest = &input[PAD + CONTEXT.len()..];
    let cert_len = der_sequence_len(rest)?;
    let (certificate, rest) = rest.split_at(cert_len);
    let (credential, rest) = Credential::parse(rest)?;
    let (algorithm, rest) = take_u16(rest)?;
    if !rest.is_empty() {
        return Err(DcError::Trailing);
    }
    Ok(SigningInput {
        certificate,
        credential,
        algorithm,
    })
}

/// The DelegatedCredential sent in the Certificate message: the credential, the algorithm and
/// the certificate key's signature.
pub fn delegated_credential(credential: &Credential<'_>, algorithm: u16, signature: &[u8]) -> Result<Vec<u8>, DcError> {
    if signature.is_empty() {
        return Err(DcError::EmptySignature);
    }
    let sig_len = u16::try_from(signature.len()).map_err(|_| DcError::Truncated)?;
    let mut out = Vec::with_capacity(credential.spki.len() + signature.len() + 13);
    credential.encode(&mut out)?;
    out.extend_from_slice(&algorithm.to_be_bytes());
    out.extend_from_slice(&sig_len.to_be_bytes());
    out.extend_from_slice(signature);
    Ok(out)
}

/// A parsed DelegatedCredential: (credential, algorithm, signature).
pub fn parse_delegated_credential(input: &[u8]) -> Result<(Credential<'_>, u16, &[u8]), DcError> {
    let (credential, rest) = Credential::parse(input)?;
    let (algorithm, rest) = take_u16(rest)?;
    let (len, rest) = take_u16(rest)?;
    let signature = rest.get(..usize::from(len)).ok_or(DcError::Truncated)?;
    if signature.is_empty() {
        return Err(DcError::EmptySignature);
    }
    if rest.len() != usize::from(len) {
        return Err(DcError::Trailing);
    }
    Ok((credential, algorithm, signature))
}

/// Whether a ClientHello's `delegated_credential` extension body (a SignatureSchemeList, the
/// form of `signature_algorithms`) offers `scheme`. A malformed body offers nothing.
pub fn offers_scheme(extension: &[u8], scheme: u16) -> bool {
    crate::client_hello::u16_items(extension, 2).any(|s| s == scheme)
}

/// The length of the DER SEQUENCE (header included) at the start of `input`.
fn der_sequence_len(input: &[u8]) -> Result<usize, DcError> {
    let (&tag, rest) = input.split_first().ok_or(DcError::Truncated)?;
    if tag != 0x30 {
        return Err(DcError::Certificate);
    }
    let (&first, rest) = rest.split_first().ok_or(DcError::Truncated)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        // Long form: 1 to 3 length bytes (a certificate is far below 16 MiB), minimal encoding.
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 3 {
            return Err(DcError::Certificate);
        }
        let bytes = rest.get(..n).ok_or(DcError::Truncated)?;
        if bytes[0] == 0 {
            return Err(DcError::Certificate);
        }
        let len = bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        if len < 0x80 {
            return Err(DcError::Certificate);
        }
        (len, 2 + n)
    };
    let total = header + len;
    if input.len() < total {
        return Err(DcError::Truncated);
    }
    Ok(total)
}

fn take_u16(input: &[u8]) -> Result<(u16, &[u8]), DcError> {
    let b = input.get(..2).ok_or(DcError::Truncated)?;
    Ok((u16::from_be_bytes([b[0], b[1]]), &input[2..]))
}

fn take_u24(input: &[u8]) -> Result<(usize, &[u8]), DcError> {
    let b = input.get(..3).ok_or(DcError::Truncated)?;
    Ok((
        (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
        &input[3..],
    ))
}

fn take_u32(input: &[u8]) -> Result<(u32, &[u8]), DcError> {
    let b = input.get(..4).ok_or(DcError::Truncated)?;
    Ok((u32::from_be_bytes([b[0], b[1], b[2], b[3]]), &input[4..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in certificate: a DER SEQUENCE of `len` content bytes.
    fn cert(len: usize) -> Vec<u8> {
        let mut out = vec![0x30];
        match len {
            0..=0x7f => out.push(len as u8),
            0x80..=0xff => out.extend_from_slice(&[0x81, len as u8]),
            _ => out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]),
        }
        out.extend(std::iter::repeat_n(0xAB, len));
        out
    }

    fn credential(spki: &[u8]) -> Credential<'_> {
        Credential {
            valid_time: 86_400,
            dc_cert_verify_algorithm: 0x0403,
            spki,
        }
    }

    #[test]
    fn signing_input_round_trips_for_short_and_long_certificates() {
        let spki = [0x30, 0x59, 1, 2, 3];
        for len in [10, 200, 1500] {
            let c = cert(len);
            let input = signing_input(&c, &credential(&spki), 0x0804).unwrap();
            assert_eq!(&input[..64], &[0x20; 64]);
            assert_eq!(&input[64..64 + CONTEXT.len()], CONTEXT);
            let parsed = parse_signing_input(&input).unwrap();
            assert_eq!(parsed.certificate, &c[..]);
            assert_eq!(parsed.credential, credential(&spki));
            assert_eq!(parsed.algorithm, 0x0804);
        }
    }

    #[test]
    fn anything_but_the_exact_message_is_refused() {
        let spki = [1u8; 91];
        let good = signing_input(&cert(300), &credential(&spki), 0x0403).unwrap();
        // Each truncation.
        for cut in 0..good.len() {
            assert!(parse_signing_input(&good[..cut]).is_err(), "cut at {cut}");
        }
        // A trailing byte.
        let mut long = good.clone();
        long.push(0);
        assert_eq!(parse_signing_input(&long), Err(DcError::Trailing));
        // The TLS 1.3 CertificateVerify context instead.
        let mut other = good.clone();
        other[64..64 + 10].copy_from_slice(b"TLS 1.3, s");
        assert_eq!(parse_signing_input(&other), Err(DcError::Prefix));
        // A certificate that is not a SEQUENCE, or uses a non-minimal length.
        let mut not_seq = good.clone();
        not_seq[64 + CONTEXT.len()] = 0x31;
        assert_eq!(parse_signing_input(&not_seq), Err(DcError::Certificate));
        let mut padded = vec![0x20; 64];
        padded.extend_from_slice(CONTEXT);
        padded.extend_from_slice(&[0x30, 0x82, 0x00, 0x05, 1, 2, 3, 4, 5]);
        credential(&spki).encode(&mut padded).unwrap();
        padded.extend_from_slice(&[4, 3]);
        assert_eq!(parse_signing_input(&padded), Err(DcError::Certificate));
        // An empty public key.
        assert_eq!(
            signing_input(&cert(10), &credential(&[]), 0x0403),
            Err(DcError::SpkiLength)
        );
    }

    #[test]
    fn the_client_offer_is_read_strictly() {
        assert!(offers_scheme(&[0, 4, 8, 4, 4, 3], 0x0403));
        assert!(!offers_scheme(&[0, 4, 8, 4, 4, 3], 0x0503));
        assert!(!offers_scheme(&[0, 3, 8, 4, 4], 0x0804), "odd length");
        assert!(!offers_scheme(&[0, 4, 4, 3], 0x0403), "length beyond the body");
        assert!(!offers_scheme(&[], 0x0403));
    }

    #[test]
    fn delegated_credential_round_trips_and_checks_its_lengths() {
        let spki = [7u8; 91];
        let dc = delegated_credential(&credential(&spki), 0x0403, &[9; 71]).unwrap();
        let (c, alg, sig) = parse_delegated_credential(&dc).unwrap();
        assert_eq!((c, alg, sig), (credential(&spki), 0x0403, &[9u8; 71][..]));
        assert_eq!(parse_delegated_credential(&dc[..dc.len() - 1]), Err(DcError::Truncated));
        let mut long = dc.clone();
        long.push(1);
        assert_eq!(parse_delegated_credential(&long), Err(DcError::Trailing));
        assert_eq!(
            delegated_credential(&credential(&spki), 0x0403, &[]),
            Err(DcError::EmptySignature)
        );
    }
}

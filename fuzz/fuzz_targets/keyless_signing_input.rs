//! The key server's signing-input validator must never panic on untrusted bytes, and whatever it
//! accepts must have exactly the shape of a TLS server signing input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_keyless::signing_input::{check, SigningInput};

fuzz_target!(|data: &[u8]| {
    let Some((alg, payload)) = data.split_first_chunk::<2>() else {
        return;
    };
    let algorithm = u16::from_be_bytes(*alg);
    match check(algorithm, payload) {
        Ok(SigningInput::Tls13CertificateVerify { transcript_hash_len }) => {
            assert!(matches!(transcript_hash_len, 32 | 48));
            assert_eq!(payload.len(), 64 + 34 + transcript_hash_len);
            assert!(payload[..64].iter().all(|&b| b == 0x20));
            assert_eq!(&payload[64..98], b"TLS 1.3, server CertificateVerify\0");
            assert!(!matches!(algorithm, 0x0401 | 0x0501 | 0x0601));
        }
        Ok(SigningInput::Tls12ServerKeyExchange { group }) => {
            assert_eq!(payload.len(), 68 + group.key_len());
            assert_eq!(payload[64], 3);
            assert_eq!(usize::from(payload[67]), group.key_len());
        }
        Err(refusal) => {
            assert!(!refusal.reason().is_empty());
            assert!(!refusal.to_string().is_empty());
        }
    }
});

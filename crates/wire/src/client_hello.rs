//! ClientHello inspection without I/O: what the client can verify and negotiate, read from the
//! raw extension and cipher-suite bytes that BoringSSL hands the certificate-selection hook.
//!
//! Every function takes untrusted bytes and must never panic (there is a fuzz target).

/// TLS extension numbers used here.
pub const EXT_SIGNATURE_ALGORITHMS: u16 = 13;
/// `supported_versions` (RFC 8446).
pub const EXT_SUPPORTED_VERSIONS: u16 = 43;

const ECDSA_SIGALGS: [u16; 3] = [0x0403, 0x0503, 0x0603];
/// TLS 1.2 ECDHE-ECDSA suites (AEAD and legacy).
const ECDHE_ECDSA_SUITES: [u16; 8] = [0xC02B, 0xC02C, 0xCCA9, 0xC009, 0xC00A, 0xC023, 0xC024, 0xC0AD];

/// Reads a list of big-endian u16 values prefixed by a length of `prefix` bytes (1 or 2).
/// Returns an empty vector for malformed input.
pub fn u16_list(data: &[u8], prefix: usize) -> Vec<u16> {
    u16_items(data, prefix).collect()
}

/// The values of [`u16_list`] without collecting them (nothing for malformed input).
pub fn u16_items(data: &[u8], prefix: usize) -> impl Iterator<Item = u16> + '_ {
    let body = data.get(..prefix).and_then(|len_bytes| {
        let len = len_bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        data.get(prefix..prefix.checked_add(len)?)
            .filter(|body| body.len() % 2 == 0)
    });
    be_u16s(body.unwrap_or_default())
}

fn be_u16s(raw: &[u8]) -> impl Iterator<Item = u16> + '_ {
    raw.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]))
}

/// Parses the body of a `signature_algorithms` extension.
pub fn signature_algorithms(ext: &[u8]) -> Vec<u16> {
    u16_list(ext, 2)
}

/// Parses the body of a `supported_versions` extension (ClientHello form: 1-byte length).
pub fn supported_versions(ext: &[u8]) -> Vec<u16> {
    u16_list(ext, 1)
}

/// Parses the raw cipher-suite list (no length prefix, as BoringSSL exposes it).
pub fn cipher_suites(raw: &[u8]) -> Vec<u16> {
    be_u16s(raw).collect()
}

/// The first PSK identity of a `pre_shared_key` extension (RFC 8446 §4.2.11): for tlsgate's own
/// tickets, the ticket itself. None when the extension is malformed.
///
/// ```text
/// struct { opaque identity<1..2^16-1>; uint32 obfuscated_ticket_age; } PskIdentity;
/// struct { PskIdentity identities<7..2^16-1>; PskBinderEntry binders<33..2^16-1>; } OfferedPsks;
/// ```
pub fn first_psk_identity(ext: &[u8]) -> Option<&[u8]> {
    let list_len = usize::from(u16::from_be_bytes([*ext.first()?, *ext.get(1)?]));
    let list = ext.get(2..2 + list_len)?;
    let id_len = usize::from(u16::from_be_bytes([*list.first()?, *list.get(1)?]));
    if id_len == 0 || list.len() < 2 + id_len + 4 {
        return None;
    }
    list.get(2..2 + id_len)
}

/// The AEAD suites tlsgate offers (TLS 1.3, then TLS 1.2 ECDHE), each with whether it is
/// ChaCha20-Poly1305.
const AEAD_SUITES: [(u16, bool); 9] = [
    (0x1301, false), // TLS_AES_128_GCM_SHA256
    (0x1302, false), // TLS_AES_256_GCM_SHA384
    (0x1303, true),  // TLS_CHACHA20_POLY1305_SHA256
    (0xC02B, false), // ECDHE-ECDSA-AES128-GCM-SHA256
    (0xC02C, false), // ECDHE-ECDSA-AES256-GCM-SHA384
    (0xCCA9, true),  // ECDHE-ECDSA-CHACHA20-POLY1305
    (0xC02F, false), // ECDHE-RSA-AES128-GCM-SHA256
    (0xC030, false), // ECDHE-RSA-AES256-GCM-SHA384
    (0xCCA8, true),  // ECDHE-RSA-CHACHA20-POLY1305
];

/// Whether the first AEAD suite the client lists (raw cipher_suites body; GREASE and suites
/// tlsgate does not offer skipped) is ChaCha20-Poly1305: the mark of a client without AES
/// instructions (phones), which is then served ChaCha20. Everyone else gets AES-128-GCM, even a
/// client listing AES-256-GCM first (OpenSSL's default order): the same AEAD family, a cheaper
/// key schedule (SHA-256 rather than SHA-384) and fewer AES rounds.
pub fn prefers_chacha20(ciphers: &[u8]) -> bool {
    be_u16s(ciphers)
        .find_map(|s| AEAD_SUITES.iter().find(|(id, _)| *id == s).map(|(_, chacha)| *chacha))
        .unwrap_or(false)
}

/// The facts certificate selection needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCapabilities {
    /// Client offers TLS 1.3 (and so will negotiate it if the server allows).
    pub offers_tls13: bool,
    /// Client accepts ECDSA signatures.
    pub ecdsa_sigalgs: bool,
    /// Client offers at least one ECDHE-ECDSA suite for TLS 1.2.
    pub ecdsa_tls12_suites: bool,
}

impl ClientCapabilities {
    /// From the raw pieces of a ClientHello.
    pub fn from_parts(sigalgs_ext: Option<&[u8]>, versions_ext: Option<&[u8]>, ciphers: &[u8]) -> Self {
        // Runs in every handshake's certificate selection: the lists are scanned, not collected.
        let mut versions = versions_ext.map(|ext| u16_items(ext, 1)).into_iter().flatten();
        Self {
            offers_tls13: versions.any(|v| v == 0x0304),
            // A TLS 1.2 client without the extension implicitly accepts SHA-1 ECDSA only if it
            // offers ECDSA suites (RFC 5246 7.4.1.4.1); treat that as "can verify ECDSA".
            ecdsa_sigalgs: match sigalgs_ext {
                Some(ext) => u16_items(ext, 2).any(|a| ECDSA_SIGALGS.contains(&a)),
                None => true,
            },
            ecdsa_tls12_suites: be_u16s(ciphers).any(|s| ECDHE_ECDSA_SUITES.contains(&s)),
        }
    }

    /// Whether an ECDSA certificate will work with this client, given whether TLS 1.3 is enabled.
    pub fn can_use_ecdsa(&self, server_allows_tls13: bool) -> bool {
        if self.offers_tls13 && server_allows_tls13 {
            self.ecdsa_sigalgs
        } else {
            self.ecdsa_sigalgs && self.ecdsa_tls12_suites
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psk_identity_is_read_and_malformed_input_refused() {
        // identities: len 9 = [id len 3, "abc", age 4 bytes]; then binders (ignored)
        let ext = [0, 9, 0, 3, b'a', b'b', b'c', 0, 0, 0, 1, 0, 33];
        assert_eq!(first_psk_identity(&ext), Some(&b"abc"[..]));
        assert_eq!(first_psk_identity(&ext[..5]), None, "truncated");
        assert_eq!(first_psk_identity(&[0, 6, 0, 0, 0, 0, 0, 0]), None, "empty identity");
        assert_eq!(
            first_psk_identity(&[0, 7, 0, 9, 1, 2, 3, 4, 5]),
            None,
            "identity longer than list"
        );
        assert_eq!(first_psk_identity(&[]), None);
    }

    #[test]
    fn chacha20_is_preferred_only_when_it_is_the_first_aead_listed() {
        let list = |ids: &[u16]| ids.iter().flat_map(|i| i.to_be_bytes()).collect::<Vec<u8>>();
        // A phone without AES instructions (GREASE first, as Chrome sends it).
        assert!(prefers_chacha20(&list(&[0x0A0A, 0x1303, 0x1301, 0xCCA9, 0xC02B])));
        assert!(prefers_chacha20(&list(&[0xCCA8, 0xC02F])), "TLS 1.2 only");
        // OpenSSL's default order: AES-256-GCM, ChaCha20, AES-128-GCM.
        assert!(!prefers_chacha20(&list(&[
            0x1302, 0x1303, 0x1301, 0xC02C, 0xCCA9, 0xC02B
        ])));
        assert!(!prefers_chacha20(&list(&[0x1301, 0x1303])), "a browser with AES-NI");
        // Suites tlsgate does not offer do not count: the first AEAD one decides.
        assert!(prefers_chacha20(&list(&[0xC009, 0x009C, 0xCCA9, 0xC02B])));
        assert!(!prefers_chacha20(&[]));
        assert!(!prefers_chacha20(&[0x13]), "odd length: no suite");
    }

    #[test]
    fn parses_sigalgs() {
        let ext = [0, 4, 0x04, 0x03, 0x08, 0x04];
        assert_eq!(signature_algorithms(&ext), vec![0x0403, 0x0804]);
    }

    #[test]
    fn malformed_lists_are_empty_not_panics() {
        assert!(signature_algorithms(&[]).is_empty());
        assert!(signature_algorithms(&[0]).is_empty());
        assert!(signature_algorithms(&[0, 9, 1, 2]).is_empty());
        assert!(signature_algorithms(&[0, 3, 1, 2, 3]).is_empty(), "odd length");
        assert!(supported_versions(&[200]).is_empty());
        assert_eq!(cipher_suites(&[0xC0, 0x2B, 0x01]), vec![0xC02B]);
        // A length prefix that overflows on a 64-bit add is refused too.
        assert_eq!(u16_items(&[0xFF; 8], 8).count(), 0);
    }

    #[test]
    fn malformed_extensions_decide_like_empty_ones() {
        // sigalgs present but malformed: nothing ECDSA in it; versions malformed: no TLS 1.3.
        let caps = ClientCapabilities::from_parts(Some(&[0, 9, 4, 3]), Some(&[9, 3, 4]), &[0xC0, 0x2B]);
        assert!(!caps.offers_tls13);
        assert!(!caps.can_use_ecdsa(true));
    }

    #[test]
    fn tls13_client_with_ecdsa_sigalgs_gets_ecdsa() {
        let caps = ClientCapabilities::from_parts(Some(&[0, 2, 4, 3]), Some(&[2, 3, 4]), &[0x13, 0x01]);
        assert!(caps.offers_tls13);
        assert!(caps.can_use_ecdsa(true));
        // Same client against a TLS-1.2-only server: no ECDHE-ECDSA suite offered, so RSA.
        assert!(!caps.can_use_ecdsa(false));
    }

    #[test]
    fn rsa_pss_only_client_gets_rsa() {
        let caps = ClientCapabilities::from_parts(Some(&[0, 2, 8, 4]), Some(&[2, 3, 4]), &[0x13, 0x01]);
        assert!(!caps.can_use_ecdsa(true));
    }

    #[test]
    fn tls12_client_offering_only_ecdhe_rsa_gets_rsa() {
        let caps = ClientCapabilities::from_parts(Some(&[0, 4, 4, 3, 8, 4]), None, &[0xC0, 0x2F]);
        assert!(!caps.can_use_ecdsa(true));
        let caps = ClientCapabilities::from_parts(Some(&[0, 4, 4, 3, 8, 4]), None, &[0xC0, 0x2F, 0xC0, 0x2B]);
        assert!(caps.can_use_ecdsa(true));
    }
}

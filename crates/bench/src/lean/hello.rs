//! The fixed ClientHello of `bench --lean`: TLS 1.3 only, TLS_AES_128_GCM_SHA256 only, one X25519
//! key share, no PSK modes (so the server issues no tickets), SNI and ALPN as the plan says.

/// Signature schemes offered: ECDSA P-256, RSA-PSS and PKCS#1 with SHA-256 (the server picks
/// its certificate from these; the bench does not check the signature).
const SIGNATURE_SCHEMES: [u16; 3] = [0x0403, 0x0804, 0x0401];

fn ext(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// The ClientHello handshake record for `sni` (none: no extension) and `alpn_wire` (the ALPN
/// list in wire format; empty: no extension) with the X25519 public key `share`; with
/// `delegated`, the `delegated_credential` extension offering ECDSA P-256 credentials (RFC 9345).
pub fn client_hello(
    sni: Option<&str>,
    alpn_wire: &[u8],
    delegated: bool,
    share: &[u8; 32],
    random: &[u8; 32],
) -> Vec<u8> {
    let mut exts = Vec::with_capacity(256);
    if let Some(name) = sni {
        let mut body = ((name.len() + 3) as u16).to_be_bytes().to_vec();
        body.push(0);
        body.extend_from_slice(&(name.len() as u16).to_be_bytes());
        body.extend_from_slice(name.as_bytes());
        ext(&mut exts, 0x0000, &body);
    }
    ext(&mut exts, 0x002b, &[0x02, 0x03, 0x04]);
    ext(&mut exts, 0x000a, &[0x00, 0x02, 0x00, 0x1d]);
    let mut key_share = vec![0x00, 0x24, 0x00, 0x1d, 0x00, 0x20];
    key_share.extend_from_slice(share);
    ext(&mut exts, 0x0033, &key_share);
    let mut schemes = ((SIGNATURE_SCHEMES.len() * 2) as u16).to_be_bytes().to_vec();
    schemes.extend(SIGNATURE_SCHEMES.iter().flat_map(|s| s.to_be_bytes()));
    ext(&mut exts, 0x000d, &schemes);
    if delegated {
        ext(&mut exts, 0x0022, &[0x00, 0x02, 0x04, 0x03]);
    }
    if !alpn_wire.is_empty() {
        let mut body = (alpn_wire.len() as u16).to_be_bytes().to_vec();
        body.extend_from_slice(alpn_wire);
        ext(&mut exts, 0x0010, &body);
    }
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(random);
    // A compatibility session ID, as every TLS 1.3 client sends.
    body.push(32);
    body.extend_from_slice(random);
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut record = vec![22, 3, 1];
    record.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
    record.extend_from_slice(&[1, 0]);
    record.extend_from_slice(&(body.len() as u16).to_be_bytes());
    record.extend_from_slice(&body);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_parses_as_a_tls13_client_hello_with_its_extensions() {
        let record = client_hello(Some("localhost"), b"\x08http/1.1", false, &[5; 32], &[6; 32]);
        assert_eq!(&record[..3], &[22, 3, 1]);
        assert_eq!(
            usize::from(u16::from_be_bytes([record[3], record[4]])),
            record.len() - 5
        );
        // The JA4 parser reads the body as BoringSSL's hello callback sees it.
        let hello = tlsgate_wire::ja4::parse(&record[9..]).expect("a ClientHello");
        assert!(hello.sni);
        assert_eq!(hello.ciphers, vec![0x1301]);
        assert_eq!(hello.extensions, vec![0x0000, 0x002b, 0x000a, 0x0033, 0x000d, 0x0010]);
        assert_eq!(hello.signature_algorithms, SIGNATURE_SCHEMES.to_vec());
        assert_eq!(&hello.alpn, b"h1");
        assert_eq!(hello.version, 0x0304, "supported_versions offers TLS 1.3");
        let bare = client_hello(None, b"", false, &[5; 32], &[6; 32]);
        let hello = tlsgate_wire::ja4::parse(&bare[9..]).expect("a ClientHello");
        assert!(!hello.sni);
        assert_eq!(hello.extensions, vec![0x002b, 0x000a, 0x0033, 0x000d]);
        let dc = client_hello(None, b"", true, &[5; 32], &[6; 32]);
        let hello = tlsgate_wire::ja4::parse(&dc[9..]).expect("a ClientHello");
        assert_eq!(hello.extensions, vec![0x002b, 0x000a, 0x0033, 0x000d, 0x0022]);
        assert!(dc.ends_with(&[0x00, 0x22, 0x00, 0x04, 0x00, 0x02, 0x04, 0x03]));
    }
}

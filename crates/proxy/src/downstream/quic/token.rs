//! Retry tokens (address validation, RFC 9000 §8.1.2): what the gateway gives a new client in a
//! Retry packet and takes back in its next Initial, proving the client receives at its address.
//! The token binds the client's address and port, the connection ID the Retry chose and the
//! client's original one under an HMAC with the process's secret; it is good for
//! [`LIFETIME`]. The byte layout is `tlsgate_wire::quic_token` (fuzzed).

use super::cid::Secret;
use super::error::QuicError;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_wire::quic_token::{self, MAC_LEN};

/// How long a Retry token is accepted.
pub const LIFETIME: Duration = Duration::from_secs(10);

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn addr_bytes(peer: SocketAddr) -> Vec<u8> {
    let mut out = match peer.ip() {
        std::net::IpAddr::V4(ip) => ip.to_ipv6_mapped().octets().to_vec(),
        std::net::IpAddr::V6(ip) => ip.octets().to_vec(),
    };
    out.extend_from_slice(&peer.port().to_be_bytes());
    out
}

fn mac(secret: &Secret, body: &[u8], peer: SocketAddr, retry_scid: &[u8]) -> [u8; MAC_LEN] {
    let full = secret.mac(&[b"tlsgate quic retry", body, &addr_bytes(peer), retry_scid]);
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(&full[..MAC_LEN]);
    out
}

/// A token for `peer`, whose Initial named `odcid`, sent a Retry choosing `retry_scid`.
pub fn mint(secret: &Secret, peer: SocketAddr, odcid: &[u8], retry_scid: &[u8]) -> Vec<u8> {
    mint_at(secret, peer, odcid, retry_scid, now_secs())
}

fn mint_at(secret: &Secret, peer: SocketAddr, odcid: &[u8], retry_scid: &[u8], issued: u64) -> Vec<u8> {
    let body = quic_token::body(issued, odcid);
    let mac = mac(secret, &body, peer, retry_scid);
    quic_token::encode(issued, odcid, &mac)
}

/// Checks a token an Initial from `peer` to `dcid` carried; the client's original destination
/// connection ID when it is good.
pub fn validate(secret: &Secret, token: &[u8], peer: SocketAddr, dcid: &[u8]) -> Result<Vec<u8>, QuicError> {
    validate_at(secret, token, peer, dcid, now_secs())
}

fn validate_at(secret: &Secret, token: &[u8], peer: SocketAddr, dcid: &[u8], now: u64) -> Result<Vec<u8>, QuicError> {
    let parsed = quic_token::parse(token)?;
    let body = &token[..token.len() - MAC_LEN];
    let expected = mac(secret, body, peer, dcid);
    if !boring::memcmp::eq(&expected, parsed.mac) {
        return Err(QuicError::TokenForged);
    }
    if parsed.issued > now + 1 || now.saturating_sub(parsed.issued) > LIFETIME.as_secs() {
        return Err(QuicError::TokenExpired);
    }
    Ok(parsed.odcid.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_proves_the_address_it_was_given_to() {
        let secret = Secret::random();
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let token = mint_at(&secret, peer, b"odcid-of-client", b"retry-scid", 1000);
        assert_eq!(
            validate_at(&secret, &token, peer, b"retry-scid", 1005).unwrap(),
            b"odcid-of-client"
        );
        let other: SocketAddr = "192.0.2.1:4434".parse().unwrap();
        assert!(matches!(
            validate_at(&secret, &token, other, b"retry-scid", 1005),
            Err(QuicError::TokenForged)
        ));
        assert!(matches!(
            validate_at(&secret, &token, peer, b"other-scid", 1005),
            Err(QuicError::TokenForged)
        ));
        assert!(matches!(
            validate_at(&Secret::random(), &token, peer, b"retry-scid", 1005),
            Err(QuicError::TokenForged)
        ));
        assert!(matches!(
            validate_at(&secret, &token, peer, b"retry-scid", 1011),
            Err(QuicError::TokenExpired)
        ));
        assert!(matches!(
            validate_at(&secret, b"garbage", peer, b"retry-scid", 1005),
            Err(QuicError::Token(_))
        ));
    }
}

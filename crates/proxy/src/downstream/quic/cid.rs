//! Connection IDs and stateless reset tokens.
//!
//! Every connection ID the gateway issues is [`CID_LEN`] bytes: the first names the worker that
//! owns the connection, the rest are random. The kernel reads that byte to pick the worker's
//! socket (the reuseport program of `udp`), so a client whose address changed (NAT rebinding,
//! migration) still reaches its worker; where the program could not be attached SO_REUSEPORT
//! hashes the address, and the worker that receives a packet with another worker's ID forwards
//! it there (`endpoint`). The stateless
//! reset token of an ID is an HMAC of it under the reset/Retry secret, so a worker that has lost
//! a connection (or never had it) can end it for the client without state. In a cluster
//! (`[cluster] secret_files`) that secret is derived from the cluster secret: every node, and the
//! process after a restart or a binary upgrade, sends valid resets for the others' connections
//! and accepts the Retry tokens they minted (a load balancer without UDP affinity may send a
//! client's second Initial elsewhere). Without a cluster it is random per process, and handed
//! to the successor of a binary upgrade with the sockets.

use quiche::ConnectionId;

/// Length of the gateway's connection IDs.
pub const CID_LEN: usize = 16;

/// The secret of reset and Retry tokens.
#[derive(Clone)]
pub struct Secret([u8; 32]);

impl Secret {
    /// A fresh random secret (no cluster: valid in this process only).
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        boring::rand::rand_bytes(&mut key).expect("BoringSSL's RNG does not fail");
        Self(key)
    }

    /// The secret every node of a cluster derives from its cluster secret (HKDF, own label).
    pub fn from_cluster(cluster: &tlsgate_tls::secret::ClusterSecret) -> Self {
        let mut key = [0u8; 32];
        cluster.derive(&[b"tlsgate quic reset and retry"], &mut key);
        Self(key)
    }

    /// The secret a binary upgrade's old process used (handed over with its sockets).
    pub fn from_bytes(key: [u8; 32]) -> Self {
        Self(key)
    }

    /// The secret's bytes, for a successor of a binary upgrade.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// HMAC-SHA256 of the concatenated `parts`.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let data: Vec<u8> = parts.concat();
        boring::hash::hmac_sha256(&self.0, &data).expect("HMAC-SHA256 with a 32-byte key does not fail")
    }

    /// The stateless reset token of connection ID `cid`.
    pub fn reset_token(&self, cid: &[u8]) -> u128 {
        let mac = self.mac(&[b"tlsgate quic reset", cid]);
        let mut token = [0u8; 16];
        token.copy_from_slice(&mac[..16]);
        u128::from_be_bytes(token)
    }
}

/// A new connection ID owned by `worker`.
pub fn new_cid(worker: usize) -> ConnectionId<'static> {
    let mut id = [0u8; CID_LEN];
    boring::rand::rand_bytes(&mut id[1..]).expect("BoringSSL's RNG does not fail");
    id[0] = (worker % 256) as u8;
    ConnectionId::from_vec(id.to_vec())
}

/// The worker a connection ID of the gateway's names (`None` for an ID of another length).
pub fn owner(dcid: &[u8]) -> Option<usize> {
    (dcid.len() == CID_LEN).then(|| usize::from(dcid[0]))
}

/// A stateless reset packet (RFC 9000 §10.3) answering a packet of `received` bytes for `dcid`:
/// shorter than what it answers (so two endpoints cannot loop), at least 21 bytes, random bytes
/// with the short-header form bits, the token last. `None` when the packet was too short to
/// answer.
pub fn stateless_reset(secret: &Secret, dcid: &[u8], received: usize) -> Option<Vec<u8>> {
    const MIN: usize = 21;
    if received <= MIN + 1 {
        return None;
    }
    let len = (received - 1).min(43);
    let mut out = vec![0u8; len];
    boring::rand::rand_bytes(&mut out[..len - 16]).expect("BoringSSL's RNG does not fail");
    out[0] = 0b0100_0000 | (out[0] & 0b0011_1111);
    out[len - 16..].copy_from_slice(&secret.reset_token(dcid).to_be_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_worker() {
        let id = new_cid(3);
        assert_eq!(id.len(), CID_LEN);
        assert_eq!(owner(&id), Some(3));
        assert_eq!(owner(&[1, 2, 3]), None);
        assert_ne!(new_cid(3), new_cid(3));
    }

    #[test]
    fn resets_are_shorter_and_carry_the_token() {
        let secret = Secret::random();
        let cid = new_cid(0);
        assert!(stateless_reset(&secret, &cid, 20).is_none());
        let reset = stateless_reset(&secret, &cid, 30).unwrap();
        assert_eq!(reset.len(), 29);
        assert_eq!(reset[0] & 0xc0, 0x40, "short header form");
        assert_eq!(reset[13..], secret.reset_token(&cid).to_be_bytes());
        assert_eq!(stateless_reset(&secret, &cid, 1200).unwrap().len(), 43);
        assert_ne!(Secret::random().reset_token(&cid), secret.reset_token(&cid));
    }

    #[test]
    fn nodes_of_one_cluster_share_resets_and_retry_tokens_and_others_do_not() {
        use tlsgate_tls::secret::ClusterSecret;
        let cluster = |b: u8| ClusterSecret::from_material(&[b; 32], "test").unwrap();
        let (a, b, other) = (
            Secret::from_cluster(&cluster(1)),
            Secret::from_cluster(&cluster(1)),
            Secret::from_cluster(&cluster(2)),
        );
        let cid = new_cid(1);
        assert_eq!(
            a.reset_token(&cid),
            b.reset_token(&cid),
            "a restarted or other node resets alike"
        );
        assert_ne!(a.reset_token(&cid), other.reset_token(&cid));
        let peer: std::net::SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let (odcid, retry_scid) = (new_cid(0), new_cid(0));
        let token = crate::downstream::quic::token::mint(&a, peer, &odcid, &retry_scid);
        assert_eq!(
            crate::downstream::quic::token::validate(&b, &token, peer, &retry_scid).unwrap(),
            odcid.to_vec(),
            "a Retry token minted on one node validates on another"
        );
        assert!(crate::downstream::quic::token::validate(&other, &token, peer, &retry_scid).is_err());
    }
}

//! ttlb-pq's variants and result rows: what the experiment (`ttlb_pq`) measures and its report
//! (`ttlb_pq_report`) writes up. A leaf, so that neither of the two imports the other.

use crate::report::Pcts;
use serde::{Deserialize, Serialize};
use tlsgate_tls::mldsa::Level;

/// The certificate chain a variant's site serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    /// A plain ECDSA P-256 leaf + intermediate (~0.75 KB).
    Plain,
    /// An ECDSA P-256 chain padded to about this many DER bytes (an ML-DSA-sized stand-in).
    Padded(usize),
    /// A real ML-DSA chain of this level (served beside a plain ECDSA chain, to clients that
    /// offer the scheme: the probe runs with `--mldsa`).
    MlDsa(Level),
}

/// A client/server combination.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Name.
    pub name: &'static str,
    /// Groups offered.
    pub groups: &'static str,
    /// The chain served.
    pub chain: ChainKind,
}

impl Variant {
    /// The probe offers ML-DSA first (`--mldsa`).
    pub fn offers_mldsa(&self) -> bool {
        matches!(self.chain, ChainKind::MlDsa(_))
    }
}

/// The six variants: classical, hybrid KEM only, KEM + padded 8 KB / 16 KB chains (the paper's
/// sizes), KEM + real ML-DSA-44 / ML-DSA-65 chains.
pub const VARIANTS: [Variant; 6] = [
    Variant {
        name: "classical",
        groups: "X25519",
        chain: ChainKind::Plain,
    },
    Variant {
        name: "pq-kem",
        groups: "X25519MLKEM768",
        chain: ChainKind::Plain,
    },
    Variant {
        name: "pq-8k",
        groups: "X25519MLKEM768",
        chain: ChainKind::Padded(8192),
    },
    Variant {
        name: "pq-16k",
        groups: "X25519MLKEM768",
        chain: ChainKind::Padded(16384),
    },
    Variant {
        name: "pq-mldsa44",
        groups: "X25519MLKEM768",
        chain: ChainKind::MlDsa(Level::MlDsa44),
    },
    Variant {
        name: "pq-mldsa65",
        groups: "X25519MLKEM768",
        chain: ChainKind::MlDsa(Level::MlDsa65),
    },
];

/// One sample.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Network name.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Configured rate, Mbit/s.
    pub rate_mbps: f64,
    /// Loss per direction.
    pub loss: f64,
    /// Jitter, ms.
    pub jitter_ms: f64,
    /// initcwnd.
    pub initcwnd: u32,
    /// Variant.
    pub variant: String,
    /// Group negotiated.
    pub group: String,
    /// Chain bytes received.
    pub chain_bytes: usize,
    /// Response body bytes.
    pub data_bytes: usize,
    /// Sample index (1-based, within its lane).
    pub sample: usize,
    /// The lane (lab + gateway) that ran it; cells of slow networks are split over lanes.
    pub lane: usize,
    /// Leaf key type the client saw (`ECDSA`, `ML-DSA-44`, ...).
    pub cert_type: String,
    /// The server's signature algorithm (`ecdsa_secp256r1_sha256`, `mldsa44`, ...).
    pub sigalg: String,
    /// CertificateVerify signature bytes where the algorithm fixes them (ML-DSA); 0 for ECDSA.
    pub signature_bytes: usize,
    /// Error text, if the connection failed.
    pub error: String,
    /// Connect + TLS handshake, ms (the paper's handshake time).
    #[serde(deserialize_with = "nan_if_null")]
    pub handshake_ms: f64,
    /// Time to first byte, ms.
    #[serde(deserialize_with = "nan_if_null")]
    pub ttfb_ms: f64,
    /// Time to last byte, ms.
    #[serde(deserialize_with = "nan_if_null")]
    pub ttlb_ms: f64,
    /// Bytes B→A per connection (average over the cell's run, IP packets).
    pub down_bytes: u64,
    /// Bytes A→B per connection.
    pub up_bytes: u64,
}

/// A time that JSON wrote as `null` (a failed sample's NaN) reads back as NaN.
pub(crate) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Summary of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Network.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Rate, Mbit/s.
    pub rate_mbps: f64,
    /// Loss per direction.
    pub loss: f64,
    /// Jitter, ms.
    pub jitter_ms: f64,
    /// initcwnd.
    pub initcwnd: u32,
    /// Body bytes.
    pub data_bytes: usize,
    /// Variant.
    pub variant: String,
    /// Failed connections.
    pub errors: usize,
    /// Handshake time.
    pub handshake: Pcts,
    /// TTLB.
    pub ttlb: Pcts,
    /// Handshake time increase over classical at p50/p75/p90, %.
    pub handshake_increase_pct: [f64; 3],
    /// TTLB increase over classical at p50/p75/p90, %.
    pub ttlb_increase_pct: [f64; 3],
    /// 95 % bootstrap interval of the handshake increase at p50/p75/p90 (both samples
    /// resampled): the run-to-run spread of the percentile differences.
    pub handshake_increase_ci: [[f64; 2]; 3],
    /// 95 % bootstrap interval of the TTLB increase at p50/p75/p90.
    pub ttlb_increase_ci: [[f64; 2]; 3],
    /// Chain DER bytes the client received (first successful sample).
    pub chain_bytes: usize,
    /// Leaf key type the client saw (first successful sample).
    pub cert_type: String,
    /// Bytes B→A per connection.
    pub down_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_samples_times_survive_json() {
        let v = serde_json::json!({
            "network": "n", "rtt_ms": 35.0, "rate_mbps": 1.0, "loss": 0.1, "jitter_ms": 0.0,
            "initcwnd": 20, "variant": "pq-kem", "group": "", "chain_bytes": 0, "data_bytes": 0,
            "sample": 1, "lane": 0, "cert_type": "", "sigalg": "", "signature_bytes": 0,
            "error": "x", "handshake_ms": null, "ttfb_ms": null, "ttlb_ms": 12.5,
            "down_bytes": 0, "up_bytes": 0
        });
        let r: Row = serde_json::from_value(v).unwrap();
        assert!(r.handshake_ms.is_nan() && r.ttfb_ms.is_nan());
        assert_eq!(r.ttlb_ms, 12.5);
        let back = serde_json::to_value(&r).unwrap();
        assert!(back["handshake_ms"].is_null());
    }
}

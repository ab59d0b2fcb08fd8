//! ttlb-pq's variants and result rows: what the experiment (`ttlb_pq`) measures and its report
//! (`ttlb_pq_report`) writes up. A leaf, so that neither of the two imports the other.

use crate::report::Pcts;
use serde::Serialize;

/// A client/server combination.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// Name.
    pub name: &'static str,
    /// Groups offered.
    pub groups: &'static str,
    /// Target chain size (0 = plain).
    pub chain_target: usize,
}

/// The four variants: classical, hybrid KEM only, KEM + 8 KB chain, KEM + 16 KB chain.
pub const VARIANTS: [Variant; 4] = [
    Variant {
        name: "classical",
        groups: "X25519",
        chain_target: 0,
    },
    Variant {
        name: "pq-kem",
        groups: "X25519MLKEM768",
        chain_target: 0,
    },
    Variant {
        name: "pq-8k",
        groups: "X25519MLKEM768",
        chain_target: 8192,
    },
    Variant {
        name: "pq-16k",
        groups: "X25519MLKEM768",
        chain_target: 16384,
    },
];

/// One sample.
#[derive(Debug, Clone, Serialize)]
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
    /// Sample index.
    pub sample: usize,
    /// Error text, if the connection failed.
    pub error: String,
    /// Connect + TLS handshake, ms (the paper's handshake time).
    pub handshake_ms: f64,
    /// Time to first byte, ms.
    pub ttfb_ms: f64,
    /// Time to last byte, ms.
    pub ttlb_ms: f64,
    /// Bytes B→A per connection (average over the cell's run, IP packets).
    pub down_bytes: u64,
    /// Bytes A→B per connection.
    pub up_bytes: u64,
}

/// Summary of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Network.
    pub network: String,
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
    /// Bytes B→A per connection.
    pub down_bytes: u64,
}

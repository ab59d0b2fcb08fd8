//! The quic experiment's data: transports, chains, the matrix's settings, one row per sample
//! and the summaries (per cell, h3 against h2, and the anti-amplification sweep). A leaf, so the
//! experiment (`quic`) and its report (`quic_report`) both import it and not each other.

use crate::first_flight::FirstFlight;
use crate::report::Pcts;
use serde::{Deserialize, Serialize};

/// HTTP/2 over TCP + TLS 1.3, or HTTP/3 over QUIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transport {
    /// `tlsgate probe --alpn h2`.
    #[serde(rename = "h2")]
    H2,
    /// `tlsgate probe --h3`.
    #[serde(rename = "h3")]
    H3,
}

impl Transport {
    /// Both, TCP first.
    pub const ALL: [Transport; 2] = [Transport::H2, Transport::H3];

    /// `h2` / `h3`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::H2 => "h2",
            Transport::H3 => "h3",
        }
    }

    /// `h2/TCP` / `h3/QUIC`.
    pub fn label(self) -> &'static str {
        match self {
            Transport::H2 => "h2/TCP",
            Transport::H3 => "h3/QUIC",
        }
    }

    /// The fewest round trips a full handshake takes: TCP's SYN/SYN-ACK then TLS 1.3's one;
    /// QUIC's Initial/Handshake exchange carries both at once.
    pub fn min_handshake_rtts(self) -> f64 {
        match self {
            Transport::H2 => 2.0,
            Transport::H3 => 1.0,
        }
    }
}

/// A certificate chain the gateway serves (one site each, picked by SNI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Site name (SNI `<name>.lab`), also the label in the tables.
    pub name: String,
    /// Leaf + intermediate DER bytes to pad to (0 = the plain ~0.75 KB ECDSA chain).
    pub target_bytes: usize,
}

impl Chain {
    /// A chain.
    pub fn new(name: &str, target_bytes: usize) -> Self {
        Self {
            name: name.into(),
            target_bytes,
        }
    }
}

/// The main matrix's chains: the plain ECDSA one, and one padded to 16 KB (ttlb-pq's `pq-16k`,
/// the size of an ML-DSA-87-class chain).
pub fn main_chains() -> Vec<Chain> {
    vec![Chain::new("ecdsa", 0), Chain::new("pq-16k", 16_384)]
}

/// The anti-amplification sweep's chain sizes, KiB (quick: fewer).
pub fn sweep_kib(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 4, 16]
    } else {
        vec![1, 2, 3, 4, 6, 8, 12, 16, 24]
    }
}

/// The sweep chain of `kib` KiB.
pub fn sweep_chain(kib: usize) -> Chain {
    Chain::new(&format!("amp-{kib}k"), kib * 1024)
}

/// Link rate of every network, each direction, Mbit/s: well under what the forwarder carries on
/// this host, so the link, not the CPU, sets the pace of a 1 MiB response.
pub const RATE_MBPS: f64 = 100.0;
/// RTT of the anti-amplification sweep, ms (loss-free).
pub const SWEEP_RTT_MS: f64 = 50.0;
/// The hybrid group every main-matrix sample offers.
pub const HYBRID: &str = "X25519MLKEM768";
/// The classical group the sweep compares it with.
pub const CLASSICAL: &str = "X25519";

/// One sample of the main matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Network name.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Loss per packet, each direction.
    pub loss: f64,
    /// Configured rate, Mbit/s.
    pub rate_mbps: f64,
    /// `h2` or `h3`.
    pub transport: Transport,
    /// Chain (site) name.
    pub chain: String,
    /// Chain DER bytes the client received.
    pub chain_bytes: usize,
    /// Group negotiated.
    pub group: String,
    /// ALPN negotiated (`h2`, `h3`): the protocol the probe really spoke.
    pub alpn: String,
    /// The probe reports a resumed session (never expected: every sample is a full handshake).
    pub resumed: bool,
    /// Response body bytes.
    pub data_bytes: usize,
    /// The lane (lab + gateway) that ran it.
    pub lane: usize,
    /// Sample index in its probe run (1-based).
    pub sample: usize,
    /// Error text if the connection failed, else empty.
    pub error: String,
    /// TCP connect + TLS handshake, or the QUIC handshake, ms.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub handshake_ms: f64,
    /// Time to the response head, from the start, ms.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub ttfb_ms: f64,
    /// Time to the last body byte, from the start, ms.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub ttlb_ms: f64,
    /// `handshake_ms / rtt_ms`.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub handshake_rtts: f64,
    /// `ttfb_ms / rtt_ms`.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub ttfb_rtts: f64,
    /// `ttlb_ms / rtt_ms`.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub ttlb_rtts: f64,
    /// IP bytes server → client per connection (average over the probe run).
    pub down_bytes: u64,
    /// IP bytes client → server per connection.
    pub up_bytes: u64,
}

/// One sample of the anti-amplification sweep (1 KiB response, loss-free link).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AmpRow {
    /// `h2` or `h3`.
    pub transport: Transport,
    /// Group offered (and negotiated).
    pub group: String,
    /// Chain size asked for, KiB.
    pub chain_kib: usize,
    /// Chain DER bytes received.
    pub chain_bytes: usize,
    /// ALPN negotiated.
    pub alpn: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Sample index.
    pub sample: usize,
    /// Error text, else empty.
    pub error: String,
    /// Handshake, ms.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub handshake_ms: f64,
    /// Handshake in RTTs.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub handshake_rtts: f64,
    /// TTFB in RTTs.
    #[serde(deserialize_with = "super::ttlb_pq_model::nan_if_null")]
    pub ttfb_rtts: f64,
    /// The packet tap held the connection whole (else `flight` is empty).
    pub traced: bool,
    /// What the tap saw of its first flights.
    #[serde(flatten)]
    pub flight: FirstFlight,
}

/// Summary of one cell and transport.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Network.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Loss.
    pub loss: f64,
    /// Chain.
    pub chain: String,
    /// Chain bytes (first successful sample).
    pub chain_bytes: usize,
    /// Body bytes.
    pub data_bytes: usize,
    /// Transport.
    pub transport: Transport,
    /// Samples run.
    pub samples: usize,
    /// Failed samples.
    pub errors: usize,
    /// Successful samples that were not the protocol asked for (ALPN) or resumed.
    pub mislabelled: usize,
    /// Handshake, ms.
    pub handshake: Pcts,
    /// TTFB, ms.
    pub ttfb: Pcts,
    /// TTLB, ms.
    pub ttlb: Pcts,
    /// 95 % bootstrap interval of the handshake median, ms.
    pub handshake_p50_ci: [f64; 2],
    /// ... of the TTFB median.
    pub ttfb_p50_ci: [f64; 2],
    /// ... of the TTLB median.
    pub ttlb_p50_ci: [f64; 2],
    /// Medians in RTTs: handshake, TTFB, TTLB.
    pub p50_rtts: [f64; 3],
    /// IP bytes server → client per connection.
    pub down_bytes: u64,
}

/// h3 against h2 on one network, chain and size.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Network.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Loss.
    pub loss: f64,
    /// Chain.
    pub chain: String,
    /// Body bytes.
    pub data_bytes: usize,
    /// Change of h3's handshake over h2's at p50/p75/p90, %.
    pub handshake_pct: [f64; 3],
    /// Their 95 % bootstrap intervals.
    pub handshake_ci: [[f64; 2]; 3],
    /// TTFB change, %.
    pub ttfb_pct: [f64; 3],
    /// Intervals.
    pub ttfb_ci: [[f64; 2]; 3],
    /// TTLB change, %.
    pub ttlb_pct: [f64; 3],
    /// Intervals.
    pub ttlb_ci: [[f64; 2]; 3],
}

/// Summary of one sweep cell (transport, group, chain size).
#[derive(Debug, Clone, Serialize)]
pub struct AmpCell {
    /// Transport.
    pub transport: Transport,
    /// Group.
    pub group: String,
    /// Chain size asked for, KiB.
    pub chain_kib: usize,
    /// Chain DER bytes.
    pub chain_bytes: usize,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Samples run.
    pub samples: usize,
    /// Failed samples.
    pub errors: usize,
    /// Handshake in RTTs (p50 and spread).
    pub handshake_rtts: Pcts,
    /// 95 % bootstrap interval of its median.
    pub handshake_rtts_ci: [f64; 2],
    /// Extra round trips over the transport's minimum, from the median, rounded.
    pub extra_rtts: f64,
    /// Medians over the samples with a captured trace: the client's first flight, bytes.
    pub client_first_bytes: f64,
    /// Its datagrams (QUIC) or segments (TCP).
    pub client_first_packets: f64,
    /// The server's first flight, bytes.
    pub server_first_bytes: f64,
    /// Of which zero padding after the datagrams' packets.
    pub server_first_padding: f64,
    /// The server's handshake flight in all, bytes.
    pub server_handshake_bytes: f64,
    /// Of which held back until the client answered, bytes.
    pub server_handshake_bytes_later: f64,
    /// Rounds the server's handshake flight took (each one round trip).
    pub server_rounds: f64,
    /// Largest server-first-flight / client-first-flight ratio seen, bytes on the wire.
    pub ratio_max: f64,
    /// The same without the padding: what quiche charges against the limit (never above 3).
    pub charged_ratio_max: f64,
    /// Samples whose server had to hold handshake bytes back.
    pub held_back: usize,
    /// Samples with a trace.
    pub traced: usize,
    /// What the numbers say: QUIC, `3× limit` (held back, the first flight at the limit),
    /// `3× limit, then cwnd` (and a third round), `cwnd` (held back below the limit), `fits`;
    /// TCP, `initcwnd` or `fits`.
    pub verdict: String,
}

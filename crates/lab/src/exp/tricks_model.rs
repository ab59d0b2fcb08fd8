//! tricks' result rows (configurations, tricks, seed 003's per-message OCSP table): what the
//! experiment (`tricks`) measures and its report (`tricks_report`) writes up. A leaf, so that
//! neither of the two imports the other.

use crate::report::Pcts;
use serde::Serialize;

/// One measured configuration (many samples).
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Network.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Label, e.g. `tls13-full`.
    pub label: String,
    /// TTFB.
    pub ttfb: Pcts,
    /// TTLB.
    pub ttlb: Pcts,
    /// Handshake (connect + TLS).
    pub handshake: Pcts,
    /// TTFB p50 in RTTs.
    pub ttfb_rtts: f64,
    /// Server→client IP bytes per connection (probe runs only).
    pub down_bytes: u64,
    /// Samples that did what the label says (resumed, 0-RTT accepted, stapled) / all samples.
    pub as_labelled: String,
}

/// One trick: baseline vs trick.
#[derive(Debug, Clone, Serialize)]
pub struct Trick {
    /// Network.
    pub network: String,
    /// What is compared.
    pub trick: String,
    /// Baseline configuration label.
    pub baseline: String,
    /// Trick configuration label.
    pub with_trick: String,
    /// RTTs the trick should save (TTFB).
    pub expected_rtts_saved: f64,
    /// RTTs saved, measured at p50 (TTFB).
    pub measured_rtts_saved: f64,
    /// Baseline TTFB p50, ms.
    pub baseline_ttfb_p50_ms: f64,
    /// Trick TTFB p50, ms.
    pub trick_ttfb_p50_ms: f64,
    /// Baseline TTLB p50, ms.
    pub baseline_ttlb_p50_ms: f64,
    /// Trick TTLB p50, ms.
    pub trick_ttlb_p50_ms: f64,
    /// Note.
    pub note: String,
}

/// One handshake message (or TCP event) with the OCSP staple off and on: seed 003's table.
#[derive(Debug, Clone, Serialize)]
pub struct MessageRow {
    /// Network.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Message, e.g. `CertificateStatus` (first of its name and direction per connection).
    pub message: String,
    /// `c→s` or `s→c`.
    pub dir: String,
    /// Connections where it was seen, staple off.
    pub n_off: usize,
    /// Staple on.
    pub n_on: usize,
    /// Median bytes (handshake message with header; record payload), staple off.
    pub bytes_off: f64,
    /// Staple on.
    pub bytes_on: f64,
    /// Delivery of its last byte, ms after the SYN's delivery: p50, staple off.
    pub p50_off_ms: f64,
    /// p50, staple on.
    pub p50_on_ms: f64,
    /// p90, staple off.
    pub p90_off_ms: f64,
    /// p90, staple on.
    pub p90_on_ms: f64,
    /// `p50_on_ms - p50_off_ms`.
    pub delta_p50_ms: f64,
}

/// The staple's cost per network, from the captures.
#[derive(Debug, Clone, Serialize)]
pub struct OcspSummary {
    /// Network.
    pub network: String,
    /// RTT, ms.
    pub rtt_ms: f64,
    /// Connections captured (staple off / on).
    pub conns_off: usize,
    /// Staple on.
    pub conns_on: usize,
    /// Connections with a CertificateStatus message, staple off (should be 0).
    pub with_status_off: usize,
    /// Staple on (should be all).
    pub with_status_on: usize,
    /// Median CertificateStatus bytes (with its 4-byte header), staple on.
    pub status_bytes: f64,
    /// Mean server→client IP bytes per connection, off / on (forwarder counters).
    pub down_bytes_off: u64,
    /// Staple on.
    pub down_bytes_on: u64,
    /// Server Finished delivered to the client (handshake done), p50 ms after the SYN, off.
    pub handshake_p50_off_ms: f64,
    /// Staple on.
    pub handshake_p50_on_ms: f64,
    /// p90, off.
    pub handshake_p90_off_ms: f64,
    /// p90, on.
    pub handshake_p90_on_ms: f64,
    /// Packets the capture could not keep (memory cap).
    pub capture_dropped: u64,
}

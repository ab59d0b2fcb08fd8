//! `[http3]`: HTTP/3 over QUIC (UDP) beside the TCP listeners, on the same certificates, key
//! backends and session secrets (docs/HTTP3.md).

use crate::duration::Duration;
use serde::Deserialize;
use std::net::SocketAddr;

/// `[http3]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http3Config {
    /// Serve HTTP/3 over QUIC (UDP) on the https listeners' addresses (all of them, or those in
    /// `listeners`). Off by default.
    pub enabled: bool,
    /// The https listeners (their `listen` addresses) that also serve QUIC; empty = every https
    /// listener.
    pub listeners: Vec<SocketAddr>,
    /// UDP port QUIC listens on; unset = each listener's own (TCP) port.
    pub udp_port: Option<u16>,
    /// Advertise HTTP/3 to TCP clients with an `Alt-Svc` response header (off until set).
    pub alt_svc: bool,
    /// How long a client may remember the `Alt-Svc` advertisement (its `ma` parameter).
    pub alt_svc_max_age: Duration,
    /// Address validation by a Retry round trip before any TLS work: `always`, `under_load`
    /// (when `retry_threshold` handshakes are in progress on a worker) or `never`.
    pub retry: RetryMode,
    /// With `retry = "under_load"`: QUIC handshakes in progress per worker from which new clients
    /// must first prove their address with a Retry token.
    pub retry_threshold: usize,
    /// A connection with no packet in either direction for this long is closed (QUIC
    /// max_idle_timeout; the shorter of the two ends' values applies).
    pub idle_timeout: Duration,
    /// Request streams a client may have open at once (initial_max_streams_bidi).
    pub max_concurrent_streams: u64,
    /// Flow-control window per request stream, bytes (how much of a request body the gateway
    /// takes before its origin reads it).
    pub initial_stream_window: u64,
    /// Flow-control window of a whole connection, bytes.
    pub initial_connection_window: u64,
    /// Largest request header section a client may send, bytes
    /// (SETTINGS_MAX_FIELD_SECTION_SIZE); larger ones are refused.
    pub max_field_section_size: u64,
    /// Largest UDP payload the gateway sends, bytes (1200..=1452; 1350 fits common tunnels).
    pub max_udp_payload: usize,
    /// quiche's congestion controller for the gateway's sending side.
    pub congestion_control: CongestionControl,
    /// Send packets no earlier than the congestion controller's release time (pacing) instead
    /// of in bursts of the whole window. Only BBRv2 computes release times; CUBIC and Reno in
    /// quiche do not pace. Off by default: in the lab it gained nothing and cost a round trip
    /// on the first response after a post-quantum-sized chain at 100 ms RTT (docs/HTTP3.md).
    pub pacing: bool,
}

/// quiche's congestion controllers (`[http3] congestion_control`).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CongestionControl {
    /// BBRv2 (quiche's `gcongestion` port of Chromium's): model-based, paced, tolerant of random
    /// loss.
    Bbr2,
    /// CUBIC (RFC 9438), loss-based, quiche's default; not paced by quiche.
    Cubic,
    /// NewReno (RFC 9002), loss-based; not paced by quiche.
    Reno,
}

impl CongestionControl {
    /// quiche's name for it.
    pub fn quiche_name(self) -> &'static str {
        match self {
            Self::Bbr2 => "bbr2_gcongestion",
            Self::Cubic => "cubic",
            Self::Reno => "reno",
        }
    }
}

/// When a new QUIC client must first prove its address with a Retry token.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RetryMode {
    /// Every new connection (one more round trip for every client, no state before it).
    Always,
    /// Only while a worker has `retry_threshold` handshakes in progress.
    UnderLoad,
    /// Never (the anti-amplification limit of 3x still applies).
    Never,
}

impl Default for Http3Config {
    fn default() -> Self {
        Self {
            enabled: false,
            listeners: Vec::new(),
            udp_port: None,
            alt_svc: false,
            alt_svc_max_age: Duration::from_secs(86_400),
            retry: RetryMode::UnderLoad,
            retry_threshold: 256,
            idle_timeout: Duration::from_secs(30),
            max_concurrent_streams: 100,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_field_section_size: 16 * 1024,
            max_udp_payload: 1350,
            congestion_control: CongestionControl::Bbr2,
            pacing: false,
        }
    }
}

impl Http3Config {
    /// Whether the https listener at `listen` serves QUIC too.
    pub fn serves(&self, listen: SocketAddr) -> bool {
        self.enabled && (self.listeners.is_empty() || self.listeners.contains(&listen))
    }

    /// The UDP address QUIC listens on for the listener at `listen`.
    pub fn udp_addr(&self, listen: SocketAddr) -> SocketAddr {
        SocketAddr::new(listen.ip(), self.udp_port.unwrap_or(listen.port()))
    }
}

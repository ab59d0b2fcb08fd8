//! The experiments (`tlsgate lab run NAME`): common options and the network settings they use.

mod bootstrap;
pub mod quic;
pub mod quic_model;
mod quic_report;
pub mod tricks;
mod tricks_model;
mod tricks_report;
pub mod ttlb_pq;
mod ttlb_pq_figs;
mod ttlb_pq_lane;
mod ttlb_pq_model;
pub mod ttlb_pq_paper;
mod ttlb_pq_report;

use crate::link::LinkSpec;
use crate::{Dist, Lab};
use serde::Serialize;
use std::path::PathBuf;

/// How to run an experiment.
#[derive(Debug, Clone)]
pub struct RunOpts {
    /// The `tlsgate` binary (server and client run as its `serve` / `probe` / `bench`).
    pub exe: PathBuf,
    /// Output directory (created).
    pub out: PathBuf,
    /// The small profile (under 2 minutes).
    pub quick: bool,
    /// Samples per cell (default: 3 quick, 20 full; slow-link cells use half, at least 3).
    pub samples: Option<usize>,
    /// Print progress on stderr.
    pub verbose: bool,
    /// ttlb-pq and quic: run only the networks whose name is listed (empty: all), e.g.
    /// `35ms-1g-loss10` to give one cell many more samples (quic: `amplification` = the sweep).
    pub networks: Vec<String>,
    /// ttlb-pq and quic: run only these response sizes, KiB (empty: each network's own list).
    pub sizes_kib: Vec<usize>,
    /// quic: the gateway's QUIC congestion controller (`[http3] congestion_control`); `None` =
    /// its default.
    pub quic_congestion_control: Option<String>,
}

impl RunOpts {
    /// Samples for a cell; `slow` cells (1 Mbit/s) get half.
    pub fn samples(&self, slow: bool) -> usize {
        let n = self.samples.unwrap_or(if self.quick { 3 } else { 20 });
        if slow {
            (n / 2).max(3).min(n)
        } else {
            n
        }
    }

    /// Logs a progress line.
    pub fn log(&self, msg: &str) {
        if self.verbose {
            eprintln!("[lab] {msg}");
        }
    }
}

/// A network setting: RTT, rate, loss, jitter.
#[derive(Debug, Clone, Serialize)]
pub struct Network {
    /// Short name used in file names.
    pub name: String,
    /// Round-trip time, ms (split evenly between the two directions).
    pub rtt_ms: f64,
    /// Rate, Mbit/s, each direction (the configured value; see the calibration for what the
    /// forwarder really reaches).
    pub rate_mbps: f64,
    /// Loss probability per packet, each direction.
    pub loss: f64,
    /// Pareto-normal jitter of the RTT, ms (each direction gets half, as sigma).
    pub jitter_ms: f64,
}

impl Network {
    /// A network without jitter.
    pub fn new(name: &str, rtt_ms: f64, rate_mbps: f64, loss: f64) -> Self {
        Self {
            name: name.into(),
            rtt_ms,
            rate_mbps,
            loss,
            jitter_ms: 0.0,
        }
    }

    /// The per-direction link.
    pub fn spec(&self) -> LinkSpec {
        let mut s = LinkSpec::delay(self.rtt_ms / 2.0)
            .with_rate((self.rate_mbps * 1e6) as u64)
            .with_loss(self.loss);
        if self.jitter_ms > 0.0 {
            s = s.with_jitter(self.jitter_ms / 2.0, Dist::Paretonormal);
        }
        s
    }

    /// Applies it to a lab.
    pub fn apply(&self, lab: &Lab) -> anyhow::Result<()> {
        lab.set_symmetric(self.spec())
    }

    /// A slow link (long samples).
    pub fn is_slow(&self) -> bool {
        self.rate_mbps < 10.0
    }
}

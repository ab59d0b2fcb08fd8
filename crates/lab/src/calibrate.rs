//! `tlsgate lab calibrate`: what the emulator itself costs and can carry on this machine: added
//! RTT at zero delay, RTT bias at configured delays, the largest TCP goodput with no rate limit
//! (what "1 Gbps" really becomes), and goodput at a few configured rates.

use crate::measure::{median, percentile, tcp_goodput, tcp_rtts};
use crate::{Lab, LinkSpec};
use serde::Serialize;
use std::fmt::Write as _;

/// The measured figures.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Median / p90 TCP echo RTT with delay 0 (emulator + both stacks), ms.
    pub rtt0_median_ms: f64,
    /// p90 of the same.
    pub rtt0_p90_ms: f64,
    /// (configured RTT ms, measured median ms).
    pub rtt: Vec<(f64, f64)>,
    /// Bulk TCP goodput with no rate limit, delay 0, Mbit/s.
    pub max_goodput_mbps: f64,
    /// The same at 35 ms RTT.
    pub max_goodput_35ms_mbps: f64,
    /// (configured Mbit/s, measured goodput Mbit/s) at 5 ms one-way delay.
    pub rates: Vec<(f64, f64)>,
}

/// Measures; `secs` per throughput run.
pub fn run(secs: f64) -> anyhow::Result<Calibration> {
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default())?;
    let r0 = tcp_rtts(&lab, 300, 5)?;
    let mut rtt = vec![];
    for ow in [1.0, 17.5, 100.0] {
        lab.set_symmetric(LinkSpec::delay(ow))?;
        rtt.push((2.0 * ow, median(&tcp_rtts(&lab, 30, 2)?)));
    }
    lab.set_symmetric(LinkSpec::default())?;
    let max0 = tcp_goodput(&lab, secs, secs / 4.0)? / 1e6;
    lab.set_symmetric(LinkSpec::delay(17.5))?;
    let max35 = tcp_goodput(&lab, secs, secs / 4.0)? / 1e6;
    let mut rates = vec![];
    for mbps in [1.0, 10.0, 50.0, 100.0, 1000.0] {
        lab.set_symmetric(LinkSpec::delay(5.0).with_rate((mbps * 1e6) as u64))?;
        let t = if mbps < 5.0 { secs * 2.0 } else { secs };
        rates.push((mbps, tcp_goodput(&lab, t, t / 4.0)? / 1e6));
    }
    Ok(Calibration {
        rtt0_median_ms: median(&r0),
        rtt0_p90_ms: percentile(&r0, 90.0),
        rtt,
        max_goodput_mbps: max0,
        max_goodput_35ms_mbps: max35,
        rates,
    })
}

impl Calibration {
    /// Writes `calibration.json` and `calibration.md` under `dir`.
    pub fn write(&self, dir: &std::path::Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)?;
        crate::report::write_json(&dir.join("calibration.json"), self)?;
        std::fs::write(dir.join("calibration.md"), self.markdown())?;
        Ok(())
    }

    /// A Markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::from("# Emulator calibration\n\n");
        let _ = writeln!(
            s,
            "- RTT at delay 0 (TCP echo, both stacks + forwarder): median {:.3} ms, p90 {:.3} ms",
            self.rtt0_median_ms, self.rtt0_p90_ms
        );
        for (want, got) in &self.rtt {
            let _ = writeln!(
                s,
                "- configured RTT {want} ms: median {got:.3} ms ({:+.3} ms)",
                got - want
            );
        }
        let _ = writeln!(
            s,
            "- largest TCP goodput, no rate limit: {:.0} Mbit/s at delay 0, {:.0} Mbit/s at 35 ms RTT",
            self.max_goodput_mbps, self.max_goodput_35ms_mbps
        );
        s.push_str("\n| configured Mbit/s | TCP goodput Mbit/s | ratio |\n|---:|---:|---:|\n");
        for (want, got) in &self.rates {
            let _ = writeln!(s, "| {want} | {got:.2} | {:.3} |", got / want);
        }
        s
    }
}

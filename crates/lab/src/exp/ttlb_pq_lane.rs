//! One lane of a ttlb-pq run: its own lab (namespace pair, link emulator) and gateway, running
//! its share of each cell's samples. Cells on slow links (1 Mbit/s: seconds per sample, almost no
//! CPU) are split over several lanes that run side by side; other cells run whole in lane 0.
//! Lanes never share a link, so one lane's packets never queue behind another's.
//!
//! On lossy networks the lane's packet tap is on during every probe run; when a sample fails,
//! its connection's trace (bytes delivered each way, FIN/RST times and offsets:
//! [`crate::conn_trace`]) is kept, and at the end the gateway's failure counters are read from
//! its metrics.

use super::ttlb_pq_model::{Row, VARIANTS};
use super::{Network, RunOpts};
use crate::client::{probe, ProbeOpts};
use crate::conn_trace::{traces, ConnTrace};
use crate::gateway::{Gateway, GatewaySpec};
use crate::{Lab, LabOptions, LinkSpec};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

/// One cell of the matrix: a network, initcwnd and response sizes.
#[derive(Debug, Clone)]
pub struct Setting {
    /// Network.
    pub net: Network,
    /// initcwnd.
    pub initcwnd: u32,
    /// Response sizes, bytes.
    pub sizes: Vec<usize>,
    /// Samples per cell: the full `--samples` (the paper's settings), not half on slow links.
    pub full_samples: bool,
}

/// A failed sample and what the tap saw of its connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    /// Network.
    pub network: String,
    /// Response size, bytes.
    pub data_bytes: usize,
    /// Variant.
    pub variant: String,
    /// Lane.
    pub lane: usize,
    /// Sample index in the lane's probe run.
    pub sample: usize,
    /// The probe's error.
    pub error: String,
    /// The connection's trace (None when the capture did not hold it).
    pub trace: Option<ConnTrace>,
    /// Median server→client bytes delivered in order by the run's successful connections.
    pub ok_down_bytes_p50: u64,
    /// Packets the tap could not keep (memory cap).
    pub capture_dropped: u64,
}

/// What a lane brings back.
#[derive(Debug, Default)]
pub struct LaneResult {
    /// Rows, each with its sort key (setting, size, variant).
    pub rows: Vec<((usize, usize, usize), Row)>,
    /// Failed samples.
    pub failures: Vec<Failure>,
    /// The gateway's handshake, handshake-failure and client-timeout counters at the end
    /// (metric lines).
    pub gateway_counters: Vec<String>,
}

/// Everything a lane needs.
#[derive(Debug, Clone)]
pub struct LanePlan {
    /// Lane number.
    pub lane: usize,
    /// Lanes in all.
    pub lanes: usize,
    /// The settings (all lanes get the same list).
    pub settings: Vec<Setting>,
    /// The gateway (its sites' files are shared by the lanes).
    pub spec: GatewaySpec,
    /// Working directory (certificates; the lane's gateway configuration and log).
    pub work: PathBuf,
    /// The variants run: the first this many of [`VARIANTS`].
    pub n_variants: usize,
}

/// `TLSGATE_LAB_TCP_METRICS_SAVE=1`: a diagnostic run in which TCP keeps its per-destination
/// metrics between samples (the lab's default is fresh state for every connection).
pub fn metrics_saved() -> bool {
    std::env::var("TLSGATE_LAB_TCP_METRICS_SAVE").is_ok_and(|v| v == "1")
}

/// Lanes that split a setting's cells: slow links only.
pub fn lanes_for(set: &Setting, lanes: usize) -> usize {
    if set.net.is_slow() {
        lanes.max(1)
    } else {
        1
    }
}

/// This lane's share of `n` samples split over `k` lanes.
pub fn share(n: usize, k: usize, lane: usize) -> usize {
    if lane >= k {
        0
    } else {
        n / k + usize::from(lane < n % k)
    }
}

/// Runs a lane to the end.
pub fn run_lane(opts: &RunOpts, plan: &LanePlan) -> anyhow::Result<LaneResult> {
    let mut out = LaneResult::default();
    let lab = Lab::with_options(LinkSpec::default(), LinkSpec::default(), &LabOptions::default())?;
    if metrics_saved() {
        // Diagnostic: let the kernel cache ssthresh/cwnd/RTT per destination between
        // connections, as a host without `tcp_no_metrics_save` does (docs/LAB.md, figure 4).
        for ns in [&lab.a, &lab.b] {
            crate::netns::sysctl(ns.name(), "net.ipv4.tcp_no_metrics_save", "0")?;
        }
    }
    let stem = format!("gateway-{}", plan.lane);
    let gw = Gateway::start(&opts.exe, &lab.b, &plan.work, &stem, &plan.spec)?;
    for (si, set) in plan.settings.iter().enumerate() {
        let k = lanes_for(set, plan.lanes);
        let n_cell = opts.samples(set.net.is_slow() && !set.full_samples);
        let n = share(n_cell, k, plan.lane);
        if n == 0 {
            continue;
        }
        set.net.apply(&lab)?;
        lab.set_initcwnd(Some(set.initcwnd))?;
        let lossy = set.net.loss > 0.0;
        for &size in &set.sizes {
            if plan.lane == 0 {
                opts.log(&format!(
                    "{} initcwnd {} {} KiB: {n_cell} samples × {} variants ({k} lane(s))",
                    set.net.name,
                    set.initcwnd,
                    size / 1024,
                    plan.n_variants
                ));
            }
            for (vi, v) in VARIANTS.iter().take(plan.n_variants).enumerate() {
                let po = ProbeOpts {
                    sni: format!("{}.lab", v.name),
                    path: format!("/n/{size}/"),
                    groups: Some(v.groups.into()),
                    connections: n,
                    no_ticket: true,
                    cacert: Some(plan.work.join("ca.pem")),
                    mldsa: v.offers_mldsa(),
                    ..ProbeOpts::default()
                };
                let (a0, b0) = lab.stats();
                if lossy {
                    lab.start_capture();
                }
                let samples = probe(&opts.exe, &lab.a, gw.addr, &po)?;
                let cap = lossy.then(|| lab.take_capture());
                let (a1, b1) = lab.stats();
                let count = samples.len().max(1) as u64;
                let per = |x: u64| x / count;
                if let Some(cap) = cap.filter(|_| samples.iter().any(|s| s.error.is_some())) {
                    let t = traces(&cap.packets);
                    let mut ok: Vec<u64> = samples
                        .iter()
                        .filter(|s| s.error.is_none())
                        .filter_map(|s| t.get(s.index.wrapping_sub(1)).map(|c| c.down.bytes_in_order))
                        .collect();
                    ok.sort_unstable();
                    for s in samples.iter().filter(|s| s.error.is_some()) {
                        out.failures.push(Failure {
                            network: set.net.name.clone(),
                            data_bytes: size,
                            variant: v.name.into(),
                            lane: plan.lane,
                            sample: s.index,
                            error: s.error.clone().unwrap_or_default(),
                            trace: t.get(s.index.wrapping_sub(1)).cloned(),
                            ok_down_bytes_p50: ok.get(ok.len() / 2).copied().unwrap_or(0),
                            capture_dropped: cap.dropped,
                        });
                    }
                }
                for s in samples {
                    let row = Row {
                        network: set.net.name.clone(),
                        rtt_ms: set.net.rtt_ms,
                        rate_mbps: set.net.rate_mbps,
                        loss: set.net.loss,
                        jitter_ms: set.net.jitter_ms,
                        initcwnd: set.initcwnd,
                        variant: v.name.into(),
                        group: s.group,
                        chain_bytes: s.chain_bytes,
                        data_bytes: size,
                        sample: s.index,
                        lane: plan.lane,
                        cert_type: s.cert_type,
                        sigalg: s.sigalg,
                        signature_bytes: s.signature_bytes,
                        error: s.error.unwrap_or_default(),
                        handshake_ms: s.connect_ms + s.handshake_ms,
                        ttfb_ms: s.ttfb_ms,
                        ttlb_ms: s.ttlb_ms,
                        down_bytes: per(b1.since(&b0).tx_bytes),
                        up_bytes: per(a1.since(&a0).tx_bytes),
                    };
                    out.rows.push(((si, size, vi), row));
                }
            }
        }
    }
    out.gateway_counters = gateway_counters(&lab, plan.spec.admin_port);
    drop(gw);
    Ok(out)
}

/// The gateway's `handshake_failures` and `client_timeouts` series (empty if unreadable).
fn gateway_counters(lab: &Lab, port: u16) -> Vec<String> {
    let text = lab
        .b
        .spawn(move || -> std::io::Result<String> {
            let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
            // Keep what arrived even if the server holds the connection open until the timeout.
            let (mut body, mut buf) = (vec![], [0u8; 8192]);
            while let Ok(n @ 1..) = s.read(&mut buf) {
                body.extend_from_slice(&buf[..n]);
            }
            Ok(String::from_utf8_lossy(&body).into_owned())
        })
        .ok()
        .and_then(|h| h.join().ok())
        .and_then(Result::ok)
        .unwrap_or_default();
    text.lines()
        .filter(|l| {
            !l.starts_with('#')
                && ["handshake_failures", "client_timeouts", "tlsgate_handshakes_total"]
                    .iter()
                    .any(|m| l.contains(m))
        })
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for (n, k) in [(200, 8), (7, 8), (20, 1), (3, 16)] {
            let total: usize = (0..k).map(|l| share(n, k, l)).sum();
            assert_eq!(total, n, "{n} over {k}");
        }
        assert_eq!(share(10, 1, 1), 0, "a whole cell runs in lane 0 only");
        let fast = Setting {
            net: Network::new("x", 35.0, 1000.0, 0.0),
            initcwnd: 20,
            sizes: vec![0],
            full_samples: false,
        };
        assert_eq!(lanes_for(&fast, 8), 1);
        let slow = Setting {
            net: Network::new("y", 200.0, 1.0, 0.1),
            ..fast
        };
        assert_eq!(lanes_for(&slow, 8), 8);
    }
}

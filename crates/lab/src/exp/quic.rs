//! quic (issue 19): HTTP/2 over TCP + TLS 1.3 against HTTP/3 over QUIC, by handshake time, TTFB
//! and TTLB, over networks that vary RTT and loss, with a plain ECDSA chain and a 16 KB
//! (post-quantum-sized) one, for a small and a large response, every connection a full handshake
//! offering X25519MLKEM768; and the anti-amplification sweep: for a full QUIC handshake, the chain
//! size (and key share) from which the server's first flight no longer fits in 3× the client's
//! Initial bytes and the handshake takes an extra round trip, against TCP's initcwnd.
//!
//! Each cell runs `tlsgate probe -n N --no-ticket` twice from namespace A, once with `--alpn h2`
//! (TCP) and once with `--h3` (QUIC, the same UDP port), against a gateway in namespace B with
//! `[http3] enabled = true, retry = "never"` (no Retry: the limit applies). Loss-free cells run
//! one after the other in one lab; lossy cells (seconds per sample, little CPU) are split over
//! parallel lanes, each its own lab and gateway (`TLSGATE_LAB_LANES`, as ttlb-pq). The sweep runs
//! first, on its own gateway, with the forwarder's packet tap on, and [`crate::first_flight`]
//! counts what each side sent before it heard from the other.

use super::bootstrap::{increase_ci, median_ci};
use super::quic_model::{main_chains, sweep_chain, sweep_kib, CLASSICAL, HYBRID, RATE_MBPS, SWEEP_RTT_MS};
pub use super::quic_model::{AmpCell, AmpRow, Cell, Chain, Comparison, Row, Transport};
use super::ttlb_pq::{handshake_timeout, lanes, tempdir};
use super::ttlb_pq_lane::{share, Failure};
use super::{quic_report, Network, RunOpts};
use crate::client::{probe, ConnSample, ProbeOpts};
use crate::conn_trace::traces;
use crate::first_flight::{first_flights, FirstFlight};
use crate::gateway::{Gateway, GatewaySpec, Site};
use crate::pki::Ca;
use crate::report::{pct_increase, write_csv, write_json, Pcts};
use crate::{Lab, LabOptions, LinkSpec};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The name that selects the sweep in `--network`.
pub const SWEEP: &str = "amplification";
/// Body of the sweep's responses, bytes.
const SWEEP_BODY: usize = 1024;

/// The networks: RTT × loss per direction.
pub fn networks(quick: bool) -> Vec<Network> {
    let (rtts, losses): (&[f64], &[f64]) = if quick {
        (&[20.0], &[0.0, 0.03])
    } else {
        (&[20.0, 100.0], &[0.0, 0.01, 0.03, 0.10])
    };
    let mut v = vec![];
    for &rtt in rtts {
        for &loss in losses {
            let name = format!("{rtt}ms-loss{}", loss * 100.0);
            v.push(Network::new(&name, rtt, RATE_MBPS, loss));
        }
    }
    v
}

/// Response sizes, bytes: small and large.
pub fn sizes(quick: bool) -> Vec<usize> {
    if quick {
        vec![1024, 256 * 1024]
    } else {
        vec![1024, 1024 * 1024]
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct QuicRun {
    /// Per cell and transport.
    pub cells: Vec<Cell>,
    /// h3 against h2.
    pub comparisons: Vec<Comparison>,
    /// The sweep's cells.
    pub amplification: Vec<AmpCell>,
}

/// A lab and the gateway in it.
struct Lane {
    lab: Lab,
    gw: Gateway,
    lane: usize,
    cacert: PathBuf,
    exe: PathBuf,
}

impl Lane {
    fn start(opts: &RunOpts, work: &Path, spec: &GatewaySpec, lane: usize) -> anyhow::Result<Self> {
        let lab = Lab::with_options(LinkSpec::default(), LinkSpec::default(), &LabOptions::default())?;
        let gw = Gateway::start(&opts.exe, &lab.b, work, &format!("gateway-{lane}"), spec)?;
        Ok(Self {
            lab,
            gw,
            lane,
            cacert: work.join("ca.pem"),
            exe: opts.exe.clone(),
        })
    }

    /// One probe run of `n` connections; with the bytes each way per connection.
    fn probe(
        &self,
        gw: &Gateway,
        t: Transport,
        chain: &Chain,
        group: &str,
        size: usize,
        n: usize,
    ) -> anyhow::Result<(Vec<ConnSample>, u64, u64)> {
        let po = ProbeOpts {
            sni: format!("{}.lab", chain.name),
            path: format!("/n/{size}/"),
            groups: Some(group.into()),
            connections: n,
            no_ticket: true,
            cacert: Some(self.cacert.clone()),
            alpn: Some("h2".into()),
            h3: t == Transport::H3,
            ..ProbeOpts::default()
        };
        let (a0, b0) = self.lab.stats();
        let samples = probe(&self.exe, &self.lab.a, gw.addr, &po)?;
        let (a1, b1) = self.lab.stats();
        let per = samples.len().max(1) as u64;
        Ok((samples, b1.since(&b0).tx_bytes / per, a1.since(&a0).tx_bytes / per))
    }

    /// A main-matrix cell: `n` samples over each transport.
    /// On a lossy network the packet tap is on, and each failed sample's TCP connection is
    /// traced into `failures` (a QUIC one is listed without a trace).
    fn cell(
        &self,
        net: &Network,
        chain: &Chain,
        size: usize,
        n: usize,
        failures: &mut Vec<Failure>,
    ) -> anyhow::Result<Vec<Row>> {
        let mut rows = vec![];
        let lossy = net.loss > 0.0;
        for t in Transport::ALL {
            if lossy {
                self.lab.start_capture();
            }
            let probed = self.probe(&self.gw, t, chain, HYBRID, size, n);
            let cap = lossy.then(|| self.lab.take_capture());
            let (samples, down, up) = probed?;
            if let Some(cap) = cap.filter(|_| samples.iter().any(|s| s.error.is_some())) {
                let traced = if t == Transport::H2 {
                    traces(&cap.packets)
                } else {
                    vec![]
                };
                let mut ok: Vec<u64> = samples
                    .iter()
                    .filter(|s| s.error.is_none())
                    .filter_map(|s| traced.get(s.index.wrapping_sub(1)).map(|c| c.down.bytes_in_order))
                    .collect();
                ok.sort_unstable();
                for s in samples.iter().filter(|s| s.error.is_some()) {
                    failures.push(Failure {
                        network: net.name.clone(),
                        data_bytes: size,
                        variant: format!("{} {}", chain.name, t.label()),
                        lane: self.lane,
                        sample: s.index,
                        error: s.error.clone().unwrap_or_default(),
                        trace: traced.get(s.index.wrapping_sub(1)).cloned(),
                        ok_down_bytes_p50: ok.get(ok.len() / 2).copied().unwrap_or(0),
                        capture_dropped: cap.dropped,
                    });
                }
            }
            for s in samples {
                let ok = s.error.is_none();
                let hs = if ok { s.connect_ms + s.handshake_ms } else { f64::NAN };
                let (ttfb, ttlb) = if ok {
                    (s.ttfb_ms, s.ttlb_ms)
                } else {
                    (f64::NAN, f64::NAN)
                };
                rows.push(Row {
                    network: net.name.clone(),
                    rtt_ms: net.rtt_ms,
                    loss: net.loss,
                    rate_mbps: net.rate_mbps,
                    transport: t,
                    chain: chain.name.clone(),
                    chain_bytes: s.chain_bytes,
                    group: s.group,
                    alpn: s.alpn,
                    resumed: s.resumed,
                    data_bytes: size,
                    lane: self.lane,
                    sample: s.index,
                    error: s.error.unwrap_or_default(),
                    handshake_ms: hs,
                    ttfb_ms: ttfb,
                    ttlb_ms: ttlb,
                    handshake_rtts: hs / net.rtt_ms,
                    ttfb_rtts: ttfb / net.rtt_ms,
                    ttlb_rtts: ttlb / net.rtt_ms,
                    down_bytes: down,
                    up_bytes: up,
                });
            }
        }
        Ok(rows)
    }
}

/// The gateway of a set of chains (one site each), HTTP/3 on, no Retry, the run's QUIC
/// congestion controller.
fn spec(opts: &RunOpts, sites: Vec<Site>, bodies: Vec<usize>, port: u16, admin_port: u16) -> GatewaySpec {
    GatewaySpec {
        port,
        admin_port,
        dynamic_records: true,
        early_data: false,
        tcp_fastopen: 0,
        sites,
        bodies,
        handshake_timeout_s: handshake_timeout(),
        http3: true,
        quic_congestion_control: opts.quic_congestion_control.clone(),
    }
}

/// Issues the chains and returns their sites.
fn sites(ca: &Ca, work: &Path, chains: &[Chain]) -> anyhow::Result<Vec<Site>> {
    chains
        .iter()
        .map(|c| {
            let names = [format!("{}.lab", c.name)];
            let f = ca.chain(work, &c.name, &[names[0].as_str()], c.target_bytes)?;
            Ok(Site {
                name: c.name.clone(),
                chain: f.chain,
                key: f.key,
                ocsp_file: None,
                extra: vec![],
            })
        })
        .collect()
}

/// Runs the experiment; writes `quic.{csv,json,md}`, `quic-amplification.csv` and the figures.
pub fn run(opts: &RunOpts) -> anyhow::Result<QuicRun> {
    std::fs::create_dir_all(&opts.out)?;
    let work = tempdir()?;
    let out = run_in(opts, &work);
    let _ = std::fs::remove_dir_all(&work);
    out
}

fn run_in(opts: &RunOpts, work: &Path) -> anyhow::Result<QuicRun> {
    let started = Instant::now();
    let (nets, sizes, sweep) = select(opts)?;
    let ca = Ca::new()?;
    std::fs::write(work.join("ca.pem"), &ca.pem)?;
    let chains = main_chains();
    let main_sites = sites(&ca, work, &chains)?;
    let main_spec = spec(opts, main_sites, sizes.clone(), 443, 9090);
    let n = opts.samples(false);
    let lane0 = Lane::start(opts, work, &main_spec, 0)?;
    opts.log(&format!(
        "{} network(s) × {} chains × {} sizes × 2 transports, {n} samples; sweep: {}",
        nets.len(),
        chains.len(),
        sizes.len(),
        if sweep { "yes" } else { "no" }
    ));
    let amp_rows = if sweep {
        run_sweep(opts, &lane0, &ca, work, n)?
    } else {
        vec![]
    };
    let (mut rows, mut failures) = (vec![], vec![]);
    for net in nets.iter().filter(|n| n.loss == 0.0) {
        net.apply(&lane0.lab)?;
        for chain in &chains {
            for &size in &sizes {
                opts.log(&format!(
                    "{} {} {} KiB: {n} × h2, h3",
                    net.name,
                    chain.name,
                    size / 1024
                ));
                rows.extend(lane0.cell(net, chain, size, n, &mut failures)?);
            }
        }
    }
    let lossy: Vec<Network> = nets.iter().filter(|n| n.loss > 0.0).cloned().collect();
    let k = if opts.quick || lossy.is_empty() {
        1
    } else {
        lanes().min(n.max(1))
    };
    if !lossy.is_empty() {
        opts.log(&format!("{} lossy network(s) over {k} lane(s)", lossy.len()));
    }
    let run_lossy = |lane: &Lane| -> anyhow::Result<(Vec<Row>, Vec<Failure>)> {
        let (mut rows, mut failures) = (vec![], vec![]);
        let m = share(n, k, lane.lane);
        for net in &lossy {
            net.apply(&lane.lab)?;
            for chain in &chains {
                for &size in &sizes {
                    if lane.lane == 0 {
                        opts.log(&format!(
                            "{} {} {} KiB: {n} × h2, h3 ({k} lanes)",
                            net.name,
                            chain.name,
                            size / 1024
                        ));
                    }
                    if m > 0 {
                        rows.extend(lane.cell(net, chain, size, m, &mut failures)?);
                    }
                }
            }
        }
        Ok((rows, failures))
    };
    if k == 1 {
        let (r, f) = run_lossy(&lane0)?;
        rows.extend(r);
        failures.extend(f);
        drop(lane0);
    } else {
        drop(lane0);
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..k)
                .map(|l| {
                    let (spec, run_lossy) = (&main_spec, &run_lossy);
                    scope.spawn(move || -> anyhow::Result<(Vec<Row>, Vec<Failure>)> {
                        run_lossy(&Lane::start(opts, work, spec, l)?)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow::anyhow!("a lane panicked"))?)
                .collect::<anyhow::Result<Vec<_>>>()
        })?;
        for (r, f) in results {
            rows.extend(r);
            failures.extend(f);
        }
    }
    let order = |r: &Row| {
        (
            nets.iter().position(|n| n.name == r.network),
            chains.iter().position(|c| c.name == r.chain),
            r.data_bytes,
            r.transport == Transport::H3,
            r.lane,
            r.sample,
        )
    };
    rows.sort_by_key(order);
    let wall_s = started.elapsed().as_secs_f64();
    opts.log(&format!("done in {wall_s:.0} s"));
    let (cells, comparisons) = summarize(&rows);
    let amplification = summarize_sweep(&amp_rows);
    write_csv(&opts.out.join("quic.csv"), &rows)?;
    if !amp_rows.is_empty() {
        write_csv(&opts.out.join("quic-amplification.csv"), &amp_rows)?;
    }
    write_json(
        &opts.out.join("quic-failures.json"),
        &serde_json::json!({ "failures": failures }),
    )?;
    write_json(
        &opts.out.join("quic.json"),
        &serde_json::json!({
            "profile": if opts.quick { "quick" } else { "full" },
            "rate_mbps": RATE_MBPS,
            "lanes": k,
            "wall_s": wall_s,
            "samples": rows,
            "cells": cells,
            "comparisons": comparisons,
            "amplification": {
                "rtt_ms": SWEEP_RTT_MS,
                "samples": amp_rows,
                "cells": amplification,
            },
        }),
    )?;
    let info = quic_report::RunInfo {
        quick: opts.quick,
        samples: n,
        lanes: k,
        wall_s,
        quic_cc: opts
            .quic_congestion_control
            .clone()
            .unwrap_or_else(|| "default (bbr2)".into()),
        tcp_cc: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .map_or_else(|_| "unknown".into(), |s| s.trim().to_string()),
    };
    std::fs::write(
        opts.out.join("quic.md"),
        quic_report::markdown(&info, &rows, &failures, &cells, &comparisons, &amplification),
    )?;
    quic_report::plots(&opts.out, &cells, &comparisons, &amplification)?;
    Ok(QuicRun {
        cells,
        comparisons,
        amplification,
    })
}

/// The networks, sizes and whether to run the sweep, after `--network` / `--sizes`.
fn select(opts: &RunOpts) -> anyhow::Result<(Vec<Network>, Vec<usize>, bool)> {
    let all = networks(opts.quick);
    let names: Vec<String> = all.iter().map(|n| n.name.clone()).chain([SWEEP.to_string()]).collect();
    if let Some(bad) = opts.networks.iter().find(|n| !names.contains(n)) {
        anyhow::bail!(
            "no network {bad:?} in the quic experiment; networks: {}",
            names.join(", ")
        );
    }
    let pick = |name: &str| opts.networks.is_empty() || opts.networks.iter().any(|n| n == name);
    let nets: Vec<Network> = all.into_iter().filter(|n| pick(&n.name)).collect();
    let mut sz = sizes(opts.quick);
    if !opts.sizes_kib.is_empty() {
        sz.retain(|b| opts.sizes_kib.contains(&(b / 1024)));
        if sz.is_empty() {
            anyhow::bail!(
                "--sizes {:?}: the quic experiment's sizes are {:?} KiB",
                opts.sizes_kib,
                sizes(opts.quick).iter().map(|b| b / 1024).collect::<Vec<_>>()
            );
        }
    }
    Ok((nets, sz, pick(SWEEP)))
}

/// The sweep: chain sizes × {X25519, X25519MLKEM768} × {h2, h3}, 1 KiB responses, loss-free
/// link of [`SWEEP_RTT_MS`], packet tap on; its own gateway on port 444 in lane 0's lab.
fn run_sweep(opts: &RunOpts, lane: &Lane, ca: &Ca, work: &Path, n: usize) -> anyhow::Result<Vec<AmpRow>> {
    let kibs = sweep_kib(opts.quick);
    let chains: Vec<Chain> = kibs.iter().map(|&k| sweep_chain(k)).collect();
    let gw_spec = spec(opts, sites(ca, work, &chains)?, vec![SWEEP_BODY], 444, 9091);
    let gw = Gateway::start(&opts.exe, &lane.lab.b, work, "gateway-sweep", &gw_spec)?;
    let net = Network::new("sweep", SWEEP_RTT_MS, RATE_MBPS, 0.0);
    net.apply(&lane.lab)?;
    opts.log(&format!(
        "amplification sweep: chains {kibs:?} KiB × {{{CLASSICAL}, {HYBRID}}} × h2, h3, {n} samples, {SWEEP_RTT_MS} ms RTT"
    ));
    let mut rows = vec![];
    for (chain, &kib) in chains.iter().zip(&kibs) {
        for group in [CLASSICAL, HYBRID] {
            for t in Transport::ALL {
                lane.lab.start_capture();
                let probed = lane.probe(&gw, t, chain, group, SWEEP_BODY, n);
                let cap = lane.lab.take_capture();
                let (samples, _, _) = probed?;
                let flights: Vec<FirstFlight> = first_flights(&cap.packets)
                    .into_iter()
                    .filter(|f| f.quic == (t == Transport::H3))
                    .collect();
                for s in samples {
                    let ok = s.error.is_none();
                    let hs = if ok { s.connect_ms + s.handshake_ms } else { f64::NAN };
                    let ttfb = if ok { s.ttfb_ms } else { f64::NAN };
                    let flight = flights.get(s.index.wrapping_sub(1)).cloned();
                    rows.push(AmpRow {
                        transport: t,
                        group: group.into(),
                        chain_kib: kib,
                        chain_bytes: s.chain_bytes,
                        alpn: s.alpn,
                        rtt_ms: net.rtt_ms,
                        sample: s.index,
                        error: s.error.unwrap_or_default(),
                        handshake_ms: hs,
                        handshake_rtts: hs / net.rtt_ms,
                        ttfb_rtts: ttfb / net.rtt_ms,
                        traced: flight.is_some() && cap.dropped == 0,
                        flight: flight.unwrap_or_default(),
                    });
                }
            }
        }
    }
    drop(gw);
    Ok(rows)
}

/// Finite values of the successful rows.
fn vals<T>(rows: &[&T], ok: impl Fn(&T) -> bool, f: impl Fn(&T) -> f64) -> Vec<f64> {
    rows.iter()
        .filter(|r| ok(r))
        .map(|r| f(r))
        .filter(|x| x.is_finite())
        .collect()
}

/// Per cell and transport, and h3 against h2.
pub fn summarize(rows: &[Row]) -> (Vec<Cell>, Vec<Comparison>) {
    let mut keys: Vec<(String, String, usize)> = vec![];
    for r in rows {
        let k = (r.network.clone(), r.chain.clone(), r.data_bytes);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let (mut cells, mut comps) = (vec![], vec![]);
    let ok = |r: &Row| r.error.is_empty();
    for (net, chain, size) in keys {
        let of = |t: Transport| {
            rows.iter()
                .filter(|r| r.network == net && r.chain == chain && r.data_bytes == size && r.transport == t)
                .collect::<Vec<_>>()
        };
        let mut per = vec![];
        for t in Transport::ALL {
            let rs = of(t);
            let Some(first) = rs.first() else { continue };
            let (h, f, l) = (
                vals(&rs, ok, |r| r.handshake_ms),
                vals(&rs, ok, |r| r.ttfb_ms),
                vals(&rs, ok, |r| r.ttlb_ms),
            );
            let (hp, fp, lp) = (Pcts::of(&h), Pcts::of(&f), Pcts::of(&l));
            let good = rs.iter().find(|r| ok(r));
            cells.push(Cell {
                network: net.clone(),
                rtt_ms: first.rtt_ms,
                loss: first.loss,
                chain: chain.clone(),
                chain_bytes: good.map_or(0, |r| r.chain_bytes),
                data_bytes: size,
                transport: t,
                samples: rs.len(),
                errors: rs.iter().filter(|r| !ok(r)).count(),
                mislabelled: rs.iter().filter(|r| ok(r) && (r.alpn != t.name() || r.resumed)).count(),
                handshake_p50_ci: median_ci(&h),
                ttfb_p50_ci: median_ci(&f),
                ttlb_p50_ci: median_ci(&l),
                p50_rtts: [hp.p50, fp.p50, lp.p50].map(|x| x / first.rtt_ms),
                handshake: hp,
                ttfb: fp,
                ttlb: lp,
                down_bytes: first.down_bytes,
            });
            per.push((h, f, l, first.rtt_ms, first.loss));
        }
        if let [(h2h, h2f, h2l, rtt, loss), (h3h, h3f, h3l, ..)] = per.as_slice() {
            let pct = |a: &[f64], b: &[f64]| {
                let (pa, pb) = (Pcts::of(a).triple(), Pcts::of(b).triple());
                [0, 1, 2].map(|i| pct_increase(pa[i], pb[i]))
            };
            comps.push(Comparison {
                network: net.clone(),
                rtt_ms: *rtt,
                loss: *loss,
                chain: chain.clone(),
                data_bytes: size,
                handshake_pct: pct(h2h, h3h),
                handshake_ci: increase_ci(h2h, h3h),
                ttfb_pct: pct(h2f, h3f),
                ttfb_ci: increase_ci(h2f, h3f),
                ttlb_pct: pct(h2l, h3l),
                ttlb_ci: increase_ci(h2l, h3l),
            });
        }
    }
    (cells, comps)
}

/// The largest UDP payload the gateway sends (its `max_udp_payload` default; 1,200 during the
/// handshake): a first flight within one datagram of 3× the client's bytes (padding aside) used
/// the whole anti-amplification budget.
const MAX_DATAGRAM: f64 = 1350.0;

/// Per transport, group and chain size.
pub fn summarize_sweep(rows: &[AmpRow]) -> Vec<AmpCell> {
    let mut keys: Vec<(Transport, String, usize)> = vec![];
    for r in rows {
        let k = (r.transport, r.group.clone(), r.chain_kib);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let ok = |r: &AmpRow| r.error.is_empty();
    keys.into_iter()
        .map(|(t, group, kib)| {
            let rs: Vec<&AmpRow> = rows
                .iter()
                .filter(|r| r.transport == t && r.group == group && r.chain_kib == kib)
                .collect();
            let hs = vals(&rs, ok, |r| r.handshake_rtts);
            let p = Pcts::of(&hs);
            let traced: Vec<&AmpRow> = rs.iter().copied().filter(|r| ok(r) && r.traced).collect();
            let med = |f: fn(&FirstFlight) -> u64| {
                crate::measure::median(&traced.iter().map(|r| f(&r.flight) as f64).collect::<Vec<_>>())
            };
            let (client, server) = (med(|f| f.client_first_bytes), med(|f| f.server_first_bytes));
            let padding = med(|f| f.server_first_padding);
            let rounds = med(|f| f.server_rounds);
            let held_back = traced
                .iter()
                .filter(|r| r.flight.server_handshake_bytes_later > 0)
                .count();
            let held = held_back * 2 > traced.len();
            let at_limit = server - padding + MAX_DATAGRAM > 3.0 * client;
            let verdict = match (t, held) {
                (_, false) => "fits",
                (Transport::H3, true) if at_limit && rounds > 2.0 => "3× limit, then cwnd",
                (Transport::H3, true) if at_limit => "3× limit",
                (Transport::H3, true) => "cwnd",
                (Transport::H2, true) => "initcwnd",
            };
            let max = |f: fn(&FirstFlight) -> f64| {
                traced
                    .iter()
                    .map(|r| f(&r.flight))
                    .filter(|x| x.is_finite())
                    .fold(f64::NAN, f64::max)
            };
            AmpCell {
                transport: t,
                group: group.clone(),
                chain_kib: kib,
                chain_bytes: rs.iter().find(|r| ok(r)).map_or(0, |r| r.chain_bytes),
                rtt_ms: rs.first().map_or(f64::NAN, |r| r.rtt_ms),
                samples: rs.len(),
                errors: rs.iter().filter(|r| !ok(r)).count(),
                handshake_rtts_ci: median_ci(&hs),
                extra_rtts: (p.p50 - t.min_handshake_rtts()).round().max(0.0),
                handshake_rtts: p,
                client_first_bytes: client,
                client_first_packets: med(|f| f.client_first_packets),
                server_first_bytes: server,
                server_first_padding: padding,
                server_handshake_bytes: med(|f| f.server_handshake_bytes),
                server_handshake_bytes_later: med(|f| f.server_handshake_bytes_later),
                server_rounds: rounds,
                ratio_max: max(|f| f.ratio),
                charged_ratio_max: max(|f| f.charged_ratio),
                held_back,
                traced: traced.len(),
                verdict: verdict.into(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(quick: bool, networks: &[&str], sizes: &[usize]) -> RunOpts {
        RunOpts {
            exe: PathBuf::new(),
            out: PathBuf::new(),
            quick,
            samples: None,
            verbose: false,
            networks: networks.iter().map(|s| s.to_string()).collect(),
            sizes_kib: sizes.to_vec(),
            quic_congestion_control: None,
        }
    }

    #[test]
    fn the_matrix_and_its_selection() {
        let full = networks(false);
        assert_eq!(full.len(), 8);
        assert!(full
            .iter()
            .any(|n| n.name == "100ms-loss10" && (n.loss - 0.1).abs() < 1e-12));
        let (n, s, sweep) = select(&opts(false, &[], &[])).unwrap();
        assert_eq!((n.len(), s, sweep), (8, vec![1024, 1 << 20], true));
        let (n, s, sweep) = select(&opts(false, &["20ms-loss3"], &[1024])).unwrap();
        assert_eq!((n.len(), s, sweep), (1, vec![1 << 20], false));
        let (n, _, sweep) = select(&opts(true, &[SWEEP], &[])).unwrap();
        assert!(n.is_empty() && sweep);
        let err = select(&opts(false, &["nowhere"], &[])).unwrap_err().to_string();
        assert!(err.contains("100ms-loss10") && err.contains(SWEEP), "{err}");
        assert!(select(&opts(false, &[], &[7])).is_err());
    }

    fn row(t: Transport, hs: f64, err: &str) -> Row {
        Row {
            network: "n".into(),
            rtt_ms: 20.0,
            loss: 0.0,
            rate_mbps: 100.0,
            transport: t,
            chain: "ecdsa".into(),
            chain_bytes: 700,
            group: HYBRID.into(),
            alpn: t.name().into(),
            resumed: false,
            data_bytes: 1024,
            lane: 0,
            sample: 1,
            error: err.into(),
            handshake_ms: hs,
            ttfb_ms: hs + 20.0,
            ttlb_ms: hs + 21.0,
            handshake_rtts: hs / 20.0,
            ttfb_rtts: (hs + 20.0) / 20.0,
            ttlb_rtts: (hs + 21.0) / 20.0,
            down_bytes: 5000,
            up_bytes: 2000,
        }
    }

    #[test]
    fn cells_count_failures_and_compare_transports() {
        let mut rows = vec![];
        for i in 0..10 {
            rows.push(row(Transport::H2, 40.0 + f64::from(i), ""));
            rows.push(row(Transport::H3, 20.0 + f64::from(i), ""));
        }
        rows.push(row(Transport::H3, f64::NAN, "timed out"));
        let mut wrong = row(Transport::H3, 25.0, "");
        wrong.alpn = "h2".into();
        rows.push(wrong);
        let (cells, comps) = summarize(&rows);
        assert_eq!(cells.len(), 2);
        let h3 = cells.iter().find(|c| c.transport == Transport::H3).unwrap();
        assert_eq!((h3.samples, h3.errors, h3.mislabelled, h3.handshake.n), (12, 1, 1, 11));
        assert!(h3.handshake_p50_ci[0] <= h3.handshake.p50 && h3.handshake.p50 <= h3.handshake_p50_ci[1]);
        assert_eq!(comps.len(), 1);
        assert!(comps[0].handshake_pct[0] < -30.0, "{:?}", comps[0]);
        assert!(comps[0].handshake_ci[0][1] < 0.0, "{:?}", comps[0].handshake_ci);
    }
}

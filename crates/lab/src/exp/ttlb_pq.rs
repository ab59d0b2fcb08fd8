//! ttlb-pq: seed 004 reproduced. TLS 1.3 handshake time and TTLB for a classical connection
//! (X25519, a plain ECDSA chain) against post-quantum ones (X25519MLKEM768 with the plain chain,
//! with ECDSA chains padded to the paper's 8 KB and 16 KB, and with real ML-DSA-44 / ML-DSA-65
//! chains), over networks that vary RTT, rate, loss, jitter and initcwnd, for response sizes of
//! 0–200 KiB; and the paper's own conditions for its figures 1, 4 and 6 (`ttlb_pq_paper`).
//!
//! Each cell runs `tlsgate probe -n N --no-ticket` (N fresh full handshakes, one after the other)
//! from namespace A against a gateway in namespace B that serves all chains (by SNI). Cells on
//! slow links are split over parallel lanes, each its own lab and gateway (`ttlb_pq_lane`).

use super::bootstrap::increase_ci;
pub use super::ttlb_pq_lane::Setting;
use super::ttlb_pq_lane::{run_lane, Failure, LanePlan};
pub use super::ttlb_pq_model::{Cell, ChainKind, Row, Variant, VARIANTS};
use super::{ttlb_pq_figs, ttlb_pq_paper, ttlb_pq_report};
use super::{Network, RunOpts};
use crate::gateway::{GatewaySpec, Site, LAB_HANDSHAKE_TIMEOUT_S};
use crate::pki::{mldsa_chain, Ca};
use crate::report::{pct_increase, write_csv, write_json, Pcts};

/// Default number of lanes for slow-link cells; `TLSGATE_LAB_LANES` overrides it (1 = serial).
pub const DEFAULT_LANES: usize = 8;

/// The gateways' handshake and silent timeout: [`LAB_HANDSHAKE_TIMEOUT_S`], or for a diagnostic
/// run `TLSGATE_LAB_HANDSHAKE_TIMEOUT_S` (seconds; 0 = the gateway's own defaults, 10 s and 5 s,
/// which cut handshakes that a lossy link stretches: issue 22).
pub fn handshake_timeout() -> Option<u64> {
    match std::env::var("TLSGATE_LAB_HANDSHAKE_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(0) => None,
        Some(t) => Some(t),
        None => Some(LAB_HANDSHAKE_TIMEOUT_S),
    }
}

/// Lanes for this run.
pub fn lanes() -> usize {
    std::env::var("TLSGATE_LAB_LANES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_LANES)
        .clamp(1, 32)
}

fn matrix(quick: bool) -> Vec<Setting> {
    let kib = |v: &[usize]| v.iter().map(|k| k * 1024).collect::<Vec<_>>();
    let fast = Network::new("35ms-1g", 35.0, 1000.0, 0.0);
    let slow = Network::new("200ms-1m", 200.0, 1.0, 0.0);
    if quick {
        return vec![
            Setting {
                net: fast,
                initcwnd: 10,
                sizes: kib(&[0, 200]),
                full_samples: false,
            },
            Setting {
                net: slow,
                initcwnd: 10,
                sizes: kib(&[0]),
                full_samples: false,
            },
        ];
    }
    let sizes = kib(&[0, 16, 64, 128, 200]);
    let mut jitter = Network::new("35ms-1g-jitter", 35.0, 1000.0, 0.0);
    jitter.jitter_ms = 35.0 / 4.0;
    let mut m = vec![];
    for cwnd in [10, 20] {
        m.push(Setting {
            net: fast.clone(),
            initcwnd: cwnd,
            sizes: sizes.clone(),
            full_samples: false,
        });
        m.push(Setting {
            net: slow.clone(),
            initcwnd: cwnd,
            sizes: sizes.clone(),
            full_samples: false,
        });
    }
    for loss in [0.01, 0.03, 0.10] {
        m.push(Setting {
            net: Network::new(&format!("35ms-1g-loss{}", loss * 100.0), 35.0, 1000.0, loss),
            initcwnd: 20,
            sizes: kib(&[0, 64, 200]),
            full_samples: false,
        });
    }
    m.push(Setting {
        net: jitter,
        initcwnd: 20,
        sizes,
        full_samples: false,
    });
    m
}

/// The settings to run: the whole matrix `m` when `networks` is empty; otherwise the matrix's
/// settings on the listed networks and the paper's cells (`fig1`, `fig4`, `fig6`, or a paper
/// network's name), one setting per network and initcwnd with the sizes merged. Then only the
/// listed sizes (each setting's own when empty). An error when nothing is left, naming what exists.
fn select(m: Vec<Setting>, networks: &[String], sizes_kib: &[usize]) -> anyhow::Result<Vec<Setting>> {
    let mut names: Vec<String> = m.iter().map(|s| s.net.name.clone()).collect();
    names.extend(ttlb_pq_paper::FIGURES.iter().map(|f| f.to_string()));
    names.extend(ttlb_pq_paper::cells().into_iter().map(|c| c.net.name));
    let mut picked: Vec<Setting> = if networks.is_empty() {
        m
    } else {
        let mut v: Vec<Setting> = m.into_iter().filter(|s| networks.contains(&s.net.name)).collect();
        for name in networks {
            for c in ttlb_pq_paper::named(name) {
                merge(
                    &mut v,
                    Setting {
                        net: c.net,
                        initcwnd: ttlb_pq_paper::INITCWND,
                        sizes: c.sizes,
                        full_samples: true,
                    },
                );
            }
        }
        v
    };
    picked = picked
        .into_iter()
        .map(|mut s| {
            if !sizes_kib.is_empty() {
                s.sizes.retain(|b| sizes_kib.contains(&(b / 1024)));
            }
            s
        })
        .filter(|s| !s.sizes.is_empty())
        .collect();
    if picked.is_empty() {
        let mut seen = vec![];
        names.retain(|n| {
            let new = !seen.contains(n);
            seen.push(n.clone());
            new
        });
        anyhow::bail!(
            "no cell matches --network {networks:?} --sizes {sizes_kib:?}; networks: {}",
            names.join(", ")
        );
    }
    Ok(picked)
}

/// Adds `s` to `v`, or its sizes to the setting of `v` on the same network and initcwnd.
fn merge(v: &mut Vec<Setting>, s: Setting) {
    match v
        .iter_mut()
        .find(|x| x.net.name == s.net.name && x.initcwnd == s.initcwnd)
    {
        Some(x) => {
            for b in s.sizes {
                if !x.sizes.contains(&b) {
                    x.sizes.push(b);
                }
            }
            x.sizes.sort_unstable();
            x.full_samples |= s.full_samples;
        }
        None => v.push(s),
    }
}

/// Runs the experiment; returns the cell summaries (also written under `opts.out`).
pub fn run(opts: &RunOpts) -> anyhow::Result<Vec<Cell>> {
    std::fs::create_dir_all(&opts.out)?;
    let work = tempdir()?;
    let ca = Ca::new()?;
    let mut roots = ca.pem.clone();
    let mut sites = vec![];
    for v in &VARIANTS {
        let names = [format!("{}.lab", v.name)];
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let target = match v.chain {
            ChainKind::Padded(n) => n,
            _ => 0,
        };
        let c = ca.chain(&work, v.name, &names, target)?;
        let mut extra = vec![];
        if let ChainKind::MlDsa(level) = v.chain {
            let (m, root) = mldsa_chain(&work, &format!("{}-mldsa", v.name), &names, level)?;
            roots.push_str(&root);
            extra.push((m.chain, m.key));
        }
        sites.push(Site {
            name: v.name.into(),
            chain: c.chain,
            key: c.key,
            ocsp_file: None,
            extra,
        });
    }
    std::fs::write(work.join("ca.pem"), roots)?;
    let m = select(matrix(opts.quick), &opts.networks, &opts.sizes_kib)?;
    let mut bodies: Vec<usize> = m.iter().flat_map(|s| s.sizes.iter().copied()).collect();
    bodies.sort_unstable();
    bodies.dedup();
    let spec = GatewaySpec {
        port: 443,
        admin_port: 9090,
        dynamic_records: true,
        early_data: false,
        tcp_fastopen: 0,
        sites,
        bodies,
        handshake_timeout_s: handshake_timeout(),
        http3: false,
        quic_congestion_control: None,
    };
    // The quick profile keeps to the four padded-chain variants and one lane; a lane beyond a
    // slow cell's sample count would idle.
    let n_variants = if opts.quick { 4 } else { VARIANTS.len() };
    let most = m
        .iter()
        .filter(|s| s.net.is_slow())
        .map(|s| opts.samples(!s.full_samples))
        .max();
    let lanes = match most {
        Some(n) if !opts.quick => lanes().min(n.max(1)),
        _ => 1,
    };
    opts.log(&format!(
        "{} setting(s), {lanes} lane(s) for 1 Mbit/s cells, gateway handshake timeout {}",
        m.len(),
        spec.handshake_timeout_s
            .map_or_else(|| "default (10 s)".to_string(), |t| format!("{t} s"))
    ));
    let started = std::time::Instant::now();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..lanes)
            .map(|lane| {
                let plan = LanePlan {
                    lane,
                    lanes,
                    settings: m.clone(),
                    spec: spec.clone(),
                    work: work.clone(),
                    n_variants,
                };
                scope.spawn(move || run_lane(opts, &plan))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a lane panicked"))?)
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    opts.log(&format!("done in {:.0} s", started.elapsed().as_secs_f64()));
    let mut keyed = vec![];
    let mut failures: Vec<Failure> = vec![];
    let mut counters = vec![];
    for (lane, r) in results.into_iter().enumerate() {
        keyed.extend(r.rows);
        failures.extend(r.failures);
        counters.push(serde_json::json!({ "lane": lane, "metrics": r.gateway_counters }));
    }
    keyed.sort_by_key(|((si, size, vi), r)| (*si, *size, *vi, r.lane, r.sample));
    let rows: Vec<Row> = keyed.into_iter().map(|(_, r)| r).collect();
    let cells = summarize(&rows);
    write_csv(&opts.out.join("ttlb-pq.csv"), &rows)?;
    write_json(
        &opts.out.join("ttlb-pq.json"),
        &serde_json::json!({ "lanes": lanes, "wall_s": started.elapsed().as_secs_f64(), "samples": rows, "cells": cells }),
    )?;
    write_json(
        &opts.out.join("ttlb-pq-failures.json"),
        &serde_json::json!({ "failures": failures, "gateway_counters": counters }),
    )?;
    reports(&cells, &rows, &failures, opts)?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(cells)
}

/// `ttlb-pq.md` and the SVG figures.
fn reports(cells: &[Cell], rows: &[Row], failures: &[Failure], opts: &RunOpts) -> anyhow::Result<()> {
    let mut md = ttlb_pq_report::markdown(cells, opts);
    md.push_str(&ttlb_pq_figs::markdown(cells, rows));
    md.push_str(&ttlb_pq_report::failures_markdown(failures));
    std::fs::write(opts.out.join("ttlb-pq.md"), md)?;
    ttlb_pq_report::plots(cells, opts)?;
    ttlb_pq_figs::plots(cells, rows, opts)
}

/// Re-writes a finished run's summaries from its own samples, with this version's report code:
/// the cells in `ttlb-pq.json`, `ttlb-pq.md` and the SVG figures under `dir` (the samples, the
/// CSV and the failure traces are kept as they are). For a run whose reports predate a change
/// of the report code (`cargo run --release -p tlsgate-lab --example ttlb_pq_rerender -- DIR`).
pub fn rerender(dir: &std::path::Path) -> anyhow::Result<Vec<Cell>> {
    let path = dir.join("ttlb-pq.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let rows: Vec<Row> = serde_json::from_value(json["samples"].take())?;
    let failures: Vec<Failure> = match std::fs::read_to_string(dir.join("ttlb-pq-failures.json")) {
        Ok(text) => serde_json::from_value(serde_json::from_str::<serde_json::Value>(&text)?["failures"].take())?,
        Err(_) => vec![],
    };
    let cells = summarize(&rows);
    json["samples"] = serde_json::to_value(&rows)?;
    json["cells"] = serde_json::to_value(&cells)?;
    write_json(&path, &json)?;
    let opts = RunOpts {
        exe: std::path::PathBuf::new(),
        out: dir.to_path_buf(),
        quick: false,
        samples: None,
        verbose: false,
        networks: vec![],
        sizes_kib: vec![],
        quic_congestion_control: None,
    };
    reports(&cells, &rows, &failures, &opts)?;
    Ok(cells)
}

fn summarize(rows: &[Row]) -> Vec<Cell> {
    let mut keys: Vec<(String, u32, usize)> = vec![];
    for r in rows {
        let k = (r.network.clone(), r.initcwnd, r.data_bytes);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut cells = vec![];
    for (net, cwnd, size) in keys {
        let of = |v: &str| {
            rows.iter()
                .filter(|r| r.network == net && r.initcwnd == cwnd && r.data_bytes == size && r.variant == v)
                .collect::<Vec<_>>()
        };
        let ok = |rs: &[&Row], f: fn(&Row) -> f64| {
            Pcts::of(
                &rs.iter()
                    .filter(|r| r.error.is_empty())
                    .map(|r| f(r))
                    .collect::<Vec<_>>(),
            )
        };
        let base = of("classical");
        let vals = |rs: &[&Row], f: fn(&Row) -> f64| -> Vec<f64> {
            rs.iter()
                .filter(|r| r.error.is_empty())
                .map(|r| f(r))
                .filter(|x| x.is_finite())
                .collect()
        };
        let (bh, bt) = (ok(&base, |r| r.handshake_ms), ok(&base, |r| r.ttlb_ms));
        let (bhv, btv) = (vals(&base, |r| r.handshake_ms), vals(&base, |r| r.ttlb_ms));
        for v in &VARIANTS {
            let rs = of(v.name);
            let Some(first) = rs.first() else {
                continue;
            };
            let (h, t) = (ok(&rs, |r| r.handshake_ms), ok(&rs, |r| r.ttlb_ms));
            let inc = |a: [f64; 3], b: [f64; 3]| [0, 1, 2].map(|i| pct_increase(a[i], b[i]));
            let good = rs.iter().find(|r| r.error.is_empty());
            cells.push(Cell {
                network: net.clone(),
                rtt_ms: first.rtt_ms,
                rate_mbps: first.rate_mbps,
                loss: first.loss,
                jitter_ms: first.jitter_ms,
                initcwnd: cwnd,
                data_bytes: size,
                variant: v.name.into(),
                errors: rs.iter().filter(|r| !r.error.is_empty()).count(),
                handshake: h,
                ttlb: t,
                handshake_increase_pct: inc(bh.triple(), h.triple()),
                ttlb_increase_pct: inc(bt.triple(), t.triple()),
                handshake_increase_ci: increase_ci(&bhv, &vals(&rs, |r| r.handshake_ms)),
                ttlb_increase_ci: increase_ci(&btv, &vals(&rs, |r| r.ttlb_ms)),
                chain_bytes: good.map_or(0, |r| r.chain_bytes),
                cert_type: good.map_or_else(String::new, |r| r.cert_type.clone()),
                down_bytes: first.down_bytes,
            });
        }
    }
    cells
}

/// A private working directory for certificates and configuration.
pub fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(crate::netns::unique_id());
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_keeps_the_listed_networks_and_sizes() {
        let all = matrix(false);
        let n_all = all.len();
        assert_eq!(select(matrix(false), &[], &[]).unwrap().len(), n_all);
        let one = select(matrix(false), &["35ms-1g-loss10".to_string()], &[200]).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].net.name, "35ms-1g-loss10");
        assert_eq!(one[0].sizes, vec![200 * 1024]);
        let err = select(matrix(false), &["nowhere".to_string()], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("35ms-1g-loss10"), "{err}");
        assert!(select(matrix(false), &[], &[7]).is_err());
    }

    #[test]
    fn paper_figures_are_selected_by_name_and_merged_per_network() {
        // Not in the default matrix.
        let all = select(matrix(false), &[], &[]).unwrap();
        assert!(all.iter().all(|s| s.net.name != "200ms-1m-loss10"));
        let f1 = select(matrix(false), &["fig1".to_string()], &[]).unwrap();
        assert_eq!(f1.len(), 8);
        assert!(f1
            .iter()
            .all(|s| s.initcwnd == 20 && s.sizes == vec![0] && s.full_samples));
        // fig1's 0 KiB and fig4's sizes on one network: one setting.
        let both = select(matrix(false), &["fig1".to_string(), "fig4".to_string()], &[]).unwrap();
        assert_eq!(both.len(), 8);
        let l10 = both.iter().find(|s| s.net.name == "200ms-1m-loss10").unwrap();
        assert_eq!(l10.sizes.len(), 5);
        let f6 = select(matrix(false), &["fig6".to_string()], &[200]).unwrap();
        assert_eq!(f6.len(), 3);
        let err = select(matrix(false), &["nowhere".to_string()], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("fig4") && err.contains("35ms-1m-loss10"), "{err}");
    }
}

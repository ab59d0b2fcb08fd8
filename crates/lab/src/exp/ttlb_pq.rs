//! ttlb-pq: seed 004 reproduced. TLS 1.3 handshake time and TTLB for a classical connection
//! (X25519, a plain ECDSA chain) against post-quantum ones (X25519MLKEM768 with the plain chain,
//! and with chains padded to ML-DSA sizes, ~8 KB and ~16 KB), over networks that vary RTT, rate,
//! loss, jitter and initcwnd, for response sizes of 0–200 KiB.
//!
//! Each cell runs one `tlsgate probe -n N --no-ticket` (N fresh full handshakes, one after the
//! other) from namespace A against one gateway in namespace B that serves all chains (by SNI).

pub use super::ttlb_pq_model::{Cell, Row, Variant, VARIANTS};
use super::ttlb_pq_report;
use super::{Network, RunOpts};
use crate::client::{probe, ProbeOpts};
use crate::gateway::{Gateway, GatewaySpec, Site};
use crate::pki::Ca;
use crate::report::{pct_increase, write_csv, write_json, Pcts};
use crate::{Lab, LabOptions, LinkSpec};

/// One cell of the matrix: a network, initcwnd and response size.
#[derive(Debug, Clone)]
struct Setting {
    net: Network,
    initcwnd: u32,
    sizes: Vec<usize>,
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
            },
            Setting {
                net: slow,
                initcwnd: 10,
                sizes: kib(&[0]),
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
        });
        m.push(Setting {
            net: slow.clone(),
            initcwnd: cwnd,
            sizes: sizes.clone(),
        });
    }
    for loss in [0.01, 0.03, 0.10] {
        m.push(Setting {
            net: Network::new(&format!("35ms-1g-loss{}", loss * 100.0), 35.0, 1000.0, loss),
            initcwnd: 20,
            sizes: kib(&[0, 64, 200]),
        });
    }
    m.push(Setting {
        net: jitter,
        initcwnd: 20,
        sizes,
    });
    m
}

/// The settings of `m` on the listed networks (all when empty), with only the listed sizes (each
/// setting's own when empty); an error when nothing is left, naming what exists.
fn select(m: Vec<Setting>, networks: &[String], sizes_kib: &[usize]) -> anyhow::Result<Vec<Setting>> {
    let names: Vec<String> = m.iter().map(|s| s.net.name.clone()).collect();
    let picked: Vec<Setting> = m
        .into_iter()
        .filter(|s| networks.is_empty() || networks.contains(&s.net.name))
        .map(|mut s| {
            if !sizes_kib.is_empty() {
                s.sizes.retain(|b| sizes_kib.contains(&(b / 1024)));
            }
            s
        })
        .filter(|s| !s.sizes.is_empty())
        .collect();
    if picked.is_empty() {
        let mut names = names;
        names.dedup();
        anyhow::bail!(
            "no cell matches --network {networks:?} --sizes {sizes_kib:?}; networks: {}",
            names.join(", ")
        );
    }
    Ok(picked)
}

/// Runs the experiment; returns the cell summaries (also written under `opts.out`).
pub fn run(opts: &RunOpts) -> anyhow::Result<Vec<Cell>> {
    std::fs::create_dir_all(&opts.out)?;
    let work = tempdir()?;
    let ca = Ca::new()?;
    std::fs::write(work.join("ca.pem"), &ca.pem)?;
    let mut sites = vec![];
    for v in &VARIANTS {
        let c = ca.chain(&work, v.name, &[&format!("{}.lab", v.name)], v.chain_target)?;
        sites.push(Site {
            name: v.name.into(),
            chain: c.chain,
            key: c.key,
            ocsp_file: None,
        });
    }
    let m = select(matrix(opts.quick), &opts.networks, &opts.sizes_kib)?;
    let mut bodies: Vec<usize> = m.iter().flat_map(|s| s.sizes.iter().copied()).collect();
    bodies.sort_unstable();
    bodies.dedup();
    let lab = Lab::with_options(LinkSpec::default(), LinkSpec::default(), &LabOptions::default())?;
    let spec = GatewaySpec {
        port: 443,
        admin_port: 9090,
        dynamic_records: true,
        early_data: false,
        tcp_fastopen: 0,
        sites,
        bodies,
    };
    let gw = Gateway::start(&opts.exe, &lab.b, &work, "gateway", &spec)?;
    let mut rows = vec![];
    for set in &m {
        set.net.apply(&lab)?;
        lab.set_initcwnd(Some(set.initcwnd))?;
        let n = opts.samples(set.net.is_slow());
        for &size in &set.sizes {
            opts.log(&format!(
                "{} initcwnd {} {} KiB: {} samples × {} variants",
                set.net.name,
                set.initcwnd,
                size / 1024,
                n,
                VARIANTS.len()
            ));
            for v in &VARIANTS {
                let po = ProbeOpts {
                    sni: format!("{}.lab", v.name),
                    path: format!("/n/{size}/"),
                    groups: Some(v.groups.into()),
                    connections: n,
                    no_ticket: true,
                    cacert: Some(work.join("ca.pem")),
                    ..ProbeOpts::default()
                };
                let (a0, b0) = lab.stats();
                let samples = probe(&opts.exe, &lab.a, gw.addr, &po)?;
                let (a1, b1) = lab.stats();
                let count = samples.len().max(1) as u64;
                let per = |x: u64| x / count;
                for s in samples {
                    rows.push(Row {
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
                        error: s.error.unwrap_or_default(),
                        handshake_ms: s.connect_ms + s.handshake_ms,
                        ttfb_ms: s.ttfb_ms,
                        ttlb_ms: s.ttlb_ms,
                        down_bytes: per(b1.since(&b0).tx_bytes),
                        up_bytes: per(a1.since(&a0).tx_bytes),
                    });
                }
            }
        }
    }
    drop(gw);
    drop(lab);
    let cells = summarize(&rows);
    write_csv(&opts.out.join("ttlb-pq.csv"), &rows)?;
    write_json(
        &opts.out.join("ttlb-pq.json"),
        &serde_json::json!({ "samples": rows, "cells": cells }),
    )?;
    std::fs::write(opts.out.join("ttlb-pq.md"), ttlb_pq_report::markdown(&cells, opts))?;
    ttlb_pq_report::plots(&cells, opts)?;
    let _ = std::fs::remove_dir_all(&work);
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
        let (bh, bt) = (ok(&base, |r| r.handshake_ms), ok(&base, |r| r.ttlb_ms));
        for v in &VARIANTS {
            let rs = of(v.name);
            let (h, t) = (ok(&rs, |r| r.handshake_ms), ok(&rs, |r| r.ttlb_ms));
            let inc = |a: [f64; 3], b: [f64; 3]| [0, 1, 2].map(|i| pct_increase(a[i], b[i]));
            cells.push(Cell {
                network: net.clone(),
                initcwnd: cwnd,
                data_bytes: size,
                variant: v.name.into(),
                errors: rs.iter().filter(|r| !r.error.is_empty()).count(),
                handshake: h,
                ttlb: t,
                handshake_increase_pct: inc(bh.triple(), h.triple()),
                ttlb_increase_pct: inc(bt.triple(), t.triple()),
                down_bytes: rs.first().map_or(0, |r| r.down_bytes),
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
}

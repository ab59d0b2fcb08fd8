//! ttlb-pq's versions of the paper's figures 1, 4 and 6 (seed 004), drawn from whatever cells of
//! them a run holds (`--network fig1` etc.; a figure whose cells are absent is skipped):
//!
//! - fig. 1: handshake-time increase over classical per loss rate, one plot per RTT
//!   (`ttlb-pq-fig1-<rtt>ms.svg`), and over the aggregate of all its cells as the paper shows it
//!   (`ttlb-pq-fig1-aggregate.svg`: increase at p50/p75/p90);
//! - fig. 4: TTLB per response size at p50 and p90 (`ttlb-pq-fig4.svg`);
//! - fig. 6: CDF of the post-quantum TTLB at 200 KiB per network (`ttlb-pq-fig6-cdf.svg`).

use super::bootstrap::{increase_ci, significant};
use super::ttlb_pq_model::{Cell, Row};
use super::ttlb_pq_paper::{self, INITCWND};
use super::RunOpts;
use crate::measure::percentile;
use crate::report::{f1, pct_increase};
use crate::svg::{line_chart, Series};
use std::fmt::Write as _;

/// The chains compared in figs. 1 and 4: the paper's padded sizes and the real ML-DSA chains.
const CHAINS: [&str; 4] = ["pq-8k", "pq-16k", "pq-mldsa44", "pq-mldsa65"];
/// The post-quantum variants drawn in fig. 6's CDF (solid, dashed).
const FIG6: [&str; 2] = ["pq-16k", "pq-mldsa44"];
const FIG4_NET: &str = "200ms-1m-loss10";

fn fig_nets(fig: &str) -> Vec<String> {
    ttlb_pq_paper::named(fig).into_iter().map(|c| c.net.name).collect()
}

fn fig1_rows<'a>(rows: &'a [Row], variant: &str) -> Vec<&'a Row> {
    let nets = fig_nets("fig1");
    rows.iter()
        .filter(|r| {
            nets.contains(&r.network)
                && r.initcwnd == INITCWND
                && r.data_bytes == 0
                && r.variant == variant
                && r.error.is_empty()
        })
        .collect()
}

/// One variant of fig. 1 pooled: name, n, handshake p50/p75/p90, increase over classical and
/// its 95 % interval.
type Pooled = (&'static str, usize, [f64; 3], [f64; 3], [[f64; 2]; 3]);

/// Fig. 1's networks present in `rows` (its figure needs at least two: a run of fig. 4 holds
/// one of them, at 0 KiB, and is not a fig. 1).
fn fig1_networks(rows: &[Row]) -> usize {
    let mut seen: Vec<&str> = fig_nets("fig1")
        .iter()
        .filter_map(|n| rows.iter().find(|r| &r.network == n && r.data_bytes == 0))
        .map(|r| r.network.as_str())
        .collect();
    seen.dedup();
    seen.len()
}

/// Fig. 1 pooled over all its cells, per variant (classical first); empty for fewer than two of
/// its networks.
fn fig1_aggregate(rows: &[Row]) -> Vec<Pooled> {
    if fig1_networks(rows) < 2 {
        return vec![];
    }
    let hs = |v: &str| fig1_rows(rows, v).iter().map(|r| r.handshake_ms).collect::<Vec<_>>();
    let base = hs("classical");
    if base.is_empty() {
        return vec![];
    }
    let p = |v: &[f64]| [50.0, 75.0, 90.0].map(|q| percentile(v, q));
    let bp = p(&base);
    let mut out = vec![("classical", base.len(), bp, [0.0; 3], [[0.0; 2]; 3])];
    for v in ["pq-kem"].iter().chain(CHAINS.iter()) {
        let x = hs(v);
        if x.is_empty() {
            continue;
        }
        let xp = p(&x);
        out.push((
            v,
            x.len(),
            xp,
            [0, 1, 2].map(|i| pct_increase(bp[i], xp[i])),
            increase_ci(&base, &x),
        ));
    }
    out
}

/// The figures' Markdown sections.
pub fn markdown(cells: &[Cell], rows: &[Row]) -> String {
    let mut s = String::new();
    let agg = fig1_aggregate(rows);
    if !agg.is_empty() {
        let _ = writeln!(
            s,
            "## Figure 1: handshake time, 1 Mbit/s, loss 0/1/3/10 %, RTT 35/200 ms, initcwnd 20 (all cells pooled)\n"
        );
        let _ = writeln!(
            s,
            "| variant | n | handshake p50 / p75 / p90 ms | Δ % p50 / p75 / p90 [95 % interval] | added ms p50 |"
        );
        let _ = writeln!(s, "|---|---:|---|---|---:|");
        let base = agg[0].2;
        for (v, n, p, inc, ci) in &agg {
            let d = if *v == "classical" {
                String::new()
            } else {
                [0, 1, 2]
                    .map(|i| format!("{} [{}, {}]", f1(inc[i]), f1(ci[i][0]), f1(ci[i][1])))
                    .join(" / ")
            };
            let _ = writeln!(
                s,
                "| {v} | {n} | {} | {d} | {} |",
                p.map(f1).join(" / "),
                f1(p[0] - base[0])
            );
        }
        let added = |v: &str| agg.iter().find(|a| a.0 == v).map(|a| a.2[0] - base[0]);
        if let (Some(a8), Some(a16)) = (added("pq-8k"), added("pq-16k")) {
            let _ = writeln!(
                s,
                "\nAdded handshake time at p50, 16 KB chain / 8 KB chain: {:.2}× (paper: \"almost twice\").",
                a16 / a8
            );
        }
        s.push('\n');
    }
    let f6: Vec<String> = fig_nets("fig6");
    let present: Vec<&String> = f6
        .iter()
        .filter(|n| rows.iter().any(|r| &r.network == *n && r.data_bytes == 200 * 1024))
        .collect();
    if !present.is_empty() {
        let _ = writeln!(s, "## Figure 6: TTLB distribution at 200 KiB, 35 ms, initcwnd 20\n");
        let _ = writeln!(s, "| network | variant | n | p10 | p50 | p90 | max | p90 / p10 |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
        for net in present {
            for v in ["classical"].iter().chain(FIG6.iter()) {
                let x = cdf_values(rows, net, v);
                if x.is_empty() {
                    continue;
                }
                let q = |p: f64| percentile(&x, p);
                let _ = writeln!(
                    s,
                    "| {net} | {v} | {} | {} | {} | {} | {} | {:.2} |",
                    x.len(),
                    f1(q(10.0)),
                    f1(q(50.0)),
                    f1(q(90.0)),
                    f1(q(100.0)),
                    q(90.0) / q(10.0)
                );
            }
        }
        s.push('\n');
    }
    let f4 = fig4_cells(cells);
    if !f4.is_empty() {
        let _ = writeln!(
            s,
            "## Figure 4: TTLB increase, 1 Mbit/s, 200 ms, 10 % loss, initcwnd 20\n"
        );
        let _ = writeln!(
            s,
            "| KiB | variant | TTLB p50 / p75 / p90 ms | Δ % p50 / p75 / p90 [95 % interval] |"
        );
        let _ = writeln!(s, "|---:|---|---|---|");
        for c in f4 {
            let d = if c.variant == "classical" {
                String::new()
            } else {
                [0, 1, 2]
                    .map(|i| {
                        let ci = c.ttlb_increase_ci[i];
                        let mark = if significant(ci) { "*" } else { "" };
                        format!("{}{mark} [{}, {}]", f1(c.ttlb_increase_pct[i]), f1(ci[0]), f1(ci[1]))
                    })
                    .join(" / ")
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {d} |",
                c.data_bytes / 1024,
                c.variant,
                c.ttlb.triple().map(f1).join(" / ")
            );
        }
        s.push('\n');
    }
    s
}

/// Fig. 4's cells, when the run holds more than one response size of its network (fig. 1 alone
/// runs its 0 KiB cell only).
fn fig4_cells(cells: &[Cell]) -> Vec<&Cell> {
    let f4: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.network == FIG4_NET && c.initcwnd == INITCWND)
        .collect();
    if f4.iter().any(|c| c.data_bytes != f4[0].data_bytes) {
        f4
    } else {
        vec![]
    }
}

/// Sorted TTLBs of the successful samples of `variant` at 200 KiB on `net`.
fn cdf_values(rows: &[Row], net: &str, variant: &str) -> Vec<f64> {
    let mut x: Vec<f64> = rows
        .iter()
        .filter(|r| {
            r.network == net
                && r.initcwnd == INITCWND
                && r.data_bytes == 200 * 1024
                && r.variant == variant
                && r.error.is_empty()
                && r.ttlb_ms.is_finite()
        })
        .map(|r| r.ttlb_ms)
        .collect();
    x.sort_by(f64::total_cmp);
    x
}

/// The figures' SVG files (only those whose cells the run holds).
pub fn plots(cells: &[Cell], rows: &[Row], opts: &RunOpts) -> anyhow::Result<()> {
    let write = |name: &str, svg: String| std::fs::write(opts.out.join(name), svg);
    let f1_nets = if fig1_networks(rows) < 2 {
        vec![]
    } else {
        fig_nets("fig1")
    };
    for rtt in [35.0, 200.0] {
        let here: Vec<&Cell> = cells
            .iter()
            .filter(|c| f1_nets.contains(&c.network) && c.rtt_ms == rtt && c.data_bytes == 0 && c.initcwnd == INITCWND)
            .collect();
        if here.is_empty() {
            continue;
        }
        let mut series = vec![];
        for (pi, dashed, tag) in [(0, false, "p50"), (2, true, "p90")] {
            for v in CHAINS {
                series.push(Series {
                    label: format!("{v} {tag}"),
                    points: here
                        .iter()
                        .filter(|c| c.variant == v)
                        .map(|c| (c.loss * 100.0, c.handshake_increase_pct[pi]))
                        .collect(),
                    dashed,
                });
            }
        }
        let title = format!("Fig. 1: handshake time increase, 1 Mbit/s, {rtt} ms, initcwnd 20");
        write(
            &format!("ttlb-pq-fig1-{rtt}ms.svg"),
            line_chart(&title, "loss per direction (%)", "handshake time increase (%)", &series),
        )?;
    }
    let agg = fig1_aggregate(rows);
    if agg.len() > 1 {
        let series: Vec<Series> = agg[1..]
            .iter()
            .map(|(v, _, _, inc, _)| Series {
                label: (*v).into(),
                points: vec![(50.0, inc[0]), (75.0, inc[1]), (90.0, inc[2])],
                dashed: false,
            })
            .collect();
        write(
            "ttlb-pq-fig1-aggregate.svg",
            line_chart(
                "Fig. 1: handshake time increase, all 1 Mbit/s cells pooled",
                "percentile",
                "handshake time increase (%)",
                &series,
            ),
        )?;
    }
    let f4 = fig4_cells(cells);
    if !f4.is_empty() {
        let mut series = vec![];
        for (dashed, tag) in [(false, "p50"), (true, "p90")] {
            for v in ["classical", "pq-16k", "pq-mldsa44", "pq-mldsa65"] {
                series.push(Series {
                    label: format!("{v} {tag}"),
                    points: f4
                        .iter()
                        .filter(|c| c.variant == v)
                        .map(|c| {
                            (
                                c.data_bytes as f64 / 1024.0,
                                if dashed { c.ttlb.p90 } else { c.ttlb.p50 },
                            )
                        })
                        .collect(),
                    dashed,
                });
            }
        }
        write(
            "ttlb-pq-fig4.svg",
            line_chart(
                "Fig. 4: TTLB, 1 Mbit/s, 200 ms, 10 % loss, initcwnd 20",
                "response size (KiB)",
                "TTLB (ms)",
                &series,
            ),
        )?;
    }
    let mut series = vec![];
    for net in fig_nets("fig6") {
        for (i, v) in FIG6.iter().enumerate() {
            let x = cdf_values(rows, &net, v);
            if x.is_empty() {
                continue;
            }
            let n = x.len() as f64;
            series.push(Series {
                label: format!("{net} {v}"),
                points: x.iter().enumerate().map(|(k, t)| (*t, (k + 1) as f64 / n)).collect(),
                dashed: i == 1,
            });
        }
    }
    if !series.is_empty() {
        write(
            "ttlb-pq-fig6-cdf.svg",
            line_chart(
                "Fig. 6: CDF of post-quantum TTLB, 200 KiB, 35 ms, initcwnd 20",
                "TTLB (ms)",
                "fraction of connections",
                &series,
            ),
        )?;
    }
    Ok(())
}

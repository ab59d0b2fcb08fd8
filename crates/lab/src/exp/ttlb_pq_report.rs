//! ttlb-pq's Markdown summary and SVG figures.

use super::ttlb_pq_model::{Cell, VARIANTS};
use super::RunOpts;
use crate::report::f1;
use crate::svg::{line_chart, Series};
use std::fmt::Write as _;

/// The summary: one table per network and initcwnd.
pub fn markdown(cells: &[Cell], opts: &RunOpts) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# ttlb-pq results ({})\n",
        if opts.quick { "quick profile" } else { "full profile" }
    );
    let _ = writeln!(s, "Times in ms (handshake = TCP connect + TLS handshake; TTLB from the start of the connect). `Δ` = increase over `classical` at p50/p75/p90. `n` = successful samples (errors in brackets). Bytes = IP bytes server→client per connection.\n");
    let mut groups: Vec<(String, u32)> = vec![];
    for c in cells {
        if !groups.contains(&(c.network.clone(), c.initcwnd)) {
            groups.push((c.network.clone(), c.initcwnd));
        }
    }
    for (net, cwnd) in groups {
        let _ = writeln!(s, "## {net}, initcwnd {cwnd}\n");
        let _ = writeln!(s, "| KiB | variant | n | handshake p50/p75/p90 | Δ handshake % | TTLB p50/p75/p90 | TTLB min–max | Δ TTLB % | bytes ↓ |");
        let _ = writeln!(s, "|---:|---|---:|---|---|---|---|---|---:|");
        for c in cells.iter().filter(|c| c.network == net && c.initcwnd == cwnd) {
            let tri = |p: [f64; 3]| p.map(f1).join(" / ");
            let err = if c.errors > 0 {
                format!(" ({})", c.errors)
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "| {} | {} | {}{} | {} | {} | {} | {}–{} | {} | {} |",
                c.data_bytes / 1024,
                c.variant,
                c.ttlb.n,
                err,
                tri(c.handshake.triple()),
                if c.variant == "classical" {
                    "".into()
                } else {
                    tri(c.handshake_increase_pct)
                },
                tri(c.ttlb.triple()),
                f1(c.ttlb.min),
                f1(c.ttlb.max),
                if c.variant == "classical" {
                    "".into()
                } else {
                    tri(c.ttlb_increase_pct)
                },
                c.down_bytes
            );
        }
        s.push('\n');
    }
    s
}

/// Per network and initcwnd: TTLB p50 by size, and the increase over classical.
pub fn plots(cells: &[Cell], opts: &RunOpts) -> anyhow::Result<()> {
    let mut groups: Vec<(String, u32)> = vec![];
    for c in cells {
        if !groups.contains(&(c.network.clone(), c.initcwnd)) {
            groups.push((c.network.clone(), c.initcwnd));
        }
    }
    for (net, cwnd) in groups {
        let here: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.network == net && c.initcwnd == cwnd)
            .collect();
        let series = |f: &dyn Fn(&Cell) -> f64, names: &[&str], dashed: bool, suffix: &str| -> Vec<Series> {
            names
                .iter()
                .map(|v| Series {
                    label: format!("{v}{suffix}"),
                    points: here
                        .iter()
                        .filter(|c| c.variant == *v)
                        .map(|c| (c.data_bytes as f64 / 1024.0, f(c)))
                        .collect(),
                    dashed,
                })
                .collect()
        };
        let all: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
        let ttlb = series(&|c| c.ttlb.p50, &all, false, " p50");
        let title = format!("TTLB p50, {net}, initcwnd {cwnd}");
        std::fs::write(
            opts.out.join(format!("ttlb-pq-{net}-cwnd{cwnd}-ttlb.svg")),
            line_chart(&title, "response size (KiB)", "TTLB (ms)", &ttlb),
        )?;
        let pq = &all[1..];
        let mut inc = series(&|c| c.ttlb_increase_pct[0], pq, false, " p50");
        inc.extend(series(&|c| c.ttlb_increase_pct[2], pq, true, " p90"));
        let title = format!("TTLB increase over classical, {net}, initcwnd {cwnd}");
        std::fs::write(
            opts.out.join(format!("ttlb-pq-{net}-cwnd{cwnd}-increase.svg")),
            line_chart(&title, "response size (KiB)", "TTLB increase (%)", &inc),
        )?;
    }
    Ok(())
}

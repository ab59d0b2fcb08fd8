//! ttlb-pq's Markdown summary (per network: percentiles, increases with their bootstrap
//! intervals, chains), the failed samples, and the per-network SVG figures.

use super::bootstrap::significant;
use super::ttlb_pq_lane::Failure;
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
    let _ = writeln!(s, "Times in ms (handshake = TCP connect + TLS handshake; TTLB from the start of the connect). `Δ` = increase over `classical` at p50/p75/p90, in % ; `*` marks an increase whose 95 % bootstrap interval (both samples resampled, 1,000 rounds; in `ttlb-pq.json`) excludes 0, i.e. a difference outside the run-to-run spread. `n` = successful samples (errors in brackets). Chain = DER bytes of leaf + intermediate received, and the leaf's key type. Bytes = IP bytes server→client per connection.\n");
    let mut groups: Vec<(String, u32)> = vec![];
    for c in cells {
        if !groups.contains(&(c.network.clone(), c.initcwnd)) {
            groups.push((c.network.clone(), c.initcwnd));
        }
    }
    for (net, cwnd) in groups {
        let _ = writeln!(s, "## {net}, initcwnd {cwnd}\n");
        let _ = writeln!(s, "| KiB | variant | chain | n | handshake p50/p75/p90 | Δ handshake % | TTLB p50/p75/p90 | TTLB min–max | Δ TTLB % | bytes ↓ |");
        let _ = writeln!(s, "|---:|---|---|---:|---|---|---|---|---|---:|");
        for c in cells.iter().filter(|c| c.network == net && c.initcwnd == cwnd) {
            let tri = |p: [f64; 3]| p.map(f1).join(" / ");
            let tri_ci = |p: [f64; 3], ci: [[f64; 2]; 3]| {
                [0, 1, 2]
                    .map(|i| format!("{}{}", f1(p[i]), if significant(ci[i]) { "*" } else { "" }))
                    .join(" / ")
            };
            let err = if c.errors > 0 {
                format!(" ({})", c.errors)
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} {} | {}{} | {} | {} | {} | {}–{} | {} | {} |",
                c.data_bytes / 1024,
                c.variant,
                c.chain_bytes,
                c.cert_type,
                c.ttlb.n,
                err,
                tri(c.handshake.triple()),
                if c.variant == "classical" {
                    "".into()
                } else {
                    tri_ci(c.handshake_increase_pct, c.handshake_increase_ci)
                },
                tri(c.ttlb.triple()),
                f1(c.ttlb.min),
                f1(c.ttlb.max),
                if c.variant == "classical" {
                    "".into()
                } else {
                    tri_ci(c.ttlb_increase_pct, c.ttlb_increase_ci)
                },
                c.down_bytes
            );
        }
        s.push('\n');
    }
    s
}

/// The failed samples, with what the packet tap saw of their connections.
pub fn failures_markdown(failures: &[Failure]) -> String {
    let mut s = String::from("## Failed samples\n\n");
    if failures.is_empty() {
        s.push_str("None.\n");
        return s;
    }
    let _ = writeln!(s, "Per failed sample, from the lane's packet tap (ms after the SYN reached the server; bytes = stream bytes delivered in order; `ok p50` = the same for the run's successful connections):\n");
    let _ = writeln!(s, "| network | KiB | variant | lane/sample | error | ↓ bytes (ok p50) | server FIN at / offset | server RST | client FIN / RST | last packet |");
    let _ = writeln!(s, "|---|---:|---|---|---|---|---|---|---|---:|");
    let ms = |x: Option<f64>| x.map_or_else(|| "–".to_string(), f1);
    for f in failures {
        let (down, fin, rst, cli, last) = match &f.trace {
            Some(t) => (
                t.down.bytes_in_order.to_string(),
                format!(
                    "{} / {}",
                    ms(t.down.fin_ms),
                    t.down.fin_offset.map_or_else(|| "–".into(), |o| o.to_string())
                ),
                ms(t.down.rst_ms),
                format!("{} / {}", ms(t.up.fin_ms), ms(t.up.rst_ms)),
                f1(t.last_ms),
            ),
            None => ("not captured".into(), "–".into(), "–".into(), "–".into(), "–".into()),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}/{} | {} | {down} ({}) | {fin} | {rst} | {cli} | {last} |",
            f.network,
            f.data_bytes / 1024,
            f.variant,
            f.lane,
            f.sample,
            f.error,
            f.ok_down_bytes_p50
        );
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
                .filter(|s| !s.points.is_empty())
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

//! tricks' Markdown summary.

use super::tricks::{Config, Trick};
use super::RunOpts;
use crate::report::f1;
use std::fmt::Write as _;

/// The rows, then every configuration.
pub fn markdown(tricks: &[Trick], configs: &[Config], opts: &RunOpts) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# tricks results ({})\n",
        if opts.quick { "quick profile" } else { "full profile" }
    );
    let _ = writeln!(
        s,
        "RTTs saved = (baseline TTFB p50 − trick TTFB p50) / RTT; TTFB counts from the start of the TCP connect.\n"
    );
    let _ = writeln!(s, "| network | trick | RTTs saved: expected | measured | TTFB p50 base → trick (ms) | TTLB p50 base → trick (ms) | note |");
    let _ = writeln!(s, "|---|---|---:|---:|---|---|---|");
    for t in tricks {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {} → {} | {} → {} | {} |",
            t.network,
            t.trick,
            t.expected_rtts_saved,
            t.measured_rtts_saved,
            f1(t.baseline_ttfb_p50_ms),
            f1(t.trick_ttfb_p50_ms),
            f1(t.baseline_ttlb_p50_ms),
            f1(t.trick_ttlb_p50_ms),
            t.note
        );
    }
    let _ = writeln!(s, "\n## Configurations\n\n| network | configuration | n | as labelled | TTFB p50/p75/p90 (ms) | TTFB p50 / RTT | TTLB p50 | handshake p50 | bytes ↓ |");
    let _ = writeln!(s, "|---|---|---:|---|---|---:|---:|---:|---:|");
    for c in configs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} / {} / {} | {:.2} | {} | {} | {} |",
            c.network,
            c.label,
            c.ttfb.n,
            c.as_labelled,
            f1(c.ttfb.p50),
            f1(c.ttfb.p75),
            f1(c.ttfb.p90),
            c.ttfb_rtts,
            f1(c.ttlb.p50),
            f1(c.handshake.p50),
            c.down_bytes
        );
    }
    s
}

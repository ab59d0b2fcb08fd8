//! tricks' Markdown summary.

use super::tricks_model::{Config, MessageRow, OcspSummary, Trick};
use super::RunOpts;
use crate::report::f1;
use std::fmt::Write as _;

/// The rows, the per-message OCSP table, then every configuration.
pub fn markdown(
    tricks: &[Trick],
    configs: &[Config],
    messages: &[MessageRow],
    ocsp: &[OcspSummary],
    opts: &RunOpts,
) -> String {
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
    ocsp_tables(&mut s, messages, ocsp);
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

/// Seed 003's table: each handshake message's delivery time, OCSP staple off vs on.
fn ocsp_tables(s: &mut String, messages: &[MessageRow], ocsp: &[OcspSummary]) {
    let _ = writeln!(
        s,
        "\n## OCSP staple per handshake message (seed 003)\n\n\
         Fresh TLS 1.2 full handshakes (no session ID, no ticket), site `plain` (staple off) vs \
         `staple` (on), timed from the forwarder's packet tap: each message's time is when its last \
         byte was delivered to the receiver, counted from the SYN's delivery to the server (ms, and \
         RTTs of the emulated link). Bytes: handshake messages with their 4-byte header; \
         ChangeCipherSpec / Finished / ApplicationData: the record's payload (first record of its \
         kind and direction). The handshake is done when the server's Finished reaches the client.\n"
    );
    let _ = writeln!(s, "| network | conns off / on | n with CertificateStatus off / on | CertificateStatus bytes | bytes ↓ per conn off → on (IP) | handshake done p50 off → on (ms) | extra p50 (ms / RTT) | p90 off → on (ms) | capture drops |");
    let _ = writeln!(s, "|---|---|---|---:|---|---|---|---|---:|");
    for o in ocsp {
        let d = o.handshake_p50_on_ms - o.handshake_p50_off_ms;
        let _ = writeln!(
            s,
            "| {} | {} / {} | {} / {} | {} | {} → {} (+{}) | {} → {} | {:+.1} / {:+.3} | {} → {} | {} |",
            o.network,
            o.conns_off,
            o.conns_on,
            o.with_status_off,
            o.with_status_on,
            f0(o.status_bytes),
            o.down_bytes_off,
            o.down_bytes_on,
            o.down_bytes_on as i64 - o.down_bytes_off as i64,
            f1(o.handshake_p50_off_ms),
            f1(o.handshake_p50_on_ms),
            d,
            d / o.rtt_ms,
            f1(o.handshake_p90_off_ms),
            f1(o.handshake_p90_on_ms),
            o.capture_dropped
        );
    }
    let mut net = "";
    for m in messages {
        if m.network != net {
            net = &m.network;
            let _ = writeln!(s, "\n### {net} (RTT {} ms)\n", m.rtt_ms);
            let _ = writeln!(s, "| message | dir | n off / on | bytes off / on | p50 off → on (ms) | Δ p50 (ms) | p50 off → on (RTTs) | p90 off → on (ms) |");
            let _ = writeln!(s, "|---|---|---|---|---|---:|---|---|");
        }
        let r = |x: f64| {
            if x.is_finite() {
                format!("{:.2}", x / m.rtt_ms)
            } else {
                "–".into()
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} / {} | {} / {} | {} → {} | {} | {} → {} | {} → {} |",
            m.message,
            m.dir,
            m.n_off,
            m.n_on,
            f0(m.bytes_off),
            f0(m.bytes_on),
            f1(m.p50_off_ms),
            f1(m.p50_on_ms),
            f1(m.delta_p50_ms),
            r(m.p50_off_ms),
            r(m.p50_on_ms),
            f1(m.p90_off_ms),
            f1(m.p90_on_ms)
        );
    }
}

fn f0(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.0}")
    } else {
        "–".into()
    }
}

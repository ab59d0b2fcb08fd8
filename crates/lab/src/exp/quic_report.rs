//! The quic experiment's report: `quic.md` (per network, h3 against h2, the anti-amplification
//! sweep, the failed samples) and the SVG figures (handshake round trips and TTLB against loss,
//! the change of TTLB, handshake round trips against chain size).

use super::bootstrap::significant;
use super::quic_model::{AmpCell, Cell, Comparison, Row, Transport, CLASSICAL, HYBRID, RATE_MBPS, SWEEP_RTT_MS};
use super::ttlb_pq_lane::Failure;
use super::ttlb_pq_report;
use crate::report::f1;
use crate::svg::{line_chart, Series};
use std::fmt::Write as _;
use std::path::Path;

/// How the run went.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The quick profile.
    pub quick: bool,
    /// Samples per cell and transport.
    pub samples: usize,
    /// Lanes of the lossy cells.
    pub lanes: usize,
    /// Wall time, s.
    pub wall_s: f64,
    /// The gateway's QUIC congestion controller (`[http3] congestion_control`).
    pub quic_cc: String,
    /// The kernel's TCP congestion controller (`net.ipv4.tcp_congestion_control`).
    pub tcp_cc: String,
}

/// `a [lo–hi]`.
fn with_ci(x: f64, ci: [f64; 2]) -> String {
    if ci[0].is_finite() {
        format!("{} [{}–{}]", f1(x), f1(ci[0]), f1(ci[1]))
    } else {
        f1(x)
    }
}

/// A change with its interval, `*` when the interval excludes 0.
fn change(p: f64, ci: [f64; 2]) -> String {
    if !p.is_finite() {
        return "–".into();
    }
    format!(
        "{:+.0}{} [{:+.0}, {:+.0}]",
        p,
        if significant(ci) { "*" } else { "" },
        ci[0],
        ci[1]
    )
}

fn loss_pct(loss: f64) -> String {
    format!("{}", (loss * 1000.0).round() / 10.0)
}

/// The summary.
pub fn markdown(
    info: &RunInfo,
    rows: &[Row],
    failures: &[Failure],
    cells: &[Cell],
    comps: &[Comparison],
    amp: &[AmpCell],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# quic results ({})\n",
        if info.quick { "quick profile" } else { "full profile" }
    );
    let _ = writeln!(
        s,
        "HTTP/2 over TCP + TLS 1.3 (`h2/TCP`, `tlsgate probe --alpn h2`) against HTTP/3 over QUIC \
         (`h3/QUIC`, `tlsgate probe --h3`), every connection a full handshake (`--no-ticket`) \
         offering {HYBRID}, through the lab's emulated link ({RATE_MBPS} Mbit/s each way; loss per \
         packet in each direction) to one gateway serving both (`[http3] retry = \"never\"`). \
         Congestion control: QUIC `{}` (the gateway's), TCP `{}` (the kernel's). \
         {} samples per cell and transport; lossy cells over {} lane(s); {:.0} s in all.\n",
        info.quic_cc, info.tcp_cc, info.samples, info.lanes, info.wall_s
    );
    let _ = writeln!(
        s,
        "Times in ms from the start of the connection: handshake = TCP connect + TLS handshake, or \
         the QUIC handshake; TTFB = the response head; TTLB = the last body byte. Medians with \
         their 95 % bootstrap interval [lo–hi], and in RTTs of the emulated link. `n` = successful \
         samples, failures in brackets (none is dropped from the counts).\n"
    );
    let mut nets: Vec<&str> = vec![];
    for c in cells {
        if !nets.contains(&c.network.as_str()) {
            nets.push(&c.network);
        }
    }
    for net in &nets {
        let here: Vec<&Cell> = cells.iter().filter(|c| c.network == *net).collect();
        let Some(first) = here.first() else { continue };
        let _ = writeln!(
            s,
            "## {net}: {} ms RTT, {} % loss\n",
            first.rtt_ms,
            loss_pct(first.loss)
        );
        let _ = writeln!(s, "| chain | KiB | transport | n | handshake p50 [95 % CI] | RTTs | TTFB p50 [95 % CI] | RTTs | TTLB p50 [95 % CI] | RTTs | TTLB p90 | bytes ↓ |");
        let _ = writeln!(s, "|---|---:|---|---:|---|---:|---|---:|---|---:|---:|---:|");
        for c in here {
            let mut n = c.ttlb.n.to_string();
            if c.errors > 0 {
                let _ = write!(n, " ({})", c.errors);
            }
            if c.mislabelled > 0 {
                let _ = write!(n, " [{} not {}]", c.mislabelled, c.transport.name());
            }
            let _ = writeln!(
                s,
                "| {} ({} B) | {} | {} | {n} | {} | {:.2} | {} | {:.2} | {} | {:.1} | {} | {} |",
                c.chain,
                c.chain_bytes,
                c.data_bytes / 1024,
                c.transport.label(),
                with_ci(c.handshake.p50, c.handshake_p50_ci),
                c.p50_rtts[0],
                with_ci(c.ttfb.p50, c.ttfb_p50_ci),
                c.p50_rtts[1],
                with_ci(c.ttlb.p50, c.ttlb_p50_ci),
                c.p50_rtts[2],
                f1(c.ttlb.p90),
                c.down_bytes
            );
        }
        s.push('\n');
    }
    s.push_str(&comparison_markdown(comps));
    s.push_str(&sweep_markdown(amp));
    s.push_str(&failures_markdown(rows, failures));
    s
}

/// h3 against h2.
fn comparison_markdown(comps: &[Comparison]) -> String {
    let mut s = String::from("## h3/QUIC against h2/TCP\n\n");
    if comps.is_empty() {
        s.push_str("No cell ran both.\n\n");
        return s;
    }
    let _ = writeln!(
        s,
        "Change of h3's median over h2's, % (negative: QUIC faster), with the 95 % bootstrap \
         interval of the change (both samples resampled, 1,000 rounds); `*` = the interval excludes \
         0. Last column: the same at p90.\n"
    );
    let _ = writeln!(
        s,
        "| network | chain | KiB | handshake Δ % | TTFB Δ % | TTLB Δ % | TTLB Δ p90 % |"
    );
    let _ = writeln!(s, "|---|---|---:|---|---|---|---|");
    for c in comps {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.network,
            c.chain,
            c.data_bytes / 1024,
            change(c.handshake_pct[0], c.handshake_ci[0]),
            change(c.ttfb_pct[0], c.ttfb_ci[0]),
            change(c.ttlb_pct[0], c.ttlb_ci[0]),
            change(c.ttlb_pct[2], c.ttlb_ci[2]),
        );
    }
    s.push('\n');
    s
}

/// The anti-amplification sweep.
fn sweep_markdown(amp: &[AmpCell]) -> String {
    let mut s = String::from("## Anti-amplification: when the server's first flight does not fit\n\n");
    if amp.is_empty() {
        s.push_str("Not run.\n\n");
        return s;
    }
    let _ = writeln!(
        s,
        "Full handshakes, 1 KiB responses, {SWEEP_RTT_MS} ms RTT, no loss, chains padded to the \
         size shown, offering {CLASSICAL} or {HYBRID}. From the forwarder's packet tap, per \
         connection (medians): the client's first flight (QUIC: its Initial datagrams, UDP payload \
         bytes, padded to ≥ 1,200 each; TCP: the ClientHello), what the server sent before the \
         client's answer reached it (QUIC: at most 3× the client's bytes until the address is \
         validated, RFC 9000 §8.1; TCP: initcwnd, 10 segments), its whole handshake flight (QUIC: \
         Initial + Handshake packets; TCP: payload before the client's Finished) and what of it \
         was held back until the client answered; server rounds: how many round trips that \
         flight took (a round ends when the client's answer to its first packet reaches the \
         server). Extra RTTs: the median handshake over the transport's minimum (QUIC 1, TCP 2), \
         rounded. Ratio: the server's first flight over the client's, as bytes on the wire and \
         as quiche charges them (zero padding after a datagram's packets not counted). Verdict: \
         `3× limit` = bytes held back with the first flight (padding aside) within one datagram \
         of 3× the client's, `…, then cwnd` = and a third round (the congestion window); `cwnd` \
         = held back below the limit; `initcwnd` = TCP held back; `fits` = the whole flight went \
         at once.\n"
    );
    let _ = writeln!(s, "| transport | group | chain KiB (B) | n | handshake RTTs p50 [95 % CI] | extra RTTs | server rounds | client first flight B (pkts) | 3× | server first flight B (padding) | server handshake flight B | held back B | QUIC max ratio wire / charged | held back / traced | verdict |");
    let _ = writeln!(s, "|---|---|---|---:|---|---:|---:|---|---:|---|---:|---:|---|---|---|");
    for c in amp {
        let mut n = c.handshake_rtts.n.to_string();
        if c.errors > 0 {
            let _ = write!(n, " ({})", c.errors);
        }
        let quic = c.transport == Transport::H3;
        let triple = if quic {
            format!("{:.0}", 3.0 * c.client_first_bytes)
        } else {
            "–".into()
        };
        let ratios = if quic {
            format!("{:.2} / {:.2}", c.ratio_max, c.charged_ratio_max)
        } else {
            "–".into()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} ({}) | {n} | {} [{}–{}] | {:.0} | {:.0} | {:.0} ({:.0}) | {triple} | {:.0} ({:.0}) | {:.0} | {:.0} | {ratios} | {}/{} | {} |",
            c.transport.label(),
            c.group,
            c.chain_kib,
            c.chain_bytes,
            format_args!("{:.2}", c.handshake_rtts.p50),
            format_args!("{:.2}", c.handshake_rtts_ci[0]),
            format_args!("{:.2}", c.handshake_rtts_ci[1]),
            c.extra_rtts,
            c.server_rounds,
            c.client_first_bytes,
            c.client_first_packets,
            c.server_first_bytes,
            c.server_first_padding,
            c.server_handshake_bytes,
            c.server_handshake_bytes_later,
            c.held_back,
            c.traced,
            c.verdict
        );
    }
    s.push('\n');
    s
}

/// Failed samples per cell, with their distinct errors, and what the packet tap saw of each
/// failed TCP connection (ttlb-pq's table).
fn failures_markdown(rows: &[Row], failures: &[Failure]) -> String {
    let mut s = String::from("## Failed samples\n\n");
    let mut keys: Vec<(&str, &str, usize, Transport)> = vec![];
    for r in rows.iter().filter(|r| !r.error.is_empty()) {
        let k = (r.network.as_str(), r.chain.as_str(), r.data_bytes, r.transport);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if keys.is_empty() {
        s.push_str("None.\n");
        return s;
    }
    let _ = writeln!(s, "| network | chain | KiB | transport | failed / run | errors |");
    let _ = writeln!(s, "|---|---|---:|---|---:|---|");
    for (net, chain, size, t) in keys {
        let rs: Vec<&Row> = rows
            .iter()
            .filter(|r| r.network == net && r.chain == chain && r.data_bytes == size && r.transport == t)
            .collect();
        let mut errs: Vec<String> = vec![];
        for r in rs.iter().filter(|r| !r.error.is_empty()) {
            let e: String = r.error.chars().take(120).collect::<String>().replace('|', "/");
            if !errs.contains(&e) {
                errs.push(e);
            }
        }
        let failed = rs.iter().filter(|r| !r.error.is_empty()).count();
        let _ = writeln!(
            s,
            "| {net} | {chain} | {} | {} | {failed} / {} | {} |",
            size / 1024,
            t.label(),
            rs.len(),
            errs.join("; ")
        );
    }
    if !failures.is_empty() {
        s.push_str("\n### What the packet tap saw of them\n\n");
        s.push_str("Failed QUIC samples are listed without a trace (the tracer reads TCP).\n\n");
        s.push_str(&ttlb_pq_report::failures_markdown(failures).replacen("## Failed samples\n\n", "", 1));
    }
    s
}

/// The figures.
pub fn plots(out: &Path, cells: &[Cell], comps: &[Comparison], amp: &[AmpCell]) -> anyhow::Result<()> {
    let mut rtts: Vec<f64> = vec![];
    let mut chains: Vec<&str> = vec![];
    let mut sizes: Vec<usize> = vec![];
    for c in cells {
        if !rtts.contains(&c.rtt_ms) {
            rtts.push(c.rtt_ms);
        }
        if !chains.contains(&c.chain.as_str()) {
            chains.push(&c.chain);
        }
        if !sizes.contains(&c.data_bytes) {
            sizes.push(c.data_bytes);
        }
    }
    // One series per transport, RTT and chain, against loss: h3 solid, h2 dashed (same colour).
    let by_loss = |size: usize, f: &dyn Fn(&Cell) -> f64| -> Vec<Series> {
        let mut v = vec![];
        for t in [Transport::H3, Transport::H2] {
            for &rtt in &rtts {
                for &chain in &chains {
                    let points: Vec<(f64, f64)> = cells
                        .iter()
                        .filter(|c| c.transport == t && c.rtt_ms == rtt && c.chain == chain && c.data_bytes == size)
                        .map(|c| (c.loss * 100.0, f(c)))
                        .collect();
                    if !points.is_empty() {
                        v.push(Series {
                            label: format!("{} {rtt} ms {chain}", t.name()),
                            points,
                            dashed: t == Transport::H2,
                        });
                    }
                }
            }
        }
        v
    };
    if let Some(&small) = sizes.iter().min() {
        std::fs::write(
            out.join("quic-handshake.svg"),
            line_chart(
                "Full handshake p50, in RTTs (h3/QUIC solid, h2/TCP dashed)",
                "loss per direction (%)",
                "handshake (RTTs)",
                &by_loss(small, &|c| c.p50_rtts[0]),
            ),
        )?;
    }
    for &size in &sizes {
        std::fs::write(
            out.join(format!("quic-ttlb-{}k.svg", size / 1024)),
            line_chart(
                &format!("TTLB p50, {} KiB response (h3/QUIC solid, h2/TCP dashed)", size / 1024),
                "loss per direction (%)",
                "TTLB (ms)",
                &by_loss(size, &|c| c.ttlb.p50),
            ),
        )?;
    }
    let mut change = vec![];
    for &size in &sizes {
        for &rtt in &rtts {
            for &chain in &chains {
                let points: Vec<(f64, f64)> = comps
                    .iter()
                    .filter(|c| c.rtt_ms == rtt && c.chain == chain && c.data_bytes == size)
                    .map(|c| (c.loss * 100.0, c.ttlb_pct[0]))
                    .collect();
                if !points.is_empty() {
                    change.push(Series {
                        label: format!("{} KiB {rtt} ms {chain}", size / 1024),
                        points,
                        dashed: false,
                    });
                }
            }
        }
    }
    std::fs::write(
        out.join("quic-ttlb-change.svg"),
        line_chart(
            "TTLB p50 of h3/QUIC against h2/TCP (negative: QUIC faster)",
            "loss per direction (%)",
            "change of TTLB p50 (%)",
            &change,
        ),
    )?;
    if !amp.is_empty() {
        let mut series = vec![];
        for t in [Transport::H3, Transport::H2] {
            for group in [CLASSICAL, HYBRID] {
                let points: Vec<(f64, f64)> = amp
                    .iter()
                    .filter(|c| c.transport == t && c.group == group)
                    .map(|c| (c.chain_kib as f64, c.handshake_rtts.p50))
                    .collect();
                series.push(Series {
                    label: format!("{} {group}", t.label()),
                    points,
                    dashed: t == Transport::H2,
                });
            }
        }
        std::fs::write(
            out.join("quic-amplification.svg"),
            line_chart(
                &format!("Full handshake p50 vs chain size, {SWEEP_RTT_MS} ms RTT, no loss"),
                "certificate chain (KiB)",
                "handshake (RTTs)",
                &series,
            ),
        )?;
    }
    Ok(())
}

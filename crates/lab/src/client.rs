//! The client side: `tlsgate probe --json` (over TCP, or QUIC with `--h3`) and `tlsgate bench
//! --json` run inside namespace A, their per-connection timings read back.

use crate::netns::Netns;
use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// What a probe connection is asked to do.
#[derive(Debug, Clone, Default)]
pub struct ProbeOpts {
    /// SNI (selects the site/chain).
    pub sni: String,
    /// Path of the GET.
    pub path: String,
    /// `--groups`.
    pub groups: Option<String>,
    /// `--tls 1.2|1.3`.
    pub tls: Option<String>,
    /// Connections in one probe run (each offers the newest session unless `no_ticket`).
    pub connections: usize,
    /// `--no-ticket`.
    pub no_ticket: bool,
    /// `--early-data`.
    pub early_data: bool,
    /// CA to verify against.
    pub cacert: Option<PathBuf>,
    /// `--mldsa`: offer the ML-DSA signature schemes first.
    pub mldsa: bool,
    /// `--alpn` (e.g. `h2`; the probe's default is `http/1.1`). Not used with `h3`.
    pub alpn: Option<String>,
    /// `--h3`: over QUIC and HTTP/3 (UDP, the same port) instead of TCP.
    pub h3: bool,
}

/// One connection's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConnSample {
    /// 1-based index in its probe run.
    pub index: usize,
    /// Error, if it failed.
    pub error: Option<String>,
    /// Negotiated version.
    pub version: String,
    /// Key-exchange group.
    pub group: String,
    /// Resumed.
    pub resumed: bool,
    /// 0-RTT data accepted.
    pub early_data_accepted: bool,
    /// Certificate chain bytes received.
    pub chain_bytes: usize,
    /// Leaf key type (`ECDSA`, `ML-DSA-44`, ...).
    pub cert_type: String,
    /// The server's signature algorithm.
    pub sigalg: String,
    /// CertificateVerify signature bytes where the algorithm fixes them (ML-DSA, RSA), else 0.
    pub signature_bytes: usize,
    /// An OCSP staple was received.
    pub stapled: bool,
    /// ALPN protocol selected (`h3` over QUIC, `h2`, `http/1.1`).
    pub alpn: String,
    /// TCP connect, ms (0 over QUIC).
    pub connect_ms: f64,
    /// TLS handshake (after connect), ms; over QUIC the QUIC handshake.
    pub handshake_ms: f64,
    /// Time to first response byte from the start, ms.
    pub ttfb_ms: f64,
    /// Time to last byte from the start, ms.
    pub ttlb_ms: f64,
}

/// Runs `exe probe` in `ns` against `addr`.
pub fn probe(exe: &Path, ns: &Netns, addr: SocketAddr, o: &ProbeOpts) -> anyhow::Result<Vec<ConnSample>> {
    let mut cmd = ns.command(exe);
    cmd.arg("probe")
        .arg(addr.to_string())
        .arg("--json")
        .arg("--timeout")
        .arg("60s");
    cmd.arg("-n")
        .arg(o.connections.max(1).to_string())
        .arg("--sni")
        .arg(&o.sni)
        .arg("--path")
        .arg(&o.path);
    if let Some(g) = &o.groups {
        cmd.arg("--groups").arg(g);
    }
    if let Some(t) = &o.tls {
        cmd.arg("--tls").arg(t);
    }
    if o.no_ticket {
        cmd.arg("--no-ticket");
    }
    if o.early_data {
        cmd.arg("--early-data");
    }
    if o.mldsa {
        cmd.arg("--mldsa");
    }
    if o.h3 {
        cmd.arg("--h3");
    } else if let Some(alpn) = &o.alpn {
        cmd.arg("--alpn").arg(alpn);
    }
    if let Some(ca) = &o.cacert {
        cmd.arg("--cacert").arg(ca);
    }
    let out = cmd.output().context("cannot run tlsgate probe")?;
    let v: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("probe printed no JSON: {}", String::from_utf8_lossy(&out.stderr)))?;
    let conns = v["connections"].as_array().context("no connections in probe JSON")?;
    let ms = |t: &Value, k: &str| t[k].as_f64().unwrap_or(f64::NAN) / 1e3;
    Ok(conns
        .iter()
        .map(|c| {
            let t = &c["timings_us"];
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            ConnSample {
                index: c["index"].as_u64().unwrap_or(0) as usize,
                error: c["error"].as_str().map(str::to_string),
                version: s("version"),
                group: s("group"),
                resumed: c["resumed"].as_bool().unwrap_or(false),
                early_data_accepted: c["early_data"]["accepted"].as_bool().unwrap_or(false),
                chain_bytes: c["chain_bytes"].as_u64().unwrap_or(0) as usize,
                cert_type: s("cert_type"),
                sigalg: s("sigalg"),
                signature_bytes: c["signature_bytes"].as_u64().unwrap_or(0) as usize,
                stapled: c["ocsp"]["present"].as_bool().unwrap_or(false),
                alpn: s("alpn"),
                connect_ms: ms(t, "connect"),
                handshake_ms: ms(t, "handshake"),
                ttfb_ms: ms(t, "ttfb"),
                ttlb_ms: ms(t, "ttlb"),
            }
        })
        .collect())
}

/// Percentiles (ms) of `tlsgate bench` phases.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchResult {
    /// Requests completed.
    pub count: u64,
    /// Errors.
    pub errors: u64,
    /// TTFB p50 / p90, ms.
    pub ttfb_p50_ms: f64,
    /// TTFB p90.
    pub ttfb_p90_ms: f64,
    /// TTLB p50.
    pub ttlb_p50_ms: f64,
    /// Connect p50.
    pub connect_p50_ms: f64,
}

/// A `tlsgate bench --new-conn` run.
#[derive(Debug, Clone)]
pub struct BenchOpts<'a> {
    /// URL (host = SNI).
    pub url: &'a str,
    /// Where to connect.
    pub addr: SocketAddr,
    /// SNI.
    pub sni: &'a str,
    /// Connections.
    pub n: usize,
    /// `--tfo`.
    pub tfo: bool,
    /// `--groups`.
    pub groups: Option<&'a str>,
}

/// Runs `exe bench --new-conn -c 1 -n N` (fresh full handshakes: no tickets, no session IDs) in
/// `ns`, optionally with `--tfo`.
pub fn bench_new_conn(exe: &Path, ns: &Netns, dir: &Path, o: &BenchOpts<'_>) -> anyhow::Result<BenchResult> {
    let (url, addr, sni, n, tfo) = (o.url, o.addr, o.sni, o.n, o.tfo);
    let json = dir.join(format!("bench-{}.json", rand::random::<u32>()));
    let mut cmd = ns.command(exe);
    cmd.args([
        "bench",
        "--new-conn",
        "-c",
        "1",
        "--no-ticket",
        "--no-session-id",
        "--timeout",
        "60s",
    ])
    .arg("-n")
    .arg(n.to_string())
    .arg("--sni")
    .arg(sni)
    .arg("--connect-to")
    .arg(addr.to_string())
    .arg("--json")
    .arg(&json)
    .arg(url);
    if tfo {
        cmd.arg("--tfo");
    }
    if let Some(g) = o.groups {
        cmd.arg("--groups").arg(g);
    }
    let out = cmd.output().context("cannot run tlsgate bench")?;
    if !out.status.success() {
        bail!("bench failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let _ = std::fs::remove_file(&json);
    let l = &v["latency_us"];
    let ms = |a: &str, b: &str| l[a][b].as_f64().unwrap_or(f64::NAN) / 1e3;
    Ok(BenchResult {
        count: v["requests"].as_u64().unwrap_or(0),
        errors: v["errors_total"].as_u64().unwrap_or(0),
        ttfb_p50_ms: ms("ttfb", "p50"),
        ttfb_p90_ms: ms("ttfb", "p90"),
        ttlb_p50_ms: ms("ttlb", "p50"),
        connect_p50_ms: ms("connect", "p50"),
    })
}

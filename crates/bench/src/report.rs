//! Counters and latency histograms per thread, merged into a [`Summary`] that prints like wrk
//! and serialises to JSON.

use crate::args::{Limit, Plan};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// Kinds of failure, as report keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorKind {
    /// TCP connect failed.
    Connect,
    /// The TLS handshake failed.
    Handshake,
    /// Writing the request failed.
    Write,
    /// Reading the response failed.
    Read,
    /// The server closed before a complete response.
    Closed,
    /// The response was not HTTP/1.1.
    Http,
    /// A step took longer than `--timeout`.
    Timeout,
    /// A response status outside 2xx/3xx.
    Status,
}

impl ErrorKind {
    /// Report key.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Handshake => "handshake",
            ErrorKind::Write => "write",
            ErrorKind::Read => "read",
            ErrorKind::Closed => "closed",
            ErrorKind::Http => "http",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Status => "status",
        }
    }
}

/// What a handshake negotiated: (version, cipher, group; `-` when none, as in a TLS 1.2 resumption).
pub type Negotiated = (&'static str, &'static str, &'static str);

fn histogram() -> Histogram<u64> {
    // Microseconds, 1 µs .. 1 h, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// What one thread measured.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Completed requests (a response was read completely).
    pub requests: u64,
    /// Completed TLS handshakes.
    pub handshakes: u64,
    /// Handshakes the client offered a session in.
    pub offered: u64,
    /// Handshakes that resumed a session (`SSL_session_reused` on the client).
    pub resumed: u64,
    /// Bytes of responses read.
    pub bytes: u64,
    /// Connections held open at once in hold mode.
    pub held: u64,
    /// Errors by kind.
    pub errors: BTreeMap<ErrorKind, u64>,
    /// The first error message of each kind.
    pub first_error: BTreeMap<ErrorKind, String>,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    /// Handshakes by (version, cipher, group).
    pub negotiated: BTreeMap<Negotiated, u64>,
    /// Resumed handshakes by mechanism: `session_id`, `ticket` (TLS 1.2), `tls13_psk`.
    pub resumed_by: BTreeMap<&'static str, u64>,
    /// Handshakes by the server's signature algorithm (full handshakes; none on a resumption).
    pub sigalgs: BTreeMap<&'static str, u64>,
    /// TCP connect latency (µs).
    pub connect: Histogram<u64>,
    /// TLS handshake latency (µs).
    pub handshake: Histogram<u64>,
    /// Request latency (µs): time to the last byte.
    pub request: Histogram<u64>,
    /// Time to the first response byte (µs), from the same start as `request`.
    pub ttfb: Histogram<u64>,
    /// Time from the start to this thread's last operation.
    pub elapsed: Duration,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            requests: 0,
            handshakes: 0,
            offered: 0,
            resumed: 0,
            bytes: 0,
            held: 0,
            errors: BTreeMap::new(),
            first_error: BTreeMap::new(),
            status: BTreeMap::new(),
            negotiated: BTreeMap::new(),
            resumed_by: BTreeMap::new(),
            sigalgs: BTreeMap::new(),
            connect: histogram(),
            handshake: histogram(),
            request: histogram(),
            ttfb: histogram(),
            elapsed: Duration::ZERO,
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

impl Stats {
    /// Counts an error.
    pub fn error(&mut self, kind: ErrorKind) {
        *self.errors.entry(kind).or_default() += 1;
    }

    /// Counts an error and keeps its message if it is the first of its kind.
    pub fn error_with(&mut self, kind: ErrorKind, message: &dyn std::fmt::Display) {
        self.error(kind);
        self.first_error.entry(kind).or_insert_with(|| message.to_string());
    }

    /// Records a TCP connect time.
    pub fn record_connect(&mut self, d: Duration) {
        self.connect.saturating_record(micros(d));
    }

    /// Records a handshake.
    pub fn record_handshake(&mut self, d: Duration, offered: bool, resumed: bool, negotiated: Negotiated) {
        self.handshakes += 1;
        self.offered += u64::from(offered);
        self.resumed += u64::from(resumed);
        self.handshake.saturating_record(micros(d));
        *self.negotiated.entry(negotiated).or_default() += 1;
    }

    /// Counts a resumption by its mechanism.
    pub fn record_resumption(&mut self, mechanism: &'static str) {
        *self.resumed_by.entry(mechanism).or_default() += 1;
    }

    /// Counts a handshake the server signed with `sigalg` (BoringSSL's name).
    pub fn record_sigalg(&mut self, sigalg: &'static str) {
        *self.sigalgs.entry(sigalg).or_default() += 1;
    }

    /// Records a time to first byte.
    pub fn record_ttfb(&mut self, d: Duration) {
        self.ttfb.saturating_record(micros(d));
    }

    /// Records a complete response.
    pub fn record_request(&mut self, d: Duration, status: u16, bytes: usize) {
        self.requests += 1;
        self.bytes += bytes as u64;
        self.request.saturating_record(micros(d));
        *self.status.entry(status).or_default() += 1;
        if !(200..400).contains(&status) {
            self.error(ErrorKind::Status);
        }
    }

    /// Adds another thread's figures.
    pub fn merge(&mut self, other: &Stats) {
        self.requests += other.requests;
        self.handshakes += other.handshakes;
        self.offered += other.offered;
        self.resumed += other.resumed;
        self.bytes += other.bytes;
        self.held += other.held;
        for (k, v) in &other.errors {
            *self.errors.entry(*k).or_default() += v;
        }
        for (k, v) in &other.first_error {
            self.first_error.entry(*k).or_insert_with(|| v.clone());
        }
        for (k, v) in &other.status {
            *self.status.entry(*k).or_default() += v;
        }
        for (k, v) in &other.negotiated {
            *self.negotiated.entry(*k).or_default() += v;
        }
        for (k, v) in &other.resumed_by {
            *self.resumed_by.entry(*k).or_default() += v;
        }
        for (k, v) in &other.sigalgs {
            *self.sigalgs.entry(*k).or_default() += v;
        }
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.connect.add(&other.connect);
        let _ = self.handshake.add(&other.handshake);
        let _ = self.request.add(&other.request);
        let _ = self.ttfb.add(&other.ttfb);
        self.elapsed = self.elapsed.max(other.elapsed);
    }
}

/// Percentiles of one latency, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self {
                count: 0,
                mean: 0.0,
                p50: 0,
                p90: 0,
                p99: 0,
                p999: 0,
                max: 0,
            };
        }
        Self {
            count: h.len(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// The latencies, one per phase.
#[derive(Debug, Clone, Serialize)]
pub struct Latencies {
    /// TCP connect.
    pub connect: Latency,
    /// TLS handshake (after connect).
    pub handshake: Latency,
    /// Time to first byte: from the request's start (its write; in new-conn mode the start of the
    /// connect; with `--rate` its intended send time) to the first response byte.
    pub ttfb: Latency,
    /// Time to last byte, from the same start.
    pub ttlb: Latency,
    /// The request latency: the same figures as `ttlb` (kept under its older name).
    pub request: Latency,
}

/// The whole distribution of one latency: (percentile, µs) pairs, HdrHistogram's percentile
/// iteration with 5 ticks per half distance (what wrk2 prints with `--latency`).
pub type Distribution = Vec<(f64, u64)>;

fn distribution(h: &Histogram<u64>) -> Distribution {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(5)
        .map(|v| ((v.quantile_iterated_to() * 1e6).round() / 1e4, v.value_iterated_to()))
        .collect()
}

/// Full distributions for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Histograms {
    /// TCP connect.
    pub connect: Distribution,
    /// TLS handshake.
    pub handshake: Distribution,
    /// Time to first byte.
    pub ttfb: Distribution,
    /// Time to last byte.
    pub ttlb: Distribution,
}

/// The result of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Target URL.
    pub url: String,
    /// Mode name.
    pub mode: &'static str,
    /// Threads.
    pub threads: usize,
    /// Connections.
    pub connections: usize,
    /// Protocol pinned (`1.2`, `1.3` or `any`).
    pub tls: String,
    /// Session-ID resumption allowed.
    pub session_id: bool,
    /// Tickets allowed.
    pub tickets: bool,
    /// Wall time of the run in seconds.
    pub elapsed_s: f64,
    /// Completed requests.
    pub requests: u64,
    /// Completed handshakes.
    pub handshakes: u64,
    /// Handshakes that offered a session.
    pub resumption_offered: u64,
    /// Handshakes that resumed (reported by the client's TLS stack).
    pub resumed: u64,
    /// Full handshakes.
    pub full: u64,
    /// Resumed handshakes by mechanism (`session_id`, `ticket`, `tls13_psk`): TLS 1.3 resumption
    /// is `tls13_psk`; a TLS 1.2 one is `ticket` when the resumed session carries a ticket.
    pub resumed_by: BTreeMap<&'static str, u64>,
    /// `resumed / handshakes` (0 without handshakes).
    pub resumed_fraction: f64,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Handshakes per second.
    pub handshakes_per_s: f64,
    /// Response bytes read.
    pub bytes_received: u64,
    /// Connections held at once (hold mode).
    pub held: u64,
    /// Errors by kind.
    pub errors: BTreeMap<&'static str, u64>,
    /// All errors.
    pub errors_total: u64,
    /// The first error message of each kind.
    pub first_error: BTreeMap<&'static str, String>,
    /// Responses by status code.
    pub status: BTreeMap<u16, u64>,
    /// Handshakes by `version cipher group`.
    pub negotiated: BTreeMap<String, u64>,
    /// Full handshakes by the signature algorithm the server used (e.g. `rsa_pss_rsae_sha256`:
    /// an RSA certificate; `ecdsa_secp256r1_sha256`: ECDSA P-256).
    pub sigalgs: BTreeMap<&'static str, u64>,
    /// Latencies in microseconds.
    pub latency_us: Latencies,
    /// `http/1.1` or `h2`.
    pub protocol: &'static str,
    /// HTTP/2 streams per connection.
    pub streams: usize,
    /// Request method.
    pub method: String,
    /// `--rate` (operations per second), when set: latencies then count from intended send times.
    pub rate: Option<f64>,
    /// Response bytes per second.
    pub bytes_per_s: f64,
    /// The percentile distributions (µs), as HdrHistogram iterates them.
    pub histograms_us: Histograms,
}

impl Summary {
    /// Builds the summary from the merged statistics.
    pub fn new(plan: &Plan, stats: &Stats) -> Self {
        let secs = stats.elapsed.as_secs_f64();
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        Self {
            url: plan.url.clone(),
            mode: plan.mode.as_str(),
            threads: plan.threads,
            connections: plan.connections,
            tls: plan.opts.tls.clone().unwrap_or_else(|| "any".into()),
            session_id: plan.session_id,
            tickets: plan.tickets,
            elapsed_s: secs,
            requests: stats.requests,
            handshakes: stats.handshakes,
            resumption_offered: stats.offered,
            resumed: stats.resumed,
            full: stats.handshakes - stats.resumed,
            resumed_by: stats.resumed_by.clone(),
            resumed_fraction: if stats.handshakes == 0 {
                0.0
            } else {
                stats.resumed as f64 / stats.handshakes as f64
            },
            requests_per_s: rate(stats.requests),
            handshakes_per_s: rate(stats.handshakes),
            bytes_received: stats.bytes,
            held: stats.held,
            errors: stats.errors.iter().map(|(k, v)| (k.as_str(), *v)).collect(),
            errors_total: stats.errors.values().sum(),
            first_error: stats.first_error.iter().map(|(k, v)| (k.as_str(), v.clone())).collect(),
            status: stats.status.clone(),
            negotiated: stats
                .negotiated
                .iter()
                .map(|((v, c, g), n)| (format!("{v} {c} {g}"), *n))
                .collect(),
            sigalgs: stats.sigalgs.clone(),
            latency_us: Latencies {
                connect: Latency::of(&stats.connect),
                handshake: Latency::of(&stats.handshake),
                ttfb: Latency::of(&stats.ttfb),
                ttlb: Latency::of(&stats.request),
                request: Latency::of(&stats.request),
            },
            protocol: if plan.h3 {
                "h3"
            } else if plan.h2 {
                "h2"
            } else {
                "http/1.1"
            },
            streams: plan.streams,
            method: plan.method.clone(),
            rate: plan.rate,
            bytes_per_s: rate(stats.bytes),
            histograms_us: Histograms {
                connect: distribution(&stats.connect),
                handshake: distribution(&stats.handshake),
                ttfb: distribution(&stats.ttfb),
                ttlb: distribution(&stats.request),
            },
        }
    }

    /// The summary as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("summary serialises")
    }

    /// The wrk-like text report.
    pub fn to_text(&self, plan: &Plan) -> String {
        let mut s = String::new();
        let what = match plan.limit {
            Limit::Duration(d) => format!("{} test", humantime::format_duration(d)),
            Limit::Count(n) => format!("{n}-operation test"),
            Limit::Hold(d) => format!("hold test ({} idle)", humantime::format_duration(d)),
        };
        let onoff = |b: bool| if b { "on" } else { "off" };
        let _ = writeln!(s, "Running {what} @ {}", self.url);
        let _ = writeln!(
            s,
            "  {} threads and {} connections, {} mode, {}{}, TLS {}, session IDs {}, tickets {}",
            self.threads,
            self.connections,
            self.mode,
            self.protocol,
            if self.protocol == "h2" {
                format!(" x{} streams", self.streams)
            } else {
                String::new()
            },
            self.tls,
            onoff(self.session_id),
            onoff(self.tickets)
        );
        if plan.lean {
            let _ = writeln!(
                s,
                "  lean: full TLS 1.3 handshakes only (X25519, TLS_AES_128_GCM_SHA256, no tickets, server not verified)"
            );
        }
        if let Some(r) = self.rate {
            let _ = writeln!(
                s,
                "  constant rate {r}/s; latencies count from each request's intended send time"
            );
        }
        let _ = writeln!(
            s,
            "  {:<12}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "Latency", "p50", "p90", "p99", "p99.9", "max", "count"
        );
        for (name, l) in [
            ("connect", &self.latency_us.connect),
            ("handshake", &self.latency_us.handshake),
            ("ttfb", &self.latency_us.ttfb),
            ("ttlb", &self.latency_us.ttlb),
        ] {
            let _ = writeln!(
                s,
                "    {:<10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
                name,
                fmt_us(l.p50),
                fmt_us(l.p90),
                fmt_us(l.p99),
                fmt_us(l.p999),
                fmt_us(l.max),
                l.count
            );
        }
        let _ = writeln!(
            s,
            "  {} requests, {} handshakes ({} resumed = {:.1}%, {} offered a session) in {:.2}s, {} bytes read",
            self.requests,
            self.handshakes,
            self.resumed,
            self.resumed_fraction * 100.0,
            self.resumption_offered,
            self.elapsed_s,
            self.bytes_received
        );
        if !self.resumed_by.is_empty() {
            let list: Vec<String> = self.resumed_by.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  resumed by: {}", list.join(", "));
        }
        for (what, n) in &self.negotiated {
            let _ = writeln!(s, "  negotiated {what}: {n}");
        }
        if !self.sigalgs.is_empty() {
            let list: Vec<String> = self.sigalgs.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  server signatures: {}", list.join(", "));
        }
        if self.held > 0 {
            let _ = writeln!(s, "  held {} connections open at once", self.held);
        }
        if self.errors_total > 0 {
            let list: Vec<String> = self.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  Errors: {} ({})", self.errors_total, list.join(", "));
            let odd: Vec<String> = self
                .status
                .iter()
                .filter(|(code, _)| !(200..400).contains(*code))
                .map(|(code, n)| format!("{code}: {n}"))
                .collect();
            if !odd.is_empty() {
                let _ = writeln!(s, "  Non-2xx or 3xx responses: {}", odd.join(", "));
            }
            for (kind, message) in &self.first_error {
                let _ = writeln!(s, "  first {kind} error: {message}");
            }
        }
        let _ = writeln!(s, "Requests/sec:   {:>12.2}", self.requests_per_s);
        let _ = writeln!(s, "Handshakes/sec: {:>12.2}", self.handshakes_per_s);
        let _ = writeln!(s, "Transfer/sec:   {:>12}", fmt_bytes(self.bytes_per_s));
        s
    }
}

fn fmt_bytes(per_s: f64) -> String {
    if per_s >= 1024.0 * 1024.0 {
        format!("{:.2}MB", per_s / (1024.0 * 1024.0))
    } else if per_s >= 1024.0 {
        format!("{:.2}KB", per_s / 1024.0)
    } else {
        format!("{per_s:.0}B")
    }
}

fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2}s", us as f64 / 1e6)
    } else if us >= 1_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::BenchArgs;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn plan(args: &[&str]) -> Plan {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap().args.plan().unwrap()
    }

    #[test]
    fn merge_and_summarise() {
        let plan = plan(&["--new-conn", "-c", "4", "-t", "2", "-d", "2", "https://127.0.0.1:1/"]);
        let mut a = Stats::default();
        let mut b = Stats::default();
        for i in 0..100u64 {
            let t = if i % 2 == 0 { &mut a } else { &mut b };
            t.record_connect(Duration::from_micros(50 + i));
            t.record_handshake(
                Duration::from_micros(1000 + 10 * i),
                i > 0,
                i >= 10,
                ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "X25519"),
            );
            t.record_request(Duration::from_micros(2000 + i), if i == 99 { 502 } else { 200 }, 100);
        }
        a.error_with(ErrorKind::Connect, &"Connection refused");
        b.error_with(ErrorKind::Connect, &"later");
        a.elapsed = Duration::from_millis(1990);
        b.elapsed = Duration::from_millis(2000);
        let mut all = Stats::default();
        all.merge(&a);
        all.merge(&b);
        let s = Summary::new(&plan, &all);
        assert_eq!(
            (s.requests, s.handshakes, s.resumed, s.full, s.resumption_offered),
            (100, 100, 90, 10, 99)
        );
        assert!((s.resumed_fraction - 0.9).abs() < 1e-9);
        assert!((s.elapsed_s - 2.0).abs() < 1e-9);
        assert!((s.requests_per_s - 50.0).abs() < 1e-9);
        assert_eq!(s.bytes_received, 10_000);
        assert_eq!(s.errors.get("connect"), Some(&2));
        assert_eq!(
            s.first_error.get("connect").map(String::as_str),
            Some("Connection refused")
        );
        assert_eq!(s.errors.get("status"), Some(&1));
        assert_eq!(s.errors_total, 3);
        assert_eq!(s.status.get(&502), Some(&1));
        assert_eq!(s.negotiated.values().sum::<u64>(), 100);
        let h = s.latency_us.handshake;
        assert_eq!(h.count, 100);
        assert!(h.p50 >= 1480 && h.p50 <= 1510, "{h:?}");
        assert!(h.p99 >= 1970 && h.p99 <= 2000, "{h:?}");
        assert!(h.max >= 1989 && h.max <= 1992, "{h:?}");
        assert!(h.p50 <= h.p90 && h.p90 <= h.p99 && h.p99 <= h.max);

        let text = s.to_text(&plan);
        assert!(text.contains("Running 2s test @ https://127.0.0.1:1/"), "{text}");
        assert!(text.contains("new-conn mode"), "{text}");
        assert!(text.contains("100 handshakes (90 resumed = 90.0%"), "{text}");
        assert!(text.contains("Errors: 3 (connect 2, status 1)"), "{text}");
        assert!(text.contains("first connect error: Connection refused"), "{text}");
        assert!(text.contains("Non-2xx or 3xx responses: 502: 1"), "{text}");
        assert!(text.contains("Requests/sec:          50.00"), "{text}");

        let json: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(json["mode"], "new-conn");
        assert_eq!(json["resumed"], 90);
        assert_eq!(json["errors"]["connect"], 2);
        assert_eq!(json["status"]["200"], 99);
        assert_eq!(json["latency_us"]["request"]["count"], 100);
    }

    #[test]
    fn empty_run_has_zero_rates() {
        let plan = plan(&["-n", "1", "https://127.0.0.1:1/"]);
        let s = Summary::new(&plan, &Stats::default());
        assert_eq!(
            (s.requests_per_s, s.handshakes_per_s, s.resumed_fraction),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(s.latency_us.request.count, 0);
        assert!(s.to_text(&plan).contains("1-operation test"));
    }

    #[test]
    fn latency_units() {
        assert_eq!(fmt_us(999), "999us");
        assert_eq!(fmt_us(1500), "1.50ms");
        assert_eq!(fmt_us(2_500_000), "2.50s");
    }
}

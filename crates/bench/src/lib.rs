//! `tlsgate bench`: an HTTPS load generator on the same BoringSSL stack as the gateway.
//!
//! wrk-like: `-c` connections over `-t` threads (one single-threaded event loop each), for `-d`
//! seconds or `-n` operations, in one of four modes: keep-alive (default), `--new-conn` (one
//! request per TLS connection, `Connection: close`), `--handshake-only` and `--hold` (idle
//! connections, for memory measurements). Resumption follows wrk's `--no-session-id` and
//! `--no-ticket`; whether a handshake resumed is what the client's TLS stack says.
//!
//! The TLS and TCP options (`--tls`, `--ciphers`, `--groups`, `--sigalgs`, `--alpn`, `--sni`,
//! `--connect-to`, `--cacert`, `--no-ticket`, `--tfo`, `--timeout`) are one struct shared with
//! `tlsgate probe` ([`tls_opts`]); durations and `HOST[:PORT]` are read by [`values`].
//!
//! `--h2` runs HTTP/2 with `-m` streams per connection (hyper's client), or one request per
//! connection with `--new-conn`; `--rate` paces every sender on a fixed schedule and measures
//! latency from intended send times (wrk2); latencies are kept per phase (connect, handshake,
//! TTFB, TTLB). The [`probe`] module is `tlsgate probe`.
//!
//! `--lean` ([`lean`]) completes full TLS 1.3 handshakes with the least client work (one X25519
//! per connection, no key generation, no signature check), so one client core can keep a server
//! core busy with full handshakes and a request each.
//!
//! The HTTP/1.1 side is a hand-written request/response loop (one pre-built request, a reused
//! buffer, no allocation per response), so the load generator costs far less CPU per request
//! than the server it measures.
#![forbid(unsafe_code)]

pub mod args;
pub mod client;
pub mod http;
pub mod lean;
pub mod probe;
pub mod progress;
pub mod quic;
pub mod report;
pub mod run;
pub mod tls_opts;
pub mod values;

pub use args::{BenchArgs, Mode, Plan};
pub use probe::ProbeArgs;
pub use report::Summary;
pub use tls_opts::TlsOpts;

use anyhow::Context;

/// Runs a benchmark from command-line options: prints the wrk-like report on stdout and writes
/// the JSON summary if asked. Returns the summary.
pub fn run_and_report(args: &BenchArgs) -> anyhow::Result<Summary> {
    let plan = args.plan()?;
    let summary = run::run(&plan)?;
    print!("{}", summary.to_text(&plan));
    if let Some(path) = &plan.json {
        std::fs::write(path, summary.to_json() + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(summary)
}

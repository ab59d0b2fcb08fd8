//! The `tlsgate` command: `serve`, `check`, `reload`, `bench`, `probe`.
//! `ctl`: edit the cluster's control-plane document (docs/CONTROL.md); `console`: its web UI
//! and JSON API (docs/CONSOLE.md).
//! `lab`: the network lab (link emulator between namespaces, TTLB experiments; docs/LAB.md).
#![forbid(unsafe_code)]

mod access_log;
mod admin_client;
mod bench_cmd;
mod check;
mod cluster_setup;
mod console_cmd;
mod ctl_cmd;
mod demo;
mod ech_cmd;
mod ech_rotate;
mod generate_cmd;
mod import_cmd;
mod keyserver_cmd;
mod lab_cmd;
mod logging;
mod probe_cmd;
mod rate_limit_store;
mod reload;
mod reopen_logs;
mod serve;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc for Rust and, through libmimalloc-sys's `override` feature, for BoringSSL's C
/// allocations too: the per-connection churn (the `SSL` object, record buffers, hyper's
/// connection state) costs about half of what glibc's malloc costs (docs/BENCHMARKS.md,
/// "Allocator"). Asked through `tlsgate_tls::Allocator`, which keeps requests of ordinary
/// alignment off mimalloc v3's over-allocating aligned path.
#[global_allocator]
static GLOBAL: tlsgate_tls::Allocator = tlsgate_tls::Allocator;

/// tlsgate: a TLS-terminating reverse proxy built for the lowest handshake cost.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway.
    Serve(serve::ServeArgs),
    /// Validate a configuration and lint every certificate chain (exit status 1 on errors).
    Check {
        /// Configuration file.
        #[arg(long, short)]
        config: PathBuf,
        /// Extra trust anchors (PEM) for private CAs, besides the system bundle.
        #[arg(long = "ca")]
        ca: Vec<PathBuf>,
    },
    /// Ask a running gateway to re-read its configuration and certificates (exit status 0: all
    /// applied; 1: refused or unreachable; 3: applied, but listener/admin/workers/[cluster]
    /// changes were not and take a restart — listed on stderr).
    Reload {
        /// The configuration file the gateway runs with (its admin address is read from it).
        #[arg(long, short, required_unless_present = "admin")]
        config: Option<PathBuf>,
        /// The admin listener's address, instead of reading it from the configuration.
        #[arg(long)]
        admin: Option<std::net::SocketAddr>,
    },
    /// Ask a running gateway to reopen its access-log file (for logrotate; or: kill -USR1).
    ReopenLogs {
        /// The configuration file the gateway runs with (its admin address is read from it).
        #[arg(long, short, required_unless_present = "admin")]
        config: Option<PathBuf>,
        /// The admin listener's address, instead of reading it from the configuration.
        #[arg(long)]
        admin: Option<std::net::SocketAddr>,
    },
    /// HTTPS load generator (wrk-like) on the same BoringSSL stack: keep-alive, --new-conn,
    /// --handshake-only, --hold; resumption switches; latency percentiles; --json summary.
    Bench(Box<bench_cmd::BenchArgs>),
    /// Connect N times (like `openssl s_client -reconnect`) and report each handshake: version,
    /// cipher, group, certificate, ALPN, OCSP staple, HSTS, resumption and how, 0-RTT, timings;
    /// --expect-* flags make it exit non-zero when they fail.
    Probe(Box<probe_cmd::ProbeArgs>),
    /// Run a key server for keyless TLS: holds private keys, signs for gateways over mutual TLS.
    Keyserver(keyserver_cmd::KeyServerArgs),
    /// Edit the cluster's dynamic configuration in Redis (key-server pools): show, history,
    /// publish, rollback, add/remove/drain/weight, nodes.
    Ctl(Box<ctl_cmd::CtlArgs>),
    /// Web console and JSON API over the cluster's control document and the nodes' metrics
    /// (loopback by default; --token-file required elsewhere).
    Console(Box<console_cmd::ConsoleArgs>),
    /// Network lab (root): emulated links between namespaces; TTLB and latency-trick experiments.
    Lab(lab_cmd::LabArgs),
    /// Translate another server's configuration (nginx) into tlsgate TOML, listing what was not
    /// translated (exit status 0: produced; 2: the file does not parse).
    Import(import_cmd::ImportArgs),
    /// Print the Encrypted ClientHello config list (base64, for the DNS HTTPS record) of the
    /// current and next epochs, derived from the cluster secret as every node derives it.
    Ech(ech_cmd::EchArgs),
}

fn main() -> ExitCode {
    // `tlsgate generate`: packaging helpers, parsed apart so that they stay out of --help, the man
    // pages and the completions they write (generate_cmd.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "generate") {
        return generate_cmd::main(<Cli as clap::CommandFactory>::command());
    }
    let cli = Cli::parse();
    tlsgate_keyless::remote::install();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Check { config, ca } => check::run(&config, &ca),
        Command::Reload { config, admin } => reload::run(config.as_deref(), admin),
        Command::ReopenLogs { config, admin } => reopen_logs::run(config.as_deref(), admin),
        Command::Bench(args) => bench_cmd::run(&args),
        Command::Probe(args) => probe_cmd::run(&args),
        Command::Keyserver(args) => keyserver_cmd::run(&args),
        Command::Lab(args) => lab_cmd::run(&args),
        Command::Ctl(args) => ctl_cmd::run(&args),
        Command::Console(args) => console_cmd::run(&args),
        Command::Import(args) => import_cmd::run(&args),
        Command::Ech(args) => ech_cmd::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tlsgate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

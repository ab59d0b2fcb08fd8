//! `tlsgate lab`: the network lab. `run NAME` runs an experiment (ttlb-pq, tricks, quic) through the
//! user-space link emulator; `calibrate` measures the emulator; `up` holds a lab open for manual
//! use until Ctrl-C. Needs root (namespaces, TUN devices).

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use tlsgate_lab::exp::RunOpts;
use tlsgate_lab::{Dist, Lab, LabOptions, LinkSpec};

/// `tlsgate lab` arguments.
#[derive(Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Subcommand, Debug)]
enum LabCommand {
    /// Run an experiment: CSV, JSON, a Markdown summary and SVG plots under --out.
    Run {
        /// Experiment.
        name: Experiment,
        /// The small profile (under 2 minutes).
        #[arg(long)]
        quick: bool,
        /// Output directory.
        #[arg(long, default_value = "lab-results")]
        out: PathBuf,
        /// Samples per cell (default 3 with --quick, else 20; 1 Mbit/s cells use half).
        #[arg(long)]
        samples: Option<usize>,
        /// ttlb-pq, quic: only these networks (repeat or comma-separate), e.g. 35ms-1g-loss10;
        /// quic: `amplification` names the anti-amplification sweep.
        #[arg(long = "network", value_delimiter = ',')]
        networks: Vec<String>,
        /// ttlb-pq, quic: only these response sizes in KiB (repeat or comma-separate), e.g. 200.
        #[arg(long = "sizes", value_delimiter = ',')]
        sizes: Vec<usize>,
        /// quic: the gateway's QUIC congestion controller (bbr2, cubic, reno; default: the
        /// gateway's own, bbr2).
        #[arg(long = "quic-cc")]
        quic_cc: Option<String>,
    },
    /// Measure the emulator: added latency, RTT bias, largest forwarding rate, rate accuracy.
    Calibrate {
        /// Seconds per throughput measurement.
        #[arg(long, default_value_t = 4.0)]
        secs: f64,
        /// Also write calibration.json and calibration.md here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Build a lab with these impairments (both directions) and keep it until Ctrl-C; prints the
    /// namespace names for `ip netns exec`.
    Up {
        /// One-way delay, ms.
        #[arg(long, default_value_t = 0.0)]
        delay_ms: f64,
        /// Jitter (sigma), ms.
        #[arg(long, default_value_t = 0.0)]
        jitter_ms: f64,
        /// Jitter distribution: uniform, normal, pareto, paretonormal.
        #[arg(long, default_value = "uniform")]
        dist: Dist,
        /// Random loss probability (0–1).
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        /// Rate limit, Mbit/s (0 = none).
        #[arg(long, default_value_t = 0.0)]
        rate_mbit: f64,
        /// Drop-tail queue of the rate limiter, bytes.
        #[arg(long, default_value_t = 1_500_000)]
        queue_bytes: u64,
        /// Probability that a packet skips queue and delay (reordering).
        #[arg(long, default_value_t = 0.0)]
        reorder: f64,
        /// initcwnd on both routes.
        #[arg(long)]
        initcwnd: Option<u32>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Experiment {
    /// Seed 004: post-quantum TLS 1.3 by TTLB.
    TtlbPq,
    /// Seeds 001/003: records, TFO, resumption, stapling, TLS 1.2/1.3/0-RTT.
    Tricks,
    /// Issue 19: HTTP/2 over TCP against HTTP/3 over QUIC under loss and delay, and the QUIC
    /// anti-amplification limit against chain size.
    Quic,
}

pub fn run(args: &LabArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        LabCommand::Run {
            name,
            quick,
            out,
            samples,
            networks,
            sizes,
            quic_cc,
        } => {
            let opts = RunOpts {
                exe: std::env::current_exe()?,
                out: out.clone(),
                quick: *quick,
                samples: *samples,
                verbose: true,
                networks: networks.clone(),
                sizes_kib: sizes.clone(),
                quic_congestion_control: quic_cc.clone(),
            };
            match name {
                Experiment::TtlbPq => {
                    tlsgate_lab::exp::ttlb_pq::run(&opts)?;
                }
                Experiment::Tricks => {
                    tlsgate_lab::exp::tricks::run(&opts)?;
                }
                Experiment::Quic => {
                    tlsgate_lab::exp::quic::run(&opts)?;
                }
            }
            println!("results in {}", out.display());
        }
        LabCommand::Calibrate { secs, out } => {
            let c = tlsgate_lab::calibrate::run(*secs)?;
            print!("{}", c.markdown());
            if let Some(dir) = out {
                c.write(dir)?;
            }
        }
        LabCommand::Up {
            delay_ms,
            jitter_ms,
            dist,
            loss,
            rate_mbit,
            queue_bytes,
            reorder,
            initcwnd,
        } => {
            let spec = LinkSpec {
                delay_ms: *delay_ms,
                jitter_ms: *jitter_ms,
                dist: *dist,
                rate_bps: (*rate_mbit * 1e6) as u64,
                queue_bytes: *queue_bytes,
                reorder: *reorder,
                ..LinkSpec::default()
            }
            .with_loss(*loss);
            let lab = Lab::with_options(
                spec.clone(),
                spec,
                &LabOptions {
                    initcwnd: *initcwnd,
                    ..LabOptions::default()
                },
            )?;
            println!(
                "client namespace {} ({}), server namespace {} ({}); Ctrl-C to remove",
                lab.a.name(),
                tlsgate_lab::ADDR_A,
                lab.b.name(),
                tlsgate_lab::ADDR_B
            );
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

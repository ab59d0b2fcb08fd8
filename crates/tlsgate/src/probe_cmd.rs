//! `tlsgate probe HOST:PORT`: per-connection TLS diagnostics and expectations (the `probe`
//! module of the `tlsgate-bench` crate; see README).

use std::process::ExitCode;
pub use tlsgate_bench::ProbeArgs;

/// Runs the probe; exit status 1 when a connection failed or an expectation did not hold.
pub fn run(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    Ok(if tlsgate_bench::probe::run_and_report(args)? {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

//! `tlsgate bench URL`: the load generator of the `tlsgate-bench` crate, on the same BoringSSL
//! stack as the gateway (see docs/BENCHMARKS.md).

use std::process::ExitCode;
pub use tlsgate_bench::BenchArgs;

/// Runs the benchmark; exit status 1 when not a single handshake completed.
pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let summary = tlsgate_bench::run_and_report(args)?;
    Ok(if summary.handshakes == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

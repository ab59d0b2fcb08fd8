//! `tlsgate reload`: POST /reload to the running gateway's admin listener.
//!
//! Exit status: 0 when the new configuration was installed in full; 1 when it was refused (the
//! old one keeps serving) or the gateway could not be reached; [`EXIT_NOT_APPLIED`] (3) when it
//! was installed but some changes take a restart (listeners, admin address, workers, `[cluster]`,
//! `[control]`, `[log]`): they are listed on stderr, one `not applied, needs a restart: ...` line
//! each, and everything else in the file is in effect.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Exit status of a reload that was installed with changes left for the next restart.
pub const EXIT_NOT_APPLIED: u8 = 3;

pub fn run(config: Option<&Path>, admin: Option<SocketAddr>) -> anyhow::Result<ExitCode> {
    let addr = crate::admin_client::address(config, admin, "send it SIGHUP instead")?;
    let answer = crate::admin_client::post(addr, "/reload", Duration::from_secs(60))?;
    let not_applied = answer
        .header(tlsgate_admin::NOT_APPLIED_HEADER)
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    if answer.status != 200 {
        eprintln!("{}", answer.body);
        return Ok(ExitCode::FAILURE);
    }
    if not_applied == 0 {
        println!("{}", answer.body);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("{}", answer.body);
    eprintln!(
        "tlsgate reload: {not_applied} change(s) not applied; restart tlsgate to apply them (exit status {EXIT_NOT_APPLIED})"
    );
    Ok(ExitCode::from(EXIT_NOT_APPLIED))
}

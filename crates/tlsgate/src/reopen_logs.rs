//! `tlsgate reopen-logs`: POST /reopen-logs to the running gateway's admin listener, so it
//! reopens `[log] access_log_file` at its path (logrotate's `postrotate`; SIGUSR1 does the same).

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

pub fn run(config: Option<&Path>, admin: Option<SocketAddr>) -> anyhow::Result<ExitCode> {
    let addr = crate::admin_client::address(config, admin, "send it SIGUSR1 instead")?;
    let answer = crate::admin_client::post(addr, "/reopen-logs", Duration::from_secs(30))?;
    if answer.status == 200 {
        println!("{}", answer.body);
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{}", answer.body);
        Ok(ExitCode::FAILURE)
    }
}

//! `tlsgate keyserver --config F`: the key server of keyless TLS (docs/KEYLESS.md): holds private
//! keys and signs handshakes for gateways over mutual TLS.

use std::path::PathBuf;
use std::process::ExitCode;
use tlsgate_keyless::server_config::KeyServerConfig;

/// Arguments of `tlsgate keyserver`.
#[derive(clap::Args, Debug)]
pub struct KeyServerArgs {
    /// Key-server configuration file (TOML; see docs/KEYLESS.md).
    #[arg(long, short)]
    config: PathBuf,
}

/// Loads the configuration and serves until SIGTERM/SIGINT.
pub fn run(args: &KeyServerArgs) -> anyhow::Result<ExitCode> {
    // The errors' messages already name the file and include their cause.
    let config = KeyServerConfig::load(&args.config).map_err(|e| anyhow::anyhow!("{e}"))?;
    crate::logging::init(&tlsgate_config::LogConfig {
        level: config.log_level.clone(),
        ..Default::default()
    });
    tlsgate_keyless::server::run(config).map_err(|e| anyhow::anyhow!("{}: {e}", args.config.display()))?;
    Ok(ExitCode::SUCCESS)
}

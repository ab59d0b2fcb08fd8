//! `tlsgate console`: the web console and its JSON API over the cluster's control document and
//! the nodes' metrics (docs/CONSOLE.md). Loopback needs no login; any other address needs
//! `--token-file`. Whatever the identity, requests must name the console in `Host` (its listen
//! address, `localhost`, a loopback IP or an `--allowed-host`) and changes must be same-origin
//! JSON (docs/SECURITY.md).

use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tlsgate_bench::values::parse_positive_duration;
use tlsgate_console::{Console, ConsoleConfig};
use tlsgate_control::StoreConfig;

/// `tlsgate console` arguments.
#[derive(Args, Debug)]
pub struct ConsoleArgs {
    /// Redis holding the control documents (as `[control] redis_url`).
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Cluster name (as `[control] cluster_name`).
    #[arg(long, default_value = "default")]
    cluster: String,
    /// Where the console listens. Anything but loopback requires --token-file.
    #[arg(long, default_value = "127.0.0.1:9800")]
    listen: SocketAddr,
    /// File holding the access token (at least 16 characters; surrounding whitespace ignored).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Another name the console answers to in `Host`/`Origin` (`host` or `host:port`; without a
    /// port any port), e.g. the name a reverse proxy forwards; repeatable. The listen address,
    /// `localhost` and loopback IPs are always allowed; other Hosts get 421.
    #[arg(long = "allowed-host", value_name = "HOST[:PORT]")]
    allowed_hosts: Vec<String>,
    /// How often the nodes' metrics are scraped (`2s`, `500ms`; a bare number is seconds).
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration)]
    scrape_interval: Duration,
}

/// Runs the console until killed.
pub fn run(args: &ConsoleArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init(&tlsgate_config::LogConfig::default());
    let token = match &args.token_file {
        // The message already carries its source: printed once, not again as a cause.
        Some(p) => Some(tlsgate_console::auth::read_token(p).map_err(|e| anyhow::anyhow!("{e}"))?),
        None => None,
    };
    let config = ConsoleConfig {
        listen: args.listen,
        token,
        allowed_hosts: args.allowed_hosts.clone(),
        store: StoreConfig::new(args.redis.clone(), args.cluster.clone()),
        scrape_interval: args.scrape_interval,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let console = Console::bind(config).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let addr = console.local_addr()?;
        let auth = if addr.ip().is_loopback() {
            "loopback, no login needed"
        } else {
            "token required"
        };
        tracing::info!(%addr, cluster = %args.cluster, "console listening ({auth})");
        eprintln!("tlsgate console: http://{addr}/ ({auth})");
        tokio::select! {
            () = console.serve() => {}
            r = tokio::signal::ctrl_c() => r?,
        }
        Ok(ExitCode::SUCCESS)
    })
}

//! `tlsgate ech --config FILE`: the ECHConfigList (base64) of the current epoch and of the next
//! one, with when each is current and when nodes accept it, computed from the configuration's
//! cluster secret and `[ech]` settings exactly as the nodes compute them (no node is asked). A
//! DNS job publishes the `ech=` value in the HTTPS/SVCB record (docs/ECH.md).

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_tls::ech::{base64, config_id, EchSettings, EpochKey};
use tlsgate_tls::secret::ClusterSecret;

/// `tlsgate ech`
#[derive(clap::Args, Debug)]
pub struct EchArgs {
    /// Configuration file (its `[cluster] secret_files` and `[ech]` section).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Compute for this time (Unix seconds) instead of now.
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub at: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One epoch's published config.
struct Published {
    role: &'static str,
    epoch: u64,
    current_from: SystemTime,
    current_until: SystemTime,
    accepted_from: SystemTime,
    accepted_until: SystemTime,
    list: String,
}

/// Prints the current and next epochs' ECHConfigLists.
pub fn run(args: &EchArgs) -> anyhow::Result<ExitCode> {
    let loaded = tlsgate_config::load(&args.config)?;
    let config = loaded.config;
    let settings = EchSettings::from_config(config.ech.as_ref())
        .with_context(|| format!("{}: no enabled [ech] section", args.config.display()))?;
    let path = config
        .cluster
        .as_ref()
        .and_then(|c| c.secret_files.first())
        .with_context(|| format!("{}: [cluster] secret_files is required for ECH", args.config.display()))?;
    let secret = ClusterSecret::load(path).context("cluster.secret_files[0]")?;
    let now = args
        .at
        .map_or_else(SystemTime::now, |s| UNIX_EPOCH + Duration::from_secs(s));
    let epoch = settings.epoch_at(now);
    let mut out = Vec::new();
    for (role, e) in [("current", epoch), ("next", epoch + 1)] {
        let key = EpochKey::derive(&secret, &settings, e).context("cannot derive the ECH key")?;
        out.push(Published {
            role,
            epoch: e,
            current_from: settings.epoch_start(e),
            current_until: settings.epoch_start(e + 1),
            accepted_from: settings.epoch_start(e.saturating_sub(1)),
            accepted_until: settings.epoch_start(e + 2),
            list: base64(&key.config_list()),
        });
    }
    if args.json {
        println!("{}", json(&settings, &out));
    } else {
        println!("public_name {}", settings.public_name);
        for p in &out {
            println!(
                "{} epoch {} (config_id {}): current {} .. {}, accepted {} .. {}\nech={}",
                p.role,
                p.epoch,
                config_id(p.epoch),
                time(p.current_from),
                time(p.current_until),
                time(p.accepted_from),
                time(p.accepted_until),
                p.list
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn time(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// The report as JSON (every value is a number, base64 or a DNS name: nothing to escape).
fn json(settings: &EchSettings, epochs: &[Published]) -> String {
    let items: Vec<String> = epochs
        .iter()
        .map(|p| {
            format!(
                "\"{}\":{{\"epoch\":{},\"config_id\":{},\"current_from\":{},\"current_until\":{},\
                 \"accepted_from\":{},\"accepted_until\":{},\"ech_config_list\":\"{}\"}}",
                p.role,
                p.epoch,
                config_id(p.epoch),
                unix(p.current_from),
                unix(p.current_until),
                unix(p.accepted_from),
                unix(p.accepted_until),
                p.list
            )
        })
        .collect();
    format!(
        "{{\"public_name\":\"{}\",\"rotation_s\":{},{}}}",
        settings.public_name,
        settings.rotation.as_secs(),
        items.join(",")
    )
}

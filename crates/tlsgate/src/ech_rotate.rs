//! Keeps the ECH keys of the live front context on the current epoch (docs/ECH.md): at each
//! epoch boundary (and every few seconds, so a reloaded generation gets them too) the ring's
//! keys are installed on the newest generation's front context, without a reload; when the epoch
//! changes, the `[ech] hook` command is run with the new ECHConfigList.

use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tlsgate_proxy::Gateway;
use tlsgate_tls::ech::{base64, EchSettings};
use tlsgate_tls::ech_ring::metrics;

/// Longest wait between two checks (a generation installed by a reload gets the keys when it is
/// built; this only bounds how stale a missed swap can be).
const CHECK: Duration = Duration::from_secs(5);
/// After the boundary, so the clock has passed it when the task wakes.
const MARGIN: Duration = Duration::from_millis(20);
/// A hook that runs longer is killed (counted as a failure).
const HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Installs the current epoch's keys on the newest generation now; returns the epoch (`None`:
/// ECH off).
pub fn install(gateway: &Gateway) -> anyhow::Result<Option<u64>> {
    let generation = gateway.current();
    let epoch = gateway
        .sessions
        .ech
        .install(
            generation.tls.front(),
            generation.config.ech.as_ref(),
            SystemTime::now(),
        )
        .map_err(|e| anyhow::anyhow!("ech: cannot install the ECH keys: {e}"))?;
    Ok(epoch)
}

/// The rotation task (runs on the control runtime for the life of the process).
pub async fn run(gateway: Arc<Gateway>) {
    let mut last: Option<(u64, u64)> = None;
    loop {
        let generation = gateway.current();
        let settings = EchSettings::from_config(generation.config.ech.as_ref());
        let now = SystemTime::now();
        let wait = match &settings {
            None => {
                last = None;
                CHECK
            }
            Some(settings) => {
                let epoch = settings.epoch_at(now);
                if last != Some((generation.id, epoch)) {
                    match install(&gateway) {
                        Ok(Some(installed)) => {
                            if last.is_some_and(|(_, before)| before != installed) {
                                tracing::info!(epoch = installed, "ECH keys rotated");
                                announce(&gateway, installed, &generation.config);
                            }
                            last = Some((generation.id, installed));
                        }
                        Ok(None) => last = None,
                        Err(e) => tracing::warn!("{e:#}"),
                    }
                }
                settings.until_next_epoch(now) + MARGIN
            }
        };
        tokio::time::sleep(wait.min(CHECK)).await;
    }
}

/// Runs the hook, if any, with the new epoch's ECHConfigList (in the background).
fn announce(gateway: &Gateway, epoch: u64, config: &tlsgate_config::Config) {
    let Some(ech) = config.ech.as_ref().filter(|e| !e.hook.is_empty()) else {
        return;
    };
    let ring = &gateway.sessions.ech;
    let (Some(current), Some(next)) = (ring.published(epoch), ring.published(epoch + 1)) else {
        return;
    };
    let hook = ech.hook.clone();
    let (current, next) = (base64(&current), base64(&next));
    tokio::spawn(async move {
        let mut cmd = tokio::process::Command::new(&hook[0]);
        cmd.args(&hook[1..])
            .arg(&current)
            .env("TLSGATE_ECH_CONFIG_LIST", &current)
            .env("TLSGATE_ECH_NEXT_CONFIG_LIST", &next)
            .env("TLSGATE_ECH_EPOCH", epoch.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let outcome = match tokio::time::timeout(HOOK_TIMEOUT, cmd.status()).await {
            Ok(Ok(status)) if status.success() => return,
            Ok(Ok(status)) => format!("exited with {status}"),
            Ok(Err(e)) => format!("cannot start: {e}"),
            Err(_) => format!("killed after {HOOK_TIMEOUT:?}"),
        };
        metrics().hook_failures.inc();
        tracing::warn!(program = %hook[0], epoch, "ech.hook {outcome}");
    });
}

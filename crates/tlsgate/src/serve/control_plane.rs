//! `[control]`: this node follows its cluster's dynamic configuration document in Redis
//! (tlsgate-control's [`Watcher`]) and heartbeats its [`NodeStatus`] into the node registry.
//!
//! Applying a version: every `[[keyless.pool]]` the document names gets the document's members
//! (weights, drain) in place, through the same path as `PUT /keyless/pools/NAME`; pools the
//! document leaves out go back to their TOML `servers`. Upstream groups, site switches and the
//! access rules are laid over the static TOML ([`super::overlay`]) and installed as a new
//! configuration generation, like a reload (connections and handshakes in flight are kept); a later SIGHUP
//! reload lays the current version over the re-read file again. A version this node cannot
//! apply (a pool, upstream or site it does not define, a switch it cannot flip, a result that
//! fails configuration validation) is refused by this node's validator: the reasons show in the
//! registry and the node keeps its last good version.

use super::install_error::InstallError;
use super::overlay;
use std::sync::{Arc, Mutex};
use tlsgate_config::{Config, ControlConfig};
use tlsgate_control::{ClusterDocument, ControlStore, NodeStatus, StoreConfig, Validator, WatchConfig, Watcher};
use tlsgate_keyless::pools::Member;
use tlsgate_proxy::Gateway;

/// The running control-plane client; dropping it stops watching and heartbeating.
pub struct ControlPlane {
    watcher: Watcher,
    heartbeat: tokio::task::JoinHandle<()>,
    applier: tokio::task::JoinHandle<()>,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.heartbeat.abort();
        self.applier.abort();
    }
}

impl ControlPlane {
    /// The document version this node serves (`None`: its static TOML only).
    pub fn applied_version(&self) -> Option<u64> {
        self.watcher.current().map(|v| v.version)
    }

    /// 1 while the version the store points at is refused by this node.
    pub fn rejected(&self) -> bool {
        self.watcher.state().rejected.is_some()
    }

    /// 1 while the store cannot be read.
    pub fn store_down(&self) -> bool {
        self.watcher.state().store_error.is_some()
    }
}

static PLANE: std::sync::OnceLock<ControlPlane> = std::sync::OnceLock::new();

/// The configuration as read from the file (start or last reload), before any overlay.
static BASE: Mutex<Option<Config>> = Mutex::new(None);
/// The last applied document, laid over `BASE`.
static APPLIED: Mutex<Option<ClusterDocument>> = Mutex::new(None);

/// Remembers the configuration read from the file and returns what to install: it with the
/// applied document laid over it (the reload path calls this).
pub fn with_overlay(config: Config) -> Result<Config, InstallError> {
    *BASE.lock().unwrap_or_else(|e| e.into_inner()) = Some(config.clone());
    match APPLIED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        Some(doc) if overlay::touches_config(doc) => overlay::overlay(&config, doc).map_err(InstallError::Overlay),
        _ => Ok(config),
    }
}

/// Copies the control-plane state into `tlsgate_state{name="control_*"}` at scrape time.
pub fn export_metrics(m: &tlsgate_admin::Metrics) {
    if let Some(p) = PLANE.get() {
        m.set_gauge("control_version_applied", p.applied_version().unwrap_or(0));
        m.set_gauge("control_version_rejected", u64::from(p.rejected()));
        m.set_gauge("control_store_down", u64::from(p.store_down()));
    }
}

/// Starts watching and heartbeating (inside the control runtime, once per process); nothing
/// without `[control]`.
pub fn start(config: &Config, gateway: &Arc<Gateway>) -> anyhow::Result<()> {
    if let Some(plane) = start_plane(config, gateway)? {
        let _ = PLANE.set(plane);
    }
    Ok(())
}

fn start_plane(config: &Config, gateway: &Arc<Gateway>) -> anyhow::Result<Option<ControlPlane>> {
    let Some(c) = &config.control else { return Ok(None) };
    let store = ControlStore::new(StoreConfig::new(&c.redis_url, &c.cluster_name))?;
    *BASE.lock().unwrap_or_else(|e| e.into_inner()) = Some(config.clone());
    let gw = gateway.clone();
    let validator: Validator = Arc::new(move |doc: &ClusterDocument| check(&gw.current().config, doc));
    let watcher = Watcher::spawn(
        store.clone(),
        WatchConfig {
            poll_interval: c.poll_interval.get(),
            validator: Some(validator),
            ..WatchConfig::default()
        },
    );
    let mut status = NodeStatus::new(node_id(config, c));
    status.admin_url = config.admin.listen.map(|a| format!("http://{a}"));
    status.software = Some(format!("tlsgate {}", env!("CARGO_PKG_VERSION")));
    let heartbeat = tlsgate_control::spawn_heartbeat(store, status, watcher.subscribe(), c.heartbeat_interval.get());
    let applier = tokio::spawn(apply_versions(gateway.clone(), watcher.subscribe()));
    tracing::info!(redis = %redact(&c.redis_url), cluster = %c.cluster_name, "control plane: following the cluster document");
    Ok(Some(ControlPlane {
        watcher,
        heartbeat,
        applier,
    }))
}

/// Applies each new good version; reports refusals and store trouble once each.
async fn apply_versions(gateway: Arc<Gateway>, mut state: tokio::sync::watch::Receiver<tlsgate_control::WatchState>) {
    let (mut applied, mut rejected, mut store_error) = (None, None, None);
    loop {
        let now = state.borrow_and_update().clone();
        if let Some(v) = &now.current {
            if applied != Some(v.version) {
                apply(&gateway, &v.document, v.version);
                applied = Some(v.version);
            }
        }
        let refused = now.rejected.as_ref().map(|r| r.version);
        if refused.is_some() && refused != rejected {
            let r = now.rejected.as_ref().expect("checked");
            tracing::warn!(version = r.version, reasons = ?r.reasons, serving = ?applied, "control plane: version refused; keeping the last good one");
        }
        rejected = refused;
        if now.store_error != store_error {
            match &now.store_error {
                Some(e) => {
                    tracing::warn!(error = %e, serving = ?applied, "control plane: store unreachable; keeping the last good version")
                }
                None => tracing::info!("control plane: store reachable again"),
            }
            store_error = now.store_error.clone();
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

/// Sets every configured pool's members from `doc` (or back to the TOML's servers), then lays
/// the upstream groups and site switches over the static configuration when they changed.
fn apply(gateway: &Gateway, doc: &ClusterDocument, version: u64) {
    let config = gateway.current().config.clone();
    if let Some(keyless) = &config.keyless {
        for pool in &keyless.pools {
            let members: Vec<Member> = match doc.key_server_pools.get(&pool.name) {
                Some(p) => p
                    .members
                    .iter()
                    .map(|m| Member {
                        address: m.address.clone(),
                        weight: m.weight,
                        drain: m.drain,
                    })
                    .collect(),
                None => pool.servers.iter().map(Member::new).collect(),
            };
            if let Err(e) = tlsgate_keyless::pools::set_members(&pool.name, &members) {
                tracing::warn!(pool = %pool.name, version, error = %e, "control plane: pool members refused");
            }
        }
    }
    let previous = APPLIED.lock().unwrap_or_else(|e| e.into_inner()).replace(doc.clone());
    let layered = |d: &ClusterDocument| (d.upstreams.clone(), d.sites.clone(), d.access_rules.clone());
    if previous.as_ref().map(layered) != Some(layered(doc)) && (overlay::touches_config(doc) || previous.is_some()) {
        let base = BASE.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let installed = base
            .ok_or(InstallError::NoBase)
            .and_then(|b| overlay::overlay(&b, doc).map_err(InstallError::Overlay))
            .and_then(|c| crate::serve::acme::prepare(c).map_err(InstallError::from))
            .and_then(|c| gateway.install(c).map_err(InstallError::from));
        match installed {
            Ok(id) => tracing::info!(
                version,
                generation = id,
                "control plane: upstream groups, site switches and access rules installed"
            ),
            Err(e) => {
                tracing::error!(version, error = %e, "control plane: could not install upstream groups, site switches and access rules")
            }
        }
    }
    tracing::info!(version, "control plane: version applied");
}

/// This node's checks: every pool the document names is a `[[keyless.pool]]` here, and the
/// overlay of its upstream groups and site switches applies and passes validation.
fn check(config: &Config, doc: &ClusterDocument) -> Vec<String> {
    let pools: Vec<&str> = config
        .keyless
        .as_ref()
        .map(|k| k.pools.iter().map(|p| p.name.as_str()).collect())
        .unwrap_or_default();
    let mut problems = Vec::new();
    for name in doc.key_server_pools.keys() {
        if !pools.contains(&name.as_str()) {
            problems.push(format!(
                "key_server_pools/{name}: no [[keyless.pool]] of this name on this node"
            ));
        }
    }
    let base = BASE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match overlay::overlay(base.as_ref().unwrap_or(config), doc) {
        Ok(layered) => problems.extend(
            tlsgate_config::validate::validate(&layered)
                .into_iter()
                .filter(|i| i.severity == tlsgate_config::Severity::Error)
                .map(|i| format!("the resulting configuration is invalid: {i}")),
        ),
        Err(p) => problems.extend(p),
    }
    problems
}

fn node_id(config: &Config, c: &ControlConfig) -> String {
    if let Some(id) = &c.node_id {
        return id.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    match config.listeners.first() {
        Some(l) => format!("{host}:{}", l.listen.port()),
        None => host,
    }
}

/// The URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_logged() {
        assert_eq!(redact("redis://user:secret@host:6379/0"), "redis://***@host:6379/0");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
    }
}

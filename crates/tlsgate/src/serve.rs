//! `tlsgate serve`: load the configuration, bind every listener once per worker (SO_REUSEPORT),
//! run one single-threaded event loop per worker, and a control loop on the main thread for the
//! admin listener, signals (SIGHUP reload, SIGTERM/SIGINT drain, SIGUSR2 binary upgrade),
//! ticket-key rotation and OCSP staple refreshing. With `--upgrade` it takes over the listening
//! sockets and session state of the gateway running with the same upgrade socket (`upgrade`).

mod acme;
pub(crate) mod acme_cluster;
mod acme_manager;
mod acme_metrics;
mod acme_solver;
mod admin_api;
mod cert_watch;
mod channel;
mod control_plane;
mod handover;
mod install_error;
mod notify;
mod overlay;
mod restart_only;
mod successor;
mod takeover;
mod upgrade;
mod upgrade_socket;

use crate::demo::{self, DemoPorts};
use anyhow::Context;
use install_error::InstallError;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_admin::{AdminHooks, Metrics, ReloadError, ReloadReport};
use tlsgate_config::{Config, ListenerConfig};
use tlsgate_error::Classify;
use tlsgate_proxy::downstream::listener;
use tlsgate_proxy::Gateway;
use tlsgate_wire::handoff::SocketKind;
use tokio::signal::unix::{signal, SignalKind};
use upgrade::{Flow, Upgrades};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Configuration file.
    #[arg(long, short, required_unless_present = "demo", conflicts_with = "demo")]
    config: Option<PathBuf>,
    /// Run the built-in demo: throwaway CA and certificates for localhost, a built-in page.
    #[arg(long)]
    demo: bool,
    /// Demo state directory (CA at <state-dir>/ca.pem).
    #[arg(long, default_value = "./tlsgate-demo")]
    state_dir: PathBuf,
    /// Demo HTTPS port.
    #[arg(long, default_value_t = 8443)]
    https_port: u16,
    /// Demo plain-HTTP (redirect) port.
    #[arg(long, default_value_t = 8080)]
    http_port: u16,
    /// Demo admin (metrics) port.
    #[arg(long, default_value_t = 9090)]
    admin_port: u16,
    /// Binary upgrade: take over from the gateway running with the same `[server]
    /// upgrade_socket` (its listening sockets, ticket keys and sessions), start, then let it
    /// drain and exit; no connection is refused. When this process cannot start, it exits
    /// non-zero and the running gateway keeps serving.
    #[arg(long)]
    upgrade: bool,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let (path, banner) = if args.demo {
        let ports = DemoPorts {
            https: args.https_port,
            http: args.http_port,
            admin: args.admin_port,
        };
        let path = demo::prepare(&args.state_dir, ports)?;
        (path, Some(demo::banner(&args.state_dir, ports)))
    } else {
        (args.config.expect("clap enforces --config without --demo"), None)
    };
    let loaded = match tlsgate_config::load(&path) {
        Ok(loaded) => loaded,
        // Refused before it could even read its upgrade socket from a valid file: the running
        // gateway is still told why, when the file names one.
        Err(e) if args.upgrade => return Err(upgrade::refuse_unloadable(&path, anyhow::anyhow!("{e}"))),
        Err(e) => return Err(anyhow::anyhow!("{e}")),
    };
    crate::logging::init_serve(&loaded.config.log).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    for issue in tlsgate_config::validate::validate(&loaded.config) {
        tracing::warn!("{}: {issue}", path.display());
    }
    let config = acme::prepare(loaded.config).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut takeover = match args.upgrade {
        true => Some(upgrade::connect(&config, &path).context("cannot upgrade")?),
        false => None,
    };
    let started = match start(config, &path, takeover.as_mut()) {
        Ok(started) => started,
        Err(e) => {
            let Some(takeover) = takeover else { return Err(e) };
            let old = takeover.old_pid();
            tracing::error!("upgrade failed, process {old} keeps serving: {e:#}");
            takeover.fail(&format!("{e:#}"));
            return Err(e.context(format!("upgrade failed, process {old} keeps serving")));
        }
    };
    let Started {
        gateway,
        metrics,
        control,
        cluster,
        admin,
        threads,
        mut upgrades,
        config,
    } = started;
    if let Some(t) = takeover {
        upgrades.taking_over(t);
    }
    tracing::info!(
        workers = threads.len(),
        listeners = ?config.listeners.iter().map(|l| l.listen.to_string()).collect::<Vec<_>>(),
        admin = ?config.admin.listen,
        "tlsgate serving (generation 1)"
    );
    if let Some(banner) = banner {
        println!("{banner}");
    }

    let flow = control.block_on(control_loop(
        gateway.clone(),
        metrics,
        path,
        admin,
        cluster,
        config,
        upgrades,
    ));
    for t in threads {
        let _ = t.join();
    }
    tracing::info!("tlsgate stopped");
    crate::access_log::flush(Duration::from_secs(2));
    Ok(match flow {
        Flow::Failed => ExitCode::FAILURE,
        Flow::Continue | Flow::Stop | Flow::HandedOver => ExitCode::SUCCESS,
    })
}

/// A gateway built, listening and with its workers started.
struct Started {
    gateway: Arc<Gateway>,
    metrics: Arc<Metrics>,
    control: tokio::runtime::Runtime,
    cluster: Option<Arc<tlsgate_cluster::ClusterStore>>,
    admin: Option<(std::net::TcpListener, tlsgate_admin::Guard)>,
    threads: Vec<std::thread::JoinHandle<()>>,
    upgrades: Upgrades,
    config: Config,
}

/// Builds the gateway and starts its workers; a successor (`takeover`) receives the old
/// process's sockets and session state once built, and listens with them.
fn start(config: Config, path: &Path, takeover: Option<&mut takeover::Takeover>) -> anyhow::Result<Started> {
    let mut metrics = Metrics::new();
    tlsgate_keyless::client_metrics::register(metrics.registry_mut());
    tlsgate_tls::access_rules::register(metrics.registry_mut());
    tlsgate_proxy::request::rate_limit::register(metrics.registry_mut());
    acme_metrics::register(metrics.registry_mut());
    tlsgate_proxy::downstream::quic::metrics::register(metrics.registry_mut());
    tlsgate_tls::ech_ring::register(metrics.registry_mut());
    let metrics = Arc::new(metrics);
    let workers = match config.server.workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    // Origin connections are kept per worker (`tlsgate_proxy::worker_slot`).
    tlsgate_proxy::worker_slot::set_workers(workers);
    let gateway =
        Gateway::new(config.clone(), metrics.clone()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut inherited = match takeover {
        Some(t) => Some(t.receive(&gateway)?),
        None => None,
    };

    // Bind everything up front, before joining a cluster or the control plane, so a busy port is
    // a clear startup error (exit status 1) with no side effects, not a worker's log line. Each
    // address is taken exclusively: another process already listening there (a second
    // `tlsgate serve` with the same configuration included) is refused, not joined
    // (`listener::bind_workers`). A successor listens with the sockets it took over.
    let mut per_worker: Vec<Vec<(std::net::TcpListener, ListenerConfig)>> = (0..workers).map(|_| Vec::new()).collect();
    for l in &config.listeners {
        let taken = inherited
            .as_mut()
            .map(|i| i.take_listeners(l.listen))
            .unwrap_or_default();
        let groups = if taken.is_empty() {
            listener::bind_workers(l, workers)?
                .into_iter()
                .map(|s| vec![s])
                .collect()
        } else {
            listener::adopt_workers(l, taken, workers)?
        };
        for (sockets, group) in per_worker.iter_mut().zip(groups) {
            sockets.extend(group.into_iter().map(|s| (s, l.clone())));
        }
    }
    listener::warn_if_tfo_disabled(&config.listeners);
    // HTTP/3: one UDP socket per worker and QUIC address (docs/HTTP3.md). A successor of a
    // binary upgrade takes the old process's sockets over with their links to it; where it
    // cannot, the old process keeps the address and this one serves TCP.
    let mut adopted = inherited.as_mut().map(|i| i.take_quic()).unwrap_or_default();
    let quic_secret = inherited.as_mut().and_then(|i| i.take_quic_secret());
    let (mut quic, quic_handed, quic_surplus, quic_secret) =
        match tlsgate_proxy::downstream::quic::bind(&config, workers, &mut adopted, quic_secret) {
            Ok(b) => (b.workers.into_iter(), b.handed, b.surplus, b.secret),
            Err(e) if inherited.is_some() => {
                tracing::warn!("HTTP/3 not served by this process after the upgrade: {e}");
                (Vec::new().into_iter(), Vec::new(), None, None)
            }
            Err(e) => return Err(e.into()),
        };
    for a in &adopted {
        tracing::info!(addr = %a.addr, "upgrade: the old process's QUIC socket on {} is not in this configuration; closed", a.addr);
    }
    drop(adopted);
    let admin = match config.admin.listen {
        Some(addr) => {
            let l = match inherited.as_mut().and_then(|i| i.take_admin(addr)) {
                Some(l) => l,
                // std's bind sets SO_REUSEADDR and never SO_REUSEPORT: exclusive already.
                None => std::net::TcpListener::bind(addr)
                    .map_err(|e| listener::ListenError::new(addr, e))
                    .context("admin.listen")?,
            };
            l.set_nonblocking(true)?;
            let guard = tlsgate_admin::Guard::new(l.local_addr()?, &config.admin.allowed_hosts)
                .map_err(|e| anyhow::anyhow!("{}: admin.allowed_hosts: {e}", path.display()))?;
            Some((l, guard))
        }
        None => None,
    };
    let upgrade_listener = match &config.server.upgrade_socket {
        Some(socket) => match inherited.as_mut().and_then(|i| i.take_upgrade(socket)) {
            Some(l) => Some(l),
            None => Some(upgrade_socket::bind(socket).context("server.upgrade_socket")?),
        },
        None => None,
    };
    let stale_upgrade_socket = inherited.and_then(|i| i.close_rest());
    // What a successor will take over: a duplicate of every listening socket.
    let mut handed = Vec::new();
    if upgrade_listener.is_some() {
        for (socket, _) in per_worker.iter().flatten() {
            handed.push((SocketKind::Listener, OwnedFd::from(socket.try_clone()?)));
        }
        if let Some((l, _)) = &admin {
            handed.push((SocketKind::Admin, OwnedFd::from(l.try_clone()?)));
        }
        handed.extend(quic_handed);
    }
    let upgrades = Upgrades::new(
        &gateway,
        &config,
        handed,
        quic_secret,
        quic_surplus,
        upgrade_listener,
        stale_upgrade_socket,
    )?;

    // The control loop's runtime owns the cluster store's background tasks (writes, probe).
    let control = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let cluster = {
        let _runtime = control.enter();
        let joined =
            crate::cluster_setup::join(&config, &gateway).map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
        control_plane::start(&config, &gateway).map_err(|e| anyhow::anyhow!("{}: control: {e:#}", path.display()))?;
        acme_manager::start(&config, &gateway, joined.acme);
        joined.store
    };

    let mut threads = Vec::new();
    notify::expect_workers(per_worker.len());
    for (i, sockets) in per_worker.into_iter().enumerate() {
        let gw = gateway.clone();
        let quic = quic.next();
        let handle = std::thread::Builder::new()
            .name(format!("tlsgate-worker-{i}"))
            .spawn(move || {
                tlsgate_proxy::worker_slot::enter(i);
                worker(gw, sockets, quic)
            })
            .context("cannot start a worker thread")?;
        threads.push(handle);
    }
    Ok(Started {
        gateway,
        metrics,
        control,
        cluster,
        admin,
        threads,
        upgrades,
        config,
    })
}

/// One worker: its own event loop and sockets; returns once drained after shutdown.
fn worker(
    gateway: Arc<Gateway>,
    sockets: Vec<(std::net::TcpListener, ListenerConfig)>,
    quic: Option<tlsgate_proxy::downstream::quic::QuicWorker>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start a worker event loop");
            return;
        }
    };
    rt.block_on(async move {
        for (socket, config) in sockets {
            tokio::spawn(listener::accept_loop(gateway.clone(), socket, config));
        }
        if let Some(quic) = quic {
            quic.spawn(gateway.clone());
        }
        tokio::spawn(release_free_memory(gateway.clone()));
        notify::worker_accepting().await;
        let mut shutdown = gateway.shutdown_signal();
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
        let deadline = Instant::now() + gateway.current().config.server.drain_timeout.get();
        while gateway.open_connections() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// A worker's allocator housekeeping: every `server.memory_release_interval` (read afresh each
/// time, so a reload applies), when the worker was quiet over that interval, the memory this
/// thread freed and the allocator still holds goes back to the OS
/// (`tlsgate_tls::release_free_memory`). Without it, what a burst of connections or the idle
/// connections' released buffers freed stays resident while the worker is quiet: 2,000 idle
/// HTTP/2 connections read 11.5 KiB each 6 s after their last request, 8.7 with it
/// (docs/BENCHMARKS.md). A busy worker is left alone: it allocates, and the allocator purges
/// on its own there (a collection each second under load read 0.86–1.01× the requests per
/// CPU-second of none).
async fn release_free_memory(gateway: Arc<Gateway>) {
    let mut cpu_before = thread_cpu_time();
    loop {
        let every = gateway.current().config.server.memory_release_interval.get();
        if every.is_zero() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        tokio::time::sleep(every).await;
        let cpu = thread_cpu_time();
        let busy = cpu.saturating_sub(cpu_before);
        cpu_before = cpu;
        if busy < every / QUIET_SHARE {
            tlsgate_tls::release_free_memory();
        }
    }
}

/// A worker on the CPU for less than this share of a release interval (1/16: 6 %) was quiet.
const QUIET_SHARE: u32 = 16;

/// The calling thread's CPU time (user + system), zero where the clock cannot be read.
fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

struct Control {
    gateway: Arc<Gateway>,
    cluster: Option<Arc<tlsgate_cluster::ClusterStore>>,
    metrics: Arc<Metrics>,
    path: PathBuf,
    reload_lock: tokio::sync::Mutex<()>,
    /// The configuration the process started with: what its sockets, workers and stores follow
    /// whatever reloads installed since (see `restart_only`).
    started: Config,
}

impl Control {
    async fn reload(&self) -> Result<ReloadReport, InstallError> {
        let _serial = self.reload_lock.lock().await;
        let result = self.try_reload();
        let label = if result.is_ok() { "ok" } else { "error" };
        self.metrics
            .reloads
            .get_or_create(&tlsgate_admin::metrics::ResultLabels { result: label })
            .inc();
        match &result {
            Ok(report) => {
                tracing::info!("{}", report.summary);
                if !report.not_applied.is_empty() {
                    tracing::warn!(
                        changes = ?report.not_applied,
                        "configuration changes not applied: they take effect only after a restart"
                    );
                }
            }
            Err(reason) => tracing::error!(
                kind = reason.kind(),
                "reload refused, still serving generation {}: {reason}",
                self.gateway.current().id
            ),
        }
        result
    }

    /// Installs the re-read file; what it changes among the settings fixed at start is not
    /// applied and is reported (compared with the start, not with the previous reload, so a
    /// change stays reported until the restart).
    fn try_reload(&self) -> Result<ReloadReport, InstallError> {
        let loaded = tlsgate_config::load(&self.path)?;
        let not_applied = restart_only::not_applied(&self.started, &loaded.config);
        let config = acme::prepare(control_plane::with_overlay(loaded.config)?)?;
        let id = self.gateway.install(config)?;
        Ok(ReloadReport {
            summary: format!("configuration reloaded from {} (generation {id})", self.path.display()),
            not_applied,
        })
    }
}

struct Hooks(Arc<Control>);

impl AdminHooks for Hooks {
    fn before_scrape(&self) {
        let gw = &self.0.gateway;
        let m = &self.0.metrics;
        let cache = &gw.sessions.cache;
        let tickets = &gw.sessions.tickets;
        use std::sync::atomic::Ordering::Relaxed;
        m.set_gauge("session_cache_entries", cache.len() as u64);
        m.set_gauge("session_cache_stored_total", cache.stats.stored.load(Relaxed));
        m.set_gauge("session_cache_hits_total", cache.stats.hits.load(Relaxed));
        m.set_gauge("session_cache_misses_total", cache.stats.misses.load(Relaxed));
        m.set_gauge("ticket_keys", tickets.key_names().len() as u64);
        m.set_gauge("ticket_key_rotations_total", tickets.stats.rotations.load(Relaxed));
        m.set_gauge("tickets_issued_total", tickets.stats.encrypted.load(Relaxed));
        m.set_gauge("tickets_accepted_total", tickets.stats.decrypted_current.load(Relaxed));
        m.set_gauge(
            "tickets_accepted_renewed_total",
            tickets.stats.decrypted_renew.load(Relaxed),
        );
        m.set_gauge("tickets_unknown_key_total", tickets.stats.unknown_key.load(Relaxed));
        m.set_gauge("config_generation", gw.current().id);
        m.set_gauge("session_cache_remote_hits_total", cache.stats.remote_hits.load(Relaxed));
        m.set_gauge(
            "session_cache_remote_misses_total",
            cache.stats.remote_misses.load(Relaxed),
        );
        let ed = &gw.sessions.early_data.stats;
        m.set_gauge("early_data_offered_total", ed.offered.load(Relaxed));
        m.set_gauge("early_data_claimed_total", ed.claimed.load(Relaxed));
        m.set_gauge("early_data_refused_replay_total", ed.refused_replay.load(Relaxed));
        m.set_gauge(
            "early_data_refused_unavailable_total",
            ed.refused_unavailable.load(Relaxed),
        );
        m.set_gauge("early_data_accepted_total", ed.accepted.load(Relaxed));
        m.set_gauge("early_data_requests_served_total", ed.requests_served.load(Relaxed));
        m.set_gauge(
            "early_data_requests_too_early_total",
            ed.requests_too_early.load(Relaxed),
        );
        if let Some(store) = &self.0.cluster {
            crate::cluster_setup::export_metrics(store, m);
        }
        let cc = &tlsgate_tls::cert_compression::STATS;
        m.set_gauge(
            "cert_compression_brotli_handshakes_total",
            cc.brotli_handshakes.load(Relaxed),
        );
        m.set_gauge(
            "cert_compression_zlib_handshakes_total",
            cc.zlib_handshakes.load(Relaxed),
        );
        m.set_gauge("cert_compression_bytes_saved_total", cc.bytes_saved.load(Relaxed));
        m.set_gauge("cert_compressions_computed_total", cc.computed.load(Relaxed));
        tlsgate_proxy::downstream::stapling::export_metrics(gw);
        tlsgate_proxy::downstream::delegation::export_metrics(gw);
        control_plane::export_metrics(m);
        tlsgate_proxy::upstream::export_in_flight(gw);
        tlsgate_proxy::upstream::server::export_connections(gw);
        tlsgate_proxy::upstream::health::export_metrics(gw);
        m.set_gauge("access_log_dropped_lines_total", crate::access_log::dropped());
        m.set_gauge("access_log_write_errors_total", crate::access_log::write_errors());
        m.set_gauge("upgrades_refused_total", handover::STATS.refused.load(Relaxed));
        m.set_gauge("upgrades_failed_total", handover::STATS.failed.load(Relaxed));
        m.set_gauge("handshake_budget_evictions_total", gw.handshake_budget.evictions());
        gw.rate_limits.export_metrics();
    }

    fn reload(&self) -> Pin<Box<dyn Future<Output = Result<ReloadReport, ReloadError>> + Send>> {
        let control = self.0.clone();
        Box::pin(async move { control.reload().await.map_err(|e| Box::new(e) as ReloadError) })
    }

    fn api(&self, method: &tlsgate_admin::Method, path: &str, body: &[u8]) -> Option<tlsgate_admin::ApiFuture> {
        if path == "/reopen-logs" {
            return Some(Box::pin(crate::access_log::admin_reopen(method.clone())));
        }
        admin_api::route(method, path, body)
    }
}

async fn control_loop(
    gateway: Arc<Gateway>,
    metrics: Arc<Metrics>,
    path: PathBuf,
    admin: Option<(std::net::TcpListener, tlsgate_admin::Guard)>,
    cluster: Option<Arc<tlsgate_cluster::ClusterStore>>,
    started: Config,
    mut upgrades: Upgrades,
) -> Flow {
    let control = Arc::new(Control {
        gateway: gateway.clone(),
        cluster,
        metrics: metrics.clone(),
        path,
        reload_lock: Default::default(),
        started,
    });
    let mut admin_task = None;
    if let Some((l, guard)) = admin {
        match tokio::net::TcpListener::from_std(l) {
            Ok(l) => {
                admin_task = Some(tokio::spawn(tlsgate_admin::serve_admin(
                    l,
                    metrics.clone(),
                    Arc::new(Hooks(control.clone())),
                    guard,
                )));
            }
            Err(e) => tracing::error!(error = %e, "cannot start the admin listener"),
        }
    }
    tokio::spawn(rotate_ticket_keys(gateway.clone()));
    tokio::spawn(crate::ech_rotate::run(gateway.clone()));
    tokio::spawn(tlsgate_proxy::downstream::stapling::run(gateway.clone()));
    tokio::spawn(tlsgate_proxy::downstream::delegation::run(gateway.clone()));
    tokio::spawn(cert_watch::run(gateway.clone(), metrics.clone()));
    let (mut hup, mut term, mut int, mut usr1, mut usr2) = match (
        signal(SignalKind::hangup()),
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::user_defined1()),
        signal(SignalKind::user_defined2()),
    ) {
        (Ok(h), Ok(t), Ok(i), Ok(u1), Ok(u2)) => (h, t, i, u1, u2),
        _ => {
            tracing::error!("cannot install signal handlers");
            return Flow::Failed;
        }
    };
    upgrades.begin(control.started.listeners.len(), gateway.current().id);
    let flow = loop {
        tokio::select! {
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading configuration");
                let main = upgrades.is_main();
                if main {
                    notify::reloading();
                }
                let result = control.reload().await;
                if main {
                    notify::reloaded(&result, gateway.current().id);
                }
            }
            _ = usr1.recv() => {
                let _ = crate::access_log::reopen_logged("SIGUSR1").await;
            }
            _ = usr2.recv() => upgrades.on_usr2(&control.path),
            event = upgrades.next_event() => match upgrades.on_event(event) {
                Flow::Continue => {}
                stop => break stop,
            },
            _ = term.recv() => break Flow::Stop,
            _ = int.recv() => break Flow::Stop,
        }
    };
    let main = upgrades.is_main();
    upgrades.finish(&flow);
    let drain = gateway.current().config.server.drain_timeout.get();
    tracing::info!(
        open = gateway.open_connections(),
        "shutting down: draining connections for up to {drain:?}"
    );
    if main {
        notify::stopping(drain);
    }
    if flow == Flow::HandedOver {
        // The successor serves the admin address from the same socket now.
        if let Some(task) = admin_task.take() {
            task.abort();
        }
    }
    gateway.begin_shutdown();
    let deadline = Instant::now() + drain;
    while gateway.open_connections() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if gateway.open_connections() > 0 {
        tracing::warn!(
            open = gateway.open_connections(),
            "drain deadline reached; closing the remaining connections"
        );
    }
    flow
}

/// Rotates ticket keys every `tls.tickets.rotation` (re-read after each rotation, so reloads
/// apply) and erases expired keys every few seconds.
async fn rotate_ticket_keys(gateway: Arc<Gateway>) {
    let mut last = Instant::now();
    loop {
        if let Some(next) = gateway.sessions.tickets.next_change() {
            // Cluster-derived keys: recompute at each epoch boundary (every node at once).
            tokio::time::sleep(next.min(Duration::from_secs(5))).await;
            gateway.sessions.tickets.rotate();
            continue;
        }
        let rotation = gateway.current().config.tls.tickets.rotation.get();
        let wait = rotation.saturating_sub(last.elapsed()).min(Duration::from_secs(5));
        tokio::time::sleep(wait).await;
        if last.elapsed() >= rotation {
            gateway.sessions.tickets.rotate();
            last = Instant::now();
            tracing::debug!(keys = gateway.sessions.tickets.key_names().len(), "ticket key rotated");
        } else {
            gateway.sessions.tickets.purge();
        }
    }
}

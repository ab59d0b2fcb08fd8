//! tlsgate's web console (issue #8): a JSON API and an embedded UI over the cluster's control
//! document (Redis, `tlsgate-control`) and the live nodes' metrics. See docs/CONSOLE.md.
//!
//! - [`server`]: HTTP, the request guard (tlsgate-admin's `guard`: Host/Origin checks, writes
//!   only as JSON or with `X-Tlsgate-Request`, header timeout, connection cap), authentication,
//!   the login form and the embedded assets.
//! - [`api`]: the JSON API handlers.
//! - [`auth`]: token / session-cookie authentication; open on loopback only.
//! - [`collector`]: scrapes every node's `/metrics` every interval into a [`collector::Snapshot`].
//! - [`scrape`]: one node's scrape (a bounded plain-HTTP GET of its admin listener).
//! - [`error`]: why the console refused to start or refused a login.
//! - [`figures`]: what one node's metrics say (rates, quantiles, key servers, session cache).
//! - [`prom`]: the Prometheus text reader.
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod collector;
pub mod error;
pub mod figures;
pub mod prom;
pub mod scrape;
pub mod server;

use auth::Auth;
use collector::{Shared, Snapshot};
pub use error::ConsoleError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_admin::guard::{self, Guard};
use tlsgate_control::{ControlStore, StoreConfig};

/// How the console runs.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// Where it listens (loopback: no authentication needed).
    pub listen: SocketAddr,
    /// The token (from `--token-file`); required unless `listen` is loopback.
    pub token: Option<String>,
    /// More names the console answers to in `Host`/`Origin` (`--allowed-host`), besides its
    /// listen address, `localhost` and loopback IPs.
    pub allowed_hosts: Vec<String>,
    /// The control store.
    pub store: StoreConfig,
    /// How often nodes are scraped.
    pub scrape_interval: Duration,
}

/// What the handlers share.
#[derive(Debug)]
pub struct State {
    /// The control store.
    pub store: ControlStore,
    /// Authentication.
    pub auth: Auth,
    /// The Host/Origin/CSRF checks every request passes first.
    pub guard: Guard,
    /// The collector's latest snapshot.
    pub snapshot: Shared,
}

impl State {
    /// A copy of the collector's latest snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A bound console, ready to [`serve`](Console::serve).
#[derive(Debug)]
pub struct Console {
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    interval: Duration,
}

impl Console {
    /// Checks the configuration (a non-loopback bind needs a token, allowed hosts must be host
    /// names or addresses) and binds.
    pub async fn bind(config: ConsoleConfig) -> Result<Self, ConsoleError> {
        let auth = Auth::new(config.listen, config.token)?;
        // Checked before binding with the configured address; rebuilt below with the bound port.
        Guard::new(config.listen, &config.allowed_hosts)?;
        let store = ControlStore::new(config.store).map_err(ConsoleError::Store)?;
        let listen_error = |source| ConsoleError::Listen {
            addr: config.listen,
            source,
        };
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        let guard = Guard::new(bound, &config.allowed_hosts)?;
        Ok(Self {
            listener,
            state: Arc::new(State {
                store,
                auth,
                guard,
                snapshot: Shared::default(),
            }),
            interval: config.scrape_interval,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is dropped; runs the collector alongside.
    pub async fn serve(self) {
        let collector = tokio::spawn(collector::run(
            self.state.store.clone(),
            self.state.snapshot.clone(),
            self.interval,
        ));
        let _stop = AbortOnDrop(collector);
        let state = self.state;
        guard::serve_http1(self.listener, guard::Limits::default(), "console", move |_peer| {
            let state = state.clone();
            hyper::service::service_fn(move |req| server::handle(req, state.clone()))
        })
        .await;
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

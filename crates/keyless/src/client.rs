//! The gateway's key-server client: one named pool of key servers, each with persistent
//! connections; weighted least-outstanding-requests choice, drain, bounded retry on another
//! server, circuit breaking. Members can change at runtime ([`Client::set_members`]) without
//! disturbing requests in flight. Connections run on one small dedicated runtime; a signature
//! is driven by the handshake's own task (queue the frame, await the answer's oneshot).

use crate::client_conn::{Conn, ConnSettings};
use crate::client_error::{ClientError, SignError};
use crate::client_metrics::{metrics, AttemptLabels};
use crate::client_server::{run_slot, ServerState, Settings};
use crate::codec::{ErrorCode, KeyId, Request, Response};
use crate::keystore::hex;
use crate::members::{validate_members, Member, MemberStatus, MembersError};
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
use std::time::Instant;
use tlsgate_config::KeylessConfig;
use tlsgate_error::Classify;

/// The runtime every key-server connection runs on: one thread with a single-threaded
/// runtime, so a connection's reader and writer never hand its TLS stream between threads and a
/// request wakes one thread, not a work-stealing scheduler (measured: docs/BENCHMARKS.md,
/// "Added handshake latency").
pub(crate) static RUNTIME: LazyLock<tokio::runtime::Handle> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("start the keyless runtime");
    let handle = rt.handle().clone();
    std::thread::Builder::new()
        .name("tlsgate-keyless".into())
        .spawn(move || rt.block_on(std::future::pending::<()>()))
        .expect("start the keyless thread");
    handle
});

/// A pool of key servers, shared by every certificate that names the same pool.
pub struct Client {
    /// Pool name.
    pub name: String,
    settings: Arc<Settings>,
    servers: RwLock<Arc<Vec<Arc<ServerState>>>>,
    /// Serialises membership changes.
    change: Mutex<()>,
}

impl Drop for Client {
    fn drop(&mut self) {
        for s in self.servers.read().iter() {
            s.stop();
        }
    }
}

impl Client {
    /// Starts connecting to `servers` (weight 1, not drained), a pool called `name`.
    pub fn start(config: &KeylessConfig, name: &str, servers: &[String]) -> Result<Arc<Self>, ClientError> {
        let connector = crate::tls_setup::connector(&config.client_certificate, &config.client_key, &config.server_ca)?;
        let settings = Arc::new(Settings {
            conn: ConnSettings {
                connector,
                connect_timeout: config.connect_timeout.get(),
                health_interval: config.health_interval.get(),
            },
            request_timeout: config.request_timeout.get(),
            connections_per_server: config.connections_per_server.max(1),
            retries: config.retries,
            failure_threshold: config.failure_threshold.max(1),
            breaker_cooldown: config.breaker_cooldown.get(),
            events: tokio::sync::watch::channel(0).0,
        });
        let client = Arc::new(Self {
            name: name.to_string(),
            settings,
            servers: RwLock::new(Arc::new(Vec::new())),
            change: Mutex::new(()),
        });
        let members: Vec<Member> = servers.iter().map(Member::new).collect();
        client.set_members(&members)?;
        Ok(client)
    }

    fn start_server(&self, member: &Member) -> Arc<ServerState> {
        let (state, stop) = ServerState::new(&self.name, member, self.settings.clone());
        for slot in 0..state.slot_count() {
            RUNTIME.spawn(run_slot(state.clone(), slot, stop.clone()));
        }
        state
    }

    /// Replaces the pool's members: kept servers keep their connections (weight and drain are
    /// updated in place), new ones start connecting, removed ones take no new requests and close
    /// once the requests they hold have had `request_timeout` to finish.
    pub fn set_members(&self, members: &[Member]) -> Result<(), MembersError> {
        validate_members(members)?;
        let _change = self.change.lock();
        let old = self.servers.read().clone();
        let mut next = Vec::with_capacity(members.len());
        for member in members {
            match old.iter().find(|s| s.addr == member.address) {
                Some(kept) => {
                    kept.apply(member);
                    next.push(kept.clone());
                }
                None => next.push(self.start_server(member)),
            }
        }
        *self.servers.write() = Arc::new(next);
        for gone in old.iter().filter(|s| !members.iter().any(|m| m.address == s.addr)) {
            let gone = gone.clone();
            let grace = self.settings.request_timeout;
            tracing::info!(pool = %self.name, key_server = %gone.addr, "key server removed from its pool");
            RUNTIME.spawn(async move {
                tokio::time::sleep(grace).await;
                gone.stop();
            });
        }
        tracing::info!(pool = %self.name, members = ?members, "key-server pool members set");
        Ok(())
    }

    /// Members and their state now.
    pub fn members(&self) -> Vec<MemberStatus> {
        self.servers.read().iter().map(|s| s.status()).collect()
    }

    /// The least loaded server (requests in flight / weight) among those with a live connection,
    /// preferring, in turn: untried, not drained, closed circuit. Ties are broken at random in
    /// proportion to weight, so an idle pool spreads load by weight.
    fn pick(&self, tried: &[Arc<ServerState>]) -> Option<Choice> {
        let servers = self.servers.read().clone();
        let live: Vec<Choice> = servers
            .iter()
            .filter_map(|s| s.conn().map(|c| (s.clone(), c)))
            .collect();
        let untried = |s: &Arc<ServerState>| !tried.iter().any(|t| Arc::ptr_eq(t, s));
        let serving = |s: &Arc<ServerState>| !s.drain.load(Ordering::Relaxed);
        best(&live, |s| untried(s) && serving(s) && s.circuit_closed())
            .or_else(|| best(&live, |s| untried(s) && serving(s)))
            .or_else(|| best(&live, untried))
            .or_else(|| best(&live, |_| true))
    }

    /// [`Client::pick`], except that when no server has a live connection yet but some server
    /// is still on its first connection attempt (the gateway just started, or the member was
    /// just added), it waits for that attempt, at most `connect_timeout`, instead of failing
    /// the handshake. A pool whose servers all failed fails at once.
    async fn pick_or_wait(&self, tried: &[Arc<ServerState>]) -> Option<Choice> {
        if let Some(choice) = self.pick(tried) {
            return Some(choice);
        }
        let mut events = self.settings.events.subscribe();
        let wait = async {
            loop {
                events.borrow_and_update();
                if let Some(choice) = self.pick(tried) {
                    return Some(choice);
                }
                if !self.servers.read().iter().any(|s| s.starting()) {
                    return None;
                }
                if events.changed().await.is_err() {
                    return None;
                }
            }
        };
        let choice = tlsgate_timer::timeout(self.settings.conn.connect_timeout, wait)
            .await
            .ok()
            .flatten();
        if choice.is_some() {
            metrics().startup_waits.inc();
        }
        choice
    }

    /// Signs on some key server, retrying elsewhere on failure, timeout or overload (a
    /// signature is idempotent); a refusal ([`SignError::Refused`]) is final.
    pub async fn sign(self: Arc<Self>, key_id: KeyId, algorithm: u16, payload: Vec<u8>) -> Result<Vec<u8>, SignError> {
        let request = Request::Sign {
            key_id,
            algorithm,
            payload,
        };
        self.call(request, key_id).await
    }

    /// Asks for a delegated credential's signature (RFC 9345): `payload` is the credential
    /// signing input for a certificate of `key_id`; retried like [`Client::sign`].
    pub async fn delegate(
        self: Arc<Self>,
        key_id: KeyId,
        algorithm: u16,
        payload: Vec<u8>,
    ) -> Result<Vec<u8>, SignError> {
        let request = Request::Delegate {
            key_id,
            algorithm,
            payload,
        };
        self.call(request, key_id).await
    }

    /// Asks a key server to create a key and answer a CSR for it (`payload`: a
    /// `crate::new_key` request). Not retried: a retry could leave a second key behind.
    pub async fn new_key(self: Arc<Self>, payload: Vec<u8>) -> Result<Vec<u8>, SignError> {
        self.call(Request::NewKey(payload), [0; 32]).await
    }

    /// Sends `request` (about `key_id`) to some key server, retrying elsewhere on failure.
    async fn call(self: Arc<Self>, request: Request, key_id: KeyId) -> Result<Vec<u8>, SignError> {
        let started = Instant::now();
        let m = metrics();
        let timeout = self.settings.request_timeout;
        let attempts = if matches!(request, Request::NewKey(_)) {
            1
        } else {
            1 + self.settings.retries
        };
        let mut tried: Vec<Arc<ServerState>> = Vec::new();
        let mut last = SignError::NoServer;
        for attempt in 0..attempts {
            let picked = if attempt == 0 {
                self.pick_or_wait(&tried).await
            } else {
                self.pick(&tried)
            };
            let Some((server, conn)) = picked else { break };
            if attempt > 0 {
                m.retries.inc();
            }
            tried.push(server.clone());
            let server_name = || server.addr.clone();
            let Ok((id, rx)) = conn.request(&request) else {
                last = SignError::Closed { server: server_name() };
                count(&server, last.kind());
                continue;
            };
            let in_flight = &server.hot.in_flight;
            in_flight.inc();
            server.outstanding.fetch_add(1, Ordering::Relaxed);
            conn.outstanding.fetch_add(1, Ordering::Relaxed);
            let sent = Instant::now();
            // The thread's shared timer: no timer-wheel arm (and eventfd wake) per signature.
            let answer = tlsgate_timer::timeout(timeout, rx).await;
            server.outstanding.fetch_sub(1, Ordering::Relaxed);
            conn.outstanding.fetch_sub(1, Ordering::Relaxed);
            in_flight.dec();
            if let Ok(Ok(_)) = &answer {
                server.hot.attempt_duration.observe(sent.elapsed().as_secs_f64());
            }
            let failed = match answer {
                Ok(Ok(Response::Signature(sig) | Response::Created(sig))) => {
                    server.success();
                    count(&server, "ok");
                    m.sign_duration.observe(started.elapsed().as_secs_f64());
                    return Ok(sig);
                }
                Ok(Ok(Response::Error(
                    code @ (ErrorCode::UnknownKey | ErrorCode::UnsupportedAlgorithm | ErrorCode::Refused),
                ))) => {
                    // The server works; it will not sign this, and no other would.
                    server.success();
                    let refused = SignError::Refused {
                        server: server_name(),
                        code,
                        key: hex(&key_id),
                    };
                    count(&server, refused.kind());
                    m.failures.inc();
                    return Err(refused);
                }
                Ok(Ok(Response::Error(code))) => SignError::Failed {
                    server: server_name(),
                    code,
                },
                Ok(Ok(_)) => SignError::Unexpected { server: server_name() },
                Ok(Err(_)) => SignError::Lost { server: server_name() },
                Err(_) => {
                    conn.cancel(id);
                    SignError::Timeout {
                        server: server_name(),
                        timeout,
                    }
                }
            };
            server.failure();
            count(&server, failed.kind());
            tracing::debug!(error = %failed, kind = failed.kind(), "key server request failed; retrying elsewhere");
            last = failed;
        }
        m.failures.inc();
        Err(last)
    }
}

/// A server and the connection a request would use.
type Choice = (Arc<ServerState>, Arc<Conn>);

/// Among `live` servers accepted by `pred`, the least loaded (outstanding / weight); ties at
/// random in proportion to weight.
fn best(live: &[Choice], pred: impl Fn(&Arc<ServerState>) -> bool) -> Option<Choice> {
    let load = |s: &ServerState| {
        (
            s.outstanding.load(Ordering::Relaxed) as u64,
            u64::from(s.weight.load(Ordering::Relaxed).max(1)),
        )
    };
    let candidates: Vec<(&Choice, (u64, u64))> = live
        .iter()
        .filter(|(s, _)| pred(s))
        .map(|entry| (entry, load(&entry.0)))
        .collect();
    // a/b < c/d  <=>  a*d < c*b
    let (low_n, low_w) = candidates
        .iter()
        .map(|(_, l)| *l)
        .min_by(|(a, b), (c, d)| (a * d).cmp(&(c * b)))?;
    let ties: Vec<_> = candidates
        .into_iter()
        .filter(|(_, (n, w))| n * low_w == low_n * w)
        .collect();
    let total: u64 = ties.iter().map(|(_, (_, w))| w).sum();
    let mut ticket = rand::rng().random_range(0..total.max(1));
    for (entry, (_, w)) in &ties {
        if ticket < *w {
            return Some((entry.0.clone(), entry.1.clone()));
        }
        ticket -= w;
    }
    ties.last().map(|(entry, _)| (entry.0.clone(), entry.1.clone()))
}

fn count(server: &ServerState, result: &'static str) {
    if result == "ok" {
        server.hot.ok.inc();
        return;
    }
    metrics()
        .attempts
        .get_or_create(&AttemptLabels {
            pool: server.labels.pool.clone(),
            server: server.labels.server.clone(),
            result,
        })
        .inc();
}

//! The key server: mutual-TLS connections from gateways, pipelined requests answered out of
//! order as signatures complete, signing on the [`SignerPool`].
//!
//! A connection is refused before any request is read when its client certificate does not
//! chain to `client_ca` (handshake failure) or is not in `allowed_clients`. A frame with a bad
//! body is answered `malformed` and the connection goes on; a frame with a bad header (version,
//! oversized length) is answered `malformed` and the connection is closed. Other connections
//! never notice.
//!
//! A sign request is answered `refused` (and counted in `refused_total{reason}`) when the
//! client's identity may not use the key (`[[client]]` permissions) or when its payload is not a
//! TLS server signing input ([`crate::signing_input`]): the key server is not a general signing
//! oracle. A connection whose answers are not being read is not read either once more than
//! [`BACKLOG_LIMIT`] bytes of them wait, and is closed when nothing can be written to it for
//! `frame_timeout`: one client cannot make the key server buffer without bound.

use crate::codec::{decode_request, encode_response, ErrorCode, KeyId, Request, Response};
use crate::frame_writer::{CountedSender, Drain};
use crate::keystore::{hex, KeyStore, KeyStoreError};
use crate::permissions::{Access, PermissionError, Permissions};
use crate::server_config::KeyServerConfig;
use crate::server_metrics::{serve_admin, ServerMetrics};
use crate::signer_pool::{Job, SignerPool};
use crate::tls_setup::TlsSetupError;
use crate::{algorithms, signing_input, tls_setup};
use boring::ssl::SslAcceptor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tlsgate_error::log_limit::LogLimit;
use tlsgate_error::{Classify, Side};
use tokio::io::AsyncReadExt;

/// Longest time a gateway may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Unsent answers (bytes) beyond which a connection's requests are no longer read.
pub const BACKLOG_LIMIT: usize = 256 * 1024;
/// Reading resumes once the unsent answers are down to this.
const BACKLOG_RESUME: usize = 64 * 1024;
/// Refused requests logged as warnings per connection (the rest at debug level).
const REFUSALS_LOGGED: u32 = 3;

struct Shared {
    /// Loaded keys; written only when a key is created for a gateway.
    keys: parking_lot::RwLock<KeyStore>,
    /// `[new_keys]`, when keys may be created.
    new_keys: Option<crate::server_config::NewKeysConfig>,
    /// Since start, for [`rescan_created`]'s pace.
    started: Instant,
    /// When `[new_keys] dir` was last read again (milliseconds since `started`; 0: never).
    last_rescan_ms: std::sync::atomic::AtomicU64,
    acceptor: SslAcceptor,
    allowed: Vec<String>,
    permissions: Permissions,
    pool: SignerPool,
    metrics: Arc<ServerMetrics>,
    frame_timeout: Duration,
    /// What `delegate` requests may obtain.
    delegation: crate::delegation::Policy,
}

/// Why the key server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A `keys` file or directory.
    #[error(transparent)]
    Keys(#[from] KeyStoreError),
    /// `keys` names only files and directories without a private key.
    #[error("keys: no private key found")]
    NoKeys,
    /// A `[[client]]` table names a key that is not loaded, or ambiguously.
    #[error(transparent)]
    Permissions(#[from] PermissionError),
    /// The certificate, key or client CA.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The signing threads or the I/O runtime could not start.
    #[error("cannot start {what}: {source}")]
    Start {
        /// `signing threads` or `the I/O runtime`.
        what: &'static str,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// A listener cannot be bound.
    #[error("{what}: cannot listen on {addr}: {source}")]
    Listen {
        /// `listen` or `admin`.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// The SIGTERM handler cannot be installed.
    #[error("cannot handle SIGTERM: {0}")]
    Signal(#[source] std::io::Error),
}

impl Classify for ServerError {
    fn side(&self) -> Side {
        match self {
            ServerError::Keys(e) => e.side(),
            ServerError::Tls(e) => e.side(),
            ServerError::NoKeys | ServerError::Permissions(_) | ServerError::Listen { .. } => Side::Config,
            ServerError::Start { .. } | ServerError::Signal(_) => Side::Internal,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            ServerError::Keys(e) => e.kind(),
            ServerError::Tls(e) => e.kind(),
            ServerError::NoKeys => "no_keys",
            ServerError::Permissions(e) => e.kind(),
            ServerError::Start { .. } => "start",
            ServerError::Listen { .. } => "listen",
            ServerError::Signal(_) => "signal",
        }
    }
}

/// Loads everything, binds, and serves until SIGTERM or SIGINT.
pub fn run(config: KeyServerConfig) -> Result<(), ServerError> {
    let mut keys = KeyStore::load(&config.keys)?;
    if let Some(n) = &config.new_keys {
        let created = crate::created_keys::load(&n.dir, &mut keys)?;
        tracing::info!(dir = %n.dir.display(), created, "keys created for gateways loaded");
    }
    if keys.is_empty() && config.new_keys.is_none() {
        return Err(ServerError::NoKeys);
    }
    for k in keys.iter() {
        tracing::info!(key_id = %hex(&k.id), name = %k.name, kind = k.kind.as_str(), path = %k.path.display(), "key loaded");
    }
    let permissions = Permissions::build(&config.clients, &keys)?;
    if !permissions.is_configured() {
        tracing::warn!(
            "no [[client]] permissions configured: every gateway let in may sign with every key (docs/KEYLESS.md)"
        );
    }
    let acceptor = tls_setup::acceptor(&config.certificate, &config.key, &config.client_ca)?;
    let metrics = Arc::new(ServerMetrics::new());
    let threads = match config.workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let pool = SignerPool::start(threads, config.queue, metrics.clone()).map_err(|source| ServerError::Start {
        what: "signing threads",
        source,
    })?;
    let shared = Arc::new(Shared {
        keys: parking_lot::RwLock::new(keys),
        new_keys: config.new_keys.clone(),
        started: Instant::now(),
        last_rescan_ms: Default::default(),
        acceptor,
        allowed: config.allowed_clients.clone(),
        permissions,
        pool,
        metrics: metrics.clone(),
        frame_timeout: config.frame_timeout.get(),
        delegation: crate::delegation::Policy {
            enabled: config.delegation.enabled,
            max_validity: config.delegation.max_validity.get(),
        },
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("keyserver-io")
        .enable_all()
        .build()
        .map_err(|source| ServerError::Start {
            what: "the I/O runtime",
            source,
        })?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Listen {
                what: "listen",
                addr: config.listen,
                source,
            })?;
        if let Some(addr) = config.admin {
            let admin = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ServerError::Listen {
                    what: "admin",
                    addr,
                    source,
                })?;
            tokio::spawn(serve_admin(admin, metrics));
        }
        tracing::info!(listen = %config.listen, admin = ?config.admin, threads, queue = config.queue, "key server serving");
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(ServerError::Signal)?;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(connection(stream, peer, shared.clone()));
                    }
                    Err(e) => {
                        // Out of descriptors every attempt fails: back off, a line a second at most.
                        static ACCEPT_FAILED_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));
                        if let Some(suppressed) = ACCEPT_FAILED_LOG.allow() {
                            tracing::warn!(error = %e, suppressed, "accept failed");
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                },
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        tracing::info!("key server stopped");
        Ok(())
    })
}

async fn connection(stream: tokio::net::TcpStream, peer: SocketAddr, s: Arc<Shared>) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio_boring::accept(&s.acceptor, stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::warn!(%peer, error = %e, "gateway refused: TLS handshake failed (client certificate?)");
            s.metrics.error("handshake");
            return;
        }
        Err(_) => {
            s.metrics.error("handshake");
            return;
        }
    };
    let ids = tls
        .ssl()
        .peer_certificate()
        .map(|c| tls_setup::identities(&c))
        .unwrap_or_default();
    if !s.allowed.is_empty() && !ids.iter().any(|id| s.allowed.contains(id)) {
        tracing::warn!(%peer, identities = ?ids, "gateway refused: client certificate not in allowed_clients");
        s.metrics.error("not_allowed");
        return;
    }
    tracing::debug!(%peer, identities = ?ids, "gateway connected");
    s.metrics.connections.inc();
    let mut conn = Conn {
        peer,
        access: s.permissions.access(&ids),
        ids,
        refusals: 0,
    };
    let (mut rd, wr) = tokio::io::split(tls);
    let (tx, mut writer) = crate::frame_writer::spawn_counted(wr);
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut stuck = false;
    'read: loop {
        let mut start = 0;
        loop {
            match decode_request(&buf[start..]) {
                Ok(Some((id, req, used))) => {
                    start += used;
                    dispatch(id, req, &tx, &s, &mut conn);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "bad frame from gateway");
                    s.metrics.error(e.kind.as_str());
                    answer(&tx, e.id, Response::Error(ErrorCode::Malformed));
                    match e.skip {
                        Some(n) => start += n,
                        None => break 'read,
                    }
                }
            }
        }
        buf.drain(..start);
        // Backpressure: a peer that does not read its answers gets no more requests read.
        if tx.backlog() > BACKLOG_LIMIT {
            s.metrics.read_pauses.inc();
            tracing::debug!(%peer, unsent = tx.backlog(), "answers not read by the gateway; reading paused");
            match tx.drained_to(BACKLOG_RESUME, s.frame_timeout).await {
                Drain::Done => {}
                Drain::Closed => break,
                Drain::Stuck => {
                    tracing::warn!(%peer, unsent = tx.backlog(), "gateway has read no answer for {:?}; closing the connection", s.frame_timeout);
                    s.metrics.error("not_reading");
                    stuck = true;
                    break;
                }
            }
        }
        // Idle connections are long-lived by design; a frame that has started must complete.
        let read = rd.read(&mut chunk);
        let result = if buf.is_empty() {
            read.await
        } else {
            match tokio::time::timeout(s.frame_timeout, read).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(%peer, pending = buf.len(), "frame incomplete for {:?}; closing the connection", s.frame_timeout);
                    s.metrics.error("stalled");
                    break;
                }
            }
        };
        match result {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    drop(tx);
    // The answers already made go out, unless the peer does not take them.
    if stuck || tokio::time::timeout(s.frame_timeout, &mut writer).await.is_err() {
        writer.abort();
    }
    s.metrics.connections.dec();
    tracing::debug!(%peer, "gateway disconnected");
}

/// What the server knows about one gateway connection.
struct Conn {
    peer: SocketAddr,
    /// Its client certificate's identities (`cn:…`, `spki:…`).
    ids: Vec<String>,
    /// The keys it may use.
    access: Access,
    /// Requests refused so far.
    refusals: u32,
}

fn answer(tx: &CountedSender, id: u32, resp: Response) {
    let mut frame = Vec::with_capacity(32);
    if encode_response(&mut frame, id, &resp).is_ok() {
        tx.send(frame);
    }
}

/// Answers `refused`, counts it, and logs the first few of the connection as warnings.
fn refuse(tx: &CountedSender, id: u32, s: &Shared, conn: &mut Conn, key: &str, reason: &'static str, why: &str) {
    s.metrics.count_refused(reason);
    conn.refusals = conn.refusals.saturating_add(1);
    if conn.refusals <= REFUSALS_LOGGED {
        tracing::warn!(peer = %conn.peer, identities = ?conn.ids, key, reason, "sign request refused: {why}");
    } else {
        tracing::debug!(peer = %conn.peer, key, reason, "sign request refused: {why}");
    }
    answer(tx, id, Response::Error(ErrorCode::Refused));
}

fn dispatch(id: u32, req: Request, tx: &CountedSender, s: &Arc<Shared>, conn: &mut Conn) {
    match req {
        Request::Ping(payload) => {
            s.metrics.pings.inc();
            answer(tx, id, Response::Pong(payload));
        }
        Request::Sign {
            key_id,
            algorithm,
            payload,
        } => submit(id, key_id, algorithm, payload, false, tx, s, conn),
        Request::Delegate {
            key_id,
            algorithm,
            payload,
        } => submit(id, key_id, algorithm, payload, true, tx, s, conn),
        Request::NewKey(payload) => new_key(id, &payload, tx, s, conn),
    }
}

/// An unknown key may have been created by another key server sharing `[new_keys] dir`:
/// the directory is read again (at most once a second) and the key looked up once more.
fn rescan_created(s: &Shared, key_id: &KeyId) -> Option<Arc<crate::keystore::Key>> {
    let cfg = s.new_keys.as_ref()?;
    let now = s.started.elapsed().as_millis() as u64;
    let last = s.last_rescan_ms.load(std::sync::atomic::Ordering::Relaxed);
    if last != 0 && now.saturating_sub(last) < 1000 {
        return None;
    }
    s.last_rescan_ms.store(now.max(1), std::sync::atomic::Ordering::Relaxed);
    let mut fresh = KeyStore::default();
    if let Err(e) = crate::created_keys::load(&cfg.dir, &mut fresh) {
        tracing::warn!(error = %e, "reading [new_keys] dir again failed");
        return None;
    }
    let key = fresh.get(key_id)?;
    tracing::info!(key_id = %hex(key_id), path = %key.path.display(), "key created by another key server loaded");
    s.keys.write().insert(key.clone());
    Some(key)
}

/// Creates a key and answers its CSR (`created_keys`), off the I/O threads.
fn new_key(id: u32, payload: &[u8], tx: &CountedSender, s: &Arc<Shared>, conn: &mut Conn) {
    let Some(cfg) = s.new_keys.clone() else {
        return refuse(
            tx,
            id,
            s,
            conn,
            "-",
            "new_keys_disabled",
            "this key server creates no keys ([new_keys])",
        );
    };
    let req = match crate::new_key::parse(payload) {
        Ok(r) => r,
        Err(e) => return refuse(tx, id, s, conn, "-", e.reason(), &e.to_string()),
    };
    let Some(creator) = crate::created_keys::creator(&conn.ids).map(str::to_string) else {
        return refuse(
            tx,
            id,
            s,
            conn,
            "-",
            "not_permitted",
            "a client without identity creates no keys",
        );
    };
    let owned = s
        .keys
        .read()
        .iter()
        .filter(|k| k.creator.as_deref() == Some(creator.as_str()))
        .count();
    if owned >= cfg.max_per_client {
        let why = format!("{creator} already has {owned} created keys ([new_keys] max_per_client)");
        return refuse(tx, id, s, conn, "-", "new_key_limit", &why);
    }
    let (tx, s) = (tx.clone(), s.clone());
    tokio::spawn(async move {
        let made = tokio::task::spawn_blocking(move || crate::created_keys::create(&cfg.dir, &req, &creator)).await;
        let resp = match made {
            Ok(Ok((key, csr))) => {
                tracing::info!(key_id = %hex(&key.id), creator = key.creator.as_deref().unwrap_or("-"), path = %key.path.display(), "key created for a gateway");
                s.metrics.created.inc();
                s.keys.write().insert(key);
                Response::Created(csr)
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "creating a key failed");
                s.metrics.error("internal");
                Response::Error(ErrorCode::Internal)
            }
            Err(_) => {
                s.metrics.error("internal");
                Response::Error(ErrorCode::Internal)
            }
        };
        answer(&tx, id, resp);
    });
}

/// Checks a sign or delegate request (key, permission, algorithm, what is signed) and queues it.
#[allow(clippy::too_many_arguments)]
fn submit(
    id: u32,
    key_id: KeyId,
    algorithm: u16,
    payload: Vec<u8>,
    delegate: bool,
    tx: &CountedSender,
    s: &Shared,
    conn: &mut Conn,
) {
    // Two statements: the read guard must be gone before a rescan takes the write lock.
    let known = s.keys.read().get(&key_id);
    let found = known.or_else(|| rescan_created(s, &key_id));
    let Some(key) = found else {
        tracing::warn!(peer = %conn.peer, key_id = %hex(&key_id), "request for an unknown key id");
        s.metrics.error("unknown_key");
        return answer(tx, id, Response::Error(ErrorCode::UnknownKey));
    };
    // A created key: its creator's identity, or an explicit [[client]] grant; never the
    // everyone-may-use-everything default.
    let permitted = match &key.creator {
        Some(c) => conn.ids.contains(c) || (s.permissions.is_configured() && conn.access.allows(&key_id)),
        None => conn.access.allows(&key_id),
    };
    if !permitted {
        let why = "this client may not use the key ([[client]] permissions)";
        return refuse(tx, id, s, conn, &key.name, "not_permitted", why);
    }
    if !algorithms::allowed(key.kind, algorithm) {
        tracing::warn!(peer = %conn.peer, key = %key.label, algorithm = %algorithms::label(algorithm), "algorithm not supported by this key");
        s.metrics.error("unsupported_algorithm");
        return answer(tx, id, Response::Error(ErrorCode::UnsupportedAlgorithm));
    }
    if delegate {
        if let Err(refusal) = s
            .delegation
            .check(&key_id, key.kind, algorithm, &payload, SystemTime::now())
        {
            let why = format!("delegated credential: {refusal}");
            return refuse(tx, id, s, conn, &key.name, refusal.reason(), &why);
        }
    } else if let Err(refusal) = signing_input::check(algorithm, &payload) {
        let why = format!("{refusal} ({} bytes)", payload.len());
        return refuse(tx, id, s, conn, &key.name, refusal.reason(), &why);
    }
    let job = Job {
        id,
        key,
        algorithm,
        payload,
        delegate,
        reply: tx.clone(),
        arrived: Instant::now(),
    };
    if let Err(job) = s.pool.submit(job) {
        s.metrics.error("overloaded");
        answer(tx, job.id, Response::Error(ErrorCode::Overloaded));
    }
}

//! The key server: mutual-TLS connections from gateways, pipelined requests answered out of
//! order as signatures complete, signing on the [`SignerPool`].
//!
//! A connection is refused before any request is read when its client certificate does not
//! chain to `client_ca` (handshake failure) or is not in `allowed_clients`. A frame with a bad
//! body is answered `malformed` and the connection goes on; a frame with a bad header (version,
//! oversized length) is answered `malformed` and the connection is closed. Other connections
//! never notice.

use crate::codec::{decode_request, encode_response, ErrorCode, FrameErrorKind, Request, Response};
use crate::keystore::{hex, KeyStore};
use crate::server_config::KeyServerConfig;
use crate::server_metrics::{serve_admin, ServerMetrics};
use crate::signer_pool::{Job, SignerPool};
use crate::{algorithms, tls_setup};
use boring::ssl::SslAcceptor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::UnboundedSender;

/// Longest time a gateway may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

struct Shared {
    keys: KeyStore,
    acceptor: SslAcceptor,
    allowed: Vec<String>,
    pool: SignerPool,
    metrics: Arc<ServerMetrics>,
    frame_timeout: Duration,
}

/// Loads everything, binds, and serves until SIGTERM or SIGINT.
pub fn run(config: KeyServerConfig) -> Result<(), String> {
    let keys = KeyStore::load(&config.keys)?;
    if keys.is_empty() {
        return Err("keys: no private key found".into());
    }
    for k in keys.iter() {
        tracing::info!(key_id = %hex(&k.id), kind = k.kind.as_str(), path = %k.path.display(), "key loaded");
    }
    let acceptor = tls_setup::acceptor(&config.certificate, &config.key, &config.client_ca)?;
    let metrics = Arc::new(ServerMetrics::new());
    let threads = match config.workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let pool = SignerPool::start(threads, config.queue, metrics.clone()).map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared {
        keys,
        acceptor,
        allowed: config.allowed_clients.clone(),
        pool,
        metrics: metrics.clone(),
        frame_timeout: config.frame_timeout.get(),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("keyserver-io")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| format!("listen: cannot listen on {}: {e}", config.listen))?;
        if let Some(addr) = config.admin {
            let admin = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("admin: cannot listen on {addr}: {e}"))?;
            tokio::spawn(serve_admin(admin, metrics));
        }
        tracing::info!(listen = %config.listen, admin = ?config.admin, threads, queue = config.queue, "key server serving");
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| e.to_string())?;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(connection(stream, peer, shared.clone()));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
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
    if !s.allowed.is_empty() {
        let ids = tls
            .ssl()
            .peer_certificate()
            .map(|c| tls_setup::identities(&c))
            .unwrap_or_default();
        if !ids.iter().any(|id| s.allowed.contains(id)) {
            tracing::warn!(%peer, identities = ?ids, "gateway refused: client certificate not in allowed_clients");
            s.metrics.error("not_allowed");
            return;
        }
    }
    tracing::debug!(%peer, "gateway connected");
    s.metrics.connections.inc();
    let (mut rd, wr) = tokio::io::split(tls);
    let (tx, writer) = crate::frame_writer::spawn(wr);
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    'read: loop {
        let mut start = 0;
        loop {
            match decode_request(&buf[start..]) {
                Ok(Some((id, req, used))) => {
                    start += used;
                    dispatch(id, req, &tx, &s, peer);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "bad frame from gateway");
                    s.metrics.error(match e.kind {
                        FrameErrorKind::Oversized(_) => "oversized",
                        FrameErrorKind::BadVersion(_) => "bad_version",
                        _ => "malformed",
                    });
                    answer(&tx, e.id, Response::Error(ErrorCode::Malformed));
                    match e.skip {
                        Some(n) => start += n,
                        None => break 'read,
                    }
                }
            }
        }
        buf.drain(..start);
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
    let _ = writer.await;
    s.metrics.connections.dec();
    tracing::debug!(%peer, "gateway disconnected");
}

fn answer(tx: &UnboundedSender<Vec<u8>>, id: u32, resp: Response) {
    let mut frame = Vec::with_capacity(32);
    if encode_response(&mut frame, id, &resp).is_ok() {
        let _ = tx.send(frame);
    }
}

fn dispatch(id: u32, req: Request, tx: &UnboundedSender<Vec<u8>>, s: &Shared, peer: SocketAddr) {
    match req {
        Request::Ping(payload) => {
            s.metrics.pings.inc();
            answer(tx, id, Response::Pong(payload));
        }
        Request::Sign {
            key_id,
            algorithm,
            payload,
        } => {
            let Some(key) = s.keys.get(&key_id) else {
                tracing::warn!(%peer, key_id = %hex(&key_id), "sign request for an unknown key id");
                s.metrics.error("unknown_key");
                return answer(tx, id, Response::Error(ErrorCode::UnknownKey));
            };
            if !algorithms::allowed(key.kind, algorithm) {
                tracing::warn!(%peer, key = %key.label, algorithm = %algorithms::label(algorithm), "algorithm not supported by this key");
                s.metrics.error("unsupported_algorithm");
                return answer(tx, id, Response::Error(ErrorCode::UnsupportedAlgorithm));
            }
            let job = Job {
                id,
                key,
                algorithm,
                payload,
                reply: tx.clone(),
                arrived: Instant::now(),
            };
            if let Err(job) = s.pool.submit(job) {
                s.metrics.error("overloaded");
                answer(tx, job.id, Response::Error(ErrorCode::Overloaded));
            }
        }
    }
}

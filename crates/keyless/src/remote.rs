//! [`RemoteKey`]: a [`KeyBackend`] whose signatures come from key servers, and the factory that
//! tlsgate-tls calls for certificates configured with `key_servers` ([`install`]).
//!
//! Certificates naming the same key-server pool (with the same `[keyless]` connection settings
//! and the same configured members) share one [`Client`], and a configuration reload that keeps
//! them keeps the connections and any member changes made at runtime.

use crate::algorithms;
use crate::client::Client;
use crate::client_error::ClientError;
use crate::client_metrics::OperationLabels;
use crate::codec::KeyId;
use crate::keystore::{hex, key_id};
use boring::pkey::{PKeyRef, Public};
use boring::ssl::SslSignatureAlgorithm;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use tlsgate_config::KeylessConfig;
use tlsgate_error::{BoxError, Classify, Side};
use tlsgate_tls::keys::{KeyBackend, KeyError, KeyType, SignFuture};
use tlsgate_tls::remote_keys::RemoteKeys;

/// One certificate's key, held by key servers.
pub struct RemoteKey {
    client: Arc<Client>,
    id: KeyId,
    /// First 16 hex digits of the key id (the metrics label).
    label: String,
    key_type: KeyType,
}

/// Why a certificate's key backend could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RemoteKeyError {
    /// The key-server client could not start.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The key id (SHA-256 of the certificate's public key) could not be computed.
    #[error("key id of the certificate's public key: {0}")]
    KeyId(#[source] boring::error::ErrorStack),
}

impl Classify for RemoteKeyError {
    fn side(&self) -> Side {
        match self {
            RemoteKeyError::Client(e) => e.side(),
            RemoteKeyError::KeyId(_) => Side::Internal,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            RemoteKeyError::Client(e) => e.kind(),
            RemoteKeyError::KeyId(_) => "key_id",
        }
    }
}

impl RemoteKey {
    /// The key of the certificate whose public key is `public`, signed for by `client`.
    pub fn new(client: Arc<Client>, public: &PKeyRef<Public>) -> Result<Self, RemoteKeyError> {
        let id = key_id(public).map_err(RemoteKeyError::KeyId)?;
        Ok(Self {
            client,
            id,
            label: hex(&id[..8]),
            key_type: KeyType::of(public),
        })
    }
}

impl KeyBackend for RemoteKey {
    fn key_type(&self) -> KeyType {
        self.key_type
    }

    fn delegate(&self, algorithm: u16, input: Vec<u8>) -> Option<SignFuture> {
        Some(self.delegated(algorithm, input))
    }

    fn sign(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> SignFuture {
        let Some(code) = algorithms::code(algorithm) else {
            return Box::pin(std::future::ready(Err(KeyError::UnsupportedAlgorithm(algorithm))));
        };
        // The request is queued on the key-server connection's writer and the answer comes
        // back on a oneshot: nothing here blocks, so the handshake's own task drives it (no hop
        // through the keyless runtime and back).
        let id = self.id;
        let signing = self.client.clone().sign(id, code, input.to_vec());
        let label = self.label.clone();
        Box::pin(async move {
            match signing.await {
                Ok(sig) => {
                    crate::client_metrics::metrics()
                        .operations
                        .get_or_create(&OperationLabels {
                            key: label,
                            algorithm: algorithms::label(code),
                        })
                        .inc();
                    Ok(sig)
                }
                Err(e) => {
                    tracing::warn!(key_id = %hex(&id), error = %e, kind = e.kind(), "keyless signature failed: handshake aborted");
                    Err(KeyError::Unavailable(tlsgate_error::Error::wrap(
                        "keyless signature",
                        e,
                    )))
                }
            }
        })
    }
}

impl RemoteKey {
    /// The key servers' answer to a delegated-credential request, as a key error on failure.
    fn delegated(&self, algorithm: u16, input: Vec<u8>) -> SignFuture {
        let id = self.id;
        let issuing = self.client.clone().delegate(id, algorithm, input);
        Box::pin(async move {
            issuing
                .await
                .map_err(|e| KeyError::Unavailable(tlsgate_error::Error::wrap("delegated credential", e)))
        })
    }
}

/// Shares clients between certificates and across reloads.
#[derive(Default)]
struct Factory {
    clients: Mutex<HashMap<String, Weak<Client>>>,
}

impl RemoteKeys for Factory {
    fn backend(
        &self,
        keyless: &KeylessConfig,
        pool: &str,
        servers: &[String],
        public: &PKeyRef<Public>,
    ) -> Result<Arc<dyn KeyBackend>, BoxError> {
        let cache_key = format!("{}|{pool}|{servers:?}", keyless.connection_settings());
        let mut clients = self.clients.lock();
        clients.retain(|_, c| c.strong_count() > 0);
        let client = match clients.get(&cache_key).and_then(Weak::upgrade) {
            Some(c) => c,
            None => {
                let c = Client::start(keyless, pool, servers).map_err(RemoteKeyError::from)?;
                crate::pools::register(&c);
                clients.insert(cache_key, Arc::downgrade(&c));
                c
            }
        };
        Ok(Arc::new(RemoteKey::new(client, public)?))
    }
}

/// Makes `key_servers` / `key_server_pool` certificates usable in this process (call once at startup).
pub fn install() {
    tlsgate_tls::remote_keys::install(Box::new(Factory::default()));
}

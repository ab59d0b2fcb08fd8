//! [`RemoteKey`]: a [`KeyBackend`] whose signatures come from key servers, and the factory that
//! tlsgate-tls calls for certificates configured with `key_servers` ([`install`]).
//!
//! Certificates naming the same key-server list (with the same `[keyless]` settings) share one
//! [`Client`], and a configuration reload that keeps the list keeps the connections.

use crate::algorithms;
use crate::client::{Client, RUNTIME};
use crate::codec::KeyId;
use crate::keystore::{hex, key_id};
use boring::pkey::{PKeyRef, Public};
use boring::ssl::SslSignatureAlgorithm;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use tlsgate_config::KeylessConfig;
use tlsgate_tls::keys::{KeyBackend, KeyError, KeyType, SignFuture};
use tlsgate_tls::remote_keys::RemoteKeys;

/// One certificate's key, held by key servers.
pub struct RemoteKey {
    client: Arc<Client>,
    id: KeyId,
    key_type: KeyType,
}

impl RemoteKey {
    /// The key of the certificate whose public key is `public`, signed for by `client`.
    pub fn new(client: Arc<Client>, public: &PKeyRef<Public>) -> Result<Self, String> {
        Ok(Self {
            client,
            id: key_id(public).map_err(|e| e.to_string())?,
            key_type: KeyType::of(public),
        })
    }
}

impl KeyBackend for RemoteKey {
    fn key_type(&self) -> KeyType {
        self.key_type
    }

    fn sign(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> SignFuture {
        let Some(code) = algorithms::code(algorithm) else {
            return Box::pin(std::future::ready(Err(KeyError::UnsupportedAlgorithm(algorithm))));
        };
        let (client, id) = (self.client.clone(), self.id);
        let handle = RUNTIME.spawn(client.sign(id, code, input.to_vec()));
        Box::pin(async move {
            match handle.await {
                Ok(Ok(sig)) => Ok(sig),
                Ok(Err(e)) => {
                    tracing::warn!(key_id = %hex(&id), error = %e, "keyless signature failed: handshake aborted");
                    Err(KeyError::Unavailable(e))
                }
                Err(e) => Err(KeyError::Unavailable(e.to_string())),
            }
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
        servers: &[String],
        public: &PKeyRef<Public>,
    ) -> Result<Arc<dyn KeyBackend>, String> {
        let cache_key = format!("{keyless:?}|{servers:?}");
        let mut clients = self.clients.lock();
        clients.retain(|_, c| c.strong_count() > 0);
        let client = match clients.get(&cache_key).and_then(Weak::upgrade) {
            Some(c) => c,
            None => {
                let c = Client::start(keyless, servers)?;
                clients.insert(cache_key, Arc::downgrade(&c));
                c
            }
        };
        Ok(Arc::new(RemoteKey::new(client, public)?))
    }
}

/// Makes `key_servers` certificates usable in this process (call once at startup).
pub fn install() {
    tlsgate_tls::remote_keys::install(Box::new(Factory::default()));
}

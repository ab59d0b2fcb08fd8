//! The hook through which certificates without a key file get a key backend from key servers
//! (keyless TLS). tlsgate-keyless implements [`RemoteKeys`] and installs it at startup; this crate
//! cannot depend on it (it implements this crate's [`KeyBackend`]), hence the registration.

use crate::error::RemoteKeysError;
use crate::keys::KeyBackend;
use boring::pkey::{PKeyRef, Public};
use std::sync::{Arc, OnceLock};
use tlsgate_config::KeylessConfig;
use tlsgate_error::BoxError;

/// Makes key backends for certificates whose private key lives on key servers.
pub trait RemoteKeys: Send + Sync + 'static {
    /// A backend signing for the certificate whose public key is `public`, on the key-server
    /// pool `pool` whose members at startup are `servers`.
    fn backend(
        &self,
        keyless: &KeylessConfig,
        pool: &str,
        servers: &[String],
        public: &PKeyRef<Public>,
    ) -> Result<Arc<dyn KeyBackend>, BoxError>;
}

static REMOTE_KEYS: OnceLock<Box<dyn RemoteKeys>> = OnceLock::new();

/// Installs the key-server backend factory (once per process; later calls are ignored).
pub fn install(factory: Box<dyn RemoteKeys>) {
    let _ = REMOTE_KEYS.set(factory);
}

/// A backend for a certificate served by key servers: the named pool `pool`, or else the
/// anonymous pool `servers` (named after its list); the error names what is missing.
pub(crate) fn backend(
    keyless: Option<&KeylessConfig>,
    pool: Option<&str>,
    servers: &[String],
    public: &PKeyRef<Public>,
) -> Result<Arc<dyn KeyBackend>, RemoteKeysError> {
    let keyless = keyless.ok_or(RemoteKeysError::NoKeylessSection)?;
    let factory = REMOTE_KEYS.get().ok_or(RemoteKeysError::NotBuiltIn)?;
    match pool {
        Some(name) => {
            let pool = keyless
                .pools
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(|| RemoteKeysError::NoSuchPool(name.to_string()))?;
            factory.backend(keyless, &pool.name, &pool.servers, public)
        }
        None => factory.backend(keyless, &servers.join(","), servers, public),
    }
    .map_err(RemoteKeysError::Backend)
}

//! The key server's keys: PEM private keys loaded from files and directories, each identified by
//! the SHA-256 of its SubjectPublicKeyInfo (the key id of the protocol).

use crate::codec::KeyId;
use boring::hash::MessageDigest;
use boring::pkey::{HasPublic, PKey, PKeyRef};
use boring::ssl::SslSignatureAlgorithm;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tlsgate_error::{Classify, Side};
use tlsgate_tls::keys::{KeyError, KeyType, LocalKey};

/// What makes a key server's signatures. The software signer ([`LocalKey`], BoringSSL) is the
/// one implementation today; an accelerator (a GPU batch signer, an HSM) implements this trait
/// and plugs in without any change to the protocol or the worker pool.
pub trait Signer: Send + Sync + 'static {
    /// Signs `input` with `algorithm` (already checked against the key type).
    fn sign(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> Result<Vec<u8>, KeyError>;
}

impl Signer for LocalKey {
    fn sign(&self, algorithm: SslSignatureAlgorithm, input: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.sign_now(algorithm, input)
    }
}

/// One loaded key.
pub struct Key {
    /// SHA-256 of the SPKI.
    pub id: KeyId,
    /// Short label for metrics and logs: the first 16 hex digits of the id.
    pub label: String,
    /// The key's name in `[[client]]` permissions: its file name without the extension
    /// (`example-com-ecdsa` for `example-com-ecdsa.key`).
    pub name: String,
    /// Key type (decides which signature schemes it serves).
    pub kind: KeyType,
    /// The signer.
    pub signer: Box<dyn Signer>,
    /// Where it came from.
    pub path: PathBuf,
    /// For a key this server created for a gateway (`created_keys`): that gateway's identity,
    /// which may always use it.
    pub creator: Option<String>,
}

/// The key id of a public (or private) key.
pub fn key_id<T: HasPublic>(key: &PKeyRef<T>) -> Result<KeyId, boring::error::ErrorStack> {
    let digest = boring::hash::hash(MessageDigest::sha256(), &key.public_key_to_der()?)?;
    let mut id = [0u8; 32];
    id.copy_from_slice(&digest);
    Ok(id)
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every key, by id.
#[derive(Default)]
pub struct KeyStore {
    keys: HashMap<KeyId, Arc<Key>>,
}

/// Why the key server's keys could not be loaded (a problem of its `keys` files).
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    /// A file or directory cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM private key the TLS library can read.
    #[error("{}: not a PEM private key: {source}", path.display())]
    NotAKey {
        /// The file.
        path: PathBuf,
        /// What the TLS library said.
        #[source]
        source: boring::error::ErrorStack,
    },
    /// An RSA key shorter than 2048 bits.
    #[error("{}: RSA key of {bits} bits (< 2048)", path.display())]
    WeakRsa {
        /// The file.
        path: PathBuf,
        /// Its size.
        bits: u32,
    },
    /// A key type the key server does not sign with.
    #[error("{}: unsupported key type (RSA, ECDSA P-256/P-384, Ed25519, ML-DSA-44/65/87)", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
    },
    /// The key's id (the SHA-256 of its public key) could not be computed.
    #[error("{}: {source}", path.display())]
    KeyId {
        /// The file.
        path: PathBuf,
        /// What the TLS library said.
        #[source]
        source: boring::error::ErrorStack,
    },
}

impl Classify for KeyStoreError {
    fn side(&self) -> Side {
        match self {
            KeyStoreError::KeyId { .. } => Side::Internal,
            _ => Side::Config,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            KeyStoreError::Read { .. } => "key_file_unreadable",
            KeyStoreError::NotAKey { .. } => "key_file_invalid",
            KeyStoreError::WeakRsa { .. } => "key_too_weak",
            KeyStoreError::Unsupported { .. } => "key_type_unsupported",
            KeyStoreError::KeyId { .. } => "key_id",
        }
    }
}

impl KeyStore {
    /// Loads every path: a file must hold a private key; a directory contributes each file in it
    /// that holds one (other files, such as certificates, are skipped).
    pub fn load(paths: &[PathBuf]) -> Result<Self, KeyStoreError> {
        let read_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| KeyStoreError::Read { path, source }
        };
        let mut store = Self::default();
        for path in paths {
            if path.is_dir() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                    .map_err(read_error(path))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect();
                entries.sort();
                for file in entries {
                    let text = std::fs::read(&file).map_err(read_error(&file))?;
                    if text.windows(11).any(|w| w == b"PRIVATE KEY") {
                        store.add_file(&file, &text, None)?;
                    }
                }
            } else {
                let text = std::fs::read(path).map_err(read_error(path))?;
                store.add_file(path, &text, None)?;
            }
        }
        Ok(store)
    }

    /// Adds the PEM private key read from `path` (created for `creator`, if any).
    pub fn add_file(&mut self, path: &Path, pem: &[u8], creator: Option<String>) -> Result<Arc<Key>, KeyStoreError> {
        let path_buf = || path.to_path_buf();
        let pkey = PKey::private_key_from_pem(pem).map_err(|source| KeyStoreError::NotAKey {
            path: path_buf(),
            source,
        })?;
        let kind = KeyType::of(&pkey);
        match kind {
            KeyType::Rsa if pkey.bits() < 2048 => {
                return Err(KeyStoreError::WeakRsa {
                    path: path_buf(),
                    bits: pkey.bits(),
                })
            }
            KeyType::Other => return Err(KeyStoreError::Unsupported { path: path_buf() }),
            _ => {}
        }
        let id = key_id(&pkey).map_err(|source| KeyStoreError::KeyId {
            path: path_buf(),
            source,
        })?;
        let key = Key {
            id,
            label: hex(&id[..8]),
            name: path
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind,
            signer: Box::new(LocalKey::new(pkey)),
            path: path.to_path_buf(),
            creator,
        };
        let key = Arc::new(key);
        self.keys.insert(id, key.clone());
        Ok(key)
    }

    /// Adds a key made elsewhere (`created_keys::create`).
    pub fn insert(&mut self, key: Arc<Key>) {
        self.keys.insert(key.id, key);
    }

    /// The key with this id.
    pub fn get(&self, id: &KeyId) -> Option<Arc<Key>> {
        self.keys.get(id).cloned()
    }

    /// Every key.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Key>> {
        self.keys.values()
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

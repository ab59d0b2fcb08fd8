//! The key server's keys: PEM private keys loaded from files and directories, each identified by
//! the SHA-256 of its SubjectPublicKeyInfo (the key id of the protocol).

use crate::codec::KeyId;
use boring::hash::MessageDigest;
use boring::pkey::{HasPublic, PKey, PKeyRef};
use boring::ssl::SslSignatureAlgorithm;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

impl KeyStore {
    /// Loads every path: a file must hold a private key; a directory contributes each file in it
    /// that holds one (other files, such as certificates, are skipped).
    pub fn load(paths: &[PathBuf]) -> Result<Self, String> {
        let mut store = Self::default();
        for path in paths {
            if path.is_dir() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect();
                entries.sort();
                for file in entries {
                    let text = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
                    if text.windows(11).any(|w| w == b"PRIVATE KEY") {
                        store.add(&file, &text)?;
                    }
                }
            } else {
                let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
                store.add(path, &text)?;
            }
        }
        Ok(store)
    }

    fn add(&mut self, path: &Path, pem: &[u8]) -> Result<(), String> {
        let err = |m: String| format!("{}: {m}", path.display());
        let pkey = PKey::private_key_from_pem(pem).map_err(|e| err(format!("not a PEM private key: {e}")))?;
        let kind = KeyType::of(&pkey);
        match kind {
            KeyType::Rsa if pkey.bits() < 2048 => return Err(err(format!("RSA key of {} bits (< 2048)", pkey.bits()))),
            KeyType::Other => return Err(err("unsupported key type (RSA, ECDSA P-256/P-384, Ed25519)".into())),
            _ => {}
        }
        let id = key_id(&pkey).map_err(|e| err(e.to_string()))?;
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
        };
        self.keys.insert(id, Arc::new(key));
        Ok(())
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

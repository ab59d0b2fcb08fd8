//! Encrypted ClientHello keys derived from the cluster secret, one per time epoch, the way the
//! ticket keys are (`tickets`): the X25519 private key of epoch `e` is HKDF(cluster secret,
//! `"ech-x25519" || e`), through the same [`ClusterSecret::derive`]; its ECHConfig carries
//! `config_id = e mod 256`, the configured public name and `maximum_name_length`. Every node with
//! the same secret and `[ech]` settings computes byte-identical ECHConfigs (HPKE binds the whole
//! ECHConfig into the encryption, so they must be identical), with no store and no coordinator.
//!
//! A node installs the current epoch's config (sent as retry config), the previous one (clients
//! whose DNS answer is up to one rotation old) and the next one (a DNS job publishing ahead, a
//! node whose clock runs behind); `ech_ring` keeps them on the live context.

use crate::secret::ClusterSecret;
use boring::error::ErrorStack;
use boring::hpke::HpkeKey;
use boring::ssl::SslEchKeys;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use zeroize::Zeroize;

/// The ECH settings every node must share (`[ech]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EchSettings {
    /// Name in the outer ClientHello (its site's certificate authenticates retry configs).
    pub public_name: String,
    /// Epoch length.
    pub rotation: Duration,
    /// ECHConfig `maximum_name_length`.
    pub max_name_length: u8,
}

impl EchSettings {
    /// From the configuration section (`None` when it is absent or disabled).
    pub fn from_config(ech: Option<&tlsgate_config::EchConfig>) -> Option<Self> {
        let ech = ech.filter(|e| e.enabled)?;
        Some(Self {
            public_name: ech.public_name.trim_end_matches('.').to_ascii_lowercase(),
            rotation: ech.rotation.get().max(Duration::from_secs(1)),
            max_name_length: ech.max_name_length,
        })
    }

    fn rotation_secs(&self) -> u64 {
        self.rotation.as_secs().max(1)
    }

    /// The epoch `at` falls in: Unix seconds / rotation.
    pub fn epoch_at(&self, at: SystemTime) -> u64 {
        at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / self.rotation_secs()
    }

    /// When `epoch` starts being current.
    pub fn epoch_start(&self, epoch: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(epoch.saturating_mul(self.rotation_secs()))
    }

    /// How long from `at` until the next epoch starts.
    pub fn until_next_epoch(&self, at: SystemTime) -> Duration {
        let next = self.epoch_start(self.epoch_at(at) + 1);
        next.duration_since(at).unwrap_or_default()
    }
}

/// The `config_id` of an epoch's ECHConfig: the epoch's low byte, so the previous, current and
/// next epochs never share one.
pub fn config_id(epoch: u64) -> u8 {
    (epoch % 256) as u8
}

/// One epoch's ECH key: the serialised ECHConfig and the private key it decrypts with.
pub struct EpochKey {
    /// The epoch.
    pub epoch: u64,
    /// The serialised ECHConfig (what an ECHConfigList carries).
    pub config: Vec<u8>,
    private: [u8; 32],
}

impl std::fmt::Debug for EpochKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("EpochKey")
            .field("epoch", &self.epoch)
            .field("config_id", &config_id(self.epoch))
            .finish_non_exhaustive()
    }
}

impl Drop for EpochKey {
    fn drop(&mut self) {
        self.private.zeroize();
    }
}

impl EpochKey {
    /// The key every node derives from `secret` for `epoch`.
    pub fn derive(secret: &ClusterSecret, settings: &EchSettings, epoch: u64) -> Result<Self, ErrorStack> {
        let mut private = [0u8; 32];
        secret.derive(&[b"ech-x25519", &epoch.to_be_bytes()], &mut private);
        let key = Self {
            epoch,
            config: Vec::new(),
            private,
        };
        let config = crate::ffi::marshal_ech_config(
            config_id(epoch),
            &key.hpke()?,
            &settings.public_name,
            usize::from(settings.max_name_length),
        )?;
        Ok(Self { config, ..key })
    }

    /// The key as BoringSSL's HPKE key (DHKEM(X25519, HKDF-SHA256); `boring` names the
    /// constructor after P-256, but it initialises `EVP_hpke_x25519_hkdf_sha256`).
    fn hpke(&self) -> Result<HpkeKey, ErrorStack> {
        HpkeKey::dhkem_p256_sha256(&self.private)
    }

    /// This config alone as an ECHConfigList (what the DNS HTTPS record's `ech` parameter holds).
    pub fn config_list(&self) -> Vec<u8> {
        config_list(&[&self.config])
    }
}

/// An ECHConfigList: a 2-byte length, then the ECHConfigs.
pub fn config_list(configs: &[&[u8]]) -> Vec<u8> {
    let len: usize = configs.iter().map(|c| c.len()).sum();
    let mut out = Vec::with_capacity(2 + len);
    out.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes());
    for c in configs {
        out.extend_from_slice(c);
    }
    out
}

/// Standard base64 (what DNS tooling and Go's `EncryptedClientHelloConfigList` users expect).
pub fn base64(bytes: &[u8]) -> String {
    boring::base64::encode_block(bytes)
}

/// Decodes standard base64 (whitespace around it ignored); `None` when it is not base64.
pub fn from_base64(text: &str) -> Option<Vec<u8>> {
    boring::base64::decode_block(text.trim()).ok()
}

/// The ECH keys a node installs at `epoch`: for the first secret the current epoch's config
/// (the retry config) first, then the previous and next epochs'; for the other secrets (a
/// root-secret rotation in progress) the same epochs, accepted only.
pub fn keys_at(
    secrets: &[Arc<ClusterSecret>],
    settings: &EchSettings,
    epoch: u64,
) -> Result<Option<SslEchKeys>, ErrorStack> {
    if secrets.is_empty() {
        return Ok(None);
    }
    let mut b = SslEchKeys::builder()?;
    let epochs = [Some(epoch), epoch.checked_sub(1), epoch.checked_add(1)];
    for (i, secret) in secrets.iter().enumerate() {
        for (j, e) in epochs.iter().flatten().enumerate() {
            let key = EpochKey::derive(secret, settings, *e)?;
            b.add_key(i == 0 && j == 0, &key.config, key.hpke()?)?;
        }
    }
    Ok(Some(b.build()))
}

/// The retry configs of a server that rejected this client's ECH offer: the handshake failed
/// with `ECH_REJECTED` (BoringSSL authenticated the server for the config's public name first),
/// and the server's ECHConfigList is the one to retry with. `None` for any other failure.
pub fn retry_configs<S: std::fmt::Debug>(e: &tokio_boring::HandshakeError<S>) -> Option<Vec<u8>> {
    use std::error::Error as _;
    let ssl = e.ssl()?;
    let source = e.source()?;
    let stack = match source.downcast_ref::<boring::ssl::Error>() {
        Some(ssl_error) => ssl_error.ssl_error()?,
        None => source.downcast_ref::<ErrorStack>()?,
    };
    let lib_ssl = boring_sys::ERR_LIB_SSL.0 as std::os::raw::c_int;
    let rejected = stack
        .errors()
        .iter()
        .any(|e| e.library_code() == lib_ssl && e.reason_code() == boring_sys::SSL_R_ECH_REJECTED);
    rejected
        .then(|| ssl.get_ech_retry_configs().map(<[u8]>::to_vec))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn secret(byte: u8) -> Arc<ClusterSecret> {
        Arc::new(ClusterSecret::from_material(&[byte; 32], "test").unwrap())
    }

    pub(crate) fn settings() -> EchSettings {
        EchSettings {
            public_name: "public.example".into(),
            rotation: Duration::from_secs(3600),
            max_name_length: 64,
        }
    }

    #[test]
    fn nodes_with_the_same_secret_derive_identical_configs() {
        let s = settings();
        let a = EpochKey::derive(&secret(1), &s, 500).unwrap();
        let b = EpochKey::derive(&secret(1), &s, 500).unwrap();
        assert_eq!(a.config, b.config, "byte-identical on every node");
        let next = EpochKey::derive(&secret(1), &s, 501).unwrap();
        assert_ne!(a.config, next.config, "each epoch its own key");
        let other = EpochKey::derive(&secret(2), &s, 500).unwrap();
        assert_ne!(a.config, other.config, "another secret, another key");
        assert!(!format!("{a:?}").contains("private"), "no key material in Debug");
    }

    #[test]
    fn config_carries_id_name_and_suites() {
        let key = EpochKey::derive(&secret(1), &settings(), 256 + 7).unwrap();
        let list = key.config_list();
        assert_eq!(tlsgate_wire::ech::config_ids(&list), Some(vec![(0xfe0d, 7)]));
        // version, length, config_id, kem_id = 0x0020 (DHKEM(X25519, HKDF-SHA256)), 32-byte key.
        assert_eq!(&key.config[..2], &[0xfe, 0x0d]);
        assert_eq!(&key.config[4..7], &[7, 0x00, 0x20]);
        assert_eq!(&key.config[7..9], &[0, 32]);
        let tail = String::from_utf8_lossy(&key.config);
        assert!(tail.contains("public.example"), "{tail}");
        assert_eq!(from_base64(&base64(&list)), Some(list));
        assert_eq!(from_base64("not base64!"), None);
    }

    #[test]
    fn epochs_follow_the_clock() {
        let s = settings();
        let t = UNIX_EPOCH + Duration::from_secs(3600 * 10 + 5);
        assert_eq!(s.epoch_at(t), 10);
        assert_eq!(s.epoch_start(10), UNIX_EPOCH + Duration::from_secs(36_000));
        assert_eq!(s.until_next_epoch(t), Duration::from_secs(3595));
        assert_ne!(config_id(10), config_id(11));
        assert_ne!(config_id(9), config_id(11));
    }

    #[test]
    fn keys_need_a_secret() {
        assert!(keys_at(&[], &settings(), 3).unwrap().is_none());
        assert!(keys_at(&[secret(1), secret(2)], &settings(), 0).unwrap().is_some());
    }
}

//! The ECH keys of a running gateway: the cluster secrets, the keys of the current epoch (built
//! once per epoch and settings, `ech`), installed on each new front context and swapped on the
//! live one at every epoch boundary (`SSL_CTX_set1_ech_keys` is safe on a context in use: the
//! handshakes already reading the old keys keep them). It outlives configuration reloads, like
//! the ticket keys.
//!
//! It also counts what ECH clients do, at certificate selection: `accepted` (the inner
//! ClientHello was decrypted), `rejected` (an offer for a config id this node holds that did not
//! decrypt: a config of another cluster secret, or a tampered one), `grease_or_stale` (an offer
//! for a config id it does not hold: a GREASE extension, or a config older than the previous
//! epoch). Both kinds of rejection are answered with the current config as retry config.

use crate::ech::{config_id, keys_at, EchSettings, EpochKey};
use crate::secret::ClusterSecret;
use boring::error::ErrorStack;
use boring::ssl::{ClientHello, ExtensionType, SslContextRef, SslEchKeys};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;
use tlsgate_wire::ech::{parse, EchExtension};

/// Labels of `tlsgate_ech_handshakes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EchLabels {
    /// `accepted`, `rejected` or `grease_or_stale`.
    pub outcome: &'static str,
}

/// The process's ECH metrics.
#[derive(Debug, Default)]
pub struct EchMetrics {
    /// ClientHellos with an ECH extension, by outcome.
    pub handshakes: Family<EchLabels, Counter>,
    /// Epoch changes seen by this process (keys rebuilt for a new epoch).
    pub rotations: Counter,
    /// The current epoch (0 while ECH is off).
    pub epoch: Gauge,
    /// Hook runs that failed (could not start, or exited non-zero).
    pub hook_failures: Counter,
}

/// The process-wide ECH metrics.
pub fn metrics() -> &'static EchMetrics {
    static METRICS: LazyLock<EchMetrics> = LazyLock::new(EchMetrics::default);
    &METRICS
}

/// Registers the `tlsgate_ech_*` metrics in `registry`.
pub fn register(registry: &mut Registry) {
    let m = metrics();
    registry.register(
        "ech_handshakes",
        "ClientHellos offering Encrypted ClientHello, by outcome (accepted; rejected: a config id this \
         node holds that did not decrypt; grease_or_stale: a config id it does not hold); rejected \
         offers are answered with retry configs",
        m.handshakes.clone(),
    );
    registry.register(
        "ech_key_rotations",
        "ECH epoch changes (keys rebuilt)",
        m.rotations.clone(),
    );
    registry.register("ech_epoch", "The current ECH epoch (0: ECH off)", m.epoch.clone());
    registry.register(
        "ech_hook_failures",
        "[ech] hook runs that could not start or exited non-zero",
        m.hook_failures.clone(),
    );
}

/// The keys built for one epoch and settings.
struct Built {
    settings: EchSettings,
    epoch: u64,
    keys: SslEchKeys,
}

/// ECH keys that survive reloads and rotate with the epochs.
#[derive(Default)]
pub struct EchRing {
    secrets: Mutex<Vec<Arc<ClusterSecret>>>,
    built: Mutex<Option<Built>>,
    /// The installed epoch + 1 (0: none): which config ids this node holds, read per ClientHello.
    held: AtomicU64,
}

impl std::fmt::Debug for EchRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EchRing")
            .field("epoch", &self.held.load(Ordering::Relaxed).checked_sub(1))
            .finish_non_exhaustive()
    }
}

impl EchRing {
    /// Derives keys from these secrets from now on (the first one's config is the retry config).
    pub fn use_cluster_secrets(&self, secrets: Vec<Arc<ClusterSecret>>) {
        *self.secrets.lock() = secrets;
        *self.built.lock() = None;
    }

    /// Installs the keys of the epoch `now` falls in on `ctx` (a front context), building them
    /// when the epoch or the settings changed. Returns the installed epoch; `None` when ECH is
    /// off (no `[ech]`, disabled, or no cluster secret yet), and `ctx` is left without keys.
    pub fn install(
        &self,
        ctx: &SslContextRef,
        ech: Option<&tlsgate_config::EchConfig>,
        now: SystemTime,
    ) -> Result<Option<u64>, ErrorStack> {
        let Some(settings) = EchSettings::from_config(ech) else {
            self.held.store(0, Ordering::Relaxed);
            metrics().epoch.set(0);
            return Ok(None);
        };
        let secrets = self.secrets.lock().clone();
        let epoch = settings.epoch_at(now);
        let mut built = self.built.lock();
        let fresh = built
            .as_ref()
            .is_some_and(|b| b.epoch == epoch && b.settings == settings);
        if !fresh {
            let Some(keys) = keys_at(&secrets, &settings, epoch)? else {
                return Ok(None);
            };
            if built.as_ref().is_some_and(|b| b.epoch != epoch) {
                metrics().rotations.inc();
            }
            *built = Some(Built { settings, epoch, keys });
        }
        let b = built.as_ref().expect("built above");
        ctx.set_ech_keys(&b.keys)?;
        self.held.store(epoch + 1, Ordering::Relaxed);
        metrics().epoch.set(i64::try_from(epoch).unwrap_or(i64::MAX));
        Ok(Some(epoch))
    }

    /// The ECHConfigList to publish for `epoch` (the first secret's config), with the settings
    /// of the last install; `None` before one.
    pub fn published(&self, epoch: u64) -> Option<Vec<u8>> {
        let settings = self.built.lock().as_ref()?.settings.clone();
        let secret = self.secrets.lock().first()?.clone();
        EpochKey::derive(&secret, &settings, epoch)
            .ok()
            .map(|k| k.config_list())
    }

    /// Counts an ECH offer at certificate selection (inner ClientHello when accepted, outer
    /// otherwise). Costs one atomic load when ECH is off.
    pub fn observe(&self, hello: &ClientHello<'_>) {
        let held = self.held.load(Ordering::Relaxed);
        if held == 0 {
            return;
        }
        let outcome = if hello.ssl().ech_accepted() {
            "accepted"
        } else {
            let Some(body) = hello.get_extension(ExtensionType::ENCRYPTED_CLIENT_HELLO) else {
                return;
            };
            // BoringSSL refused malformed extensions before this point; count them as unknown.
            match parse(body) {
                Ok(EchExtension::Outer(offer)) if holds(held - 1, offer.config_id) => "rejected",
                _ => "grease_or_stale",
            }
        };
        metrics().handshakes.get_or_create(&EchLabels { outcome }).inc();
    }
}

/// Whether the configs installed at `epoch` (previous, current, next) include `id`.
fn holds(epoch: u64, id: u8) -> bool {
    matches!(id.wrapping_sub(config_id(epoch)), 0 | 1 | 255)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tls::{client_ctx, server_ctx, Handshake};
    use std::time::{Duration, UNIX_EPOCH};
    use tlsgate_config::EchConfig;

    fn config(rotation: u64) -> EchConfig {
        EchConfig {
            enabled: true,
            public_name: "localhost".into(),
            rotation: tlsgate_config::Duration::from_secs(rotation),
            max_name_length: 32,
            hook: Vec::new(),
        }
    }

    fn secret(byte: u8) -> Arc<ClusterSecret> {
        Arc::new(ClusterSecret::from_material(&[byte; 32], "test").unwrap())
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn config_ids_held_wrap_around() {
        assert!(holds(256, 255) && holds(256, 0) && holds(256, 1));
        assert!(!holds(256, 2) && !holds(256, 254));
    }

    #[test]
    fn installs_only_with_a_secret_and_rotates_by_epoch() {
        let ring = EchRing::default();
        let ctx = server_ctx(|_| {});
        let cfg = config(100);
        assert_eq!(
            ring.install(&ctx, Some(&cfg), at(1_000)).unwrap(),
            None,
            "no secret yet"
        );
        ring.use_cluster_secrets(vec![secret(1)]);
        assert_eq!(ring.install(&ctx, Some(&cfg), at(1_050)).unwrap(), Some(10));
        let before = metrics().rotations.get();
        assert_eq!(ring.install(&ctx, Some(&cfg), at(1_099)).unwrap(), Some(10));
        assert_eq!(ring.install(&ctx, Some(&cfg), at(1_100)).unwrap(), Some(11));
        assert!(metrics().rotations.get() > before);
        let published = ring.published(11).unwrap();
        assert_eq!(tlsgate_wire::ech::config_ids(&published), Some(vec![(0xfe0d, 11)]));
        assert_eq!(ring.install(&ctx, None, at(1_100)).unwrap(), None, "off");
    }

    /// A BoringSSL client offering `list` to a server holding the ring's keys at `now`: whether
    /// ECH was accepted, and the retry configs of a rejection.
    fn offer(ring: &EchRing, now: u64, list: &[u8]) -> (bool, Option<Vec<u8>>) {
        let server = server_ctx(|_| {});
        ring.install(&server, Some(&config(100)), at(now)).unwrap();
        let mut client = boring::ssl::Ssl::new(&client_ctx(|_| {})).unwrap();
        client.set_hostname("inner.example").unwrap();
        client.set_ech_config_list(list).unwrap();
        let hs = Handshake::between(client, boring::ssl::Ssl::new(&server).unwrap());
        match &hs.client {
            Ok(stream) => (stream.ssl().ech_accepted(), None),
            Err(mid) => (false, mid.ssl().get_ech_retry_configs().map(<[u8]>::to_vec)),
        }
    }

    #[test]
    fn previous_current_and_next_are_accepted_older_ones_get_retry_configs() {
        let ring = EchRing::default();
        ring.use_cluster_secrets(vec![secret(3)]);
        let s = EchSettings::from_config(Some(&config(100))).unwrap();
        let list = |epoch| EpochKey::derive(&secret(3), &s, epoch).unwrap().config_list();
        for epoch in [9, 10, 11] {
            assert!(offer(&ring, 1_000, &list(epoch)).0, "epoch {epoch} accepted at 10");
        }
        let (accepted, retry) = offer(&ring, 1_000, &list(8));
        assert!(!accepted, "two epochs back");
        assert_eq!(retry, Some(list(10)), "the current config is the retry config");
        let other = EpochKey::derive(&secret(4), &s, 10).unwrap().config_list();
        let (accepted, retry) = offer(&ring, 1_000, &other);
        assert!(!accepted, "another secret's config");
        assert_eq!(retry, Some(list(10)));
    }
}

//! Session-ticket keys that rotate by themselves.
//!
//! The ring holds the current key (encrypts new tickets) and the retired keys that may still
//! decrypt: a key retired at time `t` is erased at `t + lifetime`, so a ticket never outlives its
//! key by more than the ticket lifetime, and a stolen key exposes at most `rotation + lifetime` of
//! traffic (the forward-secrecy trade-off of tickets). Tickets under a retired key are accepted
//! and renewed under the current one.
//!
//! In a cluster (`[cluster] secret_files`), keys are not random but derived: the key of each time
//! epoch (`unix time / rotation`) is HKDF(cluster secret, epoch), so every node computes the same
//! keys with no coordinator; a node encrypts under the current epoch and accepts the epochs of the
//! last ticket lifetime (plus the next one, for clock skew). See docs/CLUSTER.md for the
//! forward-secrecy trade-off (whoever holds the root secret can derive every epoch's key).
//!
//! Ticket format is BoringSSL's classic one (RFC 5077 layout): 16-byte key name, AES-128-CBC,
//! HMAC-SHA256. Reads are lock-free (`ArcSwap`), so a handshake never waits for a rotation.

use crate::ffi::{TicketDecryption, TicketKeyMaterial, TicketKeys};
use crate::secret::ClusterSecret;
use arc_swap::ArcSwap;
use boring::ssl::SslRef;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// One ticket key.
#[derive(Clone)]
pub struct TicketKey {
    /// Key name sent in the clear in each ticket, used to find the key again.
    pub name: [u8; 16],
    aes: [u8; 16],
    hmac: [u8; 32],
    /// When this key stopped being current (None while current).
    retired_at: Option<Instant>,
}

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("TicketKey")
            .field("name", &hex(&self.name))
            .field("retired_at", &self.retired_at)
            .finish()
    }
}

impl TicketKey {
    /// The key every node derives from `secret` for `epoch`: name = secret id, epoch, 4-byte tag.
    pub fn derived(secret: &ClusterSecret, epoch: u64) -> Self {
        let e = epoch.to_be_bytes();
        let mut name = [0u8; 16];
        name[..4].copy_from_slice(&secret.id());
        name[4..12].copy_from_slice(&e);
        secret.derive(&[b"ticket-name", &e], &mut name[12..]);
        let mut material = [0u8; 48];
        secret.derive(&[b"ticket-key", &e], &mut material);
        let mut aes = [0u8; 16];
        let mut hmac = [0u8; 32];
        aes.copy_from_slice(&material[..16]);
        hmac.copy_from_slice(&material[16..]);
        Self {
            name,
            aes,
            hmac,
            retired_at: None,
        }
    }

    /// A fresh random key, from BoringSSL's CSPRNG.
    pub fn generate() -> Self {
        let mut key = Self {
            name: [0; 16],
            aes: [0; 16],
            hmac: [0; 32],
            retired_at: None,
        };
        for part in [&mut key.name[..], &mut key.aes[..], &mut key.hmac[..]] {
            boring::rand::rand_bytes(part).expect("BoringSSL's RAND_bytes does not fail");
        }
        key
    }
}

/// Counters the metrics layer reads.
#[derive(Debug, Default)]
pub struct TicketStats {
    /// Tickets issued.
    pub encrypted: AtomicU64,
    /// Tickets accepted under the current key.
    pub decrypted_current: AtomicU64,
    /// Tickets accepted under a retired key (and renewed).
    pub decrypted_renew: AtomicU64,
    /// Tickets whose key was unknown or erased (full handshake instead).
    pub unknown_key: AtomicU64,
    /// Rotations performed.
    pub rotations: AtomicU64,
}

/// The rotating set of ticket keys shared by every TLS context of the process (survives reloads).
#[derive(Debug)]
pub struct TicketKeyRing {
    keys: ArcSwap<Vec<TicketKey>>,
    lifetime: parking_lot::Mutex<Duration>,
    derived: parking_lot::Mutex<Option<Derived>>,
    /// Counters.
    pub stats: TicketStats,
}

impl TicketKeyRing {
    /// A ring with one fresh current key.
    pub fn new(lifetime: Duration) -> Self {
        Self {
            keys: ArcSwap::from_pointee(vec![TicketKey::generate()]),
            lifetime: parking_lot::Mutex::new(lifetime),
            derived: parking_lot::Mutex::new(None),
            stats: TicketStats::default(),
        }
    }

    /// Switches to cluster-derived keys: from now on the keys are HKDF(secret, epoch), the first
    /// secret encrypting, every secret decrypting. `rotation` is the epoch length.
    pub fn use_cluster_secrets(&self, secrets: Vec<Arc<ClusterSecret>>, rotation: Duration) {
        *self.derived.lock() = Some(Derived {
            secrets,
            rotation: rotation.max(Duration::from_secs(1)),
            epoch: None,
        });
        self.refresh_derived(SystemTime::now());
    }

    /// Whether keys come from the cluster secret.
    pub fn is_derived(&self) -> bool {
        self.derived.lock().is_some()
    }

    /// Changes the epoch length of derived keys (on reload).
    pub fn set_rotation(&self, rotation: Duration) {
        if let Some(d) = self.derived.lock().as_mut() {
            d.rotation = rotation.max(Duration::from_secs(1));
            d.epoch = None;
        }
    }

    /// How long until derived keys change (the next epoch boundary); None for local keys.
    pub fn next_change(&self) -> Option<Duration> {
        let derived = self.derived.lock();
        let d = derived.as_ref()?;
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let period = d.rotation.as_nanos().max(1);
        let into = now.as_nanos() % period;
        Some(Duration::from_nanos((period - into) as u64) + Duration::from_millis(5))
    }

    /// Recomputes the derived key set for the epoch of `now` (no-op when it is unchanged).
    fn refresh_derived(&self, now: SystemTime) {
        let lifetime = *self.lifetime.lock();
        let mut guard = self.derived.lock();
        let Some(d) = guard.as_mut() else { return };
        let secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        let epoch = secs / d.rotation.as_secs().max(1);
        if d.epoch == Some(epoch) {
            return;
        }
        let keys = derived_keys(&d.secrets, epoch, d.rotation, lifetime);
        if d.epoch.is_some() {
            self.stats.rotations.fetch_add(1, Ordering::Relaxed);
        }
        d.epoch = Some(epoch);
        self.keys.store(Arc::new(keys));
    }

    /// Changes the ticket lifetime (on reload); takes effect at the next rotation or purge.
    pub fn set_lifetime(&self, lifetime: Duration) {
        *self.lifetime.lock() = lifetime;
    }

    /// Makes a new key current, retires the old one, and erases keys retired longer than the
    /// lifetime ago.
    pub fn rotate(&self) {
        if self.is_derived() {
            self.refresh_derived(SystemTime::now());
        } else {
            self.rotate_at(Instant::now());
        }
    }

    fn rotate_at(&self, now: Instant) {
        let lifetime = *self.lifetime.lock();
        let mut keys: Vec<TicketKey> = (**self.keys.load()).clone();
        for k in &mut keys {
            k.retired_at.get_or_insert(now);
        }
        keys.retain(|k| k.retired_at.is_none_or(|t| now.saturating_duration_since(t) < lifetime));
        keys.insert(0, TicketKey::generate());
        self.keys.store(Arc::new(keys));
        self.stats.rotations.fetch_add(1, Ordering::Relaxed);
    }

    /// Erases retired keys older than the lifetime without making a new key.
    pub fn purge(&self) {
        if self.is_derived() {
            self.refresh_derived(SystemTime::now());
            return;
        }
        let lifetime = *self.lifetime.lock();
        let now = Instant::now();
        let keys = self.keys.load();
        if keys.iter().any(|k| {
            k.retired_at
                .is_some_and(|t| now.saturating_duration_since(t) >= lifetime)
        }) {
            let kept = keys
                .iter()
                .filter(|k| k.retired_at.is_none_or(|t| now.saturating_duration_since(t) < lifetime))
                .cloned()
                .collect();
            self.keys.store(Arc::new(kept));
        }
    }

    /// Names of the keys in the ring, current first.
    pub fn key_names(&self) -> Vec<[u8; 16]> {
        self.keys.load().iter().map(|k| k.name).collect()
    }
}

/// A ticket key as handed to a successor process (`tlsgate serve --upgrade`); its secret parts
/// are wiped when it is dropped. Its `Debug` shows no key material.
pub struct ExportedTicketKey {
    /// Key name tickets carry in the clear.
    pub name: [u8; 16],
    /// AES-128 key.
    pub aes: [u8; 16],
    /// HMAC-SHA256 key.
    pub hmac: [u8; 32],
    /// `None`: the key encrypts new tickets now; `Some(age)`: retired `age` ago.
    pub retired_for: Option<Duration>,
}

impl Drop for ExportedTicketKey {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.aes.zeroize();
        self.hmac.zeroize();
    }
}

impl std::fmt::Debug for ExportedTicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportedTicketKey")
            .field("name", &hex(&self.name))
            .field("retired_for", &self.retired_for)
            .finish_non_exhaustive()
    }
}

impl TicketKeyRing {
    /// The keys, current first, with how long ago each was retired: what a successor process
    /// takes over in a binary upgrade (cluster-derived keys too; the successor decides).
    pub fn export(&self) -> Vec<ExportedTicketKey> {
        let now = Instant::now();
        self.keys
            .load()
            .iter()
            .enumerate()
            .map(|(i, k)| ExportedTicketKey {
                name: k.name,
                aes: k.aes,
                hmac: k.hmac,
                // Derived keys carry no retirement time: the non-current ones count as just retired.
                retired_for: (i > 0).then(|| {
                    k.retired_at
                        .map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
                }),
            })
            .collect()
    }

    /// Installs the keys of the process this one takes over from (binary upgrade): each still
    /// decrypts, and renews, the tickets it issued for the rest of its lifetime, counting from
    /// when it was retired there; the one that was current there is retired now. None of them
    /// encrypts: this ring's own current key does, so no key stays current longer than one
    /// rotation however often the binary is upgraded. Keys past their lifetime and names already
    /// in the ring are skipped; a cluster-derived ring installs nothing (every process derives the
    /// same keys). Returns how many keys were installed.
    pub fn import(&self, keys: &[ExportedTicketKey]) -> usize {
        if self.is_derived() {
            return 0;
        }
        let lifetime = *self.lifetime.lock();
        let now = Instant::now();
        let mut ring: Vec<TicketKey> = (**self.keys.load()).clone();
        let before = ring.len();
        for k in keys {
            let age = k.retired_for.unwrap_or(Duration::ZERO);
            if age >= lifetime || ring.iter().any(|r| r.name == k.name) {
                continue;
            }
            ring.push(TicketKey {
                name: k.name,
                aes: k.aes,
                hmac: k.hmac,
                retired_at: Some(now.checked_sub(age).unwrap_or(now)),
            });
        }
        let installed = ring.len() - before;
        self.keys.store(Arc::new(ring));
        installed
    }
}

impl TicketKey {
    fn material(&self) -> TicketKeyMaterial {
        TicketKeyMaterial {
            name: self.name,
            aes: self.aes,
            hmac: self.hmac,
        }
    }
}

/// The policy of BoringSSL's ticket callback (installed by `ffi::install_ticket_keys`): encrypt
/// under the current key; decrypt under any key still in the ring, renewing tickets whose key is
/// no longer current. A resumed connection gets one new ticket, as OpenSSL gives it: BoringSSL
/// sends its configured two after every TLS 1.3 handshake, but the client that resumed replaces
/// the one ticket it used (it still holds the second of its full handshake), and each ticket
/// costs a session copy, its encryption and its bytes.
impl TicketKeys for TicketKeyRing {
    fn encrypting_key(&self, ssl: &SslRef) -> Option<TicketKeyMaterial> {
        if !crate::handshake_info::first_ticket_issued(ssl) && ssl.session_reused() {
            return None;
        }
        let key = self.keys.load().first()?.material();
        self.stats.encrypted.fetch_add(1, Ordering::Relaxed);
        Some(key)
    }

    fn decrypting_key(&self, ssl: &SslRef, name: &[u8; 16]) -> TicketDecryption {
        let keys = self.keys.load();
        let Some(pos) = keys.iter().position(|k| k.name == *name) else {
            self.stats.unknown_key.fetch_add(1, Ordering::Relaxed);
            return TicketDecryption::Unknown;
        };
        crate::handshake_info::mark_ticket(ssl);
        let key = keys[pos].material();
        if pos == 0 {
            self.stats.decrypted_current.fetch_add(1, Ordering::Relaxed);
            TicketDecryption::Current(key)
        } else {
            self.stats.decrypted_renew.fetch_add(1, Ordering::Relaxed);
            TicketDecryption::Retired(key)
        }
    }
}

/// Cluster-derived key mode.
#[derive(Debug)]
struct Derived {
    secrets: Vec<Arc<ClusterSecret>>,
    rotation: Duration,
    epoch: Option<u64>,
}

/// The keys of a derived ring at `epoch`: the first secret's current key first (it encrypts), then
/// the next epoch (a node whose clock runs ahead) and the epochs a ticket can still live in; then
/// the same epochs under the other secrets (decrypt only, during a root-secret rotation).
fn derived_keys(secrets: &[Arc<ClusterSecret>], epoch: u64, rotation: Duration, lifetime: Duration) -> Vec<TicketKey> {
    let back = lifetime.as_secs().div_ceil(rotation.as_secs().max(1));
    let mut epochs = vec![epoch, epoch + 1];
    epochs.extend((1..=back).filter_map(|k| epoch.checked_sub(k)));
    let mut keys = Vec::with_capacity(secrets.len() * epochs.len());
    for secret in secrets {
        keys.extend(epochs.iter().map(|&e| TicketKey::derived(secret, e)));
    }
    keys
}

fn hex(bytes: &[u8]) -> String {
    crate::secret::hex(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_retired_keys_for_the_lifetime_then_erases_them() {
        let ring = TicketKeyRing::new(Duration::from_secs(10));
        let first = ring.key_names()[0];
        let t0 = Instant::now();
        ring.rotate_at(t0);
        assert_eq!(ring.key_names().len(), 2);
        assert_eq!(ring.key_names()[1], first, "old key kept, behind the new current one");
        ring.rotate_at(t0 + Duration::from_secs(5));
        assert_eq!(ring.key_names().len(), 3);
        ring.rotate_at(t0 + Duration::from_secs(11));
        let names = ring.key_names();
        assert!(
            !names.contains(&first),
            "key retired 11 s ago with a 10 s lifetime must be gone"
        );
        assert_eq!(names.len(), 3);
    }

    fn secret(byte: u8) -> Arc<ClusterSecret> {
        Arc::new(ClusterSecret::from_material(&[byte; 32], "test").unwrap())
    }

    #[test]
    fn nodes_with_the_same_secret_derive_the_same_keys() {
        let a = TicketKeyRing::new(Duration::from_secs(7200));
        let b = TicketKeyRing::new(Duration::from_secs(7200));
        a.use_cluster_secrets(vec![secret(1)], Duration::from_secs(3600));
        b.use_cluster_secrets(vec![secret(1)], Duration::from_secs(3600));
        assert_eq!(a.key_names(), b.key_names());
        // current, next, and two epochs back for a 2 h lifetime at 1 h epochs
        assert_eq!(a.key_names().len(), 4);
        let c = TicketKeyRing::new(Duration::from_secs(7200));
        c.use_cluster_secrets(vec![secret(2)], Duration::from_secs(3600));
        assert!(
            c.key_names().iter().all(|n| !a.key_names().contains(n)),
            "other secret, other keys"
        );
    }

    #[test]
    fn epochs_roll_over_and_old_ones_age_out() {
        let ring = TicketKeyRing::new(Duration::from_secs(20));
        ring.use_cluster_secrets(vec![secret(3)], Duration::from_secs(10));
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        ring.refresh_derived(t0);
        let first = ring.key_names()[0];
        ring.refresh_derived(t0 + Duration::from_secs(10));
        let names = ring.key_names();
        assert_ne!(names[0], first, "a new epoch encrypts under a new key");
        assert!(names.contains(&first), "the previous epoch still decrypts");
        ring.refresh_derived(t0 + Duration::from_secs(40));
        assert!(!ring.key_names().contains(&first), "gone after the lifetime");
        assert!(ring.stats.rotations.load(Ordering::Relaxed) >= 2);
    }

    #[test]
    fn a_previous_secret_only_decrypts() {
        let ring = TicketKeyRing::new(Duration::from_secs(3600));
        ring.use_cluster_secrets(vec![secret(5), secret(6)], Duration::from_secs(3600));
        let old = TicketKeyRing::new(Duration::from_secs(3600));
        old.use_cluster_secrets(vec![secret(6)], Duration::from_secs(3600));
        let names = ring.key_names();
        assert_ne!(names[0], old.key_names()[0], "the new secret encrypts");
        assert!(
            names.contains(&old.key_names()[0]),
            "tickets of the old secret still decrypt"
        );
    }

    #[test]
    fn exported_keys_keep_decrypting_in_the_next_process_without_encrypting() {
        let old = TicketKeyRing::new(Duration::from_secs(100));
        let t0 = Instant::now();
        old.rotate_at(t0 - Duration::from_secs(30));
        old.rotate_at(t0 - Duration::from_secs(10));
        let exported = old.export();
        assert_eq!(exported.len(), 3);
        assert!(exported[0].retired_for.is_none(), "current first");
        let ages: Vec<u64> = exported[1..].iter().map(|k| k.retired_for.unwrap().as_secs()).collect();
        assert!(
            ages[0] >= 10 && ages[0] < 12 && ages[1] >= 30 && ages[1] < 32,
            "{ages:?}"
        );
        assert!(!format!("{exported:?}").contains("aes"), "no key material in Debug");

        let new = TicketKeyRing::new(Duration::from_secs(100));
        let own = new.key_names()[0];
        assert_eq!(new.import(&exported), 3);
        let names = new.key_names();
        assert_eq!(names[0], own, "the new process encrypts under its own key");
        assert_eq!(&names[1..], &old.key_names()[..]);
        assert_eq!(new.import(&exported), 0, "names already held are skipped");
        // The old process's ages carry over: the key retired 30 s before goes first.
        new.rotate_at(Instant::now() + Duration::from_secs(75));
        assert!(!new.key_names().contains(&old.key_names()[2]));
        assert!(new.key_names().contains(&old.key_names()[0]));

        let short = TicketKeyRing::new(Duration::from_secs(20));
        assert_eq!(
            short.import(&exported),
            2,
            "a key retired 30 s ago is past a 20 s lifetime"
        );
        let derived = TicketKeyRing::new(Duration::from_secs(100));
        derived.use_cluster_secrets(vec![secret(9)], Duration::from_secs(50));
        assert_eq!(derived.import(&exported), 0, "derived keys come from the secret");
    }

    #[test]
    fn keys_are_distinct() {
        let a = TicketKey::generate();
        let b = TicketKey::generate();
        assert_ne!(a.name, b.name);
        assert_ne!(a.aes, b.aes);
    }
}

#[cfg(test)]
mod resumption_tests {
    use super::*;
    use crate::handshake_info::{self, HandshakeInfo, Resumption};
    use crate::test_tls::{client_ctx, established, server_ctx, Handshake};
    use boring::ssl::{SslContext, SslSession, SslVersion};

    /// One TLS 1.2 handshake offering `session`; returns what the server saw and the new session.
    fn connect(server: &SslContext, client: &SslContext, session: Option<&SslSession>) -> (Resumption, SslSession) {
        let hs = Handshake::resuming(server, client, session, |s| handshake_info::attach(s));
        let resumption = HandshakeInfo::read(established(&hs.server)).resumption;
        (resumption, established(&hs.client).session().unwrap().to_owned())
    }

    #[test]
    fn tickets_of_the_previous_process_resume_after_an_import() {
        let client = client_ctx(|b| b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap());
        let server = |ring: &Arc<TicketKeyRing>| {
            server_ctx(|b| {
                b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
                crate::ffi::install_ticket_keys(b, ring.clone());
            })
        };
        let old = Arc::new(TicketKeyRing::new(Duration::from_secs(60)));
        let (_, session) = connect(&server(&old), &client, None);
        let new = Arc::new(TicketKeyRing::new(Duration::from_secs(60)));
        let (before, _) = connect(&server(&new), &client, Some(&session));
        assert_eq!(before, Resumption::Full, "another process's ticket is unknown");
        new.import(&old.export());
        let (after, _) = connect(&server(&new), &client, Some(&session));
        assert_eq!(after, Resumption::Ticket);
        assert_eq!(
            new.stats.decrypted_renew.load(Ordering::Relaxed),
            1,
            "renewed under the new key"
        );
    }

    #[test]
    fn tickets_resume_under_current_and_retired_keys_only() {
        let ring = Arc::new(TicketKeyRing::new(Duration::from_secs(60)));
        let server = server_ctx(|b| {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            crate::ffi::install_ticket_keys(b, ring.clone());
        });
        let client = client_ctx(|b| b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap());
        let stat = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (first, session) = connect(&server, &client, None);
        assert_eq!((first, stat(&ring.stats.encrypted)), (Resumption::Full, 1));
        let (again, _) = connect(&server, &client, Some(&session));
        assert_eq!((again, stat(&ring.stats.decrypted_current)), (Resumption::Ticket, 1));
        // Under a retired key: resumed, and renewed under the current one.
        let t0 = Instant::now();
        ring.rotate_at(t0);
        let (retired, _) = connect(&server, &client, Some(&session));
        assert_eq!((retired, stat(&ring.stats.decrypted_renew)), (Resumption::Ticket, 1));
        // Once the key is erased: a full handshake.
        ring.rotate_at(t0 + Duration::from_secs(61));
        let (erased, _) = connect(&server, &client, Some(&session));
        assert_eq!((erased, stat(&ring.stats.unknown_key)), (Resumption::Full, 1));
    }
}

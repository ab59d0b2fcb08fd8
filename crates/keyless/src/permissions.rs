//! Which gateways may use which keys: the `[[client]]` tables of the key server's configuration,
//! resolved against the loaded keys once at start. A connection's [`Access`] is worked out from
//! its client certificate's identities when it is accepted, and checked on every sign request.

use crate::codec::KeyId;
use crate::keystore::{hex, KeyStore};
use crate::server_config::ClientKeys;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A `[[client]]` table that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionError {
    /// A key reference matches no loaded key.
    UnknownKey {
        /// Index of the `[[client]]` table.
        client: usize,
        /// The reference as written.
        key: String,
    },
    /// A key name matches several loaded keys (files with the same name in different
    /// directories): name the key by its id instead.
    AmbiguousKey {
        /// Index of the `[[client]]` table.
        client: usize,
        /// The name as written.
        key: String,
    },
}

impl fmt::Display for PermissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PermissionError::UnknownKey { client, key } => write!(
                f,
                "client[{client}].keys: {key:?} is neither the name (file name without extension) nor the id of a loaded key"
            ),
            PermissionError::AmbiguousKey { client, key } => write!(
                f,
                "client[{client}].keys: several loaded keys are named {key:?}; use the key id (64 hex digits) instead"
            ),
        }
    }
}

impl std::error::Error for PermissionError {}

impl tlsgate_error::Classify for PermissionError {
    fn side(&self) -> tlsgate_error::Side {
        tlsgate_error::Side::Config
    }
    fn kind(&self) -> &'static str {
        match self {
            PermissionError::UnknownKey { .. } => "permission_unknown_key",
            PermissionError::AmbiguousKey { .. } => "permission_ambiguous_key",
        }
    }
}

/// What one connection may sign with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Every key (no `[[client]]` table is configured).
    All,
    /// Only these keys (possibly none).
    Only(HashSet<KeyId>),
}

impl Access {
    /// Whether the key `id` may be used.
    pub fn allows(&self, id: &KeyId) -> bool {
        match self {
            Access::All => true,
            Access::Only(keys) => keys.contains(id),
        }
    }
}

/// The resolved `[[client]]` tables: identity to key ids.
#[derive(Debug, Default)]
pub struct Permissions {
    /// `None`: no table configured, everyone may use every key.
    by_identity: Option<HashMap<String, HashSet<KeyId>>>,
}

impl Permissions {
    /// Resolves every key reference of `clients` against `keys`.
    pub fn build(clients: &[ClientKeys], keys: &KeyStore) -> Result<Self, PermissionError> {
        if clients.is_empty() {
            return Ok(Self::default());
        }
        let mut by_identity: HashMap<String, HashSet<KeyId>> = HashMap::new();
        for (i, client) in clients.iter().enumerate() {
            let allowed = by_identity.entry(normalise(&client.identity)).or_default();
            for reference in &client.keys {
                let matches: Vec<KeyId> = keys
                    .iter()
                    .filter(|k| k.name == *reference || hex(&k.id).eq_ignore_ascii_case(reference))
                    .map(|k| k.id)
                    .collect();
                match matches.as_slice() {
                    [] => {
                        return Err(PermissionError::UnknownKey {
                            client: i,
                            key: reference.clone(),
                        })
                    }
                    [id] => {
                        allowed.insert(*id);
                    }
                    _ => {
                        return Err(PermissionError::AmbiguousKey {
                            client: i,
                            key: reference.clone(),
                        })
                    }
                }
            }
        }
        Ok(Self {
            by_identity: Some(by_identity),
        })
    }

    /// Whether any `[[client]]` table is configured.
    pub fn is_configured(&self) -> bool {
        self.by_identity.is_some()
    }

    /// The access of a client with these certificate identities (`cn:…`, `spki:…`): the union of
    /// the keys of every table naming one of them.
    pub fn access(&self, identities: &[String]) -> Access {
        let Some(by_identity) = &self.by_identity else {
            return Access::All;
        };
        let mut keys = HashSet::new();
        for id in identities {
            if let Some(allowed) = by_identity.get(&normalise(id)) {
                keys.extend(allowed.iter().copied());
            }
        }
        Access::Only(keys)
    }
}

/// `spki:` digests compare in lower case; common names exactly.
fn normalise(identity: &str) -> String {
    match identity.strip_prefix("spki:") {
        Some(h) => format!("spki:{}", h.to_ascii_lowercase()),
        None => identity.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::ec::{EcGroup, EcKey};
    use boring::nid::Nid;
    use boring::pkey::PKey;
    use std::path::Path;

    fn write_key(path: &Path) -> KeyId {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
        std::fs::write(path, key.private_key_to_pem_pkcs8().unwrap()).unwrap();
        crate::keystore::key_id(&key).unwrap()
    }

    fn rule(identity: &str, keys: &[&str]) -> ClientKeys {
        ClientKeys {
            identity: identity.into(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn keys_are_granted_by_name_or_id_to_matching_identities_only() {
        let dir = tempfile::tempdir().unwrap();
        let eu = write_key(&dir.path().join("example-eu.key"));
        let us = write_key(&dir.path().join("example-us.pem"));
        let store = KeyStore::load(&[dir.path().to_path_buf()]).unwrap();
        let spki = "ab".repeat(32);
        let perms = Permissions::build(
            &[
                rule("cn:gw-eu", &["example-eu"]),
                rule("cn:gw-us", &[&hex(&us).to_uppercase()]),
                rule(&format!("spki:{}", spki.to_uppercase()), &["example-eu", "example-us"]),
                rule("cn:gw-eu", &["example-us"]),
                rule("cn:nothing", &[]),
            ],
            &store,
        )
        .unwrap();
        assert!(perms.is_configured());
        let eu_gw = perms.access(&["cn:gw-eu".into()]);
        assert!(eu_gw.allows(&eu) && eu_gw.allows(&us), "tables of one identity add up");
        let us_gw = perms.access(&["cn:gw-us".into(), "spki:00".into()]);
        assert!(us_gw.allows(&us) && !us_gw.allows(&eu));
        let by_spki = perms.access(&["cn:other".into(), format!("spki:{spki}")]);
        assert!(by_spki.allows(&us) && by_spki.allows(&eu));
        for nobody in [vec![], vec!["cn:nothing".to_string()], vec!["cn:GW-EU".to_string()]] {
            let a = perms.access(&nobody);
            assert!(!a.allows(&eu) && !a.allows(&us), "{nobody:?}");
        }
        // No table: everyone may use everything.
        let open = Permissions::build(&[], &store).unwrap();
        assert!(!open.is_configured());
        assert_eq!(open.access(&[]), Access::All);
        assert!(open.access(&[]).allows(&eu));
    }

    #[test]
    fn unknown_and_ambiguous_key_names_are_configuration_errors() {
        let dir = tempfile::tempdir().unwrap();
        write_key(&dir.path().join("site.key"));
        std::fs::create_dir(dir.path().join("more")).unwrap();
        let second = write_key(&dir.path().join("more").join("site.key"));
        let store = KeyStore::load(&[dir.path().to_path_buf(), dir.path().join("more")]).unwrap();
        assert_eq!(store.len(), 2);
        assert_eq!(
            Permissions::build(&[rule("cn:a", &[]), rule("cn:b", &["typo"])], &store).unwrap_err(),
            PermissionError::UnknownKey {
                client: 1,
                key: "typo".into()
            }
        );
        assert_eq!(
            Permissions::build(&[rule("cn:a", &["site"])], &store).unwrap_err(),
            PermissionError::AmbiguousKey {
                client: 0,
                key: "site".into()
            }
        );
        // The id always names one key.
        let perms = Permissions::build(&[rule("cn:a", &[&hex(&second)])], &store).unwrap();
        assert!(perms.access(&["cn:a".into()]).allows(&second));
    }
}

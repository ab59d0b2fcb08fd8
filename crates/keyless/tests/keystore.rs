//! The key server's key store: every supported key type loads from a directory (non-key files
//! skipped), is found by the SHA-256 of its SPKI, and signs with exactly the schemes its type allows.

use boring::ec::{EcGroup, EcKey};
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use boring::rsa::Rsa;
use tlsgate_keyless::{algorithms, keystore};
use tlsgate_tls::keys::KeyType;

fn write(dir: &std::path::Path, name: &str, key: &PKey<Private>) {
    std::fs::write(dir.join(name), key.private_key_to_pem_pkcs8().unwrap()).unwrap();
}

#[test]
fn every_key_type_loads_and_signs_only_its_schemes() {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = vec![];
    for bits in [2048, 3072, 4096] {
        keys.push((
            format!("rsa{bits}.key"),
            PKey::from_rsa(Rsa::generate(bits).unwrap()).unwrap(),
        ));
    }
    for (name, nid) in [("p256.key", Nid::X9_62_PRIME256V1), ("p384.key", Nid::SECP384R1)] {
        let group = EcGroup::from_curve_name(nid).unwrap();
        keys.push((
            name.to_string(),
            PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap(),
        ));
    }
    let ed = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519"])
        .output()
        .expect("openssl");
    keys.push(("ed25519.key".into(), PKey::private_key_from_pem(&ed.stdout).unwrap()));
    for (name, key) in &keys {
        write(dir.path(), name, key);
    }
    std::fs::write(dir.path().join("notes.txt"), "not a key").unwrap();

    let store = keystore::KeyStore::load(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(store.len(), keys.len());
    for (name, key) in &keys {
        let id = keystore::key_id(key).unwrap();
        let loaded = store
            .get(&id)
            .unwrap_or_else(|| panic!("{name} not found by its SPKI hash"));
        let codes = [
            0x0401, 0x0501, 0x0601, 0x0804, 0x0805, 0x0806, 0x0403, 0x0503, 0x0603, 0x0807,
        ];
        let allowed: Vec<u16> = codes
            .into_iter()
            .filter(|c| algorithms::allowed(loaded.kind, *c))
            .collect();
        assert!(!allowed.is_empty(), "{name}");
        for code in allowed {
            let alg = algorithms::from_code(code).unwrap();
            let sig = loaded
                .signer
                .sign(alg, b"message")
                .unwrap_or_else(|e| panic!("{name} {code:#x}: {e}"));
            assert!(!sig.is_empty());
        }
        let expected = match name.as_str() {
            n if n.starts_with("rsa") => KeyType::Rsa,
            "p256.key" => KeyType::EcdsaP256,
            "p384.key" => KeyType::EcdsaP384,
            _ => KeyType::Ed25519,
        };
        assert_eq!(loaded.kind, expected, "{name}");
    }
}

#[test]
fn weak_and_unparsable_keys_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "weak.key",
        &PKey::from_rsa(Rsa::generate(1024).unwrap()).unwrap(),
    );
    let err = keystore::KeyStore::load(&[dir.path().join("weak.key")]).err().unwrap();
    assert!(
        matches!(err, keystore::KeyStoreError::WeakRsa { bits: 1024, .. }),
        "{err}"
    );
    assert_eq!(tlsgate_error::Classify::side(&err), tlsgate_error::Side::Config);
    let err = err.to_string();
    assert!(err.contains("weak.key") && err.contains("1024"), "{err}");
    std::fs::write(dir.path().join("bad.key"), "-----BEGIN PRIVATE KEY-----\nnope\n").unwrap();
    let err = keystore::KeyStore::load(&[dir.path().join("bad.key")]).err().unwrap();
    assert!(matches!(err, keystore::KeyStoreError::NotAKey { .. }), "{err}");
    let err = err.to_string();
    assert!(err.contains("bad.key"), "{err}");
}

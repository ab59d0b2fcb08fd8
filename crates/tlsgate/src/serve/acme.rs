//! ACME in `tlsgate serve`: the state directory (account key, each site's certificates and
//! keys), the configuration a generation is built from (a `[site.acme]` site serves the files
//! of its state directory: the CA's certificate once issued, a self-signed placeholder before),
//! installing a new certificate without a restart, and starting the renewal manager
//! (`acme_manager`, which uses this module and is started by `serve`). docs/ACME.md.

use boring::pkey::{PKey, Private};
use boring::x509::X509;
use std::path::{Path, PathBuf};
use tlsgate_acme::csr::KeyKind;
use tlsgate_config::{AcmeConfig, CertificateConfig, Config};
use tlsgate_proxy::Gateway;
use tlsgate_tls::TlsBuildError;

/// Validity of the placeholder a site serves before its first certificate arrives.
const PLACEHOLDER_SECS: u32 = 30 * 86_400;

/// One ACME certificate of a site: where its files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSlot {
    /// Site name.
    pub site: String,
    /// `ecdsa` or `rsa`.
    pub key_type: String,
    /// `<state>/sites/<site>/<key_type>`, without extension.
    pub base: PathBuf,
    /// A keyless site's key servers (`[site.acme] key_server_pool` / `key_servers`): they
    /// create the key and the CSR, and no key file is ever written here.
    pub keyless: Option<KeylessAt>,
}

/// Where a keyless ACME certificate's key lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeylessAt {
    /// `[[keyless.pool]]` name.
    pub pool: Option<String>,
    /// Or these key servers.
    pub servers: Vec<String>,
}

impl KeylessAt {
    /// The pool's name as the keyless client and the metrics know it.
    pub fn pool_name(&self) -> String {
        self.pool.clone().unwrap_or_else(|| self.servers.join(","))
    }
}

impl CertSlot {
    /// The CA's chain.
    pub fn chain(&self) -> PathBuf {
        self.base.with_extension("crt")
    }
    /// Its key.
    pub fn key(&self) -> PathBuf {
        self.base.with_extension("key")
    }
    /// The placeholder chain.
    pub fn placeholder_chain(&self) -> PathBuf {
        self.base.with_extension("placeholder.crt")
    }
    /// The placeholder key.
    pub fn placeholder_key(&self) -> PathBuf {
        self.base.with_extension("placeholder.key")
    }
    /// Whether the CA's certificate is on disk (and its key, unless it lives on key servers).
    pub fn issued(&self) -> bool {
        self.chain().is_file() && (self.keyless.is_some() || self.key().is_file())
    }
    /// The key kind to order.
    pub fn key_kind(&self) -> KeyKind {
        if self.key_type == "rsa" {
            KeyKind::Rsa2048
        } else {
            KeyKind::EcdsaP256
        }
    }
}

/// A site name as a directory name (letters, digits, `.`, `_`, `-`; others become `_`).
fn dir_name(site: &str) -> String {
    let s: String = site
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// Every ACME certificate slot of a configuration, in site order.
pub fn slots(config: &Config) -> Vec<CertSlot> {
    let Some(acme) = &config.acme else { return Vec::new() };
    let mut out = Vec::new();
    for site in &config.sites {
        let Some(s) = &site.acme else { continue };
        for kt in &s.key_types {
            out.push(CertSlot {
                site: site.name.clone(),
                key_type: kt.clone(),
                base: acme.state_dir.join("sites").join(dir_name(&site.name)).join(kt),
                keyless: (s.key_server_pool.is_some() || !s.key_servers.is_empty()).then(|| KeylessAt {
                    pool: s.key_server_pool.clone(),
                    servers: s.key_servers.clone(),
                }),
            });
        }
    }
    out
}

/// The names a site's certificate covers.
pub fn names(config: &Config, site: &str) -> Vec<String> {
    let Some(s) = config.sites.iter().find(|s| s.name == site) else {
        return Vec::new();
    };
    match &s.acme {
        Some(a) if !a.names.is_empty() => a.names.clone(),
        _ => s.server_names.clone(),
    }
}

fn io_error(field: &str, path: &Path) -> impl FnOnce(std::io::Error) -> TlsBuildError {
    let (field, path) = (field.to_string(), path.display().to_string());
    move |source| TlsBuildError::Read { field, path, source }
}

/// Points every `[site.acme]` site at its files in the state directory (creating the
/// placeholder where nothing was issued yet). Run on every configuration a generation is built
/// from: at start, on reload, and when a certificate was issued.
pub fn prepare(mut config: Config) -> Result<Config, TlsBuildError> {
    let slots = slots(&config);
    if slots.is_empty() {
        return Ok(config);
    }
    for (i, site) in config.sites.clone().iter().enumerate() {
        if site.acme.is_none() {
            continue;
        }
        let mut certificates = Vec::new();
        for slot in slots.iter().filter(|s| s.site == site.name) {
            let cert = match (&slot.keyless, slot.issued()) {
                (Some(k), true) => keyless_certificate(&slot.chain(), k),
                (None, true) => certificate(&slot.chain(), &slot.key()),
                (_, false) => {
                    // Even a keyless site serves a local placeholder until the CA issues.
                    ensure_placeholder(slot, &names(&config, &site.name))?;
                    certificate(&slot.placeholder_chain(), &slot.placeholder_key())
                }
            };
            certificates.push(cert);
        }
        config.sites[i].certificates = certificates;
    }
    Ok(config)
}

fn certificate(chain: &Path, key: &Path) -> CertificateConfig {
    let value = serde_json::json!({ "chain": chain, "key": key });
    serde_json::from_value(value).expect("a chain and a key make a certificate")
}

fn keyless_certificate(chain: &Path, k: &KeylessAt) -> CertificateConfig {
    let value = match &k.pool {
        Some(pool) => serde_json::json!({ "chain": chain, "key_server_pool": pool }),
        None => serde_json::json!({ "chain": chain, "key_servers": k.servers }),
    };
    serde_json::from_value(value).expect("a chain and key servers make a certificate")
}

fn ensure_placeholder(slot: &CertSlot, names: &[String]) -> Result<(), TlsBuildError> {
    if slot.placeholder_chain().is_file() && slot.placeholder_key().is_file() {
        return Ok(());
    }
    let field = "acme.state_dir";
    let setting = |source| TlsBuildError::Setting {
        field: field.into(),
        source,
    };
    let dir = slot.base.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_error(field, dir))?;
    let key = tlsgate_acme::csr::generate_key(slot.key_kind()).map_err(|e| match e {
        tlsgate_acme::AcmeError::Crypto(s) => setting(s),
        other => setting_io(field, other),
    })?;
    let names: Vec<String> = names.iter().map(|n| n.trim_start_matches("*.").to_string()).collect();
    let cert = tlsgate_acme::csr::self_signed(&names, &key, PLACEHOLDER_SECS, Vec::new()).map_err(|e| match e {
        tlsgate_acme::AcmeError::Crypto(s) => setting(s),
        other => setting_io(field, other),
    })?;
    write_pair(
        slot.placeholder_chain(),
        &cert.to_pem().map_err(setting)?,
        slot.placeholder_key(),
        &key,
    )?;
    tracing::info!(
        site = slot.site,
        key_type = slot.key_type,
        "ACME: serving a self-signed placeholder until the CA issues"
    );
    Ok(())
}

fn setting_io(field: &str, e: tlsgate_acme::AcmeError) -> TlsBuildError {
    TlsBuildError::Read {
        field: field.into(),
        path: String::new(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Writes a key (mode 0600) and a chain through temporary files renamed into place.
fn write_pair(chain_path: PathBuf, chain: &[u8], key_path: PathBuf, key: &PKey<Private>) -> Result<(), TlsBuildError> {
    let field = "acme.state_dir";
    let key_pem = key
        .private_key_to_pem_pkcs8()
        .map_err(|source| TlsBuildError::Setting {
            field: field.into(),
            source,
        })?;
    write_atomic(&key_path, &key_pem, 0o600)?;
    write_atomic(&chain_path, chain, 0o644)
}

/// Writes `path` through `path.tmp` and a rename.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), TlsBuildError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let field = "acme.state_dir";
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io_error(field, &tmp))?;
    f.write_all(data)
        .and_then(|_| f.sync_all())
        .map_err(io_error(field, &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_error(field, path))
}

/// Why an issued certificate was not installed (the running one keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum InstallCertError {
    /// The CA's chain or the new key does not parse, or they do not belong together.
    #[error("issued certificate refused: {0}")]
    Mismatch(String),
    /// The files could not be written, or the new generation could not be built.
    #[error(transparent)]
    Build(#[from] TlsBuildError),
}

impl tlsgate_error::Classify for InstallCertError {
    fn side(&self) -> tlsgate_error::Side {
        match self {
            Self::Mismatch(_) => tlsgate_error::Side::Upstream,
            Self::Build(e) => e.side(),
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            Self::Mismatch(_) => "acme_certificate_mismatch",
            Self::Build(_) => "acme_install",
        }
    }
}

/// Checks an issued chain against its key, stores both and installs a generation serving them;
/// on any failure the previous files are put back and the running generation stays.
pub fn install(gateway: &Gateway, slot: &CertSlot, chain_pem: &[u8], key_pem: &[u8]) -> Result<u64, InstallCertError> {
    let key = PKey::private_key_from_pem(key_pem).map_err(|e| InstallCertError::Mismatch(format!("key: {e}")))?;
    let spki = key
        .public_key_to_der()
        .map_err(|e| InstallCertError::Mismatch(e.to_string()))?;
    check_leaf(chain_pem, &spki)?;
    write_and_build(gateway, slot, chain_pem, Some(key_pem))
}

/// Installs a keyless certificate: no key file, the key lives on the key servers. With `spki`
/// (the DER public key of the CSR the key server made), the chain must be for that key.
pub fn install_keyless(
    gateway: &Gateway,
    slot: &CertSlot,
    chain_pem: &[u8],
    spki: Option<&[u8]>,
) -> Result<u64, InstallCertError> {
    match spki {
        Some(spki) => check_leaf(chain_pem, spki)?,
        None => {
            X509::stack_from_pem(chain_pem).map_err(|e| InstallCertError::Mismatch(format!("chain: {e}")))?;
        }
    }
    write_and_build(gateway, slot, chain_pem, None)
}

/// The chain's leaf must carry the public key `spki` (DER).
fn check_leaf(chain_pem: &[u8], spki: &[u8]) -> Result<(), InstallCertError> {
    let chain = X509::stack_from_pem(chain_pem).map_err(|e| InstallCertError::Mismatch(format!("chain: {e}")))?;
    let leaf = chain
        .first()
        .ok_or_else(|| InstallCertError::Mismatch("empty chain".into()))?;
    let leaf_key = leaf
        .public_key()
        .and_then(|k| k.public_key_to_der())
        .map_err(|e| InstallCertError::Mismatch(e.to_string()))?;
    if leaf_key != spki {
        return Err(InstallCertError::Mismatch(
            "the certificate is not for the new key".into(),
        ));
    }
    Ok(())
}

/// Writes the chain (and the key, unless keyless) and builds a generation from them; on any
/// failure the previous files are put back and the running generation keeps serving.
fn write_and_build(
    gateway: &Gateway,
    slot: &CertSlot,
    chain_pem: &[u8],
    key_pem: Option<&[u8]>,
) -> Result<u64, InstallCertError> {
    let (chain_path, key_path) = (slot.chain(), slot.key());
    let old_chain = std::fs::read(&chain_path).ok();
    let old_key = std::fs::read(&key_path).ok();
    let written = match key_pem {
        Some(key_pem) => write_atomic(&key_path, key_pem, 0o600),
        None => Ok(()),
    };
    let result = written
        .and_then(|_| write_atomic(&chain_path, chain_pem, 0o644))
        .and_then(|_| prepare(gateway.current().config.as_ref().clone()))
        .and_then(|config| gateway.install(config));
    if result.is_err() {
        // Back to what served before (or to the placeholder when nothing was issued yet).
        match (old_chain, old_key) {
            (Some(c), k) => {
                if let Some(k) = k {
                    let _ = write_atomic(&key_path, &k, 0o600);
                }
                let _ = write_atomic(&chain_path, &c, 0o644);
            }
            _ => {
                let _ = std::fs::remove_file(&chain_path);
                let _ = std::fs::remove_file(&key_path);
            }
        }
    }
    Ok(result?)
}

/// The state directory's account key, created when missing.
pub fn account_key(acme: &AcmeConfig) -> Result<tlsgate_acme::jws::AccountKey, tlsgate_acme::AcmeError> {
    let path = acme.state_dir.join("account.key");
    match std::fs::read(&path) {
        Ok(pem) => tlsgate_acme::jws::AccountKey::from_pem(&pem),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = tlsgate_acme::jws::AccountKey::generate()?;
            std::fs::create_dir_all(&acme.state_dir)
                .map_err(|e| tlsgate_acme::AcmeError::Io(format!("{}: {e}", acme.state_dir.display())))?;
            write_atomic(&path, &key.to_pem()?, 0o600).map_err(|e| tlsgate_acme::AcmeError::Io(e.to_string()))?;
            Ok(key)
        }
        Err(e) => Err(tlsgate_acme::AcmeError::Io(format!("{}: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(state: &Path) -> Config {
        tlsgate_config::parse(&format!(
            "[acme]\ndirectory = \"https://ca.test/dir\"\nstate_dir = {state:?}\n\
             [[site]]\nname = \"a b\"\nserver_names = [\"a.test\"]\n[site.acme]\nkey_types = [\"ecdsa\", \"rsa\"]\n\
             [[site]]\nname = \"files\"\nserver_names = [\"f.test\"]\n[[site.certificate]]\nchain = \"/c\"\nkey = \"/k\"\n"
        ))
        .unwrap()
    }

    #[test]
    fn prepare_serves_placeholders_then_issued_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = prepare(config(dir.path())).unwrap();
        let certs = &c.sites[0].certificates;
        assert_eq!(certs.len(), 2);
        assert!(
            certs[0].chain.ends_with("sites/a_b/ecdsa.placeholder.crt"),
            "{:?}",
            certs[0].chain
        );
        assert!(certs[1]
            .key
            .as_ref()
            .unwrap()
            .ends_with("sites/a_b/rsa.placeholder.key"));
        assert_eq!(
            c.sites[1].certificates[0].chain,
            Path::new("/c"),
            "file sites untouched"
        );
        let slot = &slots(&c)[0];
        std::fs::copy(slot.placeholder_chain(), slot.chain()).unwrap();
        std::fs::copy(slot.placeholder_key(), slot.key()).unwrap();
        let again = prepare(c).unwrap();
        assert!(again.sites[0].certificates[0].chain.ends_with("sites/a_b/ecdsa.crt"));
    }
}

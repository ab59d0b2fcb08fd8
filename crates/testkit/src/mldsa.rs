//! ML-DSA chains for the tests: [`TestPki::mldsa_chain`] issues an ML-DSA root, intermediate and
//! leaf (all of one parameter set, signed by BoringSSL through `tlsgate_tls::pki`) and writes
//! them next to the PKI's other files.

use crate::TestPki;
use std::path::PathBuf;
use tlsgate_tls::mldsa::Level;
use tlsgate_tls::pki::MlDsaChain;

/// The files of an ML-DSA chain.
pub struct MlDsaFiles {
    /// `<stem>.pem`: leaf + intermediate (what the gateway serves).
    pub chain: PathBuf,
    /// `<stem>.key`: the leaf's PKCS#8 key (seed form), mode 0600.
    pub key: PathBuf,
    /// `<stem>-root.pem`: the self-signed ML-DSA root clients trust.
    pub root: PathBuf,
    /// The certificates and keys themselves.
    pub issued: MlDsaChain,
}

impl TestPki {
    /// Issues an ML-DSA chain of `level` for `names` (valid 30 days) and writes its files.
    pub fn mldsa_chain(&self, stem: &str, names: &[&str], level: Level) -> MlDsaFiles {
        let issued = MlDsaChain::issue(level, names, 30).expect("ML-DSA chain");
        let (chain, key) = self.write_pair(stem, &issued.chain_pem(), &issued.leaf.key_pem);
        let root = self.write(&format!("{stem}-root.pem"), &issued.root.cert_pem);
        MlDsaFiles {
            chain,
            key,
            root,
            issued,
        }
    }
}

//! Certificates for the experiments: a CA and, per chain size, an intermediate and a leaf, padded
//! with a private non-critical extension of random (incompressible) bytes so the chain the
//! server sends (leaf + intermediate) reaches a target size; and real ML-DSA chains. All issued
//! by tlsgate-tls's PKI ([`tlsgate_tls::pki`]); this module only sizes and writes the chains.
//!
//! Two kinds of "post-quantum chain":
//! - **padded** ([`Ca::chain`]): an ECDSA P-256 chain grown to a target size (the paper's 8 KB
//!   and 16 KB). The handshake carries the same certificate bytes; the CertificateVerify stays
//!   ECDSA-sized (~72 bytes) and signing costs ECDSA time. Kept as the paper-size stand-ins.
//! - **real ML-DSA** ([`mldsa_chain`]): root, intermediate and leaf all ML-DSA-44 or -65
//!   ([`MlDsaChain`]); the gateway serves them as a third certificate kind to clients that offer
//!   the scheme (docs/PQ-CERTS.md). Leaf + intermediate DER is ~8.0 KB (ML-DSA-44) and ~11.1 KB
//!   (ML-DSA-65); the CertificateVerify carries a 2,420 / 3,309-byte signature.

use std::path::{Path, PathBuf};
use tlsgate_error::{Classify, Side};
use tlsgate_tls::mldsa::Level;
use tlsgate_tls::pki::{CertSpec, Certified, KeyKind, MlDsaChain, PkiError, RawExtension};

/// Private OID (arc under a documentation-style enterprise number) of the padding extension.
const PAD_OID: &str = "1.3.6.1.4.1.55555.77.1";
/// Validity of the lab's certificates (an experiment runs for minutes).
const DAYS: u64 = 30;

/// Why a chain could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// Issuing a certificate failed.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// Writing a chain or key file failed.
    #[error("write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl Classify for ChainError {
    fn side(&self) -> Side {
        Side::Internal
    }

    fn kind(&self) -> &'static str {
        match self {
            ChainError::Pki(e) => e.kind(),
            ChainError::Write { .. } => "lab_write",
        }
    }
}

/// A chain written to disk.
#[derive(Debug, Clone)]
pub struct ChainFiles {
    /// Leaf + intermediate, PEM.
    pub chain: PathBuf,
    /// The leaf's key, PEM.
    pub key: PathBuf,
    /// DER bytes of leaf + intermediate (what the server sends).
    pub chain_bytes: usize,
}

/// A CA that issues padded chains.
pub struct Ca {
    ca: Certified,
    /// The CA certificate, PEM.
    pub pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca")
    }
}

/// A padding extension of about `bytes` bytes: a DER OCTET STRING of random bytes.
fn padding(bytes: usize) -> RawExtension {
    let mut der = Vec::with_capacity(bytes + 4);
    der.push(0x04);
    match bytes {
        0..=127 => der.push(bytes as u8),
        128..=255 => der.extend([0x81, bytes as u8]),
        _ => der.extend([0x82, (bytes >> 8) as u8, bytes as u8]),
    }
    der.extend((0..bytes).map(|_| rand::random::<u8>()));
    RawExtension {
        oid: PAD_OID.into(),
        der,
    }
}

fn der_len(c: &Certified) -> Result<usize, PkiError> {
    Ok(c.certificate().to_der()?.len())
}

fn write(path: PathBuf, contents: &str) -> Result<PathBuf, ChainError> {
    match std::fs::write(&path, contents) {
        Ok(()) => Ok(path),
        Err(source) => Err(ChainError::Write { path, source }),
    }
}

impl Ca {
    /// A fresh self-signed ECDSA P-256 CA.
    pub fn new() -> Result<Self, ChainError> {
        let ca = Certified::issue(&CertSpec::ca("tlsgate lab CA", KeyKind::EcdsaP256, DAYS), None)?;
        Ok(Self {
            pem: ca.cert_pem.clone(),
            ca,
        })
    }

    /// Issues intermediate + leaf for `names`, padded so leaf + intermediate DER is about
    /// `target_bytes` (no padding when the plain chain is already that big, e.g. 0), and writes
    /// `<stem>.pem` and `<stem>.key` under `dir`.
    pub fn chain(&self, dir: &Path, stem: &str, names: &[&str], target_bytes: usize) -> Result<ChainFiles, ChainError> {
        let plain = self.issue(names, 0, 0)?;
        let base = der_len(&plain.0)? + der_len(&plain.1)?;
        let (leaf, inter) = if target_bytes > base {
            // Each extension costs ~20 bytes of framing besides its payload.
            let extra = target_bytes - base;
            let half = extra / 2;
            self.issue(names, half.saturating_sub(20), (extra - half).saturating_sub(20))?
        } else {
            plain
        };
        let chain_bytes = der_len(&leaf)? + der_len(&inter)?;
        let chain = write(
            dir.join(format!("{stem}.pem")),
            &format!("{}{}", leaf.cert_pem, inter.cert_pem),
        )?;
        let key = write(dir.join(format!("{stem}.key")), &leaf.key_pem)?;
        Ok(ChainFiles {
            chain,
            key,
            chain_bytes,
        })
    }

    /// (leaf, intermediate), each with its padding.
    fn issue(&self, names: &[&str], leaf_pad: usize, inter_pad: usize) -> Result<(Certified, Certified), PkiError> {
        let pad = |bytes: usize| if bytes > 0 { vec![padding(bytes)] } else { vec![] };
        let inter = CertSpec {
            extra: pad(inter_pad),
            ..CertSpec::ca("tlsgate lab intermediate", KeyKind::EcdsaP256, DAYS)
        };
        let inter = Certified::issue(&inter, Some(&self.ca))?;
        let leaf = CertSpec {
            common_name: names.first().copied().unwrap_or("lab").into(),
            extra: pad(leaf_pad),
            ..CertSpec::leaf(names, KeyKind::EcdsaP256, DAYS)
        };
        let leaf = Certified::issue(&leaf, Some(&inter))?;
        Ok((leaf, inter))
    }
}

/// A real ML-DSA chain written to disk: leaf + intermediate and the leaf's key as [`ChainFiles`],
/// and the root's PEM (for the clients' trust bundle).
pub fn mldsa_chain(dir: &Path, stem: &str, names: &[&str], level: Level) -> Result<(ChainFiles, String), ChainError> {
    let issued = MlDsaChain::issue(level, names, DAYS)?;
    let chain_bytes = der_len(&issued.leaf)? + der_len(&issued.intermediate)?;
    let chain = write(dir.join(format!("{stem}.pem")), &issued.chain_pem())?;
    let key = write(dir.join(format!("{stem}.key")), &issued.leaf.key_pem)?;
    Ok((
        ChainFiles {
            chain,
            key,
            chain_bytes,
        },
        issued.root.cert_pem.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_chains_reach_their_size() {
        let dir = tempdir();
        let ca = Ca::new().unwrap();
        let plain = ca.chain(&dir, "c", &["lab.test"], 0).unwrap();
        assert!(plain.chain_bytes < 1500, "{}", plain.chain_bytes);
        for target in [8192, 16384] {
            let c = ca.chain(&dir, &format!("p{target}"), &["lab.test"], target).unwrap();
            assert!(c.chain_bytes.abs_diff(target) < 100, "{} vs {target}", c.chain_bytes);
            let pem = std::fs::read_to_string(&c.chain).unwrap();
            assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2);
            let key = std::fs::read(&c.key).unwrap();
            let key = boring::pkey::PKey::private_key_from_pem(&key).unwrap();
            let leaf = boring::x509::X509::from_pem(pem.as_bytes()).unwrap();
            assert!(leaf.public_key().unwrap().public_eq(&key), "the key is the leaf's");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn mldsa_chains_have_their_sizes_and_roots() {
        let dir = tempdir();
        for (level, lo, hi) in [(Level::MlDsa44, 7_000, 9_000), (Level::MlDsa65, 10_000, 12_000)] {
            let (c, root) = mldsa_chain(&dir, level.name(), &["lab.test"], level).unwrap();
            assert!((lo..hi).contains(&c.chain_bytes), "{level:?}: {}", c.chain_bytes);
            let pem = std::fs::read(&c.chain).unwrap();
            let certs = boring::x509::X509::stack_from_pem(&pem).unwrap();
            assert_eq!(certs.len(), 2);
            let root = boring::x509::X509::from_pem(root.as_bytes()).unwrap();
            let key = root.public_key().unwrap();
            assert!(certs[1].verify(&key).unwrap(), "the intermediate is the root's");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("tgl-pki-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

//! Certificates for the experiments: a CA and, per chain size, an intermediate and a leaf, padded
//! with a private non-critical extension of random (incompressible) bytes so the chain the
//! server sends (leaf + intermediate) reaches a target size.
//!
//! This stands in for ML-DSA: BoringSSL as bound by `boring` 5 cannot load or sign with ML-DSA
//! keys, so a "post-quantum chain" here is an ECDSA P-256 chain of the size an ML-DSA chain
//! would have. The handshake carries the same bytes; the signature work differs (ECDSA), and the
//! CertificateVerify stays ECDSA-sized (ML-DSA-44 would add ~2.3 KB there).

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, CustomExtension, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};

/// Private OID (arc under a documentation-style enterprise number) of the padding extension.
const PAD_OID: &[u64] = &[1, 3, 6, 1, 4, 1, 55555, 77, 1];

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
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate, PEM.
    pub pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca")
    }
}

fn ca_params(cn: &str) -> anyhow::Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(p)
}

fn padding(bytes: usize) -> CustomExtension {
    // extnValue holds a DER OCTET STRING of random bytes.
    let mut v = Vec::with_capacity(bytes + 4);
    v.push(0x04);
    match bytes {
        0..=127 => v.push(bytes as u8),
        128..=255 => v.extend([0x81, bytes as u8]),
        _ => v.extend([0x82, (bytes >> 8) as u8, bytes as u8]),
    }
    v.extend((0..bytes).map(|_| rand::random::<u8>()));
    CustomExtension::from_oid_content(PAD_OID, v)
}

impl Ca {
    /// A fresh self-signed ECDSA P-256 CA.
    pub fn new() -> anyhow::Result<Self> {
        let key = KeyPair::generate()?;
        let params = ca_params("tlsgate lab CA")?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Self { params, key, pem })
    }

    /// Issues intermediate + leaf for `names`, padded so leaf + intermediate DER is about
    /// `target_bytes` (no padding when the plain chain is already that big, e.g. 0), and writes
    /// `<stem>.pem` and `<stem>.key` under `dir`.
    pub fn chain(&self, dir: &Path, stem: &str, names: &[&str], target_bytes: usize) -> anyhow::Result<ChainFiles> {
        let plain = self.issue(names, 0, 0)?;
        let base = plain.0.der().len() + plain.1.der().len();
        let (leaf, inter, key) = if target_bytes > base {
            // Each extension costs ~20 bytes of framing besides its payload.
            let extra = target_bytes - base;
            let half = extra / 2;
            self.issue(names, half.saturating_sub(20), (extra - half).saturating_sub(20))?
        } else {
            plain
        };
        let chain_bytes = leaf.der().len() + inter.der().len();
        let text = format!("{}{}", leaf.pem(), inter.pem());
        let chain = dir.join(format!("{stem}.pem"));
        let keyp = dir.join(format!("{stem}.key"));
        std::fs::write(&chain, text).with_context(|| format!("write {}", chain.display()))?;
        std::fs::write(&keyp, key).with_context(|| format!("write {}", keyp.display()))?;
        Ok(ChainFiles {
            chain,
            key: keyp,
            chain_bytes,
        })
    }

    /// (leaf, intermediate, leaf key PEM).
    fn issue(
        &self,
        names: &[&str],
        leaf_pad: usize,
        inter_pad: usize,
    ) -> anyhow::Result<(rcgen::Certificate, rcgen::Certificate, String)> {
        let ca = Issuer::from_params(&self.params, &self.key);
        let ikey = KeyPair::generate()?;
        let mut ip = ca_params("tlsgate lab intermediate")?;
        if inter_pad > 0 {
            ip.custom_extensions.push(padding(inter_pad));
        }
        let inter = ip.signed_by(&ikey, &ca)?;
        let issuer = Issuer::from_params(&ip, &ikey);
        let lkey = KeyPair::generate()?;
        let mut lp = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        lp.distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("lab"));
        if leaf_pad > 0 {
            lp.custom_extensions.push(padding(leaf_pad));
        }
        let leaf = lp.signed_by(&lkey, &issuer)?;
        Ok((leaf, inter, lkey.serialize_pem()))
    }
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
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("tgl-pki-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

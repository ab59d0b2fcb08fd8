//! `tlsgate check` for ML-DSA certificates: what a chain costs (key and signature sizes, for the
//! flight-size line of `lint::flight_report`) and whether a site can serve it (TLS 1.3 on, and a
//! classical certificate beside it for the clients that do not offer ML-DSA).

use crate::context::load_chain;
use crate::mldsa::Level;
use boring::x509::X509;
use tlsgate_config::{Config, Issue, TlsVersion};

/// The ML-DSA parameter set of a certificate's public key, if it is one.
fn level_of(cert: &X509) -> Option<Level> {
    cert.public_key().ok().and_then(|k| Level::of_id(k.id()))
}

/// The size of the signature a certificate carries (its issuer's), from the DER.
fn certificate_signature_bytes(cert: &X509) -> Option<usize> {
    let der = cert.to_der().ok()?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).ok()?;
    Some(parsed.signature_value.data.len())
}

/// For a chain whose leaf is ML-DSA: its parameter set, public key and handshake signature
/// sizes, and the sizes of the signatures in the certificates, as one clause for `check`'s
/// flight-size line. `None` for other chains.
pub fn describe(chain: &[X509]) -> Option<String> {
    let level = level_of(chain.first()?)?;
    let sigs: Vec<String> = chain
        .iter()
        .map(|c| certificate_signature_bytes(c).map_or("?".into(), |n| n.to_string()))
        .collect();
    Some(format!(
        "; {}: public key {} bytes, handshake signature {} bytes, certificate signatures {} bytes; \
         served only to TLS 1.3 clients offering {}",
        level.display(),
        level.public_key_bytes(),
        level.signature_bytes(),
        sigs.join(" + "),
        level.name()
    ))
}

/// Sites whose ML-DSA certificates cannot be served, or that have nothing else for the clients
/// that do not offer ML-DSA.
pub fn lint(config: &Config) -> Vec<Issue> {
    let mut out = Vec::new();
    for (i, site) in config.sites.iter().enumerate() {
        let mut mldsa = Vec::new();
        let mut classical = false;
        for (j, cert) in site.certificates.iter().enumerate() {
            let field = format!("site[{i}].certificate[{j}].chain");
            let Ok(chain) = load_chain(&field, &cert.chain) else {
                continue; // reported by the chain lint
            };
            match level_of(&chain[0]) {
                Some(level) => mldsa.push((field, level)),
                None => classical = true,
            }
        }
        for (field, level) in &mldsa {
            if config.tls.max_version != TlsVersion::V1_3 {
                out.push(Issue::error(
                    field,
                    format!(
                        "{} certificate, but tls.max_version is 1.2: ML-DSA signs TLS 1.3 handshakes only, so it is never served",
                        level.display()
                    ),
                ));
            } else if !classical {
                out.push(Issue::warning(
                    field,
                    format!(
                        "site \"{}\" has only ML-DSA certificates: clients that do not offer {} (most of them) fail the handshake; add an ECDSA certificate beside it",
                        site.name,
                        level.name()
                    ),
                ));
            }
        }
    }
    out
}

//! Certificate-chain lint for `tlsgate check`: one clear finding per problem, naming the config
//! field and the file.
//!
//! Checks: the key matches the leaf; each certificate is issued by the next; the chain ends at
//! something a client can anchor (an intermediate issued by a known root, or a root), so no
//! intermediate is missing; no root sent needlessly; validity (expired, not yet valid, expiring
//! within 30 days); weak keys and SHA-1 signatures; the leaf covers the site's names; client-CA
//! bundles (`[site.client_auth] ca`) hold CA certificates.

use crate::context::{load_chain, load_key};
use boring::pkey::Id;
use boring::x509::{X509Ref, X509};
use std::path::Path;
use tlsgate_config::{Config, Issue};

/// Days before expiry from which `check` warns.
pub const EXPIRY_WARNING_DAYS: i64 = 30;

/// Why the trust anchors could not be loaded (`tlsgate check --ca FILE`).
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// An extra anchor file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// An extra anchor file is not PEM certificates.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// BoringSSL's errors.
        #[source]
        source: boring::error::ErrorStack,
    },
}

impl tlsgate_error::Classify for AnchorError {
    fn side(&self) -> tlsgate_error::Side {
        tlsgate_error::Side::Config
    }

    fn kind(&self) -> &'static str {
        "trust_anchors"
    }
}

/// Trust anchors used to decide whether a chain is complete.
pub struct TrustAnchors(Vec<X509>);

impl TrustAnchors {
    /// The system bundle (Debian's ca-certificates) plus extra PEM files.
    pub fn system_plus(extra: &[&Path]) -> Result<Self, AnchorError> {
        let mut roots = Vec::new();
        for bundle in ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"] {
            if let Ok(pem) = std::fs::read(bundle) {
                roots.extend(X509::stack_from_pem(&pem).unwrap_or_default());
                break;
            }
        }
        for path in extra {
            let pem = std::fs::read(path).map_err(|source| AnchorError::Read {
                path: path.display().to_string(),
                source,
            })?;
            roots.extend(X509::stack_from_pem(&pem).map_err(|source| AnchorError::Parse {
                path: path.display().to_string(),
                source,
            })?);
        }
        Ok(Self(roots))
    }

    /// No anchors at all (tests).
    pub fn none() -> Self {
        Self(Vec::new())
    }

    fn issuer_of(&self, cert: &X509Ref) -> Option<&X509> {
        self.0.iter().find(|root| issued(root, cert))
    }
}

fn issued(issuer: &X509Ref, subject: &X509Ref) -> bool {
    issuer.issued(subject).is_ok() && issuer.public_key().is_ok_and(|k| subject.verify(&k).unwrap_or(false))
}

fn self_signed(cert: &X509Ref) -> bool {
    issued(cert, cert)
}

fn subject(cert: &X509Ref) -> String {
    cert.subject_name()
        .entries()
        .filter_map(|e| e.data().as_utf8().ok().map(|s| s.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn issuer_name(cert: &X509Ref) -> String {
    cert.issuer_name()
        .entries()
        .filter_map(|e| e.data().as_utf8().ok().map(|s| s.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Lints every certificate of every site.
pub fn lint_config(config: &Config, anchors: &TrustAnchors, now_unix: i64) -> Vec<Issue> {
    let mut issues = Vec::new();
    for (i, site) in config.sites.iter().enumerate() {
        for (j, cert) in site.certificates.iter().enumerate() {
            let at = format!("site[{i}].certificate[{j}]");
            issues.extend(lint_one(
                &at,
                &cert.chain,
                cert.key.as_deref(),
                &site.server_names,
                anchors,
                now_unix,
            ));
        }
    }
    issues.extend(crate::client_auth::lint(config));
    issues.extend(crate::mldsa_check::lint(config));
    issues.extend(delegation_lint(config));
    issues
}

/// Lints one chain file and its key file (none for a certificate served by key servers).
pub fn lint_one(
    at: &str,
    chain_path: &Path,
    key_path: Option<&Path>,
    names: &[String],
    anchors: &TrustAnchors,
    now: i64,
) -> Vec<Issue> {
    let mut out = Vec::new();
    // Set by every finding that says the chain is out of order.
    let mut out_of_order = false;
    let chain_field = format!("{at}.chain");
    let file = chain_path.display().to_string();
    let chain = match load_chain(&chain_field, chain_path) {
        Ok(c) => c,
        Err(e) => return vec![Issue::error(chain_field, e.to_string())],
    };
    match key_path.map(|p| (p, load_key(&format!("{at}.key"), p))) {
        None => {}
        Some((key_path, Ok(key))) => {
            let matches = |c: &X509| c.public_key().is_ok_and(|pk| pk.public_eq(&key));
            if !matches(&chain[0]) {
                let msg = match chain.iter().position(matches) {
                    Some(m) => {
                        out_of_order = true;
                        format!(
                            "{}: the private key belongs to certificate {m} of {file}, not to the first one: \
                             the chain is out of order (leaf first, then each issuer)",
                            key_path.display()
                        )
                    }
                    None => format!(
                        "{}: private key does not match the certificate (first in {file})",
                        key_path.display()
                    ),
                };
                out.push(Issue::error(format!("{at}.key"), msg));
            }
        }
        Some((_, Err(e))) => out.push(Issue::error(format!("{at}.key"), e.to_string())),
    }

    // Order and completeness: the leaf first, each certificate followed by its issuer.
    if let Some(m) = (1..chain.len()).find(|m| issued(&chain[0], &chain[*m])) {
        out_of_order = true;
        out.push(Issue::error(
            &chain_field,
            format!(
                "{file}: chain out of order: certificate 0 (\"{}\") issued certificate {m} (\"{}\"); \
                 the leaf must come first, each certificate followed by its issuer",
                subject(&chain[0]),
                subject(&chain[m])
            ),
        ));
    } else {
        for k in 0..chain.len().saturating_sub(1) {
            if !issued(&chain[k + 1], &chain[k]) {
                let elsewhere = chain.iter().enumerate().find(|(m, c)| *m != k && issued(c, &chain[k]));
                let msg = match elsewhere {
                    Some((m, _)) => {
                        out_of_order = true;
                        format!(
                            "{file}: chain out of order: certificate {k} (\"{}\") is issued by certificate {m}, which must come right after it",
                            subject(&chain[k])
                        )
                    }
                    None => format!(
                        "{file}: certificate {} (\"{}\") did not issue certificate {k} (\"{}\"); the chain is broken",
                        k + 1,
                        subject(&chain[k + 1]),
                        subject(&chain[k])
                    ),
                };
                out.push(Issue::error(&chain_field, msg));
            }
        }
    }
    // With the order wrong, "missing intermediate" and name coverage would only add noise.
    let last = chain.last().expect("non-empty");
    if out_of_order {
        // Already reported; completeness cannot be judged on a misordered chain.
    } else if chain.len() > 1 && self_signed(last) {
        out.push(Issue::warning(
            &chain_field,
            format!(
                "{file}: root certificate \"{}\" included needlessly (clients already hold their roots); removing it saves {} bytes per full handshake",
                subject(last),
                last.to_der().map_or(0, |d| d.len())
            ),
        ));
    } else if !self_signed(last) && anchors.issuer_of(last).is_none() {
        out.push(Issue::error(
            &chain_field,
            format!(
                "{file}: missing intermediate: the issuer \"{}\" of \"{}\" is neither in the chain nor a known root (for a private CA, pass --ca FILE)",
                issuer_name(last),
                subject(last)
            ),
        ));
    } else if chain.len() == 1 && self_signed(last) {
        out.push(Issue::warning(
            &chain_field,
            format!("{file}: the certificate is self-signed; clients will not trust it"),
        ));
    }

    // Per-certificate checks.
    for (k, cert) in chain.iter().enumerate() {
        lint_cert(&chain_field, &file, k, cert, now, &mut out);
    }
    if let Some(uncovered) = names.iter().find(|n| !out_of_order && !covers(&chain[0], n)) {
        out.push(Issue::warning(
            &chain_field,
            format!("{file}: the certificate does not cover the site's server name {uncovered:?}"),
        ));
    }
    out
}

fn lint_cert(field: &str, file: &str, k: usize, cert: &X509Ref, now: i64, out: &mut Vec<Issue>) {
    let Ok(der) = cert.to_der() else { return };
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(&der) else {
        out.push(Issue::error(field, format!("{file}: certificate {k} cannot be parsed")));
        return;
    };
    let name = subject(cert);
    let not_after = parsed.validity().not_after.timestamp();
    let not_before = parsed.validity().not_before.timestamp();
    if not_after < now {
        out.push(Issue::error(
            field,
            format!(
                "{file}: certificate {k} (\"{name}\") expired on {}",
                parsed.validity().not_after
            ),
        ));
    } else if not_after < now + EXPIRY_WARNING_DAYS * 86_400 {
        let days = (not_after - now) / 86_400;
        out.push(Issue::warning(
            field,
            format!(
                "{file}: certificate {k} (\"{name}\") expires in {days} days, on {}",
                parsed.validity().not_after
            ),
        ));
    }
    if not_before > now {
        out.push(Issue::error(
            field,
            format!(
                "{file}: certificate {k} (\"{name}\") is not valid before {}",
                parsed.validity().not_before
            ),
        ));
    }
    if let Ok(key) = cert.public_key() {
        let bits = key.bits();
        let weak = match key.id() {
            Id::RSA => bits < 2048,
            Id::EC => bits < 256,
            _ => false,
        };
        if weak {
            out.push(Issue::error(
                field,
                format!("{file}: certificate {k} (\"{name}\") has a weak {bits}-bit key"),
            ));
        }
    }
    let sig_oid = parsed.signature_algorithm.algorithm.to_id_string();
    let sha1 = ["1.2.840.113549.1.1.5", "1.2.840.10045.4.1"];
    if sha1.contains(&sig_oid.as_str()) && !self_signed(cert) {
        out.push(Issue::warning(
            field,
            format!("{file}: certificate {k} (\"{name}\") is signed with SHA-1, which clients reject"),
        ));
    }
}

fn covers(leaf: &X509Ref, name: &str) -> bool {
    let Some(sans) = leaf.subject_alt_names() else {
        return false;
    };
    let name = name.to_ascii_lowercase();
    sans.iter().any(|san| {
        san.dnsname().is_some_and(|d| {
            let d = d.to_ascii_lowercase();
            d == name
                || d.strip_prefix("*.")
                    .is_some_and(|p| name.split_once('.').is_some_and(|(_, rest)| rest == p))
        }) || san
            .ipaddress()
            .is_some_and(|ip| name.parse::<std::net::IpAddr>().is_ok_and(|n| ip_eq(ip, n)))
    })
}

fn ip_eq(raw: &[u8], ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => raw == v4.octets(),
        std::net::IpAddr::V6(v6) => raw == v6.octets(),
    }
}

/// Initial congestion window, in segments, that the first-flight check assumes (Linux's default
/// since 3.0, RFC 6928). Raise it per route with `ip route change ... initcwnd N` (docs/OPTIMISATIONS.md).
pub const INITCWND: usize = 10;
/// Maximum segment size the first-flight check assumes (Ethernet MTU 1500 − 40 bytes of IPv4 + TCP).
pub const MSS: usize = 1460;

/// Per-record overhead of an encrypted TLS 1.3 record: header 5, content type 1, AEAD tag 16.
const TLS13_RECORD_OVERHEAD: usize = 22;
const MAX_RECORD: usize = 16_384;

/// How many bytes a certificate chain costs on the wire (TLS 1.3, as BoringSSL sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlightSize {
    /// DER size of each certificate, leaf first.
    pub der: Vec<usize>,
    /// The Certificate message in its records (DER + 3-byte lengths, empty entry extensions,
    /// message header, record framing).
    pub chain_as_sent: usize,
    /// The CompressedCertificate message in its records, brotli and zlib (None when off).
    pub brotli: Option<usize>,
    /// See `brotli`.
    pub zlib: Option<usize>,
    /// Estimated server first flight: ServerHello (with the first configured group's key share),
    /// ChangeCipherSpec, EncryptedExtensions, Certificate, CertificateVerify, Finished.
    pub first_flight: usize,
    /// The same with the Certificate message brotli-compressed.
    pub first_flight_compressed: Option<usize>,
}

fn records(plaintext: usize) -> usize {
    plaintext + plaintext.div_ceil(MAX_RECORD).max(1) * TLS13_RECORD_OVERHEAD
}

fn key_share_len(group: &str) -> usize {
    match group {
        "X25519MLKEM768" | "X25519Kyber768Draft00" => 1088 + 32,
        "P-256" => 65,
        "P-384" => 97,
        "P-521" => 133,
        _ => 32,
    }
}

/// Computes the [`FlightSize`] of a chain served with `tls`'s settings.
pub fn flight_size(chain: &[X509], tls: &tlsgate_config::TlsConfig) -> FlightSize {
    let der: Vec<Vec<u8>> = chain.iter().map(|c| c.to_der().unwrap_or_default()).collect();
    // Certificate body: context (1) + list length (3) + per entry: length (3) + DER + extensions (2).
    let mut body = vec![0u8, 0, 0, 0];
    for d in &der {
        body.extend_from_slice(&(d.len() as u32).to_be_bytes()[1..]);
        body.extend_from_slice(d);
        body.extend_from_slice(&[0, 0]);
    }
    let list_len = (body.len() - 4) as u32;
    body[1..4].copy_from_slice(&list_len.to_be_bytes()[1..]);
    let certificate = 4 + body.len();
    // CompressedCertificate: header 4, algorithm 2, uncompressed length 3, compressed length 3.
    let compressed = |f: fn(&[u8]) -> std::io::Result<Vec<u8>>| {
        tls.cert_compression
            .then(|| f(&body).ok().map(|c| 4 + 2 + 3 + 3 + c.len()))
            .flatten()
    };
    let brotli_msg = compressed(crate::cert_compression::brotli_compress);
    let zlib_msg = compressed(crate::cert_compression::zlib_compress);
    let group = tls.groups.first().map_or("X25519", String::as_str);
    // ServerHello: header 4, version 2, random 32, session id 1 + 32 (echoed), suite 2,
    // compression 1, extensions 2 + supported_versions 6 + key_share 8 + share; record header 5.
    let server_hello = 5 + 4 + 2 + 32 + 33 + 2 + 1 + 2 + 6 + 8 + key_share_len(group);
    let ccs = 6;
    let alpn = tls.alpn.first().map_or(0, |p| 4 + 2 + 1 + p.len());
    let encrypted_extensions = 4 + 2 + alpn;
    let signature = chain.first().and_then(|c| c.public_key().ok()).map_or(72, |k| {
        match (k.id(), crate::mldsa::Level::of_id(k.id())) {
            (_, Some(level)) => level.signature_bytes(),
            (Id::RSA, _) => k.bits() as usize / 8,
            (Id::ED25519, _) => 64,
            // DER ECDSA: two integers of the curve size, up to 9 bytes of framing.
            _ => 2 * (k.bits() as usize).div_ceil(8) + 9,
        }
    });
    let certificate_verify = 4 + 2 + 2 + signature;
    let finished = 4 + 32;
    let flight =
        |cert_msg: usize| server_hello + ccs + records(encrypted_extensions + cert_msg + certificate_verify + finished);
    FlightSize {
        der: der.iter().map(Vec::len).collect(),
        chain_as_sent: records(certificate),
        brotli: brotli_msg.map(records),
        zlib: zlib_msg.map(records),
        first_flight: flight(certificate),
        first_flight_compressed: brotli_msg.map(flight),
    }
}

/// `tlsgate check`'s flight-size report: one info line per certificate, and a warning for each
/// chain whose first flight exceeds [`INITCWND`] × [`MSS`] (one more round trip for every full
/// handshake of a client that does not take it compressed).
pub fn flight_report(config: &Config) -> (Vec<String>, Vec<Issue>) {
    let budget = INITCWND * MSS;
    let (mut info, mut issues) = (Vec::new(), Vec::new());
    for (i, site) in config.sites.iter().enumerate() {
        for (j, cert) in site.certificates.iter().enumerate() {
            let field = format!("site[{i}].certificate[{j}].chain");
            let Ok(chain) = load_chain(&field, &cert.chain) else {
                continue; // reported by the lint
            };
            let f = flight_size(&chain, &config.tls);
            let ders = f.der.iter().map(usize::to_string).collect::<Vec<_>>().join(" + ");
            let compressed = match (f.brotli, f.zlib, f.first_flight_compressed) {
                (Some(b), Some(z), Some(ff)) => {
                    format!("; compressed (RFC 8879): brotli {b}, zlib {z} bytes, first flight ~{ff} with brotli")
                }
                _ => "; certificate compression off".into(),
            };
            let compressed = compressed + &crate::mldsa_check::describe(&chain).unwrap_or_default();
            info.push(format!(
                "{field}: chain {} bytes as sent ({} certificate(s), DER {ders}, TLS 1.3 framing included); \
                 first flight ~{} bytes of {budget} (initcwnd {INITCWND} x MSS {MSS}){compressed}",
                f.chain_as_sent,
                f.der.len(),
                f.first_flight,
            ));
            if f.first_flight > budget {
                let with = f.first_flight_compressed.map_or(String::new(), |c| {
                    if c <= budget {
                        format!(" (~{c} with brotli: clients offering certificate compression fit)")
                    } else {
                        format!(" (~{c} even with brotli)")
                    }
                });
                issues.push(Issue::warning(
                    field,
                    format!(
                        "{}: the server's first flight is ~{} bytes{with}, more than initcwnd {INITCWND} x MSS {MSS} = {budget}: \
                         full handshakes wait one more round trip for the ACKs; shorten the chain (no root, no cross-signs), \
                         prefer ECDSA, or raise initcwnd on the route (docs/OPTIMISATIONS.md)",
                        cert.chain.display(),
                        f.first_flight
                    ),
                ));
            }
        }
    }
    (info, issues)
}

/// What `tlsgate check` says about delegated credentials: with them on, a keyless certificate
/// without DelegationUsage gets none (a warning: it is still served, through the key servers).
fn delegation_lint(config: &Config) -> Vec<Issue> {
    let on = config.keyless.as_ref().is_some_and(|k| k.delegated_credentials.enabled);
    if !on {
        return Vec::new();
    }
    let mut issues = Vec::new();
    for (i, site) in config.sites.iter().enumerate() {
        for (j, cert) in site.certificates.iter().enumerate().filter(|(_, c)| c.key.is_none()) {
            let Ok(chain) = load_chain("chain", &cert.chain) else {
                continue; // the chain lint reports it
            };
            let leaf = chain.first().and_then(|c| c.to_der().ok()).unwrap_or_default();
            if !crate::delegation::has_delegation_usage(&leaf) {
                issues.push(Issue::warning(
                    format!("site[{i}].certificate[{j}].chain"),
                    format!(
                        "{}: keyless certificate without the DelegationUsage extension ({}): \
                         no delegated credential; every full handshake is signed by the key servers",
                        cert.chain.display(),
                        tlsgate_wire::delegated_credential::DELEGATION_USAGE_OID
                    ),
                ));
            }
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlsgate_error::Classify;

    #[test]
    fn unreadable_or_non_pem_anchor_files_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = TrustAnchors::system_plus(&[missing.as_path()]).err().unwrap();
        assert!(matches!(err, AnchorError::Read { .. }), "{err}");
        assert!(err.to_string().starts_with(&missing.display().to_string()), "{err}");
        assert_eq!((err.side(), err.kind()), (tlsgate_error::Side::Config, "trust_anchors"));
        let bad = dir.path().join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = TrustAnchors::system_plus(&[bad.as_path()]).err().unwrap();
        assert!(matches!(err, AnchorError::Parse { .. }), "{err}");
        assert!(std::error::Error::source(&err).is_some());
    }
}

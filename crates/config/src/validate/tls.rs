//! `[tls]`: versions, key-exchange groups, ALPN, TLS 1.2 suites (forward-secret AEAD only),
//! record size, resumption; and 0-RTT's needs (tickets, TLS 1.3).

use crate::issue::Issue;
use crate::model::{Config, TlsConfig, TlsVersion};

pub(super) const KNOWN_GROUPS: &[&str] = &[
    "X25519MLKEM768",
    "X25519Kyber768Draft00",
    "X25519",
    "P-256",
    "P-384",
    "P-521",
];
const KNOWN_ALPN: &[&str] = &["h2", "http/1.1"];

/// `[tls]` on its own.
pub(super) fn check(tls: &TlsConfig, issues: &mut Vec<Issue>) {
    if tls.min_version > tls.max_version {
        issues.push(Issue::error("tls.min_version", "is above tls.max_version"));
    }
    if tls.groups.is_empty() {
        issues.push(Issue::error("tls.groups", "at least one key-exchange group is needed"));
    }
    for (i, g) in tls.groups.iter().enumerate() {
        if !KNOWN_GROUPS.contains(&g.as_str()) {
            issues.push(Issue::error(
                format!("tls.groups[{i}]"),
                format!("unknown group {g:?}; known: {}", KNOWN_GROUPS.join(", ")),
            ));
        }
    }
    if tls.alpn.is_empty() {
        issues.push(Issue::error("tls.alpn", "offer at least one of h2, http/1.1"));
    }
    for (i, p) in tls.alpn.iter().enumerate() {
        if !KNOWN_ALPN.contains(&p.as_str()) {
            issues.push(Issue::error(
                format!("tls.alpn[{i}]"),
                format!("unsupported protocol {p:?}; use h2 or http/1.1"),
            ));
        }
    }
    for part in tls
        .ciphers_tls12
        .split([':', '|', '[', ']', ','])
        .filter(|p| !p.is_empty())
    {
        let forward_secret = part.starts_with("ECDHE-") || part.starts_with("ECDHE+") || part == "ECDHE";
        let aead = part.contains("GCM") || part.contains("CHACHA20") || part.starts_with('!') || part.starts_with('-');
        if part.starts_with('!') || part.starts_with('-') {
            continue;
        }
        if !forward_secret {
            issues.push(Issue::error(
                "tls.ciphers_tls12",
                format!("{part:?} is not a forward-secret ECDHE suite; RSA key exchange is not allowed"),
            ));
        } else if !aead {
            issues.push(Issue::error(
                "tls.ciphers_tls12",
                format!("{part:?} is not an AEAD (GCM or ChaCha20-Poly1305) suite; CBC suites are not allowed"),
            ));
        }
    }
    if !(512..=16_384).contains(&tls.max_record_size) {
        issues.push(Issue::error(
            "tls.max_record_size",
            "must be between 512 and 16384 bytes",
        ));
    }
    if tls.session_cache.enabled && tls.session_cache.size == 0 {
        issues.push(Issue::error(
            "tls.session_cache.size",
            "must be at least 1 when the cache is enabled",
        ));
    }
    if tls.session_cache.timeout.get().is_zero() {
        issues.push(Issue::error("tls.session_cache.timeout", "must be above zero"));
    }
    if tls.tickets.rotation.get().as_secs() < 1 {
        issues.push(Issue::error("tls.tickets.rotation", "must be at least 1s"));
    }
    if tls.tickets.lifetime.get().as_secs() < 1 {
        issues.push(Issue::error("tls.tickets.lifetime", "must be at least 1s"));
    }
    if tls.tickets.rotation.get() > std::time::Duration::from_secs(24 * 3600) {
        issues.push(Issue::warning(
            "tls.tickets.rotation",
            "keys older than a day weaken forward secrecy; rotate at least daily",
        ));
    }
}

/// `tls.tickets.early_data`: 0-RTT resumes from TLS 1.3 tickets.
pub(super) fn check_early_data(config: &Config, issues: &mut Vec<Issue>) {
    if config.tls.tickets.early_data && !config.tls.tickets.enabled {
        issues.push(Issue::error(
            "tls.tickets.early_data",
            "0-RTT resumes from TLS 1.3 tickets: set tls.tickets.enabled = true",
        ));
    }
    if config.tls.tickets.early_data && config.tls.max_version != TlsVersion::V1_3 {
        issues.push(Issue::warning(
            "tls.tickets.early_data",
            "0-RTT needs TLS 1.3 (tls.max_version)",
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::test_config::{errors, parse, MINIMAL};
    use crate::TlsVersion;

    #[test]
    fn rsa_key_exchange_is_refused() {
        let mut c = parse(MINIMAL);
        c.tls.ciphers_tls12 = "AES128-GCM-SHA256".into();
        assert!(errors(&c)
            .iter()
            .any(|e| e.contains("tls.ciphers_tls12") && e.contains("RSA key exchange")));
    }

    #[test]
    fn cbc_is_refused() {
        let mut c = parse(MINIMAL);
        c.tls.ciphers_tls12 = "ECDHE-RSA-AES128-SHA".into();
        assert!(errors(&c).iter().any(|e| e.contains("CBC")));
    }

    #[test]
    fn default_cipher_list_is_accepted() {
        let c = parse(MINIMAL);
        assert!(!errors(&c).iter().any(|e| e.contains("ciphers")));
    }

    #[test]
    fn bad_groups_and_versions() {
        let mut c = parse(MINIMAL);
        c.tls.groups = vec!["X448".into()];
        c.tls.min_version = TlsVersion::V1_3;
        c.tls.max_version = TlsVersion::V1_2;
        let errs = errors(&c);
        assert!(errs.iter().any(|e| e.contains("tls.groups[0]")));
        assert!(errs.iter().any(|e| e.contains("tls.min_version")));
    }

    #[test]
    fn early_data_needs_tickets() {
        let errs = errors(&parse(&format!(
            "[tls.tickets]\nenabled = false\nearly_data = true\n{MINIMAL}"
        )));
        assert!(errs.iter().any(|e| e.contains("tls.tickets.early_data")), "{errs:?}");
    }
}

//! `ssl_ciphers` (an OpenSSL cipher string) to the TLS 1.2 suites tlsgate offers: forward-secret
//! ECDHE with AES-GCM or ChaCha20-Poly1305. Explicit suite names are kept or dropped one by one
//! with the reason; aliases (`HIGH`, `EECDH+AESGCM`, `!aNULL`) are evaluated against those six
//! suites, in the order OpenSSL would add them.

/// The suites tlsgate accepts, in its preference order, with the OpenSSL aliases each matches.
const SUITES: [(&str, &[&str]); 6] = [
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        &["ECDSA", "aECDSA", "AESGCM", "AES128", "AES", "SHA256"],
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        &["ECDSA", "aECDSA", "AESGCM", "AES256", "AES", "SHA384"],
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        &["ECDSA", "aECDSA", "CHACHA20", "SHA256"],
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        &["aRSA", "AESGCM", "AES128", "AES", "SHA256"],
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        &["aRSA", "AESGCM", "AES256", "AES", "SHA384"],
    ),
    ("ECDHE-RSA-CHACHA20-POLY1305", &["aRSA", "CHACHA20", "SHA256"]),
];

/// Aliases every one of the six suites matches.
const COMMON: &[&str] = &[
    "ECDHE",
    "EECDH",
    "kECDHE",
    "kEECDH",
    "ECDH",
    "HIGH",
    "ALL",
    "DEFAULT",
    "COMPLEMENTOFDEFAULT",
    "TLSv1.2",
    "AEAD",
    "FIPS",
    "SUITEB128",
];

/// OpenSSL aliases that match none of the six suites (valid, just nothing tlsgate offers).
const OTHER_ALIASES: &[&str] = &[
    "DHE",
    "EDH",
    "kDHE",
    "kEDH",
    "aNULL",
    "eNULL",
    "NULL",
    "COMPLEMENTOFALL",
    "MD5",
    "RC4",
    "DES",
    "3DES",
    "SHA1",
    "SHA",
    "PSK",
    "kPSK",
    "SRP",
    "CAMELLIA",
    "CAMELLIA128",
    "CAMELLIA256",
    "SEED",
    "IDEA",
    "EXPORT",
    "EXP",
    "LOW",
    "MEDIUM",
    "aDSS",
    "DSS",
    "kRSA",
    "RSA",
    "ADH",
    "AECDH",
    "AESCCM",
    "AESCCM8",
    "ARIA",
    "ARIA128",
    "ARIA256",
    "CBC",
    "SSLv3",
    "TLSv1",
    "TLSv1.0",
    "aECDH",
    "kECDH",
    "GOST",
    "kGOST",
    "aGOST",
    "CHACHA",
    "aPSK",
    "kDHEPSK",
    "kECDHEPSK",
    "kRSAPSK",
    "ECDHEPSK",
    "DHEPSK",
    "RSAPSK",
    "aCERT",
];

/// What became of an `ssl_ciphers` list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ciphers {
    /// Suites kept, in order.
    pub kept: Vec<&'static str>,
    /// Items left out, each with why.
    pub dropped: Vec<(String, &'static str)>,
}

/// Whether `alias` (a suite name or an OpenSSL alias) selects suite number `suite`.
fn suite_matches(suite: usize, alias: &str) -> bool {
    let (name, aliases) = SUITES[suite];
    alias == name || COMMON.contains(&alias) || aliases.contains(&alias)
}

/// Whether `alias` is a name or alias OpenSSL knows (whether or not it selects anything here).
fn known(alias: &str) -> bool {
    SUITES.iter().any(|(n, a)| *n == alias || a.contains(&alias))
        || COMMON.contains(&alias)
        || OTHER_ALIASES.contains(&alias)
        || explicit_reason(alias).is_some()
}

/// Why an explicit suite name (not one of the six) is not offered, if `name` looks like one.
fn explicit_reason(name: &str) -> Option<&'static str> {
    if SUITES.iter().any(|(n, _)| *n == name) {
        return None;
    }
    if name.starts_with("TLS_") {
        return Some(
            "a TLS 1.3 suite: BoringSSL's TLS 1.3 suites are fixed (AES-GCM and ChaCha20-Poly1305, always on)",
        );
    }
    let suiteish = name.contains('-')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-');
    if !suiteish {
        return None;
    }
    Some(if name.starts_with("DHE-") || name.starts_with("EDH-") {
        "finite-field DHE: BoringSSL has no DHE suites; every client that has them also has ECDHE"
    } else if name.starts_with("ECDHE-") {
        "CBC mode, not AEAD: tlsgate offers AES-GCM and ChaCha20-Poly1305 only"
    } else if name.contains("PSK") || name.contains("SRP") || name.starts_with("ADH") || name.starts_with("AECDH") {
        "not certificate-authenticated forward-secret ECDHE"
    } else {
        "RSA key exchange: no forward secrecy"
    })
}

/// Evaluates an OpenSSL cipher string.
pub fn evaluate(spec: &str) -> Ciphers {
    let mut out = Ciphers::default();
    let mut list: Vec<usize> = Vec::new();
    let mut killed = [false; 6];
    for token in spec.split([':', ',', ' ']).map(str::trim).filter(|t| !t.is_empty()) {
        if token.starts_with('@') {
            continue;
        }
        let (op, body) = match token.as_bytes()[0] {
            b'!' | b'-' | b'+' => (token.as_bytes()[0], &token[1..]),
            _ => (0, token),
        };
        let parts: Vec<&str> = body.split('+').filter(|p| !p.is_empty()).collect();
        let unknown = parts.iter().any(|p| !known(p));
        let matching: Vec<usize> = (0..6).filter(|&s| parts.iter().all(|p| suite_matches(s, p))).collect();
        if unknown || parts.is_empty() {
            if op == 0 {
                out.dropped
                    .push((token.to_string(), "not a cipher name or alias tlsgate knows"));
            }
            continue;
        }
        match op {
            b'!' => {
                for s in matching {
                    killed[s] = true;
                    list.retain(|x| *x != s);
                }
            }
            b'-' => list.retain(|x| !matching.contains(x)),
            b'+' => {
                let moved: Vec<usize> = list.iter().copied().filter(|x| matching.contains(x)).collect();
                list.retain(|x| !matching.contains(x));
                list.extend(moved);
            }
            _ => {
                if matching.is_empty() {
                    let why = explicit_reason(token).unwrap_or(
                        "selects no suite tlsgate offers (forward-secret ECDHE with AES-GCM or ChaCha20-Poly1305)",
                    );
                    out.dropped.push((token.to_string(), why));
                }
                for s in matching {
                    if !killed[s] && !list.contains(&s) {
                        list.push(s);
                    }
                }
            }
        }
    }
    out.kept = list.into_iter().map(|s| SUITES[s].0).collect();
    out
}

/// Whether a suite uses an ECDSA certificate.
pub fn is_ecdsa(suite: &str) -> bool {
    suite.starts_with("ECDHE-ECDSA-")
}

/// Whether `kept` is all six suites (tlsgate's default set).
pub fn is_all(kept: &[&str]) -> bool {
    SUITES.iter().all(|(n, _)| kept.contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOZILLA_INTERMEDIATE: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";

    #[test]
    fn mozilla_intermediate_keeps_the_ecdhe_suites_and_drops_dhe() {
        let c = evaluate(MOZILLA_INTERMEDIATE);
        assert_eq!(c.kept.len(), 6);
        assert_eq!(c.kept[1], "ECDHE-RSA-AES128-GCM-SHA256");
        assert!(is_all(&c.kept));
        let dropped: Vec<&str> = c.dropped.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            dropped,
            [
                "DHE-RSA-AES128-GCM-SHA256",
                "DHE-RSA-AES256-GCM-SHA384",
                "DHE-RSA-CHACHA20-POLY1305"
            ]
        );
        assert!(c.dropped[0].1.contains("DHE"));
    }

    #[test]
    fn aliases_are_evaluated() {
        let c = evaluate("HIGH:!aNULL:!MD5");
        assert!(is_all(&c.kept));
        assert!(c.dropped.is_empty());
        let c = evaluate("EECDH+AESGCM:EDH+AESGCM");
        assert_eq!(c.kept.len(), 4);
        assert_eq!(c.dropped.len(), 1);
        let c = evaluate("EECDH+ECDSA+AESGCM:EECDH+aRSA+AESGCM:!AES256");
        assert_eq!(c.kept, ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"]);
        let c = evaluate("ALL:-CHACHA20:CHACHA20");
        assert_eq!(c.kept.last(), Some(&"ECDHE-RSA-CHACHA20-POLY1305"));
    }

    #[test]
    fn legacy_suites_say_why() {
        let c = evaluate("AES128-SHA:ECDHE-RSA-AES128-SHA:TLS_AES_128_GCM_SHA256:bogus");
        assert!(c.kept.is_empty());
        let whys: Vec<&str> = c.dropped.iter().map(|(_, w)| *w).collect();
        assert!(whys[0].contains("RSA key exchange"));
        assert!(whys[1].contains("CBC"));
        assert!(whys[2].contains("TLS 1.3"));
        assert!(whys[3].contains("knows"));
    }

    #[test]
    fn odd_input_does_not_panic() {
        for s in ["", "!", "+", "-", "@", "::", "+++", "!+!"] {
            let _ = evaluate(s);
        }
    }
}

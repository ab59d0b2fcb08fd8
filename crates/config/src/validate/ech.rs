//! `[ech]`: Encrypted ClientHello needs the cluster secret (its keys are derived from it), TLS 1.3,
//! a public name served by one of the sites, a usable rotation and hook.

use crate::issue::Issue;
use crate::model::{Config, TlsVersion};
use std::time::Duration;

/// Below this rotation a warning: resolvers cache the published config for its TTL, which must
/// stay below one rotation (docs/ECH.md).
const SHORT_ROTATION: Duration = Duration::from_secs(300);

/// The `[ech]` section, when there is one and it is enabled.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let Some(ech) = config.ech.as_ref().filter(|e| e.enabled) else {
        return;
    };
    if config.cluster.as_ref().is_none_or(|c| c.secret_files.is_empty()) {
        issues.push(Issue::error(
            "ech.enabled",
            "ECH keys are derived from the cluster secret: set [cluster] secret_files (one node alone too)",
        ));
    }
    if config.tls.max_version != TlsVersion::V1_3 {
        issues.push(Issue::error(
            "ech.enabled",
            "ECH needs TLS 1.3 (tls.max_version = \"1.3\")",
        ));
    }
    let name = ech.public_name.trim_end_matches('.').to_ascii_lowercase();
    if !is_dns_name(&name) {
        issues.push(Issue::error(
            "ech.public_name",
            format!(
                "{:?}: expected a DNS name (letters, digits, hyphens, dots; no wildcard, no IP address)",
                ech.public_name
            ),
        ));
    } else if !served(config, &name) {
        issues.push(Issue::error(
            "ech.public_name",
            format!(
                "{name}: no site serves it; add it to a site's server_names (its certificate authenticates retry configs)"
            ),
        ));
    }
    let rotation = ech.rotation.get();
    if rotation < Duration::from_secs(1) {
        issues.push(Issue::error("ech.rotation", "must be at least 1s"));
    } else if rotation < SHORT_ROTATION {
        issues.push(Issue::warning(
            "ech.rotation",
            "below 5m: the published DNS record's TTL must stay below one rotation",
        ));
    }
    if ech.max_name_length == 0 {
        issues.push(Issue::error("ech.max_name_length", "must be between 1 and 255"));
    }
    if let Some(program) = ech.hook.first() {
        if program.trim().is_empty() {
            issues.push(Issue::error("ech.hook", "the program (first element) is empty"));
        }
    }
}

/// A host name of labels of letters, digits and hyphens (not an IP address, not a wildcard).
fn is_dns_name(name: &str) -> bool {
    let labels_ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    labels_ok && name.parse::<std::net::IpAddr>().is_err() && !name.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// Whether a site's `server_names` cover `name` (exactly, or by `*.parent`).
fn served(config: &Config, name: &str) -> bool {
    let parent = name.split_once('.').map(|(_, p)| p);
    config.sites.iter().flat_map(|s| &s.server_names).any(|n| {
        let n = n.to_ascii_lowercase();
        n == name || n.strip_prefix("*.").is_some_and(|p| Some(p) == parent)
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_config::{errors, parse, MINIMAL};
    use super::super::validate;
    use crate::issue::Severity;

    fn with(extra: &str) -> crate::model::Config {
        parse(&format!("{extra}\n{MINIMAL}"))
    }

    fn ech_errors(extra: &str) -> Vec<String> {
        errors(&with(extra))
            .into_iter()
            .filter(|e| e.contains("ech."))
            .collect()
    }

    const CLUSTER: &str = "[cluster]\nsecret_files = [\"/etc/hostname\"]\n";

    #[test]
    fn a_served_public_name_with_a_cluster_secret_is_fine() {
        let text = format!("{CLUSTER}[ech]\npublic_name = \"localhost\"\n");
        assert_eq!(ech_errors(&text), Vec::<String>::new());
        let config = with(&text);
        let ech = config.ech.as_ref().unwrap();
        assert!(ech.enabled);
        assert_eq!(ech.rotation.get().as_secs(), 3600);
        assert_eq!(ech.max_name_length, 64);
        assert!(ech.hook.is_empty());
    }

    #[test]
    fn needs_the_cluster_secret_and_tls13() {
        let errs = ech_errors("[ech]\npublic_name = \"localhost\"\n");
        assert!(
            errs.iter()
                .any(|e| e.contains("ech.enabled") && e.contains("secret_files")),
            "{errs:?}"
        );
        let errs = ech_errors(&format!(
            "[tls]\nmax_version = \"1.2\"\n{CLUSTER}[ech]\npublic_name = \"localhost\"\n"
        ));
        assert!(errs.iter().any(|e| e.contains("TLS 1.3")), "{errs:?}");
        // Disabled: nothing is checked.
        assert!(ech_errors("[ech]\nenabled = false\npublic_name = \"\"\n").is_empty());
    }

    #[test]
    fn public_name_must_be_a_served_dns_name() {
        for bad in ["", "*.example.com", "127.0.0.1", "a..b", "-a.example", "a b"] {
            let errs = ech_errors(&format!("{CLUSTER}[ech]\npublic_name = {bad:?}\n"));
            assert!(errs.iter().any(|e| e.contains("ech.public_name")), "{bad}: {errs:?}");
        }
        let errs = ech_errors(&format!("{CLUSTER}[ech]\npublic_name = \"other.example\"\n"));
        assert!(errs.iter().any(|e| e.contains("no site serves it")), "{errs:?}");
    }

    #[test]
    fn rotation_length_and_hook() {
        let errs = ech_errors(&format!(
            "{CLUSTER}[ech]\npublic_name = \"localhost\"\nrotation = \"500ms\"\nmax_name_length = 0\nhook = [\"\"]\n"
        ));
        for field in ["ech.rotation", "ech.max_name_length", "ech.hook"] {
            assert!(errs.iter().any(|e| e.contains(field)), "{field}: {errs:?}");
        }
        let short = validate(&with(&format!(
            "{CLUSTER}[ech]\npublic_name = \"localhost\"\nrotation = \"30s\"\n"
        )));
        assert!(short
            .iter()
            .any(|i| i.severity == Severity::Warning && i.field == "ech.rotation"));
    }
}

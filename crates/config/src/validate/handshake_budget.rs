//! `[server.handshake_budget]`: rates that refill, buckets that hold at least one handshake,
//! prefixes that still tell clients apart, and a bounded table.

use crate::issue::Issue;
use crate::model::{Config, HandshakeBudgetConfig};

const FIELD: &str = "server.handshake_budget";

/// Largest rate accepted (per second): above it a budget limits nothing a gateway can sign.
const MAX_RATE: f64 = 1_000_000.0;
/// Largest bucket accepted.
const MAX_BURST: u32 = 1_000_000;
/// Table bounds: small enough tables evict all the time, large ones are memory for nothing.
const MIN_TRACKED: usize = 1024;
const MAX_TRACKED: usize = 16 * 1024 * 1024;

/// `[server.handshake_budget]`, when present.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let Some(b) = &config.server.handshake_budget else {
        return;
    };
    check_budget(b, issues);
}

fn check_budget(b: &HandshakeBudgetConfig, issues: &mut Vec<Issue>) {
    let field = |name: &str| format!("{FIELD}.{name}");
    if !(b.full_per_second > 0.0 && b.full_per_second <= MAX_RATE) {
        issues.push(Issue::error(
            field("full_per_second"),
            format!("must be above 0 and at most {MAX_RATE} (remove the section for no budget)"),
        ));
    }
    if !(b.resumed_per_second >= 0.0 && b.resumed_per_second <= MAX_RATE) {
        issues.push(Issue::error(
            field("resumed_per_second"),
            format!("must be between 0 (no limit) and {MAX_RATE}"),
        ));
    }
    if !(1..=MAX_BURST).contains(&b.full_burst) {
        issues.push(Issue::error(
            field("full_burst"),
            format!("must be between 1 and {MAX_BURST}"),
        ));
    }
    if b.resumed_per_second > 0.0 && !(1..=MAX_BURST).contains(&b.resumed_burst) {
        issues.push(Issue::error(
            field("resumed_burst"),
            format!("must be between 1 and {MAX_BURST} when resumed_per_second is set"),
        ));
    }
    check_prefix(&field("ipv4_prefix"), b.ipv4_prefix, 32, 16, issues);
    check_prefix(&field("ipv6_prefix"), b.ipv6_prefix, 128, 32, issues);
    if !(MIN_TRACKED..=MAX_TRACKED).contains(&b.tracked_sources) {
        issues.push(Issue::error(
            field("tracked_sources"),
            format!("must be between {MIN_TRACKED} and {MAX_TRACKED}"),
        ));
    }
    if b.resumed_per_second > 0.0 && b.resumed_per_second < b.full_per_second {
        issues.push(Issue::warning(
            field("resumed_per_second"),
            "is below full_per_second: resumed handshakes cost less than full ones, so their budget is usually higher",
        ));
    }
}

/// A prefix length: 1..=`max` bits; below `wide` a whole network shares one budget (a warning).
fn check_prefix(field: &str, bits: u8, max: u8, wide: u8, issues: &mut Vec<Issue>) {
    if bits == 0 || bits > max {
        issues.push(Issue::error(field, format!("must be between 1 and {max}")));
    } else if bits < wide {
        issues.push(Issue::warning(
            field,
            format!("/{bits} makes whole networks one source: every client in it shares one budget"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_config::{parse, MINIMAL};

    fn issues(section: &str) -> Vec<String> {
        let config = parse(&format!("[server.handshake_budget]\n{section}\n{MINIMAL}"));
        let mut issues = Vec::new();
        check(&config, &mut issues);
        issues.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn absent_is_no_budget_and_the_defaults_are_valid() {
        let config = parse(MINIMAL);
        assert!(config.server.handshake_budget.is_none());
        assert_eq!(issues(""), Vec::<String>::new());
        let config = parse(&format!("[server.handshake_budget]\n{MINIMAL}"));
        assert_eq!(config.server.handshake_budget, Some(HandshakeBudgetConfig::default()));
        let all = crate::validate::validate(&config);
        assert!(!all.iter().any(|i| i.field.starts_with(FIELD)), "{all:?}");
    }

    #[test]
    fn every_field_parses() {
        let config = parse(&format!(
            "[server.handshake_budget]\nfull_per_second = 2.5\nfull_burst = 5\nresumed_per_second = 50\n\
             resumed_burst = 100\nipv4_prefix = 24\nipv6_prefix = 48\nover_budget = \"close\"\n\
             tracked_sources = 4096\n{MINIMAL}"
        ));
        let b = config.server.handshake_budget.unwrap();
        assert_eq!(b.full_per_second, 2.5);
        assert_eq!((b.full_burst, b.resumed_burst), (5, 100));
        assert_eq!(b.resumed_per_second, 50.0);
        assert_eq!((b.ipv4_prefix, b.ipv6_prefix), (24, 48));
        assert_eq!(b.over_budget, crate::model::OverBudget::Close);
        assert_eq!(b.tracked_sources, 4096);
        assert!(crate::parse(&format!("[server.handshake_budget]\nover_budget = \"drop\"\n{MINIMAL}")).is_err());
        assert!(crate::parse(&format!("[server.handshake_budget]\nfull_rate = 1\n{MINIMAL}")).is_err());
    }

    #[test]
    fn rates_and_bursts_must_allow_something() {
        for (line, field) in [
            ("full_per_second = 0", "full_per_second"),
            ("full_per_second = -1", "full_per_second"),
            ("full_per_second = nan", "full_per_second"),
            ("full_per_second = inf", "full_per_second"),
            ("resumed_per_second = -0.5", "resumed_per_second"),
            ("full_burst = 0", "full_burst"),
            ("full_burst = 2000000", "full_burst"),
            ("resumed_per_second = 100\nresumed_burst = 0", "resumed_burst"),
        ] {
            let found = issues(line);
            assert!(
                found
                    .iter()
                    .any(|i| i.starts_with("error") && i.contains(&format!("{FIELD}.{field}"))),
                "{line}: {found:?}"
            );
        }
        // Without a resumed rate, its burst is not used.
        assert!(issues("resumed_burst = 0").is_empty());
    }

    #[test]
    fn prefixes_and_table_size_are_bounded() {
        for (line, field) in [
            ("ipv4_prefix = 0", "ipv4_prefix"),
            ("ipv4_prefix = 33", "ipv4_prefix"),
            ("ipv6_prefix = 0", "ipv6_prefix"),
            ("ipv6_prefix = 129", "ipv6_prefix"),
            ("tracked_sources = 10", "tracked_sources"),
            ("tracked_sources = 100000000", "tracked_sources"),
        ] {
            let found = issues(line);
            assert!(
                found
                    .iter()
                    .any(|i| i.starts_with("error") && i.contains(&format!("{FIELD}.{field}"))),
                "{line}: {found:?}"
            );
        }
        let wide = issues("ipv4_prefix = 8\nipv6_prefix = 16");
        assert_eq!(wide.len(), 2, "{wide:?}");
        assert!(wide.iter().all(|i| i.starts_with("warning")), "{wide:?}");
        assert!(issues("ipv4_prefix = 24\nipv6_prefix = 48").is_empty());
    }

    #[test]
    fn a_resumed_budget_below_the_full_one_is_called_out() {
        let found = issues("full_per_second = 20\nresumed_per_second = 5\nresumed_burst = 10");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("warning"), "{found:?}");
        assert!(issues("full_per_second = 20\nresumed_per_second = 200").is_empty());
    }
}

//! `[[access_rule]]` compiled for one configuration generation: nginx's `allow`/`deny` by source
//! network and by JA4 fingerprint, tried in order, the first rule that matches deciding, a
//! connection no rule matches allowed.
//!
//! Two stages, one order. At accept only the source is known: the rules are tried until one
//! decides (a rule without `ja4` whose networks match) or one needs the fingerprint (a rule with
//! `ja4` whose networks match, or that has none), which defers the decision to the ClientHello.
//! There, with the fingerprint known, the whole list is tried again from the top; the first
//! stage's rules give the same answers, so the order is exactly the configured one. A source
//! refused at accept costs no TLS work at all; a fingerprint refused at the ClientHello costs no
//! signature (`fingerprint` fails certificate selection and BoringSSL sends `handshake_failure`).
//!
//! Refusals are counted in `tlsgate_access_refused_total{rule, stage}`; each rule's counters are
//! looked up once per generation, so a refusal is one atomic add.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tlsgate_config::{AccessAction, AccessRuleConfig, Cidr};
use tlsgate_error::log_limit::LogLimit;
use tlsgate_wire::ja4::Ja4;

/// Labels of `tlsgate_access_refused_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// The rule's `name`, else `access_rule[N]`.
    pub rule: String,
    /// `accept` (by source, before TLS) or `hello` (after the ClientHello).
    pub stage: &'static str,
}

/// The process's access-rule and fingerprint metrics (they outlive configuration generations).
#[derive(Debug, Default)]
pub struct AccessMetrics {
    /// Connections refused, by rule and stage.
    pub refused: Family<RefusedLabels, Counter>,
    /// ClientHellos whose JA4 could not be computed (BoringSSL accepted bytes the JA4 reader
    /// refused); the connection goes on without a fingerprint.
    pub ja4_unreadable: Counter,
}

/// The process-wide metrics.
pub fn metrics() -> &'static AccessMetrics {
    static METRICS: LazyLock<AccessMetrics> = LazyLock::new(AccessMetrics::default);
    &METRICS
}

/// Registers `tlsgate_access_refused_total` and `tlsgate_ja4_unreadable_total` in `registry`.
pub fn register(registry: &mut Registry) {
    let m = metrics();
    registry.register(
        "access_refused",
        "Connections refused by [[access_rule]], by rule and stage (accept: by source, before TLS; \
         hello: by JA4 fingerprint, after the ClientHello)",
        m.refused.clone(),
    );
    registry.register(
        "ja4_unreadable",
        "ClientHellos whose JA4 fingerprint could not be computed",
        m.ja4_unreadable.clone(),
    );
}

/// One log line per second at most for refusals (a flood must not flood the log).
static REFUSAL_LOG: LogLimit = LogLimit::new(Duration::from_secs(1));

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    allow: bool,
    cidrs: Vec<Cidr>,
    ja4: Vec<Ja4>,
    label: Arc<str>,
    refused_at_accept: Counter,
    refused_at_hello: Counter,
}

impl Rule {
    fn source_matches(&self, ip: IpAddr) -> bool {
        self.cidrs.is_empty() || self.cidrs.iter().any(|c| c.contains(ip))
    }

    fn ja4_matches(&self, ja4: Option<&Ja4>) -> bool {
        self.ja4.is_empty() || ja4.is_some_and(|j| self.ja4.contains(j))
    }
}

/// What the first stage decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtAccept {
    /// Serve it (no rule, or an `allow` rule, matched first).
    Allow,
    /// Close it: this rule (its label) matched first.
    Deny(Arc<str>),
    /// A rule that needs the fingerprint comes first: decided after the ClientHello.
    AfterHello,
}

/// The rules of one generation.
#[derive(Debug, Default)]
pub struct AccessRules {
    rules: Vec<Rule>,
    uses_ja4: bool,
}

impl AccessRules {
    /// Compiles the rules (validated beforehand: fingerprints that do not parse are skipped).
    pub fn from_config(rules: &[AccessRuleConfig]) -> Self {
        let m = metrics();
        let rules: Vec<Rule> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let label = r.label(i);
                let counter = |stage| {
                    m.refused
                        .get_or_create(&RefusedLabels {
                            rule: label.clone(),
                            stage,
                        })
                        .clone()
                };
                Rule {
                    allow: r.action == AccessAction::Allow,
                    cidrs: r.cidrs.clone(),
                    ja4: r.ja4.iter().filter_map(|t| Ja4::parse(t)).collect(),
                    refused_at_accept: counter("accept"),
                    refused_at_hello: counter("hello"),
                    label: label.into(),
                }
            })
            .collect();
        let uses_ja4 = rules.iter().any(|r| !r.ja4.is_empty());
        Self { rules, uses_ja4 }
    }

    /// No rules: every connection is allowed without a look.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Some rule matches by fingerprint (the ClientHello stage is needed).
    pub fn uses_ja4(&self) -> bool {
        self.uses_ja4
    }

    /// The first stage, for a connection from `ip`.
    pub fn at_accept(&self, ip: IpAddr) -> AtAccept {
        match self.rules.iter().find(|r| r.source_matches(ip)) {
            Some(rule) if !rule.ja4.is_empty() => AtAccept::AfterHello,
            Some(rule) if !rule.allow => AtAccept::Deny(rule.label.clone()),
            _ => AtAccept::Allow,
        }
    }

    /// Whether a connection from `ip` is refused at accept (counted and logged when it is).
    pub fn refuses_at_accept(&self, ip: IpAddr) -> bool {
        if self.rules.is_empty() {
            return false;
        }
        let Some(rule) = self.first_match(ip, None, false) else {
            return false;
        };
        if rule.allow {
            return false;
        }
        rule.refused_at_accept.inc();
        if let Some(skipped) = REFUSAL_LOG.allow() {
            tracing::info!(%ip, rule = %rule.label, skipped, "connection refused by access rule at accept");
        }
        true
    }

    /// The rule that decides for `ip` and fingerprint `ja4`; with `hello` false, the first stage:
    /// None also when a fingerprint rule comes first.
    fn first_match(&self, ip: IpAddr, ja4: Option<&Ja4>, hello: bool) -> Option<&Rule> {
        for rule in self.rules.iter().filter(|r| r.source_matches(ip)) {
            if !hello && !rule.ja4.is_empty() {
                return None;
            }
            if rule.ja4_matches(ja4) {
                return Some(rule);
            }
        }
        None
    }

    /// The second stage: the label of the `deny` rule that matches first, if one does.
    pub fn denies_at_hello(&self, ip: IpAddr, ja4: Option<&Ja4>) -> Option<Arc<str>> {
        self.first_match(ip, ja4, true)
            .filter(|r| !r.allow)
            .map(|r| r.label.clone())
    }

    /// The second stage, counted and logged: whether the connection is refused.
    pub(crate) fn refuses_at_hello(&self, ip: IpAddr, ja4: Option<&Ja4>) -> bool {
        let Some(rule) = self.first_match(ip, ja4, true).filter(|r| !r.allow) else {
            return false;
        };
        rule.refused_at_hello.inc();
        if let Some(skipped) = REFUSAL_LOG.allow() {
            let ja4 = ja4.map(Ja4::as_str).unwrap_or("-");
            tracing::info!(%ip, ja4, rule = %rule.label, skipped, "TLS handshake refused by access rule after the ClientHello");
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "t13d1516h2_8daaf6152771_02713d6af862";
    const B: &str = "t12d190800_d83cc789557e_7af1ed941c26";

    fn rules(text: &str) -> AccessRules {
        let config = tlsgate_config::parse(text).unwrap();
        AccessRules::from_config(&config.access_rules)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ja4(s: &str) -> Ja4 {
        Ja4::parse(s).unwrap()
    }

    #[test]
    fn no_rules_allow_everyone() {
        let r = rules("");
        assert!(r.is_empty() && !r.uses_ja4());
        assert_eq!(r.at_accept(ip("10.0.0.1")), AtAccept::Allow);
        assert!(!r.refuses_at_accept(ip("10.0.0.1")));
        assert_eq!(r.denies_at_hello(ip("10.0.0.1"), None), None);
    }

    #[test]
    fn first_match_decides_like_nginx() {
        // allow 127.0.0.1; deny 127.0.0.0/8; (everything else allowed)
        let r = rules(
            "[[access_rule]]\naction = \"allow\"\ncidrs = [\"127.0.0.1\"]\n\
             [[access_rule]]\naction = \"deny\"\ncidrs = [\"127.0.0.0/8\", \"::1\"]\nname = \"loopback\"\n",
        );
        assert_eq!(r.at_accept(ip("127.0.0.1")), AtAccept::Allow);
        assert_eq!(r.at_accept(ip("127.0.0.2")), AtAccept::Deny("loopback".into()));
        assert_eq!(r.at_accept(ip("::ffff:127.0.0.3")), AtAccept::Deny("loopback".into()));
        assert_eq!(r.at_accept(ip("::1")), AtAccept::Deny("loopback".into()));
        assert_eq!(r.at_accept(ip("10.0.0.1")), AtAccept::Allow);
        let before = metrics()
            .refused
            .get_or_create(&RefusedLabels {
                rule: "loopback".into(),
                stage: "accept",
            })
            .get();
        assert!(r.refuses_at_accept(ip("127.0.0.2")));
        assert!(!r.refuses_at_accept(ip("127.0.0.1")));
        let after = metrics()
            .refused
            .get_or_create(&RefusedLabels {
                rule: "loopback".into(),
                stage: "accept",
            })
            .get();
        assert_eq!(after, before + 1);
    }

    #[test]
    fn fingerprint_rules_defer_in_order() {
        // deny fingerprint A from 10/8; allow 10.0.0.1; deny fingerprint B anywhere; deny all.
        let r = rules(&format!(
            "[[access_rule]]\naction = \"deny\"\ncidrs = [\"10.0.0.0/8\"]\nja4 = [\"{A}\"]\n\
             [[access_rule]]\naction = \"allow\"\ncidrs = [\"10.0.0.1\"]\n\
             [[access_rule]]\naction = \"deny\"\nja4 = [\"{B}\"]\n\
             [[access_rule]]\naction = \"deny\"\nname = \"all\"\n"
        ));
        assert!(r.uses_ja4());
        // 10.0.0.1 reaches the A rule first: decided after the hello.
        assert_eq!(r.at_accept(ip("10.0.0.1")), AtAccept::AfterHello);
        assert_eq!(
            r.denies_at_hello(ip("10.0.0.1"), Some(&ja4(A))),
            Some("access_rule[0]".into())
        );
        assert_eq!(
            r.denies_at_hello(ip("10.0.0.1"), Some(&ja4(B))),
            None,
            "allowed by rule 1"
        );
        assert_eq!(r.denies_at_hello(ip("10.0.0.1"), None), None, "no fingerprint: rule 1");
        // 192.0.2.1 skips rules 0 and 1; rule 2 needs the fingerprint.
        assert_eq!(r.at_accept(ip("192.0.2.1")), AtAccept::AfterHello);
        assert_eq!(
            r.denies_at_hello(ip("192.0.2.1"), Some(&ja4(B))),
            Some("access_rule[2]".into())
        );
        assert_eq!(r.denies_at_hello(ip("192.0.2.1"), Some(&ja4(A))), Some("all".into()));
        assert!(!r.refuses_at_accept(ip("192.0.2.1")), "not decided at accept");
    }

    #[test]
    fn source_rules_before_fingerprint_rules_decide_at_accept() {
        let r = rules(&format!(
            "[[access_rule]]\naction = \"deny\"\ncidrs = [\"127.0.0.2\"]\n\
             [[access_rule]]\naction = \"deny\"\nja4 = [\"{A}\"]\n"
        ));
        assert_eq!(r.at_accept(ip("127.0.0.2")), AtAccept::Deny("access_rule[0]".into()));
        assert_eq!(r.at_accept(ip("127.0.0.1")), AtAccept::AfterHello);
        assert_eq!(r.denies_at_hello(ip("127.0.0.1"), Some(&ja4(B))), None);
    }
}

//! The cluster's dynamic configuration document and its structural validation.
//!
//! One [`ClusterDocument`] per cluster holds what may change at runtime without a restart:
//! key-server pools (members, weights, drain), upstream groups (servers, weights, drain),
//! per-site switches and the access rules (`[[access_rule]]`, replaced as a whole list). Everything else stays in each node's static TOML. Unknown fields are
//! refused (`deny_unknown_fields`) so a typo cannot silently do nothing.
//!
//! [`ClusterDocument::validate`] checks what can be checked without the node's TOML; a gateway
//! adds its own semantic checks (the pool or site exists) through
//! [`ClusterDocument::validate_with`].

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use tlsgate_config::{AddressError, OriginAddr};
use tlsgate_error::{Classify, Side};

/// Largest accepted member weight.
pub use tlsgate_config::member::MAX_WEIGHT;
/// A pool member or upstream server: tlsgate-config's one definition, which the key-server
/// pools' admin API uses too (same JSON form).
pub use tlsgate_config::Member;
/// Longest accepted pool, upstream or site name.
pub const MAX_NAME_LEN: usize = 64;
/// Most members (or servers) in one pool (or upstream group).
pub const MAX_MEMBERS: usize = 1000;

/// The dynamic configuration of one cluster (serialised as JSON in the store).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDocument {
    /// Key-server pools by name (the names the TOML's `key_server` pools use).
    #[serde(default)]
    pub key_server_pools: BTreeMap<String, KeyServerPool>,
    /// Upstream groups by name.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamGroup>,
    /// Runtime switches per site (by the TOML's site name).
    #[serde(default)]
    pub sites: BTreeMap<String, SiteSwitches>,
    /// When present, every node's `[[access_rule]]` list is this one instead of its TOML's
    /// (tried in order, first match decides; an empty list allows everyone). Absent: the TOML's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_rules: Option<Vec<AccessRule>>,
}

/// One access rule: `[[access_rule]]`'s fields in JSON (`{"action": "deny", "cidrs":
/// ["10.0.0.0/8"], "ja4": ["t13d…"], "name": "scanners"}`).
pub use tlsgate_config::AccessRuleConfig as AccessRule;
/// Most access rules in one document.
pub const MAX_ACCESS_RULES: usize = 1000;

/// One key-server pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyServerPool {
    /// Key servers; order does not matter.
    pub members: Vec<Member>,
}

/// One upstream group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamGroup {
    /// Origin servers; order does not matter.
    pub servers: Vec<Member>,
}

/// Per-site switches that are safe to flip at runtime. `None` keeps the static TOML's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSwitches {
    /// Send `Strict-Transport-Security`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsts: Option<bool>,
    /// Accept TLS 1.3 0-RTT data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_data: Option<bool>,
    /// Answer every request with the maintenance response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<bool>,
}

impl ClusterDocument {
    /// Parses a document from JSON (unknown fields are errors).
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Pretty JSON, the form `tlsgate ctl show` prints and `publish FILE` reads back.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a document always serialises")
    }

    /// Structural validation: names, addresses, weights, duplicates, at least one member that is
    /// not drained in every pool and group. Returns every problem found, each naming its place
    /// (`key_server_pools/main/members/1: …`).
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        for (name, pool) in &self.key_server_pools {
            let at = format!("key_server_pools/{name}");
            check_name(&at, name, &mut problems);
            check_members(&at, "members", &pool.members, check_address, &mut problems);
        }
        for (name, group) in &self.upstreams {
            let at = format!("upstreams/{name}");
            check_name(&at, name, &mut problems);
            check_members(&at, "servers", &group.servers, check_origin, &mut problems);
        }
        for name in self.sites.keys() {
            check_name(&format!("sites/{name}"), name, &mut problems);
        }
        if let Some(rules) = &self.access_rules {
            if rules.len() > MAX_ACCESS_RULES {
                problems.push(format!("access_rules: more than {MAX_ACCESS_RULES} rules"));
            }
            let mut issues = Vec::new();
            tlsgate_config::validate::check_access_rules(rules, &mut issues);
            problems.extend(
                issues
                    .iter()
                    .filter(|i| i.severity == tlsgate_config::Severity::Error)
                    .map(|i| format!("access_rules/{}: {}", rule_place(&i.field), i.message)),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// [`validate`](Self::validate) plus the caller's checks (`extra` returns its problems; it is
    /// called even when the structural checks fail, so every reason is reported at once).
    pub fn validate_with<F>(&self, extra: F) -> Result<(), Vec<String>>
    where
        F: Fn(&ClusterDocument) -> Vec<String>,
    {
        let mut problems = self.validate().err().unwrap_or_default();
        problems.extend(extra(self));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// `access_rule[3].ja4[0]` (the config checker's field) as `3/ja4/0`, the document's path.
fn rule_place(field: &str) -> String {
    field
        .strip_prefix("access_rule[")
        .unwrap_or(field)
        .replace("].", "/")
        .replace(']', "")
        .replace(['[', '.'], "/")
}

fn check_name(at: &str, name: &str, problems: &mut Vec<String>) {
    if name.is_empty() {
        problems.push(format!("{at}: name is empty"));
    } else if name.len() > MAX_NAME_LEN {
        problems.push(format!("{at}: name is longer than {MAX_NAME_LEN} characters"));
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        problems.push(format!("{at}: name contains {c:?} (allowed: A-Z a-z 0-9 . _ -)"));
    }
}

/// Checks one member's address; `Ok` carries its canonical form (for duplicate detection).
type AddressCheck = fn(&str) -> Result<String, MemberAddressError>;

fn check_members(at: &str, field: &str, members: &[Member], check: AddressCheck, problems: &mut Vec<String>) {
    if members.is_empty() {
        problems.push(format!("{at}: no {field}"));
        return;
    }
    if members.len() > MAX_MEMBERS {
        problems.push(format!("{at}: {} {field}, at most {MAX_MEMBERS}", members.len()));
    }
    let mut seen = HashSet::new();
    for (i, m) in members.iter().enumerate() {
        let here = format!("{at}/{field}/{i}");
        let canonical = match check(&m.address) {
            Ok(canonical) => canonical,
            Err(why) => {
                problems.push(format!("{here}: address {:?}: {why}", m.address));
                m.address.to_ascii_lowercase()
            }
        };
        if m.weight == 0 || m.weight > MAX_WEIGHT {
            problems.push(format!("{here}: weight {} is outside 1..={MAX_WEIGHT}", m.weight));
        }
        if !seen.insert(canonical) {
            problems.push(format!("{here}: duplicate address {:?}", m.address));
        }
    }
    if members.iter().all(|m| m.drain) {
        problems.push(format!(
            "{at}: every one of the {field} is drained (at least one must serve)"
        ));
    }
}

/// Why a member's address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberAddressError {
    /// The configuration's address parser refused it.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// An `https://` upstream server.
    #[error("TLS to origins is not supported yet (planned in issue 17)")]
    TlsToOrigin,
}

impl Classify for MemberAddressError {
    /// An address in a document: the publisher's input.
    fn side(&self) -> Side {
        Side::Downstream
    }
    fn kind(&self) -> &'static str {
        match self {
            MemberAddressError::Address(e) => e.kind(),
            MemberAddressError::TlsToOrigin => "tls_to_origin",
        }
    }
}

/// Checks a key server's `host:port` (`[v6]:port` for IPv6) with the configuration's address
/// parser ([`tlsgate_config::address`]); returns its canonical form.
pub fn check_address(address: &str) -> Result<String, MemberAddressError> {
    Ok(OriginAddr::parse_host_port(address)?.to_string())
}

/// Checks an upstream server: what `[[upstream]] servers` accepts (`host:port`, `[v6]:port`,
/// `http://host[:port]`), with the same parser; returns its canonical form. `https://` is
/// refused until the gateway speaks TLS to origins.
pub fn check_origin(address: &str) -> Result<String, MemberAddressError> {
    match OriginAddr::parse(address)? {
        a if a.tls => Err(MemberAddressError::TlsToOrigin),
        a => Ok(a.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> ClusterDocument {
        ClusterDocument::from_json(
            r#"{
              "key_server_pools": { "main": { "members": [ {"address": "ks1.internal:2407", "weight": 1, "drain": false} ] } },
              "upstreams":        { "app":  { "servers": [ {"address": "10.0.0.5:8080"} ] } },
              "sites":            { "example": { "hsts": true, "early_data": false } }
            }"#,
        )
        .unwrap()
    }

    #[test]
    fn parses_example_with_defaults() {
        let d = doc();
        assert_eq!(d.upstreams["app"].servers[0], Member::new("10.0.0.5:8080"));
        assert_eq!(d.sites["example"].maintenance, None);
        assert_eq!(d.sites["example"].early_data, Some(false));
        assert_eq!(d.validate(), Ok(()));
        let back = ClusterDocument::from_json(&d.to_json_pretty()).unwrap();
        assert_eq!(back, d);
        assert!(!d.to_json_pretty().contains("maintenance"));
    }

    #[test]
    fn access_rules_replace_the_list_and_are_checked() {
        let d = ClusterDocument::from_json(
            r#"{"access_rules": [
                 {"action": "allow", "cidrs": ["10.1.0.0/16"]},
                 {"action": "deny", "cidrs": ["10.0.0.0/8"], "name": "internal"}
               ]}"#,
        )
        .unwrap();
        assert_eq!(d.validate(), Ok(()));
        let rules = d.access_rules.as_ref().unwrap();
        assert_eq!(rules[1].cidrs[0].to_string(), "10.0.0.0/8");
        let back = ClusterDocument::from_json(&d.to_json_pretty()).unwrap();
        assert_eq!(back, d, "round trip through JSON");
        assert!(
            !ClusterDocument::default().to_json_pretty().contains("access_rules"),
            "absent: the TOML's"
        );
        let bad = ClusterDocument::from_json(
            r#"{"access_rules": [{"action": "deny", "ja4": ["nope"]}, {"action": "deny", "name": "has space"}]}"#,
        )
        .unwrap();
        let problems = bad.validate().unwrap_err();
        assert!(
            problems.iter().any(|p| p.starts_with("access_rules/0/ja4/0:")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("access_rules/1/name:")),
            "{problems:?}"
        );
        assert!(ClusterDocument::from_json(r#"{"access_rules": [{"action": "block"}]}"#).is_err());
        assert!(
            ClusterDocument::from_json(r#"{"access_rules": [{"action": "deny", "cidrs": ["10.0.0.0/33"]}]}"#).is_err()
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        for bad in [
            r#"{"pools": {}}"#,
            r#"{"sites": {"a": {"hsts": true, "hst": false}}}"#,
            r#"{"upstreams": {"a": {"servers": [{"address": "a:1", "wieght": 2}]}}}"#,
        ] {
            let err = ClusterDocument::from_json(bad).unwrap_err().to_string();
            assert!(err.contains("unknown field"), "{bad}: {err}");
        }
    }

    #[test]
    fn addresses() {
        for ok in [
            "a:1",
            "ks1.internal:2407",
            "10.0.0.5:8080",
            "[::1]:443",
            "my-host-2.x:65535",
        ] {
            assert_eq!(check_address(ok).ok().as_deref(), Some(ok), "{ok}");
            assert_eq!(check_origin(ok).ok().as_deref(), Some(ok), "{ok}");
        }
        assert_eq!(
            check_origin("http://App.Internal").ok().as_deref(),
            Some("app.internal:80")
        );
        assert!(check_address("http://app:80")
            .unwrap_err()
            .to_string()
            .contains("URL is not accepted"));
        let tls = check_origin("https://app:443").unwrap_err();
        assert_eq!(tls, MemberAddressError::TlsToOrigin);
        assert!(tls.to_string().contains("TLS to origins"));
        assert_eq!((tls.side(), tls.kind()), (Side::Downstream, "tls_to_origin"));
        assert_eq!(
            check_address("::1:443").unwrap_err().to_string(),
            "IPv6 addresses need brackets ([::1]:443)"
        );
        for bad in [
            "",
            "host",
            ":80",
            "host:",
            "host:0",
            "host:65536",
            "host:+80",
            "::1:443",
            "[::1:443",
            "[zz]:1",
            "a..b:1",
            "-a:1",
            "a b:1",
            "a/b:1",
            "my_host:1",
            "127.0.0.1:24101:80",
            "http://h:80/app",
        ] {
            assert!(check_address(bad).is_err(), "{bad:?} accepted");
            assert!(check_origin(bad).is_err(), "{bad:?} accepted as an origin");
        }
    }

    #[test]
    fn validation_reports_every_problem_with_its_place() {
        let mut d = doc();
        let main = d.key_server_pools.get_mut("main").unwrap();
        main.members[0].drain = true;
        main.members.push(Member {
            address: "ks1.internal:2407".into(),
            weight: 0,
            drain: true,
        });
        main.members.push(Member {
            address: "nope".into(),
            weight: 1001,
            drain: true,
        });
        d.upstreams.insert("bad name".into(), UpstreamGroup::default());
        d.sites.insert(String::new(), SiteSwitches::default());
        let problems = d.validate().unwrap_err();
        let expect = [
            "key_server_pools/main/members/1: weight 0 is outside 1..=1000",
            "key_server_pools/main/members/1: duplicate address \"ks1.internal:2407\"",
            "key_server_pools/main/members/2: address \"nope\": has no port; write host:port",
            "key_server_pools/main/members/2: weight 1001 is outside 1..=1000",
            "key_server_pools/main: every one of the members is drained (at least one must serve)",
            "upstreams/bad name: name contains ' ' (allowed: A-Z a-z 0-9 . _ -)",
            "upstreams/bad name: no servers",
            "sites/: name is empty",
        ];
        for e in expect {
            assert!(problems.iter().any(|p| p == e), "missing {e:?} in {problems:#?}");
        }
        assert_eq!(problems.len(), expect.len(), "{problems:#?}");
    }

    #[test]
    fn upstream_servers_are_compared_in_canonical_form() {
        let d = ClusterDocument::from_json(
            r#"{"upstreams": {"app": {"servers": [
                {"address": "App:80"}, {"address": "http://app"}, {"address": "::1:80"}
            ]}}}"#,
        )
        .unwrap();
        assert_eq!(
            d.validate(),
            Err(vec![
                "upstreams/app/servers/1: duplicate address \"http://app\"".to_string(),
                "upstreams/app/servers/2: address \"::1:80\": IPv6 addresses need brackets ([::1]:80)".to_string(),
            ])
        );
    }

    #[test]
    fn validate_with_adds_caller_checks() {
        let d = doc();
        let known_pools = ["other"];
        let extra = |d: &ClusterDocument| {
            d.key_server_pools
                .keys()
                .filter(|k| !known_pools.contains(&k.as_str()))
                .map(|k| format!("key_server_pools/{k}: no such pool in the static configuration"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            d.validate_with(extra),
            Err(vec![
                "key_server_pools/main: no such pool in the static configuration".to_string()
            ])
        );
        assert_eq!(d.validate_with(|_| Vec::new()), Ok(()));
    }
}

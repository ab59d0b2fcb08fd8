//! `[[access_rule]]`: which clients may connect at all, by source network and by JA4 TLS
//! fingerprint, as nginx's `allow`/`deny`: the rules are tried in order and the first that
//! matches a connection decides; a connection no rule matches is allowed.

use crate::request_edit::Cidr;
use serde::{Deserialize, Serialize};

/// `[[access_rule]]` (also the JSON form of a rule in the control plane's document, which
/// replaces the whole list at runtime: docs/CONTROL.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AccessRuleConfig {
    /// `allow` or `deny`: what becomes of a connection this rule matches first.
    pub action: AccessAction,
    /// Source networks (CIDR) the rule matches; empty = any source. Rules with `cidrs` alone
    /// decide at accept, before any TLS work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cidrs: Vec<Cidr>,
    /// JA4 fingerprints the rule matches (with `cidrs`, both must match); empty = any client.
    /// Decided right after the ClientHello: a denied client gets a `handshake_failure` alert.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ja4: Vec<String>,
    /// The rule's `rule` label in `tlsgate_access_refused_total` and in log lines; defaults to
    /// `access_rule[N]` (its position, from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl AccessRuleConfig {
    /// The rule's label: its `name`, else `access_rule[index]`.
    pub fn label(&self, index: usize) -> String {
        self.name.clone().unwrap_or_else(|| format!("access_rule[{index}]"))
    }
}

/// What a rule does with the connections it matches.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AccessAction {
    /// Serve them (rules after this one are not tried).
    Allow,
    /// Close them: at accept for a source rule, with a TLS alert for a fingerprint rule.
    Deny,
}

//! `[[upstream]]`: unique names, at least one origin server (each one an address that
//! `crate::address` accepts), and timeouts above zero.

use super::servers;
use crate::issue::Issue;
use crate::model::Config;
use std::collections::HashSet;

/// Every `[[upstream]]`.
pub(super) fn check(config: &Config, issues: &mut Vec<Issue>) {
    let mut names = HashSet::new();
    for (i, u) in config.upstreams.iter().enumerate() {
        let at = format!("upstream[{i}]");
        if !names.insert(u.name.as_str()) {
            issues.push(Issue::error(
                format!("{at}.name"),
                format!("upstream name {:?} is used twice", u.name),
            ));
        }
        if u.servers.is_empty() {
            issues.push(Issue::error(format!("{at}.servers"), "list at least one host:port"));
        }
        servers::check_origins(&format!("{at}.servers"), &u.servers, issues);
        if u.connect_timeout.get().is_zero() {
            issues.push(Issue::error(format!("{at}.connect_timeout"), "must be above zero"));
        }
        if u.header_timeout.get().is_zero() {
            issues.push(Issue::error(format!("{at}.header_timeout"), "must be above zero"));
        }
    }
}

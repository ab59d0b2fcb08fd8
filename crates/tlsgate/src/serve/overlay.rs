//! The cluster document laid over the node's static TOML: the configuration a node actually
//! serves. Pure functions, so the watcher's validator can check exactly what would be installed.
//!
//! - `upstreams.NAME.servers`: the group's origin servers become the document's members that are
//!   not drained (weights are not applied to upstream groups: their balancing is round robin or
//!   least connections over the listed servers).
//! - `sites.NAME.hsts = false` drops the site's `Strict-Transport-Security` header; `true` keeps
//!   (or restores) the TOML's `[site.hsts]`, and is refused when the TOML has none.
//! - `sites.NAME.maintenance = true` answers every request of the site with `503` (the TLS side,
//!   certificates and resumption, is untouched).
//! - `sites.NAME.early_data` is refused: 0-RTT is one setting for the whole node here
//!   (`[tls.tickets] early_data`).
//!
//! - `access_rules`, when present, replaces the TOML's `[[access_rule]]` list as a whole (an
//!   empty list allows every client); the new generation compiles it, so connections accepted
//!   from then on are judged by it, and established ones are left alone.
//!
//! Key-server pools are not part of the overlay: they change in place (`control_plane`).

use tlsgate_config::{Config, FixedResponseConfig, RouteConfig};
use tlsgate_control::ClusterDocument;

/// The body of a site in maintenance.
pub const MAINTENANCE_BODY: &str = "Service temporarily unavailable (maintenance)\n";

/// `base` with `doc`'s upstream groups and site switches applied, or why it cannot be.
pub fn overlay(base: &Config, doc: &ClusterDocument) -> Result<Config, Vec<String>> {
    let mut config = base.clone();
    let mut problems = Vec::new();
    for (name, group) in &doc.upstreams {
        let Some(upstream) = config.upstreams.iter_mut().find(|u| &u.name == name) else {
            problems.push(format!("upstreams/{name}: no [[upstream]] of this name on this node"));
            continue;
        };
        upstream.servers = group
            .servers
            .iter()
            .filter(|m| !m.drain)
            .map(|m| m.address.clone())
            .collect();
    }
    for (name, switches) in &doc.sites {
        let Some(site) = config.sites.iter_mut().find(|s| &s.name == name) else {
            problems.push(format!("sites/{name}: no [[site]] of this name on this node"));
            continue;
        };
        match switches.hsts {
            Some(false) => site.hsts = None,
            Some(true) if site.hsts.is_none() => problems.push(format!(
                "sites/{name}/hsts: this node has no [site.hsts] for the site to switch on"
            )),
            _ => {}
        }
        if switches.early_data.is_some() {
            problems.push(format!(
                "sites/{name}/early_data: 0-RTT is one setting per node here ([tls.tickets] early_data), not per site"
            ));
        }
        if switches.maintenance == Some(true) {
            site.routes = vec![RouteConfig {
                host: None,
                path_prefix: "/".into(),
                upstream: None,
                fixed_response: Some(FixedResponseConfig {
                    status: 503,
                    body: MAINTENANCE_BODY.into(),
                    content_type: "text/plain".into(),
                }),
                rewrite_prefix: None,
                request_headers: Default::default(),
                response_headers: Default::default(),
                match_ja4: Vec::new(),
                rate_limit: Vec::new(),
            }];
        }
    }
    if let Some(rules) = &doc.access_rules {
        config.access_rules = rules.clone();
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(problems)
    }
}

/// Whether `doc` changes anything [`overlay`] lays over the TOML.
pub fn touches_config(doc: &ClusterDocument) -> bool {
    !doc.upstreams.is_empty() || !doc.sites.is_empty() || doc.access_rules.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[[listener]]
listen = "127.0.0.1:8443"
[[site]]
name = "www"
server_names = ["localhost"]
[[site.certificate]]
chain = "/dev/null"
key = "/dev/null"
[[site.route]]
upstream = "app"
[site.hsts]
max_age = "5m"
[[upstream]]
name = "app"
servers = ["127.0.0.1:1"]
"#;

    fn base() -> Config {
        tlsgate_config::parse(BASE).expect("test TOML")
    }

    fn doc(json: &str) -> ClusterDocument {
        ClusterDocument::from_json(json).expect("test document")
    }

    #[test]
    fn upstream_members_replace_the_servers_without_the_drained() {
        let d = doc(
            r#"{"upstreams":{"app":{"servers":[{"address":"10.0.0.1:80"},{"address":"10.0.0.2:80","drain":true},{"address":"10.0.0.3:80","weight":5}]}}}"#,
        );
        let c = overlay(&base(), &d).expect("applies");
        assert_eq!(c.upstreams[0].servers, vec!["10.0.0.1:80", "10.0.0.3:80"]);
        assert!(touches_config(&d));
    }

    #[test]
    fn site_switches_apply_or_are_refused_with_the_reason() {
        let c = overlay(&base(), &doc(r#"{"sites":{"www":{"hsts":false,"maintenance":true}}}"#)).expect("applies");
        assert!(c.sites[0].hsts.is_none());
        let route = &c.sites[0].routes[0];
        assert_eq!(route.fixed_response.as_ref().map(|f| f.status), Some(503));
        assert_eq!(c.sites[0].routes.len(), 1);

        let mut no_hsts = base();
        no_hsts.sites[0].hsts = None;
        let problems = overlay(&no_hsts, &doc(r#"{"sites":{"www":{"hsts":true,"early_data":true}}}"#)).unwrap_err();
        assert!(
            problems.iter().any(|p| p.starts_with("sites/www/hsts:")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.starts_with("sites/www/early_data:")),
            "{problems:?}"
        );

        let problems = overlay(
            &base(),
            &doc(r#"{"sites":{"nope":{}},"upstreams":{"x":{"servers":[{"address":"a:1"}]}}}"#),
        )
        .unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(!touches_config(&doc("{}")));
    }

    #[test]
    fn access_rules_replace_the_tomls_list() {
        let mut with_rules = base();
        with_rules.access_rules =
            tlsgate_config::parse("[[access_rule]]\naction = \"deny\"\ncidrs = [\"10.0.0.0/8\"]\n")
                .expect("rules")
                .access_rules;
        let d = doc(r#"{"access_rules":[{"action":"deny","cidrs":["192.0.2.0/24"],"name":"lab"}]}"#);
        assert!(touches_config(&d));
        let c = overlay(&with_rules, &d).expect("applies");
        assert_eq!(c.access_rules.len(), 1);
        assert_eq!(c.access_rules[0].label(0), "lab");
        let c = overlay(&with_rules, &doc(r#"{"access_rules":[]}"#)).expect("applies");
        assert!(c.access_rules.is_empty(), "an empty list allows everyone");
        let c = overlay(&with_rules, &doc("{}")).expect("applies");
        assert_eq!(c.access_rules.len(), 1, "absent: the TOML's rules stay");
    }
}

//! Semantic validation: what serde cannot check (references between sections, value ranges,
//! the security posture). Each [`Issue`] names the field it is about, e.g. `site[0].route[2].upstream`.
//!
//! One file per section; [`validate`] runs them in a fixed order, so findings come out in the
//! order of the sections below.

mod acme;
mod certificates;
mod cluster;
mod control;
mod ech;
mod edits;
mod fingerprints;
mod handshake_budget;
mod http3;
mod keyless;
mod log;
mod ratelimit;
mod routes;
mod secrets;
mod server;
mod servers;
mod sites;
mod tls;
mod upstreams;

pub use crate::error::ConfigError;
pub use crate::issue::{Issue, Severity};
pub use fingerprints::check_access_rules;
pub use secrets::secret_file_permissions;

use crate::model::Config;

/// Checks a parsed configuration and returns every finding; an empty list means all is well.
pub fn validate(config: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    server::check_server(config, &mut issues);
    handshake_budget::check(config, &mut issues);
    tls::check(&config.tls, &mut issues);
    server::check_listeners(config, &mut issues);
    sites::check(config, &mut issues);
    upstreams::check(config, &mut issues);
    keyless::check(config, &mut issues);
    control::check(config, &mut issues);
    server::check_http2(&config.http2, &mut issues);
    http3::check(config, &mut issues);
    tls::check_early_data(config, &mut issues);
    cluster::check(config, &mut issues);
    ech::check(config, &mut issues);
    log::check(&config.log, &mut issues);
    fingerprints::check(config, &mut issues);
    acme::check(config, &mut issues);
    ratelimit::check(config, &mut issues);
    issues
}

/// A small valid configuration and helpers for the section tests.
#[cfg(test)]
mod test_config {
    use super::{validate, Severity};
    use crate::model::Config;

    pub(super) const MINIMAL: &str = r#"
[[listener]]
listen = "127.0.0.1:8443"

[[site]]
name = "a"
server_names = ["localhost"]
[[site.certificate]]
chain = "/dev/null"
key = "/dev/null"
[[site.route]]
fixed_response = { body = "hi" }
"#;

    /// Parses `text`, which must parse.
    pub(super) fn parse(text: &str) -> Config {
        crate::parse(text).unwrap()
    }

    /// The errors (not warnings) of `config`, as `error: field: message` lines.
    pub(super) fn errors(config: &Config) -> Vec<String> {
        validate(config)
            .into_iter()
            .filter(|i| i.severity == Severity::Error)
            .map(|i| i.to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_config::{errors, parse, MINIMAL};

    #[test]
    fn minimal_config_has_only_file_errors() {
        // /dev/null is not a regular file, so the two file checks fire and nothing else.
        let errs = errors(&parse(MINIMAL));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("site[0].certificate[0].chain"), "{errs:?}");
    }
}

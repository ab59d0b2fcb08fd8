//! JA4 fingerprints in the handshake: computed in the certificate-selection hook from the raw
//! ClientHello (tlsgate-wire `ja4`, SHA-256 from BoringSSL), kept on the connection for the
//! request path (access log, the origin header, routing, later rate-limit keys), and checked
//! against the fingerprint stage of `[[access_rule]]` ([`crate::access_rules`]).
//!
//! It costs nothing when unused: a generation whose configuration names no JA4 feature
//! (`log.access_log_ja4`, `server.ja4_header`, a route's `match_ja4`, an access rule's `ja4`)
//! has [`Policy::compute`] false, and the hook returns after one branch; nothing is attached to
//! connections. With rules by fingerprint, the client's address is attached before the
//! handshake ([`Policy::prepare`]) so that the rules' source networks can be tried with it.
//!
//! A denied ClientHello fails certificate selection: BoringSSL then records
//! `SSL_R_CONNECTION_REJECTED` and sends a fatal `handshake_failure` alert (handshake_server.cc,
//! `ssl_select_cert_error`) before any key share or signature is computed; [`denied`] tells
//! `failure` to label it `access_denied`.

use crate::access_rules::{metrics, AccessRules};
use boring::ex_data::Index;
use boring::ssl::{AsyncSelectCertError, ClientHello, Ssl, SslRef};
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};
use tlsgate_config::Config;
use tlsgate_wire::ja4::{self, Ja4};

/// What one connection's hook recorded.
#[derive(Debug, Default)]
struct ConnFingerprint {
    /// The client's address, for rules with source networks.
    peer: Option<IpAddr>,
    /// The fingerprint (None when the ClientHello could not be read).
    ja4: Option<Ja4>,
    /// Refused by an access rule.
    denied: bool,
}

static CONN_INDEX: LazyLock<Index<Ssl, ConnFingerprint>> =
    LazyLock::new(|| Ssl::new_ex_index().expect("BoringSSL ex_data index"));

/// The fingerprint policy of one configuration generation.
#[derive(Debug, Default)]
pub struct Policy {
    compute: bool,
    rules: AccessRules,
}

impl Policy {
    /// From a configuration: JA4 is computed only when something of it uses it.
    pub fn from_config(config: &Config) -> Self {
        let rules = AccessRules::from_config(&config.access_rules);
        let compute = rules.uses_ja4()
            || (config.log.access_log && config.log.access_log_ja4)
            || config.server.ja4_header.is_some()
            || config
                .sites
                .iter()
                .flat_map(|s| &s.routes)
                .any(|r| !r.match_ja4.is_empty())
            || config
                .rate_limits
                .iter()
                .any(|l| l.key == tlsgate_config::RateLimitKey::Ja4);
        Self { compute, rules }
    }

    /// Whether handshakes compute a JA4.
    pub fn compute(&self) -> bool {
        self.compute
    }

    /// The generation's access rules (the accept stage is the listener's to run).
    pub fn rules(&self) -> &AccessRules {
        &self.rules
    }

    /// Prepares a new server connection from `peer`: attaches the address when rules by
    /// fingerprint will need it (nothing otherwise).
    pub fn prepare(&self, ssl: &mut SslRef, peer: IpAddr) {
        if self.rules.uses_ja4() {
            ssl.set_ex_data(
                *CONN_INDEX,
                ConnFingerprint {
                    peer: Some(peer),
                    ..Default::default()
                },
            );
        }
    }

    /// The certificate-selection hook's step: computes the fingerprint, keeps it on the
    /// connection, and refuses the handshake when an access rule denies it.
    pub fn inspect(&self, hello: &mut ClientHello<'_>) -> Result<(), AsyncSelectCertError> {
        if !self.compute {
            return Ok(());
        }
        let ja4 = match ja4::parse(hello.as_bytes()) {
            Ok(input) => Some(input.fingerprint(boring::sha::sha256)),
            Err(e) => {
                metrics().ja4_unreadable.inc();
                tracing::debug!(error = %e, kind = e.kind(), "ClientHello without a JA4 fingerprint");
                None
            }
        };
        let ssl = hello.ssl_mut();
        let peer = ssl.ex_data(*CONN_INDEX).and_then(|c| c.peer);
        let denied = match peer {
            Some(ip) => self.rules.refuses_at_hello(ip, ja4.as_ref()),
            None => false,
        };
        match ssl.ex_data_mut(*CONN_INDEX) {
            Some(conn) => {
                conn.ja4 = ja4;
                conn.denied = denied;
            }
            None => ssl.set_ex_data(*CONN_INDEX, ConnFingerprint { peer, ja4, denied }),
        }
        if denied {
            return Err(AsyncSelectCertError);
        }
        Ok(())
    }
}

/// The connection's JA4 fingerprint, when its generation computes one and the ClientHello was
/// readable.
pub fn ja4(ssl: &SslRef) -> Option<Ja4> {
    ssl.ex_data(*CONN_INDEX).and_then(|c| c.ja4)
}

/// The fingerprint as shared text, for a connection's facts (one allocation per connection).
pub fn ja4_text(ssl: &SslRef) -> Option<Arc<str>> {
    ja4(ssl).map(|j| Arc::from(j.as_str()))
}

/// Whether an access rule refused this connection's ClientHello.
pub fn denied(ssl: &SslRef) -> bool {
    ssl.ex_data(*CONN_INDEX).is_some_and(|c| c.denied)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FoxIO's vectors (crates/wire/testdata/ja4_vectors.txt: ClientHellos from the pcaps of
    /// https://github.com/FoxIO-LLC/ja4 and the JA4 values of its Python test data), hashed with
    /// BoringSSL's SHA-256 as the hook does.
    #[test]
    fn published_vectors_with_boringssl_sha256() {
        let text = include_str!("../../wire/testdata/ja4_vectors.txt");
        let mut n = 0;
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let body: Vec<u8> = (0..f[3].len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&f[3][i..i + 2], 16).unwrap())
                .collect();
            let fp = ja4::parse(&body).unwrap().fingerprint(boring::sha::sha256);
            assert_eq!(fp.as_str(), f[1], "{}", f[0]);
            n += 1;
        }
        assert_eq!(n, 5);
    }

    #[test]
    fn the_specification_example_hashes() {
        // technical_details/JA4.md: the sorted cipher list hashes to 8daaf6152771, the extension
        // text to e5627efa2ab1, and without signature algorithms to 6d807ffa2a79.
        let sha = |s: &str| {
            let d = boring::sha::sha256(s.as_bytes());
            d[..6].iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert_eq!(
            sha("002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9"),
            "8daaf6152771"
        );
        let exts = "0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01";
        assert_eq!(
            sha(&format!("{exts}_0403,0804,0401,0503,0805,0501,0806,0601")),
            "e5627efa2ab1"
        );
        assert_eq!(sha(exts), "6d807ffa2a79");
    }

    #[test]
    fn policy_computes_only_when_used() {
        let parse = |text: &str| tlsgate_config::parse(text).unwrap();
        assert!(!Policy::from_config(&parse("")).compute());
        assert!(!Policy::from_config(&parse("[log]\naccess_log = false\naccess_log_ja4 = true\n")).compute());
        assert!(Policy::from_config(&parse("[log]\naccess_log_ja4 = true\n")).compute());
        assert!(Policy::from_config(&parse("[server]\nja4_header = \"x-ja4\"\n")).compute());
        let cidr_only = parse("[[access_rule]]\naction = \"deny\"\ncidrs = [\"10.0.0.0/8\"]\n");
        assert!(!Policy::from_config(&cidr_only).compute());
        let by_ja4 = parse("[[access_rule]]\naction = \"deny\"\nja4 = [\"t13d1516h2_8daaf6152771_02713d6af862\"]\n");
        let p = Policy::from_config(&by_ja4);
        assert!(p.compute() && p.rules().uses_ja4());
    }
}

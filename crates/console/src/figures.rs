//! What the console shows about one node, computed from two consecutive scrapes of its
//! `/metrics`: handshake rates (full vs resumed), handshake latency p50/p99 over the interval,
//! failures by reason, session-cache hit rate and breaker, control-plane state, OCSP staple
//! ages and each key server's state as this node sees it.

use crate::prom::{bucket_delta, quantile, rate, Scrape};
use serde::Serialize;
use std::collections::BTreeMap;

/// Figures of one node.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// Full handshakes per second.
    pub full_per_s: f64,
    /// Resumed handshakes per second (session id, ticket, TLS 1.3 PSK).
    pub resumed_per_s: f64,
    /// Failed handshakes per second.
    pub failures_per_s: f64,
    /// Handshake latency over the interval (all handshakes), ms; `None` without handshakes.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Completed handshakes since the node started.
    pub handshakes_total: f64,
    /// Failed handshakes since start, by reason.
    pub errors: BTreeMap<String, f64>,
    /// Failed handshakes per second over the interval, by reason.
    pub errors_per_s: BTreeMap<String, f64>,
    /// Session cache.
    pub session_cache: SessionCache,
    /// `tlsgate_state{name="control_*"}`.
    pub control: BTreeMap<String, f64>,
    /// OCSP staples.
    pub ocsp: Vec<Staple>,
    /// Every served certificate: expiry, chain size and its staple.
    pub certificates: Vec<CertificateFigures>,
    /// Key servers as this node sees them.
    pub keyservers: Vec<KeyServerFigures>,
}

/// Session-cache figures (from `tlsgate_state`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionCache {
    /// Lookups answered (local or remote) since start.
    pub hits: f64,
    /// Lookups not answered since start.
    pub misses: f64,
    /// Hits answered by the shared store.
    pub remote_hits: f64,
    /// Entries held locally.
    pub entries: f64,
    /// hits / (hits + misses) over the interval (or since start when idle); `None` without lookups.
    pub hit_rate: Option<f64>,
    /// Whether the shared store's circuit breaker is open.
    pub breaker_open: bool,
    /// How many times it opened.
    pub breaker_opened_total: f64,
    /// Tickets accepted / issued since start.
    pub tickets_accepted: f64,
    /// Tickets issued since start.
    pub tickets_issued: f64,
}

/// One stapled OCSP response.
#[derive(Debug, Clone, Serialize)]
pub struct Staple {
    /// Site.
    pub site: String,
    /// Certificate key type.
    pub cert: String,
    /// Whether a valid response is stapled.
    pub present: bool,
    /// Seconds since its thisUpdate.
    pub age_s: Option<f64>,
}

/// One served certificate.
#[derive(Debug, Clone, Serialize)]
pub struct CertificateFigures {
    /// Site.
    pub site: String,
    /// Certificate key type.
    pub cert: String,
    /// The leaf's notAfter (Unix seconds).
    pub not_after: f64,
    /// DER bytes of the chain sent.
    pub chain_bytes: f64,
    /// Whether a valid OCSP response is stapled (`None`: not stapled by configuration).
    pub staple_present: Option<bool>,
    /// Seconds since the staple's thisUpdate.
    pub staple_age_s: Option<f64>,
    /// For a certificate the gateway obtains itself (ACME): its renewal state.
    pub acme: Option<AcmeFigures>,
    /// For a keyless certificate with delegated credentials: the credential's expiry (Unix
    /// seconds; `None` while none is held).
    pub delegated_credential_expiry: Option<f64>,
}

/// An ACME certificate's renewal state, from `tlsgate_acme_*`.
#[derive(Debug, Clone, Serialize)]
pub struct AcmeFigures {
    /// The CA's certificate is served (false: the placeholder).
    pub issued: bool,
    /// When the next renewal attempt is planned (Unix seconds).
    pub renewal_at: f64,
    /// Failed orders since the last success.
    pub failures: f64,
}

/// The ACME `key_type` label of a served certificate's `cert` label (`ecdsa_p256` → `ecdsa`).
fn acme_key_type(cert: &str) -> &str {
    if cert.starts_with("ecdsa") {
        "ecdsa"
    } else {
        cert
    }
}

/// One key server as one node sees it.
#[derive(Debug, Clone, Serialize)]
pub struct KeyServerFigures {
    /// Pool name.
    pub pool: String,
    /// `host:port`.
    pub server: String,
    /// Proven connections (0: unhealthy from this node).
    pub connections: f64,
    /// Requests waiting for an answer.
    pub in_flight: f64,
    /// Whether its circuit is open (skipped).
    pub circuit_open: bool,
    /// Current weight.
    pub weight: f64,
    /// Whether drained.
    pub drained: bool,
    /// Successful signatures per second.
    pub ops_per_s: f64,
    /// Failed attempts per second.
    pub errors_per_s: f64,
    /// Successful signatures since start.
    pub ops_total: f64,
    /// Mean attempt latency over the interval (or since start when idle), ms.
    pub latency_ms: Option<f64>,
}

const HS: &str = "tlsgate_handshakes_total";
const FAIL: &str = "tlsgate_handshake_failures_total";
const DUR: &str = "tlsgate_handshake_duration_seconds";
const KS: &str = "tlsgate_keyless_";

fn state(s: &Scrape, name: &str) -> f64 {
    s.sum("tlsgate_state", &[("name", name)])
}

/// Figures from `cur`, with rates against `prev` taken `secs` earlier (no rates without it).
pub fn compute(prev: Option<&Scrape>, cur: &Scrape, secs: f64) -> Figures {
    let per_s = |name: &str, filter: &[(&str, &str)]| {
        prev.map_or(0.0, |p| rate(p.sum(name, filter), cur.sum(name, filter), secs))
    };
    let total = cur.sum(HS, &[]);
    let full_per_s = per_s(HS, &[("outcome", "full")]);
    let all_per_s = prev.map_or(0.0, |p| rate(p.sum(HS, &[]), total, secs));
    let mut f = Figures {
        full_per_s,
        resumed_per_s: (all_per_s - full_per_s).max(0.0),
        failures_per_s: per_s(FAIL, &[]),
        handshakes_total: total,
        ..Figures::default()
    };
    let buckets = cur.buckets(DUR, &[]);
    let window = match prev {
        Some(p) => {
            let d = bucket_delta(&p.buckets(DUR, &[]), &buckets);
            if d.last().is_some_and(|b| b.1 > 0.0) {
                d
            } else {
                buckets.clone()
            }
        }
        None => buckets.clone(),
    };
    f.p50_ms = quantile(&window, 0.5).map(|v| v * 1000.0);
    f.p99_ms = quantile(&window, 0.99).map(|v| v * 1000.0);
    for s in cur.select(FAIL, &[]) {
        let reason = s.label("reason").unwrap_or("other").to_string();
        *f.errors.entry(reason.clone()).or_default() += s.value;
        let r = per_s(FAIL, &[("reason", &reason)]);
        f.errors_per_s.insert(reason, r);
    }
    f.session_cache = session_cache(prev, cur);
    for s in cur.select("tlsgate_state", &[]) {
        if let Some(name) = s.label("name").filter(|n| n.starts_with("control_")) {
            f.control.insert(name.to_string(), s.value);
        }
    }
    for s in cur.select("tlsgate_ocsp_staple_present", &[]) {
        let (site, cert) = (s.label("site").unwrap_or("-"), s.label("cert").unwrap_or("-"));
        let age = cur
            .select("tlsgate_ocsp_staple_age_seconds", &[("site", site), ("cert", cert)])
            .next()
            .map(|a| a.value);
        f.ocsp.push(Staple {
            site: site.into(),
            cert: cert.into(),
            present: s.value > 0.0,
            age_s: age,
        });
    }
    for c in cur.select("tlsgate_certificate_not_after_seconds", &[]) {
        let (site, cert) = (c.label("site").unwrap_or("-"), c.label("cert").unwrap_or("-"));
        let staple = f.ocsp.iter().find(|s| s.site == site && s.cert == cert);
        f.certificates.push(CertificateFigures {
            site: site.into(),
            cert: cert.into(),
            not_after: c.value,
            chain_bytes: cur
                .select("tlsgate_certificate_chain_bytes", &[("site", site), ("cert", cert)])
                .next()
                .map_or(0.0, |b| b.value),
            staple_present: staple.map(|s| s.present),
            staple_age_s: staple.and_then(|s| s.age_s),
            acme: acme_figures(cur, site, acme_key_type(cert)),
            delegated_credential_expiry: cur
                .select(
                    "tlsgate_delegated_credential_expiry_seconds",
                    &[("site", site), ("cert", cert)],
                )
                .next()
                .map(|d| d.value),
        });
    }
    f.keyservers = keyservers(prev, cur, secs);
    f
}

fn acme_figures(cur: &Scrape, site: &str, key_type: &str) -> Option<AcmeFigures> {
    let filter = [("site", site), ("key_type", key_type)];
    let issued = cur.select("tlsgate_acme_certificate_issued", &filter).next()?;
    Some(AcmeFigures {
        issued: issued.value > 0.0,
        renewal_at: cur.sum("tlsgate_acme_renewal_timestamp_seconds", &filter),
        failures: cur.sum("tlsgate_acme_consecutive_failures", &filter),
    })
}

fn session_cache(prev: Option<&Scrape>, cur: &Scrape) -> SessionCache {
    let (hits, misses) = (
        state(cur, "session_cache_hits_total"),
        state(cur, "session_cache_misses_total"),
    );
    let (dh, dm) = prev.map_or((0.0, 0.0), |p| {
        (
            (hits - state(p, "session_cache_hits_total")).max(0.0),
            (misses - state(p, "session_cache_misses_total")).max(0.0),
        )
    });
    let hit_rate = if dh + dm > 0.0 {
        Some(dh / (dh + dm))
    } else if hits + misses > 0.0 {
        Some(hits / (hits + misses))
    } else {
        None
    };
    SessionCache {
        hits,
        misses,
        remote_hits: state(cur, "session_cache_remote_hits_total"),
        entries: state(cur, "session_cache_entries"),
        hit_rate,
        breaker_open: state(cur, "session_store_breaker_open") > 0.0,
        breaker_opened_total: state(cur, "session_store_breaker_opened_total"),
        tickets_accepted: state(cur, "tickets_accepted_total"),
        tickets_issued: state(cur, "tickets_issued_total"),
    }
}

fn keyservers(prev: Option<&Scrape>, cur: &Scrape, secs: f64) -> Vec<KeyServerFigures> {
    let weight = format!("{KS}weight");
    let mut out = Vec::new();
    for s in cur.select(&weight, &[]) {
        let (Some(pool), Some(server)) = (s.label("pool"), s.label("server")) else {
            continue;
        };
        let by = [("pool", pool), ("server", server)];
        let g = |m: &str| cur.sum(&format!("{KS}{m}"), &by);
        let attempts = format!("{KS}attempts_total");
        let ok = [("pool", pool), ("server", server), ("result", "ok")];
        let ops_total = cur.sum(&attempts, &ok);
        let all_total = cur.sum(&attempts, &by);
        let (ops_per_s, errors_per_s) = prev.map_or((0.0, 0.0), |p| {
            let ops = rate(p.sum(&attempts, &ok), ops_total, secs);
            let all = rate(p.sum(&attempts, &by), all_total, secs);
            (ops, (all - ops).max(0.0))
        });
        let (sum_n, count_n) = (
            format!("{KS}attempt_duration_seconds_sum"),
            format!("{KS}attempt_duration_seconds_count"),
        );
        let (sum, count) = (cur.sum(&sum_n, &by), cur.sum(&count_n, &by));
        let (ds, dc) = prev.map_or((0.0, 0.0), |p| (sum - p.sum(&sum_n, &by), count - p.sum(&count_n, &by)));
        let latency_ms = if dc > 0.0 && ds >= 0.0 {
            Some(ds / dc * 1000.0)
        } else if count > 0.0 {
            Some(sum / count * 1000.0)
        } else {
            None
        };
        out.push(KeyServerFigures {
            pool: pool.into(),
            server: server.into(),
            connections: g("connections"),
            in_flight: g("in_flight"),
            circuit_open: g("circuit_open") > 0.0,
            weight: s.value,
            drained: g("drained") > 0.0,
            ops_per_s,
            errors_per_s,
            ops_total,
            latency_ms,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_key_servers() {
        let a = Scrape::parse(
            "tlsgate_handshakes_total{outcome=\"full\"} 10\ntlsgate_handshakes_total{outcome=\"ticket\"} 0\n\
             tlsgate_keyless_weight{pool=\"main\",server=\"a:1\"} 1\n\
             tlsgate_keyless_attempts_total{pool=\"main\",server=\"a:1\",result=\"ok\"} 4\n\
             tlsgate_state{name=\"session_cache_hits_total\"} 1\ntlsgate_state{name=\"session_cache_misses_total\"} 1\n",
        );
        let b = Scrape::parse(
            "tlsgate_handshakes_total{outcome=\"full\"} 14\ntlsgate_handshakes_total{outcome=\"ticket\"} 6\n\
             tlsgate_handshake_failures_total{reason=\"timeout\"} 2\n\
             tlsgate_keyless_weight{pool=\"main\",server=\"a:1\"} 1\ntlsgate_keyless_drained{pool=\"main\",server=\"a:1\"} 1\n\
             tlsgate_keyless_attempts_total{pool=\"main\",server=\"a:1\",result=\"ok\"} 8\n\
             tlsgate_keyless_attempts_total{pool=\"main\",server=\"a:1\",result=\"timeout\"} 2\n\
             tlsgate_state{name=\"session_cache_hits_total\"} 4\ntlsgate_state{name=\"session_cache_misses_total\"} 1\n\
             tlsgate_state{name=\"control_version_applied\"} 3\n",
        );
        let f = compute(Some(&a), &b, 2.0);
        assert_eq!((f.full_per_s, f.resumed_per_s), (2.0, 3.0));
        assert_eq!(f.errors["timeout"], 2.0);
        assert_eq!(f.session_cache.hit_rate, Some(1.0));
        assert_eq!(f.control["control_version_applied"], 3.0);
        let k = &f.keyservers[0];
        assert_eq!((k.ops_per_s, k.errors_per_s, k.drained), (2.0, 1.0, true));
    }

    #[test]
    fn certificates_carry_their_acme_state_and_delegated_credential() {
        let cur = Scrape::parse(
            "tlsgate_certificate_not_after_seconds{site=\"a\",cert=\"ecdsa_p256\"} 2000000000\n\
             tlsgate_certificate_not_after_seconds{site=\"b\",cert=\"rsa\"} 2000000000\n\
             tlsgate_acme_certificate_issued{site=\"a\",key_type=\"ecdsa\"} 1\n\
             tlsgate_acme_renewal_timestamp_seconds{site=\"a\",key_type=\"ecdsa\"} 1900000000\n\
             tlsgate_acme_consecutive_failures{site=\"a\",key_type=\"ecdsa\"} 2\n\
             tlsgate_delegated_credential_expiry_seconds{site=\"b\",cert=\"rsa\"} 1800000000\n",
        );
        let f = compute(None, &cur, 1.0);
        let a = f.certificates.iter().find(|c| c.site == "a").unwrap();
        let acme = a.acme.as_ref().expect("ACME state");
        assert!(acme.issued);
        assert_eq!((acme.renewal_at, acme.failures), (1_900_000_000.0, 2.0));
        assert_eq!(a.delegated_credential_expiry, None);
        let b = f.certificates.iter().find(|c| c.site == "b").unwrap();
        assert!(b.acme.is_none(), "not an ACME certificate");
        assert_eq!(b.delegated_credential_expiry, Some(1_800_000_000.0));
    }
}

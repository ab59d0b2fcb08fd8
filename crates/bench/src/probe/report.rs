//! What `tlsgate probe` found on each connection, the expectations checked against it, and the
//! text and JSON renderings.

use super::args::ProbePlan;
use serde::Serialize;
use std::fmt::Write as _;

/// Per-phase timings of one connection, in microseconds. `connect` and `handshake` are durations;
/// `ttfb` and `ttlb` count from the start of the TCP connect (so connect + handshake <= ttfb <= ttlb).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Timings {
    /// TCP connect.
    pub connect: u64,
    /// TLS handshake (until the client's handshake call returned; with 0-RTT, until it may send).
    pub handshake: u64,
    /// Time to the first response byte, from the start.
    pub ttfb: u64,
    /// Time to the last response byte, from the start.
    pub ttlb: u64,
}

/// The OCSP staple.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ocsp {
    /// The server stapled a response.
    pub present: bool,
    /// Its size.
    pub bytes: usize,
    /// `good`, `revoked`, `stale`, `invalid` or `unverified` (no issuer in the chain).
    pub status: Option<String>,
    /// Seconds since thisUpdate (for a good response).
    pub age_s: Option<u64>,
    /// Seconds until nextUpdate, when set.
    pub next_update_in_s: Option<u64>,
    /// Why it is not good.
    pub detail: Option<String>,
}

/// TLS 1.3 early data.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EarlyData {
    /// The offered session allowed 0-RTT.
    pub session_capable: bool,
    /// The request was sent as early data.
    pub offered: bool,
    /// The server accepted it.
    pub accepted: bool,
    /// The server rejected it and the request was sent again after the handshake.
    pub rejected: bool,
    /// BoringSSL's reason (`accepted`, `disabled`, `no_session_offered`, `peer_declined`, ...).
    pub reason: String,
}

/// Encrypted ClientHello (`--ech-config`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ech {
    /// An ECHConfigList was offered.
    pub offered: bool,
    /// The server decrypted the inner ClientHello.
    pub accepted: bool,
    /// The name the served certificate is for (its first DNS name), when ECH was offered.
    pub served_name: Option<String>,
    /// The server rejected the offer and sent these retry configs (base64).
    pub retry_configs: Option<String>,
}

/// One connection.
#[derive(Debug, Clone, Serialize)]
pub struct ConnReport {
    /// 1-based.
    pub index: usize,
    /// Why it failed.
    pub error: Option<String>,
    /// `TLSv1.3`.
    pub version: Option<String>,
    /// IANA cipher name.
    pub cipher: Option<String>,
    /// Key-exchange group (none on a TLS 1.2 resumption).
    pub group: Option<String>,
    /// Leaf key type: `ECDSA`, `RSA`, `Ed25519`, `ML-DSA-44`, `ML-DSA-65`, `ML-DSA-87`.
    pub cert_type: Option<String>,
    /// The signature algorithm of the server's handshake signature (`rsa_pss_rsae_sha256`,
    /// `ecdsa_secp256r1_sha256`, `mldsa65`, ...; none on a resumption, where nothing is signed).
    pub sigalg: Option<String>,
    /// Size of that signature (CertificateVerify) in bytes, where the algorithm fixes it
    /// (ML-DSA, Ed25519, RSA: the modulus); none for ECDSA (DER, 70 to 72 bytes for P-256).
    pub signature_bytes: Option<usize>,
    /// Certificates the server sent.
    pub chain_certs: usize,
    /// Their DER size in bytes.
    pub chain_bytes: usize,
    /// On a resumption the chain is the one stored in the session, not sent again.
    pub cert_from_session: bool,
    /// Selected ALPN protocol.
    pub alpn: Option<String>,
    /// OCSP staple.
    pub ocsp: Ocsp,
    /// HTTP status of the GET.
    pub http_status: Option<u16>,
    /// Its Strict-Transport-Security header.
    pub hsts: Option<String>,
    /// Where the offered session came from: `previous` (connection) or `file` (`--sess-in`).
    pub session_offered: Option<&'static str>,
    /// The offered session carried a ticket.
    pub offered_ticket: bool,
    /// `SSL_session_reused`.
    pub resumed: bool,
    /// `full`, `session_id`, `ticket` (TLS 1.2) or `tls13_psk`.
    pub resumption: &'static str,
    /// New sessions received on this connection (TLS 1.3: one per NewSessionTicket).
    pub sessions_received: u32,
    /// The newest of them carries a ticket.
    pub new_session_ticket: bool,
    /// The newest of them allows 0-RTT.
    pub new_session_early_data: bool,
    /// 0-RTT.
    pub early_data: EarlyData,
    /// Encrypted ClientHello.
    pub ech: Ech,
    /// Timings.
    pub timings_us: Option<Timings>,
}

impl ConnReport {
    /// An empty report for connection `index`.
    pub fn new(index: usize) -> Self {
        Self {
            index,
            error: None,
            version: None,
            cipher: None,
            group: None,
            cert_type: None,
            sigalg: None,
            signature_bytes: None,
            chain_certs: 0,
            chain_bytes: 0,
            cert_from_session: false,
            alpn: None,
            ocsp: Ocsp::default(),
            http_status: None,
            hsts: None,
            session_offered: None,
            offered_ticket: false,
            resumed: false,
            resumption: "full",
            sessions_received: 0,
            new_session_ticket: false,
            new_session_early_data: false,
            early_data: EarlyData::default(),
            ech: Ech::default(),
            timings_us: None,
        }
    }
}

/// One expectation and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Expectation {
    /// The flag, e.g. `--expect-resume`.
    pub flag: String,
    /// Whether it held.
    pub ok: bool,
    /// What failed (empty when ok).
    pub message: String,
}

/// The whole probe.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// `HOST:PORT`.
    pub target: String,
    /// The address connected to.
    pub addr: String,
    /// SNI sent.
    pub sni: Option<String>,
    /// Connections.
    pub connections: Vec<ConnReport>,
    /// Expectations checked.
    pub expectations: Vec<Expectation>,
    /// Every connection worked and every expectation held.
    pub ok: bool,
    /// Where the session was saved.
    pub session_saved: Option<String>,
}

fn check(out: &mut Vec<Expectation>, flag: String, failures: Vec<String>) {
    out.push(Expectation {
        flag,
        ok: failures.is_empty(),
        message: failures.join("; "),
    });
}

/// Checks the plan's expectations against the connections.
pub fn expectations(plan: &ProbePlan, conns: &[ConnReport]) -> Vec<Expectation> {
    let a = &plan.args;
    let mut out = Vec::new();
    let done: Vec<&ConnReport> = conns.iter().filter(|c| c.error.is_none()).collect();
    // Connections that had a chance to resume: after the first, or every one with --sess-in.
    let could_resume = |c: &ConnReport| c.index > 1 || a.sess_in.is_some();
    if a.expect_resume {
        let f = done
            .iter()
            .filter(|c| could_resume(c))
            .filter(|c| !c.resumed)
            .map(|c| {
                let why = if c.session_offered.is_none() {
                    "no session to offer"
                } else {
                    "the server did a full handshake"
                };
                format!("connection {} was not resumed ({why})", c.index)
            })
            .collect();
        check(&mut out, "--expect-resume".into(), f);
    }
    if a.expect_no_resume {
        let f = done
            .iter()
            .filter(|c| c.resumed)
            .map(|c| format!("connection {} was resumed ({})", c.index, c.resumption))
            .collect();
        check(&mut out, "--expect-no-resume".into(), f);
    }
    if let Some(want) = &a.expect_group {
        let f = done
            .iter()
            .filter(|c| !(c.resumed && c.version.as_deref() == Some("TLSv1.2")))
            .filter(|c| !c.group.as_deref().is_some_and(|g| g.eq_ignore_ascii_case(want)))
            .map(|c| {
                format!(
                    "connection {} negotiated {}",
                    c.index,
                    c.group.as_deref().unwrap_or("no group")
                )
            })
            .collect();
        check(&mut out, format!("--expect-group {want}"), f);
    }
    if a.expect_staple {
        let f = done
            .iter()
            .filter(|c| !c.resumed)
            .filter(|c| c.ocsp.status.as_deref() != Some("good"))
            .map(|c| match &c.ocsp.status {
                None => format!("connection {}: no OCSP staple", c.index),
                Some(s) => format!("connection {}: staple {s}", c.index),
            })
            .collect();
        check(&mut out, "--expect-staple".into(), f);
    }
    if let Some(want) = &plan.expect_version {
        let f = done
            .iter()
            .filter(|c| c.version.as_deref() != Some(want))
            .map(|c| {
                format!(
                    "connection {} negotiated {}",
                    c.index,
                    c.version.as_deref().unwrap_or("?")
                )
            })
            .collect();
        check(&mut out, format!("--expect-version {want}"), f);
    }
    if let Some(want) = &a.expect_alpn {
        let f = done
            .iter()
            .filter(|c| c.alpn.as_deref() != Some(want))
            .map(|c| {
                format!(
                    "connection {} selected {}",
                    c.index,
                    c.alpn.as_deref().unwrap_or("no ALPN")
                )
            })
            .collect();
        check(&mut out, format!("--expect-alpn {want}"), f);
    }
    if let Some(want) = &a.expect_sigalg {
        let f = done
            .iter()
            .filter(|c| !c.resumed)
            .filter(|c| c.sigalg.as_deref() != Some(want))
            .map(|c| {
                format!(
                    "connection {} was signed with {}",
                    c.index,
                    c.sigalg.as_deref().unwrap_or("nothing")
                )
            })
            .collect();
        check(&mut out, format!("--expect-sigalg {want}"), f);
    }
    if a.expect_ech {
        let f = conns
            .iter()
            .filter(|c| !c.ech.accepted)
            .map(|c| match &c.ech.retry_configs {
                Some(_) => format!("connection {}: ECH rejected (the server sent retry configs)", c.index),
                None => format!("connection {}: ECH not accepted", c.index),
            })
            .collect();
        check(&mut out, "--expect-ech".into(), f);
    }
    if a.expect_early_data {
        let f = done
            .iter()
            .filter(|c| could_resume(c))
            .filter(|c| !c.early_data.accepted)
            .map(|c| {
                let what = if c.early_data.offered { "rejected" } else { "not sent" };
                format!("connection {}: 0-RTT {what} ({})", c.index, c.early_data.reason)
            })
            .collect();
        check(&mut out, "--expect-early-data".into(), f);
    }
    out
}

/// The handshake signature's size for algorithm `sigalg` (BoringSSL's name) made with the key
/// `key`, where the algorithm fixes it.
pub fn signature_bytes(
    sigalg: Option<&str>,
    key: Option<&boring::pkey::PKeyRef<boring::pkey::Public>>,
) -> Option<usize> {
    use tlsgate_tls::mldsa::Level;
    let sigalg = sigalg?;
    if let Some(level) = Level::ALL.into_iter().find(|l| l.name() == sigalg) {
        return Some(level.signature_bytes());
    }
    match sigalg {
        "ed25519" => Some(64),
        s if s.starts_with("rsa_") => key.map(|k| k.bits() as usize / 8),
        _ => None,
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

impl ProbeReport {
    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    /// The text report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Probing {} ({}), SNI {}",
            self.target,
            self.addr,
            self.sni.as_deref().unwrap_or("none")
        );
        for c in &self.connections {
            let _ = write!(s, "connection {}: ", c.index);
            if let Some(e) = &c.error {
                let _ = writeln!(s, "FAILED: {e}");
                if let Some(retry) = &c.ech.retry_configs {
                    let _ = writeln!(s, "  ECH rejected; retry configs: {retry}");
                }
                continue;
            }
            let how = match c.resumption {
                "full" => "full handshake".to_string(),
                r => format!("resumed ({r})"),
            };
            let _ = writeln!(
                s,
                "{} {} {}, {how}",
                c.version.as_deref().unwrap_or("?"),
                c.cipher.as_deref().unwrap_or("?"),
                c.group.as_deref().unwrap_or("(no key exchange)"),
            );
            let from = if c.cert_from_session { " (from the session)" } else { "" };
            let signed = match (c.sigalg.as_deref(), c.signature_bytes) {
                (Some(a), Some(n)) => format!(" signed with {a} ({n}-byte signature)"),
                (Some(a), None) => format!(" signed with {a}"),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                s,
                "  certificate {}{signed}, chain {} certificates / {} bytes{from}; ALPN {}",
                c.cert_type.as_deref().unwrap_or("?"),
                c.chain_certs,
                c.chain_bytes,
                c.alpn.as_deref().unwrap_or("none")
            );
            let staple = match (&c.ocsp.status, c.ocsp.age_s) {
                (None, _) => "none".to_string(),
                (Some(st), Some(age)) => format!("{st}, {} bytes, {age}s old", c.ocsp.bytes),
                (Some(st), None) => format!("{st} ({})", c.ocsp.detail.as_deref().unwrap_or("")),
            };
            let _ = writeln!(
                s,
                "  OCSP staple: {staple}; HTTP {}; HSTS: {}",
                c.http_status.map_or("-".into(), |x| x.to_string()),
                c.hsts.as_deref().unwrap_or("none")
            );
            let offered = match c.session_offered {
                None => "no session offered".to_string(),
                Some(from) => format!(
                    "offered a session from {from} ({})",
                    if c.offered_ticket {
                        "with ticket"
                    } else {
                        "session ID only"
                    }
                ),
            };
            let early = match (c.early_data.offered, c.early_data.accepted) {
                (false, _) => format!("not sent ({})", c.early_data.reason),
                (true, true) => "sent, accepted".to_string(),
                (true, false) => format!("sent, rejected ({})", c.early_data.reason),
            };
            let _ = writeln!(
                s,
                "  {offered}; {} new session(s) received{}; 0-RTT {early}",
                c.sessions_received,
                if c.new_session_early_data {
                    " (0-RTT capable)"
                } else {
                    ""
                }
            );
            if c.ech.offered {
                let _ = writeln!(
                    s,
                    "  ECH: {}; served name {}",
                    if c.ech.accepted { "accepted" } else { "not accepted" },
                    c.ech.served_name.as_deref().unwrap_or("?")
                );
            }
            if let Some(t) = &c.timings_us {
                let _ = writeln!(
                    s,
                    "  timings: connect {}, handshake {}, TTFB {}, TTLB {}",
                    ms(t.connect),
                    ms(t.handshake),
                    ms(t.ttfb),
                    ms(t.ttlb)
                );
            }
        }
        if let Some(path) = &self.session_saved {
            let _ = writeln!(s, "session saved to {path}");
        }
        for e in &self.expectations {
            if e.ok {
                let _ = writeln!(s, "expectation {}: ok", e.flag);
            } else {
                let _ = writeln!(s, "expectation {}: FAILED: {}", e.flag, e.message);
            }
        }
        s
    }
}

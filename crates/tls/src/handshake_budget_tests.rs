//! The handshake budget through the gateway's own contexts (a configuration loaded,
//! `TlsService::build`, `new_ssl`, the budget attached as the proxy does), handshakes in memory: full handshakes
//! past the burst refused at the hello with an alert, other sources untouched; resumptions (TLS
//! 1.3 PSK, TLS 1.2 ticket and session ID) admitted over the full budget unless `close`; the
//! resumed budget apart; a resumption that signs after all charged at the signature; forged
//! tickets; reloads; a prefix as one source. At the crate root, as `client_auth_tests`: they build
//! whole services (`context`), which imports `handshake_budget`.

use crate::failure::{received_alert, HandshakeFailure};
use crate::handshake_budget::{refusal, HandshakeBudget, Refusal};
use crate::pki::{CertSpec, Certified, KeyKind};
use crate::test_tls::Handshake;
use crate::{SessionState, TlsService};
use boring::ssl::Ssl;
use boring::ssl::SslVerifyMode;
use boring::ssl::{SslContext, SslContextBuilder, SslMethod, SslOptions, SslSession, SslSessionCacheMode, SslVersion};
use std::io::{Read, Write};
use std::sync::{Arc, LazyLock, Mutex};

struct Material {
    ca: Certified,
    leaf: Certified,
}

static MATERIAL: LazyLock<Material> = LazyLock::new(|| {
    let ca = Certified::issue(&CertSpec::ca("budget CA", KeyKind::EcdsaP256, 30), None).unwrap();
    let leaf = Certified::issue(
        &CertSpec::leaf(&["localhost", "other.test"], KeyKind::EcdsaP256, 30),
        Some(&ca),
    )
    .unwrap();
    Material { ca, leaf }
});

/// A gateway's TLS side with sites `main` (localhost) and `other` (other.test), and its budget.
struct Gateway {
    _dir: tempfile::TempDir,
    service: TlsService,
    sessions: SessionState,
    budget: HandshakeBudget,
}

fn config(budget: Option<&str>) -> (tempfile::TempDir, tlsgate_config::Config) {
    let dir = tempfile::tempdir().unwrap();
    let m = &*MATERIAL;
    std::fs::write(dir.path().join("leaf.pem"), &m.leaf.cert_pem).unwrap();
    std::fs::write(dir.path().join("leaf.key"), &m.leaf.key_pem).unwrap();
    let site = |name: &str, host: &str| {
        format!(
            "[[site]]\nname = \"{name}\"\nserver_names = [\"{host}\"]\n[[site.certificate]]\nchain = \"leaf.pem\"\n\
             key = \"leaf.key\"\n[[site.route]]\nfixed_response = {{ body = \"hi\" }}\n"
        )
    };
    let budget = budget.map_or(String::new(), |b| format!("[server.handshake_budget]\n{b}\n"));
    let text = format!(
        "{budget}[[listener]]\nlisten = \"127.0.0.1:8443\"\n{}{}",
        site("main", "localhost"),
        site("other", "other.test")
    );
    std::fs::write(dir.path().join("tlsgate.toml"), text).unwrap();
    let config = tlsgate_config::load(&dir.path().join("tlsgate.toml"))
        .expect("valid configuration")
        .config;
    (dir, config)
}

impl Gateway {
    fn new(budget: Option<&str>) -> Self {
        let (dir, config) = config(budget);
        let sessions = SessionState::new(&config.tls);
        let service = TlsService::build(&config, &sessions).expect("TLS contexts");
        let budget = HandshakeBudget::new(config.server.handshake_budget.as_ref());
        Self {
            _dir: dir,
            service,
            sessions,
            budget,
        }
    }

    /// Applies another `[server.handshake_budget]` body (None: the section removed).
    fn reload(&self, budget: Option<&str>) {
        let (_dir, config) = config(budget);
        self.budget.reconfigure(config.server.handshake_budget.as_ref());
    }

    /// A server connection from `from`, under the budget.
    fn server_ssl(&self, from: &str) -> Ssl {
        let mut s = self.service.new_ssl().unwrap();
        s.set_task_waker(Some(std::task::Waker::noop().clone()));
        self.budget.attach(&mut s, from.parse().unwrap());
        s
    }

    /// One handshake from `from` with SNI `sni`, offering `session`.
    fn connect(&self, from: &str, client: &Client, sni: &str, session: Option<&SslSession>) -> Outcome {
        let mut c = Ssl::new(&client.ctx).unwrap();
        c.set_hostname(sni).unwrap();
        if let Some(s) = session {
            crate::ffi::set_client_session(&mut c, s).unwrap();
        }
        outcome(Handshake::between(c, self.server_ssl(from)))
    }

    /// A server connection from `from` reading the raw `hello` from a client that then closes:
    /// what the budget decided.
    fn raw(&self, from: &str, hello: &[u8]) -> Option<Refusal> {
        let side = Handshake::server_only_with(&self.front(), hello, |s| {
            crate::handshake_info::attach(s);
            s.set_task_waker(Some(std::task::Waker::noop().clone()));
            self.budget.attach(s, from.parse().unwrap());
        });
        let failed = side.expect_err("a lone ClientHello never completes");
        refusal(failed.ssl())
    }

    /// The front context (the one `new_ssl` uses).
    fn front(&self) -> SslContext {
        self.service.new_ssl().unwrap().ssl_context().to_owned()
    }
}

/// A BoringSSL client of one version that trusts the test CA and keeps its sessions.
struct Client {
    ctx: SslContext,
    sessions: Arc<Mutex<Vec<SslSession>>>,
}

impl Client {
    fn new(version: SslVersion, no_ticket: bool) -> Self {
        let mut b = SslContextBuilder::new(SslMethod::tls()).unwrap();
        b.cert_store_mut().add_cert(MATERIAL.ca.certificate()).unwrap();
        b.set_verify(SslVerifyMode::PEER);
        b.set_min_proto_version(Some(version)).unwrap();
        b.set_max_proto_version(Some(version)).unwrap();
        if no_ticket {
            b.set_options(SslOptions::NO_TICKET);
        }
        let sessions: Arc<Mutex<Vec<SslSession>>> = Arc::default();
        let store = sessions.clone();
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        b.set_new_session_callback(move |_, s| store.lock().unwrap().push(s));
        Self {
            ctx: b.build(),
            sessions,
        }
    }

    fn last_session(&self) -> SslSession {
        self.sessions.lock().unwrap().last().cloned().expect("a session")
    }
}

const V12: SslVersion = SslVersion::TLS1_2;
const V13: SslVersion = SslVersion::TLS1_3;

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Full,
    Resumed,
    Refused {
        failure: HandshakeFailure,
        alert: Option<u8>,
        refusal: Option<Refusal>,
    },
}

/// Exchanges a byte after a completed handshake (the TLS 1.3 client reads its tickets), or reads
/// why the server refused it and the alert the client got.
fn outcome(hs: Handshake) -> Outcome {
    match (hs.client, hs.server) {
        (Ok(mut client), Ok(mut server)) => {
            let resumed = server.ssl().session_reused();
            server.write_all(b"x").unwrap();
            let mut byte = [0u8; 1];
            client.read_exact(&mut byte).unwrap();
            if resumed {
                Outcome::Resumed
            } else {
                Outcome::Full
            }
        }
        (client, Err(server)) => {
            let alert = match client {
                Err(mid) => mid.error().ssl_error().and_then(received_alert),
                Ok(mut stream) => {
                    let mut byte = [0u8; 1];
                    stream
                        .ssl_read(&mut byte)
                        .err()
                        .and_then(|e| e.ssl_error().and_then(received_alert))
                }
            };
            Outcome::Refused {
                failure: HandshakeFailure::classify(Some(server.ssl()), server.error()),
                alert,
                refusal: refusal(server.ssl()),
            }
        }
        (Err(client), Ok(_)) => panic!("the client failed: {}", client.error()),
    }
}

const HANDSHAKE_FAILURE: Option<u8> = Some(boring_sys::SSL_AD_HANDSHAKE_FAILURE as u8);

fn refused_at_hello(resumed_budget: bool) -> Outcome {
    Outcome::Refused {
        failure: HandshakeFailure::HandshakeBudget,
        alert: HANDSHAKE_FAILURE,
        refusal: Some(Refusal {
            resumed_budget,
            at_signature: false,
        }),
    }
}

/// A budget that refills too slowly to matter within a test.
fn slow(burst: u32, extra: &str) -> String {
    format!("full_per_second = 0.001\nfull_burst = {burst}\n{extra}")
}

#[test]
fn full_handshakes_past_the_burst_are_refused_with_an_alert_and_other_sources_are_not() {
    let gw = Gateway::new(Some(&slow(3, "")));
    let (c13, c12) = (Client::new(V13, false), Client::new(V12, false));
    for _ in 0..3 {
        assert_eq!(gw.connect("192.0.2.1", &c13, "localhost", None), Outcome::Full);
    }
    assert_eq!(
        gw.connect("192.0.2.1", &c13, "localhost", None),
        refused_at_hello(false)
    );
    assert_eq!(
        gw.connect("192.0.2.1", &c12, "localhost", None),
        refused_at_hello(false)
    );
    // Another source has its own bucket; the first stays refused.
    assert_eq!(gw.connect("192.0.2.2", &c12, "localhost", None), Outcome::Full);
    assert_eq!(
        gw.connect("192.0.2.1", &c13, "other.test", None),
        refused_at_hello(false)
    );
    assert_eq!(HandshakeFailure::HandshakeBudget.label(), "handshake_budget");
    let r = Refusal {
        resumed_budget: false,
        at_signature: false,
    };
    assert_eq!((r.reason(), r.stage()), ("full_handshake_budget", "client_hello"));
}

#[test]
fn without_a_budget_nothing_is_attached_or_refused() {
    let gw = Gateway::new(None);
    assert!(!gw.budget.enabled());
    let client = Client::new(V13, false);
    for _ in 0..20 {
        assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    }
    assert!(refusal(&gw.server_ssl("192.0.2.1")).is_none());
}

#[test]
fn resumptions_go_on_over_the_full_budget_unless_close() {
    let gw = Gateway::new(Some(&slow(1, "")));
    let mut sessions = Vec::new();
    // One source per resumption mechanism: a full handshake each, then its budget is spent.
    for (from, version, no_ticket) in [
        ("192.0.2.1", V13, false),
        ("192.0.2.2", V12, false),
        ("192.0.2.3", V12, true),
    ] {
        let client = Client::new(version, no_ticket);
        assert_eq!(gw.connect(from, &client, "localhost", None), Outcome::Full);
        assert_eq!(gw.connect(from, &client, "localhost", None), refused_at_hello(false));
        sessions.push((from, client));
    }
    for (from, client) in &sessions {
        let session = client.last_session();
        for _ in 0..5 {
            assert_eq!(
                gw.connect(from, client, "localhost", Some(&session)),
                Outcome::Resumed,
                "{from}"
            );
        }
    }
    // `close`: a source over its full budget gets nothing, resumptions included.
    gw.reload(Some(&slow(1, "over_budget = \"close\"")));
    for (from, client) in &sessions {
        let session = client.last_session();
        assert_eq!(
            gw.connect(from, client, "localhost", Some(&session)),
            refused_at_hello(false),
            "{from}"
        );
    }
    // A source with tokens left still resumes under `close`.
    let fresh = Client::new(V13, false);
    assert_eq!(gw.connect("192.0.2.9", &fresh, "localhost", None), Outcome::Full);
    gw.reload(Some(&slow(5, "over_budget = \"close\"")));
    let session = fresh.last_session();
    assert_eq!(
        gw.connect("192.0.2.9", &fresh, "localhost", Some(&session)),
        Outcome::Resumed
    );
}

#[test]
fn the_resumed_budget_is_apart_from_the_full_one() {
    let gw = Gateway::new(Some(&slow(2, "resumed_per_second = 0.001\nresumed_burst = 2")));
    let client = Client::new(V13, false);
    assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    let session = client.last_session();
    for _ in 0..2 {
        assert_eq!(
            gw.connect("192.0.2.1", &client, "localhost", Some(&session)),
            Outcome::Resumed
        );
    }
    assert_eq!(
        gw.connect("192.0.2.1", &client, "localhost", Some(&session)),
        refused_at_hello(true)
    );
    // The full bucket kept its second token.
    assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    assert_eq!(
        gw.connect("192.0.2.1", &client, "localhost", None),
        refused_at_hello(false)
    );
    let r = Refusal {
        resumed_budget: true,
        at_signature: false,
    };
    assert_eq!(r.reason(), "resumed_handshake_budget");
}

#[test]
fn a_resumption_that_signs_after_all_is_charged_at_the_signature() {
    let gw = Gateway::new(Some(&slow(2, "")));
    let client = Client::new(V13, false);
    assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    let session = client.last_session();
    // A session of `main` offered to `other`: admitted as a resumption, but it cannot resume
    // there (another session-ID context), so it signs: the second full token.
    assert_eq!(
        gw.connect("192.0.2.1", &client, "other.test", Some(&session)),
        Outcome::Full
    );
    // The same again: no full token left, refused before the signature.
    let refused = gw.connect("192.0.2.1", &client, "other.test", Some(&session));
    let Outcome::Refused { failure, refusal, .. } = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(failure, HandshakeFailure::HandshakeBudget);
    let refusal = refusal.expect("the budget refused it");
    assert_eq!(
        (refusal.reason(), refusal.stage()),
        ("full_handshake_budget", "signature")
    );
    // Where it does resume, it still goes on.
    assert_eq!(
        gw.connect("192.0.2.1", &client, "localhost", Some(&session)),
        Outcome::Resumed
    );
}

/// A TLS 1.3 ClientHello record offering one PSK `identity` (with a made-up binder).
fn tls13_hello_with_psk(identity: &[u8]) -> Vec<u8> {
    fn ext(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut exts = Vec::new();
    ext(&mut exts, 0x002b, &[0x02, 0x03, 0x04]);
    ext(&mut exts, 0x000a, &[0x00, 0x02, 0x00, 0x1d]);
    let mut share = vec![0x00, 0x24, 0x00, 0x1d, 0x00, 0x20];
    share.extend_from_slice(&[0x5a; 32]);
    ext(&mut exts, 0x0033, &share);
    ext(&mut exts, 0x000d, &[0x00, 0x02, 0x04, 0x03]);
    ext(&mut exts, 0x002d, &[0x01, 0x01]);
    let mut ids = (identity.len() as u16).to_be_bytes().to_vec();
    ids.extend_from_slice(identity);
    ids.extend_from_slice(&[0, 0, 0, 0]);
    let mut psk = (ids.len() as u16).to_be_bytes().to_vec();
    psk.extend_from_slice(&ids);
    psk.extend_from_slice(&[0x00, 0x21, 0x20]);
    psk.extend_from_slice(&[0x11; 32]);
    ext(&mut exts, 0x0029, &psk);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0x42; 32]);
    body.push(0);
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut msg = vec![0x01, 0x00];
    msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
    msg.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    record.extend_from_slice(&msg);
    record
}

#[test]
fn forged_tickets_are_charged_as_full_handshakes() {
    let gw = Gateway::new(Some(&slow(1, "")));
    // An identity with no key name of ours: a full handshake, charged at the hello.
    let unknown = tls13_hello_with_psk(&[0xee; 80]);
    assert_eq!(gw.raw("192.0.2.1", &unknown), None, "the first takes the token");
    assert_eq!(
        gw.raw("192.0.2.1", &unknown),
        Some(Refusal {
            resumed_budget: false,
            at_signature: false
        })
    );
    // Our current key's name and garbage after it: admitted as a resumption, but the ticket does
    // not open, so the handshake signs, and the signature takes the full token.
    let name = gw.sessions.tickets.key_names()[0];
    let mut forged = name.to_vec();
    forged.extend_from_slice(&[0xee; 80]);
    let forged = tls13_hello_with_psk(&forged);
    assert_eq!(gw.raw("192.0.2.2", &forged), None, "the signature took the token");
    assert_eq!(
        gw.raw("192.0.2.2", &forged),
        Some(Refusal {
            resumed_budget: false,
            at_signature: true
        })
    );
    // A real full handshake from that source finds the bucket empty.
    let client = Client::new(V13, false);
    assert_eq!(
        gw.connect("192.0.2.2", &client, "localhost", None),
        refused_at_hello(false)
    );
}

#[test]
fn a_reload_changes_the_limits_and_keeps_the_buckets() {
    let gw = Gateway::new(Some(&slow(1, "")));
    let client = Client::new(V13, false);
    assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    assert_eq!(
        gw.connect("192.0.2.1", &client, "localhost", None),
        refused_at_hello(false)
    );
    // A bigger burst: the spent token stays spent, the two new ones are there.
    gw.reload(Some(&slow(3, "")));
    for _ in 0..2 {
        assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    }
    assert_eq!(
        gw.connect("192.0.2.1", &client, "localhost", None),
        refused_at_hello(false)
    );
    // Another table size starts a new table.
    gw.reload(Some(&slow(3, "tracked_sources = 2048")));
    assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    // No budget at all: nothing refused, nothing attached.
    gw.reload(None);
    assert!(!gw.budget.enabled());
    for _ in 0..5 {
        assert_eq!(gw.connect("192.0.2.1", &client, "localhost", None), Outcome::Full);
    }
    assert_eq!(gw.budget.evictions(), 0);
}

#[test]
fn a_source_and_its_prefix_share_a_bucket_through_handshakes() {
    let gw = Gateway::new(Some(&slow(1, "ipv4_prefix = 24")));
    let client = Client::new(V13, false);
    assert_eq!(gw.connect("198.51.100.1", &client, "localhost", None), Outcome::Full);
    assert_eq!(
        gw.connect("198.51.100.2", &client, "localhost", None),
        refused_at_hello(false)
    );
    assert_eq!(gw.connect("198.51.101.1", &client, "localhost", None), Outcome::Full);
}

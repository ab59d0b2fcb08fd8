//! Client certificates through the gateway's own contexts (a configuration file loaded and
//! validated, `TlsService::build`, `new_ssl`), handshakes run in memory: required, optional,
//! another CA, the alerts and failure reasons, the identity read after full and resumed
//! handshakes (session ID, node-local and through a shared store; TLS 1.2 and 1.3 tickets), and
//! no resumption where a session made without client certificates would skip asking for one.

use crate::client_auth::{lint, session_id_context, ClientIdentity};
use crate::failure::{received_alert, HandshakeFailure};
use crate::pki::{CertSpec, Certified, KeyKind};
use crate::session_cache::{RemoteLookup, RemoteSessions};
use crate::test_tls::Handshake;
use crate::{SessionState, TlsService};
use boring::pkey::PKey;
use boring::ssl::{
    Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslSession, SslSessionCacheMode, SslVerifyMode,
    SslVersion,
};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tlsgate_config::ClientAuthConfig;

/// The certificates of every test: a server CA and leaf, a client CA with two clients, and a
/// rogue CA with a client of its own.
struct Material {
    server_ca: Certified,
    server: Certified,
    client_ca: Certified,
    alice: Certified,
    odd: Certified,
    rogue: Certified,
}

static MATERIAL: LazyLock<Material> = LazyLock::new(|| {
    let ca = |name: &str| Certified::issue(&CertSpec::ca(name, KeyKind::EcdsaP256, 30), None).unwrap();
    let server_ca = ca("server CA");
    let server = Certified::issue(
        &CertSpec::leaf(&["localhost", "open.test"], KeyKind::EcdsaP256, 30),
        Some(&server_ca),
    )
    .unwrap();
    let client_ca = ca("client CA");
    let rogue_ca = ca("rogue CA");
    let client = |cn: &str, issuer: &Certified| {
        Certified::issue(&CertSpec::client(cn, KeyKind::EcdsaP256, 30), Some(issuer)).unwrap()
    };
    Material {
        alice: client("alice", &client_ca),
        odd: client("x,CN=admin \u{e9}\u{1}", &client_ca),
        rogue: client("alice", &rogue_ca),
        server_ca,
        server,
        client_ca,
    }
});

/// A gateway's TLS side from a configuration with a site `mtls` (localhost, `client_auth`
/// written as given) and a site `open` (open.test, no client certificates).
struct Gateway {
    _dir: tempfile::TempDir,
    service: TlsService,
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn config(dir: &Path, client_auth: &str, tls: &str) -> tlsgate_config::Config {
    let m = &*MATERIAL;
    write(dir, "server.pem", &m.server.cert_pem);
    write(dir, "server.key", &m.server.key_pem);
    write(dir, "client-ca.pem", &m.client_ca.cert_pem);
    let site = |name: &str, host: &str, extra: &str| {
        format!(
            "[[site]]\nname = \"{name}\"\nserver_names = [\"{host}\"]\n[[site.certificate]]\nchain = \"server.pem\"\n\
             key = \"server.key\"\n{extra}\n[[site.route]]\nfixed_response = {{ body = \"hi\" }}\n"
        )
    };
    let text = format!(
        "[tls]\n{tls}\n[[listener]]\nlisten = \"127.0.0.1:8443\"\n{}{}",
        site("mtls", "localhost", &format!("[site.client_auth]\n{client_auth}\n")),
        site("open", "open.test", "")
    );
    write(dir, "tlsgate.toml", &text);
    tlsgate_config::load(&dir.join("tlsgate.toml"))
        .expect("valid configuration")
        .config
}

impl Gateway {
    fn new(client_auth: &str) -> (Self, SessionState) {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), client_auth, "");
        let sessions = SessionState::new(&config.tls);
        let service = TlsService::build(&config, &sessions).expect("TLS contexts");
        (Self { _dir: dir, service }, sessions)
    }

    /// The same gateway reloaded with another `client_auth` table (the same session state).
    fn reloaded(sessions: &SessionState, client_auth: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), client_auth, "");
        let service = TlsService::build(&config, sessions).expect("TLS contexts");
        Self { _dir: dir, service }
    }

    /// One handshake with SNI `sni`, offering `session`.
    fn connect(&self, client: &Client, sni: &str, session: Option<&SslSession>) -> Handshake {
        let mut c = Ssl::new(&client.ctx).unwrap();
        c.set_hostname(sni).unwrap();
        if let Some(s) = session {
            crate::ffi::set_client_session(&mut c, s).unwrap();
        }
        let mut s = self.service.new_ssl().unwrap();
        // Certificate selection and the session lookup are asynchronous; both answer at once.
        s.set_task_waker(Some(std::task::Waker::noop().clone()));
        Handshake::between(c, s)
    }
}

/// A BoringSSL client trusting the server CA, presenting `cert` if given, keeping its sessions.
struct Client {
    ctx: SslContext,
    sessions: Arc<Mutex<Vec<SslSession>>>,
}

impl Client {
    fn new(version: SslVersion, cert: Option<&Certified>, no_ticket: bool) -> Self {
        let mut b = SslContextBuilder::new(SslMethod::tls()).unwrap();
        b.cert_store_mut().add_cert(MATERIAL.server_ca.certificate()).unwrap();
        b.set_verify(SslVerifyMode::PEER);
        b.set_min_proto_version(Some(version)).unwrap();
        b.set_max_proto_version(Some(version)).unwrap();
        if no_ticket {
            b.set_options(SslOptions::NO_TICKET);
        }
        if let Some(c) = cert {
            b.set_certificate(c.certificate()).unwrap();
            b.set_private_key(&PKey::private_key_from_pem(c.key_pem.as_bytes()).unwrap())
                .unwrap();
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

/// Both sides exchange a byte (TLS 1.3: the client reads its tickets); returns the server's
/// identity and whether the handshake resumed.
fn served(hs: Handshake) -> (Option<ClientIdentity>, bool) {
    let (Ok(mut client), Ok(mut server)) = (hs.client, hs.server) else {
        panic!("handshake failed");
    };
    let identity = ClientIdentity::of(server.ssl());
    let resumed = server.ssl().session_reused();
    server.write_all(b"x").unwrap();
    let mut byte = [0u8; 1];
    client.read_exact(&mut byte).unwrap();
    (identity, resumed)
}

/// The server's failure reason and the alert the client received (read after the handshake
/// when the client's side had finished: in TLS 1.3 it finishes before the server reads its
/// certificate).
fn refused(hs: Handshake) -> (HandshakeFailure, Option<u8>) {
    let server = hs.server.as_ref().expect_err("the server refused the handshake");
    let failure = HandshakeFailure::classify(Some(server.ssl()), server.error());
    let alert = match hs.client {
        Err(mid) => mid.error().ssl_error().and_then(received_alert),
        Ok(mut stream) => {
            let mut byte = [0u8; 1];
            stream
                .ssl_read(&mut byte)
                .err()
                .and_then(|e| e.ssl_error().and_then(received_alert))
        }
    };
    (failure, alert)
}

fn alice() -> ClientIdentity {
    ClientIdentity::from_certificate(MATERIAL.alice.certificate())
}

#[test]
fn required_refuses_no_certificate_and_another_cas_with_the_right_alerts() {
    let (gw, _) = Gateway::new("mode = \"required\"\nca = \"client-ca.pem\"\n");
    let none13 = refused(gw.connect(&Client::new(V13, None, false), "localhost", None));
    assert_eq!(
        none13,
        (
            HandshakeFailure::ClientCertMissing,
            Some(boring_sys::SSL_AD_CERTIFICATE_REQUIRED as u8)
        )
    );
    let none12 = refused(gw.connect(&Client::new(V12, None, false), "localhost", None));
    assert_eq!(
        none12,
        (
            HandshakeFailure::ClientCertMissing,
            Some(boring_sys::SSL_AD_HANDSHAKE_FAILURE as u8)
        )
    );
    for version in [V12, V13] {
        let rogue = Client::new(version, Some(&MATERIAL.rogue), false);
        let (failure, alert) = refused(gw.connect(&rogue, "localhost", None));
        assert_eq!(failure, HandshakeFailure::ClientCertInvalid, "{version:?}");
        assert_eq!(alert, Some(boring_sys::SSL_AD_UNKNOWN_CA as u8), "{version:?}");
    }
    assert_eq!(HandshakeFailure::ClientCertMissing.label(), "client_cert_missing");
    assert_eq!(HandshakeFailure::ClientCertInvalid.label(), "client_cert_invalid");
    // The other site of the same gateway asks for nothing.
    let (identity, _) = served(gw.connect(&Client::new(V13, None, false), "open.test", None));
    assert_eq!(identity, None);
}

#[test]
fn a_verified_certificate_is_the_identity() {
    let (gw, _) = Gateway::new("mode = \"required\"\nca = \"client-ca.pem\"\n");
    for version in [V12, V13] {
        let client = Client::new(version, Some(&MATERIAL.alice), false);
        let (identity, _) = served(gw.connect(&client, "localhost", None));
        let identity = identity.expect("an identity");
        assert_eq!(identity.subject, "O=tlsgate,CN=alice");
        assert_eq!(identity.sha256.len(), 64);
        assert!(identity
            .sha256
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(identity, alice());
    }
    // A certificate on a site that does not ask is never read as an identity.
    let client = Client::new(V13, Some(&MATERIAL.alice), false);
    let (identity, _) = served(gw.connect(&client, "open.test", None));
    assert_eq!(identity, None);
}

#[test]
fn optional_serves_without_a_certificate_but_refuses_a_bad_one() {
    let (gw, _) = Gateway::new("mode = \"optional\"\nca = \"client-ca.pem\"\n");
    for version in [V12, V13] {
        let (identity, _) = served(gw.connect(&Client::new(version, None, false), "localhost", None));
        assert_eq!(identity, None, "{version:?}");
        let good = Client::new(version, Some(&MATERIAL.alice), false);
        assert_eq!(served(gw.connect(&good, "localhost", None)).0, Some(alice()));
        let rogue = Client::new(version, Some(&MATERIAL.rogue), false);
        let (failure, _) = refused(gw.connect(&rogue, "localhost", None));
        assert_eq!(failure, HandshakeFailure::ClientCertInvalid, "{version:?}");
    }
}

#[test]
fn subjects_are_escaped_printable_ascii() {
    let identity = ClientIdentity::from_certificate(MATERIAL.odd.certificate());
    assert_eq!(identity.subject, r"O=tlsgate,CN=x\,CN=admin \C3\A9\01");
    assert!(identity.subject.bytes().all(|b| (0x20..0x7f).contains(&b)));
}

#[test]
fn resumption_keeps_the_identity() {
    let (gw, _) = Gateway::new("mode = \"required\"\nca = \"client-ca.pem\"\n");
    for (version, no_ticket) in [(V12, true), (V12, false), (V13, false)] {
        let client = Client::new(version, Some(&MATERIAL.alice), no_ticket);
        let (first, resumed) = served(gw.connect(&client, "localhost", None));
        assert!(!resumed);
        let (again, resumed) = served(gw.connect(&client, "localhost", Some(&client.last_session())));
        assert!(resumed, "{version:?} no_ticket={no_ticket}");
        assert_eq!(again, first, "{version:?} no_ticket={no_ticket}");
        assert_eq!(again, Some(alice()));
    }
}

/// A shared session store holding what it was given (the cluster store's part).
#[derive(Debug, Default)]
struct Shared(Mutex<Vec<(Vec<u8>, Vec<u8>)>>);

impl RemoteSessions for Shared {
    fn fetch(&self, id: &[u8]) -> Option<RemoteLookup> {
        let der = self
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|(k, _)| k == id)
            .map(|(_, v)| v.clone());
        Some(Box::pin(std::future::ready(der)))
    }
    fn store(&self, id: &[u8], der: &[u8], _ttl: Duration) {
        self.0.lock().unwrap().push((id.to_vec(), der.to_vec()));
    }
}

#[test]
fn a_session_from_the_shared_store_carries_the_identity() {
    let table = "mode = \"required\"\nca = \"client-ca.pem\"\n";
    let shared = Arc::new(Shared::default());
    let (a, sessions_a) = Gateway::new(table);
    let (b, sessions_b) = Gateway::new(table);
    sessions_a.cache.set_remote(shared.clone());
    sessions_b.cache.set_remote(shared.clone());
    let client = Client::new(V12, Some(&MATERIAL.alice), true);
    served(a.connect(&client, "localhost", None));
    // What the store holds is the session's DER: it keeps the client's certificate.
    let (_, der) = shared.0.lock().unwrap()[0].clone();
    let leaf = MATERIAL.alice.certificate().to_der().unwrap();
    assert!(
        der.windows(leaf.len()).any(|w| w == leaf.as_slice()),
        "the certificate was stripped"
    );
    let (identity, resumed) = served(b.connect(&client, "localhost", Some(&client.last_session())));
    assert!(resumed, "node B resumed node A's session through the store");
    assert_eq!(identity, Some(alice()));
    assert_eq!(
        sessions_b
            .cache
            .stats
            .remote_hits
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[test]
fn sessions_made_without_client_certificates_never_resume_where_one_is_required() {
    for (version, no_ticket) in [(V12, true), (V12, false), (V13, false)] {
        let what = format!("{version:?} no_ticket={no_ticket}");
        let (off, sessions) = Gateway::new("mode = \"off\"\n");
        let anonymous = Client::new(version, None, no_ticket);
        let with_cert = Client::new(version, Some(&MATERIAL.alice), no_ticket);
        // Another site of the same gateway.
        let (gw, other_sessions) = Gateway::new("mode = \"required\"\nca = \"client-ca.pem\"\n");
        served(gw.connect(&anonymous, "open.test", None));
        let from_open = anonymous.last_session();
        let (failure, _) = refused(gw.connect(&anonymous, "localhost", Some(&from_open)));
        assert_eq!(
            failure,
            HandshakeFailure::ClientCertMissing,
            "{what}: resumed another site's session"
        );
        drop(other_sessions);
        // The same site before client certificates were required (a reload, same session state).
        served(off.connect(&anonymous, "localhost", None));
        let before = anonymous.last_session();
        let required = Gateway::reloaded(&sessions, "mode = \"required\"\nca = \"client-ca.pem\"\n");
        let (failure, _) = refused(required.connect(&anonymous, "localhost", Some(&before)));
        assert_eq!(
            failure,
            HandshakeFailure::ClientCertMissing,
            "{what}: resumed past the requirement"
        );
        // A client with a certificate offering such a session gets a full handshake.
        served(off.connect(&with_cert, "localhost", None));
        let (identity, resumed) = served(required.connect(&with_cert, "localhost", Some(&with_cert.last_session())));
        assert!(!resumed, "{what}");
        assert_eq!(identity, Some(alice()), "{what}");
        // Optional → required: a session without a certificate is not resumed either.
        let optional = Gateway::reloaded(&sessions, "mode = \"optional\"\nca = \"client-ca.pem\"\n");
        served(optional.connect(&anonymous, "localhost", None));
        let (failure, _) = refused(required.connect(&anonymous, "localhost", Some(&anonymous.last_session())));
        assert_eq!(
            failure,
            HandshakeFailure::ClientCertMissing,
            "{what}: optional session on required"
        );
    }
}

#[test]
fn session_id_contexts_follow_the_settings() {
    let m = &*MATERIAL;
    let cas = [m.client_ca.certificate().to_owned()];
    let other = [m.server_ca.certificate().to_owned()];
    let table = |mode: &str| -> ClientAuthConfig {
        let text = format!(
            "[[site]]\nname = \"s\"\nserver_names = [\"s\"]\ncertificate = []\n[site.client_auth]\nmode = \"{mode}\"\n"
        );
        tlsgate_config::parse(&text).unwrap().sites[0]
            .client_auth
            .clone()
            .unwrap()
    };
    let required = session_id_context("mtls", &table("required"), &cas);
    assert_eq!(&required[..8], b"tlsgate:");
    assert_eq!(
        required,
        session_id_context("mtls", &table("required"), &cas),
        "the same on every node"
    );
    assert_ne!(required, session_id_context("mtls", &table("optional"), &cas));
    assert_ne!(required, session_id_context("other", &table("required"), &cas));
    assert_ne!(required, session_id_context("mtls", &table("required"), &other));
    let mut deeper = table("required");
    deeper.verify_depth = 2;
    assert_ne!(required, session_id_context("mtls", &deeper, &cas));
}

#[test]
fn check_names_an_unloadable_or_non_ca_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[[site]]\nname = \"s\"\nserver_names = [\"s\"]\ncertificate = []\n[site.client_auth]\nmode = \"required\"\nca = \"ca.pem\"\n";
    let mut config = tlsgate_config::parse(text).unwrap();
    tlsgate_config::resolve_paths(&mut config, dir.path());
    let findings =
        |config: &tlsgate_config::Config| -> Vec<String> { lint(config).iter().map(|i| i.to_string()).collect() };
    let unreadable = findings(&config);
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert!(
        unreadable[0].starts_with("error: site[0].client_auth.ca: "),
        "{unreadable:?}"
    );
    write(dir.path(), "ca.pem", "not PEM at all\n");
    let garbage = findings(&config);
    assert_eq!(garbage.len(), 1, "{garbage:?}");
    assert!(garbage[0].starts_with("error: site[0].client_auth.ca: "), "{garbage:?}");
    assert!(garbage[0].ends_with("ca.pem: no certificate in file"), "{garbage:?}");
    write(
        dir.path(),
        "ca.pem",
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
    );
    let broken = findings(&config);
    assert!(
        broken.len() == 1 && broken[0].contains("not a PEM certificate bundle"),
        "{broken:?}"
    );
    write(
        dir.path(),
        "ca.pem",
        &format!("{}{}", MATERIAL.client_ca.cert_pem, MATERIAL.alice.cert_pem),
    );
    let leaf = findings(&config);
    assert_eq!(leaf.len(), 1, "{leaf:?}");
    assert!(
        leaf[0].starts_with("warning: site[0].client_auth.ca: ")
            && leaf[0].contains("certificate 1 (O=tlsgate,CN=alice) is not a CA"),
        "{leaf:?}"
    );
    write(dir.path(), "ca.pem", &MATERIAL.client_ca.cert_pem);
    assert_eq!(findings(&config), Vec::<String>::new());
}

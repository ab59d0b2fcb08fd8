//! The client: plain BoringSSL, trusting the test CA, with the versions, signature algorithms,
//! suites and ALPN a test asks for, keeping every session the server hands it.

use super::server::material;
use boring::ssl::{SslConnector, SslMethod, SslOptions, SslSession, SslSessionCacheMode, SslVersion};
use boring::x509::X509;
use std::sync::{Arc, Mutex};

/// How the client is built.
#[derive(Clone)]
pub struct ClientOpts {
    pub min: SslVersion,
    pub max: SslVersion,
    /// Offered signature algorithms (BoringSSL syntax); None: BoringSSL's defaults.
    pub sigalgs: Option<&'static str>,
    /// TLS 1.2 cipher list; None: BoringSSL's defaults.
    pub ciphers: Option<&'static str>,
    pub alpn: &'static [&'static str],
    /// Refuse tickets (TLS 1.2: resume by session ID).
    pub no_ticket: bool,
}

impl ClientOpts {
    pub fn tls12() -> Self {
        Self {
            min: SslVersion::TLS1_2,
            max: SslVersion::TLS1_2,
            sigalgs: None,
            ciphers: None,
            alpn: &["h2", "http/1.1"],
            no_ticket: false,
        }
    }

    pub fn tls13() -> Self {
        Self {
            min: SslVersion::TLS1_3,
            max: SslVersion::TLS1_3,
            ..Self::tls12()
        }
    }
}

/// A BoringSSL client trusting the test CA, keeping every session the server hands it.
pub struct Client {
    pub(super) connector: SslConnector,
    sessions: Arc<Mutex<Vec<SslSession>>>,
}

impl Client {
    pub fn new(opts: ClientOpts) -> Self {
        let mut b = SslConnector::builder(SslMethod::tls()).expect("client context");
        let ca = X509::from_pem(material().ca_pem.as_bytes()).expect("CA");
        b.cert_store_mut().add_cert(ca).expect("trust the CA");
        b.set_min_proto_version(Some(opts.min)).expect("min version");
        b.set_max_proto_version(Some(opts.max)).expect("max version");
        if let Some(s) = opts.sigalgs {
            b.set_sigalgs_list(s).expect("sigalgs");
        }
        if let Some(c) = opts.ciphers {
            b.set_cipher_list(c).expect("ciphers");
        }
        let mut alpn = Vec::new();
        for p in opts.alpn {
            alpn.push(u8::try_from(p.len()).expect("short ALPN name"));
            alpn.extend_from_slice(p.as_bytes());
        }
        b.set_alpn_protos(&alpn).expect("ALPN");
        if opts.no_ticket {
            b.set_options(SslOptions::NO_TICKET);
        }
        let sessions: Arc<Mutex<Vec<SslSession>>> = Arc::default();
        let store = sessions.clone();
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        b.set_new_session_callback(move |_ssl, session| store.lock().expect("session list").push(session));
        Self {
            connector: b.build(),
            sessions,
        }
    }

    /// The newest session the server issued (a ticket, or a session ID), if any.
    pub fn last_session(&self) -> Option<SslSession> {
        self.sessions.lock().expect("session list").last().cloned()
    }

    /// How many sessions (TLS 1.3: tickets) the server has issued so far.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().expect("session list").len()
    }
}

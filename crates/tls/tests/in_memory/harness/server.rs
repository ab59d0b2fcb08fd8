//! The gateway's server side: certificates and staples generated once, a `tlsgate.toml`
//! written to a tempdir and loaded with the gateway's own loader, and the contexts built from it
//! exactly as the gateway builds them (`SessionState::new`, `TlsService::build`).

use std::path::Path;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};
use tlsgate_tls::pki::{self, OcspStatus};
use tlsgate_tls::{SessionState, TlsService};

/// Certificates and staples, generated once for the whole test binary.
pub struct Material {
    pub ca_pem: String,
    pub ecdsa_cert: String,
    pub ecdsa_key: String,
    pub rsa_cert: String,
    pub rsa_key: String,
    /// A good OCSP response for the ECDSA leaf (valid for an hour).
    pub staple_good: Vec<u8>,
    /// A good response whose nextUpdate has passed.
    pub staple_stale: Vec<u8>,
    /// A response saying the ECDSA leaf is revoked.
    pub staple_revoked: Vec<u8>,
}

static MATERIAL: LazyLock<Material> = LazyLock::new(|| {
    let demo = pki::demo_pki().expect("demo PKI");
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let staple_good = pki::ocsp_response(
        &demo.ecdsa.cert_pem,
        &demo.ca,
        OcspStatus::Good,
        now - Duration::from_secs(60),
        Some(now + hour),
    )
    .expect("OCSP response");
    let staple_stale = pki::ocsp_response(
        &demo.ecdsa.cert_pem,
        &demo.ca,
        OcspStatus::Good,
        now - 3 * hour,
        Some(now - hour),
    )
    .expect("OCSP response");
    let staple_revoked = pki::ocsp_response(
        &demo.ecdsa.cert_pem,
        &demo.ca,
        OcspStatus::Revoked,
        now - Duration::from_secs(60),
        Some(now + hour),
    )
    .expect("OCSP response");
    Material {
        ca_pem: demo.ca.cert_pem.clone(),
        ecdsa_cert: demo.ecdsa.cert_pem.clone(),
        ecdsa_key: demo.ecdsa.key_pem.clone(),
        rsa_cert: demo.rsa.cert_pem.clone(),
        rsa_key: demo.rsa.key_pem.clone(),
        staple_good,
        staple_stale,
        staple_revoked,
    }
});

pub fn material() -> &'static Material {
    &MATERIAL
}

/// Which certificates the site serves and how.
#[derive(Clone, Copy)]
pub struct Site {
    pub ecdsa: bool,
    pub rsa: bool,
    /// An `ocsp_file` for the ECDSA certificate.
    pub ecdsa_staple: Option<&'static [u8]>,
}

impl Default for Site {
    fn default() -> Self {
        Self {
            ecdsa: true,
            rsa: true,
            ecdsa_staple: None,
        }
    }
}

/// The gateway's TLS side: one configuration generation plus the state that outlives reloads.
pub struct Gateway {
    dir: tempfile::TempDir,
    site: Site,
    pub sessions: SessionState,
    pub service: TlsService,
}

impl Gateway {
    /// A gateway whose `[tls]` table holds `tls` (TOML, may end with `[tls.*]` sub-tables),
    /// serving ECDSA and RSA certificates for `localhost`.
    pub fn new(tls: &str) -> Self {
        Self::with_site(tls, Site::default())
    }

    pub fn with_site(tls: &str, site: Site) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = material();
        // Leaf then CA: the chain names the issuer, which OCSP stapling needs.
        write(
            dir.path(),
            "ecdsa.pem",
            format!("{}{}", m.ecdsa_cert, m.ca_pem).as_bytes(),
        );
        write(dir.path(), "ecdsa.key", m.ecdsa_key.as_bytes());
        write(dir.path(), "rsa.pem", format!("{}{}", m.rsa_cert, m.ca_pem).as_bytes());
        write(dir.path(), "rsa.key", m.rsa_key.as_bytes());
        if let Some(der) = site.ecdsa_staple {
            write(dir.path(), "staple.der", der);
        }
        let config = load_config(dir.path(), tls, site);
        let sessions = SessionState::new(&config.tls);
        let service = TlsService::build(&config, &sessions).expect("TLS contexts");
        Self {
            dir,
            site,
            sessions,
            service,
        }
    }

    /// Installs a new configuration generation the way the gateway reloads: new contexts over
    /// the same session state (session cache, ticket keys, staples, 0-RTT claims).
    pub fn reload(&mut self, tls: &str) {
        let config = load_config(self.dir.path(), tls, self.site);
        self.service = TlsService::build(&config, &self.sessions).expect("TLS contexts");
        self.sessions.reconfigure(&config.tls);
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("write test file");
}

/// Writes `tlsgate.toml` and loads it with the gateway's own loader (parse, resolve, validate).
fn load_config(dir: &Path, tls: &str, site: Site) -> tlsgate_config::Config {
    let mut certs = String::new();
    if site.ecdsa {
        certs.push_str("[[site.certificate]]\nchain = \"ecdsa.pem\"\nkey = \"ecdsa.key\"\n");
        if site.ecdsa_staple.is_some() {
            certs.push_str("ocsp_file = \"staple.der\"\n");
        }
    }
    if site.rsa {
        certs.push_str("[[site.certificate]]\nchain = \"rsa.pem\"\nkey = \"rsa.key\"\n");
    }
    let text = format!(
        "[tls]\n{tls}\n\n[[listener]]\nlisten = \"127.0.0.1:8443\"\n\n[[site]]\nname = \"main\"\n\
server_names = [\"localhost\"]\ndefault = true\n{certs}[[site.route]]\nfixed_response = {{ body = \"hi\" }}\n"
    );
    let path = dir.join("tlsgate.toml");
    write(dir, "tlsgate.toml", text.as_bytes());
    tlsgate_config::load(&path).expect("valid configuration").config
}

//! Test fixtures shared by tlsgate's integration tests: every test starts the real processes it
//! needs on free loopback ports and stops them when the fixture is dropped.
//!
//! - [`free_port`]: a port nobody listens on; [`listening`]: whether a server listens on one
//!   (the readiness check every fixture uses).
//! - [`TestPki`]: a CA and ECDSA/RSA leaves written to a temporary directory; ML-DSA chains
//!   ([`mldsa`]).
//! - [`GatewayProcess`]: a real `tlsgate serve` process with helpers for metrics and signals.
//! - [`Origin`]: an HTTP/1.1 origin server on a real socket (echo, slow, streaming, sized bodies).
//! - [`RawOrigin`]: an origin that records the exact bytes it receives (smuggling, headers);
//!   [`hints::hinting_origin`]: one that sends 103 Early Hints before every response.
//! - [`stores::StoreProcess`]: redis-server, a Redis Sentinel or memcached on a free port.
//! - [`RoundRobin`]: a layer-4 round-robin balancer in front of several gateways.
//! - [`run`]: run a client command (`openssl s_client`, `curl`) with a timeout and stdin.
#![forbid(unsafe_code)]

pub mod balancer;
pub mod go;
pub mod hints;
pub mod mldsa;
pub mod nginx;
pub mod origin;
pub mod process;
pub mod python;
pub mod raw_origin;
pub mod scripted;
pub mod stores;

pub use balancer::RoundRobin;
pub use origin::Origin;
pub use process::{run, GatewayProcess, Output, StartError};
pub use raw_origin::RawOrigin;
pub use scripted::scripted_origin;
pub use stores::StoreProcess;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use tlsgate_tls::pki::{CertSpec, Certified, KeyKind};

/// A TCP port on 127.0.0.1 that was free a moment ago, and never handed out before by this
/// process (the kernel may give the same ephemeral port to two binds in a row, which made a
/// gateway's HTTPS and admin ports collide).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind an ephemeral port");
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// True when a server accepts TCP connections on 127.0.0.1:`port`. A connection that is its
/// own peer does not count: a connect to a port of the ephemeral range that nobody listens on
/// can be given that very port as its source and then "succeeds" as a TCP simultaneous open
/// with itself (and holds the port, so the server about to listen there fails to bind). Every
/// readiness loop of the fixtures and tests goes through here.
pub fn listening(port: u16) -> bool {
    match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => match (s.local_addr(), s.peer_addr()) {
            (Ok(local), Ok(peer)) => local != peer,
            _ => false,
        },
        Err(_) => false,
    }
}

/// A throwaway CA with ECDSA and RSA leaves, as files in a temporary directory.
pub struct TestPki {
    /// The directory holding every file (removed on drop).
    pub dir: tempfile::TempDir,
    /// The CA.
    pub ca: Certified,
}

impl TestPki {
    /// A new CA in a new temporary directory.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = Certified::issue(&CertSpec::ca("tlsgate test CA", KeyKind::EcdsaP256, 3650), None).expect("CA");
        std::fs::write(dir.path().join("ca.pem"), &ca.cert_pem).expect("write CA");
        Self { dir, ca }
    }

    /// A new CA named `common_name` (instead of `tlsgate test CA`) in a new temporary directory.
    pub fn with_ca_name(common_name: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = Certified::issue(&CertSpec::ca(common_name, KeyKind::EcdsaP256, 3650), None).expect("CA");
        std::fs::write(dir.path().join("ca.pem"), &ca.cert_pem).expect("write CA");
        Self { dir, ca }
    }

    /// Path of a file in the PKI directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// Issues a leaf for `names` and writes `<stem>.pem` (leaf only) and `<stem>.key`.
    pub fn leaf(&self, stem: &str, names: &[&str], key: KeyKind) -> (PathBuf, PathBuf) {
        self.leaf_with(stem, &CertSpec::leaf(names, key, 365))
    }

    /// Issues a leaf from a full spec (custom validity, key).
    pub fn leaf_with(&self, stem: &str, spec: &CertSpec) -> (PathBuf, PathBuf) {
        let leaf = Certified::issue(spec, Some(&self.ca)).expect("leaf");
        self.write_pair(stem, &leaf.cert_pem, &leaf.key_pem)
    }

    /// Issues a client certificate (extended key usage `clientAuth`; subject `CN=<cn>, O=tlsgate`)
    /// from this PKI's CA and writes `<stem>.pem` and `<stem>.key` (mutual TLS).
    pub fn client(&self, stem: &str, cn: &str) -> (PathBuf, PathBuf) {
        self.leaf_with(stem, &CertSpec::client(cn, KeyKind::EcdsaP256, 365))
    }

    /// Writes a chain file and a key file.
    pub fn write_pair(&self, stem: &str, chain_pem: &str, key_pem: &str) -> (PathBuf, PathBuf) {
        let chain = self.path(&format!("{stem}.pem"));
        let key = self.path(&format!("{stem}.key"));
        std::fs::write(&chain, chain_pem).expect("write chain");
        write_private(&key, key_pem);
        (chain, key)
    }

    /// Writes arbitrary text into the PKI directory.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write file");
        p
    }
}

/// Writes a private key readable by its owner only (as an operator would; `tlsgate check` warns
/// about keys every user can read).
pub fn write_private(path: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .expect("open key file");
    f.write_all(text.as_bytes()).expect("write key");
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

/// Quotes a path for a TOML string.
pub fn toml_path(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// Whether an external program is installed (tests that need it fail loudly when it is not:
/// `.ci/run` installs everything).
pub fn require(program: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{program} is not installed; run .ci/run (it installs the test dependencies)"
    );
}

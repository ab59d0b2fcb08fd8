//! Shared helpers for the end-to-end tests: a site with ECDSA and RSA certificates and a
//! gateway started on free ports.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;
use tlsgate_testkit::{free_port, toml_path, GatewayProcess, TestPki};
use tlsgate_tls::pki::KeyKind;

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tlsgate"))
}

/// A gateway with one site (`localhost`, ECDSA + RSA), a fixed `/hello` route and whatever
/// `extra` TOML adds (appended at the end; may add routes, upstreams, sections).
pub struct Fixture {
    pub pki: TestPki,
    pub https: u16,
    pub admin: u16,
    pub gw: GatewayProcess,
}

pub fn site_certs(pki: &TestPki) -> String {
    let (ec, ec_key) = pki.leaf("ecdsa", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let (rsa, rsa_key) = pki.leaf("rsa", &["localhost", "127.0.0.1"], KeyKind::Rsa(2048));
    format!(
        "[[site.certificate]]\nchain = {}\nkey = {}\n\n[[site.certificate]]\nchain = {}\nkey = {}\n",
        toml_path(&ec),
        toml_path(&ec_key),
        toml_path(&rsa),
        toml_path(&rsa_key)
    )
}

/// The configuration text of [`start`].
pub fn config_text(pki: &TestPki, https: u16, admin: u16, top: &str, routes: &str) -> String {
    format!(
        r#"{top}
[admin]
listen = "127.0.0.1:{admin}"

[server]
workers = 2

[[listener]]
listen = "127.0.0.1:{https}"

[[site]]
name = "main"
server_names = ["localhost", "127.0.0.1"]
default = true
{certs}
[[site.route]]
path_prefix = "/hello"
fixed_response = {{ body = "Hello, world!" }}
{routes}
"#,
        certs = site_certs(pki)
    )
}

/// Starts a gateway; `top` goes before every table (e.g. `[tls]` settings), `routes` after the
/// site's fixed route (more `[[site.route]]`, `[[upstream]]`, more `[[site]]`s).
pub fn start(top: &str, routes: &str) -> Fixture {
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let gw = GatewayProcess::start(binary(), &config_text(&pki, https, admin, top, routes), admin, &[https]);
    Fixture { pki, https, admin, gw }
}

impl Fixture {
    pub fn connect(&self) -> String {
        format!("127.0.0.1:{}", self.https)
    }

    /// `openssl s_client` against the gateway with extra args; sends `stdin` then holds it open.
    pub fn s_client(&self, args: &[&str], stdin: &str) -> tlsgate_testkit::Output {
        let connect = self.connect();
        let ca = self.pki.ca_file();
        let mut all = vec!["s_client", "-connect", &connect, "-CAfile", ca.to_str().unwrap()];
        all.extend_from_slice(args);
        tlsgate_testkit::run(
            "openssl",
            &all,
            stdin.as_bytes(),
            Duration::from_millis(700),
            Duration::from_secs(15),
        )
    }

    /// curl against the gateway (`-sS`, the test CA, the URL path appended to https://localhost:PORT).
    pub fn curl(&self, args: &[&str], path: &str) -> tlsgate_testkit::Output {
        let url = format!("https://localhost:{}{}", self.https, path);
        let ca = self.pki.ca_file();
        let mut all = vec!["-sS", "--max-time", "10", "--cacert", ca.to_str().unwrap()];
        all.extend_from_slice(args);
        all.push(&url);
        tlsgate_testkit::run("curl", &all, b"", Duration::ZERO, Duration::from_secs(15))
    }
}

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
    config_with_certs(&site_certs(pki), https, admin, top, routes)
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
        s_client_at(&self.connect(), &self.pki.ca_file(), args, stdin)
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

/// `[[site]]` TOML for another site: `name` answers `server_names` with one certificate per
/// entry of `kinds` (leaves for `server_names`, issued by the fixture's CA, files `<name>-<i>.*`)
/// and a fixed route for every path answering `site <name>`.
pub fn extra_site(pki: &TestPki, name: &str, server_names: &[&str], kinds: &[KeyKind]) -> String {
    let mut text = format!("\n[[site]]\nname = \"{name}\"\nserver_names = {server_names:?}\n");
    for (i, kind) in kinds.iter().enumerate() {
        let (chain, key) = pki.leaf(&format!("{name}-{i}"), server_names, *kind);
        text.push_str(&format!(
            "\n[[site.certificate]]\nchain = {}\nkey = {}\n",
            toml_path(&chain),
            toml_path(&key)
        ));
    }
    text.push_str(&format!(
        "\n[[site.route]]\npath_prefix = \"/\"\nfixed_response = {{ body = \"site {name}\" }}\n"
    ));
    text
}

/// Like [`start`], with `routes` written from the fixture's PKI (to issue certificates for more
/// sites, see [`extra_site`]).
pub fn start_with(top: &str, routes: impl FnOnce(&TestPki) -> String) -> Fixture {
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let routes = routes(&pki);
    let gw = GatewayProcess::start(
        binary(),
        &config_text(&pki, https, admin, top, &routes),
        admin,
        &[https],
    );
    Fixture { pki, https, admin, gw }
}

/// Polls `check` every 50 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `subject=` line of `openssl s_client` output (the served leaf), or "" if none.
pub fn served_subject(s_client_stdout: &str) -> String {
    s_client_stdout
        .lines()
        .find_map(|l| l.strip_prefix("subject="))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The session lines of `openssl s_client` output (`New, TLSv1.3, ...` / `Reused, TLSv1.2, ...`),
/// one per connection that completed its handshake (more than one with `-reconnect`).
pub fn session_lines(s_client_stdout: &str) -> Vec<String> {
    s_client_stdout
        .lines()
        .filter(|l| l.starts_with("New, TLS") || l.starts_with("Reused, TLS"))
        .map(str::to_string)
        .collect()
}

impl Fixture {
    /// curl against `https://HOST:PORT/path`, with HOST resolved to 127.0.0.1 (so SNI and Host are
    /// HOST and the certificate is verified for it).
    pub fn curl_host(&self, host: &str, args: &[&str], path: &str) -> tlsgate_testkit::Output {
        let url = format!("https://{host}:{}{}", self.https, path);
        let resolve = format!("{host}:{}:127.0.0.1", self.https);
        let ca = self.pki.ca_file();
        let mut all = vec![
            "-sS",
            "--max-time",
            "10",
            "--cacert",
            ca.to_str().unwrap(),
            "--resolve",
            &resolve,
        ];
        all.extend_from_slice(args);
        all.push(&url);
        tlsgate_testkit::run("curl", &all, b"", Duration::ZERO, Duration::from_secs(15))
    }
}

// ---- Helpers for proxy.rs, operations.rs and check.rs ----

/// A `[[site.certificate]]` block for one chain file and key file.
pub fn cert_block(chain: &Path, key: &Path) -> String {
    format!(
        "[[site.certificate]]\nchain = {}\nkey = {}\n",
        toml_path(chain),
        toml_path(key)
    )
}

/// The `[[site.certificate]]` blocks of the ECDSA and RSA files that [`site_certs`] already wrote
/// (no new certificates are issued).
pub fn existing_site_certs(pki: &TestPki) -> String {
    format!(
        "{}\n{}",
        cert_block(&pki.path("ecdsa.pem"), &pki.path("ecdsa.key")),
        cert_block(&pki.path("rsa.pem"), &pki.path("rsa.key"))
    )
}

/// [`config_text`] with the given `[[site.certificate]]` blocks instead of fresh ones.
pub fn config_with_certs(certs: &str, https: u16, admin: u16, top: &str, routes: &str) -> String {
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
"#
    )
}

/// Like [`start`], with `edit` applied to the whole configuration text first (for settings in
/// tables the template already has, such as `[server]` or `[admin]`).
pub fn start_edited(top: &str, routes: &str, edit: impl FnOnce(String) -> String) -> Fixture {
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let text = edit(config_text(&pki, https, admin, top, routes));
    let gw = GatewayProcess::start(binary(), &text, admin, &[https]);
    Fixture { pki, https, admin, gw }
}

/// `[[upstream]]` TOML: `name` with `servers`, plus `extra` lines (`balance = ...`, timeouts).
pub fn upstream(name: &str, servers: &[String], extra: &str) -> String {
    format!("\n[[upstream]]\nname = \"{name}\"\nservers = {servers:?}\n{extra}\n")
}

/// `[[site.route]]` TOML forwarding `path_prefix` (and `host`, when given) to `upstream`.
pub fn upstream_route(host: Option<&str>, path_prefix: &str, upstream: &str) -> String {
    let host = host.map_or(String::new(), |h| format!("host = \"{h}\"\n"));
    format!("\n[[site.route]]\n{host}path_prefix = \"{path_prefix}\"\nupstream = \"{upstream}\"\n")
}

/// curl with the given CA and arguments against a full URL (`-sS`, 10 s limit); usable from
/// threads that cannot borrow a [`Fixture`].
pub fn curl_url(ca: &Path, args: &[&str], url: &str) -> tlsgate_testkit::Output {
    let mut all = vec!["-sS", "--max-time", "10", "--cacert", ca.to_str().unwrap()];
    all.extend_from_slice(args);
    all.push(url);
    tlsgate_testkit::run("curl", &all, b"", Duration::ZERO, Duration::from_secs(15))
}

/// Runs the `tlsgate` binary with `args` (e.g. `check`, `reload`).
pub fn tlsgate(args: &[&str]) -> tlsgate_testkit::Output {
    tlsgate_testkit::run(
        binary().to_str().unwrap(),
        args,
        b"",
        Duration::ZERO,
        Duration::from_secs(60),
    )
}

impl Fixture {
    /// `https://localhost:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{}", self.https, path)
    }

    /// This fixture's configuration text with `top` and `routes`, reusing its certificate files.
    pub fn config_again(&self, top: &str, routes: &str) -> String {
        config_with_certs(&existing_site_certs(&self.pki), self.https, self.admin, top, routes)
    }

    /// Overwrites the configuration file the gateway runs with.
    pub fn write_config(&self, text: &str) {
        std::fs::write(&self.gw.config, text).expect("write config");
    }

    /// A long-lived TLS connection (`openssl s_client -quiet`) to the gateway.
    pub fn tls_session(&self) -> TlsSession {
        TlsSession::open(&self.connect(), &self.pki.ca_file())
    }
}

/// One TLS connection held open by an `openssl s_client -quiet` process: write requests to it
/// and read the responses, all on the same connection. Killed on drop.
pub struct TlsSession {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl TlsSession {
    /// Connects to `connect` (`host:port`) with SNI `localhost`, verifying against `ca`.
    pub fn open(connect: &str, ca: &Path) -> Self {
        use std::io::Read;
        use std::process::{Command, Stdio};
        let mut child = Command::new("openssl")
            .args(["s_client", "-quiet", "-connect", connect, "-servername", "localhost"])
            .arg("-CAfile")
            .arg(ca)
            .args(["-verify_return_error", "-alpn", "http/1.1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start openssl s_client");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 16 * 1024];
            while let Ok(n) = stdout.read(&mut chunk) {
                if n == 0 || tx.send(chunk[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            stdin,
            rx,
            buf: Vec::new(),
        }
    }

    /// Writes raw bytes (e.g. an HTTP/1.1 request) to the connection.
    pub fn send(&mut self, text: &str) {
        use std::io::Write;
        self.stdin.write_all(text.as_bytes()).expect("write to s_client");
        self.stdin.flush().expect("flush s_client");
    }

    /// Reads until `needle` has arrived (or `timeout` passes); returns everything read up to and
    /// including it (the rest stays buffered), or everything read so far on timeout.
    pub fn read_until(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let text = String::from_utf8_lossy(&self.buf).into_owned();
            if let Some(at) = text.find(needle) {
                let end = at + needle.len();
                let out = text[..end].to_string();
                self.buf = text.as_bytes()[end..].to_vec();
                return out;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                self.buf.clear();
                return text;
            }
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self.buf.extend_from_slice(&bytes),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    self.buf.clear();
                    return text;
                }
            }
        }
    }

    /// Sends `GET path` for `Host: localhost` and reads the response up to `needle`.
    pub fn get(&mut self, path: &str, needle: &str) -> String {
        self.send(&format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
        self.read_until(needle, Duration::from_secs(10))
    }
}

impl Drop for TlsSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `openssl s_client -connect CONNECT -CAfile CA ARGS…`; sends `stdin`, then holds the connection
/// open for 700 ms so responses and TLS 1.3 tickets arrive.
pub fn s_client_at(connect: &str, ca: &Path, args: &[&str], stdin: &str) -> tlsgate_testkit::Output {
    let mut all = vec!["s_client", "-connect", connect, "-CAfile", ca.to_str().unwrap()];
    all.extend_from_slice(args);
    tlsgate_testkit::run(
        "openssl",
        &all,
        stdin.as_bytes(),
        Duration::from_millis(700),
        Duration::from_secs(15),
    )
}

/// Runs `tlsgate bench ARGS https://127.0.0.1:PORT/hello --json F` against `f`; returns (exit
/// code, stdout, the JSON summary).
pub fn bench(f: &Fixture, args: &[&str]) -> (i32, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let url = format!("https://127.0.0.1:{}/hello", f.https);
    let out = std::process::Command::new(binary())
        .arg("bench")
        .args(args)
        .args(["--timeout", "10s", "--json", json.to_str().unwrap(), &url])
        .output()
        .expect("run tlsgate bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
        panic!(
            "no JSON summary; stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code().unwrap_or(-1),
        stdout,
        serde_json::from_str(&text).unwrap(),
    )
}

/// The leaf certificate (PEM) a gateway on 127.0.0.1:`https` serves for `name`, as
/// `openssl s_client` prints it.
pub fn served_leaf(https: u16, name: &str) -> String {
    let connect = format!("127.0.0.1:{https}");
    let out = tlsgate_testkit::run(
        "openssl",
        &["s_client", "-connect", &connect, "-servername", name],
        b"",
        Duration::ZERO,
        Duration::from_secs(10),
    );
    let start = out.stdout.find("-----BEGIN CERTIFICATE-----").expect("a certificate");
    let end = out.stdout.find("-----END CERTIFICATE-----").expect("end") + "-----END CERTIFICATE-----".len();
    format!("{}\n", &out.stdout[start..end])
}

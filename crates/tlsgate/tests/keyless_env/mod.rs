//! Fixtures for the keyless tests: client certificates (made with the `openssl` CLI, which can
//! set the clientAuth usage), key-server processes, and gateway configurations whose
//! certificates name key servers instead of key files.
#![allow(dead_code)]

use crate::common;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tlsgate_testkit::{free_port, toml_path, GatewayProcess, TestPki};
use tlsgate_tls::pki::KeyKind;

/// Issues a clientAuth certificate with common name `cn` from `pki`'s CA: (chain, key).
pub fn client_cert(pki: &TestPki, stem: &str, cn: &str) -> (PathBuf, PathBuf) {
    let ca_key = pki.write("ca.key", &pki.ca.key_pem);
    let ext = pki.write(
        "client-ext.cnf",
        "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n",
    );
    let (key, csr, pem) = (
        pki.path(&format!("{stem}.key")),
        pki.path(&format!("{stem}.csr")),
        pki.path(&format!("{stem}.pem")),
    );
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let subj = format!("/CN={cn}");
    let out = tlsgate_testkit::run(
        "openssl",
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &s(&key),
            "-subj",
            &subj,
            "-out",
            &s(&csr),
        ],
        b"",
        Duration::ZERO,
        Duration::from_secs(30),
    );
    assert_eq!(out.status, Some(0), "{}", out.all());
    let out = tlsgate_testkit::run(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            &s(&csr),
            "-CA",
            &s(&pki.ca_file()),
            "-CAkey",
            &s(&ca_key),
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            &s(&ext),
            "-out",
            &s(&pem),
        ],
        b"",
        Duration::ZERO,
        Duration::from_secs(30),
    );
    assert_eq!(out.status, Some(0), "{}", out.all());
    (pem, key)
}

/// A running `tlsgate keyserver`.
pub struct KeyServer {
    pub port: u16,
    pub admin: u16,
    pub proc: GatewayProcess,
}

impl KeyServer {
    /// `host:port` for `key_servers`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Signatures made (all keys), from its metrics.
    pub fn ops(&self) -> f64 {
        self.proc.metric("tlsgate_keyserver_operations_total", &[])
    }
}

/// The files a key server needs: its certificate (for 127.0.0.1) and the CA for clients.
pub struct KeyServerFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn keyserver_files(pki: &TestPki) -> KeyServerFiles {
    let (cert, key) = pki.leaf("keyserver", &["127.0.0.1", "localhost"], KeyKind::EcdsaP256);
    KeyServerFiles { cert, key }
}

/// Starts a key server on `port` serving `keys` (files or directories); `extra` is appended.
pub fn start_keyserver(pki: &TestPki, files: &KeyServerFiles, port: u16, keys: &[&Path], extra: &str) -> KeyServer {
    let admin = free_port();
    let keys: Vec<String> = keys.iter().map(|k| toml_path(k)).collect();
    let text = format!(
        "listen = \"127.0.0.1:{port}\"\nadmin = \"127.0.0.1:{admin}\"\nkeys = [{}]\ncertificate = {}\nkey = {}\nclient_ca = {}\nworkers = 2\nlog_level = \"debug\"\n{extra}\n",
        keys.join(", "),
        toml_path(&files.cert),
        toml_path(&files.key),
        toml_path(&pki.ca_file()),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("keyserver.toml");
    std::fs::write(&config, text).expect("write config");
    let arg = config.to_str().unwrap().to_string();
    let proc = GatewayProcess::spawn(
        common::binary(),
        &["keyserver", "--config", &arg],
        dir,
        config,
        admin,
        &[port],
    )
    .unwrap_or_else(|log| panic!("key server did not start:\n{log}"));
    KeyServer { port, admin, proc }
}

/// A `[[site.certificate]]` served by key servers.
pub fn keyless_cert_block(chain: &Path, servers: &[String]) -> String {
    format!(
        "[[site.certificate]]\nchain = {}\nkey_servers = {servers:?}\n",
        toml_path(chain)
    )
}

/// The `[keyless]` section.
pub fn keyless_section(client: &(PathBuf, PathBuf), ca: &Path) -> String {
    format!(
        "[keyless]\nclient_certificate = {}\nclient_key = {}\nserver_ca = {}\nrequest_timeout = \"2s\"\nhealth_interval = \"300ms\"\n",
        toml_path(&client.0),
        toml_path(&client.1),
        toml_path(ca)
    )
}

/// A gateway process and how to reach it.
pub struct Gateway {
    pub https: u16,
    pub ca: PathBuf,
    pub gw: GatewayProcess,
}

impl Gateway {
    /// `openssl s_client` to the gateway (SNI `servername`) with extra args; sends an HTTP request.
    pub fn s_client(&self, servername: &str, args: &[&str]) -> tlsgate_testkit::Output {
        let connect = format!("127.0.0.1:{}", self.https);
        let ca = self.ca.to_str().unwrap().to_string();
        let mut all = vec![
            "s_client",
            "-connect",
            &connect,
            "-servername",
            servername,
            "-CAfile",
            &ca,
            "-verify_return_error",
        ];
        all.extend_from_slice(args);
        let req = format!("GET /hello HTTP/1.1\r\nHost: {servername}\r\nConnection: close\r\n\r\n");
        tlsgate_testkit::run(
            "openssl",
            &all,
            req.as_bytes(),
            Duration::from_millis(500),
            Duration::from_secs(15),
        )
    }

    /// curl `https://localhost:PORT/hello` (verified against the test CA).
    pub fn curl(&self, args: &[&str]) -> tlsgate_testkit::Output {
        common::curl_url(&self.ca, args, &format!("https://localhost:{}/hello", self.https))
    }
}

/// A gateway whose `main` site has the ECDSA and RSA certificates of `pki` (`ecdsa.pem`,
/// `rsa.pem`) served by `servers`; `client` is its client certificate; `routes` is appended.
pub fn start_gateway(pki: &TestPki, client: &(PathBuf, PathBuf), servers: &[String], routes: &str) -> Gateway {
    try_start_gateway(pki, client, servers, routes).unwrap_or_else(|log| panic!("gateway did not start:\n{log}"))
}

/// Like [`start_gateway`], returning the log when it does not start.
pub fn try_start_gateway(
    pki: &TestPki,
    client: &(PathBuf, PathBuf),
    servers: &[String],
    routes: &str,
) -> Result<Gateway, String> {
    let certs = format!(
        "{}\n{}",
        keyless_cert_block(&pki.path("ecdsa.pem"), servers),
        keyless_cert_block(&pki.path("rsa.pem"), servers)
    );
    let (https, admin) = (free_port(), free_port());
    let top = keyless_section(client, &pki.ca_file());
    let text = common::config_with_certs(&certs, https, admin, &top, routes);
    assert!(!text.contains("\nkey ="), "the gateway must hold no key file");
    let gw = GatewayProcess::try_start(common::binary(), &text, admin, &[https])?;
    Ok(Gateway {
        https,
        ca: pki.ca_file(),
        gw,
    })
}

/// A gateway like [`start_gateway`] whose certificates name the `[[keyless.pool]]` `pool`, with
/// `servers` as its members at startup; `top` is added to the top-level tables.
pub fn start_gateway_with_pool(
    pki: &TestPki,
    client: &(PathBuf, PathBuf),
    pool: &str,
    servers: &[String],
    top: &str,
) -> Gateway {
    let certs: String = ["ecdsa.pem", "rsa.pem"]
        .iter()
        .map(|f| {
            format!(
                "[[site.certificate]]\nchain = {}\nkey_server_pool = {pool:?}\n",
                toml_path(&pki.path(f))
            )
        })
        .collect();
    let (https, admin) = (free_port(), free_port());
    let top = format!(
        "{top}\n{}[[keyless.pool]]\nname = {pool:?}\nservers = {servers:?}\n",
        keyless_section(client, &pki.ca_file())
    );
    let text = common::config_with_certs(&certs, https, admin, &top, "");
    let gw = GatewayProcess::try_start(common::binary(), &text, admin, &[https])
        .unwrap_or_else(|log| panic!("gateway did not start:\n{log}"));
    Gateway {
        https,
        ca: pki.ca_file(),
        gw,
    }
}

/// A test PKI with the site's certificates, their keys for key servers, the key servers' own
/// certificate and a trusted gateway client certificate: everything a keyless test starts from.
pub struct KeylessSetup {
    pub pki: TestPki,
    pub keys: PathBuf,
    pub files: KeyServerFiles,
    pub client: (PathBuf, PathBuf),
}

impl KeylessSetup {
    pub fn new() -> Self {
        let pki = TestPki::new();
        let keys = site_keys(&pki);
        let files = keyserver_files(&pki);
        let client = client_cert(&pki, "gateway", "gateway-1");
        Self {
            pki,
            keys,
            files,
            client,
        }
    }

    /// A key server holding the site's keys, on a free port.
    pub fn keyserver(&self) -> KeyServer {
        start_keyserver(&self.pki, &self.files, free_port(), &[&self.keys], "")
    }

    /// A gateway whose certificates use the pool `main` (members `servers`); `top` is added.
    pub fn gateway(&self, servers: &[String], top: &str) -> Gateway {
        start_gateway_with_pool(&self.pki, &self.client, "main", servers, top)
    }
}

/// `(address, weight, drain)` of each member of pool `name`, from a gateway's admin API.
pub fn pool_members(gw: &Gateway, name: &str) -> Vec<(String, u64, bool)> {
    let (status, body) = gw.gw.http_get("/keyless/pools").expect("admin reachable");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let pool = v["pools"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("pool {name} listed: {body}"));
    pool["members"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| {
                    (
                        m["address"].as_str().unwrap_or_default().to_string(),
                        m["weight"].as_u64().unwrap_or(0),
                        m["drain"] == true,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Issues the site's ECDSA and RSA leaves into `pki` and moves their keys into a `keys/`
/// directory (the gateway never sees them): returns that directory.
pub fn site_keys(pki: &TestPki) -> PathBuf {
    let dir = pki.path("keys");
    std::fs::create_dir_all(&dir).unwrap();
    for (stem, kind) in [("ecdsa", KeyKind::EcdsaP256), ("rsa", KeyKind::Rsa(2048))] {
        let (_, key) = pki.leaf(stem, &["localhost", "127.0.0.1"], kind);
        std::fs::rename(&key, dir.join(format!("{stem}.key"))).unwrap();
    }
    dir
}

/// A running `tlsgate console` (stopped on drop) and the token it was given.
pub struct ConsoleProcess {
    pub port: u16,
    pub token: Option<String>,
    pub proc: GatewayProcess,
}

/// Starts `tlsgate console` for cluster `cluster` on `bind_ip` (a free port); with `token`, a
/// token file is written and passed. Waits until `/healthz` answers on 127.0.0.1.
pub fn try_start_console(
    redis_url: &str,
    cluster: &str,
    bind_ip: &str,
    token: Option<&str>,
) -> Result<ConsoleProcess, String> {
    let port = free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    let listen = format!("{bind_ip}:{port}");
    let file_arg = token_file.to_str().unwrap().to_string();
    let mut args = vec![
        "console",
        "--redis",
        redis_url,
        "--cluster",
        cluster,
        "--listen",
        &listen,
        "--scrape-interval",
        "500ms",
    ];
    if let Some(t) = token {
        std::fs::write(&token_file, format!("{t}\n")).expect("write token");
        args.extend_from_slice(&["--token-file", &file_arg]);
    }
    let proc = GatewayProcess::spawn(common::binary(), &args, dir, token_file.clone(), port, &[])?;
    Ok(ConsoleProcess {
        port,
        token: token.map(str::to_string),
        proc,
    })
}

impl ConsoleProcess {
    /// A request to the console on 127.0.0.1 with extra header lines: (status, headers, body).
    pub fn request(&self, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String, String) {
        http_request(self.port, method, path, headers, body)
    }

    /// A request with `Authorization: Bearer TOKEN` when the console has a token; JSON body.
    pub fn api(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        let auth = self.token.as_ref().map(|t| format!("Authorization: Bearer {t}"));
        let mut headers = vec!["Content-Type: application/json"];
        if let Some(a) = &auth {
            headers.push(a);
        }
        let (status, _, text) = self.request(method, path, &headers, body);
        let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"));
        (status, v)
    }
}

/// A plain HTTP/1.0 request to 127.0.0.1:`port`: (status, header block, body).
pub fn http_request(port: u16, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

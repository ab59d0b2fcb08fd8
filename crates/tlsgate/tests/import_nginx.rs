//! `tlsgate import nginx`: real-world nginx configurations (Mozilla's SSL Configuration
//! Generator, modern and intermediate; Debian's default site with its snakeoil lines turned on;
//! a multi-site reverse proxy with two upstream blocks, certbot's snippets and includes) are
//! translated; each translation passes `tlsgate check` with certificates minted where the
//! configuration names them, the list of untranslated lines is exactly the expected one, and the
//! reverse proxy, run by tlsgate on its translation and by nginx on the original server blocks
//! with the same origins, answers the same requests the same way.
//!
//! Fixtures are in tests/import_env/; each test copies its fixture into a temporary directory,
//! rewriting paths (and, for the servers started, ports and origin addresses) on the way.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tlsgate_testkit::nginx::Nginx;
use tlsgate_testkit::{free_port, GatewayProcess, Origin, Output, TestPki};
use tlsgate_tls::pki::KeyKind;

fn env_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import_env")
}

/// Copies the fixture file or directory `name` to `to`, replacing each `(from, to)` in every file.
fn copy_fixture(name: &str, to: &Path, subs: &[(&str, String)]) {
    let src = env_dir().join(name);
    if src.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        let mut entries: Vec<_> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        entries.sort();
        for e in entries {
            copy_fixture(&format!("{name}/{}", e.to_string_lossy()), &to.join(&e), subs);
        }
    } else {
        let mut text = std::fs::read_to_string(&src).unwrap();
        for (from, with) in subs {
            text = text.replace(from, with);
        }
        std::fs::write(to, text).unwrap();
    }
}

/// `tlsgate import nginx ARGS`.
fn import(args: &[&str]) -> Output {
    let mut all = vec!["import", "nginx"];
    all.extend_from_slice(args);
    common::tlsgate(&all)
}

/// The stderr lines of an import, with `dir/` removed from the paths.
fn findings(out: &Output, dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    out.stderr.lines().map(|l| l.replace(&prefix, "")).collect()
}

/// Writes a leaf for `names` (issued by `pki`'s CA) as `chain` and `key`.
fn mint(pki: &TestPki, stem: &str, names: &[&str], kind: KeyKind, chain: &Path, key: &Path) {
    let (c, k) = pki.leaf(stem, names, kind);
    std::fs::create_dir_all(chain.parent().unwrap()).unwrap();
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::copy(c, chain).unwrap();
    tlsgate_testkit::write_private(key, &std::fs::read_to_string(k).unwrap());
}

/// `tlsgate check` on `config` with the test CA; asserts it passes.
#[track_caller]
fn assert_checks(config: &Path, pki: &TestPki) {
    let out = common::tlsgate(&[
        "check",
        "--config",
        config.to_str().unwrap(),
        "--ca",
        pki.ca_file().to_str().unwrap(),
    ]);
    assert_eq!(
        out.status,
        Some(0),
        "tlsgate check failed:\n{}\n{}",
        out.all(),
        std::fs::read_to_string(config).unwrap()
    );
}

/// Imports `file` into `out`, asserting exit status 0 and the untranslated lines.
#[track_caller]
fn import_ok(file: &Path, out: &Path, dir: &Path, expected: &[&str]) -> tlsgate_config::Config {
    let o = import(&[file.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    assert_eq!(o.status, Some(0), "{}", o.all());
    assert_eq!(findings(&o, dir), expected, "stderr:\n{}", o.stderr);
    let text = std::fs::read_to_string(out).unwrap();
    tlsgate_config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const MOZILLA_COMMON: [&str; 4] = [
    "mozilla.conf:12: server: no host name to match SNI against: the site gets the placeholder name default.invalid; it is reached only as tlsgate's default site (the first site, unless another sets default); no location forwards to an origin (tlsgate serves no files): the site gets a fixed 404 route at /; point it at an [[upstream]]",
    "ssl_stapling_verify: not needed: tlsgate always checks a stapled OCSP response (signature by the issuer, status, freshness)",
    "ssl_trusted_certificate: not needed: tlsgate checks OCSP responses against the issuer in the certificate chain",
    "resolver: not needed: tlsgate resolves names with the system resolver",
];

/// Copies a Mozilla profile with `/path/to/` in a temporary directory and mints its certificate.
fn mozilla(profile: &str, pki: &TestPki, subs: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec![("/path/to/", format!("{}/", dir.path().display()))];
    all.extend(subs.iter().cloned());
    copy_fixture(profile, &dir.path().join("mozilla.conf"), &all);
    mint(
        pki,
        "mozilla",
        &["localhost"],
        KeyKind::EcdsaP256,
        &dir.path().join("signed_cert_plus_intermediates"),
        &dir.path().join("private_key"),
    );
    // nginx reads the OCSP trust file at start (tlsgate needs none).
    std::fs::copy(pki.ca_file(), dir.path().join("root_CA_cert_plus_intermediates")).unwrap();
    dir
}

#[test]
fn mozilla_intermediate_profile() {
    let pki = TestPki::new();
    let dir = mozilla("mozilla-intermediate.conf", &pki, &[]);
    let d = dir.path();
    let expected = [
        MOZILLA_COMMON[0].to_string(),
        "mozilla.conf:23: ssl_dhparam: not needed: tlsgate offers no finite-field DHE suites (ECDHE only), so it needs no DH parameters".into(),
        "mozilla.conf:28: ssl_ciphers: DHE-RSA-AES128-GCM-SHA256, DHE-RSA-AES256-GCM-SHA384, DHE-RSA-CHACHA20-POLY1305 dropped (finite-field DHE: BoringSSL has no DHE suites; every client that has them also has ECDHE)".into(),
        format!("mozilla.conf:36: {}", MOZILLA_COMMON[1]),
        format!("mozilla.conf:39: {}", MOZILLA_COMMON[2]),
        format!("mozilla.conf:42: {}", MOZILLA_COMMON[3]),
    ];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    let out = d.join("tlsgate.toml");
    let c = import_ok(&d.join("mozilla.conf"), &out, d, &expected);
    assert_checks(&out, &pki);
    assert_eq!(c.tls.min_version, tlsgate_config::TlsVersion::V1_2);
    assert_eq!(c.tls.max_version, tlsgate_config::TlsVersion::V1_3);
    // Client order among the six ECDHE AEAD suites: tlsgate's default list, left as it is.
    assert_eq!(c.tls.ciphers_tls12, tlsgate_config::DEFAULT_TLS12_CIPHERS);
    assert!(!c.tls.strict_cipher_order);
    assert_eq!(c.tls.groups, ["X25519", "P-256", "P-384"]);
    assert_eq!(c.tls.alpn, ["h2", "http/1.1"]);
    assert_eq!(c.tls.session_cache.size, 40_000);
    assert_eq!(c.tls.session_cache.timeout.get().as_secs(), 86_400);
    assert!(!c.tls.tickets.enabled);
    let listeners: Vec<(String, tlsgate_config::ListenerKind)> =
        c.listeners.iter().map(|l| (l.listen.to_string(), l.kind)).collect();
    use tlsgate_config::ListenerKind::{Https, Redirect};
    assert_eq!(
        listeners,
        [
            ("0.0.0.0:443".to_string(), Https),
            ("[::]:443".into(), Https),
            ("0.0.0.0:80".into(), Redirect),
            ("[::]:80".into(), Redirect)
        ]
    );
    let site = &c.sites[0];
    assert_eq!(site.hsts.as_ref().unwrap().max_age.get().as_secs(), 63_072_000);
    assert_eq!(site.certificates[0].ocsp, tlsgate_config::OcspMode::Auto);
}

#[test]
fn mozilla_modern_profile() {
    let pki = TestPki::new();
    let dir = mozilla("mozilla-modern.conf", &pki, &[]);
    let d = dir.path();
    let expected = [
        MOZILLA_COMMON[0].to_string(),
        format!("mozilla.conf:32: {}", MOZILLA_COMMON[1]),
        format!("mozilla.conf:35: {}", MOZILLA_COMMON[2]),
        format!("mozilla.conf:38: {}", MOZILLA_COMMON[3]),
    ];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    let out = d.join("tlsgate.toml");
    let c = import_ok(&d.join("mozilla.conf"), &out, d, &expected);
    assert_checks(&out, &pki);
    assert_eq!(c.tls.min_version, tlsgate_config::TlsVersion::V1_3);
    assert_eq!(c.tls.max_version, tlsgate_config::TlsVersion::V1_3);
    assert!(!c.tls.tickets.enabled);
    assert_eq!(c.sites[0].hsts.as_ref().unwrap().max_age.get().as_secs(), 63_072_000);
}

/// One answer, as curl saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resp {
    /// curl's exit status (0: a response came).
    exit: i32,
    /// HTTP status.
    status: u16,
    /// HTTP/2 was negotiated.
    http2: bool,
    /// Header fields (lowercase names).
    headers: BTreeMap<String, String>,
    /// Body.
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).cloned()
    }
}

/// `curl SCHEME://HOST:PORT/PATH` with HOST resolved to 127.0.0.1 and the test CA.
fn curl(ca: &Path, scheme: &str, host: &str, port: u16, path: &str, extra: &[&str]) -> Resp {
    let url = format!("{scheme}://{host}:{port}{path}");
    let resolve = format!("{host}:{port}:127.0.0.1");
    let mut args = vec!["-sS", "-i", "--resolve", &resolve];
    args.extend_from_slice(extra);
    let out = common::curl_url(ca, &args, &url);
    let text = out.stdout.replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or("");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        exit: out.status.unwrap_or(-1),
        status: status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        http2: status_line.starts_with("HTTP/2"),
        headers,
        body: body.to_string(),
    }
}

/// Serves a Mozilla profile with nginx and with tlsgate on its translation: the same answers
/// (a 404 where nginx has no file to serve, HSTS, the redirect from port 80, HTTP/2) and the same
/// protocol versions (the modern profile refuses TLS 1.2 on both).
#[test]
fn mozilla_profiles_serve_like_nginx() {
    for (profile, tls12) in [("mozilla-intermediate.conf", true), ("mozilla-modern.conf", false)] {
        let pki = TestPki::new();
        let mut answers = Vec::new();
        for server in ["nginx", "tlsgate"] {
            let (https, http) = (free_port(), free_port());
            let subs = [
                ("listen 443 ssl", format!("listen 127.0.0.1:{https} ssl")),
                ("listen [::]:443 ssl", format!("listen [::1]:{https} ssl")),
                ("listen 80 ", format!("listen 127.0.0.1:{http} ")),
                ("listen [::]:80 ", format!("listen [::1]:{http} ")),
            ];
            let dir = mozilla(profile, &pki, &subs);
            let d = dir.path();
            let _running: Box<dyn std::any::Any> = if server == "nginx" {
                let dh = d.join("dhparam");
                let o = tlsgate_testkit::run(
                    "openssl",
                    &[
                        "genpkey",
                        "-genparam",
                        "-algorithm",
                        "DH",
                        "-pkeyopt",
                        "group:ffdhe2048",
                        "-out",
                        dh.to_str().unwrap(),
                    ],
                    b"",
                    std::time::Duration::ZERO,
                    std::time::Duration::from_secs(30),
                );
                assert_eq!(o.status, Some(0), "{}", o.all());
                Box::new(Nginx::start(
                    &format!("include {}/mozilla.conf;", d.display()),
                    &[https, http],
                ))
            } else {
                let out = d.join("tlsgate.toml");
                let o = import(&[d.join("mozilla.conf").to_str().unwrap(), "-o", out.to_str().unwrap()]);
                assert_eq!(o.status, Some(0), "{}", o.all());
                let admin = free_port();
                let text = format!(
                    "[admin]\nlisten = \"127.0.0.1:{admin}\"\n{}",
                    std::fs::read_to_string(&out).unwrap()
                );
                Box::new(GatewayProcess::start(common::binary(), &text, admin, &[https, http]))
            };
            let ca = pki.ca_file();
            let page = curl(&ca, "https", "localhost", https, "/index.html", &[]);
            let redirect = curl(&ca, "http", "localhost", http, "/a/b?c=1", &[]);
            let old = curl(&ca, "https", "localhost", https, "/", &["--tls-max", "1.2"]);
            answers.push((
                page.status,
                page.header("strict-transport-security"),
                page.http2,
                redirect.status,
                redirect.header("location"),
                old.exit == 0,
            ));
        }
        let expected = (
            404,
            Some("max-age=63072000".to_string()),
            true,
            301,
            Some("https://localhost/a/b?c=1".to_string()),
            tls12,
        );
        assert_eq!(answers[0], expected, "{profile}: nginx");
        assert_eq!(answers[1], expected, "{profile}: tlsgate");
    }
}

#[test]
fn debian_default_site_with_snakeoil() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let subs = [("/etc/ssl/", format!("{}/ssl/", d.display()))];
    copy_fixture("debian", &d.join("nginx"), &subs);
    mint(
        &pki,
        "snakeoil",
        &["debian.example"],
        KeyKind::Rsa(2048),
        &d.join("ssl/certs/ssl-cert-snakeoil.pem"),
        &d.join("ssl/private/ssl-cert-snakeoil.key"),
    );
    let f = "nginx/sites-available/default";
    let expected = [
        format!("{f}:21: server: no location forwards to an origin (tlsgate serves no files): the site gets a fixed 404 route at /; point it at an [[upstream]]"),
        format!("{f}:22: listen: not translated: plain HTTP in a TLS server; tlsgate answers plain HTTP only with redirects to https (a kind = \"redirect\" listener), so this server is served on its TLS listeners only"),
        format!("{f}:23: listen: not translated: plain HTTP in a TLS server; tlsgate answers plain HTTP only with redirects to https (a kind = \"redirect\" listener), so this server is served on its TLS listeners only"),
        format!("{f}:41: root: not translated: tlsgate serves no files (route to an origin instead)"),
        format!("{f}:44: index: not translated: tlsgate serves no files (route to an origin instead)"),
        format!("{f}:46: server_name: no host name to match SNI against: the site gets the placeholder name default.invalid; as the default site it serves every client whose SNI matches no other site"),
        format!("{f}:48: location: not translated: serves try_files; tlsgate serves no files (only origins and fixed responses)"),
    ];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    // No --prefix: a file in sites-available/ resolves `include snippets/...` one level up.
    let out = d.join("tlsgate.toml");
    let c = import_ok(&d.join(f), &out, d, &expected);
    assert_checks(&out, &pki);
    let site = &c.sites[0];
    assert!(site.default);
    assert_eq!(site.certificates[0].chain, d.join("ssl/certs/ssl-cert-snakeoil.pem"));
    assert_eq!(c.tls.alpn, ["http/1.1"]);
    let listens: Vec<String> = c.listeners.iter().map(|l| l.listen.to_string()).collect();
    assert_eq!(listens, ["0.0.0.0:443", "[::]:443"]);
}

/// The reverse proxy's origins: `app_backend` (a1, a2; a3 is its backup), `api_v1` (b1, b2) and
/// the `/v2/` service (c).
struct Origins {
    list: Vec<(&'static str, Origin)>,
}

impl Origins {
    fn start() -> Self {
        let names = ["a1", "a2", "a3", "b1", "b2", "c"];
        Self {
            list: names.iter().map(|n| (*n, Origin::start(n))).collect(),
        }
    }

    fn addr(&self, name: &str) -> String {
        self.list.iter().find(|(n, _)| *n == name).unwrap().1.addr()
    }
}

/// Copies the reverse-proxy fixture into `d` (paths under `d`), listening on `https` and `http`
/// of 127.0.0.1 and ::1, forwarding to `origins`; mints its three certificates.
fn proxy_fixture(d: &Path, https: u16, http: u16, origins: &Origins, pki: &TestPki) {
    let subs = [
        ("/etc/nginx/", format!("{}/", d.display())),
        ("/etc/letsencrypt/", format!("{}/letsencrypt/", d.display())),
        ("listen 443 ssl", format!("listen 127.0.0.1:{https} ssl")),
        ("listen [::]:443 ssl", format!("listen [::1]:{https} ssl")),
        ("listen 80;", format!("listen 127.0.0.1:{http};")),
        ("listen [::]:80;", format!("listen [::1]:{http};")),
        ("10.0.1.11:8080", origins.addr("a1")),
        ("10.0.1.12:8080", origins.addr("a2")),
        ("10.0.1.13:8080", origins.addr("a3")),
        ("10.0.2.21:9000", origins.addr("b1")),
        ("10.0.2.22:9000", origins.addr("b2")),
        ("127.0.0.1:9100", origins.addr("c")),
    ];
    copy_fixture("proxy", d, &subs);
    let live = d.join("letsencrypt/live");
    let app = ["app.example.com", "www.example.com"];
    for (dir, names, kind) in [
        ("app.example.com", &app[..], KeyKind::EcdsaP256),
        ("app.example.com-rsa", &app[..], KeyKind::Rsa(2048)),
        ("api.example.com", &["api.example.com"][..], KeyKind::EcdsaP256),
    ] {
        mint(
            pki,
            dir,
            names,
            kind,
            &live.join(dir).join("fullchain.pem"),
            &live.join(dir).join("privkey.pem"),
        );
    }
}

const PROXY_FINDINGS: [&str; 26] = [
    "nginx.conf:1: user: not needed: run tlsgate as an unprivileged user with CAP_NET_BIND_SERVICE (docs/OPERATIONS.md)",
    "nginx.conf:3: pid: not needed: tlsgate writes no pid file",
    "nginx.conf:6: events: not needed: tlsgate's event loop has no settings (limits: [server] max_connections)",
    "nginx.conf:17: sendfile: not translated: tlsgate serves no files (route to an origin instead)",
    "nginx.conf:18: tcp_nopush: not needed: tlsgate sets TCP_NODELAY on every socket and sizes TLS records itself",
    "nginx.conf:19: types_hash_max_size: not translated: tlsgate serves no files (route to an origin instead)",
    "nginx.conf:20: server_tokens: not needed: tlsgate sends no version in its own responses",
    "nginx.conf:37: access_log: not translated: tlsgate writes its own access-log format ([log] access_log_file)",
    "nginx.conf:38: error_log: not translated: tlsgate logs to stderr ([log] level, format)",
    "nginx.conf:44: gzip: not translated: tlsgate does not compress responses (the origin's compression passes through)",
    "mime.types:2: types: not translated: tlsgate serves no files (route to an origin instead)",
    "conf.d/upstreams.conf:4: server: weight=3 ignored: tlsgate balances servers equally; max_fails=3 ignored: tlsgate skips a server for fail_timeout after one failed connect",
    "conf.d/upstreams.conf:5: server: max_fails=3 ignored: tlsgate skips a server for fail_timeout after one failed connect",
    "conf.d/upstreams.conf:6: server: backup server left out: tlsgate has no backup servers",
    "conf.d/websocket-map.conf:2: map: not translated: tlsgate has no variables",
    "sites-enabled/api.example.com:20: if: not translated: tlsgate has no conditionals (routes match host and path prefix only)",
    "sites-enabled/api.example.com:25: proxy_pass: note: no proxy_set_header Host applies here, so nginx sends Host: api_v1 ($proxy_host); tlsgate sends the Host the client asked for",
    "sites-enabled/api.example.com:26: proxy_http_version: not needed: tlsgate speaks HTTP/1.1 to origins",
    "letsencrypt/options-ssl-nginx.conf:14: ssl_ciphers: DHE-RSA-AES128-GCM-SHA256, DHE-RSA-AES256-GCM-SHA384 dropped (finite-field DHE: BoringSSL has no DHE suites; every client that has them also has ECDHE)",
    "sites-enabled/app.example.com:17: client_max_body_size: not translated: tlsgate has no request-body size limit (bodies stream to the origin)",
    "sites-enabled/app.example.com:30: location: translated as a prefix route: tlsgate matches path prefixes, so /healthz also matches /healthz/... and /healthzx",
    "sites-enabled/app.example.com:31: access_log: not translated: tlsgate writes its own access-log format ([log] access_log_file)",
    "sites-enabled/app.example.com:36: location: not translated: regular expression \"\\\\.php$\"; tlsgate routes by path prefix",
    "sites-enabled/app.example.com:53: return: not translated: tlsgate's redirect listener redirects requests for every host, not only those the if blocks name",
    "snippets/proxy-headers.conf:1: proxy_http_version: not needed: tlsgate speaks HTTP/1.1 to origins",
    "snippets/proxy-headers.conf:3: proxy_set_header: not translated: tlsgate sends the client address in X-Forwarded-For and Forwarded, not X-Real-IP",
];

/// What a response says that both servers must agree on: status, the headers the configuration
/// sets, and for an origin's echo which group answered (a3, the backup, by name), the path it
/// received and the request headers the configuration sets.
fn summary(r: &Resp) -> String {
    let mut s = format!("status={} exit={}\n", r.status, r.exit);
    // a3 is the backup: named, so that an answer from it shows.
    let group = |name: &str| match name {
        "a3" => name.to_string(),
        _ => name.trim_end_matches(char::is_numeric).to_string(),
    };
    for h in [
        "strict-transport-security",
        "x-content-type-options",
        "location",
        "x-origin",
    ] {
        if let Some(v) = r.header(h) {
            let v = if h == "x-origin" { group(&v) } else { v };
            s.push_str(&format!("{h}: {v}\n"));
        }
    }
    if (300..400).contains(&r.status) {
        // The body of a redirect is each server's own page.
        return s;
    }
    if !r.body.starts_with("origin=") {
        s.push_str(&format!(
            "content-type: {}\nbody: {}",
            r.header("content-type").unwrap_or_default(),
            r.body
        ));
        return s;
    }
    for line in r.body.lines() {
        let lower = line.to_ascii_lowercase();
        if let Some(name) = line.strip_prefix("origin=") {
            s.push_str(&format!("origin group {}\n", group(name)));
        } else if line.starts_with("path=") || lower.starts_with("x-api-") {
            s.push_str(line);
            s.push('\n');
        } else if let Some(host) = lower.strip_prefix("host: ") {
            s.push_str(&format!("host: {}\n", host.split(':').next().unwrap_or("")));
        }
    }
    s
}

#[test]
fn multi_site_reverse_proxy_serves_like_nginx() {
    let origins = Origins::start();
    let pki = TestPki::new();
    let requests = [
        ("https", "app.example.com", "/"),
        ("https", "www.example.com", "/page?x=1"),
        ("https", "app.example.com", "/static/css/site.css"),
        ("https", "app.example.com", "/healthz"),
        ("https", "api.example.com", "/v1/users"),
        ("https", "api.example.com", "/v2/items?id=7"),
        ("https", "api.example.com", "/nope"),
        ("http", "app.example.com", "/login?next=/"),
        ("http", "www.example.com", "/"),
    ];
    let mut answers: Vec<Vec<String>> = Vec::new();
    for server in ["nginx", "tlsgate"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (https, http) = (free_port(), free_port());
        proxy_fixture(d, https, http, &origins, &pki);
        let _running: Box<dyn std::any::Any> = if server == "nginx" {
            // The original server and upstream blocks (nginx's own http{} settings are testkit's).
            let http_block = format!("include {0}/conf.d/*.conf;\ninclude {0}/sites-enabled/*;", d.display());
            Box::new(Nginx::start(&http_block, &[https, http]))
        } else {
            let out = d.join("tlsgate.toml");
            let c = import_ok(&d.join("nginx.conf"), &out, d, &PROXY_FINDINGS);
            assert_checks(&out, &pki);
            assert_eq!(c.sites.len(), 2);
            assert_eq!(c.sites[1].certificates.len(), 2, "ECDSA and RSA for app.example.com");
            assert_eq!(c.upstreams[0].balance, tlsgate_config::Balance::LeastConn);
            assert_eq!(c.upstreams[1].header_timeout.get().as_secs(), 120);
            let admin = free_port();
            let text = format!(
                "[admin]\nlisten = \"127.0.0.1:{admin}\"\n{}",
                std::fs::read_to_string(&out).unwrap()
            );
            Box::new(GatewayProcess::start(common::binary(), &text, admin, &[https, http]))
        };
        let ca = pki.ca_file();
        answers.push(
            requests
                .iter()
                .map(|(scheme, host, path)| {
                    let port = if *scheme == "https" { https } else { http };
                    summary(&curl(&ca, scheme, host, port, path, &[]))
                })
                .collect(),
        );
    }
    // The one listed difference: /v1/ sets its own proxy_set_header list without Host, so nginx
    // sends `Host: api_v1` there (its $proxy_host) and tlsgate the client's host.
    assert!(answers[0][4].contains("host: api_v1\n"), "{}", answers[0][4]);
    answers[0][4] = answers[0][4].replace("host: api_v1\n", "");
    answers[1][4] = answers[1][4].replace("host: api.example.com\n", "");
    for (i, (scheme, host, path)) in requests.iter().enumerate() {
        assert_eq!(
            answers[1][i], answers[0][i],
            "{scheme}://{host}{path}: tlsgate (left) vs nginx (right)"
        );
    }
    // And what they agree on is what the configuration says.
    let hsts = "strict-transport-security: max-age=31536000; includeSubDomains\n";
    let expect = [
        (
            0,
            vec![
                "status=200",
                hsts,
                "x-content-type-options: nosniff",
                "origin group a\n",
                "path=/\n",
            ],
        ),
        (
            1,
            vec![
                "status=200",
                "origin group a\n",
                "path=/page?x=1\n",
                "host: www.example.com\n",
            ],
        ),
        (2, vec!["status=200", "origin group a\n", "path=/assets/css/site.css\n"]),
        (3, vec!["status=200", hsts, "content-type: text/plain", "body: ok\n"]),
        (
            4,
            vec![
                "status=200",
                hsts,
                "origin group b\n",
                "path=/v1/users\n",
                "x-api-version: 1\n",
            ],
        ),
        (
            5,
            vec![
                "status=200",
                "origin group c\n",
                "path=/items?id=7\n",
                "x-api-gateway: edge\n",
            ],
        ),
        (
            6,
            vec![
                "status=404",
                hsts,
                "content-type: application/json",
                "body: {\"error\": \"not found\"}",
            ],
        ),
        (
            7,
            vec!["status=301", "location: https://app.example.com/login?next=/\n"],
        ),
        (8, vec!["status=301", "location: https://www.example.com/\n"]),
    ];
    for (i, needles) in expect {
        for n in needles {
            assert!(
                answers[1][i].contains(n),
                "{:?}: {n:?} missing in\n{}",
                requests[i],
                answers[1][i]
            );
        }
    }
    assert!(!answers[1][2].contains("x-origin"), "proxy_hide_header X-Origin");
    assert!(
        !answers[1][4].contains("x-api-gateway"),
        "the location's proxy_set_header replaces the server's"
    );
}

#[test]
fn parse_errors_exit_2_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("nginx.conf");
    std::fs::write(&main, "http {\n    include bad.conf;\n}\n").unwrap();
    std::fs::write(
        dir.path().join("bad.conf"),
        "server {\n    listen 443 ssl\n    server_name a.test;\n}\n}\n",
    )
    .unwrap();
    let o = import(&[main.to_str().unwrap()]);
    assert_eq!(o.status, Some(2), "{}", o.all());
    let bad = dir.path().join("bad.conf");
    assert!(
        o.stderr.contains(&format!("{}:5:1: unexpected \"}}\"", bad.display())),
        "{}",
        o.stderr
    );
    assert!(o.stdout.is_empty());
    // A configuration without any TLS server produces nothing: exit status 1.
    std::fs::write(
        &main,
        "server { listen 80; location / { proxy_pass http://127.0.0.1:8080; } }\n",
    )
    .unwrap();
    let o = import(&[main.to_str().unwrap()]);
    assert_eq!(o.status, Some(1), "{}", o.all());
    assert!(o.stderr.contains("no server block listens with ssl"), "{}", o.stderr);
}

#[test]
fn stdout_and_output_file_carry_the_same_toml() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("site.conf");
    std::fs::write(
        &main,
        "server {\n listen 443 ssl;\n server_name a.test;\n ssl_certificate a.pem;\n ssl_certificate_key a.key;\n gzip on;\n location / { proxy_pass http://127.0.0.1:8080; proxy_set_header Host $host; }\n}\n",
    )
    .unwrap();
    let o = import(&[main.to_str().unwrap()]);
    assert_eq!(o.status, Some(0), "{}", o.all());
    assert_eq!(findings(&o, dir.path()), ["site.conf:6: gzip: not translated: tlsgate does not compress responses (the origin's compression passes through)"]);
    let out = dir.path().join("out.toml");
    let o2 = import(&[main.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    assert_eq!(o2.status, Some(0));
    assert!(o2.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), o.stdout);
    // Relative certificate paths are made absolute against nginx's prefix (the file's directory).
    let c = tlsgate_config::parse(&o.stdout).unwrap();
    assert_eq!(c.sites[0].certificates[0].chain, dir.path().join("a.pem"));
}

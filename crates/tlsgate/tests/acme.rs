//! ACME end to end against Pebble (Let's Encrypt's test CA) and pebble-challtestsrv (its DNS):
//! a real `tlsgate serve` obtains certificates with HTTP-01 (redirect listener), TLS-ALPN-01
//! (TLS listener) and DNS-01 (hook writing TXT records to challtestsrv), serves them chained to
//! Pebble's root (verified by curl), keeps them across a restart, renews when the CA's renewal
//! information says so (RFC 9773), survives Pebble's nonce rejection, and keeps serving when
//! the CA is gone, with the failures in metrics.

mod common;
mod keyless_env;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, require, toml_path, GatewayProcess, StoreProcess, TestPki};
use tlsgate_tls::pki::KeyKind;

/// Pebble and its DNS server, stopped on drop.
struct Pebble {
    pebble: Option<Child>,
    chall: Child,
    /// Holds Pebble's HTTPS certificate, config and logs.
    pki: TestPki,
    acme_port: u16,
    mgmt_port: u16,
    chall_mgmt: u16,
}

impl Pebble {
    /// Pebble validating HTTP-01 on `http_port` and TLS-ALPN-01 on `tls_port` (the gateway's),
    /// certificates valid for `validity` seconds, with extra environment (fault injection).
    fn start(http_port: u16, tls_port: u16, validity: u64, env: &[(&str, &str)]) -> Self {
        require("pebble");
        require("pebble-challtestsrv");
        let pki = TestPki::new();
        let (cert, key) = pki.leaf("pebble", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
        let (acme_port, mgmt_port, dns_port, chall_mgmt) = (free_port(), free_port(), free_port(), free_port());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{acme_port}"),
            "managementListenAddress": format!("127.0.0.1:{mgmt_port}"),
            "certificate": cert, "privateKey": key,
            "httpPort": http_port, "tlsPort": tls_port,
            "ocspResponderURL": "", "externalAccountBindingRequired": false,
            "retryAfter": {"authz": 1, "order": 1},
            "profiles": {"default": {"description": "test", "validityPeriod": validity}},
        }});
        let config_path = pki.write("pebble.json", &config.to_string());
        let log = |name: &str| std::fs::File::create(pki.path(name)).expect("log file");
        let chall = Command::new("pebble-challtestsrv")
            .args(["-management", &format!("127.0.0.1:{chall_mgmt}")])
            .args(["-dns01", &format!("127.0.0.1:{dns_port}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdout(log("chall.log"))
            .stderr(log("chall.err"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start pebble-challtestsrv");
        let mut cmd = Command::new("pebble");
        cmd.args(["-config", config_path.to_str().unwrap()])
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let pebble = Some(cmd.spawn().expect("start pebble"));
        let me = Self {
            pebble,
            chall,
            pki,
            acme_port,
            mgmt_port,
            chall_mgmt,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in [acme_port, mgmt_port, chall_mgmt] {
            while !tlsgate_testkit::listening(port) {
                assert!(Instant::now() < deadline, "pebble did not start:\n{}", me.log());
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        me
    }

    fn directory(&self) -> String {
        format!("https://localhost:{}/dir", self.acme_port)
    }

    fn log(&self) -> String {
        let read = |n: &str| std::fs::read_to_string(self.pki.path(n)).unwrap_or_default();
        format!("{}{}{}", read("pebble.log"), read("pebble.err"), read("chall.err"))
    }

    /// Pebble's root CA (its issuing hierarchy, from the management interface), as a file.
    fn root_file(&self) -> PathBuf {
        let url = format!("https://localhost:{}/roots/0", self.mgmt_port);
        let out = curl(&["--cacert", self.pki.ca_file().to_str().unwrap(), &url]);
        assert!(out.stdout.contains("BEGIN CERTIFICATE"), "root: {}", out.all());
        self.pki.write("pebble-root.pem", &out.stdout)
    }

    /// Overrides the renewal information of `cert_pem` with a window in the past (renew now).
    fn renew_now(&self, cert_pem: &str) {
        let ari = r#"{"suggestedWindow":{"start":"2020-01-01T00:00:00Z","end":"2020-01-02T00:00:00Z"}}"#;
        let body = serde_json::json!({"Certificate": cert_pem, "ARIResponse": ari}).to_string();
        let url = format!("https://localhost:{}/set-renewal-info/", self.mgmt_port);
        let ca = self.pki.ca_file();
        let out = curl(&[
            "--cacert",
            ca.to_str().unwrap(),
            "-X",
            "POST",
            "--data-binary",
            &body,
            "-w",
            "%{http_code}",
            &url,
        ]);
        assert_eq!(out.stdout.trim(), "200", "set-renewal-info: {}", out.all());
    }

    /// Stops Pebble (the CA is gone; challtestsrv stays until drop).
    fn kill_ca(&mut self) {
        if let Some(mut p) = self.pebble.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        self.kill_ca();
        let _ = self.chall.kill();
        let _ = self.chall.wait();
    }
}

fn curl(args: &[&str]) -> tlsgate_testkit::Output {
    let mut all = vec!["-sS", "--max-time", "10"];
    all.extend_from_slice(args);
    tlsgate_testkit::run("curl", &all, b"", Duration::ZERO, Duration::from_secs(15))
}

/// The gateway's ports and state directory.
struct Ports {
    https: u16,
    http: u16,
    admin: u16,
}

impl Ports {
    fn new() -> Self {
        Self {
            https: free_port(),
            http: free_port(),
            admin: free_port(),
        }
    }
}

/// A gateway with one ACME site `a` answering `names`; `acme_extra` goes in `[acme]`,
/// `site_extra` in `[site.acme]`.
fn gateway_config(
    p: &Ports,
    pebble: &Pebble,
    state: &Path,
    names: &[&str],
    acme_extra: &str,
    site_extra: &str,
) -> String {
    format!(
        r#"
[admin]
listen = "127.0.0.1:{admin}"

[[listener]]
listen = "127.0.0.1:{https}"

[[listener]]
listen = "127.0.0.1:{http}"
kind = "redirect"
https_port = {https}

[acme]
directory = "{directory}"
directory_ca = {ca}
state_dir = {state}
contact = ["mailto:ops@a.test"]
check_interval = "1s"
retry_min = "1s"
retry_max = "2s"
order_timeout = "30s"
{acme_extra}

[[site]]
name = "a"
server_names = {names:?}
[site.acme]
{site_extra}
[[site.route]]
fixed_response = {{ body = "acme site" }}
"#,
        admin = p.admin,
        https = p.https,
        http = p.http,
        directory = pebble.directory(),
        ca = toml_path(&pebble.pki.ca_file()),
        state = toml_path(state),
    )
}

fn start_gateway(p: &Ports, config: &str) -> GatewayProcess {
    GatewayProcess::start(common::binary(), config, p.admin, &[p.https, p.http])
}

/// Waits until `tlsgate_acme_orders_total{result="issued"}` reaches `n`.
fn wait_issued(gw: &GatewayProcess, pebble: &Pebble, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while gw.metric("tlsgate_acme_orders_total", &[r#"result="issued""#]) < n {
        assert!(
            Instant::now() < deadline,
            "no certificate issued\n--- tlsgate:\n{}\n--- pebble:\n{}",
            gw.log(),
            pebble.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// curl to `name` on the gateway, trusting only `root`: the body, or the failure.
fn fetch_verified(p: &Ports, name: &str, root: &Path) -> tlsgate_testkit::Output {
    let resolve = format!("{name}:{}:127.0.0.1", p.https);
    let url = format!("https://{name}:{}/", p.https);
    curl(&["--cacert", root.to_str().unwrap(), "--resolve", &resolve, &url])
}

/// The leaf certificate the gateway serves for `name` (PEM).
fn served_leaf(p: &Ports, name: &str) -> String {
    common::served_leaf(p.https, name)
}

#[test]
fn http01_issues_a_certificate_chained_to_pebble_that_survives_a_restart() {
    let p = Ports::new();
    let pebble = Pebble::start(p.http, p.https, 7_776_000, &[]);
    let state = tempfile::tempdir().unwrap();
    let config = gateway_config(
        &p,
        &pebble,
        state.path(),
        &["a.test", "www.a.test"],
        r#"challenges = ["http-01"]"#,
        "",
    );
    let gw = start_gateway(&p, &config);
    wait_issued(&gw, &pebble, 1.0);
    let root = pebble.root_file();
    for name in ["a.test", "www.a.test"] {
        let out = fetch_verified(&p, name, &root);
        assert_eq!(out.stdout, "acme site", "{name}: {}\n{}", out.all(), gw.log());
    }
    assert!(gw.log().contains("placeholder"), "served a placeholder before issuance");
    let http01 = gw.metric("tlsgate_acme_challenges_answered", &[r#"challenge="http-01""#]);
    assert!(http01 >= 2.0, "both names validated on the redirect listener: {http01}");
    assert!(state.path().join("sites/a/ecdsa.crt").is_file());
    assert_eq!(gw.metric("tlsgate_acme_certificate_issued", &[r#"site="a""#]), 1.0);
    let expiry = gw.metric("tlsgate_acme_certificate_expiry_timestamp_seconds", &[r#"site="a""#]);
    assert!(
        expiry > tlsgate_acme::time::now() as f64 + 80.0 * 86_400.0,
        "90-day certificate: {expiry}"
    );
    let leaf = served_leaf(&p, "a.test");
    drop(gw);

    // A restart serves the stored certificate at once and orders nothing.
    let gw = start_gateway(&p, &config);
    assert_eq!(
        served_leaf(&p, "a.test"),
        leaf,
        "the stored certificate is served after a restart"
    );
    let out = fetch_verified(&p, "a.test", &root);
    assert_eq!(out.stdout, "acme site", "{}", out.all());
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(gw.metric("tlsgate_acme_orders_total", &[]), 0.0, "{}", gw.log());
}

#[test]
fn tls_alpn01_issues_despite_nonce_rejection() {
    let p = Ports::new();
    // Pebble refuses 40% of nonces: every refusal is answered by re-signing with the fresh one.
    let pebble = Pebble::start(p.http, p.https, 7_776_000, &[("PEBBLE_WFE_NONCEREJECT", "40")]);
    let state = tempfile::tempdir().unwrap();
    let config = gateway_config(
        &p,
        &pebble,
        state.path(),
        &["alpn.test"],
        r#"challenges = ["tls-alpn-01"]"#,
        "key_types = [\"ecdsa\", \"rsa\"]",
    );
    let gw = start_gateway(&p, &config);
    wait_issued(&gw, &pebble, 2.0);
    let root = pebble.root_file();
    let out = fetch_verified(&p, "alpn.test", &root);
    assert_eq!(out.stdout, "acme site", "{}", out.all());
    assert!(
        gw.metric("tlsgate_acme_bad_nonces_total", &[]) > 0.0,
        "Pebble refused no nonce?\n{}",
        gw.log()
    );
    assert_eq!(
        gw.metric("tlsgate_acme_orders_total", &[]),
        2.0,
        "one order per key type, no failure"
    );
    let answered = |c: &str| gw.metric("tlsgate_acme_challenges_answered", &[&format!("challenge=\"{c}\"")]);
    assert!(
        answered("tls-alpn-01") >= 2.0,
        "validated over TLS-ALPN-01:\n{}",
        gw.metrics()
    );
    assert_eq!(answered("http-01"), 0.0);
    assert!(state.path().join("sites/a/rsa.crt").is_file());
    // The RSA certificate is served to a client that offers only RSA signatures.
    let connect = format!("127.0.0.1:{}", p.https);
    let out = tlsgate_testkit::run(
        "openssl",
        &[
            "s_client",
            "-connect",
            &connect,
            "-servername",
            "alpn.test",
            "-sigalgs",
            "RSA-PSS+SHA256:RSA+SHA256",
            "-CAfile",
            root.to_str().unwrap(),
            "-verify_return_error",
        ],
        b"",
        Duration::ZERO,
        Duration::from_secs(10),
    );
    assert!(out.stdout.contains("Verify return code: 0 (ok)"), "{}", out.all());
    assert!(out.all().contains("Peer signature type: RSA"), "{}", out.all());
}

#[test]
fn dns01_through_the_hook_and_ari_driven_renewal() {
    let p = Ports::new();
    let pebble = Pebble::start(p.http, p.https, 7_776_000, &[]);
    let state = tempfile::tempdir().unwrap();
    // The hook publishes the TXT record in challtestsrv's DNS (what Pebble resolves).
    let hook = pebble.pki.write(
        "dns-hook.sh",
        &format!(
            "#!/bin/sh\nset -e\ncase \"$1\" in\n  set) curl -sSf -d \"{{\\\"host\\\":\\\"$2.\\\",\\\"value\\\":\\\"$3\\\"}}\" http://127.0.0.1:{port}/set-txt ;;\n  clear) curl -sSf -d \"{{\\\"host\\\":\\\"$2.\\\"}}\" http://127.0.0.1:{port}/clear-txt ;;\nesac\necho \"$1 $2\" >> {log}\n",
            port = pebble.chall_mgmt,
            log = pebble.pki.path("hook.log").display()
        ),
    );
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let acme = format!("challenges = [\"dns-01\"]\ndns_hook = {}", toml_path(&hook));
    let config = gateway_config(&p, &pebble, state.path(), &["*.wild.test"], &acme, "");
    let gw = start_gateway(&p, &config);
    wait_issued(&gw, &pebble, 1.0);
    let root = pebble.root_file();
    let out = fetch_verified(&p, "x.wild.test", &root);
    assert_eq!(out.stdout, "acme site", "{}", out.all());
    let hooks = std::fs::read_to_string(pebble.pki.path("hook.log")).unwrap();
    assert!(
        hooks.contains("set _acme-challenge.wild.test") && hooks.contains("clear _acme-challenge.wild.test"),
        "{hooks}"
    );

    // The CA moves the renewal window into the past: the gateway renews and swaps in the new
    // certificate without a restart.
    let first = served_leaf(&p, "x.wild.test");
    pebble.renew_now(&first);
    wait_issued(&gw, &pebble, 2.0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while served_leaf(&p, "x.wild.test") == first {
        assert!(
            Instant::now() < deadline,
            "the renewed certificate is not served\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = fetch_verified(&p, "x.wild.test", &root);
    assert_eq!(out.stdout, "acme site", "{}", out.all());
}

#[test]
fn a_dead_ca_leaves_the_certificate_serving_and_failures_in_metrics() {
    let p = Ports::new();
    // One-hour certificates, renewed (without renewal information) after 0.1% of that: 3.6 s.
    let mut pebble = Pebble::start(p.http, p.https, 3600, &[]);
    let state = tempfile::tempdir().unwrap();
    let config = gateway_config(
        &p,
        &pebble,
        state.path(),
        &["dead.test"],
        r#"challenges = ["http-01"]"#,
        "",
    );
    let gw = start_gateway(&p, &config);
    wait_issued(&gw, &pebble, 1.0);
    let root = pebble.root_file();
    let leaf = served_leaf(&p, "dead.test");
    drop(gw);
    pebble.kill_ca();

    let config = config.replace("retry_max = \"2s\"", "retry_max = \"2s\"\nrenew_at = 0.001");
    let gw = start_gateway(&p, &config);
    let deadline = Instant::now() + Duration::from_secs(20);
    while gw.metric("tlsgate_acme_consecutive_failures", &[r#"site="a""#]) < 2.0 {
        assert!(Instant::now() < deadline, "no failed renewal\n{}", gw.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        gw.metric("tlsgate_acme_orders_total", &[r#"result="acme_unreachable""#]) >= 2.0,
        "{}",
        gw.metrics()
    );
    assert_eq!(gw.metric("tlsgate_acme_orders_total", &[r#"result="issued""#]), 0.0);
    assert_eq!(
        served_leaf(&p, "dead.test"),
        leaf,
        "the issued certificate keeps serving"
    );
    let out = fetch_verified(&p, "dead.test", &root);
    assert_eq!(out.stdout, "acme site", "{}", out.all());
    assert!(
        gw.log().contains("the current certificate keeps serving"),
        "{}",
        gw.log()
    );
}

/// A cluster node's configuration: `gateway_config` with HTTP-01, a short lease, and the
/// shared store and secret.
fn cluster_node_config(
    p: &Ports,
    pebble: &Pebble,
    state: &Path,
    redis: &StoreProcess,
    secret: &Path,
    challenge: &str,
) -> String {
    format!(
        "{}\n[cluster]\nsecret_files = [{}]\nstore = \"redis\"\nservers = [\"{}\"]\nbreaker_retry = \"200ms\"\n",
        gateway_config(
            p,
            pebble,
            state,
            &["c.test"],
            &format!("challenges = [{challenge:?}]\nlease = \"6s\""),
            ""
        ),
        toml_path(secret),
        redis.redis_url()
    )
}

/// Two cluster nodes' ports and state, Pebble validating on node B's ports, Redis and the
/// cluster secret they share.
struct TwoNodes {
    pa: Ports,
    pb: Ports,
    pebble: Pebble,
    redis: StoreProcess,
    _secrets: TestPki,
    secret: PathBuf,
    state: (tempfile::TempDir, tempfile::TempDir),
}

impl TwoNodes {
    fn new() -> Self {
        require("redis-server");
        let (pa, pb) = (Ports::new(), Ports::new());
        let pebble = Pebble::start(pb.http, pb.https, 7_776_000, &[]);
        let secrets = TestPki::new();
        let secret = secrets.write("cluster.key", &format!("{}\n", "5a".repeat(32)));
        Self {
            pa,
            pb,
            pebble,
            redis: StoreProcess::redis(),
            _secrets: secrets,
            secret,
            state: (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()),
        }
    }

    fn start_a(&self, challenge: &str) -> GatewayProcess {
        let config = cluster_node_config(
            &self.pa,
            &self.pebble,
            self.state.0.path(),
            &self.redis,
            &self.secret,
            challenge,
        );
        start_gateway(&self.pa, &config)
    }

    fn start_b(&self, challenge: &str) -> GatewayProcess {
        let config = cluster_node_config(
            &self.pb,
            &self.pebble,
            self.state.1.path(),
            &self.redis,
            &self.secret,
            challenge,
        );
        start_gateway(&self.pb, &config)
    }
}

fn cluster_events(gw: &GatewayProcess, event: &str) -> f64 {
    gw.metric("tlsgate_acme_cluster_events_total", &[&format!("event=\"{event}\"")])
}

fn wait_log(gw: &GatewayProcess, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gw.log().contains(needle) {
        assert!(Instant::now() < deadline, "{needle:?} not logged\n{}", gw.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cluster_orders_once_validated_through_another_node_and_every_node_serves_the_result() {
    cluster_orders_once("http-01");
}

#[test]
fn a_cluster_answers_tls_alpn_01_on_a_node_that_did_not_order() {
    cluster_orders_once("tls-alpn-01");
}

/// Node A orders with `challenge`; the CA validates on node B only, which answers from the
/// store; B installs A's certificate without ordering.
fn cluster_orders_once(challenge: &str) {
    // The CA validates on node B's ports only; node A orders.
    let c = TwoNodes::new();
    let a = c.start_a(challenge);
    wait_log(&a, "ACME lease taken");
    let b = c.start_b(challenge);
    wait_issued(&a, &c.pebble, 1.0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster_events(&b, "adopted") < 1.0 {
        assert!(
            Instant::now() < deadline,
            "node B never installed A's certificate\n{}",
            b.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        b.metric("tlsgate_acme_orders_total", &[]),
        0.0,
        "node B never ordered:\n{}",
        b.log()
    );
    // (B may find A's certificate before it ever asks for the lease: no lease_busy check here.)
    assert_eq!(cluster_events(&a, "published"), 1.0);
    // Pebble validates on B's ports only, so the answers to A's order came from B, which read
    // them from the store.
    let root = c.pebble.root_file();
    for p in [&c.pa, &c.pb] {
        let out = fetch_verified(p, "c.test", &root);
        assert_eq!(out.stdout, "acme site", "{}", out.all());
    }
    assert_eq!(
        served_leaf(&c.pa, "c.test"),
        served_leaf(&c.pb, "c.test"),
        "one certificate"
    );
}

#[test]
fn a_node_killed_mid_order_holds_the_cluster_up_only_for_its_lease() {
    // Validation goes to B, which is not running yet: A's orders fail while it holds the lease.
    let c = TwoNodes::new();
    let a = c.start_a("http-01");
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.metric("tlsgate_acme_consecutive_failures", &[]) < 1.0 {
        assert!(Instant::now() < deadline, "no failed order on A\n{}", a.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(cluster_events(&a, "lease_released"), 0.0, "A still holds the lease");
    drop(a); // stopped without releasing its lease: it lapses
    let started = Instant::now();
    let b = c.start_b("http-01");
    wait_issued(&b, &c.pebble, 1.0);
    assert!(
        cluster_events(&b, "lease_busy") >= 1.0,
        "B waited for the dead node's lease:\n{}",
        b.log()
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the cluster was held up longer than the lease: {:?}",
        started.elapsed()
    );
    let out = fetch_verified(&c.pb, "c.test", &c.pebble.root_file());
    assert_eq!(out.stdout, "acme site", "{}", out.all());
}

#[test]
fn a_keyless_site_is_issued_with_a_key_created_on_the_key_server_and_never_seen_here() {
    let p = Ports::new();
    let pebble = Pebble::start(p.http, p.https, 7_776_000, &[]);
    let ks_pki = TestPki::new();
    let files = keyless_env::keyserver_files(&ks_pki);
    let client = keyless_env::client_cert(&ks_pki, "gateway", "gateway-1");
    let (no_keys, created) = (ks_pki.path("no-keys"), ks_pki.path("created"));
    std::fs::create_dir_all(&no_keys).unwrap();
    let ks = keyless_env::start_keyserver(
        &ks_pki,
        &files,
        free_port(),
        &[&no_keys],
        &format!("[new_keys]\ndir = {}\n", toml_path(&created)),
    );
    let state = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n{}[[keyless.pool]]\nname = \"main\"\nservers = [\"{}\"]\n",
        gateway_config(
            &p,
            &pebble,
            state.path(),
            &["k.test"],
            r#"challenges = ["http-01"]"#,
            r#"key_server_pool = "main""#,
        ),
        keyless_env::keyless_section(&client, &ks_pki.ca_file()),
        ks.addr()
    );
    let gw = start_gateway(&p, &config);
    wait_issued(&gw, &pebble, 1.0);
    assert_eq!(ks.proc.metric("tlsgate_keyserver_keys_created_total", &[]), 1.0);
    let created_keys: Vec<_> = std::fs::read_dir(&created).unwrap().filter_map(Result::ok).collect();
    assert_eq!(created_keys.len(), 1, "one key, on the key server");
    assert!(state.path().join("sites/a/ecdsa.crt").is_file());
    assert!(
        !state.path().join("sites/a/ecdsa.key").exists(),
        "no key file on the gateway"
    );
    let signed = ks.ops();
    let out = fetch_verified(&p, "k.test", &pebble.root_file());
    assert_eq!(out.stdout, "acme site", "{}\n{}", out.all(), gw.log());
    assert!(ks.ops() > signed, "the handshake was signed by the key server");
}

#[test]
fn check_validates_the_acme_section() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tlsgate.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[acme]\ndirectory = \"http://ca.test/dir\"\nstate_dir = \"s\"\n\
         challenges = [\"dns-01\"]\n[[site]]\nname = \"a\"\nserver_names = [\"a.test\"]\n[site.acme]\nkey_types = [\"dsa\"]\n\
         [[site.route]]\nfixed_response = { body = \"x\" }\n",
    )
    .unwrap();
    let out = Command::new(common::binary())
        .args(["check", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    for field in ["acme.directory", "acme.dns_hook", "site[0].acme.key_types[0]"] {
        assert!(text.contains(&format!("error: {field}:")), "{field}: {text}");
    }
    assert!(
        !text.contains("site[0].certificate"),
        "an ACME site needs no certificate files: {text}"
    );
}

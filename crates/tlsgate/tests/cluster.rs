//! Issue 5: cluster-wide resumption. Two or three real `tlsgate serve` nodes share a real
//! redis-server (alone or behind a Sentinel) or memcached: a session made on one node resumes on
//! another (TLS 1.2 session ID through the store, TLS 1.2 and 1.3 tickets through the shared
//! secret); a dead or paused store costs neither failed handshakes nor unbounded waits; 0-RTT is
//! accepted once per ticket across the cluster and refused when the store cannot say; tampered
//! or foreign store entries and tickets are refused.

mod common;

use common::{binary, config_with_certs, existing_site_certs, session_lines, site_certs, wait_until};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, toml_path, GatewayProcess, StoreProcess, TestPki};

const GET: &str = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Nodes of one cluster: same certificates, same secret.
struct Cluster {
    pki: TestPki,
    secret: PathBuf,
}

struct Node {
    https: u16,
    gw: GatewayProcess,
}

impl Cluster {
    fn new() -> Self {
        let pki = TestPki::new();
        let _ = site_certs(&pki);
        let secret = pki.write("cluster.key", &hex_secret(0x5a));
        Self { pki, secret }
    }

    /// A node with `store` lines in `[cluster]` (and `extra` TOML before it).
    fn node_with(&self, secret: &Path, store: &str, extra: &str) -> Node {
        let (https, admin) = (free_port(), free_port());
        let top = format!(
            "{extra}\n[cluster]\nsecret_files = [{}]\nbreaker_retry = \"200ms\"\n{store}\n",
            toml_path(secret)
        );
        let text = config_with_certs(&existing_site_certs(&self.pki), https, admin, &top, "");
        let gw = GatewayProcess::start(binary(), &text, admin, &[https]);
        Node { https, gw }
    }

    fn node(&self, store: &str) -> Node {
        self.node_with(&self.secret, store, "")
    }

    /// `openssl s_client` to `node`; sends `stdin`.
    fn s_client(&self, node: &Node, args: &[&str], stdin: &str) -> tlsgate_testkit::Output {
        common::s_client_at(&format!("127.0.0.1:{}", node.https), &self.pki.ca_file(), args, stdin)
    }

    /// A full handshake on `node` whose session is saved to `file`.
    fn save(&self, node: &Node, args: &[&str], file: &Path) -> tlsgate_testkit::Output {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-sess_out", file.to_str().unwrap()]);
        let out = self.s_client(node, &all, GET);
        let lines = session_lines(&out.stdout);
        assert_eq!(lines.len(), 1, "{}", out.all());
        assert!(lines[0].starts_with("New, "), "{}", out.all());
        assert!(out.stdout.contains("Hello, world!"), "{}", out.all());
        out
    }

    /// Offers the session in `file` to `node`; returns whether it was resumed.
    fn resumes(&self, node: &Node, args: &[&str], file: &Path) -> bool {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-sess_in", file.to_str().unwrap()]);
        let out = self.s_client(node, &all, GET);
        assert!(
            out.stdout.contains("Hello, world!"),
            "request must succeed either way:\n{}",
            out.all()
        );
        let lines = session_lines(&out.stdout);
        assert_eq!(lines.len(), 1, "{}", out.all());
        lines[0].starts_with("Reused, ")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.pki.path(name)
    }
}

fn hex_secret(byte: u8) -> String {
    format!("{}\n", format!("{byte:02x}").repeat(32))
}

fn state(node: &Node, name: &str) -> f64 {
    node.gw.metric("tlsgate_state", &[&format!("name=\"{name}\"")])
}

fn handshakes(node: &Node, outcome: &str) -> f64 {
    node.gw
        .metric("tlsgate_handshakes_total", &[&format!("outcome=\"{outcome}\"")])
}

/// Waits until the node's store breaker is closed (the store answered its first probe).
fn wait_connected(node: &Node) {
    assert!(
        wait_until(Duration::from_secs(10), || state(node, "session_store_breaker_open")
            == 0.0),
        "store never connected:\n{}",
        node.gw.log()
    );
}

fn wait_written(node: &Node, at_least: f64) {
    assert!(
        wait_until(Duration::from_secs(5), || state(node, "session_store_write_ok_total")
            >= at_least),
        "session never written to the store:\n{}",
        node.gw.log()
    );
}

fn redis_store(redis: &StoreProcess) -> String {
    format!(
        "store = \"redis\"\nservers = [\"{}\"]\nlookup_timeout = \"50ms\"\n",
        redis.redis_url()
    )
}

fn memcached_store(mc: &StoreProcess) -> String {
    format!(
        "store = \"memcached\"\nservers = [\"{}\"]\nlookup_timeout = \"50ms\"\n",
        mc.addr()
    )
}

const TLS12_ID: &[&str] = &["-tls1_2", "-no_ticket"];

/// The session-ID path through the store, for a given store.
fn session_id_crosses_nodes(c: &Cluster, a: &Node, b: &Node) {
    wait_connected(a);
    wait_connected(b);
    let sess = c.file("id.sess");
    c.save(a, TLS12_ID, &sess);
    wait_written(a, 1.0);
    assert!(
        c.resumes(b, TLS12_ID, &sess),
        "B did not resume A's session ID:\n{}",
        b.gw.log()
    );
    assert_eq!(handshakes(b, "session_id"), 1.0);
    assert_eq!(state(b, "session_store_lookup_hit_total"), 1.0);
}

#[test]
fn redis_sessions_and_tickets_resume_on_another_node() {
    let redis = StoreProcess::redis();
    let c = Cluster::new();
    let (a, b) = (c.node(&redis_store(&redis)), c.node(&redis_store(&redis)));
    session_id_crosses_nodes(&c, &a, &b);
    // The store holds sealed entries, never a session in the clear.
    let keys = redis.redis_cli(&["--scan", "--pattern", "tlsgate:s:*"]);
    assert_eq!(keys.lines().count(), 1, "{keys}");
    let key = keys.trim();
    let entry = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "--raw", "GET", key])
        .output()
        .unwrap()
        .stdout;
    let id: Vec<u8> = (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(&key["tlsgate:s:".len()..][i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(entry[0], 1, "sealed entry format version");
    assert!(
        !entry.windows(id.len()).any(|w| w == id.as_slice()),
        "the session (whose DER carries its ID) is stored in the clear"
    );

    // Tickets need no store: every node derives the same key from the secret.
    let t12 = c.file("t12.sess");
    c.save(&a, &["-tls1_2"], &t12);
    assert!(c.resumes(&b, &["-tls1_2"], &t12), "TLS 1.2 ticket from A refused by B");
    assert_eq!(handshakes(&b, "ticket"), 1.0);
    let t13 = c.file("t13.sess");
    c.save(&b, &["-tls1_3"], &t13);
    assert!(c.resumes(&a, &["-tls1_3"], &t13), "TLS 1.3 ticket from B refused by A");
    assert_eq!(handshakes(&a, "tls13_psk"), 1.0);
}

#[test]
fn memcached_sessions_resume_on_another_node_and_a_dead_memcached_only_costs_resumption() {
    let mut mc = StoreProcess::memcached();
    let c = Cluster::new();
    let (a, b) = (c.node(&memcached_store(&mc)), c.node(&memcached_store(&mc)));
    session_id_crosses_nodes(&c, &a, &b);

    mc.kill();
    let sess = c.file("dead.sess");
    c.save(&a, TLS12_ID, &sess);
    // Every handshake still succeeds; B cannot see A's session, so it does a full one.
    for _ in 0..4 {
        let _ = c.resumes(&b, TLS12_ID, &sess);
    }
    assert!(
        wait_until(Duration::from_secs(5), || state(&b, "session_store_breaker_open")
            == 1.0),
        "breaker did not open:\n{}",
        b.gw.log()
    );
    assert!(b.gw.log().contains("circuit breaker open"), "{}", b.gw.log());
    mc.restart();
    wait_connected(&b);
    assert!(b.gw.log().contains("circuit breaker closed"), "{}", b.gw.log());
    wait_connected(&a);
    let fresh = c.file("back.sess");
    c.save(&a, TLS12_ID, &fresh);
    assert!(
        wait_until(Duration::from_secs(5), || c.resumes(&b, TLS12_ID, &fresh)),
        "resumption did not come back with memcached:\n{}",
        b.gw.log()
    );
}

#[test]
fn sessions_cross_nodes_through_redis_sentinel() {
    let redis = StoreProcess::redis();
    let sentinel = StoreProcess::sentinel(&redis, "tlsgate");
    let store = format!(
        "store = \"redis\"\nredis_mode = \"sentinel\"\nsentinel_service = \"tlsgate\"\nservers = [\"{}\"]\n\
         lookup_timeout = \"50ms\"\n",
        sentinel.redis_url()
    );
    let c = Cluster::new();
    let (a, b) = (c.node(&store), c.node(&store));
    session_id_crosses_nodes(&c, &a, &b);
}

/// One bench run of new TLS 1.2 connections resuming by session ID through `port` (the
/// balancer); returns the JSON summary.
fn bench(port: u16, secs: u64, dir: &Path, name: &str) -> serde_json::Value {
    let json = dir.join(name);
    let url = format!("https://127.0.0.1:{port}/hello");
    let out = std::process::Command::new(binary())
        .args([
            "bench",
            "--new-conn",
            "--tls",
            "1.2",
            "--no-ticket",
            "-c",
            "4",
            "-t",
            "4",
            "-d",
        ])
        .arg(format!("{secs}s"))
        .args(["--timeout", "5s", "--json"])
        .arg(&json)
        .arg(&url)
        .output()
        .expect("run tlsgate bench");
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|_| panic!("no summary: {}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(&text).expect("bench JSON")
}

#[test]
fn killing_redis_under_load_fails_no_request_and_resumption_comes_back() {
    let mut redis = StoreProcess::redis();
    let c = Cluster::new();
    // Two nodes behind a round-robin balancer: consecutive connections land on different nodes,
    // so a session resumes only if the other node finds it in the store. The bench's four threads
    // each offer their own session, and each node's local cache holds one session, so the local
    // cache alone cannot resume most of them.
    let tiny = "[tls.session_cache]\nsize = 1\n";
    let (a, b) = (
        c.node_with(&c.secret, &redis_store(&redis), tiny),
        c.node_with(&c.secret, &redis_store(&redis), tiny),
    );
    wait_connected(&a);
    wait_connected(&b);
    let lb = tlsgate_testkit::RoundRobin::start([a.https, b.https].map(|p| ([127, 0, 0, 1], p).into()).to_vec());
    let dir = tempfile::tempdir().unwrap();
    let up = bench(lb.port, 2, dir.path(), "up.json");
    assert_eq!(up["errors_total"], 0, "{up}");
    let up_fraction = up["resumed_fraction"].as_f64().unwrap();
    assert!(
        up_fraction > 0.8,
        "with the store up most handshakes resume across nodes: {up}"
    );

    // Kill Redis one second into a load run.
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        redis.kill();
        redis
    });
    let during = bench(lb.port, 3, dir.path(), "during.json");
    let mut redis = killer.join().unwrap();
    assert_eq!(
        during["errors_total"], 0,
        "no request may fail when the store dies: {during}"
    );
    for node in [&a, &b] {
        assert_eq!(state(node, "session_store_breaker_open"), 1.0, "{}", node.gw.log());
    }
    let down = bench(lb.port, 2, dir.path(), "down.json");
    assert_eq!(down["errors_total"], 0, "{down}");
    let down_fraction = down["resumed_fraction"].as_f64().unwrap();
    assert!(
        down_fraction < up_fraction - 0.3,
        "resumption must fall without the store: up {up_fraction}, down {down_fraction}"
    );
    assert!(state(&a, "session_store_lookup_skipped_total") > 0.0);

    redis.restart();
    wait_connected(&a);
    wait_connected(&b);
    let back = bench(lb.port, 2, dir.path(), "back.json");
    assert_eq!(back["errors_total"], 0, "{back}");
    assert!(
        back["resumed_fraction"].as_f64().unwrap() > 0.8,
        "resumption must come back with the store: {back}"
    );
}

#[test]
fn a_paused_redis_delays_handshakes_no_longer_than_the_lookup_bound() {
    let redis = StoreProcess::redis();
    let c = Cluster::new();
    // The store's own I/O timeout is long (5 s): only lookup_timeout can bound the wait.
    let store = format!(
        "store = \"redis\"\nservers = [\"{}\"]\nlookup_timeout = \"20ms\"\nwrite_timeout = \"5s\"\nbreaker_failures = 1000\n",
        redis.redis_url()
    );
    let (a, b) = (c.node(&store), c.node(&store));
    wait_connected(&a);
    wait_connected(&b);
    let sess = c.file("slow.sess");
    c.save(&a, TLS12_ID, &sess);
    wait_written(&a, 1.0);
    redis.pause();
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let started = Instant::now();
        let resumed = c.resumes(&b, TLS12_ID, &sess);
        // s_client holds stdin open for 700 ms after sending; subtract nothing, bound generously.
        slowest = slowest.max(started.elapsed());
        assert!(!resumed, "a paused store cannot resume");
    }
    redis.resume();
    assert!(state(&b, "session_store_lookup_timeout_total") >= 5.0, "{}", b.gw.log());
    assert!(
        slowest < Duration::from_millis(700 + 1500),
        "a handshake waited {slowest:?} on a paused store (bound: 20 ms lookups)"
    );
}

/// The early data s_client sends, and what it reports.
fn early(c: &Cluster, node: &Node, sess: &Path, request: &str) -> tlsgate_testkit::Output {
    let req = c.pki.write("early.txt", request);
    c.s_client(
        node,
        &[
            "-tls1_3",
            "-sess_in",
            sess.to_str().unwrap(),
            "-early_data",
            req.to_str().unwrap(),
        ],
        "",
    )
}

#[test]
fn zero_rtt_is_accepted_once_per_ticket_across_the_cluster() {
    let mut redis = StoreProcess::redis();
    let origin = tlsgate_testkit::Origin::start("origin");
    let routes = format!(
        "\n[[site.route]]\npath_prefix = \"/echo\"\nupstream = \"o\"\n\n[[upstream]]\nname = \"o\"\nservers = [\"{}\"]\n",
        origin.addr()
    );
    let c = Cluster::new();
    let node = |c: &Cluster| {
        let (https, admin) = (free_port(), free_port());
        let top = format!(
            "[tls.tickets]\nearly_data = true\n\n[cluster]\nsecret_files = [{}]\nbreaker_retry = \"200ms\"\n{}",
            toml_path(&c.secret),
            redis_store(&redis)
        );
        let text = config_with_certs(&existing_site_certs(&c.pki), https, admin, &top, &routes);
        Node {
            https,
            gw: GatewayProcess::start(binary(), &text, admin, &[https]),
        }
    };
    let (a, b) = (node(&c), node(&c));
    wait_connected(&a);
    wait_connected(&b);
    let sess = c.file("ed.sess");
    c.save(&a, &["-tls1_3"], &sess);

    let get = "GET /echo/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let first = early(&c, &b, &sess, get);
    assert!(
        first.stdout.contains("Early data was accepted"),
        "{}\n{}",
        first.all(),
        b.gw.log()
    );
    assert!(
        first.stdout.to_ascii_lowercase().contains("early-data: 1"),
        "the upstream must see Early-Data: 1:\n{}",
        first.all()
    );
    assert_eq!(state(&b, "early_data_accepted_total"), 1.0);

    // The same ticket's early data again, to the other node: refused (a replay).
    let replay = early(&c, &a, &sess, get);
    assert!(replay.stdout.contains("Early data was rejected"), "{}", replay.all());
    assert_eq!(state(&a, "early_data_refused_replay_total"), 1.0);

    // A POST in early data is answered 425 Too Early.
    let sess2 = c.file("ed2.sess");
    c.save(&a, &["-tls1_3"], &sess2);
    let post = early(
        &c,
        &b,
        &sess2,
        "POST /echo/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    );
    assert!(post.stdout.contains("Early data was accepted"), "{}", post.all());
    assert!(post.stdout.contains("425"), "{}", post.all());
    assert_eq!(state(&b, "early_data_requests_too_early_total"), 1.0);

    // With the store down, 0-RTT is refused, never accepted unchecked.
    let sess3 = c.file("ed3.sess");
    c.save(&a, &["-tls1_3"], &sess3);
    redis.kill();
    let down = early(&c, &b, &sess3, get);
    assert!(down.stdout.contains("Early data was rejected"), "{}", down.all());
    assert!(state(&b, "early_data_refused_unavailable_total") >= 1.0);
}

#[test]
fn tampered_and_foreign_store_entries_and_tickets_are_refused() {
    let redis = StoreProcess::redis();
    let c = Cluster::new();
    let (a, b) = (c.node(&redis_store(&redis)), c.node(&redis_store(&redis)));
    wait_connected(&a);
    wait_connected(&b);
    let sess = c.file("t.sess");
    c.save(&a, TLS12_ID, &sess);
    wait_written(&a, 1.0);
    let key = redis.redis_cli(&["--scan", "--pattern", "tlsgate:s:*"]);
    let key = key.trim();
    // Flip one byte of the sealed entry.
    let entry = redis.redis_cli(&["--raw", "GETRANGE", key, "0", "-1"]);
    assert!(!entry.is_empty());
    let status = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "-x", "SETRANGE", key, "30"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"X")?;
            child.wait()
        })
        .unwrap();
    assert!(status.success());
    assert!(!c.resumes(&b, TLS12_ID, &sess), "a tampered entry must not resume");
    assert_eq!(state(&b, "session_store_lookup_rejected_total"), 1.0);

    // A node with another secret: its entries and tickets mean nothing here, and vice versa.
    let foreign_secret = c.pki.write("foreign.key", &hex_secret(0x77));
    let f = c.node_with(&foreign_secret, &redis_store(&redis), "");
    wait_connected(&f);
    let fs = c.file("f.sess");
    c.save(&a, TLS12_ID, &fs);
    wait_written(&a, 2.0);
    assert!(
        !c.resumes(&f, TLS12_ID, &fs),
        "foreign node resumed a session it cannot open"
    );
    assert_eq!(state(&f, "session_store_lookup_rejected_total"), 1.0);
    let ft = c.file("f13.sess");
    c.save(&f, &["-tls1_3"], &ft);
    assert!(!c.resumes(&a, &["-tls1_3"], &ft), "a foreign ticket must not resume");
}

/// `tlsgate probe` against `node` with `args`; returns (exit status, output).
fn probe(node: &Node, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(binary())
        .arg("probe")
        .arg(format!("127.0.0.1:{}", node.https))
        .args(["--path", "/hello"])
        .args(args)
        .output()
        .expect("run tlsgate probe");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn probe_carries_sessions_between_nodes() {
    let redis = StoreProcess::redis();
    let c = Cluster::new();
    let (a, b) = (c.node(&redis_store(&redis)), c.node(&redis_store(&redis)));
    wait_connected(&a);
    wait_connected(&b);
    for (name, args) in [
        ("id", &["--tls", "1.2", "--no-ticket"][..]),
        ("t13", &["--tls", "1.3"][..]),
    ] {
        let file = c.file(&format!("probe-{name}.der"));
        let file = file.to_str().unwrap();
        let mut save = vec!["-n", "1", "--sess-out", file];
        save.extend_from_slice(args);
        let (ok, text) = probe(&a, &save);
        assert!(ok, "{text}");
        wait_written(&a, 1.0);
        let mut offer = vec!["-n", "1", "--sess-in", file, "--expect-resume"];
        offer.extend_from_slice(args);
        let (ok, text) = probe(&b, &offer);
        assert!(
            ok,
            "{name}: node B did not resume node A's session:\n{text}\n{}",
            b.gw.log()
        );
    }
    // And the expectation really fails where resumption cannot happen: a foreign cluster.
    let other = c.pki.write("other.key", &hex_secret(0x33));
    let f = c.node_with(&other, "store = \"local\"", "");
    let file = c.file("probe-t13.der");
    let (ok, text) = probe(
        &f,
        &[
            "-n",
            "1",
            "--tls",
            "1.3",
            "--sess-in",
            file.to_str().unwrap(),
            "--expect-resume",
        ],
    );
    assert!(!ok, "a foreign node resumed:\n{text}");
}

#[test]
fn a_short_cluster_secret_stops_the_gateway_at_startup_with_the_reason() {
    let c = Cluster::new();
    let short = c.pki.write("short.key", &"ab".repeat(16));
    let (https, admin) = (free_port(), free_port());
    let top = format!("[cluster]\nsecret_files = [{}]\n", toml_path(&short));
    let text = config_with_certs(&existing_site_certs(&c.pki), https, admin, &top, "");
    let log = match GatewayProcess::try_start(binary(), &text, admin, &[https]) {
        Ok(_) => panic!("a gateway started with a 16-byte cluster secret"),
        Err(e) => e.to_string(),
    };
    assert!(log.contains("at least 32 bytes") && log.contains("found 16"), "{log}");
}

#[test]
fn sessions_cross_nodes_through_a_redis_cluster() {
    let redis = StoreProcess::redis_cluster(3);
    let c = Cluster::new();
    let urls: Vec<String> = redis.iter().map(StoreProcess::redis_url).collect();
    let store = format!("store = \"redis\"\nredis_mode = \"cluster\"\nservers = {urls:?}\nlookup_timeout = \"50ms\"\n");
    let (a, b) = (c.node(&store), c.node(&store));
    session_id_crosses_nodes(&c, &a, &b);
    // The entries are spread over the cluster's masters by key slot.
    let keys: usize = redis
        .iter()
        .map(|r| r.redis_cli(&["dbsize"]).trim().parse::<usize>().unwrap_or(0))
        .sum();
    assert!(keys >= 1, "no session entry in the Redis Cluster");
}

/// Ids of the clients connected to Redis now (without the `redis-cli` asking).
fn redis_client_ids(redis: &StoreProcess) -> Vec<String> {
    redis
        .redis_cli(&["client", "list"])
        .lines()
        .filter(|l| !l.contains("cmd=client|list") && !l.contains("cmd=client "))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")).map(str::to_string))
        .collect()
}

/// A store that stops answering without closing its connections (here: paused) trips the
/// breaker; the node must then drop those connections and use new ones, since a connection that
/// hangs never fails on its own.
#[test]
fn a_hung_redis_connection_is_replaced_once_the_breaker_opens() {
    let redis = StoreProcess::redis();
    let c = Cluster::new();
    let store = format!(
        "store = \"redis\"\nservers = [\"{}\"]\nlookup_timeout = \"20ms\"\nbreaker_failures = 2\n",
        redis.redis_url()
    );
    // b keeps one session locally: alternating two sessions sends every lookup to Redis.
    let a = c.node(&store);
    let b = c.node_with(&c.secret, &store, "[tls.session_cache]\nsize = 1\n");
    wait_connected(&a);
    wait_connected(&b);
    let (sess, other) = (c.file("hung.sess"), c.file("hung2.sess"));
    c.save(&a, TLS12_ID, &sess);
    c.save(&a, TLS12_ID, &other);
    wait_written(&a, 2.0);
    // b's worker opens its own connection on its first lookups.
    assert!(
        wait_until(Duration::from_secs(10), || c.resumes(&b, TLS12_ID, &sess)),
        "{}",
        b.gw.log()
    );
    drop(a); // only b's connections are left in Redis
    assert!(wait_until(Duration::from_secs(5), || redis_client_ids(&redis).len() <= 2));
    let old = redis_client_ids(&redis);
    assert!(!old.is_empty(), "b holds no connection to Redis");
    redis.pause();
    for _ in 0..2 {
        assert!(!c.resumes(&b, TLS12_ID, &other), "a paused store cannot resume");
        assert!(!c.resumes(&b, TLS12_ID, &sess), "a paused store cannot resume");
    }
    assert_eq!(state(&b, "session_store_breaker_open"), 1.0, "{}", b.gw.log());
    redis.resume();
    wait_connected(&b);
    assert!(
        wait_until(Duration::from_secs(10), || c.resumes(&b, TLS12_ID, &other)
            && c.resumes(&b, TLS12_ID, &sess)),
        "resumption must come back: {}",
        b.gw.log()
    );
    // Every connection from before the pause (the control loop's and the worker's) is gone.
    assert!(
        wait_until(Duration::from_secs(10), || {
            let _ = c.resumes(&b, TLS12_ID, &other);
            let _ = c.resumes(&b, TLS12_ID, &sess);
            let now = redis_client_ids(&redis);
            !now.is_empty() && old.iter().all(|id| !now.contains(id))
        }),
        "hung connections kept: before {old:?}, now {:?}\n{}",
        redis_client_ids(&redis),
        b.gw.log()
    );
}

//! Issue 28, part 2: request rate limits per route. Real gateways, real clients (curl, openssl
//! s_client), and for the cluster-wide limits two gateways sharing a real redis-server: a
//! per-address limit answers 429 with Retry-After and the RateLimit fields after its quota and
//! recovers when told; a per-header limit keeps two clients apart; two nodes hold one limit
//! together within a measured error; a killed store leaves each node limiting alone, visibly;
//! a flood of distinct keys leaves the table at its fixed size.

mod common;

use common::{binary, config_with_certs, existing_site_certs, site_certs, wait_until};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_testkit::{free_port, toml_path, GatewayProcess, StoreProcess, TestPki};

/// One response of a curl run: status and header lines (names in lower case).
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Runs one curl over `urls` (each `(url, extra args before it)`; curl reuses its connections)
/// and returns every response's status and headers, in order.
fn curl_all(ca: &std::path::Path, urls: &[(String, Vec<String>)]) -> Vec<Answer> {
    let mut args: Vec<String> = Vec::new();
    for (i, (url, extra)) in urls.iter().enumerate() {
        if i > 0 {
            args.push("--next".into());
        }
        // `-w "\n"`: a body without a final newline does not run into the next status line.
        args.extend(["-sS", "-i", "-w", "\n", "--http1.1", "--max-time", "10", "--cacert"].map(String::from));
        args.push(ca.display().to_string());
        args.extend(extra.iter().cloned());
        args.push(url.clone());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tlsgate_testkit::run("curl", &refs, b"", Duration::ZERO, Duration::from_secs(60));
    let mut answers = Vec::new();
    let mut in_head = false;
    for line in out.stdout.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("HTTP/1.1 ") {
            let status = rest.split(' ').next().and_then(|s| s.parse().ok()).unwrap_or(0);
            answers.push(Answer {
                status,
                headers: Vec::new(),
            });
            in_head = true;
        } else if in_head {
            match line.split_once(':') {
                Some((n, v)) => answers
                    .last_mut()
                    .unwrap()
                    .headers
                    .push((n.to_ascii_lowercase(), v.trim().to_string())),
                None => in_head = false,
            }
        }
    }
    assert_eq!(answers.len(), urls.len(), "one answer per request:\n{}", out.all());
    answers
}

fn url(port: u16, path: &str) -> String {
    format!("https://localhost:{port}{path}")
}

fn limited_total(gw: &GatewayProcess, limit: &str) -> f64 {
    gw.metric("tlsgate_rate_limited_total", &[&format!("limit=\"{limit}\"")])
}

#[test]
fn a_per_address_limit_answers_429_with_its_fields_and_recovers_when_told() {
    let f = common::start(
        "",
        "[[site.route]]\npath_prefix = \"/limited\"\nrate_limit = \"per-client\"\n\
         fixed_response = { body = \"ok\" }\n\n\
         [[rate_limit]]\nname = \"per-client\"\nrequests = 3\nwindow = \"1s\"\n",
    );
    let ca = f.pki.ca_file();
    let five: Vec<_> = (0..5).map(|_| (url(f.https, "/limited"), vec![])).collect();
    let answers = curl_all(&ca, &five);
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429], "{answers:?}");
    let refused = &answers[3];
    let retry: u64 = refused.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=2).contains(&retry), "{refused:?}");
    assert_eq!(refused.header("ratelimit-policy"), Some("\"per-client\";q=3;w=1"));
    let state = refused.header("ratelimit").expect("RateLimit");
    assert!(state.starts_with("\"per-client\";r=0;t="), "{state}");
    // Allowed responses carry no fields unless the limit asks for them.
    assert!(answers[0].header("ratelimit").is_none());
    // Other routes are not limited.
    assert_eq!(curl_all(&ca, &[(url(f.https, "/hello"), vec![])])[0].status, 200);
    assert_eq!(limited_total(&f.gw, "per-client"), 2.0);
    // Told when to come back, it is served again.
    std::thread::sleep(Duration::from_secs(retry));
    let again = curl_all(&ca, &[(url(f.https, "/limited"), vec![])]);
    assert_eq!(again[0].status, 200, "{again:?}");
    assert!(
        f.gw.log().contains("request refused: over its rate limit"),
        "{}",
        f.gw.log()
    );
}

#[test]
fn a_per_header_limit_keeps_clients_apart_and_leaves_requests_without_the_header_alone() {
    let f = common::start(
        "",
        "[[site.route]]\npath_prefix = \"/api\"\nrate_limit = [\"per-key\"]\n\
         fixed_response = { body = \"ok\" }\n\n\
         [[rate_limit]]\nname = \"per-key\"\nkey = \"header\"\nheader = \"x-api-key\"\n\
         requests = 2\nwindow = \"10s\"\nheaders_on_allowed = true\n",
    );
    let ca = f.pki.ca_file();
    let with = |key: &str| {
        (
            url(f.https, "/api"),
            vec!["-H".to_string(), format!("x-api-key: {key}")],
        )
    };
    let answers = curl_all(
        &ca,
        &[with("alice"), with("alice"), with("alice"), with("bob"), with("bob")],
    );
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 200, 429, 200, 200], "{answers:?}");
    // Allowed responses carry the fields when asked to.
    assert_eq!(answers[3].header("ratelimit-policy"), Some("\"per-key\";q=2;w=10"));
    assert!(
        answers[3]
            .header("ratelimit")
            .unwrap()
            .starts_with("\"per-key\";r=1;t="),
        "{answers:?}"
    );
    assert!(
        answers[4]
            .header("ratelimit")
            .unwrap()
            .starts_with("\"per-key\";r=0;t="),
        "{answers:?}"
    );
    // No key, no limit (counted).
    let bare: Vec<_> = (0..4).map(|_| (url(f.https, "/api"), vec![])).collect();
    assert!(curl_all(&ca, &bare).iter().all(|a| a.status == 200));
    assert_eq!(
        f.gw.metric("tlsgate_rate_limit_key_absent_total", &["limit=\"per-key\""]),
        4.0
    );
    assert_eq!(limited_total(&f.gw, "per-key"), 1.0);
}

/// Two nodes sharing one store (redis-server or memcached).
struct Pair {
    pki: TestPki,
    nodes: Vec<(u16, GatewayProcess)>,
}

const CLUSTER_LIMITS: &str = "\n[[rate_limit]]\nname = \"shared\"\nkey = \"header\"\nheader = \"x-client\"\n\
    requests = 40\nwindow = \"10s\"\nscope = \"cluster\"\n\n\
    [[rate_limit]]\nname = \"warm\"\nkey = \"route\"\nrequests = 1000\nwindow = \"10s\"\nscope = \"cluster\"\n";

const CLUSTER_ROUTES: &str = "[[site.route]]\npath_prefix = \"/shared\"\nrate_limit = \"shared\"\n\
    fixed_response = { body = \"ok\" }\n\n\
    [[site.route]]\npath_prefix = \"/warm\"\nrate_limit = \"warm\"\nfixed_response = { body = \"ok\" }\n";

impl Pair {
    /// Two nodes on `store`, a redis-server unless `memcached`.
    fn start(store: &StoreProcess, memcached: bool) -> Self {
        let pki = TestPki::new();
        let _ = site_certs(&pki);
        let secret: PathBuf = pki.write("cluster.key", &format!("{}\n", "5a".repeat(32)));
        let nodes = (0..2)
            .map(|_| {
                let (https, admin) = (free_port(), free_port());
                let (kind, server) = if memcached {
                    ("memcached", store.addr())
                } else {
                    ("redis", store.redis_url())
                };
                let top = format!(
                    "[cluster]\nsecret_files = [{}]\nstore = \"{kind}\"\nservers = [\"{server}\"]\nbreaker_retry = \"200ms\"\n",
                    toml_path(&secret),
                );
                let routes = format!("{CLUSTER_ROUTES}{CLUSTER_LIMITS}");
                let text = config_with_certs(&existing_site_certs(&pki), https, admin, &top, &routes);
                (https, GatewayProcess::start(binary(), &text, admin, &[https]))
            })
            .collect();
        Self { pki, nodes }
    }

    fn store_up(&self, i: usize) -> f64 {
        self.nodes[i].1.metric("tlsgate_rate_limit_store_up", &[])
    }

    /// Until both nodes have reconciled with the store (requests on `/warm` touch it).
    fn wait_store(&self, up: bool) {
        let want = f64::from(u8::from(up));
        for i in 0..2 {
            let ok = wait_until(Duration::from_secs(15), || {
                curl_all(&self.pki.ca_file(), &[(url(self.nodes[i].0, "/warm"), vec![])]);
                std::thread::sleep(Duration::from_millis(150));
                self.store_up(i) == want
            });
            assert!(ok, "node {i}: store_up never {want}:\n{}", self.nodes[i].1.log());
        }
    }

    /// `n` requests on `/shared` as client `who`, alternating between the nodes (or on one);
    /// returns the statuses.
    fn send(&self, who: &str, n: usize, only: Option<usize>) -> Vec<u16> {
        let urls: Vec<_> = (0..n)
            .map(|i| {
                let node = only.unwrap_or(i % 2);
                (
                    url(self.nodes[node].0, "/shared"),
                    vec!["-H".to_string(), format!("x-client: {who}")],
                )
            })
            .collect();
        curl_all(&self.pki.ca_file(), &urls).iter().map(|a| a.status).collect()
    }
}

/// Waits until at least `left` of the current 10 s window remains, so a run does not straddle
/// two windows (the sliding window would rightly admit a little more there).
fn wait_for_window_room(left: Duration) {
    let into = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() % 10_000;
    let remaining = Duration::from_millis(10_000 - into as u64);
    if remaining < left {
        std::thread::sleep(remaining + Duration::from_millis(50));
    }
}

#[test]
fn two_nodes_sharing_redis_hold_one_limit_together() {
    let redis = StoreProcess::redis();
    let pair = Pair::start(&redis, false);
    one_limit_together(&pair);
    // The store holds the cluster's count of the window.
    let stored = wait_until(Duration::from_secs(5), || {
        !redis
            .redis_cli(&["--scan", "--pattern", "tlsgate:rl:shared:*"])
            .trim()
            .is_empty()
    });
    assert!(stored, "no counters in the store");
}

#[test]
fn two_nodes_sharing_memcached_hold_one_limit_together() {
    let memcached = StoreProcess::memcached();
    let pair = Pair::start(&memcached, true);
    one_limit_together(&pair);
}

fn one_limit_together(pair: &Pair) {
    pair.wait_store(true);
    // 120 requests from one client, alternating between the nodes, against a limit of 40: each
    // node alone would admit 40 (80 in all). The property holds within one 10 s window: a run
    // that a loaded machine stretched across a window boundary (the sliding window then rightly
    // admits more) is repeated with a fresh client, at most three times.
    let window = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() / 10_000;
    let mut statuses = Vec::new();
    for attempt in 0..3 {
        wait_for_window_room(Duration::from_secs(6));
        let started = SystemTime::now();
        statuses = pair.send(&format!("alice{attempt}"), 120, None);
        if window(started) == window(SystemTime::now()) {
            break;
        }
        eprintln!("attempt {attempt} straddled a window boundary; again");
    }
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    let refused = statuses.iter().filter(|&&s| s == 429).count();
    assert_eq!(ok + refused, 120, "{statuses:?}");
    eprintln!("cluster-wide limit 40: {ok} admitted of 120 over two nodes");
    assert!(
        (36..=44).contains(&ok),
        "within 10 % of the limit: {ok} admitted\n{statuses:?}\n--- node 0:\n{}\n--- node 1:\n{}",
        pair.nodes[0]
            .1
            .metrics()
            .lines()
            .filter(|l| l.contains("rate_limit"))
            .collect::<Vec<_>>()
            .join("\n"),
        pair.nodes[1]
            .1
            .metrics()
            .lines()
            .filter(|l| l.contains("rate_limit"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(pair
        .nodes
        .iter()
        .all(|(_, gw)| gw.metric("tlsgate_rate_limit_syncs_total", &["result=\"ok\""]) > 0.0));
}

#[test]
fn with_the_store_killed_each_node_limits_alone_and_says_so() {
    let mut redis = StoreProcess::redis();
    let pair = Pair::start(&redis, false);
    pair.wait_store(true);
    redis.kill();
    pair.wait_store(false);
    for (_, gw) in &pair.nodes {
        assert!(
            gw.log().contains("the cluster store does not answer"),
            "one WARN line:\n{}",
            gw.log()
        );
    }
    // Per node now: the quota on each node, for a client neither node counted before.
    let on_first = pair.send("bob", 50, Some(0));
    let on_second = pair.send("bob", 50, Some(1));
    let ok = |v: &[u16]| v.iter().filter(|&&s| s == 200).count();
    assert_eq!((ok(&on_first), ok(&on_second)), (40, 40), "{on_first:?}\n{on_second:?}");
    assert!(
        pair.nodes[0]
            .1
            .metric("tlsgate_rate_limit_syncs_total", &["result=\"error\""])
            > 0.0
    );
    // The store comes back: so do the shared limits.
    redis.restart();
    pair.wait_store(true);
    assert!(pair.nodes[0].1.log().contains("cluster-wide limits are shared again"));
}

#[test]
fn a_flood_of_distinct_keys_keeps_the_table_at_its_size() {
    let f = common::start(
        "",
        "[[site.route]]\npath_prefix = \"/api\"\nrate_limit = \"per-key\"\n\
         fixed_response = { body = \"ok\" }\n\n\
         [[rate_limit]]\nname = \"per-key\"\nkey = \"header\"\nheader = \"x-key\"\n\
         requests = 1\nwindow = \"60s\"\ntracked_keys = 512\n",
    );
    // 3000 pipelined requests on one connection, each with a key never seen before.
    let n = 3000;
    let mut requests = String::new();
    for i in 0..n {
        let close = if i == n - 1 { "Connection: close\r\n" } else { "" };
        requests.push_str(&format!(
            "GET /api HTTP/1.1\r\nHost: localhost\r\nx-key: k{i}\r\n{close}\r\n"
        ));
    }
    let out = common::s_client_at(
        &f.connect(),
        &f.pki.ca_file(),
        &["-quiet", "-alpn", "http/1.1", "-servername", "localhost"],
        &requests,
    );
    assert_eq!(
        out.stdout.matches("HTTP/1.1 200").count(),
        n,
        "every new key is admitted"
    );
    let capacity = f.gw.metric("tlsgate_rate_limit_table_capacity", &["limit=\"per-key\""]);
    assert_eq!(capacity, 512.0);
    assert_eq!(
        f.gw.metric("tlsgate_rate_limit_tracked_keys", &["limit=\"per-key\""]),
        512.0
    );
    assert!(f.gw.metric("tlsgate_rate_limit_evictions_total", &["limit=\"per-key\""]) >= (n - 512) as f64);
    // The process did not grow with the keys either way: one more client is still limited.
    let again = curl_all(
        &f.pki.ca_file(),
        &[
            (url(f.https, "/api"), vec!["-H".into(), "x-key: z".into()]),
            (url(f.https, "/api"), vec!["-H".into(), "x-key: z".into()]),
        ],
    );
    assert_eq!([again[0].status, again[1].status], [200, 429]);
}

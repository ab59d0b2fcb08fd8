//! The control plane end to end, with real processes: redis-server, two key servers, two
//! gateways following the cluster document (`[control]`), and `tlsgate ctl` editing it. A drain
//! and an add reach both gateways within 2 s (new signatures go to the new key server, the
//! drained one's counter stays flat), a rollback reverses it, a malformed document written
//! straight into Redis is refused by every node (reported in the registry) while the last good
//! version keeps serving, and so does everything when Redis dies.

mod common;
mod keyless_env;

use keyless_env::*;
use std::time::{Duration, Instant};
use tlsgate_testkit::{require, StoreProcess};

fn ctl(redis: &str, args: &[&str]) -> tlsgate_testkit::Output {
    let bin = common::binary().to_str().unwrap().to_string();
    let mut all = vec!["ctl", "--redis", redis, "--cluster", "it", "--author", "test"];
    all.extend_from_slice(args);
    tlsgate_testkit::run(&bin, &all, b"", Duration::ZERO, Duration::from_secs(20))
}

fn ctl_ok(redis: &str, args: &[&str]) -> String {
    let out = ctl(redis, args);
    assert_eq!(out.status, Some(0), "tlsgate ctl {args:?}:\n{}", out.all());
    out.stdout
}

/// Members of pool `main` as `(address, drain)`, from a gateway's admin API.
fn members(gw: &Gateway) -> Vec<(String, bool)> {
    pool_members(gw, "main").into_iter().map(|(a, _, d)| (a, d)).collect()
}

/// Waits until every gateway shows `want`; returns how long it took.
fn converge(gws: &[&Gateway], want: &[(String, bool)]) -> Duration {
    let start = Instant::now();
    assert!(
        common::wait_until(Duration::from_secs(5), || gws.iter().all(|g| members(g) == want)),
        "gateways did not converge on {want:?}: {:?}",
        gws.iter().map(|g| members(g)).collect::<Vec<_>>()
    );
    start.elapsed()
}

/// `n` fresh handshakes through each gateway, all of which must succeed.
fn handshakes(gws: &[&Gateway], n: usize) {
    for g in gws {
        for _ in 0..n {
            let out = g.curl(&[]);
            assert_eq!(out.stdout, "Hello, world!", "{}\n{}", out.all(), g.gw.log());
        }
    }
}

#[test]
fn ctl_edits_reach_every_gateway_within_two_seconds_and_roll_back() {
    require("curl");
    require("redis-server");
    let mut redis = StoreProcess::redis();
    let url = redis.redis_url();
    let env = KeylessSetup::new();
    let (a, b) = (env.keyserver(), env.keyserver());
    let control = |id: &str| {
        format!("[control]\nredis_url = \"{url}\"\ncluster_name = \"it\"\nnode_id = \"{id}\"\npoll_interval = \"500ms\"\nheartbeat_interval = \"300ms\"\n")
    };
    let g1 = env.gateway(&[a.addr()], &control("gw1"));
    let g2 = env.gateway(&[a.addr()], &control("gw2"));
    let gws = [&g1, &g2];
    let (aa, ba) = (a.addr(), b.addr());

    // v1: the TOML's own list, published; v2: add b; v3: drain a.
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1.json");
    std::fs::write(
        &v1,
        format!(r#"{{"key_server_pools":{{"main":{{"members":[{{"address":"{aa}"}}]}}}}}}"#),
    )
    .unwrap();
    ctl_ok(&url, &["publish", v1.to_str().unwrap()]);
    converge(&gws, &[(aa.clone(), false)]);
    let out = ctl_ok(&url, &["add", "main", &ba]);
    assert!(out.contains("version 2"), "{out}");
    let out = ctl_ok(&url, &["-m", "move to b", "drain", "main", &aa]);
    assert!(out.contains("version 3") && out.contains("drain"), "{out}");
    let took = converge(&gws, &[(aa.clone(), true), (ba.clone(), false)]);
    assert!(took <= Duration::from_secs(2), "applied after {took:?}");
    // b must be connected before it can take traffic; then a's counter stays flat.
    assert!(common::wait_until(Duration::from_secs(3), || {
        gws.iter().all(|g| {
            g.gw.metric("tlsgate_keyless_connections", &[&format!("server=\"{ba}\"")]) >= 1.0
        })
    }));
    let (a0, b0) = (a.ops(), b.ops());
    handshakes(&gws, 4);
    assert_eq!(a.ops(), a0, "the drained key server signed");
    assert!(b.ops() >= b0 + 8.0, "b signed {} of 8", b.ops() - b0);

    // History shows who, what and why.
    let history = ctl_ok(&url, &["history"]);
    assert!(
        history.contains("by test") && history.contains("move to b"),
        "{history}"
    );
    assert!(
        history.contains(&format!("/key_server_pools/main/members/{aa}/drain")),
        "{history}"
    );

    // Roll back to v1: a alone again.
    let out = ctl_ok(&url, &["rollback", "1"]);
    assert!(out.contains("version 4") && out.contains("rollback of 1"), "{out}");
    let took = converge(&gws, &[(aa.clone(), false)]);
    assert!(took <= Duration::from_secs(2), "rollback applied after {took:?}");
    let (a0, b0) = (a.ops(), b.ops());
    handshakes(&gws, 3);
    assert!(a.ops() >= a0 + 6.0, "a signed {} of 6", a.ops() - a0);
    assert_eq!(b.ops(), b0, "the removed key server signed");

    // A malformed version written straight into Redis: refused by both, reported, v4 serves on.
    let prefix = "tlsgate:control:{it}:";
    redis.redis_cli(&[
        "SET",
        &format!("{prefix}version:5"),
        "{\"version\":5,\"document\":{\"key_server_pools\":{\"main\":{\"members\":[{\"address\":\"nope\"}]}}}}",
    ]);
    redis.redis_cli(&["SET", &format!("{prefix}current"), "5"]);
    assert!(
        common::wait_until(Duration::from_secs(5), || {
            let nodes = ctl(&url, &["nodes"]).stdout;
            nodes
                .lines()
                .filter(|l| l.contains("applied=4") && l.contains("refused=5"))
                .count()
                == 2
        }),
        "both nodes report the refusal: {}",
        ctl(&url, &["nodes"]).all()
    );
    assert_eq!(members(&g1), vec![(aa.clone(), false)]);
    handshakes(&gws, 2);
    assert!(g1.gw.log().contains("version refused"), "{}", g1.gw.log());
    assert_eq!(
        g1.gw.metric("tlsgate_state", &["name=\"control_version_rejected\""]),
        1.0
    );

    // Redis dies: both keep serving their last good version and say so.
    redis.kill();
    assert!(common::wait_until(Duration::from_secs(5), || gws
        .iter()
        .all(
            |g| g.gw.metric("tlsgate_state", &["name=\"control_store_down\""]) == 1.0
        )));
    handshakes(&gws, 2);
    assert_eq!(members(&g2), vec![(aa.clone(), false)]);
    assert!(g2.gw.log().contains("store unreachable"), "{}", g2.gw.log());
}

#[test]
fn a_document_naming_an_unknown_pool_is_refused_with_the_reason() {
    require("redis-server");
    let redis = StoreProcess::redis();
    let url = redis.redis_url();
    let env = KeylessSetup::new();
    let a = env.keyserver();
    let top = format!(
        "[control]\nredis_url = \"{url}\"\ncluster_name = \"it\"\nnode_id = \"solo\"\nheartbeat_interval = \"300ms\"\n"
    );
    let gw = env.gateway(&[a.addr()], &top);
    let out = ctl_ok(&url, &["add", "elsewhere", "127.0.0.1:1"]);
    assert!(out.contains("version 1"), "{out}");
    assert!(
        common::wait_until(Duration::from_secs(5), || ctl(&url, &["nodes"])
            .stdout
            .contains("no [[keyless.pool]] of this name on this node")),
        "{}",
        ctl(&url, &["nodes"]).all()
    );
    assert_eq!(members(&gw), vec![(a.addr(), false)]);
    // The CLI refuses a structurally invalid edit itself, naming the problem.
    let out = ctl(&url, &["weight", "elsewhere", "127.0.0.1:1", "0"]);
    assert_ne!(out.status, Some(0));
    assert!(out.all().contains("weight"), "{}", out.all());
}

#[test]
fn upstream_groups_and_site_switches_follow_the_document_and_survive_a_reload() {
    require("curl");
    require("redis-server");
    let redis = StoreProcess::redis();
    let url = redis.redis_url();
    let (one, two) = (
        tlsgate_testkit::Origin::start("one"),
        tlsgate_testkit::Origin::start("two"),
    );
    let top = format!(
        "[control]\nredis_url = \"{url}\"\ncluster_name = \"it\"\nnode_id = \"solo\"\nheartbeat_interval = \"300ms\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:{}\"]\n",
        one.port
    );
    let routes = "[[site.route]]\npath_prefix = \"/app\"\nupstream = \"app\"\n[site.hsts]\nmax_age = \"5m\"\n";
    let gw = common::start(&top, routes);
    let get = |path: &str| gw.curl(&["-i"], path).stdout;
    assert!(get("/app").contains("origin=one"));
    assert!(get("/hello").to_ascii_lowercase().contains("strict-transport-security"));

    let dir = tempfile::tempdir().unwrap();
    let publish = |name: &str, json: String| {
        let file = dir.path().join(name);
        std::fs::write(&file, json).unwrap();
        ctl_ok(&url, &["publish", file.to_str().unwrap()])
    };
    // v1: origin two instead of one (one drained), HSTS off.
    publish(
        "v1.json",
        format!(
            r#"{{"upstreams":{{"app":{{"servers":[{{"address":"127.0.0.1:{}","drain":true}},{{"address":"127.0.0.1:{}"}}]}}}},"sites":{{"main":{{"hsts":false}}}}}}"#,
            one.port, two.port
        ),
    );
    assert!(
        common::wait_until(Duration::from_secs(2), || get("/app").contains("origin=two")),
        "{}",
        gw.gw.log()
    );
    assert!(!get("/hello").to_ascii_lowercase().contains("strict-transport-security"));

    // v2: maintenance; the upstream group goes back to the TOML's server.
    publish("v2.json", r#"{"sites":{"main":{"maintenance":true}}}"#.into());
    assert!(common::wait_until(Duration::from_secs(2), || get("/hello")
        .starts_with("HTTP/2 503")
        || get("/hello").starts_with("HTTP/1.1 503")));
    assert!(get("/app").contains("maintenance"), "{}", get("/app"));
    // A reload re-reads the file and lays the document over it again.
    assert_eq!(gw.gw.reload().0, 200);
    assert!(get("/hello").contains(" 503"), "{}", get("/hello"));

    // A switch this node cannot flip is refused; the maintenance version keeps serving.
    publish("v3.json", r#"{"sites":{"main":{"early_data":true}}}"#.into());
    assert!(
        common::wait_until(Duration::from_secs(5), || ctl(&url, &["nodes"])
            .stdout
            .contains("refused=3")),
        "{}",
        ctl(&url, &["nodes"]).all()
    );
    assert!(ctl(&url, &["nodes"]).stdout.contains("not per site"));
    assert!(get("/hello").contains(" 503"));

    // Roll back to v1.
    ctl_ok(&url, &["rollback", "1"]);
    assert!(common::wait_until(Duration::from_secs(2), || get("/app").contains("origin=two")));
    let hello = get("/hello");
    assert!(
        hello.contains("Hello, world!") && !hello.to_ascii_lowercase().contains("strict-transport"),
        "{hello}"
    );
}

#[test]
fn access_rules_follow_the_document_and_fall_back_to_the_toml() {
    require("curl");
    require("redis-server");
    let redis = StoreProcess::redis();
    let url = redis.redis_url();
    let top = format!(
        "[control]\nredis_url = \"{url}\"\ncluster_name = \"it\"\nnode_id = \"solo\"\nheartbeat_interval = \"300ms\"\n\n\
         [[access_rule]]\naction = \"deny\"\ncidrs = [\"192.0.2.0/24\"]\nname = \"from_toml\"\n"
    );
    let gw = common::start(&top, "");
    let served = || gw.curl(&[], "/hello").stdout == "Hello, world!";
    assert!(served());

    let dir = tempfile::tempdir().unwrap();
    let publish = |name: &str, json: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, json).unwrap();
        ctl(&url, &["publish", file.to_str().unwrap()])
    };
    // v1: loopback denied by a rule of the document, refused at accept (before any TLS work).
    let out = publish(
        "v1.json",
        r#"{"access_rules":[{"action":"allow","cidrs":["10.0.0.0/8"]},{"action":"deny","cidrs":["127.0.0.0/8"],"name":"lab"}]}"#,
    );
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(
        common::wait_until(Duration::from_secs(3), || !served()),
        "{}",
        gw.gw.log()
    );
    assert!(
        gw.gw
            .metric("tlsgate_access_refused_total", &["rule=\"lab\"", "stage=\"accept\""])
            >= 1.0
    );
    // The history shows the change rule by rule.
    assert!(ctl_ok(&url, &["history", "1"]).contains("/access_rules"));

    // A malformed rule never reaches the nodes: publishing it is refused with the reason.
    let out = publish(
        "bad.json",
        r#"{"access_rules":[{"action":"deny","ja4":["not-a-ja4"]}]}"#,
    );
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(out.all().contains("access_rules/0/ja4/0"), "{}", out.all());
    assert!(!served(), "the last good version still applies");

    // v2 through the console: only loopback's rule changes (allowed first); then `null` takes
    // the rules out of the document and the TOML's list (which allows loopback) applies again,
    // also after a reload.
    let console = try_start_console(&url, "it", "127.0.0.1", None).unwrap_or_else(|l| panic!("{l}"));
    let (s, v) = console.api(
        "PUT",
        "/api/access-rules",
        r#"{"rules":[{"action":"allow","cidrs":["127.0.0.1"]},{"action":"deny","name":"rest"}],"comment":"lab opens"}"#,
    );
    assert_eq!(s, 200, "{v}");
    assert!(common::wait_until(Duration::from_secs(3), served), "{}", gw.gw.log());
    let (s, v) = console.api("GET", "/api/access-rules", "");
    assert_eq!((s, v["rules"][1]["name"].as_str()), (200, Some("rest")), "{v}");
    let (s, v) = console.api(
        "PUT",
        "/api/access-rules",
        r#"{"rules":[{"action":"deny","cidrs":["300.0.0.0/8"]}]}"#,
    );
    assert_eq!(s, 400, "{v}");
    let (s, v) = console.api("PUT", "/api/access-rules", r#"{"rules":null}"#);
    assert_eq!(s, 200, "{v}");
    assert!(ctl_ok(&url, &["show"]).lines().all(|l| !l.contains("access_rules")));
    assert!(served());
    assert_eq!(gw.gw.reload().0, 200);
    assert!(served());
    assert!(gw.gw.metric("tlsgate_access_refused_total", &["rule=\"from_toml\""]) == 0.0);
}

//! The node registry against a real `redis-server`: heartbeats, listing, TTL expiry,
//! deregistration.

mod common;

use common::{doc, store};
use std::time::{Duration, Instant};
use tlsgate_control::{spawn_heartbeat, NodeStatus, RejectedVersion, WatchConfig, Watcher};
use tlsgate_testkit::stores::StoreProcess;

#[tokio::test]
async fn nodes_register_list_and_expire() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    assert!(s.nodes().await.unwrap().is_empty());

    let mut a = NodeStatus::new("gw-a");
    a.admin_url = Some("http://10.0.0.1:9090".into());
    a.applied_version = Some(4);
    a.rejected = Some(RejectedVersion {
        version: 5,
        reasons: vec!["weight 0".into()],
    });
    a.extra.insert("healthy".into(), serde_json::json!(true));
    let mut b = NodeStatus::new("gw-b");
    b.started_at -= 10_000;
    s.register_node(&a, Duration::from_millis(600)).await.unwrap();
    s.register_node(&b, Duration::from_secs(30)).await.unwrap();

    let nodes = s.nodes().await.unwrap();
    assert_eq!(
        nodes.iter().map(|n| n.node_id.as_str()).collect::<Vec<_>>(),
        ["gw-a", "gw-b"]
    );
    assert_eq!(nodes[0].admin_url, a.admin_url);
    assert_eq!(nodes[0].applied_version, Some(4));
    assert_eq!(nodes[0].rejected, a.rejected);
    assert_eq!(nodes[0].extra["healthy"], serde_json::json!(true));
    assert_eq!(nodes[1].started_at, b.started_at);
    assert!(nodes[1].last_seen >= b.last_seen);
    let ttl: i64 = redis
        .redis_cli(&["PTTL", "tlsgate:control:{test}:node:gw-a"])
        .trim()
        .parse()
        .unwrap();
    assert!((1..=600).contains(&ttl), "PTTL {ttl}");

    // A heartbeat extends the TTL; without one the node disappears.
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.register_node(&a, Duration::from_millis(600)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(s.nodes().await.unwrap().len(), 2, "heartbeat did not extend the TTL");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let nodes = s.nodes().await.unwrap();
    assert_eq!(nodes.iter().map(|n| n.node_id.as_str()).collect::<Vec<_>>(), ["gw-b"]);
    // The expired id is pruned from the index.
    assert_eq!(
        redis.redis_cli(&["ZRANGE", "tlsgate:control:{test}:nodes", "0", "-1"]),
        "gw-b\n"
    );

    s.deregister_node("gw-b").await.unwrap();
    assert!(s.nodes().await.unwrap().is_empty());
    assert!(s
        .register_node(&NodeStatus::new(""), Duration::from_secs(1))
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_reports_the_watchers_view() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let watcher = Watcher::spawn(
        s.clone(),
        WatchConfig {
            poll_interval: Duration::from_millis(200),
            ..Default::default()
        },
    );
    let mut base = NodeStatus::new("gw-1");
    base.admin_url = Some("http://127.0.0.1:9901".into());
    let beat = spawn_heartbeat(s.clone(), base, watcher.subscribe(), Duration::from_secs(10));

    let v1 = s
        .publish(&doc(&[("ks1:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    let n = wait_node(&s, "applied version 1", |n| n.applied_version == Some(v1.version)).await;
    assert_eq!(n.admin_url.as_deref(), Some("http://127.0.0.1:9901"));
    assert_eq!(n.rejected, None);

    redis.redis_cli(&["SET", "tlsgate:control:{test}:version:2", "garbage"]);
    redis.redis_cli(&["SET", "tlsgate:control:{test}:current", "2"]);
    let n = wait_node(&s, "rejected version 2", |n| {
        n.rejected.as_ref().is_some_and(|r| r.version == 2)
    })
    .await;
    assert_eq!(n.applied_version, Some(1));
    assert!(n.rejected.unwrap().reasons[0].contains("not a valid record"));

    beat.abort();
    let ttl: i64 = redis
        .redis_cli(&["PTTL", "tlsgate:control:{test}:node:gw-1"])
        .trim()
        .parse()
        .unwrap();
    assert!((20_000..=30_000).contains(&ttl), "PTTL {ttl}");
}

/// Polls the registry until node `gw-1` satisfies `pred` (the heartbeat interval is long: only
/// the watcher-change trigger can make this quick).
async fn wait_node(s: &tlsgate_control::ControlStore, what: &str, pred: impl Fn(&NodeStatus) -> bool) -> NodeStatus {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let nodes = s.nodes().await.unwrap();
        if let Some(n) = nodes.iter().find(|n| n.node_id == "gw-1" && pred(n)) {
            return n.clone();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {nodes:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

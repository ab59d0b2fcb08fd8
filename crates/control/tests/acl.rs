//! The Redis ACL that docs/CONTROL.md recommends for gateways, checked against a real
//! `redis-server`: a gateway can watch, heartbeat and list nodes, but cannot publish.

mod common;

use common::{doc, wait_for};
use std::time::Duration;
use tlsgate_control::{ControlError, ControlStore, NodeStatus, StoreConfig, WatchConfig, Watcher};
use tlsgate_testkit::stores::StoreProcess;

/// The ACL rule of docs/CONTROL.md (kept in sync by this test reading the doc).
fn documented_acl() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CONTROL.md")).unwrap();
    let start = doc.find("  user gateway on ").expect("ACL example in docs/CONTROL.md");
    let block = &doc[start..doc[start..].find("```").unwrap() + start];
    block.split_whitespace().skip(1).map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_acl_allows_watching_and_heartbeats_but_not_publishing() {
    let redis = StoreProcess::redis();
    let acl = documented_acl();
    assert_eq!(acl[0], "gateway");
    let mut args: Vec<&str> = vec!["ACL", "SETUSER"];
    args.extend(
        acl.iter()
            .map(|s| if s == ">PASSWORD" { ">gw-secret" } else { s.as_str() }),
    );
    assert_eq!(redis.redis_cli(&args).trim(), "OK", "{args:?}");

    let admin = common::store(&redis);
    let mut cfg = StoreConfig::new(format!("redis://gateway:gw-secret@127.0.0.1:{}", redis.port), "test");
    cfg.response_timeout = Duration::from_millis(500);
    let gw = ControlStore::new(cfg).unwrap();

    let v1 = admin
        .publish(&doc(&[("ks1:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    let w = Watcher::spawn(
        gw.clone(),
        WatchConfig {
            poll_interval: Duration::from_secs(60),
            ..Default::default()
        },
    );
    let mut rx = w.subscribe();
    wait_for(&mut rx, Duration::from_secs(3), "version 1 as the gateway user", |s| {
        s.subscribed && s.current.as_deref() == Some(&v1)
    })
    .await;
    // Notifications reach the restricted user too.
    let v2 = admin
        .publish(&doc(&[("ks1:1", 2, false)]), "alice", None, Some(1))
        .await
        .unwrap();
    wait_for(&mut rx, Duration::from_millis(500), "version 2 by pub/sub", |s| {
        s.current.as_deref() == Some(&v2)
    })
    .await;
    assert_eq!(gw.history(5).await.unwrap().len(), 2);

    gw.register_node(&NodeStatus::new("gw-1"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(gw.nodes().await.unwrap().len(), 1);
    gw.deregister_node("gw-1").await.unwrap();

    match gw
        .publish(&doc(&[("evil:1", 1, false)]), "mallory", None, Some(2))
        .await
    {
        Err(ControlError::Store(e)) => assert!(e.to_string().to_lowercase().contains("perm"), "{e}"),
        other => panic!("the gateway user could publish: {other:?}"),
    }
    assert_eq!(admin.current_version().await.unwrap(), Some(2));
}

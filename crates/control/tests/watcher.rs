//! The watcher against a real `redis-server`: pub/sub delivery, the polling fallback, refusal of
//! invalid versions, and the store going away (killed, paused) and coming back.

mod common;

use common::{doc, store, wait_for};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_control::{ClusterDocument, WatchConfig, Watcher};
use tlsgate_testkit::stores::StoreProcess;

const P: &str = "tlsgate:control:{test}:";

fn config(poll: Duration) -> WatchConfig {
    WatchConfig {
        poll_interval: poll,
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_millis(400),
        ..Default::default()
    }
}

/// A version record as a foreign writer would put it in Redis.
fn record(version: u64, parent: Option<u64>, document: &str) -> String {
    let parent = parent.map_or("null".to_string(), |p| p.to_string());
    format!(r#"{{"version":{version},"parent":{parent},"author":"mallory","at":1,"document":{document}}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_is_seen_through_pubsub_quickly() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    // Polling every minute: within the test only a notification can deliver.
    let w = Watcher::spawn(s.clone(), config(Duration::from_secs(60)));
    let mut rx = w.subscribe();
    wait_for(&mut rx, Duration::from_secs(5), "subscription", |st| {
        st.subscribed && st.checked_at > 0
    })
    .await;
    assert_eq!(w.current(), None);

    for (i, parent) in [None, Some(1), Some(2)].into_iter().enumerate() {
        let d = doc(&[("ks1:1", i as u32 + 1, false)]);
        let t0 = Instant::now();
        let v = s.publish(&d, "alice", None, parent).await.unwrap();
        let st = wait_for(&mut rx, Duration::from_millis(200), "the new version", |st| {
            st.current.as_ref().map(|c| c.version) == Some(v.version)
        })
        .await;
        eprintln!("version {} seen after {:?}", v.version, t0.elapsed());
        assert_eq!(st.current.unwrap().document, d);
        assert_eq!(st.rejected, None);
        assert_eq!(st.store_error, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_finds_versions_written_without_notification() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    s.publish(&doc(&[("ks1:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    let w = Watcher::spawn(s.clone(), config(Duration::from_millis(300)));
    let mut rx = w.subscribe();
    wait_for(&mut rx, Duration::from_secs(5), "version 1", |st| {
        st.current.as_ref().is_some_and(|c| c.version == 1)
    })
    .await;
    wait_for(&mut rx, Duration::from_secs(5), "subscription", |st| st.subscribed).await;

    // Written straight into Redis, no PUBLISH: only polling can find it.
    let d2 = r#"{"key_server_pools":{"main":{"members":[{"address":"ks9:1","weight":4}]}}}"#;
    redis.redis_cli(&["SET", &format!("{P}version:2"), &record(2, Some(1), d2)]);
    let t0 = Instant::now();
    redis.redis_cli(&["SET", &format!("{P}current"), "2"]);
    let st = wait_for(&mut rx, Duration::from_millis(1500), "version 2 by polling", |st| {
        st.current.as_ref().is_some_and(|c| c.version == 2)
    })
    .await;
    eprintln!("unannounced version seen after {:?}", t0.elapsed());
    assert_eq!(st.current.unwrap().document, ClusterDocument::from_json(d2).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_versions_are_refused_and_the_last_good_stays() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let good = s
        .publish(&doc(&[("ks1:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    let mut cfg = config(Duration::from_millis(300));
    // The gateway's own check: only pool "main" exists in its TOML.
    cfg.validator = Some(Arc::new(|d: &ClusterDocument| {
        d.key_server_pools
            .keys()
            .filter(|k| k.as_str() != "main")
            .map(|k| format!("key_server_pools/{k}: not in the static configuration"))
            .collect()
    }));
    let w = Watcher::spawn(s.clone(), cfg);
    let mut rx = w.subscribe();
    wait_for(&mut rx, Duration::from_secs(5), "version 1", |st| {
        st.current.as_ref().is_some_and(|c| c.version == 1)
    })
    .await;

    let cases: [(u64, String, &str); 5] = [
        (2, "this is not json".into(), "not a valid record"),
        (
            3,
            record(
                3,
                Some(2),
                r#"{"key_server_pools":{"main":{"members":[{"address":"ks1:1","weight":0}]}}}"#,
            ),
            "weight 0 is outside 1..=1000",
        ),
        (
            4,
            record(4, Some(3), r#"{"key_server_pools":{},"colour":"red"}"#),
            "unknown field `colour`",
        ),
        (
            5,
            record(
                5,
                Some(4),
                r#"{"key_server_pools":{"other":{"members":[{"address":"o:1"}]}}}"#,
            ),
            "key_server_pools/other: not in the static configuration",
        ),
        (6, String::new(), "version 6 has no record"),
    ];
    for (n, text, reason) in cases {
        if !text.is_empty() {
            redis.redis_cli(&["SET", &format!("{P}version:{n}"), &text]);
        }
        redis.redis_cli(&["SET", &format!("{P}current"), &n.to_string()]);
        redis.redis_cli(&["PUBLISH", &format!("{P}changes"), &n.to_string()]);
        let st = wait_for(&mut rx, Duration::from_secs(3), reason, |st| {
            st.rejected.as_ref().is_some_and(|r| r.version == n)
        })
        .await;
        let reasons = st.rejected.unwrap().reasons;
        assert!(reasons.iter().any(|r| r.contains(reason)), "version {n}: {reasons:?}");
        assert_eq!(
            st.current.as_deref(),
            Some(&good),
            "version {n} replaced the last good one"
        );
        assert_eq!(st.store_error, None);
    }

    // Repairing the refused version in place is noticed (it is re-read on every poll).
    let fixed = r#"{"key_server_pools":{"main":{"members":[{"address":"ks2:1"}]}}}"#;
    redis.redis_cli(&["SET", &format!("{P}version:6"), &record(6, Some(5), fixed)]);
    let st = wait_for(&mut rx, Duration::from_secs(3), "repaired version 6", |st| {
        st.current.as_ref().is_some_and(|c| c.version == 6)
    })
    .await;
    assert_eq!(st.rejected, None);

    // A good publish through the API after refusals is delivered.
    let v7 = s
        .publish(&doc(&[("ks3:1", 1, false)]), "alice", None, Some(6))
        .await
        .unwrap();
    wait_for(&mut rx, Duration::from_secs(3), "version 7", |st| {
        st.current.as_deref() == Some(&v7)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_killed_keeps_last_good_then_resumes() {
    let mut redis = StoreProcess::redis();
    let s = store(&redis);
    let v1 = s
        .publish(&doc(&[("ks1:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    let w = Watcher::spawn(s.clone(), config(Duration::from_secs(60)));
    let mut rx = w.subscribe();
    wait_for(&mut rx, Duration::from_secs(5), "version 1 and subscription", |st| {
        st.subscribed && st.current.as_deref() == Some(&v1)
    })
    .await;

    redis.kill();
    // The subscription breaks at once; the next check fails and reports it.
    let st = wait_for(&mut rx, Duration::from_secs(5), "store error", |st| {
        st.store_error.is_some()
    })
    .await;
    eprintln!("store error: {:?}", st.store_error);
    assert_eq!(st.current.as_deref(), Some(&v1));
    assert!(!st.subscribed);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(w.current().as_deref(), Some(&v1));

    // Back (empty: no persistence). The watcher reconnects and resubscribes by itself; an empty
    // store leaves the last good version in place.
    redis.restart();
    let st = wait_for(&mut rx, Duration::from_secs(5), "resubscribed", |st| {
        st.store_error.is_none() && st.subscribed
    })
    .await;
    assert_eq!(st.current.as_deref(), Some(&v1));
    // A new history that reuses number 1 with another document is still noticed, by pub/sub.
    let fresh = s
        .publish(&doc(&[("ks2:1", 2, false)]), "bob", None, None)
        .await
        .unwrap();
    assert_eq!(fresh.version, 1);
    wait_for(&mut rx, Duration::from_millis(500), "the new version 1", |st| {
        st.current.as_deref() == Some(&fresh)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_store_is_reported_and_recovered() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let v1 = s
        .publish(&doc(&[("ks1:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    let w = Watcher::spawn(s.clone(), config(Duration::from_millis(200)));
    let mut rx = w.subscribe();
    wait_for(&mut rx, Duration::from_secs(5), "version 1", |st| {
        st.current.as_deref() == Some(&v1)
    })
    .await;

    redis.pause();
    let st = wait_for(&mut rx, Duration::from_secs(5), "store error while paused", |st| {
        st.store_error.is_some()
    })
    .await;
    eprintln!("store error: {:?}", st.store_error);
    assert_eq!(w.current().as_deref(), Some(&v1));
    redis.resume();
    wait_for(&mut rx, Duration::from_secs(5), "recovery", |st| {
        st.store_error.is_none()
    })
    .await;
    let v2 = s
        .publish(&doc(&[("ks1:1", 2, false)]), "alice", None, Some(1))
        .await
        .unwrap();
    wait_for(&mut rx, Duration::from_secs(2), "version 2", |st| {
        st.current.as_deref() == Some(&v2)
    })
    .await;
}

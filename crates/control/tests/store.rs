//! The versioned document against a real `redis-server`: publish and read, version numbers,
//! conflicts, validation on publish, history with diffs, rollback, garbage in the store.

mod common;

use common::{doc, store};
use tlsgate_control::{ChangeKind, ControlError, Member};
use tlsgate_testkit::stores::StoreProcess;

#[tokio::test]
async fn publish_read_and_versions_increment() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    assert!(matches!(
        tlsgate_control::ControlStore::new(tlsgate_control::StoreConfig::new(redis.redis_url(), "a}b")),
        Err(ControlError::Config(_))
    ));
    assert_eq!(s.current().await.unwrap(), None);
    assert_eq!(s.current_version().await.unwrap(), None);

    let d1 = doc(&[("ks1:2407", 1, false)]);
    let v1 = s.publish(&d1, "alice", Some("first"), None).await.unwrap();
    assert_eq!((v1.version, v1.parent, v1.author.as_str()), (1, None, "alice"));
    assert_eq!(v1.comment.as_deref(), Some("first"));
    assert_eq!(s.current().await.unwrap().as_ref(), Some(&v1));

    let d2 = doc(&[("ks1:2407", 1, false), ("ks2:2407", 3, false)]);
    let v2 = s.publish(&d2, "bob", None, Some(1)).await.unwrap();
    assert_eq!((v2.version, v2.parent), (2, Some(1)));
    assert_eq!(s.current().await.unwrap().unwrap().document, d2);
    // Older versions stay readable and unchanged.
    assert_eq!(s.get(1).await.unwrap(), v1);
    assert!(matches!(s.get(3).await, Err(ControlError::NotFound(3))));

    // The layout is what docs/CONTROL.md says.
    let p = "tlsgate:control:{test}:";
    assert_eq!(redis.redis_cli(&["GET", &format!("{p}current")]).trim(), "2");
    assert_eq!(redis.redis_cli(&["GET", &format!("{p}seq")]).trim(), "2");
    assert_eq!(
        redis.redis_cli(&["LRANGE", &format!("{p}history"), "0", "-1"]),
        "2\n1\n"
    );
    let raw = redis.redis_cli(&["GET", &format!("{p}version:2")]);
    let json: serde_json::Value = serde_json::from_str(raw.trim()).unwrap();
    assert_eq!(json["version"], 2);
    assert_eq!(json["parent"], 1);
    assert_eq!(json["author"], "bob");
    assert_eq!(json["document"]["key_server_pools"]["main"]["members"][1]["weight"], 3);
}

#[tokio::test]
async fn conflicting_publish_is_refused_and_writes_nothing() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let d = doc(&[("ks1:2407", 1, false)]);
    s.publish(&d, "alice", None, None).await.unwrap();

    // Both read version 1; alice publishes first; bob's edit based on 1 is refused.
    let alice = doc(&[("ks1:2407", 2, false)]);
    let bob = doc(&[("ks1:2407", 9, false)]);
    s.publish(&alice, "alice", None, Some(1)).await.unwrap();
    let err = s.publish(&bob, "bob", None, Some(1)).await.unwrap_err();
    assert!(
        matches!(
            err,
            ControlError::Conflict {
                expected: Some(1),
                current: Some(2)
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "conflict: expected current version 1, but it is 2");
    // "Expect an empty store" conflicts too.
    assert!(matches!(
        s.publish(&bob, "bob", None, None).await,
        Err(ControlError::Conflict {
            expected: None,
            current: Some(2)
        })
    ));
    assert_eq!(s.current().await.unwrap().unwrap().document, alice);
    assert!(matches!(s.get(3).await, Err(ControlError::NotFound(3))));

    // Ten concurrent publishers on the same parent: exactly one wins.
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let d = doc(&[("ks1:2407", 10 + i, false)]);
                s.publish(&d, &format!("writer{i}"), None, Some(2)).await
            })
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(v) => {
                won += 1;
                assert_eq!((v.version, v.parent), (3, Some(2)));
            }
            Err(ControlError::Conflict { current: Some(3), .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(s.current_version().await.unwrap(), Some(3));
    assert!(matches!(s.get(4).await, Err(ControlError::NotFound(4))));
}

#[tokio::test]
async fn invalid_documents_are_not_published() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let bad = doc(&[("ks1:2407", 0, false), ("ks1:2407", 1, false)]);
    match s.publish(&bad, "alice", None, None).await {
        Err(ControlError::Invalid(reasons)) => {
            assert!(reasons.iter().any(|r| r.contains("weight 0 is outside")), "{reasons:?}");
            assert!(reasons.iter().any(|r| r.contains("duplicate address")), "{reasons:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.publish(&doc(&[("a:1", 1, false)]), " ", None, None).await,
        Err(ControlError::Invalid(r)) if r == ["author is empty"]
    ));
    assert_eq!(s.current_version().await.unwrap(), None);
}

#[tokio::test]
async fn history_lists_versions_newest_first_with_diffs() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    s.publish(&doc(&[("ks1:1", 1, false)]), "alice", Some("create"), None)
        .await
        .unwrap();
    s.publish(&doc(&[("ks1:1", 5, false)]), "bob", Some("heavier"), Some(1))
        .await
        .unwrap();
    s.publish(&doc(&[("ks1:1", 5, false), ("ks2:1", 1, true)]), "carol", None, Some(2))
        .await
        .unwrap();

    let h = s.history(10).await.unwrap();
    let heads: Vec<_> = h.iter().map(|e| (e.version, e.parent, e.author.as_str())).collect();
    assert_eq!(
        heads,
        vec![(3, Some(2), "carol"), (2, Some(1), "bob"), (1, None, "alice")]
    );
    assert!(h.iter().all(|e| e.problems.is_empty()), "{h:#?}");
    assert_eq!(h[1].comment.as_deref(), Some("heavier"));
    assert!(h[0].at >= h[1].at && h[1].at >= h[2].at && h[2].at > 0);

    assert_eq!(h[0].changes.len(), 1, "{:#?}", h[0].changes);
    assert_eq!(h[0].changes[0].path, "/key_server_pools/main/members/ks2:1");
    assert_eq!(h[0].changes[0].kind, ChangeKind::Added);
    assert_eq!(
        h[0].changes[0].new,
        Some(serde_json::json!({"address": "ks2:1", "weight": 1, "drain": true}))
    );
    let c2: Vec<String> = h[1].changes.iter().map(ToString::to_string).collect();
    assert_eq!(c2, ["~ /key_server_pools/main/members/ks1:1/weight: 1 -> 5"]);
    assert_eq!(h[2].changes.len(), 1);
    assert_eq!(h[2].changes[0].path, "/key_server_pools/main");
    assert_eq!(h[2].changes[0].kind, ChangeKind::Added);

    // A limit; parents outside it are still loaded for the diff.
    let h1 = s.history(1).await.unwrap();
    assert_eq!(h1.len(), 1);
    assert_eq!(h1[0].changes, h[0].changes);
    assert!(s.history(0).await.unwrap().is_empty());

    // A garbage record is reported, not fatal.
    redis.redis_cli(&["SET", "tlsgate:control:{test}:version:2", "{oops"]);
    let h = s.history(10).await.unwrap();
    assert!(h[1].problems[0].contains("not a valid record"), "{:?}", h[1].problems);
    assert!(h[0].problems[0].starts_with("parent: "), "{:?}", h[0].problems);
    assert!(h[2].problems.is_empty());
}

#[tokio::test]
async fn rollback_publishes_a_new_version_equal_to_the_old_one() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let d1 = doc(&[("ks1:1", 1, false), ("ks2:1", 1, false)]);
    let d2 = doc(&[("ks1:1", 1, true), ("ks2:1", 1, false)]);
    s.publish(&d1, "alice", None, None).await.unwrap();
    s.publish(&d2, "bob", Some("drain ks1"), Some(1)).await.unwrap();

    let v3 = s.rollback(1, "carol", None).await.unwrap();
    assert_eq!((v3.version, v3.parent, v3.rollback_of), (3, Some(2), Some(1)));
    assert_eq!(v3.document, d1);
    assert_eq!(v3.comment.as_deref(), Some("rollback to version 1"));
    assert_eq!(s.current().await.unwrap().unwrap(), v3);
    // Append-only: 1 and 2 are untouched.
    assert_eq!(s.get(2).await.unwrap().document, d2);
    let h = s.history(10).await.unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!(h[0].rollback_of, Some(1));
    let undo: Vec<String> = h[0].changes.iter().map(ToString::to_string).collect();
    assert_eq!(undo, ["~ /key_server_pools/main/members/ks1:1/drain: true -> false"]);

    assert!(matches!(
        s.rollback(42, "carol", None).await,
        Err(ControlError::NotFound(42))
    ));
    assert_eq!(s.current_version().await.unwrap(), Some(3));
}

#[tokio::test]
async fn garbage_pointer_and_hand_written_versions() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    let p = "tlsgate:control:{test}:";
    redis.redis_cli(&["SET", &format!("{p}current"), "abc"]);
    assert!(matches!(s.current_version().await, Err(ControlError::Corrupt { .. })));
    // A garbage pointer counts as empty: publishing with no parent repairs it.
    let v = s
        .publish(&doc(&[("a:1", 1, false)]), "alice", None, None)
        .await
        .unwrap();
    assert_eq!((v.version, v.parent), (1, None));

    // Someone wrote version 7 by hand, moving `current` past `seq`: numbers never collide.
    redis.redis_cli(&["SET", &format!("{p}version:7"), "junk"]);
    redis.redis_cli(&["SET", &format!("{p}current"), "7"]);
    let v = s
        .publish(&doc(&[("a:1", 2, false)]), "alice", None, Some(7))
        .await
        .unwrap();
    assert_eq!((v.version, v.parent), (8, Some(7)));
    assert_eq!(
        s.get(8).await.unwrap().document.key_server_pools["main"].members,
        vec![Member {
            address: "a:1".into(),
            weight: 2,
            drain: false
        }]
    );
    assert!(matches!(s.get(7).await, Err(ControlError::Corrupt { .. })));
}

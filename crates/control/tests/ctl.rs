//! The `tlsgate ctl` operations against a real `redis-server`: publish from JSON, member edits
//! (concurrent ones both land), rollback, and the printed forms.

mod common;

use common::{doc, store};
use tlsgate_control::ctl::{self, Group, MemberEdit};
use tlsgate_control::{ControlError, Member};
use tlsgate_testkit::stores::StoreProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_operations() {
    let redis = StoreProcess::redis();
    let s = store(&redis);
    assert_eq!(ctl::show(&s).await.unwrap(), None);

    // publish FILE (as text here), then with a stale --if-version.
    let dir = tempfile_dir();
    let file = dir.join("doc.json");
    std::fs::write(&file, doc(&[("ks1:1", 1, false), ("ks2:1", 1, false)]).to_json_pretty()).unwrap();
    let v1 = ctl::publish_file(&s, &file, "ops", Some("initial"), None)
        .await
        .unwrap();
    assert_eq!(v1.version, 1);
    let v2 = ctl::publish_json(
        &s,
        r#"{"key_server_pools":{"main":{"members":[{"address":"ks1:1"}]}}}"#,
        "ops",
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!((v2.version, v2.parent), (2, Some(1)));
    assert!(matches!(
        ctl::publish_json(&s, "{}", "ops", None, Some(1)).await,
        Err(ControlError::Conflict {
            expected: Some(1),
            current: Some(2)
        })
    ));
    match ctl::publish_json(&s, r#"{"key_server_pool":{}}"#, "ops", None, None).await {
        Err(ControlError::Invalid(r)) => assert!(r[0].contains("unknown field `key_server_pool`"), "{r:?}"),
        other => panic!("{other:?}"),
    }

    // Member edits: twenty concurrent single edits on different members all land (conflicts are
    // retried on the fresh document).
    let pool = Group::Pool("main".into());
    let adds: Vec<_> = (0..20)
        .map(|i| {
            let s = s.clone();
            let pool = pool.clone();
            tokio::spawn(async move {
                let edit = MemberEdit::Add {
                    weight: 2,
                    drain: false,
                };
                ctl::edit_member(&s, pool, &format!("new{i}:1"), edit, &format!("op{i}"), None).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in adds {
        results.push(t.await.unwrap());
    }
    // Each edit retries at most a few times; under twenty-way contention some may give up.
    let landed = results.iter().filter(|r| r.is_ok()).count();
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e, ControlError::Conflict { .. }), "{e:?}");
        }
    }
    eprintln!("{landed} of 20 concurrent edits landed");
    assert!(landed >= 6, "only {landed} of 20 concurrent edits landed");
    let first = format!("new{}:1", results.iter().position(|r| r.is_ok()).unwrap());
    let cur = ctl::show(&s).await.unwrap().unwrap();
    assert_eq!(cur.document.key_server_pools["main"].members.len(), 1 + landed);
    assert_eq!(cur.version, 2 + landed as u64);

    // A bulk edit is one version; a failing part refuses the whole.
    let (v, changes) = ctl::edit_members(
        &s,
        &[
            (pool.clone(), "ks1:1".into(), MemberEdit::Drain(true)),
            (pool.clone(), first.clone(), MemberEdit::Remove),
            (
                Group::Upstream("app".into()),
                "10.0.0.5:8080".into(),
                MemberEdit::Add {
                    weight: 1,
                    drain: false,
                },
            ),
        ],
        "ops",
        Some("bulk"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.parent, Some(cur.version));
    let text: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert!(
        text.contains(&"~ /key_server_pools/main/members/ks1:1/drain: false -> true".to_string()),
        "{text:?}"
    );
    assert!(text.iter().any(|t| t.starts_with("+ /upstreams/app = ")), "{text:?}");
    assert_eq!(v.document.upstreams["app"].servers, vec![Member::new("10.0.0.5:8080")]);
    let before = ctl::show(&s).await.unwrap().unwrap().version;
    match ctl::edit_member(&s, pool.clone(), "ghost:1", MemberEdit::Weight(3), "ops", None).await {
        Err(ControlError::Invalid(r)) => assert_eq!(r, ["pool \"main\" has no member ghost:1"]),
        other => panic!("{other:?}"),
    }
    // Validation still applies to edits (weight out of range).
    assert!(matches!(
        ctl::edit_member(&s, pool.clone(), "ks1:1", MemberEdit::Weight(5000), "ops", None).await,
        Err(ControlError::Invalid(_))
    ));
    assert_eq!(ctl::show(&s).await.unwrap().unwrap().version, before);

    // rollback, and the printed forms.
    let rb = ctl::rollback(&s, 1, "ops", None).await.unwrap();
    assert_eq!(rb.document, v1.document);
    let shown = ctl::render_version(&rb);
    assert!(
        shown.starts_with(&format!("# version {} (parent {before}) by ops at ", rb.version)),
        "{shown}"
    );
    assert!(shown.contains(", rollback of 1: rollback to version 1\n{"), "{shown}");
    let hist = ctl::render_history(&ctl::history(&s, 2).await.unwrap());
    assert!(
        hist.contains(&format!("version {before} (parent {}) by ops at ", before - 1)),
        "{hist}"
    );
    assert!(hist.contains("  + /key_server_pools/main/members/ks2:1 = "), "{hist}");
    assert!(hist.contains(": bulk\n"), "{hist}");
    std::fs::remove_dir_all(dir).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tlsgate-control-ctl-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

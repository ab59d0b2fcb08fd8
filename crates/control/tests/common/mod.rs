//! Shared helpers for the control-store tests: a store on a fresh `redis-server`, documents,
//! waiting on a watcher.
#![allow(dead_code)]

use std::time::{Duration, Instant};
use tlsgate_control::{ClusterDocument, ControlStore, KeyServerPool, Member, StoreConfig, WatchState};
use tlsgate_testkit::stores::StoreProcess;
use tokio::sync::watch;

/// A store on `redis` for cluster `test`, with short timeouts.
pub fn store(redis: &StoreProcess) -> ControlStore {
    let mut cfg = StoreConfig::new(redis.redis_url(), "test");
    cfg.connect_timeout = Duration::from_millis(500);
    cfg.response_timeout = Duration::from_millis(500);
    ControlStore::new(cfg).expect("store")
}

/// A document with pool `main` = `members` (address, weight, drain).
pub fn doc(members: &[(&str, u32, bool)]) -> ClusterDocument {
    let mut d = ClusterDocument::default();
    d.key_server_pools.insert(
        "main".into(),
        KeyServerPool {
            members: members
                .iter()
                .map(|(a, w, dr)| Member {
                    address: (*a).into(),
                    weight: *w,
                    drain: *dr,
                })
                .collect(),
        },
    );
    d
}

/// Waits until `pred` holds for the watcher's state; panics with the last state after `within`.
pub async fn wait_for(
    rx: &mut watch::Receiver<WatchState>,
    within: Duration,
    what: &str,
    pred: impl Fn(&WatchState) -> bool,
) -> WatchState {
    let deadline = Instant::now() + within;
    loop {
        {
            let s = rx.borrow_and_update();
            if pred(&s) {
                return s.clone();
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("the watcher task ended while waiting for {what}"),
            Err(_) => {
                let s = rx.borrow().clone();
                assert!(pred(&s), "timed out after {within:?} waiting for {what}; state: {s:#?}");
                return s;
            }
        }
    }
}

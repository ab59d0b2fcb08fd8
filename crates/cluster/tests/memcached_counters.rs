//! The rate limits' shared counters (`Backend::incr_many`) on real memcached servers: a missing
//! counter is created at its increment with its TTL, an existing one grows, a batch spread over
//! two servers comes back in its own order, and writers on separate connections racing on one
//! counter lose no increment.

use std::time::Duration;
use tlsgate_cluster::backend::Backend;
use tlsgate_cluster::memcached_store::MemcachedStore;
use tlsgate_testkit::stores::StoreProcess;

fn store(servers: &[&StoreProcess]) -> MemcachedStore {
    let addrs: Vec<String> = servers.iter().map(|s| s.addr()).collect();
    MemcachedStore::new(&addrs, 2, Duration::from_secs(2))
}

fn items(list: &[(&str, u64, u64)]) -> Vec<(String, u64, Duration)> {
    list.iter()
        .map(|(k, by, ttl)| (k.to_string(), *by, Duration::from_secs(*ttl)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_created_at_their_increment_grow_and_expire() {
    let (a, b) = (StoreProcess::memcached(), StoreProcess::memcached());
    let s = store(&[&a, &b]);
    // Twenty keys: with two servers both get some (the key's hash picks the server).
    let first: Vec<(String, u64, u64)> = (0..20).map(|i| (format!("c{i}"), i + 1, 60)).collect();
    let first: Vec<(&str, u64, u64)> = first.iter().map(|(k, by, t)| (k.as_str(), *by, *t)).collect();
    let got = s.incr_many(items(&first)).await.expect("first batch");
    assert_eq!(
        got,
        (1..=20).collect::<Vec<u64>>(),
        "created at their increments, in order"
    );
    // The same key twice in one batch, a re-read (0) and a new short-lived counter.
    let got = s
        .incr_many(items(&[("c0", 5, 60), ("c1", 0, 60), ("c0", 2, 60), ("short", 3, 1)]))
        .await
        .expect("second batch");
    assert_eq!(got, vec![6, 2, 8, 3]);
    // Memcached expires whole seconds: the 1-second counter is gone after 2.5 s, the others stay.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let got = s
        .incr_many(items(&[("short", 0, 1), ("c0", 0, 60)]))
        .await
        .expect("after expiry");
    assert_eq!(got, vec![0, 8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_on_their_own_connections_lose_no_increment() {
    let m = StoreProcess::memcached();
    let writers: Vec<_> = (0..8)
        .map(|_| {
            let s = store(&[&m]);
            tokio::spawn(async move {
                for _ in 0..50 {
                    s.incr_many(items(&[("shared", 1, 60), ("fresh", 1, 60)]))
                        .await
                        .expect("increment");
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    let got = store(&[&m])
        .incr_many(items(&[("shared", 0, 60), ("fresh", 0, 60)]))
        .await
        .expect("read");
    assert_eq!(got, vec![400, 400]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_fails_the_batch_with_a_retryable_store_error() {
    use tlsgate_error::Classify;
    let s = MemcachedStore::new(&["127.0.0.1:1".to_string()], 1, Duration::from_secs(1));
    let e = s.incr_many(items(&[("k", 1, 60)])).await.unwrap_err();
    assert!(e.retry_safe(), "{e}");
    assert!(e.to_string().starts_with("memcached tcp://127.0.0.1:1: connect"), "{e}");
}

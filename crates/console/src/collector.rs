//! The collector: every interval (2 s by default) it lists the live nodes from the registry,
//! scrapes each one's `admin_url` `/metrics` (and `/keyless/pools`), computes its
//! [`Figures`] against the previous scrape, and keeps the latest [`Snapshot`] plus a short
//! history of cluster totals for the live charts. One node's scrape is [`crate::scrape`].

use crate::figures::{compute, Figures};
use crate::prom::Scrape;
use crate::scrape::scrape;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tlsgate_control::{now_ms, ControlStore, NodeStatus};

/// How many chart points are kept (at 2 s: five minutes).
pub const SERIES_LEN: usize = 150;

/// One node as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    /// Its registry entry.
    #[serde(flatten)]
    pub status: NodeStatus,
    /// Why its metrics could not be read, if so.
    pub scrape_error: Option<String>,
    /// Figures from its metrics.
    pub figures: Option<Figures>,
    /// Its `GET /keyless/pools` answer, as is.
    pub pools: Option<serde_json::Value>,
}

/// One chart point: cluster totals at `t`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Point {
    /// Unix ms.
    pub t: u64,
    /// Full handshakes/s, all nodes.
    pub full: f64,
    /// Resumed handshakes/s.
    pub resumed: f64,
    /// Failed handshakes/s.
    pub failures: f64,
    /// Worst node p50 (ms).
    pub p50_ms: Option<f64>,
    /// Worst node p99 (ms).
    pub p99_ms: Option<f64>,
    /// Session-cache hit rate (mean over nodes with lookups).
    pub hit_rate: Option<f64>,
    /// Signatures/s per key server (`pool/server`), all nodes.
    pub ks_ops: BTreeMap<String, f64>,
}

/// What the collector knows now.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// When it was taken (Unix ms; 0: not yet).
    pub at: u64,
    /// The registry could not be read.
    pub store_error: Option<String>,
    /// The nodes.
    pub nodes: Vec<NodeView>,
    /// Chart points, oldest first.
    pub series: VecDeque<Point>,
}

/// Shared latest snapshot.
pub type Shared = Arc<RwLock<Snapshot>>;

/// Runs forever: collects every `interval` into `shared`.
pub async fn run(store: ControlStore, shared: Shared, interval: Duration) {
    let mut last: HashMap<String, (Instant, Scrape)> = HashMap::new();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (nodes, store_error) = match store.nodes().await {
            Ok(n) => (n, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let scrapes = futures_join(nodes.iter().map(|n| scrape(n.admin_url.clone())).collect()).await;
        let mut views = Vec::new();
        let mut point = Point {
            t: now_ms(),
            ..Point::default()
        };
        let mut rates = Vec::new();
        for (status, result) in nodes.into_iter().zip(scrapes) {
            let mut view = NodeView {
                status,
                scrape_error: None,
                figures: None,
                pools: None,
            };
            match result {
                Ok((text, pools)) => {
                    let cur = Scrape::parse(&text);
                    let now = Instant::now();
                    let prev = last.get(&view.status.node_id);
                    let secs = prev.map_or(0.0, |(t, _)| now.duration_since(*t).as_secs_f64());
                    let f = compute(prev.map(|(_, s)| s), &cur, secs);
                    add_to_point(&mut point, &f, &mut rates);
                    view.figures = Some(f);
                    view.pools = pools;
                    last.insert(view.status.node_id.clone(), (now, cur));
                }
                Err(e) => view.scrape_error = Some(e.to_string()),
            }
            views.push(view);
        }
        if !rates.is_empty() {
            point.hit_rate = Some(rates.iter().sum::<f64>() / rates.len() as f64);
        }
        last.retain(|id, _| views.iter().any(|v| &v.status.node_id == id));
        let mut snap = shared.write().unwrap_or_else(|p| p.into_inner());
        snap.at = point.t;
        snap.store_error = store_error;
        snap.nodes = views;
        snap.series.push_back(point);
        while snap.series.len() > SERIES_LEN {
            snap.series.pop_front();
        }
    }
}

fn add_to_point(point: &mut Point, f: &Figures, rates: &mut Vec<f64>) {
    point.full += f.full_per_s;
    point.resumed += f.resumed_per_s;
    point.failures += f.failures_per_s;
    let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    point.p50_ms = max(point.p50_ms, f.p50_ms);
    point.p99_ms = max(point.p99_ms, f.p99_ms);
    if let Some(r) = f.session_cache.hit_rate {
        rates.push(r);
    }
    for k in &f.keyservers {
        *point.ks_ops.entry(format!("{}/{}", k.pool, k.server)).or_default() += k.ops_per_s;
    }
}

async fn futures_join<T: Send + 'static>(futs: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(futs.len());
    for f in futs {
        match f.await {
            Ok(v) => out.push(v),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out
}

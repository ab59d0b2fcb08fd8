//! The connection pool toward a group's origins and the connector that opens its connections:
//! plaintext TCP (`TCP_NODELAY`, keepalive, connect timeout) with pooled keep-alive HTTP/1.1
//! connections, idle ones closed after `idle_timeout`.

use crate::body::Body;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;
use tlsgate_config::UpstreamConfig;

/// A group's pooled HTTP client.
pub type OriginPool = Client<HttpConnector, Body>;

/// The TCP connector for a group's origins.
fn tcp_connector(config: &UpstreamConfig) -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(config.connect_timeout.get()));
    connector.set_keepalive(Some(Duration::from_secs(60)));
    connector
}

/// Builds a group's (lazy) connection pool.
pub fn build(config: &UpstreamConfig) -> OriginPool {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(config.idle_timeout.get())
        .pool_max_idle_per_host(config.max_idle_per_server)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(tcp_connector(config))
}

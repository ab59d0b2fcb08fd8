//! What a server keeps of its origin connections: a stack of idle HTTP/1.1 connections, at most
//! one shared HTTP/2 connection, and (for `auto`) what its ALPN chose. A leaf: `server` holds it,
//! `pool` uses it.

use crate::body::Body;
use hyper::client::conn::{http1, http2};
use parking_lot::Mutex;
use std::sync::atomic::AtomicU8;
use std::time::Instant;

/// What `auto` learnt of a server (0 until its first connection): `http/1.1` or `h2`.
pub(super) const LEARNT_H1: u8 = 1;
pub(super) const LEARNT_H2: u8 = 2;

/// One server's connections.
#[derive(Default)]
pub struct ServerConns {
    pub(super) idle: Mutex<Vec<Idle>>,
    pub(super) h2: Mutex<Option<http2::SendRequest<Body>>>,
    pub(super) learnt: AtomicU8,
}

impl std::fmt::Debug for ServerConns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConns")
            .field("idle", &self.idle.lock().len())
            .finish_non_exhaustive()
    }
}

/// An idle HTTP/1.1 connection and since when it is idle.
pub(super) struct Idle {
    pub(super) since: Instant,
    pub(super) sender: http1::SendRequest<Body>,
}

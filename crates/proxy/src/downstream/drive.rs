//! One client connection's lifetime, whatever its HTTP version: it ends when the protocol
//! ends it, when it has been idle for `client_idle_timeout`, or finishes gracefully (in-flight
//! requests completed, no new ones) when the gateway drains.

use crate::downstream::io::Activity;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A hyper connection that can be asked to finish gracefully.
pub trait Graceful: Future {
    /// Stop taking new requests; finish the ones in flight.
    fn graceful(self: Pin<&mut Self>);
}

impl<I, S, B> Graceful for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Graceful for hyper::server::conn::http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Drives a connection until it ends, closing it when idle too long and finishing it gracefully
/// when the gateway drains. Returns true when the connection ended with an error.
pub async fn drive<C, E>(
    conn: C,
    activity: Arc<Activity>,
    idle: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> bool
where
    C: Graceful<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let mut draining = *shutdown.borrow();
    if draining {
        conn.as_mut().graceful();
    }
    let watchdog = async {
        loop {
            let quiet = activity.idle_for();
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    };
    tokio::pin!(watchdog);
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                return match res {
                    Ok(()) => false,
                    Err(e) => {
                        tracing::debug!(error = %e, "client connection ended with an error");
                        true
                    }
                };
            }
            _ = &mut watchdog => {
                tracing::debug!("closing client connection idle for {idle:?}");
                return false;
            }
            changed = shutdown.changed(), if !draining => {
                if changed.is_err() || *shutdown.borrow() {
                    draining = true;
                    conn.as_mut().graceful();
                }
            }
        }
    }
}

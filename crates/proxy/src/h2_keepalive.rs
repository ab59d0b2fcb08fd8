//! Keep-alive PINGs on an HTTP/2 connection, a client's (`[http2] keep_alive_interval`, off by
//! default) or an origin's (always): a PING every interval, and the connection is given up when
//! one is not answered within the timeout (a peer or path that died without a FIN or RST).
//! A leaf module: the downstream server and the upstream client both drive it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The keep-alive state of one connection: one timer, re-armed as PINGs go out and come back.
pub struct KeepAlive {
    pings: h2::PingPong,
    interval: Duration,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
    /// A PING is out, not answered yet.
    waiting: bool,
}

impl KeepAlive {
    /// Keep-alive on the connection whose PINGs `pings` sends.
    pub fn new(pings: h2::PingPong, interval: Duration, timeout: Duration) -> Self {
        Self {
            pings,
            interval,
            timeout,
            timer: Box::pin(tokio::time::sleep(interval)),
            waiting: false,
        }
    }

    /// Ready when a PING went unanswered for the timeout; sends PINGs as they fall due.
    pub fn poll_timed_out(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.waiting {
                match self.pings.poll_pong(cx) {
                    Poll::Ready(Ok(_)) => {
                        self.waiting = false;
                        self.timer.as_mut().reset(Instant::now() + self.interval);
                        continue;
                    }
                    // The connection failed: its own poll reports that.
                    Poll::Ready(Err(_)) => return Poll::Pending,
                    Poll::Pending => {}
                }
                return self.timer.as_mut().poll(cx);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if self.pings.send_ping(h2::Ping::opaque()).is_err() {
                return Poll::Pending;
            }
            self.waiting = true;
            self.timer.as_mut().reset(Instant::now() + self.timeout);
        }
    }
}

//! One direction of the emulated link as a pure function of packet arrivals: loss, reordering,
//! rate limit with a bounded drop-tail queue, then delay with jitter.
//!
//! Order per packet (netem's): the loss model first; a packet picked for reordering skips the
//! queue and the delay; otherwise it waits behind the bytes already queued for the rate limit
//! (serialization `bytes * 8 / rate`; dropped when the backlog would exceed `queue_bytes`), then
//! travels `delay ± jitter`. With `jitter_reorders = false` (the default, and what netem does
//! whenever a rate is set) departures never overtake each other; with `true`, jitter reorders
//! packets as netem without a rate does.

use crate::dist::{Dist, Loss, LossState};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tlsgate_error::{Classify, Side};

/// The impairments of one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkSpec {
    /// One-way delay, milliseconds.
    pub delay_ms: f64,
    /// Jitter (sigma), milliseconds.
    pub jitter_ms: f64,
    /// Jitter distribution.
    pub dist: Dist,
    /// Jitter may reorder packets (netem without a rate); otherwise FIFO.
    pub jitter_reorders: bool,
    /// Loss model.
    pub loss: Loss,
    /// Probability that a packet skips queue and delay (netem `reorder P`).
    pub reorder: f64,
    /// Rate limit in bit/s of IP packet bytes; 0 = unlimited.
    pub rate_bps: u64,
    /// Drop-tail limit of the rate limiter's backlog, bytes.
    pub queue_bytes: u64,
}

impl Default for LinkSpec {
    fn default() -> Self {
        Self {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            dist: Dist::Uniform,
            jitter_reorders: false,
            loss: Loss::None,
            reorder: 0.0,
            rate_bps: 0,
            queue_bytes: 1000 * 1500,
        }
    }
}

impl LinkSpec {
    /// A link with this one-way delay and nothing else.
    pub fn delay(ms: f64) -> Self {
        Self {
            delay_ms: ms,
            ..Self::default()
        }
    }

    /// Adds a rate limit (bit/s).
    pub fn with_rate(mut self, bps: u64) -> Self {
        self.rate_bps = bps;
        self
    }

    /// Adds independent loss.
    pub fn with_loss(mut self, p: f64) -> Self {
        self.loss = if p > 0.0 { Loss::Random { p } } else { Loss::None };
        self
    }

    /// Adds jitter.
    pub fn with_jitter(mut self, ms: f64, dist: Dist) -> Self {
        self.jitter_ms = ms;
        self.dist = dist;
        self
    }

    /// Checks the numbers: delays and jitter not negative, probabilities in `0..=1`.
    pub fn validate(&self) -> Result<(), InvalidLink> {
        let prob = |p: f64| (0.0..=1.0).contains(&p);
        let ok = self.delay_ms >= 0.0
            && self.jitter_ms >= 0.0
            && prob(self.reorder)
            && match self.loss {
                Loss::None => true,
                Loss::Random { p } => prob(p),
                Loss::GilbertElliott {
                    p,
                    r,
                    loss_bad,
                    loss_good,
                } => prob(p) && prob(r) && prob(loss_bad) && prob(loss_good),
            };
        if ok {
            Ok(())
        } else {
            Err(InvalidLink(Box::new(self.clone())))
        }
    }
}

/// Link parameters out of range (a negative delay, a probability outside `0..=1`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid link parameters: {0:?}")]
pub struct InvalidLink(pub Box<LinkSpec>);

impl Classify for InvalidLink {
    fn side(&self) -> Side {
        Side::Config
    }

    fn kind(&self) -> &'static str {
        "invalid_link"
    }
}

/// What happened to a packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Deliver at this time (seconds on the caller's clock).
    Deliver(f64),
    /// Lost by the loss model.
    Lost,
    /// Dropped by the full queue.
    QueueDrop,
}

/// The state of one direction.
#[derive(Debug)]
pub struct Link {
    spec: LinkSpec,
    rng: StdRng,
    loss: LossState,
    /// When the rate limiter finishes sending what it holds.
    busy_until: f64,
    /// Latest departure scheduled (for FIFO order).
    last_departure: f64,
}

impl Link {
    /// A direction with these impairments; `seed` makes its random draws reproducible.
    pub fn new(spec: LinkSpec, seed: u64) -> Self {
        Self {
            spec,
            rng: StdRng::seed_from_u64(seed),
            loss: LossState::default(),
            busy_until: 0.0,
            last_departure: 0.0,
        }
    }

    /// The impairments.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// Changes the impairments (queued packets keep their schedule).
    pub fn set_spec(&mut self, spec: LinkSpec) {
        self.spec = spec;
        self.loss = LossState::default();
    }

    /// Decides the fate of a packet of `len` bytes arriving at `now` (seconds).
    pub fn admit(&mut self, now: f64, len: usize) -> Verdict {
        let s = &self.spec;
        if self.loss.lose(&s.loss, &mut self.rng) {
            return Verdict::Lost;
        }
        if s.reorder > 0.0 && self.rng.random::<f64>() < s.reorder {
            return Verdict::Deliver(now);
        }
        let sent = if s.rate_bps > 0 {
            let start = self.busy_until.max(now);
            let backlog_bytes = (start - now) * s.rate_bps as f64 / 8.0;
            if backlog_bytes + len as f64 > s.queue_bytes as f64 {
                return Verdict::QueueDrop;
            }
            self.busy_until = start + len as f64 * 8.0 / s.rate_bps as f64;
            self.busy_until
        } else {
            now
        };
        let delay = s.dist.sample(&mut self.rng, s.delay_ms / 1e3, s.jitter_ms / 1e3);
        let mut at = sent + delay;
        if !s.jitter_reorders {
            at = at.max(self.last_departure);
        }
        self.last_departure = self.last_departure.max(at);
        Verdict::Deliver(at)
    }
}

/// A duration as seconds, for specs written in code.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_parameters_are_refused() {
        assert_eq!(LinkSpec::delay(10.0).with_loss(0.1).validate(), Ok(()));
        let bad = LinkSpec {
            reorder: 1.5,
            ..LinkSpec::default()
        };
        let e = bad.validate().unwrap_err();
        assert_eq!(*e.0, bad);
        assert!(e.to_string().starts_with("invalid link parameters: LinkSpec {"), "{e}");
        assert_eq!((e.side(), e.kind()), (Side::Config, "invalid_link"));
        assert!(LinkSpec::delay(-1.0).validate().is_err());
    }

    #[test]
    fn plain_delay() {
        let mut l = Link::new(LinkSpec::delay(10.0), 1);
        assert_eq!(l.admit(1.0, 100), Verdict::Deliver(1.01));
    }

    #[test]
    fn rate_serializes_and_queue_drops() {
        // 1 Mbit/s: 1250 bytes take 10 ms; queue of 2 packets.
        let spec = LinkSpec {
            rate_bps: 1_000_000,
            queue_bytes: 2500,
            ..LinkSpec::default()
        };
        let mut l = Link::new(spec, 1);
        let v: Vec<Verdict> = (0..4).map(|_| l.admit(0.0, 1250)).collect();
        assert_eq!(v[0], Verdict::Deliver(0.01));
        assert_eq!(v[1], Verdict::Deliver(0.02));
        assert_eq!(v[2], Verdict::QueueDrop);
        // Later, the backlog has drained.
        assert_eq!(l.admit(0.02, 1250), Verdict::Deliver(0.03));
    }

    #[test]
    fn fifo_unless_jitter_may_reorder() {
        for (reorders, expect_sorted) in [(false, true), (true, false)] {
            let spec = LinkSpec {
                delay_ms: 10.0,
                jitter_ms: 5.0,
                jitter_reorders: reorders,
                ..LinkSpec::default()
            };
            let mut l = Link::new(spec, 3);
            let t: Vec<f64> = (0..200)
                .map(|i| match l.admit(i as f64 * 1e-4, 100) {
                    Verdict::Deliver(t) => t,
                    v => panic!("{v:?}"),
                })
                .collect();
            assert_eq!(t.windows(2).all(|w| w[0] <= w[1]), expect_sorted);
        }
    }

    #[test]
    fn random_loss_rate() {
        let mut l = Link::new(LinkSpec::delay(1.0).with_loss(0.1), 9);
        let lost = (0..100_000).filter(|_| l.admit(0.0, 1) == Verdict::Lost).count();
        assert!((9_500..10_500).contains(&lost), "{lost}");
    }
}

//! `[server.handshake_budget]`: how many full TLS handshakes (each costs the gateway a private-key
//! signature, worth many plain requests) one client source may start per second, so that a few
//! sources opening new connections as fast as they can cannot keep every core signing.
//! Absent = no budget.

use serde::Deserialize;

/// `[server.handshake_budget]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HandshakeBudgetConfig {
    /// Full handshakes one source may start per second, on average (a token bucket's refill rate).
    pub full_per_second: f64,
    /// Full handshakes one source may start at once after a quiet spell (the bucket's size).
    pub full_burst: u32,
    /// Resumed handshakes one source may start per second, on average; 0 = no limit.
    pub resumed_per_second: f64,
    /// Resumed handshakes one source may start at once (with `resumed_per_second` above 0).
    pub resumed_burst: u32,
    /// Leading bits of an IPv4 address that make one source (32 = each address; 24 = each /24
    /// shares one budget).
    pub ipv4_prefix: u8,
    /// Leading bits of an IPv6 address that make one source (64 = each /64, one customer's subnet).
    pub ipv6_prefix: u8,
    /// What a source over its full-handshake budget still gets: `resume_only` (handshakes that
    /// resume a session go on), `resume_then_429` (they go on, and their requests get 429) or
    /// `close` (every new handshake is refused until a token refills).
    pub over_budget: OverBudget,
    /// Sources tracked at once (fixed memory, 32 bytes each, taken at start); when it is full,
    /// the source nearest to a full bucket is forgotten first.
    pub tracked_sources: usize,
}

impl Default for HandshakeBudgetConfig {
    fn default() -> Self {
        Self {
            full_per_second: 20.0,
            full_burst: 40,
            resumed_per_second: 0.0,
            resumed_burst: 200,
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            over_budget: OverBudget::ResumeOnly,
            tracked_sources: 65_536,
        }
    }
}

/// What a source over its full-handshake budget still gets.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OverBudget {
    /// Handshakes that resume a session go on (within the resumed budget, when one is set).
    ResumeOnly,
    /// Every new handshake is refused, resumed ones too, until the full bucket has a token.
    Close,
    /// As `resume_only`, and every request on a connection resumed while the source is over its
    /// full budget is answered `429 Too Many Requests` with `Retry-After` (the cheapest answer
    /// that tells a well-behaved client to slow down; nothing reaches an origin).
    #[serde(rename = "resume_then_429")]
    ResumeThen429,
}

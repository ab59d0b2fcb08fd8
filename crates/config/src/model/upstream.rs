//! `[[upstream]]`: groups of origin servers, their balancing policy, their timeouts, the HTTP
//! version spoken to them, for `https://` servers `[upstream.tls]`, and the active health checks
//! of `[upstream.health_check]`.

use crate::duration::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// `[[upstream]]`: a group of origin servers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The name routes refer to.
    pub name: String,
    /// Origin servers: `host:port` or `http://host[:port]` (plaintext), `https://host[:port]`
    /// (TLS, set up by `[upstream.tls]`).
    pub servers: Vec<String>,
    /// HTTP version spoken to the servers: `http1` (keep-alive pooled), `http2` (one multiplexed
    /// connection per server: ALPN `h2` over TLS, prior knowledge over plaintext) or `auto`
    /// (ALPN chooses `h2` or `http/1.1`; TLS servers only).
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// TLS to `https://` servers: verification, SNI, client certificate, key-exchange groups.
    #[serde(default)]
    pub tls: UpstreamTlsConfig,
    /// `round_robin` or `least_conn`.
    #[serde(default = "default_balance")]
    pub balance: Balance,
    /// Longest time to establish a TCP connection to an origin.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Duration,
    /// Longest time from sending the request to receiving the response header (504 after).
    #[serde(default = "default_header_timeout")]
    pub header_timeout: Duration,
    /// Idle pooled connections are closed after this long.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout: Duration,
    /// Idle keep-alive connections kept per origin server (256: a burst of concurrent requests
    /// does not make the pool close connections it needs again a moment later).
    #[serde(default = "default_max_idle")]
    pub max_idle_per_server: usize,
    /// A server whose connection failed is skipped for this long.
    #[serde(default = "default_fail_timeout")]
    pub fail_timeout: Duration,
    /// Failures in a row (connect, TLS, a reset before the response) that skip a server for
    /// `fail_timeout`; 0: never skipped for failures.
    #[serde(default = "default_max_fails")]
    pub max_fails: u32,
    /// Retries of failed requests on another server: when, how many, within which budget.
    #[serde(default)]
    pub retry: RetryConfig,
    /// An upgraded connection (WebSocket) with no byte either way for this long is closed.
    #[serde(default = "default_tunnel_idle")]
    pub tunnel_idle_timeout: Duration,
    /// Active HTTP health checks of every server of the group (off by default).
    #[serde(default)]
    pub health_check: HealthCheckConfig,
    /// A PROXY protocol header (`"v1"` or `"v2"`) naming the client at the start of every
    /// connection to the servers; `"off"` by default.
    #[serde(default)]
    pub send_proxy_protocol: SendProxyProtocol,
    /// Connections open to each server at most (idle and busy); 0: no limit. A request that
    /// needs one more waits in the server's queue.
    #[serde(default)]
    pub max_connections_per_server: usize,
    /// Requests waiting in one server's queue at most; more get 503 at once (0: no queue).
    #[serde(default = "default_max_queue")]
    pub max_queue_per_server: usize,
    /// Longest wait in a server's queue for a connection; then 503.
    #[serde(default = "default_queue_timeout")]
    pub queue_timeout: Duration,
    /// Pass the servers' 103 Early Hints on to HTTP/1.1 clients (RFC 8297); false drops them.
    #[serde(default = "default_true")]
    pub forward_early_hints: bool,
    /// The forwarding fields this hop adds to requests: any of `x-forwarded-for`,
    /// `x-forwarded-proto`, `x-forwarded-host`, `forwarded` (RFC 7239) and `x-real-ip`. Those a
    /// client sent are removed whatever this says (unless it is a trusted proxy).
    #[serde(default)]
    pub forwarded_headers: ForwardedHeaders,
}

/// A set of the forwarding fields the gateway can add (`forwarded_headers`), as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardedHeaders(u8);

impl ForwardedHeaders {
    /// `X-Forwarded-For`: the client's address.
    pub const FOR: Self = Self(1);
    /// `X-Forwarded-Proto: https`.
    pub const PROTO: Self = Self(2);
    /// `X-Forwarded-Host`: the authority the client asked for.
    pub const HOST: Self = Self(4);
    /// RFC 7239 `Forwarded`: `for`, `proto` and `host` in one field.
    pub const FORWARDED: Self = Self(8);
    /// `X-Real-IP`: the client's address (nginx's habit).
    pub const REAL_IP: Self = Self(16);
    /// The names as written in the configuration, with their bits.
    pub const NAMES: [(&'static str, Self); 5] = [
        ("x-forwarded-for", Self::FOR),
        ("x-forwarded-proto", Self::PROTO),
        ("x-forwarded-host", Self::HOST),
        ("forwarded", Self::FORWARDED),
        ("x-real-ip", Self::REAL_IP),
    ];

    /// None of them.
    pub const fn none() -> Self {
        Self(0)
    }

    /// Whether `field` is in the set.
    pub const fn has(self, field: Self) -> bool {
        self.0 & field.0 != 0
    }

    /// The set with `field` added.
    pub const fn with(self, field: Self) -> Self {
        Self(self.0 | field.0)
    }
}

/// The four fields tlsgate has always added: `X-Forwarded-For`, `-Proto`, `-Host`, `Forwarded`.
impl Default for ForwardedHeaders {
    fn default() -> Self {
        Self::FOR.with(Self::PROTO).with(Self::HOST).with(Self::FORWARDED)
    }
}

impl<'de> Deserialize<'de> for ForwardedHeaders {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        let mut set = Self::none();
        for name in &names {
            let Some((_, bit)) = Self::NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
                return Err(serde::de::Error::custom(format!(
                    "forwarded_headers: unknown field {name:?} (one of x-forwarded-for, x-forwarded-proto, \
                     x-forwarded-host, forwarded, x-real-ip)"
                )));
            };
            set = set.with(*bit);
        }
        Ok(set)
    }
}

fn default_max_queue() -> usize {
    1024
}
fn default_queue_timeout() -> Duration {
    Duration::from_secs(5)
}

/// Whether, and in which version, a group's connections start with a PROXY protocol header.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SendProxyProtocol {
    /// No header.
    #[default]
    Off,
    /// The text form: `PROXY TCP4 client gateway cport gport`.
    V1,
    /// The binary form (what HAProxy's `send-proxy-v2` writes).
    V2,
}

impl SendProxyProtocol {
    /// The name used in the configuration and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::V1 => "v1",
            Self::V2 => "v2",
        }
    }
}

fn default_balance() -> Balance {
    Balance::RoundRobin
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(3)
}
fn default_header_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_idle_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_max_idle() -> usize {
    256
}
fn default_tunnel_idle() -> Duration {
    Duration::from_secs(3600)
}
fn default_fail_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_max_fails() -> u32 {
    1
}

/// `[upstream.retry]`: which failed requests are sent again (to another server when there is
/// one), how many times, and the budget that keeps retries from multiplying the load on failing
/// origins (Envoy's retry budget).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Tries in all, the first one included (2: one retry; 1: no retries).
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    /// The failures retried: `connect_failure`, `reset`, `header_timeout`.
    #[serde(default = "default_retry_on")]
    pub on: Vec<RetryOn>,
    /// Retries in flight may be at most this share (in percent) of the group's requests in flight.
    #[serde(default = "default_budget_percent")]
    pub budget_percent: u32,
    /// Retries in flight always allowed, whatever `budget_percent` says.
    #[serde(default = "default_min_retry_concurrency")]
    pub min_retry_concurrency: u32,
    /// Wait before a retry (with jitter, doubling for each further retry); 0: retry at once.
    #[serde(default)]
    pub backoff: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            attempts: default_attempts(),
            on: default_retry_on(),
            budget_percent: default_budget_percent(),
            min_retry_concurrency: default_min_retry_concurrency(),
            backoff: Duration::default(),
        }
    }
}

/// A failure that `[upstream.retry] on` may name.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// No connection (TCP or TLS) could be opened: nothing was sent, any request may go again
    /// as long as its body has not started being sent.
    ConnectFailure,
    /// The connection was reset or closed before the response header arrived: idempotent
    /// requests without a body only.
    Reset,
    /// No response header within `header_timeout`: idempotent requests without a body only.
    HeaderTimeout,
}

impl RetryOn {
    /// The name used in the configuration, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConnectFailure => "connect_failure",
            Self::Reset => "reset",
            Self::HeaderTimeout => "header_timeout",
        }
    }
}

fn default_attempts() -> u32 {
    2
}
fn default_retry_on() -> Vec<RetryOn> {
    vec![RetryOn::ConnectFailure, RetryOn::Reset]
}
fn default_budget_percent() -> u32 {
    20
}
fn default_min_retry_concurrency() -> u32 {
    3
}

/// Load-balancing policy of an upstream group.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Each server in turn.
    RoundRobin,
    /// The server with the fewest requests in flight.
    LeastConn,
}

/// HTTP version spoken to an upstream group's servers.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamProtocol {
    /// HTTP/1.1 with pooled keep-alive connections (what nginx's `proxy_pass` speaks).
    #[default]
    Http1,
    /// HTTP/2: ALPN `h2` over TLS, prior knowledge (h2c) over plaintext; what gRPC origins need.
    Http2,
    /// Whatever the server picks by ALPN (`h2` or `http/1.1`); TLS servers only.
    Auto,
}

impl UpstreamProtocol {
    /// The name used in the configuration, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http1 => "http1",
            Self::Http2 => "http2",
            Self::Auto => "auto",
        }
    }
}

/// `[upstream.tls]`: how the gateway speaks TLS to a group's `https://` servers.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsConfig {
    /// PEM CA bundle the servers' certificates must chain to (default: the system bundle,
    /// `/etc/ssl/certs/ca-certificates.crt`).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// Verify the server's certificate chain and name. Turning this off is for tests only.
    #[serde(default = "default_true")]
    pub verify: bool,
    /// The name sent in SNI and checked against the certificate (default: each server's host;
    /// no SNI for an IP address, whose certificate must then name the IP).
    #[serde(default)]
    pub server_name: Option<String>,
    /// PEM chain presented to servers that ask for a client certificate (mutual TLS).
    #[serde(default)]
    pub client_certificate: Option<PathBuf>,
    /// Private key of `client_certificate`.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// Key-exchange groups offered, in order (default: hybrid post-quantum first).
    #[serde(default = "default_origin_groups")]
    pub groups: Vec<String>,
}

impl Default for UpstreamTlsConfig {
    fn default() -> Self {
        Self {
            ca: None,
            verify: true,
            server_name: None,
            client_certificate: None,
            client_key: None,
            groups: default_origin_groups(),
        }
    }
}

/// The system CA bundle of Debian and its derivatives.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn default_true() -> bool {
    true
}

fn default_origin_groups() -> Vec<String> {
    ["X25519MLKEM768", "X25519", "P-256"].map(String::from).to_vec()
}

/// `[upstream.health_check]`: a GET sent to every server of the group each `interval`, on a
/// connection of its own; `fall` failed probes in a row take a server out of the rotation, `rise`
/// passed probes in a row bring it back.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckConfig {
    /// Probe the servers. Off: servers are only skipped for `fail_timeout` after a failed connect.
    #[serde(default)]
    pub enabled: bool,
    /// Path (and query) of the probe request.
    #[serde(default = "default_health_path")]
    pub path: String,
    /// Time between two probes of a server.
    #[serde(default = "default_health_interval")]
    pub interval: Duration,
    /// Longest a probe may take (connect, TLS handshake, response header); later is a failure.
    #[serde(default = "default_health_timeout")]
    pub timeout: Duration,
    /// Response statuses that pass: one (`200`, `"204"`) or an inclusive range (`"200-399"`).
    #[serde(default = "default_expect_status")]
    pub expect_status: StatusRange,
    /// Passed probes in a row that bring an unhealthy server back.
    #[serde(default = "default_rise")]
    pub rise: u32,
    /// Failed probes in a row that take a healthy server out.
    #[serde(default = "default_fall")]
    pub fall: u32,
    /// `Host` of the probe request (default: the server's `host:port`).
    #[serde(default)]
    pub host: Option<String>,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            path: default_health_path(),
            interval: default_health_interval(),
            timeout: default_health_timeout(),
            expect_status: default_expect_status(),
            rise: default_rise(),
            fall: default_fall(),
            host: None,
        }
    }
}

fn default_health_path() -> String {
    "/healthz".into()
}
fn default_health_interval() -> Duration {
    Duration::from_secs(5)
}
fn default_health_timeout() -> Duration {
    Duration::from_secs(2)
}
fn default_expect_status() -> StatusRange {
    StatusRange::new(200, 399)
}
fn default_rise() -> u32 {
    2
}
fn default_fall() -> u32 {
    3
}

/// An inclusive range of HTTP status codes, written `200`, `"204"` or `"200-399"`. Parsing takes
/// any two numbers; validation checks that they are statuses (100-599) in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRange {
    low: u16,
    high: u16,
}

impl StatusRange {
    /// `low..=high`.
    pub const fn new(low: u16, high: u16) -> Self {
        Self { low, high }
    }

    /// The first status of the range.
    pub const fn low(self) -> u16 {
        self.low
    }

    /// The last status of the range.
    pub const fn high(self) -> u16 {
        self.high
    }

    /// Whether `status` is in the range.
    pub const fn contains(self, status: u16) -> bool {
        self.low <= status && status <= self.high
    }

    /// Reads `"200"` or `"200-399"` (spaces around the numbers allowed); `None` unless it is one
    /// number or two joined by `-`.
    pub fn parse(text: &str) -> Option<Self> {
        let number = |t: &str| {
            let t = t.trim();
            (!t.is_empty() && t.len() <= 5 && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse::<u16>().ok())
                .flatten()
        };
        match text.split_once('-') {
            Some((low, high)) => Some(Self::new(number(low)?, number(high)?)),
            None => number(text).map(|n| Self::new(n, n)),
        }
    }
}

/// `200` or `200-399`.
impl std::fmt::Display for StatusRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.low == self.high {
            write!(f, "{}", self.low)
        } else {
            write!(f, "{}-{}", self.low, self.high)
        }
    }
}

impl<'de> Deserialize<'de> for StatusRange {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = StatusRange;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a status (200) or a range of statuses (\"200-399\")")
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<StatusRange, E> {
                u16::try_from(v)
                    .map(|n| StatusRange::new(n, n))
                    .map_err(|_| E::custom(format!("status {v} is not in 100-599")))
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<StatusRange, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StatusRange, E> {
                StatusRange::parse(v).ok_or_else(|| {
                    E::custom(format!(
                        "invalid status range {v:?}; write a status (\"200\") or a range (\"200-399\")"
                    ))
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        s: StatusRange,
    }

    fn read(value: &str) -> Result<StatusRange, String> {
        toml::from_str::<T>(&format!("s = {value}"))
            .map(|t| t.s)
            .map_err(|e| e.to_string())
    }

    #[derive(Deserialize)]
    struct F {
        #[serde(default)]
        f: ForwardedHeaders,
    }

    #[test]
    fn forwarded_headers_read_as_a_list_of_known_names() {
        let read = |text: &str| toml::from_str::<F>(text).map(|t| t.f).map_err(|e| e.to_string());
        assert_eq!(read(""), Ok(ForwardedHeaders::default()));
        let d = ForwardedHeaders::default();
        assert!(d.has(ForwardedHeaders::FOR) && d.has(ForwardedHeaders::PROTO));
        assert!(d.has(ForwardedHeaders::HOST) && d.has(ForwardedHeaders::FORWARDED));
        assert!(!d.has(ForwardedHeaders::REAL_IP));
        assert_eq!(read("f = []"), Ok(ForwardedHeaders::none()));
        let pair = read(r#"f = ["X-Forwarded-For", "x-forwarded-proto"]"#).unwrap();
        assert_eq!(pair, ForwardedHeaders::FOR.with(ForwardedHeaders::PROTO));
        assert_eq!(read(r#"f = ["x-real-ip"]"#), Ok(ForwardedHeaders::REAL_IP));
        let err = read(r#"f = ["x-forwarded-port"]"#).unwrap_err();
        assert!(err.contains("unknown field \"x-forwarded-port\""), "{err}");
    }

    #[test]
    fn status_ranges_read_as_one_status_or_two_numbers() {
        assert_eq!(read("200"), Ok(StatusRange::new(200, 200)));
        assert_eq!(read("\"204\""), Ok(StatusRange::new(204, 204)));
        assert_eq!(read("\"200-399\""), Ok(StatusRange::new(200, 399)));
        assert_eq!(read("\" 200 - 299 \""), Ok(StatusRange::new(200, 299)));
        // Out of order or out of 100-599 parses; validation names the field.
        assert_eq!(read("\"399-200\""), Ok(StatusRange::new(399, 200)));
        for bad in [
            "\"2xx\"",
            "\"\"",
            "\"200-\"",
            "\"-200\"",
            "\"1-2-3\"",
            "\"+200\"",
            "\"99999\"",
            "-1",
            "70000",
            "2.5",
        ] {
            assert!(read(bad).is_err(), "{bad} was accepted");
        }
        assert!(read("\"2xx\"").unwrap_err().contains("invalid status range \"2xx\""));
        let r = StatusRange::new(200, 399);
        assert!(r.contains(200) && r.contains(399) && !r.contains(199) && !r.contains(400));
        assert_eq!(
            (r.to_string(), StatusRange::new(204, 204).to_string()),
            ("200-399".into(), "204".into())
        );
    }

    #[test]
    fn proxy_protocol_and_connection_limits_are_off_by_default() {
        let u: UpstreamConfig = toml::from_str("name = \"a\"\nservers = [\"h:1\"]").unwrap();
        assert_eq!(u.send_proxy_protocol, SendProxyProtocol::Off);
        assert_eq!((u.max_connections_per_server, u.max_queue_per_server), (0, 1024));
        assert_eq!(u.queue_timeout.get().as_secs(), 5);
        let text = "name = \"a\"\nservers = []\nsend_proxy_protocol = \"v2\"\nmax_connections_per_server = 2\n\
                    max_queue_per_server = 0\nqueue_timeout = \"250ms\"";
        let u: UpstreamConfig = toml::from_str(text).unwrap();
        assert_eq!(u.send_proxy_protocol, SendProxyProtocol::V2);
        assert_eq!((u.max_connections_per_server, u.max_queue_per_server), (2, 0));
        assert_eq!(u.queue_timeout.get().as_millis(), 250);
        for (text, want) in [("v1", SendProxyProtocol::V1), ("off", SendProxyProtocol::Off)] {
            let u: UpstreamConfig =
                toml::from_str(&format!("name = \"a\"\nservers = []\nsend_proxy_protocol = \"{text}\"")).unwrap();
            assert_eq!((u.send_proxy_protocol, u.send_proxy_protocol.as_str()), (want, text));
        }
        let e = toml::from_str::<UpstreamConfig>("name = \"a\"\nservers = []\nsend_proxy_protocol = \"v3\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `v3`"), "{e}");
    }

    #[test]
    fn health_checks_are_off_by_default_with_the_documented_defaults() {
        let u: UpstreamConfig = toml::from_str("name = \"a\"\nservers = [\"h:1\"]").unwrap();
        let h = &u.health_check;
        assert_eq!(*h, HealthCheckConfig::default());
        assert!(!h.enabled);
        assert_eq!(
            (h.path.as_str(), h.rise, h.fall, h.host.as_deref()),
            ("/healthz", 2, 3, None)
        );
        assert_eq!((h.interval.get().as_secs(), h.timeout.get().as_secs()), (5, 2));
        assert_eq!(h.expect_status, StatusRange::new(200, 399));
        let e = toml::from_str::<UpstreamConfig>("name = \"a\"\nservers = []\n[health_check]\nenable = true")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `enable`"), "{e}");
    }

    #[test]
    fn retries_default_to_one_on_connect_failures_and_resets_within_a_budget() {
        let u: UpstreamConfig = toml::from_str("name = \"a\"\nservers = [\"h:1\"]").unwrap();
        assert_eq!(u.max_fails, 1);
        let r = &u.retry;
        assert_eq!(*r, RetryConfig::default());
        assert_eq!((r.attempts, r.budget_percent, r.min_retry_concurrency), (2, 20, 3));
        assert_eq!(r.on, [RetryOn::ConnectFailure, RetryOn::Reset]);
        assert!(r.backoff.get().is_zero());
        let text = "name = \"a\"\nservers = []\nmax_fails = 3\n[retry]\nattempts = 3\n\
                    on = [\"header_timeout\", \"reset\"]\nbackoff = \"25ms\"";
        let u: UpstreamConfig = toml::from_str(text).unwrap();
        assert_eq!((u.max_fails, u.retry.attempts), (3, 3));
        assert_eq!(u.retry.on, [RetryOn::HeaderTimeout, RetryOn::Reset]);
        assert_eq!(u.retry.backoff.get().as_millis(), 25);
        assert_eq!(RetryOn::ConnectFailure.as_str(), "connect_failure");
        let e = toml::from_str::<UpstreamConfig>("name = \"a\"\nservers = []\n[retry]\non = [\"timeout\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `timeout`"), "{e}");
    }
}

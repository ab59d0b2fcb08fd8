//! `[server]`, `[[listener]]` and `[http2]`: the sockets clients connect to and the limits and
//! timeouts of their connections.

use crate::duration::Duration;
use crate::request_edit::Cidr;
use serde::Deserialize;
use std::net::SocketAddr;

/// `[server]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Worker threads, each with its own event loop and SO_REUSEPORT sockets. 0 = one per core.
    pub workers: usize,
    /// Longest time a client may take to complete the TLS handshake (stalled clients are dropped).
    pub handshake_timeout: Duration,
    /// Open client connections above which new ones are shed (closed at once), per process.
    pub max_connections: usize,
    /// Open client connections one source (an IPv4 address, an IPv6 /64) may hold; more are shed
    /// at once, so one source cannot fill `max_connections` for everyone. 0 = no limit.
    pub max_connections_per_source: usize,
    /// A connection that has sent no byte for this long after it was accepted is closed (an
    /// idle or bare TCP connection holds a slot for this long, not the whole handshake timeout).
    pub silent_timeout: Duration,
    /// On SIGTERM, how long open connections get to finish before the process exits.
    pub drain_timeout: Duration,
    /// How long a client connection with no request in flight and none arriving is kept open
    /// (bytes that carry no request, such as HTTP/2 PINGs, do not count).
    pub client_idle_timeout: Duration,
    /// Longest time to receive a complete request header from a client (HTTP/1.1; on HTTP/2,
    /// from the first byte after the connection went quiet to a complete request).
    pub client_header_timeout: Duration,
    /// A client that accepts none of the bytes the gateway has for it for this long is closed
    /// (nginx's `send_timeout`): a slow reader holds a connection and its buffers for this long.
    pub client_send_timeout: Duration,
    /// Requests of one client connection forwarded to origins at the same time (each may hold
    /// an origin connection); more wait for one of them to finish. Bounds what one HTTP/2
    /// connection's streams can pin upstream.
    pub max_upstream_requests_per_connection: usize,
    /// Largest request header block (request line + headers) accepted; larger gets 431.
    pub max_request_header_bytes: usize,
    /// Networks (CIDR) of proxies in front of the gateway whose `X-Forwarded-For`, `-Proto`,
    /// `-Host` and `Forwarded` headers are kept and extended; from anyone else they are replaced.
    pub trusted_proxies: Vec<Cidr>,
    /// Request header that carries the connection's JA4 TLS fingerprint to origins (e.g.
    /// `X-JA4`); whatever a client sends under this name is always removed. None = not sent.
    pub ja4_header: Option<String>,
    /// Full TLS handshakes (the ones that cost a signature) per client source and second
    /// (`[server.handshake_budget]`); absent = no budget.
    pub handshake_budget: Option<crate::model::HandshakeBudgetConfig>,
    /// Unix socket (a path, relative to the configuration file's directory) on which the
    /// running gateway hands its listening sockets, ticket keys and session cache to a successor
    /// (`tlsgate serve --upgrade`, or SIGUSR2) for a binary upgrade without refusing a
    /// connection; absent = upgrades off.
    pub upgrade_socket: Option<std::path::PathBuf>,
    /// How often each worker hands the memory freed on its thread back to the operating system
    /// (mimalloc's `mi_collect`: pages free for longer than the allocator's purge delay). The
    /// allocator returns such pages only when the thread allocates again, so a worker gone quiet
    /// (idle connections, or a burst that ended) would keep them resident. Only a worker that was
    /// quiet over the interval runs it (a busy one allocates, and purges as it goes). 0 = never.
    pub memory_release_interval: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            workers: 0,
            handshake_timeout: Duration::from_secs(10),
            max_connections: 100_000,
            max_connections_per_source: 1024,
            silent_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(30),
            client_idle_timeout: Duration::from_secs(75),
            client_header_timeout: Duration::from_secs(30),
            client_send_timeout: Duration::from_secs(60),
            max_upstream_requests_per_connection: 32,
            max_request_header_bytes: 32 * 1024,
            trusted_proxies: Vec::new(),
            ja4_header: None,
            handshake_budget: None,
            upgrade_socket: None,
            memory_release_interval: Duration::from_secs(1),
        }
    }
}

/// `[[listener]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Address to bind, e.g. `0.0.0.0:443` or `[::]:443`.
    pub listen: SocketAddr,
    /// `https` (TLS-terminating) or `redirect` (plain HTTP answering a redirect to https).
    #[serde(default = "default_listener_kind")]
    pub kind: ListenerKind,
    /// Length of the kernel accept queue.
    #[serde(default = "default_backlog")]
    pub backlog: u32,
    /// For `redirect` listeners: the port to put in the `https://` location (443 is omitted).
    #[serde(default)]
    pub https_port: Option<u16>,
    /// For `redirect` listeners: 301 or 308.
    #[serde(default = "default_redirect_status")]
    pub redirect_status: u16,
    /// TCP Fast Open queue length (connections whose SYN data the kernel accepts before the
    /// handshake completes); 0 = off. Needs sysctl `net.ipv4.tcp_fastopen` with bit 2 set (e.g. 3).
    /// Unset: [`DEFAULT_TCP_FASTOPEN`], on when the kernel allows it (one INFO line when it does
    /// not); set: the operator asked for it, and a kernel that does not allow it is a WARN.
    #[serde(default)]
    pub tcp_fastopen: Option<u32>,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from a load balancer,
    /// whose source address then stands for the client's (logs, X-Forwarded-For, limits).
    #[serde(default)]
    pub proxy_protocol: bool,
    /// With `proxy_protocol`: the networks (CIDR) the balancers connect from; connections from
    /// anywhere else are closed at once. Required (non-empty) when `proxy_protocol` is on.
    #[serde(default)]
    pub proxy_protocol_from: Vec<Cidr>,
}

/// The TCP Fast Open queue length of a listener that does not set `tcp_fastopen`.
pub const DEFAULT_TCP_FASTOPEN: u32 = 256;

impl ListenerConfig {
    /// The TCP Fast Open queue length this listener asks the kernel for (0 = off).
    pub fn tfo_queue(&self) -> u32 {
        self.tcp_fastopen.unwrap_or(DEFAULT_TCP_FASTOPEN)
    }

    /// Whether a connection from `ip` may send this listener's PROXY protocol header.
    pub fn proxy_protocol_trusts(&self, ip: std::net::IpAddr) -> bool {
        self.proxy_protocol_from.iter().any(|c| c.contains(ip))
    }
}

fn default_listener_kind() -> ListenerKind {
    ListenerKind::Https
}
fn default_backlog() -> u32 {
    4096
}
fn default_redirect_status() -> u16 {
    301
}

/// What a listener speaks.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ListenerKind {
    /// TLS termination, then HTTP/1.1 or HTTP/2 by ALPN.
    Https,
    /// Plain HTTP that redirects every request to https.
    Redirect,
}

/// `[http2]`: the SETTINGS the gateway announces on HTTP/2 client connections.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Config {
    /// Streams a client may have open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// Flow-control window per stream, in bytes (SETTINGS_INITIAL_WINDOW_SIZE; 65535..=2^31-1).
    pub initial_stream_window: u32,
    /// Flow-control window of the whole connection, in bytes (65535..=2^31-1).
    pub initial_connection_window: u32,
    /// Largest frame payload the gateway accepts (SETTINGS_MAX_FRAME_SIZE; 16384..=16777215).
    pub max_frame_size: u32,
    /// HPACK dynamic table size for headers the client sends (SETTINGS_HEADER_TABLE_SIZE).
    pub header_table_size: u32,
    /// Send a PING this often on idle connections (absent = no pings).
    pub keep_alive_interval: Option<Duration>,
    /// Close the connection when a PING is not answered within this time.
    pub keep_alive_timeout: Duration,
}

impl Default for Http2Config {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 128,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16_384,
            header_table_size: 4096,
            keep_alive_interval: None,
            keep_alive_timeout: Duration::from_secs(20),
        }
    }
}

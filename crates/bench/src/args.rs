//! Command-line options of `tlsgate bench` and their validation into a [`Plan`].

use crate::tls_opts::{alpn_offers, TlsOpts};
use crate::values::host_port;
pub use crate::values::parse_duration;
use anyhow::{bail, Context};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `tlsgate bench URL`: an HTTPS load generator on BoringSSL (wrk-like).
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Target, `https://HOST[:PORT][/PATH]`.
    pub url: String,
    /// Concurrent connections (spread over the threads).
    #[arg(short = 'c', long = "connections", default_value_t = 10)]
    pub connections: usize,
    /// Threads, each running one single-threaded event loop.
    #[arg(short = 't', long = "threads", default_value_t = 1)]
    pub threads: usize,
    /// Test duration (`5`, `5s`, `1m`); the default is 10 s unless `-n` is given.
    #[arg(short = 'd', long = "duration", value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Total operations instead of a duration: requests, or handshakes with `--handshake-only`.
    #[arg(short = 'n', long = "requests")]
    pub requests: Option<u64>,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// One request per TLS connection (HTTP/1.1: sends `Connection: close`; `--h2`: one stream,
    /// then the connection is closed).
    #[arg(long, conflicts_with_all = ["handshake_only", "hold"])]
    pub new_conn: bool,
    /// Connect, handshake and close; no request (except one per thread to fetch a TLS 1.3 ticket).
    #[arg(long, conflicts_with = "hold")]
    pub handshake_only: bool,
    /// Full TLS 1.3 handshakes with the least client work, one request on each connection: a
    /// fixed ClientHello per thread (X25519 only, TLS_AES_128_GCM_SHA256 only, no tickets), one
    /// X25519 per connection, the server's Finished checked but not its certificate or
    /// signature. For saturating a server core with full handshakes; implies `--new-conn`.
    #[arg(long, conflicts_with_all = ["handshake_only", "hold", "h2", "h3"])]
    pub lean: bool,
    /// With `--lean`: offer delegated credentials (RFC 9345, ECDSA P-256); the report's server
    /// signatures say how many handshakes were signed with one. BoringSSL has no client side
    /// for them, so only the lean handshake offers them.
    #[arg(long, requires = "lean")]
    pub delegated_credentials: bool,
    /// Open `-c` connections, send one request on each, keep them idle for this long, then close.
    #[arg(long, value_parser = parse_duration)]
    pub hold: Option<Duration>,
    /// Do not resume by TLS 1.2 session ID (only sessions carrying a ticket are offered again).
    #[arg(long)]
    pub no_session_id: bool,
    /// Write the summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Request method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request body (`@FILE` reads it from a file); sent with `Content-Length`.
    #[arg(long)]
    pub body: Option<String>,
    /// HTTP/2 (ALPN h2) instead of HTTP/1.1: keep-alive (`-m` streams per connection) or
    /// `--new-conn` (one request per connection).
    #[arg(long, conflicts_with_all = ["handshake_only", "hold"])]
    pub h2: bool,
    /// HTTP/3 over QUIC (UDP, quiche on the same BoringSSL) instead of HTTP/1.1: keep-alive
    /// (`-m` requests at a time per connection) or `--new-conn` (a QUIC connection per request,
    /// resuming the thread's newest session unless `--no-ticket`).
    #[arg(long, conflicts_with_all = ["handshake_only", "hold", "h2", "rate", "tfo"])]
    pub h3: bool,
    /// Concurrent streams per HTTP/2 or HTTP/3 connection (keep-alive mode).
    #[arg(short = 'm', long = "streams", default_value_t = 1)]
    pub streams: usize,
    /// Constant throughput: this many requests (handshakes with --handshake-only) per second in
    /// all, spread evenly; latency is measured from each request's intended send time (wrk2's
    /// coordinated-omission correction).
    #[arg(short = 'R', long = "rate", conflicts_with = "hold")]
    pub rate: Option<f64>,
    /// TLS and TCP options (shared with `tlsgate probe`).
    #[command(flatten)]
    pub opts: TlsOpts,
}

/// What each connection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Many requests per connection.
    KeepAlive,
    /// One request per connection, `Connection: close`.
    NewConn,
    /// Handshake only.
    HandshakeOnly,
    /// One request, then hold the connection idle.
    Hold,
}

impl Mode {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::KeepAlive => "keep-alive",
            Mode::NewConn => "new-conn",
            Mode::HandshakeOnly => "handshake-only",
            Mode::Hold => "hold",
        }
    }
}

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// After this long.
    Duration(Duration),
    /// After this many operations (requests, or handshakes in handshake-only mode).
    Count(u64),
    /// Hold mode: every connection once, kept open this long.
    Hold(Duration),
}

/// A validated, resolved benchmark.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The URL as given.
    pub url: String,
    /// Host from the URL (without brackets for IPv6).
    pub host: String,
    /// Port from the URL (443 by default).
    pub port: u16,
    /// Path and query (at least `/`).
    pub path: String,
    /// Where to connect.
    pub addr: SocketAddr,
    /// ClientHello server name; `None` sends none.
    pub sni: Option<String>,
    /// Connections in all.
    pub connections: usize,
    /// Threads (never more than connections).
    pub threads: usize,
    /// Mode.
    pub mode: Mode,
    /// End condition.
    pub limit: Limit,
    /// Offer sessions for resumption by session ID.
    pub session_id: bool,
    /// Use tickets.
    pub tickets: bool,
    /// The TLS and TCP options (version, groups, ciphers, signature algorithms, CA, timeout, TFO).
    pub opts: TlsOpts,
    /// ALPN offered, in wire format (empty: no extension).
    pub alpn_wire: Vec<u8>,
    /// The request, ready to send.
    pub request: Vec<u8>,
    /// Where the JSON summary goes.
    pub json: Option<PathBuf>,
    /// Request method.
    pub method: String,
    /// Request body.
    pub body: Vec<u8>,
    /// Extra headers (`Name: value`), for HTTP/2.
    pub headers: Vec<(String, String)>,
    /// `Host:` / `:authority`.
    pub host_header: String,
    /// HTTP/2.
    pub h2: bool,
    /// HTTP/3 over QUIC (`--h3`).
    pub h3: bool,
    /// Lean full TLS 1.3 handshakes (`--lean`).
    pub lean: bool,
    /// Offer delegated credentials in the lean ClientHello (`--delegated-credentials`).
    pub delegated_credentials: bool,
    /// Streams per HTTP/2 or HTTP/3 connection.
    pub streams: usize,
    /// Target operations per second in all (`--rate`).
    pub rate: Option<f64>,
}

impl Plan {
    /// Whether any session may be offered again.
    pub fn resumption(&self) -> bool {
        self.session_id || self.tickets
    }
}

/// Splits `https://host[:port][/path]`.
pub fn split_url(url: &str) -> anyhow::Result<(String, u16, String)> {
    let rest = url
        .strip_prefix("https://")
        .with_context(|| format!("{url}: only https:// URLs are supported"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        bail!("{url}: expected https://HOST[:PORT][/PATH]");
    }
    let (host, port) = host_port(authority, 443).with_context(|| format!("{url}: bad host or port"))?;
    Ok((host, port, path))
}

/// Builds the HTTP/1.1 GET request bytes.
pub fn build_request(host_header: &str, path: &str, headers: &[String], close: bool) -> anyhow::Result<Vec<u8>> {
    build_request_with("GET", host_header, path, headers, &[], close)
}

/// Splits `Name: value` headers, checking names and values.
pub fn parse_headers(headers: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    headers
        .iter()
        .map(|h| {
            let (name, value) = h
                .split_once(':')
                .with_context(|| format!("header {h:?}: expected `Name: value`"))?;
            let name = name.trim();
            if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c.is_control()) {
                bail!("header {h:?}: bad name");
            }
            if value.contains(['\r', '\n']) {
                bail!("header {h:?}: value contains a line break");
            }
            Ok((name.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// Builds the HTTP/1.1 request bytes: method, headers, and a body with `Content-Length`.
pub fn build_request_with(
    method: &str,
    host_header: &str,
    path: &str,
    headers: &[String],
    body: &[u8],
    close: bool,
) -> anyhow::Result<Vec<u8>> {
    if method.is_empty()
        || !method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!("--method {method:?}: not a method token");
    }
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    let mut has_host = false;
    let mut has_connection = false;
    let mut extra = String::new();
    for (name, value) in parse_headers(headers)? {
        has_host |= name.eq_ignore_ascii_case("host");
        has_connection |= name.eq_ignore_ascii_case("connection");
        extra.push_str(&format!("{name}: {value}\r\n"));
    }
    if !has_host {
        req.push_str(&format!("Host: {host_header}\r\n"));
    }
    req.push_str(&extra);
    if close && !has_connection {
        req.push_str("Connection: close\r\n");
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    Ok(bytes)
}

impl BenchArgs {
    /// `--lean` speaks one fixed TLS 1.3 handshake: refuses the options that would change it.
    fn check_lean(&self) -> anyhow::Result<()> {
        let o = &self.opts;
        if o.tls.as_deref() == Some("1.2") {
            bail!("--lean is TLS 1.3 only: not with --tls 1.2");
        }
        if o.groups.as_deref().is_some_and(|g| !g.eq_ignore_ascii_case("X25519")) {
            bail!("--lean offers X25519 only: --groups does not apply");
        }
        if o.cacert.is_some() {
            bail!("--lean does not verify the server (no certificate or signature check): not with --cacert");
        }
        if o.ciphers.is_some() || o.sigalgs.is_some() || o.mldsa {
            bail!("--lean offers TLS_AES_128_GCM_SHA256 and fixed signature schemes: --ciphers, --sigalgs and --mldsa do not apply");
        }
        Ok(())
    }

    /// Checks the options and resolves the target.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        let (host, port, path) = split_url(&self.url)?;
        if self.connections == 0 {
            bail!("-c must be at least 1");
        }
        if self.threads == 0 {
            bail!("-t must be at least 1");
        }
        if self.requests == Some(0) {
            bail!("-n must be at least 1");
        }
        if self.lean {
            self.check_lean()?;
        }
        let mode = if self.new_conn || self.lean {
            Mode::NewConn
        } else if self.handshake_only {
            Mode::HandshakeOnly
        } else if self.hold.is_some() {
            Mode::Hold
        } else {
            Mode::KeepAlive
        };
        let limit = match (self.hold, self.requests, self.duration) {
            (Some(h), _, _) => Limit::Hold(h),
            (None, Some(n), _) => Limit::Count(n),
            (None, None, Some(d)) => Limit::Duration(d),
            (None, None, None) => Limit::Duration(Duration::from_secs(10)),
        };
        if matches!(limit, Limit::Duration(d) if d.is_zero()) {
            bail!("-d must be longer than zero");
        }
        let addr = self.opts.addr(&host, port)?;
        let sni = self.opts.sni(&host);
        let host_header = match (host.contains(':'), port) {
            (true, 443) => format!("[{host}]"),
            (true, p) => format!("[{host}]:{p}"),
            (false, 443) => host.clone(),
            (false, p) => format!("{host}:{p}"),
        };
        let body = match self.body.as_deref() {
            Some(b) if b.starts_with('@') => {
                std::fs::read(&b[1..]).with_context(|| format!("--body {b}: cannot read the file"))?
            }
            Some(b) => b.as_bytes().to_vec(),
            None => Vec::new(),
        };
        if self.streams == 0 {
            bail!("-m must be at least 1");
        }
        if self.streams > 1 && !(self.h2 || self.h3) {
            bail!("-m (streams per connection) needs --h2 or --h3");
        }
        if self.streams > 1 && mode == Mode::NewConn {
            bail!("-m (streams per connection) does not go with --new-conn (one request per connection)");
        }
        let alpn_wire = self.opts.alpn_wire(if self.h2 { "h2" } else { "http/1.1" })?;
        if self.h3 && self.opts.tls.as_deref() == Some("1.2") {
            bail!("--h3 is QUIC, TLS 1.3 only: not with --tls 1.2");
        }
        match (self.h2, alpn_offers(&alpn_wire, b"h2")) {
            // HTTP/3 offers h3 only (quiche's list); --alpn does not apply.
            _ if self.h3 => {}
            (true, false) => bail!("--h2 speaks HTTP/2 only: --alpn must offer h2"),
            (false, true) => bail!("--alpn offers h2, but without --h2 the bench speaks HTTP/1.1 only: add --h2"),
            _ => {}
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                bail!("--rate must be a positive number of operations per second");
            }
        }
        let request = build_request_with(
            &self.method,
            &host_header,
            &path,
            &self.headers,
            &body,
            mode == Mode::NewConn && !self.h2,
        )?;
        let headers = parse_headers(&self.headers)?;
        Ok(Plan {
            url: self.url.clone(),
            host,
            port,
            path,
            addr,
            sni,
            connections: self.connections,
            threads: self.threads.min(self.connections),
            mode,
            limit,
            session_id: !self.no_session_id,
            tickets: !self.opts.no_ticket,
            opts: self.opts.clone(),
            alpn_wire,
            request,
            json: self.json.clone(),
            method: self.method.clone(),
            body,
            headers,
            host_header,
            h2: self.h2,
            h3: self.h3,
            lean: self.lean,
            delegated_credentials: self.delegated_credentials,
            streams: self.streams,
            rate: self.rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    fn plan(args: &[&str]) -> Plan {
        parse(args).expect("parses").plan().expect("valid")
    }

    #[test]
    fn defaults_are_keep_alive_for_ten_seconds_with_resumption() {
        let p = plan(&["https://127.0.0.1:8443/hello"]);
        assert_eq!(p.mode, Mode::KeepAlive);
        assert_eq!(p.limit, Limit::Duration(Duration::from_secs(10)));
        assert_eq!((p.connections, p.threads), (10, 1));
        assert!(p.session_id && p.tickets && p.resumption());
        assert_eq!(p.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(p.sni, None, "no SNI for an IP address");
        assert_eq!(p.path, "/hello");
        assert_eq!(
            String::from_utf8(p.request).unwrap(),
            "GET /hello HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\r\n"
        );
    }

    #[test]
    fn wrk_style_options() {
        let p = plan(&[
            "-c",
            "24",
            "-t",
            "4",
            "-d",
            "3",
            "-H",
            "X-Test: 1",
            "-H",
            "Accept: */*",
            "--new-conn",
            "--no-session-id",
            "--no-ticket",
            "--tls",
            "1.2",
            "--groups",
            "X25519",
            "--ciphers",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "--sni",
            "example.test",
            "--connect-to",
            "127.0.0.1:9443",
            "--json",
            "/tmp/x.json",
            "https://example.test/a?b=1",
        ]);
        assert_eq!(p.mode, Mode::NewConn);
        assert_eq!(p.limit, Limit::Duration(Duration::from_secs(3)));
        assert_eq!((p.connections, p.threads), (24, 4));
        assert!(!p.session_id && !p.tickets && !p.resumption());
        assert_eq!(p.opts.tls.as_deref(), Some("1.2"));
        assert_eq!(p.opts.groups.as_deref(), Some("X25519"));
        assert_eq!(p.opts.ciphers.as_deref(), Some("ECDHE-ECDSA-AES128-GCM-SHA256"));
        assert_eq!(p.alpn_wire, b"\x08http/1.1");
        assert_eq!(p.sni.as_deref(), Some("example.test"));
        assert_eq!(p.addr, "127.0.0.1:9443".parse().unwrap());
        assert_eq!(p.port, 443);
        assert_eq!(p.json.as_deref(), Some(std::path::Path::new("/tmp/x.json")));
        assert_eq!(
            String::from_utf8(p.request).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: example.test\r\nX-Test: 1\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn modes_and_limits() {
        let p = plan(&["--handshake-only", "-n", "500", "https://127.0.0.1:1/"]);
        assert_eq!((p.mode, p.limit), (Mode::HandshakeOnly, Limit::Count(500)));
        let p = plan(&["--hold", "30s", "-c", "2000", "https://127.0.0.1:1"]);
        assert_eq!(p.mode, Mode::Hold);
        assert_eq!(p.limit, Limit::Hold(Duration::from_secs(30)));
        assert_eq!(p.path, "/");
        let p = plan(&["-d", "250ms", "-c", "2", "-t", "8", "https://127.0.0.1:1"]);
        assert_eq!(p.limit, Limit::Duration(Duration::from_millis(250)));
        assert_eq!(p.threads, 2, "never more threads than connections");
        let p = plan(&["--no-ticket", "https://127.0.0.1:1"]);
        assert!(p.session_id && !p.tickets && p.resumption());
    }

    #[test]
    fn user_headers_replace_host_and_connection() {
        let p = plan(&[
            "--new-conn",
            "-H",
            "host: other",
            "-H",
            "Connection: keep-alive",
            "https://127.0.0.1:1/",
        ]);
        assert_eq!(
            String::from_utf8(p.request).unwrap(),
            "GET / HTTP/1.1\r\nhost: other\r\nConnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn ipv6_urls() {
        assert_eq!(
            split_url("https://[::1]:8443/x").unwrap(),
            ("::1".into(), 8443, "/x".into())
        );
        assert_eq!(split_url("https://[::1]").unwrap(), ("::1".into(), 443, "/".into()));
        let p = plan(&["https://[::1]:8443/"]);
        assert!(String::from_utf8(p.request).unwrap().contains("Host: [::1]:8443\r\n"));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse(&["--new-conn", "--handshake-only", "https://a"]).is_err());
        assert!(parse(&["--hold", "1s", "--new-conn", "https://a"]).is_err());
        assert!(parse(&["-d", "1", "-n", "5", "https://a"]).is_err());
        assert!(parse(&["--tls", "1.1", "https://a"]).is_err());
        assert!(parse(&["-d", "soon", "https://a"]).is_err());
        let bad = |args: &[&str]| parse(args).unwrap().plan().is_err();
        assert!(bad(&["http://127.0.0.1/"]));
        assert!(bad(&["https://127.0.0.1:99999/"]));
        assert!(bad(&["https://:443/"]));
        assert!(bad(&["-c", "0", "https://127.0.0.1/"]));
        assert!(bad(&["-n", "0", "https://127.0.0.1/"]));
        assert!(bad(&["-H", "no colon", "https://127.0.0.1/"]));
        assert!(bad(&["--connect-to", "127.0.0.1:x", "https://127.0.0.1/"]));
    }

    #[test]
    fn method_body_h2_rate() {
        let p = plan(&["--method", "POST", "--body", "abc", "https://127.0.0.1:1/p"]);
        assert_eq!(
            String::from_utf8(p.request).unwrap(),
            "POST /p HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 3\r\n\r\nabc"
        );
        let p = plan(&[
            "--h2",
            "-m",
            "8",
            "--rate",
            "1000",
            "--tfo",
            "-H",
            "X-A: b",
            "https://127.0.0.1:1/",
        ]);
        assert!(p.h2 && p.opts.tfo);
        assert_eq!(p.alpn_wire, b"\x02h2");
        assert_eq!((p.streams, p.rate), (8, Some(1000.0)));
        assert_eq!(p.headers, [("X-A".to_string(), "b".to_string())]);
        let bad = |args: &[&str]| parse(args).map_or(true, |a| a.plan().is_err());
        assert!(bad(&["-m", "4", "https://127.0.0.1/"]), "-m without --h2");
        assert!(bad(&["--h2", "--handshake-only", "https://127.0.0.1/"]));
        assert!(bad(&["--rate", "0", "https://127.0.0.1/"]));
        assert!(bad(&["--method", "G T", "https://127.0.0.1/"]));
    }

    #[test]
    fn h2_new_conn_alpn_and_sigalgs() {
        let p = plan(&["--h2", "--new-conn", "-n", "5", "https://127.0.0.1:1/"]);
        assert_eq!((p.mode, p.h2, p.streams), (Mode::NewConn, true, 1));
        let p = plan(&["--h2", "--alpn", "h2,http/1.1", "https://127.0.0.1:1/"]);
        assert_eq!(p.alpn_wire, b"\x02h2\x08http/1.1");
        let p = plan(&["--alpn", "", "https://127.0.0.1:1/"]);
        assert!(p.alpn_wire.is_empty(), "no ALPN extension");
        let p = plan(&["--sigalgs", "rsa_pss_rsae_sha256", "https://127.0.0.1:1/"]);
        assert_eq!(p.opts.sigalgs.as_deref(), Some("rsa_pss_rsae_sha256"));
        let err = |args: &[&str]| parse(args).unwrap().plan().unwrap_err().to_string();
        assert!(err(&["--h2", "--new-conn", "-m", "2", "https://127.0.0.1/"]).contains("--new-conn"));
        assert!(err(&["--h2", "--alpn", "http/1.1", "https://127.0.0.1/"]).contains("--alpn must offer h2"));
        assert!(err(&["--alpn", "h2,http/1.1", "https://127.0.0.1/"]).contains("add --h2"));
    }

    #[test]
    fn h3_modes_and_refusals() {
        let p = plan(&["--h3", "-m", "8", "https://127.0.0.1:1/"]);
        assert_eq!((p.mode, p.h3, p.h2, p.streams), (Mode::KeepAlive, true, false, 8));
        let p = plan(&["--h3", "--new-conn", "https://127.0.0.1:1/"]);
        assert_eq!(p.mode, Mode::NewConn);
        let bad = |args: &[&str]| parse(args).map_or(true, |a| a.plan().is_err());
        for args in [
            &["--h3", "--h2", "https://127.0.0.1/"][..],
            &["--h3", "--handshake-only", "https://127.0.0.1/"],
            &["--h3", "--rate", "10", "https://127.0.0.1/"],
            &["--h3", "--tls", "1.2", "https://127.0.0.1/"],
            &["--h3", "--new-conn", "-m", "2", "https://127.0.0.1/"],
        ] {
            assert!(bad(args), "{args:?}");
        }
    }
}

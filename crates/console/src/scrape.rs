//! One node's scrape: its registry entry's `admin_url` (read by tlsgate-config's address
//! parser), a bounded plain HTTP/1.0 GET of `/metrics` and, when it answers, `/keyless/pools`.

use std::time::Duration;
use tlsgate_config::{AddressError, OriginAddr};
use tlsgate_error::{Classify, Side};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest wait for one GET, connect included.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// Largest answer read.
const MAX_ANSWER: u64 = 16 << 20;

/// Why a node's metrics could not be read. The node is upstream of the console: every case is
/// [`Side::Upstream`], and a GET that failed on the way is safe to repeat at the next interval.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// The node registered no admin listener.
    #[error("no admin_url in its registry entry")]
    NoAdminUrl,
    /// Its `admin_url` is not an address.
    #[error("admin_url {url:?}: {source}")]
    BadAdminUrl {
        /// As registered.
        url: String,
        /// What is wrong with it.
        source: AddressError,
    },
    /// Its `admin_url` is not `http://` (the admin listener is plain HTTP).
    #[error("admin_url {url:?} is not http://")]
    NotHttp {
        /// As registered.
        url: String,
    },
    /// The TCP connection failed.
    #[error("connect {authority}: {source}")]
    Connect {
        /// `host:port`.
        authority: String,
        /// Why.
        source: std::io::Error,
    },
    /// Sending the request or reading the answer failed.
    #[error("{authority}{path}: {source}")]
    Io {
        /// `host:port`.
        authority: String,
        /// The path asked for.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The answer has no header block.
    #[error("no HTTP header")]
    NoHeader,
    /// The answer's status line has no status code.
    #[error("bad status line")]
    BadStatusLine,
    /// `/metrics` answered something else than 200.
    #[error("GET {url}/metrics: HTTP {status}")]
    Status {
        /// The node's `admin_url`.
        url: String,
        /// The status code.
        status: u16,
    },
    /// No complete answer within [`TIMEOUT`].
    #[error("{authority}{path}: no answer within 2 s")]
    Timeout {
        /// `host:port`.
        authority: String,
        /// The path asked for.
        path: String,
    },
}

impl Classify for ScrapeError {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::NoAdminUrl => "no_admin_url",
            Self::BadAdminUrl { .. } => "bad_admin_url",
            Self::NotHttp { .. } => "admin_url_not_http",
            Self::Connect { .. } => "connect",
            Self::Io { .. } => "io",
            Self::NoHeader => "no_http_header",
            Self::BadStatusLine => "bad_status_line",
            Self::Status { .. } => "http_status",
            Self::Timeout { .. } => "timeout",
        }
    }

    fn retry_safe(&self) -> bool {
        matches!(self, Self::Connect { .. } | Self::Io { .. } | Self::Timeout { .. })
    }
}

/// What a scrape read: the Prometheus text, and the `/keyless/pools` JSON when it answered.
pub type Scraped = (String, Option<serde_json::Value>);

/// Scrapes the node whose registry entry says `admin_url`, on its own task.
pub fn scrape(admin_url: Option<String>) -> tokio::task::JoinHandle<Result<Scraped, ScrapeError>> {
    tokio::spawn(async move {
        let url = admin_url.ok_or(ScrapeError::NoAdminUrl)?;
        let authority = admin_authority(&url)?;
        let (status, metrics) = http_get(&authority, "/metrics").await?;
        if status != 200 {
            return Err(ScrapeError::Status { url, status });
        }
        let pools = match http_get(&authority, "/keyless/pools").await {
            Ok((200, body)) => serde_json::from_str(&body).ok(),
            _ => None,
        };
        Ok((metrics, pools))
    })
}

/// `host:port` of an `http://host:port[/]` admin URL.
pub fn admin_authority(url: &str) -> Result<String, ScrapeError> {
    let not_http = || ScrapeError::NotHttp { url: url.to_string() };
    if !url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
        return Err(not_http());
    }
    let addr = OriginAddr::parse(url).map_err(|source| ScrapeError::BadAdminUrl {
        url: url.to_string(),
        source,
    })?;
    Ok(addr.authority())
}

/// A bounded plain HTTP/1.0 GET (the admin listener is plain HTTP): (status, body).
pub async fn http_get(authority: &str, path: &str) -> Result<(u16, String), ScrapeError> {
    let io = |source| ScrapeError::Io {
        authority: authority.to_string(),
        path: path.to_string(),
        source,
    };
    let work = async {
        let mut s = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|source| ScrapeError::Connect {
                authority: authority.to_string(),
                source,
            })?;
        let req = format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.map_err(io)?;
        let mut buf = Vec::new();
        s.take(MAX_ANSWER).read_to_end(&mut buf).await.map_err(io)?;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text.split_once("\r\n\r\n").ok_or(ScrapeError::NoHeader)?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or(ScrapeError::BadStatusLine)?;
        Ok((status, body.to_string()))
    };
    tokio::time::timeout(TIMEOUT, work)
        .await
        .map_err(|_| ScrapeError::Timeout {
            authority: authority.to_string(),
            path: path.to_string(),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_urls_are_read_by_the_address_parser() {
        assert_eq!(admin_authority("http://127.0.0.1:9090").unwrap(), "127.0.0.1:9090");
        assert_eq!(admin_authority("http://127.0.0.1:9090/").unwrap(), "127.0.0.1:9090");
        assert_eq!(admin_authority("HTTP://[::1]:9090").unwrap(), "[::1]:9090");
        assert_eq!(admin_authority("http://node-a").unwrap(), "node-a:80");
        for bad in ["https://h:1", "h:1", "redis://h:1"] {
            let e = admin_authority(bad).unwrap_err();
            assert_eq!(e.kind(), "admin_url_not_http", "{bad}");
        }
        let e = admin_authority("http://::1:9090").unwrap_err();
        assert_eq!(
            e.to_string(),
            "admin_url \"http://::1:9090\": IPv6 addresses need brackets ([::1]:9090)"
        );
        assert_eq!((e.side(), e.retry_safe()), (Side::Upstream, false));
    }

    #[tokio::test]
    async fn an_unreachable_node_is_upstream_and_retry_safe() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = http_get(&format!("127.0.0.1:{port}"), "/metrics").await.unwrap_err();
        assert_eq!((e.side(), e.kind(), e.retry_safe()), (Side::Upstream, "connect", true));
        assert!(e.to_string().starts_with(&format!("connect 127.0.0.1:{port}: ")), "{e}");
    }
}

//! HTTPS to the ACME server: one connection per request (ACME traffic is a few requests per
//! certificate and day), HTTP/1.1 through hyper over tokio-boring, the server verified against
//! the system's roots or a configured CA bundle (Pebble's, in tests).

use crate::error::AcmeError;
use boring::ssl::{SslConnector, SslMethod};
use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use std::path::Path;
use std::time::Duration;

/// The largest answer read from the CA (certificate chains and directories are a few KiB).
const MAX_BODY: usize = 1 << 20;

/// A CA's answer.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: StatusCode,
    /// Headers (Replay-Nonce, Location, Retry-After, Link).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Response {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `Retry-After` in seconds from now (delta-seconds or an HTTP date; an unreadable value
    /// counts as a minute).
    pub fn retry_after(&self) -> Option<u64> {
        let v = self.header("retry-after")?.trim();
        Some(retry_after_secs(v, crate::time::now()))
    }
}

/// `Retry-After`'s value as seconds after `now`.
pub fn retry_after_secs(value: &str, now: i64) -> u64 {
    if let Ok(secs) = value.parse::<u64>() {
        return secs;
    }
    match crate::time::parse_http_date(value) {
        Some(at) => u64::try_from(at - now).unwrap_or(0),
        None => 60,
    }
}

/// The HTTPS client.
#[derive(Clone)]
pub struct HttpClient {
    tls: SslConnector,
    timeout: Duration,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

impl HttpClient {
    /// A client trusting `ca` (PEM bundle) or, without it, the system's roots.
    pub fn new(ca: Option<&Path>, timeout: Duration) -> Result<Self, AcmeError> {
        let mut b = SslConnector::builder(SslMethod::tls())?;
        match ca {
            Some(ca) => b
                .set_ca_file(ca)
                .map_err(|e| AcmeError::Io(format!("{}: cannot load CA bundle: {e}", ca.display())))?,
            None => b.set_default_verify_paths()?,
        }
        b.set_alpn_protos(b"\x08http/1.1")?;
        Ok(Self {
            tls: b.build(),
            timeout,
        })
    }

    /// Sends one request and reads the whole answer.
    pub async fn send(&self, method: Method, url: &str, body: Option<Vec<u8>>) -> Result<Response, AcmeError> {
        tokio::time::timeout(self.timeout, self.send_inner(method, url, body))
            .await
            .map_err(|_| AcmeError::Transport(format!("{url}: no answer within {:?}", self.timeout)))?
    }

    async fn send_inner(&self, method: Method, url: &str, body: Option<Vec<u8>>) -> Result<Response, AcmeError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| AcmeError::Malformed(format!("bad URL {url:?}: {e}")))?;
        if uri.scheme_str() != Some("https") {
            return Err(AcmeError::Malformed(format!("{url}: ACME URLs must be https")));
        }
        let host = uri
            .host()
            .ok_or_else(|| AcmeError::Malformed(format!("{url}: no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(443);
        let transport = |e: &dyn std::fmt::Display| AcmeError::Transport(format!("{host}:{port}: {e}"));
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| transport(&e))?;
        let _ = tcp.set_nodelay(true);
        let config = self.tls.configure().map_err(|e| transport(&e))?;
        let tls = tokio_boring::connect(config, &host, tcp)
            .await
            .map_err(|e| transport(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| transport(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let authority = uri.authority().map_or(host.clone(), |a| a.to_string());
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, authority)
            .header(header::USER_AGENT, concat!("tlsgate/", env!("CARGO_PKG_VERSION")))
            .header(header::ACCEPT, "application/json, application/pem-certificate-chain");
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/jose+json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| AcmeError::Malformed(e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(|e| transport(&e))?;
        let (parts, body) = resp.into_parts();
        let body = Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|e| transport(&e))?
            .to_bytes();
        Ok(Response {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::retry_after_secs;

    #[test]
    fn retry_after_forms() {
        assert_eq!(retry_after_secs("3", 0), 3);
        assert_eq!(retry_after_secs("Thu, 01 Jan 1970 00:01:00 GMT", 50), 10);
        assert_eq!(
            retry_after_secs("Thu, 01 Jan 1970 00:01:00 GMT", 70),
            0,
            "a date in the past: now"
        );
        assert_eq!(retry_after_secs("soon", 0), 60);
    }
}

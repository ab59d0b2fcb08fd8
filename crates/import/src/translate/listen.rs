//! `listen` directives: the address (nginx's forms: `443`, `*:443`, `1.2.3.4:443`, `[::]:443`,
//! `localhost:443`, a bare address meaning port 80) and the parameters tlsgate has an
//! equivalent for (`ssl`, `http2`, `default_server`, `backlog=`, `fastopen=`).

use crate::error::Untranslatable;
use crate::nginx::Directive;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// One parsed `listen`.
#[derive(Debug, Clone)]
pub struct Listen<'a> {
    /// The directive.
    pub d: &'a Directive,
    /// The address, or why it cannot be bound by tlsgate.
    pub addr: Result<SocketAddr, Untranslatable>,
    /// `ssl`
    pub ssl: bool,
    /// `http2`
    pub http2: bool,
    /// `default_server` (or the old `default`)
    pub default_server: bool,
    /// `backlog=N`
    pub backlog: Option<u32>,
    /// `fastopen=N`
    pub fastopen: Option<u32>,
    /// Parameters without an equivalent, each with why.
    pub unsupported: Vec<String>,
}

/// nginx's `listen` when a server has none: `*:80`.
pub fn default_addr() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 80)
}

/// Parses a `listen` directive.
pub fn parse(d: &Directive) -> Listen<'_> {
    let mut l = Listen {
        d,
        addr: Err("no address".into()),
        ssl: false,
        http2: false,
        default_server: false,
        backlog: None,
        fastopen: None,
        unsupported: Vec::new(),
    };
    let Some(first) = d.arg(0) else {
        return l;
    };
    l.addr = address(first);
    for p in d.args.iter().skip(1).map(|w| w.text.as_str()) {
        let (key, value) = p.split_once('=').map_or((p, None), |(k, v)| (k, Some(v)));
        match key {
            "ssl" => l.ssl = true,
            "http2" => l.http2 = true,
            "default_server" | "default" => l.default_server = true,
            "backlog" => match value.and_then(|v| v.parse::<i64>().ok()) {
                Some(n) if n >= 1 => l.backlog = Some(n.min(i64::from(u32::MAX)) as u32),
                _ => l.unsupported.push(format!("{p}: not a queue length tlsgate accepts")),
            },
            "fastopen" => match value.and_then(|v| v.parse::<u32>().ok()) {
                Some(n) if n <= 65_535 => l.fastopen = Some(n),
                _ => l.unsupported.push(format!("{p}: tlsgate's tcp_fastopen is 0 to 65535")),
            },
            "reuseport" | "deferred" | "bind" | "ipv6only" if value != Some("off") => {}
            "quic" => l.unsupported.push("quic: tlsgate does not serve HTTP/3".into()),
            "proxy_protocol" => l.unsupported.push(
                "proxy_protocol: set proxy_protocol = true with proxy_protocol_from (the balancers' networks) on the [[listener]] by hand"
                    .into(),
            ),
            "ipv6only" => l.unsupported.push("ipv6only=off: tlsgate binds IPv6 addresses IPv6-only".into()),
            "spdy" => l.unsupported.push("spdy: obsolete; tlsgate offers HTTP/2".into()),
            _ => l.unsupported.push(format!("{key}: no equivalent in tlsgate")),
        }
    }
    l
}

/// The socket address of a `listen` address argument.
fn address(text: &str) -> Result<SocketAddr, Untranslatable> {
    if text.starts_with("unix:") {
        return Err("unix sockets: tlsgate listens on TCP addresses only".into());
    }
    if crate::nginx::has_variable(text) {
        return Err("variables are not allowed here".into());
    }
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = text.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, 80));
    }
    let (host, port) = text.rsplit_once(':').unwrap_or((text, "80"));
    let port: u16 = port.parse().map_err(|_| format!("{text:?} is not an address"))?;
    match host {
        "*" => Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)),
        "localhost" => Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)),
        _ => Err(Untranslatable(format!(
            "{host:?} is a host name: tlsgate listens on IP addresses (write the address)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::parser::parse as parse_conf;

    fn listen(text: &str) -> Listen<'static> {
        let d = Box::leak(Box::new(parse_conf(text, 0).unwrap().remove(0)));
        parse(d)
    }

    #[test]
    fn addresses() {
        assert_eq!(listen("listen 443 ssl;").addr.unwrap().to_string(), "0.0.0.0:443");
        assert_eq!(listen("listen [::]:443 ssl;").addr.unwrap().to_string(), "[::]:443");
        assert_eq!(listen("listen *:8443;").addr.unwrap().to_string(), "0.0.0.0:8443");
        assert_eq!(listen("listen 127.0.0.1;").addr.unwrap().to_string(), "127.0.0.1:80");
        assert_eq!(listen("listen localhost:81;").addr.unwrap().to_string(), "127.0.0.1:81");
        assert!(listen("listen unix:/run/x.sock;").addr.is_err());
        assert!(listen("listen example.com:443;").addr.is_err());
    }

    #[test]
    fn parameters() {
        let l = listen("listen 443 ssl http2 default_server backlog=511 fastopen=256 reuseport quic;");
        assert!(l.ssl && l.http2 && l.default_server);
        assert_eq!((l.backlog, l.fastopen), (Some(511), Some(256)));
        assert_eq!(l.unsupported.len(), 1);
        assert!(l.unsupported[0].starts_with("quic"));
    }
}

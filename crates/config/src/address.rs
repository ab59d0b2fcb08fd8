//! Addresses of remote servers written by an operator: origins (`[[upstream]] servers`, the
//! control plane's upstream members) and key servers (`key_servers`, `[[keyless.pool]] servers`,
//! key-server pool members) and memcached servers. One strict parser for all of them, so that
//! what `tlsgate check` accepts is exactly what the runtime can use.
//!
//! Accepted ([`OriginAddr::parse`]):
//!
//! - `host:port`, where host is a DNS name of RFC 1123 labels (`app.internal`, `localhost`) or an
//!   IPv4 address (`10.0.0.5`);
//! - `[v6]:port` (`[::1]:8080`): an IPv6 address always goes in brackets;
//! - `http://host[:port][/]` and `https://host[:port][/]` (ports 80 and 443 when left out; no
//!   path, query, fragment or credentials). `https://` sets [`OriginAddr::tls`].
//!
//! [`OriginAddr::parse_host_port`] accepts the first two forms only (key servers and memcached
//! servers have no scheme); [`OriginAddr::parse_url`] accepts the URL forms with a path and
//! query too (OCSP responders). Ports are `1..=65535`. Every refusal is an [`AddressError`] whose
//! message says what is wrong and, where it can, what to write instead.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use tlsgate_error::{Classify, Side};

/// Longest DNS name (RFC 1035 2.3.4, without the trailing dot).
const MAX_NAME_LEN: usize = 253;
/// Longest DNS label.
const MAX_LABEL_LEN: usize = 63;

/// The host part of an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// An IPv4 or IPv6 address.
    Ip(IpAddr),
    /// A DNS name, lower-cased.
    Name(String),
}

impl Host {
    /// The host without brackets: what a certificate's name is checked against, or what a
    /// resolver is asked for.
    pub fn bare(&self) -> String {
        match self {
            Host::Ip(ip) => ip.to_string(),
            Host::Name(n) => n.clone(),
        }
    }
}

/// As in a URI authority: IPv6 addresses in brackets.
impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Name(n) => f.write_str(n),
        }
    }
}

/// A parsed remote server address: host, port and whether it is reached over TLS (`https://`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OriginAddr {
    /// IP address or DNS name.
    pub host: Host,
    /// TCP port, `1..=65535`.
    pub port: u16,
    /// Written as an `https://` URL (TLS to the server).
    pub tls: bool,
}

/// Why an address was refused. The messages do not repeat the address: callers print it first
/// (`upstream[0].servers[2]: "::1:80": IPv6 addresses need brackets ([::1]:80)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Nothing at all.
    #[error("is empty; write host:port")]
    Empty,
    /// `host` alone.
    #[error("has no port; write host:port")]
    MissingPort,
    /// `:80`.
    #[error("has no host before the port; write host:port")]
    MissingHost,
    /// Not a number in `1..=65535`.
    #[error("port {port:?} is not a number in 1..=65535")]
    BadPort {
        /// The port as written.
        port: String,
    },
    /// `::1:80`.
    #[error("IPv6 addresses need brackets ({suggestion})")]
    UnbracketedIpv6 {
        /// The address as it should be written.
        suggestion: String,
    },
    /// `127.0.0.1:24101:80`.
    #[error("has more than one ':' (write one host:port; an IPv6 address goes in brackets: [::1]:80)")]
    TooManyColons,
    /// `[::1` without `]`.
    #[error("'[' is not closed by ']'; write [v6]:port")]
    UnclosedBracket,
    /// `[::1]x:80`.
    #[error("unexpected {rest:?} after ']'; write [v6]:port")]
    AfterBracket {
        /// What follows the `]`.
        rest: String,
    },
    /// `[zz]:1`.
    #[error("[{inner}] is not an IPv6 address (zone ids such as %eth0 are not supported)")]
    BadIpv6 {
        /// Between the brackets.
        inner: String,
    },
    /// Only digits and dots, but not a dotted-quad IPv4 address (`1.2.3`, `256.0.0.1`).
    #[error("{host:?} is not an IPv4 address (four numbers 0..=255 separated by dots)")]
    BadIpv4 {
        /// The host as written.
        host: String,
    },
    /// A character a host name cannot hold (`my host`, `a/b`, `a_b`).
    #[error("host {host:?} contains {ch:?}{}", char_hint(.ch))]
    BadHostChar {
        /// The host as written.
        host: String,
        /// The first offending character.
        ch: char,
    },
    /// `a..b`, `.a`, `a.`.
    #[error("host {host:?} has an empty label (two dots in a row, or a leading or trailing dot)")]
    EmptyLabel {
        /// The host as written.
        host: String,
    },
    /// A label over 63 characters.
    #[error("host {host:?} has a label longer than 63 characters")]
    LongLabel {
        /// The host as written.
        host: String,
    },
    /// A name over 253 characters.
    #[error("host name is longer than 253 characters")]
    LongName,
    /// `-a`, `a-`.
    #[error("host {host:?} has a label that starts or ends with '-'")]
    HyphenAtEdge {
        /// The host as written.
        host: String,
    },
    /// `0x7f.1`: a resolver would read it as a number, not a name.
    #[error("host {host:?} is neither an IPv4 address nor a host name (its last label is all digits)")]
    NumericLastLabel {
        /// The host as written.
        host: String,
    },
    /// `ftp://…`.
    #[error("scheme {scheme:?} is not supported; write host:port, http://host:port or https://host:port")]
    UnsupportedScheme {
        /// The scheme as written.
        scheme: String,
    },
    /// No `scheme://` where a URL is expected (an OCSP responder).
    #[error("is not a URL; write http://host[:port][/path]")]
    NotAUrl,
    /// A URL where only `host:port` is accepted (key servers, memcached servers).
    #[error("a URL is not accepted here; write host:port")]
    UrlNotAllowed,
    /// `http://h:80/app`.
    #[error("path {path:?} is not allowed; an origin URL is scheme://host[:port] only (routes choose paths)")]
    PathNotAllowed {
        /// From the first `/`, `?` or `#` on.
        path: String,
    },
    /// `http://user:pw@h:80`.
    #[error("credentials (user@) are not allowed in an address")]
    Credentials,
}

/// An operator's address in a configuration file; a caller that reads an address from an API
/// request wraps the error as [`Side::Downstream`] (e.g. with [`tlsgate_error::Error::wrap`] or its own error type).
impl Classify for AddressError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        "address"
    }
}

fn char_hint(ch: &char) -> &'static str {
    match *ch {
        '/' => "; an address has no path (write host:port or http://host:port)",
        c if c.is_whitespace() => "; an address has no spaces",
        c if !c.is_ascii() => "; write an internationalised name in its xn-- (punycode) form",
        _ => "; a host name has letters, digits, '-' and '.' only (RFC 1123)",
    }
}

impl OriginAddr {
    /// Parses an origin: `host:port`, `[v6]:port`, `http://host[:port]` or `https://host[:port]`.
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        parse(text, true)
    }

    /// Parses `host:port` or `[v6]:port` only (no URL); `tls` is false.
    pub fn parse_host_port(text: &str) -> Result<Self, AddressError> {
        parse(text, false)
    }

    /// Parses an `http://` or `https://` URL that may go on with a path and query (an OCSP
    /// responder): the server, and the rest from the first `/`, `?` or `#` on (empty when none).
    pub fn parse_url(text: &str) -> Result<(Self, &str), AddressError> {
        if text.is_empty() {
            return Err(AddressError::Empty);
        }
        let (tls, authority, path) = split_url(text)?.ok_or(AddressError::NotAUrl)?;
        Ok((url_server(authority, tls)?, path))
    }

    /// `host:port` with an IPv6 host in brackets: what goes into a URI authority or
    /// `TcpStream::connect`.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }
}

/// `host:port` (IPv6 in brackets), or `https://host:port` for a TLS origin; parses back to the
/// same value.
impl fmt::Display for OriginAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tls {
            f.write_str("https://")?;
        }
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl FromStr for OriginAddr {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

fn parse(text: &str, allow_url: bool) -> Result<OriginAddr, AddressError> {
    if text.is_empty() {
        return Err(AddressError::Empty);
    }
    let Some((tls, authority, path)) = split_url(text)? else {
        let (host, port) = split_host_port(text, None)?;
        return Ok(OriginAddr { host, port, tls: false });
    };
    if !allow_url {
        return Err(AddressError::UrlNotAllowed);
    }
    if !path.is_empty() && path != "/" {
        return Err(AddressError::PathNotAllowed { path: path.to_string() });
    }
    url_server(authority, tls)
}

/// `scheme://authority[path]`: whether the scheme is `https`, the authority, and the rest from
/// the first `/`, `?` or `#` on. `None` when there is no `://`; only `http` and `https` pass.
fn split_url(text: &str) -> Result<Option<(bool, &str, &str)>, AddressError> {
    let Some((scheme, rest)) = text.split_once("://") else {
        return Ok(None);
    };
    let tls = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        _ => {
            return Err(AddressError::UnsupportedScheme {
                scheme: scheme.to_string(),
            })
        }
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    Ok(Some((tls, authority, path)))
}

/// The server of a URL: its authority, with the scheme's default port when it names none.
fn url_server(authority: &str, tls: bool) -> Result<OriginAddr, AddressError> {
    if authority.contains('@') {
        return Err(AddressError::Credentials);
    }
    if authority.is_empty() {
        return Err(AddressError::MissingHost);
    }
    let (host, port) = split_host_port(authority, Some(if tls { 443 } else { 80 }))?;
    Ok(OriginAddr { host, port, tls })
}

/// `host:port` or `[v6]:port`; the port may be left out when there is a `default`.
fn split_host_port(text: &str, default: Option<u16>) -> Result<(Host, u16), AddressError> {
    if let Some(after) = text.strip_prefix('[') {
        let (inner, rest) = after.split_once(']').ok_or(AddressError::UnclosedBracket)?;
        let ip = inner.parse::<Ipv6Addr>().map_err(|_| AddressError::BadIpv6 {
            inner: inner.to_string(),
        })?;
        let port = match (rest.strip_prefix(':'), default) {
            (Some(port), _) => parse_port(port)?,
            (None, Some(d)) if rest.is_empty() => d,
            (None, None) if rest.is_empty() => return Err(AddressError::MissingPort),
            (None, _) => return Err(AddressError::AfterBracket { rest: rest.to_string() }),
        };
        return Ok((Host::Ip(IpAddr::V6(ip)), port));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return match default {
            Some(d) => Ok((parse_host(text)?, d)),
            None => Err(AddressError::MissingPort),
        };
    };
    if host.contains(':') {
        let port_ok = parse_port(port).is_ok();
        if port_ok && host.parse::<Ipv6Addr>().is_ok() {
            return Err(AddressError::UnbracketedIpv6 {
                suggestion: format!("[{host}]:{port}"),
            });
        }
        if let Ok(ip) = text.parse::<Ipv6Addr>() {
            let port = default.map_or("PORT".to_string(), |d| d.to_string());
            return Err(AddressError::UnbracketedIpv6 {
                suggestion: format!("[{ip}]:{port}"),
            });
        }
        return Err(AddressError::TooManyColons);
    }
    if host.is_empty() {
        return Err(AddressError::MissingHost);
    }
    if port.is_empty() {
        return Err(AddressError::MissingPort);
    }
    let port = parse_port(port)?;
    Ok((parse_host(host)?, port))
}

fn parse_port(port: &str) -> Result<u16, AddressError> {
    let bad = || AddressError::BadPort { port: port.to_string() };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(bad()),
    }
}

/// An IPv4 address or an RFC 1123 host name (not bracketed).
fn parse_host(host: &str) -> Result<Host, AddressError> {
    if host.is_empty() {
        return Err(AddressError::MissingHost);
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return host
            .parse::<Ipv4Addr>()
            .map(|ip| Host::Ip(IpAddr::V4(ip)))
            .map_err(|_| AddressError::BadIpv4 { host: host.to_string() });
    }
    if let Some(ch) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.')))
    {
        return Err(AddressError::BadHostChar {
            host: host.to_string(),
            ch,
        });
    }
    if host.len() > MAX_NAME_LEN {
        return Err(AddressError::LongName);
    }
    let owned = || host.to_string();
    let mut last = "";
    for label in host.split('.') {
        if label.is_empty() {
            return Err(AddressError::EmptyLabel { host: owned() });
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(AddressError::LongLabel { host: owned() });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(AddressError::HyphenAtEdge { host: owned() });
        }
        last = label;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddressError::NumericLastLabel { host: owned() });
    }
    Ok(Host::Name(host.to_ascii_lowercase()))
}

/// Splits the authority of a request (a `Host` header, HTTP/2 `:authority`, the host of an
/// `Origin`) into its host, without IPv6 brackets, and its port when one is written: the one
/// reading of a client's `host[:port]` / `[v6][:port]` for every listener (proxy routing, the
/// admin and console guards). Lenient where RFC 3986 is (a reg-name may hold `_`, `~`,
/// sub-delimiters and percent-escapes; a trailing dot stays), strict on shape: an IPv6 host must
/// parse and be bracketed, a port is digits in `0..=65535`. Borrows; allocates nothing.
pub fn split_authority(text: &str) -> Result<(&str, Option<u16>), AddressError> {
    let port_of = |p: &str| -> Result<u16, AddressError> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(AddressError::BadPort { port: p.to_string() });
        }
        p.parse().map_err(|_| AddressError::BadPort { port: p.to_string() })
    };
    if let Some(after) = text.strip_prefix('[') {
        let (inner, rest) = after.split_once(']').ok_or(AddressError::UnclosedBracket)?;
        inner.parse::<Ipv6Addr>().map_err(|_| AddressError::BadIpv6 {
            inner: inner.to_string(),
        })?;
        let port = match rest {
            "" => None,
            _ => match rest.strip_prefix(':') {
                Some(p) => Some(port_of(p)?),
                None => return Err(AddressError::AfterBracket { rest: rest.to_string() }),
            },
        };
        return Ok((inner, port));
    }
    let (host, port) = match text.split_once(':') {
        Some((host, port)) if !port.contains(':') => (host, Some(port_of(port)?)),
        Some(_) => return Err(AddressError::TooManyColons),
        None => (text, None),
    };
    if host.is_empty() {
        return Err(AddressError::MissingHost);
    }
    // RFC 3986 reg-name characters (unreserved, sub-delims, `%`); a `matches!`, not a search of a
    // string per character: this runs for every proxied request's Host.
    let reg_name = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.' | '_' | '~' | '%' | '!' | '$' | '&' | '\'' | '(' | ')' | '*' | '+' | ',' | ';' | '='
            )
    };
    if let Some(ch) = host.chars().find(|c| !reg_name(*c)) {
        return Err(AddressError::BadHostChar {
            host: host.to_string(),
            ch,
        });
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_authorities_split_without_allocating_or_guessing() {
        assert_eq!(split_authority("Example.com"), Ok(("Example.com", None)));
        assert_eq!(split_authority("example.com:8443"), Ok(("example.com", Some(8443))));
        assert_eq!(split_authority("my_host.local."), Ok(("my_host.local.", None)));
        assert_eq!(split_authority("[::1]:443"), Ok(("::1", Some(443))));
        assert_eq!(split_authority("[::1]"), Ok(("::1", None)));
        assert_eq!(split_authority("10.0.0.1:0"), Ok(("10.0.0.1", Some(0))));
        for bad in [
            "", ":80", "h:", "h:x", "h:65536", "::1", "[::1", "[nope]", "[::1]x", "a b", "a/b", "a@b",
        ] {
            assert!(split_authority(bad).is_err(), "{bad:?} accepted");
        }
    }

    use super::*;

    fn ok(text: &str) -> OriginAddr {
        OriginAddr::parse(text).unwrap_or_else(|e| panic!("{text:?} refused: {e}"))
    }

    fn name(n: &str, port: u16, tls: bool) -> OriginAddr {
        OriginAddr {
            host: Host::Name(n.into()),
            port,
            tls,
        }
    }

    fn ip(ip: &str, port: u16, tls: bool) -> OriginAddr {
        OriginAddr {
            host: Host::Ip(ip.parse().unwrap()),
            port,
            tls,
        }
    }

    fn err(text: &str) -> AddressError {
        match OriginAddr::parse(text) {
            Ok(a) => panic!("{text:?} accepted as {a:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(ok("app.internal:8080"), name("app.internal", 8080, false));
        assert_eq!(ok("localhost:1"), name("localhost", 1, false));
        assert_eq!(ok("App-2.Example.COM:65535"), name("app-2.example.com", 65535, false));
        assert_eq!(ok("a:80"), name("a", 80, false));
        assert_eq!(ok("1.2.3.4:80"), ip("1.2.3.4", 80, false));
        assert_eq!(ok("[::1]:80"), ip("::1", 80, false));
        assert_eq!(ok("[2001:db8::5]:8443"), ip("2001:db8::5", 8443, false));
        assert_eq!(ok("[::ffff:10.0.0.1]:80"), ip("::ffff:10.0.0.1", 80, false));
        assert_eq!(ok("api.1x:80"), name("api.1x", 80, false));
        assert_eq!(ok("h:0080"), name("h", 80, false));
        let label63 = format!("{}.com:1", "a".repeat(63));
        assert!(OriginAddr::parse(&label63).is_ok());
    }

    #[test]
    fn accepted_urls() {
        assert_eq!(ok("http://app:8080"), name("app", 8080, false));
        assert_eq!(ok("http://app"), name("app", 80, false));
        assert_eq!(ok("http://app/"), name("app", 80, false));
        assert_eq!(ok("https://app"), name("app", 443, true));
        assert_eq!(ok("https://app:8443/"), name("app", 8443, true));
        assert_eq!(ok("HTTPS://[::1]"), ip("::1", 443, true));
        assert_eq!(ok("http://[::1]:81"), ip("::1", 81, false));
        assert_eq!(ok("http://10.0.0.1"), ip("10.0.0.1", 80, false));
    }

    #[test]
    fn refused_forms_say_why() {
        use AddressError::*;
        let cases: Vec<(&str, AddressError)> = vec![
            ("", Empty),
            ("host", MissingPort),
            ("host:", MissingPort),
            (":80", MissingHost),
            ("host:0", BadPort { port: "0".into() }),
            ("host:65536", BadPort { port: "65536".into() }),
            ("host:+80", BadPort { port: "+80".into() }),
            ("host:8o", BadPort { port: "8o".into() }),
            ("host: 80", BadPort { port: " 80".into() }),
            (
                "::1:80",
                UnbracketedIpv6 {
                    suggestion: "[::1]:80".into(),
                },
            ),
            (
                "2001:db8::5:8080",
                UnbracketedIpv6 {
                    suggestion: "[2001:db8::5]:8080".into(),
                },
            ),
            (
                "::1",
                UnbracketedIpv6 {
                    suggestion: "[::1]:PORT".into(),
                },
            ),
            (
                "http://::1",
                UnbracketedIpv6 {
                    suggestion: "[::1]:80".into(),
                },
            ),
            ("127.0.0.1:24101:80", TooManyColons),
            ("a:b:c", TooManyColons),
            ("[::1:443", UnclosedBracket),
            ("[::1]", MissingPort),
            ("[::1]x:80", AfterBracket { rest: "x:80".into() }),
            ("[::1]80", AfterBracket { rest: "80".into() }),
            ("[zz]:1", BadIpv6 { inner: "zz".into() }),
            (
                "[1.2.3.4]:1",
                BadIpv6 {
                    inner: "1.2.3.4".into(),
                },
            ),
            (
                "[fe80::1%eth0]:1",
                BadIpv6 {
                    inner: "fe80::1%eth0".into(),
                },
            ),
            ("1.2.3:80", BadIpv4 { host: "1.2.3".into() }),
            (
                "256.1.1.1:80",
                BadIpv4 {
                    host: "256.1.1.1".into(),
                },
            ),
            (
                "1.2.3.4.:80",
                BadIpv4 {
                    host: "1.2.3.4.".into(),
                },
            ),
            (
                "my host:8080",
                BadHostChar {
                    host: "my host".into(),
                    ch: ' ',
                },
            ),
            (
                " a:80",
                BadHostChar {
                    host: " a".into(),
                    ch: ' ',
                },
            ),
            (
                "a/b:80",
                BadHostChar {
                    host: "a/b".into(),
                    ch: '/',
                },
            ),
            (
                "my_host:80",
                BadHostChar {
                    host: "my_host".into(),
                    ch: '_',
                },
            ),
            (
                "user@h:80",
                BadHostChar {
                    host: "user@h".into(),
                    ch: '@',
                },
            ),
            (
                "bücher.de:80",
                BadHostChar {
                    host: "bücher.de".into(),
                    ch: 'ü',
                },
            ),
            ("a..b:1", EmptyLabel { host: "a..b".into() }),
            ("a.:1", EmptyLabel { host: "a.".into() }),
            (".a:1", EmptyLabel { host: ".a".into() }),
            ("-a:1", HyphenAtEdge { host: "-a".into() }),
            ("a-.b:1", HyphenAtEdge { host: "a-.b".into() }),
            ("0x7f.1:80", NumericLastLabel { host: "0x7f.1".into() }),
            ("ftp://h:21", UnsupportedScheme { scheme: "ftp".into() }),
            ("redis://h:6379", UnsupportedScheme { scheme: "redis".into() }),
            ("https://h:p", BadPort { port: "p".into() }),
            ("http://h:", MissingPort),
            ("http://", MissingHost),
            ("http://:80", MissingHost),
            ("http://h:80/app", PathNotAllowed { path: "/app".into() }),
            ("http://h?x=1", PathNotAllowed { path: "?x=1".into() }),
            ("http://h#f", PathNotAllowed { path: "#f".into() }),
            ("http://u:p@h:80", Credentials),
            ("http://a/b:80", PathNotAllowed { path: "/b:80".into() }),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "{text:?}");
        }
        let long_label = format!("{}.com:1", "a".repeat(64));
        assert!(matches!(err(&long_label), LongLabel { .. }));
        let long_name = format!("{}a:1", "a.".repeat(127));
        assert_eq!(err(&long_name), LongName);
    }

    #[test]
    fn messages_are_precise() {
        assert_eq!(err("::1:80").to_string(), "IPv6 addresses need brackets ([::1]:80)");
        assert!(err("my host:8080").to_string().contains("no spaces"));
        assert!(err("a/b:80").to_string().contains("no path"));
        assert!(err("127.0.0.1:24101:80").to_string().contains("more than one ':'"));
        assert_eq!(
            err("https://h:p").to_string(),
            "port \"p\" is not a number in 1..=65535"
        );
        assert!(err("ftp://h").to_string().contains("\"ftp\" is not supported"));
        assert_eq!((err("h").side(), err("h").kind()), (Side::Config, "address"));
    }

    #[test]
    fn host_port_only_refuses_urls() {
        assert_eq!(
            OriginAddr::parse_host_port("http://h:80"),
            Err(AddressError::UrlNotAllowed)
        );
        assert_eq!(
            OriginAddr::parse_host_port("https://h"),
            Err(AddressError::UrlNotAllowed)
        );
        assert_eq!(
            OriginAddr::parse_host_port("ftp://h"),
            Err(AddressError::UnsupportedScheme { scheme: "ftp".into() })
        );
        assert_eq!(
            OriginAddr::parse_host_port("ks1:2407").unwrap(),
            name("ks1", 2407, false)
        );
        assert_eq!(
            OriginAddr::parse_host_port("[::1]:2407").unwrap(),
            ip("::1", 2407, false)
        );
    }

    #[test]
    fn urls_with_paths_keep_the_path() {
        let (server, path) = OriginAddr::parse_url("http://ocsp.example.com/ca?x=1").unwrap();
        assert_eq!((server, path), (name("ocsp.example.com", 80, false), "/ca?x=1"));
        let (server, path) = OriginAddr::parse_url("HTTP://[::1]:8888").unwrap();
        assert_eq!((server, path), (ip("::1", 8888, false), ""));
        assert!(OriginAddr::parse_url("https://h/").unwrap().0.tls);
        for (text, want) in [
            ("", AddressError::Empty),
            ("ocsp.example:80", AddressError::NotAUrl),
            ("http://", AddressError::MissingHost),
            ("http:///ocsp", AddressError::MissingHost),
            ("http://u@h/", AddressError::Credentials),
            ("ldap://h/", AddressError::UnsupportedScheme { scheme: "ldap".into() }),
            (
                "http://my_host/",
                AddressError::BadHostChar {
                    host: "my_host".into(),
                    ch: '_',
                },
            ),
        ] {
            assert_eq!(OriginAddr::parse_url(text), Err(want), "{text:?}");
        }
    }

    #[test]
    fn display_and_authority_parse_back() {
        for text in [
            "a:1",
            "[::1]:80",
            "1.2.3.4:5",
            "https://h:443",
            "https://[2001:db8::1]:8443",
            "http://x",
            "HTTP://Up.Case:9",
        ] {
            let a = ok(text);
            assert_eq!(ok(&a.to_string()), a, "{text}");
            assert_eq!(OriginAddr::parse_host_port(&a.authority()).unwrap().host, a.host);
        }
        assert_eq!(ok("[::1]:80").authority(), "[::1]:80");
        assert_eq!(ok("[::1]:80").host.bare(), "::1");
        assert_eq!(ok("https://h").to_string(), "https://h:443");
        assert_eq!(ok("http://h").to_string(), "h:80");
        assert_eq!(ok("https://h").scheme(), "https");
        assert_eq!(ok("h:1").scheme(), "http");
    }
}

//! What a route may change on the way through, and whom the gateway trusts for forwarding
//! headers: per-route header edits (`request_headers`, `response_headers`; checked in
//! `validate/edits.rs`), and `[server] trusted_proxies` (networks in CIDR notation whose
//! `X-Forwarded-*` / `Forwarded` headers are kept and extended instead of replaced).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use tlsgate_error::{Classify, Side};

/// Headers a route may not edit (and nothing else may claim): the gateway owns framing,
/// hop-by-hop and forwarding headers. Lower case.
pub const GATEWAY_MANAGED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
    "trailer",
    "x-forwarded-for",
];

/// Whether `name` (any case) is one of [`GATEWAY_MANAGED`].
pub fn is_gateway_managed(name: &str) -> bool {
    GATEWAY_MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name))
}

/// Header changes applied to requests (before forwarding) or responses (before the client).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderEdits {
    /// Headers set to these values (replacing any the message carries).
    pub set: BTreeMap<String, String>,
    /// Headers removed.
    pub remove: Vec<String>,
}

impl HeaderEdits {
    /// True when the edits change nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }
}

/// A network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`; a bare address is a /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a CIDR text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not an IP address.
    #[error("{0:?} is not an IP address")]
    Address(String),
    /// The prefix length is not a number within the address family's bits.
    #[error("prefix length {0:?} must be 0..=32 for IPv4, 0..=128 for IPv6")]
    Prefix(String),
    /// Bits set below the prefix (`10.1.0.0/8`): almost always a typo.
    #[error("{0} has bits set after the prefix; write the network address")]
    HostBits(String),
}

impl Classify for CidrError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        "cidr"
    }
}

impl TryFrom<String> for Cidr {
    type Error = CidrError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl std::str::FromStr for Cidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, p) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = a.trim().parse().map_err(|_| CidrError::Address(a.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| CidrError::Prefix(p.to_string()))?,
        };
        let c = Cidr { addr, prefix };
        if !c.contains(addr) || c.mask_bits(addr) != bits(addr) {
            return Err(CidrError::HostBits(s.to_string()));
        }
        Ok(c)
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

impl Cidr {
    fn mask_bits(&self, ip: IpAddr) -> u128 {
        let width = if ip.is_ipv4() { 32 } else { 128 };
        let shift = width - u32::from(self.prefix);
        if shift >= 128 {
            0
        } else {
            (bits(ip) >> shift) << shift
        }
    }

    /// True when `ip` lies in this network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v) => v.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4() && self.mask_bits(ip) == bits(self.addr)
    }
}

impl From<Cidr> for String {
    fn from(c: Cidr) -> Self {
        c.to_string()
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parse_and_contains() {
        let c: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(c.contains("10.2.3.4".parse().unwrap()));
        assert!(c.contains("::ffff:10.2.3.4".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(!c.contains("::1".parse().unwrap()));
        let one: Cidr = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!(!one.contains("::2".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.9".parse().unwrap()));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
    }

    #[test]
    fn cidr_refusals() {
        assert!(matches!("10.1.0.0/8".parse::<Cidr>(), Err(CidrError::HostBits(_))));
        assert!(matches!("10.0.0.0/33".parse::<Cidr>(), Err(CidrError::Prefix(_))));
        assert!(matches!("10.0.0.0/x".parse::<Cidr>(), Err(CidrError::Prefix(_))));
        assert!(matches!("example.com/8".parse::<Cidr>(), Err(CidrError::Address(_))));
        let e = "10.0.0.0/33".parse::<Cidr>().unwrap_err();
        assert_eq!((e.side(), e.kind()), (Side::Config, "cidr"));
    }
}

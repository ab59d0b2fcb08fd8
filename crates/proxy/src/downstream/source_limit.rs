//! Open connections per client source, so one source cannot fill `max_connections` for everyone:
//! a source is an IPv4 address or an IPv6 /64 (one customer's prefix; a host can use any address
//! in it). Counted at admission, released when the connection ends.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;

/// A client source: IPv4 address, or the upper 64 bits of an IPv6 address (tagged apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source(u128);

impl Source {
    /// The source of a client address (IPv4-mapped IPv6 counts as IPv4).
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => Self((u128::from(v6) >> 64 << 64) | 1 << 32),
        }
    }
}

/// Open connections per source.
#[derive(Debug, Default)]
pub struct SourceLimits {
    open: Mutex<HashMap<Source, u32>>,
}

impl SourceLimits {
    /// Counts one more connection from `source` unless it already has `limit` open.
    pub fn try_add(&self, source: Source, limit: usize) -> bool {
        let mut open = self.open.lock();
        let n = open.entry(source).or_insert(0);
        if *n as usize >= limit {
            if *n == 0 {
                open.remove(&source);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// Releases one connection of `source`.
    pub fn remove(&self, source: Source) {
        let mut open = self.open.lock();
        if let Some(n) = open.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                open.remove(&source);
            }
        }
    }

    /// Sources with connections open (for tests and metrics).
    pub fn sources(&self) -> usize {
        self.open.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_capped_and_released() {
        let l = SourceLimits::default();
        let a = Source::of("192.0.2.1".parse().unwrap());
        let b = Source::of("192.0.2.2".parse().unwrap());
        assert!(l.try_add(a, 2) && l.try_add(a, 2));
        assert!(!l.try_add(a, 2));
        assert!(l.try_add(b, 2));
        l.remove(a);
        assert!(l.try_add(a, 2));
        for _ in 0..2 {
            l.remove(a);
        }
        l.remove(b);
        assert_eq!(l.sources(), 0);
    }

    #[test]
    fn ipv6_sources_are_slash_64_and_mapped_v4_is_v4() {
        let s = |t: &str| Source::of(t.parse().unwrap());
        assert_eq!(s("2001:db8:1:2::1"), s("2001:db8:1:2:ffff::9"));
        assert_ne!(s("2001:db8:1:2::1"), s("2001:db8:1:3::1"));
        assert_eq!(s("::ffff:192.0.2.1"), s("192.0.2.1"));
        assert_ne!(s("::"), s("0.0.0.0"));
    }
}

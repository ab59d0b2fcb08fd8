//! The frame of a datagram passed between the two processes of a binary upgrade over their QUIC
//! link (a Unix datagram socket pair per QUIC socket): the process that read a datagram for a
//! connection the other one owns sends it there with the client's address.
//!
//! Layout: the address family (`4` or `6`), the client's IP address (4 or 16 bytes), its port
//! (2 bytes, big-endian), then the datagram, up to [`MAX_DATAGRAM`] bytes. The encoding is
//! canonical: a frame that decodes re-encodes to the same bytes (fuzzed:
//! `fuzz/fuzz_targets/quic_link.rs`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Largest datagram carried (a UDP payload's limit).
pub const MAX_DATAGRAM: usize = 65_527;
/// Largest frame.
pub const MAX_FRAME: usize = 1 + 16 + 2 + MAX_DATAGRAM;

/// Why a frame does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFrameError {
    /// Shorter than its address.
    Truncated,
    /// An address family other than 4 and 6.
    Family(u8),
    /// No datagram, or one longer than [`MAX_DATAGRAM`].
    Length(usize),
}

impl std::fmt::Display for LinkFrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => write!(f, "QUIC link frame shorter than its address"),
            Self::Family(b) => write!(f, "QUIC link frame with address family {b}"),
            Self::Length(n) => write!(f, "QUIC link frame carrying {n} bytes"),
        }
    }
}

impl std::error::Error for LinkFrameError {}

/// Writes the frame of `datagram` from `from` into `out` (cleared first).
pub fn encode(from: SocketAddr, datagram: &[u8], out: &mut Vec<u8>) {
    out.clear();
    match from.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&from.port().to_be_bytes());
    out.extend_from_slice(datagram);
}

/// The client's address and the datagram of a frame.
pub fn decode(frame: &[u8]) -> Result<(SocketAddr, &[u8]), LinkFrameError> {
    let (&family, rest) = frame.split_first().ok_or(LinkFrameError::Truncated)?;
    let (ip, rest) = match family {
        4 => {
            let (ip, rest) = rest.split_first_chunk::<4>().ok_or(LinkFrameError::Truncated)?;
            (IpAddr::V4(Ipv4Addr::from(*ip)), rest)
        }
        6 => {
            let (ip, rest) = rest.split_first_chunk::<16>().ok_or(LinkFrameError::Truncated)?;
            (IpAddr::V6(Ipv6Addr::from(*ip)), rest)
        }
        other => return Err(LinkFrameError::Family(other)),
    };
    let (port, datagram) = rest.split_first_chunk::<2>().ok_or(LinkFrameError::Truncated)?;
    if datagram.is_empty() || datagram.len() > MAX_DATAGRAM {
        return Err(LinkFrameError::Length(datagram.len()));
    }
    Ok((SocketAddr::new(ip, u16::from_be_bytes(*port)), datagram))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_both_families() {
        let mut out = Vec::new();
        for from in ["192.0.2.7:4433", "[2001:db8::1]:65535"] {
            let from: SocketAddr = from.parse().unwrap();
            encode(from, b"\xc0quic", &mut out);
            assert_eq!(decode(&out), Ok((from, &b"\xc0quic"[..])));
        }
        encode("10.0.0.1:1".parse().unwrap(), b"x", &mut out);
        assert_eq!(out, [4, 10, 0, 0, 1, 0, 1, b'x']);
    }

    #[test]
    fn malformed_frames_are_refused() {
        assert_eq!(decode(&[]), Err(LinkFrameError::Truncated));
        assert_eq!(decode(&[4, 1, 2, 3]), Err(LinkFrameError::Truncated));
        assert_eq!(decode(&[6; 18]), Err(LinkFrameError::Truncated));
        assert_eq!(decode(&[5, 0, 0]), Err(LinkFrameError::Family(5)));
        assert_eq!(decode(&[4, 1, 2, 3, 4, 0, 80]), Err(LinkFrameError::Length(0)));
        let mut big = vec![4, 1, 2, 3, 4, 0, 80];
        big.resize(7 + MAX_DATAGRAM + 1, 0);
        assert_eq!(decode(&big), Err(LinkFrameError::Length(MAX_DATAGRAM + 1)));
    }
}

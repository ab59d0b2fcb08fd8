//! The PROXY protocol header (HAProxy's, versions 1 and 2) that a load balancer in front of the
//! gateway writes at the start of a connection to say who the client is, parsed from a byte
//! prefix without I/O.
//!
//! [`parse`] looks at the bytes read so far and answers [`Parsed::Incomplete`] (read more and call
//! again), [`Parsed::Done`] (the header and how many bytes it took: everything after them belongs
//! to the connection's own protocol), or a [`ProxyHeaderError`] (close the connection). It never
//! asks for more than [`MAX_HEADER_LEN`] bytes and never panics on any input (there is a fuzz
//! target).
//!
//! - Version 1 (text): `PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n`, `TCP6` likewise, or
//!   `PROXY UNKNOWN ...\r\n` (the rest of the line ignored); [`V1_MAX_LEN`] bytes at most.
//! - Version 2 (binary): the 12-byte [`V2_SIGNATURE`], version/command, family/transport, a
//!   16-bit length, then the addresses (AF_INET, AF_INET6, AF_UNIX) and TLVs. The `LOCAL` command
//!   (a health check from the balancer itself) and AF_UNSPEC carry no client address. TLVs are
//!   skipped, but each must fit the header exactly.
//!
//! [`encode`] writes the header the gateway sends to origins (`send_proxy_protocol`), without
//! allocating: v1 `TCP4`/`TCP6` (or `UNKNOWN` when there are no addresses), v2 `PROXY` over
//! AF_INET/AF_INET6 with the STREAM transport (or `LOCAL`, AF_UNSPEC, for the gateway's own
//! health-check connections). Both ends must be of one family: when they are not, the IPv4 one
//! is written as an IPv4-mapped IPv6 address ([`Addresses::same_family`]), as HAProxy does.
//! `parse(encode(h))` gives `h` back with its addresses in that form (a fuzz target checks it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest version 1 header, CRLF included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;
/// The first 12 bytes of every version 2 header.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The fixed part of a version 2 header: signature, version/command, family, length.
pub const V2_FIXED_LEN: usize = 16;
/// The longest version 2 header accepted, fixed part included: addresses plus a few kilobytes of
/// TLVs (balancers send tens to a few hundred bytes). Longer is refused, so a peer can never make
/// the gateway buffer 64 KiB before the connection's own protocol starts.
pub const MAX_HEADER_LEN: usize = 4096;

const V1_PREFIX: &[u8] = b"PROXY ";
const AF_INET_LEN: usize = 12;
const AF_INET6_LEN: usize = 36;
const AF_UNIX_LEN: usize = 216;

/// Which version of the protocol a header was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The text form.
    V1,
    /// The binary form.
    V2,
}

/// What a header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The version it was written in.
    pub version: Version,
    /// The client's and the balancer's addresses as the balancer saw them; `None` for the
    /// `LOCAL` command, `UNKNOWN` (v1), AF_UNSPEC and AF_UNIX (v2): the connection's own
    /// endpoints stand.
    pub addresses: Option<Addresses>,
}

/// The two ends of the proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// The client.
    pub source: SocketAddr,
    /// The address the client connected to (the balancer's).
    pub destination: SocketAddr,
}

impl Header {
    /// The client's address, when the header names one.
    pub fn source(&self) -> Option<SocketAddr> {
        self.addresses.map(|a| a.source)
    }
}

/// The result of looking at a byte prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Everything so far may start a valid header: read more bytes and parse again.
    Incomplete,
    /// A complete header.
    Done {
        /// What it says.
        header: Header,
        /// How many bytes it took (the connection's own protocol starts after them).
        consumed: usize,
    },
}

/// Why the bytes are not a valid PROXY protocol header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyHeaderError {
    /// Neither `PROXY ` nor the version 2 signature: the peer does not speak the protocol.
    NotProxyProtocol,
    /// A version 1 line with no CRLF within 107 bytes.
    V1TooLong,
    /// A version 1 line that is not `PROXY TCP4|TCP6 SRC DST SPORT DPORT` (or `UNKNOWN`).
    V1Syntax,
    /// A version 1 protocol other than `TCP4`, `TCP6` or `UNKNOWN`.
    V1Protocol,
    /// A version 1 address that is not one of the protocol's family.
    V1Address,
    /// A version 1 port that is not a decimal number up to 65535.
    V1Port,
    /// A version 2 version nibble other than 2.
    V2Version(u8),
    /// A version 2 command other than LOCAL (0) or PROXY (1).
    V2Command(u8),
    /// A version 2 address family or transport that does not exist.
    V2Family(u8),
    /// A version 2 header longer than [`MAX_HEADER_LEN`] in all.
    V2TooLong(usize),
    /// A version 2 length shorter than its family's addresses.
    V2AddressTooShort,
    /// A version 2 TLV that runs past the end of the header.
    V2Tlv,
}

impl ProxyHeaderError {
    /// A short, stable label for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotProxyProtocol => "not_proxy_protocol",
            Self::V1TooLong => "v1_too_long",
            Self::V1Syntax => "v1_syntax",
            Self::V1Protocol => "v1_protocol",
            Self::V1Address => "v1_address",
            Self::V1Port => "v1_port",
            Self::V2Version(_) => "v2_version",
            Self::V2Command(_) => "v2_command",
            Self::V2Family(_) => "v2_family",
            Self::V2TooLong(_) => "v2_too_long",
            Self::V2AddressTooShort => "v2_address_too_short",
            Self::V2Tlv => "v2_tlv",
        }
    }
}

impl std::fmt::Display for ProxyHeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotProxyProtocol => f.write_str("the connection does not start with a PROXY protocol header"),
            Self::V1TooLong => write!(f, "PROXY v1 line without CRLF within {V1_MAX_LEN} bytes"),
            Self::V1Syntax => f.write_str("malformed PROXY v1 line"),
            Self::V1Protocol => f.write_str("PROXY v1 protocol is not TCP4, TCP6 or UNKNOWN"),
            Self::V1Address => f.write_str("PROXY v1 address is not of the protocol's family"),
            Self::V1Port => f.write_str("PROXY v1 port is not a number up to 65535"),
            Self::V2Version(v) => write!(f, "PROXY v2 header has version {v}"),
            Self::V2Command(c) => write!(f, "PROXY v2 header has unknown command {c}"),
            Self::V2Family(b) => write!(f, "PROXY v2 header has unknown family/transport 0x{b:02x}"),
            Self::V2TooLong(n) => write!(f, "PROXY v2 header of {n} bytes (at most {MAX_HEADER_LEN})"),
            Self::V2AddressTooShort => f.write_str("PROXY v2 length is shorter than its addresses"),
            Self::V2Tlv => f.write_str("PROXY v2 TLV runs past the end of the header"),
        }
    }
}

impl std::error::Error for ProxyHeaderError {}

/// Parses the PROXY protocol header at the start of `data` (the bytes read so far).
pub fn parse(data: &[u8]) -> Result<Parsed, ProxyHeaderError> {
    if starts_like(data, &V2_SIGNATURE) {
        if data.len() < V2_SIGNATURE.len() {
            return Ok(Parsed::Incomplete);
        }
        return parse_v2(data);
    }
    if starts_like(data, V1_PREFIX) {
        if data.len() < V1_PREFIX.len() {
            return Ok(Parsed::Incomplete);
        }
        return parse_v1(data);
    }
    Err(ProxyHeaderError::NotProxyProtocol)
}

/// True when `data` and `prefix` agree on their common length (an empty `data` agrees).
fn starts_like(data: &[u8], prefix: &[u8]) -> bool {
    let n = data.len().min(prefix.len());
    data[..n] == prefix[..n]
}

fn parse_v1(data: &[u8]) -> Result<Parsed, ProxyHeaderError> {
    let window = &data[..data.len().min(V1_MAX_LEN)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if data.len() >= V1_MAX_LEN {
            Err(ProxyHeaderError::V1TooLong)
        } else {
            Ok(Parsed::Incomplete)
        };
    };
    let line = match lf.checked_sub(1).map(|cr| (cr, window[cr])) {
        Some((cr, b'\r')) => &window[V1_PREFIX.len()..cr],
        _ => return Err(ProxyHeaderError::V1Syntax),
    };
    let consumed = lf + 1;
    let v1 = |addresses| {
        Ok(Parsed::Done {
            header: Header {
                version: Version::V1,
                addresses,
            },
            consumed,
        })
    };
    // UNKNOWN: whatever follows up to the CRLF is ignored (the specification's rule).
    if line == b"UNKNOWN" || line.starts_with(b"UNKNOWN ") {
        return v1(None);
    }
    let text = std::str::from_utf8(line).map_err(|_| ProxyHeaderError::V1Syntax)?;
    let mut fields = text.split(' ');
    let v6 = match fields.next() {
        Some("TCP4") => false,
        Some("TCP6") => true,
        _ => return Err(ProxyHeaderError::V1Protocol),
    };
    let (Some(src), Some(dst), Some(sport), Some(dport), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(ProxyHeaderError::V1Syntax);
    };
    let ip = |s: &str| -> Result<IpAddr, ProxyHeaderError> {
        let ip = if v6 {
            s.parse::<Ipv6Addr>().map(IpAddr::V6)
        } else {
            s.parse::<Ipv4Addr>().map(IpAddr::V4)
        };
        ip.map_err(|_| ProxyHeaderError::V1Address)
    };
    let source = SocketAddr::new(ip(src)?, port(sport)?);
    let destination = SocketAddr::new(ip(dst)?, port(dport)?);
    v1(Some(Addresses { source, destination }))
}

/// A v1 port: 1 to 5 decimal digits, at most 65535.
fn port(s: &str) -> Result<u16, ProxyHeaderError> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProxyHeaderError::V1Port);
    }
    s.parse().map_err(|_| ProxyHeaderError::V1Port)
}

fn parse_v2(data: &[u8]) -> Result<Parsed, ProxyHeaderError> {
    let Some(fixed) = data.get(..V2_FIXED_LEN) else {
        // The version/command byte can be judged before the rest arrives.
        if let Some(&ver_cmd) = data.get(12) {
            check_ver_cmd(ver_cmd)?;
        }
        return Ok(Parsed::Incomplete);
    };
    let local = check_ver_cmd(fixed[12])?;
    let fam = fixed[13];
    let len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    let total = V2_FIXED_LEN + len;
    if total > MAX_HEADER_LEN {
        return Err(ProxyHeaderError::V2TooLong(total));
    }
    let addr_len = if local { None } else { family_len(fam)? };
    let Some(body) = data.get(V2_FIXED_LEN..total) else {
        return Ok(Parsed::Incomplete);
    };
    let addresses = match addr_len {
        None => None,
        Some(n) => {
            let (addrs, tlvs) = body.split_at_checked(n).ok_or(ProxyHeaderError::V2AddressTooShort)?;
            check_tlvs(tlvs)?;
            inet_addresses(fam, addrs)
        }
    };
    Ok(Parsed::Done {
        header: Header {
            version: Version::V2,
            addresses,
        },
        consumed: total,
    })
}

/// Checks the version/command byte; true for LOCAL, false for PROXY.
fn check_ver_cmd(b: u8) -> Result<bool, ProxyHeaderError> {
    if b >> 4 != 2 {
        return Err(ProxyHeaderError::V2Version(b >> 4));
    }
    match b & 0x0f {
        0 => Ok(true),
        1 => Ok(false),
        c => Err(ProxyHeaderError::V2Command(c)),
    }
}

/// The address block's length for a PROXY command's family/transport byte; `None` for
/// AF_UNSPEC, whose block (if any) is skipped unread.
fn family_len(fam: u8) -> Result<Option<usize>, ProxyHeaderError> {
    if fam & 0x0f > 2 {
        return Err(ProxyHeaderError::V2Family(fam));
    }
    match fam >> 4 {
        0 => Ok(None),
        1 => Ok(Some(AF_INET_LEN)),
        2 => Ok(Some(AF_INET6_LEN)),
        3 => Ok(Some(AF_UNIX_LEN)),
        _ => Err(ProxyHeaderError::V2Family(fam)),
    }
}

/// The source and destination of an AF_INET or AF_INET6 block (`None` for AF_UNIX).
fn inet_addresses(fam: u8, a: &[u8]) -> Option<Addresses> {
    let be16 = |i: usize| u16::from_be_bytes([a[i], a[i + 1]]);
    let (src, dst, ports): (IpAddr, IpAddr, usize) = match fam >> 4 {
        1 => {
            let v4 = |i: usize| Ipv4Addr::new(a[i], a[i + 1], a[i + 2], a[i + 3]);
            (v4(0).into(), v4(4).into(), 8)
        }
        2 => {
            let v6 = |i: usize| {
                let mut o = [0u8; 16];
                o.copy_from_slice(&a[i..i + 16]);
                Ipv6Addr::from(o)
            };
            (v6(0).into(), v6(16).into(), 32)
        }
        _ => return None,
    };
    Some(Addresses {
        source: SocketAddr::new(src, be16(ports)),
        destination: SocketAddr::new(dst, be16(ports + 2)),
    })
}

/// Walks the TLVs (type: 1 byte, length: 2 bytes, value): each must end within `tlvs`.
fn check_tlvs(mut tlvs: &[u8]) -> Result<(), ProxyHeaderError> {
    while !tlvs.is_empty() {
        let [_, hi, lo, ..] = *tlvs else {
            return Err(ProxyHeaderError::V2Tlv);
        };
        let end = 3 + usize::from(u16::from_be_bytes([hi, lo]));
        tlvs = tlvs.get(end..).ok_or(ProxyHeaderError::V2Tlv)?;
    }
    Ok(())
}

/// The longest header [`encode`] writes: a v1 `TCP6` line with the longest addresses and ports.
pub const ENCODED_MAX_LEN: usize = V1_MAX_LEN;

/// A header as [`encode`] wrote it: a few bytes on the stack.
#[derive(Clone, Copy)]
pub struct Encoded {
    buf: [u8; ENCODED_MAX_LEN],
    len: usize,
}

impl Encoded {
    /// The header's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn push(&mut self, bytes: &[u8]) {
        // Every header fits (the longest is exactly ENCODED_MAX_LEN); never panics regardless.
        let end = (self.len + bytes.len()).min(ENCODED_MAX_LEN);
        self.buf[self.len..end].copy_from_slice(&bytes[..end - self.len]);
        self.len = end;
    }
}

impl std::fmt::Debug for Encoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Encoded({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl std::fmt::Write for Encoded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

impl Addresses {
    /// Both ends in one family: unchanged when they already are, otherwise the IPv4 end as an
    /// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), which is what [`encode`] writes.
    pub fn same_family(self) -> Self {
        let v6 = |a: SocketAddr| match a.ip() {
            IpAddr::V4(ip) => SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), a.port()),
            IpAddr::V6(_) => a,
        };
        if self.source.is_ipv4() == self.destination.is_ipv4() {
            self
        } else {
            Self {
                source: v6(self.source),
                destination: v6(self.destination),
            }
        }
    }
}

/// Writes `header`: version 1 as `PROXY TCP4|TCP6 ...` (`PROXY UNKNOWN` without addresses),
/// version 2 as a `PROXY` command over TCP (a `LOCAL` command, AF_UNSPEC, without addresses).
pub fn encode(header: &Header) -> Encoded {
    let mut out = Encoded {
        buf: [0; ENCODED_MAX_LEN],
        len: 0,
    };
    let addresses = header.addresses.map(Addresses::same_family);
    match header.version {
        Version::V1 => {
            use std::fmt::Write;
            let _ = match addresses {
                None => out.write_str("PROXY UNKNOWN\r\n"),
                Some(a) => write!(
                    out,
                    "PROXY {} {} {} {} {}\r\n",
                    if a.source.is_ipv4() { "TCP4" } else { "TCP6" },
                    a.source.ip(),
                    a.destination.ip(),
                    a.source.port(),
                    a.destination.port()
                ),
            };
        }
        Version::V2 => {
            out.push(&V2_SIGNATURE);
            match addresses {
                None => out.push(&[0x20, 0x00, 0, 0]),
                Some(a) => {
                    let (fam, len) = if a.source.is_ipv4() {
                        (0x11, AF_INET_LEN)
                    } else {
                        (0x21, AF_INET6_LEN)
                    };
                    out.push(&[0x21, fam]);
                    out.push(&(len as u16).to_be_bytes());
                    for ip in [a.source.ip(), a.destination.ip()] {
                        match ip {
                            IpAddr::V4(ip) => out.push(&ip.octets()),
                            IpAddr::V6(ip) => out.push(&ip.octets()),
                        }
                    }
                    out.push(&a.source.port().to_be_bytes());
                    out.push(&a.destination.port().to_be_bytes());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(data: &[u8]) -> (Header, usize) {
        match parse(data) {
            Ok(Parsed::Done { header, consumed }) => (header, consumed),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
        }
    }

    fn err(data: &[u8]) -> ProxyHeaderError {
        match parse(data) {
            Err(e) => e,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// A v2 header: version/command byte, family byte, then the body (length filled in).
    fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend_from_slice(&[ver_cmd, fam]);
        h.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    fn inet4_body() -> Vec<u8> {
        let mut b = vec![192, 0, 2, 7, 198, 51, 100, 1];
        b.extend_from_slice(&56324u16.to_be_bytes());
        b.extend_from_slice(&443u16.to_be_bytes());
        b
    }

    #[test]
    fn v1_tcp4_and_tcp6_name_both_ends_and_leave_what_follows() {
        let text = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n\x16\x03\x01";
        let (h, n) = done(text);
        assert_eq!(n, text.len() - 3, "the TLS bytes after the header are not taken");
        assert_eq!(h.version, Version::V1);
        assert_eq!(h.source(), Some(addr("192.0.2.7:56324")));
        assert_eq!(h.addresses.unwrap().destination, addr("198.51.100.1:443"));
        let (h, _) = done(b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 0\r\n");
        assert_eq!(h.source(), Some(addr("[2001:db8::7]:65535")));
        assert_eq!(h.addresses.unwrap().destination, addr("[2001:db8::1]:0"));
    }

    #[test]
    fn v1_unknown_keeps_the_socket_address() {
        for text in [&b"PROXY UNKNOWN\r\n"[..], b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"] {
            let (h, n) = done(text);
            assert_eq!((h.addresses, n), (None, text.len()));
        }
    }

    #[test]
    fn v1_prefixes_are_incomplete_and_every_cut_of_a_header_too() {
        let text = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n";
        for cut in 0..text.len() {
            assert_eq!(parse(&text[..cut]), Ok(Parsed::Incomplete), "cut at {cut}");
        }
    }

    #[test]
    fn v1_longest_header_is_accepted_and_longer_refused() {
        let max = b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(max.len(), V1_MAX_LEN);
        assert_eq!(done(max).1, V1_MAX_LEN);
        let tcp6 = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(done(tcp6).1, V1_MAX_LEN - 3);
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(V1_MAX_LEN, b'x');
        assert_eq!(err(&long), ProxyHeaderError::V1TooLong);
        long.truncate(V1_MAX_LEN - 1);
        assert_eq!(parse(&long), Ok(Parsed::Incomplete));
    }

    #[test]
    fn v1_malformed_lines_are_refused_by_kind() {
        use ProxyHeaderError::*;
        for (text, want) in [
            (&b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\n"[..], V1Syntax),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n", V1Syntax),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 9\r\n", V1Syntax),
            (b"PROXY TCP4  192.0.2.7 198.51.100.1 56324 443\r\n", V1Syntax),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 \r\n", V1Syntax),
            (b"PROXY UDP4 192.0.2.7 198.51.100.1 56324 443\r\n", V1Protocol),
            (b"PROXY tcp4 192.0.2.7 198.51.100.1 56324 443\r\n", V1Protocol),
            (b"PROXY \r\n", V1Protocol),
            (b"PROXY TCP4 2001:db8::7 198.51.100.1 1 2\r\n", V1Address),
            (b"PROXY TCP6 192.0.2.7 2001:db8::1 1 2\r\n", V1Address),
            (b"PROXY TCP4 192.0.2.300 198.51.100.1 1 2\r\n", V1Address),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n", V1Port),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 +1 443\r\n", V1Port),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 000001 443\r\n", V1Port),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 1 \r\n", V1Port),
            (b"PROXY TCP4 \xff.0.2.7 198.51.100.1 1 2\r\n", V1Syntax),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 1 2\r\r\n", V1Port),
        ] {
            assert_eq!(err(text), want, "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn other_protocols_are_refused_at_the_first_wrong_byte() {
        assert_eq!(
            err(b"\x16\x03\x01\x02\x00"),
            ProxyHeaderError::NotProxyProtocol,
            "a TLS ClientHello"
        );
        assert_eq!(err(b"GET / HTTP/1.1\r\n"), ProxyHeaderError::NotProxyProtocol);
        assert_eq!(err(b"Q"), ProxyHeaderError::NotProxyProtocol);
        assert_eq!(parse(b"P"), Ok(Parsed::Incomplete));
        assert_eq!(err(b"PROXX"), ProxyHeaderError::NotProxyProtocol);
        assert_eq!(err(b"\r\n\r\n\0\r\nQUIX"), ProxyHeaderError::NotProxyProtocol);
        assert_eq!(parse(b""), Ok(Parsed::Incomplete));
    }

    #[test]
    fn v2_inet_names_both_ends_and_skips_its_tlvs() {
        let mut body = inet4_body();
        body.extend_from_slice(&[0x04, 0, 0]); // PP2_TYPE_NOOP, empty
        body.extend_from_slice(&[0x05, 0, 3, 1, 2, 3]); // PP2_TYPE_UNIQUE_ID
        let mut data = v2(0x21, 0x11, &body);
        let len = data.len();
        data.extend_from_slice(b"\x16\x03\x01");
        let (h, n) = done(&data);
        assert_eq!(n, len);
        assert_eq!(h.version, Version::V2);
        assert_eq!(h.source(), Some(addr("192.0.2.7:56324")));
        assert_eq!(h.addresses.unwrap().destination, addr("198.51.100.1:443"));
        for cut in 0..len {
            assert_eq!(parse(&data[..cut]), Ok(Parsed::Incomplete), "cut at {cut}");
        }
    }

    #[test]
    fn v2_inet6_and_udp_transport() {
        let src: Ipv6Addr = "2001:db8::7".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let mut body = src.octets().to_vec();
        body.extend_from_slice(&dst.octets());
        body.extend_from_slice(&[0xdc, 0x04, 0x01, 0xbb]);
        for fam in [0x21, 0x22, 0x20] {
            let (h, _) = done(&v2(0x21, fam, &body));
            assert_eq!(h.source(), Some(addr("[2001:db8::7]:56324")));
            assert_eq!(h.addresses.unwrap().destination, addr("[2001:db8::1]:443"));
        }
    }

    #[test]
    fn v2_local_unspec_and_unix_carry_no_client_address() {
        // LOCAL: the block is discarded, whatever the family says.
        let (h, n) = done(&v2(0x20, 0x00, &[]));
        assert_eq!((h.addresses, n), (None, 16));
        assert_eq!(done(&v2(0x20, 0x11, &inet4_body())).0.addresses, None);
        assert_eq!(done(&v2(0x20, 0xff, &[1, 2, 3])).0.addresses, None);
        // PROXY with AF_UNSPEC: no address, the block is skipped unread.
        assert_eq!(done(&v2(0x21, 0x00, &[9; 20])).0.addresses, None);
        // AF_UNIX: 216 bytes of paths, no IP address.
        assert_eq!(done(&v2(0x21, 0x31, &[0; 216])).0.addresses, None);
    }

    #[test]
    fn v2_malformed_headers_are_refused_by_kind() {
        use ProxyHeaderError::*;
        assert_eq!(err(&v2(0x11, 0x11, &inet4_body())), V2Version(1));
        assert_eq!(err(&v2(0x31, 0x11, &inet4_body())), V2Version(3));
        assert_eq!(err(&v2(0x22, 0x11, &inet4_body())), V2Command(2));
        assert_eq!(err(&v2(0x21, 0x41, &inet4_body())), V2Family(0x41));
        assert_eq!(err(&v2(0x21, 0x13, &inet4_body())), V2Family(0x13));
        assert_eq!(err(&v2(0x21, 0x11, &inet4_body()[..11])), V2AddressTooShort);
        assert_eq!(err(&v2(0x21, 0x21, &inet4_body())), V2AddressTooShort);
        assert_eq!(err(&v2(0x21, 0x31, &[0; 100])), V2AddressTooShort);
        let mut body = inet4_body();
        body.extend_from_slice(&[0x05, 0, 4, 1, 2, 3]);
        assert_eq!(err(&v2(0x21, 0x11, &body)), V2Tlv, "TLV longer than the header");
        let mut body = inet4_body();
        body.extend_from_slice(&[0x05, 0]);
        assert_eq!(err(&v2(0x21, 0x11, &body)), V2Tlv, "truncated TLV header");
    }

    #[test]
    fn v2_errors_come_as_soon_as_the_bytes_show_them() {
        let bad_version = v2(0x11, 0x11, &inet4_body());
        assert_eq!(err(&bad_version[..13]), ProxyHeaderError::V2Version(1));
        // The length alone says too long: refused before the body is read.
        let mut head = V2_SIGNATURE.to_vec();
        head.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(err(&head), ProxyHeaderError::V2TooLong(16 + 65_535));
        let family = v2(0x21, 0x51, &inet4_body());
        assert_eq!(err(&family[..16]), ProxyHeaderError::V2Family(0x51));
    }

    #[test]
    fn v2_length_bound_is_inclusive() {
        let mut body = inet4_body();
        let tlv = MAX_HEADER_LEN - 16 - body.len() - 3;
        body.extend_from_slice(&[0xe0]);
        body.extend_from_slice(&u16::try_from(tlv).unwrap().to_be_bytes());
        body.resize(body.len() + tlv, 0);
        let data = v2(0x21, 0x11, &body);
        assert_eq!(data.len(), MAX_HEADER_LEN);
        assert_eq!(done(&data).1, MAX_HEADER_LEN);
        body.push(0);
        assert_eq!(
            err(&v2(0x21, 0x11, &body)),
            ProxyHeaderError::V2TooLong(MAX_HEADER_LEN + 1)
        );
    }

    #[test]
    fn error_kinds_are_distinct() {
        use ProxyHeaderError::*;
        let all = [
            NotProxyProtocol,
            V1TooLong,
            V1Syntax,
            V1Protocol,
            V1Address,
            V1Port,
            V2Version(0),
            V2Command(0),
            V2Family(0),
            V2TooLong(0),
            V2AddressTooShort,
            V2Tlv,
        ];
        let kinds: std::collections::HashSet<_> = all.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds.len(), all.len());
        assert!(all.iter().all(|e| !e.to_string().is_empty()));
    }
    #[test]
    fn encoded_headers_parse_back_to_themselves() {
        let pairs = [
            ("192.0.2.7:56324", "198.51.100.1:443"),
            ("[2001:db8::7]:65535", "[2001:db8::1]:0"),
            ("255.255.255.255:65535", "255.255.255.255:65535"),
            (
                "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
                "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
            ),
        ];
        for version in [Version::V1, Version::V2] {
            for (src, dst) in pairs {
                let header = Header {
                    version,
                    addresses: Some(Addresses {
                        source: addr(src),
                        destination: addr(dst),
                    }),
                };
                let bytes = encode(&header);
                let (back, n) = done(bytes.as_bytes());
                assert_eq!((back, n), (header, bytes.as_bytes().len()), "{bytes:?}");
            }
            let local = Header {
                version,
                addresses: None,
            };
            assert_eq!(done(encode(&local).as_bytes()).0, local);
        }
    }

    #[test]
    fn encoded_headers_have_the_specified_bytes() {
        let a = Addresses {
            source: addr("192.0.2.7:56324"),
            destination: addr("198.51.100.1:443"),
        };
        let v1 = encode(&Header {
            version: Version::V1,
            addresses: Some(a),
        });
        assert_eq!(v1.as_bytes(), b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n");
        let bin = encode(&Header {
            version: Version::V2,
            addresses: Some(a),
        });
        assert_eq!(bin.as_bytes(), &v2(0x21, 0x11, &inet4_body())[..]);
        let local = encode(&Header {
            version: Version::V2,
            addresses: None,
        });
        assert_eq!(local.as_bytes(), &v2(0x20, 0x00, &[])[..]);
        let unknown = encode(&Header {
            version: Version::V1,
            addresses: None,
        });
        assert_eq!(unknown.as_bytes(), b"PROXY UNKNOWN\r\n");
        // The longest v1 line fills the buffer exactly.
        let max = addr("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
        let long = encode(&Header {
            version: Version::V1,
            addresses: Some(Addresses {
                source: max,
                destination: max,
            }),
        });
        assert_eq!(long.as_bytes().len(), ENCODED_MAX_LEN - 3);
    }

    #[test]
    fn mixed_families_are_written_as_ipv6() {
        let mixed = Addresses {
            source: addr("192.0.2.7:1"),
            destination: addr("[2001:db8::1]:2"),
        };
        let same = mixed.same_family();
        assert_eq!(same.source, addr("[::ffff:192.0.2.7]:1"));
        assert_eq!(same.destination, mixed.destination);
        assert_eq!(same.same_family(), same);
        for version in [Version::V1, Version::V2] {
            let header = Header {
                version,
                addresses: Some(mixed),
            };
            assert_eq!(done(encode(&header).as_bytes()).0.addresses, Some(same));
        }
    }
}

//! JA4 TLS client fingerprints (FoxIO's JA4, `t13d1516h2_8daaf6152771_02713d6af862`), computed
//! from the raw ClientHello body that BoringSSL hands the certificate-selection hook, without I/O
//! and without cryptography: the caller supplies SHA-256 ([`Ja4Input::fingerprint`] takes it as
//! a function), so this crate stays dependency-free and quick to fuzz.
//!
//! Specification: <https://github.com/FoxIO-LLC/ja4/blob/main/technical_details/JA4.md>
//!
//! ```text
//! JA4 = a "_" b "_" c
//! a = "t" version(2) sni("d"|"i") ciphers(2) extensions(2) alpn(2)       e.g. t13d1516h2
//! b = sha256("002f,0035,...")[..12]   cipher suites, GREASE out, sorted
//! c = sha256("0005,000a,..._0403,0804,...")[..12]
//!     extensions, GREASE, SNI (0000) and ALPN (0010) out, sorted; then "_" and the signature
//!     algorithms in wire order (no "_" when there are none)
//! ```
//!
//! Where FoxIO's own implementations and the specification disagree, this follows the
//! specification: a first ALPN value whose first or last byte is not ASCII alphanumeric is
//! written as the first and last characters of its hex form (`0xba 0xad` → `bd`; FoxIO's Python
//! and Rust tools write `99`), and a one-byte ALPN value repeats its character (`a` → `aa`).
//!
//! Every function takes untrusted bytes and must never panic (fuzz target `ja4`).

use crate::reader::Reader;

/// `server_name`.
const EXT_SNI: u16 = 0x0000;
/// `application_layer_protocol_negotiation`.
const EXT_ALPN: u16 = 0x0010;
/// `signature_algorithms`.
const EXT_SIGALGS: u16 = 0x000d;
/// `supported_versions`.
const EXT_VERSIONS: u16 = 0x002b;
/// Counts above this are written as 99.
const MAX_COUNT: usize = 99;
/// Length of a JA4 fingerprint: 10 + 1 + 12 + 1 + 12.
pub const JA4_LEN: usize = 36;
/// Section b or c when its list is empty.
const EMPTY_HASH: &str = "000000000000";

/// Why a ClientHello body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ja4Error {
    /// The body ends inside a field (version, random, session ID, suites, compression methods).
    Truncated,
    /// The extensions block or one extension runs past its length.
    BadExtensions,
    /// Bytes after the extensions block.
    TrailingBytes,
}

impl Ja4Error {
    /// A short, stable label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::BadExtensions => "bad_extensions",
            Self::TrailingBytes => "trailing_bytes",
        }
    }
}

impl std::fmt::Display for Ja4Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Truncated => "ClientHello ends inside a field",
            Self::BadExtensions => "ClientHello extensions run past their length",
            Self::TrailingBytes => "bytes after the ClientHello's extensions",
        })
    }
}

impl std::error::Error for Ja4Error {}

/// GREASE values (RFC 8701): `0x?a?a` with both bytes equal.
pub fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// What JA4 reads of a ClientHello, GREASE values already removed, lists in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ja4Input {
    /// The version: the highest of `supported_versions`, else the legacy version field.
    pub version: u16,
    /// An SNI extension is present.
    pub sni: bool,
    /// Cipher suites.
    pub ciphers: Vec<u16>,
    /// Extension types (SNI and ALPN included).
    pub extensions: Vec<u16>,
    /// The two ALPN characters of section a (`00` without ALPN).
    pub alpn: [u8; 2],
    /// Signature algorithms.
    pub signature_algorithms: Vec<u16>,
}

fn u16s(raw: &[u8]) -> impl Iterator<Item = u16> + '_ {
    raw.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]))
}

/// Reads a ClientHello body (the handshake message without its 4-byte header, as BoringSSL's
/// `SSL_CLIENT_HELLO::client_hello` holds it).
pub fn parse(hello: &[u8]) -> Result<Ja4Input, Ja4Error> {
    let mut r = Reader(hello);
    let legacy_version = r.u16().ok_or(Ja4Error::Truncated)?;
    r.take(32).ok_or(Ja4Error::Truncated)?;
    r.vec8().ok_or(Ja4Error::Truncated)?;
    let suites = r.vec16().ok_or(Ja4Error::Truncated)?;
    r.vec8().ok_or(Ja4Error::Truncated)?;
    let mut input = Ja4Input {
        version: legacy_version,
        sni: false,
        ciphers: u16s(suites).filter(|c| !is_grease(*c)).collect(),
        extensions: Vec::new(),
        alpn: *b"00",
        signature_algorithms: Vec::new(),
    };
    if r.0.is_empty() {
        return Ok(input);
    }
    let mut exts = Reader(r.vec16().ok_or(Ja4Error::BadExtensions)?);
    if !r.0.is_empty() {
        return Err(Ja4Error::TrailingBytes);
    }
    while !exts.0.is_empty() {
        let kind = exts.u16().ok_or(Ja4Error::BadExtensions)?;
        let body = exts.vec16().ok_or(Ja4Error::BadExtensions)?;
        if is_grease(kind) {
            continue;
        }
        input.extensions.push(kind);
        match kind {
            EXT_SNI => input.sni = true,
            EXT_ALPN => input.alpn = alpn_chars(first_alpn(body)),
            EXT_SIGALGS => {
                let list = Reader(body).vec16().unwrap_or_default();
                input.signature_algorithms = u16s(list).filter(|a| !is_grease(*a)).collect();
            }
            EXT_VERSIONS => {
                let list = Reader(body).vec8().unwrap_or_default();
                if let Some(v) = u16s(list).filter(|v| !is_grease(*v)).max() {
                    input.version = v;
                }
            }
            _ => {}
        }
    }
    Ok(input)
}

/// The first protocol of an ALPN extension body (empty when there is none or it is malformed).
fn first_alpn(body: &[u8]) -> &[u8] {
    Reader(body)
        .vec16()
        .and_then(|list| Reader(list).vec8())
        .unwrap_or_default()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Section a's ALPN characters: the first and last bytes when both are ASCII alphanumeric, else
/// the first and last characters of the value's hex form; `00` for an empty value.
fn alpn_chars(value: &[u8]) -> [u8; 2] {
    match (value.first(), value.last()) {
        (Some(&first), Some(&last)) if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() => [first, last],
        (Some(&first), Some(&last)) => [HEX[usize::from(first >> 4)], HEX[usize::from(last & 0xf)]],
        _ => *b"00",
    }
}

/// The two characters of a version (`13`, `12`, ..., `00` when unknown).
fn version_chars(v: u16) -> [u8; 2] {
    match v {
        0x0304 => *b"13",
        0x0303 => *b"12",
        0x0302 => *b"11",
        0x0301 => *b"10",
        0x0300 => *b"s3",
        0x0002 => *b"s2",
        0xfeff => *b"d1",
        0xfefd => *b"d2",
        0xfefc => *b"d3",
        _ => *b"00",
    }
}

fn two_digits(n: usize) -> [u8; 2] {
    let n = n.min(MAX_COUNT);
    // n ≤ 99, so both digits are one decimal place.
    [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]
}

fn join_hex(out: &mut String, values: impl Iterator<Item = u16>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        for shift in [12, 8, 4, 0] {
            out.push(char::from(HEX[usize::from((v >> shift) & 0xf)]));
        }
    }
}

impl Ja4Input {
    /// Section a, e.g. `t13d1516h2` (TLS over TCP: the gateway sees no QUIC or DTLS).
    pub fn section_a(&self) -> [u8; 10] {
        let v = version_chars(self.version);
        let c = two_digits(self.ciphers.len());
        let e = two_digits(self.extensions.len());
        let sni = if self.sni { b'd' } else { b'i' };
        [
            b't',
            v[0],
            v[1],
            sni,
            c[0],
            c[1],
            e[0],
            e[1],
            self.alpn[0],
            self.alpn[1],
        ]
    }

    /// What section b hashes: the cipher suites sorted, comma-separated (empty when none).
    pub fn cipher_text(&self) -> String {
        let mut sorted = self.ciphers.clone();
        sorted.sort_unstable();
        let mut out = String::with_capacity(sorted.len() * 5);
        join_hex(&mut out, sorted.into_iter());
        out
    }

    /// The extensions section c hashes: sorted, without SNI and ALPN.
    fn hashed_extensions(&self) -> Vec<u16> {
        let mut sorted: Vec<u16> = self
            .extensions
            .iter()
            .copied()
            .filter(|e| *e != EXT_SNI && *e != EXT_ALPN)
            .collect();
        sorted.sort_unstable();
        sorted
    }

    /// What section c hashes: the extensions sorted (SNI and ALPN out), then `_` and the
    /// signature algorithms in wire order when there are any; empty when no extension is left.
    pub fn extension_text(&self) -> String {
        let sorted = self.hashed_extensions();
        if sorted.is_empty() {
            return String::new();
        }
        let mut out = String::with_capacity((sorted.len() + self.signature_algorithms.len()) * 5 + 1);
        join_hex(&mut out, sorted.into_iter());
        if !self.signature_algorithms.is_empty() {
            out.push('_');
            join_hex(&mut out, self.signature_algorithms.iter().copied());
        }
        out
    }

    /// The raw fingerprint (FoxIO's `JA4_r`): section a, then the texts sections b and c hash.
    pub fn raw(&self) -> String {
        let a = self.section_a();
        let mut out = String::from_utf8_lossy(&a).into_owned();
        out.push('_');
        out.push_str(&self.cipher_text());
        out.push('_');
        // JA4_r writes the extension list even when empty (then `a_b_` and the algorithms).
        let sorted = self.hashed_extensions();
        join_hex(&mut out, sorted.into_iter());
        if !self.signature_algorithms.is_empty() {
            out.push('_');
            join_hex(&mut out, self.signature_algorithms.iter().copied());
        }
        out
    }

    /// The fingerprint, with `sha256` computing the digests of sections b and c.
    pub fn fingerprint(&self, sha256: impl Fn(&[u8]) -> [u8; 32]) -> Ja4 {
        let mut out = [b'0'; JA4_LEN];
        out[..10].copy_from_slice(&self.section_a());
        out[10] = b'_';
        out[23] = b'_';
        for (text, at) in [(self.cipher_text(), 11), (self.extension_text(), 24)] {
            if text.is_empty() {
                out[at..at + 12].copy_from_slice(EMPTY_HASH.as_bytes());
                continue;
            }
            let digest = sha256(text.as_bytes());
            for (i, byte) in digest[..6].iter().enumerate() {
                out[at + 2 * i] = HEX[usize::from(byte >> 4)];
                out[at + 2 * i + 1] = HEX[usize::from(byte & 0xf)];
            }
        }
        Ja4(out)
    }
}

/// A JA4 fingerprint: 36 ASCII characters, no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ja4([u8; JA4_LEN]);

impl Ja4 {
    /// The fingerprint as text.
    pub fn as_str(&self) -> &str {
        // Built only from ASCII (section a's characters, hex digits, '_'), or checked by `parse`.
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// Reads a fingerprint written in configuration (lower case, as JA4 is written):
    /// `[tqd]` + version + `[di]` + 2 digits + 2 digits + 2 alphanumerics, `_`, 12 hex, `_`, 12 hex.
    pub fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() != JA4_LEN || b[10] != b'_' || b[23] != b'_' {
            return None;
        }
        let hex = |s: &[u8]| s.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
        let lower_alnum = |c: &u8| c.is_ascii_digit() || c.is_ascii_lowercase();
        let a_ok = b"tqd".contains(&b[0])
            && b[1..3].iter().all(lower_alnum)
            && b"di".contains(&b[3])
            && b[4..8].iter().all(u8::is_ascii_digit)
            && b[8..10].iter().all(|c| c.is_ascii_alphanumeric());
        if !a_ok || !hex(&b[11..23]) || !hex(&b[24..36]) {
            return None;
        }
        let mut out = [0; JA4_LEN];
        out.copy_from_slice(b);
        Some(Self(out))
    }
}

impl std::fmt::Display for Ja4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for Ja4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ja4({})", self.as_str())
    }
}

#[cfg(test)]
#[path = "ja4_tests.rs"]
mod tests;

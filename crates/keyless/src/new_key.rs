//! The payload of a new-key request (opcode `0x04`, docs/KEYLESS-PROTOCOL.md): which key type to
//! create and the DNS names of the CSR the key server answers with. No I/O, fuzzed with the
//! codec (`fuzz/fuzz_targets/keyless_codec.rs` decodes it too).
//!
//! ```text
//! u8 key type (1 = ECDSA P-256, 2 = RSA-2048) | u8 count (1..=100) | count × (u8 length | name)
//! ```
//!
//! Names are DNS names in lower case (letters, digits, `-`, dots between labels of 1 to 63
//! characters, at most 253 in all), optionally with a leading `*.`; nothing else is accepted,
//! so the CSR a key server signs says what a certificate request says and nothing more.

use std::fmt;

/// Most names one request may carry.
pub const MAX_NAMES: usize = 100;

/// The key type to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewKeyKind {
    /// ECDSA P-256.
    EcdsaP256,
    /// RSA-2048.
    Rsa2048,
}

/// A parsed new-key request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    /// Key type.
    pub kind: NewKeyKind,
    /// The CSR's DNS names (the first is its subject CN).
    pub names: Vec<String>,
}

/// Why a new-key payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewKeyError {
    /// The payload ends early or has bytes after the last name.
    Length,
    /// An unknown key type.
    KeyType(u8),
    /// No names, or more than [`MAX_NAMES`].
    Count,
    /// A name that is not a lower-case DNS name.
    Name,
}

impl NewKeyError {
    /// Metric label.
    pub fn reason(self) -> &'static str {
        match self {
            NewKeyError::Length => "new_key_length",
            NewKeyError::KeyType(_) => "new_key_type",
            NewKeyError::Count => "new_key_name_count",
            NewKeyError::Name => "new_key_name",
        }
    }
}

impl fmt::Display for NewKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NewKeyError::Length => f.write_str("new-key payload truncated or followed by extra bytes"),
            NewKeyError::KeyType(k) => write!(f, "unknown key type {k}"),
            NewKeyError::Count => write!(f, "a new key needs 1 to {MAX_NAMES} names"),
            NewKeyError::Name => f.write_str("a name is not a lower-case DNS name"),
        }
    }
}

impl std::error::Error for NewKeyError {}

/// Whether `name` is a lower-case DNS name, optionally `*.`-prefixed.
fn valid_name(name: &str) -> bool {
    let host = name.strip_prefix("*.").unwrap_or(name);
    !host.is_empty()
        && name.len() <= 253
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// The wire form of a request.
pub fn encode(req: &NewKey) -> Result<Vec<u8>, NewKeyError> {
    if req.names.is_empty() || req.names.len() > MAX_NAMES {
        return Err(NewKeyError::Count);
    }
    let mut out = vec![
        match req.kind {
            NewKeyKind::EcdsaP256 => 1,
            NewKeyKind::Rsa2048 => 2,
        },
        u8::try_from(req.names.len()).map_err(|_| NewKeyError::Count)?,
    ];
    for n in &req.names {
        if !valid_name(n) {
            return Err(NewKeyError::Name);
        }
        out.push(u8::try_from(n.len()).map_err(|_| NewKeyError::Name)?);
        out.extend_from_slice(n.as_bytes());
    }
    Ok(out)
}

/// Parses a request; anything but the exact form is an error.
pub fn parse(payload: &[u8]) -> Result<NewKey, NewKeyError> {
    let (&kind, rest) = payload.split_first().ok_or(NewKeyError::Length)?;
    let kind = match kind {
        1 => NewKeyKind::EcdsaP256,
        2 => NewKeyKind::Rsa2048,
        k => return Err(NewKeyError::KeyType(k)),
    };
    let (&count, mut rest) = rest.split_first().ok_or(NewKeyError::Length)?;
    let count = usize::from(count);
    if count == 0 || count > MAX_NAMES {
        return Err(NewKeyError::Count);
    }
    let mut names = Vec::with_capacity(count);
    for _ in 0..count {
        let (&len, tail) = rest.split_first().ok_or(NewKeyError::Length)?;
        let raw = tail.get(..usize::from(len)).ok_or(NewKeyError::Length)?;
        let name = std::str::from_utf8(raw).map_err(|_| NewKeyError::Name)?;
        if !valid_name(name) {
            return Err(NewKeyError::Name);
        }
        names.push(name.to_string());
        rest = &tail[usize::from(len)..];
    }
    if !rest.is_empty() {
        return Err(NewKeyError::Length);
    }
    Ok(NewKey { kind, names })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_only_dns_names_pass() {
        let req = NewKey {
            kind: NewKeyKind::Rsa2048,
            names: vec!["a.test".into(), "*.b.test".into(), "x-1.c.test".into()],
        };
        let wire = encode(&req).unwrap();
        assert_eq!(parse(&wire).unwrap(), req);
        for cut in 0..wire.len() {
            assert!(parse(&wire[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = wire.clone();
        long.push(0);
        assert_eq!(parse(&long), Err(NewKeyError::Length));
        for bad in [
            "A.test", "a..test", "-a.test", "a test", "a.test\0", "*", "a.*.test", "",
        ] {
            let req = NewKey {
                kind: NewKeyKind::EcdsaP256,
                names: vec![bad.into()],
            };
            assert_eq!(encode(&req), Err(NewKeyError::Name), "{bad:?}");
            let mut raw = vec![1, 1, u8::try_from(bad.len()).unwrap()];
            raw.extend_from_slice(bad.as_bytes());
            assert!(parse(&raw).is_err(), "{bad:?}");
        }
        assert_eq!(parse(&[3, 1, 1, b'a']), Err(NewKeyError::KeyType(3)));
        assert_eq!(parse(&[1, 0]), Err(NewKeyError::Count));
    }
}

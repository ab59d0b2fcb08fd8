//! The QUIC Retry token of the gateway's address validation (RFC 9000 §8.1.2), encoded and
//! parsed without I/O or cryptography: the caller computes and checks the MAC.
//!
//! Layout: `b'T'`, the issue time (Unix seconds, u64 big-endian), the original destination
//! connection ID (a length byte, 0..=20, then the bytes), a 16-byte MAC. [`parse`] never panics
//! on any input (there is a fuzz target) and `parse(encode(t)) == t`.

/// The first byte of every token.
pub const MAGIC: u8 = b'T';
/// Length of the MAC at the end.
pub const MAC_LEN: usize = 16;
/// Longest connection ID QUIC v1 allows.
pub const MAX_CID_LEN: usize = 20;

/// A parsed token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryToken<'a> {
    /// When it was issued (Unix seconds).
    pub issued: u64,
    /// The client's original destination connection ID.
    pub odcid: &'a [u8],
    /// The MAC over what the token binds (checked by the caller).
    pub mac: &'a [u8; MAC_LEN],
}

/// Why a token was refused (the gateway's QUIC listener classifies it: `tlsgate-proxy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token of this format (wrong first byte, wrong length).
    Malformed,
    /// The connection ID length exceeds QUIC's limit.
    CidTooLong,
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Malformed => "malformed retry token",
            Self::CidTooLong => "retry token names a connection ID longer than 20 bytes",
        })
    }
}

impl std::error::Error for TokenError {}

/// Everything before the MAC (what the MAC covers, with the caller's own additions).
pub fn body(issued: u64, odcid: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + odcid.len() + MAC_LEN);
    out.push(MAGIC);
    out.extend_from_slice(&issued.to_be_bytes());
    out.push(u8::try_from(odcid.len().min(MAX_CID_LEN)).unwrap_or(20));
    out.extend_from_slice(&odcid[..odcid.len().min(MAX_CID_LEN)]);
    out
}

/// A whole token: [`body`] followed by `mac`.
pub fn encode(issued: u64, odcid: &[u8], mac: &[u8; MAC_LEN]) -> Vec<u8> {
    let mut out = body(issued, odcid);
    out.extend_from_slice(mac);
    out
}

/// Parses a token; the bytes before the MAC are `&token[..token.len() - MAC_LEN]`.
pub fn parse(token: &[u8]) -> Result<RetryToken<'_>, TokenError> {
    let (&magic, rest) = token.split_first().ok_or(TokenError::Malformed)?;
    if magic != MAGIC || rest.len() < 9 + MAC_LEN {
        return Err(TokenError::Malformed);
    }
    let (issued, rest) = rest.split_at(8);
    let issued = u64::from_be_bytes(issued.try_into().map_err(|_| TokenError::Malformed)?);
    let (&len, rest) = rest.split_first().ok_or(TokenError::Malformed)?;
    let len = usize::from(len);
    if len > MAX_CID_LEN {
        return Err(TokenError::CidTooLong);
    }
    if rest.len() != len + MAC_LEN {
        return Err(TokenError::Malformed);
    }
    let (odcid, mac) = rest.split_at(len);
    let mac = mac.try_into().map_err(|_| TokenError::Malformed)?;
    Ok(RetryToken { issued, odcid, mac })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mac = [7u8; MAC_LEN];
        let token = encode(1_700_000_000, b"0123456789abcdef", &mac);
        let parsed = parse(&token).unwrap();
        assert_eq!(parsed.issued, 1_700_000_000);
        assert_eq!(parsed.odcid, b"0123456789abcdef");
        assert_eq!(parsed.mac, &mac);
        assert_eq!(
            &token[..token.len() - MAC_LEN],
            body(1_700_000_000, b"0123456789abcdef")
        );
        assert_eq!(parse(&encode(0, b"", &mac)).unwrap().odcid, b"");
    }

    #[test]
    fn refuses_what_is_not_a_token() {
        assert_eq!(parse(b""), Err(TokenError::Malformed));
        assert_eq!(parse(b"X0000000000000000000000000"), Err(TokenError::Malformed));
        let mut token = encode(1, b"abc", &[0; MAC_LEN]);
        token.pop();
        assert_eq!(parse(&token), Err(TokenError::Malformed));
        let mut long = vec![MAGIC];
        long.extend_from_slice(&[0; 8]);
        long.push(21);
        long.extend_from_slice(&[0; 21 + MAC_LEN]);
        assert_eq!(parse(&long), Err(TokenError::CidTooLong));
    }
}

//! The `encrypted_client_hello` extension (0xfe0d) of a ClientHello, as the server reads it
//! before trying to decrypt: which ECHConfig the client used (`config_id`) and with which
//! HPKE suite. Only the outer form is read (the inner form, type 1, carries nothing).
//! BoringSSL decrypts; this reader only tells the metrics an offer for one of our configs from
//! GREASE or a stale config.

/// `ECHClientHello.type` of an outer ClientHello.
const OUTER: u8 = 0;
/// `ECHClientHello.type` of an inner ClientHello.
const INNER: u8 = 1;

/// What an outer ClientHello's ECH extension says in the clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchOffer<'a> {
    /// HPKE KDF id (0x0001: HKDF-SHA256).
    pub kdf_id: u16,
    /// HPKE AEAD id (0x0001: AES-128-GCM, 0x0002: AES-256-GCM, 0x0003: ChaCha20-Poly1305).
    pub aead_id: u16,
    /// The ECHConfig the client encrypted to (its `config_id`).
    pub config_id: u8,
    /// The HPKE encapsulated key.
    pub enc: &'a [u8],
    /// Length of the encrypted inner ClientHello.
    pub payload_len: usize,
}

/// What the extension is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchExtension<'a> {
    /// An outer ClientHello offering (or GREASE-ing) ECH.
    Outer(EchOffer<'a>),
    /// The marker of an inner ClientHello (seen only after decryption).
    Inner,
}

/// Why the extension could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchParseError {
    /// The body ends before a field.
    Truncated,
    /// Bytes after the last field.
    Trailing,
    /// A type other than outer (0) or inner (1).
    UnknownType(u8),
    /// An empty payload (no encrypted ClientHello).
    EmptyPayload,
}

impl std::fmt::Display for EchParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => f.write_str("ECH extension truncated"),
            Self::Trailing => f.write_str("ECH extension has trailing bytes"),
            Self::UnknownType(t) => write!(f, "ECH extension of unknown type {t}"),
            Self::EmptyPayload => f.write_str("ECH extension with an empty payload"),
        }
    }
}

impl std::error::Error for EchParseError {}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], EchParseError> {
        if self.0.len() < n {
            return Err(EchParseError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, EchParseError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, EchParseError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec16(&mut self) -> Result<&'a [u8], EchParseError> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// Reads the body of an `encrypted_client_hello` extension (RFC draft-ietf-tls-esni-25 §5):
/// `type`, then for the outer form `cipher_suite{kdf_id, aead_id}`, `config_id`, `enc<0..2^16-1>`
/// and `payload<1..2^16-1>`, with nothing after it.
pub fn parse(body: &[u8]) -> Result<EchExtension<'_>, EchParseError> {
    let mut r = Reader(body);
    let kind = r.u8()?;
    let ext = match kind {
        INNER => EchExtension::Inner,
        OUTER => {
            let kdf_id = r.u16()?;
            let aead_id = r.u16()?;
            let config_id = r.u8()?;
            let enc = r.vec16()?;
            let payload = r.vec16()?;
            if payload.is_empty() {
                return Err(EchParseError::EmptyPayload);
            }
            EchExtension::Outer(EchOffer {
                kdf_id,
                aead_id,
                config_id,
                enc,
                payload_len: payload.len(),
            })
        }
        other => return Err(EchParseError::UnknownType(other)),
    };
    if !r.0.is_empty() {
        return Err(EchParseError::Trailing);
    }
    Ok(ext)
}

/// The ECHConfig `config_id`s of an ECHConfigList (what `tlsgate ech` prints and DNS publishes),
/// with each config's version; `None` when the list is malformed.
pub fn config_ids(list: &[u8]) -> Option<Vec<(u16, u8)>> {
    let mut r = Reader(list);
    let mut configs = Reader(r.vec16().ok()?);
    if !r.0.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    while !configs.0.is_empty() {
        let version = configs.u16().ok()?;
        let mut contents = Reader(configs.vec16().ok()?);
        // ECHConfigContents starts with HpkeKeyConfig, whose first field is config_id (0xfe0d).
        let id = contents.u8().ok()?;
        out.push((version, id));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outer(config_id: u8, enc: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut v = vec![OUTER, 0, 1, 0, 1, config_id];
        v.extend_from_slice(&(enc.len() as u16).to_be_bytes());
        v.extend_from_slice(enc);
        v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn reads_an_outer_offer() {
        let body = outer(7, &[9; 32], &[1; 200]);
        let EchExtension::Outer(o) = parse(&body).unwrap() else {
            panic!("outer expected")
        };
        assert_eq!((o.kdf_id, o.aead_id, o.config_id), (1, 1, 7));
        assert_eq!((o.enc.len(), o.payload_len), (32, 200));
        assert_eq!(parse(&[INNER]).unwrap(), EchExtension::Inner);
    }

    #[test]
    fn refuses_malformed_bodies() {
        let body = outer(7, &[9; 32], &[1; 20]);
        for cut in 0..body.len() {
            assert!(parse(&body[..cut]).is_err(), "truncated at {cut}");
        }
        let mut long = body.clone();
        long.push(0);
        assert_eq!(parse(&long), Err(EchParseError::Trailing));
        assert_eq!(parse(&[INNER, 0]), Err(EchParseError::Trailing));
        assert_eq!(parse(&[2]), Err(EchParseError::UnknownType(2)));
        assert_eq!(parse(&outer(1, &[], &[])), Err(EchParseError::EmptyPayload));
        // A length larger than what follows.
        assert_eq!(
            parse(&[OUTER, 0, 1, 0, 1, 3, 0xff, 0xff]),
            Err(EchParseError::Truncated)
        );
    }

    #[test]
    fn lists_config_ids() {
        // Two configs: version 0xfe0d, ids 5 and 6, a byte of contents each after the id.
        let list = [0, 12, 0xfe, 0x0d, 0, 2, 5, 0, 0xfe, 0x0d, 0, 2, 6, 0];
        assert_eq!(config_ids(&list), Some(vec![(0xfe0d, 5), (0xfe0d, 6)]));
        assert_eq!(config_ids(&list[..5]), None);
        assert_eq!(config_ids(&[0, 0]), Some(vec![]));
        assert_eq!(config_ids(&[0, 3, 0xfe, 0x0d, 0]), None, "contents cut short");
    }
}

//! Command-line values that `tlsgate bench`, `tlsgate probe` and their shared TLS options read:
//! durations (`5`, `500ms`, `1m`) and `HOST[:PORT]` (tlsgate-config's address parser, the one
//! the configuration file uses, with a default port).

use std::time::Duration;
use tlsgate_config::{AddressError, OriginAddr};
use tlsgate_error::{Classify, Side};

/// A duration option that does not read as one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// Neither whole seconds nor humantime syntax.
    #[error("invalid duration {text:?}: {source}")]
    Invalid {
        /// As given.
        text: String,
        /// humantime's reason.
        source: humantime::DurationError,
    },
    /// Zero where a pause or an interval must be longer.
    #[error("invalid duration {text:?}: must be longer than zero")]
    Zero {
        /// As given.
        text: String,
    },
}

impl Classify for DurationError {
    fn side(&self) -> Side {
        Side::Config
    }

    fn kind(&self) -> &'static str {
        "bad_duration"
    }
}

/// A duration as wrk takes it (`5` = 5 s) or in humantime syntax (`500ms`, `2m`).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(text).map_err(|source| DurationError::Invalid {
        text: text.to_string(),
        source,
    })
}

/// [`parse_duration`], refusing zero (intervals, timeouts).
pub fn parse_positive_duration(text: &str) -> Result<Duration, DurationError> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(DurationError::Zero {
            text: text.trim().to_string(),
        }),
        d => Ok(d),
    }
}

/// `host[:port]` or `[v6][:port]`, `default_port` when none is written: the host without
/// brackets (a name lower-cased, an IP address in its canonical form) and the port.
pub fn host_port(text: &str, default_port: u16) -> Result<(String, u16), AddressError> {
    let addr = match OriginAddr::parse_host_port(text) {
        // `host` or `[v6]` alone (not `host:`, whose port is missing on purpose).
        Err(AddressError::MissingPort) if !text.ends_with(':') => {
            OriginAddr::parse_host_port(&format!("{text}:{default_port}"))?
        }
        other => other?,
    };
    Ok((addr.host.bare(), addr.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration(" 1m "), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        let e = parse_duration("x").unwrap_err();
        assert!(e.to_string().starts_with("invalid duration \"x\": "), "{e}");
        assert_eq!((e.side(), e.kind()), (Side::Config, "bad_duration"));
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(parse_positive_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(
            parse_positive_duration("0ms").unwrap_err().to_string(),
            "invalid duration \"0ms\": must be longer than zero"
        );
    }

    #[test]
    fn hosts_and_ports() {
        let ok = |t: &str| host_port(t, 443).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(ok("127.0.0.1:8443"), ("127.0.0.1".into(), 8443));
        assert_eq!(ok("127.0.0.1"), ("127.0.0.1".into(), 443));
        assert_eq!(ok("Example.TEST"), ("example.test".into(), 443));
        assert_eq!(ok("example.test:9"), ("example.test".into(), 9));
        assert_eq!(ok("[::1]:8443"), ("::1".into(), 8443));
        assert_eq!(ok("[::1]"), ("::1".into(), 443));
        let bad = |t: &str| host_port(t, 443).unwrap_err();
        assert_eq!(bad("127.0.0.1:x"), AddressError::BadPort { port: "x".into() });
        assert_eq!(bad("127.0.0.1:99999"), AddressError::BadPort { port: "99999".into() });
        assert_eq!(bad(":443"), AddressError::MissingHost);
        assert_eq!(bad("host:"), AddressError::MissingPort);
        assert_eq!(bad(""), AddressError::Empty);
        assert_eq!(
            bad("::1:8443"),
            AddressError::UnbracketedIpv6 {
                suggestion: "[::1]:8443".into()
            }
        );
        assert_eq!(bad("[::1"), AddressError::UnclosedBracket);
    }
}

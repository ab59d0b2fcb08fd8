//! Human-readable durations in config files: `"10s"`, `"500ms"`, `"1h 30m"`.

use serde::{Deserialize, Deserializer};
use std::fmt;

/// A duration written in humantime syntax in the config file.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// Whole seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(std::time::Duration::from_secs(secs))
    }

    /// The std duration.
    pub const fn get(self) -> std::time::Duration {
        self.0
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text).map(Duration).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); write e.g. \"10s\", \"500ms\", \"1h\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        d: Duration,
    }

    #[test]
    fn parses_humantime() {
        let t: T = toml::from_str("d = \"1m 30s\"").unwrap();
        assert_eq!(t.d.get(), std::time::Duration::from_secs(90));
    }

    #[test]
    fn rejects_bare_numbers_with_a_hint() {
        let err = toml::from_str::<T>("d = \"10\"").err().unwrap().to_string();
        assert!(err.contains("invalid duration"), "{err}");
    }
}

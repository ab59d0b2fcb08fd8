//! [`Member`]: one server of a pool whose membership changes at runtime — a key-server pool, an
//! upstream group — with its weight and drain flag. The control plane's document
//! (tlsgate-control) and the key-server pools' admin API (`PUT /keyless/pools/NAME`,
//! tlsgate-keyless) both read and write this one shape; its address is checked with
//! [`crate::address`]'s parser by whoever applies it.

use serde::{Deserialize, Serialize};

/// Largest accepted member weight.
pub const MAX_WEIGHT: u32 = 1000;

/// A pool member or upstream server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    /// `host:port` (`[v6]:port` for IPv6 literals); an upstream server may also be written
    /// `http://host[:port]`. A key server's host is checked against its certificate.
    pub address: String,
    /// Relative share of new work when loads are equal, 1..=[`MAX_WEIGHT`].
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// A drained member gets no new work while another is available; existing work finishes.
    #[serde(default)]
    pub drain: bool,
}

fn default_weight() -> u32 {
    1
}

impl Member {
    /// A member with weight 1, not drained.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            weight: 1,
            drain: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_form_has_defaults_and_refuses_unknown_fields() {
        let m: Member = toml::from_str(r#"address = "ks:1""#).unwrap();
        assert_eq!(m, Member::new("ks:1"));
        assert_eq!(
            toml::to_string(&m).unwrap(),
            "address = \"ks:1\"\nweight = 1\ndrain = false\n"
        );
        assert!(toml::from_str::<Member>("address = \"ks:1\"\nwieght = 2").is_err());
    }
}

//! A key-server pool's member list: [`Member`] (tlsgate-config's one definition, shared with the
//! control plane's document), the checks a new list must pass ([`validate_members`]), and what
//! the admin API shows of each member ([`MemberStatus`]).

use serde::Serialize;
use tlsgate_config::member::MAX_WEIGHT;
use tlsgate_config::{AddressError, OriginAddr};
use tlsgate_error::{Classify, Side};

pub use tlsgate_config::Member;

/// A member and its state now.
#[derive(Debug, Clone, Serialize)]
pub struct MemberStatus {
    /// `host:port`.
    pub address: String,
    /// Configured weight.
    pub weight: u32,
    /// Drained.
    pub drain: bool,
    /// Proven connections now.
    pub connections: usize,
    /// Requests waiting for an answer now.
    pub in_flight: usize,
    /// Skipped after consecutive failures.
    pub circuit_open: bool,
}

/// Why a member list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembersError {
    /// No member at all.
    #[error("a pool needs at least one member")]
    Empty,
    /// An address that is not `host:port` or `[v6]:port`.
    #[error("members[{index}].address: {address:?} is not host:port: {source}")]
    Address {
        /// Position in the list.
        index: usize,
        /// The address as written.
        address: String,
        /// What the parser refused.
        #[source]
        source: AddressError,
    },
    /// A weight outside `1..=MAX_WEIGHT`.
    #[error("members[{index}].weight: {weight} is not in 1..={MAX_WEIGHT}")]
    Weight {
        /// Position in the list.
        index: usize,
        /// The weight as given.
        weight: u32,
    },
    /// The same server twice (compared after parsing: `KS:1` is `ks:1`).
    #[error("members[{index}].address: {address:?} is listed twice")]
    Duplicate {
        /// Position of the second one.
        index: usize,
        /// The address as written.
        address: String,
    },
    /// Every member drained: nothing would serve.
    #[error("at least one member must not be drained")]
    AllDrained,
}

impl Classify for MembersError {
    /// A member list comes from an API caller (the admin API, the control plane's document).
    fn side(&self) -> Side {
        Side::Downstream
    }
    fn kind(&self) -> &'static str {
        "invalid_members"
    }
}

/// Checks a member list: at least one member, `host:port` addresses, weights 1..=1000, no
/// address twice, at least one member not drained.
pub fn validate_members(members: &[Member]) -> Result<(), MembersError> {
    if members.is_empty() {
        return Err(MembersError::Empty);
    }
    let mut seen = Vec::with_capacity(members.len());
    for (index, m) in members.iter().enumerate() {
        // The configuration's parser: `host:port` or `[v6]:port`, nothing else.
        let addr = OriginAddr::parse_host_port(&m.address).map_err(|source| MembersError::Address {
            index,
            address: m.address.clone(),
            source,
        })?;
        if !(1..=MAX_WEIGHT).contains(&m.weight) {
            return Err(MembersError::Weight {
                index,
                weight: m.weight,
            });
        }
        if seen.contains(&addr) {
            return Err(MembersError::Duplicate {
                index,
                address: m.address.clone(),
            });
        }
        seen.push(addr);
    }
    if members.iter().all(|m| m.drain) {
        return Err(MembersError::AllDrained);
    }
    Ok(())
}

/// The host of a member's address, unbracketed, as SNI and the certificate name check want it
/// (the address itself when it does not parse; [`validate_members`] refuses those first).
pub fn host_of(address: &str) -> String {
    OriginAddr::parse_host_port(address).map_or_else(|_| address.to_string(), |a| a.host.bare())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(members: &[Member]) -> String {
        validate_members(members).unwrap_err().to_string()
    }

    #[test]
    fn member_lists_are_checked() {
        let ok = [
            Member::new("a:1"),
            Member {
                drain: true,
                ..Member::new("b:2")
            },
        ];
        assert_eq!(validate_members(&ok), Ok(()));
        assert_eq!(validate_members(&[]), Err(MembersError::Empty));
        assert!(refused(&[]).contains("at least one"));
        assert!(refused(&[Member::new("nope")]).contains("host:port"));
        assert_eq!(
            refused(&[Member::new("a:1"), Member::new("::1:2407")]),
            "members[1].address: \"::1:2407\" is not host:port: IPv6 addresses need brackets ([::1]:2407)"
        );
        for bad in ["ks 1:2407", "ks/1:2407", "10.0.0.1:2407:1", "https://ks:2407"] {
            assert!(validate_members(&[Member::new(bad)]).is_err(), "{bad:?} accepted");
        }
        assert_eq!(validate_members(&[Member::new("[::1]:2407")]), Ok(()));
        assert!(refused(&[Member::new("KS:1"), Member::new("ks:1")]).contains("twice"));
        let heavy = Member {
            weight: 0,
            ..Member::new("a:1")
        };
        assert!(refused(&[heavy]).contains("weight"));
        assert!(refused(&[Member::new("a:1"), Member::new("a:1")]).contains("twice"));
        let drained = Member {
            drain: true,
            ..Member::new("a:1")
        };
        assert_eq!(validate_members(&[drained]), Err(MembersError::AllDrained));
        let e = validate_members(&[Member::new("nope")]).unwrap_err();
        assert_eq!(
            (e.side(), e.kind(), e.retry_safe()),
            (Side::Downstream, "invalid_members", false)
        );
        assert!(std::error::Error::source(&e).is_some(), "the parser's error is kept");
    }

    #[test]
    fn hosts_are_unbracketed() {
        assert_eq!(host_of("ks.internal:2407"), "ks.internal");
        assert_eq!(host_of("[::1]:2407"), "::1");
        assert_eq!(host_of("nope"), "nope");
    }
}

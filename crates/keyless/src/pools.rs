//! Key-server pools at runtime: every live [`Client`] registered by name, what the admin API
//! shows (`GET /keyless/pools`) and changes (`PUT /keyless/pools/NAME`), and the checks a new
//! member list must pass. The control plane applies its documents through [`set_members`].

use crate::client::Client;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};
use tlsgate_config::OriginAddr;

/// One key server of a pool, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    /// `host:port` (`[v6]:port` for IPv6); the host is checked against the key server's
    /// certificate.
    pub address: String,
    /// Share of new requests when loads are equal (1..=1000).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// A drained server takes no new requests while another member is available.
    #[serde(default)]
    pub drain: bool,
}

fn default_weight() -> u32 {
    1
}

impl Member {
    /// A member with weight 1, not drained.
    pub fn new(address: &str) -> Self {
        Self {
            address: address.to_string(),
            weight: 1,
            drain: false,
        }
    }
}

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

/// A pool and its members now.
#[derive(Debug, Clone, Serialize)]
pub struct PoolStatus {
    /// Pool name.
    pub name: String,
    /// Members in order.
    pub members: Vec<MemberStatus>,
}

/// The body of `PUT /keyless/pools/NAME`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetMembers {
    members: Vec<Member>,
}

/// Checks a member list: at least one member, `host:port` addresses, weights 1..=1000, no
/// address twice, at least one member not drained.
pub fn validate_members(members: &[Member]) -> Result<(), String> {
    if members.is_empty() {
        return Err("a pool needs at least one member".into());
    }
    let mut seen = Vec::with_capacity(members.len());
    for (i, m) in members.iter().enumerate() {
        // The configuration's parser: `host:port` or `[v6]:port`, nothing else.
        let addr = OriginAddr::parse_host_port(&m.address)
            .map_err(|e| format!("members[{i}].address: {:?} is not host:port: {e}", m.address))?;
        if !(1..=1000).contains(&m.weight) {
            return Err(format!("members[{i}].weight: {} is not in 1..=1000", m.weight));
        }
        if seen.contains(&addr) {
            return Err(format!("members[{i}].address: {:?} is listed twice", m.address));
        }
        seen.push(addr);
    }
    if members.iter().all(|m| m.drain) {
        return Err("at least one member must not be drained".into());
    }
    Ok(())
}

static CLIENTS: Mutex<Vec<Weak<Client>>> = Mutex::new(Vec::new());

/// Remembers a newly started client (called by the backend factory).
pub(crate) fn register(client: &Arc<Client>) {
    let mut clients = CLIENTS.lock();
    clients.retain(|c| c.strong_count() > 0);
    clients.push(Arc::downgrade(client));
}

/// Live clients, oldest first (several share a name while an old configuration generation with
/// other `[keyless]` settings is still draining).
fn live() -> Vec<Arc<Client>> {
    CLIENTS.lock().iter().filter_map(Weak::upgrade).collect()
}

/// Every pool and its members now (for a name shared by several clients, the newest's view).
pub fn pools() -> Vec<PoolStatus> {
    let mut out: Vec<PoolStatus> = Vec::new();
    for client in live() {
        let status = PoolStatus {
            name: client.name.clone(),
            members: client.members(),
        };
        match out.iter_mut().find(|p| p.name == client.name) {
            Some(p) => *p = status,
            None => out.push(status),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Sets the members of every live client of pool `name`; `Ok(false)` when there is no such pool.
pub fn set_members(name: &str, members: &[Member]) -> Result<bool, String> {
    validate_members(members)?;
    let clients: Vec<Arc<Client>> = live().into_iter().filter(|c| c.name == name).collect();
    for c in &clients {
        c.set_members(members)?;
    }
    Ok(!clients.is_empty())
}

/// `GET /keyless/pools`: JSON `{"pools": [...]}`.
pub fn pools_json() -> String {
    serde_json::json!({ "pools": pools() }).to_string()
}

/// `PUT /keyless/pools/NAME` with `{"members": [{"address", "weight", "drain"}]}`: the HTTP
/// status and a JSON body (the pool now, or `{"error": ...}`).
pub fn put_pool_json(name: &str, body: &[u8]) -> (u16, String) {
    let error = |status: u16, message: String| (status, serde_json::json!({ "error": message }).to_string());
    let request: SetMembers = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return error(400, format!("invalid body: {e}")),
    };
    match set_members(name, &request.members) {
        Ok(true) => {
            let pool = pools().into_iter().find(|p| p.name == name);
            (200, serde_json::json!({ "pool": pool }).to_string())
        }
        Ok(false) => error(404, format!("no key-server pool named {name:?}")),
        Err(e) => error(400, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(validate_members(&[]).unwrap_err().contains("at least one"));
        assert!(validate_members(&[Member::new("nope")])
            .unwrap_err()
            .contains("host:port"));
        assert_eq!(
            validate_members(&[Member::new("a:1"), Member::new("::1:2407")]).unwrap_err(),
            "members[1].address: \"::1:2407\" is not host:port: IPv6 addresses need brackets ([::1]:2407)"
        );
        for bad in ["ks 1:2407", "ks/1:2407", "10.0.0.1:2407:1", "https://ks:2407"] {
            assert!(validate_members(&[Member::new(bad)]).is_err(), "{bad:?} accepted");
        }
        assert_eq!(validate_members(&[Member::new("[::1]:2407")]), Ok(()));
        assert!(validate_members(&[Member::new("KS:1"), Member::new("ks:1")])
            .unwrap_err()
            .contains("twice"));
        let heavy = Member {
            weight: 0,
            ..Member::new("a:1")
        };
        assert!(validate_members(&[heavy]).unwrap_err().contains("weight"));
        assert!(validate_members(&[Member::new("a:1"), Member::new("a:1")])
            .unwrap_err()
            .contains("twice"));
        let drained = Member {
            drain: true,
            ..Member::new("a:1")
        };
        assert!(validate_members(&[drained]).unwrap_err().contains("drained"));
    }

    #[test]
    fn put_body_errors_are_json() {
        let (status, body) = put_pool_json("x", b"{not json");
        assert_eq!(status, 400);
        assert!(body.contains("invalid body"), "{body}");
        let (status, body) = put_pool_json("no-such-pool", br#"{"members":[{"address":"a:1"}]}"#);
        assert_eq!(status, 404, "{body}");
        let (status, _) = put_pool_json("x", br#"{"members":[{"address":"a:1","extra":1}]}"#);
        assert_eq!(status, 400);
    }
}

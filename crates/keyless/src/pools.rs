//! Key-server pools at runtime: every live [`Client`] registered by name, what the admin API
//! shows (`GET /keyless/pools`) and changes (`PUT /keyless/pools/NAME`), and the checks a new
//! member list must pass ([`crate::members`]). The control plane applies its documents through
//! [`set_members`].

use crate::client::Client;
use crate::members::MembersError;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};

pub use crate::members::{validate_members, Member, MemberStatus};

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
pub fn set_members(name: &str, members: &[Member]) -> Result<bool, MembersError> {
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
        Err(e) => error(400, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! The JSON API (docs/CONSOLE.md, docs/console-openapi.yaml): overview, document, history,
//! member edits (bulk, one version), the access rules, rollback, key servers. Each handler returns a status and
//! a JSON value; [`crate::server`] does the HTTP and the authentication.

use crate::auth::Identity;
use crate::collector::{NodeView, Snapshot};
use crate::State;
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tlsgate_control::ctl::{self, Group, MemberEdit};
use tlsgate_control::ControlError;
use tlsgate_error::{Classify, Side};

/// A handler's answer.
pub type Answer = (StatusCode, Value);

/// One edit of `POST /api/pools/{name}/members`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditRequest {
    /// `add`, `remove`, `drain`, `undrain` or `weight`.
    pub op: String,
    /// `host:port`.
    pub address: String,
    /// For `add` (default 1) and `weight` (required).
    #[serde(default)]
    pub weight: Option<u32>,
    /// For `add`: start drained.
    #[serde(default)]
    pub drain: bool,
}

/// The body: a list of edits, or `{"edits": [...], "comment": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EditsBody {
    /// Just the edits.
    List(Vec<EditRequest>),
    /// Edits and a comment.
    Object {
        /// The edits.
        edits: Vec<EditRequest>,
        /// Recorded in the history.
        #[serde(default)]
        comment: Option<String>,
    },
}

/// Optional body of `POST /api/rollback/{version}`.
#[derive(Debug, Default, Deserialize)]
pub struct CommentBody {
    /// Recorded in the history.
    #[serde(default)]
    pub comment: Option<String>,
}

/// Why an edit of the request body was refused (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// `weight` without a weight.
    #[error("weight for {address} is missing")]
    MissingWeight {
        /// The member the edit is for.
        address: String,
    },
    /// An op that is none of the five.
    #[error("unknown op {op:?} (add, remove, drain, undrain, weight)")]
    UnknownOp {
        /// The op as sent.
        op: String,
    },
}

impl Classify for EditError {
    fn side(&self) -> Side {
        Side::Downstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::MissingWeight { .. } => "missing_weight",
            Self::UnknownOp { .. } => "unknown_op",
        }
    }
}

/// Turns one request edit into a control-plane edit.
pub fn to_edit(e: &EditRequest) -> Result<MemberEdit, EditError> {
    Ok(match e.op.as_str() {
        "add" => MemberEdit::Add {
            weight: e.weight.unwrap_or(1),
            drain: e.drain,
        },
        "remove" => MemberEdit::Remove,
        "drain" => MemberEdit::Drain(true),
        "undrain" => MemberEdit::Drain(false),
        "weight" => MemberEdit::Weight(e.weight.ok_or_else(|| EditError::MissingWeight {
            address: e.address.clone(),
        })?),
        other => return Err(EditError::UnknownOp { op: other.to_string() }),
    })
}

fn error(e: &ControlError) -> Answer {
    let status = match e {
        ControlError::Invalid(_) => StatusCode::BAD_REQUEST,
        ControlError::NotFound(_) => StatusCode::NOT_FOUND,
        ControlError::Conflict { .. } => StatusCode::CONFLICT,
        ControlError::Corrupt { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let problems = match e {
        ControlError::Invalid(p) => p.clone(),
        _ => Vec::new(),
    };
    (status, json!({"error": e.to_string(), "problems": problems}))
}

/// `400 {"error": why}`.
pub fn bad_request(why: impl Into<String>) -> Answer {
    (StatusCode::BAD_REQUEST, json!({"error": why.into(), "problems": []}))
}

/// `GET /api/overview`.
pub async fn overview(state: &State, who: &Identity) -> Answer {
    let snap = state.snapshot();
    // A current version whose record is unreadable (written around the console) is not a
    // store outage: report it as `current_error`, with its number.
    let (current, store_error, current_error) = match state.store.current().await {
        Ok(v) => (v, snap.store_error.clone(), None),
        Err(e @ ControlError::Corrupt { .. }) => (None, snap.store_error.clone(), Some(e.to_string())),
        Err(e) => (None, Some(e.to_string()), None),
    };
    let cur = match &current {
        Some(v) => Some(v.version),
        None if current_error.is_some() => state.store.current_version().await.ok().flatten(),
        None => None,
    };
    // Versions refused by nodes, newer than what they apply: the UI's red banner.
    let mut refused: BTreeMap<u64, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for n in &snap.nodes {
        if let Some(r) = &n.status.rejected {
            let e = refused.entry(r.version).or_default();
            e.0.push(n.status.node_id.clone());
            for reason in &r.reasons {
                if !e.1.contains(reason) {
                    e.1.push(reason.clone());
                }
            }
        }
    }
    let refused: Vec<Value> = refused
        .into_iter()
        .map(|(v, (nodes, reasons))| json!({"version": v, "nodes": nodes, "reasons": reasons}))
        .collect();
    let in_sync = snap.nodes.iter().all(|n| n.status.applied_version == cur);
    (
        StatusCode::OK,
        json!({
            "cluster": state.store.config().cluster,
            "at": snap.at,
            "identity": who.author(),
            "current_version": cur,
            "current": current.as_ref().map(|v| json!({
                "version": v.version, "parent": v.parent, "author": v.author, "at": v.at,
                "comment": v.comment, "rollback_of": v.rollback_of,
            })),
            "current_error": current_error,
            "store_error": store_error,
            "in_sync": in_sync,
            "refused": refused,
            "nodes": snap.nodes,
            "series": snap.series,
        }),
    )
}

/// `GET /api/document`.
pub async fn document(state: &State) -> Answer {
    match state.store.current().await {
        Ok(Some(v)) => (StatusCode::OK, json!(v)),
        Ok(None) => (StatusCode::OK, json!({"version": null, "document": {}})),
        Err(e) => error(&e),
    }
}

/// `GET /api/history?limit=N` (default 20, at most 500).
pub async fn history(state: &State, limit: usize) -> Answer {
    match ctl::history(&state.store, limit.min(500)).await {
        Ok(h) => (StatusCode::OK, json!({ "entries": h })),
        Err(e) => error(&e),
    }
}

/// `POST /api/pools/{name}/members`: every edit, as one version.
pub async fn edit_members(state: &State, who: &Identity, pool: &str, body: &[u8]) -> Answer {
    let (edits, comment) = match serde_json::from_slice::<EditsBody>(body) {
        Ok(EditsBody::List(e)) => (e, None),
        Ok(EditsBody::Object { edits, comment }) => (edits, comment),
        Err(e) => return bad_request(format!("body: {e}")),
    };
    if edits.is_empty() {
        return bad_request("no edits");
    }
    let mut list = Vec::new();
    for e in &edits {
        match to_edit(e) {
            Ok(edit) => list.push((Group::Pool(pool.to_string()), e.address.clone(), edit)),
            Err(why) => return bad_request(why.to_string()),
        }
    }
    match ctl::edit_members(&state.store, &list, who.author(), comment.as_deref()).await {
        Ok((v, changes)) => {
            tracing::info!(
                author = who.author(),
                version = v.version,
                pool,
                "console: members edited"
            );
            (StatusCode::OK, json!({"version": v.version, "changes": changes}))
        }
        Err(e) => error(&e),
    }
}

/// `GET /api/access-rules`: the document's access rules (`null`: every node uses its TOML's).
pub async fn access_rules(state: &State) -> Answer {
    match state.store.current().await {
        Ok(v) => (
            StatusCode::OK,
            json!({
                "version": v.as_ref().map(|v| v.version),
                "rules": v.and_then(|v| v.document.access_rules),
            }),
        ),
        Err(e) => error(&e),
    }
}

/// `PUT /api/access-rules` with `{"rules": [...], "comment": "..."}`: the rules every node
/// applies from the next version on, in order (`"rules": null` removes them from the document,
/// and the nodes go back to their TOML's `[[access_rule]]`).
pub async fn set_access_rules(state: &State, who: &Identity, body: &[u8]) -> Answer {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        rules: Value,
        #[serde(default)]
        comment: Option<String>,
    }
    let parsed = serde_json::from_slice::<Body>(body)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            let rules = match b.rules {
                Value::Null => None,
                v => Some(
                    serde_json::from_value::<Vec<tlsgate_control::AccessRule>>(v).map_err(|e| format!("rules: {e}"))?,
                ),
            };
            Ok((rules, b.comment))
        });
    let (rules, comment) = match parsed {
        Ok(p) => p,
        Err(why) => return bad_request(format!("body: {why}")),
    };
    let count = rules.as_ref().map(Vec::len);
    match ctl::set_access_rules(&state.store, rules, who.author(), comment.as_deref()).await {
        Ok((v, changes)) => {
            tracing::info!(author = who.author(), version = v.version, rules = ?count, "console: access rules set");
            (StatusCode::OK, json!({"version": v.version, "changes": changes}))
        }
        Err(e) => error(&e),
    }
}

/// `POST /api/rollback/{version}`.
pub async fn rollback(state: &State, who: &Identity, to: u64, body: &[u8]) -> Answer {
    let comment = if body.iter().all(u8::is_ascii_whitespace) {
        CommentBody::default()
    } else {
        match serde_json::from_slice::<CommentBody>(body) {
            Ok(c) => c,
            Err(e) => return bad_request(format!("body: {e}")),
        }
    };
    match ctl::rollback(&state.store, to, who.author(), comment.comment.as_deref()).await {
        Ok(v) => {
            tracing::info!(author = who.author(), version = v.version, to, "console: rollback");
            (
                StatusCode::OK,
                json!({"version": v.version, "rollback_of": v.rollback_of}),
            )
        }
        Err(e) => error(&e),
    }
}

/// `GET /api/keyservers`: every pool member of the document and every key server the nodes
/// report, with health, in-flight, ops/s and latency summed (or averaged) across nodes.
pub async fn keyservers(state: &State) -> Answer {
    let snap = state.snapshot();
    let doc = state.store.current().await.ok().flatten();
    let mut pools: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    if let Some(v) = &doc {
        for (name, pool) in &v.document.key_server_pools {
            for m in &pool.members {
                pools.entry(name.clone()).or_default().insert(
                    m.address.clone(),
                    json!({"address": m.address, "in_document": true, "weight": m.weight, "drain": m.drain}),
                );
            }
        }
    }
    aggregate(&snap, &mut pools);
    let pools: Vec<Value> = pools
        .into_iter()
        .map(|(name, members)| json!({"name": name, "members": members.into_values().collect::<Vec<_>>()}))
        .collect();
    (
        StatusCode::OK,
        json!({"version": doc.map(|v| v.version), "pools": pools, "at": snap.at}),
    )
}

fn aggregate(snap: &Snapshot, pools: &mut BTreeMap<String, BTreeMap<String, Value>>) {
    for n in &snap.nodes {
        let Some(f) = n.figures.as_ref() else { continue };
        for k in &f.keyservers {
            let entry = pools
                .entry(k.pool.clone())
                .or_default()
                .entry(k.server.clone())
                .or_insert_with(
                    || json!({"address": k.server, "in_document": false, "weight": k.weight, "drain": k.drained}),
                );
            let o = entry.as_object_mut().expect("built as an object");
            let add = |o: &mut serde_json::Map<String, Value>, key: &str, v: f64| {
                let old = o.get(key).and_then(Value::as_f64).unwrap_or(0.0);
                o.insert(key.into(), json!(old + v));
            };
            add(o, "ops_per_s", k.ops_per_s);
            add(o, "errors_per_s", k.errors_per_s);
            add(o, "in_flight", k.in_flight);
            add(o, "ops_total", k.ops_total);
            let healthy = k.connections > 0.0 && !k.circuit_open;
            add(o, "nodes_seen", 1.0);
            add(o, "nodes_healthy", if healthy { 1.0 } else { 0.0 });
            if let Some(l) = k.latency_ms {
                let worst = o.get("latency_ms").and_then(Value::as_f64).unwrap_or(0.0).max(l);
                o.insert("latency_ms".into(), json!(worst));
            }
            let per_node = o.entry("per_node").or_insert_with(|| json!([]));
            if let Some(list) = per_node.as_array_mut() {
                list.push(node_entry(n, k));
            }
        }
    }
    for members in pools.values_mut() {
        for v in members.values_mut() {
            let o = v.as_object_mut().expect("built as an object");
            let seen = o.get("nodes_seen").and_then(Value::as_f64).unwrap_or(0.0);
            let healthy = o.get("nodes_healthy").and_then(Value::as_f64).unwrap_or(0.0);
            let health = if seen == 0.0 {
                "unknown"
            } else if healthy == seen {
                "healthy"
            } else if healthy > 0.0 {
                "degraded"
            } else {
                "down"
            };
            o.insert("health".into(), json!(health));
        }
    }
}

fn node_entry(n: &NodeView, k: &crate::figures::KeyServerFigures) -> Value {
    json!({
        "node_id": n.status.node_id, "connections": k.connections, "in_flight": k.in_flight,
        "circuit_open": k.circuit_open, "weight": k.weight, "drained": k.drained,
        "ops_per_s": k.ops_per_s, "latency_ms": k.latency_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_body_shapes() {
        let b: EditsBody =
            serde_json::from_str(r#"[{"op":"drain","address":"a:1"},{"op":"add","address":"b:2","weight":3}]"#)
                .unwrap();
        let EditsBody::List(l) = b else { panic!() };
        assert_eq!(to_edit(&l[0]), Ok(MemberEdit::Drain(true)));
        assert_eq!(
            to_edit(&l[1]),
            Ok(MemberEdit::Add {
                weight: 3,
                drain: false
            })
        );
        let b: EditsBody =
            serde_json::from_str(r#"{"edits":[{"op":"weight","address":"a:1"}],"comment":"x"}"#).unwrap();
        let EditsBody::Object { edits, comment } = b else {
            panic!()
        };
        assert_eq!(comment.as_deref(), Some("x"));
        let e = to_edit(&edits[0]).unwrap_err();
        assert_eq!(e.to_string(), "weight for a:1 is missing");
        assert_eq!((e.side(), e.kind()), (Side::Downstream, "missing_weight"));
        let op = EditRequest {
            op: "shout".into(),
            address: "a:1".into(),
            weight: None,
            drain: false,
        };
        assert_eq!(
            to_edit(&op).unwrap_err().to_string(),
            "unknown op \"shout\" (add, remove, drain, undrain, weight)"
        );
    }
}

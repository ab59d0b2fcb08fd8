//! Differences between two documents, as a list of [`Change`]s with JSON-pointer-like paths.
//!
//! Objects are compared key by key. Member lists (`members`, `servers`) are compared by
//! address, not by position, since their order has no meaning: the path segment of a member is
//! its address (`/key_server_pools/main/members/ks1.internal:2407/weight`), escaped as in
//! JSON Pointer (`~` → `~0`, `/` → `~1`). Other arrays are compared by index.

use crate::document::ClusterDocument;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Present only in the new document.
    Added,
    /// Present only in the old document.
    Removed,
    /// Present in both with different values.
    Modified,
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Where, e.g. `/upstreams/app/servers/10.0.0.5:8080/drain`.
    pub path: String,
    /// Added, removed or modified.
    pub kind: ChangeKind,
    /// The old value (absent when added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The new value (absent when removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

impl fmt::Display for Change {
    /// `+ path = new`, `- path (was old)`, `~ path: old -> new`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map(Value::to_string).unwrap_or_default();
        match self.kind {
            ChangeKind::Added => write!(f, "+ {} = {}", self.path, show(&self.new)),
            ChangeKind::Removed => write!(f, "- {} (was {})", self.path, show(&self.old)),
            ChangeKind::Modified => write!(f, "~ {}: {} -> {}", self.path, show(&self.old), show(&self.new)),
        }
    }
}

/// The changes that turn `old` into `new` (empty when equal), sorted by path.
pub fn diff(old: &ClusterDocument, new: &ClusterDocument) -> Vec<Change> {
    let a = serde_json::to_value(old).expect("a document always serialises");
    let b = serde_json::to_value(new).expect("a document always serialises");
    diff_values(&a, &b)
}

/// The changes that turn the JSON value `old` into `new` (the generic form behind [`diff`]).
pub fn diff_values(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", old, new, &mut out);
    out.sort_by(|x, y| x.path.cmp(&y.path));
    out
}

/// The changes as text, one per line (`(no changes)` when empty).
pub fn render(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "(no changes)\n".into();
    }
    changes.iter().map(|c| format!("{c}\n")).collect()
}

/// Escapes one path segment as JSON Pointer does.
pub fn escape_segment(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<Change>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let x: BTreeMap<&String, &Value> = x.iter().collect();
            let y: BTreeMap<&String, &Value> = y.iter().collect();
            pair_up(path, &x, &y, out);
        }
        (Value::Array(x), Value::Array(y)) => match (by_address(x), by_address(y)) {
            (Some(x), Some(y)) => pair_up(path, &x, &y, out),
            _ => {
                let x: BTreeMap<String, &Value> = x.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect();
                let y: BTreeMap<String, &Value> = y.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect();
                pair_up(path, &x, &y, out);
            }
        },
        _ => out.push(Change {
            path: if path.is_empty() { "/".into() } else { path.into() },
            kind: ChangeKind::Modified,
            old: Some(a.clone()),
            new: Some(b.clone()),
        }),
    }
}

fn pair_up<K: AsRef<str> + Ord>(path: &str, x: &BTreeMap<K, &Value>, y: &BTreeMap<K, &Value>, out: &mut Vec<Change>) {
    for (k, va) in x {
        let p = format!("{path}/{}", escape_segment(k.as_ref()));
        match y.get(k) {
            Some(vb) => walk(&p, va, vb, out),
            None => out.push(Change {
                path: p,
                kind: ChangeKind::Removed,
                old: Some((*va).clone()),
                new: None,
            }),
        }
    }
    for (k, vb) in y {
        if !x.contains_key(k) {
            let p = format!("{path}/{}", escape_segment(k.as_ref()));
            out.push(Change {
                path: p,
                kind: ChangeKind::Added,
                old: None,
                new: Some((*vb).clone()),
            });
        }
    }
}

/// A member list keyed by address, when every element is an object with a unique string
/// `address`.
fn by_address(items: &[Value]) -> Option<BTreeMap<String, &Value>> {
    let mut map = BTreeMap::new();
    for v in items {
        let addr = v.get("address")?.as_str()?;
        if map.insert(addr.to_string(), v).is_some() {
            return None;
        }
    }
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{KeyServerPool, Member, SiteSwitches};
    use serde_json::json;

    fn base() -> ClusterDocument {
        let mut d = ClusterDocument::default();
        d.key_server_pools.insert(
            "main".into(),
            KeyServerPool {
                members: vec![Member::new("ks1:2407"), Member::new("ks2:2407")],
            },
        );
        d.sites.insert(
            "example".into(),
            SiteSwitches {
                hsts: Some(true),
                ..Default::default()
            },
        );
        d
    }

    #[test]
    fn equal_documents_have_no_changes() {
        assert!(diff(&base(), &base()).is_empty());
        assert_eq!(render(&[]), "(no changes)\n");
    }

    #[test]
    fn members_are_matched_by_address_not_position() {
        let a = base();
        let mut b = base();
        let m = &mut b.key_server_pools.get_mut("main").unwrap().members;
        m.reverse();
        m[0].weight = 5; // ks2
        m.retain(|x| x.address != "ks1:2407");
        m.push(Member::new("ks3:2407"));
        let changes = diff(&a, &b);
        assert_eq!(
            changes,
            vec![
                Change {
                    path: "/key_server_pools/main/members/ks1:2407".into(),
                    kind: ChangeKind::Removed,
                    old: Some(json!({"address": "ks1:2407", "weight": 1, "drain": false})),
                    new: None,
                },
                Change {
                    path: "/key_server_pools/main/members/ks2:2407/weight".into(),
                    kind: ChangeKind::Modified,
                    old: Some(json!(1)),
                    new: Some(json!(5)),
                },
                Change {
                    path: "/key_server_pools/main/members/ks3:2407".into(),
                    kind: ChangeKind::Added,
                    old: None,
                    new: Some(json!({"address": "ks3:2407", "weight": 1, "drain": false})),
                },
            ]
        );
        let text = render(&changes);
        assert!(
            text.contains("- /key_server_pools/main/members/ks1:2407 (was {"),
            "{text}"
        );
        assert!(
            text.contains("~ /key_server_pools/main/members/ks2:2407/weight: 1 -> 5\n"),
            "{text}"
        );
        assert!(text.contains("+ /key_server_pools/main/members/ks3:2407 = {"), "{text}");
    }

    #[test]
    fn switches_and_whole_sections() {
        let a = base();
        let mut b = base();
        b.sites.get_mut("example").unwrap().hsts = None;
        b.sites.get_mut("example").unwrap().maintenance = Some(true);
        b.key_server_pools.clear();
        let changes = diff(&a, &b);
        let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].starts_with("- /key_server_pools/main (was {\"members\":["),
            "{lines:#?}"
        );
        assert_eq!(
            changes[0].old,
            Some(serde_json::to_value(&a.key_server_pools["main"]).unwrap())
        );
        assert_eq!(lines[1], "- /sites/example/hsts (was true)");
        assert_eq!(lines[2], "+ /sites/example/maintenance = true");
    }

    #[test]
    fn generic_values_escape_and_index() {
        let changes = diff_values(&json!({"a/b": [1, 2], "t~": 1}), &json!({"a/b": [1, 3, 4], "t~": "x"}));
        let paths: Vec<_> = changes.iter().map(|c| (c.path.as_str(), c.kind)).collect();
        assert_eq!(
            paths,
            vec![
                ("/a~1b/1", ChangeKind::Modified),
                ("/a~1b/2", ChangeKind::Added),
                ("/t~0", ChangeKind::Modified)
            ]
        );
        assert_eq!(diff_values(&json!(1), &json!(2))[0].path, "/");
    }
}

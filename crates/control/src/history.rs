//! [`ControlStore::history`]: the last versions, newest first, each with its diff against its
//! parent. Unreadable or invalid records are reported in [`HistoryEntry::problems`], never fatal.

use crate::diff::{diff, Change};
use crate::document::ClusterDocument;
use crate::store::{parse_record, ControlStore, Versioned};
use crate::ControlError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One line of [`ControlStore::history`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Version number.
    pub version: u64,
    /// Its parent.
    pub parent: Option<u64>,
    /// Who published it (empty when the record is unreadable).
    pub author: String,
    /// When (Unix ms; 0 when unreadable).
    pub at: u64,
    /// The author's comment.
    pub comment: Option<String>,
    /// The version it restored, for rollbacks.
    pub rollback_of: Option<u64>,
    /// What changed from the parent (from an empty document for the first version).
    pub changes: Vec<Change>,
    /// Why this record (or its parent) cannot be read or is invalid; empty when fine.
    pub problems: Vec<String>,
}

impl ControlStore {
    /// The last `limit` versions, newest first, each with its diff against its parent.
    pub async fn history(&self, limit: usize) -> Result<Vec<HistoryEntry>, ControlError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let keys = self.keys();
        let list: Vec<String> = self
            .run(redis::cmd("LRANGE").arg(keys.history()).arg(0).arg(limit - 1))
            .await?;
        let versions: Vec<u64> = list.iter().filter_map(|s| s.parse().ok()).collect();
        let mut wanted: Vec<u64> = versions.clone();
        let mut records: HashMap<u64, Result<Versioned, ControlError>> = HashMap::new();
        // Two rounds: the versions, then the parents not among them.
        for _ in 0..2 {
            wanted.retain(|v| !records.contains_key(v));
            wanted.sort_unstable();
            wanted.dedup();
            if wanted.is_empty() {
                break;
            }
            let names: Vec<String> = wanted.iter().map(|v| keys.version(*v)).collect();
            let raws: Vec<Option<String>> = self.run(redis::cmd("MGET").arg(&names)).await?;
            for ((v, name), raw) in wanted.iter().zip(&names).zip(raws) {
                let rec = match raw {
                    Some(text) => parse_record(name, *v, &text),
                    None => Err(ControlError::NotFound(*v)),
                };
                records.insert(*v, rec);
            }
            wanted = records.values().filter_map(|r| r.as_ref().ok()?.parent).collect();
        }
        let empty = ClusterDocument::default();
        Ok(versions.iter().map(|v| history_entry(*v, &records, &empty)).collect())
    }
}

/// How an unreadable record is reported in [`HistoryEntry::problems`].
fn problem(e: &ControlError) -> String {
    match e {
        // Listed in the history, but its record is gone.
        ControlError::NotFound(v) => format!("version {v} has no record"),
        e => e.to_string(),
    }
}

fn history_entry(
    v: u64,
    records: &HashMap<u64, Result<Versioned, ControlError>>,
    empty: &ClusterDocument,
) -> HistoryEntry {
    let mut e = HistoryEntry {
        version: v,
        parent: None,
        author: String::new(),
        at: 0,
        comment: None,
        rollback_of: None,
        changes: Vec::new(),
        problems: Vec::new(),
    };
    match &records[&v] {
        Err(why) => e.problems.push(problem(why)),
        Ok(r) => {
            e.parent = r.parent;
            e.author = r.author.clone();
            e.at = r.at;
            e.comment = r.comment.clone();
            e.rollback_of = r.rollback_of;
            if let Err(reasons) = r.document.validate() {
                e.problems.extend(reasons);
            }
            let base = match r.parent.map(|p| (p, records.get(&p))) {
                None => Some(empty),
                Some((_, Some(Ok(p)))) => Some(&p.document),
                Some((_, Some(Err(why)))) => {
                    e.problems.push(format!("parent: {}", problem(why)));
                    None
                }
                Some((p, None)) => {
                    e.problems.push(format!("parent version {p} was not loaded"));
                    None
                }
            };
            if let Some(base) = base {
                e.changes = diff(base, &r.document);
            }
        }
    }
    e
}

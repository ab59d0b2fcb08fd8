//! The operations behind `tlsgate ctl …`, on the store directly, taking parsed arguments.
//! Each returns structured data; the `render_*` functions give the text the CLI prints.
//!
//! Edits of one member ([`edit_member`]) are read-modify-write: they re-read and re-apply on a
//! conflict (a few times), so concurrent edits of different members both land. A whole document
//! ([`publish_json`]) replaces the current one; pass `if_version` to refuse it if someone
//! published since you read.

use crate::diff::{diff, render, Change};
use crate::document::{AccessRule, ClusterDocument, Member};
use crate::history::HistoryEntry;
use crate::store::{ControlStore, Versioned};
use crate::ControlError;
use std::fmt::Write as _;
use std::path::Path;
use tlsgate_error::{Classify, Side};

/// How many times a read-modify-write is retried after a conflict.
const RETRIES: u32 = 10;

/// `ctl show`: the current version (`None`: nothing published).
pub async fn show(store: &ControlStore) -> Result<Option<Versioned>, ControlError> {
    store.current().await
}

/// `ctl history [N]`: the last `limit` versions with their diffs.
pub async fn history(store: &ControlStore, limit: usize) -> Result<Vec<HistoryEntry>, ControlError> {
    store.history(limit).await
}

/// `ctl publish FILE`: publishes the JSON document in `path` (see [`publish_json`]).
pub async fn publish_file(
    store: &ControlStore,
    path: &Path,
    author: &str,
    comment: Option<&str>,
    if_version: Option<u64>,
) -> Result<Versioned, ControlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ControlError::Invalid(vec![format!("cannot read {}: {e}", path.display())]))?;
    publish_json(store, &text, author, comment, if_version).await
}

/// Publishes a JSON document. With `if_version`, fails with [`ControlError::Conflict`] unless
/// that is still the current version; without, it replaces whatever is current.
pub async fn publish_json(
    store: &ControlStore,
    json: &str,
    author: &str,
    comment: Option<&str>,
    if_version: Option<u64>,
) -> Result<Versioned, ControlError> {
    let doc =
        ClusterDocument::from_json(json).map_err(|e| ControlError::Invalid(vec![format!("not a document: {e}")]))?;
    let parent = match if_version {
        Some(v) => Some(v),
        None => current_or_none(store).await?,
    };
    store.publish(&doc, author, comment, parent).await
}

/// `ctl rollback N`: a new version equal to version `to`.
pub async fn rollback(
    store: &ControlStore,
    to: u64,
    author: &str,
    comment: Option<&str>,
) -> Result<Versioned, ControlError> {
    store.rollback(to, author, comment).await
}

/// Which member list an edit applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// `key_server_pools.NAME.members`.
    Pool(String),
    /// `upstreams.NAME.servers`.
    Upstream(String),
}

/// One member edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEdit {
    /// Set the weight.
    Weight(u32),
    /// Drain (true) or undrain (false).
    Drain(bool),
    /// Add a member (the group is created if absent).
    Add {
        /// Its weight.
        weight: u32,
        /// Whether it starts drained.
        drain: bool,
    },
    /// Remove the member.
    Remove,
}

/// Why a member edit cannot be applied to the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The group does not exist (only an add creates one).
    #[error("no {} {:?}", group_noun(.0), group_name(.0))]
    NoGroup(Group),
    /// An add of a member that is there already (addresses compare case-insensitively).
    #[error("{} already has {address}", group_label(.group))]
    AlreadyMember {
        /// The group.
        group: Group,
        /// The address as given.
        address: String,
    },
    /// A change or removal of a member that is not there.
    #[error("{} has no member {address}", group_label(.group))]
    NoMember {
        /// The group.
        group: Group,
        /// The address as given.
        address: String,
    },
}

impl Classify for EditError {
    /// The caller asked for something the document does not allow.
    fn side(&self) -> Side {
        Side::Downstream
    }
    fn kind(&self) -> &'static str {
        match self {
            EditError::NoGroup(_) => "no_such_group",
            EditError::AlreadyMember { .. } => "member_exists",
            EditError::NoMember { .. } => "no_such_member",
        }
    }
}

fn group_noun(group: &Group) -> &'static str {
    match group {
        Group::Pool(_) => "key-server pool",
        Group::Upstream(_) => "upstream group",
    }
}

fn group_name(group: &Group) -> &str {
    match group {
        Group::Pool(name) | Group::Upstream(name) => name,
    }
}

/// `pool "main"`, `upstream "app"`.
fn group_label(group: &Group) -> String {
    match group {
        Group::Pool(name) => format!("pool {name:?}"),
        Group::Upstream(name) => format!("upstream {name:?}"),
    }
}

/// Applies `edit` to the member `address` of `group` in `doc` (no validation: the publish
/// validates). Errors name what is missing or already there.
pub fn apply_member_edit(
    doc: &mut ClusterDocument,
    group: &Group,
    address: &str,
    edit: &MemberEdit,
) -> Result<(), EditError> {
    let adding = matches!(edit, MemberEdit::Add { .. });
    let members = match group {
        Group::Pool(name) => {
            if !adding && !doc.key_server_pools.contains_key(name) {
                return Err(EditError::NoGroup(group.clone()));
            }
            &mut doc.key_server_pools.entry(name.clone()).or_default().members
        }
        Group::Upstream(name) => {
            if !adding && !doc.upstreams.contains_key(name) {
                return Err(EditError::NoGroup(group.clone()));
            }
            &mut doc.upstreams.entry(name.clone()).or_default().servers
        }
    };
    let at = members.iter().position(|m| m.address.eq_ignore_ascii_case(address));
    match (edit, at) {
        (MemberEdit::Add { weight, drain }, None) => {
            members.push(Member {
                address: address.into(),
                weight: *weight,
                drain: *drain,
            });
        }
        (MemberEdit::Add { .. }, Some(_)) => {
            return Err(EditError::AlreadyMember {
                group: group.clone(),
                address: address.into(),
            })
        }
        (_, None) => {
            return Err(EditError::NoMember {
                group: group.clone(),
                address: address.into(),
            })
        }
        (MemberEdit::Weight(w), Some(i)) => members[i].weight = *w,
        (MemberEdit::Drain(d), Some(i)) => members[i].drain = *d,
        (MemberEdit::Remove, Some(i)) => {
            members.remove(i);
        }
    }
    Ok(())
}

/// `ctl set|add|remove …`: applies several member edits to the current document and publishes
/// them as one version (bulk edits are atomic). Returns the new version and what changed.
pub async fn edit_members(
    store: &ControlStore,
    edits: &[(Group, String, MemberEdit)],
    author: &str,
    comment: Option<&str>,
) -> Result<(Versioned, Vec<Change>), ControlError> {
    modify(store, author, comment, |doc| {
        let problems: Vec<String> = edits
            .iter()
            .filter_map(|(g, addr, e)| apply_member_edit(doc, g, addr, e).err())
            .map(|e| e.to_string())
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    })
    .await
}

/// `ctl access-rules FILE` and the console's `PUT /api/access-rules`: the document's access
/// rules become `rules` (`None`: removed, every node goes back to its TOML's `[[access_rule]]`),
/// the rest of the document unchanged; read-modify-write like [`edit_members`].
pub async fn set_access_rules(
    store: &ControlStore,
    rules: Option<Vec<AccessRule>>,
    author: &str,
    comment: Option<&str>,
) -> Result<(Versioned, Vec<Change>), ControlError> {
    modify(store, author, comment, |doc| {
        doc.access_rules = rules.clone();
        Ok(())
    })
    .await
}

/// Applies `edit` to the current document and publishes the result as the next version,
/// re-reading and re-applying after a conflict (a few times), so concurrent edits of different
/// parts both land.
async fn modify<F>(
    store: &ControlStore,
    author: &str,
    comment: Option<&str>,
    edit: F,
) -> Result<(Versioned, Vec<Change>), ControlError>
where
    F: Fn(&mut ClusterDocument) -> Result<(), Vec<String>>,
{
    let mut attempt = 0;
    loop {
        let current = store.current().await?;
        let parent = current.as_ref().map(|v| v.version);
        let before = current.map(|v| v.document).unwrap_or_default();
        let mut doc = before.clone();
        edit(&mut doc).map_err(ControlError::Invalid)?;
        match store.publish(&doc, author, comment, parent).await {
            Ok(v) => return Ok((v, diff(&before, &doc))),
            Err(ControlError::Conflict { .. }) if attempt < RETRIES => {
                attempt += 1;
                // Spread the retries of contending writers a little.
                let jitter = crate::now_ms() % 7;
                tokio::time::sleep(std::time::Duration::from_millis(u64::from(attempt) * 3 + jitter)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One member edit (see [`edit_members`]).
pub async fn edit_member(
    store: &ControlStore,
    group: Group,
    address: &str,
    edit: MemberEdit,
    author: &str,
    comment: Option<&str>,
) -> Result<(Versioned, Vec<Change>), ControlError> {
    edit_members(store, &[(group, address.to_string(), edit)], author, comment).await
}

async fn current_or_none(store: &ControlStore) -> Result<Option<u64>, ControlError> {
    match store.current_version().await {
        Ok(v) => Ok(v),
        // A garbage pointer counts as empty: publishing repairs it.
        Err(ControlError::Corrupt { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `version N (parent M) by AUTHOR at TIME: comment`.
pub fn render_header(v: &Versioned) -> String {
    let parent = v.parent.map_or_else(|| "none".into(), |p| p.to_string());
    let mut s = format!(
        "version {} (parent {parent}) by {} at {}",
        v.version,
        v.author,
        format_ms(v.at)
    );
    if let Some(r) = v.rollback_of {
        let _ = write!(s, ", rollback of {r}");
    }
    if let Some(c) = &v.comment {
        let _ = write!(s, ": {c}");
    }
    s
}

/// What `ctl show` prints: the header, then the document as pretty JSON.
pub fn render_version(v: &Versioned) -> String {
    format!("# {}\n{}\n", render_header(v), v.document.to_json_pretty())
}

/// What `ctl history` prints: one header per version, its diff indented below.
pub fn render_history(entries: &[HistoryEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let parent = e.parent.map_or_else(|| "none".into(), |p| p.to_string());
        let _ = write!(
            out,
            "version {} (parent {parent}) by {} at {}",
            e.version,
            e.author,
            format_ms(e.at)
        );
        if let Some(r) = e.rollback_of {
            let _ = write!(out, ", rollback of {r}");
        }
        if let Some(c) = &e.comment {
            let _ = write!(out, ": {c}");
        }
        out.push('\n');
        for p in &e.problems {
            let _ = writeln!(out, "  ! {p}");
        }
        for line in render(&e.changes).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// Unix ms as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn format_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_time() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_795_250_700_123), "2026-11-21T08:45:00.123Z");
        assert_eq!(format_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn member_edits() {
        let mut d = ClusterDocument::default();
        let pool = Group::Pool("main".into());
        assert_eq!(
            apply_member_edit(&mut d, &pool, "ks1:1", &MemberEdit::Weight(3)),
            Err(EditError::NoGroup(pool.clone()))
        );
        let missing = apply_member_edit(&mut d, &pool, "ks1:1", &MemberEdit::Remove).unwrap_err();
        assert_eq!(missing.to_string(), "no key-server pool \"main\"");
        assert_eq!((missing.side(), missing.kind()), (Side::Downstream, "no_such_group"));
        assert!(d.key_server_pools.is_empty());
        apply_member_edit(
            &mut d,
            &pool,
            "ks1:1",
            &MemberEdit::Add {
                weight: 2,
                drain: false,
            },
        )
        .unwrap();
        apply_member_edit(
            &mut d,
            &pool,
            "ks2:1",
            &MemberEdit::Add {
                weight: 1,
                drain: false,
            },
        )
        .unwrap();
        assert_eq!(
            apply_member_edit(
                &mut d,
                &pool,
                "KS1:1",
                &MemberEdit::Add {
                    weight: 1,
                    drain: false
                }
            )
            .unwrap_err()
            .to_string(),
            "pool \"main\" already has KS1:1"
        );
        apply_member_edit(&mut d, &pool, "ks1:1", &MemberEdit::Weight(7)).unwrap();
        apply_member_edit(&mut d, &pool, "ks2:1", &MemberEdit::Drain(true)).unwrap();
        assert_eq!(
            d.key_server_pools["main"].members,
            vec![
                Member {
                    address: "ks1:1".into(),
                    weight: 7,
                    drain: false
                },
                Member {
                    address: "ks2:1".into(),
                    weight: 1,
                    drain: true
                }
            ]
        );
        apply_member_edit(&mut d, &pool, "ks1:1", &MemberEdit::Remove).unwrap();
        assert_eq!(
            apply_member_edit(&mut d, &pool, "ks1:1", &MemberEdit::Remove)
                .unwrap_err()
                .to_string(),
            "pool \"main\" has no member ks1:1"
        );
        let up = Group::Upstream("app".into());
        assert_eq!(
            apply_member_edit(&mut d, &up, "a:1", &MemberEdit::Drain(true))
                .unwrap_err()
                .to_string(),
            "no upstream group \"app\""
        );
        apply_member_edit(
            &mut d,
            &up,
            "a:1",
            &MemberEdit::Add {
                weight: 1,
                drain: false,
            },
        )
        .unwrap();
        assert_eq!(d.upstreams["app"].servers, vec![Member::new("a:1")]);
    }
}

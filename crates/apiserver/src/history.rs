//! ControllerRevisions, the template history the DaemonSet and StatefulSet controllers keep:
//! one apps/v1 ControllerRevision per distinct template, named `<owner>-<hash>`, numbered in
//! the order the templates were in use, owned by the set.
//!
//! A revision's `data` is the patch that restores the template
//! (`{"spec": {"template": {..., "$patch": "replace"}}}`); its hash is the FNV-1a (32 bit) of
//! that data's JSON, followed by the collision count when there is one, encoded with
//! upstream's SafeEncodeString alphabet (no vowels, no look-alike digits). Equal templates
//! therefore get the same name, and a template used again gets its old revision back with a
//! new number rather than a new object.
//!
//! Orphan revisions the set's selector selects are adopted.
//!
//! Upstream: pkg/controller/history (HashControllerRevision, ControllerRevisionName,
//! NewControllerRevision, FindEqualRevisions), the sets' constructHistory and
//! pkg/controller/controller_ref_manager.go (ClaimControllerRevisions).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::controller::{
    controller_ref, owner_reference, owner_refs, terminating, with_owner_refs,
};
use crate::pv_controller::{selector_matches, str_at};
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::store::{DeleteOptions, Store};

/// The label on a set's pods and revisions naming the revision they come from.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// The characters upstream's SafeEncodeString maps bytes onto.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Owner names are cut to this length so that `<owner>-<hash>` stays a valid name.
const MAX_PREFIX: usize = 223;

/// FNV-1a, 32 bit.
fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Each byte of `s` as one character of upstream's alphabet (`bcdfghjklmnpqrstvwxz2456789`).
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// The hash of a revision's data, with the collision count when there is one.
pub fn hash_revision(data: &Value, collision_count: Option<i64>) -> String {
    let mut bytes = serde_json::to_vec(data).unwrap_or_default();
    if let Some(n) = collision_count.filter(|n| *n > 0) {
        bytes.extend_from_slice(n.to_string().as_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

/// `<prefix>-<hash>`, the prefix cut to 223 characters.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let cut: String = prefix.chars().take(MAX_PREFIX).collect();
    format!("{cut}-{hash}")
}

/// The data of a set's revision: the patch that puts its template back.
pub fn template_patch(set: &Value) -> Value {
    let mut template = set
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(m) = template.as_object_mut() {
        m.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// Whether the set's selector selects the revision's labels; an empty selector selects
/// nothing.
fn selects(set: &Value, rev: &Value) -> bool {
    set.pointer("/spec/selector")
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
        .is_some_and(|s| selector_matches(s, rev.pointer("/metadata/labels")))
}

/// A revision's number.
pub fn revision_number(rev: &Value) -> i64 {
    rev.get("revision").and_then(Value::as_i64).unwrap_or(0)
}

/// What [`construct_history`] found or made.
pub struct History {
    /// The set's revisions, oldest number first, with the update revision among them.
    pub revisions: Vec<Arc<Value>>,
    /// The revision of the set's current template.
    pub update: Arc<Value>,
    /// The set's collision count, raised when a revision name was taken by other data.
    pub collision_count: i64,
}

/// The revisions a set owns, with the one for its current template found (renumbered to be
/// the newest) or created. `kind` is the set's kind; `labels` go on a new revision besides
/// its hash label, and the set's annotations too.
pub fn construct_history(
    store: &Store,
    revisions: &'static ResourceInfo,
    set: &Value,
    kind: &str,
    labels: &Map<String, Value>,
) -> Result<History, ApiError> {
    let ns = str_at(set, "/metadata/namespace");
    let uid = str_at(set, "/metadata/uid");
    let mut owned: Vec<Arc<Value>> = Vec::new();
    for rev in store.list(revisions, Some(ns)).0 {
        match controller_ref(&rev) {
            Some(c) if str_at(c, "/uid") == uid => owned.push(rev),
            // An orphan the set's selector selects is adopted (upstream's
            // ClaimControllerRevisions), so that a set made again after an orphaning delete
            // finds its old revisions and its pods stay current.
            None if !terminating(set) && selects(set, &rev) => {
                let name = str_at(&rev, "/metadata/name");
                let adopted = store.update(revisions, ns, name, false, |cur| {
                    if controller_ref(cur).is_some() {
                        return Err(ApiError::conflict(revisions, name, "adopted meanwhile"));
                    }
                    let mut refs = owner_refs(cur);
                    refs.push(owner_reference(set, "apps/v1", kind));
                    Ok(with_owner_refs(cur, refs))
                });
                if let Ok(rev) = adopted {
                    owned.push(rev);
                }
            }
            _ => {}
        }
    }
    owned.sort_by_key(|r| revision_number(r));
    let data = template_patch(set);
    let mut collision_count = set
        .pointer("/status/collisionCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let max = owned.last().map_or(0, |r| revision_number(r));
    let equal = owned.iter().rev().find(|r| r.get("data") == Some(&data));
    let update = match equal {
        Some(rev) if revision_number(rev) == max => rev.clone(),
        Some(rev) => {
            // The template went back to an older one: that revision becomes the newest.
            let name = str_at(rev, "/metadata/name").to_string();
            let renumbered = store.update(revisions, ns, &name, false, |cur| {
                let mut new = cur.clone();
                new["revision"] = json!(max + 1);
                Ok(new)
            })?;
            owned.retain(|r| str_at(r, "/metadata/name") != name);
            owned.push(renumbered.clone());
            renumbered
        }
        None => loop {
            let hash = hash_revision(&data, Some(collision_count));
            let mut rev_labels = labels.clone();
            rev_labels.insert(CONTROLLER_REVISION_HASH.into(), json!(hash));
            let mut rev = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": revision_name(str_at(set, "/metadata/name"), &hash),
                             "namespace": ns, "labels": rev_labels,
                             "ownerReferences": [owner_reference(set, "apps/v1", kind)]},
                "data": data, "revision": max + 1});
            // The set's annotations are copied, as upstream's NewControllerRevision does.
            if let Some(a) = set
                .pointer("/metadata/annotations")
                .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
            {
                rev["metadata"]["annotations"] = a.clone();
            }
            match store.create(revisions, ns, rev, false) {
                Ok(created) => {
                    owned.push(created.clone());
                    break created;
                }
                Err(e) if e.code == 409 => {
                    let name = revision_name(str_at(set, "/metadata/name"), &hash);
                    match store.get(revisions, ns, &name) {
                        // Ours with the same data (made by an earlier sync): use it.
                        Some(cur)
                            if cur.get("data") == Some(&data)
                                && controller_ref(&cur)
                                    .is_some_and(|c| str_at(c, "/uid") == uid) =>
                        {
                            break cur;
                        }
                        // Someone else's, or other data: try the next name.
                        _ => collision_count += 1,
                    }
                    if collision_count > 1000 {
                        return Err(ApiError::internal(
                            "controller revision names keep colliding",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        },
    };
    Ok(History {
        revisions: owned,
        update,
        collision_count,
    })
}

/// Deletes the oldest revisions beyond `spec.revisionHistoryLimit` (default 10), sparing
/// those named in `live` (the revisions in use).
pub fn truncate_history(
    store: &Store,
    revisions: &'static ResourceInfo,
    set: &Value,
    history: &[Arc<Value>],
    live: &[&str],
) {
    let limit = set
        .pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_i64)
        .unwrap_or(10)
        .max(0);
    let old: Vec<&Arc<Value>> = history
        .iter()
        .filter(|r| !live.contains(&str_at(r, "/metadata/name")))
        .collect();
    let surplus = old
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    for rev in old.into_iter().take(surplus) {
        let name = str_at(rev, "/metadata/name");
        let opts = DeleteOptions {
            uid: Some(str_at(rev, "/metadata/uid")),
            ..DeleteOptions::default()
        };
        if let Err(e) = store.delete(revisions, str_at(rev, "/metadata/namespace"), name, opts) {
            tracing::debug!(revision = %name, error = %e.message, "old revision not deleted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn safe_encode_uses_no_vowels_and_no_look_alike_digits() {
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        assert!(hash_revision(&json!({"a": 1}), None)
            .bytes()
            .all(|b| ALPHANUMS.contains(&b)));
    }

    #[test]
    fn collision_count_changes_the_hash_and_zero_is_no_count() {
        let data = json!({"spec": {"template": {}}});
        assert_eq!(hash_revision(&data, Some(0)), hash_revision(&data, None));
        assert_ne!(hash_revision(&data, Some(1)), hash_revision(&data, None));
    }

    #[test]
    fn revision_name_cuts_long_prefixes() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        assert_eq!(revision_name(&"x".repeat(300), "abc").len(), 223 + 4);
    }
}

//! The garbage collector stand-in: deletes objects whose owners are gone, through their
//! `ownerReferences`, as kube-controller-manager's does. On under `up` and
//! `--simulate-kubelets`.
//!
//! - An object none of whose owners exists any more (no object of that kind, name and uid)
//!   is deleted as a client would delete it (pods gracefully); one with an owner left loses
//!   the references to the owners that are gone. This is background cascading deletion, the
//!   default: the owner goes at once, its dependents after it.
//! - An owner being deleted with the `orphan` finalizer (`propagationPolicy=Orphan`) has its
//!   references removed from its dependents, then the finalizer removed, which lets it go.
//! - An owner being deleted with the `foregroundDeletion` finalizer
//!   (`propagationPolicy=Foreground`) has its dependents deleted; the finalizer is removed
//!   once no dependent with `blockOwnerDeletion` is left.
//!
//! It reads the store's event stream in-process and, at start and when it falls behind,
//! looks at every stored object (what was missed, such as owners deleted while it was not
//! running, is found then). It writes through [`Store::update`] and [`Store::delete`].
//!
//! Upstream: pkg/controller/garbagecollector (attemptToDeleteItem, orphanDependents,
//! processDeletingDependentsItem); the finalizers are those of
//! staging/src/k8s.io/apimachinery/pkg/apis/meta/v1 (`FinalizerOrphanDependents`,
//! `FinalizerDeleteDependents`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::store::RecvError;
use serde_json::Value;

use crate::pv_controller::str_at;
use crate::resources::{ResourceInfo, RESOURCES};
use crate::store::{DeleteOptions, EventType, Store};

/// The finalizer that has the garbage collector orphan an owner's dependents.
pub const FINALIZER_ORPHAN: &str = "orphan";

/// The finalizer that has the garbage collector delete an owner's dependents before it.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// Each stored resource once (two served resources may share a storage key). Events are
/// left out: nothing here makes them owners or dependents, and they are most of the writes.
fn stored() -> impl Iterator<Item = &'static ResourceInfo> {
    RESOURCES
        .iter()
        .enumerate()
        .filter(|(_, r)| r.storage != "events")
        .filter(|(i, r)| {
            !RESOURCES
                .iter()
                .take(*i)
                .any(|earlier| earlier.storage == r.storage)
        })
        .map(|(_, r)| r)
}

/// The served resource of an owner reference's `apiVersion` and `kind`.
fn resource_of(reference: &Value) -> Option<&'static ResourceInfo> {
    let api_version = str_at(reference, "/apiVersion");
    let kind = str_at(reference, "/kind");
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

fn owner_refs(obj: &Value) -> &[Value] {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether the object is being deleted and carries `finalizer`.
pub fn deleting_with(obj: &Value, finalizer: &str) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
        && obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

fn references(dependent: &Value, owner_uid: &str) -> bool {
    owner_refs(dependent)
        .iter()
        .any(|r| str_at(r, "/uid") == owner_uid)
}

/// Where a dependent is stored: storage key, namespace, name.
type ObjectKey = (&'static str, String, String);

struct GarbageCollector {
    store: Arc<Store>,
    /// Who references whom, kept from the event stream so that an owner's deletion does not
    /// read every object in its namespace (upstream's dependency graph, reduced to what
    /// deletion needs).
    dependents: Mutex<Index>,
}

/// The owner references of the stored objects, both ways.
#[derive(Default)]
struct Index {
    /// Owner uid → the objects that reference it.
    dependents: HashMap<String, BTreeSet<ObjectKey>>,
    /// Object → the owner uids it references.
    owners: HashMap<ObjectKey, Vec<String>>,
}

impl GarbageCollector {
    /// Whether the owner a reference names exists (same uid). An owner of a kind this
    /// server does not serve counts as existing: nothing is deleted on a guess.
    fn owner_exists(&self, dependent: &Value, reference: &Value) -> bool {
        let Some(info) = resource_of(reference) else {
            return true;
        };
        let ns = if info.namespaced {
            str_at(dependent, "/metadata/namespace")
        } else {
            ""
        };
        self.store
            .get(info, ns, str_at(reference, "/name"))
            .is_some_and(|o| str_at(&o, "/metadata/uid") == str_at(reference, "/uid"))
    }

    /// Deletes a dependent whose owners are all gone, or removes the references to the
    /// owners that are gone when some are left (upstream's attemptToDeleteItem).
    fn attempt_to_delete(&self, info: &ResourceInfo, dependent: &Value) {
        let refs = owner_refs(dependent);
        if refs.is_empty() || dependent.pointer("/metadata/deletionTimestamp").is_some() {
            return;
        }
        let dangling: Vec<&str> = refs
            .iter()
            .filter(|r| !self.owner_exists(dependent, r))
            .map(|r| str_at(r, "/uid"))
            .collect();
        if dangling.is_empty() {
            return;
        }
        let (ns, name, uid) = (
            str_at(dependent, "/metadata/namespace"),
            str_at(dependent, "/metadata/name"),
            str_at(dependent, "/metadata/uid"),
        );
        if dangling.len() == refs.len() {
            let opts = DeleteOptions {
                uid: Some(uid),
                ..DeleteOptions::default()
            };
            if let Err(e) = self.store.delete(info, ns, name, opts) {
                tracing::debug!(object = %name, error = %e.message,
                    "garbage collector: dependent not deleted");
            }
        } else {
            self.remove_references(info, dependent, &dangling);
        }
    }

    fn remove_references(&self, info: &ResourceInfo, dependent: &Value, owner_uids: &[&str]) {
        let (ns, name, uid) = (
            str_at(dependent, "/metadata/namespace"),
            str_at(dependent, "/metadata/name"),
            str_at(dependent, "/metadata/uid"),
        );
        let removed = self.store.update(info, ns, name, false, |cur| {
            let mut new = cur.clone();
            if str_at(cur, "/metadata/uid") != uid {
                return Ok(new);
            }
            let refs: Vec<Value> = owner_refs(cur)
                .iter()
                .filter(|r| !owner_uids.contains(&str_at(r, "/uid")))
                .cloned()
                .collect();
            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                if refs.is_empty() {
                    m.remove("ownerReferences");
                } else {
                    m.insert("ownerReferences".into(), Value::Array(refs));
                }
            }
            Ok(new)
        });
        if let Err(e) = removed {
            tracing::debug!(object = %name, error = %e.message,
                "garbage collector: owner references not removed");
        }
    }

    /// Records which owners an object references now (none once it is `gone`).
    fn index(&self, storage: &'static str, obj: &Value, gone: bool) {
        let key: ObjectKey = (
            storage,
            str_at(obj, "/metadata/namespace").to_string(),
            str_at(obj, "/metadata/name").to_string(),
        );
        let Ok(mut index) = self.dependents.lock() else {
            return;
        };
        for uid in index.owners.remove(&key).unwrap_or_default() {
            if let Some(set) = index.dependents.get_mut(&uid) {
                set.remove(&key);
                if set.is_empty() {
                    index.dependents.remove(&uid);
                }
            }
        }
        let uids: Vec<String> = owner_refs(obj)
            .iter()
            .map(|r| str_at(r, "/uid").to_string())
            .collect();
        if gone || uids.is_empty() {
            return;
        }
        for uid in &uids {
            index
                .dependents
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
        }
        index.owners.insert(key, uids);
    }

    /// The objects that reference `owner`, with their resource.
    fn dependents(&self, owner: &Value) -> Vec<(&'static ResourceInfo, Arc<Value>)> {
        let uid = str_at(owner, "/metadata/uid");
        let keys: Vec<ObjectKey> = match self.dependents.lock() {
            Ok(index) => index
                .dependents
                .get(uid)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            Err(_) => return Vec::new(),
        };
        keys.into_iter()
            .filter_map(|(storage, ns, name)| {
                let info = stored().find(|r| r.storage == storage)?;
                let obj = self.store.get(info, &ns, &name)?;
                references(&obj, uid).then_some((info, obj))
            })
            .collect()
    }

    fn remove_finalizer(&self, info: &ResourceInfo, owner: &Value, finalizer: &str) {
        let (ns, name, uid) = (
            str_at(owner, "/metadata/namespace"),
            str_at(owner, "/metadata/name"),
            str_at(owner, "/metadata/uid"),
        );
        let removed = self.store.update(info, ns, name, false, |cur| {
            let mut new = cur.clone();
            if str_at(cur, "/metadata/uid") != uid {
                return Ok(new);
            }
            if let Some(f) = new
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                f.retain(|x| x != finalizer);
            }
            Ok(new)
        });
        if let Err(e) = removed {
            tracing::debug!(object = %name, error = %e.message,
                "garbage collector: finalizer not removed");
        }
    }

    /// An owner being deleted: its dependents orphaned or deleted as its finalizers ask.
    fn deleting_owner(&self, info: &ResourceInfo, owner: &Value) {
        let uid = str_at(owner, "/metadata/uid");
        if deleting_with(owner, FINALIZER_ORPHAN) {
            for (dep_info, dep) in self.dependents(owner) {
                self.remove_references(dep_info, &dep, &[uid]);
            }
            self.remove_finalizer(info, owner, FINALIZER_ORPHAN);
        } else if deleting_with(owner, FINALIZER_FOREGROUND) {
            let mut blocking = 0;
            for (dep_info, dep) in self.dependents(owner) {
                let blocks = owner_refs(&dep).iter().any(|r| {
                    str_at(r, "/uid") == uid
                        && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                });
                if blocks {
                    blocking += 1;
                }
                if dep.pointer("/metadata/deletionTimestamp").is_none() {
                    let opts = DeleteOptions {
                        uid: Some(str_at(&dep, "/metadata/uid")),
                        ..DeleteOptions::default()
                    };
                    let name = str_at(&dep, "/metadata/name");
                    let ns = str_at(&dep, "/metadata/namespace");
                    if let Err(e) = self.store.delete(dep_info, ns, name, opts) {
                        tracing::debug!(object = %name, error = %e.message,
                            "garbage collector: dependent not deleted");
                    }
                }
            }
            if blocking == 0 {
                self.remove_finalizer(info, owner, FINALIZER_FOREGROUND);
            }
        }
    }

    /// Every stored object looked at: dependents of owners that are gone, owners being
    /// deleted.
    fn resync(&self) {
        let all: Vec<(&'static ResourceInfo, Arc<Value>)> = stored()
            .flat_map(|info| {
                self.store
                    .list(info, None)
                    .0
                    .into_iter()
                    .map(move |o| (info, o))
            })
            .collect();
        if let Ok(mut index) = self.dependents.lock() {
            *index = Index::default();
        }
        for (info, obj) in &all {
            self.index(info.storage, obj, false);
        }
        for (info, obj) in &all {
            self.object(info, obj);
        }
    }

    fn object(&self, info: &ResourceInfo, obj: &Value) {
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            self.deleting_owner(info, obj);
        } else {
            self.attempt_to_delete(info, obj);
        }
    }

    /// An object is gone: its dependents may have no owner left, and the owners it blocked
    /// in a foreground deletion may go.
    fn deleted(&self, obj: &Value) {
        for (info, dep) in self.dependents(obj) {
            self.attempt_to_delete(info, &dep);
        }
        let owners: BTreeSet<(String, String, String)> = owner_refs(obj)
            .iter()
            .map(|r| {
                (
                    str_at(r, "/apiVersion").to_string(),
                    str_at(r, "/kind").to_string(),
                    str_at(r, "/name").to_string(),
                )
            })
            .collect();
        for (api_version, kind, name) in owners {
            let Some(info) = RESOURCES
                .iter()
                .find(|r| r.kind == kind && r.api_version() == api_version)
            else {
                continue;
            };
            let ns = if info.namespaced {
                str_at(obj, "/metadata/namespace")
            } else {
                ""
            };
            if let Some(owner) = self.store.get(info, ns, &name) {
                if deleting_with(&owner, FINALIZER_FOREGROUND) {
                    self.deleting_owner(info, &owner);
                }
            }
        }
    }
}

/// Runs the garbage collector until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let gc = GarbageCollector {
        store,
        dependents: Mutex::new(Index::default()),
    };
    let Some(first) = stored().next() else {
        return;
    };
    loop {
        // Subscribe first, then look at everything: nothing written in between is missed.
        let Ok(start) = gc.store.watch_all(first.storage, None) else {
            return;
        };
        let mut live = start.live;
        gc.resync();
        loop {
            let ev = match live.recv().await {
                Ok(ev) => ev,
                // Fell behind: look at everything again.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            };
            let Some(info) = stored().find(|r| r.storage == ev.storage) else {
                continue;
            };
            let obj = ev.object();
            let gone = ev.kind == EventType::Deleted;
            gc.index(info.storage, &obj, gone);
            if gone {
                gc.deleted(&obj);
            } else if let Some(current) = crate::pv_controller::current(&gc.store, info, &obj) {
                gc.object(info, &current);
            }
        }
    }
}

//! What the workload controller stand-ins share: controller references, pod readiness and
//! availability as upstream's controllers judge them, pods made from an owner's template,
//! and the loop that drives each of them ([`run`] over a [`Reconcile`]).
//!
//! The loop reads the store's event stream in-process: it subscribes, then syncs every owner
//! (and again from a fresh list whenever it falls behind the stream); the events already
//! there are taken together (up to [`COALESCE`]), so that an owner whose pods changed many
//! times (its own burst of creates) is synced once for all of them; and an owner whose sync
//! asked to be looked at again after some time (a pod ready but not yet available, a
//! progress deadline) is synced then without an event.
//!
//! Upstream: pkg/controller/controller_utils.go and pkg/api/v1/pod (IsPodReady,
//! IsPodAvailable).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::store::RecvError;
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::meta;
use crate::pv_controller::{selector_matches, str_at};
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::store::{Store, WatchEvent};

/// The controller reference of an object: its `ownerReferences` entry with
/// `controller: true`.
pub fn controller_ref(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The controller reference an owner's dependents carry: the owner's `apiVersion`, `kind`,
/// name and uid, with `controller` and `blockOwnerDeletion`.
pub fn owner_reference(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
           "name": str_at(owner, "/metadata/name"), "uid": str_at(owner, "/metadata/uid"),
           "controller": true, "blockOwnerDeletion": true})
}

pub fn terminating(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

/// Active: not terminating, not Succeeded or Failed (upstream's IsPodActive).
pub fn is_active(pod: &Value) -> bool {
    !terminating(pod) && !matches!(str_at(pod, "/status/phase"), "Succeeded" | "Failed")
}

pub fn ready_condition(pod: &Value) -> Option<&Value> {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == "Ready")
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Value) -> bool {
    ready_condition(pod).is_some_and(|c| str_at(c, "/status") == "True")
}

/// Seconds the pod has been ready (from the Ready condition's `lastTransitionTime`), if it
/// is ready.
pub fn ready_for(pod: &Value) -> Option<i64> {
    let c = ready_condition(pod).filter(|c| str_at(c, "/status") == "True")?;
    Some(meta::age_seconds(str_at(c, "/lastTransitionTime")).unwrap_or(0))
}

/// Whether the pod has been ready for `min_ready_seconds` (upstream's IsPodAvailable).
pub fn is_available(pod: &Value, min_ready_seconds: i64) -> bool {
    match ready_for(pod) {
        Some(_) if min_ready_seconds <= 0 => true,
        Some(secs) => secs >= min_ready_seconds,
        None => false,
    }
}

/// The pod an owner makes from its `spec.template`, named by `generateName: <owner>-` and
/// carrying `owner_ref` (from [`owner_reference`]); the template's labels, annotations and
/// finalizers are kept.
pub fn pod_from_template(owner: &Value, owner_ref: Value) -> Value {
    let template = owner
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut metadata = Map::new();
    metadata.insert(
        "generateName".into(),
        json!(format!("{}-", str_at(owner, "/metadata/name"))),
    );
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")) {
            if !v.is_null() {
                metadata.insert(field.into(), v.clone());
            }
        }
    }
    metadata.insert("ownerReferences".into(), json!([owner_ref]));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
           "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

/// The object with its `ownerReferences` replaced (removed when `refs` is empty).
pub fn with_owner_refs(pod: &Value, refs: Vec<Value>) -> Value {
    let mut new = pod.clone();
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if refs.is_empty() {
            m.remove("ownerReferences");
        } else {
            m.insert("ownerReferences".into(), Value::Array(refs));
        }
    }
    new
}

/// An object's `ownerReferences`.
pub fn owner_refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// An owner's namespace and name.
pub type Key = (String, String);

/// Events taken together at most before the owners they concern are synced.
pub const COALESCE: usize = 1024;

/// The key of an object: its namespace and name.
pub fn key_of(obj: &Value) -> Key {
    (
        str_at(obj, "/metadata/namespace").to_string(),
        str_at(obj, "/metadata/name").to_string(),
    )
}

/// One workload controller, as [`run`] drives it.
pub trait Reconcile {
    /// The owners' resource; the loop's watch starts from it.
    fn owners(&self) -> &'static ResourceInfo;

    /// Every owner to sync: at start, and after falling behind the event stream.
    fn relist(&self) -> Vec<Key>;

    /// Adds to `keys` the owners a write concerns.
    fn keys_of(&self, ev: &WatchEvent, keys: &mut BTreeSet<Key>);

    /// Brings one owner to its spec and writes its status. Returns when to look at it again
    /// without an event, if ever.
    fn sync(&self, ns: &str, name: &str) -> Option<Duration>;
}

/// Runs a controller until the store's event stream closes.
pub async fn run(store: &Store, c: &impl Reconcile) {
    // Owners to look at again, by when.
    let mut later: BTreeMap<Key, Instant> = BTreeMap::new();
    let sync = |later: &mut BTreeMap<Key, Instant>, key: Key| match c.sync(&key.0, &key.1) {
        Some(after) => {
            later.insert(key, Instant::now() + after);
        }
        None => {
            later.remove(&key);
        }
    };
    loop {
        // Subscribe first, then list: nothing written in between is missed.
        let Ok(start) = store.watch_all(c.owners().storage, None) else {
            return;
        };
        let mut live = start.live;
        for key in c.relist() {
            sync(&mut later, key);
        }
        'watch: loop {
            let next = later.values().min().copied();
            let ev = tokio::select! {
                ev = live.recv() => ev,
                () = sleep_until(next) => {
                    let now = Instant::now();
                    let due: Vec<Key> = later
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in due {
                        later.remove(&key);
                        sync(&mut later, key);
                    }
                    continue;
                }
            };
            let mut keys: BTreeSet<Key> = BTreeSet::new();
            let mut next = Some(ev);
            let mut taken = 0;
            while let Some(ev) = next.take() {
                let ev = match ev {
                    Ok(ev) => ev,
                    // Fell behind: relist.
                    Err(RecvError::Lagged) => break 'watch,
                    Err(RecvError::Closed) => return,
                };
                c.keys_of(&ev, &mut keys);
                taken += 1;
                if taken < COALESCE {
                    // A zero timeout polls once: an event that is ready now, or none.
                    next = tokio::time::timeout(Duration::ZERO, live.recv()).await.ok();
                }
            }
            for key in keys {
                sync(&mut later, key);
            }
        }
    }
}

/// [`Store::update`] of an object a controller read, unless it was deleted and made again
/// since (it has another uid now): the write is about the object that was read.
pub fn update_same(
    store: &Store,
    info: &'static ResourceInfo,
    ns: &str,
    name: &str,
    uid: &str,
    f: impl FnOnce(&Value) -> Result<Value, ApiError>,
) -> Result<Arc<Value>, ApiError> {
    store.update(info, ns, name, false, |cur| {
        if str_at(cur, "/metadata/uid") != uid {
            return Err(ApiError::conflict(info, name, "the object was recreated"));
        }
        f(cur)
    })
}

/// How long until the first of `pods` that is ready, but not yet for the owner's
/// `spec.minReadySeconds`, becomes available; None when no pod is waiting for that.
pub fn until_available<'a>(
    owner: &Value,
    pods: impl IntoIterator<Item = &'a Value>,
) -> Option<Duration> {
    let min_ready = owner
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    pods.into_iter()
        .filter_map(ready_for)
        .filter(|secs| *secs < min_ready)
        .map(|secs| Duration::from_secs((min_ready - secs).unsigned_abs()))
        .min()
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The pods in the owner's namespace it controls, after adopting the orphans its
/// `spec.selector` selects and `accepts` takes (the controller reference is added) and
/// releasing its own the selector no longer selects (the reference is removed). A
/// terminating owner adopts nothing; terminating pods are neither adopted nor released. An
/// empty or missing selector selects nothing (validation refuses one).
///
/// Upstream: pkg/controller/controller_ref_manager.go (PodControllerRefManager.ClaimPods).
pub fn claim_pods(
    store: &Store,
    pods: &'static ResourceInfo,
    owner: &Value,
    kind: &str,
    accepts: impl Fn(&Value) -> bool,
) -> Vec<Arc<Value>> {
    let ns = str_at(owner, "/metadata/namespace");
    let uid = str_at(owner, "/metadata/uid");
    let selects = |pod: &Value| {
        owner
            .pointer("/spec/selector")
            .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            .is_some_and(|s| selector_matches(s, pod.pointer("/metadata/labels")))
    };
    let mut owned = Vec::new();
    for pod in store.list(pods, Some(ns)).0 {
        let name = str_at(&pod, "/metadata/name");
        match controller_ref(&pod).map(|r| str_at(r, "/uid") == uid) {
            Some(true) if terminating(&pod) || (selects(&pod) && accepts(&pod)) => {
                owned.push(pod);
            }
            Some(true) => {
                let released = store.update(pods, ns, name, false, |cur| {
                    let refs = owner_refs(cur)
                        .into_iter()
                        .filter(|r| str_at(r, "/uid") != uid)
                        .collect();
                    Ok(with_owner_refs(cur, refs))
                });
                if let Err(e) = released {
                    tracing::debug!(pod = %name, error = %e.message, "pod not released");
                }
            }
            None if !terminating(owner) && !terminating(&pod) && selects(&pod) && accepts(&pod) => {
                let pod_uid = str_at(&pod, "/metadata/uid");
                let adopted = store.update(pods, ns, name, false, |cur| {
                    if str_at(cur, "/metadata/uid") != pod_uid
                        || controller_ref(cur).is_some()
                        || terminating(cur)
                    {
                        return Err(ApiError::conflict(pods, name, "the pod changed"));
                    }
                    let mut refs = owner_refs(cur);
                    refs.push(owner_reference(owner, "apps/v1", kind));
                    Ok(with_owner_refs(cur, refs))
                });
                match adopted {
                    Ok(pod) => owned.push(pod),
                    Err(e) => tracing::debug!(pod = %name, error = %e.message, "pod not adopted"),
                }
            }
            _ => {}
        }
    }
    owned
}

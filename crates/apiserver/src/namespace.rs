//! The namespace controller's part: a deleted namespace is marked Terminating by the store;
//! this task deletes what is in it and removes the namespace once it is empty, as
//! kube-controller-manager's namespace controller does. Always on: without it a deleted
//! namespace would stay Terminating.
//!
//! Upstream: pkg/controller/namespace. Pods in the namespace are deleted gracefully, so with
//! bound pods and no kubelet (stand-in) the namespace stays Terminating until they are gone,
//! as on a cluster whose kubelets are down.
//!
//! It reads the store's event stream in-process (relisting when it falls behind). The content
//! is deleted once when the namespace is seen terminating; after that, each deletion in it
//! only re-checks whether it is empty (no new content can appear: creates there are refused).

use std::collections::HashSet;
use std::sync::Arc;

use crate::store::RecvError;
use serde_json::Value;

use crate::store::{EventType, Store};

fn terminating(ns: &Value) -> bool {
    ns.pointer("/metadata/deletionTimestamp").is_some()
}

fn meta<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Runs the namespace controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    loop {
        // Subscribe first, then list: nothing written in between is missed.
        let Ok(start) = store.watch_all("namespaces", None) else {
            return;
        };
        let mut live = start.live;
        // Namespaces being terminated, by name.
        let mut pending: HashSet<String> = HashSet::new();
        let initial = start.initial.iter().map(crate::store::decode);
        for ns in initial.filter(|n| terminating(n)) {
            finalize(&store, &mut pending, meta(&ns, "name"));
        }
        loop {
            match live.recv().await {
                Ok(ev) if ev.storage == "namespaces" => {
                    let obj = ev.object();
                    let name = meta(&obj, "name");
                    if ev.kind == EventType::Deleted {
                        pending.remove(name);
                    } else if terminating(&obj) {
                        finalize(&store, &mut pending, name);
                    }
                }
                Ok(ev) if ev.kind == EventType::Deleted && !pending.is_empty() => {
                    let ns = ev.attrs.namespace();
                    if pending.contains(ns) && store.remove_namespace_if_empty(ns) {
                        pending.remove(ns);
                    }
                }
                Ok(_) => {}
                // Fell behind: relist.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            }
        }
    }
}

/// Deletes the content of a terminating namespace and removes it if that emptied it;
/// otherwise remembers it until its last object goes.
fn finalize(store: &Store, pending: &mut HashSet<String>, name: &str) {
    match store.finalize_namespace(name) {
        Ok(true) => {
            pending.remove(name);
        }
        Ok(false) => {
            pending.insert(name.to_string());
        }
        Err(e) => {
            tracing::warn!(namespace = %name, error = %e.message, "deleting the namespace's content failed");
            pending.insert(name.to_string());
        }
    }
}

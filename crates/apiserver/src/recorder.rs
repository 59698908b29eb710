//! Events the in-server controllers record about the objects they act on, as client-go's
//! event recorder writes them (core/v1 Events, so `kubectl describe` and `kubectl get events`
//! show them): one Event per object, reason and message, its `count` and `lastTimestamp`
//! raised when the same one is recorded again.
//!
//! Upstream: client-go tools/record (EventRecorder, the correlator's aggregation by
//! object, reason and message).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::meta;
use crate::resources::{self, ResourceInfo};
use crate::store::Store;

/// Events remembered for counting at most; past it the memory starts over (a repeat of a
/// forgotten one starts a new Event, as after client-go's bounded cache evicts it).
const REMEMBERED: usize = 4096;

/// What makes two Events the same one: the object's uid, the reason and the message.
type EventKey = (String, String, String);

/// Records Events from one component.
pub(crate) struct Recorder {
    store: Arc<Store>,
    events: &'static ResourceInfo,
    /// `source.component` (and `reportingComponent`).
    component: String,
    /// The Event's namespace and name for each key recorded.
    seen: Mutex<HashMap<EventKey, (String, String)>>,
}

fn str_at<'a>(obj: &'a Value, p: &str) -> &'a str {
    obj.pointer(p).and_then(Value::as_str).unwrap_or("")
}

impl Recorder {
    pub(crate) fn new(store: Arc<Store>, component: impl Into<String>) -> Option<Self> {
        Some(Recorder {
            store,
            events: resources::lookup("", "v1", "events")?,
            component: component.into(),
            seen: Mutex::new(HashMap::new()),
        })
    }

    /// Records an event (`kind` Normal or Warning) about an object of `object_kind`;
    /// the event names the object's own `apiVersion` (`v1` when it has none).
    pub(crate) fn event(
        &self,
        object: &Value,
        object_kind: &str,
        kind: &str,
        reason: &str,
        message: &str,
    ) {
        // Events about cluster-scoped objects (nodes) live in `default`, as upstream's do.
        let object_ns = str_at(object, "/metadata/namespace");
        let ns = if object_ns.is_empty() {
            "default"
        } else {
            object_ns
        };
        let key: EventKey = (
            str_at(object, "/metadata/uid").to_string(),
            reason.to_string(),
            message.to_string(),
        );
        let now = meta::now_rfc3339();
        let known = self.seen.lock().ok().and_then(|s| s.get(&key).cloned());
        if let Some((ns, name)) = known {
            let bumped = self.store.update(self.events, &ns, &name, false, |cur| {
                let mut new = cur.clone();
                let count = cur.get("count").and_then(Value::as_i64).unwrap_or(1);
                if let Some(m) = new.as_object_mut() {
                    m.insert("count".into(), json!(count + 1));
                    m.insert("lastTimestamp".into(), json!(now));
                }
                Ok(new)
            });
            if bumped.is_ok() {
                return;
            }
        }
        let name = format!(
            "{}.{:x}",
            str_at(object, "/metadata/name"),
            meta::unix_nanos()
        );
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "kind": object_kind,
                "namespace": object_ns,
                "name": str_at(object, "/metadata/name"),
                "uid": str_at(object, "/metadata/uid"),
                "apiVersion": match str_at(object, "/apiVersion") {
                    "" => "v1",
                    v => v,
                },
                "resourceVersion": str_at(object, "/metadata/resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "source": {"component": self.component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": kind,
            "eventTime": null,
            "reportingComponent": self.component,
            "reportingInstance": "",
        });
        match self.store.create(self.events, ns, event, false) {
            Ok(_) => {
                if let Ok(mut seen) = self.seen.lock() {
                    if seen.len() >= REMEMBERED {
                        seen.clear();
                    }
                    seen.insert(key, (ns.to_string(), name));
                }
            }
            Err(e) => {
                tracing::debug!(reason, error = %e.message, "event not recorded");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_event_again_raises_the_count_of_one_event() {
        let store = Arc::new(Store::new(64));
        let namespaces = resources::lookup("", "v1", "namespaces").expect("served");
        store
            .create(namespaces, "", json!({"metadata": {"name": "ns"}}), false)
            .expect("namespace");
        let recorder = Recorder::new(store.clone(), "tester").expect("events served");
        let claim = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u1"}});
        recorder.event(&claim, "PersistentVolumeClaim", "Normal", "Waiting", "m");
        recorder.event(&claim, "PersistentVolumeClaim", "Normal", "Waiting", "m");
        recorder.event(&claim, "PersistentVolumeClaim", "Warning", "Other", "m");
        let (events, _) = store.list(recorder.events, Some("ns"));
        let mut got: Vec<(String, i64, String)> = events
            .iter()
            .map(|e| {
                (
                    str_at(e, "/reason").to_string(),
                    e.get("count").and_then(Value::as_i64).unwrap_or(0),
                    str_at(e, "/source/component").to_string(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("Other".to_string(), 1, "tester".to_string()),
                ("Waiting".to_string(), 2, "tester".to_string())
            ]
        );
    }

    #[test]
    fn an_event_names_the_api_version_of_its_object() {
        let store = Arc::new(Store::new(64));
        let namespaces = resources::lookup("", "v1", "namespaces").expect("served");
        store
            .create(namespaces, "", json!({"metadata": {"name": "ns"}}), false)
            .expect("namespace");
        let recorder = Recorder::new(store.clone(), "tester").expect("events served");
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                                     "resourceVersion": "7"}});
        let claim = json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u2"}});
        recorder.event(&rs, "ReplicaSet", "Normal", "SuccessfulCreate", "m");
        recorder.event(&claim, "PersistentVolumeClaim", "Normal", "Waiting", "m");
        let (events, _) = store.list(recorder.events, Some("ns"));
        let mut got: Vec<Value> = events
            .iter()
            .map(|e| e.get("involvedObject").cloned().unwrap_or(Value::Null))
            .collect();
        got.sort_by_key(|o| str_at(o, "/name").to_string());
        assert_eq!(
            got,
            [
                json!({"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "c",
                       "uid": "u2", "apiVersion": "v1", "resourceVersion": ""}),
                json!({"kind": "ReplicaSet", "namespace": "ns", "name": "web",
                       "uid": "u1", "apiVersion": "apps/v1", "resourceVersion": "7"}),
            ]
        );
    }
}

//! The ReplicaSet controller stand-in: keeps `spec.replicas` active pods for each apps/v1
//! ReplicaSet and writes its status, as kube-controller-manager's does. On under `up` and
//! `--simulate-kubelets`.
//!
//! For each ReplicaSet: pods whose controller reference carries its uid are its own; a pod
//! with no controller that its selector selects is adopted (the reference is added), and an
//! own pod the selector no longer selects is released (the reference is removed). Active
//! pods are its own that are neither terminating nor Succeeded/Failed. Missing pods are made
//! from `spec.template` (`generateName: <rs>-`, the template's labels and annotations, an
//! owner reference with `controller` and `blockOwnerDeletion`); surplus pods are deleted in
//! upstream's order (unscheduled before scheduled, Pending before Unknown before Running,
//! not ready before ready, ready for less time first, newer first). Each create and delete
//! is an Event from `replicaset-controller` (`SuccessfulCreate`, `SuccessfulDelete`).
//!
//! Status: `replicas` (active pods), `fullyLabeledReplicas` (those carrying every template
//! label), `readyReplicas`, `availableReplicas` (ready for `spec.minReadySeconds`) and
//! `observedGeneration`. A pod ready but not yet available brings its ReplicaSet back when it
//! becomes available.
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::create`], [`Store::update`] and [`Store::delete`], as a client would.
//! **Invariant:** the store is read at each sync, and every write lands before the next sync
//! reads, so upstream's creation and deletion expectations are not needed here.
//!
//! Upstream: pkg/controller/replicaset (syncReplicaSet, manageReplicas,
//! calculateStatus) and pkg/controller/controller_ref_manager.go (adoption and release).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission;
use crate::controller::{
    self, controller_ref, is_active, is_available, is_ready, key_of, owner_reference, owner_refs,
    pod_from_template, ready_for, terminating, with_owner_refs, Key, Reconcile,
};
use crate::pv_controller::{selector_matches, str_at};
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store, WatchEvent};

/// The Events' `source.component`, as upstream's controller names itself.
pub const COMPONENT: &str = "replicaset-controller";

/// Pods created or deleted in one sync at most (upstream's `BurstReplicas`); the rest
/// follow in the next syncs, which the writes' own events bring.
pub const BURST_REPLICAS: usize = 500;

/// Upstream's order of pods to delete first (ActivePods' Less): unscheduled before
/// scheduled, Pending before Unknown before Running, not ready before ready, ready for less
/// time before longer, newer before older.
pub fn deletion_order(a: &Value, b: &Value) -> Ordering {
    let scheduled = |p: &Value| !str_at(p, "/spec/nodeName").is_empty();
    let phase = |p: &Value| match str_at(p, "/status/phase") {
        "Pending" | "" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    };
    let created = |p: &Value| str_at(p, "/metadata/creationTimestamp").to_string();
    scheduled(a)
        .cmp(&scheduled(b))
        .then_with(|| phase(a).cmp(&phase(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| match (ready_for(a), ready_for(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => Ordering::Equal,
        })
        .then_with(|| created(b).cmp(&created(a)))
}

/// The status of a ReplicaSet owning `active` pods (upstream's calculateStatus), over the
/// status it has (its conditions are kept).
pub fn calculate_status(rs: &Value, active: &[&Value]) -> Value {
    let template_labels = rs
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let min_ready = rs
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let fully_labeled = active
        .iter()
        .filter(|p| {
            template_labels.into_iter().flatten().all(|(k, v)| {
                p.pointer("/metadata/labels")
                    .and_then(|l| l.get(k))
                    .is_some_and(|l| l == v)
            })
        })
        .count();
    let ready = active.iter().filter(|p| is_ready(p)).count();
    let available = active.iter().filter(|p| is_available(p, min_ready)).count();
    let mut status = rs
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // Zero counts are left out, as upstream's omitempty does; `replicas` is always there.
    for (field, n) in [
        ("fullyLabeledReplicas", fully_labeled),
        ("readyReplicas", ready),
        ("availableReplicas", available),
    ] {
        if n == 0 {
            status.remove(field);
        } else {
            status.insert(field.into(), json!(n));
        }
    }
    status.insert("replicas".into(), json!(active.len()));
    status.insert(
        "observedGeneration".into(),
        rs.pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1)),
    );
    Value::Object(status)
}

struct ReplicaSetController {
    store: Arc<Store>,
    replicasets: &'static ResourceInfo,
    pods: &'static ResourceInfo,
    priority_classes: &'static ResourceInfo,
    recorder: Recorder,
}

impl ReplicaSetController {
    /// The ReplicaSets a pod's change concerns: its controller if that is a ReplicaSet,
    /// else (an orphan) those in its namespace whose selector selects it.
    fn replicasets_of_pod(&self, pod: &Value) -> Vec<Key> {
        let ns = str_at(pod, "/metadata/namespace");
        if let Some(r) = controller_ref(pod) {
            if str_at(r, "/kind") == "ReplicaSet" && str_at(r, "/apiVersion") == "apps/v1" {
                return vec![(ns.to_string(), str_at(r, "/name").to_string())];
            }
            return Vec::new();
        }
        self.store
            .list(self.replicasets, Some(ns))
            .0
            .iter()
            .filter(|rs| selects(rs, pod))
            .map(|rs| (ns.to_string(), str_at(rs, "/metadata/name").to_string()))
            .collect()
    }

    /// Brings one ReplicaSet to its replicas and writes its status. Returns when to look
    /// again for a pod that is ready but not yet available.
    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        let rs = self.store.get(self.replicasets, ns, name)?;
        let uid = str_at(&rs, "/metadata/uid").to_string();
        let deleting = terminating(&rs);
        let mut owned = Vec::new();
        for pod in self.store.list(self.pods, Some(ns)).0 {
            let ours = controller_ref(&pod).map(|r| str_at(r, "/uid") == uid);
            match ours {
                Some(true) if selects(&rs, &pod) || terminating(&pod) => owned.push(pod),
                Some(true) => self.release(&pod, &uid),
                None if !deleting && !terminating(&pod) && selects(&rs, &pod) => {
                    if let Some(adopted) = self.adopt(&rs, &pod) {
                        owned.push(adopted);
                    }
                }
                _ => {}
            }
        }
        if !deleting {
            self.manage(&rs, owned.iter().map(|p| &**p).filter(|p| is_active(p)));
        }
        // Counted again after the writes, so that the status says what is there now.
        let pods = self.store.list(self.pods, Some(ns)).0;
        let active: Vec<&Value> = pods
            .iter()
            .map(|p| &**p)
            .filter(|p| controller_ref(p).is_some_and(|r| str_at(r, "/uid") == uid))
            .filter(|p| is_active(p))
            .collect();
        let status = calculate_status(&rs, &active);
        let written =
            controller::update_same(&self.store, self.replicasets, ns, name, &uid, |cur| {
                let mut new = cur.clone();
                new["status"] = status;
                Ok(new)
            });
        if let Err(e) = written {
            tracing::debug!(replicaset = %name, error = %e.message,
                "replicaset controller: status not written");
        }
        controller::until_available(&rs, active.iter().copied())
    }

    fn manage<'a>(&self, rs: &Value, active: impl Iterator<Item = &'a Value>) {
        let mut active: Vec<&Value> = active.collect();
        let want = rs
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(0);
        let want = usize::try_from(want).unwrap_or(0);
        let ns = str_at(rs, "/metadata/namespace");
        if active.len() < want {
            let classes = self.store.list(self.priority_classes, None).0;
            for _ in 0..(want - active.len()).min(BURST_REPLICAS) {
                let mut pod = pod_from_template(rs, owner_reference(rs, "apps/v1", "ReplicaSet"));
                // What the API server does to a pod created through it, as upstream's
                // controller's pods are.
                admission::default_pod(&mut pod);
                admission::apply_scheduling_gated_condition(&mut pod);
                admission::merge_affinity_label_keys(&mut pod);
                admission::merge_topology_spread_label_keys(&mut pod);
                let created = admission::admit_priority(self.pods, &mut pod, &classes)
                    .and_then(|()| self.store.create(self.pods, ns, pod, false));
                match created {
                    Ok(pod) => self.recorder.event(
                        rs,
                        "ReplicaSet",
                        "Normal",
                        "SuccessfulCreate",
                        &format!("Created pod: {}", str_at(&pod, "/metadata/name")),
                    ),
                    Err(e) => {
                        self.recorder.event(
                            rs,
                            "ReplicaSet",
                            "Warning",
                            "FailedCreate",
                            &format!("Error creating: {}", e.message),
                        );
                        return;
                    }
                }
            }
        } else if active.len() > want {
            active.sort_by(|a, b| deletion_order(a, b));
            for pod in active
                .iter()
                .take((active.len() - want).min(BURST_REPLICAS))
            {
                let pod_name = str_at(pod, "/metadata/name");
                let opts = DeleteOptions {
                    uid: Some(str_at(pod, "/metadata/uid")),
                    ..DeleteOptions::default()
                };
                match self.store.delete(self.pods, ns, pod_name, opts) {
                    Ok(_) => self.recorder.event(
                        rs,
                        "ReplicaSet",
                        "Normal",
                        "SuccessfulDelete",
                        &format!("Deleted pod: {pod_name}"),
                    ),
                    Err(e) => tracing::debug!(pod = %pod_name, error = %e.message,
                        "replicaset controller: pod not deleted"),
                }
            }
        }
    }

    /// Adds the ReplicaSet's controller reference to an orphan it selects; None when the pod
    /// changed meanwhile (someone else adopted it, or it is going).
    fn adopt(&self, rs: &Value, pod: &Value) -> Option<Arc<Value>> {
        let (ns, name) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
        );
        let uid = str_at(pod, "/metadata/uid");
        self.store
            .update(self.pods, ns, name, false, |cur| {
                if str_at(cur, "/metadata/uid") != uid
                    || controller_ref(cur).is_some()
                    || terminating(cur)
                {
                    return Err(crate::status::ApiError::conflict(
                        self.pods,
                        name,
                        "the pod changed",
                    ));
                }
                let mut refs = owner_refs(cur);
                refs.push(owner_reference(rs, "apps/v1", "ReplicaSet"));
                Ok(with_owner_refs(cur, refs))
            })
            .ok()
    }

    /// Removes the ReplicaSet's controller reference from a pod its selector no longer
    /// selects.
    fn release(&self, pod: &Value, rs_uid: &str) {
        let (ns, name) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
        );
        let released = self.store.update(self.pods, ns, name, false, |cur| {
            let refs = owner_refs(cur)
                .into_iter()
                .filter(|r| str_at(r, "/uid") != rs_uid)
                .collect();
            Ok(with_owner_refs(cur, refs))
        });
        if let Err(e) = released {
            tracing::debug!(pod = %name, error = %e.message, "replicaset controller: pod not released");
        }
    }
}

/// Whether the ReplicaSet's selector selects the pod; an empty or missing selector selects
/// nothing (validation refuses one).
fn selects(rs: &Value, pod: &Value) -> bool {
    let Some(selector) = rs
        .pointer("/spec/selector")
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
    else {
        return false;
    };
    selector_matches(selector, pod.pointer("/metadata/labels"))
}

/// Runs the ReplicaSet controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (Some(replicasets), Some(pods), Some(priority_classes)) = (
        resources::lookup("apps", "v1", "replicasets"),
        resources::lookup("", "v1", "pods"),
        resources::lookup("scheduling.k8s.io", "v1", "priorityclasses"),
    ) else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let c = ReplicaSetController {
        store,
        replicasets,
        pods,
        priority_classes,
        recorder,
    };
    controller::run(&c.store.clone(), &c).await;
}

impl Reconcile for ReplicaSetController {
    fn owners(&self) -> &'static ResourceInfo {
        self.replicasets
    }

    fn relist(&self) -> Vec<Key> {
        self.store
            .list(self.replicasets, None)
            .0
            .iter()
            .map(|rs| key_of(rs))
            .collect()
    }

    fn keys_of(&self, ev: &WatchEvent, keys: &mut BTreeSet<Key>) {
        if ev.storage == self.replicasets.storage && ev.kind != EventType::Deleted {
            keys.insert(key_of(&ev.object()));
        } else if ev.storage == self.pods.storage {
            keys.extend(self.replicasets_of_pod(&ev.object()));
        }
    }

    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        ReplicaSetController::sync(self, ns, name)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn pod(name: &str, node: &str, phase: &str, ready: Option<&str>, created: &str) -> Value {
        let conditions: Vec<Value> = ready
            .map(|since| {
                vec![json!({"type": "Ready", "status": "True", "lastTransitionTime": since})]
            })
            .unwrap_or_default();
        json!({"metadata": {"name": name, "creationTimestamp": created,
                            "labels": {"app": "web"}},
               "spec": {"nodeName": node},
               "status": {"phase": phase, "conditions": conditions}})
    }

    #[rstest]
    #[case::unscheduled_before_scheduled(
        pod("a", "n", "Pending", None, "2026-01-01T00:00:00Z"),
        pod("b", "", "Pending", None, "2026-01-01T00:00:00Z"),
        "b"
    )]
    #[case::pending_before_running(
        pod("a", "n", "Running", None, "2026-01-01T00:00:00Z"),
        pod("b", "n", "Pending", None, "2026-01-01T00:00:00Z"),
        "b"
    )]
    #[case::not_ready_before_ready(
        pod(
            "a",
            "n",
            "Running",
            Some("2026-01-01T00:00:00Z"),
            "2026-01-01T00:00:00Z"
        ),
        pod("b", "n", "Running", None, "2026-01-01T00:00:00Z"),
        "b"
    )]
    #[case::ready_for_less_time_first(
        pod(
            "a",
            "n",
            "Running",
            Some("2026-01-01T00:00:00Z"),
            "2026-01-01T00:00:00Z"
        ),
        pod(
            "b",
            "n",
            "Running",
            Some("2026-01-01T00:05:00Z"),
            "2026-01-01T00:00:00Z"
        ),
        "b"
    )]
    #[case::newer_first(
        pod("a", "n", "Running", None, "2026-01-01T00:00:00Z"),
        pod("b", "n", "Running", None, "2026-01-01T00:00:01Z"),
        "b"
    )]
    fn surplus_pods_are_deleted_in_upstreams_order(
        #[case] a: Value,
        #[case] b: Value,
        #[case] first: &str,
    ) {
        let mut pods = [&a, &b];
        pods.sort_by(|x, y| deletion_order(x, y));
        assert_eq!(str_at(pods[0], "/metadata/name"), first);
        pods.reverse();
        pods.sort_by(|x, y| deletion_order(x, y));
        assert_eq!(str_at(pods[0], "/metadata/name"), first);
    }

    #[test]
    fn pod_from_template_carries_labels_owner_and_generate_name() {
        let rs = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"},
                                               "annotations": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        assert_eq!(
            pod_from_template(&rs, owner_reference(&rs, "apps/v1", "ReplicaSet")),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"generateName": "web-", "labels": {"app": "web"},
                                "annotations": {"a": "b"},
                                "ownerReferences": [{"apiVersion": "apps/v1",
                                    "kind": "ReplicaSet", "name": "web", "uid": "u1",
                                    "controller": true, "blockOwnerDeletion": true}]},
                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        );
    }

    #[test]
    fn status_counts_labeled_ready_and_available_pods() {
        let rs = json!({"metadata": {"name": "web", "generation": 3},
            "spec": {"minReadySeconds": 3600,
                     "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}}}},
            "status": {"conditions": []}});
        let long_ready = pod("a", "n", "Running", Some("2000-01-01T00:00:00Z"), "");
        let just_ready = pod("b", "n", "Running", Some(&crate::meta::now_rfc3339()), "");
        let mut labeled = pod("c", "n", "Pending", None, "");
        labeled["metadata"]["labels"]["tier"] = json!("fe");
        assert_eq!(
            calculate_status(&rs, &[&long_ready, &just_ready, &labeled]),
            json!({"conditions": [], "replicas": 3, "fullyLabeledReplicas": 1,
                   "readyReplicas": 2, "availableReplicas": 1, "observedGeneration": 3})
        );
        assert_eq!(
            calculate_status(&rs, &[]),
            json!({"conditions": [], "replicas": 0, "observedGeneration": 3})
        );
    }
}

//! The scheduler's explanation of each pod a scenario touched, in `simulate`'s per-pod JSON
//! shape (node, result, message, filter, score, finalScore, ...).
//!
//! [`ExplanationSource`] is where an explanation comes from. On the embedded cluster it is
//! [`Recorded`]: the scheduler's own last attempt for each pod, kept in its decision log.
//! Against another cluster's scheduler, [`SimulateNow`] computes it from the cluster as the
//! scenario left it: every object simulate reads is listed through
//! the API, and the pod is scheduled by `simulate` alone against the pods already bound (a
//! bound pod as if it were pending, off its node). That is the decision simulate would make
//! now, which can differ from the one the scheduler made earlier (other pods were pending
//! then, nodes have changed since); the report says so.

use std::collections::HashMap;
use std::path::Path;

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

use plugins::Registry;
use scheduler::config::KubeSchedulerConfiguration;
use scheduler::simulate::{ClusterInput, Simulation};
use scheduler::SchedulerBuilder;

/// Where the explanation of a pod's scheduling comes from.
pub trait ExplanationSource {
    /// How the report introduces the explanations, e.g. "as simulate explains them now".
    fn describe(&self) -> &'static str;
    /// The pod's explanation in simulate's per-pod JSON shape; `None` when there is none.
    fn explain(&self, namespace: &str, name: &str) -> Option<serde_json::Value>;
}

/// The decisions the embedded cluster's scheduler recorded: each pod's last attempt, as it
/// was made (a pod never attempted, e.g. one still gated, has none).
pub struct Recorded(pub scheduler::decisions::Decisions);

impl ExplanationSource for Recorded {
    fn describe(&self) -> &'static str {
        "as the scheduler decided them (each pod's last attempt)"
    }

    fn explain(&self, namespace: &str, name: &str) -> Option<serde_json::Value> {
        self.0.get(namespace, name)
    }
}

/// The kinds simulate reads: (apiVersion, kind, plural).
const KINDS: &[(&str, &str, &str)] = &[
    ("v1", "Node", "nodes"),
    ("v1", "Pod", "pods"),
    ("v1", "Namespace", "namespaces"),
    ("v1", "Service", "services"),
    ("v1", "ReplicationController", "replicationcontrollers"),
    ("v1", "PersistentVolume", "persistentvolumes"),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ("apps/v1", "ReplicaSet", "replicasets"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses"),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses"),
    ("storage.k8s.io/v1", "CSINode", "csinodes"),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers"),
    (
        "storage.k8s.io/v1",
        "CSIStorageCapacity",
        "csistoragecapacities",
    ),
    ("storage.k8s.io/v1", "VolumeAttachment", "volumeattachments"),
    ("resource.k8s.io/v1", "DeviceClass", "deviceclasses"),
    ("resource.k8s.io/v1", "ResourceSlice", "resourceslices"),
    ("resource.k8s.io/v1", "ResourceClaim", "resourceclaims"),
];

/// The cluster's objects as listed once, every kind simulate reads (kinds the server does
/// not serve are left out).
pub async fn snapshot(client: &kube::Client) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for (api_version, kind, plural) in KINDS {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let Ok(list) = api.list(&ListParams::default()).await else {
            continue;
        };
        for mut o in list.items {
            // Lists leave out each item's kind; simulate's reader needs it.
            o.types = Some(kube::core::TypeMeta {
                api_version: (*api_version).to_string(),
                kind: (*kind).to_string(),
            });
            o.metadata.managed_fields = None;
            if let Ok(v) = serde_json::to_value(&o) {
                out.push(v);
            }
        }
    }
    out
}

/// Explanations computed by `simulate` from a [`snapshot`].
pub struct SimulateNow {
    objects: Vec<serde_json::Value>,
    config: KubeSchedulerConfiguration,
    config_source: String,
    registry: Registry,
}

impl SimulateNow {
    pub fn new(
        objects: Vec<serde_json::Value>,
        config: KubeSchedulerConfiguration,
        config_source: String,
        registry: Registry,
    ) -> SimulateNow {
        SimulateNow {
            objects,
            config,
            config_source,
            registry,
        }
    }
}

fn str_at<'a>(v: &'a serde_json::Value, p: &str) -> &'a str {
    v.pointer(p).and_then(|x| x.as_str()).unwrap_or_default()
}

impl ExplanationSource for SimulateNow {
    fn describe(&self) -> &'static str {
        "as simulate explains them now"
    }

    fn explain(&self, namespace: &str, name: &str) -> Option<serde_json::Value> {
        let is_pod = |v: &serde_json::Value| str_at(v, "/kind") == "Pod";
        let target = self.objects.iter().find(|v| {
            is_pod(v)
                && str_at(v, "/metadata/namespace") == namespace
                && str_at(v, "/metadata/name") == name
        })?;
        let mut pending = target.clone();
        if let Some(spec) = pending.get_mut("spec").and_then(|s| s.as_object_mut()) {
            spec.remove("nodeName");
        }
        if let Some(obj) = pending.as_object_mut() {
            obj.remove("status");
        }
        let mut items: Vec<serde_json::Value> = self
            .objects
            .iter()
            .filter(|v| !is_pod(v) || counts_as_running(v, namespace, name))
            .cloned()
            .collect();
        items.push(pending);
        let text = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
        let mut input = ClusterInput::default();
        let mut seen = HashMap::new();
        input
            .add_text(&text.to_string(), Path::new("cluster"), &mut seen)
            .ok()?;
        input.resolve_priorities().ok()?;
        let simulation = Simulation::new(
            SchedulerBuilder::new(self.config.clone(), self.config_source.clone())
                .registry(self.registry.clone())
                .seed(1),
        )
        .ok()?;
        let report = simulation.run(&input);
        let json: serde_json::Value =
            serde_json::from_str(&scheduler::simulate::output::to_json(&report)).ok()?;
        json.get("pods")?
            .as_array()?
            .iter()
            .find(|p| str_at(p, "/namespace") == namespace && str_at(p, "/name") == name)
            .cloned()
    }
}

/// A pod other than the one explained that occupies its node: bound, not finished, not
/// being deleted. Pending pods are left out so that the explained pod is the only one
/// simulate schedules.
fn counts_as_running(v: &serde_json::Value, namespace: &str, name: &str) -> bool {
    let is_target =
        str_at(v, "/metadata/namespace") == namespace && str_at(v, "/metadata/name") == name;
    !is_target
        && !str_at(v, "/spec/nodeName").is_empty()
        && v.pointer("/metadata/deletionTimestamp").is_none()
        && !matches!(str_at(v, "/status/phase"), "Succeeded" | "Failed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, extra: serde_json::Value) -> serde_json::Value {
        let mut p = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        if let (Some(obj), Some(more)) = (p.as_object_mut(), extra.as_object()) {
            for (k, v) in more {
                obj.insert(k.clone(), v.clone());
            }
        }
        p
    }

    #[rstest::rstest]
    #[case::a_bound_pod_counts(pod("other", Some("n1"), json!({})), true)]
    #[case::the_explained_pod_does_not(pod("me", Some("n1"), json!({})), false)]
    #[case::a_pending_pod_does_not(pod("other", None, json!({})), false)]
    #[case::a_finished_pod_does_not(pod("other", Some("n1"), json!({"status": {"phase": "Succeeded"}})), false)]
    #[case::a_pod_being_deleted_does_not(
        pod("other", Some("n1"), json!({"metadata": {"name": "other", "namespace": "default", "deletionTimestamp": "2026-01-01T00:00:00Z"}})),
        false
    )]
    fn pods_that_occupy_nodes_in_the_explanation(#[case] p: serde_json::Value, #[case] want: bool) {
        assert_eq!(counts_as_running(&p, "default", "me"), want);
    }

    /// A bound pod is explained as if it were pending, off its node: here the node it is
    /// on is full of its own request, and simulate still places it there.
    #[test]
    fn a_bound_pod_is_explained_as_if_it_were_pending() {
        let node = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                   "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}})
        };
        let objects = vec![
            node("n1"),
            node("n2"),
            pod("busy", Some("n2"), json!({})),
            pod("me", Some("n1"), json!({"status": {"phase": "Running"}})),
            pod("waiting", None, json!({})),
        ];
        let registry = plugins::in_tree_registry();
        let cfg = scheduler::config::load_str(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
            "test",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let source = SimulateNow::new(objects, cfg, "test".into(), registry);
        let got = source.explain("default", "me").map(|e| {
            (
                str_at(&e, "/node").to_string(),
                str_at(&e, "/result").to_string(),
            )
        });
        assert_eq!(got, Some(("n1".to_string(), "Scheduled".to_string())));
        assert_eq!(source.explain("default", "absent"), None);
    }
}

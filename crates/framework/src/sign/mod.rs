//! Pod scheduling signatures: what a plugin's Filter and Score results depend on in a pod,
//! so that the scheduler can tell that two pods would get the same verdicts and scores on
//! the same nodes, and reuse the work of the first for the second (opportunistic batching).
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/framework/signers.go and the `SignPlugin`
//! interface of interface.go. Each plugin enabled at PreFilter, Filter, PreScore or Score
//! must implement [`SignPlugin`] for a profile to sign pods at all; a plugin that does not
//! (an out-of-tree plugin, by default) turns signatures off for the whole profile. A plugin
//! whose result depends on more than the pod and the node (other pods' placement, cluster-wide
//! counts) refuses to sign such pods: it returns a rejecting [`Status`] and the pod is
//! scheduled without batching.
//!
//! The fragment keys are upstream's signer names; fragments with the same key carry the same
//! value whichever plugin computed them, so a key is written once in the signature.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::interface::Plugin;
use crate::status::Status;
use crate::types::PodInfo;

/// The pod's `spec.schedulerName`: always part of a signature (the runtime adds it).
pub const SCHEDULER_NAME_SIGNER: &str = "v1.Pod.Spec.SchedulerName";
/// The pod's image names, canonical and sorted (ImageLocality).
pub const IMAGE_NAMES_SIGNER: &str = "v1.Pod.Spec.CanonicalImageNames()";
/// The pod's labels (InterPodAffinity: existing pods' terms may select them).
pub const LABELS_SIGNER: &str = "v1.Pod.Labels";
/// `spec.nodeName` (NodeName).
pub const NODE_NAME_SIGNER: &str = "v1.Pod.Spec.NodeName";
/// `spec.affinity.nodeAffinity` (NodeAffinity).
pub const NODE_AFFINITY_SIGNER: &str = "v1.Pod.Spec.Affinity.NodeAffinity";
/// `spec.nodeSelector` (NodeAffinity).
pub const NODE_SELECTOR_SIGNER: &str = "v1.Pod.Spec.Affinity.NodeSelector";
/// The host ports of the pod's containers, sorted (NodePorts).
pub const HOST_PORTS_SIGNER: &str = "v1.Pod.Spec.HostPorts()";
/// The pod's effective requests, with and without the non-zero defaults scoring assumes
/// (NodeResourcesFit, NodeResourcesBalancedAllocation).
pub const RESOURCES_SIGNER: &str = "v1.Pod.Spec.ContainerResourcesAndOverheads()";
/// `spec.tolerations`, sorted (TaintToleration, NodeUnschedulable).
pub const TOLERATIONS_SIGNER: &str = "v1.Pod.Spec.Tolerations";
/// The pod's volume sources but ConfigMaps and Secrets (the volume plugins).
pub const VOLUMES_SIGNER: &str = "v1.Pod.Spec.Volumes.NonSyntheticSources()";

/// One part of a pod's signature: a signer name and the value the pod has for it.
#[derive(Debug, Clone, PartialEq)]
pub struct SignFragment {
    pub key: &'static str,
    pub value: Value,
}

impl SignFragment {
    pub fn new(key: &'static str, value: Value) -> Self {
        SignFragment { key, value }
    }
}

/// A pod's signature: pods with equal signatures get the same Filter verdicts and Score
/// results on the same nodes in the same state. Compared byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodSignature(Box<str>);

impl PodSignature {
    /// The signature of the fragments, keyed and ordered by signer name.
    pub fn from_fragments(fragments: BTreeMap<&'static str, Value>) -> Self {
        // Serializing a map of JSON values into a string does not fail.
        let text = serde_json::to_string(&fragments).unwrap_or_default();
        PodSignature(text.into_boxed_str())
    }

    /// A signature with this exact text (tests, and callers that sign by other means).
    pub fn from_text(text: &str) -> Self {
        PodSignature(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A plugin that can say what its results depend on in a pod.
pub trait SignPlugin: Plugin {
    /// The fragments of `pod`'s signature this plugin's results depend on (none when they
    /// depend on nothing in the pod), or a rejecting status when they depend on more than
    /// the pod and the node, so that the pod must not be signed.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status>;
}

/// The host ports the pod's containers and init containers ask for, sorted and deduplicated.
pub fn host_ports_signer(pod: &Pod) -> Value {
    let mut ports: Vec<i32> = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| p.host_port.unwrap_or(0))
        .filter(|&p| p != 0)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    Value::from(ports)
}

/// `spec.affinity.nodeAffinity`, or null.
pub fn node_affinity_signer(pod: &Pod) -> Value {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| serde_json::to_value(na).ok())
        .unwrap_or(Value::Null)
}

/// `spec.nodeSelector`, or null.
pub fn node_selector_signer(pod: &Pod) -> Value {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|ns| serde_json::to_value(ns).ok())
        .unwrap_or(Value::Null)
}

/// `spec.tolerations`, sorted by key then value (their order does not change a verdict).
pub fn tolerations_signer(pod: &Pod) -> Value {
    let mut tolerations: Vec<_> = pod
        .spec
        .iter()
        .flat_map(|s| s.tolerations.iter().flatten())
        .collect();
    tolerations.sort_by(|a, b| (&a.key, &a.value).cmp(&(&b.key, &b.value)));
    serde_json::to_value(tolerations).unwrap_or(Value::Null)
}

/// The pod's volume sources but ConfigMaps and Secrets: those never change where a pod fits
/// but differ from pod to pod, so keeping them would leave no two pods with one signature.
pub fn volumes_signer(pod: &Pod) -> Value {
    let sources: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| v.config_map.is_none() && v.secret.is_none())
        .map(|v| {
            // The name is the pod's own; the source is what placement depends on.
            let mut v = v.clone();
            v.name = String::new();
            serde_json::to_value(v).unwrap_or(Value::Null)
        })
        .collect();
    Value::from(sources)
}

/// The pod's labels, or an empty map.
pub fn labels_signer(pod: &Pod) -> Value {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| serde_json::to_value(l).ok())
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}

#[cfg(test)]
mod tests;

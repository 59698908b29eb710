//! The JSON an extender speaks: `k8s.io/kube-scheduler/extender/v1`.
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/extender/v1/types.go. Those Go structs carry
//! no JSON tags, so every key is the Go field name (`Pod`, `NodeNames`, `FailedNodes`, ...).
//! Go's decoder matches keys case-insensitively; the aliases accept the lower-camel and
//! lower-case spellings extenders written in other languages send back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::List;
use serde::{Deserialize, Serialize};

/// Highest score an extender's prioritize may give a node.
///
/// Upstream: extenderv1.MaxExtenderPriority.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// Node name → why the extender rejected that node.
pub type FailedNodesMap = BTreeMap<String, String>;

/// Body of a filter or prioritize call. Exactly one of `Nodes` and `NodeNames` is set: names
/// when the extender caches nodes itself (`nodeCacheCapable`); the other is sent as `null`,
/// as Go encodes a nil pointer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtenderArgs<'a> {
    #[serde(rename = "Pod")]
    pub pod: &'a Pod,
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeList>,
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
}

/// A `v1.NodeList` as Go encodes it: `{"metadata": {}, "items": [...]}`.
pub type NodeList = List<Node>;

/// Reply to a filter call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ExtenderFilterResult {
    #[serde(default, rename = "Nodes", alias = "nodes")]
    pub nodes: Option<NodeList>,
    #[serde(
        default,
        rename = "NodeNames",
        alias = "nodeNames",
        alias = "nodenames"
    )]
    pub node_names: Option<Vec<String>>,
    #[serde(
        default,
        rename = "FailedNodes",
        alias = "failedNodes",
        alias = "failednodes"
    )]
    pub failed_nodes: Option<FailedNodesMap>,
    #[serde(
        default,
        rename = "FailedAndUnresolvableNodes",
        alias = "failedAndUnresolvableNodes",
        alias = "failedandunresolvablenodes"
    )]
    pub failed_and_unresolvable_nodes: Option<FailedNodesMap>,
    /// Non-empty when the extender failed: the call is an error.
    #[serde(default, rename = "Error", alias = "error")]
    pub error: Option<String>,
}

/// One node's score from a prioritize call; a reply is a list of these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPriority {
    #[serde(rename = "Host", alias = "host")]
    pub host: String,
    #[serde(default, rename = "Score", alias = "score")]
    pub score: i64,
}

/// Body of a bind call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtenderBindingArgs {
    #[serde(rename = "PodName")]
    pub pod_name: String,
    #[serde(rename = "PodNamespace")]
    pub pod_namespace: String,
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    #[serde(rename = "Node")]
    pub node: String,
}

/// Reply to a bind call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ExtenderBindingResult {
    #[serde(default, rename = "Error", alias = "error")]
    pub error: Option<String>,
}

/// Body of a preempt call: the victims the scheduler chose, per node. Whole pods, or only
/// their UIDs when the extender caches nodes itself; the other map is sent as `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtenderPreemptionArgs<'a> {
    #[serde(rename = "Pod")]
    pub pod: &'a Pod,
    #[serde(rename = "NodeNameToVictims")]
    pub node_name_to_victims: Option<BTreeMap<String, Victims>>,
    #[serde(rename = "NodeNameToMetaVictims")]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// Pods to evict on one node, and how many PodDisruptionBudgets that violates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Victims {
    #[serde(rename = "Pods")]
    pub pods: Vec<Pod>,
    #[serde(rename = "NumPDBViolations")]
    pub num_pdb_violations: i64,
}

/// [`Victims`] by UID only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaVictims {
    #[serde(default, rename = "Pods", alias = "pods")]
    pub pods: Option<Vec<MetaPod>>,
    #[serde(
        default,
        rename = "NumPDBViolations",
        alias = "numPDBViolations",
        alias = "numpdbviolations"
    )]
    pub num_pdb_violations: i64,
}

/// A pod named by its UID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaPod {
    #[serde(default, rename = "UID", alias = "uid")]
    pub uid: String,
}

/// Reply to a preempt call: the victims the extender keeps, per node (nodes left out are
/// no longer candidates).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ExtenderPreemptionResult {
    #[serde(
        default,
        rename = "NodeNameToMetaVictims",
        alias = "nodeNameToMetaVictims",
        alias = "nodenametometavictims"
    )]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

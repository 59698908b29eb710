//! PodTopologySpread: spreads a pod's group across topology domains (zones, hostnames, any
//! node label). `DoNotSchedule` constraints reject a node when placing the pod in its domain
//! would put more than `maxSkew` matching pods above the emptiest domain; `ScheduleAnyway`
//! constraints score nodes in emptier domains higher. A pod without constraints of its own
//! gets the profile's defaults (system: hostname skew 3, zone skew 5, both preferred), with a
//! selector deduced from the Services and controller that select it.
//!
//! Upstream: pkg/scheduler/framework/plugins/podtopologyspread (plugin.go, common.go,
//! filtering.go, scoring.go) and plugins/helper/spread.go. Every feature gate involved
//! (minDomains, node inclusion policies, matchLabelKeys, queueing hints) is on, as in
//! current upstream.
//!
//! What counts as a matching pod: in the pod's namespace, not terminating, selected by the
//! constraint's selector (a selector that selects everything counts nothing, as upstream).
//! What counts as a domain: the topology value of a node that carries every constraint's
//! key and passes the constraint's `nodeAffinityPolicy` (Honor by default: the pod's
//! nodeSelector and required node affinity) and `nodeTaintsPolicy` (Ignore by default; Honor:
//! the pod tolerates the node's NoSchedule/NoExecute taints).
//!
//! Counting walks every node and its pods; the counts are kept across cycles per workload
//! and refreshed only for the nodes that changed (module `cache`), so that a pod of a workload
//! seen in the last cycles costs tens of microseconds at 5,000 nodes rather than most of a
//! millisecond.

mod args;
mod cache;
mod common;
mod filtering;
mod scoring;

use std::sync::Arc;

use framework::events::QueueingHintFn;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, EnqueueExtensions, EventObject, EventResource,
    FilterPlugin, Handle, Plugin, PreFilterPlugin, PreScorePlugin, QueueingHint, ScorePlugin,
};
use framework::{PodInfo, SignFragment, SignPlugin, Status};
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

pub use args::{DefaultConstraint, PodTopologySpreadArgs, LIST_DEFAULTING, SYSTEM_DEFAULTING};
use cache::CountCache;
use common::{constraints_of, Constraint, Defaults, DO_NOT_SCHEDULE};

use crate::helper::events::same_uid;
use crate::names;

pub const NAME: &str = names::POD_TOPOLOGY_SPREAD;

/// Why a pod with its own spread constraints gets no signature.
pub const ERR_REASON_CONSTRAINTS_NOT_SIGNABLE: &str =
    "pods with topology constraints are not signable";
/// Why no pod gets a signature under a profile with default constraints.
pub const ERR_REASON_DEFAULTS_NOT_SIGNABLE: &str =
    "pods with default topology constraints are not signable";

/// Filter reason when placing the pod on the node would exceed a constraint's `maxSkew`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// Filter reason when the node lacks a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// Below this many nodes, counting runs on the calling thread: per node it is a few label
/// lookups, cheaper than waking the pool.
const MIN_PARALLEL_NODES: usize = 2048;

/// Upstream: podtopologyspread.PodTopologySpread.
#[derive(Debug)]
pub struct PodTopologySpread {
    /// The constraints of pods without their own; shared with the queueing hints.
    defaults: Arc<Defaults>,
    /// For the parallelizer, to count pods over all nodes.
    handle: Handle,
    /// Counts of the last few workloads, refreshed per cycle for the nodes that changed.
    cache: CountCache,
}

/// Decodes and validates [`PodTopologySpreadArgs`] and builds the plugin.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args = PodTopologySpreadArgs::decode(args)?;
    Ok(Arc::new(PodTopologySpread::from_args(&args, handle)))
}

impl PodTopologySpread {
    /// The plugin for validated `args`.
    pub fn from_args(args: &PodTopologySpreadArgs, handle: &Handle) -> Self {
        PodTopologySpread {
            defaults: Arc::new(args.defaults()),
            handle: handle.clone(),
            cache: CountCache::default(),
        }
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for PodTopologySpread {
    /// Spreading depends on where other pods are: a pod with constraints of its own, or
    /// any pod when the profile has default constraints (system defaulting included), is
    /// not signed.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        let own = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        if own {
            return Err(Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_SIGNABLE));
        }
        if !self.defaults.constraints.is_empty() {
            return Err(Status::unschedulable(ERR_REASON_DEFAULTS_NOT_SIGNABLE));
        }
        Ok(Vec::new())
    }
}

// PreFilter, AddPod/RemovePod and Filter are in `filtering`; PreScore, Score and
// NormalizeScore in `scoring`.

impl EnqueueExtensions for PodTopologySpread {
    /// Pods added, deleted, relabelled (or the pending pod given new tolerations) and nodes
    /// added, deleted, relabelled or retainted, each with upstream's hint.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let defaults = self.defaults.clone();
        let pod_hint: QueueingHintFn = Arc::new(move |pod, old, new| {
            is_schedulable_after_pod_change(&defaults, pod, old, new)
        });
        let defaults = self.defaults.clone();
        let node_hint: QueueingHintFn = Arc::new(move |pod, old, new| {
            is_schedulable_after_node_change(&defaults, pod, old, new)
        });
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::ADD
                    | ActionType::UPDATE_POD_LABEL
                    | ActionType::UPDATE_POD_TOLERATIONS
                    | ActionType::DELETE,
                pod_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::DELETE
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_TAINT,
                node_hint,
            ),
        ]
    }
}

/// The pending pod's `DoNotSchedule` constraints for a hint; `None` when they are the
/// defaults with a selector deduced from Services and controllers, which hints cannot see
/// (the hint then answers Queue).
fn hard_constraints(defaults: &Defaults, pod: &Pod) -> Result<Option<Vec<Constraint>>, String> {
    constraints_of(pod, defaults, None, DO_NOT_SCHEDULE)
}

/// Queue when an assigned pod of the same namespace that a constraint selects appears or
/// disappears, when one is relabelled into or out of a selector, or when the pending pod
/// itself gets new tolerations while a constraint honors taints.
fn is_schedulable_after_pod_change(
    defaults: &Defaults,
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = as_pods(old, new)?;
    if modified.is_some_and(|m| !involved_in_spreading(m, pod))
        || original.is_some_and(|o| !involved_in_spreading(o, pod))
    {
        return Ok(QueueingHint::QueueSkip);
    }
    let Some(constraints) = hard_constraints(defaults, pod)? else {
        return Ok(QueueingHint::Queue);
    };
    let matches_any = |p: &Pod| {
        constraints
            .iter()
            .any(|c| c.selector.matches_opt(p.metadata.labels.as_ref()))
    };
    let hint = match (original, modified) {
        (Some(original), Some(modified)) => {
            if same_uid(pod, modified)
                && tolerations(original) != tolerations(modified)
                && constraints.iter().any(|c| c.honor_node_taints)
            {
                QueueingHint::Queue
            } else if same_map(&original.metadata.labels, &modified.metadata.labels) {
                QueueingHint::QueueSkip
            } else if constraints.iter().any(|c| {
                c.selector.matches_opt(original.metadata.labels.as_ref())
                    != c.selector.matches_opt(modified.metadata.labels.as_ref())
            }) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (None, Some(added)) if matches_any(added) => QueueingHint::Queue,
        (Some(deleted), None) if matches_any(deleted) => QueueingHint::Queue,
        (None, None) => return Err("expected Pod, but got nothing".to_string()),
        _ => QueueingHint::QueueSkip,
    };
    Ok(hint)
}

/// Whether `incoming` can change the spreading of `pending`: it is the pending pod itself,
/// or an assigned pod of its namespace.
fn involved_in_spreading(incoming: &Pod, pending: &Pod) -> bool {
    same_uid(incoming, pending)
        || (incoming
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
            && incoming.metadata.namespace == pending.metadata.namespace)
}

/// Queue when a node carrying every topology key is added or deleted, when an update makes a
/// node gain or lose a key, or changes a key's value or the taints of a node carrying them.
fn is_schedulable_after_node_change(
    defaults: &Defaults,
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = as_nodes(old, new)?;
    let Some(constraints) = hard_constraints(defaults, pod)? else {
        return Ok(QueueingHint::Queue);
    };
    let carries_keys = |n: &Node| {
        constraints.iter().all(|c| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(&c.topology_key))
        })
    };
    let queue_if = |yes: bool| {
        if yes {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    };
    let hint = match (original, modified) {
        (Some(original), Some(modified)) => {
            let (was, is) = (carries_keys(original), carries_keys(modified));
            queue_if(
                was != is
                    || (is
                        && (key_values_changed(original, modified, &constraints)
                            || taints(original) != taints(modified))),
            )
        }
        (None, Some(added)) => queue_if(carries_keys(added)),
        (Some(deleted), None) => queue_if(carries_keys(deleted)),
        (None, None) => return Err("expected Node, but got nothing".to_string()),
    };
    Ok(hint)
}

/// Whether a constraint's topology key has a different value (absent = empty) on the nodes.
fn key_values_changed(original: &Node, modified: &Node, constraints: &[Constraint]) -> bool {
    fn value<'n>(n: &'n Node, key: &str) -> &'n str {
        n.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map_or("", String::as_str)
    }
    constraints
        .iter()
        .any(|c| value(original, &c.topology_key) != value(modified, &c.topology_key))
}

/// The old and new pods of a pod event, either absent (upstream util.As).
fn as_pods<'a>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a Pod>, Option<&'a Pod>), String> {
    let pod = |o: Option<&'a EventObject>| match o {
        None => Ok(None),
        Some(EventObject::Pod(p)) => Ok(Some(p.as_ref())),
        Some(o) => Err(format!("expected Pod, but got {}", o.kind())),
    };
    Ok((pod(old)?, pod(new)?))
}

/// The old and new nodes of a node event, either absent (upstream util.As).
fn as_nodes<'a>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a Node>, Option<&'a Node>), String> {
    let node = |o: Option<&'a EventObject>| match o {
        None => Ok(None),
        Some(EventObject::Node(n)) => Ok(Some(n.as_ref())),
        Some(o) => Err(format!("expected Node, but got {}", o.kind())),
    };
    Ok((node(old)?, node(new)?))
}

/// The pod's tolerations; absent equals empty, as upstream's semantic equality compares.
fn tolerations(pod: &Pod) -> &[Toleration] {
    crate::helper::taints::pod_tolerations(pod)
}

/// The node's taints; absent equals empty, as upstream's semantic equality compares.
fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// Maps compared as upstream's semantic equality does: absent equals empty.
fn same_map<K: Ord, V: PartialEq>(
    a: &Option<std::collections::BTreeMap<K, V>>,
    b: &Option<std::collections::BTreeMap<K, V>>,
) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        (Some(m), None) | (None, Some(m)) => m.is_empty(),
        (None, None) => true,
    }
}

#[cfg(test)]
mod tests;

//! NodeUnschedulable: a cordoned node (`spec.unschedulable: true`) takes no new pods, except
//! pods that tolerate the `node.kubernetes.io/unschedulable:NoSchedule` taint.
//!
//! Upstream: pkg/scheduler/framework/plugins/nodeunschedulable. Toleration matching is
//! TaintToleration's.

use std::sync::Arc;

use framework::events::QueueingHintFn;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, NodeInfo, NodeRow, Plugin, PodInfo, QueueingHint, Status,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};

use crate::helper::events::{modified_pod, node_change, same_uid};
use crate::helper::taints::{pod_tolerations, toleration_tolerates};
use crate::names;
use crate::tainttoleration::EFFECT_NO_SCHEDULE;

pub const NAME: &str = names::NODE_UNSCHEDULABLE;

/// Filter reason for a cordoned node.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// The taint a pod must tolerate to be placed on a cordoned node.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Upstream: nodeunschedulable.NodeUnschedulable.
#[derive(Debug, Default)]
pub struct NodeUnschedulable;

/// Builds the plugin. Upstream has no args type for it and ignores whatever args are given.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(NodeUnschedulable))
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for NodeUnschedulable {
    /// Verdicts and scores depend on the pod's tolerations only.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::TOLERATIONS_SIGNER,
            framework::sign::tolerations_signer(&pod.pod),
        )])
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.unschedulable() || tolerates_unschedulable(pod_tolerations(&pod.pod)) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
        }
    }

    /// A schedulable node (the row says so) passes without reading the pod's tolerations.
    fn filter_with_row(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
    ) -> Status {
        if row.unschedulable {
            self.filter(state, pod, node)
        } else {
            Status::success()
        }
    }
}

impl EnqueueExtensions for NodeUnschedulable {
    /// A node that is added schedulable or uncordoned, or a toleration added to the pod
    /// itself that tolerates the unschedulable taint.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let node_hint: QueueingHintFn = Arc::new(is_schedulable_after_node_change);
        let pod_hint: QueueingHintFn = Arc::new(is_schedulable_after_pod_toleration_change);
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                node_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_TOLERATIONS,
                pod_hint,
            ),
        ]
    }
}

/// Queue for a node added schedulable, or a node going from unschedulable to schedulable.
fn is_schedulable_after_node_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = node_change(old, new)?;
    let now_schedulable = !is_unschedulable(modified);
    let was_unschedulable = original.is_none_or(is_unschedulable);
    if now_schedulable && was_unschedulable {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue when the pending pod itself now tolerates the unschedulable taint. The old
/// tolerations need no check: tolerations can only be added, and a pod that already
/// tolerated the taint would not have been rejected by this plugin.
fn is_schedulable_after_pod_toleration_change(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = modified_pod(new)?;
    if same_uid(pod, modified) && tolerates_unschedulable(pod_tolerations(modified)) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

fn is_unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Whether the tolerations tolerate `node.kubernetes.io/unschedulable:NoSchedule` (no value).
fn tolerates_unschedulable(tolerations: &[Toleration]) -> bool {
    tolerations
        .iter()
        .any(|t| toleration_tolerates(t, TAINT_NODE_UNSCHEDULABLE, "", EFFECT_NO_SCHEDULE))
}

#[cfg(test)]
mod tests;

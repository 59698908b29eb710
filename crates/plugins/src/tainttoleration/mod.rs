//! TaintToleration: a node whose `NoSchedule` or `NoExecute` taint the pod does not tolerate
//! is rejected outright; among the rest, nodes with fewer untolerated `PreferNoSchedule`
//! taints score higher.
//!
//! Upstream: pkg/scheduler/framework/plugins/tainttoleration, with the toleration rules of
//! k8s.io/api core/v1 `Toleration.ToleratesTaint` and component-helpers
//! `FindMatchingUntoleratedTaint`. The numeric `Lt`/`Gt` toleration operators (upstream's
//! `TaintTolerationComparisonOperators` feature) are always on here.
//!
//! The toleration matching itself lives in `crate::helper::taints`, shared with
//! NodeUnschedulable.

use std::sync::Arc;

use framework::events::QueueingHintFn;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, NodeInfo, NodeRow, NodeScore, Plugin, PodInfo,
    PreScorePlugin, QueueingHint, ScoreExtensions, ScorePlugin, Snapshot, Status,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

use crate::helper;
use crate::helper::events::{modified_pod, node_change, same_uid};
use crate::helper::taints::{pod_tolerations, tolerations_tolerate_taint};
use crate::names;

pub const NAME: &str = names::TAINT_TOLERATION;

/// CycleState key of the pod's `PreferNoSchedule` tolerations, written by PreScore.
const PRE_SCORE_STATE_KEY: &str = "PreScoreTaintToleration";

/// Filter reason. Since 1.34 upstream no longer names the taint (taint keys and values may
/// be sensitive); it logs it instead.
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

pub(crate) const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
pub(crate) const EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub(crate) const EFFECT_NO_EXECUTE: &str = "NoExecute";

/// Upstream: tainttoleration.TaintToleration.
#[derive(Debug, Default)]
pub struct TaintToleration;

/// Builds the plugin. Upstream has no args type for it and ignores whatever args are given.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(TaintToleration))
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
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

impl SignPlugin for TaintToleration {
    /// Verdicts and scores depend on the pod's tolerations only.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::TOLERATIONS_SIGNER,
            framework::sign::tolerations_signer(&pod.pod),
        )])
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if has_untolerated_do_not_schedule_taint(node.taints(), pod_tolerations(&pod.pod)) {
            Status::unresolvable(ERR_REASON_UNTOLERATED)
        } else {
            Status::success()
        }
    }

    /// A node without taints (the row says so) passes without reading the node.
    fn filter_with_row(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
    ) -> Status {
        if row.has_taints {
            self.filter(state, pod, node)
        } else {
            Status::success()
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        // An empty effect tolerates every effect, PreferNoSchedule included.
        let prefer_no_schedule = pod_tolerations(&pod.pod)
            .iter()
            .filter(|t| {
                let effect = t.effect.as_deref().unwrap_or("");
                effect.is_empty() || effect == EFFECT_PREFER_NO_SCHEDULE
            })
            .cloned()
            .collect();
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { prefer_no_schedule });
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    /// The number of the node's `PreferNoSchedule` taints the pod does not tolerate; reversed
    /// by NormalizeScore so that fewer is better.
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Err(Status::error(format!(
                "failed to read {PRE_SCORE_STATE_KEY:?} from cycleState: not found"
            )));
        };
        Ok(untolerated_prefer_no_schedule(s, node))
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        out: &mut [i64],
    ) -> Result<(), Status> {
        framework::score_nodes_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            out,
            untolerated_prefer_no_schedule,
        )
    }

    /// A node without taints (the row says so) scores 0 without reading the node.
    fn score_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        out: &mut [i64],
    ) -> Result<(), Status> {
        framework::score_rows_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            rows,
            out,
            |s: &PreScoreState, node, row| {
                if row.has_taints {
                    untolerated_prefer_no_schedule(s, node)
                } else {
                    0
                }
            },
        )
    }

    fn score_extensions(&self) -> Option<&dyn ScoreExtensions> {
        Some(self)
    }
}

impl ScoreExtensions for TaintToleration {
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        helper::normalize_to_max(true, scores)
    }
}

impl EnqueueExtensions for TaintToleration {
    /// With queueing hints on (the upstream default), a node event matters only if the pod
    /// now tolerates the node's taints, and a toleration update only for the pod itself.
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

/// Queue when the node (new, or updated) went from having an untolerated
/// `NoSchedule`/`NoExecute` taint to having none.
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = node_change(old, new)?;
    let tolerations = pod_tolerations(pod);
    let was_untolerated =
        original.is_none_or(|n| has_untolerated_do_not_schedule_taint(node_taints(n), tolerations));
    let is_untolerated = has_untolerated_do_not_schedule_taint(node_taints(modified), tolerations);
    if was_untolerated && !is_untolerated {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue when the pod whose tolerations changed is the pending pod itself: a toleration can
/// only be added, and a new one may tolerate the taint that rejected it.
fn is_schedulable_after_pod_toleration_change(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = modified_pod(new)?;
    if same_uid(pod, modified) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// What PreScore computes once per pod: its tolerations that can tolerate a
/// `PreferNoSchedule` taint.
#[derive(Debug, Clone)]
struct PreScoreState {
    prefer_no_schedule: Vec<Toleration>,
}

fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// Whether some `NoSchedule` or `NoExecute` taint is tolerated by none of `tolerations`.
fn has_untolerated_do_not_schedule_taint(taints: &[Taint], tolerations: &[Toleration]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect == EFFECT_NO_SCHEDULE || t.effect == EFFECT_NO_EXECUTE)
        .any(|t| !tolerations_tolerate_taint(tolerations, t))
}

/// The number of the node's `PreferNoSchedule` taints the pod does not tolerate.
fn untolerated_prefer_no_schedule(s: &PreScoreState, node: &NodeInfo) -> i64 {
    let untolerated = node
        .taints()
        .iter()
        .filter(|t| t.effect == EFFECT_PREFER_NO_SCHEDULE)
        .filter(|t| !tolerations_tolerate_taint(&s.prefer_no_schedule, t))
        .count();
    i64::try_from(untolerated).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;

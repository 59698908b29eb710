//! NodeResourcesBalancedAllocation: favours nodes where, once the pod is placed, the
//! configured resources are used in similar proportions.
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go. Each
//! resource's fraction is `requested / allocatable` (real requests, capped at 1); the score is
//! `(1 - std) * 100` truncated, where std is the standard deviation of the fractions: half
//! their difference for two resources, 0 for one. A pod requesting none of the resources is
//! not scored (PreScore returns Skip) so that best-effort pods do not pile onto one node.

use std::sync::Arc;

use framework::{
    ArgsError, CycleState, Handle, NodeInfo, NodeRow, Plugin, PodInfo, PreScorePlugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use framework::{SignFragment, SignPlugin};

use super::args::NodeResourcesBalancedAllocationArgs;
use super::resource_allocation::{is_best_effort, NodeAmounts, ResourceAllocation};
use crate::names;

pub const NAME: &str = names::NODE_RESOURCES_BALANCED_ALLOCATION;

/// Where PreScore keeps the pod's request of each configured resource for Score.
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

/// Upstream: noderesources.BalancedAllocation.
#[derive(Debug)]
pub struct BalancedAllocation {
    resources: ResourceAllocation,
}

/// Builds NodeResourcesBalancedAllocation from its args (absent = cpu and memory).
pub fn new_balanced_allocation(
    args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args = NodeResourcesBalancedAllocationArgs::decode(args).map_err(|e| vec![e])?;
    let errs = args.validate();
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Arc::new(BalancedAllocation {
        resources: ResourceAllocation::new(&args.resources, true),
    }))
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for BalancedAllocation {
    /// Verdicts and scores depend on the pod's requests (see [`super::sign_resources`]).
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        super::sign_resources(pod)
    }
}

impl PreScorePlugin for BalancedAllocation {
    /// Keeps the pod's requests for Score; skips scoring a pod that requests none of the
    /// configured resources.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let pod_requests = self.resources.pod_requests(pod);
        if is_best_effort(&pod_requests) {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { pod_requests });
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    /// Already on 0..=100: no NormalizeScore.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if self.resources.is_empty() {
            return Err(Status::error("resources not found"));
        }
        Ok(match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => balanced_resource_score(&self.resources, node, |i| {
                s.pod_requests.get(i).copied().unwrap_or(0)
            }),
            // Without PreScore the requests are computed here, and a best-effort pod gets 0.
            None => {
                let request = |i| self.resources.pod_request(pod, i);
                let n = self.resources.len();
                if (0..n).all(|i| request(i) == 0) {
                    0
                } else {
                    balanced_resource_score(&self.resources, node, request)
                }
            }
        })
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.resources.is_empty() {
            return Err(Status::error("resources not found"));
        }
        framework::score_nodes_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            out,
            |s: &PreScoreState, node| {
                balanced_resource_score(&self.resources, node, |i| {
                    s.pod_requests.get(i).copied().unwrap_or(0)
                })
            },
        )
    }

    /// Reads the rows when every configured resource is cpu, memory or ephemeral-storage.
    fn score_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.resources.is_empty() || !self.resources.native_only() {
            return self.score_nodes(state, pod, nodes, out);
        }
        framework::score_rows_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            rows,
            out,
            |s: &PreScoreState, _, row| {
                balanced_resource_score(&self.resources, row, |i| {
                    s.pod_requests.get(i).copied().unwrap_or(0)
                })
            },
        )
    }
}

/// The pod's request of each configured resource, in configuration order.
#[derive(Debug, Clone)]
struct PreScoreState {
    pod_requests: Vec<i64>,
}

/// `(1 - std) * 100` of the fractions of the resources the node has, computed in two passes
/// so that scoring allocates nothing; the arithmetic is upstream's, in the same order, so
/// scores match to the last bit.
fn balanced_resource_score<N: NodeAmounts + ?Sized>(
    resources: &ResourceAllocation,
    node: &N,
    pod_request: impl Fn(usize) -> i64,
) -> i64 {
    let fraction = |requested: i64, allocatable: i64| {
        let f = requested as f64 / allocatable as f64;
        if f > 1.0 {
            1.0
        } else {
            f
        }
    };
    let (mut count, mut total) = (0usize, 0.0f64);
    let (mut first, mut second) = (0.0f64, 0.0f64);
    resources.for_each_on_node(node, &pod_request, |_, requested, allocatable| {
        let f = fraction(requested, allocatable);
        total += f;
        match count {
            0 => first = f,
            1 => second = f,
            _ => {}
        }
        count += 1;
    });
    let std = match count {
        0 | 1 => 0.0,
        2 => ((first - second) / 2.0).abs(),
        _ => {
            let mean = total / count as f64;
            let mut sum = 0.0f64;
            resources.for_each_on_node(node, &pod_request, |_, requested, allocatable| {
                let f = fraction(requested, allocatable);
                sum += (f - mean) * (f - mean);
            });
            (sum / count as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

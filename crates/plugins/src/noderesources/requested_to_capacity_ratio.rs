//! RequestedToCapacityRatio: scores each resource's utilization through a user-given
//! piecewise-linear shape.
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources/requested_to_capacity_ratio.go and
//! helper/shape_score.go. Shape scores (0-10) are scaled by 10 to the framework's 0-100.
//! Utilization is `requested * 100 / allocatable` in integers (100 when over-committed).
//! Resources scoring 0 are left out of the weighted mean, which is rounded half away from
//! zero.

use framework::MAX_NODE_SCORE;

use super::args::{UtilizationShapePoint, MAX_CUSTOM_PRIORITY_SCORE};
use super::resource_allocation::{NodeAmounts, ResourceAllocation};

/// Utilization in percent at which a resource is fully used.
const MAX_UTILIZATION: i64 = 100;

/// A broken-linear function given by points with strictly increasing utilization (args
/// validation guarantees it, and at least one point).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionShape(pub(crate) Vec<(i64, i64)>);

impl FunctionShape {
    /// The shape of the args, with scores scaled from 0-10 to 0-100.
    pub(crate) fn from_args(points: &[UtilizationShapePoint]) -> Self {
        let scale = MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE;
        FunctionShape(
            points
                .iter()
                .map(|p| (i64::from(p.utilization), i64::from(p.score) * scale))
                .collect(),
        )
    }

    /// The first point's score at or below its utilization, the last point's score above
    /// its utilization, and integer linear interpolation between points.
    pub(crate) fn eval(&self, utilization: i64) -> i64 {
        let mut previous: Option<(i64, i64)> = None;
        for &(u, s) in &self.0 {
            if utilization <= u {
                return match previous {
                    None => s,
                    Some((pu, ps)) => ps.wrapping_add(
                        s.wrapping_sub(ps)
                            .wrapping_mul(utilization.wrapping_sub(pu))
                            .checked_div(u.wrapping_sub(pu))
                            .unwrap_or(0),
                    ),
                };
            }
            previous = Some((u, s));
        }
        previous.map_or(0, |(_, s)| s)
    }

    pub(crate) fn resource_score(&self, requested: i64, capacity: i64) -> i64 {
        if capacity == 0 || requested > capacity {
            return self.eval(MAX_UTILIZATION);
        }
        self.eval(
            requested
                .wrapping_mul(MAX_UTILIZATION)
                .wrapping_div(capacity),
        )
    }
}

/// The weighted RequestedToCapacityRatio score of `node`.
pub(super) fn score<N: NodeAmounts + ?Sized>(
    shape: &FunctionShape,
    resources: &ResourceAllocation,
    node: &N,
    pod_request: impl Fn(usize) -> i64,
) -> i64 {
    let (mut node_score, mut weight_sum) = (0i64, 0i64);
    resources.for_each_on_node(node, pod_request, |resource, requested, allocatable| {
        let resource_score = shape.resource_score(requested, allocatable);
        if resource_score > 0 {
            node_score = node_score.wrapping_add(resource_score.wrapping_mul(resource.weight));
            weight_sum = weight_sum.wrapping_add(resource.weight);
        }
    });
    if weight_sum == 0 {
        return 0;
    }
    (node_score as f64 / weight_sum as f64).round() as i64
}

//! MostAllocated: favours nodes with the least capacity left once the pod is placed
//! (bin-packing).
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources/most_allocated.go. Per resource
//! `requested * 100 / allocatable` (requests above allocatable count as allocatable, since
//! pods without requests are counted with the non-zero defaults), then the weighted mean.

use framework::MAX_NODE_SCORE;

use super::resource_allocation::{NodeAmounts, ResourceAllocation};

/// The weighted MostAllocated score of `node`.
pub(super) fn score<N: NodeAmounts + ?Sized>(
    resources: &ResourceAllocation,
    node: &N,
    pod_request: impl Fn(usize) -> i64,
) -> i64 {
    let (mut node_score, mut weight_sum) = (0i64, 0i64);
    resources.for_each_on_node(node, pod_request, |resource, requested, allocatable| {
        node_score = node_score.wrapping_add(
            most_requested_score(requested, allocatable).wrapping_mul(resource.weight),
        );
        weight_sum = weight_sum.wrapping_add(resource.weight);
    });
    if weight_sum == 0 {
        return 0;
    }
    node_score.wrapping_div(weight_sum)
}

/// The used share of `capacity`, on 0..=100.
pub(super) fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested
        .min(capacity)
        .wrapping_mul(MAX_NODE_SCORE)
        .wrapping_div(capacity)
}

//! LeastAllocated: favours nodes with the most capacity left once the pod is placed.
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources/least_allocated.go. Per resource
//! `(allocatable - requested) * 100 / allocatable` (0 when over-committed), then the
//! weighted mean, all in integers.

use framework::MAX_NODE_SCORE;

use super::resource_allocation::{NodeAmounts, ResourceAllocation};

/// The weighted LeastAllocated score of `node`.
pub(super) fn score<N: NodeAmounts + ?Sized>(
    resources: &ResourceAllocation,
    node: &N,
    pod_request: impl Fn(usize) -> i64,
) -> i64 {
    let (mut node_score, mut weight_sum) = (0i64, 0i64);
    resources.for_each_on_node(node, pod_request, |resource, requested, allocatable| {
        node_score = node_score.wrapping_add(
            least_requested_score(requested, allocatable).wrapping_mul(resource.weight),
        );
        weight_sum = weight_sum.wrapping_add(resource.weight);
    });
    if weight_sum == 0 {
        return 0;
    }
    node_score.wrapping_div(weight_sum)
}

/// The unused share of `capacity`, on 0..=100.
pub(super) fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    capacity
        .wrapping_sub(requested)
        .wrapping_mul(MAX_NODE_SCORE)
        .wrapping_div(capacity)
}

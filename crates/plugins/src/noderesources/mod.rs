//! The node-resources plugins: NodeResourcesFit (does the pod fit the node's free resources,
//! and how full does it leave the node) and NodeResourcesBalancedAllocation (how evenly does
//! it leave the node's resources used).
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources. Start with [`fit`]; both plugins
//! score through `resource_allocation`, which picks the pod's and the node's amounts of each
//! configured resource; the Fit strategies are one file each, as upstream has them, and
//! [`args`] holds both plugins' arguments with upstream's defaults and validation.

pub mod args;
pub mod balanced_allocation;
pub mod fit;
mod least_allocated;
mod most_allocated;
pub(crate) mod requested_to_capacity_ratio;
mod resource_allocation;

pub use args::{
    NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs, RequestedToCapacityRatioParam,
    ResourceSpec, ScoringStrategy, UtilizationShapePoint,
};
pub use balanced_allocation::{new_balanced_allocation, BalancedAllocation};
pub use fit::{new_fit, Fit};

/// Why a pod asking for an extended resource gets no signature.
pub const ERR_REASON_EXTENDED_NOT_SIGNABLE: &str =
    "pods with extended resources are not signable: a DeviceClass may serve them";

/// The signature fragment of NodeResourcesFit and NodeResourcesBalancedAllocation: the pod's
/// effective requests and the non-zero CPU and memory scoring assumes (two pods with the same
/// totals may split them differently across containers).
///
/// Where this differs from upstream, on purpose: upstream refuses to sign any pod while
/// DRAExtendedResource is on; this scheduler always serves extended resources from
/// DeviceClasses, so it refuses only the pods that ask for an extended resource.
pub(crate) fn sign_resources(
    pod: &framework::PodInfo,
) -> Result<Vec<framework::SignFragment>, framework::Status> {
    let r = &pod.requests;
    if r.scalar_resources
        .keys()
        .any(|name| framework::types::is_extended_resource_name(name))
    {
        return Err(framework::Status::unschedulable(
            ERR_REASON_EXTENDED_NOT_SIGNABLE,
        ));
    }
    Ok(vec![framework::SignFragment::new(
        framework::sign::RESOURCES_SIGNER,
        serde_json::json!({
            "cpu": r.milli_cpu,
            "memory": r.memory,
            "ephemeralStorage": r.ephemeral_storage,
            "scalar": r.scalar_resources,
            "nonZeroCpu": pod.non0_cpu,
            "nonZeroMemory": pod.non0_mem,
        }),
    )])
}

#[cfg(test)]
mod tests;

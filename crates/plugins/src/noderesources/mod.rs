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

#[cfg(test)]
mod tests;

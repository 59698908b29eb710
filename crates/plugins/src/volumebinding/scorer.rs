//! Scoring a node by how full the volumes the pod would use there are.
//!
//! Upstream: pkg/scheduler/framework/plugins/volumebinding/scorer.go. Per storage class, the
//! pod's requested bytes against the capacity (of the matched volumes, or of the
//! CSIStorageCapacity that provisioning would draw from) give a utilization; the shape turns
//! it into 0-100; classes weigh the same and their mean is rounded half away from zero.

use std::collections::BTreeMap;

use crate::noderesources::requested_to_capacity_ratio::FunctionShape;

/// Requested and available bytes of one storage class on one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageResource {
    pub requested: i64,
    pub capacity: i64,
}

/// Storage class name → its resource, ordered so the sum is deterministic.
pub type ClassResources = BTreeMap<String, StorageResource>;

/// The node's score for `classes` under `shape` (scores already scaled to 0-100).
pub(crate) fn score(shape: &FunctionShape, classes: &ClassResources) -> i64 {
    if classes.is_empty() {
        return 0;
    }
    let sum: i64 = classes
        .values()
        .map(|r| shape.resource_score(r.requested, r.capacity))
        .fold(0i64, i64::wrapping_add);
    (sum as f64 / classes.len() as f64).round() as i64
}

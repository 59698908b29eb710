//! Dynamic Resource Allocation: the structured device allocator DynamicResources' Filter
//! calls to allocate a pod's ResourceClaims on one node.
//!
//! Upstream: pkg/scheduler/framework/plugins/dynamicresources and
//! staging/src/k8s.io/dynamic-resource-allocation/structured.

pub mod allocator;

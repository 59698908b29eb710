//! Plugin names, exactly as configuration files spell them.
//!
//! Upstream: pkg/scheduler/framework/plugins/names.

pub const PRIORITY_SORT: &str = "PrioritySort";
pub const DEFAULT_BINDER: &str = "DefaultBinder";
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
pub const DYNAMIC_RESOURCES: &str = "DynamicResources";
pub const IMAGE_LOCALITY: &str = "ImageLocality";
pub const INTER_POD_AFFINITY: &str = "InterPodAffinity";
pub const NODE_AFFINITY: &str = "NodeAffinity";
pub const NODE_NAME: &str = "NodeName";
pub const NODE_PORTS: &str = "NodePorts";
pub const NODE_RESOURCES_BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
pub const NODE_UNSCHEDULABLE: &str = "NodeUnschedulable";
pub const NODE_VOLUME_LIMITS: &str = "NodeVolumeLimits";
pub const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";
pub const SCHEDULING_GATES: &str = "SchedulingGates";
pub const TAINT_TOLERATION: &str = "TaintToleration";
pub const VOLUME_BINDING: &str = "VolumeBinding";
pub const VOLUME_RESTRICTIONS: &str = "VolumeRestrictions";
pub const VOLUME_ZONE: &str = "VolumeZone";

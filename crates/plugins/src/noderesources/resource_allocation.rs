//! What both scoring plugins share: the pod's request and the node's allocatable and
//! requested amount of each configured resource.
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources/resource_allocation.go. NodeResourcesFit
//! scores with the non-zero requests for cpu and memory (100m / 200Mi assumed for containers
//! that request none), so that pods without requests still spread; BalancedAllocation uses
//! the real requests. Every other resource always uses the real requests.

use framework::types::{
    is_scalar_resource_name, RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY,
};
use framework::{NodeInfo, NodeRow, PodInfo};

use super::args::ResourceSpec;

/// What the noderesources plugins read of a node: its [`NodeInfo`], or its [`NodeRow`]
/// (the same numbers in the snapshot's flat array) when no scalar resource is involved.
pub(super) trait NodeAmounts {
    /// Pods on the node.
    fn pod_count(&self) -> i64;
    /// `allocatable` of cpu (millicores), memory, ephemeral-storage and pods.
    fn allocatable_cpu_memory_storage_pods(&self) -> [i64; 4];
    /// `requested` cpu (millicores), memory and ephemeral-storage.
    fn requested_cpu_memory_storage(&self) -> [i64; 3];
    /// `non_zero_requested` cpu (millicores) and memory.
    fn non_zero_cpu_memory(&self) -> [i64; 2];
    /// `(allocatable, requested)` of scalar resource `name`, 0 where absent. A row carries
    /// no scalar resources and answers `(0, 0)`: its callers use a row only when no scalar
    /// resource is involved.
    fn scalar(&self, name: &str) -> (i64, i64);
}

impl NodeAmounts for NodeInfo {
    fn pod_count(&self) -> i64 {
        i64::try_from(self.pods.len()).unwrap_or(i64::MAX)
    }
    fn allocatable_cpu_memory_storage_pods(&self) -> [i64; 4] {
        let a = &self.allocatable;
        [
            a.milli_cpu,
            a.memory,
            a.ephemeral_storage,
            a.allowed_pod_number,
        ]
    }
    fn requested_cpu_memory_storage(&self) -> [i64; 3] {
        let r = &self.requested;
        [r.milli_cpu, r.memory, r.ephemeral_storage]
    }
    fn non_zero_cpu_memory(&self) -> [i64; 2] {
        [
            self.non_zero_requested.milli_cpu,
            self.non_zero_requested.memory,
        ]
    }
    fn scalar(&self, name: &str) -> (i64, i64) {
        let get = |r: &framework::Resource| r.scalar_resources.get(name).copied().unwrap_or(0);
        (get(&self.allocatable), get(&self.requested))
    }
}

impl NodeAmounts for NodeRow {
    fn pod_count(&self) -> i64 {
        i64::from(self.pods)
    }
    fn allocatable_cpu_memory_storage_pods(&self) -> [i64; 4] {
        [
            self.allocatable_milli_cpu,
            self.allocatable_memory,
            self.allocatable_ephemeral_storage,
            self.allowed_pod_number,
        ]
    }
    fn requested_cpu_memory_storage(&self) -> [i64; 3] {
        [
            self.requested_milli_cpu,
            self.requested_memory,
            self.requested_ephemeral_storage,
        ]
    }
    fn non_zero_cpu_memory(&self) -> [i64; 2] {
        [self.non_zero_milli_cpu, self.non_zero_memory]
    }
    fn scalar(&self, _name: &str) -> (i64, i64) {
        (0, 0)
    }
}

/// A configured resource, resolved once so that scoring a node compares no strings.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Cpu,
    Memory,
    EphemeralStorage,
    /// Anything else, looked up among the node's scalar resources. `scalar` says whether the
    /// name is an extended, hugepages, prefixed-native or attachable-volumes resource.
    Other {
        name: String,
        scalar: bool,
    },
}

/// A configured resource and its weight.
#[derive(Debug, Clone)]
pub(super) struct ScoredResource {
    kind: Kind,
    pub(super) weight: i64,
}

/// The configured resources, in configuration order, and which requests to use.
#[derive(Debug, Clone)]
pub(super) struct ResourceAllocation {
    resources: Vec<ScoredResource>,
    /// Real requests for cpu and memory (BalancedAllocation) instead of the non-zero ones
    /// (NodeResourcesFit).
    use_requested: bool,
}

impl ResourceAllocation {
    pub(super) fn new(specs: &[ResourceSpec], use_requested: bool) -> Self {
        let resources = specs
            .iter()
            .map(|spec| ScoredResource {
                kind: match spec.name.as_str() {
                    RESOURCE_CPU => Kind::Cpu,
                    RESOURCE_MEMORY => Kind::Memory,
                    RESOURCE_EPHEMERAL_STORAGE => Kind::EphemeralStorage,
                    other => Kind::Other {
                        name: other.to_string(),
                        scalar: is_scalar_resource_name(other),
                    },
                },
                weight: spec.weight,
            })
            .collect();
        ResourceAllocation {
            resources,
            use_requested,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// Whether every configured resource is cpu, memory or ephemeral-storage: then a
    /// node's [`NodeRow`] holds all that scoring reads.
    pub(super) fn native_only(&self) -> bool {
        self.resources
            .iter()
            .all(|r| !matches!(r.kind, Kind::Other { .. }))
    }

    pub(super) fn len(&self) -> usize {
        self.resources.len()
    }

    /// The pod's request of each configured resource, in configuration order.
    pub(super) fn pod_requests(&self, pod: &PodInfo) -> Vec<i64> {
        (0..self.resources.len())
            .map(|i| self.pod_request(pod, i))
            .collect()
    }

    /// The pod's request of the `i`-th configured resource.
    pub(super) fn pod_request(&self, pod: &PodInfo, i: usize) -> i64 {
        let Some(resource) = self.resources.get(i) else {
            return 0;
        };
        match &resource.kind {
            Kind::Cpu if self.use_requested => pod.requests.milli_cpu,
            Kind::Cpu => pod.non0_cpu,
            Kind::Memory if self.use_requested => pod.requests.memory,
            Kind::Memory => pod.non0_mem,
            Kind::EphemeralStorage => pod.requests.ephemeral_storage,
            Kind::Other { name, .. } => pod.requests.get(name),
        }
    }

    /// Calls `f(resource, requested, allocatable)` for each configured resource the node
    /// has, in configuration order; `requested` includes the pod's request. A resource whose
    /// allocatable is 0 is left out, as is a scalar resource the pod does not request.
    pub(super) fn for_each_on_node<N: NodeAmounts + ?Sized>(
        &self,
        node: &N,
        pod_request: impl Fn(usize) -> i64,
        mut f: impl FnMut(&ScoredResource, i64, i64),
    ) {
        for (i, resource) in self.resources.iter().enumerate() {
            let (allocatable, requested) =
                self.allocatable_requested(node, resource, pod_request(i));
            if allocatable != 0 {
                f(resource, requested, allocatable);
            }
        }
    }

    /// The node's allocatable amount of `resource` and the amount requested on it once the
    /// pod is added; `(0, 0)` when the resource is not scored on this node.
    fn allocatable_requested<N: NodeAmounts + ?Sized>(
        &self,
        node: &N,
        resource: &ScoredResource,
        pod_request: i64,
    ) -> (i64, i64) {
        let [alloc_cpu, alloc_memory, alloc_storage, _] =
            node.allocatable_cpu_memory_storage_pods();
        let [req_cpu, req_memory, req_storage] = node.requested_cpu_memory_storage();
        let [cpu, memory] = if self.use_requested {
            [req_cpu, req_memory]
        } else {
            node.non_zero_cpu_memory()
        };
        match &resource.kind {
            Kind::Cpu => (alloc_cpu, cpu.wrapping_add(pod_request)),
            Kind::Memory => (alloc_memory, memory.wrapping_add(pod_request)),
            Kind::EphemeralStorage => (alloc_storage, req_storage.wrapping_add(pod_request)),
            Kind::Other { scalar: true, .. } if pod_request == 0 => (0, 0),
            // An allocatable of 0 (or none) leaves the resource out, whatever is requested.
            Kind::Other { name, .. } => {
                let (allocatable, requested) = node.scalar(name);
                (allocatable, requested.wrapping_add(pod_request))
            }
        }
    }
}

/// Whether the pod requests none of the configured resources.
pub(super) fn is_best_effort(pod_requests: &[i64]) -> bool {
    pod_requests.iter().all(|&r| r == 0)
}

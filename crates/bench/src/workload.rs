//! The workloads of upstream's scheduler_perf, as data: which nodes, which initial pods,
//! which measured pods, what churns meanwhile, and the floor upstream's CI holds each to.
//!
//! Upstream: test/integration/scheduler_perf/{misc,affinity,topology_spreading}/
//! performance-config.yaml and the object templates under test/integration/scheduler_perf/
//! templates (ours are in `crates/bench/templates/`). Sizes are those of the case upstream
//! sets a `threshold` on; `small` is upstream's smallest (integration-test) case, which the
//! smoke tests run.

use std::time::Duration;

/// An object template: one YAML manifest of a Node, Pod or Service. Instances get the
/// template's `metadata.name`, or its `generateName` followed by a counter.
pub type Template = &'static str;

/// How many objects, pods and measured pods a run creates. Upstream's workload params
/// `initNodes`, `initPods` and `measurePods`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Nodes of the main node group (a workload may add fixed nodes, e.g. the one named
    /// node of SchedulingDaemonset).
    pub nodes: usize,
    /// Initial pods *per initial pod group* (MixedSchedulingBasePod has five groups).
    pub init_pods: usize,
    /// Pods created and timed.
    pub measured_pods: usize,
}

/// How many objects of a group to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Always this many (e.g. one named node).
    Fixed(usize),
    /// [`Sizes::nodes`].
    Nodes,
}

/// Nodes made from one template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeGroup {
    pub count: Count,
    pub template: Template,
    /// Values of `topology.kubernetes.io/zone`, given to the nodes in turn (upstream's
    /// labelNodePrepareStrategy); empty for no zone label.
    pub zones: &'static [&'static str],
}

/// Pods made from one template, in one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodGroup {
    pub template: Template,
    pub namespace: &'static str,
}

/// What a churn does every interval. Upstream: the `churn` opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChurnMode {
    /// Create one object of each template, and keep them.
    Create,
    /// Create one object of each template and delete those of the previous interval.
    Recreate,
}

/// Objects created (and deleted) at a fixed rate while the measured pods are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Churn {
    pub mode: ChurnMode,
    pub templates: &'static [Template],
    pub interval: Duration,
}

/// One upstream workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Upstream's test case name; a variant adds upstream's workload name after a `/`.
    pub name: &'static str,
    /// Upstream's sizes for the case with a threshold.
    pub sizes: Sizes,
    /// Upstream's smallest case, for smoke runs.
    pub small: Sizes,
    pub node_groups: &'static [NodeGroup],
    /// Created and bound, group by group, before the measured pods.
    pub init_pods: &'static [PodGroup],
    pub measured: PodGroup,
    pub churn: Option<Churn>,
    /// Upstream's threshold: the least average pods/s its CI accepts; `None` for the
    /// shapes upstream does not run.
    pub upstream_floor: Option<u32>,
    /// A plugin kubesched does not have yet, without which the workload is not run.
    pub requires: Option<&'static str>,
}

impl Workload {
    /// Nodes created for `sizes`, over all groups.
    pub fn node_count(&self, sizes: Sizes) -> usize {
        self.node_groups
            .iter()
            .map(|g| match g.count {
                Count::Fixed(n) => n,
                Count::Nodes => sizes.nodes,
            })
            .sum()
    }

    /// Initial pods created for `sizes`, over all groups.
    pub fn init_pod_count(&self, sizes: Sizes) -> usize {
        self.init_pods.len() * sizes.init_pods
    }
}

pub mod templates {
    //! The object templates, one manifest each (see `crates/bench/templates/`).
    use super::Template;

    pub const NODE_DEFAULT: Template = include_str!("../templates/node-default.yaml");
    pub const NODE_WITH_NAME: Template = include_str!("../templates/node-with-name.yaml");
    pub const NODE_CHURN: Template = include_str!("../templates/node-churn.yaml");
    pub const POD_DEFAULT: Template = include_str!("../templates/pod-default.yaml");
    pub const DAEMONSET_POD: Template = include_str!("../templates/daemonset-pod.yaml");
    pub const POD_WITH_TOPOLOGY_SPREADING: Template =
        include_str!("../templates/pod-with-topology-spreading.yaml");
    pub const POD_WITH_PREFERRED_TOPOLOGY_SPREADING: Template =
        include_str!("../templates/pod-with-preferred-topology-spreading.yaml");
    pub const POD_WITH_NODE_AFFINITY: Template =
        include_str!("../templates/pod-with-node-affinity.yaml");
    pub const POD_WITH_POD_ANTI_AFFINITY: Template =
        include_str!("../templates/pod-with-pod-anti-affinity.yaml");
    pub const POD_WITH_POD_AFFINITY: Template =
        include_str!("../templates/pod-with-pod-affinity.yaml");
    pub const POD_WITH_PREFERRED_POD_AFFINITY: Template =
        include_str!("../templates/pod-with-preferred-pod-affinity.yaml");
    pub const POD_WITH_PREFERRED_POD_ANTI_AFFINITY: Template =
        include_str!("../templates/pod-with-preferred-pod-anti-affinity.yaml");
    pub const POD_HIGH_PRIORITY_LARGE_CPU: Template =
        include_str!("../templates/pod-high-priority-large-cpu.yaml");
    pub const POD_LOW_PRIORITY: Template = include_str!("../templates/pod-low-priority.yaml");
    pub const POD_HIGH_PRIORITY: Template = include_str!("../templates/pod-high-priority.yaml");
    pub const SERVICE_CHURN: Template = include_str!("../templates/service-churn.yaml");
}

use templates::*;

const fn sizes(nodes: usize, init_pods: usize, measured_pods: usize) -> Sizes {
    Sizes {
        nodes,
        init_pods,
        measured_pods,
    }
}

const DEFAULT_NODES: &[NodeGroup] = &[NodeGroup {
    count: Count::Nodes,
    template: NODE_DEFAULT,
    zones: &[],
}];
/// Upstream labels every node of the affinity workloads `zone1`.
const ZONE1_NODES: &[NodeGroup] = &[NodeGroup {
    count: Count::Nodes,
    template: NODE_DEFAULT,
    zones: &["zone1"],
}];
/// The spreading workloads' three zones.
const THREE_ZONE_NODES: &[NodeGroup] = &[NodeGroup {
    count: Count::Nodes,
    template: NODE_DEFAULT,
    zones: &["moon-1", "moon-2", "moon-3"],
}];

const fn pods(template: Template, namespace: &'static str) -> PodGroup {
    PodGroup {
        template,
        namespace,
    }
}

/// Namespaces of the affinity workloads: initial pods in `sched-0`, measured in `sched-1`
/// (their terms name both).
const SCHED_0: &str = "sched-0";
const SCHED_1: &str = "sched-1";
/// Upstream puts the pods of each `createPods` step without a namespace in a namespace of
/// their own (`namespace-<step>`).
const NS_INIT: &str = "namespace-1";
const NS_MEASURED: &str = "namespace-2";

const BASIC: Workload = Workload {
    name: "SchedulingBasic",
    sizes: sizes(5000, 1000, 10000),
    small: sizes(5, 5, 10),
    node_groups: DEFAULT_NODES,
    init_pods: &[pods(POD_DEFAULT, NS_INIT)],
    measured: pods(POD_DEFAULT, NS_MEASURED),
    churn: None,
    upstream_floor: Some(680),
    requires: None,
};

const TOPOLOGY_SPREADING: Workload = Workload {
    name: "TopologySpreading",
    sizes: sizes(5000, 5000, 5000),
    small: sizes(5, 10, 10),
    node_groups: THREE_ZONE_NODES,
    init_pods: &[pods(POD_DEFAULT, NS_INIT)],
    measured: pods(POD_WITH_TOPOLOGY_SPREADING, NS_MEASURED),
    churn: None,
    upstream_floor: Some(460),
    requires: None,
};

/// Every workload, in the order `--workload all` runs them.
pub const WORKLOADS: &[Workload] = &[
    BASIC,
    Workload {
        name: "SchedulingBasic/5000Nodes_50000Pods",
        sizes: sizes(5000, 5000, 50000),
        upstream_floor: Some(810),
        ..BASIC
    },
    // Three times upstream's largest SchedulingBasic, at Gödel's scale of nodes; upstream
    // runs no case this size, so there is no floor.
    Workload {
        name: "SchedulingBasic/15000Nodes_150000Pods",
        sizes: sizes(15000, 15000, 150000),
        upstream_floor: None,
        ..BASIC
    },
    Workload {
        name: "SchedulingDaemonset",
        sizes: sizes(15000, 0, 30000),
        small: sizes(5, 0, 10),
        node_groups: &[
            NodeGroup {
                count: Count::Fixed(1),
                template: NODE_WITH_NAME,
                zones: &[],
            },
            NodeGroup {
                count: Count::Nodes,
                template: NODE_DEFAULT,
                zones: &[],
            },
        ],
        init_pods: &[],
        measured: pods(DAEMONSET_POD, NS_INIT),
        churn: None,
        upstream_floor: Some(1100),
        requires: None,
    },
    TOPOLOGY_SPREADING,
    Workload {
        name: "TopologySpreading/15000Nodes_15000Pods",
        sizes: sizes(15000, 15000, 15000),
        upstream_floor: None,
        ..TOPOLOGY_SPREADING
    },
    Workload {
        name: "PreferredTopologySpreading",
        sizes: sizes(5000, 5000, 5000),
        small: sizes(5, 10, 10),
        node_groups: THREE_ZONE_NODES,
        init_pods: &[pods(POD_DEFAULT, NS_INIT)],
        measured: pods(POD_WITH_PREFERRED_TOPOLOGY_SPREADING, NS_MEASURED),
        churn: None,
        upstream_floor: Some(340),
        requires: None,
    },
    Workload {
        name: "SchedulingNodeAffinity",
        sizes: sizes(5000, 5000, 10000),
        small: sizes(5, 5, 10),
        node_groups: ZONE1_NODES,
        init_pods: &[pods(POD_WITH_NODE_AFFINITY, NS_INIT)],
        measured: pods(POD_WITH_NODE_AFFINITY, NS_MEASURED),
        churn: None,
        upstream_floor: Some(220),
        requires: None,
    },
    Workload {
        name: "SchedulingPodAntiAffinity",
        sizes: sizes(5000, 1000, 2000),
        small: sizes(5, 1, 4),
        node_groups: DEFAULT_NODES,
        init_pods: &[pods(POD_WITH_POD_ANTI_AFFINITY, SCHED_0)],
        measured: pods(POD_WITH_POD_ANTI_AFFINITY, SCHED_1),
        churn: None,
        upstream_floor: Some(60),
        requires: None,
    },
    Workload {
        name: "SchedulingPodAffinity",
        sizes: sizes(5000, 5000, 5000),
        small: sizes(5, 5, 10),
        node_groups: ZONE1_NODES,
        init_pods: &[pods(POD_WITH_POD_AFFINITY, SCHED_0)],
        measured: pods(POD_WITH_POD_AFFINITY, SCHED_1),
        churn: None,
        upstream_floor: Some(35),
        requires: None,
    },
    Workload {
        name: "SchedulingPreferredPodAffinity",
        sizes: sizes(5000, 5000, 5000),
        small: sizes(5, 5, 10),
        node_groups: DEFAULT_NODES,
        init_pods: &[pods(POD_WITH_PREFERRED_POD_AFFINITY, SCHED_0)],
        measured: pods(POD_WITH_PREFERRED_POD_AFFINITY, SCHED_1),
        churn: None,
        upstream_floor: Some(90),
        requires: None,
    },
    Workload {
        name: "SchedulingPreferredPodAntiAffinity",
        sizes: sizes(5000, 5000, 5000),
        small: sizes(5, 5, 10),
        node_groups: DEFAULT_NODES,
        init_pods: &[pods(POD_WITH_PREFERRED_POD_ANTI_AFFINITY, SCHED_0)],
        measured: pods(POD_WITH_PREFERRED_POD_ANTI_AFFINITY, SCHED_1),
        churn: None,
        upstream_floor: Some(90),
        requires: None,
    },
    Workload {
        name: "MixedSchedulingBasePod",
        // Five initial groups of 2,000: 10,000 initial pods.
        sizes: sizes(5000, 2000, 5000),
        small: sizes(5, 2, 10),
        node_groups: ZONE1_NODES,
        init_pods: &[
            pods(POD_DEFAULT, SCHED_0),
            pods(POD_WITH_POD_AFFINITY, SCHED_0),
            pods(POD_WITH_POD_ANTI_AFFINITY, SCHED_0),
            pods(POD_WITH_PREFERRED_POD_AFFINITY, SCHED_0),
            pods(POD_WITH_PREFERRED_POD_ANTI_AFFINITY, SCHED_0),
        ],
        measured: pods(POD_DEFAULT, NS_MEASURED),
        churn: None,
        upstream_floor: Some(140),
        requires: None,
    },
    Workload {
        name: "Unschedulable",
        sizes: sizes(5000, 100, 10000),
        small: sizes(5, 1, 10),
        node_groups: DEFAULT_NODES,
        init_pods: &[pods(POD_DEFAULT, NS_INIT)],
        measured: pods(POD_DEFAULT, NS_MEASURED),
        churn: Some(Churn {
            mode: ChurnMode::Create,
            templates: &[POD_HIGH_PRIORITY_LARGE_CPU],
            interval: Duration::from_millis(200),
        }),
        upstream_floor: Some(590),
        requires: None,
    },
    Workload {
        name: "SchedulingWithMixedChurn",
        sizes: sizes(5000, 0, 10000),
        small: sizes(10, 0, 100),
        node_groups: DEFAULT_NODES,
        init_pods: &[],
        measured: pods(POD_DEFAULT, NS_MEASURED),
        churn: Some(Churn {
            mode: ChurnMode::Recreate,
            templates: &[NODE_CHURN, POD_HIGH_PRIORITY_LARGE_CPU, SERVICE_CHURN],
            interval: Duration::from_secs(1),
        }),
        upstream_floor: Some(710),
        requires: None,
    },
    Workload {
        name: "PreemptionAsync",
        sizes: sizes(5000, 20000, 5000),
        small: sizes(5, 20, 5),
        node_groups: DEFAULT_NODES,
        init_pods: &[pods(POD_LOW_PRIORITY, NS_INIT)],
        measured: pods(POD_DEFAULT, NS_MEASURED),
        churn: Some(Churn {
            mode: ChurnMode::Create,
            templates: &[POD_HIGH_PRIORITY],
            interval: Duration::from_millis(200),
        }),
        upstream_floor: Some(570),
        requires: None,
    },
];

/// The workload named `name` (exactly as in [`WORKLOADS`]).
pub fn find(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// Every workload name, then `all`: the values `--workload` accepts.
pub fn names_and_all() -> Vec<&'static str> {
    WORKLOADS
        .iter()
        .map(|w| w.name)
        .chain(std::iter::once("all"))
        .collect()
}

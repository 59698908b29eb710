//! `Simulation::capacity` on small clusters written as YAML: one case per thing that
//! decides how many copies fit, each compared whole (count, copies per node, what stopped
//! them, what became of the snapshot's pending pods).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use framework::{ArgsError, CycleState, Handle, PermitPlugin, Plugin, PodInfo, Status};
use rstest::rstest;

use super::{CapacityError, CapacityOptions, CapacityStop};
use crate::builder::SchedulerBuilder;
use crate::simulate::{ClusterInput, PodResult, Simulation};

/// Two nodes with 2 CPUs and room for 110 pods each.
const TWO_NODES: &str = "
{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
---
{apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
";

/// A pod asking for half a CPU.
const WEB: &str = "{apiVersion: v1, kind: Pod, metadata: {name: web, labels: {app: web}}, \
                   spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}}";

/// What a run answered: copies placed, per node, the stop, and each pending pod of the
/// snapshot as `(namespace/name, result, node)`.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    replicas: usize,
    nodes: Vec<(String, usize)>,
    stop: CapacityStop,
    pending: Vec<(String, PodResult, Option<String>)>,
}

/// The objects of `yaml`: flow-style YAML documents (a leading `---` keeps the first from
/// being read as JSON).
/// A Permit plugin that asks every pod to wait (for a minute of a clock that stands still).
struct WaitAtPermit;

const WAIT_AT_PERMIT: &str = "WaitAtPermit";

impl Plugin for WaitAtPermit {
    fn name(&self) -> &'static str {
        WAIT_AT_PERMIT
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        Some(self)
    }
}

impl PermitPlugin for WaitAtPermit {
    fn permit(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> (Status, Duration) {
        (
            Status::new(framework::Code::Wait, ""),
            Duration::from_secs(60),
        )
    }
}

fn new_wait_at_permit(
    _: Option<&serde_json::Value>,
    _: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(WaitAtPermit))
}

fn input(yaml: &str) -> ClusterInput {
    let mut input = ClusterInput::default();
    input
        .add_text(
            &format!("---\n{yaml}"),
            Path::new("cluster.yaml"),
            &mut HashMap::new(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    input.resolve_priorities().unwrap_or_else(|e| panic!("{e}"));
    input
}

/// Runs `--capacity` of the pod `template` on `cluster` with `config` (default profile when
/// empty).
fn capacity(
    config: &str,
    cluster: &str,
    template: &str,
    max_replicas: Option<usize>,
) -> Result<Answer, CapacityError> {
    let config = if config.is_empty() {
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    } else {
        config
    };
    let mut registry = plugins::in_tree_registry();
    registry.insert(WAIT_AT_PERMIT, Arc::new(new_wait_at_permit));
    let cfg =
        crate::config::load_str_with(config, "test", &registry).unwrap_or_else(|e| panic!("{e}"));
    let simulation = Simulation::new(
        SchedulerBuilder::new(cfg, "test")
            .registry(registry)
            .seed(1)
            .parallelism(1),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut pod = input(template).pods;
    let template = pod.pop().unwrap_or_else(|| panic!("no pod in {template}"));
    let report =
        simulation.capacity(&input(cluster), &template, CapacityOptions { max_replicas })?;
    Ok(Answer {
        replicas: report.replicas,
        nodes: report.nodes,
        stop: report.stop,
        pending: report
            .pending
            .pods
            .into_iter()
            .map(|p| (format!("{}/{}", p.namespace, p.name), p.result, p.node))
            .collect(),
    })
}

fn nodes(counts: &[(&str, usize)]) -> Vec<(String, usize)> {
    counts.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

fn unschedulable(message: &str, counts: &[(&str, usize)]) -> CapacityStop {
    CapacityStop::Unschedulable {
        message: message.to_string(),
        reason_counts: counts.iter().map(|(r, c)| (r.to_string(), *c)).collect(),
    }
}

#[rstest]
#[case::copies_fit_by_cpu_until_every_node_is_full(
    "",
    TWO_NODES,
    WEB,
    None,
    Answer {
        replicas: 8,
        nodes: nodes(&[("n1", 4), ("n2", 4)]),
        stop: unschedulable(
            "0/2 nodes are available: 2 Insufficient cpu.",
            &[("Insufficient cpu", 2)],
        ),
        pending: vec![],
    },
)]
#[case::tainted_node_takes_no_copies_and_is_named_in_the_message(
    "",
    &format!("{TWO_NODES}---
{{apiVersion: v1, kind: Node, metadata: {{name: n3}}, spec: {{taints: [{{key: dedicated, value: gpu, effect: NoSchedule}}]}}, status: {{allocatable: {{cpu: '8', pods: '110'}}}}}}
"),
    WEB,
    None,
    Answer {
        replicas: 8,
        nodes: nodes(&[("n1", 4), ("n2", 4)]),
        stop: unschedulable(
            "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu.",
            &[("node(s) had untolerated taint(s)", 1), ("Insufficient cpu", 2)],
        ),
        pending: vec![],
    },
)]
#[case::pods_per_node_bound_copies_that_request_nothing(
    "",
    "{apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '2', pods: '3'}}}
---
{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: '2', pods: '2'}}}
---
{apiVersion: v1, kind: Pod, metadata: {name: running}, spec: {nodeName: n1, containers: [{name: c}]}}
",
    "{apiVersion: v1, kind: Pod, metadata: {name: idle}, spec: {containers: [{name: c}]}}",
    None,
    Answer {
        replicas: 4,
        nodes: nodes(&[("n1", 2), ("n2", 2)]),
        stop: unschedulable(
            "0/2 nodes are available: 2 Too many pods.",
            &[("Too many pods", 2)],
        ),
        pending: vec![],
    },
)]
#[case::max_replicas_stops_before_the_cluster_is_full(
    "",
    TWO_NODES,
    WEB,
    Some(3),
    Answer {
        replicas: 3,
        nodes: nodes(&[("n1", 1), ("n2", 2)]),
        stop: CapacityStop::MaxReplicas(3),
        pending: vec![],
    },
)]
#[case::topology_spread_keeps_copies_within_max_skew_of_the_small_zone(
    "",
    "{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: '4', pods: '110'}}}
---
{apiVersion: v1, kind: Node, metadata: {name: n2, labels: {topology.kubernetes.io/zone: b}}, status: {allocatable: {cpu: '1', pods: '110'}}}
",
    "{apiVersion: v1, kind: Pod, metadata: {name: web, labels: {app: web}}, spec: {
       topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone,
         whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}],
       containers: [{name: c, resources: {requests: {cpu: 500m}}}]}}",
    None,
    Answer {
        replicas: 5,
        nodes: nodes(&[("n1", 3), ("n2", 2)]),
        stop: unschedulable(
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread constraints.",
            &[("Insufficient cpu", 1), ("node(s) didn't match pod topology spread constraints", 1)],
        ),
        pending: vec![],
    },
)]
#[case::node_name_of_the_pod_is_not_copied(
    "",
    TWO_NODES,
    "{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {nodeName: n2,
       containers: [{name: c, resources: {requests: {cpu: '1'}}}]}, status: {phase: Running}}",
    None,
    Answer {
        replicas: 4,
        nodes: nodes(&[("n1", 2), ("n2", 2)]),
        stop: unschedulable(
            "0/2 nodes are available: 2 Insufficient cpu.",
            &[("Insufficient cpu", 2)],
        ),
        pending: vec![],
    },
)]
#[case::pending_pods_of_the_snapshot_are_placed_first(
    "",
    &format!("{TWO_NODES}---
{{apiVersion: v1, kind: Pod, metadata: {{name: big}}, spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '2'}}}}}}]}}}}
---
{{apiVersion: v1, kind: Pod, metadata: {{name: too-big}}, spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '3'}}}}}}]}}}}
"),
    WEB,
    None,
    Answer {
        replicas: 4,
        nodes: nodes(&[("n1", 4)]),
        stop: unschedulable(
            "0/2 nodes are available: 2 Insufficient cpu.",
            &[("Insufficient cpu", 2)],
        ),
        pending: vec![
            ("default/big".into(), PodResult::Scheduled, Some("n2".into())),
            ("default/too-big".into(), PodResult::Unschedulable, None),
        ],
    },
)]
#[case::copy_names_pass_over_pods_of_the_snapshot(
    "",
    &format!("{TWO_NODES}---
{{apiVersion: v1, kind: Pod, metadata: {{name: web-0}}, spec: {{nodeName: n1, containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}}}
"),
    WEB,
    None,
    Answer {
        replicas: 6,
        nodes: nodes(&[("n1", 2), ("n2", 4)]),
        stop: unschedulable(
            "0/2 nodes are available: 2 Insufficient cpu.",
            &[("Insufficient cpu", 2)],
        ),
        pending: vec![],
    },
)]
#[case::copies_never_preempt_lower_priority_pods(
    "",
    "{apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '2', pods: '110'}}}
---
{apiVersion: v1, kind: Pod, metadata: {name: low}, spec: {nodeName: n1, priority: 0, containers: [{name: c, resources: {requests: {cpu: '2'}}}]}}
",
    "{apiVersion: v1, kind: Pod, metadata: {name: urgent}, spec: {priority: 1000,
       containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}",
    None,
    Answer {
        replicas: 0,
        nodes: vec![],
        stop: unschedulable(
            "0/1 nodes are available: 1 Insufficient cpu.",
            &[("Insufficient cpu", 1)],
        ),
        pending: vec![],
    },
)]
#[case::scheduler_name_picks_the_profile(
    "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}}
",
    TWO_NODES,
    "{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {schedulerName: bin-packing,
       containers: [{name: c, resources: {requests: {cpu: 500m}}}]}}",
    Some(4),
    Answer {
        replicas: 4,
        nodes: nodes(&[("n2", 4)]),
        stop: CapacityStop::MaxReplicas(4),
        pending: vec![],
    },
)]
#[case::without_node_resources_fit_the_nodes_pod_slots_end_the_run(
    "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{name: NodeResourcesFit}]
",
    "{apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '2', pods: '2'}}}
---
{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: '2', pods: '2'}}}
",
    "{apiVersion: v1, kind: Pod, metadata: {name: idle}, spec: {containers: [{name: c}]}}",
    None,
    Answer {
        replicas: 5,
        nodes: nodes(&[("n1", 2), ("n2", 3)]),
        stop: CapacityStop::PodSlots(4),
        pending: vec![],
    },
)]
#[case::permit_wait_rejects_the_copy_instead_of_hanging_on_a_runtime_without_timers(
    "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    permit:
      enabled: [{name: WaitAtPermit}]
",
    TWO_NODES,
    WEB,
    None,
    Answer {
        replicas: 0,
        nodes: vec![],
        stop: unschedulable(
            "permit plugin(s) WaitAtPermit asked the pod to wait; simulate does not wait",
            &[],
        ),
        pending: vec![],
    },
)]
fn how_many_copies_fit(
    #[case] config: &str,
    #[case] cluster: &str,
    #[case] template: &str,
    #[case] max_replicas: Option<usize>,
    #[case] want: Answer,
) {
    let got = capacity(config, cluster, template, max_replicas).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, want);
}

#[rstest]
#[case::scheduler_name_without_a_profile(
    "{apiVersion: v1, kind: Pod, metadata: {name: web, namespace: prod}, spec: {schedulerName: other, containers: [{name: c}]}}",
    "pod prod/web: spec.schedulerName \"other\" is not a profile of this scheduler (profiles: default-scheduler)"
)]
#[case::scheduling_gates_hold_every_copy_back(
    "{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {schedulingGates: [{name: example.com/quota}], containers: [{name: c}]}}",
    "pod default/web would never be scheduled: waiting for scheduling gates: [example.com/quota]"
)]
fn pod_that_cannot_be_copied_is_refused(#[case] template: &str, #[case] want: &str) {
    let got = capacity("", TWO_NODES, template, None).map(|a| a.replicas);
    assert_eq!(got.map_err(|e| e.to_string()), Err(want.to_string()));
}

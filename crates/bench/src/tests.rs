//! The workload definitions against upstream's sizes and floors, a smoke run of every
//! workload at upstream's smallest sizes (so the benchmark cannot rot), and the report's
//! arithmetic and output. No timing is asserted.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use rstest::rstest;

use crate::http::ClientLimits;
use crate::objects::{self, Object};
use crate::report::{self, Latency, Report, RunStatus, Throughput};
use crate::workload::{self, ChurnMode, Sizes, WORKLOADS};
use crate::{external, in_process, peak_rss, process, RunOptions, SchedulerSetup};

fn sizes(nodes: usize, init_pods: usize, measured_pods: usize) -> Sizes {
    Sizes {
        nodes,
        init_pods,
        measured_pods,
    }
}

// ---- definitions ------------------------------------------------------------------------

/// (sizes, nodes created, initial pods created, floor) as upstream's performance-config.yaml
/// sets them for the case with a threshold.
#[rstest]
#[case::basic("SchedulingBasic", sizes(5000, 1000, 10000), 5000, 1000, Some(680))]
#[case::basic_50000_pods(
    "SchedulingBasic/5000Nodes_50000Pods",
    sizes(5000, 5000, 50000),
    5000,
    5000,
    Some(810)
)]
#[case::basic_15000_nodes_150000_pods_has_no_upstream_floor(
    "SchedulingBasic/15000Nodes_150000Pods",
    sizes(15000, 15000, 150000),
    15000,
    15000,
    None
)]
#[case::daemonset_adds_the_named_node(
    "SchedulingDaemonset",
    sizes(15000, 0, 30000),
    15001,
    0,
    Some(1100)
)]
#[case::topology_spreading("TopologySpreading", sizes(5000, 5000, 5000), 5000, 5000, Some(460))]
#[case::topology_spreading_15000_nodes_has_no_upstream_floor(
    "TopologySpreading/15000Nodes_15000Pods",
    sizes(15000, 15000, 15000),
    15000,
    15000,
    None
)]
#[case::preferred_topology_spreading(
    "PreferredTopologySpreading",
    sizes(5000, 5000, 5000),
    5000,
    5000,
    Some(340)
)]
#[case::node_affinity(
    "SchedulingNodeAffinity",
    sizes(5000, 5000, 10000),
    5000,
    5000,
    Some(220)
)]
#[case::pod_anti_affinity(
    "SchedulingPodAntiAffinity",
    sizes(5000, 1000, 2000),
    5000,
    1000,
    Some(60)
)]
#[case::pod_affinity("SchedulingPodAffinity", sizes(5000, 5000, 5000), 5000, 5000, Some(35))]
#[case::preferred_pod_affinity(
    "SchedulingPreferredPodAffinity",
    sizes(5000, 5000, 5000),
    5000,
    5000,
    Some(90)
)]
#[case::preferred_pod_anti_affinity(
    "SchedulingPreferredPodAntiAffinity",
    sizes(5000, 5000, 5000),
    5000,
    5000,
    Some(90)
)]
#[case::mixed_has_five_initial_groups_of_2000(
    "MixedSchedulingBasePod",
    sizes(5000, 2000, 5000),
    5000,
    10000,
    Some(140)
)]
#[case::unschedulable("Unschedulable", sizes(5000, 100, 10000), 5000, 100, Some(590))]
#[case::mixed_churn("SchedulingWithMixedChurn", sizes(5000, 0, 10000), 5000, 0, Some(710))]
#[case::preemption_async("PreemptionAsync", sizes(5000, 20000, 5000), 5000, 20000, Some(570))]
fn workload_matches_upstream(
    #[case] name: &str,
    #[case] expected_sizes: Sizes,
    #[case] nodes: usize,
    #[case] init_pods: usize,
    #[case] floor: Option<u32>,
) {
    let w = workload::find(name).unwrap();
    assert_eq!(
        (
            w.sizes,
            w.node_count(w.sizes),
            w.init_pod_count(w.sizes),
            w.upstream_floor
        ),
        (expected_sizes, nodes, init_pods, floor)
    );
}

#[test]
fn every_workload_is_defined_once_in_upstreams_order() {
    let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
    assert_eq!(
        names,
        [
            "SchedulingBasic",
            "SchedulingBasic/5000Nodes_50000Pods",
            "SchedulingBasic/15000Nodes_150000Pods",
            "SchedulingDaemonset",
            "TopologySpreading",
            "TopologySpreading/15000Nodes_15000Pods",
            "PreferredTopologySpreading",
            "SchedulingNodeAffinity",
            "SchedulingPodAntiAffinity",
            "SchedulingPodAffinity",
            "SchedulingPreferredPodAffinity",
            "SchedulingPreferredPodAntiAffinity",
            "MixedSchedulingBasePod",
            "Unschedulable",
            "SchedulingWithMixedChurn",
            "PreemptionAsync",
        ]
    );
}

/// A churn as (mode, templates, interval).
type ChurnSummary = (ChurnMode, usize, Duration);

#[test]
fn churn_and_requirements_are_upstreams() {
    let summary: Vec<(&str, Option<ChurnSummary>, Option<&str>)> = WORKLOADS
        .iter()
        .filter(|w| w.churn.is_some() || w.requires.is_some())
        .map(|w| {
            (
                w.name,
                w.churn.map(|c| (c.mode, c.templates.len(), c.interval)),
                w.requires,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "Unschedulable",
                Some((ChurnMode::Create, 1, Duration::from_millis(200))),
                None
            ),
            (
                "SchedulingWithMixedChurn",
                Some((ChurnMode::Recreate, 3, Duration::from_secs(1))),
                None
            ),
            (
                "PreemptionAsync",
                Some((ChurnMode::Create, 1, Duration::from_millis(200))),
                None
            ),
        ]
    );
}

fn requests(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<(String, String)> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref())
        .flatten()
        .map(|(k, Quantity(v))| (k.clone(), v.clone()))
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[rstest]
#[case::default(workload::templates::POD_DEFAULT, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::spreading(workload::templates::POD_WITH_TOPOLOGY_SPREADING, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::preferred_spreading(workload::templates::POD_WITH_PREFERRED_TOPOLOGY_SPREADING, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::node_affinity(workload::templates::POD_WITH_NODE_AFFINITY, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::anti_affinity(workload::templates::POD_WITH_POD_ANTI_AFFINITY, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::affinity(workload::templates::POD_WITH_POD_AFFINITY, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::preferred_affinity(workload::templates::POD_WITH_PREFERRED_POD_AFFINITY, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::preferred_anti_affinity(workload::templates::POD_WITH_PREFERRED_POD_ANTI_AFFINITY, &[("cpu", "100m"), ("memory", "500Mi")])]
#[case::daemonset_requests_nothing(workload::templates::DAEMONSET_POD, &[])]
#[case::large_cpu_fits_no_node(workload::templates::POD_HIGH_PRIORITY_LARGE_CPU, &[("cpu", "9"), ("memory", "500Mi")])]
#[case::low_priority(workload::templates::POD_LOW_PRIORITY, &[("cpu", "900m"), ("memory", "500Mi")])]
#[case::high_priority(workload::templates::POD_HIGH_PRIORITY, &[("cpu", "3000m"), ("memory", "500Mi")])]
fn pod_template_requests(#[case] template: &'static str, #[case] expected: &[(&str, &str)]) {
    let pod = objects::parse_pod(template).unwrap();
    assert_eq!(requests(&pod), pairs(expected));
}

#[test]
fn node_instances_are_named_labelled_and_allocatable_as_upstreams_nodes() {
    let template = objects::parse_node(workload::templates::NODE_DEFAULT).unwrap();
    let node = objects::node_instance(&template, 7, Some("moon-2"));
    let status = node.status.unwrap();
    let quantities = |m: Option<std::collections::BTreeMap<String, Quantity>>| {
        m.unwrap_or_default()
            .into_iter()
            .map(|(k, Quantity(v))| (k, v))
            .collect::<Vec<_>>()
    };
    let expected = pairs(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")]);
    assert_eq!(
        (
            node.metadata.name,
            node.metadata
                .labels
                .unwrap_or_default()
                .into_iter()
                .collect::<Vec<_>>(),
            quantities(status.capacity),
            quantities(status.allocatable),
        ),
        (
            Some("scheduler-perf-7".to_string()),
            pairs(&[
                ("kubernetes.io/hostname", "scheduler-perf-7"),
                ("topology.kubernetes.io/zone", "moon-2")
            ]),
            expected.clone(),
            expected,
        )
    );
}

#[test]
fn every_template_parses_as_its_kind() {
    let kinds: Vec<&str> = WORKLOADS
        .iter()
        .flat_map(|w| {
            w.node_groups
                .iter()
                .map(|g| g.template)
                .chain(w.init_pods.iter().map(|g| g.template))
                .chain(std::iter::once(w.measured.template))
                .chain(w.churn.iter().flat_map(|c| c.templates.iter().copied()))
        })
        .map(|t| match objects::parse(t).unwrap() {
            Object::Node(_) => "Node",
            Object::Pod(_) => "Pod",
            Object::Service(_) => "Service",
        })
        .collect();
    assert!(kinds.contains(&"Service"));
    assert_eq!(kinds.len(), 56);
}

// ---- smoke runs -------------------------------------------------------------------------

/// What a smoke run must show: every measured pod bound, with samples and latencies.
#[derive(Debug, PartialEq)]
struct Outcome {
    status: RunStatus,
    reason: Option<String>,
    nodes: usize,
    init_pods: usize,
    measured_pods: usize,
    scheduled_pods: usize,
    has_throughput: bool,
    has_latency: bool,
    client_qps: String,
}

fn outcome(r: &Report) -> Outcome {
    Outcome {
        status: r.status,
        reason: r.reason.clone(),
        nodes: r.nodes,
        init_pods: r.init_pods,
        measured_pods: r.measured_pods,
        scheduled_pods: r.scheduled_pods,
        has_throughput: r.pods_per_second.is_some() && !r.samples.is_empty(),
        has_latency: r.attempt_latency_ms.is_some(),
        client_qps: r.client_qps.clone(),
    }
}

fn bound(nodes: usize, init_pods: usize, measured: usize) -> Outcome {
    Outcome {
        status: RunStatus::Ok,
        reason: None,
        nodes,
        init_pods,
        measured_pods: measured,
        scheduled_pods: measured,
        has_throughput: true,
        has_latency: true,
        client_qps: "n/a".into(),
    }
}

fn run_small(name: &str, options: RunOptions) -> Report {
    let w = workload::find(name).unwrap();
    let mut phases = Vec::new();
    let r = in_process::run(w, w.small, &options, &mut |p| phases.push(p.phase)).unwrap();
    if r.status != RunStatus::Skipped {
        assert_eq!(phases.first(), Some(&crate::Phase::Nodes), "{phases:?}");
    }
    r
}

fn smoke() -> RunOptions {
    RunOptions {
        timeout: Duration::from_secs(60),
        ..RunOptions::default()
    }
}

#[rstest]
#[case::basic("SchedulingBasic", bound(5, 5, 10))]
#[case::basic_50000_pods("SchedulingBasic/5000Nodes_50000Pods", bound(5, 5, 10))]
#[case::daemonset("SchedulingDaemonset", bound(6, 0, 10))]
#[case::topology_spreading("TopologySpreading", bound(5, 10, 10))]
#[case::preferred_topology_spreading("PreferredTopologySpreading", bound(5, 10, 10))]
#[case::node_affinity("SchedulingNodeAffinity", bound(5, 5, 10))]
#[case::pod_anti_affinity("SchedulingPodAntiAffinity", bound(5, 1, 4))]
#[case::pod_affinity("SchedulingPodAffinity", bound(5, 5, 10))]
#[case::preferred_pod_affinity("SchedulingPreferredPodAffinity", bound(5, 5, 10))]
#[case::preferred_pod_anti_affinity("SchedulingPreferredPodAntiAffinity", bound(5, 5, 10))]
#[case::mixed("MixedSchedulingBasePod", bound(5, 10, 10))]
#[case::unschedulable("Unschedulable", bound(5, 1, 10))]
#[case::mixed_churn("SchedulingWithMixedChurn", bound(10, 0, 100))]
#[case::preemption_async("PreemptionAsync", bound(5, 20, 5))]
fn smoke_run_at_upstreams_smallest_size(#[case] name: &str, #[case] expected: Outcome) {
    assert_eq!(outcome(&run_small(name, smoke())), expected);
}

/// The same smoke runs through the local API server and `run`'s code path (`--mode http`).
#[rstest]
#[case::basic("SchedulingBasic", bound(5, 5, 10))]
#[case::daemonset("SchedulingDaemonset", bound(6, 0, 10))]
#[case::topology_spreading("TopologySpreading", bound(5, 10, 10))]
#[case::preferred_topology_spreading("PreferredTopologySpreading", bound(5, 10, 10))]
#[case::node_affinity("SchedulingNodeAffinity", bound(5, 5, 10))]
#[case::pod_anti_affinity("SchedulingPodAntiAffinity", bound(5, 1, 4))]
#[case::pod_affinity("SchedulingPodAffinity", bound(5, 5, 10))]
#[case::preferred_pod_affinity("SchedulingPreferredPodAffinity", bound(5, 5, 10))]
#[case::preferred_pod_anti_affinity("SchedulingPreferredPodAntiAffinity", bound(5, 5, 10))]
#[case::mixed("MixedSchedulingBasePod", bound(5, 10, 10))]
#[case::unschedulable("Unschedulable", bound(5, 1, 10))]
#[case::mixed_churn("SchedulingWithMixedChurn", bound(10, 0, 100))]
#[case::preemption_async("PreemptionAsync", bound(5, 20, 5))]
fn smoke_run_over_http(#[case] name: &str, #[case] expected: Outcome) {
    let w = workload::find(name).unwrap();
    let r = in_process::run_on(
        w,
        w.small,
        &smoke(),
        &mut |_| {},
        &|| Ok(std::sync::Arc::new(crate::http::Http::new()?) as _),
        "http",
    )
    .unwrap();
    assert_eq!(
        (r.mode, outcome(&r)),
        (
            "http",
            Outcome {
                client_qps: "5000".into(),
                ..expected
            }
        )
    );
}

#[test]
fn measured_pods_that_cannot_all_fit_time_out() {
    // Required anti-affinity on hostname: two nodes hold two green pods, the initial one
    // and one measured; the other three measured pods never fit.
    let w = workload::find("SchedulingPodAntiAffinity").unwrap();
    let options = RunOptions {
        timeout: Duration::from_secs(2),
        ..RunOptions::default()
    };
    let r = in_process::run(w, sizes(2, 1, 4), &options, &mut |_| {}).unwrap();
    assert_eq!(
        (r.status, r.reason.as_deref(), r.scheduled_pods),
        (
            RunStatus::TimedOut,
            Some("1 of 4 measured pods bound in 2s"),
            1
        )
    );
}

// ---- report -----------------------------------------------------------------------------

#[rstest]
#[case::one_sample(&[700.0], Some(Throughput { average: 700.0, p50: 700.0, p90: 700.0, p99: 700.0 }))]
#[case::nearest_rank(
    &[10.0, 40.0, 20.0, 30.0],
    Some(Throughput { average: 25.0, p50: 20.0, p90: 40.0, p99: 40.0 })
)]
#[case::none(&[], None)]
fn throughput_summary(#[case] samples: &[f64], #[case] expected: Option<Throughput>) {
    assert_eq!(Throughput::from_samples(samples), expected);
}

#[test]
fn latency_percentiles_in_milliseconds() {
    let us: Vec<u64> = (1..=100).map(|i| i * 100).collect();
    assert_eq!(
        Latency::from_micros(&us),
        Some(Latency {
            p50: 5.0,
            p90: 9.0,
            p99: 9.9,
            max: 10.0
        })
    );
}

#[test]
fn vm_hwm_is_read_in_mib() {
    let status = "Name:\tkubesched\nVmPeak:\t  999 kB\nVmHWM:\t  524288 kB\nVmRSS:\t 1 kB\n";
    assert_eq!(peak_rss::parse_vm_hwm_mib(status), Some(512.0));
}

fn sample_report() -> Report {
    Report {
        workload: "SchedulingBasic".into(),
        mode: "in-process",
        status: RunStatus::Ok,
        reason: None,
        nodes: 5000,
        init_pods: 1000,
        measured_pods: 10000,
        scheduled_pods: 10000,
        pods_per_second: Some(Throughput {
            average: 6800.0,
            p50: 6900.0,
            p90: 7000.0,
            p99: 7100.0,
        }),
        samples: vec![6800.0],
        attempt_latency_ms: Some(Latency {
            p50: 0.1,
            p90: 0.2,
            p99: 0.5,
            max: 3.0,
        }),
        peak_rss_mib: Some(120.4),
        scheduler_cpu_seconds: None,
        scheduler_command: None,
        client_qps: "n/a".into(),
        duration_seconds: 1.47,
        upstream_floor: Some(680),
    }
}

#[test]
fn json_has_every_report_field() {
    let v: serde_json::Value =
        serde_json::from_str(&report::to_json(&[sample_report()], false)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "workload": "SchedulingBasic",
            "mode": "in-process",
            "status": "ok",
            "nodes": 5000,
            "initPods": 1000,
            "measuredPods": 10000,
            "scheduledPods": 10000,
            "podsPerSecond": {"average": 6800.0, "p50": 6900.0, "p90": 7000.0, "p99": 7100.0},
            "samples": [6800.0],
            "attemptLatencyMs": {"p50": 0.1, "p90": 0.2, "p99": 0.5, "max": 3.0},
            "peakRssMiB": 120.4,
            "schedulerCpuSeconds": null,
            "clientQps": "n/a",
            "durationSeconds": 1.47,
            "upstreamFloor": 680,
        })
    );
}

fn external_report() -> Report {
    Report {
        mode: "external",
        pods_per_second: Some(Throughput {
            average: 2500.0,
            p50: 2600.0,
            p90: 2700.0,
            p99: 2800.0,
        }),
        samples: vec![2500.0],
        attempt_latency_ms: None,
        peak_rss_mib: Some(210.0),
        scheduler_cpu_seconds: Some(3.52),
        scheduler_command: Some("kube-scheduler --config {config}".into()),
        client_qps: "5000".into(),
        ..sample_report()
    }
}

#[test]
fn external_json_has_the_command_and_its_cpu_seconds() {
    let v: serde_json::Value =
        serde_json::from_str(&report::to_json(&[external_report()], false)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "workload": "SchedulingBasic",
            "mode": "external",
            "status": "ok",
            "nodes": 5000,
            "initPods": 1000,
            "measuredPods": 10000,
            "scheduledPods": 10000,
            "podsPerSecond": {"average": 2500.0, "p50": 2600.0, "p90": 2700.0, "p99": 2800.0},
            "samples": [2500.0],
            "attemptLatencyMs": null,
            "peakRssMiB": 210.0,
            "schedulerCpuSeconds": 3.52,
            "schedulerCommand": "kube-scheduler --config {config}",
            "clientQps": "5000",
            "durationSeconds": 1.47,
            "upstreamFloor": 680,
        })
    );
}

#[test]
fn table_has_one_row_per_workload_with_the_ratio_to_the_floor() {
    let skipped = Report {
        workload: "PreemptionAsync".into(),
        status: RunStatus::Skipped,
        reason: Some("needs DefaultPreemption".into()),
        pods_per_second: None,
        samples: vec![],
        attempt_latency_ms: None,
        peak_rss_mib: None,
        upstream_floor: Some(570),
        ..sample_report()
    };
    let no_floor = Report {
        workload: "SchedulingBasic/15000Nodes_150000Pods".into(),
        upstream_floor: None,
        ..sample_report()
    };
    assert_eq!(
        report::to_table(&[sample_report(), external_report(), skipped, no_floor]),
        "\
WORKLOAD                               MODE        NODES  INIT  MEASURED  PODS/S AVG  P50   P90   P99   ATTEMPT P50/P99 MS  PEAK RSS MIB  SCHED CPU S  FLOOR  RATIO  STATUS
SchedulingBasic                        in-process  5000   1000  10000     6800        6900  7000  7100  0.100/0.500         120           -            680    10.0x  ok
SchedulingBasic                        external    5000   1000  10000     2500        2600  2700  2800  -                   210           3.5          680    3.7x   ok
PreemptionAsync                        in-process  5000   1000  10000     -           -     -     -     -                   -             -            570    -      skipped: needs DefaultPreemption
SchedulingBasic/15000Nodes_150000Pods  in-process  5000   1000  10000     6800        6900  7000  7100  0.100/0.500         120           -            -      -      ok
"
    );
}

// ---- an external scheduler ------------------------------------------------------------

#[rstest]
#[case::plain(
    "4242 (kube-scheduler) S 4241 4242 1 0 -1 4194560 1 0 0 0 150 25 3 2 20 0 9 0 1 2 3",
    Some(process::Stat { pid: 4242, ppid: 4241, cpu_ticks: 180 })
)]
#[case::name_with_spaces_and_parentheses(
    "7 (a (b) c) R 1 7 1 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0 1 2 3",
    Some(process::Stat { pid: 7, ppid: 1, cpu_ticks: 30 })
)]
#[case::cut_short("7 (sh) R 1 7", None)]
fn proc_stat_is_read_after_the_last_parenthesis(
    #[case] line: &str,
    #[case] expected: Option<process::Stat>,
) {
    assert_eq!(process::parse_stat(line), expected);
}

#[test]
fn process_tree_is_the_root_and_its_descendants_only() {
    let stat = |pid, ppid| process::Stat {
        pid,
        ppid,
        cpu_ticks: 0,
    };
    let all = [
        stat(1, 0),
        stat(10, 1),
        stat(11, 10),
        stat(12, 11),
        stat(13, 10),
        stat(20, 1),
        stat(21, 20),
    ];
    let pids: Vec<u32> = process::tree(10, &all).iter().map(|s| s.pid).collect();
    assert_eq!(pids, [10, 11, 13, 12]);
}

#[rstest]
#[case::kubeconfig_and_config(
    "kube-scheduler --kubeconfig={kubeconfig} --config {config} --v=1",
    "/tmp/b/kubeconfig",
    "kube-scheduler --kubeconfig=/tmp/b/kubeconfig --config /tmp/b/kube-scheduler.yaml --v=1"
)]
#[case::path_with_a_space_is_quoted(
    "kubesched run --config {config}",
    "/tmp/my dir/kubeconfig",
    "kubesched run --config '/tmp/my dir/kube-scheduler.yaml'"
)]
#[case::no_placeholder_is_left_as_it_is("kube-scheduler", "/tmp/b/kubeconfig", "kube-scheduler")]
fn scheduler_command_placeholders_become_the_files_paths(
    #[case] command: &str,
    #[case] kubeconfig: &str,
    #[case] expected: &str,
) {
    let kubeconfig = std::path::Path::new(kubeconfig);
    let config = kubeconfig.with_file_name("kube-scheduler.yaml");
    assert_eq!(
        external::command_line(command, kubeconfig, &config),
        expected
    );
}

#[test]
fn shell_quote_keeps_a_single_quote_inside_the_word() {
    assert_eq!(external::shell_quote("it's"), r"'it'\''s'");
}

#[rstest]
#[case::scheduler_perfs_limits(ClientLimits::UPSTREAM, (5000.0, 5000))]
#[case::limits_given(ClientLimits { qps: 20000.5, burst: 7 }, (20000.5, 7))]
fn generated_configuration_is_one_default_scheduler_profile_at_the_client_limits(
    #[case] client: ClientLimits,
    #[case] limits: (f32, i32),
) {
    let path = std::path::Path::new("/tmp/kubesched bench/kubeconfig");
    let cfg = scheduler::config::load_str(&external::scheduler_config(path, client), "generated")
        .unwrap();
    let profiles: Vec<Option<String>> = cfg
        .profiles
        .iter()
        .map(|p| p.scheduler_name.clone())
        .collect();
    assert_eq!(
        (
            cfg.leader_election.leader_elect(),
            cfg.client_connection.kubeconfig.as_str(),
            cfg.client_connection.qps,
            cfg.client_connection.burst,
            profiles,
        ),
        (
            false,
            "/tmp/kubesched bench/kubeconfig",
            limits.0,
            limits.1,
            vec![Some("default-scheduler".to_string())],
        )
    );
}

#[rstest]
#[case::qps_and_burst_alike(ClientLimits::UPSTREAM, "5000")]
#[case::burst_differs(ClientLimits { qps: 50000.0, burst: 60000 }, "50000 (burst 60000)")]
#[case::fractional_qps(ClientLimits { qps: 2.5, burst: 3 }, "2.5 (burst 3)")]
fn client_limits_are_reported_as_the_qps_then_a_burst_that_differs(
    #[case] limits: ClientLimits,
    #[case] reported: &str,
) {
    assert_eq!(limits.describe(), reported);
}

/// `--mode http` runs the scheduler with the setup's client limits, whatever the user's
/// configuration says.
#[rstest]
#[case::default_configuration(None)]
#[case::file_with_limits_of_its_own(Some("clientConnection:\n  qps: 10\n  burst: 20\n"))]
fn the_http_schedulers_client_has_the_setups_limits(#[case] file: Option<&str>) {
    let client = ClientLimits {
        qps: 12345.0,
        burst: 678,
    };
    let setup = match file {
        None => SchedulerSetup {
            client,
            ..SchedulerSetup::default()
        },
        Some(text) => {
            let cfg = scheduler::config::load_str(
                &format!(
                    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{text}"
                ),
                "file",
            )
            .unwrap();
            SchedulerSetup::with_config(
                cfg,
                "file",
                plugins::in_tree_registry(),
                Default::default(),
                client,
            )
            .unwrap()
            .0
        }
    };
    let (cfg, _, _) = crate::http::resolve_for_http(&setup).unwrap();
    assert_eq!(
        (cfg.client_connection.qps, cfg.client_connection.burst),
        (12345.0, 678)
    );
}

/// Starts `sh -c script` and waits (bounded) until its tree has `processes` processes.
// The child is handed to the caller, which stops and reaps it; the lint does not follow it
// into the returned tuple.
#[allow(clippy::zombie_processes)]
fn spawn_tree(script: &str, processes: usize) -> (std::process::Child, Vec<u32>) {
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<u32> = process::tree_of(child.id()).iter().map(|s| s.pid).collect();
        if pids.len() >= processes {
            return (child, pids);
        }
        if std::time::Instant::now() >= deadline {
            process::stop_tree(&mut child, Duration::ZERO);
            panic!("{script:?} started {pids:?} only");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[rstest]
#[case::stops_on_sigterm("sleep 300 & sleep 300")]
#[case::killed_when_it_ignores_sigterm("trap '' TERM; sleep 300 & sleep 300")]
fn stopping_the_scheduler_leaves_no_process_of_its_tree(#[case] script: &str) {
    let (mut child, pids) = spawn_tree(script, 3);
    process::stop_tree(&mut child, Duration::from_millis(300));
    assert_eq!(process::running(&pids), Vec::<u32>::new());
}

#[test]
fn process_tree_cpu_and_peak_rss_are_read_from_proc() {
    let me = std::process::id();
    assert_eq!(
        (
            process::cpu_seconds(me).is_some_and(|s| s >= 0.0),
            process::peak_rss_mib(me).is_some_and(|m| m > 0.0),
        ),
        (true, true)
    );
}

#[test]
fn scheduler_command_that_exits_fails_the_run_with_the_end_of_its_output() {
    let w = workload::find("SchedulingBasic").unwrap();
    let result = in_process::run_on(
        w,
        w.small,
        &RunOptions::default(),
        &mut |_| {},
        &|| {
            Ok(std::sync::Arc::new(external::External::new(
                "echo connecting to {kubeconfig} >/dev/null; echo no cluster for me; exit 3",
                ClientLimits::UPSTREAM,
            )?) as _)
        },
        "external",
    );
    assert_eq!(
        result.map_err(|e| e.to_string()).err(),
        Some(
            "the scheduler command exited (exit status: 3) during the run; its output ended \
             with:\nno cluster for me"
                .to_string()
        )
    );
}

// ---- the harness's pod bodies -----------------------------------------------------------

fn bench_pod(name: Option<&str>, namespace: &str, label: &str) -> k8s_openapi::api::core::v1::Pod {
    let template = objects::parse_pod(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: pod-\n  labels:\n    app: web\nspec:\n  containers:\n  - name: pause\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests:\n        cpu: 100m\n        memory: 500Mi\n",
    )
    .expect("pod template");
    let mut pod = objects::pod_instance(&template, namespace, 0);
    pod.metadata.name = name.map(str::to_string);
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("step".into(), label.into());
    pod
}

/// Each pod's create body is exactly `serde_json::to_vec` of the pod, whether it came
/// from a shared template (only the name differs), a new template (something else
/// differs), or a pod without a name or with a name that needs escaping.
#[rstest]
#[case::same_template(vec![bench_pod(Some("p-0"), "ns", "a"), bench_pod(Some("p-1"), "ns", "a"), bench_pod(Some("p-2"), "ns", "a")])]
#[case::label_changes_midway(vec![bench_pod(Some("p-0"), "ns", "a"), bench_pod(Some("p-1"), "ns", "b"), bench_pod(Some("p-2"), "ns", "a")])]
#[case::namespace_changes(vec![bench_pod(Some("p-0"), "ns", "a"), bench_pod(Some("p-0"), "other", "a")])]
#[case::without_a_name(vec![bench_pod(None, "ns", "a"), bench_pod(Some("p-1"), "ns", "a")])]
#[case::names_needing_escapes(vec![bench_pod(Some("a\"b\\c\u{1}é"), "ns", "a"), bench_pod(Some("\u{2028}"), "ns", "a")])]
#[case::placeholder_also_in_a_label(vec![bench_pod(Some("p-0"), "ns", "KUBESCHED-BENCH-POD-NAME"), bench_pod(Some("p-1"), "ns", "KUBESCHED-BENCH-POD-NAME")])]
fn pod_create_bodies_are_the_pods_serialized(#[case] pods: Vec<k8s_openapi::api::core::v1::Pod>) {
    let want: Vec<(String, String)> = pods
        .iter()
        .map(|p| {
            (
                p.metadata.namespace.clone().unwrap_or_default(),
                String::from_utf8(serde_json::to_vec(p).expect("pod serializes")).expect("UTF-8"),
            )
        })
        .collect();
    let got: Vec<(String, String)> = crate::http::PodBodies::of(pods)
        .into_iter()
        .map(|(ns, body)| (ns, String::from_utf8(body).expect("UTF-8")))
        .collect();
    assert_eq!(got, want);
}

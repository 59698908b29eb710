use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ContainerStatus, Pod, PodCondition, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use rstest::rstest;
use serde_json::{json, Value};

use framework::testing::{make_node, make_pod};
use framework::{
    ActionType, ArgsError, ClusterEvent, Code, CycleState, EventObject, EventResource, Handle,
    NodeInfo, Plugin, PodInfo, QueueingHint, Snapshot, Status, StorageListers,
};
use k8s_openapi::api::resource::v1::DeviceClass;

use super::requested_to_capacity_ratio::FunctionShape;
use super::*;

// ---- builders ----

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// The pending pod, with one container requesting `requests`.
fn pod(requests: &[(&str, &str)]) -> Arc<PodInfo> {
    make_pod("p").req(requests).info()
}

/// A pod already on a node, with one container requesting `requests`.
fn running(name: &str, requests: &[(&str, &str)]) -> Arc<PodInfo> {
    make_pod(name).req(requests).node("n").info()
}

/// A pod whose only container requests nothing (counted as 100m / 200Mi when scoring).
fn best_effort(name: &str) -> Arc<PodInfo> {
    make_pod(name).image("nginx").node("n").info()
}

fn node(name: &str, capacity: &[(&str, &str)], pods: &[Arc<PodInfo>]) -> NodeInfo {
    make_node(name).capacity(capacity).info_with(pods)
}

/// The node of upstream's Filter tests: 10m cpu, 20 bytes of memory and of ephemeral
/// storage, 32 pods, 5 example.com/aaa, 5 bytes of hugepages-2Mi.
fn filter_node(pods: &[Arc<PodInfo>]) -> NodeInfo {
    node(
        "n",
        &[
            ("cpu", "10m"),
            ("memory", "20"),
            ("pods", "32"),
            ("example.com/aaa", "5"),
            ("ephemeral-storage", "20"),
            ("hugepages-2Mi", "5"),
        ],
        pods,
    )
}

/// A node with room for one pod, already holding one.
fn full_pod_node() -> NodeInfo {
    node(
        "n",
        &[("cpu", "10m"), ("memory", "20"), ("pods", "1")],
        &[running("e", &[])],
    )
}

fn unschedulable(reasons: &[&'static str]) -> Status {
    Status::with_reasons(Code::Unschedulable, reasons.iter().copied())
}

fn unresolvable(reasons: &[&'static str]) -> Status {
    Status::with_reasons(Code::UnschedulableAndUnresolvable, reasons.iter().copied())
}

// ---- running the plugins ----

fn fit_plugin(args: &Value) -> Result<Arc<dyn Plugin>, String> {
    new_fit(Some(args), &Handle::offline()).map_err(|e| format!("{e:?}"))
}

fn balanced_plugin(args: &Value) -> Result<Arc<dyn Plugin>, String> {
    new_balanced_allocation(Some(args), &Handle::offline()).map_err(|e| format!("{e:?}"))
}

/// PreFilter then Filter, as the framework runs them.
fn run_filter(args: Value, pod: &PodInfo, node: &NodeInfo) -> Result<Status, String> {
    let plugin = fit_plugin(&args)?;
    let mut state = CycleState::new();
    let (result, status) = plugin.as_pre_filter().ok_or("no PreFilter")?.pre_filter(
        &mut state,
        pod,
        &Snapshot::default(),
    );
    if result.is_some() || !status.is_success() {
        return Err(format!("PreFilter gave {result:?}, {status}"));
    }
    Ok(plugin
        .as_filter()
        .ok_or("no Filter")?
        .filter(&state, pod, node))
}

/// PreScore (when `pre_score`) then Score on each node.
fn run_scores(
    plugin: &dyn Plugin,
    pod: &PodInfo,
    nodes: &[NodeInfo],
    pre_score: bool,
) -> Result<Vec<i64>, String> {
    let mut state = CycleState::new();
    if pre_score {
        let status = plugin.as_pre_score().ok_or("no PreScore")?.pre_score(
            &mut state,
            pod,
            &Snapshot::default(),
            &[],
        );
        if !status.is_success() {
            return Err(format!("PreScore gave {status}"));
        }
    }
    let score = plugin.as_score().ok_or("no Score")?;
    let each: Vec<i64> = nodes
        .iter()
        .map(|n| score.score(&state, pod, n).map_err(|s| s.to_string()))
        .collect::<Result<_, _>>()?;
    // Scoring all nodes in one call gives the same scores.
    let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
    let mut batch = vec![0; arcs.len()];
    score
        .score_nodes(&state, pod, &arcs, &mut batch)
        .map_err(|s| s.to_string())?;
    if batch != each {
        return Err(format!("score_nodes gave {batch:?}, score gave {each:?}"));
    }
    Ok(each)
}

// ---- plugin surface ----

#[test]
fn fit_implements_upstream_extension_points() -> Result<(), String> {
    let plugin = fit_plugin(&json!({}))?;
    let pre_filter = plugin.as_pre_filter().ok_or("no PreFilter")?;
    let score = plugin.as_score().ok_or("no Score")?;
    assert_eq!(
        (
            plugin.name(),
            plugin.as_filter().is_some(),
            plugin.as_pre_score().is_some(),
            plugin.as_enqueue_extensions().is_some(),
            pre_filter.pre_filter_extensions().is_none(),
            score.score_extensions().is_none(),
            plugin.as_reserve().is_none(),
        ),
        ("NodeResourcesFit", true, true, true, true, true, true)
    );
    Ok(())
}

#[test]
fn balanced_allocation_only_scores() -> Result<(), String> {
    let plugin = balanced_plugin(&json!({}))?;
    let score = plugin.as_score().ok_or("no Score")?;
    assert_eq!(
        (
            plugin.name(),
            plugin.as_pre_score().is_some(),
            score.score_extensions().is_none(),
            plugin.as_pre_filter().is_none(),
            plugin.as_filter().is_none(),
            plugin.as_enqueue_extensions().is_none(),
        ),
        (
            "NodeResourcesBalancedAllocation",
            true,
            true,
            true,
            true,
            true
        )
    );
    Ok(())
}

// ---- NodeResourcesFit: PreFilter + Filter ----

#[rstest]
#[case::no_requests_always_fits(json!({}), make_pod("p").info(), filter_node(&[running("e", &[("cpu", "10m"), ("memory", "20")])]), Status::success())]
#[case::cpu_and_memory_both_short(json!({}), pod(&[("cpu", "1m"), ("memory", "1")]), filter_node(&[running("e", &[("cpu", "10m"), ("memory", "20")])]), unschedulable(&["Insufficient cpu", "Insufficient memory"]))]
#[case::cpu_short(json!({}), pod(&[("cpu", "2m"), ("memory", "1")]), filter_node(&[running("e", &[("cpu", "9m"), ("memory", "5")])]), unschedulable(&["Insufficient cpu"]))]
#[case::memory_short(json!({}), pod(&[("cpu", "1m"), ("memory", "2")]), filter_node(&[running("e", &[("cpu", "5m"), ("memory", "19")])]), unschedulable(&["Insufficient memory"]))]
#[case::exactly_full_fits(json!({}), pod(&[("cpu", "5m"), ("memory", "1")]), filter_node(&[running("e", &[("cpu", "5m"), ("memory", "19")])]), Status::success())]
#[case::init_container_counts_when_larger(json!({}), make_pod("p").req(&[("cpu", "1m"), ("memory", "1")]).init_req(&[("cpu", "3m"), ("memory", "1")]).info(), filter_node(&[running("e", &[("cpu", "8m"), ("memory", "19")])]), unschedulable(&["Insufficient cpu"]))]
#[case::init_containers_are_maxed_not_summed(json!({}), make_pod("p").req(&[("cpu", "1m"), ("memory", "1")]).init_req(&[("cpu", "1m"), ("memory", "1")]).init_req(&[("cpu", "1m"), ("memory", "1")]).info(), filter_node(&[running("e", &[("cpu", "9m"), ("memory", "19")])]), Status::success())]
#[case::sidecar_adds_to_containers(json!({}), make_pod("p").req(&[("cpu", "1m")]).sidecar_req(&[("cpu", "2m")]).info(), filter_node(&[running("e", &[("cpu", "8m")])]), unschedulable(&["Insufficient cpu"]))]
#[case::overhead_counts(json!({}), make_pod("p").req(&[("cpu", "1m"), ("memory", "1")]).overhead(&[("cpu", "1m"), ("memory", "15")]).info(), filter_node(&[running("e", &[("cpu", "5m"), ("memory", "5")])]), unschedulable(&["Insufficient memory"]))]
#[case::pod_level_requests_replace_containers(json!({}), make_pod("p").req(&[("cpu", "1m"), ("memory", "1")]).with(|p| if let Some(s) = p.spec.as_mut() { s.resources = Some(ResourceRequirements { requests: Some(quantities(&[("cpu", "7m"), ("memory", "2")])), ..Default::default() }) }).info(), filter_node(&[running("e", &[("cpu", "5m"), ("memory", "5")])]), unschedulable(&["Insufficient cpu"]))]
#[case::ephemeral_storage_short(json!({}), pod(&[("ephemeral-storage", "15")]), filter_node(&[running("e", &[("ephemeral-storage", "10")])]), unschedulable(&["Insufficient ephemeral-storage"]))]
#[case::ephemeral_storage_fits(json!({}), pod(&[("ephemeral-storage", "10")]), filter_node(&[running("e", &[("ephemeral-storage", "10")])]), Status::success())]
#[case::ephemeral_storage_above_allocatable(json!({}), pod(&[("ephemeral-storage", "25")]), filter_node(&[]), unresolvable(&["Insufficient ephemeral-storage"]))]
#[case::extended_resource_fits(json!({}), pod(&[("example.com/aaa", "1")]), filter_node(&[]), Status::success())]
#[case::extended_resource_short(json!({}), pod(&[("cpu", "1m"), ("example.com/aaa", "1")]), filter_node(&[running("e", &[("example.com/aaa", "5")])]), unschedulable(&["Insufficient example.com/aaa"]))]
#[case::extended_resource_above_allocatable(json!({}), pod(&[("cpu", "1m"), ("example.com/aaa", "10")]), filter_node(&[]), unresolvable(&["Insufficient example.com/aaa"]))]
#[case::extended_resource_the_node_lacks(json!({}), pod(&[("cpu", "1m"), ("example.com/bbb", "1")]), filter_node(&[]), unresolvable(&["Insufficient example.com/bbb"]))]
#[case::kubernetes_io_resource_the_node_lacks(json!({}), pod(&[("kubernetes.io/something", "10")]), filter_node(&[]), unresolvable(&["Insufficient kubernetes.io/something"]))]
#[case::hugepages_short(json!({}), pod(&[("hugepages-2Mi", "4")]), filter_node(&[running("e", &[("hugepages-2Mi", "2")])]), unschedulable(&["Insufficient hugepages-2Mi"]))]
#[case::hugepages_above_allocatable(json!({}), pod(&[("hugepages-2Mi", "10")]), filter_node(&[]), unresolvable(&["Insufficient hugepages-2Mi"]))]
#[case::zero_request_is_not_checked(json!({}), pod(&[("cpu", "1m"), ("example.com/aaa", "0")]), filter_node(&[running("e", &[("example.com/aaa", "6")])]), Status::success())]
#[case::ignored_resource_is_not_checked(json!({"ignoredResources": ["example.com/bbb"]}), pod(&[("cpu", "1m"), ("example.com/bbb", "1")]), filter_node(&[]), Status::success())]
#[case::ignored_resource_group_is_not_checked(json!({"ignoredResourceGroups": ["example.com"]}), pod(&[("example.com/bbb", "1"), ("kubernetes.io/something", "1")]), filter_node(&[]), unresolvable(&["Insufficient kubernetes.io/something"]))]
#[case::only_extended_resources_can_be_ignored(json!({"ignoredResources": ["hugepages-2Mi"]}), pod(&[("hugepages-2Mi", "10")]), filter_node(&[]), unresolvable(&["Insufficient hugepages-2Mi"]))]
#[case::every_shortfall_in_upstream_order(json!({}), pod(&[("hugepages-2Mi", "10"), ("example.com/aaa", "10"), ("ephemeral-storage", "30"), ("memory", "30"), ("cpu", "20m")]), filter_node(&[]), unresolvable(&["Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage", "Insufficient example.com/aaa", "Insufficient hugepages-2Mi"]))]
#[case::one_unresolvable_shortfall_decides_the_code(json!({}), pod(&[("cpu", "2m"), ("example.com/aaa", "10")]), filter_node(&[running("e", &[("cpu", "9m")])]), unresolvable(&["Insufficient cpu", "Insufficient example.com/aaa"]))]
#[case::too_many_pods_without_requests(json!({}), make_pod("p").info(), full_pod_node(), unschedulable(&["Too many pods"]))]
#[case::too_many_pods_when_resources_fit(json!({}), pod(&[("cpu", "1m"), ("memory", "1")]), full_pod_node(), unschedulable(&["Too many pods"]))]
#[case::too_many_pods_comes_first(json!({}), pod(&[("cpu", "20m")]), full_pod_node(), unresolvable(&["Too many pods", "Insufficient cpu"]))]
#[case::node_without_pod_capacity(json!({}), make_pod("p").info(), node("n", &[("cpu", "10m")], &[]), unschedulable(&["Too many pods"]))]
fn filter(
    #[case] args: Value,
    #[case] pod: Arc<PodInfo>,
    #[case] node: NodeInfo,
    #[case] want: Status,
) {
    assert_eq!(run_filter(args, &pod, &node), Ok(want));
}

/// A DeviceClass `name` serving `extended` (when given) besides its implicit name.
fn device_class(name: &str, extended: Option<&str>) -> DeviceClass {
    let mut spec = json!({});
    if let Some(e) = extended {
        spec["extendedResourceName"] = json!(e);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap_or_default()
}

fn with_classes(classes: &[DeviceClass]) -> Snapshot {
    let mut storage = StorageListers::default();
    for c in classes {
        storage.device_classes.insert(
            c.metadata.name.clone().unwrap_or_default(),
            Arc::new(c.clone()),
        );
    }
    let mut snapshot = Snapshot::default();
    snapshot.set_storage(Arc::new(storage));
    snapshot
}

/// Upstream's fit tests with DRAExtendedResource: an extended resource a DeviceClass serves
/// is DynamicResources' business on a node that does not advertise it, and a plain extended
/// resource on a node that does.
#[rstest]
#[case::resource_backed_by_a_class_the_node_lacks_is_left_to_dra(vec![device_class("gpuclass", Some("example.com/gpu"))], pod(&[("cpu", "1m"), ("example.com/gpu", "1")]), filter_node(&[]), Status::success())]
#[case::implicit_name_the_node_lacks_is_left_to_dra(vec![device_class("gpuclass", None)], pod(&[("deviceclass.resource.kubernetes.io/gpuclass", "2")]), filter_node(&[]), Status::success())]
#[case::implicit_name_of_a_class_with_an_explicit_name_is_left_to_dra(vec![device_class("gpuclass", Some("example.com/gpu"))], pod(&[("deviceclass.resource.kubernetes.io/gpuclass", "1")]), filter_node(&[]), Status::success())]
#[case::resource_backed_by_a_class_with_zero_allocatable_is_left_to_dra(vec![device_class("gpuclass", Some("example.com/gpu"))], pod(&[("example.com/gpu", "1")]), node("n", &[("cpu", "10m"), ("pods", "32"), ("example.com/gpu", "0")], &[]), Status::success())]
#[case::resource_backed_by_a_class_the_node_advertises_is_a_plain_extended_resource(vec![device_class("aaaclass", Some("example.com/aaa"))], pod(&[("example.com/aaa", "10")]), filter_node(&[]), unresolvable(&["Insufficient example.com/aaa"]))]
#[case::resource_of_no_class_the_node_lacks_is_insufficient(vec![device_class("gpuclass", Some("example.com/gpu"))], pod(&[("example.com/bbb", "1")]), filter_node(&[]), unresolvable(&["Insufficient example.com/bbb"]))]
#[case::implicit_name_of_a_missing_class_is_insufficient(vec![device_class("gpuclass", None)], pod(&[("deviceclass.resource.kubernetes.io/other", "1")]), filter_node(&[]), unresolvable(&["Insufficient deviceclass.resource.kubernetes.io/other"]))]
#[case::other_shortfalls_are_still_reported(vec![device_class("gpuclass", Some("example.com/gpu"))], pod(&[("cpu", "20m"), ("example.com/gpu", "1")]), filter_node(&[]), unresolvable(&["Insufficient cpu"]))]
fn filter_with_device_classes(
    #[case] classes: Vec<DeviceClass>,
    #[case] pod: Arc<PodInfo>,
    #[case] node: NodeInfo,
    #[case] want: Status,
) -> Result<(), String> {
    let plugin = fit_plugin(&json!({}))?;
    let mut state = CycleState::new();
    let (_, status) = plugin.as_pre_filter().ok_or("no PreFilter")?.pre_filter(
        &mut state,
        &pod,
        &with_classes(&classes),
    );
    assert_eq!(status, Status::success());
    let got = plugin
        .as_filter()
        .ok_or("no Filter")?
        .filter(&state, &pod, &node);
    assert_eq!(got, want);
    Ok(())
}

#[test]
fn filter_without_pre_filter_is_an_error() -> Result<(), String> {
    let plugin = fit_plugin(&json!({}))?;
    let status = plugin.as_filter().ok_or("no Filter")?.filter(
        &CycleState::new(),
        &make_pod("p").info(),
        &filter_node(&[]),
    );
    assert_eq!(
        status,
        Status::error("error reading \"PreFilterNodeResourcesFit\" from cycleState: not found")
    );
    Ok(())
}

// ---- NodeResourcesFit: PreScore + Score ----

fn upstream_nodes() -> Vec<NodeInfo> {
    vec![
        node(
            "node1",
            &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")],
            &[running("e1", &[("cpu", "2000"), ("memory", "4000")])],
        ),
        node(
            "node2",
            &[("cpu", "6000"), ("memory", "10000"), ("pods", "32")],
            &[running("e2", &[("cpu", "1000"), ("memory", "2000")])],
        ),
    ]
}

fn sidecar_nodes() -> Vec<NodeInfo> {
    let with_sidecar = make_pod("e1")
        .req(&[("cpu", "1000"), ("memory", "2000")])
        .sidecar_req(&[("cpu", "1000"), ("memory", "2000")])
        .node("node1")
        .info();
    vec![
        node(
            "node1",
            &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")],
            &[with_sidecar],
        ),
        node(
            "node2",
            &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")],
            &[running("e2", &[("cpu", "1000"), ("memory", "2000")])],
        ),
    ]
}

/// 1 cpu and 1Gi; the second node holds a pod that requests nothing.
fn small_nodes() -> Vec<NodeInfo> {
    let capacity = [("cpu", "1"), ("memory", "1Gi"), ("pods", "110")];
    vec![
        node("n1", &capacity, &[]),
        node("n2", &capacity, &[best_effort("e")]),
    ]
}

fn gpu_nodes() -> Vec<NodeInfo> {
    vec![
        node(
            "n1",
            &[("cpu", "4"), ("example.com/gpu", "2"), ("pods", "32")],
            &[],
        ),
        node("n2", &[("cpu", "4"), ("pods", "32")], &[]),
    ]
}

fn foo_nodes(existing_on_second: &[Arc<PodInfo>]) -> Vec<NodeInfo> {
    vec![
        node(
            "node1",
            &[
                ("cpu", "4000"),
                ("memory", "10000Mi"),
                ("intel.com/foo", "8"),
                ("pods", "32"),
            ],
            &[],
        ),
        node(
            "node2",
            &[
                ("cpu", "4000"),
                ("memory", "10000Mi"),
                ("intel.com/foo", "4"),
                ("pods", "32"),
            ],
            existing_on_second,
        ),
    ]
}

fn foo_bar_nodes() -> Vec<NodeInfo> {
    vec![
        node(
            "node1",
            &[
                ("intel.com/foo", "8"),
                ("intel.com/bar", "4"),
                ("pods", "32"),
            ],
            &[],
        ),
        node(
            "node2",
            &[
                ("intel.com/foo", "4"),
                ("intel.com/bar", "8"),
                ("pods", "32"),
            ],
            &[],
        ),
    ]
}

fn strategy(strategy_type: &str, resources: Value) -> Value {
    json!({"scoringStrategy": {"type": strategy_type, "resources": resources}})
}

fn ratio(resources: Value, shape: Value) -> Value {
    json!({"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": resources,
        "requestedToCapacityRatio": {"shape": shape},
    }})
}

fn cpu_memory() -> Value {
    json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}])
}

fn least_shape() -> Value {
    json!([{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}])
}

fn most_shape() -> Value {
    json!([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}])
}

// Expected scores are worked out from upstream's formulas; cases named `upstream_*` are
// upstream's own test tables (fit_test.go, requested_to_capacity_ratio_test.go).
#[rstest]
// node1: cpu (4000-3000)*100/4000 = 25, memory (10000-6000)*100/10000 = 40 -> 65/2 = 32;
// node2: cpu 4000*100/6000 = 66, memory 60 -> 63.
#[case::upstream_least_allocated_is_the_default(json!({}), pod(&[("cpu", "1000"), ("memory", "2000")]), upstream_nodes(), vec![32, 63])]
// node1: cpu 75, memory 60 -> 67; node2: cpu 33, memory 40 -> 36.
#[case::upstream_most_allocated(strategy("MostAllocated", cpu_memory()), pod(&[("cpu", "1000"), ("memory", "2000")]), upstream_nodes(), vec![67, 36])]
// node1: cpu 5000 > 4000 scores shape(100) = 0 and is left out, memory 90% -> 10;
// node2: cpu 66% -> 34, memory 70% -> 30 -> 32.
#[case::upstream_ratio_shaped_like_least_allocated(ratio(cpu_memory(), least_shape()), pod(&[("cpu", "3000"), ("memory", "5000")]), upstream_nodes(), vec![10, 32])]
// node1: cpu over-committed -> 100, memory 90 -> 95; node2: 66 and 70 -> 68.
#[case::upstream_ratio_shaped_like_most_allocated(ratio(cpu_memory(), most_shape()), pod(&[("cpu", "3000"), ("memory", "5000")]), upstream_nodes(), vec![95, 68])]
// node1 holds 2000 cpu / 4000 memory (container + sidecar): 25 and 40 -> 32; node2: 50, 60.
#[case::upstream_least_allocated_counts_sidecars(json!({}), pod(&[("cpu", "1000"), ("memory", "2000")]), sidecar_nodes(), vec![32, 55])]
#[case::upstream_most_allocated_counts_sidecars(strategy("MostAllocated", cpu_memory()), pod(&[("cpu", "1000"), ("memory", "2000")]), sidecar_nodes(), vec![67, 45])]
// The pod counts 100m / 200Mi. n1: cpu 90, memory (1Gi-200Mi)*100/1Gi = 80 -> 85;
// n2 (a best-effort pod already there): cpu 80, memory 60 -> 70.
#[case::least_allocated_uses_non_zero_requests(json!({}), make_pod("p").image("nginx").info(), small_nodes(), vec![85, 70])]
// n1: cpu 10, memory 19 -> 14; n2: cpu 20, memory 39 -> 29.
#[case::most_allocated_uses_non_zero_requests(strategy("MostAllocated", cpu_memory()), make_pod("p").image("nginx").info(), small_nodes(), vec![14, 29])]
// cpu 2000 of 1000 counts as full (100), memory 50 -> 75.
#[case::most_allocated_caps_overcommit(strategy("MostAllocated", cpu_memory()), pod(&[("cpu", "2"), ("memory", "512Mi")]), vec![small_nodes().remove(0)], vec![75])]
// cpu over-committed scores 0, memory 50 -> 25.
#[case::least_allocated_scores_overcommit_zero(json!({}), pod(&[("cpu", "2"), ("memory", "512Mi")]), vec![small_nodes().remove(0)], vec![25])]
// n1: cpu 75 * 1 + gpu 50 * 3 = 225 / 4 = 56; n2 has no gpu: cpu 75 alone.
#[case::weights_and_extended_resources(strategy("LeastAllocated", json!([{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 3}])), pod(&[("cpu", "1"), ("example.com/gpu", "1")]), gpu_nodes(), vec![56, 75])]
#[case::extended_resource_the_pod_does_not_request_is_left_out(strategy("LeastAllocated", json!([{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 3}])), pod(&[("cpu", "1")]), gpu_nodes(), vec![75, 75])]
#[case::resource_the_node_lacks_is_left_out(json!({}), pod(&[("cpu", "1"), ("memory", "1Gi")]), vec![node("n", &[("cpu", "4"), ("pods", "32")], &[])], vec![75])]
#[case::node_with_none_of_the_resources_scores_zero(strategy("LeastAllocated", json!([{"name": "example.com/gpu", "weight": 1}])), pod(&[("example.com/gpu", "1")]), vec![node("n", &[("cpu", "4"), ("pods", "32")], &[])], vec![0])]
// Ephemeral storage counts real requests: (4Gi - 2Gi) * 100 / 4Gi = 50.
#[case::ephemeral_storage(strategy("LeastAllocated", json!([{"name": "ephemeral-storage", "weight": 1}])), pod(&[("ephemeral-storage", "1Gi")]), vec![node("n", &[("ephemeral-storage", "4Gi"), ("pods", "32")], &[running("e", &[("ephemeral-storage", "1Gi")])])], vec![50])]
// Shape (0,0)-(100,1) scaled to (0,0)-(100,10): 2/8 = 25% -> 2 (integer), 2/4 = 50% -> 5.
#[case::upstream_ratio_single_extended_resource(ratio(json!([{"name": "intel.com/foo", "weight": 1}]), json!([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}])), pod(&[("intel.com/foo", "2")]), foo_nodes(&[]), vec![2, 5])]
#[case::upstream_ratio_counts_pods_already_there(ratio(json!([{"name": "intel.com/foo", "weight": 1}]), json!([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}])), pod(&[("intel.com/foo", "2")]), foo_nodes(&[running("e", &[("intel.com/foo", "2")])]), vec![2, 10])]
// node1: foo 25% -> 2, bar 50% -> 5: (2*3 + 5*5) / 8 = 3.875 -> 4; node2: (5*3 + 2*5) / 8 = 3.125 -> 3.
#[case::upstream_ratio_multiple_extended_resources(ratio(json!([{"name": "intel.com/foo", "weight": 3}, {"name": "intel.com/bar", "weight": 5}]), json!([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}])), pod(&[("intel.com/foo", "2"), ("intel.com/bar", "2")]), foo_bar_nodes(), vec![4, 3])]
// node1: cpu 75% -> 25, memory 50% -> 50: 37.5 rounds to 38; node2: 50 and 50.
#[case::upstream_ratio_rounds_half_away_from_zero(ratio(cpu_memory(), least_shape()), make_pod("p").req(&[("cpu", "1000"), ("memory", "2000")]).req(&[("cpu", "2000"), ("memory", "3000")]).info(), vec![node("node1", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[make_pod("e1").node("node1").info(), make_pod("e2").node("node1").info()]), node("node2", &[("cpu", "6000"), ("memory", "10000"), ("pods", "32")], &[])], vec![38, 50])]
#[case::upstream_ratio_empty_nodes(ratio(cpu_memory(), least_shape()), make_pod("p").info(), vec![node("node1", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[make_pod("e1").node("node1").info()]), node("node2", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[])], vec![100, 100])]
// cpu requested explicitly as 0 scores shape(0) = 0 and is left out; memory 50% -> 50.
#[case::ratio_leaves_zero_scores_out_of_the_mean(ratio(cpu_memory(), most_shape()), pod(&[("cpu", "0"), ("memory", "5000")]), vec![node("n", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[])], vec![50])]
// Shape (0,20)-(40,100)-(100,0) after scaling: 70% -> 100 - 100*30/60 = 50; 20% -> 20 + 80*20/40 = 60.
#[case::ratio_interpolates_between_points(ratio(json!([{"name": "cpu", "weight": 1}]), json!([{"utilization": 0, "score": 2}, {"utilization": 40, "score": 10}, {"utilization": 100, "score": 0}])), pod(&[("cpu", "700")]), vec![node("n1", &[("cpu", "1000"), ("pods", "32")], &[]), node("n2", &[("cpu", "3500"), ("pods", "32")], &[])], vec![50, 60])]
fn fit_scores(
    #[case] args: Value,
    #[case] pod: Arc<PodInfo>,
    #[case] nodes: Vec<NodeInfo>,
    #[case] want: Vec<i64>,
    #[values(true, false)] pre_score: bool,
) {
    let got = fit_plugin(&args).and_then(|p| run_scores(p.as_ref(), &pod, &nodes, pre_score));
    assert_eq!(got, Ok(want));
}

#[rstest]
#[case::below_first_point(-10, 1)]
#[case::at_zero(0, 1)]
#[case::just_below_first_point(9, 1)]
#[case::at_first_point(10, 1)]
#[case::truncates_between_points(15, 1)]
#[case::truncates_just_below_a_step(19, 1)]
#[case::first_step(20, 2)]
#[case::just_below_last_point(89, 8)]
#[case::at_last_point(90, 9)]
#[case::above_last_point(99, 9)]
#[case::at_hundred(100, 9)]
#[case::beyond_hundred(110, 9)]
fn upstream_broken_linear_function(#[case] utilization: i64, #[case] want: i64) {
    let shape = FunctionShape(vec![(10, 1), (90, 9)]);
    assert_eq!(shape.eval(utilization), want);
}

// ---- NodeResourcesFit: events and queueing hints ----

#[test]
fn fit_registers_pod_node_and_device_class_events_with_hints() -> Result<(), String> {
    let plugin = fit_plugin(&json!({}))?;
    let events: Vec<(ClusterEvent, bool)> = plugin
        .as_enqueue_extensions()
        .ok_or("no EnqueueExtensions")?
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                ClusterEvent::new(
                    EventResource::Pod,
                    ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN
                ),
                true
            ),
            (
                ClusterEvent::new(
                    EventResource::Node,
                    ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE
                ),
                true
            ),
            (
                ClusterEvent::new(
                    EventResource::DeviceClass,
                    ActionType::ADD | ActionType::UPDATE
                ),
                true
            ),
        ]
    );
    Ok(())
}

/// Runs the hint NodeResourcesFit registered for `resource`.
fn hint(
    resource: EventResource,
    pod: &Pod,
    old: Option<EventObject>,
    new: Option<EventObject>,
) -> Result<QueueingHint, String> {
    let plugin = fit_plugin(&json!({}))?;
    let events = plugin
        .as_enqueue_extensions()
        .ok_or("no EnqueueExtensions")?
        .events_to_register();
    let hint = events
        .iter()
        .find(|e| e.event.resource == resource)
        .and_then(|e| e.hint.clone())
        .ok_or("no hint")?;
    hint(pod, old.as_ref(), new.as_ref())
}

fn pod_obj(p: Pod) -> Option<EventObject> {
    Some(EventObject::Pod(Arc::new(p)))
}

fn node_obj(capacity: &[(&str, &str)]) -> Option<EventObject> {
    Some(EventObject::Node(Arc::new(
        make_node("n").capacity(capacity).obj(),
    )))
}

/// A pod on node `n` whose container `c0` wants `spec_cpu` and, per its status, has
/// `status_cpu`.
fn resized(name: &str, spec_cpu: &str, status_cpu: &str) -> Pod {
    make_pod(name)
        .req(&[("cpu", spec_cpu)])
        .node("n")
        .with(|p| {
            p.status = Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "c0".to_string(),
                    resources: Some(ResourceRequirements {
                        requests: Some(quantities(&[("cpu", status_cpu)])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            })
        })
        .obj()
}

fn with_infeasible_resize(mut p: Pod) -> Pod {
    p.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(PodCondition {
            type_: "PodResizePending".to_string(),
            status: "True".to_string(),
            reason: Some("Infeasible".to_string()),
            ..Default::default()
        });
    p
}

fn wants_cpu() -> Pod {
    make_pod("p").req(&[("cpu", "1")]).obj()
}

#[rstest]
#[case::deleted_assigned_pod_frees_room(pod_obj(make_pod("o").req(&[("cpu", "1")]).node("n").obj()), None, Ok(QueueingHint::Queue))]
#[case::deleted_nominated_pod_frees_room(pod_obj(make_pod("o").with(|p| p.status = Some(PodStatus { nominated_node_name: Some("n".to_string()), ..Default::default() })).obj()), None, Ok(QueueingHint::Queue))]
#[case::deleted_unscheduled_pod_frees_nothing(pod_obj(make_pod("o").req(&[("cpu", "1")]).obj()), None, Ok(QueueingHint::QueueSkip))]
#[case::pending_pod_scaled_down_itself(pod_obj(make_pod("p").req(&[("cpu", "2")]).obj()), pod_obj(wants_cpu()), Ok(QueueingHint::Queue))]
#[case::unscheduled_pod_scaled_down(pod_obj(make_pod("o").req(&[("cpu", "2")]).obj()), pod_obj(make_pod("o").req(&[("cpu", "1")]).obj()), Ok(QueueingHint::QueueSkip))]
#[case::assigned_pod_scaled_down_a_requested_resource(pod_obj(make_pod("o").req(&[("cpu", "2")]).node("n").obj()), pod_obj(make_pod("o").req(&[("cpu", "1")]).node("n").obj()), Ok(QueueingHint::Queue))]
#[case::assigned_pod_scaled_down_an_unrelated_resource(pod_obj(make_pod("o").req(&[("memory", "2")]).node("n").obj()), pod_obj(make_pod("o").req(&[("memory", "1")]).node("n").obj()), Ok(QueueingHint::QueueSkip))]
#[case::resize_not_yet_actuated_frees_nothing(
    pod_obj(resized("o", "2", "2")),
    pod_obj(resized("o", "1", "2")),
    Ok(QueueingHint::QueueSkip)
)]
#[case::resize_actuated_frees_room(
    pod_obj(resized("o", "1", "2")),
    pod_obj(resized("o", "1", "1")),
    Ok(QueueingHint::Queue)
)]
#[case::infeasible_resize_counts_only_the_status(
    pod_obj(with_infeasible_resize(resized("o", "4", "2"))),
    pod_obj(with_infeasible_resize(resized("o", "4", "1"))),
    Ok(QueueingHint::Queue)
)]
#[case::wrong_object_is_an_error(node_obj(&[]), None, Err("expected a Pod, got a Node".to_string()))]
fn pod_event_hint(
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(hint(EventResource::Pod, &wants_cpu(), old, new), want);
}

fn wants_memory_and_aaa() -> Pod {
    make_pod("p")
        .req(&[("memory", "2"), ("example.com/aaa", "1")])
        .obj()
}

#[rstest]
#[case::added_node_too_small(wants_memory_and_aaa(), None, node_obj(&[("memory", "1"), ("example.com/aaa", "1"), ("pods", "32")]), Ok(QueueingHint::QueueSkip))]
#[case::added_node_without_the_resource(wants_memory_and_aaa(), None, node_obj(&[("memory", "4"), ("example.com/bbb", "1"), ("pods", "32")]), Ok(QueueingHint::QueueSkip))]
#[case::added_node_that_fits(wants_memory_and_aaa(), None, node_obj(&[("memory", "4"), ("example.com/aaa", "2"), ("pods", "32")]), Ok(QueueingHint::Queue))]
#[case::added_node_without_pod_capacity(wants_memory_and_aaa(), None, node_obj(&[("memory", "4"), ("example.com/aaa", "2")]), Ok(QueueingHint::QueueSkip))]
#[case::update_without_growth_of_requested_resources(wants_memory_and_aaa(), node_obj(&[("memory", "2"), ("example.com/aaa", "2"), ("pods", "32")]), node_obj(&[("memory", "2"), ("example.com/aaa", "1"), ("example.com/bbb", "2"), ("pods", "32")]), Ok(QueueingHint::QueueSkip))]
#[case::update_grows_a_requested_resource(wants_memory_and_aaa(), node_obj(&[("memory", "2"), ("example.com/aaa", "1"), ("pods", "32")]), node_obj(&[("memory", "2"), ("example.com/aaa", "2"), ("pods", "32")]), Ok(QueueingHint::Queue))]
#[case::update_from_fitting_to_too_small(wants_memory_and_aaa(), node_obj(&[("memory", "4"), ("example.com/aaa", "2"), ("pods", "32")]), node_obj(&[("memory", "1"), ("example.com/aaa", "2"), ("pods", "32")]), Ok(QueueingHint::QueueSkip))]
#[case::update_from_too_small_to_fitting(wants_memory_and_aaa(), node_obj(&[("memory", "1"), ("example.com/aaa", "2"), ("pods", "32")]), node_obj(&[("memory", "4"), ("example.com/aaa", "2"), ("pods", "32")]), Ok(QueueingHint::Queue))]
#[case::update_grows_pod_capacity(make_pod("p").obj(), node_obj(&[("pods", "0")]), node_obj(&[("pods", "1")]), Ok(QueueingHint::Queue))]
#[case::ignored_resources_are_not_consulted(make_pod("p").req(&[("example.com/bbb", "1")]).obj(), None, node_obj(&[("pods", "32")]), Ok(QueueingHint::QueueSkip))]
#[case::wrong_object_is_an_error(make_pod("p").obj(), None, pod_obj(make_pod("o").obj()), Err("expected a Node, got a Pod".to_string()))]
fn node_event_hint(
    #[case] pod: Pod,
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(hint(EventResource::Node, &pod, old, new), want);
}

// ---- NodeResourcesBalancedAllocation ----

fn upstream_balanced_nodes(second_memory: &str) -> Vec<NodeInfo> {
    vec![
        node(
            "machine1",
            &[("cpu", "10000"), ("memory", "20000"), ("pods", "32")],
            &[running("e1", &[("cpu", "3000"), ("memory", "0")])],
        ),
        node(
            "machine2",
            &[("cpu", "10000"), ("memory", second_memory), ("pods", "32")],
            &[running("e2", &[("cpu", "3000"), ("memory", "5000")])],
        ),
    ]
}

fn three_resources() -> Value {
    json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]})
}

fn gpu_node() -> Vec<NodeInfo> {
    vec![node(
        "n",
        &[
            ("cpu", "4"),
            ("memory", "4Gi"),
            ("example.com/gpu", "4"),
            ("pods", "32"),
        ],
        &[],
    )]
}

#[rstest]
// machine1: cpu 3000/4000 = 0.75, memory 0.5: std 0.125 -> 87.5 -> 87; machine2: 0.5, 0.5 -> 100.
#[case::two_resources(json!({}), pod(&[("cpu", "3000"), ("memory", "5000")]), vec![node("machine1", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[]), node("machine2", &[("cpu", "6000"), ("memory", "10000"), ("pods", "32")], &[])], vec![87, 100])]
// machine1: 0.6 and 0.25 -> 82; machine2: 0.6 and 0.5 -> 95.
#[case::upstream_pods_already_there(json!({}), pod(&[("cpu", "3000"), ("memory", "5000")]), upstream_balanced_nodes("20000"), vec![82, 95])]
// machine2: 0.6 and 10000/50000 = 0.2 -> 80.
#[case::upstream_differently_sized_nodes(json!({}), pod(&[("cpu", "3000"), ("memory", "5000")]), upstream_balanced_nodes("50000"), vec![82, 80])]
// cpu 6000/4000 is capped at 1, memory 0.5: std 0.25 -> 75.
#[case::fraction_is_capped_at_one(json!({}), pod(&[("cpu", "3000"), ("memory", "5000")]), vec![node("n", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[running("e", &[("cpu", "3000"), ("memory", "0")])])], vec![75])]
// Real requests: the best-effort pod already there counts nothing, so 0.5 and 0.5.
#[case::real_requests_not_non_zero(json!({}), pod(&[("cpu", "500m"), ("memory", "512Mi")]), vec![small_nodes().remove(1)], vec![100])]
#[case::single_resource_has_no_deviation(json!({"resources": [{"name": "cpu"}]}), pod(&[("cpu", "3000"), ("memory", "5000")]), vec![node("n", &[("cpu", "4000"), ("memory", "10000"), ("pods", "32")], &[])], vec![100])]
// 0.5, 0.25, 0.25: mean 1/3, std sqrt(0.041667/3) = 0.1179 -> 88.
#[case::three_resources_use_the_standard_deviation(three_resources(), pod(&[("cpu", "2"), ("memory", "1Gi"), ("example.com/gpu", "1")]), gpu_node(), vec![88])]
#[case::extended_resource_the_pod_does_not_request_is_left_out(three_resources(), pod(&[("cpu", "2"), ("memory", "1Gi")]), gpu_node(), vec![87])]
#[case::resource_the_node_lacks_is_left_out(json!({}), pod(&[("cpu", "3000"), ("memory", "5000")]), vec![node("n", &[("cpu", "4000"), ("pods", "32")], &[])], vec![100])]
#[case::node_without_the_resources(json!({}), pod(&[("cpu", "3000"), ("memory", "5000")]), vec![node("n", &[("pods", "32")], &[])], vec![100])]
fn balanced_scores(
    #[case] args: Value,
    #[case] pod: Arc<PodInfo>,
    #[case] nodes: Vec<NodeInfo>,
    #[case] want: Vec<i64>,
    #[values(true, false)] pre_score: bool,
) {
    let got = balanced_plugin(&args).and_then(|p| run_scores(p.as_ref(), &pod, &nodes, pre_score));
    assert_eq!(got, Ok(want));
}

#[rstest]
#[case::no_requests(make_pod("p").image("nginx").info())]
#[case::none_of_the_configured_resources(pod(&[("example.com/gpu", "1")]))]
fn balanced_allocation_skips_best_effort_pods(#[case] pod: Arc<PodInfo>) -> Result<(), String> {
    let plugin = balanced_plugin(&json!({}))?;
    let status = plugin.as_pre_score().ok_or("no PreScore")?.pre_score(
        &mut CycleState::new(),
        &pod,
        &Snapshot::default(),
        &[],
    );
    // Without PreScore, Score gives a best-effort pod 0.
    let score = plugin.as_score().ok_or("no Score")?.score(
        &CycleState::new(),
        &pod,
        &small_nodes().remove(0),
    );
    assert_eq!((status, score), (Status::skip(), Ok(0)));
    Ok(())
}

// ---- args: decoding and defaults ----

fn fit_args(strategy_type: &str, resources: &[(&str, i64)]) -> NodeResourcesFitArgs {
    NodeResourcesFitArgs {
        ignored_resources: Vec::new(),
        ignored_resource_groups: Vec::new(),
        scoring_strategy: Some(ScoringStrategy {
            strategy_type: strategy_type.to_string(),
            resources: resources
                .iter()
                .map(|(n, w)| ResourceSpec::new(n, *w))
                .collect(),
            requested_to_capacity_ratio: None,
        }),
    }
}

#[rstest]
#[case::absent(None, fit_args("LeastAllocated", &[("cpu", 1), ("memory", 1)]))]
#[case::empty(Some(json!({})), fit_args("LeastAllocated", &[("cpu", 1), ("memory", 1)]))]
#[case::null_strategy(Some(json!({"scoringStrategy": null})), fit_args("LeastAllocated", &[("cpu", 1), ("memory", 1)]))]
#[case::type_and_meta_fields(Some(json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs", "scoringStrategy": {"type": "MostAllocated"}})), fit_args("MostAllocated", &[("cpu", 1), ("memory", 1)]))]
#[case::unset_weight_is_one(Some(json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu"}, {"name": "example.com/gpu", "weight": 5}]}})), fit_args("LeastAllocated", &[("cpu", 1), ("example.com/gpu", 5)]))]
#[case::strategy_type_is_not_defaulted(Some(json!({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 2}]}})), fit_args("", &[("cpu", 2)]))]
#[case::ignored_resources(Some(json!({"ignoredResources": ["example.com/a"], "ignoredResourceGroups": ["example.org"]})), NodeResourcesFitArgs { ignored_resources: vec!["example.com/a".to_string()], ignored_resource_groups: vec!["example.org".to_string()], ..fit_args("LeastAllocated", &[("cpu", 1), ("memory", 1)]) })]
fn fit_args_decode_with_defaults(#[case] args: Option<Value>, #[case] want: NodeResourcesFitArgs) {
    assert_eq!(NodeResourcesFitArgs::decode(args.as_ref()), Ok(want));
}

#[test]
fn fit_args_default_is_upstream_default() {
    assert_eq!(
        NodeResourcesFitArgs::default(),
        fit_args("LeastAllocated", &[("cpu", 1), ("memory", 1)])
    );
}

#[rstest]
#[case::absent(None, vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)])]
#[case::empty_list(Some(json!({"resources": []})), vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)])]
#[case::unset_weight_is_one(Some(json!({"resources": [{"name": "cpu"}, {"name": "example.com/gpu"}]})), vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("example.com/gpu", 1)])]
fn balanced_args_decode_with_defaults(
    #[case] args: Option<Value>,
    #[case] want: Vec<ResourceSpec>,
) {
    assert_eq!(
        NodeResourcesBalancedAllocationArgs::decode(args.as_ref()),
        Ok(NodeResourcesBalancedAllocationArgs { resources: want })
    );
}

// ---- args: validation ----

const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn err(path: &str, message: &str) -> ArgsError {
    ArgsError::new(path, message)
}

fn fit_errors(args: Value) -> Vec<ArgsError> {
    match new_fit(Some(&args), &Handle::offline()) {
        Ok(_) => Vec::new(),
        Err(errs) => errs,
    }
}

#[rstest]
#[case::defaults_are_valid(json!({}), vec![])]
#[case::unknown_strategy(json!({"scoringStrategy": {"type": "Foo"}}), vec![err("scoringStrategy.type", "Unsupported value: \"Foo\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"")])]
#[case::strategy_without_type(json!({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}}), vec![err("scoringStrategy.type", "Unsupported value: \"\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"")])]
#[case::weight_above_range(json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 101}]}}), vec![err("scoringStrategy.resources[1].weight", "Invalid value: 101: resource weight of memory not in valid range (0, 100]")])]
#[case::negative_weight(json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": -1}]}}), vec![err("scoringStrategy.resources[0].weight", "Invalid value: -1: resource weight of cpu not in valid range (0, 100]")])]
#[case::ratio_without_parameters(json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}), vec![err("scoringStrategy.requestedToCapacityRatio", "Required value: must be specified when type is RequestedToCapacityRatio")])]
#[case::ratio_without_points(json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}}), vec![err("scoringStrategy.requestedToCapacityRatio.shape", "Required value: at least one point must be specified")])]
#[case::shape_not_increasing(ratio(cpu_memory(), json!([{"utilization": 0, "score": 0}, {"utilization": 50, "score": 5}, {"utilization": 50, "score": 6}, {"utilization": 40, "score": 7}])), vec![err("scoringStrategy.requestedToCapacityRatio.shape[2].utilization", "Invalid value: 50: values must be sorted in increasing order")])]
#[case::shape_out_of_range(ratio(cpu_memory(), json!([{"utilization": -1, "score": 0}, {"utilization": 101, "score": 11}])), vec![err("scoringStrategy.requestedToCapacityRatio.shape[0].utilization", "Invalid value: -1: not in valid range [0, 100]"), err("scoringStrategy.requestedToCapacityRatio.shape[1].utilization", "Invalid value: 101: not in valid range [0, 100]"), err("scoringStrategy.requestedToCapacityRatio.shape[1].score", "Invalid value: 11: not in valid range [0, 10]")])]
#[case::ratio_parameters_with_another_strategy(json!({"scoringStrategy": {"type": "LeastAllocated", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]}}}), vec![err("scoringStrategy.requestedToCapacityRatio", "Forbidden: must be nil when type is not RequestedToCapacityRatio")])]
#[case::ignored_resource_not_a_qualified_name(json!({"ignoredResources": ["example.com/aaa", "-bad"]}), vec![err("ignoredResources[1]", &format!("Invalid value: \"-bad\": name part {NAME_RULE}"))])]
#[case::ignored_resource_with_bad_prefix(json!({"ignoredResources": ["Example.com/aaa"]}), vec![err("ignoredResources[0]", "Invalid value: \"Example.com/aaa\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")])]
#[case::ignored_group_with_slash(json!({"ignoredResourceGroups": ["example.com/aaa"]}), vec![err("ignoredResourceGroups[0]", "Invalid value: \"example.com/aaa\": resource group name can't contain '/'")])]
#[case::empty_ignored_group(json!({"ignoredResourceGroups": [""]}), vec![err("ignoredResourceGroups[0]", "Invalid value: \"\": name part must be non-empty"), err("ignoredResourceGroups[0]", &format!("Invalid value: \"\": name part {NAME_RULE}"))])]
#[case::unknown_field(json!({"scoringStrategy": {"type": "LeastAllocated", "shape": []}}), vec![err("scoringStrategy.shape", "unknown field `shape`, expected one of `type`, `resources`, `requestedToCapacityRatio`")])]
#[case::wrong_type(json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": "heavy"}]}}), vec![err("scoringStrategy.resources[0].weight", "invalid type: string \"heavy\", expected i64")])]
fn fit_args_validation(#[case] args: Value, #[case] want: Vec<ArgsError>) {
    assert_eq!(fit_errors(args), want);
}

#[rstest]
#[case::defaults_are_valid(json!({}), vec![])]
#[case::duplicate_resource(json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "cpu"}]}), vec![err("resources[2].name", "Duplicate value: \"cpu\"")])]
#[case::weight_other_than_one(json!({"resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]}), vec![err("resources[0].weight", "Invalid value: 2: must be 1")])]
#[case::unknown_field(json!({"resource": []}), vec![err("resource", "unknown field `resource`, expected `resources`")])]
fn balanced_args_validation(#[case] args: Value, #[case] want: Vec<ArgsError>) {
    let got = match new_balanced_allocation(Some(&args), &Handle::offline()) {
        Ok(_) => Vec::new(),
        Err(errs) => errs,
    };
    assert_eq!(got, want);
}

fn class_obj(name: &str, extended: Option<&str>) -> Option<EventObject> {
    Some(EventObject::DeviceClass(Arc::new(device_class(
        name, extended,
    ))))
}

/// Upstream's isSchedulableAfterDeviceClassEvent cases.
#[rstest]
#[case::skip_on_class_add_with_implicit_name_not_matching(pod(&[("deviceclass.resource.kubernetes.io/gpuclass", "1")]), None, class_obj("myclass", Some("example.com/gpu")), QueueingHint::QueueSkip)]
#[case::skip_on_class_add_with_explicit_name_not_matching(pod(&[("example.com/othergpu", "1")]), None, class_obj("myclass", Some("example.com/gpu")), QueueingHint::QueueSkip)]
#[case::skip_on_class_update_with_implicit_name(pod(&[("deviceclass.resource.kubernetes.io/gpuclass", "1")]), class_obj("gpuclass", None), class_obj("gpuclass", Some("example.com/gpu")), QueueingHint::QueueSkip)]
#[case::queue_on_class_add_with_extended_resource_name(pod(&[("example.com/gpu", "1")]), None, class_obj("", Some("example.com/gpu")), QueueingHint::Queue)]
#[case::queue_on_class_add_with_implicit_name(pod(&[("deviceclass.resource.kubernetes.io/gpuclass", "1")]), None, class_obj("gpuclass", None), QueueingHint::Queue)]
#[case::queue_on_class_update_with_extended_resource_name(pod(&[("example.com/gpu", "1")]), class_obj("", Some("example.com/gpu1")), class_obj("", Some("example.com/gpu")), QueueingHint::Queue)]
#[case::skip_on_class_update_that_keeps_the_name(pod(&[("example.com/gpu", "1")]), class_obj("", Some("example.com/gpu")), class_obj("", Some("example.com/gpu")), QueueingHint::QueueSkip)]
fn device_class_hint(
    #[case] pod: Arc<PodInfo>,
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: QueueingHint,
) {
    assert_eq!(
        hint(EventResource::DeviceClass, &pod.pod, old, new),
        Ok(want)
    );
}

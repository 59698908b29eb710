//! The plugins that read a node's [`NodeRow`] (`filter_with_row`, `filter_rows`,
//! `score_rows`) decide exactly as they do from its NodeInfo (`filter`, `score_nodes`), on nodes and pods that
//! take each branch: flags set or not, scalar resources, images, full and over-committed
//! nodes, and every Fit scoring strategy.

use std::sync::Arc;

use rstest::rstest;
use serde_json::{json, Value};

use framework::testing::{filter_rows_of, make_node, make_pod};
use framework::{CycleState, Handle, NodeRow, Plugin, PodInfo, Snapshot, Status};

use crate::{imagelocality, noderesources, nodeunschedulable, tainttoleration};

/// Nodes covering each branch of the row paths.
fn nodes() -> Vec<Arc<k8s_openapi::api::core::v1::Node>> {
    let capacity = [
        ("cpu", "2"),
        ("memory", "4Gi"),
        ("ephemeral-storage", "10Gi"),
        ("pods", "3"),
    ];
    let with_gpu = [
        ("cpu", "2"),
        ("memory", "4Gi"),
        ("pods", "3"),
        ("example.com/gpu", "2"),
    ];
    [
        make_node("plain").capacity(&capacity),
        make_node("cordoned")
            .capacity(&capacity)
            .unschedulable(true),
        make_node("no-schedule")
            .capacity(&capacity)
            .taint("dedicated", "db", "NoSchedule"),
        make_node("prefer-no-schedule")
            .capacity(&capacity)
            .taint("spot", "", "PreferNoSchedule"),
        make_node("imaged")
            .capacity(&capacity)
            .image(&["nginx:1.25"], 300 * 1024 * 1024),
        make_node("gpu").capacity(&with_gpu),
        make_node("full").capacity(&capacity),
        make_node("busy").capacity(&capacity),
        make_node("empty"),
    ]
    .into_iter()
    .map(|b| Arc::new(b.obj()))
    .collect()
}

/// Pods already placed: `full` holds three (its pod limit), `busy` is over-committed on
/// cpu, `gpu` has one of its two devices in use.
fn placed() -> Vec<Arc<PodInfo>> {
    vec![
        make_pod("f1").node("full").info(),
        make_pod("f2").node("full").info(),
        make_pod("f3").node("full").info(),
        make_pod("b1")
            .node("busy")
            .req(&[("cpu", "3"), ("memory", "1Gi")])
            .info(),
        make_pod("g1")
            .node("gpu")
            .req(&[("cpu", "500m"), ("example.com/gpu", "1")])
            .info(),
    ]
}

/// Pending pods covering each branch.
fn pending() -> Vec<Arc<PodInfo>> {
    vec![
        make_pod("best-effort").info(),
        make_pod("small")
            .req(&[("cpu", "100m"), ("memory", "128Mi")])
            .info(),
        make_pod("storage")
            .req(&[("cpu", "1"), ("ephemeral-storage", "20Gi")])
            .info(),
        make_pod("huge")
            .req(&[("cpu", "8"), ("memory", "1Gi")])
            .info(),
        make_pod("gpu")
            .req(&[("cpu", "100m"), ("example.com/gpu", "1")])
            .info(),
        make_pod("tolerant")
            .req(&[("cpu", "100m")])
            .toleration("dedicated", "Equal", "db", "NoSchedule")
            .toleration(
                "node.kubernetes.io/unschedulable",
                "Exists",
                "",
                "NoSchedule",
            )
            .info(),
        make_pod("nginx").image("nginx:1.25").info(),
    ]
}

/// A plugin factory, as each plugin module has one.
type Factory = fn(Option<&Value>, &Handle) -> Result<Arc<dyn Plugin>, Vec<framework::ArgsError>>;

fn plugin(new: Factory, args: Option<Value>) -> Arc<dyn Plugin> {
    match new(args.as_ref(), &Handle::offline()) {
        Ok(p) => p,
        Err(e) => panic!("building the plugin: {e:?}"),
    }
}

/// What a plugin decided on every node for one pod: Filter statuses and Score results, by
/// the node path and by the row path.
#[derive(Debug, PartialEq)]
struct Decisions {
    filter: Vec<(String, Status)>,
    score: Option<Result<Vec<i64>, Status>>,
}

/// Runs PreFilter, PreScore, then Filter and Score on every node of the snapshot, through
/// the rows (`by_row`) or the NodeInfos.
fn decide(plugin: &dyn Plugin, pod: &PodInfo, snap: &Snapshot, by_row: bool) -> Decisions {
    let mut state = CycleState::new();
    state.set_num_all_nodes(snap.num_nodes());
    if let Some(p) = plugin.as_pre_filter() {
        p.pre_filter(&mut state, pod, snap);
    }
    let nodes = snap.node_infos();
    let pre_score = plugin
        .as_pre_score()
        .map(|p| p.pre_score(&mut state, pod, snap, nodes));
    let filter = match plugin.as_filter() {
        Some(f) => {
            let statuses: Vec<Status> = nodes
                .iter()
                .zip(snap.rows())
                .map(|(node, row)| {
                    if by_row {
                        f.filter_with_row(&state, pod, node, row)
                    } else {
                        f.filter(&state, pod, node)
                    }
                })
                .collect();
            if by_row {
                // The runtime's filter pass decides a run of rows at once.
                assert_eq!(filter_rows_of(f, &state, pod, snap), statuses);
            }
            nodes
                .iter()
                .map(|n| n.name().to_string())
                .zip(statuses)
                .collect()
        }
        None => Vec::new(),
    };
    let skipped = pre_score.as_ref().is_some_and(Status::is_skip);
    let score = plugin.as_score().filter(|_| !skipped).map(|s| {
        let mut out = vec![0; nodes.len()];
        let r = if by_row {
            s.score_rows(&state, pod, nodes, snap.rows(), &mut out)
        } else {
            s.score_nodes(&state, pod, nodes, &mut out)
        };
        r.map(|()| out)
    });
    Decisions { filter, score }
}

#[rstest]
#[case::node_unschedulable(plugin(nodeunschedulable::new, None))]
#[case::taint_toleration(plugin(tainttoleration::new, None))]
#[case::image_locality(plugin(imagelocality::new, None))]
#[case::fit_least_allocated(plugin(noderesources::new_fit, None))]
#[case::fit_most_allocated_with_storage(plugin(noderesources::new_fit, Some(json!({
    "scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2},
        {"name": "ephemeral-storage", "weight": 1}]}
}))))]
#[case::fit_requested_to_capacity_ratio(plugin(noderesources::new_fit, Some(json!({
    "scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        "requestedToCapacityRatio": {"shape": [
            {"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}
}))))]
#[case::fit_scoring_a_scalar_resource(plugin(noderesources::new_fit, Some(json!({
    "scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 3}]}
}))))]
#[case::balanced_allocation(plugin(noderesources::new_balanced_allocation, None))]
#[case::balanced_allocation_three_resources(plugin(noderesources::new_balanced_allocation, Some(json!({
    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
        {"name": "ephemeral-storage", "weight": 1}]
}))))]
fn row_path_decides_as_the_node_path(#[case] plugin: Arc<dyn Plugin>) {
    let snap = Snapshot::new(nodes(), placed());
    let by_row: Vec<Decisions> = pending()
        .iter()
        .map(|pod| decide(plugin.as_ref(), pod, &snap, true))
        .collect();
    let by_node: Vec<Decisions> = pending()
        .iter()
        .map(|pod| decide(plugin.as_ref(), pod, &snap, false))
        .collect();
    assert_eq!(by_row, by_node);
}

/// The rows `decide` hands the plugins are those of the NodeInfos, so that the comparison
/// above compares like with like; and the nodes do take the branches they are named for.
#[test]
fn fixture_rows_take_each_branch() {
    let snap = Snapshot::new(nodes(), placed());
    let rows: Vec<(&str, NodeRow)> = snap
        .node_infos()
        .iter()
        .zip(snap.rows())
        .map(|(n, r)| (n.name(), *r))
        .collect();
    let fresh: Vec<(&str, NodeRow)> = snap
        .node_infos()
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name(), NodeRow::of(n).at(i)))
        .collect();
    let flags: Vec<(&str, bool, bool, bool, u32)> = rows
        .iter()
        .map(|(n, r)| (*n, r.unschedulable, r.has_taints, r.has_images, r.pods))
        .collect();
    assert_eq!(
        (rows == fresh, flags),
        (
            true,
            vec![
                ("plain", false, false, false, 0),
                ("cordoned", true, false, false, 0),
                ("no-schedule", false, true, false, 0),
                ("prefer-no-schedule", false, true, false, 0),
                ("imaged", false, false, true, 0),
                ("gpu", false, false, false, 1),
                ("full", false, false, false, 3),
                ("busy", false, false, false, 1),
                ("empty", false, false, false, 0),
            ]
        )
    );
}

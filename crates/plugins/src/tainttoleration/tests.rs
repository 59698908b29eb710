use std::sync::Arc;

use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::{
    ActionType, ClusterEvent, CycleState, EventObject, EventResource, Handle, NodeInfo, NodeScore,
    PodInfo, QueueingHint, Snapshot, Status,
};
use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};
use rstest::rstest;

use super::*;

fn plugin() -> TaintToleration {
    TaintToleration
}

fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
    Toleration {
        key: (!key.is_empty()).then(|| key.to_string()),
        operator: (!op.is_empty()).then(|| op.to_string()),
        value: (!value.is_empty()).then(|| value.to_string()),
        effect: (!effect.is_empty()).then(|| effect.to_string()),
        toleration_seconds: None,
    }
}

fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        value: (!value.is_empty()).then(|| value.to_string()),
        effect: effect.to_string(),
        time_added: None,
    }
}

#[rstest]
#[case::exists_same_key_and_effect_no_value(
    toleration("foo", "Exists", "", "NoSchedule"),
    taint("foo", "", "NoSchedule"),
    true
)]
#[case::exists_matches_any_value(
    toleration("foo", "Exists", "", "NoSchedule"),
    taint("foo", "bar", "NoSchedule"),
    true
)]
#[case::empty_key_with_exists_matches_every_key(
    toleration("", "Exists", "", "NoSchedule"),
    taint("foo", "bar", "NoSchedule"),
    true
)]
#[case::empty_key_and_effect_with_exists_matches_everything(
    toleration("", "Exists", "", ""),
    taint("foo", "bar", "NoExecute"),
    true
)]
#[case::equal_same_value(
    toleration("foo", "Equal", "bar", "NoSchedule"),
    taint("foo", "bar", "NoSchedule"),
    true
)]
#[case::empty_operator_means_equal(
    toleration("foo", "", "bar", "NoSchedule"),
    taint("foo", "bar", "NoSchedule"),
    true
)]
#[case::empty_operator_other_value(
    toleration("foo", "", "baz", "NoSchedule"),
    taint("foo", "bar", "NoSchedule"),
    false
)]
#[case::equal_other_value(
    toleration("foo", "Equal", "value1", "NoSchedule"),
    taint("foo", "value2", "NoSchedule"),
    false
)]
#[case::equal_empty_value_matches_taint_without_value(
    toleration("foo", "Equal", "", "NoSchedule"),
    taint("foo", "", "NoSchedule"),
    true
)]
#[case::other_effect(
    toleration("foo", "Equal", "bar", "NoSchedule"),
    taint("foo", "bar", "NoExecute"),
    false
)]
#[case::empty_effect_matches_every_effect(
    toleration("foo", "Equal", "bar", ""),
    taint("foo", "bar", "PreferNoSchedule"),
    true
)]
#[case::other_key(
    toleration("foo", "Exists", "", "NoSchedule"),
    taint("bar", "", "NoSchedule"),
    false
)]
#[case::unknown_operator_matches_nothing(
    toleration("foo", "Bogus", "bar", "NoSchedule"),
    taint("foo", "bar", "NoSchedule"),
    false
)]
#[case::gt_taint_above(
    toleration("sla", "Gt", "750", "NoSchedule"),
    taint("sla", "950", "NoSchedule"),
    true
)]
#[case::gt_taint_below(
    toleration("sla", "Gt", "950", "NoSchedule"),
    taint("sla", "800", "NoSchedule"),
    false
)]
#[case::gt_equal_is_not_greater(
    toleration("sla", "Gt", "950", "NoSchedule"),
    taint("sla", "950", "NoSchedule"),
    false
)]
#[case::lt_taint_below(
    toleration("sla", "Lt", "950", "NoSchedule"),
    taint("sla", "800", "NoSchedule"),
    true
)]
#[case::lt_equal_is_not_less(
    toleration("sla", "Lt", "950", "NoSchedule"),
    taint("sla", "950", "NoSchedule"),
    false
)]
#[case::lt_taint_above(
    toleration("sla", "Lt", "800", "NoSchedule"),
    taint("sla", "950", "NoSchedule"),
    false
)]
#[case::gt_negative_values(
    toleration("k", "Gt", "-100", "NoSchedule"),
    taint("k", "-50", "NoSchedule"),
    true
)]
#[case::lt_min_int64(
    toleration("k", "Lt", "0", "NoSchedule"),
    taint("k", "-9223372036854775808", "NoSchedule"),
    true
)]
#[case::gt_max_int64(
    toleration("k", "Gt", "0", "NoSchedule"),
    taint("k", "9223372036854775807", "NoSchedule"),
    true
)]
#[case::gt_overflowing_value(
    toleration("k", "Gt", "0", "NoSchedule"),
    taint("k", "9223372036854775808", "NoSchedule"),
    false
)]
#[case::gt_non_numeric_taint(
    toleration("sla", "Gt", "950", "NoSchedule"),
    taint("sla", "high", "NoSchedule"),
    false
)]
#[case::gt_leading_zero_toleration(
    toleration("k", "Gt", "0100", "NoSchedule"),
    taint("k", "200", "NoSchedule"),
    false
)]
#[case::gt_plus_sign_toleration(
    toleration("k", "Gt", "+100", "NoSchedule"),
    taint("k", "200", "NoSchedule"),
    false
)]
#[case::gt_negative_zero_toleration(
    toleration("k", "Gt", "-0", "NoSchedule"),
    taint("k", "200", "NoSchedule"),
    false
)]
#[case::gt_lone_minus_toleration(
    toleration("k", "Gt", "-", "NoSchedule"),
    taint("k", "200", "NoSchedule"),
    false
)]
#[case::gt_float_toleration(
    toleration("k", "Gt", "100.5", "NoSchedule"),
    taint("k", "200", "NoSchedule"),
    false
)]
#[case::lt_leading_zero_taint(
    toleration("k", "Lt", "300", "NoSchedule"),
    taint("k", "0200", "NoSchedule"),
    false
)]
#[case::lt_spaces_in_taint(
    toleration("k", "Lt", "300", "NoSchedule"),
    taint("k", " 200 ", "NoSchedule"),
    false
)]
#[case::lt_empty_taint_value(
    toleration("k", "Lt", "300", "NoSchedule"),
    taint("k", "", "NoSchedule"),
    false
)]
#[case::lt_zero_taint(
    toleration("k", "Lt", "1", "NoSchedule"),
    taint("k", "0", "NoSchedule"),
    true
)]
fn toleration_matching(#[case] t: Toleration, #[case] taint: Taint, #[case] want: bool) {
    assert_eq!(tolerations_tolerate_taint(&[t], &taint), want);
}

fn untolerated() -> Status {
    Status::unresolvable(ERR_REASON_UNTOLERATED)
}

#[rstest]
#[case::no_taints(make_pod("p"), make_node("n"), Status::success())]
#[case::no_tolerations_no_schedule_taint(make_pod("p"), make_node("n").taint("dedicated", "user1", "NoSchedule"), untolerated())]
#[case::no_tolerations_no_execute_taint(make_pod("p"), make_node("n").taint("dedicated", "user1", "NoExecute"), untolerated())]
#[case::prefer_no_schedule_taint_is_not_filtered(make_pod("p"), make_node("n").taint("dedicated", "user1", "PreferNoSchedule"), Status::success())]
#[case::matching_toleration(make_pod("p").toleration("dedicated", "Equal", "user1", "NoSchedule"), make_node("n").taint("dedicated", "user1", "NoSchedule"), Status::success())]
#[case::toleration_with_other_value(make_pod("p").toleration("dedicated", "Equal", "user2", "NoSchedule"), make_node("n").taint("dedicated", "user1", "NoSchedule"), untolerated())]
#[case::exists_toleration(make_pod("p").toleration("foo", "Exists", "", "NoSchedule"), make_node("n").taint("foo", "bar", "NoSchedule"), Status::success())]
#[case::every_taint_must_be_tolerated(
    make_pod("p").toleration("dedicated", "Equal", "user2", "NoSchedule").toleration("foo", "Exists", "", "NoSchedule"),
    make_node("n").taint("dedicated", "user2", "NoSchedule").taint("foo", "bar", "NoSchedule").taint("other", "", "NoExecute"),
    untolerated()
)]
#[case::all_taints_tolerated(
    make_pod("p").toleration("dedicated", "Equal", "user2", "NoSchedule").toleration("foo", "Exists", "", "NoSchedule"),
    make_node("n").taint("dedicated", "user2", "NoSchedule").taint("foo", "bar", "NoSchedule"),
    Status::success()
)]
#[case::prefer_no_schedule_toleration_does_not_tolerate_no_schedule(make_pod("p").toleration("foo", "Equal", "bar", "PreferNoSchedule"), make_node("n").taint("foo", "bar", "NoSchedule"), untolerated())]
#[case::toleration_without_effect_tolerates_no_execute(make_pod("p").toleration("foo", "Equal", "bar", ""), make_node("n").taint("foo", "bar", "NoExecute"), Status::success())]
#[case::tolerate_everything(make_pod("p").toleration("", "Exists", "", ""), make_node("n").taint("a", "1", "NoSchedule").taint("b", "", "NoExecute"), Status::success())]
#[case::numeric_toleration(make_pod("p").toleration("sla", "Gt", "900", "NoSchedule"), make_node("n").taint("sla", "950", "NoSchedule"), Status::success())]
fn filter(#[case] pod: PodBuilder, #[case] node: NodeBuilder, #[case] want: Status) {
    let got = plugin().filter(&CycleState::new(), &pod.info(), &node.info_with(&[]));
    assert_eq!(got, want);
}

/// Runs PreScore, Score on every node and NormalizeScore, as the framework does.
fn run_scoring(pod: &PodInfo, nodes: &[NodeInfo]) -> Result<Vec<i64>, Status> {
    let pl = plugin();
    let mut state = CycleState::new();
    let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
    let status = pl.pre_score(&mut state, pod, &Snapshot::default(), &arcs);
    assert_eq!(status, Status::success());
    let mut scores = Vec::with_capacity(nodes.len());
    for node in nodes {
        scores.push(NodeScore {
            node,
            score: pl.score(&state, pod, node)?,
        });
    }
    // Scoring all nodes in one call gives the same raw scores.
    let mut batch = vec![0; arcs.len()];
    pl.score_nodes(&state, pod, &arcs, &mut batch)?;
    assert_eq!(batch, scores.iter().map(|s| s.score).collect::<Vec<_>>());
    let status = pl.normalize_score(&state, pod, &mut scores);
    assert_eq!(status, Status::success());
    Ok(scores.iter().map(|s| s.score).collect())
}

#[rstest]
#[case::node_with_tolerated_taint_beats_untolerated_taint(
    make_pod("p").toleration("foo", "Equal", "bar", "PreferNoSchedule"),
    vec![
        make_node("n1").taint("foo", "bar", "PreferNoSchedule"),
        make_node("n2").taint("foo", "blah", "PreferNoSchedule"),
    ],
    vec![100, 0]
)]
#[case::tolerated_prefer_no_schedule_taints_do_not_count(
    make_pod("p").toleration("cpu-type", "Equal", "arm64", "PreferNoSchedule").toleration("disk-type", "Equal", "ssd", "PreferNoSchedule"),
    vec![
        make_node("n1"),
        make_node("n2").taint("cpu-type", "arm64", "PreferNoSchedule"),
        make_node("n3").taint("cpu-type", "arm64", "PreferNoSchedule").taint("disk-type", "ssd", "PreferNoSchedule"),
    ],
    vec![100, 100, 100]
)]
#[case::counts_untolerated_taints(
    make_pod("p").toleration("foo", "Equal", "bar", "PreferNoSchedule"),
    vec![
        make_node("n1"),
        make_node("n2").taint("cpu-type", "arm64", "PreferNoSchedule"),
        make_node("n3").taint("cpu-type", "arm64", "PreferNoSchedule").taint("disk-type", "ssd", "PreferNoSchedule"),
    ],
    vec![100, 50, 0]
)]
#[case::no_schedule_taints_are_not_counted(
    make_pod("p").toleration("cpu-type", "Equal", "arm64", "NoSchedule"),
    vec![
        make_node("n1").taint("cpu-type", "arm64", "NoSchedule"),
        make_node("n2").taint("cpu-type", "arm64", "PreferNoSchedule"),
    ],
    vec![100, 0]
)]
#[case::toleration_without_effect_counts_for_prefer_no_schedule(
    make_pod("p").toleration("foo", "Exists", "", ""),
    vec![
        make_node("n1").taint("foo", "x", "PreferNoSchedule"),
        make_node("n2").taint("bar", "x", "PreferNoSchedule"),
    ],
    vec![100, 0]
)]
#[case::no_schedule_toleration_does_not_help_prefer_no_schedule(
    make_pod("p").toleration("foo", "Exists", "", "NoSchedule"),
    vec![
        make_node("n1").taint("foo", "x", "PreferNoSchedule"),
        make_node("n2"),
    ],
    vec![0, 100]
)]
#[case::no_taints_anywhere_all_get_max(make_pod("p"), vec![make_node("n1"), make_node("n2")], vec![100, 100])]
fn scores(#[case] pod: PodBuilder, #[case] nodes: Vec<NodeBuilder>, #[case] want: Vec<i64>) {
    let nodes: Vec<NodeInfo> = nodes.into_iter().map(|n| n.info_with(&[])).collect();
    assert_eq!(run_scoring(&pod.info(), &nodes), Ok(want));
}

#[test]
fn score_without_pre_score_is_an_error() {
    let got = plugin().score(
        &CycleState::new(),
        &make_pod("p").info(),
        &make_node("n").info_with(&[]),
    );
    assert_eq!(
        got,
        Err(Status::error(
            "failed to read \"PreScoreTaintToleration\" from cycleState: not found"
        ))
    );
}

#[test]
fn new_ignores_args() {
    let args = serde_json::json!({"anything": 1});
    let pl = new(Some(&args), &Handle::offline()).map(|p| p.name());
    assert_eq!(pl, Ok(NAME));
}

#[test]
fn registers_node_and_pod_toleration_events_with_hints() {
    let events: Vec<(ClusterEvent, bool)> = plugin()
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                ClusterEvent::new(
                    EventResource::Node,
                    ActionType::ADD | ActionType::UPDATE_NODE_TAINT
                ),
                true
            ),
            (
                ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_TOLERATIONS),
                true
            ),
        ]
    );
}

fn node_obj(b: NodeBuilder) -> EventObject {
    EventObject::Node(Arc::new(b.obj()))
}

fn pod_obj(b: PodBuilder) -> EventObject {
    EventObject::Pod(Arc::new(b.obj()))
}

/// Calls the hint registered for `resource`.
fn hint(
    resource: EventResource,
    pod: &Pod,
    old: Option<EventObject>,
    new: Option<EventObject>,
) -> Result<QueueingHint, String> {
    let events = plugin().events_to_register();
    let Some(f) = events
        .iter()
        .find(|e| e.event.resource == resource)
        .and_then(|e| e.hint.clone())
    else {
        return Err(format!("no hint registered for {resource:?}"));
    };
    f(pod, old.as_ref(), new.as_ref())
}

#[rstest]
#[case::added_node_without_taints(
    make_pod("p"),
    None,
    Some(node_obj(make_node("n"))),
    Ok(QueueingHint::Queue)
)]
#[case::added_node_with_untolerated_taint(make_pod("p"), None, Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule"))), Ok(QueueingHint::QueueSkip))]
#[case::added_node_with_tolerated_taint(make_pod("p").toleration("foo", "Equal", "bar", "NoSchedule"), None, Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule"))), Ok(QueueingHint::Queue))]
#[case::taint_removed(
    make_pod("p"),
    Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule"))),
    Some(node_obj(make_node("n"))),
    Ok(QueueingHint::Queue)
)]
#[case::taint_changed_to_tolerated_value(
    make_pod("p").toleration("foo", "Equal", "bar", "NoSchedule"),
    Some(node_obj(make_node("n").taint("foo", "baz", "NoSchedule"))),
    Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule"))),
    Ok(QueueingHint::Queue)
)]
#[case::was_already_tolerated(
    make_pod("p").toleration("foo", "Equal", "bar", "NoSchedule"),
    Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule"))),
    Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule").taint("x", "", "PreferNoSchedule"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::still_untolerated(
    make_pod("p"),
    Some(node_obj(make_node("n").taint("foo", "bar", "NoSchedule"))),
    Some(node_obj(make_node("n").taint("foo", "baz", "NoSchedule"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::not_a_node(make_pod("p"), None, Some(pod_obj(make_pod("q"))), Err("expected Node, but got Pod".to_string()))]
fn node_change_hint(
    #[case] pod: PodBuilder,
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(hint(EventResource::Node, &pod.obj(), old, new), want);
}

#[rstest]
#[case::the_pending_pod_itself(
    make_pod("p"),
    Some(pod_obj(make_pod("p").toleration("foo", "Exists", "", "NoSchedule"))),
    Ok(QueueingHint::Queue)
)]
#[case::another_pod(
    make_pod("p"),
    Some(pod_obj(make_pod("q").toleration("foo", "Exists", "", "NoSchedule"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::not_a_pod(make_pod("p"), Some(node_obj(make_node("n"))), Err("expected Pod, but got Node".to_string()))]
fn pod_toleration_change_hint(
    #[case] pod: PodBuilder,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let old = Some(pod_obj(pod.clone()));
    assert_eq!(hint(EventResource::Pod, &pod.obj(), old, new), want);
}

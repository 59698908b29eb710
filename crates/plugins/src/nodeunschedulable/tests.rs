use std::sync::Arc;

use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::{
    ActionType, ClusterEvent, CycleState, EventObject, EventResource, Handle, QueueingHint, Status,
};
use k8s_openapi::api::core::v1::Pod;
use rstest::rstest;

use super::*;

fn unschedulable() -> Status {
    Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
}

#[rstest]
#[case::schedulable_node(make_pod("p"), make_node("n"), Status::success())]
#[case::explicitly_schedulable_node(make_pod("p"), make_node("n").unschedulable(false), Status::success())]
#[case::cordoned_node(make_pod("p"), make_node("n").unschedulable(true), unschedulable())]
#[case::cordoned_node_tolerated_by_key_and_effect(
    make_pod("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule"),
    make_node("n").unschedulable(true),
    Status::success()
)]
#[case::cordoned_node_tolerated_by_everything_toleration(make_pod("p").toleration("", "Exists", "", ""), make_node("n").unschedulable(true), Status::success())]
#[case::cordoned_node_tolerated_by_equal_empty_value(
    make_pod("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Equal", "", "NoSchedule"),
    make_node("n").unschedulable(true),
    Status::success()
)]
#[case::no_execute_toleration_does_not_help(
    make_pod("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoExecute"),
    make_node("n").unschedulable(true),
    unschedulable()
)]
#[case::unrelated_toleration_does_not_help(make_pod("p").toleration("foo", "Exists", "", "NoSchedule"), make_node("n").unschedulable(true), unschedulable())]
fn filter(#[case] pod: PodBuilder, #[case] node: NodeBuilder, #[case] want: Status) {
    let got = NodeUnschedulable.filter(&CycleState::new(), &pod.info(), &node.info_with(&[]));
    assert_eq!(got, want);
}

#[test]
fn registers_node_and_pod_toleration_events_with_hints() {
    let events: Vec<(ClusterEvent, bool)> = NodeUnschedulable
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

#[test]
fn new_ignores_args() {
    let args = serde_json::json!({"anything": 1});
    let pl = new(Some(&args), &Handle::offline()).map(|p| p.name());
    assert_eq!(pl, Ok(NAME));
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
    let events = NodeUnschedulable.events_to_register();
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
#[case::schedulable_node_added(None, Some(node_obj(make_node("n"))), Ok(QueueingHint::Queue))]
#[case::cordoned_node_added(None, Some(node_obj(make_node("n").unschedulable(true))), Ok(QueueingHint::QueueSkip))]
#[case::node_uncordoned(
    Some(node_obj(make_node("n").unschedulable(true))),
    Some(node_obj(make_node("n").unschedulable(false))),
    Ok(QueueingHint::Queue)
)]
#[case::node_cordoned(
    Some(node_obj(make_node("n"))),
    Some(node_obj(make_node("n").unschedulable(true))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::schedulable_node_taint_change(
    Some(node_obj(make_node("n"))),
    Some(node_obj(make_node("n").taint("foo", "", "NoSchedule"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::cordoned_node_taint_change(
    Some(node_obj(make_node("n").unschedulable(true))),
    Some(node_obj(make_node("n").unschedulable(true).taint("foo", "", "NoSchedule"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::not_a_node(None, Some(pod_obj(make_pod("q"))), Err("expected Node, but got Pod".to_string()))]
fn node_change_hint(
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        hint(EventResource::Node, &make_pod("p").obj(), old, new),
        want
    );
}

#[rstest]
#[case::pending_pod_gains_matching_toleration(
    make_pod("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule"),
    Ok(QueueingHint::Queue)
)]
#[case::pending_pod_gains_unrelated_toleration(make_pod("p").toleration("foo", "Exists", "", "NoSchedule"), Ok(QueueingHint::QueueSkip))]
#[case::other_pod_gains_matching_toleration(
    make_pod("q").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule"),
    Ok(QueueingHint::QueueSkip)
)]
fn pod_toleration_change_hint(
    #[case] modified: PodBuilder,
    #[case] want: Result<QueueingHint, String>,
) {
    let pod = make_pod("p");
    let old = Some(pod_obj(pod.clone()));
    assert_eq!(
        hint(EventResource::Pod, &pod.obj(), old, Some(pod_obj(modified))),
        want
    );
}

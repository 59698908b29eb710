use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::{ActionType, ClusterEvent, CycleState, EventResource, Handle, Status};
use rstest::rstest;

use super::*;

#[rstest]
#[case::no_node_name_fits_any_node(make_pod("p"), make_node("foo"), Status::success())]
#[case::same_node_name(make_pod("p").node("foo"), make_node("foo"), Status::success())]
#[case::other_node_name(make_pod("p").node("bar"), make_node("foo"), Status::unresolvable(ERR_REASON))]
#[case::empty_node_name_fits_any_node(make_pod("p").node(""), make_node("foo"), Status::success())]
fn filter(#[case] pod: PodBuilder, #[case] node: NodeBuilder, #[case] want: Status) {
    let got = NodeName.filter(&CycleState::new(), &pod.info(), &node.info_with(&[]));
    assert_eq!(got, want);
}

#[test]
fn registers_node_add_without_hint() {
    let events: Vec<(ClusterEvent, bool)> = NodeName
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![(
            ClusterEvent::new(EventResource::Node, ActionType::ADD),
            false
        )]
    );
}

#[test]
fn new_ignores_args() {
    let args = serde_json::json!({"anything": 1});
    let pl = new(Some(&args), &Handle::offline()).map(|p| p.name());
    assert_eq!(pl, Ok(NAME));
}

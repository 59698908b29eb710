use std::sync::Arc;
use std::time::{Duration, Instant};

use framework::testing::make_node;
use framework::testing::make_pod;
use framework::{
    ActionType, ArgsError, ClusterEvent, Code, CycleState, EventResource, Handle, NodeInfo,
    PermitPlugin, PreScorePlugin, ScorePlugin, Snapshot, Status, WaitingPod,
};
use rstest::rstest;
use serde_json::json;

use super::*;

const NODES: [&str; 5] = ["node0", "node1", "node2", "node3", "node-a"];

fn plugin(wait_seconds_per_digit: u32) -> NodeNumber {
    NodeNumber {
        args: NodeNumberArgs {
            wait_seconds_per_digit,
        },
        waiting_pods: WaitingPods::default(),
    }
}

fn nodes() -> Vec<Arc<NodeInfo>> {
    NODES
        .iter()
        .map(|n| Arc::new(make_node(n).info_with(&[])))
        .collect()
}

#[rstest]
#[case::pod_digit_matches_one_node("pod1", vec![0, 10, 0, 0, 0])]
#[case::another_digit_another_node("pod3", vec![0, 0, 0, 10, 0])]
#[case::digit_without_a_node_scores_all_zero("pod7", vec![0, 0, 0, 0, 0])]
#[case::name_without_a_digit_scores_all_zero("web", vec![0, 0, 0, 0, 0])]
#[case::only_the_last_character_counts("pod12", vec![0, 0, 10, 0, 0])]
fn pre_score_then_score_gives_ten_to_the_node_with_the_pods_digit(
    #[case] pod: &str,
    #[case] want: Vec<i64>,
) {
    let pl = plugin(1);
    let pod = make_pod(pod).info();
    let nodes = nodes();
    let mut state = CycleState::new();
    let pre = pl.pre_score(&mut state, &pod, &Snapshot::default(), &nodes);
    let scores: Result<Vec<i64>, Status> =
        nodes.iter().map(|n| pl.score(&state, &pod, n)).collect();
    assert_eq!((pre, scores), (Status::success(), Ok(want)));
}

#[test]
fn score_without_pre_score_state_is_zero() {
    let nodes = nodes();
    let got = plugin(1).score(&CycleState::new(), &make_pod("pod1").info(), &nodes[1]);
    assert_eq!(got, Ok(0));
}

#[rstest]
#[case::node_digit_waits_with_a_timeout_one_unit_longer(
    1,
    "node3",
    (Status::new(Code::Wait, WAIT_REASON), Duration::from_secs(4))
)]
#[case::unit_scales_the_timeout(
    2,
    "node3",
    (Status::new(Code::Wait, WAIT_REASON), Duration::from_secs(8))
)]
#[case::node_zero_is_permitted_at_once(1, "node0", (Status::success(), Duration::ZERO))]
#[case::node_without_digit_is_permitted_at_once(1, "node-a", (Status::success(), Duration::ZERO))]
#[case::unit_zero_turns_the_wait_off(0, "node3", (Status::success(), Duration::ZERO))]
fn permit_waits_for_the_nodes_digit(
    #[case] unit: u32,
    #[case] node: &str,
    #[case] want: (Status, Duration),
) {
    let got = plugin(unit).permit(&mut CycleState::new(), &make_pod("pod1").info(), node);
    assert_eq!(got, want);
}

#[test]
fn permit_timer_allows_the_waiting_pod() {
    let pl = plugin(1);
    let pod = make_pod("pod1").info();
    let (status, timeout) = pl.permit(&mut CycleState::new(), &pod, "node1");
    assert!(status.is_wait(), "{status:?}");
    // What the runtime does with a Wait: register the pod, then wait for the verdict.
    let (wp, mut verdict) = WaitingPod::new(pod.clone(), "node1", [(NAME, timeout)]);
    pl.waiting_pods.add(pod.id.clone(), wp);
    let deadline = Instant::now() + Duration::from_secs(30);
    let got = loop {
        match verdict.try_recv() {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("no verdict within 30 s: {e}"),
        }
    };
    assert_eq!(got, Status::success());
}

#[rstest]
#[case::absent_args_are_the_defaults(None, Ok(NodeNumberArgs { wait_seconds_per_digit: 1 }))]
#[case::empty_args_are_the_defaults(Some(json!({})), Ok(NodeNumberArgs { wait_seconds_per_digit: 1 }))]
#[case::unit_is_read(
    Some(json!({"waitSecondsPerDigit": 3})),
    Ok(NodeNumberArgs { wait_seconds_per_digit: 3 })
)]
#[case::negative_unit_is_refused_at_its_field(
    Some(json!({"waitSecondsPerDigit": -1})),
    Err(vec![ArgsError::new("waitSecondsPerDigit", "invalid value: integer `-1`, expected u32")])
)]
#[case::unknown_field_is_refused(
    Some(json!({"reverse": true})),
    Err(vec![ArgsError::new("reverse", "unknown field `reverse`, expected `waitSecondsPerDigit`")])
)]
fn args_are_decoded_with_field_paths(
    #[case] args: Option<serde_json::Value>,
    #[case] want: Result<NodeNumberArgs, Vec<ArgsError>>,
) {
    let got = NodeNumber::from_args(args.as_ref(), &Handle::offline()).map(|p| p.args);
    assert_eq!(got, want);
}

#[test]
fn a_node_added_may_make_a_rejected_pod_schedulable() {
    let events: Vec<ClusterEvent> = plugin(1)
        .events_to_register()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        vec![ClusterEvent::new(EventResource::Node, ActionType::ADD)]
    );
}

use super::*;

use framework::testing::{make_node, make_pod, PodBuilder};
use framework::{ClusterEvent, Code};
use rstest::rstest;

fn plugin() -> Arc<dyn Plugin> {
    let Ok(p) = new(None, &Handle::offline()) else {
        unreachable!("SchedulingGates takes no args")
    };
    p
}

#[rstest]
#[case::no_gates_is_admitted(make_pod("p"), Status::success())]
#[case::empty_gate_list_is_admitted(
    make_pod("p").with(|pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.scheduling_gates = Some(Vec::new());
        }
    }),
    Status::success()
)]
#[case::one_gate_waits(
    make_pod("p").scheduling_gate("example.com/quota"),
    Status::new(Code::UnschedulableAndUnresolvable, "waiting for scheduling gates: [example.com/quota]")
)]
#[case::gates_are_listed_in_spec_order_space_separated(
    make_pod("p").scheduling_gate("foo").scheduling_gate("bar"),
    Status::new(Code::UnschedulableAndUnresolvable, "waiting for scheduling gates: [foo bar]")
)]
fn pre_enqueue(#[case] pod: PodBuilder, #[case] want: Status) {
    let p = plugin();
    let pod = pod.info();
    assert_eq!(
        p.as_pre_enqueue().map(|pe| pe.pre_enqueue(&pod)),
        Some(want)
    );
}

#[test]
fn registers_gates_eliminated_with_hint() {
    let p = plugin();
    let events: Vec<(ClusterEvent, bool)> = p
        .as_enqueue_extensions()
        .map(|e| e.events_to_register())
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![(
            ClusterEvent::new(
                EventResource::Pod,
                ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED
            ),
            true
        )]
    );
}

fn pod_object(p: PodBuilder) -> Option<EventObject> {
    Some(EventObject::Pod(Arc::new(p.obj())))
}

#[rstest]
#[case::own_last_gate_removed_queues(
    pod_object(make_pod("p").scheduling_gate("foo")),
    pod_object(make_pod("p")),
    Ok(QueueingHint::Queue)
)]
#[case::own_gate_left_is_skipped(
    pod_object(make_pod("p").scheduling_gate("foo").scheduling_gate("bar")),
    pod_object(make_pod("p").scheduling_gate("bar")),
    Ok(QueueingHint::QueueSkip)
)]
#[case::other_pod_is_skipped(
    pod_object(make_pod("other").scheduling_gate("foo")),
    pod_object(make_pod("other")),
    Ok(QueueingHint::QueueSkip)
)]
#[case::non_pod_object_is_an_error(
    pod_object(make_pod("p").scheduling_gate("foo")),
    Some(EventObject::Node(Arc::new(make_node("n1").obj()))),
    Err("expected the updated Pod, got a Node".to_string())
)]
#[case::missing_object_is_an_error(
    pod_object(make_pod("p").scheduling_gate("foo")),
    None,
    Err("expected the updated Pod, got nothing".to_string())
)]
fn hint_after_gates_eliminated(
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pending = make_pod("p").scheduling_gate("foo").obj();
    assert_eq!(
        is_schedulable_after_gates_eliminated(&pending, old.as_ref(), new.as_ref()),
        want
    );
}

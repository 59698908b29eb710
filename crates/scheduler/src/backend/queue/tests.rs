//! Queue tests: fake clock, real PrioritySort and SchedulingGates, and probe plugins whose
//! only job is to register events (with or without hints).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use framework::testing::{make_node, make_pod};
use framework::{
    ActionType, ArgsError, ClusterEvent, ClusterEventWithHint, CycleState, EnqueueExtensions,
    EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, QueueingHint,
    Status,
};
use k8s_openapi::api::core::v1::Pod;
use rstest::rstest;

use super::*;
use crate::clock::FakeClock;
use crate::runtime::{Framework, PluginSetSpec, ProfileSpec};

// ---- probe plugins and a framework built from them ------------------------------------

/// A Filter plugin (so that the queue asks it about pods it rejected) that registers the
/// given events; with `no_extensions` it does not implement EnqueueExtensions at all.
#[derive(Clone)]
struct Probe {
    name: &'static str,
    events: Vec<ClusterEventWithHint>,
    no_extensions: bool,
}

impl Plugin for Probe {
    fn name(&self) -> &'static str {
        self.name
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        (!self.no_extensions).then_some(self as &dyn EnqueueExtensions)
    }
}

impl FilterPlugin for Probe {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

impl EnqueueExtensions for Probe {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        self.events.clone()
    }
}

thread_local! {
    static PROBES: std::cell::RefCell<Vec<Probe>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn make_probe(
    args: Option<&serde_json::Value>,
    _h: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let name = args
        .and_then(|a| a.get("probe"))
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    PROBES.with(|c| {
        c.borrow()
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .map(|p| Arc::new(p) as Arc<dyn Plugin>)
            .ok_or_else(|| vec![ArgsError::new("", format!("no probe {name:?}"))])
    })
}

/// A profile named `scheduler_name` with PrioritySort, SchedulingGates, DefaultBinder and
/// `probes`.
fn framework(scheduler_name: &str, probes: Vec<Probe>) -> Arc<Framework> {
    let mut registry = plugins::registry::in_tree_registry();
    let mut spec = ProfileSpec {
        scheduler_name: scheduler_name.into(),
        ..Default::default()
    };
    spec.multi_point = PluginSetSpec {
        enabled: ["PrioritySort", "SchedulingGates", "DefaultBinder"]
            .iter()
            .map(|n| (n.to_string(), 0))
            .collect(),
        disabled: vec![],
    };
    for (i, p) in probes.iter().enumerate() {
        registry.insert(p.name, std::sync::Arc::new(make_probe));
        spec.multi_point.enabled.push((p.name.to_string(), 0));
        spec.plugin_args.insert(
            p.name.to_string(),
            (i, serde_json::json!({ "probe": p.name })),
        );
    }
    PROBES.with(|c| *c.borrow_mut() = probes);
    let built = Framework::build(&spec, &registry, Handle::offline(), &[]);
    match built {
        Ok((fw, _)) => Arc::new(fw),
        Err(e) => panic!("test profile does not build: {e:?}"),
    }
}

fn probe(name: &'static str, events: Vec<ClusterEventWithHint>) -> Probe {
    Probe {
        name,
        events,
        no_extensions: false,
    }
}

/// Queues only when the new node carries label `ok=true`.
fn node_ok_hint(
    _pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    match new {
        Some(EventObject::Node(n)) => {
            let ok = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("ok"))
                .is_some_and(|v| v == "true");
            Ok(if ok {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            })
        }
        _ => Err("not a node".into()),
    }
}

fn failing_hint(
    _: &Pod,
    _: Option<&EventObject>,
    _: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    Err("broken hint".into())
}

/// The standard probes:
/// - `NodeAdd`: Node/Add, no hint;
/// - `NodeAddHinted`: Node/Add, queues only for nodes labelled `ok=true`;
/// - `PodDelete`: AssignedPod/Delete, no hint;
/// - `NodeAddBroken`: Node/Add with a hint that errs (treated as Queue);
/// - `Silent`: no EnqueueExtensions (gets every event);
/// - `Labels`: UnscheduledPod/UpdatePodLabel (the pod's own label change may help).
fn probes() -> Vec<Probe> {
    vec![
        probe(
            "NodeAdd",
            vec![ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD,
            )],
        ),
        probe(
            "NodeAddHinted",
            vec![ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD,
                Arc::new(node_ok_hint),
            )],
        ),
        probe(
            "PodDelete",
            vec![ClusterEventWithHint::new(
                EventResource::AssignedPod,
                ActionType::DELETE,
            )],
        ),
        probe(
            "NodeAddBroken",
            vec![ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD,
                Arc::new(failing_hint),
            )],
        ),
        Probe {
            name: "Silent",
            events: vec![],
            no_extensions: true,
        },
        probe(
            "Labels",
            vec![ClusterEventWithHint::new(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_LABEL,
            )],
        ),
    ]
}

const INITIAL: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(10);

fn config() -> QueueConfig {
    QueueConfig {
        pod_initial_backoff: INITIAL,
        pod_max_backoff: MAX,
        pod_max_in_unschedulable_pods_duration: Duration::from_secs(300),
    }
}

fn queue() -> (PriorityQueue, FakeClock) {
    let clock = FakeClock::new();
    let q = PriorityQueue::new(
        vec![framework(DEFAULT_SCHEDULER_NAME, probes())],
        Arc::new(clock.clone()),
        config(),
    );
    (q, clock)
}

fn key(name: &str) -> String {
    format!("uid-{name}")
}

/// Pops the head, which must be `name`, and hands it back rejected by `plugins`.
fn reject(q: &mut PriorityQueue, name: &str, plugins: &[&'static str]) {
    let mut qpi = match q.pop() {
        Some(qpi) => qpi,
        None => panic!("activeQ is empty, wanted {name}"),
    };
    assert_eq!(qpi.pod_info.pod.metadata.name.as_deref(), Some(name));
    qpi.unschedulable_plugins = plugins.iter().copied().collect();
    assert_eq!(
        q.add_unschedulable_if_not_present(qpi, AttemptFailure::Rejected),
        Ok(())
    );
}

fn node_add(q: &mut PriorityQueue, node: k8s_openapi::api::core::v1::Node) {
    let new = EventObject::Node(Arc::new(node));
    q.move_all_to_active_or_backoff(
        ClusterEvent::new(EventResource::Node, ActionType::ADD),
        None,
        Some(&new),
    );
}

fn where_is(q: &PriorityQueue, name: &str) -> Option<QueueName> {
    q.queue_of(&key(name))
}

fn pop_names(q: &mut PriorityQueue) -> Vec<String> {
    std::iter::from_fn(|| q.pop())
        .map(|p| p.pod_info.pod.metadata.name.clone().unwrap_or_default())
        .collect()
}

// ---- backoff ---------------------------------------------------------------------------

#[rstest]
#[case::first_rejection_waits_initial(1, 1)]
#[case::second_doubles(2, 2)]
#[case::third_doubles_again(3, 4)]
#[case::fourth(4, 8)]
#[case::fifth_is_capped(5, 10)]
#[case::far_beyond_is_capped_without_overflow(200, 10)]
fn backoff_grows_and_is_capped(#[case] rejections: u32, #[case] want_secs: u64) {
    let d = backoff_duration(
        config(),
        Counts {
            unschedulable: rejections,
            consecutive_errors: 0,
        },
    );
    assert_eq!(d, Duration::from_secs(want_secs));
}

#[test]
fn backoff_counts_consecutive_errors_when_the_last_attempts_errored() {
    let c = Counts {
        unschedulable: 4,
        consecutive_errors: 1,
    };
    assert_eq!(backoff_duration(config(), c), INITIAL);
    assert_eq!(
        backoff_duration(config(), Counts::default()),
        Duration::ZERO
    );
}

/// Each rejection followed by an event doubles the wait; the pod leaves backoffQ only
/// once its expiry has passed.
/// Where `p` is before and after `activate`, and what `activate` said.
#[rstest]
#[case::from_backoff("backoff", (Some(QueueName::Backoff), true, Some(QueueName::Active)))]
#[case::from_unschedulable_pods(
    "unschedulable",
    (Some(QueueName::Unschedulable), true, Some(QueueName::Active))
)]
#[case::already_active("active", (Some(QueueName::Active), false, Some(QueueName::Active)))]
#[case::in_flight("in_flight", (Some(QueueName::InFlight), false, Some(QueueName::InFlight)))]
#[case::not_queued("none", (None, false, None))]
fn activate_moves_a_waiting_pod_to_active_now(
    #[case] start: &str,
    #[case] want: (Option<QueueName>, bool, Option<QueueName>),
) {
    let (mut q, _clock) = queue();
    if start != "none" {
        q.add(make_pod("p").info());
    }
    match start {
        "backoff" => {
            reject(&mut q, "p", &["NodeAdd"]);
            node_add(&mut q, make_node("n").obj());
        }
        "unschedulable" => reject(&mut q, "p", &["NodeAdd"]),
        "in_flight" => {
            q.pop();
        }
        _ => {}
    }
    let before = where_is(&q, "p");
    let moved = q.activate(&key("p"));
    assert_eq!((before, moved, where_is(&q, "p")), want);
}

#[test]
fn rejected_pod_backs_off_longer_each_time_and_leaves_backoff_after_expiry() {
    let (mut q, clock) = queue();
    q.add(make_pod("p").info());
    let mut waits = Vec::new();
    for _ in 0..5 {
        reject(&mut q, "p", &["NodeAdd"]);
        node_add(&mut q, make_node("n").obj());
        assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
        let expiry = q.backoff_expiry(&key("p")).unwrap_or_else(|| clock.now());
        let wait = expiry - clock.now();
        waits.push(wait.as_secs());
        clock.advance(wait - Duration::from_millis(1));
        q.flush_backoff_completed();
        assert_eq!(
            where_is(&q, "p"),
            Some(QueueName::Backoff),
            "left too early"
        );
        clock.advance(Duration::from_millis(1));
        q.flush_backoff_completed();
        assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
    }
    assert_eq!(waits, [1, 2, 4, 8, 10]);
}

#[test]
fn error_goes_to_backoff_and_counts_consecutive_errors() {
    let (mut q, clock) = queue();
    q.add(make_pod("p").info());
    for want in [1u64, 2] {
        let mut qpi = q.pop().expect("p is active");
        // Plugins named, but the attempt errored: the sets are ignored.
        qpi.unschedulable_plugins.insert("NodeAdd");
        assert_eq!(
            q.add_unschedulable_if_not_present(qpi, AttemptFailure::Error),
            Ok(())
        );
        assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
        clock.advance(Duration::from_secs(want));
        q.flush_backoff_completed();
        assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
    }
    // A rejection resets the error count: backoff follows the 3 rejections... here 1.
    reject(&mut q, "p", &["NodeAdd"]);
    assert_eq!(
        q.backoff_expiry(&key("p")).map(|e| e - clock.now()),
        Some(INITIAL)
    );
}

// ---- unschedulablePods flush -------------------------------------------------------------

#[test]
fn unschedulable_pods_are_flushed_after_five_minutes() {
    let (mut q, clock) = queue();
    q.add(make_pod("p").info());
    reject(&mut q, "p", &["NodeAdd"]);
    assert_eq!(where_is(&q, "p"), Some(QueueName::Unschedulable));
    clock.advance(Duration::from_secs(300));
    q.flush_unschedulable_pods_leftover();
    assert_eq!(
        where_is(&q, "p"),
        Some(QueueName::Unschedulable),
        "exactly 5 min"
    );
    clock.advance(Duration::from_millis(1));
    q.flush_unschedulable_pods_leftover();
    assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
}

// ---- order -------------------------------------------------------------------------------

#[test]
fn active_queue_pops_by_priority_then_arrival() {
    let (mut q, clock) = queue();
    for (name, prio) in [("low", 1), ("high-late", 10), ("mid", 5), ("zero", 0)] {
        if name == "high-late" {
            q.add(make_pod("high-early").priority(10).info());
            clock.advance(Duration::from_millis(1));
        }
        q.add(make_pod(name).priority(prio).info());
        clock.advance(Duration::from_millis(1));
    }
    assert_eq!(
        pop_names(&mut q),
        ["high-early", "high-late", "mid", "low", "zero"]
    );
    assert_eq!(q.pop().map(|p| p.attempts), None);
}

#[test]
fn pop_counts_attempts_and_sets_first_attempt_time_once() {
    let (mut q, clock) = queue();
    q.add(make_pod("p").info());
    clock.advance(Duration::from_secs(3));
    let first = q.pop().expect("p");
    let t1 = first.initial_attempt_timestamp;
    assert_eq!((first.attempts, t1), (1, Some(clock.now())));
    q.add_unschedulable_if_not_present(first, AttemptFailure::Error)
        .expect("requeued");
    clock.advance(Duration::from_secs(5));
    q.flush_backoff_completed();
    let second = q.pop().expect("p again");
    assert_eq!((second.attempts, second.initial_attempt_timestamp), (2, t1));
    assert_eq!(where_is(&q, "p"), Some(QueueName::InFlight));
    q.done(&key("p"));
    assert_eq!(where_is(&q, "p"), None);
}

// ---- gates -------------------------------------------------------------------------------

#[test]
fn gated_pod_is_held_until_its_last_gate_is_removed() {
    let (mut q, _clock) = queue();
    let two = make_pod("p")
        .scheduling_gate("a")
        .scheduling_gate("b")
        .info();
    q.add(two.clone());
    assert_eq!(where_is(&q, "p"), Some(QueueName::Gated));
    assert_eq!(
        q.pending_pods(),
        PendingCounts {
            gated: 1,
            ..Default::default()
        }
    );
    assert!(q.pop().is_none());
    // A node add is nothing to the gate.
    node_add(&mut q, make_node("n").label("ok", "true").obj());
    assert_eq!(where_is(&q, "p"), Some(QueueName::Gated));
    let one = make_pod("p").scheduling_gate("b").info();
    q.update(&two, one.clone());
    assert_eq!(where_is(&q, "p"), Some(QueueName::Gated));
    let none = make_pod("p").info();
    q.update(&one, none);
    assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
    let qpi = q.pop().expect("ungated pod pops");
    assert_eq!((qpi.attempts, qpi.gating_plugin), (1, None));
}

#[test]
fn gated_pod_lists_its_gating_plugin() {
    let (mut q, _clock) = queue();
    q.add(make_pod("p").scheduling_gate("a").info());
    let listed = q.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].gating_plugin, Some("SchedulingGates"));
    assert_eq!(listed[0].queue, QueueName::Gated);
}

// ---- events and hints ----------------------------------------------------------------------

/// Each pod is rejected by one plugin; a node add with the given labels is offered to all.
#[rstest]
#[case::plain_node_moves_only_no_hint_and_broken_and_silent(
    &[],
    &["NodeAdd", "NodeAddBroken", "Silent"]
)]
#[case::ok_node_also_satisfies_the_hint(
    &[("ok", "true")],
    &["NodeAdd", "NodeAddBroken", "NodeAddHinted", "Silent"]
)]
fn node_add_moves_only_pods_whose_rejector_may_be_helped(
    #[case] labels: &[(&str, &str)],
    #[case] moved: &[&str],
) {
    let (mut q, clock) = queue();
    let rejectors: [&'static str; 6] = [
        "NodeAdd",
        "NodeAddHinted",
        "PodDelete",
        "NodeAddBroken",
        "Silent",
        "Labels",
    ];
    for r in rejectors {
        q.add(make_pod(r).info());
        clock.advance(Duration::from_millis(1));
    }
    for r in rejectors {
        reject(&mut q, r, &[r]);
    }
    // Backoff is over: a helped pod goes straight to activeQ.
    clock.advance(Duration::from_secs(2));
    let mut node = make_node("n");
    for (k, v) in labels {
        node = node.label(k, v);
    }
    node_add(&mut q, node.obj());
    let got: BTreeSet<&str> = rejectors
        .iter()
        .copied()
        .filter(|r| where_is(&q, r) == Some(QueueName::Active))
        .collect();
    assert_eq!(got, moved.iter().copied().collect());
    for r in rejectors.iter().filter(|r| !moved.contains(r)) {
        assert_eq!(where_is(&q, r), Some(QueueName::Unschedulable), "{r}");
    }
}

#[test]
fn helped_pod_still_backing_off_goes_to_backoff_then_active() {
    let (mut q, clock) = queue();
    q.add(make_pod("p").info());
    reject(&mut q, "p", &["NodeAdd"]);
    node_add(&mut q, make_node("n").obj());
    assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
    assert!(q.pop().is_none());
    clock.advance(INITIAL);
    q.flush_backoff_completed();
    assert_eq!(pop_names(&mut q), ["p"]);
}

#[test]
fn pending_plugin_queues_immediately_despite_backoff() {
    let (mut q, _clock) = queue();
    q.add(make_pod("p").info());
    let mut qpi = q.pop().expect("p");
    qpi.pending_plugins.insert("NodeAdd");
    q.add_unschedulable_if_not_present(qpi, AttemptFailure::Rejected)
        .expect("requeued");
    assert_eq!(where_is(&q, "p"), Some(QueueName::Unschedulable));
    node_add(&mut q, make_node("n").obj());
    assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
}

/// A preemptor's victims can be gone before its failed attempt is handed back: the
/// activation must not be lost, or the pod waits out a backoff (forever under a clock that
/// stands still, as in `simulate`).
#[rstest]
#[case::rejected(AttemptFailure::Rejected)]
#[case::errored(AttemptFailure::Error)]
fn activation_while_in_flight_sends_the_failed_pod_to_active(#[case] failure: AttemptFailure) {
    let (mut q, _clock) = queue();
    q.add(make_pod("p").info());
    let mut p = q.pop().expect("p");
    let moved = q.activate(&key("p"));
    p.unschedulable_plugins.insert("NodeAdd");
    let requeued = q.add_unschedulable_if_not_present(p, failure);
    assert_eq!(
        (moved, requeued, where_is(&q, "p")),
        (false, Ok(()), Some(QueueName::Active))
    );
}

#[test]
fn activation_of_an_in_flight_pod_that_binds_is_forgotten() {
    let (mut q, _clock) = queue();
    q.add(make_pod("p").info());
    let p = q.pop().expect("p");
    q.activate(&key("p"));
    q.done(&key("p"));
    // The same pod popped again (say, re-added) carries no activation from before.
    q.add(p.pod_info.clone());
    let mut again = q.pop().expect("p again");
    again.unschedulable_plugins.insert("NodeAdd");
    assert_eq!(
        q.add_unschedulable_if_not_present(again, AttemptFailure::Rejected),
        Ok(())
    );
    assert_eq!(where_is(&q, "p"), Some(QueueName::Unschedulable));
}

#[test]
fn event_while_in_flight_is_replayed_when_the_attempt_fails() {
    let (mut q, clock) = queue();
    q.add(make_pod("a").info());
    clock.advance(Duration::from_millis(1));
    q.add(make_pod("b").info());
    let a = q.pop().expect("a");
    // Nothing is unschedulable yet, but the event is logged for `a`.
    node_add(&mut q, make_node("n").obj());
    assert_eq!(q.logged_events(), 1);
    let b = q.pop().expect("b");
    let mut a = a;
    a.unschedulable_plugins.insert("NodeAdd");
    q.add_unschedulable_if_not_present(a, AttemptFailure::Rejected)
        .expect("a");
    // `a` saw the node add (its rejector's event) → backoff, not unschedulable.
    assert_eq!(where_is(&q, "a"), Some(QueueName::Backoff));
    // `b` was popped after the event: it must not see it.
    let mut b = b;
    b.unschedulable_plugins.insert("NodeAdd");
    q.add_unschedulable_if_not_present(b, AttemptFailure::Rejected)
        .expect("b");
    assert_eq!(where_is(&q, "b"), Some(QueueName::Unschedulable));
    assert_eq!(q.logged_events(), 0, "log trimmed once nobody is in flight");
}

#[test]
fn in_flight_event_the_rejector_does_not_care_about_is_not_a_wake_up() {
    let (mut q, _clock) = queue();
    q.add(make_pod("a").info());
    let mut a = q.pop().expect("a");
    node_add(&mut q, make_node("n").obj());
    a.unschedulable_plugins.insert("PodDelete");
    q.add_unschedulable_if_not_present(a, AttemptFailure::Rejected)
        .expect("a");
    assert_eq!(where_is(&q, "a"), Some(QueueName::Unschedulable));
}

#[test]
fn events_are_not_logged_without_pods_in_flight_and_trimmed_on_done() {
    let (mut q, _clock) = queue();
    node_add(&mut q, make_node("n").obj());
    assert_eq!(q.logged_events(), 0);
    q.add(make_pod("a").info());
    q.pop().expect("a");
    node_add(&mut q, make_node("n").obj());
    assert_eq!(q.logged_events(), 1);
    q.done(&key("a"));
    assert_eq!(q.logged_events(), 0);
}

#[test]
fn update_of_in_flight_pod_is_replayed_and_requeues_the_newest_version() {
    let (mut q, _clock) = queue();
    let v1 = make_pod("p").info();
    q.add(v1.clone());
    let mut qpi = q.pop().expect("p");
    let v2 = make_pod("p").label("team", "x").info();
    q.update(&v1, v2);
    qpi.unschedulable_plugins.insert("Labels");
    q.add_unschedulable_if_not_present(qpi, AttemptFailure::Rejected)
        .expect("p");
    assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
    let listed = q.list();
    assert_eq!(listed.len(), 1);
    let got = q.backoff.get(&key("p")).map(|e| {
        e.qpi
            .pod_info
            .pod
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
    });
    assert_eq!(got.and_then(|l| l.get("team").cloned()), Some("x".into()));
}

// ---- updates ---------------------------------------------------------------------------

#[test]
fn irrelevant_update_keeps_backoff_and_place() {
    let (mut q, clock) = queue();
    let v1 = make_pod("p").info();
    q.add(v1.clone());
    // `Silent` registers nothing, so it hears every event: only the relevance check keeps
    // this update from retrying the pod.
    reject(&mut q, "p", &["Silent"]);
    let expiry = q.backoff_expiry(&key("p"));
    clock.advance(Duration::from_millis(500));
    let v2 = make_pod("p")
        .with(|p| {
            p.metadata.resource_version = Some("42".into());
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            });
        })
        .info();
    q.update(&v1, v2);
    assert_eq!(where_is(&q, "p"), Some(QueueName::Unschedulable));
    assert_eq!(q.backoff_expiry(&key("p")), expiry);
}

#[test]
fn relevant_update_is_offered_to_the_rejecting_plugin() {
    let (mut q, clock) = queue();
    let v1 = make_pod("p").info();
    q.add(v1.clone());
    reject(&mut q, "p", &["Labels"]);
    let expiry = q.backoff_expiry(&key("p"));
    let v2 = make_pod("p").label("team", "x").info();
    q.update(&v1, v2.clone());
    // Still backing off: the update does not reset the backoff, it waits it out.
    assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
    assert_eq!(q.backoff_expiry(&key("p")), expiry);
    clock.advance(INITIAL);
    q.flush_backoff_completed();
    assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
}

#[test]
fn relevant_update_ignored_by_the_rejecting_plugin_leaves_the_pod() {
    let (mut q, _clock) = queue();
    let v1 = make_pod("p").info();
    q.add(v1.clone());
    reject(&mut q, "p", &["NodeAdd"]);
    q.update(&v1, make_pod("p").label("team", "x").info());
    assert_eq!(where_is(&q, "p"), Some(QueueName::Unschedulable));
}

#[test]
fn update_in_active_queue_keeps_its_place_and_unknown_update_adds() {
    let (mut q, clock) = queue();
    let a1 = make_pod("a").info();
    q.add(a1.clone());
    clock.advance(Duration::from_secs(1));
    q.add(make_pod("b").info());
    q.update(&a1, make_pod("a").label("x", "y").info());
    clock.advance(Duration::from_secs(1));
    q.update(&make_pod("c").info(), make_pod("c").info());
    assert_eq!(pop_names(&mut q), ["a", "b", "c"]);
}

#[rstest]
#[case::labels(make_pod("p").req(&[("cpu", "2")]).scheduling_gate("g").label("a", "b").info(), ActionType::UPDATE_POD_LABEL)]
#[case::scale_down(make_pod("p").req(&[("cpu", "1")]).scheduling_gate("g").info(), ActionType::UPDATE_POD_SCALE_DOWN)]
#[case::gates_gone(make_pod("p").req(&[("cpu", "2")]).info(), ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]
#[case::tolerations(make_pod("p").req(&[("cpu", "2")]).scheduling_gate("g").toleration("k", "Exists", "", "NoSchedule").info(), ActionType::UPDATE_POD_TOLERATIONS)]
#[case::other(make_pod("p").req(&[("cpu", "2")]).scheduling_gate("g").image("nginx").info(), ActionType::UPDATE_OTHER)]
#[case::generated_resource_claim(make_pod("p").req(&[("cpu", "2")]).scheduling_gate("g").with(|p| {
    p.status.get_or_insert_with(Default::default).resource_claim_statuses = Some(vec![
        k8s_openapi::api::core::v1::PodResourceClaimStatus {
            name: "gpu".into(),
            resource_claim_name: Some("p-gpu-x7k2q".into()),
        },
    ]);
}).info(), ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM)]
fn pod_update_events(#[case] new: Arc<PodInfo>, #[case] want: ActionType) {
    let old = make_pod("p")
        .req(&[("cpu", "2")])
        .scheduling_gate("g")
        .info();
    assert_eq!(
        pod_scheduling_properties_change(&old, &new),
        vec![ClusterEvent::new(EventResource::UnscheduledPod, want)]
    );
}

// ---- delete ------------------------------------------------------------------------------

#[test]
fn delete_removes_from_every_queue_and_ignores_unknown_pods() {
    let (mut q, _clock) = queue();
    q.add(make_pod("active").info());
    q.add(make_pod("gated").scheduling_gate("g").info());
    q.add(make_pod("unsched").priority(100).info());
    reject(&mut q, "unsched", &["NodeAdd"]);
    for name in ["active", "gated", "unsched", "unknown"] {
        q.delete(&make_pod(name).obj());
    }
    assert_eq!(q.pending_pods(), PendingCounts::default());
    assert!(q.list().is_empty());
}

#[test]
fn pod_deleted_while_in_flight_is_not_requeued() {
    let (mut q, _clock) = queue();
    q.add(make_pod("p").info());
    let mut qpi = q.pop().expect("p");
    q.delete(&make_pod("p").obj());
    qpi.unschedulable_plugins.insert("NodeAdd");
    q.add_unschedulable_if_not_present(qpi, AttemptFailure::Rejected)
        .expect("ignored");
    assert_eq!(where_is(&q, "p"), None);
}

#[test]
fn add_unschedulable_refuses_a_pod_already_queued() {
    let (mut q, _clock) = queue();
    q.add(make_pod("p").info());
    let qpi = q.pop().expect("p");
    q.add(make_pod("p").info());
    assert_eq!(
        q.add_unschedulable_if_not_present(qpi, AttemptFailure::Rejected),
        Err(QueueError::AlreadyQueued("default/p".into()))
    );
    assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
}

// ---- nominator -----------------------------------------------------------------------------

fn nominated(q: &PriorityQueue, node: &str) -> Vec<String> {
    q.nominated_pods_for_node(node)
        .iter()
        .map(|p| p.key.clone())
        .collect()
}

fn with_status_nomination(name: &str, node: &str) -> Arc<PodInfo> {
    make_pod(name)
        .with(|p| {
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                nominated_node_name: Some(node.into()),
                ..Default::default()
            })
        })
        .info()
}

#[test]
fn nominator_tracks_pods_per_node() {
    let (mut q, _clock) = queue();
    q.add_nominated_pod(make_pod("a").info(), Some("n1"));
    q.add_nominated_pod(make_pod("b").info(), Some("n1"));
    q.add_nominated_pod(make_pod("c").info(), None); // no status nomination: ignored
    q.add(with_status_nomination("d", "n2")); // queue add reads the status
    q.add_nominated_pod(make_pod("bound").node("n1").info(), Some("n1"));
    assert_eq!(nominated(&q, "n1"), ["default/a", "default/b"]);
    assert_eq!(nominated(&q, "n2"), ["default/d"]);
    // Renominating moves the pod.
    q.add_nominated_pod(make_pod("a").info(), Some("n2"));
    assert_eq!(nominated(&q, "n1"), ["default/b"]);
    assert_eq!(nominated(&q, "n2"), ["default/d", "default/a"]);
    q.delete_nominated_pod_if_exists(&make_pod("d").obj());
    q.delete(&make_pod("b").obj());
    assert_eq!(nominated(&q, "n1"), Vec::<String>::new());
    assert_eq!(nominated(&q, "n2"), ["default/a"]);
    assert_eq!(q.nominated_node(&make_pod("a").obj()), Some("n2"));
}

#[test]
fn update_keeps_a_nomination_not_yet_in_the_status() {
    let (mut q, _clock) = queue();
    let v1 = make_pod("a").info();
    q.add_nominated_pod(v1.clone(), Some("n1"));
    let v2 = make_pod("a").label("x", "y").info();
    q.update_nominated_pod(&v1, v2.clone());
    assert_eq!(nominated(&q, "n1"), ["default/a"]);
    // Once the status names another node, that wins.
    q.update_nominated_pod(&v2, with_status_nomination("a", "n3"));
    assert_eq!(nominated(&q, "n1"), Vec::<String>::new());
    assert_eq!(nominated(&q, "n3"), ["default/a"]);
}

// ---- profiles and keys ---------------------------------------------------------------------

#[test]
fn pod_of_unknown_profile_is_queued_and_any_event_retries_it() {
    let (mut q, clock) = queue();
    q.add(make_pod("p").scheduler_name("other").info());
    reject(&mut q, "p", &["NodeAdd"]);
    clock.advance(Duration::from_secs(2));
    q.move_all_to_active_or_backoff(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        None,
        None,
    );
    assert_eq!(where_is(&q, "p"), Some(QueueName::Active));
}

#[test]
fn pod_handed_back_without_being_popped_is_retried_after_backoff() {
    let (mut q, clock) = queue();
    let mut qpi = QueuedPodInfo::new(make_pod("p").info(), clock.now());
    qpi.unschedulable_plugins.insert("PodDelete");
    q.add_unschedulable_if_not_present(qpi, AttemptFailure::Rejected)
        .expect("p");
    assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
}

#[test]
fn each_pod_is_asked_about_through_its_own_profile() {
    let clock = FakeClock::new();
    let default = framework(DEFAULT_SCHEDULER_NAME, probes());
    let other = framework(
        "other",
        vec![probe(
            "OtherNodeAdd",
            vec![ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD,
            )],
        )],
    );
    let mut q = PriorityQueue::new(vec![default, other], Arc::new(clock.clone()), config());
    q.add(make_pod("mine").info());
    clock.advance(Duration::from_millis(1));
    q.add(make_pod("theirs").scheduler_name("other").info());
    // Both rejected by a plugin only the "other" profile runs.
    reject(&mut q, "mine", &["OtherNodeAdd"]);
    reject(&mut q, "theirs", &["OtherNodeAdd"]);
    clock.advance(Duration::from_secs(2));
    node_add(&mut q, make_node("n").obj());
    assert_eq!(where_is(&q, "mine"), Some(QueueName::Unschedulable));
    assert_eq!(where_is(&q, "theirs"), Some(QueueName::Active));
}

#[test]
fn absurd_max_backoff_does_not_overflow() {
    let clock = FakeClock::new();
    let huge = QueueConfig {
        pod_initial_backoff: Duration::MAX,
        pod_max_backoff: Duration::MAX,
        ..config()
    };
    let mut q = PriorityQueue::new(
        vec![framework(DEFAULT_SCHEDULER_NAME, probes())],
        Arc::new(clock.clone()),
        huge,
    );
    q.add(make_pod("p").info());
    reject(&mut q, "p", &["NodeAdd"]);
    node_add(&mut q, make_node("n").obj());
    q.flush_backoff_completed();
    assert_eq!(where_is(&q, "p"), Some(QueueName::Backoff));
}

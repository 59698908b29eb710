//! Loop-level tests: the real in-tree plugins plus a test plugin (`TestGate`) that logs its
//! Reserve/Unreserve calls and answers Permit as its args say, an in-memory cluster as both
//! event source and sink, a fake clock for the queue, and tokio's paused clock for Permit
//! timeouts. No test sleeps.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use framework::testing::{make_node, make_pod};
use framework::{
    ArgsError, ClientError, Code, CycleState, EventType, FilterPlugin, Handle, NodeInfo,
    Nomination, PermitPlugin, Plugin, PodCondition, PodEvent, PodInfo, PodRef, PodStatusUpdate,
    ReservePlugin, Status,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use rstest::rstest;

use super::*;
use crate::backend::queue::QueueName;
use crate::builder::SchedulerBuilder;
use crate::clock::FakeClock;
use crate::memory::MemoryCluster;

// ---- the test plugin --------------------------------------------------------------------

const GATE: &str = "TestGate";

type CallLog = Arc<Mutex<Vec<String>>>;

/// Call logs of TestGate instances, by the `log` id in their args (tests run in parallel).
fn logs() -> &'static Mutex<HashMap<String, CallLog>> {
    static LOGS: OnceLock<Mutex<HashMap<String, CallLog>>> = OnceLock::new();
    LOGS.get_or_init(Default::default)
}

fn log_for(id: &str) -> Arc<Mutex<Vec<String>>> {
    logs()
        .lock()
        .unwrap()
        .entry(id.to_string())
        .or_default()
        .clone()
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GateArgs {
    log: String,
    /// `allow`, `wait` or `reject`.
    permit: String,
    #[serde(default)]
    timeout_seconds: u64,
    /// Filter returns Error for this pod name.
    #[serde(default)]
    error_pod: String,
}

struct TestGate {
    args: GateArgs,
    log: Arc<Mutex<Vec<String>>>,
}

fn new_gate(
    args: Option<&serde_json::Value>,
    _h: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args: GateArgs = args
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| vec![ArgsError::new("", e.to_string())])?
        .unwrap_or_default();
    let log = log_for(&args.log);
    Ok(Arc::new(TestGate { args, log }))
}

impl Plugin for TestGate {
    fn name(&self) -> &'static str {
        GATE
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        Some(self)
    }
}

impl FilterPlugin for TestGate {
    fn filter(&self, _: &CycleState, pod: &PodInfo, _: &NodeInfo) -> Status {
        if pod.name() == self.args.error_pod {
            return Status::error("broken pod");
        }
        Status::success()
    }
}

impl ReservePlugin for TestGate {
    fn reserve(&self, _: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.log
            .lock()
            .unwrap()
            .push(format!("reserve {} {node}", pod.name()));
        Status::success()
    }
    fn unreserve(&self, _: &mut CycleState, pod: &PodInfo, node: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("unreserve {} {node}", pod.name()));
    }
}

impl PermitPlugin for TestGate {
    fn permit(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> (Status, Duration) {
        let t = Duration::from_secs(self.args.timeout_seconds);
        match self.args.permit.as_str() {
            "wait" => (Status::new(Code::Wait, ""), t),
            "reject" => (Status::unschedulable("not admitted by TestGate"), t),
            _ => (Status::success(), t),
        }
    }
}

// ---- metrics ----------------------------------------------------------------------------

/// Keeps the attempts, incoming-pods counts, extension point and plugin observations it is
/// told about, as text lines.
#[derive(Debug, Default)]
struct RecordingMetrics {
    attempts: Mutex<Vec<String>>,
    incoming: Mutex<Vec<String>>,
    scheduled: Mutex<Vec<u32>>,
    points: Mutex<Vec<String>>,
    plugins: Mutex<Vec<String>>,
}

impl crate::metrics::MetricsRecorder for RecordingMetrics {
    fn observe_attempt(&self, profile: &str, result: crate::metrics::AttemptResult, _: Duration) {
        self.attempts
            .lock()
            .unwrap()
            .push(format!("{profile} {}", result.as_str()));
    }
    fn observe_pod_scheduled(&self, attempts: u32, _: Duration) {
        self.scheduled.lock().unwrap().push(attempts);
    }
    fn observe_extension_point(
        &self,
        _: &str,
        point: crate::metrics::ExtensionPointLabel,
        status: Code,
        _: Duration,
    ) {
        self.points
            .lock()
            .unwrap()
            .push(format!("{} {}", point.as_str(), status.as_str()));
    }
    fn observe_plugin_execution(
        &self,
        plugin: &'static str,
        point: crate::metrics::ExtensionPointLabel,
        status: Code,
        _: Duration,
    ) {
        self.plugins.lock().unwrap().push(format!(
            "{} {plugin} {}",
            point.as_str(),
            status.as_str()
        ));
    }
    fn set_pending_pods(&self, _: crate::metrics::PendingPods) {}
    fn inc_queue_incoming_pods(&self, queue: &'static str, event: &str) {
        self.incoming
            .lock()
            .unwrap()
            .push(format!("{queue} {event}"));
    }
    fn observe_preemption(&self, _: usize) {}
    fn set_cache_size(&self, _: usize, _: usize, _: usize) {}
}

// ---- harness ----------------------------------------------------------------------------

struct Harness {
    sched: Scheduler,
    lp: SchedulingLoop,
    cluster: Arc<MemoryCluster>,
    clock: FakeClock,
    log: Arc<Mutex<Vec<String>>>,
    metrics: Arc<RecordingMetrics>,
}

/// A scheduler whose profiles are `profiles` (YAML list items), each with TestGate enabled
/// at multiPoint with `gate` args. Must run inside a tokio runtime.
fn harness(log_id: &str, gate: &str, profiles: &[&str]) -> Harness {
    let mut yaml = String::from(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n",
    );
    for p in profiles {
        yaml.push_str(&format!(
            "- schedulerName: {p}\n  plugins:\n    multiPoint:\n      enabled: [{{name: {GATE}}}]\n  pluginConfig:\n  - name: {GATE}\n    args: {{log: {log_id}, {gate}}}\n"
        ));
    }
    harness_from(log_id, &yaml, PLUGIN_METRICS_SAMPLE_PERCENT)
}

/// A scheduler configured by `yaml` (a whole KubeSchedulerConfiguration whose TestGate
/// args name `log_id`), timing the plugin calls of `sample_percent` percent of its cycles.
/// Must run inside a tokio runtime.
fn harness_from(log_id: &str, yaml: &str, sample_percent: u8) -> Harness {
    // Decoded and defaulted but not validated: validation knows only in-tree plugin names.
    let mut cfg = crate::config::decode(yaml).unwrap();
    crate::config::set_defaults(&mut cfg);
    let mut registry = plugins::in_tree_registry();
    registry.insert(GATE, std::sync::Arc::new(new_gate));
    let cluster = MemoryCluster::new();
    let clock = FakeClock::new();
    let metrics = Arc::new(RecordingMetrics::default());
    let sched = SchedulerBuilder::new(cfg, "test")
        .registry(registry)
        .client(cluster.clone())
        .metrics(metrics.clone())
        .clock(Arc::new(clock.clone()))
        .parallelism(1)
        .plugin_metrics_sample_percent(sample_percent)
        .build(tokio::runtime::Handle::current())
        .unwrap()
        .scheduler;
    cluster.connect(sched.weak_event_handler());
    let lp = sched.scheduling_loop();
    Harness {
        sched,
        lp,
        cluster,
        clock,
        log: log_for(log_id),
        metrics,
    }
}

fn node(name: &str, cpu: &str) -> Node {
    make_node(name)
        .capacity(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])
        .obj()
}

fn pod(name: &str, cpu: &str) -> Pod {
    make_pod(name).req(&[("cpu", cpu)]).obj()
}

impl Harness {
    /// Runs cycles until activeQ is empty, waiting for each binding task; returns the
    /// outcomes as `(pod, outcome summary)`.
    async fn drain(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Some(a) = self.lp.schedule_one(None) {
            self.sched.wait_for_bindings().await;
            out.push((a.pod.name().to_string(), summary(&a.outcome)));
        }
        out
    }

    fn node_of(&self, pod: &str) -> Option<String> {
        self.cluster
            .pod("default", pod)
            .and_then(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
    }

    fn queue_of(&self, pod: &str) -> Option<QueueName> {
        let uid = format!("uid-{pod}");
        self.sched.with_state(|_, q| q.queue_of(&uid))
    }

    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

fn summary(o: &AttemptOutcome) -> String {
    match o {
        AttemptOutcome::Assumed { node } => format!("assumed {node}"),
        AttemptOutcome::Unschedulable { message, .. } => format!("unschedulable: {message}"),
        AttemptOutcome::Error { message } => format!("error: {message}"),
        AttemptOutcome::Skipped { reason } => format!("skipped: {reason}"),
    }
}

fn pod_ref(name: &str) -> PodRef {
    PodRef {
        namespace: "default".into(),
        name: name.into(),
        uid: Some(format!("uid-{name}")),
    }
}

fn failed(name: &str, reason: &str, message: &str) -> PodStatusUpdate {
    PodStatusUpdate {
        pod: pod_ref(name),
        condition: Some(PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: reason.into(),
            message: message.into(),
        }),
        nomination: Nomination::Keep,
    }
}

fn event(name: &str, kind: EventType, reason: &str, message: &str, profile: &str) -> PodEvent {
    PodEvent {
        regarding: pod_ref(name),
        resource_version: None,
        event_type: kind,
        reason: reason.into(),
        action: if reason == "Scheduled" {
            "Binding"
        } else {
            "Scheduling"
        }
        .into(),
        message: message.into(),
        reporting_controller: profile.into(),
    }
}

/// Lets spawned write tasks (status, events) run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

// ---- tests ------------------------------------------------------------------------------

#[tokio::test]
async fn pods_are_bound_confirmed_and_reported() {
    let mut h = harness("bound", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "2"));
    h.cluster.apply_pod(pod("a", "1500m"));
    h.cluster.apply_pod(pod("b", "1"));
    let outcomes = h.drain().await;
    settle().await;
    assert_eq!(
        outcomes,
        vec![
            ("a".to_string(), "assumed n1".to_string()),
            (
                "b".to_string(),
                "unschedulable: 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.".to_string()
            ),
        ]
    );
    assert_eq!(h.node_of("a").as_deref(), Some("n1"));
    assert_eq!(
        h.sched.cache_counts(),
        (1, 1, 0),
        "a confirmed by its update, not assumed"
    );
    assert_eq!(h.take_log(), vec!["reserve a n1"]);
    let w = h.cluster.writes();
    assert_eq!(
        w.status_updates,
        vec![failed(
            "b",
            "Unschedulable",
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )]
    );
    assert_eq!(
        w.events,
        vec![
            event(
                "a",
                EventType::Normal,
                "Scheduled",
                "Successfully assigned default/a to n1",
                "default-scheduler"
            ),
            event(
                "b",
                EventType::Warning,
                "FailedScheduling",
                "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
                "default-scheduler"
            ),
        ]
    );
    assert_eq!(h.queue_of("b"), Some(QueueName::Unschedulable));
}

#[tokio::test]
async fn node_add_retries_the_pod_it_can_help_and_not_the_others() {
    let mut h = harness("nodeadd", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "1"));
    h.cluster.apply_pod(pod("big", "2"));
    h.cluster.apply_pod(
        make_pod("picky")
            .req(&[("cpu", "100m")])
            .node_selector("disk", "ssd")
            .obj(),
    );
    h.drain().await;
    assert_eq!(h.queue_of("big"), Some(QueueName::Unschedulable));
    assert_eq!(h.queue_of("picky"), Some(QueueName::Unschedulable));
    // A node with room but without the label: only the pod short of CPU may fit there.
    h.cluster.apply_node(node("n2", "4"));
    assert_eq!(h.queue_of("big"), Some(QueueName::Backoff));
    assert_eq!(h.queue_of("picky"), Some(QueueName::Unschedulable));
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    assert_eq!(
        h.drain().await,
        vec![("big".to_string(), "assumed n2".to_string())]
    );
}

#[tokio::test]
async fn backoff_then_five_minute_flush_retry_an_unschedulable_pod() {
    let mut h = harness("flush", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "1"));
    h.cluster.apply_pod(pod("big", "2"));
    h.drain().await;
    h.clock.advance(Duration::from_secs(299));
    h.sched.flush();
    assert_eq!(
        h.queue_of("big"),
        Some(QueueName::Unschedulable),
        "not yet 5 min"
    );
    // The leftover check runs every 30 s, as upstream's ticker.
    h.clock.advance(Duration::from_secs(2));
    h.sched.flush();
    assert_eq!(
        h.queue_of("big"),
        Some(QueueName::Unschedulable),
        "next check not due"
    );
    h.clock.advance(Duration::from_secs(28));
    h.sched.flush();
    assert_eq!(h.queue_of("big"), Some(QueueName::Active));
}

#[tokio::test]
async fn a_plugin_error_fails_only_that_pod() {
    let mut h = harness(
        "error",
        "permit: allow, errorPod: bad",
        &["default-scheduler"],
    );
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(pod("bad", "1"));
    h.cluster.apply_pod(pod("good", "1"));
    let outcomes = h.drain().await;
    settle().await;
    assert_eq!(
        outcomes,
        vec![
            (
                "bad".to_string(),
                "error: running \"TestGate\" filter plugin: broken pod".to_string()
            ),
            ("good".to_string(), "assumed n1".to_string()),
        ]
    );
    assert_eq!(h.queue_of("bad"), Some(QueueName::Backoff));
    assert_eq!(
        h.cluster.writes().status_updates,
        vec![failed(
            "bad",
            "SchedulerError",
            "running \"TestGate\" filter plugin: broken pod"
        )]
    );
}

#[tokio::test]
async fn bind_failure_unreserves_forgets_and_requeues() {
    let mut h = harness("bindfail", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(pod("a", "1"));
    h.cluster
        .fail_next_binds([ClientError::Transport("connection reset".into())]);
    assert_eq!(
        h.drain().await,
        vec![("a".to_string(), "assumed n1".to_string())]
    );
    settle().await;
    assert_eq!(h.take_log(), vec!["reserve a n1", "unreserve a n1"]);
    assert_eq!(h.sched.cache_counts(), (1, 0, 0), "assumed pod forgotten");
    assert_eq!(h.queue_of("a"), Some(QueueName::Backoff));
    assert_eq!(h.node_of("a"), None);
    let message = "running Bind plugin \"DefaultBinder\": transport error: connection reset";
    assert_eq!(
        h.cluster.writes().status_updates,
        vec![failed("a", "SchedulerError", message)]
    );
    // After its backoff the pod is retried and bound.
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    assert_eq!(
        h.drain().await,
        vec![("a".to_string(), "assumed n1".to_string())]
    );
    assert_eq!(h.node_of("a").as_deref(), Some("n1"));
}

#[tokio::test]
async fn permit_reject_unreserves_and_reports_unschedulable() {
    let mut h = harness("reject", "permit: reject", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(pod("a", "1"));
    assert_eq!(
        h.drain().await,
        vec![(
            "a".to_string(),
            "unschedulable: not admitted by TestGate".to_string()
        )]
    );
    settle().await;
    assert_eq!(h.take_log(), vec!["reserve a n1", "unreserve a n1"]);
    assert_eq!(h.sched.cache_counts(), (1, 0, 0));
    assert_eq!(h.queue_of("a"), Some(QueueName::Unschedulable));
    assert_eq!(h.cluster.writes().bindings, vec![]);
}

/// How a waiting pod's wait ends.
#[derive(Debug, Clone, Copy)]
enum WaitEnd {
    Allow,
    Reject,
    Timeout,
    PodDeleted,
}

#[rstest]
#[case::allowed_pod_is_bound(WaitEnd::Allow, Some("n1"), None, vec!["reserve a n1"])]
#[case::rejected_pod_is_requeued(
    WaitEnd::Reject, None, Some("quota used up"), vec!["reserve a n1", "unreserve a n1"]
)]
#[case::timeout_rejects_in_the_plugins_name(
    WaitEnd::Timeout,
    None,
    Some("rejected due to timeout after waiting 10s at plugin TestGate"),
    vec!["reserve a n1", "unreserve a n1"]
)]
#[case::deleted_pod_is_unreserved_and_not_bound(
    WaitEnd::PodDeleted, None, None, vec!["reserve a n1", "unreserve a n1"]
)]
#[tokio::test(start_paused = true)]
async fn permit_wait(
    #[case] end: WaitEnd,
    #[case] want_node: Option<&str>,
    #[case] want_failure: Option<&str>,
    #[case] want_log: Vec<&str>,
) {
    let id = format!("wait-{end:?}");
    let mut h = harness(
        &id,
        "permit: wait, timeoutSeconds: 10",
        &["default-scheduler"],
    );
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(pod("a", "1"));
    let a = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
    assert_eq!(a.as_deref(), Some("assumed n1"));
    settle().await;
    assert_eq!(h.sched.tasks_in_flight(), 1, "waiting at permit");
    assert_eq!(h.sched.cache_counts(), (1, 1, 1), "assumed while waiting");
    let wp = h.sched.waiting_pods().get("uid-a").expect("pod waits");
    assert_eq!(wp.pending_plugins(), vec![GATE]);
    match end {
        WaitEnd::Allow => wp.allow(GATE),
        WaitEnd::Reject => wp.reject(GATE, "quota used up"),
        WaitEnd::Timeout => tokio::time::advance(Duration::from_secs(10)).await,
        WaitEnd::PodDeleted => {
            h.cluster.remove_pod("default", "a");
        }
    }
    h.sched.wait_for_bindings().await;
    settle().await;
    assert!(h.sched.waiting_pods().is_empty());
    assert_eq!(h.node_of("a").as_deref(), want_node);
    assert_eq!(h.take_log(), want_log);
    let w = h.cluster.writes();
    // A deleted pod gets no status write: there is nothing left to write to.
    let want_updates: Vec<PodStatusUpdate> = want_failure
        .map(|m| failed("a", "Unschedulable", m))
        .into_iter()
        .collect();
    assert_eq!(w.status_updates, want_updates);
    if want_failure.is_some() {
        assert_eq!(h.queue_of("a"), Some(QueueName::Unschedulable));
        assert_eq!(h.sched.cache_counts(), (1, 0, 0));
    }
    if matches!(end, WaitEnd::PodDeleted) {
        assert_eq!(h.queue_of("a"), None, "a deleted pod is not requeued");
        assert_eq!(h.sched.cache_counts(), (1, 0, 0));
    }
}

#[tokio::test]
async fn each_profile_schedules_its_own_pods() {
    let mut h = harness(
        "profiles",
        "permit: allow",
        &["default-scheduler", "binpack"],
    );
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(pod("a", "1"));
    h.cluster.apply_pod(
        make_pod("b")
            .req(&[("cpu", "1")])
            .scheduler_name("binpack")
            .obj(),
    );
    h.cluster.apply_pod(
        make_pod("c")
            .req(&[("cpu", "1")])
            .scheduler_name("other")
            .obj(),
    );
    let outcomes = h.drain().await;
    settle().await;
    assert_eq!(
        outcomes,
        vec![
            ("a".to_string(), "assumed n1".to_string()),
            ("b".to_string(), "assumed n1".to_string()),
        ]
    );
    let reporters: Vec<(String, String)> = h
        .cluster
        .writes()
        .events
        .into_iter()
        .map(|e| (e.regarding.name, e.reporting_controller))
        .collect();
    assert_eq!(
        reporters,
        vec![
            ("a".to_string(), "default-scheduler".to_string()),
            ("b".to_string(), "binpack".to_string()),
        ]
    );
    assert_eq!(h.queue_of("c"), None, "not ours: never queued");
}

#[tokio::test]
async fn pod_deleted_before_its_turn_is_not_scheduled_and_unknown_deletes_are_ignored() {
    let mut h = harness("deleted", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(pod("a", "1"));
    h.cluster.remove_pod("default", "a");
    h.sched
        .event_handler()
        .handle(crate::source::ObjectEvent::Pod(
            crate::source::Change::Deleted(Arc::new(pod("ghost", "1"))),
        ));
    assert_eq!(h.drain().await, vec![]);
    assert_eq!(h.sched.pending_pods(), PendingCounts::default());
}

#[tokio::test]
async fn update_of_an_unknown_pod_is_an_add() {
    let h = harness("update-add", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    let p = Arc::new(pod("a", "1"));
    h.sched
        .event_handler()
        .handle(crate::source::ObjectEvent::Pod(
            crate::source::Change::Updated {
                old: p.clone(),
                new: p,
            },
        ));
    assert_eq!(h.queue_of("a"), Some(QueueName::Active));
}

#[tokio::test]
async fn loop_thread_schedules_until_stopped() {
    let h = harness("thread", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "8"));
    let thread = h.sched.start().unwrap();
    for i in 0..20 {
        h.cluster.apply_pod(pod(&format!("p{i}"), "100m"));
    }
    // Bounded wait: the loop binds all 20 (each bind is in memory).
    let mut bound = 0;
    for _ in 0..2000 {
        bound = h
            .cluster
            .pods()
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count();
        if bound == 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(bound, 20);
    h.sched.stop();
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .unwrap();
}

/// The loop's thread hands binding cycles over in groups: a failing bind in a group still
/// un-reserves, forgets and requeues its pod, the others of the group bind, and a group
/// smaller than a full one is handed over when the queue runs empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_binding_cycles_bind_and_a_failing_bind_still_unreserves_and_requeues() {
    let h = harness("grouped", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "8"));
    h.cluster
        .fail_next_binds([ClientError::Transport("connection reset".into())]);
    for i in 0..5 {
        h.cluster.apply_pod(pod(&format!("p{i}"), "100m"));
    }
    let thread = h.sched.start().unwrap();
    // Bounded wait: four pods bind and one bind fails (which one is up to the runtime:
    // the binds of a group run concurrently).
    let pods: Vec<String> = (0..5).map(|i| format!("p{i}")).collect();
    let done = |h: &Harness| {
        let unbound: Vec<&String> = pods.iter().filter(|p| h.node_of(p).is_none()).collect();
        let queued = unbound.iter().map(|p| h.queue_of(p)).collect::<Vec<_>>();
        (unbound.len(), queued, h.sched.tasks_in_flight())
    };
    let want = (1, vec![Some(QueueName::Backoff)], 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = done(&h);
    while got != want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        got = done(&h);
    }
    h.sched.stop();
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, want);
    let failed = pods
        .iter()
        .find(|p| h.node_of(p).is_none())
        .cloned()
        .unwrap_or_default();
    let mut log = h.take_log();
    log.sort();
    let mut want_log: Vec<String> = pods.iter().map(|p| format!("reserve {p} n1")).collect();
    want_log.push(format!("unreserve {failed} n1"));
    assert_eq!(log, want_log);
    assert_eq!(h.sched.cache_counts(), (1, 4, 0));
}

/// A pod nominated to n1 (held back by a scheduling gate, so it stays nominated) takes
/// room there from pods of lower priority, not from pods of higher priority.
#[rstest]
#[case::lower_priority_sees_the_nomination(
    0,
    "unschedulable: 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
)]
#[case::equal_priority_sees_the_nomination(
    100,
    "unschedulable: 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
)]
#[case::higher_priority_ignores_it(200, "assumed n1")]
#[tokio::test]
async fn nominated_pods_hold_their_room(#[case] priority: i32, #[case] want: &str) {
    let mut h = harness(
        &format!("nominated-{priority}"),
        "permit: allow",
        &["default-scheduler"],
    );
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(
        make_pod("nominee")
            .req(&[("cpu", "3")])
            .priority(100)
            .scheduling_gate("example.com/hold")
            .with(|p| {
                p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                    nominated_node_name: Some("n1".into()),
                    ..Default::default()
                })
            })
            .obj(),
    );
    h.cluster
        .apply_pod(make_pod("p").req(&[("cpu", "2")]).priority(priority).obj());
    assert_eq!(h.drain().await, vec![("p".to_string(), want.to_string())]);
}

#[tokio::test]
async fn attempts_and_queue_moves_are_measured() {
    let mut h = harness("metrics", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "1"));
    h.cluster.apply_pod(pod("big", "2"));
    h.drain().await;
    h.cluster.apply_node(node("n2", "4"));
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    h.drain().await;
    assert_eq!(
        *h.metrics.attempts.lock().unwrap(),
        vec![
            "default-scheduler unschedulable",
            "default-scheduler scheduled"
        ]
    );
    assert_eq!(
        *h.metrics.scheduled.lock().unwrap(),
        vec![2],
        "bound at the 2nd attempt"
    );
    assert_eq!(
        *h.metrics.incoming.lock().unwrap(),
        vec![
            "active PodAdd",
            "unschedulable ScheduleAttemptFailure",
            "backoff NodeAdd",
            "active BackoffComplete",
        ]
    );
    assert_eq!(
        *h.metrics.points.lock().unwrap(),
        // One feasible node: no scoring, as upstream.
        vec![
            "PreFilter Success",
            "PostFilter Unschedulable",
            "PreFilter Success",
            "Reserve Success",
            "Permit Success",
            "PreBind Success",
            "Bind Success",
            "PostBind Success",
        ]
    );
}

/// Every extension point the runtime runs is observed once per run, labelled as upstream;
/// each plugin call is observed in sampled cycles only.
#[rstest]
#[case::sampled_cycle_times_every_plugin_call(
    100,
    &[
        "PreFilter NodeResourcesFit Success",
        "Filter NodeResourcesFit Success",
        "Filter TestGate Success",
        "Filter NodeResourcesFit Success",
        "Filter TestGate Success",
        "PreScore NodeResourcesFit Success",
        "Score NodeResourcesFit Success",
        "Reserve TestGate Success",
        "Permit TestGate Success",
        "Bind DefaultBinder Success",
    ]
)]
#[case::unsampled_cycle_times_no_plugin_call(0, &[])]
#[tokio::test]
async fn runtime_times_its_extension_points_and_sampled_plugin_calls(
    #[case] sample_percent: u8,
    #[case] want_plugins: &[&str],
) {
    let log_id = format!("timing-{sample_percent}");
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: PrioritySort}}, {{name: NodeResourcesFit}}, {{name: DefaultBinder}}, {{name: {GATE}}}]\n      disabled: [{{name: '*'}}]\n  pluginConfig:\n  - name: {GATE}\n    args: {{log: {log_id}, permit: allow}}\n"
    );
    let mut h = harness_from(&log_id, &yaml, sample_percent);
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_node(node("n2", "4"));
    h.cluster.apply_pod(pod("p", "1"));
    let scheduled = h.drain().await;
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    assert_eq!(
        *h.metrics.points.lock().unwrap(),
        vec![
            "PreFilter Success",
            "PreScore Success",
            "Score Success",
            "Reserve Success",
            "Permit Success",
            "PreBind Success",
            "Bind Success",
            "PostBind Success",
        ]
    );
    assert_eq!(*h.metrics.plugins.lock().unwrap(), want_plugins);
}

#[rstest]
#[case::short("0/3 nodes are available.", "0/3 nodes are available.")]
#[case::exactly_the_limit(&"x".repeat(1024), &"x".repeat(1024))]
#[case::cut_with_suffix(&"x".repeat(1100), &format!("{} ...", "x".repeat(1020)))]
#[case::cut_on_a_char_boundary(
    &format!("{}é", "x".repeat(1019)).repeat(2),
    &format!("{} ...", "x".repeat(1019))
)]
fn event_messages_are_truncated_as_upstream(#[case] message: &str, #[case] want: &str) {
    assert_eq!(truncate_message(message), want);
}

#[rstest]
#[case::nothing(make_node("n").obj(), ActionType(0))]
#[case::labels(make_node("n").label("a", "b").obj(), ActionType::UPDATE_NODE_LABEL)]
#[case::taint(make_node("n").taint("k", "v", "NoSchedule").obj(), ActionType::UPDATE_NODE_TAINT)]
#[case::cordon(make_node("n").unschedulable(true).obj(), ActionType::UPDATE_NODE_TAINT)]
#[case::allocatable(
    make_node("n").capacity(&[("cpu", "2")]).obj(),
    ActionType::UPDATE_NODE_ALLOCATABLE
)]
#[case::labels_and_taint(
    make_node("n").label("a", "b").taint("k", "v", "NoSchedule").obj(),
    ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT
)]
fn node_changes_map_to_upstream_actions(#[case] new: Node, #[case] want: ActionType) {
    let old = make_node("n").obj();
    assert_eq!(node_scheduling_properties_change(&old, &new), want);
}

use framework::ActionType;

// ---- preemption -------------------------------------------------------------------------

/// A pod of `priority` requesting `cpu`, on `node` (empty: pending).
fn prio_pod(name: &str, priority: i32, cpu: &str, node: &str) -> framework::testing::PodBuilder {
    let p = make_pod(name).req(&[("cpu", cpu)]).priority(priority);
    if node.is_empty() {
        p
    } else {
        p.node(node)
    }
}

fn never_preempts(p: framework::testing::PodBuilder) -> framework::testing::PodBuilder {
    p.with(|pod| {
        if let Some(s) = pod.spec.as_mut() {
            s.preemption_policy = Some("Never".into());
        }
    })
}

const PREEMPTED: &str = "unschedulable: 0/1 nodes are available: 1 Insufficient cpu.";

/// What `preemptor` went through on a 2-CPU node holding `low` (priority 0) and `mid`
/// (priority 5), 1 CPU each: its outcomes (a preemptor is activated once its victims are
/// gone, and placed), the pods deleted, and the nomination written.
#[rstest]
#[case::the_lowest_priority_pod_is_evicted_and_the_pod_placed(
    prio_pod("high", 100, "1", ""),
    vec![PREEMPTED, "assumed n1"],
    vec!["low"],
    Nomination::Set("n1".into())
)]
#[case::both_go_when_the_pod_needs_the_whole_node(
    prio_pod("high", 100, "2", ""),
    vec![PREEMPTED, "assumed n1"],
    vec!["mid", "low"],
    Nomination::Set("n1".into())
)]
#[case::preemption_policy_never_stays_pending(
    never_preempts(prio_pod("high", 100, "1", "")),
    vec!["unschedulable: 0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."],
    vec![],
    Nomination::Keep
)]
#[case::evicting_only_the_lower_priority_pod_does_not_make_room(
    prio_pod("high", 3, "2", ""),
    vec!["unschedulable: 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Insufficient cpu."],
    vec![],
    Nomination::Keep
)]
#[tokio::test]
async fn preemption_attempt(
    #[case] preemptor: framework::testing::PodBuilder,
    #[case] want_outcomes: Vec<&str>,
    #[case] want_deleted: Vec<&str>,
    #[case] want_nomination: Nomination,
) {
    let mut h = harness("preempt-attempt", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "2"));
    h.cluster.apply_pod(prio_pod("low", 0, "1", "n1").obj());
    h.cluster.apply_pod(prio_pod("mid", 5, "1", "n1").obj());
    h.cluster.apply_pod(preemptor.obj());
    let outcomes = h.drain().await;
    settle().await;
    let w = h.cluster.writes();
    let deleted: Vec<String> = w.deletions.iter().map(|d| d.name.clone()).collect();
    let nomination = h
        .cluster
        .last_status_update("default", "high")
        .map(|u| u.nomination);
    assert_eq!(
        (outcomes, deleted, nomination),
        (
            want_outcomes
                .into_iter()
                .map(|o| ("high".to_string(), o.to_string()))
                .collect::<Vec<_>>(),
            want_deleted.into_iter().map(String::from).collect(),
            Some(want_nomination)
        )
    );
}

/// The whole flow on the loop: the failed attempt nominates the preemptor at once (the
/// nominator keeps the room for it), a task deletes the victim with a `Preempted` event
/// and then activates the preemptor, which is bound without waiting out its backoff.
#[tokio::test]
async fn preemptor_is_nominated_then_bound_after_its_victim_is_deleted() {
    let mut h = harness("preempt-flow", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "2"));
    h.cluster.apply_pod(prio_pod("low", 0, "2", "n1").obj());
    h.cluster.apply_pod(prio_pod("high", 100, "2", "").obj());
    // One cycle, without letting the deletion task run yet.
    let first = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
    let nominated = h.sched.with_state(|_, q| {
        q.nominated_pods_for_node("n1")
            .iter()
            .map(|p| p.name().to_string())
            .collect::<Vec<_>>()
    });
    let low_before = h.cluster.pod("default", "low").is_some();
    h.sched.wait_for_bindings().await;
    let second = h.drain().await;
    settle().await;
    let w = h.cluster.writes();
    let preempted: Vec<PodEvent> = w
        .events
        .iter()
        .filter(|e| e.reason == "Preempted")
        .cloned()
        .collect();
    let marked: Vec<PodStatusUpdate> = w
        .status_updates
        .iter()
        .filter(|u| u.pod.name == "low")
        .cloned()
        .collect();
    assert_eq!(
        marked,
        vec![PodStatusUpdate {
            pod: pod_ref("low"),
            condition: Some(framework::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: "PreemptionByScheduler".into(),
                message: "default-scheduler: preempting to accommodate a higher priority pod"
                    .into(),
            }),
            nomination: Nomination::Keep,
        }],
        "the victim is marked before it is deleted"
    );
    assert_eq!(
        (
            first,
            nominated,
            low_before,
            second,
            w.deletions,
            preempted,
            h.node_of("high"),
            h.cluster.pod("default", "low").is_some(),
        ),
        (
            Some(PREEMPTED.to_string()),
            vec!["high".to_string()],
            true,
            vec![("high".to_string(), "assumed n1".to_string())],
            vec![pod_ref("low")],
            vec![PodEvent {
                regarding: pod_ref("low"),
                resource_version: None,
                event_type: EventType::Normal,
                reason: "Preempted".into(),
                action: "Preempting".into(),
                message: "Preempted by pod uid-high on node n1".into(),
                reporting_controller: "default-scheduler".into(),
            }],
            Some("n1".to_string()),
            false,
        )
    );
}

/// While its victims are being deleted, a preemptor that an event moves back to activeQ
/// is held at PreEnqueue by DefaultPreemption (it must not preempt again); the end of the
/// preemption releases and activates it.
#[tokio::test]
async fn a_preemptor_is_gated_until_its_preemption_ends() {
    let mut h = harness("preempt-gate", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "2"));
    h.cluster.apply_pod(prio_pod("low", 0, "2", "n1").obj());
    h.cluster.apply_pod(prio_pod("high", 100, "2", "").obj());
    let first = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
    // Backoff over, and a node with room (NodeResourcesFit's hint requeues the pod) that
    // its taint keeps the pod off: back to activeQ, but the gate holds it while the
    // deletion task has not run.
    h.clock.advance(Duration::from_secs(1));
    h.cluster.apply_node(
        make_node("tainted")
            .capacity(&[("cpu", "2"), ("memory", "8Gi"), ("pods", "110")])
            .taint("dedicated", "other", "NoSchedule")
            .obj(),
    );
    let during = h.queue_of("high");
    h.sched.wait_for_bindings().await;
    let after = h.queue_of("high");
    let second = h.drain().await;
    assert_eq!(
        (first, during, after, second),
        (
            Some(PREEMPTED.to_string()),
            Some(QueueName::Gated),
            Some(QueueName::Active),
            vec![("high".to_string(), "assumed n1".to_string())],
        )
    );
}

/// Who preempted whom, from the `Preempted` events: victim name → `(preemptor uid, node)`
/// of each event about it.
fn preemptions(w: &crate::memory::Writes) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for e in w.events.iter().filter(|e| e.reason == "Preempted") {
        let (preemptor, node) = e
            .message
            .strip_prefix("Preempted by pod ")
            .and_then(|m| m.split_once(" on node "))
            .map(|(p, n)| (p.to_string(), n.to_string()))
            .unwrap_or_default();
        out.entry(e.regarding.name.clone())
            .or_default()
            .push((preemptor, node));
    }
    out
}

/// Four preemptors of one priority race for two full nodes whose victims take their time
/// to terminate (graceful deletion): a victim already being evicted gets no second
/// `Preempted` event from a later preemptor, and each preemptor is bound to the node it
/// evicted pods from.
#[tokio::test]
async fn terminating_victims_are_preempted_once_and_preemptors_bind_where_they_preempted() {
    let mut h = harness("preempt-race", "permit: allow", &["default-scheduler"]);
    h.cluster.set_graceful_deletion(true);
    for n in ["n1", "n2"] {
        h.cluster.apply_node(node(n, "4"));
        for i in 0..4 {
            h.cluster
                .apply_pod(prio_pod(&format!("{n}-low{i}"), 0, "1", n).obj());
        }
    }
    let preemptors = ["p1", "p2", "p3", "p4"];
    for p in preemptors {
        h.cluster.apply_pod(prio_pod(p, 100, "2", "").obj());
        h.clock.advance(Duration::from_nanos(1));
    }
    // Each round: every pod in activeQ gets its cycle and the preemptions their API calls,
    // then the victims finish terminating and backoffs end.
    for _ in 0..8 {
        h.drain().await;
        settle().await;
        h.cluster.finish_terminating();
        h.clock.advance(Duration::from_secs(11));
        h.sched.flush();
        if preemptors.iter().all(|p| h.node_of(p).is_some()) {
            break;
        }
    }
    let claims = preemptions(&h.cluster.writes());
    let claimed_twice: Vec<(&String, &Vec<(String, String)>)> =
        claims.iter().filter(|(_, c)| c.len() > 1).collect();
    let bound_elsewhere: Vec<(String, String, Option<String>)> = claims
        .values()
        .flatten()
        .filter_map(|(uid, node)| {
            let name = uid.strip_prefix("uid-").unwrap_or(uid);
            let bound = h.node_of(name);
            (bound.as_deref() != Some(node.as_str()))
                .then(|| (name.to_string(), node.clone(), bound))
        })
        .collect();
    let bound: Vec<Option<String>> = preemptors.iter().map(|p| h.node_of(p)).collect();
    let per_node = |n: &str| bound.iter().filter(|b| b.as_deref() == Some(n)).count();
    assert_eq!(
        (
            claimed_twice,
            bound_elsewhere,
            claims.len(),
            per_node("n1"),
            per_node("n2")
        ),
        (vec![], vec![], 8, 2, 2),
        "preemptions: {claims:?}"
    );
}

/// A second preemptor whose dry run needs only the room a terminating victim is already
/// freeing is nominated to that node without a second delete or `Preempted` event, and
/// both preemptors are bound there once the victim is gone.
#[tokio::test]
async fn a_preemptor_needing_only_a_terminating_victim_is_nominated_without_evicting_it_again() {
    let mut h = harness(
        "preempt-terminating",
        "permit: allow",
        &["default-scheduler"],
    );
    h.cluster.set_graceful_deletion(true);
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_pod(prio_pod("big", 0, "4", "n1").obj());
    for p in ["p1", "p2"] {
        h.cluster.apply_pod(prio_pod(p, 100, "2", "").obj());
        h.clock.advance(Duration::from_nanos(1));
    }
    h.drain().await;
    settle().await;
    let nomination = |h: &Harness, p: &str| {
        h.cluster
            .pod("default", p)
            .and_then(|p| p.status.clone())
            .and_then(|s| s.nominated_node_name)
    };
    let during = (nomination(&h, "p1"), nomination(&h, "p2"));
    let gone = h.cluster.finish_terminating();
    h.clock.advance(Duration::from_secs(11));
    h.sched.flush();
    h.drain().await;
    let w = h.cluster.writes();
    assert_eq!(
        (
            during,
            gone,
            w.deletions.clone(),
            preemptions(&w),
            h.node_of("p1"),
            h.node_of("p2")
        ),
        (
            (Some("n1".to_string()), Some("n1".to_string())),
            vec!["default/big".to_string()],
            vec![pod_ref("big")],
            BTreeMap::from([(
                "big".to_string(),
                vec![("uid-p1".to_string(), "n1".to_string())]
            )]),
            Some("n1".to_string()),
            Some("n1".to_string()),
        )
    );
}

/// A victim waiting at Permit is rejected, not deleted: it is not recorded as terminating,
/// so a later preemptor does not take it for a pod already on its way out.
#[tokio::test(start_paused = true)]
async fn a_victim_rejected_at_permit_is_not_counted_as_terminating() {
    let mut h = harness(
        "preempt-waiting",
        "permit: wait, timeoutSeconds: 100",
        &["default-scheduler"],
    );
    h.cluster.apply_node(node("n1", "2"));
    h.cluster.apply_pod(prio_pod("low", 0, "2", "").obj());
    let low = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
    settle().await;
    h.cluster.apply_pod(prio_pod("high", 100, "2", "").obj());
    let high = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
    settle().await;
    let w = h.cluster.writes();
    assert_eq!(
        (
            low,
            high,
            w.deletions.clone(),
            preemptions(&w),
            h.sched.shared.preempting_pods.is_victim("default/low"),
        ),
        (
            Some("assumed n1".to_string()),
            Some(PREEMPTED.to_string()),
            vec![],
            BTreeMap::from([(
                "low".to_string(),
                vec![("uid-high".to_string(), "n1".to_string())]
            )]),
            false,
        )
    );
}

// ---- storage listers ---------------------------------------------------------------------

/// What the snapshot's storage listers hold: volumes (name and zone label), claims
/// (`namespace/name` and volume name) and classes (name and binding mode), sorted.
type StorageView = (
    Vec<(String, String)>,
    Vec<(String, String)>,
    Vec<(String, String)>,
);

fn storage_view(s: &framework::StorageListers) -> StorageView {
    let zone = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.labels
            .as_ref()
            .and_then(|l| l.get("topology.kubernetes.io/zone").cloned())
            .unwrap_or_default()
    };
    let mut pvs: Vec<(String, String)> = s
        .persistent_volumes
        .iter()
        .map(|(k, v)| (k.clone(), zone(&v.metadata)))
        .collect();
    let mut pvcs: Vec<(String, String)> = s
        .persistent_volume_claims
        .iter()
        .map(|(k, v)| {
            let vol = v.spec.as_ref().and_then(|s| s.volume_name.clone());
            (k.clone(), vol.unwrap_or_default())
        })
        .collect();
    let mut classes: Vec<(String, String)> = s
        .storage_classes
        .iter()
        .map(|(k, v)| (k.clone(), v.volume_binding_mode.clone().unwrap_or_default()))
        .collect();
    pvs.sort();
    pvcs.sort();
    classes.sort();
    (pvs, pvcs, classes)
}

fn pv(name: &str, zone: &str) -> Arc<k8s_openapi::api::core::v1::PersistentVolume> {
    let mut v = k8s_openapi::api::core::v1::PersistentVolume::default();
    v.metadata.name = Some(name.into());
    v.metadata.labels = Some(
        [("topology.kubernetes.io/zone".to_string(), zone.to_string())]
            .into_iter()
            .collect(),
    );
    Arc::new(v)
}

fn pvc(
    ns: &str,
    name: &str,
    volume: &str,
) -> Arc<k8s_openapi::api::core::v1::PersistentVolumeClaim> {
    let mut c = k8s_openapi::api::core::v1::PersistentVolumeClaim::default();
    c.metadata.namespace = Some(ns.into());
    c.metadata.name = Some(name.into());
    c.spec = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
        volume_name: Some(volume.into()),
        ..Default::default()
    });
    // Bound as the PV controller leaves a claim.
    c.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/bind-completed".to_string(),
            "yes".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    Arc::new(c)
}

fn storage_class(name: &str, mode: &str) -> Arc<k8s_openapi::api::storage::v1::StorageClass> {
    Arc::new(k8s_openapi::api::storage::v1::StorageClass {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: "p".into(),
        volume_binding_mode: Some(mode.into()),
        ..Default::default()
    })
}

#[tokio::test]
async fn storage_adds_updates_and_deletes_reach_the_snapshot() {
    use crate::source::{Change, ObjectEvent};
    let mut h = harness("storage-listers", "permit: allow", &["default-scheduler"]);
    let s = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        storage_view(h.lp.refreshed_snapshot().storage()),
        (vec![], vec![], vec![])
    );

    for e in [
        ObjectEvent::PersistentVolume(Change::Added(pv("pv-a", "a"))),
        ObjectEvent::PersistentVolume(Change::Added(pv("pv-b", "b"))),
        ObjectEvent::PersistentVolumeClaim(Change::Added(pvc("shop", "data", "pv-a"))),
        ObjectEvent::PersistentVolumeClaim(Change::Added(pvc("default", "data", "pv-b"))),
        ObjectEvent::StorageClass(Change::Added(storage_class("fast", "Immediate"))),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        storage_view(h.lp.refreshed_snapshot().storage()),
        (
            s(&[("pv-a", "a"), ("pv-b", "b")]),
            s(&[("default/data", "pv-b"), ("shop/data", "pv-a")]),
            s(&[("fast", "Immediate")]),
        )
    );
    let snap = h.lp.refreshed_snapshot();
    assert!(snap
        .storage()
        .persistent_volume_claim("shop", "data")
        .is_some());
    assert!(snap.storage().persistent_volume("pv-b").is_some());
    assert!(snap.storage().storage_class("fast").is_some());

    for e in [
        ObjectEvent::PersistentVolume(Change::Updated {
            old: pv("pv-a", "a"),
            new: pv("pv-a", "c"),
        }),
        ObjectEvent::PersistentVolumeClaim(Change::Updated {
            old: pvc("shop", "data", "pv-a"),
            new: pvc("shop", "data", "pv-b"),
        }),
        ObjectEvent::StorageClass(Change::Updated {
            old: storage_class("fast", "Immediate"),
            new: storage_class("fast", "WaitForFirstConsumer"),
        }),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        storage_view(h.lp.refreshed_snapshot().storage()),
        (
            s(&[("pv-a", "c"), ("pv-b", "b")]),
            s(&[("default/data", "pv-b"), ("shop/data", "pv-b")]),
            s(&[("fast", "WaitForFirstConsumer")]),
        )
    );

    for e in [
        ObjectEvent::PersistentVolume(Change::Deleted(pv("pv-a", "c"))),
        ObjectEvent::PersistentVolumeClaim(Change::Deleted(pvc("shop", "data", "pv-b"))),
        ObjectEvent::StorageClass(Change::Deleted(storage_class("fast", "Immediate"))),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        storage_view(h.lp.refreshed_snapshot().storage()),
        (s(&[("pv-b", "b")]), s(&[("default/data", "pv-b")]), vec![])
    );
}

/// The keys the snapshot's CSI listers hold, sorted: CSINodes, CSIDrivers, capacities
/// (`namespace/name`) and VolumeAttachments.
fn csi_view(s: &framework::StorageListers) -> [Vec<String>; 4] {
    fn keys<T>(m: &std::collections::HashMap<String, T>) -> Vec<String> {
        let mut k: Vec<String> = m.keys().cloned().collect();
        k.sort();
        k
    }
    [
        keys(&s.csi_nodes),
        keys(&s.csi_drivers),
        keys(&s.csi_storage_capacities),
        keys(&s.volume_attachments),
    ]
}

fn csi_node(name: &str, driver: &str, count: i32) -> Arc<k8s_openapi::api::storage::v1::CSINode> {
    use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
    Arc::new(CSINode {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: CSINodeSpec {
            drivers: vec![CSINodeDriver {
                name: driver.into(),
                node_id: format!("{name}-id"),
                allocatable: Some(VolumeNodeResources { count: Some(count) }),
                ..Default::default()
            }],
        },
    })
}

fn csi_driver(name: &str) -> Arc<k8s_openapi::api::storage::v1::CSIDriver> {
    let mut d = k8s_openapi::api::storage::v1::CSIDriver::default();
    d.metadata.name = Some(name.into());
    Arc::new(d)
}

fn capacity(ns: &str, name: &str) -> Arc<k8s_openapi::api::storage::v1::CSIStorageCapacity> {
    let mut c = k8s_openapi::api::storage::v1::CSIStorageCapacity::default();
    c.metadata.namespace = Some(ns.into());
    c.metadata.name = Some(name.into());
    c.storage_class_name = "fast".into();
    Arc::new(c)
}

fn volume_attachment(
    name: &str,
    node: &str,
    volume: &str,
) -> Arc<k8s_openapi::api::storage::v1::VolumeAttachment> {
    use k8s_openapi::api::storage::v1::{
        VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
    };
    Arc::new(VolumeAttachment {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: VolumeAttachmentSpec {
            attacher: "ebs.csi.aws.com".into(),
            node_name: node.into(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some(volume.into()),
                ..Default::default()
            },
        },
        status: None,
    })
}

#[tokio::test]
async fn csi_adds_updates_and_deletes_reach_the_snapshot() {
    use crate::source::{Change, ObjectEvent};
    let mut h = harness("csi-listers", "permit: allow", &["default-scheduler"]);
    let v = |k: &[&str]| -> Vec<String> { k.iter().map(|s| s.to_string()).collect() };
    assert_eq!(
        csi_view(h.lp.refreshed_snapshot().storage()),
        <[Vec<String>; 4]>::default()
    );

    for e in [
        ObjectEvent::CSINode(Change::Added(csi_node("n1", "ebs.csi.aws.com", 1))),
        ObjectEvent::CSINode(Change::Added(csi_node("n2", "ebs.csi.aws.com", 1))),
        ObjectEvent::CSIDriver(Change::Added(csi_driver("ebs.csi.aws.com"))),
        ObjectEvent::CSIStorageCapacity(Change::Added(capacity("kube-system", "cap-a"))),
        ObjectEvent::CSIStorageCapacity(Change::Added(capacity("default", "cap-a"))),
        ObjectEvent::VolumeAttachment(Change::Added(volume_attachment("va-1", "n1", "pv-a"))),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        csi_view(h.lp.refreshed_snapshot().storage()),
        [
            v(&["n1", "n2"]),
            v(&["ebs.csi.aws.com"]),
            v(&["default/cap-a", "kube-system/cap-a"]),
            v(&["va-1"]),
        ]
    );
    let snap = h.lp.refreshed_snapshot();
    let count = |s: &framework::StorageListers| {
        s.csi_node("n1")
            .and_then(|n| n.spec.drivers.first())
            .and_then(|d| d.allocatable.as_ref())
            .and_then(|a| a.count)
    };
    assert_eq!(count(snap.storage()), Some(1));
    assert!(snap.storage().csi_driver("ebs.csi.aws.com").is_some());
    assert!(snap
        .storage()
        .csi_storage_capacity("kube-system", "cap-a")
        .is_some());
    assert_eq!(snap.storage().all_csi_storage_capacities().count(), 2);
    assert_eq!(
        snap.storage()
            .volume_attachment("va-1")
            .map(|va| va.spec.node_name.clone()),
        Some("n1".to_string())
    );
    assert_eq!(snap.storage().all_volume_attachments().count(), 1);

    h.cluster
        .deliver_other(ObjectEvent::CSINode(Change::Updated {
            old: csi_node("n1", "ebs.csi.aws.com", 1),
            new: csi_node("n1", "ebs.csi.aws.com", 3),
        }));
    assert_eq!(count(h.lp.refreshed_snapshot().storage()), Some(3));

    for e in [
        ObjectEvent::CSINode(Change::Deleted(csi_node("n2", "ebs.csi.aws.com", 1))),
        ObjectEvent::CSIDriver(Change::Deleted(csi_driver("ebs.csi.aws.com"))),
        ObjectEvent::CSIStorageCapacity(Change::Deleted(capacity("default", "cap-a"))),
        ObjectEvent::VolumeAttachment(Change::Deleted(volume_attachment("va-1", "n1", "pv-a"))),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        csi_view(h.lp.refreshed_snapshot().storage()),
        [v(&["n1"]), vec![], v(&["kube-system/cap-a"]), vec![]]
    );
}

fn dra_view(s: &framework::StorageListers) -> [Vec<String>; 3] {
    fn keys<T>(m: &std::collections::HashMap<String, T>) -> Vec<String> {
        let mut k: Vec<String> = m.keys().cloned().collect();
        k.sort();
        k
    }
    [
        keys(&s.device_classes),
        keys(&s.resource_slices),
        keys(&s.resource_claims),
    ]
}

fn device_class(name: &str) -> Arc<k8s_openapi::api::resource::v1::DeviceClass> {
    let mut c = k8s_openapi::api::resource::v1::DeviceClass::default();
    c.metadata.name = Some(name.into());
    Arc::new(c)
}

fn resource_slice(name: &str, node: &str) -> Arc<k8s_openapi::api::resource::v1::ResourceSlice> {
    let mut s = k8s_openapi::api::resource::v1::ResourceSlice::default();
    s.metadata.name = Some(name.into());
    s.spec.driver = "gpu.example.com".into();
    s.spec.node_name = Some(node.into());
    s.spec.pool.name = node.into();
    s.spec.pool.resource_slice_count = 1;
    Arc::new(s)
}

fn resource_claim(
    ns: &str,
    name: &str,
    version: &str,
) -> Arc<k8s_openapi::api::resource::v1::ResourceClaim> {
    let mut c = k8s_openapi::api::resource::v1::ResourceClaim::default();
    c.metadata.namespace = Some(ns.into());
    c.metadata.name = Some(name.into());
    c.metadata.resource_version = Some(version.into());
    Arc::new(c)
}

#[tokio::test]
async fn dra_adds_updates_and_deletes_reach_the_snapshot() {
    use crate::source::{Change, ObjectEvent};
    let mut h = harness("dra-listers", "permit: allow", &["default-scheduler"]);
    let v = |k: &[&str]| -> Vec<String> { k.iter().map(|s| s.to_string()).collect() };
    assert_eq!(
        dra_view(h.lp.refreshed_snapshot().storage()),
        <[Vec<String>; 3]>::default()
    );

    for e in [
        ObjectEvent::DeviceClass(Change::Added(device_class("gpu.example.com"))),
        ObjectEvent::ResourceSlice(Change::Added(resource_slice("n1-gpu", "n1"))),
        ObjectEvent::ResourceSlice(Change::Added(resource_slice("n2-gpu", "n2"))),
        ObjectEvent::ResourceClaim(Change::Added(resource_claim("default", "gpu", "1"))),
        ObjectEvent::ResourceClaim(Change::Added(resource_claim("ml", "gpu", "1"))),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        dra_view(h.lp.refreshed_snapshot().storage()),
        [
            v(&["gpu.example.com"]),
            v(&["n1-gpu", "n2-gpu"]),
            v(&["default/gpu", "ml/gpu"]),
        ]
    );
    let snap = h.lp.refreshed_snapshot();
    assert!(snap.storage().device_class("gpu.example.com").is_some());
    assert_eq!(snap.storage().all_resource_slices().count(), 2);
    assert_eq!(snap.storage().all_resource_claims().count(), 2);

    h.cluster
        .deliver_other(ObjectEvent::ResourceClaim(Change::Updated {
            old: resource_claim("ml", "gpu", "1"),
            new: resource_claim("ml", "gpu", "2"),
        }));
    assert_eq!(
        h.lp.refreshed_snapshot()
            .storage()
            .resource_claim("ml", "gpu")
            .and_then(|c| c.metadata.resource_version.clone()),
        Some("2".to_string())
    );

    for e in [
        ObjectEvent::DeviceClass(Change::Deleted(device_class("gpu.example.com"))),
        ObjectEvent::ResourceSlice(Change::Deleted(resource_slice("n2-gpu", "n2"))),
        ObjectEvent::ResourceClaim(Change::Deleted(resource_claim("default", "gpu", "1"))),
    ] {
        h.cluster.deliver_other(e);
    }
    assert_eq!(
        dra_view(h.lp.refreshed_snapshot().storage()),
        [vec![], v(&["n1-gpu"]), v(&["ml/gpu"])]
    );
}

#[tokio::test]
async fn a_pod_rejected_by_volume_zone_is_retried_by_a_topology_change_of_its_volume_only() {
    use crate::source::{Change, ObjectEvent};
    let mut h = harness("volumezone", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(
        make_node("n1")
            .label("topology.kubernetes.io/zone", "b")
            .capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
            .obj(),
    );
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolume(Change::Added(pv(
            "pv-a", "a",
        ))));
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(pvc(
            "default", "data", "pv-a",
        ))));
    let mut db = pod("db", "100m");
    if let Some(spec) = db.spec.as_mut() {
        spec.volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
            name: "data".into(),
            persistent_volume_claim: Some(
                k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                    claim_name: "data".into(),
                    read_only: None,
                },
            ),
            ..Default::default()
        }]);
    }
    h.cluster.apply_pod(db);
    assert_eq!(
        h.drain().await,
        vec![(
            "db".to_string(),
            "unschedulable: 0/1 nodes are available: 1 node(s) had no available volume zone. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.".to_string()
        )]
    );
    assert_eq!(h.queue_of("db"), Some(QueueName::Unschedulable));

    // Another claim, and a change of the volume that leaves its zone alone: no retry.
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(pvc(
            "default", "other", "pv-a",
        ))));
    let mut relabelled = (*pv("pv-a", "a")).clone();
    if let Some(l) = relabelled.metadata.labels.as_mut() {
        l.insert("team".into(), "db".into());
    }
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolume(Change::Updated {
            old: pv("pv-a", "a"),
            new: Arc::new(relabelled.clone()),
        }));
    assert_eq!(h.queue_of("db"), Some(QueueName::Unschedulable));

    // The volume moves to zone b: the pod is retried and lands on n1.
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolume(Change::Updated {
            old: Arc::new(relabelled),
            new: pv("pv-a", "b"),
        }));
    assert_eq!(h.queue_of("db"), Some(QueueName::Backoff));
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    assert_eq!(
        h.drain().await,
        vec![("db".to_string(), "assumed n1".to_string())]
    );
}

// ---- VolumeBinding ----------------------------------------------------------------------

mod volume_binding {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
        PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, PersistentVolumeStatus, Volume,
        VolumeResourceRequirements,
    };
    use k8s_openapi::api::storage::v1::StorageClass;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::source::{Change, ObjectEvent};

    const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
    const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

    fn wffc_class(provisioner: &str) -> Arc<StorageClass> {
        Arc::new(StorageClass {
            metadata: ObjectMeta {
                name: Some("wffc".into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            volume_binding_mode: Some("WaitForFirstConsumer".into()),
            ..Default::default()
        })
    }

    /// An unbound 1Gi ReadWriteOnce claim of class `wffc` in `default`, at version 1.
    fn claim(name: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some("wffc".into()),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity("1Gi".into()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// `claim` as the PV controller leaves it once bound to `volume`, at version 2.
    fn bound_claim(name: &str, volume: &str, selected: Option<&str>) -> PersistentVolumeClaim {
        let mut c = claim(name);
        c.metadata.resource_version = Some("2".into());
        let mut annotations = BTreeMap::from([(BIND_COMPLETED.to_string(), "yes".to_string())]);
        if let Some(n) = selected {
            annotations.insert(SELECTED_NODE.to_string(), n.to_string());
        }
        c.metadata.annotations = Some(annotations);
        if let Some(s) = c.spec.as_mut() {
            s.volume_name = Some(volume.into());
        }
        c
    }

    /// A 1Gi volume of class `wffc`: Available, or bound to `claim` (version 2).
    fn volume(name: &str, claim: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(if claim.is_some() { "2" } else { "1" }.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                storage_class_name: Some("wffc".into()),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                capacity: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity("1Gi".into()),
                )])),
                claim_ref: claim.map(|c| ObjectReference {
                    namespace: Some("default".into()),
                    name: Some(c.into()),
                    uid: Some(format!("uid-{c}")),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some(
                    if claim.is_some() {
                        "Bound"
                    } else {
                        "Available"
                    }
                    .into(),
                ),
                ..Default::default()
            }),
        }
    }

    fn pod_with_claim(name: &str, claim: &str) -> Pod {
        let mut p = pod(name, "100m");
        if let Some(spec) = p.spec.as_mut() {
            spec.volumes = Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.into(),
                    read_only: None,
                }),
                ..Default::default()
            }]);
        }
        p
    }

    /// Lets the binding tasks run until `done` holds, for a bounded number of turns.
    async fn until(h: &Harness, done: impl Fn(&Harness) -> bool) -> bool {
        for _ in 0..10_000 {
            if done(h) {
                return true;
            }
            tokio::task::yield_now().await;
        }
        done(h)
    }

    /// Node n1, a WaitForFirstConsumer class of a CSI provisioner, claim `data` of it and
    /// pending pod `db` using the claim.
    fn provisioning_harness(name: &str) -> Harness {
        let h = harness(name, "permit: allow", &["default-scheduler"]);
        h.cluster.apply_node(node("n1", "4"));
        h.cluster
            .deliver_other(ObjectEvent::StorageClass(Change::Added(wffc_class(
                "example.com/csi",
            ))));
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(Arc::new(
                claim("data"),
            ))));
        h.cluster.apply_pod(pod_with_claim("db", "data"));
        h
    }

    #[tokio::test]
    async fn a_wait_for_first_consumer_claim_gets_its_node_selected_and_the_pod_binds_once_the_claim_is_bound(
    ) {
        let mut h = provisioning_harness("volumebinding-provision");

        let outcome = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
        let written = until(&h, |h| {
            !h.cluster.writes().persistent_volume_claims.is_empty()
        })
        .await;
        let mut want = claim("data");
        want.metadata.annotations = Some(BTreeMap::from([(
            SELECTED_NODE.to_string(),
            "n1".to_string(),
        )]));
        assert_eq!(
            (
                outcome,
                written,
                h.cluster.writes().persistent_volume_claims,
                h.node_of("db")
            ),
            (Some("assumed n1".to_string()), true, vec![want], None)
        );

        // The provisioner creates the volume; the PV controller binds the claim to it.
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolume(Change::Added(Arc::new(
                volume("pv-1", Some("data")),
            ))));
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Updated {
                old: Arc::new(claim("data")),
                new: Arc::new(bound_claim("data", "pv-1", Some("n1"))),
            }));
        h.sched.wait_for_bindings().await;
        assert_eq!(h.node_of("db"), Some("n1".to_string()));
    }

    #[tokio::test]
    async fn a_failed_provisioning_unreserves_and_requeues_the_pod() {
        let mut h = provisioning_harness("volumebinding-failed");
        let outcome = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
        until(&h, |h| {
            !h.cluster.writes().persistent_volume_claims.is_empty()
        })
        .await;

        // The provisioner gives up on n1: it clears the selected node.
        let mut given_up = claim("data");
        given_up.metadata.resource_version = Some("3".into());
        given_up.metadata.annotations = Some(BTreeMap::new());
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Updated {
                old: Arc::new(claim("data")),
                new: Arc::new(given_up),
            }));
        h.sched.wait_for_bindings().await;
        let message = h
            .cluster
            .last_status_update("default", "db")
            .and_then(|u| u.condition)
            .map(|c| c.message);
        assert_eq!(
            (outcome, h.node_of("db"), h.queue_of("db"), message),
            (
                Some("assumed n1".to_string()),
                None,
                Some(QueueName::Backoff),
                Some("running PreBind plugin \"VolumeBinding\": binding volumes: provisioning failed for PVC \"data\"".to_string())
            )
        );
    }

    #[tokio::test]
    async fn a_pod_deleted_while_its_volumes_are_provisioned_stops_waiting_for_them() {
        let mut h = provisioning_harness("volumebinding-deleted");
        let outcome = h.lp.schedule_one(None).map(|a| summary(&a.outcome));
        until(&h, |h| {
            !h.cluster.writes().persistent_volume_claims.is_empty()
        })
        .await;

        // PreBind waits for the provisioner (up to bindTimeoutSeconds, 600 s by default);
        // the pod's deletion ends the wait.
        assert!(h.cluster.remove_pod("default", "db"));
        let finished = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            h.sched.wait_for_bindings(),
        )
        .await
        .is_ok();
        assert_eq!(
            (
                outcome,
                finished,
                h.node_of("db"),
                h.queue_of("db"),
                h.sched.shared.binding_pods.len()
            ),
            (Some("assumed n1".to_string()), true, None, None, 0)
        );
    }

    #[tokio::test]
    async fn a_pod_waiting_for_an_immediate_claim_is_retried_when_its_claim_changes_only() {
        let mut h = harness(
            "volumebinding-immediate",
            "permit: allow",
            &["default-scheduler"],
        );
        h.cluster.apply_node(node("n1", "4"));
        let mut immediate = (*wffc_class("example.com/csi")).clone();
        immediate.volume_binding_mode = Some("Immediate".into());
        h.cluster
            .deliver_other(ObjectEvent::StorageClass(Change::Added(Arc::new(
                immediate,
            ))));
        for c in ["data", "other"] {
            h.cluster
                .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(Arc::new(
                    claim(c),
                ))));
        }
        h.cluster.apply_pod(pod_with_claim("db", "data"));
        let first = h.drain().await;
        let after_first = h.queue_of("db");

        // Another claim is bound: no retry. The pod's claim is bound: retried, and placed.
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Updated {
                old: Arc::new(claim("other")),
                new: Arc::new(bound_claim("other", "pv-2", None)),
            }));
        let after_other = h.queue_of("db");
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolume(Change::Added(Arc::new(
                volume("pv-1", Some("data")),
            ))));
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Updated {
                old: Arc::new(claim("data")),
                new: Arc::new(bound_claim("data", "pv-1", None)),
            }));
        let after_own = h.queue_of("db");
        h.clock.advance(Duration::from_secs(1));
        h.sched.flush();
        let second = h.drain().await;
        assert_eq!(
            (first, after_first, after_other, after_own, second),
            (
                vec![(
                    "db".to_string(),
                    "unschedulable: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.".to_string()
                )],
                Some(QueueName::Unschedulable),
                Some(QueueName::Unschedulable),
                Some(QueueName::Backoff),
                vec![("db".to_string(), "assumed n1".to_string())],
            )
        );
    }

    #[tokio::test]
    async fn two_pods_wanting_the_only_matching_volume_do_not_both_get_it() {
        let mut h = harness(
            "volumebinding-static",
            "permit: allow",
            &["default-scheduler"],
        );
        h.cluster.apply_node(node("n1", "4"));
        h.cluster
            .deliver_other(ObjectEvent::StorageClass(Change::Added(wffc_class(
                "kubernetes.io/no-provisioner",
            ))));
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolume(Change::Added(Arc::new(
                volume("pv-1", None),
            ))));
        for c in ["data-a", "data-b"] {
            h.cluster
                .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(Arc::new(
                    claim(c),
                ))));
        }
        h.cluster.apply_pod(pod_with_claim("a", "data-a"));
        h.cluster.apply_pod(pod_with_claim("b", "data-b"));

        let mut outcomes = Vec::new();
        while let Some(a) = h.lp.schedule_one(None) {
            outcomes.push((a.pod.name().to_string(), summary(&a.outcome)));
        }
        let written = until(&h, |h| !h.cluster.writes().persistent_volumes.is_empty()).await;
        let claim_refs: Vec<Option<String>> = h
            .cluster
            .writes()
            .persistent_volumes
            .iter()
            .map(|v| {
                v.spec
                    .as_ref()
                    .and_then(|s| s.claim_ref.as_ref())
                    .and_then(|r| r.name.clone())
            })
            .collect();
        assert_eq!(
            (outcomes, written, claim_refs),
            (
                vec![
                    ("a".to_string(), "assumed n1".to_string()),
                    (
                        "b".to_string(),
                        "unschedulable: 0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.".to_string()
                    ),
                ],
                true,
                vec![Some("data-a".to_string())]
            )
        );

        // The PV controller completes the binding: a is bound, b stays pending.
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolume(Change::Updated {
                old: Arc::new(volume("pv-1", None)),
                new: Arc::new(volume("pv-1", Some("data-a"))),
            }));
        h.cluster
            .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Updated {
                old: Arc::new(claim("data-a")),
                new: Arc::new(bound_claim("data-a", "pv-1", None)),
            }));
        h.sched.wait_for_bindings().await;
        assert_eq!(
            (h.node_of("a"), h.node_of("b")),
            (Some("n1".to_string()), None)
        );
    }
}

// ---- NodeVolumeLimits ---------------------------------------------------------------------

/// A CSI volume of `driver` whose handle is its name.
fn csi_pv(name: &str, driver: &str) -> Arc<k8s_openapi::api::core::v1::PersistentVolume> {
    let mut v = k8s_openapi::api::core::v1::PersistentVolume::default();
    v.metadata.name = Some(name.into());
    v.spec = Some(k8s_openapi::api::core::v1::PersistentVolumeSpec {
        csi: Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: driver.into(),
            volume_handle: name.into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    Arc::new(v)
}

/// A pod requesting 100m CPU with one volume per claim.
fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
    let mut p = pod(name, "100m");
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes = Some(
            claims
                .iter()
                .map(|c| k8s_openapi::api::core::v1::Volume {
                    name: c.to_string(),
                    persistent_volume_claim: Some(
                        k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                            claim_name: c.to_string(),
                            read_only: None,
                        },
                    ),
                    ..Default::default()
                })
                .collect(),
        );
    }
    p
}

const EBS: &str = "ebs.csi.aws.com";

/// Node n1 whose CSINode allows one EBS volume, held by pod `holder` (claim `data-a`), a
/// pod `idle` on n1 without volumes, and pod `db` (claim `data-b`) rejected for the limit.
async fn volume_limit_harness(log_id: &str) -> Harness {
    use crate::source::{Change, ObjectEvent};
    let mut h = harness(log_id, "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    for e in [
        ObjectEvent::CSINode(Change::Added(csi_node("n1", EBS, 1))),
        ObjectEvent::PersistentVolume(Change::Added(csi_pv("pv-a", EBS))),
        ObjectEvent::PersistentVolume(Change::Added(csi_pv("pv-b", EBS))),
        ObjectEvent::PersistentVolumeClaim(Change::Added(pvc("default", "data-a", "pv-a"))),
        ObjectEvent::PersistentVolumeClaim(Change::Added(pvc("default", "data-b", "pv-b"))),
    ] {
        h.cluster.deliver_other(e);
    }
    let mut holder = pod_with_claims("holder", &["data-a"]);
    let mut idle = pod("idle", "100m");
    for p in [&mut holder, &mut idle] {
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = Some("n1".into());
        }
    }
    h.cluster.apply_pod(holder);
    h.cluster.apply_pod(idle);
    h.cluster.apply_pod(pod_with_claims("db", &["data-b"]));
    assert_eq!(
        h.drain().await,
        vec![(
            "db".to_string(),
            "unschedulable: 0/1 nodes are available: 1 node(s) exceed max volume count. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.".to_string()
        )]
    );
    assert_eq!(h.queue_of("db"), Some(QueueName::Unschedulable));
    h
}

/// Events that cannot make room for `db`: a pod without volumes leaves n1, the CSINode is
/// updated with the same limit, another claim is created, an attachment of an unrelated
/// volume is deleted.
fn deliver_unrelated_volume_events(h: &Harness) {
    use crate::source::{Change, ObjectEvent};
    assert!(h.cluster.remove_pod("default", "idle"));
    h.cluster
        .deliver_other(ObjectEvent::CSINode(Change::Updated {
            old: csi_node("n1", EBS, 1),
            new: csi_node("n1", EBS, 1),
        }));
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(pvc(
            "default", "other", "pv-c",
        ))));
    h.cluster
        .deliver_other(ObjectEvent::VolumeAttachment(Change::Deleted(
            volume_attachment("va-c", "n1", "pv-c"),
        )));
}

#[tokio::test]
async fn a_pod_over_the_volume_limit_is_retried_when_a_pod_with_a_csi_volume_leaves_its_node() {
    let mut h = volume_limit_harness("volumelimits-pod-deleted").await;
    deliver_unrelated_volume_events(&h);
    assert_eq!(h.queue_of("db"), Some(QueueName::Unschedulable));

    assert!(h.cluster.remove_pod("default", "holder"));
    assert_eq!(h.queue_of("db"), Some(QueueName::Backoff));
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    assert_eq!(
        h.drain().await,
        vec![("db".to_string(), "assumed n1".to_string())]
    );
}

#[tokio::test]
async fn a_pod_over_the_volume_limit_is_retried_when_the_csi_node_count_grows() {
    use crate::source::{Change, ObjectEvent};
    let mut h = volume_limit_harness("volumelimits-csinode-grows").await;
    deliver_unrelated_volume_events(&h);
    assert_eq!(h.queue_of("db"), Some(QueueName::Unschedulable));

    h.cluster
        .deliver_other(ObjectEvent::CSINode(Change::Updated {
            old: csi_node("n1", EBS, 1),
            new: csi_node("n1", EBS, 2),
        }));
    assert_eq!(h.queue_of("db"), Some(QueueName::Backoff));
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    assert_eq!(
        h.drain().await,
        vec![("db".to_string(), "assumed n1".to_string())]
    );
}

/// Claim `data` in `default` with the ReadWriteOncePod access mode, bound to volume
/// `pv-data` (in a zone the unlabelled test nodes do not care about), delivered to `h`.
fn add_rwop_claim(h: &Harness) {
    use crate::source::{Change, ObjectEvent};
    let mut c = (*pvc("default", "data", "pv-data")).clone();
    if let Some(spec) = c.spec.as_mut() {
        spec.access_modes = Some(vec!["ReadWriteOncePod".into()]);
    }
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolume(Change::Added(pv(
            "pv-data", "a",
        ))));
    h.cluster
        .deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(Arc::new(
            c,
        ))));
}

const RWOP_CONFLICT: &str = "0/1 nodes are available: 1 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod.";

#[tokio::test]
async fn a_second_read_write_once_pod_user_waits_until_the_first_is_deleted_not_for_other_deletes()
{
    let mut h = harness("rwop", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    add_rwop_claim(&h);
    h.cluster.apply_pod(make_pod("bystander").node("n1").obj());
    h.cluster
        .apply_pod(make_pod("first").req(&[("cpu", "100m")]).pvc("data").obj());
    let first = h.drain().await;
    h.cluster
        .apply_pod(make_pod("second").req(&[("cpu", "100m")]).pvc("data").obj());
    let second = h.drain().await;
    let pending = h.queue_of("second");

    // Another pod's delete frees nothing the pod needs.
    h.cluster.remove_pod("default", "bystander");
    let after_bystander = h.queue_of("second");

    h.cluster.remove_pod("default", "first");
    let after_first = h.queue_of("second");
    h.clock.advance(Duration::from_secs(1));
    h.sched.flush();
    assert_eq!(
        (
            first,
            second,
            pending,
            after_bystander,
            after_first,
            h.drain().await
        ),
        (
            vec![("first".to_string(), "assumed n1".to_string())],
            vec![(
                "second".to_string(),
                format!("unschedulable: {RWOP_CONFLICT} preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
            )],
            Some(QueueName::Unschedulable),
            Some(QueueName::Unschedulable),
            Some(QueueName::Backoff),
            vec![("second".to_string(), "assumed n1".to_string())],
        )
    );
}

/// Upstream's ReadWriteOncePod preemption: the lower-priority user of the claim, on the
/// other node, is evicted and the preemptor placed where it ran; a pod of the same
/// priority cannot preempt it.
#[rstest]
#[case::higher_priority_preempts_the_user(
    100,
    vec![
        "unschedulable: 0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod.",
        "assumed n2"
    ],
    vec!["user"],
)]
#[case::same_priority_does_not_preempt(
    0,
    vec!["unschedulable: 0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."],
    vec![],
)]
#[tokio::test]
async fn a_read_write_once_pod_claim_is_taken_by_preemption(
    #[case] priority: i32,
    #[case] want_outcomes: Vec<&str>,
    #[case] want_deleted: Vec<&str>,
) {
    let mut h = harness("rwop-preempt", "permit: allow", &["default-scheduler"]);
    h.cluster.apply_node(node("n1", "4"));
    h.cluster.apply_node(node("n2", "4"));
    add_rwop_claim(&h);
    h.cluster
        .apply_pod(prio_pod("user", 0, "100m", "n2").pvc("data").obj());
    h.cluster
        .apply_pod(prio_pod("high", priority, "100m", "").pvc("data").obj());
    let outcomes = h.drain().await;
    settle().await;
    let deleted: Vec<String> = h
        .cluster
        .writes()
        .deletions
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(
        (outcomes, deleted),
        (
            want_outcomes
                .into_iter()
                .map(|o| ("high".to_string(), o.to_string()))
                .collect::<Vec<_>>(),
            want_deleted
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
    );
}

//! The scheduler: the scheduling queue and the cache fed by the event handlers, the
//! scheduling loop that takes one pod at a time through a cycle, and binding tasks that
//! finish each placement off the loop.
//!
//! Upstream: pkg/scheduler/scheduler.go (Scheduler, Run), schedule_one.go (ScheduleOne,
//! schedulingCycle, bindingCycle, handleSchedulingFailure, handleBindingCycleError) and
//! eventhandlers.go.
//!
//! How a pod goes through:
//! 1. an event handler adds it to the queue ([`crate::backend::queue`]);
//! 2. the loop pops it, picks its profile by `schedulerName`, brings its snapshot up to
//!    date from the cache (only changed NodeInfos are copied), and runs the scheduling cycle
//!    ([`crate::schedule_one::ScheduleAlgorithm`]);
//! 3. on a node: the pod is *assumed* in the cache (so the next cycle counts it), Reserve and
//!    Permit run, and a binding task is spawned: it waits on Permit if a plugin asked it to,
//!    then runs PreBind, Bind, PostBind;
//! 4. on any failure after assume: Unreserve, forget the assumed pod, and hand the pod back
//!    to the queue (backoff), write `PodScheduled=False` and a `FailedScheduling` event.
//!
//! **Invariants.**
//! - The cache and the queue are behind one lock ([`State`]); event handlers and the loop hold
//!   it only for map operations, never across a cycle or an `await`.
//! - The scheduling cycle reads only the loop's own [`Snapshot`]; it never sees the cache.
//! - The loop never waits on the network: binds, status patches and events are tasks on the
//!   tokio runtime given to [`Scheduler::new`].
//! - Pods are `Arc`-shared between the informer, the queue, the cache and the snapshot; the
//!   one copy per placement is the assumed pod (with `spec.nodeName` set), as upstream.

mod binding;
mod event_handlers;

pub use event_handlers::node_scheduling_properties_change;
#[cfg(test)]
mod extender_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use framework::{
    ClusterClient, CycleState, EventType, NominatingMode, Nomination, PodCondition, PodEvent,
    PodInfo, PodRef, PodStatusUpdate, PostFilterResult, PreemptingPods, QueuedPodInfo, Snapshot,
    Status, WaitingPod, WaitingPods, Workloads,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::backend::cache::Cache;
use crate::backend::queue::{pod_key, AttemptFailure, PendingCounts, PriorityQueue, QueueConfig};
use crate::clock::Clock;
use crate::extender::HttpExtender;
use crate::metrics::{AttemptResult, MetricsRecorder, PendingPods};
use crate::runtime::Framework;
use crate::schedule_one::{Explanation, FitError, ScheduleAlgorithm, ScheduleError};
use crate::source::EventHandler;

/// How often pods left in unschedulablePods are checked for their timeout.
/// Upstream: the 30 s ticker of flushUnschedulablePodsLeftover.
pub const UNSCHEDULABLE_FLUSH_PERIOD: Duration = Duration::from_secs(30);

/// How often expired assumed pods are cleaned up. Upstream: cleanAssumedPeriod (1 s).
pub const CLEANUP_ASSUMED_PERIOD: Duration = Duration::from_secs(1);

/// The longest the loop sleeps when it has nothing to do, so that timed work (backoff,
/// flushes) happens even when no event wakes it.
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// The share of scheduling cycles, in percent, whose plugin calls are timed. Upstream:
/// pluginMetricsSamplePercent.
pub const PLUGIN_METRICS_SAMPLE_PERCENT: u8 = 10;

/// Upstream truncates event messages to this many bytes (events API limit).
pub const MAX_EVENT_MESSAGE_BYTES: usize = 1024;

/// Settings of a scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    pub queue: QueueConfig,
    /// How long an assumed pod whose binding finished may wait for its add event (zero:
    /// forever, upstream's default).
    pub assumed_pod_ttl: Duration,
    /// Seed of the tie-breaking RNG and of the plugin metrics sampler.
    pub seed: u64,
    /// The configuration's global `percentageOfNodesToScore`.
    pub percentage_of_nodes_to_score: Option<i32>,
    /// The share of cycles, in percent (0 to 100), whose plugin calls are timed.
    pub plugin_metrics_sample_percent: u8,
    /// The configuration's extenders, called from the loop on the scheduler's runtime.
    pub extenders: Arc<[HttpExtender]>,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            queue: QueueConfig::default(),
            assumed_pod_ttl: Duration::ZERO,
            seed: 0,
            percentage_of_nodes_to_score: None,
            plugin_metrics_sample_percent: PLUGIN_METRICS_SAMPLE_PERCENT,
            extenders: Arc::from(Vec::new()),
        }
    }
}

/// What the scheduler knows about the cluster, under one lock.
struct State {
    cache: Cache,
    queue: PriorityQueue,
    /// Namespace labels, and a counter bumped on every change so the loop copies them into
    /// its snapshot only when they changed.
    namespaces: HashMap<String, BTreeMap<String, String>>,
    namespaces_version: u64,
    workloads: Arc<Workloads>,
    /// For preemption: disruption budgets by `namespace/name`, priority classes by name.
    pdbs: HashMap<String, Arc<PodDisruptionBudget>>,
    /// `pdbs` by key, as the snapshot hands them to PostFilter plugins.
    pdb_list: Arc<Vec<Arc<PodDisruptionBudget>>>,
    priority_classes: HashMap<String, Arc<PriorityClass>>,
    last_unschedulable_flush: Instant,
    last_assumed_cleanup: Instant,
}

/// Tasks in flight (binding cycles and API writes), so that callers can wait until all are
/// done.
#[derive(Default)]
struct Tasks {
    in_flight: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Tasks {
    fn started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    fn finished(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

struct Shared {
    profiles: HashMap<String, Arc<Framework>>,
    state: Mutex<State>,
    /// Signalled when a pod may have entered activeQ, and on stop.
    wake: Condvar,
    waiting_pods: WaitingPods,
    /// Preemptors whose victims are being deleted (DefaultPreemption gates them).
    preempting_pods: PreemptingPods,
    client: Arc<dyn ClusterClient>,
    metrics: Arc<dyn MetricsRecorder>,
    clock: Arc<dyn Clock>,
    runtime: tokio::runtime::Handle,
    options: SchedulerOptions,
    synced: tokio::sync::watch::Sender<bool>,
    stopping: AtomicBool,
    tasks: Tasks,
}

/// A scheduler. Cloning shares it.
#[derive(Clone)]
pub struct Scheduler {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("profiles", &self.shared.profiles.keys().collect::<Vec<_>>())
            .field("pending", &self.pending_pods())
            .finish_non_exhaustive()
    }
}

/// What one turn of the loop did with a pod.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub pod: Arc<PodInfo>,
    /// The profile (`schedulerName`) that scheduled it.
    pub profile: String,
    pub outcome: AttemptOutcome,
}

/// The outcome of a scheduling cycle. A pod that is `Assumed` may still fail in its binding
/// cycle (Permit rejection, bind error): that failure is reported like the others, on the
/// pod and in metrics, and the pod is requeued.
#[derive(Debug, Clone)]
pub enum AttemptOutcome {
    /// A node was chosen and the binding task started.
    Assumed { node: String },
    /// No node fits (FitError), or a Reserve/Permit plugin rejected the pod.
    Unschedulable {
        message: String,
        fit: Option<Box<FitError>>,
    },
    /// Something went wrong: the pod is retried after a backoff.
    Error { message: String },
    /// Not scheduled at all: no profile for its `schedulerName`, or being deleted.
    Skipped { reason: String },
}

impl Scheduler {
    /// A scheduler for `frameworks` (one per profile; every one built with the same
    /// [`framework::Handle`], whose waiting-pods map the scheduler shares). Binding tasks and
    /// API writes run on `runtime`.
    pub fn new(
        frameworks: Vec<Framework>,
        metrics: Arc<dyn MetricsRecorder>,
        clock: Arc<dyn Clock>,
        runtime: tokio::runtime::Handle,
        options: SchedulerOptions,
    ) -> Scheduler {
        let frameworks: Vec<Arc<Framework>> = frameworks
            .into_iter()
            .map(|mut f| {
                f.set_metrics(metrics.clone());
                Arc::new(f)
            })
            .collect();
        let (client, waiting_pods, preempting_pods) = match frameworks.first() {
            Some(f) => (
                f.handle().client.clone(),
                f.handle().waiting_pods.clone(),
                f.handle().preempting_pods.clone(),
            ),
            None => (
                Arc::new(framework::handle::NoopClient) as Arc<dyn ClusterClient>,
                WaitingPods::default(),
                PreemptingPods::default(),
            ),
        };
        let mut queue = PriorityQueue::new(frameworks.clone(), clock.clone(), options.queue);
        queue.set_metrics(metrics.clone());
        let now = clock.now();
        let state = State {
            cache: Cache::new(options.assumed_pod_ttl, clock.clone()),
            queue,
            namespaces: HashMap::new(),
            namespaces_version: 0,
            workloads: Arc::new(Workloads::default()),
            pdbs: HashMap::new(),
            pdb_list: Arc::new(Vec::new()),
            priority_classes: HashMap::new(),
            last_unschedulable_flush: now,
            last_assumed_cleanup: now,
        };
        let profiles = frameworks
            .into_iter()
            .map(|f| (f.profile_name().to_string(), f))
            .collect();
        Scheduler {
            shared: Arc::new(Shared {
                profiles,
                state: Mutex::new(state),
                wake: Condvar::new(),
                waiting_pods,
                preempting_pods,
                client,
                metrics,
                clock,
                runtime,
                options,
                synced: tokio::sync::watch::Sender::new(false),
                stopping: AtomicBool::new(false),
                tasks: Tasks::default(),
            }),
        }
    }

    /// The handler to give an event source.
    pub fn event_handler(&self) -> Arc<dyn EventHandler> {
        self.shared.clone()
    }

    /// A handler that does not keep the scheduler alive (for in-memory clusters the
    /// scheduler itself holds).
    pub fn weak_event_handler(&self) -> Weak<dyn EventHandler> {
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        weak
    }

    /// Pods waiting at Permit.
    pub fn waiting_pods(&self) -> &WaitingPods {
        &self.shared.waiting_pods
    }

    /// Whether the event source delivered its initial lists.
    pub fn is_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }

    /// Resolves once the event source delivered its initial lists.
    pub async fn wait_synced(&self) {
        let mut rx = self.shared.synced.subscribe();
        // The sender lives in `shared`, which `self` keeps alive: the channel stays open.
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// Sizes of the queue's sub-queues.
    pub fn pending_pods(&self) -> PendingCounts {
        self.shared.state().queue.pending_pods()
    }

    /// `(nodes, pods, assumed pods)` in the cache.
    pub fn cache_counts(&self) -> (usize, usize, usize) {
        let st = self.shared.state();
        (
            st.cache.node_count(),
            st.cache.pod_count(),
            st.cache.assumed_pod_count(),
        )
    }

    /// Runs the timed work of the queue and cache now: pods whose backoff ended move to
    /// activeQ; pods unschedulable for too long are retried (every
    /// [`UNSCHEDULABLE_FLUSH_PERIOD`]); expired assumed pods are dropped.
    pub fn flush(&self) {
        let mut st = self.shared.state();
        self.shared.flush_locked(&mut st);
    }

    /// The loop, to run on a thread of its own ([`SchedulingLoop::run`]) or step by step.
    /// Each loop has its own snapshot and algorithm state: run one at a time.
    pub fn scheduling_loop(&self) -> SchedulingLoop {
        let mut algorithm = ScheduleAlgorithm::new(
            self.shared.options.seed,
            self.shared.options.percentage_of_nodes_to_score,
        );
        if !self.shared.options.extenders.is_empty() {
            algorithm.set_extenders(
                self.shared.options.extenders.clone(),
                self.shared.runtime.clone(),
            );
        }
        SchedulingLoop {
            shared: self.shared.clone(),
            snapshot: Snapshot::default(),
            algorithm,
            // An RNG of its own, so that sampling does not shift the tie-breaks.
            sampler: SmallRng::seed_from_u64(self.shared.options.seed),
            namespaces_version: u64::MAX,
        }
    }

    /// Starts the loop on a thread of its own; it stops after [`Scheduler::stop`].
    pub fn start(&self) -> std::io::Result<std::thread::JoinHandle<()>> {
        let lp = self.scheduling_loop();
        std::thread::Builder::new()
            .name("scheduling-loop".into())
            .spawn(move || lp.run())
    }

    /// Asks the loop to stop after the pod it is scheduling (waiting pods and bindings in
    /// flight finish on their own).
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        let _guard = self.shared.state();
        self.shared.wake.notify_all();
    }

    /// Waits until no binding cycle and no API write is in flight.
    pub async fn wait_for_bindings(&self) {
        loop {
            let notified = self.shared.tasks.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.shared.tasks.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Binding cycles and API writes in flight now.
    pub fn tasks_in_flight(&self) -> usize {
        self.shared.tasks.in_flight.load(Ordering::Acquire)
    }

    /// Runs `f` on the cache and queue (tests and debugging).
    #[cfg(test)]
    fn with_state<R>(&self, f: impl FnOnce(&mut Cache, &mut PriorityQueue) -> R) -> R {
        let mut st = self.shared.state();
        let st = &mut *st;
        f(&mut st.cache, &mut st.queue)
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug in our own code; the maps are
        // still consistent between operations, so keep going rather than poison forever.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn flush_locked(&self, st: &mut State) {
        let now = self.clock.now();
        st.queue.flush_backoff_completed();
        if now.saturating_duration_since(st.last_unschedulable_flush) >= UNSCHEDULABLE_FLUSH_PERIOD
        {
            st.last_unschedulable_flush = now;
            st.queue.flush_unschedulable_pods_leftover();
        }
        // Once a second: expire assumed pods and refresh the gauges (both walk every pod).
        if now.saturating_duration_since(st.last_assumed_cleanup) < CLEANUP_ASSUMED_PERIOD {
            return;
        }
        st.last_assumed_cleanup = now;
        for pod in st.cache.cleanup_assumed_pods() {
            tracing::warn!(pod = %pod.key, "assumed pod expired before its add event");
        }
        let p = st.queue.pending_pods();
        self.metrics.set_pending_pods(PendingPods {
            active: p.active,
            backoff: p.backoff,
            unschedulable: p.unschedulable,
            gated: p.gated,
        });
        self.metrics.set_cache_size(
            st.cache.node_count(),
            st.cache.pod_count(),
            st.cache.assumed_pod_count(),
        );
    }

    /// Wakes the loop: a pod may be in activeQ now.
    fn notify(&self) {
        self.wake.notify_one();
    }

    fn profile_of(&self, pod: &PodInfo) -> Option<&Arc<Framework>> {
        self.profiles.get(scheduler_name(pod))
    }

    /// Writes the failure to the pod (condition, event) without waiting for the API.
    fn report_failure(
        self: &Arc<Self>,
        fwk: &Framework,
        pod: &PodInfo,
        status: &Status,
        message: &str,
        nomination: Nomination,
    ) {
        let reason = if status.is_rejected() {
            "Unschedulable"
        } else {
            "SchedulerError"
        };
        let pod_ref = PodRef::of(&pod.pod);
        let update = PodStatusUpdate {
            pod: pod_ref.clone(),
            condition: Some(PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: reason.into(),
                message: message.to_string(),
            }),
            nomination,
        };
        let event = PodEvent {
            regarding: pod_ref,
            event_type: EventType::Warning,
            reason: "FailedScheduling".into(),
            action: "Scheduling".into(),
            message: truncate_message(message).to_string(),
            reporting_controller: fwk.profile_name().to_string(),
        };
        self.spawn_writes(Some(update), event);
    }

    fn spawn_writes(self: &Arc<Self>, update: Option<PodStatusUpdate>, event: PodEvent) {
        let shared = self.clone();
        let client = self.client.clone();
        shared.tasks.started();
        self.runtime.spawn(async move {
            if let Some(u) = update {
                if let Err(e) = client.update_pod_status(&u).await {
                    tracing::warn!(pod = %format!("{}/{}", u.pod.namespace, u.pod.name), error = %e, "cannot update pod status");
                }
            }
            if let Err(e) = client.record_event(&event).await {
                tracing::debug!(error = %e, reason = %event.reason, "cannot record event");
            }
            shared.tasks.finished();
        });
    }

    /// Hands a pod whose attempt failed back to the queue, and reports the failure.
    /// Upstream: handleSchedulingFailure.
    fn handle_failure(
        self: &Arc<Self>,
        fwk: &Framework,
        qpi: QueuedPodInfo,
        status: &Status,
        message: &str,
        started: Instant,
    ) {
        self.handle_failure_nominated(fwk, qpi, status, message, started, Nomination::Keep);
    }

    /// [`handle_failure`](Self::handle_failure), also recording what PostFilter decided
    /// about the pod's nomination: in the queue's nominator at once (so the next cycles
    /// keep the room for it), and in the status write.
    fn handle_failure_nominated(
        self: &Arc<Self>,
        fwk: &Framework,
        mut qpi: QueuedPodInfo,
        status: &Status,
        message: &str,
        started: Instant,
        nomination: Nomination,
    ) {
        let (result, failure) = if status.is_rejected() {
            (AttemptResult::Unschedulable, AttemptFailure::Rejected)
        } else {
            (AttemptResult::Error, AttemptFailure::Error)
        };
        if failure == AttemptFailure::Rejected && qpi.unschedulable_plugins.is_empty() {
            if let Some(p) = status.plugin() {
                if status.code() == framework::Code::Pending {
                    qpi.pending_plugins.insert(p);
                } else {
                    qpi.unschedulable_plugins.insert(p);
                }
            }
        }
        self.metrics.observe_attempt(
            fwk.profile_name(),
            result,
            self.clock.now().saturating_duration_since(started),
        );
        let pod = qpi.pod_info.clone();
        let deleted = {
            let mut st = self.state();
            let deleted = st.queue.is_deleted_in_flight(&pod_key(&pod.pod));
            if let Err(e) = st.queue.add_unschedulable_if_not_present(qpi, failure) {
                tracing::warn!(pod = %pod.key, error = %e, "cannot requeue pod");
            }
            if !deleted {
                match &nomination {
                    Nomination::Set(node) => st.queue.add_nominated_pod(pod.clone(), Some(node)),
                    Nomination::Clear => st.queue.delete_nominated_pod_if_exists(&pod.pod),
                    Nomination::Keep => {}
                }
            }
            deleted
        };
        self.notify();
        if deleted {
            // Nothing to tell a pod that is gone.
            tracing::debug!(pod = %pod.key, %message, "pod deleted during its attempt");
            return;
        }
        tracing::debug!(pod = %pod.key, %message, "unable to schedule pod; waiting");
        self.report_failure(fwk, &pod, status, message, nomination);
    }

    /// Carries out what PostFilter proposed for `pod` and returns the nomination to record.
    /// With a node: the victims are evicted (a waiting victim is rejected at Permit, the
    /// others deleted, each with a `Preempted` event) and pods of lower priority nominated
    /// to that node lose their nomination; the API writes run on a task, never on the loop
    /// (upstream: prepareCandidate, asynchronous as with SchedulerAsyncPreemption). Victims
    /// already being deleted are left out; when none is left, nothing is written but the
    /// nomination. With an empty node: a nomination the pod had is cleared.
    fn preempt(
        self: &Arc<Self>,
        fwk: &Framework,
        pod: &PodInfo,
        result: Option<&PostFilterResult>,
    ) -> Nomination {
        let Some(r) = result.filter(|r| r.mode == NominatingMode::Override) else {
            return Nomination::Keep;
        };
        if r.nominated_node_name.is_empty() {
            let in_status = pod
                .pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            let in_queue = self.state().queue.nominated_node(&pod.pod).is_some();
            return if in_status || in_queue {
                Nomination::Clear
            } else {
                Nomination::Keep
            };
        }
        let node = r.nominated_node_name.clone();
        let preemptor_uid = pod.pod.metadata.uid.clone().unwrap_or_default();
        let mut deletions: Vec<PodRef> = Vec::new();
        let mut events: Vec<PodEvent> = Vec::new();
        // A victim whose eviction already started (by an earlier preemptor whose room the
        // nominator keeps) is not evicted again: no second delete and no second `Preempted`
        // event naming this preemptor. The scheduler's own deletions count as started
        // before the cache shows their deletionTimestamp. Upstream: prepareCandidateAsync
        // skips victims with a deletionTimestamp.
        let evicting: Vec<&Arc<PodInfo>> = r
            .victims
            .iter()
            .filter(|v| {
                v.pod.metadata.deletion_timestamp.is_none()
                    && !self.preempting_pods.is_victim(&v.key)
            })
            .collect();
        if evicting.is_empty() {
            // Nothing to wait for but the deletions under way: the preemptor keeps its
            // nomination and is retried when pods leave the node, as upstream.
            tracing::debug!(pod = %pod.key, %node, "victims are already being evicted");
            return Nomination::Set(node);
        }
        // Victims to be deleted, as `PreemptingPods` keys them; a victim waiting at Permit is
        // rejected instead and is not terminating.
        let mut deleting: Vec<&str> = Vec::new();
        for victim in &evicting {
            let victim_ref = PodRef::of(&victim.pod);
            let rejected = self.waiting_pods.reject(
                &pod_key(&victim.pod),
                plugins::names::DEFAULT_PREEMPTION,
                "preempted",
            );
            if !rejected {
                deletions.push(victim_ref.clone());
                deleting.push(victim.key.as_str());
            }
            events.push(PodEvent {
                regarding: victim_ref,
                event_type: EventType::Normal,
                reason: "Preempted".into(),
                action: "Preempting".into(),
                message: format!("Preempted by pod {preemptor_uid} on node {node}"),
                reporting_controller: fwk.profile_name().to_string(),
            });
        }
        // Pods of lower priority nominated to the node may not fit there any more.
        let cleared: Vec<PodRef> = {
            let mut st = self.state();
            let lower: Vec<Arc<PodInfo>> = st
                .queue
                .nominated_pods_for_node(&node)
                .into_iter()
                .filter(|p| p.priority() < pod.priority())
                .collect();
            for p in &lower {
                st.queue.delete_nominated_pod_if_exists(&p.pod);
            }
            lower.iter().map(|p| PodRef::of(&p.pod)).collect()
        };
        tracing::debug!(pod = %pod.key, %node, victims = events.len(), "preempting");
        self.preempting_pods.add_victims(deleting);
        let preemptor = pod_key(&pod.pod);
        let preemptor_name = pod.key.clone();
        self.preempting_pods.start(&preemptor_name);
        let shared = self.clone();
        let client = self.client.clone();
        let profile = fwk.profile_name().to_string();
        let preempting = self.preempting_pods.clone();
        self.tasks.started();
        self.runtime.spawn(async move {
            // Victims are deleted in parallel, as upstream does.
            let mut deleting = tokio::task::JoinSet::new();
            for victim in deletions {
                let client = client.clone();
                let preempting = preempting.clone();
                let disruption = PodStatusUpdate {
                    pod: victim.clone(),
                    condition: Some(PodCondition {
                        type_: "DisruptionTarget".into(),
                        status: "True".into(),
                        reason: "PreemptionByScheduler".into(),
                        message: format!(
                            "{profile}: preempting to accommodate a higher priority pod"
                        ),
                    }),
                    nomination: Nomination::Keep,
                };
                deleting.spawn(async move {
                    let key = format!("{}/{}", victim.namespace, victim.name);
                    // The condition is written, and answered, before the deletion is sent:
                    // the victim's controllers and disruption budgets see why it goes. As
                    // upstream, a victim already gone is left alone, and one that could not
                    // be marked is not deleted.
                    match client.update_pod_status_now(&disruption).await {
                        Ok(()) => {}
                        Err(e) => {
                            preempting.victim_gone(&key);
                            if !matches!(e, framework::ClientError::Api { code: 404, .. }) {
                                tracing::warn!(pod = %key, error = %e, "cannot mark preemption victim; not deleting it");
                            }
                            return Some(victim);
                        }
                    }
                    match client.delete_pod(&victim).await {
                        Ok(()) => None,
                        Err(e) => {
                            preempting.victim_gone(&key);
                            tracing::debug!(pod = %key, error = %e, "cannot delete preemption victim");
                            Some(victim)
                        }
                    }
                });
            }
            let mut not_preempted: Vec<PodRef> = Vec::new();
            while let Some(done) = deleting.join_next().await {
                if let Ok(Some(victim)) = done {
                    not_preempted.push(victim);
                }
            }
            // As upstream, only a victim actually preempted (deleted, or rejected while
            // waiting at Permit) gets the Preempted event.
            for event in events.iter().filter(|e| !not_preempted.contains(&e.regarding)) {
                if let Err(e) = client.record_event(event).await {
                    tracing::debug!(error = %e, reason = %event.reason, "cannot record event");
                }
            }
            for p in cleared {
                let update = PodStatusUpdate {
                    pod: p,
                    condition: None,
                    nomination: Nomination::Clear,
                };
                if let Err(e) = client.update_pod_status(&update).await {
                    tracing::debug!(error = %e, "cannot clear a nomination");
                }
            }
            // The victims are gone: the preemptor need not wait out its backoff (upstream
            // activates it when an asynchronous preemption ends).
            shared.preempting_pods.finish(&preemptor_name);
            let activated = shared.state().queue.activate(&preemptor);
            if activated {
                shared.notify();
            }
            shared.tasks.finished();
        });
        Nomination::Set(node)
    }
}

/// The scheduling loop: owns the snapshot and the algorithm (round-robin start, RNG).
pub struct SchedulingLoop {
    shared: Arc<Shared>,
    snapshot: Snapshot,
    algorithm: ScheduleAlgorithm,
    /// Picks the cycles whose plugin calls are timed.
    sampler: SmallRng,
    namespaces_version: u64,
}

impl std::fmt::Debug for SchedulingLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulingLoop")
            .field("nodes", &self.snapshot.num_nodes())
            .finish_non_exhaustive()
    }
}

impl SchedulingLoop {
    /// The snapshot of the last cycle.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Runs until [`Scheduler::stop`], sleeping while activeQ is empty.
    pub fn run(mut self) {
        while let Some(qpi) = self.pop_blocking() {
            self.schedule_pod(qpi, None);
        }
    }

    fn pop_blocking(&self) -> Option<QueuedPodInfo> {
        let shared = &self.shared;
        let mut st = shared.state();
        loop {
            if shared.stopping.load(Ordering::Acquire) {
                return None;
            }
            shared.flush_locked(&mut st);
            if let Some(q) = st.queue.pop() {
                return Some(q);
            }
            let now = shared.clock.now();
            let wait = st
                .queue
                .next_backoff_expiry()
                .map_or(IDLE_WAKE, |t| t.saturating_duration_since(now))
                .clamp(Duration::from_millis(1), IDLE_WAKE);
            st = shared
                .wake
                .wait_timeout(st, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Takes the next pod from activeQ (without waiting) and runs its scheduling cycle;
    /// `None` when activeQ is empty. With `explain`, every plugin's verdict is recorded.
    pub fn schedule_one(&mut self, explain: Option<&mut Explanation>) -> Option<Attempt> {
        let qpi = {
            let mut st = self.shared.state();
            st.queue.pop()?
        };
        Some(self.schedule_pod(qpi, explain))
    }

    /// One scheduling cycle of a popped pod. Upstream: ScheduleOne + schedulingCycle.
    fn schedule_pod(&mut self, qpi: QueuedPodInfo, explain: Option<&mut Explanation>) -> Attempt {
        let shared = self.shared.clone();
        let pod = qpi.pod_info.clone();
        let key = pod_key(&pod.pod);
        let Some(fwk) = shared.profile_of(&pod).cloned() else {
            shared.state().queue.done(&key);
            let reason = format!(
                "schedulerName {:?} is not a profile of this scheduler",
                scheduler_name(&pod)
            );
            tracing::error!(pod = %pod.key, %reason, "skipping pod");
            return attempt(
                pod,
                scheduler_name_owned(&qpi),
                AttemptOutcome::Skipped { reason },
            );
        };
        let profile = fwk.profile_name().to_string();
        if pod.pod.metadata.deletion_timestamp.is_some() {
            shared.state().queue.done(&key);
            let reason = "pod is being deleted".to_string();
            return attempt(pod, profile, AttemptOutcome::Skipped { reason });
        }
        let started = shared.clock.now();
        self.refresh_snapshot();
        let mut state = CycleState::new();
        state.set_record_plugin_metrics(
            self.sampler.random_range(0..100u8) < shared.options.plugin_metrics_sample_percent,
        );
        let result = self
            .algorithm
            .schedule_pod(&fwk, &mut state, &pod, &self.snapshot, explain);
        let host = match result {
            Ok(r) => r.suggested_host,
            Err(ScheduleError::Fit(fit)) => {
                let message = fit.to_string();
                let mut qpi = qpi;
                qpi.unschedulable_plugins = fit.diagnosis.unschedulable_plugins.clone();
                qpi.pending_plugins = fit.diagnosis.pending_plugins.clone();
                let result = fit.diagnosis.post_filter_result.as_ref();
                if fwk.has_post_filter_plugins() {
                    let victims = result.map_or(0, |r| r.victims.len());
                    shared.metrics.observe_preemption(victims);
                }
                let nomination = shared.preempt(&fwk, &pod, result);
                let status = Status::unschedulable(message.clone());
                shared.handle_failure_nominated(&fwk, qpi, &status, &message, started, nomination);
                return attempt(
                    pod,
                    profile,
                    AttemptOutcome::Unschedulable {
                        message,
                        fit: Some(fit),
                    },
                );
            }
            Err(ScheduleError::Internal(status)) => {
                let message = status.message();
                shared.handle_failure(&fwk, qpi, &status, &message, started);
                return attempt(pod, profile, AttemptOutcome::Error { message });
            }
        };
        self.assume_and_bind(fwk, state, qpi, host, started)
    }

    /// Brings the snapshot up to date with the cache (changed NodeInfos only) and the
    /// namespace and workload listers.
    fn refresh_snapshot(&mut self) {
        let mut st = self.shared.state();
        st.cache.update_snapshot(&mut self.snapshot);
        if st.namespaces_version != self.namespaces_version {
            self.snapshot.set_namespace_labels(st.namespaces.clone());
            self.namespaces_version = st.namespaces_version;
        }
        self.snapshot.set_workloads(st.workloads.clone());
        self.snapshot.set_pdbs(st.pdb_list.clone());
        self.algorithm.set_nominated_pods(st.queue.nominated_pods());
    }

    /// Assume, Reserve, Permit, then the binding task. Upstream: the tail of
    /// schedulingCycle and the start of bindingCycle.
    fn assume_and_bind(
        &mut self,
        fwk: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        host: String,
        started: Instant,
    ) -> Attempt {
        let shared = self.shared.clone();
        let pod = qpi.pod_info.clone();
        let profile = fwk.profile_name().to_string();
        let assumed = Arc::new(pod.with_node(&host));
        if let Err(e) = shared.state().cache.assume_pod(assumed.clone()) {
            // The cache refused: a bug or a race with the informer; retry later.
            let message = format!("assuming pod on node {host}: {e}");
            shared.handle_failure(
                &fwk,
                qpi,
                &Status::error(message.clone()),
                &message,
                started,
            );
            return attempt(pod, profile, AttemptOutcome::Error { message });
        }
        let s = fwk.run_reserve_plugins(&mut state, &assumed, &host);
        if !s.is_success() {
            fwk.run_unreserve_plugins(&mut state, &assumed, &host);
            return self.fail_after_assume(&fwk, qpi, &assumed, s, started);
        }
        let (s, waiting) = fwk.run_permit_plugins(&mut state, &assumed, &host);
        let verdict = if s.is_wait() {
            let (wp, rx) = WaitingPod::new(assumed.clone(), host.clone(), waiting);
            shared.waiting_pods.add(pod_key(&assumed.pod), wp.clone());
            Some((wp, rx))
        } else if !s.is_success() {
            fwk.run_unreserve_plugins(&mut state, &assumed, &host);
            return self.fail_after_assume(&fwk, qpi, &assumed, s, started);
        } else {
            None
        };
        {
            let mut st = shared.state();
            st.queue.delete_nominated_pod_if_exists(&pod.pod);
        }
        shared.tasks.started();
        let task = binding::BindingTask {
            shared: shared.clone(),
            fwk,
            state,
            qpi,
            assumed,
            node: host.clone(),
            started,
            permit: verdict,
        };
        shared.runtime.spawn(task.run());
        attempt(pod, profile, AttemptOutcome::Assumed { node: host })
    }

    /// Reserve or Permit failed: forget the assumed pod and requeue.
    fn fail_after_assume(
        &self,
        fwk: &Framework,
        qpi: QueuedPodInfo,
        assumed: &Arc<PodInfo>,
        status: Status,
        started: Instant,
    ) -> Attempt {
        let shared = &self.shared;
        forget(shared, assumed);
        let message = status.message();
        let pod = qpi.pod_info.clone();
        let outcome = if status.is_rejected() {
            AttemptOutcome::Unschedulable {
                message: message.clone(),
                fit: None,
            }
        } else {
            AttemptOutcome::Error {
                message: message.clone(),
            }
        };
        shared.handle_failure(fwk, qpi, &status, &message, started);
        attempt(pod, fwk.profile_name().to_string(), outcome)
    }
}

/// Drops an assumed pod from the cache; `true` when it was there.
fn forget(shared: &Shared, assumed: &PodInfo) -> bool {
    let uid = pod_key(&assumed.pod);
    match shared.state().cache.forget_pod(&uid) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(pod = %assumed.key, error = %e, "forgetting assumed pod");
            false
        }
    }
}

/// The forgotten pod's resources are free again: as if an assigned pod had been deleted,
/// pods it kept out may try again (all but the pod itself).
fn released(shared: &Shared, assumed: &PodInfo, except_itself: bool) {
    let key = pod_key(&assumed.pod);
    let obj = framework::EventObject::Pod(assumed.pod.clone());
    shared.state().queue.move_all_to_active_or_backoff_except(
        framework::ClusterEvent::new(
            framework::EventResource::AssignedPod,
            framework::ActionType::DELETE,
        ),
        Some(&obj),
        None,
        except_itself.then_some(key.as_str()),
    );
    shared.notify();
}

fn attempt(pod: Arc<PodInfo>, profile: String, outcome: AttemptOutcome) -> Attempt {
    Attempt {
        pod,
        profile,
        outcome,
    }
}

/// The pod's `schedulerName` (`default-scheduler` when unset, as the API server defaults).
pub fn scheduler_name(pod: &PodInfo) -> &str {
    crate::backend::queue::scheduler_name(&pod.pod)
}

fn scheduler_name_owned(qpi: &QueuedPodInfo) -> String {
    scheduler_name(&qpi.pod_info).to_string()
}

/// An event message as upstream shortens it: at most [`MAX_EVENT_MESSAGE_BYTES`] bytes,
/// ending in ` ...` when cut (on a character boundary). Upstream: truncateMessage.
pub fn truncate_message(message: &str) -> std::borrow::Cow<'_, str> {
    const SUFFIX: &str = " ...";
    if message.len() <= MAX_EVENT_MESSAGE_BYTES {
        return message.into();
    }
    let mut end = MAX_EVENT_MESSAGE_BYTES - SUFFIX.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{SUFFIX}", &message[..end]).into()
}

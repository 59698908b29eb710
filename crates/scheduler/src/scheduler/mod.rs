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
//!    Permit run, and a binding task is spawned (the loop's thread spawns a few
//!    consecutive pods' tasks together, `handoff.rs`): it waits on Permit if a plugin asked
//!    it to, then runs PreBind, Bind, PostBind;
//! 4. on any failure after assume: Unreserve, forget the assumed pod, and hand the pod back
//!    to the queue (backoff), write `PodScheduled=False` and a `FailedScheduling` event.
//!
//! Where each job lives: this file holds the shared state (cache and queue under one lock)
//! and the public API; `schedule_one.rs` the loop (upstream's ScheduleOne);
//! `binding.rs` the binding task; `failure.rs` failure reporting; `preemption.rs` carrying
//! out a preemption; `event_handlers.rs` informer events into the cache and the queue.
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
mod failure;
mod handoff;
mod preemption;
mod schedule_one;

pub use event_handlers::node_scheduling_properties_change;
pub use schedule_one::SchedulingLoop;
#[cfg(test)]
mod extender_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use framework::{
    BindingPods, ClusterClient, PodInfo, PreemptingPods, StorageListers, WaitingPods, Workloads,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;

use crate::backend::cache::Cache;
use crate::backend::queue::{PendingCounts, PriorityQueue, QueueConfig};
use crate::builder::Services;
use crate::clock::Clock;
use crate::decisions::Decisions;
use crate::extender::HttpExtender;
use crate::metrics::{MetricsRecorder, PendingPods};
use crate::runtime::Framework;
use crate::schedule_one::FitError;
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
    /// Where the loop records each attempt, explained; `None`: cycles run unexplained.
    pub decisions: Option<Decisions>,
    /// Consecutive pods with the same signature reuse the previous cycle's work
    /// (`OpportunisticBatching`, on by default as upstream).
    pub opportunistic_batching: bool,
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
            decisions: None,
            opportunistic_batching: true,
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
    /// Pods whose binding cycle waits on controllers (VolumeBinding's PreBind).
    binding_pods: BindingPods,
    client: Arc<dyn ClusterClient>,
    /// Volumes, claims, classes and CSI objects, as the snapshot hands them to volume
    /// plugins; binding cycles (VolumeBinding's PreBind) watch it. The one copy: changed in
    /// place.
    storage: Arc<tokio::sync::watch::Sender<Arc<StorageListers>>>,
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
    /// A scheduler for `frameworks` (one per profile, each built with a handle from
    /// `services`). Binding tasks and API writes run on `runtime`.
    /// [`crate::builder::SchedulerBuilder`] is the one caller.
    pub(crate) fn new(
        frameworks: Vec<Framework>,
        services: Services,
        runtime: tokio::runtime::Handle,
        options: SchedulerOptions,
    ) -> Scheduler {
        let Services {
            client,
            waiting_pods,
            preempting_pods,
            binding_pods,
            parallelizer: _,
            metrics,
            clock,
            storage,
            storage_controllers: _,
        } = services;
        let frameworks: Vec<Arc<Framework>> = frameworks.into_iter().map(Arc::new).collect();
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
                binding_pods,
                client,
                storage,
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

    /// The profiles' names (their `schedulerName`s).
    pub fn profile_names(&self) -> Vec<String> {
        self.shared.profiles.keys().cloned().collect()
    }

    /// The profile that schedules pods with `scheduler_name`.
    pub fn profile(&self, scheduler_name: &str) -> Option<&Arc<Framework>> {
        self.shared.profiles.get(scheduler_name)
    }

    /// The configuration's extenders, in order.
    pub fn extenders(&self) -> &[HttpExtender] {
        &self.shared.options.extenders
    }

    /// The decision log the loop records attempts in, when it has one.
    pub fn decisions(&self) -> Option<&Decisions> {
        self.shared.options.decisions.as_ref()
    }

    /// Each node the cache holds, with what its pods request, sorted by name.
    pub fn node_usage(&self) -> Vec<crate::backend::cache::NodeUsage> {
        self.shared.state().cache.node_usage()
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
        SchedulingLoop::new(self.shared.clone())
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
}

/// The pod's `schedulerName` (`default-scheduler` when unset, as the API server defaults).
pub fn scheduler_name(pod: &PodInfo) -> &str {
    crate::backend::queue::scheduler_name(&pod.pod)
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

//! The scheduling queue: which pending pod the scheduler tries next, and when a pod it could
//! not place is worth another try.
//!
//! Upstream: pkg/scheduler/backend/queue (scheduling_queue.go PriorityQueue, active_queue.go,
//! backoff_queue.go, nominator.go), with queueing hints always on.
//!
//! A pending pod is in exactly one of:
//! - **activeQ**, a heap in QueueSort order, from which [`PriorityQueue::pop`] takes;
//! - **backoffQ**, a heap by backoff expiry, for pods that failed and must wait
//!   `initial × 2^(n−1)` (capped) after their last failure, `n` counting rejections, or
//!   consecutive errors for pods that failed with an error;
//! - **unschedulablePods**, for pods rejected by plugins: they leave only when a cluster event
//!   one of their rejecting plugins registered arrives and that plugin's queueing hint says
//!   `Queue`, or after `pod_max_in_unschedulable_pods_duration`;
//! - **gated**, for pods a PreEnqueue plugin holds back; the gate is re-checked on events the
//!   gating plugin registered (an update that removes the pod's last scheduling gate).
//!
//! A popped pod is *in flight* until [`PriorityQueue::done`] or
//! [`PriorityQueue::add_unschedulable_if_not_present`]. Events that arrive meanwhile are
//! logged and replayed against the pod if its attempt fails, so no wake-up is lost.
//!
//! The queue is a plain value: the scheduler wraps it in a lock and wakes its loop itself.
//! Nothing here blocks, sleeps or reads the wall clock; time comes from the injected
//! [`Clock`].
//!
//! Where this differs from upstream, on purpose:
//! - pods are keyed by UID (namespace/name without one), upstream's heaps by namespace/name;
//! - an update of a waiting pod that [`is_pod_updated`] finds irrelevant (status,
//!   resourceVersion, …) is not offered to hints at all (upstream, with hints on, offers it
//!   as UpdatePodOther);
//! - a pod deleted while in flight is not brought back by its failed attempt (upstream
//!   relies on the caller checking the informer);
//! - one backoffQ heap holds both rejected and errored pods (upstream keeps two heaps with
//!   the same order); no 1-second backoff windows, and `pop` never takes from backoffQ
//!   when activeQ is empty (upstream's SchedulerPopFromBackoffQ);
//! - AssignedPod events are offered to every waiting pod (upstream first narrows them to
//!   pods with a matching affinity term or a PodTopologySpread rejection; the hints give
//!   the same answer, only slower);
//! - a pod activated while in flight goes to activeQ when its attempt fails, as it would
//!   have had it been waiting (upstream records a ForceActivate event and retries it after
//!   backoff): a preemptor whose victims went before it was handed back is not left
//!   waiting out a backoff.

mod heap;
mod nominator;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framework::events::QueueingHintFn;
use framework::{
    ActionType, ClusterEvent, EventObject, EventResource, PodInfo, PodKey, QueuedPodInfo,
    QueueingHint,
};
use k8s_openapi::api::core::v1::Pod;

use crate::clock::Clock;
use crate::metrics::{MetricsRecorder, NoopRecorder};
use crate::runtime::Framework;
use heap::{Heap, Keyed};
use nominator::Nominator;

/// The `schedulerName` a pod without one gets.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The event under which pods left in unschedulablePods too long are retried.
/// Upstream: framework.EventUnschedulableTimeout (a wildcard event).
pub const EVENT_UNSCHEDULABLE_TIMEOUT: ClusterEvent =
    ClusterEvent::new(EventResource::WildCard, ActionType::ALL);

/// Timings of the queue. Upstream: KubeSchedulerConfiguration podInitialBackoffSeconds,
/// podMaxBackoffSeconds, and the queue's podMaxInUnschedulablePodsDuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    pub pod_initial_backoff: Duration,
    pub pod_max_backoff: Duration,
    pub pod_max_in_unschedulable_pods_duration: Duration,
}

impl Default for QueueConfig {
    /// Upstream's defaults: 1 s, 10 s, 5 min.
    fn default() -> Self {
        QueueConfig {
            pod_initial_backoff: Duration::from_secs(1),
            pod_max_backoff: Duration::from_secs(10),
            pod_max_in_unschedulable_pods_duration: Duration::from_secs(5 * 60),
        }
    }
}

/// How a scheduling attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptFailure {
    /// Plugins rejected the pod: the ones in `unschedulable_plugins` / `pending_plugins`.
    /// With both sets empty it is treated as an error, as upstream does.
    Rejected,
    /// Something went wrong (a plugin `Error`, a failed API call): the plugin sets are
    /// cleared and the pod goes to backoffQ with the consecutive-error backoff.
    Error,
}

/// Why a pod could not be re-added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// The pod is already queued (activeQ, backoffQ, unschedulablePods or gated).
    #[error("pod {0} is already in the scheduling queue")]
    AlreadyQueued(String),
}

/// Pending pods per sub-queue, for the `scheduler_pending_pods` metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingCounts {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
}

/// Which sub-queue a pod is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueName {
    Active,
    Backoff,
    Unschedulable,
    Gated,
    InFlight,
}

/// A queued pod as [`PriorityQueue::list`] shows it.
#[derive(Debug, Clone)]
pub struct ListedPod {
    pub key: PodKey,
    pub queue: QueueName,
    pub attempts: u32,
    pub unschedulable_plugins: BTreeSet<&'static str>,
    pub gating_plugin: Option<&'static str>,
}

/// The pod's `schedulerName` (`default-scheduler` when unset, as the API server defaults).
pub fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_SCHEDULER_NAME)
}

/// Counters that travel with a pod through its attempts (upstream keeps them on
/// QueuedPodInfo as UnschedulableCount and ConsecutiveErrorsCount).
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    unschedulable: u32,
    consecutive_errors: u32,
}

/// A pod held by the queue.
struct Entry {
    key: PodKey,
    qpi: QueuedPodInfo,
    counts: Counts,
}

impl Keyed for Entry {
    fn key(&self) -> &PodKey {
        &self.key
    }
}

/// One event a plugin registered, with its hint.
struct Registration {
    plugin: &'static str,
    event: ClusterEvent,
    hint: Option<QueueingHintFn>,
}

struct Profile {
    framework: Arc<Framework>,
    registrations: Vec<Registration>,
}

/// A pod between `pop` and `done` / `add_unschedulable_if_not_present`.
struct InFlight {
    /// Sequence number of the first logged event this pod must see.
    since: u64,
    counts: Counts,
    /// The newest version of the pod seen while it was in flight.
    latest: Option<Arc<PodInfo>>,
    deleted: bool,
    /// [`PriorityQueue::activate`] asked for it during the attempt.
    activated: bool,
}

struct LoggedEvent {
    seq: u64,
    event: ClusterEvent,
    old: Option<EventObject>,
    new: Option<EventObject>,
}

/// Upstream's queueingStrategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strategy {
    Skip,
    AfterBackoff,
    Immediately,
}

/// Upstream: pkg/scheduler/backend/queue.PriorityQueue.
pub struct PriorityQueue {
    clock: Arc<dyn Clock>,
    config: QueueConfig,
    profiles: HashMap<String, Profile>,
    /// The framework whose QueueSort orders activeQ (the first profile's; all profiles
    /// must share one QueueSort).
    sort: Option<Arc<Framework>>,
    active: Heap<Entry>,
    backoff: Heap<Entry>,
    unschedulable: HashMap<PodKey, Entry>,
    gated: HashMap<PodKey, Entry>,
    in_flight: HashMap<PodKey, InFlight>,
    events: VecDeque<LoggedEvent>,
    next_seq: u64,
    nominator: Nominator,
    metrics: Arc<dyn MetricsRecorder>,
    /// Why pods are moving right now: the `event` label of the incoming-pods metric.
    moving_for: String,
}

impl std::fmt::Debug for PriorityQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PriorityQueue")
            .field("pending", &self.pending_pods())
            .field("in_flight", &self.in_flight.len())
            .field("logged_events", &self.events.len())
            .finish()
    }
}

impl PriorityQueue {
    /// A queue for `profiles` (one framework per `schedulerName`). Each profile's
    /// registered events are read once here; plugins that reject pods but register no
    /// events get every event, as upstream gives them.
    pub fn new(profiles: Vec<Arc<Framework>>, clock: Arc<dyn Clock>, config: QueueConfig) -> Self {
        let sort = profiles.first().cloned();
        let profiles = profiles
            .into_iter()
            .map(|fw| {
                let mut registrations = Vec::new();
                for pl in fw.enqueue_extension_plugins() {
                    match pl.as_enqueue_extensions() {
                        Some(ext) => {
                            for e in ext.events_to_register() {
                                registrations.push(Registration {
                                    plugin: pl.name(),
                                    event: e.event,
                                    hint: e.hint,
                                });
                            }
                        }
                        None => registrations.push(Registration {
                            plugin: pl.name(),
                            event: ClusterEvent::new(EventResource::WildCard, ActionType::ALL),
                            hint: None,
                        }),
                    }
                }
                (
                    fw.profile_name().to_string(),
                    Profile {
                        framework: fw,
                        registrations,
                    },
                )
            })
            .collect();
        PriorityQueue {
            clock,
            config,
            profiles,
            sort,
            active: Heap::default(),
            backoff: Heap::default(),
            unschedulable: HashMap::new(),
            gated: HashMap::new(),
            in_flight: HashMap::new(),
            events: VecDeque::new(),
            next_seq: 0,
            nominator: Nominator::default(),
            metrics: Arc::new(NoopRecorder),
            moving_for: String::new(),
        }
    }

    /// Records `scheduler_queue_incoming_pods_total` through `metrics`.
    pub fn set_metrics(&mut self, metrics: Arc<dyn MetricsRecorder>) {
        self.metrics = metrics;
    }

    fn moving_for(&mut self, why: &str) {
        self.moving_for.clear();
        self.moving_for.push_str(why);
    }

    fn incoming(&self, queue: QueueName) {
        let name = match queue {
            QueueName::Active => "active",
            QueueName::Backoff => "backoff",
            QueueName::Unschedulable => "unschedulable",
            QueueName::Gated => "gated",
            QueueName::InFlight => return,
        };
        self.metrics.inc_queue_incoming_pods(name, &self.moving_for);
    }

    // ---- ordering -------------------------------------------------------------------

    fn backoff_less(config: QueueConfig) -> impl Fn(&Entry, &Entry) -> bool {
        move |a: &Entry, b: &Entry| backoff_expiry(config, a) < backoff_expiry(config, b)
    }

    fn push_active(&mut self, entry: Entry) {
        let sort = self.sort.clone();
        let less = move |a: &Entry, b: &Entry| sort_less(sort.as_deref(), a, b);
        self.active.push(entry, &less);
    }

    fn push_backoff(&mut self, entry: Entry) {
        self.backoff.push(entry, &Self::backoff_less(self.config));
    }

    fn is_backing_off(&self, entry: &Entry) -> bool {
        backoff_expiry(self.config, entry) > self.clock.now()
    }

    // ---- moving pods between sub-queues -----------------------------------------------

    /// Removes the pod from every sub-queue and returns it, if queued.
    fn take(&mut self, key: &str) -> Option<Entry> {
        let sort = self.sort.clone();
        let less = move |a: &Entry, b: &Entry| sort_less(sort.as_deref(), a, b);
        if let Some(e) = self.active.remove(key, &less) {
            return Some(e);
        }
        if let Some(e) = self.backoff.remove(key, &Self::backoff_less(self.config)) {
            return Some(e);
        }
        self.unschedulable
            .remove(key)
            .or_else(|| self.gated.remove(key))
    }

    /// Runs PreEnqueue and puts the pod in activeQ, or in `gated` if a plugin holds it back.
    /// Whether it reached activeQ. Upstream: moveToActiveQ.
    fn move_to_active(&mut self, mut entry: Entry) -> bool {
        let status = self
            .profiles
            .get(scheduler_name(&entry.qpi.pod_info.pod))
            .map(|p| p.framework.run_pre_enqueue_plugins(&entry.qpi.pod_info));
        match status {
            Some(s) if !s.is_success() => {
                let plugin = s.plugin().unwrap_or("PreEnqueue");
                entry.qpi.gating_plugin = Some(plugin);
                entry.qpi.unschedulable_plugins.insert(plugin);
                self.gated.insert(entry.key.clone(), entry);
                self.incoming(QueueName::Gated);
                false
            }
            _ => {
                entry.qpi.gating_plugin = None;
                self.push_active(entry);
                self.incoming(QueueName::Active);
                true
            }
        }
    }

    /// Upstream: requeuePodWithQueueingStrategy. Where the pod went.
    fn requeue(&mut self, entry: Entry, strategy: Strategy) -> QueueName {
        match strategy {
            Strategy::Skip => {
                let gated = entry.qpi.gating_plugin.is_some();
                self.park(entry);
                let q = if gated {
                    QueueName::Gated
                } else {
                    QueueName::Unschedulable
                };
                self.incoming(q);
                QueueName::Unschedulable
            }
            Strategy::AfterBackoff if self.is_backing_off(&entry) => {
                self.push_backoff(entry);
                self.incoming(QueueName::Backoff);
                QueueName::Backoff
            }
            _ => {
                if self.move_to_active(entry) {
                    QueueName::Active
                } else {
                    QueueName::Gated
                }
            }
        }
    }

    /// Puts a pod back where it waits for events: gated if a PreEnqueue plugin holds it,
    /// unschedulablePods otherwise.
    fn park(&mut self, entry: Entry) {
        if entry.qpi.gating_plugin.is_some() {
            self.gated.insert(entry.key.clone(), entry);
        } else {
            self.unschedulable.insert(entry.key.clone(), entry);
        }
    }

    /// Upstream: isPodWorthRequeuing. Asks the plugins that rejected (or gate) the pod.
    fn worth_requeuing(
        &self,
        entry: &Entry,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Strategy {
        let qpi = &entry.qpi;
        let rejectors: BTreeSet<&'static str> = match qpi.gating_plugin {
            Some(g) => BTreeSet::from([g]),
            None => qpi
                .unschedulable_plugins
                .union(&qpi.pending_plugins)
                .copied()
                .collect(),
        };
        if rejectors.is_empty() || event.resource == EventResource::WildCard {
            return Strategy::AfterBackoff;
        }
        let Some(profile) = self.profiles.get(scheduler_name(&qpi.pod_info.pod)) else {
            return Strategy::AfterBackoff;
        };
        let mut strategy = Strategy::Skip;
        for reg in &profile.registrations {
            if !rejectors.contains(reg.plugin) || !reg.event.matches(event) {
                continue;
            }
            let hint = match &reg.hint {
                None => QueueingHint::Queue,
                Some(f) => f(&qpi.pod_info.pod, old, new).unwrap_or(QueueingHint::Queue),
            };
            if hint == QueueingHint::QueueSkip {
                continue;
            }
            if qpi.pending_plugins.contains(reg.plugin) {
                return Strategy::Immediately;
            }
            strategy = Strategy::AfterBackoff;
        }
        strategy
    }

    /// Whether any profile registered an event `event` matches. Upstream: isEventOfInterest.
    fn is_event_of_interest(&self, event: &ClusterEvent) -> bool {
        event.resource == EventResource::WildCard
            || self
                .profiles
                .values()
                .any(|p| p.registrations.iter().any(|r| r.event.matches(event)))
    }

    // ---- in-flight event log ----------------------------------------------------------

    fn log_event(
        &mut self,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) {
        if self.in_flight.is_empty() {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.events.push_back(LoggedEvent {
            seq,
            event,
            old: old.cloned(),
            new: new.cloned(),
        });
    }

    /// Drops logged events no in-flight pod still needs.
    fn trim_events(&mut self) {
        match self.in_flight.values().map(|f| f.since).min() {
            None => self.events.clear(),
            Some(oldest) => {
                while self.events.front().is_some_and(|e| e.seq < oldest) {
                    self.events.pop_front();
                }
            }
        }
    }

    // ---- public API -----------------------------------------------------------------

    /// A new pending pod: to activeQ, or gated if a PreEnqueue plugin holds it back.
    /// An already queued pod is replaced (as an update). Upstream: Add.
    pub fn add(&mut self, pod: Arc<PodInfo>) {
        self.moving_for("PodAdd");
        let key = pod.id.clone();
        self.nominator.add(pod.clone(), None);
        let previous = self.take(&key);
        let mut qpi = QueuedPodInfo::new(pod, self.clock.now());
        let mut counts = Counts::default();
        if let Some(prev) = previous {
            qpi.attempts = prev.qpi.attempts;
            qpi.initial_attempt_timestamp = prev.qpi.initial_attempt_timestamp;
            counts = prev.counts;
        }
        self.move_to_active(Entry { key, qpi, counts });
    }

    /// The pod changed. In activeQ or backoffQ it is updated in place (its backoff is
    /// kept). In unschedulablePods or gated, a relevant change (see [`is_pod_updated`]) is
    /// turned into UnscheduledPod update events and offered to the rejecting (or gating)
    /// plugins' hints; an irrelevant one only refreshes the stored pod. In flight, the
    /// update is logged for replay. Unknown: added. Upstream: Update.
    pub fn update(&mut self, old: &PodInfo, new: Arc<PodInfo>) {
        self.moving_for("PodUpdate");
        let key = new.id.clone();
        let events = pod_scheduling_properties_change(old, &new);
        if let Some(f) = self.in_flight.get_mut(&key) {
            if !f.deleted {
                f.latest = Some(new.clone());
                let o = EventObject::Pod(old.pod.clone());
                let n = EventObject::Pod(new.pod.clone());
                for e in events {
                    self.log_event(e, Some(&o), Some(&n));
                }
                return;
            }
        }
        if self.active.contains(&key) || self.backoff.contains(&key) {
            let in_backoff = self.backoff.contains(&key);
            if let Some(mut entry) = self.take(&key) {
                entry.qpi.pod_info = new.clone();
                if in_backoff {
                    self.push_backoff(entry);
                } else {
                    self.push_active(entry);
                }
            }
            self.nominator.update(old, new);
            return;
        }
        let waiting = self
            .unschedulable
            .remove(&key)
            .or_else(|| self.gated.remove(&key));
        let Some(mut entry) = waiting else {
            self.add(new);
            return;
        };
        entry.qpi.pod_info = new.clone();
        self.nominator.update(old, new.clone());
        if !is_pod_updated(&old.pod, &new.pod) {
            self.park(entry);
            return;
        }
        let o = EventObject::Pod(old.pod.clone());
        let n = EventObject::Pod(new.pod.clone());
        for e in events {
            let strategy = self.worth_requeuing(&entry, &e, Some(&o), Some(&n));
            if strategy != Strategy::Skip {
                self.requeue(entry, strategy);
                return;
            }
        }
        self.park(entry);
    }

    /// The pod is gone: removed from every sub-queue and the nominator. An in-flight pod is
    /// remembered as deleted so that its failed attempt does not bring it back. Unknown:
    /// ignored. Upstream: Delete.
    pub fn delete(&mut self, pod: &Pod) {
        let key = PodKey::of(pod);
        self.nominator.delete(&key);
        self.take(&key);
        if let Some(f) = self.in_flight.get_mut(&key) {
            f.deleted = true;
        }
    }

    /// The head of activeQ, now in flight: its attempts are counted, its first attempt
    /// time set, and last attempt's rejecting plugins cleared. `None` when activeQ is empty
    /// (the caller waits for a wake-up; nothing blocks here). Upstream: Pop.
    pub fn pop(&mut self) -> Option<QueuedPodInfo> {
        let sort = self.sort.clone();
        let less = move |a: &Entry, b: &Entry| sort_less(sort.as_deref(), a, b);
        let Entry {
            key,
            mut qpi,
            counts,
        } = self.active.pop(&less)?;
        qpi.attempts += 1;
        if qpi.initial_attempt_timestamp.is_none() {
            qpi.initial_attempt_timestamp = Some(self.clock.now());
        }
        qpi.unschedulable_plugins.clear();
        qpi.pending_plugins.clear();
        qpi.gating_plugin = None;
        self.in_flight.insert(
            key,
            InFlight {
                since: self.next_seq,
                counts,
                latest: None,
                deleted: false,
                activated: false,
            },
        );
        Some(qpi)
    }

    /// Whether the in-flight pod with `key` was deleted during its attempt.
    pub fn is_deleted_in_flight(&self, key: &str) -> bool {
        self.in_flight.get(key).is_some_and(|f| f.deleted)
    }

    /// The pod's attempt is over (bound, or handed back): it stops being in flight and
    /// logged events it alone needed are dropped. Upstream: Done.
    pub fn done(&mut self, key: &str) {
        if self.in_flight.remove(key).is_some() {
            self.trim_events();
        }
    }

    /// Hands back a pod whose attempt failed. Its backoff counters grow (rejections, or
    /// consecutive errors for [`AttemptFailure::Error`]) and its timestamp is reset. Events
    /// logged while it was in flight are replayed against its rejecting plugins: if one may
    /// help, the pod goes to backoffQ (activeQ once backed off, at once for a Pending
    /// plugin); otherwise to unschedulablePods. An error goes to backoffQ. The pod stops
    /// being in flight. A pod deleted meanwhile is dropped. Upstream:
    /// AddUnschedulableIfNotPresent.
    pub fn add_unschedulable_if_not_present(
        &mut self,
        mut qpi: QueuedPodInfo,
        failure: AttemptFailure,
    ) -> Result<(), QueueError> {
        self.moving_for("ScheduleAttemptFailure");
        let key = qpi.pod_info.id.clone();
        let flight = self.in_flight.remove(&key);
        let result = self.requeue_failed(&key, &mut qpi, failure, flight.as_ref());
        self.trim_events();
        result
    }

    fn requeue_failed(
        &mut self,
        key: &PodKey,
        qpi: &mut QueuedPodInfo,
        failure: AttemptFailure,
        flight: Option<&InFlight>,
    ) -> Result<(), QueueError> {
        if flight.is_some_and(|f| f.deleted) {
            return Ok(());
        }
        if self.active.contains(key)
            || self.backoff.contains(key)
            || self.unschedulable.contains_key(key)
            || self.gated.contains_key(key)
        {
            return Err(QueueError::AlreadyQueued(qpi.pod_info.key.clone()));
        }
        if failure == AttemptFailure::Error {
            qpi.unschedulable_plugins.clear();
            qpi.pending_plugins.clear();
        }
        if let Some(latest) = flight.and_then(|f| f.latest.clone()) {
            qpi.pod_info = latest;
        }
        let mut counts = flight.map(|f| f.counts).unwrap_or_default();
        let errored = qpi.unschedulable_plugins.is_empty() && qpi.pending_plugins.is_empty();
        if errored {
            counts.consecutive_errors += 1;
        } else {
            counts.unschedulable += 1;
            counts.consecutive_errors = 0;
        }
        qpi.timestamp = self.clock.now();
        qpi.gating_plugin = None;
        let entry = Entry {
            key: key.clone(),
            qpi: qpi.clone(),
            counts,
        };
        let strategy = if flight.is_some_and(|f| f.activated) {
            Strategy::Immediately
        } else if errored {
            Strategy::AfterBackoff
        } else {
            self.hint_for_in_flight(&entry, flight.map(|f| f.since))
        };
        self.requeue(entry, strategy);
        Ok(())
    }

    /// Replays the events logged since the pod was popped. Upstream:
    /// determineSchedulingHintForInFlightPod.
    fn hint_for_in_flight(&self, entry: &Entry, since: Option<u64>) -> Strategy {
        // A pod that was never popped has no log to replay: retry it after backoff, as
        // upstream does when it cannot find the pod's in-flight events.
        let Some(since) = since else {
            return Strategy::AfterBackoff;
        };
        let mut strategy = Strategy::Skip;
        for e in self.events.iter().filter(|e| e.seq >= since) {
            let s = self.worth_requeuing(entry, &e.event, e.old.as_ref(), e.new.as_ref());
            strategy = strategy.max(s);
            if strategy == Strategy::Immediately {
                break;
            }
        }
        strategy
    }

    /// A cluster event: every pod in unschedulablePods or gated whose rejecting (gating)
    /// plugins registered a matching event with a hint saying `Queue` moves to backoffQ if
    /// still backing off, else activeQ (gated pods re-run PreEnqueue). The event is also
    /// logged for in-flight pods. Upstream: MoveAllToActiveOrBackoffQueue.
    pub fn move_all_to_active_or_backoff(
        &mut self,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) {
        self.move_all_to_active_or_backoff_except(event, old, new, None);
    }

    /// As [`move_all_to_active_or_backoff`](Self::move_all_to_active_or_backoff), leaving
    /// the pod with key `except` where it is (the pod whose own failed binding caused the
    /// event). Upstream: MoveAllToActiveOrBackoffQueue with a pre-check.
    pub fn move_all_to_active_or_backoff_except(
        &mut self,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
        except: Option<&str>,
    ) {
        if !self.is_event_of_interest(&event) {
            return;
        }
        self.moving_for(&event.label());
        let keys: Vec<PodKey> = self
            .unschedulable
            .keys()
            .chain(self.gated.keys())
            .filter(|k| except != Some(k.as_str()))
            .cloned()
            .collect();
        self.move_pods(keys, event, old, new);
        self.log_event(event, old, new);
    }

    fn move_pods(
        &mut self,
        keys: Vec<PodKey>,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) {
        for key in keys {
            let strategy = match self
                .unschedulable
                .get(&key)
                .or_else(|| self.gated.get(&key))
            {
                Some(entry) => self.worth_requeuing(entry, &event, old, new),
                None => continue,
            };
            if strategy == Strategy::Skip {
                continue;
            }
            let entry = self
                .unschedulable
                .remove(&key)
                .or_else(|| self.gated.remove(&key));
            if let Some(entry) = entry {
                self.requeue(entry, strategy);
            }
        }
    }

    /// Moves the pod with `key` to activeQ now (through PreEnqueue: a gate still holds it),
    /// wherever it waits: backoffQ, unschedulablePods or gated. For a pod known to be able
    /// to make progress, e.g. a preemptor whose victims are gone. A pod in flight goes to
    /// activeQ if its attempt fails. A pod in activeQ or not queued is left alone. Whether
    /// the pod reached activeQ now. Upstream: Activate.
    pub fn activate(&mut self, key: &str) -> bool {
        match self.queue_of(key) {
            Some(QueueName::Backoff | QueueName::Unschedulable | QueueName::Gated) => {}
            Some(QueueName::InFlight) => {
                if let Some(f) = self.in_flight.get_mut(key) {
                    f.activated = true;
                }
                return false;
            }
            _ => return false,
        }
        let Some(entry) = self.take(key) else {
            return false;
        };
        self.moving_for("ForceActivate");
        self.move_to_active(entry)
    }

    /// Moves every pod whose backoff has ended from backoffQ to activeQ. Upstream:
    /// flushBackoffQCompleted.
    pub fn flush_backoff_completed(&mut self) {
        self.moving_for("BackoffComplete");
        let less = Self::backoff_less(self.config);
        let now = self.clock.now();
        while self
            .backoff
            .peek()
            .is_some_and(|e| backoff_expiry(self.config, e) <= now)
        {
            if let Some(entry) = self.backoff.pop(&less) {
                self.move_to_active(entry);
            }
        }
    }

    /// Retries pods that have been in unschedulablePods longer than
    /// `pod_max_in_unschedulable_pods_duration`, as for a wildcard event. Upstream:
    /// flushUnschedulablePodsLeftover.
    pub fn flush_unschedulable_pods_leftover(&mut self) {
        let now = self.clock.now();
        let max = self.config.pod_max_in_unschedulable_pods_duration;
        let keys: Vec<PodKey> = self
            .unschedulable
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.qpi.timestamp) > max)
            .map(|(k, _)| k.clone())
            .collect();
        if !keys.is_empty() {
            self.moving_for("UnschedulableTimeout");
            self.move_pods(keys, EVENT_UNSCHEDULABLE_TIMEOUT, None, None);
        }
    }

    /// Nominates `pod` to `node`, or with `None` to its `status.nominatedNodeName`.
    /// Upstream: AddNominatedPod.
    pub fn add_nominated_pod(&mut self, pod: Arc<PodInfo>, node: Option<&str>) {
        self.nominator.add(pod, node);
    }

    /// Every nomination, by node (empty when no pod is nominated: the common case).
    pub fn nominated_pods(&self) -> crate::runtime::NominatedPods {
        self.nominator.all()
    }

    /// Upstream: DeleteNominatedPodIfExists.
    pub fn delete_nominated_pod_if_exists(&mut self, pod: &Pod) {
        self.nominator.delete(&PodKey::of(pod));
    }

    /// Upstream: UpdateNominatedPod.
    pub fn update_nominated_pod(&mut self, old: &PodInfo, new: Arc<PodInfo>) {
        self.nominator.update(old, new);
    }

    /// The pods nominated to `node`, in nomination order. Upstream: NominatedPodsForNode.
    pub fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.nominator.pods_for_node(node).to_vec()
    }

    /// The node `pod` is nominated to, if any.
    pub fn nominated_node(&self, pod: &Pod) -> Option<&str> {
        self.nominator.node_of(&PodKey::of(pod))
    }

    /// Pods per sub-queue (in-flight pods are not pending). Upstream: PendingPods.
    pub fn pending_pods(&self) -> PendingCounts {
        PendingCounts {
            active: self.active.len(),
            backoff: self.backoff.len(),
            unschedulable: self.unschedulable.len(),
            gated: self.gated.len(),
        }
    }

    /// Every pod the queue knows, in-flight ones included, sorted by key (for debugging).
    pub fn list(&self) -> Vec<ListedPod> {
        let listed = |queue: QueueName, e: &Entry| ListedPod {
            key: e.key.clone(),
            queue,
            attempts: e.qpi.attempts,
            unschedulable_plugins: e.qpi.unschedulable_plugins.clone(),
            gating_plugin: e.qpi.gating_plugin,
        };
        let mut out: Vec<ListedPod> = self
            .active
            .iter()
            .map(|e| listed(QueueName::Active, e))
            .chain(self.backoff.iter().map(|e| listed(QueueName::Backoff, e)))
            .chain(
                self.unschedulable
                    .values()
                    .map(|e| listed(QueueName::Unschedulable, e)),
            )
            .chain(self.gated.values().map(|e| listed(QueueName::Gated, e)))
            .collect();
        out.extend(self.in_flight.keys().map(|k| ListedPod {
            key: k.clone(),
            queue: QueueName::InFlight,
            attempts: 0,
            unschedulable_plugins: BTreeSet::new(),
            gating_plugin: None,
        }));
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Which sub-queue holds the pod with `key`, if any.
    pub fn queue_of(&self, key: &str) -> Option<QueueName> {
        if self.active.contains(key) {
            Some(QueueName::Active)
        } else if self.backoff.contains(key) {
            Some(QueueName::Backoff)
        } else if self.unschedulable.contains_key(key) {
            Some(QueueName::Unschedulable)
        } else if self.gated.contains_key(key) {
            Some(QueueName::Gated)
        } else if self.in_flight.contains_key(key) {
            Some(QueueName::InFlight)
        } else {
            None
        }
    }

    /// When the queued pod with `key` ends its backoff, if it is queued.
    pub fn backoff_expiry(&self, key: &str) -> Option<Instant> {
        self.active
            .get(key)
            .or_else(|| self.backoff.get(key))
            .or_else(|| self.unschedulable.get(key))
            .or_else(|| self.gated.get(key))
            .map(|e| backoff_expiry(self.config, e))
    }

    /// When the first pod in backoffQ is due to move to activeQ.
    pub fn next_backoff_expiry(&self) -> Option<Instant> {
        self.backoff.peek().map(|e| backoff_expiry(self.config, e))
    }

    /// Logged events kept for in-flight pods (to check the log is trimmed).
    pub fn logged_events(&self) -> usize {
        self.events.len()
    }
}

fn sort_less(sort: Option<&Framework>, a: &Entry, b: &Entry) -> bool {
    match sort {
        Some(fw) => fw.queue_sort_less(&a.qpi, &b.qpi),
        None => a.qpi.timestamp < b.qpi.timestamp,
    }
}

/// Whether an update may change the pod's scheduling: it ignores `resourceVersion`,
/// `generation`, `managedFields`, finalizers and the status except resource claim
/// statuses. Upstream: isPodUpdated.
pub fn is_pod_updated(old: &Pod, new: &Pod) -> bool {
    fn strip(p: &Pod) -> Pod {
        let mut p = p.clone();
        p.metadata.resource_version = None;
        p.metadata.generation = None;
        p.metadata.managed_fields = None;
        p.metadata.finalizers = None;
        let claims = p
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone());
        p.status = claims.map(|c| k8s_openapi::api::core::v1::PodStatus {
            resource_claim_statuses: Some(c),
            ..Default::default()
        });
        p
    }
    strip(old) != strip(new)
}

/// The update events a pod change makes, on UnscheduledPod (or AssignedPod once bound):
/// label change, scale-down of requests, last scheduling gate removed, tolerations changed,
/// else UpdatePodOther. Upstream: framework.PodSchedulingPropertiesChange.
pub fn pod_scheduling_properties_change(old: &PodInfo, new: &PodInfo) -> Vec<ClusterEvent> {
    let assigned = new
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let resource = if assigned {
        EventResource::AssignedPod
    } else {
        EventResource::UnscheduledPod
    };
    let mut actions = Vec::new();
    if old.pod.metadata.labels != new.pod.metadata.labels {
        actions.push(ActionType::UPDATE_POD_LABEL);
    }
    if scaled_down(&old.requests, &new.requests) {
        actions.push(ActionType::UPDATE_POD_SCALE_DOWN);
    }
    let gates = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map_or(0, Vec::len)
    };
    if gates(&old.pod) > 0 && gates(&new.pod) == 0 {
        actions.push(ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED);
    }
    let tolerations = |p: &Pod| {
        p.spec
            .as_ref()
            .map(|s| s.tolerations.clone().unwrap_or_default())
    };
    if tolerations(&old.pod) != tolerations(&new.pod) {
        actions.push(ActionType::UPDATE_POD_TOLERATIONS);
    }
    let generated_claims = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default()
    };
    if generated_claims(&old.pod) != generated_claims(&new.pod) {
        actions.push(ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM);
    }
    if actions.is_empty() {
        actions.push(ActionType::UPDATE_OTHER);
    }
    actions
        .into_iter()
        .map(|a| ClusterEvent::new(resource, a))
        .collect()
}

/// Whether some request went down (or away). Upstream: extractPodScaleDown.
fn scaled_down(old: &framework::Resource, new: &framework::Resource) -> bool {
    old.milli_cpu > new.milli_cpu
        || old.memory > new.memory
        || old.ephemeral_storage > new.ephemeral_storage
        || old
            .scalar_resources
            .iter()
            .any(|(k, v)| new.scalar_resources.get(k).is_none_or(|n| v > n))
}

/// When the pod's backoff ends: its timestamp (last failure) plus `initial × 2^(n−1)`,
/// capped at the maximum, `n` being the consecutive errors if the last attempts errored,
/// else the rejections. Upstream: backoffQueue.calculateBackoffDuration.
fn backoff_expiry(config: QueueConfig, entry: &Entry) -> Instant {
    let t = entry.qpi.timestamp;
    // A configured maximum too large for an Instant means "practically never".
    t.checked_add(backoff_duration(config, entry.counts))
        .or_else(|| t.checked_add(Duration::from_secs(u64::from(u32::MAX))))
        .unwrap_or(t)
}

fn backoff_duration(config: QueueConfig, counts: Counts) -> Duration {
    let n = if counts.consecutive_errors > 0 {
        counts.consecutive_errors
    } else {
        counts.unschedulable
    };
    if n == 0 {
        return Duration::ZERO;
    }
    let mut d = config.pod_initial_backoff;
    for _ in 1..n {
        if d > config.pod_max_backoff.saturating_sub(d) {
            return config.pod_max_backoff;
        }
        d += d;
    }
    d.min(config.pod_max_backoff)
}

//! [`KubeClusterClient`]: the scheduler's decisions written to the API server with kube-rs.
//!
//! Bindings and deletions go straight to the API server: they are the critical path, and a
//! preemption victim's `DisruptionTarget` condition goes straight too
//! ([`ClusterClient::update_pod_status_now`]), so that it lands before the victim's deletion.
//! Status patches and events after a scheduling attempt are handed to a pool of background
//! workers, so that the trait call returns at once and a slow API server never delays a bind.
//! What waits is the latest intent per object, not every call:
//!
//! - **Status writes** are kept per pod: a newer update merges into the unsent one (newest
//!   condition per type, the latest nomination change), so a pod has at most one status
//!   write waiting and one in flight, in the order they were asked for. They are never
//!   dropped; memory is bounded by the number of pods.
//! - **Events** are aggregated by upstream's rules for the events.k8s.io broadcaster: events
//!   about the same version of a pod (namespace, name, UID and resourceVersion, as the
//!   Event's `involvedObject` names it) with the same type, reason, action and reporting
//!   controller and instance are one Event object; a status write between two failed
//!   attempts changes the pod's version, so the next failure is a new object with its own
//!   message. The first occurrence is POSTed; the second PATCHes a `series` (`count` 2,
//!   `lastObservedTime`) onto it; later ones are only counted here. Every
//!   [`SERIES_REFRESH`] (the heartbeat) each series' current count is PATCHed, and every
//!   [`SERIES_FINISH`] a series not observed for that long gets its final count written and
//!   is forgotten (a singleton is just forgotten), so its next occurrence POSTs a new object.
//!   The note stays the first occurrence's. At most [`WriterOptions::queue_capacity`]
//!   aggregates are kept; fully written ones are forgotten first, and an event for which
//!   there is still no room is dropped, logged and counted in
//!   `scheduler_background_writes_dropped_total{kind="event",reason="queue_full"}`.
//! - **Priority**: workers take a waiting status write before a waiting event write, so a
//!   burst of events never holds up the status writes behind it.
//!
//! Every request first takes a token from a [`RateLimiter`] (`clientConnection.qps`/`burst`):
//! binds, deletes and status patches share one bucket, events have their own (upstream
//! builds a separate client for events, with its own limiter, so that events do not eat the
//! scheduler's request budget).
//!
//! Where this differs from upstream, on purpose: upstream's broadcaster drops events beyond
//! 1000 queued between the recorder and its writer, and keeps every aggregate until its
//! series finishes; here aggregates are bounded and only new series beyond the capacity are
//! dropped. A series PATCH carries the count
//! as it is when a worker sends it (upstream sends the count 2 it had when the second
//! occurrence was recorded), and also sets the core/v1 `count` and `lastTimestamp`, which
//! `kubectl get events` reads. Events are written through core/v1 (upstream uses
//! events.k8s.io/v1 when served); both views list the same objects.
//!
//! Upstream: DefaultBinder (pkg/scheduler/framework/plugins/defaultbinder), updatePod in
//! schedule_one.go with util.PatchPodStatus, the preemption executor's victim patch and
//! util.DeletePod, and client-go tools/events (the scheduler's events.k8s.io recorder).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use framework::{
    Binding, BoxFuture, ClientError, ClusterClient, Nomination, PodCondition, PodEvent, PodRef,
    PodStatusUpdate,
};
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, EventSeries, EventSource, ObjectReference, PersistentVolume,
    PersistentVolumeClaim, Pod, PodExtendedResourceClaimStatus,
};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Resource;
use serde_json::{json, Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{client_error, raw, RateLimiter};
use crate::metrics::MetricsRecorder;

/// Longest event message, in bytes; longer ones are cut (on a character boundary), as
/// upstream's event recorder cuts them.
pub const MAX_EVENT_MESSAGE_BYTES: usize = 1024;

/// How often, and after how long unobserved, series are finished: their final count is
/// written and they are forgotten, so the next occurrence starts a new Event object
/// (upstream's broadcaster: six minutes).
pub(crate) const SERIES_FINISH: Duration = Duration::from_secs(6 * 60);

/// How often every series' count is written, so that the objects of a long series stay
/// fresh on the server (upstream's broadcaster: thirty minutes).
pub(crate) const SERIES_REFRESH: Duration = Duration::from_secs(30 * 60);

/// How a [`KubeClusterClient`] writes.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Requests per second (`clientConnection.qps`); zero or less: unlimited.
    pub qps: f32,
    /// Requests allowed at once above the rate (`clientConnection.burst`).
    pub burst: u32,
    /// Event aggregates kept (one per pod, reason, action and controller); beyond it new
    /// events are dropped and counted. Status writes are not bounded by it: they are kept
    /// one per pod and never dropped.
    pub queue_capacity: usize,
    /// Background writes in flight at once.
    pub workers: usize,
    /// `reportingInstance` of the events written (the replica's identity).
    pub reporting_instance: String,
    /// Where dropped and failed background writes are counted.
    pub metrics: Option<Arc<dyn MetricsRecorder>>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            qps: 50.0,
            burst: 100,
            // One aggregate per pod and reason: room for the failed attempts and Scheduled
            // events of a batch of thousands of pods.
            queue_capacity: 10_000,
            // Enough to keep a burst of 100 busy against an API server that answers in tens
            // of milliseconds; the rate limiter, not the pool, sets the pace.
            workers: 16,
            reporting_instance: super::leader::hostname(),
            metrics: None,
        }
    }
}

/// The `(namespace, name)` of a pod.
pub(crate) type PodName = (String, String);

/// What makes two events one series (upstream's isomorphic-event key): the pod (its
/// version included), type, reason, action and reporting controller (the reporting instance
/// is this client's, the same for all). The message does not.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct EventKey {
    namespace: String,
    name: String,
    uid: Option<String>,
    resource_version: Option<String>,
    event_type: &'static str,
    reason: String,
    action: String,
    reporting_controller: String,
}

impl EventKey {
    fn of(event: &PodEvent) -> Self {
        EventKey {
            namespace: event.regarding.namespace.clone(),
            name: event.regarding.name.clone(),
            uid: event.regarding.uid.clone(),
            resource_version: event.resource_version.clone(),
            event_type: event.event_type.as_str(),
            reason: event.reason.clone(),
            action: event.action.clone(),
            reporting_controller: event.reporting_controller.clone(),
        }
    }
}

/// The status writes asked for a pod and not yet sent, merged into one patch: applying it
/// has the effect of applying them in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingStatus {
    pub(crate) pod: PodRef,
    /// The newest condition of each type, in the order the types were first asked for.
    pub(crate) conditions: Vec<PodCondition>,
    /// The last nomination change (`Keep` when none was asked for).
    pub(crate) nomination: Nomination,
}

impl PendingStatus {
    pub(crate) fn new(update: &PodStatusUpdate) -> Self {
        let mut p = PendingStatus {
            pod: update.pod.clone(),
            conditions: Vec::new(),
            nomination: Nomination::Keep,
        };
        p.merge(update);
        p
    }

    /// Folds a later `update` in: its condition replaces one of the same type, and its
    /// nomination replaces the pending one unless it leaves the nomination alone.
    pub(crate) fn merge(&mut self, update: &PodStatusUpdate) {
        self.pod = update.pod.clone();
        if let Some(c) = &update.condition {
            match self.conditions.iter_mut().find(|p| p.type_ == c.type_) {
                Some(p) => *p = c.clone(),
                None => self.conditions.push(c.clone()),
            }
        }
        if update.nomination != Nomination::Keep {
            self.nomination = update.nomination.clone();
        }
    }
}

/// A pod's status writes: the merged one waiting, and whether one is being sent.
/// **Invariant:** the pod is in the work queue exactly when `pending` is set and nothing is
/// in flight, so writes for one pod go out one at a time and in order.
#[derive(Debug, Default)]
struct StatusSlot {
    pending: Option<PendingStatus>,
    in_flight: bool,
}

/// One Event object and the occurrences it stands for.
#[derive(Debug)]
struct Aggregate {
    /// The first occurrence: what the object says besides its series.
    event: PodEvent,
    /// The object's name, chosen when the first occurrence was recorded.
    object: String,
    first: Timestamp,
    /// The series' `lastObservedTime`.
    last: Timestamp,
    last_seen: Instant,
    /// Occurrences recorded.
    count: i32,
    /// The object was POSTed (or given up on: a later PATCH that finds nothing POSTs it).
    created: bool,
    /// A write was asked for while one was in flight: send another when it ends.
    dirty: bool,
    in_flight: bool,
    queued: bool,
}

impl Aggregate {
    fn settled(&self) -> bool {
        !self.in_flight && !self.queued && !self.dirty
    }
}

/// What the workers share.
#[derive(Debug, Default)]
struct Pending {
    /// Status writes waiting: taken before any event write.
    status_work: VecDeque<PodName>,
    /// Event writes waiting.
    event_work: VecDeque<EventKey>,
    /// Final counts of finished series, whose aggregates are already forgotten.
    finals: VecDeque<Job>,
    statuses: HashMap<PodName, StatusSlot>,
    events: HashMap<EventKey, Aggregate>,
    /// Aggregates fully written, oldest first: the first forgotten when room is needed
    /// (an entry may have changed since; it is checked when popped).
    settled: VecDeque<EventKey>,
    /// No client is left to add work: workers finish what is queued and stop.
    closed: bool,
}

#[derive(Debug)]
pub(crate) struct Queue {
    pending: Mutex<Pending>,
    ready: Notify,
    /// Woken once, when the queue closes (the series timer waits on it; kept apart from
    /// `ready` so that a wake-up meant for a worker never goes to the timer).
    stopped: Notify,
    capacity: usize,
    dropped: AtomicU64,
    metrics: Option<Arc<dyn MetricsRecorder>>,
}

/// A write a worker sends, taken from the queue under its lock and sent without it.
#[derive(Debug)]
pub(crate) enum Job {
    Status(PodName, PendingStatus),
    CreateEvent(EventKey, Box<CoreEvent>),
    PatchEvent {
        key: EventKey,
        namespace: String,
        object: String,
        patch: Value,
    },
    /// The last write of a finished series: nothing is done with its outcome.
    FinalPatch {
        namespace: String,
        object: String,
        patch: Value,
    },
}

impl Queue {
    pub(crate) fn new(capacity: usize, metrics: Option<Arc<dyn MetricsRecorder>>) -> Self {
        Queue {
            pending: Mutex::default(),
            ready: Notify::new(),
            stopped: Notify::new(),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Every operation leaves the maps consistent: keep going after a panic elsewhere.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn push_status(&self, update: &PodStatusUpdate) {
        let key = (update.pod.namespace.clone(), update.pod.name.clone());
        let mut p = self.lock();
        let slot = p.statuses.entry(key.clone()).or_default();
        let newly_pending = match &mut slot.pending {
            Some(pending) => {
                pending.merge(update);
                false
            }
            None => {
                slot.pending = Some(PendingStatus::new(update));
                true
            }
        };
        if newly_pending && !slot.in_flight {
            p.status_work.push_back(key);
            drop(p);
            self.ready.notify_one();
        }
    }

    pub(crate) fn push_event(&self, event: &PodEvent, now: Timestamp, seen: Instant) {
        let key = EventKey::of(event);
        let mut p = self.lock();
        if let Some(a) = p.events.get_mut(&key) {
            a.count = a.count.saturating_add(1);
            a.last = now;
            a.last_seen = seen;
            // The second occurrence makes the object a series; later ones wait for the
            // heartbeat or the finish.
            if a.count == 2 && want_write(&mut p, &key) {
                drop(p);
                self.ready.notify_one();
            }
            return;
        }
        if p.events.len() >= self.capacity && !forget_one_settled(&mut p) {
            drop(p);
            self.dropped_event(event);
            return;
        }
        p.events.insert(
            key.clone(),
            Aggregate {
                event: event.clone(),
                object: format!("{}.{}", event.regarding.name, unique_suffix(now)),
                first: now,
                last: now,
                last_seen: seen,
                count: 1,
                created: false,
                dirty: false,
                in_flight: false,
                queued: false,
            },
        );
        want_write(&mut p, &key);
        drop(p);
        self.ready.notify_one();
    }

    /// The heartbeat: writes every series' current count.
    pub(crate) fn refresh_series(&self) {
        let mut p = self.lock();
        let series: Vec<EventKey> = p
            .events
            .iter()
            .filter(|(_, a)| a.count > 1)
            .map(|(k, _)| k.clone())
            .collect();
        let mut queued = false;
        for key in &series {
            queued |= want_write(&mut p, key);
        }
        drop(p);
        if queued {
            self.ready.notify_waiters();
        }
    }

    /// Finishes what was last observed at least [`SERIES_FINISH`] before `now`: a series'
    /// final count is queued and the aggregate forgotten; a singleton is forgotten. An
    /// aggregate with a write waiting or in flight is left for the next round.
    pub(crate) fn finish_series(&self, now: Instant) {
        let mut p = self.lock();
        let Pending { events, finals, .. } = &mut *p;
        let mut queued = false;
        events.retain(|key, a| {
            if !a.settled() || now.saturating_duration_since(a.last_seen) < SERIES_FINISH {
                return true;
            }
            if a.count > 1 {
                finals.push_back(Job::FinalPatch {
                    namespace: key.namespace.clone(),
                    object: a.object.clone(),
                    patch: series_patch(a.count, a.last),
                });
                queued = true;
            }
            false
        });
        drop(p);
        if queued {
            self.ready.notify_waiters();
        }
    }

    fn dropped_event(&self, event: &PodEvent) {
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.inc_background_writes_dropped("event", "queue_full");
        }
        // One warning per thousand drops: a flood of events must not become a flood of log
        // lines too.
        if dropped % 1000 == 0 {
            tracing::warn!(
                dropped = dropped + 1,
                capacity = self.capacity,
                pod = %event.regarding,
                reason = %event.reason,
                "event aggregates are at capacity; dropping new events"
            );
        }
    }

    /// The next write to send, `None` when there is nothing to do now. Status writes come
    /// first, then final series counts, then other event writes.
    pub(crate) fn take(&self, reporting_instance: &str) -> Option<Job> {
        let mut p = self.lock();
        while let Some(key) = p.status_work.pop_front() {
            let Some(slot) = p.statuses.get_mut(&key) else {
                continue;
            };
            let Some(pending) = slot.pending.take() else {
                continue;
            };
            slot.in_flight = true;
            return Some(Job::Status(key, pending));
        }
        if let Some(job) = p.finals.pop_front() {
            return Some(job);
        }
        while let Some(key) = p.event_work.pop_front() {
            let Some(a) = p.events.get_mut(&key) else {
                continue;
            };
            a.queued = false;
            a.in_flight = true;
            if !a.created {
                let body = aggregate_event(a, reporting_instance);
                return Some(Job::CreateEvent(key, Box::new(body)));
            }
            return Some(Job::PatchEvent {
                namespace: key.namespace.clone(),
                object: a.object.clone(),
                patch: series_patch(a.count, a.last),
                key,
            });
        }
        None
    }

    pub(crate) fn status_done(&self, key: PodName) {
        let mut p = self.lock();
        let Some(slot) = p.statuses.get_mut(&key) else {
            return;
        };
        slot.in_flight = false;
        if slot.pending.is_some() {
            p.status_work.push_back(key);
            drop(p);
            self.ready.notify_one();
        } else {
            p.statuses.remove(&key);
        }
    }

    /// A write of `key`'s aggregate ended; `created`: whether the object exists (or is
    /// given up on) now.
    pub(crate) fn event_done(&self, key: EventKey, created: bool) {
        let mut p = self.lock();
        let Some(a) = p.events.get_mut(&key) else {
            return;
        };
        a.in_flight = false;
        a.created = created;
        // Not created: a PATCH found no object (events expire), POST it with its series.
        let again = std::mem::take(&mut a.dirty) || !created;
        if again {
            if want_write(&mut p, &key) {
                drop(p);
                self.ready.notify_one();
            }
            return;
        }
        p.settled.push_back(key);
        // An aggregate written again is listed again: keep the list near the map's size.
        if p.settled.len() > 2 * self.capacity + 16 {
            let Pending {
                settled, events, ..
            } = &mut *p;
            let mut listed = std::collections::HashSet::new();
            settled.retain(|k| {
                events.get(k).is_some_and(Aggregate::settled) && listed.insert(k.clone())
            });
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_waiters();
        self.stopped.notify_one();
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

/// Asks for a write of `key`'s aggregate: queued, or marked to go again after the one in
/// flight. `true` when it was queued (a worker should be woken).
fn want_write(p: &mut Pending, key: &EventKey) -> bool {
    let Some(a) = p.events.get_mut(key) else {
        return false;
    };
    if a.in_flight {
        a.dirty = true;
        return false;
    }
    if a.queued {
        return false;
    }
    a.queued = true;
    p.event_work.push_back(key.clone());
    true
}

/// Forgets the oldest fully written aggregate; `false` when none is.
fn forget_one_settled(p: &mut Pending) -> bool {
    while let Some(key) = p.settled.pop_front() {
        if p.events.get(&key).is_some_and(Aggregate::settled) {
            p.events.remove(&key);
            return true;
        }
    }
    false
}

/// Closes the queue when the last clone of a client is dropped.
#[derive(Debug)]
struct CloseOnDrop(Arc<Queue>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The [`ClusterClient`] of `run` and `up`: kube-rs against a real (or the local) API server.
#[derive(Clone)]
pub struct KubeClusterClient {
    client: kube::Client,
    limiter: Arc<RateLimiter>,
    queue: Arc<Queue>,
    _close: Arc<CloseOnDrop>,
}

impl std::fmt::Debug for KubeClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterClient")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl KubeClusterClient {
    /// A client writing through `client`, with its background workers spawned on the
    /// current tokio runtime (they finish the queued writes and end when the last clone of
    /// this client is dropped).
    ///
    /// # Panics
    /// Outside a tokio runtime (as `tokio::spawn`): a start-up mistake, not a cluster input.
    pub fn new(client: kube::Client, options: WriterOptions) -> Self {
        let limiter = Arc::new(RateLimiter::new(options.qps, options.burst));
        let event_limiter = Arc::new(RateLimiter::new(options.qps, options.burst));
        let queue = Arc::new(Queue::new(options.queue_capacity, options.metrics.clone()));
        let reporting_instance: Arc<str> = options.reporting_instance.into();
        for _ in 0..options.workers.max(1) {
            tokio::spawn(background_worker(
                client.clone(),
                limiter.clone(),
                event_limiter.clone(),
                reporting_instance.clone(),
                queue.clone(),
            ));
        }
        tokio::spawn(series_timer(queue.clone()));
        KubeClusterClient {
            client,
            limiter,
            _close: Arc::new(CloseOnDrop(queue.clone())),
            queue,
        }
    }

    /// Writes every event series' current count now, as the heartbeat does every
    /// [`SERIES_REFRESH`].
    #[cfg(test)]
    pub(crate) fn refresh_event_series(&self) {
        self.queue.refresh_series();
    }

    fn closed_error() -> ClientError {
        ClientError::Transport("the background writer has stopped".to_string())
    }
}

impl ClusterClient for KubeClusterClient {
    fn bind<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            bind(&self.client, binding).await
        })
    }

    fn update_pod_status<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        let r = if self.queue.is_closed() {
            Err(Self::closed_error())
        } else {
            self.queue.push_status(update);
            Ok(())
        };
        Box::pin(async move { r })
    }

    fn update_pod_status_now<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            patch_pod_status(&self.client, &PendingStatus::new(update)).await
        })
    }

    fn record_event<'a>(&'a self, event: &'a PodEvent) -> BoxFuture<'a, Result<(), ClientError>> {
        let r = if self.queue.is_closed() {
            Err(Self::closed_error())
        } else {
            self.queue
                .push_event(event, Timestamp::now(), Instant::now());
            Ok(())
        };
        Box::pin(async move { r })
    }

    fn delete_pod<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            delete_pod(&self.client, pod).await
        })
    }

    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let api: Api<PersistentVolume> = Api::all(self.client.clone());
            let name = pv.metadata.name.as_deref().unwrap_or("");
            api.replace(name, &PostParams::default(), pv)
                .await
                .map_err(client_error)
        })
    }

    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let namespace = pvc.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
            let name = pvc.metadata.name.as_deref().unwrap_or("");
            api.replace(name, &PostParams::default(), pvc)
                .await
                .map_err(client_error)
        })
    }

    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
            let name = claim.metadata.name.as_deref().unwrap_or("");
            api.replace(name, &PostParams::default(), claim)
                .await
                .map_err(client_error)
        })
    }

    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
            let name = claim.metadata.name.as_deref().unwrap_or("");
            api.replace_status(name, &PostParams::default(), claim)
                .await
                .map_err(client_error)
        })
    }

    fn create_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
            api.create(&PostParams::default(), claim)
                .await
                .map_err(client_error)
        })
    }

    fn delete_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
            let name = claim.metadata.name.as_deref().unwrap_or("");
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) => match client_error(e) {
                    ClientError::Api { code: 404, .. } => Ok(()),
                    e => Err(e),
                },
            }
        })
    }

    fn update_pod_extended_resource_claim_status<'a>(
        &'a self,
        pod: &'a PodRef,
        status: &'a PodExtendedResourceClaimStatus,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
            let patch = json!({"status": {"extendedResourceClaimStatus": status}});
            pods.patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
                .map_err(client_error)
        })
    }
}

async fn background_worker(
    client: kube::Client,
    limiter: Arc<RateLimiter>,
    event_limiter: Arc<RateLimiter>,
    reporting_instance: Arc<str>,
    queue: Arc<Queue>,
) {
    loop {
        let job = {
            // Registered before looking, so that a push or close between the look and the
            // wait still wakes this worker.
            let ready = queue.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            match queue.take(&reporting_instance) {
                Some(job) => job,
                None if queue.is_closed() => return,
                None => {
                    ready.await;
                    continue;
                }
            }
        };
        match job {
            Job::Status(key, pending) => {
                limiter.acquire().await;
                match patch_pod_status(&client, &pending).await {
                    Ok(()) => {}
                    // The pod is gone (deleted, preempted): nothing to update.
                    Err(ClientError::Api { code: 404, .. }) => {}
                    Err(e) => {
                        if let Some(m) = &queue.metrics {
                            m.inc_background_writes_dropped("status", "failed");
                        }
                        tracing::warn!(
                            pod = %format!("{}/{}", key.0, key.1),
                            error = %e,
                            "updating the pod's status failed"
                        );
                    }
                }
                queue.status_done(key);
            }
            Job::CreateEvent(key, body) => {
                event_limiter.acquire().await;
                if let Err(e) = create_event(&client, &key.namespace, &body).await {
                    // Given up on: a later PATCH finds no object and POSTs it.
                    event_failed(&queue, &key, &e);
                }
                queue.event_done(key, true);
            }
            Job::PatchEvent {
                key,
                namespace,
                object,
                patch,
            } => {
                event_limiter.acquire().await;
                let created = match patch_event(&client, &namespace, &object, patch).await {
                    Ok(()) => true,
                    // The object is gone (events expire): POST it again, with its series.
                    Err(ClientError::Api { code: 404, .. }) => false,
                    Err(e) => {
                        event_failed(&queue, &key, &e);
                        true
                    }
                };
                queue.event_done(key, created);
            }
            Job::FinalPatch {
                namespace,
                object,
                patch,
            } => {
                event_limiter.acquire().await;
                if let Err(e) = patch_event(&client, &namespace, &object, patch).await {
                    tracing::debug!(event = %format!("{namespace}/{object}"), error = %e,
                        "writing the final count of an event series failed");
                }
            }
        }
    }
}

/// The heartbeat and the finish of event series, on their upstream periods, until the queue
/// closes.
async fn series_timer(queue: Arc<Queue>) {
    let start = Instant::now();
    let mut refresh = tokio::time::interval_at(start + SERIES_REFRESH, SERIES_REFRESH);
    let mut finish = tokio::time::interval_at(start + SERIES_FINISH, SERIES_FINISH);
    let stopped = queue.stopped.notified();
    tokio::pin!(stopped);
    loop {
        if queue.is_closed() {
            return;
        }
        tokio::select! {
            _ = &mut stopped => return,
            _ = refresh.tick() => queue.refresh_series(),
            at = finish.tick() => queue.finish_series(at),
        }
    }
}

async fn patch_event(
    client: &kube::Client,
    namespace: &str,
    object: &str,
    patch: Value,
) -> Result<(), ClientError> {
    // The answer is the Event as stored, which nothing reads: not decoded.
    let request = kube::core::Request::new(CoreEvent::url_path(&(), Some(namespace)))
        .patch(object, &PatchParams::default(), &Patch::Strategic(patch))
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    raw::send_discarding(client, request, "patch")
        .await
        .map_err(client_error)
}

/// POSTs a new Event object; its answer (the Event as stored) is not decoded.
async fn create_event(
    client: &kube::Client,
    namespace: &str,
    body: &CoreEvent,
) -> Result<(), ClientError> {
    let bytes = serde_json::to_vec(body).map_err(|e| ClientError::Transport(e.to_string()))?;
    let request = kube::core::Request::new(CoreEvent::url_path(&(), Some(namespace)))
        .create(&PostParams::default(), bytes)
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    raw::send_discarding(client, request, "create")
        .await
        .map_err(client_error)
}

fn event_failed(queue: &Queue, key: &EventKey, error: &ClientError) {
    if let Some(m) = &queue.metrics {
        m.inc_background_writes_dropped("event", "failed");
    }
    // Events are best effort (upstream's recorder gives up too): a failure is worth a debug
    // line and a count, not a warning on every shutdown.
    tracing::debug!(
        pod = %format!("{}/{}", key.namespace, key.name),
        reason = %key.reason,
        %error,
        "recording the event failed"
    );
}

/// The patch that brings an Event object's series to `count` occurrences, the last at
/// `last`. `count` and `lastTimestamp` are set too, for readers of the older fields.
fn series_patch(count: i32, last: Timestamp) -> Value {
    json!({
        "series": {"count": count, "lastObservedTime": MicroTime(last)},
        "count": count,
        "lastTimestamp": Time(last),
    })
}

/// The Event object of an aggregate as it is created: the first occurrence, with its series
/// when more occurred before it was sent.
fn aggregate_event(a: &Aggregate, reporting_instance: &str) -> CoreEvent {
    let mut body = core_event(&a.event, reporting_instance, a.first);
    body.metadata.name = Some(a.object.clone());
    if a.count > 1 {
        body.count = Some(a.count);
        body.last_timestamp = Some(Time(a.last));
        body.series = Some(EventSeries {
            count: Some(a.count),
            last_observed_time: Some(MicroTime(a.last)),
        });
    }
    body
}

/// POSTs a Binding to `pods/{name}/binding`, with the pod's UID as precondition when known.
/// The answer is a Status saying nothing the outcome does not, so it is not decoded.
pub(crate) async fn bind(client: &kube::Client, binding: &Binding) -> Result<(), ClientError> {
    let request = bind_request(binding).map_err(|e| ClientError::Transport(e.to_string()))?;
    raw::send_discarding(client, request, "create_subresource")
        .await
        .map_err(client_error)
}

/// The request [`bind`] sends: what kube-rs' `create_subresource("binding", ...)` sends for
/// the core/v1 Binding, with the body written directly (only the names vary).
pub(crate) fn bind_request(
    binding: &Binding,
) -> Result<hyper::Request<Vec<u8>>, kube::core::request::Error> {
    let url = Pod::url_path(&(), Some(&binding.namespace));
    kube::core::Request::new(url).create_subresource(
        "binding",
        &binding.name,
        &PostParams::default(),
        binding_body(binding),
    )
}

/// The JSON of the core/v1 Binding of `binding`, byte for byte as serde serializes
/// k8s-openapi's `Binding` (fields in its order, absent ones left out).
pub(crate) fn binding_body(binding: &Binding) -> Vec<u8> {
    let mut body = Vec::with_capacity(160 + binding.name.len() + binding.node.len());
    body.extend_from_slice(br#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"#);
    push_json_str(&mut body, &binding.name);
    body.extend_from_slice(br#","namespace":"#);
    push_json_str(&mut body, &binding.namespace);
    if let Some(uid) = &binding.uid {
        body.extend_from_slice(br#","uid":"#);
        push_json_str(&mut body, uid);
    }
    body.extend_from_slice(br#"},"target":{"apiVersion":"v1","kind":"Node","name":"#);
    push_json_str(&mut body, &binding.node);
    body.extend_from_slice(b"}}");
    body
}

/// Appends `s` as a JSON string (quoted and escaped as serde_json escapes it).
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail, and a &str always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The strategic-merge patch of `pods/status` for `update`, or `None` when it changes
/// nothing. Conditions merge by `type`, so the pod's other conditions stay as they are.
pub(crate) fn status_patch(update: &PendingStatus, now: Timestamp) -> Option<Value> {
    let mut status = Map::new();
    if !update.conditions.is_empty() {
        let conditions: Vec<Value> = update
            .conditions
            .iter()
            .map(|c| {
                json!({
                    "type": c.type_,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastTransitionTime": Time(now),
                })
            })
            .collect();
        status.insert("conditions".into(), Value::Array(conditions));
    }
    match &update.nomination {
        Nomination::Keep => {}
        Nomination::Set(node) => {
            status.insert("nominatedNodeName".into(), json!(node));
        }
        Nomination::Clear => {
            status.insert("nominatedNodeName".into(), Value::Null);
        }
    }
    (!status.is_empty()).then(|| json!({ "status": status }))
}

/// Patches the conditions and the nomination of a pod.
pub(crate) async fn patch_pod_status(
    client: &kube::Client,
    update: &PendingStatus,
) -> Result<(), ClientError> {
    let Some(patch) = status_patch(update, Timestamp::now()) else {
        return Ok(());
    };
    // The answer is the whole pod, which nothing reads: not decoded.
    let request = kube::core::Request::new(Pod::url_path(&(), Some(&update.pod.namespace)))
        .patch_subresource(
            "status",
            &update.pod.name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    raw::send_discarding(client, request, "patch_status")
        .await
        .map_err(client_error)
}

/// `message` cut to at most `max` bytes, on a character boundary.
pub(crate) fn truncate_message(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// A name suffix unique within this process and increasing: the current time in nanoseconds
/// (as upstream's recorder names events), bumped when two events share a nanosecond.
fn unique_suffix(now: Timestamp) -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let nanos = u64::try_from(now.as_nanosecond()).unwrap_or(0);
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = nanos.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return format!("{next:x}"),
            Err(p) => prev = p,
        }
    }
}

/// The core/v1 Event for `event`, at `now`.
pub(crate) fn core_event(event: &PodEvent, reporting_instance: &str, now: Timestamp) -> CoreEvent {
    let pod = &event.regarding;
    CoreEvent {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", pod.name, unique_suffix(now))),
            namespace: Some(pod.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Pod".to_string()),
            namespace: Some(pod.namespace.clone()),
            name: Some(pod.name.clone()),
            uid: pod.uid.clone(),
            resource_version: event.resource_version.clone(),
            ..ObjectReference::default()
        },
        reason: Some(event.reason.clone()),
        message: Some(truncate_message(&event.message, MAX_EVENT_MESSAGE_BYTES).to_string()),
        type_: Some(event.event_type.as_str().to_string()),
        action: Some(event.action.clone()),
        reporting_component: Some(event.reporting_controller.clone()),
        reporting_instance: Some(reporting_instance.to_string()),
        source: Some(EventSource {
            component: Some(event.reporting_controller.clone()),
            host: None,
        }),
        // kubectl get events sorts and ages by lastTimestamp, describe shows it; eventTime is
        // what the events.k8s.io view requires.
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        ..CoreEvent::default()
    }
}

/// Deletes a pod, with its UID as precondition when given.
pub(crate) async fn delete_pod(client: &kube::Client, pod: &PodRef) -> Result<(), ClientError> {
    let params = DeleteParams {
        preconditions: pod.uid.as_ref().map(|uid| Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    pods.delete(&pod.name, &params)
        .await
        .map(drop)
        .map_err(client_error)
}

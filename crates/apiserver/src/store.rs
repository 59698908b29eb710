//! The in-memory object store: objects by (resource, namespace, name), one global
//! resourceVersion counter, and a bounded event log that watches are answered from.
//!
//! **Invariant:** every write happens under one lock, gets the next resourceVersion, and is
//! appended to the log before the lock is released, so a watch that starts under the same
//! lock sees every later event exactly once and in order.
//!
//! Live watchers read the shared event log from a cursor (the resourceVersion they have read
//! up to): a write wakes only the watchers of its resource, each of which then reads what
//! the log holds past its cursor. No watcher keeps a queue of its own, so an idle server
//! holds no per-watcher buffers, and a watcher of nodes sleeps through pod writes. A watcher
//! whose unread events of its resources fell out of the log is told so
//! ([`RecvError::Lagged`]) and ends its watch with 410, as a client resuming from that
//! resourceVersion would be told.
//!
//! **Invariant:** under `--data-dir`, a watcher is handed an event only once the write-ahead
//! log has fsynced it ([`LiveEvents::recv`], [`LiveEvents::wait_durable`]): watchers see only
//! writes that survive a crash, so a resourceVersion they saw is never reissued.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;

use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::meta;
use crate::resources::ResourceInfo;
use crate::selectors::Attrs;
use crate::status::ApiError;
use crate::wal::{Durable, Wal, WalError, OP_DELETE, OP_PUT};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted; the object is its last state stamped with the deletion's resourceVersion.
    Deleted,
}

impl EventType {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One write, as kept in the event log: the object encoded once (every watcher sends
/// the same bytes) and what selectors read of it, not the decoded object, so that the log
/// does not keep old versions of objects alive in their larger decoded form.
#[derive(Debug)]
pub struct WatchEvent {
    /// Storage key of the resource.
    pub storage: &'static str,
    /// What happened.
    pub kind: EventType,
    /// The write's resourceVersion.
    pub rv: u64,
    /// The object after the write, as JSON.
    pub encoded: Bytes,
    /// What selectors read of the object after the write.
    pub attrs: Attrs,
    /// What selectors read of the object before the write (for selector transitions), on
    /// updates.
    pub previous: Option<Attrs>,
}

impl WatchEvent {
    fn new(
        storage: &'static str,
        kind: EventType,
        rv: u64,
        object: &Value,
        previous: Option<&Value>,
    ) -> Self {
        WatchEvent {
            storage,
            kind,
            rv,
            encoded: Bytes::from(serde_json::to_vec(object).unwrap_or_default()),
            attrs: Attrs::of(storage, object),
            previous: previous.map(|p| Attrs::of(storage, p)),
        }
    }

    /// The object after the write, decoded again (for the few watchers that need more
    /// than its bytes: table output, version conversion, the in-server controllers).
    pub fn object(&self) -> Value {
        serde_json::from_slice(&self.encoded).unwrap_or(Value::Null)
    }
}

type Key = (String, String);

#[derive(Default)]
struct Inner {
    rv: u64,
    /// Every object as JSON: what lists and watches send, and several times smaller than
    /// the decoded tree; decoded when a request needs the object.
    objects: HashMap<&'static str, BTreeMap<Key, Bytes>>,
}

/// Events of the last writes, read by live watchers from their cursors, and the watchers to
/// wake when an event of their resources is appended. Locked after the store's lock when
/// both are taken; watchers take only this one.
#[derive(Default)]
struct EventLog {
    events: VecDeque<Arc<WatchEvent>>,
    capacity: usize,
    /// Highest resourceVersion no longer in the log: watches from below it are expired.
    compacted: u64,
    /// Per resource, the highest resourceVersion of its events no longer in the log: a live
    /// watcher of the resource whose cursor is below it has missed an event.
    compacted_of: HashMap<&'static str, u64>,
    /// Watchers of each resource.
    by_storage: HashMap<&'static str, Vec<Registered>>,
    /// Watchers of every resource (the in-server controllers that follow many).
    of_all: Vec<Registered>,
    /// Live watchers registered.
    count: usize,
    next_id: u64,
    /// The store is gone: nothing more is appended.
    closed: bool,
}

/// A live watcher, as the log knows it.
struct Registered {
    id: u64,
    wake: Arc<Wake>,
}

/// How a write wakes a watcher.
#[derive(Debug, Default)]
struct Wake {
    /// Holds one permit when the watcher is not waiting, so a write between the watcher's
    /// read of the log and its wait is not missed.
    notify: Notify,
    /// Writes that woke this watcher.
    woken: AtomicU64,
}

/// The resources a live watcher reads.
#[derive(Debug, Clone)]
enum Interest {
    Some(Vec<&'static str>),
    All,
}

impl Interest {
    fn covers(&self, storage: &str) -> bool {
        match self {
            Interest::Some(s) => s.contains(&storage),
            Interest::All => true,
        }
    }
}

/// Why a live watcher gets no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// Events of the watcher's resources that it had not read fell out of the event log:
    /// the watch cannot go on without a gap.
    #[error("the watcher fell behind the event log")]
    Lagged,
    /// No event will come: the store is gone, or the write-ahead log failed.
    #[error("the event log is closed")]
    Closed,
}

/// Events read from the log per lock of it, at most.
const READ_BATCH: usize = 256;
/// Events of other resources skipped per lock of the log, at most, so that a watcher of a
/// quiet resource catching up over many writes of others does not hold writers up.
const SCAN_BATCH: usize = 4096;

impl EventLog {
    fn lock(log: &Mutex<EventLog>) -> MutexGuard<'_, EventLog> {
        log.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends an event, dropping the oldest past the capacity, and wakes the watchers of
    /// its resource.
    fn append(&mut self, event: Arc<WatchEvent>) {
        if self.events.len() >= self.capacity {
            if let Some(old) = self.events.pop_front() {
                self.compacted = old.rv;
                self.compacted_of.insert(old.storage, old.rv);
            }
        }
        let storage = event.storage;
        self.events.push_back(event);
        let of_storage = self.by_storage.get(storage).into_iter().flatten();
        for w in of_storage.chain(&self.of_all) {
            w.wake.woken.fetch_add(1, Ordering::Relaxed);
            w.wake.notify.notify_one();
        }
    }

    fn register(&mut self, interest: &Interest) -> (u64, Arc<Wake>) {
        self.next_id += 1;
        let id = self.next_id;
        let wake = Arc::new(Wake::default());
        let registered = || Registered {
            id,
            wake: wake.clone(),
        };
        match interest {
            Interest::Some(storages) => {
                for s in storages {
                    self.by_storage.entry(s).or_default().push(registered());
                }
            }
            Interest::All => self.of_all.push(registered()),
        }
        self.count += 1;
        (id, wake)
    }

    fn unregister(&mut self, id: u64, interest: &Interest) {
        match interest {
            Interest::Some(storages) => {
                for s in storages {
                    if let Some(ws) = self.by_storage.get_mut(s) {
                        ws.retain(|w| w.id != id);
                        if ws.is_empty() {
                            self.by_storage.remove(s);
                        }
                    }
                }
            }
            Interest::All => self.of_all.retain(|w| w.id != id),
        }
        self.count = self.count.saturating_sub(1);
    }
}

/// Where a new watch starts.
#[derive(Debug)]
pub struct WatchStart {
    /// Current objects, for a watch from `""`/`0` or with `sendInitialEvents`.
    pub initial: Vec<Bytes>,
    /// Logged events after the requested resourceVersion.
    pub backlog: Vec<Arc<WatchEvent>>,
    /// Live events after the snapshot.
    pub live: LiveEvents,
    /// The resourceVersion of the snapshot.
    pub rv: u64,
}

/// A watcher's live events, read from the event log past its cursor, each handed out once
/// it is durable.
pub struct LiveEvents {
    log: Arc<Mutex<EventLog>>,
    id: u64,
    interest: Interest,
    wake: Arc<Wake>,
    /// The resourceVersion the log has been read up to.
    cursor: u64,
    /// Events read from the log and not handed out yet; the first may be waiting to be
    /// durable. Kept here so that `recv` is cancel-safe (a watch selects it against
    /// bookmarks and its deadline).
    pending: VecDeque<Arc<WatchEvent>>,
    /// The write-ahead log's durable resourceVersion; None without a data directory, where
    /// every write is as durable as it gets when it is made.
    durable: Option<tokio::sync::watch::Receiver<Durable>>,
}

impl std::fmt::Debug for LiveEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveEvents")
            .field("interest", &self.interest)
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl Drop for LiveEvents {
    fn drop(&mut self) {
        EventLog::lock(&self.log).unregister(self.id, &self.interest);
    }
}

impl LiveEvents {
    /// The next event of the watcher's resources, once it is durable. Cancel-safe: a dropped
    /// call loses no event.
    pub async fn recv(&mut self) -> Result<Arc<WatchEvent>, RecvError> {
        loop {
            if let Some(rv) = self.pending.front().map(|e| e.rv) {
                if !self.wait_durable(rv).await {
                    return Err(RecvError::Closed);
                }
                return self.pending.pop_front().ok_or(RecvError::Closed);
            }
            if !self.read()? {
                self.wake.notify.notified().await;
            }
        }
    }

    /// Reads the log past the cursor into `pending`; true when it read events or has more
    /// of the log to look at.
    fn read(&mut self) -> Result<bool, RecvError> {
        let log = EventLog::lock(&self.log);
        let missed = match &self.interest {
            Interest::All => log.compacted > self.cursor,
            Interest::Some(storages) => storages
                .iter()
                .any(|s| log.compacted_of.get(s).is_some_and(|&rv| rv > self.cursor)),
        };
        if missed {
            return Err(RecvError::Lagged);
        }
        let from = log.events.partition_point(|e| e.rv <= self.cursor);
        for (scanned, ev) in log.events.range(from..).enumerate() {
            if scanned == SCAN_BATCH || self.pending.len() == READ_BATCH {
                return Ok(true);
            }
            self.cursor = ev.rv;
            if self.interest.covers(ev.storage) {
                self.pending.push_back(ev.clone());
            }
        }
        if self.pending.is_empty() && log.closed {
            return Err(RecvError::Closed);
        }
        Ok(!self.pending.is_empty())
    }

    /// How many writes woke this watcher: writes of its resources only.
    pub fn woken(&self) -> u64 {
        self.wake.woken.load(Ordering::Relaxed)
    }

    /// Waits until every write up to `rv` is durable (at once without a data directory).
    /// False when the write-ahead log failed first.
    pub async fn wait_durable(&mut self, rv: u64) -> bool {
        let Some(durable) = &mut self.durable else {
            return true;
        };
        if durable.borrow().rv >= rv {
            return true;
        }
        durable
            .wait_for(|d| d.rv >= rv || d.failed.is_some())
            .await
            .is_ok_and(|d| d.rv >= rv)
    }
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    /// The event log, shared with the live watchers that read it.
    log: Arc<Mutex<EventLog>>,
    /// The write-ahead log under `--data-dir`; every write is appended to it under the lock.
    wal: Option<Wal>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let mut log = EventLog::lock(&self.log);
        log.closed = true;
        for w in log.by_storage.values().flatten().chain(&log.of_all) {
            w.wake.notify.notify_one();
        }
    }
}

/// A stored object, decoded (it was encoded by the store, so it decodes).
pub fn decode(json: &Bytes) -> Arc<Value> {
    Arc::new(serde_json::from_slice(json).unwrap_or(Value::Null))
}

/// What a write left: the object, and its bytes as stored (what a get, a list or a watch
/// of it sends), so that the write's response need not encode it again.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object after the write.
    pub object: Arc<Value>,
    /// The object's stored bytes; None for a dry run, which stores nothing.
    pub encoded: Option<Bytes>,
}

impl Written {
    fn stored(object: Arc<Value>, encoded: Bytes) -> Self {
        Written {
            object,
            encoded: Some(encoded),
        }
    }

    fn dry(object: Arc<Value>) -> Self {
        Written {
            object,
            encoded: None,
        }
    }
}

/// An object of a list, by its key, as stored.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The object's stored bytes.
    pub encoded: Bytes,
}

fn key(ns: &str, name: &str) -> Key {
    (ns.to_string(), name.to_string())
}

/// Whether a stored namespace is terminating (has `metadata.deletionTimestamp`). Every
/// create in a namespace asks; the stored bytes are decoded only when they hold the field's
/// name, which a namespace that is not terminating rarely does.
fn terminating(namespace: &Bytes) -> bool {
    contains(namespace, b"\"deletionTimestamp\"")
        && decode(namespace)
            .pointer("/metadata/deletionTimestamp")
            .is_some()
}

/// Whether `needle` occurs in `bytes`.
pub fn contains(bytes: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || bytes.windows(needle.len()).any(|w| w == needle)
}

fn name_of(obj: &Value) -> &str {
    meta::at(obj, &["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether anything but metadata and status differs (the object's generation then rises).
/// Compares in place: this runs on every write.
fn spec_changed(a: &Value, b: &Value) -> bool {
    const SKIP: [&str; 4] = ["metadata", "status", "kind", "apiVersion"];
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let differs = |x: &serde_json::Map<String, Value>,
                           y: &serde_json::Map<String, Value>| {
                x.iter()
                    .any(|(k, v)| !SKIP.contains(&k.as_str()) && y.get(k) != Some(v))
            };
            differs(a, b) || differs(b, a)
        }
        _ => a != b,
    }
}

/// The finalizer a terminating namespace carries in `spec.finalizers` until its content is
/// gone.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// How a delete request asks an object to go.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeleteOptions<'a> {
    /// Precondition: the object's uid.
    pub uid: Option<&'a str>,
    /// Precondition: the object's resourceVersion.
    pub resource_version: Option<&'a str>,
    /// The requested grace period (pods only; `None`: the pod's own).
    pub grace_period_seconds: Option<i64>,
    /// Check only, store nothing.
    pub dry_run: bool,
}

/// What a delete does to a pod.
#[derive(Debug, PartialEq)]
enum Graceful {
    /// Delete it now (or, with finalizers, mark it and wait for them).
    Now,
    /// It is already terminating with a grace period no longer than the one asked: nothing.
    Pending,
    /// Mark it terminating: this object, with `deletionTimestamp` (now + grace period) and
    /// `deletionGracePeriodSeconds`; the kubelet deletes it once its containers stopped.
    Mark(Value),
}

/// Upstream's graceful deletion of pods (rest.BeforeDelete with the pod strategy): a bound,
/// running pod is marked terminating, not removed; a second delete may only shorten the
/// grace period, and 0 removes it.
fn graceful_pod_deletion(pod: &Value, requested: Option<i64>) -> Graceful {
    // Negative asks count as 1 second.
    let requested = requested.map(|p| if p < 0 { 1 } else { p });
    let at = |p: &str| pod.pointer(&format!("/metadata/{p}"));
    let Some(since) = at("deletionTimestamp").and_then(Value::as_str) else {
        let period = crate::admission::pod_grace_period(pod, requested);
        if period == 0 {
            return Graceful::Now;
        }
        let mut marked = pod.clone();
        set_meta(
            &mut marked,
            "deletionTimestamp",
            json!(meta::shift_rfc3339(&meta::now_rfc3339(), period)),
        );
        set_meta(&mut marked, "deletionGracePeriodSeconds", json!(period));
        if let Some(g) = at("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
            set_meta(&mut marked, "generation", json!(g + 1));
        }
        return Graceful::Mark(marked);
    };
    let current = at("deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    match requested {
        // Marked with no grace left (or by a finalizer wait): the delete goes through.
        _ if current == 0 => Graceful::Now,
        Some(0) => Graceful::Now,
        Some(p) if p < current => {
            let mut marked = pod.clone();
            set_meta(
                &mut marked,
                "deletionTimestamp",
                json!(meta::shift_rfc3339(since, p - current)),
            );
            set_meta(&mut marked, "deletionGracePeriodSeconds", json!(p));
            Graceful::Mark(marked)
        }
        _ => Graceful::Pending,
    }
}

/// Whether an update finishes a deletion: the object was marked with no grace period left
/// and the update leaves no finalizer. A pod still in its grace period stays whatever is
/// written to it (its status, the scheduler's DisruptionTarget condition) until the kubelet,
/// or a client, deletes it with grace period 0; a namespace also waits for its
/// `spec.finalizers`, which the namespace controller empties.
///
/// Upstream: the generic registry's ShouldDeleteDuringUpdate, and the namespace storage's
/// override of it.
fn should_delete_during_update(info: &ResourceInfo, current: &Value, new: &Value) -> bool {
    let empty = |v: &Value, at: &str| {
        v.pointer(at)
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    };
    let no_grace_left = current
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_none_or(|g| g == 0);
    current.pointer("/metadata/deletionTimestamp").is_some()
        && no_grace_left
        && empty(new, "/metadata/finalizers")
        && (info.storage != "namespaces" || empty(new, "/spec/finalizers"))
}

fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"][field] = value;
}

impl Store {
    /// An empty store whose event log keeps the last `log_capacity` writes.
    pub fn new(log_capacity: usize) -> Self {
        Store {
            inner: Mutex::new(Inner::default()),
            log: Arc::new(Mutex::new(EventLog {
                capacity: log_capacity.max(1),
                ..EventLog::default()
            })),
            wal: None,
        }
    }

    /// A store kept durable in `dir` (see [`crate::wal`]): the state and resourceVersion are
    /// recovered from it (with `repair`, from what is left of a damaged directory), and the
    /// log is compacted when it grows past `compact_bytes`. Watches from before the recovered
    /// resourceVersion get 410 (the event log starts empty).
    pub fn open(
        log_capacity: usize,
        dir: &std::path::Path,
        compact_bytes: u64,
        repair: bool,
    ) -> Result<Self, WalError> {
        let (wal, recovered) = Wal::open(dir, compact_bytes, repair)?;
        let mut store = Store::new(log_capacity);
        {
            let inner = store
                .inner
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            inner.objects = recovered.objects;
            inner.rv = recovered.rv;
        }
        EventLog::lock(&store.log).compacted = recovered.rv;
        store.wal = Some(wal);
        Ok(store)
    }

    /// Waits until every write made so far is durable (a no-op without a data directory).
    /// Call before acknowledging a write.
    pub async fn sync(&self) -> Result<(), ApiError> {
        match &self.wal {
            None => Ok(()),
            Some(wal) => wal.sync().await.map_err(ApiError::internal),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock means a panic mid-write; the maps are still consistent because
        // every write is built before it is inserted.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The write-ahead log, under a data directory.
    #[cfg(test)]
    pub(crate) fn wal(&self) -> Option<&Wal> {
        self.wal.as_ref()
    }

    /// Watches open on the store: every HTTP watch being served, and the in-server
    /// controllers'.
    pub fn watch_count(&self) -> usize {
        EventLog::lock(&self.log).count
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    fn record(&self, inner: &mut Inner, event: WatchEvent) {
        if let Some(wal) = &self.wal {
            let op = if event.kind == EventType::Deleted {
                OP_DELETE
            } else {
                OP_PUT
            };
            if wal.append(op, event.rv, event.storage, &event.encoded) {
                wal.compact(event.rv, inner.objects.clone());
            }
        }
        EventLog::lock(&self.log).append(Arc::new(event));
    }

    /// One object.
    pub fn get(&self, info: &ResourceInfo, ns: &str, name: &str) -> Option<Arc<Value>> {
        let json = self
            .lock()
            .objects
            .get(info.storage)
            .and_then(|m| m.get(&key(ns, name)))
            .cloned();
        json.as_ref().map(decode)
    }

    /// One object's stored bytes: what a get of it sends.
    pub fn get_encoded(&self, info: &ResourceInfo, ns: &str, name: &str) -> Option<Bytes> {
        self.lock()
            .objects
            .get(info.storage)
            .and_then(|m| m.get(&key(ns, name)))
            .cloned()
    }

    /// All objects of a resource (in one namespace, or all) as stored, sorted by namespace
    /// and name, with the resourceVersion of the snapshot. Nothing is decoded.
    pub fn list_encoded(&self, info: &ResourceInfo, ns: Option<&str>) -> (Vec<Listed>, u64) {
        let inner = self.lock();
        let listed = |((namespace, name), encoded): (&Key, &Bytes)| Listed {
            namespace: namespace.clone(),
            name: name.clone(),
            encoded: encoded.clone(),
        };
        let items = match inner.objects.get(info.storage) {
            None => Vec::new(),
            Some(m) => match ns {
                None => m.iter().map(listed).collect(),
                Some(ns) => m
                    .range(key(ns, "")..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(listed)
                    .collect(),
            },
        };
        (items, inner.rv)
    }

    /// All objects of a resource (in one namespace, or all), sorted by namespace and name,
    /// with the resourceVersion of the snapshot.
    pub fn list(&self, info: &ResourceInfo, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let (items, rv): (Vec<Bytes>, u64) = {
            let inner = self.lock();
            let items = match inner.objects.get(info.storage) {
                None => Vec::new(),
                Some(m) => match ns {
                    None => m.values().cloned().collect(),
                    Some(ns) => m
                        .range(key(ns, "")..)
                        .take_while(|((n, _), _)| n == ns)
                        .map(|(_, v)| v.clone())
                        .collect(),
                },
            };
            (items, inner.rv)
        };
        (items.iter().map(decode).collect(), rv)
    }

    /// The objects of a resource (in one namespace, or all) whose stored bytes pass `keep`,
    /// decoded, sorted by namespace and name: a cheap test of the bytes spares decoding the
    /// objects a caller would only skip.
    pub fn list_where(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<Arc<Value>> {
        let items: Vec<Bytes> = {
            let inner = self.lock();
            match inner.objects.get(info.storage) {
                None => Vec::new(),
                Some(m) => match ns {
                    None => m.values().filter(|v| keep(v)).cloned().collect(),
                    Some(ns) => m
                        .range(key(ns, "")..)
                        .take_while(|((n, _), _)| n == ns)
                        .map(|(_, v)| v)
                        .filter(|v| keep(v))
                        .cloned()
                        .collect(),
                },
            }
        };
        items.iter().map(decode).collect()
    }

    /// Creates an object: assigns the name from `generateName` if needed, uid,
    /// creationTimestamp, generation and resourceVersion. With `dry_run` nothing is stored.
    pub fn create(
        &self,
        info: &ResourceInfo,
        ns: &str,
        obj: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.create_written(info, ns, obj, dry_run)
            .map(|w| w.object)
    }

    /// [`Store::create`], with the bytes stored.
    pub fn create_written(
        &self,
        info: &ResourceInfo,
        ns: &str,
        mut obj: Value,
        dry_run: bool,
    ) -> Result<Written, ApiError> {
        let mut inner = self.lock();
        if info.namespaced {
            let Some(namespace) = inner
                .objects
                .get("namespaces")
                .and_then(|m| m.get(&key("", ns)))
            else {
                let ns_info = crate::resources::by_storage("namespaces")
                    .ok_or_else(|| ApiError::internal("namespaces not served"))?;
                return Err(ApiError::not_found(ns_info, ns));
            };
            if terminating(namespace) {
                return Err(ApiError::namespace_terminating(info, name_of(&obj), ns));
            }
        }
        let mut name = name_of(&obj).to_string();
        if name.is_empty() {
            let prefix = obj
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    info,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            let taken = |inner: &Inner, n: &str| {
                inner
                    .objects
                    .get(info.storage)
                    .is_some_and(|m| m.contains_key(&key(ns, n)))
            };
            // Upstream retries a collision internally; a few tries make one vanishingly rare.
            name = format!("{prefix}{}", meta::name_suffix());
            for _ in 0..8 {
                if !taken(&inner, &name) {
                    break;
                }
                name = format!("{prefix}{}", meta::name_suffix());
            }
            set_meta(&mut obj, "name", json!(name));
        }
        let inner = &mut *inner;
        let rv = inner.rv + 1;
        // The new object's place, found once: taken means it exists, vacant is where it goes.
        let std::collections::btree_map::Entry::Vacant(slot) = inner
            .objects
            .entry(info.storage)
            .or_default()
            .entry(key(ns, &name))
        else {
            return Err(ApiError::already_exists(info, &name));
        };
        if info.namespaced {
            set_meta(&mut obj, "namespace", json!(ns));
        } else if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("namespace");
        }
        // A uid given by admission (a Job's, which its generated labels carry) is kept;
        // clients' uids are dropped before admission.
        if meta::at(&obj, &["metadata", "uid"])
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            set_meta(&mut obj, "uid", json!(meta::new_uid()));
        }
        set_meta(&mut obj, "creationTimestamp", json!(meta::now_rfc3339()));
        set_meta(&mut obj, "generation", json!(1));
        set_meta(&mut obj, "resourceVersion", json!(rv.to_string()));
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
        }
        let obj = Arc::new(obj);
        if dry_run {
            return Ok(Written::dry(obj));
        }
        let event = WatchEvent::new(info.storage, EventType::Added, rv, &obj, None);
        let encoded = event.encoded.clone();
        slot.insert(encoded.clone());
        inner.rv = rv;
        self.record(inner, event);
        Ok(Written::stored(obj, encoded))
    }

    /// Read-modify-write of one object under the store lock: `f` gets the current object and
    /// returns the new one. Server-owned metadata is kept, the generation rises on a spec
    /// change, and a write that changes nothing is not a write (no new resourceVersion). An
    /// object being deleted whose last finalizer is removed is deleted.
    pub fn update(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        dry_run: bool,
        f: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        self.update_written(info, ns, name, dry_run, f)
            .map(|w| w.object)
    }

    /// [`Store::update`], with the bytes stored.
    pub fn update_written(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        dry_run: bool,
        f: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Written, ApiError> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        // The object's slot, found once and written in place (the key is not searched for
        // again to store the new version).
        let slot = inner
            .objects
            .get_mut(info.storage)
            .and_then(|m| m.get_mut(&key(ns, name)))
            .ok_or_else(|| ApiError::not_found(info, name))?;
        let current_encoded = slot.clone();
        let current = decode(&current_encoded);
        let mut new = f(&current)?;
        if !new.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match meta::at(&current, &["metadata", field]) {
                Some(v) => set_meta(&mut new, field, v.clone()),
                None => {
                    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove(field);
                    }
                }
            }
        }
        let generation = meta::at(&current, &["metadata", "generation"])
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let generation = if spec_changed(&current, &new) {
            generation + 1
        } else {
            generation
        };
        set_meta(&mut new, "generation", json!(generation));
        set_meta(
            &mut new,
            "resourceVersion",
            meta::at(&current, &["metadata", "resourceVersion"])
                .cloned()
                .unwrap_or(Value::Null),
        );
        if new == *current {
            return Ok(Written::stored(current, current_encoded));
        }
        let rv = inner.rv + 1;
        set_meta(&mut new, "resourceVersion", json!(rv.to_string()));
        let new = Arc::new(new);
        if dry_run {
            return Ok(Written::dry(new));
        }
        let finished = should_delete_during_update(info, &current, &new);
        if finished {
            inner.rv = rv;
            if let Some(m) = inner.objects.get_mut(info.storage) {
                m.remove(&key(ns, name));
            }
            let event =
                WatchEvent::new(info.storage, EventType::Deleted, rv, &new, Some(&*current));
            let encoded = event.encoded.clone();
            self.record(inner, event);
            return Ok(Written::stored(new, encoded));
        }
        let event = WatchEvent::new(info.storage, EventType::Modified, rv, &new, Some(&*current));
        let encoded = event.encoded.clone();
        *slot = encoded.clone();
        inner.rv = rv;
        self.record(inner, event);
        Ok(Written::stored(new, encoded))
    }

    /// Deletes an object (or, with finalizers, marks it with a deletionTimestamp). The
    /// preconditions (`uid`, `resourceVersion`) give 409 on mismatch. Deleting a namespace
    /// deletes everything in it first.
    pub fn delete(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        opts: DeleteOptions<'_>,
    ) -> Result<Arc<Value>, ApiError> {
        let preconditions = (opts.uid, opts.resource_version);
        let dry_run = opts.dry_run;
        let mut inner = self.lock();
        let current = inner
            .objects
            .get(info.storage)
            .and_then(|m| m.get(&key(ns, name)))
            .map(decode)
            .ok_or_else(|| ApiError::not_found(info, name))?;
        let (uid, rv_pre) = preconditions;
        if let Some(uid) = uid {
            if current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
                return Err(ApiError::conflict(
                    info,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        current
                            .pointer("/metadata/uid")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                    ),
                ));
            }
        }
        if let Some(rv) = rv_pre {
            if current
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                != Some(rv)
            {
                return Err(ApiError::modified(info, name));
            }
        }
        if dry_run {
            return Ok(current);
        }
        if info.storage == "pods" {
            match graceful_pod_deletion(&current, opts.grace_period_seconds) {
                Graceful::Now => {}
                Graceful::Pending => return Ok(current),
                Graceful::Mark(mut marked) => {
                    let rv = inner.rv + 1;
                    inner.rv = rv;
                    set_meta(&mut marked, "resourceVersion", json!(rv.to_string()));
                    let marked = Arc::new(marked);
                    let event = WatchEvent::new(
                        info.storage,
                        EventType::Modified,
                        rv,
                        &marked,
                        Some(&*current),
                    );
                    inner
                        .objects
                        .entry(info.storage)
                        .or_default()
                        .insert(key(ns, name), event.encoded.clone());
                    self.record(&mut inner, event);
                    return Ok(marked);
                }
            }
        }
        if info.storage == "namespaces" {
            if current.pointer("/metadata/deletionTimestamp").is_some() {
                // Already terminating: the namespace controller finishes it.
                return Ok(current);
            }
            let rv = inner.rv + 1;
            inner.rv = rv;
            let mut marked = (*current).clone();
            set_meta(&mut marked, "resourceVersion", json!(rv.to_string()));
            set_meta(&mut marked, "deletionTimestamp", json!(meta::now_rfc3339()));
            set_meta(&mut marked, "deletionGracePeriodSeconds", json!(0));
            if !marked.get("spec").is_some_and(Value::is_object) {
                marked["spec"] = json!({});
            }
            marked["spec"]["finalizers"] = json!([NAMESPACE_FINALIZER]);
            if !marked.get("status").is_some_and(Value::is_object) {
                marked["status"] = json!({});
            }
            marked["status"]["phase"] = json!("Terminating");
            let marked = Arc::new(marked);
            let event = WatchEvent::new(
                info.storage,
                EventType::Modified,
                rv,
                &marked,
                Some(&*current),
            );
            inner
                .objects
                .entry(info.storage)
                .or_default()
                .insert(key(ns, name), event.encoded.clone());
            self.record(&mut inner, event);
            return Ok(marked);
        }
        let has_finalizers = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let rv = inner.rv + 1;
        inner.rv = rv;
        let mut last = (*current).clone();
        set_meta(&mut last, "resourceVersion", json!(rv.to_string()));
        if has_finalizers {
            let grace = current
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let deletion_timestamp = match current
                .pointer("/metadata/deletionTimestamp")
                .and_then(Value::as_str)
            {
                None => meta::now_rfc3339(),
                Some(_) if grace == 0 => {
                    inner.rv = rv - 1;
                    return Ok(current);
                }
                // A pod's graceful deletion cut short (grace period 0) while finalizers
                // hold it: with no grace left, removing the last finalizer removes it.
                Some(since) => meta::shift_rfc3339(since, -grace).unwrap_or_else(meta::now_rfc3339),
            };
            set_meta(&mut last, "deletionTimestamp", json!(deletion_timestamp));
            set_meta(&mut last, "deletionGracePeriodSeconds", json!(0));
            let last = Arc::new(last);
            let event = WatchEvent::new(
                info.storage,
                EventType::Modified,
                rv,
                &last,
                Some(&*current),
            );
            inner
                .objects
                .entry(info.storage)
                .or_default()
                .insert(key(ns, name), event.encoded.clone());
            self.record(&mut inner, event);
            return Ok(last);
        }
        let last = Arc::new(last);
        if let Some(m) = inner.objects.get_mut(info.storage) {
            m.remove(&key(ns, name));
        }
        self.record(
            &mut inner,
            WatchEvent::new(info.storage, EventType::Deleted, rv, &last, Some(&*current)),
        );
        Ok(last)
    }

    /// The namespace controller's work on a terminating namespace: deletes every object in
    /// it as a client would (pods gracefully, objects with finalizers marked), and once
    /// nothing is left removes the namespace. Returns whether it is gone. A namespace that is
    /// not terminating is left alone.
    ///
    /// Upstream: pkg/controller/namespace (deletion of the content, then the `kubernetes`
    /// finalizer removed and the namespace deleted).
    pub fn finalize_namespace(&self, name: &str) -> Result<bool, ApiError> {
        self.delete_namespace_content(name)?;
        Ok(self.remove_namespace_if_empty(name))
    }

    /// Deletes every object in a terminating namespace (pods gracefully, objects with
    /// finalizers marked); a namespace that is not terminating is left alone.
    pub fn delete_namespace_content(&self, name: &str) -> Result<(), ApiError> {
        let namespaces = crate::resources::by_storage("namespaces")
            .ok_or_else(|| ApiError::internal("namespaces not served"))?;
        let terminating = self
            .get(namespaces, "", name)
            .is_some_and(|n| n.pointer("/metadata/deletionTimestamp").is_some());
        if !terminating {
            return Ok(());
        }
        for (storage, names) in self.namespace_contents(name) {
            let Some(info) = crate::resources::by_storage(storage) else {
                continue;
            };
            for object in names {
                match self.delete(info, name, &object, DeleteOptions::default()) {
                    // Gone meanwhile: that is what was asked.
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Removes a terminating namespace once nothing is left in it and no finalizer in its
    /// metadata holds it; returns whether it is gone (also when it was already).
    pub fn remove_namespace_if_empty(&self, name: &str) -> bool {
        let mut inner = self.lock();
        let left = inner.objects.iter().any(|(storage, m)| {
            *storage != "namespaces"
                && m.range(key(name, "")..)
                    .next()
                    .is_some_and(|((n, _), _)| n == name)
        });
        let Some(current) = inner
            .objects
            .get("namespaces")
            .and_then(|m| m.get(&key("", name)))
            .map(decode)
        else {
            return true;
        };
        let held = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if left || held || current.pointer("/metadata/deletionTimestamp").is_none() {
            return false;
        }
        inner.rv += 1;
        let rv = inner.rv;
        let mut last = (*current).clone();
        set_meta(&mut last, "resourceVersion", json!(rv.to_string()));
        if let Some(spec) = last.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("finalizers");
        }
        if let Some(m) = inner.objects.get_mut("namespaces") {
            m.remove(&key("", name));
        }
        self.record(
            &mut inner,
            WatchEvent::new("namespaces", EventType::Deleted, rv, &last, Some(&*current)),
        );
        true
    }

    /// The names of the objects in namespace `ns`, per storage.
    fn namespace_contents(&self, ns: &str) -> Vec<(&'static str, Vec<String>)> {
        let inner = self.lock();
        inner
            .objects
            .iter()
            .filter(|(storage, _)| **storage != "namespaces")
            .map(|(storage, m)| {
                let names = m
                    .range(key(ns, "")..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|((_, name), _)| name.clone())
                    .collect::<Vec<_>>();
                (*storage, names)
            })
            .filter(|(_, names)| !names.is_empty())
            .collect()
    }

    /// Starts a watch on `storage`: from `None` (`""`/`0`) with the current objects, or from
    /// a resourceVersion with the logged events after it. Too old a resourceVersion is 410.
    /// The live events are `storage`'s only.
    pub fn watch(&self, storage: &'static str, from: Option<u64>) -> Result<WatchStart, ApiError> {
        self.watch_of(storage, from, Interest::Some(vec![storage]))
    }

    /// [`Store::watch`] whose live events are also those of the `others` resources (for an
    /// in-server controller that follows several).
    pub fn watch_also(
        &self,
        storage: &'static str,
        from: Option<u64>,
        others: &[&'static str],
    ) -> Result<WatchStart, ApiError> {
        let mut storages = vec![storage];
        storages.extend(others.iter().filter(|s| **s != storage));
        self.watch_of(storage, from, Interest::Some(storages))
    }

    /// [`Store::watch`] whose live events are every resource's (for an in-server controller
    /// that follows them all, as the garbage collector does).
    pub fn watch_all(
        &self,
        storage: &'static str,
        from: Option<u64>,
    ) -> Result<WatchStart, ApiError> {
        self.watch_of(storage, from, Interest::All)
    }

    fn watch_of(
        &self,
        storage: &'static str,
        from: Option<u64>,
        interest: Interest,
    ) -> Result<WatchStart, ApiError> {
        let inner = self.lock();
        let mut log = EventLog::lock(&self.log);
        let backlog = match from {
            None => Vec::new(),
            Some(rv) if rv < log.compacted => return Err(ApiError::expired(rv, log.compacted + 1)),
            Some(rv) => {
                let after = log.events.partition_point(|e| e.rv <= rv);
                log.events
                    .range(after..)
                    .filter(|e| e.storage == storage)
                    .cloned()
                    .collect()
            }
        };
        let initial = match from {
            None => inner
                .objects
                .get(storage)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default(),
            Some(_) => Vec::new(),
        };
        let (id, wake) = log.register(&interest);
        drop(log);
        let live = LiveEvents {
            log: self.log.clone(),
            id,
            interest,
            wake,
            cursor: inner.rv,
            pending: VecDeque::new(),
            durable: self.wal.as_ref().map(Wal::durable),
        };
        Ok(WatchStart {
            initial,
            backlog,
            live,
            rv: inner.rv,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::lookup;

    fn info(r: &str) -> &'static ResourceInfo {
        lookup("", "v1", r).expect("served")
    }

    fn store_with_ns() -> Store {
        let s = Store::new(4);
        s.create(
            info("namespaces"),
            "",
            json!({"metadata": {"name": "default"}}),
            false,
        )
        .expect("namespace");
        s
    }

    fn pod(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c"}]}})
    }

    /// What a pod deletion should do: delete now, nothing, mark it to go in N seconds from
    /// now, or move an existing mark to a timestamp.
    #[derive(Debug, PartialEq)]
    enum Want {
        Now,
        Pending,
        MarkIn(i64),
        MarkAt(&'static str, i64),
    }

    fn bound(extra_meta: Value, grace: Option<i64>, phase: &str) -> Value {
        let mut p = json!({"metadata": {"name": "p", "generation": 1}, "spec": {"nodeName": "n"},
            "status": {"phase": phase}});
        if let Some(g) = grace {
            p["spec"]["terminationGracePeriodSeconds"] = json!(g);
        }
        if let (Some(m), Some(extra)) = (p["metadata"].as_object_mut(), extra_meta.as_object()) {
            m.extend(extra.clone());
        }
        p
    }

    #[rstest::rstest]
    #[case::bound_pod_gets_its_own_grace_period(bound(json!({}), Some(45), "Running"), None, Want::MarkIn(45))]
    #[case::default_grace_period_is_30(bound(json!({}), None, "Running"), None, Want::MarkIn(30))]
    #[case::request_overrides(bound(json!({}), Some(45), "Running"), Some(5), Want::MarkIn(5))]
    #[case::negative_request_is_one_second(bound(json!({}), Some(45), "Running"), Some(-3), Want::MarkIn(1))]
    #[case::zero_deletes_at_once(bound(json!({}), Some(45), "Running"), Some(0), Want::Now)]
    #[case::unbound_pod_goes_at_once(json!({"metadata": {"name": "p"}, "spec": {}}), Some(30), Want::Now)]
    #[case::finished_pod_goes_at_once(bound(json!({}), Some(45), "Succeeded"), None, Want::Now)]
    #[case::terminating_pod_again_is_pending(
        bound(json!({"deletionTimestamp": "2030-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}), None, "Running"),
        None,
        Want::Pending
    )]
    #[case::a_longer_grace_period_is_ignored(
        bound(json!({"deletionTimestamp": "2030-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}), None, "Running"),
        Some(60),
        Want::Pending
    )]
    #[case::a_shorter_grace_period_moves_the_deadline(
        bound(json!({"deletionTimestamp": "2030-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}), None, "Running"),
        Some(10),
        Want::MarkAt("2030-01-01T00:00:10Z", 10)
    )]
    #[case::zero_ends_a_pending_deletion(
        bound(json!({"deletionTimestamp": "2030-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}), None, "Running"),
        Some(0),
        Want::Now
    )]
    fn graceful_pod_deletion_follows_upstream(
        #[case] pod: Value,
        #[case] requested: Option<i64>,
        #[case] want: Want,
    ) {
        let got = match graceful_pod_deletion(&pod, requested) {
            Graceful::Now => Want::Now,
            Graceful::Pending => Want::Pending,
            Graceful::Mark(m) => {
                let ts = m["metadata"]["deletionTimestamp"].as_str().unwrap_or("");
                let grace = m["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(-1);
                match &want {
                    Want::MarkAt(at, _) if *at == ts => Want::MarkAt(at, grace),
                    _ => {
                        // Now + grace, give or take the second that may tick meanwhile.
                        let from_now = -meta::age_seconds(ts).unwrap_or(i64::MIN / 2);
                        if (from_now - grace).abs() > 1 {
                            panic!("deletionTimestamp {ts} is not {grace}s from now");
                        }
                        // The first mark bumps the generation.
                        assert_eq!(m["metadata"]["generation"], json!(2));
                        Want::MarkIn(grace)
                    }
                }
            }
        };
        assert_eq!(got, want);
    }

    #[test]
    fn a_bound_pod_is_marked_then_deleted_with_grace_period_zero() {
        let s = store_with_ns();
        let mut p = pod("a");
        p["spec"]["nodeName"] = json!("n");
        s.create(info("pods"), "default", p, false)
            .expect("created");
        let marked = s
            .delete(info("pods"), "default", "a", DeleteOptions::default())
            .expect("marked");
        let still_there = s.get(info("pods"), "default", "a").is_some();
        let zero = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        s.delete(info("pods"), "default", "a", zero)
            .expect("deleted");
        assert_eq!(
            (
                marked.pointer("/metadata/deletionGracePeriodSeconds"),
                still_there,
                s.get(info("pods"), "default", "a").is_none()
            ),
            (Some(&json!(30)), true, true)
        );
    }

    /// One step in a pod's deletion, as a client or the kubelet takes it.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// DELETE with this grace period (None: the pod's own).
        Delete(Option<i64>),
        /// A status write, as the scheduler's DisruptionTarget condition.
        AddCondition,
        /// An update that removes every finalizer.
        DropFinalizers,
    }

    #[rstest::rstest]
    #[case::bound_pod_in_graceful_deletion_survives_a_status_update(
        false,
        &[Step::Delete(None), Step::AddCondition],
        Some((Some(json!(30)), Some(json!([{"type": "DisruptionTarget", "status": "True"}]))))
    )]
    #[case::bound_pod_in_graceful_deletion_goes_with_grace_period_zero(
        false,
        &[Step::Delete(None), Step::AddCondition, Step::Delete(Some(0))],
        None
    )]
    #[case::bound_pod_with_a_finalizer_stays_until_the_kubelet_deletes_it(
        true,
        &[Step::Delete(None), Step::DropFinalizers],
        Some((Some(json!(30)), None))
    )]
    #[case::bound_pod_deleted_with_grace_zero_goes_with_its_last_finalizer(
        true,
        &[Step::Delete(None), Step::Delete(Some(0)), Step::DropFinalizers],
        None
    )]
    fn graceful_deletion_ends_only_with_grace_period_zero(
        #[case] finalizer: bool,
        #[case] steps: &[Step],
        #[case] want: Option<(Option<Value>, Option<Value>)>,
    ) {
        let s = store_with_ns();
        let pods = info("pods");
        let mut p = pod("a");
        p["spec"]["nodeName"] = json!("n");
        if finalizer {
            p["metadata"]["finalizers"] = json!(["x"]);
        }
        s.create(pods, "default", p, false).expect("created");
        for step in steps {
            match *step {
                Step::Delete(grace) => {
                    let opts = DeleteOptions {
                        grace_period_seconds: grace,
                        ..DeleteOptions::default()
                    };
                    s.delete(pods, "default", "a", opts).expect("delete");
                }
                Step::AddCondition => {
                    s.update(pods, "default", "a", false, |c| {
                        let mut c = c.clone();
                        c["status"]["conditions"] =
                            json!([{"type": "DisruptionTarget", "status": "True"}]);
                        Ok(c)
                    })
                    .expect("status update");
                }
                Step::DropFinalizers => {
                    s.update(pods, "default", "a", false, |c| {
                        let mut c = c.clone();
                        c["metadata"]["finalizers"] = json!([]);
                        Ok(c)
                    })
                    .expect("finalizers removed");
                }
            }
        }
        let got = s.get(pods, "default", "a").map(|p| {
            (
                p.pointer("/metadata/deletionGracePeriodSeconds").cloned(),
                p.pointer("/status/conditions").cloned(),
            )
        });
        assert_eq!(got, want);
    }

    #[test]
    fn terminating_namespace_survives_an_update_while_its_spec_finalizer_holds_it() {
        let s = store_with_ns();
        s.create(info("pods"), "default", pod("a"), false)
            .expect("created");
        s.delete(info("namespaces"), "", "default", DeleteOptions::default())
            .expect("marked");
        s.update(info("namespaces"), "", "default", false, |c| {
            let mut c = c.clone();
            c["metadata"]["labels"] = json!({"touched": "yes"});
            Ok(c)
        })
        .expect("label update");
        let left = s.get(info("namespaces"), "", "default").map(|n| {
            (
                n.pointer("/status/phase").cloned(),
                n.pointer("/metadata/labels/touched").cloned(),
            )
        });
        assert_eq!(left, Some((Some(json!("Terminating")), Some(json!("yes")))));
    }

    #[test]
    fn create_sets_server_owned_metadata() {
        let s = store_with_ns();
        let p = s
            .create(info("pods"), "default", pod("a"), false)
            .expect("created");
        assert_eq!(p.pointer("/metadata/resourceVersion"), Some(&json!("2")));
        assert_eq!(p.pointer("/metadata/generation"), Some(&json!(1)));
        assert_eq!(p.pointer("/metadata/namespace"), Some(&json!("default")));
        assert!(p.pointer("/metadata/uid").is_some());
        assert!(p.pointer("/metadata/creationTimestamp").is_some());
    }

    #[test]
    fn generate_name_appends_five_characters() {
        let s = store_with_ns();
        let p = s
            .create(
                info("pods"),
                "default",
                json!({"metadata": {"generateName": "web-"}}),
                false,
            )
            .expect("created");
        let name = p
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    }

    #[test]
    fn create_in_missing_namespace_is_namespace_not_found() {
        let s = store_with_ns();
        let err = s
            .create(info("pods"), "nope", pod("a"), false)
            .expect_err("404");
        assert_eq!(err.message, "namespaces \"nope\" not found");
    }

    #[test]
    fn create_twice_is_already_exists() {
        let s = store_with_ns();
        s.create(info("pods"), "default", pod("a"), false)
            .expect("created");
        let err = s
            .create(info("pods"), "default", pod("a"), false)
            .expect_err("409");
        assert_eq!((err.code, err.reason), (409, "AlreadyExists"));
    }

    #[test]
    fn dry_run_stores_nothing() {
        let s = store_with_ns();
        s.create(info("pods"), "default", pod("a"), true)
            .expect("dry run");
        assert!(s.get(info("pods"), "default", "a").is_none());
        assert_eq!(s.resource_version(), 1);
    }

    #[test]
    fn update_bumps_generation_only_on_spec_change_and_skips_no_ops() {
        let s = store_with_ns();
        s.create(info("pods"), "default", pod("a"), false)
            .expect("created");
        let same = s
            .update(info("pods"), "default", "a", false, |c| Ok(c.clone()))
            .expect("no-op");
        assert_eq!(same.pointer("/metadata/resourceVersion"), Some(&json!("2")));
        let labeled = s
            .update(info("pods"), "default", "a", false, |c| {
                let mut c = c.clone();
                c["metadata"]["labels"] = json!({"a": "b"});
                Ok(c)
            })
            .expect("labeled");
        assert_eq!(labeled.pointer("/metadata/generation"), Some(&json!(1)));
        let changed = s
            .update(info("pods"), "default", "a", false, |c| {
                let mut c = c.clone();
                c["spec"]["nodeName"] = json!("n1");
                Ok(c)
            })
            .expect("changed");
        assert_eq!(changed.pointer("/metadata/generation"), Some(&json!(2)));
        assert_eq!(
            changed.pointer("/metadata/resourceVersion"),
            Some(&json!("4"))
        );
    }

    #[test]
    fn delete_with_stale_precondition_is_conflict() {
        let s = store_with_ns();
        s.create(info("pods"), "default", pod("a"), false)
            .expect("created");
        let err = s
            .delete(
                info("pods"),
                "default",
                "a",
                DeleteOptions {
                    resource_version: Some("1"),
                    ..DeleteOptions::default()
                },
            )
            .expect_err("409");
        assert_eq!((err.code, err.reason), (409, "Conflict"));
        let gone = s
            .delete(
                info("pods"),
                "default",
                "a",
                DeleteOptions {
                    resource_version: Some("2"),
                    ..DeleteOptions::default()
                },
            )
            .expect("deleted");
        assert_eq!(gone.pointer("/metadata/resourceVersion"), Some(&json!("3")));
    }

    #[test]
    fn finalizers_hold_deletion_until_removed() {
        let s = store_with_ns();
        let mut p = pod("a");
        p["metadata"]["finalizers"] = json!(["x"]);
        s.create(info("pods"), "default", p, false)
            .expect("created");
        let marked = s
            .delete(info("pods"), "default", "a", DeleteOptions::default())
            .expect("marked");
        assert!(marked.pointer("/metadata/deletionTimestamp").is_some());
        assert!(s.get(info("pods"), "default", "a").is_some());
        s.update(info("pods"), "default", "a", false, |c| {
            let mut c = c.clone();
            c["metadata"]["finalizers"] = json!([]);
            Ok(c)
        })
        .expect("finalizer removed");
        assert!(s.get(info("pods"), "default", "a").is_none());
    }

    #[test]
    fn deleting_a_namespace_deletes_its_objects() {
        let s = store_with_ns();
        s.create(info("pods"), "default", pod("a"), false)
            .expect("created");
        let marked = s
            .delete(info("namespaces"), "", "default", DeleteOptions::default())
            .expect("deleted");
        let refused = s
            .create(info("pods"), "default", pod("b"), false)
            .map(|_| ())
            .map_err(|e| e.message);
        let gone = s.finalize_namespace("default").expect("finalized");
        assert_eq!(
            (
                marked.pointer("/status/phase"),
                marked.pointer("/spec/finalizers"),
                marked.pointer("/metadata/deletionTimestamp").is_some(),
                refused,
                gone,
                s.list(info("pods"), None).0.len(),
                s.get(info("namespaces"), "", "default").is_none(),
            ),
            (
                Some(&json!("Terminating")),
                Some(&json!(["kubernetes"])),
                true,
                Err("pods \"b\" is forbidden: unable to create new content in namespace default because it is being terminated".to_string()),
                true,
                0,
                true
            )
        );
    }

    fn node(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    /// Runs `f` to completion on a fresh runtime, failing the test after 10 seconds.
    fn within<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(10), f).await })
            .expect("in time")
    }

    /// Whether `live` has an event ready now, without waiting.
    fn ready(live: &mut LiveEvents) -> bool {
        use std::future::Future as _;
        let mut next = std::pin::pin!(live.recv());
        let waker = std::task::Waker::noop();
        next.as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
            .is_ready()
    }

    #[test]
    fn a_watch_of_nodes_gets_only_node_events_and_is_woken_only_by_node_writes() {
        let s = store_with_ns();
        let mut nodes = s.watch("nodes", None).expect("watch").live;
        let pods = s.watch("pods", None).expect("watch").live;
        for n in ["a", "b", "c"] {
            s.create(info("pods"), "default", pod(n), false)
                .expect("pod");
        }
        let before_node = (nodes.woken(), pods.woken(), ready(&mut nodes));
        s.create(info("nodes"), "", node("n1"), false)
            .expect("node");
        let got = within(nodes.recv()).map(|e| (e.storage, e.rv));
        assert_eq!(
            (before_node, nodes.woken(), pods.woken(), got),
            ((0, 3, false), 1, 3, Ok(("nodes", 5)))
        );
    }

    #[test]
    fn writes_while_a_watcher_reads_elsewhere_wake_it_once_and_are_read_in_order() {
        let s = store_with_ns();
        let mut pods = s.watch("pods", None).expect("watch").live;
        for n in ["a", "b", "c", "d"] {
            s.create(info("pods"), "default", pod(n), false)
                .expect("pod");
        }
        let rvs = within(async {
            let mut rvs = Vec::new();
            for _ in 0..4 {
                rvs.push(pods.recv().await.map(|e| e.rv));
            }
            rvs
        });
        // Nothing more: the four writes left one wake-up, which finds nothing new to read.
        assert_eq!(
            (rvs, ready(&mut pods)),
            (vec![Ok(2), Ok(3), Ok(4), Ok(5)], false)
        );
    }

    #[test]
    fn an_idle_watch_of_a_quiet_resource_is_not_expired_by_other_resources_writes() {
        // The log keeps 4 events; 10 pod writes push everything before them out.
        let s = store_with_ns();
        let mut nodes = s.watch("nodes", None).expect("watch").live;
        for i in 0..10 {
            s.create(info("pods"), "default", pod(&format!("p{i}")), false)
                .expect("pod");
        }
        s.create(info("nodes"), "", node("n1"), false)
            .expect("node");
        let got = within(nodes.recv()).map(|e| (e.storage, e.rv));
        assert_eq!(got, Ok(("nodes", 12)));
    }

    #[test]
    fn a_live_watch_whose_unread_events_left_the_log_lags() {
        let s = store_with_ns();
        let mut pods = s.watch("pods", None).expect("watch").live;
        for i in 0..6 {
            s.create(info("pods"), "default", pod(&format!("p{i}")), false)
                .expect("pod");
        }
        assert_eq!(within(pods.recv()).map(|e| e.rv), Err(RecvError::Lagged));
    }

    #[test]
    fn a_watch_of_several_resources_gets_theirs_and_a_watch_of_all_gets_every_event() {
        let s = store_with_ns();
        let mut some = s.watch_also("pods", None, &["nodes"]).expect("watch").live;
        let mut all = s.watch_all("pods", None).expect("watch").live;
        s.create(info("nodes"), "", node("n1"), false)
            .expect("node");
        s.create(
            info("namespaces"),
            "",
            json!({"metadata": {"name": "other"}}),
            false,
        )
        .expect("namespace");
        s.create(info("pods"), "default", pod("a"), false)
            .expect("pod");
        let storages = |live: &mut LiveEvents, n: usize| {
            within(async {
                let mut got = Vec::new();
                for _ in 0..n {
                    got.push(live.recv().await.map(|e| e.storage));
                }
                got
            })
        };
        assert_eq!(
            (storages(&mut some, 2), storages(&mut all, 3)),
            (
                vec![Ok("nodes"), Ok("pods")],
                vec![Ok("nodes"), Ok("namespaces"), Ok("pods")]
            )
        );
    }

    #[test]
    fn many_watchers_each_get_a_write_and_unregister_when_dropped() {
        const WATCHERS: usize = 500;
        let s = store_with_ns();
        let mut watchers: Vec<LiveEvents> = (0..WATCHERS)
            .map(|_| s.watch("pods", None).expect("watch").live)
            .collect();
        let registered = s.watch_count();
        s.create(info("pods"), "default", pod("a"), false)
            .expect("pod");
        let got = within(async {
            let mut got = 0;
            for w in &mut watchers {
                if w.recv().await.is_ok_and(|e| e.rv == 2) {
                    got += 1;
                }
            }
            got
        });
        drop(watchers);
        assert_eq!((registered, got, s.watch_count()), (WATCHERS, WATCHERS, 0));
    }

    #[test]
    fn live_events_end_when_the_store_is_dropped() {
        let s = store_with_ns();
        let mut pods = s.watch("pods", None).expect("watch").live;
        drop(s);
        assert_eq!(within(pods.recv()).map(|e| e.rv), Err(RecvError::Closed));
    }

    #[test]
    fn watch_resumes_from_rv_and_expires_past_the_log() {
        let s = store_with_ns(); // rv 1
        for n in ["a", "b", "c", "d", "e"] {
            s.create(info("pods"), "default", pod(n), false)
                .expect("created"); // rv 2..6
        }
        let w = s.watch("pods", Some(4)).expect("in the log");
        let rvs: Vec<u64> = w.backlog.iter().map(|e| e.rv).collect();
        assert_eq!(rvs, vec![5, 6]);
        // The log keeps 4 events (rv 3..6): rv 2 was compacted.
        let err = s.watch("pods", Some(1)).expect_err("expired");
        assert_eq!(
            (err.code, err.message.as_str()),
            (410, "too old resource version: 1 (3)")
        );
        let fresh = s.watch("pods", None).expect("from now");
        assert_eq!(fresh.initial.len(), 5);
    }

    #[test]
    fn a_reopened_data_dir_has_the_state_and_the_resource_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let uid = {
            let s = Store::open(16, dir.path(), 1 << 20, false).expect("open");
            s.create(
                info("namespaces"),
                "",
                json!({"metadata": {"name": "default"}}),
                false,
            )
            .expect("ns");
            s.create(
                info("namespaces"),
                "",
                json!({"metadata": {"name": "gone"}}),
                false,
            )
            .expect("ns");
            let a = s
                .create(info("pods"), "default", pod("a"), false)
                .expect("a");
            s.create(info("pods"), "gone", pod("b"), false).expect("b");
            // rv 5 marks the namespace, rv 6 deletes gone/b, rv 7 the namespace: each write
            // has its own rv.
            let ns = s
                .delete(info("namespaces"), "", "gone", DeleteOptions::default())
                .expect("deleted");
            assert_eq!(ns.pointer("/metadata/resourceVersion"), Some(&json!("5")));
            assert_eq!(s.finalize_namespace("gone").ok(), Some(true));
            assert_eq!(s.resource_version(), 7);
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(s.sync())
                .expect("durable");
            a.pointer("/metadata/uid").cloned()
        };
        let s = Store::open(16, dir.path(), 1 << 20, false).expect("reopen");
        assert_eq!(s.resource_version(), 7);
        let a = s.get(info("pods"), "default", "a").expect("a recovered");
        assert_eq!(a.pointer("/metadata/uid").cloned(), uid);
        assert!(s.get(info("namespaces"), "", "gone").is_none());
        assert!(s.list(info("pods"), None).0.len() == 1);
        // Watches cannot resume from before the restart.
        assert_eq!(s.watch("pods", Some(3)).expect_err("410").code, 410);
        let b = s
            .create(info("pods"), "default", pod("c"), false)
            .expect("c");
        assert_eq!(b.pointer("/metadata/resourceVersion"), Some(&json!("8")));
    }

    #[test]
    fn watchers_get_a_write_only_once_it_is_fsynced() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(16, dir.path(), 1 << 20, false).expect("open");
        s.create(
            info("namespaces"),
            "",
            json!({"metadata": {"name": "default"}}),
            false,
        )
        .expect("ns");
        rt.block_on(s.sync()).expect("durable");
        let wal = s.wal.as_ref().expect("a data directory");
        let mut from_now = s.watch("pods", None).expect("watch").live;
        wal.hold_fsync(true);
        s.create(info("pods"), "default", pod("a"), false)
            .expect("created");
        // A watch starting now starts from the write that is not durable yet.
        let mut started = s.watch("pods", None).expect("watch");
        use std::future::Future as _;
        let (pending_event, pending_start) = {
            let mut event = std::pin::pin!(from_now.recv());
            let mut start = std::pin::pin!(started.live.wait_durable(started.rv));
            rt.block_on(std::future::poll_fn(|cx| {
                std::task::Poll::Ready((
                    event.as_mut().poll(cx).is_pending(),
                    start.as_mut().poll(cx).is_pending(),
                ))
            }))
        };
        wal.hold_fsync(false);
        let within = std::time::Duration::from_secs(10);
        let event = rt
            .block_on(async { tokio::time::timeout(within, from_now.recv()).await })
            .expect("sent once fsynced")
            .map(|e| (e.rv, e.kind));
        let start = rt
            .block_on(async {
                tokio::time::timeout(within, started.live.wait_durable(started.rv)).await
            })
            .expect("durable once fsynced");
        assert_eq!(
            (pending_event, pending_start, event, start),
            (true, true, Ok((2, EventType::Added)), true)
        );
    }
}

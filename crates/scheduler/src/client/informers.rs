//! Informers: kube-rs watchers for every kind the scheduler reads, turned into the
//! add / update(old, new) / delete events of [`crate::source`].
//!
//! kube-rs watchers hand over the new object only, so each kind keeps a store of the version
//! it delivered last (keyed `namespace/name`, objects shared as `Arc`, never copied). A watch
//! event is compared against that store; a re-list (the watcher's `Init` … `InitDone` after a
//! `410 Gone` or a reconnect) is buffered and diffed against it as a whole, so objects that
//! disappeared while the watch was down are delivered as `Deleted`.
//!
//! Upstream: client-go's shared informers (reflector + DeltaFIFO + indexer) as
//! pkg/scheduler/eventhandlers.go uses them, and the unfinished-pods field selector of
//! cmd/kube-scheduler's informer factory.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use crate::source::{Change, EventHandler, ObjectEvent};

/// Pods the scheduler watches: those not finished. Upstream filters the same way, so that
/// completed pods neither take room in the cache nor get scheduled.
pub const UNFINISHED_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// How the informers list and watch.
#[derive(Debug, Clone)]
pub struct InformerOptions {
    /// The field selector of the pod watch ([`UNFINISHED_PODS`] by default).
    pub pod_field_selector: String,
    /// Items per page of the initial and re-lists (`None`: the watcher's default).
    pub page_size: Option<u32>,
    /// Watch resource.k8s.io/v1 DeviceClasses, ResourceSlices and ResourceClaims. Off on a
    /// cluster that does not serve them ([`serves_dynamic_resources`]): their lists would
    /// fail for ever and `synced` would never come.
    pub dynamic_resources: bool,
}

impl Default for InformerOptions {
    fn default() -> Self {
        InformerOptions {
            pod_field_selector: UNFINISHED_PODS.to_string(),
            page_size: None,
            dynamic_resources: true,
        }
    }
}

/// Number of kinds [`run_informers`] watches; `synced` waits for all of them.
const KINDS: usize = 19;

/// Of [`KINDS`], those of resource.k8s.io/v1 (see [`InformerOptions::dynamic_resources`]).
const DYNAMIC_RESOURCE_KINDS: usize = 3;

/// The group version of the kinds behind [`InformerOptions::dynamic_resources`].
pub const DYNAMIC_RESOURCES_API: &str = "resource.k8s.io/v1";

/// Whether the cluster serves every kind [`InformerOptions::dynamic_resources`] watches,
/// asked of discovery: `Ok(false)` when the group version is unknown to the server (404,
/// as before Kubernetes 1.34 or with the API turned off) or lacks one of them.
pub async fn serves_dynamic_resources(client: &kube::Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(DYNAMIC_RESOURCES_API).await {
        Ok(list) => Ok(["deviceclasses", "resourceslices", "resourceclaims"]
            .iter()
            .all(|want| list.resources.iter().any(|r| r.name == *want))),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Watches every kind the scheduler reads and delivers their events to `handler` until
/// `shutdown` resolves (or the returned future is dropped: each kind runs on its own task,
/// aborted with it). Calls [`EventHandler::synced`] once, after every kind's initial list was
/// delivered.
///
/// Watch failures are logged and retried with kube-rs' default backoff; this future only
/// ends on shutdown. Spawn it:
///
/// ```no_run
/// # async fn f(client: kube::Client, handler: std::sync::Arc<dyn scheduler::source::EventHandler>) {
/// use scheduler::client::{run_informers, InformerOptions};
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let informers = tokio::spawn(run_informers(client, handler, InformerOptions::default(), async {
///     let _ = stopped.await;
/// }));
/// // ... later
/// let _ = stop.send(());
/// let _ = informers.await;
/// # }
/// ```
pub async fn run_informers(
    client: kube::Client,
    handler: Arc<dyn EventHandler>,
    options: InformerOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    let kinds = if options.dynamic_resources {
        KINDS
    } else {
        KINDS - DYNAMIC_RESOURCE_KINDS
    };
    let gate = Arc::new(SyncGate::new(kinds, handler.clone()));
    let base = {
        let mut c = watcher::Config::default();
        if let Some(p) = options.page_size {
            c = c.page_size(p);
        }
        c
    };
    let pods = base.clone().fields(&options.pod_field_selector);
    let mut tasks = JoinSet::new();
    let ctx = |kind| Ctx {
        kind,
        handler: handler.clone(),
        gate: gate.clone(),
    };
    tasks.spawn(watch_kind(
        Api::<Pod>::all(client.clone()),
        pods,
        ObjectEvent::Pod,
        ctx("pods"),
    ));
    tasks.spawn(watch_kind(
        Api::<Node>::all(client.clone()),
        base.clone(),
        ObjectEvent::Node,
        ctx("nodes"),
    ));
    tasks.spawn(watch_kind(
        Api::<Namespace>::all(client.clone()),
        base.clone(),
        ObjectEvent::Namespace,
        ctx("namespaces"),
    ));
    tasks.spawn(watch_kind(
        Api::<Service>::all(client.clone()),
        base.clone(),
        ObjectEvent::Service,
        ctx("services"),
    ));
    tasks.spawn(watch_kind(
        Api::<ReplicationController>::all(client.clone()),
        base.clone(),
        ObjectEvent::ReplicationController,
        ctx("replicationcontrollers"),
    ));
    tasks.spawn(watch_kind(
        Api::<ReplicaSet>::all(client.clone()),
        base.clone(),
        ObjectEvent::ReplicaSet,
        ctx("replicasets"),
    ));
    tasks.spawn(watch_kind(
        Api::<StatefulSet>::all(client.clone()),
        base.clone(),
        ObjectEvent::StatefulSet,
        ctx("statefulsets"),
    ));
    tasks.spawn(watch_kind(
        Api::<PodDisruptionBudget>::all(client.clone()),
        base.clone(),
        ObjectEvent::PodDisruptionBudget,
        ctx("poddisruptionbudgets"),
    ));
    tasks.spawn(watch_kind(
        Api::<PriorityClass>::all(client.clone()),
        base.clone(),
        ObjectEvent::PriorityClass,
        ctx("priorityclasses"),
    ));
    tasks.spawn(watch_kind(
        Api::<PersistentVolume>::all(client.clone()),
        base.clone(),
        ObjectEvent::PersistentVolume,
        ctx("persistentvolumes"),
    ));
    tasks.spawn(watch_kind(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        base.clone(),
        ObjectEvent::PersistentVolumeClaim,
        ctx("persistentvolumeclaims"),
    ));
    tasks.spawn(watch_kind(
        Api::<StorageClass>::all(client.clone()),
        base.clone(),
        ObjectEvent::StorageClass,
        ctx("storageclasses"),
    ));
    tasks.spawn(watch_kind(
        Api::<CSINode>::all(client.clone()),
        base.clone(),
        ObjectEvent::CSINode,
        ctx("csinodes"),
    ));
    tasks.spawn(watch_kind(
        Api::<CSIDriver>::all(client.clone()),
        base.clone(),
        ObjectEvent::CSIDriver,
        ctx("csidrivers"),
    ));
    tasks.spawn(watch_kind(
        Api::<CSIStorageCapacity>::all(client.clone()),
        base.clone(),
        ObjectEvent::CSIStorageCapacity,
        ctx("csistoragecapacities"),
    ));
    tasks.spawn(watch_kind(
        Api::<VolumeAttachment>::all(client.clone()),
        base.clone(),
        ObjectEvent::VolumeAttachment,
        ctx("volumeattachments"),
    ));
    if options.dynamic_resources {
        tasks.spawn(watch_kind(
            Api::<ResourceClaim>::all(client.clone()),
            base.clone(),
            ObjectEvent::ResourceClaim,
            ctx("resourceclaims"),
        ));
        tasks.spawn(watch_kind(
            Api::<ResourceSlice>::all(client.clone()),
            base.clone(),
            ObjectEvent::ResourceSlice,
            ctx("resourceslices"),
        ));
        tasks.spawn(watch_kind(
            Api::<DeviceClass>::all(client),
            base,
            ObjectEvent::DeviceClass,
            ctx("deviceclasses"),
        ));
    }
    debug_assert_eq!(tasks.len(), kinds);
    tokio::select! {
        () = shutdown => {}
        Some(done) = tasks.join_next() => {
            // Watch loops never end on their own; one that did panicked in the handler.
            if let Err(e) = done {
                tracing::error!(error = %e, "an informer task stopped");
            }
        }
    }
    tasks.shutdown().await;
}

/// What one kind's watch loop shares with the others.
struct Ctx {
    kind: &'static str,
    handler: Arc<dyn EventHandler>,
    gate: Arc<SyncGate>,
}

/// Calls `synced` once, when the last kind has delivered its initial list.
struct SyncGate {
    pending: AtomicUsize,
    handler: Arc<dyn EventHandler>,
}

impl SyncGate {
    fn new(kinds: usize, handler: Arc<dyn EventHandler>) -> Self {
        SyncGate {
            pending: AtomicUsize::new(kinds),
            handler,
        }
    }

    /// One kind's initial list was delivered (each kind calls this once).
    fn kind_synced(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.handler.synced();
        }
    }
}

async fn watch_kind<K>(
    api: Api<K>,
    config: watcher::Config,
    wrap: fn(Change<K>) -> ObjectEvent,
    ctx: Ctx,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut informer = Informer::<K>::default();
    let mut synced = false;
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                for change in informer.apply(event) {
                    ctx.handler.handle(wrap(change));
                }
                if informer.has_synced() && !synced {
                    synced = true;
                    tracing::debug!(
                        kind = ctx.kind,
                        objects = informer.len(),
                        "initial list delivered"
                    );
                    ctx.gate.kind_synced();
                }
            }
            Err(e) => {
                tracing::warn!(kind = ctx.kind, error = %e, "watch failed; retrying with backoff");
            }
        }
    }
    tracing::warn!(kind = ctx.kind, "watch stream ended");
}

/// One kind's store and the state of its current list: turns watcher events into changes.
/// Pure (no I/O), so that the delivery contract is tested without a server.
#[derive(Debug)]
pub(crate) struct Informer<K> {
    /// The version of each object delivered last, by `namespace/name`.
    store: HashMap<String, Arc<K>>,
    /// Objects of a list in progress (between `Init` and `InitDone`).
    listing: Option<HashMap<String, Arc<K>>>,
    /// Lists completed so far.
    lists: u64,
}

impl<K> Default for Informer<K> {
    fn default() -> Self {
        Informer {
            store: HashMap::new(),
            listing: None,
            lists: 0,
        }
    }
}

impl<K: Resource> Informer<K> {
    /// The changes one watcher event makes to the store, in delivery order. Objects are
    /// kept and delivered without `metadata.managedFields`: nothing in the scheduler reads
    /// them, and on a real cluster they are often the larger part of a pod (upstream's pod
    /// informer drops them too, with a transform).
    pub(crate) fn apply(&mut self, event: watcher::Event<K>) -> Vec<Change<K>> {
        let event = event.modify(|obj| obj.meta_mut().managed_fields = None);
        match event {
            watcher::Event::Apply(obj) => {
                let new = Arc::new(obj);
                let key = key_of(&*new);
                match self.store.insert(key, new.clone()) {
                    None => vec![Change::Added(new)],
                    Some(old) if same_version(&*old, &*new) => Vec::new(),
                    Some(old) => vec![Change::Updated { old, new }],
                }
            }
            watcher::Event::Delete(obj) => {
                let key = key_of(&obj);
                match self.store.remove(&key) {
                    Some(_) => vec![Change::Deleted(Arc::new(obj))],
                    None => {
                        // Never delivered as added: nothing downstream knows it.
                        tracing::debug!(object = %key, "delete of an object not in the store");
                        Vec::new()
                    }
                }
            }
            watcher::Event::Init => {
                self.listing = Some(HashMap::new());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                let obj = Arc::new(obj);
                self.listing
                    .get_or_insert_with(HashMap::new)
                    .insert(key_of(&*obj), obj);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let changes = diff(&self.store, &listed);
                // Unchanged objects keep the version delivered (the same content), so that the
                // next `old` is the very object downstream was given.
                let delivered = std::mem::take(&mut self.store);
                self.store = listed
                    .into_iter()
                    .map(|(key, new)| {
                        let kept = match delivered.get(&key) {
                            Some(old) if same_version(&**old, &*new) => old.clone(),
                            _ => new,
                        };
                        (key, kept)
                    })
                    .collect();
                self.lists += 1;
                changes
            }
        }
    }

    /// Whether the initial list was delivered.
    pub(crate) fn has_synced(&self) -> bool {
        self.lists > 0
    }

    /// Objects in the store.
    pub(crate) fn len(&self) -> usize {
        self.store.len()
    }
}

/// The changes that turn `store` (what was delivered) into `listed` (a fresh list): deletions
/// first (so that what they free is seen before what replaces it), then updates and
/// additions; each group ordered by key. An object whose resourceVersion did not change
/// yields nothing.
pub(crate) fn diff<K: Resource>(
    store: &HashMap<String, Arc<K>>,
    listed: &HashMap<String, Arc<K>>,
) -> Vec<Change<K>> {
    let mut deleted: Vec<_> = store
        .iter()
        .filter(|(k, _)| !listed.contains_key(*k))
        .collect();
    deleted.sort_by(|a, b| a.0.cmp(b.0));
    let mut present: Vec<_> = listed.iter().collect();
    present.sort_by(|a, b| a.0.cmp(b.0));
    let mut changes: Vec<Change<K>> = deleted
        .into_iter()
        .map(|(_, old)| Change::Deleted(old.clone()))
        .collect();
    for (key, new) in present {
        match store.get(key) {
            None => changes.push(Change::Added(new.clone())),
            Some(old) if same_version(&**old, &**new) => {}
            Some(old) => changes.push(Change::Updated {
                old: old.clone(),
                new: new.clone(),
            }),
        }
    }
    changes
}

/// `namespace/name`, or `name` for cluster-scoped objects (client-go's key format).
pub(crate) fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Whether two versions of an object carry the same resourceVersion (an object without one
/// is always taken as changed).
fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    match (&a.meta().resource_version, &b.meta().resource_version) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

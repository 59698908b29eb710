//! What plugins get from the framework when they are built: the parallelizer and the
//! cluster client (the sink for binding decisions).
//!
//! Upstream: framework.Handle. The scheduling core never talks HTTP: `run`/`up` implement
//! [`ClusterClient`] with kube-rs, `simulate` and `bench` in memory.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, PodExtendedResourceClaimStatus,
};
use k8s_openapi::api::resource::v1::ResourceClaim;

use thiserror::Error;

use crate::interface::BoxFuture;
use crate::parallelize::Parallelizer;
use crate::snapshot::{Snapshot, StorageListers};
use crate::types::{PodInfo, PodKey};
use crate::waiting_pods::{BindingPods, WaitingPods};

/// A pod-to-node binding to write (`pods/binding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub node: String,
}

/// A write to the cluster that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    /// The API server refused the request (conflict, not found, forbidden, ...).
    #[error("api error {code}: {message}")]
    Api { code: u16, message: String },
    /// The request did not reach the API server or its answer was unreadable.
    #[error("transport error: {0}")]
    Transport(String),
}

/// The object a write is about: a pod, by namespace, name and (when known) UID.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

impl PodRef {
    /// The reference of `pod` (namespace `default` when unset, as the API server defaults it).
    pub fn of(pod: &k8s_openapi::api::core::v1::Pod) -> Self {
        PodRef {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone(),
        }
    }
}

/// `namespace/name`, as logs and messages name a pod.
impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What to do with a pod's `status.nominatedNodeName`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Nomination {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Set it to this node.
    Set(String),
    /// Clear it.
    Clear,
}

/// A status write (upstream: updatePod in schedule_one.go, and the preemption's victim
/// patch): one condition and the nomination. The implementation patches `pods/status`;
/// the pod's other conditions stay as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStatusUpdate {
    pub pod: PodRef,
    /// `PodScheduled=False` after a failed attempt (reason `Unschedulable` or
    /// `SchedulerError`), or `DisruptionTarget=True` on a preemption victim.
    pub condition: Option<PodCondition>,
    pub nomination: Nomination,
}

/// A pod condition the scheduler writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCondition {
    /// `PodScheduled` or `DisruptionTarget`.
    pub type_: String,
    /// `"True"` or `"False"`.
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl PodCondition {
    /// `PodScheduled=False` with `reason` and `message` (a failed scheduling attempt).
    pub fn unscheduled(reason: impl Into<String>, message: impl Into<String>) -> Self {
        PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// `Normal` or `Warning`, as core/v1 Event `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event about a pod (`Scheduled`, `FailedScheduling`, `Preempted`, ...), as the
/// scheduler's event recorder emits it. The implementation writes a core/v1 Event whose
/// `reportingComponent`/`source.component` is `reporting_controller` (the profile's
/// scheduler name) and truncates the message at 1024 bytes as upstream does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub regarding: PodRef,
    /// The pod's `metadata.resourceVersion` as the scheduler saw it when it recorded the
    /// event, written as the Event's `involvedObject.resourceVersion`. It is part of what
    /// makes two events one series, as in upstream's broadcaster (which keys series by the
    /// whole reference): once a status write has changed the pod, its next event is a new
    /// Event object with its own message.
    pub resource_version: Option<String>,
    pub event_type: EventType,
    /// `Scheduled`, `FailedScheduling`, `Preempted`, ...
    pub reason: String,
    /// `Binding`, `Scheduling`, `Preempting`, ...
    pub action: String,
    pub message: String,
    pub reporting_controller: String,
}

/// The narrow interface through which the scheduler writes decisions to the cluster: the
/// sink of the scheduling core. `run`/`up` implement it with kube-rs; `simulate` and `bench`
/// in memory.
///
/// Only [`bind`](Self::bind) is on the critical path. Status and event writes must never
/// delay binds: implementations queue them and return quickly, and must not lose the last
/// status asked for a pod.
pub trait ClusterClient: Send + Sync {
    /// Binds a pod to a node (`pods/binding`).
    fn bind<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>>;

    /// Writes the `PodScheduled` condition and/or the nomination of a pod (`pods/status`).
    fn update_pod_status<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>>;

    /// Writes a status update and waits for the API server's answer: for a write that must
    /// land before a later one (a preemption victim's `DisruptionTarget` condition before its
    /// deletion, as upstream's preemption executor patches then deletes). The default calls
    /// [`update_pod_status`](Self::update_pod_status), which is right for clients that write
    /// before returning; a client that queues status writes must override it.
    fn update_pod_status_now<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        self.update_pod_status(update)
    }

    /// Records an event about a pod.
    fn record_event<'a>(&'a self, event: &'a PodEvent) -> BoxFuture<'a, Result<(), ClientError>>;

    /// Deletes a pod (preemption victims), with its UID as a precondition when given.
    fn delete_pod<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<(), ClientError>>;

    /// Replaces a PersistentVolume (PUT, so a stale `resourceVersion` is refused with a
    /// conflict) and returns what the API server stored: VolumeBinding pre-binding a volume
    /// to a claim (`spec.claimRef`).
    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, ClientError>>;

    /// Replaces a PersistentVolumeClaim (PUT) and returns what the API server stored:
    /// VolumeBinding asking for provisioning on a node
    /// (`volume.kubernetes.io/selected-node`).
    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, ClientError>>;

    /// Replaces a ResourceClaim (PUT, so a stale `resourceVersion` is refused with a
    /// conflict) and returns what the API server stored: DynamicResources adding the
    /// `resource.kubernetes.io/delete-protection` finalizer in PreBind, before it writes the
    /// allocation (a status write leaves metadata alone).
    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>>;

    /// Replaces a ResourceClaim's status (PUT on `status`, so a stale `resourceVersion` is
    /// refused with a conflict) and returns what the API server stored: DynamicResources
    /// writing `status.allocation` and `status.reservedFor` in PreBind.
    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>>;

    /// Creates a ResourceClaim (`metadata.generateName` honoured) and returns what the API
    /// server stored: DynamicResources creating the claim of a pod's extended resources
    /// backed by a DeviceClass. The default refuses: a client that cannot create claims
    /// leaves such pods unbound with the error.
    fn create_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        let _ = claim;
        Box::pin(async { Err(unsupported("create resourceclaims")) })
    }

    /// Deletes a ResourceClaim (namespace and name; a claim already gone is not an error):
    /// DynamicResources removing an extended-resource claim that its pod no longer uses.
    fn delete_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        let _ = claim;
        Box::pin(async { Err(unsupported("delete resourceclaims")) })
    }

    /// Writes a pod's `status.extendedResourceClaimStatus` (a patch of `pods/status`) and
    /// waits for the answer: which claim and requests serve the pod's extended resources.
    fn update_pod_extended_resource_claim_status<'a>(
        &'a self,
        pod: &'a PodRef,
        status: &'a PodExtendedResourceClaimStatus,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        let _ = (pod, status);
        Box::pin(async { Err(unsupported("patch pods/status extendedResourceClaimStatus")) })
    }
}

/// The error of a write a client does not implement.
fn unsupported(what: &str) -> ClientError {
    ClientError::Api {
        code: 405,
        message: format!("this client cannot {what}"),
    }
}

/// The scheduler's current PersistentVolumes, claims and classes, published again after
/// every change its informers deliver: what a binding cycle waits on (VolumeBinding's
/// PreBind waits for the PV controller) without asking the API server.
pub type StorageWatch = tokio::sync::watch::Receiver<Arc<StorageListers>>;

/// A client that accepts every write without doing anything: for `simulate`, where
/// placements are applied to the in-memory snapshot instead.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopClient;

impl ClusterClient for NoopClient {
    fn bind<'a>(&'a self, _binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }

    fn update_pod_status<'a>(
        &'a self,
        _update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }

    fn record_event<'a>(&'a self, _event: &'a PodEvent) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }

    fn delete_pod<'a>(&'a self, _pod: &'a PodRef) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }

    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, ClientError>> {
        Box::pin(async move { Ok(pv.clone()) })
    }

    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, ClientError>> {
        Box::pin(async move { Ok(pvc.clone()) })
    }

    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move { Ok(claim.clone()) })
    }

    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move { Ok(claim.clone()) })
    }

    fn create_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move { Ok(claim.clone()) })
    }

    fn delete_resource_claim<'a>(
        &'a self,
        _claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }

    fn update_pod_extended_resource_claim_status<'a>(
        &'a self,
        _pod: &'a PodRef,
        _status: &'a PodExtendedResourceClaimStatus,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Pods whose preemption the scheduler is carrying out (victims being deleted), by
/// [`PodKey`], shared by the scheduler and the plugins of every profile: a
/// preemptor is held back at PreEnqueue until its preemption ends. Upstream: the
/// preemption Evaluator's record of running preemptions (SchedulerAsyncPreemption).
#[derive(Debug, Clone, Default)]
pub struct PreemptingPods(Arc<Mutex<Preemptions>>);

#[derive(Debug, Default)]
struct Preemptions {
    preemptors: HashSet<PodKey>,
    /// Victims chosen but not yet seen deleted: until their deletion shows in the cache,
    /// they count as terminating by preemption, so that a retry of their preemptor does not
    /// choose new victims for the room they are about to free.
    victims: HashSet<PodKey>,
}

impl PreemptingPods {
    fn lock(&self) -> std::sync::MutexGuard<'_, Preemptions> {
        // The sets are consistent between operations: keep going after a panic elsewhere.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The preemption of pod `key` started.
    pub fn start(&self, key: &PodKey) {
        self.lock().preemptors.insert(key.clone());
    }

    /// The preemption of pod `key` ended; whether it was running.
    pub fn finish(&self, key: &str) -> bool {
        self.lock().preemptors.remove(key)
    }

    /// Whether the preemption of pod `key` is running.
    pub fn contains(&self, key: &str) -> bool {
        self.lock().preemptors.contains(key)
    }

    /// Pods `keys` were chosen as victims and are being deleted.
    pub fn add_victims(&self, keys: impl IntoIterator<Item = PodKey>) {
        self.lock().victims.extend(keys);
    }

    /// Victim `key` is gone (or its deletion failed); whether it was a victim.
    pub fn victim_gone(&self, key: &str) -> bool {
        self.lock().victims.remove(key)
    }

    /// Whether pod `key` is a victim whose deletion is not yet seen.
    pub fn is_victim(&self, key: &str) -> bool {
        self.lock().victims.contains(key)
    }
}

/// An HTTP extender's say in preemption: it may drop candidate nodes and trim their
/// victims. The scheduler implements it over HTTP; the framework knows only this trait.
///
/// Upstream: framework.Extender (SupportsPreemption, ProcessPreemption, IsInterested,
/// IsIgnorable).
pub trait PreemptionExtender: Send + Sync + std::fmt::Debug {
    /// The name in logs: the extender's URL prefix.
    fn name(&self) -> &str;
    /// Whether an error of this extender is skipped rather than failing the preemption.
    fn is_ignorable(&self) -> bool;
    /// Whether the extender is consulted for `pod` (its managed resources).
    fn is_interested(&self, pod: &Pod) -> bool;
    /// Sends the victims per node and returns those the extender keeps, per node it keeps;
    /// every kept victim is a pod on that node in `snapshot`. Blocks until the extender
    /// answers or its timeout passes; the error is a message for the pod's status.
    fn process_preemption(
        &self,
        pod: &Pod,
        victims: &BTreeMap<String, ExtenderVictims>,
        snapshot: &Snapshot,
    ) -> Result<BTreeMap<String, ExtenderVictims>, String>;
}

/// The victims of one candidate node, as extenders see them. Upstream: extenderv1.Victims.
#[derive(Debug, Clone, Default)]
pub struct ExtenderVictims {
    pub pods: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: i64,
}

/// Services the framework offers to plugins.
#[derive(Clone)]
pub struct Handle {
    pub parallelizer: Parallelizer,
    pub client: Arc<dyn ClusterClient>,
    /// The configured extenders with a preempt verb, in configuration order.
    pub preemption_extenders: Arc<[Arc<dyn PreemptionExtender>]>,
    /// Pods waiting at Permit, shared by every profile of a scheduler.
    pub waiting_pods: WaitingPods,
    /// Pods whose preemption is being carried out, shared by every profile of a scheduler.
    pub preempting_pods: PreemptingPods,
    /// Pods whose binding cycle waits on controllers; the scheduler marks them deleted.
    pub binding_pods: BindingPods,
    /// The scheduler's live storage objects, for binding cycles that wait on controllers.
    /// `None` where no controller acts on volume bindings (`simulate`): VolumeBinding's
    /// PreBind then takes its own writes as the outcome instead of waiting.
    pub storage: Option<StorageWatch>,
    /// The runtime binding cycles and API writes run on, for plugins that start a write
    /// from a synchronous extension point (the scheduling loop runs on a thread of its
    /// own, outside the runtime). `None` offline.
    pub runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("parallelizer", &self.parallelizer)
            .finish_non_exhaustive()
    }
}

impl Handle {
    pub fn new(parallelizer: Parallelizer, client: Arc<dyn ClusterClient>) -> Self {
        Handle {
            parallelizer,
            client,
            preemption_extenders: Arc::from(Vec::new()),
            waiting_pods: WaitingPods::default(),
            preempting_pods: PreemptingPods::default(),
            binding_pods: BindingPods::default(),
            storage: None,
            runtime: None,
        }
    }

    /// A handle for tests and offline use: sequential, no-op client.
    pub fn offline() -> Self {
        Handle::new(Parallelizer::sequential(), Arc::new(NoopClient))
    }
}

//! VolumeBinding: a pod goes only to nodes where each of its PersistentVolumeClaims has a
//! volume, and the scheduler binds the claims that wait for their first consumer.
//!
//! Upstream: pkg/scheduler/framework/plugins/volumebinding. PreFilter sorts the pod's claims
//! (its `persistentVolumeClaim` volumes and the `<pod>-<volume>` claims of its ephemeral
//! volumes) into bound ones, unbound ones of `WaitForFirstConsumer` classes, and unbound
//! `Immediate` ones, which keep the pod pending until the PV controller binds them. Filter
//! checks bound volumes' node affinity, and finds each waiting claim the smallest matching
//! Available volume on the node or, failing that, checks that its class can provision
//! there (provisioner, `allowedTopologies`, CSIStorageCapacity). Score (StorageCapacityScoring)
//! rates the node by how full those volumes or capacities would be. Reserve assumes the
//! decisions in an [`assume_cache`] so the next pods see them; PreBind writes them (a
//! volume's `claimRef`, a claim's `volume.kubernetes.io/selected-node`) and waits until the
//! PV controller has bound every claim. Pods without claims are skipped at PreFilter and
//! cost nothing after it.
//!
//! Where this differs from upstream, on purpose:
//! - Filter reads the volumes, claims and classes PreFilter gathered for the cycle (Filter
//!   sees only its node); upstream's Filter reads the same caches.
//! - For a pod without claims PreFilter writes no state, and PreScore, Reserve and PreBind
//!   do nothing without it (upstream writes an empty state and scores every node 0).
//! - PreBind waits on the scheduler's informer view (a watch, no polling) and ends when the
//!   scheduler marks the pod deleted ([`framework::BindingPods`]) instead of polling a pod
//!   lister; it does not translate in-tree volumes to CSI.

pub mod args;
pub mod assume_cache;
pub mod binder;
pub mod explain;
pub mod scorer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use framework::events::QueueingHintFn;
use framework::interface::BoxFuture;
use framework::{
    decode_args, ActionType, ArgsError, BindingPods, ClusterEventWithHint, Code, CycleState,
    EnqueueExtensions, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo,
    PreBindPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ReservePlugin,
    ScorePlugin, Snapshot, Status, StorageListers, StorageWatch,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};

use crate::helper::events::{new_object, old_object};
use crate::helper::storage::claim_class;
use crate::names;
use crate::noderesources::requested_to_capacity_ratio::FunctionShape;

use self::args::VolumeBindingArgs;
use self::assume_cache::AssumeCache;
use self::binder::{
    bind_volume_to_claim, check_bindings, claim_key, claim_with_selected_node, find_pod_volumes,
    is_claim_fully_bound, is_delay_binding_mode, requested_storage, volume_capacity, volume_class,
    BindingInfo, DynamicProvision, PodVolumeClaims, PodVolumes,
};
use self::explain::{explain_pod_volumes, ClaimReason};
use self::scorer::ClassResources;

pub const NAME: &str = names::VOLUME_BINDING;

/// CycleState key of what PreFilter found and Filter decided per node.
const STATE_KEY: &str = "VolumeBinding";

/// The pod waits for the PV controller to bind a claim of an `Immediate` class.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// A later extension point ran without the state PreFilter writes.
const ERR_NO_STATE: &str = "not found";

/// Claims whose phase says their volume is gone.
const CLAIM_LOST: &str = "Lost";

/// The CSINode annotation listing the in-tree plugins migrated to CSI on the node.
const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// Upstream: volumebinding.VolumeBinding.
pub struct VolumeBinding {
    shape: FunctionShape,
    bind_timeout: Duration,
    /// The informer's live storage objects; `None` offline, where PreBind does not wait.
    storage: Option<StorageWatch>,
    /// Where the scheduler marks pods deleted, so that PreBind stops waiting for them.
    binding_pods: BindingPods,
    client: Arc<dyn framework::ClusterClient>,
    cache: Mutex<Assumed>,
}

impl std::fmt::Debug for VolumeBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeBinding")
            .field("shape", &self.shape)
            .field("bind_timeout", &self.bind_timeout)
            .finish_non_exhaustive()
    }
}

/// The assumed volumes and claims, under one lock.
#[derive(Debug)]
struct Assumed {
    pvs: AssumeCache<PersistentVolume>,
    pvcs: AssumeCache<PersistentVolumeClaim>,
}

/// Builds the plugin from its args (upstream defaults and validation).
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args: VolumeBindingArgs = decode_args(args).map_err(|e| vec![e])?;
    let errs = args.validate();
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut plugin = VolumeBinding::from_args(&args, handle.storage.clone(), handle.client.clone());
    plugin.binding_pods = handle.binding_pods.clone();
    Ok(Arc::new(plugin))
}

impl VolumeBinding {
    fn from_args(
        args: &VolumeBindingArgs,
        storage: Option<StorageWatch>,
        client: Arc<dyn framework::ClusterClient>,
    ) -> Self {
        VolumeBinding {
            shape: FunctionShape::from_args(&args.shape_or_default()),
            bind_timeout: Duration::from_secs(args.bind_timeout_seconds.max(0).unsigned_abs()),
            storage,
            binding_pods: BindingPods::default(),
            client,
            cache: Mutex::new(Assumed {
                pvs: AssumeCache::new("v1.PersistentVolume"),
                pvcs: AssumeCache::new("v1.PersistentVolumeClaim"),
            }),
        }
    }

    fn cache(&self) -> MutexGuard<'_, Assumed> {
        // The caches are consistent between calls: keep going after a panic elsewhere.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }

    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }

    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }

    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for VolumeBinding {
    /// Which volumes the pod uses is all the plugin reads of it.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::VOLUMES_SIGNER,
            framework::sign::volumes_signer(&pod.pod),
        )])
    }
}

impl PreFilterPlugin for VolumeBinding {
    /// Skips pods without claims; refuses a pod whose claim is missing, lost, being
    /// deleted, not its own (ephemeral) or unbound with an `Immediate` class; gathers what
    /// Filter needs otherwise.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let claims = pod_claims(&pod.pod);
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let storage = snapshot.storage();
        let namespace = pod.namespace();
        if let Err(message) = check_claims(&pod.pod, namespace, &claims, storage) {
            return (None, Status::unresolvable(message));
        }
        match self.pod_volume_claims(namespace, &claims, storage) {
            Err(status) => (None, status),
            Ok(found) => {
                state.write(STATE_KEY, StateData::new(found));
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeBinding {
    /// Decides the pod's volumes on this node, or says why they cannot be had here.
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(data) = state.read::<StateData>(STATE_KEY) else {
            return Status::error(ERR_NO_STATE);
        };
        let found = match find_pod_volumes(&data.0.claims, node.node_arc()) {
            Ok(found) => found,
            Err(message) => return Status::error(message),
        };
        if !found.reasons.is_empty() {
            return Status::with_reasons(Code::UnschedulableAndUnresolvable, found.reasons);
        }
        data.0
            .by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.name().to_string(), Arc::new(found.volumes));
        Status::success()
    }
}

impl PreScorePlugin for VolumeBinding {
    /// Skips pods without claims; scores the others (StorageCapacityScoring is on).
    fn pre_score(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        if state.read::<StateData>(STATE_KEY).is_none() {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for VolumeBinding {
    /// Scores by utilization per class: of the matched volumes when the pod binds any,
    /// else of the capacities provisioning would draw from.
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(data) = state.read::<StateData>(STATE_KEY) else {
            return Err(Status::error(ERR_NO_STATE));
        };
        let volumes = data
            .0
            .by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node.name())
            .cloned();
        let Some(volumes) = volumes else {
            return Ok(0);
        };
        Ok(scorer::score(&self.shape, &class_resources(&volumes)))
    }
}

impl ReservePlugin for VolumeBinding {
    /// Assumes the node's decisions: volumes pre-bound to their claims, claims with the
    /// selected node. Nothing to do when every claim is bound.
    fn reserve(&self, state: &mut CycleState, _pod: &PodInfo, node_name: &str) -> Status {
        let Some(data) = state.read::<StateData>(STATE_KEY) else {
            return Status::success();
        };
        let volumes = data
            .0
            .by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node_name)
            .cloned();
        let Some(volumes) = volumes else {
            data.0.set_all_bound(true);
            return Status::success();
        };
        if data.0.claims.unbound_delay_binding.is_empty() {
            data.0.set_all_bound(true);
            return Status::success();
        }
        match self.assume_pod_volumes(&volumes, node_name) {
            Ok(assumed) => {
                data.0.set_all_bound(false);
                data.0
                    .by_node
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(node_name.to_string(), Arc::new(assumed));
                Status::success()
            }
            Err(message) => Status::error(message),
        }
    }

    /// Restores the volumes and claims Reserve assumed for this node.
    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, node_name: &str) {
        let Some(data) = state.read::<StateData>(STATE_KEY) else {
            return;
        };
        let volumes = data
            .0
            .by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node_name)
            .cloned();
        if let Some(volumes) = volumes {
            self.revert(&volumes.static_bindings, &volumes.dynamic_provisions);
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    /// Writes the assumed decisions and waits, up to `bindTimeoutSeconds`, until the PV
    /// controller has bound every claim (offline: until the writes are done).
    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node_name: &'a str,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let Some(data) = state.read::<StateData>(STATE_KEY) else {
                return Status::success();
            };
            if data.0.all_bound() {
                return Status::success();
            }
            let volumes = data
                .0
                .by_node
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(node_name)
                .cloned();
            let Some(volumes) = volumes else {
                return Status::error(format!("no pod volumes found for node {node_name:?}"));
            };
            match self.bind_pod_volumes(pod, &volumes).await {
                Ok(()) => Status::success(),
                Err(message) => Status::error(message),
            }
        })
    }
}

impl EnqueueExtensions for VolumeBinding {
    /// A class added or its `allowedTopologies` changed; a claim of the pod added or
    /// updated; any volume added or updated; a node added or relabelled (volume affinity,
    /// class topologies); CSI nodes, drivers and capacities.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let class_hint: QueueingHintFn = Arc::new(is_schedulable_after_storage_class_change);
        let claim_hint: QueueingHintFn = Arc::new(is_schedulable_after_claim_change);
        let csi_node_hint: QueueingHintFn = Arc::new(is_schedulable_after_csi_node_change);
        let driver_hint: QueueingHintFn = Arc::new(is_schedulable_after_csi_driver_change);
        let capacity_hint: QueueingHintFn =
            Arc::new(is_schedulable_after_csi_storage_capacity_change);
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::StorageClass,
                ActionType::ADD | ActionType::UPDATE,
                class_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
                claim_hint,
            ),
            ClusterEventWithHint::new(
                EventResource::PersistentVolume,
                ActionType::ADD | ActionType::UPDATE,
            ),
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CSINode,
                ActionType::ADD | ActionType::UPDATE,
                csi_node_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CSIDriver,
                ActionType::UPDATE,
                driver_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CSIStorageCapacity,
                ActionType::ADD | ActionType::UPDATE,
                capacity_hint,
            ),
        ]
    }
}

/// Why Filter rejected `node`, per claim of the pod, from the claims, volumes and classes
/// PreFilter wrote into `state` (what Filter read, assumed volumes included). Empty when
/// PreFilter wrote nothing (a pod without claims, or one PreFilter refused). For
/// explanations after the cycle (`simulate`); the scheduling cycle never calls it.
pub fn explain_filter(state: &CycleState, node: &Node) -> Vec<ClaimReason> {
    state
        .read::<StateData>(STATE_KEY)
        .map(|data| explain_pod_volumes(&data.0.claims, node))
        .unwrap_or_default()
}

/// Queue for a new class, or one whose `allowedTopologies` changed (the binding mode cannot
/// change).
fn is_schedulable_after_storage_class_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new_object::<StorageClass>(new)?;
    let old = match old_object::<StorageClass>(old)? {
        None => return Ok(QueueingHint::Queue),
        Some(c) => c,
    };
    if old.allowed_topologies != new.allowed_topologies {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue when the claim added or updated is one of the pod's.
fn is_schedulable_after_claim_change(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let claim = new_object::<PersistentVolumeClaim>(new)?;
    if claim.metadata.namespace.as_deref().unwrap_or("")
        != pod.metadata.namespace.as_deref().unwrap_or("")
    {
        return Ok(QueueingHint::QueueSkip);
    }
    let name = claim.metadata.name.as_deref().unwrap_or("");
    if pod_claims(pod).iter().any(|c| c.name == name) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue for a new CSINode, or one whose migrated plugins changed.
fn is_schedulable_after_csi_node_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new_object::<CSINode>(new)?;
    let Some(old) = old_object::<CSINode>(old)? else {
        return Ok(QueueingHint::Queue);
    };
    let migrated = |n: &CSINode| {
        n.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MIGRATED_PLUGINS_ANNOTATION))
            .cloned()
    };
    if migrated(old) != migrated(new) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue when a driver of the pod's inline CSI volumes stopped tracking storage capacity.
fn is_schedulable_after_csi_driver_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    // Registered for updates only, so both objects are there.
    let (old, new) = (new_object::<CSIDriver>(old)?, new_object::<CSIDriver>(new)?);
    let name = new.metadata.name.as_deref().unwrap_or("");
    let uses_driver = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.csi.as_ref().is_some_and(|c| c.driver == name));
    let tracked = |d: &CSIDriver| d.spec.storage_capacity.unwrap_or(false);
    if uses_driver && tracked(old) && !tracked(new) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue for a new CSIStorageCapacity, or one whose volume limit (maximum volume size,
/// else capacity) grew.
fn is_schedulable_after_csi_storage_capacity_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new_object::<CSIStorageCapacity>(new)?;
    let Some(old) = old_object::<CSIStorageCapacity>(old)? else {
        return Ok(QueueingHint::Queue);
    };
    let limit = |c: &CSIStorageCapacity| {
        c.maximum_volume_size
            .as_ref()
            .or(c.capacity.as_ref())
            .and_then(|q| framework::quantity::parse_value(&q.0).ok())
    };
    match (limit(old), limit(new)) {
        (None, Some(_)) => Ok(QueueingHint::Queue),
        (Some(o), Some(n)) if n > o => Ok(QueueingHint::Queue),
        _ => Ok(QueueingHint::QueueSkip),
    }
}

/// What PreFilter hands to the later extension points. Shared, not copied, when the cycle
/// state is cloned (preemption's copies fill the same per-node decisions, as upstream's
/// pointer does).
#[derive(Debug, Clone)]
struct StateData(Arc<StateInner>);

#[derive(Debug)]
struct StateInner {
    claims: PodVolumeClaims,
    /// Filter's decision per feasible node; after Reserve, the chosen node's assumed one.
    by_node: Mutex<HashMap<String, Arc<PodVolumes>>>,
    /// Set by Reserve: every claim was bound already, PreBind has nothing to do.
    all_bound: std::sync::atomic::AtomicBool,
}

impl StateData {
    fn new(claims: PodVolumeClaims) -> Self {
        StateData(Arc::new(StateInner {
            claims,
            by_node: Mutex::new(HashMap::new()),
            all_bound: std::sync::atomic::AtomicBool::new(false),
        }))
    }
}

impl StateInner {
    fn set_all_bound(&self, v: bool) {
        self.all_bound
            .store(v, std::sync::atomic::Ordering::Relaxed);
    }

    fn all_bound(&self) -> bool {
        self.all_bound.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A claim a pod uses: by name, and whether it is the claim of an ephemeral volume.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodClaim {
    name: String,
    ephemeral: bool,
}

/// The pod's claims in volume order: `persistentVolumeClaim` volumes, and the
/// `<pod>-<volume>` claim of each ephemeral volume.
fn pod_claims(pod: &Pod) -> Vec<PodClaim> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some(PodClaim {
                    name: c.claim_name.clone(),
                    ephemeral: false,
                })
            } else {
                v.ephemeral.as_ref().map(|_| PodClaim {
                    name: format!("{pod_name}-{}", v.name),
                    ephemeral: true,
                })
            }
        })
        .collect()
}

/// Upstream podHasPVCs: every claim exists, is not lost nor being deleted, and an
/// ephemeral volume's claim is controlled by the pod. The error is the pod's message.
fn check_claims(
    pod: &Pod,
    namespace: &str,
    claims: &[PodClaim],
    storage: &StorageListers,
) -> Result<(), String> {
    for c in claims {
        let Some(pvc) = storage.persistent_volume_claim(namespace, &c.name) else {
            return Err(if c.ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {:?}",
                    c.name
                )
            } else {
                format!("persistentvolumeclaim {:?} not found", c.name)
            });
        };
        if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(CLAIM_LOST) {
            return Err(format!(
                "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
                c.name,
                binder::claim_volume_name(pvc)
            ));
        }
        if pvc.metadata.deletion_timestamp.is_some() {
            return Err(format!(
                "persistentvolumeclaim {:?} is being deleted",
                c.name
            ));
        }
        if c.ephemeral && !is_controlled_by(pvc, pod) {
            return Err(format!(
                "PVC {namespace}/{} was not created for pod {namespace}/{} (pod is not owner)",
                c.name,
                pod.metadata.name.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(())
}

/// Whether the claim's controller owner reference is the pod.
fn is_controlled_by(pvc: &PersistentVolumeClaim, pod: &Pod) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    pvc.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

impl VolumeBinding {
    /// Upstream GetPodVolumeClaims, through the assume cache: the pod's claims sorted into
    /// bound and waiting ones, with the volumes and classes Filter will look at.
    fn pod_volume_claims(
        &self,
        namespace: &str,
        claims: &[PodClaim],
        storage: &StorageListers,
    ) -> Result<PodVolumeClaims, Status> {
        let mut cache = self.cache();
        cache.pvs.prune(|k| storage.persistent_volume(k).cloned());
        cache
            .pvcs
            .prune(|k| storage.persistent_volume_claims.get(k).cloned());
        let mut out = PodVolumeClaims::default();
        let mut immediate = false;
        for c in claims {
            let key = format!("{namespace}/{}", c.name);
            let Some(pvc) = cache
                .pvcs
                .get(&key, storage.persistent_volume_claims.get(&key))
            else {
                return Err(Status::error(format!(
                    "error getting PVC {key:?}: could not find v1.PersistentVolumeClaim {key:?}"
                )));
            };
            if is_claim_fully_bound(&pvc) {
                let name = binder::claim_volume_name(&pvc);
                let pv = cache.pvs.get(name, storage.persistent_volume(name));
                out.bound.push((pvc, pv));
                continue;
            }
            let class_name = claim_class(&pvc).to_string();
            let class = storage.storage_class(&class_name);
            let delay =
                is_delay_binding_mode(&pvc, class.map(Arc::as_ref)).map_err(Status::error)?;
            if delay && binder::claim_volume_name(&pvc).is_empty() {
                out.classes.insert(class_name, class.cloned());
                out.unbound_delay_binding.push(pvc);
            } else {
                immediate = true;
            }
        }
        if immediate {
            return Err(Status::unresolvable(ERR_UNBOUND_IMMEDIATE));
        }
        // What the capacity check of provisioning reads: the classes' drivers, and the
        // capacities of those classes in a stable order (the first that fits is used).
        for class in out.classes.values().flatten() {
            if let Some(driver) = storage.csi_driver(&class.provisioner) {
                out.capacity
                    .drivers
                    .insert(class.provisioner.clone(), driver.clone());
            }
        }
        if !out.capacity.drivers.is_empty() {
            let mut capacities: Vec<_> = storage
                .csi_storage_capacities
                .iter()
                .filter(|(_, c)| out.classes.contains_key(&c.storage_class_name))
                .collect();
            capacities.sort_by(|a, b| a.0.cmp(b.0));
            out.capacity.capacities = capacities.into_iter().map(|(_, c)| c.clone()).collect();
        }
        for class_name in out.classes.keys() {
            let volumes = storage
                .persistent_volumes
                .iter()
                .filter(|(_, pv)| volume_class(pv) == class_name)
                .filter_map(|(name, pv)| cache.pvs.get(name, Some(pv)))
                .collect();
            out.volumes_by_class.insert(class_name.clone(), volumes);
        }
        Ok(out)
    }

    /// Upstream AssumePodVolumes: the node's decisions with the volumes pre-bound and the
    /// claims annotated, assumed in the cache. On error nothing stays assumed.
    fn assume_pod_volumes(
        &self,
        volumes: &PodVolumes,
        node_name: &str,
    ) -> Result<PodVolumes, String> {
        let mut cache = self.cache();
        let mut bindings: Vec<BindingInfo> = Vec::new();
        for b in &volumes.static_bindings {
            let (pv, dirty) = bind_volume_to_claim(&b.pv, &b.pvc);
            let pv = Arc::new(pv);
            if dirty {
                let name = b.pv.metadata.name.clone().unwrap_or_default();
                if let Err(e) = cache.pvs.assume(&name, pv.clone(), Some(&b.pv)) {
                    for done in &bindings {
                        cache
                            .pvs
                            .restore(done.pv.metadata.name.as_deref().unwrap_or(""));
                    }
                    return Err(e.to_string());
                }
            }
            bindings.push(BindingInfo {
                pvc: b.pvc.clone(),
                pv,
            });
        }
        let mut provisions: Vec<DynamicProvision> = Vec::new();
        for p in &volumes.dynamic_provisions {
            let claim = Arc::new(claim_with_selected_node(&p.pvc, node_name));
            let key = claim_key(&p.pvc);
            if let Err(e) = cache.pvcs.assume(&key, claim.clone(), Some(&p.pvc)) {
                for done in &bindings {
                    cache
                        .pvs
                        .restore(done.pv.metadata.name.as_deref().unwrap_or(""));
                }
                for done in &provisions {
                    cache.pvcs.restore(&claim_key(&done.pvc));
                }
                return Err(e.to_string());
            }
            provisions.push(DynamicProvision {
                pvc: claim,
                capacity: p.capacity,
            });
        }
        Ok(PodVolumes {
            static_bindings: bindings,
            dynamic_provisions: provisions,
            node: volumes.node.clone(),
        })
    }

    /// Drops the assumptions on these volumes and claims.
    fn revert(&self, bindings: &[BindingInfo], provisions: &[DynamicProvision]) {
        let mut cache = self.cache();
        for b in bindings {
            cache
                .pvs
                .restore(b.pv.metadata.name.as_deref().unwrap_or(""));
        }
        for p in provisions {
            cache.pvcs.restore(&claim_key(&p.pvc));
        }
    }

    /// Upstream BindPodVolumes: the writes (volumes first, then claims; what was not
    /// written is no longer assumed when one fails), then the wait.
    async fn bind_pod_volumes(&self, pod: &PodInfo, volumes: &PodVolumes) -> Result<(), String> {
        let mut written = PodVolumes {
            static_bindings: Vec::with_capacity(volumes.static_bindings.len()),
            dynamic_provisions: Vec::with_capacity(volumes.dynamic_provisions.len()),
            node: volumes.node.clone(),
        };
        for (i, b) in volumes.static_bindings.iter().enumerate() {
            match self.client.update_persistent_volume(&b.pv).await {
                Ok(pv) => written.static_bindings.push(BindingInfo {
                    pvc: b.pvc.clone(),
                    pv: Arc::new(pv),
                }),
                Err(e) => {
                    self.revert(&volumes.static_bindings[i..], &volumes.dynamic_provisions);
                    return Err(e.to_string());
                }
            }
        }
        for (i, p) in volumes.dynamic_provisions.iter().enumerate() {
            match self.client.update_persistent_volume_claim(&p.pvc).await {
                Ok(pvc) => written.dynamic_provisions.push(DynamicProvision {
                    pvc: Arc::new(pvc),
                    capacity: p.capacity,
                }),
                Err(e) => {
                    self.revert(&[], &volumes.dynamic_provisions[i..]);
                    return Err(e.to_string());
                }
            }
        }
        let Some(storage) = &self.storage else {
            return Ok(());
        };
        let mut registration = self.binding_pods.register(pod.id.clone());
        tokio::select! {
            waited = wait_for_bindings(storage.clone(), &written, self.bind_timeout) => {
                waited.map_err(|e| format!("binding volumes: {e}"))
            }
            () = registration.deleted() => Err(format!(
                "binding volumes: pod does not exist any more: pod \"{}\" not found",
                pod.name()
            )),
        }
    }
}

/// Waits until `check_bindings` says every claim is bound, re-checking on each change of
/// the informer view, until `timeout`.
async fn wait_for_bindings(
    mut storage: StorageWatch,
    volumes: &PodVolumes,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // The view is dropped before waiting: holding it would make the scheduler copy its
        // storage listers on the next change instead of changing them in place.
        let bound = {
            let view = storage.borrow_and_update().clone();
            check_bindings(volumes, &view)?
        };
        if bound {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, storage.changed()).await {
            Err(_) => return Err("context deadline exceeded".to_string()),
            Ok(Err(_)) => return Err("the scheduler's storage informers stopped".to_string()),
            Ok(Ok(())) => {}
        }
    }
}

/// Requested and available bytes per class on the node: of the matched volumes when the
/// pod binds any, else of the capacities the provisioned volumes would come from.
fn class_resources(volumes: &PodVolumes) -> ClassResources {
    let mut out = ClassResources::new();
    if !volumes.static_bindings.is_empty() {
        for b in &volumes.static_bindings {
            let r = out.entry(volume_class(&b.pv).to_string()).or_default();
            r.requested = r.requested.wrapping_add(requested_storage(&b.pvc));
            r.capacity = r.capacity.wrapping_add(volume_capacity(&b.pv));
        }
        return out;
    }
    for p in &volumes.dynamic_provisions {
        let Some(capacity) = p.capacity else {
            continue;
        };
        let class = p
            .pvc
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default();
        let r = out.entry(class).or_default();
        r.capacity = capacity;
        r.requested = r.requested.wrapping_add(requested_storage(&p.pvc));
    }
    out
}

#[cfg(test)]
mod tests;

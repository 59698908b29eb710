//! DynamicResources: a pod goes only to nodes where every ResourceClaim it references is, or
//! can be, allocated, and the scheduler writes the allocation and the pod's reservation to
//! the claims.
//!
//! Upstream: pkg/scheduler/framework/plugins/dynamicresources. PreEnqueue keeps a pod out of
//! the active queue until its claims exist (a claim from a template is found through the
//! pod's `status.resourceClaimStatuses`, and must be owned by the pod). PreFilter skips pods
//! without claims, refuses a claim allocated and reserved for as many consumers as allowed,
//! one whose allocation is in flight for another pod, and a request naming a DeviceClass that
//! does not exist; it gathers what the [`allocator`] needs for the claims still to allocate.
//! Filter checks allocated claims' node selectors and runs the allocator for the node.
//! PostFilter deallocates an allocated claim reserved for no pod, so that the pod may try
//! again. Reserve records the node's allocations as in flight, so that the next pods' cycles
//! treat those devices as taken; PreBind adds the `resource.kubernetes.io/delete-protection`
//! finalizer to a claim it allocates (so that the claim controller deallocates it before it
//! can be removed), writes `status.allocation` and `status.reservedFor`, and keeps the written
//! claim in an assume cache until the informer shows it. A deallocation is a claim update, so
//! deleted claims are no event of this plugin, as upstream.
//!
//! Extended resources a DeviceClass serves ([`extended`]) are requested through one more
//! claim per pod: PreFilter finds it (or starts it in memory), Filter gives it the node's
//! requests and allocates it with the pod's other claims, PreBind creates it, writes its
//! allocation and reservation, and records it in the pod's
//! `status.extendedResourceClaimStatus`; Unreserve and PostFilter delete it when it was made
//! for an attempt that failed.
//!
//! Where this differs from upstream, on purpose:
//! - CEL selectors are evaluated by `kubesched-cel` (the `cel` crate with the Kubernetes
//!   libraries selectors use); its runtime cost is not metered (the API server refuses
//!   selectors over the cost limit when they are written).
//! - PostFilter's deallocation and Unreserve's removal of the pod from `reservedFor` are
//!   written in the background (PostFilter and Unreserve are synchronous here); the claim's
//!   update event requeues the pod.
//! - On a conflict PreBind writes again on the informer's newer claim (waiting for it up to
//!   two seconds) where upstream reads the claim from the API server.
//! - Without the scheduler's live objects (`simulate`), PreEnqueue lets every pod through and
//!   PreFilter refuses pods whose claims are missing, with the same messages.
//! - PostFilter tries the unavailable claims in index order (upstream picks one at random).
//! - `bindingTimeout` is accepted and warned about, not honoured: binding conditions are not
//!   supported. `filterTimeout` is honoured as upstream's (Filter gives a node up after it,
//!   `0s` for no limit).
//! - PreBind waits for the informer to show the extended-resource claim it created up to two
//!   seconds (upstream polls up to two minutes) before writing its status; the
//!   `scheduler_resourceclaim_creates_total` metric is not kept.

pub mod allocator;
pub mod explain;
pub mod extended;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use framework::events::QueueingHintFn;
use framework::interface::BoxFuture;
use framework::labels::NodeSelector;
use framework::{
    ActionType, ArgsError, ClientError, ClusterClient, ClusterEventWithHint, Code, CycleState,
    EnqueueExtensions, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, NodeToStatus,
    Plugin, PluginsRunner, PodInfo, PostFilterPlugin, PostFilterResult, PreBindPlugin,
    PreEnqueuePlugin, PreFilterPlugin, PreFilterResult, QueueingHint, ReservePlugin, Snapshot,
    Status, StorageListers, StorageWatch,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{
    ContainerExtendedResourceRequest, Pod, PodExtendedResourceClaimStatus, PodResourceClaim,
};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClass, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimStatus, ResourceSlice,
};

use crate::helper::events::{modified_pod, new_object, old_object, same_uid};
use crate::names;
use crate::volumebinding::assume_cache::AssumeCache;

use self::allocator::{
    AllocateError, Allocator, DeviceId, Features, Outcome, Selectors, CANNOT_ALLOCATE_ALL_CLAIMS,
};
use self::explain::{DeviceReason, NodeRejection};
use self::extended::ExtendedResources;

pub const NAME: &str = names::DYNAMIC_RESOURCES;

/// Why a pod with resource claims gets no signature.
pub const ERR_REASON_CLAIMS_NOT_SIGNABLE: &str = "pods with dra resource claims are not signable";

/// CycleState key of what PreFilter gathered and Filter and Reserve decided.
const STATE_KEY: &str = "DynamicResources";

/// Filter's message for an allocated claim whose node selector excludes the node.
pub const ERR_CLAIM_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// PreFilter's message for an allocated claim reserved for as many consumers as allowed.
pub const ERR_CLAIM_IN_USE: &str = "resourceclaim in use";
/// PostFilter's message after deallocating a claim.
pub const DEALLOCATION_COMPLETED: &str = "deallocation of ResourceClaim completed";
/// PostFilter's message when the pod has claims but none could be deallocated.
pub const STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// PostFilter's message when PreFilter found no claims for the pod.
pub const NO_NEW_CLAIMS: &str = "no new claims to deallocate";

/// The most consumers `status.reservedFor` may list (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX_SIZE: usize = 256;

/// The finalizer PreBind puts on a claim before writing its allocation, so that the claim
/// is not removed while allocated; the claim controller takes it off once it deallocated the
/// claim (upstream's `resourceapi.Finalizer`).
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// The `resource` of a pod in `status.reservedFor`.
const PODS_RESOURCE: &str = "pods";

/// How many times PreBind writes a claim whose version changed under it (upstream's
/// `retry.DefaultRetry` steps).
const CONFLICT_ATTEMPTS: usize = 5;

/// How long PreBind waits for the informer to show a claim newer than the one a write
/// conflicted on.
const CONFLICT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Distinct selector expressions kept compiled. A cluster's classes and claims use few.
const SELECTOR_CACHE_SIZE: usize = 256;

/// How long Filter may search for devices on one node when `filterTimeout` is not set
/// (upstream's DynamicResourcesFilterTimeoutDefault).
pub const DEFAULT_FILTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Filter's message for a node whose allocation was given up after `filterTimeout`.
pub const ERR_FILTER_TIMED_OUT: &str = "timed out trying to allocate devices";

/// `pluginConfig[].args` of DynamicResources (upstream's DynamicResourcesArgs).
/// `filterTimeout` (a Go duration, default [`DEFAULT_FILTER_TIMEOUT`], `0s` for no limit)
/// bounds Filter's search on one node. `bindingTimeout` is accepted so that upstream's
/// configuration files load, and warned about: it applies to binding conditions, which are
/// not supported.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicResourcesArgs {
    pub filter_timeout: Option<String>,
    pub binding_timeout: Option<serde_json::Value>,
}

impl DynamicResourcesArgs {
    /// The limit on Filter's search per node; `None` for no limit.
    pub fn filter_timeout(&self) -> Result<Option<Duration>, ArgsError> {
        let Some(text) = &self.filter_timeout else {
            return Ok(Some(DEFAULT_FILTER_TIMEOUT));
        };
        let timeout = framework::duration::parse_go_duration(text)
            .map_err(|e| ArgsError::new("filterTimeout", e))?;
        Ok((!timeout.is_zero()).then_some(timeout))
    }
}

/// What Filter reads the time from: the monotonic clock, or a test's.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Upstream: dynamicresources.DynamicResources.
pub struct DynamicResources {
    features: Features,
    client: Arc<dyn ClusterClient>,
    /// The informer's live objects, for PreEnqueue and queueing hints; `None` offline.
    storage: Option<StorageWatch>,
    /// Where PostFilter's and Unreserve's writes run: they are called from the scheduling
    /// loop's thread, outside the runtime.
    runtime: Option<tokio::runtime::Handle>,
    selectors: Arc<dyn Selectors>,
    claims: Mutex<ClaimTracker>,
    /// How long Filter searches for devices on one node; `None`: as long as it takes.
    filter_timeout: Option<Duration>,
    clock: Clock,
}

impl std::fmt::Debug for DynamicResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicResources")
            .field("features", &self.features)
            .finish_non_exhaustive()
    }
}

/// Claims the scheduler decided on but the informer does not show yet.
#[derive(Debug)]
struct ClaimTracker {
    /// Claims as PreBind wrote them, by `namespace/name`, until the informer catches up.
    assumed: AssumeCache<ResourceClaim>,
    /// Claims with an allocation chosen in Reserve and not yet written, by UID (upstream's
    /// inFlightAllocations): their devices are taken for every other pod.
    in_flight: HashMap<String, Arc<ResourceClaim>>,
}

/// Builds the plugin; its args are decoded, and `bindingTimeout` warned about.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args: DynamicResourcesArgs = framework::decode_args(args).map_err(|e| vec![e])?;
    let filter_timeout = args.filter_timeout().map_err(|e| vec![e])?;
    if let Some(value) = &args.binding_timeout {
        tracing::warn!(%value, "DynamicResources args: bindingTimeout is not honoured by kubesched (binding conditions are not supported)");
    }
    let mut plugin = DynamicResources::new(
        Features::ALL,
        handle.client.clone(),
        handle.storage.clone(),
        Arc::new(kubesched_cel::SelectorCache::new(SELECTOR_CACHE_SIZE)),
    );
    plugin.runtime = handle.runtime.clone();
    plugin.filter_timeout = filter_timeout;
    Ok(Arc::new(plugin))
}

impl DynamicResources {
    pub fn new(
        features: Features,
        client: Arc<dyn ClusterClient>,
        storage: Option<StorageWatch>,
        selectors: Arc<dyn Selectors>,
    ) -> Self {
        DynamicResources {
            features,
            client,
            storage,
            runtime: None,
            selectors,
            claims: Mutex::new(ClaimTracker {
                assumed: AssumeCache::new("resource.k8s.io/v1.ResourceClaim"),
                in_flight: HashMap::new(),
            }),
            filter_timeout: Some(DEFAULT_FILTER_TIMEOUT),
            clock: Arc::new(Instant::now),
        }
    }

    fn tracker(&self) -> MutexGuard<'_, ClaimTracker> {
        // The tracker is consistent between calls: keep going after a panic elsewhere.
        self.claims.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pod's claims as the scheduler sees them (assumed writes over the informer's).
    fn pod_claims(
        &self,
        pod: &Pod,
        storage: &StorageListers,
    ) -> Result<Vec<Arc<ResourceClaim>>, String> {
        let tracker = self.tracker();
        let mut out = Vec::new();
        for_each_pod_claim(
            pod,
            |ns, name| {
                let key = format!("{ns}/{name}");
                tracker.assumed.get(&key, storage.resource_claims.get(&key))
            },
            |claim| out.push(claim.clone()),
        )?;
        Ok(out)
    }
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
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

impl SignPlugin for DynamicResources {
    /// Whether a claim's devices are on one node or many is not simple to tell, so a pod
    /// with claims is not signed; the plugin does nothing for a pod without.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        let claims = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .is_some_and(|c| !c.is_empty());
        if claims {
            return Err(Status::unschedulable(ERR_REASON_CLAIMS_NOT_SIGNABLE));
        }
        Ok(Vec::new())
    }
}

impl PreEnqueuePlugin for DynamicResources {
    /// Holds back a pod whose claims do not all exist yet (or are being deleted, or are not
    /// its own generated claims).
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if !has_claims(&pod.pod) {
            return Status::success();
        }
        let Some(storage) = &self.storage else {
            return Status::success();
        };
        let storage = storage.borrow().clone();
        match self.pod_claims(&pod.pod, &storage) {
            Ok(_) => Status::success(),
            Err(message) => Status::unresolvable(message),
        }
    }
}

impl PreFilterPlugin for DynamicResources {
    /// Skips pods without claims; refuses claims that cannot be used now; prepares the
    /// allocation of the others.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let storage = snapshot.storage();
        let extended = self.pre_filter_extended(pod, storage);
        if !has_claims(&pod.pod) && extended.is_none() {
            return (None, Status::skip());
        }
        let claims = match self.pod_claims(&pod.pod, storage) {
            Ok(claims) => claims,
            Err(message) => return (None, Status::unresolvable(message)),
        };
        if claims.is_empty() && extended.is_none() {
            return (None, Status::skip());
        }
        let mut available_on = Vec::with_capacity(claims.len());
        let mut to_allocate = Vec::new();
        {
            let tracker = self.tracker();
            for (index, claim) in claims.iter().enumerate() {
                let status = claim.status.as_ref();
                if let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) {
                    if !can_be_reserved(claim) && !is_reserved_for_pod(&pod.pod, claim) {
                        return (None, Status::unresolvable(ERR_CLAIM_IN_USE));
                    }
                    let selector = match allocation.node_selector.as_ref() {
                        None => None,
                        Some(s) => {
                            let compiled = NodeSelector::compile(s);
                            if let Some(e) = compiled.errors.first() {
                                return (None, Status::error(e.to_string()));
                            }
                            Some(compiled)
                        }
                    };
                    available_on.push(selector);
                    continue;
                }
                available_on.push(None);
                if claim_uid(claim).is_some_and(|uid| tracker.in_flight.contains_key(uid)) {
                    return (
                        None,
                        Status::unresolvable(format!(
                            "resource claim {} is in the process of being allocated",
                            object_ref(claim)
                        )),
                    );
                }
                if let Err(status) = self.check_requests(claim, storage) {
                    return (None, status);
                }
                to_allocate.push(index);
            }
        }
        // A special claim without requests yet is allocated per node in Filter.
        let allocate_extended = extended.as_ref().is_some_and(|e| {
            !extended::has_requests(&e.claim)
                && e.claim
                    .status
                    .as_ref()
                    .is_none_or(|s| s.allocation.is_none())
        });
        let allocation = if to_allocate.is_empty() && !allocate_extended {
            None
        } else {
            Some(self.allocation_input(to_allocate, storage))
        };
        let count = claims.len();
        state.write(
            STATE_KEY,
            StateData(Arc::new(State {
                claims,
                available_on,
                allocation,
                extended,
                decided: Mutex::new(Decided {
                    reserved: vec![None; count],
                    written: vec![None; count],
                    ..Decided::default()
                }),
            })),
        );
        (None, Status::success())
    }
}

impl FilterPlugin for DynamicResources {
    /// Checks allocated claims' node selectors and allocates the others on this node.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(StateData(data)) = state.read::<StateData>(STATE_KEY) else {
            return Status::success();
        };
        let node_extended = match filter_extended(data.extended.as_ref(), &pod.pod, node) {
            Ok(claim) => claim,
            Err(status) => return status,
        };
        let unavailable: Vec<usize> = data
            .available_on
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.as_ref()
                    .is_some_and(|s| !s.matches(node.labels(), node.name()))
            })
            .map(|(i, _)| i)
            .collect();
        let mut allocations = None;
        let mut extended_allocation = None;
        if let Some(input) = &data.allocation {
            let mut claims: Vec<&ResourceClaim> = input
                .indices
                .iter()
                .filter_map(|&i| data.claims.get(i).map(AsRef::as_ref))
                .collect();
            if let Some((claim, _)) = &node_extended {
                claims.push(claim);
            }
            let deadline = self.filter_timeout.map(|t| (self.clock)() + t);
            let clock = &self.clock;
            let deadline_passed = move || deadline.is_some_and(|d| clock() >= d);
            let mut allocator = Allocator::new(
                self.features,
                &input.in_use,
                &input.classes,
                input.slices.iter().map(AsRef::as_ref),
                self.selectors.as_ref(),
            );
            if deadline.is_some() {
                allocator = allocator.with_deadline(&deadline_passed);
            }
            // Nothing to allocate when the special claim needs no devices on this node.
            let outcome = if claims.is_empty() {
                Ok(Outcome::Allocated(Vec::new()))
            } else {
                allocator.allocate(node.node(), &claims)
            };
            match outcome {
                // Only this node is affected: others may still allocate.
                Err(e @ AllocateError::InvalidPools) => return Status::unresolvable(e.to_string()),
                Err(AllocateError::DeadlineExceeded) => {
                    return Status::unresolvable(ERR_FILTER_TIMED_OUT)
                }
                Err(e) => return Status::error(e.to_string()),
                Ok(Outcome::Unschedulable(explanation)) => {
                    data.decided().rejections.insert(
                        node.name().to_string(),
                        NodeRejection {
                            unavailable: Vec::new(),
                            explanation: Some(explanation),
                        },
                    );
                    return Status::unresolvable(CANNOT_ALLOCATE_ALL_CLAIMS);
                }
                Ok(Outcome::Allocated(mut results)) => {
                    if results.len() != claims.len() {
                        return Status::unresolvable(CANNOT_ALLOCATE_ALL_CLAIMS);
                    }
                    if node_extended.is_some() {
                        extended_allocation = results.pop();
                    }
                    allocations = Some(results);
                }
            }
        }
        let mut decided = data.decided();
        if !unavailable.is_empty() {
            let names = unavailable
                .iter()
                .filter_map(|&i| data.claims.get(i))
                .map(|c| allocator::object_name(c))
                .collect();
            decided.rejections.insert(
                node.name().to_string(),
                NodeRejection {
                    unavailable: names,
                    explanation: None,
                },
            );
            decided.unavailable.extend(unavailable);
            return Status::unresolvable(ERR_CLAIM_NOT_AVAILABLE);
        }
        if let Some(results) = allocations {
            decided
                .node_allocations
                .insert(node.name().to_string(), results);
        }
        if let (Some((claim, mappings)), Some(allocation)) = (node_extended, extended_allocation) {
            decided.extended_on.insert(
                node.name().to_string(),
                ExtendedDecision {
                    claim: Arc::new(claim),
                    allocation,
                    mappings,
                },
            );
        }
        Status::success()
    }
}

impl PostFilterPlugin for DynamicResources {
    /// Deallocates one claim that was not available on some node and is reserved for no
    /// other pod, so that the next attempt may allocate it elsewhere.
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _statuses: &NodeToStatus,
        _runner: &dyn PluginsRunner,
    ) -> (Option<PostFilterResult>, Status) {
        let data = state
            .read::<StateData>(STATE_KEY)
            .map(|StateData(d)| d.clone());
        let has_extended = data.as_ref().is_some_and(|d| d.extended.is_some());
        if !has_claims(&pod.pod) && !has_extended {
            return (
                None,
                Status::with_reasons(Code::Unschedulable, std::iter::empty::<&'static str>()),
            );
        }
        let Some(data) = data else {
            return (None, Status::unschedulable(NO_NEW_CLAIMS));
        };
        let unavailable = data.decided().unavailable.clone();
        for index in unavailable {
            let Some(claim) = data.claims.get(index) else {
                continue;
            };
            let reserved = claim
                .status
                .as_ref()
                .and_then(|s| s.reserved_for.as_deref())
                .unwrap_or(&[]);
            let only_this_pod = reserved.len() == 1
                && reserved.first().map(|r| r.uid.as_str()) == pod.pod.metadata.uid.as_deref();
            if !reserved.is_empty() && !only_this_pod {
                continue;
            }
            let mut deallocated = (**claim).clone();
            if let Some(status) = deallocated.status.as_mut() {
                status.allocation = None;
                status.reserved_for = None;
            }
            return match self.write_in_background(deallocated, "deallocate") {
                Ok(()) => (None, Status::unschedulable(DEALLOCATION_COMPLETED)),
                Err(status) => (None, status),
            };
        }
        // A special claim from an earlier attempt goes, and the pod starts over without it.
        if let Some(ext) = &data.extended {
            if !extended::is_special_claim_name(&ext.claim) {
                return match self.delete_in_background((*ext.claim).clone()) {
                    Ok(()) => (None, Status::unschedulable(extended::DELETION_COMPLETED)),
                    Err(status) => (None, status),
                };
            }
        }
        (None, Status::unschedulable(STILL_NOT_SCHEDULABLE))
    }
}

impl ReservePlugin for DynamicResources {
    /// Takes the node's allocations as in flight: other pods' cycles see their devices as
    /// in use until PreBind wrote them or Unreserve dropped them.
    fn reserve(&self, state: &mut CycleState, _pod: &PodInfo, node_name: &str) -> Status {
        let Some(StateData(data)) = state.read::<StateData>(STATE_KEY) else {
            return Status::success();
        };
        let Some(input) = &data.allocation else {
            return Status::success();
        };
        let mut decided = data.decided();
        let Some(allocations) = decided.node_allocations.get(node_name).cloned() else {
            return Status::error("claim allocation not found for node");
        };
        if allocations.len() != input.indices.len() {
            return Status::error(format!(
                "internal error, have {} allocations, {} claims to allocate, want {} claims",
                allocations.len(),
                input.indices.len(),
                input.indices.len()
            ));
        }
        let mut tracker = self.tracker();
        if let Some(decision) = decided.extended_on.get(node_name).cloned() {
            let mut pending = (*decision.claim).clone();
            pending
                .status
                .get_or_insert_with(ResourceClaimStatus::default)
                .allocation = Some(decision.allocation.clone());
            if let Some(uid) = claim_uid(&decision.claim) {
                tracker.in_flight.insert(uid.to_string(), Arc::new(pending));
            }
            decided.extended_reserved = Some(decision);
        }
        for (&index, allocation) in input.indices.iter().zip(allocations) {
            let Some(claim) = data.claims.get(index) else {
                return Status::error("internal error, claim with allocation not found");
            };
            let mut pending = (**claim).clone();
            pending
                .status
                .get_or_insert_with(ResourceClaimStatus::default)
                .allocation = Some(allocation.clone());
            if let Some(slot) = decided.reserved.get_mut(index) {
                *slot = Some(allocation);
            }
            if let Some(uid) = claim_uid(claim) {
                tracker.in_flight.insert(uid.to_string(), Arc::new(pending));
            }
        }
        Status::success()
    }

    /// Drops the pod's in-flight allocations and takes the pod out of `reservedFor` where
    /// PreBind already wrote it.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, _node_name: &str) {
        let Some(StateData(data)) = state.read::<StateData>(STATE_KEY) else {
            return;
        };
        let written = std::mem::take(&mut data.decided().written);
        let extended_written = data.decided().extended_written.take();
        {
            let mut tracker = self.tracker();
            if let Some(uid) = data.extended.as_ref().and_then(|e| claim_uid(&e.claim)) {
                tracker.in_flight.remove(uid);
            }
            if let Some(claim) = &extended_written {
                tracker.assumed.restore(&object_ref(claim));
            }
            for claim in &data.claims {
                if let Some(uid) = claim_uid(claim) {
                    if tracker.in_flight.remove(uid).is_some() {
                        tracker.assumed.restore(&object_ref(claim));
                    }
                }
            }
        }
        for claim in written.into_iter().flatten() {
            if !is_reserved_for_pod(&pod.pod, &claim) {
                continue;
            }
            let mut released = (*claim).clone();
            if let Some(list) = released
                .status
                .as_mut()
                .and_then(|s| s.reserved_for.as_mut())
            {
                list.retain(|r| Some(r.uid.as_str()) != pod.pod.metadata.uid.as_deref());
            }
            // The pod is retried either way; a failed write is taken up then.
            let _ = self.write_in_background(released, "unreserve");
        }
        // The special claim was made for this attempt only.
        if let Some(claim) = extended_written {
            let _ = self.delete_in_background((*claim).clone());
        }
    }
}

impl PreBindPlugin for DynamicResources {
    /// Writes each claim's allocation (when Reserve chose one) and the pod's reservation.
    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        _node_name: &'a str,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let Some(StateData(data)) = state.read::<StateData>(STATE_KEY) else {
                return Status::success();
            };
            for (index, claim) in data.claims.iter().enumerate() {
                if is_reserved_for_pod(&pod.pod, claim) {
                    continue;
                }
                let allocation = data.decided().reserved.get(index).cloned().flatten();
                match self.bind_claim(claim, allocation, &pod.pod).await {
                    Ok(stored) => {
                        if let Some(slot) = data.decided().written.get_mut(index) {
                            *slot = Some(Arc::new(stored));
                        }
                    }
                    Err(message) => return Status::error(message),
                }
            }
            let reserved = data.decided().extended_reserved.clone();
            if let Some(decision) = reserved {
                if let Err(message) = self.bind_extended_claim(data, &decision, &pod.pod).await {
                    return Status::error(message);
                }
            }
            Status::success()
        })
    }
}

impl EnqueueExtensions for DynamicResources {
    /// A node added or relabelled; a claim added or updated; the pod's generated claims
    /// named in its status; a class added or updated; a slice added or updated.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let storage = self.storage.clone();
        let claim_hint: QueueingHintFn = Arc::new(move |pod, old, new| {
            is_schedulable_after_claim_change(storage.as_ref(), pod, old, new)
        });
        let storage = self.storage.clone();
        let pod_hint: QueueingHintFn = Arc::new(move |pod, old, new| {
            is_schedulable_after_pod_change(storage.as_ref(), pod, old, new)
        });
        vec![
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::ResourceClaim,
                ActionType::ADD | ActionType::UPDATE,
                claim_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                pod_hint,
            ),
            ClusterEventWithHint::new(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
            ),
            ClusterEventWithHint::new(
                EventResource::ResourceSlice,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
    }
}

/// Queue when a claim of the pod was created or its status changed, or when any claim was
/// deallocated (its devices are free again); skip while some claim of the pod is missing.
fn is_schedulable_after_claim_change(
    storage: Option<&StorageWatch>,
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = new_object::<ResourceClaim>(new)?;
    let original = old_object::<ResourceClaim>(old)?;
    let mut uses_claim = false;
    let found = match storage {
        Some(storage) => {
            let storage = storage.borrow().clone();
            for_each_pod_claim(
                pod,
                |ns, name| storage.resource_claim(ns, name).cloned(),
                |claim| uses_claim |= same_claim(claim, modified),
            )
        }
        None => for_each_pod_claim(
            pod,
            |ns, name| {
                (modified.metadata.namespace.as_deref() == Some(ns)
                    && modified.metadata.name.as_deref() == Some(name))
                .then(|| modified.clone())
            },
            |claim| uses_claim |= same_claim(claim, modified),
        ),
    };
    if found.is_err() {
        return Ok(QueueingHint::QueueSkip);
    }
    let allocated = |c: &ResourceClaim| c.status.as_ref().is_some_and(|s| s.allocation.is_some());
    if original.is_some_and(|o| allocated(o)) && !allocated(modified) {
        return Ok(QueueingHint::Queue);
    }
    if !uses_claim {
        return Ok(QueueingHint::QueueSkip);
    }
    let Some(original) = original else {
        return Ok(QueueingHint::Queue);
    };
    if original.status == modified.status {
        return Ok(QueueingHint::QueueSkip);
    }
    Ok(QueueingHint::Queue)
}

/// Queue when the pod itself now names all its generated claims and they exist.
fn is_schedulable_after_pod_change(
    storage: Option<&StorageWatch>,
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = modified_pod(new)?;
    if !same_uid(pod, modified) {
        return Ok(QueueingHint::QueueSkip);
    }
    let found = match storage {
        Some(storage) => {
            let storage = storage.borrow().clone();
            for_each_pod_claim(
                modified,
                |ns, name| storage.resource_claim(ns, name).cloned(),
                |_| {},
            )
        }
        None => Ok(()),
    };
    Ok(if found.is_ok() {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

impl DynamicResources {
    /// The pod's extended resources when a DeviceClass serves one of them, with its special
    /// claim (from an earlier attempt as the scheduler sees it, or a new one in memory).
    fn pre_filter_extended(
        &self,
        pod: &PodInfo,
        storage: &StorageListers,
    ) -> Option<ExtendedResources> {
        if pod.requests.scalar_resources.is_empty() || storage.device_classes.is_empty() {
            return None;
        }
        let tracker = self.tracker();
        extended::pre_filter(&pod.pod, &pod.requests.scalar_resources, storage, |key| {
            tracker.assumed.get(key, storage.resource_claims.get(key))
        })
    }

    /// Creates the special claim Reserve chose, writes its allocation and the pod's
    /// reservation, and records it in the pod's `status.extendedResourceClaimStatus`.
    /// Upstream: bindClaim for the special claim, createExtendedResourceClaimInAPI,
    /// patchPodExtendedResourceClaimStatus.
    async fn bind_extended_claim(
        &self,
        data: &State,
        decision: &ExtendedDecision,
        pod: &Pod,
    ) -> Result<(), String> {
        let to_create = extended::to_create(&decision.claim);
        let created = self
            .client
            .create_resource_claim(&to_create)
            .await
            .map_err(|e| {
                format!(
                    "create claim for extended resources {}: {e}",
                    object_ref(&to_create)
                )
            })?;
        data.decided().extended_written = Some(Arc::new(created.clone()));
        // The allocation is written on the informer's copy, so that the assume cache holds
        // it until the informer shows the write.
        let current = match self.claim_in_informer(&created).await {
            Some(current) => current,
            None => Arc::new(created),
        };
        let result = self
            .bind_claim(&current, Some(decision.allocation.clone()), pod)
            .await;
        if let Some(uid) = claim_uid(&decision.claim) {
            self.tracker().in_flight.remove(uid);
        }
        let stored = result?;
        let name = stored.metadata.name.clone().unwrap_or_default();
        data.decided().extended_written = Some(Arc::new(stored));
        let pod_ref = framework::PodRef::of(pod);
        let status = PodExtendedResourceClaimStatus {
            request_mappings: decision.mappings.clone(),
            resource_claim_name: name,
        };
        self.client
            .update_pod_extended_resource_claim_status(&pod_ref, &status)
            .await
            .map_err(|e| {
                format!(
                    "update pod {}/{} ExtendedResourceClaimStatus: {e}",
                    pod_ref.namespace, pod_ref.name
                )
            })
    }

    /// The claim as the informer shows it, waiting up to [`CONFLICT_WAIT`] for a claim
    /// just created; `None` without live objects, or when it does not come.
    async fn claim_in_informer(&self, claim: &ResourceClaim) -> Option<Arc<ResourceClaim>> {
        let mut storage = self.storage.clone()?;
        let ns = claim.metadata.namespace.as_deref().unwrap_or("");
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let deadline = tokio::time::Instant::now() + CONFLICT_WAIT;
        loop {
            // The guard is dropped before waiting.
            let seen = storage
                .borrow_and_update()
                .resource_claim(ns, name)
                .cloned();
            if seen.is_some() {
                return seen;
            }
            match tokio::time::timeout_at(deadline, storage.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Deletes a claim without waiting (PostFilter and Unreserve are synchronous).
    fn delete_in_background(&self, claim: ResourceClaim) -> Result<(), Status> {
        let runtime = self
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        let Some(runtime) = runtime else {
            return Err(Status::error(format!(
                "cannot delete claim {}: no runtime to write it",
                object_ref(&claim)
            )));
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            if let Err(e) = client.delete_resource_claim(&claim).await {
                tracing::warn!(claim = %object_ref(&claim), error = %e, "delete failed");
            }
        });
        Ok(())
    }

    /// Refuses a request whose DeviceClass does not exist, or of a kind this code does not
    /// know. Upstream: validateDeviceClass.
    fn check_requests(
        &self,
        claim: &ResourceClaim,
        storage: &StorageListers,
    ) -> Result<(), Status> {
        let class_exists = |class: &str, request: &str| {
            if storage.device_class(class).is_some() {
                Ok(())
            } else {
                Err(Status::unresolvable(format!(
                    "request {request}: device class {class} does not exist"
                )))
            }
        };
        let requests = claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.requests.as_deref())
            .unwrap_or(&[]);
        for request in requests {
            let subrequests = request.first_available.as_deref().unwrap_or(&[]);
            if let Some(exactly) = &request.exactly {
                class_exists(&exactly.device_class_name, &request.name)?;
            } else if !subrequests.is_empty() {
                if !self.features.prioritized_list {
                    return Err(Status::unresolvable(format!(
                        "resource claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                        object_ref(claim),
                        request.name
                    )));
                }
                for sub in subrequests {
                    class_exists(
                        &sub.device_class_name,
                        &format!("{}/{}", request.name, sub.name),
                    )?;
                }
            } else {
                return Err(Status::unresolvable(format!(
                    "resource claim {}, request {}: unsupported request type",
                    object_ref(claim),
                    request.name
                )));
            }
        }
        Ok(())
    }

    /// What Filter's allocator needs: the devices in use (allocated claims, assumed writes
    /// and in-flight allocations), the classes and the slices.
    fn allocation_input(&self, indices: Vec<usize>, storage: &StorageListers) -> AllocationInput {
        let mut tracker = self.tracker();
        // Writes the informer has caught up with (or claims deleted since) need no overlay.
        tracker
            .assumed
            .prune(|key| storage.resource_claims.get(key).cloned());
        let mut in_use = HashSet::new();
        for (key, claim) in &storage.resource_claims {
            let claim = tracker
                .assumed
                .get(key, Some(claim))
                .unwrap_or_else(|| claim.clone());
            add_allocated_devices(&claim, &mut in_use);
        }
        for claim in tracker.in_flight.values() {
            add_allocated_devices(claim, &mut in_use);
        }
        AllocationInput {
            indices,
            in_use,
            classes: storage
                .device_classes
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            slices: storage.all_resource_slices().cloned().collect(),
        }
    }

    /// Adds the delete-protection finalizer and writes the allocation (when there is one),
    /// writes the pod's reservation to the claim's status, and assumes the written claim
    /// until the informer shows it; a conflict on either write starts again on a newer claim.
    /// Upstream: bindClaim.
    async fn bind_claim(
        &self,
        claim: &Arc<ResourceClaim>,
        allocation: Option<AllocationResult>,
        pod: &Pod,
    ) -> Result<ResourceClaim, String> {
        let name = object_ref(claim);
        let mut current = claim.clone();
        let mut attempts = 1;
        let result = loop {
            match self.write_binding(&current, allocation.as_ref(), pod).await {
                Err(WriteError::Conflict(message)) if attempts < CONFLICT_ATTEMPTS => {
                    // Someone changed the claim since it was read: write again on the
                    // informer's newer version, as upstream does on a fresh read.
                    match self.newer_claim(&current).await {
                        Some(newer) => {
                            current = newer;
                            attempts += 1;
                        }
                        None => break Err(message),
                    }
                }
                Err(WriteError::Conflict(message) | WriteError::Other(message)) => {
                    break Err(message)
                }
                Ok(stored) => break Ok(stored),
            }
        };
        if allocation.is_some() {
            let mut tracker = self.tracker();
            if let Ok(stored) = &result {
                // Refused only for a write older than what is seen: the informer is ahead.
                let _ = tracker
                    .assumed
                    .assume(&name, Arc::new(stored.clone()), Some(&current));
            }
            if let Some(uid) = claim_uid(claim) {
                tracker.in_flight.remove(uid);
            }
        }
        result
    }

    /// One attempt: the finalizer (an object update) when allocating a claim without it,
    /// then one status write with the allocation (if any) and the pod in `reservedFor`.
    async fn write_binding(
        &self,
        claim: &ResourceClaim,
        allocation: Option<&AllocationResult>,
        pod: &Pod,
    ) -> Result<ResourceClaim, WriteError> {
        let name = object_ref(claim);
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(WriteError::Other(format!(
                "claim {name} got deleted in the meantime"
            )));
        }
        let mut updated = claim.clone();
        if let Some(allocation) = allocation {
            if updated
                .status
                .as_ref()
                .is_some_and(|s| s.allocation.is_some())
            {
                return Err(WriteError::Other(format!(
                    "claim {name} got allocated elsewhere in the meantime"
                )));
            }
            // The finalizer goes first, in an update of the object (a status write leaves
            // metadata alone): an allocated claim is then never removed before the claim
            // controller deallocated it. A claim that has it from an interrupted attempt
            // keeps it as it is.
            if !has_delete_protection(&updated) {
                updated
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(DELETE_PROTECTION_FINALIZER.to_string());
                updated = self
                    .client
                    .update_resource_claim(&updated)
                    .await
                    .map_err(|e| {
                        WriteError::from_client(format!("add finalizer to claim {name}: {e}"), &e)
                    })?;
            }
            updated
                .status
                .get_or_insert_with(ResourceClaimStatus::default)
                .allocation = Some(allocation.clone());
        }
        updated
            .status
            .get_or_insert_with(ResourceClaimStatus::default)
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(ResourceClaimConsumerReference {
                api_group: None,
                resource: PODS_RESOURCE.to_string(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            });
        self.client
            .update_resource_claim_status(&updated)
            .await
            .map_err(|e| {
                let message = if allocation.is_some() {
                    format!("add allocation and reservation to claim {name}: {e}")
                } else {
                    format!("add reservation to claim {name}: {e}")
                };
                WriteError::from_client(message, &e)
            })
    }

    /// The claim as the informer shows it once it is newer than `claim`, waiting up to
    /// [`CONFLICT_WAIT`]; `None` without live objects, or when it does not come.
    async fn newer_claim(&self, claim: &ResourceClaim) -> Option<Arc<ResourceClaim>> {
        let mut storage = self.storage.clone()?;
        let ns = claim.metadata.namespace.as_deref().unwrap_or("");
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let seen = resource_version(claim);
        let deadline = tokio::time::Instant::now() + CONFLICT_WAIT;
        loop {
            // The guard is dropped before waiting.
            let latest = storage
                .borrow_and_update()
                .resource_claim(ns, name)
                .cloned();
            if let Some(latest) = latest {
                if resource_version(&latest) > seen {
                    return Some(latest);
                }
            }
            match tokio::time::timeout_at(deadline, storage.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Writes a claim's status without waiting (PostFilter and Unreserve are synchronous).
    fn write_in_background(&self, claim: ResourceClaim, what: &'static str) -> Result<(), Status> {
        let runtime = self
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        let Some(runtime) = runtime else {
            return Err(Status::error(format!(
                "cannot {what} claim {}: no runtime to write it",
                object_ref(&claim)
            )));
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            if let Err(e) = client.update_resource_claim_status(&claim).await {
                tracing::warn!(claim = %object_ref(&claim), error = %e, "{what} failed");
            }
        });
        Ok(())
    }
}

/// Why PreBind's write failed: a conflict is retried on a newer claim.
enum WriteError {
    Conflict(String),
    Other(String),
}

impl WriteError {
    /// `message` about the API server's answer `e`: a conflict when it refused a stale
    /// `resourceVersion`.
    fn from_client(message: String, e: &ClientError) -> Self {
        match e {
            ClientError::Api { code: 409, .. } => WriteError::Conflict(message),
            _ => WriteError::Other(message),
        }
    }
}

/// What PreFilter found; Filter and Reserve add their decisions under the lock.
#[derive(Clone)]
struct StateData(Arc<State>);

struct State {
    /// The pod's claims in `spec.resourceClaims` order (those that resolve to a claim).
    claims: Vec<Arc<ResourceClaim>>,
    /// Per claim: the node selector of its allocation, when allocated with one.
    available_on: Vec<Option<NodeSelector>>,
    /// The claims to allocate and the allocator's inputs; `None` when all are allocated.
    allocation: Option<AllocationInput>,
    /// The pod's extended resources served by DeviceClasses, and its special claim.
    extended: Option<ExtendedResources>,
    decided: Mutex<Decided>,
}

impl State {
    fn decided(&self) -> MutexGuard<'_, Decided> {
        self.decided.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct AllocationInput {
    /// Indices into [`State::claims`] of the claims to allocate, in order.
    indices: Vec<usize>,
    in_use: HashSet<DeviceId>,
    classes: BTreeMap<String, Arc<DeviceClass>>,
    slices: Vec<Arc<ResourceSlice>>,
}

#[derive(Default)]
struct Decided {
    /// Claims whose allocation excluded some node (PostFilter's candidates).
    unavailable: BTreeSet<usize>,
    /// Filter's allocations per node, one per claim to allocate.
    node_allocations: HashMap<String, Vec<AllocationResult>>,
    /// Per claim: the allocation Reserve chose.
    reserved: Vec<Option<AllocationResult>>,
    /// Per claim: what PreBind wrote.
    written: Vec<Option<Arc<ResourceClaim>>>,
    /// Per node Filter rejected, what it found there (for [`explain_filter`]).
    rejections: HashMap<String, NodeRejection>,
    /// Per node: the special claim for that node and its allocation.
    extended_on: HashMap<String, ExtendedDecision>,
    /// The special claim Reserve chose.
    extended_reserved: Option<ExtendedDecision>,
    /// The special claim as PreBind created (and then wrote) it.
    extended_written: Option<Arc<ResourceClaim>>,
}

/// The special claim for one node: its requests, the devices allocated to them, and which
/// request serves which container's resource.
#[derive(Clone)]
struct ExtendedDecision {
    claim: Arc<ResourceClaim>,
    allocation: AllocationResult,
    mappings: Vec<ContainerExtendedResourceRequest>,
}

/// Why Filter rejected `node` in the cycle `state` holds, claim by claim: empty for a node it
/// did not reject, or a pod it skipped.
pub fn explain_filter(state: &CycleState, node: &str) -> Vec<DeviceReason> {
    let Some(StateData(data)) = state.read::<StateData>(STATE_KEY) else {
        return Vec::new();
    };
    let decided = data.decided();
    decided
        .rejections
        .get(node)
        .map(explain::device_reasons)
        .unwrap_or_default()
}

/// Filter's part for the special claim on `node`: the node's variant of it (requests for
/// the resources the node does not advertise) with its container mappings, `None` when the
/// node needs none, or the status that rejects the node. Upstream: filterExtendedResources.
fn filter_extended(
    ext: Option<&ExtendedResources>,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<Option<(ResourceClaim, Vec<ContainerExtendedResourceRequest>)>, Status> {
    let Some(ext) = ext else {
        return Ok(None);
    };
    // From an earlier attempt: PostFilter deletes it and the pod starts over.
    if extended::has_requests(&ext.claim) {
        return Err(Status::unresolvable(extended::ERR_STALE_EXTENDED_CLAIM));
    }
    let resources = extended::node_resources(ext, &node.allocatable.scalar_resources)
        .map_err(|()| Status::unresolvable(extended::ERR_CANNOT_FIT_RESOURCE))?;
    let allocated = ext
        .claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some());
    if resources.is_empty() || allocated {
        return Ok(None);
    }
    Ok(Some(extended::node_claim(&ext.claim, pod, &resources)))
}

/// Whether the pod references any ResourceClaim.
fn has_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// Resolves each of the pod's claims with `get(namespace, name)` and hands it to `found`;
/// the first claim that is missing, being deleted or (for a generated claim) not the pod's
/// is an error with upstream's message. A template claim without a generated name in the
/// status is not created yet; one whose status entry has no name is skipped, as upstream.
fn for_each_pod_claim(
    pod: &Pod,
    get: impl Fn(&str, &str) -> Option<Arc<ResourceClaim>>,
    mut found: impl FnMut(&Arc<ResourceClaim>),
) -> Result<(), String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let claims: &[PodResourceClaim] = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .unwrap_or(&[]);
    for pod_claim in claims {
        let (name, must_check_owner) = if let Some(name) = &pod_claim.resource_claim_name {
            (Some(name.clone()), false)
        } else if pod_claim.resource_claim_template_name.is_some() {
            let status = pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_deref())
                .unwrap_or(&[])
                .iter()
                .find(|s| s.name == pod_claim.name);
            match status {
                Some(s) => (s.resource_claim_name.clone(), true),
                None => {
                    return Err(format!(
                        "pod \"{ns}/{pod_name}\": ResourceClaim not created yet"
                    ))
                }
            }
        } else {
            return Err(format!(
                "pod \"{ns}/{pod_name}\", spec.resourceClaim {:?}: none of the supported fields are set",
                pod_claim.name
            ));
        };
        let Some(name) = name else {
            continue;
        };
        let Some(claim) = get(ns, &name) else {
            return Err(format!(
                "resourceclaim.resource.k8s.io \"{name}\" not found"
            ));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim \"{name}\" is being deleted"));
        }
        if must_check_owner && !is_controlled_by(&claim, pod) {
            return Err(format!(
                "ResourceClaim {ns}/{name} was not created for pod {ns}/{pod_name} (pod is not owner)"
            ));
        }
        found(&claim);
    }
    Ok(())
}

/// Whether the pod is the claim's controlling owner.
fn is_controlled_by(claim: &ResourceClaim, pod: &Pod) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Whether `status.reservedFor` names the pod.
fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or(&[])
        .iter()
        .any(|r| r.uid == uid)
}

/// Whether another consumer may still be added to `status.reservedFor`.
fn can_be_reserved(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .map_or(0, Vec::len)
        < RESERVED_FOR_MAX_SIZE
}

/// Adds the devices of the claim's allocation to `in_use`; admin access does not take a
/// device away from others.
fn add_allocated_devices(claim: &ResourceClaim, in_use: &mut HashSet<DeviceId>) {
    let results = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or(&[]);
    for r in results {
        if r.admin_access == Some(true) {
            continue;
        }
        in_use.insert(DeviceId::new(&r.driver, &r.pool, &r.device));
    }
}

/// Whether the claim carries [`DELETE_PROTECTION_FINALIZER`].
fn has_delete_protection(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == DELETE_PROTECTION_FINALIZER))
}

/// The claim's `resourceVersion` as a number; one that does not parse counts as 0.
fn resource_version(claim: &ResourceClaim) -> u64 {
    claim
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn claim_uid(claim: &ResourceClaim) -> Option<&str> {
    claim.metadata.uid.as_deref().filter(|u| !u.is_empty())
}

/// Whether two objects are the same claim: equal UIDs when both have one, else equal
/// namespace and name.
fn same_claim(a: &ResourceClaim, b: &ResourceClaim) -> bool {
    match (claim_uid(a), claim_uid(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.metadata.namespace == b.metadata.namespace && a.metadata.name == b.metadata.name,
    }
}

/// `namespace/name`, as upstream's klog.KObj prints an object.
fn object_ref(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    )
}

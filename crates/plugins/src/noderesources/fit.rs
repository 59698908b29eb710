//! NodeResourcesFit: rejects nodes without room for the pod's requests (and for one more
//! pod), and scores the rest by how much of each configured resource the pod leaves used.
//!
//! Upstream: pkg/scheduler/framework/plugins/noderesources/fit.go. A request larger than the
//! node's whole allocatable can never fit, whatever is evicted: that node is
//! `UnschedulableAndUnresolvable`, so preemption does not try it. A request larger than what
//! is free is `Unschedulable`. All shortfalls are reported together, in the order pods, cpu,
//! memory, ephemeral-storage, then scalar resources by name. An extended resource that a
//! DeviceClass serves (its `extendedResourceName`, or the implicit
//! `deviceclass.resource.kubernetes.io/<class>`) is left to DynamicResources on a node that
//! does not advertise it. Scoring counts only what nodes advertise: upstream's scoring of
//! such resources by the devices of each node is not built.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Node, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use framework::quantity::{parse_milli_value, parse_value};
use framework::types::{is_extended_resource_name, RESOURCE_CPU};
use framework::{
    filter_each, ActionType, ArgsError, ClusterEventWithHint, Code, CycleState, EnqueueExtensions,
    EventObject, EventResource, FilterPlugin, Handle, NodeInfo, NodeRow, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, Resource, ScorePlugin,
    Snapshot, Status, StorageListers,
};
use framework::{SignFragment, SignPlugin};

use super::args::{
    NodeResourcesFitArgs, LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO,
};
use super::requested_to_capacity_ratio::FunctionShape;
use super::resource_allocation::{NodeAmounts, ResourceAllocation};
use super::{least_allocated, most_allocated, requested_to_capacity_ratio};
use crate::dynamicresources::extended;
use crate::names;

pub const NAME: &str = names::NODE_RESOURCES_FIT;

/// Where PreFilter keeps the pod's requests for Filter.
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeResourcesFit";
/// Where PreScore keeps the pod's request of each scored resource for Score.
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesFit";

pub const REASON_TOO_MANY_PODS: &str = "Too many pods";
pub const REASON_INSUFFICIENT_CPU: &str = "Insufficient cpu";
pub const REASON_INSUFFICIENT_MEMORY: &str = "Insufficient memory";
pub const REASON_INSUFFICIENT_EPHEMERAL_STORAGE: &str = "Insufficient ephemeral-storage";

/// Upstream: noderesources.Fit.
#[derive(Debug)]
pub struct Fit {
    ignored_resources: HashSet<String>,
    ignored_resource_groups: HashSet<String>,
    strategy: Strategy,
    resources: ResourceAllocation,
}

/// Builds NodeResourcesFit from its args (absent = LeastAllocated on cpu and memory).
pub fn new_fit(
    args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args = NodeResourcesFitArgs::decode(args).map_err(|e| vec![e])?;
    let errs = args.validate();
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Arc::new(Fit::from_args(&args)?))
}

impl Fit {
    /// The plugin of validated, defaulted args.
    fn from_args(args: &NodeResourcesFitArgs) -> Result<Fit, Vec<ArgsError>> {
        let Some(scoring) = &args.scoring_strategy else {
            return Err(vec![ArgsError::new(
                "scoringStrategy",
                "scoring strategy not specified",
            )]);
        };
        let strategy = match scoring.strategy_type.as_str() {
            LEAST_ALLOCATED => Strategy::LeastAllocated,
            MOST_ALLOCATED => Strategy::MostAllocated,
            REQUESTED_TO_CAPACITY_RATIO => {
                Strategy::RequestedToCapacityRatio(FunctionShape::from_args(
                    scoring
                        .requested_to_capacity_ratio
                        .as_ref()
                        .map(|r| r.shape.as_slice())
                        .unwrap_or_default(),
                ))
            }
            other => {
                return Err(vec![ArgsError::new(
                    "scoringStrategy.type",
                    format!("scoring strategy {other} is not supported"),
                )])
            }
        };
        Ok(Fit {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_resource_groups: args.ignored_resource_groups.iter().cloned().collect(),
            strategy,
            resources: ResourceAllocation::new(&scoring.resources, false),
        })
    }
}

impl Plugin for Fit {
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
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for Fit {
    /// Verdicts and scores depend on the pod's requests (see [`super::sign_resources`]).
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        super::sign_resources(pod)
    }
}

impl PreFilterPlugin for Fit {
    /// Keeps the pod's requests (containers, sidecars, init containers, pod-level requests
    /// and overhead) for Filter. Never skips: even a pod requesting nothing needs a pod slot.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let backed_by_dra = dra_backed_resources(&pod.requests, snapshot.storage());
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState(pod.requests.clone(), backed_by_dra),
        );
        (None, Status::success())
    }
}

impl FilterPlugin for Fit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        self.filter_on(state, node)
    }

    /// Reads the row unless the pod requests a scalar resource (the row has none). The
    /// PreFilter state is looked up once per node.
    fn filter_with_row(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
    ) -> Status {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) if s.0.scalar_resources.is_empty() => self.filter_state(s, row),
            Some(s) => self.filter_state(s, node),
            None => missing_pre_filter_state(),
        }
    }

    /// [`filter_with_row`](Self::filter_with_row) for each node, the state read once.
    fn filter_rows(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        alive: &mut Vec<u32>,
        rejected: &mut Vec<(u32, Status)>,
    ) {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) if s.0.scalar_resources.is_empty() => {
                filter_each(alive, rejected, |i| self.filter_state(s, &rows[i]));
            }
            Some(s) => filter_each(alive, rejected, |i| self.filter_state(s, &*nodes[i])),
            None => filter_each(alive, rejected, |_| missing_pre_filter_state()),
        }
    }
}

fn missing_pre_filter_state() -> Status {
    Status::error(format!(
        "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
    ))
}

impl Fit {
    fn filter_on<N: NodeAmounts + ?Sized>(&self, state: &CycleState, node: &N) -> Status {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => self.filter_state(s, node),
            None => missing_pre_filter_state(),
        }
    }

    fn filter_state<N: NodeAmounts + ?Sized>(&self, state: &PreFilterState, node: &N) -> Status {
        let PreFilterState(requests, backed_by_dra) = state;
        let insufficient = fits_request(
            requests,
            node,
            &self.ignored_resources,
            &self.ignored_resource_groups,
            backed_by_dra,
        );
        if insufficient.is_empty() {
            return Status::success();
        }
        let code = if insufficient.iter().any(|r| r.unresolvable) {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Status::with_reasons(code, insufficient.into_iter().map(|r| r.reason))
    }
}

impl PreScorePlugin for Fit {
    /// Keeps the pod's request of each scored resource (non-zero requests for cpu and
    /// memory) for Score.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState {
                pod_requests: self.resources.pod_requests(pod),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for Fit {
    /// The strategy's score, already on 0..=100: no NormalizeScore.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if self.resources.is_empty() {
            return Err(Status::error("resources not found"));
        }
        // Without PreScore (e.g. a profile that disables it) the requests are computed here.
        Ok(match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => self.score_node(node, |i| s.pod_requests.get(i).copied().unwrap_or(0)),
            None => self.score_node(node, |i| self.resources.pod_request(pod, i)),
        })
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.resources.is_empty() {
            return Err(Status::error("resources not found"));
        }
        framework::score_nodes_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            out,
            |s: &PreScoreState, node| {
                self.score_node(node, |i| s.pod_requests.get(i).copied().unwrap_or(0))
            },
        )
    }

    /// Reads the rows when every scored resource is cpu, memory or ephemeral-storage.
    fn score_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.resources.is_empty() || !self.resources.native_only() {
            return self.score_nodes(state, pod, nodes, out);
        }
        framework::score_rows_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            rows,
            out,
            |s: &PreScoreState, _, row| {
                self.score_node(row, |i| s.pod_requests.get(i).copied().unwrap_or(0))
            },
        )
    }
}

impl Fit {
    fn score_node<N: NodeAmounts + ?Sized>(
        &self,
        node: &N,
        pod_request: impl Fn(usize) -> i64,
    ) -> i64 {
        match &self.strategy {
            Strategy::LeastAllocated => least_allocated::score(&self.resources, node, pod_request),
            Strategy::MostAllocated => most_allocated::score(&self.resources, node, pod_request),
            Strategy::RequestedToCapacityRatio(shape) => {
                requested_to_capacity_ratio::score(shape, &self.resources, node, pod_request)
            }
        }
    }
}

impl EnqueueExtensions for Fit {
    /// A pod this plugin rejected may fit once an assigned pod is deleted or scaled down, or
    /// once a node is added or its allocatable changes (upstream's registration with
    /// queueing hints and in-place pod resize enabled, their defaults).
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN,
                Arc::new(is_schedulable_after_pod_event),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE,
                Arc::new(is_schedulable_after_node_change),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
                Arc::new(is_schedulable_after_device_class_event),
            ),
        ]
    }
}

/// A DeviceClass added or updated helps when it now serves an extended resource the pod
/// requests (upstream isSchedulableAfterDeviceClassEvent).
pub(super) fn is_schedulable_after_device_class_event(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let pod_info = PodInfo::new(Arc::new(pod.clone()));
    extended::is_schedulable_after_device_class_event(&pod_info.requests.scalar_resources, old, new)
}

/// The extended resources in `requests` that a DeviceClass serves.
fn dra_backed_resources(requests: &Resource, storage: &StorageListers) -> BTreeSet<String> {
    if storage.device_classes.is_empty() {
        return BTreeSet::new();
    }
    requests
        .scalar_resources
        .iter()
        .filter(|(name, &quantity)| {
            quantity != 0
                && extended::is_dra_extended_resource_name(name)
                && extended::device_class_for(storage.device_classes.values(), name).is_some()
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// A deleted pod frees room only if it was on a node (or nominated to one). A pod update
/// helps if it is the pending pod itself, or an assigned pod that now requests less of a
/// resource the pending pod requests.
pub(super) fn is_schedulable_after_pod_event(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let original = as_pod(old)?;
    let modified = as_pod(new)?;
    let Some(modified) = modified else {
        let Some(deleted) = original else {
            return Err("pod event without an object".to_string());
        };
        let assigned = deleted
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let nominated = deleted
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        return Ok(if assigned || nominated {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        });
    };
    let Some(original) = original else {
        return Err("pod update without the old object".to_string());
    };
    Ok(if scale_down_may_help(pod, original, modified) {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

/// Upstream isSchedulableAfterPodScaleDown. Requests are compared as the kubelet sees them
/// during an in-place resize (the larger of desired and actual).
fn scale_down_may_help(target: &Pod, original: &Pod, modified: &Pod) -> bool {
    if modified.metadata.uid.as_deref().unwrap_or("")
        == target.metadata.uid.as_deref().unwrap_or("")
    {
        return true;
    }
    let modified_assigned = modified
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !modified_assigned {
        return false;
    }
    let before = requests_with_status(original);
    let after = requests_with_status(modified);
    let wanted = requests_with_status(target);
    (wanted.milli_cpu != 0 && before.milli_cpu > after.milli_cpu)
        || (wanted.memory != 0 && before.memory > after.memory)
        || (wanted.ephemeral_storage != 0 && before.ephemeral_storage > after.ephemeral_storage)
        || wanted
            .scalar_resources
            .iter()
            .filter(|(_, &v)| v != 0)
            .any(|(name, _)| before.get(name) > after.get(name))
}

/// A node event helps only if the pod fits the (new) node when empty, and, for an update,
/// the node's pod capacity or allocatable of a resource the pod requests grew.
pub(super) fn is_schedulable_after_node_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let original = as_node(old)?;
    let Some(modified) = as_node(new)? else {
        return Ok(QueueingHint::QueueSkip);
    };
    let pod_info = PodInfo::new(Arc::new(pod.clone()));
    let requests = &pod_info.requests;
    let modified = NodeInfo::new(modified.clone());
    // Ignored resources are not consulted here, as upstream's hint does not.
    let none = HashSet::new();
    if !fits_request(requests, &modified, &none, &none, &BTreeSet::new()).is_empty() {
        return Ok(QueueingHint::QueueSkip);
    }
    let Some(original) = original else {
        return Ok(QueueingHint::Queue);
    };
    let original = NodeInfo::new(original.clone());
    Ok(
        if any_requested_resource_increased(requests, &original.allocatable, &modified.allocatable)
        {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        },
    )
}

/// The strategy NodeResourcesFit scores with.
#[derive(Debug, Clone)]
enum Strategy {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio(FunctionShape),
}

/// The pod's requests, computed once per cycle.
#[derive(Debug, Clone)]
/// The pod's requests, and those of its extended resources a DeviceClass serves.
struct PreFilterState(Resource, BTreeSet<String>);

/// The pod's request of each scored resource, in configuration order.
#[derive(Debug, Clone)]
struct PreScoreState {
    pod_requests: Vec<i64>,
}

/// One resource the node lacks for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct InsufficientResource {
    pub(super) reason: Cow<'static, str>,
    /// The request exceeds the node's whole allocatable: evicting pods cannot help.
    pub(super) unresolvable: bool,
}

/// Upstream fitsRequest: every resource `node` lacks for `requests` (empty when the pod
/// fits; allocates only on a shortfall). Ignored extended resources are not checked, nor
/// those `backed_by_dra` the node does not advertise: DynamicResources allocates them from
/// devices (upstream's shouldDelegateResourceToDRA). A node that advertises one serves it
/// as a plain extended resource.
pub(super) fn fits_request<N: NodeAmounts + ?Sized>(
    requests: &Resource,
    node: &N,
    ignored_resources: &HashSet<String>,
    ignored_resource_groups: &HashSet<String>,
    backed_by_dra: &BTreeSet<String>,
) -> Vec<InsufficientResource> {
    let mut insufficient = Vec::new();
    let [alloc_cpu, alloc_memory, alloc_storage, allowed_pods] =
        node.allocatable_cpu_memory_storage_pods();
    let [used_cpu, used_memory, used_storage] = node.requested_cpu_memory_storage();

    if node.pod_count().saturating_add(1) > allowed_pods {
        insufficient.push(InsufficientResource {
            reason: Cow::Borrowed(REASON_TOO_MANY_PODS),
            unresolvable: false,
        });
    }
    if requests.milli_cpu == 0
        && requests.memory == 0
        && requests.ephemeral_storage == 0
        && requests.scalar_resources.is_empty()
    {
        return insufficient;
    }

    let native = [
        (
            requests.milli_cpu,
            alloc_cpu,
            used_cpu,
            REASON_INSUFFICIENT_CPU,
        ),
        (
            requests.memory,
            alloc_memory,
            used_memory,
            REASON_INSUFFICIENT_MEMORY,
        ),
        (
            requests.ephemeral_storage,
            alloc_storage,
            used_storage,
            REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
        ),
    ];
    for (requested, allocatable, used, reason) in native {
        if requested > 0 && requested > allocatable.wrapping_sub(used) {
            insufficient.push(InsufficientResource {
                reason: Cow::Borrowed(reason),
                unresolvable: requested > allocatable,
            });
        }
    }
    for (name, &requested) in &requests.scalar_resources {
        if requested == 0 {
            continue;
        }
        if is_extended_resource_name(name)
            && (ignored_resources.contains(name)
                || (!ignored_resource_groups.is_empty()
                    && name
                        .split('/')
                        .next()
                        .is_some_and(|group| ignored_resource_groups.contains(group))))
        {
            continue;
        }
        let (node_allocatable, node_used) = node.scalar(name);
        if node_allocatable <= 0 && backed_by_dra.contains(name) {
            continue;
        }
        if requested > node_allocatable.wrapping_sub(node_used) {
            insufficient.push(InsufficientResource {
                reason: Cow::Owned(format!("Insufficient {name}")),
                unresolvable: requested > node_allocatable,
            });
        }
    }
    insufficient
}

/// Upstream haveAnyRequestedResourcesIncreased: whether the node now takes more pods, or
/// has more of a resource the pod requests.
fn any_requested_resource_increased(
    requests: &Resource,
    original: &Resource,
    modified: &Resource,
) -> bool {
    if modified.allowed_pod_number > original.allowed_pod_number {
        return true;
    }
    (requests.milli_cpu > 0 && modified.milli_cpu > original.milli_cpu)
        || (requests.memory > 0 && modified.memory > original.memory)
        || (requests.ephemeral_storage > 0
            && modified.ephemeral_storage > original.ephemeral_storage)
        || requests
            .scalar_resources
            .iter()
            .filter(|(_, &v)| v != 0)
            .any(|(name, _)| modified.get(name) > original.get(name))
}

fn as_pod(obj: Option<&EventObject>) -> Result<Option<&Pod>, String> {
    match obj {
        None => Ok(None),
        Some(EventObject::Pod(p)) => Ok(Some(p)),
        Some(o) => Err(format!("expected a Pod, got a {}", o.kind())),
    }
}

fn as_node(obj: Option<&EventObject>) -> Result<Option<&Arc<Node>>, String> {
    match obj {
        None => Ok(None),
        Some(EventObject::Node(n)) => Ok(Some(n)),
        Some(o) => Err(format!("expected a Node, got a {}", o.kind())),
    }
}

/// The pod's requests where each running container (and sidecar) counts the larger of its
/// desired requests and what its status says it has (upstream PodRequests with
/// UseStatusResources). While a resize is infeasible, only the status counts.
fn requests_with_status(pod: &Pod) -> Resource {
    let mut pod = pod.clone();
    let status = pod.status.take().unwrap_or_default();
    let by_name: HashMap<&str, &ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .map(|cs| (cs.name.as_str(), cs))
        .collect();
    if !by_name.is_empty() {
        let infeasible = resize_infeasible(&status);
        if let Some(spec) = pod.spec.as_mut() {
            let sidecars = spec
                .init_containers
                .iter_mut()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            for container in spec.containers.iter_mut().chain(sidecars) {
                if let Some(cs) = by_name.get(container.name.as_str()) {
                    apply_status_requests(container, cs, infeasible);
                }
            }
        }
    }
    PodInfo::new(Arc::new(pod)).requests
}

/// Upstream IsPodResizeInfeasible: the first PodResizePending condition says Infeasible.
fn resize_infeasible(status: &PodStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// Replaces the container's requests with the per-resource maximum of its requests (unless
/// the resize is infeasible), its status requests and its allocated resources.
fn apply_status_requests(container: &mut Container, cs: &ContainerStatus, infeasible: bool) {
    let Some(actual) = cs.resources.as_ref() else {
        return;
    };
    let mut requests = if infeasible {
        BTreeMap::new()
    } else {
        container
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default()
    };
    for list in [actual.requests.as_ref(), cs.allocated_resources.as_ref()]
        .into_iter()
        .flatten()
    {
        for (name, q) in list {
            let larger = match requests.get(name) {
                None => true,
                Some(current) => quantity_value(name, q) > quantity_value(name, current),
            };
            if larger {
                requests.insert(name.clone(), q.clone());
            }
        }
    }
    container
        .resources
        .get_or_insert_with(Default::default)
        .requests = Some(requests);
}

/// A quantity as the scheduler counts it (cpu in millicores); unparsable counts as 0.
fn quantity_value(name: &str, q: &Quantity) -> i64 {
    let parsed = if name == RESOURCE_CPU {
        parse_milli_value(&q.0)
    } else {
        parse_value(&q.0)
    };
    parsed.unwrap_or(0)
}

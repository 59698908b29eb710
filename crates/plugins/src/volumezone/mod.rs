//! VolumeZone: a pod whose claims are bound to PersistentVolumes labelled with a zone or
//! region goes only to nodes in that zone or region.
//!
//! Upstream: pkg/scheduler/framework/plugins/volumezone. PreFilter resolves each claim of
//! the pod to its bound volume and keeps the volume's topology labels (GA and beta zone and
//! region; a value may list several zones separated by `__`). A claim not yet bound whose
//! class binds on first consumer is skipped: VolumeBinding places it. Filter passes a node
//! without any topology label (a single-zone cluster), otherwise every volume label must
//! have the node's value among its values; a beta volume label is also matched against the
//! node's GA label. Only volumes of claims are considered, never inline volumes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use framework::events::QueueingHintFn;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, QueueingHint, Snapshot, Status,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::helper::events::{new_object, old_object};
use crate::helper::storage::{claim_class, claim_names, WAIT_FOR_FIRST_CONSUMER};
use crate::names;
use crate::volumebinding::explain::ClaimReason;

pub const NAME: &str = names::VOLUME_ZONE;

/// CycleState key of the volume topologies PreFilter gathers.
const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeZone";

/// Why a node was rejected.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

/// Filter ran without the state PreFilter writes.
const ERR_NO_PRE_FILTER_STATE: &str = "reading \"PreFilterVolumeZone\" from cycleState: not found";

pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LABEL_FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

/// The volume and node labels compared, in the order upstream checks them.
const TOPOLOGY_LABELS: [&str; 4] = [
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_REGION,
];

/// Upstream: volumezone.VolumeZone.
#[derive(Debug, Default)]
pub struct VolumeZone;

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(VolumeZone))
}

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for VolumeZone {
    /// Which volumes the pod uses is all the plugin reads of it.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::VOLUMES_SIGNER,
            framework::sign::volumes_signer(&pod.pod),
        )])
    }
}

impl PreFilterPlugin for VolumeZone {
    /// Gathers the topology of the pod's bound volumes; skips the plugin when there is none
    /// (no claims, only unbound first-consumer claims, or volumes without topology labels).
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match pv_topologies_of_pod(&pod.pod, pod.namespace(), snapshot) {
            Err(status) => (None, status),
            Ok(found) if found.topologies.is_empty() => (None, Status::skip()),
            Ok(found) => {
                state.write(PRE_FILTER_STATE_KEY, found);
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_none_or(Vec::is_empty)
        {
            return Status::success();
        }
        let Some(data) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(ERR_NO_PRE_FILTER_STATE);
        };
        let empty = BTreeMap::new();
        let labels = node.node().metadata.labels.as_ref().unwrap_or(&empty);
        if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
            // A node without topology labels (a single-zone cluster) takes any volume.
            return Status::success();
        }
        for t in &data.topologies {
            let value = labels.get(t.key).or_else(|| labels.get(to_ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

impl EnqueueExtensions for VolumeZone {
    /// A node added or relabelled, a claim of the pod added or updated (bound, say), a
    /// volume added or its topology changed, and a class added that binds on first
    /// consumer. Class updates are left out: the binding mode cannot change.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let class_hint: QueueingHintFn = Arc::new(is_schedulable_after_storage_class_added);
        let claim_hint: QueueingHintFn = Arc::new(is_schedulable_after_claim_change);
        let volume_hint: QueueingHintFn = Arc::new(is_schedulable_after_volume_change);
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::StorageClass,
                ActionType::ADD,
                class_hint,
            ),
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
                claim_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolume,
                ActionType::ADD | ActionType::UPDATE,
                volume_hint,
            ),
        ]
    }
}

/// Queue only for a new class that binds on first consumer.
fn is_schedulable_after_storage_class_added(
    _pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let class = new_object::<StorageClass>(new)?;
    if class.volume_binding_mode.as_deref() == Some(WAIT_FOR_FIRST_CONSUMER) {
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
    let same_namespace = claim.metadata.namespace.as_deref().unwrap_or("")
        == pod.metadata.namespace.as_deref().unwrap_or("");
    let name = claim.metadata.name.as_deref().unwrap_or("");
    if same_namespace && claim_names(pod).any(|n| n == name) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue for a new volume, or a volume whose topology labels changed.
fn is_schedulable_after_volume_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = (
        old_object::<PersistentVolume>(old)?,
        new_object::<PersistentVolume>(new)?,
    );
    let Some(original) = original else {
        return Ok(QueueingHint::Queue);
    };
    if pv_topologies(original) != pv_topologies(modified) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Why Filter rejected `node`, per claim whose bound volume's zone or region leaves the
/// node out, from the volumes PreFilter wrote into `state` (what Filter read). Empty when
/// PreFilter wrote nothing or the node has no topology label. For explanations after the
/// cycle (`simulate`); the scheduling cycle never calls it.
pub fn explain_filter(state: &CycleState, node: &Node) -> Vec<ClaimReason> {
    let Some(data) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
        return Vec::new();
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
        return Vec::new();
    }
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    data.labelled
        .iter()
        .filter_map(|(claim, pv)| {
            let miss = pv_topologies(pv).into_iter().find_map(|t| {
                let value = labels.get(t.key).or_else(|| labels.get(to_ga_label(t.key)));
                let allowed = t.values.iter().cloned().collect::<Vec<_>>().join(" or ");
                match value {
                    Some(v) if t.values.contains(v) => None,
                    Some(v) => Some(format!("node {node_name} is in {v}")),
                    None => Some(format!("node {node_name} has no such label")),
                }
                .map(|node_side| (t.key, allowed, node_side))
            })?;
            let (key, allowed, node_side) = miss;
            Some(ClaimReason {
                claim: format!(
                    "{}/{}",
                    claim.metadata.namespace.as_deref().unwrap_or(""),
                    claim.metadata.name.as_deref().unwrap_or("")
                ),
                reason: format!(
                    "bound volume {} is in {key} {allowed}, {node_side}",
                    pv.metadata.name.as_deref().unwrap_or("")
                ),
            })
        })
        .collect()
}

/// What PreFilter hands to Filter.
#[derive(Debug, Clone, Default)]
struct PreFilterState {
    topologies: Vec<PvTopology>,
    /// The claims whose volumes have topology labels, with those volumes (shared with the
    /// listers), for [`explain_filter`].
    labelled: Vec<(Arc<PersistentVolumeClaim>, Arc<PersistentVolume>)>,
}

/// One topology label of a bound volume: the label and the values it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PvTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

/// The topology of every volume bound to a claim of the pod, or the status that makes the
/// pod unschedulable (a claim, class or volume that is missing or incomplete).
fn pv_topologies_of_pod(
    pod: &Pod,
    namespace: &str,
    snapshot: &Snapshot,
) -> Result<PreFilterState, Status> {
    let storage = snapshot.storage();
    let mut out = PreFilterState::default();
    for claim_name in claim_names(pod) {
        if claim_name.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let claim = storage
            .persistent_volume_claim(namespace, claim_name)
            .ok_or_else(|| {
                Status::unresolvable(format!("persistentvolumeclaim \"{claim_name}\" not found"))
            })?;
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or("");
        if volume_name.is_empty() {
            let class_name = claim_class(claim);
            if class_name.is_empty() {
                return Err(Status::unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let class = storage.storage_class(class_name).ok_or_else(|| {
                Status::unresolvable(format!(
                    "storageclass.storage.k8s.io \"{class_name}\" not found"
                ))
            })?;
            match class.volume_binding_mode.as_deref() {
                None => {
                    return Err(Status::unresolvable(format!(
                        "VolumeBindingMode not set for StorageClass \"{class_name}\""
                    )))
                }
                // Not bound yet: VolumeBinding picks a volume for the chosen node.
                Some(WAIT_FOR_FIRST_CONSUMER) => continue,
                Some(_) => return Err(Status::unresolvable("PersistentVolume had no name")),
            }
        }
        let volume = storage.persistent_volume(volume_name).ok_or_else(|| {
            Status::unresolvable(format!("persistentvolume \"{volume_name}\" not found"))
        })?;
        let topologies = pv_topologies(volume);
        if !topologies.is_empty() {
            out.topologies.extend(topologies);
            out.labelled.push((claim.clone(), volume.clone()));
        }
    }
    Ok(out)
}

/// The volume's topology labels with their values. A value with an empty element
/// (`a____b`, or empty) cannot be parsed and is ignored, as upstream does.
fn pv_topologies(pv: &PersistentVolume) -> Vec<PvTopology> {
    let Some(labels) = pv.metadata.labels.as_ref() else {
        return Vec::new();
    };
    TOPOLOGY_LABELS
        .iter()
        .filter_map(|key| {
            let value = labels.get(*key)?;
            let values = label_zones_to_set(value)?;
            Some(PvTopology { key, values })
        })
        .collect()
}

/// Splits a zone label value on `__`, trimming each zone; `None` when one is empty.
fn label_zones_to_set(value: &str) -> Option<BTreeSet<String>> {
    value
        .split("__")
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_string())
        })
        .collect()
}

/// The GA label a beta topology label stands for (other labels map to themselves).
fn to_ga_label(key: &str) -> &str {
    match key {
        LABEL_FAILURE_DOMAIN_BETA_ZONE => LABEL_TOPOLOGY_ZONE,
        LABEL_FAILURE_DOMAIN_BETA_REGION => LABEL_TOPOLOGY_REGION,
        other => other,
    }
}

#[cfg(test)]
mod tests;

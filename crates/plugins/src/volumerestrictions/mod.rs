//! VolumeRestrictions: a volume that only one pod may use is not given to a second one.
//!
//! Upstream: pkg/scheduler/framework/plugins/volumerestrictions. Two rules:
//! - ReadWriteOncePod: a claim with that access mode may be used by one pod in the whole
//!   cluster. PreFilter looks up every claim of the pod (a missing one makes the pod
//!   UnschedulableAndUnresolvable with the lister's not-found message) and counts the pod's
//!   ReadWriteOncePod claims that a pod on some node (assumed pods included) already uses;
//!   Filter rejects every node while that count is above zero, as Unschedulable, so that
//!   preemption may evict the user. The AddPod/RemovePod extensions keep the count right
//!   when preemption removes a victim or a nominated pod is counted in; like upstream they
//!   compare claim names only, not namespaces.
//! - In-tree disks: on one node, the same GCE persistent disk (unless every mount is
//!   read-only), the same AWS EBS volume ID, the same Ceph RBD image (a shared monitor, same
//!   pool and image, unless both read-only) or the same iSCSI IQN (unless both read-only)
//!   may not be mounted by two pods.
//!
//! A pod with neither kind of volume skips the plugin at PreFilter; a pod with no volumes
//! at all does so before any lookup.

use std::collections::BTreeSet;
use std::sync::Arc;

use framework::types::pvc_key;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, PreFilterExtensions,
    PreFilterPlugin, PreFilterResult, QueueingHint, Snapshot, Status,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};

use crate::helper::events::new_object;
use crate::helper::storage::{claim_names, pod_volumes};
use crate::names;

pub const NAME: &str = names::VOLUME_RESTRICTIONS;

/// CycleState key of the claims PreFilter counts.
const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeRestrictions";

/// Why a node was rejected for an in-tree disk another pod there mounts.
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";

/// Why every node was rejected for a ReadWriteOncePod claim another pod uses.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// Filter or an extension ran without the state PreFilter writes.
const ERR_NO_PRE_FILTER_STATE: &str = "cannot read \"PreFilterVolumeRestrictions\" from cycleState";

const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";

/// Upstream: volumerestrictions.VolumeRestrictions.
#[derive(Debug, Default)]
pub struct VolumeRestrictions;

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(VolumeRestrictions))
}

impl Plugin for VolumeRestrictions {
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

impl SignPlugin for VolumeRestrictions {
    /// Which volumes the pod uses is all the plugin reads of it.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::VOLUMES_SIGNER,
            framework::sign::volumes_signer(&pod.pod),
        )])
    }
}

impl PreFilterPlugin for VolumeRestrictions {
    /// Finds the pod's ReadWriteOncePod claims and how many of them are already in use;
    /// skips the plugin when none is and the pod has no in-tree disk to check.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let volumes = pod_volumes(&pod.pod);
        if volumes.is_empty() {
            return (None, Status::skip());
        }
        let needs_check = volumes.iter().any(needs_restrictions_check);
        let storage = snapshot.storage();
        let mut rwop_claims = BTreeSet::new();
        for claim in volumes
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
        {
            let name = claim.claim_name.as_str();
            let Some(found) = storage.persistent_volume_claim(pod.namespace(), name) else {
                return (
                    None,
                    Status::unresolvable(format!("persistentvolumeclaim \"{name}\" not found")),
                );
            };
            let rwop = found
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|modes| modes.iter().any(|m| m == READ_WRITE_ONCE_POD));
            if rwop {
                rwop_claims.insert(name.to_string());
            }
        }
        // At most one pod can use a ReadWriteOncePod claim, so a used claim counts once.
        let conflicting_pvc_ref_count = rwop_claims
            .iter()
            .filter(|c| snapshot.is_pvc_used_by_pods(&pvc_key(pod.namespace(), c)))
            .count() as i64;
        if !needs_check && conflicting_pvc_ref_count == 0 {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                read_write_once_pod_pvcs: Arc::new(rwop_claims),
                conflicting_pvc_ref_count,
            },
        );
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for VolumeRestrictions {
    /// `pod_to_add` (a nominated pod) takes the pod's ReadWriteOncePod claims it uses.
    fn add_pod(
        &self,
        state: &mut CycleState,
        _pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_add, 1);
                Status::success()
            }
            None => Status::error(ERR_NO_PRE_FILTER_STATE),
        }
    }

    /// `pod_to_remove` (a preemption victim) frees the claims it uses.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_remove, -1);
                Status::success()
            }
            None => Status::error(ERR_NO_PRE_FILTER_STATE),
        }
    }
}

impl FilterPlugin for VolumeRestrictions {
    /// An in-tree disk another pod on the node mounts rejects the node first; then a
    /// ReadWriteOncePod claim in use anywhere rejects it.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !satisfy_volume_conflicts(&pod.pod, node.pods.iter().map(|p| &*p.pod)) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(ERR_NO_PRE_FILTER_STATE);
        };
        if s.conflicting_pvc_ref_count > 0 {
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

impl EnqueueExtensions for VolumeRestrictions {
    /// A deleted assigned pod may free a disk or a claim (pod volumes are immutable, so pod
    /// updates never help), a new node has no disks mounted, and a claim the pod names may
    /// appear. Upstream registers node updates too only when queueing hints are off, which
    /// kubesched never runs without.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::AssignedPod,
                ActionType::DELETE,
                Arc::new(is_schedulable_after_assigned_pod_deleted),
            ),
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD,
                Arc::new(is_schedulable_after_persistent_volume_claim_added),
            ),
        ]
    }
}

/// Queue when the deleted pod, in the pod's namespace, mounted a disk that conflicts with
/// one of the pod's or used one of its claims. The claim's access mode is not looked up,
/// as upstream does not, to keep the hint cheap.
fn is_schedulable_after_assigned_pod_deleted(
    pod: &Pod,
    old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let deleted = match old {
        Some(EventObject::Pod(p)) => p,
        Some(o) => return Err(format!("expected the deleted Pod, but got {}", o.kind())),
        None => return Err("expected the deleted Pod, but got nothing".to_string()),
    };
    if namespace(deleted) != namespace(pod) {
        return Ok(QueueingHint::QueueSkip);
    }
    if !satisfy_volume_conflicts(pod, std::iter::once(&**deleted)) {
        return Ok(QueueingHint::Queue);
    }
    let claims: BTreeSet<&str> = claim_names(pod).collect();
    if claim_names(deleted).any(|c| claims.contains(c)) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue when the claim added is one the pod names (PreFilter needs it to exist).
fn is_schedulable_after_persistent_volume_claim_added(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let claim = new_object::<PersistentVolumeClaim>(new)?;
    let same_namespace = claim.metadata.namespace.as_deref().unwrap_or("") == namespace(pod);
    let name = claim.metadata.name.as_deref().unwrap_or("");
    if same_namespace && claim_names(pod).any(|c| c == name) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// What PreFilter hands to Filter and the extensions update.
#[derive(Debug, Clone)]
struct PreFilterState {
    /// Names of the pod's claims with the ReadWriteOncePod access mode; shared, since
    /// preemption copies the state for every node it tries and never changes the set.
    read_write_once_pod_pvcs: Arc<BTreeSet<String>>,
    /// How many uses of those claims by other pods there are.
    conflicting_pvc_ref_count: i64,
}

impl PreFilterState {
    /// Counts (`sign` 1) or uncounts (`sign` -1) `pod`'s uses of the claims.
    fn update_with_pod(&mut self, pod: &PodInfo, sign: i64) {
        let uses = claim_names(&pod.pod)
            .filter(|c| self.read_write_once_pod_pvcs.contains(*c))
            .count() as i64;
        self.conflicting_pvc_ref_count += sign * uses;
    }
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("")
}

/// Whether `v` is an in-tree disk the conflict rules cover.
fn needs_restrictions_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

/// Whether no in-tree disk of `pod` conflicts with one mounted by any of `existing`.
fn satisfy_volume_conflicts<'a>(
    pod: &Pod,
    existing: impl Iterator<Item = &'a Pod> + Clone,
) -> bool {
    pod_volumes(pod)
        .iter()
        .filter(|v| needs_restrictions_check(v))
        .all(|v| !existing.clone().any(|e| is_volume_conflict(v, e)))
}

/// Whether `volume` is the same disk as one of `pod`'s volumes, mounted in a way the two
/// cannot share.
fn is_volume_conflict(volume: &Volume, pod: &Pod) -> bool {
    pod_volumes(pod).iter().any(|existing| {
        if let (Some(a), Some(b)) = (&volume.gce_persistent_disk, &existing.gce_persistent_disk) {
            if a.pd_name == b.pd_name && !(read_only(a.read_only) && read_only(b.read_only)) {
                return true;
            }
        }
        if let (Some(a), Some(b)) = (
            &volume.aws_elastic_block_store,
            &existing.aws_elastic_block_store,
        ) {
            if a.volume_id == b.volume_id {
                return true;
            }
        }
        if let (Some(a), Some(b)) = (&volume.iscsi, &existing.iscsi) {
            if a.iqn == b.iqn && !(read_only(a.read_only) && read_only(b.read_only)) {
                return true;
            }
        }
        if let (Some(a), Some(b)) = (&volume.rbd, &existing.rbd) {
            if have_overlap(&a.monitors, &b.monitors)
                && rbd_pool(&a.pool) == rbd_pool(&b.pool)
                && a.image == b.image
                && !(read_only(a.read_only) && read_only(b.read_only))
            {
                return true;
            }
        }
        false
    })
}

/// The RADOS pool of an RBD volume; unset is the API server's default, `rbd`.
fn rbd_pool(pool: &Option<String>) -> &str {
    pool.as_deref().unwrap_or("rbd")
}

fn read_only(flag: Option<bool>) -> bool {
    flag.unwrap_or(false)
}

/// Whether the two lists share an element.
fn have_overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| b.contains(x))
}

#[cfg(test)]
mod tests;

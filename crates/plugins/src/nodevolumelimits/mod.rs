//! NodeVolumeLimits: a node takes no more volumes of a CSI driver than the driver's attach
//! limit on that node.
//!
//! Upstream: pkg/scheduler/framework/plugins/nodevolumelimits (CSILimits). The limit of a
//! driver on a node is `spec.drivers[].allocatable.count` of the node's CSINode; a driver
//! without a count, or a node without a CSINode, has no limit. Volumes are counted once per
//! driver and volume handle, however many pods use them: the pod's claims (bound to a CSI
//! volume, or to an in-tree volume translated to its CSI driver; unbound ones by their
//! class's provisioner, each claim a volume of its own), its generic ephemeral volumes (the
//! claim `<pod>-<volume>`, which the pod must own) and its migratable in-tree inline volumes.
//! A node's count is what its pods use plus the VolumeAttachments naming the node that no pod
//! of the node accounts for (volumes still detaching). A pod fails when, for a driver, the
//! node's count plus the pod's volumes not already on the node exceeds the limit.
//!
//! PreFilter skips pods without claims, ephemeral volumes or migratable inline volumes, so
//! pods without volumes cost nothing here.
//!
//! Where this differs from upstream, on purpose: an unbound claim is told apart from bound
//! volumes by its key's kind instead of a random volume-handle prefix, so runs are
//! reproducible; the VolumeAttachment hint reads the claims as of the plugin's last
//! PreFilter, since hints see only the event's objects; and the CSINode-update hint also
//! queues when a limit is lifted (a driver's count, or the driver, gone), which can only
//! make room. A missing claim is reported as a real cluster's claim lister words it
//! (`persistentvolumeclaim "x" not found`; upstream's table, with a fake lister, has the
//! plural).

mod translation;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use framework::events::QueueingHintFn;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, QueueingHint, Snapshot, Status, StorageListers,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};

use crate::helper::events::new_object;
use crate::helper::storage::{claim_class, pod_volumes};
use crate::names;
use translation::{csi_name_from_in_tree_name, is_csi_migration_on};

pub const NAME: &str = names::NODE_VOLUME_LIMITS;

/// CycleState key of what PreFilter hands to Filter.
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeVolumeLimits";

/// Why a node was rejected.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Filter ran without the state PreFilter writes.
const ERR_NO_PRE_FILTER_STATE: &str =
    "reading \"PreFilterNodeVolumeLimits\" from cycleState: not found";

/// Upstream: nodevolumelimits.CSILimits.
#[derive(Debug, Default)]
pub struct CSILimits {
    /// The storage listers of the last PreFilter and their VolumeAttachments by node.
    latest: Arc<Mutex<Option<Latest>>>,
}

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(CSILimits::default()))
}

impl Plugin for CSILimits {
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

impl SignPlugin for CSILimits {
    /// Which volumes the pod uses is all the plugin reads of it.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::VOLUMES_SIGNER,
            framework::sign::volumes_signer(&pod.pod),
        )])
    }
}

impl PreFilterPlugin for CSILimits {
    /// Skips pods without a volume that could count against a limit; otherwise hands the
    /// storage listers and the VolumeAttachments by node to Filter.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if !pod_volumes(&pod.pod).iter().any(may_count) {
            return (None, Status::skip());
        }
        let latest = self.refresh(snapshot.storage_shared());
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                storage: latest.storage,
                attachments: latest.attachments,
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for CSILimits {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if pod_volumes(&pod.pod).is_empty() {
            return Status::success();
        }
        let Some(data) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(ERR_NO_PRE_FILTER_STATE);
        };
        let storage = data.storage.as_ref();
        let csi_node = storage.csi_node(node.name()).map(Arc::as_ref);

        let mut new_volumes = HashSet::new();
        if let Err(e) = filter_attachable_volumes(
            storage,
            &pod.pod,
            pod.namespace(),
            csi_node,
            true,
            &mut new_volumes,
        ) {
            return e.into_status();
        }
        if new_volumes.is_empty() {
            return Status::success();
        }
        let limits = volume_limits(csi_node);
        if limits.is_empty() {
            return Status::success();
        }

        let mut attached = HashSet::new();
        for existing in node.pods.iter() {
            if let Err(e) = filter_attachable_volumes(
                storage,
                &existing.pod,
                existing.namespace(),
                csi_node,
                false,
                &mut attached,
            ) {
                return e.into_status();
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for v in &attached {
            // A volume the node already uses costs the pod nothing.
            new_volumes.remove(v);
            *attached_count.entry(v.driver.as_str()).or_default() += 1;
        }
        // Attachments no pod of the node accounts for: volumes still being detached.
        for v in data.attachments.get(node.name()).into_iter().flatten() {
            if !attached.contains(v) {
                *attached_count.entry(v.driver.as_str()).or_default() += 1;
            }
        }
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        for v in &new_volumes {
            *new_count.entry(v.driver.as_str()).or_default() += 1;
        }
        for (driver, count) in new_count {
            if let Some(limit) = limits.get(driver) {
                let current = attached_count.get(driver).copied().unwrap_or(0);
                if current + count > *limit {
                    return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
                }
            }
        }
        Status::success()
    }
}

impl EnqueueExtensions for CSILimits {
    /// A CSINode added, or updated with a larger limit; a pod using volumes deleted from its
    /// node; a claim of the pod created; a VolumeAttachment of one of the pod's volumes
    /// deleted.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let csi_node_hint: QueueingHintFn = Arc::new(is_schedulable_after_csi_node_updated);
        let pod_hint: QueueingHintFn = Arc::new(is_schedulable_after_pod_deleted);
        let claim_hint: QueueingHintFn = Arc::new(is_schedulable_after_pvc_added);
        let latest = self.latest.clone();
        let attachment_hint: QueueingHintFn = Arc::new(move |pod, old, new| {
            let storage = lock(&latest).as_ref().map(|l| l.storage.clone());
            is_schedulable_after_volume_attachment_deleted(storage.as_deref(), pod, old, new)
        });
        vec![
            // Any new CSINode may bring room for the pod.
            ClusterEventWithHint::new(EventResource::CSINode, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::CSINode,
                ActionType::UPDATE,
                csi_node_hint,
            ),
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::DELETE, pod_hint),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD,
                claim_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::VolumeAttachment,
                ActionType::DELETE,
                attachment_hint,
            ),
        ]
    }
}

/// Queue when some driver's limit grew, or is gone (no limit), in the updated CSINode.
fn is_schedulable_after_csi_node_updated(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    // Registered for updates only, so both objects are there.
    let (original, modified) = (new_object::<CSINode>(old)?, new_object::<CSINode>(new)?);
    let before = volume_limits(Some(original));
    let after = volume_limits(Some(modified));
    let grew = before
        .iter()
        .any(|(driver, old_limit)| after.get(driver).is_none_or(|n| n > old_limit));
    Ok(if grew {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

/// Queue when the deleted pod was on a node and used a volume that may count.
fn is_schedulable_after_pod_deleted(
    _pod: &Pod,
    old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let deleted = new_object::<Pod>(old)?;
    let on_node = deleted
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if on_node && pod_volumes(deleted).iter().any(may_count) {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

/// Queue when the claim created is one the pod uses (directly or as an ephemeral volume).
fn is_schedulable_after_pvc_added(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let claim = new_object::<PersistentVolumeClaim>(new)?;
    if claim.metadata.namespace.as_deref().unwrap_or("") != pod_namespace(pod) {
        return Ok(QueueingHint::QueueSkip);
    }
    let name = claim.metadata.name.as_deref().unwrap_or("");
    let uses = pod_volumes(pod)
        .iter()
        .filter_map(|v| claim_name_of(pod, v).map(|(n, _)| n))
        .any(|n| n == name);
    Ok(if uses {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

/// Queue when the deleted attachment is of a volume one of the pod's claims is bound to, or
/// of the driver of one of its migratable inline volumes.
fn is_schedulable_after_volume_attachment_deleted(
    storage: Option<&StorageListers>,
    pod: &Pod,
    old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let attachment = new_object::<VolumeAttachment>(old)?;
    let attached_pv = attachment.spec.source.persistent_volume_name.as_deref();
    for vol in pod_volumes(pod) {
        if let Some(c) = &vol.persistent_volume_claim {
            let Some(storage) = storage else {
                return Err("no claims seen yet to match the VolumeAttachment".to_string());
            };
            let bound = storage
                .persistent_volume_claim(pod_namespace(pod), &c.claim_name)
                .and_then(|claim| claim.spec.as_ref())
                .and_then(|s| s.volume_name.as_deref());
            if bound.is_some() && bound == attached_pv {
                return Ok(QueueingHint::Queue);
            }
        }
        if let Some(source) = translation::inline_source(vol) {
            if source.driver_name() == attachment.spec.attacher {
                return Ok(QueueingHint::Queue);
            }
        }
    }
    Ok(QueueingHint::QueueSkip)
}

/// What PreFilter hands to Filter.
#[derive(Debug, Clone)]
struct PreFilterState {
    storage: Arc<StorageListers>,
    attachments: Arc<AttachmentsByNode>,
}

/// The storage listers a PreFilter saw, with the attachments derived from them.
#[derive(Debug, Clone)]
struct Latest {
    storage: Arc<StorageListers>,
    attachments: Arc<AttachmentsByNode>,
}

/// The volumes VolumeAttachments attach, by node name.
type AttachmentsByNode = HashMap<String, Vec<VolumeKey>>;

/// One volume as a limit counts it: its driver and what tells it apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct VolumeKey {
    driver: String,
    id: VolumeId,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum VolumeId {
    /// A provisioned volume, by its CSI volume handle.
    Handle(String),
    /// A claim not bound yet (`namespace/name`): each will become a volume of its own.
    UnboundClaim(String),
}

/// Why a pod's volumes could not be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AttachableError {
    /// The pod's claim does not exist (yet): only its creation can help.
    ClaimNotFound(String),
    /// Anything else: reported as an error on the pod.
    Invalid(String),
}

impl AttachableError {
    fn into_status(self) -> Status {
        match self {
            AttachableError::ClaimNotFound(m) => Status::unresolvable(m),
            AttachableError::Invalid(m) => Status::error(m),
        }
    }
}

impl CSILimits {
    /// The listers of `storage`, with their attachments by node: derived again only when
    /// the listers changed since the last PreFilter.
    fn refresh(&self, storage: &Arc<StorageListers>) -> Latest {
        let mut latest = lock(&self.latest);
        if let Some(l) = latest.as_ref().filter(|l| Arc::ptr_eq(&l.storage, storage)) {
            return l.clone();
        }
        let l = Latest {
            storage: storage.clone(),
            attachments: Arc::new(attachments_by_node(storage)),
        };
        *latest = Some(l.clone());
        l
    }
}

/// The plugin's last listers; a poisoned lock still holds a usable value (it is only ever
/// replaced whole).
fn lock(m: &Mutex<Option<Latest>>) -> std::sync::MutexGuard<'_, Option<Latest>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pod's volumes.
fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// Whether the volume may count against a limit: a claim, a generic ephemeral volume or a
/// migratable in-tree inline volume.
fn may_count(vol: &Volume) -> bool {
    vol.persistent_volume_claim.is_some()
        || vol.ephemeral.is_some()
        || translation::inline_source(vol).is_some()
}

/// The claim a volume uses and whether it is a generic ephemeral one (named
/// `<pod>-<volume>`).
fn claim_name_of(pod: &Pod, vol: &Volume) -> Option<(String, bool)> {
    if let Some(c) = &vol.persistent_volume_claim {
        return Some((c.claim_name.clone(), false));
    }
    vol.ephemeral.as_ref().map(|_| {
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        (format!("{pod_name}-{}", vol.name), true)
    })
}

/// Adds the volumes of `pod` that count against a limit to `result` (upstream
/// filterAttachableVolumes). A missing claim fails a `new_pod` and is skipped for a pod
/// already on the node.
fn filter_attachable_volumes(
    storage: &StorageListers,
    pod: &Pod,
    namespace: &str,
    csi_node: Option<&CSINode>,
    new_pod: bool,
    result: &mut HashSet<VolumeKey>,
) -> Result<(), AttachableError> {
    for vol in pod_volumes(pod) {
        let Some((claim_name, ephemeral)) = claim_name_of(pod, vol) else {
            attachable_inline_volume(vol, csi_node, result)?;
            continue;
        };
        if claim_name.is_empty() {
            return Err(AttachableError::Invalid(
                "PersistentVolumeClaim had no name".to_string(),
            ));
        }
        let Some(claim) = storage.persistent_volume_claim(namespace, &claim_name) else {
            if new_pod {
                return Err(AttachableError::ClaimNotFound(format!(
                    "looking up PVC {namespace}/{claim_name}: persistentvolumeclaim \"{claim_name}\" not found"
                )));
            }
            // A claim that is gone may not belong to the pod any more: not counted.
            continue;
        };
        if ephemeral {
            volume_is_for_pod(pod, namespace, claim)?;
        }
        if let Some(key) = csi_driver_info(storage, csi_node, claim) {
            result.insert(key);
        }
    }
    Ok(())
}

/// Adds a migratable inline volume whose plugin's migration is on for the node.
fn attachable_inline_volume(
    vol: &Volume,
    csi_node: Option<&CSINode>,
    result: &mut HashSet<VolumeKey>,
) -> Result<(), AttachableError> {
    let Some(source) = translation::inline_source(vol) else {
        return Ok(());
    };
    if !is_csi_migration_on(csi_node, source.plugin_name()) {
        return Ok(());
    }
    let handle = translation::inline_volume_handle(source).map_err(|e| {
        AttachableError::Invalid(format!(
            "converting volume({}) from inline to csi: {e}",
            vol.name
        ))
    })?;
    if let Some(handle) = handle {
        result.insert(VolumeKey {
            driver: source.driver_name().to_string(),
            id: VolumeId::Handle(handle),
        });
    }
    Ok(())
}

/// An ephemeral volume's claim must be controlled by the pod (upstream VolumeIsForPod).
fn volume_is_for_pod(
    pod: &Pod,
    namespace: &str,
    claim: &PersistentVolumeClaim,
) -> Result<(), AttachableError> {
    let claim_ns = claim.metadata.namespace.as_deref().unwrap_or("");
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or("");
    let controlled = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| r.uid == pod_uid);
    if claim_ns == namespace && controlled {
        return Ok(());
    }
    Err(AttachableError::Invalid(format!(
        "PVC {claim_ns}/{} was not created for pod {namespace}/{} (pod is not owner)",
        claim.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )))
}

/// The driver and handle of the volume a claim is bound to (an in-tree volume as its CSI
/// driver when its migration is on for the node); a claim not bound, or bound to a volume
/// that does not exist, counts by its class (upstream getCSIDriverInfo).
fn csi_driver_info(
    storage: &StorageListers,
    csi_node: Option<&CSINode>,
    claim: &PersistentVolumeClaim,
) -> Option<VolumeKey> {
    let pv_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("");
    let pv = (!pv_name.is_empty())
        .then(|| storage.persistent_volume(pv_name))
        .flatten();
    let Some(pv) = pv else {
        return csi_driver_info_from_class(storage, csi_node, claim);
    };
    let spec = pv.spec.as_ref()?;
    if let Some(csi) = &spec.csi {
        return volume_key(&csi.driver, VolumeId::Handle(csi.volume_handle.clone()));
    }
    let source = translation::pv_source(spec)?;
    if !is_csi_migration_on(csi_node, source.plugin_name()) {
        return None;
    }
    // A volume the translator cannot translate is not counted.
    let handle = translation::pv_volume_handle(pv, source).ok().flatten()?;
    volume_key(source.driver_name(), VolumeId::Handle(handle))
}

/// An unbound claim's driver: its class's provisioner, an in-tree one as its CSI driver when
/// migration is on for the node. No class, or a class that does not exist, counts nothing:
/// such a claim binds immediately, before scheduling (upstream getCSIDriverInfoFromSC).
fn csi_driver_info_from_class(
    storage: &StorageListers,
    csi_node: Option<&CSINode>,
    claim: &PersistentVolumeClaim,
) -> Option<VolumeKey> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return None;
    }
    let class = storage.storage_class(class_name)?;
    let provisioner = class.provisioner.as_str();
    let driver = if translation::is_migratable_in_tree_plugin(provisioner) {
        if !is_csi_migration_on(csi_node, provisioner) {
            return None;
        }
        csi_name_from_in_tree_name(provisioner)?
    } else {
        provisioner
    };
    let id = format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    );
    volume_key(driver, VolumeId::UnboundClaim(id))
}

/// A key, or none when the driver or the handle is empty (such a volume is not counted).
fn volume_key(driver: &str, id: VolumeId) -> Option<VolumeKey> {
    let empty = match &id {
        VolumeId::Handle(h) | VolumeId::UnboundClaim(h) => h.is_empty(),
    };
    (!driver.is_empty() && !empty).then(|| VolumeKey {
        driver: driver.to_string(),
        id,
    })
}

/// Limits by driver name from the CSINode's `allocatable.count`s (upstream getVolumeLimits).
fn volume_limits(csi_node: Option<&CSINode>) -> HashMap<&str, i64> {
    csi_node
        .into_iter()
        .flat_map(|n| n.spec.drivers.iter())
        .filter_map(|d| {
            let count = d.allocatable.as_ref()?.count?;
            Some((d.name.as_str(), i64::from(count)))
        })
        .collect()
}

/// Every VolumeAttachment of a CSI PersistentVolume, by node: the attacher as the driver
/// and the volume's handle (upstream getNodeVolumeAttachmentInfo). Attachments without an
/// attacher or a volume name, of volumes that do not exist or are not CSI, are left out.
fn attachments_by_node(storage: &StorageListers) -> AttachmentsByNode {
    let mut out: AttachmentsByNode = HashMap::new();
    for va in storage.all_volume_attachments() {
        let spec = &va.spec;
        if spec.attacher.is_empty() {
            continue;
        }
        let Some(pv_name) = spec.source.persistent_volume_name.as_deref() else {
            continue;
        };
        let Some(csi) = storage
            .persistent_volume(pv_name)
            .and_then(|pv| pv.spec.as_ref())
            .and_then(|s| s.csi.as_ref())
        else {
            continue;
        };
        out.entry(spec.node_name.clone())
            .or_default()
            .push(VolumeKey {
                driver: spec.attacher.clone(),
                id: VolumeId::Handle(csi.volume_handle.clone()),
            });
    }
    out
}

#[cfg(test)]
mod tests;

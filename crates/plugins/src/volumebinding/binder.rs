//! What VolumeBinding decides for one pod and one node, and how its decisions are written
//! and waited on.
//!
//! Upstream: pkg/scheduler/framework/plugins/volumebinding/binder.go and the volume helpers
//! of k8s.io/component-helpers/storage/volume (FindMatchingVolume, CheckNodeAffinity,
//! GetBindVolumeToClaim). Everything here is a function of the objects passed in: the
//! plugin gathers them (informer objects under the assume cache) once per cycle in
//! PreFilter, so that Filter, run concurrently over nodes, reads no shared state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use framework::labels::{LabelSelector, NodeSelector};
use framework::quantity::parse_value;
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};

use super::assume_cache::resource_version;
use crate::helper::storage::{claim_class, BETA_STORAGE_CLASS_ANNOTATION, WAIT_FOR_FIRST_CONSUMER};

/// A node where a claim of the pod cannot get a volume: no PV matches and none can be
/// provisioned there.
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// A node outside the node affinity of a volume a claim of the pod is bound to.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// A node without enough CSI storage capacity for a volume to provision.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// A claim of the pod is bound to a volume that does not exist.
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// Set on a claim by the scheduler: provision its volume for this node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set on a claim by the PV controller once its binding is complete.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a volume the scheduler (or the PV controller) bound, not its creator.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The provisioner of classes whose volumes are only ever created by hand.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";

pub(super) const VOLUME_AVAILABLE: &str = "Available";
pub(super) const FILESYSTEM: &str = "Filesystem";
pub(super) const STORAGE: &str = "storage";

/// A claim to bind to an existing volume.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingInfo {
    pub pvc: Arc<PersistentVolumeClaim>,
    pub pv: Arc<PersistentVolume>,
}

/// A claim whose volume is to be provisioned on the node, with the capacity (bytes of the
/// CSIStorageCapacity) it would be drawn from, when the driver tracks capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicProvision {
    pub pvc: Arc<PersistentVolumeClaim>,
    pub capacity: Option<i64>,
}

/// The decision for one node: which claims bind to which volumes, which are provisioned.
#[derive(Debug, Clone, PartialEq)]
pub struct PodVolumes {
    pub static_bindings: Vec<BindingInfo>,
    pub dynamic_provisions: Vec<DynamicProvision>,
    /// The node, as Filter saw it: PreBind checks the bound volumes' affinity against it.
    pub node: Arc<Node>,
}

/// CSI drivers and capacities, for the storage capacity check of provisioning.
#[derive(Debug, Clone, Default)]
pub struct CapacityInfo {
    /// Drivers by name.
    pub drivers: HashMap<String, Arc<CSIDriver>>,
    pub capacities: Vec<Arc<CSIStorageCapacity>>,
}

/// A pod's claims as PreFilter found them, with everything Filter needs to place them.
#[derive(Debug, Clone, Default)]
pub struct PodVolumeClaims {
    /// Fully bound claims, with their volume (`None`: the volume does not exist).
    pub bound: Vec<(Arc<PersistentVolumeClaim>, Option<Arc<PersistentVolume>>)>,
    /// Unbound claims of WaitForFirstConsumer classes, which the scheduler binds.
    pub unbound_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// The volumes of each class those claims ask for.
    pub volumes_by_class: HashMap<String, Vec<Arc<PersistentVolume>>>,
    /// Those classes (`None`: the class does not exist).
    pub classes: HashMap<String, Option<Arc<StorageClass>>>,
    pub capacity: CapacityInfo,
}

/// The class of a volume: the beta annotation if present, else `storageClassName`.
pub fn volume_class(pv: &PersistentVolume) -> &str {
    if let Some(c) = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return c;
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// `namespace/name` of a claim.
pub fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    )
}

pub(super) fn name_of_pv(pv: &PersistentVolume) -> &str {
    pv.metadata.name.as_deref().unwrap_or("")
}

fn name_of_claim(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or("")
}

/// The volume a claim names (`spec.volumeName`), or "".
pub fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

/// Whether the PV controller finished binding the claim.
pub fn is_claim_fully_bound(claim: &PersistentVolumeClaim) -> bool {
    !claim_volume_name(claim).is_empty()
        && claim
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED))
}

/// Whether the class binds on first consumer; an error when it does not say.
/// A claim without a class, or whose class does not exist, binds immediately.
pub fn is_delay_binding_mode(
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
) -> Result<bool, String> {
    let name = claim_class(claim);
    if name.is_empty() {
        return Ok(false);
    }
    let Some(class) = class else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass {name:?}"
        )),
        Some(mode) => Ok(mode == WAIT_FOR_FIRST_CONSUMER),
    }
}

/// A claim's requested storage in bytes (0 when it asks for none or the value is unreadable).
pub fn requested_storage(claim: &PersistentVolumeClaim) -> i64 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(STORAGE))
        .and_then(|q| parse_value(&q.0).ok())
        .unwrap_or(0)
}

/// A volume's capacity in bytes (0 when absent or unreadable).
pub fn volume_capacity(pv: &PersistentVolume) -> i64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get(STORAGE))
        .and_then(|q| parse_value(&q.0).ok())
        .unwrap_or(0)
}

/// Whether the node (by its labels) is in the volume's required node affinity. Upstream
/// CheckNodeAffinity: the node is matched without a name, and a term that does not compile
/// matches nothing.
pub fn check_node_affinity(pv: &PersistentVolume, node_labels: &BTreeMap<String, String>) -> bool {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    NodeSelector::compile(required).matches(node_labels, "")
}

pub(super) fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// Whether the volume is pre-bound (or bound) to this claim: its `claimRef` names the
/// claim, and its UID when the reference has one.
pub fn is_volume_bound_to_claim(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name.as_deref().unwrap_or("") != name_of_claim(claim)
        || r.namespace.as_deref().unwrap_or("") != claim.metadata.namespace.as_deref().unwrap_or("")
    {
        return false;
    }
    let uid = r.uid.as_deref().unwrap_or("");
    uid.is_empty() || Some(uid) == claim.metadata.uid.as_deref()
}

/// The smallest volume among `volumes` the claim can bind to on a node with `labels`, not
/// in `excluded`; a volume pre-bound to the claim wins (and then, if the node is outside
/// its affinity, nothing matches). Upstream FindMatchingVolume in the scheduler's path.
pub fn find_matching_volume(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    labels: &BTreeMap<String, String>,
    excluded: &HashSet<String>,
) -> Result<Option<Arc<PersistentVolume>>, String> {
    let spec = claim.spec.as_ref();
    let requested = requested_storage(claim);
    let requested_class = claim_class(claim);
    let selector = match spec.and_then(|s| s.selector.as_ref()) {
        None => None,
        Some(s) => Some(LabelSelector::compile(Some(s)).map_err(|e| {
            format!(
                "error creating internal label selector for claim: {}: {e}",
                claim_key(claim)
            )
        })?),
    };
    let claim_mode = spec
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(FILESYSTEM);
    let claim_vac = spec
        .and_then(|s| s.volume_attributes_class_name.as_deref())
        .unwrap_or("");
    let mut smallest: Option<(&Arc<PersistentVolume>, i64)> = None;
    for volume in volumes {
        if excluded.contains(name_of_pv(volume)) {
            continue;
        }
        let vspec = volume.spec.as_ref();
        if vspec.and_then(|s| s.claim_ref.as_ref()).is_some()
            && !is_volume_bound_to_claim(volume, claim)
        {
            continue;
        }
        let capacity = volume_capacity(volume);
        if capacity < requested {
            continue;
        }
        if vspec
            .and_then(|s| s.volume_mode.as_deref())
            .unwrap_or(FILESYSTEM)
            != claim_mode
        {
            continue;
        }
        if vspec
            .and_then(|s| s.volume_attributes_class_name.as_deref())
            .unwrap_or("")
            != claim_vac
        {
            continue;
        }
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity_ok = check_node_affinity(volume, labels);
        if is_volume_bound_to_claim(volume, claim) {
            return Ok(affinity_ok.then(|| volume.clone()));
        }
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some(VOLUME_AVAILABLE) {
            continue;
        }
        if let Some(sel) = &selector {
            if !sel.matches_opt(volume.metadata.labels.as_ref()) {
                continue;
            }
        }
        if volume_class(volume) != requested_class || !affinity_ok {
            continue;
        }
        if !check_access_modes(claim, volume) {
            continue;
        }
        if smallest.is_none_or(|(_, q)| q > capacity) {
            smallest = Some((volume, capacity));
        }
    }
    Ok(smallest.map(|(v, _)| v.clone()))
}

/// Whether the volume offers every access mode the claim asks for.
pub(super) fn check_access_modes(claim: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let offered: HashSet<&str> = pv
        .spec
        .iter()
        .flat_map(|s| s.access_modes.iter().flatten())
        .map(String::as_str)
        .collect();
    claim
        .spec
        .iter()
        .flat_map(|s| s.access_modes.iter().flatten())
        .all(|m| offered.contains(m.as_str()))
}

/// Whether node labels satisfy a class's `allowedTopologies` (none: every node).
pub(super) fn match_topology_selector_terms(
    terms: Option<&Vec<TopologySelectorTerm>>,
    labels: &BTreeMap<String, String>,
) -> bool {
    let Some(terms) = terms.filter(|t| !t.is_empty()) else {
        return true;
    };
    terms.iter().any(|term| {
        term.match_label_expressions
            .iter()
            .flatten()
            .all(|req| labels.get(&req.key).is_some_and(|v| req.values.contains(v)))
    })
}

/// What Filter found for one node: the decision, and the reasons the node does not fit
/// (empty when it does).
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub volumes: PodVolumes,
    pub reasons: Vec<&'static str>,
}

/// Places the pod's claims on `node`: bound claims must have their volume there; unbound
/// ones need a matching volume or provisioning there. An error is a broken object (a
/// claim without class, a missing class, a bad selector). Upstream FindPodVolumes.
pub fn find_pod_volumes(claims: &PodVolumeClaims, node: &Arc<Node>) -> Result<Found, String> {
    let labels = node_labels(node);
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut bound_satisfied = true;
    let mut bound_pvs_found = true;
    let mut unbound_satisfied = true;
    let mut sufficient_storage = true;
    let mut static_bindings = Vec::new();
    let mut dynamic_provisions = Vec::new();

    for (_, pv) in &claims.bound {
        let Some(pv) = pv else {
            bound_pvs_found = false;
            break;
        };
        if !check_node_affinity(pv, labels) {
            bound_satisfied = false;
            break;
        }
    }

    'unbound: {
        if claims.unbound_delay_binding.is_empty() {
            break 'unbound;
        }
        let mut to_match = Vec::new();
        let mut to_provision = Vec::new();
        for claim in &claims.unbound_delay_binding {
            match claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_SELECTED_NODE))
            {
                // Provisioning for another node is under way: only that node fits.
                Some(selected) if selected != node_name => {
                    unbound_satisfied = false;
                    break 'unbound;
                }
                Some(_) => to_provision.push(claim.clone()),
                None => to_match.push(claim.clone()),
            }
        }
        if !to_match.is_empty() {
            // Smallest requests first, so each gets the smallest volume that fits it.
            to_match.sort_by_key(|c| requested_storage(c));
            let mut chosen = HashSet::new();
            for claim in to_match {
                let volumes = claims
                    .volumes_by_class
                    .get(claim_class(&claim))
                    .map_or(&[][..], Vec::as_slice);
                match find_matching_volume(&claim, volumes, labels, &chosen)? {
                    Some(pv) => {
                        chosen.insert(name_of_pv(&pv).to_string());
                        static_bindings.push(BindingInfo { pvc: claim, pv });
                    }
                    None => {
                        unbound_satisfied = false;
                        to_provision.push(claim);
                    }
                }
            }
        }
        if !to_provision.is_empty() {
            let (satisfied, sufficient, provisions) =
                check_volume_provisions(claims, &to_provision, labels)?;
            unbound_satisfied = satisfied;
            sufficient_storage = sufficient;
            dynamic_provisions = provisions;
        }
    }

    let mut reasons = Vec::new();
    if !bound_satisfied {
        reasons.push(ERR_REASON_NODE_CONFLICT);
    }
    if !unbound_satisfied {
        reasons.push(ERR_REASON_BIND_CONFLICT);
    }
    if !sufficient_storage {
        reasons.push(ERR_REASON_NOT_ENOUGH_SPACE);
    }
    if !bound_pvs_found {
        reasons.push(ERR_REASON_PV_NOT_EXIST);
    }
    Ok(Found {
        volumes: PodVolumes {
            static_bindings,
            dynamic_provisions,
            node: node.clone(),
        },
        reasons,
    })
}

/// Whether every claim can be provisioned on a node with `labels` (its class has a
/// provisioner and allows the node's topology), and whether there is capacity for each.
/// Upstream checkVolumeProvisions.
fn check_volume_provisions(
    claims: &PodVolumeClaims,
    to_provision: &[Arc<PersistentVolumeClaim>],
    labels: &BTreeMap<String, String>,
) -> Result<(bool, bool, Vec<DynamicProvision>), String> {
    let mut provisions = Vec::new();
    for claim in to_provision {
        let class_name = claim_class(claim);
        if class_name.is_empty() {
            return Err(format!("no class for claim {:?}", claim_key(claim)));
        }
        let Some(Some(class)) = claims.classes.get(class_name) else {
            return Err(format!("failed to find storage class {class_name:?}"));
        };
        let provisioner = class.provisioner.as_str();
        if provisioner.is_empty() || provisioner == NOT_SUPPORTED_PROVISIONER {
            return Ok((false, true, Vec::new()));
        }
        if !match_topology_selector_terms(class.allowed_topologies.as_ref(), labels) {
            return Ok((false, true, Vec::new()));
        }
        match has_enough_capacity(&claims.capacity, provisioner, claim, class_name, labels) {
            None => return Ok((true, false, Vec::new())),
            Some(capacity) => provisions.push(DynamicProvision {
                pvc: claim.clone(),
                capacity,
            }),
        }
    }
    Ok((true, true, provisions))
}

/// `None` when the claim's driver tracks capacity and no CSIStorageCapacity of the class
/// reachable from the node has room for it; else the capacity (bytes) of the first that
/// has, or `Some(None)` when nothing is tracked. Upstream hasEnoughCapacity.
fn has_enough_capacity(
    info: &CapacityInfo,
    provisioner: &str,
    claim: &PersistentVolumeClaim,
    class_name: &str,
    labels: &BTreeMap<String, String>,
) -> Option<Option<i64>> {
    let asks = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| r.contains_key(STORAGE));
    if !asks {
        return Some(None);
    }
    let tracked = info
        .drivers
        .get(provisioner)
        .and_then(|d| d.spec.storage_capacity)
        .unwrap_or(false);
    if !tracked {
        return Some(None);
    }
    let size = requested_storage(claim);
    info.capacities
        .iter()
        .find(|c| {
            c.storage_class_name == class_name
                && capacity_sufficient(c, size)
                && node_has_access(c, labels)
        })
        .map(|c| {
            Some(
                c.capacity
                    .as_ref()
                    .and_then(|q| parse_value(&q.0).ok())
                    .unwrap_or(0),
            )
        })
}

/// Whether a capacity can hold `size` bytes: its maximum volume size when set, else its
/// capacity.
pub(super) fn capacity_sufficient(c: &CSIStorageCapacity, size: i64) -> bool {
    c.maximum_volume_size
        .as_ref()
        .or(c.capacity.as_ref())
        .and_then(|q| parse_value(&q.0).ok())
        .is_some_and(|limit| limit >= size)
}

/// Whether the node's labels match the capacity's node topology (none: no node).
pub(super) fn node_has_access(c: &CSIStorageCapacity, labels: &BTreeMap<String, String>) -> bool {
    let Some(topology) = c.node_topology.as_ref() else {
        return false;
    };
    LabelSelector::compile(Some(topology)).is_ok_and(|s| s.matches(labels))
}

/// The volume pre-bound to the claim (`claimRef` and the bound-by-controller annotation
/// set), and whether that changed anything. Upstream GetBindVolumeToClaim.
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> (PersistentVolume, bool) {
    let mut out = pv.clone();
    let mut dirty = false;
    let set_by_controller = !is_volume_bound_to_claim(pv, claim);
    let same_ref = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| {
            r.name.as_deref() == claim.metadata.name.as_deref()
                && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
                && r.uid.as_deref().unwrap_or("") == claim.metadata.uid.as_deref().unwrap_or("")
        });
    if !same_ref {
        out.spec.get_or_insert_with(Default::default).claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..Default::default()
        });
        dirty = true;
    }
    let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if set_by_controller && !annotations.contains_key(ANN_BOUND_BY_CONTROLLER) {
        annotations.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    if annotations.is_empty() {
        out.metadata.annotations = None;
    }
    (out, dirty)
}

/// The claim with the node its volume is to be provisioned for.
pub fn claim_with_selected_node(
    claim: &PersistentVolumeClaim,
    node: &str,
) -> PersistentVolumeClaim {
    let mut out = claim.clone();
    out.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANN_SELECTED_NODE.into(), node.into());
    out
}

/// Whether `written` is newer than `seen` (the informer has not caught up with a write).
fn is_newer<
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    written: &T,
    seen: &T,
) -> bool {
    match (resource_version(written), resource_version(seen)) {
        (Some(w), Some(s)) => w > s,
        _ => false,
    }
}

/// Whether every claim the pod's writes touched is bound (`Ok(true)`), not yet
/// (`Ok(false)`), or will not be without scheduling again (`Err`, upstream's message), as
/// `view` (the informer's objects) shows. Upstream checkBindings.
pub fn check_bindings(
    volumes: &PodVolumes,
    view: &framework::StorageListers,
) -> Result<bool, String> {
    let node = &volumes.node;
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let labels = node_labels(node);
    for binding in &volumes.static_bindings {
        let pv_name = name_of_pv(&binding.pv);
        let pv = view.persistent_volume(pv_name).ok_or_else(|| {
            format!("failed to check binding: could not find v1.PersistentVolume {pv_name:?}")
        })?;
        let key = claim_key(&binding.pvc);
        let pvc = view.persistent_volume_claims.get(&key).ok_or_else(|| {
            format!("failed to check binding: could not find v1.PersistentVolumeClaim {key:?}")
        })?;
        if is_newer(binding.pv.as_ref(), pv.as_ref()) {
            return Ok(false);
        }
        if !check_node_affinity(pv, labels) {
            return Err(format!(
                "pv {pv_name:?} node affinity doesn't match node {node_name:?}: no matching NodeSelectorTerms"
            ));
        }
        let claim_ref_uid = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref())
            .unwrap_or("");
        if claim_ref_uid.is_empty() {
            return Err(format!("ClaimRef got reset for pv {pv_name:?}"));
        }
        if !is_claim_fully_bound(pvc) {
            return Ok(false);
        }
    }
    for provision in &volumes.dynamic_provisions {
        let key = claim_key(&provision.pvc);
        let pvc = view.persistent_volume_claims.get(&key).ok_or_else(|| {
            format!(
                "failed to check provisioning pvc: could not find v1.PersistentVolumeClaim {key:?}"
            )
        })?;
        if is_newer(provision.pvc.as_ref(), pvc.as_ref()) {
            return Ok(false);
        }
        let name = name_of_claim(pvc);
        let Some(annotations) = pvc.metadata.annotations.as_ref() else {
            return Err(format!("selectedNode annotation reset for PVC {name:?}"));
        };
        if annotations.get(ANN_SELECTED_NODE).map(String::as_str) != Some(node_name) {
            // The provisioner clears the annotation when it cannot provision there.
            return Err(format!("provisioning failed for PVC {name:?}"));
        }
        let volume_name = claim_volume_name(pvc);
        if !volume_name.is_empty() {
            // A volume not seen yet is waited for: the informer may be behind.
            let Some(pv) = view.persistent_volume(volume_name) else {
                return Ok(false);
            };
            if !check_node_affinity(pv, labels) {
                return Err(format!(
                    "pv {volume_name:?} node affinity doesn't match node {node_name:?}: no matching NodeSelectorTerms"
                ));
            }
        }
        if !is_claim_fully_bound(pvc) {
            return Ok(false);
        }
    }
    Ok(true)
}

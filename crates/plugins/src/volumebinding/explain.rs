//! Why VolumeBinding rejected a node, claim by claim, in plain words.
//!
//! Upstream's Filter says only which of four things went wrong on a node ("didn't find
//! available persistent volumes to bind", ...), never for which claim nor why. This module
//! retraces [`find_pod_volumes`](super::binder::find_pod_volumes) over the same
//! [`PodVolumeClaims`] Filter read (the informer's objects under the assume cache, as
//! PreFilter gathered them) and names each claim that cannot be had on the node, with the
//! facts that rule it out. It is for `simulate`'s report: nothing calls it while scheduling,
//! and the statuses Filter returns are left as upstream writes them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use framework::labels::LabelSelector;
use framework::quantity::parse_value;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};

use super::binder::{
    capacity_sufficient, check_access_modes, check_node_affinity, claim_key, claim_volume_name,
    is_volume_bound_to_claim, match_topology_selector_terms, name_of_pv, node_has_access,
    node_labels, requested_storage, volume_capacity, volume_class, PodVolumeClaims,
    ANN_SELECTED_NODE, FILESYSTEM, NOT_SUPPORTED_PROVISIONER, STORAGE, VOLUME_AVAILABLE,
};
use crate::helper::storage::claim_class;

/// Why one claim of the pod cannot be had on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimReason {
    /// `namespace/name` of the claim.
    pub claim: String,
    pub reason: String,
}

impl ClaimReason {
    fn new(claim: &PersistentVolumeClaim, reason: String) -> Self {
        ClaimReason {
            claim: claim_key(claim),
            reason,
        }
    }
}

/// Each claim of the pod that cannot be had on `node`, with why, in the order Filter
/// considers them: bound claims, then claims waiting for their first consumer (smallest
/// request first, each taking the volume it matches away from the next). Empty when every
/// claim can be had there.
pub fn explain_pod_volumes(claims: &PodVolumeClaims, node: &Node) -> Vec<ClaimReason> {
    let labels = node_labels(node);
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut out = Vec::new();

    for (claim, pv) in &claims.bound {
        match pv {
            None => out.push(ClaimReason::new(
                claim,
                format!("bound volume {} does not exist", claim_volume_name(claim)),
            )),
            Some(pv) if !check_node_affinity(pv, labels) => out.push(ClaimReason::new(
                claim,
                format!(
                    "bound volume {}'s node affinity does not match node {node_name}",
                    name_of_pv(pv)
                ),
            )),
            Some(_) => {}
        }
    }

    let mut to_match = Vec::new();
    // Claims to provision, with why no existing volume fits them when they were matched.
    let mut to_provision: Vec<(&Arc<PersistentVolumeClaim>, Option<Vec<String>>)> = Vec::new();
    for claim in &claims.unbound_delay_binding {
        match claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_SELECTED_NODE))
        {
            Some(selected) if selected != node_name => out.push(ClaimReason::new(
                claim,
                format!("its volume is being provisioned for node {selected}"),
            )),
            Some(_) => to_provision.push((claim, None)),
            None => to_match.push(claim),
        }
    }
    to_match.sort_by_key(|c| requested_storage(c));
    // Volumes matched to earlier claims of the pod, by name, with the claim's key.
    let mut chosen: HashMap<String, String> = HashMap::new();
    for claim in to_match {
        let volumes = claims
            .volumes_by_class
            .get(claim_class(claim))
            .map_or(&[][..], Vec::as_slice);
        let excluded = chosen.keys().cloned().collect();
        match super::binder::find_matching_volume(claim, volumes, labels, &excluded) {
            Err(message) => out.push(ClaimReason::new(claim, message)),
            Ok(Some(pv)) => {
                chosen.insert(name_of_pv(&pv).to_string(), claim_key(claim));
            }
            Ok(None) => {
                let misses = volume_misses(claim, volumes, labels, node_name, &chosen);
                to_provision.push((claim, Some(misses)));
            }
        }
    }
    for (claim, misses) in to_provision {
        if let Some(reason) = provision_reason(claims, claim, labels, node_name, misses) {
            out.push(ClaimReason::new(claim, reason));
        }
    }
    out
}

/// Why the claim's volume cannot be provisioned for the node (`None`: it can). `misses`
/// says why no existing volume fits, when the claim was matched against them first.
fn provision_reason(
    claims: &PodVolumeClaims,
    claim: &PersistentVolumeClaim,
    labels: &BTreeMap<String, String>,
    node_name: &str,
    misses: Option<Vec<String>>,
) -> Option<String> {
    let class_name = claim_class(claim);
    if class_name.is_empty() {
        return Some("the claim has no StorageClass".to_string());
    }
    let Some(Some(class)) = claims.classes.get(class_name) else {
        return Some(format!("StorageClass {class_name} not found"));
    };
    let provisioner = class.provisioner.as_str();
    if provisioner.is_empty() || provisioner == NOT_SUPPORTED_PROVISIONER {
        let why = match misses {
            None => {
                return Some(format!(
                    "StorageClass {class_name} cannot provision volumes"
                ))
            }
            Some(m) if m.is_empty() => "there are none".to_string(),
            Some(m) => m.join("; "),
        };
        return Some(format!(
            "no available PersistentVolume of class {class_name} ({why})"
        ));
    }
    if !match_topology_selector_terms(class.allowed_topologies.as_ref(), labels) {
        return Some(format!(
            "StorageClass {class_name}'s allowedTopologies exclude node {node_name}"
        ));
    }
    capacity_reason(claims, claim, provisioner, class_name, labels, node_name)
}

/// Why no CSIStorageCapacity can hold the claim's volume on the node (`None`: one can, or
/// the driver does not track capacity).
fn capacity_reason(
    claims: &PodVolumeClaims,
    claim: &PersistentVolumeClaim,
    provisioner: &str,
    class_name: &str,
    labels: &BTreeMap<String, String>,
    node_name: &str,
) -> Option<String> {
    let needs = requested_quantity(claim)?;
    let tracked = claims
        .capacity
        .drivers
        .get(provisioner)
        .and_then(|d| d.spec.storage_capacity)
        .unwrap_or(false);
    if !tracked {
        return None;
    }
    let size = requested_storage(claim);
    let reachable: Vec<_> = claims
        .capacity
        .capacities
        .iter()
        .filter(|c| c.storage_class_name == class_name && node_has_access(c, labels))
        .collect();
    if reachable.iter().any(|c| capacity_sufficient(c, size)) {
        return None;
    }
    // The largest limit reachable is the one that came closest.
    let limit = |c: &k8s_openapi::api::storage::v1::CSIStorageCapacity| {
        let (what, q) = match (&c.maximum_volume_size, &c.capacity) {
            (Some(q), _) => ("a maximum volume size of ", q),
            (None, Some(q)) => ("", q),
            (None, None) => return None,
        };
        Some((parse_value(&q.0).unwrap_or(0), what, q.0.clone()))
    };
    match reachable
        .iter()
        .filter_map(|c| limit(c))
        .max_by_key(|l| l.0)
    {
        Some((_, what, q)) => Some(format!(
            "CSIStorageCapacity for class {class_name} has {what}{q}, needs {needs}"
        )),
        None => Some(format!(
            "no CSIStorageCapacity for class {class_name} reaches node {node_name}"
        )),
    }
}

/// The claim's storage request as written (`5Gi`), when it makes one.
fn requested_quantity(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(STORAGE))
        .map(|q| q.0.as_str())
}

/// Why each volume of the claim's class does not fit it on the node, by volume name: the
/// first check of the matcher's that it fails. A volume pre-bound to the claim is the only one that
/// counts, as in the matcher.
fn volume_misses(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    labels: &BTreeMap<String, String>,
    node_name: &str,
    chosen: &HashMap<String, String>,
) -> Vec<String> {
    // By name: the listers hand volumes over in no particular order.
    let mut sorted: Vec<&Arc<PersistentVolume>> = volumes.iter().collect();
    sorted.sort_by(|a, b| name_of_pv(a).cmp(name_of_pv(b)));
    let mut out = Vec::new();
    for volume in sorted {
        match volume_miss(claim, volume, labels, node_name, chosen) {
            Miss::Fits => {}
            Miss::Because(why) => out.push(why),
            Miss::PreBound(why) => return vec![why],
        }
    }
    out
}

enum Miss {
    Fits,
    Because(String),
    /// The volume is pre-bound to the claim and still does not fit.
    PreBound(String),
}

/// The matcher's checks, in its order, for one volume; the reason starts with its name.
fn volume_miss(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    labels: &BTreeMap<String, String>,
    node_name: &str,
    chosen: &HashMap<String, String>,
) -> Miss {
    let name = name_of_pv(volume);
    if let Some(other) = chosen.get(name) {
        return Miss::Because(format!("{name} is matched to {other}"));
    }
    let spec = claim.spec.as_ref();
    let vspec = volume.spec.as_ref();
    if let Some(r) = vspec.and_then(|s| s.claim_ref.as_ref()) {
        if !is_volume_bound_to_claim(volume, claim) {
            return Miss::Because(format!(
                "{name} is bound to {}/{}",
                r.namespace.as_deref().unwrap_or(""),
                r.name.as_deref().unwrap_or("")
            ));
        }
    }
    if volume_capacity(volume) < requested_storage(claim) {
        return Miss::Because(format!(
            "{name} is smaller than {}",
            requested_quantity(claim).unwrap_or("0")
        ));
    }
    let mode = vspec
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(FILESYSTEM);
    let claim_mode = spec
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(FILESYSTEM);
    if mode != claim_mode {
        return Miss::Because(format!("{name} has volume mode {mode}, not {claim_mode}"));
    }
    let vac = vspec
        .and_then(|s| s.volume_attributes_class_name.as_deref())
        .unwrap_or("");
    let claim_vac = spec
        .and_then(|s| s.volume_attributes_class_name.as_deref())
        .unwrap_or("");
    if vac != claim_vac {
        return Miss::Because(format!(
            "{name} has volume attributes class {vac:?}, not {claim_vac:?}"
        ));
    }
    if volume.metadata.deletion_timestamp.is_some() {
        return Miss::Because(format!("{name} is being deleted"));
    }
    let affinity_ok = check_node_affinity(volume, labels);
    if is_volume_bound_to_claim(volume, claim) {
        return if affinity_ok {
            Miss::Fits
        } else {
            Miss::PreBound(format!("{name} is pre-bound to the claim, but its node affinity does not match node {node_name}"))
        };
    }
    let phase = volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if phase != VOLUME_AVAILABLE {
        let phase = if phase.is_empty() {
            "in no phase"
        } else {
            phase
        };
        return Miss::Because(format!("{name} is {phase}"));
    }
    if let Some(selector) = spec.and_then(|s| s.selector.as_ref()) {
        let matches = LabelSelector::compile(Some(selector))
            .is_ok_and(|s| s.matches_opt(volume.metadata.labels.as_ref()));
        if !matches {
            return Miss::Because(format!("{name} does not match the claim's selector"));
        }
    }
    let class = volume_class(volume);
    if class != claim_class(claim) {
        return Miss::Because(format!("{name} is of class {class:?}"));
    }
    if !affinity_ok {
        return Miss::Because(format!(
            "{name}'s node affinity does not match node {node_name}"
        ));
    }
    if !check_access_modes(claim, volume) {
        let modes: Vec<&str> = spec
            .iter()
            .flat_map(|s| s.access_modes.iter().flatten())
            .map(String::as_str)
            .collect();
        return Miss::Because(format!(
            "{name} does not offer access modes {}",
            modes.join(", ")
        ));
    }
    Miss::Fits
}

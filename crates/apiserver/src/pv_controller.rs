//! The PersistentVolume controller stand-in: binds claims to volumes and keeps both phases
//! right, as kube-controller-manager's persistentvolume controller does where a user can
//! see it (on under `up` and `--simulate-kubelets`).
//!
//! Upstream: pkg/controller/volume/persistentvolume/pv_controller.go (syncClaim,
//! syncUnboundClaim, syncBoundClaim, syncVolume, bind) and index.go (findBestMatchForClaim).
//!
//! - A claim that is not bound yet (no `pv.kubernetes.io/bind-completed`) and names no volume
//!   gets the smallest Available volume that fits: same class, the claim's access modes (a
//!   volume with fewer modes first), same volume mode, the claim's selector, enough capacity.
//!   A volume whose `claimRef` already names the claim (the scheduler's VolumeBinding, a
//!   provisioner or the user wrote it) is taken whatever its size, unless a volume with fewer
//!   access modes matches first ([`find_best_match`]). Claims of a `WaitForFirstConsumer`
//!   class get only such a volume. Binding writes the volume's `claimRef` and phase Bound, then
//!   the claim's `volumeName`, annotations and status (Bound, the volume's access modes and
//!   capacity).
//! - With no volume, a claim of a class is handed to its provisioner by the
//!   `volume.kubernetes.io/storage-provisioner` annotation (for a `WaitForFirstConsumer`
//!   class once the scheduler wrote `volume.kubernetes.io/selected-node`); a claim with no
//!   class at all gets the default class when one exists.
//! - A claim that names a volume binds to it when the volume is free and fits, or is
//!   pre-bound to the claim.
//! - A bound claim whose volume is gone, or bound to another claim, is Lost.
//! - A volume whose claim is gone is Released (the provisioner stand-in deletes the ones it
//!   provisioned with reclaim policy Delete); one whose claim is bound to another volume is
//!   Released too when provisioned with reclaim policy Delete, else unbound and Available.
//!
//! Claims get upstream's Events (component `persistentvolume-controller`):
//! `WaitForFirstConsumer`, `ExternalProvisioning`, `ProvisioningFailed` (a missing class, an
//! in-tree provisioner name), `FailedBinding`, `VolumeMismatch`, `ClaimLost`, `ClaimMisbound`. Upstream names the
//! unscheduled pods that use a waiting claim (`WaitForPodScheduled`); here the claim always
//! gets `WaitForFirstConsumer`, which needs no look at the namespace's pods.
//!
//! Where this differs from upstream: a volume and a claim are each written once per binding
//! (spec and status together) where upstream writes spec and status separately; volumes get
//! no Events; recycling is not done (a `Recycle` volume stays Released).
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::update`] with the resourceVersion it decided on as a precondition, so a
//! decision on a stale object is dropped and made again on the event that changed it.
//! **Invariant:** every sync is idempotent: on objects it already settled it writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::store::RecvError;
use serde_json::{json, Map, Value};

use crate::admission;
use crate::meta;
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::status::ApiError;
use crate::store::{EventType, Store};

/// On a claim: the binding is complete (the controller saw both sides).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a volume or claim: the controller, not the user, chose the other side.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a volume: the provisioner that created it.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// On a claim: the provisioner asked to create its volume.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta form of [`ANN_STORAGE_PROVISIONER`], still written beside it.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a claim: the node the scheduler chose for a `WaitForFirstConsumer` claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The annotation that named a class before `spec.storageClassName`.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

pub(crate) fn str_at<'a>(obj: &'a Value, p: &str) -> &'a str {
    obj.pointer(p).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The object's map at `key`, made an empty map when it is missing or not one; None when the
/// object itself is not a map (stored objects always are).
fn object_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let field = map.entry(key).or_insert_with(|| json!({}));
    if !field.is_object() {
        *field = json!({});
    }
    field.as_object_mut()
}

fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    if let Some(a) = object_at(obj, "metadata").and_then(|m| {
        let a = m.entry("annotations").or_insert_with(|| json!({}));
        if !a.is_object() {
            *a = json!({});
        }
        a.as_object_mut()
    }) {
        a.insert(key.to_string(), json!(value));
    }
}

fn set_spec(obj: &mut Value, key: &str, value: Value) {
    if let Some(spec) = object_at(obj, "spec") {
        spec.insert(key.to_string(), value);
    }
}

/// A claim's class: the beta annotation when present, else `spec.storageClassName`.
pub fn claim_class(claim: &Value) -> &str {
    annotation(claim, ANN_BETA_STORAGE_CLASS)
        .unwrap_or_else(|| str_at(claim, "/spec/storageClassName"))
}

/// A volume's class, read the same way as a claim's.
pub fn volume_class(volume: &Value) -> &str {
    annotation(volume, ANN_BETA_STORAGE_CLASS)
        .unwrap_or_else(|| str_at(volume, "/spec/storageClassName"))
}

fn volume_mode(obj: &Value) -> &str {
    match str_at(obj, "/spec/volumeMode") {
        "" => "Filesystem",
        m => m,
    }
}

fn access_modes(obj: &Value, pointer: &str) -> Vec<String> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn quantity(obj: &Value, pointer: &str) -> Option<i128> {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(crate::validation::quantity_millis)
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects these labels; an
/// empty selector selects everything, as for claims.
pub fn selector_matches(selector: &Value, labels: Option<&Value>) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let labels_ok = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let exprs_ok = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = str_at(e, "/key");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match str_at(e, "/operator") {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => !label(key).is_some_and(|v| values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    labels_ok && exprs_ok
}

/// Whether the volume's `claimRef` names this claim (and its uid, when the reference has
/// one).
pub fn is_volume_bound_to_claim(volume: &Value, claim: &Value) -> bool {
    let Some(r) = volume.pointer("/spec/claimRef").filter(|r| r.is_object()) else {
        return false;
    };
    let uid = str_at(r, "/uid");
    str_at(r, "/name") == str_at(claim, "/metadata/name")
        && str_at(r, "/namespace") == str_at(claim, "/metadata/namespace")
        && (uid.is_empty() || uid == str_at(claim, "/metadata/uid"))
}

fn has_claim_ref(volume: &Value) -> bool {
    volume
        .pointer("/spec/claimRef")
        .is_some_and(Value::is_object)
}

/// The volume for an unbound claim that names none. Volumes whose access modes include the
/// claim's are searched in groups of equal modes, fewest modes first; the first group with a
/// match answers: a volume there pre-bound to the claim, else (unless `delay_binding`, where
/// the scheduler chooses) its smallest Available, unclaimed volume of the claim's class,
/// volume mode and selector with enough capacity.
///
/// Upstream: pkg/controller/volume/persistentvolume/index.go findByClaim, and
/// FindMatchingVolume.
pub fn find_best_match<'a>(
    claim: &Value,
    volumes: &'a [Arc<Value>],
    delay_binding: bool,
) -> Option<&'a Arc<Value>> {
    let wanted = access_modes(claim, "/spec/accessModes");
    let mut groups: BTreeMap<(usize, Vec<String>), Vec<&'a Arc<Value>>> = BTreeMap::new();
    for volume in volumes {
        let mut modes = access_modes(volume, "/spec/accessModes");
        modes.sort();
        modes.dedup();
        if wanted.iter().all(|m| modes.contains(m)) {
            groups.entry((modes.len(), modes)).or_default().push(volume);
        }
    }
    groups
        .into_values()
        .find_map(|group| best_in_group(claim, &group, delay_binding))
}

fn best_in_group<'a>(
    claim: &Value,
    volumes: &[&'a Arc<Value>],
    delay_binding: bool,
) -> Option<&'a Arc<Value>> {
    let requested = quantity(claim, "/spec/resources/requests/storage").unwrap_or(0);
    let class = claim_class(claim);
    let selector = claim.pointer("/spec/selector").filter(|s| s.is_object());
    let mut best: Option<(i128, &'a Arc<Value>)> = None;
    for &volume in volumes {
        if volume_mode(volume) != volume_mode(claim)
            || volume.pointer("/metadata/deletionTimestamp").is_some()
        {
            continue;
        }
        if is_volume_bound_to_claim(volume, claim) {
            return Some(volume);
        }
        if delay_binding {
            continue;
        }
        let Some(size) = quantity(volume, "/spec/capacity/storage") else {
            continue;
        };
        if size < requested
            || str_at(volume, "/status/phase") != "Available"
            || has_claim_ref(volume)
            || selector.is_some_and(|s| !selector_matches(s, volume.pointer("/metadata/labels")))
            || volume_class(volume) != class
        {
            continue;
        }
        if best.is_none_or(|(s, _)| size < s) {
            best = Some((size, volume));
        }
    }
    best.map(|(_, v)| v)
}

/// Why a volume a claim names cannot be bound to it (upstream's words, checked in its order).
///
/// Upstream: checkVolumeSatisfyClaim.
pub fn check_volume_satisfies_claim(volume: &Value, claim: &Value) -> Result<(), String> {
    if volume.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(format!(
            "the volume is marked for deletion {:?}",
            str_at(volume, "/metadata/name")
        ));
    }
    let requested = quantity(claim, "/spec/resources/requests/storage").unwrap_or(0);
    if quantity(volume, "/spec/capacity/storage").unwrap_or(0) < requested {
        return Err("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Err("storageClassName does not match".into());
    }
    if volume_mode(volume) != volume_mode(claim) {
        return Err("incompatible volumeMode".into());
    }
    let modes = access_modes(volume, "/spec/accessModes");
    if !access_modes(claim, "/spec/accessModes")
        .iter()
        .all(|m| modes.contains(m))
    {
        return Err("incompatible accessMode".into());
    }
    Ok(())
}

fn set_phase(obj: &mut Value, phase: &str, with_transition_time: bool) {
    if str_at(obj, "/status/phase") == phase {
        return;
    }
    if let Some(status) = object_at(obj, "status") {
        status.insert("phase".into(), json!(phase));
        if with_transition_time {
            status.insert("lastPhaseTransitionTime".into(), json!(meta::now_rfc3339()));
        }
    }
}

/// The volume with its phase set (a volume's phase change records the transition time and
/// clears the message); None when it already has it.
pub fn volume_with_phase(volume: &Value, phase: &str) -> Option<Value> {
    if str_at(volume, "/status/phase") == phase {
        return None;
    }
    let mut new = volume.clone();
    set_phase(&mut new, phase, true);
    if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("message");
    }
    Some(new)
}

/// The volume bound to the claim: `claimRef` naming it (with uid and resourceVersion),
/// `pv.kubernetes.io/bound-by-controller` when the volume was not pre-bound to it, phase
/// Bound. None when nothing changes.
pub fn bind_volume_to_claim(volume: &Value, claim: &Value) -> Option<Value> {
    let mut new = volume.clone();
    let uid = str_at(claim, "/metadata/uid");
    let pre_bound = is_volume_bound_to_claim(volume, claim);
    if !pre_bound || str_at(volume, "/spec/claimRef/uid") != uid {
        set_spec(
            &mut new,
            "claimRef",
            json!({
                "kind": "PersistentVolumeClaim",
                "namespace": str_at(claim, "/metadata/namespace"),
                "name": str_at(claim, "/metadata/name"),
                "uid": uid,
                "apiVersion": "v1",
                "resourceVersion": str_at(claim, "/metadata/resourceVersion"),
            }),
        );
    }
    if !pre_bound && annotation(&new, ANN_BOUND_BY_CONTROLLER).is_none() {
        set_annotation(&mut new, ANN_BOUND_BY_CONTROLLER, "yes");
    }
    if let Some(phased) = volume_with_phase(&new, "Bound") {
        new = phased;
    }
    (new != *volume).then_some(new)
}

/// The claim bound to the volume: `volumeName`, `pv.kubernetes.io/bind-completed`,
/// `pv.kubernetes.io/bound-by-controller` when the claim named no volume, and status Bound
/// with the volume's access modes and capacity. None when nothing changes.
pub fn bind_claim_to_volume(claim: &Value, volume: &Value) -> Option<Value> {
    let mut new = claim.clone();
    let name = str_at(volume, "/metadata/name");
    if str_at(claim, "/spec/volumeName") != name {
        if str_at(claim, "/spec/volumeName").is_empty()
            && annotation(claim, ANN_BOUND_BY_CONTROLLER).is_none()
        {
            set_annotation(&mut new, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        set_spec(&mut new, "volumeName", json!(name));
    }
    if annotation(&new, ANN_BIND_COMPLETED).is_none() {
        set_annotation(&mut new, ANN_BIND_COMPLETED, "yes");
    }
    new = claim_with_status(&new, "Bound", Some(volume));
    (new != *claim).then_some(new)
}

/// The claim with a phase; with a volume its access modes are the volume's, and so is its
/// capacity when the claim is entering the phase (a bound claim's capacity may differ from
/// its volume's on purpose, after a resize); without one both are cleared.
pub fn claim_with_status(claim: &Value, phase: &str, volume: Option<&Value>) -> Value {
    let entering = str_at(claim, "/status/phase") != phase;
    let mut new = claim.clone();
    set_phase(&mut new, phase, false);
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return new;
    };
    match volume {
        Some(v) => {
            match v.pointer("/spec/accessModes") {
                Some(modes) => status.insert("accessModes".into(), modes.clone()),
                None => status.remove("accessModes"),
            };
            let size = quantity(v, "/spec/capacity/storage");
            let differs = quantity(claim, "/status/capacity/storage") != size;
            if let Some(capacity) = v.pointer("/spec/capacity").filter(|_| entering && differs) {
                status.insert("capacity".into(), capacity.clone());
            }
        }
        None => {
            status.remove("accessModes");
            status.remove("capacity");
        }
    }
    new
}

/// The volume unbound from a claim now bound elsewhere: a binding the controller made is
/// removed whole, a user's pre-binding keeps the claim's name and loses only its uid; phase
/// Available.
pub fn unbind_volume(volume: &Value) -> Value {
    let mut new = volume.clone();
    if annotation(volume, ANN_BOUND_BY_CONTROLLER).is_some() {
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("claimRef");
        }
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                a.remove(ANN_BOUND_BY_CONTROLLER);
            }
            if meta
                .get("annotations")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                meta.remove("annotations");
            }
        }
    } else if let Some(r) = new.pointer_mut("/spec/claimRef/uid") {
        *r = json!("");
    }
    volume_with_phase(&new, "Available").unwrap_or(new)
}

/// The controller's view of the store.
pub(crate) struct PvController {
    store: Arc<Store>,
    volumes: &'static ResourceInfo,
    claims: &'static ResourceInfo,
    classes: &'static ResourceInfo,
    /// Claims waiting for a volume (not bound, naming none), as (namespace, name): a free
    /// volume is matched against these rather than against every claim.
    waiting: Mutex<BTreeSet<(String, String)>>,
    recorder: Recorder,
}

/// Provisioner names of upstream's in-tree volume plugins; anything else is an external
/// provisioner.
const IN_TREE_PREFIX: &str = "kubernetes.io/";

/// The component the controller's Events name.
const COMPONENT: &str = "persistentvolume-controller";

/// Writes `new` over `name` if the stored object still has `read`'s resourceVersion.
fn write_if_unchanged(
    store: &Store,
    info: &ResourceInfo,
    read: &Value,
    new: Value,
) -> Result<Arc<Value>, ApiError> {
    let (ns, name) = (
        str_at(read, "/metadata/namespace"),
        str_at(read, "/metadata/name"),
    );
    let rv = str_at(read, "/metadata/resourceVersion");
    store.update(info, ns, name, false, |cur| {
        if str_at(cur, "/metadata/resourceVersion") != rv {
            return Err(ApiError::modified(info, name));
        }
        Ok(new)
    })
}

impl PvController {
    pub(crate) fn new(store: Arc<Store>) -> Option<Self> {
        Some(PvController {
            recorder: Recorder::new(store.clone(), COMPONENT)?,
            store,
            volumes: resources::lookup("", "v1", "persistentvolumes")?,
            claims: resources::lookup("", "v1", "persistentvolumeclaims")?,
            classes: resources::lookup("storage.k8s.io", "v1", "storageclasses")?,
            waiting: Mutex::new(BTreeSet::new()),
        })
    }

    fn write(&self, info: &ResourceInfo, read: &Value, new: Value) -> Option<Arc<Value>> {
        match write_if_unchanged(&self.store, info, read, new) {
            Ok(v) => Some(v),
            Err(e) => {
                // The event of whatever changed it brings the object back here.
                tracing::debug!(object = %str_at(read, "/metadata/name"), error = %e.message,
                    "persistentvolume controller stand-in: not written");
                None
            }
        }
    }

    fn class(&self, name: &str) -> Option<Arc<Value>> {
        if name.is_empty() {
            return None;
        }
        self.store.get(self.classes, "", name)
    }

    /// Whether the claim's class binds when a pod uses it (a missing class binds at once).
    fn delay_binding(&self, claim: &Value) -> bool {
        self.class(claim_class(claim))
            .is_some_and(|c| str_at(&c, "/volumeBindingMode") == "WaitForFirstConsumer")
    }

    pub(crate) fn sync_claim(&self, claim: &Value) {
        self.track_waiting(claim, false);
        if annotation(claim, ANN_BIND_COMPLETED).is_none() {
            self.sync_unbound_claim(claim);
        } else {
            self.sync_bound_claim(claim);
        }
    }

    /// Records whether the claim waits for a volume (`gone`: it was deleted).
    fn track_waiting(&self, claim: &Value, gone: bool) {
        let key = (
            str_at(claim, "/metadata/namespace").to_string(),
            str_at(claim, "/metadata/name").to_string(),
        );
        let waits = !gone
            && annotation(claim, ANN_BIND_COMPLETED).is_none()
            && str_at(claim, "/spec/volumeName").is_empty();
        if let Ok(mut waiting) = self.waiting.lock() {
            if waits {
                waiting.insert(key);
            } else {
                waiting.remove(&key);
            }
        }
    }

    fn claim_event(&self, claim: &Value, kind: &str, reason: &str, message: &str) {
        self.recorder
            .event(claim, "PersistentVolumeClaim", kind, reason, message);
    }

    fn claim_pending(&self, claim: &Value) {
        let new = claim_with_status(claim, "Pending", None);
        if new != *claim {
            self.write(self.claims, claim, new);
        }
    }

    fn sync_unbound_claim(&self, claim: &Value) {
        let volume_name = str_at(claim, "/spec/volumeName");
        if volume_name.is_empty() {
            let delay = self.delay_binding(claim);
            let (volumes, _) = self.store.list(self.volumes, None);
            if let Some(volume) = find_best_match(claim, &volumes, delay) {
                self.bind(volume, claim);
                return;
            }
            if self.assign_default_class(claim) {
                return;
            }
            let class = claim_class(claim);
            if delay && annotation(claim, ANN_SELECTED_NODE).is_none() {
                self.claim_event(
                    claim,
                    "Normal",
                    "WaitForFirstConsumer",
                    "waiting for first consumer to be created before binding",
                );
                self.claim_pending(claim);
                return;
            }
            if class.is_empty() {
                self.claim_event(
                    claim,
                    "Normal",
                    "FailedBinding",
                    "no persistent volumes available for this claim and no storage class is set",
                );
                self.claim_pending(claim);
                return;
            }
            self.provision_claim(claim, class);
            return;
        }
        let Some(volume) = self.store.get(self.volumes, "", volume_name) else {
            self.claim_pending(claim);
            return;
        };
        if !has_claim_ref(&volume) {
            match check_volume_satisfies_claim(&volume, claim) {
                Ok(()) => self.bind(&volume, claim),
                Err(why) => {
                    self.claim_event(
                        claim,
                        "Warning",
                        "VolumeMismatch",
                        &format!("Cannot bind to requested volume \"{volume_name}\": {why}"),
                    );
                    self.claim_pending(claim);
                }
            }
        } else if is_volume_bound_to_claim(&volume, claim) {
            self.bind(&volume, claim);
        } else {
            // The volume is bound to another claim: wait for it to be free.
            self.claim_event(
                claim,
                "Warning",
                "FailedBinding",
                &format!("volume \"{volume_name}\" already bound to a different claim."),
            );
            if annotation(claim, ANN_BOUND_BY_CONTROLLER).is_none() {
                self.claim_pending(claim);
            }
        }
    }

    /// Gives a claim without any class the default class, as upstream does for claims
    /// created before a default class existed. True when it wrote.
    fn assign_default_class(&self, claim: &Value) -> bool {
        let has_class = annotation(claim, ANN_BETA_STORAGE_CLASS).is_some()
            || claim
                .pointer("/spec/storageClassName")
                .is_some_and(|c| !c.is_null());
        if has_class {
            return false;
        }
        let (classes, _) = self.store.list(self.classes, None);
        let Some(default) = admission::default_storage_class(&classes) else {
            return false;
        };
        let mut new = claim.clone();
        set_spec(&mut new, "storageClassName", json!(default));
        self.write(self.claims, claim, new).is_some()
    }

    /// Hands the claim to its class's provisioner (the annotations a provisioner watches
    /// for); the claim stays Pending until a volume for it appears.
    fn provision_claim(&self, claim: &Value, class_name: &str) {
        let Some(class) = self.class(class_name) else {
            self.claim_event(
                claim,
                "Warning",
                "ProvisioningFailed",
                &format!("storageclass.storage.k8s.io \"{class_name}\" not found"),
            );
            self.claim_pending(claim);
            return;
        };
        let provisioner = str_at(&class, "/provisioner");
        if provisioner.starts_with(IN_TREE_PREFIX) {
            // No in-tree volume plugin provisions here (kubernetes.io/no-provisioner is the
            // usual one): upstream reports the missing plugin and hands the claim to no one.
            self.claim_event(
                claim,
                "Warning",
                "ProvisioningFailed",
                &format!("no volume plugin matched name: {provisioner}"),
            );
            self.claim_pending(claim);
            return;
        }
        self.claim_event(
            claim,
            "Normal",
            "ExternalProvisioning",
            &format!(
                "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
                 or manually by the system administrator. If volume creation is delayed, please \
                 verify that the provisioner is running and correctly registered."
            ),
        );
        let mut new = claim_with_status(claim, "Pending", None);
        if annotation(claim, ANN_STORAGE_PROVISIONER) != Some(provisioner)
            || annotation(claim, ANN_BETA_STORAGE_PROVISIONER) != Some(provisioner)
        {
            set_annotation(&mut new, ANN_BETA_STORAGE_PROVISIONER, provisioner);
            set_annotation(&mut new, ANN_STORAGE_PROVISIONER, provisioner);
        }
        if new != *claim {
            self.write(self.claims, claim, new);
        }
    }

    fn sync_bound_claim(&self, claim: &Value) {
        let volume_name = str_at(claim, "/spec/volumeName");
        let volume = (!volume_name.is_empty())
            .then(|| self.store.get(self.volumes, "", volume_name))
            .flatten();
        let Some(volume) = volume else {
            let why = if volume_name.is_empty() {
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
            } else {
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
            };
            self.claim_lost(claim, "ClaimLost", why);
            return;
        };
        let uid = str_at(claim, "/metadata/uid");
        if !has_claim_ref(&volume) || str_at(&volume, "/spec/claimRef/uid") == uid {
            self.bind(&volume, claim);
        } else {
            self.claim_lost(
                claim,
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            );
        }
    }

    /// Marks the claim Lost, with a Warning the first time.
    fn claim_lost(&self, claim: &Value, reason: &str, why: &str) {
        let new = claim_with_status(claim, "Lost", None);
        if new != *claim && self.write(self.claims, claim, new).is_some() {
            self.claim_event(claim, "Warning", reason, why);
        }
    }

    /// Binds both sides: the volume first, so a claim is never Bound to a volume that does
    /// not name it.
    fn bind(&self, volume: &Value, claim: &Value) {
        let volume = match bind_volume_to_claim(volume, claim) {
            Some(new) => match self.write(self.volumes, volume, new) {
                Some(v) => v,
                None => return,
            },
            None => Arc::new(volume.clone()),
        };
        if let Some(new) = bind_claim_to_volume(claim, &volume) {
            self.write(self.claims, claim, new);
        }
    }

    pub(crate) fn sync_volume(&self, volume: &Value) {
        let uid = str_at(volume, "/spec/claimRef/uid");
        if !has_claim_ref(volume) || uid.is_empty() {
            // Free, or reserved for a claim that has not been bound yet.
            if let Some(new) = volume_with_phase(volume, "Available") {
                self.write(self.volumes, volume, new);
            }
            if !has_claim_ref(volume) {
                self.volume_free(volume);
            } else if let Some(claim) = self.store.get(
                self.claims,
                str_at(volume, "/spec/claimRef/namespace"),
                str_at(volume, "/spec/claimRef/name"),
            ) {
                // Pre-bound by name: the claim it names may be waiting for it.
                if annotation(&claim, ANN_BIND_COMPLETED).is_none() {
                    self.sync_claim(&claim);
                }
            }
            return;
        }
        let claim = self
            .store
            .get(
                self.claims,
                str_at(volume, "/spec/claimRef/namespace"),
                str_at(volume, "/spec/claimRef/name"),
            )
            .filter(|c| str_at(c, "/metadata/uid") == uid);
        let Some(claim) = claim else {
            let phase = str_at(volume, "/status/phase");
            if phase != "Released" && phase != "Failed" {
                if let Some(new) = volume_with_phase(volume, "Released") {
                    self.write(self.volumes, volume, new);
                }
            }
            return;
        };
        let claimed = str_at(&claim, "/spec/volumeName");
        let name = str_at(volume, "/metadata/name");
        if claimed.is_empty() {
            if volume_mode(&claim) != volume_mode(volume) {
                return;
            }
            // The volume names the claim; binding the claim finishes it.
            self.sync_claim(&claim);
        } else if claimed == name {
            if let Some(new) = volume_with_phase(volume, "Bound") {
                self.write(self.volumes, volume, new);
            }
        } else {
            // The claim is bound to another volume: a volume provisioned for it with reclaim
            // policy Delete is released (its provisioner deletes it), any other unbound.
            let provisioned = annotation(volume, ANN_PROVISIONED_BY).is_some();
            let delete = str_at(volume, "/spec/persistentVolumeReclaimPolicy") == "Delete";
            let phase = str_at(volume, "/status/phase");
            let new = if provisioned && delete {
                (phase != "Released" && phase != "Failed")
                    .then(|| volume_with_phase(volume, "Released"))
                    .flatten()
            } else {
                Some(unbind_volume(volume))
            };
            if let Some(new) = new.filter(|n| n != volume) {
                self.write(self.volumes, volume, new);
            }
        }
    }

    /// A volume is free: the claims waiting for a volume of its class are synced, so one that
    /// fits binds now (upstream finds it on its periodic resync, every 15 s by default).
    fn volume_free(&self, volume: &Value) {
        let class = volume_class(volume);
        let waiting: Vec<(String, String)> = match self.waiting.lock() {
            Ok(w) => w.iter().cloned().collect(),
            Err(_) => return,
        };
        for (ns, name) in waiting {
            if let Some(c) = self.store.get(self.claims, &ns, &name) {
                if claim_class(&c) == class {
                    self.sync_claim(&c);
                }
            }
        }
    }

    /// A claim was deleted: the volumes bound to it are released (the one it named, else
    /// any whose `claimRef` has its uid).
    fn claim_deleted(&self, claim: &Value) {
        self.track_waiting(claim, true);
        let uid = str_at(claim, "/metadata/uid");
        if uid.is_empty() {
            return;
        }
        let named = self
            .store
            .get(self.volumes, "", str_at(claim, "/spec/volumeName"))
            .filter(|v| str_at(v, "/spec/claimRef/uid") == uid);
        if let Some(v) = named {
            self.sync_volume(&v);
            return;
        }
        let (volumes, _) = self.store.list(self.volumes, None);
        for v in volumes
            .iter()
            .filter(|v| str_at(v, "/spec/claimRef/uid") == uid)
        {
            self.sync_volume(v);
        }
    }

    /// A volume was deleted: the claim it named is synced (a bound one is then Lost).
    fn volume_deleted(&self, volume: &Value) {
        let claim = self.store.get(
            self.claims,
            str_at(volume, "/spec/claimRef/namespace"),
            str_at(volume, "/spec/claimRef/name"),
        );
        if let Some(c) = claim {
            self.sync_claim(&c);
        }
    }

    /// A class appeared or changed: its unbound claims (and, for a default class, claims of
    /// no class) are synced again.
    fn class_changed(&self, class: &Value) {
        let name = str_at(class, "/metadata/name");
        let (claims, _) = self.store.list(self.claims, None);
        for c in claims.iter().filter(|c| {
            annotation(c, ANN_BIND_COMPLETED).is_none()
                && (claim_class(c) == name
                    || c.pointer("/spec/storageClassName")
                        .is_none_or(Value::is_null))
        }) {
            self.sync_claim(c);
        }
    }

    fn resync(&self) {
        for v in self.store.list(self.volumes, None).0 {
            self.sync_volume(&v);
        }
        for c in self.store.list(self.claims, None).0 {
            self.sync_claim(&c);
        }
    }
}

/// Runs the PersistentVolume controller stand-in until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let Some(c) = PvController::new(store) else {
        return;
    };
    loop {
        // Subscribe first, then list: nothing written in between is missed.
        let Ok(start) = c.store.watch_also(
            c.claims.storage,
            None,
            &[c.volumes.storage, c.classes.storage],
        ) else {
            return;
        };
        let mut live = start.live;
        c.resync();
        loop {
            let ev = match live.recv().await {
                Ok(ev) => ev,
                // Fell behind: relist.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            };
            let deleted = ev.kind == EventType::Deleted;
            if ev.storage == c.claims.storage {
                if deleted {
                    c.claim_deleted(&ev.object());
                } else if let Some(claim) = current(&c.store, c.claims, &ev.object()) {
                    c.sync_claim(&claim);
                }
            } else if ev.storage == c.volumes.storage {
                if deleted {
                    c.volume_deleted(&ev.object());
                } else if let Some(volume) = current(&c.store, c.volumes, &ev.object()) {
                    c.sync_volume(&volume);
                }
            } else if ev.storage == c.classes.storage && !deleted {
                c.class_changed(&ev.object());
            }
        }
    }
}

/// The object as stored now (an event may be older than the store); None when it is gone.
pub(crate) fn current(store: &Store, info: &ResourceInfo, obj: &Value) -> Option<Arc<Value>> {
    store.get(
        info,
        str_at(obj, "/metadata/namespace"),
        str_at(obj, "/metadata/name"),
    )
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn pv(name: &str, size: &str, modes: &[&str], extra: Value) -> Arc<Value> {
        let mut v = json!({"metadata": {"name": name, "labels": {"tier": "gold"}},
            "spec": {"capacity": {"storage": size}, "accessModes": modes,
                     "storageClassName": "fast"},
            "status": {"phase": "Available"}});
        merge(&mut v, extra);
        Arc::new(v)
    }

    fn merge(into: &mut Value, extra: Value) {
        match (into, extra) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn pvc(extra: Value) -> Value {
        let mut c = json!({"metadata": {"name": "data", "namespace": "default", "uid": "u1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                     "resources": {"requests": {"storage": "2Gi"}}}});
        merge(&mut c, extra);
        c
    }

    #[rstest]
    #[case::smallest_that_fits(vec![pv("a", "10Gi", &["ReadWriteOnce"], json!({})),
        pv("b", "2Gi", &["ReadWriteOnce"], json!({})), pv("c", "5Gi", &["ReadWriteOnce"], json!({}))],
        json!({}), false, Some("b"))]
    #[case::sizes_in_other_units_compare_by_value(vec![pv("a", "3G", &["ReadWriteOnce"], json!({})),
        pv("b", "2049Mi", &["ReadWriteOnce"], json!({}))], json!({}), false, Some("b"))]
    #[case::too_small_is_skipped(vec![pv("a", "1Gi", &["ReadWriteOnce"], json!({}))],
        json!({}), false, None)]
    #[case::other_class_is_skipped(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"spec": {"storageClassName": "slow"}}))], json!({}), false, None)]
    #[case::missing_access_mode_is_skipped(vec![pv("a", "5Gi", &["ReadOnlyMany"], json!({}))],
        json!({}), false, None)]
    #[case::fewer_access_modes_win_over_a_smaller_size(vec![
        pv("many", "2Gi", &["ReadWriteOnce", "ReadOnlyMany"], json!({})),
        pv("one", "8Gi", &["ReadWriteOnce"], json!({}))], json!({}), false, Some("one"))]
    #[case::other_volume_mode_is_skipped(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"spec": {"volumeMode": "Block"}}))], json!({}), false, None)]
    #[case::selector_must_match_labels(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"metadata": {"labels": {"tier": "bronze"}}})), pv("b", "9Gi", &["ReadWriteOnce"], json!({}))],
        json!({"spec": {"selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold"]}]}}}), false, Some("b"))]
    #[case::claimed_volume_is_skipped(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"spec": {"claimRef": {"namespace": "default", "name": "other"}}}))],
        json!({}), false, None)]
    #[case::released_volume_is_skipped(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"status": {"phase": "Released"}}))], json!({}), false, None)]
    #[case::deleted_volume_is_skipped(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}))], json!({}), false, None)]
    #[case::a_fit_with_fewer_modes_wins_over_a_volume_pre_bound_with_more(vec![
        pv("mine", "5Gi", &["ReadWriteOnce", "ReadOnlyMany"],
            json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "u1"}},
                   "status": {"phase": "Bound"}})),
        pv("fits", "5Gi", &["ReadWriteOnce"], json!({}))], json!({}), false, Some("fits"))]
    #[case::pre_bound_volume_wins_whatever_its_size(vec![pv("fits", "2Gi", &["ReadWriteOnce"], json!({})),
        pv("mine", "1Gi", &["ReadWriteOnce"],
            json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "u1"}},
                   "status": {"phase": "Bound"}}))], json!({}), false, Some("mine"))]
    #[case::pre_bound_to_an_older_claim_of_the_name_is_skipped(vec![pv("a", "5Gi", &["ReadWriteOnce"],
        json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "old"}}}))],
        json!({}), false, None)]
    #[case::delayed_binding_takes_only_a_pre_bound_volume(vec![pv("fits", "5Gi", &["ReadWriteOnce"], json!({}))],
        json!({}), true, None)]
    #[case::delayed_binding_takes_a_pre_bound_volume(vec![pv("mine", "5Gi", &["ReadWriteOnce"],
        json!({"spec": {"claimRef": {"namespace": "default", "name": "data"}}}))],
        json!({}), true, Some("mine"))]
    fn best_match(
        #[case] volumes: Vec<Arc<Value>>,
        #[case] claim: Value,
        #[case] delay_binding: bool,
        #[case] want: Option<&str>,
    ) {
        let claim = pvc(claim);
        let got = find_best_match(&claim, &volumes, delay_binding)
            .map(|v| str_at(v, "/metadata/name").to_string());
        assert_eq!(got.as_deref(), want);
    }

    #[rstest]
    #[case::fits(json!({}), Ok(()))]
    #[case::being_deleted(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        Err("the volume is marked for deletion \"a\"".to_string()))]
    #[case::too_small(json!({"spec": {"capacity": {"storage": "1Gi"}}}),
        Err("requested PV is too small".to_string()))]
    #[case::other_class(json!({"spec": {"storageClassName": "slow"}}),
        Err("storageClassName does not match".to_string()))]
    #[case::other_volume_mode(json!({"spec": {"volumeMode": "Block"}}),
        Err("incompatible volumeMode".to_string()))]
    #[case::other_access_mode(json!({"spec": {"accessModes": ["ReadOnlyMany"]}}),
        Err("incompatible accessMode".to_string()))]
    fn a_named_volume_satisfies_the_claim(#[case] extra: Value, #[case] want: Result<(), String>) {
        let volume = pv("a", "5Gi", &["ReadWriteOnce"], extra);
        assert_eq!(check_volume_satisfies_claim(&volume, &pvc(json!({}))), want);
    }

    #[test]
    fn binding_a_free_volume_marks_it_bound_by_the_controller() {
        let volume = pv("a", "5Gi", &["ReadWriteOnce"], json!({}));
        let claim = pvc(json!({"metadata": {"resourceVersion": "7"}}));
        let mut got = bind_volume_to_claim(&volume, &claim).expect("changes");
        if let Some(t) = got.pointer_mut("/status/lastPhaseTransitionTime") {
            *t = json!("TIME");
        }
        assert_eq!(
            got,
            json!({"metadata": {"name": "a", "labels": {"tier": "gold"},
                    "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "fast",
                    "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default",
                        "name": "data", "uid": "u1", "apiVersion": "v1", "resourceVersion": "7"}},
                "status": {"phase": "Bound", "lastPhaseTransitionTime": "TIME"}})
        );
        assert_eq!(bind_volume_to_claim(&got, &claim), None);
    }

    #[test]
    fn a_claim_that_named_its_volume_is_not_marked_bound_by_the_controller() {
        let volume = pv("a", "5Gi", &["ReadWriteOnce"], json!({}));
        let claim = pvc(json!({"spec": {"volumeName": "a"}}));
        let got = bind_claim_to_volume(&claim, &volume).expect("changes");
        assert_eq!(
            (got.pointer("/metadata/annotations"), got.get("status")),
            (
                Some(&json!({"pv.kubernetes.io/bind-completed": "yes"})),
                Some(&json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                             "capacity": {"storage": "5Gi"}}))
            )
        );
        assert_eq!(bind_claim_to_volume(&got, &volume), None);
    }

    /// A resize leaves a bound claim's capacity above its volume's until the volume grows:
    /// syncing the binding again must not shrink it back.
    #[test]
    fn a_bound_claims_capacity_is_not_reset_to_its_volumes() {
        let volume = pv("a", "5Gi", &["ReadWriteOnce"], json!({}));
        let claim = pvc(json!({"spec": {"volumeName": "a"},
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                       "capacity": {"storage": "8Gi"}}}));
        assert_eq!(bind_claim_to_volume(&claim, &volume), None);
    }

    #[rstest]
    #[case::bound_by_the_controller_loses_the_claim_ref_and_annotation(
        json!({"metadata": {"name": "a", "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
               "spec": {"claimRef": {"name": "data", "namespace": "default", "uid": "u1"}},
               "status": {"phase": "Bound"}}),
        json!({"metadata": {"name": "a"}, "spec": {}, "status": {"phase": "Available"}}))]
    #[case::pre_bound_by_the_user_keeps_the_claim_name(
        json!({"metadata": {"name": "a"},
               "spec": {"claimRef": {"name": "data", "namespace": "default", "uid": "u1"}},
               "status": {"phase": "Bound"}}),
        json!({"metadata": {"name": "a"},
               "spec": {"claimRef": {"name": "data", "namespace": "default", "uid": ""}},
               "status": {"phase": "Available"}}))]
    fn unbinding(#[case] volume: Value, #[case] want: Value) {
        let mut got = unbind_volume(&volume);
        if let Some(status) = got.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("lastPhaseTransitionTime");
        }
        assert_eq!(got, want);
    }
}

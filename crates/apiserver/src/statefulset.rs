//! The StatefulSet controller stand-in: pods with stable names and claims for each apps/v1
//! StatefulSet, made, replaced and removed in ordinal order, and the StatefulSet's status,
//! as kube-controller-manager's does. On with the other workload controllers.
//!
//! Pod `i` of StatefulSet `web` is `web-i` (ordinals from `spec.ordinals.start`, 0 by
//! default), with `hostname` its name, `subdomain` the `serviceName`, the template's labels
//! plus `controller-revision-hash` (the name of its template's ControllerRevision),
//! `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`, and one volume
//! per `volumeClaimTemplates` entry naming claim `<template>-web-i`, which is created (with
//! the selector's labels) before the pod.
//!
//! `podManagementPolicy: OrderedReady` makes pod `i` only when the pods before it are
//! Running and Ready (for `minReadySeconds`, when set), and removes surplus pods from the highest ordinal, one at a time,
//! once the kept ones are Running and Ready and the one before has gone. `Parallel` makes
//! and removes them all at once. A changed template rolls out under
//! `updateStrategy.type: RollingUpdate` from the highest ordinal down to `partition`, one
//! pod at a time, each replaced once the one before is Running and Ready; pods below the
//! partition are made from the current revision. Failed pods are deleted and made again.
//! Orphan pods named `<set>-<ordinal>` that the selector selects are adopted; own pods it
//! no longer selects are released.
//!
//! Status: `replicas` (pods made), `readyReplicas`, `availableReplicas` (ready for
//! `minReadySeconds`), `currentReplicas` and `updatedReplicas` (pods of the current and the
//! update revision), `currentRevision`, `updateRevision`, `collisionCount` and
//! `observedGeneration`; when a rolling update has reached every pod the update revision
//! becomes the current one, which is what `kubectl rollout status` waits for.
//!
//! `persistentVolumeClaimRetentionPolicy` decides who owns the claims (the garbage collector
//! deletes them with their owner): `whenDeleted: Delete` makes the StatefulSet their owner,
//! `whenScaled: Delete` makes a pod removed by a scale-down the owner of its claims; Retain
//! leaves them unowned.
//!
//! Where this differs from upstream: `maxUnavailable` (alpha) is not honoured.
//!
//! Upstream: pkg/controller/statefulset (StatefulSetControl's updateStatefulSet,
//! stateful_set_utils.go's newVersionedStatefulSetPod, getPersistentVolumeClaims); API
//! defaults from pkg/apis/apps/v1/defaults.go.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission;
use crate::controller::{
    self, claim_pods, controller_ref, is_available, is_ready, key_of, owner_reference, owner_refs,
    pod_from_template, terminating, with_owner_refs, Key, Reconcile,
};
use crate::history::{self, CONTROLLER_REVISION_HASH};
use crate::pv_controller::str_at;
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store, WatchEvent};
use crate::validation::{FieldError, FieldErrorKind};

/// The Events' `source.component`, as upstream's controller names itself.
pub const COMPONENT: &str = "statefulset-controller";

/// The label naming a StatefulSet pod.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

/// The label carrying a StatefulSet pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

fn set_default(map: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// API defaults of a StatefulSet: `replicas: 1`, `podManagementPolicy: OrderedReady`,
/// `updateStrategy` RollingUpdate with `partition: 0`, `revisionHistoryLimit: 10`,
/// `persistentVolumeClaimRetentionPolicy` Retain/Retain, and each claim template's
/// apiVersion, kind, `volumeMode: Filesystem` and `status.phase: Pending`.
pub fn set_defaults(info: &ResourceInfo, obj: &mut Value) {
    if (info.group, info.kind) != ("apps", "StatefulSet") {
        return;
    }
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    if let Some(p) = spec
        .get_mut("persistentVolumeClaimRetentionPolicy")
        .and_then(Value::as_object_mut)
    {
        set_default(p, "whenDeleted", json!("Retain"));
        set_default(p, "whenScaled", json!("Retain"));
    }
    set_default(spec, "updateStrategy", json!({}));
    if let Some(s) = spec
        .get_mut("updateStrategy")
        .and_then(Value::as_object_mut)
    {
        set_default(s, "type", json!("RollingUpdate"));
        if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            set_default(s, "rollingUpdate", json!({}));
            if let Some(ru) = s.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                set_default(ru, "partition", json!(0));
            }
        }
    }
    for claim in spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        set_default(claim, "apiVersion", json!("v1"));
        set_default(claim, "kind", json!("PersistentVolumeClaim"));
        set_default(claim, "spec", json!({}));
        if let Some(s) = claim.get_mut("spec").and_then(Value::as_object_mut) {
            set_default(s, "volumeMode", json!("Filesystem"));
        }
        set_default(claim, "status", json!({}));
        if let Some(s) = claim.get_mut("status").and_then(Value::as_object_mut) {
            set_default(s, "phase", json!("Pending"));
        }
    }
}

/// The spec fields of a StatefulSet an update may change.
const UPDATABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// The checks upstream's validation makes on a StatefulSet that the controller relies on:
/// `spec.selector` required and not empty, selecting the template's labels.
///
/// Upstream: pkg/apis/apps/validation (ValidateStatefulSetSpec).
pub fn validate(info: &ResourceInfo, set: &Value) -> Vec<FieldError> {
    if (info.group, info.kind) != ("apps", "StatefulSet") {
        return Vec::new();
    }
    crate::daemonset::validate_selector(set, "statefulset")
}

/// [`validate`], and only `replicas`, `ordinals`, `template`, `updateStrategy`,
/// `revisionHistoryLimit`, `persistentVolumeClaimRetentionPolicy` and `minReadySeconds` of
/// the spec may change.
///
/// Upstream: pkg/apis/apps/validation (ValidateStatefulSetUpdate).
pub fn validate_update(info: &ResourceInfo, old: &Value, set: &Value) -> Vec<FieldError> {
    let mut errs = validate(info, set);
    if (info.group, info.kind) != ("apps", "StatefulSet") {
        return errs;
    }
    let fixed = |v: &Value| -> serde_json::Map<String, Value> {
        v.get("spec")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(k, v)| !UPDATABLE.contains(&k.as_str()) && !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    if fixed(old) != fixed(set) {
        errs.push(FieldError {
            field: "spec".into(),
            kind: FieldErrorKind::Forbidden,
            detail: "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden".into(),
        });
    }
    errs
}

/// The ordinal of a pod named `<set>-<ordinal>`.
pub fn ordinal_of(set_name: &str, pod: &Value) -> Option<usize> {
    let digits = str_at(pod, "/metadata/name")
        .strip_prefix(set_name)?
        .strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Running with a Ready condition (upstream's isRunningAndReady).
fn running_and_ready(pod: &Value) -> bool {
    str_at(pod, "/status/phase") == "Running" && is_ready(pod)
}

/// The claim of template `claim_template` for pod `ordinal` of the set.
pub fn claim_name(claim_template: &Value, set_name: &str, ordinal: usize) -> String {
    format!(
        "{}-{set_name}-{ordinal}",
        str_at(claim_template, "/metadata/name")
    )
}

fn claim_templates(set: &Value) -> Vec<Value> {
    set.pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The claims pod `ordinal` uses (upstream's getPersistentVolumeClaims): each template with
/// its name, the set's namespace and the selector's `matchLabels` added to its labels.
pub fn claims_for(set: &Value, ordinal: usize) -> Vec<Value> {
    let set_name = str_at(set, "/metadata/name");
    claim_templates(set)
        .into_iter()
        .map(|t| {
            let mut claim = t.clone();
            if !claim.get("metadata").is_some_and(Value::is_object) {
                claim["metadata"] = json!({});
            }
            claim["metadata"]["name"] = json!(claim_name(&t, set_name, ordinal));
            claim["metadata"]["namespace"] = json!(str_at(set, "/metadata/namespace"));
            if !claim
                .pointer("/metadata/labels")
                .is_some_and(Value::is_object)
            {
                claim["metadata"]["labels"] = json!({});
            }
            for (k, v) in set
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                claim["metadata"]["labels"][k] = v.clone();
            }
            claim["apiVersion"] = json!("v1");
            claim["kind"] = json!("PersistentVolumeClaim");
            if let Some(m) = claim.as_object_mut() {
                m.remove("status");
            }
            claim
        })
        .collect()
}

/// The owner references a claim of pod `ordinal` carries under the set's
/// `persistentVolumeClaimRetentionPolicy` (upstream's updateClaimOwnerRefForSetAndPod), from
/// its references `refs`: the set's when `whenDeleted: Delete`, unless the pod is beyond
/// the `kept` ordinals and `whenScaled: Delete`, when it is the pod's instead (so that the garbage
/// collector deletes the claim with its owner). Other owners are kept.
pub fn claim_owner_refs(
    set: &Value,
    pod: Option<&Value>,
    ordinal: usize,
    kept: &Range<usize>,
    refs: &[Value],
) -> Vec<Value> {
    let delete = |when: &str| {
        str_at(
            set,
            &format!("/spec/persistentVolumeClaimRetentionPolicy/{when}"),
        ) == "Delete"
    };
    let scaled_down = !kept.contains(&ordinal);
    let pod_owns = scaled_down && delete("whenScaled");
    let set_owns = delete("whenDeleted") && !pod_owns;
    let set_ref = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "name": str_at(set, "/metadata/name"), "uid": str_at(set, "/metadata/uid")});
    let pod_ref = pod.map(|p| {
        json!({"apiVersion": "v1", "kind": "Pod", "name": str_at(p, "/metadata/name"),
               "uid": str_at(p, "/metadata/uid")})
    });
    let mut wanted: Vec<Value> = Vec::new();
    if set_owns {
        wanted.push(set_ref.clone());
    }
    if let Some(r) = pod_ref.as_ref().filter(|_| pod_owns) {
        wanted.push(r.clone());
    }
    let uid = |r: &Value| str_at(r, "/uid").to_string();
    let managed = [Some(&set_ref), pod_ref.as_ref()];
    let mut out: Vec<Value> = refs
        .iter()
        .filter(|r| {
            let u = uid(r);
            !managed.iter().flatten().any(|m| uid(m) == u) || wanted.iter().any(|w| uid(w) == u)
        })
        .cloned()
        .collect();
    for w in wanted {
        if !out.iter().any(|r| uid(r) == uid(&w)) {
            out.push(w);
        }
    }
    out
}

/// Pod `ordinal` of the set made from `template` (a revision's), named and labelled for
/// its identity, with its claims as volumes (upstream's newVersionedStatefulSetPod).
pub fn new_pod(set: &Value, template: &Value, revision: &str, ordinal: usize) -> Value {
    let set_name = str_at(set, "/metadata/name");
    let pod_name = format!("{set_name}-{ordinal}");
    let owner = json!({"metadata": set.get("metadata").cloned().unwrap_or(Value::Null),
                       "spec": {"template": template}});
    let mut pod = pod_from_template(&owner, owner_reference(set, "apps/v1", "StatefulSet"));
    if let Some(m) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("generateName");
        m.insert("name".into(), json!(pod_name));
        let labels = m.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        labels[CONTROLLER_REVISION_HASH] = json!(revision);
        labels[POD_NAME_LABEL] = json!(pod_name);
        labels[POD_INDEX_LABEL] = json!(ordinal.to_string());
    }
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = json!({});
    }
    pod["spec"]["hostname"] = json!(pod_name);
    let service = str_at(set, "/spec/serviceName");
    if !service.is_empty() {
        pod["spec"]["subdomain"] = json!(service);
    }
    let templates = claim_templates(set);
    if !templates.is_empty() {
        let mut volumes: Vec<Value> = templates
            .iter()
            .map(|t| {
                json!({"name": str_at(t, "/metadata/name"),
                       "persistentVolumeClaim": {"claimName": claim_name(t, set_name, ordinal)}})
            })
            .collect();
        let claimed: BTreeSet<&str> = templates
            .iter()
            .map(|t| str_at(t, "/metadata/name"))
            .collect();
        let others: Vec<Value> = pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| !claimed.contains(str_at(v, "/name")))
            .cloned()
            .collect();
        volumes.extend(others);
        pod["spec"]["volumes"] = Value::Array(volumes);
    }
    pod
}

/// The pod template a revision holds (its data's `spec.template` without the patch
/// directive).
pub fn revision_template(rev: &Value) -> Value {
    let mut t = rev
        .pointer("/data/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(m) = t.as_object_mut() {
        m.remove("$patch");
    }
    t
}

fn revision_of(pod: &Value) -> &str {
    pod.pointer("/metadata/labels")
        .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A StatefulSet's status from its pods (not terminating or terminating alike, as upstream
/// counts them) and its revisions (upstream's updateStatefulSet status and
/// completeRollingUpdate).
pub fn calculate_status(
    set: &Value,
    pods: &[&Value],
    current: &str,
    update: &str,
    collision_count: i64,
) -> Value {
    let min_ready = set
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let created = pods
        .iter()
        .filter(|p| !str_at(p, "/status/phase").is_empty())
        .count();
    let ready = pods.iter().filter(|p| running_and_ready(p)).count();
    let available = pods
        .iter()
        .filter(|p| running_and_ready(p) && is_available(p, min_ready))
        .count();
    let counted: Vec<&&Value> = pods
        .iter()
        .filter(|p| !str_at(p, "/status/phase").is_empty() && !terminating(p))
        .collect();
    let mut current_replicas = counted.iter().filter(|p| revision_of(p) == current).count();
    let updated = counted.iter().filter(|p| revision_of(p) == update).count();
    let mut current = current;
    if str_at(set, "/spec/updateStrategy/type") == "RollingUpdate"
        && updated == created
        && ready == created
    {
        current_replicas = updated;
        current = update;
    }
    let mut status = set
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    status.insert("replicas".into(), json!(created));
    status.insert("availableReplicas".into(), json!(available));
    // These are left out at zero, as upstream's omitempty does.
    for (field, n) in [
        ("readyReplicas", ready),
        ("currentReplicas", current_replicas),
        ("updatedReplicas", updated),
    ] {
        if n == 0 {
            status.remove(field);
        } else {
            status.insert(field.into(), json!(n));
        }
    }
    status.insert("currentRevision".into(), json!(current));
    status.insert("updateRevision".into(), json!(update));
    status.insert("collisionCount".into(), json!(collision_count));
    status.insert(
        "observedGeneration".into(),
        set.pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1)),
    );
    Value::Object(status)
}

struct StatefulSetController {
    store: Arc<Store>,
    statefulsets: &'static ResourceInfo,
    pods: &'static ResourceInfo,
    claims: &'static ResourceInfo,
    revisions: &'static ResourceInfo,
    priority_classes: &'static ResourceInfo,
    storage_classes: &'static ResourceInfo,
    recorder: Recorder,
}

impl StatefulSetController {
    /// The set's pods by ordinal; pods whose name carries no ordinal are left out.
    fn pods_of(&self, set: &Value) -> BTreeMap<usize, Arc<Value>> {
        let (ns, name, uid) = (
            str_at(set, "/metadata/namespace"),
            str_at(set, "/metadata/name"),
            str_at(set, "/metadata/uid"),
        );
        self.store
            .list(self.pods, Some(ns))
            .0
            .into_iter()
            .filter(|p| controller_ref(p).is_some_and(|r| str_at(r, "/uid") == uid))
            .filter_map(|p| ordinal_of(name, &p).map(|i| (i, p)))
            .collect()
    }

    fn event(&self, set: &Value, kind: &str, reason: &str, message: &str) {
        self.recorder
            .event(set, "StatefulSet", kind, reason, message);
    }

    /// Creates the claims of pod `ordinal` that are missing; false when one could not be
    /// made.
    fn create_claims(&self, set: &Value, ordinal: usize, kept: &Range<usize>) -> bool {
        let ns = str_at(set, "/metadata/namespace");
        let set_name = str_at(set, "/metadata/name");
        let classes = self.store.list(self.storage_classes, None).0;
        for mut claim in claims_for(set, ordinal) {
            let claim_name = str_at(&claim, "/metadata/name").to_string();
            if self.store.get(self.claims, ns, &claim_name).is_some() {
                continue;
            }
            let refs = claim_owner_refs(set, None, ordinal, kept, &[]);
            if !refs.is_empty() {
                claim["metadata"]["ownerReferences"] = Value::Array(refs);
            }
            // The defaults a client's create would get from admission.
            admission::default_storage_spec(self.claims, &mut claim);
            admission::default_storage_phase(self.claims, &mut claim);
            admission::default_claim_class(&mut claim, &classes);
            match self.store.create(self.claims, ns, claim, false) {
                Ok(_) => self.event(
                    set,
                    "Normal",
                    "SuccessfulCreate",
                    &format!(
                        "create Claim {claim_name} Pod {set_name}-{ordinal} in StatefulSet {set_name} success"
                    ),
                ),
                Err(e) if e.code == 409 => {}
                Err(e) => {
                    self.event(
                        set,
                        "Warning",
                        "FailedCreate",
                        &format!(
                            "create Claim {claim_name} for Pod {set_name}-{ordinal} in StatefulSet {set_name} failed error: {}",
                            e.message
                        ),
                    );
                    return false;
                }
            }
        }
        true
    }

    /// Brings the owner references of pod `ordinal`'s claims in line with the retention
    /// policy ([`claim_owner_refs`]).
    fn update_claim_owners(&self, set: &Value, pod: &Value, ordinal: usize, kept: &Range<usize>) {
        let ns = str_at(set, "/metadata/namespace");
        for claim in claims_for(set, ordinal) {
            let name = str_at(&claim, "/metadata/name");
            let Some(cur) = self.store.get(self.claims, ns, name) else {
                continue;
            };
            let refs = owner_refs(&cur);
            let want = claim_owner_refs(set, Some(pod), ordinal, kept, &refs);
            if want == refs {
                continue;
            }
            let written = self.store.update(self.claims, ns, name, false, |cur| {
                let want = claim_owner_refs(set, Some(pod), ordinal, kept, &owner_refs(cur));
                Ok(with_owner_refs(cur, want))
            });
            if let Err(e) = written {
                tracing::debug!(claim = %name, error = %e.message,
                    "statefulset controller: claim owners not written");
            }
        }
    }

    /// Creates pod `ordinal` (its claims first); false when it could not be made.
    fn create_pod(
        &self,
        set: &Value,
        template: &Value,
        revision: &str,
        ordinal: usize,
        kept: &Range<usize>,
    ) -> bool {
        if !self.create_claims(set, ordinal, kept) {
            return false;
        }
        let ns = str_at(set, "/metadata/namespace");
        let set_name = str_at(set, "/metadata/name");
        let mut pod = new_pod(set, template, revision, ordinal);
        admission::default_pod(&mut pod);
        let classes = self.store.list(self.priority_classes, None).0;
        let created = admission::admit_priority(self.pods, &mut pod, &classes)
            .and_then(|()| self.store.create(self.pods, ns, pod, false));
        match created {
            Ok(_) => {
                self.event(
                    set,
                    "Normal",
                    "SuccessfulCreate",
                    &format!(
                        "create Pod {set_name}-{ordinal} in StatefulSet {set_name} successful"
                    ),
                );
                true
            }
            Err(e) => {
                self.event(
                    set,
                    "Warning",
                    "FailedCreate",
                    &format!(
                        "create Pod {set_name}-{ordinal} in StatefulSet {set_name} failed error: {}",
                        e.message
                    ),
                );
                false
            }
        }
    }

    fn delete_pod(&self, set: &Value, pod: &Value) {
        let ns = str_at(set, "/metadata/namespace");
        let set_name = str_at(set, "/metadata/name");
        let pod_name = str_at(pod, "/metadata/name");
        let opts = DeleteOptions {
            uid: Some(str_at(pod, "/metadata/uid")),
            ..DeleteOptions::default()
        };
        match self.store.delete(self.pods, ns, pod_name, opts) {
            Ok(_) => self.event(
                set,
                "Normal",
                "SuccessfulDelete",
                &format!("delete Pod {pod_name} in StatefulSet {set_name} successful"),
            ),
            Err(e) => tracing::debug!(pod = %pod_name, error = %e.message,
                "statefulset controller: pod not deleted"),
        }
    }

    /// One step towards the set's replicas and template (upstream's updateStatefulSet):
    /// what it writes, in order, stopping where OrderedReady must wait.
    fn manage(&self, set: &Value, current: &Value, update: &Value) {
        let replicas = usize::try_from(
            set.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(0),
        )
        .unwrap_or(0);
        let partition = usize::try_from(
            set.pointer("/spec/updateStrategy/rollingUpdate/partition")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .max(0),
        )
        .unwrap_or(0);
        // The ordinals of the pods to keep: `spec.ordinals.start` onwards.
        let start = usize::try_from(
            set.pointer("/spec/ordinals/start")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .max(0),
        )
        .unwrap_or(0);
        let kept = start..start.saturating_add(replicas);
        let monotonic = str_at(set, "/spec/podManagementPolicy") != "Parallel";
        let min_ready = set
            .pointer("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let rolling = str_at(set, "/spec/updateStrategy/type") == "RollingUpdate";
        let (current_name, update_name) = (
            str_at(current, "/metadata/name"),
            str_at(update, "/metadata/name"),
        );
        let (current_template, update_template) =
            (revision_template(current), revision_template(update));
        let pods = self.pods_of(set);
        // Before any pod goes: a condemned pod's claims then go with it when the policy
        // says so.
        for (ordinal, pod) in &pods {
            self.update_claim_owners(set, pod, *ordinal, &kept);
        }
        for ordinal in kept.clone() {
            match pods.get(&ordinal) {
                None => {
                    // Below the partition a pod is made as the current revision has it.
                    let (template, revision) = if rolling && ordinal < kept.start + partition {
                        (&current_template, current_name)
                    } else {
                        (&update_template, update_name)
                    };
                    let made = self.create_pod(set, template, revision, ordinal, &kept);
                    if monotonic || !made {
                        return;
                    }
                }
                Some(pod) if str_at(pod, "/status/phase") == "Failed" && !terminating(pod) => {
                    // Made again by the sync its deletion brings.
                    self.delete_pod(set, pod);
                    if monotonic {
                        return;
                    }
                }
                // The next pod waits until this one has been ready for `minReadySeconds`
                // (the set is looked at again then).
                Some(pod)
                    if monotonic
                        && (terminating(pod)
                            || !running_and_ready(pod)
                            || !is_available(pod, min_ready)) =>
                {
                    return;
                }
                Some(_) => {}
            }
        }
        let condemned: Vec<&Arc<Value>> = pods
            .iter()
            .filter(|(i, _)| !kept.contains(i))
            .map(|(_, p)| p)
            .rev()
            .collect();
        // Under OrderedReady the loop above returned unless every kept pod is Running and
        // Ready; the highest surplus pod then goes, ready or not (upstream's first unhealthy
        // pod is that one when any is).
        for pod in &condemned {
            if terminating(pod) {
                if monotonic {
                    return;
                }
                continue;
            }
            self.delete_pod(set, pod);
            if monotonic {
                return;
            }
        }
        if !condemned.is_empty() || !rolling {
            return;
        }
        for ordinal in (kept.start + partition..kept.end).rev() {
            let Some(pod) = pods.get(&ordinal) else {
                return;
            };
            if revision_of(pod) != update_name && !terminating(pod) {
                self.delete_pod(set, pod);
                return;
            }
            if !running_and_ready(pod) {
                return;
            }
        }
    }

    /// Brings one StatefulSet a step towards its replicas and template and writes its
    /// status. Returns when to look again for a pod that is ready but not yet available.
    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        let set = self.store.get(self.statefulsets, ns, name)?;
        if terminating(&set) {
            return None;
        }
        let uid = str_at(&set, "/metadata/uid").to_string();
        // Only pods named as its members (`<set>-<ordinal>`) are adopted.
        claim_pods(&self.store, self.pods, &set, "StatefulSet", |p| {
            ordinal_of(name, p).is_some()
        });
        let labels = set
            .pointer("/spec/template/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let history = match history::construct_history(
            &self.store,
            self.revisions,
            &set,
            "StatefulSet",
            &labels,
        ) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(statefulset = %name, error = %e.message,
                    "statefulset controller: revisions not written");
                return None;
            }
        };
        let status_current = str_at(&set, "/status/currentRevision");
        let current = history
            .revisions
            .iter()
            .find(|r| !status_current.is_empty() && str_at(r, "/metadata/name") == status_current)
            .cloned()
            .unwrap_or_else(|| history.update.clone());
        self.manage(&set, &current, &history.update);
        // Counted again after the writes, so that the status says what is there now.
        let pods = self.pods_of(&set);
        let pods: Vec<&Value> = pods.values().map(|p| &**p).collect();
        let (current_name, update_name) = (
            str_at(&current, "/metadata/name"),
            str_at(&history.update, "/metadata/name"),
        );
        let status = calculate_status(
            &set,
            &pods,
            current_name,
            update_name,
            history.collision_count,
        );
        // Revisions in use: the current and update ones, and any a pod still runs.
        let live: Vec<&str> = [
            str_at(&status, "/currentRevision"),
            str_at(&status, "/updateRevision"),
        ]
        .into_iter()
        .chain(pods.iter().map(|p| revision_of(p)))
        .collect();
        history::truncate_history(&self.store, self.revisions, &set, &history.revisions, &live);
        let written =
            controller::update_same(&self.store, self.statefulsets, ns, name, &uid, |cur| {
                let mut new = cur.clone();
                new["status"] = status.clone();
                Ok(new)
            });
        if let Err(e) = written {
            tracing::debug!(statefulset = %name, error = %e.message,
                "statefulset controller: status not written");
        }
        controller::until_available(&set, pods.iter().map(|p| &**p))
    }
}

/// Runs the StatefulSet controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (
        Some(statefulsets),
        Some(pods),
        Some(claims),
        Some(revisions),
        Some(priority_classes),
        Some(storage_classes),
    ) = (
        resources::lookup("apps", "v1", "statefulsets"),
        resources::lookup("", "v1", "pods"),
        resources::lookup("", "v1", "persistentvolumeclaims"),
        resources::lookup("apps", "v1", "controllerrevisions"),
        resources::lookup("scheduling.k8s.io", "v1", "priorityclasses"),
        resources::lookup("storage.k8s.io", "v1", "storageclasses"),
    )
    else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let c = StatefulSetController {
        store,
        statefulsets,
        pods,
        claims,
        revisions,
        priority_classes,
        storage_classes,
        recorder,
    };
    controller::run(&c.store.clone(), &c).await;
}

impl Reconcile for StatefulSetController {
    fn owners(&self) -> &'static ResourceInfo {
        self.statefulsets
    }

    fn relist(&self) -> Vec<Key> {
        self.store
            .list(self.statefulsets, None)
            .0
            .iter()
            .map(|set| key_of(set))
            .collect()
    }

    fn keys_of(&self, ev: &WatchEvent, keys: &mut BTreeSet<Key>) {
        if ev.storage == self.statefulsets.storage && ev.kind != EventType::Deleted {
            keys.insert(key_of(&ev.object()));
        } else if ev.storage == self.pods.storage {
            let pod = ev.object();
            if let Some(r) = controller_ref(&pod).filter(|r| {
                str_at(r, "/kind") == "StatefulSet" && str_at(r, "/apiVersion") == "apps/v1"
            }) {
                keys.insert((
                    str_at(&pod, "/metadata/namespace").to_string(),
                    str_at(r, "/name").to_string(),
                ));
            }
        }
    }

    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        StatefulSetController::sync(self, ns, name)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn set() -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1", "generation": 2},
            "spec": {"replicas": 3, "serviceName": "nginx",
                     "selector": {"matchLabels": {"app": "web"}},
                     "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                           "volumes": [{"name": "www", "emptyDir": {}},
                                                       {"name": "cfg", "emptyDir": {}}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "www",
                                                            "labels": {"tier": "db"}},
                         "spec": {"accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "1Gi"}}},
                         "status": {"phase": "Pending"}}]}})
    }

    #[rstest]
    #[case::ordinal("web-12", Some(12))]
    #[case::zero("web-0", Some(0))]
    #[case::other_set("webx-1", None)]
    #[case::no_ordinal("web-", None)]
    #[case::not_digits("web-1a", None)]
    #[case::set_of_a_longer_name("web-db-1", None)]
    fn ordinals_from_pod_names(#[case] name: &str, #[case] want: Option<usize>) {
        assert_eq!(
            ordinal_of("web", &json!({"metadata": {"name": name}})),
            want
        );
    }

    #[test]
    fn pod_has_identity_labels_and_claim_volumes() {
        let set = set();
        let template = set["spec"]["template"].clone();
        assert_eq!(
            new_pod(&set, &template, "web-abc", 1),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1",
                    "labels": {"app": "web", CONTROLLER_REVISION_HASH: "web-abc",
                               POD_NAME_LABEL: "web-1", POD_INDEX_LABEL: "1"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                        "name": "web", "uid": "u1", "controller": true,
                        "blockOwnerDeletion": true}]},
                "spec": {"containers": [{"name": "c", "image": "nginx"}],
                         "hostname": "web-1", "subdomain": "nginx",
                         "volumes": [
                             {"name": "www", "persistentVolumeClaim": {"claimName": "www-web-1"}},
                             {"name": "cfg", "emptyDir": {}}]}})
        );
    }

    #[test]
    fn claims_carry_the_selector_labels() {
        assert_eq!(
            claims_for(&set(), 2),
            vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "www-web-2", "namespace": "default",
                             "labels": {"tier": "db", "app": "web"}},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}})]
        );
    }

    fn with_policy(when_deleted: &str, when_scaled: &str) -> Value {
        let mut set = set();
        set["spec"]["persistentVolumeClaimRetentionPolicy"] =
            json!({"whenDeleted": when_deleted, "whenScaled": when_scaled});
        set
    }

    fn set_ref() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1"})
    }

    fn pod_ref() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "name": "web-2", "uid": "p2"})
    }

    #[rstest]
    #[case::retain_retain_owns_nothing("Retain", "Retain", 2, vec![set_ref(), pod_ref()], vec![])]
    #[case::when_deleted_delete_the_set_owns(
        "Delete", "Retain", 3, vec![], vec![set_ref()])]
    #[case::when_deleted_delete_the_set_owns_even_scaled_down(
        "Delete", "Retain", 2, vec![], vec![set_ref()])]
    #[case::when_scaled_delete_the_scaled_down_pod_owns(
        "Retain", "Delete", 2, vec![], vec![pod_ref()])]
    #[case::when_scaled_delete_a_pod_in_range_owns_nothing(
        "Retain", "Delete", 3, vec![pod_ref()], vec![])]
    #[case::both_delete_scaled_down_goes_from_set_to_pod(
        "Delete", "Delete", 2, vec![set_ref()], vec![pod_ref()])]
    #[case::both_delete_in_range_the_set_owns(
        "Delete", "Delete", 3, vec![pod_ref()], vec![set_ref()])]
    #[case::other_owners_are_kept(
        "Delete", "Retain", 3,
        vec![json!({"kind": "Other", "uid": "x"})],
        vec![json!({"kind": "Other", "uid": "x"}), set_ref()])]
    fn claim_owners_follow_the_retention_policy(
        #[case] when_deleted: &str,
        #[case] when_scaled: &str,
        #[case] replicas: usize,
        #[case] refs: Vec<Value>,
        #[case] want: Vec<Value>,
    ) {
        let pod = json!({"metadata": {"name": "web-2", "uid": "p2"}});
        assert_eq!(
            claim_owner_refs(
                &with_policy(when_deleted, when_scaled),
                Some(&pod),
                2,
                &(0..replicas),
                &refs
            ),
            want
        );
    }

    fn pod(name: &str, revision: &str, phase: &str, ready: bool) -> Value {
        let conditions = if ready {
            json!([{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2000-01-01T00:00:00Z"}])
        } else {
            json!([])
        };
        json!({"metadata": {"name": name, "labels": {CONTROLLER_REVISION_HASH: revision}},
               "status": {"phase": phase, "conditions": conditions}})
    }

    #[test]
    fn status_mid_rollout_keeps_the_current_revision() {
        let pods = [
            pod("web-0", "web-r1", "Running", true),
            pod("web-1", "web-r1", "Running", true),
            pod("web-2", "web-r2", "Pending", false),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        assert_eq!(
            calculate_status(&set(), &refs, "web-r1", "web-r2", 0),
            json!({"replicas": 3, "availableReplicas": 2, "readyReplicas": 2,
                   "currentReplicas": 2, "updatedReplicas": 1,
                   "currentRevision": "web-r1", "updateRevision": "web-r2",
                   "collisionCount": 0, "observedGeneration": 2})
        );
    }

    #[test]
    fn status_of_a_finished_rollout_makes_the_update_revision_current() {
        let pods = [
            pod("web-0", "web-r2", "Running", true),
            pod("web-1", "web-r2", "Running", true),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        assert_eq!(
            calculate_status(&set(), &refs, "web-r1", "web-r2", 0),
            json!({"replicas": 2, "availableReplicas": 2, "readyReplicas": 2,
                   "currentReplicas": 2, "updatedReplicas": 2,
                   "currentRevision": "web-r2", "updateRevision": "web-r2",
                   "collisionCount": 0, "observedGeneration": 2})
        );
    }

    #[rstest]
    #[case::replicas(json!({"replicas": 5}), true)]
    #[case::template(json!({"template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": []}}}), true)]
    #[case::update_strategy(json!({"updateStrategy": {"type": "OnDelete"}}), true)]
    #[case::min_ready_seconds(json!({"minReadySeconds": 3}), true)]
    #[case::retention_policy(
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}), true)]
    #[case::service_name(json!({"serviceName": "other"}), false)]
    #[case::volume_claim_templates(json!({"volumeClaimTemplates": []}), false)]
    #[case::pod_management_policy(json!({"podManagementPolicy": "Parallel"}), false)]
    fn updatable_spec_fields(#[case] change: Value, #[case] allowed: bool) {
        let info =
            resources::lookup("apps", "v1", "statefulsets").unwrap_or_else(|| unreachable!());
        let old = set();
        let mut new = old.clone();
        for (k, v) in change.as_object().into_iter().flatten() {
            new["spec"][k] = v.clone();
        }
        let got: Vec<String> = validate_update(info, &old, &new)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        let want: Vec<String> = if allowed {
            Vec::new()
        } else {
            vec!["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden".to_string()]
        };
        assert_eq!(got, want);
    }

    #[test]
    fn api_defaults() {
        let info =
            resources::lookup("apps", "v1", "statefulsets").unwrap_or_else(|| unreachable!());
        let mut sts = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "www"},
                                                                "spec": {}}]}});
        set_defaults(info, &mut sts);
        assert_eq!(
            sts,
            json!({"spec": {"replicas": 1, "podManagementPolicy": "OrderedReady",
                "revisionHistoryLimit": 10,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain",
                                                         "whenScaled": "Retain"},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "www"}, "spec": {"volumeMode": "Filesystem"},
                    "status": {"phase": "Pending"}}]}})
        );
        let mut on_delete = json!({"spec": {"replicas": 0, "updateStrategy": {"type": "OnDelete"},
                                            "podManagementPolicy": "Parallel"}});
        set_defaults(info, &mut on_delete);
        assert_eq!(
            (
                &on_delete["spec"]["replicas"],
                &on_delete["spec"]["updateStrategy"],
                &on_delete["spec"]["podManagementPolicy"]
            ),
            (&json!(0), &json!({"type": "OnDelete"}), &json!("Parallel"))
        );
    }
}

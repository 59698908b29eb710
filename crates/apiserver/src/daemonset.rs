//! The DaemonSet controller stand-in: one pod of each apps/v1 DaemonSet on every eligible
//! node, placed by the scheduler, and the DaemonSet's status, as kube-controller-manager's
//! does. On with the other workload controllers.
//!
//! A node is eligible when the template's `nodeSelector` and required node affinity select
//! it and every NoSchedule/NoExecute taint on it is tolerated by the template's tolerations
//! plus those upstream's controller adds to every daemon pod ([`add_daemon_tolerations`]).
//! A pod already on a node with an untolerated NoSchedule taint keeps running; an
//! untolerated NoExecute taint, or a selector that no longer selects the node, removes it.
//!
//! Pods are made from the template with `generateName: <ds>-`, the labels
//! `controller-revision-hash` (the template's revision) and `pod-template-generation`, the
//! daemon tolerations, and a required node affinity whose only term is
//! `matchFields metadata.name In [<node>]`; they carry no `nodeName`, so the scheduler
//! binds them. Orphan pods the selector selects are adopted, and own pods it no longer
//! selects released, as the ReplicaSet controller does. Surplus pods on a node (all but
//! the oldest, see [`pods_to_keep`]), failed pods, pods on nodes that are gone and pods on
//! nodes no longer eligible are deleted. Each template is kept as a ControllerRevision
//! ([`crate::history`]).
//!
//! A changed template rolls out under `updateStrategy.type: RollingUpdate`: old pods are
//! deleted while fewer than `maxUnavailable` nodes lack an available new pod, and the nodes
//! get new ones; with `maxSurge` above 0 the new pod is made beside the old one instead,
//! and the old one deleted once the new one is available, with at most `maxSurge` new pods
//! not yet available at a time. `OnDelete` replaces a pod only when someone deletes it.
//!
//! Status: `desiredNumberScheduled` (eligible nodes), `currentNumberScheduled` (eligible
//! nodes with a pod), `numberMisscheduled` (pods on nodes not eligible), `numberReady`,
//! `numberAvailable`, `updatedNumberScheduled` (pods of the current template),
//! `numberUnavailable` and `observedGeneration`, which is what `kubectl rollout status`
//! reads.
//!
//! Where this differs from upstream: failed pods are replaced without backoff, and pods
//! bound to a node that is gone are deleted here (upstream leaves those to the pod garbage
//! collector).
//!
//! Upstream: pkg/controller/daemon (syncDaemonSet, manage, podsShouldBeOnNode,
//! rollingUpdate, updateDaemonSetStatus, NodeShouldRunDaemonPod) and
//! pkg/controller/daemon/util (AddOrUpdateDaemonPodTolerations,
//! ReplaceDaemonSetPodNodeNameNodeAffinity); API defaults from pkg/apis/apps/v1/defaults.go
//! and pkg/registry/apps/daemonset/strategy.go.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission;
use crate::controller::{
    self, claim_pods, controller_ref, is_available, is_ready, key_of, owner_reference,
    pod_from_template, terminating, Key, Reconcile,
};
use crate::history::{self, CONTROLLER_REVISION_HASH};
use crate::pv_controller::{selector_matches, str_at};
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store, WatchEvent};
use crate::validation::{FieldError, FieldErrorKind};

/// The Events' `source.component`, as upstream's controller names itself.
pub const COMPONENT: &str = "daemonset-controller";

/// The label carrying the DaemonSet's template generation on its pods.
pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";

/// The annotation the API server keeps the template generation in (apps/v1 has no field).
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// API defaults of a DaemonSet: `updateStrategy` RollingUpdate with `maxUnavailable: 1` and
/// `maxSurge: 0`, `revisionHistoryLimit: 10`, and the template generation annotation: 1 on
/// create (`current` None), one more on an update that changes the template.
pub fn set_defaults(info: &ResourceInfo, obj: &mut Value, current: Option<&Value>) {
    if (info.group, info.kind) != ("apps", "DaemonSet") {
        return;
    }
    let generation = match current {
        None => 1,
        Some(cur) => {
            let old = template_generation(cur).unwrap_or(1);
            if cur.pointer("/spec/template") == obj.pointer("/spec/template") {
                old
            } else {
                old + 1
            }
        }
    };
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let metadata = map.entry("metadata").or_insert_with(|| json!({}));
    if let Some(m) = metadata.as_object_mut() {
        let annotations = m.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                TEMPLATE_GENERATION_ANNOTATION.into(),
                json!(generation.to_string()),
            );
        }
    }
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    if !spec.get("revisionHistoryLimit").is_some_and(Value::is_i64) {
        spec.insert("revisionHistoryLimit".into(), json!(10));
    }
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(s) = strategy.as_object_mut() {
        if !s.get("type").is_some_and(Value::is_string) {
            s.insert("type".into(), json!("RollingUpdate"));
        }
        if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(ru) = ru.as_object_mut() {
                for (field, default) in [("maxUnavailable", 1), ("maxSurge", 0)] {
                    if ru.get(field).is_none_or(Value::is_null) {
                        ru.insert(field.into(), json!(default));
                    }
                }
            }
        }
    }
}

/// The checks upstream's validation makes on a DaemonSet that the controller relies on:
/// `spec.selector` required and not empty, selecting the template's labels (otherwise the
/// controller would release each pod it makes and make another).
///
/// Upstream: pkg/apis/apps/validation (ValidateDaemonSetSpec).
pub fn validate(info: &ResourceInfo, ds: &Value) -> Vec<FieldError> {
    if (info.group, info.kind) != ("apps", "DaemonSet") {
        return Vec::new();
    }
    validate_selector(ds, "daemonset")
}

/// [`validate`], and `spec.selector` may not change.
///
/// Upstream: pkg/apis/apps/validation (ValidateDaemonSetUpdate).
pub fn validate_update(info: &ResourceInfo, old: &Value, ds: &Value) -> Vec<FieldError> {
    let mut errs = validate(info, ds);
    if (info.group, info.kind) == ("apps", "DaemonSet")
        && old.pointer("/spec/selector") != ds.pointer("/spec/selector")
    {
        errs.push(FieldError::invalid(
            "spec.selector",
            ds.pointer("/spec/selector").cloned().unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

/// The selector rules the sets share: `spec.selector` required (`kind` names the set in
/// lowercase, as upstream's message does) and not empty, and it selects the template's
/// labels.
pub fn validate_selector(set: &Value, kind: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let labels = set
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    match set.pointer("/spec/selector") {
        None | Some(Value::Null) => errs.push(FieldError {
            field: "spec.selector".into(),
            kind: FieldErrorKind::Required,
            detail: String::new(),
        }),
        Some(selector) => {
            let empty = ["matchLabels", "matchExpressions"].iter().all(|k| {
                selector.get(*k).is_none_or(|v| {
                    v.as_object().is_some_and(serde_json::Map::is_empty)
                        || v.as_array().is_some_and(Vec::is_empty)
                        || v.is_null()
                })
            });
            if empty {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    selector.clone(),
                    format!("empty selector is invalid for {kind}"),
                ));
            } else if !selector_matches(selector, Some(&labels)) {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    labels,
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    errs
}

/// The template generation of a DaemonSet, from its annotation.
pub fn template_generation(ds: &Value) -> Option<i64> {
    ds.pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Adds the tolerations every daemon pod carries (replacing an equal key/operator/effect
/// one): not-ready and unreachable NoExecute without `tolerationSeconds`, the disk, memory
/// and PID pressure and unschedulable NoSchedule taints, and network-unavailable for pods on
/// the host network.
pub fn add_daemon_tolerations(spec: &mut Value) {
    let host_network = spec
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    if !spec.is_object() {
        *spec = json!({});
    }
    let mut tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (key, effect) in wanted {
        let t = json!({"key": key, "operator": "Exists", "effect": effect});
        // Upstream's MatchToleration: same key, operator, value and effect.
        let same = |o: &Value| {
            str_at(o, "/key") == key
                && str_at(o, "/operator") == "Exists"
                && str_at(o, "/value").is_empty()
                && str_at(o, "/effect") == effect
        };
        match tolerations.iter_mut().find(|o| same(o)) {
            Some(o) => *o = t,
            None => tolerations.push(t),
        }
    }
    spec["tolerations"] = Value::Array(tolerations);
}

/// Whether a toleration tolerates a taint (upstream's ToleratesTaint): same effect or none,
/// same key or an empty key with `Exists`, and `Exists` or an equal value.
pub fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = str_at(toleration, "/effect");
    if !effect.is_empty() && effect != str_at(taint, "/effect") {
        return false;
    }
    let key = str_at(toleration, "/key");
    let operator = str_at(toleration, "/operator");
    if !key.is_empty() && key != str_at(taint, "/key") {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => str_at(toleration, "/value") == str_at(taint, "/value"),
        _ => false,
    }
}

/// The first taint with an effect `effect_ok` accepts that no toleration tolerates.
fn untolerated_taint<'a>(
    taints: &'a [Value],
    tolerations: &[Value],
    effect_ok: impl Fn(&str) -> bool,
) -> Option<&'a Value> {
    taints
        .iter()
        .filter(|t| effect_ok(str_at(t, "/effect")))
        .find(|t| !tolerations.iter().any(|o| tolerates(o, t)))
}

/// Whether one node selector requirement holds for `value` (a label or field of the node,
/// None when the node has none).
fn requirement_matches(req: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = req
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let number = |s: &str| s.parse::<i64>().ok();
    match str_at(req, "/operator") {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => !value.is_some_and(|v| values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(number), values.as_slice()) else {
                return false;
            };
            let Some(want) = number(want) else {
                return false;
            };
            if str_at(req, "/operator") == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

/// Whether a node selector term selects the node: every `matchExpressions` requirement on
/// its labels and every `matchFields` one on `metadata.name`; a term with neither selects
/// nothing.
pub fn term_matches(term: &Value, node: &Value) -> bool {
    let list = |field: &str| -> Vec<Value> {
        term.get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (exprs, fields) = (list("matchExpressions"), list("matchFields"));
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let label = |k: &str| {
        node.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    exprs
        .iter()
        .all(|r| requirement_matches(r, label(str_at(r, "/key"))))
        && fields.iter().all(|r| {
            str_at(r, "/key") == "metadata.name"
                && requirement_matches(r, Some(str_at(node, "/metadata/name")))
        })
}

/// Whether the pod spec's `nodeName`, `nodeSelector` and required node affinity let it on
/// the node.
pub fn fits_node(spec: &Value, node: &Value) -> bool {
    let node_name = str_at(spec, "/nodeName");
    if !node_name.is_empty() && node_name != str_at(node, "/metadata/name") {
        return false;
    }
    let labels = node.pointer("/metadata/labels");
    let selector_ok = spec
        .get("nodeSelector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    let affinity_ok = match spec.pointer(
        "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    ) {
        Some(Value::Array(terms)) => terms.iter().any(|t| term_matches(t, node)),
        _ => true,
    };
    selector_ok && affinity_ok
}

/// Whether a daemon pod with this spec (daemon tolerations added) should be created on the
/// node, and whether one already there should keep running (upstream's
/// NodeShouldRunDaemonPod).
pub fn node_should_run(spec: &Value, node: &Value) -> (bool, bool) {
    if !fits_node(spec, node) {
        return (false, false);
    }
    let taints: Vec<Value> = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let blocking = |e: &str| matches!(e, "NoSchedule" | "NoExecute");
    if untolerated_taint(&taints, &tolerations, blocking).is_none() {
        return (true, true);
    }
    let evicting = untolerated_taint(&taints, &tolerations, |e| e == "NoExecute").is_some();
    (false, !evicting)
}

/// The spec's affinity with its required node terms replaced by the single term
/// `matchFields metadata.name In [node]` (its other affinities kept).
pub fn with_node_name_affinity(spec: &mut Value, node: &str) {
    if !spec.is_object() {
        *spec = json!({});
    }
    let term = json!({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]});
    let affinity = &mut spec["affinity"];
    if !affinity.is_object() {
        *affinity = json!({});
    }
    let node_affinity = &mut affinity["nodeAffinity"];
    if !node_affinity.is_object() {
        *node_affinity = json!({});
    }
    let required = &mut node_affinity["requiredDuringSchedulingIgnoredDuringExecution"];
    if !required.is_object() {
        *required = json!({});
    }
    required["nodeSelectorTerms"] = json!([term]);
}

/// The node a daemon pod is for: its `nodeName`, or else the `metadata.name In [node]`
/// field term of its required node affinity.
pub fn target_node(pod: &Value) -> Option<&str> {
    let bound = str_at(pod, "/spec/nodeName");
    if !bound.is_empty() {
        return Some(bound);
    }
    pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )
    .and_then(Value::as_array)?
    .iter()
    .flat_map(|t| t.get("matchFields").and_then(Value::as_array).into_iter().flatten())
    .find(|r| str_at(r, "/key") == "metadata.name" && str_at(r, "/operator") == "In")
    .and_then(|r| r.pointer("/values/0"))
    .and_then(Value::as_str)
}

/// The template daemon pods are made from: the DaemonSet's, with the daemon tolerations
/// and the revision hash and template generation labels.
pub fn daemon_template(ds: &Value, hash: &str) -> Value {
    let mut template = ds
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !template.is_object() {
        template = json!({});
    }
    add_daemon_tolerations(&mut template["spec"]);
    if !template
        .pointer("/metadata/labels")
        .is_some_and(Value::is_object)
    {
        if !template.get("metadata").is_some_and(Value::is_object) {
            template["metadata"] = json!({});
        }
        template["metadata"]["labels"] = json!({});
    }
    if let Some(generation) = template_generation(ds) {
        template["metadata"]["labels"][POD_TEMPLATE_GENERATION] = json!(generation.to_string());
    }
    template["metadata"]["labels"][CONTROLLER_REVISION_HASH] = json!(hash);
    template
}

/// `maxSurge` and `maxUnavailable` of a RollingUpdate DaemonSet as numbers of nodes out of
/// `desired` (percentages rounded up); `maxUnavailable` is 1 when both are 0. Both are 0
/// under another strategy.
pub fn max_surge_and_unavailable(ds: &Value, desired: usize) -> (usize, usize) {
    if str_at(ds, "/spec/updateStrategy/type") != "RollingUpdate" {
        return (0, 0);
    }
    let scaled = |v: Option<&Value>| -> usize {
        match v {
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0),
            Some(Value::String(s)) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .map_or(0, |p| (p * desired).div_ceil(100)),
            _ => 0,
        }
    };
    let ru = ds.pointer("/spec/updateStrategy/rollingUpdate");
    let unavailable = scaled(ru.and_then(|r| r.get("maxUnavailable")));
    let surge = scaled(ru.and_then(|r| r.get("maxSurge")));
    if unavailable == 0 && surge == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// Whether the DaemonSet may run a new pod beside an old one on a node (upstream's
/// AllowsSurge: a `maxSurge` above 0).
pub fn allows_surge(ds: &Value) -> bool {
    max_surge_and_unavailable(ds, 1).0 > 0
}

/// Whether a pod is of the DaemonSet's current template: its revision hash, or its
/// template generation (upstream's IsPodUpdated).
pub fn is_updated(pod: &Value, hash: &str, generation: Option<i64>) -> bool {
    let label = |k: &str| {
        pod.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    (!hash.is_empty() && label(CONTROLLER_REVISION_HASH) == Some(hash))
        || generation.is_some_and(|g| label(POD_TEMPLATE_GENERATION) == Some(&g.to_string()))
}

/// The pods of one node a DaemonSet keeps (the others are deleted), from those not
/// terminating and not failed, oldest first: the oldest; with surge allowed, the oldest new
/// one and the oldest old one, the old one only while the new one is not available and the
/// old one is ready (upstream's podsShouldBeOnNode).
pub fn pods_to_keep<'a>(ds: &Value, hash: &str, running: &[&'a Value]) -> Vec<&'a Value> {
    if !allows_surge(ds) {
        return running.first().copied().into_iter().collect();
    }
    let generation = template_generation(ds);
    let min_ready = ds
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let new = running.iter().find(|p| is_updated(p, hash, generation));
    let old = running.iter().find(|p| !is_updated(p, hash, generation));
    match (new, old) {
        (Some(n), Some(o)) if is_ready(o) && !is_available(n, min_ready) => vec![*n, *o],
        (Some(n), _) => vec![*n],
        (None, Some(o)) => vec![*o],
        (None, None) => Vec::new(),
    }
}

/// A DaemonSet's status from its eligible nodes and the pods on each (upstream's
/// updateDaemonSetStatus): `nodes` holds, per node, whether the DaemonSet should run there
/// and its pods there, oldest first.
pub fn calculate_status(ds: &Value, hash: &str, nodes: &[(bool, Vec<&Value>)]) -> Value {
    let min_ready = ds
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let generation = template_generation(ds);
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    for (should_run, pods) in nodes {
        let Some(pod) = pods.first() else {
            continue;
        };
        if !should_run {
            misscheduled += 1;
            continue;
        }
        current += 1;
        if is_ready(pod) {
            ready += 1;
            if is_available(pod, min_ready) {
                available += 1;
            }
        }
        if is_updated(pod, hash, generation) {
            updated += 1;
        }
    }
    desired += nodes.iter().filter(|(should_run, _)| *should_run).count();
    let mut status = ds
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (field, n) in [
        ("currentNumberScheduled", current),
        ("numberMisscheduled", misscheduled),
        ("desiredNumberScheduled", desired),
        ("numberReady", ready),
    ] {
        status.insert(field.into(), json!(n));
    }
    // These are left out at zero, as upstream's omitempty does.
    for (field, n) in [
        ("updatedNumberScheduled", updated),
        ("numberAvailable", available),
        ("numberUnavailable", desired - available),
    ] {
        if n == 0 {
            status.remove(field);
        } else {
            status.insert(field.into(), json!(n));
        }
    }
    status.insert(
        "observedGeneration".into(),
        ds.pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1)),
    );
    Value::Object(status)
}

struct DaemonSetController {
    store: Arc<Store>,
    daemonsets: &'static ResourceInfo,
    pods: &'static ResourceInfo,
    nodes: &'static ResourceInfo,
    revisions: &'static ResourceInfo,
    priority_classes: &'static ResourceInfo,
    recorder: Recorder,
}

impl DaemonSetController {
    fn all_keys(&self) -> Vec<Key> {
        self.store
            .list(self.daemonsets, None)
            .0
            .iter()
            .map(|ds| {
                (
                    str_at(ds, "/metadata/namespace").to_string(),
                    str_at(ds, "/metadata/name").to_string(),
                )
            })
            .collect()
    }

    /// The DaemonSet's pods (its controller reference), each under the node it is for;
    /// those for no node under "".
    fn pods_by_node(&self, ns: &str, uid: &str) -> BTreeMap<String, Vec<Arc<Value>>> {
        let mut by_node: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        for pod in self.store.list(self.pods, Some(ns)).0 {
            if controller_ref(&pod).is_some_and(|r| str_at(r, "/uid") == uid) {
                let node = target_node(&pod).unwrap_or("").to_string();
                by_node.entry(node).or_default().push(pod);
            }
        }
        for pods in by_node.values_mut() {
            pods.sort_by(|a, b| {
                str_at(a, "/metadata/creationTimestamp")
                    .cmp(str_at(b, "/metadata/creationTimestamp"))
                    .then_with(|| str_at(a, "/metadata/name").cmp(str_at(b, "/metadata/name")))
            });
        }
        by_node
    }

    /// Brings one DaemonSet to a pod per eligible node and writes its status. Returns when
    /// to look again for a pod that is ready but not yet available.
    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        let ds = self.store.get(self.daemonsets, ns, name)?;
        if terminating(&ds) {
            return None;
        }
        let uid = str_at(&ds, "/metadata/uid").to_string();
        claim_pods(&self.store, self.pods, &ds, "DaemonSet", |_| true);
        let labels = ds
            .pointer("/spec/template/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let history = match history::construct_history(
            &self.store,
            self.revisions,
            &ds,
            "DaemonSet",
            &labels,
        ) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(daemonset = %name, error = %e.message,
                        "daemonset controller: revisions not written");
                return None;
            }
        };
        let hash = history
            .update
            .pointer("/metadata/labels")
            .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let template = daemon_template(&ds, &hash);
        let spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
        let nodes = self.store.list(self.nodes, None).0;
        let mut by_node = self.pods_by_node(ns, &uid);
        let mut to_create: Vec<String> = Vec::new();
        let mut to_delete: Vec<Arc<Value>> = Vec::new();
        for node in &nodes {
            let node_name = str_at(node, "/metadata/name");
            let (should_run, should_continue) = node_should_run(&spec, node);
            let pods = by_node.remove(node_name).unwrap_or_default();
            if should_run && pods.is_empty() {
                to_create.push(node_name.to_string());
            } else if should_continue {
                let (failed, running): (Vec<Arc<Value>>, Vec<Arc<Value>>) = pods
                    .into_iter()
                    .filter(|p| !terminating(p))
                    .partition(|p| str_at(p, "/status/phase") == "Failed");
                to_delete.extend(failed);
                let refs: Vec<&Value> = running.iter().map(|p| &**p).collect();
                let keep: Vec<String> = pods_to_keep(&ds, &hash, &refs)
                    .iter()
                    .map(|p| str_at(p, "/metadata/uid").to_string())
                    .collect();
                to_delete.extend(
                    running
                        .into_iter()
                        .filter(|p| !keep.iter().any(|u| u == str_at(p, "/metadata/uid"))),
                );
            } else {
                to_delete.extend(pods.into_iter().filter(|p| !terminating(p)));
            }
        }
        // What is left is for nodes that are gone; a pod naming no node (an adopted one made
        // by hand) is left alone, as upstream does.
        by_node.remove("");
        to_delete.extend(by_node.into_values().flatten().filter(|p| !terminating(p)));
        let update_strategy = str_at(&ds, "/spec/updateStrategy/type");
        if update_strategy == "RollingUpdate" && to_create.is_empty() && to_delete.is_empty() {
            (to_delete, to_create) = self.rolling_update(&ds, &uid, &hash, &nodes, &spec);
        }
        let template_owner = json!({"metadata": ds.get("metadata").cloned().unwrap_or(Value::Null),
                                    "spec": {"template": template}});
        let classes = self.store.list(self.priority_classes, None).0;
        for node in &to_create {
            let mut pod = pod_from_template(
                &template_owner,
                owner_reference(&ds, "apps/v1", "DaemonSet"),
            );
            with_node_name_affinity(&mut pod["spec"], node);
            admission::default_pod(&mut pod);
            let created = admission::admit_priority(self.pods, &mut pod, &classes)
                .and_then(|()| self.store.create(self.pods, ns, pod, false));
            match created {
                Ok(pod) => self.recorder.event(
                    &ds,
                    "DaemonSet",
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created pod: {}", str_at(&pod, "/metadata/name")),
                ),
                Err(e) => {
                    self.recorder.event(
                        &ds,
                        "DaemonSet",
                        "Warning",
                        "FailedCreate",
                        &format!("Error creating: {}", e.message),
                    );
                    break;
                }
            }
        }
        for pod in &to_delete {
            let pod_name = str_at(pod, "/metadata/name");
            let opts = DeleteOptions {
                uid: Some(str_at(pod, "/metadata/uid")),
                ..DeleteOptions::default()
            };
            match self.store.delete(self.pods, ns, pod_name, opts) {
                Ok(_) => self.recorder.event(
                    &ds,
                    "DaemonSet",
                    "Normal",
                    "SuccessfulDelete",
                    &format!("Deleted pod: {pod_name}"),
                ),
                Err(e) => tracing::debug!(pod = %pod_name, error = %e.message,
                    "daemonset controller: pod not deleted"),
            }
        }
        // Counted again after the writes, so that the status says what is there now.
        let by_node = self.pods_by_node(ns, &uid);
        let live_hashes: BTreeSet<&str> = by_node
            .values()
            .flatten()
            .filter_map(|p| {
                p.pointer("/metadata/labels")
                    .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
                    .and_then(Value::as_str)
            })
            .collect();
        let live: Vec<&str> = history
            .revisions
            .iter()
            .filter(|r| {
                r.pointer("/metadata/labels")
                    .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
                    .and_then(Value::as_str)
                    .is_some_and(|h| live_hashes.contains(h) || h == hash)
            })
            .map(|r| str_at(r, "/metadata/name"))
            .collect();
        history::truncate_history(&self.store, self.revisions, &ds, &history.revisions, &live);
        let per_node: Vec<(bool, Vec<&Value>)> = nodes
            .iter()
            .map(|node| {
                let pods = by_node
                    .get(str_at(node, "/metadata/name"))
                    .into_iter()
                    .flatten()
                    .map(|p| &**p)
                    .filter(|p| !terminating(p))
                    .collect();
                (node_should_run(&spec, node).0, pods)
            })
            .collect();
        let mut status = calculate_status(&ds, &hash, &per_node);
        if history.collision_count > 0 {
            status["collisionCount"] = json!(history.collision_count);
        }
        let written =
            controller::update_same(&self.store, self.daemonsets, ns, name, &uid, |cur| {
                let mut new = cur.clone();
                new["status"] = status;
                Ok(new)
            });
        if let Err(e) = written {
            tracing::debug!(daemonset = %name, error = %e.message,
                "daemonset controller: status not written");
        }
        controller::until_available(
            &ds,
            per_node
                .iter()
                .flat_map(|(_, pods)| pods.iter().map(|p| &**p)),
        )
    }

    /// One step of a rolling update: the old pods to delete and the nodes to make a new pod
    /// on. Without surge (upstream's rollingUpdate with `maxSurge: 0`): every unavailable old
    /// pod, and available ones while fewer than `maxUnavailable` nodes lack an available pod.
    /// With surge: a new pod beside each unavailable old one, and beside available ones
    /// while fewer than `maxSurge` new pods are not yet available; an old pod goes once the
    /// new one beside it is available.
    fn rolling_update(
        &self,
        ds: &Value,
        uid: &str,
        hash: &str,
        nodes: &[Arc<Value>],
        spec: &Value,
    ) -> (Vec<Arc<Value>>, Vec<String>) {
        let min_ready = ds
            .pointer("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let generation = template_generation(ds);
        let by_node = self.pods_by_node(str_at(ds, "/metadata/namespace"), uid);
        let desired = nodes.iter().filter(|n| node_should_run(spec, n).0).count();
        let (max_surge, max_unavailable) = max_surge_and_unavailable(ds, desired);
        let mut busy = 0;
        let mut delete_now = Vec::new();
        let mut create_now = Vec::new();
        let mut candidates: Vec<(Arc<Value>, String)> = Vec::new();
        for node in nodes {
            let node_name = str_at(node, "/metadata/name");
            let all = by_node.get(node_name).map_or(&[][..], Vec::as_slice);
            let pods: Vec<&Arc<Value>> = all.iter().filter(|p| !terminating(p)).collect();
            let new: Vec<&&Arc<Value>> = pods
                .iter()
                .filter(|p| is_updated(p, hash, generation))
                .collect();
            let old: Vec<&&Arc<Value>> = pods
                .iter()
                .filter(|p| !is_updated(p, hash, generation))
                .collect();
            match (new.as_slice(), old.as_slice()) {
                // Only a pod on its way out: unavailable until the manage step replaces it.
                ([], []) if !all.is_empty() && max_surge == 0 => busy += 1,
                ([], []) => {}
                ([n], []) => {
                    if max_surge == 0 && !is_available(n, min_ready) {
                        busy += 1;
                    }
                }
                ([], [o]) => {
                    let limit = if max_surge > 0 {
                        max_surge
                    } else {
                        max_unavailable
                    };
                    if !is_available(o, min_ready) {
                        if max_surge > 0 {
                            create_now.push(node_name.to_string());
                        } else {
                            delete_now.push((**o).clone());
                        }
                    } else if busy < limit {
                        candidates.push(((**o).clone(), node_name.to_string()));
                    }
                }
                ([n], [o]) if max_surge > 0 => {
                    if is_available(n, min_ready) {
                        delete_now.push((**o).clone());
                    } else {
                        busy += 1;
                    }
                }
                // Duplicates: the next sync's manage step sorts them out.
                _ => busy += 1,
            }
        }
        let limit = if max_surge > 0 {
            max_surge
        } else {
            max_unavailable
        };
        let room = limit.saturating_sub(busy).min(candidates.len());
        for (old, node) in candidates.into_iter().take(room) {
            if max_surge > 0 {
                create_now.push(node);
            } else {
                delete_now.push(old);
            }
        }
        (delete_now, create_now)
    }
}

/// Runs the DaemonSet controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (Some(daemonsets), Some(pods), Some(nodes), Some(revisions), Some(priority_classes)) = (
        resources::lookup("apps", "v1", "daemonsets"),
        resources::lookup("", "v1", "pods"),
        resources::lookup("", "v1", "nodes"),
        resources::lookup("apps", "v1", "controllerrevisions"),
        resources::lookup("scheduling.k8s.io", "v1", "priorityclasses"),
    ) else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let c = DaemonSetController {
        store,
        daemonsets,
        pods,
        nodes,
        revisions,
        priority_classes,
        recorder,
    };
    controller::run(&c.store.clone(), &c).await;
}

impl Reconcile for DaemonSetController {
    fn owners(&self) -> &'static ResourceInfo {
        self.daemonsets
    }

    fn relist(&self) -> Vec<Key> {
        self.all_keys()
    }

    fn keys_of(&self, ev: &WatchEvent, keys: &mut BTreeSet<Key>) {
        if ev.storage == self.daemonsets.storage && ev.kind != EventType::Deleted {
            keys.insert(key_of(&ev.object()));
        } else if ev.storage == self.pods.storage {
            let pod = ev.object();
            if let Some(r) = controller_ref(&pod).filter(|r| {
                str_at(r, "/kind") == "DaemonSet" && str_at(r, "/apiVersion") == "apps/v1"
            }) {
                keys.insert((
                    str_at(&pod, "/metadata/namespace").to_string(),
                    str_at(r, "/name").to_string(),
                ));
            }
        } else if ev.storage == self.nodes.storage {
            // A node added, changed or gone may change which nodes every DaemonSet runs on.
            keys.extend(self.all_keys());
        }
    }

    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        DaemonSetController::sync(self, ns, name)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn node(labels: Value, taints: Value) -> Value {
        json!({"metadata": {"name": "n1", "labels": labels}, "spec": {"taints": taints}})
    }

    fn taint(key: &str, value: &str, effect: &str) -> Value {
        json!({"key": key, "value": value, "effect": effect})
    }

    /// A template spec as the controller sees it: the daemon tolerations added.
    fn daemon_spec(spec: Value) -> Value {
        let mut spec = spec;
        add_daemon_tolerations(&mut spec);
        spec
    }

    fn required(terms: Value) -> Value {
        json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]})
    }

    #[rstest]
    #[case::untainted_node_runs(json!({}), node(json!({}), json!([])), (true, true))]
    #[case::untolerated_no_schedule_taint_blocks_new_pods_but_keeps_running_ones(
        json!({}), node(json!({}), json!([taint("gpu", "true", "NoSchedule")])), (false, true))]
    #[case::untolerated_no_execute_taint_removes_running_pods(
        json!({}), node(json!({}), json!([taint("gpu", "true", "NoExecute")])), (false, false))]
    #[case::prefer_no_schedule_taint_is_no_obstacle(
        json!({}), node(json!({}), json!([taint("gpu", "true", "PreferNoSchedule")])), (true, true))]
    #[case::exists_toleration_tolerates_any_value(
        json!({"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
        node(json!({}), json!([taint("gpu", "true", "NoSchedule")])), (true, true))]
    #[case::equal_toleration_tolerates_its_value(
        json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "true",
                                "effect": "NoSchedule"}]}),
        node(json!({}), json!([taint("gpu", "true", "NoSchedule")])), (true, true))]
    #[case::equal_toleration_of_another_value_does_not_tolerate(
        json!({"tolerations": [{"key": "gpu", "value": "false"}]}),
        node(json!({}), json!([taint("gpu", "true", "NoSchedule")])), (false, true))]
    #[case::toleration_of_another_effect_does_not_tolerate(
        json!({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}),
        node(json!({}), json!([taint("gpu", "true", "NoExecute")])), (false, false))]
    #[case::empty_key_exists_tolerates_everything(
        json!({"tolerations": [{"operator": "Exists"}]}),
        node(json!({}), json!([taint("a", "1", "NoSchedule"), taint("b", "", "NoExecute")])),
        (true, true))]
    #[case::unschedulable_taint_is_tolerated_by_daemon_pods(
        json!({}),
        node(json!({}), json!([taint("node.kubernetes.io/unschedulable", "", "NoSchedule")])),
        (true, true))]
    #[case::not_ready_and_unreachable_are_tolerated_by_daemon_pods(
        json!({}),
        node(json!({}), json!([taint("node.kubernetes.io/not-ready", "", "NoExecute"),
                               taint("node.kubernetes.io/unreachable", "", "NoExecute")])),
        (true, true))]
    #[case::pressure_taints_are_tolerated_by_daemon_pods(
        json!({}),
        node(json!({}), json!([taint("node.kubernetes.io/disk-pressure", "", "NoSchedule"),
                               taint("node.kubernetes.io/memory-pressure", "", "NoSchedule"),
                               taint("node.kubernetes.io/pid-pressure", "", "NoSchedule")])),
        (true, true))]
    #[case::network_unavailable_blocks_pods_off_the_host_network(
        json!({}),
        node(json!({}), json!([taint("node.kubernetes.io/network-unavailable", "", "NoSchedule")])),
        (false, true))]
    #[case::network_unavailable_is_tolerated_on_the_host_network(
        json!({"hostNetwork": true}),
        node(json!({}), json!([taint("node.kubernetes.io/network-unavailable", "", "NoSchedule")])),
        (true, true))]
    #[case::node_selector_selects(
        json!({"nodeSelector": {"disk": "ssd"}}), node(json!({"disk": "ssd"}), json!([])),
        (true, true))]
    #[case::node_selector_mismatch_neither_runs_nor_keeps(
        json!({"nodeSelector": {"disk": "ssd"}}), node(json!({"disk": "hdd"}), json!([])),
        (false, false))]
    #[case::required_affinity_in(
        required(json!([expr("zone", "In", &["a", "b"])])), node(json!({"zone": "b"}), json!([])),
        (true, true))]
    #[case::required_affinity_not_in(
        required(json!([expr("zone", "NotIn", &["b"])])), node(json!({"zone": "b"}), json!([])),
        (false, false))]
    #[case::required_affinity_exists(
        required(json!([expr("zone", "Exists", &[])])), node(json!({}), json!([])),
        (false, false))]
    #[case::required_affinity_does_not_exist(
        required(json!([expr("zone", "DoesNotExist", &[])])), node(json!({}), json!([])),
        (true, true))]
    #[case::required_affinity_gt(
        required(json!([expr("cores", "Gt", &["4"])])), node(json!({"cores": "8"}), json!([])),
        (true, true))]
    #[case::required_affinity_lt(
        required(json!([expr("cores", "Lt", &["4"])])), node(json!({"cores": "8"}), json!([])),
        (false, false))]
    #[case::required_affinity_terms_are_ored(
        required(json!([expr("zone", "In", &["a"]), expr("zone", "In", &["b"])])),
        node(json!({"zone": "b"}), json!([])), (true, true))]
    #[case::required_affinity_match_fields_on_the_node_name(
        required(json!([{"matchFields": [{"key": "metadata.name", "operator": "In",
                                           "values": ["n1"]}]}])),
        node(json!({}), json!([])), (true, true))]
    #[case::empty_required_term_selects_nothing(
        required(json!([{}])), node(json!({}), json!([])), (false, false))]
    #[case::node_name_of_another_node(
        json!({"nodeName": "n2"}), node(json!({}), json!([])), (false, false))]
    fn node_eligibility(#[case] spec: Value, #[case] node: Value, #[case] want: (bool, bool)) {
        assert_eq!(node_should_run(&daemon_spec(spec), &node), want);
    }

    #[test]
    fn daemon_tolerations_are_appended_and_replace_equal_ones() {
        let mut spec = json!({"tolerations": [
            {"key": "gpu", "operator": "Exists"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 5}]});
        add_daemon_tolerations(&mut spec);
        let t =
            |key: &str, effect: &str| json!({"key": key, "operator": "Exists", "effect": effect});
        assert_eq!(
            spec,
            json!({"tolerations": [
                {"key": "gpu", "operator": "Exists"},
                t("node.kubernetes.io/unreachable", "NoExecute"),
                t("node.kubernetes.io/not-ready", "NoExecute"),
                t("node.kubernetes.io/disk-pressure", "NoSchedule"),
                t("node.kubernetes.io/memory-pressure", "NoSchedule"),
                t("node.kubernetes.io/pid-pressure", "NoSchedule"),
                t("node.kubernetes.io/unschedulable", "NoSchedule")]})
        );
    }

    #[test]
    fn node_name_affinity_replaces_required_terms_and_keeps_the_rest() {
        let preferred = json!([{"weight": 1, "preference": expr("zone", "In", &["a"])}]);
        let mut spec = json!({"affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    expr("zone", "In", &["a"]),
                    {"matchFields": [{"key": "metadata.name", "operator": "In",
                                      "values": ["old"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": preferred},
            "podAntiAffinity": {"x": 1}}});
        with_node_name_affinity(&mut spec, "n7");
        assert_eq!(
            spec,
            json!({"affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In",
                                          "values": ["n7"]}]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": preferred},
                "podAntiAffinity": {"x": 1}}})
        );
        assert_eq!(target_node(&json!({"spec": spec})), Some("n7"));
        let mut bare = json!({});
        with_node_name_affinity(&mut bare, "n1");
        assert_eq!(target_node(&json!({"spec": bare})), Some("n1"));
        assert_eq!(
            target_node(&json!({"spec": {"nodeName": "n2", "affinity": bare["affinity"]}})),
            Some("n2")
        );
    }

    #[rstest]
    #[case::default(json!({"maxUnavailable": 1, "maxSurge": 0}), 10, (0, 1))]
    #[case::number(json!({"maxUnavailable": 3}), 10, (0, 3))]
    #[case::percent_rounds_up(json!({"maxUnavailable": "25%"}), 10, (0, 3))]
    #[case::both_zero_is_one_unavailable(json!({"maxUnavailable": 0, "maxSurge": 0}), 10, (0, 1))]
    #[case::surge(json!({"maxUnavailable": 0, "maxSurge": "10%"}), 10, (1, 0))]
    fn max_surge_and_unavailable_of_desired(
        #[case] rolling_update: Value,
        #[case] desired: usize,
        #[case] want: (usize, usize),
    ) {
        let ds = json!({"spec": {"updateStrategy": {"type": "RollingUpdate",
                                                    "rollingUpdate": rolling_update}}});
        assert_eq!(max_surge_and_unavailable(&ds, desired), want);
    }

    #[test]
    fn on_delete_has_no_surge_and_no_unavailable_budget() {
        let ds = json!({"spec": {"updateStrategy": {"type": "OnDelete"}}});
        assert_eq!(max_surge_and_unavailable(&ds, 10), (0, 0));
    }

    fn daemon_pod(name: &str, hash: &str, ready: bool) -> Value {
        let conditions = if ready {
            json!([{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2000-01-01T00:00:00Z"}])
        } else {
            json!([])
        };
        json!({"metadata": {"name": name, "labels": {CONTROLLER_REVISION_HASH: hash}},
               "status": {"phase": "Running", "conditions": conditions}})
    }

    #[rstest]
    #[case::without_surge_the_oldest_stays(json!({"maxUnavailable": 1}),
        vec![daemon_pod("old", "h1", true), daemon_pod("new", "h2", false)], vec!["old"])]
    #[case::surge_keeps_the_ready_old_pod_until_the_new_one_is_available(
        json!({"maxUnavailable": 0, "maxSurge": 1}),
        vec![daemon_pod("old", "h1", true), daemon_pod("new", "h2", false)], vec!["new", "old"])]
    #[case::surge_drops_the_old_pod_once_the_new_one_is_available(
        json!({"maxUnavailable": 0, "maxSurge": 1}),
        vec![daemon_pod("old", "h1", true), daemon_pod("new", "h2", true)], vec!["new"])]
    #[case::surge_drops_an_old_pod_that_is_not_ready(
        json!({"maxUnavailable": 0, "maxSurge": 1}),
        vec![daemon_pod("old", "h1", false), daemon_pod("new", "h2", false)], vec!["new"])]
    #[case::surge_keeps_one_of_each(
        json!({"maxUnavailable": 0, "maxSurge": 1}),
        vec![daemon_pod("old", "h1", true), daemon_pod("old2", "h1", true),
             daemon_pod("new", "h2", false), daemon_pod("new2", "h2", false)],
        vec!["new", "old"])]
    fn pods_kept_on_a_node(
        #[case] rolling_update: Value,
        #[case] running: Vec<Value>,
        #[case] want: Vec<&str>,
    ) {
        let ds = json!({"spec": {"updateStrategy": {"type": "RollingUpdate",
                                                    "rollingUpdate": rolling_update}}});
        let refs: Vec<&Value> = running.iter().collect();
        let kept: Vec<&str> = pods_to_keep(&ds, "h2", &refs)
            .iter()
            .map(|p| str_at(p, "/metadata/name"))
            .collect();
        assert_eq!(kept, want);
    }

    #[test]
    fn status_counts_per_eligible_node() {
        let ds = json!({"metadata": {"generation": 2,
                "annotations": {TEMPLATE_GENERATION_ANNOTATION: "2"}}});
        let pod = |hash: &str, ready: bool| {
            let conditions = if ready {
                json!([{"type": "Ready", "status": "True",
                        "lastTransitionTime": "2000-01-01T00:00:00Z"}])
            } else {
                json!([])
            };
            json!({"metadata": {"labels": {CONTROLLER_REVISION_HASH: hash}},
                   "status": {"phase": "Running", "conditions": conditions}})
        };
        let (new_ready, new_pending, old_ready) =
            (pod("h2", true), pod("h2", false), pod("h1", true));
        let nodes = vec![
            (true, vec![&new_ready]),
            (true, vec![&new_pending]),
            (true, vec![&old_ready]),
            (true, vec![]),
            (false, vec![&old_ready]),
            (false, vec![]),
        ];
        assert_eq!(
            calculate_status(&ds, "h2", &nodes),
            json!({"currentNumberScheduled": 3, "numberMisscheduled": 1,
                   "desiredNumberScheduled": 4, "numberReady": 2,
                   "updatedNumberScheduled": 2, "numberAvailable": 2, "numberUnavailable": 2,
                   "observedGeneration": 2})
        );
    }

    fn with_selector(selector: Option<Value>, labels: Value) -> Value {
        let mut ds = json!({"spec": {"template": {"metadata": {"labels": labels}}}});
        if let Some(sel) = selector {
            ds["spec"]["selector"] = sel;
        }
        ds
    }

    #[rstest]
    #[case::selector_selecting_the_template(
        with_selector(Some(json!({"matchLabels": {"app": "a"}})), json!({"app": "a", "x": "y"})),
        vec![])]
    #[case::missing_selector_is_required(
        with_selector(None, json!({"app": "a"})),
        vec!["spec.selector: Required value"])]
    #[case::empty_selector_is_invalid(
        with_selector(Some(json!({})), json!({"app": "a"})),
        vec!["spec.selector: Invalid value: {}: empty selector is invalid for daemonset"])]
    #[case::empty_match_labels_is_an_empty_selector(
        with_selector(Some(json!({"matchLabels": {}})), json!({"app": "a"})),
        vec!["spec.selector: Invalid value: {\"matchLabels\":{}}: empty selector is invalid for daemonset"])]
    #[case::selector_not_selecting_the_template(
        with_selector(Some(json!({"matchLabels": {"app": "b"}})), json!({"app": "a"})),
        vec!["spec.template.metadata.labels: Invalid value: {\"app\":\"a\"}: `selector` does not match template `labels`"])]
    #[case::expressions_count(
        with_selector(Some(json!({"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["a"]}]})), json!({"app": "a"})),
        vec![])]
    fn selector_rules(#[case] ds: Value, #[case] want: Vec<&str>) {
        let got: Vec<String> = validate(ds_info(), &ds)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_selector_is_immutable() {
        let old = with_selector(
            Some(json!({"matchLabels": {"app": "a"}})),
            json!({"app": "a", "b": "c"}),
        );
        let new = with_selector(
            Some(json!({"matchLabels": {"app": "a", "b": "c"}})),
            json!({"app": "a", "b": "c"}),
        );
        let got: Vec<String> = validate_update(ds_info(), &old, &new)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(
            got,
            ["spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"a\",\"b\":\"c\"}}: field is immutable"]
        );
        assert!(validate_update(ds_info(), &old, &old).is_empty());
    }

    fn ds_info() -> &'static ResourceInfo {
        resources::lookup("apps", "v1", "daemonsets").unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn api_defaults_and_template_generation() {
        let mut ds = json!({"metadata": {"name": "d"},
                            "spec": {"template": {"spec": {"containers": []}}}});
        set_defaults(ds_info(), &mut ds, None);
        assert_eq!(
            ds,
            json!({"metadata": {"name": "d",
                                "annotations": {TEMPLATE_GENERATION_ANNOTATION: "1"}},
                   "spec": {"template": {"spec": {"containers": []}},
                            "revisionHistoryLimit": 10,
                            "updateStrategy": {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}})
        );
        let mut same = ds.clone();
        same["metadata"]["labels"] = json!({"a": "b"});
        set_defaults(ds_info(), &mut same, Some(&ds));
        assert_eq!(template_generation(&same), Some(1));
        let mut changed = ds.clone();
        changed["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        changed["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        set_defaults(ds_info(), &mut changed, Some(&ds));
        assert_eq!(template_generation(&changed), Some(2));
        assert_eq!(
            changed["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
    }
}

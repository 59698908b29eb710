//! The Deployment controller's arithmetic, template hashing, conditions and ReplicaSet
//! annotations: pure functions of the objects, tested without a store.
//!
//! Upstream: pkg/controller/deployment/util/deployment_util.go and
//! pkg/controller/deployment/progress.go.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{DESIRED_REPLICAS, MAX_REPLICAS, POD_TEMPLATE_HASH, REVISION, REVISION_HISTORY};
use crate::meta;
use crate::pv_controller::{selector_matches, str_at};

/// Deployment annotations not copied onto its ReplicaSets.
pub(super) const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// The alphabet of upstream's rand.SafeEncodeString: no vowels (no words), no look-alikes.
pub(super) const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// What stops a Deployment from being rolled out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeploymentError {
    /// `maxSurge` or `maxUnavailable` is neither an integer nor a percentage.
    #[error("invalid value for IntOrString: invalid type: string {0:?}")]
    InvalidIntOrPercent(String),
}

pub(super) fn int_at(obj: &Value, p: &str) -> i64 {
    obj.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// `spec.replicas`, 1 when unset (as defaulting writes it).
pub fn replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// An integer-or-percentage scaled to `total`: a percentage rounds up or down as asked
/// (upstream's GetScaledValueFromIntOrPercent); unset is 0.
pub fn scaled_value(v: Option<&Value>, total: i64, round_up: bool) -> Result<i64, DeploymentError> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| DeploymentError::InvalidIntOrPercent(n.to_string())),
        Some(Value::String(s)) => {
            let percent = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .ok_or_else(|| DeploymentError::InvalidIntOrPercent(s.clone()))?;
            let scaled = percent * total;
            Ok(if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            })
        }
        Some(other) => Err(DeploymentError::InvalidIntOrPercent(other.to_string())),
    }
}

pub(super) fn is_rolling_update(d: &Value) -> bool {
    str_at(d, "/spec/strategy/type") != "Recreate"
}

/// `(maxSurge, maxUnavailable)` of a rolling Deployment as pod counts: surge rounded up,
/// unavailability down, and one pod unavailable when both are 0, so that a rollout can
/// always proceed (upstream's ResolveFenceposts).
pub fn resolve_fenceposts(d: &Value) -> Result<(i64, i64), DeploymentError> {
    let desired = replicas(d);
    let surge = scaled_value(
        d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
        desired,
        true,
    )?;
    let unavailable = scaled_value(
        d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
        false,
    )?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

/// Pods above `spec.replicas` a rollout may make (0 for Recreate).
pub fn max_surge(d: &Value) -> Result<i64, DeploymentError> {
    if !is_rolling_update(d) {
        return Ok(0);
    }
    Ok(resolve_fenceposts(d)?.0)
}

/// Pods below `spec.replicas` a rollout may leave unavailable (0 for Recreate or no
/// replicas; never more than `spec.replicas`).
pub fn max_unavailable(d: &Value) -> Result<i64, DeploymentError> {
    if !is_rolling_update(d) || replicas(d) == 0 {
        return Ok(0);
    }
    Ok(resolve_fenceposts(d)?.1.min(replicas(d)))
}

/// The new ReplicaSet's size in a rolling update: up by what the surge leaves room for,
/// never past `spec.replicas` (upstream's NewRSNewReplicas).
pub fn new_rs_new_replicas(
    d: &Value,
    all: &[&Value],
    new_rs_replicas: i64,
) -> Result<i64, DeploymentError> {
    if !is_rolling_update(d) {
        return Ok(replicas(d));
    }
    let max_total = replicas(d) + max_surge(d)?;
    let current: i64 = all.iter().map(|rs| replicas(rs)).sum();
    if current >= max_total {
        return Ok(new_rs_replicas);
    }
    let up = (max_total - current).min(replicas(d) - new_rs_replicas);
    Ok(new_rs_replicas + up.max(0))
}

/// `value` with every null member removed, recursively: templates a client sends with
/// `creationTimestamp: null` equal those it leaves it out of.
pub(super) fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// A template without nulls, the `pod-template-hash` label, or empty labels.
pub(super) fn comparable_template(template: Option<&Value>) -> Value {
    let mut t = without_nulls(template.unwrap_or(&Value::Null));
    if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(POD_TEMPLATE_HASH);
        }
        for field in ["labels", "annotations"] {
            if meta
                .get(field)
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                meta.remove(field);
            }
        }
        if meta.is_empty() {
            if let Some(m) = t.as_object_mut() {
                m.remove("metadata");
            }
        }
    }
    t
}

/// Whether two pod templates are the same but for the `pod-template-hash` label (upstream's
/// EqualIgnoreHash).
pub fn equal_ignore_hash(a: Option<&Value>, b: Option<&Value>) -> bool {
    comparable_template(a) == comparable_template(b)
}

/// Writes `value` as JSON with object keys sorted, so that equal values hash alike.
pub(super) fn canonical_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, &Value> = m.iter().collect();
            out.push(b'{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(k).unwrap_or_default());
                out.push(b':');
                canonical_json(v, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(v, out);
            }
            out.push(b']');
        }
        other => out.extend(serde_json::to_vec(other).unwrap_or_default()),
    }
}

/// FNV-1a, 32 bits.
pub(super) fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Upstream's rand.SafeEncodeString: each byte mapped into [`SAFE_ALPHABET`].
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// The `pod-template-hash` of a template and the Deployment's `collisionCount`: FNV-32a of
/// the template (with the count's four little-endian bytes after it, when there is one),
/// its decimal form safe-encoded, as upstream's ComputeHash does over its own encoding.
pub fn compute_hash(template: Option<&Value>, collision_count: Option<i64>) -> String {
    let mut bytes = Vec::new();
    canonical_json(&comparable_template(template), &mut bytes);
    if let Some(count) = collision_count {
        bytes.extend((count as u32).to_le_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

pub(super) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

pub(super) fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    if !obj
        .pointer("/metadata/annotations")
        .is_some_and(Value::is_object)
    {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][key] = json!(value);
}

/// A ReplicaSet's revision, 0 when it has none or it does not parse.
pub fn revision(rs: &Value) -> i64 {
    annotation(rs, REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// One condition as upstream's NewDeploymentCondition makes it, at `now`.
pub fn condition(kind: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
           "reason": reason, "message": message})
}

pub(super) fn conditions_mut(status: &mut Map<String, Value>) -> Option<&mut Vec<Value>> {
    if !status.get("conditions").is_some_and(Value::is_array) {
        status.insert("conditions".into(), json!([]));
    }
    status.get_mut("conditions").and_then(Value::as_array_mut)
}

/// The condition of `kind` in a status.
pub fn get_condition<'a>(status: &'a Map<String, Value>, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == kind)
}

/// Sets a condition as upstream's SetDeploymentCondition: nothing changes when one of the
/// same type has the same status and reason; the same status keeps its transition time;
/// the new one goes last.
pub fn set_condition(status: &mut Map<String, Value>, mut cond: Value) {
    let kind = str_at(&cond, "/type").to_string();
    if let Some(current) = get_condition(status, &kind) {
        if str_at(current, "/status") == str_at(&cond, "/status") {
            if str_at(current, "/reason") == str_at(&cond, "/reason") {
                return;
            }
            cond["lastTransitionTime"] = current
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or(Value::Null);
        }
    }
    if let Some(conditions) = conditions_mut(status) {
        conditions.retain(|c| str_at(c, "/type") != kind);
        conditions.push(cond);
    }
}

pub(super) fn remove_condition(status: &mut Map<String, Value>, kind: &str) {
    if let Some(Value::Array(a)) = status.get_mut("conditions") {
        a.retain(|c| str_at(c, "/type") != kind);
    }
}

pub(super) fn status_of(obj: &Value) -> Map<String, Value> {
    obj.get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn count(status: &Map<String, Value>, field: &str) -> i64 {
    status.get(field).and_then(Value::as_i64).unwrap_or(0)
}

/// The Deployment's status from its ReplicaSets (upstream's calculateStatus), keeping its
/// conditions and setting `Available`.
pub fn calculate_status(
    d: &Value,
    all: &[&Value],
    new: Option<&Value>,
    now: &str,
) -> Result<Map<String, Value>, DeploymentError> {
    let sum = |p: &str| all.iter().map(|rs| int_at(rs, p)).sum::<i64>();
    let available = sum("/status/availableReplicas");
    let total: i64 = all.iter().map(|rs| replicas(rs)).sum();
    let current = status_of(d);
    let mut status = Map::new();
    status.insert(
        "observedGeneration".into(),
        json!(int_at(d, "/metadata/generation")),
    );
    // Zero counts are left out, as upstream's omitempty does.
    for (field, n) in [
        ("replicas", sum("/status/replicas")),
        (
            "updatedReplicas",
            new.map_or(0, |rs| int_at(rs, "/status/replicas")),
        ),
        ("readyReplicas", sum("/status/readyReplicas")),
        ("availableReplicas", available),
        ("unavailableReplicas", (total - available).max(0)),
    ] {
        if n != 0 {
            status.insert(field.into(), json!(n));
        }
    }
    if let Some(c) = current.get("collisionCount") {
        status.insert("collisionCount".into(), c.clone());
    }
    if let Some(c) = current.get("conditions") {
        status.insert("conditions".into(), c.clone());
    }
    let cond = if available >= replicas(d) - max_unavailable(d)? {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            now,
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            now,
        )
    };
    set_condition(&mut status, cond);
    Ok(status)
}

pub(super) fn has_progress_deadline(d: &Value) -> bool {
    d.pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s != i64::from(i32::MAX))
}

/// Whether every replica is updated and available and the latest spec is observed
/// (upstream's DeploymentComplete).
pub fn deployment_complete(d: &Value, status: &Map<String, Value>) -> bool {
    let want = replicas(d);
    count(status, "updatedReplicas") == want
        && count(status, "replicas") == want
        && count(status, "availableReplicas") == want
        && count(status, "observedGeneration") >= int_at(d, "/metadata/generation")
}

/// Whether `new` is further along than the Deployment's stored status: more updated, fewer
/// old, more ready or more available pods (upstream's DeploymentProgressing).
pub fn deployment_progressing(d: &Value, new: &Map<String, Value>) -> bool {
    let old = status_of(d);
    let old_old = count(&old, "replicas") - count(&old, "updatedReplicas");
    let new_old = count(new, "replicas") - count(new, "updatedReplicas");
    count(new, "updatedReplicas") > count(&old, "updatedReplicas")
        || new_old < old_old
        || count(new, "readyReplicas") > count(&old, "readyReplicas")
        || count(new, "availableReplicas") > count(&old, "availableReplicas")
}

/// Whether the last progress is older than `progressDeadlineSeconds` (upstream's
/// DeploymentTimedOut).
pub fn deployment_timed_out(d: &Value, new: &Map<String, Value>) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(cond) = get_condition(new, "Progressing") else {
        return false;
    };
    match str_at(cond, "/reason") {
        "NewReplicaSetAvailable" => false,
        "ProgressDeadlineExceeded" => true,
        _ => {
            let deadline = int_at(d, "/spec/progressDeadlineSeconds");
            meta::age_seconds(str_at(cond, "/lastUpdateTime")).is_some_and(|age| age > deadline)
        }
    }
}

/// The status a rollout step leaves (upstream's syncRolloutStatus): [`calculate_status`]
/// and the `Progressing` condition.
pub fn rollout_status(
    d: &Value,
    all: &[&Value],
    new: Option<&Value>,
    now: &str,
) -> Result<Map<String, Value>, DeploymentError> {
    let mut status = calculate_status(d, all, new, now)?;
    if !has_progress_deadline(d) {
        remove_condition(&mut status, "Progressing");
    }
    let current = get_condition(&status, "Progressing").cloned();
    let complete_already = count(&status, "replicas") == count(&status, "updatedReplicas")
        && current
            .as_ref()
            .is_some_and(|c| str_at(c, "/reason") == "NewReplicaSetAvailable");
    if !has_progress_deadline(d) || complete_already {
        return Ok(status);
    }
    let subject = |what: &str| match new {
        Some(rs) => format!("ReplicaSet {:?} {what}", str_at(rs, "/metadata/name")),
        None => format!("Deployment {:?} {what}", str_at(d, "/metadata/name")),
    };
    if deployment_complete(d, &status) {
        let msg = subject("has successfully progressed.");
        set_condition(
            &mut status,
            condition("Progressing", "True", "NewReplicaSetAvailable", &msg, now),
        );
    } else if deployment_progressing(d, &status) {
        let msg = subject("is progressing.");
        let mut cond = condition("Progressing", "True", "ReplicaSetUpdated", &msg, now);
        if let Some(current) = &current {
            if str_at(current, "/status") == "True" {
                cond["lastTransitionTime"] = current
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            remove_condition(&mut status, "Progressing");
        }
        set_condition(&mut status, cond);
    } else if deployment_timed_out(d, &status) {
        let msg = subject("has timed out progressing.");
        set_condition(
            &mut status,
            condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                &msg,
                now,
            ),
        );
    }
    Ok(status)
}

/// When to look again at a Deployment whose rollout may time out (upstream's
/// requeueStuckDeployment).
pub(super) fn requeue_stuck(d: &Value, status: &Map<String, Value>) -> Option<Duration> {
    let cond = get_condition(status, "Progressing")?;
    if !has_progress_deadline(d)
        || deployment_complete(d, status)
        || str_at(cond, "/reason") == "ProgressDeadlineExceeded"
    {
        return None;
    }
    let age = meta::age_seconds(str_at(cond, "/lastUpdateTime")).unwrap_or(0);
    let left = int_at(d, "/spec/progressDeadlineSeconds") - age;
    // Past the deadline by the clock's second resolution: look again in a second.
    Some(Duration::from_secs(left.max(0).unsigned_abs() + 1))
}

/// Whether the Deployment's selector selects the object; an empty or missing selector
/// selects nothing.
pub(super) fn selects(d: &Value, obj: &Value) -> bool {
    let Some(selector) = d
        .pointer("/spec/selector")
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
    else {
        return false;
    };
    selector_matches(selector, obj.pointer("/metadata/labels"))
}

/// Old ReplicaSets oldest first (by creation, then name).
pub(super) fn by_creation(a: &Value, b: &Value) -> std::cmp::Ordering {
    str_at(a, "/metadata/creationTimestamp")
        .cmp(str_at(b, "/metadata/creationTimestamp"))
        .then_with(|| str_at(a, "/metadata/name").cmp(str_at(b, "/metadata/name")))
}

/// Copies the Deployment's annotations onto its new ReplicaSet and raises the ReplicaSet's
/// revision to `new_revision` (keeping the one it had in the revision history); a ReplicaSet
/// being made also gets the replica annotations. True when anything changed (upstream's
/// SetNewReplicaSetAnnotations).
pub(super) fn set_new_replica_set_annotations(
    d: &Value,
    rs: &mut Value,
    new_revision: &str,
    exists: bool,
    surge: i64,
) -> bool {
    let mut changed = false;
    if let Some(annotations) = d
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (k, v) in annotations {
            let Some(v) = v.as_str() else { continue };
            if ANNOTATIONS_TO_SKIP.contains(&k.as_str()) || annotation(rs, k) == Some(v) {
                continue;
            }
            set_annotation(rs, k, v);
            changed = true;
        }
    }
    let old_revision = annotation(rs, REVISION).unwrap_or("").to_string();
    let old: i64 = match old_revision.parse() {
        Ok(n) => n,
        Err(_) if old_revision.is_empty() => 0,
        Err(_) => return false,
    };
    let new: i64 = new_revision.parse().unwrap_or(0);
    if old < new {
        set_annotation(rs, REVISION, new_revision);
        changed = true;
        if !old_revision.is_empty() {
            let history = match annotation(rs, REVISION_HISTORY) {
                Some(h) if !h.is_empty() => format!("{h},{old_revision}"),
                _ => old_revision.clone(),
            };
            set_annotation(rs, REVISION_HISTORY, &history);
        }
    }
    if !exists {
        let want = replicas(d);
        set_annotation(rs, DESIRED_REPLICAS, &want.to_string());
        set_annotation(rs, MAX_REPLICAS, &(want + surge).to_string());
        changed = true;
    }
    changed
}

//! Update validation the real API server applies and clients run into: which parts of a pod's
//! spec may change after it is created.
//!
//! Upstream: pkg/apis/core/validation/validation.go (ValidatePodUpdate and the helpers it
//! calls). Errors are field errors, answered together as one 422 (see
//! [`crate::status::ApiError::invalid_fields`]).

use serde_json::{Map, Value};

/// One field error, as apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path, e.g. `spec.schedulingGates[1].name`.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// Why.
    pub detail: String,
}

/// apimachinery's `field.ErrorType`s used here.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldErrorKind {
    /// `Forbidden`.
    Forbidden,
    /// `Invalid value: V` with the offending value.
    Invalid(Value),
    /// `Required value`.
    Required,
}

impl FieldError {
    fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Forbidden,
            detail: detail.into(),
        }
    }

    fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Invalid(value),
            detail: detail.into(),
        }
    }

    /// `Forbidden: …`, `Invalid value: 5: …`, `Required value` (apimachinery's ErrorBody).
    pub fn body(&self) -> String {
        let (head, detail) = match &self.kind {
            FieldErrorKind::Forbidden => ("Forbidden".to_string(), &self.detail),
            FieldErrorKind::Invalid(v) => (format!("Invalid value: {v}"), &self.detail),
            FieldErrorKind::Required => ("Required value".to_string(), &self.detail),
        };
        if detail.is_empty() {
            head
        } else {
            format!("{head}: {detail}")
        }
    }

    /// The `reason` of the cause in the `Status`.
    pub fn cause_reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Invalid(_) => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
        }
    }
}

/// The fields a pod update may change, in upstream's words (its message lists them).
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn list<'a>(spec: &'a Value, key: &str) -> &'a [Value] {
    spec.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether two values are equal as upstream's semantic equality sees them here: `null`
/// fields and empty lists count as absent.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null() && !v.as_array().is_some_and(Vec::is_empty))
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

/// Checks a pod update (the main resource: not status, binding or eviction). `old` and
/// `new` are whole pods; `new` is defaulted already. Returns every error found.
pub fn validate_pod_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let old_spec = old.get("spec").unwrap_or(&empty);
    let new_spec = new.get("spec").unwrap_or(&empty);
    let mut errs = Vec::new();

    // Containers: neither added nor removed; images present and trimmed.
    for key in ["containers", "initContainers"] {
        let (o, n) = (list(old_spec, key), list(new_spec, key));
        if o.len() != n.len() {
            errs.push(FieldError::forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
        for (i, c) in n.iter().enumerate() {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            let field = format!("spec.{key}[{i}].image");
            if image.is_empty() {
                errs.push(FieldError {
                    field,
                    kind: FieldErrorKind::Required,
                    detail: String::new(),
                });
            } else if image.trim() != image {
                errs.push(FieldError::invalid(
                    field,
                    Value::from(image),
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }

    // activeDeadlineSeconds: set from nothing, or lowered; never removed.
    let deadline = |s: &Value| s.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (deadline(old_spec), deadline(new_spec)) {
        (_, Some(n)) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                Value::from(n),
                format!("must be between 0 and {}, inclusive", i32::MAX),
            ));
            return errs;
        }
        (Some(o), Some(n)) if o < n => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                Value::from(n),
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (Some(_), None) => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // Tolerations: every old one still there (only its tolerationSeconds may change).
    let without_seconds = |t: &Value| {
        let mut t = normalized(t);
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_tolerations: Vec<Value> = list(new_spec, "tolerations")
        .iter()
        .map(without_seconds)
        .collect();
    if list(old_spec, "tolerations")
        .iter()
        .any(|t| !new_tolerations.contains(&without_seconds(t)))
    {
        errs.push(FieldError::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }

    // Scheduling gates: only removed.
    let gate = |g: &Value| g.get("name").and_then(Value::as_str).map(str::to_string);
    let old_gates: Vec<String> = list(old_spec, "schedulingGates")
        .iter()
        .filter_map(gate)
        .collect();
    for (i, g) in list(new_spec, "schedulingGates").iter().enumerate() {
        let name = gate(g).unwrap_or_default();
        if !old_gates.contains(&name) {
            errs.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }

    // Everything else is immutable: take the updatable fields from the old spec and compare.
    let (old_n, mut munged) = (normalized(old_spec), normalized(new_spec));
    if let (Some(m), Some(o)) = (munged.as_object_mut(), old_n.as_object()) {
        for key in ["containers", "initContainers"] {
            let old_images: Vec<Value> = list(&old_n, key)
                .iter()
                .map(|c| c.get("image").cloned().unwrap_or(Value::Null))
                .collect();
            if let Some(cs) = m.get_mut(key).and_then(Value::as_array_mut) {
                for (c, image) in cs.iter_mut().zip(old_images) {
                    if let Some(c) = c.as_object_mut() {
                        match image {
                            Value::Null => c.remove("image"),
                            image => c.insert("image".into(), image),
                        };
                    }
                }
            }
        }
        for key in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
            match o.get(key) {
                Some(v) => m.insert(key.into(), v.clone()),
                None => m.remove(key),
            };
        }
        let grace = |s: &Map<String, Value>| {
            s.get("terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        };
        if grace(o).is_some_and(|g| g < 0) && grace(m) == Some(1) {
            if let Some(g) = o.get("terminationGracePeriodSeconds") {
                m.insert("terminationGracePeriodSeconds".into(), g.clone());
            }
        }
        // A gated pod may gain nodeSelector entries (none removed or changed).
        if !old_gates.is_empty() {
            let selector = |s: &Map<String, Value>| {
                s.get("nodeSelector")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default()
            };
            let (before, after) = (selector(o), selector(m));
            if before != after {
                if before.iter().all(|(k, v)| after.get(k) == Some(v)) {
                    match o.get("nodeSelector") {
                        Some(v) => m.insert("nodeSelector".into(), v.clone()),
                        None => m.remove("nodeSelector"),
                    };
                } else {
                    errs.push(FieldError::invalid(
                        "spec.nodeSelector",
                        Value::Object(after),
                        "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
                    ));
                    m.insert("nodeSelector".into(), Value::Object(before));
                }
            }
        }
    }
    if munged != old_n {
        let mut lines = Vec::new();
        diff("spec", &old_n, &munged, &mut lines);
        errs.push(FieldError::forbidden(
            "spec",
            format!(
                "pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n{}",
                lines.join("\n")
            ),
        ));
    }
    errs
}

/// Lines naming each changed field: `  spec.nodeName: "a" -> "b"` (absent as `<none>`).
/// Upstream prints a Go diff of the spec here; clients only show it.
fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    const MAX_LINES: usize = 20;
    if out.len() >= MAX_LINES || old == new {
        return;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            let none = Value::Null;
            for k in keys {
                let (a, b) = (o.get(k).unwrap_or(&none), n.get(k).unwrap_or(&none));
                diff(&format!("{path}.{k}"), a, b, out);
            }
        }
        (Value::Array(o), Value::Array(n)) if o.len() == n.len() => {
            for (i, (a, b)) in o.iter().zip(n).enumerate() {
                diff(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ => {
            let show = |v: &Value| match v {
                Value::Null => "<none>".to_string(),
                v => v.to_string(),
            };
            out.push(format!("  {path}: {} -> {}", show(old), show(new)));
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn pod(spec: Value) -> Value {
        let mut s = json!({"containers": [{"name": "c", "image": "nginx:1"}]});
        if let (Some(m), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            m.extend(extra.clone());
        }
        json!({"metadata": {"name": "p"}, "spec": s})
    }

    fn check(old: Value, new: Value) -> Vec<String> {
        validate_pod_update(&pod(old), &pod(new))
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    const FORBIDDEN: &str = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n";

    #[rstest]
    #[case::no_change(json!({}), json!({}), vec![])]
    #[case::image_change(json!({}), json!({"containers": [{"name": "c", "image": "nginx:2"}]}), vec![])]
    #[case::null_and_empty_lists_are_absent(json!({}), json!({"volumes": [], "hostname": null}), vec![])]
    #[case::node_name_set(json!({}), json!({"nodeName": "n1"}), vec![format!("{FORBIDDEN}  spec.nodeName: <none> -> \"n1\"")])]
    #[case::node_name_changed(json!({"nodeName": "n1"}), json!({"nodeName": "n2"}), vec![format!("{FORBIDDEN}  spec.nodeName: \"n1\" -> \"n2\"")])]
    #[case::container_port_changed(
        json!({}),
        json!({"containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}),
        vec![format!("{FORBIDDEN}  spec.containers[0].ports: <none> -> [{{\"containerPort\":80}}]")]
    )]
    #[case::container_added(json!({}), json!({"containers": [{"name": "c", "image": "a"}, {"name": "d", "image": "b"}]}), vec!["spec.containers: Forbidden: pod updates may not add or remove containers".to_string()])]
    #[case::image_removed(json!({}), json!({"containers": [{"name": "c"}]}), vec!["spec.containers[0].image: Required value".to_string()])]
    #[case::deadline_set(json!({}), json!({"activeDeadlineSeconds": 60}), vec![])]
    #[case::deadline_lowered(json!({"activeDeadlineSeconds": 60}), json!({"activeDeadlineSeconds": 30}), vec![])]
    #[case::deadline_raised(json!({"activeDeadlineSeconds": 30}), json!({"activeDeadlineSeconds": 60}), vec!["spec.activeDeadlineSeconds: Invalid value: 60: must be less than or equal to previous value".to_string()])]
    #[case::deadline_removed(json!({"activeDeadlineSeconds": 30}), json!({}), vec!["spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value".to_string()])]
    #[case::toleration_added(
        json!({"tolerations": [{"key": "a", "operator": "Exists"}]}),
        json!({"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
        vec![]
    )]
    #[case::toleration_seconds_changed(
        json!({"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]}),
        json!({"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]}),
        vec![]
    )]
    #[case::toleration_removed(
        json!({"tolerations": [{"key": "a", "operator": "Exists"}]}),
        json!({}),
        vec!["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds".to_string()]
    )]
    #[case::gate_removed(json!({"schedulingGates": [{"name": "g1"}, {"name": "g2"}]}), json!({"schedulingGates": [{"name": "g2"}]}), vec![])]
    #[case::gate_added(
        json!({"schedulingGates": [{"name": "g1"}]}),
        json!({"schedulingGates": [{"name": "g1"}, {"name": "g2"}]}),
        vec!["spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'g2'".to_string()]
    )]
    #[case::gated_pod_gains_a_node_selector_entry(
        json!({"schedulingGates": [{"name": "g"}], "nodeSelector": {"a": "b"}}),
        json!({"schedulingGates": [{"name": "g"}], "nodeSelector": {"a": "b", "c": "d"}}),
        vec![]
    )]
    #[case::gated_pod_changes_a_node_selector_entry(
        json!({"schedulingGates": [{"name": "g"}], "nodeSelector": {"a": "b"}}),
        json!({"schedulingGates": [{"name": "g"}], "nodeSelector": {"a": "z"}}),
        vec!["spec.nodeSelector: Invalid value: {\"a\":\"z\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)".to_string()]
    )]
    #[case::ungated_pod_gains_a_node_selector(json!({}), json!({"nodeSelector": {"a": "b"}}), vec![format!("{FORBIDDEN}  spec.nodeSelector: <none> -> {{\"a\":\"b\"}}")])]
    #[case::negative_grace_period_may_become_one(json!({"terminationGracePeriodSeconds": -1}), json!({"terminationGracePeriodSeconds": 1}), vec![])]
    #[case::grace_period_is_otherwise_immutable(json!({"terminationGracePeriodSeconds": 30}), json!({"terminationGracePeriodSeconds": 10}), vec![format!("{FORBIDDEN}  spec.terminationGracePeriodSeconds: 30 -> 10")])]
    fn pod_updates(#[case] old: Value, #[case] new: Value, #[case] want: Vec<String>) {
        assert_eq!(check(old, new), want);
    }
}

//! The PATCH body types: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic merge
//! for the Kubernetes kinds this server serves.
//!
//! Upstream: staging/src/k8s.io/apimachinery/pkg/util/strategicpatch. Merge keys come from the
//! `patchMergeKey` tags of the Go types; a small table here covers the lists kubectl patches.

use serde_json::{Map, Value};

use crate::status::ApiError;

/// A patch body, by its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply, approximated as create-or-merge).
    Apply,
}

impl PatchType {
    /// The patch type of a Content-Type header value (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Applies `body` of type `kind` to a copy of `original` and returns the result.
pub fn apply(original: &Value, body: &[u8], kind: PatchType) -> Result<Value, ApiError> {
    match kind {
        PatchType::Merge => {
            let p: Value = parse_json(body)?;
            let mut out = original.clone();
            json_patch::merge(&mut out, &p);
            Ok(out)
        }
        PatchType::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            let mut out = original.clone();
            json_patch::patch(&mut out, &p).map_err(|e| {
                if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) {
                    ApiError {
                        code: 422,
                        reason: "Invalid",
                        message: format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                        details: None,
                    }
                } else {
                    ApiError::bad_request(format!("JSON patch failed: {e}"))
                }
            })?;
            Ok(out)
        }
        PatchType::StrategicMerge => {
            let p: Value = parse_json(body)?;
            strategic_merge(original, &p)
        }
        PatchType::Apply => {
            let p: Value = serde_yaml_ng::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            strategic_merge(original, &p)
        }
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Replaced whole (the default, and taints/tolerations).
    Replace,
    /// Elements merged by this key.
    MergeByKey(&'static str),
    /// A set of primitives (finalizers).
    PrimitiveSet,
}

/// The strategy of list `field` whose parent field is `parent` (`""` at the top).
fn list_strategy(parent: &str, field: &str) -> ListStrategy {
    use ListStrategy::*;
    match (parent, field) {
        (
            _,
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "imagePullSecrets"
            | "schedulingGates"
            | "env"
            | "resourceClaims",
        ) => MergeByKey("name"),
        ("containers" | "initContainers" | "ephemeralContainers", "ports") => {
            MergeByKey("containerPort")
        }
        ("spec", "ports") => MergeByKey("port"),
        (_, "volumeMounts") => MergeByKey("mountPath"),
        (_, "volumeDevices") => MergeByKey("devicePath"),
        (_, "hostAliases" | "podIPs" | "hostIPs") => MergeByKey("ip"),
        (_, "conditions" | "addresses") => MergeByKey("type"),
        (_, "topologySpreadConstraints") => MergeByKey("topologyKey"),
        ("metadata", "ownerReferences") => MergeByKey("uid"),
        ("metadata", "finalizers") => PrimitiveSet,
        _ => Replace,
    }
}

/// Applies a strategic merge patch to a copy of `original`.
pub fn strategic_merge(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => Ok(Value::Object(merge_map(o, p, "")?)),
        (_, Value::Object(p)) => Ok(Value::Object(merge_map(&Map::new(), p, "")?)),
        _ => Err(ApiError::bad_request(
            "strategic merge patch must be a JSON object",
        )),
    }
}

fn merge_map(
    orig: &Map<String, Value>,
    patch: &Map<String, Value>,
    field: &str,
) -> Result<Map<String, Value>, ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut m = patch.clone();
            m.remove("$patch");
            return Ok(strip_directives(m));
        }
        Some("delete") => return Ok(Map::new()),
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other} in map"
            )))
        }
    }
    let mut out = orig.clone();
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    for (k, pv) in patch {
        if k == "$patch" {
            continue;
        }
        if k == "$retainKeys" {
            if let Some(keep) = pv.as_array() {
                let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
                out.retain(|key, _| keep.contains(&key.as_str()) || patch.contains_key(key));
            }
            continue;
        }
        if let Some(list) = k.strip_prefix("$setElementOrder/") {
            orders.push((list.to_string(), pv.as_array().cloned().unwrap_or_default()));
            continue;
        }
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (out.get_mut(list), pv.as_array()) {
                cur.retain(|v| !del.contains(v));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let merged = match (orig.get(k), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => Value::Object(merge_map(o, p, k)?),
            (_, Value::Object(p)) => Value::Object(merge_map(&Map::new(), p, k)?),
            (cur, Value::Array(p)) => {
                let cur = match cur {
                    Some(Value::Array(c)) => c.as_slice(),
                    _ => &[],
                };
                Value::Array(merge_list(cur, p, field, k)?)
            }
            (_, v) => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    for (list, order) in orders {
        if let (Some(Value::Array(items)), ListStrategy::MergeByKey(key)) =
            (out.get_mut(&list), list_strategy(field, &list))
        {
            let pos = |v: &Value| {
                order
                    .iter()
                    .position(|o| o.get(key).is_some() && o.get(key) == v.get(key))
                    .unwrap_or(usize::MAX)
            };
            items.sort_by_key(pos);
        }
    }
    Ok(out)
}

fn strip_directives(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        if let Value::Object(inner) = v {
            *inner = strip_directives(std::mem::take(inner));
        }
    }
    m
}

fn merge_list(
    cur: &[Value],
    patch: &[Value],
    parent: &str,
    field: &str,
) -> Result<Vec<Value>, ApiError> {
    match list_strategy(parent, field) {
        ListStrategy::Replace => {
            // `[{"$patch":"replace"}]`-style directives mean replace as well.
            Ok(patch
                .iter()
                .filter(|v| v.get("$patch").is_none())
                .cloned()
                .map(|v| match v {
                    Value::Object(m) => Value::Object(strip_directives(m)),
                    v => v,
                })
                .collect())
        }
        ListStrategy::PrimitiveSet => {
            let mut out = cur.to_vec();
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(out)
        }
        ListStrategy::MergeByKey(key) => {
            if patch
                .iter()
                .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
            {
                return Ok(patch
                    .iter()
                    .filter(|p| p.get("$patch").is_none())
                    .cloned()
                    .collect());
            }
            let mut out = cur.to_vec();
            for p in patch {
                let Value::Object(pm) = p else {
                    return Err(ApiError::bad_request(format!(
                        "unable to merge list {field}: element {p} is not an object"
                    )));
                };
                let Some(kv) = pm.get(key) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {p} does not contain declared merge key: {key}"
                    )));
                };
                let idx = out.iter().position(|o| o.get(key) == Some(kv));
                let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
                match (idx, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        let merged = match &out[i] {
                            Value::Object(om) => merge_map(om, pm, field)?,
                            _ => merge_map(&Map::new(), pm, field)?,
                        };
                        out[i] = Value::Object(merged);
                    }
                    (None, false) => out.push(Value::Object(merge_map(&Map::new(), pm, field)?)),
                }
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
               "spec": {"containers": [
                   {"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": "1"}},
                    "env": [{"name": "A", "value": "1"}]}],
                   "tolerations": [{"key": "k", "operator": "Exists"}]},
               "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    }

    #[rstest]
    #[case::cordon(json!({"spec": {"unschedulable": true}}), "/spec/unschedulable", json!(true))]
    #[case::null_deletes(json!({"metadata": {"labels": {"a": null}}}), "/metadata/labels", json!({}))]
    #[case::containers_merge_by_name_keep_resources(
        json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}),
        "/spec/containers/0/resources/requests/cpu", json!("1"))]
    #[case::new_container_appended(
        json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "d"}],
                        "containers": [{"name": "d", "image": "busybox"}]}}),
        "/spec/containers/1/name", json!("d"))]
    #[case::env_merge_by_name(
        json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]}}),
        "/spec/containers/0/env/1/name", json!("B"))]
    #[case::delete_directive(
        json!({"spec": {"containers": [{"name": "c", "$patch": "delete"}]}}),
        "/spec/containers", json!([]))]
    #[case::tolerations_replace(
        json!({"spec": {"tolerations": [{"key": "z", "operator": "Exists"}]}}),
        "/spec/tolerations", json!([{"key": "z", "operator": "Exists"}]))]
    #[case::conditions_by_type(
        json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}),
        "/status/conditions/0/type", json!("Ready"))]
    #[case::finalizers_are_a_set(
        json!({"metadata": {"finalizers": ["x", "y"]}}), "/metadata/finalizers", json!(["x", "y"]))]
    #[case::delete_from_primitive_list(
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}), "/metadata/finalizers", json!([]))]
    #[case::map_replace_directive(
        json!({"metadata": {"labels": {"$patch": "replace", "b": "2"}}}), "/metadata/labels", json!({"b": "2"}))]
    fn strategic(#[case] patch: Value, #[case] pointer: &str, #[case] want: Value) {
        let out = strategic_merge(&pod(), &patch).expect("patch applies");
        assert_eq!(out.pointer(pointer), Some(&want), "{out}");
    }

    #[test]
    fn merge_patch_replaces_lists_whole() {
        let body = br#"{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}"#;
        let out = apply(&pod(), body, PatchType::Merge).expect("applies");
        assert_eq!(out.pointer("/spec/containers/0/resources"), None);
    }

    #[rstest]
    #[case::replace(br#"[{"op":"replace","path":"/metadata/labels/a","value":"2"}]"#.as_slice(), Ok(json!("2")))]
    #[case::failed_test_is_invalid(br#"[{"op":"test","path":"/metadata/labels/a","value":"9"}]"#.as_slice(), Err(422))]
    #[case::bad_path_is_bad_request(br#"[{"op":"remove","path":"/nope/x"}]"#.as_slice(), Err(400))]
    #[case::not_a_patch(br#"{"op":"add"}"#.as_slice(), Err(400))]
    fn json_patch(#[case] body: &[u8], #[case] want: Result<Value, u16>) {
        let got = apply(&pod(), body, PatchType::Json)
            .map(|v| {
                v.pointer("/metadata/labels/a")
                    .cloned()
                    .unwrap_or(Value::Null)
            })
            .map_err(|e| e.code);
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::merge("application/merge-patch+json", Some(PatchType::Merge))]
    #[case::smp_with_charset(
        "application/strategic-merge-patch+json; charset=utf-8",
        Some(PatchType::StrategicMerge)
    )]
    #[case::apply("application/apply-patch+yaml", Some(PatchType::Apply))]
    #[case::unknown("text/plain", None)]
    fn content_types(#[case] ct: &str, #[case] want: Option<PatchType>) {
        assert_eq!(PatchType::from_content_type(ct), want);
    }
}

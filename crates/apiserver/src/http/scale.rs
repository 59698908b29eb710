//! The `scale` subresource (autoscaling/v1 `Scale`), what `kubectl scale` reads and
//! patches: `spec.replicas` of the object, its `status.replicas` and its selector in the
//! label-selector text form.
//!
//! Upstream: pkg/registry/apps/replicaset/storage (ScaleREST) and
//! staging/src/k8s.io/api/autoscaling/v1 (Scale).

use serde_json::{json, Value};

use super::{namespace_of, ObjectPath, Req};
use crate::patch::{self, PatchType};
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::validation::{FieldError, FieldErrorKind};

/// The Scale of an object with `spec.replicas`.
pub(super) fn scale_of(obj: &Value) -> Value {
    let mut metadata = serde_json::Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), v.clone());
        }
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
    "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
    "status": {
        "replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
        "selector": crate::table::format_label_selector(obj.pointer("/spec/selector"))
            .replace("<none>", ""),
    }})
}

pub(super) fn get(req: &Req<'_>, p: &ObjectPath, name: &str) -> Result<Value, ApiError> {
    let obj = req
        .st
        .store
        .get(p.info, namespace_of(p), name)
        .ok_or_else(|| ApiError::not_found(p.info, name))?;
    Ok(scale_of(&obj))
}

/// Writes the replicas of a new Scale (`PUT`) or of the current one patched (`PATCH`, when
/// `patch_type` is given) into the object.
pub(super) fn write(
    req: &Req<'_>,
    p: &ObjectPath,
    name: &str,
    patch_type: Option<PatchType>,
) -> Result<Value, ApiError> {
    let info: &ResourceInfo = p.info;
    let body = req.body;
    let updated = req.st.store.update(
        info,
        namespace_of(p),
        name,
        req.query.dry_run(),
        |current| {
            let scale = scale_of(current);
            let new = match patch_type {
                Some(kind) => patch::apply(&scale, body, kind)?,
                None => serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding Scale: {e}")))?,
            };
            let rv = |v: &Value| {
                v.pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            if let Some(want) = rv(&new) {
                if Some(&want) != rv(current).as_ref() {
                    return Err(ApiError::modified(info, name));
                }
            }
            let replicas = match new.pointer("/spec/replicas") {
                None | Some(Value::Null) => 0,
                Some(r) => r.as_i64().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "error decoding Scale: spec.replicas: expected an integer, got {r}"
                    ))
                })?,
            };
            if replicas < 0 {
                return Err(ApiError::invalid_fields(
                    "Scale",
                    "autoscaling",
                    name,
                    &[FieldError {
                        field: "spec.replicas".to_string(),
                        kind: FieldErrorKind::Invalid(json!(replicas)),
                        detail: "must be greater than or equal to 0".to_string(),
                    }],
                ));
            }
            let mut out = current.clone();
            if !out.get("spec").is_some_and(Value::is_object) {
                out["spec"] = json!({});
            }
            out["spec"]["replicas"] = json!(replicas);
            Ok(out)
        },
    )?;
    Ok(scale_of(&updated))
}

//! What the real apiserver does to an object before it is stored: decoding checks against the
//! k8s-openapi types, name validation, pod defaulting, priority admission, and the
//! events.k8s.io/v1 <-> core/v1 Event conversion.
//!
//! Upstream: pkg/apis/core/v1/defaults.go, pkg/registry/core/pod/strategy.go,
//! plugin/pkg/admission/priority, pkg/apis/events/v1/conversion.go.

use serde_json::{json, Map, Value};

use crate::meta;
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::validation::FieldError;

/// PriorityClasses every cluster has.
pub fn system_priority_classes() -> Vec<Value> {
    [
        ("system-cluster-critical", 2_000_000_000),
        ("system-node-critical", 2_000_001_000),
    ]
    .iter()
    .map(|(name, value)| {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": name}, "value": value, "globalDefault": false,
               "preemptionPolicy": "PreemptLowerPriority",
               "description": "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."})
    })
    .collect()
}

/// Checks the body decodes as the kind's k8s-openapi type (wrong types, bad quantities).
pub fn check_decodes(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    use k8s_openapi::api::{apps, coordination, core, policy, scheduling, storage};
    fn try_as<T: serde::de::DeserializeOwned>(v: &Value) -> Result<(), String> {
        T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
    }
    let v = &*with_type_meta(info, obj);
    let result = match (info.group, info.kind) {
        ("", "Namespace") => try_as::<core::v1::Namespace>(v),
        ("", "Node") => try_as::<core::v1::Node>(v),
        ("", "Pod") => try_as::<core::v1::Pod>(v),
        ("", "Event") => try_as::<core::v1::Event>(v),
        ("", "Service") => try_as::<core::v1::Service>(v),
        ("", "ConfigMap") => try_as::<core::v1::ConfigMap>(v),
        ("", "ReplicationController") => try_as::<core::v1::ReplicationController>(v),
        ("", "PersistentVolume") => try_as::<core::v1::PersistentVolume>(v),
        ("", "PersistentVolumeClaim") => try_as::<core::v1::PersistentVolumeClaim>(v),
        ("storage.k8s.io", "StorageClass") => try_as::<storage::v1::StorageClass>(v),
        ("storage.k8s.io", "CSINode") => try_as::<storage::v1::CSINode>(v),
        ("storage.k8s.io", "CSIDriver") => try_as::<storage::v1::CSIDriver>(v),
        ("storage.k8s.io", "CSIStorageCapacity") => try_as::<storage::v1::CSIStorageCapacity>(v),
        ("storage.k8s.io", "VolumeAttachment") => try_as::<storage::v1::VolumeAttachment>(v),
        ("apps", "ReplicaSet") => try_as::<apps::v1::ReplicaSet>(v),
        ("apps", "Deployment") => try_as::<apps::v1::Deployment>(v),
        ("apps", "StatefulSet") => try_as::<apps::v1::StatefulSet>(v),
        ("batch", "Job") => try_as::<k8s_openapi::api::batch::v1::Job>(v),
        ("apps", "DaemonSet") => try_as::<apps::v1::DaemonSet>(v),
        ("apps", "ControllerRevision") => try_as::<apps::v1::ControllerRevision>(v),
        ("coordination.k8s.io", _) => try_as::<coordination::v1::Lease>(v),
        ("scheduling.k8s.io", _) => try_as::<scheduling::v1::PriorityClass>(v),
        ("policy", _) => try_as::<policy::v1::PodDisruptionBudget>(v),
        ("events.k8s.io", _) => try_as::<k8s_openapi::api::events::v1::Event>(v),
        _ => Ok(()),
    };
    result.map_err(|e| {
        ApiError::bad_request(format!(
            "error decoding {} into {}: {e}",
            info.resource, info.kind
        ))
    })
}

/// Checks every quantity of the kinds that have them decodes as apimachinery's
/// ParseQuantity reads it (k8s-openapi keeps a quantity as any string): 400 `Pod in version
/// "v1" cannot be handled as a Pod: quantities must match …` otherwise, as upstream's decoder
/// answers.
pub fn check_quantities(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let mut first_error = None;
    visit_quantities(info, obj, &mut |_, v| {
        if first_error.is_none() {
            if let Some(Err(e)) = crate::quantity::parse_json(v) {
                first_error = Some(e);
            }
        }
    });
    match first_error {
        None => Ok(()),
        Some(e) => Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
            kind = info.kind,
            version = info.version
        ))),
    }
}

/// The quantities of `obj` with their field paths (`spec.containers[0].resources.requests[cpu]`),
/// for the kinds that have quantities.
pub fn quantities_of<'a>(info: &ResourceInfo, obj: &'a Value, out: &mut Vec<(String, &'a Value)>) {
    visit_quantities(info, obj, &mut |path, q| out.push((path.render(), q)));
}

/// Where a quantity is in its object, rendered only when asked: every write of a pod walks
/// its quantities, and only a bad one is named.
#[derive(Clone, Copy)]
pub enum QuantityPath<'p> {
    /// A field path written out.
    Field(&'static str),
    /// `parent.field`.
    Child(&'p QuantityPath<'p>, &'static str),
    /// `parent[index]`.
    Index(&'p QuantityPath<'p>, usize),
    /// `parent[key]`.
    Key(&'p QuantityPath<'p>, &'p str),
}

impl QuantityPath<'_> {
    /// The field path, as field errors name it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        match self {
            QuantityPath::Field(f) => out.push_str(f),
            QuantityPath::Child(p, f) => {
                p.render_into(out);
                out.push('.');
                out.push_str(f);
            }
            QuantityPath::Index(p, i) => {
                p.render_into(out);
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
            QuantityPath::Key(p, k) => {
                p.render_into(out);
                out.push('[');
                out.push_str(k);
                out.push(']');
            }
        }
    }
}

type QuantityVisitor<'v, 'a> = dyn FnMut(&QuantityPath<'_>, &'a Value) + 'v;

/// Calls `f` with every quantity of `obj` and its path, for the kinds that have quantities.
pub fn visit_quantities<'a>(info: &ResourceInfo, obj: &'a Value, f: &mut QuantityVisitor<'_, 'a>) {
    fn map_at<'a>(m: Option<&'a Value>, path: &QuantityPath<'_>, f: &mut QuantityVisitor<'_, 'a>) {
        for (k, q) in m.and_then(Value::as_object).into_iter().flatten() {
            f(&QuantityPath::Key(path, k), q);
        }
    }
    fn resources<'a>(v: &'a Value, path: &QuantityPath<'_>, f: &mut QuantityVisitor<'_, 'a>) {
        for kind in ["limits", "requests"] {
            map_at(v.get(kind), &QuantityPath::Child(path, kind), f);
        }
    }
    fn claim_spec<'a>(v: &'a Value, path: &QuantityPath<'_>, f: &mut QuantityVisitor<'_, 'a>) {
        if let Some(r) = v.get("resources") {
            resources(r, &QuantityPath::Child(path, "resources"), f);
        }
    }
    fn pod_spec<'a>(spec: &'a Value, path: &QuantityPath<'_>, f: &mut QuantityVisitor<'_, 'a>) {
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            let list_path = QuantityPath::Child(path, list);
            for (i, c) in spec
                .get(list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(r) = c.get("resources") {
                    let at = QuantityPath::Index(&list_path, i);
                    resources(r, &QuantityPath::Child(&at, "resources"), f);
                }
            }
        }
        map_at(
            spec.get("overhead"),
            &QuantityPath::Child(path, "overhead"),
            f,
        );
        if let Some(r) = spec.get("resources") {
            resources(r, &QuantityPath::Child(path, "resources"), f);
        }
        let volumes = QuantityPath::Child(path, "volumes");
        for (i, vol) in spec
            .get("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = QuantityPath::Index(&volumes, i);
            if let Some(q) = meta::at(vol, &["emptyDir", "sizeLimit"]) {
                let empty_dir = QuantityPath::Child(&at, "emptyDir");
                f(&QuantityPath::Child(&empty_dir, "sizeLimit"), q);
            }
            if let Some(s) = meta::at(vol, &["ephemeral", "volumeClaimTemplate", "spec"]) {
                let ephemeral = QuantityPath::Child(&at, "ephemeral");
                let template = QuantityPath::Child(&ephemeral, "volumeClaimTemplate");
                claim_spec(s, &QuantityPath::Child(&template, "spec"), f);
            }
        }
    }
    let at = |path: &[&str]| meta::at(obj, path);
    match (info.group, info.kind) {
        ("", "Pod") => {
            if let Some(s) = at(&["spec"]) {
                pod_spec(s, &QuantityPath::Field("spec"), f);
            }
        }
        ("", "ReplicationController") | ("apps", _) | ("batch", "Job") => {
            if let Some(s) = at(&["spec", "template", "spec"]) {
                pod_spec(s, &QuantityPath::Field("spec.template.spec"), f);
            }
            let templates = QuantityPath::Field("spec.volumeClaimTemplates");
            for (i, t) in at(&["spec", "volumeClaimTemplates"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(s) = t.get("spec") {
                    let at = QuantityPath::Index(&templates, i);
                    claim_spec(s, &QuantityPath::Child(&at, "spec"), f);
                }
            }
        }
        ("batch", "CronJob") => {
            if let Some(s) = at(&["spec", "jobTemplate", "spec", "template", "spec"]) {
                pod_spec(
                    s,
                    &QuantityPath::Field("spec.jobTemplate.spec.template.spec"),
                    f,
                );
            }
        }
        ("", "Node") => {
            let capacity = QuantityPath::Field("status.capacity");
            map_at(at(&["status", "capacity"]), &capacity, f);
            let allocatable = QuantityPath::Field("status.allocatable");
            map_at(at(&["status", "allocatable"]), &allocatable, f);
        }
        ("", "PersistentVolumeClaim") => {
            if let Some(s) = at(&["spec"]) {
                claim_spec(s, &QuantityPath::Field("spec"), f);
            }
            let capacity = QuantityPath::Field("status.capacity");
            map_at(at(&["status", "capacity"]), &capacity, f);
            let allocated = QuantityPath::Field("status.allocatedResources");
            map_at(at(&["status", "allocatedResources"]), &allocated, f);
        }
        ("", "PersistentVolume") => {
            map_at(
                at(&["spec", "capacity"]),
                &QuantityPath::Field("spec.capacity"),
                f,
            );
        }
        ("resource.k8s.io", "ResourceSlice") => {
            let devices = QuantityPath::Field("spec.devices");
            for (i, d) in at(&["spec", "devices"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let device = QuantityPath::Index(&devices, i);
                let capacity = QuantityPath::Child(&device, "capacity");
                for (k, c) in d
                    .get("capacity")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    if let Some(q) = c.get("value") {
                        f(
                            &QuantityPath::Child(&QuantityPath::Key(&capacity, k), "value"),
                            q,
                        );
                    }
                }
            }
        }
        ("storage.k8s.io", "CSIStorageCapacity") => {
            for field in ["capacity", "maximumVolumeSize"] {
                if let Some(q) = obj.get(field) {
                    f(&QuantityPath::Field(field), q);
                }
            }
        }
        _ => {}
    }
}

/// `obj` with the resource's apiVersion and kind, which the typed forms require: borrowed
/// when it has them already (every create and update has been through [`check_kind`]), a
/// copy otherwise.
fn with_type_meta<'a>(info: &ResourceInfo, obj: &'a Value) -> std::borrow::Cow<'a, Value> {
    let api_version = info.api_version();
    let has = |field: &str, want: &str| obj.get(field).and_then(Value::as_str) == Some(want);
    if has("apiVersion", &api_version) && has("kind", info.kind) {
        return std::borrow::Cow::Borrowed(obj);
    }
    let mut v = obj.clone();
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(info.kind);
    std::borrow::Cow::Owned(v)
}

/// The kind's k8s-openapi form of `obj` (decoded and encoded again), when the kind has one.
fn round_trip(info: &ResourceInfo, obj: &Value) -> Option<Result<Value, String>> {
    use k8s_openapi::api::{apps, coordination, core, policy, scheduling, storage};
    fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Result<Value, String> {
        let typed = T::deserialize(v).map_err(|e| e.to_string())?;
        serde_json::to_value(typed).map_err(|e| e.to_string())
    }
    let v = &*with_type_meta(info, obj);
    Some(match (info.group, info.kind) {
        ("", "Namespace") => rt::<core::v1::Namespace>(v),
        ("", "Node") => rt::<core::v1::Node>(v),
        ("", "Pod") => rt::<core::v1::Pod>(v),
        ("", "Event") => rt::<core::v1::Event>(v),
        ("", "Service") => rt::<core::v1::Service>(v),
        ("", "ConfigMap") => rt::<core::v1::ConfigMap>(v),
        ("", "ReplicationController") => rt::<core::v1::ReplicationController>(v),
        ("", "PersistentVolume") => rt::<core::v1::PersistentVolume>(v),
        ("", "PersistentVolumeClaim") => rt::<core::v1::PersistentVolumeClaim>(v),
        ("storage.k8s.io", "StorageClass") => rt::<storage::v1::StorageClass>(v),
        ("storage.k8s.io", "CSINode") => rt::<storage::v1::CSINode>(v),
        ("storage.k8s.io", "CSIDriver") => rt::<storage::v1::CSIDriver>(v),
        ("storage.k8s.io", "CSIStorageCapacity") => rt::<storage::v1::CSIStorageCapacity>(v),
        ("storage.k8s.io", "VolumeAttachment") => rt::<storage::v1::VolumeAttachment>(v),
        ("apps", "ReplicaSet") => rt::<apps::v1::ReplicaSet>(v),
        ("apps", "Deployment") => rt::<apps::v1::Deployment>(v),
        ("apps", "StatefulSet") => rt::<apps::v1::StatefulSet>(v),
        ("batch", "Job") => rt::<k8s_openapi::api::batch::v1::Job>(v),
        ("apps", "DaemonSet") => rt::<apps::v1::DaemonSet>(v),
        ("apps", "ControllerRevision") => rt::<apps::v1::ControllerRevision>(v),
        ("coordination.k8s.io", _) => rt::<coordination::v1::Lease>(v),
        ("scheduling.k8s.io", _) => rt::<scheduling::v1::PriorityClass>(v),
        ("policy", _) => rt::<policy::v1::PodDisruptionBudget>(v),
        ("events.k8s.io", _) => rt::<k8s_openapi::api::events::v1::Event>(v),
        _ => return None,
    })
}

/// Paths of fields in `input` that the typed form dropped: the unknown fields.
fn unknown_fields(input: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (input, typed) {
        (Value::Object(i), Value::Object(t)) => {
            for (k, v) in i {
                if v.is_null() {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match t.get(k) {
                    Some(tv) => unknown_fields(v, tv, &p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(i), Value::Array(t)) => {
            for (n, (iv, tv)) in i.iter().zip(t).enumerate() {
                unknown_fields(iv, tv, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// Paths of the fields a JSON document has more than once in one object
/// (`metadata.name`, `spec.containers[0].image`), in document order. `serde_json` keeps the
/// last of them silently; upstream's strict decoding names them. Empty when the bytes are
/// not JSON (decoding reports that).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    use serde::de::DeserializeSeed;
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let walk = DuplicateWalk {
        path: String::new(),
        out: &mut out,
    };
    if walk.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    out
}

/// One value of the document being walked by [`duplicate_fields`], at `path`.
struct DuplicateWalk<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for DuplicateWalk<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for DuplicateWalk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let DuplicateWalk { path, out } = self;
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let p = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            if !seen.insert(key) {
                out.push(p.clone());
            }
            map.next_value_seed(DuplicateWalk {
                path: p,
                out: &mut *out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let DuplicateWalk { path, out } = self;
        let mut i = 0usize;
        while seq
            .next_element_seed(DuplicateWalk {
                path: format!("{path}[{i}]"),
                out: &mut *out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
}

/// The `fieldValidation` query parameter: what to do about fields the kind does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently (`Ignore`, and the default).
    Ignore,
    /// Drop them and say so in `Warning` headers.
    Warn,
    /// Reject the request with 400.
    Strict,
}

impl FieldValidation {
    /// From the query parameter's value.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("Strict") => FieldValidation::Strict,
            Some("Warn") => FieldValidation::Warn,
            _ => FieldValidation::Ignore,
        }
    }
}

/// Checks the body decodes as the kind's k8s-openapi type (wrong types, bad quantities) and
/// looks for unknown fields as `mode` asks: returns the warnings for `Warn`, a 400
/// `strict decoding error` for `Strict`.
///
/// `duplicates` are the paths of fields the JSON body had more than once (see
/// [`duplicate_fields`]); they come first, and a field both unknown and duplicated counts
/// only as unknown, as upstream's typed decoding reports it.
pub fn check_fields(
    info: &ResourceInfo,
    obj: &Value,
    mode: FieldValidation,
    duplicates: &[String],
) -> Result<Vec<String>, ApiError> {
    check_quantities(info, obj)?;
    if mode == FieldValidation::Ignore {
        return check_decodes(info, obj).map(|()| Vec::new());
    }
    let Some(typed) = round_trip(info, obj) else {
        return Ok(Vec::new());
    };
    let typed = typed.map_err(|e| {
        ApiError::bad_request(format!(
            "error decoding {} into {}: {e}",
            info.resource, info.kind
        ))
    })?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &typed, "", &mut unknown);
    let list: Vec<String> = duplicates
        .iter()
        .filter(|d| !unknown.contains(d))
        .map(|f| format!("duplicate field \"{f}\""))
        .chain(unknown.iter().map(|f| format!("unknown field \"{f}\"")))
        .collect();
    if mode == FieldValidation::Strict && !list.is_empty() {
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            list.join(", ")
        )));
    }
    Ok(list)
}

/// Checks the body's apiVersion/kind (when given) name this resource, and fills them in.
pub fn check_kind(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    };
    // Upstream reads apiVersion and kind as strings before anything else; another JSON type
    // there fails that first read.
    for field in ["apiVersion", "kind"] {
        let type_name = match map.get(field) {
            None | Some(Value::Null | Value::String(_)) => continue,
            Some(Value::Bool(_)) => "bool",
            Some(Value::Number(_)) => "number",
            Some(Value::Array(_)) => "array",
            Some(Value::Object(_)) => "object",
        };
        let body = serde_json::to_string(&*map).unwrap_or_default();
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal {type_name} into Go struct field .{field} of type string ({})",
            info.kind,
            summarize(&body)
        )));
    }
    let want_av = info.api_version();
    let kind_ok = map
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(|k| k.is_empty() || k == info.kind);
    let av_ok = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_none_or(|a| a.is_empty() || a == want_av);
    if !kind_ok || !av_ok {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({want_av}) or the kind ({}) is not {}",
            map.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
            map.get("kind").and_then(Value::as_str).unwrap_or(""),
            info.kind
        )));
    }
    map.insert("apiVersion".into(), json!(want_av));
    map.insert("kind".into(), json!(info.kind));
    match map.get("metadata") {
        None | Some(Value::Null) => {
            map.insert("metadata".into(), json!({}));
        }
        Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "error decoding {} into {}: metadata must be an object",
                info.resource, info.kind
            )))
        }
    }
    Ok(())
}

/// The start of a body for an error message: its first 30 bytes and ` ...` when longer, as
/// upstream's decoder quotes a JSON body it could not read.
fn summarize(body: &str) -> String {
    const MAX: usize = 30;
    if body.len() <= MAX {
        return body.to_string();
    }
    let mut end = MAX;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} ...", body.get(..end).unwrap_or(""))
}

/// Checks a Binding body names no other kind: `Pod in version "v1" cannot be handled as a
/// Binding: …`, the conversion error upstream's decoder gives when the body's kind cannot
/// become a Binding.
pub fn check_binding_kind(binding: &Value) -> Result<(), ApiError> {
    let kind = binding.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() || kind == "Binding" {
        return Ok(());
    }
    let api_version = binding
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .unwrap_or("v1");
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    Err(ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a Binding: converting ({version}.{kind}) to (core.Binding): unknown conversion"
    )))
}

/// Checks `metadata.generateName` (when set) and `metadata.name` follow the kind's name rule
/// (DNS-1123 label for namespaces, DNS-1035 label for services, DNS-1123 subdomain for the
/// rest): 422 with one cause per problem, generateName's first. When generateName is invalid
/// the request fails here, so the name upstream would generate (the prefix, cut to 58
/// characters, and five random ones) stands in for the missing name, and is checked too.
///
/// Upstream: staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go
/// (ValidateObjectMeta), pkg/apis/core/validation/validation.go (ValidateNamespaceName,
/// ValidateServiceName).
pub fn check_name(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let str_at = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let rule = match (info.group, info.kind) {
        ("", "Namespace") => meta::NameRule::Dns1123Label,
        ("", "Service") => meta::NameRule::Dns1035Label,
        _ => meta::NameRule::Dns1123Subdomain,
    };
    let mut errs = Vec::new();
    let generate_name = str_at("/metadata/generateName");
    if !generate_name.is_empty() {
        for why in meta::name_errors(generate_name, rule, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                json!(generate_name),
                why,
            ));
        }
    }
    let mut name = str_at("/metadata/name").to_string();
    if name.is_empty() && !errs.is_empty() {
        let base: String = generate_name.chars().take(58).collect();
        name = format!("{base}{}", meta::name_suffix());
    }
    if !name.is_empty() {
        for why in meta::name_errors(&name, rule, false) {
            errs.push(FieldError::invalid("metadata.name", json!(name), why));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(
            info.kind, info.group, &name, &errs,
        ))
    }
}

/// Namespace defaults: the `kubernetes.io/metadata.name` label and phase Active.
pub fn default_namespace(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !obj
        .pointer("/metadata/labels")
        .is_some_and(Value::is_object)
    {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
    obj["status"] = json!({"phase": "Active"});
    if obj.pointer("/spec/finalizers").is_none() {
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
    }
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), value);
    }
}

/// Storage defaults the real API server's decoding applies on every write: a volume's
/// reclaim policy and volume mode, a claim's volume mode, a class's reclaim policy and
/// binding mode, a CSI driver's behaviour flags. Other kinds are left alone.
///
/// Upstream: pkg/apis/core/v1/defaults.go, pkg/apis/storage/v1/defaults.go.
pub fn default_storage_spec(info: &ResourceInfo, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let defaults: &[(&str, Value)] = match (info.group, info.kind) {
        ("", "PersistentVolume") => &[
            ("persistentVolumeReclaimPolicy", json!("Retain")),
            ("volumeMode", json!("Filesystem")),
        ],
        ("", "PersistentVolumeClaim") => &[("volumeMode", json!("Filesystem"))],
        ("storage.k8s.io", "StorageClass") => {
            set_default(map, "reclaimPolicy", json!("Delete"));
            set_default(map, "volumeBindingMode", json!("Immediate"));
            return;
        }
        ("storage.k8s.io", "CSIDriver") => &[
            ("attachRequired", json!(true)),
            ("podInfoOnMount", json!(false)),
            ("storageCapacity", json!(false)),
            ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
            ("volumeLifecycleModes", json!(["Persistent"])),
            ("requiresRepublish", json!(false)),
            ("seLinuxMount", json!(false)),
        ],
        _ => return,
    };
    if !map.get("spec").is_some_and(Value::is_object) {
        map.insert("spec".into(), json!({}));
    }
    if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
        for (key, value) in defaults {
            set_default(spec, key, value.clone());
        }
    }
}

/// The phase a new volume or claim starts in when it comes without one: a claim is Pending;
/// a volume is Available, where upstream's volume controller moves an unclaimed volume
/// straight after creation (its stand-in runs only on request).
pub fn default_storage_phase(info: &ResourceInfo, obj: &mut Value) {
    let phase = match (info.group, info.kind) {
        ("", "PersistentVolume") => "Available",
        ("", "PersistentVolumeClaim") => "Pending",
        _ => return,
    };
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        set_default(status, "phase", json!(phase));
    }
}

/// The annotation that makes a StorageClass the default (value `"true"`), and its beta form.
pub const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// The default StorageClass's name: of the classes annotated default, the newest, and of
/// those made in the same second the first by name.
///
/// Upstream: pkg/volume/util GetDefaultClass.
pub fn default_storage_class(classes: &[std::sync::Arc<Value>]) -> Option<String> {
    fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
        v.pointer(p).and_then(Value::as_str).unwrap_or("")
    }
    classes
        .iter()
        .filter(|c| {
            DEFAULT_CLASS_ANNOTATIONS.iter().any(|a| {
                c.pointer("/metadata/annotations")
                    .and_then(|m| m.get(*a))
                    .and_then(Value::as_str)
                    == Some("true")
            })
        })
        .min_by(|a, b| {
            let created = |c: &Value| str_at(c, "/metadata/creationTimestamp").to_string();
            created(b)
                .cmp(&created(a))
                .then_with(|| str_at(a, "/metadata/name").cmp(str_at(b, "/metadata/name")))
        })
        .map(|c| str_at(c, "/metadata/name").to_string())
}

/// A new claim that names no class (neither `spec.storageClassName`, not even `""`, nor the
/// beta annotation) gets the default class, when there is one.
///
/// Upstream: plugin/pkg/admission/storage/storageclass/setdefault (DefaultStorageClass).
pub fn default_claim_class(claim: &mut Value, classes: &[std::sync::Arc<Value>]) {
    let has_class = claim
        .pointer("/spec/storageClassName")
        .is_some_and(|c| !c.is_null())
        || claim
            .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
            .is_some();
    if has_class {
        return;
    }
    let Some(default) = default_storage_class(classes) else {
        return;
    };
    if let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("storageClassName".into(), json!(default));
    }
}

/// Pod defaults a scheduler and kubectl see: schedulerName, restartPolicy, dnsPolicy, the
/// container pull policy; status reset to Pending with the QoS class.
pub fn default_pod(obj: &mut Value) {
    default_pod_spec(obj);
    let qos = qos_class(obj);
    obj["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// The spec defaults of [`default_pod`] alone, as decoding applies them to every write
/// (an update that leaves a defaulted field out does not change it).
pub fn default_pod_spec(obj: &mut Value) {
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        set_default(spec, "schedulerName", json!("default-scheduler"));
        set_default(spec, "restartPolicy", json!("Always"));
        set_default(spec, "terminationGracePeriodSeconds", json!(30));
        set_default(spec, "dnsPolicy", json!("ClusterFirst"));
        set_default(spec, "enableServiceLinks", json!(true));
        set_default(spec, "securityContext", json!({}));
        set_default(spec, "serviceAccountName", json!("default"));
        for list in ["initContainers", "containers"] {
            if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                    let tag = image.rsplit('/').next().unwrap_or("");
                    let policy = if !tag.contains(':') || tag.ends_with(":latest") {
                        "Always"
                    } else {
                        "IfNotPresent"
                    };
                    set_default(c, "imagePullPolicy", json!(policy));
                    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                    set_default(c, "terminationMessagePolicy", json!("File"));
                    set_default(c, "resources", json!({}));
                }
            }
        }
    }
}

/// Deployment defaults the real API server's decoding applies on every write: one replica,
/// the RollingUpdate strategy with 25% surge and 25% unavailable (only the strategy's own
/// fields when it is Recreate), ten old ReplicaSets kept, a 600 s progress deadline, and
/// the pod template's spec defaults. Other kinds are left alone.
///
/// Upstream: pkg/apis/apps/v1/defaults.go (SetDefaults_Deployment) and the PodSpec and
/// Container defaults of pkg/apis/core/v1/defaults.go applied to the template.
pub fn default_workload(info: &ResourceInfo, obj: &mut Value) {
    if (info.group, info.kind) != ("apps", "Deployment") {
        return;
    }
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    if !spec.get("strategy").is_some_and(Value::is_object) {
        spec.insert("strategy".into(), json!({}));
    }
    if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            if !strategy.get("rollingUpdate").is_some_and(Value::is_object) {
                strategy.insert("rollingUpdate".into(), json!({}));
            }
            if let Some(ru) = strategy
                .get_mut("rollingUpdate")
                .and_then(Value::as_object_mut)
            {
                set_default(ru, "maxUnavailable", json!("25%"));
                set_default(ru, "maxSurge", json!("25%"));
            }
        }
    }
    if let Some(template) = spec.get_mut("template").filter(|t| t.is_object()) {
        default_template_spec(template);
    }
}

/// The PodSpec defaults of [`default_pod_spec`] on a pod template: the same, but for the
/// service account and `enableServiceLinks`, which upstream sets on pods alone (admission and
/// SetDefaults_Pod), not on templates.
fn default_template_spec(template: &mut Value) {
    let had = |t: &Value, f: &str| t.pointer(&format!("/spec/{f}")).is_some();
    let kept: Vec<&str> = ["serviceAccountName", "enableServiceLinks"]
        .into_iter()
        .filter(|f| had(template, f))
        .collect();
    default_pod_spec(template);
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        for f in ["serviceAccountName", "enableServiceLinks"] {
            if !kept.contains(&f) {
                spec.remove(f);
            }
        }
    }
}

/// On a new pod with scheduling gates: `PodScheduled=False` reason `SchedulingGated`, the
/// condition schedulers and `kubectl get pods` read to tell a gated pod from an unschedulable
/// one. Runs after [`default_pod`], which resets the status as upstream's create does, so
/// there is never a PodScheduled condition already.
///
/// Upstream: pkg/registry/core/pod/strategy.go (applySchedulingGatedCondition).
pub fn apply_scheduling_gated_condition(pod: &mut Value) {
    let gated = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if !gated {
        return;
    }
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    if !status.get("conditions").is_some_and(Value::is_array) {
        status.insert("conditions".into(), json!([]));
    }
    let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    if conditions
        .iter()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
    {
        return;
    }
    conditions.push(json!({
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": null,
        "lastTransitionTime": meta::now_rfc3339(),
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
    }));
}

/// On a new pod: each pod (anti-)affinity term's `matchLabelKeys` / `mismatchLabelKeys`
/// become `key In (value)` / `key NotIn (value)` requirements of its `labelSelector`, with
/// the pod's own label values as they are at creation. Keys the pod has no label for are
/// skipped, and a term without a `labelSelector` is left alone (it selects nothing either
/// way). Schedulers read only the merged selector; the key lists stay for the record.
///
/// Upstream: pkg/registry/core/pod/strategy.go (mutatePodAffinity).
pub fn merge_affinity_label_keys(pod: &mut Value) {
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(affinity) = pod
        .pointer_mut("/spec/affinity")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(a) = affinity.get_mut(kind).and_then(Value::as_object_mut) else {
            continue;
        };
        if let Some(terms) = a
            .get_mut("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array_mut)
        {
            for term in terms {
                merge_term_label_keys(term, &labels);
            }
        }
        if let Some(terms) = a
            .get_mut("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array_mut)
        {
            for weighted in terms {
                if let Some(term) = weighted.get_mut("podAffinityTerm") {
                    merge_term_label_keys(term, &labels);
                }
            }
        }
    }
}

/// On a new pod: each topology spread constraint's `matchLabelKeys` become `key In (value)`
/// requirements of its `labelSelector`, as for affinity terms in
/// [`merge_affinity_label_keys`] (keys without a label skipped, a constraint without a
/// selector left alone). Upstream's kube-scheduler, with the API server doing this, reads
/// only the merged selector.
///
/// Upstream: pkg/registry/core/pod/strategy.go (mutateTopologySpreadConstraints, on by
/// default since 1.34 with MatchLabelKeysInPodTopologySpreadSelectorMerge).
pub fn merge_topology_spread_label_keys(pod: &mut Value) {
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(constraints) = pod
        .pointer_mut("/spec/topologySpreadConstraints")
        .and_then(Value::as_array_mut)
    {
        for c in constraints {
            merge_term_label_keys(c, &labels);
        }
    }
}

fn merge_term_label_keys(term: &mut Value, labels: &Map<String, Value>) {
    let keys = |field: &str| -> Vec<String> {
        term.get(field)
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (matching, mismatching) = (keys("matchLabelKeys"), keys("mismatchLabelKeys"));
    if matching.is_empty() && mismatching.is_empty() {
        return;
    }
    let Some(selector) = term.get_mut("labelSelector").and_then(Value::as_object_mut) else {
        return;
    };
    let mut added = Vec::new();
    for (list, operator) in [(&matching, "In"), (&mismatching, "NotIn")] {
        for key in list {
            if let Some(value) = labels.get(key).and_then(Value::as_str) {
                added.push(json!({"key": key, "operator": operator, "values": [value]}));
            }
        }
    }
    if added.is_empty() {
        return;
    }
    if !selector
        .get("matchExpressions")
        .is_some_and(Value::is_array)
    {
        selector.insert("matchExpressions".into(), json!([]));
    }
    if let Some(expressions) = selector
        .get_mut("matchExpressions")
        .and_then(Value::as_array_mut)
    {
        expressions.extend(added);
    }
}

/// BestEffort, Guaranteed or Burstable, from the containers' requests and limits.
fn qos_class(pod: &Value) -> &'static str {
    let containers = || {
        ["initContainers", "containers"]
            .into_iter()
            .filter_map(|l| meta::at(pod, &["spec", l]).and_then(Value::as_array))
            .flatten()
    };
    fn res<'a>(c: &'a Value, kind: &str) -> Option<&'a Map<String, Value>> {
        meta::at(c, &["resources", kind]).and_then(Value::as_object)
    }
    let relevant = |m: Option<&Map<String, Value>>| -> bool {
        m.is_some_and(|m| m.contains_key("cpu") || m.contains_key("memory"))
    };
    if containers().all(|c| !relevant(res(c, "requests")) && !relevant(res(c, "limits"))) {
        return "BestEffort";
    }
    let guaranteed = containers().all(|c| {
        let (req, lim) = (res(c, "requests"), res(c, "limits"));
        ["cpu", "memory"].iter().all(|r| {
            lim.and_then(|l| l.get(*r))
                .is_some_and(|l| req.and_then(|q| q.get(*r)).is_none_or(|q| q == l))
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Priority admission: resolves `priorityClassName` (or the global default) to `priority`
/// and `preemptionPolicy`. An unknown class is 403 Forbidden.
pub fn admit_priority(
    pods: &ResourceInfo,
    pod: &mut Value,
    classes: &[std::sync::Arc<Value>],
) -> Result<(), ApiError> {
    let named = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let class = match &named {
        Some(n) => Some(
            classes
                .iter()
                .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(n))
                .ok_or_else(|| {
                    let name = pod
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .or_else(|| {
                            pod.pointer("/metadata/generateName")
                                .and_then(Value::as_str)
                        })
                        .unwrap_or("")
                        .to_string();
                    ApiError::forbidden(
                        pods,
                        &name,
                        &format!("no PriorityClass with name {n} was found"),
                    )
                })?,
        ),
        None => classes
            .iter()
            .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0)),
    };
    let (priority, policy) = match class {
        Some(c) => {
            if named.is_none() {
                pod["spec"]["priorityClassName"] = c["metadata"]["name"].clone();
            }
            (
                c.get("value").and_then(Value::as_i64).unwrap_or(0),
                c.get("preemptionPolicy")
                    .cloned()
                    .unwrap_or(json!("PreemptLowerPriority")),
            )
        }
        None => (0, json!("PreemptLowerPriority")),
    };
    pod["spec"]["priority"] = json!(priority);
    if pod.pointer("/spec/preemptionPolicy").is_none() {
        pod["spec"]["preemptionPolicy"] = policy;
    }
    Ok(())
}

/// Whether a PodDisruptionBudget's selector selects the pod (same namespace; an empty or
/// missing selector selects nothing, as in policy/v1).
pub fn pdb_selects(pdb: &Value, pod: &Value) -> bool {
    let ns = |v: &Value| v.pointer("/metadata/namespace").cloned();
    if ns(pdb) != ns(pod) {
        return false;
    }
    let Some(sel) = pdb.pointer("/spec/selector").and_then(Value::as_object) else {
        return false;
    };
    let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let match_labels = sel.get("matchLabels").and_then(Value::as_object);
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && exprs.is_none_or(Vec::is_empty) {
        return false;
    }
    let labels_ok = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let exprs_ok = exprs.into_iter().flatten().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match e.get("operator").and_then(Value::as_str) {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => !label(key).is_some_and(|v| values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// A PodDisruptionBudget's numbers, computed from the pods it selects (no disruption
/// controller runs here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Ready pods not being deleted.
    pub current_healthy: i64,
    /// Pods that must stay healthy.
    pub desired_healthy: i64,
    /// `current_healthy - desired_healthy`.
    pub allowed: i64,
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
}

/// An IntOrString of a budget: an absolute number, or a percentage of `expected` rounded up.
fn scaled(v: &Value, expected: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * expected + 99) / 100)
        }
        _ => None,
    }
}

/// The budget of `pdb` over the pods it selects. Upstream: pkg/controller/disruption.
pub fn disruption_budget(pdb: &Value, selected: &[&Value]) -> Budget {
    let expected = i64::try_from(selected.len()).unwrap_or(i64::MAX);
    let current_healthy =
        i64::try_from(selected.iter().filter(|p| pod_ready(p)).count()).unwrap_or(i64::MAX);
    let desired_healthy = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        scaled(min, expected).unwrap_or(expected)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        expected - scaled(max, expected).unwrap_or(0)
    } else {
        expected
    };
    let desired_healthy = desired_healthy.max(0);
    Budget {
        current_healthy,
        desired_healthy,
        allowed: (current_healthy - desired_healthy).max(0),
    }
}

/// Field renames between events.k8s.io/v1 (left) and core/v1 (right).
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(obj: &Value, to_core: bool, api_version: &str) -> Value {
    let mut out = obj.clone();
    if let Some(m) = out.as_object_mut() {
        for (events, core) in EVENT_RENAMES {
            let (from, to) = if to_core {
                (*events, *core)
            } else {
                (*core, *events)
            };
            if let Some(v) = m.remove(from) {
                m.insert(to.to_string(), v);
            }
        }
        if m.contains_key("apiVersion") {
            m.insert("apiVersion".into(), json!(api_version));
        }
    }
    out
}

/// An events.k8s.io/v1 Event as the core/v1 Event it is stored as.
pub fn event_to_core(obj: &Value) -> Value {
    rename(obj, true, "v1")
}

/// A stored core/v1 Event as events.k8s.io/v1.
pub fn event_from_core(obj: &Value) -> Value {
    rename(obj, false, "events.k8s.io/v1")
}

/// The grace period a pod deletion gets, in seconds: the request's `gracePeriodSeconds`, else
/// the pod's `terminationGracePeriodSeconds` (30 when absent); a negative request counts as
/// 1; a pod that is not bound to a node, or has finished (Succeeded, Failed), goes at once
/// (0).
///
/// Upstream: pkg/registry/core/pod/strategy.go (CheckGracefulDelete) and
/// staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go (BeforeDelete).
pub fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let unbound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if unbound || finished {
        return 0;
    }
    match requested {
        Some(p) if p < 0 => 1,
        Some(p) => p,
        None => pod
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
            .max(0),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rstest::rstest;

    use super::*;
    use crate::resources::lookup;

    fn pods() -> &'static ResourceInfo {
        lookup("", "v1", "pods").expect("pods")
    }

    /// Init containers count toward the QoS class: a pod whose containers are all
    /// guaranteed but whose init container has only requests is Burstable.
    #[test]
    fn init_containers_count_toward_the_qos_class() {
        let limits = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
        let mut p = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}],
            "containers": [{"name": "c", "resources": limits}]}});
        default_pod(&mut p);
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Burstable"})
        );
    }

    /// Every place a quantity is looked for, with the path a field error names.
    #[rstest]
    #[case::pod_every_place(
        ("", "v1", "pods"),
        json!({"spec": {
            "containers": [{"resources": {"limits": {"cpu": "1"}, "requests": {"memory": "2"}}}],
            "initContainers": [{}, {"resources": {"requests": {"cpu": "3"}}}],
            "ephemeralContainers": [{"resources": {"limits": {"x": "4"}}}],
            "overhead": {"cpu": "5"},
            "resources": {"requests": {"cpu": "6"}},
            "volumes": [{"emptyDir": {"sizeLimit": "7"}},
                        {"ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {
                            "requests": {"storage": "8"}}}}}}]}}),
        &[
            ("spec.containers[0].resources.limits[cpu]", "1"),
            ("spec.containers[0].resources.requests[memory]", "2"),
            ("spec.initContainers[1].resources.requests[cpu]", "3"),
            ("spec.ephemeralContainers[0].resources.limits[x]", "4"),
            ("spec.overhead[cpu]", "5"),
            ("spec.resources.requests[cpu]", "6"),
            ("spec.volumes[0].emptyDir.sizeLimit", "7"),
            ("spec.volumes[1].ephemeral.volumeClaimTemplate.spec.resources.requests[storage]", "8"),
        ][..],
    )]
    #[case::stateful_set_template_and_claim_templates(
        ("apps", "v1", "statefulsets"),
        json!({"spec": {"template": {"spec": {"containers": [
                   {"resources": {"requests": {"cpu": "1"}}}]}},
               "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "2"}}}}]}}),
        &[
            ("spec.template.spec.containers[0].resources.requests[cpu]", "1"),
            ("spec.volumeClaimTemplates[0].spec.resources.requests[storage]", "2"),
        ][..],
    )]
    #[case::node_capacity_then_allocatable(
        ("", "v1", "nodes"),
        json!({"status": {"allocatable": {"cpu": "2"}, "capacity": {"cpu": "1"}}}),
        &[("status.capacity[cpu]", "1"), ("status.allocatable[cpu]", "2")][..],
    )]
    #[case::claim_spec_and_status(
        ("", "v1", "persistentvolumeclaims"),
        json!({"spec": {"resources": {"limits": {"storage": "1"}}},
               "status": {"capacity": {"storage": "2"}, "allocatedResources": {"storage": "3"}}}),
        &[
            ("spec.resources.limits[storage]", "1"),
            ("status.capacity[storage]", "2"),
            ("status.allocatedResources[storage]", "3"),
        ][..],
    )]
    #[case::volume_capacity(
        ("", "v1", "persistentvolumes"),
        json!({"spec": {"capacity": {"storage": "1"}}}),
        &[("spec.capacity[storage]", "1")][..],
    )]
    #[case::resource_slice_device_capacity(
        ("resource.k8s.io", "v1", "resourceslices"),
        json!({"spec": {"devices": [{}, {"capacity": {"mem": {"value": "1"}, "odd": {}}}]}}),
        &[("spec.devices[1].capacity[mem].value", "1")][..],
    )]
    #[case::storage_capacity_fields(
        ("storage.k8s.io", "v1", "csistoragecapacities"),
        json!({"maximumVolumeSize": "2", "capacity": "1"}),
        &[("capacity", "1"), ("maximumVolumeSize", "2")][..],
    )]
    #[case::misplaced_values_are_not_quantities(
        ("", "v1", "pods"),
        json!({"spec": {"containers": {"resources": {}}, "overhead": ["1"],
                        "volumes": [{"emptyDir": []}]}}),
        &[][..],
    )]
    fn quantities_are_found_with_their_paths(
        #[case] resource: (&str, &str, &str),
        #[case] obj: Value,
        #[case] want: &[(&str, &str)],
    ) {
        let (group, version, plural) = resource;
        let info = lookup(group, version, plural).expect("served");
        let mut found = Vec::new();
        quantities_of(info, &obj, &mut found);
        let got: Vec<(String, Value)> = found.into_iter().map(|(p, v)| (p, v.clone())).collect();
        let want: Vec<(String, Value)> = want
            .iter()
            .map(|(p, v)| ((*p).to_string(), json!(v)))
            .collect();
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::best_effort(json!([{"name": "c"}]), "BestEffort")]
    #[case::burstable(json!([{"name": "c", "resources": {"requests": {"cpu": "1"}}}]), "Burstable")]
    #[case::guaranteed(json!([{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]), "Guaranteed")]
    #[case::guaranteed_with_equal_requests(json!([{"name": "c", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]), "Guaranteed")]
    #[case::burstable_when_a_request_differs_from_its_limit(json!([{"name": "c", "resources": {
        "requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]), "Burstable")]
    #[case::burstable_when_one_container_has_no_limits(json!([
        {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
        {"name": "b"}]), "Burstable")]
    #[case::best_effort_with_only_other_resources(json!([{"name": "c", "resources": {
        "requests": {"ephemeral-storage": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}}]), "BestEffort")]
    #[case::best_effort_when_resources_are_not_objects(json!([{"name": "c", "resources": {
        "requests": ["cpu"], "limits": "1"}}]), "BestEffort")]
    fn pod_defaults(#[case] containers: Value, #[case] qos: &str) {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": containers},
                           "status": {"phase": "Running"}});
        default_pod(&mut p);
        assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(p["status"], json!({"phase": "Pending", "qosClass": qos}));
    }

    #[test]
    fn scheduler_name_is_kept_when_set() {
        let mut p = json!({"spec": {"schedulerName": "mine", "containers": [{"name": "c", "image": "nginx:1.2"}]}});
        default_pod(&mut p);
        assert_eq!(p["spec"]["schedulerName"], "mine");
        assert_eq!(
            p["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
    }

    #[rstest]
    #[case::named(Some("high"), Ok(1000))]
    #[case::global_default(None, Ok(7))]
    #[case::unknown(Some("nope"), Err(403))]
    fn priority(#[case] class: Option<&str>, #[case] want: Result<i64, u16>) {
        let classes = vec![
            Arc::new(json!({"metadata": {"name": "high"}, "value": 1000})),
            Arc::new(json!({"metadata": {"name": "dflt"}, "value": 7, "globalDefault": true})),
        ];
        let mut p = json!({"metadata": {"name": "p"}, "spec": {}});
        if let Some(c) = class {
            p["spec"]["priorityClassName"] = json!(c);
        }
        let got = admit_priority(pods(), &mut p, &classes)
            .map(|()| p["spec"]["priority"].as_i64().unwrap_or(-1))
            .map_err(|e| e.code);
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::wrong_kind(json!({"kind": "Node"}))]
    #[case::wrong_version(json!({"apiVersion": "v2", "kind": "Pod"}))]
    #[case::not_an_object(json!([1]))]
    #[case::metadata_not_an_object(json!({"metadata": "x"}))]
    fn kind_mismatch_is_bad_request(#[case] mut body: Value) {
        assert_eq!(check_kind(pods(), &mut body).map_err(|e| e.code), Err(400));
    }

    #[rstest]
    #[case::typo_in_spec(json!({"metadata": {"name": "p"}, "spec": {"containerz": []}}), Some("strict decoding error: unknown field \"spec.containerz\""))]
    #[case::in_a_list_item(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "imagee": "x"}]}}),
        Some("strict decoding error: unknown field \"spec.containers[0].imagee\""))]
    #[case::maps_and_nulls_are_fine(json!({"metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": null},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], "nodeSelector": {"x": "y"}}}), None)]
    fn strict_field_validation(#[case] body: Value, #[case] want: Option<&str>) {
        let got = check_fields(pods(), &body, FieldValidation::Strict, &[])
            .err()
            .map(|e| e.message);
        assert_eq!(got.as_deref(), want);
        let warnings = check_fields(pods(), &body, FieldValidation::Warn, &[]).expect("warn only");
        assert_eq!(warnings.len(), usize::from(want.is_some()));
    }

    #[test]
    fn duplicate_fields_are_found_at_their_paths_in_document_order() {
        let body = br#"{"b":1,"a":{"x":[{"k":1,"k":2}],"y":3,"y":4},"b":2,"m":{"l":{}}}"#;
        assert_eq!(
            duplicate_fields(body),
            vec!["a.x[0].k".to_string(), "a.y".to_string(), "b".to_string()]
        );
        assert_eq!(duplicate_fields(b"{nope"), Vec::<String>::new());
    }

    #[test]
    fn duplicate_fields_are_warnings_under_warn_validation() {
        let body = json!({"metadata": {"name": "x"}, "spec": {"containers": []}});
        let warnings = check_fields(
            pods(),
            &body,
            FieldValidation::Warn,
            &["metadata.name".to_string()],
        )
        .expect("warn only");
        assert_eq!(
            warnings,
            vec![r#"duplicate field "metadata.name""#.to_string()]
        );
    }

    #[test]
    fn wrong_field_type_is_bad_request() {
        let body = json!({"metadata": {"name": "p"}, "spec": {"containers": "nginx"}});
        assert_eq!(check_decodes(pods(), &body).map_err(|e| e.code), Err(400));
    }

    fn running(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "namespace": "d", "labels": {"app": "web"}},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[rstest]
    #[case::min_available_met_exactly(json!({"minAvailable": 2}), 2, 2, 0)]
    #[case::min_available_with_slack(json!({"minAvailable": 1}), 2, 2, 1)]
    #[case::max_unavailable(json!({"maxUnavailable": 1}), 3, 3, 1)]
    #[case::percentage_rounds_up(json!({"minAvailable": "50%"}), 3, 3, 1)]
    #[case::unready_pods_count_against(json!({"minAvailable": 2}), 3, 1, 0)]
    fn budgets(
        #[case] spec: Value,
        #[case] pods: usize,
        #[case] ready: usize,
        #[case] allowed: i64,
    ) {
        let mut pdb = json!({"metadata": {"name": "b", "namespace": "d"},
                             "spec": {"selector": {"matchLabels": {"app": "web"}}}});
        for (k, v) in spec.as_object().into_iter().flatten() {
            pdb["spec"][k] = v.clone();
        }
        let all: Vec<Value> = (0..pods)
            .map(|i| running(&format!("p{i}"), i < ready))
            .collect();
        let selected: Vec<&Value> = all.iter().filter(|p| pdb_selects(&pdb, p)).collect();
        assert_eq!(selected.len(), pods);
        assert_eq!(disruption_budget(&pdb, &selected).allowed, allowed);
    }

    #[test]
    fn empty_pdb_selector_selects_nothing() {
        let pdb = json!({"metadata": {"namespace": "d"}, "spec": {"selector": {}}});
        assert!(!pdb_selects(&pdb, &running("p", true)));
    }

    #[test]
    fn events_round_trip_between_versions() {
        let e = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding": {"name": "p"}, "note": "hi", "reportingController": "kubesched"});
        let core = event_to_core(&e);
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(event_from_core(&core), e);
    }

    fn class(name: &str, created: &str, default: Option<&str>) -> Arc<Value> {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}});
        if let Some(d) = default {
            c["metadata"]["annotations"] =
                json!({"storageclass.kubernetes.io/is-default-class": d});
        }
        Arc::new(c)
    }

    #[rstest]
    #[case::no_class_gets_the_default(json!({}),
        vec![class("std", "2026-01-01T00:00:00Z", Some("true"))], Some("std"))]
    #[case::empty_class_is_kept(json!({"storageClassName": ""}),
        vec![class("std", "2026-01-01T00:00:00Z", Some("true"))], Some(""))]
    #[case::named_class_is_kept(json!({"storageClassName": "fast"}),
        vec![class("std", "2026-01-01T00:00:00Z", Some("true"))], Some("fast"))]
    #[case::no_default_class_leaves_none(json!({}),
        vec![class("std", "2026-01-01T00:00:00Z", Some("false"))], None)]
    #[case::newest_default_wins(json!({}),
        vec![class("old", "2026-01-01T00:00:00Z", Some("true")),
             class("new", "2026-01-02T00:00:00Z", Some("true"))], Some("new"))]
    #[case::same_second_defaults_take_the_first_name(json!({}),
        vec![class("b", "2026-01-01T00:00:00Z", Some("true")),
             class("a", "2026-01-01T00:00:00Z", Some("true"))], Some("a"))]
    fn default_storage_class_admission(
        #[case] spec: Value,
        #[case] classes: Vec<Arc<Value>>,
        #[case] want: Option<&str>,
    ) {
        let mut claim = json!({"metadata": {"name": "c"}, "spec": spec});
        default_claim_class(&mut claim, &classes);
        assert_eq!(
            claim
                .pointer("/spec/storageClassName")
                .and_then(Value::as_str),
            want
        );
    }

    #[test]
    fn a_claim_with_the_beta_class_annotation_gets_no_default() {
        let mut claim = json!({"metadata": {"name": "c",
            "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}}, "spec": {}});
        default_claim_class(
            &mut claim,
            &[class("std", "2026-01-01T00:00:00Z", Some("true"))],
        );
        assert_eq!(claim.pointer("/spec/storageClassName"), None);
    }
}

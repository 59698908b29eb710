//! Validation the real API server applies and clients run into: which parts of a pod's,
//! volume's or claim's spec may change after creation, what a StorageClass needs and keeps.
//!
//! Upstream: pkg/apis/core/validation/validation.go (ValidatePodUpdate,
//! ValidatePersistentVolumeUpdate, ValidatePersistentVolumeClaimUpdate and the helpers they
//! call) and
//! pkg/apis/storage/validation/validation.go (ValidateStorageClass, ValidateStorageClassUpdate).
//! Errors are field errors, answered together as one 422 (see
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
    /// `Unsupported value: V: supported values: "a", "b"`.
    NotSupported(Value, &'static [&'static str]),
    /// `Duplicate value: V`.
    Duplicate(Value),
    /// `Too many: N: must have at most M items`.
    TooMany(usize, usize),
    /// `Too long: may not be more than M bytes`.
    TooLong(usize),
}

impl FieldError {
    pub(crate) fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Forbidden,
            detail: detail.into(),
        }
    }

    /// `Invalid value: V: detail`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Invalid(value),
            detail: detail.into(),
        }
    }

    /// `Required value` with an optional detail.
    pub(crate) fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Required,
            detail: detail.into(),
        }
    }

    /// An error of `kind` with no detail.
    pub(crate) fn of(field: impl Into<String>, kind: FieldErrorKind) -> Self {
        FieldError {
            field: field.into(),
            kind,
            detail: String::new(),
        }
    }

    /// `Forbidden: …`, `Invalid value: 5: …`, `Required value` (apimachinery's ErrorBody).
    pub fn body(&self) -> String {
        let (head, detail) = match &self.kind {
            FieldErrorKind::Forbidden => ("Forbidden".to_string(), &self.detail),
            FieldErrorKind::Invalid(v) => (format!("Invalid value: {v}"), &self.detail),
            FieldErrorKind::Required => ("Required value".to_string(), &self.detail),
            FieldErrorKind::NotSupported(v, supported) => {
                let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                return format!(
                    "Unsupported value: {v}: supported values: {}",
                    quoted.join(", ")
                );
            }
            FieldErrorKind::Duplicate(v) => return format!("Duplicate value: {v}"),
            FieldErrorKind::TooMany(n, max) => {
                let items = if *max == 1 { "item" } else { "items" };
                return format!("Too many: {n}: must have at most {max} {items}");
            }
            FieldErrorKind::TooLong(max) => {
                let bytes = if *max == 1 { "byte" } else { "bytes" };
                return format!("Too long: may not be more than {max} {bytes}");
            }
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
            FieldErrorKind::NotSupported(..) => "FieldValueNotSupported",
            FieldErrorKind::Duplicate(_) => "FieldValueDuplicate",
            FieldErrorKind::TooMany(..) => "FieldValueTooMany",
            FieldErrorKind::TooLong(_) => "FieldValueTooLong",
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

/// Checks the resource quantities of a pod, or of the pod template of a workload kind, are
/// not negative: container and pod-level requests and limits, and the overhead. Each
/// negative one is `Invalid value: "-1": must be greater than or equal to 0` (the value as
/// written, where upstream prints it in canonical form). Quantities that do not decode
/// never get here: decoding refuses them first.
///
/// Upstream: pkg/apis/core/validation/validation.go (ValidateResourceRequirements,
/// ValidateResourceQuantityValue, ValidateNonnegativeQuantity).
pub fn validate_resource_quantities(
    info: &crate::resources::ResourceInfo,
    obj: &Value,
) -> Vec<FieldError> {
    // Most quantities are fine: a path is rendered only for a negative one.
    let mut errs = Vec::new();
    crate::admission::visit_quantities(info, obj, &mut |path, v| {
        let Some(Ok(parsed)) = crate::quantity::parse_json(v) else {
            return;
        };
        if !parsed.negative {
            return;
        }
        let path = path.render();
        let checked = !path.contains("volumeClaimTemplate")
            && [".resources.limits[", ".resources.requests[", ".overhead["]
                .iter()
                .any(|p| path.contains(p));
        if checked {
            let written = match v {
                Value::String(s) => s.trim().to_string(),
                other => other.to_string(),
            };
            errs.push(FieldError::invalid(
                path,
                Value::String(written),
                "must be greater than or equal to 0",
            ));
        }
    });
    errs.into_iter()
        .chain(requests_above_limits(info, obj))
        .collect()
}

/// Container requests above the container's limit for the same resource: `Invalid value:
/// "2": must be less than or equal to cpu limit of 1` (values as written). Quantities this
/// server cannot compare (exponents) are left alone.
fn requests_above_limits(info: &crate::resources::ResourceInfo, obj: &Value) -> Vec<FieldError> {
    let (spec, base) = match (info.group, info.kind) {
        ("", "Pod") => (obj.get("spec"), "spec"),
        ("", "ReplicationController") | ("apps", _) | ("batch", "Job") => {
            (obj.pointer("/spec/template/spec"), "spec.template.spec")
        }
        _ => return Vec::new(),
    };
    let Some(spec) = spec else {
        return Vec::new();
    };
    let written = |v: &Value| match v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    };
    let mut errs = Vec::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let map = |kind: &str| {
                c.pointer(&format!("/resources/{kind}"))
                    .and_then(Value::as_object)
            };
            let (Some(requests), Some(limits)) = (map("requests"), map("limits")) else {
                continue;
            };
            for (name, request) in requests {
                let Some(limit) = limits.get(name) else {
                    continue;
                };
                let (r, l) = (written(request), written(limit));
                if let (Some(rm), Some(lm)) = (quantity_millis(&r), quantity_millis(&l)) {
                    if rm > lm {
                        errs.push(FieldError::invalid(
                            format!("{base}.{list}[{i}].resources.requests[{name}]"),
                            Value::String(r),
                            format!("must be less than or equal to {name} limit of {l}"),
                        ));
                    }
                }
            }
        }
    }
    errs
}

/// The `dryRun` values a write may name.
const DRY_RUN_VALUES: &[&str] = &["All"];
/// The `fieldValidation` values a write may name (`""` is the default, Strict for kubectl).
const FIELD_VALIDATION_VALUES: &[&str] = &["", "Ignore", "Strict", "Warn"];

/// Checks a write's options from the query: every `dryRun` value is `All` and
/// `fieldValidation` (where the write has it: creates, updates, patches) is one upstream
/// knows. An empty `dryRun=` counts as absent.
///
/// Upstream: staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go
/// (ValidateCreateOptions, ValidateUpdateOptions, ValidatePatchOptions, ValidateDeleteOptions).
pub fn validate_write_options(dry_run: &[&str], field_validation: Option<&str>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let dry_run: Vec<&str> = dry_run.iter().copied().filter(|v| !v.is_empty()).collect();
    if dry_run.iter().any(|v| !DRY_RUN_VALUES.contains(v)) {
        errs.push(FieldError {
            field: "dryRun".into(),
            kind: FieldErrorKind::NotSupported(Value::from(dry_run), DRY_RUN_VALUES),
            detail: String::new(),
        });
    }
    if let Some(v) = field_validation.filter(|v| !FIELD_VALIDATION_VALUES.contains(v)) {
        errs.push(FieldError {
            field: "fieldValidation".into(),
            kind: FieldErrorKind::NotSupported(Value::from(v), FIELD_VALIDATION_VALUES),
            detail: String::new(),
        });
    }
    errs
}

/// The annotation that named a claim's class before `spec.storageClassName` existed.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// A quantity in milli-units, for comparing sizes written in different units (`1Gi`,
/// `1024Mi`); `None` when it does not parse.
pub(crate) fn quantity_millis(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let multiplier: i128 = match suffix {
        "" => 1,
        "m" => return parse_scaled(number, 1),
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return None,
    };
    parse_scaled(number, multiplier.checked_mul(1000)?)
}

/// `number` (decimal, maybe with a fraction) times `scale`, rounded down.
fn parse_scaled(number: &str, scale: i128) -> Option<i128> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let whole: i128 = if whole.is_empty() || whole == "-" || whole == "+" {
        0
    } else {
        whole.parse().ok()?
    };
    let mut out = whole.checked_mul(scale)?;
    let mut unit = scale;
    for d in frac.chars() {
        unit /= 10;
        out = out.checked_add(i128::from(d.to_digit(10)?) * unit)?;
    }
    Some(out)
}

fn storage_request(claim: &Value) -> Option<i128> {
    claim
        .pointer("/spec/resources/requests/storage")
        .and_then(Value::as_str)
        .and_then(quantity_millis)
}

/// Checks a claim update (the main resource). A claim's spec is fixed once created, except
/// that `volumeName` may be set once, a class may be set where none was, and a bound claim
/// may change its storage request (not below its capacity) and its volume attributes class.
pub fn validate_persistent_volume_claim_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let mut old_spec = normalized(old.get("spec").unwrap_or(&empty));
    let mut new_spec = normalized(new.get("spec").unwrap_or(&empty));
    let mut errs = Vec::new();
    let (Some(o), Some(n)) = (old_spec.as_object_mut(), new_spec.as_object_mut()) else {
        return errs;
    };
    let text = |m: &Map<String, Value>, k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    // The binder sets volumeName once.
    if text(o, "volumeName").is_none() {
        match n.get("volumeName") {
            Some(v) => o.insert("volumeName".into(), v.clone()),
            None => o.remove("volumeName"),
        };
    }
    // A class may be named where none was: from the beta annotation's value, or from nothing
    // (a default class assigned after the claim was made).
    let old_annotation = old
        .pointer(&format!(
            "/metadata/annotations/{}",
            BETA_STORAGE_CLASS.replace('/', "~1")
        ))
        .and_then(Value::as_str);
    if !o.contains_key("storageClassName") {
        let new_class = n.get("storageClassName").and_then(Value::as_str);
        let allowed = match old_annotation {
            Some(a) => new_class == Some(a),
            None => new_class.is_some_and(|c| !c.is_empty()),
        };
        if allowed {
            n.remove("storageClassName");
        }
    }
    if new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound") {
        let old_storage = o
            .get("resources")
            .and_then(|r| r.pointer("/requests/storage"))
            .cloned();
        if let Some(requests) = n
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            match old_storage {
                Some(s) => requests.insert("storage".into(), s),
                None => requests.remove("storage"),
            };
        }
        if n.contains_key("volumeAttributesClassName") {
            match o.get("volumeAttributesClassName") {
                Some(v) => n.insert("volumeAttributesClassName".into(), v.clone()),
                None => n.remove("volumeAttributesClassName"),
            };
        }
    }
    // Equal quantities in other units are no change: take the old spelling.
    let old_requests = o
        .get("resources")
        .and_then(|r| r.get("requests"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(requests) = n
        .get_mut("resources")
        .and_then(|r| r.get_mut("requests"))
        .and_then(Value::as_object_mut)
    {
        for (name, q) in requests.iter_mut() {
            let millis = |v: &Value| v.as_str().and_then(quantity_millis);
            if let Some(before) = old_requests.get(name) {
                if millis(q).is_some() && millis(q) == millis(before) {
                    *q = before.clone();
                }
            }
        }
    }
    if old_spec != new_spec {
        let mut lines = Vec::new();
        diff("spec", &old_spec, &new_spec, &mut lines);
        errs.push(FieldError::forbidden(
            "spec",
            format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                lines.join("\n")
            ),
        ));
    }
    // Upstream lets a claim lower its request to recover from a failed expansion, but not
    // to or below what the volume already has.
    let capacity = old
        .pointer("/status/capacity/storage")
        .and_then(Value::as_str)
        .and_then(quantity_millis)
        .unwrap_or(0);
    if let (Some(before), Some(after)) = (storage_request(old), storage_request(new)) {
        if after < before && after <= capacity {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    let mode = |c: &Value| c.pointer("/spec/volumeMode").cloned();
    if mode(old) != mode(new) {
        errs.push(FieldError::invalid(
            "volumeMode",
            mode(new).unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

/// The fields of a volume's spec that name its source (upstream's inlined
/// PersistentVolumeSource).
const PERSISTENT_VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// Checks a volume update (the main resource): its source and volume mode are fixed, and
/// node affinity may be set where there was none but not changed after.
pub fn validate_persistent_volume_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let (old_spec, new_spec) = (
        normalized(old.get("spec").unwrap_or(&empty)),
        normalized(new.get("spec").unwrap_or(&empty)),
    );
    let source = |spec: &Value| -> Value {
        Value::Object(
            PERSISTENT_VOLUME_SOURCES
                .iter()
                .filter_map(|k| spec.get(*k).map(|v| ((*k).to_string(), v.clone())))
                .collect(),
        )
    };
    let mut errs = Vec::new();
    let (old_source, new_source) = (source(&old_spec), source(&new_spec));
    if old_source != new_source {
        let mut lines = Vec::new();
        diff("spec", &old_source, &new_source, &mut lines);
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            format!(
                "spec.persistentvolumesource is immutable after creation\n{}",
                lines.join("\n")
            ),
        ));
    }
    let field = |spec: &Value, k: &str| spec.get(k).cloned().unwrap_or(Value::Null);
    let mode = field(&new_spec, "volumeMode");
    if field(&old_spec, "volumeMode") != mode {
        errs.push(FieldError::invalid(
            "volumeMode",
            mode,
            "field is immutable",
        ));
    }
    let affinity = field(&new_spec, "nodeAffinity");
    let old_affinity = field(&old_spec, "nodeAffinity");
    if !old_affinity.is_null() && old_affinity != affinity {
        errs.push(FieldError::invalid(
            "nodeAffinity",
            affinity,
            "field is immutable",
        ));
    }
    errs
}

const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];

/// Checks a StorageClass (defaulted already): a provisioner, and a reclaim policy and
/// binding mode upstream knows.
pub fn validate_storage_class(class: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if class
        .get("provisioner")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errs.push(FieldError {
            field: "provisioner".into(),
            kind: FieldErrorKind::Required,
            detail: String::new(),
        });
    }
    for (key, supported) in [
        ("reclaimPolicy", RECLAIM_POLICIES),
        ("volumeBindingMode", BINDING_MODES),
    ] {
        if let Some(v) = class.get(key) {
            if !v.as_str().is_some_and(|s| supported.contains(&s)) {
                errs.push(FieldError {
                    field: key.into(),
                    kind: FieldErrorKind::NotSupported(v.clone(), supported),
                    detail: String::new(),
                });
            }
        }
    }
    errs
}

/// Checks a StorageClass update: [`validate_storage_class`], and parameters, provisioner,
/// reclaim policy and binding mode stay as they were.
pub fn validate_storage_class_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate_storage_class(new);
    let field = |c: &Value, k: &str| normalized(c.get(k).unwrap_or(&Value::Null));
    let empty_map = |v: Value| match v {
        Value::Object(m) if m.is_empty() => Value::Null,
        v => v,
    };
    if empty_map(field(old, "parameters")) != empty_map(field(new, "parameters")) {
        errs.push(FieldError::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    for key in ["provisioner", "reclaimPolicy"] {
        if field(old, key) != field(new, key) {
            errs.push(FieldError::forbidden(
                key,
                format!("updates to {key} are forbidden."),
            ));
        }
    }
    let mode = field(new, "volumeBindingMode");
    if field(old, "volumeBindingMode") != mode {
        errs.push(FieldError::invalid(
            "volumeBindingMode",
            mode,
            "field is immutable",
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

/// Checks a Deployment (defaulted already): a non-empty selector that selects the template's
/// labels, no negative replicas, and a rolling update that can proceed (integer or
/// percentage surge and unavailability, not both 0). Values are shown as JSON where
/// upstream prints Go values.
///
/// Upstream: pkg/apis/apps/validation/validation.go (ValidateDeploymentSpec).
pub fn validate_deployment(d: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = d.get("spec").unwrap_or(&Value::Null);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError {
            field: "spec.selector".into(),
            kind: FieldErrorKind::Required,
            detail: String::new(),
        }),
        Some(selector) => {
            let terms = |k: &str| {
                selector.get(k).map_or(0, |v| {
                    v.as_object().map_or(0, Map::len) + v.as_array().map_or(0, Vec::len)
                })
            };
            if terms("matchLabels") + terms("matchExpressions") == 0 {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    selector.clone(),
                    "empty selector is invalid for deployment",
                ));
            } else {
                let labels = spec.pointer("/template/metadata/labels");
                if !crate::pv_controller::selector_matches(selector, labels) {
                    errs.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        labels.cloned().unwrap_or(Value::Null),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    if let Some(r) = spec
        .get("replicas")
        .filter(|r| r.as_i64().is_some_and(|n| n < 0))
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            r.clone(),
            "must be greater than or equal to 0",
        ));
    }
    let strategy = spec.get("strategy").unwrap_or(&Value::Null);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    if strategy.get("type").and_then(Value::as_str) == Some("Recreate") && rolling.is_some() {
        errs.push(FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        ));
    }
    if let Some(rolling) = rolling {
        let mut zero = [false; 2];
        for (i, key) in ["maxUnavailable", "maxSurge"].into_iter().enumerate() {
            let field = format!("spec.strategy.rollingUpdate.{key}");
            let Some(v) = rolling.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            match v {
                Value::Number(n) => {
                    zero[i] = n.as_i64() == Some(0);
                    if n.as_i64().is_none_or(|n| n < 0) {
                        errs.push(FieldError::invalid(
                            field,
                            v.clone(),
                            "must be greater than or equal to 0",
                        ));
                    }
                }
                Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<u32>().ok()) {
                    Some(p) => {
                        zero[i] = p == 0;
                        if key == "maxUnavailable" && p > 100 {
                            errs.push(FieldError::invalid(
                                field,
                                v.clone(),
                                "must not be greater than 100%",
                            ));
                        }
                    }
                    None => errs.push(FieldError::invalid(
                        field,
                        v.clone(),
                        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    )),
                },
                _ => {}
            }
        }
        if zero == [true, true] {
            errs.push(FieldError::invalid(
                "spec.strategy.rollingUpdate.maxUnavailable",
                rolling
                    .get("maxUnavailable")
                    .cloned()
                    .unwrap_or(Value::Null),
                "may not be 0 when `maxSurge` is 0",
            ));
        }
    }
    errs
}

/// Checks a Deployment update: [`validate_deployment`], and the selector stays as it was
/// (apps/v1 makes it immutable).
pub fn validate_deployment_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate_deployment(new);
    let selector = |d: &Value| normalized(d.pointer("/spec/selector").unwrap_or(&Value::Null));
    if selector(old) != selector(new) {
        errs.push(FieldError::invalid(
            "spec.selector",
            new.pointer("/spec/selector")
                .cloned()
                .unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
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

    fn claim(spec: Value, phase: &str, capacity: Option<&str>) -> Value {
        let mut s = json!({"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                           "resources": {"requests": {"storage": "2Gi"}}});
        if let (Some(m), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            m.extend(extra.clone());
        }
        let mut status = json!({"phase": phase});
        if let Some(c) = capacity {
            status["capacity"] = json!({"storage": c});
        }
        json!({"metadata": {"name": "c"}, "spec": s, "status": status})
    }

    const CLAIM_FORBIDDEN: &str = "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n";

    #[rstest]
    #[case::no_change(claim(json!({}), "Pending", None), json!({}), vec![])]
    #[case::volume_name_set_once(claim(json!({}), "Pending", None), json!({"volumeName": "pv1"}), vec![])]
    #[case::volume_name_changed_once_set(
        claim(json!({"volumeName": "pv1"}), "Bound", Some("2Gi")),
        json!({"volumeName": "pv2"}),
        vec![format!("{CLAIM_FORBIDDEN}  spec.volumeName: \"pv1\" -> \"pv2\"")]
    )]
    #[case::class_set_where_none_was(claim(json!({}), "Pending", None), json!({"storageClassName": "fast"}), vec![])]
    #[case::class_changed(
        claim(json!({"storageClassName": "fast"}), "Pending", None),
        json!({"storageClassName": "slow"}),
        vec![format!("{CLAIM_FORBIDDEN}  spec.storageClassName: \"fast\" -> \"slow\"")]
    )]
    #[case::access_modes_changed(
        claim(json!({}), "Bound", Some("2Gi")),
        json!({"accessModes": ["ReadWriteMany"]}),
        vec![format!("{CLAIM_FORBIDDEN}  spec.accessModes[0]: \"ReadWriteOnce\" -> \"ReadWriteMany\"")]
    )]
    #[case::bound_claim_grows(claim(json!({}), "Bound", Some("2Gi")), json!({"resources": {"requests": {"storage": "4Gi"}}}), vec![])]
    #[case::pending_claim_grows(
        claim(json!({}), "Pending", None),
        json!({"resources": {"requests": {"storage": "4Gi"}}}),
        vec![format!("{CLAIM_FORBIDDEN}  spec.resources.requests.storage: \"2Gi\" -> \"4Gi\"")]
    )]
    #[case::same_size_in_other_units(claim(json!({}), "Pending", None), json!({"resources": {"requests": {"storage": "2048Mi"}}}), vec![])]
    #[case::bound_claim_shrinks_to_its_capacity(
        claim(json!({"resources": {"requests": {"storage": "3Gi"}}}), "Bound", Some("2Gi")),
        json!({"resources": {"requests": {"storage": "2Gi"}}}),
        vec!["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity".to_string()]
    )]
    #[case::bound_claim_shrinks_above_its_capacity(
        claim(json!({"resources": {"requests": {"storage": "3Gi"}}}), "Bound", Some("2Gi")),
        json!({"resources": {"requests": {"storage": "2500Mi"}}}),
        vec![]
    )]
    #[case::bound_claim_changes_attributes_class(claim(json!({}), "Bound", Some("2Gi")), json!({"volumeAttributesClassName": "gold"}), vec![])]
    #[case::volume_mode_changed(
        claim(json!({}), "Pending", None),
        json!({"volumeMode": "Block"}),
        vec![
            format!("{CLAIM_FORBIDDEN}  spec.volumeMode: \"Filesystem\" -> \"Block\""),
            "volumeMode: Invalid value: \"Block\": field is immutable".to_string(),
        ]
    )]
    fn claim_updates(#[case] old: Value, #[case] change: Value, #[case] want: Vec<String>) {
        let mut new = old.clone();
        if let (Some(spec), Some(change)) = (new["spec"].as_object_mut(), change.as_object()) {
            spec.extend(change.clone());
        }
        let got: Vec<String> = validate_persistent_volume_claim_update(&old, &new)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(got, want);
    }

    fn class(extra: Value) -> Value {
        let mut c = json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com",
                           "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"});
        if let (Some(m), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            m.extend(extra.clone());
        }
        c
    }

    #[rstest]
    #[case::valid(class(json!({})), vec![])]
    #[case::provisioner_missing(class(json!({"provisioner": null})), vec!["provisioner: Required value"])]
    #[case::unknown_reclaim_policy(
        class(json!({"reclaimPolicy": "Recycle"})),
        vec!["reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""]
    )]
    #[case::unknown_binding_mode(
        class(json!({"volumeBindingMode": "Later"})),
        vec!["volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\""]
    )]
    fn storage_classes(#[case] c: Value, #[case] want: Vec<&str>) {
        let got: Vec<String> = validate_storage_class(&c)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::expansion_allowed_and_labels(class(json!({"allowVolumeExpansion": true, "metadata": {"name": "fast", "labels": {"a": "b"}}})), vec![])]
    #[case::empty_parameters_are_absent(class(json!({"parameters": {}})), vec![])]
    #[case::parameters_changed(class(json!({"parameters": {"type": "ssd"}})), vec!["parameters: Forbidden: updates to parameters are forbidden."])]
    #[case::provisioner_changed(class(json!({"provisioner": "other.example.com"})), vec!["provisioner: Forbidden: updates to provisioner are forbidden."])]
    #[case::reclaim_policy_changed(class(json!({"reclaimPolicy": "Retain"})), vec!["reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."])]
    #[case::binding_mode_changed(
        class(json!({"volumeBindingMode": "WaitForFirstConsumer"})),
        vec!["volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable"]
    )]
    fn storage_class_updates(#[case] new: Value, #[case] want: Vec<&str>) {
        let got: Vec<String> = validate_storage_class_update(&class(json!({})), &new)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(got, want);
    }

    #[rstest]
    #[case::plain("5", Some(5_000))]
    #[case::milli("250m", Some(250))]
    #[case::binary("1Gi", Some(1_073_741_824_000))]
    #[case::decimal_fraction("1.5G", Some(1_500_000_000_000))]
    #[case::unknown_suffix("1Xi", None)]
    fn quantities(#[case] q: &str, #[case] want: Option<i128>) {
        assert_eq!(quantity_millis(q), want);
    }

    fn volume(extra: Value) -> Value {
        let mut s = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                           "volumeMode": "Filesystem", "persistentVolumeReclaimPolicy": "Retain",
                           "local": {"path": "/mnt/a"}});
        if let (Some(m), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            m.extend(extra.clone());
        }
        json!({"metadata": {"name": "pv1"}, "spec": s})
    }

    const AFFINITY: &str = r#"{"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}"#;

    #[rstest]
    #[case::claim_ref_and_capacity_change(volume(json!({})), volume(json!({"claimRef": {"namespace": "default", "name": "c"}, "capacity": {"storage": "2Gi"}})), vec![])]
    #[case::node_affinity_set_where_none_was(volume(json!({})), volume(json!({"nodeAffinity": serde_json::from_str::<Value>(AFFINITY).unwrap_or_default()})), vec![])]
    #[case::source_changed(
        volume(json!({})),
        volume(json!({"local": {"path": "/mnt/b"}})),
        vec!["spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n  spec.local.path: \"/mnt/a\" -> \"/mnt/b\"".to_string()]
    )]
    #[case::volume_mode_changed(
        volume(json!({})),
        volume(json!({"volumeMode": "Block"})),
        vec!["volumeMode: Invalid value: \"Block\": field is immutable".to_string()]
    )]
    #[case::node_affinity_changed(
        volume(json!({"nodeAffinity": serde_json::from_str::<Value>(AFFINITY).unwrap_or_default()})),
        volume(json!({"nodeAffinity": serde_json::from_str::<Value>(&AFFINITY.replace("n1", "n2")).unwrap_or_default()})),
        vec!["nodeAffinity: Invalid value: {\"required\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/hostname\",\"operator\":\"In\",\"values\":[\"n2\"]}]}]}}: field is immutable".to_string()]
    )]
    fn volume_updates(#[case] old: Value, #[case] new: Value, #[case] want: Vec<String>) {
        let got: Vec<String> = validate_persistent_volume_update(&old, &new)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(got, want);
    }
}

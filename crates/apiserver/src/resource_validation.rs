//! resource.k8s.io/v1 defaulting and validation: what the real API server does to a
//! DeviceClass, ResourceSlice, ResourceClaim (and its status) or ResourceClaimTemplate
//! before it stores it. Errors are field errors with upstream's paths and messages,
//! answered together as one 422 (see [`crate::status::ApiError::invalid_fields`]).
//!
//! Names (`metadata.name`, `generateName`) are checked for every kind by
//! [`crate::admission::check_name`]; this module checks the specs. Where upstream prints a
//! Go struct as the offending value (an immutable spec, an attribute with two values), the
//! value here is the JSON of the field.
//!
//! Upstream: pkg/apis/resource/validation/validation.go and pkg/apis/resource/v1/defaults.go.

use serde_json::{json, Value};

use crate::meta::{name_errors, NameRule};
use crate::validation::{FieldError, FieldErrorKind};

/// Requests in a claim at most (upstream's `DeviceRequestsMaxSize`); also the most request
/// names a constraint or config may list.
pub const DEVICE_REQUESTS_MAX_SIZE: usize = 32;
/// Selectors in a request or class at most.
pub const DEVICE_SELECTORS_MAX_SIZE: usize = 32;
/// Constraints in a claim at most.
pub const DEVICE_CONSTRAINTS_MAX_SIZE: usize = 32;
/// Config entries in a claim or class at most.
pub const DEVICE_CONFIG_MAX_SIZE: usize = 32;
/// Subrequests in a `firstAvailable` list at most.
pub const FIRST_AVAILABLE_MAX_SIZE: usize = 8;
/// Consumers in a claim's `status.reservedFor` at most.
pub const RESERVED_FOR_MAX_SIZE: usize = 256;
/// Devices in one ResourceSlice at most.
pub const RESOURCE_SLICE_MAX_DEVICES: usize = 128;
/// Devices in one ResourceSlice at most when a device has taints or consumes counters.
pub const RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS: usize = 64;
/// Attributes and capacities of one device together at most.
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// Bytes in a string or version attribute value at most.
pub const ATTRIBUTE_MAX_VALUE_LENGTH: usize = 64;
/// Bytes in a CEL selector expression at most.
pub const CEL_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;
/// Bytes in opaque driver parameters at most.
pub const OPAQUE_PARAMETERS_MAX_LENGTH: usize = 10 * 1024;
/// Results in an allocation at most.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;
/// Bytes in a driver name at most.
const DRIVER_NAME_MAX_LENGTH: usize = 63;
/// Bytes in a pool name at most.
const POOL_NAME_MAX_LENGTH: usize = 253;
/// Bytes in the identifier part of an attribute or capacity name at most.
const DEVICE_MAX_ID_LENGTH: usize = 32;

const ALLOCATION_MODES: &[&str] = &["All", "ExactCount"];
const TOLERATION_OPERATORS: &[&str] = &["Equal", "Exists"];
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];

const C_IDENTIFIER_MSG: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const REQUEST_REF_MSG: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
const IMMUTABLE: &str = "field is immutable";

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn present(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

/// Upstream's defaults (pkg/apis/resource/v1/defaults.go): a request or subrequest without
/// `allocationMode` is `ExactCount`, and an `ExactCount` one without `count` asks for one
/// device; a toleration without `operator` is `Equal`. Applied on create and update of
/// claims and templates, so that an update sent without them compares equal.
pub fn set_defaults(kind: &str, obj: &mut Value) {
    let devices = match kind {
        "ResourceClaim" => obj.pointer_mut("/spec/devices"),
        "ResourceClaimTemplate" => obj.pointer_mut("/spec/spec/devices"),
        _ => None,
    };
    let Some(requests) = devices
        .and_then(|d| d.get_mut("requests"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for request in requests {
        if let Some(exactly) = request.get_mut("exactly").filter(|e| e.is_object()) {
            default_request(exactly);
        }
        if let Some(subs) = request
            .get_mut("firstAvailable")
            .and_then(Value::as_array_mut)
        {
            subs.iter_mut().for_each(default_request);
        }
    }
}

fn default_request(r: &mut Value) {
    let Some(m) = r.as_object_mut() else {
        return;
    };
    if m.get("allocationMode")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        m.insert("allocationMode".into(), json!("ExactCount"));
    }
    let count = m.get("count").and_then(Value::as_i64).unwrap_or(0);
    if m.get("allocationMode").and_then(Value::as_str) == Some("ExactCount") && count == 0 {
        m.insert("count".into(), json!(1));
    }
    if let Some(ts) = m.get_mut("tolerations").and_then(Value::as_array_mut) {
        for t in ts.iter_mut().filter_map(Value::as_object_mut) {
            if t.get("operator")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                t.insert("operator".into(), json!("Equal"));
            }
        }
    }
}

/// The namespace label that lets claims in the namespace ask for admin access to devices.
pub const ADMIN_ACCESS_NAMESPACE_LABEL: &str = "resource.kubernetes.io/admin-access";

/// Admin access to devices (a request's `adminAccess: true` in a claim or template, or an
/// allocation result's in a claim's new status) is only for namespaces labelled
/// [`ADMIN_ACCESS_NAMESPACE_LABEL`]`: "true"`; the first such field is Forbidden otherwise.
/// `old` is the stored claim on a status update: an allocation granted before stays.
///
/// Upstream: pkg/registry/resource/utils.go (AuthorizedForAdmin, AuthorizedForAdminStatus).
pub fn admin_access_errors(
    kind: &str,
    obj: &Value,
    old: Option<&Value>,
    namespace: Option<&Value>,
) -> Vec<FieldError> {
    let requested = |requests: &[Value]| {
        requests
            .iter()
            .position(|r| r.pointer("/exactly/adminAccess") == Some(&Value::Bool(true)))
    };
    let granted = |claim: &Value| {
        claim
            .pointer("/status/allocation/devices/results")
            .and_then(Value::as_array)
            .and_then(|rs| {
                rs.iter()
                    .position(|r| r.get("adminAccess") == Some(&Value::Bool(true)))
            })
    };
    let path = match (kind, old) {
        ("ResourceClaim", Some(old)) if granted(old).is_none() => {
            granted(obj).map(|i| format!("status.allocation.devices.results[{i}].adminAccess"))
        }
        ("ResourceClaim", None) => requested(list(
            obj.pointer("/spec/devices").unwrap_or(&Value::Null),
            "requests",
        ))
        .map(|i| format!("spec.devices.requests[{i}].exactly.adminAccess")),
        ("ResourceClaimTemplate", None) => requested(list(
            obj.pointer("/spec/spec/devices").unwrap_or(&Value::Null),
            "requests",
        ))
        .map(|i| format!("spec.devices.requests[{i}].exactly.adminAccess")),
        _ => None,
    };
    let Some(path) = path else {
        return Vec::new();
    };
    let labelled = namespace
        .and_then(|ns| ns.pointer("/metadata/labels"))
        .and_then(|l| l.get(ADMIN_ACCESS_NAMESPACE_LABEL))
        .and_then(Value::as_str)
        == Some("true");
    if labelled {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        path,
        format!(
            "admin access to devices requires the `{ADMIN_ACCESS_NAMESPACE_LABEL}: true` label on the containing namespace"
        ),
    )]
}

/// Checks a new object of a resource.k8s.io kind.
pub fn validate_create(kind: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match kind {
        "ResourceClaim" => claim_spec(obj.get("spec"), "spec", &mut errs),
        "ResourceClaimTemplate" => {
            claim_spec(obj.pointer("/spec/spec"), "spec.spec", &mut errs);
        }
        "DeviceClass" => device_class_spec(obj.get("spec"), None, &mut errs),
        "ResourceSlice" => slice_spec(obj.get("spec"), None, &mut errs),
        _ => {}
    }
    errs
}

/// Checks an update of a resource.k8s.io object (`status_only` for the claim's status
/// subresource). `new` is defaulted already.
pub fn validate_update(kind: &str, old: &Value, new: &Value, status_only: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match kind {
        "ResourceClaim" if status_only => claim_status(old, new, &mut errs),
        // The spec of a claim or template is fixed once created: only that is checked.
        "ResourceClaim" | "ResourceClaimTemplate" => {
            let (o, n) = (spec_of(old), spec_of(new));
            if o != n {
                errs.push(FieldError::invalid("spec", n, IMMUTABLE));
            }
        }
        "DeviceClass" => device_class_spec(new.get("spec"), old.get("spec"), &mut errs),
        "ResourceSlice" => slice_spec(new.get("spec"), old.get("spec"), &mut errs),
        _ => {}
    }
    errs
}

/// The spec as compared for immutability: `null` fields count as absent.
fn spec_of(obj: &Value) -> Value {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    strip(obj.get("spec").unwrap_or(&Value::Null))
}

// ---- names ----

fn dns_label(value: &str, path: &str, errs: &mut Vec<FieldError>) {
    for why in name_errors(value, NameRule::Dns1123Label, false) {
        errs.push(FieldError::invalid(path, json!(value), why));
    }
}

fn dns_subdomain(value: &str, path: &str, errs: &mut Vec<FieldError>) {
    for why in name_errors(value, NameRule::Dns1123Subdomain, false) {
        errs.push(FieldError::invalid(path, json!(value), why));
    }
}

/// A driver name: required, at most 63 bytes, a DNS subdomain (case aside), as a CSI
/// driver's name.
fn driver_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > DRIVER_NAME_MAX_LENGTH {
        errs.push(FieldError::of(
            path,
            FieldErrorKind::TooLong(DRIVER_NAME_MAX_LENGTH),
        ));
    }
    for why in name_errors(&name.to_lowercase(), NameRule::Dns1123Subdomain, false) {
        errs.push(FieldError::invalid(path, json!(name), why));
    }
}

fn pool_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    if name.len() > POOL_NAME_MAX_LENGTH {
        errs.push(FieldError::of(
            path,
            FieldErrorKind::TooLong(POOL_NAME_MAX_LENGTH),
        ));
    }
    for part in name.split('/') {
        dns_subdomain(part, path, errs);
    }
}

fn c_identifier(id: &str, path: &str, errs: &mut Vec<FieldError>) {
    if id.len() > DEVICE_MAX_ID_LENGTH {
        errs.push(FieldError::of(
            path,
            FieldErrorKind::TooLong(DEVICE_MAX_ID_LENGTH),
        ));
    }
    let mut chars = id.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        errs.push(FieldError::invalid(path, json!(id), C_IDENTIFIER_MSG));
    }
}

/// An attribute or capacity name: a C identifier, optionally behind a driver-name domain.
/// Errors are reported on the map (`…attributes`), not the key, as upstream does.
fn qualified_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [id] => c_identifier(id, path, errs),
        [domain, id] => {
            if domain.is_empty() {
                errs.push(FieldError::invalid(
                    path,
                    json!(""),
                    "the domain must not be empty",
                ));
            } else {
                driver_name(domain, path, errs);
            }
            if id.is_empty() {
                errs.push(FieldError::invalid(
                    path,
                    json!(""),
                    "the name must not be empty",
                ));
            } else {
                c_identifier(id, path, errs);
            }
        }
        _ => errs.push(FieldError::invalid(
            path,
            json!(name),
            "must not contain more than one slash",
        )),
    }
}

fn fully_qualified_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    qualified_name(name, path, errs);
    if !name.contains('/') {
        errs.push(FieldError::invalid(
            path,
            json!(name),
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
    }
}

fn qualified_name_part_ok(name: &str) -> bool {
    name.bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && name
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
}

/// What is wrong with a label key (apimachinery's IsQualifiedName), one message each.
fn label_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for why in name_errors(prefix, NameRule::Dns1123Subdomain, false) {
                    errs.push(format!("prefix part {why}"));
                }
            }
            name
        }
        _ => {
            return vec![format!("a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !qualified_name_part_ok(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

fn label_name(value: &str, path: &str, errs: &mut Vec<FieldError>) {
    for why in label_name_errors(value) {
        errs.push(FieldError::invalid(path, json!(value), why));
    }
}

fn label_value(value: &str, path: &str, errs: &mut Vec<FieldError>) {
    if value.len() > 63 {
        errs.push(FieldError::invalid(
            path,
            json!(value),
            "must be no more than 63 characters",
        ));
    }
    if !value.is_empty() && !qualified_name_part_ok(value) {
        errs.push(FieldError::invalid(path, json!(value), LABEL_VALUE_MSG));
    }
}

/// `Too many` when the list is longer than `max` (nothing else is checked then, as upstream
/// stops there); otherwise `false` and the caller checks the items.
fn too_many(items: &[Value], max: usize, path: &str, errs: &mut Vec<FieldError>) -> bool {
    if items.len() > max {
        errs.push(FieldError::of(
            path,
            FieldErrorKind::TooMany(items.len(), max),
        ));
        return true;
    }
    false
}

/// `Duplicate value` for each item whose key an earlier item had.
fn duplicates(keys: impl Iterator<Item = Value>, path: &str, errs: &mut Vec<FieldError>) {
    let mut seen = Vec::new();
    for (i, key) in keys.enumerate() {
        if seen.contains(&key) {
            errs.push(FieldError::of(
                format!("{path}[{i}]"),
                FieldErrorKind::Duplicate(key),
            ));
        } else {
            seen.push(key);
        }
    }
}

// ---- claims ----

/// The request names of a claim, each with its subrequests' names.
fn request_names(devices: &Value) -> Vec<(String, Vec<String>)> {
    list(devices, "requests")
        .iter()
        .map(|r| {
            let subs = list(r, "firstAvailable")
                .iter()
                .map(|s| str_of(s, "name").unwrap_or("").to_string())
                .collect();
            (str_of(r, "name").unwrap_or("").to_string(), subs)
        })
        .collect()
}

fn request_ref(
    name: &str,
    path: &str,
    names: &[(String, Vec<String>)],
    errs: &mut Vec<FieldError>,
) {
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        errs.push(FieldError::invalid(path, json!(name), REQUEST_REF_MSG));
        return;
    }
    for s in &segments {
        dns_label(s, path, errs);
    }
    let known = match segments.as_slice() {
        [r] => names.iter().any(|(n, _)| n == r),
        [r, s] => names
            .iter()
            .any(|(n, subs)| n == r && subs.iter().any(|x| x == s)),
        _ => false,
    };
    if !known {
        errs.push(FieldError::invalid(path, json!(name), REQUEST_REF_MSG));
    }
}

fn request_refs(
    owner: &Value,
    path: &str,
    names: &[(String, Vec<String>)],
    errs: &mut Vec<FieldError>,
) {
    let refs = list(owner, "requests");
    let path = format!("{path}.requests");
    if too_many(refs, DEVICE_REQUESTS_MAX_SIZE, &path, errs) {
        return;
    }
    for (i, r) in refs.iter().enumerate() {
        request_ref(
            r.as_str().unwrap_or(""),
            &format!("{path}[{i}]"),
            names,
            errs,
        );
    }
    duplicates(refs.iter().cloned(), &path, errs);
}

fn claim_spec(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let devices = spec.and_then(|s| s.get("devices")).unwrap_or(&empty);
    let path = format!("{path}.devices");
    let names = request_names(devices);

    let requests = list(devices, "requests");
    let requests_path = format!("{path}.requests");
    if !too_many(requests, DEVICE_REQUESTS_MAX_SIZE, &requests_path, errs) {
        for (i, r) in requests.iter().enumerate() {
            device_request(r, &format!("{requests_path}[{i}]"), errs);
        }
        duplicates(
            requests
                .iter()
                .map(|r| json!(str_of(r, "name").unwrap_or(""))),
            &requests_path,
            errs,
        );
    }

    let constraints = list(devices, "constraints");
    let constraints_path = format!("{path}.constraints");
    if !too_many(
        constraints,
        DEVICE_CONSTRAINTS_MAX_SIZE,
        &constraints_path,
        errs,
    ) {
        for (i, c) in constraints.iter().enumerate() {
            let p = format!("{constraints_path}[{i}]");
            request_refs(c, &p, &names, errs);
            if let Some(attr) = c.get("matchAttribute").and_then(Value::as_str) {
                fully_qualified_name(attr, &format!("{p}.matchAttribute"), errs);
            } else if let Some(attr) = c.get("distinctAttribute").and_then(Value::as_str) {
                fully_qualified_name(attr, &format!("{p}.distinctAttribute"), errs);
            } else {
                // Upstream's words since consumable capacity (beta, on by default in 1.36)
                // brought `distinctAttribute`.
                errs.push(FieldError::required(
                    p,
                    "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
                ));
            }
        }
    }

    let configs = list(devices, "config");
    let config_path = format!("{path}.config");
    if !too_many(configs, DEVICE_CONFIG_MAX_SIZE, &config_path, errs) {
        for (i, c) in configs.iter().enumerate() {
            let p = format!("{config_path}[{i}]");
            request_refs(c, &p, &names, errs);
            device_configuration(c, &p, errs);
        }
    }
}

fn device_request(r: &Value, path: &str, errs: &mut Vec<FieldError>) {
    dns_label(
        str_of(r, "name").unwrap_or(""),
        &format!("{path}.name"),
        errs,
    );
    let first_available = list(r, "firstAvailable");
    let has_first = !first_available.is_empty();
    let has_exactly = present(r, "exactly");
    match (has_exactly, has_first) {
        (false, false) => errs.push(FieldError::required(
            path,
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
        (true, true) => errs.push(FieldError::invalid(
            path,
            json!("null"),
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )),
        (false, true) => {
            let p = format!("{path}.firstAvailable");
            if !too_many(first_available, FIRST_AVAILABLE_MAX_SIZE, &p, errs) {
                for (i, s) in first_available.iter().enumerate() {
                    let sp = format!("{p}[{i}]");
                    dns_label(str_of(s, "name").unwrap_or(""), &format!("{sp}.name"), errs);
                    exact_request(s, &sp, errs);
                }
                duplicates(
                    first_available
                        .iter()
                        .map(|s| json!(str_of(s, "name").unwrap_or(""))),
                    &p,
                    errs,
                );
            }
        }
        (true, false) => {
            if let Some(e) = r.get("exactly") {
                exact_request(e, &format!("{path}.exactly"), errs);
            }
        }
    }
}

/// The fields an `exactly` request and a subrequest share.
fn exact_request(r: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let class = str_of(r, "deviceClassName").unwrap_or("");
    let class_path = format!("{path}.deviceClassName");
    if class.is_empty() {
        errs.push(FieldError::required(class_path, ""));
    } else {
        dns_subdomain(class, &class_path, errs);
    }
    selectors(
        list(r, "selectors"),
        &format!("{path}.selectors"),
        false,
        errs,
    );
    let count = r.get("count").and_then(Value::as_i64).unwrap_or(0);
    let count_path = format!("{path}.count");
    match str_of(r, "allocationMode").unwrap_or("") {
        "All" => {
            if count != 0 {
                errs.push(FieldError::invalid(
                    count_path,
                    json!(count),
                    "must not be specified when allocationMode is 'All'",
                ));
            }
        }
        "ExactCount" => {
            if count <= 0 {
                errs.push(FieldError::invalid(
                    count_path,
                    json!(count),
                    "must be greater than zero",
                ));
            }
        }
        other => errs.push(FieldError::of(
            format!("{path}.allocationMode"),
            FieldErrorKind::NotSupported(json!(other), ALLOCATION_MODES),
        )),
    }
    for (i, t) in list(r, "tolerations").iter().enumerate() {
        toleration(t, &format!("{path}.tolerations[{i}]"), errs);
    }
}

/// Selectors of a request or class; `stored` ones (unchanged since they were accepted) are
/// not compiled again.
fn selectors(items: &[Value], path: &str, stored: bool, errs: &mut Vec<FieldError>) {
    if too_many(items, DEVICE_SELECTORS_MAX_SIZE, path, errs) {
        return;
    }
    for (i, s) in items.iter().enumerate() {
        let p = format!("{path}[{i}].cel");
        match s.get("cel").filter(|c| !c.is_null()) {
            None => errs.push(FieldError::required(p, "")),
            Some(_) if stored => {}
            Some(cel) => {
                let expression = str_of(cel, "expression").unwrap_or("");
                cel_expression(expression, &format!("{p}.expression"), errs);
            }
        }
    }
}

/// A CEL device selector: not over upstream's length limit, and compiling as upstream's
/// compiler would (its message is the detail of the `Invalid value`).
fn cel_expression(expression: &str, path: &str, errs: &mut Vec<FieldError>) {
    if expression.len() > CEL_EXPRESSION_MAX_LENGTH {
        errs.push(FieldError::of(
            path,
            FieldErrorKind::TooLong(CEL_EXPRESSION_MAX_LENGTH),
        ));
        return;
    }
    if let Err(why) = kubesched_cel::DeviceSelector::compile(expression) {
        errs.push(FieldError::invalid(
            path,
            json!(expression),
            why.to_string(),
        ));
    }
}

fn toleration(t: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let key = str_of(t, "key").unwrap_or("");
    if !key.is_empty() {
        label_name(key, &format!("{path}.key"), errs);
    }
    let value = str_of(t, "value").unwrap_or("");
    match str_of(t, "operator").unwrap_or("") {
        "Exists" => {
            if !value.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.value"),
                    json!(value),
                    "must be empty for operator `Exists`",
                ));
            }
        }
        "Equal" => label_value(value, &format!("{path}.value"), errs),
        "" => errs.push(FieldError::required(format!("{path}.operator"), "")),
        other => errs.push(FieldError::of(
            format!("{path}.operator"),
            FieldErrorKind::NotSupported(json!(other), TOLERATION_OPERATORS),
        )),
    }
    match str_of(t, "effect").unwrap_or("") {
        "" => {}
        e if TAINT_EFFECTS.contains(&e) => {}
        other => errs.push(FieldError::of(
            format!("{path}.effect"),
            FieldErrorKind::NotSupported(json!(other), TAINT_EFFECTS),
        )),
    }
}

/// A config entry: `opaque` with a driver and a JSON object as parameters.
fn device_configuration(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let opaque_path = format!("{path}.opaque");
    let Some(opaque) = c.get("opaque").filter(|o| !o.is_null()) else {
        errs.push(FieldError::required(opaque_path, ""));
        return;
    };
    driver_name(
        str_of(opaque, "driver").unwrap_or(""),
        &format!("{opaque_path}.driver"),
        errs,
    );
    let params_path = format!("{opaque_path}.parameters");
    match opaque.get("parameters") {
        None | Some(Value::Null) => errs.push(FieldError::required(params_path, "")),
        Some(p) if p.to_string().len() > OPAQUE_PARAMETERS_MAX_LENGTH => errs.push(FieldError::of(
            params_path,
            FieldErrorKind::TooLong(OPAQUE_PARAMETERS_MAX_LENGTH),
        )),
        Some(Value::Object(_)) => {}
        Some(_) => errs.push(FieldError::invalid(
            params_path,
            json!("<value omitted>"),
            "must be a valid JSON object",
        )),
    }
}

// ---- claim status ----

fn claim_status(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let status = new.get("status").unwrap_or(&empty);
    let old_status = old.get("status").unwrap_or(&empty);
    let names = request_names(new.pointer("/spec/devices").unwrap_or(&empty));

    let reserved = list(status, "reservedFor");
    if !too_many(reserved, RESERVED_FOR_MAX_SIZE, "status.reservedFor", errs) {
        for (i, r) in reserved.iter().enumerate() {
            for field in ["resource", "name", "uid"] {
                if str_of(r, field).unwrap_or("").is_empty() {
                    errs.push(FieldError::required(
                        format!("status.reservedFor[{i}].{field}"),
                        "",
                    ));
                }
            }
        }
        duplicates(
            reserved
                .iter()
                .map(|r| json!(str_of(r, "uid").unwrap_or(""))),
            "status.reservedFor",
            errs,
        );
    }

    let allocation = status.get("allocation").filter(|a| !a.is_null());
    let old_allocation = old_status.get("allocation").filter(|a| !a.is_null());
    if !reserved.is_empty() {
        if allocation.is_none() {
            errs.push(FieldError::forbidden(
                "status.reservedFor",
                "may not be specified when `allocated` is not set",
            ));
        } else if new.pointer("/metadata/deletionTimestamp").is_some() {
            let before = list(old_status, "reservedFor");
            if reserved.iter().any(|r| !before.contains(r)) {
                errs.push(FieldError::forbidden(
                    "status.reservedFor",
                    "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                ));
            }
        }
    }
    match (old_allocation, allocation) {
        (Some(o), Some(n)) if o != n => errs.push(FieldError::invalid(
            "status.allocation",
            n.clone(),
            IMMUTABLE,
        )),
        (None, Some(n)) => allocation_result(n, &names, errs),
        _ => {}
    }
}

fn allocation_result(a: &Value, names: &[(String, Vec<String>)], errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let devices = a.get("devices").unwrap_or(&empty);
    let results = list(devices, "results");
    let path = "status.allocation.devices.results";
    if too_many(results, ALLOCATION_RESULTS_MAX_SIZE, path, errs) {
        return;
    }
    for (i, r) in results.iter().enumerate() {
        let p = format!("{path}[{i}]");
        request_ref(
            str_of(r, "request").unwrap_or(""),
            &format!("{p}.request"),
            names,
            errs,
        );
        driver_name(
            str_of(r, "driver").unwrap_or(""),
            &format!("{p}.driver"),
            errs,
        );
        pool_name(str_of(r, "pool").unwrap_or(""), &format!("{p}.pool"), errs);
        dns_label(
            str_of(r, "device").unwrap_or(""),
            &format!("{p}.device"),
            errs,
        );
        for (j, t) in list(r, "tolerations").iter().enumerate() {
            toleration(t, &format!("{p}.tolerations[{j}]"), errs);
        }
    }
}

// ---- device classes ----

fn device_class_spec(spec: Option<&Value>, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let spec = spec.unwrap_or(&empty);
    // Selectors exactly as before were compiled when they were stored.
    let stored = old.is_some_and(|o| o.get("selectors") == spec.get("selectors"));
    selectors(list(spec, "selectors"), "spec.selectors", stored, errs);
    let configs = list(spec, "config");
    if !too_many(configs, DEVICE_CONFIG_MAX_SIZE, "spec.config", errs) {
        for (i, c) in configs.iter().enumerate() {
            device_configuration(c, &format!("spec.config[{i}]"), errs);
        }
    }
    if let Some(name) = spec.get("extendedResourceName").and_then(Value::as_str) {
        if !is_extended_resource_name(name) {
            errs.push(FieldError::invalid(
                "spec.extendedResourceName",
                json!(name),
                "must be a valid extended resource name",
            ));
        }
    }
}

/// Whether `name` is an extended resource name (upstream's IsExtendedResourceName): a
/// domain-prefixed name outside `kubernetes.io/`, not a quota `requests.` name, that is
/// still a qualified name with `requests.` in front.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    if native || name.starts_with("requests.") {
        return false;
    }
    label_name_errors(&format!("requests.{name}")).is_empty()
}

// ---- resource slices ----

fn slice_spec(spec: Option<&Value>, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let spec = spec.unwrap_or(&empty);
    let driver = str_of(spec, "driver").unwrap_or("");
    driver_name(driver, "spec.driver", errs);
    let pool = spec.get("pool").unwrap_or(&empty);
    pool_name(str_of(pool, "name").unwrap_or(""), "spec.pool.name", errs);
    let count = pool
        .get("resourceSliceCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if count <= 0 {
        errs.push(FieldError::invalid(
            "spec.pool.resourceSliceCount",
            json!(count),
            "must be greater than zero",
        ));
    }
    let generation = pool.get("generation").and_then(Value::as_i64).unwrap_or(0);
    if generation < 0 {
        errs.push(FieldError::invalid(
            "spec.pool.generation",
            json!(generation),
            "must be greater than or equal to zero",
        ));
    }
    if let Some(old) = old {
        let or_null = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
        for (path, pointer) in [
            ("spec.pool.name", "/pool/name"),
            ("spec.driver", "/driver"),
            ("spec.nodeName", "/nodeName"),
        ] {
            let (o, n) = (
                or_null(old.pointer(pointer)),
                or_null(spec.pointer(pointer)),
            );
            if o != n {
                errs.push(FieldError::invalid(
                    path,
                    n.unwrap_or_else(|| json!("null")),
                    IMMUTABLE,
                ));
            }
        }
    }

    let mut set = Vec::new();
    if let Some(node) = spec.get("nodeName").and_then(Value::as_str) {
        if node.is_empty() {
            errs.push(FieldError::invalid(
                "spec.nodeName",
                json!(""),
                "must be either unset or set to a non-empty string",
            ));
        } else {
            set.push("`nodeName`");
            dns_subdomain(node, "spec.nodeName", errs);
        }
    }
    if let Some(selector) = spec.get("nodeSelector").filter(|s| !s.is_null()) {
        set.push("`nodeSelector`");
        let terms = list(selector, "nodeSelectorTerms");
        if terms.len() != 1 {
            errs.push(FieldError::invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                json!(terms),
                "must have exactly one node selector term",
            ));
        }
    }
    for field in ["allNodes", "perDeviceNodeSelection"] {
        match spec.get(field).and_then(Value::as_bool) {
            Some(true) => set.push(if field == "allNodes" {
                "`allNodes`"
            } else {
                "`perDeviceNodeSelection`"
            }),
            Some(false) => errs.push(FieldError::invalid(
                format!("spec.{field}"),
                json!(false),
                "must be either unset or set to true",
            )),
            None => {}
        }
    }
    const ONE_OF: &str =
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => errs.push(FieldError::required("spec", ONE_OF)),
        1 => {}
        _ => errs.push(FieldError::invalid(
            "spec",
            json!(format!("{{{}}}", set.join(", "))),
            format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
    if present(spec, "sharedCounters") && present(spec, "devices") {
        errs.push(FieldError::invalid(
            "spec",
            json!(""),
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }

    let devices = list(spec, "devices");
    let advanced = devices
        .iter()
        .any(|d| !list(d, "taints").is_empty() || !list(d, "consumesCounters").is_empty());
    let max = if advanced {
        RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
    } else {
        RESOURCE_SLICE_MAX_DEVICES
    };
    if too_many(devices, max, "spec.devices", errs) {
        return;
    }
    let per_device = spec.get("perDeviceNodeSelection").and_then(Value::as_bool) == Some(true);
    for (i, d) in devices.iter().enumerate() {
        device(d, &format!("spec.devices[{i}]"), per_device, errs);
    }
    duplicates(
        devices
            .iter()
            .map(|d| json!(str_of(d, "name").unwrap_or(""))),
        "spec.devices",
        errs,
    );
}

fn device(d: &Value, path: &str, per_device: bool, errs: &mut Vec<FieldError>) {
    dns_label(
        str_of(d, "name").unwrap_or(""),
        &format!("{path}.name"),
        errs,
    );
    let map = |key: &str| d.get(key).and_then(Value::as_object);
    let attributes = map("attributes");
    let capacity = map("capacity");
    let n = attributes.map_or(0, |m| m.len()) + capacity.map_or(0, |m| m.len());
    if n > MAX_ATTRIBUTES_AND_CAPACITIES {
        errs.push(FieldError::invalid(
            path,
            json!(n),
            format!(
                "the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
            ),
        ));
    }
    let attributes_path = format!("{path}.attributes");
    for (key, value) in attributes.into_iter().flatten() {
        qualified_name(key, &attributes_path, errs);
        attribute(value, &format!("{attributes_path}[{key}]"), errs);
    }
    let multiple = d.get("allowMultipleAllocations").and_then(Value::as_bool) == Some(true);
    let capacity_path = format!("{path}.capacity");
    for (key, value) in capacity.into_iter().flatten() {
        qualified_name(key, &capacity_path, errs);
        if !multiple && present(value, "requestPolicy") {
            errs.push(FieldError::forbidden(
                format!("{capacity_path}[{key}].requestPolicy"),
                "allowMultipleAllocations must be true",
            ));
        }
    }
    for (i, t) in list(d, "taints").iter().enumerate() {
        let p = format!("{path}.taints[{i}]");
        label_name(str_of(t, "key").unwrap_or(""), &format!("{p}.key"), errs);
        let value = str_of(t, "value").unwrap_or("");
        if !value.is_empty() {
            label_value(value, &format!("{p}.value"), errs);
        }
        match str_of(t, "effect").unwrap_or("") {
            "" => errs.push(FieldError::required(format!("{p}.effect"), "")),
            e if TAINT_EFFECTS.contains(&e) => {}
            other => errs.push(FieldError::of(
                format!("{p}.effect"),
                FieldErrorKind::NotSupported(json!(other), TAINT_EFFECTS),
            )),
        }
    }
    let node_fields = ["nodeName", "nodeSelector", "allNodes"]
        .iter()
        .any(|f| present(d, f));
    if per_device {
        let mut set = Vec::new();
        if let Some(node) = d.get("nodeName").and_then(Value::as_str) {
            if node.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.nodeName"),
                    json!(""),
                    "must not be empty",
                ));
            } else {
                set.push("`nodeName`");
                dns_subdomain(node, &format!("{path}.nodeName"), errs);
            }
        }
        if present(d, "nodeSelector") {
            set.push("`nodeSelector`");
        }
        match d.get("allNodes").and_then(Value::as_bool) {
            Some(true) => set.push("`allNodes`"),
            Some(false) => errs.push(FieldError::invalid(
                format!("{path}.allNodes"),
                json!(false),
                "must be either unset or set to true",
            )),
            None => {}
        }
        const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
        match set.len() {
            0 => errs.push(FieldError::required(path, ONE_OF)),
            1 => {}
            _ => errs.push(FieldError::invalid(
                path,
                json!(format!("{{{}}}", set.join(", "))),
                ONE_OF,
            )),
        }
    } else if node_fields {
        errs.push(FieldError::invalid(
            path,
            json!("null"),
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        ));
    }
}

/// One attribute value: exactly one of `bool`, `int`, `string`, `version` (or a list form).
fn attribute(a: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut n = 0;
    for field in ["bool", "int"] {
        if present(a, field) {
            n += 1;
        }
    }
    if let Some(s) = a.get("string").filter(|s| !s.is_null()) {
        n += 1;
        if s.as_str().unwrap_or("").len() > ATTRIBUTE_MAX_VALUE_LENGTH {
            errs.push(FieldError::of(
                format!("{path}.string"),
                FieldErrorKind::TooLong(ATTRIBUTE_MAX_VALUE_LENGTH),
            ));
        }
    }
    if let Some(v) = a.get("version").filter(|v| !v.is_null()) {
        n += 1;
        let v = v.as_str().unwrap_or("");
        let p = format!("{path}.version");
        if !is_semver(v) {
            errs.push(FieldError::invalid(
                &p,
                json!(v),
                "must be a string compatible with semver.org spec 2.0.0",
            ));
        }
        if v.len() > ATTRIBUTE_MAX_VALUE_LENGTH {
            errs.push(FieldError::of(
                p,
                FieldErrorKind::TooLong(ATTRIBUTE_MAX_VALUE_LENGTH),
            ));
        }
    }
    for field in ["bools", "ints", "strings", "versions"] {
        if let Some(values) = a.get(field).filter(|v| !v.is_null()) {
            n += 1;
            if values.as_array().is_some_and(Vec::is_empty) {
                errs.push(FieldError::invalid(
                    format!("{path}.{field}"),
                    json!([]),
                    "must not be empty if specified",
                ));
            }
        }
    }
    match n {
        0 => errs.push(FieldError::invalid(
            path,
            json!(""),
            "exactly one value must be specified",
        )),
        1 => {}
        _ => errs.push(FieldError::invalid(
            path,
            a.clone(),
            "exactly one value must be specified",
        )),
    }
}

/// Whether `v` is a semantic version (semver.org 2.0.0): `MAJOR.MINOR.PATCH`, numbers
/// without leading zeros, optional `-prerelease` and `+build` dot-separated identifiers.
pub fn is_semver(v: &str) -> bool {
    let numeric = |s: &str| {
        !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    };
    let ident_chars =
        |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
    let (rest, build) = match v.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (v, None),
    };
    if build.is_some_and(|b| !b.split('.').all(ident_chars)) {
        return false;
    }
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let pre_ok =
        |id: &str| ident_chars(id) && (numeric(id) || !id.bytes().all(|c| c.is_ascii_digit()));
    if pre.is_some_and(|p| !p.split('.').all(pre_ok)) {
        return false;
    }
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| numeric(p))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[rstest]
    #[case::plain("1.2.3", true)]
    #[case::prerelease_and_build("1.0.0-alpha.1+build.5", true)]
    #[case::leading_zero("01.2.3", false)]
    #[case::two_parts("1.2", false)]
    #[case::numeric_prerelease_with_leading_zero("1.2.3-01", false)]
    fn semantic_versions(#[case] v: &str, #[case] want: bool) {
        assert_eq!(is_semver(v), want);
    }

    #[rstest]
    #[case::domain_prefixed("example.com/gpu", true)]
    #[case::no_domain("gpu", false)]
    #[case::kubernetes_io("kubernetes.io/gpu", false)]
    #[case::quota_prefix("requests.example.com/gpu", false)]
    #[case::bad_name_part("example.com/-gpu", false)]
    fn extended_resource_names(#[case] name: &str, #[case] want: bool) {
        assert_eq!(is_extended_resource_name(name), want);
    }

    #[test]
    fn defaults_fill_allocation_mode_count_and_toleration_operator() {
        let mut claim = json!({"spec": {"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "c", "tolerations": [{"key": "k"}]}},
            {"name": "b", "exactly": {"deviceClassName": "c", "allocationMode": "All"}},
            {"name": "c", "firstAvailable": [{"name": "s", "deviceClassName": "c", "count": 2}]}]}}});
        set_defaults("ResourceClaim", &mut claim);
        assert_eq!(
            claim,
            json!({"spec": {"devices": {"requests": [
                {"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount",
                                          "count": 1,
                                          "tolerations": [{"key": "k", "operator": "Equal"}]}},
                {"name": "b", "exactly": {"deviceClassName": "c", "allocationMode": "All"}},
                {"name": "c", "firstAvailable": [{"name": "s", "deviceClassName": "c", "count": 2,
                                                  "allocationMode": "ExactCount"}]}]}}})
        );
    }

    #[test]
    fn attribute_names_are_reported_on_the_map() {
        let slice = json!({"spec": {"driver": "gpu.example.com", "nodeName": "n1",
            "pool": {"name": "n1", "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"9lives": {"int": 1}}}]}});
        assert_eq!(
            messages(&validate_create("ResourceSlice", &slice)),
            vec![format!(
                "spec.devices[0].attributes: Invalid value: \"9lives\": {C_IDENTIFIER_MSG}"
            )]
        );
    }
}

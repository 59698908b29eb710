//! `metav1.Status` error bodies, with the reasons and messages the real apiserver uses.
//!
//! Clients match on `reason` exactly (kube-rs `is_already_exists`, lease managers check
//! `Conflict` + 409), so each constructor mirrors one upstream `k8s.io/apimachinery/pkg/api/errors`
//! helper.

use serde_json::{json, Value};

use crate::resources::ResourceInfo;

/// An API error answered as a `Status` object with the HTTP code mirrored in `code`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable message, as kubectl prints it after `Error from server (<reason>):`.
    pub message: String,
    /// `details`, when the error names an object.
    pub details: Option<Value>,
}

fn details(info: &ResourceInfo, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": info.resource});
    if !info.group.is_empty() {
        d["group"] = json!(info.group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404 for an object: `pods "x" not found`.
    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", info.qualified()),
        )
        .with_details(details(info, name))
    }

    /// 404 for a path no resource answers.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 for a create whose name is taken.
    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", info.qualified()),
        )
        .with_details(details(info, name))
    }

    /// 409 for a failed precondition (resourceVersion or uid) on a write.
    pub fn conflict(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                info.qualified()
            ),
        )
        .with_details(details(info, name))
    }

    /// The optimistic-concurrency conflict message.
    pub fn modified(info: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            info,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 on the binding subresource (`details.kind: pods/binding`).
    pub fn binding_conflict(name: &str, why: String) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}"),
        )
        .with_details(json!({"name": name, "kind": "pods/binding"}))
    }

    /// 429 for an eviction a PodDisruptionBudget forbids.
    pub fn disruption_budget(pdb: &str, why: String) -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        .with_details(json!({"causes": [{"reason": "DisruptionBudget",
            "message": format!("The disruption budget {pdb} {why}")}]}))
    }

    /// 400 for a request the server cannot decode.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 with one cause: `<Kind> "<name>" is invalid: <field>: <why>`.
    pub fn invalid(info: &ResourceInfo, name: &str, field: &str, why: &str) -> Self {
        Self::invalid_kind(info.kind, info.group, name, field, why, "FieldValueInvalid")
    }

    /// 422 for any kind (also `ListOptions` for a refused `sendInitialEvents`).
    pub fn invalid_kind(
        kind: &str,
        group: &str,
        name: &str,
        field: &str,
        why: &str,
        cause: &str,
    ) -> Self {
        let mut d = json!({"name": name, "kind": kind,
            "causes": [{"reason": cause, "message": why, "field": field}]});
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {why}"),
        )
        .with_details(d)
    }

    /// 422 with every field error (upstream's `NewInvalid`): one error reads `<Kind>[.<group>] "<name>"
    /// is invalid: <field>: <body>`, several `… is invalid: [<e1>, <e2>]`.
    pub fn invalid_fields(
        kind: &str,
        group: &str,
        name: &str,
        errs: &[crate::validation::FieldError],
    ) -> Self {
        let each: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        let all = match each.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errs
            .iter()
            .map(|e| json!({"reason": e.cause_reason(), "message": e.body(), "field": e.field}))
            .collect();
        let mut d = json!({"name": name, "kind": kind, "causes": causes});
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        // Options have no name, and upstream leaves an empty one out.
        if name.is_empty() {
            if let Some(m) = d.as_object_mut() {
                m.remove("name");
            }
        }
        // Upstream names the kind with its group (`StorageClass.storage.k8s.io`).
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        Self::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {all}"),
        )
        .with_details(d)
    }

    /// 401, a request without a valid bearer token (upstream's body exactly).
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403, e.g. a pod naming a PriorityClass that does not exist.
    pub fn forbidden(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{} \"{name}\" is forbidden: {why}", info.qualified()),
        )
        .with_details(details(info, name))
    }

    /// 403 for a request refused before it reaches a resource (a browser origin or Host name
    /// the server does not accept).
    pub fn forbidden_request(why: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", why)
    }

    /// 403 for a create in a namespace that is being deleted (upstream's NamespaceLifecycle
    /// admission).
    pub fn namespace_terminating(info: &ResourceInfo, name: &str, ns: &str) -> Self {
        let why = format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        );
        let mut d = details(info, name);
        d["causes"] = json!([{"reason": "NamespaceTerminating", "message": why,
            "field": "metadata.namespace"}]);
        Self::new(
            403,
            "Forbidden",
            format!("{} \"{name}\" is forbidden: {why}", info.qualified()),
        )
        .with_details(d)
    }

    /// 405 for a verb the resource does not serve.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
        .with_details(json!({}))
    }

    /// 410 for a resourceVersion older than the retained event log.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 413 for a body over the size limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 415 for an unknown body or patch content type.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type:?})"),
        )
    }

    /// 500 for a bug in this server; the request changed nothing.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// A `Status` success body, as binding and some deletes return.
pub fn success(code: u16, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

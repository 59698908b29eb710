//! OpenAPI as kube-apiserver serves it: `/openapi/v3` (an index, then one document per served
//! group-version) and `/openapi/v2` (one document, JSON or gnostic protobuf), describing every
//! served kind with upstream's own schemas.
//!
//! kubectl reads them for more than `explain`: `create/apply -f` looks in the v3 document of
//! an object's group-version for a PATCH operation of its kind that takes `fieldValidation`,
//! and sends `fieldValidation=Strict` when there is one; `kind: List` is never found there,
//! so kubectl validates a List on the client against the v2 definitions (which it asks for
//! as protobuf only); `apply` computes its strategic merge patch from the v3 schema's
//! `x-kubernetes-patch-merge-key`/`-strategy`.
//!
//! The schemas are a catalogue keyed by group/version/kind (`x-kubernetes-group-version-kind`):
//! upstream's definitions of every built-in kind of Kubernetes 1.37, vendored as data in
//! `openapi/definitions.json` (written by `scripts/vendor-openapi-definitions.py`), so a kind
//! added to the resources table is described without code here.

mod gnostic;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::LazyLock;

use serde_json::{json, Map, Value};

use crate::discovery::KUBE_MINOR;
use crate::resources::{self, ResourceInfo, RESOURCES};

/// Upstream's definitions (swagger 2.0 form), minified: 1.4 MB in the binary.
const DEFINITIONS: &str = include_str!("../../openapi/definitions.json");

/// The media type client-go asks for the gnostic protobuf OpenAPI v2 document with.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The Content-Type that document is served with: kube-apiserver's spelling, which (unlike
/// the `@` form) Go's media type parser accepts.
pub const V2_PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The schema catalogue: upstream's definitions, and which one describes each kind.
#[derive(Debug)]
pub struct Catalogue {
    definitions: Map<String, Value>,
    /// (group, version, kind) to definition name.
    by_gvk: HashMap<(String, String, String), String>,
}

impl Catalogue {
    /// Parses the vendored definitions. Compiled-in data: a unit test proves it parses, so
    /// the empty fallback is never served. Parsed only to build the documents, then dropped
    /// (the tree is several times the 1.4 MB of text).
    pub fn load() -> Self {
        let definitions: Map<String, Value> = serde_json::from_str(DEFINITIONS).unwrap_or_default();
        let mut by_gvk = HashMap::new();
        for (name, schema) in &definitions {
            let gvks = schema["x-kubernetes-group-version-kind"].as_array();
            for gvk in gvks.into_iter().flatten() {
                let part = |k: &str| gvk[k].as_str().unwrap_or("").to_string();
                by_gvk.insert((part("group"), part("version"), part("kind")), name.clone());
            }
        }
        Catalogue {
            definitions,
            by_gvk,
        }
    }

    /// The name of the definition that describes a kind (`io.k8s.api.core.v1.Pod`), if any.
    pub fn definition_name(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_gvk
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    fn name(&self, (group, version, kind): (&str, &str, &str)) -> Option<String> {
        self.definition_name(group, version, kind)
            .map(str::to_string)
    }
}

/// A served document: its bytes and the hash that names this content (ETag, `?hash=`).
#[derive(Debug)]
pub struct Document {
    pub body: Vec<u8>,
    pub hash: String,
}

impl Document {
    fn new(body: Vec<u8>) -> Self {
        // The hash only has to change with the content for one build of this server (clients
        // cache by it), so std's hasher, fixed within a build, is enough.
        let mut h = DefaultHasher::new();
        body.hash(&mut h);
        Document {
            hash: format!("{:016x}", h.finish()),
            body,
        }
    }

    fn json(v: &Value) -> Self {
        Self::new(serde_json::to_vec(v).unwrap_or_default())
    }
}

/// `/api/v1` or `/apis/{group}/{version}`.
fn gv_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// One HTTP operation of a served resource, as both OpenAPI versions describe it.
struct Operation {
    path: String,
    method: &'static str,
    /// `x-kubernetes-action`.
    action: &'static str,
    operation_id: String,
    /// `x-kubernetes-group-version-kind`: the kind the operation reads or writes.
    gvk: (&'static str, &'static str, &'static str),
    path_params: Vec<&'static str>,
    query_params: &'static [&'static str],
    /// Definition names of the request body and the 200/201 response.
    request: Option<String>,
    response: Option<String>,
}

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMS: &[&str] = &["dryRun", "gracePeriodSeconds", "propagationPolicy"];
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// `v1` as `V1`, `status` as `Status`.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// `Core`, `Apps`, `Storage`: the group as upstream's operation ids spell it.
fn group_id(group: &str) -> String {
    if group.is_empty() {
        "Core".to_string()
    } else {
        capitalized(group.split('.').next().unwrap_or(group))
    }
}

/// Every operation of one resource: its collection, its objects and their subresources.
fn operations(cat: &Catalogue, r: &'static ResourceInfo) -> Vec<Operation> {
    let kind_def = cat.name((r.group, r.version, r.kind));
    let list_def = cat.name((r.group, r.version, &format!("{}List", r.kind)));
    let prefix = gv_prefix(r.group, r.version);
    let (scope, ns_path, mut params) = if r.namespaced {
        ("Namespaced", "/namespaces/{namespace}", vec!["namespace"])
    } else {
        ("", "", vec![])
    };
    // `patchCoreV1NamespacedPodStatus`, as upstream names operations.
    let gv_id = format!("{}{}", group_id(r.group), capitalized(r.version));
    let id = |verb: &str, sub: &str| format!("{verb}{gv_id}{scope}{}{}", r.kind, capitalized(sub));
    let gvk = (r.group, r.version, r.kind);
    let collection = format!("{prefix}{ns_path}/{}", r.resource);
    let op = |path: &str, method, action, operation_id, params: &Vec<&'static str>| Operation {
        path: path.to_string(),
        method,
        action,
        operation_id,
        gvk,
        path_params: params.clone(),
        query_params: &[],
        request: None,
        response: None,
    };
    let mut ops = vec![
        Operation {
            query_params: LIST_PARAMS,
            response: list_def.clone(),
            ..op(&collection, "get", "list", id("list", ""), &params)
        },
        Operation {
            query_params: WRITE_PARAMS,
            request: kind_def.clone(),
            response: kind_def.clone(),
            ..op(&collection, "post", "post", id("create", ""), &params)
        },
        Operation {
            query_params: LIST_PARAMS,
            response: Some(STATUS.to_string()),
            ..op(
                &collection,
                "delete",
                "deletecollection",
                id("deleteCollection", ""),
                &params,
            )
        },
    ];
    if r.namespaced {
        let all = format!("{prefix}/{}", r.resource);
        let operation_id = format!("list{gv_id}{}ForAllNamespaces", r.kind);
        ops.push(Operation {
            query_params: LIST_PARAMS,
            response: list_def.clone(),
            ..op(&all, "get", "list", operation_id, &Vec::new())
        });
    }
    params.push("name");
    let item = format!("{collection}/{{name}}");
    ops.extend([
        Operation {
            response: kind_def.clone(),
            ..op(&item, "get", "get", id("read", ""), &params)
        },
        Operation {
            query_params: WRITE_PARAMS,
            request: kind_def.clone(),
            response: kind_def.clone(),
            ..op(&item, "put", "put", id("replace", ""), &params)
        },
        Operation {
            query_params: PATCH_PARAMS,
            request: Some(PATCH.to_string()),
            response: kind_def.clone(),
            ..op(&item, "patch", "patch", id("patch", ""), &params)
        },
        Operation {
            query_params: DELETE_PARAMS,
            request: Some(DELETE_OPTIONS.to_string()),
            response: kind_def.clone(),
            ..op(&item, "delete", "delete", id("delete", ""), &params)
        },
    ]);
    for sub in r.subresources {
        let path = format!("{item}/{sub}");
        match *sub {
            "binding" | "eviction" => {
                let gvk = if *sub == "binding" {
                    ("", "v1", "Binding")
                } else {
                    ("policy", "v1", "Eviction")
                };
                let def = cat.name(gvk);
                ops.push(Operation {
                    gvk,
                    query_params: WRITE_PARAMS,
                    request: def.clone(),
                    response: def,
                    ..op(&path, "post", "post", id("create", sub), &params)
                });
            }
            _ => {
                let gvk = if *sub == "scale" {
                    ("autoscaling", "v1", "Scale")
                } else {
                    gvk
                };
                let def = cat.name(gvk);
                ops.extend([
                    Operation {
                        gvk,
                        response: def.clone(),
                        ..op(&path, "get", "get", id("read", sub), &params)
                    },
                    Operation {
                        gvk,
                        query_params: WRITE_PARAMS,
                        request: def.clone(),
                        response: def.clone(),
                        ..op(&path, "put", "put", id("replace", sub), &params)
                    },
                    Operation {
                        gvk,
                        query_params: PATCH_PARAMS,
                        request: Some(PATCH.to_string()),
                        response: def,
                        ..op(&path, "patch", "patch", id("patch", sub), &params)
                    },
                ]);
            }
        }
    }
    ops
}

fn gvk_json((group, version, kind): (&str, &str, &str)) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

const PATCH_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

fn consumes(o: &Operation) -> &'static [&'static str] {
    if o.method == "patch" {
        PATCH_TYPES
    } else {
        &["application/json", "application/yaml"]
    }
}

/// The definition names `schema` refers to, directly or through others, added to `out`.
fn close_over(cat: &Catalogue, name: &str, out: &mut BTreeSet<String>) {
    if !out.insert(name.to_string()) {
        return;
    }
    let Some(schema) = cat.definitions.get(name) else {
        return;
    };
    let mut refs = Vec::new();
    collect_refs(schema, &mut refs);
    for r in refs {
        close_over(cat, &r, out);
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                if let Some(name) = r.strip_prefix("#/definitions/") {
                    out.push(name.to_string());
                }
            }
            o.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// The definitions the operations name, with every definition they reference.
fn schemas_of(cat: &Catalogue, ops: &[Operation]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for o in ops {
        for d in [&o.request, &o.response].into_iter().flatten() {
            close_over(cat, d, &mut names);
        }
    }
    close_over(cat, STATUS, &mut names);
    names
}

/// A v2 schema in v3 form: references into `#/components/schemas/`, and a reference with
/// siblings (a description) wrapped in `allOf`, as upstream's v3 documents have them.
fn to_v3(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut out: Map<String, Value> =
                o.iter().map(|(k, x)| (k.clone(), to_v3(x))).collect();
            if let Some(Value::String(r)) = o.get("$ref") {
                let r = json!({"$ref": r.replace("#/definitions/", "#/components/schemas/")});
                if o.len() == 1 {
                    return r;
                }
                out.remove("$ref");
                out.insert("allOf".to_string(), json!([r]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        other => other.clone(),
    }
}

fn v3_operation(o: &Operation) -> Value {
    let schema_ref = |d: &str| json!({"$ref": format!("#/components/schemas/{d}")});
    let mut params: Vec<Value> = o
        .path_params
        .iter()
        .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    params.extend(o.query_params.iter().map(
        |p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    ));
    let mut op = json!({
        "operationId": o.operation_id,
        "x-kubernetes-action": o.action,
        "x-kubernetes-group-version-kind": gvk_json(o.gvk),
        "parameters": params,
        "responses": {"401": {"description": "Unauthorized"}},
    });
    if let Some(d) = &o.request {
        let content: Map<String, Value> = consumes(o)
            .iter()
            .map(|t| (t.to_string(), json!({"schema": schema_ref(d)})))
            .collect();
        op["requestBody"] = json!({"content": content, "required": o.method != "delete"});
    }
    if let Some(d) = &o.response {
        let code = if o.method == "post" { "201" } else { "200" };
        op["responses"][code] = json!({"description": "OK",
            "content": {"application/json": {"schema": schema_ref(d)},
                        "application/yaml": {"schema": schema_ref(d)}}});
    }
    op
}

fn v2_operation(o: &Operation) -> Value {
    let schema_ref = |d: &str| json!({"$ref": format!("#/definitions/{d}")});
    let mut params: Vec<Value> = o
        .path_params
        .iter()
        .map(|p| json!({"name": p, "in": "path", "required": true, "type": "string", "uniqueItems": true}))
        .collect();
    if let Some(d) = &o.request {
        params.push(json!({"name": "body", "in": "body", "required": o.method != "delete", "schema": schema_ref(d)}));
    }
    params.extend(
        o.query_params
            .iter()
            .map(|p| json!({"name": p, "in": "query", "type": "string", "uniqueItems": true})),
    );
    let mut op = json!({
        "operationId": o.operation_id,
        "x-kubernetes-action": o.action,
        "x-kubernetes-group-version-kind": gvk_json(o.gvk),
        "consumes": consumes(o),
        "produces": ["application/json", "application/yaml"],
        "parameters": params,
        "responses": {"401": {"description": "Unauthorized"}},
    });
    if let Some(d) = &o.response {
        let code = if o.method == "post" { "201" } else { "200" };
        op["responses"][code] = json!({"description": "OK", "schema": schema_ref(d)});
    }
    op
}

fn paths(ops: &[Operation], render: fn(&Operation) -> Value) -> Map<String, Value> {
    let mut paths = Map::new();
    for o in ops {
        let item = paths.entry(o.path.clone()).or_insert_with(|| json!({}));
        item[o.method] = render(o);
    }
    paths
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": format!("v1.{KUBE_MINOR}.0")})
}

/// `/openapi/v3/{api/v1 | apis/g/v}` for one served group-version.
fn v3_document(cat: &Catalogue, group: &str, version: &str) -> Value {
    let ops: Vec<Operation> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(|r| operations(cat, r))
        .collect();
    let schemas: Map<String, Value> = schemas_of(cat, &ops)
        .into_iter()
        .filter_map(|n| cat.definitions.get(&n).map(|s| (n, to_v3(s))))
        .collect();
    json!({"openapi": "3.0.0", "info": info(), "paths": paths(&ops, v3_operation),
           "components": {"schemas": schemas,
                          "securitySchemes": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header",
                              "description": "Bearer Token authentication"}}}})
}

/// `/openapi/v2`: every served operation and the definitions they need.
fn v2_document(cat: &Catalogue) -> Value {
    let ops: Vec<Operation> = RESOURCES.iter().flat_map(|r| operations(cat, r)).collect();
    let definitions: Map<String, Value> = schemas_of(cat, &ops)
        .into_iter()
        .filter_map(|n| cat.definitions.get(&n).map(|s| (n, s.clone())))
        .collect();
    json!({"swagger": "2.0", "info": info(), "paths": paths(&ops, v2_operation),
           "definitions": definitions,
           "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header",
               "description": "Bearer Token authentication"}},
           "security": [{"BearerToken": []}]})
}

/// `api/v1` or `apis/{group}/{version}`: the key of a group-version under `/openapi/v3/`.
fn v3_key(group: &str, version: &str) -> String {
    gv_prefix(group, version)
        .trim_start_matches('/')
        .to_string()
}

/// Every document, built on first use from one parse of the catalogue.
struct Documents {
    v3: BTreeMap<String, Document>,
    v3_index: Document,
    v2_json: Document,
    v2_protobuf: Document,
}

static DOCUMENTS: LazyLock<Documents> = LazyLock::new(|| {
    let cat = Catalogue::load();
    let v3: BTreeMap<String, Document> = resources::group_versions()
        .into_iter()
        .map(|(g, v)| (v3_key(g, v), Document::json(&v3_document(&cat, g, v))))
        .collect();
    let paths: Map<String, Value> = v3
        .iter()
        .map(|(k, d)| {
            let url = format!("/openapi/v3/{k}?hash={}", d.hash);
            (k.clone(), json!({"serverRelativeURL": url}))
        })
        .collect();
    let v2 = v2_document(&cat);
    Documents {
        v3_index: Document::json(&json!({"paths": paths})),
        v3,
        v2_json: Document::json(&v2),
        v2_protobuf: Document::new(gnostic::document(&v2)),
    }
});

/// `/openapi/v3`: one entry per served group-version, its URL carrying its content hash.
pub fn v3_index() -> &'static Document {
    &DOCUMENTS.v3_index
}

/// `/openapi/v3/{key}`, if `key` names a served group-version.
pub fn v3(key: &str) -> Option<&'static Document> {
    DOCUMENTS.v3.get(key)
}

/// `/openapi/v2` as JSON, or as gnostic protobuf when `protobuf`.
pub fn v2(protobuf: bool) -> &'static Document {
    if protobuf {
        &DOCUMENTS.v2_protobuf
    } else {
        &DOCUMENTS.v2_json
    }
}

/// The form of `/openapi/v2` an Accept header asks for: `Some(true)` for protobuf,
/// `Some(false)` for JSON (also for no header or a wildcard), `None` when it accepts neither
/// (406). The first acceptable type wins; kubectl sends one.
pub fn v2_protobuf_wanted(accept: &str) -> Option<bool> {
    if accept.trim().is_empty() {
        return Some(false);
    }
    accept.split(',').find_map(
        |clause| match clause.split(';').next().unwrap_or("").trim() {
            "*/*" | "application/*" | "application/json" => Some(false),
            V2_PROTOBUF | V2_PROTOBUF_CONTENT_TYPE => Some(true),
            _ => None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalogue covers built-in kinds whether or not this server serves them yet, so
    /// a kind added to the resources table is described without a change here.
    #[test]
    fn vendored_definitions_parse_and_index_built_in_kinds() {
        let cat = Catalogue::load();
        let kinds = [
            ("", "v1", "Pod"),
            ("", "v1", "Binding"),
            ("apps", "v1", "Deployment"),
            ("apps", "v1", "DaemonSet"),
            ("apps", "v1", "ControllerRevision"),
            ("autoscaling", "v1", "Scale"),
            ("batch", "v1", "Job"),
            ("policy", "v1", "Eviction"),
            ("resource.k8s.io", "v1", "DeviceClass"),
            ("resource.k8s.io", "v1", "ResourceSlice"),
            ("resource.k8s.io", "v1", "ResourceClaim"),
            ("resource.k8s.io", "v1", "ResourceClaimTemplate"),
        ];
        let names: Vec<Option<&str>> = kinds
            .iter()
            .map(|(g, v, k)| cat.definition_name(g, v, k))
            .collect();
        assert_eq!(
            (cat.definitions.len(), names),
            (
                862,
                vec![
                    Some("io.k8s.api.core.v1.Pod"),
                    Some("io.k8s.api.core.v1.Binding"),
                    Some("io.k8s.api.apps.v1.Deployment"),
                    Some("io.k8s.api.apps.v1.DaemonSet"),
                    Some("io.k8s.api.apps.v1.ControllerRevision"),
                    Some("io.k8s.api.autoscaling.v1.Scale"),
                    Some("io.k8s.api.batch.v1.Job"),
                    Some("io.k8s.api.policy.v1.Eviction"),
                    Some("io.k8s.api.resource.v1.DeviceClass"),
                    Some("io.k8s.api.resource.v1.ResourceSlice"),
                    Some("io.k8s.api.resource.v1.ResourceClaim"),
                    Some("io.k8s.api.resource.v1.ResourceClaimTemplate"),
                ]
            )
        );
    }

    /// The resources table is the source of what is served: every kind in it must have a
    /// schema in the catalogue, in its group-version's v3 document and in the v2 document.
    #[test]
    fn every_served_kind_has_a_schema_in_v3_and_v2() {
        let cat = Catalogue::load();
        let v2: Value = serde_json::from_slice(&v2(false).body).unwrap_or_default();
        for r in RESOURCES {
            let name = cat.definition_name(r.group, r.version, r.kind);
            let name = name
                .unwrap_or_else(|| panic!("no schema for {}/{} {}", r.group, r.version, r.kind));
            let doc =
                v3(&v3_key(r.group, r.version)).map(|d| serde_json::from_slice::<Value>(&d.body));
            let doc = doc.and_then(Result::ok).unwrap_or_default();
            let gvks = &doc["components"]["schemas"][name]["x-kubernetes-group-version-kind"];
            assert!(
                gvks.as_array()
                    .into_iter()
                    .flatten()
                    .any(|g| *g == gvk_json((r.group, r.version, r.kind))),
                "v3 {}/{} {}",
                r.group,
                r.version,
                r.kind
            );
            assert!(v2["definitions"].get(name).is_some(), "v2 {name}");
        }
    }

    /// What kubectl's field-validation check looks for, and what apply's strategic merge and
    /// explain read, for one kind.
    #[test]
    fn pods_patch_takes_field_validation_and_containers_merge_by_name() {
        let doc: Value =
            serde_json::from_slice(&v3("api/v1").map(|d| d.body.clone()).unwrap_or_default())
                .unwrap_or_default();
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        let params: Vec<&str> = patch["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect();
        let containers =
            &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(
            (
                &patch["operationId"],
                &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]
                    ["operationId"],
                &patch["x-kubernetes-group-version-kind"],
                params,
                &containers["x-kubernetes-patch-merge-key"],
                &containers["x-kubernetes-patch-strategy"],
                &containers["items"],
                &doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"]
                    ["allOf"],
            ),
            (
                &json!("patchCoreV1NamespacedPod"),
                &json!("patchCoreV1NamespacedPodStatus"),
                &json!({"group": "", "version": "v1", "kind": "Pod"}),
                vec![
                    "namespace",
                    "name",
                    "dryRun",
                    "fieldManager",
                    "fieldValidation",
                    "force"
                ],
                &json!("name"),
                &json!("merge"),
                &json!({"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}),
                &json!([{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]),
            )
        );
    }

    #[test]
    fn index_urls_carry_each_documents_hash() {
        let index: Value = serde_json::from_slice(&v3_index().body).unwrap_or_default();
        for (g, v) in resources::group_versions() {
            let key = v3_key(g, v);
            let hash = v3(&key).map(|d| d.hash.clone()).unwrap_or_default();
            assert_eq!(
                index["paths"][&key]["serverRelativeURL"],
                json!(format!("/openapi/v3/{key}?hash={hash}"))
            );
        }
    }

    #[test]
    fn v2_form_is_the_first_accepted_type() {
        let cases = [
            (V2_PROTOBUF, Some(true)),
            (
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json",
                Some(true),
            ),
            (V2_PROTOBUF_CONTENT_TYPE, Some(true)),
            ("application/json, */*", Some(false)),
            ("text/html, */*;q=0.8", Some(false)),
            ("", Some(false)),
            ("text/html", None),
        ];
        let got: Vec<Option<bool>> = cases.iter().map(|(a, _)| v2_protobuf_wanted(a)).collect();
        let want: Vec<Option<bool>> = cases.iter().map(|(_, w)| *w).collect();
        assert_eq!(got, want);
    }
}

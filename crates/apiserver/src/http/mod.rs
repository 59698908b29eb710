//! HTTP routing and the verbs: one fallback handler parses the Kubernetes path grammar
//! (`/api/v1/...`, `/apis/{group}/{version}/...`, `namespaces/{ns}/...`, subresources) and
//! dispatches to list, watch, get, create, update, patch, delete, deletecollection, binding
//! and status.

use std::borrow::Cow;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::admission;
use crate::discovery;
use crate::openapi;
use crate::paging;
use crate::patch::{self, PatchType};
use crate::resources::{self, ResourceInfo};
use crate::selectors::{FieldSelector, LabelSelector, Selector};
use crate::status::{self, ApiError};
use crate::store::{self, Store};
use crate::table;
use crate::validation;

mod scale;
mod watch;

/// Shared by every request.
#[derive(Debug)]
pub(crate) struct AppState {
    pub store: Arc<Store>,
    pub max_body_bytes: usize,
    pub addr: SocketAddr,
    /// How often a watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Bearer tokens accepted; empty = no authentication.
    pub tokens: Vec<String>,
    /// Lists whose later pages are still to be asked for.
    pub snapshots: paging::Snapshots,
    /// Browser origins accepted (see [`crate::Config::cors_allowed_origins`]).
    pub cors_allowed_origins: Vec<regex::Regex>,
    /// Host names accepted besides `localhost` and IP addresses.
    pub allowed_hosts: Vec<String>,
    /// Bytes a watcher may have queued before it is ended (`Config::watch_backlog_bytes`).
    pub watch_backlog_bytes: usize,
    /// Whether the garbage collector runs: only then do deletes with
    /// `propagationPolicy` Orphan or Foreground add its finalizers (nothing else removes them).
    pub garbage_collector: bool,
    /// API groups not served (see [`crate::Config::disabled_api_groups`]).
    pub disabled_api_groups: Vec<String>,
}

/// Whether the `Host` header names this server: an IP address, `localhost`, or one of
/// `allowed` (any port; case and a final dot ignored). A DNS rebinding attack needs a name of
/// its own, so IP addresses are safe to accept, which keeps a server listening on all
/// addresses reachable by any of them. No `Host` (HTTP/1.0) is accepted.
fn host_allowed(allowed: &[String], headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::HOST) else {
        return Ok(());
    };
    let host = value.to_str().unwrap_or("");
    let name = match host.strip_prefix('[') {
        // [v6]:port
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    let ok = !name.is_empty()
        && (name.parse::<std::net::IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || allowed.iter().any(|a| a.eq_ignore_ascii_case(name)));
    if ok {
        return Ok(());
    }
    Err(ApiError::forbidden_request(format!(
        "host {host:?} is not allowed: the Host header must name this server by IP address, \
         localhost or a name given with --allowed-hosts"
    )))
}

/// CORS headers for an allowed origin (upstream's WithCORS defaults, credentials allowed).
fn with_cors(mut response: Response, origin: &HeaderValue) -> Response {
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, GET, OPTIONS, PUT, DELETE, PATCH"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, \
             X-Requested-With, If-Modified-Since",
        ),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Date"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    response
}

/// Paths upstream's default RBAC (`system:public-info-viewer`) lets anyone read.
fn public_path(path: &str) -> bool {
    path == "/version"
        || ["/healthz", "/livez", "/readyz"]
            .iter()
            .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// Whether the request carries one of `tokens` as `Authorization: Bearer …` (compared in
/// constant time).
///
/// Upstream: the bearer token authenticator (apiserver/pkg/authentication/request/
/// bearertoken) trims the header, splits it at single spaces, takes the scheme in any case
/// and the second field as the token; an empty token is no token.
fn authenticated(tokens: &[String], headers: &HeaderMap) -> bool {
    let mut fields = header_str(headers, header::AUTHORIZATION).trim().split(' ');
    let (Some(scheme), Some(given)) = (fields.next(), fields.next()) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") || given.is_empty() {
        return false;
    }
    tokens.iter().fold(false, |ok, t| {
        let same = t.len() == given.len()
            && t.bytes()
                .zip(given.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        ok | same
    })
}

/// Parsed query parameters (tolerates `?&a=b`, unknown keys, repeated keys: last wins).
#[derive(Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |c: u8| char::from(c).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    pub(crate) fn parse(q: Option<&str>) -> Self {
        Query(
            q.unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }

    fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }

    fn field_validation(&self) -> admission::FieldValidation {
        admission::FieldValidation::parse(self.get("fieldValidation"))
    }
}

fn json_response(code: u16, body: &Value) -> Response {
    json_response_typed(code, body, "application/json")
}

fn json_response_typed(code: u16, body: &Value, content_type: &'static str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        bytes,
    )
        .into_response()
}

/// An OpenAPI document with its ETag (answering a matching `If-None-Match` with 304) and, when
/// asked for by content hash, cached as immutable for a year, as kube-apiserver serves them.
fn openapi_response(
    doc: &openapi::Document,
    content_type: &'static str,
    headers: &HeaderMap,
    immutable: bool,
) -> Response {
    let etag = format!("\"{}\"", doc.hash);
    let mut r = if header_str(headers, header::IF_NONE_MATCH) == etag {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
            doc.body.clone(),
        )
            .into_response()
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    // The Accept header chooses JSON or protobuf: caches must keep them apart.
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if immutable {
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable"),
        );
        let expires = std::time::SystemTime::now() + Duration::from_secs(365 * 24 * 3600);
        if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(expires)) {
            h.insert(header::EXPIRES, v);
        }
    }
    r
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_response(self.code, &self.to_status())
    }
}

/// Where a request goes.
#[derive(Debug)]
enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    ResourceList(String, String),
    OpenApiIndex,
    OpenApi(String),
    OpenApiV2,
    Object(ObjectPath),
    /// `POST /api/v1/namespaces/{ns}/bindings`: binds the pod the Binding names.
    LegacyBinding(String),
}

#[derive(Debug)]
struct ObjectPath {
    info: &'static ResourceInfo,
    /// Namespace from the URL (None for cluster-scoped kinds or all-namespaces paths).
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

/// Whether `r` is in a group the server does not serve: such paths get the 404 of an
/// unknown path, as on a server that never had the group.
fn disabled_route(disabled: &[String], r: &Route) -> bool {
    let group = match r {
        Route::ResourceList(g, _) => g.as_str(),
        Route::Object(p) => p.info.group,
        _ => return false,
    };
    !group.is_empty() && disabled.iter().any(|d| d == group)
}

fn route(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["version"] => Some(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => Some(Route::Health),
        ["api"] => Some(Route::CoreVersions),
        ["apis"] => Some(Route::Groups),
        ["openapi", "v2"] => Some(Route::OpenApiV2),
        ["openapi", "v3"] => Some(Route::OpenApiIndex),
        ["openapi", "v3", rest @ ..] => Some(Route::OpenApi(rest.join("/"))),
        ["api", v] => Some(Route::ResourceList(String::new(), (*v).to_string())),
        ["apis", g, v] => Some(Route::ResourceList((*g).to_string(), (*v).to_string())),
        ["api", "v1", "namespaces", ns, "bindings"] => {
            Some(Route::LegacyBinding((*ns).to_string()))
        }
        ["api", v, rest @ ..] => object_route("", v, rest),
        ["apis", g, v, rest @ ..] => object_route(g, v, rest),
        _ => None,
    }
}

fn object_route(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let s = |x: &&str| Some((*x).to_string());
    let path = match rest {
        ["namespaces", ns, r, tail @ ..] if resources::lookup(group, version, r).is_some() => {
            let info = resources::lookup(group, version, r)?;
            if !info.namespaced {
                return None;
            }
            match tail {
                [] => ObjectPath {
                    info,
                    ns: s(ns),
                    name: None,
                    sub: None,
                },
                [name] => ObjectPath {
                    info,
                    ns: s(ns),
                    name: s(name),
                    sub: None,
                },
                [name, sub] => ObjectPath {
                    info,
                    ns: s(ns),
                    name: s(name),
                    sub: s(sub),
                },
                _ => return None,
            }
        }
        [r, tail @ ..] => {
            let info = resources::lookup(group, version, r)?;
            match tail {
                [] => ObjectPath {
                    info,
                    ns: None,
                    name: None,
                    sub: None,
                },
                [name] if !info.namespaced => ObjectPath {
                    info,
                    ns: None,
                    name: s(name),
                    sub: None,
                },
                [name, sub] if !info.namespaced => ObjectPath {
                    info,
                    ns: None,
                    name: s(name),
                    sub: s(sub),
                },
                _ => return None,
            }
        }
        [] => return None,
    };
    Some(Route::Object(path))
}

/// Every request: the Host and Origin checks (with CORS headers for an allowed origin), then
/// [`dispatch`].
pub(crate) async fn handle(st: Arc<AppState>, req: Request) -> Response {
    // Taken apart rather than copied: every request is routed from its head.
    let (parts, body) = req.into_parts();
    let method = parts.method;
    let path = parts.uri.path();
    let query = Query::parse(parts.uri.query());
    let headers = parts.headers;
    tracing::debug!(%method, %path, "request");
    if let Err(e) = host_allowed(&st.allowed_hosts, &headers) {
        return e.into_response();
    }
    // Browsers send Origin from web pages; with no token required (the default on
    // loopback), any page could otherwise write to the cluster.
    let origin = headers.get(header::ORIGIN).cloned();
    if let Some(origin) = &origin {
        let text = origin.to_str().unwrap_or("");
        if !st.cors_allowed_origins.iter().any(|re| re.is_match(text)) {
            return ApiError::forbidden_request(format!(
                "origin {text:?} is not allowed: requests from web pages need an origin \
                 allowed with --cors-allowed-origins"
            ))
            .into_response();
        }
        if method == Method::OPTIONS {
            return with_cors(StatusCode::NO_CONTENT.into_response(), origin);
        }
    }
    let response = dispatch(&st, body, method, path, query, headers).await;
    match &origin {
        Some(origin) => with_cors(response, origin),
        None => response,
    }
}

/// Authentication, the body, routing and the verb; a write is answered once it is durable.
async fn dispatch(
    st: &Arc<AppState>,
    body: axum::body::Body,
    method: Method,
    path: &str,
    query: Query,
    headers: HeaderMap,
) -> Response {
    if !st.tokens.is_empty() && !public_path(path) && !authenticated(&st.tokens, &headers) {
        return ApiError::unauthorized().into_response();
    }
    let body = match read_body(&headers, body, st.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let Some(r) = route(path).filter(|r| !disabled_route(&st.disabled_api_groups, r)) else {
        return ApiError::no_route().into_response();
    };
    let accept = header_str(&headers, header::ACCEPT);
    let writes = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
    let response = respond(st, r, &method, &query, &headers, &body, accept);
    // A write is acknowledged, and a read answered, only once every write it may show is
    // durable (group commit under --data-dir): nothing a crash can undo is ever seen.
    if !(writes && query.dry_run()) {
        if let Err(e) = st.store.sync().await {
            return e.into_response();
        }
    }
    response
}

/// A write's `dryRun` and `fieldValidation` query values, checked before its body is read,
/// as upstream does: 422 naming the options kind (`CreateOptions.meta.k8s.io "" is invalid:
/// dryRun: Unsupported value: ["Some"]: supported values: "All"`).
fn check_write_options(method: &Method, query: &Query) -> Result<(), ApiError> {
    let (kind, has_field_validation) = match *method {
        Method::POST => ("CreateOptions", true),
        Method::PUT => ("UpdateOptions", true),
        Method::PATCH => ("PatchOptions", true),
        Method::DELETE => ("DeleteOptions", false),
        _ => return Ok(()),
    };
    let field_validation = query
        .get("fieldValidation")
        .filter(|_| has_field_validation);
    let errs = validation::validate_write_options(&query.all("dryRun"), field_validation);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(kind, "meta.k8s.io", "", &errs))
    }
}

fn respond(
    st: &Arc<AppState>,
    r: Route,
    method: &Method,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
    accept: &str,
) -> Response {
    if let Err(e) = check_write_options(method, query) {
        return e.into_response();
    }
    match (r, method) {
        (Route::Version, &Method::GET) => json_response(200, &discovery::version()),
        (Route::Health, &Method::GET) => (StatusCode::OK, "ok").into_response(),
        (Route::CoreVersions, &Method::GET) => {
            if discovery::wants_aggregated(accept) {
                json_response_typed(
                    200,
                    &discovery::aggregated(true, &[]),
                    discovery::AGGREGATED_CONTENT_TYPE,
                )
            } else {
                json_response(200, &discovery::core_versions(&st.addr.to_string()))
            }
        }
        (Route::Groups, &Method::GET) => {
            if discovery::wants_aggregated(accept) {
                json_response_typed(
                    200,
                    &discovery::aggregated(false, &st.disabled_api_groups),
                    discovery::AGGREGATED_CONTENT_TYPE,
                )
            } else {
                json_response(200, &discovery::group_list(&st.disabled_api_groups))
            }
        }
        (Route::ResourceList(g, v), &Method::GET) => match discovery::resource_list(&g, &v) {
            Some(l) => json_response(200, &l),
            None => ApiError::no_route().into_response(),
        },
        (Route::OpenApiIndex, &Method::GET) => {
            openapi_response(openapi::v3_index(), "application/json", headers, false)
        }
        (Route::OpenApi(p), &Method::GET) => match (openapi::v3(&p), query.get("hash")) {
            // A stale hash (the client's index is older than this server) is sent to the
            // current document, as upstream does.
            (Some(d), Some(h)) if h != d.hash => (
                StatusCode::MOVED_PERMANENTLY,
                [(header::LOCATION, format!("/openapi/v3/{p}?hash={}", d.hash))],
            )
                .into_response(),
            (Some(d), hash) => openapi_response(d, "application/json", headers, hash.is_some()),
            (None, _) => ApiError::no_route().into_response(),
        },
        (Route::OpenApiV2, &Method::GET) => match openapi::v2_protobuf_wanted(accept) {
            Some(true) => openapi_response(
                openapi::v2(true),
                openapi::V2_PROTOBUF_CONTENT_TYPE,
                headers,
                false,
            ),
            Some(false) => openapi_response(openapi::v2(false), "application/json", headers, false),
            None => StatusCode::NOT_ACCEPTABLE.into_response(),
        },
        (Route::LegacyBinding(ns), &Method::POST) => {
            let req = Req {
                st,
                method,
                query,
                headers,
                body,
                warnings: RefCell::default(),
            };
            match legacy_binding(&req, ns) {
                Ok(r) => r,
                Err(e) => e.into_response(),
            }
        }
        (Route::Object(p), _) => {
            let req = Req {
                st,
                method,
                query,
                headers,
                body,
                warnings: RefCell::default(),
            };
            match object(&req, p) {
                Ok(r) => with_warnings(r, &req.warnings.borrow()),
                Err(e) => e.into_response(),
            }
        }
        (_, m) => ApiError::method_not_allowed(m.as_str()).into_response(),
    }
}

/// Adds one `Warning: 299 - "…"` header per warning, as the real apiserver does.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn read_body(
    headers: &HeaderMap,
    body: axum::body::Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

struct Req<'a> {
    st: &'a AppState,
    method: &'a Method,
    query: &'a Query,
    headers: &'a HeaderMap,
    body: &'a Bytes,
    /// `fieldValidation=Warn` findings, sent back as `Warning` headers.
    warnings: RefCell<Vec<String>>,
}

impl Req<'_> {
    fn wants_table(&self) -> bool {
        header_str(self.headers, header::ACCEPT).contains("as=Table")
    }

    fn content_type(&self) -> &str {
        header_str(self.headers, header::CONTENT_TYPE)
    }

    /// Decodes a JSON, YAML or protobuf object body of `info`'s kind; no Content-Type means
    /// JSON, as upstream.
    fn object_body(&self, info: &ResourceInfo) -> Result<Value, ApiError> {
        self.body_of(crate::protobuf::Target {
            group: info.group,
            version: info.version,
            kind: info.kind,
        })
    }

    /// Decodes a JSON, YAML or protobuf object body that a request for `into`'s kind takes.
    fn body_of(&self, into: crate::protobuf::Target<'_>) -> Result<Value, ApiError> {
        let ct = self.content_type();
        let base = ct.split(';').next().unwrap_or("").trim();
        let v: Value = match base {
            "" | "application/json" | "*/*" => serde_json::from_slice(self.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))?,
            "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(self.body, into)?,
            "application/yaml" | "application/apply-patch+yaml" => {
                serde_yaml_ng::from_slice(self.body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")))?
            }
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        if !v.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        Ok(v)
    }

    /// Decoding and unknown-field checks as `fieldValidation` asks; warnings are kept for
    /// the response headers.
    fn check_fields(&self, info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
        let mode = self.query.field_validation();
        // Duplicates are looked for in JSON create and update bodies, which are the object
        // itself; a patch's duplicates are the patch's.
        let json_object_body = matches!(*self.method, Method::POST | Method::PUT)
            && matches!(
                self.content_type().split(';').next().unwrap_or("").trim(),
                "" | "application/json"
            );
        let duplicates = if mode != admission::FieldValidation::Ignore && json_object_body {
            admission::duplicate_fields(self.body)
        } else {
            Vec::new()
        };
        let warnings = admission::check_fields(info, obj, mode, &duplicates).map_err(|mut e| {
            // A create or update body is decoded as a whole object, and upstream names the
            // kind that could not be decoded; a patch's strict errors stand alone.
            if matches!(*self.method, Method::POST | Method::PUT)
                && e.message.starts_with("strict decoding error")
            {
                e.message = format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {}",
                    e.message,
                    kind = info.kind,
                    version = info.version
                );
            }
            e
        })?;
        self.warnings.borrow_mut().extend(warnings);
        Ok(())
    }

    fn selector(&self, info: &ResourceInfo) -> Result<Selector, ApiError> {
        Ok(Selector {
            labels: LabelSelector::parse(self.query.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(self.query.get("fieldSelector").unwrap_or(""), info)?,
        })
    }
}

/// How the resource's objects look on the wire (events.k8s.io Events are stored as core).
/// Borrows in the common case: watches encode every event for every watcher.
fn to_wire<'a>(info: &ResourceInfo, obj: &'a Value) -> Cow<'a, Value> {
    if info.group == "events.k8s.io" {
        Cow::Owned(admission::event_from_core(obj))
    } else {
        Cow::Borrowed(obj)
    }
}

fn from_wire(info: &ResourceInfo, obj: Value) -> Value {
    if info.group == "events.k8s.io" {
        admission::event_to_core(&obj)
    } else {
        obj
    }
}

fn namespace_of(p: &ObjectPath) -> &str {
    p.ns.as_deref().unwrap_or("")
}

fn object(req: &Req<'_>, p: ObjectPath) -> Result<Response, ApiError> {
    let info = p.info;
    if info.namespaced && p.ns.is_none() && (p.name.is_some() || *req.method != Method::GET) {
        return Err(ApiError::method_not_allowed(req.method.as_str()));
    }
    if p.sub
        .as_deref()
        .is_some_and(|sub| !info.subresources.contains(&sub))
    {
        return Err(ApiError::no_route());
    }
    match (req.method.clone(), p.name.as_deref(), p.sub.as_deref()) {
        (Method::GET, None, None) => {
            if req.query.flag("watch") {
                watch::watch(req, &p)
            } else {
                list(req, &p)
            }
        }
        (Method::POST, None, None) => create(req, &p),
        (Method::DELETE, None, None) => delete_collection(req, &p),
        (Method::GET, Some(name), None | Some("status")) => {
            let stored = req
                .st
                .store
                .get_encoded(info, namespace_of(&p), name)
                .ok_or_else(|| ApiError::not_found(info, name))?;
            if sends_stored(req, info) {
                return Ok(bytes_response(200, stored));
            }
            Ok(single(req, info, &store::decode(&stored), 200))
        }
        (Method::PUT, Some(name), sub @ (None | Some("status"))) => {
            update(req, &p, name, sub.is_some())
        }
        (Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            patch(req, &p, name, sub.is_some())
        }
        (Method::DELETE, Some(name), None) => delete(req, &p, name),
        (Method::GET, Some(name), Some("scale")) => {
            Ok(json_response(200, &scale::get(req, &p, name)?))
        }
        (Method::PUT, Some(name), Some("scale")) => {
            Ok(json_response(200, &scale::write(req, &p, name, None)?))
        }
        (Method::PATCH, Some(name), Some("scale")) => {
            let ct = req.content_type();
            let kind = PatchType::from_content_type(ct)
                .ok_or_else(|| ApiError::unsupported_media_type(ct))?;
            Ok(json_response(
                200,
                &scale::write(req, &p, name, Some(kind))?,
            ))
        }
        (Method::POST, Some(name), Some("binding")) if info.kind == "Pod" => bind(req, &p, name),
        (Method::POST, Some(name), Some("eviction")) if info.kind == "Pod" => evict(req, &p, name),
        (m, _, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

/// Whether a response of `info`'s objects is their stored bytes as they are: JSON, no
/// Table, and no conversion (events.k8s.io Events are stored as core Events).
fn sends_stored(req: &Req<'_>, info: &ResourceInfo) -> bool {
    !req.wants_table() && info.group != "events.k8s.io"
}

/// A JSON response whose body is already encoded.
fn bytes_response(code: u16, body: Bytes) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// The response to a write: the bytes it stored when they are what the client asked for,
/// else the object encoded as asked.
fn written(req: &Req<'_>, info: &ResourceInfo, w: &store::Written, code: u16) -> Response {
    match &w.encoded {
        Some(stored) if sends_stored(req, info) => bytes_response(code, stored.clone()),
        _ => single(req, info, &w.object, code),
    }
}

fn single(req: &Req<'_>, info: &ResourceInfo, obj: &Value, code: u16) -> Response {
    let wire = to_wire(info, obj);
    if req.wants_table() {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let include = req.query.get("includeObject") == Some("Object");
        return json_response(code, &table::table(info, [&*wire], rv, include));
    }
    json_response(code, &wire)
}

fn list(req: &Req<'_>, p: &ObjectPath) -> Result<Response, ApiError> {
    let info = p.info;
    let sel = req.selector(info)?;
    let ns = p.ns.as_deref();
    let across = info.namespaced && ns.is_none();
    let limit = match req.query.get("limit").filter(|l| !l.is_empty()) {
        None => None,
        Some(l) => match l.parse::<i64>() {
            // Upstream: zero or negative is no limit.
            Ok(n) => usize::try_from(n).ok().filter(|&n| n > 0),
            Err(e) => return Err(ApiError::bad_request(format!("invalid limit {l:?}: {e}"))),
        },
    };
    let start = match req.query.get("continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => {
            let mut c = paging::decode(token, across)?;
            if !matches!(req.query.get("resourceVersion"), None | Some("" | "0")) {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            if !across {
                c.start.0 = ns.unwrap_or("").to_string();
            }
            Some(c)
        }
    };
    // A later page reads the state of the first one: its kept snapshot, or the store if
    // nothing was written since; otherwise the token has expired.
    let consistent = start.as_ref().and_then(|c| Some((c, c.rv?)));
    let (items, rv) = match consistent {
        Some((c, at)) => match req.st.snapshots.get(info.storage, ns, at) {
            Some(items) => (items, at),
            None => {
                let (items, rv) = req.st.store.list_encoded(info, ns);
                if rv != at {
                    return Ok(json_response(410, &paging::expired_status(c, across)));
                }
                (Arc::new(items), rv)
            }
        },
        None => {
            let (items, rv) = req.st.store.list_encoded(info, ns);
            (Arc::new(items), rv)
        }
    };
    let filtered = !sel.labels.is_empty() || !sel.fields.is_empty();
    // Only selectors need the objects decoded; the page itself is sent as stored.
    let page = paging::page(&items, start.as_ref(), limit, filtered, |o| {
        !filtered || sel.matches(&store::decode(&o.encoded))
    });
    let continue_token = page.last.map(|last| {
        req.st.snapshots.keep(info.storage, ns, rv, items.clone());
        paging::encode(rv, last, across)
    });
    let meta = ListMeta {
        resource_version: rv.to_string(),
        continue_token,
        remaining_item_count: page.remaining,
    };
    if sends_stored(req, info) {
        return Ok(stored_list_response(info, &meta, &page.items));
    }
    let decoded: Vec<Arc<Value>> = page
        .items
        .iter()
        .map(|o| store::decode(&o.encoded))
        .collect();
    let wire: Vec<Cow<'_, Value>> = decoded.iter().map(|o| to_wire(info, o)).collect();
    if req.wants_table() {
        let include = req.query.get("includeObject") == Some("Object");
        let mut t = table::table(
            info,
            wire.iter().map(|c| &**c),
            &meta.resource_version,
            include,
        );
        if let Some(m) = t.get_mut("metadata") {
            *m = serde_json::to_value(&meta).unwrap_or_default();
        }
        return Ok(json_response(200, &t));
    }
    Ok(list_response(info, &meta, &wire))
}

/// `metadata` of a list or Table.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    resource_version: String,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    continue_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remaining_item_count: Option<u64>,
}

/// A `XxxList`, serialized straight from the stored objects (no copy into a new tree).
fn list_response(info: &ResourceInfo, meta: &ListMeta, items: &[Cow<'_, Value>]) -> Response {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct List<'a> {
        kind: String,
        api_version: String,
        metadata: &'a ListMeta,
        items: &'a [Cow<'a, Value>],
    }
    let list = List {
        kind: format!("{}List", info.kind),
        api_version: info.api_version(),
        metadata: meta,
        items,
    };
    let bytes = serde_json::to_vec(&list).unwrap_or_default();
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

/// A `XxxList` of stored objects, their bytes spliced in as they are: the same bytes as
/// [`list_response`] encodes from the decoded objects, without decoding them.
fn stored_list_response(
    info: &ResourceInfo,
    meta: &ListMeta,
    items: &[&store::Listed],
) -> Response {
    let meta = serde_json::to_vec(meta).unwrap_or_default();
    let kind = serde_json::to_string(&format!("{}List", info.kind)).unwrap_or_default();
    let api_version = serde_json::to_string(&info.api_version()).unwrap_or_default();
    let len = items.iter().map(|o| o.encoded.len() + 1).sum::<usize>() + meta.len() + 64;
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(b"{\"kind\":");
    body.extend_from_slice(kind.as_bytes());
    body.extend_from_slice(b",\"apiVersion\":");
    body.extend_from_slice(api_version.as_bytes());
    body.extend_from_slice(b",\"metadata\":");
    body.extend_from_slice(&meta);
    body.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&o.encoded);
    }
    body.extend_from_slice(b"]}");
    bytes_response(200, Bytes::from(body))
}

/// Decodes, checks and admits a new object in its stored form.
fn admit_new(req: &Req<'_>, p: &ObjectPath, mut obj: Value) -> Result<Value, ApiError> {
    let info = p.info;
    admission::check_kind(info, &mut obj)?;
    // The server gives every new object its uid; one in the body is dropped.
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("uid");
    }
    admission::check_name(info, &obj)?;
    req.check_fields(info, &obj)?;
    let url_ns = namespace_of(p);
    if let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        if info.namespaced && !ns.is_empty() && ns != url_ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    match (info.group, info.kind) {
        ("", "Pod") => {
            admission::default_pod(&mut obj);
            admission::apply_scheduling_gated_condition(&mut obj);
            admission::merge_affinity_label_keys(&mut obj);
            admission::merge_topology_spread_label_keys(&mut obj);
            let classes = priority_classes_for(req, &obj)?;
            admission::admit_priority(info, &mut obj, &classes)?;
        }
        ("", "Namespace") => admission::default_namespace(&mut obj),
        ("batch", "Job") => {
            crate::job::prepare_for_create(&mut obj);
            let errs = crate::job::validate_job(&obj);
            if !errs.is_empty() {
                let name = obj.pointer("/metadata/name").and_then(Value::as_str);
                return Err(ApiError::invalid_fields(
                    info.kind,
                    info.group,
                    name.unwrap_or(""),
                    &errs,
                ));
            }
        }
        ("apps", "DaemonSet") => crate::daemonset::set_defaults(info, &mut obj, None),
        ("apps", "StatefulSet") => crate::statefulset::set_defaults(info, &mut obj),
        _ => {
            admission::default_storage_spec(info, &mut obj);
            admission::default_storage_phase(info, &mut obj);
            admission::default_workload(info, &mut obj);
        }
    }
    let mut errs = validation::validate_resource_quantities(info, &obj);
    errs.extend(crate::daemonset::validate(info, &obj));
    errs.extend(crate::statefulset::validate(info, &obj));
    if !errs.is_empty() {
        let name = obj.pointer("/metadata/name").and_then(Value::as_str);
        return Err(ApiError::invalid_fields(
            info.kind,
            info.group,
            name.unwrap_or(""),
            &errs,
        ));
    }
    if (info.group, info.kind) == ("", "PersistentVolumeClaim") {
        let classes = resources::lookup("storage.k8s.io", "v1", "storageclasses")
            .ok_or_else(|| ApiError::internal("storageclasses not served"))?;
        let (classes, _) = req.st.store.list(classes, None);
        admission::default_claim_class(&mut obj, &classes);
    }
    if (info.group, info.kind) == ("apps", "Deployment") {
        let errs = validation::validate_deployment(&obj);
        if !errs.is_empty() {
            let name = obj.pointer("/metadata/name").and_then(Value::as_str);
            return Err(ApiError::invalid_fields(
                info.kind,
                info.group,
                name.unwrap_or(""),
                &errs,
            ));
        }
    }
    if info.group == "resource.k8s.io" {
        crate::resource_validation::set_defaults(info.kind, &mut obj);
        let mut errs = crate::resource_validation::validate_create(info.kind, &obj);
        if errs.is_empty() {
            let ns = namespace_object(req, url_ns);
            errs = crate::resource_validation::admin_access_errors(
                info.kind,
                &obj,
                None,
                ns.as_deref(),
            );
        }
        if !errs.is_empty() {
            let name = obj.pointer("/metadata/name").and_then(Value::as_str);
            return Err(ApiError::invalid_fields(
                info.kind,
                info.group,
                name.unwrap_or(""),
                &errs,
            ));
        }
    }
    if (info.group, info.kind) == ("storage.k8s.io", "StorageClass") {
        let errs = validation::validate_storage_class(&obj);
        if !errs.is_empty() {
            let name = obj.pointer("/metadata/name").and_then(Value::as_str);
            return Err(ApiError::invalid_fields(
                info.kind,
                info.group,
                name.unwrap_or(""),
                &errs,
            ));
        }
    }
    Ok(from_wire(info, obj))
}

/// The priority classes priority admission of `pod` may pick from, decoded: the class
/// the pod names (none if there is no such class), or else the classes that may be the
/// global default. Every pod create asks, and most classes are neither.
fn priority_classes_for(req: &Req<'_>, pod: &Value) -> Result<Vec<Arc<Value>>, ApiError> {
    let pcs = resources::lookup("scheduling.k8s.io", "v1", "priorityclasses")
        .ok_or_else(|| ApiError::internal("priorityclasses not served"))?;
    let named = crate::meta::at(pod, &["spec", "priorityClassName"])
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    Ok(match named {
        Some(name) => req.st.store.get(pcs, "", name).into_iter().collect(),
        // The store writes JSON without spaces: a class whose `globalDefault` is true holds
        // these bytes (a string value may too, which admission then looks at and skips).
        None => req.st.store.list_where(pcs, None, |b| {
            store::contains(b, br#""globalDefault":true"#)
        }),
    })
}

/// The stored namespace `name`, if any. Not to be called under the store's lock (inside
/// `Store::update`'s closure): callers look it up before.
fn namespace_object(req: &Req<'_>, name: &str) -> Option<std::sync::Arc<Value>> {
    let namespaces = resources::lookup("", "v1", "namespaces")?;
    req.st.store.get(namespaces, "", name)
}

fn create(req: &Req<'_>, p: &ObjectPath) -> Result<Response, ApiError> {
    let obj = admit_new(req, p, req.object_body(p.info)?)?;
    let created = req
        .st
        .store
        .create_written(p.info, namespace_of(p), obj, req.query.dry_run())?;
    Ok(written(req, p.info, &created, 201))
}

fn rv_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Builds the stored object of an update: checks, keeps status on the main resource (or
/// only takes status on the status subresource).
fn finish_update(
    info: &ResourceInfo,
    current: &Value,
    mut new: Value,
    status_only: bool,
    name: &str,
    req: &Req<'_>,
    namespace: Option<&Value>,
) -> Result<Value, ApiError> {
    admission::check_kind(info, &mut new)?;
    let new_name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(name);
    if new_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(rv) = rv_of(&new) {
        if Some(rv) != rv_of(current) {
            return Err(ApiError::modified(info, name));
        }
    }
    req.check_fields(info, &new)?;
    let new = from_wire(info, new);
    if status_only {
        let mut out = current.clone();
        match new.get("status") {
            Some(s) => out["status"] = s.clone(),
            None => {
                if let Some(m) = out.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        if info.group == "resource.k8s.io" {
            let mut errs =
                crate::resource_validation::validate_update(info.kind, current, &out, true);
            if errs.is_empty() {
                errs = crate::resource_validation::admin_access_errors(
                    info.kind,
                    &out,
                    Some(current),
                    namespace,
                );
            }
            if !errs.is_empty() {
                return Err(ApiError::invalid_fields(info.kind, info.group, name, &errs));
            }
        }
        return Ok(out);
    }
    let mut new = new;
    if info.has_status() {
        match current.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    if info.group.is_empty() && info.kind == "Pod" {
        admission::default_pod_spec(&mut new);
        // Priority admission set these on create; an update keeps them (upstream too).
        for key in ["priority", "preemptionPolicy"] {
            if new.pointer(&format!("/spec/{key}")).is_none() {
                if let Some(v) = current.pointer(&format!("/spec/{key}")) {
                    new["spec"][key] = v.clone();
                }
            }
        }
        let errs = validation::validate_pod_update(current, &new);
        if !errs.is_empty() {
            return Err(ApiError::invalid_fields(info.kind, info.group, name, &errs));
        }
    }
    admission::default_storage_spec(info, &mut new);
    admission::default_workload(info, &mut new);
    crate::daemonset::set_defaults(info, &mut new, Some(current));
    crate::statefulset::set_defaults(info, &mut new);
    let errs = match (info.group, info.kind) {
        ("", "PersistentVolumeClaim") => {
            validation::validate_persistent_volume_claim_update(current, &new)
        }
        ("", "PersistentVolume") => validation::validate_persistent_volume_update(current, &new),
        ("resource.k8s.io", kind) => {
            crate::resource_validation::set_defaults(kind, &mut new);
            crate::resource_validation::validate_update(kind, current, &new, false)
        }
        ("storage.k8s.io", "StorageClass") => {
            validation::validate_storage_class_update(current, &new)
        }
        ("batch", "Job") if !status_only => {
            if let Some(template) = new.pointer_mut("/spec/template") {
                admission::default_pod_spec(template);
            }
            let mut errs = crate::job::validate_job_update(current, &new);
            errs.extend(validation::validate_resource_quantities(info, &new));
            errs
        }
        ("apps", "Deployment") => {
            let mut errs = validation::validate_deployment_update(current, &new);
            errs.extend(validation::validate_resource_quantities(info, &new));
            errs
        }
        _ => validation::validate_resource_quantities(info, &new),
    };
    let mut errs = errs;
    errs.extend(crate::daemonset::validate_update(info, current, &new));
    errs.extend(crate::statefulset::validate_update(info, current, &new));
    if !errs.is_empty() {
        return Err(ApiError::invalid_fields(info.kind, info.group, name, &errs));
    }
    Ok(new)
}

/// The namespace of a resource.k8s.io object's request (its labels decide admin access),
/// looked up before the store's lock is taken.
fn resource_namespace(req: &Req<'_>, p: &ObjectPath) -> Option<std::sync::Arc<Value>> {
    (p.info.group == "resource.k8s.io" && p.info.namespaced)
        .then(|| namespace_object(req, namespace_of(p)))
        .flatten()
}

fn update(
    req: &Req<'_>,
    p: &ObjectPath,
    name: &str,
    status_only: bool,
) -> Result<Response, ApiError> {
    let info = p.info;
    let body = req.object_body(info)?;
    let namespace = resource_namespace(req, p);
    let updated = req.st.store.update_written(
        info,
        namespace_of(p),
        name,
        req.query.dry_run(),
        |current| {
            finish_update(
                info,
                current,
                body,
                status_only,
                name,
                req,
                namespace.as_deref(),
            )
        },
    )?;
    Ok(written(req, info, &updated, 200))
}

fn patch(
    req: &Req<'_>,
    p: &ObjectPath,
    name: &str,
    status_only: bool,
) -> Result<Response, ApiError> {
    let info = p.info;
    let ct = req.content_type();
    let kind =
        PatchType::from_content_type(ct).ok_or_else(|| ApiError::unsupported_media_type(ct))?;
    let ns = namespace_of(p);
    if kind == PatchType::Apply && !status_only && req.st.store.get(info, ns, name).is_none() {
        let mut obj = req.object_body(info)?;
        admission::check_kind(info, &mut obj)?;
        obj["metadata"]["name"] = json!(name);
        let obj = admit_new(req, p, obj)?;
        let created = req
            .st
            .store
            .create_written(info, ns, obj, req.query.dry_run())?;
        return Ok(written(req, info, &created, 201));
    }
    let body = req.body;
    let namespace = resource_namespace(req, p);
    let updated = req
        .st
        .store
        .update_written(info, ns, name, req.query.dry_run(), |current| {
            let wire = to_wire(info, current);
            let mut patched = patch::apply(&wire, body, kind)?;
            // A resourceVersion the patch did not set is the current one; one it set is a
            // precondition.
            if rv_of(&patched) == rv_of(&wire) {
                if let Some(m) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
            }
            finish_update(
                info,
                current,
                patched,
                status_only,
                name,
                req,
                namespace.as_deref(),
            )
        })?;
    Ok(written(req, info, &updated, 200))
}

/// DeleteOptions of a request: the query's `gracePeriodSeconds` and `dryRun`, then a JSON
/// body's fields over them.
#[derive(Debug, Default)]
struct DeleteRequest {
    uid: Option<String>,
    resource_version: Option<String>,
    grace_period_seconds: Option<i64>,
    dry_run: bool,
    /// `propagationPolicy` (`orphanDependents: true` is `Orphan`).
    propagation_policy: Option<String>,
}

impl DeleteRequest {
    fn options(&self) -> store::DeleteOptions<'_> {
        store::DeleteOptions {
            uid: self.uid.as_deref(),
            resource_version: self.resource_version.as_deref(),
            grace_period_seconds: self.grace_period_seconds,
            dry_run: self.dry_run,
        }
    }
}

/// DeleteOptions from the query and a JSON body; other bodies (protobuf from drain) are
/// ignored.
fn delete_options(req: &Req<'_>) -> Result<DeleteRequest, ApiError> {
    delete_options_of(req, "")
}

/// DeleteOptions found at `at` in a JSON body (`""`, or `/deleteOptions` in an Eviction).
fn delete_options_of(req: &Req<'_>, at: &str) -> Result<DeleteRequest, ApiError> {
    let grace_period_seconds = match req.query.get("gracePeriodSeconds") {
        None | Some("") => None,
        Some(g) => Some(g.parse::<i64>().map_err(|e| {
            ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}: {e}"))
        })?),
    };
    let mut parsed = DeleteRequest {
        grace_period_seconds,
        dry_run: req.query.dry_run(),
        propagation_policy: req
            .query
            .get("propagationPolicy")
            .filter(|p| !p.is_empty())
            .map(str::to_string),
        ..DeleteRequest::default()
    };
    let base = req
        .content_type()
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if req.body.is_empty() || !(base.is_empty() || base == "application/json") {
        check_propagation(parsed.propagation_policy.as_deref(), false)?;
        return Ok(parsed);
    }
    let body: Value = serde_json::from_slice(req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
    let opts = body.pointer(at).cloned().unwrap_or(Value::Null);
    let s = |p: &str| opts.pointer(p).and_then(Value::as_str).map(str::to_string);
    if opts
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|x| x == "All"))
    {
        parsed.dry_run = true;
    }
    match opts.get("gracePeriodSeconds") {
        None | Some(Value::Null) => {}
        Some(g) => {
            parsed.grace_period_seconds = Some(g.as_i64().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "error decoding DeleteOptions: gracePeriodSeconds: expected an integer, got {g}"
                ))
            })?);
        }
    }
    parsed.uid = s("/preconditions/uid");
    parsed.resource_version = s("/preconditions/resourceVersion");
    let orphan_dependents = opts.get("orphanDependents").and_then(Value::as_bool);
    let policy = s("/propagationPolicy");
    let both = orphan_dependents.is_some() && policy.is_some();
    if orphan_dependents == Some(true) {
        parsed.propagation_policy = Some("Orphan".to_string());
    }
    if let Some(policy) = policy {
        parsed.propagation_policy = Some(policy);
    }
    check_propagation(parsed.propagation_policy.as_deref(), both)?;
    Ok(parsed)
}

/// Upstream's ValidateDeleteOptions for the propagation policy: one of the three, and not
/// given together with `orphanDependents`.
fn check_propagation(policy: Option<&str>, with_orphan_dependents: bool) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    if with_orphan_dependents {
        errs.push(validation::FieldError {
            field: "propagationPolicy".to_string(),
            kind: validation::FieldErrorKind::Invalid(json!(policy)),
            detail: "orphanDependents and deletionPropagation cannot be both set".to_string(),
        });
    }
    if let Some(p) = policy.filter(|p| !["Foreground", "Background", "Orphan"].contains(p)) {
        errs.push(validation::FieldError {
            field: "propagationPolicy".to_string(),
            kind: validation::FieldErrorKind::NotSupported(
                json!(p),
                &["Foreground", "Background", "Orphan", "nil"],
            ),
            detail: String::new(),
        });
    }
    if errs.is_empty() {
        return Ok(());
    }
    // Upstream validates DeleteOptions as an object of its own, with no name.
    Err(ApiError::invalid_fields(
        "DeleteOptions",
        "meta.k8s.io",
        "",
        &errs,
    ))
}

fn delete(req: &Req<'_>, p: &ObjectPath, name: &str) -> Result<Response, ApiError> {
    let opts = delete_options(req)?;
    // The policy was checked with the other DeleteOptions.
    let finalizer = match opts.propagation_policy.as_deref() {
        Some("Orphan") => Some(crate::garbagecollector::FINALIZER_ORPHAN),
        Some("Foreground") => Some(crate::garbagecollector::FINALIZER_FOREGROUND),
        _ => None,
    };
    if let Some(finalizer) = finalizer.filter(|_| req.st.garbage_collector && !opts.dry_run) {
        // The owner waits under the garbage collector's finalizer, added before the delete
        // marks it; one already being deleted keeps the policy it was deleted with.
        req.st
            .store
            .update(p.info, namespace_of(p), name, false, |cur| {
                let mut new = cur.clone();
                if cur.pointer("/metadata/deletionTimestamp").is_some() {
                    return Ok(new);
                }
                let mut finalizers = cur
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !finalizers.iter().any(|f| f == finalizer) {
                    finalizers.push(json!(finalizer));
                }
                new["metadata"]["finalizers"] = Value::Array(finalizers);
                Ok(new)
            })?;
    }
    let last = req
        .st
        .store
        .delete(p.info, namespace_of(p), name, opts.options())?;
    Ok(single(req, p.info, &last, 200))
}

fn delete_collection(req: &Req<'_>, p: &ObjectPath) -> Result<Response, ApiError> {
    let info = p.info;
    let sel = req.selector(info)?;
    let opts = delete_options(req)?;
    let opts = store::DeleteOptions {
        uid: None,
        resource_version: None,
        ..opts.options()
    };
    let (items, _) = req.st.store.list(info, p.ns.as_deref());
    let mut deleted = Vec::new();
    for o in items.iter().filter(|o| sel.matches(o)) {
        let ns = o
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        match req.st.store.delete(info, ns, name, opts) {
            Ok(last) => deleted.push(to_wire(info, &last).into_owned()),
            // Deleted meanwhile by someone else: that is what was asked.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let rv = req.st.store.resource_version().to_string();
    Ok(json_response(
        200,
        &json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(),
                "metadata": {"resourceVersion": rv}, "items": deleted}),
    ))
}

/// A Binding body: protobuf (kube-scheduler's default) or JSON.
fn binding_body(req: &Req<'_>) -> Result<Value, ApiError> {
    if req.content_type().split(';').next().unwrap_or("").trim()
        == "application/vnd.kubernetes.protobuf"
    {
        return crate::protobuf::decode(
            req.body,
            crate::protobuf::Target {
                group: "",
                version: "v1",
                kind: "Binding",
            },
        );
    }
    let binding: Value = serde_json::from_slice(req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding Binding: {e}")))?;
    if !binding.is_object() {
        return Err(ApiError::bad_request(
            "error decoding Binding: not a JSON object",
        ));
    }
    admission::check_binding_kind(&binding)?;
    Ok(binding)
}

/// pods/binding, as upstream's BindingREST: one atomic read-modify-write of the pod.
fn bind(req: &Req<'_>, p: &ObjectPath, name: &str) -> Result<Response, ApiError> {
    let info = p.info;
    let binding = binding_body(req)?;
    let s = |path: &[&str]| {
        crate::meta::at(&binding, path)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let body_name = s(&["metadata", "name"]);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let target = s(&["target", "name"]);
    if target.is_empty() {
        return Err(ApiError::invalid_kind(
            "Binding",
            "",
            name,
            "target.name",
            "Required value",
            "FieldValueRequired",
        ));
    }
    let (uid, rv) = (s(&["metadata", "uid"]), s(&["metadata", "resourceVersion"]));
    let annotations =
        crate::meta::at(&binding, &["metadata", "annotations"]).and_then(Value::as_object);
    req.st.store.update(
        info,
        namespace_of(p),
        name,
        req.query.dry_run(),
        |current| {
            let current_uid = crate::meta::at(current, &["metadata", "uid"])
                .and_then(Value::as_str)
                .unwrap_or("");
            if !uid.is_empty() && current_uid != uid {
                // Upstream's storage precondition error, as etcd3's store words it.
                return Err(ApiError::conflict(
                    info,
                    name,
                    &format!(
                        "StorageError: invalid object, Code: 4, Key: /registry/pods/{}/{name}, \
                         ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in \
                         precondition: {uid}, UID in object meta: {current_uid}",
                        namespace_of(p)
                    ),
                ));
            }
            if !rv.is_empty() && rv_of(current) != Some(rv) {
                return Err(ApiError::modified(info, name));
            }
            if crate::meta::at(current, &["metadata", "deletionTimestamp"]).is_some() {
                return Err(ApiError::binding_conflict(
                    name,
                    format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            let node = crate::meta::at(current, &["spec", "nodeName"])
                .and_then(Value::as_str)
                .unwrap_or("");
            if !node.is_empty() {
                return Err(ApiError::binding_conflict(
                    name,
                    format!("pod {name} is already assigned to node \"{node}\""),
                ));
            }
            if crate::meta::at(current, &["spec", "schedulingGates"])
                .and_then(Value::as_array)
                .is_some_and(|g| !g.is_empty())
            {
                return Err(ApiError::binding_conflict(
                    name,
                    format!("pod {name} has non-empty .spec.schedulingGates"),
                ));
            }
            Ok(bound_pod(current, target, annotations))
        },
    )?;
    static BOUND: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    let body = BOUND.get_or_init(|| {
        Bytes::from(serde_json::to_vec(&status::success(201, None)).unwrap_or_default())
    });
    Ok(bytes_response(201, body.clone()))
}

/// The pod a binding leaves: `spec.nodeName` set, the binding's annotations added, no
/// `status.nominatedNodeName`, and a PodScheduled=True condition in place of any earlier
/// one (appended after the other conditions).
fn bound_pod(
    current: &Value,
    target: &str,
    annotations: Option<&serde_json::Map<String, Value>>,
) -> Value {
    let mut pod = current.clone();
    pod["spec"]["nodeName"] = json!(target);
    if let Some(a) = annotations {
        if !pod
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .is_some_and(Value::is_object)
        {
            pod["metadata"]["annotations"] = json!({});
        }
        for (k, v) in a {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                      "lastTransitionTime": crate::meta::now_rfc3339()});
    if let Some(st) = pod["status"].as_object_mut() {
        st.remove("nominatedNodeName");
        match st.get_mut("conditions") {
            Some(Value::Array(conds)) => {
                conds.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                conds.push(cond);
            }
            _ => {
                st.insert("conditions".to_string(), json!([cond]));
            }
        }
    }
    pod
}

/// The legacy bindings collection: the pod is the one the Binding's `metadata.name` names.
fn legacy_binding(req: &Req<'_>, ns: String) -> Result<Response, ApiError> {
    let pods =
        resources::lookup("", "v1", "pods").ok_or_else(|| ApiError::internal("pods not served"))?;
    let binding = binding_body(req)?;
    let name = binding
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::invalid_kind(
                "Binding",
                "",
                "",
                "metadata.name",
                "Required value",
                "FieldValueRequired",
            )
        })?
        .to_string();
    let p = ObjectPath {
        info: pods,
        ns: Some(ns),
        name: Some(name.clone()),
        sub: Some("binding".to_string()),
    };
    bind(req, &p, &name)
}

/// pods/eviction: deletes the pod unless a PodDisruptionBudget forbids it (429). Pending and
/// terminal pods are deleted without a budget check, as upstream.
fn evict(req: &Req<'_>, p: &ObjectPath, name: &str) -> Result<Response, ApiError> {
    let info = p.info;
    let ns = namespace_of(p);
    if !req.body.is_empty() {
        let eviction: Value = serde_json::from_slice(req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding Eviction: {e}")))?;
        let body_name = eviction
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(name);
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object ({body_name} != {name})"
            )));
        }
    }
    let pod = req
        .st
        .store
        .get(info, ns, name)
        .ok_or_else(|| ApiError::not_found(info, name))?;
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !matches!(phase, "Pending" | "Succeeded" | "Failed" | "") {
        let pdbs = resources::lookup("policy", "v1", "poddisruptionbudgets")
            .ok_or_else(|| ApiError::internal("poddisruptionbudgets not served"))?;
        let (budgets, _) = req.st.store.list(pdbs, Some(ns));
        let matching: Vec<_> = budgets
            .iter()
            .filter(|b| crate::admission::pdb_selects(b, &pod))
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = matching.first() {
            let (pods, _) = req.st.store.list(info, Some(ns));
            let selected: Vec<&Value> = pods
                .iter()
                .map(|p| &**p)
                .filter(|p| crate::admission::pdb_selects(pdb, p))
                .collect();
            let budget = crate::admission::disruption_budget(pdb, &selected);
            if budget.allowed <= 0 {
                let pdb_name = pdb
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(ApiError::disruption_budget(
                    pdb_name,
                    format!(
                        "needs {} healthy pods and has {} currently",
                        budget.desired_healthy, budget.current_healthy
                    ),
                ));
            }
        }
    }
    let opts = delete_options_of(req, "/deleteOptions")?;
    req.st.store.delete(info, ns, name, opts.options())?;
    Ok(json_response(201, &status::success(201, None)))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    /// resource, namespace, name, subresource.
    type RouteParts<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

    #[rstest]
    #[case::leading_ampersand(Some("&watch=true&limit=500"), "watch", Some("true"))]
    #[case::encoded_selector(
        Some("fieldSelector=metadata.name%3Dx"),
        "fieldSelector",
        Some("metadata.name=x")
    )]
    #[case::empty(None, "watch", None)]
    fn queries(#[case] q: Option<&str>, #[case] key: &str, #[case] want: Option<&str>) {
        assert_eq!(Query::parse(q).get(key), want);
    }

    #[rstest]
    #[case::bearer_capitalised("Bearer tok", true)]
    #[case::bearer_lower_case("bearer tok", true)]
    #[case::bearer_upper_case("BEARER tok", true)]
    #[case::surrounding_space_is_trimmed("  Bearer tok  ", true)]
    #[case::words_after_the_token_are_ignored("Bearer tok extra", true)]
    #[case::wrong_token("Bearer other", false)]
    #[case::token_prefix_only("Bearer to", false)]
    #[case::no_token("Bearer", false)]
    #[case::two_spaces_leave_an_empty_token("Bearer  tok", false)]
    #[case::basic_scheme("Basic dG9rOg==", false)]
    #[case::no_header("", false)]
    fn bearer_tokens_follow_upstream(#[case] authorization: &str, #[case] want: bool) {
        let mut headers = HeaderMap::new();
        if !authorization.is_empty() {
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(authorization).expect("header value"),
            );
        }
        assert_eq!(authenticated(&["tok".to_string()], &headers), want);
    }

    #[rstest]
    #[case::namespaced_pod("/api/v1/namespaces/default/pods/p", Some(("pods", Some("default"), Some("p"), None)))]
    #[case::all_namespaces("/api/v1/pods", Some(("pods", None, None, None)))]
    #[case::binding("/api/v1/namespaces/d/pods/p/binding", Some(("pods", Some("d"), Some("p"), Some("binding"))))]
    #[case::namespace_itself("/api/v1/namespaces/d", Some(("namespaces", None, Some("d"), None)))]
    #[case::namespace_status("/api/v1/namespaces/d/status", Some(("namespaces", None, Some("d"), Some("status"))))]
    #[case::node_status("/api/v1/nodes/n/status", Some(("nodes", None, Some("n"), Some("status"))))]
    #[case::lease("/apis/coordination.k8s.io/v1/namespaces/k/leases/l", Some(("leases", Some("k"), Some("l"), None)))]
    #[case::pod_without_namespace("/api/v1/pods/p", None)]
    #[case::unknown("/apis/nope/v1/things", None)]
    fn routes(#[case] path: &str, #[case] want: Option<RouteParts<'_>>) {
        let got = match route(path) {
            Some(Route::Object(p)) => {
                Some((p.info.resource, p.ns.clone(), p.name.clone(), p.sub.clone()))
            }
            _ => None,
        };
        let want = want.map(|(r, ns, n, s)| {
            (
                r,
                ns.map(String::from),
                n.map(String::from),
                s.map(String::from),
            )
        });
        assert_eq!(got, want);
    }
}

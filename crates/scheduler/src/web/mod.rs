//! The web view and its JSON, served on the scheduler's port beside `/healthz` and
//! `/metrics` when the scheduler records its decisions ([`crate::decisions`]).
//!
//! - `GET /` — the page (`index.html`, embedded: no CDN, works offline), with what the
//!   endpoints below say embedded in it, so that it is complete when it loads (and
//!   `?pod=NAMESPACE/NAME`'s decision); it then follows `/api/events` and reads the
//!   endpoints again as decisions come.
//! - `GET /api/pods` — every pod in the decision log with its last outcome, oldest first.
//! - `GET /api/pods/{namespace}/{name}` — the pod's last attempt, in `simulate -o json`'s
//!   per-pod shape; 404 when the log has none.
//! - `GET /api/nodes` — the scheduler cache's nodes: allocatable, requested (CPU in
//!   millicores, memory and storage in bytes, the rest in units) and their pods.
//! - `GET /api/profiles` — each profile's Score plugins and weights (a score in a pod's
//!   decision is before weight).
//! - `GET /api/events` — server-sent events: `decision` (a
//!   [`DecisionEvent`](crate::decisions::DecisionEvent) as JSON) on every change of the
//!   log; `lagged` (the number missed) when a reader fell behind and should read
//!   `/api/pods` again.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use framework::Resource;
use futures_util::stream::Stream;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::decisions::{Decisions, PodOutcome};
use crate::scheduler::Scheduler;

/// The page: plain HTML, CSS and JavaScript in one file.
pub const INDEX_HTML: &str = include_str!("index.html");

/// Where the page's initial state goes (inside a `<script type="application/json">`).
const INITIAL_STATE: &str = "/*INITIAL_STATE*/";

/// What the web endpoints read.
#[derive(Clone)]
pub struct WebState {
    scheduler: Scheduler,
    decisions: Decisions,
    /// Flipped when the server stops, so that event streams end and the graceful shutdown
    /// does not wait on them for ever.
    stopping: Arc<watch::Sender<bool>>,
}

impl std::fmt::Debug for WebState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebState")
            .field("decisions", &self.decisions)
            .finish_non_exhaustive()
    }
}

impl WebState {
    pub fn new(scheduler: Scheduler, decisions: Decisions) -> Self {
        WebState {
            scheduler,
            decisions,
            stopping: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Ends the event streams (the server is shutting down).
    pub fn stop_streams(&self) {
        self.stopping.send_replace(true);
    }
}

/// The page and the endpoints above.
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/api/pods", get(pods))
        .route("/api/pods/{namespace}/{name}", get(pod))
        .route("/api/nodes", get(nodes))
        .route("/api/profiles", get(profiles))
        .route("/api/events", get(events))
        .with_state(state)
}

async fn index(
    State(state): State<WebState>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    // The decision as it is kept, so that its plugins stay in the order they ran.
    let decision = query
        .get("pod")
        .and_then(|key| key.split_once('/'))
        .and_then(|(namespace, name)| state.decisions.get_json(namespace, name));
    let rest = serde_json::json!({
        "profiles": profiles_value(&state),
        "nodes": nodes_value(&state),
        "pods": PodList { pods: state.decisions.list() },
    })
    .to_string();
    let initial = format!(
        "{{\"decision\":{},{}",
        decision.as_deref().unwrap_or("null"),
        rest.strip_prefix('{').unwrap_or(&rest)
    );
    // Inside a script element only `</` could end it early: JSON allows `<` escaped.
    let initial = initial.replace('<', "\\u003c");
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        INDEX_HTML.replacen(INITIAL_STATE, &initial, 1),
    )
        .into_response()
}

fn json_text(status: StatusCode, body: String) -> Response {
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

fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => json_text(StatusCode::OK, body),
        Err(e) => json_text(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({ "error": e.to_string() }).to_string(),
        ),
    }
}

#[derive(Serialize)]
struct PodList {
    pods: Vec<PodOutcome>,
}

async fn pods(State(state): State<WebState>) -> Response {
    json(&PodList {
        pods: state.decisions.list(),
    })
}

async fn pod(
    State(state): State<WebState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    match state.decisions.get_json(&namespace, &name) {
        Some(body) => json_text(StatusCode::OK, body.to_string()),
        None => json_text(
            StatusCode::NOT_FOUND,
            serde_json::json!({
                "error": format!("no scheduling attempt of pod {namespace}/{name} is recorded")
            })
            .to_string(),
        ),
    }
}

/// A node as `/api/nodes` shows it.
#[derive(Serialize)]
struct NodeJson {
    name: String,
    allocatable: BTreeMap<String, i64>,
    requested: BTreeMap<String, i64>,
    pods: Vec<NodePodJson>,
}

#[derive(Serialize)]
struct NodePodJson {
    namespace: String,
    name: String,
    /// Placed by the scheduler, not bound yet.
    assumed: bool,
}

/// `cpu` (millicores), `memory`, `ephemeral-storage`, `pods` and each scalar resource; a
/// resource at zero is left out, except `cpu`, `memory` and `pods`.
fn resource_map(r: &Resource, pods: i64) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    m.insert("cpu".to_string(), r.milli_cpu);
    m.insert("memory".to_string(), r.memory);
    m.insert("pods".to_string(), pods);
    if r.ephemeral_storage != 0 {
        m.insert("ephemeral-storage".to_string(), r.ephemeral_storage);
    }
    for (name, v) in &r.scalar_resources {
        if *v != 0 {
            m.insert(name.clone(), *v);
        }
    }
    m
}

async fn nodes(State(state): State<WebState>) -> Response {
    json(&nodes_value(&state))
}

fn nodes_value(state: &WebState) -> Value {
    let nodes: Vec<NodeJson> = state
        .scheduler
        .node_usage()
        .into_iter()
        .map(|n| NodeJson {
            allocatable: resource_map(&n.allocatable, n.allocatable.allowed_pod_number),
            requested: resource_map(&n.requested, n.pods.len() as i64),
            pods: n
                .pods
                .into_iter()
                .map(|(key, assumed)| {
                    let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
                    NodePodJson {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        assumed,
                    }
                })
                .collect(),
            name: n.name,
        })
        .collect();
    serde_json::json!({ "nodes": nodes })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProfileJson {
    score_weights: BTreeMap<&'static str, i64>,
}

async fn profiles(State(state): State<WebState>) -> Response {
    json(&serde_json::json!({ "profiles": profiles_value(&state) }))
}

fn profiles_value(state: &WebState) -> Value {
    let mut out: BTreeMap<String, ProfileJson> = BTreeMap::new();
    for name in state.scheduler.profile_names() {
        if let Some(f) = state.scheduler.profile(&name) {
            out.insert(
                name,
                ProfileJson {
                    score_weights: f.score_weights().into_iter().collect(),
                },
            );
        }
    }
    serde_json::to_value(out).unwrap_or_default()
}

async fn events(
    State(state): State<WebState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.decisions.subscribe();
    let stop = state.stopping.subscribe();
    let stream = futures_util::stream::unfold((rx, stop), |(mut rx, mut stop)| async move {
        if *stop.borrow() {
            return None;
        }
        let event = tokio::select! {
            r = rx.recv() => match r {
                // Strings and integers always serialize.
                Ok(e) => Event::default()
                    .event("decision")
                    .data(serde_json::to_string(&e).unwrap_or_default()),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    Event::default().event("lagged").data(n.to_string())
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            _ = stop.wait_for(|s| *s) => return None,
        };
        Some((Ok(event), (rx, stop)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests;

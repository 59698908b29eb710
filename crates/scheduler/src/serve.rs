//! The scheduler's HTTP endpoints, as kube-scheduler serves them on `--bind-address`/`--port`
//! (default `127.0.0.1:10259`): `/healthz`, `/livez`, `/readyz` (and one path per check
//! below each), and `/metrics`; with a decision log, also the web view ([`crate::web`]).
//!
//! Upstream: cmd/kube-scheduler/app/server.go (which checks each endpoint runs) and
//! k8s.io/apiserver/pkg/server/healthz (the response format). Probes and tools written for
//! kube-scheduler read the same bodies here:
//! - all checks pass: `200 ok`, or with `?verbose` one `[+]name ok` line per check and
//!   `readyz check passed`;
//! - a check fails: `500` and always the verbose listing, the failed check as
//!   `[-]name failed: reason withheld`, ending `readyz check failed` (the reason is only
//!   shown on the check's own path, e.g. `/readyz/sched-handler-sync`);
//! - `?exclude=name` (repeatable) skips a check.
//!
//! Checks per endpoint, as upstream: `/livez` runs `ping`; `/healthz` runs `leaderElection`
//! with leader election and `ping` without; `/readyz` runs `leaderElection` (with leader
//! election), `shutdown` and `sched-handler-sync`.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::metrics::{PrometheusRecorder, CONTENT_TYPE};
use crate::web::WebState;

/// kube-scheduler's default `--port`.
pub const DEFAULT_PORT: u16 = 10259;

/// Names of the checks, as upstream names them (probes may `?exclude=` them by name).
pub mod check {
    pub const PING: &str = "ping";
    pub const LEADER_ELECTION: &str = "leaderElection";
    pub const SHUTDOWN: &str = "shutdown";
    pub const SCHED_HANDLER_SYNC: &str = "sched-handler-sync";
}

/// What the health endpoints report, flipped by the scheduler as it starts, leads and stops.
/// Cheap to read and write from any thread; share it as `Arc<Health>`.
#[derive(Debug)]
pub struct Health {
    leader_election: bool,
    leader_election_healthy: AtomicBool,
    handlers_synced: AtomicBool,
    shutting_down: AtomicBool,
}

impl Health {
    /// Not ready yet: the informers have not synced. `leader_election` adds the
    /// `leaderElection` check to `/healthz` and `/readyz`, as upstream does.
    pub fn new(leader_election: bool) -> Self {
        Health {
            leader_election,
            leader_election_healthy: AtomicBool::new(true),
            handlers_synced: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
        }
    }

    /// The informers' initial lists are in the cache and the event handlers have caught up:
    /// `sched-handler-sync` passes from now on.
    pub fn set_handlers_synced(&self) {
        self.handlers_synced.store(true, Ordering::Release);
    }

    /// Whether leader election is working: `false` when this replica leads but failed to
    /// renew its lease in time (upstream's leader-election watchdog). A replica that does not
    /// lead, or leads with a fresh lease, is healthy.
    pub fn set_leader_election_healthy(&self, healthy: bool) {
        self.leader_election_healthy
            .store(healthy, Ordering::Release);
    }

    /// The process is stopping: `shutdown` fails from now on, so load balancers and
    /// probes stop counting on this replica.
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// The checks `endpoint` runs, in upstream's order, each with its failure if any.
    fn checks(&self, endpoint: Endpoint) -> Vec<(&'static str, Result<(), &'static str>)> {
        let leader_election = || {
            let ok = self.leader_election_healthy.load(Ordering::Acquire);
            (
                check::LEADER_ELECTION,
                if ok {
                    Ok(())
                } else {
                    Err("failed to renew the leader election lease in time")
                },
            )
        };
        match endpoint {
            Endpoint::Livez => vec![(check::PING, Ok(()))],
            Endpoint::Healthz if self.leader_election => vec![leader_election()],
            Endpoint::Healthz => vec![(check::PING, Ok(()))],
            Endpoint::Readyz => {
                let mut checks = Vec::with_capacity(3);
                if self.leader_election {
                    checks.push(leader_election());
                }
                checks.push((
                    check::SHUTDOWN,
                    if self.shutting_down.load(Ordering::Acquire) {
                        Err("process is shutting down")
                    } else {
                        Ok(())
                    },
                ));
                checks.push((
                    check::SCHED_HANDLER_SYNC,
                    if self.handlers_synced.load(Ordering::Acquire) {
                        Ok(())
                    } else {
                        Err("handlers are not fully synchronized")
                    },
                ));
                checks
            }
        }
    }
}

/// What the endpoints read: health flags and the metrics recorder, and the decision log
/// when the web view is served.
#[derive(Debug, Clone)]
pub struct ServeState {
    pub health: Arc<Health>,
    pub metrics: Arc<PrometheusRecorder>,
    pub web: Option<WebState>,
}

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Healthz,
    Livez,
    Readyz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }
}

/// The endpoints as an axum router, for callers that serve it themselves (e.g. behind TLS).
pub fn router(state: ServeState) -> Router {
    let web = state.web.clone();
    let endpoints = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz/{check}", get(healthz_check))
        .route("/livez/{check}", get(livez_check))
        .route("/readyz/{check}", get(readyz_check))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(state);
    match web {
        Some(web) => endpoints.merge(crate::web::router(web)),
        None => endpoints,
    }
}

/// Serves [`router`] on `listener` until `shutdown` completes, then finishes the requests in
/// flight and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ServeState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let web = state.web.clone();
    let shutdown = async move {
        shutdown.await;
        // Event streams never end on their own.
        if let Some(web) = web {
            web.stop_streams();
        }
    };
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn healthz(State(state): State<ServeState>, RawQuery(query): RawQuery) -> Response {
    run_checks(&state.health, Endpoint::Healthz, query.as_deref())
}

async fn livez(State(state): State<ServeState>, RawQuery(query): RawQuery) -> Response {
    run_checks(&state.health, Endpoint::Livez, query.as_deref())
}

async fn readyz(State(state): State<ServeState>, RawQuery(query): RawQuery) -> Response {
    run_checks(&state.health, Endpoint::Readyz, query.as_deref())
}

async fn healthz_check(State(state): State<ServeState>, Path(name): Path<String>) -> Response {
    one_check(&state.health, Endpoint::Healthz, &name)
}

async fn livez_check(State(state): State<ServeState>, Path(name): Path<String>) -> Response {
    one_check(&state.health, Endpoint::Livez, &name)
}

async fn readyz_check(State(state): State<ServeState>, Path(name): Path<String>) -> Response {
    one_check(&state.health, Endpoint::Readyz, &name)
}

async fn metrics(State(state): State<ServeState>) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        state.metrics.encode(),
    )
        .into_response()
}

async fn not_found() -> Response {
    not_found_response()
}

/// A plain-text response with the headers upstream's healthz handlers set.
fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// The query parameters the aggregate endpoints read: `verbose` (present or not) and every
/// `exclude=NAME`.
fn parse_query(query: Option<&str>) -> (bool, Vec<&str>) {
    let mut verbose = false;
    let mut excluded = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "verbose" => verbose = true,
            "exclude" => excluded.push(value),
            _ => {}
        }
    }
    (verbose, excluded)
}

fn run_checks(health: &Health, endpoint: Endpoint, query: Option<&str>) -> Response {
    let (verbose, mut excluded) = parse_query(query);
    let mut listing = String::new();
    let mut failed = false;
    for (name, result) in health.checks(endpoint) {
        if let Some(i) = excluded.iter().position(|e| *e == name) {
            excluded.swap_remove(i);
            let _ = writeln!(listing, "[+]{name} excluded: ok");
            continue;
        }
        match result {
            Ok(()) => {
                let _ = writeln!(listing, "[+]{name} ok");
            }
            Err(_) => {
                // As upstream: the reason is not shown on this public, aggregate endpoint.
                failed = true;
                let _ = writeln!(listing, "[-]{name} failed: reason withheld");
            }
        }
    }
    if !excluded.is_empty() {
        excluded.sort_unstable();
        excluded.dedup();
        let names: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        let _ = writeln!(
            listing,
            "warn: some health checks cannot be excluded: no matches for {}",
            names.join(",")
        );
    }
    let endpoint = endpoint.name();
    if failed {
        let _ = writeln!(listing, "{endpoint} check failed");
        return text(StatusCode::INTERNAL_SERVER_ERROR, listing);
    }
    if !verbose {
        return text(StatusCode::OK, "ok".to_string());
    }
    let _ = writeln!(listing, "{endpoint} check passed");
    text(StatusCode::OK, listing)
}

fn one_check(health: &Health, endpoint: Endpoint, name: &str) -> Response {
    match health
        .checks(endpoint)
        .into_iter()
        .find(|(n, _)| *n == name)
    {
        None => not_found_response(),
        Some((_, Ok(()))) => text(StatusCode::OK, "ok".to_string()),
        Some((_, Err(reason))) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

fn not_found_response() -> Response {
    text(StatusCode::NOT_FOUND, "404 page not found\n".to_string())
}

#[cfg(test)]
mod tests;

// The manifests in deploy/ run these endpoints; checked here so one test filter covers both.
#[cfg(test)]
mod deploy_tests;

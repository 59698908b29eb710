//! Running a scenario's steps against a cluster through its API, as any client would: each
//! step's outcome is what the API shows after it, and the first step that fails stops the
//! scenario (the steps after it are reported as skipped).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope};

use super::format::{Action, Condition, Object, ObjectRef, PatchType, Scenario};

/// The field manager of the scenario runner's server-side applies.
const FIELD_MANAGER: &str = "kubesched-scenario";

/// How often a `wait` step looks at the cluster again.
const POLL: Duration = Duration::from_millis(100);

/// Where a scenario runs: a client, the namespace its namespaced objects go to, and the
/// server's resources.
pub struct Target {
    pub client: kube::Client,
    pub namespace: String,
    /// Put every namespaced object in `namespace`, whatever its file says (a scenario run
    /// on a shared cluster stays in its own namespace).
    pub force_namespace: bool,
    pub discovery: Discovery,
    /// Cluster-scoped objects the scenario applied, to delete when it ends on a shared
    /// cluster.
    pub cluster_scoped: Vec<(ApiResource, String)>,
}

/// What became of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// 1-based, as people count steps; the `cluster` setup counts as a step.
    pub index: usize,
    pub name: Option<String>,
    pub kind: &'static str,
    pub result: StepResult,
    /// What the step did or saw; for a failed step, what was expected and what happened.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepResult {
    Passed,
    Failed,
    Skipped,
}

impl StepResult {
    pub fn as_str(self) -> &'static str {
        match self {
            StepResult::Passed => "passed",
            StepResult::Failed => "failed",
            StepResult::Skipped => "skipped",
        }
    }
}

/// Runs every step in order until one fails.
pub async fn run(target: &mut Target, scenario: &Scenario) -> Vec<StepOutcome> {
    let mut out = Vec::new();
    let mut failed = false;
    for (i, step) in scenario.steps.iter().enumerate() {
        let (result, detail) = if failed {
            (StepResult::Skipped, String::new())
        } else {
            match run_step(target, &step.action).await {
                Ok(d) => (StepResult::Passed, d),
                Err(d) => {
                    failed = true;
                    (StepResult::Failed, d)
                }
            }
        };
        out.push(StepOutcome {
            index: i + 1,
            name: step.name.clone(),
            kind: step.action.kind(),
            result,
            detail,
        });
    }
    out
}

/// Ok: what the step did or saw. Err: what was expected and what happened.
async fn run_step(target: &mut Target, action: &Action) -> Result<String, String> {
    match action {
        Action::Apply(objects) => apply(target, objects).await,
        Action::Patch(p) => {
            let (api, what) = api_for(target, &p.target)?;
            match p.patch_type {
                PatchType::Merge => api
                    .patch(
                        &p.target.name,
                        &PatchParams::default(),
                        &Patch::Merge(&p.patch),
                    )
                    .await
                    .map(drop),
                PatchType::Strategic => api
                    .patch(
                        &p.target.name,
                        &PatchParams::default(),
                        &Patch::Strategic(&p.patch),
                    )
                    .await
                    .map(drop),
                PatchType::Json => json_patch(&api, &p.target.name, &p.patch).await,
            }
            .map_err(|e| format!("patching {what}: {}", api_error(e)))?;
            Ok(format!("patched {what}"))
        }
        Action::Delete(r) => {
            let (api, what) = api_for(target, r)?;
            api.delete(&r.name, &DeleteParams::default())
                .await
                .map_err(|e| format!("deleting {what}: {}", api_error(e)))?;
            Ok(format!("deleted {what}"))
        }
        Action::Scale {
            target: r,
            replicas,
        } => {
            let (api, what) = api_for(target, r)?;
            let body = serde_json::json!({ "spec": { "replicas": replicas } });
            api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map_err(|e| format!("scaling {what}: {}", api_error(e)))?;
            Ok(format!("scaled {what} to {replicas} replicas"))
        }
        Action::Wait { until, timeout } => {
            let start = Instant::now();
            loop {
                let (ok, seen) = observe(target, until).await;
                if ok {
                    return Ok(seen);
                }
                if start.elapsed() >= *timeout {
                    return Err(format!(
                        "expected {until} within {}; {seen}",
                        show_duration(*timeout)
                    ));
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Action::Expect(conditions) => {
            let mut seen = Vec::new();
            let mut unmet = Vec::new();
            for c in conditions {
                let (ok, what) = observe(target, c).await;
                if ok {
                    seen.push(what);
                } else {
                    unmet.push(format!("expected {c}; {what}"));
                }
            }
            if unmet.is_empty() {
                Ok(seen.join("; "))
            } else {
                Err(unmet.join("; "))
            }
        }
        Action::Sleep(d) => {
            tokio::time::sleep(*d).await;
            Ok(format!("slept {}", show_duration(*d)))
        }
    }
}

/// `1.5s`, `200ms`: how a duration reads in the report.
pub fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else if ms > 1000 {
        format!("{}s", d.as_secs_f64())
    } else {
        format!("{ms}ms")
    }
}

/// The API's message of a failed request.
fn api_error(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    }
}

/// Creation order: what others live in first.
fn rank(o: &Object) -> u8 {
    match o.value.get("kind").and_then(|k| k.as_str()) {
        Some("Namespace") => 0,
        Some("PriorityClass") => 1,
        Some("Node") => 2,
        _ => 3,
    }
}

async fn apply(target: &mut Target, objects: &[Object]) -> Result<String, String> {
    let mut sorted: Vec<&Object> = objects.iter().collect();
    sorted.sort_by_key(|o| rank(o));
    let mut done = Vec::new();
    for o in sorted {
        let s = |p: &str| {
            o.value
                .pointer(p)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let (api_version, kind, name) = (s("/apiVersion"), s("/kind"), s("/metadata/name"));
        let (ar, scope) = resolve(&target.discovery, Some(&api_version), &kind)?;
        let mut value = o.value.clone();
        let (api, what): (Api<DynamicObject>, String) = match scope {
            Scope::Cluster => (
                Api::all_with(target.client.clone(), &ar),
                format!("{kind} {name}"),
            ),
            Scope::Namespaced => {
                let written = s("/metadata/namespace");
                let ns = if target.force_namespace || written.is_empty() {
                    target.namespace.clone()
                } else {
                    written
                };
                if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    meta.insert("namespace".into(), ns.clone().into());
                }
                (
                    Api::namespaced_with(target.client.clone(), &ns, &ar),
                    format!("{kind} {ns}/{name}"),
                )
            }
        };
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&value),
        )
        .await
        .map_err(|e| format!("applying {what}: {}", api_error(e)))?;
        if scope == Scope::Cluster {
            target.cluster_scoped.push((ar, name));
        }
        done.push(what);
    }
    Ok(format!("applied {}", done.join(", ")))
}

/// A JSON patch (RFC 6902), applied to the object as read and written back with its
/// resourceVersion, so a concurrent change fails the step instead of being overwritten.
async fn json_patch(
    api: &Api<DynamicObject>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(kube::Error::SerdeError)?;
    let current = api.get(name).await?;
    let mut doc = serde_json::to_value(&current).map_err(kube::Error::SerdeError)?;
    json_patch::patch(&mut doc, &ops).map_err(|e| {
        kube::Error::Api(
            kube::core::Status::failure(&e.to_string(), "Invalid")
                .with_code(422)
                .boxed(),
        )
    })?;
    let updated: DynamicObject = serde_json::from_value(doc).map_err(kube::Error::SerdeError)?;
    api.replace(name, &PostParams::default(), &updated)
        .await
        .map(drop)
}

/// The API of an object a step names, and how to name it in the report.
fn api_for(target: &Target, r: &ObjectRef) -> Result<(Api<DynamicObject>, String), String> {
    let (ar, scope) = resolve(&target.discovery, r.api_version.as_deref(), &r.kind)?;
    Ok(match scope {
        Scope::Cluster => (
            Api::all_with(target.client.clone(), &ar),
            format!("{} {}", r.kind, r.name),
        ),
        Scope::Namespaced => (
            Api::namespaced_with(target.client.clone(), &target.namespace, &ar),
            format!("{} {}/{}", r.kind, target.namespace, r.name),
        ),
    })
}

/// The resource serving `kind` (in `api_version` when given; else the core group's, then
/// the first group's that serves it).
fn resolve(
    discovery: &Discovery,
    api_version: Option<&str>,
    kind: &str,
) -> Result<(ApiResource, Scope), String> {
    if let Some(v) = api_version.filter(|v| !v.is_empty()) {
        let (group, version) = v.split_once('/').unwrap_or(("", v));
        return discovery
            .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
            .map(|(ar, caps)| (ar, caps.scope))
            .ok_or_else(|| format!("the server does not serve kind {kind} in {v}"));
    }
    let mut found = discovery.groups().flat_map(|g| {
        g.recommended_resources()
            .into_iter()
            .filter(|(ar, _)| ar.kind == kind)
    });
    found
        .next()
        .map(|(ar, caps)| (ar, caps.scope))
        .ok_or_else(|| format!("the server does not serve kind {kind}"))
}

/// Whether `c` holds now, and what the cluster shows about it (said the same way whether it
/// holds or not, so a failure reads "expected X; Y").
async fn observe(target: &Target, c: &Condition) -> (bool, String) {
    let pods: Api<Pod> = Api::namespaced(target.client.clone(), &target.namespace);
    match c {
        Condition::PodBound { pod, nodes } => match pods.get_opt(pod).await {
            Err(e) => (false, format!("reading pod {pod}: {}", api_error(e))),
            Ok(None) => (false, format!("pod {pod} does not exist")),
            Ok(Some(p)) => match bound_node(&p) {
                Some(node) => (
                    nodes.is_empty() || nodes.iter().any(|n| n == node),
                    format!("pod {pod} is bound to {node}"),
                ),
                None => (false, pending_state(pod, &p)),
            },
        },
        Condition::PodPending { pod, message } => match pods.get_opt(pod).await {
            Err(e) => (false, format!("reading pod {pod}: {}", api_error(e))),
            Ok(None) => (false, format!("pod {pod} does not exist")),
            Ok(Some(p)) => match bound_node(&p) {
                Some(node) => (false, format!("pod {pod} is bound to {node}")),
                None => {
                    let ok = match (message, pod_scheduled(&p)) {
                        (None, _) => true,
                        (Some(m), Some(("False", _, msg))) => m.matches(msg),
                        (Some(_), _) => false,
                    };
                    (ok, pending_state(pod, &p))
                }
            },
        },
        Condition::PodDeleted { pod } => match pods.get_opt(pod).await {
            Err(e) => (false, format!("reading pod {pod}: {}", api_error(e))),
            Ok(None) => (true, format!("pod {pod} is deleted")),
            Ok(Some(p)) if p.metadata.deletion_timestamp.is_some() => {
                (true, format!("pod {pod} is being deleted"))
            }
            Ok(Some(p)) => match bound_node(&p) {
                Some(node) => (false, format!("pod {pod} still exists, bound to {node}")),
                None => (false, format!("pod {pod} still exists, pending")),
            },
        },
        Condition::Event {
            reason,
            object,
            message,
        } => {
            let events: Api<Event> = Api::namespaced(target.client.clone(), &target.namespace);
            let list = match events.list(&ListParams::default()).await {
                Ok(l) => l.items,
                Err(e) => return (false, format!("listing events: {}", api_error(e))),
            };
            let about = |e: &Event| {
                object
                    .as_deref()
                    .is_none_or(|o| e.involved_object.name.as_deref() == Some(o))
            };
            let relevant: Vec<&Event> = list
                .iter()
                .filter(|e| about(e) && e.reason.as_deref() == Some(reason.as_str()))
                .collect();
            let hit = relevant.iter().find(|e| {
                message
                    .as_ref()
                    .is_none_or(|m| m.matches(e.message.as_deref().unwrap_or_default()))
            });
            let of = object
                .as_deref()
                .map(|o| format!(" about {o}"))
                .unwrap_or_default();
            match (hit, relevant.last()) {
                (Some(e), _) => (
                    true,
                    format!(
                        "event {reason}{of}: {}",
                        e.message.as_deref().unwrap_or_default()
                    ),
                ),
                (None, Some(e)) => (
                    false,
                    format!(
                        "the last event {reason}{of} says: {}",
                        e.message.as_deref().unwrap_or_default()
                    ),
                ),
                (None, None) => {
                    let mut seen: BTreeSet<String> = BTreeSet::new();
                    for e in list.iter().filter(|e| about(e)) {
                        seen.insert(e.reason.clone().unwrap_or_default());
                    }
                    let seen: Vec<String> = seen.into_iter().collect();
                    (
                        false,
                        if seen.is_empty() {
                            format!("no event{of}")
                        } else {
                            format!("no event {reason}{of} (seen: {})", seen.join(", "))
                        },
                    )
                }
            }
        }
    }
}

fn bound_node(p: &Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The PodScheduled condition: (status, reason, message).
fn pod_scheduled(p: &Pod) -> Option<(&str, &str, &str)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| {
            (
                c.status.as_str(),
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default(),
            )
        })
}

/// How an unbound pod reads: pending with its PodScheduled reason and message, or not
/// tried yet.
fn pending_state(name: &str, p: &Pod) -> String {
    match pod_scheduled(p) {
        Some(("False", reason, msg)) => format!("pod {name} is pending ({reason}): {msg}"),
        _ => format!("pod {name} is pending, not scheduled yet"),
    }
}

/// The names of the pods in the scenario's namespace, sorted.
pub async fn pod_names(target: &Target) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(target.client.clone(), &target.namespace);
    let mut names: Vec<String> = match pods.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

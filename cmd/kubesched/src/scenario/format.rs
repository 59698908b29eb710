//! The scenario file: its YAML shape, and the checks that turn it into a [`Scenario`] or a
//! [`InvalidScenario`] naming the file, the field path and what was expected.
//!
//! A file is read whole and checked before anything runs, so a typo in the last step never
//! leaves a half-run scenario behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The `kind` every scenario file has.
pub const KIND: &str = "Scenario";

/// The optional `apiVersion` of a scenario file.
pub const API_VERSION: &str = "kubesched.dev/v1alpha1";

/// How long a `wait` step waits when it gives no `timeout`.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// A scenario file that cannot be run: nothing of any scenario was run.
#[derive(Debug, thiserror::Error)]
#[error("{}: {path}: {message}", file.display())]
pub struct InvalidScenario {
    pub file: PathBuf,
    /// Where in the file, e.g. `steps[2].wait.timeout`; `(file)` for the file as a whole.
    pub path: String,
    /// What was expected.
    pub message: String,
}

/// A checked scenario, ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: PathBuf,
    pub name: String,
    pub description: String,
    /// The KubeSchedulerConfiguration as YAML text, with where it came from; `None` for the
    /// default profile.
    pub scheduler_config: Option<(String, String)>,
    pub steps: Vec<Step>,
}

/// One step: an optional name, and what it does.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: Option<String>,
    pub action: Action,
}

#[derive(Debug, Clone)]
pub enum Action {
    /// Create or update objects (server-side apply), in order: namespaces and priority
    /// classes first, then nodes, then the rest.
    Apply(Vec<Object>),
    Patch(Patch),
    Delete(ObjectRef),
    Scale {
        target: ObjectRef,
        replicas: i64,
    },
    Wait {
        until: Condition,
        timeout: Duration,
    },
    Expect(Vec<Condition>),
    Sleep(Duration),
}

impl Action {
    /// The step type as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Apply(_) => "apply",
            Action::Patch(_) => "patch",
            Action::Delete(_) => "delete",
            Action::Scale { .. } => "scale",
            Action::Wait { .. } => "wait",
            Action::Expect(_) => "expect",
            Action::Sleep(_) => "sleep",
        }
    }
}

/// An object to apply, as written (inline or in a file), with apiVersion, kind and name.
#[derive(Debug, Clone)]
pub struct Object {
    pub value: serde_json::Value,
}

/// An object named by kind and name (`apiVersion` when the kind is served by several
/// groups).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRef {
    pub api_version: Option<String>,
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct Patch {
    pub target: ObjectRef,
    pub patch_type: PatchType,
    pub patch: serde_json::Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
}

/// Something that is true of the cluster or not.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// The pod is bound: to any node, or to one of `nodes`.
    PodBound { pod: String, nodes: Vec<String> },
    /// The pod exists and is not bound; with `message`, its PodScheduled condition is False
    /// with exactly that message (or, with `Contains`, one holding it).
    PodPending {
        pod: String,
        message: Option<MessageMatch>,
    },
    /// The pod no longer exists, or is being deleted.
    PodDeleted { pod: String },
    /// An Event with this reason was recorded about the object (`involvedObject.name`).
    Event {
        reason: String,
        object: Option<String>,
        message: Option<MessageMatch>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum MessageMatch {
    Exactly(String),
    Contains(String),
}

impl MessageMatch {
    pub fn matches(&self, text: &str) -> bool {
        match self {
            MessageMatch::Exactly(m) => text == m,
            MessageMatch::Contains(m) => text.contains(m.as_str()),
        }
    }
}

impl std::fmt::Display for MessageMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageMatch::Exactly(m) => write!(f, "message {m:?}"),
            MessageMatch::Contains(m) => write!(f, "a message containing {m:?}"),
        }
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Condition::PodBound { pod, nodes } => match nodes.as_slice() {
                [] => write!(f, "pod {pod} bound"),
                [one] => write!(f, "pod {pod} bound to {one}"),
                many => write!(f, "pod {pod} bound to one of {}", many.join(", ")),
            },
            Condition::PodPending { pod, message } => match message {
                None => write!(f, "pod {pod} pending"),
                Some(m) => write!(f, "pod {pod} pending with {m}"),
            },
            Condition::PodDeleted { pod } => write!(f, "pod {pod} deleted"),
            Condition::Event {
                reason,
                object,
                message,
            } => {
                write!(f, "event {reason}")?;
                if let Some(o) = object {
                    write!(f, " about {o}")?;
                }
                if let Some(m) = message {
                    write!(f, " with {m}")?;
                }
                Ok(())
            }
        }
    }
}

// The file as written. Every struct refuses unknown fields, so a misspelt key is an error
// naming it rather than a step that silently does less.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileJson {
    #[serde(default)]
    api_version: Option<String>,
    kind: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    scheduler_config: Option<serde_json::Value>,
    #[serde(default)]
    cluster: Option<ApplyJson>,
    steps: Vec<StepJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StepJson {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    apply: Option<ApplyJson>,
    #[serde(default)]
    patch: Option<PatchJson>,
    #[serde(default)]
    delete: Option<RefJson>,
    #[serde(default)]
    scale: Option<ScaleJson>,
    #[serde(default)]
    wait: Option<WaitJson>,
    #[serde(default)]
    expect: Option<ExpectJson>,
    #[serde(default)]
    sleep: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApplyJson {
    #[serde(default)]
    objects: Vec<serde_json::Value>,
    #[serde(default)]
    files: Vec<PathBuf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RefJson {
    #[serde(default)]
    api_version: Option<String>,
    kind: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PatchJson {
    #[serde(default)]
    api_version: Option<String>,
    kind: String,
    name: String,
    #[serde(default, rename = "type")]
    patch_type: Option<PatchType>,
    patch: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScaleJson {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    name: String,
    replicas: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WaitJson {
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    pod_bound: Option<PodBoundJson>,
    #[serde(default)]
    pod_pending: Option<PodPendingJson>,
    #[serde(default)]
    pod_deleted: Option<String>,
    #[serde(default)]
    event: Option<EventJson>,
}

/// `podBound: web` or `podBound: {pod: web, node: n1}` / `{pod: web, nodes: [n1, n2]}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum PodBoundJson {
    Name(String),
    Full(PodBoundFullJson),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodBoundFullJson {
    pod: String,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    nodes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodPendingJson {
    pod: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_contains: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventJson {
    reason: String,
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_contains: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpectJson {
    /// pod → node, or pod → [nodes] (any of them).
    #[serde(default)]
    placements: std::collections::BTreeMap<String, NodesJson>,
    #[serde(default)]
    pending: Vec<PodPendingJson>,
    #[serde(default)]
    deleted: Vec<String>,
    #[serde(default)]
    events: Vec<EventJson>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NodesJson {
    One(String),
    Any(Vec<String>),
}

/// Reads and checks one scenario file.
pub fn load(file: &Path) -> Result<Scenario, InvalidScenario> {
    let whole = |message: String| InvalidScenario {
        file: file.to_path_buf(),
        path: "(file)".to_string(),
        message,
    };
    let text = std::fs::read_to_string(file).map_err(|e| whole(format!("cannot read: {e}")))?;
    parse(&text, file)
}

/// Checks a scenario given as text; `file` names it in errors and anchors relative paths.
pub fn parse(text: &str, file: &Path) -> Result<Scenario, InvalidScenario> {
    let err = |path: &str, message: String| InvalidScenario {
        file: file.to_path_buf(),
        path: path.to_string(),
        message,
    };
    let docs = scheduler::simulate::input::parse_documents(text).map_err(|m| err("(file)", m))?;
    let mut docs = docs.into_iter().filter(|d| !d.is_null());
    let (Some(doc), None) = (docs.next(), docs.next()) else {
        return Err(err(
            "(file)",
            "expected exactly one YAML document (one scenario per file)".into(),
        ));
    };
    let raw: FileJson = serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        err(
            if path == "." { "(file)" } else { &path },
            e.into_inner().to_string(),
        )
    })?;
    if raw.kind != KIND {
        return Err(err(
            "kind",
            format!("expected {KIND:?}, got {:?}", raw.kind),
        ));
    }
    if let Some(v) = raw.api_version.as_deref() {
        if v != API_VERSION {
            return Err(err(
                "apiVersion",
                format!("expected {API_VERSION:?}, got {v:?}"),
            ));
        }
    }
    if raw.name.is_empty() {
        return Err(err("name", "expected a non-empty name".into()));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let scheduler_config = match raw.scheduler_config {
        None => None,
        Some(serde_json::Value::String(p)) => {
            let path = dir.join(&p);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                err(
                    "schedulerConfig",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            Some((text, path.display().to_string()))
        }
        Some(v @ serde_json::Value::Object(_)) => Some((
            // JSON is YAML: the configuration loader reads it as written.
            v.to_string(),
            format!("{}: schedulerConfig", file.display()),
        )),
        Some(_) => {
            return Err(err(
                "schedulerConfig",
                "expected a KubeSchedulerConfiguration object or the path of its file".into(),
            ))
        }
    };
    let mut steps = Vec::new();
    if let Some(cluster) = raw.cluster {
        steps.push(Step {
            name: Some("cluster".into()),
            action: Action::Apply(apply_objects(cluster, dir, "cluster", &err)?),
        });
    }
    if raw.steps.is_empty() {
        return Err(err("steps", "expected at least one step".into()));
    }
    for (i, s) in raw.steps.into_iter().enumerate() {
        let at = format!("steps[{i}]");
        let name = s.name.clone();
        let action = step_action(s, dir, &at, &err)?;
        steps.push(Step { name, action });
    }
    Ok(Scenario {
        file: file.to_path_buf(),
        name: raw.name,
        description: raw.description.trim_end().to_string(),
        scheduler_config,
        steps,
    })
}

type ErrFn<'a> = dyn Fn(&str, String) -> InvalidScenario + 'a;

fn step_action(s: StepJson, dir: &Path, at: &str, err: &ErrFn) -> Result<Action, InvalidScenario> {
    let given: Vec<&str> = [
        ("apply", s.apply.is_some()),
        ("patch", s.patch.is_some()),
        ("delete", s.delete.is_some()),
        ("scale", s.scale.is_some()),
        ("wait", s.wait.is_some()),
        ("expect", s.expect.is_some()),
        ("sleep", s.sleep.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, set)| set.then_some(k))
    .collect();
    if given.len() != 1 {
        return Err(err(
            at,
            format!(
                "expected exactly one of apply, patch, delete, scale, wait, expect, sleep; got {}",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(", ")
                }
            ),
        ));
    }
    if let Some(a) = s.apply {
        return Ok(Action::Apply(apply_objects(
            a,
            dir,
            &format!("{at}.apply"),
            err,
        )?));
    }
    if let Some(p) = s.patch {
        let target = object_ref(p.api_version, p.kind, p.name, &format!("{at}.patch"), err)?;
        let patch_type = p.patch_type.unwrap_or(PatchType::Merge);
        let ok = match patch_type {
            PatchType::Json => p.patch.is_array(),
            _ => p.patch.is_object(),
        };
        if !ok {
            return Err(err(
                &format!("{at}.patch.patch"),
                match patch_type {
                    PatchType::Json => "expected a list of JSON patch operations".into(),
                    _ => "expected an object".into(),
                },
            ));
        }
        return Ok(Action::Patch(Patch {
            target,
            patch_type,
            patch: p.patch,
        }));
    }
    if let Some(d) = s.delete {
        return Ok(Action::Delete(object_ref(
            d.api_version,
            d.kind,
            d.name,
            &format!("{at}.delete"),
            err,
        )?));
    }
    if let Some(sc) = s.scale {
        let kind = sc.kind.unwrap_or_else(|| "Deployment".to_string());
        if !matches!(
            kind.as_str(),
            "Deployment" | "ReplicaSet" | "StatefulSet" | "ReplicationController"
        ) {
            return Err(err(
                &format!("{at}.scale.kind"),
                format!(
                    "expected Deployment, ReplicaSet, StatefulSet or ReplicationController, got {kind:?}"
                ),
            ));
        }
        if sc.replicas < 0 {
            return Err(err(
                &format!("{at}.scale.replicas"),
                format!("expected a number of replicas >= 0, got {}", sc.replicas),
            ));
        }
        let target = object_ref(sc.api_version, kind, sc.name, &format!("{at}.scale"), err)?;
        return Ok(Action::Scale {
            target,
            replicas: sc.replicas,
        });
    }
    if let Some(w) = s.wait {
        let timeout = match &w.timeout {
            None => DEFAULT_WAIT_TIMEOUT,
            Some(t) => duration(t, &format!("{at}.wait.timeout"), err)?,
        };
        let mut conditions = conditions(w, &format!("{at}.wait"), err)?;
        if conditions.len() != 1 {
            return Err(err(
                &format!("{at}.wait"),
                "expected exactly one of podBound, podPending, podDeleted, event".into(),
            ));
        }
        let until = conditions.remove(0);
        return Ok(Action::Wait { until, timeout });
    }
    if let Some(e) = s.expect {
        let at = format!("{at}.expect");
        let mut out = Vec::new();
        for (pod, nodes) in e.placements {
            let nodes = match nodes {
                NodesJson::One(n) => vec![n],
                NodesJson::Any(n) if !n.is_empty() => n,
                NodesJson::Any(_) => {
                    return Err(err(
                        &format!("{at}.placements.{pod}"),
                        "expected a node name or a non-empty list of node names".into(),
                    ))
                }
            };
            out.push(Condition::PodBound { pod, nodes });
        }
        for (i, p) in e.pending.into_iter().enumerate() {
            out.push(pending(p, &format!("{at}.pending[{i}]"), err)?);
        }
        for pod in e.deleted {
            out.push(Condition::PodDeleted { pod });
        }
        for (i, ev) in e.events.into_iter().enumerate() {
            out.push(event(ev, &format!("{at}.events[{i}]"), err)?);
        }
        if out.is_empty() {
            return Err(err(
                &at,
                "expected at least one of placements, pending, deleted, events".into(),
            ));
        }
        return Ok(Action::Expect(out));
    }
    let sleep = s.sleep.unwrap_or_default();
    Ok(Action::Sleep(duration(
        &sleep,
        &format!("{at}.sleep"),
        err,
    )?))
}

fn conditions(c: WaitJson, at: &str, err: &ErrFn) -> Result<Vec<Condition>, InvalidScenario> {
    let mut out = Vec::new();
    if let Some(b) = c.pod_bound {
        out.push(match b {
            PodBoundJson::Name(pod) => Condition::PodBound {
                pod,
                nodes: Vec::new(),
            },
            PodBoundJson::Full(f) => {
                let mut nodes = f.nodes;
                nodes.extend(f.node);
                Condition::PodBound { pod: f.pod, nodes }
            }
        });
    }
    if let Some(p) = c.pod_pending {
        out.push(pending(p, &format!("{at}.podPending"), err)?);
    }
    if let Some(pod) = c.pod_deleted {
        out.push(Condition::PodDeleted { pod });
    }
    if let Some(e) = c.event {
        out.push(event(e, &format!("{at}.event"), err)?);
    }
    Ok(out)
}

fn message(
    exactly: Option<String>,
    contains: Option<String>,
    at: &str,
    err: &ErrFn,
) -> Result<Option<MessageMatch>, InvalidScenario> {
    match (exactly, contains) {
        (Some(_), Some(_)) => Err(err(
            at,
            "expected message or messageContains, not both".into(),
        )),
        (Some(m), None) => Ok(Some(MessageMatch::Exactly(m))),
        (None, Some(m)) => Ok(Some(MessageMatch::Contains(m))),
        (None, None) => Ok(None),
    }
}

fn pending(p: PodPendingJson, at: &str, err: &ErrFn) -> Result<Condition, InvalidScenario> {
    Ok(Condition::PodPending {
        message: message(p.message, p.message_contains, at, err)?,
        pod: p.pod,
    })
}

fn event(e: EventJson, at: &str, err: &ErrFn) -> Result<Condition, InvalidScenario> {
    Ok(Condition::Event {
        message: message(e.message, e.message_contains, at, err)?,
        reason: e.reason,
        object: e.object,
    })
}

fn object_ref(
    api_version: Option<String>,
    kind: String,
    name: String,
    at: &str,
    err: &ErrFn,
) -> Result<ObjectRef, InvalidScenario> {
    if kind.is_empty() {
        return Err(err(&format!("{at}.kind"), "expected a kind".into()));
    }
    if name.is_empty() {
        return Err(err(&format!("{at}.name"), "expected a name".into()));
    }
    Ok(ObjectRef {
        api_version,
        kind,
        name,
    })
}

fn duration(text: &str, at: &str, err: &ErrFn) -> Result<Duration, InvalidScenario> {
    scheduler::config::parse_go_duration(text)
        .map_err(|m| err(at, format!("expected a duration such as 500ms or 10s: {m}")))
}

/// The objects of an `apply` (or `cluster`): inline ones, then those of each file (relative
/// to the scenario's directory); lists are expanded.
fn apply_objects(
    a: ApplyJson,
    dir: &Path,
    at: &str,
    err: &ErrFn,
) -> Result<Vec<Object>, InvalidScenario> {
    if a.objects.is_empty() && a.files.is_empty() {
        return Err(err(at, "expected objects or files".into()));
    }
    let mut out = Vec::new();
    for (i, v) in a.objects.into_iter().enumerate() {
        expand(v, &format!("{at}.objects[{i}]"), &mut out, err)?;
    }
    for (i, f) in a.files.iter().enumerate() {
        let fat = format!("{at}.files[{i}]");
        let path = dir.join(f);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| err(&fat, format!("cannot read {}: {e}", path.display())))?;
        let docs = scheduler::simulate::input::parse_documents(&text)
            .map_err(|m| err(&fat, format!("{}: {m}", path.display())))?;
        for v in docs.into_iter().filter(|d| !d.is_null()) {
            expand(v, &fat, &mut out, err)?;
        }
    }
    Ok(out)
}

fn expand(
    v: serde_json::Value,
    at: &str,
    out: &mut Vec<Object>,
    err: &ErrFn,
) -> Result<(), InvalidScenario> {
    let str_at = |p: &str| v.pointer(p).and_then(|x| x.as_str()).unwrap_or_default();
    let kind = str_at("/kind");
    if kind.is_empty() {
        return Err(err(
            at,
            "expected an object with apiVersion and kind".into(),
        ));
    }
    if kind.ends_with("List") {
        if let Some(items) = v.get("items").and_then(|i| i.as_array()) {
            for item in items {
                expand(item.clone(), at, out, err)?;
            }
            return Ok(());
        }
    }
    if str_at("/apiVersion").is_empty() {
        return Err(err(at, format!("{kind}: expected apiVersion")));
    }
    if str_at("/metadata/name").is_empty() {
        return Err(err(at, format!("{kind}: expected metadata.name")));
    }
    out.push(Object { value: v });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Vec<(Option<String>, String)>, String> {
        parse(text, Path::new("s.yaml"))
            .map(|s| {
                s.steps
                    .iter()
                    .map(|st| (st.name.clone(), st.action.kind().to_string()))
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    const HEAD: &str = "kind: Scenario\nname: t\n";

    #[rstest::rstest]
    #[case::every_step_type_is_read(
        "steps:\n\
         - apply: {objects: [{apiVersion: v1, kind: Node, metadata: {name: n1}}]}\n\
         - patch: {kind: Node, name: n1, patch: {spec: {unschedulable: true}}}\n\
         - delete: {kind: Node, name: n1}\n\
         - scale: {name: web, replicas: 3}\n\
         - name: bound\n  wait: {podBound: web, timeout: 2s}\n\
         - expect: {placements: {web: n1}}\n\
         - sleep: 100ms\n",
        Ok(vec![
            (None, "apply".into()), (None, "patch".into()), (None, "delete".into()),
            (None, "scale".into()), (Some("bound".into()), "wait".into()),
            (None, "expect".into()), (None, "sleep".into()),
        ])
    )]
    #[case::a_step_with_two_types_is_refused(
        "steps:\n- sleep: 1s\n  wait: {podBound: web}\n",
        Err("s.yaml: steps[0]: expected exactly one of apply, patch, delete, scale, wait, expect, sleep; got wait, sleep".into())
    )]
    #[case::an_unknown_field_is_named(
        "steps:\n- wait: {podBound: web, timout: 2s}\n",
        Err("s.yaml: steps[0].wait.timout: unknown field `timout`, expected one of `timeout`, `podBound`, `podPending`, `podDeleted`, `event`".into())
    )]
    #[case::a_bad_duration_is_named(
        "steps:\n- sleep: soon\n",
        Err("s.yaml: steps[0].sleep: expected a duration such as 500ms or 10s: invalid duration \"soon\"".into())
    )]
    #[case::a_wait_without_condition_is_refused(
        "steps:\n- wait: {timeout: 1s}\n",
        Err("s.yaml: steps[0].wait: expected exactly one of podBound, podPending, podDeleted, event".into())
    )]
    #[case::message_and_message_contains_together_are_refused(
        "steps:\n- expect: {pending: [{pod: a, message: x, messageContains: y}]}\n",
        Err("s.yaml: steps[0].expect.pending[0]: expected message or messageContains, not both".into())
    )]
    #[case::an_object_without_name_is_refused(
        "steps:\n- apply: {objects: [{apiVersion: v1, kind: Pod}]}\n",
        Err("s.yaml: steps[0].apply.objects[0]: Pod: expected metadata.name".into())
    )]
    fn scenario_files_are_checked(
        #[case] steps: &str,
        #[case] want: Result<Vec<(Option<String>, String)>, String>,
    ) {
        assert_eq!(check(&format!("{HEAD}{steps}")), want);
    }

    #[test]
    fn wrong_kind_is_refused() {
        assert_eq!(
            check("kind: Pod\nname: t\nsteps: []\n"),
            Err("s.yaml: kind: expected \"Scenario\", got \"Pod\"".to_string())
        );
    }
}

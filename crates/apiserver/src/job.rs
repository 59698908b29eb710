//! batch/v1 Jobs: what the API server does to a Job on the way in (defaults, the generated
//! selector, validation) and the Job controller stand-in, which runs its pods to completion
//! as kube-controller-manager's does. The controller is on with the other workload
//! controllers.
//!
//! On create, unless `spec.manualSelector` is true, the template gets the labels
//! `batch.kubernetes.io/controller-uid` and `controller-uid` (the Job's uid) and
//! `batch.kubernetes.io/job-name` and `job-name`, and the selector matches the uid label.
//!
//! For each Job that has not finished, the controller keeps `min(parallelism, completions -
//! succeeded)` active pods (for a Job without completions, `parallelism` until one
//! succeeds), named `<job>-xxxxx`, each with the Job's controller reference and the
//! `batch.kubernetes.io/job-tracking` finalizer. An Indexed Job's pods carry their index as
//! the `batch.kubernetes.io/job-completion-index` annotation and label, the hostname
//! `<job>-<index>` and `JOB_COMPLETION_INDEX` in every container's environment; the lowest
//! indexes not done and not running go first.
//!
//! A finished pod (Succeeded, Failed, or deleted before it succeeded) is counted in three
//! steps that survive a restart: its uid goes into `status.uncountedTerminatedPods` (an
//! Indexed Job's success into `completedIndexes`), its finalizer is removed, and it moves
//! to `succeeded` or `failed`. A replacement after failures waits 10 s doubled per failure
//! since the last success (10 min at most). More failures than `backoffLimit`, or a Job
//! active longer than `activeDeadlineSeconds`, gets `FailureTarget` and its active pods are
//! deleted; once none is left it gets `Failed` with the same reason. Enough successes give
//! `SuccessCriteriaMet` and, once no pod is left running or terminating, `Complete` and
//! `completionTime`. A suspended Job has its active pods deleted and the `Suspended`
//! condition. A finished Job with `ttlSecondsAfterFinished` is deleted (foreground) that long
//! after it finished. Events from `job-controller`: `SuccessfulCreate`, `SuccessfulDelete`,
//! `Completed`, `Suspended`, `Resumed`, and the failure reason.
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::create`], [`Store::update`] and [`Store::delete`], as a client would.
//! **Invariant:** the store is read at each sync, and every write lands before the next sync
//! reads, so upstream's expectations are not needed here.
//!
//! Upstream: pkg/apis/batch/v1/defaults.go, pkg/registry/batch/job/strategy.go,
//! pkg/apis/batch/validation, pkg/controller/job (syncJob, manageJob,
//! trackJobStatusAndRemoveFinalizers) and pkg/controller/ttlafterfinished.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::admission;
use crate::controller::{
    self, controller_ref, is_active, is_ready, key_of, owner_reference, pod_from_template,
    terminating, Key, Reconcile,
};
use crate::meta;
use crate::pv_controller::{selector_matches, str_at};
use crate::recorder::Recorder;
use crate::replicaset::deletion_order;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store, WatchEvent};
use crate::validation::{FieldError, FieldErrorKind};

/// The Events' `source.component`, as upstream's controller names itself.
pub const COMPONENT: &str = "job-controller";
/// The finalizer that keeps a Job's pod until the controller has counted it.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The template label (and selector key) carrying the Job's uid.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The uid label older clients select on.
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// The template label carrying the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The name label older clients select on.
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// An Indexed Job's pod's index (annotation and label).
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// Pods created or deleted in one sync at most; the rest follow in the next syncs.
pub const BURST_PODS: usize = 500;
/// The first replacement after a failure waits this long (upstream's
/// DefaultJobPodFailureBackOff); each further failure doubles it.
pub const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// The longest wait before a replacement (upstream's MaxJobPodFailureBackOff).
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);
/// Indexed Jobs' `completions` and `parallelism` at most.
const MAX_INDEXED_COMPLETIONS: i64 = 100_000;

fn int_at(obj: &Value, p: &str) -> Option<i64> {
    obj.pointer(p).and_then(Value::as_i64)
}

fn object_mut<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    if !obj.get(key).is_some_and(Value::is_object) {
        obj[key] = json!({});
    }
    obj.get_mut(key).and_then(Value::as_object_mut)
}

/// Defaults and the generated selector a new Job gets before validation (upstream's
/// SetDefaults_Job and the strategy's PrepareForCreate). Gives the Job its name (from
/// `generateName`) and uid here, since the generated labels carry them; the store keeps both.
pub fn prepare_for_create(job: &mut Value) {
    let Some(metadata) = object_mut(job, "metadata") else {
        return;
    };
    if metadata
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        if let Some(prefix) = metadata.get("generateName").and_then(Value::as_str) {
            if !prefix.is_empty() {
                let name = format!("{prefix}{}", meta::name_suffix());
                metadata.insert("name".into(), json!(name));
            }
        }
    }
    metadata.insert("uid".into(), json!(meta::new_uid()));
    let name = str_at(job, "/metadata/name").to_string();
    let uid = str_at(job, "/metadata/uid").to_string();
    let Some(spec) = object_mut(job, "spec") else {
        return;
    };
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    if spec.get("parallelism").is_none_or(Value::is_null) {
        spec.insert("parallelism".into(), json!(1));
    }
    if spec.get("backoffLimit").is_none_or(Value::is_null) {
        let limit = if spec
            .get("backoffLimitPerIndex")
            .is_some_and(|v| !v.is_null())
        {
            json!(i32::MAX)
        } else {
            json!(6)
        };
        spec.insert("backoffLimit".into(), limit);
    }
    if spec.get("completionMode").is_none_or(Value::is_null) {
        spec.insert("completionMode".into(), json!("NonIndexed"));
    }
    if spec.get("suspend").is_none_or(Value::is_null) {
        spec.insert("suspend".into(), json!(false));
    }
    if spec.get("podReplacementPolicy").is_none_or(Value::is_null) {
        let policy = if spec.get("podFailurePolicy").is_some_and(|v| !v.is_null()) {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        spec.insert("podReplacementPolicy".into(), json!(policy));
    }
    if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
        let template_labels = job
            .pointer("/spec/template/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // The Job's labels default to the template's as the user gave them.
        if !template_labels.is_empty() && job_labels_empty(job) {
            job["metadata"]["labels"] = Value::Object(template_labels.clone());
        }
        let mut labels = template_labels;
        for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
        if let Some(template) = job
            .pointer_mut("/spec/template")
            .and_then(Value::as_object_mut)
        {
            let meta = template.entry("metadata").or_insert_with(|| json!({}));
            if meta.is_object() {
                meta["labels"] = Value::Object(labels);
            }
        }
        if let Some(spec) = object_mut(job, "spec") {
            let selector = spec.entry("selector").or_insert_with(|| json!({}));
            if selector.is_object() {
                if !selector.get("matchLabels").is_some_and(Value::is_object) {
                    selector["matchLabels"] = json!({});
                }
                if selector
                    .pointer(&format!("/matchLabels/{}", escape(CONTROLLER_UID_LABEL)))
                    .is_none()
                {
                    selector["matchLabels"][CONTROLLER_UID_LABEL] = json!(uid);
                }
            }
        }
    }
    // Read back from storage, a Job without labels shows its template's (the generated ones
    // included), as upstream's defaulting on decode gives it.
    if job_labels_empty(job) {
        if let Some(labels) = job.pointer("/spec/template/metadata/labels").cloned() {
            job["metadata"]["labels"] = labels;
        }
    }
    if let Some(template) = job.pointer_mut("/spec/template") {
        admission::default_pod_spec(template);
    }
    // A new Job starts with an empty status, whatever the body said.
    job["status"] = json!({});
}

fn job_labels_empty(job: &Value) -> bool {
    job.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
}

/// A JSON pointer segment for a key with `/` or `~`.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn nonnegative(errs: &mut Vec<FieldError>, job: &Value, field: &str) {
    if let Some(n) = int_at(job, &format!("/spec/{field}")).filter(|n| *n < 0) {
        errs.push(FieldError::invalid(
            format!("spec.{field}"),
            json!(n),
            "must be greater than or equal to 0",
        ));
    }
}

/// What upstream's ValidateJob refuses in a new Job (after [`prepare_for_create`]).
pub fn validate_job(job: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in ["parallelism", "completions", "backoffLimit"] {
        nonnegative(&mut errs, job, field);
    }
    if let Some(n) = int_at(job, "/spec/activeDeadlineSeconds").filter(|n| *n <= 0) {
        errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            json!(n),
            "must be greater than 0",
        ));
    }
    let template_labels = job.pointer("/spec/template/metadata/labels");
    match job.pointer("/spec/selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError {
            field: "spec.selector".into(),
            kind: FieldErrorKind::Required,
            detail: String::new(),
        }),
        Some(selector) => {
            if !selector_matches(selector, template_labels) {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    template_labels.cloned().unwrap_or(json!({})),
                    "`selector` does not match template `labels`",
                ));
            }
            if job.pointer("/spec/manualSelector").and_then(Value::as_bool) != Some(true) {
                let uid = str_at(job, "/metadata/uid");
                let label = |v: Option<&Value>| {
                    v.and_then(|l| l.get(CONTROLLER_UID_LABEL))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                if label(template_labels).as_deref() != Some(uid) {
                    errs.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        template_labels.cloned().unwrap_or(json!({})),
                        "`selector` not auto-generated",
                    ));
                }
                if label(selector.get("matchLabels")).as_deref() != Some(uid) {
                    errs.push(FieldError::invalid(
                        "spec.selector",
                        selector.clone(),
                        "`selector` not auto-generated",
                    ));
                }
            }
        }
    }
    let mode = str_at(job, "/spec/completionMode");
    match mode {
        "NonIndexed" => {}
        "Indexed" => {
            match int_at(job, "/spec/completions") {
                None => errs.push(FieldError {
                    field: "spec.completions".into(),
                    kind: FieldErrorKind::Required,
                    detail: "when completion mode is Indexed".into(),
                }),
                Some(n) if n > MAX_INDEXED_COMPLETIONS => errs.push(FieldError::invalid(
                    "spec.completions",
                    json!(n),
                    format!("must be less than or equal to {MAX_INDEXED_COMPLETIONS}"),
                )),
                Some(_) => {}
            }
            if let Some(n) =
                int_at(job, "/spec/parallelism").filter(|n| *n > MAX_INDEXED_COMPLETIONS)
            {
                errs.push(FieldError::invalid(
                    "spec.parallelism",
                    json!(n),
                    format!("must be less than or equal to {MAX_INDEXED_COMPLETIONS} when completion mode is Indexed"),
                ));
            }
        }
        other => errs.push(FieldError {
            field: "spec.completionMode".into(),
            kind: FieldErrorKind::NotSupported(json!(other), &["NonIndexed", "Indexed"]),
            detail: String::new(),
        }),
    }
    let restart = str_at(job, "/spec/template/spec/restartPolicy");
    if !matches!(restart, "OnFailure" | "Never") {
        errs.push(FieldError {
            field: "spec.template.spec.restartPolicy".into(),
            kind: FieldErrorKind::NotSupported(json!(restart), &["OnFailure", "Never"]),
            detail: String::new(),
        });
    }
    errs
}

/// What upstream's ValidateJobUpdate refuses: a changed selector, completion mode or
/// completions (an Indexed Job may change completions together with parallelism, to the
/// same value), or template (unless the Job is suspended), and what [`validate_job`]
/// refuses.
pub fn validate_job_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate_job(new);
    let immutable = |field: &str| {
        let p = format!("/spec/{field}");
        (old.pointer(&p) != new.pointer(&p)).then(|| {
            FieldError::invalid(
                format!("spec.{field}"),
                new.pointer(&p).cloned().unwrap_or(Value::Null),
                "field is immutable",
            )
        })
    };
    errs.extend(immutable("selector"));
    errs.extend(immutable("completionMode"));
    let elastic = str_at(new, "/spec/completionMode") == "Indexed"
        && int_at(new, "/spec/completions") == int_at(new, "/spec/parallelism")
        && int_at(old, "/spec/completions") == int_at(old, "/spec/parallelism");
    if !elastic {
        errs.extend(immutable("completions"));
    }
    let suspended = new.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    if !suspended {
        errs.extend(immutable("template"));
    }
    errs
}

/// The condition of `kind` that is True, if any.
fn condition<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == kind && str_at(c, "/status") == "True")
}

/// Whether the Job has finished: `Complete` or `Failed`.
pub fn is_finished(job: &Value) -> bool {
    condition(job, "Complete").is_some() || condition(job, "Failed").is_some()
}

fn new_condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    let now = meta::now_rfc3339();
    json!({"type": kind, "status": status, "lastProbeTime": now, "lastTransitionTime": now,
           "reason": reason, "message": message})
}

fn has_finalizer(pod: &Value) -> bool {
    pod.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(JOB_TRACKING_FINALIZER)))
}

/// A pod's completion index, if it has a valid one.
fn completion_index(pod: &Value) -> Option<i64> {
    pod.pointer(&format!(
        "/metadata/annotations/{}",
        escape(JOB_COMPLETION_INDEX)
    ))
    .and_then(Value::as_str)?
    .parse()
    .ok()
    .filter(|i| *i >= 0)
}

/// Whether a finished pod counts as failed: phase Failed, or deleted before it succeeded
/// (unless the Job replaces only Failed pods).
fn is_pod_failed(pod: &Value, only_failed: bool) -> bool {
    match str_at(pod, "/status/phase") {
        "Failed" => true,
        "Succeeded" => false,
        _ => !only_failed && terminating(pod),
    }
}

/// Indexes as upstream writes `completedIndexes`: ascending, runs as `a-b` (`1,3-5,7`).
pub fn format_indexes(indexes: &BTreeSet<i64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(i64, i64)> = None;
    for &i in indexes {
        run = match run {
            Some((a, b)) if i == b + 1 => Some((a, i)),
            Some((a, b)) => {
                out.push(if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                });
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some((a, b)) = run {
        out.push(if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        });
    }
    out.join(",")
}

/// The indexes of a `completedIndexes` string; parts that do not parse are skipped.
pub fn parse_indexes(s: &str) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                    // Bounded by the largest valid index count.
                    out.extend(a.max(0)..=b.min(a.saturating_add(MAX_INDEXED_COMPLETIONS)));
                }
            }
            None => out.extend(part.parse::<i64>().ok()),
        }
    }
    out
}

/// The pod an Indexed Job makes for `index` (or a NonIndexed Job's, with `None`), before
/// pod defaulting.
pub fn pod_for_job(job: &Value, index: Option<i64>) -> Value {
    let mut pod = pod_from_template(job, owner_reference(job, "batch/v1", "Job"));
    let mut finalizers: Vec<Value> = pod
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    finalizers.push(json!(JOB_TRACKING_FINALIZER));
    pod["metadata"]["finalizers"] = Value::Array(finalizers);
    let Some(index) = index else {
        return pod;
    };
    let job_name = str_at(job, "/metadata/name");
    pod["metadata"]["generateName"] = json!(format!("{job_name}-{index}-"));
    for field in ["annotations", "labels"] {
        if let Some(m) = object_mut(&mut pod["metadata"], field) {
            m.insert(JOB_COMPLETION_INDEX.into(), json!(index.to_string()));
        }
    }
    if let Some(spec) = object_mut(&mut pod, "spec") {
        if spec
            .get("hostname")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            spec.insert("hostname".into(), json!(format!("{job_name}-{index}")));
        }
        for list in ["initContainers", "containers"] {
            for c in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let Some(c) = c.as_object_mut() else { continue };
                let env = c.entry("env").or_insert_with(|| json!([]));
                let Some(env) = env.as_array_mut() else {
                    continue;
                };
                if env
                    .iter()
                    .any(|e| str_at(e, "/name") == "JOB_COMPLETION_INDEX")
                {
                    continue;
                }
                env.push(json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": format!("metadata.annotations['{JOB_COMPLETION_INDEX}']")}}}));
            }
        }
    }
    pod
}

/// The counters of a Job's status, as read and as they become during one sync.
#[derive(Debug, Default, Clone, PartialEq)]
struct Counts {
    succeeded: i64,
    failed: i64,
    uncounted_succeeded: BTreeSet<String>,
    uncounted_failed: BTreeSet<String>,
    completed: BTreeSet<i64>,
}

impl Counts {
    fn of(job: &Value) -> Counts {
        let uids = |p: &str| -> BTreeSet<String> {
            job.pointer(p)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        Counts {
            succeeded: int_at(job, "/status/succeeded").unwrap_or(0),
            failed: int_at(job, "/status/failed").unwrap_or(0),
            uncounted_succeeded: uids("/status/uncountedTerminatedPods/succeeded"),
            uncounted_failed: uids("/status/uncountedTerminatedPods/failed"),
            completed: parse_indexes(str_at(job, "/status/completedIndexes")),
        }
    }

    fn succeeded_total(&self, indexed: bool) -> i64 {
        if indexed {
            i64::try_from(self.completed.len()).unwrap_or(i64::MAX)
        } else {
            self.succeeded + len_i64(&self.uncounted_succeeded)
        }
    }

    fn failed_total(&self) -> i64 {
        self.failed + len_i64(&self.uncounted_failed)
    }
}

fn len_i64<T>(s: &BTreeSet<T>) -> i64 {
    i64::try_from(s.len()).unwrap_or(i64::MAX)
}

/// The pods of a Job as the status counts them.
struct PodCounts {
    active: i64,
    ready: i64,
    terminating: i64,
}

fn pod_counts(pods: &[&Value]) -> PodCounts {
    let active: Vec<&&Value> = pods.iter().filter(|p| is_active(p)).collect();
    PodCounts {
        active: i64::try_from(active.len()).unwrap_or(i64::MAX),
        ready: i64::try_from(active.iter().filter(|p| is_ready(p)).count()).unwrap_or(0),
        terminating: i64::try_from(
            pods.iter()
                .filter(|p| {
                    terminating(p) && !matches!(str_at(p, "/status/phase"), "Succeeded" | "Failed")
                })
                .count(),
        )
        .unwrap_or(0),
    }
}

/// The status a Job gets: counters, pod counts, conditions and times, over the one it has
/// (fields this controller does not own are kept).
fn job_status(
    job: &Value,
    counts: &Counts,
    pods: &PodCounts,
    indexed: bool,
    conditions: &[Value],
) -> Value {
    let mut status = job
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // Zero counters are left out, as upstream's omitempty does; ready and terminating are
    // pointers upstream, written as 0.
    for (field, n) in [
        ("active", pods.active),
        ("succeeded", counts.succeeded),
        ("failed", counts.failed),
    ] {
        if n == 0 {
            status.remove(field);
        } else {
            status.insert(field.into(), json!(n));
        }
    }
    if indexed {
        let s = format_indexes(&counts.completed);
        if s.is_empty() {
            status.remove("completedIndexes");
        } else {
            status.insert("completedIndexes".into(), json!(s));
        }
    }
    status.insert("ready".into(), json!(pods.ready));
    status.insert("terminating".into(), json!(pods.terminating));
    let mut uncounted = Map::new();
    for (field, uids) in [
        ("succeeded", &counts.uncounted_succeeded),
        ("failed", &counts.uncounted_failed),
    ] {
        if !uids.is_empty() {
            uncounted.insert(field.into(), json!(uids));
        }
    }
    status.insert("uncountedTerminatedPods".into(), Value::Object(uncounted));
    if conditions.is_empty() {
        status.remove("conditions");
    } else {
        status.insert("conditions".into(), json!(conditions));
    }
    Value::Object(status)
}

/// The wait before the next replacement after `failures` failures since the last success.
pub fn failure_backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    POD_FAILURE_BACKOFF
        .saturating_mul(factor)
        .min(MAX_POD_FAILURE_BACKOFF)
}

struct JobController {
    store: Arc<Store>,
    jobs: &'static ResourceInfo,
    pods: &'static ResourceInfo,
    priority_classes: &'static ResourceInfo,
    recorder: Recorder,
    /// Failures since the last success and when the last was counted, per Job: the
    /// replacement backoff. Kept in memory only; a restart starts it over.
    backoff: Mutex<HashMap<Key, (u32, Instant)>>,
}

/// What a sync decided about the Job's end.
enum Finishing {
    /// Enough successes: `SuccessCriteriaMet`, then `Complete`.
    Success,
    /// A failure (`FailureTarget`'s reason and message), then `Failed`.
    Failure(String, String),
}

impl JobController {
    /// The Job a pod's change concerns: its controller if that is a Job. A pod whose Job is
    /// gone (or was recreated) loses its tracking finalizer here, so that it can go.
    fn job_of_pod(&self, pod: &Value) -> Option<Key> {
        let r = controller_ref(pod)?;
        if str_at(r, "/kind") != "Job" || str_at(r, "/apiVersion") != "batch/v1" {
            return None;
        }
        let ns = str_at(pod, "/metadata/namespace");
        let name = str_at(r, "/name");
        let owner_alive = self
            .store
            .get(self.jobs, ns, name)
            .is_some_and(|j| str_at(&j, "/metadata/uid") == str_at(r, "/uid"));
        if !owner_alive {
            if has_finalizer(pod) {
                self.remove_finalizer(pod);
            }
            return None;
        }
        Some((ns.to_string(), name.to_string()))
    }

    /// Removes the tracking finalizer; whether it is gone (or the pod is).
    fn remove_finalizer(&self, pod: &Value) -> bool {
        let (ns, name, uid) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
            str_at(pod, "/metadata/uid"),
        );
        let r = self.store.update(self.pods, ns, name, false, |cur| {
            if str_at(cur, "/metadata/uid") != uid {
                return Err(crate::status::ApiError::conflict(
                    self.pods,
                    name,
                    "the pod was recreated",
                ));
            }
            let mut new = cur.clone();
            if let Some(f) = new
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                f.retain(|f| f.as_str() != Some(JOB_TRACKING_FINALIZER));
            }
            Ok(new)
        });
        match r {
            Ok(_) => true,
            Err(e) if e.code == 404 => true,
            Err(e) => {
                tracing::debug!(pod = %name, error = %e.message, "job controller: finalizer not removed");
                false
            }
        }
    }

    fn write_status(&self, job: &Value, status: Value) -> Option<Arc<Value>> {
        let (ns, name) = (
            str_at(job, "/metadata/namespace"),
            str_at(job, "/metadata/name"),
        );
        let uid = str_at(job, "/metadata/uid");
        let written = controller::update_same(&self.store, self.jobs, ns, name, uid, |cur| {
            let mut new = cur.clone();
            new["status"] = status.clone();
            Ok(new)
        });
        match written {
            Ok(j) => Some(j),
            Err(e) => {
                tracing::debug!(job = %name, error = %e.message, "job controller: status not written");
                None
            }
        }
    }

    fn own_pods(&self, ns: &str, uid: &str) -> Vec<Arc<Value>> {
        self.store
            .list(self.pods, Some(ns))
            .0
            .into_iter()
            .filter(|p| controller_ref(p).is_some_and(|r| str_at(r, "/uid") == uid))
            .collect()
    }

    /// Brings one Job towards its end and writes its status. Returns when to look again
    /// (a replacement waiting out its backoff, the active deadline, the TTL).
    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        let job = self.store.get(self.jobs, ns, name)?;
        let uid = str_at(&job, "/metadata/uid").to_string();
        let key = (ns.to_string(), name.to_string());
        let pods = self.own_pods(ns, &uid);
        if is_finished(&job) {
            // A pod that finished after its Job did is let go.
            for p in pods.iter().filter(|p| has_finalizer(p)) {
                self.remove_finalizer(p);
            }
            return self.expire(&job);
        }
        let indexed = str_at(&job, "/spec/completionMode") == "Indexed";
        let completions = int_at(&job, "/spec/completions");
        let parallelism = int_at(&job, "/spec/parallelism").unwrap_or(1).max(0);
        let backoff_limit = int_at(&job, "/spec/backoffLimit").unwrap_or(6);
        let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
        let only_failed = str_at(&job, "/spec/podReplacementPolicy") == "Failed";
        let mut conditions: Vec<Value> = job
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut status_job = (*job).clone();
        if job.pointer("/status/startTime").is_none() && !suspended {
            status_job["status"]["startTime"] = json!(meta::now_rfc3339());
        }

        // Finished pods not counted yet: recorded as uncounted (or as completed indexes)
        // first, so that a restart between the finalizer's removal and the count loses none.
        let mut counts = Counts::of(&job);
        // Uncounted pods whose finalizer is gone already (the controller stopped between
        // the two steps) are counted now.
        let holding: BTreeSet<&str> = pods
            .iter()
            .filter(|p| has_finalizer(p))
            .map(|p| str_at(p, "/metadata/uid"))
            .collect();
        let released_s: Vec<String> = counts
            .uncounted_succeeded
            .iter()
            .filter(|u| !holding.contains(u.as_str()))
            .cloned()
            .collect();
        for u in released_s {
            counts.uncounted_succeeded.remove(&u);
            counts.succeeded += 1;
        }
        let released_f: Vec<String> = counts
            .uncounted_failed
            .iter()
            .filter(|u| !holding.contains(u.as_str()))
            .cloned()
            .collect();
        for u in released_f {
            counts.uncounted_failed.remove(&u);
            counts.failed += 1;
        }
        let mut to_release: Vec<&Value> = Vec::new();
        let mut new_failures = 0u32;
        let mut new_successes = 0u32;
        for pod in pods.iter().map(|p| &**p).filter(|p| has_finalizer(p)) {
            let pod_uid = str_at(pod, "/metadata/uid").to_string();
            let index = completion_index(pod).filter(|i| completions.is_some_and(|c| *i < c));
            if str_at(pod, "/status/phase") == "Succeeded" {
                if indexed {
                    if let Some(i) = index {
                        new_successes += u32::from(counts.completed.insert(i));
                    }
                } else if !counts.uncounted_failed.contains(&pod_uid) {
                    new_successes += u32::from(counts.uncounted_succeeded.insert(pod_uid));
                }
                to_release.push(pod);
            } else if is_pod_failed(pod, only_failed) {
                if (!indexed || index.is_some()) && !counts.uncounted_succeeded.contains(&pod_uid) {
                    new_failures += u32::from(counts.uncounted_failed.insert(pod_uid));
                }
                to_release.push(pod);
            }
        }
        // Pods deleted because the Job is suspended count as failed (as upstream) but do not
        // hold back the pods made when it resumes.
        let backoff_failures = if suspended { 0 } else { new_failures };
        self.record_backoff(&key, new_successes, backoff_failures);
        let succeeded = counts.succeeded_total(indexed);
        let failed = counts.failed_total();

        let mut finishing = if condition(&job, "SuccessCriteriaMet").is_some() {
            Some(Finishing::Success)
        } else {
            condition(&job, "FailureTarget").map(|c| {
                Finishing::Failure(
                    str_at(c, "/reason").to_string(),
                    str_at(c, "/message").to_string(),
                )
            })
        };
        let mut after: Option<Duration> = None;
        if finishing.is_none() {
            if failed > backoff_limit {
                finishing = Some(Finishing::Failure(
                    "BackoffLimitExceeded".into(),
                    "Job has reached the specified backoff limit".into(),
                ));
            } else if let Some(deadline) = self.deadline_left(&status_job, suspended) {
                if deadline.is_zero() {
                    finishing = Some(Finishing::Failure(
                        "DeadlineExceeded".into(),
                        "Job was active longer than specified deadline".into(),
                    ));
                } else {
                    after = Some(deadline);
                }
            }
        }

        let active: Vec<&Value> = pods.iter().map(|p| &**p).filter(|p| is_active(p)).collect();
        match &finishing {
            Some(Finishing::Failure(..)) => self.delete_pods(&job, &active, active.len()),
            Some(Finishing::Success) => {}
            None if suspended => {
                self.delete_pods(&job, &active, active.len());
                if condition(&job, "Suspended").is_none() {
                    conditions.retain(|c| str_at(c, "/type") != "Suspended");
                    conditions.push(new_condition(
                        "Suspended",
                        "True",
                        "JobSuspended",
                        "Job suspended",
                    ));
                    self.recorder
                        .event(&job, "Job", "Normal", "Suspended", "Job suspended");
                }
            }
            None => {
                if condition(&job, "Suspended").is_some() {
                    for c in conditions
                        .iter_mut()
                        .filter(|c| str_at(c, "/type") == "Suspended")
                    {
                        *c = new_condition("Suspended", "False", "JobResumed", "Job resumed");
                    }
                    self.recorder
                        .event(&job, "Job", "Normal", "Resumed", "Job resumed");
                    // The active deadline counts from the resumption.
                    status_job["status"]["startTime"] = json!(meta::now_rfc3339());
                }
                let want = match completions {
                    Some(c) => (c - succeeded).clamp(0, parallelism),
                    None if succeeded > 0 => i64::try_from(active.len()).unwrap_or(0),
                    None => parallelism,
                };
                let waiting = self.manage(&job, &key, &pods, &active, want, &counts, only_failed);
                after = min_some(after, waiting);
                let active_now = self
                    .own_pods(ns, &uid)
                    .iter()
                    .filter(|p| is_active(p))
                    .count();
                let complete = match completions {
                    Some(c) => succeeded >= c,
                    None => succeeded > 0,
                } && active_now == 0;
                if complete {
                    finishing = Some(Finishing::Success);
                }
            }
        }
        match &finishing {
            Some(Finishing::Success) if condition(&job, "SuccessCriteriaMet").is_none() => {
                conditions.push(new_condition(
                    "SuccessCriteriaMet",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ));
            }
            Some(Finishing::Failure(reason, message))
                if condition(&job, "FailureTarget").is_none() =>
            {
                conditions.push(new_condition("FailureTarget", "True", reason, message));
            }
            _ => {}
        }

        // Step one: the uncounted pods (and a new end condition) recorded.
        let pod_refs: Vec<&Value> = pods.iter().map(|p| &**p).collect();
        let mut current = Arc::new(status_job);
        if !to_release.is_empty() {
            let status = job_status(
                &current,
                &counts,
                &pod_counts(&pod_refs),
                indexed,
                &conditions,
            );
            match self.write_status(&current, status) {
                Some(j) => current = j,
                None => return after,
            }
            // Step two: their finalizers removed; step three: they are counted.
            for pod in to_release {
                if self.remove_finalizer(pod) {
                    let pod_uid = str_at(pod, "/metadata/uid");
                    if counts.uncounted_succeeded.remove(pod_uid) {
                        counts.succeeded += 1;
                    }
                    if counts.uncounted_failed.remove(pod_uid) {
                        counts.failed += 1;
                    }
                }
            }
        }
        if indexed {
            counts.succeeded = len_i64(&counts.completed);
        }
        let now_pods = self.own_pods(ns, &uid);
        let now_refs: Vec<&Value> = now_pods.iter().map(|p| &**p).collect();
        let pc = pod_counts(&now_refs);
        let settled = counts.uncounted_succeeded.is_empty()
            && counts.uncounted_failed.is_empty()
            && pc.active == 0
            && pc.terminating == 0;
        let mut finished_now = false;
        let mut current = (*current).clone();
        if settled {
            match &finishing {
                Some(Finishing::Success) => {
                    conditions.push(new_condition(
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ));
                    current["status"]["completionTime"] = json!(meta::now_rfc3339());
                    finished_now = true;
                }
                Some(Finishing::Failure(reason, message)) => {
                    conditions.push(new_condition("Failed", "True", reason, message));
                    finished_now = true;
                }
                None => {}
            }
        }
        let status = job_status(&current, &counts, &pc, indexed, &conditions);
        if current.get("status") != Some(&status) {
            let Some(written) = self.write_status(&current, status) else {
                return after;
            };
            if finished_now {
                match &finishing {
                    Some(Finishing::Failure(reason, message)) => {
                        self.recorder
                            .event(&written, "Job", "Warning", reason, message);
                    }
                    _ => {
                        self.recorder
                            .event(&written, "Job", "Normal", "Completed", "Job completed")
                    }
                }
                if let Ok(mut b) = self.backoff.lock() {
                    b.remove(&key);
                }
                return min_some(after, self.expire(&written));
            }
        }
        after
    }

    /// Time left before `activeDeadlineSeconds` runs out, if the Job has one and runs.
    fn deadline_left(&self, job: &Value, suspended: bool) -> Option<Duration> {
        let limit = int_at(job, "/spec/activeDeadlineSeconds")?;
        if suspended {
            return None;
        }
        let elapsed = meta::age_seconds(str_at(job, "/status/startTime")).unwrap_or(0);
        Some(Duration::from_secs((limit - elapsed).max(0).unsigned_abs()))
    }

    fn record_backoff(&self, key: &Key, successes: u32, failures: u32) {
        let Ok(mut b) = self.backoff.lock() else {
            return;
        };
        if successes > 0 {
            b.remove(key);
        }
        if failures > 0 {
            let entry = b.entry(key.clone()).or_insert((0, Instant::now()));
            *entry = (entry.0.saturating_add(failures), Instant::now());
        }
    }

    /// Creates or deletes pods towards `want` active ones. Returns how long a replacement
    /// still waits out its failure backoff, if one does.
    #[allow(clippy::too_many_arguments)]
    fn manage(
        &self,
        job: &Value,
        key: &Key,
        pods: &[Arc<Value>],
        active: &[&Value],
        want: i64,
        counts: &Counts,
        only_failed: bool,
    ) -> Option<Duration> {
        let have = i64::try_from(active.len()).unwrap_or(i64::MAX);
        if have > want {
            let surplus = usize::try_from(have - want).unwrap_or(0);
            self.delete_pods(job, active, surplus);
            return None;
        }
        // Pods still terminating hold their place when only Failed pods are replaced.
        let held = if only_failed {
            i64::try_from(
                pods.iter()
                    .filter(|p| {
                        terminating(p)
                            && !matches!(str_at(p, "/status/phase"), "Succeeded" | "Failed")
                    })
                    .count(),
            )
            .unwrap_or(0)
        } else {
            0
        };
        let missing = usize::try_from(want - have - held).unwrap_or(0);
        if missing == 0 {
            return None;
        }
        if let Some((failures, at)) = self.backoff.lock().ok().and_then(|b| b.get(key).copied()) {
            let ready_at = at + failure_backoff(failures);
            let now = Instant::now();
            if ready_at > now {
                return Some(ready_at - now);
            }
        }
        let indexes: Vec<Option<i64>> = if str_at(job, "/spec/completionMode") == "Indexed" {
            let completions = int_at(job, "/spec/completions").unwrap_or(0);
            let taken: BTreeSet<i64> = active.iter().filter_map(|p| completion_index(p)).collect();
            (0..completions)
                .filter(|i| !counts.completed.contains(i) && !taken.contains(i))
                .take(missing.min(BURST_PODS))
                .map(Some)
                .collect()
        } else {
            vec![None; missing.min(BURST_PODS)]
        };
        let ns = str_at(job, "/metadata/namespace");
        let classes = self.store.list(self.priority_classes, None).0;
        for index in indexes {
            let mut pod = pod_for_job(job, index);
            admission::default_pod(&mut pod);
            let created = admission::admit_priority(self.pods, &mut pod, &classes)
                .and_then(|()| self.store.create(self.pods, ns, pod, false));
            match created {
                Ok(pod) => self.recorder.event(
                    job,
                    "Job",
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created pod: {}", str_at(&pod, "/metadata/name")),
                ),
                Err(e) => {
                    self.recorder.event(
                        job,
                        "Job",
                        "Warning",
                        "FailedCreate",
                        &format!("Error creating: {}", e.message),
                    );
                    break;
                }
            }
        }
        None
    }

    /// Deletes `n` of the active pods, in upstream's order (unscheduled, pending, not ready
    /// first).
    fn delete_pods(&self, job: &Value, active: &[&Value], n: usize) {
        let mut active: Vec<&Value> = active.to_vec();
        active.sort_by(|a, b| deletion_order(a, b));
        let ns = str_at(job, "/metadata/namespace");
        for pod in active.iter().take(n.min(BURST_PODS)) {
            let pod_name = str_at(pod, "/metadata/name");
            let opts = DeleteOptions {
                uid: Some(str_at(pod, "/metadata/uid")),
                ..DeleteOptions::default()
            };
            match self.store.delete(self.pods, ns, pod_name, opts) {
                Ok(_) => self.recorder.event(
                    job,
                    "Job",
                    "Normal",
                    "SuccessfulDelete",
                    &format!("Deleted pod: {pod_name}"),
                ),
                Err(e) => tracing::debug!(pod = %pod_name, error = %e.message,
                    "job controller: pod not deleted"),
            }
        }
    }

    /// A finished Job with `ttlSecondsAfterFinished`: deleted once the time is up
    /// (foreground, so its pods go first); otherwise the time left.
    fn expire(&self, job: &Value) -> Option<Duration> {
        let ttl = int_at(job, "/spec/ttlSecondsAfterFinished")?;
        let finished_at = ["Complete", "Failed"]
            .iter()
            .find_map(|t| condition(job, t))
            .map(|c| str_at(c, "/lastTransitionTime"))?;
        let since = meta::age_seconds(finished_at).unwrap_or(0);
        if since < ttl {
            return Some(Duration::from_secs((ttl - since).unsigned_abs()));
        }
        let (ns, name) = (
            str_at(job, "/metadata/namespace"),
            str_at(job, "/metadata/name"),
        );
        if terminating(job) {
            return None;
        }
        let uid = str_at(job, "/metadata/uid");
        // Foreground, as upstream's TTL controller deletes: the garbage collector's
        // finalizer first, then the delete that marks the Job.
        let deleted = controller::update_same(&self.store, self.jobs, ns, name, uid, |cur| {
            let mut new = cur.clone();
            let mut finalizers: Vec<Value> = cur
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let foreground = json!(crate::garbagecollector::FINALIZER_FOREGROUND);
            if !finalizers.contains(&foreground) {
                finalizers.push(foreground);
            }
            new["metadata"]["finalizers"] = Value::Array(finalizers);
            Ok(new)
        })
        .and_then(|_| {
            let opts = DeleteOptions {
                uid: Some(uid),
                ..DeleteOptions::default()
            };
            self.store.delete(self.jobs, ns, name, opts)
        });
        if let Err(e) = deleted {
            tracing::debug!(job = %name, error = %e.message, "ttl-after-finished: job not deleted");
        }
        None
    }
}

fn min_some(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Runs the Job controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (Some(jobs), Some(pods), Some(priority_classes)) = (
        resources::lookup("batch", "v1", "jobs"),
        resources::lookup("", "v1", "pods"),
        resources::lookup("scheduling.k8s.io", "v1", "priorityclasses"),
    ) else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let c = JobController {
        store,
        jobs,
        pods,
        priority_classes,
        recorder,
        backoff: Mutex::new(HashMap::new()),
    };
    controller::run(&c.store.clone(), &c).await;
}

impl Reconcile for JobController {
    fn owners(&self) -> &'static ResourceInfo {
        self.jobs
    }

    fn relist(&self) -> Vec<Key> {
        // Pods whose Job went while the controller was not watching are let go.
        for pod in self.store.list(self.pods, None).0 {
            if has_finalizer(&pod) {
                self.job_of_pod(&pod);
            }
        }
        self.store
            .list(self.jobs, None)
            .0
            .iter()
            .map(|job| key_of(job))
            .collect()
    }

    fn keys_of(&self, ev: &WatchEvent, keys: &mut BTreeSet<Key>) {
        if ev.storage == self.jobs.storage && ev.kind != EventType::Deleted {
            keys.insert(key_of(&ev.object()));
        } else if ev.storage == self.pods.storage {
            keys.extend(self.job_of_pod(&ev.object()));
        }
    }

    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        JobController::sync(self, ns, name)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::none(&[], "")]
    #[case::one(&[0], "0")]
    #[case::a_run(&[0, 1, 2], "0-2")]
    #[case::runs_and_singles(&[1, 3, 4, 5, 7], "1,3-5,7")]
    fn completed_indexes_are_written_as_upstream_writes_them(
        #[case] indexes: &[i64],
        #[case] want: &str,
    ) {
        let set: BTreeSet<i64> = indexes.iter().copied().collect();
        assert_eq!(format_indexes(&set), want);
        assert_eq!(parse_indexes(want), set);
    }

    #[test]
    fn replacements_wait_ten_seconds_doubled_per_failure_up_to_ten_minutes() {
        let secs: Vec<u64> = [0, 1, 2, 3, 6, 7, 40]
            .map(|n| failure_backoff(n).as_secs())
            .to_vec();
        assert_eq!(secs, [0, 10, 20, 40, 320, 600, 600]);
    }

    fn pod(phase: &str, deleting: bool) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "status": {"phase": phase}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        p
    }

    #[rstest]
    #[case::failed(pod("Failed", false), false, true)]
    #[case::succeeded_while_deleted(pod("Succeeded", true), false, false)]
    #[case::deleted_while_running(pod("Running", true), false, true)]
    #[case::deleted_while_running_when_only_failed_pods_are_replaced(
        pod("Running", true),
        true,
        false
    )]
    #[case::running(pod("Running", false), false, false)]
    fn a_pod_deleted_before_it_succeeded_counts_as_failed(
        #[case] p: Value,
        #[case] only_failed: bool,
        #[case] want: bool,
    ) {
        assert_eq!(is_pod_failed(&p, only_failed), want);
    }

    fn stored_job(spec: Value) -> Value {
        let mut job = json!({"metadata": {"name": "j", "uid": "u"}, "spec": spec});
        job["spec"]["selector"] = json!({"matchLabels": {CONTROLLER_UID_LABEL: "u"}});
        job["spec"]["template"] = json!({"metadata": {"labels": {CONTROLLER_UID_LABEL: "u"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "a"}]}});
        job
    }

    #[rstest]
    #[case::indexed_completions_with_parallelism_are_elastic(
        json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2}),
        json!({"completions": 4, "parallelism": 4}),
        vec![]
    )]
    #[case::non_indexed_completions_are_immutable(
        json!({"completionMode": "NonIndexed", "completions": 2, "parallelism": 2}),
        json!({"completions": 4, "parallelism": 4}),
        vec!["spec.completions"]
    )]
    #[case::parallelism_may_change(
        json!({"completionMode": "NonIndexed", "completions": 2, "parallelism": 2}),
        json!({"parallelism": 1}),
        vec![]
    )]
    #[case::a_suspended_jobs_template_may_change(
        json!({"completionMode": "NonIndexed", "suspend": true}),
        json!({"template": {"metadata": {"labels": {CONTROLLER_UID_LABEL: "u"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "b"}]}}}),
        vec![]
    )]
    #[case::a_running_jobs_template_is_immutable(
        json!({"completionMode": "NonIndexed", "suspend": false}),
        json!({"template": {"metadata": {"labels": {CONTROLLER_UID_LABEL: "u"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "b"}]}}}),
        vec!["spec.template"]
    )]
    #[case::the_completion_mode_is_immutable(
        json!({"completionMode": "NonIndexed", "completions": 1}),
        json!({"completionMode": "Indexed"}),
        vec!["spec.completionMode"]
    )]
    fn job_updates(#[case] spec: Value, #[case] change: Value, #[case] want: Vec<&str>) {
        let old = stored_job(spec);
        let mut new = old.clone();
        for (k, v) in change.as_object().into_iter().flatten() {
            new["spec"][k] = v.clone();
        }
        let fields: Vec<String> = validate_job_update(&old, &new)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, want);
    }

    #[test]
    fn an_indexed_pod_carries_its_index_hostname_and_environment() {
        let job = stored_job(json!({"completionMode": "Indexed", "completions": 3}));
        let pod = pod_for_job(&job, Some(2));
        assert_eq!(
            (
                pod.pointer("/metadata/generateName"),
                pod.pointer("/metadata/annotations"),
                pod.pointer("/metadata/labels"),
                pod.pointer("/metadata/finalizers"),
                pod.pointer("/spec/hostname"),
                pod.pointer("/spec/containers/0/env"),
            ),
            (
                Some(&json!("j-2-")),
                Some(&json!({JOB_COMPLETION_INDEX: "2"})),
                Some(&json!({CONTROLLER_UID_LABEL: "u", JOB_COMPLETION_INDEX: "2"})),
                Some(&json!([JOB_TRACKING_FINALIZER])),
                Some(&json!("j-2")),
                Some(
                    &json!([{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}])
                ),
            )
        );
    }
}

//! batch/v1 Jobs through the API as a client sees them: defaults and the generated selector,
//! validation, and the Job controller running pods to completion (with the kubelet stand-in
//! completing them) or to failure, across a restart on the same data dir. Objects are created
//! over HTTP and compared whole, with server-chosen values (uids, times) masked. There is no
//! scheduler here: the tests bind the pods, as a scheduler would.

use std::collections::BTreeSet;
use std::time::Duration;

use apiserver::Config;
use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::{s, wait_for, Cluster};

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// The workload controllers on; the kubelet stand-in (completing a Job's pods after 200 ms)
/// only when `kubelets`.
fn cluster(kubelets: bool) -> Cluster {
    Cluster::with_config(Config {
        workload_controllers: true,
        simulate_kubelets: kubelets,
        job_pod_completion: Duration::from_millis(200),
        ..Config::default()
    })
}

fn job(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox:1.36"}]}});
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec})
}

fn create(c: &Cluster, path: &str, obj: &Value) -> Value {
    let (code, body) = c.post(path, obj);
    assert_eq!(code, 201, "create {path}: {body}");
    body
}

/// The pods of the Job `name` (by the generated `job-name` label).
fn pods(c: &Cluster, name: &str) -> Vec<Value> {
    let (code, list) = c.get(&format!("{PODS}?labelSelector=job-name%3D{name}"));
    assert_eq!(code, 200, "{list}");
    list.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_active(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && !matches!(s(pod, "/status/phase"), "Succeeded" | "Failed")
}

fn bind(c: &Cluster, pod: &str, node: &str) {
    let (code, body) = c.post(
        &format!("{PODS}/{pod}/binding"),
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}),
    );
    // A pod already bound or gone since it was listed is not this test's concern.
    assert!(matches!(code, 201 | 404 | 409), "bind {pod}: {body}");
}

fn node(c: &Cluster, name: &str) {
    create(
        c,
        "/api/v1/nodes",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    );
}

/// Binds the Job's unbound pods to `n1`, as a scheduler would; returns its pods.
fn schedule(c: &Cluster, name: &str) -> Vec<Value> {
    let pods = pods(c, name);
    for p in pods
        .iter()
        .filter(|p| is_active(p) && s(p, "/spec/nodeName").is_empty())
    {
        bind(c, s(p, "/metadata/name"), "n1");
    }
    pods
}

fn get_job(c: &Cluster, name: &str) -> Value {
    let (code, job) = c.get(&format!("{JOBS}/{name}"));
    assert_eq!(code, 200, "{job}");
    job
}

fn has_condition(job: &Value, kind: &str) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| s(c, "/type") == kind && s(c, "/status") == "True")
        })
}

/// The status with its times replaced by placeholders.
fn masked_status(job: &Value) -> Value {
    let mut st = job.get("status").cloned().unwrap_or(Value::Null);
    for p in ["/startTime", "/completionTime"] {
        if let Some(x) = st.pointer_mut(p) {
            *x = json!("TIME");
        }
    }
    for c in st
        .get_mut("conditions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        c["lastProbeTime"] = json!("TIME");
        c["lastTransitionTime"] = json!("TIME");
    }
    st
}

fn condition(kind: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": "True", "lastProbeTime": "TIME",
           "lastTransitionTime": "TIME", "reason": reason, "message": message})
}

/// The reasons of the Events about `name`, sorted.
fn event_reasons(c: &Cluster, name: &str) -> Vec<String> {
    let (code, list) = c.get(&format!(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{name}"
    ));
    assert_eq!(code, 200, "{list}");
    let mut reasons: Vec<String> = list
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|e| {
            let n = e.get("count").and_then(Value::as_u64).unwrap_or(1);
            (0..n).map(move |_| s(e, "/reason").to_string())
        })
        .collect();
    reasons.sort();
    reasons
}

/// Writes a pod's phase through its status subresource, as a kubelet would.
fn set_phase(c: &Cluster, pod: &str, phase: &str) {
    let (code, mut p) = c.get(&format!("{PODS}/{pod}"));
    assert_eq!(code, 200, "{p}");
    p["status"]["phase"] = json!(phase);
    let (code, body) = c.request(
        "PUT",
        &format!("{PODS}/{pod}/status"),
        Some("application/json"),
        &p.to_string(),
    );
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_job_of_three_completions_runs_two_at_a_time_and_completes() {
    let c = cluster(true);
    node(&c, "n1");
    create(
        &c,
        JOBS,
        &job("work", json!({"completions": 3, "parallelism": 2})),
    );
    let mut most_active = 0;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let done = wait_for("the job complete", || {
        let pods = schedule(&c, "work");
        let active = pods.iter().filter(|p| is_active(p)).count();
        most_active = most_active.max(active);
        seen.extend(pods.iter().map(|p| s(p, "/metadata/name").to_string()));
        let job = get_job(&c, "work");
        has_condition(&job, "Complete").then_some(job)
    });
    assert_eq!(most_active, 2, "active pods at most");
    assert_eq!(
        masked_status(&done),
        json!({"startTime": "TIME", "completionTime": "TIME", "ready": 0, "terminating": 0,
               "succeeded": 3, "uncountedTerminatedPods": {},
               "conditions": [
                   condition("SuccessCriteriaMet", "CompletionsReached",
                             "Reached expected number of succeeded pods"),
                   condition("Complete", "CompletionsReached",
                             "Reached expected number of succeeded pods")]})
    );
    let pods = pods(&c, "work");
    assert_eq!(seen.len(), 3, "pods made: {seen:?}");
    for p in &pods {
        assert!(s(p, "/metadata/name").starts_with("work-"), "{p}");
        assert_eq!(
            (
                s(p, "/status/phase"),
                p.pointer("/metadata/finalizers"),
                p.pointer("/status/containerStatuses/0/state/terminated/reason"),
                p.pointer("/status/containerStatuses/0/state/terminated/exitCode"),
            ),
            (
                "Succeeded",
                Some(&json!([])),
                Some(&json!("Completed")),
                Some(&json!(0))
            ),
            "{p}"
        );
    }
    assert_eq!(
        wait_for("the completed event", || {
            let r = event_reasons(&c, "work");
            r.contains(&"Completed".to_string()).then_some(r)
        }),
        [
            "Completed",
            "SuccessfulCreate",
            "SuccessfulCreate",
            "SuccessfulCreate"
        ]
    );
}

#[test]
fn an_indexed_job_gives_each_pod_its_index_and_reports_completed_indexes() {
    let c = cluster(true);
    node(&c, "n1");
    create(
        &c,
        JOBS,
        &job(
            "idx",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        ),
    );
    let made = wait_for("three pods", || {
        let pods = pods(&c, "idx");
        (pods.len() == 3).then_some(pods)
    });
    let mut indexes: Vec<(String, String, String, bool)> = made
        .iter()
        .map(|p| {
            let index = s(
                p,
                "/metadata/annotations/batch.kubernetes.io~1job-completion-index",
            );
            (
                index.to_string(),
                s(
                    p,
                    "/metadata/labels/batch.kubernetes.io~1job-completion-index",
                )
                .to_string(),
                s(p, "/spec/hostname").to_string(),
                s(p, "/metadata/name").starts_with(&format!("idx-{index}-")),
            )
        })
        .collect();
    indexes.sort();
    assert_eq!(
        indexes,
        [0, 1, 2].map(|i| (i.to_string(), i.to_string(), format!("idx-{i}"), true))
    );
    assert_eq!(
        made[0].pointer("/spec/containers/0/env"),
        Some(
            &json!([{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "apiVersion": "v1",
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}])
        )
    );
    let done = wait_for("the job complete", || {
        schedule(&c, "idx");
        let job = get_job(&c, "idx");
        has_condition(&job, "Complete").then_some(job)
    });
    assert_eq!(
        (
            done.pointer("/status/completedIndexes"),
            done.pointer("/status/succeeded")
        ),
        (Some(&json!("0-2")), Some(&json!(3)))
    );
}

#[rstest]
#[case::no_counts_default_to_one_of_one(
    json!({}),
    json!({"completions": 1, "parallelism": 1})
)]
#[case::parallelism_alone_leaves_completions_unset(
    json!({"parallelism": 3}),
    json!({"parallelism": 3})
)]
#[case::completions_alone_get_parallelism_one(
    json!({"completions": 5}),
    json!({"completions": 5, "parallelism": 1})
)]
#[case::a_pod_failure_policy_replaces_only_failed_pods(
    json!({"podFailurePolicy": {"rules": [{"action": "FailJob",
        "onExitCodes": {"operator": "In", "values": [42]}}]}}),
    json!({"completions": 1, "parallelism": 1, "podReplacementPolicy": "Failed",
           "podFailurePolicy": {"rules": [{"action": "FailJob",
               "onExitCodes": {"operator": "In", "values": [42]}}]}})
)]
#[case::given_values_are_kept(
    json!({"backoffLimit": 2, "suspend": true, "completionMode": "Indexed", "completions": 2}),
    json!({"completions": 2, "parallelism": 1, "backoffLimit": 2, "suspend": true,
           "completionMode": "Indexed"})
)]
fn a_new_job_gets_upstreams_defaults_and_a_generated_selector(
    #[case] given: Value,
    #[case] want: Value,
) {
    let c = cluster(false);
    let created = create(&c, JOBS, &job("d", given));
    let uid = s(&created, "/metadata/uid");
    let labels = json!({"batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "d", "controller-uid": uid, "job-name": "d"});
    let mut spec = json!({"backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}});
    for (k, v) in want.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    spec["template"] = json!({"metadata": {"labels": labels},
        "spec": {"restartPolicy": "Never", "schedulerName": "default-scheduler",
                 "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "enableServiceLinks": true, "securityContext": {},
                 "serviceAccountName": "default",
                 "containers": [{"name": "c", "image": "busybox:1.36",
                     "imagePullPolicy": "IfNotPresent",
                     "terminationMessagePath": "/dev/termination-log",
                     "terminationMessagePolicy": "File", "resources": {}}]}});
    assert_eq!(
        (
            created.get("spec"),
            created.pointer("/metadata/labels"),
            created.get("status")
        ),
        (Some(&spec), Some(&labels), Some(&json!({})))
    );
}

#[test]
fn a_manual_selector_is_kept_and_no_labels_are_generated() {
    let c = cluster(false);
    let mut j = job(
        "m",
        json!({"manualSelector": true, "selector": {"matchLabels": {"app": "m"}}}),
    );
    j["spec"]["template"]["metadata"] = json!({"labels": {"app": "m"}});
    let created = create(&c, JOBS, &j);
    assert_eq!(
        (
            created.pointer("/spec/selector"),
            created.pointer("/spec/template/metadata/labels"),
            created.pointer("/metadata/labels"),
        ),
        (
            Some(&json!({"matchLabels": {"app": "m"}})),
            Some(&json!({"app": "m"})),
            Some(&json!({"app": "m"}))
        )
    );
}

fn with_template(mut j: Value, restart: &str) -> Value {
    j["spec"]["template"]["spec"]["restartPolicy"] = json!(restart);
    j
}

#[rstest]
#[case::restart_policy_always_is_unsupported(
    with_template(job("bad", json!({})), "Always"),
    "Job.batch \"bad\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
    vec![("FieldValueNotSupported", "spec.template.spec.restartPolicy")]
)]
#[case::negative_parallelism(
    job("bad", json!({"parallelism": -1})),
    "Job.batch \"bad\" is invalid: spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
    vec![("FieldValueInvalid", "spec.parallelism")]
)]
#[case::negative_backoff_limit(
    job("bad", json!({"backoffLimit": -2})),
    "Job.batch \"bad\" is invalid: spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0",
    vec![("FieldValueInvalid", "spec.backoffLimit")]
)]
#[case::indexed_without_completions(
    job("bad", json!({"completionMode": "Indexed", "parallelism": 2})),
    "Job.batch \"bad\" is invalid: spec.completions: Required value: when completion mode is Indexed",
    vec![("FieldValueRequired", "spec.completions")]
)]
#[case::unknown_completion_mode(
    job("bad", json!({"completionMode": "Sometimes"})),
    "Job.batch \"bad\" is invalid: spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\"",
    vec![("FieldValueNotSupported", "spec.completionMode")]
)]
#[case::manual_selector_not_matching_the_template(
    job("bad", json!({"manualSelector": true, "selector": {"matchLabels": {"app": "x"}}})),
    "Job.batch \"bad\" is invalid: spec.template.metadata.labels: Invalid value: {}: `selector` does not match template `labels`",
    vec![("FieldValueInvalid", "spec.template.metadata.labels")]
)]
#[case::manual_selector_missing(
    job("bad", json!({"manualSelector": true})),
    "Job.batch \"bad\" is invalid: spec.selector: Required value",
    vec![("FieldValueRequired", "spec.selector")]
)]
fn invalid_jobs_are_refused_with_upstreams_field_errors(
    #[case] body: Value,
    #[case] message: &str,
    #[case] causes: Vec<(&str, &str)>,
) {
    let c = cluster(false);
    let (code, status) = c.post(JOBS, &body);
    let got_causes: Vec<(&str, &str)> = status
        .pointer("/details/causes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| (s(c, "/reason"), s(c, "/field")))
        .collect();
    assert_eq!(
        (
            code,
            s(&status, "/reason"),
            s(&status, "/message"),
            got_causes
        ),
        (422, "Invalid", message, causes),
        "{status}"
    );
}

#[test]
fn a_jobs_template_and_selector_are_immutable() {
    let c = cluster(false);
    let mut j = create(&c, JOBS, &job("imm", json!({"completions": 2})));
    j["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    j["spec"]["completions"] = json!(3);
    // The controller writes the status meanwhile; this update is not about conflicts.
    if let Some(m) = j.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    let (code, status) = c.request(
        "PUT",
        &format!("{JOBS}/imm"),
        Some("application/json"),
        &j.to_string(),
    );
    let fields: Vec<&str> = status
        .pointer("/details/causes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| s(c, "/field"))
        .collect();
    assert_eq!(
        (code, fields),
        (422, vec!["spec.completions", "spec.template"]),
        "{status}"
    );
}

#[test]
fn failures_past_the_backoff_limit_fail_the_job() {
    let c = cluster(false);
    create(
        &c,
        JOBS,
        &job(
            "flaky",
            json!({"completions": 2, "parallelism": 2, "backoffLimit": 1}),
        ),
    );
    let made = wait_for("two pods", || {
        let pods = pods(&c, "flaky");
        (pods.len() == 2).then_some(pods)
    });
    for p in &made {
        set_phase(&c, s(p, "/metadata/name"), "Failed");
    }
    let failed = wait_for("the job failed", || {
        let job = get_job(&c, "flaky");
        has_condition(&job, "Failed").then_some(job)
    });
    let reason = "BackoffLimitExceeded";
    let message = "Job has reached the specified backoff limit";
    assert_eq!(
        masked_status(&failed),
        json!({"startTime": "TIME", "ready": 0, "terminating": 0, "failed": 2,
               "uncountedTerminatedPods": {},
               "conditions": [condition("FailureTarget", reason, message),
                              condition("Failed", reason, message)]})
    );
    assert_eq!(pods(&c, "flaky").len(), 2, "no replacement once failed");
    assert!(wait_for("the failure event", || {
        let r = event_reasons(&c, "flaky");
        r.contains(&reason.to_string()).then_some(r)
    })
    .contains(&reason.to_string()));
}

#[test]
fn a_job_active_past_its_deadline_fails_and_its_pods_are_deleted() {
    let c = cluster(false);
    create(
        &c,
        JOBS,
        &job(
            "slow",
            json!({"parallelism": 1, "activeDeadlineSeconds": 1}),
        ),
    );
    let failed = wait_for("the job failed", || {
        let job = get_job(&c, "slow");
        has_condition(&job, "Failed").then_some(job)
    });
    let reason = "DeadlineExceeded";
    let message = "Job was active longer than specified deadline";
    assert_eq!(
        (masked_status(&failed), pods(&c, "slow").len()),
        (
            json!({"startTime": "TIME", "ready": 0, "terminating": 0, "failed": 1,
                   "uncountedTerminatedPods": {},
                   "conditions": [condition("FailureTarget", reason, message),
                                  condition("Failed", reason, message)]}),
            0
        )
    );
}

#[test]
fn a_finished_job_with_a_ttl_is_deleted_with_its_pods() {
    let c = cluster(false);
    create(
        &c,
        JOBS,
        &job(
            "brief",
            json!({"completions": 1, "ttlSecondsAfterFinished": 0}),
        ),
    );
    let pod = wait_for("a pod", || pods(&c, "brief").into_iter().next());
    set_phase(&c, s(&pod, "/metadata/name"), "Succeeded");
    wait_for("the job and its pod gone", || {
        (c.get(&format!("{JOBS}/brief")).0 == 404 && pods(&c, "brief").is_empty()).then_some(())
    });
}

#[test]
fn suspending_a_job_deletes_its_pods_and_resuming_makes_them_again() {
    let c = cluster(false);
    create(
        &c,
        JOBS,
        &job("pause", json!({"completions": 2, "parallelism": 2})),
    );
    wait_for("two pods", || (pods(&c, "pause").len() == 2).then_some(()));
    let (code, body) = c.request(
        "PATCH",
        &format!("{JOBS}/pause"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"suspend":true}}"#,
    );
    assert_eq!(code, 200, "{body}");
    let suspended = wait_for("the job suspended without pods", || {
        let job = get_job(&c, "pause");
        (has_condition(&job, "Suspended") && pods(&c, "pause").is_empty()).then_some(job)
    });
    assert_eq!(
        suspended.pointer("/status/conditions/0/reason"),
        Some(&json!("JobSuspended"))
    );
    let (code, body) = c.request(
        "PATCH",
        &format!("{JOBS}/pause"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"suspend":false}}"#,
    );
    assert_eq!(code, 200, "{body}");
    wait_for("two pods again", || {
        (pods(&c, "pause").iter().filter(|p| is_active(p)).count() == 2).then_some(())
    });
    let job = get_job(&c, "pause");
    assert_eq!(
        (
            s(&job, "/status/conditions/0/status"),
            s(&job, "/status/conditions/0/reason")
        ),
        ("False", "JobResumed")
    );
}

/// The controller works from what is stored: a Job half done when its server stopped is
/// finished by the next server on the same data dir, its counted success kept.
#[test]
fn a_job_half_done_before_a_restart_completes_after_it() {
    let dir = tempfile::tempdir().expect("data dir");
    let first = {
        let c = Cluster::with_config(Config {
            data_dir: Some(dir.path().to_path_buf()),
            workload_controllers: true,
            ..Config::default()
        });
        node(&c, "n1");
        create(
            &c,
            JOBS,
            &job("resume", json!({"completions": 2, "parallelism": 1})),
        );
        let first = wait_for("one pod", || pods(&c, "resume").into_iter().next());
        set_phase(&c, s(&first, "/metadata/name"), "Succeeded");
        wait_for("one success counted", || {
            let job = get_job(&c, "resume");
            (job.pointer("/status/succeeded") == Some(&json!(1))).then_some(())
        });
        s(&first, "/metadata/name").to_string()
    };
    let c = Cluster::with_config(Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: true,
        simulate_kubelets: true,
        job_pod_completion: Duration::from_millis(200),
        ..Config::default()
    });
    let done = wait_for("the job complete", || {
        schedule(&c, "resume");
        let job = get_job(&c, "resume");
        has_condition(&job, "Complete").then_some(job)
    });
    let names: BTreeSet<String> = pods(&c, "resume")
        .iter()
        .map(|p| s(p, "/metadata/name").to_string())
        .collect();
    assert_eq!(
        (
            done.pointer("/status/succeeded"),
            names.len(),
            names.contains(&first)
        ),
        (Some(&json!(1 + 1)), 2, true)
    );
}

/// A success recorded in `uncountedTerminatedPods` whose pod lost its finalizer before the
/// controller stopped (it stopped between the two steps) is counted by the next one.
#[test]
fn an_uncounted_success_whose_pod_is_gone_is_counted_after_a_restart() {
    let dir = tempfile::tempdir().expect("data dir");
    {
        let c = Cluster::with_config(Config {
            data_dir: Some(dir.path().to_path_buf()),
            ..Config::default()
        });
        let mut j = create(&c, JOBS, &job("half", json!({"completions": 1})));
        j["status"] = json!({"startTime": "2026-01-01T00:00:00Z", "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {"succeeded": ["gone-pod-uid"]}});
        let (code, body) = c.request(
            "PUT",
            &format!("{JOBS}/half/status"),
            Some("application/json"),
            &j.to_string(),
        );
        assert_eq!(code, 200, "{body}");
    }
    let c = Cluster::with_config(Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: true,
        ..Config::default()
    });
    let done = wait_for("the job complete", || {
        let job = get_job(&c, "half");
        has_condition(&job, "Complete").then_some(job)
    });
    assert_eq!(
        (
            done.pointer("/status/succeeded"),
            done.pointer("/status/uncountedTerminatedPods"),
            pods(&c, "half").len()
        ),
        (Some(&json!(1)), Some(&json!({})), 0)
    );
}

#[test]
fn deleting_a_job_lets_its_pods_go_despite_the_tracking_finalizer() {
    let c = cluster(false);
    create(&c, JOBS, &job("gone", json!({"parallelism": 2})));
    wait_for("two pods", || (pods(&c, "gone").len() == 2).then_some(()));
    let (code, body) = c.request("DELETE", &format!("{JOBS}/gone"), None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("the pods collected", || {
        pods(&c, "gone").is_empty().then_some(())
    });
}

#[test]
fn kubectl_get_jobs_prints_status_completions_and_duration() {
    let c = cluster(true);
    node(&c, "n1");
    create(&c, JOBS, &job("shown", json!({"completions": 1})));
    wait_for("the job complete", || {
        schedule(&c, "shown");
        has_condition(&get_job(&c, "shown"), "Complete").then_some(())
    });
    let out = c.kubectl_ok(&["get", "jobs", "-o", "wide"]);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let header = lines.first().cloned().unwrap_or_default();
    let row = lines.get(1).cloned().unwrap_or_default();
    assert_eq!(
        (
            header,
            row.get(..3).map(<[&str]>::to_vec),
            row.get(5..7).map(<[&str]>::to_vec)
        ),
        (
            vec![
                "NAME",
                "STATUS",
                "COMPLETIONS",
                "DURATION",
                "AGE",
                "CONTAINERS",
                "IMAGES",
                "SELECTOR"
            ],
            Some(vec!["shown", "Complete", "1/1"]),
            Some(vec!["c", "busybox:1.36"])
        ),
        "{out}"
    );
}

//! The scheduling loop with HTTP extenders: the in-tree plugins, an in-memory cluster, and
//! a recording extender on 127.0.0.1. The runtime is multi-threaded because the cycle waits
//! for the extender's reply while the server answers on another worker.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::testing::{make_node, make_pod};
use framework::Status;
use rstest::rstest;
use serde_json::{json, Value};

use super::*;
use crate::builder::SchedulerBuilder;
use crate::clock::FakeClock;
use crate::extender::tests::{filter_reply, item_names, keys, Recorder, Reply};
use crate::memory::MemoryCluster;

struct Harness {
    sched: Scheduler,
    lp: SchedulingLoop,
    cluster: Arc<MemoryCluster>,
}

/// A scheduler with the default profile and one extender, `extender` being the YAML
/// fields after `urlPrefix`; nodes n1, n2, n3 alike.
fn harness(url: &str, extender: &str) -> Harness {
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         extenders:\n- urlPrefix: {url}\n{extender}"
    );
    let cfg = crate::config::load_str(&yaml, "test").unwrap_or_else(|e| panic!("{e}"));
    let cluster = MemoryCluster::new();
    let sched = SchedulerBuilder::new(cfg, "test")
        .client(cluster.clone())
        .clock(Arc::new(FakeClock::new()))
        .parallelism(1)
        .build(tokio::runtime::Handle::current())
        .unwrap_or_else(|e| panic!("{e}"))
        .scheduler;
    cluster.connect(sched.weak_event_handler());
    for n in ["n1", "n2", "n3"] {
        cluster.apply_node(
            make_node(n)
                .capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
                .obj(),
        );
    }
    sched.event_handler().synced();
    let lp = sched.scheduling_loop();
    Harness { sched, lp, cluster }
}

impl Harness {
    /// Schedules the one pod in activeQ and says how it went.
    async fn schedule(&mut self) -> String {
        let Some(a) = self.lp.schedule_one(None) else {
            return "nothing to schedule".to_string();
        };
        self.sched.wait_for_bindings().await;
        match a.outcome {
            AttemptOutcome::Assumed { node } => format!("assumed {node}"),
            AttemptOutcome::Unschedulable { message, .. } => format!("unschedulable: {message}"),
            AttemptOutcome::Error { message } => format!("error: {message}"),
            AttemptOutcome::Skipped { reason } => format!("skipped: {reason}"),
        }
    }
}

fn verbs(server: &Recorder) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extender_filter_and_weighted_prioritize_decide_the_node() {
    // n1 is filtered out; of n2 and n3, alike for the plugins, the extender prefers n2.
    let server = Recorder::start_per_verb(
        BTreeMap::from([
            (
                "filter",
                filter_reply(&["n2", "n3"], json!({"n1": "n1 is reserved"}), json!({})),
            ),
            (
                "prioritize",
                Reply::Json(json!([{"Host": "n2", "Score": 7}, {"Host": "n3", "Score": 2}])),
            ),
        ]),
        Reply::Status(404),
    )
    .await;
    let mut h = harness(
        &server.url,
        "  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 2\n",
    );
    h.cluster
        .apply_pod(make_pod("web").req(&[("cpu", "100m")]).obj());

    assert_eq!(h.schedule().await, "assumed n2");
    assert_eq!(
        verbs(&server),
        ["/scheduler/filter", "/scheduler/prioritize"]
    );
    let requests = server.requests();
    for (_, body) in &requests {
        assert_eq!(keys(body), ["NodeNames", "Nodes", "Pod"]);
        assert_eq!(body["Pod"]["metadata"]["name"], "web");
    }
    let mut filtered = item_names(&requests[0].1["Nodes"]);
    filtered.sort();
    assert_eq!(filtered, ["n1", "n2", "n3"]);
    let mut prioritized = item_names(&requests[1].1["Nodes"]);
    prioritized.sort();
    assert_eq!(prioritized, ["n2", "n3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extender_rejections_are_counted_in_the_failed_scheduling_message() {
    let server = Recorder::start(filter_reply(
        &[],
        json!({"n1": "no gpu left", "n2": "no gpu left"}),
        json!({"n3": "wrong rack"}),
    ))
    .await;
    let mut h = harness(&server.url, "  filterVerb: filter\n");
    h.cluster
        .apply_pod(make_pod("web").req(&[("cpu", "100m")]).obj());

    assert_eq!(
        h.schedule().await,
        "unschedulable: 0/3 nodes are available: 1 wrong rack, 2 no gpu left. \
         preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, \
         2 No preemption victims found for incoming pod."
    );
}

/// A failing extender: its filter answers 500, or nothing within its 200ms httpTimeout.
#[rstest]
#[case::non_ignorable_failure_fails_the_attempt(
    Reply::Status(500),
    false,
    "error: failed filter with extender at URL {url}/filter, code 500"
)]
#[case::ignorable_failure_is_skipped(Reply::Status(500), true, "assumed")]
#[case::non_ignorable_timeout_fails_the_attempt(
    Reply::Hang,
    false,
    "error: filter with extender at URL {url}/filter timed out after 200ms"
)]
#[case::ignorable_timeout_is_skipped(Reply::Hang, true, "assumed")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_extender_filter(
    #[case] reply: Reply,
    #[case] ignorable: bool,
    #[case] want: &str,
) {
    let server = Recorder::start(reply).await;
    let mut h = harness(
        &server.url,
        &format!("  filterVerb: filter\n  ignorable: {ignorable}\n  httpTimeout: 200ms\n"),
    );
    h.cluster
        .apply_pod(make_pod("web").req(&[("cpu", "100m")]).obj());

    let got = h.schedule().await;
    // An ignorable extender leaves the choice to the plugins: any of the three nodes.
    let got = if got.starts_with("assumed n") {
        "assumed".to_string()
    } else {
        got
    };
    assert_eq!(got, want.replace("{url}", &server.url));
    assert_eq!(verbs(&server), ["/scheduler/filter"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prioritize_failure_is_logged_and_ignored() {
    let server = Recorder::start_per_verb(
        BTreeMap::from([("filter", filter_reply(&["n1", "n2"], json!({}), json!({})))]),
        Reply::Status(500),
    )
    .await;
    let mut h = harness(
        &server.url,
        "  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 1\n",
    );
    h.cluster
        .apply_pod(make_pod("web").req(&[("cpu", "100m")]).obj());

    let got = h.schedule().await;
    assert!(got == "assumed n1" || got == "assumed n2", "got {got}");
    assert_eq!(
        verbs(&server),
        ["/scheduler/filter", "/scheduler/prioritize"]
    );
}

#[rstest]
#[case::pod_without_the_managed_resource_is_not_sent(&[("cpu", "100m")], 0)]
#[case::pod_requesting_the_managed_resource_is_sent(&[("cpu", "100m"), ("example.com/gpu", "1")], 1)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_resources_decide_which_pods_the_extender_sees(
    #[case] requests: &[(&str, &str)],
    #[case] calls: usize,
) {
    // The extender passes every node; nodes offer the GPU.
    let server = Recorder::start(filter_reply(&["n1", "n2", "n3"], json!({}), json!({}))).await;
    let mut h = harness(
        &server.url,
        "  filterVerb: filter\n  managedResources: [{name: example.com/gpu}]\n",
    );
    for n in ["n1", "n2", "n3"] {
        h.cluster.apply_node(
            make_node(n)
                .capacity(&[
                    ("cpu", "4"),
                    ("memory", "8Gi"),
                    ("pods", "110"),
                    ("example.com/gpu", "2"),
                ])
                .obj(),
        );
    }
    h.cluster.apply_pod(make_pod("web").req(requests).obj());

    let got = h.schedule().await;
    assert!(got.starts_with("assumed n"), "got {got}");
    assert_eq!(server.requests().len(), calls);
}

/// Nodes n1..n3 have no `example.com/gpu`; the pod requests one, which the extender manages.
#[rstest]
#[case::resource_ignored_by_scheduler_is_left_to_the_extender(true, "assumed", 1)]
#[case::resource_not_ignored_is_checked_by_node_resources_fit(
    false,
    "unschedulable: 0/3 nodes are available: 3 Insufficient example.com/gpu. \
     preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    0
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_by_scheduler(#[case] ignored: bool, #[case] want: &str, #[case] calls: usize) {
    let server = Recorder::start(filter_reply(&["n1", "n2", "n3"], json!({}), json!({}))).await;
    let mut h = harness(
        &server.url,
        &format!(
            "  filterVerb: filter\n  managedResources: [{{name: example.com/gpu, ignoredByScheduler: {ignored}}}]\n"
        ),
    );
    h.cluster.apply_pod(
        make_pod("web")
            .req(&[("cpu", "100m"), ("example.com/gpu", "1")])
            .obj(),
    );

    let got = h.schedule().await;
    let got = if got.starts_with("assumed n") {
        "assumed".to_string()
    } else {
        got
    };
    assert_eq!(got, want);
    assert_eq!(server.requests().len(), calls);
}

/// A binding extender that answers `reply`; `want_writes` the API bindings kubesched made
/// itself and `want_failure` the FailedScheduling message left on the pod, if any.
#[rstest]
#[case::bind_extender_binds_instead_of_default_binder(json!({"Error": ""}), None)]
#[case::bind_extender_error_fails_the_binding(
    json!({"Error": "node is draining"}),
    Some("node is draining")
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_extender(#[case] reply: Value, #[case] want_failure: Option<&str>) {
    let server = Recorder::start(Reply::Json(reply)).await;
    let mut h = harness(&server.url, "  bindVerb: bind\n");
    h.cluster
        .apply_pod(make_pod("web").req(&[("cpu", "100m")]).obj());

    let got = h.schedule().await;
    let node = got.strip_prefix("assumed ").unwrap_or_default().to_string();
    assert!(node.starts_with('n'), "got {got}");
    assert_eq!(
        server.requests(),
        [(
            "/scheduler/bind".to_string(),
            json!({"PodName": "web", "PodNamespace": "default", "PodUID": "uid-web", "Node": node})
        )]
    );
    assert_eq!(h.cluster.writes().bindings, []);
    let failure = h
        .cluster
        .last_status_update("default", "web")
        .and_then(|u| u.condition)
        .map(|c| c.message);
    assert_eq!(failure.as_deref(), want_failure);
}

/// Each node runs one low-priority pod using all its CPU; a high-priority pod needs a node.
/// The preempt extender answers `reply`.
#[rstest]
#[case::extender_keeps_one_candidate_and_its_victim(
    Reply::Json(json!({"NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "uid-low-n2"}], "NumPDBViolations": 0}}})),
    "unschedulable: 0/3 nodes are available: 3 Insufficient cpu.",
    &["low-n2"]
)]
#[case::non_ignorable_preempt_failure_fails_the_preemption(
    Reply::Status(500),
    "unschedulable: 0/3 nodes are available: 3 Insufficient cpu. preemption: failed preempt with extender at URL {url}/preempt, code 500",
    &[]
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_extender(#[case] reply: Reply, #[case] want: &str, #[case] evicted: &[&str]) {
    let server = Recorder::start(reply).await;
    let mut h = harness(&server.url, "  preemptVerb: preempt\n");
    for n in ["n1", "n2", "n3"] {
        h.cluster.apply_pod(
            make_pod(&format!("low-{n}"))
                .req(&[("cpu", "4")])
                .node(n)
                .priority(0)
                .obj(),
        );
    }
    h.cluster
        .apply_pod(make_pod("high").req(&[("cpu", "4")]).priority(100).obj());

    assert_eq!(h.schedule().await, want.replace("{url}", &server.url));
    let (path, body) = server.requests().into_iter().next().unwrap_or_default();
    assert_eq!(path, "/scheduler/preempt");
    assert_eq!(
        keys(&body),
        ["NodeNameToMetaVictims", "NodeNameToVictims", "Pod"]
    );
    assert_eq!(body["NodeNameToMetaVictims"], Value::Null);
    assert_eq!(keys(&body["NodeNameToVictims"]), ["n1", "n2", "n3"]);
    assert_eq!(
        body["NodeNameToVictims"]["n2"]["Pods"][0]["metadata"]["name"],
        "low-n2"
    );
    // Evictions run off the loop: wait for them, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let deleted = loop {
        let deleted: Vec<String> = h
            .cluster
            .writes()
            .deletions
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        if deleted.len() >= evicted.len() || std::time::Instant::now() > deadline {
            break deleted;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(deleted, evicted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_cache_capable_extender_gets_and_returns_node_names() {
    let server = Recorder::start(Reply::Json(json!({
        "NodeNames": ["n3"],
        "FailedNodes": {"n1": "busy", "n2": "busy"}
    })))
    .await;
    let mut h = harness(
        &server.url,
        "  filterVerb: filter\n  nodeCacheCapable: true\n",
    );
    h.cluster
        .apply_pod(make_pod("web").req(&[("cpu", "100m")]).obj());

    assert_eq!(h.schedule().await, "assumed n3");
    let (_, body) = server.requests().into_iter().next().unwrap_or_default();
    assert_eq!(body["Nodes"], Value::Null);
    let mut names: Vec<String> = body["NodeNames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    assert_eq!(names, ["n1", "n2", "n3"]);
}

/// The cycle tries a nominated node first, extenders included; when they reject it, the
/// pass over all nodes evaluates it again. The explanation tells that pass only: each node
/// once, one verdict per extender call that decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nominated_node_rejected_by_extender_is_explained_once() {
    // Sent n1 alone, the reply names nodes that were not sent: the nominated try fails.
    let server = Recorder::start(filter_reply(
        &["n2", "n3"],
        json!({"n1": "n1 is reserved"}),
        json!({}),
    ))
    .await;
    let mut h = harness(&server.url, "  filterVerb: filter\n");
    h.cluster.apply_pod(
        make_pod("web")
            .req(&[("cpu", "100m")])
            .with(|p| {
                p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                    nominated_node_name: Some("n1".to_string()),
                    ..Default::default()
                })
            })
            .obj(),
    );
    let mut e = crate::schedule_one::Explanation::default();
    let a = h.lp.schedule_one(Some(&mut e));
    h.sched.wait_for_bindings().await;

    let filtered: Vec<&str> = e.filter.iter().map(|(n, _)| n.as_str()).collect();
    let url = server.url.clone();
    assert_eq!(
        (
            a.map(|a| matches!(a.outcome, AttemptOutcome::Assumed { .. })),
            filtered,
            e.extender_filter,
            verbs(&server).len(),
        ),
        (
            Some(true),
            vec!["n1", "n2", "n3"],
            vec![crate::schedule_one::ExtenderFilterVerdict {
                extender: url,
                nodes: vec![
                    ("n1".to_string(), Status::unschedulable("n1 is reserved")),
                    ("n2".to_string(), Status::success()),
                    ("n3".to_string(), Status::success()),
                ],
            }],
            2,
        )
    );
}

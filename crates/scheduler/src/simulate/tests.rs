//! `simulate` with HTTP extenders: a recording extender on 127.0.0.1, a profile with no
//! Filter or Score plugin (so the report holds only the extenders' say), and the JSON report
//! compared whole.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rstest::rstest;
use serde_json::{json, Value};

use super::{output, ClusterInput, Simulation};
use crate::builder::SchedulerBuilder;
use crate::extender::tests::{filter_reply, Recorder, Reply};

const CLUSTER: &str = "---
{apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
---
{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
---
{apiVersion: v1, kind: Node, metadata: {name: n3}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
---
{apiVersion: v1, kind: Pod, metadata: {name: web, uid: uid-web}, spec: {containers: [{name: c}]}}
";

/// Simulates `CLUSTER` with one extender (`extender`: its YAML fields after `urlPrefix`)
/// answering `replies` per verb; returns the JSON report and the table with the extender's
/// URL written `<ext>`, and the paths the extender was asked, in order.
fn simulate(
    replies: BTreeMap<&'static str, Reply>,
    extender: &str,
) -> (Value, String, Vec<String>) {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let server = server_rt.block_on(Recorder::start_per_verb(replies, Reply::Status(404)));
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      \
         enabled: [{{name: PrioritySort}}, {{name: DefaultBinder}}]\n      disabled: [{{name: '*'}}]\n\
         extenders:\n- urlPrefix: {}\n{extender}",
        server.url
    );
    let cfg = crate::config::load_str(&yaml, "test").unwrap_or_else(|e| panic!("{e}"));
    let simulation = Simulation::new(SchedulerBuilder::new(cfg, "test").seed(1).parallelism(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut input = ClusterInput::default();
    input
        .add_text(CLUSTER, Path::new("cluster.yaml"), &mut HashMap::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let report = simulation.run(&input);
    let text = output::to_json(&report).replace(&server.url, "<ext>");
    let doc = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let table = output::to_table(&report).replace(&server.url, "<ext>");
    let paths = server.requests().into_iter().map(|(p, _)| p).collect();
    (doc, table, paths)
}

fn success() -> Value {
    json!({"code": "Success", "reasons": []})
}

/// The report of `web` with the fields every case shares.
fn web(fields: Value) -> Value {
    let mut pod = json!({
        "namespace": "default",
        "name": "web",
        "schedulerName": "default-scheduler",
        "message": null,
        "preFilter": {},
        "preScore": {},
        "score": {},
    });
    if let (Some(pod), Some(fields)) = (pod.as_object_mut(), fields.as_object()) {
        pod.extend(fields.clone());
    }
    json!({"pods": [pod]})
}

#[rstest]
#[case::binding_extender_binds_and_is_named_with_weighted_scores(
    BTreeMap::from([
        ("filter", filter_reply(&["n2", "n3"], json!({"n1": "n1 is reserved"}), json!({}))),
        ("prioritize", Reply::Json(json!([{"Host": "n2", "Score": 1}, {"Host": "n3", "Score": 4}]))),
        ("bind", Reply::Json(json!({"Error": ""}))),
    ]),
    "  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 2\n  bindVerb: bind\n",
    web(json!({
        "node": "n3",
        "result": "Scheduled",
        "boundBy": "<ext>",
        "filter": {
            "n1": {"<ext>": {"code": "Unschedulable", "reasons": ["n1 is reserved"]}},
            "n2": {"<ext>": success()},
            "n3": {"<ext>": success()},
        },
        "extenderScore": {"<ext>": {"weight": 2, "scores": {
            "n2": {"score": 1, "added": 20},
            "n3": {"score": 4, "added": 80},
        }}},
        "finalScore": {"n2": 20, "n3": 80},
    })),
    "POD           NODE   RESULT      REASON\n\
     default/web   n3     Scheduled   bound by extender <ext>\n\
     \n\
     default/web: extender <ext>\n  \
     filter      n1 failed: n1 is reserved, n2 passed, n3 passed\n  \
     prioritize  weight 2: n2 1 (+20), n3 4 (+80)\n",
    &["/scheduler/filter", "/scheduler/prioritize", "/scheduler/bind"],
)]
#[case::unresolvable_and_left_out_nodes_are_told_apart(
    BTreeMap::from([
        ("filter", filter_reply(&["n2"], json!({}), json!({"n1": "n1 is gone for good"}))),
    ]),
    "  filterVerb: filter\n",
    web(json!({
        "node": "n2",
        "result": "Scheduled",
        "filter": {
            "n1": {"<ext>": {"code": "UnschedulableAndUnresolvable", "reasons": ["n1 is gone for good"]}},
            "n2": {"<ext>": success()},
            "n3": {"<ext>": {"code": "Unschedulable", "reasons": []}},
        },
        "finalScore": {"n2": 0},
    })),
    "POD           NODE   RESULT      REASON\n\
     default/web   n2     Scheduled\n\
     \n\
     default/web: extender <ext>\n  \
     filter      n1 failed and unresolvable: n1 is gone for good, n2 passed, n3 left out\n",
    &["/scheduler/filter"],
)]
fn extender_say_in_the_report(
    #[case] replies: BTreeMap<&'static str, Reply>,
    #[case] extender: &str,
    #[case] want: Value,
    #[case] want_table: &str,
    #[case] want_paths: &[&str],
) {
    let (report, table, paths) = simulate(replies, extender);
    assert_eq!(
        (report, table.as_str(), paths),
        (
            want,
            want_table,
            want_paths.iter().map(|p| p.to_string()).collect::<Vec<_>>()
        )
    );
}

//! kube-scheduler-simulator's annotations for a small case (two nodes, one tainted, one
//! pod), compared whole; and a preemption's `postfilter-result` and `selected-node`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use framework::testing::{make_node, make_pod};
use serde_json::{json, Value};

use super::*;
use crate::builder::SchedulerBuilder;
use crate::simulate::{output, ClusterInput, Simulation};

fn config() -> crate::config::KubeSchedulerConfiguration {
    crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "test",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The decision `simulate` makes for the pod `web` on two nodes, n2 tainted; and the
/// default profile's score weights.
fn decision() -> (Value, HashMap<&'static str, i64>) {
    let capacity = [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")];
    let mut input = ClusterInput::default();
    input.nodes = vec![
        Arc::new(make_node("n1").capacity(&capacity).obj()),
        Arc::new(
            make_node("n2")
                .capacity(&capacity)
                .taint("dedicated", "db", "NoSchedule")
                .obj(),
        ),
    ];
    input.pods = vec![Arc::new(make_pod("web").req(&[("cpu", "1")]).obj())];
    let builder = SchedulerBuilder::new(config(), "test")
        .seed(1)
        .parallelism(1);
    let weights = builder
        .build_profiles()
        .unwrap_or_else(|e| panic!("{e}"))
        .frameworks[0]
        .score_weights()
        .into_iter()
        .collect();
    let sim = Simulation::new(builder).unwrap_or_else(|e| panic!("{e}"));
    let doc: Value =
        serde_json::from_str(&output::to_json(&sim.run(&input))).unwrap_or_else(|e| panic!("{e}"));
    (doc["pods"][0].clone(), weights)
}

fn parsed(m: &BTreeMap<String, String>) -> BTreeMap<String, Value> {
    m.iter()
        .map(|(k, v)| {
            let v = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()));
            (k.trim_start_matches(PREFIX).to_string(), v)
        })
        .collect()
}

#[test]
fn a_scheduled_pods_annotations_carry_every_verdict_and_score() {
    let (d, weights) = decision();
    let got = parsed(&annotations(&d, &weights));
    // PreFilter skips the plugins with nothing to check for this pod (their Filter does not
    // run: absent from filter-result); a skip's message is empty, as the simulator records
    // a status that is not a success. TaintToleration weighs 3: its normalized 100 is 300.
    let want = BTreeMap::from([
        (
            "filter-result".to_string(),
            json!({
                "n1": {
                    "NodeName": "passed",
                    "NodeResourcesFit": "passed",
                    "NodeUnschedulable": "passed",
                    "TaintToleration": "passed",
                },
                "n2": {
                    "NodeName": "passed",
                    "NodeUnschedulable": "passed",
                    "TaintToleration": "node(s) had untolerated taint(s)",
                },
            }),
        ),
        (
            "finalscore-result".to_string(),
            json!({"n1": {
                "ImageLocality": "0",
                "NodeResourcesBalancedAllocation": "87",
                "NodeResourcesFit": "86",
                "TaintToleration": "300",
            }}),
        ),
        ("postfilter-result".to_string(), json!({})),
        (
            "prefilter-result-status".to_string(),
            json!({
                "DynamicResources": "",
                "InterPodAffinity": "",
                "NodeAffinity": "",
                "NodePorts": "",
                "NodeResourcesFit": "success",
                "NodeVolumeLimits": "",
                "PodTopologySpread": "",
                "VolumeBinding": "",
                "VolumeRestrictions": "",
                "VolumeZone": "",
            }),
        ),
        (
            "prescore-result".to_string(),
            json!({
                "ImageLocality": "success",
                "InterPodAffinity": "",
                "NodeAffinity": "",
                "NodeResourcesBalancedAllocation": "success",
                "NodeResourcesFit": "success",
                "PodTopologySpread": "",
                "TaintToleration": "success",
                "VolumeBinding": "",
            }),
        ),
        (
            "score-result".to_string(),
            json!({"n1": {
                "ImageLocality": "0",
                "NodeResourcesBalancedAllocation": "87",
                "NodeResourcesFit": "86",
                "TaintToleration": "100",
            }}),
        ),
        ("selected-node".to_string(), json!("n1")),
    ]);
    assert_eq!(got, want);
}

#[test]
fn a_preemption_names_the_nominated_node_and_selects_none() {
    let d = json!({
        "schedulerName": "default-scheduler",
        "result": "Unschedulable",
        "node": null,
        "nominatedNode": "n2",
        "preFilter": {},
        "filter": {
            "n1": {"NodeResourcesFit": {"code": "Unschedulable", "reasons": ["Insufficient cpu"]}},
            "n2": {"NodeResourcesFit": {"code": "Unschedulable", "reasons": ["Insufficient cpu"]}},
        },
        "preemption": {
            "n1": {"code": "UnschedulableAndUnresolvable", "reasons": ["no victims"]},
            "n2": {"code": "Success", "reasons": []},
        },
        "preScore": {},
        "score": {},
        "finalScore": {},
    });
    let got = parsed(&annotations(&d, &HashMap::new()));
    let want = BTreeMap::from([
        (
            "filter-result".to_string(),
            json!({
                "n1": {"NodeResourcesFit": "Insufficient cpu"},
                "n2": {"NodeResourcesFit": "Insufficient cpu"},
            }),
        ),
        ("finalscore-result".to_string(), json!({})),
        (
            "postfilter-result".to_string(),
            json!({
                "n1": {},
                "n2": {"DefaultPreemption": "preemption victim"},
            }),
        ),
        ("prefilter-result-status".to_string(), json!({})),
        ("prescore-result".to_string(), json!({})),
        ("score-result".to_string(), json!({})),
        ("selected-node".to_string(), json!("")),
    ]);
    assert_eq!(got, want);
}

//! What the server does to a new object on the way in, as upstream's create strategies do:
//! each case creates one object over HTTP and compares the stored field it changes whole.

use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod_with(labels: Value, spec: Value) -> Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "nginx"}]);
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "labels": labels}, "spec": spec})
}

/// The stored pod's status with the condition's transition time checked and removed (it is
/// the server's clock).
fn status_without_time(created: &Value) -> Value {
    let mut status = created["status"].clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            if let Some(m) = c.as_object_mut() {
                let t = m.remove("lastTransitionTime");
                assert!(
                    t.as_ref()
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.ends_with('Z')),
                    "{t:?}"
                );
            }
        }
    }
    status
}

#[rstest]
#[case::gated_pod_is_pod_scheduled_false_scheduling_gated(
    json!({"schedulingGates": [{"name": "example.com/gate"}]}),
    json!({"phase": "Pending", "qosClass": "BestEffort", "conditions": [{
        "type": "PodScheduled", "status": "False", "lastProbeTime": null,
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates"}]}),
)]
#[case::empty_gate_list_gets_no_condition(
    json!({"schedulingGates": []}),
    json!({"phase": "Pending", "qosClass": "BestEffort"}),
)]
#[case::ungated_pod_gets_no_condition(
    json!({}),
    json!({"phase": "Pending", "qosClass": "BestEffort"}),
)]
fn scheduling_gated_condition_on_create(#[case] spec: Value, #[case] want: Value) {
    let c = Cluster::start();
    let mut body = pod_with(json!({}), spec);
    // A status in the body is dropped on create, so it cannot stand in for the condition.
    body["status"] = json!({"conditions": [
        {"type": "PodScheduled", "status": "True", "reason": "FromTheBody"}]});
    let (code, created) = c.post(PODS, &body);
    assert_eq!(code, 201, "{created}");
    assert_eq!(status_without_time(&created), want);
}

fn term(selector: Value, match_keys: Value, mismatch_keys: Value) -> Value {
    let mut t = json!({"topologyKey": "kubernetes.io/hostname"});
    for (field, v) in [
        ("labelSelector", selector),
        ("matchLabelKeys", match_keys),
        ("mismatchLabelKeys", mismatch_keys),
    ] {
        if !v.is_null() {
            t[field] = v;
        }
    }
    t
}

fn affinity(kind: &str, required: Value, preferred: Value) -> Value {
    json!({kind: {
        "requiredDuringSchedulingIgnoredDuringExecution": [required],
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": preferred}]}})
}

const LABELS: &str = r#"{"app": "web", "rev": "v2", "tenant": "a"}"#;

#[rstest]
#[case::match_label_keys_become_in_requirements_with_the_pods_values(
    affinity("podAffinity",
        term(json!({"matchLabels": {"app": "web"}}), json!(["rev"]), Value::Null),
        term(json!({"matchLabels": {"app": "web"}}), json!(["rev"]), Value::Null)),
    affinity("podAffinity",
        term(json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "rev", "operator": "In", "values": ["v2"]}]}), json!(["rev"]), Value::Null),
        term(json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "rev", "operator": "In", "values": ["v2"]}]}), json!(["rev"]), Value::Null)),
)]
#[case::mismatch_label_keys_become_not_in_requirements_after_existing_expressions(
    affinity("podAntiAffinity",
        term(json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
            Value::Null, json!(["tenant"])),
        term(json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
            json!(["rev"]), json!(["tenant"]))),
    affinity("podAntiAffinity",
        term(json!({"matchExpressions": [{"key": "app", "operator": "Exists"},
            {"key": "tenant", "operator": "NotIn", "values": ["a"]}]}),
            Value::Null, json!(["tenant"])),
        term(json!({"matchExpressions": [{"key": "app", "operator": "Exists"},
            {"key": "rev", "operator": "In", "values": ["v2"]},
            {"key": "tenant", "operator": "NotIn", "values": ["a"]}]}),
            json!(["rev"]), json!(["tenant"]))),
)]
#[case::keys_the_pod_has_no_label_for_are_skipped(
    affinity("podAffinity",
        term(json!({"matchLabels": {"app": "web"}}), json!(["absent"]), json!(["missing"])),
        term(json!({}), json!(["absent", "rev"]), Value::Null)),
    affinity("podAffinity",
        term(json!({"matchLabels": {"app": "web"}}), json!(["absent"]), json!(["missing"])),
        term(json!({"matchExpressions": [{"key": "rev", "operator": "In", "values": ["v2"]}]}),
            json!(["absent", "rev"]), Value::Null)),
)]
#[case::a_term_without_a_label_selector_is_left_alone(
    affinity("podAntiAffinity",
        term(Value::Null, json!(["rev"]), Value::Null),
        term(Value::Null, Value::Null, json!(["tenant"]))),
    affinity("podAntiAffinity",
        term(Value::Null, json!(["rev"]), Value::Null),
        term(Value::Null, Value::Null, json!(["tenant"]))),
)]
fn affinity_label_keys_are_merged_into_the_selector_on_create(
    #[case] given: Value,
    #[case] want: Value,
) {
    let c = Cluster::start();
    let labels: Value = serde_json::from_str(LABELS).expect("labels");
    let (code, created) = c.post(PODS, &pod_with(labels, json!({"affinity": given})));
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["affinity"], want);
    let (_, stored) = c.get(&format!("{PODS}/p"));
    assert_eq!(stored["spec"]["affinity"], want);
}

#[test]
fn affinity_label_keys_are_merged_only_on_create_not_on_update() {
    let c = Cluster::start();
    let labels: Value = serde_json::from_str(LABELS).expect("labels");
    let given = affinity(
        "podAffinity",
        term(json!({}), json!(["rev"]), Value::Null),
        term(json!({}), json!(["rev"]), Value::Null),
    );
    let (code, created) = c.post(PODS, &pod_with(labels, json!({"affinity": given})));
    assert_eq!(code, 201, "{created}");
    let (code, updated) = c.request(
        "PUT",
        &format!("{PODS}/p"),
        Some("application/json"),
        &created.to_string(),
    );
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["affinity"], created["spec"]["affinity"]);
}

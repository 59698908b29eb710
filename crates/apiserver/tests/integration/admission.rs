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

fn spread(selector: Value, match_keys: Value) -> Value {
    let mut c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"});
    if !selector.is_null() {
        c["labelSelector"] = selector;
    }
    if !match_keys.is_null() {
        c["matchLabelKeys"] = match_keys;
    }
    c
}

#[rstest]
#[case::match_label_keys_become_in_requirements_keys_without_a_label_skipped(
    json!([spread(json!({"matchLabels": {"app": "web"}}), json!(["rev", "absent"]))]),
    json!([spread(json!({"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "rev", "operator": "In", "values": ["v2"]}]}), json!(["rev", "absent"]))]),
)]
#[case::a_constraint_without_a_label_selector_is_left_alone(
    json!([spread(Value::Null, json!(["rev"]))]),
    json!([spread(Value::Null, json!(["rev"]))]),
)]
fn topology_spread_label_keys_are_merged_into_the_selector_on_create(
    #[case] given: Value,
    #[case] want: Value,
) {
    let c = Cluster::start();
    let labels: Value = serde_json::from_str(LABELS).expect("labels");
    let body = pod_with(labels, json!({"topologySpreadConstraints": given}));
    let (code, created) = c.post(PODS, &body);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["topologySpreadConstraints"], want);
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

const QUANTITY_REGEX: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

fn bad_request(message: String) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": "BadRequest", "code": 400})
}

/// The 422 for one invalid quantity with its own detail.
fn invalid_with(kind: &str, group: &str, name: &str, field: &str, value: &str, why: &str) -> Value {
    let mut status = invalid(kind, group, name, &[(field, value)]);
    let negative = "must be greater than or equal to 0";
    let fix = |v: &mut Value| {
        if let Some(s) = v.as_str() {
            *v = json!(s.replace(negative, why));
        }
    };
    fix(&mut status["message"]);
    fix(&mut status["details"]["causes"][0]["message"]);
    status
}

/// The 422 for negative quantities, one `(field, value)` each.
fn invalid(kind: &str, group: &str, name: &str, errs: &[(&str, &str)]) -> Value {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let body =
        |value: &str| format!("Invalid value: \"{value}\": must be greater than or equal to 0");
    let each: Vec<String> = errs
        .iter()
        .map(|(field, value)| format!("{field}: {}", body(value)))
        .collect();
    let all = match each.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|(field, value)| {
            json!({"reason": "FieldValueInvalid", "message": body(value), "field": field})
        })
        .collect();
    let mut details = json!({"name": name, "kind": kind, "causes": causes});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("{qualified} \"{name}\" is invalid: {all}"),
           "reason": "Invalid", "details": details, "code": 422})
}

fn pod_resources(resources: Value) -> (&'static str, Value) {
    (
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}}),
    )
}

fn replica_set(resources: Value) -> (&'static str, Value) {
    (
        "/apis/apps/v1/namespaces/default/replicasets",
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
               "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {
                   "metadata": {"labels": {"app": "a"}},
                   "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}}}}),
    )
}

fn claim(storage: Value) -> (&'static str, Value) {
    (
        "/api/v1/namespaces/default/persistentvolumeclaims",
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
               "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": storage}}}}),
    )
}

fn pod_decode_error(e: &str) -> Option<Value> {
    Some(bad_request(format!(
        "Pod in version \"v1\" cannot be handled as a Pod: {e}"
    )))
}

#[rstest]
#[case::a_request_that_does_not_parse_is_a_decode_error(
    pod_resources(json!({"requests": {"cpu": "abc"}})), pod_decode_error(QUANTITY_REGEX))]
#[case::a_limit_with_an_unknown_suffix_is_a_decode_error(
    pod_resources(json!({"limits": {"memory": "1mm"}})),
    pod_decode_error("unable to parse quantity's suffix"))]
#[case::an_empty_quantity_is_a_decode_error(
    pod_resources(json!({"requests": {"cpu": ""}})), pod_decode_error(QUANTITY_REGEX))]
#[case::a_claim_storage_request_that_does_not_parse_is_a_decode_error(
    claim(json!("ten gigs")),
    Some(bad_request(format!(
        "PersistentVolumeClaim in version \"v1\" cannot be handled as a PersistentVolumeClaim: {QUANTITY_REGEX}"))))]
#[case::a_negative_request_is_invalid(
    pod_resources(json!({"requests": {"cpu": "-1"}})),
    Some(invalid("Pod", "", "p", &[("spec.containers[0].resources.requests[cpu]", "-1")])))]
// Both given: upstream defaults a missing request from the limit, which this server does
// not store (see docs/apiserver.md), so a limit alone would get one cause here and two there.
#[case::a_negative_limit_and_request_as_json_numbers_are_invalid_limits_first(
    pod_resources(json!({"limits": {"memory": -5}, "requests": {"memory": -5}})),
    Some(invalid("Pod", "", "p", &[
        ("spec.containers[0].resources.limits[memory]", "-5"),
        ("spec.containers[0].resources.requests[memory]", "-5")])))]
#[case::a_negative_request_in_a_pod_template_is_invalid(
    replica_set(json!({"requests": {"cpu": "-100m"}})),
    Some(invalid("ReplicaSet", "apps", "rs",
        &[("spec.template.spec.containers[0].resources.requests[cpu]", "-100m")])))]
#[case::a_request_above_its_limit_is_invalid(
    pod_resources(json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1500m"}})),
    Some(invalid_with("Pod", "", "p", "spec.containers[0].resources.requests[cpu]", "1500m",
        "must be less than or equal to cpu limit of 1")))]
#[case::a_request_equal_to_its_limit_in_other_units_is_stored(
    pod_resources(json!({"limits": {"memory": "1Gi"}, "requests": {"memory": "1024Mi"}})), None)]
#[case::an_exponent_beyond_int64_parses_and_is_stored(
    pod_resources(json!({"requests": {"cpu": "1e999"}})), None)]
#[case::a_json_number_parses_and_is_stored(
    pod_resources(json!({"requests": {"cpu": 2}})), None)]
#[case::negative_zero_is_not_negative(
    pod_resources(json!({"requests": {"cpu": "-0"}})), None)]
fn quantities_are_judged_as_upstream_decodes_and_validates_them(
    #[case] request: (&str, Value),
    #[case] want: Option<Value>,
) {
    let c = Cluster::start();
    let (path, body) = request;
    let (code, got) = c.post(path, &body);
    match want {
        Some(status) => {
            assert_eq!(got, status);
            let (_, list) = c.get(path);
            assert_eq!(list["items"], json!([]), "nothing was written");
        }
        None => {
            assert_eq!(code, 201, "{got}");
            assert_eq!(
                got["spec"]["containers"][0]["resources"],
                body["spec"]["containers"][0]["resources"]
            );
        }
    }
}

fn priority_class(name: &str, value: i64, global_default: bool, description: &str) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
           "metadata": {"name": name}, "value": value, "globalDefault": global_default,
           "preemptionPolicy": "Never", "description": description})
}

/// Priority admission picks the class the pod names, or the global default, among the
/// stored classes; a class whose description merely spells `"globalDefault":true` is not
/// a default.
#[rstest]
#[case::a_named_class_gives_its_value_and_policy(
    Some("high"),
    json!({"code": 201, "priorityClassName": "high", "priority": 1000, "preemptionPolicy": "Never"}),
)]
#[case::a_named_system_class_gives_its_value(
    Some("system-node-critical"),
    json!({"code": 201, "priorityClassName": "system-node-critical", "priority": 2000001000,
           "preemptionPolicy": "PreemptLowerPriority"}),
)]
#[case::an_unknown_named_class_is_forbidden(
    Some("nope"),
    json!({"code": 403, "message": "pods \"p\" is forbidden: no PriorityClass with name nope was found"}),
)]
#[case::no_class_takes_the_global_default(
    None,
    json!({"code": 201, "priorityClassName": "default", "priority": 10, "preemptionPolicy": "Never"}),
)]
fn priority_admission_picks_the_named_class_or_the_global_default(
    #[case] named: Option<&str>,
    #[case] want: Value,
) {
    let c = Cluster::start();
    const CLASSES: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";
    for class in [
        priority_class("high", 1000, false, ""),
        priority_class("default", 10, true, ""),
        priority_class("spelled", 5, false, r#"not "globalDefault":true"#),
    ] {
        let (code, got) = c.post(CLASSES, &class);
        assert_eq!(code, 201, "{got}");
    }
    let mut body = pod_with(json!({}), json!({}));
    if let Some(n) = named {
        body["spec"]["priorityClassName"] = json!(n);
    }
    let (code, got) = c.post(PODS, &body);
    let seen = if code == 201 {
        json!({"code": code, "priorityClassName": got["spec"]["priorityClassName"],
               "priority": got["spec"]["priority"],
               "preemptionPolicy": got["spec"]["preemptionPolicy"]})
    } else {
        json!({"code": code, "message": got["message"]})
    };
    assert_eq!(seen, want);
}

/// The same with no global default stored: a class whose description spells
/// `"globalDefault":true` is skipped, and the pod gets priority 0.
#[test]
fn a_class_that_only_spells_global_default_is_not_the_default() {
    let c = Cluster::start();
    let class = priority_class("spelled", 5, false, r#""globalDefault":true"#);
    let (code, got) = c.post("/apis/scheduling.k8s.io/v1/priorityclasses", &class);
    assert_eq!(code, 201, "{got}");
    let (code, got) = c.post(PODS, &pod_with(json!({}), json!({})));
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        (
            &got["spec"]["priority"],
            &got["spec"]["preemptionPolicy"],
            got["spec"].get("priorityClassName")
        ),
        (&json!(0), &json!("PreemptLowerPriority"), None)
    );
}

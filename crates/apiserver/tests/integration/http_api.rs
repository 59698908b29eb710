//! The wire protocol, checked with raw HTTP requests: status codes, `Status` bodies, binding,
//! watches.

use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn create_pod(c: &Cluster, body: Value) -> Value {
    let (code, obj) = c.post(PODS, &body);
    assert_eq!(code, 201, "{obj}");
    obj
}

#[test]
fn create_returns_201_with_server_owned_metadata_and_pod_defaults() {
    let c = Cluster::start();
    // Python sends no Content-Type and no apiVersion/kind.
    let (code, p) = c.request(
        "POST",
        PODS,
        None,
        r#"{"metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c"}]}}"#,
    );
    assert_eq!(code, 201, "{p}");
    assert_eq!(
        (p["apiVersion"].as_str(), p["kind"].as_str()),
        (Some("v1"), Some("Pod"))
    );
    assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
    assert_eq!(p["spec"]["priority"], 0);
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(p["metadata"]["name"]
        .as_str()
        .is_some_and(|n| n.starts_with("web-") && n.len() == 9));
    let (code, list) = c.get(PODS);
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PodList");
    assert!(list["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|rv| !rv.is_empty()));
}

#[rstest]
#[case::malformed_json("POST", PODS, Some("application/json"), "{nope", 400, "BadRequest")]
#[case::wrong_kind(
    "POST",
    PODS,
    Some("application/json"),
    r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}"#,
    400,
    "BadRequest"
)]
#[case::wrong_field_type(
    "POST",
    PODS,
    None,
    r#"{"metadata":{"name":"x"},"spec":{"containers":"nginx"}}"#,
    400,
    "BadRequest"
)]
#[case::invalid_name(
    "POST",
    PODS,
    None,
    r#"{"metadata":{"name":"Bad_Name"}}"#,
    422,
    "Invalid"
)]
#[case::no_name("POST", PODS, None, r#"{"metadata":{}}"#, 422, "Invalid")]
#[case::missing_namespace(
    "POST",
    "/api/v1/namespaces/nope/pods",
    None,
    r#"{"metadata":{"name":"x"}}"#,
    404,
    "NotFound"
)]
#[case::unknown_priority_class(
    "POST",
    PODS,
    None,
    r#"{"metadata":{"name":"x"},"spec":{"priorityClassName":"gold","containers":[]}}"#,
    403,
    "Forbidden"
)]
#[case::get_missing(
    "GET",
    "/api/v1/namespaces/default/pods/nope",
    None,
    "",
    404,
    "NotFound"
)]
#[case::unknown_resource("GET", "/api/v1/widgets", None, "", 404, "NotFound")]
#[case::unknown_subresource(
    "GET",
    "/api/v1/namespaces/default/configmaps/x/status",
    None,
    "",
    404,
    "NotFound"
)]
#[case::binding_is_post_only(
    "GET",
    "/api/v1/namespaces/default/pods/x/binding",
    None,
    "",
    405,
    "MethodNotAllowed"
)]
#[case::unknown_patch_type(
    "PATCH",
    "/api/v1/namespaces/default",
    Some("text/plain"),
    "{}",
    415,
    "UnsupportedMediaType"
)]
#[case::unsupported_field_selector(
    "GET",
    "/api/v1/pods?fieldSelector=spec.foo%3Dx",
    None,
    "",
    400,
    "BadRequest"
)]
#[case::protobuf_body_without_an_object_is_a_nameless_one(
    "POST",
    "/api/v1/namespaces",
    Some("application/vnd.kubernetes.protobuf"),
    "k8s\0",
    422,
    "Invalid"
)]
fn errors_are_status_bodies(
    #[case] method: &str,
    #[case] path: &str,
    #[case] content_type: Option<&str>,
    #[case] body: &str,
    #[case] code: u16,
    #[case] reason: &str,
) {
    let c = Cluster::start();
    let (got, status) = c.request(method, path, content_type, body);
    assert_eq!(
        (got, status["reason"].as_str()),
        (code, Some(reason)),
        "{status}"
    );
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], code);
    assert_eq!(c.get(PODS).1["items"], json!([]), "nothing was written");
}

#[test]
fn not_found_and_already_exists_messages_match_upstream() {
    let c = Cluster::start();
    let (_, s) = c.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/l");
    assert_eq!(s["message"], "leases.coordination.k8s.io \"l\" not found");
    assert_eq!(
        s["details"],
        json!({"name": "l", "kind": "leases", "group": "coordination.k8s.io"})
    );
    create_pod(&c, pod("a"));
    let (code, s) = c.post(PODS, &pod("a"));
    assert_eq!((code, s["reason"].as_str()), (409, Some("AlreadyExists")));
    assert_eq!(s["message"], "pods \"a\" already exists");
}

#[test]
fn body_over_the_limit_is_413_and_writes_nothing() {
    let c = Cluster::with_config(apiserver::Config {
        max_body_bytes: 1024,
        ..Default::default()
    });
    let mut big = pod("big");
    big["metadata"]["annotations"] = json!({"x": "y".repeat(4096)});
    let (code, s) = c.post(PODS, &big);
    assert_eq!(
        (code, s["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    assert_eq!(c.get(&format!("{PODS}/big")).0, 404);
}

#[test]
fn update_with_stale_resource_version_is_conflict() {
    let c = Cluster::start();
    let p = create_pod(&c, pod("a"));
    let mut stale = p.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["metadata"]["labels"] = json!({"x": "y"});
    let (code, s) = c.request("PUT", &format!("{PODS}/a"), None, &stale.to_string());
    assert_eq!((code, s["reason"].as_str()), (409, Some("Conflict")));
    assert!(s["message"]
        .as_str()
        .is_some_and(|m| m.contains("the object has been modified")));
    let mut fresh = p;
    fresh["metadata"]["labels"] = json!({"x": "y"});
    fresh["status"] = json!({"phase": "Running"});
    let (code, updated) = c.request("PUT", &format!("{PODS}/a"), None, &fresh.to_string());
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["metadata"]["labels"]["x"], "y");
    assert_eq!(
        updated["status"]["phase"], "Pending",
        "main-resource writes keep status"
    );
    // A patch carrying a resourceVersion is a precondition.
    let (code, _) = c.request(
        "PATCH",
        &format!("{PODS}/a"),
        Some("application/merge-patch+json"),
        r#"{"metadata":{"resourceVersion":"1","labels":{"z":"1"}}}"#,
    );
    assert_eq!(code, 409);
}

#[test]
fn status_subresource_changes_only_status() {
    let c = Cluster::start();
    create_pod(&c, pod("a"));
    let (code, p) = c.request("PATCH", &format!("{PODS}/a/status"), Some("application/strategic-merge-patch+json"),
        r#"{"metadata":{"labels":{"ignored":"yes"}},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#);
    assert_eq!(code, 200, "{p}");
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(p["metadata"].get("labels"), None);
}

/// A status write during a pod's graceful deletion (the scheduler's DisruptionTarget
/// condition, as JSON merge and strategic merge patches) keeps the pod; a DELETE with
/// gracePeriodSeconds=0 then removes it.
#[rstest]
#[case::merge_patch("application/merge-patch+json")]
#[case::strategic_merge_patch("application/strategic-merge-patch+json")]
fn status_patch_keeps_a_pod_in_graceful_deletion(#[case] content_type: &str) {
    let c = Cluster::start();
    let mut bound = pod("a");
    bound["spec"]["nodeName"] = json!("n1");
    create_pod(&c, bound);
    let (deleted, _) = c.request("DELETE", &format!("{PODS}/a"), None, "");
    let (patched, _) = c.request(
        "PATCH",
        &format!("{PODS}/a/status"),
        Some(content_type),
        r#"{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"PreemptionByScheduler"}]}}"#,
    );
    let (code, p) = c.get(&format!("{PODS}/a"));
    let kept = (
        code,
        p.pointer("/metadata/deletionGracePeriodSeconds").cloned(),
        p.pointer("/status/conditions/0/type").cloned(),
    );
    let (finished, _) = c.request(
        "DELETE",
        &format!("{PODS}/a?gracePeriodSeconds=0"),
        None,
        "",
    );
    let (gone, _) = c.get(&format!("{PODS}/a"));
    assert_eq!(
        (deleted, patched, kept, finished, gone),
        (
            200,
            200,
            (200, Some(json!(30)), Some(json!("DisruptionTarget"))),
            200,
            404
        )
    );
}

fn binding(pod: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
           "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

#[rstest]
#[case::binds_an_unbound_pod(pod("a"), binding("a", "n1"), 201, None)]
#[case::already_bound(json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n0", "containers": []}}),
    binding("a", "n1"), 409, Some("Operation cannot be fulfilled on pods/binding \"a\": pod a is already assigned to node \"n0\""))]
#[case::gated(json!({"metadata": {"name": "a"}, "spec": {"schedulingGates": [{"name": "g"}], "containers": []}}),
    binding("a", "n1"), 409, Some("Operation cannot be fulfilled on pods/binding \"a\": pod a has non-empty .spec.schedulingGates"))]
#[case::empty_target(pod("a"), binding("a", ""), 422, None)]
#[case::name_mismatch(pod("a"), binding("b", "n1"), 400, None)]
#[case::stale_uid(pod("a"), json!({"metadata": {"name": "a", "uid": "nope"}, "target": {"name": "n1"}}), 409, None)]
#[case::missing_pod(pod("other"), binding("a", "n1"), 404, None)]
fn binding_rules(
    #[case] existing: Value,
    #[case] body: Value,
    #[case] code: u16,
    #[case] message: Option<&str>,
    #[values(false, true)] legacy_collection: bool,
) {
    let c = Cluster::start();
    create_pod(&c, existing);
    // The legacy collection takes the pod's name from the body, so a mismatch cannot happen.
    if legacy_collection && body["metadata"]["name"] != "a" {
        return;
    }
    let path = if legacy_collection {
        "/api/v1/namespaces/default/bindings".to_string()
    } else {
        format!("{PODS}/a/binding")
    };
    let (got, status) = c.post(&path, &body);
    assert_eq!(got, code, "{status}");
    if let Some(m) = message {
        assert_eq!(status["message"], m);
        assert_eq!(status["details"]["kind"], "pods/binding");
    }
    if code == 201 {
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        );
        let (_, p) = c.get(&format!("{PODS}/a"));
        assert_eq!(p["spec"]["nodeName"], "n1");
        assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
        assert_eq!(p["status"]["conditions"][0]["status"], "True");
    }
}

/// What a binding stores, whole: only `spec.nodeName`, the binding's annotations, the
/// PodScheduled condition (any earlier one replaced, appended after the others), no
/// `status.nominatedNodeName`, a new resourceVersion and the generation raised; every
/// other byte as it was.
#[rstest]
#[case::conditions_nominated_node_and_annotations(
    json!({"metadata": {"annotations": {"keep": "k", "over": "old"}},
           "status": {"phase": "Pending", "nominatedNodeName": "n9",
                      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                                     {"type": "Ready", "status": "False"}]}}),
    json!({"over": "new", "added": "a"}),
    json!({"metadata": {"annotations": {"keep": "k", "over": "new", "added": "a"}},
           "status": {"phase": "Pending",
                      "conditions": [{"type": "Ready", "status": "False"}, "SCHEDULED"]}}),
)]
#[case::no_status_no_annotations(
    json!({}),
    Value::Null,
    json!({"status": {"conditions": ["SCHEDULED"]}}),
)]
#[case::annotations_and_conditions_that_are_not_collections(
    json!({"metadata": {"annotations": "x"}, "status": {"conditions": "y"}}),
    json!({"a": "1"}),
    json!({"metadata": {"annotations": {"a": "1"}}, "status": {"conditions": ["SCHEDULED"]}}),
)]
#[case::status_that_is_not_an_object(
    json!({"status": ["odd"]}),
    Value::Null,
    json!({"status": {"conditions": ["SCHEDULED"]}}),
)]
fn binding_stores_the_pod_with_only_the_binding_changes(
    #[case] pod_extra: Value,
    #[case] annotations: Value,
    #[case] changes: Value,
) {
    let c = Cluster::start();
    let pods = apiserver::resources::lookup("", "v1", "pods").expect("pods");
    let mut pod = pod("a");
    pod["spec"]["schedulerName"] = json!("default-scheduler");
    for (k, v) in pod_extra.as_object().into_iter().flatten() {
        match (pod.get_mut(k), v) {
            (Some(Value::Object(into)), Value::Object(from)) => into.extend(from.clone()),
            _ => pod[k] = v.clone(),
        }
    }
    // Straight in the store: a create over HTTP resets the status.
    let before = c
        .store()
        .create(pods, "default", pod, false)
        .expect("created");
    let mut body = binding("a", "n1");
    if !annotations.is_null() {
        body["metadata"]["annotations"] = annotations;
    }
    let (code, status) = c.post(&format!("{PODS}/a/binding"), &body);
    assert_eq!(code, 201, "{status}");
    let (code, stored) = c.request_raw("GET", &format!("{PODS}/a"), None, "");
    assert_eq!(code, 200);
    let got: Value = serde_json::from_slice(&stored).expect("JSON");

    let mut want = (*before).clone();
    want["spec"]["nodeName"] = json!("n1");
    want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"].clone();
    // The store raises the generation of any write that changes the spec.
    want["metadata"]["generation"] = json!(2);
    if let Some(status) = want["status"].as_object_mut() {
        status.remove("nominatedNodeName");
    }
    for (k, v) in changes.as_object().into_iter().flatten() {
        for (field, value) in v.as_object().into_iter().flatten() {
            if !want[k].is_object() {
                want[k] = json!({});
            }
            want[k][field] = value.clone();
        }
    }
    let time = got["status"]["conditions"]
        .as_array()
        .and_then(|c| c.last())
        .map(|c| c["lastTransitionTime"].clone())
        .unwrap_or(Value::Null);
    assert!(time.as_str().is_some_and(|t| t.ends_with('Z')), "{got}");
    if let Some(conditions) = want["status"]["conditions"].as_array_mut() {
        for cond in conditions.iter_mut().filter(|c| *c == "SCHEDULED") {
            *cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                           "lastTransitionTime": time});
        }
    }
    assert_ne!(
        got["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(got, want);
    assert_eq!(
        String::from_utf8_lossy(&stored),
        serde_json::to_string(&want).expect("encodes")
    );
}

fn watch_lines(c: &Cluster, query: &str) -> Vec<Value> {
    let (code, body) = c.request_raw(
        "GET",
        &format!("{PODS}?watch=true&timeoutSeconds=1&{query}"),
        None,
        "",
    );
    assert_eq!(code, 200);
    String::from_utf8_lossy(&body)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect()
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn watch_from_rv_replays_only_later_events_with_selector_transitions() {
    let c = Cluster::start();
    let a = create_pod(&c, pod("a"));
    let rv = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    create_pod(&c, pod("b"));
    c.post(&format!("{PODS}/a/binding"), &binding("a", "n1"));
    c.request(
        "DELETE",
        &format!("{PODS}/b"),
        Some("application/json"),
        r#"{"propagationPolicy":"Background"}"#,
    );
    let all = watch_lines(&c, &format!("resourceVersion={rv}"));
    assert_eq!(types(&all), ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(all[0]["object"]["kind"], "Pod", "watch objects carry kind");
    // Unscheduled pods: binding moves `a` out of the selector.
    let unscheduled = watch_lines(
        &c,
        &format!("resourceVersion={rv}&fieldSelector=spec.nodeName%3D"),
    );
    assert_eq!(types(&unscheduled), ["ADDED", "DELETED", "DELETED"]);
    assert_eq!(unscheduled[1]["object"]["metadata"]["name"], "a");
    // From "0": one synthetic ADDED per current object.
    let from_zero = watch_lines(&c, "resourceVersion=0");
    assert_eq!(types(&from_zero), ["ADDED"]);
}

#[test]
fn watch_from_a_compacted_rv_streams_410_expired() {
    let c = Cluster::with_config(apiserver::Config {
        event_log_capacity: 2,
        ..Default::default()
    });
    for n in ["a", "b", "c", "d"] {
        create_pod(&c, pod(n));
    }
    let events = watch_lines(&c, "resourceVersion=2");
    assert_eq!(types(&events), ["ERROR"]);
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
}

#[test]
fn send_initial_events_ends_with_the_annotated_bookmark() {
    let c = Cluster::start();
    create_pod(&c, pod("a"));
    let events = watch_lines(
        &c,
        "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
    );
    assert_eq!(types(&events), ["ADDED", "BOOKMARK"]);
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(events[1]["object"]["kind"], "Pod");
}

#[test]
fn discovery_version_health_and_openapi() {
    let c = Cluster::start();
    assert_eq!(c.get("/version").1["major"], "1");
    assert_eq!(
        c.request_raw("GET", "/healthz", None, ""),
        (200, b"ok".to_vec())
    );
    let groups = c.get("/apis").1;
    assert!(groups["groups"]
        .as_array()
        .is_some_and(|g| g.iter().any(|g| g["name"] == "coordination.k8s.io")));
    let core = c.get("/api/v1").1;
    let pods = core["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "pods"))
        .cloned();
    assert_eq!(pods.map(|p| p["shortNames"].clone()), Some(json!(["po"])));
    let idx = c.get("/openapi/v3").1;
    let url = idx["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(c.get(&url).0, 200);
}

#[test]
fn events_k8s_io_events_are_core_events() {
    let c = Cluster::start();
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
                    "regarding": {"kind": "Pod", "name": "a", "namespace": "default"},
                    "note": "placed", "reason": "Scheduled", "type": "Normal", "action": "Binding",
                    "reportingController": "kubesched", "reportingInstance": "kubesched-1",
                    "eventTime": "2026-01-01T00:00:00.000000Z"});
    let (code, created) = c.post("/apis/events.k8s.io/v1/namespaces/default/events", &ev);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["note"], "placed");
    let (_, core) =
        c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Da");
    assert_eq!(core["items"][0]["message"], "placed");
    assert_eq!(core["items"][0]["involvedObject"]["name"], "a");
}

fn running_pod(c: &Cluster, name: &str) {
    let mut p = pod(name);
    p["metadata"]["labels"] = json!({"app": "web"});
    create_pod(c, p);
    let (code, _) = c.request(
        "PATCH",
        &format!("{PODS}/{name}/status"),
        Some("application/merge-patch+json"),
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
    );
    assert_eq!(code, 200);
}

#[rstest]
#[case::budget_exhausted(2, 429)]
#[case::budget_allows_one(1, 201)]
fn eviction_honours_the_disruption_budget(#[case] min_available: i64, #[case] code: u16) {
    let c = Cluster::start();
    running_pod(&c, "a");
    running_pod(&c, "b");
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
                     "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}});
    assert_eq!(
        c.post(
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            &pdb
        )
        .0,
        201
    );
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": "a", "namespace": "default"}, "deleteOptions": {}});
    let (got, status) = c.post(&format!("{PODS}/a/eviction"), &eviction);
    assert_eq!(got, code, "{status}");
    let still_there = c.get(&format!("{PODS}/a")).0 == 200;
    if code == 429 {
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(
            status["details"]["causes"][0]["message"],
            "The disruption budget web needs 2 healthy pods and has 2 currently"
        );
        assert!(still_there);
    } else {
        assert_eq!(status["status"], "Success");
        assert!(!still_there);
    }
}

#[test]
fn discovery_lists_eviction_with_group_and_version_for_drain() {
    let c = Cluster::start();
    let core = c.get("/api/v1").1;
    let ev = core["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "pods/eviction"))
        .cloned();
    assert_eq!(
        ev.map(|e| (e["group"].clone(), e["version"].clone())),
        Some((json!("policy"), json!("v1")))
    );
}

#[rstest]
#[case::apply_with_string_metadata(
    "PATCH",
    "/api/v1/namespaces/default/configmaps/x",
    Some("application/apply-patch+yaml"),
    r#"{"metadata":"x"}"#,
    400
)]
#[case::create_with_string_metadata("POST", PODS, None, r#"{"metadata":"x"}"#, 400)]
#[case::patch_turning_spec_into_a_string(
    "PATCH",
    "/api/v1/namespaces/default",
    Some("application/merge-patch+json"),
    r#"{"spec":"x"}"#,
    400
)]
#[case::json_patch_on_a_missing_object(
    "PATCH",
    "/api/v1/nodes/nope",
    Some("application/json-patch+json"),
    "[]",
    404
)]
#[case::binding_with_a_non_object_body(
    "POST",
    "/api/v1/namespaces/default/pods/a/binding",
    None,
    "[1]",
    400
)]
#[case::non_utf8_query("GET", "/api/v1/pods?labelSelector=%ff%fe", None, "", 400)]
fn malformed_requests_get_status_errors_and_the_server_keeps_serving(
    #[case] method: &str,
    #[case] path: &str,
    #[case] content_type: Option<&str>,
    #[case] body: &str,
    #[case] code: u16,
) {
    let c = Cluster::start();
    let (got, status) = c.request(method, path, content_type, body);
    assert_eq!(got, code, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(c.get("/api/v1/namespaces/default").0, 200, "still serving");
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|o| {
                    let meta = &o["metadata"];
                    match meta["namespace"].as_str() {
                        Some(ns) if ns != "default" => {
                            format!("{ns}/{}", meta["name"].as_str().unwrap_or(""))
                        }
                        _ => meta["name"].as_str().unwrap_or("").to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn continue_of(list: &Value) -> String {
    list["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Every page of a list shows the first page's state: a pod created or deleted between pages
/// does not show (a kept snapshot), and the resourceVersion stays the first page's.
#[test]
fn lists_come_in_pages_at_the_first_pages_resource_version() {
    let c = Cluster::start();
    for n in ["a", "b", "c", "d", "e"] {
        create_pod(&c, pod(n));
    }
    let (_, p1) = c.get(&format!("{PODS}?limit=2"));
    create_pod(&c, pod("bb"));
    let (code, _) = c.request("DELETE", &format!("{PODS}/e"), None, "");
    assert_eq!(code, 200);
    let (_, p2) = c.get(&format!("{PODS}?limit=2&continue={}", continue_of(&p1)));
    let (_, p3) = c.get(&format!("{PODS}?limit=2&continue={}", continue_of(&p2)));
    let (_, now) = c.get(&format!("{PODS}?limit=10"));
    let rv = |l: &Value| l["metadata"]["resourceVersion"].clone();
    let remaining = |l: &Value| l["metadata"]["remainingItemCount"].clone();
    assert_eq!(
        (
            (names(&p1), remaining(&p1)),
            (names(&p2), remaining(&p2), rv(&p2) == rv(&p1)),
            (names(&p3), p3["metadata"].clone()),
            (names(&now), now["metadata"].get("continue").is_some()),
        ),
        (
            (vec!["a".to_string(), "b".into()], json!(3)),
            (vec!["c".to_string(), "d".into()], json!(1), true),
            (vec!["e".to_string()], json!({"resourceVersion": rv(&p1)})),
            (
                vec![
                    "a".to_string(),
                    "b".into(),
                    "bb".into(),
                    "c".into(),
                    "d".into()
                ],
                false
            ),
        )
    );
}

#[test]
fn pages_across_namespaces_and_with_selectors() {
    let c = Cluster::start();
    c.seed_pods("default", 3);
    c.seed_pods("kube-system", 2);
    let (_, p1) = c.get("/api/v1/pods?limit=4");
    let (_, p2) = c.get(&format!(
        "/api/v1/pods?limit=4&continue={}",
        continue_of(&p1)
    ));
    // With a selector: pages of matching pods, no remainingItemCount.
    let selected = "/api/v1/pods?limit=1&fieldSelector=metadata.name!%3Dp-0001";
    let (_, s1) = c.get(selected);
    let (_, s2) = c.get(&format!("{selected}&continue={}", continue_of(&s1)));
    assert_eq!(
        (
            names(&p1),
            p1["metadata"]["remainingItemCount"].clone(),
            names(&p2),
            names(&s1),
            s1["metadata"].get("remainingItemCount").is_some(),
            names(&s2),
        ),
        (
            vec![
                "p-0000".to_string(),
                "p-0001".into(),
                "p-0002".into(),
                "kube-system/p-0000".into()
            ],
            json!(1),
            vec!["kube-system/p-0001".to_string()],
            vec!["p-0000".to_string()],
            false,
            vec!["p-0002".to_string()],
        )
    );
}

fn raw_token(v: Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

#[test]
fn an_expired_continue_token_is_410_with_a_token_to_continue_inconsistently() {
    let c = Cluster::start();
    for n in ["a", "b", "c"] {
        create_pod(&c, pod(n));
    }
    // resourceVersion 1 was never a list's first page here: nothing kept, state changed since.
    let stale = raw_token(json!({"v": "meta.k8s.io/v1", "rv": 1, "start": "a\u{0}"}));
    let (code, status) = c.get(&format!("{PODS}?limit=1&continue={stale}"));
    let next = continue_of(&status);
    let mut without_token = status.clone();
    without_token["metadata"] = json!({});
    let (_, rest) = c.get(&format!("{PODS}?limit=5&continue={next}"));
    assert_eq!(
        (code, without_token, names(&rest)),
        (
            410,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                "reason": "Expired", "code": 410}),
            vec!["b".to_string(), "c".into()],
        )
    );
}

#[rstest]
#[case::garbled(
    "continue=xyz!",
    "invalid continue token: continue key is not valid: Invalid symbol 33, offset 3."
)]
#[case::with_a_resource_version(
    &format!("continue={}&resourceVersion=5", raw_token(json!({"v": "meta.k8s.io/v1", "rv": 5, "start": "a\u{0}"}))),
    "specifying resource version is not allowed when using continue"
)]
#[case::bad_limit("limit=ten", "invalid limit \"ten\": invalid digit found in string")]
fn bad_paging_parameters_are_400(#[case] query: &str, #[case] message: &str) {
    let c = Cluster::start();
    assert_eq!(
        c.get(&format!("{PODS}?{query}")),
        (
            400,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": "BadRequest", "code": 400})
        )
    );
}

/// DeleteOptions' gracePeriodSeconds, from the body or the query: a second delete may only
/// shorten the grace period; 0 removes the pod.
#[test]
fn graceful_deletion_of_a_bound_pod_over_http() {
    let c = Cluster::start();
    let mut p = pod("a");
    p["spec"]["nodeName"] = json!("n1");
    create_pod(&c, p);
    let delete = |query: &str, body: &str| {
        let ct = (!body.is_empty()).then_some("application/json");
        c.request("DELETE", &format!("{PODS}/a{query}"), ct, body)
    };
    let grace =
        |(code, obj): (u16, Value)| (code, obj["metadata"]["deletionGracePeriodSeconds"].clone());
    let first = grace(delete(
        "",
        r#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":20}"#,
    ));
    let longer = grace(delete("?gracePeriodSeconds=25", ""));
    let shorter = grace(delete("?gracePeriodSeconds=5", ""));
    let bad = delete("", r#"{"gracePeriodSeconds":"soon"}"#);
    let gone = delete("", r#"{"gracePeriodSeconds":0}"#).0;
    assert_eq!(
        (
            first,
            longer,
            shorter,
            bad,
            gone,
            c.get(&format!("{PODS}/a")).0
        ),
        (
            (200, json!(20)),
            (200, json!(20)),
            (200, json!(5)),
            (
                400,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "error decoding DeleteOptions: gracePeriodSeconds: expected an integer, got \"soon\"",
                "reason": "BadRequest", "code": 400})
            ),
            200,
            404
        )
    );
}

#[test]
fn creating_in_a_terminating_namespace_is_403_namespace_terminating() {
    let c = Cluster::start();
    let (code, _) = c.post("/api/v1/namespaces", &json!({"metadata": {"name": "team"}}));
    assert_eq!(code, 201);
    let mut bound = pod("a");
    bound["spec"]["nodeName"] = json!("n1");
    let (code, _) = c.post("/api/v1/namespaces/team/pods", &bound);
    assert_eq!(code, 201);
    let (code, ns) = c.request("DELETE", "/api/v1/namespaces/team", None, "");
    assert_eq!((code, &ns["status"]["phase"]), (200, &json!("Terminating")));
    assert_eq!(
        c.post("/api/v1/namespaces/team/pods", &pod("b")),
        (
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "pods \"b\" is forbidden: unable to create new content in namespace team because it is being terminated",
                "reason": "Forbidden", "code": 403,
                "details": {"name": "b", "kind": "pods", "causes": [{"reason": "NamespaceTerminating",
                    "message": "unable to create new content in namespace team because it is being terminated",
                    "field": "metadata.namespace"}]}})
        )
    );
}

#[test]
fn openapi_v3_of_an_unserved_group_version_is_404_with_a_status() {
    let c = Cluster::start();
    assert_eq!(
        c.get("/openapi/v3/apis/nope.example.com/v1"),
        (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource",
                "reason": "NotFound", "code": 404, "details": {}})
        )
    );
}

/// Sends a watch on configmaps over a raw connection and returns the connection unread.
fn open_configmap_watch(c: &Cluster) -> std::net::TcpStream {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(c.addr).expect("connect");
    write!(
        s,
        "GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=120 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        c.addr
    )
    .expect("write request");
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    s
}

/// Reads `conn` until `stop(added events so far)` or the end of the response; returns how
/// many ADDED events it read and whether the response ended.
fn read_added(conn: &mut std::net::TcpStream, stop: impl Fn(usize) -> bool) -> (usize, bool) {
    use std::io::Read as _;
    const NEEDLE: &[u8] = br#"{"type":"ADDED""#;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let (mut added, mut from) = (0, 0);
    loop {
        let n = match conn.read(&mut chunk) {
            Ok(0) => return (added, true),
            Ok(n) => n,
            Err(_) => return (added, false),
        };
        buf.extend_from_slice(&chunk[..n]);
        // Count each match once: those starting at `from` or later.
        while let Some(at) = buf[from..].windows(NEEDLE.len()).position(|w| w == NEEDLE) {
            added += 1;
            from += at + 1;
        }
        from = from.max(buf.len().saturating_sub(NEEDLE.len() - 1));
        // Keep only the tail a match may still start in.
        buf.drain(..from);
        from = 0;
        if stop(added) {
            return (added, false);
        }
    }
}

/// Polls `done` until it holds or 20 seconds pass.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

#[test]
fn a_stalled_watcher_is_ended_at_its_byte_bound_and_others_keep_watching() {
    const OBJECTS: usize = 24;
    let c = Cluster::with_config(apiserver::Config {
        watch_backlog_bytes: 2 << 20,
        ..Default::default()
    });
    let store = c.store().clone();
    // The namespace controller's watch.
    eventually(|| store.watch_count() >= 1);
    let baseline = store.watch_count();
    let mut stalled = open_configmap_watch(&c);
    let mut reader = open_configmap_watch(&c);
    let reading = std::thread::spawn(move || {
        let seen = read_added(&mut reader, |n| n >= OBJECTS);
        // Kept open: this watch goes on.
        (seen, reader)
    });
    let both_open = eventually(|| store.watch_count() == baseline + 2);
    let configmaps = apiserver::resources::lookup("", "v1", "configmaps").expect("served");
    let big = "x".repeat(1 << 20);
    for i in 0..OBJECTS {
        let cm = json!({"metadata": {"name": format!("cm-{i:02}")}, "data": {"big": big}});
        store
            .create(configmaps, "default", cm, false)
            .expect("created");
    }
    let ((seen, _), _reader) = reading.join().expect("reader");
    let stalled_ended = eventually(|| store.watch_count() == baseline + 1);
    // Now read what the stalled watcher was sent: less than everything, then the end.
    let (stalled_got, stalled_response_ended) = read_added(&mut stalled, |_| false);
    assert_eq!(
        (
            both_open,
            seen,
            stalled_ended,
            stalled_got < OBJECTS,
            stalled_response_ended
        ),
        (true, OBJECTS, true, true, true),
        "the stalled watcher got {stalled_got} of {OBJECTS}"
    );
}

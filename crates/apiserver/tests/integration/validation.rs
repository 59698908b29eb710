//! Requests a real API server refuses before or while decoding them: options it does not
//! know, bodies that are not what the URL names. Each case compares the whole `Status`.

use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn unsupported(options: &str, field: &str, value: &str, supported: &str) -> Value {
    let body = format!("Unsupported value: {value}: supported values: {supported}");
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("{options}.meta.k8s.io \"\" is invalid: {field}: {body}"),
           "reason": "Invalid",
           "details": {"group": "meta.k8s.io", "kind": options,
                       "causes": [{"reason": "FieldValueNotSupported", "message": body, "field": field}]},
           "code": 422})
}

const FIELD_VALIDATIONS: &str = r#""", "Ignore", "Strict", "Warn""#;

#[rstest]
#[case::create_with_an_unknown_dry_run_value(
    "POST",
    "",
    "dryRun=Some",
    Some(unsupported("CreateOptions", "dryRun", r#"["Some"]"#, r#""All""#))
)]
#[case::create_with_all_and_an_unknown_dry_run_value(
    "POST",
    "",
    "dryRun=All&dryRun=Some",
    Some(unsupported("CreateOptions", "dryRun", r#"["All","Some"]"#, r#""All""#))
)]
#[case::create_with_an_unknown_field_validation(
    "POST",
    "",
    "fieldValidation=Loud",
    Some(unsupported("CreateOptions", "fieldValidation", r#""Loud""#, FIELD_VALIDATIONS))
)]
#[case::update_with_an_unknown_field_validation(
    "PUT",
    "/p",
    "fieldValidation=strict",
    Some(unsupported("UpdateOptions", "fieldValidation", r#""strict""#, FIELD_VALIDATIONS))
)]
#[case::patch_with_an_unknown_dry_run_value(
    "PATCH",
    "/p",
    "dryRun=true",
    Some(unsupported("PatchOptions", "dryRun", r#"["true"]"#, r#""All""#))
)]
#[case::delete_with_an_unknown_dry_run_value(
    "DELETE",
    "/p",
    "dryRun=server",
    Some(unsupported("DeleteOptions", "dryRun", r#"["server"]"#, r#""All""#))
)]
#[case::create_with_known_options_is_a_dry_run(
    "POST",
    "",
    "dryRun=All&fieldValidation=Strict",
    None
)]
fn write_options_are_validated_before_the_body(
    #[case] method: &str,
    #[case] suffix: &str,
    #[case] query: &str,
    #[case] want: Option<Value>,
) {
    let c = Cluster::start();
    let (code, _) = c.post(PODS, &pod("p"));
    assert_eq!(code, 201);
    let (content_type, body) = match method {
        "PATCH" => (
            Some("application/merge-patch+json"),
            r#"{"metadata":{"labels":{"a":"b"}}}"#.to_string(),
        ),
        "DELETE" => (None, String::new()),
        _ => {
            let mut p = pod("p");
            if method == "POST" {
                p["metadata"]["name"] = json!("q");
            }
            (Some("application/json"), p.to_string())
        }
    };
    let (code, got) = c.request(
        method,
        &format!("{PODS}{suffix}?{query}"),
        content_type,
        &body,
    );
    match want {
        Some(status) => assert_eq!(got, status),
        None => assert_eq!(code, 201, "{got}"),
    }
    // Nothing was written: the pod is as created, and no other exists.
    let (_, list) = c.get(PODS);
    let names: Vec<&Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["metadata"]["name"])
        .collect();
    assert_eq!(names, vec![&json!("p")]);
    let (_, stored) = c.get(&format!("{PODS}/p"));
    assert_eq!(stored["metadata"].get("labels"), None);
}

fn bad_request(message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": "BadRequest", "code": 400})
}

#[rstest]
#[case::kind_of_the_wrong_json_type(
    PODS, "",
    r#"{"apiVersion":"v1","kind":5,"metadata":{"name":"x"}}"#,
    r#"the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({"apiVersion":"v1","kind":5,"m ...)"#)]
#[case::api_version_of_the_wrong_json_type(
    PODS, "",
    r#"{"apiVersion":["v1"],"kind":"Pod","metadata":{"name":"x"}}"#,
    r#"the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go struct field .apiVersion of type string ({"apiVersion":["v1"],"kind":"P ...)"#)]
#[case::binding_body_of_another_kind(
    "/api/v1/namespaces/default/pods/p/binding", "",
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"target":{"name":"n1"}}"#,
    r#"Pod in version "v1" cannot be handled as a Binding: converting (v1.Pod) to (core.Binding): unknown conversion"#)]
#[case::legacy_binding_body_of_another_kind(
    "/api/v1/namespaces/default/bindings", "",
    r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"p"},"target":{"name":"n1"}}"#,
    r#"Node in version "v1" cannot be handled as a Binding: converting (v1.Node) to (core.Binding): unknown conversion"#)]
#[case::body_namespace_other_than_the_urls(
    PODS, "",
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#,
    "the namespace of the provided object does not match the namespace sent on the request")]
#[case::duplicate_fields_under_strict_validation(
    PODS, "?fieldValidation=Strict",
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","name":"y"},"spec":{"containers":[{"name":"c","image":"nginx","image":"busybox"}]}}"#,
    r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: duplicate field "metadata.name", duplicate field "spec.containers[0].image""#)]
#[case::a_duplicated_unknown_field_is_reported_once_as_unknown(
    PODS, "?fieldValidation=Strict",
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"nope":1,"nope":2,"containers":[{"name":"c","image":"nginx"}]}}"#,
    r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.nope""#)]
fn bodies_a_real_server_cannot_decode_are_bad_requests(
    #[case] path: &str,
    #[case] query: &str,
    #[case] body: &str,
    #[case] message: &str,
) {
    let c = Cluster::start();
    let (code, _) = c.post(PODS, &pod("p"));
    assert_eq!(code, 201);
    let (_, got) = c.request(
        "POST",
        &format!("{path}{query}"),
        Some("application/json"),
        body,
    );
    assert_eq!(got, bad_request(message));
    let (_, list) = c.get(PODS);
    let names: Vec<&Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["metadata"]["name"])
        .collect();
    assert_eq!(names, vec![&json!("p")], "nothing was written");
    let (_, stored) = c.get(&format!("{PODS}/p"));
    assert_eq!(stored["spec"].get("nodeName"), None, "nothing was bound");
}

#[rstest]
#[case::ignore(
    "?fieldValidation=Ignore",
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","name":"y"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#,
    "y"
)]
#[case::default_of_this_server(
    "",
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","name":"y"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#,
    "y"
)]
fn duplicate_fields_outside_strict_validation_keep_the_last(
    #[case] query: &str,
    #[case] body: &str,
    #[case] name: &str,
) {
    let c = Cluster::start();
    let (code, got) = c.request(
        "POST",
        &format!("{PODS}{query}"),
        Some("application/json"),
        body,
    );
    assert_eq!(
        (code, &got["metadata"]["name"]),
        (201, &json!(name)),
        "{got}"
    );
}

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// The 422 upstream answers for name errors: `(field, value, why)` each.
fn invalid_name(kind: &str, group: &str, name: &str, errs: &[(&str, &str, &str)]) -> Value {
    let bodies: Vec<String> = errs
        .iter()
        .map(|(_, value, why)| format!("Invalid value: \"{value}\": {why}"))
        .collect();
    let each: Vec<String> = errs
        .iter()
        .zip(&bodies)
        .map(|((field, _, _), body)| format!("{field}: {body}"))
        .collect();
    let all = if each.len() == 1 {
        each[0].clone()
    } else {
        format!("[{}]", each.join(", "))
    };
    let causes: Vec<Value> = errs
        .iter()
        .zip(&bodies)
        .map(|((field, _, _), body)| json!({"reason": "FieldValueInvalid", "message": body, "field": field}))
        .collect();
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut details = json!({"name": name, "kind": kind, "causes": causes});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("{qualified} \"{name}\" is invalid: {all}"),
           "reason": "Invalid", "details": details, "code": 422})
}

const SERVICES: &str = "/api/v1/namespaces/default/services";
const NAMESPACES: &str = "/api/v1/namespaces";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[rstest]
#[case::pod_name_with_upper_case(PODS, json!({"name": "Web"}),
    Some(invalid_name("Pod", "", "Web", &[("metadata.name", "Web", SUBDOMAIN)])))]
#[case::pod_name_with_an_empty_dns_label(PODS, json!({"name": "a..b"}),
    Some(invalid_name("Pod", "", "a..b", &[("metadata.name", "a..b", SUBDOMAIN)])))]
#[case::pod_name_too_long(PODS, json!({"name": "a".repeat(254)}),
    Some(invalid_name("Pod", "", &"a".repeat(254),
        &[("metadata.name", &"a".repeat(254), "must be no more than 253 characters")])))]
#[case::pod_name_with_dots_is_a_subdomain(PODS, json!({"name": "web.v1"}), None)]
#[case::namespace_name_with_a_dot(NAMESPACES, json!({"name": "a.b"}),
    Some(invalid_name("Namespace", "", "a.b", &[("metadata.name", "a.b", LABEL)])))]
#[case::namespace_name_too_long_and_upper_case(NAMESPACES, json!({"name": "A".repeat(64)}),
    Some(invalid_name("Namespace", "", &"A".repeat(64), &[
        ("metadata.name", &"A".repeat(64), "must be no more than 63 characters"),
        ("metadata.name", &"A".repeat(64), LABEL)])))]
#[case::service_name_starting_with_a_digit(SERVICES, json!({"name": "1web"}),
    Some(invalid_name("Service", "", "1web", &[("metadata.name", "1web", DNS1035)])))]
#[case::namespace_name_starting_with_a_digit(NAMESPACES, json!({"name": "1web"}), None)]
#[case::configmap_generate_name_ending_in_a_dash(CONFIGMAPS, json!({"generateName": "cfg-"}), None)]
#[case::service_generate_name_starting_with_a_digit(SERVICES, json!({"generateName": "1web-"}),
    Some(invalid_name("Service", "", "1web-GENERATED", &[
        ("metadata.generateName", "1web-", DNS1035),
        ("metadata.name", "1web-GENERATED", DNS1035)])))]
#[case::generate_name_invalid_beside_a_valid_name(PODS, json!({"name": "ok", "generateName": "Bad-"}),
    Some(invalid_name("Pod", "", "ok", &[("metadata.generateName", "Bad-", SUBDOMAIN)])))]
fn names_follow_the_kinds_rule(
    #[case] path: &str,
    #[case] metadata: Value,
    #[case] want: Option<Value>,
) {
    let c = Cluster::start();
    let mut body = json!({"metadata": metadata});
    if path == PODS {
        body["spec"] = json!({"containers": [{"name": "c", "image": "nginx"}]});
    }
    if path == SERVICES {
        body["spec"] = json!({"ports": [{"port": 80}]});
    }
    let (code, got) = c.post(path, &body);
    match want {
        Some(status) => {
            // The generated name is random: put the one the server chose in its place.
            let generated = got["details"]["name"].as_str().unwrap_or("");
            let status: Value = match generated.strip_prefix("1web-") {
                Some(suffix) => {
                    serde_json::from_str(&status.to_string().replace("GENERATED", suffix))
                        .expect("json")
                }
                None => status,
            };
            assert_eq!(got, status);
        }
        None => assert_eq!(code, 201, "{got}"),
    }
}

//! resource.k8s.io through the API as a client sees it: validation answering 422 with
//! upstream's fields and messages (whole Status bodies compared), the resourceclaim
//! controller stand-in making claims from templates and releasing them when pods finish,
//! the garbage collector deleting generated claims with their pods, the device driver
//! stand-in publishing ResourceSlices from nodes' `kubesched.dev/devices` annotations, the
//! kubelet stand-in waiting for reserved claims, and all of it across a restart.

use std::time::{Duration, Instant};

use apiserver::Config;
use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
const TEMPLATES: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates";
const CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
const PODS: &str = "/api/v1/namespaces/default/pods";
const NODES: &str = "/api/v1/nodes";
const EVENTS: &str = "/api/v1/namespaces/default/events";

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn s<'a>(obj: &'a Value, p: &str) -> &'a str {
    obj.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// Polls until `f` returns Some (20 s at most).
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn create(c: &Cluster, path: &str, obj: &Value) -> Value {
    let (code, body) = c.post(path, obj);
    assert_eq!(code, 201, "create {path}: {body}");
    body
}

fn put(c: &Cluster, path: &str, obj: &Value) -> (u16, Value) {
    c.request("PUT", path, Some("application/json"), &obj.to_string())
}

fn claim_named(name: &str, requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": name}, "spec": {"devices": {"requests": requests}}})
}

fn claim(requests: Value) -> Value {
    claim_named("c", requests)
}

/// A request `name` for devices of class `gpu.example.com`, with `extra` fields in `exactly`.
fn gpu(name: &str, extra: Value) -> Value {
    let mut exactly = json!({"deviceClassName": "gpu.example.com"});
    if let (Some(e), Some(x)) = (exactly.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({"name": name, "exactly": exactly})
}

fn with_devices(mut claim: Value, key: &str, value: Value) -> Value {
    claim["spec"]["devices"][key] = value;
    claim
}

fn template(name: &str, requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": name},
           "spec": {"spec": {"devices": {"requests": requests}}}})
}

fn class(spec: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
           "metadata": {"name": "gpu.example.com"}, "spec": spec})
}

fn slice(spec: Value) -> Value {
    let mut full = json!({"driver": "gpu.example.com",
                          "pool": {"name": "n1", "resourceSliceCount": 1}});
    if let (Some(f), Some(x)) = (full.as_object_mut(), spec.as_object()) {
        f.extend(x.clone());
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
           "metadata": {"name": "n1-gpu"}, "spec": full})
}

fn device(name: &str, attributes: Value) -> Value {
    json!({"name": name, "attributes": attributes})
}

/// The 422 a real API server answers: `causes` are (reason, field, message).
fn invalid(kind: &str, name: &str, causes: &[(&str, &str, &str)]) -> Value {
    let each: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    let all = match each.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("{kind}.resource.k8s.io \"{name}\" is invalid: {all}"),
           "reason": "Invalid",
           "details": {"name": name, "group": "resource.k8s.io", "kind": kind,
                       "causes": causes.iter()
                           .map(|(r, f, m)| json!({"reason": r, "message": m, "field": f}))
                           .collect::<Vec<_>>()},
           "code": 422})
}

fn claim_invalid(causes: &[(&str, &str, &str)]) -> Option<Value> {
    Some(invalid("ResourceClaim", "c", causes))
}

const REQUIRED: &str = "FieldValueRequired";
const INVALID: &str = "FieldValueInvalid";

#[rstest]
#[case::claim_without_exactly_or_first_available(
    CLAIMS,
    claim(json!([{"name": "gpu"}])),
    claim_invalid(&[(REQUIRED, "spec.devices.requests[0]",
        "Required value: exactly one of `exactly` or `firstAvailable` is required")])
)]
#[case::claim_with_exactly_and_first_available(
    CLAIMS,
    claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"},
                  "firstAvailable": [{"name": "a", "deviceClassName": "gpu.example.com"}]}])),
    claim_invalid(&[(INVALID, "spec.devices.requests[0]",
        "Invalid value: \"null\": exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")])
)]
#[case::claim_without_device_class_name(
    CLAIMS,
    claim(json!([{"name": "gpu", "exactly": {}}])),
    claim_invalid(&[(REQUIRED, "spec.devices.requests[0].exactly.deviceClassName", "Required value")])
)]
#[case::claim_all_mode_with_a_count(
    CLAIMS,
    claim(json!([gpu("gpu", json!({"allocationMode": "All", "count": 2}))])),
    claim_invalid(&[(INVALID, "spec.devices.requests[0].exactly.count",
        "Invalid value: 2: must not be specified when allocationMode is 'All'")])
)]
#[case::claim_exact_count_below_one(
    CLAIMS,
    claim(json!([gpu("gpu", json!({"count": -1}))])),
    claim_invalid(&[(INVALID, "spec.devices.requests[0].exactly.count",
        "Invalid value: -1: must be greater than zero")])
)]
#[case::claim_unknown_allocation_mode(
    CLAIMS,
    claim(json!([gpu("gpu", json!({"allocationMode": "Some"}))])),
    claim_invalid(&[("FieldValueNotSupported", "spec.devices.requests[0].exactly.allocationMode",
        "Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"")])
)]
#[case::claim_duplicate_request_names(
    CLAIMS,
    claim(json!([gpu("gpu", json!({})), gpu("gpu", json!({}))])),
    claim_invalid(&[("FieldValueDuplicate", "spec.devices.requests[1]", "Duplicate value: \"gpu\"")])
)]
#[case::claim_request_name_not_a_label(
    CLAIMS,
    claim(json!([gpu("GPU", json!({}))])),
    claim_invalid(&[(INVALID, "spec.devices.requests[0].name",
        &format!("Invalid value: \"GPU\": {LABEL_MSG}"))])
)]
#[case::claim_selector_without_cel(
    CLAIMS,
    claim(json!([gpu("gpu", json!({"selectors": [{}]}))])),
    claim_invalid(&[(REQUIRED, "spec.devices.requests[0].exactly.selectors[0].cel", "Required value")])
)]
#[case::claim_selector_that_does_not_compile(
    CLAIMS,
    claim(json!([gpu("gpu", json!({"selectors": [{"cel": {"expression": "noSuchVar"}}]}))])),
    claim_invalid(&[(INVALID, "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "Invalid value: \"noSuchVar\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^")])
)]
#[case::class_selector_not_bool(
    CLASSES,
    class(json!({"selectors": [{"cel": {"expression": "1 + 2"}}]})),
    Some(invalid("DeviceClass", "gpu.example.com", &[(INVALID, "spec.selectors[0].cel.expression",
        "Invalid value: \"1 + 2\": must evaluate to bool or the unknown type, not int")]))
)]
#[case::claim_more_than_32_requests(
    CLAIMS,
    claim(Value::Array((0..33).map(|i| gpu(&format!("r{i}"), json!({}))).collect())),
    claim_invalid(&[("FieldValueTooMany", "spec.devices.requests",
        "Too many: 33: must have at most 32 items")])
)]
#[case::claim_constraint_naming_an_unknown_request(
    CLAIMS,
    with_devices(claim(json!([gpu("gpu", json!({}))])), "constraints",
        json!([{"requests": ["nic"], "matchAttribute": "gpu.example.com/numa"}])),
    claim_invalid(&[(INVALID, "spec.devices.constraints[0].requests[0]",
        "Invalid value: \"nic\": must be the name of a request in the claim or the name of a request and a subrequest separated by '/'")])
)]
#[case::claim_constraint_without_match_attribute(
    CLAIMS,
    with_devices(claim(json!([gpu("gpu", json!({}))])), "constraints", json!([{}])),
    claim_invalid(&[(REQUIRED, "spec.devices.constraints[0]",
        "Required value: exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set")])
)]
#[case::claim_match_attribute_without_domain(
    CLAIMS,
    with_devices(claim(json!([gpu("gpu", json!({}))])), "constraints",
        json!([{"matchAttribute": "numa"}])),
    claim_invalid(&[(INVALID, "spec.devices.constraints[0].matchAttribute",
        "Invalid value: \"numa\": a fully qualified name must be a domain and a name separated by a slash")])
)]
#[case::claim_config_without_opaque(
    CLAIMS,
    with_devices(claim(json!([gpu("gpu", json!({}))])), "config", json!([{}])),
    claim_invalid(&[(REQUIRED, "spec.devices.config[0].opaque", "Required value")])
)]
#[case::claim_opaque_parameters_not_an_object(
    CLAIMS,
    with_devices(claim(json!([gpu("gpu", json!({}))])), "config",
        json!([{"opaque": {"driver": "gpu.example.com", "parameters": [1]}}])),
    claim_invalid(&[(INVALID, "spec.devices.config[0].opaque.parameters",
        "Invalid value: \"<value omitted>\": must be a valid JSON object")])
)]
#[case::claim_toleration_exists_with_a_value(
    CLAIMS,
    claim(json!([gpu("gpu", json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}))])),
    claim_invalid(&[(INVALID, "spec.devices.requests[0].exactly.tolerations[0].value",
        "Invalid value: \"v\": must be empty for operator `Exists`")])
)]
#[case::claim_subrequest_without_device_class_name(
    CLAIMS,
    claim(json!([{"name": "gpu", "firstAvailable": [{"name": "big"}]}])),
    claim_invalid(&[(REQUIRED, "spec.devices.requests[0].firstAvailable[0].deviceClassName", "Required value")])
)]
#[case::claim_more_than_8_subrequests(
    CLAIMS,
    claim(json!([{"name": "gpu", "firstAvailable": (0..9)
        .map(|i| json!({"name": format!("s{i}"), "deviceClassName": "gpu.example.com"}))
        .collect::<Vec<_>>()}])),
    claim_invalid(&[("FieldValueTooMany", "spec.devices.requests[0].firstAvailable",
        "Too many: 9: must have at most 8 items")])
)]
#[case::claim_accepted(
    CLAIMS,
    with_devices(
        claim(json!([gpu("gpu", json!({"count": 2, "selectors": [{"cel": {"expression": "true"}}]})),
                     {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com"}]}])),
        "constraints", json!([{"requests": ["gpu", "nic/fast"], "matchAttribute": "example.com/numa"}])),
    None
)]
#[case::template_errors_are_under_spec_spec(
    TEMPLATES,
    template("t", json!([{"name": "gpu", "exactly": {}}])),
    Some(invalid("ResourceClaimTemplate", "t", &[(REQUIRED,
        "spec.spec.devices.requests[0].exactly.deviceClassName", "Required value")]))
)]
#[case::template_accepted(TEMPLATES, template("t", json!([gpu("gpu", json!({}))])), None)]
#[case::slice_without_node_selection(
    SLICES,
    slice(json!({})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(REQUIRED, "spec",
        "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required")]))
)]
#[case::slice_with_node_name_and_all_nodes(
    SLICES,
    slice(json!({"nodeName": "n1", "allNodes": true})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(INVALID, "spec",
        "Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set")]))
)]
#[case::slice_without_pool_name_or_count(
    SLICES,
    slice(json!({"nodeName": "n1", "pool": {}})),
    Some(invalid("ResourceSlice", "n1-gpu", &[
        (REQUIRED, "spec.pool.name", "Required value"),
        (INVALID, "spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero")]))
)]
#[case::slice_driver_not_a_subdomain(
    SLICES,
    slice(json!({"nodeName": "n1", "driver": "gpu_example"})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(INVALID, "spec.driver",
        &format!("Invalid value: \"gpu_example\": {SUBDOMAIN_MSG}"))]))
)]
#[case::slice_attribute_without_a_value(
    SLICES,
    slice(json!({"nodeName": "n1", "devices": [device("gpu-0", json!({"model": {}}))]})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(INVALID, "spec.devices[0].attributes[model]",
        "Invalid value: \"\": exactly one value must be specified")]))
)]
#[case::slice_attribute_with_two_values(
    SLICES,
    slice(json!({"nodeName": "n1", "devices": [device("gpu-0", json!({"model": {"string": "a100", "int": 1}}))]})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(INVALID, "spec.devices[0].attributes[model]",
        &format!("Invalid value: {}: exactly one value must be specified",
                 json!({"string": "a100", "int": 1})))]))
)]
#[case::slice_version_not_semver(
    SLICES,
    slice(json!({"nodeName": "n1", "devices": [device("gpu-0", json!({"driverVersion": {"version": "1.2"}}))]})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(INVALID, "spec.devices[0].attributes[driverVersion].version",
        "Invalid value: \"1.2\": must be a string compatible with semver.org spec 2.0.0")]))
)]
#[case::slice_duplicate_device_names(
    SLICES,
    slice(json!({"nodeName": "n1", "devices": [device("gpu-0", json!({})), device("gpu-0", json!({}))]})),
    Some(invalid("ResourceSlice", "n1-gpu", &[("FieldValueDuplicate", "spec.devices[1]",
        "Duplicate value: \"gpu-0\"")]))
)]
#[case::slice_per_device_node_fields_without_per_device_selection(
    SLICES,
    slice(json!({"nodeName": "n1", "devices": [{"name": "gpu-0", "nodeName": "n1"}]})),
    Some(invalid("ResourceSlice", "n1-gpu", &[(INVALID, "spec.devices[0]",
        "Invalid value: \"null\": `nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec")]))
)]
#[case::slice_accepted(
    SLICES,
    slice(json!({"nodeName": "n1", "devices": [device("gpu-0",
        json!({"model": {"string": "a100"}, "index": {"int": 0}}))]})),
    None
)]
#[case::class_extended_resource_name_without_domain(
    CLASSES,
    class(json!({"extendedResourceName": "gpu"})),
    Some(invalid("DeviceClass", "gpu.example.com", &[(INVALID, "spec.extendedResourceName",
        "Invalid value: \"gpu\": must be a valid extended resource name")]))
)]
#[case::class_selector_expression_too_long(
    CLASSES,
    class(json!({"selectors": [{"cel": {"expression": "x".repeat(10 * 1024 + 1)}}]})),
    Some(invalid("DeviceClass", "gpu.example.com", &[("FieldValueTooLong",
        "spec.selectors[0].cel.expression", "Too long: may not be more than 10240 bytes")]))
)]
#[case::class_accepted(
    CLASSES,
    class(json!({"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                 "extendedResourceName": "example.com/gpu"})),
    None
)]
fn resource_objects_are_validated_as_upstream(
    #[case] path: &str,
    #[case] obj: Value,
    #[case] want: Option<Value>,
) {
    let c = Cluster::start();
    let (code, body) = c.post(path, &obj);
    match want {
        Some(want) => assert_eq!((code, body), (422, want)),
        None => assert_eq!(code, 201, "{body}"),
    }
}

#[test]
fn a_device_capacity_that_is_not_a_quantity_is_refused_when_decoding() {
    let c = Cluster::start();
    let bad = slice(json!({"nodeName": "n1", "devices": [{"name": "gpu-0",
        "capacity": {"memory": {"value": "lots"}}}]}));
    assert_eq!(
        c.post(SLICES, &bad),
        (
            400,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "ResourceSlice in version \"v1\" cannot be handled as a ResourceSlice: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                   "reason": "BadRequest", "code": 400})
        )
    );
}

#[test]
fn admin_access_needs_the_namespace_label() {
    let c = Cluster::start();
    let admin = claim(json!([gpu("gpu", json!({"adminAccess": true}))]));
    let forbidden = |kind: &str, name: &str| {
        invalid(
            kind,
            name,
            &[(
                "FieldValueForbidden",
                "spec.devices.requests[0].exactly.adminAccess",
                "Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace",
            )],
        )
    };
    assert_eq!(
        c.post(CLAIMS, &admin),
        (422, forbidden("ResourceClaim", "c"))
    );
    assert_eq!(
        c.post(
            TEMPLATES,
            &template("t", json!([gpu("gpu", json!({"adminAccess": true}))]))
        ),
        (422, forbidden("ResourceClaimTemplate", "t"))
    );
    // An allocation granting admin access is refused in the status too.
    create(&c, CLAIMS, &claim(json!([gpu("gpu", json!({}))])));
    let mut granted = allocation("gpu-0");
    granted["devices"]["results"][0]["adminAccess"] = json!(true);
    assert_eq!(
        put_status(&c, "c", json!({"allocation": granted})),
        (
            422,
            invalid(
                "ResourceClaim",
                "c",
                &[(
                    "FieldValueForbidden",
                    "status.allocation.devices.results[0].adminAccess",
                    "Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace",
                )]
            )
        )
    );
    create(
        &c,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops",
                "labels": {"resource.kubernetes.io/admin-access": "true"}}}),
    );
    create(
        &c,
        "/apis/resource.k8s.io/v1/namespaces/ops/resourceclaims",
        &admin,
    );
}

#[test]
fn claim_requests_get_upstreams_defaults() {
    let c = Cluster::start();
    let created = create(
        &c,
        CLAIMS,
        &claim(json!([gpu("gpu", json!({"tolerations": [{"key": "k"}]}))])),
    );
    assert_eq!(
        created["spec"],
        json!({"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
            "tolerations": [{"key": "k", "operator": "Equal"}]}}]}})
    );
}

#[test]
fn claim_spec_is_immutable_but_an_update_without_defaults_is_no_change() {
    let c = Cluster::start();
    create(&c, CLAIMS, &claim(json!([gpu("gpu", json!({}))])));
    // The same spec as sent at first, without the defaults the server filled in.
    let (code, body) = put(
        &c,
        &format!("{CLAIMS}/c"),
        &claim(json!([gpu("gpu", json!({}))])),
    );
    assert_eq!(code, 200, "{body}");
    let (code, body) = put(
        &c,
        &format!("{CLAIMS}/c"),
        &claim(json!([gpu("gpu", json!({"count": 2}))])),
    );
    let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}}]}});
    assert_eq!(
        (code, body),
        (
            422,
            invalid(
                "ResourceClaim",
                "c",
                &[(
                    INVALID,
                    "spec",
                    &format!("Invalid value: {spec}: field is immutable")
                )]
            )
        )
    );
}

fn allocation(device: &str) -> Value {
    json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                     "pool": "n1", "device": device}]},
           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
               {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}})
}

fn consumer(name: &str, uid: &str) -> Value {
    json!({"resource": "pods", "name": name, "uid": uid})
}

fn put_status(c: &Cluster, name: &str, status: Value) -> (u16, Value) {
    let (code, mut current) = c.get(&format!("{CLAIMS}/{name}"));
    assert_eq!(code, 200, "{current}");
    current["status"] = status;
    put(c, &format!("{CLAIMS}/{name}/status"), &current)
}

#[test]
fn claim_status_follows_upstreams_rules() {
    let c = Cluster::start();
    create(&c, CLAIMS, &claim(json!([gpu("gpu", json!({}))])));
    assert_eq!(
        put_status(&c, "c", json!({"reservedFor": [consumer("p", "u1")]})),
        (
            422,
            invalid(
                "ResourceClaim",
                "c",
                &[(
                    "FieldValueForbidden",
                    "status.reservedFor",
                    "Forbidden: may not be specified when `allocated` is not set"
                )]
            )
        )
    );
    let many: Vec<Value> = (0..257)
        .map(|i| consumer(&format!("p{i}"), &format!("u{i}")))
        .collect();
    assert_eq!(
        put_status(
            &c,
            "c",
            json!({"allocation": allocation("gpu-0"), "reservedFor": many})
        ),
        (
            422,
            invalid(
                "ResourceClaim",
                "c",
                &[(
                    "FieldValueTooMany",
                    "status.reservedFor",
                    "Too many: 257: must have at most 256 items"
                )]
            )
        )
    );
    assert_eq!(
        put_status(
            &c,
            "c",
            json!({"allocation": allocation("gpu-0"), "reservedFor": [{"resource": "pods"}]})
        ),
        (
            422,
            invalid(
                "ResourceClaim",
                "c",
                &[
                    (REQUIRED, "status.reservedFor[0].name", "Required value"),
                    (REQUIRED, "status.reservedFor[0].uid", "Required value")
                ]
            )
        )
    );
    let (code, body) = put_status(
        &c,
        "c",
        json!({"allocation": allocation("gpu-0"), "reservedFor": [consumer("p", "u1")]}),
    );
    assert_eq!(code, 200, "{body}");
    let moved = allocation("gpu-1");
    assert_eq!(
        put_status(&c, "c", json!({"allocation": moved.clone()})),
        (
            422,
            invalid(
                "ResourceClaim",
                "c",
                &[(
                    INVALID,
                    "status.allocation",
                    &format!("Invalid value: {moved}: field is immutable")
                )]
            )
        )
    );
}

/// The workload controllers on (the resourceclaim controller and the garbage collector),
/// and the kubelet and device driver stand-ins when `kubelets`.
fn cluster(kubelets: bool) -> Cluster {
    Cluster::with_config(Config {
        workload_controllers: true,
        simulate_kubelets: kubelets,
        ..Config::default()
    })
}

fn pod_with_claims(name: &str, claims: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"resourceClaims": claims,
                    "containers": [{"name": "c", "image": "nginx"}]}})
}

/// The claim the pod's status records for its entry `entry`, once it does.
fn generated_claim(c: &Cluster, pod: &str, entry: &str) -> Value {
    let name = wait_for("the claim recorded in the pod's status", || {
        let (_, p) = c.get(&format!("{PODS}/{pod}"));
        p.pointer("/status/resourceClaimStatuses")
            .and_then(Value::as_array)?
            .iter()
            .find(|s| s["name"] == entry)
            .and_then(|s| s["resourceClaimName"].as_str())
            .map(str::to_string)
    });
    let (code, claim) = c.get(&format!("{CLAIMS}/{name}"));
    assert_eq!(code, 200, "{claim}");
    claim
}

fn set_phase(c: &Cluster, pod: &str, phase: &str) {
    let (code, mut p) = c.get(&format!("{PODS}/{pod}"));
    assert_eq!(code, 200, "{p}");
    p["status"]["phase"] = json!(phase);
    let (code, body) = put(c, &format!("{PODS}/{pod}/status"), &p);
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_claim_is_made_from_the_template_with_the_pod_as_owner_and_recorded_in_its_status() {
    let c = cluster(false);
    let mut t = template("two-gpus", json!([gpu("gpu", json!({"count": 2}))]));
    t["spec"]["metadata"] = json!({"labels": {"app": "train"}, "annotations": {"a": "b"}});
    create(&c, TEMPLATES, &t);
    let pod = create(
        &c,
        PODS,
        &pod_with_claims(
            "train",
            json!([{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]),
        ),
    );
    let claim = generated_claim(&c, "train", "gpus");
    let name = s(&claim, "/metadata/name");
    assert!(
        name.starts_with("train-gpus-") && name.len() == "train-gpus-".len() + 5,
        "{name}"
    );
    assert_eq!(
        (
            &claim["metadata"]["generateName"],
            &claim["metadata"]["labels"],
            &claim["metadata"]["annotations"],
            &claim["metadata"]["ownerReferences"],
            &claim["spec"]
        ),
        (
            &json!("train-gpus-"),
            &json!({"app": "train"}),
            &json!({"a": "b", "resource.kubernetes.io/pod-claim-name": "gpus"}),
            &json!([{"apiVersion": "v1", "kind": "Pod", "name": "train",
                     "uid": s(&pod, "/metadata/uid"), "controller": true,
                     "blockOwnerDeletion": true}]),
            &json!({"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                "count": 2}}]}})
        )
    );
    let (_, pod) = c.get(&format!("{PODS}/train"));
    assert_eq!(
        pod["status"]["resourceClaimStatuses"],
        json!([{"name": "gpus", "resourceClaimName": name}])
    );
    // One claim only, however many times the pod is looked at.
    let (_, list) = c.get(CLAIMS);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
}

#[test]
fn a_missing_template_is_a_warning_event_and_the_claim_follows_the_template() {
    let c = cluster(false);
    create(
        &c,
        PODS,
        &pod_with_claims(
            "train",
            json!([{"name": "gpus", "resourceClaimTemplateName": "later"}]),
        ),
    );
    let event = wait_for("a FailedResourceClaimCreation event", || {
        let (_, list) = c.get(EVENTS);
        list["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "FailedResourceClaimCreation")
            .cloned()
    });
    assert_eq!(
        (&event["type"], &event["message"], &event["source"], &event["involvedObject"]["name"]),
        (
            &json!("Warning"),
            &json!("PodResourceClaim gpus: resource claim template \"later\": resourceclaimtemplates.resource.k8s.io \"later\" not found"),
            &json!({"component": "resource_claim"}),
            &json!("train")
        )
    );
    create(
        &c,
        TEMPLATES,
        &template("later", json!([gpu("gpu", json!({}))])),
    );
    let claim = generated_claim(&c, "train", "gpus");
    assert_eq!(s(&claim, "/metadata/generateName"), "train-gpus-");
}

#[test]
fn reserved_for_is_cleared_and_the_claim_deallocated_when_its_pod_finishes() {
    let c = cluster(false);
    let mut shared = claim_named("shared", json!([gpu("gpu", json!({}))]));
    shared["metadata"]["finalizers"] = json!(["resource.kubernetes.io/delete-protection"]);
    create(&c, CLAIMS, &shared);
    let entry = json!([{"name": "gpu", "resourceClaimName": "shared"}]);
    let a = create(&c, PODS, &pod_with_claims("a", entry.clone()));
    let b = create(&c, PODS, &pod_with_claims("b", entry));
    let (code, body) = put_status(
        &c,
        "shared",
        json!({"allocation": allocation("gpu-0"),
               "reservedFor": [consumer("a", s(&a, "/metadata/uid")),
                               consumer("b", s(&b, "/metadata/uid"))]}),
    );
    assert_eq!(code, 200, "{body}");
    // One of two consumers done: it leaves reservedFor, the allocation stays.
    set_phase(&c, "a", "Succeeded");
    let status = wait_for("pod a released", || {
        let (_, claim) = c.get(&format!("{CLAIMS}/shared"));
        (claim["status"]["reservedFor"].as_array().map(Vec::len) == Some(1))
            .then(|| claim["status"].clone())
    });
    assert_eq!(
        status,
        json!({"allocation": allocation("gpu-0"),
               "reservedFor": [consumer("b", s(&b, "/metadata/uid"))]})
    );
    // The last one done: reserved for nobody, the claim is deallocated and unprotected.
    set_phase(&c, "b", "Failed");
    let claim = wait_for("the claim deallocated", || {
        let (_, claim) = c.get(&format!("{CLAIMS}/shared"));
        claim["status"].get("allocation").is_none().then_some(claim)
    });
    assert_eq!(
        (&claim["status"], claim["metadata"].get("finalizers")),
        (&json!({}), None)
    );
}

#[test]
fn a_generated_claim_is_deleted_with_its_pod_by_the_garbage_collector() {
    let c = cluster(false);
    create(
        &c,
        TEMPLATES,
        &template("one-gpu", json!([gpu("gpu", json!({}))])),
    );
    create(
        &c,
        PODS,
        &pod_with_claims(
            "p",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    );
    let claim = generated_claim(&c, "p", "gpu");
    let path = format!("{CLAIMS}/{}", s(&claim, "/metadata/name"));
    let (code, body) = c.request("DELETE", &format!("{PODS}/p"), None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("the claim deleted", || {
        (c.get(&path).0 == 404).then_some(())
    });
}

/// The claim's watch events since `resource_version`, as (type, allocated, finalizers).
fn claim_history(c: &Cluster, name: &str, resource_version: &str) -> Vec<(String, bool, Value)> {
    let (code, body) = c.request_raw(
        "GET",
        &format!("{CLAIMS}?watch=true&timeoutSeconds=1&resourceVersion={resource_version}&fieldSelector=metadata.name={name}"),
        None,
        "",
    );
    assert_eq!(code, 200);
    String::from_utf8_lossy(&body)
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).expect("one JSON event per line");
            (
                s(&e, "/type").to_string(),
                e.pointer("/object/status/allocation").is_some(),
                e.pointer("/object/metadata/finalizers")
                    .cloned()
                    .unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// A generated claim allocated as the scheduler's PreBind does it: the finalizer (an
/// update of the object), then the allocation and the pod's reservation (its status).
fn allocate_as_the_scheduler(c: &Cluster, claim: &Value, pod: &Value) -> String {
    let name = s(claim, "/metadata/name");
    let mut protected = claim.clone();
    protected["metadata"]["finalizers"] = json!(["resource.kubernetes.io/delete-protection"]);
    let (code, body) = put(c, &format!("{CLAIMS}/{name}"), &protected);
    assert_eq!(code, 200, "{body}");
    let (code, body) = put_status(
        c,
        name,
        json!({"allocation": allocation("gpu-0"),
               "reservedFor": [consumer(s(pod, "/metadata/name"), s(pod, "/metadata/uid"))]}),
    );
    assert_eq!(code, 200, "{body}");
    s(&body, "/metadata/resourceVersion").to_string()
}

#[test]
fn a_generated_claim_of_a_deleted_pod_is_deallocated_before_it_goes() {
    let c = cluster(false);
    create(
        &c,
        TEMPLATES,
        &template("one-gpu", json!([gpu("gpu", json!({}))])),
    );
    let pod = create(
        &c,
        PODS,
        &pod_with_claims(
            "p",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    );
    let claim = generated_claim(&c, "p", "gpu");
    let name = s(&claim, "/metadata/name").to_string();
    let allocated_at = allocate_as_the_scheduler(&c, &claim, &pod);
    let (code, body) = c.request("DELETE", &format!("{PODS}/p"), None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("the claim gone", || {
        (c.get(&format!("{CLAIMS}/{name}")).0 == 404).then_some(())
    });
    // Whether the controller (the pod's deletion) or the garbage collector (marking the
    // claim deleted) came first, the claim was removed deallocated and unprotected.
    let history = claim_history(&c, &name, &allocated_at);
    assert_eq!(
        history.last(),
        Some(&("DELETED".to_string(), false, Value::Null)),
        "{history:?}"
    );
}

/// A claim deleted while reserved for a running pod stays (its finalizer) until the pod is
/// done; then the controller deallocates it in a write of its own before it removes the
/// finalizer, so watchers see the deallocation (the update that requeues pods waiting for
/// its devices) before the claim goes. One write doing both was seen only as DELETED.
#[test]
fn a_deleted_claim_is_seen_deallocated_before_it_goes() {
    let c = cluster(false);
    create(
        &c,
        TEMPLATES,
        &template("one-gpu", json!([gpu("gpu", json!({}))])),
    );
    let pod = create(
        &c,
        PODS,
        &pod_with_claims(
            "p",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    );
    let claim = generated_claim(&c, "p", "gpu");
    let name = s(&claim, "/metadata/name").to_string();
    let path = format!("{CLAIMS}/{name}");
    let allocated_at = allocate_as_the_scheduler(&c, &claim, &pod);
    let (code, body) = c.request("DELETE", &path, None, "");
    assert_eq!(code, 200, "{body}");
    let (code, held) = c.get(&path);
    assert_eq!(
        (
            code,
            held.pointer("/metadata/deletionTimestamp").is_some(),
            held.pointer("/status/allocation").is_some()
        ),
        (200, true, true),
        "{held}"
    );
    set_phase(&c, "p", "Succeeded");
    wait_for("the claim gone", || (c.get(&path).0 == 404).then_some(()));
    let protected = json!(["resource.kubernetes.io/delete-protection"]);
    assert_eq!(
        claim_history(&c, &name, &allocated_at),
        vec![
            ("MODIFIED".to_string(), true, protected.clone()),
            ("MODIFIED".to_string(), false, protected),
            ("DELETED".to_string(), false, Value::Null),
        ]
    );
}

#[test]
fn a_claim_without_delete_protection_is_released_but_keeps_its_allocation() {
    let c = cluster(false);
    create(
        &c,
        CLAIMS,
        &claim_named("plain", json!([gpu("gpu", json!({}))])),
    );
    let a = create(
        &c,
        PODS,
        &pod_with_claims("a", json!([{"name": "gpu", "resourceClaimName": "plain"}])),
    );
    let (code, body) = put_status(
        &c,
        "plain",
        json!({"allocation": allocation("gpu-0"),
               "reservedFor": [consumer("a", s(&a, "/metadata/uid"))]}),
    );
    assert_eq!(code, 200, "{body}");
    set_phase(&c, "a", "Succeeded");
    let status = wait_for("pod a released", || {
        let (_, claim) = c.get(&format!("{CLAIMS}/plain"));
        claim["status"]
            .get("reservedFor")
            .is_none()
            .then(|| claim["status"].clone())
    });
    assert_eq!(status, json!({"allocation": allocation("gpu-0")}));
}

#[test]
fn a_generated_claim_of_a_finished_pod_is_deleted() {
    let c = cluster(false);
    create(
        &c,
        TEMPLATES,
        &template("one-gpu", json!([gpu("gpu", json!({}))])),
    );
    create(
        &c,
        PODS,
        &pod_with_claims(
            "p",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    );
    let claim = generated_claim(&c, "p", "gpu");
    let path = format!("{CLAIMS}/{}", s(&claim, "/metadata/name"));
    set_phase(&c, "p", "Succeeded");
    wait_for("the claim deleted", || {
        (c.get(&path).0 == 404).then_some(())
    });
    // The pod stays; its claim is not made again.
    let (code, _) = c.get(&format!("{PODS}/p"));
    assert_eq!(code, 200);
    let (_, list) = c.get(CLAIMS);
    assert_eq!(list["items"], json!([]));
}

fn annotated_node(name: &str, devices: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "annotations": {"kubesched.dev/devices": devices}}})
}

fn get_slice(c: &Cluster, name: &str) -> Option<Value> {
    let (code, slice) = c.get(&format!("{SLICES}/{name}"));
    (code == 200).then_some(slice)
}

fn gpus(n: usize, model: &str, memory: &str) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"name": format!("gpu-{i}"),
                       "attributes": {"index": {"int": i}, "model": {"string": model}},
                       "capacity": {"memory": {"value": memory}}})
            })
            .collect(),
    )
}

#[test]
fn slices_are_published_from_the_node_annotation_updated_and_deleted_with_the_node() {
    let c = cluster(true);
    let node = create(
        &c,
        NODES,
        &annotated_node("n1", "gpu.example.com=2,model=a100,memory=80Gi"),
    );
    let slice = wait_for("the slice published", || {
        get_slice(&c, "n1-gpu.example.com")
    });
    assert_eq!(
        (
            &slice["metadata"]["labels"],
            &slice["metadata"]["ownerReferences"],
            &slice["spec"]
        ),
        (
            &json!({"kubesched.dev/device-driver-stand-in": "true"}),
            &json!([{"apiVersion": "v1", "kind": "Node", "name": "n1",
                     "uid": s(&node, "/metadata/uid"), "controller": true}]),
            &json!({"driver": "gpu.example.com", "nodeName": "n1",
                    "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
                    "devices": gpus(2, "a100", "80Gi")})
        )
    );
    // A field selector finds a node's slices, as a kubelet lists them.
    let (_, list) = c.get(&format!("{SLICES}?fieldSelector=spec.nodeName%3Dn1"));
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");

    let (code, body) = c.request(
        "PATCH",
        &format!("{NODES}/n1"),
        Some("application/merge-patch+json"),
        &json!({"metadata": {"annotations": {"kubesched.dev/devices":
            "gpu.example.com=3,model=h100,memory=94Gi"}}})
        .to_string(),
    );
    assert_eq!(code, 200, "{body}");
    let spec = wait_for("the slice updated", || {
        let slice = get_slice(&c, "n1-gpu.example.com")?;
        (slice["spec"]["pool"]["generation"] == 1).then(|| slice["spec"].clone())
    });
    assert_eq!(
        spec,
        json!({"driver": "gpu.example.com", "nodeName": "n1",
               "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
               "devices": gpus(3, "h100", "94Gi")})
    );

    let (code, body) = c.request("DELETE", &format!("{NODES}/n1"), None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("the slice deleted", || {
        get_slice(&c, "n1-gpu.example.com").is_none().then_some(())
    });
}

#[test]
fn a_description_that_does_not_parse_is_a_warning_event_on_the_node() {
    let c = cluster(true);
    create(&c, NODES, &annotated_node("n1", "gpu.example.com=lots"));
    let event = wait_for("an InvalidDeviceDescription event", || {
        let (_, list) = c.get(EVENTS);
        list["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "InvalidDeviceDescription")
            .cloned()
    });
    assert_eq!(
        (
            &event["type"],
            &event["message"],
            &event["involvedObject"]["kind"]
        ),
        (
            &json!("Warning"),
            &json!(
                "kubesched.dev/devices: \"gpu.example.com=lots\": the count is not a whole number"
            ),
            &json!("Node")
        )
    );
    let (_, list) = c.get(SLICES);
    assert_eq!(list["items"], json!([]));
}

fn phase(c: &Cluster, pod: &str) -> String {
    let (_, p) = c.get(&format!("{PODS}/{pod}"));
    s(&p, "/status/phase").to_string()
}

#[test]
fn the_kubelet_starts_a_pod_only_once_its_claim_is_allocated_and_reserved_for_it() {
    let c = cluster(true);
    create(&c, NODES, &annotated_node("n1", "gpu.example.com=1"));
    create(
        &c,
        CLAIMS,
        &claim_named("gpu", json!([gpu("gpu", json!({}))])),
    );
    let mut waiting = pod_with_claims(
        "waiting",
        json!([{"name": "gpu", "resourceClaimName": "gpu"}]),
    );
    waiting["spec"]["nodeName"] = json!("n1");
    let waiting = create(&c, PODS, &waiting);
    // A pod without claims created after it on the same node runs; by then the kubelet
    // stand-in has looked at the first one and left it Pending.
    let mut plain = pod_with_claims("plain", json!([]));
    plain["spec"]["nodeName"] = json!("n1");
    create(&c, PODS, &plain);
    wait_for("the plain pod running", || {
        (phase(&c, "plain") == "Running").then_some(())
    });
    assert_eq!(phase(&c, "waiting"), "Pending");
    let (code, body) = put_status(
        &c,
        "gpu",
        json!({"allocation": allocation("gpu-0"),
               "reservedFor": [consumer("waiting", s(&waiting, "/metadata/uid"))]}),
    );
    assert_eq!(code, 200, "{body}");
    wait_for("the pod running", || {
        (phase(&c, "waiting") == "Running").then_some(())
    });
}

#[test]
fn claims_and_slices_survive_a_restart_and_are_not_made_twice() {
    let dir = tempfile::tempdir().expect("data dir");
    let config = || Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: true,
        simulate_kubelets: true,
        ..Config::default()
    };
    let (claim, slice) = {
        let c = Cluster::with_config(config());
        create(
            &c,
            NODES,
            &annotated_node("n1", "gpu.example.com=2,model=a100"),
        );
        create(
            &c,
            TEMPLATES,
            &template("one-gpu", json!([gpu("gpu", json!({}))])),
        );
        create(
            &c,
            PODS,
            &pod_with_claims(
                "p",
                json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
            ),
        );
        let claim = generated_claim(&c, "p", "gpu");
        let slice = wait_for("the slice published", || {
            get_slice(&c, "n1-gpu.example.com")
        });
        (claim, slice)
    };
    let c = Cluster::with_config(config());
    // The controllers look at everything they recovered before the events after it: once a
    // new pod has its claim and a new node its slice, the recovered ones were looked at.
    create(
        &c,
        PODS,
        &pod_with_claims(
            "q",
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        ),
    );
    generated_claim(&c, "q", "gpu");
    create(&c, NODES, &annotated_node("n2", "gpu.example.com=1"));
    wait_for("the new node's slice", || {
        get_slice(&c, "n2-gpu.example.com")
    });
    let (_, again) = c.get(&format!("{CLAIMS}/{}", s(&claim, "/metadata/name")));
    assert_eq!(again, claim);
    let (_, claims) = c.get(CLAIMS);
    assert_eq!(
        claims["items"].as_array().map(Vec::len),
        Some(2),
        "{claims}"
    );
    assert_eq!(get_slice(&c, "n1-gpu.example.com"), Some(slice));
}

#[test]
fn the_gpu_example_is_accepted_and_its_slices_and_claim_appear() {
    let c = cluster(true);
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dra-gpu.yaml"
    ))
    .expect("example");
    for doc in text.split("\n---\n") {
        let obj: Value = serde_yaml_ng::from_str(doc).expect("YAML");
        let kind = s(&obj, "/kind");
        let path = [
            ("DeviceClass", CLASSES),
            ("Node", NODES),
            ("ResourceClaimTemplate", TEMPLATES),
            ("Pod", PODS),
        ]
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, p)| *p)
        .expect("a kind the example uses");
        create(&c, path, &obj);
    }
    for (node, n, model, memory) in [
        ("gpu-node-a", 2, "a100", "80Gi"),
        ("gpu-node-b", 4, "l4", "24Gi"),
    ] {
        let slice = wait_for("a slice per node", || {
            get_slice(&c, &format!("{node}-gpu.example.com"))
        });
        assert_eq!(slice["spec"]["devices"], gpus(n, model, memory), "{node}");
    }
    let claim = generated_claim(&c, "training", "gpus");
    assert_eq!(
        claim["spec"]["devices"]["requests"][0]["exactly"],
        json!({"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2,
               "selectors": [{"cel": {"expression":
                   "device.attributes[\"gpu.example.com\"].model == \"a100\""}}]})
    );
    // Nothing allocates it here, so the kubelet stand-in does not start the pod.
    assert_eq!(phase(&c, "training"), "Pending");
}

#[test]
fn kubectl_applies_the_gpu_example_and_lists_its_slices_and_claim() {
    let c = cluster(true);
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dra-gpu.yaml");
    let out = c.kubectl_ok(&["apply", "-f", example]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "deviceclass.resource.k8s.io/gpu.example.com created",
            "node/gpu-node-a created",
            "node/gpu-node-b created",
            "resourceclaimtemplate.resource.k8s.io/two-a100 created",
            "pod/training created",
        ]
    );
    generated_claim(&c, "training", "gpus");
    wait_for("both slices", || {
        let (_, list) = c.get(SLICES);
        (list["items"].as_array().map(Vec::len) == Some(2)).then_some(())
    });
    let slices = c.kubectl_ok(&["get", "resourceslices", "-o", "name"]);
    assert_eq!(
        slices.lines().collect::<Vec<_>>(),
        [
            "resourceslice.resource.k8s.io/gpu-node-a-gpu.example.com",
            "resourceslice.resource.k8s.io/gpu-node-b-gpu.example.com",
        ]
    );
    // Applying again changes nothing.
    let again = c.kubectl_ok(&["apply", "-f", example]);
    assert!(again.lines().all(|l| l.ends_with(" unchanged")), "{again}");
}

#[test]
fn a_slices_driver_pool_and_node_are_fixed() {
    let c = Cluster::start();
    let original = slice(json!({"nodeName": "n1"}));
    create(&c, SLICES, &original);
    let mut moved = original.clone();
    moved["spec"]["driver"] = json!("nic.example.com");
    moved["spec"]["pool"]["name"] = json!("n2");
    moved["spec"]["nodeName"] = json!("n2");
    let (code, body) = put(&c, &format!("{SLICES}/n1-gpu"), &moved);
    assert_eq!(
        (code, body),
        (
            422,
            invalid(
                "ResourceSlice",
                "n1-gpu",
                &[
                    (
                        INVALID,
                        "spec.pool.name",
                        "Invalid value: \"n2\": field is immutable"
                    ),
                    (
                        INVALID,
                        "spec.driver",
                        "Invalid value: \"nic.example.com\": field is immutable"
                    ),
                    (
                        INVALID,
                        "spec.nodeName",
                        "Invalid value: \"n2\": field is immutable"
                    ),
                ]
            )
        )
    );
    // Devices may change.
    let mut more = original;
    more["spec"]["devices"] = json!([device("gpu-0", json!({"index": {"int": 0}}))]);
    let (code, body) = put(&c, &format!("{SLICES}/n1-gpu"), &more);
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_deleted_claim_reserved_for_nobody_is_deallocated_and_released_by_its_finalizer() {
    let c = cluster(false);
    let mut protected = claim_named("protected", json!([gpu("gpu", json!({}))]));
    protected["metadata"]["finalizers"] = json!(["resource.kubernetes.io/delete-protection"]);
    create(&c, CLAIMS, &protected);
    let (code, body) = put_status(&c, "protected", json!({"allocation": allocation("gpu-0")}));
    assert_eq!(code, 200, "{body}");
    let path = format!("{CLAIMS}/protected");
    let (code, body) = c.request("DELETE", &path, None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("the claim gone", || (c.get(&path).0 == 404).then_some(()));
}

/// The claim a scheduler makes for a pod's extended resources: annotated, owned by the pod.
fn extended_resource_claim(pod: &Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"generateName": "p-extended-resources-",
                        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                             "uid": s(pod, "/metadata/uid"), "controller": true}]},
           "spec": {"devices": {"requests": [{"name": "container-0-request-0",
               "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                           "count": 1}}]}}})
}

fn gpu_pod(name: &str, node: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx",
                                    "resources": {"limits": {"example.com/gpu": "1"}}}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// Writes the pod's `status.extendedResourceClaimStatus` as a scheduler's PreBind does (a
/// merge patch of `pods/status`).
fn record_extended_claim(c: &Cluster, pod: &str, claim: &str) -> Value {
    let patch = json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu",
                             "requestName": "container-0-request-0"}],
        "resourceClaimName": claim}}});
    let (code, body) = c.request(
        "PATCH",
        &format!("{PODS}/{pod}/status"),
        Some("application/merge-patch+json"),
        &patch.to_string(),
    );
    assert_eq!(code, 200, "{body}");
    body
}

#[test]
fn a_class_keeps_its_extended_resource_name_and_a_pod_its_extended_resource_claim_status() {
    let c = cluster(false);
    let stored = create(
        &c,
        CLASSES,
        &class(json!({"extendedResourceName": "example.com/gpu"})),
    );
    assert_eq!(
        stored["spec"]["extendedResourceName"],
        json!("example.com/gpu")
    );
    create(&c, PODS, &gpu_pod("p", None));
    let patched = record_extended_claim(&c, "p", "p-extended-resources-abc");
    let (_, got) = c.get(&format!("{PODS}/p"));
    assert_eq!(
        (
            &got["status"]["extendedResourceClaimStatus"],
            &patched["status"]["extendedResourceClaimStatus"]
        ),
        (
            &json!({"requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu",
                                         "requestName": "container-0-request-0"}],
                    "resourceClaimName": "p-extended-resources-abc"}),
            &json!({"requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu",
                                         "requestName": "container-0-request-0"}],
                    "resourceClaimName": "p-extended-resources-abc"})
        )
    );
}

#[test]
fn the_kubelet_waits_for_the_extended_resource_claim_and_the_claim_goes_with_the_pod() {
    let c = cluster(true);
    create(&c, NODES, &annotated_node("n1", "gpu.example.com=1"));
    // As a scheduler does: the claim and the pod's status first, then the binding.
    let pod = create(&c, PODS, &gpu_pod("p", None));
    let claim = create(&c, CLAIMS, &extended_resource_claim(&pod));
    let name = s(&claim, "/metadata/name").to_string();
    record_extended_claim(&c, "p", &name);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    create(&c, &format!("{PODS}/p/binding"), &binding);
    // A pod without claims created after it on the same node runs; by then the kubelet
    // stand-in has looked at the first one and left it Pending.
    create(&c, PODS, &gpu_pod("plain", Some("n1")));
    wait_for("the plain pod running", || {
        (phase(&c, "plain") == "Running").then_some(())
    });
    assert_eq!(phase(&c, "p"), "Pending");
    let mut allocated = allocation("gpu-0");
    allocated["devices"]["results"][0]["request"] = json!("container-0-request-0");
    let (code, body) = put_status(
        &c,
        &name,
        json!({"allocation": allocated,
               "reservedFor": [consumer("p", s(&pod, "/metadata/uid"))]}),
    );
    assert_eq!(code, 200, "{body}");
    wait_for("the pod running", || {
        (phase(&c, "p") == "Running").then_some(())
    });
    let (code, body) = c.request("DELETE", &format!("{PODS}/p"), None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("the claim deleted", || {
        (c.get(&format!("{CLAIMS}/{name}")).0 == 404).then_some(())
    });
}

//! Protobuf request bodies (client-go's default content type, so upstream kube-scheduler's),
//! and every kind upstream kube-scheduler lists and watches before it schedules.

use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A body upstream kube-scheduler v1.35.4 sent (tests/testdata/README.md).
fn testdata(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("a body in tests/testdata")
}

/// What the server sets on every write, masked before two stored objects are compared.
fn masked(mut v: Value) -> Value {
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        if let Some(f) = v.pointer_mut(&format!("/metadata/{field}")) {
            *f = json!("<masked>");
        }
    }
    if let Some(conds) = v
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds {
            c["lastTransitionTime"] = json!("<masked>");
        }
    }
    v
}

fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

/// The Event and Lease kube-scheduler POSTs in protobuf are stored as the same objects sent
/// as JSON (what client-go writes for them) are.
#[rstest]
#[case::events_k8s_io_event(
    "events.k8s.io-v1-event.pb",
    "/apis/events.k8s.io/v1/namespaces/default/events",
    "pause-0.18eb59195699f443",
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
           "metadata": {"name": "pause-0.18eb59195699f443", "namespace": "default"},
           "eventTime": "2026-11-25T17:14:01.799248Z", "reportingController": "default-scheduler",
           "reportingInstance": "default-scheduler-vm", "action": "Scheduling", "reason": "FailedScheduling",
           "regarding": {"kind": "Pod", "namespace": "default", "name": "pause-0",
                         "uid": "c06545f3-c590-4205-9a57-1736654a21c0", "apiVersion": "v1", "resourceVersion": "10"},
           "note": "running Bind plugin \"DefaultBinder\": error decoding Binding: expected value at line 1 column 1",
           "type": "Warning", "deprecatedSource": {}}))]
#[case::lease(
    "lease.pb",
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
    "kube-scheduler",
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
           "spec": {"holderIdentity": "vm_b4156cca-fbc1-4e3e-9197-f8f9866e2f33", "leaseDurationSeconds": 15,
                    "acquireTime": "2026-11-25T17:25:13.716025Z", "renewTime": "2026-11-25T17:25:13.716025Z",
                    "leaseTransitions": 0}}))]
fn kube_scheduler_bodies_are_stored_as_their_json_would_be(
    #[case] file: &str,
    #[case] collection: &str,
    #[case] name: &str,
    #[case] as_json: Value,
) {
    let (pb, js) = (Cluster::start(), Cluster::start());
    let (code, created) = pb.request_bytes("POST", collection, PROTOBUF, &testdata(file));
    assert_eq!(code, 201, "{created}");
    let (code, created) = js.post(collection, &as_json);
    assert_eq!(code, 201, "{created}");
    let path = format!("{collection}/{name}");
    let (from_pb, from_json) = (pb.get(&path), js.get(&path));
    assert_eq!(from_pb.0, 200);
    assert_eq!(masked(from_pb.1), masked(from_json.1));
}

/// Leader election renews its Lease with a PUT of the same protobuf body.
#[test]
fn kube_scheduler_lease_is_renewed_with_a_protobuf_put() {
    let c = Cluster::start();
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let (code, created) = c.request_bytes("POST", leases, PROTOBUF, &testdata("lease.pb"));
    assert_eq!(code, 201, "{created}");
    let (code, renewed) = c.request_bytes(
        "PUT",
        &format!("{leases}/kube-scheduler"),
        PROTOBUF,
        &testdata("lease.pb"),
    );
    assert_eq!(code, 200, "{renewed}");
    // The same spec: a no-op update, which keeps the resourceVersion as upstream's does.
    assert_eq!(renewed, created);
}

fn create_pod(c: &Cluster, name: &str) -> Value {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                     "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    let (code, created) = c.post("/api/v1/namespaces/default/pods", &pod);
    assert_eq!(code, 201, "{created}");
    created
}

/// kube-scheduler's captured Binding (pod default/pause-0 with uid `CAPTURED_UID`, node-0).
const CAPTURED_UID: &[u8] = b"c06545f3-c590-4205-9a57-1736654a21c0";

/// The captured Binding with its uid precondition replaced by `uid` (same length: a UUID).
fn binding_for(uid: &str) -> Vec<u8> {
    let mut body = testdata("binding.pb");
    let at = body
        .windows(CAPTURED_UID.len())
        .position(|w| w == CAPTURED_UID)
        .expect("the captured uid is in the body");
    body.splice(at..at + CAPTURED_UID.len(), uid.bytes());
    body
}

/// The Binding's ObjectMeta uid is a precondition on the pod: a pod recreated under the same
/// name (another uid) is not bound, as upstream's BindingREST refuses it.
#[rstest]
fn binding_uid_precondition(
    #[values(false, true)] matching: bool,
    #[values("pods/pause-0/binding", "bindings")] path: &str,
) {
    let c = Cluster::start();
    let pod = create_pod(&c, "pause-0");
    let pod_uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let body = if matching {
        binding_for(&pod_uid)
    } else {
        testdata("binding.pb")
    };
    let (code, status) = c.request_bytes(
        "POST",
        &format!("/api/v1/namespaces/default/{path}"),
        PROTOBUF,
        &body,
    );
    let (_, stored) = c.get("/api/v1/namespaces/default/pods/pause-0");
    if matching {
        assert_eq!(
            (code, status),
            (
                201,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
            )
        );
        assert_eq!(stored["spec"]["nodeName"], "node-0");
    } else {
        let message = format!(
            "Operation cannot be fulfilled on pods \"pause-0\": StorageError: invalid object, \
             Code: 4, Key: /registry/pods/default/pause-0, ResourceVersion: 0, AdditionalErrorMsg: \
             Precondition failed: UID in precondition: c06545f3-c590-4205-9a57-1736654a21c0, \
             UID in object meta: {pod_uid}"
        );
        assert_eq!(
            (code, status),
            (
                409,
                failure(
                    409,
                    "Conflict",
                    &message,
                    Some(json!({"name": "pause-0", "kind": "pods"}))
                )
            )
        );
        assert_eq!(stored["spec"].get("nodeName"), None);
    }
}

/// A pod bound by kube-scheduler's protobuf Binding is the pod a JSON Binding binds.
#[test]
fn kube_scheduler_binding_binds_as_its_json_would() {
    let (pb, js) = (Cluster::start(), Cluster::start());
    let uid = create_pod(&pb, "pause-0")["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let json_uid = create_pod(&js, "pause-0")["metadata"]["uid"].clone();
    let binding = "/api/v1/namespaces/default/pods/pause-0/binding";
    let (code, status) = pb.request_bytes("POST", binding, PROTOBUF, &binding_for(&uid));
    assert_eq!(code, 201, "{status}");
    let as_json = json!({"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": "pause-0", "namespace": "default", "uid": json_uid},
                         "target": {"kind": "Node", "name": "node-0"}});
    let (code, status) = js.post(binding, &as_json);
    assert_eq!(code, 201, "{status}");
    let pod = "/api/v1/namespaces/default/pods/pause-0";
    assert_eq!(masked(pb.get(pod).1), masked(js.get(pod).1));
}

/// `kubectl create configmap cm1 --from-literal=a=1 --from-literal=b=2`, recorded.
const CONFIGMAP: &str = "6b3873000a0f0a0276311209436f6e6669674d617012250a130a03636d3112001a0022002a0032003800420012060a016112013112060a01621201321a002200";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
        .collect()
}

/// Bodies upstream refuses, with its whole Status.
#[rstest]
#[case::bad_magic(
    b"{\"kind\":\"ConfigMap\"}".to_vec(), "/api/v1/namespaces/default/configmaps",
    "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a protobuf message, expected prefix [107, 56, 115, 0] ({\"kind\":\"ConfigMap\"})")]
#[case::truncated_envelope(
    hex(&CONFIGMAP[..40]), "/api/v1/namespaces/default/configmaps",
    "the object provided is unrecognized (must be of type ConfigMap): unexpected EOF (k8s\u{0}\n\u{f}\n\u{2}v1\u{12}\tConfigMa)")]
#[case::kind_not_the_resources(
    hex(CONFIGMAP), "/api/v1/namespaces",
    "ConfigMap in version \"v1\" cannot be handled as a Namespace: converting (v1.ConfigMap) to (core.Namespace): unknown conversion")]
#[case::kind_not_registered(
    b"k8s\0\x0a\x0c\x0a\x02v1\x12\x06Widget\x12\x00".to_vec(), "/api/v1/namespaces/default/configmaps",
    "Widget in version \"v1\" cannot be handled as a ConfigMap: no kind \"Widget\" is registered for version \"v1\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"")]
#[case::binding_of_another_kind(
    hex(CONFIGMAP), "/api/v1/namespaces/default/pods/pause-0/binding",
    "ConfigMap in version \"v1\" cannot be handled as a Binding: converting (v1.ConfigMap) to (core.Binding): unknown conversion")]
fn refused_protobuf_bodies(#[case] body: Vec<u8>, #[case] path: &str, #[case] message: &str) {
    let c = Cluster::start();
    assert_eq!(
        c.request_bytes("POST", path, PROTOBUF, &body),
        (400, failure(400, "BadRequest", message, None))
    );
}

/// Every collection upstream kube-scheduler's informers list and watch with its default
/// configuration (shared/reference/kube-scheduler-wire/README.md), with the query it sends.
const SCHEDULER_INFORMERS: &[(&str, &str)] = &[
    ("/api/v1/pods", "PodList"),
    ("/api/v1/nodes", "NodeList"),
    ("/apis/storage.k8s.io/v1/csinodes", "CSINodeList"),
    (
        "/apis/resource.k8s.io/v1/resourceclaims",
        "ResourceClaimList",
    ),
    (
        "/apis/resource.k8s.io/v1/resourceslices",
        "ResourceSliceList",
    ),
    ("/apis/resource.k8s.io/v1/deviceclasses", "DeviceClassList"),
    ("/api/v1/persistentvolumes", "PersistentVolumeList"),
    (
        "/api/v1/persistentvolumeclaims",
        "PersistentVolumeClaimList",
    ),
    ("/apis/storage.k8s.io/v1/storageclasses", "StorageClassList"),
    ("/apis/storage.k8s.io/v1/csidrivers", "CSIDriverList"),
    (
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        "CSIStorageCapacityList",
    ),
    (
        "/apis/storage.k8s.io/v1/volumeattachments",
        "VolumeAttachmentList",
    ),
    ("/api/v1/namespaces", "NamespaceList"),
    ("/api/v1/services", "ServiceList"),
    (
        "/api/v1/replicationcontrollers",
        "ReplicationControllerList",
    ),
    ("/apis/apps/v1/replicasets", "ReplicaSetList"),
    ("/apis/apps/v1/statefulsets", "StatefulSetList"),
    (
        "/apis/policy/v1/poddisruptionbudgets",
        "PodDisruptionBudgetList",
    ),
];

const WATCH_LIST: &str = "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=&timeoutSeconds=1";

#[test]
fn every_kind_kube_scheduler_watches_answers_list_and_watch_list() {
    let c = Cluster::start();
    std::thread::scope(|s| {
        for &(path, list_kind) in SCHEDULER_INFORMERS {
            let c = &c;
            s.spawn(move || {
                let selector = if path == "/api/v1/pods" {
                    "&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
                } else {
                    ""
                };
                let (code, list) = c.get(&format!("{path}?limit=500&resourceVersion=0{selector}"));
                assert_eq!((code, &list["kind"]), (200, &json!(list_kind)), "{path}");
                let (code, body) =
                    c.request_raw("GET", &format!("{path}?{WATCH_LIST}{selector}"), None, "");
                assert_eq!(code, 200, "{path}");
                let events: Vec<Value> = String::from_utf8_lossy(&body)
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
                    .collect();
                let end = events.last().cloned().unwrap_or(Value::Null);
                assert_eq!(end["type"], "BOOKMARK", "{path}: {events:?}");
                assert_eq!(
                    end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
                    "{path}"
                );
            });
        }
    });
}

/// resource.k8s.io/v1 in discovery as upstream serves it, and `kubectl get` with upstream's
/// columns.
#[test]
fn kubectl_reads_the_resource_k8s_io_kinds() {
    let c = Cluster::start();
    let resources = c.kubectl_ok(&[
        "api-resources",
        "--api-group=resource.k8s.io",
        "--no-headers",
    ]);
    let rows: Vec<Vec<&str>> = resources
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            [
                "deviceclasses",
                "resource.k8s.io/v1",
                "false",
                "DeviceClass"
            ],
            [
                "resourceclaims",
                "resource.k8s.io/v1",
                "true",
                "ResourceClaim"
            ],
            [
                "resourceclaimtemplates",
                "resource.k8s.io/v1",
                "true",
                "ResourceClaimTemplate"
            ],
            [
                "resourceslices",
                "resource.k8s.io/v1",
                "false",
                "ResourceSlice"
            ],
        ]
    );
    let manifest = c.file(
        "dra.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.example.com\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: node-1-gpu\n\
         spec:\n  driver: gpu.example.com\n  nodeName: node-1\n  pool:\n    name: node-1\n    generation: 1\n    resourceSliceCount: 1\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n\
         spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.example.com\n",
    );
    c.kubectl_ok(&["create", "-f", &manifest]);
    let slices = c.kubectl_ok(&[
        "get",
        "resourceslices",
        "--field-selector=spec.nodeName=node-1",
    ]);
    let cols = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let slices = cols(&slices);
    assert_eq!(slices[0], ["NAME", "NODE", "DRIVER", "POOL", "AGE"]);
    assert_eq!(
        slices[1][..4],
        ["node-1-gpu", "node-1", "gpu.example.com", "node-1"]
    );
    let claims = cols(&c.kubectl_ok(&["get", "resourceclaims"]));
    assert_eq!(claims[0], ["NAME", "STATE", "AGE"]);
    assert_eq!(claims[1][..2], ["gpu", "pending"]);
}

use rstest::rstest;
use serde_json::json;

use super::*;
use crate::resources::RESOURCES;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
        .collect()
}

/// Protobuf encoding for building bodies: a varint field.
fn varint(tag: u64, mut v: u64) -> Vec<u8> {
    let mut out = key(tag, 0);
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn key(tag: u64, wire: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut v = (tag << 3) | wire;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A length-delimited field (string, bytes, message).
fn bytes(tag: u64, b: &[u8]) -> Vec<u8> {
    let mut out = key(tag, 2);
    out.extend(varint(0, b.len() as u64).split_off(1));
    out.extend_from_slice(b);
    out
}

fn msg(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// `k8s\0` and a runtime.Unknown around `raw`.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = msg(&[bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())]);
    let mut out = MAGIC.to_vec();
    out.extend(bytes(1, &type_meta));
    out.extend(bytes(2, raw));
    out
}

fn target(api_version: &'static str, kind: &'static str) -> Target<'static> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Target {
        group,
        version,
        kind,
    }
}

fn testdata(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

// Bodies recorded from kubectl 1.37.1 `kubectl create …` (deployment web --image=nginx
// --port=80 --replicas=2; job pi --image=perl:5.34 -- perl -e "print 1"); the JSON is what
// the same command sends as JSON (`--dry-run=client -o json`).
#[rstest]
#[case::namespace(
    "6b3873000a0f0a02763112094e616d657370616365121b0a130a03666f6f12001a0022002a0032003800420012001a020a001a002200",
    "v1", "Namespace",
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foo"},
           "spec": {}, "status": {}}))]
#[case::configmap(
    "6b3873000a0f0a0276311209436f6e6669674d617012250a130a03636d3112001a0022002a0032003800420012060a016112013112060a01621201321a002200",
    "v1", "ConfigMap",
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"},
           "data": {"a": "1", "b": "2"}}))]
#[case::priorityclass(
    "6b3873000a250a147363686564756c696e672e6b38732e696f2f7631120d5072696f72697479436c61737312350a140a046869676812001a0022002a0032003800420010e8071800220268692a14507265656d70744c6f7765725072696f726974791a002200",
    "scheduling.k8s.io/v1", "PriorityClass",
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
           "metadata": {"name": "high"},
           "value": 1000, "description": "hi", "preemptionPolicy": "PreemptLowerPriority"}))]
#[case::service(
    "6b3873000a0d0a02763112075365727669636512660a1d0a02733112001a0022002a003200380042005a090a036170701202733112410a1b0a0738302d38303830120354435018502207080010903f1a00280012090a03617070120273311a002209436c757374657249503a00420052005a00600068001a020a001a002200",
    "v1", "Service",
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "s1", "labels": {"app": "s1"}},
           "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "s1"}, "type": "ClusterIP"},
           "status": {"loadBalancer": {}}}))]
#[case::deployment(
    "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412b8010a1f0a0377656212001a0022002a003200380042005a0a0a0361707012037765621286010802120c0a0a0a0361707012037765621a6c0a1c0a0012001a0022002a003200380042005a0a0a036170701203776562124c122e0a056e67696e7812056e67696e782a00320a0a001000185022002a0042006a007200800100880100900100a201001a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c0800100018002000280038001a002200",
    "apps/v1", "Deployment",
    json!({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                          "ports": [{"containerPort": 80}], "resources": {}}]}},
                    "strategy": {}},
           "status": {}}))]
#[case::job(
    "6b3873000a0f0a0862617463682f763112034a6f62128f010a120a02706912001a0022002a00320038004200126f326d0a100a0012001a0022002a00320038004200125912360a02706912097065726c3a352e33341a047065726c1a022d651a077072696e7420312a0042006a007200800100880100900100a201001a054e65766572320042004a0052005800600068008201008a01009a0100c201001a082000280030003a001a002200",
    "batch/v1", "Job",
    json!({"kind": "Job", "apiVersion": "batch/v1", "metadata": {"name": "pi"},
           "spec": {"template": {"metadata": {},
                                 "spec": {"containers": [{"name": "pi", "image": "perl:5.34",
                                                          "command": ["perl", "-e", "print 1"], "resources": {}}],
                                          "restartPolicy": "Never"}}},
           "status": {}}))]
fn kubectl_generator_bodies(
    #[case] body: &str,
    #[case] api_version: &'static str,
    #[case] kind: &'static str,
    #[case] want: Value,
) {
    assert_eq!(decode(&hex(body), target(api_version, kind)), Ok(want));
}

/// The bodies upstream kube-scheduler v1.35.4 sent, decoded as client-go would have written
/// them in JSON (unset Times and omitempty zeros left out, pointer fields set to zero kept).
#[rstest]
#[case::binding("binding.pb", "v1", "Binding", json!({
    "apiVersion": "v1", "kind": "Binding",
    "metadata": {"name": "pause-0", "namespace": "default",
                 "uid": "c06545f3-c590-4205-9a57-1736654a21c0"},
    "target": {"kind": "Node", "name": "node-0"}}))]
#[case::event("events.k8s.io-v1-event.pb", "events.k8s.io/v1", "Event", json!({
    "apiVersion": "events.k8s.io/v1", "kind": "Event",
    "metadata": {"name": "pause-0.18eb59195699f443", "namespace": "default"},
    "eventTime": "2026-11-25T17:14:01.799248Z",
    "reportingController": "default-scheduler",
    "reportingInstance": "default-scheduler-vm",
    "action": "Scheduling",
    "reason": "FailedScheduling",
    "regarding": {"kind": "Pod", "namespace": "default", "name": "pause-0",
                  "uid": "c06545f3-c590-4205-9a57-1736654a21c0", "apiVersion": "v1",
                  "resourceVersion": "10"},
    "note": "running Bind plugin \"DefaultBinder\": error decoding Binding: expected value at line 1 column 1",
    "type": "Warning",
    "deprecatedSource": {}}))]
#[case::lease("lease.pb", "coordination.k8s.io/v1", "Lease", json!({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
    "spec": {"holderIdentity": "vm_b4156cca-fbc1-4e3e-9197-f8f9866e2f33",
             "leaseDurationSeconds": 15,
             "acquireTime": "2026-11-25T17:25:13.716025Z",
             "renewTime": "2026-11-25T17:25:13.716025Z",
             "leaseTransitions": 0}}))]
fn kube_scheduler_bodies_decode_as_client_go_json(
    #[case] file: &str,
    #[case] api_version: &'static str,
    #[case] kind: &'static str,
    #[case] want: Value,
) {
    assert_eq!(decode(&testdata(file), target(api_version, kind)), Ok(want));
}

/// Kinds being added to the resources table on other branches; listed here so that the
/// schema is checked for them before they land.
const KINDS_BEING_ADDED: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ControllerRevision"),
    ("batch/v1", "Job"),
];

#[test]
fn every_stored_kind_decodes() {
    let served = RESOURCES
        .iter()
        .map(|r| (r.group, r.version, r.kind))
        .chain(KINDS_BEING_ADDED.iter().map(|(av, k)| {
            let (g, v) = av.rsplit_once('/').unwrap_or(("", av));
            (g, v, *k)
        }));
    for (group, version, kind) in served {
        let into = Target {
            group,
            version,
            kind,
        };
        let av = into.api_version();
        let body = envelope(&av, kind, &bytes(1, &bytes(1, b"x")));
        assert_eq!(
            decode(&body, into),
            Ok(json!({"apiVersion": av, "kind": kind, "metadata": {"name": "x"}})),
            "{av} {kind}"
        );
    }
}

/// Go's JSON forms of the apimachinery types and of Go's field kinds.
#[rstest]
#[case::time_to_the_second_and_micro_time_to_the_microsecond(
    "coordination.k8s.io/v1", "Lease",
    msg(&[bytes(2, &msg(&[
        bytes(3, &msg(&[varint(1, 1_764_091_513), varint(2, 716_025_000)])),
        bytes(4, &msg(&[varint(1, 1_764_091_513)])),
    ]))]),
    json!({"spec": {"acquireTime": "2025-11-25T17:25:13.716025Z", "renewTime": "2025-11-25T17:25:13.000000Z"}}))]
#[case::object_meta_time_drops_nanoseconds(
    "v1", "ConfigMap",
    msg(&[bytes(1, &bytes(8, &msg(&[varint(1, 1_764_091_513), varint(2, 5)])))]),
    json!({"metadata": {"creationTimestamp": "2025-11-25T17:25:13Z"}}))]
#[case::pointer_zero_is_kept_value_zero_is_omitted(
    "apps/v1", "Deployment",
    msg(&[bytes(2, &msg(&[varint(1, 0), varint(5, 0), varint(6, 0)]))]),
    json!({"spec": {"replicas": 0, "revisionHistoryLimit": 0}}))]
#[case::required_zero_is_written(
    "apps/v1", "ControllerRevision",
    msg(&[varint(3, 0)]),
    json!({"revision": 0}))]
#[case::negative_int32_and_int64(
    "v1", "Pod",
    msg(&[bytes(2, &msg(&[
        varint(25, (-5i64) as u64),
        bytes(22, &msg(&[bytes(1, b"k"), varint(5, (-1i64) as u64)])),
    ]))]),
    json!({"spec": {"priority": -5, "tolerations": [{"key": "k", "tolerationSeconds": -1}]}}))]
#[case::int_or_string_and_quantity(
    "v1", "Pod",
    msg(&[bytes(2, &bytes(2, &msg(&[
        bytes(1, b"c"),
        bytes(6, &msg(&[varint(3, 80)])),
        bytes(8, &bytes(1, &msg(&[bytes(1, b"cpu"), bytes(2, &bytes(1, b"500m"))]))),
        bytes(10, &bytes(1, &bytes(2, &msg(&[bytes(1, b"/healthz"), bytes(2, &msg(&[varint(1, 1), bytes(3, b"http")]))])))),
    ])))]),
    json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}],
           "resources": {"limits": {"cpu": "500m"}},
           "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}}}]}}))]
#[case::inline_structs_are_flattened(
    "v1", "Pod",
    msg(&[bytes(2, &bytes(1, &msg(&[
        bytes(1, b"config"),
        bytes(2, &bytes(19, &msg(&[bytes(1, &bytes(1, b"cm")), varint(3, 0o644)]))),
    ])))]),
    json!({"spec": {"volumes": [{"name": "config", "configMap": {"name": "cm", "defaultMode": 420}}]}}))]
#[case::bytes_are_base64(
    "v1", "ConfigMap",
    msg(&[bytes(3, &msg(&[bytes(1, b"bin"), bytes(2, &[0, 1, 255])]))]),
    json!({"binaryData": {"bin": "AAH/"}}))]
#[case::raw_extension_is_embedded_json(
    "apps/v1", "ControllerRevision",
    msg(&[bytes(2, &bytes(1, br#"{"spec":{"template":{}}}"#)), varint(3, 2)]),
    json!({"data": {"spec": {"template": {}}}, "revision": 2}))]
#[case::unknown_fields_are_skipped(
    "v1", "ConfigMap",
    msg(&[bytes(99, b"future"), varint(98, 1), bytes(2, &msg(&[bytes(1, b"a"), bytes(2, b"1")]))]),
    json!({"data": {"a": "1"}}))]
#[case::packed_repeated_varints(
    "batch/v1", "Job",
    msg(&[bytes(2, &bytes(11, &bytes(1, &bytes(2, &msg(&[bytes(2, b"In"), bytes(3, &[1, 2, 3])])))))]),
    json!({"spec": {"podFailurePolicy": {"rules": [{"onExitCodes": {"operator": "In", "values": [1, 2, 3]}}]}}}))]
fn go_json_forms(
    #[case] api_version: &'static str,
    #[case] kind: &'static str,
    #[case] raw: Vec<u8>,
    #[case] fields: Value,
) {
    let mut want = json!({"apiVersion": api_version, "kind": kind});
    if let (Some(w), Value::Object(f)) = (want.as_object_mut(), fields) {
        w.extend(f);
    }
    assert_eq!(
        decode(
            &envelope(api_version, kind, &raw),
            target(api_version, kind)
        ),
        Ok(want)
    );
}

fn bad_request(message: &str) -> ApiError {
    ApiError::bad_request(message)
}

/// Bodies upstream refuses, with its messages (transformDecodeError around the protobuf
/// serializer's and gogo-protobuf's errors).
#[rstest]
#[case::bad_magic(b"{\"kind\":\"ConfigMap\"}".to_vec(), "v1", "ConfigMap", bad_request(
    "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a protobuf message, expected prefix [107, 56, 115, 0] ({\"kind\":\"ConfigMap\"})"))]
#[case::truncated_envelope(b"k8s\0\x0a\x20\x0a\x02v1".to_vec(), "v1", "ConfigMap", bad_request(
    "the object provided is unrecognized (must be of type ConfigMap): unexpected EOF (k8s\0\n \n\u{2}v1)"))]
#[case::truncated_object(
    envelope("v1", "ConfigMap", &[0x0a, 0x10, 0x0a]), "v1", "ConfigMap", bad_request(
    "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: unexpected EOF"))]
#[case::wrong_wire_type(
    envelope("v1", "ConfigMap", &varint(1, 7)), "v1", "ConfigMap", bad_request(
    "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: proto: wrong wireType = 0 for field Metadata"))]
#[case::kind_mismatch(
    envelope("v1", "ConfigMap", &[]), "v1", "Namespace", bad_request(
    "ConfigMap in version \"v1\" cannot be handled as a Namespace: converting (v1.ConfigMap) to (core.Namespace): unknown conversion"))]
#[case::group_mismatch(
    envelope("coordination.k8s.io/v1", "Lease", &[]), "apps/v1", "ReplicaSet", bad_request(
    "Lease in version \"v1\" cannot be handled as a ReplicaSet: converting (v1.Lease) to (apps.ReplicaSet): unknown conversion"))]
#[case::unknown_kind(
    envelope("v1", "Widget", &[]), "v1", "ConfigMap", bad_request(
    "Widget in version \"v1\" cannot be handled as a ConfigMap: no kind \"Widget\" is registered for version \"v1\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\""))]
#[case::other_version_of_the_kind(
    envelope("v1", "Event", &[]), "events.k8s.io/v1", "Event", bad_request(
    "the API version in the data (v1) does not match the expected API version (events.k8s.io/v1)"))]
fn bad_bodies(
    #[case] body: Vec<u8>,
    #[case] api_version: &'static str,
    #[case] kind: &'static str,
    #[case] want: ApiError,
) {
    assert_eq!(decode(&body, target(api_version, kind)), Err(want));
}

/// Upstream defaults a missing kind and apiVersion to the URL resource's.
#[rstest]
#[case::empty_envelope(b"k8s\0".to_vec())]
#[case::kind_only(envelope("", "Namespace", &[]))]
#[case::api_version_only(envelope("v1", "", &[]))]
fn envelope_without_type_meta_takes_the_resources(#[case] body: Vec<u8>) {
    assert_eq!(
        decode(&body, target("v1", "Namespace")),
        Ok(json!({"apiVersion": "v1", "kind": "Namespace"}))
    );
}

#[rstest]
#[case::zero(0, "0s")]
#[case::nanoseconds(15, "15ns")]
#[case::milliseconds(1_500_000, "1.5ms")]
#[case::seconds(90_000_000_000, "1m30s")]
#[case::hours(3_723_500_000_000, "1h2m3.5s")]
#[case::negative(-2_000_000_000, "-2s")]
fn go_duration_strings(#[case] nanos: i64, #[case] want: &str) {
    assert_eq!(go_duration(nanos), want);
}

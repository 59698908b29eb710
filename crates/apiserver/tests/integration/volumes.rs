//! The local cluster's volume controllers, through the API as a client sees them: the
//! PersistentVolume controller stand-in binding claims, the provisioner stand-in creating
//! volumes, the default StorageClass and its admission, and the kubelet stand-in waiting for
//! a pod's claims. Objects are created over HTTP (admission applies) and compared whole, with
//! server-chosen values (uids, resourceVersions, timestamps) masked.
//!
//! A claim "left alone" is checked after a later claim, created after it, was bound: the
//! controller handles events in order, so by then it has handled the first one.

use std::time::{Duration, Instant};

use apiserver::Config;
use serde_json::{json, Value};

use crate::harness::Cluster;

const PVS: &str = "/api/v1/persistentvolumes";
const PVCS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";
const CLASSES: &str = "/apis/storage.k8s.io/v1/storageclasses";

fn cluster() -> Cluster {
    Cluster::with_config(Config {
        volume_controllers: true,
        provisioners: vec![
            "rancher.io/local-path".to_string(),
            "zonal.csi.example.com".to_string(),
        ],
        ..Config::default()
    })
}

fn create(c: &Cluster, path: &str, obj: Value) -> Value {
    let (code, body) = c.post(path, &obj);
    assert_eq!(code, 201, "create {path}: {body}");
    body
}

/// Polls `path` until `done` holds (20 s at most) and returns the object.
fn wait_until(c: &Cluster, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, obj) = c.get(path);
        if code == 200 && done(&obj) {
            return obj;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never reached the state: {obj}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn phase(obj: &Value) -> &str {
    obj.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn bound_claim(c: &Cluster, name: &str) -> Value {
    masked(&wait_until(c, &format!("{PVCS}/{name}"), |o| {
        phase(o) == "Bound"
    }))
}

fn volume_in_phase(c: &Cluster, name: &str, want: &str) -> Value {
    masked(&wait_until(c, &format!("{PVS}/{name}"), |o| {
        phase(o) == want
    }))
}

/// The object with the values the server chooses replaced by placeholders.
fn masked(obj: &Value) -> Value {
    let mut v = obj.clone();
    for (pointer, placeholder) in [
        ("/metadata/uid", "UID"),
        ("/metadata/resourceVersion", "RV"),
        ("/metadata/creationTimestamp", "TIME"),
        ("/status/lastPhaseTransitionTime", "TIME"),
        ("/spec/claimRef/uid", "CLAIM-UID"),
        ("/spec/claimRef/resourceVersion", "CLAIM-RV"),
    ] {
        if let Some(x) = v.pointer_mut(pointer) {
            *x = json!(placeholder);
        }
    }
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

fn class(name: &str, provisioner: &str, mode: &str, extra: Value) -> Value {
    let mut c = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    c
}

fn volume(name: &str, size: &str, modes: Value, class: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": {"capacity": {"storage": size}, "accessModes": modes,
                 "storageClassName": class, "hostPath": {"path": format!("/tmp/{name}")}}})
}

fn claim(name: &str, size: &str, class: Option<&str>, extra_spec: Value) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
    if let Some(class) = class {
        c["spec"]["storageClassName"] = json!(class);
    }
    if let (Some(spec), Some(extra)) = (
        c.get_mut("spec").and_then(Value::as_object_mut),
        extra_spec.as_object(),
    ) {
        spec.extend(extra.clone());
    }
    c
}

fn node(name: &str, zone: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
        "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}}})
}

/// The Events about claim `name`: (type, reason, message, component), sorted, without their
/// counts (how often a controller saw the claim depends on timing).
fn claim_events(c: &Cluster, name: &str) -> Vec<(String, String, String, String)> {
    let (_, list) = c.get(&format!(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{name}"
    ));
    let s = |e: &Value, p: &str| {
        e.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut events: Vec<_> = list
        .pointer("/items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| s(e, "/involvedObject/kind") == "PersistentVolumeClaim")
        .map(|e| {
            (
                s(e, "/type"),
                s(e, "/reason"),
                s(e, "/message"),
                s(e, "/source/component"),
            )
        })
        .collect();
    events.sort();
    events
}

fn event(
    kind: &str,
    reason: &str,
    message: &str,
    component: &str,
) -> (String, String, String, String) {
    (kind.into(), reason.into(), message.into(), component.into())
}

fn annotate(c: &Cluster, path: &str, key: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    let (code, body) = c.request(
        "PATCH",
        path,
        Some("application/merge-patch+json"),
        &patch.to_string(),
    );
    assert_eq!(code, 200, "{body}");
}

/// The claim `name`, Bound to `volume` by the controller, as a real cluster shows it.
fn want_bound_claim(name: &str, volume: &str, class: &str, size: &str, capacity: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": "UID",
            "resourceVersion": "RV", "creationTimestamp": "TIME", "generation": 2,
            "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                            "pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 "storageClassName": class, "volumeMode": "Filesystem", "volumeName": volume},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                   "capacity": {"storage": capacity}}})
}

#[test]
fn an_immediate_claim_binds_to_the_smallest_volume_that_fits() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class("fast", "csi.example.com", "Immediate", json!({})),
    );
    let rwo = json!(["ReadWriteOnce"]);
    for v in [
        volume(
            "too-small",
            "1Gi",
            rwo.clone(),
            "fast",
            json!({"tier": "gold"}),
        ),
        volume("big", "10Gi", rwo.clone(), "fast", json!({"tier": "gold"})),
        volume("fits", "5Gi", rwo.clone(), "fast", json!({"tier": "gold"})),
        volume(
            "other-class",
            "3Gi",
            rwo.clone(),
            "slow",
            json!({"tier": "gold"}),
        ),
        volume(
            "read-only",
            "3Gi",
            json!(["ReadOnlyMany"]),
            "fast",
            json!({"tier": "gold"}),
        ),
        volume(
            "unselected",
            "3Gi",
            rwo.clone(),
            "fast",
            json!({"tier": "bronze"}),
        ),
        volume(
            "more-modes",
            "3Gi",
            json!(["ReadWriteOnce", "ReadOnlyMany"]),
            "fast",
            json!({"tier": "gold"}),
        ),
    ] {
        create(&c, PVS, v);
    }
    create(
        &c,
        PVCS,
        claim(
            "data",
            "2Gi",
            Some("fast"),
            json!({"selector": {"matchLabels": {"tier": "gold"}}}),
        ),
    );
    let mut want = want_bound_claim("data", "fits", "fast", "2Gi", "5Gi");
    want["spec"]["selector"] = json!({"matchLabels": {"tier": "gold"}});
    assert_eq!(bound_claim(&c, "data"), want);
    assert_eq!(
        volume_in_phase(&c, "fits", "Bound"),
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "fits", "uid": "UID", "resourceVersion": "RV",
                "creationTimestamp": "TIME", "generation": 2, "labels": {"tier": "gold"},
                "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "fast", "hostPath": {"path": "/tmp/fits"},
                "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem",
                "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default",
                    "name": "data", "uid": "CLAIM-UID", "apiVersion": "v1",
                    "resourceVersion": "CLAIM-RV"}},
            "status": {"phase": "Bound", "lastPhaseTransitionTime": "TIME"}})
    );
}

/// A volume created after the claim that waits for it is found at once, not on a periodic
/// resync.
#[test]
fn a_claim_binds_to_a_volume_created_after_it() {
    let c = cluster();
    create(&c, PVCS, claim("data", "1Gi", Some(""), json!({})));
    create(
        &c,
        PVS,
        volume("late", "2Gi", json!(["ReadWriteOnce"]), "", json!({})),
    );
    assert_eq!(
        bound_claim(&c, "data"),
        want_bound_claim("data", "late", "", "1Gi", "2Gi")
    );
}

/// A user pre-binds a volume to a claim by name (a claimRef without uid); created after the
/// claim, it is bound to it, not to a bigger claim's neighbour, and keeps no
/// bound-by-controller annotation.
#[test]
fn a_volume_pre_bound_by_name_created_after_its_claim_binds_to_it() {
    let c = cluster();
    create(&c, PVCS, claim("data", "1Gi", Some(""), json!({})));
    let mut pv = volume("reserved", "3Gi", json!(["ReadWriteOnce"]), "", json!({}));
    pv["spec"]["claimRef"] = json!({"namespace": "default", "name": "data"});
    create(&c, PVS, pv);
    assert_eq!(
        bound_claim(&c, "data"),
        want_bound_claim("data", "reserved", "", "1Gi", "3Gi")
    );
    let pv = volume_in_phase(&c, "reserved", "Bound");
    assert_eq!(
        (
            pv.pointer("/metadata/annotations"),
            pv.pointer("/spec/claimRef/uid")
        ),
        (None, Some(&json!("CLAIM-UID")))
    );
}

/// A claim naming a volume too small for it stays Pending with upstream's VolumeMismatch
/// warning.
#[test]
fn a_claim_naming_a_volume_too_small_stays_pending_with_a_warning() {
    let c = cluster();
    create(
        &c,
        PVS,
        volume("small", "1Gi", json!(["ReadWriteOnce"]), "", json!({})),
    );
    create(
        &c,
        PVCS,
        claim("data", "2Gi", Some(""), json!({"volumeName": "small"})),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while claim_events(&c, "data").is_empty() {
        assert!(Instant::now() < deadline, "no event");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        claim_events(&c, "data"),
        [event(
            "Warning",
            "VolumeMismatch",
            "Cannot bind to requested volume \"small\": requested PV is too small",
            "persistentvolume-controller"
        )]
    );
    assert_eq!(
        (
            phase(&c.get(&format!("{PVCS}/data")).1),
            phase(&c.get(&format!("{PVS}/small")).1)
        ),
        ("Pending", "Available")
    );
}

/// The scheduler's VolumeBinding binds a WaitForFirstConsumer claim by writing the volume's
/// claimRef (and bound-by-controller); the controller completes the claim's side.
#[test]
fn a_volume_pre_bound_by_the_scheduler_completes_the_binding() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class(
            "local",
            "kubernetes.io/no-provisioner",
            "WaitForFirstConsumer",
            json!({}),
        ),
    );
    create(
        &c,
        PVS,
        volume(
            "local-1",
            "4Gi",
            json!(["ReadWriteOnce"]),
            "local",
            json!({}),
        ),
    );
    let pvc = create(&c, PVCS, claim("db", "1Gi", Some("local"), json!({})));
    let uid = pvc.pointer("/metadata/uid").cloned().unwrap_or_default();
    let patch = json!({"metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default",
            "name": "db", "uid": uid, "apiVersion": "v1"}}});
    let (code, body) = c.request(
        "PATCH",
        &format!("{PVS}/local-1"),
        Some("application/merge-patch+json"),
        &patch.to_string(),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        bound_claim(&c, "db"),
        want_bound_claim("db", "local-1", "local", "1Gi", "4Gi")
    );
    let pv = volume_in_phase(&c, "local-1", "Bound");
    assert_eq!(
        (
            pv.pointer("/spec/claimRef/name"),
            pv.pointer("/metadata/annotations")
        ),
        (
            Some(&json!("db")),
            Some(&json!({"pv.kubernetes.io/bound-by-controller": "yes"}))
        )
    );
}

#[test]
fn a_wait_for_first_consumer_claim_is_left_for_the_scheduler() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class(
            "wffc",
            "zonal.csi.example.com",
            "WaitForFirstConsumer",
            json!({}),
        ),
    );
    create(
        &c,
        CLASSES,
        class("now", "csi.example.com", "Immediate", json!({})),
    );
    create(
        &c,
        PVS,
        volume("free", "5Gi", json!(["ReadWriteOnce"]), "wffc", json!({})),
    );
    create(
        &c,
        PVS,
        volume("later", "5Gi", json!(["ReadWriteOnce"]), "now", json!({})),
    );
    let waiting = create(&c, PVCS, claim("waiting", "1Gi", Some("wffc"), json!({})));
    create(&c, PVCS, claim("barrier", "1Gi", Some("now"), json!({})));
    bound_claim(&c, "barrier");
    let (_, now) = c.get(&format!("{PVCS}/waiting"));
    assert_eq!(masked(&now), masked(&waiting));
    assert_eq!(phase(&c.get(&format!("{PVS}/free")).1), "Available");
}

#[test]
fn an_immediate_claim_of_a_class_is_handed_to_its_provisioner() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class("remote", "csi.example.com", "Immediate", json!({})),
    );
    create(&c, PVCS, claim("data", "1Gi", Some("remote"), json!({})));
    let got = wait_until(&c, &format!("{PVCS}/data"), |o| {
        o.pointer("/metadata/annotations").is_some()
    });
    assert_eq!(
        (got.pointer("/metadata/annotations"), phase(&got)),
        (
            Some(
                &json!({"volume.beta.kubernetes.io/storage-provisioner": "csi.example.com",
                         "volume.kubernetes.io/storage-provisioner": "csi.example.com"})
            ),
            "Pending"
        )
    );
}

/// `kubernetes.io/no-provisioner` (an in-tree name no plugin serves) gets upstream's
/// warning and no provisioner annotation.
#[test]
fn an_immediate_claim_of_no_provisioner_gets_upstreams_warning() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class(
            "manual",
            "kubernetes.io/no-provisioner",
            "Immediate",
            json!({}),
        ),
    );
    create(&c, PVCS, claim("data", "1Gi", Some("manual"), json!({})));
    let deadline = Instant::now() + Duration::from_secs(20);
    while claim_events(&c, "data").is_empty() {
        assert!(Instant::now() < deadline, "no event");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        claim_events(&c, "data"),
        [event(
            "Warning",
            "ProvisioningFailed",
            "no volume plugin matched name: kubernetes.io/no-provisioner",
            "persistentvolume-controller"
        )]
    );
    let (_, got) = c.get(&format!("{PVCS}/data"));
    assert_eq!(
        (got.pointer("/metadata/annotations"), phase(&got)),
        (None, "Pending")
    );
}

#[test]
fn the_provisioner_creates_a_volume_in_the_selected_nodes_zone() {
    let c = cluster();
    create(&c, "/api/v1/nodes", node("node-b", "zone-b"));
    create(
        &c,
        CLASSES,
        class(
            "zonal",
            "zonal.csi.example.com",
            "WaitForFirstConsumer",
            json!({"reclaimPolicy": "Retain", "mountOptions": ["noatime"]}),
        ),
    );
    let pvc = create(&c, PVCS, claim("data", "3Gi", Some("zonal"), json!({})));
    let uid = pvc
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // The controller has seen the claim without a node before the scheduler's choice.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !claim_events(&c, "data")
        .iter()
        .any(|e| e.1 == "WaitForFirstConsumer")
    {
        assert!(Instant::now() < deadline, "no WaitForFirstConsumer event");
        std::thread::sleep(Duration::from_millis(20));
    }
    annotate(
        &c,
        &format!("{PVCS}/data"),
        "volume.kubernetes.io/selected-node",
        "node-b",
    );
    let mut want = want_bound_claim("data", &format!("pvc-{uid}"), "zonal", "3Gi", "3Gi");
    want["metadata"]["annotations"] = json!({
        "pv.kubernetes.io/bind-completed": "yes",
        "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.beta.kubernetes.io/storage-provisioner": "zonal.csi.example.com",
        "volume.kubernetes.io/storage-provisioner": "zonal.csi.example.com",
        "volume.kubernetes.io/selected-node": "node-b"});
    assert_eq!(bound_claim(&c, "data"), want);
    let pvc_controller = "persistentvolume-controller";
    let provisioner = "zonal.csi.example.com_kubesched";
    assert_eq!(
        claim_events(&c, "data"),
        [
            event(
                "Normal",
                "ExternalProvisioning",
                "Waiting for a volume to be created either by the external provisioner \
                 'zonal.csi.example.com' or manually by the system administrator. If volume \
                 creation is delayed, please verify that the provisioner is running and \
                 correctly registered.",
                pvc_controller
            ),
            event(
                "Normal",
                "Provisioning",
                "External provisioner is provisioning volume for claim \"default/data\"",
                provisioner
            ),
            event(
                "Normal",
                "ProvisioningSucceeded",
                &format!("Successfully provisioned volume pvc-{uid}"),
                provisioner
            ),
            event(
                "Normal",
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
                pvc_controller
            ),
        ]
    );
    assert_eq!(
        volume_in_phase(&c, &format!("pvc-{uid}"), "Bound"),
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("pvc-{uid}"), "uid": "UID", "resourceVersion": "RV",
                "creationTimestamp": "TIME", "generation": 1,
                "annotations": {"pv.kubernetes.io/provisioned-by": "zonal.csi.example.com"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "3Gi"},
                "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default",
                    "name": "data", "uid": "CLAIM-UID", "apiVersion": "v1",
                    "resourceVersion": "CLAIM-RV"},
                "csi": {"driver": "zonal.csi.example.com", "volumeHandle": format!("pvc-{uid}")},
                "mountOptions": ["noatime"],
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                     "values": ["zone-b"]}]}]}},
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "zonal",
                "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "lastPhaseTransitionTime": "TIME"}})
    );
}

/// The scheduler's node choice reached the claim before the node reached the provisioner:
/// the volume is made when the node appears.
#[test]
fn a_claim_whose_selected_node_appears_later_is_provisioned_then() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class(
            "zonal",
            "zonal.csi.example.com",
            "WaitForFirstConsumer",
            json!({}),
        ),
    );
    create(&c, PVCS, claim("data", "1Gi", Some("zonal"), json!({})));
    annotate(
        &c,
        &format!("{PVCS}/data"),
        "volume.kubernetes.io/selected-node",
        "late-node",
    );
    wait_until(&c, &format!("{PVCS}/data"), |o| {
        o.pointer("/metadata/annotations/volume.kubernetes.io~1storage-provisioner")
            .is_some()
    });
    // A claim provisioned after that one was handed over: the provisioner has looked at it.
    create(
        &c,
        CLASSES,
        class("now", "zonal.csi.example.com", "Immediate", json!({})),
    );
    create(&c, PVCS, claim("barrier", "1Gi", Some("now"), json!({})));
    bound_claim(&c, "barrier");
    create(&c, "/api/v1/nodes", node("late-node", "zone-l"));
    let pv = bound_claim(&c, "data");
    let volume = pv
        .pointer("/spec/volumeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    assert_eq!(
        volume_in_phase(&c, volume, "Bound").pointer("/spec/nodeAffinity"),
        Some(
            &json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-l"]}]}]}})
        )
    );
}

/// A claim with no class gets the default class at admission; the local-path provisioner's
/// volume is a hostPath on the selected node.
#[test]
fn a_claim_without_a_class_gets_the_default_and_a_local_path_volume_on_its_node() {
    let c = Cluster::with_config(Config {
        volume_controllers: true,
        default_storage_class: true,
        ..Config::default()
    });
    create(&c, "/api/v1/nodes", node("node-a", "zone-a"));
    let pvc = create(&c, PVCS, claim("data", "1Gi", None, json!({})));
    assert_eq!(
        pvc.pointer("/spec/storageClassName"),
        Some(&json!("standard"))
    );
    let uid = pvc
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    annotate(
        &c,
        &format!("{PVCS}/data"),
        "volume.kubernetes.io/selected-node",
        "node-a",
    );
    bound_claim(&c, "data");
    let pv = volume_in_phase(&c, &format!("pvc-{uid}"), "Bound");
    assert_eq!(
        (
            pv.pointer("/spec/hostPath"),
            pv.pointer("/spec/nodeAffinity"),
            pv.pointer("/spec/persistentVolumeReclaimPolicy"),
            pv.pointer("/metadata/annotations"),
        ),
        (
            Some(
                &json!({"path": format!("/var/local-path-provisioner/pvc-{uid}_default_data"),
                         "type": "DirectoryOrCreate"})
            ),
            Some(
                &json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}]}})
            ),
            Some(&json!("Delete")),
            Some(&json!({"pv.kubernetes.io/provisioned-by": "rancher.io/local-path"})),
        )
    );
}

#[test]
fn a_selected_node_outside_the_allowed_topologies_gets_no_volume() {
    let c = cluster();
    create(&c, "/api/v1/nodes", node("node-c", "zone-c"));
    let allowed = json!({"allowedTopologies": [{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["zone-a", "zone-b"]}]}]});
    create(
        &c,
        CLASSES,
        class(
            "zonal",
            "zonal.csi.example.com",
            "WaitForFirstConsumer",
            allowed.clone(),
        ),
    );
    create(
        &c,
        CLASSES,
        class("anywhere", "zonal.csi.example.com", "Immediate", allowed),
    );
    create(&c, PVCS, claim("outside", "1Gi", Some("zonal"), json!({})));
    annotate(
        &c,
        &format!("{PVCS}/outside"),
        "volume.kubernetes.io/selected-node",
        "node-c",
    );
    // An Immediate claim of the same classes' topology: its volume is in the first allowed zone.
    let barrier = create(
        &c,
        PVCS,
        claim("barrier", "1Gi", Some("anywhere"), json!({})),
    );
    bound_claim(&c, "barrier");
    let uid = barrier
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let pv = volume_in_phase(&c, &format!("pvc-{uid}"), "Bound");
    assert_eq!(
        pv.pointer("/spec/nodeAffinity"),
        Some(
            &json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}]}})
        )
    );
    let (_, pvs) = c.get(PVS);
    let names: Vec<&str> = pvs
        .pointer("/items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    assert_eq!(names, vec![format!("pvc-{uid}")]);
    assert_eq!(phase(&c.get(&format!("{PVCS}/outside")).1), "Pending");
    let failed = claim_events(&c, "outside")
        .into_iter()
        .filter(|e| e.1 == "ProvisioningFailed")
        .collect::<Vec<_>>();
    assert_eq!(
        failed,
        [event(
            "Warning",
            "ProvisioningFailed",
            "failed to provision volume with StorageClass \"zonal\": selected node \"node-c\" \
             is not in the allowed topologies of storage class \"zonal\"",
            "zonal.csi.example.com_kubesched"
        )]
    );
}

#[test]
fn a_bound_claim_whose_volume_is_deleted_is_lost() {
    let c = cluster();
    create(
        &c,
        PVS,
        volume("v", "1Gi", json!(["ReadWriteOnce"]), "", json!({})),
    );
    create(&c, PVCS, claim("data", "1Gi", Some(""), json!({})));
    bound_claim(&c, "data");
    let (code, _) = c.request("DELETE", &format!("{PVS}/v"), None, "");
    assert_eq!(code, 200);
    let lost = wait_until(&c, &format!("{PVCS}/data"), |o| phase(o) == "Lost");
    assert_eq!(
        lost.get("status"),
        Some(&json!({"phase": "Lost"})),
        "a lost claim keeps no capacity or access modes"
    );
    assert_eq!(
        claim_events(&c, "data"),
        [event(
            "Warning",
            "ClaimLost",
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            "persistentvolume-controller"
        )]
    );
}

#[test]
fn a_retained_volume_whose_claim_is_deleted_is_released_and_keeps_its_claim_ref() {
    let c = cluster();
    create(
        &c,
        PVS,
        volume("kept", "1Gi", json!(["ReadWriteOnce"]), "", json!({})),
    );
    create(&c, PVCS, claim("data", "1Gi", Some(""), json!({})));
    bound_claim(&c, "data");
    let (code, _) = c.request("DELETE", &format!("{PVCS}/data"), None, "");
    assert_eq!(code, 200);
    let pv = volume_in_phase(&c, "kept", "Released");
    assert_eq!(
        (
            pv.pointer("/spec/claimRef/name"),
            pv.pointer("/spec/persistentVolumeReclaimPolicy")
        ),
        (Some(&json!("data")), Some(&json!("Retain")))
    );
}

#[test]
fn a_provisioned_volume_with_reclaim_policy_delete_goes_with_its_claim() {
    let c = cluster();
    create(
        &c,
        CLASSES,
        class("remote", "zonal.csi.example.com", "Immediate", json!({})),
    );
    let pvc = create(&c, PVCS, claim("data", "1Gi", Some("remote"), json!({})));
    bound_claim(&c, "data");
    let uid = pvc
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (code, _) = c.request("DELETE", &format!("{PVCS}/data"), None, "");
    assert_eq!(code, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.get(&format!("{PVS}/pvc-{uid}")).0 != 404 {
        assert!(Instant::now() < deadline, "the volume was not deleted");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A claim created with no class before any class is the default gets the default class
/// once one appears, and then binds.
#[test]
fn a_claim_without_a_class_gets_a_default_class_created_after_it() {
    let c = cluster();
    create(
        &c,
        PVS,
        volume("v", "1Gi", json!(["ReadWriteOnce"]), "late", json!({})),
    );
    create(&c, PVCS, claim("data", "1Gi", None, json!({})));
    let mut late = class("late", "csi.example.com", "Immediate", json!({}));
    late["metadata"]["annotations"] =
        json!({"storageclass.kubernetes.io/is-default-class": "true"});
    create(&c, CLASSES, late);
    let got = bound_claim(&c, "data");
    assert_eq!(
        (
            got.pointer("/spec/storageClassName"),
            got.pointer("/spec/volumeName")
        ),
        (Some(&json!("late")), Some(&json!("v")))
    );
}

#[test]
fn the_kubelet_starts_a_pod_only_once_its_claims_are_bound() {
    let c = Cluster::with_config(Config {
        simulate_kubelets: true,
        volume_controllers: true,
        ..Config::default()
    });
    create(&c, "/api/v1/nodes", node("node-a", "zone-a"));
    create(&c, PVCS, claim("data", "1Gi", Some(""), json!({})));
    let pod = |name: &str, volumes: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "nginx"}],
                     "volumes": volumes}})
    };
    create(
        &c,
        "/api/v1/namespaces/default/pods",
        pod(
            "waits",
            json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
        ),
    );
    create(
        &c,
        "/api/v1/namespaces/default/pods",
        pod("plain", json!([{"name": "e", "emptyDir": {}}])),
    );
    wait_until(&c, "/api/v1/namespaces/default/pods/plain", |o| {
        phase(o) == "Running"
    });
    assert_eq!(
        phase(&c.get("/api/v1/namespaces/default/pods/waits").1),
        "Pending"
    );
    create(
        &c,
        PVS,
        volume("v", "1Gi", json!(["ReadWriteOnce"]), "", json!({})),
    );
    wait_until(&c, "/api/v1/namespaces/default/pods/waits", |o| {
        phase(o) == "Running"
    });
}

/// Binding is driven by the objects, not by events seen before: a claim and a volume stored
/// by a server without the controllers are bound by the next server on the same data dir.
#[test]
fn claims_stored_before_a_restart_are_bound_after_it() {
    let dir = tempfile::tempdir().expect("data dir");
    {
        let c = Cluster::with_config(Config {
            data_dir: Some(dir.path().to_path_buf()),
            ..Config::default()
        });
        create(
            &c,
            PVS,
            volume("v", "1Gi", json!(["ReadWriteOnce"]), "", json!({})),
        );
        create(&c, PVCS, claim("data", "1Gi", Some(""), json!({})));
    }
    let c = Cluster::with_config(Config {
        data_dir: Some(dir.path().to_path_buf()),
        volume_controllers: true,
        default_storage_class: true,
        ..Config::default()
    });
    assert_eq!(
        bound_claim(&c, "data").pointer("/spec/volumeName"),
        Some(&json!("v"))
    );
}

#[test]
fn a_default_storage_class_is_created_unless_one_is_the_default() {
    let config = |dir: &std::path::Path| Config {
        data_dir: Some(dir.to_path_buf()),
        default_storage_class: true,
        ..Config::default()
    };
    let dir = tempfile::tempdir().expect("data dir");
    {
        let c = Cluster::with_config(config(dir.path()));
        let (_, sc) = c.get(&format!("{CLASSES}/standard"));
        assert_eq!(
            masked(&sc),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "standard", "uid": "UID", "resourceVersion": "RV",
                    "creationTimestamp": "TIME", "generation": 1,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
                "volumeBindingMode": "WaitForFirstConsumer"})
        );
        let (code, _) = c.request("DELETE", &format!("{CLASSES}/standard"), None, "");
        assert_eq!(code, 200);
        let mut own = class("mine", "csi.example.com", "Immediate", json!({}));
        own["metadata"]["annotations"] =
            json!({"storageclass.kubernetes.io/is-default-class": "true"});
        create(&c, CLASSES, own);
    }
    let c = Cluster::with_config(config(dir.path()));
    let (_, classes) = c.get(CLASSES);
    let names: Vec<&str> = classes
        .pointer("/items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    assert_eq!(names, ["mine"]);
}

//! The storage API through real kubectl: tables as a real cluster prints them, defaults,
//! discovery, the update validation upstream applies, and watch.

use std::process::Stdio;
use std::time::Duration;

use crate::harness::{Cluster, Lines};

const CLASSES: &str = r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: csi.example.com
parameters: {type: ssd}
"#;

const VOLUMES: &str = r#"apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-free}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  storageClassName: fast
  hostPath: {path: /tmp/free}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-bound}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: fast
  claimRef: {namespace: default, name: bound}
  hostPath: {path: /tmp/bound}
status: {phase: Bound}
"#;

const CLAIMS: &str = r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bound}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  volumeName: pv-bound
  resources: {requests: {storage: 10Gi}}
status:
  phase: Bound
  accessModes: [ReadWriteOnce]
  capacity: {storage: 10Gi}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: waiting}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: standard
  resources: {requests: {storage: 1Gi}}
"#;

/// `out` with each line's trailing age (`0s`, `12s`) replaced by `AGE`, so whole tables
/// compare without depending on how long the test took.
fn without_ages(out: &str) -> String {
    out.lines()
        .map(|l| {
            let trimmed = l.trim_end();
            let last = trimmed.rsplit(' ').next().unwrap_or("");
            let is_age = last.len() > 1
                && last.ends_with('s')
                && last[..last.len() - 1].chars().all(|c| c.is_ascii_digit());
            if is_age {
                format!("{}AGE", &trimmed[..trimmed.len() - last.len()])
            } else {
                trimmed.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn create_all(c: &Cluster) {
    for (name, yaml) in [
        ("sc.yaml", CLASSES),
        ("pv.yaml", VOLUMES),
        ("pvc.yaml", CLAIMS),
    ] {
        c.kubectl_ok(&["create", "-f", &c.file(name, yaml)]);
    }
}

/// (success, stderr) of a kubectl run.
fn run(c: &Cluster, args: &[&str]) -> (bool, String) {
    let out = c.kubectl(args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn get_pv_pvc_sc_prints_the_tables_a_real_cluster_prints() {
    let c = Cluster::start();
    create_all(&c);
    let out = c.kubectl_ok(&["get", "pv,pvc,sc"]);
    let want = "\
NAME                        CAPACITY   ACCESS MODES   RECLAIM POLICY   STATUS      CLAIM           STORAGECLASS   VOLUMEATTRIBUTESCLASS   REASON   AGE
persistentvolume/pv-bound   10Gi       RWO            Delete           Bound       default/bound   fast           <unset>                          AGE
persistentvolume/pv-free    5Gi        RWO,ROX        Retain           Available                   fast           <unset>                          AGE

NAME                            STATUS    VOLUME     CAPACITY   ACCESS MODES   STORAGECLASS   VOLUMEATTRIBUTESCLASS   AGE
persistentvolumeclaim/bound     Bound     pv-bound   10Gi       RWO            fast           <unset>                 AGE
persistentvolumeclaim/waiting   Pending                                        standard       <unset>                 AGE

NAME                                             PROVISIONER             RECLAIMPOLICY   VOLUMEBINDINGMODE      ALLOWVOLUMEEXPANSION   AGE
storageclass.storage.k8s.io/fast                 csi.example.com         Delete          Immediate              false                  AGE
storageclass.storage.k8s.io/standard (default)   rancher.io/local-path   Delete          WaitForFirstConsumer   true                   AGE";
    assert_eq!(without_ages(&out), want, "{out}");
}

#[test]
fn storage_objects_get_the_defaults_of_a_real_api_server() {
    let c = Cluster::start();
    create_all(&c);
    let driver = "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: csi.example.com}\nspec: {}\n";
    c.kubectl_ok(&["create", "-f", &c.file("driver.yaml", driver)]);
    let got = [
        ("pv", "pv-free", "{.spec.persistentVolumeReclaimPolicy} {.spec.volumeMode} {.status.phase}"),
        ("pvc", "waiting", "{.spec.volumeMode} {.status.phase}"),
        ("sc", "fast", "{.reclaimPolicy} {.volumeBindingMode}"),
        ("csidriver", "csi.example.com", "{.spec.attachRequired} {.spec.podInfoOnMount} {.spec.fsGroupPolicy} {.spec.volumeLifecycleModes}"),
    ]
    .map(|(kind, name, path)| {
        c.kubectl_ok(&["get", kind, name, "-o", &format!("jsonpath={path}")])
    });
    assert_eq!(
        got,
        [
            "Retain Filesystem Available",
            "Filesystem Pending",
            "Delete Immediate",
            "true false ReadWriteOnceWithFSType [\"Persistent\"]",
        ]
        .map(str::to_string)
    );
}

#[test]
fn storage_kinds_are_discovered_with_upstreams_short_names_and_not_in_all() {
    let c = Cluster::start();
    let out = c.kubectl_ok(&["api-resources", "--api-group=storage.k8s.io"]);
    let want = "\
NAME                   SHORTNAMES   APIVERSION          NAMESPACED   KIND
csidrivers                          storage.k8s.io/v1   false        CSIDriver
csinodes                            storage.k8s.io/v1   false        CSINode
csistoragecapacities                storage.k8s.io/v1   true         CSIStorageCapacity
storageclasses         sc           storage.k8s.io/v1   false        StorageClass
volumeattachments                   storage.k8s.io/v1   false        VolumeAttachment
";
    assert_eq!(out, want);
    let core = c.kubectl_ok(&["api-resources", "--api-group=", "-o", "name"]);
    assert!(
        core.lines().any(|l| l == "persistentvolumes")
            && core.lines().any(|l| l == "persistentvolumeclaims"),
        "{core}"
    );
    create_all(&c);
    let all = c.kubectl_ok(&["get", "all", "-o", "name"]);
    assert!(!all.contains("persistentvolumeclaim"), "{all}");
}

#[test]
fn claim_and_class_updates_are_limited_as_upstream() {
    let c = Cluster::start();
    create_all(&c);
    // Allowed: a bound claim grows; a class gains allowVolumeExpansion.
    let grow = run(
        &c,
        &[
            "patch",
            "pvc",
            "bound",
            "-p",
            r#"{"spec":{"resources":{"requests":{"storage":"20Gi"}}}}"#,
        ],
    );
    let expand = run(
        &c,
        &[
            "patch",
            "sc",
            "fast",
            "-p",
            r#"{"allowVolumeExpansion":true}"#,
        ],
    );
    // Refused: a pending claim's request, a claim's class, a class's parameters.
    let pending = run(
        &c,
        &[
            "patch",
            "pvc",
            "waiting",
            "-p",
            r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
        ],
    );
    let class = run(
        &c,
        &[
            "patch",
            "pvc",
            "bound",
            "-p",
            r#"{"spec":{"storageClassName":"standard"}}"#,
        ],
    );
    let parameters = run(
        &c,
        &[
            "patch",
            "sc",
            "fast",
            "-p",
            r#"{"parameters":{"type":"hdd"}}"#,
        ],
    );
    let no_provisioner = run(
        &c,
        &[
            "create",
            "-f",
            &c.file(
                "bad.yaml",
                "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: bad}\n",
            ),
        ],
    );
    let now = c.kubectl_ok(&[
        "get",
        "pvc",
        "bound",
        "waiting",
        "-o",
        "jsonpath={.items[*].spec.resources.requests.storage}",
    ]);
    assert_eq!(
        (grow, expand, pending, class, parameters, no_provisioner, now),
        (
            (true, String::new()),
            (true, String::new()),
            (false, "The PersistentVolumeClaim \"waiting\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n  spec.resources.requests.storage: \"1Gi\" -> \"2Gi\"\n".to_string()),
            (false, "The PersistentVolumeClaim \"bound\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n  spec.storageClassName: \"fast\" -> \"standard\"\n".to_string()),
            (false, "The StorageClass \"fast\" is invalid: parameters: Forbidden: updates to parameters are forbidden.\n".to_string()),
            (false, "The StorageClass \"bad\" is invalid: provisioner: Required value\n".to_string()),
            "20Gi 1Gi".to_string(),
        )
    );
}

#[test]
fn get_pvc_watch_prints_a_claim_created_after_it_started() {
    let c = Cluster::start();
    let claims: Vec<&str> = CLAIMS.split("---\n").collect();
    let waiting = claims.get(1).copied().unwrap_or_default();
    c.kubectl_ok(&["create", "-f", &c.file("waiting.yaml", waiting)]);
    let mut child = c
        .kubectl_command(&["get", "pvc", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w starts");
    let out = Lines::of(child.stdout.take().expect("stdout"));
    // `waiting` comes from the list, so once it is printed the watch is (about to be) open;
    // `later` can then only arrive as a watch event.
    let listed = out.wait_for("waiting", Duration::from_secs(30));
    let later = waiting.replace("name: waiting", "name: later");
    c.kubectl_ok(&["create", "-f", &c.file("later.yaml", &later)]);
    let seen = out.wait_for("later", Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        listed.is_some(),
        "kubectl get -w did not print the listed claim"
    );
    let line = seen.expect("kubectl get -w printed the claim created during the watch");
    assert_eq!(
        without_ages(&line),
        "later     Pending                                      standard       <unset>                 AGE"
    );
}

/// The Status a client decodes: upstream's message (the kind named with its group) and one
/// cause per field error.
#[test]
fn class_update_refusal_is_upstreams_invalid_status() {
    let c = Cluster::start();
    create_all(&c);
    let (code, body) = c.request(
        "PATCH",
        "/apis/storage.k8s.io/v1/storageclasses/fast",
        Some("application/merge-patch+json"),
        r#"{"parameters":{"type":"hdd"},"reclaimPolicy":"Retain"}"#,
    );
    assert_eq!(
        (code, body),
        (
            422,
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "StorageClass.storage.k8s.io \"fast\" is invalid: [parameters: Forbidden: updates to parameters are forbidden., reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.]",
                "reason": "Invalid",
                "details": {"name": "fast", "group": "storage.k8s.io", "kind": "StorageClass", "causes": [
                    {"reason": "FieldValueForbidden", "message": "Forbidden: updates to parameters are forbidden.", "field": "parameters"},
                    {"reason": "FieldValueForbidden", "message": "Forbidden: updates to reclaimPolicy are forbidden.", "field": "reclaimPolicy"},
                ]},
                "code": 422,
            })
        )
    );
}

/// What the scheduler's volume plugins do through kube-rs: typed objects of every storage
/// kind created and read back by streaming-list watchers, and a claim's status written
/// through its subresource.
#[test]
fn kube_rs_watchers_list_every_storage_kind_and_claims_take_a_status() {
    use futures_util::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::{
        CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
    };
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use kube::runtime::watcher;
    use serde_json::json;

    /// Creates `obj` through the typed Api, then returns the names a fresh watcher lists.
    async fn create_and_list<K>(api: Api<K>, obj: serde_json::Value) -> Vec<String>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize
            + Send
            + 'static,
    {
        let typed: K = serde_json::from_value(obj).expect("typed object");
        api.create(&PostParams::default(), &typed)
            .await
            .expect("created");
        let mut events = watcher(api, watcher::Config::default().streaming_lists()).boxed();
        let mut names = Vec::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
                .await
                .expect("an event within 10s")
                .expect("watch ok")
                .expect("stream open");
            match event {
                watcher::Event::InitApply(o) => {
                    names.push(o.meta().name.clone().unwrap_or_default())
                }
                watcher::Event::InitDone => return names,
                _ => {}
            }
        }
    }

    let c = Cluster::start();
    let client = c.kube_client();
    c.block_on(async {
        let ns = "default";
        let listed = [
            create_and_list(Api::<StorageClass>::all(client.clone()),
                json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})).await,
            create_and_list(Api::<CSINode>::all(client.clone()),
                json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1"}]}})).await,
            create_and_list(Api::<CSIDriver>::all(client.clone()),
                json!({"metadata": {"name": "csi.example.com"}, "spec": {}})).await,
            create_and_list(Api::<CSIStorageCapacity>::namespaced(client.clone(), ns),
                json!({"metadata": {"name": "cap"}, "storageClassName": "fast", "capacity": "100Gi"})).await,
            create_and_list(Api::<VolumeAttachment>::all(client.clone()),
                json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}})).await,
            create_and_list(Api::<PersistentVolume>::all(client.clone()),
                json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}})).await,
            create_and_list(Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns),
                json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})).await,
        ];
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        let bound = claims
            .patch_status(
                "data",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}})),
            )
            .await
            .expect("status patched");
        assert_eq!(
            (listed.map(|names| names.join(",")), bound.status.and_then(|s| s.phase)),
            (
                ["fast", "n1", "csi.example.com", "cap", "va", "pv1", "data"].map(str::to_string),
                Some("Bound".to_string()),
            )
        );
    });
}

#[test]
fn a_volume_takes_a_claim_ref_but_keeps_its_source() {
    let c = Cluster::start();
    create_all(&c);
    let claim_ref = run(
        &c,
        &[
            "patch",
            "pv",
            "pv-free",
            "-p",
            r#"{"spec":{"claimRef":{"namespace":"default","name":"waiting"}}}"#,
        ],
    );
    let source = run(
        &c,
        &[
            "patch",
            "pv",
            "pv-free",
            "-p",
            r#"{"spec":{"hostPath":{"path":"/tmp/other"}}}"#,
        ],
    );
    let now = c.kubectl_ok(&[
        "get",
        "pv",
        "pv-free",
        "-o",
        "jsonpath={.spec.claimRef.name} {.spec.hostPath.path}",
    ]);
    assert_eq!(
        (claim_ref, source, now),
        (
            (true, String::new()),
            (false, "The PersistentVolume \"pv-free\" is invalid: spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n  spec.hostPath.path: \"/tmp/free\" -> \"/tmp/other\"\n".to_string()),
            "waiting /tmp/free".to_string(),
        )
    );
}

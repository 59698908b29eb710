//! Pods with volumes on `kubesched up`, end to end with real kubectl: claims of the default
//! WaitForFirstConsumer class provisioned in the zone of the node their pod went to, a pod
//! following its bound volume's zone, an Immediate claim holding its pod until a volume
//! appears, and a second ReadWriteOncePod user refused. (up.rs has the CSI attach limit.)
//!
//! The local cluster plays the controllers' part: its PV controller binds claims, its
//! provisioner creates volumes for claims with a selected node, and its kubelet starts a pod
//! once the pod's claims are bound. Every wait is a bounded poll.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{kubectl_ok, node_yaml, pod_nodes, pod_scheduled, up, wait_for, Scratch};

/// Applies `yaml` (one or more documents) with kubectl.
fn apply(kubeconfig: &Path, scratch: &Scratch, file: &str, yaml: &str) {
    let path = scratch.path(file);
    std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(kubeconfig, &["apply", "-f", &path.to_string_lossy()]);
}

/// A pause pod asking for 500m CPU with `labels` (flow-mapping entries), `extra_spec`
/// (indented spec fields) and one volume per claim in `claims`.
fn pod_with_volumes(name: &str, labels: &str, extra_spec: &str, claims: &[&str]) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\nspec:\n{extra_spec}  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests: {{cpu: 500m}}\n"
    );
    if !claims.is_empty() {
        y.push_str("  volumes:\n");
        for (i, c) in claims.iter().enumerate() {
            y.push_str(&format!(
                "  - name: v{i}\n    persistentVolumeClaim:\n      claimName: {c}\n"
            ));
        }
    }
    y
}

/// A claim of `class` (the default class when `None`), optionally pre-bound to `volume`.
fn claim(name: &str, class: Option<&str>, modes: &str, volume: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\nspec:\n  accessModes: [{modes}]\n  resources:\n    requests: {{storage: 1Gi}}\n"
    );
    if let Some(c) = class {
        y.push_str(&format!("  storageClassName: {c}\n"));
    }
    if let Some(v) = volume {
        y.push_str(&format!("  volumeName: {v}\n"));
    }
    y
}

/// A 1Gi volume of `class` with `source` (indented spec fields) and an optional zone affinity.
fn volume(name: &str, class: &str, modes: &str, source: &str, zone: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [{modes}]\n  storageClassName: {class}\n{source}"
    );
    if let Some(z) = zone {
        y.push_str(&format!(
            "  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - {{key: topology.kubernetes.io/zone, operator: In, values: [{z}]}}\n"
        ));
    }
    y
}

fn host_path(path: &str) -> String {
    format!("  hostPath: {{path: {path}}}\n")
}

/// `name` → `phase/volumeName/selected-node annotation` of every claim.
fn claims(kubeconfig: &Path) -> BTreeMap<String, String> {
    let out = kubectl_ok(
        kubeconfig,
        &[
            "get",
            "pvc",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.phase}/{.spec.volumeName}/{.metadata.annotations.volume\\.kubernetes\\.io/selected-node}{\"\\n\"}{end}",
        ],
    );
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `name` → `claim/zone values of its node affinity` of every volume.
fn volumes(kubeconfig: &Path) -> BTreeMap<String, String> {
    let out = kubectl_ok(
        kubeconfig,
        &[
            "get",
            "pv",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.claimRef.name}/{.spec.nodeAffinity.required.nodeSelectorTerms[*].matchExpressions[?(@.key==\"topology.kubernetes.io/zone\")].values}{\"\\n\"}{end}",
        ],
    );
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The messages of the FailedScheduling events of `pod`.
fn failed_scheduling(kubeconfig: &Path, pod: &str) -> Vec<String> {
    let selector = format!("reason=FailedScheduling,involvedObject.name={pod}");
    kubectl_ok(
        kubeconfig,
        &[
            "get",
            "events",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Waits until `pod` is reported unschedulable with `message`, as an event and as its
/// PodScheduled condition.
fn wait_pending_with(kubeconfig: &Path, pod: &str, message: &str) {
    wait_for(Duration::from_secs(30), "FailedScheduling event", || {
        failed_scheduling(kubeconfig, pod)
            .iter()
            .any(|m| m == message)
            .then_some(())
    });
    let condition = pod_scheduled(kubeconfig, pod);
    assert_eq!(condition, format!("False/Unschedulable/{message}"));
}

/// The node `pod` is bound to, once it is.
fn wait_bound(kubeconfig: &Path, pod: &str, limit: Duration) -> String {
    let key = format!("default/{pod}");
    wait_for(limit, &format!("{pod} bound"), || {
        let n = pod_nodes(kubeconfig).remove(&key)?;
        (!n.is_empty()).then_some(n)
    })
}

fn pod_phase(kubeconfig: &Path, pod: &str) -> String {
    kubectl_ok(
        kubeconfig,
        &["get", "pod", pod, "-o", "jsonpath={.status.phase}"],
    )
}

/// A provisioner name the local cluster is told to serve, with zonal volumes.
const ZONAL: &str = "zonal.csi.example.com";

fn zoned_nodes(cpu_a: &str) -> String {
    [
        node_yaml("n-a", cpu_a, &[("topology.kubernetes.io/zone", "a")], None),
        node_yaml("n-b", "8", &[("topology.kubernetes.io/zone", "b")], None),
        node_yaml("n-c", "8", &[("topology.kubernetes.io/zone", "c")], None),
    ]
    .join("---\n")
}

/// The StorageClass of immediately bound claims with no provisioner.
const IMMEDIATE_CLASS: &str = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: immediate\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: Immediate\n";

/// `up` with one 4-CPU node `n-1`, listed.
fn up_with_one_node(scratch: &Scratch) -> (crate::support::Proc, std::path::PathBuf) {
    let (up, kubeconfig, _) = up(scratch, &[]);
    apply(
        &kubeconfig,
        scratch,
        "node.yaml",
        &node_yaml("n-1", "4", &[], None),
    );
    wait_nodes(&kubeconfig, 1);
    (up, kubeconfig)
}

fn wait_nodes(kubeconfig: &Path, n: usize) {
    wait_for(Duration::from_secs(30), "nodes", || {
        let out = kubectl_ok(kubeconfig, &["get", "nodes", "-o", "name"]);
        (out.lines().count() == n).then_some(())
    });
}

#[test]
fn wait_for_first_consumer_claims_are_provisioned_in_their_pods_zones() {
    let scratch = Scratch::new("vol-wffc");
    // The local-path provisioner of the default class pins volumes to a node; a zonal CSI
    // driver's volumes follow the zone, which is what spreading over zones needs.
    let (_up, kubeconfig, _) = up(
        &scratch,
        &[
            "--provisioner",
            "rancher.io/local-path",
            "--provisioner",
            ZONAL,
        ],
    );
    apply(&kubeconfig, &scratch, "nodes.yaml", &zoned_nodes("8"));
    wait_nodes(&kubeconfig, 3);
    // The default StorageClass `up` creates binds on first consumer.
    let mode = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "storageclass",
            "-o",
            "jsonpath={range .items[*]}{.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}/{.volumeBindingMode}{\"\\n\"}{end}",
        ],
    );
    assert_eq!(mode, "true/WaitForFirstConsumer\n");

    apply(
        &kubeconfig,
        &scratch,
        "class.yaml",
        &format!("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: zonal\nprovisioner: {ZONAL}\nvolumeBindingMode: WaitForFirstConsumer\n"),
    );
    let spread = "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: db}}}\n";
    let mut docs = Vec::new();
    for i in 0..3 {
        docs.push(claim(
            &format!("data-db-{i}"),
            Some("zonal"),
            "ReadWriteOnce",
            None,
        ));
    }
    apply(&kubeconfig, &scratch, "claims.yaml", &docs.join("---\n"));
    // Unconsumed claims of a WaitForFirstConsumer class wait for their pod.
    let pending = claims(&kubeconfig);
    assert_eq!(
        pending.values().collect::<Vec<_>>(),
        vec!["Pending//"; 3],
        "{pending:?}"
    );
    let pods: Vec<String> = (0..3)
        .map(|i| {
            pod_with_volumes(
                &format!("db-{i}"),
                "app: db",
                spread,
                &[&format!("data-db-{i}")],
            )
        })
        .collect();
    apply(&kubeconfig, &scratch, "pods.yaml", &pods.join("---\n"));

    let nodes: Vec<String> = (0..3)
        .map(|i| wait_bound(&kubeconfig, &format!("db-{i}"), Duration::from_secs(60)))
        .collect();
    // The kubelet starts each pod once its claim is bound.
    for i in 0..3 {
        wait_for(Duration::from_secs(30), "pod running", || {
            (pod_phase(&kubeconfig, &format!("db-{i}")) == "Running").then_some(())
        });
    }
    let mut zones: Vec<&str> = nodes.iter().map(|n| &n[2..]).collect();
    zones.sort_unstable();
    assert_eq!(zones, vec!["a", "b", "c"], "{nodes:?}");

    let claims = claims(&kubeconfig);
    let volumes = volumes(&kubeconfig);
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let name = format!("data-db-{i}");
        let c = claims.get(&name).cloned().unwrap_or_default();
        let pv = c.split('/').nth(1).unwrap_or_default().to_string();
        got.push((
            name.clone(),
            c.clone(),
            volumes.get(&pv).cloned().unwrap_or_default(),
        ));
        want.push((
            name.clone(),
            format!("Bound/{pv}/{node}"),
            format!("{name}/[\"{}\"]", &node[2..]),
        ));
    }
    assert_eq!(got, want);
}

#[test]
fn a_pod_whose_claim_is_bound_to_a_zone_a_volume_is_placed_in_zone_a() {
    let scratch = Scratch::new("vol-zone");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    // n-a is the smallest node: without its volume the pod would prefer n-b or n-c.
    apply(&kubeconfig, &scratch, "nodes.yaml", &zoned_nodes("2"));
    wait_nodes(&kubeconfig, 3);
    let objects = [
        volume(
            "pv-a",
            "manual",
            "ReadWriteOnce",
            &host_path("/data/a"),
            Some("a"),
        ),
        claim("claim-a", Some("manual"), "ReadWriteOnce", Some("pv-a")),
    ];
    apply(
        &kubeconfig,
        &scratch,
        "storage.yaml",
        &objects.join("---\n"),
    );
    wait_for(Duration::from_secs(30), "claim-a bound", || {
        let c = claims(&kubeconfig).remove("claim-a")?;
        (c == "Bound/pv-a/").then_some(())
    });
    apply(
        &kubeconfig,
        &scratch,
        "pod.yaml",
        &pod_with_volumes("app", "app: one", "", &["claim-a"]),
    );
    assert_eq!(
        wait_bound(&kubeconfig, "app", Duration::from_secs(30)),
        "n-a"
    );
}

#[test]
fn an_unbound_immediate_claim_holds_its_pod_until_a_matching_volume_appears() {
    let scratch = Scratch::new("vol-immediate");
    let (_up, kubeconfig) = up_with_one_node(&scratch);
    let objects = [
        IMMEDIATE_CLASS.to_string(),
        claim("later", Some("immediate"), "ReadWriteOnce", None),
        pod_with_volumes("waiter", "app: waiter", "", &["later"]),
    ];
    apply(
        &kubeconfig,
        &scratch,
        "objects.yaml",
        &objects.join("---\n"),
    );
    wait_pending_with(
        &kubeconfig,
        "waiter",
        "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    );

    let added = Instant::now();
    apply(
        &kubeconfig,
        &scratch,
        "pv.yaml",
        &volume(
            "pv-later",
            "immediate",
            "ReadWriteOnce",
            &host_path("/data/later"),
            None,
        ),
    );
    // The claim's binding requeues the pod; the periodic flush of unschedulable pods
    // (after 5 minutes) could not bind it within this bound.
    let node = wait_bound(&kubeconfig, "waiter", Duration::from_secs(30));
    eprintln!("bound {:?} after the volume was added", added.elapsed());
    assert_eq!(
        (
            node,
            claims(&kubeconfig).remove("later").unwrap_or_default()
        ),
        ("n-1".to_string(), "Bound/pv-later/".to_string())
    );
}

/// A pod first refused for a claim that does not exist yet, then for the claim being
/// unbound: each reason is an Event of its own with its message (upstream keeps events of
/// different versions of a pod apart, and the first failure's status write made a new one),
/// not a series under the first reason's note.
#[test]
fn a_new_failure_reason_is_a_new_event_with_its_message() {
    let scratch = Scratch::new("vol-new-reason");
    let (_up, kubeconfig) = up_with_one_node(&scratch);
    apply(
        &kubeconfig,
        &scratch,
        "pod.yaml",
        &pod_with_volumes("waiter", "app: waiter", "", &["later"]),
    );
    let missing = "0/1 nodes are available: persistentvolumeclaim \"later\" not found. \
                   preemption: 0/1 nodes are available: 1 Preemption is not helpful for \
                   scheduling.";
    wait_pending_with(&kubeconfig, "waiter", missing);
    apply(
        &kubeconfig,
        &scratch,
        "claim.yaml",
        &[
            IMMEDIATE_CLASS.to_string(),
            claim("later", Some("immediate"), "ReadWriteOnce", None),
        ]
        .join("---\n"),
    );
    let unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
                   preemption: 0/1 nodes are available: 1 Preemption is not helpful for \
                   scheduling.";
    wait_pending_with(&kubeconfig, "waiter", unbound);
    // A later attempt on a newer version of the pod may add another Event with the same
    // message; each message is listed once here.
    let mut messages = failed_scheduling(&kubeconfig, "waiter");
    messages.sort();
    messages.dedup();
    assert_eq!(messages, vec![missing.to_string(), unbound.to_string()]);
}

#[test]
fn a_second_read_write_once_pod_user_is_refused() {
    let scratch = Scratch::new("vol-rwop");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let objects = [
        node_yaml("n-1", "8", &[], None),
        node_yaml("n-2", "8", &[], None),
        volume(
            "pv-only",
            "manual",
            "ReadWriteOncePod",
            &host_path("/data/only"),
            None,
        ),
        claim("only", Some("manual"), "ReadWriteOncePod", Some("pv-only")),
    ];
    apply(
        &kubeconfig,
        &scratch,
        "objects.yaml",
        &objects.join("---\n"),
    );
    wait_nodes(&kubeconfig, 2);
    wait_for(Duration::from_secs(30), "claim bound", || {
        let c = claims(&kubeconfig).remove("only")?;
        (c == "Bound/pv-only/").then_some(())
    });
    apply(
        &kubeconfig,
        &scratch,
        "owner.yaml",
        &pod_with_volumes("owner", "app: owner", "", &["only"]),
    );
    wait_bound(&kubeconfig, "owner", Duration::from_secs(30));
    apply(
        &kubeconfig,
        &scratch,
        "intruder.yaml",
        &pod_with_volumes("intruder", "app: intruder", "", &["only"]),
    );
    wait_pending_with(
        &kubeconfig,
        "intruder",
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with \
         ReadWriteOncePod access mode already in-use by another pod. preemption: 0/2 nodes are \
         available: 2 No preemption victims found for incoming pod.",
    );
    // The owner's deletion frees the claim and requeues the intruder.
    kubectl_ok(
        &kubeconfig,
        &["delete", "pod", "owner", "--wait=false", "--grace-period=0"],
    );
    wait_bound(&kubeconfig, "intruder", Duration::from_secs(30));
}

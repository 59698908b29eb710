//! `kubesched up` and `kubesched run` end to end, driven by real kubectl over loopback:
//! pods bound where they fit, FailedScheduling with upstream's message and a retry on the
//! node-add event (and on the CSINode-update event for a pod over its node's volume limit,
//! and on the claim-deallocated event for a pod waiting for a device; a claim allocated
//! elsewhere for no pod deallocated by PostFilter; a pod retried when its status names its
//! generated claim),
//! two leader-electing replicas, a ReplicaSet's pods made, run and garbage-collected, an API server restart under a running scheduler, and
//! `/metrics` as Prometheus text.
//!
//! Every wait is a bounded poll; the bounds are generous because CI machines are loaded,
//! and the tests check outcomes, not speed.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    get, kubectl, kubectl_command, kubectl_ok, node_yaml, parse_metrics, pod_nodes, pod_scheduled,
    spawn, spawn_with_stderr, up, url_after, wait_for, Proc, Scratch,
};

/// `scheduler_schedule_attempts_total` of one result for the default profile (0 if absent).
fn attempts(metrics: &BTreeMap<String, f64>, result: &str) -> f64 {
    let key = format!(
        "scheduler_schedule_attempts_total{{result=\"{result}\",profile=\"default-scheduler\"}}"
    );
    metrics.get(&key).copied().unwrap_or(0.0)
}

fn pod_yaml(name: &str, cpu: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra_spec}  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests: {{cpu: {cpu}}}\n"
    )
}

#[test]
fn up_binds_200_pods_only_where_they_fit() {
    let scratch = Scratch::new("up200");
    let (_up, kubeconfig, serving) = up(&scratch, &[]);
    let mut docs = vec![
        node_yaml("n-a", "4", &[("topology.kubernetes.io/zone", "a")], None),
        node_yaml("n-b", "4", &[("topology.kubernetes.io/zone", "b")], None),
        node_yaml("n-ssd", "16", &[("disk", "ssd")], None),
        node_yaml("n-gpu", "8", &[("disk", "ssd")], Some("gpu")),
    ];
    for i in 0..150 {
        docs.push(pod_yaml(&format!("web-{i}"), "50m", ""));
    }
    for i in 0..30 {
        docs.push(pod_yaml(
            &format!("db-{i}"),
            "100m",
            "  nodeSelector: {disk: ssd}\n",
        ));
    }
    for i in 0..20 {
        docs.push(pod_yaml(
            &format!("gpu-{i}"),
            "100m",
            "  nodeSelector: {disk: ssd}\n  tolerations:\n  - {key: gpu, operator: Exists, effect: NoSchedule}\n",
        ));
    }
    let file = scratch.path("objects.yaml");
    std::fs::write(&file, docs.join("---\n")).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &file.to_string_lossy()]);

    let nodes = wait_for(Duration::from_secs(60), "200 pods bound", || {
        let n = pod_nodes(&kubeconfig);
        (n.len() == 200 && n.values().all(|v| !v.is_empty())).then_some(n)
    });
    // Requests against allocatable, taints and selectors, per node.
    let mut milli: BTreeMap<&str, u32> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (pod, node) in &nodes {
        let name = pod.trim_start_matches("default/");
        let (cpu, ok) = if name.starts_with("web-") {
            (50, node != "n-gpu")
        } else if name.starts_with("db-") {
            (100, node == "n-ssd")
        } else {
            (100, node == "n-ssd" || node == "n-gpu")
        };
        *milli.entry(node.as_str()).or_default() += cpu;
        if !ok {
            wrong.push(format!("{pod} on {node}"));
        }
    }
    let over: Vec<String> = milli
        .iter()
        .filter(|(n, m)| {
            **m > match **n {
                "n-gpu" => 8000,
                "n-ssd" => 16000,
                _ => 4000,
            }
        })
        .map(|(n, m)| format!("{n}: {m}m"))
        .collect();
    assert_eq!((wrong, over), (Vec::<String>::new(), Vec::<String>::new()));

    let wide = kubectl_ok(&kubeconfig, &["get", "pods", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    let node_col = header
        .find("NODE")
        .unwrap_or_else(|| panic!("no NODE column: {header}"));
    let unplaced: Vec<&str> = wide
        .lines()
        .skip(1)
        .filter(|l| {
            let rest = l.get(node_col..).unwrap_or_default();
            !rest.starts_with("n-")
        })
        .collect();
    assert_eq!(unplaced, Vec::<&str>::new(), "{wide}");

    let describe = kubectl_ok(&kubeconfig, &["describe", "pod", "db-0"]);
    let node = &nodes["default/db-0"];
    let want = format!("Successfully assigned default/db-0 to {node}");
    assert!(
        describe.contains("Scheduled") && describe.contains(&want),
        "describe lacks {want:?}:\n{describe}"
    );

    let (code, text) = get(&serving, "/metrics");
    let m = parse_metrics(&text);
    assert_eq!(
        (code, attempts(&m, "scheduled"), attempts(&m, "error")),
        (200, 200.0, 0.0),
        "{text}"
    );
    // The framework runtime times every Bind it runs and, in the cycles it samples (one in
    // ten), each plugin call.
    let bind = m
        .get("scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\",status=\"Success\",profile=\"default-scheduler\"}")
        .copied();
    let plugin_samples: f64 = m
        .iter()
        .filter(|(k, _)| k.starts_with("scheduler_plugin_execution_duration_seconds_count{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!((bind, plugin_samples > 0.0), (Some(200.0), true), "{text}");
}

#[test]
fn unschedulable_pod_is_reported_and_bound_when_a_node_that_fits_arrives() {
    let scratch = Scratch::new("unsched");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    // The node first: a pod whose watch event beats the node's would get upstream's "no
    // nodes available to schedule pods" on its first attempt.
    let small = scratch.path("small.yaml");
    std::fs::write(&small, node_yaml("small", "1", &[], None)).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &small.to_string_lossy()]);
    wait_for(Duration::from_secs(30), "node small", || {
        kubectl(&kubeconfig, &["get", "node", "small"])
            .0
            .then_some(())
    });
    let big = scratch.path("big.yaml");
    std::fs::write(&big, pod_yaml("big", "2", "")).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &big.to_string_lossy()]);

    // More than the node's allocatable: preemption cannot help (upstream marks the
    // rejection unresolvable), and the message says so.
    let message = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are \
                   available: 1 Preemption is not helpful for scheduling.";
    wait_for(Duration::from_secs(30), "FailedScheduling event", || {
        let out = kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "events",
                "--field-selector",
                "reason=FailedScheduling,involvedObject.name=big",
                "-o",
                "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
            ],
        );
        out.lines().any(|l| l == message).then_some(())
    });
    let condition = wait_for(Duration::from_secs(30), "PodScheduled=False", || {
        let c = pod_scheduled(&kubeconfig, "big");
        c.starts_with("False/").then_some(c)
    });
    assert_eq!(condition, format!("False/Unschedulable/{message}"));

    let bigger = scratch.path("bigger.yaml");
    std::fs::write(&bigger, node_yaml("bigger", "4", &[], None)).unwrap_or_else(|e| panic!("{e}"));
    let added = Instant::now();
    kubectl_ok(&kubeconfig, &["apply", "-f", &bigger.to_string_lossy()]);
    // The node-add event requeues the pod (after its 1 s backoff); the 5-minute flush could
    // not bind it within this bound.
    let node = wait_for(Duration::from_secs(20), "big bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/big")?;
        (!n.is_empty()).then_some(n)
    });
    eprintln!("bound {:?} after the node was added", added.elapsed());
    assert_eq!(node, "bigger");
}

/// `up` plays the PersistentVolume controller: a volume and an Immediate claim applied with
/// kubectl are Bound to each other, and the default StorageClass is there.
#[test]
fn up_binds_an_immediate_claim_to_a_volume_applied_with_kubectl() {
    let scratch = Scratch::new("pvc");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let manifest = scratch.path("storage.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: manual}\n\
         provisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: Immediate\n---\n\
         apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec:\n  \
         capacity: {storage: 5Gi}\n  accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  \
         hostPath: {path: /tmp/pv-1}\n---\n\
         apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  \
         accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  \
         resources: {requests: {storage: 1Gi}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &manifest.to_string_lossy()]);
    // NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS (then attributes class, age).
    let row = wait_for(Duration::from_secs(30), "claim Bound", || {
        let out = kubectl_ok(&kubeconfig, &["get", "pvc", "data", "--no-headers"]);
        let fields: Vec<String> = out.split_whitespace().take(6).map(String::from).collect();
        (fields.get(1).map(String::as_str) == Some("Bound")).then_some(fields)
    });
    assert_eq!(row, ["data", "Bound", "pv-1", "5Gi", "RWO", "manual"]);
    let pv = kubectl_ok(&kubeconfig, &["get", "pv", "pv-1", "--no-headers"]);
    let pv: Vec<&str> = pv.split_whitespace().take(7).collect();
    assert_eq!(
        pv,
        [
            "pv-1",
            "5Gi",
            "RWO",
            "Retain",
            "Bound",
            "default/data",
            "manual"
        ]
    );
    let classes = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "sc",
            "--no-headers",
            "-o",
            "custom-columns=NAME:.metadata.name,PROVISIONER:.provisioner,MODE:.volumeBindingMode",
        ],
    );
    let classes: Vec<Vec<&str>> = classes
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        classes,
        [
            vec!["manual", "kubernetes.io/no-provisioner", "Immediate"],
            vec!["standard", "rancher.io/local-path", "WaitForFirstConsumer"],
        ]
    );
}

/// `up` runs the ReplicaSet controller: a ReplicaSet of 3 applied with kubectl gets 3 pods,
/// which the scheduler binds and the kubelet stand-in runs; `kubectl get rs` reads READY 3;
/// deleting it deletes them.
#[test]
fn up_runs_the_pods_of_a_replicaset_applied_with_kubectl() {
    let scratch = Scratch::new("rs");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let manifest = scratch.path("rs.yaml");
    let rs = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web}\nspec:\n  \
              replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    \
              metadata: {labels: {app: web}}\n    spec:\n      containers:\n      \
              - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}\n";
    std::fs::write(
        &manifest,
        [node_yaml("n1", "4", &[], None), rs.to_string()].join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &manifest.to_string_lossy()]);
    // NAME DESIRED CURRENT READY (then age).
    let row = wait_for(Duration::from_secs(60), "replicaset READY 3", || {
        let out = kubectl_ok(&kubeconfig, &["get", "rs", "web", "--no-headers"]);
        let fields: Vec<String> = out.split_whitespace().take(4).map(String::from).collect();
        (fields.get(3).map(String::as_str) == Some("3")).then_some(fields)
    });
    assert_eq!(row, ["web", "3", "3", "3"]);
    let pods = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "--no-headers",
            "-o",
            "custom-columns=PHASE:.status.phase,NODE:.spec.nodeName,OWNER:.metadata.ownerReferences[0].name",
        ],
    );
    let pods: Vec<Vec<&str>> = pods
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(pods, vec![vec!["Running", "n1", "web"]; 3]);
    kubectl_ok(&kubeconfig, &["delete", "rs", "web"]);
    wait_for(Duration::from_secs(60), "the pods gone", || {
        kubectl_ok(&kubeconfig, &["get", "pods", "-l", "app=web", "-o", "name"])
            .trim()
            .is_empty()
            .then_some(())
    });
}

/// `up` runs the Job controller and completes a Job's pods: a Job of 3 completions, 2 at a
/// time, applied with kubectl reaches Complete (`kubectl wait`), and `kubectl get job` reads
/// Complete 3/3.
#[test]
fn up_runs_a_job_applied_with_kubectl_to_completion() {
    let scratch = Scratch::new("job");
    let (_up, kubeconfig, _) = up(&scratch, &["--job-pod-completion", "300ms"]);
    let manifest = scratch.path("job.yaml");
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: pi}\nspec:\n  \
               completions: 3\n  parallelism: 2\n  template:\n    spec:\n      \
               restartPolicy: Never\n      containers:\n      \
               - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}\n";
    std::fs::write(
        &manifest,
        [node_yaml("n1", "4", &[], None), job.to_string()].join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &manifest.to_string_lossy()]);
    let waited = kubectl_ok(
        &kubeconfig,
        &[
            "wait",
            "--for=condition=complete",
            "job/pi",
            "--timeout=60s",
        ],
    );
    assert_eq!(waited.trim(), "job.batch/pi condition met");
    let out = kubectl_ok(&kubeconfig, &["get", "job", "pi", "--no-headers"]);
    let fields: Vec<&str> = out.split_whitespace().take(3).collect();
    assert_eq!(fields, ["pi", "Complete", "3/3"]);
    let pods = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "pods",
            "-l",
            "job-name=pi",
            "--no-headers",
            "-o",
            "custom-columns=PHASE:.status.phase,NODE:.spec.nodeName",
        ],
    );
    let pods: Vec<Vec<&str>> = pods
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(pods, vec![vec!["Succeeded", "n1"]; 3]);
}

/// `up` runs the Deployment controller: a Deployment applied with kubectl rolls out,
/// restarts (a new ReplicaSet, revision 2) and undoes (the first ReplicaSet again, revision 3).
#[test]
fn up_rolls_out_restarts_and_undoes_a_deployment_applied_with_kubectl() {
    let scratch = Scratch::new("deploy");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let manifest = scratch.path("deploy.yaml");
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  \
                  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    \
                  metadata: {labels: {app: web}}\n    spec:\n      containers:\n      \
                  - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}\n";
    std::fs::write(
        &manifest,
        [node_yaml("n1", "4", &[], None), deploy.to_string()].join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &manifest.to_string_lossy()]);
    let rollout_status = || {
        let out = kubectl_ok(
            &kubeconfig,
            &["rollout", "status", "deployment/web", "--timeout=60s"],
        );
        assert!(out.ends_with("successfully rolled out\n"), "{out}");
    };
    rollout_status();
    let replicasets = || {
        let out = kubectl_ok(
            &kubeconfig,
            &["get", "rs", "-l", "app=web", "--no-headers", "-o",
              "custom-columns=NAME:.metadata.name,DESIRED:.spec.replicas,REVISION:.metadata.annotations.deployment\\.kubernetes\\.io/revision"],
        );
        let mut rows: Vec<Vec<String>> = out
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        rows.sort_by(|a, b| a.get(2).cmp(&b.get(2)));
        rows
    };
    let first = replicasets();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        kubectl_ok(&kubeconfig, &["rollout", "restart", "deployment/web"]),
        "deployment.apps/web restarted\n"
    );
    rollout_status();
    let restarted = replicasets();
    assert_eq!(
        restarted
            .iter()
            .map(|r| (r[1].as_str(), r[2].as_str()))
            .collect::<Vec<_>>(),
        vec![("0", "1"), ("3", "2")]
    );
    assert_eq!(
        kubectl_ok(&kubeconfig, &["rollout", "undo", "deployment/web"]),
        "deployment.apps/web rolled back\n"
    );
    rollout_status();
    let undone = replicasets();
    assert_eq!(
        undone,
        vec![
            vec![restarted[1][0].clone(), "0".to_string(), "2".to_string()],
            vec![first[0][0].clone(), "3".to_string(), "3".to_string()],
        ]
    );
    let pods = wait_for(
        Duration::from_secs(60),
        "3 running pods of the first revision",
        || {
            let out = kubectl_ok(
            &kubeconfig,
            &["get", "pods", "-l", "app=web", "--no-headers", "-o",
              "custom-columns=PHASE:.status.phase,NODE:.spec.nodeName,OWNER:.metadata.ownerReferences[0].name"],
        );
            let pods: Vec<Vec<String>> = out
                .lines()
                .map(|l| l.split_whitespace().map(String::from).collect())
                .collect();
            (pods.len() == 3).then_some(pods)
        },
    );
    assert_eq!(
        pods,
        vec![vec!["Running".to_string(), "n1".to_string(), first[0][0].clone()]; 3]
    );
}

/// The rollout example: after `kubectl set image`, the new revision's six pods are two per
/// zone, since `matchLabelKeys: [pod-template-hash]` spreads each revision by itself.
#[test]
fn the_rollout_example_spreads_each_revision_over_the_zones() {
    let scratch = Scratch::new("rollout-example");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/rollout.yaml");
    let (_up, kubeconfig, _) = up(&scratch, &["-f", example]);
    let rollout_status = || {
        let out = kubectl_ok(
            &kubeconfig,
            &["rollout", "status", "deployment/web", "--timeout=60s"],
        );
        assert!(out.ends_with("successfully rolled out\n"), "{out}");
    };
    rollout_status();
    kubectl_ok(
        &kubeconfig,
        &[
            "set",
            "image",
            "deployment/web",
            "app=registry.k8s.io/pause:3.10",
        ],
    );
    rollout_status();
    let per_node = wait_for(Duration::from_secs(60), "six pods of the new image", || {
        let out = kubectl_ok(
            &kubeconfig,
            &["get", "pods", "-l", "app=web", "--no-headers", "-o",
              "custom-columns=IMAGE:.spec.containers[0].image,NODE:.spec.nodeName,DELETING:.metadata.deletionTimestamp"],
        );
        let rows: Vec<Vec<String>> = out
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        let all_new = rows.len() == 6
            && rows
                .iter()
                .all(|r| r[0] == "registry.k8s.io/pause:3.10" && r[2] == "<none>");
        all_new.then(|| {
            let mut per_node = BTreeMap::new();
            for r in &rows {
                *per_node.entry(r[1].clone()).or_insert(0) += 1;
            }
            per_node
        })
    });
    assert_eq!(
        per_node,
        BTreeMap::from([
            ("node-a".to_string(), 2),
            ("node-b".to_string(), 2),
            ("node-c".to_string(), 2)
        ])
    );
}

/// `up --no-scheduler` runs the cluster (the kubelet stand-in makes nodes Ready) but leaves
/// pods to a scheduler started separately against the kubeconfig it writes.
#[test]
fn up_no_scheduler_leaves_pods_to_a_scheduler_brought_along() {
    let scratch = Scratch::new("nosched");
    let kubeconfig = scratch.path("kubeconfig");
    let kc = kubeconfig.to_string_lossy().into_owned();
    let (_up, lines) = spawn(
        &[
            "up",
            "--no-scheduler",
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig",
            &kc,
        ],
        "ready",
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("ready (no scheduler); try:")
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("kubesched scheduler serving")),
        "{lines:?}"
    );
    let manifest = scratch.path("objects.yaml");
    std::fs::write(
        &manifest,
        [node_yaml("n1", "4", &[], None), pod_yaml("p", "100m", "")].join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["create", "-f", &manifest.to_string_lossy()]);
    wait_for(Duration::from_secs(60), "node n1 Ready", || {
        let ready = kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "node",
                "n1",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ],
        );
        (ready == "True").then_some(())
    });
    assert_eq!(pod_nodes(&kubeconfig)["default/p"], "");
    let (_scheduler, _) = run(&kubeconfig, &["--leader-elect=false"]);
    wait_for(Duration::from_secs(60), "pod p bound to n1", || {
        (pod_nodes(&kubeconfig)["default/p"] == "n1").then_some(())
    });
}

/// `up` runs the DaemonSet and StatefulSet controllers: a DaemonSet's pods are bound by the
/// scheduler to the nodes their affinity names (not the tainted one), and a StatefulSet's pods
/// are made by ordinal until it reads 3/3.
#[test]
fn up_places_a_daemonsets_pods_on_every_eligible_node_and_readies_a_statefulset() {
    let scratch = Scratch::new("sets");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let manifest = scratch.path("sets.yaml");
    let ds = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  \
              selector: {matchLabels: {app: agent}}\n  template:\n    \
              metadata: {labels: {app: agent}}\n    spec:\n      containers:\n      \
              - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}\n";
    let sts = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\nspec:\n  \
               replicas: 3\n  serviceName: web\n  selector: {matchLabels: {app: web}}\n  \
               template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      \
               - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}\n";
    std::fs::write(
        &manifest,
        [
            node_yaml("n1", "4", &[], None),
            node_yaml("n2", "4", &[], None),
            node_yaml("n3", "4", &[], Some("dedicated")),
            ds.to_string(),
            sts.to_string(),
        ]
        .join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &manifest.to_string_lossy()]);
    kubectl_ok(
        &kubeconfig,
        &["rollout", "status", "ds/agent", "--timeout=60s"],
    );
    // NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE (then node selector and age).
    let row = kubectl_ok(&kubeconfig, &["get", "ds", "agent", "--no-headers"]);
    assert_eq!(
        row.split_whitespace().take(7).collect::<Vec<_>>(),
        ["agent", "2", "2", "2", "2", "2", "<none>"]
    );
    // Each pod is bound by the scheduler to the node its affinity names.
    let pods = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "pods",
            "-l",
            "app=agent",
            "--no-headers",
            "-o",
            "custom-columns=NODE:.spec.nodeName,FOR:.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0]",
        ],
    );
    let mut placed: Vec<Vec<&str>> = pods
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    placed.sort();
    assert_eq!(placed, [["n1", "n1"], ["n2", "n2"]]);
    kubectl_ok(
        &kubeconfig,
        &["rollout", "status", "sts/web", "--timeout=60s"],
    );
    let row = kubectl_ok(&kubeconfig, &["get", "sts", "web", "--no-headers"]);
    assert_eq!(
        row.split_whitespace().take(2).collect::<Vec<_>>(),
        ["web", "3/3"]
    );
    // Named by ordinal, with the index label.
    let created = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "--no-headers",
            "-o",
            "custom-columns=NAME:.metadata.name,INDEX:.metadata.labels.apps\\.kubernetes\\.io/pod-index",
        ],
    );
    let pods: Vec<Vec<&str>> = created
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(pods, [["web-0", "0"], ["web-1", "1"], ["web-2", "2"]]);
}

/// Starts `kubesched apiserver` on a free port (or `listen`) with `extra` flags; returns it
/// and its URL, after writing `kubeconfig`.
fn apiserver(kubeconfig: &Path, listen: &str, extra: &[&str]) -> (Proc, String) {
    let kc = kubeconfig.to_string_lossy().into_owned();
    let mut args = vec!["apiserver", "--listen", listen, "--kubeconfig", &kc];
    args.extend_from_slice(extra);
    let (proc, lines) = spawn(&args, "kubesched apiserver listening on ");
    (proc, url_after(&lines, "kubesched apiserver listening on "))
}

/// Starts `kubesched run` against `kubeconfig`; returns it and its serving address.
fn run(kubeconfig: &Path, extra: &[&str]) -> (Proc, String) {
    let kc = kubeconfig.to_string_lossy().into_owned();
    let mut args = vec!["run", "--kubeconfig", &kc, "--port", "0"];
    args.extend_from_slice(extra);
    let (proc, lines) = spawn(&args, "kubesched scheduler serving");
    let serving = url_after(
        &lines,
        "kubesched scheduler serving /healthz, /readyz, /metrics on http://",
    );
    (proc, serving)
}

/// `kubesched run` on a cluster that does not serve resource.k8s.io (Kubernetes before
/// 1.34, or the API turned off): it does not wait for DeviceClasses, ResourceSlices and
/// ResourceClaims that can never be listed, but says so once and schedules the rest.
#[test]
fn run_becomes_ready_and_binds_without_resource_k8s_io_and_warns_once() {
    let scratch = Scratch::new("no-dra");
    let kubeconfig = scratch.path("kubeconfig");
    let (_api, url) = apiserver(
        &kubeconfig,
        "127.0.0.1:0",
        &[
            "--simulate-kubelets",
            "--disable-api-group",
            "resource.k8s.io",
        ],
    );
    let api = url.trim_start_matches("http://");
    assert_eq!(get(api, "/apis/resource.k8s.io/v1/resourceclaims").0, 404);
    assert!(!get(api, "/apis").1.contains("resource.k8s.io"));
    let (ok, _, err) = kubectl(&kubeconfig, &["get", "resourceclaims"]);
    assert!(
        !ok && err.contains("doesn't have a resource type"),
        "kubectl should not know resourceclaims: {err}"
    );

    let log = scratch.path("run.log");
    let log_file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    let kc = kubeconfig.to_string_lossy().into_owned();
    let (_sched, lines) = spawn_with_stderr(
        &["run", "--kubeconfig", &kc, "--port", "0"],
        "kubesched scheduler serving",
        Stdio::from(log_file),
    );
    let serving = url_after(
        &lines,
        "kubesched scheduler serving /healthz, /readyz, /metrics on http://",
    );
    wait_for(Duration::from_secs(60), "the scheduler ready", || {
        (get(&serving, "/readyz").0 == 200).then_some(())
    });
    let node = scratch.path("node.yaml");
    std::fs::write(&node, node_yaml("n1", "8", &[], None)).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &node.to_string_lossy()]);
    create_pods(&kubeconfig, &scratch, "plain", 1);
    wait_for(Duration::from_secs(60), "the plain pod bound", || {
        let nodes = pod_nodes(&kubeconfig);
        (nodes.get("default/plain-0").map(String::as_str) == Some("n1")).then_some(())
    });
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{e}"));
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("does not serve resource.k8s.io/v1"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning naming the API: {text}");
    assert!(
        warnings[0].contains("stays unschedulable"),
        "the warning says what it means: {}",
        warnings[0]
    );
}

fn create_pods(kubeconfig: &Path, scratch: &Scratch, prefix: &str, n: usize) {
    let docs: Vec<String> = (0..n)
        .map(|i| pod_yaml(&format!("{prefix}-{i}"), "10m", ""))
        .collect();
    let file = scratch.path(&format!("{prefix}.yaml"));
    std::fs::write(&file, docs.join("---\n")).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(kubeconfig, &["create", "-f", &file.to_string_lossy()]);
}

fn all_bound(kubeconfig: &Path, n: usize) -> bool {
    let nodes = pod_nodes(kubeconfig);
    nodes.len() == n && nodes.values().all(|v| !v.is_empty())
}

#[test]
fn two_leader_electing_replicas_bind_each_pod_once_and_fail_over() {
    let scratch = Scratch::new("leader");
    let kubeconfig = scratch.path("kubeconfig");
    let (_api, _) = apiserver(&kubeconfig, "127.0.0.1:0", &["--simulate-kubelets"]);
    let le = [
        "--leader-elect",
        "--leader-elect-lease-duration",
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "250ms",
    ];
    let (first, first_addr) = run(&kubeconfig, &le);
    let (second, second_addr) = run(&kubeconfig, &le);
    let node = scratch.path("node.yaml");
    std::fs::write(&node, node_yaml("n1", "8", &[], None)).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &node.to_string_lossy()]);
    create_pods(&kubeconfig, &scratch, "one", 20);
    wait_for(Duration::from_secs(60), "20 pods bound", || {
        all_bound(&kubeconfig, 20).then_some(())
    });
    let scheduled = |addr: &str| attempts(&parse_metrics(&get(addr, "/metrics").1), "scheduled");
    let errors = |addr: &str| attempts(&parse_metrics(&get(addr, "/metrics").1), "error");
    let counts = (scheduled(&first_addr), scheduled(&second_addr));
    assert!(
        counts == (20.0, 0.0) || counts == (0.0, 20.0),
        "exactly one replica schedules: {counts:?}"
    );
    assert_eq!((errors(&first_addr), errors(&second_addr)), (0.0, 0.0));
    let holder = || {
        kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "lease",
                "-n",
                "kube-system",
                "kube-scheduler",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
        )
    };
    let first_holder = holder();
    // Kill the leader without a chance to release the lease.
    let (mut leader, survivor_addr) = if counts.0 > 0.0 {
        (first, second_addr)
    } else {
        (second, first_addr)
    };
    let _ = leader.0.kill();
    let _ = leader.0.wait();
    drop(leader);
    create_pods(&kubeconfig, &scratch, "two", 10);
    wait_for(
        Duration::from_secs(60),
        "10 more pods bound by the survivor",
        || all_bound(&kubeconfig, 30).then_some(()),
    );
    assert_ne!(holder(), first_holder, "the lease changed hands");
    assert_eq!(
        (scheduled(&survivor_addr), errors(&survivor_addr)),
        (10.0, 0.0),
        "the survivor bound the new pods, each once"
    );
}

#[test]
fn scheduler_survives_an_api_server_restart_and_loses_no_pending_pod() {
    let scratch = Scratch::new("restart");
    let kubeconfig = scratch.path("kubeconfig");
    let data = scratch.path("data");
    let data_s = data.to_string_lossy().into_owned();
    let (api, url) = apiserver(&kubeconfig, "127.0.0.1:0", &["--data-dir", &data_s]);
    let listen = url.trim_start_matches("http://").to_string();
    let (_sched, serving) = run(&kubeconfig, &["--leader-elect=false"]);
    let objects = scratch.path("objects.yaml");
    std::fs::write(
        &objects,
        format!(
            "{}---\n{}---\n{}",
            node_yaml("small", "1", &[], None),
            pod_yaml("fits", "500m", ""),
            pod_yaml("waits", "2", "")
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &objects.to_string_lossy()]);
    wait_for(
        Duration::from_secs(30),
        "fits bound, waits rejected",
        || {
            let n = pod_nodes(&kubeconfig);
            let rejected = pod_scheduled(&kubeconfig, "waits").starts_with("False/");
            (n.get("default/fits").is_some_and(|v| !v.is_empty()) && rejected).then_some(())
        },
    );

    // Restart the API server on the same address and data dir.
    drop(api);
    let (_api, _) = apiserver(&kubeconfig, &listen, &["--data-dir", &data_s]);
    let bigger = scratch.path("bigger.yaml");
    std::fs::write(
        &bigger,
        format!(
            "{}---\n{}",
            node_yaml("bigger", "4", &[], None),
            pod_yaml("after", "100m", "")
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &bigger.to_string_lossy()]);
    let nodes = wait_for(Duration::from_secs(60), "waits and after bound", || {
        let n = pod_nodes(&kubeconfig);
        (n.len() == 3 && n.values().all(|v| !v.is_empty())).then_some(n)
    });
    assert_eq!(nodes["default/waits"], "bigger");
    let (code, _) = get(&serving, "/readyz");
    assert_eq!(code, 200);
}

#[test]
fn up_serves_https_with_a_token_and_the_scheduler_uses_them() {
    let scratch = Scratch::new("tls");
    let tokens = scratch.path("tokens.csv");
    std::fs::write(&tokens, "e2e-token,admin,1,\"system:masters\"\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let certs = scratch.path("certs");
    let (_up, kubeconfig, _) = up(
        &scratch,
        &[
            "--token-file",
            &tokens.to_string_lossy(),
            "--cert-dir",
            &certs.to_string_lossy(),
        ],
    );
    let written = std::fs::read_to_string(&kubeconfig).unwrap_or_default();
    assert!(
        written.contains("https://") && written.contains("e2e-token"),
        "{written}"
    );
    let objects = scratch.path("objects.yaml");
    std::fs::write(
        &objects,
        format!(
            "{}---\n{}",
            node_yaml("n1", "2", &[], None),
            pod_yaml("p", "100m", "")
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &objects.to_string_lossy()]);
    let node = wait_for(Duration::from_secs(30), "p bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/p")?;
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(node, "n1");
}

fn priority_class(name: &str, value: i32, never: bool) -> String {
    let policy = if never {
        "preemptionPolicy: Never\n"
    } else {
        ""
    };
    format!(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {name}\nvalue: {value}\n{policy}"
    )
}

#[test]
fn a_high_priority_pod_preempts_and_a_never_pod_waits() {
    let scratch = Scratch::new("preempt");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let setup = scratch.path("setup.yaml");
    std::fs::write(
        &setup,
        [
            priority_class("low", 10, false),
            priority_class("high", 1000, false),
            priority_class("high-never", 1000, true),
            node_yaml("n1", "2", &[], None),
            pod_yaml("low-0", "1", "  priorityClassName: low\n"),
            pod_yaml("low-1", "1", "  priorityClassName: low\n"),
        ]
        .join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &setup.to_string_lossy()]);
    wait_for(Duration::from_secs(30), "low pods bound", || {
        all_bound(&kubeconfig, 2).then_some(())
    });

    let never = scratch.path("never.yaml");
    std::fs::write(
        &never,
        pod_yaml("never", "1", "  priorityClassName: high-never\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &never.to_string_lossy()]);
    let condition = wait_for(Duration::from_secs(30), "never rejected", || {
        let c = pod_scheduled(&kubeconfig, "never");
        c.starts_with("False/").then_some(c)
    });
    assert_eq!(
        condition,
        "False/Unschedulable/0/1 nodes are available: 1 Insufficient cpu. preemption: not \
         eligible due to preemptionPolicy=Never."
    );

    // Watch the pods' nominations: the API server clears nominatedNodeName when it binds
    // the pod (as upstream's does), so the nomination is seen on the way, not at the end.
    let mut watch = kubectl_command(&kubeconfig)
        .args([
            "get",
            "pods",
            "--watch",
            "-o",
            "jsonpath={.metadata.name}={.status.nominatedNodeName}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(scratch.path("watch.err")).unwrap_or_else(|e| panic!("{e}")),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("starting kubectl get --watch: {e}"));
    let watch_out = watch.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let watch = Proc(watch);
    let (line_tx, line_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(watch_out).lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    // kubectl prints its initial list before it watches from that list's resourceVersion:
    // once the three pods are printed, nothing that follows can be missed.
    let mut seen: Vec<String> = Vec::new();
    let listed = |seen: &[String]| {
        ["low-0=", "low-1=", "never="]
            .iter()
            .all(|p| seen.iter().any(|l| l.starts_with(p)))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !listed(&seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        match line_rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("kubectl get --watch listed only {seen:?}"),
        }
    }
    let high = scratch.path("high.yaml");
    std::fs::write(&high, pod_yaml("high", "1", "  priorityClassName: high\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &high.to_string_lossy()]);
    let nodes = wait_for(
        Duration::from_secs(30),
        "high bound, one victim gone",
        || {
            let n = pod_nodes(&kubeconfig);
            let lows = n.keys().filter(|k| k.starts_with("default/low-")).count();
            (n.get("default/high").is_some_and(|v| v == "n1") && lows == 1).then_some(n)
        },
    );
    // The watch may lag behind the bind: wait (bounded) for it to show the nomination.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.iter().any(|l| l == "high=n1") {
        let left = deadline.saturating_duration_since(Instant::now());
        match line_rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    drop(watch);
    let nominated = if seen.iter().any(|l| l == "high=n1") {
        "n1".to_string()
    } else {
        let err = std::fs::read_to_string(scratch.path("watch.err")).unwrap_or_default();
        format!("never nominated: {seen:?}; kubectl said: {err}")
    };
    let preempted = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=Preempted",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    );
    let uid = kubectl_ok(
        &kubeconfig,
        &["get", "pod", "high", "-o", "jsonpath={.metadata.uid}"],
    );
    assert_eq!(
        (nominated, preempted, nodes.get("default/never").cloned(),),
        (
            "n1".to_string(),
            format!("Preempted by pod {uid} on node n1"),
            Some(String::new()),
        ),
        "the preemptor was nominated, one victim got the event, the Never pod still waits"
    );
}

#[test]
fn up_stops_cleanly_on_ctrl_c_and_sigterm() {
    for signal in ["-INT", "-TERM"] {
        let scratch = Scratch::new(&format!("signal{signal}"));
        let (mut up, _kubeconfig, serving) = up(&scratch, &[]);
        let (code, _) = get(&serving, "/healthz");
        assert_eq!(code, 200);
        let status = Command::new("kill")
            .args([signal, &up.0.id().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("running kill: {e}"));
        assert!(status.success());
        let exited = wait_for(Duration::from_secs(20), "kubesched up to exit", || {
            up.0.try_wait().unwrap_or_else(|e| panic!("{e}"))
        });
        assert_eq!((signal, exited.code()), (signal, Some(0)));
    }
}

#[test]
fn a_node_at_its_csi_attach_limit_is_skipped_until_its_csi_node_count_grows() {
    let scratch = Scratch::new("volume-limits");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    // n1 allows one ebs.csi.aws.com volume, and `holder` on n1 already uses one.
    let mut objects = node_yaml("n1", "4", &[], None);
    objects.push_str(
        "---\napiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1}\nspec:\n  drivers: [{name: ebs.csi.aws.com, nodeID: i-n1, allocatable: {count: 1}}]\n",
    );
    for v in ["a", "b"] {
        objects.push_str(&format!(
            "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv-{v}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-{v}}}, claimRef: {{namespace: default, name: data-{v}}}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data-{v}}}\nspec: {{accessModes: [ReadWriteOnce], volumeName: pv-{v}, resources: {{requests: {{storage: 1Gi}}}}}}\n"
        ));
    }
    let file = scratch.path("cluster.yaml");
    std::fs::write(&file, objects).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &file.to_string_lossy()]);
    let claim = |c: &str| {
        format!("  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {c}}}}}]\n")
    };
    let holder = scratch.path("holder.yaml");
    std::fs::write(
        &holder,
        pod_yaml(
            "holder",
            "100m",
            &format!("  nodeName: n1\n{}", claim("data-a")),
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &holder.to_string_lossy()]);
    let db = scratch.path("db.yaml");
    std::fs::write(&db, pod_yaml("db", "100m", &claim("data-b"))).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &db.to_string_lossy()]);

    // holder has db's priority, so preemption finds no victim.
    let message = "0/1 nodes are available: 1 node(s) exceed max volume count. preemption: \
                   0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    let condition = wait_for(Duration::from_secs(30), "PodScheduled=False", || {
        let c = pod_scheduled(&kubeconfig, "db");
        c.starts_with("False/").then_some(c)
    });
    assert_eq!(condition, format!("False/Unschedulable/{message}"));

    kubectl_ok(
        &kubeconfig,
        &[
            "patch",
            "csinode",
            "n1",
            "--type=json",
            "-p",
            "[{\"op\": \"replace\", \"path\": \"/spec/drivers/0/allocatable/count\", \"value\": 2}]",
        ],
    );
    // The CSINode update requeues the pod (after its backoff); the 5-minute flush could not
    // bind it within this bound.
    let node = wait_for(Duration::from_secs(20), "db bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/db")?;
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(node, "n1");
}

/// The GPU example on `up`, every DRA part in play: the device driver stand-in publishes the
/// nodes' GPUs, the resourceclaim controller makes the pod's claim from its template, the
/// scheduler allocates two A100s (a CEL selector) and reserves them; a second pod wanting
/// them waits with upstream's message and is bound once the first pod is deleted (the claim
/// controller deallocates its generated claim before the claim goes, and that update requeues
/// the waiting pod: the 30 s bound is far below the 5 minutes after which unschedulable pods
/// are retried anyway).
#[test]
fn the_gpu_example_allocates_a_template_claim_and_frees_it_when_the_pod_goes() {
    let scratch = Scratch::new("dra-example");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dra-gpu.yaml");
    let (_up, kubeconfig, _) = up(&scratch, &["-f", example]);
    let node_of = |pod: &str| {
        let key = format!("default/{pod}");
        wait_for(Duration::from_secs(30), &format!("{pod} bound"), || {
            let n = pod_nodes(&kubeconfig).remove(&key)?;
            (!n.is_empty()).then_some(n)
        })
    };
    assert_eq!(node_of("training"), "gpu-node-a");
    let claims = || {
        kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "resourceclaims",
                "-o",
                "jsonpath={range .items[*]}{.metadata.annotations.resource\\.kubernetes\\.io/pod-claim-name} {.metadata.ownerReferences[0].name}: {range .status.allocation.devices.results[*]}{.pool}/{.device} {end}for={range .status.reservedFor[*]}{.name}{end}{\"\\n\"}{end}",
            ],
        )
    };
    assert_eq!(
        claims(),
        "gpus training: gpu-node-a/gpu-0 gpu-node-a/gpu-1 for=training\n"
    );

    let second = scratch.path("second.yaml");
    std::fs::write(
        &second,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: training-2, namespace: default}\nspec:\n  \
         resourceClaims: [{name: gpus, resourceClaimTemplateName: two-a100}]\n  containers:\n  \
         - {name: trainer, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: gpus}]}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &second.to_string_lossy()]);
    let message = "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, \
                   preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
    let condition = wait_for(Duration::from_secs(30), "PodScheduled=False", || {
        let c = pod_scheduled(&kubeconfig, "training-2");
        c.starts_with("False/").then_some(c)
    });
    assert_eq!(condition, format!("False/Unschedulable/{message}"));

    kubectl_ok(&kubeconfig, &["delete", "pod", "training", "--wait=false"]);
    assert_eq!(node_of("training-2"), "gpu-node-a");
    let claims = wait_for(Duration::from_secs(30), "the first claim gone", || {
        let c = claims();
        (!c.contains(" training:")).then_some(c)
    });
    assert_eq!(
        claims,
        "gpus training-2: gpu-node-a/gpu-0 gpu-node-a/gpu-1 for=training-2\n"
    );
}

/// The extended-resource example on `up` with real kubectl: a pod asking for
/// `example.com/gpu: 1` (a DeviceClass's extendedResourceName) is bound to the node with the
/// devices, the claim the scheduler made for it shows the allocation and the reservation and
/// is named in the pod's `status.extendedResourceClaimStatus`; the kubelet stand-in starts
/// the pod. A second pod wanting two waits with upstream's message; once the first pod is
/// deleted its claim goes with it (garbage collector) and the second is bound.
#[test]
fn the_extended_resource_example_gets_a_device_through_the_claim_the_scheduler_makes() {
    let scratch = Scratch::new("dra-extended");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dra-extended-resource.yaml"
    );
    let (_up, kubeconfig, _) = up(&scratch, &["-f", example]);
    let node_of = |pod: &str| {
        let key = format!("default/{pod}");
        wait_for(Duration::from_secs(30), &format!("{pod} bound"), || {
            let n = pod_nodes(&kubeconfig).remove(&key)?;
            (!n.is_empty()).then_some(n)
        })
    };
    assert_eq!(node_of("inference"), "gpu-node");
    let claims = || {
        kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "resourceclaims",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.resource\\.kubernetes\\.io/extended-resource-claim} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {range .spec.devices.requests[*]}{.name}:{.exactly.deviceClassName}:{.exactly.count} {end}{range .status.allocation.devices.results[*]}{.pool}/{.device} {end}for={range .status.reservedFor[*]}{.name}{end}{\"\\n\"}{end}",
            ],
        )
    };
    let listed = claims();
    let name = listed.split(' ').next().unwrap_or("").to_string();
    assert!(
        name.starts_with("inference-extended-resources-"),
        "{listed}"
    );
    assert_eq!(
        listed,
        format!(
            "{name} true Pod/inference container-0-request-0:l4.example.com:1 gpu-node/l4-0 for=inference\n"
        )
    );
    let pod_status = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "pod",
            "inference",
            "-o",
            "jsonpath={.status.extendedResourceClaimStatus.resourceClaimName} {range .status.extendedResourceClaimStatus.requestMappings[*]}{.containerName}/{.resourceName}/{.requestName}{end}",
        ],
    );
    assert_eq!(
        pod_status,
        format!("{name} server/example.com/gpu/container-0-request-0")
    );
    let phase = wait_for(Duration::from_secs(30), "inference running", || {
        let p = kubectl_ok(
            &kubeconfig,
            &["get", "pod", "inference", "-o", "jsonpath={.status.phase}"],
        );
        (p == "Running").then_some(p)
    });
    assert_eq!(phase, "Running");

    let second = scratch.path("second.yaml");
    std::fs::write(
        &second,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: training, namespace: default}\nspec:\n  \
         containers:\n  - {name: trainer, image: registry.k8s.io/pause:3.10, resources: {limits: {example.com/gpu: 2}}}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &second.to_string_lossy()]);
    let message = "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, \
                   preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    let condition = wait_for(Duration::from_secs(30), "PodScheduled=False", || {
        let c = pod_scheduled(&kubeconfig, "training");
        c.starts_with("False/").then_some(c)
    });
    assert_eq!(condition, format!("False/Unschedulable/{message}"));

    kubectl_ok(&kubeconfig, &["delete", "pod", "inference", "--wait=false"]);
    assert_eq!(node_of("training"), "gpu-node");
    let listed = wait_for(Duration::from_secs(30), "the first claim gone", || {
        let c = claims();
        (!c.contains(&name)).then_some(c)
    });
    assert!(
        listed.ends_with(
            " true Pod/training container-0-request-0:l4.example.com:2 gpu-node/l4-0 gpu-node/l4-1 for=training\n"
        ),
        "{listed}"
    );
}

#[test]
fn a_pod_with_a_resource_claim_gets_the_device_and_the_next_waits_until_it_is_deallocated() {
    let scratch = Scratch::new("dra");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    // n1 publishes one device of gpu.example.com; each pod has its own claim for one.
    let mut objects = node_yaml("n1", "4", &[], None);
    objects.push_str(
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {}\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpu}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n",
    );
    for c in ["gpu-a", "gpu-b"] {
        objects.push_str(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {c}}}\nspec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]}}}}\n"
        ));
    }
    let file = scratch.path("cluster.yaml");
    std::fs::write(&file, objects).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &file.to_string_lossy()]);
    let with_claim =
        |c: &str| format!("  resourceClaims: [{{name: gpu, resourceClaimName: {c}}}]\n");
    let first = scratch.path("first.yaml");
    std::fs::write(&first, pod_yaml("first", "100m", &with_claim("gpu-a")))
        .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &first.to_string_lossy()]);
    let node = wait_for(Duration::from_secs(30), "first bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/first")?;
        (!n.is_empty()).then_some(n)
    });
    let status = |claim: &str| {
        kubectl_ok(
            &kubeconfig,
            &[
                "get",
                "resourceclaim",
                claim,
                "-o",
                "jsonpath={range .status.allocation.devices.results[*]}{.driver}/{.pool}/{.device} {end}for={range .status.reservedFor[*]}{.resource}/{.name} {end}",
            ],
        )
    };
    assert_eq!(
        (node, status("gpu-a")),
        (
            "n1".to_string(),
            "gpu.example.com/n1/gpu-0 for=pods/first ".to_string()
        )
    );

    let second = scratch.path("second.yaml");
    std::fs::write(&second, pod_yaml("second", "100m", &with_claim("gpu-b")))
        .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &second.to_string_lossy()]);
    // PostFilter reasons are joined as upstream joins them: DynamicResources' first, then
    // DefaultPreemption's.
    let message = "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, \
                   preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    let condition = wait_for(Duration::from_secs(30), "PodScheduled=False", || {
        let c = pod_scheduled(&kubeconfig, "second");
        c.starts_with("False/").then_some(c)
    });
    assert_eq!(condition, format!("False/Unschedulable/{message}"));

    // What the claim controller does when a pod is gone, done by hand: delete the pod and
    // deallocate its claim. The claim update requeues the second pod (queueing hint).
    kubectl_ok(&kubeconfig, &["delete", "pod", "first", "--wait=false"]);
    kubectl_ok(
        &kubeconfig,
        &[
            "patch",
            "resourceclaim",
            "gpu-a",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\": {\"allocation\": null, \"reservedFor\": null}}",
        ],
    );
    let node = wait_for(Duration::from_secs(20), "second bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/second")?;
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(
        (node, status("gpu-b")),
        (
            "n1".to_string(),
            "gpu.example.com/n1/gpu-0 for=pods/second ".to_string()
        )
    );
}

#[test]
fn a_claim_allocated_elsewhere_and_reserved_for_no_pod_is_deallocated_and_allocated_again() {
    let scratch = Scratch::new("dra-dealloc");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let mut objects = node_yaml("n1", "4", &[], None);
    objects.push_str(
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {}\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpu}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}\n",
    );
    let file = scratch.path("cluster.yaml");
    std::fs::write(&file, objects).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &file.to_string_lossy()]);
    // The claim is allocated on a node that is gone, and reserved for no pod.
    kubectl_ok(
        &kubeconfig,
        &[
            "patch",
            "resourceclaim",
            "gpu",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\": {\"allocation\": {\"devices\": {\"results\": [{\"request\": \"gpu\", \"driver\": \"gpu.example.com\", \"pool\": \"gone\", \"device\": \"gpu-0\"}]}, \"nodeSelector\": {\"nodeSelectorTerms\": [{\"matchFields\": [{\"key\": \"metadata.name\", \"operator\": \"In\", \"values\": [\"gone\"]}]}]}}}}",
        ],
    );
    let pod = scratch.path("pod.yaml");
    std::fs::write(
        &pod,
        pod_yaml(
            "trainer",
            "100m",
            "  resourceClaims: [{name: gpu, resourceClaimName: gpu}]\n",
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &pod.to_string_lossy()]);
    // PostFilter deallocates the claim; its update requeues the pod, which then gets n1's
    // device.
    let node = wait_for(Duration::from_secs(30), "trainer bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/trainer")?;
        (!n.is_empty()).then_some(n)
    });
    let status = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "resourceclaim",
            "gpu",
            "-o",
            "jsonpath={range .status.allocation.devices.results[*]}{.driver}/{.pool}/{.device} {end}for={range .status.reservedFor[*]}{.resource}/{.name} {end}",
        ],
    );
    assert_eq!(
        (node, status),
        (
            "n1".to_string(),
            "gpu.example.com/n1/gpu-0 for=pods/trainer ".to_string()
        )
    );
}

#[test]
fn a_pod_waiting_for_its_generated_claim_is_scheduled_once_its_status_names_it() {
    let scratch = Scratch::new("dra-template");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let mut objects = node_yaml("n1", "4", &[], None);
    objects.push_str(
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {}\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpu}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n",
    );
    let file = scratch.path("cluster.yaml");
    std::fs::write(&file, objects).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &file.to_string_lossy()]);
    let pod = scratch.path("pod.yaml");
    std::fs::write(
        &pod,
        pod_yaml(
            "trainer",
            "100m",
            "  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-template}]\n",
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &pod.to_string_lossy()]);
    let uid = kubectl_ok(
        &kubeconfig,
        &["get", "pod", "trainer", "-o", "jsonpath={.metadata.uid}"],
    );
    // What the claim controller does, by hand: the generated claim, owned by the pod, then
    // its name in the pod's status.
    let claim = scratch.path("claim.yaml");
    std::fs::write(
        &claim,
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: trainer-gpu-x7k2q\n  ownerReferences: [{{apiVersion: v1, kind: Pod, name: trainer, uid: {uid}, controller: true}}]\nspec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]}}}}\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &claim.to_string_lossy()]);
    assert_eq!(
        pod_nodes(&kubeconfig).remove("default/trainer"),
        Some(String::new())
    );
    kubectl_ok(
        &kubeconfig,
        &[
            "patch",
            "pod",
            "trainer",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\": {\"resourceClaimStatuses\": [{\"name\": \"gpu\", \"resourceClaimName\": \"trainer-gpu-x7k2q\"}]}}",
        ],
    );
    let node = wait_for(Duration::from_secs(30), "trainer bound", || {
        let n = pod_nodes(&kubeconfig).remove("default/trainer")?;
        (!n.is_empty()).then_some(n)
    });
    let reserved = kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "resourceclaim",
            "trainer-gpu-x7k2q",
            "-o",
            "jsonpath={.status.reservedFor[*].name}",
        ],
    );
    assert_eq!((node, reserved), ("n1".to_string(), "trainer".to_string()));
}

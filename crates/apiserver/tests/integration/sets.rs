//! The DaemonSet and StatefulSet controllers, through the API as a client sees them. No
//! scheduler runs here: the tests bind pods themselves (a DaemonSet pod to the node its
//! affinity names), which is also how they observe the order in which pods are made.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use apiserver::Config;
use serde_json::{json, Value};

use crate::harness::{s, wait_for, Cluster};

const DSS: &str = "/apis/apps/v1/namespaces/default/daemonsets";
const STSS: &str = "/apis/apps/v1/namespaces/default/statefulsets";
const PODS: &str = "/api/v1/namespaces/default/pods";
const REVISIONS: &str = "/apis/apps/v1/namespaces/default/controllerrevisions";
const CLAIMS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";

/// The workload controllers and the kubelet stand-in on: bound pods become Running and
/// Ready.
fn cluster() -> Cluster {
    Cluster::with_config(Config {
        workload_controllers: true,
        simulate_kubelets: true,
        ..Config::default()
    })
}

fn create(c: &Cluster, path: &str, obj: Value) -> Value {
    let (code, body) = c.post(path, &obj);
    assert_eq!(code, 201, "create {path}: {body}");
    body
}

fn patch(c: &Cluster, path: &str, body: Value) -> Value {
    let (code, out) = c.request(
        "PATCH",
        path,
        Some("application/merge-patch+json"),
        &body.to_string(),
    );
    assert_eq!(code, 200, "patch {path}: {out}");
    out
}

fn items(c: &Cluster, path: &str) -> Vec<Value> {
    let (code, list) = c.get(path);
    assert_eq!(code, 200, "{list}");
    list.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The pods labelled `app=<app>` that are not being deleted.
fn pods(c: &Cluster, app: &str) -> Vec<Value> {
    items(c, &format!("{PODS}?labelSelector=app%3D{app}"))
        .into_iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .collect()
}

fn names(pods: &[Value]) -> BTreeSet<String> {
    pods.iter()
        .map(|p| s(p, "/metadata/name").to_string())
        .collect()
}

fn bind(c: &Cluster, pod: &str, node: &str) {
    let (code, body) = c.post(
        &format!("{PODS}/{pod}/binding"),
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}),
    );
    assert_eq!(code, 201, "bind {pod}: {body}");
}

fn node(c: &Cluster, name: &str, taints: Value) {
    create(
        c,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
               "spec": {"taints": taints}}),
    );
}

/// The node a daemon pod's required affinity names.
fn affinity_node(pod: &Value) -> &str {
    s(
        pod,
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0",
    )
}

/// Binds every unbound pod of `app` to the node its affinity names, as the scheduler would.
fn bind_daemon_pods(c: &Cluster, app: &str) {
    for pod in pods(c, app) {
        if s(&pod, "/spec/nodeName").is_empty() {
            bind(c, s(&pod, "/metadata/name"), affinity_node(&pod));
        }
    }
}

fn daemonset(name: &str, tolerations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "agent:1"}],
                                       "tolerations": tolerations}}}})
}

/// The nodes the pods of `app` are for, once there are `n` of them.
fn daemon_nodes(c: &Cluster, app: &str, n: usize) -> BTreeSet<String> {
    wait_for(&format!("{n} pods of {app}"), || {
        let pods = pods(c, app);
        (pods.len() == n).then(|| pods.iter().map(|p| affinity_node(p).to_string()).collect())
    })
}

fn set_of(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_string()).collect()
}

fn toleration(key: &str, effect: &str) -> Value {
    json!({"key": key, "operator": "Exists", "effect": effect})
}

#[test]
fn daemonset_runs_one_pod_per_eligible_node_and_follows_nodes() {
    let c = cluster();
    node(&c, "n1", json!([]));
    node(&c, "n2", json!([]));
    node(
        &c,
        "n3",
        json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
    );
    let ds = create(&c, DSS, daemonset("agent", json!([])));
    assert_eq!(
        (
            &ds["spec"]["updateStrategy"],
            &ds["spec"]["revisionHistoryLimit"],
            s(
                &ds,
                "/metadata/annotations/deprecated.daemonset.template.generation"
            ),
        ),
        (
            &json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            &json!(10),
            "1"
        )
    );
    assert_eq!(daemon_nodes(&c, "agent", 2), set_of(&["n1", "n2"]));
    let revisions = items(&c, REVISIONS);
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    let hash = s(&revisions[0], "/metadata/labels/controller-revision-hash").to_string();
    assert_eq!(s(&revisions[0], "/metadata/name"), format!("agent-{hash}"));
    let pod = pods(&c, "agent")
        .into_iter()
        .find(|p| affinity_node(p) == "n1")
        .unwrap_or(Value::Null);
    assert_eq!(
        (
            s(&pod, "/metadata/generateName"),
            &pod["metadata"]["labels"],
            &pod["spec"]["affinity"],
            &pod["spec"]["tolerations"],
            s(&pod, "/spec/nodeName"),
            s(&pod, "/metadata/ownerReferences/0/uid"),
        ),
        (
            "agent-",
            &json!({"app": "agent", "controller-revision-hash": hash,
                    "pod-template-generation": "1"}),
            &json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}),
            &json!([
                toleration("node.kubernetes.io/not-ready", "NoExecute"),
                toleration("node.kubernetes.io/unreachable", "NoExecute"),
                toleration("node.kubernetes.io/disk-pressure", "NoSchedule"),
                toleration("node.kubernetes.io/memory-pressure", "NoSchedule"),
                toleration("node.kubernetes.io/pid-pressure", "NoSchedule"),
                toleration("node.kubernetes.io/unschedulable", "NoSchedule"),
            ]),
            "",
            s(&ds, "/metadata/uid"),
        )
    );
    let pending = wait_for("status of 2 scheduled pods", || {
        let (_, ds) = c.get(&format!("{DSS}/agent"));
        (ds.pointer("/status/currentNumberScheduled") == Some(&json!(2))).then_some(ds)
    });
    assert_eq!(
        pending["status"],
        json!({"currentNumberScheduled": 2, "numberMisscheduled": 0,
               "desiredNumberScheduled": 2, "numberReady": 0,
               "updatedNumberScheduled": 2, "numberUnavailable": 2, "observedGeneration": 1})
    );
    bind_daemon_pods(&c, "agent");
    let ready = wait_for("status of 2 available pods", || {
        let (_, ds) = c.get(&format!("{DSS}/agent"));
        (ds.pointer("/status/numberAvailable") == Some(&json!(2))).then_some(ds)
    });
    assert_eq!(
        ready["status"],
        json!({"currentNumberScheduled": 2, "numberMisscheduled": 0,
               "desiredNumberScheduled": 2, "numberReady": 2,
               "updatedNumberScheduled": 2, "numberAvailable": 2, "observedGeneration": 1})
    );
    node(&c, "n4", json!([]));
    assert_eq!(daemon_nodes(&c, "agent", 3), set_of(&["n1", "n2", "n4"]));
    let (code, body) = c.request("DELETE", "/api/v1/nodes/n4", None, "");
    assert_eq!(code, 200, "{body}");
    assert_eq!(daemon_nodes(&c, "agent", 2), set_of(&["n1", "n2"]));
    // A NoExecute taint the pods do not tolerate removes the pod from its node.
    patch(
        &c,
        "/api/v1/nodes/n2",
        json!({"spec": {"taints": [{"key": "drain", "effect": "NoExecute"}]}}),
    );
    assert_eq!(daemon_nodes(&c, "agent", 1), set_of(&["n1"]));
}

#[test]
fn daemonset_tolerating_the_taint_runs_on_the_tainted_node_too() {
    let c = cluster();
    node(&c, "n1", json!([]));
    node(&c, "n2", json!([]));
    node(
        &c,
        "n3",
        json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
    );
    create(
        &c,
        DSS,
        daemonset("agent", json!([{"key": "gpu", "operator": "Exists"}])),
    );
    assert_eq!(daemon_nodes(&c, "agent", 3), set_of(&["n1", "n2", "n3"]));
    let tolerations: Vec<Value> = pods(&c, "agent")
        .iter()
        .map(|p| p["spec"]["tolerations"][0].clone())
        .collect();
    assert_eq!(
        tolerations,
        vec![json!({"key": "gpu", "operator": "Exists"}); 3]
    );
}

#[test]
fn daemonset_node_selector_picks_its_nodes() {
    let c = cluster();
    create(
        &c,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "ssd", "labels": {"disk": "ssd"}}}),
    );
    node(&c, "plain", json!([]));
    let mut ds = daemonset("agent", json!([]));
    ds["spec"]["template"]["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    create(&c, DSS, ds);
    assert_eq!(daemon_nodes(&c, "agent", 1), set_of(&["ssd"]));
    let rows = c.kubectl_ok(&["get", "ds", "agent"]);
    let header: Vec<&str> = rows
        .lines()
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE"
        ]
    );
}

#[test]
fn daemonset_rolling_update_replaces_every_pod_and_keeps_revisions() {
    let c = cluster();
    for n in ["n1", "n2", "n3"] {
        node(&c, n, json!([]));
    }
    create(&c, DSS, daemonset("agent", json!([])));
    daemon_nodes(&c, "agent", 3);
    bind_daemon_pods(&c, "agent");
    wait_for("3 available", || {
        let (_, ds) = c.get(&format!("{DSS}/agent"));
        (ds.pointer("/status/numberAvailable") == Some(&json!(3))).then_some(())
    });
    let old = names(&pods(&c, "agent"));
    let updated = patch(
        &c,
        &format!("{DSS}/agent"),
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "agent:2"}]}}}}),
    );
    assert_eq!(
        s(
            &updated,
            "/metadata/annotations/deprecated.daemonset.template.generation"
        ),
        "2"
    );
    let done = wait_for("the rollout to finish", || {
        bind_daemon_pods(&c, "agent");
        // At most maxUnavailable (1) node is without an available pod at any time.
        let pods = pods(&c, "agent");
        let available = pods
            .iter()
            .filter(|p| s(p, "/status/phase") == "Running")
            .count();
        assert!(available >= 2 || pods.len() < 3, "{pods:?}");
        let (_, ds) = c.get(&format!("{DSS}/agent"));
        (ds.pointer("/status/updatedNumberScheduled") == Some(&json!(3))
            && ds.pointer("/status/numberAvailable") == Some(&json!(3))
            && ds.pointer("/status/observedGeneration") == Some(&json!(2)))
        .then_some(ds)
    });
    assert_eq!(done["status"]["numberMisscheduled"], json!(0));
    let now = pods(&c, "agent");
    assert!(names(&now).is_disjoint(&old), "{now:?}");
    assert_eq!(
        now.iter()
            .map(|p| (
                s(p, "/spec/containers/0/image").to_string(),
                s(p, "/metadata/labels/pod-template-generation").to_string()
            ))
            .collect::<Vec<_>>(),
        vec![("agent:2".to_string(), "2".to_string()); 3]
    );
    let mut revisions: Vec<i64> = items(&c, REVISIONS)
        .iter()
        .map(|r| r["revision"].as_i64().unwrap_or(0))
        .collect();
    revisions.sort_unstable();
    assert_eq!(revisions, [1, 2]);
}

fn statefulset(name: &str, replicas: i64, policy: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": policy,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "db:1"}]}}}})
}

/// Binds the set's pods one at a time as they appear, checking at each step that the pods
/// there are `web-0..web-i` with only the newest unbound (OrderedReady waits for each to be
/// Running and Ready before making the next); returns the order they were bound in.
fn bind_in_order(c: &Cluster, app: &str, n: usize) -> Vec<String> {
    let mut order = Vec::new();
    while order.len() < n {
        let pods = wait_for(&format!("pod {} of {app}", order.len()), || {
            let pods = pods(c, app);
            (pods.len() > order.len()).then_some(pods)
        });
        let unbound: Vec<String> = pods
            .iter()
            .filter(|p| s(p, "/spec/nodeName").is_empty())
            .map(|p| s(p, "/metadata/name").to_string())
            .collect();
        let want: BTreeSet<String> = (0..=order.len()).map(|i| format!("{app}-{i}")).collect();
        assert_eq!(names(&pods), want, "pods made out of order");
        assert_eq!(unbound, [format!("{app}-{}", order.len())]);
        bind(c, &unbound[0], "n1");
        order.push(unbound[0].clone());
    }
    order
}

#[test]
fn statefulset_ordered_ready_makes_pods_one_after_another_and_reports_status() {
    let c = cluster();
    node(&c, "n1", json!([]));
    let sts = create(&c, STSS, statefulset("web", 3, "OrderedReady"));
    assert_eq!(bind_in_order(&c, "web", 3), ["web-0", "web-1", "web-2"]);
    let ready = wait_for("3 ready", || {
        let (_, sts) = c.get(&format!("{STSS}/web"));
        (sts.pointer("/status/availableReplicas") == Some(&json!(3))).then_some(sts)
    });
    let revisions = items(&c, REVISIONS);
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    let revision = s(&revisions[0], "/metadata/name").to_string();
    assert_eq!(
        ready["status"],
        json!({"replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
               "currentReplicas": 3, "updatedReplicas": 3,
               "currentRevision": revision, "updateRevision": revision,
               "collisionCount": 0, "observedGeneration": 1})
    );
    let (_, pod) = c.get(&format!("{PODS}/web-1"));
    assert_eq!(
        (
            &pod["metadata"]["labels"],
            s(&pod, "/spec/hostname"),
            s(&pod, "/spec/subdomain"),
            s(&pod, "/metadata/ownerReferences/0/uid"),
        ),
        (
            &json!({"app": "web", "controller-revision-hash": revision,
                    "statefulset.kubernetes.io/pod-name": "web-1",
                    "apps.kubernetes.io/pod-index": "1"}),
            "web-1",
            "web",
            s(&sts, "/metadata/uid"),
        )
    );
    let events: BTreeSet<String> = items(
        &c,
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb",
    )
    .iter()
    .map(|e| format!("{} {}", s(e, "/reason"), s(e, "/message")))
    .collect();
    assert_eq!(
        events,
        (0..3)
            .map(|i| format!("SuccessfulCreate create Pod web-{i} in StatefulSet web successful"))
            .collect::<BTreeSet<_>>()
    );
}

#[test]
fn statefulset_scales_down_from_the_highest_ordinal() {
    let c = cluster();
    node(&c, "n1", json!([]));
    create(&c, STSS, statefulset("web", 3, "OrderedReady"));
    bind_in_order(&c, "web", 3);
    let (code, body) = c.request(
        "PATCH",
        &format!("{STSS}/web/scale"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":1}}"#,
    );
    assert_eq!(code, 200, "{body}");
    wait_for("one pod left", || {
        let now = names(&pods(&c, "web"));
        // Always a prefix: web-2 goes before web-1.
        assert!(
            now == set_of(&["web-0", "web-1", "web-2"])
                || now == set_of(&["web-0", "web-1"])
                || now == set_of(&["web-0"]),
            "{now:?}"
        );
        (now.len() == 1).then_some(())
    });
    let status = wait_for("status of 1", || {
        let (_, sts) = c.get(&format!("{STSS}/web"));
        (sts.pointer("/status/replicas") == Some(&json!(1))
            && sts.pointer("/status/observedGeneration") == Some(&json!(2)))
        .then_some(sts)
    });
    assert_eq!(status["status"]["readyReplicas"], json!(1));
}

#[test]
fn statefulset_parallel_makes_all_pods_without_waiting() {
    let c = cluster();
    create(&c, STSS, statefulset("web", 3, "Parallel"));
    let made = wait_for("3 pods", || {
        let pods = pods(&c, "web");
        (pods.len() == 3).then_some(pods)
    });
    assert_eq!(names(&made), set_of(&["web-0", "web-1", "web-2"]));
    assert!(made.iter().all(|p| s(p, "/spec/nodeName").is_empty()));
    patch(&c, &format!("{STSS}/web"), json!({"spec": {"replicas": 0}}));
    wait_for("no pods", || pods(&c, "web").is_empty().then_some(()));
}

#[test]
fn statefulset_claims_from_templates_are_made_and_mounted() {
    let c = cluster();
    let mut sts = statefulset("web", 2, "Parallel");
    sts["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "www"},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}}]);
    let stored = create(&c, STSS, sts);
    assert_eq!(
        stored["spec"]["volumeClaimTemplates"][0],
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "www"},
               "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                        "resources": {"requests": {"storage": "1Gi"}}},
               "status": {"phase": "Pending"}})
    );
    let made = wait_for("2 pods", || {
        let pods = pods(&c, "web");
        (pods.len() == 2).then_some(pods)
    });
    let volumes: BTreeSet<String> = made
        .iter()
        .map(|p| s(p, "/spec/volumes/0/persistentVolumeClaim/claimName").to_string())
        .collect();
    assert_eq!(volumes, set_of(&["www-web-0", "www-web-1"]));
    let claims = items(&c, CLAIMS);
    assert_eq!(
        claims
            .iter()
            .map(|cl| (
                s(cl, "/metadata/name").to_string(),
                cl["metadata"]["labels"].clone(),
                cl["spec"]["resources"].clone(),
                s(cl, "/status/phase").to_string(),
            ))
            .collect::<Vec<_>>(),
        ["www-web-0", "www-web-1"]
            .iter()
            .map(|n| (
                (*n).to_string(),
                json!({"app": "web"}),
                json!({"requests": {"storage": "1Gi"}}),
                "Pending".to_string()
            ))
            .collect::<Vec<_>>()
    );
}

#[test]
fn statefulset_rolling_update_goes_from_the_highest_ordinal_down() {
    let c = cluster();
    node(&c, "n1", json!([]));
    create(&c, STSS, statefulset("web", 3, "OrderedReady"));
    bind_in_order(&c, "web", 3);
    wait_for("3 ready", || {
        let (_, sts) = c.get(&format!("{STSS}/web"));
        (sts.pointer("/status/readyReplicas") == Some(&json!(3))).then_some(())
    });
    patch(
        &c,
        &format!("{STSS}/web"),
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "db:2"}]}}}}),
    );
    // Each replaced pod comes back unbound; bind it and note the order.
    let mut replaced = Vec::new();
    let status = wait_for("the rollout to finish", || {
        for pod in pods(&c, "web") {
            if s(&pod, "/spec/nodeName").is_empty() {
                let name = s(&pod, "/metadata/name").to_string();
                bind(&c, &name, "n1");
                replaced.push(name);
            }
        }
        let (_, sts) = c.get(&format!("{STSS}/web"));
        let st = &sts["status"];
        (st["observedGeneration"] == json!(2)
            && st["updatedReplicas"] == json!(3)
            && st["readyReplicas"] == json!(3)
            && st["currentRevision"] == st["updateRevision"])
            .then(|| st.clone())
    });
    assert_eq!(replaced, ["web-2", "web-1", "web-0"]);
    let update = s(&status, "/updateRevision").to_string();
    assert_eq!(
        pods(&c, "web")
            .iter()
            .map(|p| s(p, "/metadata/labels/controller-revision-hash").to_string())
            .collect::<Vec<_>>(),
        vec![update; 3]
    );
    assert_eq!(items(&c, REVISIONS).len(), 2);
}

#[test]
fn kubectl_reads_sets_and_revisions_as_upstream_prints_them() {
    let c = cluster();
    create(&c, STSS, statefulset("web", 2, "Parallel"));
    wait_for("2 pods", || (pods(&c, "web").len() == 2).then_some(()));
    let row = c.kubectl_ok(&["get", "sts", "web", "--no-headers"]);
    assert_eq!(
        row.split_whitespace().take(2).collect::<Vec<_>>(),
        ["web", "0/2"]
    );
    let revisions = c.kubectl_ok(&["get", "controllerrevision", "--no-headers"]);
    let fields: Vec<&str> = revisions.split_whitespace().take(3).collect();
    assert_eq!(
        (fields.get(1).copied(), fields.get(2).copied()),
        (Some("statefulset.apps/web"), Some("1"))
    );
    let scaled = c.kubectl_ok(&["scale", "sts", "web", "--replicas=1"]);
    assert_eq!(scaled.trim(), "statefulset.apps/web scaled");
    wait_for("1 pod", || (pods(&c, "web").len() == 1).then_some(()));
}

/// After a restart on the same data dir the controllers take up the stored sets: the pods
/// and revisions there are kept (not made twice) and new work is done.
#[test]
fn sets_stored_before_a_restart_are_reconciled_after_it() {
    let dir = tempfile::tempdir().expect("data dir");
    let config = || Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: true,
        simulate_kubelets: true,
        ..Config::default()
    };
    let before = {
        let c = Cluster::with_config(config());
        node(&c, "n1", json!([]));
        create(&c, DSS, daemonset("agent", json!([])));
        create(&c, STSS, statefulset("web", 2, "Parallel"));
        daemon_nodes(&c, "agent", 1);
        wait_for("2 pods", || (pods(&c, "web").len() == 2).then_some(()));
        let uids = |app: &str| -> BTreeSet<String> {
            pods(&c, app)
                .iter()
                .map(|p| s(p, "/metadata/uid").to_string())
                .collect()
        };
        (uids("agent"), uids("web"), names(&items(&c, REVISIONS)))
    };
    let c = Cluster::with_config(config());
    patch(&c, &format!("{STSS}/web"), json!({"spec": {"replicas": 3}}));
    let web = wait_for("3 pods", || {
        let pods = pods(&c, "web");
        (pods.len() == 3).then_some(pods)
    });
    let kept: BTreeSet<String> = web
        .iter()
        .map(|p| s(p, "/metadata/uid").to_string())
        .filter(|u| before.1.contains(u))
        .collect();
    assert_eq!(kept, before.1);
    node(&c, "n2", json!([]));
    daemon_nodes(&c, "agent", 2);
    let agent: BTreeSet<String> = pods(&c, "agent")
        .iter()
        .map(|p| s(p, "/metadata/uid").to_string())
        .collect();
    assert!(before.0.is_subset(&agent), "{agent:?} {:?}", before.0);
    assert_eq!(names(&items(&c, REVISIONS)), before.2);
}

/// With `maxSurge: 1, maxUnavailable: 0` each node gets its new pod while the old one still
/// runs, one node at a time, and the old one goes once the new one is available.
#[test]
fn daemonset_surge_rolls_out_new_pods_beside_the_old_ones() {
    let c = cluster();
    node(&c, "n1", json!([]));
    node(&c, "n2", json!([]));
    let mut ds = daemonset("agent", json!([]));
    ds["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    create(&c, DSS, ds);
    daemon_nodes(&c, "agent", 2);
    bind_daemon_pods(&c, "agent");
    wait_for("2 available", || {
        let (_, ds) = c.get(&format!("{DSS}/agent"));
        (ds.pointer("/status/numberAvailable") == Some(&json!(2))).then_some(())
    });
    let old = names(&pods(&c, "agent"));
    patch(
        &c,
        &format!("{DSS}/agent"),
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "agent:2"}]}}}}),
    );
    let mut surged_on = Vec::new();
    for _ in 0..2 {
        // One new pod, unbound, beside both old ones still there or replaced.
        let new = wait_for("a surge pod", || {
            let pods = pods(&c, "agent");
            let new: Vec<Value> = pods
                .iter()
                .filter(|p| s(p, "/spec/nodeName").is_empty())
                .cloned()
                .collect();
            (!new.is_empty()).then_some((pods, new))
        });
        let (all, unbound) = new;
        assert_eq!(unbound.len(), 1, "{all:?}");
        let node = affinity_node(&unbound[0]).to_string();
        let on_node: Vec<&Value> = all.iter().filter(|p| affinity_node(p) == node).collect();
        assert_eq!(
            on_node.len(),
            2,
            "the old pod stays until the new one is available"
        );
        bind(&c, s(&unbound[0], "/metadata/name"), &node);
        surged_on.push(node.clone());
        wait_for("the old pod gone", || {
            let pods = pods(&c, "agent");
            (pods.iter().filter(|p| affinity_node(p) == node).count() == 1).then_some(())
        });
    }
    surged_on.sort();
    assert_eq!(surged_on, ["n1", "n2"]);
    let now = pods(&c, "agent");
    assert!(names(&now).is_disjoint(&old), "{now:?}");
    wait_for("status of the finished rollout", || {
        let (_, ds) = c.get(&format!("{DSS}/agent"));
        (ds.pointer("/status/updatedNumberScheduled") == Some(&json!(2))
            && ds.pointer("/status/numberAvailable") == Some(&json!(2)))
        .then_some(())
    });
}

/// A set deleted with `propagationPolicy: Orphan` and created again takes its pods back
/// instead of making new ones (a StatefulSet would otherwise collide with its own names).
#[test]
fn sets_created_again_adopt_the_pods_they_orphaned() {
    let c = cluster();
    node(&c, "n1", json!([]));
    create(&c, DSS, daemonset("agent", json!([])));
    create(&c, STSS, statefulset("web", 2, "Parallel"));
    daemon_nodes(&c, "agent", 1);
    wait_for("2 pods", || (pods(&c, "web").len() == 2).then_some(()));
    let uids = |app: &str| -> BTreeSet<String> {
        pods(&c, app)
            .iter()
            .map(|p| s(p, "/metadata/uid").to_string())
            .collect()
    };
    let before = (uids("agent"), uids("web"));
    for path in [format!("{DSS}/agent"), format!("{STSS}/web")] {
        let (code, body) = c.request(
            "DELETE",
            &path,
            Some("application/json"),
            r#"{"propagationPolicy":"Orphan"}"#,
        );
        assert_eq!(code, 200, "{body}");
        wait_for("the set gone", || (c.get(&path).0 == 404).then_some(()));
    }
    wait_for("the pods released", || {
        let all: Vec<Value> = pods(&c, "agent")
            .into_iter()
            .chain(pods(&c, "web"))
            .collect();
        all.iter()
            .all(|p| p.pointer("/metadata/ownerReferences").is_none())
            .then_some(())
    });
    let ds = create(&c, DSS, daemonset("agent", json!([])));
    let sts = create(&c, STSS, statefulset("web", 2, "Parallel"));
    for (app, owner) in [("agent", &ds), ("web", &sts)] {
        wait_for(&format!("the pods of {app} adopted"), || {
            pods(&c, app)
                .iter()
                .all(|p| s(p, "/metadata/ownerReferences/0/uid") == s(owner, "/metadata/uid"))
                .then_some(())
        });
    }
    wait_for("the status of the adopted pods", || {
        let (_, set) = c.get(&format!("{STSS}/web"));
        (set.pointer("/status/replicas") == Some(&json!(2))).then_some(())
    });
    assert_eq!((uids("agent"), uids("web")), before);
}

fn claim_names(c: &Cluster) -> BTreeSet<String> {
    names(&items(c, CLAIMS))
}

/// `persistentVolumeClaimRetentionPolicy`: Retain (the default) keeps every claim; Delete
/// removes the claims of scaled-down pods (`whenScaled`) and of a deleted set
/// (`whenDeleted`), through the garbage collector.
#[test]
fn statefulset_claims_follow_the_retention_policy() {
    let c = cluster();
    let claim_template = json!([{"metadata": {"name": "www"},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}}]);
    let mut kept = statefulset("kept", 2, "Parallel");
    kept["spec"]["volumeClaimTemplates"] = claim_template.clone();
    let mut gone = statefulset("gone", 2, "Parallel");
    gone["spec"]["volumeClaimTemplates"] = claim_template;
    gone["spec"]["persistentVolumeClaimRetentionPolicy"] =
        json!({"whenDeleted": "Delete", "whenScaled": "Delete"});
    create(&c, STSS, kept);
    create(&c, STSS, gone);
    let all = set_of(&["www-gone-0", "www-gone-1", "www-kept-0", "www-kept-1"]);
    wait_for("4 claims", || (claim_names(&c) == all).then_some(()));
    for set in ["kept", "gone"] {
        patch(
            &c,
            &format!("{STSS}/{set}"),
            json!({"spec": {"replicas": 1}}),
        );
    }
    wait_for("the scaled-down claim of gone deleted", || {
        (claim_names(&c) == set_of(&["www-gone-0", "www-kept-0", "www-kept-1"])).then_some(())
    });
    for set in ["kept", "gone"] {
        let (code, body) = c.request("DELETE", &format!("{STSS}/{set}"), None, "");
        assert_eq!(code, 200, "{body}");
    }
    wait_for("the claims of gone deleted", || {
        (claim_names(&c) == set_of(&["www-kept-0", "www-kept-1"])).then_some(())
    });
    wait_for("the pods gone", || {
        (pods(&c, "kept").is_empty() && pods(&c, "gone").is_empty()).then_some(())
    });
    assert_eq!(claim_names(&c), set_of(&["www-kept-0", "www-kept-1"]));
}

/// Revisions beyond `revisionHistoryLimit` that nothing runs are deleted, oldest first; the
/// newest stays.
#[test]
fn revisions_beyond_the_history_limit_are_deleted() {
    let c = cluster();
    let mut ds = daemonset("agent", json!([]));
    ds["spec"]["revisionHistoryLimit"] = json!(1);
    create(&c, DSS, ds);
    let mut sts = statefulset("web", 0, "Parallel");
    sts["spec"]["revisionHistoryLimit"] = json!(0);
    create(&c, STSS, sts);
    let revisions = |owner: &str| -> Vec<(i64, String)> {
        let mut out: Vec<(i64, String)> = items(&c, REVISIONS)
            .iter()
            .filter(|r| s(r, "/metadata/ownerReferences/0/name") == owner)
            .map(|r| {
                (
                    r["revision"].as_i64().unwrap_or(0),
                    s(r, "/data/spec/template/spec/containers/0/image").to_string(),
                )
            })
            .collect();
        out.sort();
        out
    };
    // Each template is waited for, so that each gets its revision.
    wait_for("the first revisions", || {
        (revisions("agent").len() == 1 && revisions("web").len() == 1).then_some(())
    });
    for image in ["v2", "v3", "v4"] {
        for path in [format!("{DSS}/agent"), format!("{STSS}/web")] {
            patch(
                &c,
                &path,
                json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "c", "image": image}]}}}}),
            );
        }
        wait_for(&format!("the revision of {image}"), || {
            (revisions("agent").last().map(|r| r.1.as_str()) == Some(image)
                && revisions("web").last().map(|r| r.1.as_str()) == Some(image))
            .then_some(())
        });
    }
    let wait_for_revisions = |owner: &str, want: Vec<(i64, String)>| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let now = revisions(owner);
            if now == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the old revisions of {owner} never deleted: {now:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for_revisions("agent", vec![(3, "v3".into()), (4, "v4".into())]);
    wait_for_revisions("web", vec![(4, "v4".into())]);
}

/// What upstream's validation refuses, with its Status: a selector that does not select the
/// template (the controller would otherwise release every pod it makes), a DaemonSet's
/// selector changed, a StatefulSet's fixed spec fields changed.
#[test]
fn invalid_sets_are_refused_with_upstreams_status() {
    let c = cluster();
    let mut ds = daemonset("agent", json!([]));
    ds["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    let (code, status) = c.post(DSS, &ds);
    assert_eq!(
        (code, s(&status, "/reason"), s(&status, "/message")),
        (
            422,
            "Invalid",
            "DaemonSet.apps \"agent\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"agent\"}: `selector` does not match template `labels`"
        )
    );
    let mut sts = statefulset("web", 1, "Parallel");
    sts["spec"]["selector"] = json!({});
    let (code, status) = c.post(STSS, &sts);
    assert_eq!(
        (code, s(&status, "/message")),
        (
            422,
            "StatefulSet.apps \"web\" is invalid: spec.selector: Invalid value: {}: empty selector is invalid for statefulset"
        )
    );
    create(&c, DSS, daemonset("agent", json!([])));
    create(&c, STSS, statefulset("web", 0, "Parallel"));
    for (path, body, want) in [
        (
            format!("{DSS}/agent"),
            json!({"spec": {"selector": {"matchLabels": {"app": "agent", "tier": "x"}},
                            "template": {"metadata": {"labels": {"tier": "x"}}}}}),
            "DaemonSet.apps \"agent\" is invalid: spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"agent\",\"tier\":\"x\"}}: field is immutable",
        ),
        (
            format!("{STSS}/web"),
            json!({"spec": {"serviceName": "other"}}),
            "StatefulSet.apps \"web\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ),
    ] {
        let (code, status) = c.request(
            "PATCH",
            &path,
            Some("application/merge-patch+json"),
            &body.to_string(),
        );
        assert_eq!((code, s(&status, "/message")), (422, want), "{path}");
    }
    patch(&c, &format!("{STSS}/web"), json!({"spec": {"replicas": 2}}));
}

/// `spec.ordinals.start` numbers the pods from there; moving it replaces the pods outside
/// the new range.
#[test]
fn statefulset_ordinals_start_where_the_spec_says() {
    let c = cluster();
    let mut sts = statefulset("web", 2, "Parallel");
    sts["spec"]["ordinals"] = json!({"start": 5});
    create(&c, STSS, sts);
    wait_for("web-5 and web-6", || {
        (names(&pods(&c, "web")) == set_of(&["web-5", "web-6"])).then_some(())
    });
    let (_, pod) = c.get(&format!("{PODS}/web-6"));
    assert_eq!(
        pod.pointer("/metadata/labels/apps.kubernetes.io~1pod-index"),
        Some(&json!("6"))
    );
    patch(
        &c,
        &format!("{STSS}/web"),
        json!({"spec": {"ordinals": {"start": 0}}}),
    );
    wait_for("web-0 and web-1", || {
        (names(&pods(&c, "web")) == set_of(&["web-0", "web-1"])).then_some(())
    });
}

/// Under OrderedReady with `minReadySeconds`, the next pod is made only once the one before
/// has been ready that long: its creation time is at least that after the other's Ready
/// time (both RFC 3339 seconds, so the comparison is exact).
#[test]
fn statefulset_ordered_ready_waits_min_ready_seconds_between_pods() {
    let c = cluster();
    node(&c, "n1", json!([]));
    let mut sts = statefulset("web", 2, "OrderedReady");
    sts["spec"]["minReadySeconds"] = json!(2);
    create(&c, STSS, sts);
    bind_in_order(&c, "web", 2);
    let (_, first) = c.get(&format!("{PODS}/web-0"));
    let (_, second) = c.get(&format!("{PODS}/web-1"));
    let ready_at = first
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| s(c, "/type") == "Ready")
        .map(|c| s(c, "/lastTransitionTime").to_string())
        .unwrap_or_default();
    let earliest = apiserver::meta::shift_rfc3339(&ready_at, 2).unwrap_or_default();
    let created = s(&second, "/metadata/creationTimestamp");
    assert!(
        !ready_at.is_empty() && created >= earliest.as_str(),
        "web-1 created {created}, web-0 ready {ready_at}"
    );
    wait_for("both available", || {
        let (_, sts) = c.get(&format!("{STSS}/web"));
        (sts.pointer("/status/availableReplicas") == Some(&json!(2))).then_some(())
    });
}

//! The Deployment controller through the API as a client sees it: ReplicaSets named by the
//! template hash, rolling updates within their surge and unavailability bounds at every
//! observed step, Recreate's order, scaling, garbage collection and a restart; and real
//! kubectl's `rollout status/restart/undo/history`, `scale` and `set image`. Pods are made
//! with `nodeName` in the template, so the kubelet stand-in runs them without a scheduler.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use apiserver::Config;
use serde_json::{json, Value};

use crate::harness::{s, wait_for, Cluster};

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const RSS: &str = "/apis/apps/v1/namespaces/default/replicasets";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn cluster() -> Cluster {
    let c = Cluster::with_config(Config {
        workload_controllers: true,
        simulate_kubelets: true,
        ..Config::default()
    });
    let (code, body) = c.post(
        "/api/v1/nodes",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
    );
    assert_eq!(code, 201, "{body}");
    c
}

fn i(obj: &Value, p: &str) -> i64 {
    obj.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn deployment(name: &str, replicas: i64, image: &str, strategy: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "strategy": strategy,
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"nodeName": "n1",
                                       "containers": [{"name": "c", "image": image}]}}}})
}

fn create(c: &Cluster, path: &str, obj: &Value) -> Value {
    let (code, body) = c.post(path, obj);
    assert_eq!(code, 201, "create {path}: {body}");
    body
}

fn items(c: &Cluster, path: &str) -> Vec<Value> {
    let (code, list) = c.get(path);
    assert_eq!(code, 200, "{list}");
    list.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn replicasets(c: &Cluster, app: &str) -> Vec<Value> {
    items(c, &format!("{RSS}?labelSelector=app%3D{app}"))
}

fn pods(c: &Cluster, app: &str) -> Vec<Value> {
    items(c, &format!("{PODS}?labelSelector=app%3D{app}"))
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True")
}

/// Waits until the Deployment's status says its rollout is complete (as `kubectl rollout
/// status` judges it), and returns it.
fn rolled_out(c: &Cluster, name: &str) -> Value {
    wait_for(&format!("deployment {name} rolled out"), || {
        let (_, d) = c.get(&format!("{DEPLOYS}/{name}"));
        let want = i(&d, "/spec/replicas");
        let done = i(&d, "/status/observedGeneration") >= i(&d, "/metadata/generation")
            && i(&d, "/status/updatedReplicas") == want
            && i(&d, "/status/replicas") == want
            && i(&d, "/status/availableReplicas") == want
            && progressing_reason(&d) == "NewReplicaSetAvailable";
        done.then_some(d)
    })
}

/// The reason of the Deployment's `Progressing` condition.
fn progressing_reason(d: &Value) -> &str {
    d.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| s(c, "/type") == "Progressing")
        .map_or("", |c| s(c, "/reason"))
}

/// The conditions with their times masked.
fn conditions(d: &Value) -> Value {
    let mut cs = d
        .pointer("/status/conditions")
        .cloned()
        .unwrap_or(json!([]));
    for c in cs.as_array_mut().into_iter().flatten() {
        c["lastUpdateTime"] = json!("TIME");
        c["lastTransitionTime"] = json!("TIME");
    }
    cs
}

/// Messages of the Deployment's Events, oldest first.
fn events(c: &Cluster, name: &str) -> Vec<String> {
    let mut evs = items(
        c,
        &format!("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{name}"),
    );
    evs.sort_by(|a, b| {
        s(a, "/metadata/resourceVersion")
            .parse::<u64>()
            .unwrap_or(0)
            .cmp(
                &s(b, "/metadata/resourceVersion")
                    .parse::<u64>()
                    .unwrap_or(0),
            )
    });
    evs.iter()
        .filter(|e| s(e, "/source/component") == "deployment-controller")
        .map(|e| format!("{}: {}", s(e, "/reason"), s(e, "/message")))
        .collect()
}

fn set_image(c: &Cluster, name: &str, image: &str) {
    let (code, body) = c.request(
        "PATCH",
        &format!("{DEPLOYS}/{name}"),
        Some("application/strategic-merge-patch+json"),
        &json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
            .to_string(),
    );
    assert_eq!(code, 200, "{body}");
}

#[test]
fn deployment_of_three_makes_a_hashed_replicaset_with_three_pods_and_reports_status() {
    let c = cluster();
    let created = create(&c, DEPLOYS, &deployment("web", 3, "nginx:1.27", json!({})));
    assert_eq!(
        created.get("spec"),
        Some(
            &json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.27",
                    "imagePullPolicy": "IfNotPresent", "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"}],
                    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst", "securityContext": {},
                    "schedulerName": "default-scheduler"}}})
        )
    );
    let d = rolled_out(&c, "web");
    let rss = replicasets(&c, "web");
    assert_eq!(rss.len(), 1, "{rss:?}");
    let rs = &rss[0];
    let hash = s(rs, "/metadata/labels/pod-template-hash");
    assert!(!hash.is_empty() && hash.len() <= 10, "hash label {hash:?}");
    let mut template = created["spec"]["template"].clone();
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    assert_eq!(
        (
            s(rs, "/metadata/name"),
            rs.pointer("/metadata/labels"),
            rs.pointer("/metadata/annotations"),
            rs.pointer("/metadata/ownerReferences"),
            rs.get("spec"),
        ),
        (
            format!("web-{hash}").as_str(),
            Some(&json!({"app": "web", "pod-template-hash": hash})),
            Some(&json!({"deployment.kubernetes.io/revision": "1",
                         "deployment.kubernetes.io/desired-replicas": "3",
                         "deployment.kubernetes.io/max-replicas": "4"})),
            Some(
                &json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                "uid": s(&created, "/metadata/uid"), "controller": true,
                "blockOwnerDeletion": true}])
            ),
            Some(&json!({"replicas": 3,
                "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
                "template": template})),
        )
    );
    let made = pods(&c, "web");
    assert_eq!(made.len(), 3);
    for pod in &made {
        assert_eq!(
            (
                s(pod, "/metadata/labels/pod-template-hash"),
                s(pod, "/metadata/ownerReferences/0/name")
            ),
            (hash, s(rs, "/metadata/name"))
        );
    }
    assert_eq!(
        (
            d.pointer("/metadata/annotations"),
            d.pointer("/status/replicas"),
            d.pointer("/status/updatedReplicas"),
            d.pointer("/status/readyReplicas"),
            d.pointer("/status/availableReplicas"),
            d.pointer("/status/unavailableReplicas"),
            d.pointer("/status/observedGeneration"),
            conditions(&d),
        ),
        (
            Some(&json!({"deployment.kubernetes.io/revision": "1"})),
            Some(&json!(3)),
            Some(&json!(3)),
            Some(&json!(3)),
            Some(&json!(3)),
            None,
            Some(&json!(1)),
            json!([
                {"type": "Available", "status": "True", "lastUpdateTime": "TIME",
                 "lastTransitionTime": "TIME", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "lastUpdateTime": "TIME",
                 "lastTransitionTime": "TIME", "reason": "NewReplicaSetAvailable",
                 "message": format!("ReplicaSet \"web-{hash}\" has successfully progressed.")}
            ]),
        )
    );
    assert_eq!(
        events(&c, "web"),
        vec![format!(
            "ScalingReplicaSet: Scaled up replica set web-{hash} to 3"
        )]
    );
}

/// At every observed step of a rolling update of 4 replicas with maxSurge 1 and
/// maxUnavailable 1: at most 5 pods wanted and running, at least 3 ready.
#[test]
fn rolling_update_stays_within_max_surge_and_max_unavailable_at_every_step() {
    let c = cluster();
    let strategy = json!({"type": "RollingUpdate",
                          "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}});
    create(&c, DEPLOYS, &deployment("web", 4, "nginx:1.27", strategy));
    rolled_out(&c, "web");
    let first = replicasets(&c, "web");
    set_image(&c, "web", "nginx:1.28");
    let mut steps = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        assert!(
            Instant::now() < deadline,
            "rollout never finished: {steps:?}"
        );
        let rss = replicasets(&c, "web");
        let wanted: i64 = rss.iter().map(|rs| i(rs, "/spec/replicas")).sum();
        let all = pods(&c, "web");
        let running = all
            .iter()
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
            .count();
        let ready_pods = all.iter().filter(|p| ready(p)).count();
        assert!(
            wanted <= 5 && running <= 5 && ready_pods >= 3,
            "out of bounds: {wanted} wanted, {running} running, {ready_pods} ready"
        );
        let sizes: BTreeMap<String, i64> = rss
            .iter()
            .map(|rs| (s(rs, "/metadata/name").to_string(), i(rs, "/spec/replicas")))
            .collect();
        steps.insert(format!("{sizes:?}"));
        let (_, d) = c.get(&format!("{DEPLOYS}/web"));
        if progressing_reason(&d) == "NewReplicaSetAvailable"
            && i(&d, "/status/updatedReplicas") == 4
            && i(&d, "/status/replicas") == 4
            && i(&d, "/status/observedGeneration") == 2
        {
            break d;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let rss = replicasets(&c, "web");
    let old = s(&first[0], "/metadata/name");
    let new = rss
        .iter()
        .find(|rs| s(rs, "/metadata/name") != old)
        .expect("a new replica set");
    let sizes: BTreeMap<&str, (i64, &str)> = rss
        .iter()
        .map(|rs| {
            (
                s(rs, "/metadata/name"),
                (
                    i(rs, "/spec/replicas"),
                    s(
                        rs,
                        "/metadata/annotations/deployment.kubernetes.io~1revision",
                    ),
                ),
            )
        })
        .collect();
    assert_eq!(
        sizes,
        BTreeMap::from([(old, (0, "1")), (s(new, "/metadata/name"), (4, "2"))])
    );
    assert_eq!(
        done.pointer("/metadata/annotations/deployment.kubernetes.io~1revision"),
        Some(&json!("2"))
    );
    let new_name = s(new, "/metadata/name");
    assert_eq!(
        events(&c, "web").first().cloned(),
        Some(format!(
            "ScalingReplicaSet: Scaled up replica set {old} to 4"
        ))
    );
    assert!(
        events(&c, "web").contains(&format!(
            "ScalingReplicaSet: Scaled up replica set {new_name} to 1"
        )),
        "{:?}",
        events(&c, "web")
    );
}

/// Recreate: no observation ever shows pods of the old template and of the new one
/// together, even terminating ones.
#[test]
fn recreate_removes_every_old_pod_before_the_new_replicaset_scales_up() {
    let c = cluster();
    create(
        &c,
        DEPLOYS,
        &deployment("web", 3, "nginx:1.27", json!({"type": "Recreate"})),
    );
    let d = rolled_out(&c, "web");
    assert_eq!(
        d.pointer("/spec/strategy"),
        Some(&json!({"type": "Recreate"}))
    );
    set_image(&c, "web", "nginx:1.28");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "rollout never finished");
        let all = pods(&c, "web");
        let images: BTreeSet<&str> = all
            .iter()
            .map(|p| s(p, "/spec/containers/0/image"))
            .collect();
        assert!(images.len() <= 1, "old and new pods together: {images:?}");
        if images == BTreeSet::from(["nginx:1.28"]) && all.iter().filter(|p| ready(p)).count() == 3
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    rolled_out(&c, "web");
}

#[test]
fn scaling_resizes_the_replicaset_through_the_scale_subresource() {
    let c = cluster();
    create(&c, DEPLOYS, &deployment("web", 2, "nginx:1.27", json!({})));
    rolled_out(&c, "web");
    let (code, scale) = c.request(
        "PATCH",
        &format!("{DEPLOYS}/web/scale"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":5}}"#,
    );
    assert_eq!(
        (code, scale.pointer("/spec/replicas")),
        (200, Some(&json!(5))),
        "{scale}"
    );
    let d = rolled_out(&c, "web");
    assert_eq!(i(&d, "/status/availableReplicas"), 5);
    let rss = replicasets(&c, "web");
    let name = s(&rss[0], "/metadata/name");
    assert_eq!(
        (
            rss.len(),
            i(&rss[0], "/spec/replicas"),
            s(
                &rss[0],
                "/metadata/annotations/deployment.kubernetes.io~1desired-replicas"
            )
        ),
        (1, 5, "5")
    );
    assert_eq!(
        events(&c, "web"),
        vec![
            format!("ScalingReplicaSet: Scaled up replica set {name} to 2"),
            format!("ScalingReplicaSet: Scaled up replica set {name} to 5 from 2"),
        ]
    );
}

#[test]
fn old_replicasets_beyond_the_revision_history_limit_are_deleted() {
    let c = cluster();
    let mut d = deployment("web", 1, "nginx:1", json!({}));
    d["spec"]["revisionHistoryLimit"] = json!(1);
    create(&c, DEPLOYS, &d);
    rolled_out(&c, "web");
    for image in ["nginx:2", "nginx:3"] {
        set_image(&c, "web", image);
        rolled_out(&c, "web");
    }
    let left = wait_for("two replica sets left", || {
        let rss = replicasets(&c, "web");
        (rss.len() == 2).then_some(rss)
    });
    let images: BTreeSet<&str> = left
        .iter()
        .map(|rs| s(rs, "/spec/template/spec/containers/0/image"))
        .collect();
    assert_eq!(images, BTreeSet::from(["nginx:2", "nginx:3"]));
}

#[test]
fn deleting_a_deployment_collects_its_replicasets_and_pods() {
    let c = cluster();
    create(&c, DEPLOYS, &deployment("web", 2, "nginx:1.27", json!({})));
    rolled_out(&c, "web");
    let (code, body) = c.request("DELETE", &format!("{DEPLOYS}/web"), None, "");
    assert_eq!(code, 200, "{body}");
    wait_for("replica sets and pods collected", || {
        (replicasets(&c, "web").is_empty() && pods(&c, "web").is_empty()).then_some(())
    });
}

/// A Deployment stored by a server without controllers is rolled out by the next server
/// on the same data dir, and one already rolled out keeps its ReplicaSet and revision.
#[test]
fn deployments_stored_before_a_restart_are_rolled_out_after_it() {
    let dir = tempfile::tempdir().expect("data dir");
    let config = |controllers: bool| Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: controllers,
        simulate_kubelets: controllers,
        ..Config::default()
    };
    let first_rs = {
        let c = Cluster::with_config(config(true));
        create(&c, DEPLOYS, &deployment("web", 2, "nginx:1.27", json!({})));
        rolled_out(&c, "web");
        replicasets(&c, "web")
    };
    {
        let c = Cluster::with_config(config(false));
        create(&c, DEPLOYS, &deployment("api", 2, "nginx:1.27", json!({})));
        set_image(&c, "web", "nginx:1.28");
    }
    let c = Cluster::with_config(config(true));
    rolled_out(&c, "api");
    let d = rolled_out(&c, "web");
    assert_eq!(
        d.pointer("/metadata/annotations/deployment.kubernetes.io~1revision"),
        Some(&json!("2"))
    );
    let names: BTreeSet<String> = replicasets(&c, "web")
        .iter()
        .map(|rs| s(rs, "/metadata/name").to_string())
        .collect();
    assert!(
        names.contains(s(&first_rs[0], "/metadata/name")),
        "{names:?}"
    );
    assert_eq!(names.len(), 2);
}

/// What a user runs: apply, `get deploy`, `rollout status`, `set image`, `rollout history`,
/// `rollout undo` (back to the first ReplicaSet, under revision 3), `rollout restart`,
/// `scale`.
#[test]
fn kubectl_rolls_out_sets_image_undoes_restarts_and_scales_a_deployment() {
    let c = cluster();
    let f = c.file(
        "deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  \
         selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        \
         app: web\n    spec:\n      nodeName: n1\n      containers:\n      - name: c\n        \
         image: nginx:1.27\n",
    );
    assert_eq!(
        c.kubectl_ok(&["apply", "-f", &f]),
        "deployment.apps/web created\n"
    );
    let status = c.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    assert!(
        status.ends_with("deployment \"web\" successfully rolled out\n"),
        "{status}"
    );
    let table = c.kubectl_ok(&["get", "deploy", "-o", "wide"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        (rows[0].clone(), rows[1].get(..4), rows[1].get(5..)),
        (
            vec![
                "NAME",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "AGE",
                "CONTAINERS",
                "IMAGES",
                "SELECTOR"
            ],
            Some(&["web", "3/3", "3", "3"][..]),
            Some(&["c", "nginx:1.27", "app=web"][..])
        ),
        "{table}"
    );
    let first = s(&replicasets(&c, "web")[0], "/metadata/name").to_string();
    let all = c.kubectl_ok(&["get", "all", "-o", "name"]);
    assert!(
        all.lines().any(|l| l == "deployment.apps/web")
            && all.lines().any(|l| l == format!("replicaset.apps/{first}")),
        "{all}"
    );
    assert_eq!(
        c.kubectl_ok(&["set", "image", "deployment/web", "c=nginx:1.28"]),
        "deployment.apps/web image updated\n"
    );
    c.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    let history = c.kubectl_ok(&["rollout", "history", "deployment/web"]);
    let revisions: Vec<&str> = history
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, vec!["1", "2"], "{history}");
    assert_eq!(
        c.kubectl_ok(&["rollout", "undo", "deployment/web"]),
        "deployment.apps/web rolled back\n"
    );
    c.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    let d = rolled_out(&c, "web");
    assert_eq!(
        (
            s(&d, "/spec/template/spec/containers/0/image"),
            s(
                &d,
                "/metadata/annotations/deployment.kubernetes.io~1revision"
            )
        ),
        ("nginx:1.27", "3")
    );
    let rss = replicasets(&c, "web");
    let back = rss
        .iter()
        .find(|rs| i(rs, "/spec/replicas") == 3)
        .expect("a scaled-up replica set");
    assert_eq!(
        (
            s(back, "/metadata/name"),
            s(
                back,
                "/metadata/annotations/deployment.kubernetes.io~1revision"
            ),
            s(
                back,
                "/metadata/annotations/deployment.kubernetes.io~1revision-history"
            ),
            rss.len()
        ),
        (first.as_str(), "3", "1", 2)
    );
    assert_eq!(
        c.kubectl_ok(&["rollout", "restart", "deployment/web"]),
        "deployment.apps/web restarted\n"
    );
    c.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    assert_eq!(replicasets(&c, "web").len(), 3);
    let d = rolled_out(&c, "web");
    assert!(
        d.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt")
            .is_some(),
        "{d}"
    );
    assert_eq!(
        c.kubectl_ok(&["scale", "deploy", "web", "--replicas=1"]),
        "deployment.apps/web scaled\n"
    );
    wait_for("one ready pod", || {
        let (_, d) = c.get(&format!("{DEPLOYS}/web"));
        let pods: Vec<Value> = pods(&c, "web").into_iter().filter(ready).collect();
        (i(&d, "/status/availableReplicas") == 1
            && i(&d, "/status/replicas") == 1
            && pods.len() == 1)
            .then_some(())
    });
}

/// The Deployment of [`deployment`] with its template changed so that new pods are never
/// scheduled (no `nodeName`, no scheduler): its rollout stalls with the new ReplicaSet
/// unavailable.
fn stall_rollout(c: &Cluster, name: &str) {
    let (code, body) = c.request(
        "PATCH",
        &format!("{DEPLOYS}/{name}"),
        Some("application/json-patch+json"),
        r#"[{"op":"remove","path":"/spec/template/spec/nodeName"}]"#,
    );
    assert_eq!(code, 200, "{body}");
}

/// The ReplicaSets' sizes by their containers' node (`n1` for the old template, `-` for the
/// stalled one).
fn sizes_by_template(c: &Cluster, name: &str) -> BTreeMap<String, i64> {
    replicasets(c, name)
        .iter()
        .map(|rs| {
            let node = s(rs, "/spec/template/spec/nodeName");
            (
                if node.is_empty() { "-" } else { node }.to_string(),
                i(rs, "/spec/replicas"),
            )
        })
        .collect()
}

/// Scaling mid-rollout spreads the new replicas over the old and new ReplicaSets in
/// proportion to their sizes (upstream's proportional scaling): 3 old + 2 new of 4 (max 5)
/// scaled to 8 (max 10) are 6 old + 4 new.
#[test]
fn scaling_a_stalled_rollout_scales_its_replicasets_in_proportion() {
    let c = cluster();
    create(&c, DEPLOYS, &deployment("web", 4, "nginx:1.27", json!({})));
    rolled_out(&c, "web");
    stall_rollout(&c, "web");
    let stalled = BTreeMap::from([("-".to_string(), 2), ("n1".to_string(), 3)]);
    wait_for("the rollout stalled at 3 old and 2 new", || {
        (sizes_by_template(&c, "web") == stalled).then_some(())
    });
    let (code, body) = c.request(
        "PATCH",
        &format!("{DEPLOYS}/web/scale"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":8}}"#,
    );
    assert_eq!(code, 200, "{body}");
    let scaled = BTreeMap::from([("-".to_string(), 4), ("n1".to_string(), 6)]);
    wait_for("6 old and 4 new", || {
        (sizes_by_template(&c, "web") == scaled).then_some(())
    });
    let annotations: BTreeSet<(String, String)> = replicasets(&c, "web")
        .iter()
        .map(|rs| {
            (
                s(
                    rs,
                    "/metadata/annotations/deployment.kubernetes.io~1desired-replicas",
                )
                .to_string(),
                s(
                    rs,
                    "/metadata/annotations/deployment.kubernetes.io~1max-replicas",
                )
                .to_string(),
            )
        })
        .collect();
    assert_eq!(
        annotations,
        BTreeSet::from([("8".to_string(), "10".to_string())])
    );
}

/// A rollout that makes no progress for `progressDeadlineSeconds` is reported with
/// `Progressing=False` reason `ProgressDeadlineExceeded`, which `kubectl rollout status`
/// turns into an error.
#[test]
fn a_rollout_without_progress_past_its_deadline_is_reported_and_fails_rollout_status() {
    let c = cluster();
    let mut d = deployment("web", 2, "nginx:1.27", json!({}));
    d["spec"]["progressDeadlineSeconds"] = json!(1);
    create(&c, DEPLOYS, &d);
    rolled_out(&c, "web");
    stall_rollout(&c, "web");
    let d = wait_for("the deadline exceeded", || {
        let (_, d) = c.get(&format!("{DEPLOYS}/web"));
        (progressing_reason(&d) == "ProgressDeadlineExceeded").then_some(d)
    });
    let new = replicasets(&c, "web")
        .into_iter()
        .find(|rs| s(rs, "/spec/template/spec/nodeName").is_empty())
        .expect("the new replica set");
    assert_eq!(
        conditions(&d)
            .as_array()
            .and_then(|cs| cs.iter().find(|c| s(c, "/type") == "Progressing"))
            .cloned(),
        Some(
            json!({"type": "Progressing", "status": "False", "lastUpdateTime": "TIME",
            "lastTransitionTime": "TIME", "reason": "ProgressDeadlineExceeded",
            "message": format!("ReplicaSet \"{}\" has timed out progressing.",
                               s(&new, "/metadata/name"))})
        )
    );
    let out = c.kubectl(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    assert_eq!(
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            false,
            "error: deployment \"web\" exceeded its progress deadline\n".to_string()
        )
    );
}

/// A selector that does not select the template would have the ReplicaSet controller
/// make pods it never owns; the API server refuses it, as upstream's does.
#[test]
fn a_deployment_whose_selector_does_not_select_its_template_is_refused() {
    let c = cluster();
    let mut d = deployment("web", 1, "nginx:1.27", json!({}));
    d["spec"]["selector"] = json!({"matchLabels": {"app": "api"}});
    let (code, status) = c.post(DEPLOYS, &d);
    assert_eq!(
        (code, s(&status, "/reason"), s(&status, "/message")),
        (
            422,
            "Invalid",
            "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"
        ),
        "{status}"
    );
    assert_eq!(c.get(&format!("{DEPLOYS}/web")).0, 404);
}

/// The pods the controllers make get what the API server does to a pod created through it:
/// a spread constraint's `matchLabelKeys: [pod-template-hash]` is merged into its
/// `labelSelector` with the pod's hash, which is all upstream's kube-scheduler reads.
#[test]
fn pods_of_a_deployment_have_match_label_keys_merged_into_their_spread_selector() {
    let c = cluster();
    let mut d = deployment("web", 1, "nginx:1.27", json!({}));
    d["spec"]["template"]["spec"]["topologySpreadConstraints"] = json!([{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["pod-template-hash"]}]);
    create(&c, DEPLOYS, &d);
    let pod = wait_for("a pod", || pods(&c, "web").into_iter().next());
    let hash = s(&pod, "/metadata/labels/pod-template-hash");
    assert_eq!(
        pod.pointer("/spec/topologySpreadConstraints/0/labelSelector"),
        Some(&json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "pod-template-hash", "operator": "In",
                                  "values": [hash]}]}))
    );
}

/// A ReplicaSet of another template already holding the name `<deployment>-<hash>` is a
/// hash collision: `status.collisionCount` rises and the new ReplicaSet is named by the
/// hash that counts it.
#[test]
fn a_replicaset_name_taken_by_another_template_raises_the_collision_count() {
    let dir = tempfile::tempdir().expect("data dir");
    let config = |controllers: bool| Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: controllers,
        simulate_kubelets: controllers,
        ..Config::default()
    };
    let taken = {
        let c = Cluster::with_config(config(false));
        let d = create(&c, DEPLOYS, &deployment("web", 1, "nginx:1.27", json!({})));
        let hash = apiserver::deployment::util::compute_hash(d.pointer("/spec/template"), None);
        let name = format!("web-{hash}");
        let mut other = deployment("other", 0, "busybox", json!({}));
        other["kind"] = json!("ReplicaSet");
        other["metadata"]["name"] = json!(name);
        if let Some(spec) = other["spec"].as_object_mut() {
            spec.remove("strategy");
        }
        create(&c, RSS, &other);
        name
    };
    let c = Cluster::with_config(config(true));
    let d = rolled_out(&c, "web");
    assert_eq!(d.pointer("/status/collisionCount"), Some(&json!(1)));
    let owned: Vec<String> = replicasets(&c, "web")
        .iter()
        .map(|rs| s(rs, "/metadata/name").to_string())
        .collect();
    let want = format!(
        "web-{}",
        apiserver::deployment::util::compute_hash(d.pointer("/spec/template"), Some(1))
    );
    assert_eq!(owned, vec![want.clone()]);
    assert_ne!(want, taken);
}

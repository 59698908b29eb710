//! The local cluster's workload controllers, through the API as a client sees them: the
//! ReplicaSet controller making, adopting, replacing and deleting pods and writing status,
//! and the garbage collector's background, orphan and foreground deletion. Objects are
//! created over HTTP (admission applies) and compared whole, with server-chosen values
//! (names, uids, resourceVersions, timestamps) masked.

use std::collections::BTreeSet;

use apiserver::Config;
use serde_json::{json, Value};

use crate::harness::{s, wait_for, Cluster};

const RSS: &str = "/apis/apps/v1/namespaces/default/replicasets";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// The workload controllers on; the kubelet stand-in only when `kubelets` (without it a
/// bound pod being deleted stays terminating, which makes foreground deletion observable).
fn cluster(kubelets: bool) -> Cluster {
    Cluster::with_config(Config {
        workload_controllers: true,
        simulate_kubelets: kubelets,
        ..Config::default()
    })
}

fn create(c: &Cluster, path: &str, obj: Value) -> Value {
    let (code, body) = c.post(path, &obj);
    assert_eq!(code, 201, "create {path}: {body}");
    body
}

fn replicaset(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}})
}

/// The pods labelled `app=<app>`.
fn pods(c: &Cluster, app: &str) -> Vec<Value> {
    let (code, list) = c.get(&format!("{PODS}?labelSelector=app%3D{app}"));
    assert_eq!(code, 200, "{list}");
    list.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn active(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
}

/// Waits until `n` pods labelled `app=<app>` are active, and returns them.
fn active_pods(c: &Cluster, app: &str, n: usize) -> Vec<Value> {
    wait_for(&format!("{n} active pods of {app}"), || {
        let pods: Vec<Value> = pods(c, app).into_iter().filter(active).collect();
        (pods.len() == n).then_some(pods)
    })
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

fn node(c: &Cluster, name: &str) {
    create(
        c,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    );
}

fn delete(c: &Cluster, path: &str, options: Value) -> Value {
    let (code, body) = c.request(
        "DELETE",
        path,
        Some("application/json"),
        &options.to_string(),
    );
    assert_eq!(code, 200, "delete {path}: {body}");
    body
}

/// The object with the values the server chooses replaced by placeholders.
fn masked(obj: &Value) -> Value {
    let mut v = obj.clone();
    for (pointer, placeholder) in [
        ("/metadata/name", "NAME"),
        ("/metadata/uid", "UID"),
        ("/metadata/resourceVersion", "RV"),
        ("/metadata/creationTimestamp", "TIME"),
        ("/metadata/deletionTimestamp", "TIME"),
        ("/metadata/ownerReferences/0/uid", "OWNER-UID"),
    ] {
        if let Some(x) = v.pointer_mut(pointer) {
            *x = json!(placeholder);
        }
    }
    v
}

fn owner(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": "OWNER-UID",
           "controller": true, "blockOwnerDeletion": true})
}

#[test]
fn replicaset_of_three_makes_three_owned_pods_and_reports_status() {
    let c = cluster(true);
    node(&c, "n1");
    let rs = create(&c, RSS, replicaset("web", 3));
    let made = active_pods(&c, "web", 3);
    for pod in &made {
        assert_eq!(
            (
                s(pod, "/metadata/generateName"),
                s(pod, "/metadata/name").len(),
                s(pod, "/metadata/ownerReferences/0/uid")
            ),
            ("web-", "web-".len() + 5, s(&rs, "/metadata/uid")),
            "{pod}"
        );
    }
    assert_eq!(
        masked(&made[0]),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "NAME", "generateName": "web-", "namespace": "default",
                "uid": "UID", "resourceVersion": "RV", "creationTimestamp": "TIME",
                "generation": 1, "labels": {"app": "web"}, "ownerReferences": [owner("web")]},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                "imagePullPolicy": "IfNotPresent", "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"}],
                "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "priority": 0,
                "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "serviceAccountName": "default",
                "terminationGracePeriodSeconds": 30, "preemptionPolicy": "PreemptLowerPriority"},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}})
    );
    let pending = wait_for("status of 3 pending pods", || {
        let (_, rs) = c.get(&format!("{RSS}/web"));
        (rs.pointer("/status/replicas") == Some(&json!(3))).then_some(rs)
    });
    assert_eq!(
        pending.get("status"),
        Some(&json!({"replicas": 3, "fullyLabeledReplicas": 3, "observedGeneration": 1}))
    );
    for pod in &made {
        bind(&c, s(pod, "/metadata/name"), "n1");
    }
    let ready = wait_for("status of 3 ready pods", || {
        let (_, rs) = c.get(&format!("{RSS}/web"));
        (rs.pointer("/status/availableReplicas") == Some(&json!(3))).then_some(rs)
    });
    assert_eq!(
        masked(&ready),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "NAME", "namespace": "default", "uid": "UID",
                "resourceVersion": "RV", "creationTimestamp": "TIME", "generation": 1},
            "spec": replicaset("web", 3)["spec"],
            "status": {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3,
                "availableReplicas": 3, "observedGeneration": 1}})
    );
    let events: BTreeSet<(String, String)> = wait_for("3 SuccessfulCreate events", || {
        let (_, list) =
            c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb");
        let events: BTreeSet<(String, String)> = list
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| (s(e, "/reason").to_string(), s(e, "/message").to_string()))
            .collect();
        (events.len() == 3).then_some(events)
    });
    let want: BTreeSet<(String, String)> = names(&made)
        .into_iter()
        .map(|n| ("SuccessfulCreate".to_string(), format!("Created pod: {n}")))
        .collect();
    assert_eq!(events, want);
}

#[test]
fn scaling_down_deletes_unscheduled_pods_first_and_raises_observed_generation() {
    let c = cluster(true);
    node(&c, "n1");
    create(&c, RSS, replicaset("web", 3));
    let made = active_pods(&c, "web", 3);
    let mut bound = BTreeSet::new();
    for pod in made.iter().take(2) {
        bind(&c, s(pod, "/metadata/name"), "n1");
        bound.insert(s(pod, "/metadata/name").to_string());
    }
    let (code, body) = c.request(
        "PATCH",
        &format!("{RSS}/web"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":2}}"#,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(names(&active_pods(&c, "web", 2)), bound);
    let rs = wait_for("status after scaling down", || {
        let (_, rs) = c.get(&format!("{RSS}/web"));
        (rs.pointer("/status/observedGeneration") == Some(&json!(2))
            && rs.pointer("/status/readyReplicas") == Some(&json!(2)))
        .then_some(rs)
    });
    assert_eq!(
        rs.get("status"),
        Some(
            &json!({"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2,
            "availableReplicas": 2, "observedGeneration": 2})
        )
    );
}

#[test]
fn a_deleted_pod_is_replaced() {
    let c = cluster(false);
    create(&c, RSS, replicaset("web", 2));
    let before = names(&active_pods(&c, "web", 2));
    let gone = before.iter().next().cloned().unwrap_or_default();
    delete(&c, &format!("{PODS}/{gone}"), json!({}));
    let after = wait_for("a replacement pod", || {
        let now = names(&active_pods(&c, "web", 2));
        (!now.contains(&gone)).then_some(now)
    });
    assert_eq!(
        after.intersection(&before).count(),
        1,
        "{after:?} {before:?}"
    );
}

#[test]
fn an_orphan_the_selector_selects_is_adopted() {
    let c = cluster(false);
    create(
        &c,
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "stray", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}),
    );
    let other = create(
        &c,
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "other", "labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}),
    );
    create(&c, RSS, replicaset("web", 2));
    let pods = active_pods(&c, "web", 2);
    let stray = pods
        .iter()
        .find(|p| s(p, "/metadata/name") == "stray")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        stray
            .pointer("/metadata/ownerReferences")
            .map(|_| masked(&stray)["metadata"]["ownerReferences"].clone()),
        Some(json!([owner("web")]))
    );
    let (_, other_now) = c.get(&format!("{PODS}/other"));
    assert_eq!(
        other_now.pointer("/metadata/ownerReferences"),
        other.pointer("/metadata/ownerReferences")
    );
}

#[test]
fn deleting_a_replicaset_deletes_its_pods_in_the_background() {
    let c = cluster(false);
    create(&c, RSS, replicaset("web", 2));
    active_pods(&c, "web", 2);
    let (code, body) = c.request("DELETE", &format!("{RSS}/web"), None, "");
    assert_eq!(code, 200, "{body}");
    let (code, _) = c.get(&format!("{RSS}/web"));
    assert_eq!(code, 404, "the owner goes at once");
    wait_for("the pods gone", || pods(&c, "web").is_empty().then_some(()));
}

#[test]
fn orphan_propagation_keeps_the_pods_without_owner_references() {
    let c = cluster(false);
    create(&c, RSS, replicaset("web", 2));
    let made = names(&active_pods(&c, "web", 2));
    delete(
        &c,
        &format!("{RSS}/web"),
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}),
    );
    wait_for("the replicaset gone", || {
        (c.get(&format!("{RSS}/web")).0 == 404).then_some(())
    });
    let kept = pods(&c, "web");
    assert_eq!(names(&kept), made);
    assert_eq!(
        kept.iter()
            .map(|p| p.pointer("/metadata/ownerReferences").cloned())
            .collect::<Vec<_>>(),
        vec![None, None]
    );
}

#[test]
fn foreground_propagation_keeps_the_owner_until_blocking_dependents_are_gone() {
    let c = cluster(false);
    node(&c, "n1");
    create(&c, RSS, replicaset("web", 2));
    let made = active_pods(&c, "web", 2);
    for pod in &made {
        bind(&c, s(pod, "/metadata/name"), "n1");
    }
    delete(
        &c,
        &format!("{RSS}/web?propagationPolicy=Foreground"),
        json!({}),
    );
    // Bound pods are deleted gracefully; with no kubelet they stay terminating.
    wait_for("the pods terminating", || {
        pods(&c, "web").iter().all(|p| !active(p)).then_some(())
    });
    let (code, owner_now) = c.get(&format!("{RSS}/web"));
    assert_eq!(code, 200, "{owner_now}");
    assert_eq!(
        (
            owner_now.pointer("/metadata/finalizers"),
            owner_now.pointer("/metadata/deletionTimestamp").is_some()
        ),
        (Some(&json!(["foregroundDeletion"])), true)
    );
    for pod in &made {
        delete(
            &c,
            &format!("{PODS}/{}", s(pod, "/metadata/name")),
            json!({"gracePeriodSeconds": 0}),
        );
    }
    wait_for("the replicaset gone", || {
        (c.get(&format!("{RSS}/web")).0 == 404).then_some(())
    });
}

#[test]
fn scale_subresource_reads_and_writes_spec_replicas() {
    let c = cluster(false);
    create(&c, RSS, replicaset("web", 2));
    active_pods(&c, "web", 2);
    let scale = wait_for("status.replicas 2 in the Scale", || {
        let (code, scale) = c.get(&format!("{RSS}/web/scale"));
        assert_eq!(code, 200, "{scale}");
        (scale.pointer("/status/replicas") == Some(&json!(2))).then_some(scale)
    });
    assert_eq!(
        masked(&scale),
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "NAME", "namespace": "default", "uid": "UID",
                         "resourceVersion": "RV", "creationTimestamp": "TIME"},
            "spec": {"replicas": 2}, "status": {"replicas": 2, "selector": "app=web"}})
    );
    let (code, body) = c.request(
        "PATCH",
        &format!("{RSS}/web/scale"),
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":4}}"#,
    );
    assert_eq!(
        (code, body.pointer("/spec/replicas")),
        (200, Some(&json!(4)))
    );
    active_pods(&c, "web", 4);
    let (code, body) = c.request(
        "PUT",
        &format!("{RSS}/web/scale"),
        Some("application/json"),
        r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web"},"spec":{"replicas":-1}}"#,
    );
    assert_eq!(
        (code, body.get("message")),
        (
            422,
            Some(&json!(
                "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
            ))
        )
    );
}

#[test]
fn kubectl_scales_lists_and_deletes_replicasets_in_the_foreground_and_orphaning() {
    let c = cluster(true);
    node(&c, "n1");
    let f = c.file(
        "rs.yaml",
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  \
         selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        \
         app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx:1.27\n",
    );
    c.kubectl_ok(&["apply", "-f", &f]);
    active_pods(&c, "web", 3);
    assert_eq!(
        c.kubectl_ok(&["scale", "rs", "web", "--replicas=1"]),
        "replicaset.apps/web scaled\n"
    );
    for pod in active_pods(&c, "web", 1) {
        bind(&c, s(&pod, "/metadata/name"), "n1");
    }
    wait_for("ready 1", || {
        let (_, rs) = c.get(&format!("{RSS}/web"));
        (rs.pointer("/status/readyReplicas") == Some(&json!(1))
            && rs.pointer("/status/replicas") == Some(&json!(1)))
        .then_some(())
    });
    let out = c.kubectl_ok(&[
        "get",
        "rs",
        "-o",
        "custom-columns=NAME:.metadata.name,DESIRED:.spec.replicas,READY:.status.readyReplicas",
    ]);
    assert_eq!(out, "NAME   DESIRED   READY\nweb    1         1\n");
    let table = c.kubectl_ok(&["get", "rs", "-o", "wide", "--no-headers"]);
    let cells: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(
        (cells.len(), cells.first(), cells.get(1..4), cells.get(5..)),
        (
            8,
            Some(&"web"),
            Some(&["1", "1", "1"][..]),
            Some(&["c", "nginx:1.27", "app=web"][..])
        ),
        "{table}"
    );
    // kubectl waits for the ReplicaSet to go, which under foreground deletion is after its
    // pods.
    assert_eq!(
        c.kubectl_ok(&["delete", "rs", "web", "--cascade=foreground"]),
        "replicaset.apps \"web\" deleted from default namespace\n"
    );
    assert_eq!(pods(&c, "web"), Vec::<Value>::new());
    create(&c, RSS, replicaset("keep", 1));
    let kept = names(&active_pods(&c, "keep", 1));
    c.kubectl_ok(&["delete", "rs", "keep", "--cascade=orphan"]);
    let left = wait_for("the pod released", || {
        let left = pods(&c, "keep");
        left.iter()
            .all(|p| p.pointer("/metadata/ownerReferences").is_none())
            .then_some(left)
    });
    assert_eq!(names(&left), kept);
}

/// A dependent created with an owner that does not exist is deleted; one with another
/// owner left only loses the reference (upstream's attemptToDeleteItem).
#[test]
fn references_to_owners_that_do_not_exist_are_collected() {
    let c = cluster(false);
    let rs = create(&c, RSS, replicaset("keeper", 0));
    let keeper = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "keeper",
                        "uid": s(&rs, "/metadata/uid")});
    let ghost = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost",
                       "uid": "00000000-0000-0000-0000-000000000000"});
    let config_map = |name: &str, owners: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "ownerReferences": owners}})
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    create(&c, cms, config_map("orphaned", json!([ghost.clone()])));
    create(
        &c,
        cms,
        config_map("shared", json!([ghost, keeper.clone()])),
    );
    wait_for("the dependent with no owner left deleted", || {
        (c.get(&format!("{cms}/orphaned")).0 == 404).then_some(())
    });
    let shared = wait_for("the dangling reference removed", || {
        let (_, cm) = c.get(&format!("{cms}/shared"));
        (cm.pointer("/metadata/ownerReferences/1").is_none()).then_some(cm)
    });
    assert_eq!(
        shared.pointer("/metadata/ownerReferences"),
        Some(&json!([keeper]))
    );
}

/// The controllers are driven by the stored objects, not by events seen before: a
/// ReplicaSet stored by a server without them gets its pods from the next server on the same
/// data dir, and a pod whose owner was deleted meanwhile is collected.
#[test]
fn objects_stored_before_a_restart_are_reconciled_after_it() {
    let dir = tempfile::tempdir().expect("data dir");
    {
        let c = Cluster::with_config(Config {
            data_dir: Some(dir.path().to_path_buf()),
            ..Config::default()
        });
        create(&c, RSS, replicaset("web", 2));
        let gone = create(&c, RSS, replicaset("gone", 1));
        create(
            &c,
            PODS,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "left", "labels": {"app": "gone"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "gone", "uid": s(&gone, "/metadata/uid"), "controller": true}]},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}),
        );
        let (code, body) = c.request("DELETE", &format!("{RSS}/gone"), None, "");
        assert_eq!(code, 200, "{body}");
    }
    let c = Cluster::with_config(Config {
        data_dir: Some(dir.path().to_path_buf()),
        workload_controllers: true,
        ..Config::default()
    });
    active_pods(&c, "web", 2);
    wait_for("the pod of the deleted owner collected", || {
        pods(&c, "gone").is_empty().then_some(())
    });
}

#[test]
fn an_unknown_propagation_policy_is_refused_and_orphan_dependents_means_orphan() {
    let c = cluster(false);
    create(&c, RSS, replicaset("web", 1));
    let made = names(&active_pods(&c, "web", 1));
    for (case, query, body, want) in [
        (
            "unknown policy in the body",
            "",
            r#"{"propagationPolicy":"Sideways"}"#,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
        ),
        (
            "unknown policy in the query",
            "?propagationPolicy=Sideways",
            "",
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
        ),
        (
            "policy and orphanDependents both",
            "",
            r#"{"propagationPolicy":"Orphan","orphanDependents":true}"#,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set",
        ),
    ] {
        let (code, status) = c.request(
            "DELETE",
            &format!("{RSS}/web{query}"),
            Some("application/json"),
            body,
        );
        assert_eq!(
            (code, s(&status, "/message")),
            (422, want),
            "{case}: {status}"
        );
    }
    delete(&c, &format!("{RSS}/web"), json!({"orphanDependents": true}));
    wait_for("the replicaset gone", || {
        (c.get(&format!("{RSS}/web")).0 == 404).then_some(())
    });
    let kept = wait_for("the pod released", || {
        let kept = pods(&c, "web");
        kept.iter()
            .all(|p| p.pointer("/metadata/ownerReferences").is_none())
            .then_some(kept)
    });
    assert_eq!(names(&kept), made);
}

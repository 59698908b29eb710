//! The local cluster's workloads end to end with real kubectl, as a new user would meet them:
//! `kubectl create deployment` and `kubectl create job` (protobuf bodies), a DaemonSet and a
//! StatefulSet applied, `kubectl get all`, and everything still driven by its controller after
//! `kubesched up` is killed and started again on the same `--data-dir`.
//!
//! Every wait is a bounded poll or a kubectl `--timeout`.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::support::{kubectl_ok, node_yaml, up, wait_for, Scratch};

const IMAGE: &str = "registry.k8s.io/pause:3.10";

/// `kubectl rollout status` succeeds (kubectl exits non-zero on a timeout or a failed
/// rollout).
fn rollout_status(kubeconfig: &Path, what: &str) {
    kubectl_ok(kubeconfig, &["rollout", "status", what, "--timeout=60s"]);
}

fn job_complete(kubeconfig: &Path, job: &str) {
    let out = kubectl_ok(
        kubeconfig,
        &[
            "wait",
            "--for=condition=complete",
            &format!("job/{job}"),
            "--timeout=60s",
        ],
    );
    assert_eq!(out, format!("job.batch/{job} condition met\n"));
}

/// The first `n` columns of `kubectl get <what> --no-headers`.
fn row(kubeconfig: &Path, what: &[&str], n: usize) -> Vec<String> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.push("--no-headers");
    kubectl_ok(kubeconfig, &args)
        .split_whitespace()
        .take(n)
        .map(String::from)
        .collect()
}

/// The NAME column of `kubectl get all` without the random pod and ReplicaSet suffixes:
/// `kind/name` for the named objects, `kind` alone for the generated ones.
fn get_all(kubeconfig: &Path) -> BTreeSet<String> {
    kubectl_ok(kubeconfig, &["get", "all", "--no-headers"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|name| match name.split_once('/') {
            Some(("pod", pod)) if pod.starts_with("db-") => name.to_string(),
            Some((kind @ ("pod" | "replicaset.apps"), _)) => kind.to_string(),
            _ => name.to_string(),
        })
        .collect()
}

#[test]
fn workloads_created_with_kubectl_run_and_keep_running_across_a_data_dir_restart() {
    let scratch = Scratch::new("workloads");
    let data = scratch.path("data");
    let data = data.to_string_lossy().into_owned();
    let manifest = scratch.path("sets.yaml");
    let sets = format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: agent}}\nspec:\n  \
         selector: {{matchLabels: {{app: agent}}}}\n  template:\n    \
         metadata: {{labels: {{app: agent}}}}\n    spec:\n      containers:\n      \
         - {{name: c, image: {IMAGE}}}\n---\n\
         apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db}}\nspec:\n  \
         replicas: 2\n  serviceName: db\n  selector: {{matchLabels: {{app: db}}}}\n  \
         template:\n    metadata: {{labels: {{app: db}}}}\n    spec:\n      containers:\n      \
         - {{name: c, image: {IMAGE}}}\n"
    );
    std::fs::write(
        &manifest,
        [
            node_yaml("n1", "8", &[], None),
            node_yaml("n2", "8", &[], None),
            sets,
        ]
        .join("---\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let manifest = manifest.to_string_lossy().into_owned();

    let (first, kubeconfig, _) = up(&scratch, &["--data-dir", &data]);
    assert_eq!(
        kubectl_ok(
            &kubeconfig,
            &[
                "create",
                "deployment",
                "web",
                "--image",
                IMAGE,
                "--replicas=2"
            ]
        ),
        "deployment.apps/web created\n"
    );
    assert_eq!(
        kubectl_ok(&kubeconfig, &["create", "job", "pi", "--image", IMAGE]),
        "job.batch/pi created\n"
    );
    kubectl_ok(&kubeconfig, &["apply", "-f", &manifest]);
    rollout_status(&kubeconfig, "deployment/web");
    rollout_status(&kubeconfig, "daemonset/agent");
    rollout_status(&kubeconfig, "statefulset/db");
    job_complete(&kubeconfig, "pi");
    let all: BTreeSet<String> = [
        "pod",
        "pod/db-0",
        "pod/db-1",
        "replicaset.apps",
        "deployment.apps/web",
        "daemonset.apps/agent",
        "statefulset.apps/db",
        "job.batch/pi",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(get_all(&kubeconfig), all);

    // Killed (SIGKILL) and started again on the same data: every controller picks up.
    drop(first);
    let (_second, kubeconfig, _) = up(&scratch, &["--data-dir", &data]);
    kubectl_ok(&kubeconfig, &["scale", "deployment/web", "--replicas=3"]);
    kubectl_ok(&kubeconfig, &["scale", "statefulset/db", "--replicas=3"]);
    let n3 = scratch.path("n3.yaml");
    std::fs::write(&n3, node_yaml("n3", "8", &[], None)).unwrap_or_else(|e| panic!("{e}"));
    kubectl_ok(&kubeconfig, &["apply", "-f", &n3.to_string_lossy()]);
    kubectl_ok(&kubeconfig, &["create", "job", "pi2", "--image", IMAGE]);
    rollout_status(&kubeconfig, "deployment/web");
    rollout_status(&kubeconfig, "statefulset/db");
    job_complete(&kubeconfig, "pi2");
    assert_eq!(
        row(&kubeconfig, &["deployment", "web"], 4),
        ["web", "3/3", "3", "3"]
    );
    assert_eq!(row(&kubeconfig, &["statefulset", "db"], 2), ["db", "3/3"]);
    let ds = wait_for(Duration::from_secs(60), "a daemon pod on n3 too", || {
        let r = row(&kubeconfig, &["daemonset", "agent"], 6);
        (r.get(5).map(String::as_str) == Some("3")).then_some(r)
    });
    assert_eq!(ds, ["agent", "3", "3", "3", "3", "3"]);
    assert_eq!(
        row(&kubeconfig, &["job", "pi2"], 3),
        ["pi2", "Complete", "1/1"]
    );

    // The garbage collector also works from the restored owner index.
    kubectl_ok(&kubeconfig, &["delete", "deployment", "web"]);
    wait_for(
        Duration::from_secs(60),
        "web's ReplicaSet and pods gone",
        || {
            let left = kubectl_ok(
                &kubeconfig,
                &["get", "rs,pods", "-l", "app=web", "-o", "name"],
            );
            left.trim().is_empty().then_some(())
        },
    );
}

//! Real kubectl 1.37 against the server, through a kubeconfig in a temp dir.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Cluster, Lines};

const NODE: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {node-role.kubernetes.io/worker: ""}
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 10.0.0.1}]
  nodeInfo: {kubeletVersion: v1.37.0, osImage: Debian GNU/Linux 12, kernelVersion: 6.1.0, containerRuntimeVersion: "containerd://2.0.0"}
"#;

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: p1}
spec:
  containers:
  - name: c
    image: nginx:1
    resources: {requests: {cpu: 100m}}
"#;

#[test]
fn get_nodes_and_pods_wide_shows_the_server_side_columns() {
    let c = Cluster::start();
    let f = c.file("objs.yaml", &format!("{NODE}---\n{POD}"));
    let out = c.kubectl_ok(&["create", "-f", &f]);
    assert!(
        out.contains("node/node-1 created") && out.contains("pod/p1 created"),
        "{out}"
    );
    let out = c.kubectl_ok(&["get", "nodes,pods", "-o", "wide"]);
    let node_line = out
        .lines()
        .find(|l| l.starts_with("node/node-1"))
        .unwrap_or("");
    for want in [
        "Ready",
        "worker",
        "v1.37.0",
        "10.0.0.1",
        "Debian GNU/Linux 12",
        "containerd://2.0.0",
    ] {
        assert!(node_line.contains(want), "{want} missing in {out}");
    }
    let pod_line = out.lines().find(|l| l.starts_with("pod/p1")).unwrap_or("");
    assert!(
        pod_line.contains("0/1") && pod_line.contains("Pending"),
        "{out}"
    );
    assert!(out.contains("NOMINATED NODE"), "{out}");
}

#[test]
fn create_of_an_existing_object_prints_already_exists() {
    let c = Cluster::start();
    let f = c.file("pod.yaml", POD);
    c.kubectl_ok(&["create", "-f", &f]);
    let out = c.kubectl(&["create", "-f", &f]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error from server (AlreadyExists)")
            && err.contains("pods \"p1\" already exists"),
        "{err}"
    );
}

#[test]
fn apply_creates_then_modifies_by_strategic_merge() {
    let c = Cluster::start();
    let f = c.file("pod.yaml", POD);
    assert!(c
        .kubectl_ok(&["apply", "-f", &f])
        .contains("pod/p1 created"));
    let f = c.file("pod.yaml", &POD.replace("nginx:1", "nginx:2"));
    assert!(c
        .kubectl_ok(&["apply", "-f", &f])
        .contains("pod/p1 configured"));
    assert!(c
        .kubectl_ok(&["apply", "-f", &f])
        .contains("pod/p1 unchanged"));
    let image = c.kubectl_ok(&["get", "pod", "p1", "-o", "jsonpath={.spec.containers[0].image} {.spec.containers[0].resources.requests.cpu} {.spec.schedulerName}"]);
    assert_eq!(image, "nginx:2 100m default-scheduler");
}

#[test]
fn apply_server_side_creates_then_updates() {
    let c = Cluster::start();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm1}\ndata: {a: \"1\"}\n";
    let f = c.file("cm.yaml", cm);
    assert!(c
        .kubectl_ok(&["apply", "--server-side", "-f", &f])
        .contains("serverside-applied"));
    let f = c.file("cm.yaml", &cm.replace("\"1\"", "\"2\""));
    c.kubectl_ok(&["apply", "--server-side", "-f", &f]);
    assert_eq!(
        c.kubectl_ok(&["get", "cm", "cm1", "-o", "jsonpath={.data.a}"]),
        "2"
    );
}

#[test]
fn label_then_select_by_label() {
    let c = Cluster::start();
    let f = c.file("pod.yaml", POD);
    c.kubectl_ok(&["create", "-f", &f]);
    assert!(c
        .kubectl_ok(&["label", "pod", "p1", "zone=a"])
        .contains("pod/p1 labeled"));
    assert_eq!(
        c.kubectl_ok(&["get", "pods", "-l", "zone=a", "-o", "name"])
            .trim(),
        "pod/p1"
    );
    assert_eq!(
        c.kubectl_ok(&["get", "pods", "-l", "zone in (b,c)", "-o", "name"])
            .trim(),
        ""
    );
    let out = c.kubectl_ok(&["get", "pods", "--show-labels"]);
    assert!(
        out.contains("zone=a"),
        "row.object carries the labels: {out}"
    );
}

#[test]
fn cordon_taint_and_uncordon_a_node() {
    let c = Cluster::start();
    let f = c.file("node.yaml", NODE);
    c.kubectl_ok(&["create", "-f", &f]);
    c.kubectl_ok(&["cordon", "node-1"]);
    assert!(c
        .kubectl_ok(&["get", "node", "node-1"])
        .contains("Ready,SchedulingDisabled"));
    c.kubectl_ok(&["taint", "nodes", "node-1", "k=v:NoSchedule"]);
    assert_eq!(
        c.kubectl_ok(&[
            "get",
            "node",
            "node-1",
            "-o",
            "jsonpath={.spec.taints[0].key}"
        ]),
        "k"
    );
    c.kubectl_ok(&["taint", "nodes", "node-1", "k=v:NoSchedule-"]);
    c.kubectl_ok(&["uncordon", "node-1"]);
    assert_eq!(
        c.kubectl_ok(&["get", "node", "node-1", "-o", "jsonpath={.spec}"]),
        "{}"
    );
}

#[test]
fn get_watch_prints_a_pod_created_after_it_started() {
    let c = Cluster::start();
    let first = c.file("p0.yaml", &POD.replace("name: p1", "name: p0"));
    c.kubectl_ok(&["create", "-f", &first]);
    let mut child = c
        .kubectl_command(&["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w starts");
    let out = Lines::of(child.stdout.take().expect("stdout"));
    // p0 comes from the list, so once it is printed the watch is (about to be) open; p1 can
    // then only arrive as a watch event.
    let listed = out.wait_for("p0", Duration::from_secs(30));
    let f = c.file("pod.yaml", POD);
    c.kubectl_ok(&["create", "-f", &f]);
    let seen = out.wait_for("p1", Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        listed.is_some(),
        "kubectl get -w did not print the listed pod"
    );
    let line = seen.expect("kubectl get -w printed the pod created during the watch");
    assert!(line.contains("Pending"), "{line}");
}

/// A bound pod is deleted gracefully; the kubelet stand-in finishes the deletion, so kubectl
/// (which waits for the pod to disappear) returns promptly.
#[test]
fn delete_returns_promptly() {
    let c = Cluster::with_config(apiserver::Config {
        simulate_kubelets: true,
        ..apiserver::Config::default()
    });
    let f = c.file(
        "pod.yaml",
        &POD.replace("spec:\n", "spec:\n  nodeName: node-1\n"),
    );
    c.kubectl_ok(&["create", "-f", &f]);
    let start = Instant::now();
    let out = c.kubectl_ok(&["delete", "pod", "p1"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "delete took {:?}",
        start.elapsed()
    );
    let err = String::from_utf8_lossy(&c.kubectl(&["get", "pod", "p1"]).stderr).into_owned();
    assert!(err.contains("NotFound"), "{err}");
}

#[test]
fn describe_pod_shows_its_events() {
    let c = Cluster::start();
    let f = c.file("pod.yaml", POD);
    c.kubectl_ok(&["create", "-f", &f]);
    let uid = c.kubectl_ok(&["get", "pod", "p1", "-o", "jsonpath={.metadata.uid}"]);
    let ev = format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: p1.1}}\ninvolvedObject: {{kind: Pod, name: p1, namespace: default, uid: {uid}, apiVersion: v1}}\nreason: Scheduled\nmessage: Successfully assigned default/p1 to node-1\ntype: Normal\nsource: {{component: kubesched}}\nfirstTimestamp: \"2026-01-01T00:00:00Z\"\nlastTimestamp: \"2026-01-01T00:00:00Z\"\ncount: 1\n"
    );
    let f = c.file("ev.yaml", &ev);
    c.kubectl_ok(&["create", "-f", &f]);
    let out = c.kubectl_ok(&["describe", "pod", "p1"]);
    assert!(
        out.contains("Scheduled") && out.contains("Successfully assigned default/p1 to node-1"),
        "{out}"
    );
    assert!(
        out.contains("QoS Class:") && out.contains("Burstable"),
        "{out}"
    );
}

#[test]
fn drain_ignoring_daemonsets_removes_the_nodes_pods() {
    // Evicted pods terminate gracefully: the kubelet stand-in finishes them.
    let c = Cluster::with_config(apiserver::Config {
        simulate_kubelets: true,
        ..apiserver::Config::default()
    });
    let pod = POD.replace("spec:\n", "spec:\n  nodeName: node-1\n");
    let f = c.file("objs.yaml", &format!("{NODE}---\n{pod}"));
    c.kubectl_ok(&["create", "-f", &f]);
    let out = c.kubectl_ok(&[
        "drain",
        "node-1",
        "--ignore-daemonsets",
        "--force",
        "--timeout=30s",
    ]);
    assert!(out.contains("drained"), "{out}");
    assert_eq!(c.kubectl_ok(&["get", "pods", "-o", "name"]).trim(), "");
    assert!(c
        .kubectl_ok(&["get", "node", "node-1"])
        .contains("SchedulingDisabled"));
}

#[test]
fn create_generators_send_protobuf_that_the_server_decodes() {
    let c = Cluster::start();
    assert!(c
        .kubectl_ok(&["create", "namespace", "team-a"])
        .contains("namespace/team-a created"));
    c.kubectl_ok(&[
        "create",
        "configmap",
        "cm1",
        "-n",
        "team-a",
        "--from-literal=a=1",
    ]);
    c.kubectl_ok(&["create", "priorityclass", "high", "--value=1000"]);
    let ns = c.kubectl_ok(&[
        "get",
        "ns",
        "team-a",
        "-o",
        "jsonpath={.status.phase} {.metadata.labels}",
    ]);
    assert_eq!(ns, r#"Active {"kubernetes.io/metadata.name":"team-a"}"#);
    assert_eq!(
        c.kubectl_ok(&[
            "get",
            "cm",
            "cm1",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "1"
    );
    // Priority admission resolves the new class for a pod naming it.
    let pod = POD.replace("spec:\n", "spec:\n  priorityClassName: high\n");
    let f = c.file("pod.yaml", &pod);
    c.kubectl_ok(&["create", "-f", &f]);
    assert_eq!(
        c.kubectl_ok(&["get", "pod", "p1", "-o", "jsonpath={.spec.priority}"]),
        "1000"
    );
}

#[test]
fn create_with_an_unknown_field_is_a_strict_decoding_error() {
    let c = Cluster::start();
    let f = c.file(
        "pod.yaml",
        &POD.replace(
            "image: nginx:1",
            "image: nginx:1\n    imagePullPolicyy: Always",
        ),
    );
    let out = c.kubectl(&["create", "-f", &f]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "strict decoding error: unknown field \"spec.containers[0].imagePullPolicyy\""
        ),
        "{err}"
    );
    // --validate=warn sends fieldValidation=Warn: created, with a warning kubectl prints.
    let out = c.kubectl(&["create", "--validate=warn", "-f", &f]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Warning: unknown field \"spec.containers[0].imagePullPolicyy\""),
        "{err}"
    );
    // --validate=false sends fieldValidation=Ignore.
    c.kubectl_ok(&["delete", "pod", "p1"]);
    c.kubectl_ok(&["create", "--validate=false", "-f", &f]);
}

#[test]
fn a_token_is_required_and_clients_with_it_get_through() {
    let c = Cluster::with_config(apiserver::Config {
        tokens: vec!["s3cret-token".into()],
        ..apiserver::Config::default()
    });
    let written = std::fs::read_to_string(c.kubeconfig()).expect("kubeconfig");
    assert!(written.contains("token: \"s3cret-token\""), "{written}");
    // Without a token: upstream's 401 Status.
    let unauthorized = serde_json::json!({"kind": "Status", "apiVersion": "v1",
        "metadata": {}, "status": "Failure", "message": "Unauthorized",
        "reason": "Unauthorized", "code": 401});
    assert_eq!(
        c.get("/api/v1/namespaces/default/pods"),
        (401, unauthorized.clone())
    );
    // With a wrong one too.
    let (code, _) = c.request_with_headers(
        "GET",
        "/api/v1/namespaces/default/pods",
        "Authorization: Bearer wrong\r\n",
    );
    assert_eq!(code, 401);
    let (code, _) = c.request_with_headers(
        "GET",
        "/api/v1/namespaces/default/pods",
        "Authorization: Bearer s3cret-token\r\n",
    );
    assert_eq!(code, 200);
    // kube-rs through the written kubeconfig sends the token and gets through.
    let client = c.kube_client_from_kubeconfig(&written);
    let names = c.block_on(async {
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        api.list(&Default::default())
            .await
            .expect("list with the token")
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect::<Vec<_>>()
    });
    assert!(names.contains(&"default".to_string()), "{names:?}");
    // kubectl (client-go) sends kubeconfig credentials only over TLS (kubernetes/kubectl#744):
    // over plain HTTP it reaches the server without the token and is refused.
    let out = c.kubectl(&["get", "pods"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("provide credentials"),
        "{stderr}"
    );
    // Health and version stay public, as upstream's system:public-info-viewer allows.
    assert_eq!(c.get("/healthz").0, 200);
    assert_eq!(c.get("/livez").0, 200);
    assert_eq!(c.get("/version").0, 200);
}

/// kubectl sends bearer tokens only over TLS: with `--tls-cert-file` it gets through with the
/// kubeconfig's token, verifying the server against the kubeconfig's
/// certificate-authority-data, and a wrong token is a 401 that kubectl reports.
#[test]
fn kubectl_and_kube_rs_use_the_token_over_tls_and_a_wrong_token_is_refused() {
    let tls = crate::harness::test_tls();
    let ca = tls.cert_pem().to_vec();
    let c = Cluster::with_config(apiserver::Config {
        tokens: vec!["s3cret-token".into()],
        tls: Some(tls),
        ..apiserver::Config::default()
    });
    let written = std::fs::read_to_string(c.kubeconfig()).expect("kubeconfig");
    assert!(c.url.starts_with("https://127.0.0.1:"), "{}", c.url);
    assert!(
        written.contains(&format!(
            "server: {}\n    certificate-authority-data: ",
            c.url
        )),
        "{written}"
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers: [{name: c, image: nginx:1}]\n";
    c.kubectl_ok(&["create", "-f", &c.file("pod.yaml", pod)]);
    let out = c.kubectl_ok(&["get", "pods", "-o", "name"]);
    assert_eq!(out, "pod/p1\n");
    // A wrong token over TLS: 401, which kubectl reports as an authentication failure.
    let wrong = c.dir.path().join("wrong-token");
    std::fs::write(
        &wrong,
        apiserver::write_kubeconfig(&c.url, Some("wrong"), Some(&ca)),
    )
    .expect("kubeconfig");
    let out = c
        .kubectl_command_with(&wrong, &["get", "pods"])
        .output()
        .expect("kubectl runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("You must be logged in to the server (Unauthorized)"),
        "{stderr}"
    );
    // Without the certificate authority kubectl refuses the self-signed certificate.
    let no_ca = c.dir.path().join("no-ca");
    std::fs::write(
        &no_ca,
        apiserver::write_kubeconfig(&c.url, Some("s3cret-token"), None),
    )
    .expect("kubeconfig");
    let out = c
        .kubectl_command_with(&no_ca, &["get", "pods"])
        .output()
        .expect("kubectl runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("certificate"),
        "{stderr}"
    );
    // kube-rs (rustls, ring) through the written kubeconfig: typed list and a watch event.
    let client = c.kube_client_from_kubeconfig(&written);
    let (names, first_event) = c.block_on(async {
        use futures_util::StreamExt as _;
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, "default");
        let names: Vec<String> = pods
            .list(&Default::default())
            .await
            .expect("list over TLS")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let mut events = std::pin::pin!(kube::runtime::watcher(
            pods,
            kube::runtime::watcher::Config::default()
        ));
        let first = tokio::time::timeout(std::time::Duration::from_secs(20), events.next())
            .await
            .ok()
            .flatten()
            .map(|e| format!("{:?}", e.map(|_| ()).is_ok()));
        (names, first)
    });
    assert_eq!(
        (names, first_event),
        (vec!["p1".to_string()], Some("true".to_string()))
    );
}

#[test]
fn simulated_kubelets_make_nodes_ready_and_bound_pods_running() {
    let c = Cluster::with_config(apiserver::Config {
        simulate_kubelets: true,
        ..apiserver::Config::default()
    });
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus:\n  addresses: [{type: InternalIP, address: 10.0.0.1}]\n";
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  nodeName: node-1\n  containers: [{name: c, image: nginx:1}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: unbound}\nspec:\n  containers: [{name: c, image: nginx:1}]\n";
    c.kubectl_ok(&[
        "create",
        "-f",
        &c.file("objs.yaml", &format!("{node}---\n{pod}")),
    ]);
    let out = c.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/p1",
        "node/node-1",
        "--timeout=20s",
    ]);
    assert!(out.contains("pod/p1 condition met"), "{out}");
    let out = c.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    // NAME READY STATUS RESTARTS AGE IP NODE …
    let p1 = line("p1");
    assert_eq!(
        (p1.get(1), p1.get(2), p1.get(6)),
        (Some(&"1/1"), Some(&"Running"), Some(&"node-1")),
        "{out}"
    );
    assert!(
        p1.get(5).is_some_and(|ip| ip.starts_with("10.244.")),
        "{out}"
    );
    assert_eq!(line("unbound").get(2), Some(&"Pending"), "{out}");
    let nodes = c.kubectl_ok(&["get", "nodes"]);
    assert!(nodes.contains(" Ready "), "{nodes}");
    // Deleting a running pod returns and the pod is gone.
    c.kubectl_ok(&["delete", "pod", "p1", "--timeout=20s"]);
    assert!(!c.kubectl_ok(&["get", "pods"]).contains("p1"));
}

/// kubectl asks for lists in chunks of 500 (`--chunk-size`) and follows `continue`.
#[test]
fn kubectl_gets_more_than_500_pods_in_chunks() {
    let c = Cluster::start();
    c.seed_pods("default", 1201);
    let count = |args: &[&str]| c.kubectl_ok(args).lines().count();
    // -v=6 logs each request: the second and third chunks ask with the token.
    let logged = c.kubectl(&["get", "pods", "-o", "name", "-v=6"]);
    let requests = String::from_utf8_lossy(&logged.stderr)
        .lines()
        .filter(|l| l.contains("/pods?") && l.contains("limit=500"))
        .map(|l| l.contains("continue="))
        .collect::<Vec<_>>();
    assert_eq!(requests, [false, true, true]);
    assert_eq!(
        (
            count(&["get", "pods", "-o", "name"]),
            count(&["get", "pods", "--no-headers"]),
            count(&["get", "pods", "-A", "--chunk-size=100", "--no-headers"]),
        ),
        (1201, 1201, 1201)
    );
}

/// Without a kubelet, a deleted bound pod stays Terminating (deletionTimestamp, its grace
/// period) until a delete with grace period 0; an unbound pod goes at once.
#[test]
fn a_deleted_bound_pod_stays_terminating_without_a_kubelet() {
    let c = Cluster::start();
    let bound = POD.replace(
        "spec:\n",
        "spec:\n  nodeName: node-1\n  terminationGracePeriodSeconds: 45\n",
    );
    let unbound = POD.replace("name: p1", "name: p2");
    c.kubectl_ok(&[
        "create",
        "-f",
        &c.file("pods.yaml", &format!("{bound}---\n{unbound}")),
    ]);
    let out = c.kubectl_ok(&["delete", "pod", "p1", "p2", "--wait=false"]);
    assert_eq!(
        out,
        "pod \"p1\" deleted from default namespace\npod \"p2\" deleted from default namespace\n"
    );
    let marked = c.kubectl_ok(&[
        "get",
        "pod",
        "p1",
        "-o",
        "jsonpath={.metadata.deletionGracePeriodSeconds} {.metadata.deletionTimestamp}",
    ]);
    let listed = c.kubectl_ok(&["get", "pods", "--no-headers"]);
    // kubectl sends gracePeriodSeconds=0 only with --force.
    c.kubectl_ok(&["delete", "pod", "p1", "--grace-period=0", "--force"]);
    let after = c.kubectl_ok(&["get", "pods", "-o", "name"]);
    let (grace, deadline) = marked.split_once(' ').unwrap_or_default();
    let in_secs = -apiserver::meta::age_seconds(deadline).unwrap_or(0);
    assert_eq!(
        (
            grace,
            (44..=46).contains(&in_secs),
            listed
                .split_whitespace()
                .collect::<Vec<_>>()
                .get(..3)
                .map(<[_]>::to_vec),
            after
        ),
        (
            "45",
            true,
            Some(vec!["p1", "0/1", "Terminating"]),
            String::new()
        ),
        "{marked}"
    );
}

/// Deleting a namespace: Terminating (with deletionTimestamp) while its pods terminate,
/// creates in it refused with upstream's 403, then removed once empty.
#[test]
fn a_deleted_namespace_terminates_then_goes() {
    let c = Cluster::start();
    let bound = POD.replace("spec:\n", "spec:\n  nodeName: node-1\n");
    c.kubectl_ok(&["create", "namespace", "team"]);
    c.kubectl_ok(&["create", "-n", "team", "-f", &c.file("pod.yaml", &bound)]);
    c.kubectl_ok(&["create", "-n", "team", "configmap", "settings"]);
    c.kubectl_ok(&["delete", "namespace", "team", "--wait=false"]);
    let phase = c.kubectl_ok(&[
        "get",
        "namespace",
        "team",
        "-o",
        "jsonpath={.status.phase} {.spec.finalizers} {.metadata.deletionTimestamp}",
    ]);
    let listed = c.kubectl_ok(&["get", "namespace", "team", "--no-headers"]);
    // The configmap went at once; the bound pod waits for its kubelet.
    let left = c.kubectl_ok(&["get", "pods,configmaps", "-n", "team", "-o", "name"]);
    let refused = c.kubectl(&["create", "-n", "team", "configmap", "late"]);
    // Without a kubelet the pod goes only when forced; then the namespace goes.
    c.kubectl_ok(&[
        "delete",
        "pod",
        "p1",
        "-n",
        "team",
        "--grace-period=0",
        "--force",
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.get("/api/v1/namespaces/team").0 != 404 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let parts: Vec<&str> = phase.split(' ').collect();
    assert_eq!(
        (
            parts.get(..2).map(<[_]>::to_vec),
            parts.get(2).is_some_and(|t| !t.is_empty()),
            listed.split_whitespace().nth(1),
            left,
            String::from_utf8_lossy(&refused.stderr).trim(),
            c.get("/api/v1/namespaces/team").0,
        ),
        (
            Some(vec!["Terminating", "[\"kubernetes\"]"]),
            true,
            Some("Terminating"),
            "pod/p1\n".to_string(),
            "error: failed to create configmap: configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated",
            404
        )
    );
}

/// With the kubelet stand-in, `kubectl delete namespace` (which waits) returns promptly with
/// the namespace and its pods gone.
#[test]
fn delete_namespace_with_kubelets_returns_with_everything_gone() {
    let c = Cluster::with_config(apiserver::Config {
        simulate_kubelets: true,
        ..apiserver::Config::default()
    });
    let bound = POD.replace("spec:\n", "spec:\n  nodeName: node-1\n");
    let unbound = POD.replace("name: p1", "name: p2");
    c.kubectl_ok(&["create", "namespace", "team"]);
    c.kubectl_ok(&[
        "create",
        "-n",
        "team",
        "-f",
        &c.file("pods.yaml", &format!("{bound}---\n{unbound}")),
    ]);
    let start = Instant::now();
    let out = c.kubectl_ok(&["delete", "namespace", "team", "--timeout=20s"]);
    let err =
        String::from_utf8_lossy(&c.kubectl(&["get", "namespace", "team"]).stderr).into_owned();
    assert_eq!(
        (
            out.as_str(),
            start.elapsed() < Duration::from_secs(15),
            err.trim(),
            c.kubectl_ok(&["get", "pods", "-A", "-o", "name"]).as_str()
        ),
        (
            "namespace \"team\" deleted\n",
            true,
            "Error from server (NotFound): namespaces \"team\" not found",
            ""
        )
    );
}

/// A pod's spec is immutable but for images, activeDeadlineSeconds, added tolerations and
/// removed scheduling gates: kubectl shows upstream's 422.
#[test]
fn pod_spec_updates_are_limited_as_upstream() {
    let c = Cluster::start();
    let gated = POD.replace(
        "spec:\n",
        "spec:\n  schedulingGates: [{name: a}, {name: b}]\n",
    );
    let f = c.file("pod.yaml", &gated);
    c.kubectl_ok(&["create", "-f", &f]);
    let stderr = |args: &[&str]| {
        let out = c.kubectl(args);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Allowed: a new image, a gate removed.
    let image = stderr(&["set", "image", "pod/p1", "c=nginx:2"]);
    let ungate = stderr(&[
        "patch",
        "pod",
        "p1",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates/0"}]"#,
    ]);
    // Refused: nodeName by patch, a new container port by apply, a gate added.
    let node = stderr(&[
        "patch",
        "pod",
        "p1",
        "-p",
        r#"{"spec":{"nodeName":"node-1"}}"#,
    ]);
    let port = gated.replace("{name: a}, ", "").replace(
        "    image: nginx:1\n",
        "    image: nginx:2\n    ports: [{containerPort: 80}]\n",
    );
    let port = stderr(&["apply", "-f", &c.file("port.yaml", &port)]);
    let gate = stderr(&[
        "patch",
        "pod",
        "p1",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"c"}}]"#,
    ]);
    let now = c.kubectl_ok(&[
        "get",
        "pod",
        "p1",
        "-o",
        "jsonpath={.spec.containers[0].image} {.spec.schedulingGates[*].name} {.spec.nodeName}",
    ]);
    let forbidden = "The Pod \"p1\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";
    assert_eq!(
        (
            image.0,
            ungate.0,
            (node.0, node.1.starts_with(forbidden), node.1.contains("spec.nodeName: <none> -> \"node-1\"")),
            (port.0, port.1.contains(forbidden), port.1.contains("spec.containers[0].ports: <none> -> [{\"containerPort\":80}]")),
            gate,
            now,
        ),
        (
            true,
            true,
            (false, true, true),
            (false, true, true),
            (false, "The Pod \"p1\" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'\n".to_string()),
            "nginx:2 b ".to_string(),
        ),
        "{node:?}\n{port:?}"
    );
}

//! Whole responses, byte for byte: what gets, lists, watches and writes of pods and nodes
//! send, compared with a golden file. The server writes stored objects' bytes into responses
//! rather than encoding them again, and these tests hold it to the bytes a fresh encoding
//! gives (the golden was written by the code that encoded every response).
//!
//! uids and timestamps differ from run to run; they are replaced by `UID` and `TIME` before
//! the comparison. `UPDATE_GOLDEN=1` rewrites the golden.

use std::path::PathBuf;

use serde_json::json;

use crate::harness::Cluster;

const PODS: &str = "/api/v1/namespaces/default/pods";

/// One request and its answer, as the golden keeps it.
struct Exchange {
    name: &'static str,
    code: u16,
    body: Vec<u8>,
}

fn normalise(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let uid = regex::Regex::new(r#""uid":"[0-9a-f-]{36}""#).expect("uid pattern");
    let time = regex::Regex::new(r#""\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ""#).expect("time pattern");
    let text = uid.replace_all(&text, r#""uid":"UID""#);
    time.replace_all(&text, r#""TIME""#).into_owned()
}

fn render(exchanges: &[Exchange]) -> String {
    exchanges
        .iter()
        .map(|e| format!("### {}\n{}\n{}\n", e.name, e.code, normalise(&e.body)))
        .collect()
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/wire_bytes.golden")
}

fn node(name: &str, zone: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                      "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    .to_string()
}

fn pod(name: &str, app: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": "pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
    .to_string()
}

/// Every request of the golden, in order: the writes that make the objects (their answers
/// included), then reads of them in the ways clients read.
fn exchanges(c: &Cluster) -> Vec<Exchange> {
    let mut out = Vec::new();
    let mut call = |name: &'static str, method: &str, path: &str, body: Option<(&str, String)>| {
        let (ct, body) = body.map_or((None, String::new()), |(ct, b)| (Some(ct), b));
        let (code, body) = c.request_raw(method, path, ct, &body);
        out.push(Exchange { name, code, body });
    };
    let json_body = |b: String| Some(("application/json", b));
    call(
        "create node n1",
        "POST",
        "/api/v1/nodes",
        json_body(node("n1", "a")),
    );
    call(
        "create node n2",
        "POST",
        "/api/v1/nodes",
        json_body(node("n2", "b")),
    );
    call(
        "create pod web-1",
        "POST",
        PODS,
        json_body(pod("web-1", "web")),
    );
    call(
        "create pod web-2",
        "POST",
        PODS,
        json_body(pod("web-2", "web")),
    );
    call(
        "create pod db-1",
        "POST",
        PODS,
        json_body(pod("db-1", "db")),
    );
    call(
        "bind web-1 to n1",
        "POST",
        &format!("{PODS}/web-1/binding"),
        json_body(
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web-1"},
                   "target": {"kind": "Node", "name": "n1"}})
            .to_string(),
        ),
    );
    call(
        "patch db-1 labels",
        "PATCH",
        &format!("{PODS}/db-1"),
        Some((
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"tier": "backend"}}}).to_string(),
        )),
    );
    call(
        "patch n2 unschedulable",
        "PATCH",
        "/api/v1/nodes/n2",
        Some((
            "application/strategic-merge-patch+json",
            json!({"spec": {"unschedulable": true}}).to_string(),
        )),
    );
    let (_, web2) = c.get(&format!("{PODS}/web-2"));
    let mut web2 = web2;
    web2["metadata"]["annotations"] = json!({"note": "updated"});
    call(
        "update web-2",
        "PUT",
        &format!("{PODS}/web-2"),
        json_body(web2.to_string()),
    );
    call(
        "update web-2 status",
        "PUT",
        &format!("{PODS}/web-2/status"),
        json_body({
            let mut s = web2.clone();
            s["metadata"]["resourceVersion"] = json!(null);
            s["status"] = json!({"phase": "Pending", "message": "waiting"});
            s.to_string()
        }),
    );
    call(
        "create pod dry run",
        "POST",
        &format!("{PODS}?dryRun=All"),
        json_body(pod("dry", "web")),
    );
    call("get pod web-1", "GET", &format!("{PODS}/web-1"), None);
    call(
        "get pod web-2 status",
        "GET",
        &format!("{PODS}/web-2/status"),
        None,
    );
    call("get node n2", "GET", "/api/v1/nodes/n2", None);
    call("get missing pod", "GET", &format!("{PODS}/nope"), None);
    call("list pods in default", "GET", PODS, None);
    call("list pods everywhere", "GET", "/api/v1/pods", None);
    call(
        "list pods by label",
        "GET",
        &format!("{PODS}?labelSelector=app%3Dweb"),
        None,
    );
    call(
        "list unscheduled pods",
        "GET",
        &format!("{PODS}?fieldSelector=spec.nodeName%3D"),
        None,
    );
    call(
        "list pods rv=0",
        "GET",
        &format!("{PODS}?resourceVersion=0"),
        None,
    );
    call("list pods page 1", "GET", &format!("{PODS}?limit=2"), None);
    call("list nodes", "GET", "/api/v1/nodes", None);
    call(
        "list nodes by zone",
        "GET",
        "/api/v1/nodes?labelSelector=topology.kubernetes.io%2Fzone%3Db",
        None,
    );
    call(
        "list no namespaces match",
        "GET",
        "/api/v1/namespaces/none/pods",
        None,
    );
    call(
        "watch pods from 0",
        "GET",
        &format!("{PODS}?watch=true&timeoutSeconds=1&resourceVersion=0"),
        None,
    );
    call(
        "watch pods from rv 3",
        "GET",
        &format!("{PODS}?watch=true&timeoutSeconds=1&resourceVersion=3"),
        None,
    );
    call(
        "watch unscheduled pods from rv 3",
        "GET",
        &format!(
            "{PODS}?watch=true&timeoutSeconds=1&resourceVersion=3&fieldSelector=spec.nodeName%3D"
        ),
        None,
    );
    call(
        "watch web pods from rv 3",
        "GET",
        &format!("{PODS}?watch=true&timeoutSeconds=1&resourceVersion=3&labelSelector=app%3Dweb"),
        None,
    );
    call(
        "watch nodes from rv 1",
        "GET",
        "/api/v1/nodes?watch=true&timeoutSeconds=1&resourceVersion=1",
        None,
    );
    call(
        "watch nodes with initial events",
        "GET",
        "/api/v1/nodes?watch=true&timeoutSeconds=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
        None,
    );
    call("delete pod db-1", "DELETE", &format!("{PODS}/db-1"), None);
    call("delete node n2", "DELETE", "/api/v1/nodes/n2", None);
    call(
        "watch after deletes",
        "GET",
        &format!("{PODS}?watch=true&timeoutSeconds=1&resourceVersion=10"),
        None,
    );
    out
}

#[test]
fn responses_are_the_bytes_of_a_fresh_encoding() {
    let c = Cluster::start();
    let got = render(&exchanges(&c));
    let path = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).expect("write golden");
    }
    let want = std::fs::read_to_string(&path).expect("golden exists");
    // Compared exchange by exchange, so that a failure names the request.
    let split = |s: &str| -> Vec<String> { s.split("### ").map(str::to_string).collect() };
    let (got, want) = (split(&got), split(&want));
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert_eq!(got.len(), want.len());
}

//! OpenAPI v3 and v2 as kubectl reads them: `kind: List` and multi-document files through
//! create and apply, `explain`, strict validation, and a schema for every served kind.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use apiserver::resources::RESOURCES;
use serde_json::{json, Value};

use crate::harness::Cluster;

const LIST: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings}
  data: {mode: fast}
- apiVersion: v1
  kind: Pod
  metadata: {name: web}
  spec:
    containers:
    - name: c
      image: nginx:1
"#;

/// One GET with extra header lines; the status line and headers (lowercased names), and body.
fn get_raw(c: &Cluster, path: &str, headers: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(c.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{headers}\r\n",
        c.addr
    )
    .expect("write request");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    (head, raw.get(split + 4..).unwrap_or_default().to_vec())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(str::trim)
}

#[test]
fn create_then_apply_of_a_kind_list_writes_every_item() {
    let c = Cluster::start();
    let f = c.file("list.yaml", LIST);
    let created = c.kubectl_ok(&["create", "--save-config", "-f", &f]);
    let changed = c.file(
        "list2.yaml",
        &LIST
            .replace("mode: fast", "mode: slow")
            .replace("nginx:1", "nginx:2"),
    );
    // apply computes each patch from the v3 schema; a schema it cannot use is a warning on
    // stderr, which must stay empty.
    let applied = c.kubectl(&["apply", "-f", &changed]);
    assert_eq!(
        (
            created.as_str(),
            String::from_utf8_lossy(&applied.stdout).into_owned(),
            String::from_utf8_lossy(&applied.stderr).into_owned(),
            c.kubectl_ok(&["get", "cm", "settings", "-o", "jsonpath={.data.mode}"]),
            c.kubectl_ok(&[
                "get",
                "pod",
                "web",
                "-o",
                "jsonpath={.spec.containers[*].image}"
            ]),
        ),
        (
            "configmap/settings created\npod/web created\n",
            "configmap/settings configured\npod/web configured\n".to_string(),
            String::new(),
            "slow".to_string(),
            "nginx:2".to_string(),
        )
    );
}

#[test]
fn create_then_apply_of_a_multi_document_file_writes_every_object() {
    let c = Cluster::start();
    let docs = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\
                apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n";
    let f = c.file("docs.yaml", docs);
    assert_eq!(
        (
            c.kubectl_ok(&["create", "--save-config", "-f", &f]),
            c.kubectl_ok(&["apply", "-f", &f]),
        ),
        (
            "configmap/a created\nconfigmap/b created\n".to_string(),
            "configmap/a unchanged\nconfigmap/b unchanged\n".to_string(),
        )
    );
}

/// A List is validated by kubectl itself against the v2 definitions (protobuf), since the
/// server's field validation is per object: an unknown field in an item is refused.
#[test]
fn create_of_a_kind_list_with_an_unknown_field_is_refused_by_client_side_validation() {
    let c = Cluster::start();
    let f = c.file(
        "list.yaml",
        &LIST.replace(
            "image: nginx:1",
            "image: nginx:1\n      imagePullPolicyy: Always",
        ),
    );
    let out = c.kubectl(&["create", "-f", &f]);
    assert_eq!(
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            false,
            format!(
                "error: error validating \"{f}\": error validating data: \
                 ValidationError(Pod.spec.containers[0]): unknown field \
                 \"imagePullPolicyy\" in io.k8s.api.core.v1.Container; if you choose to ignore \
                 these errors, turn validation off with --validate=false\n"
            )
        )
    );
}

/// `apply --validate=strict` finds `fieldValidation` on the kind's PATCH operation in the v3
/// document and leaves the check to the server, which refuses the unknown field.
#[test]
fn apply_validate_strict_with_an_unknown_field_is_refused_by_the_server() {
    let c = Cluster::start();
    let f = c.file(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  containers:\n  - name: c\n    \
         image: nginx:1\n    imagePullPolicyy: Always\n",
    );
    let out = c.kubectl(&["apply", "--validate=strict", "-f", &f]);
    assert_eq!(
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            false,
            format!(
                "Error from server (BadRequest): error when creating \"{f}\": Pod in version \
                 \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \
                 \"spec.containers[0].imagePullPolicyy\"\n"
            )
        )
    );
}

#[test]
fn explain_pod_spec_containers_describes_the_field_from_the_v3_document() {
    let c = Cluster::start();
    let out = c.kubectl_ok(&["explain", "pod.spec.containers"]);
    let head: Vec<&str> = out.lines().take(8).collect();
    assert_eq!(
        head,
        [
            "KIND:       Pod",
            "VERSION:    v1",
            "",
            "FIELD: containers <[]Container>",
            "",
            "",
            "DESCRIPTION:",
            "    List of containers belonging to the pod. Containers cannot currently be",
        ],
        "{out}"
    );
    assert!(out.contains("  imagePullPolicy\t<string>"), "{out}");
}

/// `explain --output=plaintext-openapiv2` reads `/openapi/v2` as protobuf.
#[test]
fn explain_with_the_v2_output_decodes_the_protobuf_document() {
    let c = Cluster::start();
    let out = c.kubectl_ok(&[
        "explain",
        "pods.spec.nodeName",
        "--output=plaintext-openapiv2",
    ]);
    let head: Vec<&str> = out.lines().take(4).collect();
    assert_eq!(
        head,
        [
            "KIND:     Pod",
            "VERSION:  v1",
            "",
            "FIELD:    nodeName <string>"
        ],
        "{out}"
    );
}

/// Every kind in the resources table has a schema tagged with its group-version-kind, in its
/// group-version's v3 document and in the v2 document, as served over HTTP.
#[test]
fn openapi_v3_and_v2_describe_every_kind_in_the_resources_table() {
    let c = Cluster::start();
    let (code, index) = c.get("/openapi/v3");
    assert_eq!(code, 200, "{index}");
    let (code, v2) = c.get("/openapi/v2");
    assert_eq!(code, 200);
    let tagged = |schemas: &Value, gvk: &Value| {
        schemas.as_object().into_iter().flatten().any(|(_, s)| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|g| g.contains(gvk))
        })
    };
    let mut missing = Vec::new();
    for r in RESOURCES {
        let key = if r.group.is_empty() {
            format!("api/{}", r.version)
        } else {
            format!("apis/{}/{}", r.group, r.version)
        };
        let url = index["paths"][&key]["serverRelativeURL"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (code, doc) = c.get(&url);
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        if code != 200 || !tagged(&doc["components"]["schemas"], &gvk) {
            missing.push(format!("v3 {url}: {gvk}"));
        }
        if !tagged(&v2["definitions"], &gvk) {
            missing.push(format!("v2: {gvk}"));
        }
    }
    assert_eq!(missing, Vec::<String>::new());
}

/// The caching upstream does: ETag and 304; a hashed v3 URL immutable, a stale hash moved to
/// the current one; v2 as protobuf when asked for first, 406 when neither form is accepted.
#[test]
fn openapi_documents_are_cached_by_etag_and_hash() {
    let c = Cluster::start();
    let (_, index) = c.get("/openapi/v3");
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (head, _) = get_raw(&c, &url, "");
    let etag = header(&head, "etag").unwrap_or_default().to_string();
    let (not_modified, _) = get_raw(&c, &url, &format!("If-None-Match: {etag}\r\n"));
    let (stale, _) = get_raw(&c, "/openapi/v3/api/v1?hash=0", "");
    let (html, _) = get_raw(&c, "/openapi/v2", "Accept: text/html\r\n");
    let (pb_head, pb) = get_raw(
        &c,
        "/openapi/v2",
        "Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json\r\n",
    );
    assert_eq!(
        (
            head.lines().next(),
            header(&head, "cache-control"),
            header(&head, "expires").is_some(),
            etag.trim_matches('"').to_string(),
            not_modified.lines().next(),
            stale.lines().next(),
            header(&stale, "location"),
            html.lines().next(),
            header(&pb_head, "content-type"),
            // A gnostic Document starts with field 1, `swagger`: "2.0".
            pb.get(..5),
        ),
        (
            Some("http/1.1 200 ok"),
            Some("public, immutable"),
            true,
            url.rsplit('=').next().unwrap_or_default().to_lowercase(),
            Some("http/1.1 304 not modified"),
            Some("http/1.1 301 moved permanently"),
            Some(url.to_lowercase().as_str()),
            Some("http/1.1 406 not acceptable"),
            Some("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"),
            Some(&b"\x0a\x032.0"[..]),
        )
    );
}

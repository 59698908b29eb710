//! The extender client against a recording HTTP server on 127.0.0.1 inside each test.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rstest::rstest;
use serde_json::{json, Value};

use super::wire::{ExtenderBindingArgs, HostPriority, Victims};
use super::{FilterResult, HttpExtender};
use crate::config::{Extender, ExtenderManagedResource};

/// What the test server answers.
#[derive(Clone)]
pub(crate) enum Reply {
    Json(Value),
    Status(u16),
    /// Never answers: the client's timeout must end the call.
    Hang,
}

/// A server that records `(path, body)` of every request and answers per verb (the last
/// path segment).
pub(crate) struct Recorder {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Recorder {
    /// Answers `reply` on every path.
    pub(crate) async fn start(reply: Reply) -> Recorder {
        Recorder::start_per_verb(BTreeMap::new(), reply).await
    }

    /// Answers `replies[verb]`, or `other` for a verb not in `replies`.
    pub(crate) async fn start_per_verb(
        replies: BTreeMap<&'static str, Reply>,
        other: Reply,
    ) -> Recorder {
        let requests: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let seen = requests.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, body: Bytes| {
            let seen = seen.clone();
            let verb = uri
                .path()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            let reply = replies.get(verb.as_str()).unwrap_or(&other).clone();
            async move {
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if let Ok(mut seen) = seen.lock() {
                    seen.push((uri.path().to_string(), body));
                }
                match reply {
                    Reply::Json(v) => (
                        StatusCode::OK,
                        [("content-type", "application/json")],
                        v.to_string(),
                    )
                        .into_response(),
                    Reply::Status(code) => StatusCode::from_u16(code)
                        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                        .into_response(),
                    Reply::Hang => std::future::pending().await,
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local_addr: {e}"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Recorder {
            url: format!("http://{addr}/scheduler"),
            requests,
        }
    }

    pub(crate) fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The one request received, as (path, body).
    fn only_request(&self) -> (String, Value) {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "requests: {requests:?}");
        requests.into_iter().next().unwrap_or_default()
    }
}

fn config(url: &str) -> Extender {
    Extender {
        url_prefix: url.to_string(),
        filter_verb: "filter".to_string(),
        prioritize_verb: "prioritize".to_string(),
        preempt_verb: "preempt".to_string(),
        bind_verb: "bind".to_string(),
        weight: 1,
        ..Extender::default()
    }
}

fn extender(cfg: &Extender) -> HttpExtender {
    HttpExtender::new(cfg).unwrap_or_else(|e| panic!("{e}"))
}

fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".to_string()),
            namespace: Some("default".to_string()),
            uid: Some("uid-web".to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".to_string(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn victim(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// A filter verb's reply: `pass` as Nodes, and the failed maps as given.
pub(crate) fn filter_reply(pass: &[&str], failed: Value, unresolvable: Value) -> Reply {
    let items: Vec<Value> = pass
        .iter()
        .map(|n| json!({"metadata": {"name": n}}))
        .collect();
    Reply::Json(json!({
        "Nodes": {"metadata": {}, "items": items},
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
    }))
}

pub(crate) fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

pub(crate) fn item_names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn reasons(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn filter_sends_pod_and_whole_nodes_and_reads_both_failure_maps() {
    let server = Recorder::start(Reply::Json(json!({
        "Nodes": {"metadata": {}, "items": [{"metadata": {"name": "n1"}}]},
        "NodeNames": null,
        "FailedNodes": {"n2": "no gpu left"},
        "FailedAndUnresolvableNodes": {"n3": "wrong rack"},
        "Error": ""
    })))
    .await;
    let (n1, n2, n3) = (node("n1"), node("n2"), node("n3"));
    let got = extender(&config(&server.url))
        .filter(&pod(), &[&n1, &n2, &n3])
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(
        got,
        FilterResult {
            feasible: vec!["n1".to_string()],
            failed: reasons(&[("n2", "no gpu left")]),
            failed_and_unresolvable: reasons(&[("n3", "wrong rack")]),
        }
    );
    let (path, body) = server.only_request();
    assert_eq!(path, "/scheduler/filter");
    assert_eq!(keys(&body), ["NodeNames", "Nodes", "Pod"]);
    assert_eq!(body["NodeNames"], Value::Null);
    assert_eq!(item_names(&body["Nodes"]), ["n1", "n2", "n3"]);
    assert_eq!(body["Pod"]["metadata"]["name"], "web");
}

#[tokio::test]
async fn node_cache_capable_filter_sends_node_names_only() {
    let server = Recorder::start(Reply::Json(json!({
        "NodeNames": ["n2"],
        "FailedNodes": {"n1": "busy"}
    })))
    .await;
    let cfg = Extender {
        node_cache_capable: true,
        ..config(&server.url)
    };
    let (n1, n2) = (node("n1"), node("n2"));
    let got = extender(&cfg)
        .filter(&pod(), &[&n1, &n2])
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(
        got,
        FilterResult {
            feasible: vec!["n2".to_string()],
            failed: reasons(&[("n1", "busy")]),
            failed_and_unresolvable: BTreeMap::new(),
        }
    );
    let (_, body) = server.only_request();
    assert_eq!(keys(&body), ["NodeNames", "Nodes", "Pod"]);
    assert_eq!(body["Nodes"], Value::Null);
    assert_eq!(body["NodeNames"], json!(["n1", "n2"]));
}

#[tokio::test]
async fn lower_case_reply_keys_are_read_as_go_reads_them() {
    let server = Recorder::start(Reply::Json(json!({
        "nodeNames": ["n1"],
        "failedNodes": {"n2": "full"}
    })))
    .await;
    let cfg = Extender {
        node_cache_capable: true,
        ..config(&server.url)
    };
    let (n1, n2) = (node("n1"), node("n2"));
    let got = extender(&cfg).filter(&pod(), &[&n1, &n2]).await;

    assert_eq!(
        got.map_err(|e| e.to_string()),
        Ok(FilterResult {
            feasible: vec!["n1".to_string()],
            failed: reasons(&[("n2", "full")]),
            failed_and_unresolvable: BTreeMap::new(),
        })
    );
}

#[tokio::test]
async fn extender_without_filter_verb_is_not_called_and_passes_every_node() {
    let server = Recorder::start(Reply::Status(500)).await;
    let cfg = Extender {
        filter_verb: String::new(),
        ..config(&server.url)
    };
    let (n1, n2) = (node("n1"), node("n2"));
    let got = extender(&cfg).filter(&pod(), &[&n1, &n2]).await;

    assert_eq!(
        got.map_err(|e| e.to_string()),
        Ok(FilterResult {
            feasible: vec!["n1".to_string(), "n2".to_string()],
            ..FilterResult::default()
        })
    );
    assert_eq!(server.requests(), []);
}

/// Every way a filter call fails, as the error message the attempt reports.
#[rstest]
#[case::error_in_reply_is_an_error(Reply::Json(json!({"Error": "quota service down"})), 0, "quota service down")]
#[case::non_200_status_is_an_error(
    Reply::Status(503),
    0,
    "failed filter with extender at URL {url}/filter, code 503"
)]
#[case::reply_that_is_not_a_filter_result_is_an_error(Reply::Json(json!([1, 2])), 0, "filter with extender at URL {url}/filter: cannot decode the reply")]
#[case::unknown_node_in_reply_is_an_error(Reply::Json(json!({"NodeNames": ["n9"]})), 0, "extender {url} claims a filtered node n9 which is not found in the input node list")]
#[case::no_reply_within_http_timeout_is_an_error(
    Reply::Hang,
    200,
    "filter with extender at URL {url}/filter timed out after 200ms"
)]
#[tokio::test]
async fn failing_filter(#[case] reply: Reply, #[case] timeout_ms: u64, #[case] want: &str) {
    let server = Recorder::start(reply).await;
    let cfg = Extender {
        node_cache_capable: true,
        http_timeout: Duration::from_millis(timeout_ms),
        ..config(&server.url)
    };
    let n1 = node("n1");
    let got = extender(&cfg).filter(&pod(), &[&n1]).await;

    assert_eq!(
        got.map_err(|e| e.to_string()),
        Err(want.replace("{url}", &server.url))
    );
}

#[tokio::test]
async fn unreachable_extender_is_an_error() {
    // A port that was just free: nothing listens on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "http://{}/scheduler",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    drop(listener);
    let n1 = node("n1");
    let got = extender(&config(&url)).filter(&pod(), &[&n1]).await;

    assert_eq!(
        got.map_err(|e| e.to_string()),
        Err(format!("filter with extender at URL {url}/filter"))
    );
}

#[tokio::test]
async fn prioritize_sends_nodes_and_reads_host_scores() {
    let server = Recorder::start(Reply::Json(json!([
        {"Host": "n1", "Score": 3},
        {"Host": "n2", "Score": 10}
    ])))
    .await;
    let (n1, n2) = (node("n1"), node("n2"));
    let got = extender(&config(&server.url))
        .prioritize(&pod(), &[&n1, &n2])
        .await
        .map_err(|e| e.to_string());

    assert_eq!(
        got,
        Ok(vec![
            HostPriority {
                host: "n1".to_string(),
                score: 3
            },
            HostPriority {
                host: "n2".to_string(),
                score: 10
            },
        ])
    );
    let (path, body) = server.only_request();
    assert_eq!(path, "/scheduler/prioritize");
    assert_eq!(keys(&body), ["NodeNames", "Nodes", "Pod"]);
    assert_eq!(item_names(&body["Nodes"]), ["n1", "n2"]);
}

#[tokio::test]
async fn bind_sends_pod_name_namespace_uid_and_node() {
    let server = Recorder::start(Reply::Json(json!({"Error": ""}))).await;
    let got = extender(&config(&server.url))
        .bind(&ExtenderBindingArgs {
            pod_name: "web".to_string(),
            pod_namespace: "default".to_string(),
            pod_uid: "uid-web".to_string(),
            node: "n1".to_string(),
        })
        .await
        .map_err(|e| e.to_string());

    assert_eq!(got, Ok(()));
    assert_eq!(
        server.only_request(),
        (
            "/scheduler/bind".to_string(),
            json!({"PodName": "web", "PodNamespace": "default", "PodUID": "uid-web", "Node": "n1"})
        )
    );
}

#[tokio::test]
async fn bind_error_in_reply_is_an_error() {
    let server = Recorder::start(Reply::Json(json!({"Error": "node n1 is draining"}))).await;
    let got = extender(&config(&server.url))
        .bind(&ExtenderBindingArgs {
            pod_name: "web".to_string(),
            pod_namespace: "default".to_string(),
            pod_uid: "uid-web".to_string(),
            node: "n1".to_string(),
        })
        .await
        .map_err(|e| e.to_string());

    assert_eq!(got, Err("node n1 is draining".to_string()));
}

/// The victims per node the scheduler offers in the preempt tests.
fn offered() -> BTreeMap<String, Victims> {
    BTreeMap::from([
        (
            "n1".to_string(),
            Victims {
                pods: vec![victim("a"), victim("b")],
                num_pdb_violations: 1,
            },
        ),
        (
            "n2".to_string(),
            Victims {
                pods: vec![victim("c")],
                num_pdb_violations: 0,
            },
        ),
    ])
}

fn pods_on(node: &str) -> Vec<Pod> {
    match node {
        "n1" => vec![victim("a"), victim("b")],
        "n2" => vec![victim("c")],
        _ => Vec::new(),
    }
}

#[rstest]
#[case::whole_victims_without_node_cache(false, "NodeNameToVictims")]
#[case::victim_uids_with_node_cache(true, "NodeNameToMetaVictims")]
#[tokio::test]
async fn preempt_lets_the_extender_trim_victims(
    #[case] node_cache_capable: bool,
    #[case] sent_key: &str,
) {
    // The extender keeps n1 with only pod b and drops n2.
    let server = Recorder::start(Reply::Json(json!({
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-b"}], "NumPDBViolations": 0}}
    })))
    .await;
    let cfg = Extender {
        node_cache_capable,
        ..config(&server.url)
    };
    let got = extender(&cfg)
        .process_preemption(&pod(), offered(), pods_on)
        .await
        .map_err(|e| e.to_string());

    assert_eq!(
        got,
        Ok(BTreeMap::from([(
            "n1".to_string(),
            Victims {
                pods: vec![victim("b")],
                num_pdb_violations: 0,
            }
        )]))
    );
    let (path, body) = server.only_request();
    assert_eq!(path, "/scheduler/preempt");
    assert_eq!(
        keys(&body),
        ["NodeNameToMetaVictims", "NodeNameToVictims", "Pod"]
    );
    let sent = &body[sent_key]["n1"];
    assert_eq!(keys(sent), ["NumPDBViolations", "Pods"]);
    assert_eq!(sent["NumPDBViolations"], 1);
    if node_cache_capable {
        assert_eq!(body["NodeNameToVictims"], Value::Null);
        assert_eq!(sent["Pods"], json!([{"UID": "uid-a"}, {"UID": "uid-b"}]));
    } else {
        assert_eq!(body["NodeNameToMetaVictims"], Value::Null);
        assert_eq!(sent["Pods"][1]["metadata"]["uid"], "uid-b");
    }
}

#[tokio::test]
async fn preempt_naming_a_pod_not_on_the_node_is_an_error() {
    let server = Recorder::start(Reply::Json(json!({
        "NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "uid-a"}]}}
    })))
    .await;
    let got = extender(&config(&server.url))
        .process_preemption(&pod(), offered(), pods_on)
        .await
        .map_err(|e| e.to_string());

    assert_eq!(
        got,
        Err(format!(
            "extender {} claims to preempt pod (UID: uid-a) on node n2, but the pod is not found on that node",
            server.url
        ))
    );
}

fn pod_using(requests: &[&str], limits: &[&str], init: &[&str]) -> Pod {
    let quantities = |names: &[&str]| {
        (!names.is_empty()).then(|| {
            names
                .iter()
                .map(|n| (n.to_string(), Quantity("1".to_string())))
                .collect()
        })
    };
    let mut p = pod();
    if let Some(spec) = p.spec.as_mut() {
        spec.containers = vec![Container {
            name: "c".to_string(),
            resources: Some(ResourceRequirements {
                requests: quantities(requests),
                limits: quantities(limits),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }];
        spec.init_containers = Some(vec![Container {
            name: "init".to_string(),
            resources: Some(ResourceRequirements {
                requests: quantities(init),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }]);
    }
    p
}

#[rstest]
#[case::any_pod_without_managed_resources(&[], pod_using(&["cpu"], &[], &[]), true)]
#[case::pod_requesting_a_managed_resource(&["example.com/gpu"], pod_using(&["cpu", "example.com/gpu"], &[], &[]), true)]
#[case::pod_limiting_a_managed_resource(&["example.com/gpu"], pod_using(&[], &["example.com/gpu"], &[]), true)]
#[case::init_container_requesting_a_managed_resource(&["example.com/gpu"], pod_using(&[], &[], &["example.com/gpu"]), true)]
#[case::pod_without_a_managed_resource(&["example.com/gpu"], pod_using(&["cpu", "example.com/fpga"], &["memory"], &[]), false)]
fn is_interested(#[case] managed: &[&str], #[case] pod: Pod, #[case] want: bool) {
    let cfg = Extender {
        managed_resources: managed
            .iter()
            .map(|n| ExtenderManagedResource {
                name: n.to_string(),
                ignored_by_scheduler: false,
            })
            .collect(),
        ..config("http://127.0.0.1:1/scheduler")
    };
    // Building the client needs no runtime; calling it would.
    assert_eq!(extender(&cfg).is_interested(&pod), want);
}

/// A self-signed certificate for 127.0.0.1 and localhost: (certificate PEM, key PEM).
fn self_signed() -> (String, String) {
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    (c.cert.pem(), c.signing_key.serialize_pem())
}

/// An HTTPS extender that answers one request with `reply` (any verb), speaking just
/// enough HTTP/1.1 for it; returns its URL prefix.
async fn https_extender(cert_pem: &str, key_pem: &str, reply: Value) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .unwrap_or_else(|e| panic!("{e}"));
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let Ok(mut tls) = acceptor.accept(tcp).await else {
            return;
        };
        // Read the head and the body the Content-Length announces, then answer.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Ok(n) = tls.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())
                            .flatten()
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let body = reply.to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = tls.write_all(response.as_bytes()).await;
        let _ = tls.shutdown().await;
    });
    format!("https://{addr}/scheduler")
}

/// The CA `tlsConfig` trusts: the server's own certificate, another one, or none.
#[derive(Debug, Clone, Copy)]
enum Trust {
    /// `enableHTTPS` without a CA: verification skipped, as upstream.
    NoCaWithEnableHttps,
    ServersOwn,
    Another,
}

#[rstest]
#[case::enable_https_without_ca_skips_verification(Trust::NoCaWithEnableHttps, true)]
#[case::ca_data_of_the_server_verifies_it(Trust::ServersOwn, true)]
#[case::server_signed_by_another_ca_is_refused(Trust::Another, false)]
#[tokio::test]
async fn https_extender_filter(#[case] trust: Trust, #[case] succeeds: bool) {
    let (cert, key) = self_signed();
    let (other, _) = self_signed();
    let url = https_extender(&cert, &key, json!({"NodeNames": ["n1"]})).await;
    let ca = |pem: &str| crate::config::ExtenderTlsConfig {
        ca_data: k8s_openapi::ByteString(pem.as_bytes().to_vec()),
        server_name: "localhost".to_string(),
        ..crate::config::ExtenderTlsConfig::default()
    };
    let cfg = Extender {
        node_cache_capable: true,
        enable_https: matches!(trust, Trust::NoCaWithEnableHttps),
        tls_config: match trust {
            Trust::NoCaWithEnableHttps => None,
            Trust::ServersOwn => Some(ca(&cert)),
            Trust::Another => Some(ca(&other)),
        },
        ..config(&url)
    };
    let n1 = node("n1");
    let got = extender(&cfg).filter(&pod(), &[&n1]).await;

    match got {
        Ok(r) => {
            assert!(succeeds, "trust {trust:?} should have been refused");
            assert_eq!(r.feasible, ["n1"]);
        }
        Err(e) => {
            assert!(!succeeds, "{}", super::error_chain(&e));
            assert!(
                super::error_chain(&e).contains("invalid peer certificate"),
                "{}",
                super::error_chain(&e)
            );
        }
    }
}

/// The example extender of `examples/extender/`, run with the Python the test command
/// installs (`KUBESCHED_PYTHON`, else `python3`); killed when dropped.
struct ExampleExtender {
    child: std::process::Child,
    url: String,
}

impl ExampleExtender {
    fn start() -> ExampleExtender {
        use std::io::BufRead;
        let python = std::env::var("KUBESCHED_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/extender/extender.py"
        );
        let mut child = std::process::Command::new(&python)
            .args([script, "--port", "0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{python} {script}: {e}"));
        let stdout = child.stdout.take();
        // The first line says where it listens; read it on a thread to bound the wait.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(out) = stdout {
                let _ = std::io::BufReader::new(out).read_line(&mut line);
            }
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("example extender said {line:?}"))
            .to_string();
        ExampleExtender {
            child,
            url: format!("http://{addr}/scheduler"),
        }
    }
}

impl Drop for ExampleExtender {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> Node {
    let mut n = node(name);
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

#[tokio::test]
async fn example_extender_filters_by_label_prioritizes_by_label_and_keeps_victims() {
    let example = ExampleExtender::start();
    let ext = extender(&config(&example.url));
    let n1 = labelled(
        "n1",
        &[
            ("example.com/extender-allowed", "true"),
            ("example.com/extender-score", "3"),
        ],
    );
    let n2 = labelled(
        "n2",
        &[
            ("example.com/extender-allowed", "true"),
            ("example.com/extender-score", "9"),
        ],
    );
    let n3 = labelled("n3", &[]);

    let filtered = ext.filter(&pod(), &[&n1, &n2, &n3]).await;
    assert_eq!(
        filtered.map_err(|e| e.to_string()),
        Ok(FilterResult {
            feasible: vec!["n1".to_string(), "n2".to_string()],
            failed: reasons(&[("n3", "node(s) lack label example.com/extender-allowed=true")]),
            failed_and_unresolvable: BTreeMap::new(),
        })
    );
    let scores = ext.prioritize(&pod(), &[&n1, &n2]).await;
    assert_eq!(
        scores.map_err(|e| e.to_string()),
        Ok(vec![
            HostPriority {
                host: "n1".to_string(),
                score: 3
            },
            HostPriority {
                host: "n2".to_string(),
                score: 9
            },
        ])
    );
    let kept = ext.process_preemption(&pod(), offered(), pods_on).await;
    assert_eq!(kept.map_err(|e| e.to_string()), Ok(offered()));
    let bound = ext
        .bind(&ExtenderBindingArgs {
            pod_name: "web".to_string(),
            pod_namespace: "default".to_string(),
            pod_uid: "uid-web".to_string(),
            node: "n1".to_string(),
        })
        .await;
    assert_eq!(
        bound.map_err(|e| e.to_string()),
        Err("this extender was started without --apiserver".to_string())
    );
}

//! The writes whose answers are not decoded ([`super::raw`]): what reaches the server is
//! what kube-rs' typed API sends (method, path and query, content type, accept, body bytes),
//! refusals keep their code and message, and a success is a success whatever its body.
//! Against a recording HTTP server on 127.0.0.1:0.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use framework::{
    Binding, ClientError, ClusterClient, EventType, Nomination, PodCondition, PodEvent, PodRef,
    PodStatusUpdate,
};
use k8s_openapi::api::core::v1::{
    Binding as CoreBinding, Event as CoreEvent, EventSource, ObjectReference, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Resource;
use rstest::rstest;
use serde_json::json;

use super::{KubeClusterClient, WriterOptions};

/// A request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    method: String,
    uri: String,
    content_type: Option<String>,
    accept: Option<String>,
    body: String,
}

impl Seen {
    /// What kube-rs' typed API put on the wire for `request` (built by its request builder).
    fn of(request: &hyper::Request<Vec<u8>>) -> Seen {
        let header = |name| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Seen {
            method: request.method().to_string(),
            uri: request.uri().to_string(),
            content_type: header("content-type"),
            accept: header("accept"),
            body: String::from_utf8(request.body().clone()).expect("UTF-8 body"),
        }
    }
}

/// An HTTP server that records every request and answers each with `status` and `body`.
struct Recorder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start(status: u16, body: &'static str) -> Recorder {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let status = StatusCode::from_u16(status).expect("status code");
        let app = axum::Router::new().fallback({
            let seen = seen.clone();
            move |method: Method, uri: Uri, headers: HeaderMap, got: Bytes| {
                let seen = seen.clone();
                async move {
                    let header = |name| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    seen.lock().expect("recorder lock").push(Seen {
                        method: method.to_string(),
                        uri: uri.to_string(),
                        content_type: header("content-type"),
                        accept: header("accept"),
                        body: String::from_utf8_lossy(&got).into_owned(),
                    });
                    (status, [("content-type", "application/json")], body)
                }
            }
        });
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("recorder binds");
        let addr = listener.local_addr().expect("recorder address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Recorder { addr, seen, task }
    }

    fn client(&self) -> KubeClusterClient {
        let url = format!("http://{}", self.addr).parse().expect("URL");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("kube client");
        KubeClusterClient::new(
            client,
            WriterOptions {
                reporting_instance: "host_1".into(),
                ..WriterOptions::default()
            },
        )
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("recorder lock").clone()
    }

    /// Waits (at most 10 s) until `n` requests were seen.
    async fn wait_for(&self, n: usize) -> Vec<Seen> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let seen = self.seen();
            if seen.len() >= n || tokio::time::Instant::now() >= deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn binding(name: &str, uid: Option<&str>, node: &str) -> Binding {
    Binding {
        namespace: "team".into(),
        name: name.into(),
        uid: uid.map(str::to_string),
        node: node.into(),
    }
}

/// The request kube-rs' `Api::<Pod>::create_subresource("binding", ...)` builds for
/// `binding`: the core/v1 Binding serialized by serde.
fn typed_bind_request(binding: &Binding) -> hyper::Request<Vec<u8>> {
    let body = CoreBinding {
        metadata: ObjectMeta {
            name: Some(binding.name.clone()),
            namespace: Some(binding.namespace.clone()),
            uid: binding.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(binding.node.clone()),
            ..ObjectReference::default()
        },
    };
    kube::core::Request::new(Pod::url_path(&(), Some(&binding.namespace)))
        .create_subresource(
            "binding",
            &binding.name,
            &PostParams::default(),
            serde_json::to_vec(&body).expect("binding serializes"),
        )
        .expect("typed bind request")
}

#[rstest]
#[case::with_uid(binding("web-1", Some("uid-1"), "node-7"))]
#[case::without_uid(binding("web-1", None, "node-7"))]
#[case::names_needing_escapes(binding("a\"b\\c", Some("u\u{1}é"), "n\u{7f}\u{2028}"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_sends_what_the_typed_api_sends(#[case] binding: Binding) {
    let want = Seen::of(&typed_bind_request(&binding));
    let server = Recorder::start(201, r#"{"kind":"Status","status":"Success","code":201}"#).await;
    assert_eq!(server.client().bind(&binding).await, Ok(()));
    let sent = server.seen();
    assert_eq!(sent, vec![want]);
}

/// The bind request is built without serde, and must still be the typed API's to the byte.
#[rstest]
#[case::with_uid(binding("web-1", Some("uid-1"), "node-7"))]
#[case::without_uid(binding("web-1", None, "node-7"))]
#[case::names_needing_escapes(binding("a\"b\\c", Some("u\u{1}é"), "n\u{7f}\u{2028}"))]
fn bind_request_is_the_typed_apis_to_the_byte(#[case] binding: Binding) {
    let built = super::writer::bind_request(&binding).expect("bind request");
    assert_eq!(Seen::of(&built), Seen::of(&typed_bind_request(&binding)));
}

fn status(code: u16, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "reason": "Conflict", "code": code})
    .to_string()
}

/// A bind's answer: a success is a success whatever its body says (it is not decoded);
/// a refusal keeps the Status' code and message, or the HTTP code and the text when the
/// body is no Status.
#[rstest]
#[case::success_with_a_status(201, r#"{"kind":"Status","status":"Success","code":201}"#, Ok(()))]
#[case::success_whose_body_is_not_json(201, "created", Ok(()))]
#[case::success_with_an_empty_body(200, "", Ok(()))]
#[case::conflict(409, "CONFLICT", Err(ClientError::Api { code: 409, message: "pod team/web-1 is already assigned to node n1".into() }))]
#[case::not_found(404, "NOT_FOUND", Err(ClientError::Api { code: 404, message: "pods \"web-1\" not found".into() }))]
#[case::server_error_in_plain_text(500, "upstream failed\n", Err(ClientError::Api { code: 500, message: "upstream failed".into() }))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_answer_is_judged_by_its_code_and_only_a_refusal_is_read(
    #[case] code: u16,
    #[case] body: &'static str,
    #[case] want: Result<(), ClientError>,
) {
    let body: &'static str = match body {
        "CONFLICT" => {
            Box::leak(status(409, "pod team/web-1 is already assigned to node n1").into_boxed_str())
        }
        "NOT_FOUND" => Box::leak(status(404, "pods \"web-1\" not found").into_boxed_str()),
        other => other,
    };
    let server = Recorder::start(code, body).await;
    let got = server
        .client()
        .bind(&binding("web-1", Some("uid-1"), "n1"))
        .await;
    assert_eq!(got, want);
}

/// The immediate status write (a preemption victim's condition): the strategic-merge
/// patch of `pods/status` kube-rs' `patch_status` sends, and its answer (the pod) unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_patch_sends_what_the_typed_api_sends_and_ignores_the_answers_body() {
    let server = Recorder::start(200, "not a pod").await;
    let update = PodStatusUpdate {
        pod: PodRef {
            namespace: "team".into(),
            name: "web-1".into(),
            uid: Some("uid-1".into()),
        },
        condition: Some(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: "PreemptionByScheduler".into(),
            message: "preempted".into(),
        }),
        nomination: Nomination::Clear,
    };
    assert_eq!(server.client().update_pod_status_now(&update).await, Ok(()));
    let sent = server.seen();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let body: serde_json::Value = serde_json::from_str(&sent[0].body).expect("JSON body");
    let time = body["status"]["conditions"][0]["lastTransitionTime"].clone();
    assert!(time.is_string(), "{body}");
    let patch = json!({"status": {
        "conditions": [{"type": "DisruptionTarget", "status": "True",
            "reason": "PreemptionByScheduler", "message": "preempted",
            "lastTransitionTime": time}],
        "nominatedNodeName": null,
    }});
    let typed = kube::core::Request::new(Pod::url_path(&(), Some("team")))
        .patch_subresource(
            "status",
            "web-1",
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .expect("typed patch request");
    assert_eq!(sent[0], Seen::of(&typed));
}

/// An event's first occurrence: POSTed as kube-rs' `Api::create` sends the core/v1 Event
/// (k8s-openapi's serialization, byte for byte), its answer unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_create_sends_what_the_typed_api_sends() {
    let server = Recorder::start(201, "stored").await;
    let event = PodEvent {
        regarding: PodRef {
            namespace: "team".into(),
            name: "web-1".into(),
            uid: Some("uid-1".into()),
        },
        resource_version: Some("42".into()),
        event_type: EventType::Normal,
        reason: "Scheduled".into(),
        action: "Binding".into(),
        message: "Successfully assigned team/web-1 to n1".into(),
        reporting_controller: "default-scheduler".into(),
    };
    let client = server.client();
    assert_eq!(client.record_event(&event).await, Ok(()));
    let sent = server.wait_for(1).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let got: CoreEvent = serde_json::from_str(&sent[0].body).expect("an Event");
    let want = CoreEvent {
        metadata: ObjectMeta {
            name: got.metadata.name.clone(),
            namespace: Some("team".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("team".into()),
            name: Some("web-1".into()),
            uid: Some("uid-1".into()),
            resource_version: Some("42".into()),
            ..ObjectReference::default()
        },
        message: Some("Successfully assigned team/web-1 to n1".into()),
        reason: Some("Scheduled".into()),
        type_: Some("Normal".into()),
        action: Some("Binding".into()),
        reporting_component: Some("default-scheduler".into()),
        reporting_instance: Some("host_1".into()),
        source: Some(EventSource {
            component: Some("default-scheduler".into()),
            host: None,
        }),
        first_timestamp: got.first_timestamp.clone(),
        last_timestamp: got.first_timestamp.clone(),
        event_time: got.event_time.clone(),
        count: Some(1),
        ..CoreEvent::default()
    };
    assert_eq!(got, want);
    let typed = kube::core::Request::new(CoreEvent::url_path(&(), Some("team")))
        .create(
            &PostParams::default(),
            serde_json::to_vec(&want).expect("event serializes"),
        )
        .expect("typed create request");
    assert_eq!(sent[0], Seen::of(&typed));
}

//! The web endpoints over loopback: the page, the pod list, one pod's decision (and 404 for
//! a pod without one), the nodes from the cache, the profiles' weights, and the event
//! stream delivering a recorded attempt.

use std::net::SocketAddr;
use std::time::Duration;

use framework::testing::make_node;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::builder::SchedulerBuilder;
use crate::memory::MemoryCluster;
use crate::serve::{serve, Health, ServeState};
use crate::simulate::{PodReport, PodResult};

fn report(name: &str) -> PodReport {
    PodReport {
        namespace: "default".to_string(),
        name: name.to_string(),
        scheduler_name: "default-scheduler".to_string(),
        node: None,
        result: PodResult::Unschedulable,
        message: Some("0/1 nodes are available: 1 Insufficient cpu.".to_string()),
        bound_by: None,
        reason_counts: Vec::new(),
        explanation: None,
        nominated_node: None,
        victims: Vec::new(),
        preemption: Vec::new(),
        volumes: Vec::new(),
        volume_reasons: Vec::new(),
        devices: Vec::new(),
        device_reasons: Vec::new(),
    }
}

struct Server {
    addr: SocketAddr,
    decisions: Decisions,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _cluster: Arc<MemoryCluster>,
}

async fn start() -> Server {
    let cfg = crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      \
         enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: TaintToleration, weight: 3}]\n      \
         disabled: [{name: '*'}]\n",
        "test",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cluster = MemoryCluster::new();
    let decisions = Decisions::default();
    let sched = SchedulerBuilder::new(cfg, "test")
        .client(cluster.clone())
        .decisions(decisions.clone())
        .build(tokio::runtime::Handle::current())
        .unwrap_or_else(|e| panic!("{e}"))
        .scheduler;
    cluster.connect(sched.weak_event_handler());
    cluster.apply_node(
        make_node("n1")
            .capacity(&[("cpu", "4"), ("memory", "1Gi"), ("pods", "110")])
            .obj(),
    );
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let state = ServeState {
        health: Arc::new(Health::new(false)),
        metrics: Arc::new(crate::metrics::PrometheusRecorder::new()),
        web: Some(WebState::new(sched, decisions.clone())),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, state, async {
        let _ = stopped.await;
    }));
    Server {
        addr,
        decisions,
        stop,
        task,
        _cluster: cluster,
    }
}

/// (status, Content-Type, body) of a GET.
async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .unwrap_or_else(|_| panic!("no response within 10 s"))
        .unwrap_or_else(|e| panic!("{e}"));
    let raw = String::from_utf8(raw).unwrap_or_else(|e| panic!("{e}"));
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{raw}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{head}"));
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_string();
    (status, content_type, body.to_string())
}

async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, content_type, body) = get(addr, path).await;
    assert_eq!(content_type, "application/json", "{path}");
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")),
    )
}

#[tokio::test]
async fn endpoints_serve_the_page_the_log_the_nodes_and_the_weights() {
    let s = start().await;
    s.decisions.record(&report("web"));

    // The page carries what the endpoints say, and the decision of the pod it names.
    let (status, content_type, body) = get(s.addr, "/?pod=default/web").await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/html; charset=utf-8")
    );
    let open = "<script id=\"initial-state\" type=\"application/json\">";
    let initial = body
        .split_once(open)
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .map(|(state, _)| state)
        .unwrap_or_else(|| panic!("no initial state in the page: {body}"));
    let initial: Value = serde_json::from_str(initial).unwrap_or_else(|e| panic!("{e}: {initial}"));
    assert_eq!(
        initial,
        json!({
            "profiles": {"default-scheduler": {"scoreWeights": {"TaintToleration": 3}}},
            "nodes": {"nodes": [{
                "name": "n1",
                "allocatable": {"cpu": 4000, "memory": 1073741824, "pods": 110},
                "requested": {"cpu": 0, "memory": 0, "pods": 0},
                "pods": [],
            }]},
            "pods": {"pods": [{
                "namespace": "default",
                "name": "web",
                "result": "Unschedulable",
                "node": null,
                "message": "0/1 nodes are available: 1 Insufficient cpu.",
                "attempt": 0,
            }]},
            "decision": s.decisions.get("default", "web").unwrap_or_default(),
        })
    );
    assert_eq!(
        get_json(s.addr, "/api/pods").await,
        (
            200,
            json!({"pods": [{
                "namespace": "default",
                "name": "web",
                "result": "Unschedulable",
                "node": null,
                "message": "0/1 nodes are available: 1 Insufficient cpu.",
                "attempt": 0,
            }]})
        )
    );
    assert_eq!(
        get_json(s.addr, "/api/pods/default/web").await,
        (200, s.decisions.get("default", "web").unwrap_or_default())
    );
    assert_eq!(
        get_json(s.addr, "/api/pods/default/nope").await,
        (
            404,
            json!({"error": "no scheduling attempt of pod default/nope is recorded"})
        )
    );
    assert_eq!(
        get_json(s.addr, "/api/nodes").await,
        (
            200,
            json!({"nodes": [{
                "name": "n1",
                "allocatable": {"cpu": 4000, "memory": 1073741824, "pods": 110},
                "requested": {"cpu": 0, "memory": 0, "pods": 0},
                "pods": [],
            }]})
        )
    );
    assert_eq!(
        get_json(s.addr, "/api/profiles").await,
        (
            200,
            json!({"profiles": {"default-scheduler": {"scoreWeights": {"TaintToleration": 3}}}})
        )
    );
    let _ = s.stop.send(());
    let _ = s.task.await;
}

#[tokio::test]
async fn the_event_stream_delivers_a_recorded_attempt_and_ends_on_shutdown() {
    let s = start().await;
    let mut stream = TcpStream::connect(s.addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    stream
        .write_all(b"GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Record only once the stream is open (its response head has arrived).
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let want = "data: {\"type\":\"recorded\",\"namespace\":\"default\",\"name\":\"web\",\"result\":\"Unschedulable\",\"node\":null,\"message\":\"0/1 nodes are available: 1 Insufficient cpu.\",\"attempt\":0}";
    let mut recorded = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(want) {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no decision event within 10 s: {seen}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 0, "stream closed early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        if !recorded && seen.contains("\r\n\r\n") {
            recorded = true;
            s.decisions.record(&report("web"));
        }
    }
    assert!(seen.contains("event: decision\n"), "{seen}");
    // Shutting down ends the open stream rather than waiting on it.
    let _ = s.stop.send(());
    tokio::time::timeout(Duration::from_secs(10), s.task)
        .await
        .unwrap_or_else(|_| panic!("the server did not stop with an event stream open"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
}

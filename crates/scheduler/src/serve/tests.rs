//! Each test starts the server on 127.0.0.1:0 and speaks plain HTTP/1.1 to it, comparing
//! whole status lines, content types and bodies.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::*;
use crate::metrics::{AttemptResult, MetricsRecorder};

/// A running server: its address, the state it reads, and how to stop it.
struct Server {
    addr: std::net::SocketAddr,
    health: Arc<Health>,
    metrics: Arc<PrometheusRecorder>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

async fn start(leader_election: bool) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let health = Arc::new(Health::new(leader_election));
    let metrics = Arc::new(PrometheusRecorder::new());
    let state = ServeState {
        health: Arc::clone(&health),
        metrics: Arc::clone(&metrics),
        web: None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, state, async {
        let _ = stopped.await;
    }));
    Server {
        addr,
        health,
        metrics,
        stop,
        task,
    }
}

/// What a response says: status code, `Content-Type`, body.
#[derive(Debug, PartialEq)]
struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

fn reply(status: u16, content_type: &str, body: &str) -> Reply {
    Reply {
        status,
        content_type: content_type.to_string(),
        body: body.to_string(),
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

async fn get(addr: std::net::SocketAddr, path: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send request");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("response within 10 s")
        .expect("read response");
    let raw = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
    let mut lines = head.lines();
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let mut content_type = String::new();
    let mut content_length = None;
    for line in lines {
        let (name, value) = line.split_once(": ").expect("header");
        match name.to_ascii_lowercase().as_str() {
            "content-type" => content_type = value.to_string(),
            "content-length" => content_length = value.parse::<usize>().ok(),
            "transfer-encoding" => panic!("unexpected chunked body"),
            _ => {}
        }
    }
    assert_eq!(content_length, Some(body.len()), "whole body read");
    Reply {
        status,
        content_type,
        body: body.to_string(),
    }
}

#[tokio::test]
async fn livez_and_healthz_answer_ok_from_the_start() {
    let server = start(false).await;
    assert_eq!(get(server.addr, "/livez").await, reply(200, TEXT, "ok"));
    assert_eq!(get(server.addr, "/healthz").await, reply(200, TEXT, "ok"));
    assert_eq!(
        get(server.addr, "/livez?verbose").await,
        reply(200, TEXT, "[+]ping ok\nlivez check passed\n")
    );
    assert_eq!(
        get(server.addr, "/healthz?verbose").await,
        reply(200, TEXT, "[+]ping ok\nhealthz check passed\n")
    );
    assert_eq!(
        get(server.addr, "/livez/ping").await,
        reply(200, TEXT, "ok")
    );
}

#[tokio::test]
async fn readyz_fails_until_the_handlers_synced() {
    let server = start(false).await;
    let not_synced =
        "[+]shutdown ok\n[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n";
    assert_eq!(
        get(server.addr, "/readyz").await,
        reply(500, TEXT, not_synced)
    );
    assert_eq!(
        get(server.addr, "/readyz?verbose").await,
        reply(500, TEXT, not_synced)
    );
    assert_eq!(
        get(server.addr, "/readyz/sched-handler-sync").await,
        reply(
            500,
            TEXT,
            "internal server error: handlers are not fully synchronized\n"
        )
    );

    server.health.set_handlers_synced();
    assert_eq!(get(server.addr, "/readyz").await, reply(200, TEXT, "ok"));
    assert_eq!(
        get(server.addr, "/readyz?verbose").await,
        reply(
            200,
            TEXT,
            "[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
        )
    );
    assert_eq!(
        get(server.addr, "/readyz/sched-handler-sync").await,
        reply(200, TEXT, "ok")
    );
}

#[tokio::test]
async fn with_leader_election_healthz_and_readyz_run_its_watchdog() {
    let server = start(true).await;
    server.health.set_handlers_synced();
    assert_eq!(
        get(server.addr, "/healthz?verbose").await,
        reply(200, TEXT, "[+]leaderElection ok\nhealthz check passed\n")
    );
    assert_eq!(
        get(server.addr, "/readyz?verbose").await,
        reply(
            200,
            TEXT,
            "[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
        )
    );

    server.health.set_leader_election_healthy(false);
    assert_eq!(
        get(server.addr, "/healthz").await,
        reply(
            500,
            TEXT,
            "[-]leaderElection failed: reason withheld\nhealthz check failed\n"
        )
    );
    assert_eq!(
        get(server.addr, "/readyz").await,
        reply(
            500,
            TEXT,
            "[-]leaderElection failed: reason withheld\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check failed\n"
        )
    );
    assert_eq!(
        get(server.addr, "/livez").await,
        reply(200, TEXT, "ok"),
        "liveness does not depend on leader election"
    );
}

#[tokio::test]
async fn excluded_checks_are_skipped_and_unknown_ones_warned_about() {
    let server = start(false).await;
    assert_eq!(
        get(server.addr, "/readyz?exclude=sched-handler-sync").await,
        reply(200, TEXT, "ok")
    );
    assert_eq!(
        get(
            server.addr,
            "/readyz?verbose&exclude=sched-handler-sync&exclude=nope"
        )
        .await,
        reply(
            200,
            TEXT,
            "[+]shutdown ok\n[+]sched-handler-sync excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
        )
    );
}

#[tokio::test]
async fn readyz_fails_once_shutting_down() {
    let server = start(false).await;
    server.health.set_handlers_synced();
    server.health.set_shutting_down();
    assert_eq!(
        get(server.addr, "/readyz").await,
        reply(
            500,
            TEXT,
            "[-]shutdown failed: reason withheld\n[+]sched-handler-sync ok\nreadyz check failed\n"
        )
    );
    assert_eq!(
        get(server.addr, "/readyz/shutdown").await,
        reply(
            500,
            TEXT,
            "internal server error: process is shutting down\n"
        )
    );
}

#[tokio::test]
async fn metrics_serves_the_recorders_openmetrics_text() {
    let server = start(false).await;
    server.metrics.observe_attempt(
        "kubesched",
        AttemptResult::Scheduled,
        Duration::from_millis(5),
    );
    let got = get(server.addr, "/metrics").await;
    assert_eq!(
        got,
        reply(200, CONTENT_TYPE, &server.metrics.encode()),
        "the body is the recorder's encoding"
    );
    assert!(got.body.contains(
        "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"kubesched\"} 1\n"
    ));
    assert!(got.body.ends_with("# EOF\n"));
}

#[tokio::test]
async fn other_paths_are_not_found() {
    let server = start(false).await;
    let not_found = reply(404, TEXT, "404 page not found\n");
    assert_eq!(get(server.addr, "/").await, not_found);
    assert_eq!(get(server.addr, "/configz").await, not_found);
    assert_eq!(get(server.addr, "/readyz/nope").await, not_found);
    assert_eq!(get(server.addr, "/livez/shutdown").await, not_found);
}

#[tokio::test]
async fn shutdown_future_stops_the_server() {
    let server = start(false).await;
    assert_eq!(get(server.addr, "/livez").await, reply(200, TEXT, "ok"));
    server.stop.send(()).expect("server still running");
    let result = tokio::time::timeout(Duration::from_secs(10), server.task)
        .await
        .expect("server stops within 10 s")
        .expect("server task did not panic");
    assert!(result.is_ok(), "serve returned {result:?}");
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "the listener is closed"
    );
}

//! Connections that send nothing useful are closed, watches are kept, and a client still
//! gets `/healthz` while idle sockets fill the connection limit. Timeouts are ~1 s here.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rstest::rstest;

use crate::harness::Cluster;

/// Long enough that a connection the server keeps is seen as kept, and a closed one is seen
/// closed well after the ~1 s timeouts.
const OBSERVE: Duration = Duration::from_secs(5);

fn cluster(max_connections: usize, header_read: u64, idle: u64) -> Cluster {
    Cluster::with_config(apiserver::Config {
        max_connections,
        header_read_timeout: Duration::from_secs(header_read),
        idle_timeout: Duration::from_secs(idle),
        ..apiserver::Config::default()
    })
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(OBSERVE)).expect("read timeout");
    s
}

/// Reads one response with a Content-Length body off a kept-alive connection.
fn read_response(s: &mut TcpStream) -> Option<(u16, String)> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => raw.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some((code, String::from_utf8_lossy(&body).into_owned()))
}

fn healthz(s: &mut TcpStream, addr: SocketAddr) -> Option<(u16, String)> {
    write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    read_response(s)
}

/// What the server did with the connection within [`OBSERVE`].
#[derive(Debug, PartialEq)]
enum Seen {
    Closed,
    Open,
}

fn closed_or_open(s: &mut TcpStream) -> Seen {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Seen::Closed,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Seen::Open;
            }
            Err(_) => return Seen::Closed,
        }
    }
}

/// What a client does before going quiet.
#[derive(Debug, Clone, Copy)]
enum Quiet {
    /// Connects and sends nothing.
    Silent,
    /// Sends half a request head (slowloris).
    HalfHead,
    /// Sends one request, reads the response, keeps the connection.
    AfterOneRequest,
}

#[rstest]
#[case::slowloris_head_is_closed_after_the_header_read_timeout(
    Quiet::HalfHead,
    1,
    60,
    Seen::Closed
)]
#[case::silent_new_connection_is_closed_after_the_header_read_timeout(
    Quiet::Silent,
    1,
    60,
    Seen::Closed
)]
#[case::kept_alive_connection_is_closed_after_the_idle_timeout(
    Quiet::AfterOneRequest,
    60,
    1,
    Seen::Closed
)]
#[case::kept_alive_connection_is_not_cut_by_the_header_read_timeout(
    Quiet::AfterOneRequest,
    1,
    60,
    Seen::Open
)]
fn quiet_connections_are_closed_by_their_timeout(
    #[case] quiet: Quiet,
    #[case] header_read: u64,
    #[case] idle: u64,
    #[case] want: Seen,
) {
    let c = cluster(100, header_read, idle);
    let mut s = connect(c.addr);
    match quiet {
        Quiet::Silent => {}
        Quiet::HalfHead => {
            write!(s, "GET /healthz HTTP/1.1\r\nHost: {}\r\n", c.addr).expect("write");
        }
        Quiet::AfterOneRequest => {
            assert_eq!(healthz(&mut s, c.addr), Some((200, "ok".to_string())));
        }
    }
    assert_eq!(closed_or_open(&mut s), want);
}

#[test]
fn a_watch_outlives_the_idle_and_header_read_timeouts() {
    let c = cluster(100, 1, 1);
    let mut watch = connect(c.addr);
    write!(
        watch,
        "GET /api/v1/namespaces/default/pods?watch=true HTTP/1.1\r\nHost: {}\r\n\r\n",
        c.addr
    )
    .expect("write");
    // Nothing happens for longer than both timeouts: the watch stays open.
    let mut head = [0u8; 12];
    watch.read_exact(&mut head).expect("response head");
    let quiet = closed_or_open(&mut watch);
    let (code, _) = c.post(
        "/api/v1/namespaces/default/pods",
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    );
    let mut event = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&event).contains("\"ADDED\"") {
        match watch.read(&mut buf) {
            Ok(n) if n > 0 => event.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    assert_eq!(
        (
            String::from_utf8_lossy(&head).into_owned(),
            quiet,
            code,
            String::from_utf8_lossy(&event).contains("\"ADDED\"")
        ),
        ("HTTP/1.1 200".to_string(), Seen::Open, 201, true)
    );
}

/// The connection limit's worth of idle and stalled sockets (timeouts far away) does not
/// lock a new client out: the idlest is closed to make room.
#[test]
fn healthz_answers_with_the_connection_limit_full_of_idle_sockets() {
    const LIMIT: usize = 50;
    let c = cluster(LIMIT, 60, 60);
    let mut idle: Vec<TcpStream> = (0..LIMIT).map(|_| connect(c.addr)).collect();
    // One request each proves the server accepted every one of them.
    let answered = idle
        .iter_mut()
        .map(|s| healthz(s, c.addr) == Some((200, "ok".to_string())))
        .filter(|ok| *ok)
        .count();
    for s in idle.iter_mut().skip(LIMIT / 2) {
        write!(s, "GET /healthz HTTP/1.1\r\nHost: {}\r\n", c.addr).expect("write");
    }
    let mut fresh = connect(c.addr);
    let got = healthz(&mut fresh, c.addr);
    let again = healthz(&mut fresh, c.addr);
    assert_eq!(
        (answered, got, again),
        (
            LIMIT,
            Some((200, "ok".to_string())),
            Some((200, "ok".to_string()))
        )
    );
}

/// Requests in flight are never cut to make room: with every connection watching, a new one
/// is closed unanswered, and the watches go on.
#[test]
fn a_new_connection_is_refused_while_every_connection_has_a_request_in_flight() {
    const LIMIT: usize = 5;
    let c = cluster(LIMIT, 60, 60);
    let mut watches: Vec<TcpStream> = (0..LIMIT).map(|_| connect(c.addr)).collect();
    let started = watches
        .iter_mut()
        .map(|w| {
            let sent = write!(
                w,
                "GET /api/v1/namespaces/default/pods?watch=true HTTP/1.1\r\nHost: {}\r\n\r\n",
                c.addr
            );
            let mut head = [0u8; 12];
            sent.is_ok() && w.read_exact(&mut head).is_ok() && &head == b"HTTP/1.1 200"
        })
        .filter(|ok| *ok)
        .count();
    let mut fresh = connect(c.addr);
    let refused = healthz(&mut fresh, c.addr);
    let still_watching = watches
        .iter_mut()
        .map(|w| {
            w.set_read_timeout(Some(Duration::from_millis(200))).is_ok()
                && closed_or_open(w) == Seen::Open
        })
        .filter(|open| *open)
        .count();
    assert_eq!((started, refused, still_watching), (LIMIT, None, LIMIT));
}

/// Under TLS the limit counts connections still in their handshake; one that stalls there
/// is closed to make room at once, not after the 10 s handshake timeout. (The accept queue
/// is first in, first out, so the stalled sockets are accepted before the client's.)
#[test]
fn a_stalled_tls_handshake_is_closed_to_make_room() {
    const LIMIT: usize = 5;
    let c = Cluster::with_config(apiserver::Config {
        max_connections: LIMIT,
        header_read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        tls: Some(crate::harness::test_tls()),
        ..apiserver::Config::default()
    });
    // The first bytes of a TLS record header, and then nothing.
    let _stalled: Vec<TcpStream> = (0..LIMIT)
        .map(|_| {
            let mut s = connect(c.addr);
            s.write_all(&[0x16, 0x03, 0x01]).expect("write");
            s
        })
        .collect();
    let written = std::fs::read_to_string(c.kubeconfig()).expect("kubeconfig");
    let client = c.kube_client_from_kubeconfig(&written);
    let listed = c.block_on(async {
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        api.get("default")
            .await
            .map(|ns| ns.metadata.name)
            .map_err(|e| e.to_string())
    });
    assert_eq!(listed, Ok(Some("default".to_string())));
}

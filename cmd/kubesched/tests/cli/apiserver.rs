//! `kubesched apiserver` as a user starts it: port 0, a kubeconfig written, health and
//! version answered over loopback HTTP.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Kills the server when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One plain HTTP/1.1 GET; returns the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("{e}"));
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut raw = String::new();
    conn.read_to_string(&mut raw)
        .unwrap_or_else(|e| panic!("{e}"));
    let status = raw.lines().next().unwrap_or_default().to_string();
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (status, body)
}

#[test]
fn starts_on_a_free_port_and_writes_a_kubeconfig() {
    let dir = std::env::temp_dir().join(format!("kubesched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.join("kubeconfig");
    let child = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(["apiserver", "--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting kubesched apiserver: {e}"));
    let mut server = Server(child);
    let stdout = server
        .0
        .stdout
        .take()
        .unwrap_or_else(|| panic!("no stdout"));
    // The first line names the address; reading it blocks until the server listens.
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    let url = line
        .trim()
        .strip_prefix("kubesched apiserver listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    let addr = url.trim_start_matches("http://").to_string();
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let (healthz, body) = get(&addr, "/healthz");
    let (version, _) = get(&addr, "/version");
    let written = std::fs::read_to_string(&kubeconfig).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (
            addr.starts_with("127.0.0.1:") && port != 0,
            healthz.starts_with("HTTP/1.1 200"),
            body.trim(),
            version.starts_with("HTTP/1.1 200"),
            written.contains(&format!("server: {url}")),
        ),
        (true, true, "ok", true, true),
        "address {addr}, kubeconfig:\n{written}"
    );
}

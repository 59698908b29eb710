//! `kubesched apiserver` as a user starts it: port 0, a kubeconfig written, health and
//! version answered over loopback HTTP; and with `--data-dir`, killed with SIGKILL in the
//! middle of writes and restarted with every acknowledged write still there.

// The helpers below run only inside this test: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::support::get;

/// Kills the server when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn starts_on_a_free_port_and_writes_a_kubeconfig() {
    let dir = std::env::temp_dir().join(format!("kubesched-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.join("kubeconfig");
    let (_server, url) = spawn(&["--kubeconfig".as_ref(), kubeconfig.as_os_str()]);
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
            healthz == 200,
            body.trim(),
            version == 200,
            written.contains(&format!("server: {url}")),
        ),
        (true, true, "ok", true, true),
        "address {addr}, kubeconfig:\n{written}"
    );
}

/// Starts `kubesched apiserver --listen 127.0.0.1:0` with `args`; returns it and its URL
/// once it listens (the first line it prints names the address).
fn spawn(args: &[&std::ffi::OsStr]) -> (Server, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(["apiserver", "--listen", "127.0.0.1:0"])
        .args(args)
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
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    let url = line
        .trim()
        .strip_prefix("kubesched apiserver listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    (server, url)
}

/// [`spawn`] with `--data-dir` and `extra` flags; returns the server and its address.
fn start(extra: &[&str], data_dir: &Path) -> (Server, String) {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--data-dir".as_ref(), data_dir.as_os_str()];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    let (server, url) = spawn(&args);
    (server, url.trim_start_matches("http://").to_string())
}

/// One HTTP/1.1 request with a JSON body; None when the connection fails (server killed).
fn send(addr: &str, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut conn = TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = String::new();
    conn.read_to_string(&mut raw).ok()?;
    let code = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    Some((code, body))
}

/// The first `"resourceVersion":"N"` in a JSON body.
fn resource_version(body: &str) -> u64 {
    body.split("\"resourceVersion\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {body}"))
}

/// What the server acknowledged of one configmap.
#[derive(Clone, Copy, Debug)]
enum Acked {
    /// Created at this resourceVersion.
    Created(u64),
    /// A delete was sent and not answered: it may or may not have happened.
    DeleteSent,
    /// Deleted.
    Deleted,
}

/// The configmap is as acknowledged.
fn check(addr: &str, name: &str, state: Acked) {
    let (code, body) = send(
        addr,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps/{name}"),
        "",
    )
    .unwrap_or_else(|| panic!("GET {name} after restart"));
    match state {
        Acked::Created(rv) => {
            assert_eq!((code, resource_version(&body)), (200, rv), "{name}: {body}")
        }
        Acked::Deleted => assert_eq!(code, 404, "{name} was deleted: {body}"),
        Acked::DeleteSent => assert!(code == 200 || code == 404, "{name}: {code} {body}"),
    }
}

#[test]
fn data_dir_keeps_every_acknowledged_write_across_sigkill() {
    let dir = std::env::temp_dir().join(format!("kubesched-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Every configmap written: its name and what the server acknowledged.
    let acked: Arc<Mutex<Vec<(String, Acked)>>> = Arc::default();
    let mut highest = 0u64;
    for round in 0..3 {
        let (mut server, addr) = start(&[], &dir);
        // Everything acknowledged before is there, as acknowledged.
        let before = acked.lock().unwrap_or_else(|e| panic!("{e}")).clone();
        for (name, state) in &before {
            check(&addr, name, *state);
        }
        // Writers create configmaps until the server is killed under them.
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (addr, acked, stop) = (addr.clone(), acked.clone(), stop.clone());
                std::thread::spawn(move || {
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let name = format!("r{round}-w{w}-{i}");
                        let body = format!(
                            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"i":"{i}"}}}}"#
                        );
                        match send(&addr, "POST", "/api/v1/namespaces/default/configmaps", &body) {
                            Some((201, body)) => acked
                                .lock()
                                .unwrap_or_else(|e| panic!("{e}"))
                                .push((name.clone(), Acked::Created(resource_version(&body)))),
                            Some((code, body)) => panic!("create {name}: {code} {body}"),
                            None => break,
                        }
                        // Every third one is deleted again: acknowledged deletes stay deleted.
                        if i % 3 != 0 {
                            continue;
                        }
                        let set = |state| {
                            let mut all = acked.lock().unwrap_or_else(|e| panic!("{e}"));
                            if let Some(entry) = all.iter_mut().rev().find(|(n, _)| *n == name) {
                                entry.1 = state;
                            }
                        };
                        set(Acked::DeleteSent);
                        let path = format!("/api/v1/namespaces/default/configmaps/{name}");
                        match send(&addr, "DELETE", &path, "") {
                            Some((200, _)) => set(Acked::Deleted),
                            Some((code, body)) => panic!("delete {name}: {code} {body}"),
                            None => break,
                        }
                    }
                })
            })
            .collect();
        let target = before.len() + 150 + 50 * round;
        while acked.lock().unwrap_or_else(|e| panic!("{e}")).len() < target
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        server.0.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
        let _ = server.0.wait();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap_or_else(|_| panic!("a writer panicked"));
        }
        let now = acked.lock().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            now.len() >= target,
            "only {} writes acknowledged in time",
            now.len()
        );
        let max = now
            .iter()
            .filter_map(|(_, s)| match s {
                Acked::Created(rv) => Some(*rv),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        assert!(
            max > highest,
            "resourceVersion went from {highest} to {max}"
        );
        highest = max;
    }
    // A last restart: all there, and new writes get a higher resourceVersion.
    let (_server, addr) = start(&[], &dir);
    let all = acked.lock().unwrap_or_else(|e| panic!("{e}")).clone();
    for (name, state) in &all {
        check(&addr, name, *state);
    }
    let (code, body) = send(
        &addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after"}}"#,
    )
    .unwrap_or_else(|| panic!("create after restart"));
    assert_eq!(code, 201, "{body}");
    assert!(resource_version(&body) > highest, "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn token_file_requires_the_token_and_the_kubeconfig_holds_it() {
    let dir = std::env::temp_dir().join(format!("kubesched-token-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        "# token,user,uid,groups\ntok-1,admin,1,\"system:masters\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.join("kubeconfig");
    let (kubeconfig_arg, tokens_arg) = (
        kubeconfig.display().to_string(),
        tokens.display().to_string(),
    );
    let (_server, addr) = start(
        &[
            "--token-file",
            &tokens_arg,
            "--kubeconfig",
            &kubeconfig_arg,
            "--simulate-kubelets",
        ],
        &dir.join("data"),
    );
    let without = send(&addr, "GET", "/api/v1/namespaces", "").map(|(c, _)| c);
    let mut conn = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
    write!(
        conn,
        "GET /api/v1/namespaces HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer tok-1\r\nConnection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut raw = String::new();
    conn.read_to_string(&mut raw)
        .unwrap_or_else(|e| panic!("{e}"));
    let (healthz, _) = get(&addr, "/healthz");
    let written = std::fs::read_to_string(&kubeconfig).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (
            without,
            raw.starts_with("HTTP/1.1 200"),
            healthz == 200,
            written.contains("token: \"tok-1\""),
        ),
        (Some(401), true, true, true),
        "{raw}\n{written}"
    );
}

/// The test certificate (for 127.0.0.1 and localhost) and its key.
fn test_tls_files() -> (String, String) {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/apiserver/tests/testdata"
    );
    (format!("{dir}/tls.crt"), format!("{dir}/tls.key"))
}

/// Runs `kubesched apiserver ARGS` expecting it to fail at start; returns the exit code and
/// stderr.
fn fails_to_start(args: &[&str]) -> (Option<i32>, String) {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    exit_of(&args)
}

#[test]
fn tls_flags_go_together_and_bad_files_are_named() {
    let (cert, key) = test_tls_files();
    let (code, stderr) = fails_to_start(&["--tls-cert-file", &cert]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-private-key-file <FILE>"), "{stderr}");
    let (code, stderr) = fails_to_start(&["--tls-private-key-file", &key]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-cert-file <FILE>"), "{stderr}");
    // The key given as the certificate.
    let (code, stderr) = fails_to_start(&["--tls-cert-file", &key, "--tls-private-key-file", &key]);
    assert_eq!(
        (code, stderr.trim()),
        (
            Some(2),
            format!("error: loading the TLS certificate: {key}: no certificate in PEM form: no CERTIFICATE block").as_str()
        )
    );
}

#[test]
fn tls_serves_https_and_kubectl_sends_the_token_over_it() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_default();
    assert!(
        Path::new(&kubectl).is_file(),
        "KUBECTL must name a kubectl binary (got {kubectl:?}); ./scripts/test sets it"
    );
    let dir = std::env::temp_dir().join(format!("kubesched-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "tok-1\n").unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.join("kubeconfig");
    let (cert, key) = test_tls_files();
    let (_server, url) = spawn(&[
        "--tls-cert-file".as_ref(),
        cert.as_ref(),
        "--tls-private-key-file".as_ref(),
        key.as_ref(),
        "--token-file".as_ref(),
        tokens.as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    let written = std::fs::read_to_string(&kubeconfig).unwrap_or_default();
    let kubectl_get = |kubeconfig: &Path| {
        let out = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--request-timeout=30s", "get", "namespaces", "-o", "name"])
            .env("KUBECACHEDIR", dir.join("cache"))
            .env("HOME", &dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {kubectl}: {e}"));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let good = kubectl_get(&kubeconfig);
    let wrong_kubeconfig = dir.join("wrong");
    std::fs::write(&wrong_kubeconfig, written.replace("tok-1", "tok-2"))
        .unwrap_or_else(|e| panic!("{e}"));
    let wrong = kubectl_get(&wrong_kubeconfig);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(
        written.contains(&format!(
            "server: {url}\n    certificate-authority-data: LS0t"
        )),
        "{written}"
    );
    assert!(good.0 && good.1.contains("namespace/default\n"), "{good:?}");
    assert!(!wrong.0 && wrong.2.contains("(Unauthorized)"), "{wrong:?}");
}

#[test]
fn a_second_server_on_the_same_data_dir_fails_naming_it() {
    let dir = std::env::temp_dir().join(format!("kubesched-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.display().to_string();
    let (mut first, addr) = start(&[], &dir);
    let (code, stderr) = fails_to_start(&["--data-dir", &data]);
    // The first one is unharmed.
    let (healthz, _) = get(&addr, "/healthz");
    // The lock goes with the process, also on SIGKILL: a restart after a crash starts.
    first.0.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    let _ = first.0.wait();
    let (_again, addr) = start(&[], &dir);
    let (again, _) = get(&addr, "/healthz");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (code, stderr.trim(), healthz == 200, again == 200),
        (
            Some(2),
            format!("error: opening the data directory: data directory {data} is in use by another kubesched apiserver (it holds the lock on {data}/lock)").as_str(),
            true,
            true,
        )
    );
}

/// `--cert-dir`: a self-signed certificate made on the first start and reused by the next,
/// which kubectl verifies through the kubeconfig and uses with the token.
#[test]
fn cert_dir_makes_a_certificate_once_and_kubectl_uses_it() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_default();
    assert!(
        Path::new(&kubectl).is_file(),
        "KUBECTL must name a kubectl binary (got {kubectl:?}); ./scripts/test sets it"
    );
    let dir = std::env::temp_dir().join(format!("kubesched-certdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "tok-1\n").unwrap_or_else(|e| panic!("{e}"));
    let (certs, kubeconfig) = (dir.join("certs"), dir.join("kubeconfig"));
    let args: [&std::ffi::OsStr; 6] = [
        "--cert-dir".as_ref(),
        certs.as_os_str(),
        "--token-file".as_ref(),
        tokens.as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ];
    let (first, _) = spawn(&args);
    let made = std::fs::read_to_string(certs.join("apiserver.crt")).unwrap_or_default();
    drop(first);
    let (_second, url) = spawn(&args);
    let reused = std::fs::read_to_string(certs.join("apiserver.crt")).unwrap_or_default();
    let out = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout=30s", "get", "namespaces", "-o", "name"])
        .env("KUBECACHEDIR", dir.join("cache"))
        .env("HOME", &dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {kubectl}: {e}"));
    let conflict = fails_to_start(&[
        "--cert-dir",
        &certs.display().to_string(),
        "--tls-cert-file",
        "x",
        "--tls-private-key-file",
        "y",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(made.starts_with("-----BEGIN CERTIFICATE-----"), "{made}");
    assert_eq!(
        (
            reused == made,
            url.starts_with("https://127.0.0.1:"),
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).contains("namespace/default\n"),
            conflict.0,
        ),
        (true, true, true, true, Some(2)),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        conflict.1
    );
}

/// The kubeconfig carries the bearer token: it is written readable by its owner only, and an
/// existing file (made 0644 before) is narrowed too.
#[cfg(unix)]
#[test]
fn kubeconfig_holding_the_token_is_written_0600_even_over_an_existing_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(format!("kubesched-mode-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "tok-1\n").unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, "old\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o644))
        .unwrap_or_else(|e| panic!("{e}"));
    let (_server, _url) = spawn(&[
        "--token-file".as_ref(),
        tokens.as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    let mode = std::fs::metadata(&kubeconfig).map(|m| m.permissions().mode() & 0o777);
    let written = std::fs::read_to_string(&kubeconfig).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (mode.ok(), written.contains("token: \"tok-1\"")),
        (Some(0o600), true),
        "{written}"
    );
}

/// --cors-allowed-origins and --allowed-hosts reach the server: an allowed origin and host
/// name are served, others get 403, and a pattern that is not a regular expression stops the
/// start naming it.
#[test]
fn browser_origin_and_host_flags_are_applied() {
    let (_server, url) = spawn(&[
        "--cors-allowed-origins".as_ref(),
        r"^https://dash\.example$".as_ref(),
        "--allowed-hosts".as_ref(),
        "kubesched.internal".as_ref(),
    ]);
    let addr = url.trim_start_matches("http://").to_string();
    let port = addr.rsplit(':').next().unwrap_or_default();
    let code = |extra: String| {
        let mut conn = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("{e}"));
        write!(
            conn,
            "GET /api/v1/namespaces HTTP/1.1\r\n{extra}Connection: close\r\n\r\n"
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut raw = String::new();
        let _ = conn.read_to_string(&mut raw);
        raw.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
    };
    let got = [
        code(format!("Host: {addr}\r\nOrigin: https://dash.example\r\n")),
        code(format!("Host: {addr}\r\nOrigin: https://evil.example\r\n")),
        code(format!("Host: kubesched.internal:{port}\r\n")),
        code(format!("Host: evil.example:{port}\r\n")),
    ];
    let (exit, stderr) = fails_to_start(&["--cors-allowed-origins", "(unclosed"]);
    assert_eq!(
        (got, exit, stderr.lines().next().unwrap_or_default()),
        (
            [Some(200), Some(403), Some(200), Some(403)],
            Some(2),
            "error: invalid CORS allowed origin \"(unclosed\": regex parse error:"
        ),
        "{stderr}"
    );
}

/// Runs `kubesched apiserver ARGS` and waits (bounded) for it to exit; returns the exit code
/// (None if it was still running and got killed) and stderr.
fn exit_of(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(["apiserver", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting kubesched apiserver: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (code, stderr)
}

/// The offset of the log record whose object contains `needle`.
fn record_offset(log: &[u8], needle: &str) -> usize {
    let mut off = 0;
    while off + 8 <= log.len() {
        let len = u32::from_le_bytes([log[off], log[off + 1], log[off + 2], log[off + 3]]) as usize;
        let end = (off + 8 + len).min(log.len());
        if String::from_utf8_lossy(&log[off + 8..end]).contains(needle) {
            return off;
        }
        off = end;
    }
    panic!("no record with {needle}")
}

#[test]
fn corrupt_length_mid_log_exits_2_naming_it_and_data_dir_repair_starts_from_what_is_left() {
    let dir = std::env::temp_dir().join(format!("kubesched-corrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let (mut server, addr) = start(&[], &dir);
        for name in ["cm-a", "cm-b", "cm-c"] {
            let body = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#
            );
            let created = send(
                &addr,
                "POST",
                "/api/v1/namespaces/default/configmaps",
                &body,
            );
            assert_eq!(created.map(|(code, _)| code), Some(201), "create {name}");
        }
        server.0.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
        let _ = server.0.wait();
    }
    // The log of a fresh directory that never compacted.
    let log = dir.join("wal-00000000000000000000.log");
    let mut data = std::fs::read(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let off = record_offset(&data, r#""name":"cm-b""#);
    // A flipped bit in the length: the record seems to run past the end of the file.
    data[off + 3] ^= 0x40;
    std::fs::write(&log, &data).unwrap_or_else(|e| panic!("{e}"));

    let (code, stderr) = exit_of(&["--data-dir".as_ref(), dir.as_os_str()]);
    let refused_untouched = std::fs::read(&log).ok() == Some(data.clone());
    let (_server, addr) = start(&["--data-dir-repair"], &dir);
    let found: Vec<u16> = ["cm-a", "cm-b", "cm-c"]
        .iter()
        .map(|name| {
            let path = format!("/api/v1/namespaces/default/configmaps/{name}");
            send(&addr, "GET", &path, "").map_or(0, |(code, _)| code)
        })
        .collect();
    let copies = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains(".log.corrupt-"))
                .count()
        })
        .unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (code, stderr.trim(), refused_untouched, found, copies),
        (
            Some(2),
            format!(
                "error: opening the data directory: {}: corrupt record at offset {off}: record runs past the end of the file, and 1 intact record(s) follow it, so it is not a torn tail (--data-dir-repair truncates the log there, keeping a copy)",
                log.display()
            )
            .as_str(),
            true,
            vec![200, 404, 404],
            1
        )
    );
}

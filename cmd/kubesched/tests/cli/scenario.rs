//! `kubesched scenario run`: every example scenario passes on its own in-process cluster; a
//! failed expectation exits 1 naming the step, what was expected and what happened; an
//! invalid file exits 2 naming the file, the field and what was expected, before anything
//! runs; `-o json`; and a scenario run on another cluster with --kubeconfig, in a namespace
//! of its own that is deleted at the end.

// Failing loudly is what test helpers are for.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{kubectl_ok, up, Scratch};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios")
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/scenario")
}

/// Runs `kubesched scenario run ARGS` in `dir`: (exit code, stdout, stderr).
fn scenario_run(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .current_dir(dir)
        .args(["scenario", "run"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kubesched scenario run: {e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each scenario's name, result and step results, from `-o json`.
fn summary(json: &str) -> Vec<(String, String, Vec<String>)> {
    let doc: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let s = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    doc["scenarios"]
        .as_array()
        .unwrap_or_else(|| panic!("no scenarios in {doc}"))
        .iter()
        .map(|sc| {
            let steps = sc["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|st| format!("{} {}", s(st, "type"), s(st, "result")))
                .collect();
            (s(sc, "name"), s(sc, "result"), steps)
        })
        .collect()
}

#[test]
fn every_example_scenario_passes() {
    let mut files: Vec<String> = std::fs::read_dir(examples())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    let args: Vec<&str> = files
        .iter()
        .map(String::as_str)
        .chain(["-o", "json"])
        .collect();
    let (code, stdout, stderr) = scenario_run(&examples(), &args);
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let passed = |name: &str, steps: &[&str]| {
        (
            name.to_string(),
            "passed".to_string(),
            steps.iter().map(|s| format!("{s} passed")).collect(),
        )
    };
    assert_eq!(
        summary(&stdout),
        vec![
            passed(
                "gated-pod",
                &["apply", "apply", "wait", "sleep", "expect", "patch", "wait"]
            ),
            passed(
                "node-unschedulable",
                &["apply", "apply", "wait", "expect", "patch", "apply", "wait", "patch", "wait"]
            ),
            passed(
                "preemption-with-pdb",
                &["apply", "wait", "wait", "apply", "wait", "wait", "expect"]
            ),
            passed(
                "requeue-on-node-add",
                &["apply", "apply", "wait", "apply", "wait"]
            ),
            passed(
                "topology-spread-min-domains",
                &["apply", "wait", "wait", "expect", "scale", "wait", "apply", "wait"]
            ),
            passed(
                "unschedulable-and-backoff",
                &["apply", "wait", "apply", "wait", "patch", "sleep", "expect", "delete", "wait"]
            ),
        ]
    );
}

#[test]
fn a_failed_expectation_exits_1_naming_the_step_what_was_expected_and_what_happened() {
    let (code, stdout, stderr) = scenario_run(&testdata(), &["wrong-node.yaml"]);
    let want_stdout = "\
=== wrong-node (wrong-node.yaml)
  The pod can only go to n1; the scenario expects it on n2.

step 1 (apply \"cluster\") passed: applied Node n1
step 2 (apply) passed: applied Pod default/p
step 3 (wait) passed: pod p is bound to n1
step 4 (expect \"on n2\") failed: expected pod p bound to n2; pod p is bound to n1
step 5 (sleep) skipped

pods, as the scheduler decided them (each pod's last attempt):
  default/p: Scheduled on n1
    scores on n1: ImageLocality 0, NodeResourcesBalancedAllocation 75, NodeResourcesFit 72, TaintToleration 100

FAILED
";
    let want_stderr = "error: scenario wrong-node: step 4 (expect \"on n2\"): expected pod p \
                       bound to n2; pod p is bound to n1\n";
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (Some(1), want_stdout, want_stderr)
    );
}

#[test]
fn an_invalid_file_exits_2_naming_the_file_the_field_and_what_was_expected() {
    // The valid file first: nothing runs when any file is invalid.
    let (code, stdout, stderr) = scenario_run(&testdata(), &["pending.yaml", "invalid.yaml"]);
    let want =
        "error: invalid.yaml: steps[1].expect.pendng: unknown field `pendng`, expected one of \
                `placements`, `pending`, `deleted`, `events`\n";
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (Some(2), "", want)
    );
}

#[test]
fn json_output_has_each_step_and_each_pods_explanation() {
    let (code, stdout, stderr) = scenario_run(&testdata(), &["pending.yaml", "-o", "json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let got: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let golden =
        std::fs::read_to_string(testdata().join("pending.json")).unwrap_or_else(|e| panic!("{e}"));
    let want: serde_json::Value = serde_json::from_str(&golden).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, want);
}

/// With --kubeconfig the scenario runs on that cluster (here `kubesched up`, whose
/// scheduler does the scheduling) in a namespace of its own; the namespace and the nodes
/// it applied are deleted at the end.
#[test]
fn with_kubeconfig_a_scenario_runs_in_its_own_namespace_and_cleans_up() {
    let scratch = Scratch::new("scenario-kubeconfig");
    let (_up, kubeconfig, _) = up(&scratch, &[]);
    let kc = kubeconfig.to_string_lossy().into_owned();
    let (code, stdout, stderr) = scenario_run(
        &testdata(),
        &["pending.yaml", "--kubeconfig", &kc, "-o", "json"],
    );
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let doc: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let namespace = doc["scenarios"][0]["pods"][0]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        namespace.starts_with("scenario-pending-"),
        "namespace {namespace:?}"
    );
    let left = (
        kubectl_ok(&kubeconfig, &["get", "nodes", "-o", "name"]),
        kubectl_ok(
            &kubeconfig,
            &["get", "pods", "-n", &namespace, "-o", "name"],
        ),
    );
    assert_eq!(left, (String::new(), String::new()));
}

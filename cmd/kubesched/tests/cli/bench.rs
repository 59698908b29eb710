//! `kubesched bench` as a user runs it: the real binary at tiny sizes, its JSON parsed and
//! checked field by field, and the flags it refuses. No timing is asserted.

// The helpers below run only inside these tests: failing loudly is what they are for.
#![allow(clippy::panic)]

use std::process::{Command, Output};

use serde_json::Value;

use crate::support::Scratch;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kubesched bench: {e}"))
}

fn json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not JSON: {e}"))
}

/// The fields whose values depend on the machine, replaced by their JSON type, so that the
/// rest is compared as a whole value.
fn without_measurements(mut v: Value) -> Value {
    for key in [
        "podsPerSecond",
        "attemptLatencyMs",
        "peakRssMiB",
        "samples",
        "durationSeconds",
    ] {
        if let Some(field) = v.get_mut(key) {
            let shape = match &*field {
                Value::Object(o) => {
                    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
                    keys.sort_unstable();
                    format!("object {}", keys.join(","))
                }
                Value::Array(a) if !a.is_empty() => "non-empty array".into(),
                Value::Number(n) if n.as_f64().is_some_and(|x| x > 0.0) => "positive".into(),
                Value::Null => "null".into(),
                other => format!("unexpected {other}"),
            };
            *field = Value::String(shape);
        }
    }
    v
}

#[test]
fn in_process_json_has_every_report_field() {
    let out = bench(&[
        "--mode",
        "in-process",
        "--workload",
        "SchedulingBasic",
        "--nodes",
        "10",
        "--init-pods",
        "5",
        "--pods",
        "20",
        "-o",
        "json",
    ]);
    assert_eq!(
        without_measurements(json(&out)),
        serde_json::json!({
            "workload": "SchedulingBasic",
            "mode": "in-process",
            "status": "ok",
            "nodes": 10,
            "initPods": 5,
            "measuredPods": 20,
            "scheduledPods": 20,
            "podsPerSecond": "object average,p50,p90,p99",
            "samples": "non-empty array",
            "attemptLatencyMs": "object max,p50,p90,p99",
            "peakRssMiB": "positive",
            "schedulerCpuSeconds": null,
            "clientQps": "n/a",
            "durationSeconds": "positive",
            "upstreamFloor": 680,
        })
    );
}

#[test]
fn all_runs_every_workload() {
    let out = bench(&[
        "--mode",
        "in-process",
        "--workload",
        "all",
        "--nodes",
        "30",
        "--init-pods",
        "5",
        "--pods",
        "20",
        "--timeout",
        "60",
        "-o",
        "json",
    ]);
    let reports = json(&out);
    let summary: Vec<(String, String, u64, u64)> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["workload"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
                r["scheduledPods"].as_u64().unwrap(),
                // No floor (null) as 0.
                r["upstreamFloor"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let expected: Vec<(String, String, u64, u64)> = [
        ("SchedulingBasic", "ok", 20, 680),
        ("SchedulingBasic/5000Nodes_50000Pods", "ok", 20, 810),
        ("SchedulingBasic/15000Nodes_150000Pods", "ok", 20, 0),
        ("SchedulingDaemonset", "ok", 20, 1100),
        ("TopologySpreading", "ok", 20, 460),
        ("TopologySpreading/15000Nodes_15000Pods", "ok", 20, 0),
        ("PreferredTopologySpreading", "ok", 20, 340),
        ("SchedulingNodeAffinity", "ok", 20, 220),
        ("SchedulingPodAntiAffinity", "ok", 20, 60),
        ("SchedulingPodAffinity", "ok", 20, 35),
        ("SchedulingPreferredPodAffinity", "ok", 20, 90),
        ("SchedulingPreferredPodAntiAffinity", "ok", 20, 90),
        ("MixedSchedulingBasePod", "ok", 20, 140),
        ("Unschedulable", "ok", 20, 590),
        ("SchedulingWithMixedChurn", "ok", 20, 710),
        ("PreemptionAsync", "ok", 20, 570),
    ]
    .into_iter()
    .map(|(w, s, n, f)| (w.to_string(), s.to_string(), n, f))
    .collect();
    assert_eq!(summary, expected);
}

#[test]
fn http_mode_is_the_default_and_goes_through_the_api_server() {
    let out = bench(&[
        "--workload",
        "SchedulingBasic",
        "--nodes",
        "20",
        "--init-pods",
        "10",
        "--pods",
        "50",
        "-o",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(
        (
            out.status.code(),
            r["mode"].as_str(),
            r["status"].as_str(),
            r["scheduledPods"].as_u64(),
            r["clientQps"].as_str(),
        ),
        (Some(0), Some("http"), Some("ok"), Some(50), Some("5000"))
    );
}

#[test]
fn unknown_workload_exits_2_and_lists_the_workloads() {
    let out = bench(&["--mode", "in-process", "--workload", "SchedulingEverything"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (
            out.status.code(),
            stderr.lines().next().map(str::to_string),
            stderr.contains("SchedulingWithMixedChurn, PreemptionAsync, all]")
        ),
        (
            Some(2),
            Some("error: invalid value 'SchedulingEverything' for '--workload <NAME>'".to_string()),
            true
        )
    );
}

/// `kubesched run` as the external scheduler, on the generated configuration.
fn kubesched_run_command() -> String {
    format!(
        "exec '{}' run --config {{config}} --port 0",
        env!("CARGO_BIN_EXE_kubesched")
    )
}

#[test]
fn scheduler_command_runs_kubesched_run_as_another_process_and_counts_its_binds() {
    let command = kubesched_run_command();
    let out = bench(&[
        "--workload",
        "SchedulingBasic",
        "--nodes",
        "20",
        "--init-pods",
        "10",
        "--pods",
        "50",
        "--scheduler-command",
        &command,
        "-o",
        "json",
    ]);
    let mut r = without_measurements(json(&out));
    // CPU-seconds of a run this short may round to 0.
    let cpu = r["schedulerCpuSeconds"].take();
    assert_eq!(
        (cpu.as_f64().is_some_and(|s| s >= 0.0), r),
        (
            true,
            serde_json::json!({
                "workload": "SchedulingBasic",
                "mode": "external",
                "status": "ok",
                "nodes": 20,
                "initPods": 10,
                "measuredPods": 50,
                "scheduledPods": 50,
                "podsPerSecond": "object average,p50,p90,p99",
                "samples": "non-empty array",
                "attemptLatencyMs": "null",
                "peakRssMiB": "positive",
                "schedulerCpuSeconds": null,
                "schedulerCommand": command,
                "clientQps": "5000",
                "durationSeconds": "positive",
                "upstreamFloor": 680,
            })
        )
    );
}

#[test]
fn compare_reports_kubesched_over_http_then_the_command_in_one_table() {
    let command = kubesched_run_command();
    let out = bench(&[
        "--workload",
        "SchedulingBasic",
        "--nodes",
        "10",
        "--init-pods",
        "5",
        "--pods",
        "20",
        "--scheduler-command",
        &command,
        "--compare",
        "-o",
        "table",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Each row's workload, mode, sizes and status; the measured columns vary.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            let mut kept = cells[..5].to_vec();
            kept.extend(cells.last());
            kept
        })
        .collect();
    assert_eq!(
        (out.status.code(), rows),
        (
            Some(0),
            vec![
                vec!["WORKLOAD", "MODE", "NODES", "INIT", "MEASURED", "STATUS"],
                vec!["SchedulingBasic", "http", "10", "5", "20", "ok"],
                vec!["SchedulingBasic", "external", "10", "5", "20", "ok"],
            ]
        ),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn scheduler_command_conflicts_with_mode_and_compare_needs_it() {
    let conflict = bench(&["--mode", "in-process", "--scheduler-command", "true"]);
    let alone = bench(&["--compare"]);
    let first_line = |o: &Output| {
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .next()
            .map(str::to_string)
    };
    assert_eq!(
        (
            conflict.status.code(),
            first_line(&conflict),
            alone.status.code(),
            first_line(&alone)
        ),
        (
            Some(2),
            Some(
                "error: the argument '--mode <MODE>' cannot be used with '--scheduler-command <CMD>'"
                    .to_string()
            ),
            Some(2),
            Some(
                "error: the following required arguments were not provided:".to_string()
            ),
        )
    );
}

/// Writes `text` as a configuration file in `scratch`.
fn config_file(scratch: &Scratch, text: &str) -> String {
    let path = scratch.path("config.yaml");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing the configuration: {e}"));
    path.display().to_string()
}

/// default-scheduler's profile with an addedAffinity no bench node matches: if the
/// benchmark runs the given configuration, no pod binds and the run times out.
const NO_NODE_MATCHES: &str = "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: no-such-label, operator: Exists}
";

#[rstest::rstest]
#[case::in_process("in-process")]
#[case::http("http")]
fn config_is_the_profile_kubesched_runs(#[case] mode: &str) {
    let scratch = Scratch::new(&format!("bench-config-{mode}"));
    let config = config_file(&scratch, NO_NODE_MATCHES);
    let out = bench(&[
        "--mode",
        mode,
        "--workload",
        "SchedulingBasic",
        "--nodes",
        "5",
        "--init-pods",
        "2",
        "--pods",
        "5",
        "--timeout",
        "2",
        "--config",
        &config,
        "-o",
        "json",
    ]);
    let r: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not JSON: {e}"));
    assert_eq!(
        (
            out.status.code(),
            r["status"].as_str(),
            r["reason"].as_str(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .map(str::to_string),
        ),
        (
            Some(1),
            Some("timedOut"),
            Some("0 of 2 initial pods bound in 2s"),
            Some("error: timed out after 2 s: SchedulingBasic".to_string()),
        )
    );
}

#[test]
fn config_without_a_default_scheduler_profile_exits_2_naming_the_file() {
    let scratch = Scratch::new("bench-config-no-default");
    let config = config_file(
        &scratch,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         profiles:\n- schedulerName: bin-packing\n",
    );
    let out = bench(&["--mode", "in-process", "--config", &config]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string()
        ),
        (
            Some(2),
            format!(
                "error: {config}: no profile has schedulerName \"default-scheduler\", the \
                 scheduler of the workloads' pods\n"
            )
        )
    );
}

/// A configuration's clientConnection qps/burst give way to the bench's client limits,
/// upstream scheduler_perf's unless --client-qps/--client-burst are given, with a warning
/// when they differ.
#[rstest::rstest]
#[case::upstreams_limits(
    &[],
    "5000",
    "warning: {config}: clientConnection.qps 10 and burst 20 are replaced by 5000 and 5000 in \
     http mode, as upstream's scheduler_perf raises them\n"
)]
#[case::qps_given_burst_follows(
    &["--client-qps", "20000"],
    "20000",
    "warning: {config}: clientConnection.qps 10 and burst 20 are replaced by 20000 and 20000 \
     in http mode, as --client-qps and --client-burst set them\n"
)]
#[case::limits_given_as_the_file_sets_them(&["--client-qps", "10", "--client-burst", "20"], "10 (burst 20)", "")]
fn config_client_limits_are_replaced_by_the_benchs(
    #[case] flags: &[&str],
    #[case] client_qps: &str,
    #[case] warning: &str,
) {
    let scratch = Scratch::new("bench-config-qps");
    let config = config_file(
        &scratch,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         clientConnection:\n  qps: 10\n  burst: 20\n",
    );
    let mut args = vec![
        "--workload",
        "SchedulingBasic",
        "--nodes",
        "5",
        "--init-pods",
        "2",
        "--pods",
        "5",
        "--config",
        &config,
        "-o",
        "json",
    ];
    args.extend_from_slice(flags);
    let out = bench(&args);
    let r = json(&out);
    assert_eq!(
        (
            r["scheduledPods"].as_u64(),
            r["clientQps"].as_str(),
            String::from_utf8_lossy(&out.stderr).to_string()
        ),
        (
            Some(5),
            Some(client_qps),
            warning.replace("{config}", &config)
        )
    );
}

#[rstest::rstest]
#[case::in_process_has_no_client(
    &["--mode", "in-process", "--client-qps", "100"],
    "error: --client-qps and --client-burst limit the scheduler's API client; --mode \
     in-process has none"
)]
#[case::qps_zero(
    &["--client-qps", "0"],
    "error: invalid value '0' for '--client-qps <QPS>': \"0\": a QPS above 0 is expected"
)]
#[case::qps_not_a_number(
    &["--client-qps", "fast"],
    "error: invalid value 'fast' for '--client-qps <QPS>': \"fast\": invalid float literal"
)]
#[case::burst_zero(
    &["--client-burst", "0"],
    "error: invalid value '0' for '--client-burst <N>': 0 is not in 1..=2147483647"
)]
#[case::unknown_feature_gate(
    &["--mode", "in-process", "--feature-gates", "NoSuchGate=true"],
    "error: invalid value 'NoSuchGate=true' for '--feature-gates <GATES>': unrecognized \
     feature gate: NoSuchGate (known: OpportunisticBatching)"
)]
fn refused_flags_exit_2_with_the_reason_first(#[case] args: &[&str], #[case] first_line: &str) {
    let out = bench(args);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .map(str::to_string)
        ),
        (Some(2), Some(first_line.to_string()))
    );
}

#[rstest::rstest]
#[case::config(&["--config", "unused.yaml"])]
#[case::feature_gates(&["--feature-gates", "OpportunisticBatching=false"])]
fn scheduler_flags_with_scheduler_command_need_compare(#[case] flags: &[&str]) {
    let mut args = vec!["--scheduler-command", "true"];
    args.extend_from_slice(flags);
    let out = bench(&args);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string()
        ),
        (
            Some(2),
            "error: --config and --feature-gates configure kubesched's own scheduler; with \
             --scheduler-command they need --compare (give the command its own flags)\n"
                .to_string()
        )
    );
}

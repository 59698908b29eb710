//! Golden tests of `kubesched simulate`: the real binary on realistic clusters.
//!
//! Each case is a folder under `tests/testdata/simulate/` with `args` (the command line
//! after `simulate`, one argument per line; the files of `-f`, `--config` and `--capacity` are relative
//! to the case folder, or to the repository when written `@examples/...`), `stdout` (expected output) and optionally
//! `stderr` and `exit` (expected exit code, default 0). `UPDATE_GOLDEN=1 cargo test`
//! rewrites the expected files from the current output (then review the diff).
//!
//! A case's `config.yaml` may name two extenders by placeholder: `<live-extender>`, the
//! example extender of `examples/extender/` started for the case, and `<down-extender>`,
//! a port where nothing listens. The test writes the configuration with the real URLs and
//! puts the placeholders back in the output; `extender_requests` holds the requests the
//! live extender logged, in order.

use std::path::{Path, PathBuf};
use std::process::Command;

use rstest::rstest;

use crate::support::{down_extender_url, ExampleExtender, Scratch};

const LIVE: &str = "<live-extender>";
const DOWN: &str = "<down-extender>";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[rstest]
#[case::example_cluster_json("example_cluster_json")]
#[case::example_cluster_table("example_cluster_table")]
#[case::resource_pressure("resource_pressure")]
#[case::node_affinity("node_affinity")]
#[case::volume_zone("volume_zone")]
#[case::example_volumes_table("example_volumes_table")]
#[case::volume_limits("volume_limits")]
#[case::volume_restrictions("volume_restrictions")]
#[case::volume_binding("volume_binding")]
#[case::volume_binding_table("volume_binding_table")]
#[case::volume_reasons_per_claim_and_node("volume_reasons")]
#[case::dynamic_resources_gives_one_device_to_one_claim("dynamic_resources")]
#[case::dynamic_resources_reasons_name_request_and_selector("dynamic_resources_selector")]
#[case::dynamic_resources_extended_resource_gets_a_device("dynamic_resources_extended")]
#[case::bin_packing_config("bin_packing_config")]
#[case::priority_orders_the_queue("priority_orders_the_queue")]
#[case::preemption("preemption")]
#[case::preemption_table("preemption_table")]
#[case::preemptor_keeps_its_nominated_node("preemptor_keeps_its_nominated_node")]
#[case::no_nodes("no_nodes")]
#[case::topology_spread("topology_spread")]
#[case::system_default_spreading("system_default_spreading")]
#[case::pod_affinity("pod_affinity")]
#[case::invalid_quantity_exits_2("invalid_quantity")]
#[case::invalid_config_exits_2("invalid_config")]
#[case::invalid_plugin_args_exit_2("invalid_plugin_args")]
#[case::missing_file_exits_2("missing_file")]
#[case::extender_filter_rejects_and_weighted_prioritize_places("extender_filter_prioritize")]
#[case::extender_verdicts_in_the_table("extender_table")]
#[case::extender_preempt_is_consulted("extender_preempt")]
#[case::extender_bind_error_fails_the_pod("extender_bind_error")]
#[case::ignorable_extender_down_is_skipped("extender_down_ignorable")]
#[case::extender_down_fails_the_attempt("extender_down")]
#[case::capacity_of_the_example_cluster("capacity_example_table")]
#[case::capacity_of_the_example_cluster_json("capacity_example_json")]
#[case::capacity_stops_at_max_replicas("capacity_max_replicas")]
#[case::capacity_pod_file_holding_a_node_exits_2("capacity_pod_file_holds_a_node")]
#[case::capacity_pod_without_a_profile_exits_2("capacity_scheduler_name_without_profile")]
fn golden(#[case] name: &str) {
    let dir = repo_root()
        .join("cmd/kubesched/tests/testdata/simulate")
        .join(name);
    let scratch = Scratch::new(&format!("simulate-{name}"));
    let config = read(&dir.join("config.yaml")).unwrap_or_default();
    let live = config.contains(LIVE).then(ExampleExtender::start);
    let down = config.contains(DOWN).then(down_extender_url);
    // The configuration with the real extender URLs, beside a copy of the case's files.
    let config_path = if live.is_some() || down.is_some() {
        let mut text = config.clone();
        if let Some(l) = &live {
            text = text.replace(LIVE, &l.url);
        }
        if let Some(d) = &down {
            text = text.replace(DOWN, d);
        }
        let path = scratch.path("config.yaml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        Some(path)
    } else {
        None
    };
    let args_text = read(&dir.join("args")).unwrap_or_default();
    // Values of -f and --config are files: relative to the case folder, or to the
    // repository with a leading `@`.
    let mut args: Vec<String> = Vec::new();
    let mut path_next = false;
    for l in args_text.lines().filter(|l| !l.trim().is_empty()) {
        let arg = if !path_next {
            l.to_string()
        } else if let (Some(p), "config.yaml") = (&config_path, l) {
            p.display().to_string()
        } else if let Some(rest) = l.strip_prefix('@') {
            repo_root().join(rest).display().to_string()
        } else {
            dir.join(l).display().to_string()
        };
        path_next = matches!(l, "-f" | "--filename" | "--config" | "--capacity");
        args.push(arg);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kubesched"))
        .arg("simulate")
        .args(&args)
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("running kubesched: {e}"));
    let normalize = |s: &[u8]| {
        let mut s = String::from_utf8_lossy(s)
            .replace(&repo_root().display().to_string(), "<repo>")
            .replace(&dir.display().to_string(), "<case>")
            .replace(&scratch.path("").display().to_string(), "<case>/");
        if let Some(l) = &live {
            s = s.replace(&l.url, LIVE);
        }
        if let Some(d) = &down {
            s = s.replace(d, DOWN);
        }
        s
    };
    let stdout = normalize(&out.stdout);
    let stderr = normalize(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    let requests = live.map(|l| l.stop().join("\n") + "\n");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(r) = &requests {
            std::fs::write(dir.join("extender_requests"), r).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(dir.join("stdout"), &stdout).unwrap_or_else(|e| panic!("{e}"));
        if stderr.is_empty() {
            let _ = std::fs::remove_file(dir.join("stderr"));
        } else {
            std::fs::write(dir.join("stderr"), &stderr).unwrap_or_else(|e| panic!("{e}"));
        }
        if code == 0 {
            let _ = std::fs::remove_file(dir.join("exit"));
        } else {
            std::fs::write(dir.join("exit"), format!("{code}\n")).unwrap_or_else(|e| panic!("{e}"));
        }
        return;
    }
    let want_code: i32 = read(&dir.join("exit")).map_or(0, |s| s.trim().parse().unwrap_or(-2));
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str(), requests),
        (
            want_code,
            read(&dir.join("stdout")).unwrap_or_default().as_str(),
            read(&dir.join("stderr")).unwrap_or_default().as_str(),
            read(&dir.join("extender_requests"))
        ),
        "case {name}: exit code, stdout, stderr, extender requests"
    );
}

//! Writes a cluster snapshot for measuring `kubesched simulate --capacity` at scale, so that
//! no large file needs to live in the repository: NODES nodes (default 5,000) of the
//! benchmark's default shape (4 CPU, 32Gi, 110 pods; upstream scheduler_perf's fake node)
//! spread over three zones, as one JSON `v1 List`; with `--pod`, the benchmark's pause pod
//! (100m CPU / 500Mi) named `pause` instead, to copy.
//!
//! ```text
//! cargo run --release -p kubesched-bench --example capacity_snapshot -- 5000 > nodes.json
//! cargo run --release -p kubesched-bench --example capacity_snapshot -- --pod > pause.json
//! kubesched simulate -f nodes.json --capacity pause.json --max-replicas 1000 -o table
//! ```
//!
//! Numbers: docs/performance.md.

use std::io::Write;
use std::process::ExitCode;

use bench::objects::{node_instance, parse_node, parse_pod};
use bench::workload::templates::{NODE_DEFAULT, POD_DEFAULT};

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

fn snapshot(arg: Option<&str>) -> Result<serde_json::Value, String> {
    if arg == Some("--pod") {
        let mut pod = parse_pod(POD_DEFAULT).map_err(|e| e.to_string())?;
        pod.metadata.generate_name = None;
        pod.metadata.name = Some("pause".into());
        return serde_json::to_value(&pod).map_err(|e| e.to_string());
    }
    let count: usize = match arg {
        None => 5000,
        Some(n) => n
            .parse()
            .map_err(|e| format!("NODES must be a number, got {n:?}: {e}"))?,
    };
    let template = parse_node(NODE_DEFAULT).map_err(|e| e.to_string())?;
    let items = (0..count)
        .map(|i| {
            let node = node_instance(&template, i, Some(ZONES[i % ZONES.len()]));
            serde_json::to_value(&node).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

fn main() -> ExitCode {
    let arg = std::env::args().nth(1);
    let result = snapshot(arg.as_deref()).and_then(|doc| {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &doc)
            .map_err(|e| e.to_string())
            .and_then(|()| writeln!(out).map_err(|e| e.to_string()))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

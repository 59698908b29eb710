//! A pod's last attempt written as pod annotations under kube-scheduler-simulator's keys, so
//! that tools built for the simulator (its web UI, scripts reading `filter-result`) read
//! kubesched's decisions. Off by default: every attempt costs a write to the API server.
//!
//! The values follow the simulator's result store: JSON objects with keys sorted, every
//! leaf a string.
//! - `prefilter-result-status`, `prescore-result`: plugin → `success`, or the status
//!   message (empty for a plugin that skipped);
//! - `filter-result`: node → plugin (or extender) → `passed`, or the rejection's message;
//!   plugins after a node's first rejection did not run and are absent;
//! - `postfilter-result`: node → {} for each node preemption examined, and
//!   `DefaultPreemption` → `preemption victim` on the node it nominated;
//! - `score-result`: node → plugin → score, `finalscore-result`: the same times the
//!   plugin's weight;
//! - `selected-node`: the node chosen, empty when none was.
//!
//! Where this differs from the simulator, on purpose: `score-result` holds the scores after
//! NormalizeScore (what the decision log keeps), where the simulator records them before;
//! for plugins without NormalizeScore they are the same. Keys for the binding cycle
//! (`reserve-result`, `permit-result`, `prebind-result`, `bind-result`) and
//! `prefilter-result` (PreFilterResult node names) are not written: the decision log does
//! not hold them.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::decisions::{DecisionEvent, Decisions};
use crate::scheduler::Scheduler;

/// The simulator's annotation key prefix.
pub const PREFIX: &str = "kube-scheduler-simulator.sigs.k8s.io/";
pub const PREFILTER_RESULT_STATUS: &str =
    "kube-scheduler-simulator.sigs.k8s.io/prefilter-result-status";
pub const FILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/filter-result";
pub const POSTFILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/postfilter-result";
pub const PRESCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/prescore-result";
pub const SCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/score-result";
pub const FINALSCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/finalscore-result";
pub const SELECTED_NODE: &str = "kube-scheduler-simulator.sigs.k8s.io/selected-node";

/// The simulator's word for a node a filter passed.
const PASSED: &str = "passed";
/// The simulator's word for an extension point that succeeded.
const SUCCESS: &str = "success";
/// The simulator's word for the node preemption nominated.
const PREEMPTION_VICTIM: &str = "preemption victim";

type NodeMap = BTreeMap<String, BTreeMap<String, String>>;

fn entries(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flatten()
}

/// `success` for a `{code, reasons}` status that succeeded, its reasons joined otherwise (as
/// the framework's Status message).
fn status_text(status: &Value, success: &str) -> String {
    if status["code"].as_str() == Some("Success") {
        return success.to_string();
    }
    status["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

fn encode<T: serde::Serialize>(v: &T) -> String {
    // Maps of strings always serialize.
    serde_json::to_string(v).unwrap_or_default()
}

/// The annotations for one decision (`simulate -o json`'s per-pod shape); `weights` are
/// the Score plugins' weights of the pod's profile.
pub fn annotations(decision: &Value, weights: &HashMap<&str, i64>) -> BTreeMap<String, String> {
    let per_plugin = |key: &str| -> BTreeMap<String, String> {
        entries(&decision[key])
            .map(|(plugin, s)| (plugin.clone(), status_text(s, SUCCESS)))
            .collect()
    };
    let filter: NodeMap = entries(&decision["filter"])
        .map(|(node, plugins)| {
            let verdicts = entries(plugins)
                .map(|(p, s)| (p.clone(), status_text(s, PASSED)))
                .collect();
            (node.clone(), verdicts)
        })
        .collect();
    let mut post_filter: NodeMap = entries(&decision["preemption"])
        .map(|(node, _)| (node.clone(), BTreeMap::new()))
        .collect();
    if let Some(node) = decision["nominatedNode"].as_str() {
        post_filter.entry(node.to_string()).or_default().insert(
            plugins::names::DEFAULT_PREEMPTION.to_string(),
            PREEMPTION_VICTIM.to_string(),
        );
    }
    let mut score = NodeMap::new();
    let mut final_score = NodeMap::new();
    for (node, plugins) in entries(&decision["score"]) {
        for (plugin, v) in entries(plugins) {
            let raw = v.as_i64().unwrap_or(0);
            let weight = weights.get(plugin.as_str()).copied().unwrap_or(1);
            score
                .entry(node.clone())
                .or_default()
                .insert(plugin.clone(), raw.to_string());
            final_score
                .entry(node.clone())
                .or_default()
                .insert(plugin.clone(), raw.saturating_mul(weight).to_string());
        }
    }
    let selected = match decision["result"].as_str() {
        Some("Scheduled") => decision["node"].as_str().unwrap_or_default(),
        _ => "",
    };
    BTreeMap::from([
        (
            PREFILTER_RESULT_STATUS.to_string(),
            encode(&per_plugin("preFilter")),
        ),
        (FILTER_RESULT.to_string(), encode(&filter)),
        (POSTFILTER_RESULT.to_string(), encode(&post_filter)),
        (PRESCORE_RESULT.to_string(), encode(&per_plugin("preScore"))),
        (SCORE_RESULT.to_string(), encode(&score)),
        (FINALSCORE_RESULT.to_string(), encode(&final_score)),
        (SELECTED_NODE.to_string(), selected.to_string()),
    ])
}

/// Writes each recorded attempt's annotations onto its pod, until the task is aborted. An attempt whose annotations equal the last ones written for the pod is not
/// written again (a rejected pod retried without change costs no write).
pub async fn run_writer(client: kube::Client, scheduler: Scheduler, decisions: Decisions) {
    let mut events = decisions.subscribe();
    let mut written: HashMap<String, BTreeMap<String, String>> = HashMap::new();
    loop {
        let (namespace, name) = match events.recv().await {
            Ok(DecisionEvent::Recorded(o)) => (o.namespace, o.name),
            Ok(DecisionEvent::Forgotten { namespace, name }) => {
                written.remove(&format!("{namespace}/{name}"));
                continue;
            }
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "simulator annotations fell behind; some attempts are not written"
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let Some(decision) = decisions.get(&namespace, &name) else {
            continue;
        };
        let profile = decision["schedulerName"].as_str().unwrap_or_default();
        let weights: HashMap<&str, i64> = scheduler
            .profile(profile)
            .map(|f| f.score_weights().into_iter().collect())
            .unwrap_or_default();
        let values = annotations(&decision, &weights);
        let key = format!("{namespace}/{name}");
        if written.get(&key) == Some(&values) {
            continue;
        }
        let patch = serde_json::json!({ "metadata": { "annotations": values } });
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                written.insert(key, values);
            }
            Err(e) => tracing::debug!(pod = %key, error = %e, "writing simulator annotations"),
        }
    }
}

#[cfg(test)]
mod tests;

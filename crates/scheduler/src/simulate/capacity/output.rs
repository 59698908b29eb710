//! Rendering a [`CapacityReport`]: a sentence and a table for people, JSON with the same
//! facts for machines.

use std::fmt::Write as _;

use serde::Serialize;

use super::{CapacityReport, CapacityStop};
use crate::simulate::PodResult;

/// The run's end, as the text report says it after the count.
fn stop_message(stop: &CapacityStop) -> String {
    match stop {
        CapacityStop::Unschedulable { message, .. } => format!("then: {message}"),
        CapacityStop::Failed { message } => format!("then a copy failed: {message}"),
        CapacityStop::MaxReplicas(n) => format!("stopped at --max-replicas {n}"),
        CapacityStop::PodSlots(n) => format!(
            "stopped: the nodes have {n} pod slots in all (status.allocatable.pods) and no \
             plugin refused a copy beyond them"
        ),
    }
}

/// `N more replicas fit` (or `1 more replica fits`).
fn count_phrase(n: usize) -> String {
    if n == 1 {
        "1 more replica fits".to_string()
    } else {
        format!("{n} more replicas fit")
    }
}

/// How many of the snapshot's pending pods ended in each result, in the results' order.
fn pending_counts(report: &CapacityReport) -> Vec<(&'static str, usize)> {
    let order = [
        PodResult::Scheduled,
        PodResult::Unschedulable,
        PodResult::Error,
        PodResult::Gated,
        PodResult::Skipped,
        PodResult::Preempted,
    ];
    order
        .iter()
        .map(|r| {
            let n = report
                .pending
                .pods
                .iter()
                .filter(|p| p.result == *r)
                .count();
            (r.as_str(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The report as text: the answer in one sentence, the copies per node, and what became
/// of the snapshot's own pending pods.
pub fn to_table(report: &CapacityReport) -> String {
    let mut out = format!(
        "{}; {}\n",
        count_phrase(report.replicas),
        stop_message(&report.stop)
    );
    if !report.nodes.is_empty() {
        let header = ("NODE", "REPLICAS");
        let width = report
            .nodes
            .iter()
            .map(|(n, _)| n.chars().count())
            .chain(std::iter::once(header.0.len()))
            .max()
            .unwrap_or(0);
        let _ = writeln!(out, "\n{:width$}   {}", header.0, header.1);
        for (node, count) in &report.nodes {
            let _ = writeln!(out, "{node:width$}   {count}");
        }
    }
    let counts = pending_counts(report);
    if !counts.is_empty() {
        let parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let _ = writeln!(
            out,
            "\nScheduled first, the snapshot's {} pending pod(s): {} (simulate without \
             --capacity explains each).",
            report.pending.pods.len(),
            parts.join(", ")
        );
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CapacityJson<'a> {
    pod: PodJson<'a>,
    replicas: usize,
    /// Node name → copies placed there, by node name.
    nodes: serde_json::Map<String, serde_json::Value>,
    stop: StopJson,
    /// The snapshot's pending pods, scheduled before the copies.
    pending: Vec<PendingJson<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodJson<'a> {
    namespace: &'a str,
    name: &'a str,
    scheduler_name: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StopJson {
    /// `Unschedulable`, `Failed`, `MaxReplicas` or `PodSlots`.
    reason: &'static str,
    /// The FailedScheduling message, or what stopped the run in words.
    message: String,
    /// For `Unschedulable`: how many nodes gave each reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason_counts: Option<serde_json::Map<String, serde_json::Value>>,
    /// For `MaxReplicas` and `PodSlots`: the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PendingJson<'a> {
    namespace: &'a str,
    name: &'a str,
    result: &'static str,
    node: Option<&'a str>,
}

impl From<&CapacityStop> for StopJson {
    fn from(stop: &CapacityStop) -> Self {
        let (reason, message, reason_counts, limit) = match stop {
            CapacityStop::Unschedulable {
                message,
                reason_counts,
            } => (
                "Unschedulable",
                message.clone(),
                Some(
                    reason_counts
                        .iter()
                        .map(|(r, n)| (r.clone(), serde_json::Value::from(*n)))
                        .collect(),
                ),
                None,
            ),
            CapacityStop::Failed { message } => ("Failed", message.clone(), None, None),
            CapacityStop::MaxReplicas(n) => (
                "MaxReplicas",
                stop_message(stop),
                None,
                Some(u64::try_from(*n).unwrap_or(u64::MAX)),
            ),
            CapacityStop::PodSlots(n) => ("PodSlots", stop_message(stop), None, Some(*n)),
        };
        StopJson {
            reason,
            message,
            reason_counts,
            limit,
        }
    }
}

/// The report as one pretty-printed JSON document.
pub fn to_json(report: &CapacityReport) -> String {
    let doc = CapacityJson {
        pod: PodJson {
            namespace: &report.namespace,
            name: &report.name,
            scheduler_name: &report.scheduler_name,
        },
        replicas: report.replicas,
        nodes: report
            .nodes
            .iter()
            .map(|(n, c)| (n.clone(), serde_json::Value::from(*c)))
            .collect(),
        stop: StopJson::from(&report.stop),
        pending: report
            .pending
            .pods
            .iter()
            .map(|p| PendingJson {
                namespace: &p.namespace,
                name: &p.name,
                result: p.result.as_str(),
                node: p.node.as_deref(),
            })
            .collect(),
    };
    // Serializing plain strings and integers cannot fail.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

//! `kubesched simulate`: schedule the pending pods of a cluster snapshot offline, one by one
//! in queue order, and explain every decision per node and per plugin.
//!
//! The same scheduling cycle as the live scheduler ([`crate::schedule_one`]), fed from
//! files instead of informers: each placement is applied to the in-memory snapshot before
//! the next pod is scheduled. Nothing is bound; Reserve and Permit run, binding plugins do
//! not.

pub mod input;
pub mod output;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framework::{CycleState, PodInfo, QueuedPodInfo, Snapshot, Status};

use crate::runtime::Framework;
use crate::schedule_one::{Explanation, ScheduleAlgorithm, ScheduleError};

pub use input::{ClusterInput, InputError};

/// The scheduler name of pods that do not set one (API server defaulting).
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// What happened to a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodResult {
    Scheduled,
    Unschedulable,
    Error,
    /// Held back by a PreEnqueue plugin (scheduling gates).
    Gated,
    /// Not for any profile of this scheduler, or being deleted.
    Skipped,
}

impl PodResult {
    pub fn as_str(self) -> &'static str {
        match self {
            PodResult::Scheduled => "Scheduled",
            PodResult::Unschedulable => "Unschedulable",
            PodResult::Error => "Error",
            PodResult::Gated => "Gated",
            PodResult::Skipped => "Skipped",
        }
    }
}

/// The outcome and explanation for one pending pod.
#[derive(Debug, Clone)]
pub struct PodReport {
    pub namespace: String,
    pub name: String,
    pub scheduler_name: String,
    pub node: Option<String>,
    pub result: PodResult,
    /// The FailedScheduling message (or why the pod was gated, skipped or errored).
    pub message: Option<String>,
    /// `(reason, node count)` of an unschedulable pod's message.
    pub reason_counts: Vec<(String, usize)>,
    /// Per-plugin, per-node detail, for pods that went through a scheduling cycle.
    pub explanation: Option<Explanation>,
}

/// The result of a simulation.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub pods: Vec<PodReport>,
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Seed of the tie-breaking RNG: the same input and seed give the same placements.
    pub seed: u64,
    /// The configuration's global `percentageOfNodesToScore`.
    pub percentage_of_nodes_to_score: Option<i32>,
}

/// Schedules the pending pods of `input` with `profiles` (the first profile's QueueSort
/// orders the queue, as upstream requires every profile to share it). The report lists
/// pods in the order they were scheduled, then the gated and skipped ones in input order.
pub fn run(input: &ClusterInput, profiles: &[Framework], options: &Options) -> Report {
    let mut snapshot = build_snapshot(input);
    let by_name: HashMap<&str, &Framework> =
        profiles.iter().map(|f| (f.profile_name(), f)).collect();
    let mut report = Report::default();
    // Pods that never enter the queue (gated, skipped) are listed after the scheduled ones.
    let mut held_back: Vec<PodReport> = Vec::new();
    let base = Instant::now();
    let mut queue: Vec<QueuedPodInfo> = Vec::new();
    for (i, pod) in input.pods.iter().enumerate() {
        if is_terminal(pod) || has_node(pod) {
            continue;
        }
        let info = Arc::new(PodInfo::new(pod.clone()));
        let scheduler_name = scheduler_name(pod);
        let skipped = |message: String| PodReport {
            namespace: info.namespace().to_string(),
            name: info.name().to_string(),
            scheduler_name: scheduler_name.clone(),
            node: None,
            result: PodResult::Skipped,
            message: Some(message),
            reason_counts: Vec::new(),
            explanation: None,
        };
        let Some(fwk) = by_name.get(scheduler_name.as_str()) else {
            held_back.push(skipped(format!(
                "schedulerName {scheduler_name:?} is not a profile of this scheduler"
            )));
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            report
                .pods
                .push(skipped("pod is being deleted".to_string()));
            continue;
        }
        let gate = fwk.run_pre_enqueue_plugins(&info);
        if !gate.is_success() {
            let mut r = skipped(gate.message());
            r.result = PodResult::Gated;
            held_back.push(r);
            continue;
        }
        let ts = base + Duration::from_nanos(i as u64);
        queue.push(QueuedPodInfo::new(info, ts));
    }
    if let Some(first) = profiles.first() {
        queue.sort_by(|a, b| {
            if first.queue_sort_less(a, b) {
                std::cmp::Ordering::Less
            } else if first.queue_sort_less(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
    }
    let mut algorithms: HashMap<&str, ScheduleAlgorithm> = profiles
        .iter()
        .map(|f| {
            (
                f.profile_name(),
                ScheduleAlgorithm::new(options.seed, options.percentage_of_nodes_to_score),
            )
        })
        .collect();
    for q in queue {
        let pod = &q.pod_info;
        let scheduler_name = scheduler_name(&pod.pod);
        let (Some(fwk), Some(algo)) = (
            by_name.get(scheduler_name.as_str()),
            algorithms.get_mut(scheduler_name.as_str()),
        ) else {
            continue;
        };
        report
            .pods
            .push(schedule(fwk, algo, pod, &mut snapshot, scheduler_name));
    }
    report.pods.extend(held_back);
    report
}

fn schedule(
    fwk: &Framework,
    algo: &mut ScheduleAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &mut Snapshot,
    scheduler_name: String,
) -> PodReport {
    let mut explanation = Explanation::default();
    let mut state = CycleState::new();
    let mut report = PodReport {
        namespace: pod.namespace().to_string(),
        name: pod.name().to_string(),
        scheduler_name,
        node: None,
        result: PodResult::Error,
        message: None,
        reason_counts: Vec::new(),
        explanation: None,
    };
    match algo.schedule_pod(fwk, &mut state, pod, snapshot, Some(&mut explanation)) {
        Ok(result) => {
            let node = result.suggested_host;
            let assumed = assume(pod, &node);
            let status = reserve_and_permit(fwk, &mut state, &assumed, &node);
            if status.is_success() {
                snapshot.assume_pod(assumed, &node);
                report.result = PodResult::Scheduled;
                report.node = Some(node);
            } else {
                report.result = if status.is_rejected() {
                    PodResult::Unschedulable
                } else {
                    PodResult::Error
                };
                report.message = Some(status.message());
            }
        }
        Err(ScheduleError::Fit(fit)) => {
            report.result = PodResult::Unschedulable;
            report.reason_counts = fit.reason_counts();
            report.message = Some(fit.to_string());
        }
        Err(ScheduleError::Internal(status)) => {
            report.result = PodResult::Error;
            report.message = Some(status.message());
        }
    }
    report.explanation = Some(explanation);
    report
}

/// Reserve, then Permit; a failure unreserves. Simulate cannot wait, so `Wait` is reported.
fn reserve_and_permit(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &str,
) -> Status {
    let s = fwk.run_reserve_plugins(state, pod, node);
    if !s.is_success() {
        fwk.run_unreserve_plugins(state, pod, node);
        return s;
    }
    let (s, waiting) = fwk.run_permit_plugins(state, pod, node);
    if !waiting.is_empty() {
        let plugins: Vec<&str> = waiting.iter().map(|(p, _)| *p).collect();
        fwk.run_unreserve_plugins(state, pod, node);
        return Status::error(format!(
            "permit plugin(s) {} asked the pod to wait; simulate does not wait",
            plugins.join(", ")
        ));
    }
    if !s.is_success() {
        fwk.run_unreserve_plugins(state, pod, node);
    }
    s
}

/// The pod as it will be once bound to `node` (what the cache assumes).
fn assume(pod: &Arc<PodInfo>, node: &str) -> Arc<PodInfo> {
    let mut p = (*pod.pod).clone();
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some(node.to_string());
    }
    let mut info = (**pod).clone();
    info.pod = Arc::new(p);
    Arc::new(info)
}

fn build_snapshot(input: &ClusterInput) -> Snapshot {
    let running = input
        .pods
        .iter()
        .filter(|p| has_node(p) && !is_terminal(p))
        .map(|p| Arc::new(PodInfo::new(p.clone())));
    let mut snapshot = Snapshot::new(input.nodes.clone(), running);
    let labels: HashMap<String, BTreeMap<String, String>> = input
        .namespaces
        .iter()
        .map(|ns| {
            (
                ns.metadata.name.clone().unwrap_or_default(),
                ns.metadata.labels.clone().unwrap_or_default(),
            )
        })
        .collect();
    snapshot.set_namespace_labels(labels);
    snapshot.set_workloads(Arc::new(input.workloads.clone()));
    snapshot
}

fn scheduler_name(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string())
}

fn has_node(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Succeeded and Failed pods hold no resources and are never scheduled.
fn is_terminal(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

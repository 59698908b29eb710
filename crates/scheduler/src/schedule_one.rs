//! The scheduling cycle of one pod: PreFilter → Filter over nodes (in parallel, stopping at
//! the adaptive number of feasible nodes, resuming round-robin) → the extenders' filter →
//! PostFilter when nothing fits → PreScore → Score plus the extenders' prioritize → host
//! selection. Without extenders the cycle does no I/O; with them it waits for their replies,
//! as upstream does.
//!
//! Upstream: pkg/scheduler/schedule_one.go (schedulePod, findNodesThatFitPod,
//! findNodesThatPassFilters, findNodesThatPassExtenders, numFeasibleNodesToFind,
//! prioritizeNodes, selectHost) and the FitError message of pkg/scheduler/framework/types.go.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use framework::{Code, CycleState, NodeInfo, NodeRow, NodeToStatus, PodInfo, Snapshot, Status};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::extender::{self, HttpExtender};
use crate::runtime::batch::{Batching, CycleBatch, LastNode};
use crate::runtime::{
    ActiveFilters, CycleRunner, Framework, NodeScores, NominatedPods, PluginSamples, PluginStatus,
};

/// Below this many nodes, every node is evaluated (upstream `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never goes below this (upstream `minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// Filter waves smaller than this run on the calling thread: waking the pool costs more
/// than it saves for a few hundred cheap filter calls (measured: docs/performance.md).
pub const PARALLEL_FILTER_MIN_NODES: usize = 1024;

/// The message of a cycle that found no node at all in the snapshot.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// How many feasible nodes to find before scoring, out of `num_all_nodes`
/// (`percentage` 0 or unset = adaptive: 50% − nodes/125, at least 5%, at least 100 nodes).
pub fn num_feasible_nodes_to_find(percentage: Option<i32>, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut pct = i64::from(percentage.unwrap_or(0));
    if pct == 0 {
        pct = (50 - num_all_nodes as i64 / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let n = (num_all_nodes as i64 * pct / 100) as usize;
    n.max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// Why a pod could not be placed: per-node statuses and the messages of PreFilter and
/// PostFilter.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    pub node_to_status: NodeToStatus,
    /// Plugins that rejected the pod (Unschedulable, UnschedulableAndUnresolvable, Pending).
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// Plugins that returned Pending.
    pub pending_plugins: BTreeSet<&'static str>,
    pub pre_filter_msg: String,
    pub post_filter_msg: String,
    /// What PostFilter proposed (preemption: a node to nominate and the victims to evict).
    pub post_filter_result: Option<framework::PostFilterResult>,
}

impl Diagnosis {
    fn new() -> Self {
        Diagnosis {
            node_to_status: NodeToStatus::new(Status::with_reasons(
                Code::UnschedulableAndUnresolvable,
                std::iter::empty::<&'static str>(),
            )),
            ..Default::default()
        }
    }

    fn add_plugin_status(&mut self, s: &Status) {
        let Some(p) = s.plugin() else { return };
        if s.is_rejected() && !self.unschedulable_plugins.contains(p) {
            self.unschedulable_plugins.insert(p);
        }
        if s.code() == Code::Pending {
            self.pending_plugins.insert(p);
        }
    }
}

/// No node fits the pod. Its `Display` is upstream's FailedScheduling message, byte for byte.
#[derive(Debug, Clone)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
}

impl FitError {
    /// The reason histogram of the message: `(reason, node count)`, sorted as upstream
    /// sorts the rendered entries. Empty when PreFilter rejected the pod.
    pub fn reason_counts(&self) -> Vec<(String, usize)> {
        let d = &self.diagnosis;
        if !d.pre_filter_msg.is_empty() {
            return Vec::new();
        }
        let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, status) in d.node_to_status.explicit() {
            for r in status.reasons() {
                *histogram.entry(r.as_ref()).or_insert(0) += 1;
            }
        }
        let explicit = d.node_to_status.len();
        if explicit < self.num_all_nodes {
            for r in d.node_to_status.absent_status().reasons() {
                *histogram.entry(r.as_ref()).or_insert(0) += self.num_all_nodes - explicit;
            }
        }
        let mut entries: Vec<(String, usize)> = histogram
            .into_iter()
            .map(|(r, n)| (r.to_string(), n))
            .collect();
        // Upstream sorts the rendered "<count> <reason>" strings ("10 …" before "2 …").
        entries.sort_by_cached_key(|(r, n)| format!("{n} {r}"));
        entries
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        let d = &self.diagnosis;
        if !d.pre_filter_msg.is_empty() {
            write!(f, " {}.", d.pre_filter_msg)?;
        } else {
            let entries: Vec<String> = self
                .reason_counts()
                .into_iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect();
            if !entries.is_empty() {
                write!(f, " {}.", entries.join(", "))?;
            }
        }
        if !d.post_filter_msg.is_empty() {
            write!(f, " {}", d.post_filter_msg)?;
        }
        Ok(())
    }
}

/// Why a cycle did not produce a node.
#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// No node fits (a normal outcome; the pod is unschedulable for now).
    Fit(Box<FitError>),
    /// Something went wrong (a plugin error, no nodes at all).
    Internal(Status),
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::Fit(e) => e.fmt(f),
            ScheduleError::Internal(s) => f.write_str(&s.message()),
        }
    }
}

/// A successful cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    pub suggested_host: String,
    /// Nodes looked at (feasible + rejected).
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
}

/// Everything a cycle decided, per plugin and per node, for `simulate`'s explanations.
#[derive(Debug, Clone, Default)]
pub struct Explanation {
    pub pre_filter: Vec<PluginStatus>,
    /// Per evaluated node, in evaluation order: each Filter plugin that ran, up to the first
    /// rejection. Nodes a PreFilterResult excluded carry the absent-node status.
    pub filter: Vec<(String, Vec<PluginStatus>)>,
    pub pre_score: Vec<PluginStatus>,
    /// Feasible nodes in order, with their scores.
    pub scored_nodes: Vec<String>,
    pub scores: Option<NodeScores>,
    /// Each filtering extender consulted, in the order it was consulted.
    pub extender_filter: Vec<ExtenderFilterVerdict>,
    /// Each prioritizing extender consulted, in configuration order.
    pub extender_scores: Vec<ExtenderScores>,
    /// Per node of `scored_nodes`, the total the host was chosen by: the plugins' weighted
    /// sum plus the extenders' contributions.
    pub totals: Vec<i64>,
    /// The cycle state as Filter read it, for explanations that retrace a plugin's
    /// decision after the cycle (VolumeBinding's per-claim reasons).
    pub filter_state: Option<CycleState>,
}

/// What one extender's filter said of the nodes it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtenderFilterVerdict {
    /// The extender's name (its `urlPrefix`).
    pub extender: String,
    /// Per node sent, in the order sent: Success when it passed; Unschedulable or
    /// UnschedulableAndUnresolvable with the extender's reason when it failed (a node the
    /// reply leaves out altogether is Unschedulable without a reason); Error with the call's
    /// error, or Skip with it when the extender is ignorable.
    pub nodes: Vec<(String, Status)>,
}

/// What one extender's prioritize added to the nodes' totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtenderScores {
    /// The extender's name (its `urlPrefix`).
    pub extender: String,
    pub weight: i64,
    /// The scores as the extender answered them, or the error that left them out.
    pub result: Result<Vec<ExtenderNodeScore>, String>,
}

/// One node's score from an extender's prioritize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtenderNodeScore {
    pub node: String,
    /// The extender's score (0..=MaxExtenderPriority).
    pub score: i64,
    /// What it adds to the node's total: score × weight × (MaxNodeScore / MaxExtenderPriority).
    pub added: i64,
}

/// The scheduling algorithm: remembers where the last filter pass stopped and owns the RNG
/// that breaks ties between equally scored nodes.
#[derive(Debug)]
pub struct ScheduleAlgorithm {
    next_start_node_index: usize,
    /// The filter pass's feasible positions, kept between cycles for its allocation.
    positions: Vec<usize>,
    rng: SmallRng,
    /// `percentageOfNodesToScore` of the configuration (profiles may override).
    percentage_of_nodes_to_score: Option<i32>,
    /// Pods nominated to nodes, as the queue's nominator had them when the cycle began.
    nominated: NominatedPods,
    /// The configuration's extenders, consulted after the Filter and Score plugins.
    extenders: Arc<[HttpExtender]>,
    /// Where extender calls run; set together with `extenders`.
    runtime: Option<tokio::runtime::Handle>,
    /// Whether a pod that fits no node goes to the PostFilter plugins (preemption).
    post_filter: bool,
    /// Opportunistic batching ([`crate::runtime::batch`]); `None`: off.
    batching: Option<Batching>,
}

impl ScheduleAlgorithm {
    pub fn new(seed: u64, percentage_of_nodes_to_score: Option<i32>) -> Self {
        ScheduleAlgorithm {
            next_start_node_index: 0,
            positions: Vec::new(),
            rng: SmallRng::seed_from_u64(seed),
            percentage_of_nodes_to_score,
            nominated: NominatedPods::new(),
            extenders: Arc::from(Vec::new()),
            runtime: None,
            post_filter: true,
            batching: None,
        }
    }

    /// Turns opportunistic batching on (with its state) or off. Explained cycles never batch,
    /// nor do cycles when extenders are configured (as upstream, whose profiles with
    /// extenders sign no pod).
    pub fn set_batching(&mut self, batching: Option<Batching>) {
        self.batching = batching;
    }

    /// The batching state, when batching is on.
    pub fn batching(&self) -> Option<&Batching> {
        self.batching.as_ref()
    }

    /// Runs the PostFilter plugins for pods that fit no node (`true`, as upstream does), or
    /// leaves them out, so that a cycle never nominates a pod nor picks victims.
    pub fn set_post_filter(&mut self, enabled: bool) {
        self.post_filter = enabled;
    }

    /// Whether PostFilter runs for pods that fit no node.
    pub fn post_filter(&self) -> bool {
        self.post_filter
    }

    /// Consults `extenders` in every cycle, their calls running on `runtime`.
    pub fn set_extenders(
        &mut self,
        extenders: Arc<[HttpExtender]>,
        runtime: tokio::runtime::Handle,
    ) {
        self.extenders = extenders;
        self.runtime = Some(runtime);
    }

    /// The pods nominated to nodes that the next cycles must account for.
    pub fn set_nominated_pods(&mut self, nominated: NominatedPods) {
        self.nominated = nominated;
    }

    /// Finds the best node for `pod`. With `explain`, records every plugin's verdict, and
    /// scores even a single feasible node (upstream skips scoring then; the choice is the
    /// same).
    pub fn schedule_pod(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        explain: Option<&mut Explanation>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let Some(mut batching) = self.batching.take() else {
            return self.schedule_pod_batched(fwk, state, pod, snapshot, explain, None);
        };
        let result = if explain.is_some() || !self.extenders.is_empty() {
            batching.skip_cycle();
            self.schedule_pod_batched(fwk, state, pod, snapshot, explain, None)
        } else {
            let mut batch = batching.start_cycle(fwk.profile_name());
            self.schedule_pod_batched(fwk, state, pod, snapshot, None, Some(&mut batch))
        };
        self.batching = Some(batching);
        result
    }

    fn schedule_pod_batched(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        mut explain: Option<&mut Explanation>,
        mut batch: Option<&mut CycleBatch<'_>>,
    ) -> Result<ScheduleResult, ScheduleError> {
        if snapshot.num_nodes() == 0 {
            return Err(ScheduleError::Internal(Status::error(NO_NODES_AVAILABLE)));
        }
        state.set_num_all_nodes(snapshot.num_nodes());
        let (scored, mut diagnosis) = self.find_nodes_that_fit_pod(
            fwk,
            state,
            pod,
            snapshot,
            explain.as_deref_mut(),
            batch.as_deref_mut(),
        )?;
        let feasible = scored.nodes(snapshot.node_infos());
        if let Some(e) = explain.as_deref_mut() {
            e.filter_state = Some(state.clone());
        }
        if feasible.is_empty() {
            if self.post_filter && fwk.has_post_filter_plugins() {
                let runner = CycleRunner::new(fwk, state, &self.nominated, &mut self.rng);
                let (r, s) = fwk.run_post_filter_plugins(
                    state,
                    pod,
                    snapshot,
                    &diagnosis.node_to_status,
                    &runner,
                );
                if !s.is_success() {
                    tracing::debug!(pod = %pod.key, status = %s.message(), "PostFilter did not help");
                }
                diagnosis.post_filter_msg = s.message();
                diagnosis.post_filter_result = r;
            }
            return Err(ScheduleError::Fit(Box::new(FitError {
                num_all_nodes: snapshot.num_nodes(),
                diagnosis,
            })));
        }
        let evaluated = feasible.len() + diagnosis.node_to_status.len();
        if feasible.len() == 1 && explain.is_none() {
            if let Some(b) = batch {
                b.store_schedule_results(feasible[0].name(), std::iter::empty());
            }
            return Ok(ScheduleResult {
                suggested_host: feasible[0].name().to_string(),
                evaluated_nodes: evaluated,
                feasible_nodes: 1,
            });
        }
        let totals = self.prioritize_nodes(fwk, state, pod, snapshot, &scored, explain)?;
        let chosen = self.select_host(&totals);
        let host = feasible.get(chosen).map_or("", |n| n.name());
        if let Some(b) = batch {
            let others = || {
                feasible
                    .iter()
                    .zip(&totals)
                    .enumerate()
                    .filter(move |(i, _)| *i != chosen)
                    .map(|(i, (n, &t))| (i, n, t))
            };
            // Nodes of this snapshot's list are kept by position, named only if used.
            let positions = scored.rows.as_ref().filter(|rows| {
                rows.len() == feasible.len() && rows.iter().all(|r| r.index().is_some())
            });
            let count = feasible.len() - 1;
            match positions {
                Some(rows) => {
                    let others = others().map(|(i, _, t)| (rows[i].position, t));
                    b.store_schedule_results_at(
                        host,
                        snapshot.list_version(),
                        ExactLen(others, count),
                    );
                }
                None => {
                    let others = others().map(|(_, n, t)| (n.name_arc(), t));
                    b.store_schedule_results(host, ExactLen(others, count));
                }
            }
        }
        Ok(ScheduleResult {
            suggested_host: host.to_string(),
            evaluated_nodes: evaluated,
            feasible_nodes: feasible.len(),
        })
    }

    fn find_nodes_that_fit_pod(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        mut explain: Option<&mut Explanation>,
        batch: Option<&mut CycleBatch<'_>>,
    ) -> Result<(Feasible, Diagnosis), ScheduleError> {
        let mut diagnosis = Diagnosis::new();
        let (pre_res, s, with_nodes) = fwk.run_pre_filter_plugins(
            state,
            pod,
            snapshot,
            explain.as_deref_mut().map(|e| &mut e.pre_filter),
        );
        if !s.is_success() {
            if !s.is_rejected() {
                return Err(ScheduleError::Internal(s));
            }
            diagnosis.pre_filter_msg = s.message();
            diagnosis.add_plugin_status(&s);
            diagnosis.node_to_status.set_absent_status(s);
            return Ok((Feasible::default(), diagnosis));
        }
        if let Some(b) = batch {
            let nominated = nominated_node(pod, &self.nominated).is_some();
            b.get_node_hint(fwk.sign_pod(pod), nominated, snapshot, |name| {
                last_node_verdict(fwk, state, pod, snapshot, name)
            });
            // The batch's next node is the best one left if it still fits: Filter decides.
            if let Some(node) = b.hint.as_deref().and_then(|n| snapshot.get(n)) {
                let filters = fwk
                    .active_filters(state)
                    .with_nominated(&self.nominated, fwk);
                let mut samples = filters.samples_for(1);
                let s = filters.run(state, pod, node, None, &mut samples);
                filters.record(&mut samples);
                if s.is_success() {
                    return Ok((Feasible::owned(vec![node.clone()], None), diagnosis));
                }
            }
        }
        // A node nominated by an earlier preemption is likely the only one that fits: try it
        // first and take it when it passes. Upstream: evaluateNominatedNode.
        if let Some(node) = nominated_node(pod, &self.nominated).and_then(|n| snapshot.get(n)) {
            let filters = fwk
                .active_filters(state)
                .with_nominated(&self.nominated, fwk);
            let mut rec = Vec::new();
            let mut samples = filters.samples_for(1);
            let s = match explain.as_deref_mut() {
                Some(_) => filters.run_explained(state, pod, node, None, &mut rec, &mut samples),
                None => filters.run(state, pod, node, None, &mut samples),
            };
            filters.record(&mut samples);
            if s.is_success() {
                let recorded = explain.as_deref_mut().map(|e| {
                    e.filter.push((node.name().to_string(), rec));
                    e.extender_filter.len()
                });
                // As upstream, an extender error here only sends the pod through all nodes.
                match self.find_nodes_that_pass_extenders(
                    pod,
                    vec![node.clone()],
                    &mut diagnosis,
                    explain.as_deref_mut().map(|e| &mut e.extender_filter),
                ) {
                    Ok(passed) if !passed.is_empty() => {
                        return Ok((Feasible::owned(passed, None), diagnosis));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::info!(pod = %pod.key, node = node.name(), error = %e, "extenders failed on the nominated node");
                    }
                }
                // The pass over all nodes evaluates this node again: explain that pass only.
                if let (Some(e), Some(len)) = (explain.as_deref_mut(), recorded) {
                    e.filter.pop();
                    e.extender_filter.truncate(len);
                }
            }
        }
        let all = snapshot.node_infos();
        let whole = pre_res
            .as_ref()
            .and_then(|r| r.node_names.as_ref())
            .is_none();
        let restricted: Vec<Arc<NodeInfo>>;
        let restricted_rows: Vec<NodeRow>;
        let (nodes, rows): (&[Arc<NodeInfo>], &[NodeRow]) =
            match pre_res.as_ref().and_then(|r| r.node_names.as_ref()) {
                None => (all, snapshot.rows()),
                Some(names) => {
                    let mut sorted = with_nodes.clone();
                    sorted.sort_unstable();
                    let absent = Status::unresolvable(format!(
                        "node(s) didn't satisfy plugin(s) [{}]",
                        sorted.join(" ")
                    ));
                    if let Some(e) = explain.as_deref_mut() {
                        for n in all.iter().filter(|n| !names.contains(n.name())) {
                            e.filter.push((
                                n.name().to_string(),
                                vec![(plugin_label(&with_nodes), absent.clone())],
                            ));
                        }
                    }
                    diagnosis.node_to_status.set_absent_status(absent);
                    // Look the named nodes up (a PreFilterResult usually names a few of many
                    // nodes), keeping the snapshot's order.
                    let mut positions: Vec<usize> = names
                        .iter()
                        .filter_map(|n| snapshot.position(n.as_ref()))
                        .collect();
                    positions.sort_unstable();
                    positions.dedup();
                    restricted_rows = positions
                        .iter()
                        .filter_map(|&i| snapshot.rows().get(i).copied())
                        .collect();
                    restricted = positions.into_iter().map(|i| all[i].clone()).collect();
                    (&restricted, &restricted_rows)
                }
            };
        let (positions, feasible_rows) = self.find_nodes_that_pass_filters(
            fwk,
            state,
            pod,
            &mut diagnosis,
            (nodes, rows),
            explain.as_deref_mut(),
        )?;
        let first = positions.first().copied().unwrap_or(0);
        let is_run = positions.iter().enumerate().all(|(i, &p)| p == first + i);
        if whole && is_run && self.extenders.is_empty() {
            let feasible = Feasible {
                owned: Vec::new(),
                run: Some(first..first + positions.len()),
                rows: Some(feasible_rows),
            };
            self.positions = positions;
            return Ok((feasible, diagnosis));
        }
        let feasible: Vec<Arc<NodeInfo>> = positions.iter().map(|&p| nodes[p].clone()).collect();
        self.positions = positions;
        let feasible = self.find_nodes_that_pass_extenders(
            pod,
            feasible,
            &mut diagnosis,
            explain.map(|e| &mut e.extender_filter),
        )?;
        // Filtering extenders return the nodes they keep, in their own order: the rows no
        // longer line up then, and Score computes them from the NodeInfos.
        let rows = self
            .extenders
            .iter()
            .all(|e| !e.is_filter())
            .then_some(feasible_rows);
        Ok((Feasible::owned(feasible, rows), diagnosis))
    }

    /// Narrows `feasible` by each interested extender's filter, in configuration order.
    /// Rejected nodes get the extender's reason as their status (Unschedulable, or
    /// UnschedulableAndUnresolvable for `FailedAndUnresolvableNodes`), so they count in the
    /// FailedScheduling message like a plugin's. An ignorable extender's error skips it;
    /// another's fails the attempt. With `explain`, records each consulted extender's
    /// verdict on every node it was sent.
    fn find_nodes_that_pass_extenders(
        &self,
        pod: &PodInfo,
        mut feasible: Vec<Arc<NodeInfo>>,
        diagnosis: &mut Diagnosis,
        mut explain: Option<&mut Vec<ExtenderFilterVerdict>>,
    ) -> Result<Vec<Arc<NodeInfo>>, ScheduleError> {
        let Some(runtime) = self.runtime.as_ref() else {
            return Ok(feasible);
        };
        for ext in self.extenders.iter() {
            if feasible.is_empty() {
                break;
            }
            if !ext.is_filter() || !ext.is_interested(&pod.pod) {
                continue;
            }
            let nodes: Vec<&k8s_openapi::api::core::v1::Node> =
                feasible.iter().map(|n| n.node()).collect();
            let mut record = |status: &dyn Fn(&str) -> Status| {
                if let Some(verdicts) = explain.as_deref_mut() {
                    verdicts.push(ExtenderFilterVerdict {
                        extender: ext.name().to_string(),
                        nodes: feasible
                            .iter()
                            .map(|n| (n.name().to_string(), status(n.name())))
                            .collect(),
                    });
                }
            };
            let result = match extender::call_blocking(runtime, ext.filter(&pod.pod, &nodes)) {
                Ok(r) => r,
                Err(e) if ext.is_ignorable() => {
                    let message = extender::error_chain(&e);
                    tracing::info!(pod = %pod.key, extender = ext.name(), error = %message, "skipping ignorable extender");
                    record(&|_| Status::new(Code::Skip, message.clone()));
                    continue;
                }
                Err(e) => {
                    let message = extender::error_chain(&e);
                    record(&|_| Status::error(message.clone()));
                    return Err(ScheduleError::Internal(Status::error(message)));
                }
            };
            record(&|node| extender_verdict(&result, node));
            for (node, reason) in &result.failed_and_unresolvable {
                diagnosis
                    .node_to_status
                    .set(node.as_str(), Status::unresolvable(reason.clone()));
            }
            for (node, reason) in &result.failed {
                if !result.failed_and_unresolvable.contains_key(node) {
                    diagnosis
                        .node_to_status
                        .set(node.as_str(), Status::unschedulable(reason.clone()));
                }
            }
            let by_name: BTreeMap<&str, &Arc<NodeInfo>> =
                feasible.iter().map(|n| (n.name(), n)).collect();
            feasible = result
                .feasible
                .iter()
                .filter_map(|name| by_name.get(name.as_str()).map(|n| Arc::clone(n)))
                .collect();
        }
        Ok(feasible)
    }

    /// Adds each interested prioritizing extender's scores × weight × (MaxNodeScore /
    /// MaxExtenderPriority) to `totals`. Errors are logged and the extender left out, as
    /// upstream does. With `explain`, records each extender's scores and contributions.
    fn add_extender_scores(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        totals: &mut [i64],
        mut explain: Option<&mut Vec<ExtenderScores>>,
    ) {
        let Some(runtime) = self.runtime.as_ref() else {
            return;
        };
        let prioritizers: Vec<&HttpExtender> = self
            .extenders
            .iter()
            .filter(|e| e.is_prioritizer() && e.is_interested(&pod.pod))
            .collect();
        if prioritizers.is_empty() {
            return;
        }
        let node_objs: Vec<&k8s_openapi::api::core::v1::Node> =
            nodes.iter().map(|n| n.node()).collect();
        // Upstream asks the extenders concurrently; so does this.
        let replies = extender::call_blocking(
            runtime,
            futures_util::future::join_all(
                prioritizers
                    .iter()
                    .map(|e| e.prioritize(&pod.pod, &node_objs)),
            ),
        );
        let scale = framework::MAX_NODE_SCORE / extender::wire::MAX_EXTENDER_PRIORITY;
        let mut combined: BTreeMap<String, i64> = BTreeMap::new();
        for (ext, reply) in prioritizers.iter().zip(replies) {
            let result = match reply {
                Ok(scores) => {
                    let mut added = Vec::with_capacity(scores.len());
                    for hp in scores {
                        let add = hp.score.saturating_mul(ext.weight()).saturating_mul(scale);
                        *combined.entry(hp.host.clone()).or_insert(0) += add;
                        added.push(ExtenderNodeScore {
                            node: hp.host,
                            score: hp.score,
                            added: add,
                        });
                    }
                    Ok(added)
                }
                Err(e) => {
                    let message = extender::error_chain(&e);
                    tracing::info!(pod = %pod.key, extender = ext.name(), error = %message, "extender prioritize failed; its scores are left out");
                    Err(message)
                }
            };
            if let Some(scores) = explain.as_deref_mut() {
                scores.push(ExtenderScores {
                    extender: ext.name().to_string(),
                    weight: ext.weight(),
                    result,
                });
            }
        }
        for (total, node) in totals.iter_mut().zip(nodes) {
            if let Some(add) = combined.get(node.name()) {
                *total = total.saturating_add(*add);
            }
        }
    }

    fn find_nodes_that_pass_filters(
        &mut self,
        fwk: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        diagnosis: &mut Diagnosis,
        (nodes, rows): (&[Arc<NodeInfo>], &[NodeRow]),
        mut explain: Option<&mut Explanation>,
    ) -> Result<(Vec<usize>, Vec<NodeRow>), ScheduleError> {
        let n = nodes.len();
        let mut positions = std::mem::take(&mut self.positions);
        positions.clear();
        if n == 0 {
            return Ok((positions, Vec::new()));
        }
        if rows.len() != n {
            return Err(ScheduleError::Internal(Status::error(format!(
                "filtering: {} rows for {n} nodes",
                rows.len()
            ))));
        }
        let to_find = num_feasible_nodes_to_find(
            fwk.percentage_of_nodes_to_score()
                .or(self.percentage_of_nodes_to_score),
            n,
        );
        let start = self.next_start_node_index % n;
        if !fwk.has_filter_plugins() {
            positions.extend((0..to_find).map(|i| (start + i) % n));
            let feasible_rows = positions.iter().map(|&p| rows[p]).collect();
            self.next_start_node_index = (start + positions.len()) % n;
            return Ok((positions, feasible_rows));
        }
        let par = &fwk.handle().parallelizer;
        let filters = fwk
            .active_filters(state)
            .with_nominated(&self.nominated, fwk);
        positions.reserve(to_find.min(n));
        let mut pass = FilterPass {
            feasible: positions,
            rows: Vec::with_capacity(to_find.min(n)),
            to_find,
            processed: 0,
        };
        // Nodes are consumed in order and the pass stops at `to_find` feasible nodes, so the
        // outcome is the same whether a wave ran in parallel or not. The first wave is the
        // number of nodes still needed; later ones follow the feasible rate. Explanations
        // are recorded on the sequential path only (same result, simpler bookkeeping).
        let mut next = 0usize;
        let mut wave = to_find.max(64);
        // An unsampled cycle without nominated pods decides nodes plugin by plugin.
        let by_rows = filters.runs_rows() && u32::try_from(n).is_ok();
        while next < n && !pass.done() {
            let end = (next + wave).min(n);
            let parallel =
                explain.is_none() && par.threads() > 1 && end - next >= PARALLEL_FILTER_MIN_NODES;
            if parallel {
                let chunks = par.map_chunks(end - next, |r| {
                    if by_rows {
                        filter_rows_chunk(&filters, state, pod, (nodes, rows), start + next, r)
                    } else {
                        filter_chunk(&filters, state, pod, nodes, rows, start + next, r)
                    }
                });
                for mut chunk in chunks {
                    // Every call that ran is observed, merged or not (as upstream).
                    filters.record(&mut chunk.samples);
                    if pass.done() {
                        continue;
                    }
                    pass.merge_chunk(chunk, nodes, rows, start + next, diagnosis)?;
                }
            } else if explain.is_none() && by_rows {
                // Plugin by plugin over the wave; the merge consumes nodes in order up to
                // the last one needed, as the node-by-node loop below would have.
                let chunk = filter_rows_chunk(
                    &filters,
                    state,
                    pod,
                    (nodes, rows),
                    start + next,
                    0..end - next,
                );
                pass.merge_chunk(chunk, nodes, rows, start + next, diagnosis)?;
            } else {
                let mut samples = filters.samples_for(end - next);
                for i in next..end {
                    if pass.done() {
                        break;
                    }
                    let at = (start + i) % n;
                    let (node, row) = (&nodes[at], &rows[at]);
                    let (status, rec) = match explain.as_deref_mut() {
                        Some(_) => {
                            let mut rec = Vec::new();
                            let s = filters.run_explained(
                                state,
                                pod,
                                node,
                                Some(row),
                                &mut rec,
                                &mut samples,
                            );
                            (s, rec)
                        }
                        None => (
                            filters.run(state, pod, node, Some(row), &mut samples),
                            Vec::new(),
                        ),
                    };
                    let consumed = pass.consume(
                        (at, node),
                        row,
                        status,
                        rec,
                        diagnosis,
                        explain.as_deref_mut(),
                    );
                    if consumed.is_err() {
                        filters.record(&mut samples);
                    }
                    consumed?;
                }
                filters.record(&mut samples);
            }
            next = end;
            // Size the next wave by the feasible rate seen so far, so that a pass where few
            // nodes fit takes few (large) waves.
            let found = pass.feasible.len().max(1);
            let needed = to_find.saturating_sub(pass.feasible.len());
            wave = (needed.saturating_mul(next) / found).max(64);
        }
        self.next_start_node_index = (start + pass.processed) % n;
        Ok((pass.feasible, pass.rows))
    }

    fn prioritize_nodes(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        feasible: &Feasible,
        mut explain: Option<&mut Explanation>,
    ) -> Result<Vec<i64>, ScheduleError> {
        let (nodes, rows) = (
            feasible.nodes(snapshot.node_infos()),
            feasible.rows.as_deref(),
        );
        // Without Score plugins every node scores the same, unless extenders score them.
        let scores = if fwk.has_score_plugins() {
            let s = fwk.run_pre_score_plugins(
                state,
                pod,
                snapshot,
                nodes,
                explain.as_deref_mut().map(|e| &mut e.pre_score),
            );
            if !s.is_success() {
                return Err(ScheduleError::Internal(s));
            }
            let scores = match rows {
                Some(rows) => fwk.run_score_plugins_with_rows(state, pod, nodes, rows),
                None => fwk.run_score_plugins(state, pod, nodes),
            }
            .map_err(ScheduleError::Internal)?;
            Some(scores)
        } else if self.extenders.is_empty() {
            return Ok(vec![1; nodes.len()]);
        } else {
            None
        };
        let mut totals = match &scores {
            Some(s) => s.totals.clone(),
            None => vec![0; nodes.len()],
        };
        self.add_extender_scores(
            pod,
            nodes,
            &mut totals,
            explain.as_deref_mut().map(|e| &mut e.extender_scores),
        );
        if let Some(e) = explain {
            e.scored_nodes = nodes.iter().map(|n| n.name().to_string()).collect();
            e.scores = scores;
            e.totals = totals.clone();
        }
        Ok(totals)
    }

    /// The index of the node with the highest total; ties broken uniformly at random.
    fn select_host(&mut self, totals: &[i64]) -> usize {
        let max = totals.iter().copied().max().unwrap_or(0);
        let ties = totals.iter().filter(|&&t| t == max).count();
        let pick = if ties > 1 {
            self.rng.random_range(0..ties)
        } else {
            0
        };
        totals
            .iter()
            .enumerate()
            .filter(|(_, &t)| t == max)
            .nth(pick)
            .map_or(0, |(i, _)| i)
    }
}

/// An extender's verdict on `node` in its filter reply. A node in both failure maps is
/// unresolvable, as `find_nodes_that_pass_extenders` counts it.
fn extender_verdict(result: &extender::FilterResult, node: &str) -> Status {
    if let Some(reason) = result.failed_and_unresolvable.get(node) {
        Status::unresolvable(reason.clone())
    } else if let Some(reason) = result.failed.get(node) {
        Status::unschedulable(reason.clone())
    } else if result.feasible.iter().any(|n| n == node) {
        Status::success()
    } else {
        Status::with_reasons(Code::Unschedulable, std::iter::empty::<&'static str>())
    }
}

/// The nodes that passed Filter (and the extenders), with their rows when those still line
/// up with them.
///
/// When the feasible nodes are one run of the snapshot's node list (every node the pass
/// looked at fit, and the pass did not wrap around the list's end), the list is that run
/// of the snapshot: a cycle then clones no `Arc<NodeInfo>` per feasible node, whose
/// reference count shares a cache line with the NodeInfo that Filter and Score read from
/// the rows instead.
#[derive(Debug, Default)]
struct Feasible {
    /// The nodes, cloned; empty when `run` is set.
    owned: Vec<Arc<NodeInfo>>,
    /// Where the nodes are in the snapshot's node list, instead of `owned`.
    run: Option<std::ops::Range<usize>>,
    rows: Option<Vec<NodeRow>>,
}

impl Feasible {
    fn owned(nodes: Vec<Arc<NodeInfo>>, rows: Option<Vec<NodeRow>>) -> Self {
        Feasible {
            owned: nodes,
            run: None,
            rows,
        }
    }

    /// The feasible nodes, in order; `all` is the cycle's snapshot's node list.
    fn nodes<'a>(&'a self, all: &'a [Arc<NodeInfo>]) -> &'a [Arc<NodeInfo>] {
        match &self.run {
            Some(r) => all.get(r.clone()).unwrap_or_default(),
            None => &self.owned,
        }
    }
}

/// What one parallel chunk of a filter wave found, in node order.
struct ChunkResult {
    /// Offsets of the nodes that passed.
    feasible: Vec<usize>,
    /// Offsets, shared names and statuses of the nodes that were rejected.
    rejected: Vec<(usize, Arc<str>, Status)>,
    /// The chunk's offsets.
    range: std::ops::Range<usize>,
    /// The chunk's timed Filter calls (sampled cycles only).
    samples: PluginSamples,
}

/// Runs the filters over `range` (offsets from `base` in `nodes`, wrapping), keeping what
/// the merge needs so that merging a whole chunk only moves values.
fn filter_chunk(
    filters: &ActiveFilters<'_>,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    rows: &[NodeRow],
    base: usize,
    range: std::ops::Range<usize>,
) -> ChunkResult {
    let n = nodes.len();
    let mut out = ChunkResult {
        feasible: Vec::new(),
        rejected: Vec::new(),
        range: range.clone(),
        samples: filters.samples_for(range.len()),
    };
    for k in range {
        let node = &nodes[(base + k) % n];
        let s = filters.run(state, pod, node, rows.get((base + k) % n), &mut out.samples);
        if s.is_success() {
            out.feasible.push(k);
        } else {
            out.rejected.push((k, node.name_arc().clone(), s));
        }
    }
    out
}

/// The position in a list of `n` nodes at offset `k` from `base` (both below `n`), wrapping
/// at the end: `(base + k) % n` without a division.
fn position_at(base: usize, k: usize, n: usize) -> usize {
    if base + k >= n {
        base + k - n
    } else {
        base + k
    }
}

/// Runs the filters plugin by plugin ([`ActiveFilters::run_rows`]) over `range` (offsets
/// from `base` in `nodes`, wrapping), as a chunk for [`FilterPass::merge_chunk`].
fn filter_rows_chunk(
    filters: &ActiveFilters<'_>,
    state: &CycleState,
    pod: &PodInfo,
    (nodes, rows): (&[Arc<NodeInfo>], &[NodeRow]),
    base: usize,
    range: std::ops::Range<usize>,
) -> ChunkResult {
    let n = nodes.len();
    let base = base % n;
    let mut alive: Vec<u32> = range
        .clone()
        .map(|k| u32::try_from(position_at(base, k, n)).unwrap_or(u32::MAX))
        .collect();
    let mut rejected = Vec::new();
    filters.run_rows(state, pod, nodes, rows, &mut alive, &mut rejected);
    // Back from a position to its offset (offsets are below n).
    let offset = |p: u32| {
        let p = p as usize;
        if p >= base {
            p - base
        } else {
            p + n - base
        }
    };
    let mut rejected: Vec<(usize, Arc<str>, Status)> = rejected
        .into_iter()
        .map(|(p, s)| (offset(p), nodes[p as usize].name_arc().clone(), s))
        .collect();
    // Each plugin's rejections are in node order; together they are put back in order.
    rejected.sort_by_key(|r| r.0);
    ChunkResult {
        feasible: alive.into_iter().map(offset).collect(),
        rejected,
        range,
        samples: PluginSamples::default(),
    }
}

/// The running result of a filter pass over nodes taken in order.
struct FilterPass {
    /// Positions of the feasible nodes in the pass's node list, in the order found.
    feasible: Vec<usize>,
    /// The row of each feasible node, for Score.
    rows: Vec<NodeRow>,
    to_find: usize,
    processed: usize,
}

impl FilterPass {
    fn done(&self) -> bool {
        self.feasible.len() >= self.to_find
    }

    /// Merges a chunk (its offsets from `base`, wrapping). A chunk that cannot complete the
    /// pass is moved in whole; of the chunk where the pass completes, the nodes up to the
    /// last one needed are consumed.
    fn merge_chunk(
        &mut self,
        chunk: ChunkResult,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        base: usize,
        diagnosis: &mut Diagnosis,
    ) -> Result<(), ScheduleError> {
        let n = nodes.len();
        let base = base % n;
        let wrap = |k: usize| position_at(base, k, n);
        let needed = self.to_find - self.feasible.len();
        if chunk.feasible.len() < needed {
            if let Some((_, _, s)) = chunk
                .rejected
                .iter()
                .find(|(_, _, s)| s.code() == Code::Error)
            {
                return Err(ScheduleError::Internal(s.clone()));
            }
            self.processed += chunk.range.len();
            self.feasible
                .extend(chunk.feasible.iter().map(|&k| wrap(k)));
            self.rows
                .extend(chunk.feasible.iter().map(|&k| rows[wrap(k)]));
            for (_, _, s) in &chunk.rejected {
                diagnosis.add_plugin_status(s);
            }
            diagnosis
                .node_to_status
                .extend_new(chunk.rejected.into_iter().map(|(_, name, s)| (name, s)));
            return Ok(());
        }
        // The pass ends at the chunk's `needed`-th feasible node: the nodes up to it are
        // consumed, in order; those after it are not.
        let last = chunk.feasible[needed - 1];
        for (_, name, s) in chunk.rejected.into_iter().take_while(|(r, _, _)| *r < last) {
            self.consume_rejected(name, s, diagnosis)?;
        }
        self.processed += needed;
        for &k in &chunk.feasible[..needed] {
            self.feasible.push(wrap(k));
            self.rows.push(rows[wrap(k)]);
        }
        Ok(())
    }

    fn consume_rejected(
        &mut self,
        name: Arc<str>,
        status: Status,
        diagnosis: &mut Diagnosis,
    ) -> Result<(), ScheduleError> {
        self.processed += 1;
        if status.code() == Code::Error {
            return Err(ScheduleError::Internal(status));
        }
        diagnosis.add_plugin_status(&status);
        diagnosis.node_to_status.push_new(name, status);
        Ok(())
    }

    /// Records one node's outcome; an Error status aborts the cycle, as upstream.
    fn consume(
        &mut self,
        (at, node): (usize, &Arc<NodeInfo>),
        row: &NodeRow,
        status: Status,
        rec: Vec<PluginStatus>,
        diagnosis: &mut Diagnosis,
        explain: Option<&mut Explanation>,
    ) -> Result<(), ScheduleError> {
        self.processed += 1;
        if let Some(e) = explain {
            e.filter.push((node.name().to_string(), rec));
        }
        if status.is_success() {
            self.feasible.push(at);
            self.rows.push(*row);
        } else if status.code() == Code::Error {
            return Err(ScheduleError::Internal(status));
        } else {
            diagnosis.add_plugin_status(&status);
            // A pass visits each node once.
            diagnosis
                .node_to_status
                .push_new(node.name_arc().clone(), status);
        }
        Ok(())
    }
}

/// What the node the batch's last pod went to says of `pod` (Filter plugins without
/// nominated pods, as upstream's check).
fn last_node_verdict(
    fwk: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    snapshot: &Snapshot,
    name: &str,
) -> LastNode {
    match snapshot.get(name) {
        None => LastNode::Missing,
        Some(node) if fwk.run_filter_plugins(state, pod, node).is_rejected() => LastNode::Rejects,
        Some(_) => LastNode::Fits,
    }
}

/// An iterator whose length is known without running it.
struct ExactLen<I>(I, usize);

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.1, Some(self.1))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}

/// The node `pod` is nominated to: its `status.nominatedNodeName`, or else the node the
/// nominator holds for it. Upstream writes the nomination before its next cycle, so a
/// preemptor's retry carries it in its status; here the write goes through a rate-limited
/// queue and may not have landed when the victims are gone, and without this fallback the
/// retry would not try the node its victims were evicted from first.
fn nominated_node<'a>(pod: &'a PodInfo, nominated: &'a NominatedPods) -> Option<&'a str> {
    let in_status = pod
        .pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    // The nominator holds a pod on one node at most, so the search order does not matter.
    in_status.or_else(|| {
        nominated
            .iter()
            .find(|(_, pods)| pods.iter().any(|p| p.key == pod.key))
            .map(|(node, _)| node.as_str())
    })
}

fn plugin_label(plugins: &[&'static str]) -> &'static str {
    match plugins {
        [only] => only,
        _ => "PreFilterResult",
    }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod tests;

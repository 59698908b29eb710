//! The plugin API: one trait per extension point, in framework order.
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/framework/interface.go. A plugin implements
//! [`Plugin`] and returns itself from the `as_*` accessors of the extension points it
//! supports; the runtime refuses, at start-up, a profile that enables a plugin at a point
//! it does not implement.
//!
//! Scheduling-cycle points (PreEnqueue … Permit) are synchronous and cheap. Filter and Score
//! run concurrently over nodes and read only the `&NodeInfo` they are given. Binding-cycle
//! points that do I/O (PreBind, Bind) return boxed futures.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::cycle_state::{CycleState, StateData};
use crate::events::ClusterEventWithHint;
use crate::sign::SignPlugin;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};
use crate::types::{NodeInfo, NodeRow, NodeScore, PodInfo, QueuedPodInfo};

/// A boxed, sendable future, for the binding-cycle extension points.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The highest score a Score plugin may give after NormalizeScore.
pub const MAX_NODE_SCORE: i64 = 100;
/// The lowest score.
pub const MIN_NODE_SCORE: i64 = 0;
/// The highest total weight of all score plugins of a profile (upstream `MaxTotalScore`).
pub const MAX_TOTAL_SCORE: i64 = i64::MAX;

/// Every plugin. The `as_*` accessors say which extension points it implements.
pub trait Plugin: Send + Sync {
    /// The plugin's name, as written in configuration (`NodeResourcesFit`).
    fn name(&self) -> &'static str;

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
    /// The cluster events that may make a pod this plugin rejected schedulable.
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        None
    }
    /// What the plugin's results depend on in a pod. `None` (the default, and so every
    /// out-of-tree plugin that does not say otherwise) means "cannot sign": a profile that
    /// enables such a plugin at PreFilter, Filter, PreScore or Score never batches.
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        None
    }
}

/// Decides whether a pod may enter the active queue at all (e.g. scheduling gates).
pub trait PreEnqueuePlugin: Plugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

/// Orders the active queue. Exactly one per profile.
pub trait QueueSortPlugin: Plugin {
    /// Whether `a` should be scheduled before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// The nodes a PreFilter plugin restricts the pod to; `None` means all nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    pub node_names: Option<HashSet<String>>,
}

impl PreFilterResult {
    /// A result restricting the pod to `names`.
    pub fn nodes<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        PreFilterResult {
            node_names: Some(names.into_iter().map(Into::into).collect()),
        }
    }

    pub fn all_nodes(&self) -> bool {
        self.node_names.is_none()
    }

    /// The intersection of two results (`None` is the identity).
    pub fn merge(self, other: Option<PreFilterResult>) -> PreFilterResult {
        match (self.node_names, other.and_then(|o| o.node_names)) {
            (None, o) => PreFilterResult { node_names: o },
            (s, None) => PreFilterResult { node_names: s },
            (Some(a), Some(b)) => PreFilterResult {
                node_names: Some(a.intersection(&b).cloned().collect()),
            },
        }
    }
}

/// Computes per-pod state once before Filter runs on every node.
pub trait PreFilterPlugin: Plugin {
    /// `nodes` are all nodes of the snapshot. Returning `Skip` skips this plugin's Filter.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status);

    /// Incremental updates of the PreFilter state, used when preemption or nominated pods
    /// add or remove pods from a node hypothetically.
    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

/// Updates a plugin's PreFilter state for a pod added to or removed from `node`.
pub trait PreFilterExtensions: Send + Sync {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;
}

/// Says whether the pod can run on one node. Called concurrently for many nodes.
pub trait FilterPlugin: Plugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;

    /// [`filter`](Self::filter), given also the node's [`NodeRow`] (equal to
    /// `NodeRow::of(node)`). The runtime calls this in its filter pass; a plugin overrides
    /// it to decide from the row alone where it can, so that the pass reads the snapshot's
    /// flat rows instead of each NodeInfo. The status must be the one `filter` gives.
    fn filter_with_row(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _row: &NodeRow,
    ) -> Status {
        self.filter(state, pod, node)
    }

    /// [`filter_with_row`](Self::filter_with_row) over many nodes at once. `alive` holds
    /// positions in `nodes` and `rows` (`rows[i] == NodeRow::of(&nodes[i])`); on return it
    /// holds, in the same order, the positions whose node passed, and the position and
    /// status of each node rejected are appended to `rejected`. The runtime calls this in
    /// the filter pass of a cycle that times no plugin call; a plugin overrides it to look
    /// its cycle state up once for the whole run. Each status must be the one `filter`
    /// gives.
    fn filter_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        alive: &mut Vec<u32>,
        rejected: &mut Vec<(u32, Status)>,
    ) {
        filter_each(alive, rejected, |i| {
            self.filter_with_row(state, pod, &nodes[i], &rows[i])
        });
    }
}

/// The loop of a [`filter_rows`](FilterPlugin::filter_rows): `decide` gives the status of
/// the node at a position; passing positions stay in `alive`, in order, and rejected ones
/// move to `rejected` with their status.
pub fn filter_each(
    alive: &mut Vec<u32>,
    rejected: &mut Vec<(u32, Status)>,
    mut decide: impl FnMut(usize) -> Status,
) {
    alive.retain(|&i| {
        let s = decide(i as usize);
        if s.is_success() {
            return true;
        }
        rejected.push((i, s));
        false
    });
}

/// The status of each node a cycle rejected, and the status of nodes absent from the map
/// (those a PreFilterResult excluded).
///
/// Filling it is on the hot path of a cycle that rejects thousands of nodes, so entries are
/// appended to a vector (node names are shared `Arc<str>`s) and the by-name index is built
/// only when someone looks a node up (preemption).
#[derive(Debug, Default)]
pub struct NodeToStatus {
    entries: Vec<(Arc<str>, Status)>,
    index: std::sync::OnceLock<HashMap<Arc<str>, usize>>,
    absent: Status,
}

impl Clone for NodeToStatus {
    fn clone(&self) -> Self {
        NodeToStatus {
            entries: self.entries.clone(),
            index: std::sync::OnceLock::new(),
            absent: self.absent.clone(),
        }
    }
}

impl NodeToStatus {
    pub fn new(absent: Status) -> Self {
        NodeToStatus {
            entries: Vec::new(),
            index: std::sync::OnceLock::new(),
            absent,
        }
    }

    /// Records the status of `node`, replacing an earlier one.
    pub fn set(&mut self, node: impl Into<Arc<str>>, status: Status) {
        let node = node.into();
        let _ = self.index_map();
        if let Some(&i) = self.index.get().and_then(|m| m.get(&node)) {
            self.entries[i].1 = status;
            return;
        }
        self.push_new(node, status);
    }

    /// Records the status of a node that has none yet: what a filter pass does, visiting
    /// each node once. Costs no hashing until a lookup builds the index.
    pub fn push_new(&mut self, node: Arc<str>, status: Status) {
        let i = self.entries.len();
        if let Some(m) = self.index.get_mut() {
            m.insert(node.clone(), i);
        }
        self.entries.push((node, status));
    }

    /// [`push_new`](Self::push_new) for many nodes at once.
    pub fn extend_new(&mut self, statuses: impl IntoIterator<Item = (Arc<str>, Status)>) {
        if self.index.get().is_some() {
            for (n, s) in statuses {
                self.push_new(n, s);
            }
        } else {
            self.entries.extend(statuses);
        }
    }

    fn index_map(&self) -> &HashMap<Arc<str>, usize> {
        self.index.get_or_init(|| {
            self.entries
                .iter()
                .enumerate()
                .map(|(i, (n, _))| (n.clone(), i))
                .collect()
        })
    }

    /// The status of `node`: its own, or the absent-node status.
    pub fn get(&self, node: &str) -> &Status {
        match self.index_map().get(node) {
            Some(&i) => &self.entries[i].1,
            None => &self.absent,
        }
    }

    pub fn absent_status(&self) -> &Status {
        &self.absent
    }

    pub fn set_absent_status(&mut self, status: Status) {
        self.absent = status;
    }

    /// Nodes with a status of their own, in the order they were recorded.
    pub fn explicit(&self) -> impl Iterator<Item = (&str, &Status)> {
        self.entries.iter().map(|(n, s)| (n.as_ref(), s))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Nodes where preemption might help: those whose status is `Unschedulable` (not
    /// `UnschedulableAndUnresolvable`), among `nodes`.
    pub fn nodes_for_preemption<'a>(
        &'a self,
        nodes: &'a [Arc<NodeInfo>],
    ) -> impl Iterator<Item = &'a Arc<NodeInfo>> + 'a {
        nodes
            .iter()
            .filter(move |n| self.get(n.name()).code() == Code::Unschedulable)
    }
}

/// How a nominated node name should be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NominatingMode {
    /// Leave the pod's nomination as it is.
    Noop,
    /// Set the nomination to the given node.
    Override,
}

/// What a PostFilter plugin proposes (a node for the pod, after preemption).
#[derive(Debug, Clone)]
pub struct PostFilterResult {
    /// The node to nominate; empty with [`NominatingMode::Override`] clears a nomination.
    pub nominated_node_name: String,
    pub mode: NominatingMode,
    /// The pods to evict from the nominated node so that the pod fits there (preemption
    /// victims), most important first. The scheduling loop evicts them: PostFilter does no
    /// I/O.
    pub victims: Vec<Arc<PodInfo>>,
    /// Why each node the plugin examined did or did not help, in the order examined: a
    /// success whose message says what would be evicted, or the rejection. For `simulate`
    /// and logs.
    pub node_statuses: Vec<(String, Status)>,
}

impl PostFilterResult {
    /// A result nominating `node` (empty: clear the nomination), with no victims.
    pub fn nominated(node: impl Into<String>) -> Self {
        PostFilterResult {
            nominated_node_name: node.into(),
            mode: NominatingMode::Override,
            victims: Vec::new(),
            node_statuses: Vec::new(),
        }
    }
}

/// What a PostFilter plugin may ask of the profile running it: its Filter plugins (with the
/// pods nominated to the node, as a real cycle runs them) and its PreFilter extensions, on
/// hypothetical copies of a node and of the cycle state; and the cycle's random source.
///
/// Upstream: framework.PluginsRunner and the parts of framework.Handle preemption uses. The
/// runtime implements it and hands it to [`PostFilterPlugin::post_filter`], so that plugins
/// never depend on the scheduler crate.
pub trait PluginsRunner {
    /// Runs the Filter plugins on `node`, counting the pods nominated to it with a priority
    /// at least `pod`'s (a node must pass with and without them). Upstream:
    /// RunFilterPluginsWithNominatedPods.
    fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status;

    /// Tells the PreFilter plugins (not skipped this cycle) that `to_add` now runs on `node`.
    fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;

    /// Tells the PreFilter plugins (not skipped this cycle) that `to_remove` left `node`.
    fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;

    /// The node `pod` is nominated to as the scheduler knows it: its own nominations reach
    /// the pod's `status.nominatedNodeName` only once the API server has them.
    fn nominated_node_name(&self, pod: &PodInfo) -> Option<String>;

    /// A number in `0..n` (`n > 0`) from the scheduler's seeded RNG, so that random choices
    /// are reproducible under a seed (`simulate`).
    fn random_index(&self, n: usize) -> usize;
}

/// Runs when no node passed Filter (e.g. preemption).
pub trait PostFilterPlugin: Plugin {
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        runner: &dyn PluginsRunner,
    ) -> (Option<PostFilterResult>, Status);
}

/// Computes per-pod state once before Score runs on every feasible node.
pub trait PreScorePlugin: Plugin {
    /// `nodes` are the feasible nodes. Returning `Skip` skips this plugin's Score.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status;
}

/// Ranks feasible nodes. Called concurrently for many nodes.
pub trait ScorePlugin: Plugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;

    /// Scores `nodes` into `out` (same length, same order), stopping at the first error.
    /// The runtime calls this, once per plugin and run of nodes; the default calls
    /// [`score`](Self::score) for each node. A plugin overrides it to look its PreScore
    /// state up once per call instead of once per node; the scores must be the ones
    /// `score` gives.
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        out: &mut [i64],
    ) -> Result<(), Status> {
        score_each(self, state, pod, nodes, out)
    }

    /// [`score_nodes`](Self::score_nodes), given also the nodes' [`NodeRow`]s (same length
    /// and order, `rows[i] == NodeRow::of(&nodes[i])`). The runtime calls this; a plugin
    /// overrides it to score from the rows, which lie in one flat array, instead of each
    /// NodeInfo. The scores must be the ones `score` gives.
    fn score_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        _rows: &[NodeRow],
        out: &mut [i64],
    ) -> Result<(), Status> {
        self.score_nodes(state, pod, nodes, out)
    }

    /// NormalizeScore, for plugins whose raw scores are not already in 0..=100.
    fn score_extensions(&self) -> Option<&dyn ScoreExtensions> {
        None
    }
}

/// [`ScorePlugin::score`] for each node in turn: the default
/// [`score_nodes`](ScorePlugin::score_nodes), for an override to fall back on.
pub fn score_each<P: ScorePlugin + ?Sized>(
    plugin: &P,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    out: &mut [i64],
) -> Result<(), Status> {
    for (node, o) in nodes.iter().zip(out.iter_mut()) {
        *o = plugin.score(state, pod, node)?;
    }
    Ok(())
}

/// A [`score_nodes`](ScorePlugin::score_nodes) for a plugin whose score of a node depends
/// on its PreScore state under `key` and the node only: looks the state up once and scores
/// each node with `score`; without the state (PreScore disabled), falls back to
/// [`score_each`].
pub fn score_nodes_with_state<P, T>(
    plugin: &P,
    key: &'static str,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    out: &mut [i64],
    score: impl Fn(&T, &NodeInfo) -> i64,
) -> Result<(), Status>
where
    P: ScorePlugin + ?Sized,
    T: StateData,
{
    let Some(s) = state.read::<T>(key) else {
        return score_each(plugin, state, pod, nodes, out);
    };
    for (node, o) in nodes.iter().zip(out.iter_mut()) {
        *o = score(s, node);
    }
    Ok(())
}

/// A [`score_rows`](ScorePlugin::score_rows) for a plugin whose score of a node depends on
/// its PreScore state under `key` and the node only: looks the state up once and scores
/// each node with `score` (which reads the row, and the NodeInfo only where the row does
/// not say enough); without the state, falls back to
/// [`score_nodes`](ScorePlugin::score_nodes).
#[allow(clippy::too_many_arguments)]
pub fn score_rows_with_state<P, T>(
    plugin: &P,
    key: &'static str,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    rows: &[NodeRow],
    out: &mut [i64],
    score: impl Fn(&T, &NodeInfo, &NodeRow) -> i64,
) -> Result<(), Status>
where
    P: ScorePlugin + ?Sized,
    T: StateData,
{
    let Some(s) = state.read::<T>(key) else {
        return plugin.score_nodes(state, pod, nodes, out);
    };
    if rows.len() != nodes.len() {
        return Err(Status::error(format!(
            "{} rows for {} nodes",
            rows.len(),
            nodes.len()
        )));
    }
    for ((node, row), o) in nodes.iter().zip(rows).zip(out.iter_mut()) {
        *o = score(s, node, row);
    }
    Ok(())
}

/// Rescales a plugin's raw scores into `MIN_NODE_SCORE..=MAX_NODE_SCORE`.
pub trait ScoreExtensions: Send + Sync {
    fn normalize_score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status;
}

/// Claims resources for the pod on the chosen node before binding; undone by `unreserve`
/// if a later step fails. `unreserve` must be idempotent.
pub trait ReservePlugin: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str);
}

/// Approves, denies or delays binding. `Wait` holds the pod up to the returned timeout.
pub trait PermitPlugin: Plugin {
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> (Status, Duration);
}

/// Work that must finish before the Binding is written (e.g. volume provisioning).
pub trait PreBindPlugin: Plugin {
    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node_name: &'a str,
    ) -> BoxFuture<'a, Status>;
}

/// Writes the binding. Returning `Skip` passes to the next Bind plugin.
pub trait BindPlugin: Plugin {
    fn bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node_name: &'a str,
    ) -> BoxFuture<'a, Status>;
}

/// Informational, after a successful bind.
pub trait PostBindPlugin: Plugin {
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str);
}

/// The cluster events (with optional queueing hints) that may make a pod this plugin rejected
/// schedulable.
pub trait EnqueueExtensions: Plugin {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_filter_results_intersect() {
        let a = PreFilterResult::nodes(["n1", "n2"]);
        let merged = a.merge(Some(PreFilterResult::nodes(["n2", "n3"])));
        assert_eq!(merged, PreFilterResult::nodes(["n2"]));
    }

    #[test]
    fn all_nodes_is_the_identity_of_merge() {
        let merged = PreFilterResult::default().merge(Some(PreFilterResult::nodes(["n1"])));
        assert_eq!(merged, PreFilterResult::nodes(["n1"]));
    }

    #[test]
    fn setting_a_node_again_replaces_its_status() {
        let mut m = NodeToStatus::new(Status::success());
        m.set("n1", Status::unschedulable("a"));
        m.set("n2", Status::unschedulable("b"));
        m.set("n1", Status::unschedulable("c"));
        let looked_up = m.get("n2").clone();
        m.set("n2", Status::unschedulable("d"));
        let all: Vec<(String, String)> = m
            .explicit()
            .map(|(n, s)| (n.to_string(), s.message()))
            .collect();
        assert_eq!(
            (looked_up, all),
            (
                Status::unschedulable("b"),
                vec![("n1".into(), "c".into()), ("n2".into(), "d".into())]
            )
        );
    }

    #[test]
    fn absent_nodes_get_the_absent_status() {
        let mut m = NodeToStatus::new(Status::unresolvable("excluded"));
        m.set("n1", Status::unschedulable("Too many pods"));
        assert_eq!(
            (m.get("n1").clone(), m.get("n2").clone()),
            (
                Status::unschedulable("Too many pods"),
                Status::unresolvable("excluded")
            )
        );
    }
}

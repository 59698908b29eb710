//! PreScore, Score and NormalizeScore: the `ScheduleAnyway` constraints.
//!
//! Upstream: pkg/scheduler/framework/plugins/podtopologyspread/scoring.go. A node's raw score
//! sums, per constraint whose key it carries,
//! `matching pods in its domain × log(domains + 2) + (maxSkew − 1)`; NormalizeScore inverts
//! it so that the emptiest domains score highest.
//! Domains are those of the feasible nodes; their counts come from every node of the
//! cluster (through the [`cache`](super::cache)), except for hostname constraints, whose
//! count is the node's own. Both are read by the node's position in the snapshot (domain
//! ids and own counts the cache keeps per node), and from the node's labels and pods only
//! where those cannot answer.

use std::collections::HashSet;
use std::sync::Arc;

use framework::{
    score_rows_with_state, CycleState, NodeInfo, NodeRow, NodeScore, PodInfo, PreScorePlugin,
    ScoreExtensions, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};

use super::cache::{CountKey, DomainTable, NodeDomains};
use super::common::{
    constraints_of, count_matching, has_all_keys, has_own_constraints, Constraint,
    RequiredNodeAffinity, SCHEDULE_ANYWAY,
};
use super::{PodTopologySpread, MIN_PARALLEL_NODES};
use crate::helper::node_cache::positions;
use crate::helper::taints::pod_tolerations;

/// CycleState key of [`PreScoreState`].
pub(super) const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

/// Score or NormalizeScore ran without the state PreScore writes (upstream's words).
const ERR_NO_PRE_SCORE_STATE: &str =
    "error reading \"PreScorePodTopologySpread\" from cycleState: not found";

impl PreScorePlugin for PodTopologySpread {
    /// Finds the domains of the feasible nodes and counts matching pods in them over all
    /// nodes; skips the pod when it has no `ScheduleAnyway` constraint or the cluster has no
    /// node.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        match self.pre_score_state(pod, snapshot, nodes) {
            Err(e) => Status::error(format!("calculating preScoreState: {e}")),
            Ok(None) => Status::skip(),
            Ok(Some(s)) => {
                state.write(PRE_SCORE_STATE_KEY, Arc::new(s));
                Status::success()
            }
        }
    }
}

impl ScorePlugin for PodTopologySpread {
    /// The sum over constraints of the node's domain count weighted by the constraint's
    /// topology weight, plus `maxSkew − 1`, rounded. A node missing a key of non-default
    /// constraints scores 0 (and stays 0 after normalizing).
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = state
            .read::<Arc<PreScoreState>>(PRE_SCORE_STATE_KEY)
            .ok_or_else(|| Status::error(ERR_NO_PRE_SCORE_STATE))?;
        Ok(s.score_by_labels(pod, node))
    }

    /// [`score`](Self::score) for each node, reading its domains by the row's position
    /// (numbers per constraint) instead of its labels; a node the counts cannot answer for
    /// (see [`PreScoreState::score_by_position`]) is scored by its labels.
    fn score_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        out: &mut [i64],
    ) -> Result<(), Status> {
        score_rows_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            rows,
            out,
            |s: &Arc<PreScoreState>, node, row| {
                row.index()
                    .and_then(|p| s.score_by_position(p))
                    .unwrap_or_else(|| s.score_by_labels(pod, node))
            },
        )
    }

    fn score_extensions(&self) -> Option<&dyn ScoreExtensions> {
        Some(self)
    }
}

impl ScoreExtensions for PodTopologySpread {
    /// `100 × (max + min − score) / max` over the nodes not ignored (100 for all when the
    /// maximum is 0); ignored nodes get 0.
    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        let Some(s) = state.read::<Arc<PreScoreState>>(PRE_SCORE_STATE_KEY) else {
            return Status::error(ERR_NO_PRE_SCORE_STATE);
        };
        let mut min = i64::MAX;
        let mut max = 0_i64;
        for ns in scores.iter() {
            if !s.is_ignored(ns.node) {
                min = min.min(ns.score);
                max = max.max(ns.score);
            }
        }
        for ns in scores.iter_mut() {
            ns.score = if s.is_ignored(ns.node) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - ns.score) / max
            };
        }
        Status::success()
    }
}

impl PodTopologySpread {
    /// The domains and counts of the pod's `ScheduleAnyway` constraints; `None` when it has
    /// none or the cluster has no node.
    fn pre_score_state(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        filtered: &[Arc<NodeInfo>],
    ) -> Result<Option<PreScoreState>, String> {
        let all = snapshot.node_infos();
        if all.is_empty() {
            return Ok(None);
        }
        let constraints = constraints_of(
            &pod.pod,
            &self.defaults,
            Some(snapshot.workloads()),
            SCHEDULE_ANYWAY,
        )?
        .unwrap_or_default();
        if constraints.is_empty() {
            return Ok(None);
        }
        // System defaults do not require every key, so that nodes without a zone label
        // still get hostname spreading.
        let require_all_keys = has_own_constraints(&pod.pod) || !self.defaults.system_defaulted;

        // Matching pods per domain over every node of the cluster; for hostname
        // constraints, each node's own count (what Score reads).
        let key = CountKey::new(
            pod.namespace(),
            &constraints,
            &RequiredNodeAffinity::of(&pod.pod),
            pod_tolerations(&pod.pod),
            require_all_keys,
        );
        let (tables, node_domains) =
            self.cache
                .tables_and_domains(key, all, &self.handle.parallelizer, MIN_PARALLEL_NODES);
        let empty_ids = tables.iter().map(|t| t.id("")).collect();
        // Hostname domains are read per node (its own count), never from the table.
        let counts = constraints
            .iter()
            .zip(tables)
            .map(|(c, t)| {
                if c.is_hostname() {
                    DomainTable::default()
                } else {
                    t
                }
            })
            .collect();
        let mut s = PreScoreState {
            constraints,
            counts,
            weights: Vec::new(),
            node_domains,
            empty_ids,
            ignored: HashSet::new(),
        };

        // The domains of the feasible nodes give each topology its weight: ids the counts
        // know, plus values no counted node has (their count is 0). A node is read by its
        // position where the counts answer for it, else by its labels.
        let mut seen: Vec<Vec<bool>> = s.counts.iter().map(|t| vec![false; t.len()]).collect();
        let mut unseen: Vec<HashSet<&str>> = s.constraints.iter().map(|_| HashSet::new()).collect();
        let first = filtered.first().and_then(|n| snapshot.position(n.name()));
        for (node, position) in filtered.iter().zip(positions(all, filtered, first)) {
            if let Some(p) = position.filter(|&p| s.answers_for(p)) {
                for (column, (c, seen)) in s.constraints.iter().zip(seen.iter_mut()).enumerate() {
                    let id = s.node_domains.counted(p, column).map(|(id, _)| id);
                    if let Some(flag) = id
                        .filter(|_| !c.is_hostname())
                        .and_then(|id| seen.get_mut(id as usize))
                    {
                        *flag = true;
                    }
                }
                continue;
            }
            let labels = node.labels();
            if require_all_keys && !has_all_keys(labels, &s.constraints) {
                s.ignored.insert(node.name().to_string());
                continue;
            }
            for (((c, table), seen), unseen) in s
                .constraints
                .iter()
                .zip(&s.counts)
                .zip(seen.iter_mut())
                .zip(unseen.iter_mut())
            {
                if c.is_hostname() {
                    continue;
                }
                let value = labels.get(&c.topology_key).map_or("", String::as_str);
                match table.id(value).and_then(|id| seen.get_mut(id as usize)) {
                    Some(flag) => *flag = true,
                    None => {
                        unseen.insert(value);
                    }
                }
            }
        }
        let weights = s
            .constraints
            .iter()
            .zip(seen.iter().zip(&unseen))
            .map(|(c, (seen, unseen))| {
                let size = if c.is_hostname() {
                    filtered.len() - s.ignored.len()
                } else {
                    seen.iter().filter(|&&s| s).count() + unseen.len()
                };
                topology_normalizing_weight(size)
            })
            .collect();
        s.weights = weights;
        Ok(Some(s))
    }
}

/// What PreScore computes once per pod for Score and NormalizeScore; read-only afterwards,
/// so copies of the cycle state share it. Upstream: podtopologyspread.preScoreState.
#[derive(Debug)]
pub(super) struct PreScoreState {
    pub constraints: Vec<Constraint>,
    /// Per constraint, matching pods per domain over the whole cluster. Score reads only
    /// the domains of feasible nodes, which is all upstream counts; for hostname
    /// constraints it reads each node's own count instead.
    pub counts: Vec<DomainTable>,
    /// Per constraint, `log(number of feasible domains + 2)`: counts in topologies with
    /// fewer domains weigh less.
    pub weights: Vec<f64>,
    /// The domain (and own count) of each node of the snapshot, per constraint, by
    /// position.
    node_domains: NodeDomains,
    /// Per constraint, the id of the empty topology value, if some node counted for it: a
    /// node lacking the key counts under it when keys are not all required, so a node of
    /// that domain is read by its labels to tell the two apart.
    empty_ids: Vec<Option<u32>>,
    /// The feasible nodes missing a key when every key is required, by name: they score 0.
    /// Upstream: preScoreState.IgnoredNodes.
    pub ignored: HashSet<String>,
}

impl PreScoreState {
    fn is_ignored(&self, node: &NodeInfo) -> bool {
        !self.ignored.is_empty() && self.ignored.contains(node.name())
    }

    /// Whether the node at `position` counts for a domain of every constraint, none of them
    /// the empty value: then it carries every key (so it is not ignored), its domains are
    /// those of its labels, and its own counts are those of its pods.
    fn answers_for(&self, position: usize) -> bool {
        self.empty_ids.iter().enumerate().all(|(column, empty)| {
            self.node_domains
                .counted(position, column)
                .is_some_and(|(id, _)| Some(id) != *empty)
        })
    }

    /// The score of the node at `position`, from its domain ids and own counts; `None`
    /// unless the counts [answer for it](Self::answers_for).
    fn score_by_position(&self, position: usize) -> Option<i64> {
        let mut score = 0.0_f64;
        let columns = self.constraints.iter().zip(&self.counts).zip(&self.weights);
        for (column, ((c, counts), weight)) in columns.enumerate() {
            let (id, own) = self.node_domains.counted(position, column)?;
            if self.empty_ids.get(column).copied().flatten() == Some(id) {
                return None;
            }
            let count = if c.is_hostname() {
                own
            } else {
                counts.count(id)
            };
            score += score_for_count(count, c.max_skew, *weight);
        }
        Some(score.round() as i64)
    }

    /// The score of `node` from its labels (and, for hostname constraints, its pods).
    fn score_by_labels(&self, pod: &PodInfo, node: &NodeInfo) -> i64 {
        if self.is_ignored(node) {
            return 0;
        }
        let labels = node.labels();
        let mut score = 0.0_f64;
        for ((c, counts), weight) in self.constraints.iter().zip(&self.counts).zip(&self.weights) {
            let Some(value) = labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.is_hostname() {
                count_matching(&node.pods, &c.selector, pod.namespace())
            } else {
                counts.id(value).map_or(0, |id| counts.count(id))
            };
            score += score_for_count(count, c.max_skew, *weight);
        }
        score.round() as i64
    }
}
/// `log(size + 2)`, in 1.09..8.52 for clusters of 1 to 5,000 domains.
fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

/// A domain's contribution: its count weighted by the topology, plus `maxSkew − 1` so that
/// larger skews tolerated make differences between domains matter less. Computed in
/// upstream's float order so that rounding matches.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew.wrapping_sub(1))
}

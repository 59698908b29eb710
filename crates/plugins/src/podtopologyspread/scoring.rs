//! PreScore, Score and NormalizeScore: the `ScheduleAnyway` constraints.
//!
//! Upstream: pkg/scheduler/framework/plugins/podtopologyspread/scoring.go. A node's raw score
//! sums, per constraint whose key it carries,
//! `matching pods in its domain × log(domains + 2) + (maxSkew − 1)`; NormalizeScore inverts
//! it so that the emptiest domains score highest.
//! Domains are those of the feasible nodes; their counts come from every node of the
//! cluster (through the [`cache`](super::cache)), except for hostname constraints, counted
//! on the node itself.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use framework::{
    CycleState, NodeInfo, NodeScore, PodInfo, PreScorePlugin, ScoreExtensions, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};

use super::cache::{CountKey, DomainTable};
use super::common::{
    constraints_of, count_matching, has_all_keys, has_own_constraints, Constraint,
    RequiredNodeAffinity, SCHEDULE_ANYWAY,
};
use super::{PodTopologySpread, MIN_PARALLEL_NODES};
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
        let labels = node.labels();
        if s.is_ignored(labels) {
            return Ok(0);
        }
        let mut score = 0.0_f64;
        for ((c, counts), weight) in s.constraints.iter().zip(&s.counts).zip(&s.weights) {
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
        Ok(score.round() as i64)
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
            if !s.is_ignored(ns.node.labels()) {
                min = min.min(ns.score);
                max = max.max(ns.score);
            }
        }
        for ns in scores.iter_mut() {
            ns.score = if s.is_ignored(ns.node.labels()) {
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

        // Matching pods per domain over every node of the cluster (hostname constraints
        // are counted on the node itself, in Score).
        let key = CountKey::new(
            pod.namespace(),
            &constraints,
            &RequiredNodeAffinity::of(&pod.pod),
            pod_tolerations(&pod.pod),
            require_all_keys,
            true,
        );
        let tables = self
            .cache
            .tables(key, all, &self.handle.parallelizer, MIN_PARALLEL_NODES);

        // The domains of the feasible nodes give each topology its weight: ids the counts
        // know, plus values no counted node has (their count is 0).
        let mut seen: Vec<Vec<bool>> = tables.iter().map(|t| vec![false; t.len()]).collect();
        let mut unseen: Vec<HashSet<&str>> = constraints.iter().map(|_| HashSet::new()).collect();
        let mut ignored = 0_usize;
        for node in filtered {
            let labels = node.labels();
            if require_all_keys && !has_all_keys(labels, &constraints) {
                ignored += 1;
                continue;
            }
            for (((c, table), seen), unseen) in constraints
                .iter()
                .zip(&tables)
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
        let weights = constraints
            .iter()
            .zip(seen.iter().zip(&unseen))
            .map(|(c, (seen, unseen))| {
                let size = if c.is_hostname() {
                    filtered.len() - ignored
                } else {
                    seen.iter().filter(|&&s| s).count() + unseen.len()
                };
                topology_normalizing_weight(size)
            })
            .collect();
        Ok(Some(PreScoreState {
            constraints,
            require_all_keys,
            counts: tables,
            weights,
        }))
    }
}

/// What PreScore computes once per pod for Score and NormalizeScore; read-only afterwards,
/// so copies of the cycle state share it. Upstream: podtopologyspread.preScoreState.
#[derive(Debug)]
pub(super) struct PreScoreState {
    pub constraints: Vec<Constraint>,
    /// Whether a node must carry every topology key to be scored (else it is "ignored").
    pub require_all_keys: bool,
    /// Per constraint, matching pods per domain over the whole cluster (nothing for
    /// hostname constraints). Score reads only the domains of feasible nodes, which is all
    /// upstream counts.
    pub counts: Vec<DomainTable>,
    /// Per constraint, `log(number of feasible domains + 2)`: counts in topologies with
    /// fewer domains weigh less.
    pub weights: Vec<f64>,
}

impl PreScoreState {
    /// Upstream's IgnoredNodes: feasible nodes missing a key when every key is required.
    fn is_ignored(&self, labels: &BTreeMap<String, String>) -> bool {
        self.require_all_keys && !has_all_keys(labels, &self.constraints)
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

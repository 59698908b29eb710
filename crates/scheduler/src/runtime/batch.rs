//! Opportunistic batching: consecutive pods with the same signature reuse the previous
//! cycle's Filter and Score work.
//!
//! Upstream: pkg/scheduler/framework/runtime/batch.go (KEP-5598, feature gate
//! `OpportunisticBatching`, beta and on in 1.35). After a cycle that scored several feasible
//! nodes for a signed pod, the other feasible nodes are kept, best first. When the next
//! cycle's pod has the same signature, the kept list is still valid if the only node that
//! changed is the one the last pod went to and that node now rejects the new pod (the pods
//! go one per node): then the next node of the list is the best one left, and the cycle
//! offers it as a *hint*. The cycle runs Filter on the hinted node alone and takes it when it
//! passes; otherwise it filters and scores all nodes as usual.
//!
//! The kept list is thrown away (and the flush counted by reason) when:
//! - a cycle ran in between (`pod_skipped`): another profile's pod, a pod that failed, an
//!   explained cycle — anything may have changed;
//! - the new pod is nominated to a node (`pod_nominated`): that node is tried first;
//! - the signatures differ, or the pod has none (`pod_incompatible`);
//! - the list is older than [`MAX_BATCH_AGE`] (`expired`): nodes may have changed since;
//! - the last chosen node is gone (`node_missing`) or would take the new pod too
//!   (`node_not_full`): its new score is unknown, so the list's order may be wrong;
//! - a cycle that did not use its hint leaves nothing to keep (`empty_list`: one feasible
//!   node, no scoring) or its pod was not signed (`pod_not_batchable`).
//!
//! Where this differs from upstream, on purpose: the ties of the kept list are broken by the
//! scheduling algorithm's own seeded RNG, where upstream draws a random number per node.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framework::PodSignature;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::clock::Clock;
use crate::metrics::{BatchAttemptResult, BatchFlushReason, MetricsRecorder};

/// How long a kept list may be reused (upstream `maxBatchAge`): long runs of identical pods
/// and long gaps between pods both start from a fresh cycle.
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(500);

/// A feasible node of a scored cycle with its total and tie-break.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ScoredNode {
    total: i64,
    tie_break: u64,
    name: Arc<str>,
}

impl Ord for ScoredNode {
    /// Higher totals first, then higher tie-breaks; names only make the order total.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.total, self.tie_break)
            .cmp(&(other.total, other.tie_break))
            .then_with(|| other.name.cmp(&self.name))
    }
}

impl PartialOrd for ScoredNode {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Feasible nodes kept by their position in a snapshot's node list, named only when the
/// list is first used: most kept lists are dropped unused (the next pod fits on the node
/// the last one went to), and naming 500 nodes and ordering them is most of what keeping a
/// list costs.
#[derive(Debug, Clone, Default)]
struct Unnamed {
    list_version: u64,
    /// `(position, total, tie_break)` of each node.
    nodes: Vec<(u32, i64, u64)>,
}

/// The feasible nodes of a scored cycle, best first (upstream `SortedScoredNodes`). Built in
/// linear time; each pop costs a logarithm, so a cycle that keeps a list it never uses pays
/// little.
#[derive(Debug, Clone, Default)]
pub struct SortedScoredNodes {
    heap: BinaryHeap<ScoredNode>,
    /// Nodes not named yet; they join `heap` at the first [`pop`](Self::pop).
    unnamed: Unnamed,
}

impl SortedScoredNodes {
    /// The nodes with their totals and tie-breaks.
    pub fn new(nodes: impl IntoIterator<Item = (Arc<str>, i64, u64)>) -> Self {
        SortedScoredNodes {
            heap: nodes
                .into_iter()
                .map(|(name, total, tie_break)| ScoredNode {
                    total,
                    tie_break,
                    name,
                })
                .collect(),
            unnamed: Unnamed::default(),
        }
    }

    /// The nodes at positions of the node list of version `list_version` (see
    /// `Snapshot::list_version`), with their totals and tie-breaks; named at the first
    /// [`pop`](Self::pop).
    pub fn at_positions(
        list_version: u64,
        nodes: impl IntoIterator<Item = (u32, i64, u64)>,
    ) -> Self {
        SortedScoredNodes {
            heap: BinaryHeap::new(),
            unnamed: Unnamed {
                list_version,
                nodes: nodes.into_iter().collect(),
            },
        }
    }

    /// The nodes in the order given, best first.
    pub fn ordered<S: AsRef<str>>(names: &[S]) -> Self {
        let n = names.len() as i64;
        SortedScoredNodes::new(
            names
                .iter()
                .enumerate()
                .map(|(i, name)| (Arc::from(name.as_ref()), n - i as i64, 0)),
        )
    }

    /// Takes the best node left. `name_at(version, position)` names the nodes kept by
    /// position (`Snapshot::name_at`); when it cannot name one, the list is dropped.
    pub fn pop(&mut self, name_at: impl Fn(u64, u32) -> Option<Arc<str>>) -> Option<Arc<str>> {
        if !self.unnamed.nodes.is_empty() {
            let Unnamed {
                list_version,
                nodes,
            } = std::mem::take(&mut self.unnamed);
            let named: Option<Vec<ScoredNode>> = nodes
                .into_iter()
                .map(|(position, total, tie_break)| {
                    name_at(list_version, position).map(|name| ScoredNode {
                        total,
                        tie_break,
                        name,
                    })
                })
                .collect();
            match named {
                Some(named) => self.heap.extend(named),
                None => {
                    self.heap.clear();
                    return None;
                }
            }
        }
        self.heap.pop().map(|n| n.name)
    }

    pub fn len(&self) -> usize {
        self.heap.len() + self.unnamed.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The named nodes left, best first, then the positions of the unnamed ones (tests and
    /// logs).
    pub fn names(&self) -> Vec<String> {
        let mut nodes: Vec<&ScoredNode> = self.heap.iter().collect();
        nodes.sort_by(|a, b| b.cmp(a));
        let named = nodes.iter().map(|n| n.name.to_string());
        let unnamed = self.unnamed.nodes.iter().map(|(p, _, _)| format!("#{p}"));
        named.chain(unnamed).collect()
    }
}

/// The list kept from the last scored cycle of a signed pod.
#[derive(Debug, Clone)]
struct BatchState {
    signature: PodSignature,
    sorted_nodes: SortedScoredNodes,
    created: Instant,
}

/// The last cycle that stored its results.
#[derive(Debug, Clone)]
struct LastCycle {
    cycle: u64,
    chosen_node: String,
}

/// What the last node chosen says of the new pod, for [`OpportunisticBatch::get_node_hint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastNode {
    /// Not in the snapshot any more.
    Missing,
    /// Its Filter plugins reject the pod (Unschedulable or UnschedulableAndUnresolvable).
    Rejects,
    /// The pod would fit there too (or a plugin failed on it).
    Fits,
}

/// One profile's batching state. Upstream: OpportunisticBatch.
#[derive(Debug)]
pub struct OpportunisticBatch {
    profile: String,
    metrics: Arc<dyn MetricsRecorder>,
    state: Option<BatchState>,
    last_cycle: Option<LastCycle>,
    /// Pods placed on their hint (tests read it).
    batched_pods: u64,
}

impl OpportunisticBatch {
    pub fn new(profile: impl Into<String>, metrics: Arc<dyn MetricsRecorder>) -> Self {
        OpportunisticBatch {
            profile: profile.into(),
            metrics,
            state: None,
            last_cycle: None,
            batched_pods: 0,
        }
    }

    /// The node to try first for a pod with `signature` in scheduling cycle `cycle`, taken
    /// off the kept list, or `None` (and the list dropped when it no longer holds).
    /// `nominated`: the pod is nominated to a node. `last_node` says what the node the last
    /// pod went to says of this pod; it is asked only when everything else allows a hint.
    /// `name_at` names nodes kept by position (`Snapshot::name_at` of the cycle's snapshot).
    #[allow(clippy::too_many_arguments)]
    pub fn get_node_hint(
        &mut self,
        signature: Option<&PodSignature>,
        nominated: bool,
        cycle: u64,
        now: Instant,
        last_node: impl FnOnce(&str) -> LastNode,
        name_at: impl Fn(u64, u32) -> Option<Arc<str>>,
    ) -> Option<Arc<str>> {
        let hint = if self.state_compatible(signature, nominated, cycle, now, last_node) {
            self.state
                .as_mut()
                .and_then(|s| s.sorted_nodes.pop(name_at))
        } else {
            None
        };
        if hint.is_none() {
            self.metrics
                .inc_batch_attempt(&self.profile, BatchAttemptResult::NoHint);
        }
        hint
    }

    /// Records a cycle that chose `chosen` (after offering `hinted`, if any) and keeps
    /// `other_nodes` (the feasible nodes but `chosen`, best first) for the next pod when the
    /// hint was not taken. Upstream: StoreScheduleResults.
    /// `other_nodes` is how many feasible nodes there were besides `chosen`, and
    /// `sorted_nodes` builds their list; it runs only when the list is kept.
    #[allow(clippy::too_many_arguments)]
    pub fn store_schedule_results(
        &mut self,
        signature: Option<PodSignature>,
        hinted: Option<&str>,
        chosen: &str,
        other_nodes: usize,
        sorted_nodes: impl FnOnce() -> SortedScoredNodes,
        cycle: u64,
        now: Instant,
    ) {
        self.last_cycle = Some(LastCycle {
            cycle,
            chosen_node: chosen.to_string(),
        });
        if hinted == Some(chosen) {
            // The kept list, less the node just taken, still holds for the next pod.
            self.metrics
                .inc_batch_attempt(&self.profile, BatchAttemptResult::HintUsed);
            self.batched_pods += 1;
            return;
        }
        if hinted.is_some() {
            self.metrics
                .inc_batch_attempt(&self.profile, BatchAttemptResult::HintNotUsed);
        }
        match signature {
            _ if other_nodes == 0 => self.flush(BatchFlushReason::EmptyList),
            None => self.flush(BatchFlushReason::PodNotBatchable),
            Some(signature) => {
                self.state = Some(BatchState {
                    signature,
                    sorted_nodes: sorted_nodes(),
                    created: now,
                });
            }
        }
    }

    /// Pods placed on their hint so far.
    pub fn batched_pods(&self) -> u64 {
        self.batched_pods
    }

    /// The nodes left in the kept list, best first (empty without one).
    pub fn remaining_nodes(&self) -> Vec<String> {
        self.state
            .as_ref()
            .map(|s| s.sorted_nodes.names())
            .unwrap_or_default()
    }

    /// The signature of the kept list.
    pub fn signature(&self) -> Option<&PodSignature> {
        self.state.as_ref().map(|s| &s.signature)
    }

    fn flush(&mut self, reason: BatchFlushReason) {
        tracing::trace!(profile = %self.profile, reason = reason.as_str(), "dropping the batch");
        self.metrics.inc_batch_cache_flushed(&self.profile, reason);
        self.state = None;
    }

    fn state_compatible(
        &mut self,
        signature: Option<&PodSignature>,
        nominated: bool,
        cycle: u64,
        now: Instant,
        last_node: impl FnOnce(&str) -> LastNode,
    ) -> bool {
        let Some(state) = self.state.as_ref().filter(|s| !s.sorted_nodes.is_empty()) else {
            return false;
        };
        let Some(last) = self
            .last_cycle
            .as_ref()
            .filter(|l| l.cycle.checked_add(1) == Some(cycle))
        else {
            self.flush(BatchFlushReason::PodSkipped);
            return false;
        };
        if nominated {
            self.flush(BatchFlushReason::PodNominated);
            return false;
        }
        if signature != Some(&state.signature) {
            self.flush(BatchFlushReason::PodIncompatible);
            return false;
        }
        if now.saturating_duration_since(state.created) > MAX_BATCH_AGE {
            self.flush(BatchFlushReason::Expired);
            return false;
        }
        match last_node(&last.chosen_node) {
            LastNode::Rejects => true,
            LastNode::Missing => {
                self.flush(BatchFlushReason::NodeMissing);
                false
            }
            LastNode::Fits => {
                self.flush(BatchFlushReason::NodeNotFull);
                false
            }
        }
    }
}

/// Batching across the cycles of one scheduling loop: a batch per profile, the cycle count
/// that tells consecutive cycles apart, the clock that ages kept lists, and the RNG that
/// breaks ties in them.
#[derive(Debug)]
pub struct Batching {
    clock: Arc<dyn Clock>,
    metrics: Arc<dyn MetricsRecorder>,
    profiles: Vec<OpportunisticBatch>,
    cycle: u64,
    rng: SmallRng,
}

impl Batching {
    pub fn new(clock: Arc<dyn Clock>, metrics: Arc<dyn MetricsRecorder>, seed: u64) -> Self {
        Batching {
            clock,
            metrics,
            profiles: Vec::new(),
            cycle: 0,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Starts the next scheduling cycle (upstream counts one per pod popped): the batch of
    /// `profile` and what the cycle needs of it.
    pub fn start_cycle(&mut self, profile: &str) -> CycleBatch<'_> {
        self.cycle += 1;
        let now = self.clock.now();
        // A scheduler has a handful of profiles: a list finds one without hashing.
        let i = match self.profiles.iter().position(|b| b.profile == profile) {
            Some(i) => i,
            None => {
                let batch = OpportunisticBatch::new(profile, self.metrics.clone());
                self.profiles.push(batch);
                self.profiles.len() - 1
            }
        };
        let batch = &mut self.profiles[i];
        CycleBatch {
            batch,
            rng: &mut self.rng,
            cycle: self.cycle,
            now,
            signature: None,
            hint: None,
        }
    }

    /// Counts a cycle that does not batch (an explained one), so that the next one does not
    /// reuse work from before it.
    pub fn skip_cycle(&mut self) {
        self.cycle += 1;
    }

    /// The batch of `profile`, if a cycle of it ran.
    pub fn profile(&self, profile: &str) -> Option<&OpportunisticBatch> {
        self.profiles.iter().find(|b| b.profile == profile)
    }
}

/// One cycle's view of its profile's batch.
#[derive(Debug)]
pub struct CycleBatch<'a> {
    batch: &'a mut OpportunisticBatch,
    rng: &'a mut SmallRng,
    cycle: u64,
    now: Instant,
    /// The pod's signature, once signed.
    pub signature: Option<PodSignature>,
    /// The node offered by the batch, if any.
    pub hint: Option<Arc<str>>,
}

impl CycleBatch<'_> {
    /// Signs the pod and asks the batch for a hint (after PreFilter, whose state the check
    /// of the last chosen node reads). `snapshot` is the cycle's.
    pub fn get_node_hint(
        &mut self,
        signature: Option<PodSignature>,
        nominated: bool,
        snapshot: &framework::Snapshot,
        last_node: impl FnOnce(&str) -> LastNode,
    ) {
        self.hint = self.batch.get_node_hint(
            signature.as_ref(),
            nominated,
            self.cycle,
            self.now,
            last_node,
            |version, position| snapshot.name_at(version, position as usize).cloned(),
        );
        self.signature = signature;
    }

    /// Records the cycle's choice; `others` are the other feasible nodes with their totals.
    pub fn store_schedule_results<'n>(
        &mut self,
        chosen: &str,
        others: impl ExactSizeIterator<Item = (&'n Arc<str>, i64)>,
    ) {
        let count = others.len();
        let rng = &mut *self.rng;
        self.batch.store_schedule_results(
            self.signature.take(),
            self.hint.as_deref(),
            chosen,
            count,
            || SortedScoredNodes::new(others.map(|(n, t)| (n.clone(), t, rng.random::<u64>()))),
            self.cycle,
            self.now,
        );
    }

    /// [`store_schedule_results`](Self::store_schedule_results) with the other feasible
    /// nodes given by position in the node list of version `list_version` (named only if
    /// the list is used). The tie-breaks are drawn as there, one per node in order.
    pub fn store_schedule_results_at(
        &mut self,
        chosen: &str,
        list_version: u64,
        others: impl ExactSizeIterator<Item = (u32, i64)>,
    ) {
        let count = others.len();
        let rng = &mut *self.rng;
        self.batch.store_schedule_results(
            self.signature.take(),
            self.hint.as_deref(),
            chosen,
            count,
            || {
                SortedScoredNodes::at_positions(
                    list_version,
                    others.map(|(p, t)| (p, t, rng.random::<u64>())),
                )
            },
            self.cycle,
            self.now,
        );
    }
}

#[cfg(test)]
mod tests;

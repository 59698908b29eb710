//! PreScore, Score and NormalizeScore.
//!
//! Upstream: pkg/scheduler/framework/plugins/interpodaffinity/scoring.go.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::types::WeightedAffinityTerm;
use framework::{
    CycleState, NodeInfo, NodeScore, PodInfo, PreScorePlugin, ScoreExtensions, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use k8s_openapi::api::core::v1::Pod;

use super::{
    affinity_parse_error, incoming_term_matches, push_pair, resolve_namespaces, InterPodAffinity,
    PairCount, SelectedNamespaces, TopologyCounts, PARALLEL_SCAN_MIN_NODES, PRE_SCORE_STATE_KEY,
};

impl PreScorePlugin for InterPodAffinity {
    /// Sums, per topology pair of every existing pod's node: the weights of the pod's
    /// preferred affinity terms the existing pod matches (minus those of its preferred
    /// anti-affinity terms), and the weights of the existing pod's preferred affinity terms
    /// (minus anti-affinity) and `hardPodAffinityWeight` per required affinity term that the
    /// incoming pod matches. Without preferred terms of its own, only pods with affinity
    /// are looked at; with `ignorePreferredTermsOfExistingPods`, none (Skip). Skip too when
    /// nothing matched.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let has_preferred = has_preferred_terms(&pod.pod);
        if self.args.ignore_preferred_terms_of_existing_pods && !has_preferred {
            return Status::skip();
        }
        if let Some(err) = affinity_parse_error(pod) {
            return Status::error(format!("failed to parse pod: {err}"));
        }
        let own_namespace = pod.namespace();
        let scan = ScoreScan {
            incoming: pod,
            affinity_namespaces: resolve_namespaces(
                pod.preferred_affinity_terms.iter().map(|w| &w.term),
                snapshot,
            ),
            anti_affinity_namespaces: resolve_namespaces(
                pod.preferred_anti_affinity_terms.iter().map(|w| &w.term),
                snapshot,
            ),
            namespace_labels: snapshot.namespace_labels(own_namespace),
            hard_pod_affinity_weight: i64::from(self.args.hard_pod_affinity_weight),
        };
        let nodes: Vec<&NodeInfo> = if has_preferred {
            snapshot.node_infos().iter().map(|n| n.as_ref()).collect()
        } else {
            snapshot
                .have_pods_with_affinity()
                .map(|n| n.as_ref())
                .collect()
        };
        let chunks =
            self.parallelizer
                .map_chunks_from(nodes.len(), PARALLEL_SCAN_MIN_NODES, |range| {
                    let mut pairs: Vec<PairCount<'_>> = Vec::new();
                    for node in nodes.get(range).unwrap_or_default() {
                        let labels = node.labels();
                        if labels.is_empty() {
                            continue;
                        }
                        let pods = if has_preferred {
                            &node.pods
                        } else {
                            &node.pods_with_affinity
                        };
                        for existing in pods {
                            scan.existing_pod(existing, labels, &mut pairs);
                        }
                    }
                    pairs
                });
        if chunks.iter().all(Vec::is_empty) {
            return Status::skip();
        }
        let mut topology_score = TopologyCounts::default();
        for (key, value, weight) in chunks.into_iter().flatten() {
            topology_score.accumulate(key, value, weight);
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { topology_score });
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    /// The sum PreScore computed for the node's topology pairs: positive for affinity,
    /// negative for anti-affinity.
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => Ok(s.topology_score.sum_on(node.labels())),
            None => Err(missing_state()),
        }
    }

    fn score_extensions(&self) -> Option<&dyn ScoreExtensions> {
        Some(self)
    }
}

impl ScoreExtensions for InterPodAffinity {
    /// Min-max scaling to 0..=100 over the scored nodes (truncated); equal scores all
    /// become 0. Nothing to do when PreScore summed nothing.
    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return missing_state();
        };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let (Some(min), Some(max)) = (
            scores.iter().map(|s| s.score).min(),
            scores.iter().map(|s| s.score).max(),
        ) else {
            return Status::success();
        };
        let spread = i128::from(max) - i128::from(min);
        for s in scores.iter_mut() {
            let scaled = if spread > 0 {
                MAX_NODE_SCORE as f64
                    * ((i128::from(s.score) - i128::from(min)) as f64 / spread as f64)
            } else {
                0.0
            };
            s.score = scaled as i64;
        }
        Status::success()
    }
}

/// What PreScore sums once per pod for Score.
#[derive(Debug, Clone)]
pub(super) struct PreScoreState {
    /// Summed weights per topology pair.
    pub(super) topology_score: TopologyCounts,
}

/// What PreScore's scan reads for every existing pod.
struct ScoreScan<'a> {
    incoming: &'a PodInfo,
    /// The namespaceSelectors of the incoming pod's preferred terms, resolved.
    affinity_namespaces: Vec<SelectedNamespaces>,
    anti_affinity_namespaces: Vec<SelectedNamespaces>,
    /// The labels of the incoming pod's namespace, for existing pods' namespaceSelectors.
    namespace_labels: Option<&'a BTreeMap<String, String>>,
    hard_pod_affinity_weight: i64,
}

impl<'a> ScoreScan<'a> {
    /// Adds the weights between the incoming pod and `existing`, on the pairs of the
    /// existing pod's node.
    fn existing_pod(
        &self,
        existing: &'a PodInfo,
        labels: &'a BTreeMap<String, String>,
        out: &mut Vec<PairCount<'a>>,
    ) {
        let incoming = self.incoming;
        let incoming_terms = incoming
            .preferred_affinity_terms
            .iter()
            .zip(&self.affinity_namespaces)
            .map(|(t, s)| (t, s, 1))
            .chain(
                incoming
                    .preferred_anti_affinity_terms
                    .iter()
                    .zip(&self.anti_affinity_namespaces)
                    .map(|(t, s)| (t, s, -1)),
            );
        for (weighted, selected, sign) in incoming_terms {
            if incoming_term_matches(&weighted.term, selected, &existing.pod) {
                push_weight(
                    out,
                    labels,
                    &weighted.term.topology_key,
                    i64::from(weighted.weight) * sign,
                );
            }
        }
        if self.hard_pod_affinity_weight > 0 {
            for term in &existing.required_affinity_terms {
                if term.matches(&incoming.pod, self.namespace_labels) {
                    push_weight(
                        out,
                        labels,
                        &term.topology_key,
                        self.hard_pod_affinity_weight,
                    );
                }
            }
        }
        self.existing_preferred(&existing.preferred_affinity_terms, 1, labels, out);
        self.existing_preferred(&existing.preferred_anti_affinity_terms, -1, labels, out);
    }

    /// The existing pod's preferred terms that select the incoming pod, with `sign`.
    fn existing_preferred(
        &self,
        terms: &'a [WeightedAffinityTerm],
        sign: i64,
        labels: &'a BTreeMap<String, String>,
        out: &mut Vec<PairCount<'a>>,
    ) {
        for weighted in terms {
            if weighted
                .term
                .matches(&self.incoming.pod, self.namespace_labels)
            {
                push_weight(
                    out,
                    labels,
                    &weighted.term.topology_key,
                    i64::from(weighted.weight) * sign,
                );
            }
        }
    }
}

/// Adds `weight` on the node's pair for `key`, when the node has that label.
fn push_weight<'a>(
    out: &mut Vec<PairCount<'a>>,
    labels: &'a BTreeMap<String, String>,
    key: &'a str,
    weight: i64,
) {
    if let Some(value) = labels.get(key) {
        push_pair(out, key, value, weight);
    }
}

/// Whether the pod's spec has preferred pod affinity or anti-affinity terms (read from the
/// spec, as upstream does, so a term that failed to compile still counts).
fn has_preferred_terms(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let affinity_terms = affinity
        .pod_affinity
        .as_ref()
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|t| !t.is_empty());
    let anti_terms = affinity
        .pod_anti_affinity
        .as_ref()
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|t| !t.is_empty());
    affinity_terms || anti_terms
}

fn missing_state() -> Status {
    Status::error(format!(
        "failed to read {PRE_SCORE_STATE_KEY:?} from cycleState: not found"
    ))
}

//! PreScore, Score and NormalizeScore.
//!
//! PreScore's sums cover every node of the cluster; they are kept across cycles per
//! [`ScoreKey`] (the incoming pod's preferred terms and resolved namespaces, the labels
//! existing pods' terms look at, the topology keys) in the plugin's [`ScoreCache`], so that a
//! stream of pods of one workload re-sums only the nodes changed since the last cycle (see
//! [`helper::node_cache`](crate::helper::node_cache)). The result is exactly what summing
//! afresh gives.
//!
//! Upstream: pkg/scheduler/framework/plugins/interpodaffinity/scoring.go.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::types::WeightedAffinityTerm;
use framework::{
    score_rows_with_state, CycleState, NodeInfo, NodeRow, NodeScore, PodInfo, PreScorePlugin,
    ScoreExtensions, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::helper::node_cache::{self, Contribution, DomainTable, NodeDomains};

use super::{
    affinity_parse_error, incoming_term_matches, resolve_namespaces, InterPodAffinity,
    SelectedNamespaces, PARALLEL_SCAN_MIN_NODES, PRE_SCORE_STATE_KEY,
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
        if !has_preferred && snapshot.have_pods_with_affinity().next().is_none() {
            // The common case: nothing to sum, without looking at a node.
            return Status::skip();
        }
        let (existing_keys, label_keys) = self.score_term_keys.get(snapshot);
        let key = ScoreKey::new(
            pod,
            snapshot,
            existing_keys,
            &label_keys,
            i64::from(self.args.hard_pod_affinity_weight),
            has_preferred,
        );
        if key.keys.is_empty() {
            return Status::skip();
        }
        let keys = key.keys.clone();
        let (tables, domains) = self.score_cache.tables_and_domains(
            key,
            snapshot.node_infos(),
            &self.parallelizer,
            PARALLEL_SCAN_MIN_NODES,
        );
        let summed = PreScoreState {
            columns: keys.into_iter().zip(tables).collect(),
            domains,
        };
        if summed.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, summed);
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    /// The sum PreScore computed for the node's topology pairs: positive for affinity,
    /// negative for anti-affinity.
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => Ok(s.sum_on(node.labels())),
            None => Err(missing_state()),
        }
    }

    /// [`score`](Self::score) for each node, reading the ids of its topology values by the
    /// row's position instead of its labels (a row at no position: by its labels).
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
            |s: &PreScoreState, node, row| match row.index() {
                Some(p) => s.sum_at(p),
                None => s.sum_on(node.labels()),
            },
        )
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
        if s.is_empty() {
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

/// What PreScore sums once per pod for Score: per topology key, the summed weights of its
/// domains. A domain exists once a term matched there, whatever its sum (as upstream's
/// score map keeps an entry it added to, even when the weights cancel out).
#[derive(Debug, Clone, Default)]
pub(super) struct PreScoreState {
    pub(super) columns: Vec<(String, DomainTable)>,
    /// Per column, the id of each node's topology value, by its position in the snapshot.
    pub(super) domains: NodeDomains,
}

impl PreScoreState {
    /// [`sum_on`](Self::sum_on) for the node at `position`: a node without a column's key
    /// has no id there and adds nothing.
    fn sum_at(&self, position: usize) -> i64 {
        self.columns
            .iter()
            .enumerate()
            .filter_map(|(column, (_, table))| {
                Some(table.count(self.domains.domain(position, column)?))
            })
            .sum()
    }

    /// The sum over the node's pairs.
    fn sum_on(&self, node_labels: &BTreeMap<String, String>) -> i64 {
        self.columns
            .iter()
            .filter_map(|(key, table)| Some(table.count(table.id(node_labels.get(key)?)?)))
            .sum()
    }

    /// Whether no term matched anywhere.
    fn is_empty(&self) -> bool {
        self.columns.iter().all(|(_, t)| t.present() == 0)
    }

    /// The summed pairs, sorted: what summing afresh would give.
    #[cfg(test)]
    pub(super) fn sorted(&self) -> Vec<(String, String, i64)> {
        let mut pairs: Vec<(String, String, i64)> = self
            .columns
            .iter()
            .flat_map(|(key, table)| {
                table
                    .domains()
                    .map(move |(id, sum)| (key.clone(), table.value(id).to_string(), sum))
            })
            .collect();
        pairs.sort();
        pairs
    }
}

/// What a node's summed weights depend on besides the node: the incoming pod's preferred
/// terms and the namespaces they resolved to; for existing pods' terms, the incoming pod's
/// namespace and the labels they look at, the labels of its namespace and
/// `hardPodAffinityWeight`; and the topology keys (one column each, sorted: the incoming
/// pod's and every key existing pods' terms use).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ScoreKey {
    affinity_terms: Vec<WeightedAffinityTerm>,
    affinity_namespaces: Vec<SelectedNamespaces>,
    anti_terms: Vec<WeightedAffinityTerm>,
    anti_namespaces: Vec<SelectedNamespaces>,
    /// A pod with only the incoming pod's namespace and the labels existing pods' terms'
    /// selectors look at (their verdict depends on no other label).
    probe: Pod,
    namespace_labels: Option<BTreeMap<String, String>>,
    hard_pod_affinity_weight: i64,
    /// Whether every pod counts (the incoming pod has preferred terms) or only pods with
    /// affinity terms of their own.
    all_pods: bool,
    keys: Vec<String>,
}

impl ScoreKey {
    fn new(
        pod: &PodInfo,
        snapshot: &Snapshot,
        existing_keys: Vec<String>,
        label_keys: &[String],
        hard_pod_affinity_weight: i64,
        all_pods: bool,
    ) -> Self {
        let mut keys = existing_keys;
        for weighted in pod
            .preferred_affinity_terms
            .iter()
            .chain(&pod.preferred_anti_affinity_terms)
        {
            if !keys.contains(&weighted.term.topology_key) {
                keys.push(weighted.term.topology_key.clone());
            }
        }
        keys.sort_unstable();
        ScoreKey {
            affinity_namespaces: resolve_namespaces(
                pod.preferred_affinity_terms.iter().map(|w| &w.term),
                snapshot,
            ),
            anti_namespaces: resolve_namespaces(
                pod.preferred_anti_affinity_terms.iter().map(|w| &w.term),
                snapshot,
            ),
            affinity_terms: pod.preferred_affinity_terms.clone(),
            anti_terms: pod.preferred_anti_affinity_terms.clone(),
            probe: Pod {
                metadata: ObjectMeta {
                    namespace: pod.pod.metadata.namespace.clone(),
                    labels: pod.pod.metadata.labels.as_ref().map(|labels| {
                        labels
                            .iter()
                            .filter(|(k, _)| label_keys.contains(k))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    }),
                    ..ObjectMeta::default()
                },
                ..Pod::default()
            },
            namespace_labels: snapshot.namespace_labels(pod.namespace()).cloned(),
            hard_pod_affinity_weight,
            all_pods,
            keys,
        }
    }

    /// The weights between the incoming pod and `existing` on topology key `key`: added to
    /// `sum`; whether any term with that key matched.
    fn weigh(&self, existing: &PodInfo, key: &str, sum: &mut i64) -> bool {
        let mut matched = false;
        let mut add = |weight: i64| {
            *sum += weight;
            matched = true;
        };
        let incoming = self
            .affinity_terms
            .iter()
            .zip(&self.affinity_namespaces)
            .map(|(t, s)| (t, s, 1))
            .chain(
                self.anti_terms
                    .iter()
                    .zip(&self.anti_namespaces)
                    .map(|(t, s)| (t, s, -1)),
            );
        for (weighted, selected, sign) in incoming {
            if weighted.term.topology_key == key
                && incoming_term_matches(&weighted.term, selected, &existing.pod)
            {
                add(i64::from(weighted.weight) * sign);
            }
        }
        let namespace_labels = self.namespace_labels.as_ref();
        if self.hard_pod_affinity_weight > 0 {
            for term in &existing.required_affinity_terms {
                if term.topology_key == key && term.matches(&self.probe, namespace_labels) {
                    add(self.hard_pod_affinity_weight);
                }
            }
        }
        let existing_terms = existing
            .preferred_affinity_terms
            .iter()
            .map(|t| (t, 1))
            .chain(
                existing
                    .preferred_anti_affinity_terms
                    .iter()
                    .map(|t| (t, -1)),
            );
        for (weighted, sign) in existing_terms {
            if weighted.term.topology_key == key
                && weighted.term.matches(&self.probe, namespace_labels)
            {
                add(i64::from(weighted.weight) * sign);
            }
        }
        matched
    }
}

impl node_cache::CountKey for ScoreKey {
    fn columns(&self) -> usize {
        self.keys.len()
    }

    /// Per key, the weights summed over the node's pods; a node with the key where no term
    /// with that key matched is looked up by its value, a node without the key gives
    /// nothing (what Score reads by position relies on).
    fn contribute<'n>(&self, node: &'n NodeInfo, mut f: impl FnMut(Contribution<'n>)) {
        let labels = node.labels();
        let has_pods = if self.all_pods {
            !node.pods.is_empty()
        } else {
            !node.pods_with_affinity.is_empty()
        };
        for key in &self.keys {
            let Some(value) = labels.get(key) else {
                f(Contribution::None);
                continue;
            };
            let mut sum = 0;
            let mut matched = false;
            if has_pods && self.all_pods {
                for existing in &node.pods {
                    matched |= self.weigh(existing, key, &mut sum);
                }
            } else if has_pods {
                for existing in &node.pods_with_affinity {
                    matched |= self.weigh(existing, key, &mut sum);
                }
            }
            f(if matched {
                Contribution::Counts(value.as_str(), sum)
            } else {
                Contribution::Lookup(value.as_str())
            });
        }
    }
}

/// PreScore's sums for the last few incoming pods, kept across cycles.
pub(super) type ScoreCache = node_cache::CountCache<ScoreKey>;

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

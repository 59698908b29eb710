//! PreFilter, its AddPod/RemovePod extensions, and Filter.
//!
//! Upstream: pkg/scheduler/framework/plugins/interpodaffinity/filtering.go.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::{
    CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin,
    PreFilterResult, Snapshot, Status,
};

use super::{
    affinity_parse_error, incoming_matches_all, incoming_term_matches, push_pair,
    resolve_namespaces, InterPodAffinity, PairCount, SelectedNamespaces, TopologyCounts,
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, PARALLEL_SCAN_MIN_NODES,
    PRE_FILTER_STATE_KEY,
};

impl PreFilterPlugin for InterPodAffinity {
    /// Counts, per topology pair, the existing pods whose required anti-affinity matches the
    /// pod, and the existing pods matching the pod's required affinity (all terms) and each
    /// of its anti-affinity terms. Skip when the pod has no required terms and no existing
    /// pod's anti-affinity matches it. A pod whose terms do not compile is unresolvable.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if let Some(err) = affinity_parse_error(pod) {
            return (None, Status::unresolvable(format!("parsing pod: {err}")));
        }
        let own_namespace = pod.namespace();
        let namespace_labels = snapshot.namespace_labels(own_namespace);
        let existing_anti_affinity_counts =
            self.existing_anti_affinity_counts(pod, namespace_labels, snapshot);
        if existing_anti_affinity_counts.is_empty()
            && pod.required_affinity_terms.is_empty()
            && pod.required_anti_affinity_terms.is_empty()
        {
            return (None, Status::skip());
        }
        let affinity_namespaces = resolve_namespaces(&pod.required_affinity_terms, snapshot);
        let anti_affinity_namespaces =
            resolve_namespaces(&pod.required_anti_affinity_terms, snapshot);
        let (affinity_counts, anti_affinity_counts) = self.incoming_counts(
            pod,
            &affinity_namespaces,
            &anti_affinity_namespaces,
            snapshot,
        );
        let matches_own_affinity =
            incoming_matches_all(&pod.required_affinity_terms, &affinity_namespaces, &pod.pod);
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                existing_anti_affinity_counts,
                affinity_counts,
                anti_affinity_counts,
                affinity_namespaces,
                anti_affinity_namespaces,
                namespace_labels: namespace_labels.cloned(),
                matches_own_affinity,
            },
        );
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for InterPodAffinity {
    /// Counts `pod_to_add` on `node` as PreFilter would have.
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_schedule, pod_to_add, node, 1);
                Status::success()
            }
            None => missing_state(),
        }
    }

    /// Uncounts `pod_to_remove` from `node`.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_schedule, pod_to_remove, node, -1);
                Status::success()
            }
            None => missing_state(),
        }
    }
}

impl FilterPlugin for InterPodAffinity {
    /// The pod's affinity first (unresolvable: preemption cannot add a pod), then its
    /// anti-affinity, then existing pods' anti-affinity (both resolvable by preemption).
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        let labels = node.labels();
        if !s.satisfies_pod_affinity(pod, labels) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_pod_anti_affinity(pod, labels) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_existing_pods_anti_affinity(labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}

impl InterPodAffinity {
    /// Per topology pair, the existing pods with a required anti-affinity term matching
    /// `pod`, one count per matching term. Only nodes holding such pods are scanned.
    fn existing_anti_affinity_counts(
        &self,
        pod: &PodInfo,
        namespace_labels: Option<&BTreeMap<String, String>>,
        snapshot: &Snapshot,
    ) -> TopologyCounts {
        let nodes: Vec<&NodeInfo> = snapshot
            .have_pods_with_required_anti_affinity()
            .map(|n| n.as_ref())
            .collect();
        let mut counts = TopologyCounts::default();
        if nodes.is_empty() {
            return counts;
        }
        let chunks =
            self.parallelizer
                .map_chunks_from(nodes.len(), PARALLEL_SCAN_MIN_NODES, |range| {
                    let mut pairs: Vec<PairCount<'_>> = Vec::new();
                    for node in nodes.get(range).unwrap_or_default() {
                        let labels = node.labels();
                        for existing in &node.pods_with_required_anti_affinity {
                            for term in &existing.required_anti_affinity_terms {
                                if !term.matches(&pod.pod, namespace_labels) {
                                    continue;
                                }
                                if let Some(value) = labels.get(&term.topology_key) {
                                    push_pair(&mut pairs, &term.topology_key, value, 1);
                                }
                            }
                        }
                    }
                    pairs
                });
        for (key, value, count) in chunks.into_iter().flatten() {
            counts.add(key, value, count);
        }
        counts
    }

    /// Per topology pair, the existing pods matching all of `pod`'s required affinity terms
    /// (once per term) and those matching each of its required anti-affinity terms.
    fn incoming_counts(
        &self,
        pod: &PodInfo,
        affinity_namespaces: &[SelectedNamespaces],
        anti_affinity_namespaces: &[SelectedNamespaces],
        snapshot: &Snapshot,
    ) -> (TopologyCounts, TopologyCounts) {
        let mut affinity_counts = TopologyCounts::default();
        let mut anti_affinity_counts = TopologyCounts::default();
        let affinity_terms = &pod.required_affinity_terms;
        let anti_terms = &pod.required_anti_affinity_terms;
        if affinity_terms.is_empty() && anti_terms.is_empty() {
            return (affinity_counts, anti_affinity_counts);
        }
        let nodes = snapshot.node_infos();
        let chunks =
            self.parallelizer
                .map_chunks_from(nodes.len(), PARALLEL_SCAN_MIN_NODES, |range| {
                    let mut affinity: Vec<PairCount<'_>> = Vec::new();
                    let mut anti: Vec<PairCount<'_>> = Vec::new();
                    // Matching pods per anti-affinity term, on the node being scanned.
                    let mut anti_hits = vec![0i64; anti_terms.len()];
                    for node in nodes.get(range).unwrap_or_default() {
                        if node.pods.is_empty() {
                            continue;
                        }
                        let mut affinity_hits = 0;
                        anti_hits.fill(0);
                        for existing in &node.pods {
                            if incoming_matches_all(
                                affinity_terms,
                                affinity_namespaces,
                                &existing.pod,
                            ) {
                                affinity_hits += 1;
                            }
                            for ((term, selected), hits) in anti_terms
                                .iter()
                                .zip(anti_affinity_namespaces)
                                .zip(anti_hits.iter_mut())
                            {
                                if incoming_term_matches(term, selected, &existing.pod) {
                                    *hits += 1;
                                }
                            }
                        }
                        let labels = node.labels();
                        if affinity_hits > 0 {
                            for term in affinity_terms {
                                if let Some(value) = labels.get(&term.topology_key) {
                                    push_pair(
                                        &mut affinity,
                                        &term.topology_key,
                                        value,
                                        affinity_hits,
                                    );
                                }
                            }
                        }
                        for (term, &hits) in anti_terms.iter().zip(anti_hits.iter()) {
                            if hits == 0 {
                                continue;
                            }
                            if let Some(value) = labels.get(&term.topology_key) {
                                push_pair(&mut anti, &term.topology_key, value, hits);
                            }
                        }
                    }
                    (affinity, anti)
                });
        for (affinity, anti) in chunks {
            for (key, value, count) in affinity {
                affinity_counts.add(key, value, count);
            }
            for (key, value, count) in anti {
                anti_affinity_counts.add(key, value, count);
            }
        }
        (affinity_counts, anti_affinity_counts)
    }
}

/// What PreFilter computes once per pod for Filter.
#[derive(Debug, Clone)]
struct PreFilterState {
    /// Existing pods whose required anti-affinity matches the incoming pod, per pair.
    existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods matching all the incoming pod's required affinity terms, per pair.
    affinity_counts: TopologyCounts,
    /// Existing pods matching one of the incoming pod's required anti-affinity terms.
    anti_affinity_counts: TopologyCounts,
    /// The namespaceSelectors of the incoming pod's required terms, resolved.
    affinity_namespaces: Vec<SelectedNamespaces>,
    anti_affinity_namespaces: Vec<SelectedNamespaces>,
    /// The labels of the incoming pod's namespace, for existing pods' namespaceSelectors.
    namespace_labels: Option<BTreeMap<String, String>>,
    /// Whether the incoming pod matches all its own required affinity terms.
    matches_own_affinity: bool,
}

impl PreFilterState {
    /// Every affinity term's topology key must be on the node, and each pair must hold a
    /// matching pod; unless no pod anywhere matches and the pod matches its own terms (the
    /// first pod of a group that wants to be together), in which case the keys suffice.
    fn satisfies_pod_affinity(&self, pod: &PodInfo, labels: &BTreeMap<String, String>) -> bool {
        let mut pods_exist = true;
        for term in &pod.required_affinity_terms {
            let Some(value) = labels.get(&term.topology_key) else {
                return false;
            };
            if self.affinity_counts.get(&term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        pods_exist || (self.affinity_counts.is_empty() && self.matches_own_affinity)
    }

    /// No anti-affinity term may have a matching pod in the node's pair; a node without the
    /// term's topology key satisfies it.
    fn satisfies_pod_anti_affinity(
        &self,
        pod: &PodInfo,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        if self.anti_affinity_counts.is_empty() {
            return true;
        }
        !pod.required_anti_affinity_terms.iter().any(|term| {
            labels
                .get(&term.topology_key)
                .is_some_and(|value| self.anti_affinity_counts.get(&term.topology_key, value) > 0)
        })
    }

    /// No existing pod whose anti-affinity matches the incoming pod may share a topology
    /// pair with the node.
    fn satisfies_existing_pods_anti_affinity(&self, labels: &BTreeMap<String, String>) -> bool {
        self.existing_anti_affinity_counts.is_empty()
            || !self.existing_anti_affinity_counts.any_positive_on(labels)
    }

    /// Counts `other` on `node` with `sign` (+1 added, -1 removed).
    fn update_with_pod(&mut self, incoming: &PodInfo, other: &PodInfo, node: &NodeInfo, sign: i64) {
        let labels = node.labels();
        for term in &other.required_anti_affinity_terms {
            if term.matches(&incoming.pod, self.namespace_labels.as_ref()) {
                if let Some(value) = labels.get(&term.topology_key) {
                    self.existing_anti_affinity_counts
                        .add(&term.topology_key, value, sign);
                }
            }
        }
        if incoming_matches_all(
            &incoming.required_affinity_terms,
            &self.affinity_namespaces,
            &other.pod,
        ) {
            for term in &incoming.required_affinity_terms {
                if let Some(value) = labels.get(&term.topology_key) {
                    self.affinity_counts.add(&term.topology_key, value, sign);
                }
            }
        }
        for (term, selected) in incoming
            .required_anti_affinity_terms
            .iter()
            .zip(&self.anti_affinity_namespaces)
        {
            if incoming_term_matches(term, selected, &other.pod) {
                if let Some(value) = labels.get(&term.topology_key) {
                    self.anti_affinity_counts
                        .add(&term.topology_key, value, sign);
                }
            }
        }
    }
}

fn missing_state() -> Status {
    Status::error(format!(
        "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
    ))
}

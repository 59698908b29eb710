//! PreFilter, its AddPod/RemovePod extensions, and Filter.
//!
//! The counts of the incoming pod's required terms cover every node of the cluster; they
//! are kept across cycles per [`IncomingKey`] (the terms and their resolved namespaces) in
//! the plugin's [`CountCache`], so that a stream of pods of one workload recounts only the
//! nodes changed since the last cycle (see [`helper::node_cache`](crate::helper::node_cache)).
//! AddPod/RemovePod change the cycle's copy, never the cache.
//!
//! Upstream: pkg/scheduler/framework/plugins/interpodaffinity/filtering.go.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use framework::types::{AffinityTerm, WeightedAffinityTerm};
use framework::{
    filter_each, CycleState, FilterPlugin, NodeInfo, NodeRow, PodInfo, PreFilterExtensions,
    PreFilterPlugin, PreFilterResult, Snapshot, Status,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::helper::node_cache::{self, Contribution, DomainTable, NodeDomains};

use super::{
    affinity_parse_error, incoming_matches_all, incoming_term_matches, resolve_namespaces,
    InterPodAffinity, SelectedNamespaces, TopologyCounts, ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PARALLEL_SCAN_MIN_NODES, PRE_FILTER_STATE_KEY,
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

    /// The same decision, reading the id of each topology value of the node by the row's
    /// position (a number per key) instead of the node's labels; a row at no position, and
    /// every node once AddPod/RemovePod changed this cycle's counts, are decided by
    /// [`filter`](Self::filter).
    fn filter_with_row(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
    ) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        match row.index().and_then(|p| s.decide_at(pod, p)) {
            Some(status) => status,
            None => self.filter(state, pod, node),
        }
    }

    /// [`filter_with_row`](Self::filter_with_row) for each node, the state read once.
    fn filter_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        alive: &mut Vec<u32>,
        rejected: &mut Vec<(u32, Status)>,
    ) {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return filter_each(alive, rejected, |_| missing_state());
        };
        filter_each(alive, rejected, |i| {
            match rows[i].index().and_then(|p| s.decide_at(pod, p)) {
                Some(status) => status,
                None => self.filter(state, pod, &nodes[i]),
            }
        });
    }
}

impl InterPodAffinity {
    /// Per topology pair, the existing pods with a required anti-affinity term matching
    /// `pod`, one count per matching term; from the cache, brought up to date with the
    /// snapshot. One column per topology key of the existing pods' terms.
    fn existing_anti_affinity_counts(
        &self,
        pod: &PodInfo,
        namespace_labels: Option<&BTreeMap<String, String>>,
        snapshot: &Snapshot,
    ) -> PairCounts {
        if snapshot
            .have_pods_with_required_anti_affinity()
            .next()
            .is_none()
        {
            return PairCounts::default();
        }
        // The topology keys of the terms, and the label keys their selectors look at.
        let (keys, label_keys) = self.term_keys.get(snapshot);
        let key = ExistingKey {
            probe: Pod {
                metadata: ObjectMeta {
                    namespace: pod.pod.metadata.namespace.clone(),
                    // Only the labels some selector looks at: pods of a workload whose
                    // other labels differ (a StatefulSet's pod names) share the key.
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
            namespace_labels: namespace_labels.cloned(),
            keys: keys.clone(),
        };
        let (tables, domains) = self.existing_cache.tables_and_domains(
            key,
            snapshot.node_infos(),
            &self.parallelizer,
            PARALLEL_SCAN_MIN_NODES,
        );
        PairCounts::new(keys.into_iter().zip(tables).collect(), domains, 0)
    }

    /// Per topology pair, the existing pods matching all of `pod`'s required affinity terms
    /// (once per term) and those matching each of its required anti-affinity terms; from
    /// the cache, brought up to date with the snapshot.
    fn incoming_counts(
        &self,
        pod: &PodInfo,
        affinity_namespaces: &[SelectedNamespaces],
        anti_affinity_namespaces: &[SelectedNamespaces],
        snapshot: &Snapshot,
    ) -> (PairCounts, PairCounts) {
        let affinity_terms = &pod.required_affinity_terms;
        let anti_terms = &pod.required_anti_affinity_terms;
        if affinity_terms.is_empty() && anti_terms.is_empty() {
            return (PairCounts::default(), PairCounts::default());
        }
        let key = IncomingKey::new(
            affinity_terms,
            affinity_namespaces,
            anti_terms,
            anti_affinity_namespaces,
        );
        let affinity_keys: Vec<String> = key.affinity_keys.iter().map(|(k, _)| k.clone()).collect();
        let anti_keys = key.anti_keys.clone();
        let (tables, domains) = self.cache.tables_and_domains(
            key,
            snapshot.node_infos(),
            &self.parallelizer,
            PARALLEL_SCAN_MIN_NODES,
        );
        let mut tables = tables.into_iter();
        let offset = affinity_keys.len();
        let affinity = PairCounts::new(
            affinity_keys.into_iter().zip(tables.by_ref()).collect(),
            domains.clone(),
            0,
        );
        let anti = PairCounts::new(anti_keys.into_iter().zip(tables).collect(), domains, offset);
        (affinity, anti)
    }
}

/// What a node's counts for the incoming pod's required terms depend on besides the node:
/// the terms and the namespaces their selectors resolved to. One column per distinct
/// topology key: affinity keys first, then anti-affinity keys (terms sharing a key add up
/// in the same pairs, as upstream's per-pair counts do).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct IncomingKey {
    affinity_terms: Vec<AffinityTerm>,
    affinity_namespaces: Vec<SelectedNamespaces>,
    anti_terms: Vec<AffinityTerm>,
    anti_namespaces: Vec<SelectedNamespaces>,
    /// The distinct topology keys of the affinity terms, with how many terms have each.
    affinity_keys: Vec<(String, i64)>,
    /// The distinct topology keys of the anti-affinity terms.
    anti_keys: Vec<String>,
    /// Per anti-affinity term, the index of its key in `anti_keys`.
    anti_columns: Vec<usize>,
}

impl IncomingKey {
    fn new(
        affinity_terms: &[AffinityTerm],
        affinity_namespaces: &[SelectedNamespaces],
        anti_terms: &[AffinityTerm],
        anti_namespaces: &[SelectedNamespaces],
    ) -> Self {
        let mut affinity_keys: Vec<(String, i64)> = Vec::new();
        for term in affinity_terms {
            match affinity_keys
                .iter_mut()
                .find(|(k, _)| *k == term.topology_key)
            {
                Some((_, times)) => *times += 1,
                None => affinity_keys.push((term.topology_key.clone(), 1)),
            }
        }
        let mut anti_keys: Vec<String> = Vec::new();
        let anti_columns = anti_terms
            .iter()
            .map(
                |term| match anti_keys.iter().position(|k| *k == term.topology_key) {
                    Some(i) => i,
                    None => {
                        anti_keys.push(term.topology_key.clone());
                        anti_keys.len() - 1
                    }
                },
            )
            .collect();
        IncomingKey {
            affinity_terms: affinity_terms.to_vec(),
            affinity_namespaces: affinity_namespaces.to_vec(),
            anti_terms: anti_terms.to_vec(),
            anti_namespaces: anti_namespaces.to_vec(),
            affinity_keys,
            anti_keys,
            anti_columns,
        }
    }
}

impl node_cache::CountKey for IncomingKey {
    fn columns(&self) -> usize {
        self.affinity_keys.len() + self.anti_keys.len()
    }

    /// Affinity columns: the node's pods matching all affinity terms, times the terms with
    /// that key. Anti-affinity columns: per term with that key, the node's pods matching it,
    /// summed. A node with the key where nothing matched is looked up by its value; only a
    /// node without the key gives nothing (what Filter reads by position relies on).
    fn contribute<'n>(&self, node: &'n NodeInfo, mut f: impl FnMut(Contribution<'n>)) {
        let labels = node.labels();
        let affinity_hits = if self.affinity_terms.is_empty() {
            0
        } else {
            node.pods
                .iter()
                .filter(|p| {
                    incoming_matches_all(&self.affinity_terms, &self.affinity_namespaces, &p.pod)
                })
                .count() as i64
        };
        for (key, times) in &self.affinity_keys {
            f(match labels.get(key) {
                Some(value) if affinity_hits > 0 => {
                    Contribution::Counts(value.as_str(), affinity_hits * times)
                }
                Some(value) => Contribution::Lookup(value.as_str()),
                None => Contribution::None,
            });
        }
        for (column, key) in self.anti_keys.iter().enumerate() {
            let Some(value) = labels.get(key) else {
                f(Contribution::None);
                continue;
            };
            let hits: i64 = if node.pods.is_empty() {
                0
            } else {
                self.anti_terms
                    .iter()
                    .zip(&self.anti_namespaces)
                    .zip(&self.anti_columns)
                    .filter(|(_, &c)| c == column)
                    .map(|((term, selected), _)| {
                        node.pods
                            .iter()
                            .filter(|p| incoming_term_matches(term, selected, &p.pod))
                            .count() as i64
                    })
                    .sum()
            };
            f(counts_or_lookup(value, hits));
        }
    }
}

/// A node's part in a column where only positive counts make a domain.
fn counts_or_lookup(value: &str, hits: i64) -> Contribution<'_> {
    if hits > 0 {
        Contribution::Counts(value, hits)
    } else {
        Contribution::Lookup(value)
    }
}

/// What a node's count of existing pods whose required anti-affinity matches the incoming
/// pod depends on besides the node: the incoming pod's namespace and labels (all a term
/// looks at), the labels of its namespace, and the topology keys the existing pods' terms
/// use (one column each).
/// Pods of several workloads share a key when they agree on the labels the terms select
/// on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ExistingKey {
    /// A pod with only the incoming pod's namespace and the labels the terms' selectors
    /// look at (a selector's verdict depends on no other label).
    probe: Pod,
    namespace_labels: Option<BTreeMap<String, String>>,
    keys: Vec<String>,
}

impl node_cache::CountKey for ExistingKey {
    fn columns(&self) -> usize {
        self.keys.len()
    }

    /// Per key, the node's pods' required anti-affinity terms with that key matching the
    /// incoming pod; a node with the key where none did is looked up by its value, a node
    /// without the key gives nothing.
    fn contribute<'n>(&self, node: &'n NodeInfo, mut f: impl FnMut(Contribution<'n>)) {
        let labels = node.labels();
        for key in &self.keys {
            let Some(value) = labels.get(key) else {
                f(Contribution::None);
                continue;
            };
            let hits = node
                .pods_with_required_anti_affinity
                .iter()
                .flat_map(|p| &p.required_anti_affinity_terms)
                .filter(|t| {
                    t.topology_key == *key && t.matches(&self.probe, self.namespace_labels.as_ref())
                })
                .count() as i64;
            f(counts_or_lookup(value, hits));
        }
    }
}

/// The topology keys, and the label keys their selectors look at, of existing pods' terms
/// of one kind ([`TermSource`]); kept across cycles and updated from the nodes whose
/// `Arc<NodeInfo>` changed (as [`node_cache`] does; the nodes are held for the same
/// reason). Keys of pods since gone stay until the node count changes or the keys pass
/// [`MAX_TERM_KEYS`]: a superset is exact, since an extra column counts nothing and an
/// extra label of the incoming pod changes no selector's verdict.
#[derive(Debug)]
pub(super) struct TermKeys {
    seen: Mutex<SeenTermKeys>,
    source: TermSource,
}

/// Which terms of existing pods [`TermKeys`] collects.
#[derive(Debug, Clone, Copy)]
pub(super) enum TermSource {
    /// Required anti-affinity (PreFilter's existing-pod counts).
    RequiredAntiAffinity,
    /// Required affinity and preferred affinity and anti-affinity: what PreScore weighs.
    Scoring,
}

impl TermSource {
    /// The pods of `node` that may have such terms.
    fn pods(self, node: &NodeInfo) -> &[Arc<PodInfo>] {
        match self {
            TermSource::RequiredAntiAffinity => &node.pods_with_required_anti_affinity,
            TermSource::Scoring => &node.pods_with_affinity,
        }
    }

    /// The terms of `pod` of this kind.
    fn terms(self, pod: &PodInfo) -> impl Iterator<Item = &AffinityTerm> {
        let (required, preferred): (&[AffinityTerm], [&[WeightedAffinityTerm]; 2]) = match self {
            TermSource::RequiredAntiAffinity => (&pod.required_anti_affinity_terms, [&[], &[]]),
            TermSource::Scoring => (
                &pod.required_affinity_terms,
                [
                    &pod.preferred_affinity_terms,
                    &pod.preferred_anti_affinity_terms,
                ],
            ),
        };
        required
            .iter()
            .chain(preferred.into_iter().flatten().map(|w| &w.term))
    }
}

/// Beyond this many keys, they are collected afresh.
const MAX_TERM_KEYS: usize = 64;

#[derive(Debug, Default)]
struct SeenTermKeys {
    nodes: Vec<Arc<NodeInfo>>,
    topology: Vec<String>,
    labels: Vec<String>,
}

impl TermKeys {
    pub(super) fn new(source: TermSource) -> Self {
        TermKeys {
            seen: Mutex::default(),
            source,
        }
    }

    /// The topology keys (sorted, so that they do not depend on node order) and the label
    /// keys of the terms on `snapshot`'s nodes.
    pub(super) fn get(&self, snapshot: &Snapshot) -> (Vec<String>, Vec<String>) {
        // A panic while holding the lock leaves a superset at worst: still exact.
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let seen = &mut *seen;
        let nodes = snapshot.node_infos();
        let afresh = seen.nodes.len() != nodes.len()
            || seen.topology.len() + seen.labels.len() > MAX_TERM_KEYS;
        if afresh {
            *seen = SeenTermKeys::default();
        }
        let mut added = false;
        for (i, node) in nodes.iter().enumerate() {
            match seen.nodes.get_mut(i) {
                Some(held) if Arc::ptr_eq(held, node) => continue,
                Some(held) => *held = node.clone(),
                None => seen.nodes.push(node.clone()),
            }
            for existing in self.source.pods(node) {
                for term in self.source.terms(existing) {
                    added |= push_new(&mut seen.topology, &term.topology_key);
                    for r in term.selector.requirements() {
                        added |= push_new(&mut seen.labels, &r.key);
                    }
                }
            }
        }
        if added {
            seen.topology.sort_unstable();
        }
        (seen.topology.clone(), seen.labels.clone())
    }
}

/// Appends `key` unless present; whether it was appended.
fn push_new(keys: &mut Vec<String>, key: &str) -> bool {
    if keys.iter().any(|k| k == key) {
        return false;
    }
    keys.push(key.to_string());
    true
}

/// The counts of existing pods' anti-affinity against the last few incoming pods' labels.
pub(super) type ExistingCountCache = node_cache::CountCache<ExistingKey>;

/// The counts of the last few workloads' required terms, kept across cycles.
pub(super) type CountCache = node_cache::CountCache<IncomingKey>;

/// Counts per topology pair of the incoming pod's required terms: the cached tables (one
/// per distinct topology key) plus what AddPod/RemovePod changed in this cycle.
#[derive(Debug, Clone, Default)]
pub(super) struct PairCounts {
    columns: Vec<(String, DomainTable)>,
    /// Per column, the id of each node's topology value, by its position in the snapshot;
    /// column `i` is `domains`' column `offset + i`.
    domains: NodeDomains,
    offset: usize,
    /// The cycle's changes, per pair.
    changes: TopologyCounts,
    /// How many pairs have a non-zero count.
    nonzero: usize,
}

impl PairCounts {
    fn new(columns: Vec<(String, DomainTable)>, domains: NodeDomains, offset: usize) -> Self {
        // The cache only counts nodes with matching pods, so each present domain has a
        // positive count.
        let nonzero = columns.iter().map(|(_, t)| t.present()).sum();
        PairCounts {
            columns,
            domains,
            offset,
            changes: TopologyCounts::default(),
            nonzero,
        }
    }

    /// The column of topology key `key`.
    fn column(&self, key: &str) -> Option<usize> {
        self.columns.iter().position(|(k, _)| k == key)
    }

    /// The count of the pair of the node at `position` in `column`: `Some(None)` when the
    /// node lacks the column's key; `None` when the position cannot answer (no such column
    /// or node, or this cycle changed counts, which are kept by value).
    fn get_at(&self, column: usize, position: usize) -> Option<Option<i64>> {
        if !self.changes.is_empty() {
            return None;
        }
        let (_, table) = self.columns.get(column)?;
        Some(
            self.domains
                .domain(position, self.offset + column)
                .map(|id| table.count(id)),
        )
    }

    /// [`any_positive_on`](Self::any_positive_on) for the node at `position`; `None` when
    /// the position cannot answer.
    fn any_positive_at(&self, position: usize) -> Option<bool> {
        let mut any = false;
        for column in 0..self.columns.len() {
            any |= self.get_at(column, position)?.is_some_and(|n| n > 0);
        }
        Some(any)
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        let counted = self
            .columns
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, t)| Some(t.count(t.id(value)?)))
            .unwrap_or(0);
        if self.changes.is_empty() {
            counted
        } else {
            counted + self.changes.get(key, value)
        }
    }

    /// Whether one of the node's pairs has a positive count.
    pub(super) fn any_positive_on(&self, node_labels: &BTreeMap<String, String>) -> bool {
        self.columns
            .iter()
            .map(|(k, _)| k)
            .chain(self.changes.0.iter().map(|(k, _)| k))
            .any(|key| {
                node_labels
                    .get(key)
                    .is_some_and(|value| self.get(key, value) > 0)
            })
    }

    /// Whether no pair has a non-zero count.
    pub(super) fn is_empty(&self) -> bool {
        self.nonzero == 0
    }

    pub(super) fn add(&mut self, key: &str, value: &str, delta: i64) {
        let before = self.get(key, value) != 0;
        self.changes.add(key, value, delta);
        let after = self.get(key, value) != 0;
        match (before, after) {
            (false, true) => self.nonzero += 1,
            (true, false) => self.nonzero = self.nonzero.saturating_sub(1),
            _ => {}
        }
    }

    /// The non-zero pairs, sorted: what counting afresh would give.
    #[cfg(test)]
    pub(super) fn sorted(&self) -> Vec<(String, String, i64)> {
        let mut pairs: Vec<(String, String, i64)> = Vec::new();
        for (key, table) in &self.columns {
            for (id, _) in table.domains() {
                let value = table.value(id);
                pairs.push((key.clone(), value.to_string(), self.get(key, value)));
            }
        }
        for (key, values) in &self.changes.0 {
            for value in values.keys() {
                if !pairs.iter().any(|(k, v, _)| k == key && v == value) {
                    pairs.push((key.clone(), value.clone(), self.get(key, value)));
                }
            }
        }
        pairs.retain(|p| p.2 != 0);
        pairs.sort();
        pairs
    }
}

/// What PreFilter computes once per pod for Filter.
#[derive(Debug, Clone)]
pub(super) struct PreFilterState {
    /// Existing pods whose required anti-affinity matches the incoming pod, per pair.
    pub(super) existing_anti_affinity_counts: PairCounts,
    /// Existing pods matching all the incoming pod's required affinity terms, per pair.
    pub(super) affinity_counts: PairCounts,
    /// Existing pods matching one of the incoming pod's required anti-affinity terms.
    pub(super) anti_affinity_counts: PairCounts,
    /// The namespaceSelectors of the incoming pod's required terms, resolved.
    affinity_namespaces: Vec<SelectedNamespaces>,
    anti_affinity_namespaces: Vec<SelectedNamespaces>,
    /// The labels of the incoming pod's namespace, for existing pods' namespaceSelectors.
    namespace_labels: Option<BTreeMap<String, String>>,
    /// Whether the incoming pod matches all its own required affinity terms.
    matches_own_affinity: bool,
}

impl PreFilterState {
    /// [`filter`](InterPodAffinity::filter)'s status for the node at `position`, from the
    /// ids of its topology values; `None` when the position cannot answer.
    fn decide_at(&self, pod: &PodInfo, position: usize) -> Option<Status> {
        let mut pods_exist = true;
        for term in &pod.required_affinity_terms {
            let column = self.affinity_counts.column(&term.topology_key)?;
            match self.affinity_counts.get_at(column, position)? {
                None => return Some(Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)),
                Some(n) if n <= 0 => pods_exist = false,
                Some(_) => {}
            }
        }
        if !(pods_exist || (self.affinity_counts.is_empty() && self.matches_own_affinity)) {
            return Some(Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH));
        }
        if !self.anti_affinity_counts.is_empty() {
            for term in &pod.required_anti_affinity_terms {
                let column = self.anti_affinity_counts.column(&term.topology_key)?;
                if self
                    .anti_affinity_counts
                    .get_at(column, position)?
                    .is_some_and(|n| n > 0)
                {
                    return Some(Status::unschedulable(
                        ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
                    ));
                }
            }
        }
        if !self.existing_anti_affinity_counts.is_empty()
            && self
                .existing_anti_affinity_counts
                .any_positive_at(position)?
        {
            return Some(Status::unschedulable(
                ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
            ));
        }
        Some(Status::success())
    }

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

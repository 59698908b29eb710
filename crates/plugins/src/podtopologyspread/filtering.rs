//! PreFilter, its AddPod/RemovePod extensions, and Filter: the `DoNotSchedule` constraints.
//!
//! Upstream: pkg/scheduler/framework/plugins/podtopologyspread/filtering.go. PreFilter takes,
//! once per pod, the matching pods of every topology domain over all nodes (from the
//! [`cache`](super::cache), which recounts only the nodes changed since the workload's last
//! cycle) and the two smallest counts per constraint; Filter then decides a node with two
//! lookups per constraint, allocating nothing.

use std::collections::HashMap;
use std::sync::Arc;

use framework::{
    filter_each, CycleState, FilterPlugin, NodeInfo, NodeRow, PodInfo, PreFilterExtensions,
    PreFilterPlugin, PreFilterResult, Snapshot, Status,
};

use super::cache::{CountKey, DomainTable, NodeDomains};
use super::common::{
    constraints_of, has_all_keys, Constraint, Inclusion, RequiredNodeAffinity, DO_NOT_SCHEDULE,
};
use super::{
    PodTopologySpread, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH,
    MIN_PARALLEL_NODES,
};
use crate::helper::taints::pod_tolerations;

/// CycleState key of [`PreFilterState`].
pub(super) const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";

/// Filter, AddPod or RemovePod ran without the state PreFilter writes (upstream's words).
const ERR_NO_PRE_FILTER_STATE: &str =
    "reading \"PreFilterPodTopologySpread\" from cycleState: not found";

impl PreFilterPlugin for PodTopologySpread {
    /// Counts matching pods per domain of each `DoNotSchedule` constraint; skips the pod
    /// when it has none.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.pre_filter_state(pod, snapshot) {
            Err(e) => (
                None,
                Status::error(format!("get constraints from pod: {e}")),
            ),
            Ok(None) => (None, Status::skip()),
            Ok(Some(s)) => {
                state.write(PRE_FILTER_STATE_KEY, s);
                (None, Status::success())
            }
        }
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for PodTopologySpread {
    /// Counts `pod_to_add` as if it ran on `node`.
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_add, pod_to_schedule, node, 1);
                Status::success()
            }
            None => Status::error(ERR_NO_PRE_FILTER_STATE),
        }
    }

    /// Stops counting `pod_to_remove` on `node`.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_remove, pod_to_schedule, node, -1);
                Status::success()
            }
            None => Status::error(ERR_NO_PRE_FILTER_STATE),
        }
    }
}

impl FilterPlugin for PodTopologySpread {
    /// For each constraint: the node must carry the topology key (else
    /// UnschedulableAndUnresolvable), and placing the pod in the node's domain must keep
    /// `matching + self − global minimum ≤ maxSkew` (else Unschedulable). The global minimum
    /// is 0 while fewer domains than `minDomains` exist.
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(ERR_NO_PRE_FILTER_STATE);
        };
        let labels = node.labels();
        for ((c, domains), self_match) in s.constraints.iter().zip(&s.domains).zip(&*s.self_match) {
            let Some(value) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let matching = domains.count(value);
            let skew = matching + self_match - domains.min_match_num(c.min_domains);
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }

    /// The same decision, reading the domain each node counted for by the row's position
    /// (a number per constraint) instead of the node's labels; a node that counted for no
    /// domain of some constraint (it lacks a key, or an inclusion policy leaves it out) and
    /// a row at no position are decided by [`filter`](Self::filter).
    fn filter_with_row(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
    ) -> Status {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => self.filter_row_in(s, state, pod, node, row),
            None => Status::error(ERR_NO_PRE_FILTER_STATE),
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
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => filter_each(alive, rejected, |i| {
                self.filter_row_in(s, state, pod, &nodes[i], &rows[i])
            }),
            None => filter_each(alive, rejected, |_| Status::error(ERR_NO_PRE_FILTER_STATE)),
        }
    }
}

impl PodTopologySpread {
    /// [`filter_with_row`](FilterPlugin::filter_with_row) given the cycle's PreFilter state.
    fn filter_row_in(
        &self,
        s: &PreFilterState,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
    ) -> Status {
        let Some(position) = row.index() else {
            return self.filter(state, pod, node);
        };
        let constraints = s.constraints.iter().zip(&s.domains).zip(&*s.self_match);
        for (column, ((c, domains), self_match)) in constraints.enumerate() {
            let Some(id) = s.node_domains.domain(position, column) else {
                return self.filter(state, pod, node);
            };
            let matching = domains.table.count(id);
            let skew = matching + self_match - domains.min_match_num(c.min_domains);
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

impl PodTopologySpread {
    /// The counts of the pod's `DoNotSchedule` constraints over every node of the snapshot;
    /// `None` when it has none.
    fn pre_filter_state(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> Result<Option<PreFilterState>, String> {
        let constraints = constraints_of(
            &pod.pod,
            &self.defaults,
            Some(snapshot.workloads()),
            DO_NOT_SCHEDULE,
        )?
        .unwrap_or_default();
        if constraints.is_empty() {
            return Ok(None);
        }
        let affinity = RequiredNodeAffinity::of(&pod.pod);
        let key = CountKey::new(
            pod.namespace(),
            &constraints,
            &affinity,
            pod_tolerations(&pod.pod),
            true,
        );
        let (tables, node_domains) = self.cache.tables_and_domains(
            key,
            snapshot.node_infos(),
            &self.handle.parallelizer,
            MIN_PARALLEL_NODES,
        );
        let domains = tables.into_iter().map(Domains::new).collect();
        let labels = pod.labels();
        let self_match = constraints
            .iter()
            .map(|c| i64::from(c.selector.matches_opt(labels)))
            .collect();
        Ok(Some(PreFilterState {
            constraints: constraints.into(),
            self_match,
            affinity: Arc::new(affinity),
            domains,
            node_domains,
        }))
    }
}

/// What PreFilter computes once per pod for Filter. Cloned (counts copied) when preemption
/// tries removing pods on a copy of the cycle state.
/// Upstream: podtopologyspread.preFilterState.
#[derive(Debug, Clone)]
pub(super) struct PreFilterState {
    /// The pod's `DoNotSchedule` constraints; shared between copies.
    pub constraints: Arc<[Constraint]>,
    /// Per constraint, 1 when its selector matches the pod itself.
    pub self_match: Arc<[i64]>,
    /// The pod's required node affinity, for AddPod/RemovePod's inclusion policies.
    affinity: Arc<RequiredNodeAffinity>,
    /// Per constraint, the domains and their counts.
    pub domains: Vec<Domains>,
    /// The domain id each node of the snapshot counted for, per constraint, by node
    /// position. AddPod and RemovePod change counts, never which domain a node is in.
    pub node_domains: NodeDomains,
}

/// The domains of one constraint: the topology value of every node that counts, with its
/// matching pods, and the two smallest counts.
#[derive(Debug, Clone)]
pub(super) struct Domains {
    table: DomainTable,
    /// Values AddPod counted that no node counted for (upstream's map takes any value).
    extra: HashMap<String, i64>,
    pub paths: CriticalPaths<String>,
}

impl Domains {
    fn new(table: DomainTable) -> Self {
        let mut by_id = CriticalPaths::new(u32::MAX);
        for (id, count) in table.domains() {
            by_id.update(&id, count, |id| *id);
        }
        let [(a, a_count), (b, b_count)] = by_id.0;
        let value = |id: u32| {
            if id == u32::MAX {
                String::new()
            } else {
                table.value(id).to_string()
            }
        };
        let paths = CriticalPaths([(value(a), a_count), (value(b), b_count)]);
        Domains {
            table,
            extra: HashMap::new(),
            paths,
        }
    }

    /// The matching pods of domain `value` (0 when it is no domain).
    pub fn count(&self, value: &str) -> i64 {
        match self.table.id(value) {
            Some(id) => self.table.count(id),
            None => self.extra.get(value).copied().unwrap_or(0),
        }
    }

    /// How many domains there are.
    pub fn len(&self) -> usize {
        self.table.present() + self.extra.len()
    }

    /// Every domain with its count, sorted by value.
    #[cfg(test)]
    pub fn sorted(&self) -> Vec<(String, i64)> {
        let mut all = self.table.sorted();
        all.extend(self.extra.iter().map(|(v, n)| (v.clone(), *n)));
        all.sort();
        all
    }

    /// The global minimum for the skew: the smallest count, or 0 while there are fewer
    /// domains than `min_domains`.
    pub fn min_match_num(&self, min_domains: i32) -> i64 {
        if (self.len() as i64) < i64::from(min_domains) {
            0
        } else {
            self.paths.min()
        }
    }

    /// Adds `delta` pods to domain `value`, which exists from then on.
    fn add(&mut self, value: &str, delta: i64) -> i64 {
        match self.table.id(value) {
            Some(id) => {
                self.table.make_present(id);
                self.table.add_count(id, delta);
                self.table.count(id)
            }
            None => {
                let n = self.extra.entry(value.to_string()).or_insert(0);
                *n += delta;
                *n
            }
        }
    }
}

impl PreFilterState {
    /// Adds `delta` (+1 or −1) for `updated` on `node`: the same rules as PreFilter (same
    /// namespace, node carrying every key, inclusion policies, selector), without the
    /// terminating-pod check, as upstream.
    fn update_with_pod(
        &mut self,
        updated: &PodInfo,
        preemptor: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        if updated.namespace() != preemptor.namespace() {
            return;
        }
        let labels = node.labels();
        if !has_all_keys(labels, &self.constraints) {
            return;
        }
        let mut inclusion = Inclusion::new(&self.affinity, pod_tolerations(&preemptor.pod), node);
        let updated_labels = updated.labels();
        for (c, d) in self.constraints.iter().zip(self.domains.iter_mut()) {
            if !c.selector.matches_opt(updated_labels) || !inclusion.includes(c) {
                continue;
            }
            let Some(value) = labels.get(&c.topology_key) else {
                continue;
            };
            let count = d.add(value, delta);
            d.paths.update(value.as_str(), count, str::to_string);
        }
    }
}

/// The two domains with the fewest matching pods of a constraint: `[0]` always holds the
/// minimum; `[1]` is at least that, not necessarily the second smallest. Two are enough
/// because preemption only removes pods from one node per attempt.
/// Upstream: podtopologyspread.criticalPaths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CriticalPaths<S>(pub [(S, i64); 2]);

impl<S: Clone> CriticalPaths<S> {
    /// Both paths on `unset` (upstream's empty value) with the largest count.
    pub fn new(unset: S) -> Self {
        let max = i64::from(i32::MAX);
        CriticalPaths([(unset.clone(), max), (unset, max)])
    }
}

impl<S> CriticalPaths<S> {
    pub fn min(&self) -> i64 {
        self.0[0].1
    }

    /// Records that `value` now has `num` matching pods; `make` turns a value into a path
    /// entry when it takes a slot.
    pub fn update<Q: ?Sized>(&mut self, value: &Q, num: i64, make: impl FnOnce(&Q) -> S)
    where
        S: PartialEq<Q>,
    {
        let [first, second] = &mut self.0;
        if first.0 == *value {
            first.1 = num;
        } else if second.0 == *value {
            second.1 = num;
        } else {
            if num < first.1 {
                *second = std::mem::replace(first, (make(value), num));
            } else if num < second.1 {
                *second = (make(value), num);
            }
            return;
        }
        if first.1 > second.1 {
            std::mem::swap(first, second);
        }
    }
}

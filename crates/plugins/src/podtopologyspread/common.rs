//! What PreFilter, PreScore and the queueing hints share: the pod's constraints compiled
//! (its own, or the profile's defaults with a selector deduced from the pod's Services and
//! controller), which nodes a constraint counts, and counting matching pods.
//!
//! Upstream: pkg/scheduler/framework/plugins/podtopologyspread/common.go and
//! pkg/scheduler/framework/plugins/helper/spread.go (DefaultSelector).

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::labels::{LabelSelector, NodeSelector, Operator};
use framework::{NodeInfo, PodInfo, Workloads};
use k8s_openapi::api::core::v1::{Pod, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as V1LabelSelector, LabelSelectorRequirement,
};

use crate::helper::taints::tolerations_tolerate_taint;

pub(super) const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub(super) const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
pub(super) const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
pub(super) const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";
/// The node inclusion policy that makes a constraint look at the node (affinity or taints).
const HONOR: &str = "Honor";

/// One topology spread constraint of the pod being scheduled, compiled.
/// Upstream: podtopologyspread.topologySpreadConstraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Constraint {
    pub max_skew: i32,
    pub topology_key: String,
    /// The constraint's labelSelector with the pod's `matchLabelKeys` values ANDed in, or,
    /// for a default constraint, the selector deduced from the pod's Services and controller.
    pub selector: LabelSelector,
    /// `minDomains`, 1 when unset.
    pub min_domains: i32,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's nodeSelector
    /// and required node affinity count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore): only nodes whose NoSchedule/NoExecute
    /// taints the pod tolerates count.
    pub honor_node_taints: bool,
}

impl Constraint {
    /// Compiles `c`, merging the pod's values for `matchLabelKeys` into its selector (an
    /// absent selector stays "nothing", as upstream leaves `labels.Nothing()` alone).
    pub fn compile(
        c: &TopologySpreadConstraint,
        pod_labels: Option<&BTreeMap<String, String>>,
    ) -> Result<Self, String> {
        let mut selector =
            LabelSelector::compile(c.label_selector.as_ref()).map_err(|e| e.message)?;
        for key in c.match_label_keys.iter().flatten() {
            if let Some(value) = pod_labels.and_then(|l| l.get(key)) {
                selector.require(key, Operator::In, value);
            }
        }
        Ok(Constraint::with_selector(c, selector))
    }

    /// `c` with `selector`; `minDomains` defaults to 1, the policies to Honor (affinity)
    /// and Ignore (taints). A policy value other than Honor ignores.
    fn with_selector(c: &TopologySpreadConstraint, selector: LabelSelector) -> Self {
        Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            honor_node_affinity: c.node_affinity_policy.as_deref().is_none_or(|p| p == HONOR),
            honor_node_taints: c.node_taints_policy.as_deref() == Some(HONOR),
        }
    }

    /// Whether the constraint spreads over hostnames: such domains are single nodes, whose
    /// counts Score reads off the node itself.
    pub fn is_hostname(&self) -> bool {
        self.topology_key == LABEL_HOSTNAME
    }
}

/// The constraints a pod without its own gets: upstream's system defaults, or the args'
/// `defaultConstraints` (`defaultingType: List`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Defaults {
    pub constraints: Vec<TopologySpreadConstraint>,
    /// `defaultingType: System`: nodes missing one of the keys still count for the others
    /// when scoring.
    pub system_defaulted: bool,
}

impl Defaults {
    /// Upstream's system defaults: at most 3 apart across hostnames and 5 across zones,
    /// both preferred.
    pub fn system() -> Self {
        let preferred = |key: &str, max_skew| TopologySpreadConstraint {
            max_skew,
            topology_key: key.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        };
        Defaults {
            constraints: vec![
                preferred(LABEL_HOSTNAME, 3),
                preferred(LABEL_TOPOLOGY_ZONE, 5),
            ],
            system_defaulted: true,
        }
    }

    /// Whether some default constraint has this `whenUnsatisfiable`.
    fn any(&self, action: &str) -> bool {
        self.constraints
            .iter()
            .any(|c| c.when_unsatisfiable == action)
    }
}

/// Whether the pod sets topology spread constraints of its own.
pub(super) fn has_own_constraints(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// The pod's constraints whose `whenUnsatisfiable` is `action`: its own when it has any,
/// else the defaults with the selector [`default_selector`] deduces (none when that selector
/// is empty). `Ok(None)` when the answer needs the Services and controllers and `workloads`
/// is not given. An `Err` is an invalid selector of the pod.
pub(super) fn constraints_of(
    pod: &Pod,
    defaults: &Defaults,
    workloads: Option<&Workloads>,
    action: &str,
) -> Result<Option<Vec<Constraint>>, String> {
    let labels = pod.metadata.labels.as_ref();
    if has_own_constraints(pod) {
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or(&[]);
        let kind = if action == DO_NOT_SCHEDULE {
            "hard"
        } else {
            "soft"
        };
        return own
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .map(|c| Constraint::compile(c, labels))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
            .map_err(|e| format!("obtaining pod's {kind} topology spread constraints: {e}"));
    }
    if !defaults.any(action) {
        return Ok(Some(Vec::new()));
    }
    let Some(workloads) = workloads else {
        return Ok(None);
    };
    let Some(selector) = default_selector(pod, workloads) else {
        return Ok(Some(Vec::new()));
    };
    // Defaults carry no labelSelector (validation forbids it) and their matchLabelKeys are
    // overwritten along with the selector, as upstream does.
    let constraints = defaults
        .constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c| Constraint::with_selector(c, selector.clone()))
        .collect();
    Ok(Some(constraints))
}

/// The selector of the pod's spreading group, deduced from the Services of its namespace
/// whose selector matches it (merged) and its controller, if that is a ReplicationController
/// (merged), ReplicaSet or StatefulSet (ANDed) present in `workloads`. `None` when the
/// result would select everything. Upstream: helper.DefaultSelector.
pub(super) fn default_selector(pod: &Pod, workloads: &Workloads) -> Option<LabelSelector> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    // An absent namespace is "default", as for the pod's PodInfo.
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let pod_labels = pod.metadata.labels.as_ref().unwrap_or(&EMPTY);
    let mut label_set: BTreeMap<String, String> = BTreeMap::new();
    for service in workloads.services(ns) {
        // A Service without a selector selects nothing, not everything.
        let Some(selector) = service.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        if selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)) {
            label_set.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut owner_selector: Option<&V1LabelSelector> = None;
    if let Some(owner) = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
    {
        let named = |name: Option<&String>| name.map(String::as_str) == Some(owner.name.as_str());
        match (parse_group_version(&owner.api_version), owner.kind.as_str()) {
            (Some(("", "v1")), "ReplicationController") => {
                if let Some(rc) = workloads
                    .replication_controllers(ns)
                    .iter()
                    .find(|rc| named(rc.metadata.name.as_ref()))
                {
                    let selector = rc.spec.as_ref().and_then(|s| s.selector.as_ref());
                    label_set.extend(
                        selector
                            .into_iter()
                            .flatten()
                            .map(|(k, v)| (k.clone(), v.clone())),
                    );
                }
            }
            (Some(("apps", "v1")), "ReplicaSet") => {
                owner_selector = workloads
                    .replica_sets(ns)
                    .iter()
                    .find(|rs| named(rs.metadata.name.as_ref()))
                    .and_then(|rs| rs.spec.as_ref())
                    .map(|s| &s.selector);
            }
            (Some(("apps", "v1")), "StatefulSet") => {
                owner_selector = workloads
                    .stateful_sets(ns)
                    .iter()
                    .find(|ss| named(ss.metadata.name.as_ref()))
                    .and_then(|ss| ss.spec.as_ref())
                    .map(|s| &s.selector);
            }
            _ => {}
        }
    }
    // A controller selector that does not compile adds nothing, as upstream.
    let owner_selector = owner_selector
        .filter(|s| LabelSelector::compile(Some(s)).is_ok_and(|c| !c.is_everything()));
    let selector = match owner_selector {
        None => LabelSelector::from_map(&label_set),
        Some(owner) => {
            // The controller's requirements are ANDed with the merged label set: its
            // matchLabels become `In` expressions so that a key both name is kept twice.
            let mut expressions: Vec<LabelSelectorRequirement> = owner
                .match_labels
                .iter()
                .flatten()
                .map(|(k, v)| LabelSelectorRequirement {
                    key: k.clone(),
                    operator: "In".to_string(),
                    values: Some(vec![v.clone()]),
                })
                .collect();
            expressions.extend(owner.match_expressions.iter().flatten().cloned());
            let merged = V1LabelSelector {
                match_labels: Some(label_set.clone()),
                match_expressions: Some(expressions),
            };
            LabelSelector::compile(Some(&merged))
                .unwrap_or_else(|_| LabelSelector::from_map(&label_set))
        }
    };
    (!selector.is_everything()).then_some(selector)
}

/// `(group, version)` of an apiVersion, as upstream's schema.ParseGroupVersion: no slash is
/// a core version, one slash splits, more is invalid.
fn parse_group_version(api_version: &str) -> Option<(&str, &str)> {
    if api_version.is_empty() || api_version == "/" {
        return Some(("", ""));
    }
    match api_version.matches('/').count() {
        0 => Some(("", api_version)),
        1 => api_version.split_once('/'),
        _ => None,
    }
}

/// The pod's nodeSelector and required node affinity, compiled once per pod. A term that
/// does not compile never matches (upstream ignores the parse errors here).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct RequiredNodeAffinity {
    node_selector: Option<LabelSelector>,
    affinity: Option<NodeSelector>,
}

impl RequiredNodeAffinity {
    pub fn of(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        RequiredNodeAffinity {
            node_selector: spec
                .and_then(|s| s.node_selector.as_ref())
                .filter(|m| !m.is_empty())
                .map(LabelSelector::from_map),
            affinity: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|na| {
                    na.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(NodeSelector::compile),
        }
    }

    fn matches(&self, node: &NodeInfo) -> bool {
        let labels = node.labels();
        self.node_selector
            .as_ref()
            .is_none_or(|s| s.matches(labels))
            && self
                .affinity
                .as_ref()
                .is_none_or(|a| a.matches(labels, node.name()))
    }
}

/// Whether one node counts for a constraint under its node inclusion policies, for one pod;
/// each policy is evaluated at most once per node.
pub(super) struct Inclusion<'a> {
    affinity: &'a RequiredNodeAffinity,
    tolerations: &'a [Toleration],
    node: &'a NodeInfo,
    affinity_ok: Option<bool>,
    taints_ok: Option<bool>,
}

impl<'a> Inclusion<'a> {
    pub fn new(
        affinity: &'a RequiredNodeAffinity,
        tolerations: &'a [Toleration],
        node: &'a NodeInfo,
    ) -> Self {
        Inclusion {
            affinity,
            tolerations,
            node,
            affinity_ok: None,
            taints_ok: None,
        }
    }

    /// Upstream: topologySpreadConstraint.matchNodeInclusionPolicies.
    pub fn includes(&mut self, c: &Constraint) -> bool {
        if c.honor_node_affinity
            && !*self
                .affinity_ok
                .get_or_insert_with(|| self.affinity.matches(self.node))
        {
            return false;
        }
        if c.honor_node_taints {
            let (node, tolerations) = (self.node, self.tolerations);
            let ok = *self.taints_ok.get_or_insert_with(|| {
                node.taints()
                    .iter()
                    .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                    .all(|t| tolerations_tolerate_taint(tolerations, t))
            });
            if !ok {
                return false;
            }
        }
        true
    }
}

/// Whether the node has a label for every constraint's topology key.
pub(super) fn has_all_keys(labels: &BTreeMap<String, String>, constraints: &[Constraint]) -> bool {
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// How many of `pods` in namespace `ns`, not terminating, `selector` matches. A selector that
/// selects everything counts nothing, as upstream (`selector.Empty()`).
pub(super) fn count_matching<'a>(
    pods: impl IntoIterator<Item = &'a Arc<PodInfo>>,
    selector: &LabelSelector,
    ns: &str,
) -> i64 {
    if selector.is_everything() {
        return 0;
    }
    let n = pods
        .into_iter()
        .filter(|p| {
            p.pod.metadata.deletion_timestamp.is_none()
                && p.namespace() == ns
                && selector.matches_opt(p.labels())
        })
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

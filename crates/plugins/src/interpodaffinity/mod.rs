//! InterPodAffinity: a node is rejected when placing the pod there would break the pod's
//! required pod affinity (no matching pod in the node's topology), its required
//! anti-affinity (a matching pod is there), or the required anti-affinity of a pod already
//! there; feasible nodes are then ranked by the preferred (anti-)affinity terms between the
//! pod and the pods already running, summed per topology domain.
//!
//! Upstream: pkg/scheduler/framework/plugins/interpodaffinity (plugin.go, filtering.go,
//! scoring.go). PreFilter counts, once per pod, the matching pods of every topology pair;
//! Filter then only looks the node's pairs up in those counts, by the ids of its topology
//! values kept per node position (its labels where the ids cannot answer). PreScore sums the
//! weights per topology pair the same way and Score reads the node's pairs back.
//!
//! PreFilter's counts are kept across cycles (two caches of [`CAPACITY`] keys each, see
//! [`helper::node_cache`](crate::helper::node_cache) for what they hold, plus the keys of
//! existing pods' anti-affinity terms with one `Arc` per node), so that a stream
//! of pods of one workload recounts only the nodes changed since the last cycle; the
//! result is exactly what counting afresh gives.
//!
//! Terminating pods (with a deletionTimestamp) count like any other pod, as upstream.
//!
//! A term's namespaceSelector is matched against namespace labels: for the incoming pod's
//! terms, PreFilter and PreScore resolve it once to the set of the snapshot's namespaces
//! whose labels it selects, as upstream merges the namespaces its lister returns into the
//! term; a namespace the snapshot does not know is not selected.
//! Existing pods' terms are matched against the incoming pod's namespace labels (none
//! known: an empty label set), as upstream.

mod args;
mod filtering;
mod scoring;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use framework::events::QueueingHintFn;
use framework::types::AffinityTerm;
use framework::{
    decode_args, ActionType, ArgsError, ClusterEventWithHint, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, Parallelizer, Plugin, PodInfo, PreFilterPlugin,
    PreScorePlugin, QueueingHint, ScorePlugin, Snapshot,
};
use framework::{SignFragment, SignPlugin, Status};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::helper::events::{node_change, same_uid};
use crate::helper::node_cache::FxBuildHasher;
#[cfg(doc)]
use crate::helper::node_cache::CAPACITY;
use crate::names;

pub use args::{
    InterPodAffinityArgs, DEFAULT_HARD_POD_AFFINITY_WEIGHT, MAX_HARD_POD_AFFINITY_WEIGHT,
    MIN_HARD_POD_AFFINITY_WEIGHT,
};

pub const NAME: &str = names::INTER_POD_AFFINITY;

/// Why a pod with affinity terms of its own gets no signature.
pub const ERR_REASON_NOT_SIGNABLE: &str =
    "pods with pod affinity or anti-affinity are not signable";

/// CycleState key of what PreFilter counts for Filter.
const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";
/// CycleState key of what PreScore sums for Score.
const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

/// Filter reason: a pod already on the node's topology has required anti-affinity against
/// the incoming pod.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// Filter reason: the pod's required affinity is not satisfied on the node.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// Filter reason: the pod's required anti-affinity is not satisfied on the node.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";

/// Below this many nodes, PreFilter and PreScore scan on the calling thread: the per-node
/// work is a few label comparisons, less than waking the pool costs (measured on 2 cores:
/// at 512 the 1,000-node PreScore scan made the cycle 50 µs slower in parallel).
const PARALLEL_SCAN_MIN_NODES: usize = 2048;

/// Upstream: interpodaffinity.InterPodAffinity.
#[derive(Debug)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
    parallelizer: Parallelizer,
    /// PreFilter's counts of the last few workloads' required terms, kept across cycles.
    cache: filtering::CountCache,
    /// PreFilter's counts of existing pods' required anti-affinity against the last few
    /// incoming pods' labels, kept across cycles.
    existing_cache: filtering::ExistingCountCache,
    /// The keys existing pods' required anti-affinity terms use, kept across cycles.
    term_keys: filtering::TermKeys,
    /// PreScore's sums for the last few incoming pods, kept across cycles.
    score_cache: scoring::ScoreCache,
    /// The keys existing pods' terms that PreScore weighs use, kept across cycles.
    score_term_keys: filtering::TermKeys,
}

/// Builds the plugin from `InterPodAffinityArgs` (absent: upstream's defaults).
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args: InterPodAffinityArgs = decode_args(args).map_err(|e| vec![e])?;
    let errs = args.validate();
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Arc::new(InterPodAffinity {
        args,
        parallelizer: handle.parallelizer.clone(),
        cache: filtering::CountCache::default(),
        existing_cache: filtering::ExistingCountCache::default(),
        term_keys: filtering::TermKeys::new(filtering::TermSource::RequiredAntiAffinity),
        score_cache: scoring::ScoreCache::default(),
        score_term_keys: filtering::TermKeys::new(filtering::TermSource::Scoring),
    }))
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for InterPodAffinity {
    /// A pod with affinity terms of its own depends on where other pods are: it is not
    /// signed. Otherwise existing pods' terms select it by its labels, unless the profile
    /// ignores existing pods' preferred terms (then its labels only matter to Filter, which
    /// re-checks every node a batch offers).
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        if pod.has_affinity() {
            return Err(Status::unschedulable(ERR_REASON_NOT_SIGNABLE));
        }
        if self.args.ignore_preferred_terms_of_existing_pods {
            return Ok(Vec::new());
        }
        Ok(vec![SignFragment::new(
            framework::sign::LABELS_SIGNER,
            framework::sign::labels_signer(&pod.pod),
        )])
    }
}

// PreFilter, PreFilterExtensions and Filter are in `filtering`; PreScore, Score and
// NormalizeScore in `scoring`.

impl EnqueueExtensions for InterPodAffinity {
    /// An assigned pod added, relabelled or deleted may satisfy the pod's affinity or stop
    /// conflicting with it; a node added or relabelled may bring a topology domain. Queueing
    /// hints are on, as upstream's default, so node taint updates are not registered.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let pod_hint: QueueingHintFn = Arc::new(is_schedulable_after_pod_change);
        let node_hint: QueueingHintFn = Arc::new(is_schedulable_after_node_change);
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
                pod_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                node_hint,
            ),
        ]
    }
}

/// Queue when:
/// - the changed pod is the pending pod itself and its labels changed (it may now match its
///   own affinity terms, or stop matching others' anti-affinity);
/// - an assigned pod was added that matches all the pending pod's affinity terms;
/// - an assigned pod was relabelled to match all its affinity terms, or to match none of
///   its anti-affinity terms after matching one;
/// - an assigned pod was deleted that matched one of the pending pod's anti-affinity terms,
///   or whose own required anti-affinity matched the pending pod.
///
/// Unassigned pods never help. Namespace selectors of the terms here are matched against
/// no labels, as upstream's hint does.
fn is_schedulable_after_pod_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let original = event_pod(old)?;
    let modified = event_pod(new)?;
    if original.is_none() && modified.is_none() {
        return Err("expected Pod, but got nothing".to_string());
    }
    if let Some(m) = modified {
        if same_uid(pod, m) && !same_labels(pod, m) {
            return Ok(QueueingHint::Queue);
        }
    }
    if modified.is_some_and(is_unassigned) || original.is_some_and(is_unassigned) {
        return Ok(QueueingHint::QueueSkip);
    }
    let terms = compile_required_terms(pod, TermKind::Affinity)?;
    let anti_terms = compile_required_terms(pod, TermKind::AntiAffinity)?;
    let hint = match (original, modified) {
        (Some(o), Some(m)) => {
            let now_matches_affinity =
                !matches_all_terms(&terms, o) && matches_all_terms(&terms, m);
            let no_longer_matches_anti =
                matches_any_term(&anti_terms, o) && !matches_any_term(&anti_terms, m);
            now_matches_affinity || no_longer_matches_anti
        }
        (None, Some(m)) => matches_all_terms(&terms, m),
        (Some(o), _) => {
            matches_any_term(&anti_terms, o)
                || matches_any_term(&compile_required_terms(o, TermKind::AntiAffinity)?, pod)
        }
        (None, None) => false,
    };
    Ok(if hint {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

/// Queue when a node was added with the topology key of one of the pod's affinity terms,
/// or updated to gain that key or change its value; for anti-affinity terms, when any node
/// was added (a node without the key always accepts the pod) or one lost the key or
/// changed its value.
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = node_change(old, new)?;
    let modified_labels = node_labels(modified);
    for term in compile_required_terms(pod, TermKind::Affinity)? {
        let now = modified_labels.get(&term.topology_key);
        let queue = match original {
            None => now.is_some(),
            Some(o) => match (node_labels(o).get(&term.topology_key), now) {
                (None, Some(_)) => true,
                (Some(before), Some(now)) => before != now,
                _ => false,
            },
        };
        if queue {
            return Ok(QueueingHint::Queue);
        }
    }
    for term in compile_required_terms(pod, TermKind::AntiAffinity)? {
        let Some(o) = original else {
            return Ok(QueueingHint::Queue);
        };
        let now = modified_labels.get(&term.topology_key);
        let queue = match (node_labels(o).get(&term.topology_key), now) {
            (Some(_), None) => true,
            (Some(before), Some(now)) => before != now,
            _ => false,
        };
        if queue {
            return Ok(QueueingHint::Queue);
        }
    }
    Ok(QueueingHint::QueueSkip)
}

/// Counts (or summed weights) per topology pair, grouped by topology key and then keyed by
/// value, so that Filter and Score look a node's pairs up by `&str` without building a key.
/// A pod has a handful of topology keys at most: they are compared in a list, not hashed.
/// Values are hashed with FxHash: Filter looks one up per node and key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TopologyCounts(Vec<(String, HashMap<String, i64, FxBuildHasher>)>);

impl TopologyCounts {
    fn values(&self, key: &str) -> Option<&HashMap<String, i64, FxBuildHasher>> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        self.values(key)
            .and_then(|values| values.get(value))
            .copied()
            .unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The values of `key`, created when absent.
    fn values_mut(&mut self, key: &str) -> &mut HashMap<String, i64, FxBuildHasher> {
        let i = match self.0.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.0.push((key.to_string(), HashMap::default()));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    /// Adds `delta` to a pair and drops the pair when it reaches zero, so that an empty map
    /// means "no pod counted" even after AddPod/RemovePod.
    fn add(&mut self, key: &str, value: &str, delta: i64) {
        if delta == 0 {
            return;
        }
        let values = self.values_mut(key);
        match values.get_mut(value) {
            Some(c) => {
                *c += delta;
                if *c == 0 {
                    values.remove(value);
                }
            }
            None => {
                values.insert(value.to_string(), delta);
            }
        }
        self.0.retain(|(_, values)| !values.is_empty());
    }
}

/// The namespaces an incoming pod's term selects through its namespaceSelector.
#[derive(Debug, Clone, PartialEq)]
enum SelectedNamespaces {
    /// The term has no namespaceSelector: its `namespaces` only.
    None,
    /// An empty namespaceSelector: every namespace.
    All,
    /// The namespaces whose labels the selector matches.
    Listed(Arc<HashSet<String>>),
}

/// Resolves the namespaceSelector of each of `terms` once per cycle, against the
/// namespaces the snapshot knows (upstream lists them with its namespace lister).
fn resolve_namespaces<'a>(
    terms: impl IntoIterator<Item = &'a AffinityTerm>,
    snapshot: &Snapshot,
) -> Vec<SelectedNamespaces> {
    terms
        .into_iter()
        .map(|term| {
            let selector = &term.namespace_selector;
            if selector.is_nothing() {
                return SelectedNamespaces::None;
            }
            if selector.is_everything() {
                return SelectedNamespaces::All;
            }
            let selected = snapshot
                .namespaces()
                .filter(|(_, labels)| selector.matches(labels))
                .map(|(ns, _)| ns.to_string())
                .collect();
            SelectedNamespaces::Listed(Arc::new(selected))
        })
        .collect()
}

/// Whether `pod` is selected by a term of the incoming pod whose namespaceSelector was
/// resolved to `selected`.
fn incoming_term_matches(term: &AffinityTerm, selected: &SelectedNamespaces, pod: &Pod) -> bool {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let in_namespace = term.namespaces.contains(ns)
        || match selected {
            SelectedNamespaces::None => false,
            SelectedNamespaces::All => true,
            SelectedNamespaces::Listed(set) => set.contains(ns),
        };
    in_namespace && term.selector.matches_opt(pod.metadata.labels.as_ref())
}

/// Whether `pod` matches every one of the incoming pod's `terms` (false when there are
/// none): affinity is satisfied by one pod matching all terms.
fn incoming_matches_all(
    terms: &[AffinityTerm],
    selected: &[SelectedNamespaces],
    pod: &Pod,
) -> bool {
    !terms.is_empty()
        && terms
            .iter()
            .zip(
                selected
                    .iter()
                    .chain(std::iter::repeat(&SelectedNamespaces::None)),
            )
            .all(|(t, s)| incoming_term_matches(t, s, pod))
}

/// The problems compiling the pod's affinity terms, as upstream's PodInfo reports them (one
/// error as is, several in brackets); `None` when they all compiled.
fn affinity_parse_error(pod: &PodInfo) -> Option<String> {
    const PREFIXES: [&str; 4] = [
        "requiredAffinityTerms",
        "requiredAntiAffinityTerms",
        "preferredAffinityTerms",
        "preferredAntiAffinityTerms",
    ];
    if pod.parse_errors.is_empty() {
        return None;
    }
    let errors: Vec<&str> = pod
        .parse_errors
        .iter()
        .filter(|e| PREFIXES.iter().any(|p| e.starts_with(p)))
        .map(String::as_str)
        .collect();
    match errors.as_slice() {
        [] => None,
        [one] => Some((*one).to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// Which required terms of a raw pod to compile.
#[derive(Debug, Clone, Copy)]
enum TermKind {
    Affinity,
    AntiAffinity,
}

/// Compiles a raw pod's required (anti-)affinity terms, as PodInfo does, for the queueing
/// hints, which get pods rather than PodInfos.
fn compile_required_terms(pod: &Pod, kind: TermKind) -> Result<Vec<AffinityTerm>, String> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let terms = match kind {
        TermKind::Affinity => affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        TermKind::AntiAffinity => affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
    };
    terms
        .into_iter()
        .flatten()
        .map(|t| AffinityTerm::compile(pod, t).map_err(|e| e.to_string()))
        .collect()
}

/// Whether `pod` matches all `terms` (none: false), namespace selectors against no labels.
fn matches_all_terms(terms: &[AffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, None))
}

/// Whether `pod` matches one of `terms`, namespace selectors against no labels.
fn matches_any_term(terms: &[AffinityTerm], pod: &Pod) -> bool {
    terms.iter().any(|t| t.matches(pod, None))
}

fn event_pod(obj: Option<&EventObject>) -> Result<Option<&Pod>, String> {
    match obj {
        Some(EventObject::Pod(p)) => Ok(Some(p.as_ref())),
        Some(o) => Err(format!("expected Pod, but got {}", o.kind())),
        None => Ok(None),
    }
}

/// Whether two pods have the same labels (none and an empty set are the same).
fn same_labels(a: &Pod, b: &Pod) -> bool {
    let empty = BTreeMap::new();
    a.metadata.labels.as_ref().unwrap_or(&empty) == b.metadata.labels.as_ref().unwrap_or(&empty)
}

fn is_unassigned(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty)
}

fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

#[cfg(test)]
mod tests;

//! NodeAffinity: a node must match the pod's `nodeSelector` and required node affinity (and
//! the profile's `addedAffinity`, if any); among those, nodes matching more (heavier)
//! preferred terms score higher.
//!
//! Upstream: pkg/scheduler/framework/plugins/nodeaffinity, with
//! component-helpers/scheduling/corev1/nodeaffinity for how terms match, and
//! apimachinery's labels and validation packages for the messages of invalid args.
//!
//! A required term that cannot be compiled (a bad operator, a malformed key) never matches,
//! as upstream's lazy-error selector: the pod is rejected on every node rather than failing.
//! An invalid preferred term, on the other hand, makes PreScore fail with an error, as
//! upstream does.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use framework::events::QueueingHintFn;
use framework::labels::{compile_term, LabelSelector, NodeSelector};
use framework::{
    decode_args, ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions,
    EventObject, EventResource, FilterPlugin, Handle, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ScoreExtensions, ScorePlugin,
    Snapshot, Status,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::{
    Node, NodeAffinity as V1NodeAffinity, NodeSelector as V1NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm as V1NodeSelectorTerm, Pod, PreferredSchedulingTerm,
};
use serde::Deserialize;

use crate::helper;
use crate::helper::events::node_change;
use crate::helper::validation::is_qualified_name_part;
use crate::names;

pub const NAME: &str = names::NODE_AFFINITY;

/// CycleState key of the pod's compiled nodeSelector and required affinity.
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeAffinity";
/// CycleState key of the pod's compiled preferred terms.
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeAffinity";

/// Filter reason when the pod's nodeSelector or required node affinity does not match.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Filter reason when the profile's `addedAffinity` does not match.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter reason when the required terms pin the pod to node names that cannot all hold.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The node field a `matchFields` requirement may select on.
const OBJECT_NAME_FIELD: &str = "metadata.name";

/// `pluginConfig[].args` of NodeAffinity. Upstream: config.NodeAffinityArgs; no defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityArgs {
    /// Node affinity applied to every pod of the profile on top of the pod's own: its
    /// required part must match as well, its preferred terms add to every node's score.
    pub added_affinity: Option<V1NodeAffinity>,
}

impl NodeAffinityArgs {
    /// Upstream ValidateNodeAffinityArgs: every term of `addedAffinity` must compile.
    /// Empty terms, and preferred terms of weight 0, are not looked at (they are ignored).
    pub fn validate(&self) -> Vec<ArgsError> {
        let Some(added) = &self.added_affinity else {
            return Vec::new();
        };
        let mut errs = Vec::new();
        if let Some(required) = &added.required_during_scheduling_ignored_during_execution {
            validate_node_selector(
                required,
                "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                &mut errs,
            );
        }
        if let Some(preferred) = &added.preferred_during_scheduling_ignored_during_execution {
            validate_preferred_terms(
                preferred,
                "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution",
                &mut errs,
            );
        }
        errs.into_iter()
            .map(|e| ArgsError::new(e.path, e.message))
            .collect()
    }
}

/// Upstream: nodeaffinity.NodeAffinity.
#[derive(Debug, Default)]
pub struct NodeAffinity {
    /// The required part of `addedAffinity`. Shared with the queueing hint.
    added_node_selector: Option<Arc<NodeSelector>>,
    /// The preferred part of `addedAffinity`; `None` when it has no terms.
    added_preferred: Option<PreferredTerms>,
}

/// Decodes and validates [`NodeAffinityArgs`] and builds the plugin.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let args: NodeAffinityArgs = decode_args(args).map_err(|e| vec![e])?;
    let errs = args.validate();
    if !errs.is_empty() {
        return Err(errs);
    }
    let plugin = NodeAffinity::from_args(&args).map_err(|errs| {
        errs.into_iter()
            .map(|e| ArgsError::new(e.path, e.message))
            .collect::<Vec<_>>()
    })?;
    Ok(Arc::new(plugin))
}

impl NodeAffinity {
    /// Compiles validated args. Errors only if compilation disagrees with validation.
    fn from_args(args: &NodeAffinityArgs) -> Result<Self, Vec<FieldError>> {
        let mut plugin = NodeAffinity::default();
        let Some(added) = &args.added_affinity else {
            return Ok(plugin);
        };
        if let Some(required) = &added.required_during_scheduling_ignored_during_execution {
            let selector = NodeSelector::compile(required);
            if !selector.errors.is_empty() {
                let path = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution";
                return Err(selector
                    .errors
                    .iter()
                    .map(|e| FieldError {
                        path: child(path, &e.path),
                        message: e.message.clone(),
                    })
                    .collect());
            }
            plugin.added_node_selector = Some(Arc::new(selector));
        }
        if let Some(preferred) = added
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .filter(|terms| !terms.is_empty())
        {
            plugin.added_preferred = Some(PreferredTerms::compile(
                preferred,
                "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            )?);
        }
        Ok(plugin)
    }
}

impl Plugin for NodeAffinity {
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

impl SignPlugin for NodeAffinity {
    /// Verdicts and scores depend on the pod's node affinity and node selector (the
    /// profile's added affinity is the same for every pod).
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![
            SignFragment::new(
                framework::sign::NODE_AFFINITY_SIGNER,
                framework::sign::node_affinity_signer(&pod.pod),
            ),
            SignFragment::new(
                framework::sign::NODE_SELECTOR_SIGNER,
                framework::sign::node_selector_signer(&pod.pod),
            ),
        ])
    }
}

impl PreFilterPlugin for NodeAffinity {
    /// Compiles the pod's nodeSelector and required affinity once. Skips the pod when there
    /// is nothing to check. When every required term pins `metadata.name` with `In`, the
    /// pod can only land on those names: they are returned as the PreFilterResult.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let required = required_affinity(&pod.pod);
        // A present but empty nodeSelector map still counts, as upstream (nil check).
        let has_node_selector = pod
            .pod
            .spec
            .as_ref()
            .is_some_and(|s| s.node_selector.is_some());
        if required.is_none() && self.added_node_selector.is_none() && !has_node_selector {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                required: Arc::new(RequiredNodeAffinity::of(&pod.pod)),
            },
        );
        let Some(required) = required.filter(|r| !r.node_selector_terms.is_empty()) else {
            return (None, Status::success());
        };
        match node_names_pinned_by(required) {
            None => (None, Status::success()),
            Some(names) if names.is_empty() => (None, Status::unresolvable(ERR_REASON_CONFLICT)),
            Some(names) => (Some(PreFilterResult::nodes(names)), Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let (labels, name) = (node.labels(), node.name());
        if let Some(added) = &self.added_node_selector {
            if !added.matches(labels, name) {
                return Status::unresolvable(ERR_REASON_ENFORCED);
            }
        }
        let matched = match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => s.required.matches(labels, name),
            // PreFilter did not run (it is disabled, or this is a path that skipped it):
            // compile here, as upstream falls back to.
            None => RequiredNodeAffinity::of(&pod.pod).matches(labels, name),
        };
        if matched {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    /// Compiles the pod's preferred terms once; skips scoring when neither the pod nor
    /// `addedAffinity` has any.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let preferred = match pod_preferred_terms(&pod.pod) {
            Ok(p) => p,
            Err(message) => return Status::error(message),
        };
        if preferred.is_none() && self.added_preferred.is_none() {
            return Status::skip();
        }
        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState {
                preferred: preferred.map(Arc::new),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    /// The sum of the weights of the preferred terms (the pod's and `addedAffinity`'s) that
    /// the node matches.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let (labels, name) = (node.labels(), node.name());
        let mut score = self
            .added_preferred
            .as_ref()
            .map_or(0, |t| t.score(labels, name));
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => {
                if let Some(preferred) = &s.preferred {
                    score += preferred.score(labels, name);
                }
            }
            // PreScore did not run: compile here, as upstream falls back to.
            None => {
                if let Some(preferred) = pod_preferred_terms(&pod.pod).map_err(Status::error)? {
                    score += preferred.score(labels, name);
                }
            }
        }
        Ok(score)
    }

    fn score_extensions(&self) -> Option<&dyn ScoreExtensions> {
        Some(self)
    }
}

impl ScoreExtensions for NodeAffinity {
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        helper::normalize_to_max(false, scores)
    }
}

impl EnqueueExtensions for NodeAffinity {
    /// A node added, or relabelled, so that it now matches the pod's required affinity (and
    /// `addedAffinity`).
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let added = self.added_node_selector.clone();
        let hint: QueueingHintFn = Arc::new(move |pod, old, new| {
            is_schedulable_after_node_change(added.as_deref(), pod, old, new)
        });
        vec![ClusterEventWithHint::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            hint,
        )]
    }
}

/// Queue when the new or updated node matches `addedAffinity` and the pod's required
/// affinity, and (for an update) did not match it before. A pod whose required terms do not
/// compile gets an error, which the queue treats as Queue.
fn is_schedulable_after_node_change(
    added: Option<&NodeSelector>,
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = node_change(old, new)?;
    if let Some(added) = added {
        if !added.matches(node_labels(modified), node_name(modified)) {
            return Ok(QueueingHint::QueueSkip);
        }
    }
    let required = RequiredNodeAffinity::of(pod);
    if !required.check(node_labels(modified), node_name(modified))? {
        return Ok(QueueingHint::QueueSkip);
    }
    let Some(original) = original else {
        return Ok(QueueingHint::Queue);
    };
    if required.check(node_labels(original), node_name(original))? {
        Ok(QueueingHint::QueueSkip)
    } else {
        Ok(QueueingHint::Queue)
    }
}

/// What PreFilter computes once per pod.
#[derive(Debug, Clone)]
struct PreFilterState {
    required: Arc<RequiredNodeAffinity>,
}

/// What PreScore computes once per pod: its compiled preferred terms, if it has any.
#[derive(Debug, Clone)]
struct PreScoreState {
    preferred: Option<Arc<PreferredTerms>>,
}

/// A pod's nodeSelector and required node affinity, compiled. Both must match.
/// Upstream: nodeaffinity.RequiredNodeAffinity.
#[derive(Debug, Clone)]
struct RequiredNodeAffinity {
    /// `spec.nodeSelector`, when it has entries.
    node_selector: Option<LabelSelector>,
    /// `requiredDuringSchedulingIgnoredDuringExecution`; terms that failed to compile are
    /// left out (they never match) and their errors kept.
    affinity: Option<NodeSelector>,
}

impl RequiredNodeAffinity {
    fn of(pod: &Pod) -> Self {
        let node_selector = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .filter(|m| !m.is_empty())
            .map(LabelSelector::from_map);
        RequiredNodeAffinity {
            node_selector,
            affinity: required_affinity(pod).map(NodeSelector::compile),
        }
    }

    /// Whether a node with these labels and name satisfies both. Does not allocate.
    fn matches(&self, labels: &BTreeMap<String, String>, name: &str) -> bool {
        self.node_selector
            .as_ref()
            .is_none_or(|s| s.matches(labels))
            && self
                .affinity
                .as_ref()
                .is_none_or(|a| a.matches(labels, name))
    }

    /// Like [`matches`](Self::matches), but when no term matched and some term failed to
    /// compile, the compile errors (upstream reports them only then).
    fn check(&self, labels: &BTreeMap<String, String>, name: &str) -> Result<bool, String> {
        if self
            .node_selector
            .as_ref()
            .is_some_and(|s| !s.matches(labels))
        {
            return Ok(false);
        }
        match &self.affinity {
            None => Ok(true),
            Some(a) if a.matches(labels, name) => Ok(true),
            Some(a) if a.errors.is_empty() => Ok(false),
            Some(a) => Err(aggregate(
                a.errors
                    .iter()
                    .map(|e| format!("{}: {}", e.path, e.message)),
            )),
        }
    }
}

/// Compiled preferred scheduling terms, each as a one-term selector with its weight.
/// Upstream: nodeaffinity.PreferredSchedulingTerms.
#[derive(Debug, Clone, Default)]
struct PreferredTerms {
    terms: Vec<(i64, NodeSelector)>,
}

impl PreferredTerms {
    /// Compiles `terms`, leaving out those of weight 0 and empty ones. Any invalid term
    /// fails the whole list, with every error found (paths below `path`).
    fn compile(terms: &[PreferredSchedulingTerm], path: &str) -> Result<Self, Vec<FieldError>> {
        let mut errs = Vec::new();
        validate_preferred_terms(terms, path, &mut errs);
        if !errs.is_empty() {
            return Err(errs);
        }
        let mut compiled = Vec::with_capacity(terms.len());
        for (i, term) in terms.iter().enumerate() {
            if term.weight == 0 || is_empty_term(&term.preference) {
                continue;
            }
            let pref = &term.preference;
            match compile_term(
                pref.match_expressions.as_deref().unwrap_or(&[]),
                pref.match_fields.as_deref().unwrap_or(&[]),
                &index(path, i),
            ) {
                Ok(t) => compiled.push((
                    i64::from(term.weight),
                    NodeSelector {
                        terms: vec![t],
                        errors: Vec::new(),
                    },
                )),
                Err(e) => errs.push(FieldError {
                    path: e.path,
                    message: e.message,
                }),
            }
        }
        if errs.is_empty() {
            Ok(PreferredTerms { terms: compiled })
        } else {
            Err(errs)
        }
    }

    /// The sum of the weights of the terms the node matches.
    fn score(&self, labels: &BTreeMap<String, String>, name: &str) -> i64 {
        self.terms
            .iter()
            .filter(|(_, t)| t.matches(labels, name))
            .map(|(w, _)| *w)
            .sum()
    }
}

fn required_affinity(pod: &Pod) -> Option<&V1NodeSelector> {
    pod.spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
}

/// The pod's preferred terms compiled, `None` when it has none; an invalid term is an error
/// message in upstream's aggregate form.
fn pod_preferred_terms(pod: &Pod) -> Result<Option<PreferredTerms>, String> {
    let Some(terms) = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Ok(None);
    };
    PreferredTerms::compile(terms, "")
        .map(Some)
        .map_err(|errs| aggregate(errs.iter().map(ToString::to_string)))
}

/// The node names the required terms pin the pod to: within a term the `metadata.name In`
/// sets intersect (requirements are ANDed), across terms they unite (terms are ORed).
/// `None` when some term has no such requirement, so any node may match it.
fn node_names_pinned_by(required: &V1NodeSelector) -> Option<HashSet<String>> {
    let mut names: HashSet<String> = HashSet::new();
    for term in &required.node_selector_terms {
        let mut term_names: Option<HashSet<&str>> = None;
        for r in term.match_fields.iter().flatten() {
            if r.key != OBJECT_NAME_FIELD || r.operator != "In" {
                continue;
            }
            let values: HashSet<&str> = r.values.iter().flatten().map(String::as_str).collect();
            term_names = Some(match term_names {
                None => values,
                Some(prev) => prev.intersection(&values).copied().collect(),
            });
        }
        names.extend(term_names?.into_iter().map(str::to_string));
    }
    Some(names)
}

fn node_labels(node: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

fn is_empty_term(term: &V1NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

/// Joins error messages as Go's aggregate error prints them: one alone, several in brackets,
/// duplicates once.
fn aggregate(messages: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for m in messages {
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    match seen.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

// Validation of node selectors, with the paths and messages of upstream's field errors
// (apimachinery labels.NewRequirement, validation.IsQualifiedName / IsValidLabelValue, and
// component-helpers nodeaffinity). The framework's compiler only says whether a term is
// valid; these say why, in the words users of kube-scheduler see.

/// One invalid field: its path and upstream's `<type>: <value>: <detail>` message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldError {
    path: String,
    message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl FieldError {
    /// `value` is already formatted as Go prints it.
    fn invalid(path: String, value: String, detail: &str) -> Self {
        FieldError {
            path,
            message: format!("Invalid value: {value}: {detail}"),
        }
    }

    fn not_supported(path: String, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        FieldError {
            path,
            message: format!(
                "Unsupported value: {}: supported values: {}",
                go_quote(value),
                supported.join(", ")
            ),
        }
    }
}

const LABEL_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const FIELD_OPERATORS: &[&str] = &["In", "NotIn"];

fn validate_node_selector(selector: &V1NodeSelector, path: &str, errs: &mut Vec<FieldError>) {
    let terms_path = child(path, "nodeSelectorTerms");
    for (i, term) in selector.node_selector_terms.iter().enumerate() {
        if !is_empty_term(term) {
            validate_term(term, &index(&terms_path, i), errs);
        }
    }
}

fn validate_preferred_terms(
    terms: &[PreferredSchedulingTerm],
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    for (i, term) in terms.iter().enumerate() {
        if term.weight != 0 && !is_empty_term(&term.preference) {
            validate_term(&term.preference, &index(path, i), errs);
        }
    }
}

fn validate_term(term: &V1NodeSelectorTerm, path: &str, errs: &mut Vec<FieldError>) {
    let expressions_path = child(path, "matchExpressions");
    for (j, expr) in term.match_expressions.iter().flatten().enumerate() {
        let p = index(&expressions_path, j);
        if LABEL_OPERATORS.contains(&expr.operator.as_str()) {
            validate_requirement(expr, &p, errs);
        } else {
            errs.push(FieldError::not_supported(
                child(&p, "operator"),
                &expr.operator,
                LABEL_OPERATORS,
            ));
        }
    }
    let fields_path = child(path, "matchFields");
    for (j, field) in term.match_fields.iter().flatten().enumerate() {
        let p = index(&fields_path, j);
        if !FIELD_OPERATORS.contains(&field.operator.as_str()) {
            errs.push(FieldError::not_supported(
                child(&p, "operator"),
                &field.operator,
                FIELD_OPERATORS,
            ));
        } else if field.values.as_ref().map_or(0, Vec::len) != 1 {
            errs.push(FieldError::invalid(
                child(&p, "values"),
                go_strings(field.values.as_ref()),
                "must have one element",
            ));
        }
    }
}

/// A label requirement with a known operator: key, value count, integer values for Gt/Lt,
/// then every value, in upstream's order.
fn validate_requirement(expr: &NodeSelectorRequirement, path: &str, errs: &mut Vec<FieldError>) {
    let key_errs = qualified_name_errors(&expr.key);
    if !key_errs.is_empty() {
        errs.push(FieldError::invalid(
            child(path, "key"),
            go_quote(&expr.key),
            &key_errs.join("; "),
        ));
    }
    let values = expr.values.as_deref().unwrap_or(&[]);
    let values_path = child(path, "values");
    let count_error = match expr.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            Some("for 'in', 'notin' operators, values set can't be empty")
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Some("values set must be empty for exists and does not exist")
        }
        "Gt" | "Lt" if values.len() != 1 => {
            Some("for 'Gt', 'Lt' operators, exactly one value is required")
        }
        _ => None,
    };
    if let Some(detail) = count_error {
        errs.push(FieldError::invalid(
            values_path.clone(),
            go_strings(expr.values.as_ref()),
            detail,
        ));
    }
    if matches!(expr.operator.as_str(), "Gt" | "Lt") {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errs.push(FieldError::invalid(
                    index(&values_path, i),
                    go_quote(v),
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = label_value_errors(v);
        if !value_errs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{}[{}]", index(&values_path, i), expr.key),
                go_quote(v),
                &value_errs.join("; "),
            ));
        }
    }
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of \
     alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
     character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower \
     case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
     character";

/// Upstream validation.IsQualifiedName: `[prefix/]name`, prefix a DNS subdomain, name at
/// most 63 characters of the qualified-name alphabet.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = value.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
        ));
    }
    errs
}

/// Upstream validation.IsValidLabelValue.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Upstream validation.IsDNS1123Subdomain.
fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let is_label = |l: &str| {
        let b = l.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter().all(|c| edge(c) || *c == b'-')
    };
    if !value.split('.').all(is_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Upstream validation.RegexError.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        examples.join(" or ")
    )
}

/// A string as Go's `%q` prints it (for the printable ASCII users write, Rust's `{:?}`).
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

/// A string list as Go's `%#v` prints a `[]string`.
fn go_strings(values: Option<&Vec<String>>) -> String {
    match values {
        None => "[]string(nil)".to_string(),
        Some(v) => {
            let quoted: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        }
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

#[cfg(test)]
mod tests;

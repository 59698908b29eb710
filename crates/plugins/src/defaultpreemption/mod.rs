//! DefaultPreemption: when no node fits a pod, finds a node where evicting pods of lower
//! priority would make it fit, and proposes that node and those pods (the victims).
//!
//! Upstream: pkg/scheduler/framework/plugins/defaultpreemption and
//! pkg/scheduler/framework/preemption. The plugin decides only: the PostFilter result names
//! the node to nominate and the victims, and the scheduling loop evicts them (deletes,
//! `Preempted` events, nominations) off the scheduling cycle, which does no I/O.
//!
//! A preemption attempt:
//! 1. eligibility: a pod with `preemptionPolicy: Never` never preempts; a pod already
//!    nominated to a node where lower-priority pods are still terminating waits for them;
//! 2. candidates: only nodes Filter rejected as `Unschedulable` (never
//!    `UnschedulableAndUnresolvable`: evicting pods cannot help there);
//! 3. a dry run per node, from a random offset, until enough candidates are found
//!    (`minCandidateNodesPercentage`, `minCandidateNodesAbsolute`): on copies of the node
//!    and the cycle state, remove every lower-priority pod, check the pod fits, then put
//!    the pods back most important first (PDB-violating ones first) while it still fits;
//!    what could not be put back are the victims;
//! 4. the configured extenders with a preempt verb may drop candidates and trim their
//!    victims, one after the other (an ignorable one's error is skipped, another's fails
//!    the preemption);
//! 5. the best candidate by upstream's ordered criteria (fewest PDB violations, lowest
//!    highest victim priority, smallest priority sum, fewest victims, latest start time of
//!    the highest-priority victims, then the first found);
//! 6. while the loop deletes the victims, the preemptor waits at PreEnqueue (upstream's
//!    asynchronous preemption); the loop activates it when they are gone.

mod args;

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::labels::LabelSelector;
use framework::{
    decode_args, ActionType, ArgsError, ClusterEventWithHint, Code, CycleState, EnqueueExtensions,
    EventResource, ExtenderVictims, Handle, NodeInfo, NodeToStatus, Plugin, PluginsRunner, PodInfo,
    PostFilterPlugin, PostFilterResult, PreEnqueuePlugin, PreemptingPods, PreemptionExtender,
    QueueingHint, Snapshot, Status,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

pub use args::{
    DefaultPreemptionArgs, DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
    DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
};

use crate::names;

/// The plugin's name in configuration.
pub const NAME: &str = names::DEFAULT_PREEMPTION;

/// Prefix of every message of this plugin (upstream's PostFilter wraps the evaluator's).
pub const MESSAGE_PREFIX: &str = "preemption: ";
/// The pod's `preemptionPolicy` forbids preempting.
pub const ERR_POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// Lower-priority pods on the pod's nominated node are still terminating.
pub const ERR_TERMINATING_ON_NOMINATED: &str =
    "not eligible due to a terminating pod on the nominated node.";
/// A node with no pod of lower priority than the incoming one.
pub const ERR_NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Nodes where preemption was not tried (rejected as unresolvable, or not examined).
pub const ERR_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// A preemptor whose victims are still being deleted.
pub const ERR_PREEMPTION_RUNNING: &str = "waiting for the preemption for this pod to be finished";
/// `DisruptionTarget` condition reason of pods the scheduler preempts.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// Upstream: defaultpreemption.DefaultPreemption.
#[derive(Debug)]
pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
    /// Preemptions the scheduler is carrying out: their preemptors wait at PreEnqueue.
    preempting: PreemptingPods,
    /// Extenders asked about the candidates before the best one is chosen.
    extenders: Arc<[Arc<dyn PreemptionExtender>]>,
}

/// Builds the plugin from `DefaultPreemptionArgs` (absent: upstream's defaults).
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    let mut pl = DefaultPreemption::from_args(args)?;
    pl.preempting = handle.preempting_pods.clone();
    pl.extenders = handle.preemption_extenders.clone();
    Ok(Arc::new(pl))
}

impl DefaultPreemption {
    /// Decodes and validates `args` (with a set of running preemptions of its own).
    pub fn from_args(args: Option<&serde_json::Value>) -> Result<Self, Vec<ArgsError>> {
        let args: DefaultPreemptionArgs = decode_args(args).map_err(|e| vec![e])?;
        let errs = args.validate();
        if !errs.is_empty() {
            return Err(errs);
        }
        Ok(DefaultPreemption {
            args,
            preempting: PreemptingPods::default(),
            extenders: Arc::from(Vec::new()),
        })
    }

    pub fn args(&self) -> &DefaultPreemptionArgs {
        &self.args
    }
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }

    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }

    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
}

/// A preemptor waits here while its victims are being deleted, so that it is not tried
/// (and does not preempt again) before they are gone; the scheduler activates it then.
impl PreEnqueuePlugin for DefaultPreemption {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if self.preempting.contains(&pod.key) {
            return Status::unresolvable(ERR_PREEMPTION_RUNNING);
        }
        Status::success()
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        runner: &dyn PluginsRunner,
    ) -> (Option<PostFilterResult>, Status) {
        let (result, status) = self.preempt(state, pod, snapshot, statuses, runner);
        let message = status.message();
        if message.is_empty() {
            return (result, status);
        }
        (
            result,
            Status::new(status.code(), format!("{MESSAGE_PREFIX}{message}")),
        )
    }
}

/// Pod deletions are registered so that the queue knows this plugin may gate pods, with a
/// hint that never requeues: the end of the preemption activates the pod, and the plugins
/// that rejected it decide on their own events.
impl EnqueueExtensions for DefaultPreemption {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::with_hint(
            EventResource::Pod,
            ActionType::DELETE,
            Arc::new(|_, _, _| Ok(QueueingHint::QueueSkip)),
        )]
    }
}

/// A node where evicting `victims` makes the pod fit.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    /// Most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// Victims whose eviction a PodDisruptionBudget does not allow.
    pub pdb_violations: usize,
}

impl DefaultPreemption {
    /// Upstream: Evaluator.Preempt, without the API calls (the loop makes them).
    fn preempt(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        runner: &dyn PluginsRunner,
    ) -> (Option<PostFilterResult>, Status) {
        let nominated = runner.nominated_node_name(pod);
        if let Err(reason) = pod_eligible_to_preempt_others(
            pod,
            nominated.as_deref(),
            snapshot,
            statuses,
            &self.preempting,
        ) {
            return (None, Status::unschedulable(reason));
        }
        let potential: Vec<&Arc<NodeInfo>> = statuses
            .nodes_for_preemption(snapshot.node_infos())
            .collect();
        let (candidates, examined) = if potential.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let offset = runner.random_index(potential.len());
            let want = self.args.num_candidates(potential.len());
            dry_run_preemption(
                runner,
                state,
                pod,
                &potential,
                snapshot.pdbs(),
                offset,
                want,
            )
        };
        let node_statuses = explain_nodes(snapshot, &examined);
        if candidates.is_empty() {
            if let Some((_, s)) = examined.iter().find(|(_, s)| s.code() == Code::Error) {
                return (None, Status::error(s.message()));
            }
            let message = fit_message(snapshot.num_nodes(), &examined);
            let mut result = PostFilterResult::nominated("");
            result.node_statuses = node_statuses;
            return (Some(result), Status::unschedulable(message));
        }
        let candidates = match self.call_extenders(pod, snapshot, candidates) {
            Ok(c) => c,
            Err(s) => return (None, s),
        };
        let Some(best) = select_candidate(&candidates) else {
            return (
                None,
                Status::unschedulable("no candidate node for preemption"),
            );
        };
        let mut result = PostFilterResult::nominated(best.node.clone());
        result.victims = best.victims.clone();
        result.node_statuses = node_statuses;
        (Some(result), Status::success())
    }
}

impl DefaultPreemption {
    /// Lets each interested extender with a preempt verb trim the candidates: nodes it
    /// leaves out are dropped, victims it keeps replace the dry run's. The candidates keep
    /// the dry run's order. Upstream: Evaluator.callExtenders.
    fn call_extenders(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        candidates: Vec<Candidate>,
    ) -> Result<Vec<Candidate>, Status> {
        if self.extenders.is_empty() || candidates.is_empty() {
            return Ok(candidates);
        }
        let mut victims: BTreeMap<String, ExtenderVictims> = candidates
            .iter()
            .map(|c| {
                let v = ExtenderVictims {
                    pods: c.victims.clone(),
                    num_pdb_violations: i64::try_from(c.pdb_violations).unwrap_or(i64::MAX),
                };
                (c.node.clone(), v)
            })
            .collect();
        for ext in self.extenders.iter() {
            if !ext.is_interested(&pod.pod) {
                continue;
            }
            let mut kept = match ext.process_preemption(&pod.pod, &victims, snapshot) {
                Ok(kept) => kept,
                Err(message) if ext.is_ignorable() => {
                    tracing::info!(pod = %pod.key, extender = ext.name(), error = %message, "skipped ignorable extender at preemption");
                    continue;
                }
                Err(message) => return Err(Status::error(message)),
            };
            if let Some(node) = kept
                .iter()
                .find(|(_, v)| v.pods.is_empty())
                .map(|(n, _)| n.clone())
            {
                if !ext.is_ignorable() {
                    return Err(Status::error(format!(
                        "expected at least one victim pod on node {node:?}"
                    )));
                }
                kept.retain(|_, v| !v.pods.is_empty());
            }
            victims = kept;
            if victims.is_empty() {
                break;
            }
        }
        Ok(candidates
            .into_iter()
            .filter_map(|c| {
                let v = victims.remove(&c.node)?;
                Some(Candidate {
                    node: c.node,
                    victims: v.pods,
                    pdb_violations: usize::try_from(v.num_pdb_violations).unwrap_or(0),
                })
            })
            .collect())
    }
}

/// Whether `pod` may preempt at all; the reason when not. Upstream:
/// DefaultPreemption.PodEligibleToPreemptOthers.
///
/// `nominated` is the node the scheduler itself nominated the pod to, if it knows one: the
/// pod's `status.nominatedNodeName` may not show it yet. Likewise a victim whose deletion
/// the cache does not show yet counts as terminating (`preempting`).
pub fn pod_eligible_to_preempt_others(
    pod: &PodInfo,
    nominated: Option<&str>,
    snapshot: &Snapshot,
    statuses: &NodeToStatus,
    preempting: &PreemptingPods,
) -> Result<(), &'static str> {
    let spec = pod.pod.spec.as_ref();
    if spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return Err(ERR_POLICY_NEVER);
    }
    let nominated = pod
        .pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
        .or(nominated);
    let Some(nominated) = nominated else {
        return Ok(());
    };
    // Filters say evictions cannot help on the nominated node any more: look elsewhere.
    if statuses.get(nominated).code() == Code::UnschedulableAndUnresolvable {
        return Ok(());
    }
    if let Some(node) = snapshot.get(nominated) {
        let priority = pod.priority();
        if node.pods.iter().any(|p| {
            p.priority() < priority
                && (terminating_by_preemption(&p.pod) || preempting.is_victim(&p.key))
        }) {
            return Err(ERR_TERMINATING_ON_NOMINATED);
        }
    }
    Ok(())
}

/// Whether `pod` is being deleted because a scheduler preempted it. Upstream requires the
/// `DisruptionTarget` condition with reason `PreemptionByScheduler`; kubesched's sink cannot
/// write that condition yet, so a terminating pod without any `DisruptionTarget` condition
/// counts too (what upstream did before the condition existed).
pub fn terminating_by_preemption(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    match conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
    {
        Some(c) => {
            c.status == "True" && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
        }
        None => true,
    }
}

/// Dry-runs preemption on `nodes`, starting at `offset` and wrapping, until `want`
/// candidates are found (at least one of them violating no PDB). Returns the candidates
/// (those violating no PDB first, each group in the order found) and the status of every
/// node examined that is not a candidate. Upstream: Evaluator.DryRunPreemption, run
/// sequentially so that the result does not depend on the number of threads.
pub fn dry_run_preemption(
    runner: &dyn PluginsRunner,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[&Arc<NodeInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
    offset: usize,
    want: usize,
) -> (Vec<Candidate>, Vec<(String, Status)>) {
    let mut non_violating: Vec<Candidate> = Vec::new();
    let mut violating: Vec<Candidate> = Vec::new();
    let mut examined: Vec<(String, Status)> = Vec::new();
    let n = nodes.len();
    for i in 0..n {
        let Some(node) = nodes.get((offset + i) % n) else {
            break;
        };
        let mut node_copy = NodeInfo::clone(node);
        let mut state_copy = state.clone();
        let name = node.name().to_string();
        match select_victims_on_node(runner, &mut state_copy, pod, &mut node_copy, pdbs) {
            Ok((victims, pdb_violations)) if !victims.is_empty() => {
                let c = Candidate {
                    node: name.clone(),
                    victims,
                    pdb_violations,
                };
                examined.push((name, Status::new(Code::Success, candidate_summary(&c))));
                if c.pdb_violations == 0 {
                    non_violating.push(c);
                } else {
                    violating.push(c);
                }
                if !non_violating.is_empty() && non_violating.len() + violating.len() >= want {
                    break;
                }
            }
            Ok(_) => examined.push((
                name.clone(),
                Status::error(format!("expected at least one victim pod on node {name:?}")),
            )),
            Err(s) => examined.push((name, s)),
        }
    }
    non_violating.extend(violating);
    (non_violating, examined)
}

/// What evicting `c.victims` means, for explanations.
fn candidate_summary(c: &Candidate) -> String {
    let names: Vec<&str> = c.victims.iter().map(|v| v.key.as_str()).collect();
    format!(
        "preempting {} pod(s) makes the pod fit: {}; {} PodDisruptionBudget violation(s)",
        c.victims.len(),
        names.join(", "),
        c.pdb_violations
    )
}

/// The pods to evict from `node` so that `pod` fits, most important first, and how many of
/// them a PDB protects; `Err` with the status when no eviction helps. `state` and `node` are
/// the caller's copies and are changed. Upstream: DefaultPreemption.SelectVictimsOnNode.
pub fn select_victims_on_node(
    runner: &dyn PluginsRunner,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut NodeInfo,
    pdbs: &[Arc<PodDisruptionBudget>],
) -> Result<(Vec<Arc<PodInfo>>, usize), Status> {
    let priority = pod.priority();
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority() < priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(ERR_NO_VICTIMS));
    }
    for p in &potential {
        remove_pod(runner, state, pod, node, p)?;
    }
    let s = runner.run_filter_plugins_with_nominated_pods(state, pod, node);
    if !s.is_success() {
        return Err(s);
    }
    potential.sort_by(|a, b| more_important_first(a, b));
    let (violating, non_violating) = split_by_pdb_violation(potential, pdbs);
    let mut victims: Vec<Arc<PodInfo>> = Vec::new();
    let mut pdb_violations = 0;
    // Put pods back, PDB-protected ones first, most important first; a pod that makes the
    // incoming pod not fit any more stays evicted.
    for (group_violates, group) in [(true, &violating), (false, &non_violating)] {
        for p in group {
            node.add_pod(p.clone());
            let s = runner.run_pre_filter_extension_add_pod(state, pod, p, node);
            if !s.is_success() {
                return Err(s);
            }
            if !runner
                .run_filter_plugins_with_nominated_pods(state, pod, node)
                .is_success()
            {
                remove_pod(runner, state, pod, node, p)?;
                victims.push(p.clone());
                if group_violates {
                    pdb_violations += 1;
                }
            }
        }
    }
    if !violating.is_empty() && !non_violating.is_empty() {
        victims.sort_by(|a, b| more_important_first(a, b));
    }
    Ok((victims, pdb_violations))
}

fn remove_pod(
    runner: &dyn PluginsRunner,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut NodeInfo,
    to_remove: &Arc<PodInfo>,
) -> Result<(), Status> {
    if !node.remove_pod(&to_remove.key) {
        return Err(Status::error(format!(
            "pod {} is not on node {}",
            to_remove.key,
            node.name()
        )));
    }
    let s = runner.run_pre_filter_extension_remove_pod(state, pod, to_remove, node);
    if s.is_success() {
        Ok(())
    } else {
        Err(s)
    }
}

/// Higher priority first, then the earlier started (a pod not started yet counts as
/// starting now, after every started pod). Upstream: util.MoreImportantPod.
fn more_important_first(a: &PodInfo, b: &PodInfo) -> std::cmp::Ordering {
    b.priority()
        .cmp(&a.priority())
        .then_with(|| start_time(a).cmp(&start_time(b)))
}

/// `status.startTime` in nanoseconds; not started yet sorts last.
fn start_time(p: &PodInfo) -> i128 {
    p.pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or(i128::MAX, |t| t.0.as_nanosecond())
}

/// Splits `pods` (order kept) into those whose eviction some PDB does not allow, counting
/// each earlier pod against the budgets, and the others. A PDB with no or an empty
/// selector matches nothing; a pod already in a PDB's `disruptedPods` does not count.
/// Upstream: filterPodsWithPDBViolation.
pub fn split_by_pdb_violation(
    pods: Vec<Arc<PodInfo>>,
    pdbs: &[Arc<PodDisruptionBudget>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let selectors: Vec<Option<LabelSelector>> = pdbs
        .iter()
        .map(|pdb| {
            let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
            LabelSelector::compile(sel)
                .ok()
                .filter(|s| !s.is_nothing() && !s.is_everything())
        })
        .collect();
    let mut allowed: Vec<i32> = pdbs
        .iter()
        .map(|pdb| pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed))
        .collect();
    let mut violating = Vec::new();
    let mut non_violating = Vec::new();
    for p in pods {
        let mut violated = false;
        if let Some(labels) = p.labels().filter(|l| !l.is_empty()) {
            for ((pdb, sel), left) in pdbs.iter().zip(&selectors).zip(allowed.iter_mut()) {
                let Some(sel) = sel else { continue };
                let pdb_ns = pdb.metadata.namespace.as_deref().unwrap_or("default");
                if pdb_ns != p.namespace() || !sel.matches(labels) {
                    continue;
                }
                let disrupted = pdb
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(p.name()));
                if disrupted {
                    continue;
                }
                *left -= 1;
                if *left < 0 {
                    violated = true;
                }
            }
        }
        if violated {
            violating.push(p);
        } else {
            non_violating.push(p);
        }
    }
    (violating, non_violating)
}

/// The best candidate (see the module doc); the first on a full tie. Upstream:
/// SelectCandidate and pickOneNodeForPreemption.
pub fn select_candidate(candidates: &[Candidate]) -> Option<&Candidate> {
    type ScoreFn = fn(&Candidate) -> i128;
    let score_fns: [ScoreFn; 5] = [
        // Fewest PDB violations.
        |c| -(c.pdb_violations as i128),
        // Lowest priority of the most important victim.
        |c| -c.victims.first().map_or(0, |v| i128::from(v.priority())),
        // Smallest sum of priorities, each shifted to be non-negative.
        |c| {
            -c.victims
                .iter()
                .map(|v| i128::from(v.priority()) + i128::from(i32::MAX) + 1)
                .sum::<i128>()
        },
        // Fewest victims.
        |c| -(c.victims.len() as i128),
        // Latest start time among the most important victims (not started counts as now).
        |c| {
            let top = c.victims.first().map_or(0, |v| v.priority());
            c.victims
                .iter()
                .filter(|v| v.priority() == top)
                .map(|v| start_time(v))
                .min()
                .unwrap_or(i128::MIN)
        },
    ];
    let mut remaining: Vec<&Candidate> = candidates.iter().collect();
    for f in score_fns {
        if remaining.len() <= 1 {
            break;
        }
        let best = remaining.iter().map(|c| f(c)).max().unwrap_or(i128::MIN);
        remaining.retain(|c| f(c) == best);
    }
    remaining.first().copied()
}

/// Per node the dry run examined, why preemption did or did not help, in snapshot order.
/// The other nodes are summed up in the message ("not helpful"): listing them would cost
/// an entry per node of the cluster on every failed attempt.
fn explain_nodes(snapshot: &Snapshot, examined: &[(String, Status)]) -> Vec<(String, Status)> {
    let mut out = examined.to_vec();
    out.sort_by_key(|(n, _)| snapshot.position(n));
    out
}

/// Upstream's FitError message over the dry run: `0/<N> nodes are available: ` and the
/// reason histogram, nodes not examined counted as "not helpful".
fn fit_message(num_all_nodes: usize, examined: &[(String, Status)]) -> String {
    let mut histogram: std::collections::BTreeMap<String, usize> = Default::default();
    let mut explicit = 0;
    for (_, s) in examined.iter().filter(|(_, s)| !s.is_success()) {
        explicit += 1;
        for r in s.reasons() {
            *histogram.entry(r.to_string()).or_insert(0) += 1;
        }
    }
    if explicit < num_all_nodes {
        *histogram.entry(ERR_NOT_HELPFUL.to_string()).or_insert(0) += num_all_nodes - explicit;
    }
    let mut entries: Vec<String> = histogram
        .into_iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    entries.sort();
    format!(
        "0/{num_all_nodes} nodes are available: {}.",
        entries.join(", ")
    )
}

#[cfg(test)]
mod tests;

//! `kubesched simulate`: schedule the pending pods of a cluster snapshot offline, one by one
//! in queue order, and explain every decision per node and per plugin.
//!
//! The same scheduling cycle as the live scheduler ([`crate::schedule_one`]), fed from
//! files instead of informers: each placement is applied to the in-memory snapshot before
//! the next pod is scheduled. Reserve and Permit run, and the binding cycle binds to the
//! in-memory cluster. The configuration's HTTP extenders are called as the scheduler calls
//! them (filter, prioritize, preempt, bind): their answers are part of the input, so the
//! same input, seed and extender answers give the same report.

pub mod capacity;
pub mod input;
pub mod output;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use framework::{PodInfo, Status};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;
use plugins::dynamicresources::{self, explain::DeviceReason};
use plugins::names::{DYNAMIC_RESOURCES, VOLUME_BINDING, VOLUME_ZONE};
use plugins::volumebinding::{self, explain::ClaimReason};
use plugins::volumezone;

use crate::backend::cache::{is_assigned, is_terminal};
use crate::builder::SchedulerBuilder;
use crate::clock::FakeClock;
use crate::config::ConfigError;
use crate::extender::{self, HttpExtender};
use crate::memory::MemoryCluster;
use crate::metrics::NoopRecorder;
use crate::schedule_one::Explanation;
use crate::scheduler::{Attempt, AttemptOutcome, Scheduler, SchedulingLoop};
use crate::source::{Change, ObjectEvent};

pub use input::{ClusterInput, InputError};

/// The scheduler name of pods that do not set one (API server defaulting).
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// What happened to a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodResult {
    Scheduled,
    Unschedulable,
    Error,
    /// Held back by a PreEnqueue plugin (scheduling gates).
    Gated,
    /// Not for any profile of this scheduler, or being deleted.
    Skipped,
    /// A running pod evicted so that a pod of higher priority fits.
    Preempted,
}

impl PodResult {
    pub fn as_str(self) -> &'static str {
        match self {
            PodResult::Scheduled => "Scheduled",
            PodResult::Unschedulable => "Unschedulable",
            PodResult::Error => "Error",
            PodResult::Gated => "Gated",
            PodResult::Skipped => "Skipped",
            PodResult::Preempted => "Preempted",
        }
    }
}

/// The outcome and explanation for one pending pod.
#[derive(Debug, Clone)]
pub struct PodReport {
    pub namespace: String,
    pub name: String,
    pub scheduler_name: String,
    pub node: Option<String>,
    pub result: PodResult,
    /// The FailedScheduling message (or why the pod was gated, skipped or errored).
    pub message: Option<String>,
    /// The extender that bound the pod, when a binding extender did (its `urlPrefix`).
    pub bound_by: Option<String>,
    /// `(reason, node count)` of an unschedulable pod's message.
    pub reason_counts: Vec<(String, usize)>,
    /// Per-plugin, per-node detail, for pods that went through a scheduling cycle.
    pub explanation: Option<Explanation>,
    /// The node preemption nominated the pod to, when it preempted.
    pub nominated_node: Option<String>,
    /// The pods it evicted, as `(namespace, name)`.
    pub victims: Vec<(String, String)>,
    /// Per node, why preemption did or did not help (when PostFilter tried).
    pub preemption: Vec<(String, Status)>,
    /// What VolumeBinding decided for the pod's unbound claims on its node.
    pub volumes: Vec<VolumeDecision>,
    /// Per node VolumeBinding or VolumeZone rejected, in evaluation order: each claim that
    /// cannot be had there, and why.
    pub volume_reasons: Vec<(String, Vec<ClaimReason>)>,
    /// The devices the pod's claims were allocated on its node, per claim and request.
    pub devices: Vec<DeviceDecision>,
    /// Per node DynamicResources rejected, in evaluation order: why the pod's claims cannot
    /// be allocated there.
    pub device_reasons: Vec<(String, Vec<DeviceReason>)>,
}

/// One device allocated to a request of a claim of a scheduled pod (as the binding cycle
/// wrote it to the claim's status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDecision {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// `request` or `request/subrequest`.
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl DeviceDecision {
    /// The devices of the allocations among `claims` (status writes), in write order.
    fn from_writes(claims: &[ResourceClaim]) -> Vec<Self> {
        claims
            .iter()
            .flat_map(|c| {
                let claim = format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or(""),
                    c.metadata.name.as_deref().unwrap_or("")
                );
                c.status
                    .as_ref()
                    .and_then(|s| s.allocation.as_ref())
                    .and_then(|a| a.devices.as_ref())
                    .and_then(|d| d.results.as_deref())
                    .unwrap_or_default()
                    .iter()
                    .map(move |r| DeviceDecision {
                        claim: claim.clone(),
                        request: r.request.clone(),
                        driver: r.driver.clone(),
                        pool: r.pool.clone(),
                        device: r.device.clone(),
                    })
            })
            .collect()
    }
}

/// What the binding cycle of a scheduled pod did for one of its unbound claims (what the
/// PV controller or a provisioner would carry out on a cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeDecision {
    /// The claim (`namespace/name`) is bound to an existing volume.
    Bind { claim: String, volume: String },
    /// The claim's volume is to be provisioned for the node (its selected node).
    Provision { claim: String, node: String },
}

impl VolumeDecision {
    /// The decisions VolumeBinding's writes express: a volume's `claimRef`, a claim's
    /// selected node.
    fn from_writes(pvs: &[PersistentVolume], pvcs: &[PersistentVolumeClaim]) -> Vec<Self> {
        let bound = pvs.iter().filter_map(|pv| {
            let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
            Some(VolumeDecision::Bind {
                claim: format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or(""),
                    r.name.as_deref().unwrap_or("")
                ),
                volume: pv.metadata.name.clone().unwrap_or_default(),
            })
        });
        let provisioned = pvcs.iter().filter_map(|c| {
            let node = c
                .metadata
                .annotations
                .as_ref()?
                .get("volume.kubernetes.io/selected-node")?;
            Some(VolumeDecision::Provision {
                claim: format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or(""),
                    c.metadata.name.as_deref().unwrap_or("")
                ),
                node: node.clone(),
            })
        });
        bound.chain(provisioned).collect()
    }
}

/// The result of a simulation.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub pods: Vec<PodReport>,
}

/// The tokio runtime a simulation runs on.
///
/// Without extenders, one thread: the simulation drives the runtime itself between cycles.
/// With them, one worker thread besides: the cycle blocks on an extender's reply from the
/// simulation's thread, and a current-thread runtime drives I/O only inside its own
/// `block_on`. Bindings still run one pod at a time (the simulation waits for them after
/// each cycle), so the worker changes no outcome.
fn runtime(with_extenders: bool) -> std::io::Result<tokio::runtime::Runtime> {
    if with_extenders {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("simulate-extenders")
            .enable_all()
            .build()
    } else {
        // Timers on: a Permit plugin's wait arms its timeout in the binding cycle, even
        // though simulate rejects the waiting pod right after.
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
    }
}

/// Why a simulation could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The configuration's profiles or extenders could not be built.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// A scheduler built for a simulation: an in-memory cluster as its client and event
/// source, no metrics, and a clock that stands still.
pub struct Simulation {
    rt: tokio::runtime::Runtime,
    sched: Scheduler,
    cluster: Arc<MemoryCluster>,
    clock: FakeClock,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// Builds the scheduler `builder` describes (its registry, configuration and seed) over
    /// an in-memory cluster. Every profile must share the first one's QueueSort, as upstream
    /// requires.
    pub fn new(builder: SchedulerBuilder) -> Result<Simulation, SimulateError> {
        let rt = runtime(!builder.config().extenders.is_empty()).map_err(SimulateError::Runtime)?;
        let cluster = MemoryCluster::new();
        let clock = FakeClock::new();
        let built = builder
            .client(cluster.clone())
            .metrics(Arc::new(NoopRecorder))
            .clock(Arc::new(clock.clone()))
            // Offline: no PV controller binds claims, so binding cycles do not wait for one.
            .storage_controllers(false)
            // The capacity search places copies of one pod in unexplained cycles: they must
            // land where explained ones would, and a batched cycle may break a tie apart.
            .feature_gates(crate::features::FeatureGates {
                opportunistic_batching: false,
            })
            .build(rt.handle().clone())?;
        Ok(Simulation {
            rt,
            sched: built.scheduler,
            cluster,
            clock,
            warnings: built.warnings,
        })
    }

    /// What building the scheduler had to say (e.g. upstream plugins left out).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Schedules the pending pods of `input`. The report lists pods in the order they were
    /// scheduled, then the gated and skipped ones in input order.
    ///
    /// The pods go through the scheduler itself ([`crate::scheduler`]): informer-like events
    /// from the in-memory cluster, the queue, the cache, the scheduling cycle and the binding
    /// cycle; the clock stands still, so each pod gets one attempt (a pod that failed waits
    /// out a backoff that never ends). Permit plugins cannot make a pod wait here: a waiting
    /// pod is rejected.
    ///
    /// Preemption runs as in the scheduler: a pod that preempts is nominated and its victims
    /// are deleted from the cluster (reported with result `Preempted`); once they are gone
    /// the scheduler moves the preemptor back to activeQ, so it is placed within the run. The
    /// cluster applies the nomination to the pod's status, so the retry tries that node
    /// first.
    pub fn run(self, input: &ClusterInput) -> Report {
        let mut lp = self.sched.scheduling_loop();
        run(&self, &mut lp, input)
    }
}

/// Loads `input` into the simulation's cluster and schedules its pending pods with `lp`,
/// until activeQ is empty.
fn run(sim: &Simulation, lp: &mut SchedulingLoop, input: &ClusterInput) -> Report {
    let Simulation {
        rt,
        sched,
        cluster,
        clock,
        warnings: _,
    } = sim;
    let names: Vec<String> = sched.profile_names();
    let gates: HashMap<String, Status> = input
        .pods
        .iter()
        .filter(|p| !is_terminal(p) && !is_assigned(p))
        .filter_map(|p| {
            let info = PodInfo::new(p.clone());
            let fwk = sched.profile(&scheduler_name(p))?;
            let s = fwk.run_pre_enqueue_plugins(&info);
            (!s.is_success()).then(|| (info.key.clone(), s))
        })
        .collect();
    cluster.connect(sched.weak_event_handler());
    load(cluster, input, clock);
    sched.event_handler().synced();

    let mut report = Report::default();
    let mut held_back: Vec<PodReport> = Vec::new();
    for pod in &input.pods {
        if is_terminal(pod) || is_assigned(pod) {
            continue;
        }
        let info = PodInfo::new(pod.clone());
        let name = scheduler_name(pod);
        if !names.contains(&name) {
            held_back.push(skipped(
                &info,
                &name,
                PodResult::Skipped,
                format!("schedulerName {name:?} is not a profile of this scheduler"),
            ));
        } else if let Some(s) = gates.get(&info.key) {
            held_back.push(skipped(&info, &name, PodResult::Gated, s.message()));
        }
    }

    let mut seen: HashMap<String, usize> = HashMap::new();
    // Each pending pod is attempted once, and again after a preemption; the bound only
    // guards against a requeue loop.
    let limit = 4 * input.pods.len() + 1;
    for _ in 0..limit {
        let mut explanation = Explanation::default();
        let volume_writes = cluster.volume_write_counts();
        let claim_writes = cluster.resource_claim_status_count();
        let Some(a) = lp.schedule_one(Some(&mut explanation)) else {
            break;
        };
        reject_waiting_pods(sched);
        rt.block_on(sched.wait_for_bindings());
        let preempted = preempted_by(&a);
        let mut r = pod_report(cluster, sched.extenders(), a, explanation);
        if r.result == PodResult::Scheduled {
            let (pvs, pvcs) = cluster.volume_writes_since(volume_writes);
            r.volumes = VolumeDecision::from_writes(&pvs, &pvcs);
            r.devices =
                DeviceDecision::from_writes(&cluster.resource_claim_statuses_since(claim_writes));
        }
        r.explain_claims(|name| {
            input
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name))
                .map(|n| &**n)
        });
        let key = format!("{}/{}", r.namespace, r.name);
        match seen.get(&key) {
            Some(&i) => {
                // A retry after preemption: the report keeps what the preemption did.
                let earlier = &report.pods[i];
                if r.nominated_node.is_none() && !earlier.victims.is_empty() {
                    r.nominated_node = earlier.nominated_node.clone();
                    r.victims = earlier.victims.clone();
                    r.preemption = earlier.preemption.clone();
                }
                report.pods[i] = r;
            }
            None => {
                seen.insert(key, report.pods.len());
                report.pods.push(r);
            }
        }
        if let Some((preemptor, node, victims)) = preempted {
            for v in victims {
                let victim = preempted_report(&v, &preemptor, &node);
                let vkey = v.key.clone();
                match seen.get(&vkey) {
                    Some(&i) => report.pods[i] = victim,
                    None => {
                        seen.insert(vkey, report.pods.len());
                        report.pods.push(victim);
                    }
                }
            }
        }
    }
    report.pods.extend(held_back);
    report
}

/// Rejects every pod a Permit plugin asked to wait: the clock stands still, so nothing
/// would ever let it go on, and its binding cycle would never end.
fn reject_waiting_pods(sched: &Scheduler) {
    for wp in sched.waiting_pods().list() {
        let plugins = wp.pending_plugins().join(", ");
        for p in wp.pending_plugins() {
            wp.reject(
                p,
                &format!(
                    "permit plugin(s) {plugins} asked the pod to wait; simulate does not wait"
                ),
            );
        }
    }
}

/// Feeds the input to the scheduler as informers would: namespaces and workloads first,
/// then nodes, then pods in input order (the clock moves a nanosecond per pod, so that pods
/// of equal priority keep their input order in the queue).
fn load(cluster: &MemoryCluster, input: &ClusterInput, clock: &FakeClock) {
    for ns in &input.namespaces {
        cluster.deliver_other(ObjectEvent::Namespace(Change::Added(Arc::new(ns.clone()))));
    }
    let w = &input.workloads;
    for o in w.services.values().flatten() {
        cluster.deliver_other(ObjectEvent::Service(Change::Added(o.clone())));
    }
    for o in w.replication_controllers.values().flatten() {
        cluster.deliver_other(ObjectEvent::ReplicationController(Change::Added(o.clone())));
    }
    for o in w.replica_sets.values().flatten() {
        cluster.deliver_other(ObjectEvent::ReplicaSet(Change::Added(o.clone())));
    }
    for o in w.stateful_sets.values().flatten() {
        cluster.deliver_other(ObjectEvent::StatefulSet(Change::Added(o.clone())));
    }
    for o in &input.priority_classes {
        cluster.deliver_other(ObjectEvent::PriorityClass(Change::Added(o.clone())));
    }
    for o in &input.pdbs {
        cluster.deliver_other(ObjectEvent::PodDisruptionBudget(Change::Added(o.clone())));
    }
    for o in &input.storage_classes {
        cluster.deliver_other(ObjectEvent::StorageClass(Change::Added(o.clone())));
    }
    for o in &input.persistent_volumes {
        cluster.deliver_other(ObjectEvent::PersistentVolume(Change::Added(o.clone())));
    }
    for o in &input.persistent_volume_claims {
        cluster.deliver_other(ObjectEvent::PersistentVolumeClaim(Change::Added(o.clone())));
    }
    for o in &input.csi_nodes {
        cluster.deliver_other(ObjectEvent::CSINode(Change::Added(o.clone())));
    }
    for o in &input.csi_drivers {
        cluster.deliver_other(ObjectEvent::CSIDriver(Change::Added(o.clone())));
    }
    for o in &input.csi_storage_capacities {
        cluster.deliver_other(ObjectEvent::CSIStorageCapacity(Change::Added(o.clone())));
    }
    for o in &input.volume_attachments {
        cluster.deliver_other(ObjectEvent::VolumeAttachment(Change::Added(o.clone())));
    }
    for o in &input.device_classes {
        cluster.deliver_other(ObjectEvent::DeviceClass(Change::Added(o.clone())));
    }
    for o in &input.resource_slices {
        cluster.deliver_other(ObjectEvent::ResourceSlice(Change::Added(o.clone())));
    }
    for o in &input.resource_claims {
        cluster.deliver_other(ObjectEvent::ResourceClaim(Change::Added(o.clone())));
    }
    for n in &input.nodes {
        cluster.apply_node((**n).clone());
    }
    for p in &input.pods {
        cluster.apply_pod((**p).clone());
        clock.advance(Duration::from_nanos(1));
    }
}

fn skipped(info: &PodInfo, scheduler_name: &str, result: PodResult, message: String) -> PodReport {
    PodReport {
        namespace: info.namespace().to_string(),
        name: info.name().to_string(),
        scheduler_name: scheduler_name.to_string(),
        node: None,
        result,
        message: Some(message),
        bound_by: None,
        reason_counts: Vec::new(),
        explanation: None,
        nominated_node: None,
        victims: Vec::new(),
        preemption: Vec::new(),
        volumes: Vec::new(),
        volume_reasons: Vec::new(),
        devices: Vec::new(),
        device_reasons: Vec::new(),
    }
}

/// The preemptor, the node and the victims of an attempt that preempted.
fn preempted_by(a: &Attempt) -> Option<(Arc<PodInfo>, String, Vec<Arc<PodInfo>>)> {
    let AttemptOutcome::Unschedulable { fit: Some(fit), .. } = &a.outcome else {
        return None;
    };
    let r = fit.diagnosis.post_filter_result.as_ref()?;
    if r.nominated_node_name.is_empty() || r.victims.is_empty() {
        return None;
    }
    Some((
        a.pod.clone(),
        r.nominated_node_name.clone(),
        r.victims.clone(),
    ))
}

/// The report of a pod evicted by `preemptor` from `node`.
fn preempted_report(victim: &PodInfo, preemptor: &PodInfo, node: &str) -> PodReport {
    PodReport {
        namespace: victim.namespace().to_string(),
        name: victim.name().to_string(),
        scheduler_name: scheduler_name(&victim.pod),
        node: Some(node.to_string()),
        result: PodResult::Preempted,
        message: Some(format!("Preempted by pod {} on node {node}", preemptor.key)),
        bound_by: None,
        reason_counts: Vec::new(),
        explanation: None,
        nominated_node: None,
        victims: Vec::new(),
        preemption: Vec::new(),
        volumes: Vec::new(),
        volume_reasons: Vec::new(),
        devices: Vec::new(),
        device_reasons: Vec::new(),
    }
}

/// The report of one attempt, once its binding cycle (if any) is over.
fn pod_report(
    cluster: &MemoryCluster,
    extenders: &[HttpExtender],
    a: Attempt,
    explanation: Explanation,
) -> PodReport {
    let pod = a.pod.clone();
    let assumed = matches!(a.outcome, AttemptOutcome::Assumed { .. });
    let mut r = PodReport::from_attempt(a, explanation);
    if !assumed {
        return r;
    }
    let bound = cluster
        .pod(&r.namespace, &r.name)
        .and_then(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()));
    let binder = extender::binder_for(extenders, &pod.pod);
    if bound.is_some() && bound == r.node {
        return r;
    }
    if let Some(ext) = binder.filter(|_| last_event_is_scheduled(cluster, &r.namespace, &r.name)) {
        // The extender bound the pod through its own client: the in-memory cluster saw no
        // bind, and the binding cycle's Scheduled event says it succeeded.
        r.bound_by = Some(ext.name().to_string());
        return r;
    }
    // The binding cycle failed: its PodScheduled condition says why.
    r.result = PodResult::Error;
    r.node = None;
    let condition = cluster
        .last_status_update(&r.namespace, &r.name)
        .and_then(|u| u.condition);
    if let Some(c) = condition {
        if c.reason == "Unschedulable" {
            r.result = PodResult::Unschedulable;
        }
        r.message = Some(c.message);
    }
    r
}

impl PodReport {
    /// The report of one scheduling cycle as the cycle left it: a pod assumed on a node is
    /// `Scheduled` there (its binding cycle has only started); an unschedulable one carries
    /// its FailedScheduling message, reason counts and what preemption did.
    pub fn from_attempt(a: Attempt, explanation: Explanation) -> PodReport {
        let mut r = PodReport {
            namespace: a.pod.namespace().to_string(),
            name: a.pod.name().to_string(),
            scheduler_name: scheduler_name(&a.pod.pod),
            node: None,
            result: PodResult::Error,
            message: None,
            bound_by: None,
            reason_counts: Vec::new(),
            explanation: Some(explanation),
            nominated_node: None,
            victims: Vec::new(),
            preemption: Vec::new(),
            volumes: Vec::new(),
            volume_reasons: Vec::new(),
            devices: Vec::new(),
            device_reasons: Vec::new(),
        };
        match a.outcome {
            AttemptOutcome::Assumed { node } => {
                r.result = PodResult::Scheduled;
                r.node = Some(node);
            }
            AttemptOutcome::Unschedulable { message, fit } => {
                if let Some(pf) = fit
                    .as_ref()
                    .and_then(|f| f.diagnosis.post_filter_result.as_ref())
                {
                    if !pf.nominated_node_name.is_empty() {
                        r.nominated_node = Some(pf.nominated_node_name.clone());
                    }
                    r.victims = pf
                        .victims
                        .iter()
                        .map(|v| (v.namespace().to_string(), v.name().to_string()))
                        .collect();
                    r.preemption = pf.node_statuses.clone();
                }
                r.result = PodResult::Unschedulable;
                r.reason_counts = fit.map(|f| f.reason_counts()).unwrap_or_default();
                r.message = Some(message);
            }
            AttemptOutcome::Error { message } => {
                r.result = PodResult::Error;
                r.message = Some(message);
            }
            AttemptOutcome::Skipped { reason } => {
                r.result = PodResult::Skipped;
                r.message = Some(reason);
                r.explanation = None;
            }
        }
        r
    }

    /// Fills in, per node a volume plugin or DynamicResources rejected, why each claim
    /// cannot be had there; `node` finds a node object by name.
    pub fn explain_claims<'n>(&mut self, node: impl Fn(&str) -> Option<&'n Node>) {
        self.volume_reasons = volume_reasons(self.explanation.as_ref(), node);
        self.device_reasons = device_reasons(self.explanation.as_ref());
    }
}

/// Per node VolumeBinding's or VolumeZone's Filter rejected, why each claim cannot be had
/// there, retraced from the cycle state Filter read. Nothing for pods whose cycle these
/// plugins skipped.
fn volume_reasons<'n>(
    explanation: Option<&Explanation>,
    node_named: impl Fn(&str) -> Option<&'n Node>,
) -> Vec<(String, Vec<ClaimReason>)> {
    let Some(e) = explanation else {
        return Vec::new();
    };
    let Some(state) = &e.filter_state else {
        return Vec::new();
    };
    e.filter
        .iter()
        .filter_map(|(name, statuses)| {
            // A node's list ends at its first rejection.
            let (plugin, status) = statuses.last()?;
            let explain = match *plugin {
                VOLUME_BINDING => volumebinding::explain_filter,
                VOLUME_ZONE => volumezone::explain_filter,
                _ => return None,
            };
            if !status.is_rejected() {
                return None;
            }
            let node = node_named(name)?;
            let reasons = explain(state, node);
            (!reasons.is_empty()).then(|| (name.clone(), reasons))
        })
        .collect()
}

/// Per node DynamicResources' Filter rejected, why the pod's claims cannot be allocated
/// there, as Filter found it. Nothing for pods whose cycle the plugin skipped.
fn device_reasons(explanation: Option<&Explanation>) -> Vec<(String, Vec<DeviceReason>)> {
    let Some(e) = explanation else {
        return Vec::new();
    };
    let Some(state) = &e.filter_state else {
        return Vec::new();
    };
    e.filter
        .iter()
        .filter_map(|(name, statuses)| {
            // A node's list ends at its first rejection.
            let (plugin, status) = statuses.last()?;
            if *plugin != DYNAMIC_RESOURCES || !status.is_rejected() {
                return None;
            }
            let reasons = dynamicresources::explain_filter(state, name);
            (!reasons.is_empty()).then(|| (name.clone(), reasons))
        })
        .collect()
}

/// Whether the scheduler's last event about the pod `namespace/name` is `Scheduled`.
fn last_event_is_scheduled(cluster: &MemoryCluster, namespace: &str, name: &str) -> bool {
    cluster.last_event_reason(namespace, name).as_deref() == Some("Scheduled")
}

fn scheduler_name(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    crate::backend::queue::scheduler_name(pod).to_string()
}

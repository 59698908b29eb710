//! `kubesched simulate --capacity POD`: how many more copies of a pod the cluster takes
//! (the question cluster-capacity answers), where they go, and what stops them.
//!
//! The snapshot's own pending pods are scheduled first, exactly as `simulate` schedules
//! them: they are ahead in the queue (cluster-capacity's scheduler, too, sees them before it
//! creates its first copy). Then copies of the pod go through the same scheduling loop one
//! at a time, each bound before the next is created, until one does not fit, one fails for
//! another reason, or `max_replicas` are placed.
//!
//! Copies are named as cluster-capacity names them, `<name>-<i>` counting from 0 (an index
//! whose name a pod of the snapshot already has is passed over), in the pod's namespace,
//! with `spec.nodeName` and the status cleared. They never preempt: PostFilter is not run
//! for them, so nothing is evicted, and the message that stops the run is the one upstream
//! prints for a profile without PostFilter plugins, Filter's own. (cluster-capacity runs
//! the profile's preemption, which may delete victims in its copy of the cluster, and stops
//! at that copy all the same.)
//!
//! Speed: one [`Simulation`], one scheduling loop and one snapshot for the whole run. A copy
//! is added as an informer event, its cycle refreshes only the NodeInfo the previous copy
//! changed, and no explanation is recorded; only the first copy pays for a full snapshot.

pub mod output;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use framework::PodInfo;
use k8s_openapi::api::core::v1::Pod;

use super::{pod_report, reject_waiting_pods, run, ClusterInput, PodResult, Report, Simulation};
use crate::schedule_one::Explanation;
use crate::scheduler::AttemptOutcome;

/// How far to go.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapacityOptions {
    /// Stop once this many copies are placed (`None`: until one does not fit).
    pub max_replicas: Option<usize>,
}

/// What stopped the copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapacityStop {
    /// A copy fits no node: its FailedScheduling message, and how many nodes gave each
    /// reason. Also a copy a Reserve or Permit plugin rejected (the plugin's message, no
    /// counts).
    Unschedulable {
        message: String,
        reason_counts: Vec<(String, usize)>,
    },
    /// A copy failed otherwise: a plugin error, or its binding cycle.
    Failed { message: String },
    /// `max_replicas` copies were placed.
    MaxReplicas(usize),
    /// More copies were placed than the nodes have pod slots in all
    /// (`status.allocatable.pods`, the number given): only a profile without
    /// NodeResourcesFit gets there, and nothing else would end the run.
    PodSlots(u64),
}

/// The answer: how many copies fit, on which nodes, and why no more.
#[derive(Debug, Clone)]
pub struct CapacityReport {
    pub namespace: String,
    /// The name of the pod copied.
    pub name: String,
    pub scheduler_name: String,
    /// How many copies were placed.
    pub replicas: usize,
    /// Per node that took copies, how many, by node name.
    pub nodes: Vec<(String, usize)>,
    pub stop: CapacityStop,
    /// The snapshot's pending pods, scheduled before the copies.
    pub pending: Report,
}

/// Why the pod cannot be copied.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    /// No profile schedules pods with the pod's `schedulerName`.
    #[error(
        "pod {pod}: spec.schedulerName {scheduler_name:?} is not a profile of this scheduler \
         (profiles: {profiles})"
    )]
    NoProfile {
        pod: String,
        scheduler_name: String,
        profiles: String,
    },
    /// A PreEnqueue plugin holds the pod back (scheduling gates, missing claims): no copy
    /// would ever reach a scheduling cycle.
    #[error("pod {pod} would never be scheduled: {message}")]
    HeldBack { pod: String, message: String },
}

impl Simulation {
    /// Schedules the pending pods of `input`, then copies of `template` until one does not
    /// fit (or `options` says stop), and reports how many fit and where.
    pub fn capacity(
        self,
        input: &ClusterInput,
        template: &Arc<Pod>,
        options: CapacityOptions,
    ) -> Result<CapacityReport, CapacityError> {
        let info = PodInfo::new(template.clone());
        let scheduler_name = super::scheduler_name(template);
        let Some(fwk) = self.sched.profile(&scheduler_name) else {
            let mut profiles = self.sched.profile_names();
            profiles.sort();
            return Err(CapacityError::NoProfile {
                pod: info.key.clone(),
                scheduler_name,
                profiles: profiles.join(", "),
            });
        };
        let held = fwk.run_pre_enqueue_plugins(&info);
        if !held.is_success() {
            return Err(CapacityError::HeldBack {
                pod: info.key.clone(),
                message: held.message(),
            });
        }

        let mut lp = self.sched.scheduling_loop();
        let pending = run(&self, &mut lp, input);
        // Copies take free room only: no nomination, no victims.
        lp.set_post_filter(false);

        let namespace = info.namespace().to_string();
        let base = info.name().to_string();
        let taken: HashSet<(&str, &str)> = input
            .pods
            .iter()
            .map(|p| {
                (
                    p.metadata.namespace.as_deref().unwrap_or("default"),
                    p.metadata.name.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        let slots = pod_slots(input);
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        let mut replicas = 0usize;
        let mut index = 0usize;
        let stop = loop {
            if options.max_replicas.is_some_and(|max| replicas >= max) {
                break CapacityStop::MaxReplicas(replicas);
            }
            if u64::try_from(replicas).unwrap_or(u64::MAX) > slots {
                break CapacityStop::PodSlots(slots);
            }
            let name = loop {
                let name = format!("{base}-{index}");
                index += 1;
                if !taken.contains(&(namespace.as_str(), name.as_str())) {
                    break name;
                }
            };
            self.cluster
                .apply_pod(copy_of(template, &namespace, name.clone()));
            let Some(outcome) = attempt_copy(&self, &mut lp, &namespace, &name) else {
                break CapacityStop::Failed {
                    message: format!("copy {namespace}/{name} never reached a scheduling cycle"),
                };
            };
            match outcome {
                Ok(node) => {
                    *per_node.entry(node).or_insert(0) += 1;
                    replicas += 1;
                }
                Err(stop) => break stop,
            }
        };
        Ok(CapacityReport {
            namespace,
            name: base,
            scheduler_name,
            replicas,
            nodes: per_node.into_iter().collect(),
            stop,
            pending,
        })
    }
}

/// Runs the cycles activeQ holds (the copy just added, normally alone there) and waits for
/// the binding; the copy's node, or why it stopped the run. `None` when no cycle was about
/// the copy.
fn attempt_copy(
    sim: &Simulation,
    lp: &mut crate::scheduler::SchedulingLoop,
    namespace: &str,
    name: &str,
) -> Option<Result<String, CapacityStop>> {
    let key = format!("{namespace}/{name}");
    let mut outcome = None;
    // Pods of the snapshot wait out a backoff that never ends (the clock stands still), so
    // activeQ holds the copy alone; the bound only guards against a requeue loop.
    for _ in 0..16 {
        let Some(a) = lp.schedule_one(None) else {
            break;
        };
        reject_waiting_pods(&sim.sched);
        sim.rt.block_on(sim.sched.wait_for_bindings());
        if a.pod.key != key {
            continue;
        }
        if let AttemptOutcome::Unschedulable {
            message,
            fit: Some(fit),
        } = &a.outcome
        {
            outcome = Some(Err(CapacityStop::Unschedulable {
                message: message.clone(),
                reason_counts: fit.reason_counts(),
            }));
            continue;
        }
        // Assumed (bound, or its binding cycle failed), rejected by Reserve or Permit, or
        // an error: the report of the attempt says which.
        let r = pod_report(
            &sim.cluster,
            sim.sched.extenders(),
            a,
            Explanation::default(),
        );
        let message = r
            .message
            .unwrap_or_else(|| format!("copy {key} was not bound"));
        outcome = Some(match (r.result, r.node) {
            (PodResult::Scheduled, Some(node)) => Ok(node),
            (PodResult::Unschedulable, _) => Err(CapacityStop::Unschedulable {
                message,
                reason_counts: r.reason_counts,
            }),
            _ => Err(CapacityStop::Failed { message }),
        });
    }
    outcome
}

/// Copy `name` of `template`: a new pod in `namespace`, pending, with a UID of its own.
fn copy_of(template: &Pod, namespace: &str, name: String) -> Pod {
    let mut pod = template.clone();
    pod.metadata.uid = Some(format!("kubesched-capacity-{namespace}-{name}"));
    pod.metadata.name = Some(name);
    pod.metadata.namespace = Some(namespace.to_string());
    pod.metadata.generate_name = None;
    pod.metadata.resource_version = None;
    pod.metadata.deletion_timestamp = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = None;
    }
    pod.status = None;
    pod
}

/// Pod slots of all nodes together (`status.allocatable.pods`; a node without it admits
/// none, as NodeResourcesFit counts it).
fn pod_slots(input: &ClusterInput) -> u64 {
    input
        .nodes
        .iter()
        .filter_map(|n| n.status.as_ref()?.allocatable.as_ref()?.get("pods"))
        .filter_map(|q| framework::quantity::parse_value(&q.0).ok())
        .map(|v| u64::try_from(v).unwrap_or(0))
        .fold(0u64, u64::saturating_add)
}

//! The scheduling loop: upstream's ScheduleOne. Pop a pod, pick its profile, refresh the
//! snapshot, run the scheduling cycle ([`crate::schedule_one::ScheduleAlgorithm`]), then
//! assume the pod, run Reserve and Permit, and start its binding task
//! ([`super::binding`]).
//!
//! Upstream: ScheduleOne and schedulingCycle in pkg/scheduler/schedule_one.go; the cycle's
//! algorithm (schedulePod, findNodesThatFitPod, prioritizeNodes) is
//! [`crate::schedule_one`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use framework::{CycleState, PodInfo, QueuedPodInfo, Snapshot, Status, WaitingPod};

use super::binding::BindingTask;
use super::handoff::Handoff;
use super::{scheduler_name, Attempt, AttemptOutcome, Shared, IDLE_WAKE};
use crate::runtime::Framework;
use crate::schedule_one::{Explanation, ScheduleAlgorithm, ScheduleError};

/// The scheduling loop: owns the snapshot and the algorithm (round-robin start, RNG).
pub struct SchedulingLoop {
    shared: Arc<Shared>,
    snapshot: Snapshot,
    algorithm: ScheduleAlgorithm,
    /// Picks the cycles whose plugin calls are timed.
    sampler: SmallRng,
    namespaces_version: u64,
    /// Binding cycles kept to be spawned together ([`super::handoff`]); used by
    /// [`run`](Self::run) only, so that a caller stepping the loop finds every binding
    /// cycle of a returned attempt spawned.
    handoff: Handoff<BindingTask>,
    grouped: bool,
}

impl std::fmt::Debug for SchedulingLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulingLoop")
            .field("nodes", &self.snapshot.num_nodes())
            .finish_non_exhaustive()
    }
}

impl SchedulingLoop {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        let mut algorithm = ScheduleAlgorithm::new(
            shared.options.seed,
            shared.options.percentage_of_nodes_to_score,
        );
        if !shared.options.extenders.is_empty() {
            algorithm.set_extenders(shared.options.extenders.clone(), shared.runtime.clone());
        }
        if shared.options.opportunistic_batching {
            algorithm.set_batching(Some(crate::runtime::batch::Batching::new(
                shared.clock.clone(),
                shared.metrics.clone(),
                shared.options.seed,
            )));
        }
        // An RNG of its own, so that sampling does not shift the tie-breaks.
        let sampler = SmallRng::seed_from_u64(shared.options.seed);
        SchedulingLoop {
            shared,
            snapshot: Snapshot::default(),
            algorithm,
            sampler,
            namespaces_version: u64::MAX,
            handoff: Handoff::default(),
            grouped: false,
        }
    }

    /// The snapshot of the last cycle.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Whether pods that fit no node go to the PostFilter plugins (preemption); on unless
    /// turned off here. Off, a cycle never nominates a pod nor evicts anything.
    pub fn set_post_filter(&mut self, enabled: bool) {
        self.algorithm.set_post_filter(enabled);
    }

    /// Runs until [`Scheduler::stop`], sleeping while activeQ is empty.
    pub fn run(mut self) {
        let decisions = self.shared.options.decisions.clone();
        self.grouped = true;
        while let Some(qpi) = self.pop_blocking() {
            let began = Instant::now();
            match &decisions {
                None => {
                    self.schedule_pod(qpi, None);
                }
                Some(log) => {
                    let mut explanation = Explanation::default();
                    let attempt = self.schedule_pod(qpi, Some(&mut explanation));
                    log.record_attempt(attempt, explanation, &self.snapshot);
                }
            }
            let runtime = &self.shared.runtime;
            self.handoff
                .cycle_done(began, Instant::now(), |g| spawn_group(runtime, g));
        }
        self.spawn_bindings();
    }

    /// Spawns the binding cycles kept in the group.
    fn spawn_bindings(&mut self) {
        let runtime = &self.shared.runtime;
        self.handoff.flush(|g| spawn_group(runtime, g));
    }

    fn pop_blocking(&mut self) -> Option<QueuedPodInfo> {
        let shared = self.shared.clone();
        let mut st = shared.state();
        loop {
            if shared.stopping.load(Ordering::Acquire) {
                return None;
            }
            shared.flush_locked(&mut st);
            if let Some(q) = st.queue.pop() {
                return Some(q);
            }
            if !self.handoff.is_empty() {
                // No pod to schedule now: the kept binding cycles go before the loop waits
                // (outside the lock, which their tasks take).
                drop(st);
                self.spawn_bindings();
                st = shared.state();
                continue;
            }
            let now = shared.clock.now();
            let wait = st
                .queue
                .next_backoff_expiry()
                .map_or(IDLE_WAKE, |t| t.saturating_duration_since(now))
                .clamp(Duration::from_millis(1), IDLE_WAKE);
            st = shared
                .wake
                .wait_timeout(st, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Takes the next pod from activeQ (without waiting) and runs its scheduling cycle;
    /// `None` when activeQ is empty. With `explain`, every plugin's verdict is recorded.
    pub fn schedule_one(&mut self, explain: Option<&mut Explanation>) -> Option<Attempt> {
        let qpi = {
            let mut st = self.shared.state();
            st.queue.pop()?
        };
        Some(self.schedule_pod(qpi, explain))
    }

    /// One scheduling cycle of a popped pod. Upstream: ScheduleOne + schedulingCycle.
    fn schedule_pod(&mut self, qpi: QueuedPodInfo, explain: Option<&mut Explanation>) -> Attempt {
        let shared = self.shared.clone();
        let pod = qpi.pod_info.clone();
        let key = pod.id.clone();
        let Some(fwk) = shared.profile_of(&pod).cloned() else {
            shared.state().queue.done(&key);
            let reason = format!(
                "schedulerName {:?} is not a profile of this scheduler",
                scheduler_name(&pod)
            );
            tracing::error!(pod = %pod.key, %reason, "skipping pod");
            return attempt(
                pod,
                scheduler_name_owned(&qpi),
                AttemptOutcome::Skipped { reason },
            );
        };
        let profile = fwk.profile_name().to_string();
        if pod.pod.metadata.deletion_timestamp.is_some() {
            shared.state().queue.done(&key);
            let reason = "pod is being deleted".to_string();
            return attempt(pod, profile, AttemptOutcome::Skipped { reason });
        }
        let started = shared.clock.now();
        self.refresh_snapshot();
        let mut state = CycleState::new();
        state.set_record_plugin_metrics(
            self.sampler.random_range(0..100u8) < shared.options.plugin_metrics_sample_percent,
        );
        let result = self
            .algorithm
            .schedule_pod(&fwk, &mut state, &pod, &self.snapshot, explain);
        let host = match result {
            Ok(r) => r.suggested_host,
            Err(ScheduleError::Fit(fit)) => {
                let message = fit.to_string();
                let mut qpi = qpi;
                qpi.unschedulable_plugins = fit.diagnosis.unschedulable_plugins.clone();
                qpi.pending_plugins = fit.diagnosis.pending_plugins.clone();
                let result = fit.diagnosis.post_filter_result.as_ref();
                if self.algorithm.post_filter() && fwk.has_post_filter_plugins() {
                    let victims = result.map_or(0, |r| r.victims.len());
                    shared.metrics.observe_preemption(victims);
                }
                let nomination = shared.preempt(&fwk, &pod, result);
                let status = Status::unschedulable(message.clone());
                shared.handle_failure_nominated(&fwk, qpi, &status, &message, started, nomination);
                return attempt(
                    pod,
                    profile,
                    AttemptOutcome::Unschedulable {
                        message,
                        fit: Some(fit),
                    },
                );
            }
            Err(ScheduleError::Internal(status)) => {
                let message = status.message();
                shared.handle_failure(&fwk, qpi, &status, &message, started);
                return attempt(pod, profile, AttemptOutcome::Error { message });
            }
        };
        self.assume_and_bind(fwk, state, qpi, host, started)
    }

    /// The snapshot as the next cycle sees it.
    #[cfg(test)]
    pub(super) fn refreshed_snapshot(&mut self) -> &Snapshot {
        self.refresh_snapshot();
        &self.snapshot
    }

    /// Brings the snapshot up to date with the cache (changed NodeInfos only) and the
    /// namespace, workload, PDB and storage listers.
    fn refresh_snapshot(&mut self) {
        let mut st = self.shared.state();
        st.cache.update_snapshot(&mut self.snapshot);
        if st.namespaces_version != self.namespaces_version {
            self.snapshot.set_namespace_labels(st.namespaces.clone());
            self.namespaces_version = st.namespaces_version;
        }
        self.snapshot.set_workloads(st.workloads.clone());
        self.snapshot.set_pdbs(st.pdb_list.clone());
        self.snapshot
            .set_storage(self.shared.storage.borrow().clone());
        self.algorithm.set_nominated_pods(st.queue.nominated_pods());
    }

    /// Assume, Reserve, Permit, then the binding task. Upstream: the tail of
    /// schedulingCycle and the start of bindingCycle.
    fn assume_and_bind(
        &mut self,
        fwk: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        host: String,
        started: Instant,
    ) -> Attempt {
        let shared = self.shared.clone();
        let pod = qpi.pod_info.clone();
        let profile = fwk.profile_name().to_string();
        let assumed = Arc::new(pod.with_node(&host));
        if let Err(e) = shared.state().cache.assume_pod(assumed.clone()) {
            // The cache refused: a bug or a race with the informer; retry later.
            let message = format!("assuming pod on node {host}: {e}");
            shared.handle_failure(
                &fwk,
                qpi,
                &Status::error(message.clone()),
                &message,
                started,
            );
            return attempt(pod, profile, AttemptOutcome::Error { message });
        }
        let s = fwk.run_reserve_plugins(&mut state, &assumed, &host);
        if !s.is_success() {
            fwk.run_unreserve_plugins(&mut state, &assumed, &host);
            return self.fail_after_assume(&fwk, qpi, &assumed, s, started);
        }
        let (s, waiting) = fwk.run_permit_plugins(&mut state, &assumed, &host);
        let verdict = if s.is_wait() {
            let (wp, rx) = WaitingPod::new(assumed.clone(), host.clone(), waiting);
            shared.waiting_pods.add(assumed.id.clone(), wp.clone());
            Some((wp, rx))
        } else if !s.is_success() {
            fwk.run_unreserve_plugins(&mut state, &assumed, &host);
            return self.fail_after_assume(&fwk, qpi, &assumed, s, started);
        } else {
            None
        };
        {
            let mut st = shared.state();
            st.queue.delete_nominated_pod_if_exists(&pod.pod);
        }
        shared.tasks.started();
        let task = BindingTask {
            shared: shared.clone(),
            fwk,
            state,
            qpi,
            assumed,
            node: host.clone(),
            started,
            permit: verdict,
        };
        // A pod waiting on Permit may be allowed by another pod's cycle: its binding cycle
        // (and those kept before it) start now.
        if self.grouped && task.permit.is_none() {
            let runtime = &shared.runtime;
            self.handoff
                .push(task, Instant::now(), |g| spawn_group(runtime, g));
        } else {
            self.spawn_bindings();
            shared.runtime.spawn(task.run());
        }
        attempt(pod, profile, AttemptOutcome::Assumed { node: host })
    }

    /// Reserve or Permit failed: forget the assumed pod and requeue.
    fn fail_after_assume(
        &self,
        fwk: &Framework,
        qpi: QueuedPodInfo,
        assumed: &Arc<PodInfo>,
        status: Status,
        started: Instant,
    ) -> Attempt {
        let shared = &self.shared;
        forget(shared, assumed);
        let message = status.message();
        let pod = qpi.pod_info.clone();
        let outcome = if status.is_rejected() {
            AttemptOutcome::Unschedulable {
                message: message.clone(),
                fit: None,
            }
        } else {
            AttemptOutcome::Error {
                message: message.clone(),
            }
        };
        shared.handle_failure(fwk, qpi, &status, &message, started);
        attempt(pod, fwk.profile_name().to_string(), outcome)
    }
}

/// Drops an assumed pod from the cache; `true` when it was there.
/// Starts a group of binding cycles, each its own task. A group of several is handed over
/// as one task that spawns them from a worker: the loop's thread then wakes one worker per
/// group (a syscall), and the others are woken, where needed, from the runtime.
fn spawn_group(runtime: &tokio::runtime::Handle, group: Vec<BindingTask>) {
    if group.len() == 1 {
        for t in group {
            runtime.spawn(t.run());
        }
        return;
    }
    runtime.spawn(async move {
        for t in group {
            tokio::spawn(t.run());
        }
    });
}

pub(super) fn forget(shared: &Shared, assumed: &PodInfo) -> bool {
    let uid = &assumed.id;
    match shared.state().cache.forget_pod(uid) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(pod = %assumed.key, error = %e, "forgetting assumed pod");
            false
        }
    }
}

/// The forgotten pod's resources are free again: as if an assigned pod had been deleted,
/// pods it kept out may try again (all but the pod itself).
pub(super) fn released(shared: &Shared, assumed: &PodInfo, except_itself: bool) {
    let key = &assumed.id;
    let obj = framework::EventObject::Pod(assumed.pod.clone());
    shared.state().queue.move_all_to_active_or_backoff_except(
        framework::ClusterEvent::new(
            framework::EventResource::AssignedPod,
            framework::ActionType::DELETE,
        ),
        Some(&obj),
        None,
        except_itself.then_some(key.as_str()),
    );
    shared.notify();
}

pub(super) fn attempt(pod: Arc<PodInfo>, profile: String, outcome: AttemptOutcome) -> Attempt {
    Attempt {
        pod,
        profile,
        outcome,
    }
}

pub(super) fn scheduler_name_owned(qpi: &QueuedPodInfo) -> String {
    scheduler_name(&qpi.pod_info).to_string()
}

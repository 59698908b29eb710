//! Carrying out a preemption that PostFilter proposed: evicting the victims and recording
//! the nomination, with the API writes on a task so that the loop never waits on them.
//!
//! Upstream: prepareCandidate and the asynchronous preemption of
//! pkg/scheduler/framework/preemption (SchedulerAsyncPreemption).

use std::sync::Arc;

use framework::{
    EventType, NominatingMode, Nomination, PodCondition, PodEvent, PodInfo, PodKey, PodRef,
    PodStatusUpdate, PostFilterResult,
};

use super::Shared;
use crate::runtime::Framework;

impl Shared {
    /// Carries out what PostFilter proposed for `pod` and returns the nomination to record.
    /// With a node: the victims are evicted (a waiting victim is rejected at Permit, the
    /// others deleted, each with a `Preempted` event) and pods of lower priority nominated
    /// to that node lose their nomination; the API writes run on a task, never on the loop
    /// (upstream: prepareCandidate, asynchronous as with SchedulerAsyncPreemption). Victims
    /// already being deleted are left out; when none is left, nothing is written but the
    /// nomination. With an empty node: a nomination the pod had is cleared.
    pub(super) fn preempt(
        self: &Arc<Self>,
        fwk: &Framework,
        pod: &PodInfo,
        result: Option<&PostFilterResult>,
    ) -> Nomination {
        let Some(r) = result.filter(|r| r.mode == NominatingMode::Override) else {
            return Nomination::Keep;
        };
        if r.nominated_node_name.is_empty() {
            let in_status = pod
                .pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            let in_queue = self.state().queue.nominated_node(&pod.pod).is_some();
            return if in_status || in_queue {
                Nomination::Clear
            } else {
                Nomination::Keep
            };
        }
        let node = r.nominated_node_name.clone();
        let preemptor_uid = pod.pod.metadata.uid.clone().unwrap_or_default();
        let mut deletions: Vec<(PodRef, PodKey)> = Vec::new();
        let mut events: Vec<PodEvent> = Vec::new();
        // A victim whose eviction already started (by an earlier preemptor whose room the
        // nominator keeps) is not evicted again: no second delete and no second `Preempted`
        // event naming this preemptor. The scheduler's own deletions count as started
        // before the cache shows their deletionTimestamp. Upstream: prepareCandidateAsync
        // skips victims with a deletionTimestamp.
        let evicting: Vec<&Arc<PodInfo>> = r
            .victims
            .iter()
            .filter(|v| {
                v.pod.metadata.deletion_timestamp.is_none()
                    && !self.preempting_pods.is_victim(&v.id)
            })
            .collect();
        if evicting.is_empty() {
            // Nothing to wait for but the deletions under way: the preemptor keeps its
            // nomination and is retried when pods leave the node, as upstream.
            tracing::debug!(pod = %pod.key, %node, "victims are already being evicted");
            return Nomination::Set(node);
        }
        // Victims to be deleted, as `PreemptingPods` keys them; a victim waiting at Permit is
        // rejected instead and is not terminating.
        let mut deleting: Vec<PodKey> = Vec::new();
        for victim in &evicting {
            let victim_ref = PodRef::of(&victim.pod);
            let rejected = self.waiting_pods.reject(
                &victim.id,
                plugins::names::DEFAULT_PREEMPTION,
                "preempted",
            );
            if !rejected {
                deletions.push((victim_ref.clone(), victim.id.clone()));
                deleting.push(victim.id.clone());
            }
            events.push(PodEvent {
                regarding: victim_ref,
                resource_version: victim.pod.metadata.resource_version.clone(),
                event_type: EventType::Normal,
                reason: "Preempted".into(),
                action: "Preempting".into(),
                message: format!("Preempted by pod {preemptor_uid} on node {node}"),
                reporting_controller: fwk.profile_name().to_string(),
            });
        }
        // Pods of lower priority nominated to the node may not fit there any more.
        let cleared: Vec<PodRef> = {
            let mut st = self.state();
            let lower: Vec<Arc<PodInfo>> = st
                .queue
                .nominated_pods_for_node(&node)
                .into_iter()
                .filter(|p| p.priority() < pod.priority())
                .collect();
            for p in &lower {
                st.queue.delete_nominated_pod_if_exists(&p.pod);
            }
            lower.iter().map(|p| PodRef::of(&p.pod)).collect()
        };
        tracing::debug!(pod = %pod.key, %node, victims = events.len(), "preempting");
        self.preempting_pods.add_victims(deleting);
        let preemptor = pod.id.clone();
        self.preempting_pods.start(&preemptor);
        let shared = self.clone();
        let client = self.client.clone();
        let profile = fwk.profile_name().to_string();
        let preempting = self.preempting_pods.clone();
        self.tasks.started();
        self.runtime.spawn(async move {
            // Victims are deleted in parallel, as upstream does.
            let mut deleting = tokio::task::JoinSet::new();
            for (victim, key) in deletions {
                let client = client.clone();
                let preempting = preempting.clone();
                let disruption = PodStatusUpdate {
                    pod: victim.clone(),
                    condition: Some(PodCondition {
                        type_: "DisruptionTarget".into(),
                        status: "True".into(),
                        reason: "PreemptionByScheduler".into(),
                        message: format!(
                            "{profile}: preempting to accommodate a higher priority pod"
                        ),
                    }),
                    nomination: Nomination::Keep,
                };
                deleting.spawn(async move {
                    // The condition is written, and answered, before the deletion is sent:
                    // the victim's controllers and disruption budgets see why it goes. As
                    // upstream, a victim already gone is left alone, and one that could not
                    // be marked is not deleted.
                    match client.update_pod_status_now(&disruption).await {
                        Ok(()) => {}
                        Err(e) => {
                            preempting.victim_gone(&key);
                            if !matches!(e, framework::ClientError::Api { code: 404, .. }) {
                                tracing::warn!(pod = %key, error = %e, "cannot mark preemption victim; not deleting it");
                            }
                            return Some(victim);
                        }
                    }
                    match client.delete_pod(&victim).await {
                        Ok(()) => None,
                        Err(e) => {
                            preempting.victim_gone(&key);
                            tracing::debug!(pod = %key, error = %e, "cannot delete preemption victim");
                            Some(victim)
                        }
                    }
                });
            }
            let mut not_preempted: Vec<PodRef> = Vec::new();
            while let Some(done) = deleting.join_next().await {
                if let Ok(Some(victim)) = done {
                    not_preempted.push(victim);
                }
            }
            // As upstream, only a victim actually preempted (deleted, or rejected while
            // waiting at Permit) gets the Preempted event.
            for event in events.iter().filter(|e| !not_preempted.contains(&e.regarding)) {
                if let Err(e) = client.record_event(event).await {
                    tracing::debug!(error = %e, reason = %event.reason, "cannot record event");
                }
            }
            for p in cleared {
                let update = PodStatusUpdate {
                    pod: p,
                    condition: None,
                    nomination: Nomination::Clear,
                };
                if let Err(e) = client.update_pod_status(&update).await {
                    tracing::debug!(error = %e, "cannot clear a nomination");
                }
            }
            // The victims are gone: the preemptor need not wait out its backoff (upstream
            // activates it when an asynchronous preemption ends).
            shared.preempting_pods.finish(&preemptor);
            let activated = shared.state().queue.activate(&preemptor);
            if activated {
                shared.notify();
            }
            shared.tasks.finished();
        });
        Nomination::Set(node)
    }
}

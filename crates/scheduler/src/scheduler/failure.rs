//! Reporting a failed scheduling attempt: the pod's `PodScheduled=False` condition, its
//! nomination and a `FailedScheduling` event, written off the loop; the pod goes back to the
//! queue.
//!
//! Upstream: handleSchedulingFailure in pkg/scheduler/schedule_one.go.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;

use framework::{
    EventType, Nomination, PodCondition, PodEvent, PodInfo, PodRef, PodStatusUpdate, QueuedPodInfo,
    Status,
};

use super::{truncate_message, Shared};
use crate::backend::queue::AttemptFailure;
use crate::metrics::AttemptResult;
use crate::runtime::Framework;

impl Shared {
    /// Writes the failure to the pod (condition, event) without waiting for the API.
    pub(super) fn report_failure(
        self: &Arc<Self>,
        fwk: &Framework,
        pod: &PodInfo,
        status: &Status,
        message: &str,
        nomination: Nomination,
    ) {
        let reason = if status.is_rejected() {
            "Unschedulable"
        } else {
            "SchedulerError"
        };
        let pod_ref = PodRef::of(&pod.pod);
        let update = PodStatusUpdate {
            pod: pod_ref.clone(),
            condition: Some(PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: reason.into(),
                message: message.to_string(),
            }),
            nomination,
        };
        let event = PodEvent {
            regarding: pod_ref,
            resource_version: pod.pod.metadata.resource_version.clone(),
            event_type: EventType::Warning,
            reason: "FailedScheduling".into(),
            action: "Scheduling".into(),
            message: truncate_message(message).to_string(),
            reporting_controller: fwk.profile_name().to_string(),
        };
        // As upstream's updatePod: a status the pod already shows is not written again, so
        // the pod keeps its version and the next failure's event joins this one's series.
        let update = changes_status(&pod.pod, &update).then_some(update);
        self.spawn_writes(update, event);
    }

    pub(super) fn spawn_writes(self: &Arc<Self>, update: Option<PodStatusUpdate>, event: PodEvent) {
        let shared = self.clone();
        let client = self.client.clone();
        shared.tasks.started();
        self.runtime.spawn(async move {
            if let Some(u) = update {
                if let Err(e) = client.update_pod_status(&u).await {
                    tracing::warn!(pod = %u.pod, error = %e, "cannot update pod status");
                }
            }
            if let Err(e) = client.record_event(&event).await {
                tracing::debug!(error = %e, reason = %event.reason, "cannot record event");
            }
            shared.tasks.finished();
        });
    }

    /// Hands a pod whose attempt failed back to the queue, and reports the failure.
    /// Upstream: handleSchedulingFailure.
    pub(super) fn handle_failure(
        self: &Arc<Self>,
        fwk: &Framework,
        qpi: QueuedPodInfo,
        status: &Status,
        message: &str,
        started: Instant,
    ) {
        self.handle_failure_nominated(fwk, qpi, status, message, started, Nomination::Keep);
    }

    /// [`handle_failure`](Self::handle_failure), also recording what PostFilter decided
    /// about the pod's nomination: in the queue's nominator at once (so the next cycles
    /// keep the room for it), and in the status write.
    pub(super) fn handle_failure_nominated(
        self: &Arc<Self>,
        fwk: &Framework,
        mut qpi: QueuedPodInfo,
        status: &Status,
        message: &str,
        started: Instant,
        nomination: Nomination,
    ) {
        let (result, failure) = if status.is_rejected() {
            (AttemptResult::Unschedulable, AttemptFailure::Rejected)
        } else {
            (AttemptResult::Error, AttemptFailure::Error)
        };
        if failure == AttemptFailure::Rejected && qpi.unschedulable_plugins.is_empty() {
            if let Some(p) = status.plugin() {
                if status.code() == framework::Code::Pending {
                    qpi.pending_plugins.insert(p);
                } else {
                    qpi.unschedulable_plugins.insert(p);
                }
            }
        }
        self.metrics.observe_attempt(
            fwk.profile_name(),
            result,
            self.clock.now().saturating_duration_since(started),
        );
        let pod = qpi.pod_info.clone();
        let deleted = {
            let mut st = self.state();
            let deleted = st.queue.is_deleted_in_flight(&pod.id);
            if let Err(e) = st.queue.add_unschedulable_if_not_present(qpi, failure) {
                tracing::warn!(pod = %pod.key, error = %e, "cannot requeue pod");
            }
            if !deleted {
                match &nomination {
                    Nomination::Set(node) => st.queue.add_nominated_pod(pod.clone(), Some(node)),
                    Nomination::Clear => st.queue.delete_nominated_pod_if_exists(&pod.pod),
                    Nomination::Keep => {}
                }
            }
            deleted
        };
        self.notify();
        if deleted {
            // Nothing to tell a pod that is gone.
            tracing::debug!(pod = %pod.key, %message, "pod deleted during its attempt");
            return;
        }
        tracing::debug!(pod = %pod.key, %message, "unable to schedule pod; waiting");
        self.report_failure(fwk, &pod, status, message, nomination);
    }
}

/// Whether `update` changes what `pod`'s status says: the condition's status, reason or
/// message, or the nominated node. Upstream: updatePod in schedule_one.go, which writes
/// nothing when neither the condition nor the nomination would change.
fn changes_status(pod: &Pod, update: &PodStatusUpdate) -> bool {
    let status = pod.status.as_ref();
    let condition_changes = update.condition.as_ref().is_some_and(|want| {
        let current = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == want.type_));
        current.is_none_or(|c| {
            c.status != want.status
                || c.reason.as_deref().unwrap_or("") != want.reason
                || c.message.as_deref().unwrap_or("") != want.message
        })
    });
    let nominated = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .unwrap_or("");
    let nomination_changes = match &update.nomination {
        Nomination::Keep => false,
        Nomination::Set(node) => nominated != node,
        Nomination::Clear => !nominated.is_empty(),
    };
    condition_changes || nomination_changes
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition as CoreCondition, PodStatus};
    use rstest::rstest;

    use super::*;

    fn pod(condition: Option<(&str, &str, &str)>, nominated: Option<&str>) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: condition.map(|(status, reason, message)| {
                    vec![CoreCondition {
                        type_: "PodScheduled".into(),
                        status: status.into(),
                        reason: Some(reason.into()),
                        message: Some(message.into()),
                        ..CoreCondition::default()
                    }]
                }),
                nominated_node_name: nominated.map(str::to_string),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    fn update(message: &str, nomination: Nomination) -> PodStatusUpdate {
        PodStatusUpdate {
            pod: PodRef::of(&Pod::default()),
            condition: Some(PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: "Unschedulable".into(),
                message: message.into(),
            }),
            nomination,
        }
    }

    const FULL: &str = "0/1 nodes are available: 1 Insufficient cpu.";

    #[rstest]
    #[case::no_condition_yet(pod(None, None), update(FULL, Nomination::Keep), true)]
    #[case::same_condition(pod(Some(("False", "Unschedulable", FULL)), None), update(FULL, Nomination::Keep), false)]
    #[case::new_message(pod(Some(("False", "Unschedulable", "0/1 nodes are available.")), None), update(FULL, Nomination::Keep), true)]
    #[case::new_reason(pod(Some(("False", "SchedulerError", FULL)), None), update(FULL, Nomination::Keep), true)]
    #[case::new_status(pod(Some(("True", "Unschedulable", FULL)), None), update(FULL, Nomination::Keep), true)]
    #[case::same_condition_new_nomination(pod(Some(("False", "Unschedulable", FULL)), Some("n1")), update(FULL, Nomination::Set("n2".into())), true)]
    #[case::same_condition_same_nomination(pod(Some(("False", "Unschedulable", FULL)), Some("n1")), update(FULL, Nomination::Set("n1".into())), false)]
    #[case::clearing_a_nomination(pod(Some(("False", "Unschedulable", FULL)), Some("n1")), update(FULL, Nomination::Clear), true)]
    #[case::clearing_no_nomination(pod(Some(("False", "Unschedulable", FULL)), None), update(FULL, Nomination::Clear), false)]
    fn a_failure_writes_the_status_only_when_it_changes(
        #[case] pod: Pod,
        #[case] update: PodStatusUpdate,
        #[case] writes: bool,
    ) {
        assert_eq!(changes_status(&pod, &update), writes);
    }
}

//! The binding cycle of one assumed pod, run as a task off the scheduling loop.
//!
//! Upstream: schedule_one.go (runBindingCycle / bindingCycle, extendersBinding,
//! handleBindingCycleError).

use std::sync::Arc;
use std::time::Instant;

use framework::{
    CycleState, EventType, PodEvent, PodInfo, PodRef, QueuedPodInfo, Status, WaitingPod,
};
use tokio::sync::oneshot;

use super::schedule_one::{forget, released};
use super::Shared;
use crate::config::format_go_duration;
use crate::extender::{self, wire::ExtenderBindingArgs};
use crate::metrics::AttemptResult;
use crate::runtime::Framework;

/// Everything the binding cycle of one pod needs, moved into its task.
pub(super) struct BindingTask {
    pub shared: Arc<Shared>,
    pub fwk: Arc<Framework>,
    pub state: CycleState,
    pub qpi: QueuedPodInfo,
    /// The pod with `spec.nodeName` set, as the cache assumed it.
    pub assumed: Arc<PodInfo>,
    pub node: String,
    /// When the scheduling attempt began.
    pub started: Instant,
    /// Set when a Permit plugin asked the pod to wait.
    pub permit: Option<(Arc<WaitingPod>, oneshot::Receiver<Status>)>,
}

impl BindingTask {
    pub async fn run(mut self) {
        let shared = self.shared.clone();
        let status = self.bind().await;
        if status.is_success() {
            self.succeeded();
        } else {
            self.failed(status);
        }
        shared.tasks.finished();
    }

    /// Permit wait, PreBind, Bind. Upstream: bindingCycle.
    async fn bind(&mut self) -> Status {
        if let Some((wp, rx)) = self.permit.take() {
            let s = wait_on_permit(&wp, rx).await;
            self.shared.waiting_pods.remove(&self.assumed.id);
            if !s.is_success() {
                return s;
            }
        }
        let s = self
            .fwk
            .run_pre_bind_plugins(&self.state, &self.assumed, &self.node)
            .await;
        if !s.is_success() {
            return s;
        }
        if let Some(s) = self.extenders_binding().await {
            return s;
        }
        let s = self
            .fwk
            .run_bind_plugins(&self.state, &self.assumed, &self.node)
            .await;
        if s.is_skip() {
            return Status::error(format!(
                "no Bind plugin of profile {:?} bound the pod",
                self.fwk.profile_name()
            ));
        }
        s
    }

    /// Binds through the binding extender when it is interested in the pod, instead of the
    /// Bind plugins; `None` when no extender binds this pod.
    async fn extenders_binding(&self) -> Option<Status> {
        let pod = &self.assumed.pod;
        let ext = extender::binder_for(&self.shared.options.extenders, pod)?;
        let args = ExtenderBindingArgs {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            node: self.node.clone(),
        };
        Some(match ext.bind(&args).await {
            Ok(()) => Status::success(),
            Err(e) => Status::error(extender::error_chain(&e)),
        })
    }

    fn succeeded(&self) {
        let shared = &self.shared;
        let key = &self.assumed.id;
        {
            let mut st = shared.state();
            if let Err(e) = st.cache.finish_binding(key) {
                tracing::debug!(pod = %self.assumed.key, error = %e, "finishing binding");
            }
            st.queue.done(key);
        }
        let now = shared.clock.now();
        shared.metrics.observe_attempt(
            self.fwk.profile_name(),
            AttemptResult::Scheduled,
            now.saturating_duration_since(self.started),
        );
        let first = self.qpi.initial_attempt_timestamp.unwrap_or(self.started);
        shared
            .metrics
            .observe_pod_scheduled(self.qpi.attempts, now.saturating_duration_since(first));
        self.fwk
            .run_post_bind_plugins(&self.state, &self.assumed, &self.node);
        let event = PodEvent {
            regarding: PodRef::of(&self.assumed.pod),
            resource_version: self.assumed.pod.metadata.resource_version.clone(),
            event_type: EventType::Normal,
            reason: "Scheduled".into(),
            action: "Binding".into(),
            message: format!(
                "Successfully assigned {} to {}",
                self.assumed.key, self.node
            ),
            reporting_controller: self.fwk.profile_name().to_string(),
        };
        shared.spawn_writes(None, event);
    }

    /// Unreserve, forget, requeue and report. Upstream: handleBindingCycleError.
    fn failed(mut self, status: Status) {
        let shared = self.shared.clone();
        self.fwk
            .run_unreserve_plugins(&mut self.state, &self.assumed, &self.node);
        let forgotten = forget(&shared, &self.assumed);
        let message = status.message();
        if forgotten && !status.is_rejected() {
            released(&shared, &self.assumed, false);
        }
        shared.handle_failure(&self.fwk, self.qpi, &status, &message, self.started);
        // A rejected pod is unschedulable itself: release after requeueing it, so that the
        // release does not count as an event that may help it.
        if forgotten && status.is_rejected() {
            released(&shared, &self.assumed, true);
        }
    }
}

/// Waits for the Permit verdict, rejecting the pod when the first plugin's timeout passes.
/// Upstream: WaitOnPermit.
async fn wait_on_permit(wp: &WaitingPod, mut rx: oneshot::Receiver<Status>) -> Status {
    let verdict = match wp.first_timeout() {
        Some((plugin, timeout)) => match tokio::time::timeout(timeout, &mut rx).await {
            Ok(v) => v,
            Err(_) => {
                let message = format!(
                    "rejected due to timeout after waiting {} at plugin {plugin}",
                    format_go_duration(timeout)
                );
                wp.reject_on_timeout(plugin, message);
                rx.await
            }
        },
        None => rx.await,
    };
    // A dropped sender cannot happen while the waiting pod lives; treat it as an error.
    verdict.unwrap_or_else(|_| Status::error("waiting pod dropped without a verdict"))
}

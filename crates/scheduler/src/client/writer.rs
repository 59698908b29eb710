//! [`KubeClusterClient`]: the scheduler's decisions written to the API server with kube-rs.
//!
//! Bindings go straight to `pods/{name}/binding`: they are the critical path. Status patches
//! and events are queued to one background worker through a bounded channel, so that the
//! trait call returns at once and a slow API server never delays a bind; when the queue is
//! full a write is dropped with a warning (a lost event is better than a stalled scheduler).
//! Every request first takes a token from a [`RateLimiter`] (`clientConnection.qps`/`burst`):
//! binds, deletes and status patches share one bucket, events have their own (upstream
//! builds a separate client for events, with its own limiter, so that events do not eat the
//! scheduler's request budget).
//!
//! Upstream: DefaultBinder (pkg/scheduler/framework/plugins/defaultbinder), updatePod in
//! schedule_one.go with util.PatchPodStatus, the events recorder of the scheduler's profiles,
//! and util.DeletePod for preemption victims.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use framework::{
    Binding, BoxFuture, ClientError, ClusterClient, Nomination, PodEvent, PodRef, PodStatusUpdate,
};
use k8s_openapi::api::core::v1::{
    Binding as CoreBinding, Event as CoreEvent, EventSource, ObjectReference, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::{client_error, RateLimiter};

/// Longest event message, in bytes; longer ones are cut (on a character boundary), as
/// upstream's event recorder cuts them.
pub const MAX_EVENT_MESSAGE_BYTES: usize = 1024;

/// How a [`KubeClusterClient`] writes.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Requests per second (`clientConnection.qps`); zero or less: unlimited.
    pub qps: f32,
    /// Requests allowed at once above the rate (`clientConnection.burst`).
    pub burst: u32,
    /// Status and event writes that may wait for the background worker.
    pub queue_capacity: usize,
    /// `reportingInstance` of the events written (the replica's identity).
    pub reporting_instance: String,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            qps: 50.0,
            burst: 100,
            // Enough for a burst of failed attempts of a large batch (each writes one status
            // and one event) while the API server is slow; beyond that, drop rather than grow.
            queue_capacity: 10_000,
            reporting_instance: super::leader::hostname(),
        }
    }
}

/// A write the background worker performs.
#[derive(Debug)]
enum BackgroundWrite {
    Status(PodStatusUpdate),
    Event(PodEvent),
}

/// The [`ClusterClient`] of `run` and `up`: kube-rs against a real (or the local) API server.
#[derive(Clone)]
pub struct KubeClusterClient {
    client: kube::Client,
    limiter: Arc<RateLimiter>,
    queue: mpsc::Sender<BackgroundWrite>,
    /// Writes dropped because the queue was full.
    dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for KubeClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterClient")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl KubeClusterClient {
    /// A client writing through `client`, with its background worker spawned on the current
    /// tokio runtime (the worker ends when the last clone of this client is dropped).
    ///
    /// # Panics
    /// Outside a tokio runtime (as `tokio::spawn`): a start-up mistake, not a cluster input.
    pub fn new(client: kube::Client, options: WriterOptions) -> Self {
        let limiter = Arc::new(RateLimiter::new(options.qps, options.burst));
        let event_limiter = RateLimiter::new(options.qps, options.burst);
        let (queue, rx) = mpsc::channel(options.queue_capacity.max(1));
        tokio::spawn(background_worker(
            client.clone(),
            limiter.clone(),
            event_limiter,
            options.reporting_instance,
            rx,
        ));
        KubeClusterClient {
            client,
            limiter,
            queue,
            dropped: Arc::default(),
        }
    }

    fn enqueue(&self, write: BackgroundWrite) -> Result<(), ClientError> {
        match self.queue.try_send(write) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(w)) => {
                // One warning per thousand drops: a flood of binds must not become a flood
                // of log lines too.
                let dropped = self
                    .dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if dropped % 1000 == 0 {
                    tracing::warn!(
                        dropped = dropped + 1,
                        "background write queue is full; dropping status and event writes"
                    );
                }
                tracing::debug!(write = ?w, "dropped");
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(ClientError::Transport(
                "the background writer has stopped".to_string(),
            )),
        }
    }
}

impl ClusterClient for KubeClusterClient {
    fn bind<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            bind(&self.client, binding).await
        })
    }

    fn update_pod_status<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        let r = self.enqueue(BackgroundWrite::Status(update.clone()));
        Box::pin(async move { r })
    }

    fn record_event<'a>(&'a self, event: &'a PodEvent) -> BoxFuture<'a, Result<(), ClientError>> {
        let r = self.enqueue(BackgroundWrite::Event(event.clone()));
        Box::pin(async move { r })
    }

    fn delete_pod<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.limiter.acquire().await;
            delete_pod(&self.client, pod).await
        })
    }
}

async fn background_worker(
    client: kube::Client,
    limiter: Arc<RateLimiter>,
    event_limiter: RateLimiter,
    reporting_instance: String,
    mut rx: mpsc::Receiver<BackgroundWrite>,
) {
    while let Some(write) = rx.recv().await {
        match &write {
            BackgroundWrite::Status(update) => {
                limiter.acquire().await;
                match patch_pod_status(&client, update).await {
                    Ok(()) => {}
                    // The pod is gone (deleted, preempted): nothing to update.
                    Err(ClientError::Api { code: 404, .. }) => {}
                    Err(e) => tracing::warn!(
                        pod = %format!("{}/{}", update.pod.namespace, update.pod.name),
                        error = %e,
                        "updating the pod's status failed"
                    ),
                }
            }
            BackgroundWrite::Event(event) => {
                event_limiter.acquire().await;
                // Events are best effort (upstream's recorder drops them too): a failure is
                // worth a debug line, not a warning on every shutdown.
                if let Err(e) = create_event(&client, event, &reporting_instance).await {
                    tracing::debug!(
                        pod = %format!("{}/{}", event.regarding.namespace, event.regarding.name),
                        reason = %event.reason,
                        error = %e,
                        "recording the event failed"
                    );
                }
            }
        }
    }
}

/// POSTs a Binding to `pods/{name}/binding`, with the pod's UID as precondition when known.
pub(crate) async fn bind(client: &kube::Client, binding: &Binding) -> Result<(), ClientError> {
    let body = CoreBinding {
        metadata: ObjectMeta {
            name: Some(binding.name.clone()),
            namespace: Some(binding.namespace.clone()),
            uid: binding.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(binding.node.clone()),
            ..ObjectReference::default()
        },
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &binding.namespace);
    // The answer is a Status; its content says nothing the code does not.
    pods.create_subresource::<_, Value>("binding", &binding.name, &PostParams::default(), &body)
        .await
        .map(drop)
        .map_err(client_error)
}

/// The strategic-merge patch of `pods/status` for `update`, or `None` when it changes
/// nothing. Conditions merge by `type`, so the pod's other conditions stay as they are.
pub(crate) fn status_patch(update: &PodStatusUpdate, now: Timestamp) -> Option<Value> {
    let mut status = Map::new();
    if let Some(c) = &update.condition {
        status.insert(
            "conditions".into(),
            json!([{
                "type": c.type_,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": Time(now),
            }]),
        );
    }
    match &update.nomination {
        Nomination::Keep => {}
        Nomination::Set(node) => {
            status.insert("nominatedNodeName".into(), json!(node));
        }
        Nomination::Clear => {
            status.insert("nominatedNodeName".into(), Value::Null);
        }
    }
    (!status.is_empty()).then(|| json!({ "status": status }))
}

/// Patches one condition and the nomination of a pod.
pub(crate) async fn patch_pod_status(
    client: &kube::Client,
    update: &PodStatusUpdate,
) -> Result<(), ClientError> {
    let Some(patch) = status_patch(update, Timestamp::now()) else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &update.pod.namespace);
    pods.patch_status(
        &update.pod.name,
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await
    .map(drop)
    .map_err(client_error)
}

/// `message` cut to at most `max` bytes, on a character boundary.
pub(crate) fn truncate_message(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// A name suffix unique within this process and increasing: the current time in nanoseconds
/// (as upstream's recorder names events), bumped when two events share a nanosecond.
fn unique_suffix(now: Timestamp) -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let nanos = u64::try_from(now.as_nanosecond()).unwrap_or(0);
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = nanos.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return format!("{next:x}"),
            Err(p) => prev = p,
        }
    }
}

/// The core/v1 Event for `event`, at `now`.
pub(crate) fn core_event(event: &PodEvent, reporting_instance: &str, now: Timestamp) -> CoreEvent {
    let pod = &event.regarding;
    CoreEvent {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", pod.name, unique_suffix(now))),
            namespace: Some(pod.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Pod".to_string()),
            namespace: Some(pod.namespace.clone()),
            name: Some(pod.name.clone()),
            uid: pod.uid.clone(),
            ..ObjectReference::default()
        },
        reason: Some(event.reason.clone()),
        message: Some(truncate_message(&event.message, MAX_EVENT_MESSAGE_BYTES).to_string()),
        type_: Some(event.event_type.as_str().to_string()),
        action: Some(event.action.clone()),
        reporting_component: Some(event.reporting_controller.clone()),
        reporting_instance: Some(reporting_instance.to_string()),
        source: Some(EventSource {
            component: Some(event.reporting_controller.clone()),
            host: None,
        }),
        // kubectl get events sorts and ages by lastTimestamp, describe shows it; eventTime is
        // what the events.k8s.io view requires.
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        ..CoreEvent::default()
    }
}

/// Creates the core/v1 Event for `event` in the pod's namespace.
pub(crate) async fn create_event(
    client: &kube::Client,
    event: &PodEvent,
    reporting_instance: &str,
) -> Result<(), ClientError> {
    let body = core_event(event, reporting_instance, Timestamp::now());
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), &event.regarding.namespace);
    events
        .create(&PostParams::default(), &body)
        .await
        .map(drop)
        .map_err(client_error)
}

/// Deletes a pod, with its UID as precondition when given.
pub(crate) async fn delete_pod(client: &kube::Client, pod: &PodRef) -> Result<(), ClientError> {
    let params = DeleteParams {
        preconditions: pod.uid.as_ref().map(|uid| Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    pods.delete(&pod.name, &params)
        .await
        .map(drop)
        .map_err(client_error)
}

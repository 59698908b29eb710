//! What the scheduler measures, through a recorder trait so that the core does not depend
//! on an exporter: `run` and `up` plug in the Prometheus recorder, tests a recording fake,
//! `simulate` nothing.
//!
//! Upstream: pkg/scheduler/metrics. Series names and labels follow upstream exactly (they are
//! what users' dashboards and alerts query); see each method.

use std::sync::Arc;
use std::time::Duration;

use framework::Code;

mod prometheus;

pub use prometheus::{PrometheusRecorder, CONTENT_TYPE};

/// The `result` label of attempt metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptResult {
    Scheduled,
    Unschedulable,
    Error,
}

impl AttemptResult {
    /// The label value: `scheduled`, `unschedulable`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

/// The `result` label of `scheduler_batch_attempts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchAttemptResult {
    /// The cycle got no hint.
    NoHint,
    /// The cycle placed its pod on the hint.
    HintUsed,
    /// The hint did not pass Filter; the cycle went through all nodes.
    HintNotUsed,
}

impl BatchAttemptResult {
    /// The label value: `no_hint`, `hint_used`, `hint_not_used`.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchAttemptResult::NoHint => "no_hint",
            BatchAttemptResult::HintUsed => "hint_used",
            BatchAttemptResult::HintNotUsed => "hint_not_used",
        }
    }
}

/// The `reason` label of `scheduler_batch_cache_flushed_total`: why a kept list was dropped
/// (see [`crate::runtime::batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchFlushReason {
    PodSkipped,
    PodNominated,
    NodeMissing,
    NodeNotFull,
    EmptyList,
    Expired,
    PodIncompatible,
    PodNotBatchable,
}

impl BatchFlushReason {
    /// The label value, as upstream spells it (`pod_skipped`, `node_not_full`).
    pub fn as_str(self) -> &'static str {
        match self {
            BatchFlushReason::PodSkipped => "pod_skipped",
            BatchFlushReason::PodNominated => "pod_nominated",
            BatchFlushReason::NodeMissing => "node_missing",
            BatchFlushReason::NodeNotFull => "node_not_full",
            BatchFlushReason::EmptyList => "empty_list",
            BatchFlushReason::Expired => "expired",
            BatchFlushReason::PodIncompatible => "pod_incompatible",
            BatchFlushReason::PodNotBatchable => "pod_not_batchable",
        }
    }
}

/// The `extension_point` label of the framework's duration metrics. Besides the extension
/// points of the configuration this names the operations run inside them that upstream
/// times apart (Unreserve, the PreFilter extensions, NormalizeScore), so it is a type of its
/// own rather than [`crate::runtime::ExtensionPoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionPointLabel {
    PreFilter,
    PreFilterExtensionAddPod,
    PreFilterExtensionRemovePod,
    Filter,
    PostFilter,
    PreScore,
    Score,
    ScoreExtensionNormalize,
    Reserve,
    Unreserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl ExtensionPointLabel {
    /// The label value, as upstream spells it (`PreFilter`, `ScoreExtensionNormalize`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionPointLabel::PreFilter => "PreFilter",
            ExtensionPointLabel::PreFilterExtensionAddPod => "PreFilterExtensionAddPod",
            ExtensionPointLabel::PreFilterExtensionRemovePod => "PreFilterExtensionRemovePod",
            ExtensionPointLabel::Filter => "Filter",
            ExtensionPointLabel::PostFilter => "PostFilter",
            ExtensionPointLabel::PreScore => "PreScore",
            ExtensionPointLabel::Score => "Score",
            ExtensionPointLabel::ScoreExtensionNormalize => "ScoreExtensionNormalize",
            ExtensionPointLabel::Reserve => "Reserve",
            ExtensionPointLabel::Unreserve => "Unreserve",
            ExtensionPointLabel::Permit => "Permit",
            ExtensionPointLabel::PreBind => "PreBind",
            ExtensionPointLabel::Bind => "Bind",
            ExtensionPointLabel::PostBind => "PostBind",
        }
    }
}

/// One plugin call timed in a cycle sampled for plugin metrics: the labels of
/// `scheduler_plugin_execution_duration_seconds` and the call's duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginSample {
    pub plugin: &'static str,
    pub extension_point: ExtensionPointLabel,
    pub status: Code,
    pub duration: Duration,
}

/// Sizes of the scheduling queue's sub-queues: the `queue` label of `scheduler_pending_pods`
/// is `active`, `backoff`, `unschedulable`, `gated`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingPods {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
}

/// The scheduler's measurements. Every method must be cheap and must not block: they are
/// called on the scheduling loop.
pub trait MetricsRecorder: Send + Sync + std::fmt::Debug {
    /// One scheduling attempt of a pod ended. Upstream series:
    /// `scheduler_schedule_attempts_total{result,profile}` (counter) and
    /// `scheduler_scheduling_attempt_duration_seconds{result,profile}` (histogram).
    fn observe_attempt(&self, profile: &str, result: AttemptResult, duration: Duration);

    /// A pod was bound after `attempts` attempts, `since_first_attempt` after its first
    /// attempt began. Upstream series: `scheduler_pod_scheduling_sli_duration_seconds{attempts}`
    /// (histogram) and `scheduler_pod_scheduling_attempts` (histogram of `attempts`).
    fn observe_pod_scheduled(&self, attempts: u32, since_first_attempt: Duration);

    /// The framework runtime ran an extension point for a pod (every run; Filter runs per
    /// node and is timed per plugin only). Upstream series:
    /// `scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`
    /// (histogram).
    fn observe_extension_point(
        &self,
        profile: &str,
        extension_point: ExtensionPointLabel,
        status: Code,
        duration: Duration,
    );

    /// The framework runtime ran one plugin at one extension point, in a cycle sampled for
    /// plugin metrics (see [`framework::CycleState::should_record_plugin_metrics`]).
    /// Upstream series: `scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}`
    /// (histogram). Called from the Score worker threads too.
    fn observe_plugin_execution(
        &self,
        plugin: &'static str,
        extension_point: ExtensionPointLabel,
        status: Code,
        duration: Duration,
    );

    /// Many plugin calls at once, in the order they ran: the Filter calls of a sampled
    /// cycle (one per plugin per node), buffered by the runtime and handed over once per
    /// Filter pass, so that a recorder can aggregate them instead of taking a lock per call.
    fn observe_plugin_executions(&self, samples: &[PluginSample]) {
        for s in samples {
            self.observe_plugin_execution(s.plugin, s.extension_point, s.status, s.duration);
        }
    }

    /// The queue's current sizes. Upstream series: `scheduler_pending_pods{queue}` (gauge).
    fn set_pending_pods(&self, pending: PendingPods);

    /// A pod entered a sub-queue because of `event`. Upstream series:
    /// `scheduler_queue_incoming_pods_total{queue,event}` (counter); `queue` is `active`,
    /// `backoff`, `unschedulable` or `gated`, `event` e.g. `PodAdd`, `NodeAdd`,
    /// `ScheduleAttemptFailure`, `BackoffComplete`, `UnschedulableTimeout`.
    fn inc_queue_incoming_pods(&self, queue: &'static str, event: &str);

    /// A preemption attempt ran and chose `victims` victims (0 when it found none).
    /// Upstream series: `scheduler_preemption_attempts_total` (counter) and
    /// `scheduler_preemption_victims` (histogram).
    fn observe_preemption(&self, victims: usize);

    /// The cache holds `nodes` nodes, `pods` pods of which `assumed_pods` are assumed.
    /// Upstream series: `scheduler_cache_size{type}` (gauge; `type` is `nodes`, `pods`,
    /// `assumed_pods`).
    fn set_cache_size(&self, nodes: usize, pods: usize, assumed_pods: usize);

    /// A background write (`kind` `status` or `event`) was given up: `reason` `queue_full`
    /// (no room to keep it) or `failed` (the API server refused it or could not be
    /// reached). Not an upstream series: `scheduler_background_writes_dropped_total{kind,reason}`
    /// (counter). Called from the writer's workers, not the scheduling loop.
    fn inc_background_writes_dropped(&self, _kind: &'static str, _reason: &'static str) {}

    /// A cycle of profile `profile` asked for a batch hint, or placed its pod after one.
    /// Upstream series: `scheduler_batch_attempts_total{profile,result}` (counter).
    fn inc_batch_attempt(&self, _profile: &str, _result: BatchAttemptResult) {}

    /// Profile `profile` dropped its kept batch. Upstream series:
    /// `scheduler_batch_cache_flushed_total{profile,reason}` (counter).
    fn inc_batch_cache_flushed(&self, _profile: &str, _reason: BatchFlushReason) {}
}

/// A recorder that drops everything (`simulate`, and tests that do not look at metrics).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopRecorder;

impl MetricsRecorder for NoopRecorder {
    fn observe_attempt(&self, _: &str, _: AttemptResult, _: Duration) {}
    fn observe_pod_scheduled(&self, _: u32, _: Duration) {}
    fn observe_extension_point(&self, _: &str, _: ExtensionPointLabel, _: Code, _: Duration) {}
    fn observe_plugin_execution(
        &self,
        _: &'static str,
        _: ExtensionPointLabel,
        _: Code,
        _: Duration,
    ) {
    }
    fn observe_plugin_executions(&self, _: &[PluginSample]) {}
    fn set_pending_pods(&self, _: PendingPods) {}
    fn inc_queue_incoming_pods(&self, _: &'static str, _: &str) {}
    fn observe_preemption(&self, _: usize) {}
    fn set_cache_size(&self, _: usize, _: usize, _: usize) {}
}

/// Two recorders as one: every measurement goes to both (the Prometheus exporter and,
/// say, a benchmark's own counters).
#[derive(Debug, Clone)]
pub struct Tee(pub Arc<dyn MetricsRecorder>, pub Arc<dyn MetricsRecorder>);

impl MetricsRecorder for Tee {
    fn observe_attempt(&self, profile: &str, result: AttemptResult, duration: Duration) {
        self.0.observe_attempt(profile, result, duration);
        self.1.observe_attempt(profile, result, duration);
    }
    fn observe_pod_scheduled(&self, attempts: u32, since_first_attempt: Duration) {
        self.0.observe_pod_scheduled(attempts, since_first_attempt);
        self.1.observe_pod_scheduled(attempts, since_first_attempt);
    }
    fn observe_extension_point(
        &self,
        profile: &str,
        extension_point: ExtensionPointLabel,
        status: Code,
        duration: Duration,
    ) {
        self.0
            .observe_extension_point(profile, extension_point, status, duration);
        self.1
            .observe_extension_point(profile, extension_point, status, duration);
    }
    fn observe_plugin_execution(
        &self,
        plugin: &'static str,
        extension_point: ExtensionPointLabel,
        status: Code,
        duration: Duration,
    ) {
        self.0
            .observe_plugin_execution(plugin, extension_point, status, duration);
        self.1
            .observe_plugin_execution(plugin, extension_point, status, duration);
    }
    fn observe_plugin_executions(&self, samples: &[PluginSample]) {
        self.0.observe_plugin_executions(samples);
        self.1.observe_plugin_executions(samples);
    }
    fn set_pending_pods(&self, pending: PendingPods) {
        self.0.set_pending_pods(pending);
        self.1.set_pending_pods(pending);
    }
    fn inc_queue_incoming_pods(&self, queue: &'static str, event: &str) {
        self.0.inc_queue_incoming_pods(queue, event);
        self.1.inc_queue_incoming_pods(queue, event);
    }
    fn observe_preemption(&self, victims: usize) {
        self.0.observe_preemption(victims);
        self.1.observe_preemption(victims);
    }
    fn set_cache_size(&self, nodes: usize, pods: usize, assumed_pods: usize) {
        self.0.set_cache_size(nodes, pods, assumed_pods);
        self.1.set_cache_size(nodes, pods, assumed_pods);
    }
    fn inc_background_writes_dropped(&self, kind: &'static str, reason: &'static str) {
        self.0.inc_background_writes_dropped(kind, reason);
        self.1.inc_background_writes_dropped(kind, reason);
    }
    fn inc_batch_attempt(&self, profile: &str, result: BatchAttemptResult) {
        self.0.inc_batch_attempt(profile, result);
        self.1.inc_batch_attempt(profile, result);
    }
    fn inc_batch_cache_flushed(&self, profile: &str, reason: BatchFlushReason) {
        self.0.inc_batch_cache_flushed(profile, reason);
        self.1.inc_batch_cache_flushed(profile, reason);
    }
}

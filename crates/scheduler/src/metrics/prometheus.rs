//! The Prometheus exporter: [`PrometheusRecorder`] keeps upstream's series in a
//! `prometheus-client` registry and encodes them for `/metrics`.
//!
//! Upstream: pkg/scheduler/metrics/metrics.go. Names, label names, help text (with the
//! `[STABLE]`/`[BETA]`/`[ALPHA]` prefix component-base adds) and histogram buckets are
//! upstream's, so dashboards and alerts written for kube-scheduler work unchanged.
//!
//! Recording is on the scheduling loop, so it allocates nothing once a label set has been
//! seen: fixed label values are `&'static str`, and the few free-form ones (profile and
//! event names) are interned once into shared `Arc<str>`s.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
    MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Metric, Registry};

use framework::Code;

use super::{
    AttemptResult, BatchAttemptResult, BatchFlushReason, ExtensionPointLabel, MetricsRecorder,
    PendingPods, PluginSample,
};

/// The content type of [`PrometheusRecorder::encode`]'s output.
///
/// `prometheus-client` writes OpenMetrics 1.0 text (counter families are declared without
/// their `_total` suffix, and the body ends with `# EOF`), so this is the honest label for
/// those bytes. Prometheus asks for OpenMetrics first in its default `Accept` header and picks
/// its parser from this header, so it scrapes the body correctly; calling the same bytes
/// `text/plain; version=0.0.4` would make the classic parser see `# TYPE x counter` followed
/// by samples named `x_total`, which it would not associate with their type.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upstream caps the `attempts` label of the SLI histogram here, to bound its cardinality.
const MAX_ATTEMPTS_LABEL: u32 = 15;

/// Upstream's `ExponentialBuckets(start, factor, count)`: each bound is the previous one
/// multiplied by `factor`. Computed the same way (repeated multiplication, not `powf`) so the
/// `le` bounds are the very same floating-point numbers kube-scheduler exposes.
fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    let mut buckets = Vec::with_capacity(count);
    let mut bound = start;
    for _ in 0..count {
        buckets.push(bound);
        bound *= factor;
    }
    buckets
}

/// 1 ms … ~16 s: `scheduling_attempt_duration_seconds`.
fn attempt_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// 10 ms … ~87 min: `pod_scheduling_sli_duration_seconds`.
fn sli_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

/// 0.1 ms … ~200 ms: `framework_extension_point_duration_seconds`.
fn extension_point_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 12))
}

/// Bounds of `plugin_execution_duration_seconds`: 0.01 ms … ~22 ms with factor 1.5.
const PLUGIN_BUCKETS: usize = 20;

fn plugin_execution_bounds() -> [f64; PLUGIN_BUCKETS] {
    let mut bounds = [0.0; PLUGIN_BUCKETS];
    for (b, v) in bounds
        .iter_mut()
        .zip(exponential_buckets(0.00001, 1.5, PLUGIN_BUCKETS))
    {
        *b = v;
    }
    bounds
}

/// The most nanoseconds a duration in the bucket bounded by `bound` seconds can have: the
/// whole bounds (10 µs, 15 µs, ...) are whole numbers of nanoseconds whatever the rounding
/// of the multiplication, the others are rounded down.
fn bound_nanos(bound: f64) -> u64 {
    let nanos = bound * 1e9;
    let whole = nanos.round();
    if (nanos - whole).abs() < 1e-6 {
        whole as u64
    } else {
        nanos.floor() as u64
    }
}

fn plugin_execution_histogram() -> BulkHistogram {
    BulkHistogram::new(&plugin_execution_bounds())
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Observations already sorted into a [`BulkHistogram`]'s buckets (the last one `+Inf`).
#[derive(Debug, Clone, Copy)]
struct Tally {
    buckets: [u64; PLUGIN_BUCKETS + 1],
    /// The sum of the observations, in nanoseconds.
    sum_nanos: u64,
    count: u64,
}

/// A histogram that takes a [`Tally`] under one lock: prometheus-client's `Histogram` takes
/// one value per lock, which the thousands of Filter calls of a sampled cycle cannot
/// afford. Encoded as that `Histogram` is (same bounds, `+Inf` last).
#[derive(Debug, Clone)]
struct BulkHistogram {
    inner: Arc<Mutex<BulkInner>>,
}

#[derive(Debug)]
struct BulkInner {
    sum: f64,
    count: u64,
    /// Upper bound and the count of observations in that bucket alone (the encoder makes
    /// them cumulative).
    buckets: Vec<(f64, u64)>,
}

impl BulkHistogram {
    fn new(bounds: &[f64]) -> Self {
        BulkHistogram {
            inner: Arc::new(Mutex::new(BulkInner {
                sum: 0.0,
                count: 0,
                buckets: bounds
                    .iter()
                    .copied()
                    .chain(std::iter::once(f64::MAX))
                    .map(|b| (b, 0))
                    .collect(),
            })),
        }
    }

    fn add(&self, tally: &Tally) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.sum += Duration::from_nanos(tally.sum_nanos).as_secs_f64();
        inner.count += tally.count;
        for ((_, n), add) in inner.buckets.iter_mut().zip(tally.buckets) {
            *n += add;
        }
    }
}

impl TypedMetric for BulkHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for BulkHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        encoder.encode_histogram::<NoLabelSet>(inner.sum, inner.count, &inner.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A free-form label value (profile or event name), shared so that building a label set on
/// the hot path is a reference-count increment, and escaped as OpenMetrics requires.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Name(Arc<str>);

impl EncodeLabelValue for Name {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// The `attempts` label: `1` … `14`, then `15+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Attempts(u32);

impl EncodeLabelValue for Attempts {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        if self.0 >= MAX_ATTEMPTS_LABEL {
            write!(encoder, "{MAX_ATTEMPTS_LABEL}+")
        } else {
            write!(encoder, "{}", self.0)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultProfile {
    result: &'static str,
    profile: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AttemptsLabel {
    attempts: Attempts,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ExtensionPointLabels {
    extension_point: &'static str,
    status: &'static str,
    profile: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PluginLabels {
    plugin: &'static str,
    extension_point: &'static str,
    status: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueueLabel {
    queue: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueueEventLabels {
    queue: &'static str,
    event: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindReason {
    kind: &'static str,
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProfileResult {
    profile: Name,
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProfileReason {
    profile: Name,
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TypeLabel {
    r#type: &'static str,
}

/// Interns profile and event names: both come from small, fixed sets (the configured
/// profiles, the scheduler's event names), so the set stays small and lookups by `&str`
/// allocate nothing after the first.
#[derive(Debug, Default)]
struct Names(RwLock<HashSet<Arc<str>>>);

impl Names {
    fn get(&self, name: &str) -> Name {
        // A panic elsewhere while holding the lock leaves the set intact: keep using it.
        if let Some(found) = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return Name(Arc::clone(found));
        }
        let mut names = self.0.write().unwrap_or_else(PoisonError::into_inner);
        // Another writer may have inserted it between the two locks.
        if let Some(found) = names.get(name) {
            return Name(Arc::clone(found));
        }
        let interned: Arc<str> = Arc::from(name);
        names.insert(Arc::clone(&interned));
        Name(interned)
    }
}

/// Gauges of one label family, created at start-up so every value is exposed (as upstream
/// does once it has set them) and set without a lookup.
#[derive(Debug)]
struct PendingGauges {
    active: Gauge,
    backoff: Gauge,
    unschedulable: Gauge,
    gated: Gauge,
}

#[derive(Debug)]
struct CacheGauges {
    nodes: Gauge,
    pods: Gauge,
    assumed_pods: Gauge,
}

/// The registered series, encoded with their help text exactly as given: the registry's own
/// `register` appends a period to every help string, which would make ours differ from
/// upstream's (some end without one, the others would end with two).
#[derive(Debug)]
struct UpstreamSeries(Vec<(&'static str, &'static str, Box<dyn Metric>)>);

impl Collector for UpstreamSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // As upstream, a labelled family with no series yet is not declared at all.
        for (name, help, metric) in self.0.iter().filter(|(_, _, m)| !m.is_empty()) {
            let metric_encoder =
                encoder.encode_descriptor(name, help, None, metric.metric_type())?;
            metric.encode(metric_encoder)?;
        }
        Ok(())
    }
}

/// [`MetricsRecorder`] backed by a `prometheus-client` registry holding upstream's series.
///
/// Upstream: pkg/scheduler/metrics (the series) and the `/metrics` handler of
/// cmd/kube-scheduler (see [`crate::serve`]).
#[derive(Debug)]
pub struct PrometheusRecorder {
    registry: Registry,
    names: Names,
    schedule_attempts: Family<ResultProfile, Counter>,
    scheduling_attempt_duration: HistogramFamily<ResultProfile>,
    pod_scheduling_sli_duration: HistogramFamily<AttemptsLabel>,
    pod_scheduling_attempts: Histogram,
    extension_point_duration: HistogramFamily<ExtensionPointLabels>,
    plugin_execution_duration: Family<PluginLabels, BulkHistogram, fn() -> BulkHistogram>,
    /// The bounds of `plugin_execution_duration`'s buckets in whole nanoseconds (rounded
    /// down), to tally a batch against without a division per sample.
    plugin_execution_bounds: [u64; PLUGIN_BUCKETS],
    pending: PendingGauges,
    queue_incoming_pods: Family<QueueEventLabels, Counter>,
    preemption_attempts: Counter,
    preemption_victims: Histogram,
    cache: CacheGauges,
    background_writes_dropped: Family<KindReason, Counter>,
    batch_attempts: Family<ProfileResult, Counter>,
    batch_cache_flushed: Family<ProfileReason, Counter>,
}

impl Default for PrometheusRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl PrometheusRecorder {
    /// A recorder with every series registered. Labelled families appear once their first
    /// series is recorded; the `pending_pods` and `cache_size` gauges start at 0.
    pub fn new() -> Self {
        let mut series: Vec<(&'static str, &'static str, Box<dyn Metric>)> = Vec::new();

        let schedule_attempts = Family::<ResultProfile, Counter>::default();
        // prometheus-client adds `_total` to counters itself: register the name without it.
        series.push((
            "schedule_attempts",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means \
             a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            Box::new(schedule_attempts.clone()),
        ));

        let scheduling_attempt_duration: HistogramFamily<ResultProfile> =
            Family::new_with_constructor(attempt_duration_histogram);
        series.push((
            "scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            Box::new(scheduling_attempt_duration.clone()),
        ));

        let preemption_victims = Histogram::new(exponential_buckets(1.0, 2.0, 7));
        series.push((
            "preemption_victims",
            "[STABLE] Number of selected preemption victims",
            Box::new(preemption_victims.clone()),
        ));

        let preemption_attempts = Counter::default();
        series.push((
            "preemption_attempts",
            "[STABLE] Total preemption attempts in the cluster till now",
            Box::new(preemption_attempts.clone()),
        ));

        let pending_pods = Family::<QueueLabel, Gauge>::default();
        series.push((
            "pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods \
             in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means \
             number of pods in unschedulablePods that the scheduler attempted to schedule and \
             failed; 'gated' is the number of unschedulable pods that the scheduler never \
             attempted to schedule because they are gated.",
            Box::new(pending_pods.clone()),
        ));
        let queue = |queue| pending_pods.get_or_create_owned(&QueueLabel { queue });
        let pending = PendingGauges {
            active: queue("active"),
            backoff: queue("backoff"),
            unschedulable: queue("unschedulable"),
            gated: queue("gated"),
        };

        let pod_scheduling_sli_duration: HistogramFamily<AttemptsLabel> =
            Family::new_with_constructor(sli_duration_histogram);
        series.push((
            "pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the \
             scheduling queue and might involve multiple scheduling attempts.",
            Box::new(pod_scheduling_sli_duration.clone()),
        ));

        let pod_scheduling_attempts = Histogram::new(exponential_buckets(1.0, 2.0, 5));
        series.push((
            "pod_scheduling_attempts",
            "[STABLE] Number of attempts to successfully schedule a pod.",
            Box::new(pod_scheduling_attempts.clone()),
        ));

        let extension_point_duration: HistogramFamily<ExtensionPointLabels> =
            Family::new_with_constructor(extension_point_histogram);
        series.push((
            "framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            Box::new(extension_point_duration.clone()),
        ));

        let plugin_execution_duration: Family<PluginLabels, BulkHistogram, fn() -> BulkHistogram> =
            Family::new_with_constructor(plugin_execution_histogram);
        series.push((
            "plugin_execution_duration_seconds",
            "[ALPHA] Duration for running a plugin at a specific extension point.",
            Box::new(plugin_execution_duration.clone()),
        ));

        let queue_incoming_pods = Family::<QueueEventLabels, Counter>::default();
        series.push((
            "queue_incoming_pods",
            "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            Box::new(queue_incoming_pods.clone()),
        ));

        let cache_size = Family::<TypeLabel, Gauge>::default();
        series.push((
            "cache_size",
            "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            Box::new(cache_size.clone()),
        ));
        let kind = |r#type| cache_size.get_or_create_owned(&TypeLabel { r#type });
        let cache = CacheGauges {
            nodes: kind("nodes"),
            pods: kind("pods"),
            assumed_pods: kind("assumed_pods"),
        };

        let background_writes_dropped = Family::<KindReason, Counter>::default();
        series.push((
            "background_writes_dropped",
            "Number of status and event writes the scheduler gave up, by kind (status, event) \
             and reason (queue_full, failed).",
            Box::new(background_writes_dropped.clone()),
        ));

        let batch_attempts = Family::<ProfileResult, Counter>::default();
        series.push((
            "batch_attempts",
            "[ALPHA] Counts of results when we attempt to use batching.",
            Box::new(batch_attempts.clone()),
        ));

        let batch_cache_flushed = Family::<ProfileReason, Counter>::default();
        series.push((
            "batch_cache_flushed",
            "[ALPHA] Counts of cache flushes by reason.",
            Box::new(batch_cache_flushed.clone()),
        ));

        let mut registry = Registry::with_prefix("scheduler");
        registry.register_collector(Box::new(UpstreamSeries(series)));
        PrometheusRecorder {
            registry,
            names: Names::default(),
            schedule_attempts,
            scheduling_attempt_duration,
            pod_scheduling_sli_duration,
            pod_scheduling_attempts,
            extension_point_duration,
            plugin_execution_duration,
            plugin_execution_bounds: plugin_execution_bounds().map(bound_nanos),
            pending,
            queue_incoming_pods,
            preemption_attempts,
            preemption_victims,
            cache,
            background_writes_dropped,
            batch_attempts,
            batch_cache_flushed,
        }
    }

    /// Every series in the OpenMetrics text format, ending with `# EOF`; serve it with
    /// [`CONTENT_TYPE`].
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; the crate's encoders only fail on writer errors.
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
            text.push_str("# EOF\n");
        }
        text
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl MetricsRecorder for PrometheusRecorder {
    fn observe_attempt(&self, profile: &str, result: AttemptResult, duration: Duration) {
        let labels = ResultProfile {
            result: result.as_str(),
            profile: self.names.get(profile),
        };
        self.schedule_attempts.get_or_create(&labels).inc();
        self.scheduling_attempt_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    fn observe_pod_scheduled(&self, attempts: u32, since_first_attempt: Duration) {
        self.pod_scheduling_attempts.observe(f64::from(attempts));
        self.pod_scheduling_sli_duration
            .get_or_create(&AttemptsLabel {
                attempts: Attempts(attempts.min(MAX_ATTEMPTS_LABEL)),
            })
            .observe(since_first_attempt.as_secs_f64());
    }

    fn observe_extension_point(
        &self,
        profile: &str,
        extension_point: ExtensionPointLabel,
        status: Code,
        duration: Duration,
    ) {
        let labels = ExtensionPointLabels {
            extension_point: extension_point.as_str(),
            status: status.as_str(),
            profile: self.names.get(profile),
        };
        self.extension_point_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    fn observe_plugin_execution(
        &self,
        plugin: &'static str,
        extension_point: ExtensionPointLabel,
        status: Code,
        duration: Duration,
    ) {
        self.observe_plugin_executions(&[PluginSample {
            plugin,
            extension_point,
            status,
            duration,
        }]);
    }

    /// Tallies the batch per label set first, so that each distinct label set is looked up
    /// and locked once per batch rather than once per call.
    fn observe_plugin_executions(&self, samples: &[PluginSample]) {
        let bounds = &self.plugin_execution_bounds;
        // A pass has a handful of distinct label sets (plugins × statuses): a short list
        // searched linearly beats hashing. Plugin names are compared by address, as they are
        // the plugins' own `&'static str`s; two addresses for one name only make two tallies
        // of one series.
        let mut tallies: Vec<(PluginSample, Tally)> = Vec::new();
        let same = |k: &PluginSample, s: &PluginSample| {
            std::ptr::eq(k.plugin, s.plugin)
                && k.extension_point == s.extension_point
                && k.status == s.status
        };
        // Filter calls come plugin after plugin on each node: the tally after the last one
        // used is the likeliest.
        let mut next = 0;
        for s in samples {
            let nanos = u64::try_from(s.duration.as_nanos()).unwrap_or(u64::MAX);
            // Most plugin calls end within the first bucket (10 µs).
            let bucket = if nanos <= bounds[0] {
                0
            } else {
                bounds.partition_point(|b| *b < nanos)
            };
            let hit = match tallies.get(next) {
                Some((k, _)) if same(k, s) => Some(next),
                _ => tallies.iter().position(|(k, _)| same(k, s)),
            };
            let i = match hit {
                Some(i) => i,
                None => {
                    tallies.push((
                        *s,
                        Tally {
                            buckets: [0; PLUGIN_BUCKETS + 1],
                            sum_nanos: 0,
                            count: 0,
                        },
                    ));
                    tallies.len() - 1
                }
            };
            next = i + 1;
            let t = &mut tallies[i].1;
            t.buckets[bucket] += 1;
            t.sum_nanos = t.sum_nanos.saturating_add(nanos);
            t.count += 1;
        }
        for (k, t) in &tallies {
            let labels = PluginLabels {
                plugin: k.plugin,
                extension_point: k.extension_point.as_str(),
                status: k.status.as_str(),
            };
            self.plugin_execution_duration.get_or_create(&labels).add(t);
        }
    }

    fn set_pending_pods(&self, pending: PendingPods) {
        self.pending.active.set(gauge_value(pending.active));
        self.pending.backoff.set(gauge_value(pending.backoff));
        self.pending
            .unschedulable
            .set(gauge_value(pending.unschedulable));
        self.pending.gated.set(gauge_value(pending.gated));
    }

    fn inc_queue_incoming_pods(&self, queue: &'static str, event: &str) {
        let labels = QueueEventLabels {
            queue,
            event: self.names.get(event),
        };
        self.queue_incoming_pods.get_or_create(&labels).inc();
    }

    fn observe_preemption(&self, victims: usize) {
        self.preemption_attempts.inc();
        // Upstream observes the victims of the candidate it picked and nothing when no
        // candidate was found; a picked candidate always has victims (a node that needs none
        // would have passed Filter), so 0 means "none found" and is not observed.
        if victims > 0 {
            self.preemption_victims.observe(victims as f64);
        }
    }

    fn set_cache_size(&self, nodes: usize, pods: usize, assumed_pods: usize) {
        self.cache.nodes.set(gauge_value(nodes));
        self.cache.pods.set(gauge_value(pods));
        self.cache.assumed_pods.set(gauge_value(assumed_pods));
    }

    fn inc_background_writes_dropped(&self, kind: &'static str, reason: &'static str) {
        self.background_writes_dropped
            .get_or_create(&KindReason { kind, reason })
            .inc();
    }

    fn inc_batch_attempt(&self, profile: &str, result: BatchAttemptResult) {
        let labels = ProfileResult {
            profile: self.names.get(profile),
            result: result.as_str(),
        };
        self.batch_attempts.get_or_create(&labels).inc();
    }

    fn inc_batch_cache_flushed(&self, profile: &str, reason: BatchFlushReason) {
        let labels = ProfileReason {
            profile: self.names.get(profile),
            reason: reason.as_str(),
        };
        self.batch_cache_flushed.get_or_create(&labels).inc();
    }
}

#[cfg(test)]
mod tests;

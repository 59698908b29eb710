//! The framework runtime: one [`Framework`] per profile, holding the plugins enabled at each
//! extension point and running them in order.
//!
//! Upstream: pkg/scheduler/framework/runtime/framework.go. Plugins are built once per
//! profile; Filter and Score fan out over nodes through the handle's parallelizer. The
//! runtime attributes every non-success status to the plugin that returned it.
//!
//! The runtime measures itself: every `run_*` of an extension point observes its duration
//! and status (`scheduler_framework_extension_point_duration_seconds`; Filter runs per node
//! and has no such series, as upstream), and in cycles sampled for plugin metrics
//! ([`CycleState::should_record_plugin_metrics`]) each plugin call is timed too
//! (`scheduler_plugin_execution_duration_seconds`). Unsampled cycles take no clock reading
//! per node. A sampled Filter pass is the bulk of those calls (one per plugin per node):
//! each is timed with the time-stamp counter, one reading per plugin boundary, into a
//! buffer of the thread running it ([`PluginSamples`]), and the buffer goes to the recorder
//! in one batch when its chunk is merged, so that no call takes a lock or hashes labels.
//!
//! Where this differs from upstream, on purpose: a Score plugin scores a run of nodes per
//! call (`score_nodes`), so a Score plugin sample is the duration of one call over a run of
//! nodes, not of one node. Upstream hands each observation to an asynchronous recorder;
//! here a batch is tallied on the thread that ran the pass.

pub mod batch;
mod build;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use framework::{
    Code, CycleState, FilterPlugin, Handle, NodeInfo, NodeRow, NodeScore, NodeToStatus, Plugin,
    PluginsRunner, PodInfo, PostFilterResult, PreFilterResult, QueuedPodInfo, Snapshot, Status,
    MAX_NODE_SCORE, MIN_NODE_SCORE,
};

use crate::metrics::{ExtensionPointLabel, MetricsRecorder, PluginSample};

pub use build::{BuildError, ExtensionPoint, PluginSetSpec, ProfileSpec};

/// The longest a Permit plugin may make a pod wait (upstream `maxTimeout`).
pub const MAX_PERMIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Score passes over fewer nodes than this run on the calling thread (measured:
/// docs/performance.md).
pub const PARALLEL_SCORE_MIN_NODES: usize = 1024;

/// A plugin's status as recorded for an explanation.
pub type PluginStatus = (&'static str, Status);

/// The plugins of one profile, by extension point, ready to run.
pub struct Framework {
    profile_name: String,
    percentage_of_nodes_to_score: Option<i32>,
    pre_enqueue: Vec<Arc<dyn Plugin>>,
    queue_sort: Vec<Arc<dyn Plugin>>,
    pre_filter: Vec<Arc<dyn Plugin>>,
    filter: Vec<Arc<dyn Plugin>>,
    post_filter: Vec<Arc<dyn Plugin>>,
    pre_score: Vec<Arc<dyn Plugin>>,
    /// Score plugins with their weights.
    score: Vec<(Arc<dyn Plugin>, i64)>,
    /// The PreFilter, Filter, PreScore and Score plugins, each once, when all of them can
    /// sign pods; `None` when one cannot, and the profile signs no pod.
    signers: Option<Vec<Arc<dyn Plugin>>>,
    /// The index in `signers` of the plugin that last refused a pod, asked first next time:
    /// where one plugin refuses most pods (default spreading constraints), a refusal then
    /// costs one call instead of every signature before it.
    last_refuser: std::sync::atomic::AtomicUsize,
    reserve: Vec<Arc<dyn Plugin>>,
    permit: Vec<Arc<dyn Plugin>>,
    pre_bind: Vec<Arc<dyn Plugin>>,
    bind: Vec<Arc<dyn Plugin>>,
    post_bind: Vec<Arc<dyn Plugin>>,
    /// Plugins enabled at the points that can reject a pod, for requeueing.
    enqueue_extension_plugins: Vec<Arc<dyn Plugin>>,
    handle: Handle,
    metrics: Arc<dyn MetricsRecorder>,
    /// Sample buffers of earlier sampled Filter passes, emptied and kept (at most
    /// [`SPARE_SAMPLE_BUFFERS`]): a pass writes its samples into memory already mapped instead
    /// of faulting in a megabyte of fresh pages.
    spare_samples: std::sync::Mutex<Vec<Vec<PluginSample>>>,
}

/// Buffers kept between sampled passes: one per chunk a wave runs at once on a small
/// machine, and the sequential pass's; buffers beyond these are freed.
const SPARE_SAMPLE_BUFFERS: usize = 4;

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &[Arc<dyn Plugin>]| v.iter().map(|p| p.name()).collect::<Vec<_>>();
        f.debug_struct("Framework")
            .field("profile", &self.profile_name)
            .field("pre_filter", &names(&self.pre_filter))
            .field("filter", &names(&self.filter))
            .field("pre_score", &names(&self.pre_score))
            .field(
                "score",
                &self
                    .score
                    .iter()
                    .map(|(p, w)| (p.name(), *w))
                    .collect::<Vec<_>>(),
            )
            .field("bind", &names(&self.bind))
            .finish_non_exhaustive()
    }
}

/// The result of the Score extension point for a list of nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScores {
    /// The score plugins that ran (those whose PreScore did not skip), in order.
    pub plugins: Vec<&'static str>,
    /// `nodes × plugins`, row-major: each plugin's score after NormalizeScore, before weight.
    pub scores: Vec<i64>,
    /// The weighted total of each node.
    pub totals: Vec<i64>,
}

impl NodeScores {
    /// The unweighted scores of node `i`, one per plugin.
    pub fn node(&self, i: usize) -> &[i64] {
        let n = self.plugins.len();
        &self.scores[i * n..(i + 1) * n]
    }
}

/// Pods nominated to nodes (by preemption), by node name: the Filter pass counts those of
/// equal or higher priority on their node.
pub type NominatedPods = HashMap<String, Vec<Arc<PodInfo>>>;

/// Filter calls timed in a cycle sampled for plugin metrics, in call order, until
/// [`ActiveFilters::record`] hands them to the recorder in one batch. Whoever runs filters
/// (each worker thread of a parallel pass) keeps its own, so timing a call takes no lock;
/// in unsampled cycles it stays empty.
#[derive(Debug, Default)]
pub struct PluginSamples(Vec<PluginSample>);

/// The Filter plugins of one cycle, in order (see [`Framework::active_filters`]), and the
/// nominated pods they must account for.
pub struct ActiveFilters<'a> {
    filters: Vec<(&'static str, &'a dyn FilterPlugin)>,
    nominated: Option<(&'a NominatedPods, &'a Framework)>,
    /// How plugin calls are timed when the cycle is sampled; `None` in unsampled cycles.
    timing: Option<FilterTiming<'a>>,
}

/// Where a sampled cycle's Filter calls are recorded, and the clock that times them.
#[derive(Clone, Copy)]
struct FilterTiming<'a> {
    recorder: &'a dyn MetricsRecorder,
    clock: &'static quanta::Clock,
    spare: &'a std::sync::Mutex<Vec<Vec<PluginSample>>>,
}

/// The clock of sampled Filter calls: the CPU's time-stamp counter where it is usable,
/// read in less than half the time `Instant::now` takes (12 against 30 ns on the
/// benchmark VM; a clock reading is most of what timing a Filter call costs); the monotonic clock otherwise. Calibrating it takes
/// from half a millisecond up to 200 ms, once per process: [`Framework::set_metrics`] does
/// it, so that the first sampled cycle does not.
fn filter_clock() -> &'static quanta::Clock {
    static CLOCK: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

impl<'a> ActiveFilters<'a> {
    /// Also counts `nominated` pods of equal or higher priority on their nodes, as upstream's
    /// RunFilterPluginsWithNominatedPods: a node must pass both with and without them.
    pub fn with_nominated(mut self, nominated: &'a NominatedPods, fwk: &'a Framework) -> Self {
        if !nominated.is_empty() {
            self.nominated = Some((nominated, fwk));
        }
        self
    }

    /// A buffer for the samples of filter runs on `nodes` nodes: sized for them in a
    /// sampled cycle, so that the pass does not grow it; empty otherwise.
    pub fn samples_for(&self, nodes: usize) -> PluginSamples {
        let Some(t) = self.timing else {
            return PluginSamples::default();
        };
        let mut buf = t
            .spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        buf.reserve(nodes * self.filters.len());
        PluginSamples(buf)
    }

    /// Hands the samples to the recorder in one batch and empties the buffer.
    pub fn record(&self, samples: &mut PluginSamples) {
        let Some(t) = self.timing else {
            samples.0.clear();
            return;
        };
        if !samples.0.is_empty() {
            t.recorder.observe_plugin_executions(&samples.0);
        }
        samples.0.clear();
        let mut spare = t.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.0.capacity() > 0 && spare.len() < SPARE_SAMPLE_BUFFERS {
            spare.push(std::mem::take(&mut samples.0));
        }
    }

    /// Whether [`run_rows`](Self::run_rows) may decide this cycle's nodes: no call is to be
    /// timed (an unsampled cycle) and no nominated pod is to be counted on any node.
    pub fn runs_rows(&self) -> bool {
        self.timing.is_none() && self.nominated.is_none()
    }

    /// Runs the filters over the nodes at the positions in `alive` (into `nodes` and
    /// `rows`), plugin by plugin: each plugin sees the nodes every earlier one passed, so a
    /// node's status is that of its first rejection, as in [`run`](Self::run). Passing
    /// positions stay in `alive`, in order; each rejected one is appended to `rejected`
    /// with its status. Only for a cycle where [`runs_rows`](Self::runs_rows) holds.
    pub fn run_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        alive: &mut Vec<u32>,
        rejected: &mut Vec<(u32, Status)>,
    ) {
        debug_assert!(self.runs_rows());
        for (name, f) in &self.filters {
            if alive.is_empty() {
                break;
            }
            let from = rejected.len();
            f.filter_rows(state, pod, nodes, rows, alive, rejected);
            for (_, s) in &mut rejected[from..] {
                *s = normalize_filter_status(std::mem::take(s), name);
            }
        }
    }

    /// Runs the filters on one node, stopping at the first rejection. `row` is the node's
    /// row in the snapshot (computed here when `None`). In a sampled cycle each call is
    /// timed into `samples`.
    pub fn run(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: Option<&NodeRow>,
        samples: &mut PluginSamples,
    ) -> Status {
        self.run_with_nominated(state, pod, node, row, None, samples)
    }

    /// Like [`run`](Self::run), recording each plugin's status in `out`.
    pub fn run_explained(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: Option<&NodeRow>,
        out: &mut Vec<PluginStatus>,
        samples: &mut PluginSamples,
    ) -> Status {
        self.run_with_nominated(state, pod, node, row, Some(out), samples)
    }

    fn run_with_nominated(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: Option<&NodeRow>,
        mut out: Option<&mut Vec<PluginStatus>>,
        samples: &mut PluginSamples,
    ) -> Status {
        if let Some((nominated, fwk)) = self.nominated {
            let priority = pod.priority();
            let pods: Vec<&Arc<PodInfo>> = nominated
                .get(node.name())
                .into_iter()
                .flatten()
                .filter(|p| p.priority() >= priority && p.key != pod.key)
                .collect();
            if !pods.is_empty() {
                let mut with_state = state.clone();
                let mut with_node = node.clone();
                for p in pods {
                    with_node.add_pod(p.clone());
                    let s =
                        fwk.run_pre_filter_extension_add_pod(&mut with_state, pod, p, &with_node);
                    if !s.is_success() {
                        return s;
                    }
                }
                let with_row = NodeRow::of(&with_node);
                let s = self.run_plain(
                    &with_state,
                    pod,
                    &with_node,
                    &with_row,
                    out.as_deref_mut(),
                    samples,
                );
                if !s.is_success() {
                    return s;
                }
                if let Some(o) = out.as_deref_mut() {
                    o.clear();
                }
            }
        }
        let fresh;
        let row = match row {
            Some(r) => r,
            None => {
                fresh = NodeRow::of(node);
                &fresh
            }
        };
        self.run_plain(state, pod, node, row, out, samples)
    }

    fn run_plain(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        row: &NodeRow,
        mut out: Option<&mut Vec<PluginStatus>>,
        samples: &mut PluginSamples,
    ) -> Status {
        // In a sampled cycle the clock is read once per plugin boundary: the reading that
        // ends one call starts the next. Unsampled cycles read no clock here.
        let clock = self.timing.map(|t| t.clock);
        let mut last = clock.map(quanta::Clock::raw);
        for (name, f) in &self.filters {
            let s = f.filter_with_row(state, pod, node, row);
            if let (Some(start), Some(clock)) = (last, clock) {
                let now = clock.raw();
                samples.0.push(PluginSample {
                    plugin: name,
                    extension_point: ExtensionPointLabel::Filter,
                    status: s.code(),
                    duration: clock.delta(start, now),
                });
                last = Some(now);
            }
            if !s.is_success() {
                let s = normalize_filter_status(s, name);
                if let Some(o) = out.as_deref_mut() {
                    o.push((name, s.clone()));
                }
                return s;
            }
            if let Some(o) = out.as_deref_mut() {
                o.push((name, s));
                // Keeping the explanation is not the next plugin's time.
                if let Some(clock) = clock {
                    last = Some(clock.raw());
                }
            }
        }
        Status::success()
    }
}

/// What the runtime hands PostFilter plugins: the profile's plugins with the cycle's
/// nominated pods, and the cycle's RNG (borrowed for the PostFilter call; a dry run is
/// sequential, so a `RefCell` suffices).
pub struct CycleRunner<'a> {
    fwk: &'a Framework,
    /// The cycle's filters (those whose PreFilter did not skip), with the nominated pods,
    /// resolved once for every dry run.
    filters: ActiveFilters<'a>,
    /// The dry runs' timed Filter calls, recorded when the runner is dropped.
    samples: std::cell::RefCell<PluginSamples>,
    nominated: &'a NominatedPods,
    rng: std::cell::RefCell<&'a mut dyn rand::RngCore>,
}

impl Drop for CycleRunner<'_> {
    fn drop(&mut self) {
        self.filters.record(self.samples.get_mut());
    }
}

impl<'a> CycleRunner<'a> {
    /// A runner for the cycle whose PreFilter produced `state`.
    pub fn new(
        fwk: &'a Framework,
        state: &CycleState,
        nominated: &'a NominatedPods,
        rng: &'a mut dyn rand::RngCore,
    ) -> Self {
        CycleRunner {
            fwk,
            filters: fwk.active_filters(state).with_nominated(nominated, fwk),
            samples: std::cell::RefCell::default(),
            nominated,
            rng: std::cell::RefCell::new(rng),
        }
    }
}

impl PluginsRunner for CycleRunner<'_> {
    fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        self.filters
            .run(state, pod, node, None, &mut self.samples.borrow_mut())
    }

    fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.fwk
            .run_pre_filter_extension_add_pod(state, pod, to_add, node)
    }

    fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.fwk
            .run_pre_filter_extension_remove_pod(state, pod, to_remove, node)
    }

    fn nominated_node_name(&self, pod: &PodInfo) -> Option<String> {
        self.nominated
            .iter()
            .find(|(_, pods)| pods.iter().any(|p| p.key == pod.key))
            .map(|(node, _)| node.clone())
    }

    fn random_index(&self, n: usize) -> usize {
        use rand::Rng;
        if n == 0 {
            return 0;
        }
        self.rng.borrow_mut().random_range(0..n)
    }
}

impl Framework {
    /// The profile's scheduler name (`schedulerName` of the pods it schedules).
    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// The profile's own `percentageOfNodesToScore`, if set.
    pub fn percentage_of_nodes_to_score(&self) -> Option<i32> {
        self.percentage_of_nodes_to_score
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    pub fn has_post_filter_plugins(&self) -> bool {
        !self.post_filter.is_empty()
    }

    /// Names of the plugins enabled at `point`, in run order.
    pub fn plugin_names(&self, point: ExtensionPoint) -> Vec<&'static str> {
        let list: Vec<&Arc<dyn Plugin>> = match point {
            ExtensionPoint::PreEnqueue => self.pre_enqueue.iter().collect(),
            ExtensionPoint::QueueSort => self.queue_sort.iter().collect(),
            ExtensionPoint::PreFilter => self.pre_filter.iter().collect(),
            ExtensionPoint::Filter => self.filter.iter().collect(),
            ExtensionPoint::PostFilter => self.post_filter.iter().collect(),
            ExtensionPoint::PreScore => self.pre_score.iter().collect(),
            ExtensionPoint::Score => self.score.iter().map(|(p, _)| p).collect(),
            ExtensionPoint::Reserve => self.reserve.iter().collect(),
            ExtensionPoint::Permit => self.permit.iter().collect(),
            ExtensionPoint::PreBind => self.pre_bind.iter().collect(),
            ExtensionPoint::Bind => self.bind.iter().collect(),
            ExtensionPoint::PostBind => self.post_bind.iter().collect(),
        };
        list.into_iter().map(|p| p.name()).collect()
    }

    /// Score plugins with their weights.
    pub fn score_weights(&self) -> Vec<(&'static str, i64)> {
        self.score.iter().map(|(p, w)| (p.name(), *w)).collect()
    }

    /// Plugins whose registered events can requeue pods they rejected.
    pub fn enqueue_extension_plugins(&self) -> &[Arc<dyn Plugin>] {
        &self.enqueue_extension_plugins
    }

    /// Runs PreEnqueue plugins; the first that does not succeed gates the pod.
    pub fn run_pre_enqueue_plugins(&self, pod: &PodInfo) -> Status {
        for pl in &self.pre_enqueue {
            if let Some(p) = pl.as_pre_enqueue() {
                let s = p.pre_enqueue(pod);
                if !s.is_success() {
                    return s.with_plugin(pl.name());
                }
            }
        }
        Status::success()
    }

    /// The profile's queue order: whether `a` goes before `b`.
    pub fn queue_sort_less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        match self.queue_sort.first().and_then(|p| p.as_queue_sort()) {
            Some(p) => p.less(a, b),
            None => false,
        }
    }

    /// Runs PreFilter plugins. Returns the merged node restriction, the overall status and the
    /// plugins that restricted the nodes. An `UnschedulableAndUnresolvable` stops at once; an
    /// `Unschedulable` lets the others run (so that preemption sees their state) and is
    /// returned at the end. Plugins returning Skip have their Filter skipped this cycle.
    pub fn run_pre_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        explain: Option<&mut Vec<PluginStatus>>,
    ) -> (Option<PreFilterResult>, Status, Vec<&'static str>) {
        let start = Instant::now();
        let out = self.pre_filter_plugins(state, pod, snapshot, explain);
        self.observe_point(ExtensionPointLabel::PreFilter, out.1.code(), start);
        out
    }

    fn pre_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        mut explain: Option<&mut Vec<PluginStatus>>,
    ) -> (Option<PreFilterResult>, Status, Vec<&'static str>) {
        let record = state.should_record_plugin_metrics();
        let mut skip = Vec::new();
        let mut result: Option<PreFilterResult> = None;
        let mut with_nodes: Vec<&'static str> = Vec::new();
        let mut returned = Status::success();
        for pl in &self.pre_filter {
            let Some(p) = pl.as_pre_filter() else {
                continue;
            };
            let start = self.plugin_start(record);
            let (r, s) = p.pre_filter(state, pod, snapshot);
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::PreFilter, s.code());
            if let Some(e) = explain.as_deref_mut() {
                e.push((pl.name(), s.clone().with_plugin(pl.name())));
            }
            if s.is_skip() {
                skip.push(pl.name());
                continue;
            }
            if !s.is_success() {
                let s = s.with_plugin(pl.name());
                match s.code() {
                    Code::UnschedulableAndUnresolvable => {
                        state.set_skip_filter_plugins(skip);
                        return (None, s, Vec::new());
                    }
                    Code::Unschedulable => {
                        returned = s;
                        continue;
                    }
                    _ => {
                        state.set_skip_filter_plugins(skip);
                        return (
                            None,
                            Status::error(format!(
                                "running PreFilter plugin {:?}: {}",
                                pl.name(),
                                s.message()
                            ))
                            .with_plugin(pl.name()),
                            Vec::new(),
                        );
                    }
                }
            }
            if let Some(r) = r {
                if !r.all_nodes() {
                    with_nodes.push(pl.name());
                }
                let merged = match result.take() {
                    None => r,
                    Some(prev) => prev.merge(Some(r)),
                };
                let empty = merged.node_names.as_ref().is_some_and(|n| n.is_empty());
                result = Some(merged);
                if empty {
                    let mut sorted = with_nodes.clone();
                    sorted.sort_unstable();
                    let msg = if let [only] = sorted.as_slice() {
                        format!("node(s) didn't satisfy plugin {only}")
                    } else {
                        format!(
                            "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                            sorted.join(" ")
                        )
                    };
                    state.set_skip_filter_plugins(skip);
                    return (result, Status::unresolvable(msg), with_nodes);
                }
            }
        }
        state.set_skip_filter_plugins(skip);
        (result, returned, with_nodes)
    }

    /// The Filter plugins that run this cycle (those whose PreFilter did not skip), resolved
    /// once so that the per-node loop does no name comparisons.
    pub fn active_filters(&self, state: &CycleState) -> ActiveFilters<'_> {
        let skip = state.skip_filter_plugins();
        ActiveFilters {
            filters: self
                .filter
                .iter()
                .filter(|p| !skip.contains(&p.name()))
                .filter_map(|p| p.as_filter().map(|f| (p.name(), f)))
                .collect(),
            nominated: None,
            timing: state.should_record_plugin_metrics().then(|| FilterTiming {
                recorder: self.metrics.as_ref(),
                clock: filter_clock(),
                spare: &self.spare_samples,
            }),
        }
    }

    /// Tells every PreFilter plugin (with extensions, not skipped this cycle) that `to_add`
    /// runs on `node`. Upstream: RunPreFilterExtensionAddPod.
    pub fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.run_pre_filter_extensions(state, PreFilterExtension::AddPod, |ext, state| {
            ext.add_pod(state, pod, to_add, node)
        })
    }

    /// Tells every PreFilter plugin (with extensions, not skipped this cycle) that
    /// `to_remove` left `node`. Upstream: RunPreFilterExtensionRemovePod.
    pub fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.run_pre_filter_extensions(state, PreFilterExtension::RemovePod, |ext, state| {
            ext.remove_pod(state, pod, to_remove, node)
        })
    }

    /// Runs `call` on the PreFilter extensions of every PreFilter plugin not skipped this
    /// cycle, stopping at the first failure (reported as an error naming `op`).
    fn run_pre_filter_extensions(
        &self,
        state: &mut CycleState,
        op: PreFilterExtension,
        call: impl Fn(&dyn framework::PreFilterExtensions, &mut CycleState) -> Status,
    ) -> Status {
        let (op, label) = match op {
            PreFilterExtension::AddPod => ("AddPod", ExtensionPointLabel::PreFilterExtensionAddPod),
            PreFilterExtension::RemovePod => (
                "RemovePod",
                ExtensionPointLabel::PreFilterExtensionRemovePod,
            ),
        };
        let record = state.should_record_plugin_metrics();
        for pl in &self.pre_filter {
            if state.skip_filter_plugins().contains(&pl.name()) {
                continue;
            }
            let Some(ext) = pl.as_pre_filter().and_then(|p| p.pre_filter_extensions()) else {
                continue;
            };
            let start = self.plugin_start(record);
            let s = call(ext, state);
            self.observe_plugin(start, pl.name(), label, s.code());
            if !s.is_success() {
                return Status::error(format!(
                    "running {op} on PreFilter plugin {:?}: {}",
                    pl.name(),
                    s.message()
                ))
                .with_plugin(pl.name());
            }
        }
        Status::success()
    }

    /// `pod`'s scheduling signature: the pod's scheduler name and every signer's fragments.
    /// `None` when the profile does not sign pods, a plugin refuses this one, or the pod
    /// has fields that did not parse (the plugin that reads them reports on the pod, in a
    /// cycle of its own). Upstream: frameworkImpl.SignPod.
    pub fn sign_pod(&self, pod: &PodInfo) -> Option<framework::PodSignature> {
        let signers = self.signers.as_ref()?;
        if !pod.parse_errors.is_empty() {
            return None;
        }
        // Plugin `i`'s fragments, or `None` when it refuses the pod (remembered).
        let sign = |i: usize, p: &Arc<dyn Plugin>| {
            let signer = p.as_sign()?;
            match signer.sign_pod(pod) {
                Ok(parts) => Some(parts),
                Err(s) => {
                    tracing::trace!(pod = %pod.key, plugin = p.name(), status = %s.message(), "pod not signable");
                    self.last_refuser.store(i, Ordering::Relaxed);
                    None
                }
            }
        };
        // Whether a pod is signable, and its signature, do not depend on the order the
        // plugins are asked in: the one that refused last goes first.
        let first = self.last_refuser.load(Ordering::Relaxed).min(signers.len());
        let first_parts = match signers.get(first) {
            Some(p) => sign(first, p)?,
            None => Vec::new(),
        };
        let mut fragments = std::collections::BTreeMap::new();
        fragments.insert(
            framework::sign::SCHEDULER_NAME_SIGNER,
            serde_json::Value::from(crate::scheduler::scheduler_name(pod)),
        );
        for f in first_parts {
            fragments.insert(f.key, f.value);
        }
        for (i, p) in signers.iter().enumerate().filter(|(i, _)| *i != first) {
            for f in sign(i, p)? {
                fragments.insert(f.key, f.value);
            }
        }
        Some(framework::PodSignature::from_fragments(fragments))
    }

    /// Whether the profile signs pods at all (every PreFilter, Filter, PreScore and Score
    /// plugin can sign).
    pub fn signs_pods(&self) -> bool {
        self.signers.is_some()
    }

    /// Runs Filter plugins on one node, stopping at the first rejection.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let filters = self.active_filters(state);
        let mut samples = filters.samples_for(1);
        let s = filters.run(state, pod, node, None, &mut samples);
        filters.record(&mut samples);
        s
    }

    /// Like [`run_filter_plugins`](Self::run_filter_plugins), recording each plugin's status.
    pub fn run_filter_plugins_explained(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        out: &mut Vec<PluginStatus>,
    ) -> Status {
        let filters = self.active_filters(state);
        let mut samples = filters.samples_for(1);
        let s = filters.run_explained(state, pod, node, None, out, &mut samples);
        filters.record(&mut samples);
        s
    }

    /// Runs PostFilter plugins until one succeeds, errors or is unresolvable; otherwise
    /// collects the reasons of all.
    pub fn run_post_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        runner: &dyn PluginsRunner,
    ) -> (Option<PostFilterResult>, Status) {
        let start = Instant::now();
        let out = self.post_filter_plugins(state, pod, snapshot, statuses, runner);
        self.observe_point(ExtensionPointLabel::PostFilter, out.1.code(), start);
        out
    }

    fn post_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        runner: &dyn PluginsRunner,
    ) -> (Option<PostFilterResult>, Status) {
        let record = state.should_record_plugin_metrics();
        let mut result = None;
        let mut reasons: Vec<String> = Vec::new();
        let mut rejector: Option<&'static str> = None;
        for pl in &self.post_filter {
            let Some(p) = pl.as_post_filter() else {
                continue;
            };
            let start = self.plugin_start(record);
            let (r, s) = p.post_filter(state, pod, snapshot, statuses, runner);
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::PostFilter, s.code());
            if s.is_success() {
                return (r, s);
            }
            if s.code() == Code::UnschedulableAndUnresolvable {
                return (r, s.with_plugin(pl.name()));
            }
            if !s.is_rejected() {
                return (None, Status::error(s.message()).with_plugin(pl.name()));
            }
            if let Some(r) = r {
                if r.mode != framework::NominatingMode::Noop {
                    result = Some(r);
                }
            }
            reasons.extend(s.reasons().iter().map(|r| r.to_string()));
            rejector.get_or_insert(pl.name());
        }
        let mut s = Status::with_reasons(Code::Unschedulable, reasons);
        if let Some(r) = rejector {
            s = s.with_plugin(r);
        }
        (result, s)
    }

    /// Runs PreScore plugins over the feasible nodes. Plugins returning Skip have their Score
    /// skipped this cycle.
    pub fn run_pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
        explain: Option<&mut Vec<PluginStatus>>,
    ) -> Status {
        let start = Instant::now();
        let s = self.pre_score_plugins(state, pod, snapshot, nodes, explain);
        self.observe_point(ExtensionPointLabel::PreScore, s.code(), start);
        s
    }

    fn pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
        mut explain: Option<&mut Vec<PluginStatus>>,
    ) -> Status {
        let record = state.should_record_plugin_metrics();
        let mut skip = Vec::new();
        for pl in &self.pre_score {
            let Some(p) = pl.as_pre_score() else { continue };
            let start = self.plugin_start(record);
            let s = p.pre_score(state, pod, snapshot, nodes);
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::PreScore, s.code());
            if let Some(e) = explain.as_deref_mut() {
                e.push((pl.name(), s.clone().with_plugin(pl.name())));
            }
            if s.is_skip() {
                skip.push(pl.name());
                continue;
            }
            if !s.is_success() {
                state.set_skip_score_plugins(skip);
                return Status::error(format!(
                    "running PreScore plugin {:?}: {}",
                    pl.name(),
                    s.message()
                ))
                .with_plugin(pl.name());
            }
        }
        state.set_skip_score_plugins(skip);
        Status::success()
    }

    /// Runs Score (in parallel over nodes), NormalizeScore and weights.
    pub fn run_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<NodeScores, Status> {
        let rows: Vec<NodeRow> = nodes.iter().map(|n| NodeRow::of(n)).collect();
        self.run_score_plugins_with_rows(state, pod, nodes, &rows)
    }

    /// [`run_score_plugins`](Self::run_score_plugins) with the nodes' rows as the filter
    /// pass collected them (`rows[i] == NodeRow::of(&nodes[i])`).
    pub fn run_score_plugins_with_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
    ) -> Result<NodeScores, Status> {
        if rows.len() != nodes.len() {
            return Err(Status::error(format!(
                "running Score plugins: {} rows for {} nodes",
                rows.len(),
                nodes.len()
            )));
        }
        let start = Instant::now();
        let out = self.score_plugins(state, pod, nodes, rows);
        let code = match &out {
            Ok(_) => Code::Success,
            Err(s) => s.code(),
        };
        self.observe_point(ExtensionPointLabel::Score, code, start);
        out
    }

    fn score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
    ) -> Result<NodeScores, Status> {
        let record = state.should_record_plugin_metrics();
        let skip = state.skip_score_plugins();
        let plugins: Vec<(&Arc<dyn Plugin>, i64)> = self
            .score
            .iter()
            .filter(|(p, _)| !skip.contains(&p.name()))
            .map(|(p, w)| (p, *w))
            .collect();
        let np = plugins.len();
        let n = nodes.len();
        // Plugin-major: `raw[j * n + i]` is plugin j's score of node i, so that each plugin
        // scores a run of nodes in one call (its state looked up once, its code hot).
        let mut raw = vec![0i64; n * np];
        let score_run = |range: std::ops::Range<usize>, cols: &mut [i64]| {
            let len = range.len();
            for (j, (pl, _)) in plugins.iter().enumerate() {
                let Some(p) = pl.as_score() else { continue };
                let out = &mut cols[j * len..(j + 1) * len];
                let start = self.plugin_start(record);
                let r = p.score_rows(state, pod, &nodes[range.clone()], &rows[range.clone()], out);
                if start.is_some() {
                    let code = r.as_ref().map_or_else(|s| s.code(), |()| Code::Success);
                    self.observe_plugin(start, pl.name(), ExtensionPointLabel::Score, code);
                }
                r.map_err(|s| {
                    Status::error(format!(
                        "running Score plugins: plugin {:?} failed with: {}",
                        pl.name(),
                        s.message()
                    ))
                    .with_plugin(pl.name())
                })?;
            }
            Ok::<(), Status>(())
        };
        let parallel = self.handle.parallelizer.threads() > 1 && n >= PARALLEL_SCORE_MIN_NODES;
        if np > 0 && n > 0 && !parallel {
            score_run(0..n, &mut raw)?;
        } else if np > 0 && n > 0 {
            // Each chunk's columns, with the chunk's range.
            let chunks = self.handle.parallelizer.map_chunks(n, |range| {
                let mut cols = vec![0i64; range.len() * np];
                let r = score_run(range.clone(), &mut cols).map(|()| cols);
                (range, r)
            });
            for (range, cols) in chunks {
                let cols = cols?;
                let len = range.len();
                for j in 0..np {
                    raw[j * n + range.start..j * n + range.end]
                        .copy_from_slice(&cols[j * len..(j + 1) * len]);
                }
            }
        }
        // NormalizeScore, plugin by plugin.
        for (j, (pl, _)) in plugins.iter().enumerate() {
            let Some(ext) = pl.as_score().and_then(|p| p.score_extensions()) else {
                continue;
            };
            let mut list: Vec<NodeScore<'_>> = nodes
                .iter()
                .enumerate()
                .map(|(i, node)| NodeScore {
                    node,
                    score: raw[j * n + i],
                })
                .collect();
            let start = self.plugin_start(record);
            let s = ext.normalize_score(state, pod, &mut list);
            self.observe_plugin(
                start,
                pl.name(),
                ExtensionPointLabel::ScoreExtensionNormalize,
                s.code(),
            );
            if !s.is_success() {
                return Err(Status::error(format!(
                    "running Normalize on Score plugins: plugin {:?} failed with: {}",
                    pl.name(),
                    s.message()
                ))
                .with_plugin(pl.name()));
            }
            for (i, ns) in list.iter().enumerate() {
                raw[j * n + i] = ns.score;
            }
        }
        let mut totals = vec![0i64; n];
        let mut scores = vec![0i64; n * np];
        for (j, (pl, w)) in plugins.iter().enumerate() {
            for (i, total) in totals.iter_mut().enumerate() {
                let s = raw[j * n + i];
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(&s) {
                    return Err(Status::error(format!(
                        "applying score defaultWeights on Score plugins: plugin {:?} returns an invalid score {s}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        pl.name()
                    )));
                }
                *total += s * w;
                scores[i * np + j] = s;
            }
        }
        Ok(NodeScores {
            plugins: plugins.iter().map(|(p, _)| p.name()).collect(),
            scores,
            totals,
        })
    }

    /// Runs Reserve plugins; on failure the caller runs [`run_unreserve_plugins`](Self::run_unreserve_plugins).
    pub fn run_reserve_plugins(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let start = Instant::now();
        let s = self.reserve_plugins(state, pod, node);
        self.observe_point(ExtensionPointLabel::Reserve, s.code(), start);
        s
    }

    fn reserve_plugins(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let record = state.should_record_plugin_metrics();
        for pl in &self.reserve {
            let Some(p) = pl.as_reserve() else { continue };
            let start = self.plugin_start(record);
            let s = p.reserve(state, pod, node);
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::Reserve, s.code());
            if !s.is_success() {
                return rejection_or_error(s, "Reserve", pl.name());
            }
        }
        Status::success()
    }

    /// Runs Unreserve of every Reserve plugin, in reverse order.
    pub fn run_unreserve_plugins(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        let start = Instant::now();
        let record = state.should_record_plugin_metrics();
        for pl in self.reserve.iter().rev() {
            if let Some(p) = pl.as_reserve() {
                let plugin_start = self.plugin_start(record);
                p.unreserve(state, pod, node);
                self.observe_plugin(
                    plugin_start,
                    pl.name(),
                    ExtensionPointLabel::Unreserve,
                    Code::Success,
                );
            }
        }
        self.observe_point(ExtensionPointLabel::Unreserve, Code::Success, start);
    }

    /// Runs Permit plugins. When some plugin waits (and none rejects), returns `Wait` and
    /// the waiting plugins with their timeouts (capped at [`MAX_PERMIT_TIMEOUT`]).
    pub fn run_permit_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Status, Vec<(&'static str, Duration)>) {
        let start = Instant::now();
        let out = self.permit_plugins(state, pod, node);
        self.observe_point(ExtensionPointLabel::Permit, out.0.code(), start);
        out
    }

    fn permit_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Status, Vec<(&'static str, Duration)>) {
        let record = state.should_record_plugin_metrics();
        let mut waiting: Vec<(&'static str, Duration)> = Vec::new();
        for pl in &self.permit {
            let Some(p) = pl.as_permit() else { continue };
            let start = self.plugin_start(record);
            let (s, t) = p.permit(state, pod, node);
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::Permit, s.code());
            if s.is_success() {
                continue;
            }
            if s.is_wait() {
                waiting.push((pl.name(), t.min(MAX_PERMIT_TIMEOUT)));
                continue;
            }
            if s.is_rejected() {
                return (s.with_plugin(pl.name()), Vec::new());
            }
            return (
                Status::error(format!(
                    "running Permit plugin {:?}: {}",
                    pl.name(),
                    s.message()
                ))
                .with_plugin(pl.name()),
                Vec::new(),
            );
        }
        if waiting.is_empty() {
            (Status::success(), waiting)
        } else {
            (
                Status::new(
                    Code::Wait,
                    format!(
                        "one or more plugins asked to wait and no plugin rejected pod {:?}",
                        pod.name()
                    ),
                ),
                waiting,
            )
        }
    }

    /// Runs PreBind plugins in order.
    pub async fn run_pre_bind_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Status {
        let start = Instant::now();
        let s = self.pre_bind_plugins(state, pod, node).await;
        self.observe_point(ExtensionPointLabel::PreBind, s.code(), start);
        s
    }

    async fn pre_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let record = state.should_record_plugin_metrics();
        for pl in &self.pre_bind {
            let Some(p) = pl.as_pre_bind() else { continue };
            let start = self.plugin_start(record);
            let s = p.pre_bind(state, pod, node).await;
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::PreBind, s.code());
            if !s.is_success() {
                return rejection_or_error(s, "PreBind", pl.name());
            }
        }
        Status::success()
    }

    /// Runs Bind plugins until one does not Skip.
    pub async fn run_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let start = Instant::now();
        let s = self.bind_plugins(state, pod, node).await;
        self.observe_point(ExtensionPointLabel::Bind, s.code(), start);
        s
    }

    async fn bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let record = state.should_record_plugin_metrics();
        let mut last = Status::skip();
        for pl in &self.bind {
            let Some(p) = pl.as_bind() else { continue };
            let start = self.plugin_start(record);
            let s = p.bind(state, pod, node).await;
            self.observe_plugin(start, pl.name(), ExtensionPointLabel::Bind, s.code());
            if s.is_skip() {
                last = s;
                continue;
            }
            if !s.is_success() {
                return rejection_or_error(s, "Bind", pl.name());
            }
            return s;
        }
        last
    }

    /// Runs PostBind plugins (informational).
    pub fn run_post_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        let start = Instant::now();
        let record = state.should_record_plugin_metrics();
        for pl in &self.post_bind {
            if let Some(p) = pl.as_post_bind() {
                let plugin_start = self.plugin_start(record);
                p.post_bind(state, pod, node);
                self.observe_plugin(
                    plugin_start,
                    pl.name(),
                    ExtensionPointLabel::PostBind,
                    Code::Success,
                );
            }
        }
        self.observe_point(ExtensionPointLabel::PostBind, Code::Success, start);
    }

    /// Records the durations of extension points and (in sampled cycles) plugins through
    /// `metrics`.
    pub fn set_metrics(&mut self, metrics: Arc<dyn MetricsRecorder>) {
        filter_clock();
        self.metrics = metrics;
    }

    /// Records that `point` ran from `start` until now and ended with `code`.
    fn observe_point(&self, point: ExtensionPointLabel, code: Code, start: Instant) {
        self.metrics
            .observe_extension_point(&self.profile_name, point, code, start.elapsed());
    }

    /// When the cycle is sampled (`record`), the start of a plugin call.
    fn plugin_start(&self, record: bool) -> Option<Instant> {
        record.then(Instant::now)
    }

    /// Records the plugin call that began at `start` (nothing in an unsampled cycle).
    fn observe_plugin(
        &self,
        start: Option<Instant>,
        plugin: &'static str,
        point: ExtensionPointLabel,
        code: Code,
    ) {
        if let Some(start) = start {
            self.metrics
                .observe_plugin_execution(plugin, point, code, start.elapsed());
        }
    }

    /// Every plugin name in the profile.
    pub fn all_plugin_names(&self) -> BTreeSet<&'static str> {
        [
            &self.pre_enqueue,
            &self.queue_sort,
            &self.pre_filter,
            &self.filter,
            &self.post_filter,
            &self.pre_score,
            &self.reserve,
            &self.permit,
            &self.pre_bind,
            &self.bind,
            &self.post_bind,
        ]
        .into_iter()
        .flatten()
        .map(|p| p.name())
        .chain(self.score.iter().map(|(p, _)| p.name()))
        .collect()
    }
}

/// The PreFilter extension an operation calls, for its error message and metric label.
#[derive(Debug, Clone, Copy)]
enum PreFilterExtension {
    AddPod,
    RemovePod,
}

/// A failed status from `point`: rejections keep their code and reasons; anything else
/// becomes an Error naming the extension point and the plugin, as upstream words it.
fn rejection_or_error(s: Status, point: &str, plugin: &'static str) -> Status {
    if s.is_rejected() {
        s.with_plugin(plugin)
    } else {
        Status::error(format!(
            "running {point} plugin {plugin:?}: {}",
            s.message()
        ))
        .with_plugin(plugin)
    }
}

/// Filter plugins may only reject; anything else becomes an Error naming the plugin.
fn normalize_filter_status(s: Status, plugin: &'static str) -> Status {
    if s.is_rejected() {
        s.with_plugin(plugin)
    } else {
        Status::error(format!("running {plugin:?} filter plugin: {}", s.message()))
            .with_plugin(plugin)
    }
}

#[cfg(test)]
mod tests;

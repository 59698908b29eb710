//! The driver of a run, and `--mode in-process`: the workload drives the scheduler directly.
//! A [`MemoryCluster`] is both the scheduler's event source and its API client; the
//! scheduling loop runs on its own thread ([`Scheduler::start`]) with the default profile,
//! the real in-tree plugins and the real clock; binding tasks run on a tokio runtime.
//! `--mode http` ([`crate::http`]) plugs the local API server and `run`'s code path into the
//! same driver through [`Target`], and `--scheduler-command` ([`crate::external`]) the local
//! API server and another scheduler process.
//!
//! The run, as upstream's scheduler_perf: create the nodes; create the initial pods and wait
//! until they are bound; then create the measured pods as fast as possible (from a thread of
//! their own, while the loop schedules) with the workload's churn running meanwhile, and
//! sample every second how many of them are bound.
//!
//! **Invariant:** every wait has a deadline; a run that exceeds its budget ends as
//! [`RunStatus::TimedOut`], the scheduler is stopped and its threads joined.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use plugins::Registry;
use scheduler::config::{self, KubeSchedulerConfiguration};
use scheduler::features::FeatureGates;
use scheduler::memory::MemoryCluster;
use scheduler::source::{Change, ObjectEvent};
use scheduler::{Scheduler, SchedulerBuilder};

use crate::http::ClientLimits;
use crate::objects::{self, Object};
use crate::recorder::BenchRecorder;
use crate::report::{Latency, Report, RunStatus, Throughput};
use crate::workload::{Churn, ChurnMode, Count, Sizes, Workload};
use crate::{peak_rss, BenchError, Phase, Progress};

/// How often the bound-pod count is polled (samples are still taken once a second).
const POLL: Duration = Duration::from_millis(5);

/// Measured pods are created in chunks of this many, so that a timed-out run stops soon.
const CREATE_CHUNK: usize = 500;

/// The namespace churned objects live in.
const CHURN_NAMESPACE: &str = "churn";

/// How long the scheduler may take to finish its binding tasks after the run.
const DRAIN: Duration = Duration::from_secs(10);

/// A final partial interval counts as a sample only when it lasted at least this long
/// (or when there is no full second at all), so that a few pods bound in the last
/// milliseconds do not make an outlier.
const MIN_PARTIAL_SAMPLE: Duration = Duration::from_millis(500);

/// Settings of a run.
#[derive(Clone)]
pub struct RunOptions {
    /// Budget of the whole run (initial pods included).
    pub timeout: Duration,
    /// Whether the scheduler records every attempt, explained (the web view's decision
    /// log), as `up` does by default.
    pub record_decisions: bool,
    /// The scheduler kubesched runs (in-process and http modes).
    pub scheduler: SchedulerSetup,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(300),
            record_decisions: false,
            scheduler: SchedulerSetup::default(),
        }
    }
}

/// The scheduler kubesched runs for a workload: a configuration (upstream's default
/// profile when none is given), the plugins it may name, its feature gates, and the client
/// limits it runs with against an API server.
#[derive(Clone, Default)]
pub struct SchedulerSetup {
    /// The configuration and where it came from (a file path, for messages).
    pub config: Option<(KubeSchedulerConfiguration, String)>,
    /// The plugins the configuration may name; the in-tree ones when `None`.
    pub registry: Option<Registry>,
    pub feature_gates: FeatureGates,
    /// Replace the configuration's clientConnection qps and burst in `--mode http` and in
    /// the configuration written for `--scheduler-command` (no client in-process).
    pub client: ClientLimits,
}

impl SchedulerSetup {
    /// A user's configuration (`source` names it in messages). The workloads' pods are
    /// default-scheduler's, so a configuration without that profile is refused. Returns
    /// the warnings to show: client QPS and burst the file sets, which the benchmark
    /// replaces with `client` in http mode.
    pub fn with_config(
        config: KubeSchedulerConfiguration,
        source: impl Into<String>,
        registry: Registry,
        feature_gates: FeatureGates,
        client: ClientLimits,
    ) -> Result<(SchedulerSetup, Vec<String>), BenchError> {
        let source = source.into();
        if !config
            .profiles
            .iter()
            .any(|p| p.scheduler_name() == config::defaults::SCHEDULER_NAME)
        {
            return Err(BenchError::Setup(format!(
                "{source}: no profile has schedulerName {:?}, the scheduler of the \
                 workloads' pods",
                config::defaults::SCHEDULER_NAME
            )));
        }
        let mut warnings = Vec::new();
        let cc = &config.client_connection;
        let set = cc.qps != config::defaults::QPS || cc.burst != config::defaults::BURST;
        if set && (cc.qps != client.qps || cc.burst != client.burst) {
            let why = if client == ClientLimits::UPSTREAM {
                "as upstream's scheduler_perf raises them"
            } else {
                "as --client-qps and --client-burst set them"
            };
            warnings.push(format!(
                "{source}: clientConnection.qps {} and burst {} are replaced by {} and {} in \
                 http mode, {why}",
                cc.qps, cc.burst, client.qps, client.burst
            ));
        }
        Ok((
            SchedulerSetup {
                config: Some((config, source)),
                registry: Some(registry),
                feature_gates,
                client,
            },
            warnings,
        ))
    }

    /// The configuration, the name it is reported under, and the registry.
    pub(crate) fn resolve(
        &self,
    ) -> Result<(KubeSchedulerConfiguration, String, Registry), BenchError> {
        let (cfg, source) = match &self.config {
            Some((cfg, source)) => (cfg.clone(), source.clone()),
            None => (
                config::load_str(
                    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
                    "default configuration",
                )?,
                "default configuration".to_string(),
            ),
        };
        let registry = self
            .registry
            .clone()
            .unwrap_or_else(plugins::in_tree_registry);
        Ok((cfg, source, registry))
    }
}

/// Where a run sends its objects and reads its counts: the in-memory cluster and scheduler
/// of `--mode in-process`, or the local API server and `run`'s scheduler of `--mode http`.
/// Stopped (scheduler stopped, threads and tasks joined) when dropped.
pub trait Target: Send + Sync {
    /// `in-process` or `http`.
    fn mode(&self) -> &'static str;
    /// The API client's QPS limit, as reported.
    fn client_qps(&self) -> String;
    /// Counts of bound pods and attempt durations.
    fn recorder(&self) -> &BenchRecorder;
    fn create_namespace(&self, name: &str);
    fn create_nodes(&self, nodes: Vec<Node>);
    /// Creates the pods (concurrently where that helps); returns when all were sent.
    fn create_pods(&self, pods: Vec<Pod>);
    fn create(&self, obj: &Object);
    fn delete(&self, obj: Object);
    /// Starts scheduling (after the nodes exist); returns once the scheduler is synced.
    fn start(&self) -> Result<(), BenchError>;
    /// An error when the scheduler can no longer run (its process exited); checked while
    /// the run waits for pods.
    fn check(&self) -> Result<(), BenchError> {
        Ok(())
    }
    /// CPU-seconds the scheduler has used so far, where they can be told apart from the
    /// benchmark's own (a scheduler process of its own).
    fn scheduler_cpu_seconds(&self) -> Option<f64> {
        None
    }
    /// The scheduler's peak RSS in MiB: this process's, unless the scheduler is another.
    fn peak_rss_mib(&self) -> Option<f64> {
        peak_rss::read_mib()
    }
    /// The command the scheduler runs as, when it is another process.
    fn scheduler_command(&self) -> Option<String> {
        None
    }
}

/// `--mode in-process`: a [`MemoryCluster`] and the scheduler on threads of this process.
pub struct InProcess {
    cluster: Arc<MemoryCluster>,
    sched: Scheduler,
    rt: tokio::runtime::Runtime,
    loop_thread: std::sync::Mutex<Option<JoinHandle<()>>>,
    recorder: Arc<BenchRecorder>,
}

impl InProcess {
    pub fn new() -> Result<InProcess, BenchError> {
        InProcess::with_decisions(false)
    }

    /// `record_decisions`: the scheduler keeps an explained decision log, to measure what
    /// that costs.
    pub fn with_decisions(record_decisions: bool) -> Result<InProcess, BenchError> {
        InProcess::with_setup(&SchedulerSetup::default(), record_decisions)
    }

    /// The scheduler `setup` describes; `record_decisions` as for
    /// [`with_decisions`](Self::with_decisions).
    pub fn with_setup(
        setup: &SchedulerSetup,
        record_decisions: bool,
    ) -> Result<InProcess, BenchError> {
        let (cfg, source, registry) = setup.resolve()?;
        let cluster = MemoryCluster::new();
        // One worker: binding tasks are short, and the loop needs the other core.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("bench-binding")
            .enable_all()
            .build()
            .map_err(BenchError::Runtime)?;
        let recorder = Arc::new(BenchRecorder::default());
        let mut builder = SchedulerBuilder::new(cfg, source)
            .registry(registry)
            .feature_gates(setup.feature_gates);
        if record_decisions {
            builder = builder.decisions(scheduler::decisions::Decisions::default());
        }
        let sched = builder
            .client(cluster.clone())
            .metrics(recorder.clone())
            .build(rt.handle().clone())?
            .scheduler;
        cluster.connect(sched.weak_event_handler());
        Ok(InProcess {
            cluster,
            sched,
            rt,
            loop_thread: std::sync::Mutex::new(None),
            recorder,
        })
    }
}

impl Target for InProcess {
    fn mode(&self) -> &'static str {
        "in-process"
    }

    fn client_qps(&self) -> String {
        "n/a".into()
    }

    fn recorder(&self) -> &BenchRecorder {
        &self.recorder
    }

    fn create_namespace(&self, name: &str) {
        self.cluster
            .deliver_other(ObjectEvent::Namespace(Change::Added(Arc::new(Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            }))));
    }

    fn create_nodes(&self, nodes: Vec<Node>) {
        for n in nodes {
            self.cluster.apply_node(n);
        }
    }

    fn create_pods(&self, pods: Vec<Pod>) {
        for p in pods {
            self.cluster.apply_pod(p);
        }
    }

    fn create(&self, obj: &Object) {
        create(&self.cluster, obj);
    }

    fn delete(&self, obj: Object) {
        delete(&self.cluster, obj);
    }

    fn start(&self) -> Result<(), BenchError> {
        self.sched.event_handler().synced();
        let t = self.sched.start().map_err(BenchError::Thread)?;
        *self.loop_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        Ok(())
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.sched.stop();
        let thread = self
            .loop_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::error!("the scheduling loop panicked");
            }
        }
        let sched = self.sched.clone();
        let drained = self
            .rt
            .block_on(async { tokio::time::timeout(DRAIN, sched.wait_for_bindings()).await });
        if drained.is_err() {
            tracing::warn!(
                in_flight = self.sched.tasks_in_flight(),
                "binding tasks still running after the run"
            );
        }
    }
}

/// Background work (measured-pod creation, churn) stopped and joined when dropped.
struct Worker {
    stop: Option<mpsc::Sender<()>>,
    stopped: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn spawn(
        name: &str,
        f: impl FnOnce(mpsc::Receiver<()>, Arc<AtomicBool>) + Send + 'static,
    ) -> Result<Worker, BenchError> {
        let (tx, rx) = mpsc::channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = stopped.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(rx, flag))
            .map_err(BenchError::Thread)?;
        Ok(Worker {
            stop: Some(tx),
            stopped,
            thread: Some(thread),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Release);
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("a benchmark worker thread panicked");
            }
        }
    }
}

/// Runs `workload` at `sizes` in process, reporting progress to `progress`.
pub fn run(
    workload: &Workload,
    sizes: Sizes,
    options: &RunOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, BenchError> {
    run_on(
        workload,
        sizes,
        options,
        progress,
        &|| {
            Ok(Arc::new(InProcess::with_setup(
                &options.scheduler,
                options.record_decisions,
            )?) as Arc<dyn Target>)
        },
        "in-process",
    )
}

/// Runs `workload` at `sizes` against the target `make` builds (once the workload is known
/// to be runnable).
pub fn run_on(
    workload: &Workload,
    sizes: Sizes,
    options: &RunOptions,
    progress: &mut dyn FnMut(&Progress),
    make: &dyn Fn() -> Result<Arc<dyn Target>, BenchError>,
    mode: &'static str,
) -> Result<Report, BenchError> {
    let mut report = Report {
        workload: workload.name.to_string(),
        mode,
        status: RunStatus::Ok,
        reason: None,
        nodes: workload.node_count(sizes),
        init_pods: workload.init_pod_count(sizes),
        measured_pods: sizes.measured_pods,
        scheduled_pods: 0,
        pods_per_second: None,
        samples: Vec::new(),
        attempt_latency_ms: None,
        peak_rss_mib: None,
        scheduler_cpu_seconds: None,
        scheduler_command: None,
        client_qps: "n/a".into(),
        duration_seconds: 0.0,
        upstream_floor: workload.upstream_floor,
    };
    if let Some(plugin) = workload.requires {
        report.status = RunStatus::Skipped;
        report.reason = Some(format!("needs {plugin}"));
        return Ok(report);
    }
    let deadline = Instant::now() + options.timeout;
    peak_rss::reset();
    let target = make()?;
    report.client_qps = target.client_qps();
    report.scheduler_command = target.scheduler_command();
    let recorder = target.recorder();

    // Namespaces first, as informers list them before pods.
    let mut namespaces: Vec<&str> = workload
        .init_pods
        .iter()
        .chain(std::iter::once(&workload.measured))
        .map(|g| g.namespace)
        .collect();
    if workload.churn.is_some() {
        namespaces.push(CHURN_NAMESPACE);
    }
    namespaces.sort_unstable();
    namespaces.dedup();
    for ns in namespaces {
        target.create_namespace(ns);
    }

    progress(&Progress::new(workload, Phase::Nodes, 0, report.nodes));
    let mut created = 0;
    for group in workload.node_groups {
        let template = objects::parse_node(group.template)?;
        let count = match group.count {
            Count::Fixed(n) => n,
            Count::Nodes => sizes.nodes,
        };
        let nodes = (0..count)
            .map(|i| {
                let zone = (!group.zones.is_empty()).then(|| group.zones[i % group.zones.len()]);
                objects::node_instance(&template, i, zone)
            })
            .collect();
        target.create_nodes(nodes);
        created += count;
        progress(&Progress::new(
            workload,
            Phase::Nodes,
            created,
            report.nodes,
        ));
    }
    target.start()?;

    // Initial pods, group by group, each group bound before the next (upstream's
    // createPods waits for its pods to be scheduled).
    let init_total = report.init_pods as u64;
    let mut bound_target = 0u64;
    for group in workload.init_pods {
        let template = objects::parse_pod(group.template)?;
        target.create_pods(
            (0..sizes.init_pods)
                .map(|i| objects::pod_instance(&template, group.namespace, i))
                .collect(),
        );
        bound_target += sizes.init_pods as u64;
        loop {
            let bound = recorder.scheduled();
            progress(&Progress::new(
                workload,
                Phase::InitPods,
                usize::try_from(bound).unwrap_or(usize::MAX),
                report.init_pods,
            ));
            if bound >= bound_target {
                break;
            }
            if Instant::now() >= deadline {
                report.status = RunStatus::TimedOut;
                report.reason = Some(format!(
                    "{bound} of {init_total} initial pods bound in {:?}",
                    options.timeout
                ));
                report.peak_rss_mib = target.peak_rss_mib();
                return Ok(report);
            }
            target.check()?;
            std::thread::sleep(POLL);
        }
    }

    // Measured pods, with the churn running meanwhile.
    recorder.clear_attempts();
    let base = recorder.scheduled();
    let measured_template = objects::parse_pod(workload.measured.template)?;
    let churn = match workload.churn {
        Some(c) => Some(start_churn(c, target.clone())?),
        None => None,
    };
    let cpu_before = target.scheduler_cpu_seconds();
    let start = Instant::now();
    let creator = {
        let target = target.clone();
        let namespace = workload.measured.namespace;
        let count = sizes.measured_pods;
        Worker::spawn("bench-create-pods", move |_stop, stopped| {
            let mut i = 0;
            while i < count && !stopped.load(Ordering::Acquire) {
                let end = (i + CREATE_CHUNK).min(count);
                target.create_pods(
                    (i..end)
                        .map(|j| objects::pod_instance(&measured_template, namespace, j))
                        .collect(),
                );
                i = end;
            }
        })?
    };
    let goal = sizes.measured_pods as u64;
    let mut samples = Vec::new();
    let mut last_sample = (start, 0u64);
    let (end, bound) = loop {
        let now = Instant::now();
        let bound = recorder.scheduled().saturating_sub(base);
        let since_sample = now.saturating_duration_since(last_sample.0);
        if bound >= goal {
            // The run ends when the last pod was bound, not when the poll noticed.
            let end = recorder.last_scheduled_at().max(last_sample.0).min(now);
            let since_sample = end.saturating_duration_since(last_sample.0);
            if since_sample >= MIN_PARTIAL_SAMPLE || samples.is_empty() {
                samples.push(rate(bound - last_sample.1, since_sample));
            }
            break (end, bound);
        }
        if since_sample >= Duration::from_secs(1) {
            samples.push(rate(bound - last_sample.1, since_sample));
            last_sample = (now, bound);
        }
        progress(&Progress::new(
            workload,
            Phase::MeasuredPods,
            usize::try_from(bound).unwrap_or(usize::MAX),
            sizes.measured_pods,
        ));
        if now >= deadline {
            report.status = RunStatus::TimedOut;
            report.reason = Some(format!(
                "{bound} of {goal} measured pods bound in {:?}",
                options.timeout
            ));
            break (now, bound);
        }
        target.check()?;
        std::thread::sleep(POLL);
    };
    report.scheduler_cpu_seconds = match (cpu_before, target.scheduler_cpu_seconds()) {
        (Some(before), Some(after)) => Some(((after - before) * 100.0).round() / 100.0),
        _ => None,
    };
    drop(creator);
    drop(churn);
    progress(&Progress::new(
        workload,
        Phase::Done,
        usize::try_from(bound).unwrap_or(usize::MAX),
        sizes.measured_pods,
    ));
    // The count includes churned pods bound meanwhile (a few per second at most); the
    // report caps it at the measured pods.
    report.scheduled_pods = usize::try_from(bound.min(goal)).unwrap_or(usize::MAX);
    report.duration_seconds =
        (end.saturating_duration_since(start).as_secs_f64() * 1000.0).round() / 1000.0;
    report.pods_per_second = Throughput::from_samples(&samples);
    report.samples = samples.iter().map(|s| s.round()).collect();
    report.attempt_latency_ms = Latency::from_micros(&recorder.attempt_durations_us());
    report.peak_rss_mib = target.peak_rss_mib();
    Ok(report)
}

fn rate(pods: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs > 0.0 {
        pods as f64 / secs
    } else {
        0.0
    }
}

/// Starts the churn: every interval, one object of each template is created (and, in
/// recreate mode, those of the previous interval deleted). Churned pods go to the
/// `churn` namespace.
fn start_churn(churn: Churn, target: Arc<dyn Target>) -> Result<Worker, BenchError> {
    let templates = churn
        .templates
        .iter()
        .map(|t| objects::parse(t))
        .collect::<Result<Vec<Object>, BenchError>>()?;
    Worker::spawn("bench-churn", move |stop, _| {
        const NS: &str = CHURN_NAMESPACE;
        let mut previous: Vec<Object> = Vec::new();
        for i in 0.. {
            let mut current = Vec::with_capacity(templates.len());
            for t in &templates {
                let obj = match t {
                    Object::Node(n) => Object::Node(Box::new(objects::node_instance(n, i, None))),
                    Object::Pod(p) => Object::Pod(Box::new(objects::pod_instance(p, NS, i))),
                    Object::Service(s) => {
                        Object::Service(Box::new(objects::service_instance(s, NS, i)))
                    }
                };
                target.create(&obj);
                current.push(obj);
            }
            if churn.mode == ChurnMode::Recreate {
                for obj in previous.drain(..) {
                    target.delete(obj);
                }
                previous = current;
            }
            // Paces the churn; a stop request (or the run dropping its sender) ends it.
            match stop.recv_timeout(churn.interval) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    })
}

fn create(cluster: &MemoryCluster, obj: &Object) {
    match obj {
        Object::Node(n) => cluster.apply_node((**n).clone()),
        Object::Pod(p) => cluster.apply_pod((**p).clone()),
        Object::Service(s) => {
            cluster.deliver_other(ObjectEvent::Service(Change::Added(Arc::new((**s).clone()))))
        }
    }
}

fn delete(cluster: &MemoryCluster, obj: Object) {
    match obj {
        Object::Node(n) => {
            cluster.remove_node(n.metadata.name.as_deref().unwrap_or_default());
        }
        Object::Pod(p) => {
            remove_pod(cluster, &p);
        }
        Object::Service(s) => {
            cluster.deliver_other(ObjectEvent::Service(Change::Deleted(Arc::new(*s))))
        }
    }
}

fn remove_pod(cluster: &MemoryCluster, pod: &Pod) -> bool {
    cluster.remove_pod(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

//! `--mode in-process`: the workload drives the scheduler directly. A [`MemoryCluster`] is
//! both the scheduler's event source and its API client; the scheduling loop runs on its own
//! thread ([`Scheduler::start`]) with the default profile, the real in-tree plugins and the
//! real clock; binding tasks run on a tokio runtime.
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

use framework::{Handle, Parallelizer};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use scheduler::clock::RealClock;
use scheduler::config;
use scheduler::memory::MemoryCluster;
use scheduler::profile::Profiles;
use scheduler::source::{Change, ObjectEvent};
use scheduler::{Scheduler, SchedulerOptions};

use crate::objects::{self, Object};
use crate::recorder::BenchRecorder;
use crate::report::{Latency, Report, RunStatus, Throughput};
use crate::workload::{Churn, ChurnMode, Count, Sizes, Workload};
use crate::{peak_rss, BenchError, Phase, Progress};

/// How often the bound-pod count is polled (samples are still taken once a second).
const POLL: Duration = Duration::from_millis(5);

/// How long the scheduler may take to finish its binding tasks after the run.
const DRAIN: Duration = Duration::from_secs(10);

/// A final partial interval counts as a sample only when it lasted at least this long
/// (or when there is no full second at all), so that a few pods bound in the last
/// milliseconds do not make an outlier.
const MIN_PARTIAL_SAMPLE: Duration = Duration::from_millis(500);

/// Settings of a run.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Budget of the whole run (initial pods included).
    pub timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            timeout: Duration::from_secs(300),
        }
    }
}

/// Stops the scheduler and joins its loop on every way out of [`run`].
struct Running {
    sched: Scheduler,
    rt: tokio::runtime::Runtime,
    loop_thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.sched.stop();
        if let Some(t) = self.loop_thread.take() {
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

/// Runs `workload` at `sizes`, reporting progress to `progress`.
pub fn run(
    workload: &Workload,
    sizes: Sizes,
    options: &RunOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, BenchError> {
    let mut report = Report {
        workload: workload.name.to_string(),
        mode: "in-process",
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
        client_qps: "n/a",
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

    let cfg = config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "default configuration",
    )?;
    let parallelism = usize::try_from(cfg.parallelism()).unwrap_or(1);
    let cluster = MemoryCluster::new();
    let handle = Handle::new(Parallelizer::new(parallelism), cluster.clone());
    let profiles = Profiles::build(
        &cfg,
        &plugins::in_tree_registry(),
        &handle,
        "default configuration",
    )?;
    // One worker: binding tasks are short, and the loop needs the other core.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-binding")
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    let recorder = Arc::new(BenchRecorder::default());
    let sched = Scheduler::new(
        profiles.frameworks,
        recorder.clone(),
        Arc::new(RealClock),
        rt.handle().clone(),
        SchedulerOptions {
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
            ..SchedulerOptions::default()
        },
    );
    cluster.connect(sched.weak_event_handler());

    // Namespaces first, as informers list them before pods.
    let mut namespaces: Vec<&str> = workload
        .init_pods
        .iter()
        .chain(std::iter::once(&workload.measured))
        .map(|g| g.namespace)
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    for ns in namespaces {
        cluster.deliver_other(ObjectEvent::Namespace(Change::Added(Arc::new(Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }))));
    }

    progress(&Progress::new(workload, Phase::Nodes, 0, report.nodes));
    let mut created = 0;
    for group in workload.node_groups {
        let template = objects::parse_node(group.template)?;
        let count = match group.count {
            Count::Fixed(n) => n,
            Count::Nodes => sizes.nodes,
        };
        for i in 0..count {
            let zone = (!group.zones.is_empty()).then(|| group.zones[i % group.zones.len()]);
            cluster.apply_node(objects::node_instance(&template, i, zone));
        }
        created += count;
        progress(&Progress::new(
            workload,
            Phase::Nodes,
            created,
            report.nodes,
        ));
    }
    sched.event_handler().synced();
    let loop_thread = sched.start().map_err(BenchError::Thread)?;
    let running = Running {
        sched: sched.clone(),
        rt,
        loop_thread: Some(loop_thread),
    };

    // Initial pods, group by group, each group bound before the next (upstream's
    // createPods waits for its pods to be scheduled).
    let init_total = report.init_pods as u64;
    let mut bound_target = 0u64;
    for group in workload.init_pods {
        let template = objects::parse_pod(group.template)?;
        for i in 0..sizes.init_pods {
            cluster.apply_pod(objects::pod_instance(&template, group.namespace, i));
        }
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
                report.peak_rss_mib = peak_rss::read_mib();
                drop(running);
                return Ok(report);
            }
            std::thread::sleep(POLL);
        }
    }

    // Measured pods, with the churn running meanwhile.
    recorder.clear_attempts();
    let base = recorder.scheduled();
    let measured_template = objects::parse_pod(workload.measured.template)?;
    let churn = match workload.churn {
        Some(c) => Some(start_churn(c, cluster.clone())?),
        None => None,
    };
    let start = Instant::now();
    let creator = {
        let cluster = cluster.clone();
        let namespace = workload.measured.namespace;
        let count = sizes.measured_pods;
        Worker::spawn("bench-create-pods", move |_stop, stopped| {
            for i in 0..count {
                if stopped.load(Ordering::Acquire) {
                    return;
                }
                cluster.apply_pod(objects::pod_instance(&measured_template, namespace, i));
            }
        })?
    };
    let target = sizes.measured_pods as u64;
    let mut samples = Vec::new();
    let mut last_sample = (start, 0u64);
    let (end, bound) = loop {
        let now = Instant::now();
        let bound = recorder.scheduled().saturating_sub(base);
        let since_sample = now.saturating_duration_since(last_sample.0);
        if bound >= target {
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
                "{bound} of {target} measured pods bound in {:?}",
                options.timeout
            ));
            break (now, bound);
        }
        std::thread::sleep(POLL);
    };
    drop(creator);
    drop(churn);
    progress(&Progress::new(
        workload,
        Phase::Done,
        usize::try_from(bound).unwrap_or(usize::MAX),
        sizes.measured_pods,
    ));
    report.scheduled_pods = usize::try_from(bound).unwrap_or(usize::MAX);
    report.duration_seconds =
        (end.saturating_duration_since(start).as_secs_f64() * 1000.0).round() / 1000.0;
    report.pods_per_second = Throughput::from_samples(&samples);
    report.samples = samples.iter().map(|s| s.round()).collect();
    report.attempt_latency_ms = Latency::from_micros(&recorder.attempt_durations_us());
    report.peak_rss_mib = peak_rss::read_mib();
    drop(running);
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
fn start_churn(churn: Churn, cluster: Arc<MemoryCluster>) -> Result<Worker, BenchError> {
    let templates = churn
        .templates
        .iter()
        .map(|t| objects::parse(t))
        .collect::<Result<Vec<Object>, BenchError>>()?;
    Worker::spawn("bench-churn", move |stop, _| {
        const NS: &str = "churn";
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
                create(&cluster, &obj);
                current.push(obj);
            }
            if churn.mode == ChurnMode::Recreate {
                for obj in previous.drain(..) {
                    delete(&cluster, obj);
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

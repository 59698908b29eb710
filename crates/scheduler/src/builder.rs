//! Putting a scheduler together, in one place: the services every profile shares, the
//! [`Handle`] plugins get, the profiles, and the [`Scheduler`].
//!
//! Upstream: scheduler.New (pkg/scheduler/scheduler.go) with its options, and the
//! out-of-tree registry of cmd/kube-scheduler/app. `run`, `up`, `simulate`, `bench` and the
//! cycle benchmark all build their scheduler here; they differ only in the services they
//! hand in (a kube-rs client or a [`crate::memory::MemoryCluster`], a Prometheus or a no-op
//! recorder, a real or a standing clock) and the registry.
//!
//! ```
//! use std::sync::Arc;
//! use scheduler::builder::SchedulerBuilder;
//! use scheduler::clock::FakeClock;
//! use scheduler::memory::MemoryCluster;
//!
//! let config = scheduler::config::load_str(
//!     "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
//!     "example",
//! ).unwrap();
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let cluster = MemoryCluster::new();
//! let built = SchedulerBuilder::new(config, "example")
//!     .client(cluster.clone())
//!     .clock(Arc::new(FakeClock::new()))
//!     .build(runtime.handle().clone())
//!     .unwrap();
//! cluster.connect(built.scheduler.weak_event_handler());
//! ```

use std::sync::Arc;

use framework::handle::NoopClient;
use framework::{
    BindingPods, ClusterClient, Handle, Parallelizer, PreemptingPods, StorageListers, WaitingPods,
};
use plugins::Registry;
use tokio::sync::watch;

use crate::backend::queue::QueueConfig;
use crate::clock::{Clock, RealClock};
use crate::config::{ConfigError, KubeSchedulerConfiguration};
use crate::decisions::Decisions;
use crate::features::FeatureGates;
use crate::metrics::{MetricsRecorder, NoopRecorder};
use crate::profile::Profiles;
use crate::scheduler::{Scheduler, SchedulerOptions, PLUGIN_METRICS_SAMPLE_PERCENT};

/// What every profile of one scheduler shares. Built once by [`SchedulerBuilder`]; the
/// profiles get it through their [`Handle`] and the scheduler keeps it.
#[derive(Clone)]
pub struct Services {
    /// Where decisions go: binds, status writes, events, deletes.
    pub client: Arc<dyn ClusterClient>,
    /// Pods waiting at Permit.
    pub waiting_pods: WaitingPods,
    /// Preemptors whose victims are being evicted.
    pub preempting_pods: PreemptingPods,
    /// Pods whose binding cycle waits on controllers.
    pub binding_pods: BindingPods,
    /// The bounded pool Filter and Score run on.
    pub parallelizer: Parallelizer,
    pub metrics: Arc<dyn MetricsRecorder>,
    pub clock: Arc<dyn Clock>,
    /// The scheduler's storage objects: the scheduler changes them, binding cycles watch.
    pub storage: Arc<watch::Sender<Arc<StorageListers>>>,
    /// Whether controllers act on the volume bindings the scheduler writes; when not,
    /// plugins get no storage watch and do not wait for them.
    pub storage_controllers: bool,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("parallelizer", &self.parallelizer)
            .finish_non_exhaustive()
    }
}

impl Services {
    /// The handle plugins get. Preemption extenders are added by [`Profiles::build`].
    pub fn handle(&self) -> Handle {
        let mut handle = Handle::new(self.parallelizer.clone(), self.client.clone());
        handle.waiting_pods = self.waiting_pods.clone();
        handle.preempting_pods = self.preempting_pods.clone();
        handle.binding_pods = self.binding_pods.clone();
        handle.storage = self.storage_controllers.then(|| self.storage.subscribe());
        handle
    }
}

/// A built scheduler and what building it had to say.
#[derive(Debug)]
pub struct Built {
    pub scheduler: Scheduler,
    /// Non-fatal notes to show the user, e.g. upstream plugins kubesched leaves out.
    pub warnings: Vec<String>,
}

/// Builds a scheduler from a loaded (defaulted, validated) configuration. Every service has
/// a default fit for offline use: the in-tree registry, a client that drops writes, no
/// metrics, the real clock, the configuration's parallelism and seed 0.
#[derive(Clone)]
pub struct SchedulerBuilder {
    config: KubeSchedulerConfiguration,
    source: String,
    registry: Registry,
    client: Arc<dyn ClusterClient>,
    metrics: Arc<dyn MetricsRecorder>,
    clock: Arc<dyn Clock>,
    parallelism: Option<usize>,
    seed: u64,
    plugin_metrics_sample_percent: u8,
    storage_controllers: bool,
    decisions: Option<Decisions>,
    feature_gates: FeatureGates,
}

impl std::fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("source", &self.source)
            .field("parallelism", &self.parallelism)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl SchedulerBuilder {
    /// `source` names the configuration in errors (a file path, or "default configuration").
    pub fn new(config: KubeSchedulerConfiguration, source: impl Into<String>) -> Self {
        SchedulerBuilder {
            config,
            source: source.into(),
            registry: plugins::in_tree_registry(),
            client: Arc::new(NoopClient),
            metrics: Arc::new(NoopRecorder),
            clock: Arc::new(RealClock),
            parallelism: None,
            seed: 0,
            plugin_metrics_sample_percent: PLUGIN_METRICS_SAMPLE_PERCENT,
            storage_controllers: true,
            decisions: None,
            feature_gates: FeatureGates::default(),
        }
    }

    /// The configuration the scheduler is built from.
    pub fn config(&self) -> &KubeSchedulerConfiguration {
        &self.config
    }

    /// Replaces the whole registry (the in-tree one by default). Out-of-tree plugins are
    /// merged into the in-tree registry first, with [`plugins::registry::merge`], which
    /// refuses a name clash as upstream's `app.WithPlugin` does.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Where decisions go. Default: dropped.
    pub fn client(mut self, client: Arc<dyn ClusterClient>) -> Self {
        self.client = client;
        self
    }

    /// Where the scheduler, its queue and its frameworks report. Default: nowhere.
    pub fn metrics(mut self, metrics: Arc<dyn MetricsRecorder>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Filter and Score workers; default: the configuration's `parallelism`.
    pub fn parallelism(mut self, parallelism: usize) -> Self {
        self.parallelism = Some(parallelism.max(1));
        self
    }

    /// Seed of the tie-breaking RNG: the same cluster and seed give the same placements.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The feature gates (`--feature-gates`); upstream's defaults unless set.
    pub fn feature_gates(mut self, gates: FeatureGates) -> Self {
        self.feature_gates = gates;
        self
    }

    /// The share of scheduling cycles, in percent (0 to 100), whose plugin calls are timed
    /// (`scheduler_plugin_execution_duration_seconds`); upstream's 10 by default.
    pub fn plugin_metrics_sample_percent(mut self, percent: u8) -> Self {
        self.plugin_metrics_sample_percent = percent.min(100);
        self
    }

    /// Whether a PV controller and provisioners act on the volume bindings the scheduler
    /// writes (default: yes). `simulate` has none: VolumeBinding's PreBind then takes its
    /// writes as done instead of waiting for the claims to be bound.
    pub fn storage_controllers(mut self, present: bool) -> Self {
        self.storage_controllers = present;
        self
    }

    /// Record every attempt, explained, in `log` (default: none; explaining costs cycle
    /// time).
    pub fn decisions(mut self, log: Decisions) -> Self {
        self.decisions = Some(log);
        self
    }

    /// The shared services, built once.
    pub fn services(&self) -> Services {
        let parallelism = self.parallelism.unwrap_or_else(|| {
            usize::try_from(self.config.parallelism())
                .unwrap_or(1)
                .max(1)
        });
        Services {
            client: self.client.clone(),
            waiting_pods: WaitingPods::default(),
            preempting_pods: PreemptingPods::default(),
            binding_pods: BindingPods::default(),
            parallelizer: Parallelizer::new(parallelism),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            storage: Arc::new(watch::Sender::new(Arc::new(StorageListers::default()))),
            storage_controllers: self.storage_controllers,
        }
    }

    /// The scheduler's settings from the configuration.
    pub fn options(&self) -> SchedulerOptions {
        let cfg = &self.config;
        let secs = |v: Option<i64>, d: u64| {
            std::time::Duration::from_secs(v.and_then(|v| u64::try_from(v).ok()).unwrap_or(d))
        };
        SchedulerOptions {
            queue: QueueConfig {
                pod_initial_backoff: secs(cfg.pod_initial_backoff_seconds, 1),
                pod_max_backoff: secs(cfg.pod_max_backoff_seconds, 10),
                ..QueueConfig::default()
            },
            seed: self.seed,
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
            plugin_metrics_sample_percent: self.plugin_metrics_sample_percent,
            decisions: self.decisions.clone(),
            opportunistic_batching: self.feature_gates.opportunistic_batching,
            ..SchedulerOptions::default()
        }
    }

    /// Only the profiles, for callers that run scheduling cycles themselves (the cycle
    /// benchmark). Extenders with a preempt verb are refused: they need a runtime.
    pub fn build_profiles(&self) -> Result<Profiles, ConfigError> {
        let services = self.services();
        self.profiles(&services, None)
    }

    fn profiles(
        &self,
        services: &Services,
        runtime: Option<&tokio::runtime::Handle>,
    ) -> Result<Profiles, ConfigError> {
        let mut handle = services.handle();
        handle.runtime = runtime.cloned();
        let mut profiles =
            Profiles::build(&self.config, &self.registry, &handle, runtime, &self.source)?;
        for f in &mut profiles.frameworks {
            f.set_metrics(services.metrics.clone());
        }
        Ok(profiles)
    }

    /// The scheduler. Binding tasks, API writes and extender calls run on `runtime`.
    pub fn build(self, runtime: tokio::runtime::Handle) -> Result<Built, ConfigError> {
        let services = self.services();
        let profiles = self.profiles(&services, Some(&runtime))?;
        let options = SchedulerOptions {
            extenders: profiles.extenders.into(),
            ..self.options()
        };
        let scheduler = Scheduler::new(profiles.frameworks, services, runtime, options);
        Ok(Built {
            scheduler,
            warnings: profiles.warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SchedulerBuilder;

    fn config(yaml: &str) -> crate::config::KubeSchedulerConfiguration {
        let text = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{yaml}"
        );
        crate::config::load_str(&text, "test").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn options_come_from_the_configuration() {
        let b = SchedulerBuilder::new(
            config("podInitialBackoffSeconds: 3\npodMaxBackoffSeconds: 30\npercentageOfNodesToScore: 40\n"),
            "test",
        )
        .seed(7);
        let o = b.options();
        assert_eq!(
            (
                o.queue.pod_initial_backoff.as_secs(),
                o.queue.pod_max_backoff.as_secs(),
                o.percentage_of_nodes_to_score,
                o.seed
            ),
            (3, 30, Some(40), 7)
        );
    }
}

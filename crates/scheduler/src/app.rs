//! `kubesched run`: the scheduler on the Kubernetes API, put together as kube-scheduler's
//! `app` package does it: serving endpoints first, informers, wait for the initial lists,
//! leader election (when on), then the scheduling loop until shutdown or lost leadership.
//!
//! Upstream: cmd/kube-scheduler/app/server.go (Run). `kubesched up` and `kubesched bench
//! --mode http` run exactly this against the local API server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use plugins::Registry;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::builder::SchedulerBuilder;
use crate::client::leader::{LeaderElectionConfig, LeaderElector};
use crate::client::{
    run_informers, serves_dynamic_resources, InformerOptions, KubeClusterClient, WriterOptions,
    DYNAMIC_RESOURCES_API,
};
use crate::clock::RealClock;
use crate::config::{ConfigError, KubeSchedulerConfiguration};
use crate::decisions::Decisions;
use crate::metrics::PrometheusRecorder;
use crate::scheduler::Scheduler;
use crate::serve::{self, Health, ServeState};
use crate::simulator_annotations;
use crate::web::WebState;

/// What `run` needs besides the API client.
#[derive(Clone)]
pub struct RunOptions {
    /// The loaded (defaulted, validated) configuration and where it came from.
    pub config: KubeSchedulerConfiguration,
    pub config_source: String,
    /// Where to serve `/healthz`, `/livez`, `/readyz`, `/metrics` (port 0: any free port).
    pub bind_address: SocketAddr,
    /// `Some` when leader election is on.
    pub leader_election: Option<LeaderElectionConfig>,
    /// Seed of the tie-breaking RNG.
    pub seed: u64,
    /// Also report measurements here (besides `/metrics`): `kubesched bench` counts bound
    /// pods and attempt latencies this way.
    pub extra_metrics: Option<Arc<dyn crate::metrics::MetricsRecorder>>,
    /// Record each pod's last attempt here and serve the web view on the serving port;
    /// `None`: cycles run unexplained (cheaper) and only the health and metrics endpoints
    /// are served.
    pub decisions: Option<Decisions>,
    /// Write each attempt onto its pod as kube-scheduler-simulator's annotations (needs
    /// `decisions`; one API write per attempt that changed them).
    pub simulator_annotations: bool,
    /// `--feature-gates`.
    pub feature_gates: crate::features::FeatureGates,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("config_source", &self.config_source)
            .field("bind_address", &self.bind_address)
            .field("leader_election", &self.leader_election)
            .field("seed", &self.seed)
            .field("decisions", &self.decisions)
            .field("simulator_annotations", &self.simulator_annotations)
            .finish_non_exhaustive()
    }
}

/// Why `run` stopped with an error.
#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("serving on {addr}: {source}")]
    Serve {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid leader election settings: {0}")]
    LeaderElection(#[from] crate::client::leader::LeaderElectionError),
    #[error("starting the scheduling loop: {0}")]
    Loop(#[source] std::io::Error),
    /// Another replica took the lease or renewing failed past the renew deadline: this
    /// replica stopped scheduling at once (upstream exits the same way).
    #[error("leader election lost")]
    LeadershipLost,
}

/// A started scheduler: where it serves, and how to wait for it.
#[derive(Debug)]
pub struct Started {
    /// The address `/healthz` and `/metrics` are served on.
    pub serving: SocketAddr,
    pub scheduler: Scheduler,
}

/// Starts serving and the informers, then runs until `shutdown` resolves (clean stop) or
/// leadership is lost. `on_started` is called once the serving address is known (to print
/// it); it runs before the informers sync.
pub async fn run(
    client: kube::Client,
    options: RunOptions,
    registry: &Registry,
    on_started: impl FnOnce(&Started),
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    let cfg = &options.config;
    let health = Arc::new(Health::new(options.leader_election.is_some()));
    let metrics = Arc::new(PrometheusRecorder::new());

    // The decision sink and the profiles.
    let writer = KubeClusterClient::new(
        client.clone(),
        WriterOptions {
            qps: cfg.client_connection.qps,
            burst: u32::try_from(cfg.client_connection.burst).unwrap_or(0),
            metrics: Some(metrics.clone()),
            ..WriterOptions::default()
        },
    );
    let recorder: Arc<dyn crate::metrics::MetricsRecorder> = match &options.extra_metrics {
        Some(extra) => Arc::new(crate::metrics::Tee(metrics.clone(), extra.clone())),
        None => metrics.clone(),
    };
    let mut builder = SchedulerBuilder::new(cfg.clone(), options.config_source.clone());
    if let Some(log) = &options.decisions {
        builder = builder.decisions(log.clone());
    }
    let built = builder
        .registry(registry.clone())
        .client(Arc::new(writer))
        .metrics(recorder)
        .clock(Arc::new(RealClock))
        .seed(options.seed)
        .feature_gates(options.feature_gates)
        .build(tokio::runtime::Handle::current())?;
    for w in &built.warnings {
        tracing::warn!("{w}");
    }
    let sched = built.scheduler;

    // Serving.
    let listener = TcpListener::bind(options.bind_address)
        .await
        .map_err(|source| RunError::Serve {
            addr: options.bind_address,
            source,
        })?;
    let serving = listener.local_addr().map_err(|source| RunError::Serve {
        addr: options.bind_address,
        source,
    })?;
    let (stop_serving, serving_stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve::serve(
        listener,
        ServeState {
            health: health.clone(),
            metrics: metrics.clone(),
            web: options
                .decisions
                .as_ref()
                .map(|log| WebState::new(sched.clone(), log.clone())),
        },
        async {
            let _ = serving_stopped.await;
        },
    ));
    on_started(&Started {
        serving,
        scheduler: sched.clone(),
    });

    let annotations = match (&options.decisions, options.simulator_annotations) {
        (Some(log), true) => Some(tokio::spawn(simulator_annotations::run_writer(
            client.clone(),
            sched.clone(),
            log.clone(),
        ))),
        _ => None,
    };

    // Informers feed the cache and the queue from now on, leader or not, as upstream.
    let informer_options = InformerOptions {
        dynamic_resources: dynamic_resources_served(&client).await,
        ..InformerOptions::default()
    };
    let (stop_informers, informers_stopped) = oneshot::channel::<()>();
    let informers = tokio::spawn(run_informers(
        client.clone(),
        sched.event_handler(),
        informer_options,
        async {
            let _ = informers_stopped.await;
        },
    ));

    let result = schedule(&client, &options, &sched, &health, shutdown).await;

    health.set_shutting_down();
    sched.stop();
    let _ = stop_informers.send(());
    let _ = informers.await;
    if let Some(writer) = annotations {
        writer.abort();
    }
    let _ = stop_serving.send(());
    let _ = server.await;
    result
}

/// Whether to watch the resource.k8s.io/v1 kinds. A cluster that does not serve them
/// (before Kubernetes 1.34, or with the API turned off) would keep their lists failing and
/// the scheduler from ever becoming ready; without them DynamicResources sees no devices and
/// everything else schedules as usual. When discovery cannot be asked, they are watched: the
/// informers retry, as they always do.
async fn dynamic_resources_served(client: &kube::Client) -> bool {
    match serves_dynamic_resources(client).await {
        Ok(true) => true,
        Ok(false) => {
            tracing::warn!(
                "the cluster does not serve {DYNAMIC_RESOURCES_API} (DeviceClasses, \
                 ResourceSlices, ResourceClaims): not watching them, so DynamicResources \
                 sees no devices and a pod with resource claims stays unschedulable \
                 (resourceclaim.resource.k8s.io \"NAME\" not found); all other pods are \
                 scheduled as usual"
            );
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "asking discovery for {DYNAMIC_RESOURCES_API} failed; watching its kinds anyway");
            true
        }
    }
}

/// Waits for the initial lists and (when on) leadership, then schedules until `shutdown` or
/// lost leadership.
async fn schedule(
    client: &kube::Client,
    options: &RunOptions,
    sched: &Scheduler,
    health: &Health,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), RunError> {
    tokio::pin!(shutdown);
    tokio::select! {
        _ = sched.wait_synced() => {}
        _ = &mut shutdown => return Ok(()),
    }
    health.set_handlers_synced();
    tracing::info!("informers synced");

    let leader = match &options.leader_election {
        None => None,
        Some(le) => {
            let elector = LeaderElector::new(client.clone(), le.clone())?;
            tracing::info!(lease = %format!("{}/{}", le.namespace, le.name), identity = %le.identity, "waiting for leadership");
            tokio::select! {
                leader = elector.run() => Some(leader),
                _ = &mut shutdown => return Ok(()),
            }
        }
    };
    tracing::info!("starting the scheduling loop");
    let thread = sched.start().map_err(RunError::Loop)?;

    let result = match &leader {
        Some(l) => tokio::select! {
            _ = l.lost() => {
                // Stop at once: another replica may be binding already.
                sched.stop();
                health.set_leader_election_healthy(false);
                Err(RunError::LeadershipLost)
            }
            _ = &mut shutdown => Ok(()),
        },
        None => {
            shutdown.await;
            Ok(())
        }
    };
    sched.stop();
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    if let Some(l) = leader {
        if result.is_ok() {
            l.stop().await;
        }
    }
    result
}

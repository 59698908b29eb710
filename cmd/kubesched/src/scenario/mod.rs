//! `kubesched scenario run FILE...`: scripted stories of the scheduler at work, each checked
//! as it runs (docs/scenarios.md has the format).
//!
//! Every file is read and checked first ([`format`]); then each scenario runs on its own
//! cluster: by default a fresh one in this process (`up`'s API server with its controllers
//! and kubelet stand-in, in memory, on a free port, and the scheduler with the scenario's
//! configuration), or, with `--kubeconfig`, a namespace of its own on that cluster, deleted
//! with the cluster-scoped objects it applied when it ends. The steps run through the API
//! ([`steps`]); at the end each pod of the scenario is explained ([`explain`]) and the report
//! printed ([`output`]).

pub mod explain;
pub mod format;
pub mod output;
pub mod steps;

use std::path::PathBuf;

use anyhow::Context;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::discovery::Discovery;

use scheduler::app;
use scheduler::config::{self, KubeSchedulerConfiguration};

use crate::Registry;
use explain::{ExplanationSource, Recorded, SimulateNow};
use format::Scenario;
use output::ScenarioReport;
use scheduler::decisions::Decisions;

/// The namespace scenarios run in on their own cluster.
const EMBEDDED_NAMESPACE: &str = "default";

/// At least one scenario's step failed; the report says which.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct ScenarioFailed(pub Vec<String>);

/// How to print the reports.
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Reads every file, runs each scenario in turn and prints the reports. Returns
/// [`format::InvalidScenario`] (or a configuration error) before running anything when a file
/// is invalid, and [`ScenarioFailed`] after printing when a step failed.
pub fn run_files(
    files: &[PathBuf],
    kubeconfig: Option<&std::path::Path>,
    format: Format,
    registry: &Registry,
) -> anyhow::Result<()> {
    let mut scenarios = Vec::new();
    for f in files {
        let s = format::load(f)?;
        let cfg = scheduler_config(&s, registry)?;
        scenarios.push((s, cfg));
    }
    if kubeconfig.is_some() {
        for (s, _) in &scenarios {
            if s.scheduler_config.is_some() {
                eprintln!(
                    "warning: {}: schedulerConfig is not used with --kubeconfig: the cluster's scheduler schedules (it still shapes the explanations)",
                    s.file.display()
                );
            }
        }
    }
    let rt = crate::runtime()?;
    let mut reports = Vec::new();
    for (s, (cfg, source)) in scenarios {
        let ((steps, pods, objects), recorded) = rt.block_on(async {
            match kubeconfig {
                None => run_embedded(&s, &cfg, &source, registry)
                    .await
                    .map(|(run, d)| (run, Some(d))),
                Some(path) => run_on(&s, path).await.map(|run| (run, None)),
            }
        })?;
        let source: Box<dyn ExplanationSource> = match recorded {
            Some(decisions) => Box::new(Recorded(decisions)),
            // simulate drives a runtime of its own: it runs outside `block_on`.
            None => Box::new(SimulateNow::new(objects, cfg, source, registry.clone())),
        };
        let pods = pods
            .into_iter()
            .map(|(ns, name)| {
                let e = source.explain(&ns, &name);
                (ns, name, e)
            })
            .collect();
        reports.push(ScenarioReport {
            file: s.file.display().to_string(),
            name: s.name.clone(),
            description: s.description.clone(),
            steps,
            explained: source.describe(),
            pods,
        });
    }
    let text = match format {
        Format::Text => output::to_text(&reports),
        Format::Json => output::to_json(&reports) + "\n",
    };
    use std::io::Write;
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")?;
    let failures: Vec<String> = reports.iter().filter_map(ScenarioReport::failure).collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(ScenarioFailed(failures).into())
    }
}

/// The scenario's scheduler configuration (upstream's default profile when it has none),
/// with `up`'s client limits unless it sets its own.
fn scheduler_config(
    s: &Scenario,
    registry: &Registry,
) -> anyhow::Result<(KubeSchedulerConfiguration, String)> {
    const DEFAULT: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let (text, source) = match &s.scheduler_config {
        Some((text, source)) => (text.as_str(), source.clone()),
        None => (DEFAULT, "default configuration".to_string()),
    };
    let mut cfg = config::load_str_with(text, &source, registry)?;
    crate::up_client_limits(&mut cfg, Some(text));
    Ok((cfg, source))
}

type Run = (
    Vec<steps::StepOutcome>,
    Vec<(String, String)>,
    Vec<serde_json::Value>,
);

/// Runs the steps, then lists the scenario's pods and takes the snapshot they are
/// explained from.
async fn run_steps(target: &mut steps::Target, s: &Scenario) -> Run {
    let outcomes = steps::run(target, s).await;
    let pods = steps::pod_names(target)
        .await
        .into_iter()
        .map(|n| (target.namespace.clone(), n))
        .collect();
    let objects = explain::snapshot(&target.client).await;
    (outcomes, pods, objects)
}

/// A fresh cluster in this process, as `up` runs it, for one scenario; its scheduler
/// records every attempt in the returned decision log.
async fn run_embedded(
    s: &Scenario,
    cfg: &KubeSchedulerConfiguration,
    source: &str,
    registry: &Registry,
) -> anyhow::Result<(Run, Decisions)> {
    let server_config = apiserver::Config {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        simulate_kubelets: true,
        volume_controllers: true,
        workload_controllers: true,
        default_storage_class: true,
        provisioners: vec![apiserver::provisioner::DEFAULT_PROVISIONER.to_string()],
        job_pod_completion: std::time::Duration::from_secs(1),
        ..apiserver::Config::default()
    };
    let (server, client) = crate::start_local_cluster(server_config).await?;
    let decisions = Decisions::new(
        scheduler::decisions::DEFAULT_MAX_PODS,
        scheduler::decisions::DEFAULT_MAX_BYTES,
    );
    let options = app::RunOptions {
        config: cfg.clone(),
        config_source: source.to_string(),
        bind_address: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        leader_election: None,
        seed: 1,
        extra_metrics: None,
        decisions: Some(decisions.clone()),
        simulator_annotations: false,
        feature_gates: scheduler::features::FeatureGates::default(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sched = app::run(client.clone(), options, registry, |_| {}, async {
        let _ = stopped.await;
    });
    let work = async {
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .context("discovering the API server's resources")?;
        let mut target = steps::Target {
            client: client.clone(),
            namespace: EMBEDDED_NAMESPACE.to_string(),
            force_namespace: false,
            discovery,
            cluster_scoped: Vec::new(),
        };
        anyhow::Ok(run_steps(&mut target, s).await)
    };
    tokio::pin!(sched);
    tokio::pin!(work);
    let out = tokio::select! {
        r = &mut sched => {
            server.shutdown().await;
            r.with_context(|| format!("scenario {}: the scheduler stopped", s.name))?;
            anyhow::bail!("scenario {}: the scheduler stopped before the scenario ended", s.name);
        }
        out = &mut work => out,
    };
    let _ = stop.send(());
    let stopped = sched.await;
    server.shutdown().await;
    stopped.with_context(|| format!("scenario {}: stopping the scheduler", s.name))?;
    out.map(|run| (run, decisions))
}

/// A namespace of its own on the cluster of `kubeconfig`, deleted at the end with the
/// cluster-scoped objects the scenario applied.
async fn run_on(s: &Scenario, kubeconfig: &std::path::Path) -> anyhow::Result<Run> {
    let client = scheduler::client::connect(Some(kubeconfig))
        .await
        .context("connecting to the API server")?;
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("discovering the API server's resources")?;
    let namespace = namespace_for(&s.name);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(serde_json::json!({ "metadata": { "name": namespace } }))
        .context("building the scenario's namespace")?;
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {namespace}"))?;
    let mut target = steps::Target {
        client: client.clone(),
        namespace: namespace.clone(),
        force_namespace: true,
        discovery,
        cluster_scoped: Vec::new(),
    };
    let out = run_steps(&mut target, s).await;
    let mut cleanup = Vec::new();
    for (ar, name) in target.cluster_scoped.iter().rev() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        if let Err(e) = api.delete(name, &DeleteParams::default()).await {
            cleanup.push(format!("{} {name}: {e}", ar.kind));
        }
    }
    if let Err(e) = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
    {
        cleanup.push(format!("Namespace {namespace}: {e}"));
    }
    for c in cleanup {
        eprintln!("warning: scenario {}: cleaning up {c}", s.name);
    }
    Ok(out)
}

/// `scenario-<name>-<suffix>`: a namespace name (63 characters at most, lowercase) that two
/// runs of one scenario on the same cluster do not share.
fn namespace_for(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ std::process::id())
        .unwrap_or_default();
    let prefix: String = format!("scenario-{clean}").chars().take(52).collect();
    format!("{}-{:08x}", prefix.trim_end_matches('-'), nanos)
}

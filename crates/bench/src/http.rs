//! `--mode http`: the workload goes through the local API server, and the scheduler is
//! `kubesched run`'s own code path ([`scheduler::app::run`]: kube-rs informers, the
//! `pods/binding` subresource, status and event writes) against it, over loopback HTTP, in
//! this process. Objects are created through the API with kube-rs, many requests in flight.
//!
//! Pods, the bulk of what the harness creates, are not serialized one by one: consecutive
//! pods that differ only in their name share one body serialized once, and each pod's body
//! is that body with its name written in ([`PodBodies`]); the created pods the API server
//! answers with are not decoded. The requests are the same bytes `Api::create` sends; what
//! is saved is the harness's own CPU, which shares the two cores with the API server and the
//! scheduler being measured. The scheduler's own requests are not shortened this way.
//!
//! The scheduler's client QPS limit is raised to 5,000 (burst 5,000), as upstream's
//! scheduler_perf raises it, unless [`ClientLimits`] say otherwise; the report says which.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::Resource;
use scheduler::app::{self, RunOptions as AppOptions};
use scheduler::Scheduler;
use tokio::sync::oneshot;

use crate::in_process::{SchedulerSetup, Target};
use crate::objects::Object;
use crate::recorder::BenchRecorder;
use crate::BenchError;

/// The scheduler's API client limits in `--mode http` and in the configuration written for
/// `--scheduler-command`: every request takes a token from a bucket of `burst` tokens
/// refilled at `qps` per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    pub qps: f32,
    pub burst: i32,
}

impl ClientLimits {
    /// Upstream scheduler_perf's (QPS 5,000, burst 5,000), under which its floors were
    /// measured.
    pub const UPSTREAM: ClientLimits = ClientLimits {
        qps: 5000.0,
        burst: 5000,
    };

    /// As the report shows them: `5000`, or `50000 (burst 10000)` when the burst differs.
    pub fn describe(&self) -> String {
        if f64::from(self.qps) == f64::from(self.burst) {
            format!("{}", self.qps)
        } else {
            format!("{} (burst {})", self.qps, self.burst)
        }
    }
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits::UPSTREAM
    }
}

/// Requests the benchmark keeps in flight while creating objects.
const IN_FLIGHT: usize = 64;

/// How long the scheduler may take to list everything and sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

type BoxedRun = Pin<Box<dyn Future<Output = Result<(), app::RunError>> + Send>>;

/// The local API server and `run`'s scheduler, on a tokio runtime of this process.
pub struct Http {
    /// Taken on drop, to shut it down without waiting for leftover writes.
    rt: Option<tokio::runtime::Runtime>,
    server: Mutex<Option<apiserver::Server>>,
    client: kube::Client,
    recorder: Arc<BenchRecorder>,
    /// The scheduler's future until `start` spawns it, then its task.
    run: Mutex<Option<BoxedRun>>,
    task: Mutex<Option<tokio::task::JoinHandle<Result<(), app::RunError>>>>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    started: Mutex<Option<oneshot::Receiver<Scheduler>>>,
    kubeconfig: String,
    /// The scheduler's client limits as reported (`n/a` without a scheduler).
    client_qps: String,
}

/// Starts the local API server on a free loopback port, on a runtime of its own, with a
/// kube-rs client for it.
fn start_api() -> Result<(tokio::runtime::Runtime, apiserver::Server, kube::Client), BenchError> {
    // Two workers: the API server, the informers and the binding tasks share them with
    // the scheduling loop's thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-http")
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    let (server, client) = rt.block_on(async {
        let server = apiserver::Server::start(apiserver::Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..apiserver::Config::default()
        })
        .await
        .map_err(|e| BenchError::Http(format!("starting the API server: {e}")))?;
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig())
            .map_err(|e| BenchError::Http(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| BenchError::Http(e.to_string()))?;
        let client = kube::Client::try_from(config).map_err(|e| BenchError::Http(e.to_string()))?;
        Ok::<_, BenchError>((server, client))
    })?;
    Ok((rt, server, client))
}

/// The setup's configuration with its client limits in `clientConnection`, its source and
/// its registry.
pub(crate) fn resolve_for_http(
    setup: &SchedulerSetup,
) -> Result<
    (
        scheduler::config::KubeSchedulerConfiguration,
        String,
        plugins::Registry,
    ),
    BenchError,
> {
    let (mut cfg, source, registry) = setup.resolve()?;
    cfg.client_connection.qps = setup.client.qps;
    cfg.client_connection.burst = setup.client.burst;
    Ok((cfg, source, registry))
}

impl Http {
    pub fn new() -> Result<Http, BenchError> {
        Http::with_decisions(false)
    }

    /// `record_decisions`: the scheduler keeps an explained decision log and serves the
    /// web view (as `up` does), to measure what that costs.
    pub fn with_decisions(record_decisions: bool) -> Result<Http, BenchError> {
        Http::with_setup(&SchedulerSetup::default(), record_decisions)
    }

    /// The scheduler `setup` describes, as `kubesched run` would run it, but with the
    /// setup's client limits (upstream scheduler_perf's by default) and without leader
    /// election; `record_decisions` as for [`with_decisions`](Self::with_decisions).
    pub fn with_setup(setup: &SchedulerSetup, record_decisions: bool) -> Result<Http, BenchError> {
        let (rt, server, client) = start_api()?;
        let (cfg, source, registry) = resolve_for_http(setup)?;
        let recorder = Arc::new(BenchRecorder::default());
        let options = AppOptions {
            config: cfg,
            config_source: source,
            bind_address: SocketAddr::from(([127, 0, 0, 1], 0)),
            leader_election: None,
            seed: 1,
            extra_metrics: Some(recorder.clone()),
            decisions: record_decisions.then(scheduler::decisions::Decisions::default),
            simulator_annotations: false,
            feature_gates: setup.feature_gates,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let (started_tx, started_rx) = oneshot::channel::<Scheduler>();
        let run_client = client.clone();
        let run: BoxedRun = Box::pin(async move {
            let mut started_tx = Some(started_tx);
            app::run(
                run_client,
                options,
                &registry,
                move |s| {
                    if let Some(tx) = started_tx.take() {
                        let _ = tx.send(s.scheduler.clone());
                    }
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await
        });
        let kubeconfig = server.kubeconfig();
        Ok(Http {
            rt: Some(rt),
            server: Mutex::new(Some(server)),
            client,
            recorder,
            run: Mutex::new(Some(run)),
            task: Mutex::new(None),
            stop: Mutex::new(Some(stop)),
            started: Mutex::new(Some(started_rx)),
            kubeconfig,
            client_qps: setup.client.describe(),
        })
    }

    /// The local API server alone: objects are created through it, and no scheduler of
    /// this process runs ([`Target::start`] does nothing). `--scheduler-command` runs its
    /// scheduler against it.
    pub fn without_scheduler() -> Result<Http, BenchError> {
        let (rt, server, client) = start_api()?;
        let kubeconfig = server.kubeconfig();
        Ok(Http {
            rt: Some(rt),
            server: Mutex::new(Some(server)),
            client,
            recorder: Arc::new(BenchRecorder::default()),
            run: Mutex::new(None),
            task: Mutex::new(None),
            stop: Mutex::new(None),
            started: Mutex::new(None),
            kubeconfig,
            client_qps: "n/a".into(),
        })
    }

    /// A client of the API server.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// A kubeconfig for the API server.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// The runtime the API server runs on, for tasks that talk to it.
    pub fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.rt.as_ref().map(tokio::runtime::Runtime::handle)
    }

    /// Sends every item through `f`, `IN_FLIGHT` at a time; failures are logged.
    fn each<T, F, Fut>(&self, items: Vec<T>, what: &'static str, f: F)
    where
        T: Send + 'static,
        F: Fn(kube::Client, T) -> Fut,
        Fut: Future<Output = Result<(), kube::Error>>,
    {
        let Some(rt) = &self.rt else { return };
        let client = self.client.clone();
        rt.block_on(async {
            stream::iter(items)
                .map(|item| f(client.clone(), item))
                .buffer_unordered(IN_FLIGHT)
                .for_each(|r| async move {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "creating {what} failed");
                    }
                })
                .await;
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stands for the name in a pod serialized as a template (never a valid pod name: upper
/// case).
const NAME_PLACEHOLDER: &str = "KUBESCHED-BENCH-POD-NAME";

/// The create bodies of a run of pods: the JSON of each, byte for byte as
/// `serde_json::to_vec` writes it, made from one serialized template per run of pods that
/// are equal but for their names.
#[derive(Debug)]
pub(crate) struct PodBodies {
    /// The template: a pod with its name taken out.
    pod: Pod,
    /// Its JSON up to the name's value, and from after it.
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl PodBodies {
    /// `(namespace, body)` of each pod, in order.
    pub(crate) fn of(pods: Vec<Pod>) -> Vec<(String, Vec<u8>)> {
        let mut template: Option<PodBodies> = None;
        pods.into_iter()
            .map(|mut pod| {
                let namespace = namespace_of(&pod);
                let Some(name) = pod.metadata.name.take() else {
                    return (namespace, serde_json::to_vec(&pod).unwrap_or_default());
                };
                if template.as_ref().is_none_or(|t| t.pod != pod) {
                    template = PodBodies::new(pod.clone());
                }
                let body = match &template {
                    Some(t) => t.body(&name),
                    None => {
                        pod.metadata.name = Some(name);
                        serde_json::to_vec(&pod).unwrap_or_default()
                    }
                };
                (namespace, body)
            })
            .collect()
    }

    /// The template of `pod` (whose name was taken out), `None` when its JSON does not
    /// hold the placeholder name exactly once.
    fn new(pod: Pod) -> Option<PodBodies> {
        let mut named = pod.clone();
        named.metadata.name = Some(NAME_PLACEHOLDER.to_string());
        let json = serde_json::to_vec(&named).ok()?;
        let value = format!("\"{NAME_PLACEHOLDER}\"");
        let value = value.as_bytes();
        let mut at = json
            .windows(value.len())
            .enumerate()
            .filter(|(_, w)| *w == value);
        let (start, _) = at.next()?;
        if at.next().is_some() {
            return None;
        }
        Some(PodBodies {
            pod,
            head: json[..start].to_vec(),
            tail: json[start + value.len()..].to_vec(),
        })
    }

    fn body(&self, name: &str) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.head.len() + name.len() + 2 + self.tail.len());
        body.extend_from_slice(&self.head);
        // Writing a &str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut body, name);
        body.extend_from_slice(&self.tail);
        body
    }
}

fn namespace_of(pod: &Pod) -> String {
    pod.metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into())
}

impl Target for Http {
    fn mode(&self) -> &'static str {
        "http"
    }

    fn client_qps(&self) -> String {
        self.client_qps.clone()
    }

    fn recorder(&self) -> &BenchRecorder {
        &self.recorder
    }

    fn create_namespace(&self, name: &str) {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        self.each(vec![ns], "namespace", |c, ns| async move {
            match Api::<Namespace>::all(c)
                .create(&PostParams::default(), &ns)
                .await
            {
                Ok(_) => Ok(()),
                // `default` exists from the start.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        });
    }

    fn create_nodes(&self, nodes: Vec<Node>) {
        self.each(nodes, "node", |c, n| async move {
            Api::<Node>::all(c)
                .create(&PostParams::default(), &n)
                .await
                .map(drop)
        });
    }

    fn create_pods(&self, pods: Vec<Pod>) {
        let bodies = PodBodies::of(pods);
        self.each(bodies, "pod", |c, (namespace, body)| async move {
            let request = kube::core::Request::new(Pod::url_path(&(), Some(&namespace)))
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
            scheduler::client::raw::send_discarding(&c, request, "create").await
        });
    }

    fn create(&self, obj: &Object) {
        match obj {
            Object::Node(n) => self.create_nodes(vec![(**n).clone()]),
            Object::Pod(p) => self.create_pods(vec![(**p).clone()]),
            Object::Service(s) => {
                let s: Service = (**s).clone();
                self.each(vec![s], "service", |c, s| async move {
                    let ns = s
                        .metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into());
                    Api::<Service>::namespaced(c, &ns)
                        .create(&PostParams::default(), &s)
                        .await
                        .map(drop)
                });
            }
        }
    }

    fn delete(&self, obj: Object) {
        let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
        let ns = |m: &ObjectMeta| m.namespace.clone().unwrap_or_else(|| "default".into());
        match obj {
            Object::Node(n) => self.each(
                vec![name(&n.metadata)],
                "node deletion",
                |c, n| async move {
                    Api::<Node>::all(c)
                        .delete(&n, &DeleteParams::default())
                        .await
                        .map(drop)
                },
            ),
            Object::Pod(p) => {
                let id = (ns(&p.metadata), name(&p.metadata));
                self.each(vec![id], "pod deletion", |c, (ns, n)| async move {
                    Api::<Pod>::namespaced(c, &ns)
                        .delete(&n, &DeleteParams::default())
                        .await
                        .map(drop)
                })
            }
            Object::Service(s) => {
                let id = (ns(&s.metadata), name(&s.metadata));
                self.each(vec![id], "service deletion", |c, (ns, n)| async move {
                    Api::<Service>::namespaced(c, &ns)
                        .delete(&n, &DeleteParams::default())
                        .await
                        .map(drop)
                })
            }
        }
    }

    fn start(&self) -> Result<(), BenchError> {
        let Some(run) = lock(&self.run).take() else {
            return Ok(());
        };
        let Some(rt) = &self.rt else { return Ok(()) };
        *lock(&self.task) = Some(rt.spawn(run));
        let started = lock(&self.started).take();
        let Some(started) = started else {
            return Ok(());
        };
        rt.block_on(async {
            let sched = tokio::time::timeout(SYNC_TIMEOUT, started)
                .await
                .map_err(|_| BenchError::Http("the scheduler did not start".into()))?
                .map_err(|_| BenchError::Http("the scheduler stopped while starting".into()))?;
            tokio::time::timeout(SYNC_TIMEOUT, sched.wait_synced())
                .await
                .map_err(|_| BenchError::Http("the scheduler's informers did not sync".into()))
        })
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
        let task = lock(&self.task).take();
        let server = lock(&self.server).take();
        let Some(rt) = self.rt.take() else { return };
        rt.block_on(async {
            if let Some(t) = task {
                match tokio::time::timeout(Duration::from_secs(30), t).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => {
                        tracing::warn!(error = %e, "the scheduler stopped with an error")
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "the scheduler task failed"),
                    Err(_) => tracing::warn!("the scheduler did not stop in 30 s"),
                }
            }
        });
        // Status and event writes still queued are dropped with the runtime, before the
        // server goes: they would only fail against a stopped server.
        drop(server);
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}

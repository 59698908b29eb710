//! `--scheduler-command`: the workload goes through the local API server, as in
//! `--mode http`, and the scheduler is another process, a command the user gives (upstream's
//! kube-scheduler, or `kubesched run` itself), so that two schedulers can be measured the
//! same way on one machine.
//!
//! The command runs under `sh -c` once the nodes exist, with `{kubeconfig}` replaced by the
//! path of a kubeconfig for the API server, `{config}` by the path of a
//! KubeSchedulerConfiguration ([`scheduler_config`]: that kubeconfig, leader election off,
//! client QPS and burst 5,000 as upstream's scheduler_perf sets them, one profile for
//! `default-scheduler`, the bench pods' scheduler), and `KUBECONFIG` set to the kubeconfig.
//! Its output goes to a log file whose end is quoted if it exits during the run.
//!
//! Ready: the scheduler is ready when it has bound a probe pod (namespace
//! [`PROBE_NAMESPACE`], deleted once bound): that needs its node and pod informers synced and
//! its binding path working, whatever the scheduler is, without knowing its ports.
//!
//! Bound pods are counted from the API server's side, by a watch on pods with
//! `spec.nodeName!=` (each pod counted once, when it first shows bound), since the other
//! process's metrics are not ours to read. Attempt latency is therefore not reported. Its
//! CPU time (utime + stime of the process tree, over the measured phase) and peak RSS
//! (`VmHWM` of the tree) come from /proc ([`crate::process`]).
//!
//! **Invariant:** the process tree is ended when the target is dropped (end of the run,
//! timeout, or error), SIGTERM first, then SIGKILL.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ObjectList, Request};
use serde::Deserialize;

use crate::http::{ClientLimits, Http};
use crate::in_process::Target;
use crate::objects::Object;
use crate::recorder::BenchRecorder;
use crate::{process, BenchError};

/// The namespace of the readiness probe pod; pods in it are not counted.
pub const PROBE_NAMESPACE: &str = "kubesched-bench-probe";
const PROBE_POD: &str = "ready";

/// How long the scheduler may take to start and bind the probe pod.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How often the probe is checked while waiting.
const READY_POLL: Duration = Duration::from_millis(10);

/// Pause before the bind-counting watch is opened again after a failure.
const REWATCH_BACKOFF: Duration = Duration::from_millis(200);

/// Lines of the scheduler's output quoted when it exits during a run.
const LOG_TAIL_LINES: usize = 20;

/// The field selector of bound pods.
const BOUND: &str = "spec.nodeName!=";

/// The local API server, and the user's scheduler command against it.
pub struct External {
    api: Http,
    command: String,
    /// Holds the kubeconfig, the configuration and the scheduler's log; removed on drop.
    dir: tempfile::TempDir,
    child: Mutex<Option<Child>>,
    counter: Arc<BindCounter>,
    watch: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The client limits the written configuration sets, as reported.
    client_qps: String,
}

/// Pods seen bound, each counted once into the recorder.
struct BindCounter {
    recorder: BenchRecorder,
    seen: Mutex<HashSet<String>>,
    probe_bound: AtomicBool,
}

impl BindCounter {
    fn note(&self, namespace: &str, name: &str) {
        if namespace == PROBE_NAMESPACE {
            self.probe_bound.store(true, Ordering::Release);
            return;
        }
        let key = format!("{namespace}/{name}");
        let new = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
        if new {
            use scheduler::metrics::MetricsRecorder;
            self.recorder.observe_pod_scheduled(1, Duration::ZERO);
        }
    }
}

/// What the bind counter reads of a pod: its name and the resourceVersion to resume from.
/// Everything else of the pod is skipped, not decoded.
#[derive(Debug, Clone, Deserialize)]
struct BoundPod {
    metadata: BoundMeta,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundMeta {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    resource_version: Option<String>,
}

/// The KubeSchedulerConfiguration written for `{config}`.
pub fn scheduler_config(kubeconfig: &Path, client: ClientLimits) -> String {
    // A JSON string is a YAML scalar: the path is quoted whatever it holds.
    let path = serde_json::Value::String(kubeconfig.display().to_string());
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\n\
         kind: KubeSchedulerConfiguration\n\
         clientConnection:\n  kubeconfig: {path}\n  qps: {}\n  burst: {}\n\
         leaderElection:\n  leaderElect: false\n\
         profiles:\n- schedulerName: {}\n",
        client.qps,
        client.burst,
        scheduler::config::defaults::SCHEDULER_NAME
    )
}

/// `command` with `{kubeconfig}` and `{config}` replaced by the paths, quoted for `sh`.
pub fn command_line(command: &str, kubeconfig: &Path, config: &Path) -> String {
    command
        .replace(
            "{kubeconfig}",
            &shell_quote(&kubeconfig.display().to_string()),
        )
        .replace("{config}", &shell_quote(&config.display().to_string()))
}

/// `s` as one `sh` word: as it is when it holds only characters the shell leaves alone,
/// otherwise in single quotes.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl External {
    /// Starts the API server and writes the files; the command starts in
    /// [`Target::start`], once the nodes exist. The configuration written for `{config}`
    /// sets `client`'s QPS and burst.
    pub fn new(command: &str, client: ClientLimits) -> Result<External, BenchError> {
        let api = Http::without_scheduler()?;
        let dir = tempfile::Builder::new()
            .prefix("kubesched-bench-")
            .tempdir()
            .map_err(|e| BenchError::External(format!("creating a temporary directory: {e}")))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let config = dir.path().join("kube-scheduler.yaml");
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text)
                .map_err(|e| BenchError::External(format!("writing {}: {e}", path.display())))
        };
        write(&kubeconfig, api.kubeconfig())?;
        write(&config, &scheduler_config(&kubeconfig, client))?;
        Ok(External {
            api,
            command: command.to_string(),
            dir,
            child: Mutex::new(None),
            counter: Arc::new(BindCounter {
                recorder: BenchRecorder::default(),
                seen: Mutex::new(HashSet::new()),
                probe_bound: AtomicBool::new(false),
            }),
            watch: Mutex::new(None),
            client_qps: client.describe(),
        })
    }

    fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("scheduler.log")
    }

    fn child_pid(&self) -> Option<u32> {
        lock(&self.child).as_ref().map(Child::id)
    }

    fn spawn(&self) -> Result<(), BenchError> {
        let line = command_line(
            &self.command,
            &self.kubeconfig_path(),
            &self.dir.path().join("kube-scheduler.yaml"),
        );
        let log = File::create(self.log_path())
            .map_err(|e| BenchError::External(format!("creating the scheduler's log: {e}")))?;
        let log2 = log
            .try_clone()
            .map_err(|e| BenchError::External(format!("opening the scheduler's log: {e}")))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(&line)
            .env("KUBECONFIG", self.kubeconfig_path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| BenchError::External(format!("starting sh -c {line:?}: {e}")))?;
        tracing::info!(pid = child.id(), command = %line, "started the scheduler");
        *lock(&self.child) = Some(child);
        Ok(())
    }

    /// Opens the bind-counting watch; returns once its first list is done, so that no
    /// bind is missed.
    fn start_counting(&self) -> Result<(), BenchError> {
        let Some(rt) = self.api.handle() else {
            return Ok(());
        };
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
        let task = rt.spawn(count_binds(
            self.api.client().clone(),
            self.counter.clone(),
            listed_tx,
        ));
        *lock(&self.watch) = Some(task);
        rt.block_on(async { tokio::time::timeout(READY_TIMEOUT, listed_rx).await })
            .map_err(|_| BenchError::External("listing pods timed out".into()))?
            .map_err(|_| BenchError::External("the pod watch stopped while listing".into()))
    }

    fn probe_pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(PROBE_POD.into()),
                namespace: Some(PROBE_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "pause".into(),
                    image: Some("registry.k8s.io/pause:3.10".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    /// Creates the probe pod, waits until it is bound, and deletes it.
    fn wait_ready(&self) -> Result<(), BenchError> {
        let Some(rt) = self.api.handle() else {
            return Ok(());
        };
        let client = self.api.client().clone();
        rt.block_on(async {
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(PROBE_NAMESPACE.into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            Api::<Namespace>::all(client.clone())
                .create(&PostParams::default(), &ns)
                .await?;
            Api::<Pod>::namespaced(client, PROBE_NAMESPACE)
                .create(&PostParams::default(), &External::probe_pod())
                .await
                .map(drop)
        })
        .map_err(|e| BenchError::External(format!("creating the probe pod: {e}")))?;
        let deadline = Instant::now() + READY_TIMEOUT;
        while !self.counter.probe_bound.load(Ordering::Acquire) {
            self.check()?;
            if Instant::now() >= deadline {
                return Err(BenchError::External(format!(
                    "the scheduler did not bind the probe pod {PROBE_NAMESPACE}/{PROBE_POD} in \
                     {READY_TIMEOUT:?}{}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(READY_POLL);
        }
        let client = self.api.client().clone();
        let deleted = rt.block_on(async {
            Api::<Pod>::namespaced(client, PROBE_NAMESPACE)
                .delete(PROBE_POD, &DeleteParams::default().grace_period(0))
                .await
        });
        if let Err(e) = deleted {
            tracing::warn!(error = %e, "deleting the probe pod failed");
        }
        Ok(())
    }

    /// `; its output ended with: ...` from the scheduler's log, or nothing.
    fn log_tail(&self) -> String {
        let Ok(text) = std::fs::read_to_string(self.log_path()) else {
            return String::new();
        };
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        if tail.is_empty() {
            "; it wrote nothing".into()
        } else {
            format!("; its output ended with:\n{tail}")
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lists the bound pods, then watches them from the list's resourceVersion, noting every
/// pod seen; watches again after the watch ends, lists again after 410. Runs until aborted.
async fn count_binds(
    client: kube::Client,
    counter: Arc<BindCounter>,
    listed: tokio::sync::oneshot::Sender<()>,
) {
    let mut listed = Some(listed);
    let mut from: Option<String> = None;
    let request = Request::new("/api/v1/pods");
    loop {
        let rv = match from.take() {
            Some(rv) => rv,
            None => {
                let list = async {
                    let req = request
                        .list(&ListParams::default().fields(BOUND))
                        .map_err(kube::Error::BuildRequest)?;
                    client.request::<ObjectList<BoundPod>>(req).await
                };
                match list.await {
                    Ok(list) => {
                        for p in &list.items {
                            counter.note(&p.metadata.namespace, &p.metadata.name);
                        }
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                        list.metadata.resource_version.unwrap_or_default()
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "listing bound pods failed");
                        tokio::time::sleep(REWATCH_BACKOFF).await;
                        continue;
                    }
                }
            }
        };
        let req = match request.watch(&WatchParams::default().fields(BOUND), &rv) {
            Ok(req) => req,
            Err(e) => {
                tracing::warn!(error = %e, "building the pod watch failed");
                return;
            }
        };
        let events = match client.request_events::<BoundPod>(req).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "watching bound pods failed");
                tokio::time::sleep(REWATCH_BACKOFF).await;
                from = Some(rv);
                continue;
            }
        };
        let mut events = std::pin::pin!(events);
        let mut last = Some(rv);
        while let Some(event) = events.next().await {
            match event {
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => {
                    counter.note(&p.metadata.namespace, &p.metadata.name);
                    last = p.metadata.resource_version.or(last);
                }
                Ok(WatchEvent::Deleted(p)) => {
                    last = p.metadata.resource_version.or(last);
                }
                Ok(WatchEvent::Bookmark(b)) => last = Some(b.metadata.resource_version),
                Ok(WatchEvent::Error(e)) if e.code == 410 => {
                    last = None;
                    break;
                }
                Ok(WatchEvent::Error(e)) => {
                    tracing::warn!(error = ?e, "the pod watch failed");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the pod watch failed");
                    break;
                }
            }
        }
        from = last;
    }
}

impl Target for External {
    fn mode(&self) -> &'static str {
        "external"
    }

    fn client_qps(&self) -> String {
        // What the generated configuration sets; a command that does not read `{config}`
        // may use its own.
        self.client_qps.clone()
    }

    fn recorder(&self) -> &BenchRecorder {
        &self.counter.recorder
    }

    fn create_namespace(&self, name: &str) {
        self.api.create_namespace(name);
    }

    fn create_nodes(&self, nodes: Vec<Node>) {
        self.api.create_nodes(nodes);
    }

    fn create_pods(&self, pods: Vec<Pod>) {
        self.api.create_pods(pods);
    }

    fn create(&self, obj: &Object) {
        self.api.create(obj);
    }

    fn delete(&self, obj: Object) {
        self.api.delete(obj);
    }

    fn start(&self) -> Result<(), BenchError> {
        self.start_counting()?;
        self.spawn()?;
        self.wait_ready()
    }

    fn check(&self) -> Result<(), BenchError> {
        let mut child = lock(&self.child);
        let Some(c) = child.as_mut() else {
            return Ok(());
        };
        match c.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                drop(child);
                Err(BenchError::External(format!(
                    "the scheduler command exited ({status}) during the run{}",
                    self.log_tail()
                )))
            }
            Err(e) => Err(BenchError::External(format!(
                "checking the scheduler process: {e}"
            ))),
        }
    }

    fn scheduler_cpu_seconds(&self) -> Option<f64> {
        process::cpu_seconds(self.child_pid()?)
    }

    fn peak_rss_mib(&self) -> Option<f64> {
        process::peak_rss_mib(self.child_pid()?)
    }

    fn scheduler_command(&self) -> Option<String> {
        Some(self.command.clone())
    }
}

impl Drop for External {
    fn drop(&mut self) {
        if let Some(mut child) = lock(&self.child).take() {
            process::stop_tree(&mut child, process::TERM_GRACE);
        }
        if let Some(task) = lock(&self.watch).take() {
            task.abort();
        }
        // `api` (the API server) goes after the scheduler, which would otherwise log
        // connection errors while it stops.
    }
}

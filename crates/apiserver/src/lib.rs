//! `apiserver`: a local Kubernetes-compatible API server that real kubectl, kube-rs and the
//! official Python client use unmodified.
//!
//! Start reading at [`Server`]; requests are routed and answered in `http`, objects live in
//! [`store`], and what the real apiserver does to objects on the way in is in [`admission`]
//! and [`validation`]. Connections (limit, timeouts) are `serve`; chunked lists are
//! [`paging`]; HTTPS is [`tls`]; the controllers that
//! run inside the server are [`namespace`] (always) and, on request, [`kubelet`],
//! [`devicedriver`], [`pv_controller`], [`provisioner`], [`replicaset`], [`deployment`],
//! [`daemonset`], [`statefulset`], [`job`], [`resourceclaim`] and [`garbagecollector`];
//! resource.k8s.io objects are checked by [`resource_validation`].
//! The checklist it follows is the project's apiserver-compat reference (docs/apiserver.md
//! says what is implemented).
//!
//! **Invariant:** this crate never depends on the scheduler, plugins or framework crates: the
//! scheduler reaches it only over HTTP, as it would a real cluster.
//!
//! ```no_run
//! # async fn demo() -> Result<(), apiserver::Error> {
//! let config = apiserver::Config {
//!     listen: ([127, 0, 0, 1], 0).into(),
//!     ..apiserver::Config::default()
//! };
//! let server = apiserver::Server::start(config).await?;
//! std::fs::write("/tmp/kubeconfig", server.kubeconfig())?;
//! println!("serving on {}", server.url());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod admission;
pub mod controller;
pub mod daemonset;
pub mod deployment;
pub mod devicedriver;
pub mod discovery;
pub mod garbagecollector;
pub mod history;
mod http;
pub mod job;
pub mod kubelet;
pub mod meta;
pub mod namespace;
pub mod openapi;
pub mod paging;
pub mod patch;
pub mod protobuf;
pub mod provisioner;
pub mod pv_controller;
pub mod quantity;
mod recorder;
pub mod replicaset;
pub mod resource_validation;
pub mod resourceclaim;
pub mod resources;
pub mod selectors;
mod serve;
pub mod statefulset;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;
pub mod wal;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use store::Store;
pub use tls::TlsConfig;

/// Errors starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("serving the API failed: {0}")]
    Serve(#[from] std::io::Error),
    /// The data directory could not be opened or recovered.
    #[error("opening the data directory")]
    Storage(#[from] wal::WalError),
    /// The serving certificate or key could not be loaded.
    #[error("loading the TLS certificate")]
    Tls(#[from] tls::TlsError),
    /// A `--cors-allowed-origins` pattern is not a regular expression.
    #[error("invalid CORS allowed origin {pattern:?}")]
    CorsOrigin {
        /// The pattern.
        pattern: String,
        /// Why.
        source: regex::Error,
    },
    /// The token file could not be read or holds no token.
    #[error("reading token file {}", path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Creating the bootstrap objects failed (a bug).
    #[error("bootstrapping {what}: {source}")]
    Bootstrap {
        /// The object.
        what: String,
        /// Why.
        source: status::ApiError,
    },
}

impl Error {
    /// Whether the error is in what the user gave (flags, files), not in the server: a
    /// command exits 2 on these.
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            Error::Tls(_)
                | Error::TokenFile { .. }
                | Error::CorsOrigin { .. }
                | Error::Storage(
                    wal::WalError::Locked { .. }
                        | wal::WalError::Corrupt { .. }
                        | wal::WalError::Missing { .. }
                )
        )
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Largest accepted request body (upstream: 3 MiB).
    pub max_body_bytes: usize,
    /// Writes kept for watches resuming from a resourceVersion; older ones get 410.
    pub event_log_capacity: usize,
    /// Bytes of events a watcher may have waiting for its connection. A watcher that falls
    /// further behind is ended (its response ends; the client watches again or relists), as
    /// upstream ends a watcher too slow to take its events. One event larger than this is
    /// still sent.
    pub watch_backlog_bytes: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// With a directory, every write is logged there and fsynced before it is acknowledged
    /// or shown to watchers, and the state is recovered from it on start (see [`wal`]).
    pub data_dir: Option<std::path::PathBuf>,
    /// Start from what is left of a damaged data directory instead of refusing it: a damaged
    /// last log is copied aside and truncated at the damage, and files its manifest names but
    /// that are missing are skipped, each with a warning.
    pub data_dir_repair: bool,
    /// The write-ahead log is compacted (snapshot + new log) when it grows past this.
    pub compact_bytes: u64,
    /// Bearer tokens: when not empty, every request but `/healthz`, `/livez`, `/readyz` and
    /// `/version` needs `Authorization: Bearer <one of them>` (401 otherwise). The first is
    /// written into [`Server::kubeconfig`].
    pub tokens: Vec<String>,
    /// Run the kubelet stand-in ([`kubelet`]): bound pods become Running and Ready once
    /// their claims are Bound and their ResourceClaims reserved for them, nodes Ready; and
    /// the device driver stand-in ([`devicedriver`]): nodes' `kubesched.dev/devices`
    /// annotations are published as ResourceSlices.
    pub simulate_kubelets: bool,
    /// With [`Config::simulate_kubelets`]: how long a Job's pod runs before the kubelet
    /// stand-in completes it (KWOK's `pod-complete` stage; default 1 s).
    pub job_pod_completion: Duration,
    /// Run the PersistentVolume controller stand-in ([`pv_controller`]) and the provisioner
    /// stand-in ([`provisioner`]): claims bind to volumes, and claims handed to a provisioner
    /// in [`Config::provisioners`] get a volume.
    pub volume_controllers: bool,
    /// Run the workload controllers: the ReplicaSet ([`replicaset`]), Deployment
    /// ([`deployment`]), DaemonSet ([`daemonset`]), StatefulSet ([`statefulset`]), Job
    /// ([`job`]) and ResourceClaim ([`resourceclaim`]) controllers and the garbage collector
    /// ([`garbagecollector`]).
    pub workload_controllers: bool,
    /// The provisioner names (a StorageClass's `provisioner`) the provisioner stand-in
    /// serves.
    pub provisioners: Vec<String>,
    /// Create a default StorageClass ([`default_storage_class`]) on start unless a class is
    /// already the default.
    pub default_storage_class: bool,
    /// Serve HTTPS with this certificate; [`Server::kubeconfig`] then carries the
    /// certificate as `certificate-authority-data`.
    pub tls: Option<TlsConfig>,
    /// Open connections at most. At the limit the connection idle longest is closed for each
    /// new one; a new connection is refused only while every open one has a request in
    /// flight. Keep it below the process's file descriptor limit (`ulimit -n`).
    pub max_connections: usize,
    /// A new connection must send its first request head in this time, and a kept-alive one
    /// must finish a head in this time from its first byte, or it is closed (upstream: 32 s).
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no request in flight and nothing sent since its last
    /// response is closed after this time (upstream: 90 s, the keep-alive timeout of Go's
    /// HTTP client). A watch is a request in flight for as long as it runs.
    pub idle_timeout: Duration,
    /// Regular expressions (upstream's `--cors-allowed-origins`): a request with an `Origin`
    /// header, which browsers send from web pages, is refused with 403 unless one of them
    /// matches it anywhere (anchor them: `^https://dash\.example\.com$`); a matching one gets
    /// CORS headers. Clients such as kubectl send no `Origin`.
    pub cors_allowed_origins: Vec<String>,
    /// Host names accepted in the `Host` header besides `localhost` and IP addresses; any
    /// other name is refused with 403, so a DNS name rebound to this server cannot read from
    /// it.
    pub allowed_hosts: Vec<String>,
    /// API groups not served over HTTP (upstream's `--runtime-config GROUP/VERSION=false`):
    /// discovery leaves them out and their paths answer 404, as on a cluster older than the
    /// group or with it turned off. Controllers inside the server still use their kinds.
    pub disabled_api_groups: Vec<String>,
}

/// Reads a token file: upstream's `--token-auth-file` CSV (`token,user,uid,"groups"`; only
/// the token is used) or one token per line; blank lines and `#` comments are skipped.
pub fn read_token_file(path: &std::path::Path) -> std::io::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(',').next())
        .map(|t| t.trim().trim_matches('"').to_string())
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: no token in the file", path.display()),
        ));
    }
    Ok(tokens)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            max_body_bytes: 3 * 1024 * 1024,
            event_log_capacity: 100_000,
            watch_backlog_bytes: 16 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(30),
            data_dir: None,
            data_dir_repair: false,
            compact_bytes: 64 * 1024 * 1024,
            tokens: Vec::new(),
            simulate_kubelets: false,
            job_pod_completion: kubelet::DEFAULT_JOB_POD_COMPLETION,
            volume_controllers: false,
            workload_controllers: false,
            provisioners: vec![provisioner::DEFAULT_PROVISIONER.to_string()],
            default_storage_class: false,
            tls: None,
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            cors_allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            disabled_api_groups: Vec::new(),
        }
    }
}

/// A running API server. Dropping it does not stop it; call [`Server::shutdown`].
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    store: Arc<Store>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
    token: Option<String>,
    kubelets: Option<JoinHandle<()>>,
    /// The device driver stand-in, with the kubelets.
    device_driver: Option<JoinHandle<()>>,
    /// The PersistentVolume controller and provisioner stand-ins, when on.
    volume_controllers: Vec<JoinHandle<()>>,
    /// The workload controllers, when on.
    workload_controllers: Vec<JoinHandle<()>>,
    /// The namespace controller ([`namespace`]).
    namespaces: JoinHandle<()>,
    /// The serving certificate (PEM) when serving HTTPS.
    ca_pem: Option<Vec<u8>>,
}

/// Lists kept for their later pages (see [`paging`]): enough for every informer of a
/// scheduler relisting at once, and each holds only `Arc`s of objects.
const LIST_SNAPSHOTS: usize = 32;

/// Namespaces every cluster starts with.
pub const BOOTSTRAP_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The default StorageClass a local cluster starts with: kind's `standard` class, served by
/// the provisioner stand-in's default provisioner.
pub fn default_storage_class() -> serde_json::Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": "standard",
                        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
           "provisioner": provisioner::DEFAULT_PROVISIONER,
           "reclaimPolicy": "Delete",
           "volumeBindingMode": "WaitForFirstConsumer"})
}

/// Creates [`default_storage_class`] unless some class is the default already (a recovered
/// store keeps its own).
fn bootstrap_storage_class(store: &Store) -> Result<(), Error> {
    let Some(classes) = resources::lookup("storage.k8s.io", "v1", "storageclasses") else {
        return Ok(());
    };
    let (existing, _) = store.list(classes, None);
    if admission::default_storage_class(&existing).is_some() {
        return Ok(());
    }
    let class = default_storage_class();
    let name = class
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .to_string();
    if store.get(classes, "", &name).is_some() {
        return Ok(());
    }
    store
        .create(classes, "", class, false)
        .map_err(|source| Error::Bootstrap {
            what: "the default storage class".to_string(),
            source,
        })?;
    Ok(())
}

/// Creates the bootstrap namespaces and priority classes that do not exist (a recovered store
/// keeps its own).
fn bootstrap(store: &Store) -> Result<(), Error> {
    let err = |what: &str| {
        let what = what.to_string();
        move |source| Error::Bootstrap { what, source }
    };
    let namespaces = resources::lookup("", "v1", "namespaces");
    let pcs = resources::lookup("scheduling.k8s.io", "v1", "priorityclasses");
    let (Some(namespaces), Some(pcs)) = (namespaces, pcs) else {
        return Ok(());
    };
    for ns in BOOTSTRAP_NAMESPACES {
        let mut obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        admission::default_namespace(&mut obj);
        if store.get(namespaces, "", ns).is_none() {
            store.create(namespaces, "", obj, false).map_err(err(ns))?;
        }
    }
    for pc in admission::system_priority_classes() {
        let name = pc
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string();
        if store.get(pcs, "", &name).is_none() {
            store
                .create(pcs, "", pc, false)
                .map_err(err("system priority classes"))?;
        }
    }
    Ok(())
}

impl Server {
    /// Binds `config.listen`, creates the bootstrap objects and starts serving on the current
    /// tokio runtime.
    pub async fn start(config: Config) -> Result<Server, Error> {
        let cors_allowed_origins = config
            .cors_allowed_origins
            .iter()
            .map(|pattern| {
                regex::Regex::new(pattern).map_err(|source| Error::CorsOrigin {
                    pattern: pattern.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr()?;
        let store = Arc::new(match &config.data_dir {
            None => Store::new(config.event_log_capacity),
            Some(dir) => Store::open(
                config.event_log_capacity,
                dir,
                config.compact_bytes,
                config.data_dir_repair,
            )?,
        });
        bootstrap(&store)?;
        if config.default_storage_class {
            bootstrap_storage_class(&store)?;
        }
        let namespaces = tokio::spawn(namespace::run(store.clone()));
        let kubelets = config
            .simulate_kubelets
            .then(|| tokio::spawn(kubelet::run(store.clone(), config.job_pod_completion)));
        let device_driver = config
            .simulate_kubelets
            .then(|| tokio::spawn(devicedriver::run(store.clone())));
        let volume_controllers = if config.volume_controllers {
            vec![
                tokio::spawn(pv_controller::run(store.clone())),
                tokio::spawn(provisioner::run(store.clone(), config.provisioners.clone())),
            ]
        } else {
            Vec::new()
        };
        let workload_controllers = if config.workload_controllers {
            vec![
                tokio::spawn(replicaset::run(store.clone())),
                tokio::spawn(deployment::run(store.clone())),
                tokio::spawn(garbagecollector::run(store.clone())),
                tokio::spawn(job::run(store.clone())),
                tokio::spawn(daemonset::run(store.clone())),
                tokio::spawn(statefulset::run(store.clone())),
                tokio::spawn(resourceclaim::run(store.clone())),
            ]
        } else {
            Vec::new()
        };
        let state = Arc::new(http::AppState {
            store: store.clone(),
            max_body_bytes: config.max_body_bytes,
            addr,
            bookmark_interval: config.bookmark_interval,
            tokens: config.tokens.clone(),
            snapshots: paging::Snapshots::new(LIST_SNAPSHOTS),
            cors_allowed_origins,
            allowed_hosts: config.allowed_hosts.clone(),
            watch_backlog_bytes: config.watch_backlog_bytes,
            garbage_collector: config.workload_controllers,
            disabled_api_groups: config.disabled_api_groups.clone(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped = async {
            let _ = stopped.await;
        };
        let limits = serve::Limits {
            max_connections: config.max_connections,
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
        };
        let acceptor = config.tls.as_ref().map(TlsConfig::acceptor);
        let task = tokio::spawn(serve::serve(listener, acceptor, state, limits, stopped));
        tracing::info!(%addr, "API server listening");
        Ok(Server {
            addr,
            store,
            stop: Some(stop),
            task,
            token: config.tokens.first().cloned(),
            kubelets,
            device_driver,
            volume_controllers,
            workload_controllers,
            namespaces,
            ca_pem: config.tls.as_ref().map(|t| t.cert_pem().to_vec()),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, or `https://ADDR` when serving TLS.
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The object store (for in-process seeding and tests).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A kubeconfig pointing at this server, with the first token when tokens are required
    /// and the serving certificate as the cluster's certificate authority under TLS.
    pub fn kubeconfig(&self) -> String {
        write_kubeconfig(&self.url(), self.token.as_deref(), self.ca_pem.as_deref())
    }

    /// Runs until the server stops (it stops only on an error, or after [`Server::shutdown`]
    /// from elsewhere).
    pub async fn wait(mut self) -> Result<(), Error> {
        let _keep = self.stop.take();
        match (&mut self.task).await {
            Ok(r) => r.map_err(Error::Serve),
            Err(e) => Err(Error::Serve(std::io::Error::other(e))),
        }
    }

    /// Stops accepting connections, ends open watches and waits for the server task.
    pub async fn shutdown(mut self) {
        for k in self
            .kubelets
            .take()
            .into_iter()
            .chain(self.device_driver.take())
        {
            k.abort();
        }
        for c in self
            .volume_controllers
            .drain(..)
            .chain(self.workload_controllers.drain(..))
        {
            c.abort();
        }
        self.namespaces.abort();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Open watch streams keep graceful shutdown waiting; bound the wait.
        if tokio::time::timeout(Duration::from_secs(2), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

/// A kubeconfig (context `kubesched`) for a server at `server_url`, no credentials.
pub fn kubeconfig(server_url: &str) -> String {
    kubeconfig_with_token(server_url, None)
}

/// A kubeconfig (context `kubesched`) for a server at `server_url`, with a bearer token.
pub fn kubeconfig_with_token(server_url: &str, token: Option<&str>) -> String {
    write_kubeconfig(server_url, token, None)
}

/// A kubeconfig (context `kubesched`): the server, an optional bearer token and an optional
/// certificate authority (PEM, written base64-encoded as `certificate-authority-data`).
pub fn write_kubeconfig(server_url: &str, token: Option<&str>, ca_pem: Option<&[u8]>) -> String {
    use base64::Engine as _;
    let ca = ca_pem
        .map(|pem| {
            let data = base64::engine::general_purpose::STANDARD.encode(pem);
            format!("\n    certificate-authority-data: {data}")
        })
        .unwrap_or_default();
    let user = match token {
        // JSON strings are YAML: the token is quoted whatever it contains.
        Some(t) => format!("\n    token: {}", serde_json::Value::from(t)),
        None => " {}".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesched\n  cluster:\n    server: {server_url}{ca}\ncontexts:\n- name: kubesched\n  context:\n    cluster: kubesched\n    user: kubesched\n    namespace: default\ncurrent-context: kubesched\nusers:\n- name: kubesched\n  user:{user}\npreferences: {{}}\n"
    )
}

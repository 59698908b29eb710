//! The scheduler on the Kubernetes API: kube-rs plugged into the two narrow traits the
//! scheduling core sees the cluster through.
//!
//! - [`informers`] feeds the [`EventHandler`](crate::source::EventHandler) source from
//!   kube-rs watchers (add / update(old, new) / delete, re-list reconciliation, `synced`).
//! - [`KubeClusterClient`] implements the [`ClusterClient`](framework::ClusterClient) sink:
//!   bindings straight to the API, status patches and events on a bounded background
//!   worker, every write behind the `clientConnection` QPS/burst limiter.
//! - [`leader`] is leader election on a coordination.k8s.io/v1 Lease.
//! - [`connect`] builds the kube-rs client from `--kubeconfig`, `$KUBECONFIG` or the
//!   in-cluster service account.
//!
//! Upstream: the client-go informers, clientset and leader elector that
//! cmd/kube-scheduler/app/server.go wires together.

pub mod informers;
pub mod leader;
mod limiter;
pub mod raw;
mod writer;

#[cfg(test)]
mod raw_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use informers::{
    run_informers, serves_dynamic_resources, InformerOptions, DYNAMIC_RESOURCES_API,
};
pub use limiter::RateLimiter;
pub use writer::{KubeClusterClient, WriterOptions, MAX_EVENT_MESSAGE_BYTES};

/// Building the kube-rs client failed.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// The kubeconfig named by `--kubeconfig` could not be read or used.
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither `$KUBECONFIG`, `~/.kube/config` nor the in-cluster service account gave a
    /// configuration.
    #[error("no kubeconfig given and none could be inferred ($KUBECONFIG, ~/.kube/config, in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The configuration was read but no client could be built from it (for example an
    /// `https` server while kube's TLS feature is off).
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// A kube-rs client from `kubeconfig` when given (its current context), otherwise inferred
/// as kube-scheduler does: `$KUBECONFIG`, `~/.kube/config`, then the in-cluster service
/// account.
///
/// Upstream: cmd/kube-scheduler/app/options `createKubeConfig` (`--kubeconfig`, falling back
/// to in-cluster config).
pub async fn connect(kubeconfig: Option<&Path>) -> Result<kube::Client, ConnectError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_err = |source| ConnectError::Kubeconfig {
                path: path.to_path_buf(),
                source,
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_err)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_err)?
        }
        None => kube::Config::infer().await.map_err(ConnectError::Infer)?,
    };
    kube::Client::try_from(config).map_err(ConnectError::Client)
}

/// The [`framework::ClientError`] for a kube-rs error: API refusals keep their HTTP code and
/// message, everything else is a transport error.
pub(crate) fn client_error(err: kube::Error) -> framework::ClientError {
    match err {
        kube::Error::Api(status) => framework::ClientError::Api {
            code: status.code,
            message: status.message,
        },
        other => framework::ClientError::Transport(other.to_string()),
    }
}

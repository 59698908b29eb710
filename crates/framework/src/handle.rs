//! What plugins get from the framework when they are built: the parallelizer and the
//! cluster client (the sink for binding decisions).
//!
//! Upstream: framework.Handle. The scheduling core never talks HTTP: `run`/`up` implement
//! [`ClusterClient`] with kube-rs, `simulate` and `bench` in memory.

use std::sync::Arc;

use thiserror::Error;

use crate::interface::BoxFuture;
use crate::parallelize::Parallelizer;

/// A pod-to-node binding to write (`pods/binding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub node: String,
}

/// A write to the cluster that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    /// The API server refused the request (conflict, not found, forbidden, ...).
    #[error("api error {code}: {message}")]
    Api { code: u16, message: String },
    /// The request did not reach the API server or its answer was unreadable.
    #[error("transport error: {0}")]
    Transport(String),
}

/// The narrow interface through which the scheduler writes decisions to the cluster.
pub trait ClusterClient: Send + Sync {
    /// Binds a pod to a node.
    fn bind<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>>;
}

/// A client that accepts every binding without doing anything: for `simulate`, where
/// placements are applied to the in-memory snapshot instead.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopClient;

impl ClusterClient for NoopClient {
    fn bind<'a>(&'a self, _binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Services the framework offers to plugins.
#[derive(Clone)]
pub struct Handle {
    pub parallelizer: Parallelizer,
    pub client: Arc<dyn ClusterClient>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("parallelizer", &self.parallelizer)
            .finish_non_exhaustive()
    }
}

impl Handle {
    pub fn new(parallelizer: Parallelizer, client: Arc<dyn ClusterClient>) -> Self {
        Handle {
            parallelizer,
            client,
        }
    }

    /// A handle for tests and offline use: sequential, no-op client.
    pub fn offline() -> Self {
        Handle::new(Parallelizer::sequential(), Arc::new(NoopClient))
    }
}

//! DefaultBinder: binds the pod to the chosen node by writing a Binding (`pods/binding`)
//! through the cluster client.
//!
//! Upstream: pkg/scheduler/framework/plugins/defaultbinder. The Binding carries the pod's
//! UID, so the API server refuses it if the pod was deleted and re-created under the same
//! name meanwhile. A refused or failed write is an `Error` status with the client's message;
//! the runtime then forgets the assumed pod and retries it.

use std::sync::Arc;

use framework::{
    ArgsError, BindPlugin, Binding, BoxFuture, ClusterClient, CycleState, Handle, Plugin, PodInfo,
    Status,
};

use crate::names;

pub const NAME: &str = names::DEFAULT_BINDER;

/// Upstream: pkg/scheduler/framework/plugins/defaultbinder.DefaultBinder.
pub struct DefaultBinder {
    client: Arc<dyn ClusterClient>,
}

/// Builds the plugin around the handle's cluster client; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(DefaultBinder {
        client: Arc::clone(&handle.client),
    }))
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        Some(self)
    }
}

impl BindPlugin for DefaultBinder {
    fn bind<'a>(
        &'a self,
        _state: &'a CycleState,
        pod: &'a PodInfo,
        node_name: &'a str,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let binding = Binding {
                namespace: pod.namespace().to_string(),
                name: pod.name().to_string(),
                uid: pod.pod.metadata.uid.clone(),
                node: node_name.to_string(),
            };
            match self.client.bind(&binding).await {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e.to_string()),
            }
        })
    }
}

#[cfg(test)]
mod tests;

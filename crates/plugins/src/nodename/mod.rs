//! NodeName: a pod that names its node in `spec.nodeName` fits only that node.
//!
//! Upstream: pkg/scheduler/framework/plugins/nodename.

use std::sync::Arc;

use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventResource,
    FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, Status,
};
use framework::{SignFragment, SignPlugin};

use crate::names;

pub const NAME: &str = names::NODE_NAME;

/// Filter reason when the pod names another node.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// Upstream: nodename.NodeName.
#[derive(Debug, Default)]
pub struct NodeName;

/// Builds the plugin. Upstream has no args type for it and ignores whatever args are given.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(NodeName))
}

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for NodeName {
    /// The verdict depends on `spec.nodeName` only.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        let node_name = pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        Ok(vec![SignFragment::new(
            framework::sign::NODE_NAME_SIGNER,
            serde_json::Value::from(node_name.unwrap_or("")),
        )])
    }
}

impl FilterPlugin for NodeName {
    /// An empty `spec.nodeName` fits every node.
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match pod.node_name() {
            Some(wanted) if wanted != node.name() => Status::unresolvable(ERR_REASON),
            _ => Status::success(),
        }
    }
}

impl EnqueueExtensions for NodeName {
    /// Only a new node can carry the requested name. No hint: every node addition retries
    /// the pod (after its backoff), as upstream.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::new(
            EventResource::Node,
            ActionType::ADD,
        )]
    }
}

#[cfg(test)]
mod tests;

//! Pods nominated to a node by preemption, waiting for the victims to leave.
//!
//! Upstream: pkg/scheduler/backend/queue/nominator.go. The Filter pass counts these pods on
//! their node (when their priority is not lower) so that the freed room is not given away.

use std::collections::HashMap;
use std::sync::Arc;

use framework::PodInfo;

use framework::PodKey;

/// Node name → the pods nominated to it, in nomination order; pod key → node name.
#[derive(Default)]
pub(crate) struct Nominator {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<PodKey, String>,
}

/// The `status.nominatedNodeName` the API server holds for `pod`, if any.
fn status_nominated_node(pi: &PodInfo) -> Option<&str> {
    pi.pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn assigned(pi: &PodInfo) -> bool {
    pi.pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

impl Nominator {
    /// Nominates `pod` to `node` (`Some`, the scheduler's own decision; `Some("")` clears) or,
    /// with `None`, to the pod's `status.nominatedNodeName`. A pod already bound is never
    /// nominated.
    pub(crate) fn add(&mut self, pod: Arc<PodInfo>, node: Option<&str>) {
        let key = pod.id.clone();
        self.delete(&key);
        let node = match node {
            Some(n) => n.to_string(),
            None => status_nominated_node(&pod).unwrap_or_default().to_string(),
        };
        if node.is_empty() || assigned(&pod) {
            return;
        }
        self.node_of.insert(key, node.clone());
        self.by_node.entry(node).or_default().push(pod);
    }

    pub(crate) fn delete(&mut self, key: &str) {
        let Some(node) = self.node_of.remove(key) else {
            return;
        };
        if let Some(list) = self.by_node.get_mut(&node) {
            list.retain(|p| p.id.as_str() != key);
            if list.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// Upstream's UpdateNominatedPod: when neither version carries a nominated node in its
    /// status, a nomination the scheduler made (not yet visible in the API) is kept.
    pub(crate) fn update(&mut self, old: &PodInfo, new: Arc<PodInfo>) {
        let mut node: Option<String> = None;
        if status_nominated_node(old).is_none() && status_nominated_node(&new).is_none() {
            node = self.node_of.get(&old.id).cloned();
        }
        self.delete(&old.id);
        self.add(new, node.as_deref());
    }

    pub(crate) fn node_of(&self, key: &str) -> Option<&str> {
        self.node_of.get(key).map(String::as_str)
    }

    pub(crate) fn all(&self) -> HashMap<String, Vec<Arc<PodInfo>>> {
        self.by_node.clone()
    }

    pub(crate) fn pods_for_node(&self, node: &str) -> &[Arc<PodInfo>] {
        self.by_node.get(node).map(Vec::as_slice).unwrap_or(&[])
    }
}

//! PrioritySort: the order of the active queue — higher `spec.priority` first, and among
//! equal priorities the pod queued earlier first.
//!
//! Upstream: pkg/scheduler/framework/plugins/queuesort. A pod without a priority counts as
//! priority 0. The timestamp is the one the queue stamped on the pod when it last added it.

use std::sync::Arc;

use framework::{ArgsError, Handle, Plugin, QueueSortPlugin, QueuedPodInfo};

use crate::names;

pub const NAME: &str = names::PRIORITY_SORT;

/// Upstream: pkg/scheduler/framework/plugins/queuesort.PrioritySort.
#[derive(Debug, Default)]
pub struct PrioritySort;

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(PrioritySort))
}

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod_info.priority(), b.pod_info.priority());
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests;

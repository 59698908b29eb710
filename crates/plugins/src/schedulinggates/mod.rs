//! SchedulingGates: keeps a pod out of the active queue while it carries any
//! `spec.schedulingGates`.
//!
//! Upstream: pkg/scheduler/framework/plugins/schedulinggates. Gates can only be removed
//! after creation, by whatever controller owns them; the pod waits, without scheduling
//! attempts, until the last one is gone. The rejection is `UnschedulableAndUnresolvable`:
//! no preemption can lift a gate.

use std::sync::Arc;

use framework::{
    ActionType, ArgsError, ClusterEventWithHint, EnqueueExtensions, EventObject, EventResource,
    Handle, Plugin, PodInfo, PreEnqueuePlugin, QueueingHint, Status,
};
use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};

use crate::names;

pub const NAME: &str = names::SCHEDULING_GATES;

/// Upstream: pkg/scheduler/framework/plugins/schedulinggates.SchedulingGates.
#[derive(Debug, Default)]
pub struct SchedulingGates;

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(SchedulingGates))
}

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }

    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    /// The message lists the gates as Go prints a string slice: `[gate-a gate-b]`.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gates = scheduling_gates(&pod.pod);
        if gates.is_empty() {
            return Status::success();
        }
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            names.join(" ")
        ))
    }
}

impl EnqueueExtensions for SchedulingGates {
    /// Only the update that removes a pod's last gate can let it in.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::with_hint(
            EventResource::Pod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            Arc::new(is_schedulable_after_gates_eliminated),
        )]
    }
}

/// Queues the pod when the updated pod is this pod (same UID) and it has no gate left.
/// Another pod losing its gates says nothing about this one.
fn is_schedulable_after_gates_eliminated(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = match new {
        Some(EventObject::Pod(p)) => p,
        Some(o) => return Err(format!("expected the updated Pod, got a {}", o.kind())),
        None => return Err("expected the updated Pod, got nothing".to_string()),
    };
    if modified.metadata.uid != pod.metadata.uid {
        return Ok(QueueingHint::QueueSkip);
    }
    if scheduling_gates(modified).is_empty() {
        Ok(QueueingHint::Queue)
    } else {
        Ok(QueueingHint::QueueSkip)
    }
}

fn scheduling_gates(pod: &Pod) -> &[PodSchedulingGate] {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_deref())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;

//! NodePorts: rejects a node when a host port the pod asks for is already taken there.
//!
//! Upstream: pkg/scheduler/framework/plugins/nodeports. The pod's host ports are those of
//! its containers and of its sidecars (init containers with `restartPolicy: Always`, which
//! run for the pod's whole life); plain init containers do not hold a port. Two ports clash
//! when protocol and port number are equal and the host IPs are equal or either one is the
//! wildcard `0.0.0.0` (an empty host IP means the wildcard, an empty protocol TCP). Only
//! `0.0.0.0` is a wildcard: upstream does not treat `::` as one. The rejection is
//! `Unschedulable`, so preemption may free the port.

use std::sync::Arc;

use framework::types::HostPort;
use framework::{
    ActionType, ArgsError, ClusterEventWithHint, CycleState, EnqueueExtensions, EventObject,
    EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, QueueingHint, Snapshot, Status,
};
use framework::{SignFragment, SignPlugin};
use k8s_openapi::api::core::v1::Pod;

use crate::names;

pub const NAME: &str = names::NODE_PORTS;

/// CycleState key of the ports computed in PreFilter.
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodePorts";

/// Why a node was rejected.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// Filter ran without the state PreFilter writes (upstream words it the same way).
const ERR_NO_PRE_FILTER_STATE: &str = "reading \"PreFilterNodePorts\" from cycleState: not found";

/// The wildcard host IP, also what an empty host IP means.
const BIND_ALL_HOST_IP: &str = "0.0.0.0";
/// The protocol an empty protocol means.
const DEFAULT_PROTOCOL: &str = "TCP";

/// Upstream: pkg/scheduler/framework/plugins/nodeports.NodePorts.
#[derive(Debug, Default)]
pub struct NodePorts;

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(NodePorts))
}

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
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

impl SignPlugin for NodePorts {
    /// The verdict depends on the host ports the pod asks for.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![SignFragment::new(
            framework::sign::HOST_PORTS_SIGNER,
            framework::sign::host_ports_signer(&pod.pod),
        )])
    }
}

impl PreFilterPlugin for NodePorts {
    /// Keeps the pod's host ports for Filter; a pod without any skips the plugin.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.host_ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                ports: pod.host_ports.clone(),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(wanted) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(ERR_NO_PRE_FILTER_STATE);
        };
        if fits_ports(&wanted.ports, &node.used_ports) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

impl EnqueueExtensions for NodePorts {
    /// Ports of a pod are immutable, so pod updates never help; a deleted pod may free a
    /// port and a new node has every port free. Upstream registers node updates too only
    /// when queueing hints are off, which kubesched never runs without.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::AssignedPod,
                ActionType::DELETE,
                Arc::new(is_schedulable_after_pod_deleted),
            ),
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
        ]
    }
}

/// Queues the pod only when the deleted pod was on (or nominated to) a node and held a
/// port that clashes with one the pod wants.
fn is_schedulable_after_pod_deleted(
    pod: &Pod,
    old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let deleted = match old {
        Some(EventObject::Pod(p)) => p,
        Some(o) => return Err(format!("expected the deleted Pod, got a {}", o.kind())),
        None => return Err("expected the deleted Pod, got nothing".to_string()),
    };
    let assigned = deleted
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let nominated = deleted
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !assigned && !nominated {
        return Ok(QueueingHint::QueueSkip);
    }
    let freed = host_ports(deleted);
    if freed.is_empty() {
        return Ok(QueueingHint::QueueSkip);
    }
    if fits_ports(&host_ports(pod), &freed) {
        Ok(QueueingHint::QueueSkip)
    } else {
        Ok(QueueingHint::Queue)
    }
}

/// The pod's host ports, computed once per cycle.
#[derive(Debug, Clone)]
struct PreFilterState {
    ports: Vec<HostPort>,
}

/// Whether none of `wanted` clashes with a port in `used`.
fn fits_ports(wanted: &[HostPort], used: &[HostPort]) -> bool {
    !wanted
        .iter()
        .any(|w| used.iter().any(|u| ports_conflict(w, u)))
}

/// The clash rule, with empty fields read as their defaults (the API server fills them in,
/// but objects loaded from files may leave them empty).
fn ports_conflict(a: &HostPort, b: &HostPort) -> bool {
    if a.port <= 0
        || a.port != b.port
        || or_default(&a.protocol, DEFAULT_PROTOCOL) != or_default(&b.protocol, DEFAULT_PROTOCOL)
    {
        return false;
    }
    let (ip_a, ip_b) = (
        or_default(&a.ip, BIND_ALL_HOST_IP),
        or_default(&b.ip, BIND_ALL_HOST_IP),
    );
    ip_a == ip_b || ip_a == BIND_ALL_HOST_IP || ip_b == BIND_ALL_HOST_IP
}

fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() {
        default
    } else {
        value
    }
}

/// Host ports of a pod object (containers and sidecars, positive host ports only), for the
/// queueing hint, which sees pod objects rather than PodInfos.
fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&hp| hp > 0)?;
            Some(HostPort {
                ip: or_default(p.host_ip.as_deref().unwrap_or(""), BIND_ALL_HOST_IP).to_string(),
                protocol: or_default(p.protocol.as_deref().unwrap_or(""), DEFAULT_PROTOCOL)
                    .to_string(),
                port,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;

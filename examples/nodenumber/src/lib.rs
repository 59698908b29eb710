//! NodeNumber, an out-of-tree plugin: a pod prefers the node whose name ends in the same
//! digit as its own name, and its binding waits at Permit for as many seconds as that
//! node's digit.
//!
//! Upstream: mini-kube-scheduler's minisched/plugins/score/nodenumber, the example plugin
//! of a scheduler built from kube-scheduler's framework. Written only against the public
//! API of the `framework` crate, as any plugin outside kubesched is; docs/plugins.md walks
//! through it.
//!
//! - PreScore reads the last character of the pod's name as a digit and keeps it in the
//!   cycle state; a pod whose name does not end in a digit gets no state.
//! - Score gives [`MATCH_SCORE`] to a node whose name ends in the pod's digit, 0 to every
//!   other node, and 0 to every node when the pod has no digit.
//! - Permit on a node whose name ends in a digit N > 0 returns `Wait` and allows the pod
//!   after N × `waitSecondsPerDigit` seconds, with a timeout one unit longer; a node
//!   ending in 0, or in no digit, permits at once.
//!
//! Where this differs from mini-kube-scheduler, on purpose: Score without PreScore state
//! (a pod name without a digit) scores 0 instead of failing the cycle; a node ending in 0
//! is permitted at once instead of waiting zero seconds, since an allow that runs before
//! the waiting pod is registered would be lost; the timeout is (N+1) units rather than a
//! fixed 10 s, so that every digit's wait fits in it; the unit is configurable.
//!
//! Args (`pluginConfig[].args`, all optional):
//! - `waitSecondsPerDigit` (non-negative integer, default 1): seconds of Permit wait per
//!   unit of the node's digit; 0 turns the wait off.

use std::sync::Arc;
use std::time::Duration;

use framework::{
    decode_args, ActionType, ArgsError, ClusterEventWithHint, Code, CycleState, EnqueueExtensions,
    EventResource, Handle, NodeInfo, PermitPlugin, Plugin, PodInfo, PreScorePlugin, ScorePlugin,
    Snapshot, Status, WaitingPods,
};
use serde::Deserialize;

/// The plugin's name in configuration files.
pub const NAME: &str = "NodeNumber";

/// CycleState key of the pod's digit, written by PreScore.
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeNumber";

/// The score of a node whose digit is the pod's.
pub const MATCH_SCORE: i64 = 10;

/// The status reason of a pod told to wait.
const WAIT_REASON: &str = "waiting for the node's number of seconds";

/// The plugin's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeNumberArgs {
    /// Seconds of Permit wait per unit of the node's digit; 0 turns the wait off.
    pub wait_seconds_per_digit: u32,
}

impl Default for NodeNumberArgs {
    fn default() -> Self {
        NodeNumberArgs {
            wait_seconds_per_digit: 1,
        }
    }
}

/// Upstream: mini-kube-scheduler's nodenumber.NodeNumber.
#[derive(Debug)]
pub struct NodeNumber {
    args: NodeNumberArgs,
    /// The pods waiting at Permit, where the timer allows them: shared with the runtime,
    /// taken from the [`Handle`] when the plugin is built.
    waiting_pods: WaitingPods,
}

/// Builds the plugin from its args (absent: the defaults). Errors name the field below
/// `args`, so that the configuration loader reports
/// `profiles[i].pluginConfig[j].args.waitSecondsPerDigit`.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(NodeNumber::from_args(args, handle)?))
}

impl NodeNumber {
    /// [`new`], unboxed.
    pub fn from_args(
        args: Option<&serde_json::Value>,
        handle: &Handle,
    ) -> Result<NodeNumber, Vec<ArgsError>> {
        let args: NodeNumberArgs = decode_args(args).map_err(|e| vec![e])?;
        Ok(NodeNumber {
            args,
            waiting_pods: handle.waiting_pods.clone(),
        })
    }
}

impl Plugin for NodeNumber {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
}

impl PreScorePlugin for NodeNumber {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        if let Some(digit) = last_digit(pod.name()) {
            state.write(PRE_SCORE_STATE_KEY, PreScoreState { digit });
        }
        Status::success()
    }
}

impl ScorePlugin for NodeNumber {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Ok(0);
        };
        Ok(if last_digit(node.name()) == Some(s.digit) {
            MATCH_SCORE
        } else {
            0
        })
    }
}

impl PermitPlugin for NodeNumber {
    fn permit(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        node_name: &str,
    ) -> (Status, Duration) {
        let unit = u64::from(self.args.wait_seconds_per_digit);
        let digit = u64::from(last_digit(node_name).unwrap_or(0));
        if digit == 0 || unit == 0 {
            return (Status::success(), Duration::ZERO);
        }
        let wait = Duration::from_secs(digit * unit);
        let timeout = Duration::from_secs((digit + 1) * unit);
        // The runtime registers the waiting pod when this returns; the timer looks it up
        // when it fires, at least a second later. A thread per waiting pod keeps the
        // example free of any async runtime; a plugin holding many pods would keep one
        // timer for all of them.
        let key = pod.id.clone();
        let pod_name = pod.key.clone();
        let node = node_name.to_string();
        let waiting_pods = self.waiting_pods.clone();
        tracing::info!(pod = %pod.key, node = %node_name, ?wait, "NodeNumber makes the pod wait");
        let spawned = std::thread::Builder::new()
            .name("nodenumber-permit".into())
            .spawn(move || {
                std::thread::sleep(wait);
                // Gone when the pod was deleted or rejected meanwhile: nothing to allow.
                if let Some(wp) = waiting_pods.get(&key) {
                    tracing::info!(pod = %pod_name, %node, "NodeNumber allows the pod");
                    wp.allow(NAME);
                }
            });
        if let Err(e) = spawned {
            return (
                Status::error(format!("starting the Permit timer: {e}")),
                Duration::ZERO,
            );
        }
        (Status::new(Code::Wait, WAIT_REASON), timeout)
    }
}

impl EnqueueExtensions for NodeNumber {
    /// A pod NodeNumber rejected (its Permit timed out) may fit a node added since, as
    /// mini-kube-scheduler registers.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::new(
            EventResource::Node,
            ActionType::ADD,
        )]
    }
}

/// The pod's digit, computed by PreScore.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PreScoreState {
    digit: u32,
}

/// The last character of `name` as a decimal digit.
fn last_digit(name: &str) -> Option<u32> {
    name.chars().next_back()?.to_digit(10)
}

#[cfg(test)]
mod tests;

//! The kubesched scheduling framework: the plugin API, and nothing else.
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/framework and pkg/scheduler/framework. Start
//! with [`interface`] (one trait per extension point), then [`status`] (what a plugin
//! decides), [`types`] (what it reads: [`PodInfo`], [`NodeInfo`]) and [`snapshot`]. In-tree
//! plugins (crate `plugins`) see exactly what an out-of-tree plugin sees: this crate.
//!
//! **Invariant:** this crate knows nothing of HTTP, the queue or the cache.

pub mod args;
pub mod cycle_state;
pub mod duration;
pub mod events;
pub mod handle;
pub mod interface;
pub mod labels;
pub mod parallelize;
pub mod quantity;
pub mod sign;
pub mod snapshot;
pub mod status;
pub mod testing;
pub mod types;
pub mod waiting_pods;

pub use args::{decode_args, ArgsError};
pub use cycle_state::{CycleState, StateData};
pub use events::{
    ActionType, ClusterEvent, ClusterEventWithHint, EventKind, EventObject, EventResource,
    QueueingHint,
};
pub use handle::{
    Binding, ClientError, ClusterClient, EventType, ExtenderVictims, Handle, Nomination,
    PodCondition, PodEvent, PodRef, PodStatusUpdate, PreemptingPods, PreemptionExtender,
    StorageWatch,
};
pub use interface::*;
pub use parallelize::Parallelizer;
pub use sign::{PodSignature, SignFragment, SignPlugin};
pub use snapshot::{Snapshot, StorageListers, Workloads};
pub use status::{Code, Status};
pub use types::{NodeInfo, NodeRow, NodeScore, PodInfo, PodKey, QueuedPodInfo, Resource};
pub use waiting_pods::{BindingPod, BindingPods, WaitingPod, WaitingPods};

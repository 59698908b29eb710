//! The source side of the scheduling core: the object events informers deliver.
//!
//! Upstream: client-go's ResourceEventHandler (OnAdd / OnUpdate(old, new) / OnDelete) as
//! pkg/scheduler/eventhandlers.go registers it. `run` and `up` feed these from kube-rs
//! watchers (which keep the previous object so that updates carry both versions);
//! `simulate` and `bench` feed them from memory.
//!
//! The contract an event source keeps:
//! - every object is delivered as `Added` before any `Updated` or `Deleted` of it;
//! - `Updated` carries the version delivered last as `old`;
//! - after a re-list (a watch that expired), objects that disappeared meanwhile are
//!   delivered as `Deleted`, objects that changed as `Updated`, new ones as `Added`;
//! - [`EventHandler::synced`] is called once, after the initial list of every kind was
//!   delivered: the scheduler does not start scheduling before that.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};

/// One change to one object.
#[derive(Debug, Clone)]
pub enum Change<T> {
    Added(Arc<T>),
    Updated { old: Arc<T>, new: Arc<T> },
    Deleted(Arc<T>),
}

impl<T> Change<T> {
    /// The object as it is after the change (the deleted object for `Deleted`).
    pub fn object(&self) -> &Arc<T> {
        match self {
            Change::Added(o) | Change::Deleted(o) => o,
            Change::Updated { new, .. } => new,
        }
    }
}

/// A change to an object of a kind the scheduler watches.
#[derive(Debug, Clone)]
pub enum ObjectEvent {
    Pod(Change<Pod>),
    Node(Change<Node>),
    Namespace(Change<Namespace>),
    Service(Change<Service>),
    ReplicationController(Change<ReplicationController>),
    ReplicaSet(Change<ReplicaSet>),
    StatefulSet(Change<StatefulSet>),
    PodDisruptionBudget(Change<PodDisruptionBudget>),
    PriorityClass(Change<PriorityClass>),
    PersistentVolume(Change<PersistentVolume>),
    PersistentVolumeClaim(Change<PersistentVolumeClaim>),
    StorageClass(Change<StorageClass>),
    CSINode(Change<CSINode>),
    CSIDriver(Change<CSIDriver>),
    CSIStorageCapacity(Change<CSIStorageCapacity>),
    VolumeAttachment(Change<VolumeAttachment>),
    ResourceClaim(Change<ResourceClaim>),
    ResourceSlice(Change<ResourceSlice>),
    DeviceClass(Change<DeviceClass>),
}

/// What an event source delivers to. Implemented by the scheduler; called from informer
/// tasks, so it must not block for long (it takes the cache and queue locks briefly).
pub trait EventHandler: Send + Sync {
    /// One object changed.
    fn handle(&self, event: ObjectEvent);

    /// The initial lists of every watched kind have been delivered.
    fn synced(&self);
}

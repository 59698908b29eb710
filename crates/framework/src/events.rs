//! Cluster events and queueing hints: how a plugin says which changes to the cluster might
//! make a pod it rejected schedulable.
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/framework (ClusterEvent, ActionType,
//! QueueingHint). The scheduling queue moves a rejected pod only when an event one of
//! its rejecting plugins registered arrives and that plugin's hint says `Queue`.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};

/// The kind of object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// Any pod (assigned or not).
    Pod,
    /// A pod bound to a node.
    AssignedPod,
    /// A pod not yet bound.
    UnscheduledPod,
    Node,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CSINode,
    CSIDriver,
    CSIStorageCapacity,
    VolumeAttachment,
    ResourceClaim,
    ResourceSlice,
    DeviceClass,
    /// Matches every resource.
    WildCard,
}

/// What happened to the object: a bit set, so one registration can cover several changes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActionType(pub u32);

impl ActionType {
    pub const ADD: ActionType = ActionType(1);
    pub const DELETE: ActionType = ActionType(1 << 1);
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    pub const UPDATE_NODE_ANNOTATION: ActionType = ActionType(1 << 6);
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 7);
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 8);
    pub const UPDATE_POD_TOLERATIONS: ActionType = ActionType(1 << 9);
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 10);
    /// Any other update.
    pub const UPDATE_OTHER: ActionType = ActionType(1 << 11);
    /// The pod's `status.resourceClaimStatuses` changed (a claim generated from a template).
    pub const UPDATE_POD_GENERATED_RESOURCE_CLAIM: ActionType = ActionType(1 << 12);
    /// Every kind of update.
    pub const UPDATE: ActionType = ActionType(((1 << 13) - 1) & !0b11);
    pub const ALL: ActionType = ActionType((1 << 13) - 1);

    /// Whether the two sets share an action.
    pub fn intersects(self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for ActionType {
    type Output = ActionType;
    fn bitor(self, rhs: ActionType) -> ActionType {
        ActionType(self.0 | rhs.0)
    }
}

impl fmt::Debug for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 13] = [
            "Add",
            "Delete",
            "UpdateNodeAllocatable",
            "UpdateNodeLabel",
            "UpdateNodeTaint",
            "UpdateNodeCondition",
            "UpdateNodeAnnotation",
            "UpdatePodLabel",
            "UpdatePodScaleDown",
            "UpdatePodTolerations",
            "UpdatePodSchedulingGatesEliminated",
            "UpdateOther",
            "UpdatePodGeneratedResourceClaim",
        ];
        if *self == ActionType::ALL {
            return f.write_str("All");
        }
        let names: Vec<&str> = NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&names.join("|"))
    }
}

/// A change in the cluster: which resource, which action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: ActionType,
}

impl ClusterEvent {
    pub const fn new(resource: EventResource, action: ActionType) -> Self {
        ClusterEvent { resource, action }
    }

    /// Whether an event `incoming` is covered by this registration.
    /// A short name for logs and the `event` label of `scheduler_queue_incoming_pods_total`,
    /// spelled as upstream's event labels: `NodeAdd`, `NodeTaintChange`, `AssignedPodDelete`,
    /// ... (for an event carrying several node changes, the first one).
    pub fn label(&self) -> String {
        let a = self.action;
        let verb = if a.intersects(ActionType::ADD) {
            "Add"
        } else if a.intersects(ActionType::DELETE) {
            "Delete"
        } else {
            "Update"
        };
        match self.resource {
            EventResource::Node if verb == "Update" => {
                let change = [
                    (ActionType::UPDATE_NODE_ALLOCATABLE, "NodeAllocatableChange"),
                    (ActionType::UPDATE_NODE_LABEL, "NodeLabelChange"),
                    (ActionType::UPDATE_NODE_TAINT, "NodeTaintChange"),
                    (ActionType::UPDATE_NODE_CONDITION, "NodeConditionChange"),
                    (ActionType::UPDATE_NODE_ANNOTATION, "NodeAnnotationChange"),
                ];
                change
                    .iter()
                    .find(|(bit, _)| a.intersects(*bit))
                    .map_or_else(|| "NodeUpdate".to_string(), |(_, l)| l.to_string())
            }
            EventResource::WildCard => "WildCard".to_string(),
            r => format!("{r:?}{verb}"),
        }
    }

    pub fn matches(&self, incoming: &ClusterEvent) -> bool {
        let resource_ok = self.resource == EventResource::WildCard
            || self.resource == incoming.resource
            || (self.resource == EventResource::Pod
                && matches!(
                    incoming.resource,
                    EventResource::AssignedPod | EventResource::UnscheduledPod
                ));
        resource_ok && self.action.intersects(incoming.action)
    }
}

/// The object an event carries (old or new).
#[derive(Debug, Clone)]
pub enum EventObject {
    Pod(Arc<Pod>),
    Node(Arc<Node>),
    PersistentVolume(Arc<PersistentVolume>),
    PersistentVolumeClaim(Arc<PersistentVolumeClaim>),
    StorageClass(Arc<StorageClass>),
    CSINode(Arc<CSINode>),
    CSIDriver(Arc<CSIDriver>),
    CSIStorageCapacity(Arc<CSIStorageCapacity>),
    VolumeAttachment(Arc<VolumeAttachment>),
    ResourceClaim(Arc<ResourceClaim>),
    ResourceSlice(Arc<ResourceSlice>),
    DeviceClass(Arc<DeviceClass>),
}

/// A kind of object cluster events carry, found in an [`EventObject`] by its variant.
/// Queueing hints convert with it (upstream's `util.As`).
pub trait EventKind: Sized {
    /// The kind's name, as hint errors give it.
    const KIND: &'static str;
    /// The object, when `o` carries this kind.
    fn of(o: &EventObject) -> Option<&Arc<Self>>;
}

macro_rules! event_kinds {
    ($($kind:ident),*) => {$(
        impl EventKind for $kind {
            const KIND: &'static str = stringify!($kind);
            fn of(o: &EventObject) -> Option<&Arc<Self>> {
                match o {
                    EventObject::$kind(x) => Some(x),
                    _ => None,
                }
            }
        }
    )*};
}

event_kinds!(
    Pod,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CSINode,
    CSIDriver,
    CSIStorageCapacity,
    VolumeAttachment,
    ResourceClaim,
    ResourceSlice,
    DeviceClass
);

impl EventObject {
    /// The object's kind, for hint errors that name what they got.
    pub fn kind(&self) -> &'static str {
        match self {
            EventObject::Pod(_) => "Pod",
            EventObject::Node(_) => "Node",
            EventObject::PersistentVolume(_) => "PersistentVolume",
            EventObject::PersistentVolumeClaim(_) => "PersistentVolumeClaim",
            EventObject::StorageClass(_) => "StorageClass",
            EventObject::CSINode(_) => "CSINode",
            EventObject::CSIDriver(_) => "CSIDriver",
            EventObject::CSIStorageCapacity(_) => "CSIStorageCapacity",
            EventObject::VolumeAttachment(_) => "VolumeAttachment",
            EventObject::ResourceClaim(_) => "ResourceClaim",
            EventObject::ResourceSlice(_) => "ResourceSlice",
            EventObject::DeviceClass(_) => "DeviceClass",
        }
    }
}

/// A plugin's answer to "may this event make the pod schedulable?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// Retry the pod.
    Queue,
    /// The event cannot help this pod.
    QueueSkip,
}

/// Computes a [`QueueingHint`] from the pending pod and the event's old and new objects. An
/// `Err` is treated as `Queue`, so that a buggy hint never strands a pod.
pub type QueueingHintFn = Arc<
    dyn Fn(&Pod, Option<&EventObject>, Option<&EventObject>) -> Result<QueueingHint, String>
        + Send
        + Sync,
>;

/// An event a plugin registers, with an optional hint (none = always `Queue`).
#[derive(Clone)]
pub struct ClusterEventWithHint {
    pub event: ClusterEvent,
    pub hint: Option<QueueingHintFn>,
}

impl fmt::Debug for ClusterEventWithHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterEventWithHint")
            .field("event", &self.event)
            .field("hint", &self.hint.is_some())
            .finish()
    }
}

impl ClusterEventWithHint {
    /// An event without a hint: every such event requeues the pod.
    pub fn new(resource: EventResource, action: ActionType) -> Self {
        ClusterEventWithHint {
            event: ClusterEvent::new(resource, action),
            hint: None,
        }
    }

    /// An event with a hint function.
    pub fn with_hint(resource: EventResource, action: ActionType, hint: QueueingHintFn) -> Self {
        ClusterEventWithHint {
            event: ClusterEvent::new(resource, action),
            hint: Some(hint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::same(
        ClusterEvent::new(EventResource::Node, ActionType::ADD),
        ClusterEvent::new(EventResource::Node, ActionType::ADD),
        true
    )]
    #[case::update_covers_label(
        ClusterEvent::new(EventResource::Node, ActionType::UPDATE),
        ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL),
        true
    )]
    #[case::other_action(
        ClusterEvent::new(EventResource::Node, ActionType::ADD),
        ClusterEvent::new(EventResource::Node, ActionType::DELETE),
        false
    )]
    #[case::other_resource(
        ClusterEvent::new(EventResource::Node, ActionType::ALL),
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        false
    )]
    #[case::pod_covers_assigned_pod(
        ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
        ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
        true
    )]
    #[case::wildcard(
        ClusterEvent::new(EventResource::WildCard, ActionType::ALL),
        ClusterEvent::new(EventResource::CSINode, ActionType::ADD),
        true
    )]
    fn registration_matches(
        #[case] reg: ClusterEvent,
        #[case] incoming: ClusterEvent,
        #[case] want: bool,
    ) {
        assert_eq!(reg.matches(&incoming), want);
    }

    #[rstest]
    #[case::node_add(EventResource::Node, ActionType::ADD, "NodeAdd")]
    #[case::node_taint(EventResource::Node, ActionType::UPDATE_NODE_TAINT, "NodeTaintChange")]
    #[case::node_label_first(
        EventResource::Node,
        ActionType::UPDATE_NODE_TAINT | ActionType::UPDATE_NODE_LABEL,
        "NodeLabelChange"
    )]
    #[case::assigned_pod_delete(
        EventResource::AssignedPod,
        ActionType::DELETE,
        "AssignedPodDelete"
    )]
    #[case::unscheduled_pod_update(
        EventResource::UnscheduledPod,
        ActionType::UPDATE_POD_LABEL,
        "UnscheduledPodUpdate"
    )]
    #[case::resource_claim_add(EventResource::ResourceClaim, ActionType::ADD, "ResourceClaimAdd")]
    #[case::resource_slice_update(
        EventResource::ResourceSlice,
        ActionType::UPDATE,
        "ResourceSliceUpdate"
    )]
    #[case::device_class_update(
        EventResource::DeviceClass,
        ActionType::UPDATE,
        "DeviceClassUpdate"
    )]
    fn labels_follow_upstream(
        #[case] resource: EventResource,
        #[case] action: ActionType,
        #[case] want: &str,
    ) {
        assert_eq!(ClusterEvent::new(resource, action).label(), want);
    }

    #[test]
    fn action_debug_names_bits() {
        assert_eq!(
            format!("{:?}", ActionType::ADD | ActionType::UPDATE_NODE_TAINT),
            "Add|UpdateNodeTaint"
        );
    }
}

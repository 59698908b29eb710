//! What the scheduler does with each object event: assigned pods and nodes go to the cache,
//! pending pods of our profiles to the queue, and every change that may make a waiting pod
//! schedulable is offered to the queue's hints.
//!
//! Upstream: pkg/scheduler/eventhandlers.go (addPodToCache, updatePodInCache, …,
//! addNodeToCache, updateNodeInCache, nodeSchedulingPropertiesChange).

use std::sync::Arc;

use framework::{
    ActionType, ClusterEvent, EventObject, EventResource, PodInfo, PodKey, StorageListers,
    Workloads,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::Metadata;

use super::{scheduler_name, Shared, State};
use crate::backend::cache::{is_assigned, is_terminal};
use crate::backend::queue::pod_scheduling_properties_change;
use crate::source::{Change, EventHandler, ObjectEvent};

impl EventHandler for Shared {
    fn handle(&self, event: ObjectEvent) {
        match event {
            ObjectEvent::Pod(c) => self.on_pod(c),
            ObjectEvent::Node(c) => self.on_node(c),
            ObjectEvent::Namespace(c) => {
                let mut st = self.state();
                let ns = c.object();
                let name = ns.metadata.name.clone().unwrap_or_default();
                match &c {
                    Change::Deleted(_) => {
                        st.namespaces.remove(&name);
                    }
                    _ => {
                        let labels = ns.metadata.labels.clone().unwrap_or_default();
                        st.namespaces.insert(name, labels);
                    }
                }
                st.namespaces_version += 1;
                let action = action_of(&c);
                st.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::Namespace, action),
                    None,
                    None,
                );
                drop(st);
                self.notify();
            }
            ObjectEvent::Service(c) => {
                self.update_workloads(&c, |w| &mut w.services);
            }
            ObjectEvent::ReplicationController(c) => {
                self.update_workloads(&c, |w| &mut w.replication_controllers);
            }
            ObjectEvent::ReplicaSet(c) => {
                self.update_workloads(&c, |w| &mut w.replica_sets);
            }
            ObjectEvent::StatefulSet(c) => {
                self.update_workloads(&c, |w| &mut w.stateful_sets);
            }
            ObjectEvent::PodDisruptionBudget(c) => {
                let mut st = self.state();
                let key = ns_name(c.object().metadata());
                match c {
                    Change::Deleted(_) => st.pdbs.remove(&key),
                    Change::Added(o) | Change::Updated { new: o, .. } => st.pdbs.insert(key, o),
                };
                // The list cycles hand to preemption, rebuilt only when a PDB changes.
                let mut list: Vec<(&String, &Arc<_>)> = st.pdbs.iter().collect();
                list.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let list = list.into_iter().map(|(_, p)| p.clone()).collect();
                st.pdb_list = Arc::new(list);
            }
            ObjectEvent::PriorityClass(c) => {
                let mut st = self.state();
                let key = c.object().metadata.name.clone().unwrap_or_default();
                match c {
                    Change::Deleted(_) => st.priority_classes.remove(&key),
                    Change::Added(o) | Change::Updated { new: o, .. } => {
                        st.priority_classes.insert(key, o)
                    }
                };
            }
            ObjectEvent::PersistentVolume(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(
                    c,
                    key,
                    EventResource::PersistentVolume,
                    EventObject::PersistentVolume,
                    |s| &mut s.persistent_volumes,
                );
            }
            ObjectEvent::PersistentVolumeClaim(c) => {
                let key = ns_name(&c.object().metadata);
                self.update_storage(
                    c,
                    key,
                    EventResource::PersistentVolumeClaim,
                    EventObject::PersistentVolumeClaim,
                    |s| &mut s.persistent_volume_claims,
                );
            }
            ObjectEvent::StorageClass(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(
                    c,
                    key,
                    EventResource::StorageClass,
                    EventObject::StorageClass,
                    |s| &mut s.storage_classes,
                );
            }
            ObjectEvent::CSINode(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(c, key, EventResource::CSINode, EventObject::CSINode, |s| {
                    &mut s.csi_nodes
                });
            }
            ObjectEvent::CSIDriver(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(
                    c,
                    key,
                    EventResource::CSIDriver,
                    EventObject::CSIDriver,
                    |s| &mut s.csi_drivers,
                );
            }
            ObjectEvent::CSIStorageCapacity(c) => {
                let key = ns_name(&c.object().metadata);
                self.update_storage(
                    c,
                    key,
                    EventResource::CSIStorageCapacity,
                    EventObject::CSIStorageCapacity,
                    |s| &mut s.csi_storage_capacities,
                );
            }
            ObjectEvent::VolumeAttachment(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(
                    c,
                    key,
                    EventResource::VolumeAttachment,
                    EventObject::VolumeAttachment,
                    |s| &mut s.volume_attachments,
                );
            }
            ObjectEvent::ResourceClaim(c) => {
                let key = ns_name(&c.object().metadata);
                self.update_storage(
                    c,
                    key,
                    EventResource::ResourceClaim,
                    EventObject::ResourceClaim,
                    |s| &mut s.resource_claims,
                );
            }
            ObjectEvent::ResourceSlice(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(
                    c,
                    key,
                    EventResource::ResourceSlice,
                    EventObject::ResourceSlice,
                    |s| &mut s.resource_slices,
                );
            }
            ObjectEvent::DeviceClass(c) => {
                let key = c.object().metadata.name.clone().unwrap_or_default();
                self.update_storage(
                    c,
                    key,
                    EventResource::DeviceClass,
                    EventObject::DeviceClass,
                    |s| &mut s.device_classes,
                );
            }
        }
    }

    fn synced(&self) {
        self.synced.send_replace(true);
        self.notify();
    }
}

impl Shared {
    /// Whether one of our profiles schedules `pod`.
    fn responsible_for(&self, pod: &PodInfo) -> bool {
        self.profiles.contains_key(scheduler_name(pod))
    }

    fn on_pod(&self, change: Change<Pod>) {
        match change {
            Change::Added(pod) => self.pod_added(pod),
            Change::Updated { old, new } => self.pod_updated(old, new),
            Change::Deleted(pod) => self.pod_deleted(&pod),
        }
        self.notify();
    }

    // The handlers compute PodInfos before they take the state lock, which the scheduling
    // loop takes several times per cycle.
    fn pod_added(&self, pod: Arc<Pod>) {
        if is_terminal(&pod) {
            return;
        }
        let assigned = is_assigned(&pod);
        let info = Arc::new(PodInfo::new(pod));
        if assigned {
            add_assigned_pod(&mut self.state(), info);
        } else if self.responsible_for(&info) {
            self.state().queue.add(info);
        }
    }

    fn pod_updated(&self, old: Arc<Pod>, new: Arc<Pod>) {
        if is_terminal(&new) {
            // A pod that finished holds nothing: as if deleted (upstream's informer filter
            // turns this into a delete).
            self.pod_deleted(&old);
            return;
        }
        if is_assigned(&new) {
            let info = Arc::new(PodInfo::new(new.clone()));
            let uid = info.id.clone();
            let mut st = self.state();
            if st.cache.is_assumed_pod(&uid) || st.cache.get_pod(&uid).is_none() {
                // Just bound (by us, confirming the assumed pod, or by someone else): it
                // leaves the queue and counts on its node.
                st.queue.delete(&old);
                add_assigned_pod(&mut st, info);
                return;
            }
            let old_info = st.cache.get_pod(&uid).cloned();
            if let Err(e) = st.cache.update_pod_info(&old, info) {
                tracing::debug!(pod = %uid, error = %e, "updating assigned pod");
            }
            let new_info = st.cache.get_pod(&uid).cloned();
            if let (Some(o), Some(n)) = (old_info, new_info) {
                let (oo, no) = (EventObject::Pod(old.clone()), EventObject::Pod(new.clone()));
                for e in pod_scheduling_properties_change(&o, &n) {
                    st.queue
                        .move_all_to_active_or_backoff(e, Some(&oo), Some(&no));
                }
            }
            return;
        }
        let new_info = Arc::new(PodInfo::new(new));
        if !self.responsible_for(&new_info) {
            // Its schedulerName changed away from us.
            self.state().queue.delete(&old);
            return;
        }
        let old_info = PodInfo::new(old);
        let mut st = self.state();
        if st.cache.is_assumed_pod(&new_info.id) {
            // Our own placement is on its way; the update is not a reason for a new attempt.
            return;
        }
        st.queue.update(&old_info, new_info);
    }

    fn pod_deleted(&self, pod: &Arc<Pod>) {
        let uid = PodKey::of(pod);
        // A preemption victim is gone: it no longer holds its preemptor back.
        self.preempting_pods.victim_gone(&uid);
        let mut st = self.state();
        let in_cache = st.cache.get_pod(&uid).is_some();
        st.queue.delete(pod);
        if in_cache {
            if let Err(e) = st.cache.remove_pod(pod) {
                tracing::debug!(pod = %uid, error = %e, "removing pod");
            }
            let obj = EventObject::Pod(pod.clone());
            st.queue.move_all_to_active_or_backoff(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                Some(&obj),
                None,
            );
        }
        drop(st);
        // A pod waiting at Permit that is deleted fails its binding cycle at once.
        self.waiting_pods
            .reject(&uid, "", "pod is deleted while waiting at permit");
        // A pod whose PreBind waits on controllers stops waiting.
        self.binding_pods.deleted(&uid);
        if let Some(log) = &self.options.decisions {
            let meta = &pod.metadata;
            log.forget(
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
            );
        }
    }

    fn on_node(&self, change: Change<Node>) {
        let mut st = self.state();
        match change {
            Change::Added(node) => {
                st.cache.add_node(node.clone());
                let obj = EventObject::Node(node);
                st.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::Node, ActionType::ADD),
                    None,
                    Some(&obj),
                );
            }
            Change::Updated { old, new } => {
                st.cache.update_node(&old, new.clone());
                let action = node_scheduling_properties_change(&old, &new);
                if action != ActionType(0) {
                    let (o, n) = (EventObject::Node(old), EventObject::Node(new));
                    st.queue.move_all_to_active_or_backoff(
                        ClusterEvent::new(EventResource::Node, action),
                        Some(&o),
                        Some(&n),
                    );
                }
            }
            Change::Deleted(node) => {
                if let Err(e) = st.cache.remove_node(&node) {
                    tracing::debug!(error = %e, "removing node");
                }
                let obj = EventObject::Node(node);
                st.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::Node, ActionType::DELETE),
                    Some(&obj),
                    None,
                );
            }
        }
        drop(st);
        self.notify();
    }

    fn update_workloads<
        T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    >(
        &self,
        change: &Change<T>,
        field: impl Fn(&mut Workloads) -> &mut std::collections::HashMap<String, Vec<Arc<T>>>,
    ) {
        let mut st = self.state();
        let meta = change.object().metadata();
        let ns = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let name = meta.name.clone().unwrap_or_default();
        let workloads = Arc::make_mut(&mut st.workloads);
        let list = field(workloads).entry(ns.clone()).or_default();
        list.retain(|o| o.metadata().name.as_deref() != Some(name.as_str()));
        if !matches!(change, Change::Deleted(_)) {
            list.push(change.object().clone());
        }
        if list.is_empty() {
            field(workloads).remove(&ns);
        }
    }
}

impl Shared {
    /// Files a storage or DRA object's change (volume, claim, class, CSI object, device
    /// class, resource slice or resource claim) under `key` and offers it to waiting pods
    /// (upstream registers the same handlers for the storage and DRA informers).
    fn update_storage<T>(
        &self,
        change: Change<T>,
        key: String,
        resource: EventResource,
        wrap: fn(Arc<T>) -> EventObject,
        field: impl Fn(&mut StorageListers) -> &mut std::collections::HashMap<String, Arc<T>>,
    ) {
        let action = action_of(&change);
        let mut st = self.state();
        // Changed in place under the state lock, so snapshots (taken under it too) and
        // binding cycles waiting on the watch see changes in order.
        let mut moved = None;
        self.storage.send_modify(|s| {
            let storage = Arc::make_mut(s);
            moved = Some(match change {
                Change::Added(o) => {
                    field(storage).insert(key, o.clone());
                    (None, Some(wrap(o)))
                }
                Change::Updated { old, new } => {
                    field(storage).insert(key, new.clone());
                    (Some(wrap(old)), Some(wrap(new)))
                }
                Change::Deleted(o) => {
                    field(storage).remove(&key);
                    (Some(wrap(o)), None)
                }
            });
        });
        let (old, new) = moved.unwrap_or((None, None));
        st.queue.move_all_to_active_or_backoff(
            ClusterEvent::new(resource, action),
            old.as_ref(),
            new.as_ref(),
        );
        drop(st);
        self.notify();
    }
}

/// Adds (or confirms) an assigned pod and tells waiting pods.
fn add_assigned_pod(st: &mut State, info: Arc<PodInfo>) {
    let pod = info.pod.clone();
    if let Err(e) = st.cache.add_pod_info(info) {
        tracing::debug!(pod = %PodKey::of(&pod), error = %e, "adding assigned pod");
    }
    let obj = EventObject::Pod(pod);
    st.queue.move_all_to_active_or_backoff(
        ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
        None,
        Some(&obj),
    );
}

fn action_of<T>(c: &Change<T>) -> ActionType {
    match c {
        Change::Added(_) => ActionType::ADD,
        Change::Updated { .. } => ActionType::UPDATE,
        Change::Deleted(_) => ActionType::DELETE,
    }
}

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or("")
    )
}

/// Which scheduling-relevant parts of a node changed, as one action set (empty when none).
/// Upstream: nodeSchedulingPropertiesChange.
pub fn node_scheduling_properties_change(old: &Node, new: &Node) -> ActionType {
    let mut a = ActionType(0);
    let spec = |n: &Node| n.spec.clone().unwrap_or_default();
    let status = |n: &Node| n.status.clone().unwrap_or_default();
    let (os, ns) = (spec(old), spec(new));
    let (ost, nst) = (status(old), status(new));
    if os.unschedulable.unwrap_or(false) != ns.unschedulable.unwrap_or(false) {
        // Upstream files this under taints (the unschedulable taint).
        a = a | ActionType::UPDATE_NODE_TAINT;
    }
    if ost.allocatable != nst.allocatable {
        a = a | ActionType::UPDATE_NODE_ALLOCATABLE;
    }
    if old.metadata.labels != new.metadata.labels {
        a = a | ActionType::UPDATE_NODE_LABEL;
    }
    if os.taints != ns.taints {
        a = a | ActionType::UPDATE_NODE_TAINT;
    }
    let conditions = |s: &k8s_openapi::api::core::v1::NodeStatus| -> Vec<(String, String)> {
        let mut c: Vec<(String, String)> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect();
        c.sort();
        c
    };
    if conditions(&ost) != conditions(&nst) {
        a = a | ActionType::UPDATE_NODE_CONDITION;
    }
    if old.metadata.annotations != new.metadata.annotations {
        a = a | ActionType::UPDATE_NODE_ANNOTATION;
    }
    a
}

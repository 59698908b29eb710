//! An in-memory cluster: both ends of the scheduling core for `simulate`, `bench
//! --mode in-process` and tests. It keeps pods and nodes, delivers their changes to the
//! scheduler's event handler as informers would, and applies the scheduler's writes as the
//! API server does, delivering the update each one makes:
//! - a bind sets `spec.nodeName` (which confirms the assumed pod);
//! - a status write replaces the condition of its type and sets or clears
//!   `status.nominatedNodeName`, so that a preemptor's retry carries its nomination;
//! - a delete removes the pod at once or, with [`MemoryCluster::set_graceful_deletion`],
//!   only marks it terminating (`metadata.deletionTimestamp`) until
//!   [`MemoryCluster::finish_terminating`] removes it, as a kubelet would.
//!
//! - a PersistentVolume or PersistentVolumeClaim update (VolumeBinding's PreBind) is
//!   answered with the object one `resourceVersion` newer; it is not delivered, since no PV
//!   controller runs here: tests play the controller by delivering the objects they want.
//!
//! Every write is recorded, so tests can compare what the scheduler did as whole values.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use framework::interface::BoxFuture;
use framework::{
    Binding, ClientError, ClusterClient, Nomination, PodEvent, PodRef, PodStatusUpdate,
};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition,
    PodExtendedResourceClaimStatus,
};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::source::{Change, EventHandler, ObjectEvent};

/// What the scheduler wrote, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Writes {
    pub bindings: Vec<Binding>,
    pub status_updates: Vec<PodStatusUpdate>,
    pub events: Vec<PodEvent>,
    pub deletions: Vec<PodRef>,
    /// PersistentVolumes as written (before the version bump).
    pub persistent_volumes: Vec<PersistentVolume>,
    /// PersistentVolumeClaims as written (before the version bump).
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    /// ResourceClaims as written (before the version bump): finalizers added.
    pub resource_claims: Vec<ResourceClaim>,
    /// ResourceClaim statuses as written (before the version bump).
    pub resource_claim_statuses: Vec<ResourceClaim>,
    /// ResourceClaims created (as sent, before the API server names them).
    pub resource_claims_created: Vec<ResourceClaim>,
    pub resource_claims_deleted: Vec<ResourceClaim>,
    /// Pods' `status.extendedResourceClaimStatus` as written.
    pub extended_resource_claim_statuses: Vec<(PodRef, PodExtendedResourceClaimStatus)>,
}

#[derive(Debug, Default)]
struct Objects {
    pods: BTreeMap<(String, String), Arc<Pod>>,
    nodes: BTreeMap<String, Arc<Node>>,
    writes: Writes,
    /// Errors the next binds answer with, first one first.
    bind_errors: VecDeque<ClientError>,
    /// Deletes mark pods terminating instead of removing them.
    graceful_deletion: bool,
}

/// Pods and nodes in memory, wired to one scheduler.
#[derive(Default)]
pub struct MemoryCluster {
    objects: Mutex<Objects>,
    handler: OnceLock<Weak<dyn EventHandler>>,
}

impl std::fmt::Debug for MemoryCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = self.lock();
        f.debug_struct("MemoryCluster")
            .field("pods", &o.pods.len())
            .field("nodes", &o.nodes.len())
            .finish()
    }
}

fn pod_id(pod: &Pod) -> (String, String) {
    (
        pod.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl MemoryCluster {
    pub fn new() -> Arc<MemoryCluster> {
        Arc::new(MemoryCluster::default())
    }

    /// Delivers changes to `handler` from now on (once; later calls are ignored).
    pub fn connect(&self, handler: Weak<dyn EventHandler>) {
        let _ = self.handler.set(handler);
    }

    fn lock(&self) -> MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliver(&self, event: ObjectEvent) {
        if let Some(h) = self.handler.get().and_then(Weak::upgrade) {
            h.handle(event);
        }
    }

    /// Creates or replaces a pod.
    pub fn apply_pod(&self, pod: Pod) {
        let pod = Arc::new(pod);
        let old = self.lock().pods.insert(pod_id(&pod), pod.clone());
        self.deliver(ObjectEvent::Pod(match old {
            Some(old) => Change::Updated { old, new: pod },
            None => Change::Added(pod),
        }));
    }

    /// Deletes a pod; `false` when there is none.
    pub fn remove_pod(&self, namespace: &str, name: &str) -> bool {
        let old = self
            .lock()
            .pods
            .remove(&(namespace.to_string(), name.to_string()));
        match old {
            Some(p) => {
                self.deliver(ObjectEvent::Pod(Change::Deleted(p)));
                true
            }
            None => false,
        }
    }

    /// Creates or replaces a node.
    pub fn apply_node(&self, node: Node) {
        let node = Arc::new(node);
        let name = node.metadata.name.clone().unwrap_or_default();
        let old = self.lock().nodes.insert(name, node.clone());
        self.deliver(ObjectEvent::Node(match old {
            Some(old) => Change::Updated { old, new: node },
            None => Change::Added(node),
        }));
    }

    /// Deletes a node; `false` when there is none.
    pub fn remove_node(&self, name: &str) -> bool {
        let old = self.lock().nodes.remove(name);
        match old {
            Some(n) => {
                self.deliver(ObjectEvent::Node(Change::Deleted(n)));
                true
            }
            None => false,
        }
    }

    /// Delivers an event of another kind (namespaces, services, ...) as is.
    pub fn deliver_other(&self, event: ObjectEvent) {
        self.deliver(event);
    }

    /// The pod `namespace/name` as stored now.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.lock()
            .pods
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Every pod, by namespace and name.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.lock().pods.values().cloned().collect()
    }

    /// The reason of the last event recorded about the pod `namespace/name`.
    pub fn last_event_reason(&self, namespace: &str, name: &str) -> Option<String> {
        self.lock()
            .writes
            .events
            .iter()
            .rev()
            .find(|e| e.regarding.namespace == namespace && e.regarding.name == name)
            .map(|e| e.reason.clone())
    }

    /// The last status write to the pod `namespace/name`.
    pub fn last_status_update(&self, namespace: &str, name: &str) -> Option<PodStatusUpdate> {
        self.lock()
            .writes
            .status_updates
            .iter()
            .rev()
            .find(|u| u.pod.namespace == namespace && u.pod.name == name)
            .cloned()
    }

    /// Makes the next binds fail with these errors, in order.
    pub fn fail_next_binds(&self, errors: impl IntoIterator<Item = ClientError>) {
        self.lock().bind_errors.extend(errors);
    }

    /// What the scheduler wrote so far.
    pub fn writes(&self) -> Writes {
        self.lock().writes.clone()
    }

    /// How many PersistentVolume and PersistentVolumeClaim writes there were so far.
    pub fn volume_write_counts(&self) -> (usize, usize) {
        let o = self.lock();
        (
            o.writes.persistent_volumes.len(),
            o.writes.persistent_volume_claims.len(),
        )
    }

    /// How many ResourceClaim status writes there were so far.
    pub fn resource_claim_status_count(&self) -> usize {
        self.lock().writes.resource_claim_statuses.len()
    }

    /// The ResourceClaim status writes after the first `count`.
    pub fn resource_claim_statuses_since(&self, count: usize) -> Vec<ResourceClaim> {
        self.lock()
            .writes
            .resource_claim_statuses
            .get(count..)
            .unwrap_or_default()
            .to_vec()
    }

    /// The PersistentVolume and PersistentVolumeClaim writes after the first `counts`.
    pub fn volume_writes_since(
        &self,
        counts: (usize, usize),
    ) -> (Vec<PersistentVolume>, Vec<PersistentVolumeClaim>) {
        let o = self.lock();
        (
            o.writes
                .persistent_volumes
                .get(counts.0..)
                .unwrap_or_default()
                .to_vec(),
            o.writes
                .persistent_volume_claims
                .get(counts.1..)
                .unwrap_or_default()
                .to_vec(),
        )
    }

    /// From now on a delete only marks the pod terminating (graceful deletion); the pod
    /// keeps its room until [`finish_terminating`](Self::finish_terminating).
    pub fn set_graceful_deletion(&self, graceful: bool) {
        self.lock().graceful_deletion = graceful;
    }

    /// Removes every terminating pod (their graceful deletion is over), delivering the
    /// deletes in name order; returns them as `namespace/name`.
    pub fn finish_terminating(&self) -> Vec<String> {
        let gone: Vec<Arc<Pod>> = {
            let mut o = self.lock();
            let ids: Vec<(String, String)> = o
                .pods
                .iter()
                .filter(|(_, p)| p.metadata.deletion_timestamp.is_some())
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| o.pods.remove(id)).collect()
        };
        let mut names = Vec::with_capacity(gone.len());
        for p in gone {
            let (ns, name) = pod_id(&p);
            names.push(format!("{ns}/{name}"));
            self.deliver(ObjectEvent::Pod(Change::Deleted(p)));
        }
        names
    }

    /// Applies a status write to the stored pod. Upstream's API server answers a write to
    /// a pod that is gone with 404; so does this.
    fn update_status_now(&self, update: &PodStatusUpdate) -> Result<(), ClientError> {
        let change = {
            let mut o = self.lock();
            o.writes.status_updates.push(update.clone());
            let id = (update.pod.namespace.clone(), update.pod.name.clone());
            let Some(old) = o.pods.get(&id).cloned() else {
                return Err(not_found(&update.pod.name));
            };
            let mut new = (*old).clone();
            let status = new.status.get_or_insert_with(Default::default);
            if let Some(c) = &update.condition {
                let conditions = status.conditions.get_or_insert_with(Vec::new);
                let condition = PodCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: Some(c.reason.clone()),
                    message: Some(c.message.clone()),
                    ..Default::default()
                };
                match conditions.iter_mut().find(|x| x.type_ == c.type_) {
                    Some(x) => *x = condition,
                    None => conditions.push(condition),
                }
            }
            match &update.nomination {
                Nomination::Keep => {}
                Nomination::Set(node) => status.nominated_node_name = Some(node.clone()),
                Nomination::Clear => status.nominated_node_name = None,
            }
            if new == *old {
                return Ok(());
            }
            let new = Arc::new(new);
            o.pods.insert(id, new.clone());
            Change::Updated { old, new }
        };
        self.deliver(ObjectEvent::Pod(change));
        Ok(())
    }

    fn delete_now(&self, pod: &PodRef) -> Result<(), ClientError> {
        let marked = {
            let mut o = self.lock();
            o.writes.deletions.push(pod.clone());
            if !o.graceful_deletion {
                None
            } else {
                let id = (pod.namespace.clone(), pod.name.clone());
                let Some(old) = o.pods.get(&id).cloned() else {
                    return Err(not_found(&pod.name));
                };
                if old.metadata.deletion_timestamp.is_some() {
                    // Deleting a terminating pod again changes nothing.
                    return Ok(());
                }
                let mut new = (*old).clone();
                // Only the presence of the timestamp matters to the scheduler; a fixed
                // value keeps runs reproducible.
                new.metadata.deletion_timestamp =
                    Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
                new.metadata.deletion_grace_period_seconds = Some(30);
                let new = Arc::new(new);
                o.pods.insert(id, new.clone());
                Some(Change::Updated { old, new })
            }
        };
        match marked {
            Some(change) => {
                self.deliver(ObjectEvent::Pod(change));
                Ok(())
            }
            None if self.remove_pod(&pod.namespace, &pod.name) => Ok(()),
            None => Err(not_found(&pod.name)),
        }
    }

    fn bind_now(&self, b: &Binding) -> Result<(), ClientError> {
        let change = {
            let mut o = self.lock();
            o.writes.bindings.push(b.clone());
            if let Some(e) = o.bind_errors.pop_front() {
                return Err(e);
            }
            let id = (b.namespace.clone(), b.name.clone());
            let Some(old) = o.pods.get(&id).cloned() else {
                return Err(not_found(&b.name));
            };
            if let Some(node) = old.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                return Err(ClientError::Api {
                    code: 409,
                    message: format!(
                        "Operation cannot be fulfilled on pods/binding \"{}\": pod {} is already assigned to node \"{}\"",
                        b.name, b.name, node
                    ),
                });
            }
            let mut new = (*old).clone();
            new.spec.get_or_insert_with(Default::default).node_name = Some(b.node.clone());
            let new = Arc::new(new);
            o.pods.insert(id, new.clone());
            Change::Updated { old, new }
        };
        self.deliver(ObjectEvent::Pod(change));
        Ok(())
    }
}

impl ClusterClient for MemoryCluster {
    fn bind<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move { self.bind_now(binding) })
    }

    fn update_pod_status<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move { self.update_status_now(update) })
    }

    fn record_event<'a>(&'a self, event: &'a PodEvent) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.lock().writes.events.push(event.clone());
            Ok(())
        })
    }

    fn delete_pod<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move { self.delete_now(pod) })
    }

    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, ClientError>> {
        Box::pin(async move {
            self.lock().writes.persistent_volumes.push(pv.clone());
            let mut stored = pv.clone();
            stored.metadata.resource_version = Some(next_version(&pv.metadata));
            Ok(stored)
        })
    }

    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, ClientError>> {
        Box::pin(async move {
            self.lock()
                .writes
                .persistent_volume_claims
                .push(pvc.clone());
            let mut stored = pvc.clone();
            stored.metadata.resource_version = Some(next_version(&pvc.metadata));
            Ok(stored)
        })
    }

    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            self.lock().writes.resource_claims.push(claim.clone());
            let mut stored = claim.clone();
            stored.metadata.resource_version = Some(next_version(&claim.metadata));
            Ok(stored)
        })
    }

    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            self.lock()
                .writes
                .resource_claim_statuses
                .push(claim.clone());
            let mut stored = claim.clone();
            stored.metadata.resource_version = Some(next_version(&claim.metadata));
            Ok(stored)
        })
    }

    /// Records the claim, names it after its `generateName` as the API server would (a
    /// counter stands in for the random suffix) and delivers it, as an informer would.
    fn create_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            let mut stored = claim.clone();
            {
                let mut inner = self.lock();
                inner.writes.resource_claims_created.push(claim.clone());
                if stored.metadata.name.as_deref().unwrap_or("").is_empty() {
                    let n = inner.writes.resource_claims_created.len();
                    let base = stored.metadata.generate_name.clone().unwrap_or_default();
                    stored.metadata.name = Some(format!("{base}{n}"));
                    stored.metadata.uid = Some(format!("{base}{n}-uid"));
                }
            }
            stored.metadata.resource_version = Some("1".to_string());
            self.deliver(ObjectEvent::ResourceClaim(Change::Added(Arc::new(
                stored.clone(),
            ))));
            Ok(stored)
        })
    }

    fn delete_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.lock()
                .writes
                .resource_claims_deleted
                .push(claim.clone());
            Ok(())
        })
    }

    fn update_pod_extended_resource_claim_status<'a>(
        &'a self,
        pod: &'a PodRef,
        status: &'a PodExtendedResourceClaimStatus,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            self.lock()
                .writes
                .extended_resource_claim_statuses
                .push((pod.clone(), status.clone()));
            Ok(())
        })
    }
}

/// The `resourceVersion` after one write to an object at `meta`'s version.
fn next_version(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let current: u64 = meta
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    current.saturating_add(1).to_string()
}

/// The API server's answer about a pod that does not exist.
fn not_found(name: &str) -> ClientError {
    ClientError::Api {
        code: 404,
        message: format!("pods \"{name}\" not found"),
    }
}

#[cfg(test)]
mod tests;

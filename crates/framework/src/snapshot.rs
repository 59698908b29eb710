//! A consistent view of the cluster for one scheduling cycle.
//!
//! Upstream: pkg/scheduler/backend/cache/snapshot.go and framework.SharedLister. The node list
//! is in node-tree order (zones interleaved round-robin) so that the filter pass, which may
//! stop early, spreads its picks across zones. NodeInfos are shared by `Arc`; placing a pod
//! copies only the one NodeInfo it lands on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};

use crate::types::{ImageStateSummary, NodeInfo, NodeRow, PodInfo};

/// The objects that select pods and so define their default spreading groups (upstream's
/// Service, ReplicationController, ReplicaSet and StatefulSet listers), by namespace.
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    pub services: HashMap<String, Vec<Arc<Service>>>,
    pub replication_controllers: HashMap<String, Vec<Arc<ReplicationController>>>,
    pub replica_sets: HashMap<String, Vec<Arc<ReplicaSet>>>,
    pub stateful_sets: HashMap<String, Vec<Arc<StatefulSet>>>,
}

impl Workloads {
    /// The Services of namespace `ns`.
    pub fn services(&self, ns: &str) -> &[Arc<Service>] {
        self.services.get(ns).map_or(&[], Vec::as_slice)
    }

    /// The ReplicationControllers of namespace `ns`.
    pub fn replication_controllers(&self, ns: &str) -> &[Arc<ReplicationController>] {
        self.replication_controllers
            .get(ns)
            .map_or(&[], Vec::as_slice)
    }

    /// The ReplicaSets of namespace `ns`.
    pub fn replica_sets(&self, ns: &str) -> &[Arc<ReplicaSet>] {
        self.replica_sets.get(ns).map_or(&[], Vec::as_slice)
    }

    /// The StatefulSets of namespace `ns`.
    pub fn stateful_sets(&self, ns: &str) -> &[Arc<StatefulSet>] {
        self.stateful_sets.get(ns).map_or(&[], Vec::as_slice)
    }
}

/// The storage objects volume plugins read (upstream's PersistentVolume,
/// PersistentVolumeClaim, StorageClass, CSINode, CSIDriver, CSIStorageCapacity and
/// VolumeAttachment listers) and the Dynamic Resource Allocation objects DynamicResources
/// reads (DeviceClass, ResourceSlice and ResourceClaim listers): cluster-scoped objects by
/// name, claims and capacities by `namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct StorageListers {
    pub persistent_volumes: HashMap<String, Arc<PersistentVolume>>,
    pub persistent_volume_claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    pub storage_classes: HashMap<String, Arc<StorageClass>>,
    pub csi_nodes: HashMap<String, Arc<CSINode>>,
    pub csi_drivers: HashMap<String, Arc<CSIDriver>>,
    pub csi_storage_capacities: HashMap<String, Arc<CSIStorageCapacity>>,
    pub volume_attachments: HashMap<String, Arc<VolumeAttachment>>,
    pub device_classes: HashMap<String, Arc<DeviceClass>>,
    pub resource_slices: HashMap<String, Arc<ResourceSlice>>,
    pub resource_claims: HashMap<String, Arc<ResourceClaim>>,
}

impl StorageListers {
    /// The PersistentVolume `name`.
    pub fn persistent_volume(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.persistent_volumes.get(name)
    }

    /// The PersistentVolumeClaim `name` of namespace `ns`.
    pub fn persistent_volume_claim(
        &self,
        ns: &str,
        name: &str,
    ) -> Option<&Arc<PersistentVolumeClaim>> {
        self.persistent_volume_claims.get(&format!("{ns}/{name}"))
    }

    /// The StorageClass `name`.
    pub fn storage_class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.storage_classes.get(name)
    }

    /// The CSINode `name` (a CSINode is named after its node).
    pub fn csi_node(&self, name: &str) -> Option<&Arc<CSINode>> {
        self.csi_nodes.get(name)
    }

    /// The CSIDriver `name`.
    pub fn csi_driver(&self, name: &str) -> Option<&Arc<CSIDriver>> {
        self.csi_drivers.get(name)
    }

    /// The CSIStorageCapacity `name` of namespace `ns`.
    pub fn csi_storage_capacity(&self, ns: &str, name: &str) -> Option<&Arc<CSIStorageCapacity>> {
        self.csi_storage_capacities.get(&format!("{ns}/{name}"))
    }

    /// Every CSIStorageCapacity of the cluster, in no particular order (upstream's
    /// `List(labels.Everything())`: capacity checks look at all of them).
    pub fn all_csi_storage_capacities(&self) -> impl Iterator<Item = &Arc<CSIStorageCapacity>> {
        self.csi_storage_capacities.values()
    }

    /// The VolumeAttachment `name`.
    pub fn volume_attachment(&self, name: &str) -> Option<&Arc<VolumeAttachment>> {
        self.volume_attachments.get(name)
    }

    /// Every VolumeAttachment of the cluster, in no particular order.
    pub fn all_volume_attachments(&self) -> impl Iterator<Item = &Arc<VolumeAttachment>> {
        self.volume_attachments.values()
    }

    /// The DeviceClass `name`.
    pub fn device_class(&self, name: &str) -> Option<&Arc<DeviceClass>> {
        self.device_classes.get(name)
    }

    /// Every ResourceSlice of the cluster, in no particular order (the allocator looks at
    /// every slice and picks those a node reaches).
    pub fn all_resource_slices(&self) -> impl Iterator<Item = &Arc<ResourceSlice>> {
        self.resource_slices.values()
    }

    /// The ResourceClaim `name` of namespace `ns`.
    pub fn resource_claim(&self, ns: &str, name: &str) -> Option<&Arc<ResourceClaim>> {
        self.resource_claims.get(&format!("{ns}/{name}"))
    }

    /// Every ResourceClaim of the cluster, in no particular order (allocated claims hold
    /// the devices in use).
    pub fn all_resource_claims(&self) -> impl Iterator<Item = &Arc<ResourceClaim>> {
        self.resource_claims.values()
    }
}

/// The nodes of the cluster with their pods, as the plugins see them.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    node_info_list: Vec<Arc<NodeInfo>>,
    /// **Invariant:** `rows[i] == NodeRow::of(&node_info_list[i]).at(i)`: every change of
    /// a NodeInfo here rewrites its row (and only its row).
    rows: Vec<NodeRow>,
    index: HashMap<String, usize>,
    /// Indices of nodes with at least one pod that has pod (anti-)affinity.
    have_pods_with_affinity: Vec<usize>,
    /// Indices of nodes with at least one pod that has required anti-affinity.
    have_pods_with_required_anti_affinity: Vec<usize>,
    /// Namespace labels, for affinity terms with a namespaceSelector.
    namespace_labels: HashMap<String, BTreeMap<String, String>>,
    /// Services and controllers, for default topology spreading. Shared: they change
    /// rarely and every snapshot of a cycle reads the same ones.
    workloads: Arc<Workloads>,
    /// PodDisruptionBudgets, for preemption (upstream's PDB lister), in a stable order.
    pdbs: Arc<Vec<Arc<PodDisruptionBudget>>>,
    /// Volumes, claims, classes, CSI objects and DRA objects, for the volume plugins and
    /// DynamicResources. Shared like `workloads`.
    storage: Arc<StorageListers>,
    /// Every claim (by [`pvc_key`](crate::types::pvc_key)) a pod on a node of the list
    /// uses, with the number of such nodes: upstream's usedPVCSet, kept by counting so that
    /// replacing one NodeInfo adjusts it without walking the others.
    used_pvcs: HashMap<String, u32>,
    /// The newest cache generation this snapshot reflects (0 when built by [`Snapshot::new`]);
    /// the scheduler cache copies in only NodeInfos changed since.
    generation: u64,
    /// Names the node list by its content: a hash of the node names in list order, so
    /// that a position taken under one version names the same node in any list of that
    /// version (another snapshot of the same nodes included).
    list_version: u64,
    /// The names of the list the last [`Snapshot::set_node_infos`] replaced, with its
    /// version: what a position taken in the cycle before a rebuild named.
    retired: Option<(u64, Vec<Arc<str>>)>,
}

/// The version of a node list (see [`Snapshot::list_version`]): its length and names, in
/// order, hashed.
fn list_version_of(list: &[Arc<NodeInfo>]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    list.len().hash(&mut h);
    for n in list {
        n.name().hash(&mut h);
    }
    h.finish()
}

/// The zone key of a node: region and zone labels, or "" when it has neither.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |a: &str, b: &str| {
        labels
            .and_then(|l| l.get(a).or_else(|| l.get(b)))
            .cloned()
            .unwrap_or_default()
    };
    let region = get(
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    );
    let zone = get(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\x00:{zone}")
    }
}

impl Snapshot {
    /// Builds a snapshot from nodes and the pods assigned to them. Pods whose node is not in
    /// `nodes` are left out. Nodes are ordered zone by zone, round-robin, keeping the input
    /// order within a zone.
    pub fn new(nodes: Vec<Arc<Node>>, pods: impl IntoIterator<Item = Arc<PodInfo>>) -> Self {
        // Group by zone in first-seen order, then interleave.
        let mut zones: Vec<(String, Vec<Arc<Node>>)> = Vec::new();
        for node in nodes {
            let key = zone_key(&node);
            match zones.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(node),
                None => zones.push((key, vec![node])),
            }
        }
        let total: usize = zones.iter().map(|(_, l)| l.len()).sum();
        let mut ordered = Vec::with_capacity(total);
        let mut cursors: Vec<std::vec::IntoIter<Arc<Node>>> =
            zones.into_iter().map(|(_, l)| l.into_iter()).collect();
        while ordered.len() < total {
            for c in cursors.iter_mut() {
                if let Some(n) = c.next() {
                    ordered.push(n);
                }
            }
        }

        let mut infos: Vec<NodeInfo> = ordered.into_iter().map(NodeInfo::new).collect();
        let mut index = HashMap::with_capacity(infos.len());
        for (i, ni) in infos.iter().enumerate() {
            index.insert(ni.name().to_string(), i);
        }
        for pod in pods {
            if let Some(&i) = pod.node_name().and_then(|n| index.get(n)) {
                infos[i].add_pod(pod);
            }
        }
        // Image states: how many nodes hold each image name.
        // A name listed twice on one node still counts that node once.
        let mut spread: HashMap<&str, usize> = HashMap::new();
        for ni in &infos {
            let names: std::collections::HashSet<&str> = ni
                .node()
                .status
                .iter()
                .flat_map(|s| s.images.iter().flatten())
                .flat_map(|img| img.names.iter().flatten())
                .map(String::as_str)
                .collect();
            for name in names {
                *spread.entry(name).or_insert(0) += 1;
            }
        }
        let summaries: Vec<HashMap<String, ImageStateSummary>> = infos
            .iter()
            .map(|ni| {
                let mut m = HashMap::new();
                for img in ni
                    .node()
                    .status
                    .iter()
                    .flat_map(|s| s.images.iter().flatten())
                {
                    for name in img.names.iter().flatten() {
                        m.insert(
                            name.clone(),
                            ImageStateSummary {
                                size: img.size_bytes.unwrap_or(0),
                                num_nodes: spread.get(name.as_str()).copied().unwrap_or(1),
                            },
                        );
                    }
                }
                m
            })
            .collect();
        for (ni, m) in infos.iter_mut().zip(summaries) {
            ni.image_states = m;
        }

        let mut snap = Snapshot {
            rows: infos
                .iter()
                .enumerate()
                .map(|(i, ni)| NodeRow::of(ni).at(i))
                .collect(),
            node_info_list: infos.into_iter().map(Arc::new).collect(),
            index,
            ..Default::default()
        };
        snap.list_version = list_version_of(&snap.node_info_list);
        snap.rebuild_affinity_lists();
        snap.rebuild_used_pvcs();
        snap
    }

    /// Recomputes the row of the node at position `i` from its NodeInfo.
    fn refresh_row(&mut self, i: usize) {
        if let (Some(row), Some(ni)) = (self.rows.get_mut(i), self.node_info_list.get(i)) {
            *row = NodeRow::of(ni).at(i);
        }
    }

    fn rebuild_used_pvcs(&mut self) {
        self.used_pvcs.clear();
        for ni in &self.node_info_list {
            for key in ni.pvc_ref_counts.keys() {
                *self.used_pvcs.entry(key.clone()).or_insert(0) += 1;
            }
        }
    }

    /// Moves the claim counts from `old`'s claims to `new`'s (the same node, changed).
    fn swap_used_pvcs(&mut self, old: &NodeInfo, new: &NodeInfo) {
        if old.pvc_ref_counts.is_empty() && new.pvc_ref_counts.is_empty() {
            return;
        }
        for key in old.pvc_ref_counts.keys() {
            if !new.pvc_ref_counts.contains_key(key) {
                self.uncount_pvc(key);
            }
        }
        for key in new.pvc_ref_counts.keys() {
            if !old.pvc_ref_counts.contains_key(key) {
                *self.used_pvcs.entry(key.clone()).or_insert(0) += 1;
            }
        }
    }

    fn uncount_pvc(&mut self, key: &str) {
        if let Some(n) = self.used_pvcs.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.used_pvcs.remove(key);
            }
        }
    }

    /// Whether a pod on some node of the snapshot (assumed pods included) uses claim `key`
    /// (`namespace/name`, see [`pvc_key`](crate::types::pvc_key)).
    /// Upstream: StorageInfoLister.IsPVCUsedByPods.
    pub fn is_pvc_used_by_pods(&self, key: &str) -> bool {
        self.used_pvcs.contains_key(key)
    }

    fn rebuild_affinity_lists(&mut self) {
        self.have_pods_with_affinity.clear();
        self.have_pods_with_required_anti_affinity.clear();
        for (i, ni) in self.node_info_list.iter().enumerate() {
            if !ni.pods_with_affinity.is_empty() {
                self.have_pods_with_affinity.push(i);
            }
            if !ni.pods_with_required_anti_affinity.is_empty() {
                self.have_pods_with_required_anti_affinity.push(i);
            }
        }
    }

    /// Sets the labels of the cluster's namespaces.
    pub fn set_namespace_labels(&mut self, labels: HashMap<String, BTreeMap<String, String>>) {
        self.namespace_labels = labels;
    }

    /// Every known namespace with its labels (what a namespace lister would list).
    pub fn namespaces(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, String>)> {
        self.namespace_labels.iter().map(|(n, l)| (n.as_str(), l))
    }

    /// The labels of namespace `ns`, if known.
    pub fn namespace_labels(&self, ns: &str) -> Option<&BTreeMap<String, String>> {
        self.namespace_labels.get(ns)
    }

    /// Sets the Services and controllers.
    pub fn set_workloads(&mut self, workloads: Arc<Workloads>) {
        self.workloads = workloads;
    }

    /// The Services and controllers of the cluster.
    pub fn workloads(&self) -> &Workloads {
        &self.workloads
    }

    /// Sets the PodDisruptionBudgets.
    pub fn set_pdbs(&mut self, pdbs: Arc<Vec<Arc<PodDisruptionBudget>>>) {
        self.pdbs = pdbs;
    }

    /// The PodDisruptionBudgets of the cluster.
    pub fn pdbs(&self) -> &[Arc<PodDisruptionBudget>] {
        &self.pdbs
    }

    /// Sets the volumes, claims and classes.
    pub fn set_storage(&mut self, storage: Arc<StorageListers>) {
        self.storage = storage;
    }

    /// The volumes, claims and classes of the cluster.
    pub fn storage(&self) -> &StorageListers {
        &self.storage
    }

    /// The storage listers, shared: for a plugin that keeps them in its cycle state for
    /// Filter, which sees only a NodeInfo.
    pub fn storage_shared(&self) -> &Arc<StorageListers> {
        &self.storage
    }

    /// Every node, in node-tree order.
    pub fn node_infos(&self) -> &[Arc<NodeInfo>] {
        &self.node_info_list
    }

    pub fn num_nodes(&self) -> usize {
        self.node_info_list.len()
    }

    /// The [`NodeRow`] of each node, in node-tree order: `rows()[i]` is the row of
    /// `node_infos()[i]`, at position `i`. What the hot Filter and Score plugins read instead of the NodeInfo.
    pub fn rows(&self) -> &[NodeRow] {
        &self.rows
    }

    /// The node named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.node_info_list[i])
    }

    /// The position of node `name` in [`node_infos`](Self::node_infos).
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Nodes with at least one pod that has pod (anti-)affinity.
    pub fn have_pods_with_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.have_pods_with_affinity
            .iter()
            .map(|&i| &self.node_info_list[i])
    }

    /// Nodes with at least one pod that has required anti-affinity.
    pub fn have_pods_with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.have_pods_with_required_anti_affinity
            .iter()
            .map(|&i| &self.node_info_list[i])
    }

    /// The newest cache generation this snapshot reflects; see
    /// [`set_generation`](Self::set_generation).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Records that this snapshot now reflects every cache change up to generation `g`.
    /// Only the scheduler cache's incremental update sets it.
    pub fn set_generation(&mut self, g: u64) {
        self.generation = g;
    }

    /// Replaces the NodeInfo of the node with `info`'s name, keeping its position (an
    /// incremental update: the node list order is unchanged). The affinity lists follow
    /// when the node starts or stops having pods with (anti-)affinity. Returns false, and
    /// changes nothing, when the snapshot has no such node.
    pub fn replace_node_info(&mut self, info: Arc<NodeInfo>) -> bool {
        let Some(&i) = self.index.get(info.name()) else {
            return false;
        };
        let old = std::mem::replace(&mut self.node_info_list[i], info.clone());
        self.refresh_row(i);
        let flips = old.pods_with_affinity.is_empty() != info.pods_with_affinity.is_empty()
            || old.pods_with_required_anti_affinity.is_empty()
                != info.pods_with_required_anti_affinity.is_empty();
        self.swap_used_pvcs(&old, &info);
        if flips {
            self.rebuild_affinity_lists();
        }
        true
    }

    /// Replaces the whole node list with `list`, taken as given (node-tree order, image
    /// states already set), and rebuilds the name index and the affinity lists. Used by the
    /// scheduler cache when nodes were added or removed or changed zone.
    pub fn set_node_infos(&mut self, list: Vec<Arc<NodeInfo>>) {
        let old_names = self
            .node_info_list
            .iter()
            .map(|n| n.name_arc().clone())
            .collect();
        self.retired = Some((self.list_version, old_names));
        self.list_version = list_version_of(&list);
        self.index = list
            .iter()
            .enumerate()
            .map(|(i, ni)| (ni.name().to_string(), i))
            .collect();
        self.rows = list
            .iter()
            .enumerate()
            .map(|(i, ni)| NodeRow::of(ni).at(i))
            .collect();
        self.node_info_list = list;
        self.rebuild_affinity_lists();
        self.rebuild_used_pvcs();
    }

    /// The version of the node list: positions in [`node_infos`](Self::node_infos) taken
    /// under one version name the same nodes in every list of that version.
    pub fn list_version(&self) -> u64 {
        self.list_version
    }

    /// The name of the node at `position` in the node list of version `version`: this
    /// snapshot's list, or the one its last rebuild replaced; `None` for another version or
    /// a position past the list's end.
    pub fn name_at(&self, version: u64, position: usize) -> Option<&Arc<str>> {
        if version == self.list_version {
            return self.node_info_list.get(position).map(|n| n.name_arc());
        }
        match &self.retired {
            Some((v, names)) if *v == version => names.get(position),
            _ => None,
        }
    }

    /// Places `pod` on node `node` (as the cache does when a pod is assumed): only that
    /// NodeInfo is copied. Returns false when there is no such node. The snapshot then
    /// differs from the cache it came from, so its generation is reset: the cache's next
    /// update refreshes it whole.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>, node: &str) -> bool {
        let Some(&i) = self.index.get(node) else {
            return false;
        };
        self.generation = 0;
        let had_affinity = !self.node_info_list[i].pods_with_affinity.is_empty();
        let had_anti = !self.node_info_list[i]
            .pods_with_required_anti_affinity
            .is_empty();
        let newly_used: BTreeSet<String> = pod
            .pvc_keys()
            .filter(|k| !self.node_info_list[i].pvc_ref_counts.contains_key(k))
            .collect();
        Arc::make_mut(&mut self.node_info_list[i]).add_pod(pod);
        self.refresh_row(i);
        for key in newly_used {
            *self.used_pvcs.entry(key).or_insert(0) += 1;
        }
        let ni = &self.node_info_list[i];
        if !had_affinity && !ni.pods_with_affinity.is_empty()
            || !had_anti && !ni.pods_with_required_anti_affinity.is_empty()
        {
            self.rebuild_affinity_lists();
        }
        true
    }

    /// Removes the pod whose [`PodInfo::id`](crate::PodInfo::id) is `id` from node `node`;
    /// returns whether it was there. Like [`assume_pod`](Self::assume_pod), resets the
    /// generation.
    pub fn remove_pod(&mut self, id: &str, node: &str) -> bool {
        let Some(&i) = self.index.get(node) else {
            return false;
        };
        if !self.node_info_list[i]
            .pods
            .iter()
            .any(|p| p.id.as_str() == id)
        {
            return false;
        }
        self.generation = 0;
        let claims: BTreeSet<String> = self.node_info_list[i]
            .pods
            .iter()
            .find(|p| p.id.as_str() == id)
            .map(|p| p.pvc_keys().collect())
            .unwrap_or_default();
        Arc::make_mut(&mut self.node_info_list[i]).remove_pod(id);
        self.refresh_row(i);
        for key in claims {
            if !self.node_info_list[i].pvc_ref_counts.contains_key(&key) {
                self.uncount_pvc(&key);
            }
        }
        self.rebuild_affinity_lists();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{make_node, make_pod};

    fn zoned(name: &str, zone: &str) -> Arc<Node> {
        Arc::new(
            make_node(name)
                .label("topology.kubernetes.io/zone", zone)
                .obj(),
        )
    }

    #[test]
    fn nodes_are_interleaved_by_zone() {
        let snap = Snapshot::new(
            vec![
                zoned("a1", "a"),
                zoned("a2", "a"),
                zoned("a3", "a"),
                zoned("b1", "b"),
                zoned("c1", "c"),
                zoned("c2", "c"),
            ],
            [],
        );
        let names: Vec<&str> = snap.node_infos().iter().map(|n| n.name()).collect();
        assert_eq!(names, vec!["a1", "b1", "c1", "a2", "c2", "a3"]);
    }

    #[test]
    fn pods_land_on_their_nodes_and_unknown_nodes_are_skipped() {
        let snap = Snapshot::new(
            vec![
                Arc::new(make_node("n1").obj()),
                Arc::new(make_node("n2").obj()),
            ],
            [
                make_pod("p1").node("n1").info(),
                make_pod("p2").node("n1").info(),
                make_pod("p3").node("gone").info(),
            ],
        );
        let counts: Vec<(&str, usize)> = snap
            .node_infos()
            .iter()
            .map(|n| (n.name(), n.pods.len()))
            .collect();
        assert_eq!(counts, vec![("n1", 2), ("n2", 0)]);
    }

    #[test]
    fn image_states_count_each_node_once() {
        let snap = Snapshot::new(
            vec![
                Arc::new(make_node("n1").image(&["nginx:1.25"], 100).obj()),
                Arc::new(
                    make_node("n2")
                        .image(&["nginx:1.25", "nginx@sha256:abc"], 100)
                        .image(&["nginx:1.25"], 100)
                        .obj(),
                ),
            ],
            [],
        );
        let n2 = snap.get("n2").map(|n| {
            let mut v: Vec<(String, ImageStateSummary)> = n
                .image_states
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        });
        assert_eq!(
            n2,
            Some(vec![
                (
                    "nginx:1.25".to_string(),
                    ImageStateSummary {
                        size: 100,
                        num_nodes: 2
                    }
                ),
                (
                    "nginx@sha256:abc".to_string(),
                    ImageStateSummary {
                        size: 100,
                        num_nodes: 1
                    }
                ),
            ])
        );
    }

    #[test]
    fn assume_copies_only_the_target_node() {
        let mut snap = Snapshot::new(
            vec![
                Arc::new(make_node("n1").obj()),
                Arc::new(make_node("n2").obj()),
            ],
            [],
        );
        let before = snap.clone();
        snap.assume_pod(make_pod("p").info(), "n2");
        let shared: Vec<bool> = before
            .node_infos()
            .iter()
            .zip(snap.node_infos())
            .map(|(a, b)| Arc::ptr_eq(a, b))
            .collect();
        assert_eq!(shared, vec![true, false]);
    }

    #[test]
    fn replace_node_info_keeps_order_and_follows_affinity() {
        use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, PodAntiAffinity};
        let mut snap = Snapshot::new(
            vec![
                Arc::new(make_node("n1").obj()),
                Arc::new(make_node("n2").obj()),
            ],
            [],
        );
        let anti = make_pod("p")
            .with(|p| {
                if let Some(spec) = p.spec.as_mut() {
                    spec.affinity = Some(Affinity {
                        pod_anti_affinity: Some(PodAntiAffinity {
                            required_during_scheduling_ignored_during_execution: Some(vec![
                                PodAffinityTerm {
                                    topology_key: "kubernetes.io/hostname".into(),
                                    ..Default::default()
                                },
                            ]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                }
            })
            .info();
        let mut n2 = (**snap.get("n2").unwrap()).clone();
        n2.add_pod(anti);
        let n2 = Arc::new(n2);
        let unknown = Arc::new(NodeInfo::new(Arc::new(make_node("n9").obj())));
        let replaced = (
            snap.replace_node_info(n2.clone()),
            snap.replace_node_info(unknown),
        );
        let names: Vec<&str> = snap.node_infos().iter().map(|n| n.name()).collect();
        let anti_nodes: Vec<&str> = snap
            .have_pods_with_required_anti_affinity()
            .map(|n| n.name())
            .collect();
        assert_eq!(
            (
                replaced,
                names,
                anti_nodes,
                Arc::ptr_eq(snap.get("n2").unwrap(), &n2)
            ),
            ((true, false), vec!["n1", "n2"], vec!["n2"], true)
        );
    }

    #[test]
    fn set_node_infos_reindexes() {
        let mut snap = Snapshot::new(vec![Arc::new(make_node("n1").obj())], []);
        snap.set_generation(7);
        snap.set_node_infos(vec![
            Arc::new(NodeInfo::new(Arc::new(make_node("b").obj()))),
            Arc::new(NodeInfo::new(Arc::new(make_node("a").obj()))),
        ]);
        assert_eq!(
            (
                snap.position("a"),
                snap.position("b"),
                snap.get("n1").is_some(),
                snap.generation()
            ),
            (Some(1), Some(0), false, 7)
        );
    }

    /// The claims the snapshot reports as used, out of `keys`.
    fn used(snap: &Snapshot, keys: &[&str]) -> Vec<String> {
        keys.iter()
            .filter(|k| snap.is_pvc_used_by_pods(k))
            .map(|k| k.to_string())
            .collect()
    }

    /// Claims of pods in the snapshot, one of a pod on a node not in it, and one unused.
    const CLAIMS: [&str; 5] = [
        "default/data",
        "default/logs",
        "other/data",
        "default/lost",
        "default/none",
    ];

    #[test]
    fn used_pvcs_follow_new_assume_remove_replace_and_set() {
        let mut snap = Snapshot::new(
            vec![
                Arc::new(make_node("n1").obj()),
                Arc::new(make_node("n2").obj()),
            ],
            [
                make_pod("a").node("n1").pvc("data").info(),
                make_pod("b").node("n2").pvc("data").info(),
                make_pod("c").node("gone").pvc("lost").info(),
            ],
        );
        let built = used(&snap, &CLAIMS);
        // A pod naming one claim twice.
        snap.assume_pod(
            make_pod("d")
                .namespace("other")
                .pvc("data")
                .pvc("data")
                .info(),
            "n1",
        );
        snap.assume_pod(make_pod("e").pvc("logs").info(), "n2");
        let assumed = used(&snap, &CLAIMS);
        snap.remove_pod("uid-a", "n1");
        let a_removed = used(&snap, &CLAIMS);
        snap.remove_pod("uid-d", "n1");
        snap.remove_pod("uid-b", "n2");
        let only_logs = used(&snap, &CLAIMS);
        // The cache hands over a changed n2 without the pod using logs, then a new list.
        let n2 = Arc::new(make_node("n2").info_with(&[make_pod("f").pvc("data").info()]));
        snap.replace_node_info(n2.clone());
        let replaced = used(&snap, &CLAIMS);
        snap.set_node_infos(vec![Arc::new(make_node("n1").info_with(&[]))]);
        assert_eq!(
            (
                built,
                assumed,
                a_removed,
                only_logs,
                replaced,
                used(&snap, &CLAIMS)
            ),
            (
                vec!["default/data".to_string()],
                vec![
                    "default/data".to_string(),
                    "default/logs".to_string(),
                    "other/data".to_string()
                ],
                vec![
                    "default/data".to_string(),
                    "default/logs".to_string(),
                    "other/data".to_string()
                ],
                vec!["default/logs".to_string()],
                vec!["default/data".to_string()],
                vec![],
            )
        );
    }

    /// Whether every row equals the row computed fresh from its NodeInfo; the rows of the
    /// nodes whose row differs, by name, so that a failure names them.
    fn stale_rows(snap: &Snapshot) -> Vec<String> {
        let mut stale: Vec<String> = snap
            .node_infos()
            .iter()
            .zip(snap.rows())
            .enumerate()
            .filter(|(i, (ni, row))| NodeRow::of(ni).at(*i) != **row)
            .map(|(_, (ni, _))| ni.name().to_string())
            .collect();
        if snap.rows().len() != snap.num_nodes() {
            stale.push(format!(
                "{} rows for {} nodes",
                snap.rows().len(),
                snap.num_nodes()
            ));
        }
        stale
    }

    fn row_of(snap: &Snapshot, node: &str) -> Option<NodeRow> {
        snap.position(node)
            .and_then(|i| snap.rows().get(i).copied())
    }

    #[test]
    fn rows_equal_their_node_infos_after_every_change() {
        let big = [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")];
        let mut snap = Snapshot::new(
            vec![
                Arc::new(make_node("n1").capacity(&big).obj()),
                Arc::new(
                    make_node("n2")
                        .capacity(&big)
                        .taint("k", "v", "NoSchedule")
                        .image(&["nginx:1.25"], 100)
                        .obj(),
                ),
                Arc::new(make_node("n3").capacity(&big).unschedulable(true).obj()),
            ],
            [make_pod("a")
                .node("n1")
                .req(&[("cpu", "1"), ("memory", "1Gi")])
                .info()],
        );
        let mut stale = vec![("new", stale_rows(&snap))];
        let built_n1 = row_of(&snap, "n1");
        snap.assume_pod(
            make_pod("b")
                .req(&[("cpu", "500m"), ("ephemeral-storage", "1Gi")])
                .info(),
            "n1",
        );
        stale.push(("assume", stale_rows(&snap)));
        let assumed_n1 = row_of(&snap, "n1");
        snap.remove_pod("uid-a", "n1");
        stale.push(("remove", stale_rows(&snap)));
        let removed_n1 = row_of(&snap, "n1");
        // The cache hands over a changed n3 (schedulable again, with a pod) and n2 (its
        // taint gone).
        let n3 = make_node("n3")
            .capacity(&big)
            .info_with(&[make_pod("c").req(&[("memory", "2Gi")]).info()]);
        snap.replace_node_info(Arc::new(n3));
        snap.replace_node_info(Arc::new(make_node("n2").capacity(&big).info_with(&[])));
        stale.push(("replace", stale_rows(&snap)));
        let replaced_n3 = row_of(&snap, "n3");
        snap.set_node_infos(vec![
            Arc::new(make_node("n4").taint("k", "", "NoExecute").info_with(&[])),
            snap.node_infos()[0].clone(),
        ]);
        stale.push(("set", stale_rows(&snap)));
        let gib = 1024 * 1024 * 1024;
        let n1 = NodeRow {
            allocatable_milli_cpu: 4000,
            allocatable_memory: 8 * gib,
            allowed_pod_number: 110,
            ..NodeRow::default()
        }
        .at(0);
        assert_eq!(
            (
                stale,
                built_n1,
                assumed_n1,
                removed_n1,
                replaced_n3,
                row_of(&snap, "n4")
            ),
            (
                vec![
                    ("new", vec![]),
                    ("assume", vec![]),
                    ("remove", vec![]),
                    ("replace", vec![]),
                    ("set", vec![]),
                ],
                Some(NodeRow {
                    requested_milli_cpu: 1000,
                    requested_memory: gib,
                    non_zero_milli_cpu: 1000,
                    non_zero_memory: gib,
                    pods: 1,
                    ..n1
                }),
                Some(NodeRow {
                    requested_milli_cpu: 1500,
                    requested_memory: gib,
                    requested_ephemeral_storage: gib,
                    non_zero_milli_cpu: 1500,
                    non_zero_memory: gib + 200 * 1024 * 1024,
                    pods: 2,
                    ..n1
                }),
                Some(NodeRow {
                    requested_milli_cpu: 500,
                    requested_ephemeral_storage: gib,
                    non_zero_milli_cpu: 500,
                    non_zero_memory: 200 * 1024 * 1024,
                    pods: 1,
                    ..n1
                }),
                Some(NodeRow {
                    requested_memory: 2 * gib,
                    non_zero_milli_cpu: 100,
                    non_zero_memory: 2 * gib,
                    pods: 1,
                    ..n1.at(2)
                }),
                Some(NodeRow {
                    has_taints: true,
                    ..NodeRow::default().at(0)
                }),
            )
        );
    }

    #[test]
    fn rows_carry_the_flags_filter_reads() {
        let snap = Snapshot::new(
            vec![
                Arc::new(make_node("plain").obj()),
                Arc::new(make_node("cordoned").unschedulable(true).obj()),
                Arc::new(make_node("tainted").taint("k", "", "NoSchedule").obj()),
                Arc::new(make_node("imaged").image(&["nginx:1.25"], 100).obj()),
            ],
            [],
        );
        let flags: Vec<(&str, bool, bool, bool)> = snap
            .node_infos()
            .iter()
            .zip(snap.rows())
            .map(|(ni, r)| (ni.name(), r.unschedulable, r.has_taints, r.has_images))
            .collect();
        assert_eq!(
            flags,
            vec![
                ("plain", false, false, false),
                ("cordoned", true, false, false),
                ("tainted", false, true, false),
                ("imaged", false, false, true),
            ]
        );
    }
}

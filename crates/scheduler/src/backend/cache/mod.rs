//! The scheduler cache: every node and every assigned or assumed pod, kept up to date by
//! the event handlers, and copied incrementally into the [`Snapshot`] each cycle reads.
//!
//! Upstream: pkg/scheduler/backend/cache (cache.go, node_tree.go, snapshot.go).
//!
//! A pod's life here: the scheduling loop *assumes* it on the node it chose (its resources
//! count at once, before the API server knows), the binding task calls
//! [`Cache::finish_binding`], and the pod's add event confirms it ([`Cache::add_pod`]).
//! When binding fails the loop calls [`Cache::forget_pod`]. An assumed pod whose binding
//! finished but whose add event never came is dropped by [`Cache::cleanup_assumed_pods`]
//! once its TTL has passed (a TTL of zero, upstream's default, never expires).
//!
//! **Invariant:** the cache never changes a `NodeInfo` it has handed out: every change goes
//! through `Arc::make_mut`, so a snapshot (and the plugins' per-node caches, keyed by the
//! `Arc`) keeps seeing the version it was given, and a changed node always has a new `Arc`.
//!
//! **Invariant:** the cache has a single writer (the event handlers and the scheduling loop
//! under the scheduler's lock); the scheduling cycle reads only its snapshot.

mod node_tree;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framework::types::{next_generation, ImageStateSummary};
use framework::{NodeInfo, PodInfo, PodKey, Snapshot};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::clock::Clock;
pub use node_tree::NodeTree;

/// Why the cache refused an operation. Nothing in the cache changed when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The pod is already assumed (the scheduling loop assumed it twice).
    #[error("pod {pod} is already assumed on node {node}")]
    AlreadyAssumed { pod: String, node: String },
    /// The pod was already added by an add event (a duplicate add, or an assume of a pod
    /// that is already bound).
    #[error("pod {pod} is already added on node {node}")]
    AlreadyAdded { pod: String, node: String },
    /// The pod has no `spec.nodeName`, so it cannot be placed.
    #[error("pod {pod} has no node name")]
    NotAssigned { pod: String },
    /// The pod is in the cache but not assumed (forget, finish_binding of a confirmed pod).
    #[error("pod {pod} is not assumed")]
    NotAssumed { pod: String },
    /// An update event for a pod that is still assumed: its add event must come first.
    #[error("assumed pod {pod} cannot be updated before its add event")]
    UpdateOfAssumed { pod: String },
    /// No pod with this UID is in the cache.
    #[error("pod with uid {uid} is not in the cache")]
    PodNotFound { uid: String },
    /// No node with this name is in the cache.
    #[error("node {node} is not in the cache")]
    NodeNotFound { node: String },
}

/// A node as the cache keeps it: its NodeInfo, and whether the node object itself is known
/// (a NodeInfo without one holds pods whose node was deleted or has not arrived yet; it is
/// never put in a snapshot).
#[derive(Debug, Clone)]
struct NodeEntry {
    info: Arc<NodeInfo>,
    has_node: bool,
}

/// A pod the cache counts.
#[derive(Debug, Clone)]
struct PodState {
    pod: Arc<PodInfo>,
    /// The node it is counted on.
    node: String,
    assumed: bool,
    binding_finished: bool,
    /// When an assumed pod whose binding finished expires; `None` with a zero TTL.
    deadline: Option<Instant>,
}

/// What the cache holds, for debugging and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDump {
    /// Node name, whether the node object is known, and its pod keys (sorted), by name.
    pub nodes: Vec<(String, bool, Vec<String>)>,
    /// Keys of the assumed pods, sorted.
    pub assumed_pods: Vec<String>,
}

/// One node as the cache counts it: what it offers, what its pods (assumed ones included)
/// request, and those pods, for the web view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUsage {
    pub name: String,
    pub allocatable: framework::Resource,
    pub requested: framework::Resource,
    /// Pod keys (`namespace/name`), sorted; `true` for pods assumed, not yet bound.
    pub pods: Vec<(String, bool)>,
}

/// Nodes and pods as the event handlers report them, plus the pods the scheduler assumed.
///
/// Upstream: pkg/scheduler/backend/cache/cache.go (cacheImpl).
#[derive(Debug)]
pub struct Cache {
    ttl: Duration,
    clock: Arc<dyn Clock>,
    nodes: HashMap<String, NodeEntry>,
    /// Node names by the generation of their NodeInfo, so that an update finds the nodes
    /// changed since a snapshot without walking them all (upstream keeps a recency list).
    by_generation: BTreeMap<u64, String>,
    /// Pods by UID.
    pods: HashMap<PodKey, PodState>,
    tree: NodeTree,
    /// Generation of the last change to the node tree (node added, removed or moved zone).
    tree_generation: u64,
    /// Image name to the nodes that have it.
    images: HashMap<String, HashSet<String>>,
    /// Images whose node count changed since the node infos were last told.
    dirty_images: HashSet<String>,
}

/// Succeeded and Failed pods hold no resources. Upstream's pod informer never delivers them
/// (a field selector drops them, so turning terminal arrives as a delete); the cache gets the
/// same effect by treating them as absent.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether the pod is bound to a node (`spec.nodeName` set).
pub fn is_assigned(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// A stand-in node object for a NodeInfo that holds pods of a node not known (yet).
fn placeholder_node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Image name to size for `node`'s images (a name listed twice: the last listing wins, as
/// in [`Snapshot::new`]).
fn node_images(node: &Node) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    for img in node.status.iter().flat_map(|s| s.images.iter().flatten()) {
        for name in img.names.iter().flatten() {
            out.insert(name.clone(), img.size_bytes.unwrap_or(0));
        }
    }
    out
}

impl Cache {
    /// An empty cache whose assumed pods expire `ttl` after their binding finished (zero:
    /// never, upstream's default since assumed pods expiring mid-bind double-counted
    /// resources), reading time from `clock`.
    pub fn new(ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Cache {
            ttl,
            clock,
            nodes: HashMap::new(),
            by_generation: BTreeMap::new(),
            pods: HashMap::new(),
            tree: NodeTree::default(),
            tree_generation: 0,
            images: HashMap::new(),
            dirty_images: HashSet::new(),
        }
    }

    // ---- nodes ----

    /// A node's add event. A node already known is updated.
    pub fn add_node(&mut self, node: Arc<Node>) {
        self.set_node(node);
    }

    /// A node's update event (`old` is not needed: the cache knows what it had).
    pub fn update_node(&mut self, _old: &Node, new: Arc<Node>) {
        self.set_node(new);
    }

    fn set_node(&mut self, node: Arc<Node>) {
        let name = node_name(&node).to_string();
        let old_images: HashSet<String> = self
            .nodes
            .get(&name)
            .filter(|e| e.has_node)
            .map(|e| node_images(e.info.node()).into_keys().collect())
            .unwrap_or_default();
        if self.tree.add_node(&node) {
            self.tree_generation = next_generation();
        }
        // Only images this node gained or lost change counts on other nodes; a status
        // update with the same images (the usual heartbeat) touches no other node.
        let images = node_images(&node);
        for img in old_images.iter().filter(|i| !images.contains_key(*i)) {
            self.forget_image(&name, img);
        }
        for img in images.keys().filter(|i| !old_images.contains(*i)) {
            self.images
                .entry(img.clone())
                .or_default()
                .insert(name.clone());
            self.dirty_images.insert(img.clone());
        }
        let states: HashMap<String, ImageStateSummary> = images
            .into_iter()
            .map(|(img, size)| {
                let num_nodes = self.images.get(&img).map_or(1, HashSet::len);
                (img, ImageStateSummary { size, num_nodes })
            })
            .collect();
        self.modify_node(&name, |e| {
            e.has_node = true;
            let ni = Arc::make_mut(&mut e.info);
            ni.set_node(node);
            ni.image_states = states;
        });
    }

    /// Node `name` no longer has image `img`.
    fn forget_image(&mut self, name: &str, img: &str) {
        if let Some(set) = self.images.get_mut(img) {
            set.remove(name);
            if set.is_empty() {
                self.images.remove(img);
            }
        }
        self.dirty_images.insert(img.to_string());
    }

    fn drop_images(&mut self, name: &str, node: &Node) {
        for img in node_images(node).into_keys() {
            self.forget_image(name, &img);
        }
    }

    /// A node's delete event. Its NodeInfo stays (without the node) while pods still name
    /// it, since their delete events may come later; it leaves the snapshot at once.
    pub fn remove_node(&mut self, node: &Node) -> Result<(), CacheError> {
        let name = node_name(node).to_string();
        let Some(old) = self
            .nodes
            .get(&name)
            .filter(|e| e.has_node)
            .map(|e| e.info.node_arc().clone())
        else {
            return Err(CacheError::NodeNotFound { node: name });
        };
        self.drop_images(&name, &old);
        if self.tree.remove_node(&old) {
            self.tree_generation = next_generation();
        }
        self.modify_node(&name, |e| {
            e.has_node = false;
            let ni = Arc::make_mut(&mut e.info);
            ni.image_states.clear();
            ni.generation = next_generation();
        });
        Ok(())
    }

    /// Runs `f` on the entry of node `name` (created without a node when missing), keeps
    /// the generation index in step, and drops the entry once it has neither node nor pods.
    fn modify_node(&mut self, name: &str, f: impl FnOnce(&mut NodeEntry)) {
        let entry = self
            .nodes
            .entry(name.to_string())
            .or_insert_with(|| NodeEntry {
                info: Arc::new(NodeInfo::new(placeholder_node(name))),
                has_node: false,
            });
        let before = entry.info.generation;
        f(entry);
        let after = entry.info.generation;
        let gone = !entry.has_node && entry.info.pods.is_empty();
        if before != after {
            self.by_generation.remove(&before);
        }
        if gone {
            self.by_generation.remove(&after);
            self.nodes.remove(name);
        } else {
            self.by_generation.insert(after, name.to_string());
        }
    }

    /// Tells every node holding an image whose node count changed the new count.
    fn refresh_images(&mut self) {
        let dirty = std::mem::take(&mut self.dirty_images);
        for img in dirty {
            let holders: Vec<String> = self
                .images
                .get(&img)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
            let count = holders.len();
            for name in holders {
                let stale = self.nodes.get(&name).is_some_and(|e| {
                    e.info
                        .image_states
                        .get(&img)
                        .is_some_and(|s| s.num_nodes != count)
                });
                if stale {
                    self.modify_node(&name, |e| {
                        let ni = Arc::make_mut(&mut e.info);
                        if let Some(s) = ni.image_states.get_mut(&img) {
                            s.num_nodes = count;
                        }
                        ni.generation = next_generation();
                    });
                }
            }
        }
    }

    // ---- pods ----

    fn place(&mut self, node: &str, pod: Arc<PodInfo>) {
        self.modify_node(node, |e| Arc::make_mut(&mut e.info).add_pod(pod));
    }

    fn unplace(&mut self, node: &str, id: &str) {
        if self.nodes.contains_key(node) {
            self.modify_node(node, |e| {
                if e.info.pods.iter().any(|p| p.id.as_str() == id) {
                    Arc::make_mut(&mut e.info).remove_pod(id);
                }
            });
        }
    }

    fn insert_pod(&mut self, uid: PodKey, pod: Arc<PodInfo>, node: String, assumed: bool) {
        self.place(&node, pod.clone());
        self.pods.insert(
            uid,
            PodState {
                pod,
                node,
                assumed,
                binding_finished: false,
                deadline: None,
            },
        );
    }

    fn drop_pod(&mut self, uid: &str) -> Option<PodState> {
        let st = self.pods.remove(uid)?;
        self.unplace(&st.node, &st.pod.id);
        Some(st)
    }

    /// Counts `pod` on the node in its `spec.nodeName` before it is bound.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let uid = pod.id.clone();
        if let Some(st) = self.pods.get(&uid) {
            let (pod, node) = (st.pod.key.clone(), st.node.clone());
            return Err(if st.assumed {
                CacheError::AlreadyAssumed { pod, node }
            } else {
                CacheError::AlreadyAdded { pod, node }
            });
        }
        let Some(node) = pod.node_name().map(str::to_string) else {
            return Err(CacheError::NotAssigned {
                pod: pod.key.clone(),
            });
        };
        self.insert_pod(uid, pod, node, true);
        Ok(())
    }

    /// The binding of assumed pod `uid` is done: its expiry clock starts now.
    pub fn finish_binding(&mut self, uid: &str) -> Result<(), CacheError> {
        let now = self.clock.now();
        let ttl = self.ttl;
        let st = self
            .pods
            .get_mut(uid)
            .ok_or_else(|| CacheError::PodNotFound {
                uid: uid.to_string(),
            })?;
        if !st.assumed {
            return Err(CacheError::NotAssumed {
                pod: st.pod.key.clone(),
            });
        }
        st.binding_finished = true;
        st.deadline = (!ttl.is_zero()).then(|| now + ttl);
        Ok(())
    }

    /// Drops assumed pod `uid` (its binding failed).
    pub fn forget_pod(&mut self, uid: &str) -> Result<(), CacheError> {
        match self.pods.get(uid) {
            None => Err(CacheError::PodNotFound {
                uid: uid.to_string(),
            }),
            Some(st) if !st.assumed => Err(CacheError::NotAssumed {
                pod: st.pod.key.clone(),
            }),
            Some(_) => {
                self.drop_pod(uid);
                Ok(())
            }
        }
    }

    /// Whether pod `uid` is assumed (and not yet confirmed by its add event).
    pub fn is_assumed_pod(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|st| st.assumed)
    }

    /// The pod with `uid` as the cache counts it.
    pub fn get_pod(&self, uid: &str) -> Option<&Arc<PodInfo>> {
        self.pods.get(uid).map(|st| &st.pod)
    }

    /// An assigned pod's add event. Confirms an assumed pod (moving it when it was bound
    /// elsewhere than assumed); adds a pod not seen before (also one that expired). A
    /// terminal pod is removed instead. A pod already added is refused, as upstream does.
    pub fn add_pod(&mut self, pod: Arc<Pod>) -> Result<(), CacheError> {
        self.add_pod_info(Arc::new(PodInfo::new(pod)))
    }

    /// [`add_pod`](Self::add_pod) of a pod whose PodInfo the caller computed (outside the
    /// lock that guards the cache).
    pub fn add_pod_info(&mut self, info: Arc<PodInfo>) -> Result<(), CacheError> {
        let uid = info.id.clone();
        if is_terminal(&info.pod) {
            self.drop_pod(&uid);
            return Ok(());
        }
        if let Some(st) = self.pods.get(&uid).filter(|st| !st.assumed) {
            return Err(CacheError::AlreadyAdded {
                pod: st.pod.key.clone(),
                node: st.node.clone(),
            });
        }
        let Some(node) = info.node_name().map(str::to_string) else {
            return Err(CacheError::NotAssigned {
                pod: info.key.clone(),
            });
        };
        // The usual confirmation: bound where it was assumed, with the spec and labels the
        // scheduler assumed. The API server's object takes the assumed copy's place on the
        // node, as upstream's cache does, so that the copy is freed; the node's sums do not
        // change, and copying a NodeInfo the snapshot shares costs a pointer per 64 pods.
        if let Some(st) = self.pods.get_mut(&uid).filter(|st| {
            st.assumed
                && st.node == node
                && st.pod.pod.spec == info.pod.spec
                && st.pod.pod.metadata.labels == info.pod.metadata.labels
        }) {
            st.assumed = false;
            st.binding_finished = false;
            st.deadline = None;
            let assumed = std::mem::replace(&mut st.pod, info.clone());
            self.modify_node(&node, |e| {
                Arc::make_mut(&mut e.info).replace_pod(&assumed, info);
            });
            return Ok(());
        }
        // Otherwise the assumed pod is replaced by the object the API server has (the node
        // it really landed on, a spec that changed meanwhile).
        self.drop_pod(&uid);
        self.insert_pod(uid, info, node, false);
        Ok(())
    }

    /// An assigned pod's update event. A pod not in the cache is added; a pod that became
    /// terminal is removed. The pod is taken off the node the cache counted it on, whatever
    /// `old` says.
    pub fn update_pod(&mut self, old: &Pod, new: Arc<Pod>) -> Result<(), CacheError> {
        self.update_pod_info(old, Arc::new(PodInfo::new(new)))
    }

    /// [`update_pod`](Self::update_pod) with the new pod's PodInfo computed by the caller.
    pub fn update_pod_info(&mut self, _old: &Pod, info: Arc<PodInfo>) -> Result<(), CacheError> {
        let uid = info.id.clone();
        let new = &info.pod;
        match self.pods.get(&uid) {
            None => self.add_pod_info(info),
            Some(st) if st.assumed => Err(CacheError::UpdateOfAssumed {
                pod: st.pod.key.clone(),
            }),
            Some(st) => {
                let assigned = new
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty());
                if !assigned && !is_terminal(new) {
                    // spec.nodeName cannot be cleared; refuse rather than lose the pod.
                    return Err(CacheError::NotAssigned {
                        pod: st.pod.key.clone(),
                    });
                }
                self.drop_pod(&uid);
                if is_terminal(new) {
                    return Ok(());
                }
                self.add_pod_info(info)
            }
        }
    }

    /// An assigned pod's delete event (an assumed pod is dropped too). An unknown pod is
    /// ignored, with an error saying so.
    pub fn remove_pod(&mut self, pod: &Pod) -> Result<(), CacheError> {
        let uid = PodKey::of(pod);
        match self.drop_pod(&uid) {
            Some(_) => Ok(()),
            None => Err(CacheError::PodNotFound {
                uid: uid.to_string(),
            }),
        }
    }

    /// Drops the assumed pods whose binding finished more than the TTL ago; returns them.
    pub fn cleanup_assumed_pods(&mut self) -> Vec<Arc<PodInfo>> {
        let now = self.clock.now();
        let expired: Vec<PodKey> = self
            .pods
            .iter()
            .filter(|(_, st)| {
                st.assumed && st.binding_finished && st.deadline.is_some_and(|d| now > d)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|uid| self.drop_pod(&uid).map(|st| st.pod))
            .collect()
    }

    // ---- snapshot ----

    /// The newest generation of anything the snapshot shows.
    fn generation(&self) -> u64 {
        let nodes = self.by_generation.keys().next_back().copied().unwrap_or(0);
        nodes.max(self.tree_generation)
    }

    /// Brings `snapshot` up to date: hands it the NodeInfos changed since its last update
    /// (the cache's own `Arc`s; the unchanged ones stay the very same `Arc`s), and rebuilds
    /// the node list only when nodes were added, removed or changed zone.
    ///
    /// Upstream: cacheImpl.UpdateSnapshot.
    pub fn update_snapshot(&mut self, snapshot: &mut Snapshot) {
        self.refresh_images();
        let since = snapshot.generation();
        let mut rebuild = self.tree_generation > since;
        if !rebuild {
            for name in self.by_generation.range(since + 1..).map(|(_, n)| n) {
                let Some(e) = self.nodes.get(name).filter(|e| e.has_node) else {
                    continue;
                };
                if !snapshot.replace_node_info(e.info.clone()) {
                    rebuild = true;
                    break;
                }
            }
        }
        if rebuild || snapshot.num_nodes() != self.tree.num_nodes() {
            let list = self
                .tree
                .list()
                .into_iter()
                .filter_map(|n| self.nodes.get(n).filter(|e| e.has_node))
                .map(|e| e.info.clone())
                .collect();
            snapshot.set_node_infos(list);
        }
        snapshot.set_generation(self.generation());
    }

    // ---- counts ----

    /// Nodes whose node object is known.
    pub fn node_count(&self) -> usize {
        self.tree.num_nodes()
    }

    /// Pods counted, assumed ones included.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Assumed pods not yet confirmed.
    pub fn assumed_pod_count(&self) -> usize {
        self.pods.values().filter(|st| st.assumed).count()
    }

    /// Node names in node-tree order (zones round-robin).
    pub fn node_tree_list(&self) -> Vec<&str> {
        self.tree.list()
    }

    /// Each known node with its allocatable, requested and pods, sorted by name.
    pub fn node_usage(&self) -> Vec<NodeUsage> {
        let mut nodes: Vec<NodeUsage> = self
            .nodes
            .iter()
            .filter(|(_, e)| e.has_node)
            .map(|(name, e)| {
                let mut pods: Vec<(String, bool)> = e
                    .info
                    .pods
                    .iter()
                    .map(|p| {
                        let assumed = self.pods.get(&p.id).is_some_and(|st| st.assumed);
                        (p.key.clone(), assumed)
                    })
                    .collect();
                pods.sort();
                NodeUsage {
                    name: name.clone(),
                    allocatable: e.info.allocatable.clone(),
                    requested: e.info.requested.clone(),
                    pods,
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    /// Everything the cache holds, sorted, for debugging and tests.
    pub fn dump(&self) -> CacheDump {
        let mut nodes: Vec<(String, bool, Vec<String>)> = self
            .nodes
            .iter()
            .map(|(name, e)| {
                let mut pods: Vec<String> = e.info.pods.iter().map(|p| p.key.clone()).collect();
                pods.sort();
                (name.clone(), e.has_node, pods)
            })
            .collect();
        nodes.sort();
        let mut assumed_pods: Vec<String> = self
            .pods
            .values()
            .filter(|st| st.assumed)
            .map(|st| st.pod.key.clone())
            .collect();
        assumed_pods.sort();
        CacheDump {
            nodes,
            assumed_pods,
        }
    }
}

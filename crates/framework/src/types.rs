//! What plugins read: [`PodInfo`] and [`NodeInfo`], with everything that depends only on the
//! pod or the node computed once, when the object enters the cache or queue.
//!
//! Upstream: pkg/scheduler/framework/types.go. Pods and nodes are shared by `Arc` and never
//! deep-copied per cycle; a `NodeInfo` is cloned only when its pods change (copy-on-write).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::labels::{LabelSelector, Operator, SelectorError};
use crate::quantity;

/// CPU request assumed for a container that requests none, when scoring (upstream
/// `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory request assumed for a container that requests none, when scoring (200 MiB, upstream
/// `DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

pub const RESOURCE_CPU: &str = "cpu";
pub const RESOURCE_MEMORY: &str = "memory";
pub const RESOURCE_EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const RESOURCE_PODS: &str = "pods";

/// Whether `name` is tracked as a scalar resource: extended (`example.com/gpu`), prefixed
/// native (`kubernetes.io/...`), `hugepages-*` or `attachable-volumes-*`.
pub fn is_scalar_resource_name(name: &str) -> bool {
    (name.contains('/') && !name.starts_with("requests."))
        || name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
}

/// Whether `name` is an extended resource (not native, not in the kubernetes.io domain).
pub fn is_extended_resource_name(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// A set of compute resources as integers: CPU in millicores, the rest in units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    /// Extended, hugepages and attachable-volume resources.
    pub scalar_resources: BTreeMap<String, i64>,
}

impl Resource {
    /// Parses a ResourceList; unparsable quantities count as zero and are reported in `errors`.
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>, errors: &mut Vec<String>) -> Self {
        let mut r = Resource::default();
        for (name, q) in list.into_iter().flatten() {
            match parse_for(name, q) {
                Ok(v) => r.add_named(name, v),
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
        r
    }

    /// The amount of `name` (`cpu` in millicores).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            RESOURCE_CPU => self.milli_cpu,
            RESOURCE_MEMORY => self.memory,
            RESOURCE_EPHEMERAL_STORAGE => self.ephemeral_storage,
            RESOURCE_PODS => self.allowed_pod_number,
            other => self.scalar_resources.get(other).copied().unwrap_or(0),
        }
    }

    fn add_named(&mut self, name: &str, v: i64) {
        match name {
            RESOURCE_CPU => self.milli_cpu = self.milli_cpu.saturating_add(v),
            RESOURCE_MEMORY => self.memory = self.memory.saturating_add(v),
            RESOURCE_EPHEMERAL_STORAGE => {
                self.ephemeral_storage = self.ephemeral_storage.saturating_add(v)
            }
            RESOURCE_PODS => self.allowed_pod_number = self.allowed_pod_number.saturating_add(v),
            other if is_scalar_resource_name(other) => {
                let e = self.scalar_resources.entry(other.to_string()).or_insert(0);
                *e = e.saturating_add(v);
            }
            _ => {}
        }
    }

    /// Adds `other` times `sign` (+1 or -1).
    pub fn add_signed(&mut self, other: &Resource, sign: i64) {
        self.milli_cpu += sign * other.milli_cpu;
        self.memory += sign * other.memory;
        self.ephemeral_storage += sign * other.ephemeral_storage;
        self.allowed_pod_number += sign * other.allowed_pod_number;
        for (k, v) in &other.scalar_resources {
            *self.scalar_resources.entry(k.clone()).or_insert(0) += sign * v;
        }
    }
}

fn parse_for(name: &str, q: &Quantity) -> Result<i64, quantity::QuantityError> {
    if name == RESOURCE_CPU {
        quantity::parse_milli_value(&q.0)
    } else {
        quantity::parse_value(&q.0)
    }
}

/// A host port a pod uses: `(hostIP, protocol, port)`; empty hostIP is `0.0.0.0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Whether two host ports cannot both be bound on one node.
    pub fn conflicts_with(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// One pod affinity or anti-affinity term, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces named by the term (the pod's own when neither `namespaces` nor
    /// `namespaceSelector` is set).
    pub namespaces: BTreeSet<String>,
    pub selector: LabelSelector,
    pub topology_key: String,
    /// "Nothing" when the term has no namespaceSelector.
    pub namespace_selector: LabelSelector,
}

impl AffinityTerm {
    /// Compiles one term of `pod`: its selector with the pod's matchLabelKeys /
    /// mismatchLabelKeys values merged in, and its namespaces (the pod's own when neither
    /// `namespaces` nor `namespaceSelector` is set).
    pub fn compile(
        pod: &Pod,
        term: &k8s_openapi::api::core::v1::PodAffinityTerm,
    ) -> Result<AffinityTerm, SelectorError> {
        let mut selector = LabelSelector::compile(term.label_selector.as_ref())?;
        // matchLabelKeys / mismatchLabelKeys: the pod's own values for those keys, ANDed in as
        // `key In (value)` / `key NotIn (value)`. The API server merges them at creation;
        // merging again is harmless and covers objects that did not pass through one.
        let labels = pod.metadata.labels.as_ref();
        for key in term.match_label_keys.iter().flatten() {
            if let Some(v) = labels.and_then(|l| l.get(key)) {
                selector.require(key, Operator::In, v);
            }
        }
        for key in term.mismatch_label_keys.iter().flatten() {
            if let Some(v) = labels.and_then(|l| l.get(key)) {
                selector.require(key, Operator::NotIn, v);
            }
        }
        let namespace_selector = LabelSelector::compile(term.namespace_selector.as_ref())?;
        let mut namespaces = BTreeSet::new();
        match &term.namespaces {
            Some(list) if !list.is_empty() => namespaces.extend(list.iter().cloned()),
            _ if term.namespace_selector.is_none() => {
                namespaces.insert(
                    pod.metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".to_string()),
                );
            }
            _ => {}
        }
        Ok(AffinityTerm {
            namespaces,
            selector,
            topology_key: term.topology_key.clone(),
            namespace_selector,
        })
    }
    /// Whether `pod`, in a namespace with `ns_labels`, is selected by this term.
    pub fn matches(&self, pod: &Pod, ns_labels: Option<&BTreeMap<String, String>>) -> bool {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        if self.namespaces.contains(ns) || self.namespace_selector.matches_opt(ns_labels) {
            self.selector.matches_opt(pod.metadata.labels.as_ref())
        } else {
            false
        }
    }
}

/// A preferred affinity term and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    pub term: AffinityTerm,
    pub weight: i32,
}

/// A pod and what the scheduler computes from it once.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    /// Who the pod is (its UID), computed once: what the queue, the cache and the
    /// scheduler's bookkeeping key it by.
    pub id: PodKey,
    /// `namespace/name`, how messages, events and reports name the pod.
    pub key: String,
    /// Effective requests: containers, sidecars, init containers and overhead.
    pub requests: Resource,
    /// CPU request with 100m assumed for containers that request none (for scoring).
    pub non0_cpu: i64,
    /// Memory request with 200Mi assumed for containers that request none (for scoring).
    pub non0_mem: i64,
    /// Host ports of containers and sidecars.
    pub host_ports: Vec<HostPort>,
    pub required_affinity_terms: Vec<AffinityTerm>,
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Problems found while computing the above (unparsable quantities, broken selectors).
    pub parse_errors: Vec<String>,
    /// `spec.priority` (0 when unset), kept here because the scheduling queue compares it
    /// on every heap operation.
    priority: i32,
}

impl PodInfo {
    /// Computes the PodInfo of `pod`. Never fails: problems are kept in `parse_errors` for the
    /// plugin that needs the broken part to report on this pod.
    pub fn new(pod: Arc<Pod>) -> Self {
        let key = namespaced_name(&pod);
        let mut errors = Vec::new();
        let (requests, non0_cpu, non0_mem) = compute_pod_requests(&pod, &mut errors);
        let host_ports = compute_host_ports(&pod);
        let mut info = PodInfo {
            pod: pod.clone(),
            id: PodKey::of(&pod),
            key,
            requests,
            non0_cpu,
            non0_mem,
            host_ports,
            required_affinity_terms: Vec::new(),
            required_anti_affinity_terms: Vec::new(),
            preferred_affinity_terms: Vec::new(),
            preferred_anti_affinity_terms: Vec::new(),
            parse_errors: errors,
            priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        };
        if let Some(aff) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) {
            let mut affinity_errors = Vec::new();
            if let Some(pa) = &aff.pod_affinity {
                info.required_affinity_terms = compile_terms(
                    &pod,
                    pa.required_during_scheduling_ignored_during_execution
                        .iter()
                        .flatten(),
                    "requiredAffinityTerms",
                    &mut affinity_errors,
                );
                info.preferred_affinity_terms = compile_weighted(
                    &pod,
                    pa.preferred_during_scheduling_ignored_during_execution
                        .iter()
                        .flatten(),
                    "preferredAffinityTerms",
                    &mut affinity_errors,
                );
            }
            if let Some(pa) = &aff.pod_anti_affinity {
                info.required_anti_affinity_terms = compile_terms(
                    &pod,
                    pa.required_during_scheduling_ignored_during_execution
                        .iter()
                        .flatten(),
                    "requiredAntiAffinityTerms",
                    &mut affinity_errors,
                );
                info.preferred_anti_affinity_terms = compile_weighted(
                    &pod,
                    pa.preferred_during_scheduling_ignored_during_execution
                        .iter()
                        .flatten(),
                    "preferredAntiAffinityTerms",
                    &mut affinity_errors,
                );
            }
            info.parse_errors.extend(affinity_errors);
        }
        info
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    /// `spec.priority`, 0 when unset.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// This pod as it is once bound to `node` (what the scheduler cache assumes): a copy of
    /// the pod with `spec.nodeName` set; everything computed from the spec is kept.
    pub fn with_node(&self, node: &str) -> PodInfo {
        let mut pod = (*self.pod).clone();
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
        PodInfo {
            pod: Arc::new(pod),
            ..self.clone()
        }
    }

    /// `spec.nodeName`, if the pod is assigned.
    pub fn node_name(&self) -> Option<&str> {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.pod.metadata.labels.as_ref()
    }

    /// The [`pvc_key`] of each PersistentVolumeClaim volume, in volume order.
    pub fn pvc_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| pvc_key(self.namespace(), &c.claim_name))
    }

    /// Whether the pod has any pod affinity or anti-affinity term.
    pub fn has_affinity(&self) -> bool {
        !self.required_affinity_terms.is_empty()
            || !self.required_anti_affinity_terms.is_empty()
            || !self.preferred_affinity_terms.is_empty()
            || !self.preferred_anti_affinity_terms.is_empty()
    }
}

fn compile_terms<'a>(
    pod: &Pod,
    terms: impl Iterator<Item = &'a k8s_openapi::api::core::v1::PodAffinityTerm>,
    what: &str,
    errors: &mut Vec<String>,
) -> Vec<AffinityTerm> {
    let mut out = Vec::new();
    for (i, t) in terms.enumerate() {
        match AffinityTerm::compile(pod, t) {
            Ok(c) => out.push(c),
            Err(e) => errors.push(format!("{what}[{i}]: {e}")),
        }
    }
    out
}

fn compile_weighted<'a>(
    pod: &Pod,
    terms: impl Iterator<Item = &'a k8s_openapi::api::core::v1::WeightedPodAffinityTerm>,
    what: &str,
    errors: &mut Vec<String>,
) -> Vec<WeightedAffinityTerm> {
    let mut out = Vec::new();
    for (i, t) in terms.enumerate() {
        match AffinityTerm::compile(pod, &t.pod_affinity_term) {
            Ok(term) => out.push(WeightedAffinityTerm {
                term,
                weight: t.weight,
            }),
            Err(e) => errors.push(format!("{what}[{i}]: {e}")),
        }
    }
    out
}

/// A container's requests, with requests defaulted from limits where only limits are set (as
/// the API server does) and, when `non_missing` is given, CPU/memory defaults for what is
/// still missing.
fn container_requests(
    c: &Container,
    non_missing: Option<&[(&str, i64)]>,
    errors: &mut Vec<String>,
) -> Resource {
    let res = c.resources.as_ref();
    let requests = res.and_then(|r| r.requests.as_ref());
    let limits = res.and_then(|r| r.limits.as_ref());
    let mut r = Resource::from_list(requests, errors);
    if let Some(limits) = limits {
        for (name, q) in limits {
            if requests.is_some_and(|req| req.contains_key(name)) {
                continue;
            }
            match parse_for(name, q) {
                Ok(v) => r.add_named(name, v),
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
    }
    if let Some(defaults) = non_missing {
        for (name, v) in defaults {
            let present = requests.is_some_and(|req| req.contains_key(*name))
                || limits.is_some_and(|l| l.contains_key(*name));
            if !present {
                r.add_named(name, *v);
            }
        }
    }
    r
}

fn max_into(acc: &mut Resource, other: &Resource) {
    acc.milli_cpu = acc.milli_cpu.max(other.milli_cpu);
    acc.memory = acc.memory.max(other.memory);
    acc.ephemeral_storage = acc.ephemeral_storage.max(other.ephemeral_storage);
    for (k, v) in &other.scalar_resources {
        let e = acc.scalar_resources.entry(k.clone()).or_insert(0);
        *e = (*e).max(*v);
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Upstream resourcehelper.PodRequests: containers summed, plus sidecars, maxed with each
/// init container (which runs alongside the sidecars started before it), pod-level requests
/// overriding CPU/memory/hugepages when set, then overhead.
fn pod_requests(
    pod: &Pod,
    non_missing: Option<&[(&str, i64)]>,
    errors: &mut Vec<String>,
) -> Resource {
    let Some(spec) = pod.spec.as_ref() else {
        return Resource::default();
    };
    let mut reqs = Resource::default();
    for c in &spec.containers {
        reqs.add_signed(&container_requests(c, non_missing, errors), 1);
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let cr = container_requests(c, non_missing, errors);
        if is_sidecar(c) {
            reqs.add_signed(&cr, 1);
            sidecars.add_signed(&cr, 1);
            max_into(&mut init_max, &sidecars);
        } else {
            let mut tmp = cr;
            tmp.add_signed(&sidecars, 1);
            max_into(&mut init_max, &tmp);
        }
    }
    max_into(&mut reqs, &init_max);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (name, q) in pod_level {
            if name == RESOURCE_CPU || name == RESOURCE_MEMORY || name.starts_with("hugepages-") {
                match parse_for(name, q) {
                    Ok(v) => match name.as_str() {
                        RESOURCE_CPU => reqs.milli_cpu = v,
                        RESOURCE_MEMORY => reqs.memory = v,
                        other => {
                            reqs.scalar_resources.insert(other.to_string(), v);
                        }
                    },
                    Err(e) => errors.push(format!("{name}: {e}")),
                }
            }
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        reqs.add_signed(&Resource::from_list(Some(overhead), errors), 1);
    }
    reqs
}

fn has_pod_level(pod: &Pod, name: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| r.contains_key(name))
}

fn compute_pod_requests(pod: &Pod, errors: &mut Vec<String>) -> (Resource, i64, i64) {
    let requests = pod_requests(pod, None, errors);
    let mut defaults: Vec<(&str, i64)> = Vec::with_capacity(2);
    if !has_pod_level(pod, RESOURCE_CPU) {
        defaults.push((RESOURCE_CPU, DEFAULT_MILLI_CPU_REQUEST));
    }
    if !has_pod_level(pod, RESOURCE_MEMORY) {
        defaults.push((RESOURCE_MEMORY, DEFAULT_MEMORY_REQUEST));
    }
    let non0 = if defaults.is_empty() {
        requests.clone()
    } else {
        pod_requests(pod, Some(&defaults), &mut Vec::new())
    };
    (requests, non0.milli_cpu, non0.memory)
}

fn compute_host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| HostPort {
            ip: p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| "0.0.0.0".to_string()),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
            port: p.host_port.unwrap_or(0),
        })
        .collect()
}

/// An image's size and on how many nodes of the cluster it is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageStateSummary {
    pub size: i64,
    pub num_nodes: usize,
}

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A fresh, never-repeated generation number.
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed) + 1
}

/// A node and the pods on it, with their aggregate requests and ports.
///
/// Laid out in declaration order (`repr(C)`), the fields every Filter and Score pass reads
/// for every node first: a cycle touches hundreds of NodeInfos scattered on the heap, and
/// each cache line it needs from one is a miss.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct NodeInfo {
    /// `spec.unschedulable` and whether `spec.taints` is non-empty, kept here because the
    /// first Filter plugins ask for them on every node of every cycle: reading them from the
    /// node object costs a cache miss per node (the `Node` is a separate allocation).
    unschedulable: bool,
    has_taints: bool,
    /// Changes whenever the node or its pods change; the snapshot copies only changed nodes.
    pub generation: u64,
    pub pods: PodList,
    pub requested: Resource,
    pub allocatable: Resource,
    /// Requests with 100m CPU / 200Mi memory assumed for containers requesting none.
    pub non_zero_requested: Resource,
    /// Shared, so that per-node records (statuses, scores) copy a pointer, not the name.
    name: Arc<str>,
    node: Arc<Node>,
    /// Pods on this node with any pod (anti-)affinity term.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods on this node with a required anti-affinity term.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    pub used_ports: Vec<HostPort>,
    /// Images on this node, by every name they are known by.
    pub image_states: HashMap<String, ImageStateSummary>,
    /// Problems parsing the node (unparsable allocatable quantities).
    pub parse_errors: Vec<String>,
    /// How many volumes of this node's pods use each PersistentVolumeClaim, by
    /// [`pvc_key`]; a claim no pod uses is absent. Upstream: NodeInfo.PVCRefCounts.
    pub pvc_ref_counts: HashMap<String, u32>,
}

/// The key of claim `claim` of namespace `namespace` in [`NodeInfo::pvc_ref_counts`] and
/// [`Snapshot::is_pvc_used_by_pods`](crate::Snapshot::is_pvc_used_by_pods):
/// `namespace/claim` (upstream's GetNamespacedName).
pub fn pvc_key(namespace: &str, claim: &str) -> String {
    format!("{namespace}/{claim}")
}

/// `(spec.unschedulable, spec.taints is not empty)` of `node`.
fn node_flags(node: &Node) -> (bool, bool) {
    let spec = node.spec.as_ref();
    (
        spec.and_then(|s| s.unschedulable).unwrap_or(false),
        spec.and_then(|s| s.taints.as_ref())
            .is_some_and(|t| !t.is_empty()),
    )
}

impl NodeInfo {
    pub fn new(node: Arc<Node>) -> Self {
        let mut errors = Vec::new();
        let allocatable = Resource::from_list(
            node.status.as_ref().and_then(|s| s.allocatable.as_ref()),
            &mut errors,
        );
        let (unschedulable, has_taints) = node_flags(&node);
        NodeInfo {
            name: Arc::from(node.metadata.name.as_deref().unwrap_or_default()),
            unschedulable,
            has_taints,
            node,
            pods: PodList::default(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            used_ports: Vec::new(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable,
            image_states: HashMap::new(),
            generation: next_generation(),
            parse_errors: errors,
            pvc_ref_counts: HashMap::new(),
        }
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    pub fn node_arc(&self) -> &Arc<Node> {
        &self.node
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's name, shared.
    pub fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// The node's labels (empty when it has none).
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    pub fn taints(&self) -> &[Taint] {
        if !self.has_taints {
            return &[];
        }
        self.node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[])
    }

    /// `spec.unschedulable`.
    pub fn unschedulable(&self) -> bool {
        self.unschedulable
    }

    /// Replaces the node object, keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) {
        let mut errors = Vec::new();
        self.allocatable = Resource::from_list(
            node.status.as_ref().and_then(|s| s.allocatable.as_ref()),
            &mut errors,
        );
        self.parse_errors = errors;
        self.name = Arc::from(node.metadata.name.as_deref().unwrap_or_default());
        (self.unschedulable, self.has_taints) = node_flags(&node);
        self.node = node;
        self.generation = next_generation();
    }

    /// Adds a pod to the node's accounting.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.update(&pod, 1);
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
    }

    /// Puts `new` where `old` is (found by address, from the most recently added pod back):
    /// the same pod as the API server has it, with the spec and labels `old` was counted
    /// with, so the node's sums stay. Returns whether `old` was there.
    pub fn replace_pod(&mut self, old: &Arc<PodInfo>, new: Arc<PodInfo>) -> bool {
        let Some(i) = self.pods.rposition(|p| Arc::ptr_eq(p, old)) else {
            return false;
        };
        for list in [
            &mut self.pods_with_affinity,
            &mut self.pods_with_required_anti_affinity,
        ] {
            if let Some(slot) = list.iter_mut().rev().find(|p| Arc::ptr_eq(p, old)) {
                *slot = new.clone();
            }
        }
        self.pods.set(i, new);
        self.generation = next_generation();
        true
    }

    /// Removes the pod whose [`PodInfo::id`] is `id`; returns whether it was there.
    pub fn remove_pod(&mut self, id: &str) -> bool {
        self.pods_with_affinity.retain(|p| p.id.as_str() != id);
        self.pods_with_required_anti_affinity
            .retain(|p| p.id.as_str() != id);
        let Some(i) = self.pods.iter().position(|p| p.id.as_str() == id) else {
            return false;
        };
        let Some(pod) = self.pods.swap_remove(i) else {
            return false;
        };
        self.update(&pod, -1);
        true
    }

    fn update(&mut self, pod: &PodInfo, sign: i64) {
        self.requested.milli_cpu += sign * pod.requests.milli_cpu;
        self.requested.memory += sign * pod.requests.memory;
        self.requested.ephemeral_storage += sign * pod.requests.ephemeral_storage;
        for (k, v) in &pod.requests.scalar_resources {
            *self
                .requested
                .scalar_resources
                .entry(k.clone())
                .or_insert(0) += sign * v;
        }
        self.non_zero_requested.milli_cpu += sign * pod.non0_cpu;
        self.non_zero_requested.memory += sign * pod.non0_mem;
        for p in &pod.host_ports {
            if sign > 0 {
                self.used_ports.push(p.clone());
            } else if let Some(i) = self.used_ports.iter().position(|u| u == p) {
                self.used_ports.swap_remove(i);
            }
        }
        self.update_pvc_ref_counts(pod, sign > 0);
        self.generation = next_generation();
    }

    /// Counts (or uncounts) each claim volume of `pod`; a claim whose count drops to zero
    /// leaves the map, so that an empty map means no pod here uses a claim.
    fn update_pvc_ref_counts(&mut self, pod: &PodInfo, add: bool) {
        for key in pod.pvc_keys() {
            if add {
                *self.pvc_ref_counts.entry(key).or_insert(0) += 1;
            } else if let Some(n) = self.pvc_ref_counts.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.pvc_ref_counts.remove(&key);
                }
            }
        }
    }
}

/// A pod in the scheduling queue, with its attempt history.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    pub pod_info: Arc<PodInfo>,
    /// When the pod was (last) added to the queue; orders equal-priority pods.
    pub timestamp: Instant,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When the pod was first added to the queue.
    pub initial_attempt_timestamp: Option<Instant>,
    /// Plugins that rejected the pod in its last attempt.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// Plugins that returned Pending in its last attempt.
    pub pending_plugins: BTreeSet<&'static str>,
    /// The PreEnqueue plugin holding the pod back, if any.
    pub gating_plugin: Option<&'static str>,
}

impl QueuedPodInfo {
    pub fn new(pod_info: Arc<PodInfo>, timestamp: Instant) -> Self {
        QueuedPodInfo {
            pod_info,
            timestamp,
            attempts: 0,
            initial_attempt_timestamp: None,
            unschedulable_plugins: BTreeSet::new(),
            pending_plugins: BTreeSet::new(),
            gating_plugin: None,
        }
    }
}

/// A node's score from one plugin.
#[derive(Debug, Clone, Copy)]
pub struct NodeScore<'a> {
    pub node: &'a NodeInfo,
    pub score: i64,
}

impl NodeScore<'_> {
    pub fn name(&self) -> &str {
        self.node.name()
    }
}

mod node_row;
mod pod_key;
mod pod_list;

pub use node_row::NodeRow;
pub use pod_key::{namespaced_name, PodKey};
pub use pod_list::{Iter as PodListIter, PodList};

#[cfg(test)]
mod tests;

//! Builders for pods and nodes in tests: `make_pod("web").req(&[("cpu", "100m")]).obj()`.
//!
//! Upstream: pkg/scheduler/testing (st.MakePod / st.MakeNode). Public so that plugin and
//! runtime tests, in this crate and others, build objects the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, ContainerPort, Node, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus,
    PersistentVolumeClaimVolumeSource, Pod, PodSchedulingGate, PodSpec, PreferredSchedulingTerm,
    ResourceRequirements, Taint, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::types::{NodeInfo, PodInfo};

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A pod under construction.
#[derive(Debug, Clone)]
pub struct PodBuilder(Pod);

/// Starts a pod named `name` in namespace `default` with no containers.
pub fn make_pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        status: None,
    })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(PodSpec::default)
    }

    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.metadata.namespace = Some(ns.to_string());
        self
    }

    /// Replaces the generated `uid-<name>`.
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.to_string());
        self
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.to_string(), v.to_string());
        self
    }

    /// Adds a container with these requests.
    pub fn req(mut self, requests: &[(&str, &str)]) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(Container {
            name: format!("c{n}"),
            image: Some("registry.k8s.io/pause:3.10".to_string()),
            resources: Some(ResourceRequirements {
                requests: Some(quantities(requests)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Adds a container with these limits and no requests.
    pub fn limits(mut self, limits: &[(&str, &str)]) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(Container {
            name: format!("c{n}"),
            resources: Some(ResourceRequirements {
                limits: Some(quantities(limits)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Adds an init container with these requests.
    pub fn init_req(mut self, requests: &[(&str, &str)]) -> Self {
        let inits = self.spec().init_containers.get_or_insert_with(Vec::new);
        inits.push(Container {
            name: format!("init{}", inits.len()),
            resources: Some(ResourceRequirements {
                requests: Some(quantities(requests)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Adds a sidecar (an init container with `restartPolicy: Always`) with these requests.
    pub fn sidecar_req(mut self, requests: &[(&str, &str)]) -> Self {
        let inits = self.spec().init_containers.get_or_insert_with(Vec::new);
        inits.push(Container {
            name: format!("sidecar{}", inits.len()),
            restart_policy: Some("Always".to_string()),
            resources: Some(ResourceRequirements {
                requests: Some(quantities(requests)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    pub fn overhead(mut self, overhead: &[(&str, &str)]) -> Self {
        self.spec().overhead = Some(quantities(overhead));
        self
    }

    /// Adds a container using `image`.
    pub fn image(mut self, image: &str) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(Container {
            name: format!("c{n}"),
            image: Some(image.to_string()),
            ..Default::default()
        });
        self
    }

    /// Adds a container exposing `host_port` on `host_ip` ("" for all) with `protocol`.
    pub fn host_port(mut self, protocol: &str, host_ip: &str, host_port: i32) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(Container {
            name: format!("c{n}"),
            ports: Some(vec![ContainerPort {
                container_port: host_port,
                host_port: Some(host_port),
                host_ip: (!host_ip.is_empty()).then(|| host_ip.to_string()),
                protocol: Some(protocol.to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        self
    }

    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.to_string());
        self
    }

    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }

    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.to_string());
        self
    }

    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(BTreeMap::new)
            .insert(k.to_string(), v.to_string());
        self
    }

    pub fn toleration(mut self, key: &str, operator: &str, value: &str, effect: &str) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: (!key.is_empty()).then(|| key.to_string()),
                operator: (!operator.is_empty()).then(|| operator.to_string()),
                value: (!value.is_empty()).then(|| value.to_string()),
                effect: (!effect.is_empty()).then(|| effect.to_string()),
                toleration_seconds: None,
            });
        self
    }

    pub fn scheduling_gate(mut self, name: &str) -> Self {
        self.spec()
            .scheduling_gates
            .get_or_insert_with(Vec::new)
            .push(PodSchedulingGate {
                name: name.to_string(),
            });
        self
    }

    fn node_affinity(&mut self) -> &mut NodeAffinity {
        self.spec()
            .affinity
            .get_or_insert_with(Affinity::default)
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
    }

    /// Adds a required node affinity term with one expression `key op values`.
    pub fn node_affinity_term(mut self, key: &str, op: &str, values: &[&str]) -> Self {
        let req = self
            .node_affinity()
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(|| NodeSelector {
                node_selector_terms: Vec::new(),
            });
        req.node_selector_terms.push(NodeSelectorTerm {
            match_expressions: Some(vec![expression(key, op, values)]),
            match_fields: None,
        });
        self
    }

    /// Adds a preferred node affinity term with one expression and a weight.
    pub fn preferred_node_affinity(
        mut self,
        weight: i32,
        key: &str,
        op: &str,
        values: &[&str],
    ) -> Self {
        self.node_affinity()
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(PreferredSchedulingTerm {
                weight,
                preference: NodeSelectorTerm {
                    match_expressions: Some(vec![expression(key, op, values)]),
                    match_fields: None,
                },
            });
        self
    }

    /// Adds `volume` to `spec.volumes`.
    pub fn volume(mut self, volume: Volume) -> Self {
        self.spec()
            .volumes
            .get_or_insert_with(Vec::new)
            .push(volume);
        self
    }

    /// Adds a volume (named after the claim) using PersistentVolumeClaim `claim`.
    pub fn pvc(self, claim: &str) -> Self {
        self.volume(Volume {
            name: claim.to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_string(),
                read_only: None,
            }),
            ..Default::default()
        })
    }

    /// Applies any change to the pod object.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }

    pub fn obj(self) -> Pod {
        self.0
    }

    pub fn info(self) -> Arc<PodInfo> {
        Arc::new(PodInfo::new(Arc::new(self.0)))
    }
}

fn expression(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: op.to_string(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

/// A node under construction.
#[derive(Debug, Clone)]
pub struct NodeBuilder(Node);

/// Starts a node named `name` with label `kubernetes.io/hostname=name` and no capacity.
pub fn make_node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(format!("uid-{name}")),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_string(),
                name.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus::default()),
    })
}

impl NodeBuilder {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.to_string(), v.to_string());
        self
    }

    /// Sets capacity and allocatable to `resources`.
    pub fn capacity(mut self, resources: &[(&str, &str)]) -> Self {
        let status = self.0.status.get_or_insert_with(NodeStatus::default);
        status.capacity = Some(quantities(resources));
        status.allocatable = Some(quantities(resources));
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.0
            .spec
            .get_or_insert_with(NodeSpec::default)
            .taints
            .get_or_insert_with(Vec::new)
            .push(Taint {
                key: key.to_string(),
                value: (!value.is_empty()).then(|| value.to_string()),
                effect: effect.to_string(),
                time_added: None,
            });
        self
    }

    pub fn unschedulable(mut self, yes: bool) -> Self {
        self.0
            .spec
            .get_or_insert_with(NodeSpec::default)
            .unschedulable = Some(yes);
        self
    }

    /// Adds an image known by `names`, of `size` bytes.
    pub fn image(mut self, names: &[&str], size: i64) -> Self {
        self.0
            .status
            .get_or_insert_with(NodeStatus::default)
            .images
            .get_or_insert_with(Vec::new)
            .push(ContainerImage {
                names: Some(names.iter().map(|n| n.to_string()).collect()),
                size_bytes: Some(size),
            });
        self
    }

    pub fn obj(self) -> Node {
        self.0
    }

    /// A NodeInfo of this node holding `pods`.
    pub fn info_with(self, pods: &[Arc<PodInfo>]) -> NodeInfo {
        let mut ni = NodeInfo::new(Arc::new(self.0));
        for p in pods {
            ni.add_pod(p.clone());
        }
        ni
    }
}

/// Each node's status from one [`filter_rows`](crate::FilterPlugin::filter_rows) call over
/// every node of `snap`, in node order; checks that the call kept the passing positions
/// in order and reported each rejected node once.
pub fn filter_rows_of(
    plugin: &dyn crate::FilterPlugin,
    state: &crate::CycleState,
    pod: &PodInfo,
    snap: &crate::Snapshot,
) -> Vec<crate::Status> {
    let n = snap.num_nodes();
    let mut alive: Vec<u32> = (0..n)
        .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
        .collect();
    let mut rejected = Vec::new();
    plugin.filter_rows(
        state,
        pod,
        snap.node_infos(),
        snap.rows(),
        &mut alive,
        &mut rejected,
    );
    assert_eq!(
        alive.len() + rejected.len(),
        n,
        "filter_rows decided each node once"
    );
    let mut out = vec![crate::Status::success(); n];
    for (i, s) in rejected {
        out[i as usize] = s;
    }
    let passed: Vec<u32> = (0..n)
        .filter(|&i| out[i].is_success())
        .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
        .collect();
    assert_eq!(
        alive, passed,
        "filter_rows kept the passing positions in order"
    );
    out
}

//! Objects made from templates, as the API server would store them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Service};

use crate::workload::Template;
use crate::BenchError;

/// The label the kubelet sets to the node's name; hostname topologies need it.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The zone label of [`crate::workload::NodeGroup::zones`].
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// One parsed template.
#[derive(Debug, Clone)]
pub enum Object {
    Node(Box<Node>),
    Pod(Box<Pod>),
    Service(Box<Service>),
}

#[derive(serde::Deserialize)]
struct Kind {
    kind: String,
}

/// Parses a template (a bug in the benchmark's own data when it fails).
pub fn parse(template: Template) -> Result<Object, BenchError> {
    let bad = |e: serde_yaml_ng::Error| BenchError::Template {
        first_line: first_line(template),
        message: e.to_string(),
    };
    let kind: Kind = serde_yaml_ng::from_str(template).map_err(bad)?;
    match kind.kind.as_str() {
        "Node" => Ok(Object::Node(Box::new(
            serde_yaml_ng::from_str(template).map_err(bad)?,
        ))),
        "Pod" => Ok(Object::Pod(Box::new(
            serde_yaml_ng::from_str(template).map_err(bad)?,
        ))),
        "Service" => Ok(Object::Service(Box::new(
            serde_yaml_ng::from_str(template).map_err(bad)?,
        ))),
        other => Err(BenchError::Template {
            first_line: first_line(template),
            message: format!("kind {other:?} is not one of Node, Pod, Service"),
        }),
    }
}

/// Parses a template that must be a Pod.
pub fn parse_pod(template: Template) -> Result<Pod, BenchError> {
    match parse(template)? {
        Object::Pod(p) => Ok(*p),
        _ => Err(BenchError::Template {
            first_line: first_line(template),
            message: "expected a Pod".into(),
        }),
    }
}

/// Parses a template that must be a Node.
pub fn parse_node(template: Template) -> Result<Node, BenchError> {
    match parse(template)? {
        Object::Node(n) => Ok(*n),
        _ => Err(BenchError::Template {
            first_line: first_line(template),
            message: "expected a Node".into(),
        }),
    }
}

fn first_line(template: Template) -> String {
    template.lines().next().unwrap_or_default().to_string()
}

/// The name of instance `i`: the template's `name`, or `generateName` and `i`.
fn instance_name(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    i: usize,
) -> String {
    match (&meta.name, &meta.generate_name) {
        (Some(n), _) => n.clone(),
        (None, Some(g)) => format!("{g}{i}"),
        (None, None) => format!("object-{i}"),
    }
}

/// Node `i` of a group: named, with its hostname label, the zone given, and allocatable
/// defaulted to capacity as the API server does for a node that leaves it unset.
pub fn node_instance(template: &Node, i: usize, zone: Option<&str>) -> Node {
    let mut node = template.clone();
    let name = instance_name(&node.metadata, i);
    node.metadata.generate_name = None;
    node.metadata.uid = Some(format!("node-{name}"));
    let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(HOSTNAME_LABEL.into(), name.clone());
    if let Some(z) = zone {
        labels.insert(ZONE_LABEL.into(), z.into());
    }
    node.metadata.name = Some(name);
    if let Some(status) = node.status.as_mut() {
        if status.allocatable.is_none() {
            status.allocatable = status.capacity.clone();
        }
    }
    node
}

/// Pod `i` of a group, in `namespace`, pending.
pub fn pod_instance(template: &Pod, namespace: &str, i: usize) -> Pod {
    let mut pod = template.clone();
    let name = instance_name(&pod.metadata, i);
    pod.metadata.generate_name = None;
    pod.metadata.uid = Some(format!("{namespace}/{name}"));
    pod.metadata.namespace = Some(namespace.into());
    pod.metadata.name = Some(name);
    pod
}

/// Service `i`, in `namespace`.
pub fn service_instance(template: &Service, namespace: &str, i: usize) -> Service {
    let mut svc = template.clone();
    let name = instance_name(&svc.metadata, i);
    svc.metadata.generate_name = None;
    svc.metadata.uid = Some(format!("service-{namespace}/{name}"));
    svc.metadata.namespace = Some(namespace.into());
    svc.metadata.name = Some(name);
    svc
}

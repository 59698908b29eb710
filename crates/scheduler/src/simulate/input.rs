//! Reading the cluster a simulation starts from: YAML or JSON files holding a `v1 List`
//! (what `kubectl get nodes,pods -A -o yaml` prints), several YAML documents, or single
//! objects.
//!
//! Every object is checked before anything is scheduled: a missing name, an unparsable
//! quantity or label, or a duplicate is an [`InputError`] naming the file and the object.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use thiserror::Error;

use framework::labels::{validate_label_key, validate_label_value};
use framework::quantity;

/// The built-in PriorityClasses the API server always has.
const SYSTEM_CLUSTER_CRITICAL: &str = "system-cluster-critical";
const SYSTEM_CLUSTER_CRITICAL_PRIORITY: i32 = 2_000_000_000;
const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
const SYSTEM_NODE_CRITICAL_PRIORITY: i32 = 2_000_001_000;

/// Input that cannot be simulated.
#[derive(Debug, Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{file}: cannot read file")]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML or JSON.
    #[error("{file}: {message}")]
    Parse { file: PathBuf, message: String },
    /// One object is invalid.
    #[error("{file}: {object}: {message}")]
    Object {
        file: PathBuf,
        /// `Pod default/web-1`, or `object #3` when it has no usable name.
        object: String,
        message: String,
    },
}

/// The objects a simulation uses, in input order.
#[derive(Debug, Default)]
pub struct ClusterInput {
    pub nodes: Vec<Arc<Node>>,
    pub pods: Vec<Arc<Pod>>,
    pub namespaces: Vec<Namespace>,
    /// Services and controllers, for PodTopologySpread's default constraints.
    pub workloads: framework::Workloads,
    /// For preemption: disruption budgets and priority classes.
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    pub priority_classes: Vec<Arc<PriorityClass>>,
    /// For the volume plugins: volumes, claims (namespace set), classes and the CSI objects
    /// (capacities with their namespace set).
    pub persistent_volumes: Vec<Arc<PersistentVolume>>,
    pub persistent_volume_claims: Vec<Arc<PersistentVolumeClaim>>,
    pub storage_classes: Vec<Arc<StorageClass>>,
    pub csi_nodes: Vec<Arc<CSINode>>,
    pub csi_drivers: Vec<Arc<CSIDriver>>,
    pub csi_storage_capacities: Vec<Arc<CSIStorageCapacity>>,
    pub volume_attachments: Vec<Arc<VolumeAttachment>>,
    /// For DynamicResources: device classes, resource slices and claims (namespace set).
    pub device_classes: Vec<Arc<DeviceClass>>,
    pub resource_slices: Vec<Arc<ResourceSlice>>,
    pub resource_claims: Vec<Arc<ResourceClaim>>,
    /// The file each pod came from (parallel to `pods`), to name it in errors.
    pod_files: Vec<PathBuf>,
    /// Kinds that were present but are not used, with their counts.
    pub ignored: BTreeMap<String, usize>,
}

impl ClusterInput {
    /// Reads and checks every file, in order.
    pub fn load(files: &[PathBuf]) -> Result<Self, InputError> {
        let mut input = ClusterInput::default();
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        for file in files {
            let text = std::fs::read_to_string(file).map_err(|source| InputError::Read {
                file: file.clone(),
                source,
            })?;
            input.add_text(&text, file, &mut seen)?;
        }
        input.resolve_priorities()?;
        Ok(input)
    }

    /// Gives pods without `spec.priority` the priority (and preemption policy) of their
    /// PriorityClass, as the API server's Priority admission does: the named class, else
    /// the global default class (the highest if several), else priority 0. A class that
    /// does not exist is an error, as admission rejects such a pod.
    pub fn resolve_priorities(&mut self) -> Result<(), InputError> {
        for (i, pod) in self.pods.iter_mut().enumerate() {
            resolve_priority(&self.priority_classes, pod).map_err(|message| {
                InputError::Object {
                    file: self.pod_files.get(i).cloned().unwrap_or_default(),
                    object: pod_label(pod),
                    message,
                }
            })?;
        }
        Ok(())
    }

    /// The pod `simulate --capacity` copies: the one object of `file`, which must be a Pod,
    /// checked as the input's pods are and given its priority from this input's
    /// PriorityClasses.
    pub fn load_template(&self, file: &Path) -> Result<Arc<Pod>, InputError> {
        let text = std::fs::read_to_string(file).map_err(|source| InputError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        let docs = parse_documents(&text).map_err(|message| InputError::Parse {
            file: file.to_path_buf(),
            message,
        })?;
        let kinds: Vec<&str> = docs
            .iter()
            .filter(|d| !d.is_null())
            .map(|d| {
                d.get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or("(no kind)")
            })
            .collect();
        if kinds != ["Pod"] {
            let found = if kinds.is_empty() {
                "nothing".to_string()
            } else {
                kinds.join(", ")
            };
            return Err(InputError::Parse {
                file: file.to_path_buf(),
                message: format!(
                    "expected exactly one object, a Pod (the pod to copy); found {found}"
                ),
            });
        }
        let mut one = ClusterInput::default();
        one.add_text(&text, file, &mut HashMap::new())?;
        let Some(mut pod) = one.pods.pop() else {
            return Err(InputError::Parse {
                file: file.to_path_buf(),
                message: "expected a Pod".into(),
            });
        };
        resolve_priority(&self.priority_classes, &mut pod).map_err(|message| {
            InputError::Object {
                file: file.to_path_buf(),
                object: pod_label(&pod),
                message,
            }
        })?;
        Ok(pod)
    }

    /// Adds the objects of one file's text (`file` names it in errors).
    pub fn add_text(
        &mut self,
        text: &str,
        file: &Path,
        seen: &mut HashMap<String, PathBuf>,
    ) -> Result<(), InputError> {
        let docs = parse_documents(text).map_err(|message| InputError::Parse {
            file: file.to_path_buf(),
            message,
        })?;
        let mut counter = 0usize;
        for doc in docs {
            self.add_value(doc, file, &mut counter, seen)?;
        }
        Ok(())
    }

    fn add_value(
        &mut self,
        value: serde_json::Value,
        file: &Path,
        counter: &mut usize,
        seen: &mut HashMap<String, PathBuf>,
    ) -> Result<(), InputError> {
        if value.is_null() {
            return Ok(());
        }
        *counter += 1;
        let index = *counter;
        let err = |object: String, message: String| InputError::Object {
            file: file.to_path_buf(),
            object,
            message,
        };
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_string();
        if kind.is_empty() {
            return Err(err(format!("object #{index}"), "kind is required".into()));
        }
        if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
            let items = match value.get("items") {
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(serde_json::Value::Array(a)) => a.clone(),
                Some(_) => {
                    return Err(err(
                        format!("{kind} #{index}"),
                        "items: expected a list".into(),
                    ))
                }
            };
            for item in items {
                self.add_value(item, file, counter, seen)?;
            }
            return Ok(());
        }
        let name = value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        if !matches!(
            kind.as_str(),
            "Node"
                | "Pod"
                | "Namespace"
                | "Service"
                | "ReplicationController"
                | "ReplicaSet"
                | "StatefulSet"
                | "PodDisruptionBudget"
                | "PriorityClass"
                | "PersistentVolume"
                | "PersistentVolumeClaim"
                | "StorageClass"
                | "CSINode"
                | "CSIDriver"
                | "CSIStorageCapacity"
                | "VolumeAttachment"
                | "DeviceClass"
                | "ResourceSlice"
                | "ResourceClaim"
        ) {
            *self.ignored.entry(kind).or_insert(0) += 1;
            return Ok(());
        }
        if name.is_empty() {
            return Err(err(
                format!("{kind} #{index}"),
                "metadata.name is required".into(),
            ));
        }
        let namespaced = !matches!(
            kind.as_str(),
            "Node"
                | "Namespace"
                | "PriorityClass"
                | "PersistentVolume"
                | "StorageClass"
                | "CSINode"
                | "CSIDriver"
                | "VolumeAttachment"
                | "DeviceClass"
                | "ResourceSlice"
        );
        let ns = value
            .pointer("/metadata/namespace")
            .and_then(|n| n.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
            .to_string();
        let label = if namespaced {
            format!("{kind} {ns}/{name}")
        } else {
            format!("{kind} {name}")
        };
        if let Some(first) = seen.insert(label.clone(), file.to_path_buf()) {
            return Err(err(
                label,
                format!("duplicate object (first seen in {})", first.display()),
            ));
        }
        match kind.as_str() {
            "Node" => {
                let node: Node = decode(value).map_err(|m| err(label.clone(), m))?;
                check_labels(node.metadata.labels.as_ref()).map_err(|m| err(label.clone(), m))?;
                if let Some(status) = &node.status {
                    check_quantities("status.capacity", status.capacity.as_ref())
                        .and_then(|_| {
                            check_quantities("status.allocatable", status.allocatable.as_ref())
                        })
                        .map_err(|m| err(label.clone(), m))?;
                }
                self.nodes.push(Arc::new(node));
            }
            "Pod" => {
                let mut pod: Pod = decode(value).map_err(|m| err(label.clone(), m))?;
                check_labels(pod.metadata.labels.as_ref()).map_err(|m| err(label.clone(), m))?;
                check_pod_quantities(&pod).map_err(|m| err(label.clone(), m))?;
                pod.metadata.namespace = Some(ns);
                self.pods.push(Arc::new(pod));
                self.pod_files.push(file.to_path_buf());
            }
            "Namespace" => {
                let ns: Namespace = decode(value).map_err(|m| err(label.clone(), m))?;
                check_labels(ns.metadata.labels.as_ref()).map_err(|m| err(label.clone(), m))?;
                self.namespaces.push(ns);
            }
            "Service" => {
                let svc: Service = decode(value).map_err(|m| err(label.clone(), m))?;
                push_ns(&mut self.workloads.services, ns, svc);
            }
            "ReplicationController" => {
                let rc: ReplicationController = decode(value).map_err(|m| err(label.clone(), m))?;
                push_ns(&mut self.workloads.replication_controllers, ns, rc);
            }
            "PodDisruptionBudget" => {
                let mut pdb: PodDisruptionBudget =
                    decode(value).map_err(|m| err(label.clone(), m))?;
                pdb.metadata.namespace = Some(ns);
                self.pdbs.push(Arc::new(pdb));
            }
            "PriorityClass" => {
                let pc: PriorityClass = decode(value).map_err(|m| err(label.clone(), m))?;
                self.priority_classes.push(Arc::new(pc));
            }
            "PersistentVolume" => {
                let pv: PersistentVolume = decode(value).map_err(|m| err(label.clone(), m))?;
                self.persistent_volumes.push(Arc::new(pv));
            }
            "PersistentVolumeClaim" => {
                let mut pvc: PersistentVolumeClaim =
                    decode(value).map_err(|m| err(label.clone(), m))?;
                pvc.metadata.namespace = Some(ns);
                self.persistent_volume_claims.push(Arc::new(pvc));
            }
            "StorageClass" => {
                let sc: StorageClass = decode(value).map_err(|m| err(label.clone(), m))?;
                self.storage_classes.push(Arc::new(sc));
            }
            "CSINode" => {
                let o: CSINode = decode(value).map_err(|m| err(label.clone(), m))?;
                self.csi_nodes.push(Arc::new(o));
            }
            "CSIDriver" => {
                let o: CSIDriver = decode(value).map_err(|m| err(label.clone(), m))?;
                self.csi_drivers.push(Arc::new(o));
            }
            "CSIStorageCapacity" => {
                let mut o: CSIStorageCapacity = decode(value).map_err(|m| err(label.clone(), m))?;
                o.metadata.namespace = Some(ns);
                self.csi_storage_capacities.push(Arc::new(o));
            }
            "VolumeAttachment" => {
                let o: VolumeAttachment = decode(value).map_err(|m| err(label.clone(), m))?;
                self.volume_attachments.push(Arc::new(o));
            }
            "DeviceClass" => {
                let o: DeviceClass = decode(value).map_err(|m| err(label.clone(), m))?;
                self.device_classes.push(Arc::new(o));
            }
            "ResourceSlice" => {
                let o: ResourceSlice = decode(value).map_err(|m| err(label.clone(), m))?;
                self.resource_slices.push(Arc::new(o));
            }
            "ResourceClaim" => {
                let mut o: ResourceClaim = decode(value).map_err(|m| err(label.clone(), m))?;
                o.metadata.namespace = Some(ns);
                self.resource_claims.push(Arc::new(o));
            }
            "ReplicaSet" => {
                let rs: ReplicaSet = decode(value).map_err(|m| err(label.clone(), m))?;
                push_ns(&mut self.workloads.replica_sets, ns, rs);
            }
            _ => {
                let ss: StatefulSet = decode(value).map_err(|m| err(label.clone(), m))?;
                push_ns(&mut self.workloads.stateful_sets, ns, ss);
            }
        }
        Ok(())
    }
}

/// Files `obj` under its namespace (objects are stored with their namespace set).
fn push_ns<
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    map: &mut HashMap<String, Vec<Arc<T>>>,
    ns: String,
    mut obj: T,
) {
    obj.metadata_mut().namespace = Some(ns.clone());
    map.entry(ns).or_default().push(Arc::new(obj));
}

/// `Pod namespace/name`, as errors name a pod.
fn pod_label(pod: &Pod) -> String {
    format!(
        "Pod {}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Gives a pod without `spec.priority` the priority (and preemption policy) of its
/// PriorityClass among `classes`, as the API server's Priority admission does: the named
/// class, else the global default class (the highest if several), else priority 0. A class
/// that does not exist is an error, as admission rejects such a pod.
fn resolve_priority(classes: &[Arc<PriorityClass>], pod: &mut Arc<Pod>) -> Result<(), String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    if spec.priority.is_some() {
        return Ok(());
    }
    let name = spec.priority_class_name.clone().filter(|n| !n.is_empty());
    let (class_name, value, policy) = match name.as_deref() {
        None => match classes
            .iter()
            .filter(|c| c.global_default == Some(true))
            .max_by_key(|c| c.value)
        {
            Some(c) => (
                c.metadata.name.clone(),
                c.value,
                c.preemption_policy.clone(),
            ),
            None => (None, 0, None),
        },
        Some(SYSTEM_CLUSTER_CRITICAL) => (name.clone(), SYSTEM_CLUSTER_CRITICAL_PRIORITY, None),
        Some(SYSTEM_NODE_CRITICAL) => (name.clone(), SYSTEM_NODE_CRITICAL_PRIORITY, None),
        Some(n) => {
            let Some(c) = classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(n))
            else {
                return Err(format!(
                    "spec.priorityClassName: no PriorityClass with name {n} was found"
                ));
            };
            (name.clone(), c.value, c.preemption_policy.clone())
        }
    };
    let pod = Arc::make_mut(pod);
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.priority = Some(value);
    if class_name.is_some() {
        spec.priority_class_name = class_name;
    }
    if spec.preemption_policy.is_none() {
        spec.preemption_policy = Some(policy.unwrap_or_else(|| "PreemptLowerPriority".to_string()));
    }
    Ok(())
}

/// Decodes one object, naming the field on a type error.
fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        format!("{path}: {}", e.into_inner())
    })
}

/// Splits a file into documents: JSON when it starts with `{` or `[`, else (multi-document)
/// YAML.
pub fn parse_documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        return Ok(match v {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        });
    }
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let v = serde_json::Value::deserialize(doc).map_err(|e| format!("invalid YAML: {e}"))?;
        out.push(v);
    }
    Ok(out)
}

fn check_labels(labels: Option<&BTreeMap<String, String>>) -> Result<(), String> {
    for (k, v) in labels.into_iter().flatten() {
        let path = format!("metadata.labels[{k}]");
        validate_label_key(k, &path).map_err(|e| e.to_string())?;
        validate_label_value(v, &path).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn check_quantities(path: &str, list: Option<&BTreeMap<String, Quantity>>) -> Result<(), String> {
    for (name, q) in list.into_iter().flatten() {
        quantity::parse_value(&q.0).map_err(|e| format!("{path}[{name}]: {e}"))?;
    }
    Ok(())
}

fn check_pod_quantities(pod: &Pod) -> Result<(), String> {
    let Some(spec) = &pod.spec else { return Ok(()) };
    let containers = |list: &[Container], field: &str| -> Result<(), String> {
        for (i, c) in list.iter().enumerate() {
            if let Some(r) = &c.resources {
                check_quantities(
                    &format!("spec.{field}[{i}].resources.requests"),
                    r.requests.as_ref(),
                )?;
                check_quantities(
                    &format!("spec.{field}[{i}].resources.limits"),
                    r.limits.as_ref(),
                )?;
            }
        }
        Ok(())
    };
    containers(&spec.containers, "containers")?;
    containers(
        spec.init_containers.as_deref().unwrap_or(&[]),
        "initContainers",
    )?;
    check_quantities("spec.overhead", spec.overhead.as_ref())?;
    if let Some(r) = &spec.resources {
        check_quantities("spec.resources.requests", r.requests.as_ref())?;
        check_quantities("spec.resources.limits", r.limits.as_ref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn load(text: &str) -> Result<ClusterInput, String> {
        let mut input = ClusterInput::default();
        input
            .add_text(text, Path::new("in.yaml"), &mut HashMap::new())
            .map(|_| input)
            .map_err(|e| e.to_string())
    }

    /// Node names, pod keys, namespace names, ignored kinds.
    type Summary = (Vec<String>, Vec<String>, Vec<String>, Vec<(String, usize)>);

    fn summary(i: &ClusterInput) -> Summary {
        (
            i.nodes
                .iter()
                .map(|n| n.metadata.name.clone().unwrap_or_default())
                .collect(),
            i.pods
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default()
                    )
                })
                .collect(),
            i.namespaces
                .iter()
                .map(|n| n.metadata.name.clone().unwrap_or_default())
                .collect(),
            i.ignored.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        )
    }

    #[rstest]
    #[case::v1_list(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p1, namespace: prod}\n  spec: {containers: [{name: c}]}\n",
        (vec!["n1".into()], vec!["prod/p1".into()], vec![], vec![])
    )]
    #[case::multi_document_yaml_with_default_namespace(
        "kind: Node\napiVersion: v1\nmetadata: {name: n1}\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: p1}\nspec: {containers: []}\n---\n",
        (vec!["n1".into()], vec!["default/p1".into()], vec![], vec![])
    )]
    #[case::json_object(
        "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"prod\", \"labels\": {\"team\": \"a\"}}}",
        (vec![], vec![], vec!["prod".into()], vec![])
    )]
    #[case::typed_list_and_ignored_kinds(
        "kind: NodeList\nitems:\n- kind: Node\n  metadata: {name: n1}\n---\nkind: ConfigMap\nmetadata: {name: c}\n---\nkind: ConfigMap\nmetadata: {name: d}\n",
        (vec!["n1".into()], vec![], vec![], vec![("ConfigMap".into(), 2)])
    )]
    fn loads(#[case] text: &str, #[case] want: Summary) {
        assert_eq!(load(text).map(|i| summary(&i)), Ok(want));
    }

    /// Name, priority and preemption policy of a pod.
    type PodPriority = (String, Option<i32>, Option<String>);

    /// Priority and preemption policy of each pod, after admission-like resolution.
    fn priorities(text: &str) -> Result<Vec<PodPriority>, String> {
        let mut input = load(text)?;
        input.resolve_priorities().map_err(|e| e.to_string())?;
        Ok(input
            .pods
            .iter()
            .map(|p| {
                let s = p.spec.clone().unwrap_or_default();
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    s.priority,
                    s.preemption_policy,
                )
            })
            .collect())
    }

    const CLASSES: &str = "kind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\npreemptionPolicy: Never\n---\nkind: PriorityClass\nmetadata: {name: base}\nvalue: 10\nglobalDefault: true\n---\n";

    #[rstest]
    #[case::named_class(
        "kind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: high, containers: []}\n",
        Ok(vec![("p".into(), Some(1000), Some("Never".into()))])
    )]
    #[case::global_default(
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
        Ok(vec![("p".into(), Some(10), Some("PreemptLowerPriority".into()))])
    )]
    #[case::explicit_priority_is_kept(
        "kind: Pod\nmetadata: {name: p}\nspec: {priority: 7, containers: []}\n",
        Ok(vec![("p".into(), Some(7), None)])
    )]
    #[case::built_in_class(
        "kind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: system-node-critical, containers: []}\n",
        Ok(vec![("p".into(), Some(2_000_001_000), Some("PreemptLowerPriority".into()))])
    )]
    #[case::unknown_class(
        "kind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: nope, containers: []}\n",
        Err("in.yaml: Pod default/p: spec.priorityClassName: no PriorityClass with name nope was found".into())
    )]
    fn pods_get_their_priority_class(
        #[case] pods: &str,
        #[case] want: Result<Vec<PodPriority>, String>,
    ) {
        assert_eq!(priorities(&format!("{CLASSES}{pods}")), want);
    }

    #[test]
    fn pdbs_are_kept_with_their_namespace() {
        let got = load("kind: PodDisruptionBudget\nmetadata: {name: db}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: db}}}\nstatus: {disruptionsAllowed: 1, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}\n")
            .map(|i| i.pdbs.iter().map(|p| p.metadata.namespace.clone()).collect::<Vec<_>>());
        assert_eq!(got, Ok(vec![Some("default".to_string())]));
    }

    #[test]
    fn storage_objects_are_read_not_ignored() {
        let text = "kind: StorageClass\nmetadata: {name: wffc}\nprovisioner: p\nvolumeBindingMode: WaitForFirstConsumer\n---\nkind: PersistentVolume\nmetadata: {name: pv-a, labels: {topology.kubernetes.io/zone: a}}\nspec: {capacity: {storage: 1Gi}}\n---\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop}\nspec: {volumeName: pv-a}\n---\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {storageClassName: wffc}\n";
        let got = load(text).map(|i| {
            let names = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                format!(
                    "{}/{}",
                    m.namespace.as_deref().unwrap_or("-"),
                    m.name.as_deref().unwrap_or("")
                )
            };
            (
                i.storage_classes
                    .iter()
                    .map(|o| names(&o.metadata))
                    .collect::<Vec<_>>(),
                i.persistent_volumes
                    .iter()
                    .map(|o| names(&o.metadata))
                    .collect::<Vec<_>>(),
                i.persistent_volume_claims
                    .iter()
                    .map(|o| names(&o.metadata))
                    .collect::<Vec<_>>(),
                i.ignored.len(),
            )
        });
        assert_eq!(
            got,
            Ok((
                vec!["-/wffc".to_string()],
                vec!["-/pv-a".to_string()],
                vec!["shop/data".to_string(), "default/data".to_string()],
                0
            ))
        );
    }

    #[test]
    fn csi_objects_are_read_not_ignored() {
        let text = "kind: CSINode\nmetadata: {name: n1}\nspec: {drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 2}}]}\n---\nkind: CSIDriver\nmetadata: {name: ebs.csi.aws.com}\nspec: {}\n---\nkind: CSIStorageCapacity\napiVersion: storage.k8s.io/v1\nmetadata: {name: cap-a, namespace: kube-system}\nstorageClassName: fast\n---\nkind: CSIStorageCapacity\nmetadata: {name: cap-b}\nstorageClassName: fast\n---\nkind: VolumeAttachment\nmetadata: {name: va-1}\nspec: {attacher: ebs.csi.aws.com, nodeName: n1, source: {persistentVolumeName: pv-a}}\n";
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        fn names<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(v: &[Arc<T>]) -> Vec<String> {
            v.iter()
                .map(|o| {
                    let m = o.metadata();
                    format!(
                        "{}/{}",
                        m.namespace.as_deref().unwrap_or("-"),
                        m.name.as_deref().unwrap_or("")
                    )
                })
                .collect()
        }
        let got = load(text).map(|i| {
            (
                names(&i.csi_nodes),
                names(&i.csi_drivers),
                names(&i.csi_storage_capacities),
                names(&i.volume_attachments),
                i.ignored.len(),
            )
        });
        assert_eq!(
            got,
            Ok((
                vec!["-/n1".to_string()],
                vec!["-/ebs.csi.aws.com".to_string()],
                vec!["kube-system/cap-a".to_string(), "default/cap-b".to_string()],
                vec!["-/va-1".to_string()],
                0
            ))
        );
    }

    #[test]
    fn dra_objects_are_read_not_ignored() {
        let text = "kind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {}\n---\nkind: ResourceSlice\napiVersion: resource.k8s.io/v1\nmetadata: {name: n1-gpu}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n---\nkind: ResourceClaim\nmetadata: {name: gpu, namespace: ml}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}\n---\nkind: ResourceClaim\nmetadata: {name: other}\nspec: {}\n";
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        fn names<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(v: &[Arc<T>]) -> Vec<String> {
            v.iter()
                .map(|o| {
                    let m = o.metadata();
                    format!(
                        "{}/{}",
                        m.namespace.as_deref().unwrap_or("-"),
                        m.name.as_deref().unwrap_or("")
                    )
                })
                .collect()
        }
        let got = load(text).map(|i| {
            (
                names(&i.device_classes),
                names(&i.resource_slices),
                names(&i.resource_claims),
                i.ignored.len(),
            )
        });
        assert_eq!(
            got,
            Ok((
                vec!["-/gpu.example.com".to_string()],
                vec!["-/n1-gpu".to_string()],
                vec!["ml/gpu".to_string(), "default/other".to_string()],
                0
            ))
        );
    }

    #[test]
    fn workloads_are_kept_by_namespace() {
        let text = "kind: Service\nmetadata: {name: web, namespace: shop}\nspec: {selector: {app: web}}\n---\nkind: ReplicaSet\nmetadata: {name: web-1}\nspec: {selector: {matchLabels: {app: web}}}\n---\nkind: StatefulSet\nmetadata: {name: db, namespace: shop}\nspec: {selector: {matchLabels: {app: db}}, serviceName: db, template: {}}\n---\nkind: ReplicationController\nmetadata: {name: old}\n";
        let got = load(text).map(|i| {
            let w = &i.workloads;
            let names = |ns: &str| {
                (
                    w.services(ns).len(),
                    w.replica_sets(ns).len(),
                    w.stateful_sets(ns).len(),
                    w.replication_controllers(ns).len(),
                )
            };
            (
                names("shop"),
                names("default"),
                w.stateful_sets("shop")[0].metadata.namespace.clone(),
            )
        });
        assert_eq!(
            got,
            Ok(((1, 0, 1, 0), (0, 1, 0, 1), Some("shop".to_string())))
        );
    }

    #[rstest]
    #[case::not_yaml("kind: [unclosed", "in.yaml: invalid YAML")]
    #[case::missing_kind("metadata: {name: x}\n", "in.yaml: object #1: kind is required")]
    #[case::missing_name(
        "kind: Pod\nmetadata: {}\n",
        "in.yaml: Pod #1: metadata.name is required"
    )]
    #[case::bad_quantity(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: lots}}\n",
        "in.yaml: Pod default/p: spec.containers[0].resources.requests[cpu]: quantities must match"
    )]
    #[case::bad_allocatable(
        "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {memory: 1GB}}\n",
        "in.yaml: Node n: status.allocatable[memory]: quantities must match"
    )]
    #[case::bad_label(
        "kind: Node\nmetadata: {name: n, labels: {\"-bad\": x}}\n",
        "in.yaml: Node n: metadata.labels[-bad]: invalid label key \"-bad\""
    )]
    #[case::wrong_field_type(
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, ports: [{containerPort: eighty}]}]}\n",
        "in.yaml: Pod default/p: spec.containers[0].ports[0].containerPort: invalid type"
    )]
    #[case::duplicate(
        "kind: Node\nmetadata: {name: n}\n---\nkind: Node\nmetadata: {name: n}\n",
        "in.yaml: Node n: duplicate object (first seen in in.yaml)"
    )]
    fn rejects(#[case] text: &str, #[case] prefix: &str) {
        let got = load(text).map(|_| ()).map_err(|e| {
            if e.starts_with(prefix) {
                prefix.to_string()
            } else {
                e
            }
        });
        assert_eq!(got, Err(prefix.to_string()));
    }
}

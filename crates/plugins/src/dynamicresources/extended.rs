//! Extended resources backed by DRA: a DeviceClass serves pod requests of its
//! `spec.extendedResourceName` and of its implicit name
//! `deviceclass.resource.kubernetes.io/<class>`, through one ResourceClaim per pod that the
//! scheduler makes (the "special" claim).
//!
//! Upstream: pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go and
//! the DeviceClass resolver of its `extended` package. PreFilter finds the pod's special claim
//! from an earlier attempt, or starts one in memory; Filter gives it, per node, one request
//! per container and resource the node does not advertise in its allocatable; PreBind creates
//! it and records it in the pod's `status.extendedResourceClaimStatus`.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::quantity::parse_value;
use framework::types::is_extended_resource_name;
use framework::{EventObject, QueueingHint, StorageListers};
use k8s_openapi::api::core::v1::{Container, ContainerExtendedResourceRequest, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::helper::events::{new_object, old_object};

/// The prefix of every DeviceClass's implicit extended resource name
/// (`resource.k8s.io/v1` ResourceDeviceClassPrefix).
pub const RESOURCE_DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The annotation (value `"true"`) that marks the claim of a pod's extended resources
/// (`resource.k8s.io/v1` ExtendedResourceClaimAnnotation).
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// The name of the special claim while it exists only in memory; it is no valid object name,
/// so it never collides with a claim of the API server.
pub const SPECIAL_CLAIM_IN_MEM_NAME: &str = "<extended-resources>";

/// Filter's message when the special claim from an earlier attempt already has requests:
/// PostFilter deletes it and the pod starts over.
pub const ERR_STALE_EXTENDED_CLAIM: &str = "cannot schedule extended resource claim";

/// Filter's message for an extended resource the node neither advertises nor gets from a
/// DeviceClass.
pub const ERR_CANNOT_FIT_RESOURCE: &str = "cannot fit resource";

/// PostFilter's message after deleting a stale special claim.
pub const DELETION_COMPLETED: &str = "deletion of ResourceClaim completed";

/// Whether `name` may be served by a DeviceClass (upstream's IsDRAExtendedResourceName): an
/// extended resource name, or a class's implicit name.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(RESOURCE_DEVICE_CLASS_PREFIX)
}

/// The DeviceClass serving the extended resource `name`, if any: the class named by an
/// implicit name, else the class whose `extendedResourceName` is `name` (of several, the
/// newest, then the first by name, so that every scheduler picks the same one).
pub fn device_class_for<'a>(
    classes: impl IntoIterator<Item = &'a Arc<DeviceClass>>,
    name: &str,
) -> Option<&'a Arc<DeviceClass>> {
    let implicit = name.strip_prefix(RESOURCE_DEVICE_CLASS_PREFIX);
    let mut best: Option<&'a Arc<DeviceClass>> = None;
    for class in classes {
        let class_name = class.metadata.name.as_deref().unwrap_or("");
        if implicit == Some(class_name) {
            return Some(class);
        }
        if class.spec.extended_resource_name.as_deref() != Some(name) {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) => {
                let (t, bt) = (
                    class.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                );
                t > bt || (t == bt && Some(class_name) < b.metadata.name.as_deref())
            }
        };
        if better {
            best = Some(class);
        }
    }
    best
}

/// What PreFilter learnt about a pod's extended resources.
#[derive(Debug, Clone)]
pub(super) struct ExtendedResources {
    /// The pod's requests of DRA extended resource names, with the DeviceClass serving each
    /// (`None`: only a node's allocatable can).
    pub(super) requests: BTreeMap<String, (i64, Option<String>)>,
    /// The special claim: from an earlier attempt, or in memory.
    pub(super) claim: Arc<ResourceClaim>,
}

/// The pod's extended resources when one of them is served by a DeviceClass; `None`
/// otherwise (the cheap answer for pods without such requests).
pub(super) fn pre_filter(
    pod: &Pod,
    scalar_requests: &BTreeMap<String, i64>,
    storage: &StorageListers,
    claims: impl Fn(&str) -> Option<Arc<ResourceClaim>>,
) -> Option<ExtendedResources> {
    let mut requests = BTreeMap::new();
    let mut backed = false;
    for (name, &quantity) in scalar_requests {
        if quantity == 0 || !is_dra_extended_resource_name(name) {
            continue;
        }
        let class = device_class_for(storage.device_classes.values(), name)
            .and_then(|c| c.metadata.name.clone());
        backed |= class.is_some();
        requests.insert(name.clone(), (quantity, class));
    }
    if !backed {
        return None;
    }
    let claim = find_extended_resource_claim(pod, storage, claims)
        .unwrap_or_else(|| Arc::new(in_memory_claim(pod)));
    Some(ExtendedResources { requests, claim })
}

/// The special claim of an earlier attempt: annotated as such and controlled by the pod.
fn find_extended_resource_claim(
    pod: &Pod,
    storage: &StorageListers,
    claims: impl Fn(&str) -> Option<Arc<ResourceClaim>>,
) -> Option<Arc<ResourceClaim>> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let uid = pod.metadata.uid.as_deref()?;
    let prefix = format!("{ns}/");
    storage
        .resource_claims
        .iter()
        .filter(|(key, _)| key.starts_with(&prefix))
        .filter_map(|(key, _)| claims(key))
        .find(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
                .is_some_and(|v| v == "true")
                && c.metadata
                    .owner_references
                    .as_deref()
                    .unwrap_or(&[])
                    .iter()
                    .any(|o| {
                        o.uid == uid
                            && o.controller == Some(true)
                            && Some(&o.name) == pod.metadata.name.as_ref()
                    })
        })
}

/// The special claim before it is created: no requests yet, owned by the pod, a temporary
/// UID (the pod's, suffixed) under which its allocation is in flight.
fn in_memory_claim(pod: &Pod) -> ResourceClaim {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some(
                pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
            ),
            name: Some(SPECIAL_CLAIM_IN_MEM_NAME.to_string()),
            uid: Some(format!("{uid}{SPECIAL_CLAIM_IN_MEM_NAME}")),
            generate_name: Some(format!("{name}-extended-resources-")),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name,
                uid,
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            annotations: Some(BTreeMap::from([(
                EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: None,
    }
}

/// Whether the claim exists only in memory.
pub(super) fn is_special_claim_name(claim: &ResourceClaim) -> bool {
    claim.metadata.name.as_deref() == Some(SPECIAL_CLAIM_IN_MEM_NAME)
}

/// Whether the claim has requests (a special claim from an earlier attempt).
pub(super) fn has_requests(claim: &ResourceClaim) -> bool {
    claim
        .spec
        .devices
        .as_ref()
        .is_some_and(|d| d.requests.is_some())
}

/// Per node: the resources the node does not advertise and a DeviceClass serves, or
/// [`ERR_CANNOT_FIT_RESOURCE`]'s case (a resource served by neither). Upstream:
/// filterExtendedResources.
pub(super) fn node_resources(
    ext: &ExtendedResources,
    allocatable: &BTreeMap<String, i64>,
) -> Result<BTreeMap<String, (i64, String)>, ()> {
    let mut out = BTreeMap::new();
    for (name, (quantity, class)) in &ext.requests {
        let advertised = allocatable.get(name);
        match class {
            Some(class) if advertised.copied().unwrap_or(0) == 0 => {
                out.insert(name.clone(), (*quantity, class.clone()));
            }
            _ if advertised.is_none() => return Err(()),
            _ => {}
        }
    }
    Ok(out)
}

/// The special claim for one node: one request per container and resource, and which
/// request serves which container's resource. Upstream: createRequestsAndMappings.
///
/// Containers are numbered init containers first. Each long-lived container (regular, or
/// an init container that restarts: a sidecar) asks for its own devices; a plain init
/// container first reuses the requests of the long-lived containers from its own position
/// on (they are not started yet) and asks only for the rest; of the plain init containers'
/// requests of a resource only the largest is kept, and the others map to it, as they run
/// one after the other.
pub(super) fn node_claim(
    claim: &ResourceClaim,
    pod: &Pod,
    resources: &BTreeMap<String, (i64, String)>,
) -> (ResourceClaim, Vec<ContainerExtendedResourceRequest>) {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let regular = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let containers: Vec<&Container> = init.iter().chain(regular).collect();
    let is_short_lived =
        |i: usize, c: &Container| i < init.len() && c.restart_policy.as_deref() != Some("Always");

    let mut requests: Vec<DeviceRequest> = Vec::new();
    let mut mappings = Vec::new();
    for (resource, (_, class)) in resources {
        let mut long_lived: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate() {
            if is_short_lived(i, c) {
                continue;
            }
            let (request, m) = container_request(i, c, resource, class, &[]);
            if let Some(slot) = long_lived.get_mut(i) {
                *slot = request;
            }
            long_mappings.extend(m);
        }
        let mut largest: Option<DeviceRequest> = None;
        let mut short_names = Vec::new();
        let mut short_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate() {
            if !is_short_lived(i, c) {
                continue;
            }
            let reusable = long_lived.get(i..).unwrap_or(&[]);
            let (request, m) = container_request(i, c, resource, class, reusable);
            if let Some(request) = request {
                short_names.push(request.name.clone());
                if largest
                    .as_ref()
                    .is_none_or(|l| exact_count(l) < exact_count(&request))
                {
                    largest = Some(request);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(largest) = &largest {
            for m in &mut short_mappings {
                if short_names.contains(&m.request_name) {
                    m.request_name = largest.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long_lived.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));

    let mut node_claim = claim.clone();
    node_claim
        .spec
        .devices
        .get_or_insert_with(Default::default)
        .requests = Some(requests);
    (node_claim, mappings)
}

fn exact_count(request: &DeviceRequest) -> i64 {
    request.exactly.as_ref().and_then(|e| e.count).unwrap_or(0)
}

/// Container `index`'s request of `resource` (requests, else limits, as the API server
/// defaults them) as a device request named `container-<index>-request-<k>` (`k`: the
/// resource's position among the container's requests by name), less what `reusable`
/// requests already give it; `None` when those cover it or it asks for none.
fn container_request(
    index: usize,
    container: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let resources = container.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let quantity = requests
        .and_then(|r| r.get(resource))
        .or_else(|| limits.and_then(|l| l.get(resource)))
        .and_then(|q| parse_value(&q.0).ok())
        .unwrap_or(0);
    if quantity <= 0 {
        return (None, Vec::new());
    }
    let mapping = |request: &str| ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut covered = 0;
    for request in reusable.iter().flatten() {
        covered += exact_count(request);
        mappings.push(mapping(&request.name));
        if covered >= quantity {
            return (None, mappings);
        }
    }
    let mut names: Vec<&String> = requests.into_iter().flat_map(|r| r.keys()).collect();
    for name in limits.into_iter().flat_map(|l| l.keys()) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.sort();
    let position = names.iter().position(|n| *n == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{position}");
    mappings.push(mapping(&name));
    let request = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(quantity - covered),
            ..ExactDeviceRequest::default()
        }),
        ..DeviceRequest::default()
    };
    (Some(request), mappings)
}

/// The claim to create from the node's special claim: the API server names it and gives it
/// a UID; the allocation is written to its status afterwards.
pub(super) fn to_create(node_claim: &ResourceClaim) -> ResourceClaim {
    let mut claim = node_claim.clone();
    claim.metadata.name = None;
    claim.metadata.uid = None;
    claim.status = None;
    claim
}

/// NodeResourcesFit's queueing hint for a DeviceClass added or updated: queue when the class
/// now serves an extended resource the pod requests (its explicit name, changed by the
/// update, or on add its implicit name).
pub fn is_schedulable_after_device_class_event(
    scalar_requests: &BTreeMap<String, i64>,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let class = new_object::<DeviceClass>(new)?;
    let original = old_object::<DeviceClass>(old)?;
    let requested = |name: &str| scalar_requests.get(name).is_some_and(|&q| q > 0);
    let explicit = class.spec.extended_resource_name.as_deref();
    let changed = original.is_none_or(|o| o.spec.extended_resource_name.as_deref() != explicit);
    if changed && explicit.is_some_and(requested) {
        return Ok(QueueingHint::Queue);
    }
    if original.is_none() {
        let implicit = format!(
            "{RESOURCE_DEVICE_CLASS_PREFIX}{}",
            class.metadata.name.as_deref().unwrap_or("")
        );
        if requested(&implicit) {
            return Ok(QueueingHint::Queue);
        }
    }
    Ok(QueueingHint::QueueSkip)
}

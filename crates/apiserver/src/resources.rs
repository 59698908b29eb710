//! The resources this server serves: one static table drives routing, discovery, OpenAPI,
//! field selectors and validation.

/// One served resource (a group-version-resource and its kind).
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name as in URLs.
    pub resource: &'static str,
    /// Singular name for discovery.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Discovery categories (`all`).
    pub categories: &'static [&'static str],
    /// Served subresources besides the main resource.
    pub subresources: &'static [&'static str],
    /// Storage key: two resources with the same key share objects (core and events.k8s.io Events).
    pub storage: &'static str,
    /// Field selector labels besides `metadata.name` / `metadata.namespace`.
    pub fields: &'static [&'static str],
}

impl ResourceInfo {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `leases.coordination.k8s.io`, as error messages name a resource.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// Whether `status` is a subresource (main-resource writes then keep the stored status).
    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Verbs of every main resource.
pub fn verbs() -> &'static [&'static str] {
    VERBS
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.schedulerName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// Every served resource.
pub static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        subresources: &["status"],
        storage: "namespaces",
        fields: &["status.phase"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        subresources: &["status"],
        storage: "nodes",
        fields: &["spec.unschedulable"],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        subresources: &["status", "binding", "eviction"],
        storage: "pods",
        fields: POD_FIELDS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        storage: "events",
        fields: EVENT_FIELDS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        subresources: &["status"],
        storage: "services",
        fields: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "replicationcontrollers",
        singular: "replicationcontroller",
        kind: "ReplicationController",
        namespaced: true,
        short_names: &["rc"],
        categories: &["all"],
        subresources: &["status"],
        storage: "replicationcontrollers",
        fields: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        subresources: &[],
        storage: "configmaps",
        fields: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        resource: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        subresources: &["status", "scale"],
        storage: "replicasets",
        fields: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        resource: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        subresources: &["status", "scale"],
        storage: "deployments",
        fields: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        resource: "statefulsets",
        singular: "statefulset",
        kind: "StatefulSet",
        namespaced: true,
        short_names: &["sts"],
        categories: &["all"],
        subresources: &["status", "scale"],
        storage: "statefulsets",
        fields: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        resource: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        categories: &["all"],
        subresources: &["status"],
        storage: "daemonsets",
        fields: &[],
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        resource: "controllerrevisions",
        singular: "controllerrevision",
        kind: "ControllerRevision",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "controllerrevisions",
        fields: &[],
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "leases",
        fields: &[],
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1",
        resource: "priorityclasses",
        singular: "priorityclass",
        kind: "PriorityClass",
        namespaced: false,
        short_names: &["pc"],
        categories: &[],
        subresources: &[],
        storage: "priorityclasses",
        fields: &[],
    },
    ResourceInfo {
        group: "policy",
        version: "v1",
        resource: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        categories: &[],
        subresources: &["status"],
        storage: "poddisruptionbudgets",
        fields: &[],
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        resource: "jobs",
        singular: "job",
        kind: "Job",
        namespaced: true,
        short_names: &[],
        categories: &["all"],
        subresources: &["status"],
        storage: "jobs",
        fields: &[],
    },
    ResourceInfo {
        group: "events.k8s.io",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        storage: "events",
        fields: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "persistentvolumes",
        singular: "persistentvolume",
        kind: "PersistentVolume",
        namespaced: false,
        short_names: &["pv"],
        categories: &[],
        subresources: &["status"],
        storage: "persistentvolumes",
        fields: &[],
    },
    ResourceInfo {
        group: "",
        version: "v1",
        resource: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        subresources: &["status"],
        storage: "persistentvolumeclaims",
        fields: &[],
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        resource: "storageclasses",
        singular: "storageclass",
        kind: "StorageClass",
        namespaced: false,
        short_names: &["sc"],
        categories: &[],
        subresources: &[],
        storage: "storageclasses",
        fields: &[],
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        resource: "csinodes",
        singular: "csinode",
        kind: "CSINode",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "csinodes",
        fields: &[],
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        resource: "csidrivers",
        singular: "csidriver",
        kind: "CSIDriver",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "csidrivers",
        fields: &[],
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        resource: "csistoragecapacities",
        singular: "csistoragecapacity",
        kind: "CSIStorageCapacity",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "csistoragecapacities",
        fields: &[],
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        resource: "volumeattachments",
        singular: "volumeattachment",
        kind: "VolumeAttachment",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &["status"],
        storage: "volumeattachments",
        fields: &[],
    },
    // resource.k8s.io/v1 (Dynamic Resource Allocation): what kube-scheduler's DRA manager
    // lists and watches; defaulted and validated (resource_validation), not allocated here.
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        resource: "deviceclasses",
        singular: "deviceclass",
        kind: "DeviceClass",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "deviceclasses",
        fields: &[],
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        resource: "resourceclaims",
        singular: "resourceclaim",
        kind: "ResourceClaim",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &["status"],
        storage: "resourceclaims",
        fields: &[],
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        resource: "resourceclaimtemplates",
        singular: "resourceclaimtemplate",
        kind: "ResourceClaimTemplate",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "resourceclaimtemplates",
        fields: &[],
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        resource: "resourceslices",
        singular: "resourceslice",
        kind: "ResourceSlice",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "resourceslices",
        // Kubelets and DRA drivers list their node's slices, or a driver's.
        fields: &["spec.nodeName", "spec.driver"],
    },
];

/// The resource served at `group/version/resource`.
pub fn lookup(group: &str, version: &str, resource: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.resource == resource)
}

/// The resource stored under `storage` as core or its first listing (for storage-level lookups).
pub fn by_storage(storage: &str) -> Option<&'static ResourceInfo> {
    RESOURCES.iter().find(|r| r.storage == storage)
}

/// Group-versions served, in discovery order (`""` = core `v1`).
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

//! `meta.k8s.io/v1` Table responses for `kubectl get`: the columns upstream's printers give
//! pods, nodes, namespaces, events, the storage kinds and the rest it serves (with the
//! `-o wide` ones at priority 1), NAME/AGE for the others.
//!
//! Upstream: pkg/printers/internalversion/printers.go.

use serde_json::{json, Value};

use crate::meta;
use crate::resources::ResourceInfo;

fn col(name: &str, ty: &str, format: &str, priority: u8) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": name, "priority": priority})
}

fn columns(info: &ResourceInfo) -> Vec<Value> {
    let name = col("Name", "string", "name", 0);
    let age = col("Age", "string", "", 0);
    match (info.group, info.kind) {
        ("", "Pod") => vec![
            name,
            col("Ready", "string", "", 0),
            col("Status", "string", "", 0),
            col("Restarts", "string", "", 0),
            age,
            col("IP", "string", "", 1),
            col("Node", "string", "", 1),
            col("Nominated Node", "string", "", 1),
            col("Readiness Gates", "string", "", 1),
        ],
        ("", "Node") => vec![
            name,
            col("Status", "string", "", 0),
            col("Roles", "string", "", 0),
            age,
            col("Version", "string", "", 0),
            col("Internal-IP", "string", "", 1),
            col("External-IP", "string", "", 1),
            col("OS-Image", "string", "", 1),
            col("Kernel-Version", "string", "", 1),
            col("Container-Runtime", "string", "", 1),
        ],
        ("", "Namespace") => vec![name, col("Status", "string", "", 0), age],
        ("apps", "ReplicaSet") => vec![
            name,
            col("Desired", "integer", "", 0),
            col("Current", "integer", "", 0),
            col("Ready", "integer", "", 0),
            age,
            col("Containers", "string", "", 1),
            col("Images", "string", "", 1),
            col("Selector", "string", "", 1),
        ],
        ("batch", "Job") => vec![
            name,
            col("Status", "string", "", 0),
            col("Completions", "string", "", 0),
            col("Duration", "string", "", 0),
            age,
            col("Containers", "string", "", 1),
            col("Images", "string", "", 1),
            col("Selector", "string", "", 1),
        ],
        ("apps", "Deployment") => vec![
            name,
            col("Ready", "string", "", 0),
            col("Up-to-date", "string", "", 0),
            col("Available", "string", "", 0),
            age,
            col("Containers", "string", "", 1),
            col("Images", "string", "", 1),
            col("Selector", "string", "", 1),
        ],
        ("apps", "StatefulSet") => vec![
            name,
            col("Ready", "string", "", 0),
            age,
            col("Containers", "string", "", 1),
            col("Images", "string", "", 1),
        ],
        ("apps", "DaemonSet") => vec![
            name,
            col("Desired", "integer", "", 0),
            col("Current", "integer", "", 0),
            col("Ready", "integer", "", 0),
            col("Up-to-date", "integer", "", 0),
            col("Available", "integer", "", 0),
            col("Node Selector", "string", "", 0),
            age,
            col("Containers", "string", "", 1),
            col("Images", "string", "", 1),
            col("Selector", "string", "", 1),
        ],
        ("apps", "ControllerRevision") => vec![
            name,
            col("Controller", "string", "", 0),
            col("Revision", "integer", "", 0),
            age,
        ],
        ("", "Event") | ("events.k8s.io", "Event") => vec![
            col("Last Seen", "string", "", 0),
            col("Type", "string", "", 0),
            col("Reason", "string", "", 0),
            col("Object", "string", "", 0),
            col("Message", "string", "", 0),
            col("Subobject", "string", "", 1),
            col("Source", "string", "", 1),
            col("First Seen", "string", "", 1),
            col("Count", "string", "", 1),
            col("Name", "string", "name", 1),
        ],
        ("policy", "PodDisruptionBudget") => vec![
            name,
            col("Min Available", "string", "", 0),
            col("Max Unavailable", "string", "", 0),
            col("Allowed Disruptions", "integer", "", 0),
            age,
        ],
        ("coordination.k8s.io", "Lease") => vec![name, col("Holder", "string", "", 0), age],
        ("scheduling.k8s.io", "PriorityClass") => vec![
            name,
            col("Value", "integer", "", 0),
            col("Global-Default", "boolean", "", 0),
            age,
            col("PreemptionPolicy", "string", "", 0),
        ],
        ("", "PersistentVolume") => vec![
            name,
            col("Capacity", "string", "", 0),
            col("Access Modes", "string", "", 0),
            col("Reclaim Policy", "string", "", 0),
            col("Status", "string", "", 0),
            col("Claim", "string", "", 0),
            col("StorageClass", "string", "", 0),
            col("VolumeAttributesClass", "string", "", 0),
            col("Reason", "string", "", 0),
            age,
            col("VolumeMode", "string", "", 1),
        ],
        ("", "PersistentVolumeClaim") => vec![
            name,
            col("Status", "string", "", 0),
            col("Volume", "string", "", 0),
            col("Capacity", "string", "", 0),
            col("Access Modes", "string", "", 0),
            col("StorageClass", "string", "", 0),
            col("VolumeAttributesClass", "string", "", 0),
            age,
            col("VolumeMode", "string", "", 1),
        ],
        ("storage.k8s.io", "StorageClass") => vec![
            name,
            col("Provisioner", "string", "", 0),
            col("ReclaimPolicy", "string", "", 0),
            col("VolumeBindingMode", "string", "", 0),
            col("AllowVolumeExpansion", "string", "", 0),
            age,
        ],
        ("storage.k8s.io", "CSINode") => vec![name, col("Drivers", "integer", "", 0), age],
        ("storage.k8s.io", "CSIDriver") => vec![
            name,
            col("AttachRequired", "boolean", "", 0),
            col("PodInfoOnMount", "boolean", "", 0),
            col("StorageCapacity", "boolean", "", 0),
            col("TokenRequests", "string", "", 0),
            col("RequiresRepublish", "boolean", "", 0),
            col("Modes", "string", "", 0),
            age,
        ],
        ("storage.k8s.io", "CSIStorageCapacity") => vec![
            name,
            col("StorageClassName", "string", "", 0),
            col("Capacity", "string", "", 0),
        ],
        ("storage.k8s.io", "VolumeAttachment") => vec![
            name,
            col("Attacher", "string", "name", 0),
            col("PV", "string", "name", 0),
            col("Node", "string", "name", 0),
            col("Attached", "boolean", "", 0),
            age,
        ],
        ("resource.k8s.io", "ResourceClaim") => {
            vec![name, col("State", "string", "", 0), age]
        }
        ("resource.k8s.io", "ResourceSlice") => vec![
            name,
            col("Node", "string", "", 0),
            col("Driver", "string", "", 0),
            col("Pool", "string", "", 0),
            age,
        ],
        _ => vec![name, age],
    }
}

/// Access modes as kubectl abbreviates them, in upstream's fixed order, each once.
fn access_modes(modes: Option<&Value>) -> String {
    let modes: Vec<&str> = modes
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `<unset>` for an absent optional string, as the storage printers show it.
fn or_unset(v: &str) -> String {
    if v.is_empty() {
        "<unset>".to_string()
    } else {
        v.to_string()
    }
}

fn bool_at(obj: &Value, ptr: &str, default: bool) -> bool {
    obj.pointer(ptr).and_then(Value::as_bool).unwrap_or(default)
}

fn pv_cells(pv: &Value) -> Vec<Value> {
    let mut status = s(pv, "/status/phase").to_string();
    if pv.pointer("/metadata/deletionTimestamp").is_some() {
        status = "Terminating".to_string();
    }
    let claim = match pv.pointer("/spec/claimRef") {
        Some(r) if r.is_object() => {
            format!("{}/{}", s(r, "/namespace"), s(r, "/name"))
        }
        _ => String::new(),
    };
    let mut class = s(
        pv,
        "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
    );
    if class.is_empty() {
        class = s(pv, "/spec/storageClassName");
    }
    vec![
        json!(s(pv, "/metadata/name")),
        json!(s(pv, "/spec/capacity/storage")),
        json!(access_modes(pv.pointer("/spec/accessModes"))),
        json!(s(pv, "/spec/persistentVolumeReclaimPolicy")),
        json!(status),
        json!(claim),
        json!(class),
        json!(or_unset(s(pv, "/spec/volumeAttributesClassName"))),
        json!(s(pv, "/status/reason")),
        json!(age(pv)),
        json!(or_unset(s(pv, "/spec/volumeMode"))),
    ]
}

fn pvc_cells(pvc: &Value) -> Vec<Value> {
    let mut status = s(pvc, "/status/phase").to_string();
    if pvc.pointer("/metadata/deletionTimestamp").is_some() {
        status = "Terminating".to_string();
    }
    let volume = s(pvc, "/spec/volumeName");
    // Capacity and access modes are the bound volume's, shown once a volume is named.
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            s(pvc, "/status/capacity/storage").to_string(),
            access_modes(pvc.pointer("/status/accessModes")),
        )
    };
    let mut class = s(
        pvc,
        "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
    );
    if class.is_empty() {
        class = s(pvc, "/spec/storageClassName");
    }
    vec![
        json!(s(pvc, "/metadata/name")),
        json!(status),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(or_unset(s(pvc, "/spec/volumeAttributesClassName"))),
        json!(age(pvc)),
        json!(or_unset(s(pvc, "/spec/volumeMode"))),
    ]
}

/// Whether a StorageClass is marked as the cluster default (GA or beta annotation).
fn is_default_class(sc: &Value) -> bool {
    [
        "/metadata/annotations/storageclass.kubernetes.io~1is-default-class",
        "/metadata/annotations/storageclass.beta.kubernetes.io~1is-default-class",
    ]
    .iter()
    .any(|p| s(sc, p) == "true")
}

fn storage_class_cells(sc: &Value) -> Vec<Value> {
    let mut name = s(sc, "/metadata/name").to_string();
    if is_default_class(sc) {
        name.push_str(" (default)");
    }
    let or = |v: &str, d: &str| {
        if v.is_empty() {
            d.to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        json!(name),
        json!(s(sc, "/provisioner")),
        json!(or(s(sc, "/reclaimPolicy"), "Delete")),
        json!(or(s(sc, "/volumeBindingMode"), "Immediate")),
        json!(bool_at(sc, "/allowVolumeExpansion", false).to_string()),
        json!(age(sc)),
    ]
}

fn csi_driver_cells(d: &Value) -> Vec<Value> {
    let joined = |ptr: &str, field: Option<&str>| -> String {
        d.pointer(ptr)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| match field {
                        Some(f) => v.get(f).and_then(Value::as_str),
                        None => v.as_str(),
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    vec![
        json!(s(d, "/metadata/name")),
        json!(bool_at(d, "/spec/attachRequired", true)),
        json!(bool_at(d, "/spec/podInfoOnMount", false)),
        json!(bool_at(d, "/spec/storageCapacity", false)),
        json!(or_unset(&joined("/spec/tokenRequests", Some("audience")))),
        json!(bool_at(d, "/spec/requiresRepublish", false)),
        json!(or_none(&joined("/spec/volumeLifecycleModes", None))),
        json!(age(d)),
    ]
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn or_none(v: &str) -> String {
    if v.is_empty() {
        "<none>".to_string()
    } else {
        v.to_string()
    }
}

fn age(obj: &Value) -> String {
    meta::age_seconds(s(obj, "/metadata/creationTimestamp"))
        .map(meta::human_duration)
        .unwrap_or_else(|| "<unknown>".to_string())
}

fn pod_cells(p: &Value) -> Vec<Value> {
    let total = p
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    let mut status = s(p, "/status/reason").to_string();
    if status.is_empty() {
        status = s(p, "/status/phase").to_string();
    }
    let gated = p
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if gated && status == "Pending" {
        status = "SchedulingGated".to_string();
    }
    if p.pointer("/metadata/deletionTimestamp").is_some() {
        status = "Terminating".to_string();
    }
    let gates = p
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![
        json!(s(p, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts.to_string()),
        json!(age(p)),
        json!(or_none(s(p, "/status/podIP"))),
        json!(or_none(s(p, "/spec/nodeName"))),
        json!(or_none(s(p, "/status/nominatedNodeName"))),
        json!(if gates == 0 {
            "<none>".to_string()
        } else {
            format!("0/{gates}")
        }),
    ]
}

fn node_cells(n: &Value) -> Vec<Value> {
    let ready = n
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|c| match c.get("status").and_then(Value::as_str) {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if n.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<&str> = n
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    let address = |ty: &str| -> String {
        n.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|x| x.get("type").and_then(Value::as_str) == Some(ty))
            })
            .and_then(|x| x.get("address").and_then(Value::as_str))
            .map_or_else(|| "<none>".to_string(), str::to_string)
    };
    vec![
        json!(s(n, "/metadata/name")),
        json!(status),
        json!(or_none(&roles.join(","))),
        json!(age(n)),
        json!(s(n, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_none(s(n, "/status/nodeInfo/osImage"))),
        json!(or_none(s(n, "/status/nodeInfo/kernelVersion"))),
        json!(or_none(s(n, "/status/nodeInfo/containerRuntimeVersion"))),
    ]
}

/// Age of an RFC 3339 time (`<unknown>` when absent).
fn since(ts: &str) -> String {
    meta::age_seconds(ts)
        .map(meta::human_duration)
        .unwrap_or_else(|| "<unknown>".to_string())
}

/// A core/v1 Event row (events.k8s.io Events are converted to core before they get here).
fn event_cells(e: &Value) -> Vec<Value> {
    let last = [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .map(|p| s(e, p))
    .find(|t| !t.is_empty())
    .unwrap_or("");
    let first = [
        "/firstTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .map(|p| s(e, p))
    .find(|t| !t.is_empty())
    .unwrap_or("");
    let kind = s(e, "/involvedObject/kind").to_lowercase();
    let object = format!("{kind}/{}", s(e, "/involvedObject/name"));
    let mut source = s(e, "/source/component").to_string();
    if source.is_empty() {
        source = s(e, "/reportingComponent").to_string();
    }
    let host = s(e, "/source/host");
    if !host.is_empty() {
        source = format!("{source}, {host}");
    }
    let count = e
        .get("count")
        .and_then(Value::as_i64)
        .or_else(|| e.pointer("/series/count").and_then(Value::as_i64))
        .unwrap_or(1);
    vec![
        json!(since(last)),
        json!(s(e, "/type")),
        json!(s(e, "/reason")),
        json!(object),
        json!(s(e, "/message")),
        json!(s(e, "/involvedObject/fieldPath")),
        json!(source),
        json!(since(first)),
        json!(count.to_string()),
        json!(s(e, "/metadata/name")),
    ]
}

fn int_or_string_cell(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Number(n)) => json!(n.to_string()),
        Some(Value::String(s)) => json!(s),
        _ => json!("N/A"),
    }
}

/// A label selector as kubectl prints it (`app=web,tier in (a,b)`), `<none>` when empty.
pub(crate) fn format_label_selector(sel: Option<&Value>) -> String {
    let mut terms: Vec<String> = sel
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    for e in sel
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = s(e, "/key");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        terms.push(match s(e, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op}"),
        });
    }
    if terms.is_empty() {
        "<none>".to_string()
    } else {
        terms.join(",")
    }
}

/// Upstream: printers' printReplicaSet.
fn replicaset_cells(rs: &Value) -> Vec<Value> {
    let int = |p: &str| rs.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let (names, images) = template_containers(rs);
    vec![
        json!(s(rs, "/metadata/name")),
        // An unset `spec.replicas` means 1, as upstream's defaulting writes it.
        json!(rs
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)),
        json!(int("/status/replicas")),
        json!(int("/status/readyReplicas")),
        json!(age(rs)),
        json!(names),
        json!(images),
        json!(format_label_selector(rs.pointer("/spec/selector"))),
    ]
}

/// Upstream: printers' printJob.
fn job_cells(job: &Value) -> Vec<Value> {
    let int = |p: &str| job.pointer(p).and_then(Value::as_i64);
    let succeeded = int("/status/succeeded").unwrap_or(0);
    let completions = match int("/spec/completions") {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int("/spec/parallelism").unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = s(job, "/status/startTime");
    let duration = match (start, s(job, "/status/completionTime")) {
        ("", _) => String::new(),
        (start, "") => meta::age_seconds(start)
            .map(meta::human_duration)
            .unwrap_or_default(),
        (start, end) => match (meta::age_seconds(start), meta::age_seconds(end)) {
            (Some(a), Some(b)) => meta::human_duration(a - b),
            _ => String::new(),
        },
    };
    let has = |kind: &str| {
        job.pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| s(c, "/type") == kind && s(c, "/status") == "True")
    };
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if job.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = template_containers(job);
    vec![
        json!(s(job, "/metadata/name")),
        json!(status),
        json!(completions),
        json!(duration),
        json!(age(job)),
        json!(names),
        json!(images),
        json!(format_label_selector(job.pointer("/spec/selector"))),
    ]
}

/// Upstream: printers' printDeployment (READY is ready/desired).
fn deployment_cells(d: &Value) -> Vec<Value> {
    let int = |p: &str| d.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let mut cells = replicaset_cells(d);
    // The ReplicaSet's row has the same containers, images and selector at the end.
    let wide = cells.split_off(cells.len().saturating_sub(3));
    let mut row = vec![
        json!(s(d, "/metadata/name")),
        json!(format!(
            "{}/{}",
            int("/status/readyReplicas"),
            d.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
        )),
        json!(int("/status/updatedReplicas")),
        json!(int("/status/availableReplicas")),
        json!(age(d)),
    ];
    row.extend(wide);
    row
}

/// The template's container names and images, comma-joined.
fn template_containers(obj: &Value) -> (String, String) {
    let containers: Vec<&Value> = obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let joined = |field: &str| {
        containers
            .iter()
            .map(|c| s(c, field))
            .collect::<Vec<_>>()
            .join(",")
    };
    (joined("/name"), joined("/image"))
}

/// Upstream: printers' printStatefulSet.
fn statefulset_cells(sts: &Value) -> Vec<Value> {
    let (names, images) = template_containers(sts);
    let desired = sts
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let ready = sts
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    vec![
        json!(s(sts, "/metadata/name")),
        json!(format!("{ready}/{desired}")),
        json!(age(sts)),
        json!(names),
        json!(images),
    ]
}

/// Upstream: printers' printDaemonSet.
fn daemonset_cells(ds: &Value) -> Vec<Value> {
    let int = |p: &str| ds.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let (names, images) = template_containers(ds);
    let mut node_selector: Vec<String> = ds
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    node_selector.sort();
    let node_selector = if node_selector.is_empty() {
        "<none>".to_string()
    } else {
        node_selector.join(",")
    };
    vec![
        json!(s(ds, "/metadata/name")),
        json!(int("/status/desiredNumberScheduled")),
        json!(int("/status/currentNumberScheduled")),
        json!(int("/status/numberReady")),
        json!(int("/status/updatedNumberScheduled")),
        json!(int("/status/numberAvailable")),
        json!(node_selector),
        json!(age(ds)),
        json!(names),
        json!(images),
        json!(format_label_selector(ds.pointer("/spec/selector"))),
    ]
}

/// Upstream: printers' printControllerRevision (the controller as `kind.group/name`).
fn controller_revision_cells(rev: &Value) -> Vec<Value> {
    let controller = crate::controller::controller_ref(rev).map_or_else(
        || "<none>".to_string(),
        |r| {
            let group = s(r, "/apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
            let kind = s(r, "/kind").to_lowercase();
            let kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            format!("{kind}/{}", s(r, "/name"))
        },
    );
    vec![
        json!(s(rev, "/metadata/name")),
        json!(controller),
        json!(rev.get("revision").and_then(Value::as_i64).unwrap_or(0)),
        json!(age(rev)),
    ]
}

fn cells(info: &ResourceInfo, obj: &Value) -> Vec<Value> {
    let name = json!(s(obj, "/metadata/name"));
    match (info.group, info.kind) {
        ("", "Event") => event_cells(obj),
        ("events.k8s.io", "Event") => event_cells(&crate::admission::event_to_core(obj)),
        ("policy", "PodDisruptionBudget") => vec![
            name,
            int_or_string_cell(obj.pointer("/spec/minAvailable")),
            int_or_string_cell(obj.pointer("/spec/maxUnavailable")),
            json!(obj
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0)),
            json!(age(obj)),
        ],
        ("", "Pod") => pod_cells(obj),
        ("", "Node") => node_cells(obj),
        ("apps", "ReplicaSet") => replicaset_cells(obj),
        ("batch", "Job") => job_cells(obj),
        ("apps", "Deployment") => deployment_cells(obj),
        ("apps", "StatefulSet") => statefulset_cells(obj),
        ("apps", "DaemonSet") => daemonset_cells(obj),
        ("apps", "ControllerRevision") => controller_revision_cells(obj),
        ("", "Namespace") => vec![name, json!(s(obj, "/status/phase")), json!(age(obj))],
        ("coordination.k8s.io", "Lease") => {
            vec![name, json!(s(obj, "/spec/holderIdentity")), json!(age(obj))]
        }
        ("scheduling.k8s.io", "PriorityClass") => vec![
            name,
            obj.get("value").cloned().unwrap_or(json!(0)),
            json!(obj
                .get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false)),
            json!(age(obj)),
            json!(s(obj, "/preemptionPolicy")),
        ],
        ("", "PersistentVolume") => pv_cells(obj),
        ("", "PersistentVolumeClaim") => pvc_cells(obj),
        ("storage.k8s.io", "StorageClass") => storage_class_cells(obj),
        ("storage.k8s.io", "CSINode") => vec![
            name,
            json!(obj
                .pointer("/spec/drivers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)),
            json!(age(obj)),
        ],
        ("storage.k8s.io", "CSIDriver") => csi_driver_cells(obj),
        ("storage.k8s.io", "CSIStorageCapacity") => vec![
            name,
            json!(s(obj, "/storageClassName")),
            json!(or_unset(s(obj, "/capacity"))),
        ],
        ("storage.k8s.io", "VolumeAttachment") => vec![
            name,
            json!(s(obj, "/spec/attacher")),
            json!(s(obj, "/spec/source/persistentVolumeName")),
            json!(s(obj, "/spec/nodeName")),
            json!(bool_at(obj, "/status/attached", false)),
            json!(age(obj)),
        ],
        ("resource.k8s.io", "ResourceClaim") => {
            vec![name, json!(resource_claim_state(obj)), json!(age(obj))]
        }
        ("resource.k8s.io", "ResourceSlice") => vec![
            name,
            json!(s(obj, "/spec/nodeName")),
            json!(s(obj, "/spec/driver")),
            json!(s(obj, "/spec/pool/name")),
            json!(age(obj)),
        ],
        _ => vec![name, json!(age(obj))],
    }
}

/// One table row; `row.object` is PartialObjectMetadata, or the whole object when asked.
/// A claim's State column: `deleted`, `pending` or `allocated`, then `reserved` when pods
/// use it, joined by commas.
///
/// Upstream: pkg/printers/internalversion/printers.go (resourceClaimState).
fn resource_claim_state(claim: &Value) -> String {
    let deleted = claim.pointer("/metadata/deletionTimestamp").is_some();
    let allocated = claim
        .pointer("/status/allocation")
        .is_some_and(|a| !a.is_null());
    let reserved = claim
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty());
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if allocated {
        states.push("allocated");
    } else if !deleted {
        states.push("pending");
    }
    if reserved {
        states.push("reserved");
    }
    states.join(",")
}

fn row(info: &ResourceInfo, obj: &Value, include_object: bool) -> Value {
    let object = if include_object {
        obj.clone()
    } else {
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
               "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
    };
    json!({"cells": cells(info, obj), "object": object})
}

/// A Table of `objects`.
pub fn table<'a>(
    info: &ResourceInfo,
    objects: impl IntoIterator<Item = &'a Value>,
    resource_version: &str,
    include_object: bool,
) -> Value {
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| row(info, o, include_object))
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
           "metadata": {"resourceVersion": resource_version},
           "columnDefinitions": columns(info), "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    #[test]
    fn pod_row_has_wide_columns() {
        let info = lookup("", "v1", "pods").expect("pods");
        let p = json!({"metadata": {"name": "p", "creationTimestamp": "2020-01-01T00:00:00Z"},
                       "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
                       "status": {"phase": "Pending"}});
        let t = table(info, [&p], "5", false);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "p");
        assert_eq!(cells[1], "0/1");
        assert_eq!(cells[2], "Pending");
        assert_eq!(cells[6], "n1");
        assert_eq!(t["columnDefinitions"].as_array().map(Vec::len), Some(9));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    /// The cells of one object of a kind, without the age (which moves).
    fn cells_without_age(info: &ResourceInfo, obj: &Value) -> Vec<Value> {
        let t = table(info, [obj], "5", false);
        let names: Vec<Value> = t["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["name"].clone())
            .collect();
        t["rows"][0]["cells"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(&names)
            .filter(|(_, name)| *name != "Age")
            .map(|(c, _)| c.clone())
            .collect()
    }

    #[test]
    fn sets_and_revisions_rows_as_upstream_prints_them() {
        let ds = json!({"metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"spec": {"nodeSelector": {"zone": "a", "disk": "ssd"},
                                           "containers": [{"name": "c", "image": "agent:1"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                       "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}});
        assert_eq!(
            cells_without_age(lookup("apps", "v1", "daemonsets").expect("ds"), &ds),
            [
                json!("agent"),
                json!(3),
                json!(3),
                json!(2),
                json!(1),
                json!(2),
                json!("disk=ssd,zone=a"),
                json!("c"),
                json!("agent:1"),
                json!("app=agent")
            ]
        );
        let sts = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 3,
                     "template": {"spec": {"containers": [{"name": "c", "image": "db:1"},
                                                          {"name": "s", "image": "side:2"}]}}},
            "status": {"readyReplicas": 2}});
        assert_eq!(
            cells_without_age(lookup("apps", "v1", "statefulsets").expect("sts"), &sts),
            [
                json!("web"),
                json!("2/3"),
                json!("c,s"),
                json!("db:1,side:2")
            ]
        );
        let rev = json!({"metadata": {"name": "web-abc", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u",
                 "controller": true}]},
            "revision": 4});
        let revisions = lookup("apps", "v1", "controllerrevisions").expect("revisions");
        assert_eq!(
            cells_without_age(revisions, &rev),
            [json!("web-abc"), json!("statefulset.apps/web"), json!(4)]
        );
        let orphan = json!({"metadata": {"name": "x"}, "revision": 1});
        assert_eq!(
            cells_without_age(revisions, &orphan),
            [json!("x"), json!("<none>"), json!(1)]
        );
    }

    #[test]
    fn event_row_names_the_object_and_source() {
        let info = lookup("", "v1", "events").expect("events");
        let e = json!({"metadata": {"name": "p.1"}, "type": "Normal", "reason": "Scheduled",
                       "involvedObject": {"kind": "Pod", "name": "p"}, "message": "assigned",
                       "source": {"component": "kubesched"}, "count": 2,
                       "lastTimestamp": "2020-01-01T00:00:00Z"});
        let t = table(info, [&e], "5", false);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "Normal");
        assert_eq!(cells[3], "pod/p");
        assert_eq!(cells[6], "kubesched");
        assert_eq!(cells[8], "2");
    }

    #[test]
    fn cordoned_ready_node_with_role() {
        let info = lookup("", "v1", "nodes").expect("nodes");
        let n = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
                       "spec": {"unschedulable": true},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                  "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                                  "nodeInfo": {"kubeletVersion": "v1.37.0"}}});
        let t = table(info, [&n], "5", false);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "worker");
        assert_eq!(cells[4], "v1.37.0");
        assert_eq!(cells[5], "10.0.0.1");
    }

    fn cells_of(resource: &str, group: &str, obj: Value) -> Value {
        let info = lookup(group, "v1", resource).expect("served");
        let mut t = table(info, [&obj], "5", false);
        let n = t["columnDefinitions"].as_array().map_or(0, Vec::len);
        let cells = t["rows"][0]["cells"].take();
        assert_eq!(
            cells.as_array().map(Vec::len),
            Some(n),
            "one cell per column"
        );
        cells
    }

    #[rstest::rstest]
    #[case::bound_volume(
        "persistentvolumes", "",
        json!({"metadata": {"name": "pv1"},
               "spec": {"capacity": {"storage": "10Gi"}, "persistentVolumeReclaimPolicy": "Retain",
                        "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
                        "claimRef": {"namespace": "default", "name": "data"},
                        "storageClassName": "fast", "volumeMode": "Filesystem"},
               "status": {"phase": "Bound"}}),
        json!(["pv1", "10Gi", "RWO,RWX", "Retain", "Bound", "default/data", "fast", "<unset>", "", "<unknown>", "Filesystem"])
    )]
    #[case::deleted_volume_is_terminating(
        "persistentvolumes", "",
        json!({"metadata": {"name": "pv1", "deletionTimestamp": "2020-01-01T00:00:00Z"},
               "spec": {"capacity": {"storage": "1Gi"}}, "status": {"phase": "Released", "reason": "gone"}}),
        json!(["pv1", "1Gi", "", "", "Terminating", "", "", "<unset>", "gone", "<unknown>", "<unset>"])
    )]
    #[case::pending_claim_shows_no_capacity(
        "persistentvolumeclaims", "",
        json!({"metadata": {"name": "data"},
               "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}},
               "status": {"phase": "Pending", "capacity": {"storage": "1Gi"}}}),
        json!(["data", "Pending", "", "", "", "fast", "<unset>", "<unknown>", "<unset>"])
    )]
    #[case::bound_claim_shows_the_volume(
        "persistentvolumeclaims", "",
        json!({"metadata": {"name": "data"},
               "spec": {"volumeName": "pv1", "volumeMode": "Block", "volumeAttributesClassName": "gold"},
               "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOncePod"]}}),
        json!(["data", "Bound", "pv1", "10Gi", "RWOP", "", "gold", "<unknown>", "Block"])
    )]
    #[case::default_class_is_marked(
        "storageclasses", "storage.k8s.io",
        json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer",
               "allowVolumeExpansion": true}),
        json!(["standard (default)", "rancher.io/local-path", "Delete", "WaitForFirstConsumer", "true", "<unknown>"])
    )]
    #[case::csi_node_counts_drivers(
        "csinodes", "storage.k8s.io",
        json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a", "nodeID": "n1"}]}}),
        json!(["n1", 1, "<unknown>"])
    )]
    #[case::csi_driver_flags(
        "csidrivers", "storage.k8s.io",
        json!({"metadata": {"name": "csi.example.com"},
               "spec": {"attachRequired": false, "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
                        "volumeLifecycleModes": ["Persistent", "Ephemeral"]}}),
        json!(["csi.example.com", false, false, false, "a,b", false, "Persistent,Ephemeral", "<unknown>"])
    )]
    #[case::storage_capacity(
        "csistoragecapacities", "storage.k8s.io",
        json!({"metadata": {"name": "cap"}, "storageClassName": "fast", "capacity": "100Gi"}),
        json!(["cap", "fast", "100Gi"])
    )]
    #[case::volume_attachment(
        "volumeattachments", "storage.k8s.io",
        json!({"metadata": {"name": "va"},
               "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}},
               "status": {"attached": true}}),
        json!(["va", "csi.example.com", "pv1", "n1", true, "<unknown>"])
    )]
    fn storage_rows(
        #[case] resource: &str,
        #[case] group: &str,
        #[case] obj: Value,
        #[case] want: Value,
    ) {
        assert_eq!(cells_of(resource, group, obj), want);
    }

    #[rstest::rstest]
    #[case::device_class(
        "deviceclasses",
        json!({"metadata": {"name": "gpu.example.com"}}),
        json!(["gpu.example.com", "<unknown>"])
    )]
    #[case::pending_claim("resourceclaims", json!({"metadata": {"name": "c"}}), json!(["c", "pending", "<unknown>"]))]
    #[case::allocated_reserved_claim(
        "resourceclaims",
        json!({"metadata": {"name": "c"},
               "status": {"allocation": {"devices": {}}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}),
        json!(["c", "allocated,reserved", "<unknown>"])
    )]
    #[case::deleted_unallocated_claim(
        "resourceclaims",
        json!({"metadata": {"name": "c", "deletionTimestamp": "2020-01-01T00:00:00Z"}}),
        json!(["c", "deleted", "<unknown>"])
    )]
    #[case::claim_template("resourceclaimtemplates", json!({"metadata": {"name": "t"}}), json!(["t", "<unknown>"]))]
    #[case::node_local_slice(
        "resourceslices",
        json!({"metadata": {"name": "n1-gpu"},
               "spec": {"nodeName": "n1", "driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}}),
        json!(["n1-gpu", "n1", "gpu.example.com", "n1", "<unknown>"])
    )]
    fn resource_rows(#[case] resource: &str, #[case] obj: Value, #[case] want: Value) {
        assert_eq!(cells_of(resource, "resource.k8s.io", obj), want);
    }
}

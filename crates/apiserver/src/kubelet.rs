//! The kubelet stand-in (`--simulate-kubelets`): the status transitions KWOK's stages perform,
//! so pods scheduled onto fake nodes look like they run.
//!
//! - A node without a `Ready=True` condition gets Ready (and the pressure conditions False).
//! - A bound pod that is Pending and not being deleted becomes Running once every claim its
//!   volumes name is Bound (a kubelet waits to mount them; until then the pod stays Pending):
//!   `PodScheduled`,
//!   and every ResourceClaim its `spec.resourceClaims` name (directly, or the claim made from
//!   a template as recorded in `status.resourceClaimStatuses`), and the claim of its
//!   extended resources named in `status.extendedResourceClaimStatus`, is allocated and
//!   reserved for it (a kubelet waits to prepare the devices); then
//!   `Initialized`, `ContainersReady` and `Ready` True, a pod IP, the node's InternalIP as
//!   host IP, and one running, ready container status per container.
//! - A Running, ready pod a Job owns (an owner reference of kind `Job`) completes after the
//!   configured delay, as KWOK's `pod-complete` stage does (its default: 1 s): phase
//!   Succeeded, every container terminated with exit code 0 reason `Completed`, `Ready` and
//!   `ContainersReady` False. The annotation `pod-complete.stage.kwok.x-k8s.io/delay` (a Go
//!   duration such as `30s`) sets one pod's delay, as in KWOK.
//! - A pod being deleted gracefully (bound, `deletionTimestamp` set, grace period left) is
//!   deleted at once with grace period 0, as a kubelet does once the containers stopped;
//!   the stand-in runs no containers, so there is nothing to wait for.
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::update`], so its writes are logged and watched like any other.
//! **Invariant:** each transition is idempotent (it re-checks the object under the store lock),
//! so seeing an event twice, or its own writes, never writes again.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::store::RecvError;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::meta;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store};

fn condition_true(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn str_at<'a>(obj: &'a Value, p: &str) -> &'a str {
    obj.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// A node that is not Ready yet, made Ready; None when it already is.
pub fn ready_node(node: &Value) -> Option<Value> {
    if condition_true(node, "Ready") {
        return None;
    }
    let now = meta::now_rfc3339();
    let cond = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let mut new = node.clone();
    let mut conditions: Vec<Value> = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let kinds = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        (
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ];
    for (kind, status, reason, message) in kinds {
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(kind));
        conditions.push(cond(kind, status, reason, message));
    }
    if !new.get("status").is_some_and(Value::is_object) {
        new["status"] = json!({});
    }
    new["status"]["conditions"] = Value::Array(conditions);
    Some(new)
}

/// The pod conditions a kubelet sets on a running pod, in the order it writes them.
const KUBELET_POD_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// A bound, Pending pod that is not being deleted, made Running; None otherwise.
pub fn running_pod(pod: &Value, host_ip: &str, pod_ip: &str) -> Option<Value> {
    let pending = matches!(str_at(pod, "/status/phase"), "" | "Pending");
    if str_at(pod, "/spec/nodeName").is_empty()
        || !pending
        || pod.pointer("/metadata/deletionTimestamp").is_some()
    {
        return None;
    }
    let now = meta::now_rfc3339();
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    json!({
                        "name": c.get("name").cloned().unwrap_or(Value::Null),
                        "image": c.get("image").cloned().unwrap_or(Value::Null),
                        "imageID": "",
                        "containerID": format!("kubesched://{}", meta::new_uid()),
                        "ready": true,
                        "started": true,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut new = pod.clone();
    if !new.get("status").is_some_and(Value::is_object) {
        new["status"] = json!({});
    }
    let status = &mut new["status"];
    status["phase"] = json!("Running");
    // Conditions the kubelet does not own (the scheduler's DisruptionTarget, readiness gates'
    // types) are kept, before the kubelet's own, as the kubelet's status manager keeps them.
    let mut conditions: Vec<Value> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
            !KUBELET_POD_CONDITIONS.contains(&kind)
        })
        .cloned()
        .collect();
    conditions.extend(KUBELET_POD_CONDITIONS.iter().map(
        |t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
    ));
    status["conditions"] = Value::Array(conditions);
    status["containerStatuses"] = Value::Array(containers);
    status["startTime"] = json!(now);
    if !host_ip.is_empty() {
        status["hostIP"] = json!(host_ip);
        status["hostIPs"] = json!([{"ip": host_ip}]);
    }
    status["podIP"] = json!(pod_ip);
    status["podIPs"] = json!([{"ip": pod_ip}]);
    Some(new)
}

/// The annotation that sets one Job pod's completion delay (KWOK's).
pub const POD_COMPLETE_DELAY_ANNOTATION: &str = "pod-complete.stage.kwok.x-k8s.io/delay";

/// KWOK's default delay before a Job's running pod completes.
pub const DEFAULT_JOB_POD_COMPLETION: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the pod is one KWOK's `pod-complete` stage completes: Running and ready, not
/// being deleted, with an owner reference of kind Job.
pub fn completes(pod: &Value) -> bool {
    str_at(pod, "/status/phase") == "Running"
        && condition_true(pod, "Ready")
        && pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| str_at(r, "/kind") == "Job"))
}

/// The pod's completion delay: its annotation's, else `default`.
pub fn completion_delay(pod: &Value, default: std::time::Duration) -> std::time::Duration {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(POD_COMPLETE_DELAY_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(go_duration)
        .unwrap_or(default)
}

/// A Go duration of one unit (`500ms`, `30s`, `2m`, `1h`); None otherwise.
fn go_duration(s: &str) -> Option<std::time::Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    std::time::Duration::try_from_secs_f64(secs).ok()
}

/// A Job's running pod, completed as KWOK's `pod-complete` stage writes it; None when it is
/// not one ([`completes`]).
pub fn completed_pod(pod: &Value) -> Option<Value> {
    if !completes(pod) {
        return None;
    }
    let now = meta::now_rfc3339();
    let mut new = pod.clone();
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let old = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|s| s.get("name") == c.get("name")));
            let started = old
                .and_then(|s| s.pointer("/state/running/startedAt"))
                .cloned()
                .unwrap_or_else(|| json!(now));
            json!({
                "name": c.get("name").cloned().unwrap_or(Value::Null),
                "image": c.get("image").cloned().unwrap_or(Value::Null),
                "imageID": "",
                "containerID": old.and_then(|s| s.get("containerID")).cloned()
                    .unwrap_or_else(|| json!(format!("kubesched://{}", meta::new_uid()))),
                "ready": false,
                "started": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                         "startedAt": started, "finishedAt": now}},
            })
        })
        .collect();
    let status = &mut new["status"];
    status["phase"] = json!("Succeeded");
    status["containerStatuses"] = Value::Array(containers);
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions.iter_mut().filter(|c| {
            matches!(
                c.get("type").and_then(Value::as_str),
                Some("Ready" | "ContainersReady")
            )
        }) {
            c["status"] = json!("False");
            c["reason"] = json!("PodCompleted");
            c["lastTransitionTime"] = json!(now);
        }
    }
    Some(new)
}

/// The claims a pod's volumes name: `persistentVolumeClaim` volumes, and the claim of each
/// generic ephemeral volume (`<pod>-<volume>`).
pub fn pod_claims(pod: &Value) -> Vec<String> {
    let pod_name = str_at(pod, "/metadata/name");
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            if let Some(claim) = v.pointer("/persistentVolumeClaim/claimName") {
                return claim.as_str().map(str::to_string);
            }
            v.get("ephemeral")
                .map(|_| format!("{pod_name}-{}", str_at(v, "/name")))
        })
        .collect()
}

/// Whether a ResourceClaim is allocated and reserved for the pod with `uid` (what a kubelet
/// needs before it prepares the devices and starts the pod).
pub fn claim_reserved_for(claim: &Value, uid: &str) -> bool {
    claim
        .pointer("/status/allocation")
        .is_some_and(|a| !a.is_null())
        && claim
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .is_some_and(|r| {
                r.iter()
                    .any(|c| str_at(c, "/resource") == "pods" && str_at(c, "/uid") == uid)
            })
}

/// Whether a claim is bound to a volume (what a kubelet needs before it mounts it).
pub fn claim_bound(claim: &Value) -> bool {
    str_at(claim, "/status/phase") == "Bound" && !str_at(claim, "/spec/volumeName").is_empty()
}

struct Kubelets {
    store: Arc<Store>,
    pods: &'static ResourceInfo,
    nodes: &'static ResourceInfo,
    claims: &'static ResourceInfo,
    resource_claims: &'static ResourceInfo,
    next_ip: AtomicU32,
    /// Pods waiting for a claim, by the claim's (namespace, name): a claim's event looks up
    /// its pods here rather than listing the namespace's pods.
    waiting: Mutex<HashMap<(String, String), HashSet<String>>>,
    /// Pods waiting for a ResourceClaim to be allocated and reserved for them, likewise.
    waiting_devices: Mutex<HashMap<(String, String), HashSet<String>>>,
    /// The delay before a Job's running pod completes.
    job_pod_completion: std::time::Duration,
    /// Job pods to complete, by when: (due, namespace, name, uid).
    completing: Mutex<BTreeSet<(Instant, String, String, String)>>,
    /// The uids in `completing`, so that a pod's later events do not push it back.
    scheduled: Mutex<HashSet<String>>,
}

impl Kubelets {
    fn node(&self, node: &Value) {
        let name = str_at(node, "/metadata/name").to_string();
        if ready_node(node).is_none() {
            return;
        }
        let r = self.store.update(self.nodes, "", &name, false, |cur| {
            Ok(ready_node(cur).unwrap_or_else(|| cur.clone()))
        });
        if let Err(e) = r {
            tracing::debug!(node = %name, error = %e.message, "kubelet stand-in: node not updated");
        }
    }

    fn pod(&self, pod: &Value) {
        if terminating(pod) {
            self.finish_deletion(pod);
            return;
        }
        if completes(pod) {
            self.schedule_completion(pod);
            return;
        }
        let node = str_at(pod, "/spec/nodeName");
        if running_pod(pod, "", "").is_none()
            || !self.volumes_bound(pod)
            || !self.devices_ready(pod)
        {
            return;
        }
        let host_ip = self
            .store
            .get(self.nodes, "", node)
            .and_then(|n| {
                n.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .find(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
                            .and_then(|a| a.get("address").and_then(Value::as_str))
                            .map(str::to_string)
                    })
            })
            .unwrap_or_default();
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        let pod_ip = format!("10.244.{}.{}", (n / 250) % 256, n % 250 + 2);
        let (ns, name) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
        );
        let r = self.store.update(self.pods, ns, name, false, |cur| {
            Ok(running_pod(cur, &host_ip, &pod_ip).unwrap_or_else(|| cur.clone()))
        });
        if let Err(e) = r {
            tracing::debug!(pod = %name, error = %e.message, "kubelet stand-in: pod not updated");
        }
    }
}

impl Kubelets {
    /// Whether every claim of the pod is Bound; the pod is recorded as waiting for each one
    /// that is not.
    fn volumes_bound(&self, pod: &Value) -> bool {
        let (ns, name) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
        );
        let unbound: Vec<String> = pod_claims(pod)
            .into_iter()
            .filter(|c| {
                !self
                    .store
                    .get(self.claims, ns, c)
                    .is_some_and(|c| claim_bound(&c))
            })
            .collect();
        if unbound.is_empty() {
            return true;
        }
        if let Ok(mut waiting) = self.waiting.lock() {
            for c in unbound {
                waiting
                    .entry((ns.to_string(), c))
                    .or_default()
                    .insert(name.to_string());
            }
        }
        false
    }

    /// Whether every ResourceClaim of the pod is allocated and reserved for it; the pod is
    /// recorded as waiting for each one that is not. A claim still to be made from a
    /// template is waited for through the pod's own update that records it.
    fn devices_ready(&self, pod: &Value) -> bool {
        let (ns, name, uid) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
            str_at(pod, "/metadata/uid"),
        );
        let mut ready = true;
        let mut unready = Vec::new();
        for entry in pod
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(claim) = crate::resourceclaim::claim_name(pod, entry) else {
                ready = false;
                continue;
            };
            let reserved = self
                .store
                .get(self.resource_claims, ns, &claim)
                .is_some_and(|c| claim_reserved_for(&c, uid));
            if !reserved {
                unready.push(claim);
            }
        }
        let extended = str_at(pod, "/status/extendedResourceClaimStatus/resourceClaimName");
        if !extended.is_empty()
            && !self
                .store
                .get(self.resource_claims, ns, extended)
                .is_some_and(|c| claim_reserved_for(&c, uid))
        {
            unready.push(extended.to_string());
        }
        if unready.is_empty() {
            return ready;
        }
        if let Ok(mut waiting) = self.waiting_devices.lock() {
            for c in unready {
                waiting
                    .entry((ns.to_string(), c))
                    .or_default()
                    .insert(name.to_string());
            }
        }
        false
    }

    /// A ResourceClaim changed: the pods waiting for it are looked at again.
    fn resource_claim(&self, claim: &Value) {
        let ns = str_at(claim, "/metadata/namespace");
        let key = (ns.to_string(), str_at(claim, "/metadata/name").to_string());
        let pods = match self.waiting_devices.lock() {
            Ok(mut waiting) => waiting.remove(&key).unwrap_or_default(),
            Err(_) => return,
        };
        for name in pods {
            if let Some(pod) = self.store.get(self.pods, ns, &name) {
                self.pod(&pod);
            }
        }
    }

    /// A claim became Bound: the pods waiting for it are looked at again.
    fn claim(&self, claim: &Value) {
        if !claim_bound(claim) {
            return;
        }
        let ns = str_at(claim, "/metadata/namespace");
        let key = (ns.to_string(), str_at(claim, "/metadata/name").to_string());
        let pods = match self.waiting.lock() {
            Ok(mut waiting) => waiting.remove(&key).unwrap_or_default(),
            Err(_) => return,
        };
        for name in pods {
            if let Some(pod) = self.store.get(self.pods, ns, &name) {
                self.pod(&pod);
            }
        }
    }
}

impl Kubelets {
    fn schedule_completion(&self, pod: &Value) {
        let uid = str_at(pod, "/metadata/uid").to_string();
        let Ok(mut scheduled) = self.scheduled.lock() else {
            return;
        };
        if !scheduled.insert(uid.clone()) {
            return;
        }
        let due = Instant::now() + completion_delay(pod, self.job_pod_completion);
        if let Ok(mut completing) = self.completing.lock() {
            completing.insert((
                due,
                str_at(pod, "/metadata/namespace").to_string(),
                str_at(pod, "/metadata/name").to_string(),
                uid,
            ));
        }
    }

    /// When the next Job pod is due to complete.
    fn next_completion(&self) -> Option<Instant> {
        self.completing
            .lock()
            .ok()
            .and_then(|c| c.first().map(|(at, ..)| *at))
    }

    /// Completes the Job pods that are due.
    fn complete_due(&self) {
        let now = Instant::now();
        let due: Vec<(Instant, String, String, String)> = match self.completing.lock() {
            Ok(mut c) => {
                let later = c.split_off(&(now, String::new(), String::new(), String::new()));
                std::mem::replace(&mut *c, later).into_iter().collect()
            }
            Err(_) => return,
        };
        for (_, ns, name, uid) in due {
            if let Ok(mut scheduled) = self.scheduled.lock() {
                scheduled.remove(&uid);
            }
            let r = self.store.update(self.pods, &ns, &name, false, |cur| {
                if str_at(cur, "/metadata/uid") != uid {
                    return Ok(cur.clone());
                }
                Ok(completed_pod(cur).unwrap_or_else(|| cur.clone()))
            });
            if let Err(e) = r {
                tracing::debug!(pod = %name, error = %e.message, "kubelet stand-in: pod not completed");
            }
        }
    }
}

/// A pod a kubelet has to stop: bound, marked for deletion with some grace period left.
pub fn terminating(pod: &Value) -> bool {
    !str_at(pod, "/spec/nodeName").is_empty()
        && pod.pointer("/metadata/deletionTimestamp").is_some()
        && pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|g| g > 0)
}

impl Kubelets {
    /// Deletes a terminating pod with grace period 0 (the uid precondition keeps a pod
    /// recreated under the same name safe).
    fn finish_deletion(&self, pod: &Value) {
        let (ns, name, uid) = (
            str_at(pod, "/metadata/namespace"),
            str_at(pod, "/metadata/name"),
            str_at(pod, "/metadata/uid"),
        );
        let opts = DeleteOptions {
            uid: Some(uid),
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        if let Err(e) = self.store.delete(self.pods, ns, name, opts) {
            tracing::debug!(pod = %name, error = %e.message, "kubelet stand-in: pod not deleted");
        }
    }
}

/// Runs the kubelet stand-in until the store's event stream closes; a Job's running pods
/// complete after `job_pod_completion`.
pub async fn run(store: Arc<Store>, job_pod_completion: std::time::Duration) {
    let (Some(pods), Some(nodes), Some(claims), Some(resource_claims)) = (
        resources::lookup("", "v1", "pods"),
        resources::lookup("", "v1", "nodes"),
        resources::lookup("", "v1", "persistentvolumeclaims"),
        resources::lookup("resource.k8s.io", "v1", "resourceclaims"),
    ) else {
        return;
    };
    let k = Kubelets {
        store,
        pods,
        nodes,
        claims,
        resource_claims,
        next_ip: AtomicU32::new(0),
        waiting: Mutex::new(HashMap::new()),
        waiting_devices: Mutex::new(HashMap::new()),
        job_pod_completion,
        completing: Mutex::new(BTreeSet::new()),
        scheduled: Mutex::new(HashSet::new()),
    };
    loop {
        // Subscribe first, then list: nothing written in between is missed.
        let Ok(start) = k.store.watch_also(
            pods.storage,
            None,
            &[nodes.storage, claims.storage, resource_claims.storage],
        ) else {
            return;
        };
        let mut live = start.live;
        for n in k.store.list(nodes, None).0 {
            k.node(&n);
        }
        for p in &start.initial {
            k.pod(&crate::store::decode(p));
        }
        loop {
            let next = k.next_completion();
            let ev = tokio::select! {
                ev = live.recv() => ev,
                () = crate::controller::sleep_until(next) => {
                    k.complete_due();
                    continue;
                }
            };
            match ev {
                Ok(ev) if ev.kind == EventType::Deleted => {}
                Ok(ev) if ev.storage == pods.storage => k.pod(&ev.object()),
                Ok(ev) if ev.storage == nodes.storage => k.node(&ev.object()),
                Ok(ev) if ev.storage == claims.storage => k.claim(&ev.object()),
                Ok(ev) if ev.storage == resource_claims.storage => {
                    k.resource_claim(&ev.object());
                }
                Ok(_) => {}
                // Fell behind: relist.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_pending_pod_becomes_running_and_ready_once() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
            "containers": [{"name": "c", "image": "nginx"}]}, "status": {"phase": "Pending"}});
        let running = running_pod(&pod, "10.0.0.1", "10.244.0.2").expect("transition");
        assert_eq!(running.pointer("/status/phase"), Some(&json!("Running")));
        assert!(condition_true(&running, "Ready"));
        assert_eq!(
            running.pointer("/status/containerStatuses/0/ready"),
            Some(&json!(true))
        );
        assert_eq!(running.pointer("/status/hostIP"), Some(&json!("10.0.0.1")));
        assert!(running_pod(&running, "", "").is_none());
        let unbound = json!({"spec": {"containers": []}, "status": {"phase": "Pending"}});
        assert!(running_pod(&unbound, "", "").is_none());
    }

    /// A condition written by someone else between the binding and the kubelet's start of the
    /// pod (the scheduler marking a preemption victim) survives the pod becoming Running.
    #[test]
    fn running_keeps_conditions_the_kubelet_does_not_own() {
        let disruption = json!({"type": "DisruptionTarget", "status": "True",
            "reason": "PreemptionByScheduler", "message": "default-scheduler: preempting"});
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
            "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"}, disruption.clone()]}});
        let running = running_pod(&pod, "", "").expect("transition");
        let types: Vec<&str> = running
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("type").and_then(Value::as_str))
            .collect();
        assert_eq!(
            (types, running.pointer("/status/conditions/0")),
            (
                vec![
                    "DisruptionTarget",
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled"
                ],
                Some(&disruption)
            )
        );
    }

    #[test]
    fn a_pods_claims_are_its_claim_volumes_and_ephemeral_volumes() {
        let pod = json!({"metadata": {"name": "web"}, "spec": {"volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "b", "emptyDir": {}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}});
        assert_eq!(pod_claims(&pod), ["data", "web-scratch"]);
        let claim = |phase: &str, volume: &str| json!({"spec": {"volumeName": volume}, "status": {"phase": phase}});
        assert_eq!(
            [
                claim_bound(&claim("Bound", "pv")),
                claim_bound(&claim("Pending", "")),
                claim_bound(&claim("Lost", "pv")),
            ],
            [true, false, false]
        );
    }

    #[test]
    fn only_bound_pods_with_grace_left_are_terminating() {
        let pod = |node: &str, meta: Value| json!({"metadata": meta, "spec": {"nodeName": node}});
        let marked =
            json!({"deletionTimestamp": "2026-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30});
        let no_grace =
            json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0});
        assert_eq!(
            [
                terminating(&pod("n", marked.clone())),
                terminating(&pod("", marked)),
                terminating(&pod("n", no_grace)),
                terminating(&pod("n", json!({}))),
            ],
            [true, false, false, false]
        );
    }

    fn job_pod(phase: &str, ready: &str, owner: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": "p", "annotations": annotations,
                            "ownerReferences": [{"kind": owner, "name": "j"}]},
               "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "busybox"}]},
               "status": {"phase": phase, "conditions": [
                   {"type": "Ready", "status": ready},
                   {"type": "ContainersReady", "status": ready},
                   {"type": "PodScheduled", "status": "True"}],
                   "containerStatuses": [{"name": "c", "containerID": "kubesched://1",
                       "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})
    }

    #[test]
    fn a_running_job_pod_completes_as_kwoks_pod_complete_stage_writes_it() {
        let done =
            completed_pod(&job_pod("Running", "True", "Job", json!({}))).expect("transition");
        let mut status = done.get("status").cloned().unwrap_or_default();
        for p in [
            "/conditions/0/lastTransitionTime",
            "/conditions/1/lastTransitionTime",
            "/containerStatuses/0/state/terminated/finishedAt",
        ] {
            if let Some(t) = status.pointer_mut(p) {
                *t = json!("NOW");
            }
        }
        assert_eq!(
            status,
            json!({"phase": "Succeeded", "conditions": [
                {"type": "Ready", "status": "False", "reason": "PodCompleted",
                 "lastTransitionTime": "NOW"},
                {"type": "ContainersReady", "status": "False", "reason": "PodCompleted",
                 "lastTransitionTime": "NOW"},
                {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "",
                    "containerID": "kubesched://1", "ready": false, "started": false,
                    "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                        "reason": "Completed", "startedAt": "2026-01-01T00:00:00Z",
                        "finishedAt": "NOW"}}}]})
        );
        assert!(completed_pod(&done).is_none());
    }

    #[test]
    fn only_running_ready_pods_a_job_owns_complete() {
        assert_eq!(
            [
                completes(&job_pod("Running", "True", "Job", json!({}))),
                completes(&job_pod("Running", "True", "ReplicaSet", json!({}))),
                completes(&job_pod("Running", "False", "Job", json!({}))),
                completes(&job_pod("Pending", "True", "Job", json!({}))),
            ],
            [true, false, false, false]
        );
    }

    #[test]
    fn kwoks_delay_annotation_sets_one_pods_completion_delay() {
        let default = std::time::Duration::from_secs(1);
        let delay = |a: &str| {
            completion_delay(
                &job_pod(
                    "Running",
                    "True",
                    "Job",
                    json!({POD_COMPLETE_DELAY_ANNOTATION: a}),
                ),
                default,
            )
        };
        assert_eq!(
            [delay("30s"), delay("500ms"), delay("2m"), delay("soon")],
            [
                std::time::Duration::from_secs(30),
                std::time::Duration::from_millis(500),
                std::time::Duration::from_secs(120),
                default
            ]
        );
        assert_eq!(
            completion_delay(&job_pod("Running", "True", "Job", json!({})), default),
            default
        );
    }

    #[test]
    fn a_node_becomes_ready_once() {
        let node = json!({"metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let ready = ready_node(&node).expect("transition");
        assert!(condition_true(&ready, "Ready"));
        assert_eq!(
            ready
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .map(Vec::len),
            Some(4)
        );
        assert!(ready_node(&ready).is_none());
    }
}

//! The resourceclaim controller stand-in: ResourceClaims made from a pod's
//! ResourceClaimTemplates, and claims released when their pods are done, as
//! kube-controller-manager's does. On under `up` and `--simulate-kubelets`.
//!
//! - For each `spec.resourceClaims[]` entry of a pod (not being deleted) that names a
//!   `resourceClaimTemplateName` and has no claim yet, a claim is created from the
//!   template: `generateName: <pod>-<entry>-`, the template's labels and annotations plus
//!   `resource.kubernetes.io/pod-claim-name: <entry>`, an owner reference to the pod with
//!   `controller` and `blockOwnerDeletion`, and the template's `spec.spec`. The claim's name
//!   is recorded in the pod's `status.resourceClaimStatuses`. A claim already made for the
//!   entry (an earlier write that the status did not get) is found by its annotation and
//!   owner and used again. A missing template is a `FailedResourceClaimCreation` Warning
//!   Event on the pod; the pod is looked at again when a template appears in its namespace.
//! - For each claim: entries of `status.reservedFor` naming a pod that is gone (or was
//!   replaced: another uid) or done (Succeeded, Failed, or deleted before it was scheduled)
//!   are removed. When that leaves nobody and the claim carries the
//!   `resource.kubernetes.io/delete-protection` finalizer the scheduler adds before it
//!   allocates, the allocation is cleared too (deallocation) and the finalizer removed; a
//!   claim without it keeps its allocation. A claim being deleted and reserved for nobody is
//!   deallocated and loses that finalizer, so that it goes only once deallocated (the
//!   garbage collector deleting a generated claim with its pod included).
//! - A claim generated for a pod, reserved for nobody, whose pod is done or was replaced, is
//!   deleted; a claim whose pod is gone is left to the garbage collector (through its owner
//!   reference).
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::create`], [`Store::update`] and [`Store::delete`], as a client would.
//!
//! Upstream: pkg/controller/resourceclaim/controller.go (syncPod, handleClaim, syncClaim,
//! isPodDone) and staging/src/k8s.io/dynamic-resource-allocation/resourceclaim (Name).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::store::RecvError;
use serde_json::{json, Map, Value};

use crate::controller::{controller_ref, owner_reference};
use crate::pv_controller::str_at;
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store};

/// The Events' `source.component`, as upstream's controller names itself.
pub const COMPONENT: &str = "resource_claim";

/// The annotation on a generated claim naming the pod's `spec.resourceClaims[]` entry.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The finalizer the scheduler puts on a claim it allocates, so that the claim is not
/// removed while allocated.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// Longest `generateName` before it is shortened (room for five random characters in a
/// 63-character name).
const MAX_GENERATE_NAME: usize = 57;

/// Whether a pod will not run (again): Succeeded or Failed, or deleted before it was
/// scheduled (upstream's isPodDone).
pub fn is_pod_done(pod: &Value) -> bool {
    matches!(str_at(pod, "/status/phase"), "Succeeded" | "Failed")
        || (pod.pointer("/metadata/deletionTimestamp").is_some()
            && str_at(pod, "/spec/nodeName").is_empty())
}

/// The `generateName` of the claim for pod `pod` and entry `claim`: `<pod>-<claim>-`,
/// both parts shortened in proportion when that is longer than 57 characters.
pub fn generate_name(pod: &str, claim: &str) -> String {
    let whole = format!("{pod}-{claim}-");
    if whole.len() <= MAX_GENERATE_NAME {
        return whole;
    }
    // Names are DNS labels and subdomains (ASCII), so byte cuts are character cuts.
    let cut = |s: &str| {
        let keep = s.len() * MAX_GENERATE_NAME / whole.len();
        s.get(..keep).unwrap_or(s).to_string()
    };
    format!("{}-{}", cut(pod), cut(claim))
}

/// The claim a pod's `spec.resourceClaims[]` entry names: its `resourceClaimName`, or for a
/// template the claim recorded in the pod's `status.resourceClaimStatuses` (`None` until
/// the controller made it).
pub fn claim_name(pod: &Value, entry: &Value) -> Option<String> {
    if let Some(name) = entry.get("resourceClaimName").and_then(Value::as_str) {
        return Some(name.to_string());
    }
    let entry_name = str_at(entry, "/name");
    pod.pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| str_at(s, "/name") == entry_name)
        .and_then(|s| s.get("resourceClaimName"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The claims a pod uses (those known so far).
pub fn pod_claim_names(pod: &Value) -> Vec<String> {
    pod.pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| claim_name(pod, e))
        .collect()
}

/// The claim made from `template` for entry `entry` of `pod`.
pub fn claim_from_template(pod: &Value, entry: &str, template: &Value) -> Value {
    let mut annotations = template
        .pointer("/spec/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), json!(entry));
    let mut metadata = Map::new();
    metadata.insert(
        "generateName".into(),
        json!(generate_name(str_at(pod, "/metadata/name"), entry)),
    );
    metadata.insert(
        "ownerReferences".into(),
        json!([owner_reference(pod, "v1", "Pod")]),
    );
    metadata.insert("annotations".into(), Value::Object(annotations));
    if let Some(labels) = template
        .pointer("/spec/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
    {
        metadata.insert("labels".into(), labels.clone());
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": metadata,
           "spec": template.pointer("/spec/spec").cloned().unwrap_or_else(|| json!({}))})
}

/// The pod a claim was generated for: its controller reference to a Pod (name, uid).
fn owning_pod(claim: &Value) -> Option<(&str, &str)> {
    let r = controller_ref(claim)?;
    (str_at(r, "/kind") == "Pod" && str_at(r, "/apiVersion") == "v1")
        .then(|| (str_at(r, "/name"), str_at(r, "/uid")))
}

struct ResourceClaimController {
    store: Arc<Store>,
    pods: &'static ResourceInfo,
    claims: &'static ResourceInfo,
    templates: &'static ResourceInfo,
    recorder: Recorder,
}

impl ResourceClaimController {
    /// Creates the claims a pod's templates ask for and records them in its status.
    fn sync_pod(&self, pod: &Value) {
        if pod.pointer("/metadata/deletionTimestamp").is_some() || is_pod_done(pod) {
            return;
        }
        let ns = str_at(pod, "/metadata/namespace");
        let entries = pod
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut made: Vec<(String, String)> = Vec::new();
        for entry in &entries {
            let entry_name = str_at(entry, "/name");
            let template_name = str_at(entry, "/resourceClaimTemplateName");
            if template_name.is_empty() || claim_name(pod, entry).is_some() {
                continue;
            }
            match self.claim_for(pod, ns, entry_name, template_name) {
                Ok(claim) => made.push((entry_name.to_string(), claim)),
                Err(why) => {
                    self.recorder.event(
                        pod,
                        "Pod",
                        "Warning",
                        "FailedResourceClaimCreation",
                        &format!("PodResourceClaim {entry_name}: {why}"),
                    );
                    break;
                }
            }
        }
        if made.is_empty() {
            return;
        }
        let (name, uid) = (str_at(pod, "/metadata/name"), str_at(pod, "/metadata/uid"));
        let written = self.store.update(self.pods, ns, name, false, |cur| {
            if str_at(cur, "/metadata/uid") != uid {
                return Err(crate::status::ApiError::conflict(
                    self.pods,
                    name,
                    "the object was recreated",
                ));
            }
            let mut new = cur.clone();
            let mut statuses = cur
                .pointer("/status/resourceClaimStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (entry, claim) in &made {
                statuses.retain(|s| str_at(s, "/name") != entry);
                statuses.push(json!({"name": entry, "resourceClaimName": claim}));
            }
            if !new.get("status").is_some_and(Value::is_object) {
                new["status"] = json!({});
            }
            new["status"]["resourceClaimStatuses"] = Value::Array(statuses);
            Ok(new)
        });
        if let Err(e) = written {
            tracing::debug!(pod = %name, error = %e.message,
                "resourceclaim controller: pod status not written");
        }
    }

    /// The claim for one template entry: one made earlier for it, or a new one.
    fn claim_for(
        &self,
        pod: &Value,
        ns: &str,
        entry: &str,
        template_name: &str,
    ) -> Result<String, String> {
        let uid = str_at(pod, "/metadata/uid");
        let existing = self
            .store
            .list(self.claims, Some(ns))
            .0
            .into_iter()
            .find(|c| {
                owning_pod(c).is_some_and(|(_, u)| u == uid)
                    && c.pointer("/metadata/annotations")
                        .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
                        .and_then(Value::as_str)
                        == Some(entry)
            });
        if let Some(c) = existing {
            return Ok(str_at(&c, "/metadata/name").to_string());
        }
        let template = self
            .store
            .get(self.templates, ns, template_name)
            .ok_or_else(|| {
                format!(
                    "resource claim template {template_name:?}: resourceclaimtemplates.resource.k8s.io {template_name:?} not found"
                )
            })?;
        let mut claim = claim_from_template(pod, entry, &template);
        crate::resource_validation::set_defaults("ResourceClaim", &mut claim);
        let created = self
            .store
            .create(self.claims, ns, claim, false)
            .map_err(|e| format!("create ResourceClaim {entry}: {}", e.message))?;
        Ok(str_at(&created, "/metadata/name").to_string())
    }

    /// Releases a claim from pods that are gone or done, deallocates it when that leaves
    /// nobody, and deletes a generated claim its pod will not use.
    fn sync_claim(&self, ns: &str, name: &str) {
        let Some(claim) = self.store.get(self.claims, ns, name) else {
            return;
        };
        let reserved = claim
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let valid: Vec<Value> = reserved
            .iter()
            .filter(|r| {
                // Only pods are understood as consumers; others are kept as they are.
                if str_at(r, "/resource") != "pods" || !str_at(r, "/apiGroup").is_empty() {
                    return true;
                }
                self.store
                    .get(self.pods, ns, str_at(r, "/name"))
                    .is_some_and(|p| {
                        str_at(&p, "/metadata/uid") == str_at(r, "/uid") && !is_pod_done(&p)
                    })
            })
            .cloned()
            .collect();
        let has_finalizer = claim
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == DELETE_PROTECTION_FINALIZER));
        let deleting = claim.pointer("/metadata/deletionTimestamp").is_some();
        let uid = str_at(&claim, "/metadata/uid").to_string();
        if valid.len() < reserved.len() || (valid.is_empty() && deleting && has_finalizer) {
            // Only what the scheduler allocated (it adds the finalizer first) is deallocated;
            // an allocation written by someone else stays when its last consumer goes.
            let deallocate = valid.is_empty() && has_finalizer;
            let allocated = claim.pointer("/status/allocation").is_some();
            // The status and the finalizer are two writes, as upstream's controller makes
            // them: watchers see the claim deallocated before the finalizer goes, which for
            // a claim being deleted is its removal (a DELETED event, no update).
            if valid.len() < reserved.len() || (deallocate && allocated) {
                let written = self.store.update(self.claims, ns, name, false, |cur| {
                    if str_at(cur, "/metadata/uid") != uid {
                        return Ok(cur.clone());
                    }
                    let mut new = cur.clone();
                    if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
                        if valid.is_empty() {
                            status.remove("reservedFor");
                        } else {
                            status.insert("reservedFor".into(), Value::Array(valid.clone()));
                        }
                        if deallocate {
                            status.remove("allocation");
                        }
                    }
                    Ok(new)
                });
                if let Err(e) = written {
                    tracing::debug!(claim = %name, error = %e.message,
                        "resourceclaim controller: claim status not written");
                    return;
                }
            }
            if deallocate {
                let written = self.store.update(self.claims, ns, name, false, |cur| {
                    // Another claim by that name, or one allocated again meanwhile, keeps it.
                    if str_at(cur, "/metadata/uid") != uid
                        || cur.pointer("/status/allocation").is_some()
                    {
                        return Ok(cur.clone());
                    }
                    let mut new = cur.clone();
                    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        let left: Vec<Value> = m
                            .get("finalizers")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter(|x| *x != DELETE_PROTECTION_FINALIZER)
                            .cloned()
                            .collect();
                        if left.is_empty() {
                            m.remove("finalizers");
                        } else {
                            m.insert("finalizers".into(), Value::Array(left));
                        }
                    }
                    Ok(new)
                });
                if let Err(e) = written {
                    tracing::debug!(claim = %name, error = %e.message,
                        "resourceclaim controller: finalizer not removed");
                    return;
                }
            }
        }
        if !valid.is_empty() || deleting {
            return;
        }
        let Some((pod_name, pod_uid)) = owning_pod(&claim) else {
            return;
        };
        let Some(pod) = self.store.get(self.pods, ns, pod_name) else {
            return;
        };
        if str_at(&pod, "/metadata/uid") != pod_uid || is_pod_done(&pod) {
            let opts = DeleteOptions {
                uid: Some(&uid),
                ..DeleteOptions::default()
            };
            if let Err(e) = self.store.delete(self.claims, ns, name, opts) {
                tracing::debug!(claim = %name, error = %e.message,
                    "resourceclaim controller: unused claim not deleted");
            }
        }
    }

    /// The claims a pod's change concerns: those it names and those reserved for it.
    fn claims_of_pod(&self, pod: &Value) -> BTreeSet<String> {
        // Most pods use no claims: their events cost no look at the claims.
        if pod
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            return BTreeSet::new();
        }
        let ns = str_at(pod, "/metadata/namespace");
        let uid = str_at(pod, "/metadata/uid");
        let mut names: BTreeSet<String> = pod_claim_names(pod).into_iter().collect();
        // Claims generated for it that its status does not name yet.
        for c in self.store.list(self.claims, Some(ns)).0 {
            if owning_pod(&c).is_some_and(|(_, u)| u == uid) {
                names.insert(str_at(&c, "/metadata/name").to_string());
            }
        }
        names
    }

    fn resync(&self) {
        for pod in self.store.list(self.pods, None).0 {
            self.sync_pod(&pod);
        }
        for claim in self.store.list(self.claims, None).0 {
            self.sync_claim(
                str_at(&claim, "/metadata/namespace"),
                str_at(&claim, "/metadata/name"),
            );
        }
    }
}

/// Runs the resourceclaim controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (Some(pods), Some(claims), Some(templates)) = (
        resources::lookup("", "v1", "pods"),
        resources::lookup("resource.k8s.io", "v1", "resourceclaims"),
        resources::lookup("resource.k8s.io", "v1", "resourceclaimtemplates"),
    ) else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let c = ResourceClaimController {
        store,
        pods,
        claims,
        templates,
        recorder,
    };
    loop {
        // Subscribe first, then look at everything: nothing written in between is missed.
        let Ok(start) =
            c.store
                .watch_also(pods.storage, None, &[claims.storage, templates.storage])
        else {
            return;
        };
        let mut live = start.live;
        c.resync();
        loop {
            let ev = match live.recv().await {
                Ok(ev) => ev,
                // Fell behind: look at everything again.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            };
            if ![pods.storage, claims.storage, templates.storage].contains(&ev.storage) {
                continue;
            }
            let obj = ev.object();
            let ns = str_at(&obj, "/metadata/namespace");
            if ev.storage == pods.storage {
                // Most pods use no claims: their events cost nothing more here.
                let uses_claims = obj
                    .pointer("/spec/resourceClaims")
                    .and_then(Value::as_array)
                    .is_some_and(|c| !c.is_empty());
                if !uses_claims {
                    continue;
                }
                if ev.kind != EventType::Deleted {
                    if let Some(pod) = c.store.get(pods, ns, str_at(&obj, "/metadata/name")) {
                        c.sync_pod(&pod);
                    }
                }
                for claim in c.claims_of_pod(&obj) {
                    c.sync_claim(ns, &claim);
                }
            } else if ev.storage == claims.storage && ev.kind != EventType::Deleted {
                c.sync_claim(ns, str_at(&obj, "/metadata/name"));
            } else if ev.storage == templates.storage && ev.kind == EventType::Added {
                // Pods waiting for this template get their claims now.
                let template = str_at(&obj, "/metadata/name");
                for pod in c.store.list(pods, Some(ns)).0 {
                    let wants = pod
                        .pointer("/spec/resourceClaims")
                        .and_then(Value::as_array)
                        .is_some_and(|es| {
                            es.iter()
                                .any(|e| str_at(e, "/resourceClaimTemplateName") == template)
                        });
                    if wants {
                        c.sync_pod(&pod);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::short("web-0", "gpu", "web-0-gpu-")]
    #[case::shortened_in_proportion(
        "a-very-long-pod-name-from-a-statefulset-0",
        "a-rather-long-claim-name",
        "a-very-long-pod-name-from-a-statef-a-rather-long-claim-"
    )]
    fn generated_claim_names(#[case] pod: &str, #[case] claim: &str, #[case] want: &str) {
        assert_eq!(generate_name(pod, claim), want);
    }

    fn pod(phase: &str, deleting: bool, node: &str) -> Value {
        let mut p = json!({"metadata": {"name": "p", "uid": "u"}, "spec": {"nodeName": node},
                           "status": {"phase": phase}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        p
    }

    #[rstest]
    #[case::running(pod("Running", false, "n1"), false)]
    #[case::succeeded(pod("Succeeded", false, "n1"), true)]
    #[case::failed(pod("Failed", false, "n1"), true)]
    #[case::deleted_before_scheduling(pod("Pending", true, ""), true)]
    #[case::terminating_on_a_node(pod("Running", true, "n1"), false)]
    fn pods_done_as_upstream_judges(#[case] pod: Value, #[case] done: bool) {
        assert_eq!(is_pod_done(&pod), done);
    }

    #[test]
    fn claim_from_template_carries_owner_annotation_labels_and_spec() {
        let pod = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1"}});
        let template = json!({"metadata": {"name": "two-gpus"},
            "spec": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                     "spec": {"devices": {"requests": [{"name": "gpu",
                              "exactly": {"deviceClassName": "gpu.example.com"}}]}}}});
        assert_eq!(
            claim_from_template(&pod, "gpus", &template),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"generateName": "web-gpus-",
                                "labels": {"app": "web"},
                                "annotations": {"a": "b", POD_CLAIM_NAME_ANNOTATION: "gpus"},
                                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                    "name": "web", "uid": "u1", "controller": true,
                                    "blockOwnerDeletion": true}]},
                   "spec": {"devices": {"requests": [{"name": "gpu",
                            "exactly": {"deviceClassName": "gpu.example.com"}}]}}})
        );
    }
}

//! The Deployment controller stand-in: rolls each apps/v1 Deployment out through
//! ReplicaSets and writes its status, as kube-controller-manager's does. On under `up` and
//! `--simulate-kubelets`.
//!
//! For each Deployment: ReplicaSets whose controller reference carries its uid are its own;
//! an orphan its selector selects is adopted and an own one it no longer selects released.
//! The new ReplicaSet is the oldest own one whose template equals the Deployment's (the
//! `pod-template-hash` label aside); when there is none it is made as
//! `<deployment>-<hash>` with that label on its template, labels and selector, the
//! Deployment's annotations, `deployment.kubernetes.io/revision` one past the highest old
//! revision, and `desired-replicas`/`max-replicas`. The others are old ReplicaSets. A
//! rollback (`kubectl rollout undo` patches the Deployment's template back to an old
//! ReplicaSet's) makes that ReplicaSet the new one again, under a new revision; its former
//! revisions are kept in `deployment.kubernetes.io/revision-history`.
//!
//! - RollingUpdate: the new ReplicaSet is scaled up while all ReplicaSets' replicas stay
//!   within `replicas + maxSurge`, and old ones are scaled down (unhealthy ones first, oldest
//!   first) while available pods stay at `replicas - maxUnavailable` or more; percentages
//!   round up for the surge and down for unavailability, and when both come to 0 one pod may
//!   be unavailable.
//! - Recreate: old ReplicaSets are scaled to 0 and, once their pods are gone, the new one is
//!   made (or scaled) at `replicas`.
//! - A change of `spec.replicas` alone (or a paused Deployment) is a scaling event: the only
//!   active ReplicaSet takes the new size, or during a rollout the difference is spread over
//!   the active ReplicaSets in proportion to their sizes.
//! - Old ReplicaSets with no replicas beyond `revisionHistoryLimit` are deleted, lowest
//!   revision first.
//!
//! Status: `replicas`, `updatedReplicas` (the new ReplicaSet's), `readyReplicas`,
//! `availableReplicas`, `unavailableReplicas`, `observedGeneration`, `collisionCount`, and
//! the conditions `Available` (`MinimumReplicasAvailable`/`MinimumReplicasUnavailable`) and
//! `Progressing` (`NewReplicaSetCreated`, `FoundNewReplicaSet`, `ReplicaSetUpdated`,
//! `NewReplicaSetAvailable`, `ProgressDeadlineExceeded`) with upstream's messages. Each
//! scaling is an Event `ScalingReplicaSet` from `deployment-controller`.
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::create`], [`Store::update`] and [`Store::delete`], as a client would; the
//! ReplicaSet controller ([`crate::replicaset`]) makes the pods and reports their readiness.
//! **Invariant:** the store is read at each sync and every write lands before the next sync
//! reads, so upstream's expectations are not needed here.
//!
//! Where this differs from upstream, on purpose: the template hash is FNV-32a over the
//! template's JSON with its keys sorted (upstream hashes the Go struct's printed form), so
//! the names of ReplicaSets differ from a real cluster's for the same template; they are
//! encoded with the same alphabet and have the same length range.
//!
//! The loop and the writes are here; the arithmetic, hashing, conditions and annotations,
//! pure functions of the objects, are in [`util`].
//!
//! Upstream: pkg/controller/deployment (syncDeployment, rolling.go, recreate.go, sync.go,
//! progress.go) and pkg/controller/deployment/util/deployment_util.go.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::controller::{
    self, controller_ref, key_of, owner_reference, owner_refs, terminating, with_owner_refs, Key,
    Reconcile,
};
use crate::meta;
use crate::pv_controller::str_at;
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::status::ApiError;
use crate::store::{DeleteOptions, EventType, Store, WatchEvent};

pub mod util;

use util::*;

/// The Events' `source.component`, as upstream's controller names itself.
pub const COMPONENT: &str = "deployment-controller";
/// The label that tells the ReplicaSets of one Deployment apart (upstream's
/// DefaultDeploymentUniqueLabelKey).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// A ReplicaSet's revision, and the Deployment's current one.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The revisions a ReplicaSet had before its current one (after rollbacks).
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` when the ReplicaSet was last scaled.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// A sync that failed (a name collision, a refused write) is tried again after this.
const RETRY: Duration = Duration::from_secs(1);

/// A Deployment's ReplicaSets: the new one, if there is one, and the old ones.
#[derive(Debug, Default)]
struct Sets {
    new: Option<Value>,
    old: Vec<Value>,
}

impl Sets {
    fn all(&self) -> Vec<&Value> {
        self.old.iter().chain(self.new.as_ref()).collect()
    }
}

/// Why a sync stopped short; it is tried again after [`RETRY`].
struct Retry;

struct DeploymentController {
    store: Arc<Store>,
    deployments: &'static ResourceInfo,
    replicasets: &'static ResourceInfo,
    pods: &'static ResourceInfo,
    recorder: Recorder,
}

impl DeploymentController {
    fn key_of(obj: &Value) -> Key {
        (
            str_at(obj, "/metadata/namespace").to_string(),
            str_at(obj, "/metadata/name").to_string(),
        )
    }

    /// The Deployments a ReplicaSet's change concerns: its controller if that is a
    /// Deployment, else (an orphan) those in its namespace whose selector selects it.
    fn deployments_of_replicaset(&self, rs: &Value) -> Vec<Key> {
        let ns = str_at(rs, "/metadata/namespace");
        if let Some(r) = controller_ref(rs) {
            if str_at(r, "/kind") == "Deployment" && str_at(r, "/apiVersion") == "apps/v1" {
                return vec![(ns.to_string(), str_at(r, "/name").to_string())];
            }
            return Vec::new();
        }
        self.store
            .list(self.deployments, Some(ns))
            .0
            .iter()
            .filter(|d| selects(d, rs))
            .map(|d| Self::key_of(d))
            .collect()
    }

    /// The Deployment of a deleted pod's ReplicaSet: a Recreate rollout waits for old pods
    /// to be gone.
    fn deployment_of_pod(&self, pod: &Value) -> Option<Key> {
        let r = controller_ref(pod).filter(|r| str_at(r, "/kind") == "ReplicaSet")?;
        let ns = str_at(pod, "/metadata/namespace");
        let rs = self.store.get(self.replicasets, ns, str_at(r, "/name"))?;
        let d = controller_ref(&rs).filter(|r| str_at(r, "/kind") == "Deployment")?;
        Some((ns.to_string(), str_at(d, "/name").to_string()))
    }

    /// Syncs one Deployment; returns when to look at it again.
    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        let stored = self.store.get(self.deployments, ns, name)?;
        let mut d = (*stored).clone();
        let result = self.sync_deployment(&mut d);
        match result {
            Ok(after) => after,
            Err(Retry) => Some(RETRY),
        }
    }

    fn sync_deployment(&self, d: &mut Value) -> Result<Option<Duration>, Retry> {
        let has_selector = d
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty());
        if !has_selector {
            self.recorder.event(
                d,
                "Deployment",
                "Warning",
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            );
            let mut status = status_of(d);
            status.insert(
                "observedGeneration".into(),
                json!(int_at(d, "/metadata/generation")),
            );
            self.write_status(d, status);
            return Ok(None);
        }
        let rs_list = self.claim_replicasets(d);
        if terminating(d) {
            let sets = self.replica_sets_and_sync_revision(d, rs_list, false)?;
            return self.sync_status(d, &sets);
        }
        self.check_paused_conditions(d);
        if d.pointer("/spec/paused").and_then(Value::as_bool) == Some(true) {
            return self.sync_scaling(d, rs_list);
        }
        if self.is_scaling_event(d, &rs_list)? {
            return self.sync_scaling(d, rs_list);
        }
        if is_rolling_update(d) {
            self.rollout_rolling(d, rs_list)
        } else {
            self.rollout_recreate(d, rs_list)
        }
    }

    /// The Deployment's own ReplicaSets, after adopting orphans its selector selects and
    /// releasing own ones it no longer selects (upstream's ClaimReplicaSets).
    fn claim_replicasets(&self, d: &Value) -> Vec<Value> {
        let ns = str_at(d, "/metadata/namespace");
        let uid = str_at(d, "/metadata/uid");
        let mut own = Vec::new();
        for rs in self.store.list(self.replicasets, Some(ns)).0 {
            match controller_ref(&rs).map(|r| str_at(r, "/uid") == uid) {
                Some(true) if selects(d, &rs) => own.push((*rs).clone()),
                Some(true) if !terminating(d) => self.release(&rs, uid),
                None if !terminating(d) && !terminating(&rs) && selects(d, &rs) => {
                    if let Some(adopted) = self.adopt(d, &rs) {
                        own.push((*adopted).clone());
                    }
                }
                _ => {}
            }
        }
        own
    }

    fn adopt(&self, d: &Value, rs: &Value) -> Option<Arc<Value>> {
        let (ns, name) = Self::key_of(rs);
        let uid = str_at(rs, "/metadata/uid");
        self.store
            .update(self.replicasets, &ns, &name, false, |cur| {
                if str_at(cur, "/metadata/uid") != uid || controller_ref(cur).is_some() {
                    return Err(ApiError::conflict(
                        self.replicasets,
                        &name,
                        "the replica set changed",
                    ));
                }
                let mut refs = owner_refs(cur);
                refs.push(owner_reference(d, "apps/v1", "Deployment"));
                Ok(with_owner_refs(cur, refs))
            })
            .ok()
    }

    fn release(&self, rs: &Value, d_uid: &str) {
        let (ns, name) = Self::key_of(rs);
        let released = self
            .store
            .update(self.replicasets, &ns, &name, false, |cur| {
                let refs = owner_refs(cur)
                    .into_iter()
                    .filter(|r| str_at(r, "/uid") != d_uid)
                    .collect();
                Ok(with_owner_refs(cur, refs))
            });
        if let Err(e) = released {
            tracing::debug!(replicaset = %name, error = %e.message,
                "deployment controller: replica set not released");
        }
    }

    /// The paused/resumed `Progressing` condition (upstream's checkPausedConditions); kept
    /// in `d` for the status written at the end of the sync.
    fn check_paused_conditions(&self, d: &mut Value) {
        if !has_progress_deadline(d) {
            return;
        }
        let mut status = status_of(d);
        let cond = get_condition(&status, "Progressing");
        if cond.is_some_and(|c| str_at(c, "/reason") == "ProgressDeadlineExceeded") {
            return;
        }
        let paused_cond = cond.is_some_and(|c| str_at(c, "/reason") == "DeploymentPaused");
        let paused = d.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
        let now = meta::now_rfc3339();
        let new = match (paused, paused_cond) {
            (true, false) => condition(
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused",
                &now,
            ),
            (false, true) => condition(
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed",
                &now,
            ),
            _ => return,
        };
        set_condition(&mut status, new);
        d["status"] = Value::Object(status);
    }

    /// The new ReplicaSet (made when `create` and there is none) and the old ones, with the
    /// revisions synced (upstream's getAllReplicaSetsAndSyncRevision).
    fn replica_sets_and_sync_revision(
        &self,
        d: &mut Value,
        mut rs_list: Vec<Value>,
        create: bool,
    ) -> Result<Sets, Retry> {
        rs_list.sort_by(by_creation);
        let template = d.pointer("/spec/template").cloned();
        let new_at = rs_list
            .iter()
            .position(|rs| equal_ignore_hash(rs.pointer("/spec/template"), template.as_ref()));
        let existing = new_at.map(|i| rs_list.remove(i));
        let old = rs_list;
        let new = self.new_replica_set(d, existing, &old, create)?;
        Ok(Sets { new, old })
    }

    /// Upstream's getNewReplicaSet: syncs an existing new ReplicaSet's annotations, or makes
    /// one.
    fn new_replica_set(
        &self,
        d: &mut Value,
        existing: Option<Value>,
        old: &[Value],
        create: bool,
    ) -> Result<Option<Value>, Retry> {
        let max_old = old.iter().map(revision).max().unwrap_or(0);
        let new_revision = (max_old + 1).to_string();
        let surge = max_surge(d).map_err(|e| self.invalid(d, &e))?;
        let now = meta::now_rfc3339();
        if let Some(rs) = existing {
            let mut copy = rs.clone();
            let annotations_updated =
                set_new_replica_set_annotations(d, &mut copy, &new_revision, true, surge);
            let min_ready = d.pointer("/spec/minReadySeconds").cloned();
            let min_ready_changed =
                int_at(&copy, "/spec/minReadySeconds") != int_at(d, "/spec/minReadySeconds");
            if annotations_updated || min_ready_changed {
                let annotations = copy.pointer("/metadata/annotations").cloned();
                let uid = str_at(&rs, "/metadata/uid").to_string();
                let (ns, name) = Self::key_of(&rs);
                let written = controller::update_same(
                    &self.store,
                    self.replicasets,
                    &ns,
                    &name,
                    &uid,
                    |cur| {
                        let mut new = cur.clone();
                        if let Some(a) = &annotations {
                            new["metadata"]["annotations"] = a.clone();
                        }
                        match &min_ready {
                            Some(m) => new["spec"]["minReadySeconds"] = m.clone(),
                            None => {
                                if let Some(spec) =
                                    new.get_mut("spec").and_then(Value::as_object_mut)
                                {
                                    spec.remove("minReadySeconds");
                                }
                            }
                        }
                        Ok(new)
                    },
                )
                .map_err(|e| self.write_failed(&name, &e))?;
                return Ok(Some((*written).clone()));
            }
            let rev = annotation(&copy, REVISION).unwrap_or("").to_string();
            set_annotation(d, REVISION, &rev);
            let mut status = status_of(d);
            if has_progress_deadline(d) && get_condition(&status, "Progressing").is_none() {
                let msg = format!(
                    "Found new replica set {:?}",
                    str_at(&copy, "/metadata/name")
                );
                set_condition(
                    &mut status,
                    condition("Progressing", "True", "FoundNewReplicaSet", &msg, &now),
                );
                d["status"] = Value::Object(status);
            }
            return Ok(Some(copy));
        }
        if !create {
            return Ok(None);
        }
        let collision_count = d.pointer("/status/collisionCount").and_then(Value::as_i64);
        let hash = compute_hash(d.pointer("/spec/template"), collision_count);
        let mut new_rs = self.replica_set_for(d, &hash);
        let all: Vec<&Value> = old.iter().chain([&new_rs]).collect();
        let size = new_rs_new_replicas(d, &all, 0).map_err(|e| self.invalid(d, &e))?;
        new_rs["spec"]["replicas"] = json!(size);
        set_new_replica_set_annotations(d, &mut new_rs, &new_revision, false, surge);
        let ns = str_at(d, "/metadata/namespace").to_string();
        let rs_name = str_at(&new_rs, "/metadata/name").to_string();
        let (created, already_existed) =
            match self.store.create(self.replicasets, &ns, new_rs, false) {
                Ok(rs) => ((*rs).clone(), false),
                Err(e) if e.reason == "AlreadyExists" => {
                    let found = self.store.get(self.replicasets, &ns, &rs_name);
                    let ours = found.as_ref().is_some_and(|rs| {
                        controller_ref(rs)
                            .is_some_and(|r| str_at(r, "/uid") == str_at(d, "/metadata/uid"))
                            && equal_ignore_hash(
                                rs.pointer("/spec/template"),
                                d.pointer("/spec/template"),
                            )
                    });
                    match found {
                        Some(rs) if ours => ((*rs).clone(), true),
                        _ => {
                            // A ReplicaSet of that name that is not this template's: the
                            // next hash takes the collision count into account.
                            let mut status = status_of(d);
                            status.insert(
                                "collisionCount".into(),
                                json!(collision_count.unwrap_or(0) + 1),
                            );
                            self.write_status(d, status);
                            return Err(Retry);
                        }
                    }
                }
                Err(e) => {
                    let msg = format!(
                        "Failed to create new replica set {rs_name:?}: {}",
                        e.message
                    );
                    if has_progress_deadline(d) {
                        let mut status = status_of(d);
                        set_condition(
                            &mut status,
                            condition("Progressing", "False", "ReplicaSetCreateError", &msg, &now),
                        );
                        self.write_status(d, status);
                    }
                    self.recorder
                        .event(d, "Deployment", "Warning", "ReplicaSetCreateError", &msg);
                    return Err(Retry);
                }
            };
        if !already_existed && size > 0 {
            self.recorder.event(
                d,
                "Deployment",
                "Normal",
                "ScalingReplicaSet",
                &format!("Scaled up replica set {rs_name} to {size}"),
            );
        }
        set_annotation(d, REVISION, &new_revision);
        if !already_existed && has_progress_deadline(d) {
            let mut status = status_of(d);
            let msg = format!("Created new replica set {rs_name:?}");
            set_condition(
                &mut status,
                condition("Progressing", "True", "NewReplicaSetCreated", &msg, &now),
            );
            d["status"] = Value::Object(status);
        }
        Ok(Some(created))
    }

    /// The new ReplicaSet of a template hash, at 0 replicas: `<deployment>-<hash>`, the
    /// template with the hash label, labels and selector with it, owned by the Deployment.
    fn replica_set_for(&self, d: &Value, hash: &str) -> Value {
        let mut template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
        if !template.get("metadata").is_some_and(Value::is_object) {
            template["metadata"] = json!({});
        }
        if !template
            .pointer("/metadata/labels")
            .is_some_and(Value::is_object)
        {
            template["metadata"]["labels"] = json!({});
        }
        template["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
        let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
        if !selector.get("matchLabels").is_some_and(Value::is_object) {
            selector["matchLabels"] = json!({});
        }
        selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
        let labels = template["metadata"]["labels"].clone();
        let mut spec = json!({"replicas": 0, "selector": selector, "template": template});
        if let Some(m) = d.pointer("/spec/minReadySeconds") {
            spec["minReadySeconds"] = m.clone();
        }
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": format!("{}-{hash}", str_at(d, "/metadata/name")),
                            "labels": labels,
                            "ownerReferences": [owner_reference(d, "apps/v1", "Deployment")]},
               "spec": spec})
    }

    /// Upstream's isScalingEvent: an active ReplicaSet was sized for another `spec.replicas`.
    fn is_scaling_event(&self, d: &mut Value, rs_list: &[Value]) -> Result<bool, Retry> {
        let sets = self.replica_sets_and_sync_revision(d, rs_list.to_vec(), false)?;
        let want = replicas(d);
        Ok(sets.all().iter().filter(|rs| replicas(rs) > 0).any(|rs| {
            annotation(rs, DESIRED_REPLICAS)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|desired| desired != want)
        }))
    }

    /// Upstream's sync: a scaling event or a paused Deployment.
    fn sync_scaling(&self, d: &mut Value, rs_list: Vec<Value>) -> Result<Option<Duration>, Retry> {
        let mut sets = self.replica_sets_and_sync_revision(d, rs_list, false)?;
        self.scale(d, &mut sets)?;
        if d.pointer("/spec/paused").and_then(Value::as_bool) == Some(true) {
            self.cleanup(d, &sets.old);
        }
        self.sync_status(d, &sets)
    }

    /// Upstream's syncDeploymentStatus: the status without progress accounting.
    fn sync_status(&self, d: &Value, sets: &Sets) -> Result<Option<Duration>, Retry> {
        let status = calculate_status(d, &sets.all(), sets.new.as_ref(), &meta::now_rfc3339())
            .map_err(|e| self.invalid(d, &e))?;
        self.write_status(d, status);
        Ok(None)
    }

    /// Upstream's syncRolloutStatus: the status with the `Progressing` condition, and when to
    /// look again for the progress deadline.
    fn sync_rollout_status(&self, d: &Value, sets: &Sets) -> Result<Option<Duration>, Retry> {
        let status = rollout_status(d, &sets.all(), sets.new.as_ref(), &meta::now_rfc3339())
            .map_err(|e| self.invalid(d, &e))?;
        let after = requeue_stuck(d, &status);
        self.write_status(d, status);
        Ok(after)
    }

    /// Upstream's scale: a scaling event sizes the only active ReplicaSet, or spreads the
    /// change over the active ones in proportion to their sizes.
    fn scale(&self, d: &Value, sets: &mut Sets) -> Result<(), Retry> {
        let want = replicas(d);
        let surge = max_surge(d).map_err(|e| self.invalid(d, &e))?;
        let active: Vec<bool> = sets.all().iter().map(|rs| replicas(rs) > 0).collect();
        let n_active = active.iter().filter(|a| **a).count();
        if sets.new.is_none() && sets.old.is_empty() {
            return Ok(());
        }
        if n_active <= 1 {
            // The only active one, or with none the new one, or the newest old one.
            let target = if n_active == 1 {
                sets.all()
                    .iter()
                    .position(|rs| replicas(rs) > 0)
                    .unwrap_or(0)
            } else if sets.new.is_some() {
                sets.old.len()
            } else {
                sets.old
                    .iter()
                    .enumerate()
                    .max_by(|(_, a), (_, b)| by_creation(a, b))
                    .map_or(0, |(i, _)| i)
            };
            if let Some(rs) = self.nth(sets, target) {
                if replicas(&rs) != want {
                    let scaled = self.scale_replica_set(d, &rs, want, surge)?;
                    self.replace(sets, target, scaled);
                }
            }
            return Ok(());
        }
        let saturated = sets.new.as_ref().is_some_and(|rs| {
            annotation(rs, DESIRED_REPLICAS).and_then(|v| v.parse::<i64>().ok()) == Some(want)
                && replicas(rs) == want
                && int_at(rs, "/status/availableReplicas") == want
        });
        if saturated {
            for i in 0..sets.old.len() {
                let rs = sets.old[i].clone();
                if replicas(&rs) > 0 {
                    sets.old[i] = self.scale_replica_set(d, &rs, 0, surge)?;
                }
            }
            return Ok(());
        }
        if !is_rolling_update(d) {
            return Ok(());
        }
        // Active ReplicaSets, with their index in `sets`.
        let mut all: Vec<(usize, Value)> = sets
            .all()
            .into_iter()
            .cloned()
            .enumerate()
            .filter(|(_, rs)| replicas(rs) > 0)
            .collect();
        let total: i64 = all.iter().map(|(_, rs)| replicas(rs)).sum();
        let allowed = if want > 0 { want + surge } else { 0 };
        let to_add = allowed - total;
        // Larger first; of the same size, newer first when growing, older when shrinking.
        all.sort_by(|(_, a), (_, b)| {
            replicas(b).cmp(&replicas(a)).then_with(|| {
                if to_add > 0 {
                    by_creation(b, a)
                } else {
                    by_creation(a, b)
                }
            })
        });
        let d_status_replicas = int_at(d, "/status/replicas");
        let mut added = 0;
        let mut sizes: Vec<i64> = Vec::with_capacity(all.len());
        for (_, rs) in &all {
            let size = replicas(rs);
            let proportion = if to_add == 0 || added == to_add {
                0
            } else {
                let fraction = if want == 0 {
                    -size
                } else {
                    let annotated = annotation(rs, MAX_REPLICAS)
                        .and_then(|v| v.parse::<i64>().ok())
                        .unwrap_or(d_status_replicas);
                    if annotated == 0 {
                        0
                    } else {
                        let exact = (size * (want + surge)) as f64 / annotated as f64;
                        exact.round() as i64 - size
                    }
                };
                let allowed = to_add - added;
                if to_add > 0 {
                    fraction.min(allowed)
                } else {
                    fraction.max(allowed)
                }
            };
            sizes.push(size + proportion);
            added += proportion;
        }
        if let Some(first) = sizes.first_mut() {
            if to_add != 0 {
                *first = (*first + to_add - added).max(0);
            }
        }
        for ((at, rs), size) in all.into_iter().zip(sizes) {
            let scaled = self.scale_replica_set(d, &rs, size, surge)?;
            self.replace(sets, at, scaled);
        }
        Ok(())
    }

    fn nth(&self, sets: &Sets, at: usize) -> Option<Value> {
        sets.all().get(at).map(|rs| (*rs).clone())
    }

    /// Puts `rs` at index `at` of [`Sets::all`].
    fn replace(&self, sets: &mut Sets, at: usize, rs: Value) {
        if at < sets.old.len() {
            sets.old[at] = rs;
        } else {
            sets.new = Some(rs);
        }
    }

    /// Writes a ReplicaSet's size and replica annotations (upstream's scaleReplicaSet), with
    /// a `ScalingReplicaSet` Event when the size changed.
    fn scale_replica_set(
        &self,
        d: &Value,
        rs: &Value,
        size: i64,
        surge: i64,
    ) -> Result<Value, Retry> {
        let old = replicas(rs);
        let want = replicas(d);
        let (desired, max) = (want.to_string(), (want + surge).to_string());
        let annotations_stale = annotation(rs, DESIRED_REPLICAS) != Some(&desired)
            || annotation(rs, MAX_REPLICAS) != Some(&max);
        if old == size && !annotations_stale {
            return Ok(rs.clone());
        }
        let uid = str_at(rs, "/metadata/uid").to_string();
        let (ns, name) = Self::key_of(rs);
        let written =
            controller::update_same(&self.store, self.replicasets, &ns, &name, &uid, |cur| {
                let mut new = cur.clone();
                new["spec"]["replicas"] = json!(size);
                set_annotation(&mut new, DESIRED_REPLICAS, &desired);
                set_annotation(&mut new, MAX_REPLICAS, &max);
                Ok(new)
            })
            .map_err(|e| self.write_failed(&name, &e))?;
        if old != size {
            let op = if old < size { "up" } else { "down" };
            self.recorder.event(
                d,
                "Deployment",
                "Normal",
                "ScalingReplicaSet",
                &format!("Scaled {op} replica set {name} to {size} from {old}"),
            );
        }
        Ok((*written).clone())
    }

    /// Upstream's rolloutRolling.
    fn rollout_rolling(
        &self,
        d: &mut Value,
        rs_list: Vec<Value>,
    ) -> Result<Option<Duration>, Retry> {
        let mut sets = self.replica_sets_and_sync_revision(d, rs_list, true)?;
        let surge = max_surge(d).map_err(|e| self.invalid(d, &e))?;
        if self.reconcile_new_replica_set(d, &mut sets, surge)? {
            return self.sync_rollout_status(d, &sets);
        }
        if self.reconcile_old_replica_sets(d, &mut sets, surge)? {
            return self.sync_rollout_status(d, &sets);
        }
        if deployment_complete(d, &status_of(d)) {
            self.cleanup(d, &sets.old);
        }
        self.sync_rollout_status(d, &sets)
    }

    /// Scales the new ReplicaSet up as far as the surge allows (down to `spec.replicas`
    /// when above); true when its size changed.
    fn reconcile_new_replica_set(
        &self,
        d: &Value,
        sets: &mut Sets,
        surge: i64,
    ) -> Result<bool, Retry> {
        let Some(new) = sets.new.clone() else {
            return Ok(false);
        };
        let want = replicas(d);
        let size = replicas(&new);
        let target = if size > want {
            want
        } else {
            new_rs_new_replicas(d, &sets.all(), size).map_err(|e| self.invalid(d, &e))?
        };
        if target == size {
            return Ok(false);
        }
        sets.new = Some(self.scale_replica_set(d, &new, target, surge)?);
        Ok(true)
    }

    /// Scales old ReplicaSets down as far as availability allows: unhealthy replicas first,
    /// then the oldest ReplicaSets' (upstream's reconcileOldReplicaSets); true when any
    /// size changed.
    fn reconcile_old_replica_sets(
        &self,
        d: &Value,
        sets: &mut Sets,
        surge: i64,
    ) -> Result<bool, Retry> {
        let old_count: i64 = sets.old.iter().map(replicas).sum();
        if old_count == 0 {
            return Ok(false);
        }
        let all_count: i64 = sets.all().iter().map(|rs| replicas(rs)).sum();
        let unavailable = max_unavailable(d).map_err(|e| self.invalid(d, &e))?;
        let min_available = replicas(d) - unavailable;
        let new_unavailable = sets.new.as_ref().map_or(0, |rs| {
            replicas(rs) - int_at(rs, "/status/availableReplicas")
        });
        let max_scaled_down = all_count - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let mut order: Vec<usize> = (0..sets.old.len()).collect();
        order.sort_by(|a, b| by_creation(&sets.old[*a], &sets.old[*b]));
        // Unhealthy replicas of old ReplicaSets go first: removing them costs no
        // availability.
        let mut cleaned = 0;
        for &i in &order {
            if cleaned >= max_scaled_down {
                break;
            }
            let rs = sets.old[i].clone();
            let size = replicas(&rs);
            let available = int_at(&rs, "/status/availableReplicas");
            if size == 0 || size == available {
                continue;
            }
            let down = (max_scaled_down - cleaned).min(size - available);
            sets.old[i] = self.scale_replica_set(d, &rs, size - down, surge)?;
            cleaned += down;
        }
        // Then the available ones, as far as `min_available` allows.
        let available: i64 = sets
            .all()
            .iter()
            .map(|rs| int_at(rs, "/status/availableReplicas"))
            .sum();
        let mut scaled = 0;
        if available > min_available {
            let total_down = available - min_available;
            for &i in &order {
                if scaled >= total_down {
                    break;
                }
                let rs = sets.old[i].clone();
                let size = replicas(&rs);
                if size == 0 {
                    continue;
                }
                let down = size.min(total_down - scaled);
                sets.old[i] = self.scale_replica_set(d, &rs, size - down, surge)?;
                scaled += down;
            }
        }
        Ok(cleaned + scaled > 0)
    }

    /// Upstream's rolloutRecreate: old ReplicaSets to 0, then, once no old pod runs, the new
    /// one at `spec.replicas`.
    fn rollout_recreate(
        &self,
        d: &mut Value,
        rs_list: Vec<Value>,
    ) -> Result<Option<Duration>, Retry> {
        let mut sets = self.replica_sets_and_sync_revision(d, rs_list, false)?;
        let mut scaled_down = false;
        for i in 0..sets.old.len() {
            let rs = sets.old[i].clone();
            if replicas(&rs) > 0 {
                sets.old[i] = self.scale_replica_set(d, &rs, 0, 0)?;
                scaled_down = true;
            }
        }
        if scaled_down || self.old_pods_running(d, &sets) {
            return self.sync_rollout_status(d, &sets);
        }
        if sets.new.is_none() {
            let lists: Vec<Value> = sets.old.clone();
            sets = self.replica_sets_and_sync_revision(d, lists, true)?;
        }
        if let Some(new) = sets.new.clone() {
            if replicas(&new) != replicas(d) {
                sets.new = Some(self.scale_replica_set(d, &new, replicas(d), 0)?);
            }
        }
        if deployment_complete(d, &status_of(d)) {
            self.cleanup(d, &sets.old);
        }
        self.sync_rollout_status(d, &sets)
    }

    /// Whether an old ReplicaSet still has pods, or a pod of one is not finished (upstream's
    /// oldPodsRunning; a pod being deleted still runs).
    fn old_pods_running(&self, d: &Value, sets: &Sets) -> bool {
        if sets.old.iter().any(|rs| int_at(rs, "/status/replicas") > 0) {
            return true;
        }
        let old: BTreeSet<&str> = sets
            .old
            .iter()
            .map(|rs| str_at(rs, "/metadata/uid"))
            .collect();
        let ns = str_at(d, "/metadata/namespace");
        self.store.list(self.pods, Some(ns)).0.iter().any(|pod| {
            selects(d, pod)
                && controller_ref(pod).is_some_and(|r| old.contains(str_at(r, "/uid")))
                && !matches!(str_at(pod, "/status/phase"), "Succeeded" | "Failed")
        })
    }

    /// Deletes old ReplicaSets with no replicas beyond `revisionHistoryLimit`, lowest
    /// revision first (upstream's cleanupDeployment).
    fn cleanup(&self, d: &Value, old: &[Value]) {
        let Some(limit) = d
            .pointer("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64)
        else {
            return;
        };
        let mut cleanable: Vec<&Value> = old.iter().filter(|rs| !terminating(rs)).collect();
        let diff = i64::try_from(cleanable.len()).unwrap_or(0) - limit;
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            revision(a)
                .cmp(&revision(b))
                .then_with(|| by_creation(a, b))
        });
        for rs in cleanable
            .into_iter()
            .take(usize::try_from(diff).unwrap_or(0))
        {
            if int_at(rs, "/status/replicas") != 0
                || replicas(rs) != 0
                || int_at(rs, "/metadata/generation") > int_at(rs, "/status/observedGeneration")
            {
                continue;
            }
            let (ns, name) = Self::key_of(rs);
            let opts = DeleteOptions {
                uid: Some(str_at(rs, "/metadata/uid")),
                ..DeleteOptions::default()
            };
            if let Err(e) = self.store.delete(self.replicasets, &ns, &name, opts) {
                tracing::debug!(replicaset = %name, error = %e.message,
                    "deployment controller: old replica set not deleted");
            }
        }
    }

    /// Writes the Deployment's status and its revision annotation, unless it was deleted
    /// and made again or its spec changed meanwhile (the change brings another sync).
    fn write_status(&self, d: &Value, status: Map<String, Value>) {
        let (ns, name) = Self::key_of(d);
        let uid = str_at(d, "/metadata/uid").to_string();
        let generation = int_at(d, "/metadata/generation");
        let revision = annotation(d, REVISION).map(str::to_string);
        let written = self
            .store
            .update(self.deployments, &ns, &name, false, |cur| {
                if str_at(cur, "/metadata/uid") != uid
                    || int_at(cur, "/metadata/generation") != generation
                {
                    return Err(ApiError::conflict(
                        self.deployments,
                        &name,
                        "the object has been modified",
                    ));
                }
                let mut new = cur.clone();
                if let Some(rev) = &revision {
                    set_annotation(&mut new, REVISION, rev);
                }
                new["status"] = Value::Object(status);
                Ok(new)
            });
        if let Err(e) = written {
            tracing::debug!(deployment = %name, error = %e.message,
                "deployment controller: status not written");
        }
    }

    fn invalid(&self, d: &Value, e: &DeploymentError) -> Retry {
        tracing::warn!(deployment = %str_at(d, "/metadata/name"), error = %e,
            "deployment controller: cannot roll out");
        Retry
    }

    fn write_failed(&self, name: &str, e: &ApiError) -> Retry {
        tracing::debug!(replicaset = %name, error = %e.message,
            "deployment controller: replica set not written");
        Retry
    }
}

/// Runs the Deployment controller until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (Some(deployments), Some(replicasets), Some(pods)) = (
        resources::lookup("apps", "v1", "deployments"),
        resources::lookup("apps", "v1", "replicasets"),
        resources::lookup("", "v1", "pods"),
    ) else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let c = DeploymentController {
        store,
        deployments,
        replicasets,
        pods,
        recorder,
    };
    controller::run(&c.store.clone(), &c).await;
}

impl Reconcile for DeploymentController {
    fn owners(&self) -> &'static ResourceInfo {
        self.deployments
    }

    fn relist(&self) -> Vec<Key> {
        self.store
            .list(self.deployments, None)
            .0
            .iter()
            .map(|d| key_of(d))
            .collect()
    }

    fn keys_of(&self, ev: &WatchEvent, keys: &mut BTreeSet<Key>) {
        if ev.storage == self.deployments.storage {
            // A deleted Deployment's sync finds nothing and drops its timer.
            keys.insert(key_of(&ev.object()));
        } else if ev.storage == self.replicasets.storage {
            keys.extend(self.deployments_of_replicaset(&ev.object()));
        } else if ev.storage == self.pods.storage && ev.kind == EventType::Deleted {
            keys.extend(self.deployment_of_pod(&ev.object()));
        }
    }

    fn sync(&self, ns: &str, name: &str) -> Option<Duration> {
        DeploymentController::sync(self, ns, name)
    }
}

#[cfg(test)]
mod tests;

//! The provisioner stand-in: creates a PersistentVolume for each claim handed to a
//! provisioner it serves, and deletes the volumes it provisioned once they are Released with
//! reclaim policy Delete, as an external provisioner (sig-storage-lib-external-provisioner,
//! rancher.io/local-path) does. On under `up` and `--simulate-kubelets`.
//!
//! The protocol is upstream's: the PV controller names the provisioner in the claim's
//! `volume.kubernetes.io/storage-provisioner` annotation (for a `WaitForFirstConsumer` class
//! once the scheduler wrote `volume.kubernetes.io/selected-node`); the provisioner creates
//! volume `pvc-<claim uid>` with `claimRef` naming the claim and
//! `pv.kubernetes.io/provisioned-by`; the PV controller then binds the two.
//!
//! The volume: capacity = the claim's request; the claim's access modes and volume mode; the
//! class's name, reclaim policy and mount options; node affinity on the selected node's
//! hostname for a node-local driver ([`NODE_LOCAL_PROVISIONERS`], a `hostPath` source), else
//! on its zone label `topology.kubernetes.io/zone` (a `csi` source; none when the node has no
//! zone). A selected node outside the class's `allowedTopologies` gets no volume. A claim with
//! no selected node (an `Immediate` class) gets the first value of each expression of the
//! class's first allowed topology term, or no node affinity when the class has none.
//!
//! The claim gets the Events an external provisioner records (component
//! `<provisioner>_kubesched`): `Provisioning`, then `ProvisioningSucceeded` or
//! `ProvisioningFailed`.
//!
//! A claim whose selected node does not exist yet is looked at again when the node is
//! added.
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::create`] and [`Store::delete`]. **Invariant:** the volume's name is
//! derived from the claim's uid, so seeing a claim again never makes a second volume.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::store::RecvError;
use serde_json::{json, Map, Value};

use crate::admission;
use crate::pv_controller::{
    annotation, claim_class, current, str_at, ANN_BETA_STORAGE_PROVISIONER, ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
};
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store};

/// The provisioner the stand-in serves unless told otherwise: that of the default class `up`
/// creates (kind's `standard` class).
pub const DEFAULT_PROVISIONER: &str = "rancher.io/local-path";

/// Provisioners whose volumes live on one node (node affinity on its hostname).
pub const NODE_LOCAL_PROVISIONERS: &[&str] = &["rancher.io/local-path"];

/// The zone label the volumes' node affinity uses.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The hostname label a node-local volume's node affinity uses.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Why a claim gets no volume.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvisionError {
    /// The node the scheduler selected is outside the class's allowed topologies.
    #[error("selected node {node:?} is not in the allowed topologies of storage class {class:?}")]
    NotAllowedTopology {
        /// The selected node.
        node: String,
        /// The class.
        class: String,
    },
}

fn node_label<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// Whether the node's labels satisfy one of the class's `allowedTopologies` terms (every
/// expression's key has one of its values); true when the class has none.
fn node_allowed(class: &Value, node: &Value) -> bool {
    let terms = class
        .get("allowedTopologies")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty());
    let Some(terms) = terms else {
        return true;
    };
    terms.iter().any(|term| {
        term.get("matchLabelExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .all(|e| {
                let value = node_label(node, str_at(e, "/key"));
                e.get("values").and_then(Value::as_array).is_some_and(|vs| {
                    vs.iter()
                        .any(|v| v.as_str().is_some() && v.as_str() == value)
                })
            })
    })
}

fn node_affinity(expressions: Vec<Value>) -> Option<Value> {
    (!expressions.is_empty())
        .then(|| json!({"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}))
}

fn in_expression(key: &str, value: &str) -> Value {
    json!({"key": key, "operator": "In", "values": [value]})
}

/// The volume a provisioner makes for a claim of `class`, on `node` when one was selected.
pub fn provision(
    claim: &Value,
    class: &Value,
    node: Option<&Value>,
) -> Result<Value, ProvisionError> {
    let provisioner = str_at(class, "/provisioner");
    let class_name = str_at(class, "/metadata/name");
    let (ns, name, uid) = (
        str_at(claim, "/metadata/namespace"),
        str_at(claim, "/metadata/name"),
        str_at(claim, "/metadata/uid"),
    );
    let pv_name = format!("pvc-{uid}");
    let node_local = NODE_LOCAL_PROVISIONERS.contains(&provisioner);
    let affinity = match node {
        Some(node) => {
            let node_name = str_at(node, "/metadata/name");
            if !node_allowed(class, node) {
                return Err(ProvisionError::NotAllowedTopology {
                    node: node_name.to_string(),
                    class: class_name.to_string(),
                });
            }
            if node_local {
                let host = node_label(node, HOSTNAME_LABEL).unwrap_or(node_name);
                node_affinity(vec![in_expression(HOSTNAME_LABEL, host)])
            } else {
                node_affinity(
                    node_label(node, ZONE_LABEL)
                        .map(|zone| in_expression(ZONE_LABEL, zone))
                        .into_iter()
                        .collect(),
                )
            }
        }
        None => node_affinity(
            class
                .pointer("/allowedTopologies/0/matchLabelExpressions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    let value = e.pointer("/values/0").and_then(Value::as_str)?;
                    Some(in_expression(str_at(e, "/key"), value))
                })
                .collect(),
        ),
    };
    let mut spec = Map::new();
    spec.insert(
        "accessModes".into(),
        claim
            .pointer("/spec/accessModes")
            .cloned()
            .unwrap_or_else(|| json!([])),
    );
    spec.insert(
        "capacity".into(),
        json!({"storage": str_at(claim, "/spec/resources/requests/storage")}),
    );
    spec.insert(
        "claimRef".into(),
        json!({"kind": "PersistentVolumeClaim", "namespace": ns, "name": name, "uid": uid,
               "apiVersion": "v1",
               "resourceVersion": str_at(claim, "/metadata/resourceVersion")}),
    );
    if node_local {
        spec.insert(
            "hostPath".into(),
            json!({"path": format!("/var/local-path-provisioner/{pv_name}_{ns}_{name}"),
                   "type": "DirectoryOrCreate"}),
        );
    } else {
        spec.insert(
            "csi".into(),
            json!({"driver": provisioner, "volumeHandle": pv_name}),
        );
    }
    if let Some(options) = class.get("mountOptions").filter(|o| !o.is_null()) {
        spec.insert("mountOptions".into(), options.clone());
    }
    if let Some(affinity) = affinity {
        spec.insert("nodeAffinity".into(), affinity);
    }
    let reclaim = match str_at(class, "/reclaimPolicy") {
        "" => "Delete",
        r => r,
    };
    spec.insert("persistentVolumeReclaimPolicy".into(), json!(reclaim));
    spec.insert("storageClassName".into(), json!(class_name));
    let mode = match str_at(claim, "/spec/volumeMode") {
        "" => "Filesystem",
        m => m,
    };
    spec.insert("volumeMode".into(), json!(mode));
    Ok(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "annotations": {ANN_PROVISIONED_BY: provisioner}},
        "spec": spec,
    }))
}

/// The provisioner named on a claim (the GA annotation, else the beta one).
fn claim_provisioner(claim: &Value) -> Option<&str> {
    annotation(claim, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(claim, ANN_BETA_STORAGE_PROVISIONER))
}

struct Provisioner {
    store: Arc<Store>,
    /// The provisioner names served, each with the recorder of its Events.
    serves: Vec<(String, Recorder)>,
    volumes: &'static ResourceInfo,
    claims: &'static ResourceInfo,
    classes: &'static ResourceInfo,
    nodes: &'static ResourceInfo,
    /// Claims whose selected node did not exist, by node name.
    waiting_for_node: Mutex<HashMap<String, BTreeSet<(String, String)>>>,
}

impl Provisioner {
    fn serves(&self, provisioner: &str) -> bool {
        self.recorder(provisioner).is_some()
    }

    fn recorder(&self, provisioner: &str) -> Option<&Recorder> {
        self.serves
            .iter()
            .find(|(p, _)| p == provisioner)
            .map(|(_, r)| r)
    }

    fn claim(&self, claim: &Value) {
        if !str_at(claim, "/spec/volumeName").is_empty()
            || claim.pointer("/metadata/deletionTimestamp").is_some()
        {
            return;
        }
        let Some((provisioner, recorder)) =
            claim_provisioner(claim).and_then(|p| Some((p, self.recorder(p)?)))
        else {
            return;
        };
        let Some(class) = self.store.get(self.classes, "", claim_class(claim)) else {
            return;
        };
        if str_at(&class, "/provisioner") != provisioner {
            return;
        }
        let pv_name = format!("pvc-{}", str_at(claim, "/metadata/uid"));
        if self.store.get(self.volumes, "", &pv_name).is_some() {
            return;
        }
        let node = match annotation(claim, ANN_SELECTED_NODE) {
            Some(node) => match self.store.get(self.nodes, "", node) {
                Some(n) => Some(n),
                // Not there (yet): the claim is looked at again when the node appears.
                None => {
                    if let Ok(mut waiting) = self.waiting_for_node.lock() {
                        waiting.entry(node.to_string()).or_default().insert((
                            str_at(claim, "/metadata/namespace").to_string(),
                            str_at(claim, "/metadata/name").to_string(),
                        ));
                    }
                    return;
                }
            },
            None if str_at(&class, "/volumeBindingMode") == "WaitForFirstConsumer" => return,
            None => None,
        };
        let (ns, name) = (
            str_at(claim, "/metadata/namespace"),
            str_at(claim, "/metadata/name"),
        );
        let event = |kind: &str, reason: &str, message: &str| {
            recorder.event(claim, "PersistentVolumeClaim", kind, reason, message);
        };
        event(
            "Normal",
            "Provisioning",
            &format!("External provisioner is provisioning volume for claim \"{ns}/{name}\""),
        );
        let mut volume = match provision(claim, &class, node.as_deref()) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "provisioner stand-in: no volume");
                event(
                    "Warning",
                    "ProvisioningFailed",
                    &format!(
                        "failed to provision volume with StorageClass \"{}\": {e}",
                        str_at(&class, "/metadata/name")
                    ),
                );
                return;
            }
        };
        admission::default_storage_phase(self.volumes, &mut volume);
        match self.store.create(self.volumes, "", volume, false) {
            Ok(_) => event(
                "Normal",
                "ProvisioningSucceeded",
                &format!("Successfully provisioned volume {pv_name}"),
            ),
            Err(e) => tracing::debug!(volume = %pv_name, error = %e.message,
                "provisioner stand-in: volume not created"),
        }
    }

    /// A node appeared: the claims that selected it are looked at again.
    fn node(&self, node: &Value) {
        let claims = match self.waiting_for_node.lock() {
            Ok(mut waiting) => waiting
                .remove(str_at(node, "/metadata/name"))
                .unwrap_or_default(),
            Err(_) => return,
        };
        for (ns, name) in claims {
            if let Some(c) = self.store.get(self.claims, &ns, &name) {
                self.claim(&c);
            }
        }
    }

    /// Deletes a volume it provisioned once Released with reclaim policy Delete.
    fn volume(&self, volume: &Value) {
        let ours = annotation(volume, ANN_PROVISIONED_BY).is_some_and(|p| self.serves(p));
        if !ours
            || str_at(volume, "/status/phase") != "Released"
            || str_at(volume, "/spec/persistentVolumeReclaimPolicy") != "Delete"
        {
            return;
        }
        let opts = DeleteOptions {
            uid: Some(str_at(volume, "/metadata/uid")),
            ..DeleteOptions::default()
        };
        let name = str_at(volume, "/metadata/name");
        if let Err(e) = self.store.delete(self.volumes, "", name, opts) {
            tracing::debug!(volume = %name, error = %e.message,
                "provisioner stand-in: volume not deleted");
        }
    }

    fn resync(&self) {
        for c in self.store.list(self.claims, None).0 {
            self.claim(&c);
        }
        for v in self.store.list(self.volumes, None).0 {
            self.volume(&v);
        }
    }
}

/// Runs the provisioner stand-in for the provisioner names in `serves` until the store's
/// event stream closes.
pub async fn run(store: Arc<Store>, serves: Vec<String>) {
    let (Some(volumes), Some(claims), Some(classes), Some(nodes)) = (
        resources::lookup("", "v1", "persistentvolumes"),
        resources::lookup("", "v1", "persistentvolumeclaims"),
        resources::lookup("storage.k8s.io", "v1", "storageclasses"),
        resources::lookup("", "v1", "nodes"),
    ) else {
        return;
    };
    let serves = serves
        .into_iter()
        .filter_map(|p| {
            let recorder = Recorder::new(store.clone(), format!("{p}_kubesched"))?;
            Some((p, recorder))
        })
        .collect();
    let p = Provisioner {
        store,
        serves,
        volumes,
        claims,
        classes,
        nodes,
        waiting_for_node: Mutex::new(HashMap::new()),
    };
    loop {
        // Subscribe first, then list: nothing written in between is missed.
        let Ok(start) = p
            .store
            .watch_also(claims.storage, None, &[volumes.storage, nodes.storage])
        else {
            return;
        };
        let mut live = start.live;
        p.resync();
        loop {
            let ev = match live.recv().await {
                Ok(ev) => ev,
                // Fell behind: relist.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            };
            if ev.kind == EventType::Deleted {
                continue;
            }
            if ev.storage == claims.storage {
                if let Some(c) = current(&p.store, claims, &ev.object()) {
                    p.claim(&c);
                }
            } else if ev.storage == volumes.storage {
                if let Some(v) = current(&p.store, volumes, &ev.object()) {
                    p.volume(&v);
                }
            } else if ev.storage == nodes.storage && ev.kind == EventType::Added {
                p.node(&ev.object());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn claim() -> Value {
        json!({"metadata": {"name": "data", "namespace": "ns", "uid": "u1", "resourceVersion": "4"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "sc",
                     "resources": {"requests": {"storage": "2Gi"}}}})
    }

    fn node(name: &str, zone: Option<&str>) -> Value {
        let mut labels = json!({"kubernetes.io/hostname": format!("host-{name}")});
        if let Some(zone) = zone {
            labels[ZONE_LABEL] = json!(zone);
        }
        json!({"metadata": {"name": name, "labels": labels}})
    }

    fn zone_term(values: &[&str]) -> Value {
        json!([{"matchLabelExpressions": [{"key": ZONE_LABEL, "values": values}]}])
    }

    fn affinity(key: &str, value: &str) -> Option<Value> {
        Some(
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}]}}),
        )
    }

    #[rstest]
    #[case::zonal_driver_takes_the_nodes_zone("csi.example.com", json!(null),
        Some(node("n1", Some("zone-b"))), Ok(affinity(ZONE_LABEL, "zone-b")))]
    #[case::zonal_driver_on_a_node_without_zone_has_no_affinity("csi.example.com", json!(null),
        Some(node("n1", None)), Ok(None))]
    #[case::local_path_takes_the_nodes_hostname(DEFAULT_PROVISIONER, json!(null),
        Some(node("n1", Some("zone-b"))), Ok(affinity(HOSTNAME_LABEL, "host-n1")))]
    #[case::allowed_node_is_provisioned("csi.example.com", zone_term(&["zone-a", "zone-b"]),
        Some(node("n1", Some("zone-b"))), Ok(affinity(ZONE_LABEL, "zone-b")))]
    #[case::node_outside_allowed_topologies_is_refused("csi.example.com", zone_term(&["zone-a"]),
        Some(node("n1", Some("zone-b"))), Err(ProvisionError::NotAllowedTopology {
            node: "n1".into(), class: "sc".into() }))]
    #[case::no_node_takes_the_first_allowed_zone("csi.example.com", zone_term(&["zone-c", "zone-a"]),
        None, Ok(affinity(ZONE_LABEL, "zone-c")))]
    #[case::no_node_and_no_allowed_topologies_has_no_affinity("csi.example.com", json!(null),
        None, Ok(None))]
    fn node_affinity_of_the_volume(
        #[case] provisioner: &str,
        #[case] allowed: Value,
        #[case] node: Option<Value>,
        #[case] want: Result<Option<Value>, ProvisionError>,
    ) {
        let class = json!({"metadata": {"name": "sc"}, "provisioner": provisioner,
            "allowedTopologies": allowed});
        let got = provision(&claim(), &class, node.as_ref())
            .map(|pv| pv.pointer("/spec/nodeAffinity").cloned());
        assert_eq!(got, want);
    }

    #[test]
    fn a_csi_volume_carries_the_claim_and_the_class_settings() {
        let class = json!({"metadata": {"name": "sc"}, "provisioner": "csi.example.com",
            "reclaimPolicy": "Retain", "mountOptions": ["ro"]});
        assert_eq!(
            provision(&claim(), &class, None),
            Ok(json!({"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": "pvc-u1",
                    "annotations": {"pv.kubernetes.io/provisioned-by": "csi.example.com"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"},
                    "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ns",
                        "name": "data", "uid": "u1", "apiVersion": "v1", "resourceVersion": "4"},
                    "csi": {"driver": "csi.example.com", "volumeHandle": "pvc-u1"},
                    "mountOptions": ["ro"], "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "sc", "volumeMode": "Filesystem"}}))
        );
    }
}

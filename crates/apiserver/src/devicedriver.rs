//! The device driver stand-in (`--simulate-kubelets`): publishes ResourceSlices for the
//! devices a node's annotation describes, as a DRA driver's kubelet plugin publishes the
//! devices it finds, so that device requests can be tried with no hardware.
//!
//! A node annotated
//!
//! ```text
//! kubesched.dev/devices: "gpu.example.com=2,model=a100,memory=80Gi; nic.example.com=1"
//! ```
//!
//! gets one ResourceSlice per driver (`<node>-<driver>`): `spec.nodeName` the node, one pool
//! named after the node, and `N` devices named `<first label of the driver>-<i>` (`gpu-0`,
//! `gpu-1`). Each device has the attribute `index` (`int`, 0 to N-1) and, for every other
//! `key=value`, an attribute (`int` for an integer, `bool` for `true`/`false`, else
//! `string`), or a capacity when the value is a quantity with a unit (`80Gi`, `500M`).
//!
//! When the annotation changes the slices are updated (the pool's generation rises), and
//! slices of drivers it no longer names are deleted; slices of a node that is deleted are
//! deleted with it (they also carry an owner reference to the node, as a kubelet plugin's
//! do). A description that does not parse, or whose slice is not valid, is a Warning Event
//! `InvalidDeviceDescription` on the node and publishes nothing for that driver.
//!
//! It reads the store's event stream in-process (relisting when it falls behind) and writes
//! through [`Store::create`], [`Store::update`] and [`Store::delete`]. Slices it publishes
//! carry the label [`MANAGED_BY_LABEL`]; it never touches other slices.
//!
//! Upstream: staging/src/k8s.io/dynamic-resource-allocation/resourceslice (the slice
//! controller a kubelet plugin runs) and the example driver's `gpu.example.com` devices.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::store::RecvError;
use serde_json::{json, Map, Value};

use crate::pv_controller::str_at;
use crate::recorder::Recorder;
use crate::resources::{self, ResourceInfo};
use crate::store::{DeleteOptions, EventType, Store};

/// The node annotation describing its devices.
pub const DEVICES_ANNOTATION: &str = "kubesched.dev/devices";

/// The label on the slices this stand-in publishes.
pub const MANAGED_BY_LABEL: &str = "kubesched.dev/device-driver-stand-in";

/// The Events' `source.component`.
pub const COMPONENT: &str = "device-driver-stand-in";

/// Devices per driver and node at most (a ResourceSlice's limit).
const MAX_DEVICES: usize = crate::resource_validation::RESOURCE_SLICE_MAX_DEVICES;

/// The devices of one driver on a node, as the annotation describes them.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverDevices {
    /// The driver name (`gpu.example.com`).
    pub driver: String,
    /// How many devices.
    pub count: usize,
    /// `key=value` pairs each device carries, in the annotation's order.
    pub properties: Vec<(String, String)>,
}

/// Parses a `kubesched.dev/devices` value: `;`-separated entries
/// `<driver>=<count>[,<key>=<value>]...`.
pub fn parse_description(text: &str) -> Result<Vec<DriverDevices>, String> {
    let mut out: Vec<DriverDevices> = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let mut parts = entry.split(',').map(str::trim);
        let head = parts.next().unwrap_or("");
        let Some((driver, count)) = head.split_once('=') else {
            return Err(format!(
                "{head:?}: expected <driver>=<count>, e.g. gpu.example.com=2"
            ));
        };
        let driver = driver.trim().to_string();
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("{head:?}: the count is not a whole number"))?;
        if count > MAX_DEVICES {
            return Err(format!(
                "{head:?}: at most {MAX_DEVICES} devices per driver and node"
            ));
        }
        if out.iter().any(|d| d.driver == driver) {
            return Err(format!("driver {driver:?} is described twice"));
        }
        let mut properties = Vec::new();
        for p in parts.filter(|p| !p.is_empty()) {
            let Some((k, v)) = p.split_once('=') else {
                return Err(format!("{p:?}: expected <key>=<value>"));
            };
            properties.push((k.trim().to_string(), v.trim().to_string()));
        }
        out.push(DriverDevices {
            driver,
            count,
            properties,
        });
    }
    Ok(out)
}

/// Whether a value is a quantity with a unit (`80Gi`, `1.5T`), which makes it a capacity.
fn is_quantity_with_unit(v: &str) -> bool {
    const UNITS: &[&str] = &[
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
    ];
    UNITS.iter().any(|u| {
        v.strip_suffix(u).is_some_and(|n| {
            !n.is_empty()
                && n.bytes().all(|c| c.is_ascii_digit() || c == b'.')
                && n.bytes().next().is_some_and(|c| c.is_ascii_digit())
        })
    })
}

/// The slice name for a node and driver.
pub fn slice_name(node: &str, driver: &str) -> String {
    format!("{node}-{driver}")
}

/// The ResourceSlice publishing `devices` for `node` (its name and uid), at pool
/// generation `generation`.
pub fn slice_for(node: &Value, devices: &DriverDevices, generation: i64) -> Value {
    let node_name = str_at(node, "/metadata/name");
    let prefix = devices.driver.split('.').next().unwrap_or("device");
    let list: Vec<Value> = (0..devices.count)
        .map(|i| {
            let mut attributes = Map::new();
            let mut capacity = Map::new();
            attributes.insert("index".into(), json!({"int": i}));
            for (k, v) in &devices.properties {
                if is_quantity_with_unit(v) {
                    capacity.insert(k.clone(), json!({"value": v}));
                } else if let Ok(n) = v.parse::<i64>() {
                    attributes.insert(k.clone(), json!({"int": n}));
                } else if let Ok(b) = v.parse::<bool>() {
                    attributes.insert(k.clone(), json!({"bool": b}));
                } else {
                    attributes.insert(k.clone(), json!({"string": v}));
                }
            }
            let mut device = json!({"name": format!("{prefix}-{i}"), "attributes": attributes});
            if !capacity.is_empty() {
                device["capacity"] = Value::Object(capacity);
            }
            device
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
           "metadata": {"name": slice_name(node_name, &devices.driver),
                        "labels": {MANAGED_BY_LABEL: "true"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                             "name": node_name,
                                             "uid": str_at(node, "/metadata/uid"),
                                             "controller": true}]},
           "spec": {"driver": devices.driver, "nodeName": node_name,
                    "pool": {"name": node_name, "generation": generation,
                             "resourceSliceCount": 1},
                    "devices": list}})
}

struct DeviceDriver {
    store: Arc<Store>,
    nodes: &'static ResourceInfo,
    slices: &'static ResourceInfo,
    recorder: Recorder,
}

impl DeviceDriver {
    /// This stand-in's slices for a node, by name.
    fn published(&self, node: &str) -> BTreeMap<String, Arc<Value>> {
        self.store
            .list(self.slices, None)
            .0
            .into_iter()
            .filter(|s| {
                str_at(s, "/spec/nodeName") == node
                    && s.pointer("/metadata/labels")
                        .and_then(|l| l.get(MANAGED_BY_LABEL))
                        .is_some()
            })
            .map(|s| (str_at(&s, "/metadata/name").to_string(), s))
            .collect()
    }

    fn warn(&self, node: &Value, message: &str) {
        self.recorder
            .event(node, "Node", "Warning", "InvalidDeviceDescription", message);
    }

    /// Publishes what the node's annotation describes and removes what it no longer does.
    fn sync_node(&self, node: &Value) {
        let name = str_at(node, "/metadata/name");
        let text = node
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(DEVICES_ANNOTATION))
            .and_then(Value::as_str)
            .unwrap_or("");
        let described = match parse_description(text) {
            Ok(d) => d,
            Err(why) => {
                self.warn(node, &format!("{DEVICES_ANNOTATION}: {why}"));
                return;
            }
        };
        let mut published = self.published(name);
        for devices in &described {
            let slice_name = slice_name(name, &devices.driver);
            let current = published.remove(&slice_name);
            let generation = current
                .as_ref()
                .and_then(|s| s.pointer("/spec/pool/generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let mut want = slice_for(node, devices, generation);
            let errs = crate::resource_validation::validate_create("ResourceSlice", &want);
            let name_errs = crate::meta::name_errors(
                &slice_name,
                crate::meta::NameRule::Dns1123Subdomain,
                false,
            );
            if let Some(why) = errs
                .iter()
                .map(|e| format!("{}: {}", e.field, e.body()))
                .chain(name_errs.into_iter().map(|e| format!("metadata.name: {e}")))
                .next()
            {
                self.warn(
                    node,
                    &format!("{DEVICES_ANNOTATION}: driver {}: {why}", devices.driver),
                );
                continue;
            }
            let result = match current {
                None => self.store.create(self.slices, "", want, false).map(|_| ()),
                Some(cur) if cur.pointer("/spec/devices") == want.pointer("/spec/devices") => {
                    Ok(())
                }
                Some(_) => {
                    want["spec"]["pool"]["generation"] = json!(generation + 1);
                    self.store
                        .update(self.slices, "", &slice_name, false, |cur| {
                            let mut new = cur.clone();
                            new["spec"] = want["spec"].clone();
                            Ok(new)
                        })
                        .map(|_| ())
                }
            };
            if let Err(e) = result {
                tracing::debug!(slice = %slice_name, error = %e.message,
                    "device driver stand-in: slice not written");
            }
        }
        for stale in published.keys() {
            self.delete(stale);
        }
    }

    fn delete(&self, slice: &str) {
        if let Err(e) = self
            .store
            .delete(self.slices, "", slice, DeleteOptions::default())
        {
            tracing::debug!(slice = %slice, error = %e.message,
                "device driver stand-in: slice not deleted");
        }
    }

    fn node_deleted(&self, node: &Value) {
        for slice in self.published(str_at(node, "/metadata/name")).keys() {
            self.delete(slice);
        }
    }

    fn resync(&self) {
        let nodes = self.store.list(self.nodes, None).0;
        for node in &nodes {
            self.sync_node(node);
        }
        // Slices of nodes deleted while this was not running.
        for slice in self.store.list(self.slices, None).0 {
            let managed = slice
                .pointer("/metadata/labels")
                .and_then(|l| l.get(MANAGED_BY_LABEL))
                .is_some();
            let node = str_at(&slice, "/spec/nodeName");
            if managed && self.store.get(self.nodes, "", node).is_none() {
                self.delete(str_at(&slice, "/metadata/name"));
            }
        }
    }
}

/// Runs the device driver stand-in until the store's event stream closes.
pub async fn run(store: Arc<Store>) {
    let (Some(nodes), Some(slices)) = (
        resources::lookup("", "v1", "nodes"),
        resources::lookup("resource.k8s.io", "v1", "resourceslices"),
    ) else {
        return;
    };
    let Some(recorder) = Recorder::new(store.clone(), COMPONENT) else {
        return;
    };
    let d = DeviceDriver {
        store,
        nodes,
        slices,
        recorder,
    };
    loop {
        // Subscribe first, then look at everything: nothing written in between is missed.
        let Ok(start) = d.store.watch(nodes.storage, None) else {
            return;
        };
        let mut live = start.live;
        d.resync();
        loop {
            let ev = match live.recv().await {
                Ok(ev) => ev,
                // Fell behind: look at everything again.
                Err(RecvError::Lagged) => break,
                Err(RecvError::Closed) => return,
            };
            if ev.storage != nodes.storage {
                continue;
            }
            let node = ev.object();
            if ev.kind == EventType::Deleted {
                d.node_deleted(&node);
            } else {
                d.sync_node(&node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn devices(driver: &str, count: usize, properties: &[(&str, &str)]) -> DriverDevices {
        DriverDevices {
            driver: driver.to_string(),
            count,
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[rstest]
    #[case::one_driver("gpu.example.com=4", Ok(vec![devices("gpu.example.com", 4, &[])]))]
    #[case::properties_and_two_drivers(
        "gpu.example.com=2, model=a100, memory=80Gi; nic.example.com=1",
        Ok(vec![devices("gpu.example.com", 2, &[("model", "a100"), ("memory", "80Gi")]),
                devices("nic.example.com", 1, &[])])
    )]
    #[case::empty("", Ok(vec![]))]
    #[case::no_count("gpu.example.com", Err("\"gpu.example.com\": expected <driver>=<count>, e.g. gpu.example.com=2".to_string()))]
    #[case::bad_count("gpu.example.com=many", Err("\"gpu.example.com=many\": the count is not a whole number".to_string()))]
    #[case::too_many("gpu.example.com=129", Err("\"gpu.example.com=129\": at most 128 devices per driver and node".to_string()))]
    #[case::twice("a.example.com=1;a.example.com=2", Err("driver \"a.example.com\" is described twice".to_string()))]
    #[case::bad_property("gpu.example.com=1,model", Err("\"model\": expected <key>=<value>".to_string()))]
    fn descriptions(#[case] text: &str, #[case] want: Result<Vec<DriverDevices>, String>) {
        assert_eq!(parse_description(text), want);
    }

    #[test]
    fn slice_has_one_pool_per_node_and_typed_attributes() {
        let node = json!({"metadata": {"name": "n1", "uid": "u1"}});
        let d = devices(
            "gpu.example.com",
            2,
            &[
                ("model", "a100"),
                ("memory", "80Gi"),
                ("cores", "108"),
                ("mig", "true"),
            ],
        );
        let attrs = |i: usize| {
            json!({"index": {"int": i}, "model": {"string": "a100"}, "cores": {"int": 108},
                   "mig": {"bool": true}})
        };
        assert_eq!(
            slice_for(&node, &d, 3),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": "n1-gpu.example.com",
                                "labels": {MANAGED_BY_LABEL: "true"},
                                "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                    "name": "n1", "uid": "u1", "controller": true}]},
                   "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                            "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
                            "devices": [
                                {"name": "gpu-0", "attributes": attrs(0),
                                 "capacity": {"memory": {"value": "80Gi"}}},
                                {"name": "gpu-1", "attributes": attrs(1),
                                 "capacity": {"memory": {"value": "80Gi"}}}]}})
        );
    }
}

//! The structured allocator on one node, as DynamicResources' Filter calls it per node.
//! Cases:
//! - `one_gpu`: one claim for one device of a class, 8 devices on the node, half in use;
//! - `two_gpus_same_numa`: one claim for two devices sharing `numa` (matchAttribute), where
//!   the free devices alternate NUMA nodes so the search has to backtrack;
//! - `unschedulable_explained`: a claim for 5 devices of which only 4 are free, including
//!   the explanation Filter and `simulate` print.
//!
//! The class selector `device.driver == "gpu.example.com"` is evaluated by a stand-in
//! that compares the driver, so the numbers are the allocator's own cost, not CEL's.
//!
//! Run: `cargo bench -p kubesched-plugins --bench allocator`.

// A benchmark whose setup fails has nothing to measure: stopping loudly is right.
#![allow(clippy::panic)]

use std::collections::{BTreeMap, HashSet};

use criterion::{criterion_group, criterion_main, Criterion};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Device, DeviceAttribute, DeviceClaim, DeviceClass, DeviceClassSpec,
    DeviceConstraint, DeviceRequest, DeviceSelector, ExactDeviceRequest, ResourceClaim,
    ResourceClaimSpec, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use plugins::dynamicresources::allocator::{
    Allocator, DeviceId, Features, Outcome, SelectorError, Selectors,
};

const DRIVER: &str = "gpu.example.com";
const DEVICES: usize = 8;

/// Understands only `device.driver == "<driver>"`, the class selector below.
struct DriverOnly;

impl Selectors for DriverOnly {
    fn matches(&self, expression: &str, driver: &str, _: &Device) -> Result<bool, SelectorError> {
        let want = expression
            .strip_prefix("device.driver == \"")
            .and_then(|s| s.strip_suffix('"'))
            .ok_or_else(|| SelectorError::Compile(format!("unexpected {expression:?}")))?;
        Ok(want == driver)
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: None,
        ..Default::default()
    }
}

fn class() -> Vec<DeviceClass> {
    vec![DeviceClass {
        metadata: meta("gpu"),
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: format!("device.driver == \"{DRIVER}\""),
                }),
            }]),
            ..Default::default()
        },
    }]
}

fn slice() -> ResourceSlice {
    let devices = (0..DEVICES)
        .map(|i| Device {
            name: format!("gpu-{i}"),
            attributes: Some(BTreeMap::from([(
                "numa".to_string(),
                DeviceAttribute {
                    int: Some((i % 2) as i64),
                    ..Default::default()
                },
            )])),
            ..Default::default()
        })
        .collect();
    ResourceSlice {
        metadata: meta("node-1-gpu"),
        spec: ResourceSliceSpec {
            driver: DRIVER.to_string(),
            node_name: Some("node-1".to_string()),
            pool: ResourcePool {
                name: "node-1".to_string(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..Default::default()
        },
    }
}

fn claim(count: i64, same_numa: bool) -> ResourceClaim {
    ResourceClaim {
        metadata: meta("gpus"),
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: "gpu".to_string(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "gpu".to_string(),
                        count: Some(count),
                        allocation_mode: Some("ExactCount".to_string()),
                        ..Default::default()
                    }),
                    first_available: None,
                }]),
                constraints: same_numa.then(|| {
                    vec![DeviceConstraint {
                        match_attribute: Some(format!("{DRIVER}/numa")),
                        ..Default::default()
                    }]
                }),
                config: None,
            }),
        },
        status: None,
    }
}

fn in_use(devices: &[usize]) -> HashSet<DeviceId> {
    devices
        .iter()
        .map(|i| DeviceId::new(DRIVER, "node-1", &format!("gpu-{i}")))
        .collect()
}

fn bench(c: &mut Criterion) {
    let classes = class();
    let slices = vec![slice()];
    let node = Node {
        metadata: meta("node-1"),
        ..Default::default()
    };
    let cases = [
        ("one_gpu", claim(1, false), in_use(&[0, 1, 2, 3]), true),
        // gpu-0 (numa 0) is free, then only numa-1 devices: the first choice must go.
        (
            "two_gpus_same_numa",
            claim(2, true),
            in_use(&[2, 4, 6]),
            true,
        ),
        (
            "unschedulable_explained",
            claim(5, false),
            in_use(&[0, 1, 2, 3]),
            false,
        ),
    ];
    for (name, claim, used, fits) in &cases {
        let allocator = Allocator::new(Features::ALL, used, &classes, &slices, &DriverOnly);
        let got = allocator.allocate(&node, &[claim]);
        match (&got, fits) {
            (Ok(Outcome::Allocated(_)), true) | (Ok(Outcome::Unschedulable(_)), false) => {}
            _ => panic!("{name}: unexpected outcome {got:?}"),
        }
        c.bench_function(name, |b| {
            b.iter(|| match allocator.allocate(&node, &[claim]) {
                Ok(Outcome::Unschedulable(e)) => e.to_string().len(),
                Ok(Outcome::Allocated(r)) => r.len(),
                Err(e) => panic!("{e}"),
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

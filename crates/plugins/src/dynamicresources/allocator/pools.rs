//! Which resource pools a node can reach, and whether each is usable.
//!
//! Upstream: staging/src/k8s.io/dynamic-resource-allocation/structured/internal/stable/pools_stable.go.

use std::collections::{BTreeMap, HashSet};

use framework::labels::NodeSelector;
use k8s_openapi::api::core::v1::{Node, NodeSelector as V1NodeSelector};
use k8s_openapi::api::resource::v1::ResourceSlice;

use super::AllocateError;

/// One pool of one driver as the node sees it: only the slices of the newest generation.
#[derive(Debug)]
pub(super) struct Pool<'a> {
    pub driver: &'a str,
    pub name: &'a str,
    pub slices: Vec<&'a ResourceSlice>,
    /// Fewer slices of the newest generation than `resourceSliceCount` says: the driver is
    /// in the middle of publishing the pool.
    pub incomplete: bool,
    /// Why the pool cannot be used (a device name appears twice), if it cannot.
    pub invalid: Option<String>,
}

impl Pool<'_> {
    /// `driver/pool`, as upstream names a pool in messages.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }
}

/// Whether a slice (or device) with this node selection reaches the node. Exactly one of the
/// three fields is set on a valid object; a slice with none is something newer than this
/// code and reaches no node.
fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&V1NodeSelector>,
) -> Result<bool, String> {
    let this_node = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(name) = node_name.filter(|n| !n.is_empty()) {
        return Ok(name == this_node);
    }
    if all_nodes {
        return Ok(true);
    }
    if let Some(selector) = selector {
        let compiled = NodeSelector::compile(selector);
        if let Some(err) = compiled.errors.first() {
            return Err(format!("failed to parse node selector: {err}"));
        }
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        return Ok(compiled.matches(labels, this_node));
    }
    Ok(false)
}

/// The pools with devices the node can reach, sorted by driver and pool name so that the
/// search (and with it the chosen devices) does not depend on the informer's order.
pub(super) fn gather_pools<'a>(
    slices: &[&'a ResourceSlice],
    node: &Node,
) -> Result<Vec<Pool<'a>>, AllocateError> {
    let mut pools: BTreeMap<(&'a str, &'a str), Pool<'a>> = BTreeMap::new();
    for &slice in slices {
        let spec = &slice.spec;
        let slice_name = slice.metadata.name.as_deref().unwrap_or_default();
        let reaches = if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
            || spec.all_nodes == Some(true)
            || spec.node_selector.is_some()
        {
            node_matches(
                node,
                spec.node_name.as_deref(),
                spec.all_nodes == Some(true),
                spec.node_selector.as_ref(),
            )
            .map_err(|message| AllocateError::NodeSelection {
                slice: slice_name.to_string(),
                message,
            })?
        } else if spec.per_device_node_selection == Some(true) {
            let mut any = false;
            for device in spec.devices.iter().flatten() {
                let matches = node_matches(
                    node,
                    device.node_name.as_deref(),
                    device.all_nodes == Some(true),
                    device.node_selector.as_ref(),
                )
                .map_err(|message| AllocateError::NodeSelection {
                    slice: slice_name.to_string(),
                    message,
                })?;
                if matches {
                    any = true;
                    break;
                }
            }
            any
        } else {
            false
        };
        if !reaches {
            continue;
        }
        add_slice(&mut pools, slice);
    }
    Ok(pools
        .into_values()
        .map(|mut pool| {
            let want = pool
                .slices
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            pool.incomplete = i64::try_from(pool.slices.len()).unwrap_or(i64::MAX) != want;
            pool.invalid = duplicate_device(&pool.slices);
            pool
        })
        .collect())
}

/// Adds a slice to its pool unless an newer generation of the pool is already there; a
/// newer generation replaces the slices gathered so far.
fn add_slice<'a>(pools: &mut BTreeMap<(&'a str, &'a str), Pool<'a>>, slice: &'a ResourceSlice) {
    let spec = &slice.spec;
    let key = (spec.driver.as_str(), spec.pool.name.as_str());
    let pool = pools.entry(key).or_insert_with(|| Pool {
        driver: key.0,
        name: key.1,
        slices: Vec::new(),
        incomplete: false,
        invalid: None,
    });
    let current = pool.slices.first().map(|s| s.spec.pool.generation);
    match current {
        Some(g) if spec.pool.generation < g => return,
        Some(g) if spec.pool.generation > g => pool.slices.clear(),
        _ => {}
    }
    pool.slices.push(slice);
}

fn duplicate_device(slices: &[&ResourceSlice]) -> Option<String> {
    let mut seen = HashSet::new();
    for slice in slices {
        for device in slice.spec.devices.iter().flatten() {
            if !seen.insert(device.name.as_str()) {
                return Some(format!("duplicate device name {}", device.name));
            }
        }
    }
    None
}

/// Whether a device of a slice with per-device node selection reaches the node.
pub(super) fn device_reaches_node(
    node: &Node,
    device: &k8s_openapi::api::resource::v1::Device,
) -> Result<bool, String> {
    node_matches(
        node,
        device.node_name.as_deref(),
        device.all_nodes == Some(true),
        device.node_selector.as_ref(),
    )
}

//! The in-tree plugin registry: name → factory.
//!
//! Upstream: pkg/scheduler/framework/plugins/registry.go. A factory decodes and validates the
//! plugin's `args` (absent = upstream defaults) and builds the plugin once per profile.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::{ArgsError, Handle, Plugin};

use crate::names;

/// Builds a plugin from its (optional) `args`. Errors name fields relative to `args`.
pub type Factory = fn(
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>>;

/// Plugin name → factory.
pub type Registry = BTreeMap<&'static str, Factory>;

/// Every in-tree plugin kubesched implements.
pub fn in_tree_registry() -> Registry {
    let mut r: Registry = BTreeMap::new();
    r.insert(names::PRIORITY_SORT, crate::queuesort::new);
    r.insert(names::SCHEDULING_GATES, crate::schedulinggates::new);
    r.insert(names::NODE_UNSCHEDULABLE, crate::nodeunschedulable::new);
    r.insert(names::NODE_NAME, crate::nodename::new);
    r.insert(names::TAINT_TOLERATION, crate::tainttoleration::new);
    r.insert(names::NODE_AFFINITY, crate::nodeaffinity::new);
    r.insert(names::NODE_PORTS, crate::nodeports::new);
    r.insert(names::NODE_RESOURCES_FIT, crate::noderesources::new_fit);
    r.insert(
        names::NODE_RESOURCES_BALANCED_ALLOCATION,
        crate::noderesources::new_balanced_allocation,
    );
    r.insert(names::POD_TOPOLOGY_SPREAD, crate::podtopologyspread::new);
    r.insert(names::INTER_POD_AFFINITY, crate::interpodaffinity::new);
    r.insert(names::IMAGE_LOCALITY, crate::imagelocality::new);
    r.insert(names::DEFAULT_PREEMPTION, crate::defaultpreemption::new);
    r.insert(names::DEFAULT_BINDER, crate::defaultbinder::new);
    r
}

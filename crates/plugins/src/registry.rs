//! The plugin registry: name → factory.
//!
//! Upstream: pkg/scheduler/framework/plugins/registry.go (the in-tree registry) and
//! pkg/scheduler/framework/runtime/registry.go (`Registry.Merge`, used for out-of-tree
//! plugins). A factory decodes and validates the plugin's `args` (absent = upstream
//! defaults) and builds the plugin once per profile.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::{ArgsError, Handle, Plugin};

use crate::names;

/// Builds a plugin from its (optional) `args`. Errors name fields relative to `args`.
///
/// A closure, as upstream's factories are, so that an out-of-tree plugin can capture what it
/// was set up with; an in-tree plugin's `new` is a plain function, which coerces to it. The
/// registry is read once per profile at start-up, so the indirection costs nothing per cycle.
pub type Factory = Arc<
    dyn Fn(Option<&serde_json::Value>, &Handle) -> Result<Arc<dyn Plugin>, Vec<ArgsError>>
        + Send
        + Sync,
>;

/// Plugin name → factory.
pub type Registry = BTreeMap<&'static str, Factory>;

/// Why two registries cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A plugin of this name is already registered: an out-of-tree plugin may not replace an
    /// in-tree one, nor be registered twice.
    #[error("a plugin named {0} already exists")]
    AlreadyExists(String),
}

/// Adds every plugin of `from` to `into`. A name registered in both is refused, and then
/// `into` is left as it was. Upstream: Registry.Merge.
pub fn merge(into: &mut Registry, from: Registry) -> Result<(), RegistryError> {
    if let Some(name) = from.keys().find(|name| into.contains_key(*name)) {
        return Err(RegistryError::AlreadyExists((*name).to_string()));
    }
    into.extend(from);
    Ok(())
}

/// Every in-tree plugin kubesched implements.
pub fn in_tree_registry() -> Registry {
    let mut r: Registry = BTreeMap::new();
    r.insert(names::PRIORITY_SORT, Arc::new(crate::queuesort::new));
    r.insert(
        names::SCHEDULING_GATES,
        Arc::new(crate::schedulinggates::new),
    );
    r.insert(
        names::NODE_UNSCHEDULABLE,
        Arc::new(crate::nodeunschedulable::new),
    );
    r.insert(names::NODE_NAME, Arc::new(crate::nodename::new));
    r.insert(
        names::TAINT_TOLERATION,
        Arc::new(crate::tainttoleration::new),
    );
    r.insert(names::NODE_AFFINITY, Arc::new(crate::nodeaffinity::new));
    r.insert(names::NODE_PORTS, Arc::new(crate::nodeports::new));
    r.insert(
        names::NODE_VOLUME_LIMITS,
        Arc::new(crate::nodevolumelimits::new),
    );
    r.insert(
        names::VOLUME_RESTRICTIONS,
        Arc::new(crate::volumerestrictions::new),
    );
    r.insert(names::VOLUME_BINDING, Arc::new(crate::volumebinding::new));
    r.insert(
        names::DYNAMIC_RESOURCES,
        Arc::new(crate::dynamicresources::new),
    );
    r.insert(names::VOLUME_ZONE, Arc::new(crate::volumezone::new));
    r.insert(
        names::NODE_RESOURCES_FIT,
        Arc::new(crate::noderesources::new_fit),
    );
    r.insert(
        names::NODE_RESOURCES_BALANCED_ALLOCATION,
        Arc::new(crate::noderesources::new_balanced_allocation),
    );
    r.insert(
        names::POD_TOPOLOGY_SPREAD,
        Arc::new(crate::podtopologyspread::new),
    );
    r.insert(
        names::INTER_POD_AFFINITY,
        Arc::new(crate::interpodaffinity::new),
    );
    r.insert(names::IMAGE_LOCALITY, Arc::new(crate::imagelocality::new));
    r.insert(
        names::DEFAULT_PREEMPTION,
        Arc::new(crate::defaultpreemption::new),
    );
    r.insert(names::DEFAULT_BINDER, Arc::new(crate::defaultbinder::new));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_of(r: &Registry) -> Vec<&'static str> {
        r.keys().copied().collect()
    }

    fn registry(names: &[&'static str]) -> Registry {
        names
            .iter()
            .map(|n| (*n, Arc::new(crate::queuesort::new) as Factory))
            .collect()
    }

    #[rstest::rstest]
    #[case::new_names_are_added(&["A"], &["B", "C"], Ok(vec!["A", "B", "C"]))]
    #[case::an_empty_registry_adds_nothing(&["A"], &[], Ok(vec!["A"]))]
    #[case::a_name_in_both_is_refused_and_nothing_is_added(
        &["A", "B"],
        &["C", "B"],
        Err((RegistryError::AlreadyExists("B".into()), vec!["A", "B"]))
    )]
    fn merge_adds_new_names_and_refuses_a_clash(
        #[case] into: &[&'static str],
        #[case] from: &[&'static str],
        #[case] want: Result<Vec<&'static str>, (RegistryError, Vec<&'static str>)>,
    ) {
        let mut r = registry(into);
        let got = match merge(&mut r, registry(from)) {
            Ok(()) => Ok(names_of(&r)),
            Err(e) => Err((e, names_of(&r))),
        };
        assert_eq!(got, want);
    }

    #[test]
    fn clash_message_is_upstreams() {
        assert_eq!(
            RegistryError::AlreadyExists("TaintToleration".into()).to_string(),
            "a plugin named TaintToleration already exists"
        );
    }
}

//! kubesched's in-tree scheduling plugins, one module per upstream plugin package.
//!
//! Upstream: pkg/scheduler/framework/plugins. Each module reads top to bottom in the same
//! order: what it decides, `NAME`, reasons, the struct, `new`, `impl Plugin`, one impl per
//! extension point in framework order, events to register, private helpers. Start with
//! [`registry`] (name → factory) and [`names`].
//!
//! **Invariant:** this crate depends only on `framework`: in-tree plugins see exactly what an
//! out-of-tree plugin sees.

pub mod helper;
pub mod names;
pub mod registry;

pub mod defaultbinder;
pub mod defaultpreemption;
pub mod dynamicresources;
pub mod imagelocality;
pub mod interpodaffinity;
pub mod nodeaffinity;
pub mod nodename;
pub mod nodeports;
pub mod noderesources;
pub mod nodeunschedulable;
pub mod nodevolumelimits;
pub mod podtopologyspread;
pub mod queuesort;
pub mod schedulinggates;
pub mod tainttoleration;
pub mod volumebinding;
pub mod volumerestrictions;
pub mod volumezone;

pub use registry::{in_tree_registry, Factory, Registry, RegistryError};

#[cfg(test)]
mod row_paths_tests;

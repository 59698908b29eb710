//! The scheduler's in-memory backends: the scheduling queue of pending pods and the cache of
//! nodes and pods (with assumed pods) that snapshots are taken from.
//!
//! Upstream: pkg/scheduler/backend. Both are plain structs with a single writer; the
//! scheduling loop that wraps them comes with the rest of issue 4.

pub mod cache;
pub mod queue;

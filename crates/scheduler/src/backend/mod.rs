//! The scheduler's in-memory backends: the scheduling queue of pending pods and the cache of
//! nodes and pods (with assumed pods) that snapshots are taken from.
//!
//! Upstream: pkg/scheduler/backend. Both are plain structs with a single writer; the
//! scheduler (`crate::scheduler`) wraps them under its one lock.

pub mod cache;
pub mod queue;

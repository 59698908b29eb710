//! The scheduler's in-memory backends: the scheduling queue (and, beside it, the cache).
//!
//! Upstream: pkg/scheduler/backend.

pub mod queue;

//! The scheduler's backend: the cache of nodes and pods it schedules against.

pub mod cache;

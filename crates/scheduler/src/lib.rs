//! kubesched's runtime: configuration, profiles, the scheduling cycle.

pub mod config;

//! kubesched's runtime: configuration, profiles, the scheduling cycle.
//!
//! Start with [`schedule_one`] (one pod's scheduling cycle), [`runtime`] (a profile's
//! plugins, run extension point by extension point) and [`config`]
//! (`KubeSchedulerConfiguration` v1). [`simulate`] drives the cycle from files.
//!
//! **Invariant:** the scheduling core never talks HTTP, except to configured extenders
//! ([`extender`]), as upstream does; it reads a [`framework::Snapshot`]
//! and reports decisions as values.

pub mod app;
pub mod backend;
pub mod builder;
pub mod client;
pub mod clock;
pub mod config;
pub mod decisions;
pub mod extender;
pub mod features;
pub mod memory;
pub mod metrics;
pub mod profile;
pub mod runtime;
pub mod schedule_one;
pub mod scheduler;
pub mod serve;
pub mod simulate;
pub mod simulator_annotations;
pub mod source;
pub mod web;

pub use crate::builder::{Built, SchedulerBuilder, Services};
pub use crate::scheduler::{Scheduler, SchedulerOptions};

#[cfg(test)]
mod testing;

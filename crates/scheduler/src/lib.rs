//! kubesched's runtime: configuration, profiles, the scheduling cycle.
//!
//! Start with [`schedule_one`] (one pod's scheduling cycle) and [`runtime`] (a profile's
//! plugins, run extension point by extension point).
//!
//! **Invariant:** the scheduling core never talks HTTP; it reads a [`framework::Snapshot`]
//! and reports decisions as values.

pub mod runtime;
pub mod schedule_one;
pub mod simulate;

#[cfg(test)]
mod testing;

//! `apiserver`: a local Kubernetes-compatible API server that real kubectl, kube-rs and the
//! official Python client use unmodified.
//!
//! Start reading at [`Server`]; requests are routed in `http`, objects live in [`store`].
//! **Invariant:** this crate never depends on the scheduler, plugins or framework crates:
//! the scheduler reaches it only over HTTP, as it would a real cluster.

pub mod meta;
pub mod patch;
pub mod resources;
pub mod selectors;
pub mod status;
pub mod store;

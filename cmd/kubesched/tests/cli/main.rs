//! Tests of the `kubesched` binary itself, one test binary for every command.

mod apiserver;
mod bench;
mod invariants;
mod scenario;
mod simulate;
mod support;
mod up;
mod volumes;
mod webview;
mod workloads;

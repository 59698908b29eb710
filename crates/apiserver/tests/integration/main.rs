//! Integration tests: the API server on 127.0.0.1:0 in-process, driven over HTTP by raw
//! requests, by real kubectl (from `KUBECTL`), by kube-rs, and by the official Python client (from
//! `KUBESCHED_PYTHON`); scripts/test installs both into .venv.

// The harness helpers are not #[test] functions, so clippy's in-tests allowances miss them;
// a failed setup step there is a failed test, which is what expect says.
#![allow(clippy::expect_used)]

mod admission;
mod browser;
mod connections;
mod deployments;
mod dra;
mod harness;
mod http_api;
mod jobs;
mod kube_rs;
mod kubectl;
mod openapi;
mod protobuf;
mod python;
mod sets;
mod storage;
mod validation;
mod volumes;
mod wire_bytes;
mod workloads;

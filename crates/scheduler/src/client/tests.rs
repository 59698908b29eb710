//! Tests of the client layer.

//! Placeholder until the plugins land.

use std::sync::Arc;

use framework::{ArgsError, Handle, Plugin};

pub fn new_fit(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Err(vec![ArgsError::new("", "plugin not built yet")])
}

pub fn new_balanced_allocation(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Err(vec![ArgsError::new("", "plugin not built yet")])
}

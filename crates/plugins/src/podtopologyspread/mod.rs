//! Placeholder until the plugin lands.

use std::sync::Arc;

use framework::{ArgsError, Handle, Plugin};

pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Err(vec![ArgsError::new("", "plugin not built yet")])
}

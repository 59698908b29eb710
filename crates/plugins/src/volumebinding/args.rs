//! VolumeBinding's arguments: decoding with upstream's defaults, and upstream's validation.
//!
//! Upstream: pkg/scheduler/apis/config/v1 (VolumeBindingArgs, SetDefaults_VolumeBindingArgs)
//! and validation_pluginargs.go (ValidateVolumeBindingArgsWithOptions). StorageCapacityScoring
//! is on, so `shape` is validated and, when absent or empty, defaults to preferring nodes
//! with the most free capacity.

use serde::{Deserialize, Serialize};

use framework::ArgsError;

use crate::noderesources::args::{shape_errors, UtilizationShapePoint, MAX_CUSTOM_PRIORITY_SCORE};

/// How long PreBind waits for the claims to be bound, by default.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;

/// `pluginConfig[].args` of VolumeBinding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// Seconds PreBind waits for the PV controller to bind the pod's claims; 0 does not
    /// wait at all.
    pub bind_timeout_seconds: i64,
    /// Score by storage utilization (requested / capacity of the volumes a node would use),
    /// a broken-linear function of 0-100 % to 0-10.
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        VolumeBindingArgs {
            bind_timeout_seconds: DEFAULT_BIND_TIMEOUT_SECONDS,
            shape: None,
        }
    }
}

impl VolumeBindingArgs {
    /// The scoring shape: the configured one, or upstream's default (0 % → 10, 100 % → 0)
    /// when absent or empty.
    pub fn shape_or_default(&self) -> Vec<UtilizationShapePoint> {
        match &self.shape {
            Some(points) if !points.is_empty() => points.clone(),
            _ => vec![
                UtilizationShapePoint {
                    utilization: 0,
                    score: MAX_CUSTOM_PRIORITY_SCORE as i32,
                },
                UtilizationShapePoint {
                    utilization: 100,
                    score: 0,
                },
            ],
        }
    }

    /// Upstream's validation, after defaulting: a timeout that is not negative and a valid
    /// shape.
    pub fn validate(&self) -> Vec<ArgsError> {
        let mut errs = Vec::new();
        if self.bind_timeout_seconds < 0 {
            errs.push(ArgsError::new(
                "bindTimeoutSeconds",
                format!(
                    "Invalid value: {}: invalid BindTimeoutSeconds, should not be a negative value",
                    self.bind_timeout_seconds
                ),
            ));
        }
        errs.extend(shape_errors(&self.shape_or_default(), "shape"));
        errs
    }
}

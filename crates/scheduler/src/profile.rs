//! Profiles: one [`Framework`] per `profiles[]` entry of the configuration, keyed by
//! `schedulerName`.
//!
//! Upstream: pkg/scheduler/profile. Building a profile instantiates its plugins, so errors
//! in plugin args and extension points surface here, as configuration errors with the
//! profile's field path.

use std::collections::BTreeMap;

use framework::Handle;
use plugins::Registry;

use crate::config::{
    unimplemented_upstream_plugins, ConfigError, FieldError, KubeSchedulerConfiguration,
    KubeSchedulerProfile, PluginSet,
};
use crate::runtime::{ExtensionPoint, Framework, PluginSetSpec, ProfileSpec};

/// The frameworks of a configuration, in `profiles[]` order.
#[derive(Debug)]
pub struct Profiles {
    pub frameworks: Vec<Framework>,
    /// Non-fatal notes, e.g. upstream plugins kubesched leaves out.
    pub warnings: Vec<String>,
}

impl Profiles {
    /// Builds every profile of a loaded (defaulted, validated) configuration. `source` names
    /// the configuration in errors.
    pub fn build(
        cfg: &KubeSchedulerConfiguration,
        registry: &Registry,
        handle: &Handle,
        source: &str,
    ) -> Result<Profiles, ConfigError> {
        let mut frameworks = Vec::new();
        let mut warnings = Vec::new();
        let mut errors = Vec::new();
        // An extender a configuration names would decide placements; kubesched does not call
        // HTTP extenders, so running without them would place pods where the user's extender
        // would not. Refused rather than left out with a warning.
        if !cfg.extenders.is_empty() {
            errors.push(FieldError::new(
                "extenders",
                format!(
                    "Forbidden: kubesched does not call HTTP extenders ({} configured); \
                     remove them to schedule without them",
                    cfg.extenders.len()
                ),
            ));
        }
        for (i, profile) in cfg.profiles.iter().enumerate() {
            let spec = profile_spec(profile);
            match Framework::build(
                &spec,
                registry,
                handle.clone(),
                unimplemented_upstream_plugins(),
            ) {
                Ok((f, w)) => {
                    frameworks.push(f);
                    warnings.extend(w);
                }
                Err(errs) => errors.extend(
                    errs.into_iter()
                        .map(|e| FieldError::new(format!("profiles[{i}].{}", e.path), e.message)),
                ),
            }
        }
        if errors.is_empty() {
            Ok(Profiles {
                frameworks,
                warnings,
            })
        } else {
            Err(ConfigError::Invalid {
                file: source.to_string(),
                errors,
            })
        }
    }
}

/// What the runtime needs of a configured profile.
pub fn profile_spec(profile: &KubeSchedulerProfile) -> ProfileSpec {
    let convert = |set: &PluginSet| PluginSetSpec {
        enabled: set
            .enabled
            .iter()
            .map(|p| (p.name.clone(), p.weight.unwrap_or(0)))
            .collect(),
        disabled: set.disabled.iter().map(|p| p.name.clone()).collect(),
    };
    let mut spec = ProfileSpec {
        scheduler_name: profile.scheduler_name().to_string(),
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
        ..Default::default()
    };
    if let Some(plugins) = &profile.plugins {
        spec.multi_point = convert(&plugins.multi_point);
        let points = plugins.extension_points();
        for (point, (field, set)) in ExtensionPoint::ALL.iter().zip(points.iter()) {
            debug_assert_eq!(point.field(), *field);
            spec.points.insert(*point, convert(set));
        }
    }
    let mut args = BTreeMap::new();
    for (j, pc) in profile.plugin_config.iter().enumerate() {
        if let Some(a) = &pc.args {
            args.entry(pc.name.clone()).or_insert((j, a.clone()));
        }
    }
    spec.plugin_args = args;
    spec
}

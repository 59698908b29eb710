//! Profiles: one [`Framework`] per `profiles[]` entry of the configuration, keyed by
//! `schedulerName`.
//!
//! Upstream: pkg/scheduler/profile. Building a profile instantiates its plugins, so errors
//! in plugin args and extension points surface here, as configuration errors with the
//! profile's field path.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::{Handle, PreemptionExtender};
use plugins::Registry;

use crate::config::{
    unimplemented_upstream_plugins, ConfigError, FieldError, KubeSchedulerConfiguration,
    KubeSchedulerProfile, PluginSet,
};
use crate::extender::{HttpExtender, PreemptionCaller};
use crate::runtime::{ExtensionPoint, Framework, PluginSetSpec, ProfileSpec};

/// The frameworks of a configuration, in `profiles[]` order, and its extenders.
#[derive(Debug)]
pub struct Profiles {
    pub frameworks: Vec<Framework>,
    /// One per `extenders[]` entry, in order; shared by all profiles.
    pub extenders: Vec<HttpExtender>,
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
        let extenders = build_extenders(cfg, &mut errors);
        let mut handle = handle.clone();
        handle.preemption_extenders = preemption_extenders(&extenders, &mut errors);
        let ignored = ignored_extender_resources(cfg);
        for (i, profile) in cfg.profiles.iter().enumerate() {
            let mut spec = profile_spec(profile);
            if !ignored.is_empty() {
                ignore_in_fit(&mut spec, &ignored, profile.plugin_config.len());
            }
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
                extenders,
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

/// The extenders of `cfg`. A part of an extender kubesched does not call is refused with a
/// field error: running without it would place pods where the user's extender would not.
fn build_extenders(
    cfg: &KubeSchedulerConfiguration,
    errors: &mut Vec<FieldError>,
) -> Vec<HttpExtender> {
    let mut extenders = Vec::new();
    for (i, ext) in cfg.extenders.iter().enumerate() {
        let path = format!("extenders[{i}]");
        match HttpExtender::new(ext) {
            Ok(e) => extenders.push(e),
            Err(e) => errors.push(FieldError::new(
                path,
                format!("Invalid value: {}", crate::extender::error_chain(&e)),
            )),
        }
    }
    extenders
}

/// The extenders with a preempt verb, for DefaultPreemption. Their calls run on the tokio
/// runtime the profiles are built on: a scheduler builds them there.
fn preemption_extenders(
    extenders: &[HttpExtender],
    errors: &mut Vec<FieldError>,
) -> Arc<[Arc<dyn PreemptionExtender>]> {
    let mut out: Vec<Arc<dyn PreemptionExtender>> = Vec::new();
    for (i, ext) in extenders.iter().enumerate() {
        if !ext.supports_preemption() {
            continue;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => out.push(Arc::new(PreemptionCaller::new(ext.clone(), rt))),
            Err(_) => errors.push(FieldError::new(
                format!("extenders[{i}].preemptVerb"),
                "Forbidden: an extender's preemptVerb is called only by a scheduler running on a tokio runtime",
            )),
        }
    }
    Arc::from(out)
}

/// The managed resources extenders mark `ignoredByScheduler`, in configuration order.
fn ignored_extender_resources(cfg: &KubeSchedulerConfiguration) -> Vec<String> {
    cfg.extenders
        .iter()
        .flat_map(|e| &e.managed_resources)
        .filter(|r| r.ignored_by_scheduler)
        .map(|r| r.name.clone())
        .collect()
}

/// Makes NodeResourcesFit leave out `ignored`: its args' `ignoredResources` become exactly
/// that list (the extenders' say wins over the profile's, as upstream). A profile without
/// NodeResourcesFit args gets them at `index`, past its `pluginConfig`.
fn ignore_in_fit(spec: &mut ProfileSpec, ignored: &[String], index: usize) {
    let entry = spec
        .plugin_args
        .entry(plugins::names::NODE_RESOURCES_FIT.to_string())
        .or_insert_with(|| (index, serde_json::json!({})));
    if let Some(args) = entry.1.as_object_mut() {
        args.insert("ignoredResources".to_string(), serde_json::json!(ignored));
    }
}

#[cfg(test)]
mod tests {
    use framework::{Handle, Parallelizer};
    use rstest::rstest;

    use super::Profiles;
    use crate::config::FieldError;
    use crate::memory::MemoryCluster;

    /// Builds the profiles of a configuration with `extenders` (YAML list items) and returns
    /// how many extenders were built, or the field errors.
    fn build(extenders: &str) -> Result<usize, Vec<FieldError>> {
        let yaml = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             extenders:\n{extenders}"
        );
        let cfg = crate::config::load_str(&yaml, "test").map_err(|e| e.field_errors().to_vec())?;
        let handle = Handle::new(Parallelizer::sequential(), MemoryCluster::new());
        Profiles::build(&cfg, &plugins::in_tree_registry(), &handle, "test")
            .map(|p| p.extenders.len())
            .map_err(|e| e.field_errors().to_vec())
    }

    fn err(path: &str, message: &str) -> FieldError {
        FieldError::new(path, message)
    }

    #[rstest]
    #[case::filter_prioritize_and_every_honoured_field_are_built(
        "- urlPrefix: http://127.0.0.1:1/x\n  filterVerb: filter\n  prioritizeVerb: p\n  weight: 2\n  nodeCacheCapable: true\n  ignorable: true\n  httpTimeout: 2s\n  enableHTTPS: true\n  tlsConfig: {insecure: true, serverName: ext.example.com}\n  managedResources: [{name: example.com/gpu}]\n",
        Ok(1)
    )]
    #[case::preempt_verb_outside_a_runtime_is_refused(
        "- urlPrefix: http://a\n  filterVerb: filter\n- urlPrefix: http://b\n  preemptVerb: preempt\n",
        Err(vec![err("extenders[1].preemptVerb", "Forbidden: an extender's preemptVerb is called only by a scheduler running on a tokio runtime")])
    )]
    #[case::unreadable_ca_file_is_a_field_error(
        "- urlPrefix: https://a\n  tlsConfig: {caFile: /nonexistent/ca.crt}\n",
        Err(vec![err("extenders[0]", "Invalid value: extender https://a: cannot read tlsConfig file /nonexistent/ca.crt: No such file or directory (os error 2)")])
    )]
    fn extenders_in_profiles(
        #[case] extenders: &str,
        #[case] want: Result<usize, Vec<FieldError>>,
    ) {
        assert_eq!(build(extenders), want);
    }
}

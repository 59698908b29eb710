//! Building a [`Framework`] from a profile: instantiate each needed plugin once with its
//! args, place it at the extension points it is enabled for, expand `multiPoint`, and check
//! what upstream checks (a plugin enabled at a point it does not implement, duplicates,
//! exactly one QueueSort, at least one Bind).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use framework::{Handle, Plugin};
use plugins::Registry;
use thiserror::Error;

use super::Framework;

/// An extension point, in framework order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExtensionPoint {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl ExtensionPoint {
    pub const ALL: [ExtensionPoint; 12] = [
        ExtensionPoint::PreEnqueue,
        ExtensionPoint::QueueSort,
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PostFilter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
        ExtensionPoint::Reserve,
        ExtensionPoint::Permit,
        ExtensionPoint::PreBind,
        ExtensionPoint::Bind,
        ExtensionPoint::PostBind,
    ];

    /// The configuration field name (`preFilter`).
    pub fn field(self) -> &'static str {
        match self {
            ExtensionPoint::PreEnqueue => "preEnqueue",
            ExtensionPoint::QueueSort => "queueSort",
            ExtensionPoint::PreFilter => "preFilter",
            ExtensionPoint::Filter => "filter",
            ExtensionPoint::PostFilter => "postFilter",
            ExtensionPoint::PreScore => "preScore",
            ExtensionPoint::Score => "score",
            ExtensionPoint::Reserve => "reserve",
            ExtensionPoint::Permit => "permit",
            ExtensionPoint::PreBind => "preBind",
            ExtensionPoint::Bind => "bind",
            ExtensionPoint::PostBind => "postBind",
        }
    }

    /// Upstream's interface name, used in its error messages (`PreFilterPlugin`).
    pub fn interface_name(self) -> &'static str {
        match self {
            ExtensionPoint::PreEnqueue => "PreEnqueuePlugin",
            ExtensionPoint::QueueSort => "QueueSortPlugin",
            ExtensionPoint::PreFilter => "PreFilterPlugin",
            ExtensionPoint::Filter => "FilterPlugin",
            ExtensionPoint::PostFilter => "PostFilterPlugin",
            ExtensionPoint::PreScore => "PreScorePlugin",
            ExtensionPoint::Score => "ScorePlugin",
            ExtensionPoint::Reserve => "ReservePlugin",
            ExtensionPoint::Permit => "PermitPlugin",
            ExtensionPoint::PreBind => "PreBindPlugin",
            ExtensionPoint::Bind => "BindPlugin",
            ExtensionPoint::PostBind => "PostBindPlugin",
        }
    }

    /// Whether `p` implements this extension point.
    pub fn implemented_by(self, p: &dyn Plugin) -> bool {
        match self {
            ExtensionPoint::PreEnqueue => p.as_pre_enqueue().is_some(),
            ExtensionPoint::QueueSort => p.as_queue_sort().is_some(),
            ExtensionPoint::PreFilter => p.as_pre_filter().is_some(),
            ExtensionPoint::Filter => p.as_filter().is_some(),
            ExtensionPoint::PostFilter => p.as_post_filter().is_some(),
            ExtensionPoint::PreScore => p.as_pre_score().is_some(),
            ExtensionPoint::Score => p.as_score().is_some(),
            ExtensionPoint::Reserve => p.as_reserve().is_some(),
            ExtensionPoint::Permit => p.as_permit().is_some(),
            ExtensionPoint::PreBind => p.as_pre_bind().is_some(),
            ExtensionPoint::Bind => p.as_bind().is_some(),
            ExtensionPoint::PostBind => p.as_post_bind().is_some(),
        }
    }
}

/// The enabled and disabled plugins of one extension point (or of `multiPoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginSetSpec {
    /// `(name, weight)`; weight 0 means unset.
    pub enabled: Vec<(String, i32)>,
    pub disabled: Vec<String>,
}

/// A profile after defaulting, as the runtime needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileSpec {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub multi_point: PluginSetSpec,
    pub points: BTreeMap<ExtensionPoint, PluginSetSpec>,
    /// Plugin name → (index in `pluginConfig`, args).
    pub plugin_args: BTreeMap<String, (usize, serde_json::Value)>,
}

/// Why a profile could not be built; `path` is relative to the profile
/// (`plugins.filter.enabled[0]`, `pluginConfig[1].args.scoringStrategy.type`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct BuildError {
    pub path: String,
    pub message: String,
}

impl BuildError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        BuildError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl Framework {
    /// Builds the framework of one profile. Plugins named in `not_implemented` (upstream
    /// plugins kubesched does not have yet) are left out and reported in the returned
    /// warnings, so that upstream configuration files still load.
    pub fn build(
        spec: &ProfileSpec,
        registry: &Registry,
        handle: Handle,
        not_implemented: &[&str],
    ) -> Result<(Framework, Vec<String>), Vec<BuildError>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        // Every name enabled somewhere, with where it was first seen.
        let mut needed: Vec<(String, String)> = Vec::new();
        for (i, (name, _)) in spec.multi_point.enabled.iter().enumerate() {
            needed.push((name.clone(), format!("plugins.multiPoint.enabled[{i}]")));
        }
        for (point, set) in &spec.points {
            for (i, (name, _)) in set.enabled.iter().enumerate() {
                needed.push((
                    name.clone(),
                    format!("plugins.{}.enabled[{i}]", point.field()),
                ));
            }
        }
        let mut instances: HashMap<String, Arc<dyn Plugin>> = HashMap::new();
        let mut skipped: Vec<String> = Vec::new();
        for (name, path) in &needed {
            if instances.contains_key(name) || skipped.contains(name) {
                continue;
            }
            if not_implemented.contains(&name.as_str()) {
                skipped.push(name.clone());
                continue;
            }
            let Some(factory) = registry.get(name.as_str()) else {
                errors.push(BuildError::new(
                    path.clone(),
                    format!("plugin {name:?} does not exist"),
                ));
                continue;
            };
            let (args, args_path) = match spec.plugin_args.get(name) {
                Some((j, v)) => (Some(v), format!("pluginConfig[{j}].args")),
                None => (None, "pluginConfig".to_string()),
            };
            match factory(args, &handle) {
                Ok(p) => {
                    instances.insert(name.clone(), p);
                }
                Err(errs) => errors.extend(errs.into_iter().map(|e| {
                    let path = if e.path.is_empty() {
                        args_path.clone()
                    } else {
                        format!("{args_path}.{}", e.path)
                    };
                    BuildError::new(path, format!("initializing plugin {name:?}: {}", e.message))
                })),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if !skipped.is_empty() {
            warnings.push(format!(
                "profile {:?}: upstream plugins not implemented by kubesched yet are left out: {}",
                spec.scheduler_name,
                skipped.join(", ")
            ));
        }

        let mut lists: BTreeMap<ExtensionPoint, Vec<Arc<dyn Plugin>>> = BTreeMap::new();
        let mut weights: HashMap<String, i64> = HashMap::new();
        for point in ExtensionPoint::ALL {
            let empty = PluginSetSpec::default();
            let set = spec.points.get(&point).unwrap_or(&empty);
            // The point's own list.
            let mut enabled: Vec<String> = Vec::new();
            for (i, (name, _)) in set.enabled.iter().enumerate() {
                if skipped.contains(name) {
                    continue;
                }
                let path = format!("plugins.{}.enabled[{i}]", point.field());
                let Some(p) = instances.get(name) else {
                    continue;
                };
                if !point.implemented_by(p.as_ref()) {
                    errors.push(BuildError::new(
                        path,
                        format!(
                            "plugin {name:?} does not extend {} plugin",
                            point.interface_name()
                        ),
                    ));
                    continue;
                }
                if enabled.contains(name) {
                    errors.push(BuildError::new(
                        path,
                        format!(
                            "plugin {name:?} already registered as {:?}",
                            point.interface_name()
                        ),
                    ));
                    continue;
                }
                enabled.push(name.clone());
            }
            // multiPoint expansion, with upstream's ordering: plugins re-configured at the
            // point first (in the point's order), then multiPoint-only ones, then the rest.
            let mut ordered: Vec<String> = Vec::new();
            if !set.disabled.iter().any(|d| d == "*") {
                let mut overrides: Vec<String> = Vec::new();
                let mut from_multi: Vec<String> = Vec::new();
                for (i, (name, _)) in spec.multi_point.enabled.iter().enumerate() {
                    let Some(p) = instances.get(name) else {
                        continue;
                    };
                    if !point.implemented_by(p.as_ref()) || set.disabled.contains(name) {
                        continue;
                    }
                    if enabled.contains(name) {
                        overrides.push(name.clone());
                        continue;
                    }
                    if from_multi.contains(name) {
                        errors.push(BuildError::new(
                            format!("plugins.multiPoint.enabled[{i}]"),
                            format!(
                                "plugin {name:?} already registered as {:?}",
                                point.interface_name()
                            ),
                        ));
                        continue;
                    }
                    from_multi.push(name.clone());
                }
                for name in &enabled {
                    if overrides.contains(name) {
                        ordered.push(name.clone());
                    }
                }
                ordered.extend(from_multi);
                for name in &enabled {
                    if !overrides.contains(name) {
                        ordered.push(name.clone());
                    }
                }
            } else {
                ordered = enabled;
            }
            let list: Vec<Arc<dyn Plugin>> = ordered
                .iter()
                .filter_map(|n| instances.get(n).cloned())
                .collect();
            lists.insert(point, list);
        }
        // Score weights: the Score point's own entries win over multiPoint; 0 means 1.
        let score_set = spec.points.get(&ExtensionPoint::Score);
        for (name, w) in score_set
            .into_iter()
            .flat_map(|s| s.enabled.iter())
            .chain(spec.multi_point.enabled.iter())
        {
            if weights.contains_key(name) {
                continue;
            }
            if instances
                .get(name)
                .is_some_and(|p| ExtensionPoint::Score.implemented_by(p.as_ref()))
            {
                weights.insert(name.clone(), if *w == 0 { 1 } else { i64::from(*w) });
            }
        }
        let mut take = |p: ExtensionPoint| lists.remove(&p).unwrap_or_default();
        let queue_sort = take(ExtensionPoint::QueueSort);
        let bind = take(ExtensionPoint::Bind);
        if queue_sort.len() != 1 {
            errors.push(BuildError::new(
                "plugins.queueSort",
                format!(
                    "only one queue sort plugin required for profile with scheduler name {:?}, but got {}",
                    spec.scheduler_name,
                    queue_sort.len()
                ),
            ));
        }
        if bind.is_empty() {
            errors.push(BuildError::new(
                "plugins.bind",
                format!(
                    "at least one bind plugin is needed for profile with scheduler name {:?}",
                    spec.scheduler_name
                ),
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let score: Vec<(Arc<dyn Plugin>, i64)> = take(ExtensionPoint::Score)
            .into_iter()
            .map(|p| {
                let w = weights.get(p.name()).copied().unwrap_or(1);
                (p, w)
            })
            .collect();
        let pre_enqueue = take(ExtensionPoint::PreEnqueue);
        let pre_filter = take(ExtensionPoint::PreFilter);
        let filter = take(ExtensionPoint::Filter);
        let reserve = take(ExtensionPoint::Reserve);
        let permit = take(ExtensionPoint::Permit);
        let pre_score = take(ExtensionPoint::PreScore);
        let signers = signers_of(
            pre_filter
                .iter()
                .chain(&filter)
                .chain(&pre_score)
                .chain(score.iter().map(|(p, _)| p)),
        );
        let mut enqueue_extension_plugins: Vec<Arc<dyn Plugin>> = Vec::new();
        for p in pre_enqueue
            .iter()
            .chain(&pre_filter)
            .chain(&filter)
            .chain(&reserve)
            .chain(&permit)
        {
            if !enqueue_extension_plugins
                .iter()
                .any(|q| q.name() == p.name())
            {
                enqueue_extension_plugins.push(p.clone());
            }
        }
        Ok((
            Framework {
                profile_name: spec.scheduler_name.clone(),
                percentage_of_nodes_to_score: spec.percentage_of_nodes_to_score,
                pre_enqueue,
                queue_sort,
                pre_filter,
                filter,
                post_filter: take(ExtensionPoint::PostFilter),
                pre_score,
                score,
                signers,
                last_refuser: std::sync::atomic::AtomicUsize::new(0),
                reserve,
                permit,
                pre_bind: take(ExtensionPoint::PreBind),
                bind,
                post_bind: take(ExtensionPoint::PostBind),
                enqueue_extension_plugins,
                handle,
                metrics: Arc::new(crate::metrics::NoopRecorder),
                spare_samples: std::sync::Mutex::default(),
            },
            warnings,
        ))
    }
}

/// The plugins that sign pods, each once, when every one of `plugins` can; `None` when one
/// cannot (then the profile never signs a pod). Upstream: computeBatchablePlugins.
fn signers_of<'a>(
    plugins: impl Iterator<Item = &'a Arc<dyn Plugin>>,
) -> Option<Vec<Arc<dyn Plugin>>> {
    let mut signers: Vec<Arc<dyn Plugin>> = Vec::new();
    let mut unsigned: Vec<&'static str> = Vec::new();
    for p in plugins {
        if signers.iter().any(|q| q.name() == p.name()) || unsigned.contains(&p.name()) {
            continue;
        }
        if p.as_sign().is_some() {
            signers.push(p.clone());
        } else {
            unsigned.push(p.name());
        }
    }
    if unsigned.is_empty() {
        Some(signers)
    } else {
        tracing::info!(plugins = ?unsigned, "disabling pod signatures for the profile: these plugins cannot sign pods");
        None
    }
}

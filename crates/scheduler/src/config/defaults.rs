//! Upstream's v1 defaults, and the merge of each profile's plugins into the default set.
//!
//! Upstream: pkg/scheduler/apis/config/v1/defaults.go (SetDefaults_KubeSchedulerConfiguration)
//! and default_plugins.go (getDefaultPlugins, mergePlugins).
//!
//! Plugin arguments are not defaulted here: `pluginConfig` keeps what the file says, and
//! each plugin's factory decodes its `args` with `framework::decode_args`, whose `Default`
//! is upstream's default. Upstream instead appends a defaulted `args` entry for every
//! enabled plugin that has an args type; the plugins end up with the same arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use plugins::names;

use super::types::{KubeSchedulerConfiguration, Plugin, PluginSet, Plugins};

pub const PARALLELISM: i32 = 16;
pub const SCHEDULER_NAME: &str = "default-scheduler";
pub const POD_INITIAL_BACKOFF_SECONDS: i64 = 1;
pub const POD_MAX_BACKOFF_SECONDS: i64 = 10;
pub const LEADER_ELECT: bool = true;
pub const ENABLE_PROFILING: bool = true;
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
pub const RESOURCE_LOCK: &str = "leases";
pub const RESOURCE_NAME: &str = "kube-scheduler";
pub const RESOURCE_NAMESPACE: &str = "kube-system";
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
pub const QPS: f32 = 50.0;
pub const BURST: i32 = 100;

/// The `disabled` name that disables every default plugin of an extension point.
pub const ALL_PLUGINS: &str = "*";

/// Upstream's default plugins, all under `multiPoint`, in upstream's order, with upstream's
/// Score weights. `DynamicResources` is included: the DynamicResourceAllocation feature is
/// on by default since Kubernetes 1.34.
pub fn default_plugins() -> Plugins {
    let multi_point = vec![
        Plugin::new(names::SCHEDULING_GATES),
        Plugin::new(names::PRIORITY_SORT),
        Plugin::new(names::NODE_UNSCHEDULABLE),
        Plugin::new(names::NODE_NAME),
        Plugin::weighted(names::TAINT_TOLERATION, 3),
        Plugin::weighted(names::NODE_AFFINITY, 2),
        Plugin::new(names::NODE_PORTS),
        Plugin::weighted(names::NODE_RESOURCES_FIT, 1),
        Plugin::new(names::VOLUME_RESTRICTIONS),
        Plugin::new(names::NODE_VOLUME_LIMITS),
        Plugin::new(names::VOLUME_BINDING),
        Plugin::new(names::VOLUME_ZONE),
        Plugin::weighted(names::POD_TOPOLOGY_SPREAD, 2),
        Plugin::weighted(names::INTER_POD_AFFINITY, 2),
        Plugin::new(names::DYNAMIC_RESOURCES),
        Plugin::new(names::DEFAULT_PREEMPTION),
        Plugin::weighted(names::NODE_RESOURCES_BALANCED_ALLOCATION, 1),
        Plugin::weighted(names::IMAGE_LOCALITY, 1),
        Plugin::new(names::DEFAULT_BINDER),
    ];
    Plugins {
        multi_point: PluginSet {
            enabled: multi_point,
            disabled: Vec::new(),
        },
        ..Plugins::default()
    }
}

/// Fills every unset field with upstream's v1 default and merges each profile's plugins
/// into [`default_plugins`]. `percentageOfNodesToScore` stays unset: unset and 0 both mean
/// adaptive.
pub fn set_defaults(cfg: &mut KubeSchedulerConfiguration) {
    cfg.parallelism.get_or_insert(PARALLELISM);

    if cfg.profiles.is_empty() {
        cfg.profiles.push(Default::default());
    }
    // With several profiles every one must be named; validation says so.
    if let [only] = cfg.profiles.as_mut_slice() {
        only.scheduler_name
            .get_or_insert_with(|| SCHEDULER_NAME.to_string());
    }
    for profile in &mut cfg.profiles {
        let custom = profile.plugins.take();
        profile.plugins = Some(merge_plugins(default_plugins(), custom));
    }

    let le = &mut cfg.leader_election;
    le.leader_elect.get_or_insert(LEADER_ELECT);
    default_duration(&mut le.lease_duration, LEASE_DURATION);
    default_duration(&mut le.renew_deadline, RENEW_DEADLINE);
    default_duration(&mut le.retry_period, RETRY_PERIOD);
    default_string(&mut le.resource_lock, RESOURCE_LOCK);
    default_string(&mut le.resource_name, RESOURCE_NAME);
    default_string(&mut le.resource_namespace, RESOURCE_NAMESPACE);

    let cc = &mut cfg.client_connection;
    default_string(&mut cc.content_type, CONTENT_TYPE);
    if cc.qps == 0.0 {
        cc.qps = QPS;
    }
    if cc.burst == 0 {
        cc.burst = BURST;
    }

    cfg.pod_initial_backoff_seconds
        .get_or_insert(POD_INITIAL_BACKOFF_SECONDS);
    cfg.pod_max_backoff_seconds
        .get_or_insert(POD_MAX_BACKOFF_SECONDS);
    let profiling = *cfg.enable_profiling.get_or_insert(ENABLE_PROFILING);
    // Contention profiling follows profiling only when the file leaves it unset.
    if profiling {
        cfg.enable_contention_profiling.get_or_insert(true);
    }
}

fn default_duration(d: &mut Duration, default: Duration) {
    if d.is_zero() {
        *d = default;
    }
}

fn default_string(s: &mut String, default: &str) {
    if s.is_empty() {
        *s = default.to_string();
    }
}

/// Merges a profile's plugins into the defaults, extension point by extension point. No
/// `plugins` at all means the defaults unchanged.
pub(crate) fn merge_plugins(defaults: Plugins, custom: Option<Plugins>) -> Plugins {
    let Some(mut custom) = custom else {
        return defaults;
    };
    let mut merged = defaults;
    for (default_set, custom_set) in merged
        .extension_points_mut()
        .into_iter()
        .zip(custom.extension_points_mut())
    {
        *default_set = merge_plugin_set(std::mem::take(default_set), std::mem::take(custom_set));
    }
    merged
}

/// Upstream's mergePluginSet:
/// - `disabled` is the custom disabled names followed by the default ones (weights dropped),
///   so that the runtime's multiPoint expansion knows what the user turned off;
/// - unless `*` is disabled, the default plugins not disabled come first, in order, each
///   replaced in place by a custom entry of the same name (the last one, if named twice);
/// - every custom entry that replaced nothing follows, in order, duplicates included (the
///   runtime refuses a plugin enabled twice at one extension point).
fn merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet {
    let disabled: Vec<Plugin> = custom
        .disabled
        .iter()
        .chain(&default.disabled)
        .map(|p| Plugin::new(p.name.clone()))
        .collect();
    let disabled_names: BTreeSet<&str> = disabled.iter().map(|p| p.name.as_str()).collect();
    let custom_by_name: BTreeMap<&str, usize> = custom
        .enabled
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();

    let mut enabled = Vec::new();
    let mut replaced = BTreeSet::new();
    if !disabled_names.contains(ALL_PLUGINS) {
        for plugin in default.enabled {
            if disabled_names.contains(plugin.name.as_str()) {
                continue;
            }
            match custom_by_name.get(plugin.name.as_str()) {
                Some(&i) => {
                    tracing::info!(
                        plugin = %plugin.name,
                        "default plugin is explicitly re-configured; overriding"
                    );
                    replaced.insert(i);
                    enabled.push(custom.enabled[i].clone());
                }
                None => enabled.push(plugin),
            }
        }
    }
    enabled.extend(
        custom
            .enabled
            .iter()
            .enumerate()
            .filter(|(i, _)| !replaced.contains(i))
            .map(|(_, p)| p.clone()),
    );
    PluginSet { enabled, disabled }
}

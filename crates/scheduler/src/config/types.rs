//! The `kubescheduler.config.k8s.io/v1` types, field for field.
//!
//! Upstream: staging/src/k8s.io/kube-scheduler/config/v1/types.go and the component-base
//! types it embeds (LeaderElectionConfiguration, ClientConnectionConfiguration,
//! DebuggingConfiguration). Decoding is strict as upstream's: unknown and duplicate fields
//! are errors. Fields that upstream declares as pointers are `Option`s here, because for
//! them unset and zero differ (`parallelism: 0` is an error, an absent `parallelism` is 16);
//! after [`set_defaults`](super::set_defaults) every such `Option` that has an upstream
//! default is `Some`. For the other fields the zero value means unset, as in Go, and an
//! explicit `null` reads as that zero value.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use super::defaults;
use super::duration::serde_go_duration;

/// The only `apiVersion` kubesched reads.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// The only `kind` kubesched reads.
pub const KIND: &str = "KubeSchedulerConfiguration";

/// The scheduler's configuration file.
///
/// Upstream: config/v1.KubeSchedulerConfiguration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerConfiguration {
    /// Always [`API_VERSION`] once loaded.
    #[serde(default, deserialize_with = "nullable")]
    pub api_version: String,
    /// Always [`KIND`] once loaded.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,

    /// How many nodes Filter and Score look at concurrently. Default 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    #[serde(default, deserialize_with = "nullable")]
    pub leader_election: LeaderElectionConfiguration,
    #[serde(default, deserialize_with = "nullable")]
    pub client_connection: ClientConnectionConfiguration,
    /// Serve pprof-style profiling endpoints. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_profiling: Option<bool>,
    /// Default: true when profiling is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_contention_profiling: Option<bool>,
    /// Percentage of nodes to find feasible before scoring; unset or 0 is adaptive
    /// (50 % minus 1 % per 125 nodes, at least 5 %, at least 100 nodes). A profile's own
    /// value overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// First backoff of a pod that failed to schedule. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_initial_backoff_seconds: Option<i64>,
    /// Cap of the doubling backoff. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_max_backoff_seconds: Option<i64>,
    /// One framework per profile, chosen by the pod's `spec.schedulerName`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub profiles: Vec<KubeSchedulerProfile>,
    /// HTTP extenders, shared by all profiles.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extenders: Vec<Extender>,
    /// Fill the informer caches only once this replica is the leader.
    #[serde(default, deserialize_with = "nullable")]
    pub delay_cache_until_active: bool,
}

impl Default for KubeSchedulerConfiguration {
    /// An empty v1 file: only `apiVersion` and `kind` set.
    fn default() -> Self {
        KubeSchedulerConfiguration {
            api_version: API_VERSION.to_string(),
            kind: KIND.to_string(),
            parallelism: None,
            leader_election: LeaderElectionConfiguration::default(),
            client_connection: ClientConnectionConfiguration::default(),
            enable_profiling: None,
            enable_contention_profiling: None,
            percentage_of_nodes_to_score: None,
            pod_initial_backoff_seconds: None,
            pod_max_backoff_seconds: None,
            profiles: Vec::new(),
            extenders: Vec::new(),
            delay_cache_until_active: false,
        }
    }
}

impl KubeSchedulerConfiguration {
    /// `parallelism`, or its default when unset.
    pub fn parallelism(&self) -> i32 {
        self.parallelism.unwrap_or(defaults::PARALLELISM)
    }

    /// `podInitialBackoffSeconds` as a duration, or its default when unset. Negative values
    /// (refused by validation) read as zero.
    pub fn pod_initial_backoff(&self) -> Duration {
        seconds(
            self.pod_initial_backoff_seconds
                .unwrap_or(defaults::POD_INITIAL_BACKOFF_SECONDS),
        )
    }

    /// `podMaxBackoffSeconds` as a duration, or its default when unset.
    pub fn pod_max_backoff(&self) -> Duration {
        seconds(
            self.pod_max_backoff_seconds
                .unwrap_or(defaults::POD_MAX_BACKOFF_SECONDS),
        )
    }

    /// `enableProfiling`, or its default when unset.
    pub fn enable_profiling(&self) -> bool {
        self.enable_profiling.unwrap_or(defaults::ENABLE_PROFILING)
    }

    /// `enableContentionProfiling`, or its default when unset.
    pub fn enable_contention_profiling(&self) -> bool {
        self.enable_contention_profiling
            .unwrap_or_else(|| self.enable_profiling())
    }
}

fn seconds(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// Leader election between scheduler replicas.
///
/// Upstream: component-base config/v1alpha1.LeaderElectionConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfiguration {
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_elect: Option<bool>,
    /// How long non-leaders wait before trying to take over a lease that was not renewed.
    /// Default 15s.
    #[serde(default, with = "serde_go_duration")]
    pub lease_duration: Duration,
    /// How long the leader keeps retrying to renew before it gives up. Default 10s.
    #[serde(default, with = "serde_go_duration")]
    pub renew_deadline: Duration,
    /// Wait between attempts to acquire or renew. Default 2s.
    #[serde(default, with = "serde_go_duration")]
    pub retry_period: Duration,
    /// Default `leases`, the only kind accepted when leader election is on.
    #[serde(default, deserialize_with = "nullable")]
    pub resource_lock: String,
    /// Default `kube-scheduler`.
    #[serde(default, deserialize_with = "nullable")]
    pub resource_name: String,
    /// Default `kube-system`.
    #[serde(default, deserialize_with = "nullable")]
    pub resource_namespace: String,
}

impl LeaderElectionConfiguration {
    /// `leaderElect`, or its default when unset.
    pub fn leader_elect(&self) -> bool {
        self.leader_elect.unwrap_or(defaults::LEADER_ELECT)
    }
}

/// How the scheduler talks to the API server.
///
/// Upstream: component-base config/v1alpha1.ClientConnectionConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnectionConfiguration {
    /// Path of a kubeconfig file; empty means in-cluster configuration.
    #[serde(default, deserialize_with = "nullable")]
    pub kubeconfig: String,
    #[serde(default, deserialize_with = "nullable")]
    pub accept_content_types: String,
    /// Default `application/vnd.kubernetes.protobuf`.
    #[serde(default, deserialize_with = "nullable")]
    pub content_type: String,
    /// Requests per second to the API server. Default 50.
    #[serde(default, deserialize_with = "nullable")]
    pub qps: f32,
    /// Requests allowed above `qps` in a burst. Default 100.
    #[serde(default, deserialize_with = "nullable")]
    pub burst: i32,
}

/// A scheduling profile: a name pods select with `spec.schedulerName`, its plugins and
/// their arguments.
///
/// Upstream: config/v1.KubeSchedulerProfile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerProfile {
    /// Defaults to `default-scheduler` when there is only one profile; required otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    /// Overrides the global value for this profile; unset means use the global one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// After defaulting: the default plugins merged with the ones configured here (see
    /// [`Plugins`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<Plugins>,
    /// Arguments per plugin, by plugin name.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub plugin_config: Vec<PluginConfig>,
}

impl KubeSchedulerProfile {
    /// `schedulerName`, or empty when unset (validation refuses that).
    pub fn scheduler_name(&self) -> &str {
        self.scheduler_name.as_deref().unwrap_or_default()
    }

    /// The index in `pluginConfig` of the first entry for `plugin`, and that entry's
    /// `args`. Use the index to place argument errors (see
    /// [`FieldError::plugin_args`](super::FieldError::plugin_args)).
    pub fn plugin_args(&self, plugin: &str) -> Option<(usize, Option<&serde_json::Value>)> {
        self.plugin_config
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == plugin)
            .map(|(i, c)| (i, c.args.as_ref()))
    }
}

/// The plugins of a profile, one [`PluginSet`] per extension point.
///
/// Upstream: config/v1.Plugins. After defaulting, `multi_point` holds upstream's default
/// plugins in upstream order (those disabled here removed, those re-enabled here replaced
/// in place, new ones appended), and every other extension point holds exactly what the
/// file set there. Expanding `multi_point` into the extension points each plugin
/// implements is the runtime's job: it needs the plugin instances to know.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugins {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub pre_enqueue: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub queue_sort: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub pre_filter: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub filter: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub post_filter: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub pre_score: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub score: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub reserve: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub permit: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub pre_bind: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub bind: PluginSet,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub post_bind: PluginSet,
    /// Plugins enabled at every extension point they implement.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PluginSet::is_empty"
    )]
    pub multi_point: PluginSet,
}

impl Plugins {
    /// Every extension point with its JSON field name, in upstream's declaration order
    /// (`multiPoint` last).
    pub fn extension_points(&self) -> [(&'static str, &PluginSet); 13] {
        [
            ("preEnqueue", &self.pre_enqueue),
            ("queueSort", &self.queue_sort),
            ("preFilter", &self.pre_filter),
            ("filter", &self.filter),
            ("postFilter", &self.post_filter),
            ("preScore", &self.pre_score),
            ("score", &self.score),
            ("reserve", &self.reserve),
            ("permit", &self.permit),
            ("preBind", &self.pre_bind),
            ("bind", &self.bind),
            ("postBind", &self.post_bind),
            ("multiPoint", &self.multi_point),
        ]
    }

    /// Mutable access to every extension point, in the same order as
    /// [`extension_points`](Self::extension_points).
    pub fn extension_points_mut(&mut self) -> [&mut PluginSet; 13] {
        [
            &mut self.pre_enqueue,
            &mut self.queue_sort,
            &mut self.pre_filter,
            &mut self.filter,
            &mut self.post_filter,
            &mut self.pre_score,
            &mut self.score,
            &mut self.reserve,
            &mut self.permit,
            &mut self.pre_bind,
            &mut self.bind,
            &mut self.post_bind,
            &mut self.multi_point,
        ]
    }
}

/// Plugins enabled and disabled at one extension point.
///
/// Upstream: config/v1.PluginSet. `enabled` plugins run after the default ones, in the
/// order given; naming a default plugin here re-configures it in place (its weight). A
/// `disabled` entry named `*` disables every default plugin of the extension point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub enabled: Vec<Plugin>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub disabled: Vec<Plugin>,
}

impl PluginSet {
    pub fn is_empty(&self) -> bool {
        self.enabled.is_empty() && self.disabled.is_empty()
    }
}

/// A plugin reference and, for Score, its weight.
///
/// Upstream: config/v1.Plugin. Unset or 0 weight means 1 at Score (for a plugin enabled
/// through `multiPoint`, a weight given at `score` wins over the `multiPoint` one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugin {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl Plugin {
    /// A reference to `name` with no weight.
    pub fn new(name: impl Into<String>) -> Self {
        Plugin {
            name: name.into(),
            weight: None,
        }
    }

    /// A reference to `name` with a Score weight.
    pub fn weighted(name: impl Into<String>, weight: i32) -> Self {
        Plugin {
            name: name.into(),
            weight: Some(weight),
        }
    }
}

/// Arguments for one plugin.
///
/// Upstream: config/v1.PluginConfig. `args` is kept as JSON: each plugin's factory decodes
/// it with `framework::decode_args` (absent = upstream's defaults) and checks it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfig {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
}

/// An HTTP extender: a webhook consulted at filter, prioritize, preempt and bind.
///
/// Upstream: config/v1.Extender. An empty verb means the extender does not offer that
/// call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Extender {
    /// Base URL; each verb is appended to it.
    #[serde(default, deserialize_with = "nullable")]
    pub url_prefix: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub filter_verb: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub preempt_verb: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub prioritize_verb: String,
    /// Multiplier of the prioritize scores; must be positive when `prioritizeVerb` is set.
    #[serde(default, deserialize_with = "nullable")]
    pub weight: i64,
    /// When set, this extender binds pods instead of the scheduler; at most one may.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub bind_verb: String,
    #[serde(
        default,
        rename = "enableHTTPS",
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub enable_https: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_config: Option<ExtenderTlsConfig>,
    /// Timeout of one call; zero means the extender client's default (5s upstream).
    #[serde(default, with = "serde_go_duration")]
    pub http_timeout: Duration,
    /// The extender caches nodes itself, so calls carry node names only.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub node_cache_capable: bool,
    /// Extended resources this extender manages; a pod is sent to it only when it
    /// requests one of them (all pods when empty).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub managed_resources: Vec<ExtenderManagedResource>,
    /// Scheduling goes on when this extender fails or cannot be reached.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub ignorable: bool,
}

/// An extended resource managed by an extender.
///
/// Upstream: config/v1.ExtenderManagedResource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderManagedResource {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The scheduler's own Filter plugins ignore this resource.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub ignored_by_scheduler: bool,
}

/// TLS settings for calling an extender.
///
/// Upstream: config/v1.ExtenderTLSConfig. The `*Data` fields are base64 in the file and
/// bytes here; they win over the matching `*File` fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderTlsConfig {
    /// Skip verifying the server certificate. For testing only.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub insecure: bool,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub server_name: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub cert_file: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub key_file: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub ca_file: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_empty_bytes"
    )]
    pub cert_data: k8s_openapi::ByteString,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_empty_bytes"
    )]
    pub key_data: k8s_openapi::ByteString,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_empty_bytes"
    )]
    pub ca_data: k8s_openapi::ByteString,
}

/// Reads `null` as the type's zero value, as Go's decoder leaves a non-pointer field
/// untouched on `null` (a YAML key with no value is `null`).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_empty_bytes(b: &k8s_openapi::ByteString) -> bool {
    b.0.is_empty()
}

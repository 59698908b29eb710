//! Validation of a defaulted configuration, with upstream's field paths and messages.
//!
//! Upstream: pkg/scheduler/apis/config/validation/validation.go
//! (ValidateKubeSchedulerConfiguration) and the component-base checks it calls. Messages
//! read as upstream's field errors do: `Invalid value: <value>: <detail>`,
//! `Required value`, `Duplicate value: <value>`, `Unsupported value: <value>: supported
//! values: ...`.
//!
//! Checks kubesched adds, each because the configuration would otherwise fail later or
//! silently do something else:
//! - plugin names must be upstream in-tree plugins or those of the registry the scheduler
//!   runs with, in-tree and out-of-tree (upstream fails at start-up with
//!   `plugin "X" does not exist`);
//! - Score weights must not be negative (upstream would accept and invert the score);
//! - `leaderElection.renewDeadline` must exceed `retryPeriod` × 1.2 (client-go refuses
//!   such timings when the leader elector starts);
//! - an extender needs a `urlPrefix`.
//!
//! Plugin arguments are checked by each plugin's factory, not here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::time::Duration;

use super::defaults::{self, ALL_PLUGINS};
use super::duration::format_go_duration;
use super::types::{
    Extender, KubeSchedulerConfiguration, KubeSchedulerProfile, PluginSet, Plugins, API_VERSION,
};
use super::FieldError;

/// Upstream plugins kubesched does not implement yet. Configuration files may name them
/// (they are in upstream's default set, so every file names them implicitly); the runtime
/// skips them with a warning.
const UNIMPLEMENTED_UPSTREAM_PLUGINS: [&str; 0] = [];

/// Plugins removed from upstream; v1 refuses them by name.
const REMOVED_IN_V1: [&str; 4] = [
    "AzureDiskLimits",
    "CinderLimits",
    "EBSLimits",
    "GCEPDLimits",
];

/// client-go's leader election jitter: the leader retries renewing at up to
/// `retryPeriod * 1.2`, so `renewDeadline` must leave room for that.
const LEADER_ELECTION_JITTER_FACTOR: f64 = 1.2;

/// Upstream plugins kubesched accepts in configuration files but does not implement yet.
pub fn unimplemented_upstream_plugins() -> &'static [&'static str] {
    &UNIMPLEMENTED_UPSTREAM_PLUGINS
}

/// Every plugin name a configuration may use: kubesched's in-tree registry and the
/// upstream plugins not implemented yet.
pub fn known_plugins() -> BTreeSet<&'static str> {
    known_plugins_in(&plugins::in_tree_registry())
}

/// Every plugin name a configuration may use with `registry` (in-tree and out-of-tree
/// plugins): its names and the upstream plugins not implemented yet.
pub fn known_plugins_in(registry: &plugins::Registry) -> BTreeSet<&'static str> {
    registry
        .keys()
        .copied()
        .chain(UNIMPLEMENTED_UPSTREAM_PLUGINS)
        .collect()
}

/// Checks a defaulted configuration; an empty list means valid. Paths into the plugin
/// lists index them as they are in `cfg`.
pub fn validate(cfg: &KubeSchedulerConfiguration) -> Vec<FieldError> {
    validate_with(cfg, None, &known_plugins())
}

/// Checks a defaulted configuration. `as_written` holds each profile's `plugins` as the
/// file wrote them, before the merge with the defaults: plugin references are checked
/// there, so that their paths index the lists the user wrote. `known` are the plugin names
/// the configuration may use.
pub(crate) fn validate_with(
    cfg: &KubeSchedulerConfiguration,
    as_written: Option<&[Option<Plugins>]>,
    known: &BTreeSet<&'static str>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();

    if cfg.client_connection.burst < 0 {
        errs.push(invalid(
            "clientConnection.burst",
            cfg.client_connection.burst,
            "must be non-negative",
        ));
    }
    validate_leader_election(cfg, &mut errs);

    if cfg.parallelism() <= 0 {
        errs.push(invalid(
            "parallelism",
            cfg.parallelism(),
            "should be an integer value greater than zero",
        ));
    }

    if cfg.profiles.is_empty() {
        errs.push(required("profiles"));
    } else {
        let mut first_with_name: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, profile) in cfg.profiles.iter().enumerate() {
            let path = format!("profiles[{i}]");
            let plugins = match as_written {
                Some(written) => written.get(i).and_then(Option::as_ref),
                None => profile.plugins.as_ref(),
            };
            validate_profile(&path, profile, plugins, known, &mut errs);
            let name = profile.scheduler_name();
            if let Some(first) = first_with_name.get(name) {
                errs.push(FieldError::new(
                    format!("{path}.schedulerName"),
                    format!("Duplicate value: profiles[{first}].schedulerName"),
                ));
            } else {
                first_with_name.insert(name, i);
            }
        }
        validate_common_queue_sort(&cfg.profiles, &mut errs);
    }

    validate_percentage(
        "percentageOfNodesToScore",
        cfg.percentage_of_nodes_to_score,
        &mut errs,
    );

    let initial = cfg
        .pod_initial_backoff_seconds
        .unwrap_or(defaults::POD_INITIAL_BACKOFF_SECONDS);
    let max = cfg
        .pod_max_backoff_seconds
        .unwrap_or(defaults::POD_MAX_BACKOFF_SECONDS);
    if initial <= 0 {
        errs.push(invalid(
            "podInitialBackoffSeconds",
            initial,
            "must be greater than 0",
        ));
    }
    if max < initial {
        errs.push(invalid(
            "podMaxBackoffSeconds",
            max,
            "must be greater than or equal to PodInitialBackoffSeconds",
        ));
    }

    validate_extenders(&cfg.extenders, &mut errs);
    errs
}

/// Upstream checks the timings only when leader election is on.
fn validate_leader_election(cfg: &KubeSchedulerConfiguration, errs: &mut Vec<FieldError>) {
    let le = &cfg.leader_election;
    if !le.leader_elect() {
        return;
    }
    let d = |d: Duration| format_go_duration(d);
    for (field, value) in [
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ] {
        if value.is_zero() {
            errs.push(invalid(
                format!("leaderElection.{field}"),
                d(value),
                "must be greater than zero",
            ));
        }
    }
    if le.lease_duration <= le.renew_deadline {
        errs.push(invalid(
            "leaderElection.leaseDuration",
            d(le.lease_duration),
            "must be greater than `RenewDeadline`",
        ));
    }
    let retry_with_jitter = le.retry_period.mul_f64(LEADER_ELECTION_JITTER_FACTOR);
    if !le.retry_period.is_zero()
        && !le.renew_deadline.is_zero()
        && le.renew_deadline <= retry_with_jitter
    {
        errs.push(invalid(
            "leaderElection.renewDeadline",
            d(le.renew_deadline),
            "must be greater than retryPeriod*JitterFactor (1.2)",
        ));
    }
    for (field, value) in [
        ("resourceLock", &le.resource_lock),
        ("resourceNamespace", &le.resource_namespace),
        ("resourceName", &le.resource_name),
    ] {
        if value.is_empty() {
            errs.push(required(format!("leaderElection.{field}")));
        }
    }
    if !le.resource_lock.is_empty() && le.resource_lock != defaults::RESOURCE_LOCK {
        errs.push(invalid(
            "leaderElection.resourceLock",
            quote(&le.resource_lock),
            "resourceLock value must be \"leases\"",
        ));
    }
}

fn validate_profile(
    path: &str,
    profile: &KubeSchedulerProfile,
    plugins: Option<&Plugins>,
    known: &BTreeSet<&'static str>,
    errs: &mut Vec<FieldError>,
) {
    if profile.scheduler_name().is_empty() {
        errs.push(required(format!("{path}.schedulerName")));
    }
    validate_percentage(
        &format!("{path}.percentageOfNodesToScore"),
        profile.percentage_of_nodes_to_score,
        errs,
    );
    if let Some(plugins) = plugins {
        for (point, set) in plugins.extension_points() {
            validate_plugin_set(&format!("{path}.plugins.{point}"), set, known, errs);
        }
    }

    let mut seen = BTreeSet::new();
    for (j, config) in profile.plugin_config.iter().enumerate() {
        let path = format!("{path}.pluginConfig[{j}]");
        if !seen.insert(config.name.as_str()) {
            errs.push(FieldError::new(
                path.clone(),
                format!("Duplicate value: {}", quote(&config.name)),
            ));
        }
        if let Some(err) = check_plugin_name(&path, &config.name, known) {
            errs.push(err);
        }
    }
}

fn validate_plugin_set(
    path: &str,
    set: &PluginSet,
    known: &BTreeSet<&'static str>,
    errs: &mut Vec<FieldError>,
) {
    for (j, plugin) in set.enabled.iter().enumerate() {
        let path = format!("{path}.enabled[{j}]");
        if let Some(err) = check_plugin_name(&path, &plugin.name, known) {
            errs.push(err);
        }
        if let Some(weight) = plugin.weight.filter(|w| *w < 0) {
            errs.push(invalid(
                format!("{path}.weight"),
                weight,
                "must not be negative (unset or 0 means 1)",
            ));
        }
    }
    for plugin in &set.disabled {
        // Upstream ignores a disabled name that matches nothing; a typo there goes
        // unnoticed, so say so.
        let name = plugin.name.as_str();
        if name != ALL_PLUGINS && !known.contains(name) && !REMOVED_IN_V1.contains(&name) {
            tracing::warn!(
                path,
                plugin = name,
                "disabled plugin is not a known plugin; the entry has no effect"
            );
        }
    }
}

/// The error for a plugin reference that names no plugin, if it does not.
fn check_plugin_name(path: &str, name: &str, known: &BTreeSet<&'static str>) -> Option<FieldError> {
    if REMOVED_IN_V1.contains(&name) {
        return Some(invalid(
            path,
            quote(name),
            format!(
                "was invalid in version {v:?} (KubeSchedulerConfiguration is version {v:?})",
                v = API_VERSION
            ),
        ));
    }
    if known.contains(name) {
        return None;
    }
    let supported: Vec<String> = known.iter().map(|n| quote(n)).collect();
    Some(FieldError::new(
        path,
        format!(
            "Unsupported value: {}: supported values: {}",
            quote(name),
            supported.join(", ")
        ),
    ))
}

/// All profiles share one scheduling queue, so they must sort it the same way.
fn validate_common_queue_sort(profiles: &[KubeSchedulerProfile], errs: &mut Vec<FieldError>) {
    let queue_sort = |p: &KubeSchedulerProfile| {
        p.plugins
            .as_ref()
            .map(|plugins| plugins.queue_sort.clone())
            .unwrap_or_default()
    };
    let Some(first) = profiles.first() else {
        return;
    };
    let canon = queue_sort(first);
    if canon.enabled.len() > 1 {
        errs.push(invalid(
            "profiles[0].plugins.queueSort.enabled",
            canon.enabled.len(),
            "only one queue sort plugin can be enabled",
        ));
    }
    let name = canon.enabled.first().map(|p| p.name.as_str()).unwrap_or("");
    let args_of = |p: &KubeSchedulerProfile| {
        p.plugin_config
            .iter()
            .rev()
            .find(|c| c.name == name)
            .and_then(|c| c.args.clone())
            .filter(|a| !a.is_null())
    };
    let canon_args = args_of(first);

    for (i, profile) in profiles.iter().enumerate().skip(1) {
        let current = queue_sort(profile);
        if current != canon {
            errs.push(invalid(
                format!("profiles[{i}].plugins.queueSort"),
                json(&current),
                "must be the same for all profiles",
            ));
        }
        if name.is_empty() {
            continue;
        }
        for (j, config) in profile.plugin_config.iter().enumerate() {
            let args = config.args.clone().filter(|a| !a.is_null());
            if config.name == name && args != canon_args {
                errs.push(invalid(
                    format!("profiles[{i}].pluginConfig[{j}].args"),
                    json(&args),
                    "queueSort must be the same for all profiles",
                ));
            }
        }
    }
}

fn validate_percentage(path: &str, value: Option<i32>, errs: &mut Vec<FieldError>) {
    if let Some(v) = value.filter(|v| !(0..=100).contains(v)) {
        errs.push(invalid(path, v, "not in valid range [0-100]"));
    }
}

fn validate_extenders(extenders: &[Extender], errs: &mut Vec<FieldError>) {
    let mut binders = 0;
    let mut managed = BTreeSet::new();
    for (i, extender) in extenders.iter().enumerate() {
        let path = format!("extenders[{i}]");
        if extender.url_prefix.is_empty() {
            errs.push(required(format!("{path}.urlPrefix")));
        }
        if !extender.prioritize_verb.is_empty() && extender.weight <= 0 {
            errs.push(invalid(
                format!("{path}.weight"),
                extender.weight,
                "must have a positive weight applied to it",
            ));
        }
        if !extender.bind_verb.is_empty() {
            binders += 1;
        }
        for (j, resource) in extender.managed_resources.iter().enumerate() {
            let path = format!("{path}.managedResources[{j}].name");
            validate_extended_resource_name(&path, &resource.name, errs);
            if !managed.insert(resource.name.as_str()) {
                errs.push(invalid(
                    path,
                    quote(&resource.name),
                    "duplicate extender managed resource name",
                ));
            }
        }
    }
    if binders > 1 {
        errs.push(invalid(
            "extenders",
            quote(&format!("found {binders} extenders implementing bind")),
            "only one extender can implement bind",
        ));
    }
}

fn validate_extended_resource_name(path: &str, name: &str, errs: &mut Vec<FieldError>) {
    let messages = qualified_name_errors(name);
    if !messages.is_empty() {
        errs.extend(messages.into_iter().map(|m| invalid(path, quote(name), m)));
        return;
    }
    if !is_extended_resource_name(name) {
        errs.push(invalid(
            path,
            quote(name),
            "is an invalid extended resource name",
        ));
    }
}

/// An extended resource: a qualified name with a domain prefix outside `kubernetes.io/`,
/// that stays a qualified name with `requests.` in front (as quota spells it).
fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    if native || name.starts_with("requests.") {
        return false;
    }
    qualified_name_errors(&format!("requests.{name}")).is_empty()
}

const LABEL_KEY_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// What is wrong with `value` as a qualified name (a label key): an optional DNS subdomain
/// prefix and `/`, then a name of at most 63 characters. Upstream's wording.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let name = match value.split_once('/') {
        None => value,
        Some((_, suffix)) if suffix.contains('/') => {
            return vec![format!(
                "a valid label key {LABEL_KEY_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
        Some((prefix, suffix)) => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {DNS1123_SUBDOMAIN_MESSAGE}"));
                }
            }
            suffix
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_label_key_name(name) {
        errs.push(format!("name part {LABEL_KEY_NAME_MESSAGE}"));
    }
    errs
}

fn is_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

// Upstream's field error shapes.

pub(crate) fn invalid(
    path: impl Into<String>,
    value: impl Display,
    detail: impl Display,
) -> FieldError {
    FieldError::new(path, format!("Invalid value: {value}: {detail}"))
}

pub(crate) fn required(path: impl Into<String>) -> FieldError {
    FieldError::new(path, "Required value")
}

/// A string value as Go's `%q` prints it (close enough for the text in config files).
pub(crate) fn quote(s: &str) -> String {
    format!("{s:?}")
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

//! `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`): reading a file,
//! upstream's defaults, upstream's validation.
//!
//! Upstream: pkg/scheduler/apis/config. Start with [`load_file`]: it decodes YAML or JSON
//! strictly (unknown fields are errors, type errors name the field), checks `apiVersion`
//! and `kind`, applies [`set_defaults`], then [`validate`]s, and reports every problem
//! found as `<file>: <path>: <message>`, paths spelled as upstream spells them
//! (`profiles[0].plugins.score.enabled[1].weight`). An upstream configuration file loads
//! unchanged; the types are in [`types`], the defaults and the plugin merge in
//! [`defaults`].
//!
//! After loading, each profile's `plugins` is upstream's default plugin set merged with
//! what the file configured (see [`Plugins`]); `multiPoint` is not expanded into extension
//! points here, because that needs the plugin instances. Plugin `args` are not decoded
//! here either: each plugin's factory does that.

pub mod defaults;
pub use framework::duration;
pub mod types;
pub mod validation;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use thiserror::Error;

pub use defaults::{default_plugins, set_defaults};
pub use duration::{format_go_duration, parse_go_duration};
pub use types::{
    ClientConnectionConfiguration, Extender, ExtenderManagedResource, ExtenderTlsConfig,
    KubeSchedulerConfiguration, KubeSchedulerProfile, LeaderElectionConfiguration, Plugin,
    PluginConfig, PluginSet, Plugins, API_VERSION, KIND,
};
pub use validation::{known_plugins, known_plugins_in, unimplemented_upstream_plugins, validate};

/// A configuration that could not be loaded.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read configuration")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// The text is not a valid configuration: one entry per problem found.
    #[error("{}", Lines { file, errors })]
    Invalid {
        /// The file (or other source) the text came from.
        file: String,
        errors: Vec<FieldError>,
    },
}

impl ConfigError {
    /// The field errors; empty for a file that could not be read.
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid { errors, .. } => errors,
        }
    }
}

/// Displays `<file>: <error>`, one error per line.
struct Lines<'a> {
    file: &'a str,
    errors: &'a [FieldError],
}

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: {e}", self.file)?;
        }
        Ok(())
    }
}

/// One problem in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}", if path.is_empty() { message.clone() } else { format!("{path}: {message}") })]
pub struct FieldError {
    /// Where, as upstream spells field paths (`profiles[0].pluginConfig[1].args`); empty
    /// when the problem is not in one field (unreadable YAML, say).
    pub path: String,
    /// What is wrong, e.g. `Invalid value: 0: should be an integer value greater than zero`.
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Places a plugin's argument error under
    /// `profiles[<profile>].pluginConfig[<index>].args`, for the runtime, which builds the
    /// plugins and so is the one to decode their arguments.
    pub fn plugin_args(profile: usize, index: usize, err: framework::ArgsError) -> Self {
        let base = format!("profiles[{profile}].pluginConfig[{index}].args");
        let path = if err.path.is_empty() {
            base
        } else if err.path.starts_with('[') {
            format!("{base}{}", err.path)
        } else {
            format!("{base}.{}", err.path)
        };
        FieldError::new(path, err.message)
    }
}

/// Reads, defaults and validates the configuration file at `path`, for the in-tree plugins.
pub fn load_file(path: &Path) -> Result<KubeSchedulerConfiguration, ConfigError> {
    load_file_with(path, &plugins::in_tree_registry())
}

/// Reads, defaults and validates the configuration file at `path`; its plugin references
/// may name any plugin of `registry` (in-tree and out-of-tree).
pub fn load_file_with(
    path: &Path,
    registry: &plugins::Registry,
) -> Result<KubeSchedulerConfiguration, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    load_str_with(&text, &file, registry)
}

/// Decodes, defaults and validates a configuration given as YAML or JSON text, for the
/// in-tree plugins; `source` names it in errors (a file name, `--config`, ...).
pub fn load_str(text: &str, source: &str) -> Result<KubeSchedulerConfiguration, ConfigError> {
    load_str_with(text, source, &plugins::in_tree_registry())
}

/// [`load_str`] for the plugins of `registry` (in-tree and out-of-tree).
pub fn load_str_with(
    text: &str,
    source: &str,
    registry: &plugins::Registry,
) -> Result<KubeSchedulerConfiguration, ConfigError> {
    let invalid = |errors| ConfigError::Invalid {
        file: source.to_string(),
        errors,
    };
    let mut cfg = decode(text).map_err(invalid)?;
    // Plugin references are checked as written, so that their paths index the user's lists,
    // not the merged ones.
    let as_written: Vec<Option<Plugins>> = cfg.profiles.iter().map(|p| p.plugins.clone()).collect();
    set_defaults(&mut cfg);
    let errors = validation::validate_with(&cfg, Some(&as_written), &known_plugins_in(registry));
    if errors.is_empty() {
        Ok(cfg)
    } else {
        Err(invalid(errors))
    }
}

/// Decodes a configuration without defaulting or validating it: strict, with the field
/// path of the first type error. `apiVersion` and `kind` are checked first, so that a file
/// of another version is refused for its version, not for the fields that differ.
pub fn decode(text: &str) -> Result<KubeSchedulerConfiguration, Vec<FieldError>> {
    // Errors reading the header are left for the full decode to report with their paths.
    if let Ok(header) = decode_as::<TypeMeta>(text) {
        let errors = header.unwrap_or_default().check();
        if !errors.is_empty() {
            return Err(errors);
        }
    }
    match decode_as::<KubeSchedulerConfiguration>(text) {
        Ok(Some(cfg)) => Ok(cfg),
        // An empty document; the header check has already refused it.
        Ok(None) => Err(TypeMeta::default().check()),
        Err(e) => Err(vec![e]),
    }
}

/// `apiVersion` and `kind`, whatever their type, and nothing else.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    api_version: Option<serde_json::Value>,
    kind: Option<serde_json::Value>,
}

impl TypeMeta {
    fn check(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for (field, value, want) in [
            ("apiVersion", &self.api_version, API_VERSION),
            ("kind", &self.kind, KIND),
        ] {
            match value {
                None | Some(serde_json::Value::Null) => errors.push(FieldError::new(
                    field,
                    format!("Required value: must be {want:?}"),
                )),
                Some(serde_json::Value::String(s)) if s == want => {}
                Some(other) => {
                    let shown = match other {
                        serde_json::Value::String(s) => format!("{s:?}"),
                        v => v.to_string(),
                    };
                    errors.push(FieldError::new(
                        field,
                        format!("Unsupported value: {shown}: supported values: {want:?}"),
                    ));
                }
            }
        }
        errors
    }
}

/// Decodes JSON (text starting with `{`) or YAML into `T`; `None` for an empty YAML
/// document. The error carries the path of the field that failed.
fn decode_as<T: DeserializeOwned>(text: &str) -> Result<Option<T>, FieldError> {
    if text.trim_start().starts_with('{') {
        let mut de = serde_json::Deserializer::from_str(text);
        let value = serde_path_to_error::deserialize(&mut de).map_err(path_error)?;
        de.end().map_err(|e| FieldError::new("", e.to_string()))?;
        return Ok(Some(value));
    }
    if is_empty_yaml(text) {
        return Ok(None);
    }
    let de = serde_yaml_ng::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de)
        .map(Some)
        .map_err(path_error)
}

/// A YAML document of nothing but blank lines, comments and document markers.
fn is_empty_yaml(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line == "---" || line == "..."
    })
}

fn path_error<E: fmt::Display>(e: serde_path_to_error::Error<E>) -> FieldError {
    let path = e.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let message = e.into_inner().to_string();
    let message = strip_path_prefix(&path, &message).to_string();
    FieldError::new(path, message)
}

/// serde_yaml_ng starts its messages with the path of the field, or of the object holding
/// it for an unknown field; the path is already in [`FieldError::path`].
fn strip_path_prefix<'a>(path: &str, message: &'a str) -> &'a str {
    let mut prefix = path;
    while !prefix.is_empty() {
        if let Some(rest) = message
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix(": "))
        {
            return rest;
        }
        prefix = prefix.rfind(['.', '[']).map_or("", |i| &prefix[..i]);
    }
    message
}

//! Plugin arguments (`pluginConfig[].args`): decoding with upstream defaults and errors that
//! name the field.
//!
//! Upstream: pkg/scheduler/apis/config/v1 (defaults) and validation. A plugin with arguments
//! defines a serde struct whose `Default` is upstream's default, decodes it with
//! [`decode_args`], and checks it with its own `validate`, returning [`ArgsError`]s whose
//! paths are relative to `args` (the configuration loader prefixes
//! `profiles[i].pluginConfig[j].args`).

use serde::de::DeserializeOwned;
use thiserror::Error;

/// An invalid plugin argument.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct ArgsError {
    /// Field path below `args`, e.g. `scoringStrategy.resources[0].weight`; empty for the
    /// whole object.
    pub path: String,
    /// What was expected.
    pub message: String,
}

impl ArgsError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ArgsError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Decodes `args` into `T`; absent args give `T::default()`. The `apiVersion` and `kind`
/// fields that upstream files carry inside `args` are accepted and ignored. Unknown fields
/// are rejected when `T` denies them (upstream decodes strictly).
pub fn decode_args<T: DeserializeOwned + Default>(
    args: Option<&serde_json::Value>,
) -> Result<T, ArgsError> {
    let Some(value) = args else {
        return Ok(T::default());
    };
    let mut value = value.clone();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("apiVersion");
        obj.remove("kind");
    }
    if value.is_null() {
        return Ok(T::default());
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ArgsError::new(
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    struct Args {
        hard_weight: i32,
        inner: Inner,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    struct Inner {
        items: Vec<i32>,
    }

    #[test]
    fn absent_args_are_default() {
        assert_eq!(decode_args::<Args>(None), Ok(Args::default()));
    }

    #[test]
    fn api_version_and_kind_are_ignored() {
        let v = serde_json::json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "X", "hardWeight": 3});
        assert_eq!(
            decode_args::<Args>(Some(&v)),
            Ok(Args {
                hard_weight: 3,
                ..Default::default()
            })
        );
    }

    #[test]
    fn type_errors_name_the_field() {
        let v = serde_json::json!({"inner": {"items": [1, "two"]}});
        assert_eq!(
            decode_args::<Args>(Some(&v)).map_err(|e| e.path),
            Err("inner.items[1]".to_string())
        );
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let v = serde_json::json!({"bogus": 1});
        assert_eq!(
            decode_args::<Args>(Some(&v))
                .map_err(|e| e.message.starts_with("unknown field `bogus`")),
            Err(true)
        );
    }
}

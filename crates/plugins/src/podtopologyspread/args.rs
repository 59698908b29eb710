//! `pluginConfig[].args` of PodTopologySpread: decoding, defaults and validation.
//!
//! Upstream: config.PodTopologySpreadArgs, v1 SetDefaults_PodTopologySpreadArgs and
//! validation.ValidatePodTopologySpreadArgs (messages as field.Error prints them).

use framework::{decode_args, ArgsError};
use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as V1LabelSelector;
use serde::Deserialize;

use super::common::{Defaults, DO_NOT_SCHEDULE, SCHEDULE_ANYWAY};
use crate::helper::validation::qualified_name_problems;

/// `defaultingType` that uses upstream's built-in default constraints.
pub const SYSTEM_DEFAULTING: &str = "System";
/// `defaultingType` that uses `defaultConstraints`.
pub const LIST_DEFAULTING: &str = "List";

/// Upstream: config.PodTopologySpreadArgs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods that set none, with `defaultingType: List`. Their selector is
    /// deduced per pod, so they must not set one.
    pub default_constraints: Vec<DefaultConstraint>,
    /// `System` (the default; an empty value means it too) or `List`.
    pub defaulting_type: String,
}

impl Default for PodTopologySpreadArgs {
    fn default() -> Self {
        PodTopologySpreadArgs {
            default_constraints: Vec::new(),
            defaulting_type: SYSTEM_DEFAULTING.to_string(),
        }
    }
}

/// A `v1.TopologySpreadConstraint` as written in `defaultConstraints`. Every field may be
/// left out so that validation, not decoding, reports what is missing, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: String,
    pub label_selector: Option<V1LabelSelector>,
    pub min_domains: Option<i32>,
    pub node_affinity_policy: Option<String>,
    pub node_taints_policy: Option<String>,
    pub match_label_keys: Option<Vec<String>>,
}

impl PodTopologySpreadArgs {
    /// Decodes `args`, applies upstream's defaults and validates.
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, Vec<ArgsError>> {
        let mut decoded: PodTopologySpreadArgs = decode_args(args).map_err(|e| vec![e])?;
        if decoded.defaulting_type.is_empty() {
            decoded.defaulting_type = SYSTEM_DEFAULTING.to_string();
        }
        let errs = decoded.validate();
        if errs.is_empty() {
            Ok(decoded)
        } else {
            Err(errs)
        }
    }

    /// Upstream ValidatePodTopologySpreadArgs: the defaulting type, then per constraint
    /// maxSkew, topologyKey, whenUnsatisfiable, the forbidden labelSelector and duplicates.
    pub fn validate(&self) -> Vec<ArgsError> {
        let mut errs = Vec::new();
        match self.defaulting_type.as_str() {
            SYSTEM_DEFAULTING if !self.default_constraints.is_empty() => {
                errs.push(ArgsError::new(
                    "defaultingType",
                    format!(
                        "Invalid value: {:?}: when .defaultConstraints are not empty",
                        self.defaulting_type
                    ),
                ));
            }
            SYSTEM_DEFAULTING | LIST_DEFAULTING => {}
            other => errs.push(ArgsError::new(
                "defaultingType",
                format!(
                    "Unsupported value: {other:?}: supported values: {:?}, {:?}",
                    SYSTEM_DEFAULTING, LIST_DEFAULTING
                ),
            )),
        }
        for (i, c) in self.default_constraints.iter().enumerate() {
            let path = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                errs.push(ArgsError::new(
                    format!("{path}.maxSkew"),
                    format!("Invalid value: {}: not in valid range (0, inf)", c.max_skew),
                ));
            }
            let key_path = format!("{path}.topologyKey");
            if c.topology_key.is_empty() {
                errs.push(ArgsError::new(
                    &key_path,
                    "Required value: can not be empty",
                ));
            } else {
                errs.extend(
                    qualified_name_problems(&c.topology_key)
                        .into_iter()
                        .map(|why| {
                            ArgsError::new(
                                &key_path,
                                format!("Invalid value: {:?}: {why}", c.topology_key),
                            )
                        }),
                );
            }
            let when_path = format!("{path}.whenUnsatisfiable");
            match c.when_unsatisfiable.as_str() {
                "" => errs.push(ArgsError::new(&when_path, "Required value: can not be empty")),
                DO_NOT_SCHEDULE | SCHEDULE_ANYWAY => {}
                other => errs.push(ArgsError::new(
                    &when_path,
                    format!(
                        "Unsupported value: {other:?}: supported values: {DO_NOT_SCHEDULE:?}, {SCHEDULE_ANYWAY:?}"
                    ),
                )),
            }
            if c.label_selector.is_some() {
                errs.push(ArgsError::new(
                    format!("{path}.labelSelector"),
                    "Forbidden: constraint must not define a selector, as they deduced for each pod",
                ));
            }
            if self.default_constraints[..i].iter().any(|other| {
                other.topology_key == c.topology_key
                    && other.when_unsatisfiable == c.when_unsatisfiable
            }) {
                errs.push(ArgsError::new(
                    &path,
                    format!(
                        "Duplicate value: {:?}",
                        format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable)
                    ),
                ));
            }
        }
        errs
    }

    /// The constraints pods without their own get.
    pub(super) fn defaults(&self) -> Defaults {
        if self.defaulting_type == LIST_DEFAULTING {
            Defaults {
                constraints: self
                    .default_constraints
                    .iter()
                    .map(DefaultConstraint::to_v1)
                    .collect(),
                system_defaulted: false,
            }
        } else {
            Defaults::system()
        }
    }
}

impl DefaultConstraint {
    fn to_v1(&self) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: self.max_skew,
            topology_key: self.topology_key.clone(),
            when_unsatisfiable: self.when_unsatisfiable.clone(),
            label_selector: self.label_selector.clone(),
            min_domains: self.min_domains,
            node_affinity_policy: self.node_affinity_policy.clone(),
            node_taints_policy: self.node_taints_policy.clone(),
            match_label_keys: self.match_label_keys.clone(),
        }
    }
}

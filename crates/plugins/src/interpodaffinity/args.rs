//! `InterPodAffinityArgs`: decoding with upstream's defaults and validation.
//!
//! Upstream: pkg/scheduler/apis/config/v1 (defaults) and
//! pkg/scheduler/apis/config/validation (ValidateInterPodAffinityArgs).

use framework::ArgsError;
use serde::{Deserialize, Deserializer};

/// Upstream's default `hardPodAffinityWeight`.
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;
/// The lowest valid `hardPodAffinityWeight`.
pub const MIN_HARD_POD_AFFINITY_WEIGHT: i32 = 0;
/// The highest valid `hardPodAffinityWeight`.
pub const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;

/// Upstream: config.InterPodAffinityArgs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// The score an existing pod's required affinity term adds to the nodes of its topology
    /// when the incoming pod matches it (0 turns this off). A `null` reads as unset.
    #[serde(deserialize_with = "weight_or_default")]
    pub hard_pod_affinity_weight: i32,
    /// When the incoming pod has no preferred (anti-)affinity terms, skip scoring instead of
    /// reading the preferred terms of existing pods.
    #[serde(deserialize_with = "null_as_default")]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

impl InterPodAffinityArgs {
    /// Upstream's checks; paths are relative to `args`.
    pub fn validate(&self) -> Vec<ArgsError> {
        let w = self.hard_pod_affinity_weight;
        if (MIN_HARD_POD_AFFINITY_WEIGHT..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&w) {
            return Vec::new();
        }
        vec![ArgsError::new(
            "hardPodAffinityWeight",
            format!(
                "Invalid value: {w}: not in valid range \
                 [{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]"
            ),
        )]
    }
}

/// Upstream's field is a pointer defaulted when nil, so `null` means the default.
fn weight_or_default<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    Ok(Option::<i32>::deserialize(d)?.unwrap_or(DEFAULT_HARD_POD_AFFINITY_WEIGHT))
}

/// Go's JSON decoder leaves a plain field at its zero value on `null`.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

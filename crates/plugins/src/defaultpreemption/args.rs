//! `DefaultPreemptionArgs`: decoding with upstream's defaults and validation.
//!
//! Upstream: pkg/scheduler/apis/config/v1 (defaults) and
//! pkg/scheduler/apis/config/validation (ValidateDefaultPreemptionArgs).

use framework::ArgsError;
use serde::{Deserialize, Deserializer};

/// Upstream's default `minCandidateNodesPercentage`.
pub const DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE: i32 = 10;
/// Upstream's default `minCandidateNodesAbsolute`.
pub const DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE: i32 = 100;

/// Upstream: config.DefaultPreemptionArgs. How many nodes a dry run must find as
/// candidates before it stops: the larger of the two, capped at the nodes where preemption
/// may help.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPreemptionArgs {
    /// A percentage of the nodes where preemption may help (0–100). A `null` reads as unset.
    #[serde(deserialize_with = "percentage_or_default")]
    pub min_candidate_nodes_percentage: i32,
    /// An absolute number of nodes (at least 0). A `null` reads as unset.
    #[serde(deserialize_with = "absolute_or_default")]
    pub min_candidate_nodes_absolute: i32,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
            min_candidate_nodes_absolute: DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
        }
    }
}

impl DefaultPreemptionArgs {
    /// Upstream's checks; paths are relative to `args`.
    pub fn validate(&self) -> Vec<ArgsError> {
        let pct = self.min_candidate_nodes_percentage;
        let abs = self.min_candidate_nodes_absolute;
        let mut errs = Vec::new();
        if !(0..=100).contains(&pct) {
            errs.push(ArgsError::new(
                "minCandidateNodesPercentage",
                format!("Invalid value: {pct}: not in valid range [0, 100]"),
            ));
        }
        if abs < 0 {
            errs.push(ArgsError::new(
                "minCandidateNodesAbsolute",
                format!("Invalid value: {abs}: not in valid range [0, inf)"),
            ));
        }
        if pct == 0 && abs == 0 {
            errs.push(ArgsError::new(
                "minCandidateNodesPercentage",
                "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute",
            ));
            errs.push(ArgsError::new(
                "minCandidateNodesAbsolute",
                "Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage",
            ));
        }
        errs
    }

    /// How many candidates a dry run over `num_nodes` potential nodes looks for.
    /// Upstream: calculateNumCandidates.
    pub fn num_candidates(&self, num_nodes: usize) -> usize {
        let n = num_nodes as i64;
        let by_pct = n * i64::from(self.min_candidate_nodes_percentage) / 100;
        let want = by_pct.max(i64::from(self.min_candidate_nodes_absolute));
        want.min(n).max(0) as usize
    }
}

/// Upstream's fields are pointers defaulted when nil, so `null` means the default.
fn percentage_or_default<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    Ok(Option::<i32>::deserialize(d)?.unwrap_or(DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE))
}

fn absolute_or_default<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    Ok(Option::<i32>::deserialize(d)?.unwrap_or(DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE))
}

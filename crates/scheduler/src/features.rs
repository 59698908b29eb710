//! Feature gates: `--feature-gates=Name=bool,...`, as kube-scheduler takes them.
//!
//! Upstream: k8s.io/component-base/featuregate and pkg/features. Only the gates whose
//! behaviour this scheduler has can be set; any other name is refused, as upstream refuses a
//! gate it does not know, so that a command line never silently means something else.

use thiserror::Error;

/// The gate of opportunistic batching (beta in 1.35, on by default).
pub const OPPORTUNISTIC_BATCHING: &str = "OpportunisticBatching";

/// Every gate that can be set.
pub const KNOWN_GATES: &[&str] = &[OPPORTUNISTIC_BATCHING];

/// The gates' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// Consecutive pods with the same signature reuse the previous cycle's work
    /// ([`crate::runtime::batch`]).
    pub opportunistic_batching: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            opportunistic_batching: true,
        }
    }
}

/// A `--feature-gates` value that cannot be used. Nothing is set when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FeatureGateError {
    /// An entry is not `Name=value`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// The value is not a bool.
    #[error("invalid value of {name}={value}, err: expected true or false")]
    InvalidValue { name: String, value: String },
    /// No such gate here.
    #[error("unrecognized feature gate: {0} (known: {known})", known = KNOWN_GATES.join(", "))]
    Unrecognized(String),
}

impl FeatureGates {
    /// The defaults with `spec` (`Name=true,Other=false`; empty: the defaults) applied.
    pub fn parse(spec: &str) -> Result<Self, FeatureGateError> {
        let mut gates = FeatureGates::default();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(FeatureGateError::MissingValue(entry.to_string()));
            };
            let (name, value) = (name.trim(), value.trim());
            let on = match value.to_ascii_lowercase().as_str() {
                "true" | "1" | "t" => true,
                "false" | "0" | "f" => false,
                _ => {
                    return Err(FeatureGateError::InvalidValue {
                        name: name.to_string(),
                        value: value.to_string(),
                    })
                }
            };
            match name {
                OPPORTUNISTIC_BATCHING => gates.opportunistic_batching = on,
                other => return Err(FeatureGateError::Unrecognized(other.to_string())),
            }
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::empty_is_the_defaults("", Ok(FeatureGates { opportunistic_batching: true }))]
    #[case::batching_turned_off(
        "OpportunisticBatching=false",
        Ok(FeatureGates { opportunistic_batching: false })
    )]
    #[case::last_value_wins(
        "OpportunisticBatching=false, OpportunisticBatching=true",
        Ok(FeatureGates { opportunistic_batching: true })
    )]
    #[case::unknown_gate_is_refused(
        "SchedulerQueueingHints=true",
        Err(FeatureGateError::Unrecognized("SchedulerQueueingHints".into()))
    )]
    #[case::value_must_be_a_bool(
        "OpportunisticBatching=maybe",
        Err(FeatureGateError::InvalidValue { name: "OpportunisticBatching".into(), value: "maybe".into() })
    )]
    #[case::value_is_required(
        "OpportunisticBatching",
        Err(FeatureGateError::MissingValue("OpportunisticBatching".into()))
    )]
    fn parse(#[case] spec: &str, #[case] want: Result<FeatureGates, FeatureGateError>) {
        assert_eq!(FeatureGates::parse(spec), want);
    }
}

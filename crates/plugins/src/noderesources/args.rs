//! The arguments of NodeResourcesFit and NodeResourcesBalancedAllocation: decoding, upstream
//! defaults and upstream validation (field paths relative to `args`, messages as upstream
//! prints them after the path).
//!
//! Upstream: pkg/scheduler/apis/config/v1 (types, defaults.go) and
//! pkg/scheduler/apis/config/validation/validation_pluginargs.go.

use serde::{Deserialize, Serialize};

use framework::ArgsError;

use crate::helper::validation::qualified_name_problems;

/// The strategy types (`scoringStrategy.type`); LeastAllocated is the default.
pub const LEAST_ALLOCATED: &str = "LeastAllocated";
pub const MOST_ALLOCATED: &str = "MostAllocated";
pub const REQUESTED_TO_CAPACITY_RATIO: &str = "RequestedToCapacityRatio";

/// The highest score a point of a RequestedToCapacityRatio shape may give (upstream
/// `MaxCustomPriorityScore`); scores are scaled to the framework's 0-100 range.
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// The strategy types validation accepts, sorted as upstream lists them in its message.
const SUPPORTED_STRATEGY_TYPES: [&str; 3] =
    [LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO];

/// A resource to score and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    pub name: String,
    /// 0 (or absent) is defaulted to 1.
    pub weight: i64,
}

impl ResourceSpec {
    pub fn new(name: &str, weight: i64) -> Self {
        ResourceSpec {
            name: name.to_string(),
            weight,
        }
    }
}

/// One point of a RequestedToCapacityRatio shape: at `utilization` percent, the score is
/// `score` (0-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    pub utilization: i32,
    pub score: i32,
}

/// The parameters of the RequestedToCapacityRatio strategy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    pub shape: Vec<UtilizationShapePoint>,
}

/// How NodeResourcesFit scores nodes. Unlike the args as a whole, a strategy that is given has
/// no default `type`: upstream rejects `scoringStrategy: {resources: [...]}` without a type.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    #[serde(rename = "type")]
    pub strategy_type: String,
    pub resources: Vec<ResourceSpec>,
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// `NodeResourcesFitArgs`. `Default` is upstream's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesFitArgs {
    /// Extended resources whose requests the Filter ignores.
    pub ignored_resources: Vec<String>,
    /// Extended-resource groups (the part before `/`) whose requests the Filter ignores.
    pub ignored_resource_groups: Vec<String>,
    pub scoring_strategy: Option<ScoringStrategy>,
}

impl Default for NodeResourcesFitArgs {
    fn default() -> Self {
        NodeResourcesFitArgs {
            ignored_resources: Vec::new(),
            ignored_resource_groups: Vec::new(),
            scoring_strategy: Some(ScoringStrategy {
                strategy_type: LEAST_ALLOCATED.to_string(),
                resources: default_resources(),
                requested_to_capacity_ratio: None,
            }),
        }
    }
}

/// `NodeResourcesBalancedAllocationArgs`. `Default` is upstream's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesBalancedAllocationArgs {
    pub resources: Vec<ResourceSpec>,
}

impl Default for NodeResourcesBalancedAllocationArgs {
    fn default() -> Self {
        NodeResourcesBalancedAllocationArgs {
            resources: default_resources(),
        }
    }
}

/// cpu and memory, weight 1 each (upstream `defaultResourceSpec`).
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

/// A weight of 0 means "unset" to upstream's defaulting.
fn default_weights(resources: &mut [ResourceSpec]) {
    for r in resources.iter_mut().filter(|r| r.weight == 0) {
        r.weight = 1;
    }
}

impl NodeResourcesFitArgs {
    /// Decodes `args` and applies upstream's defaults (SetDefaults_NodeResourcesFitArgs).
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, ArgsError> {
        let mut decoded: NodeResourcesFitArgs = framework::decode_args(args)?;
        decoded.set_defaults();
        Ok(decoded)
    }

    /// A missing strategy becomes LeastAllocated on cpu and memory; an empty resource list
    /// becomes cpu and memory; unset weights become 1. A given strategy's type is kept as is.
    pub fn set_defaults(&mut self) {
        let strategy = self
            .scoring_strategy
            .get_or_insert_with(|| ScoringStrategy {
                strategy_type: LEAST_ALLOCATED.to_string(),
                resources: Vec::new(),
                requested_to_capacity_ratio: None,
            });
        if strategy.resources.is_empty() {
            strategy.resources = default_resources();
        }
        default_weights(&mut strategy.resources);
    }

    /// Upstream ValidateNodeResourcesFitArgs.
    pub fn validate(&self) -> Vec<ArgsError> {
        let mut errs = Vec::new();
        for (i, name) in self.ignored_resources.iter().enumerate() {
            errs.extend(label_name_errors(name, &format!("ignoredResources[{i}]")));
        }
        for (i, group) in self.ignored_resource_groups.iter().enumerate() {
            let path = format!("ignoredResourceGroups[{i}]");
            if group.contains('/') {
                errs.push(invalid_str(
                    &path,
                    group,
                    "resource group name can't contain '/'",
                ));
            }
            errs.extend(label_name_errors(group, &path));
        }
        let Some(strategy) = &self.scoring_strategy else {
            errs.push(ArgsError::new(
                "scoringStrategy",
                "Required value: ScoringStrategy field is required",
            ));
            return errs;
        };
        if !SUPPORTED_STRATEGY_TYPES.contains(&strategy.strategy_type.as_str()) {
            let supported: Vec<String> = SUPPORTED_STRATEGY_TYPES
                .iter()
                .map(|t| format!("{t:?}"))
                .collect();
            errs.push(ArgsError::new(
                "scoringStrategy.type",
                format!(
                    "Unsupported value: {:?}: supported values: {}",
                    strategy.strategy_type,
                    supported.join(", ")
                ),
            ));
        }
        for (i, r) in strategy.resources.iter().enumerate() {
            if r.weight <= 0 || r.weight > 100 {
                errs.push(ArgsError::new(
                    format!("scoringStrategy.resources[{i}].weight"),
                    format!(
                        "Invalid value: {}: resource weight of {} not in valid range (0, 100]",
                        r.weight, r.name
                    ),
                ));
            }
        }
        let ratio_path = "scoringStrategy.requestedToCapacityRatio";
        match (
            strategy.strategy_type == REQUESTED_TO_CAPACITY_RATIO,
            &strategy.requested_to_capacity_ratio,
        ) {
            (true, None) => errs.push(ArgsError::new(
                ratio_path,
                "Required value: must be specified when type is RequestedToCapacityRatio",
            )),
            (true, Some(ratio)) => {
                errs.extend(shape_errors(&ratio.shape, &format!("{ratio_path}.shape")));
            }
            (false, Some(_)) => errs.push(ArgsError::new(
                ratio_path,
                "Forbidden: must be nil when type is not RequestedToCapacityRatio",
            )),
            (false, None) => {}
        }
        errs
    }
}

impl NodeResourcesBalancedAllocationArgs {
    /// Decodes `args` and applies upstream's defaults
    /// (SetDefaults_NodeResourcesBalancedAllocationArgs).
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, ArgsError> {
        let mut decoded: NodeResourcesBalancedAllocationArgs = framework::decode_args(args)?;
        decoded.set_defaults();
        Ok(decoded)
    }

    /// An empty resource list becomes cpu and memory; unset weights become 1.
    pub fn set_defaults(&mut self) {
        if self.resources.is_empty() {
            self.resources = default_resources();
        }
        default_weights(&mut self.resources);
    }

    /// Upstream ValidateNodeResourcesBalancedAllocationArgs: names are unique and every
    /// weight is 1 (the standard deviation does not weigh resources).
    pub fn validate(&self) -> Vec<ArgsError> {
        let mut errs = Vec::new();
        for (i, r) in self.resources.iter().enumerate() {
            if self.resources[..i].iter().any(|seen| seen.name == r.name) {
                errs.push(ArgsError::new(
                    format!("resources[{i}].name"),
                    format!("Duplicate value: {:?}", r.name),
                ));
            }
            if r.weight != 1 {
                errs.push(ArgsError::new(
                    format!("resources[{i}].weight"),
                    format!("Invalid value: {}: must be 1", r.weight),
                ));
            }
        }
        errs
    }
}

/// Upstream validateFunctionShape: at least one point, utilizations strictly increasing
/// (only the first violation is reported), utilization in 0..=100, score in 0..=10.
pub(crate) fn shape_errors(shape: &[UtilizationShapePoint], path: &str) -> Vec<ArgsError> {
    if shape.is_empty() {
        return vec![ArgsError::new(
            path,
            "Required value: at least one point must be specified",
        )];
    }
    let mut errs = Vec::new();
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(ArgsError::new(
            format!("{path}[{i}].utilization"),
            format!(
                "Invalid value: {}: values must be sorted in increasing order",
                shape[i].utilization
            ),
        ));
    }
    for (i, point) in shape.iter().enumerate() {
        if !(0..=100).contains(&point.utilization) {
            errs.push(ArgsError::new(
                format!("{path}[{i}].utilization"),
                format!(
                    "Invalid value: {}: not in valid range [0, 100]",
                    point.utilization
                ),
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&i64::from(point.score)) {
            errs.push(ArgsError::new(
                format!("{path}[{i}].score"),
                format!(
                    "Invalid value: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                    point.score
                ),
            ));
        }
    }
    errs
}

/// `Invalid value: "<value>": <detail>`, as upstream's field.Invalid prints a string value.
fn invalid_str(path: &str, value: &str, detail: &str) -> ArgsError {
    ArgsError::new(path, format!("Invalid value: {value:?}: {detail}"))
}

/// Upstream metav1validation.ValidateLabelName: one `Invalid value` error per problem that
/// IsQualifiedName finds, with its wording.
fn label_name_errors(name: &str, path: &str) -> Vec<ArgsError> {
    qualified_name_problems(name)
        .into_iter()
        .map(|why| invalid_str(path, name, &why))
        .collect()
}

//! Label selectors and node selectors, compiled once and matched many times.
//!
//! Upstream: k8s.io/apimachinery/pkg/labels (metav1.LabelSelectorAsSelector) and
//! k8s.io/component-helpers/scheduling/corev1/nodeaffinity. A selector is compiled when the
//! PodInfo is built; matching against a node or pod does no allocation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector as V1NodeSelector, NodeSelectorRequirement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as V1LabelSelector;
use thiserror::Error;

/// A selector that cannot be compiled, with the field path of the offending part.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct SelectorError {
    /// Where in the selector, e.g. `matchExpressions[0].operator`.
    pub path: String,
    /// What was wrong, e.g. `"Foo" is not a valid label selector operator`.
    pub message: String,
}

impl SelectorError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        SelectorError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// How a requirement compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Node selectors only: the label, parsed as an integer, is greater than the value.
    Gt,
    /// Node selectors only: the label, parsed as an integer, is less than the value.
    Lt,
}

/// One compiled `key op values` requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    /// Sorted, for binary search.
    pub values: Vec<String>,
    /// For Gt/Lt: the value as an integer.
    bound: i64,
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.has_value(v)),
            Operator::NotIn => value.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > self.bound),
            Operator::Lt => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < self.bound),
        }
    }

    fn has_value(&self, v: &str) -> bool {
        if self.values.len() <= 4 {
            self.values.iter().any(|x| x == v)
        } else {
            self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok()
        }
    }
}

/// A compiled label selector. `None` (a nil selector) matches nothing; an empty one matches
/// everything, as upstream's `LabelSelectorAsSelector`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// `None` means "nothing": the selector was absent.
    requirements: Option<Vec<Requirement>>,
}

impl LabelSelector {
    /// A selector that matches nothing (upstream `labels.Nothing()`).
    pub fn nothing() -> Self {
        LabelSelector { requirements: None }
    }

    /// A selector that matches everything (upstream `labels.Everything()`).
    pub fn everything() -> Self {
        LabelSelector {
            requirements: Some(Vec::new()),
        }
    }

    /// A selector requiring each `key=value` of `labels` (a pod's `nodeSelector`, a Service's
    /// `selector`).
    pub fn from_map(labels: &BTreeMap<String, String>) -> Self {
        LabelSelector {
            requirements: Some(
                labels
                    .iter()
                    .map(|(k, v)| Requirement {
                        key: k.clone(),
                        operator: Operator::In,
                        values: vec![v.clone()],
                        bound: 0,
                    })
                    .collect(),
            ),
        }
    }

    /// Compiles a metav1 LabelSelector; `None` compiles to "nothing".
    pub fn compile(selector: Option<&V1LabelSelector>) -> Result<Self, SelectorError> {
        let Some(selector) = selector else {
            return Ok(LabelSelector::nothing());
        };
        let mut requirements = Vec::new();
        if let Some(match_labels) = &selector.match_labels {
            for (k, v) in match_labels {
                let path = format!("matchLabels[{k}]");
                validate_label_key(k, &path)?;
                validate_label_value(v, &path)?;
                requirements.push(Requirement {
                    key: k.clone(),
                    operator: Operator::In,
                    values: vec![v.clone()],
                    bound: 0,
                });
            }
        }
        for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
            let path = format!("matchExpressions[{i}]");
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::new(
                        format!("{path}.operator"),
                        format!("{other:?} is not a valid label selector operator"),
                    ))
                }
            };
            requirements.push(requirement(
                &expr.key,
                operator,
                expr.values.as_deref().unwrap_or(&[]),
                &path,
            )?);
        }
        Ok(LabelSelector {
            requirements: Some(requirements),
        })
    }

    /// Adds `key op [value]` (In or NotIn) to the requirements; no effect on "nothing".
    /// Used to merge `matchLabelKeys`/`mismatchLabelKeys` of affinity terms.
    pub fn require(&mut self, key: &str, operator: Operator, value: &str) {
        if let Some(reqs) = self.requirements.as_mut() {
            reqs.push(Requirement {
                key: key.to_string(),
                operator,
                values: vec![value.to_string()],
                bound: 0,
            });
        }
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.requirements {
            None => false,
            Some(reqs) => reqs.iter().all(|r| r.matches(labels)),
        }
    }

    /// Like [`matches`](Self::matches), for optional label maps (absent = no labels).
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        match labels {
            Some(l) => self.matches(l),
            None => self.matches(&BTreeMap::new()),
        }
    }

    /// Whether this is the "nothing" selector.
    pub fn is_nothing(&self) -> bool {
        self.requirements.is_none()
    }

    /// Whether this selector matches everything.
    pub fn is_everything(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    /// The compiled requirements (empty for "nothing").
    pub fn requirements(&self) -> &[Requirement] {
        self.requirements.as_deref().unwrap_or(&[])
    }
}

fn requirement(
    key: &str,
    operator: Operator,
    values: &[String],
    path: &str,
) -> Result<Requirement, SelectorError> {
    validate_label_key(key, &format!("{path}.key"))?;
    let mut values = values.to_vec();
    let mut bound = 0;
    match operator {
        Operator::In | Operator::NotIn => {
            if values.is_empty() {
                return Err(SelectorError::new(
                    format!("{path}.values"),
                    "for 'In', 'NotIn' operators, values set can't be empty",
                ));
            }
            for (j, v) in values.iter().enumerate() {
                validate_label_value(v, &format!("{path}.values[{j}]"))?;
            }
        }
        Operator::Exists | Operator::DoesNotExist => {
            if !values.is_empty() {
                return Err(SelectorError::new(
                    format!("{path}.values"),
                    "values set must be empty for exists and does not exist",
                ));
            }
        }
        Operator::Gt | Operator::Lt => {
            if values.len() != 1 {
                return Err(SelectorError::new(
                    format!("{path}.values"),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            bound = values[0].parse::<i64>().map_err(|_| {
                SelectorError::new(
                    format!("{path}.values[0]"),
                    format!(
                        "for 'Gt', 'Lt' operators, the value must be an integer, got {:?}",
                        values[0]
                    ),
                )
            })?;
        }
    }
    values.sort();
    values.dedup();
    Ok(Requirement {
        key: key.to_string(),
        operator,
        values,
        bound,
    })
}

/// Checks a label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn validate_label_key(key: &str, path: &str) -> Result<(), SelectorError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let bad = |why: &str| {
        Err(SelectorError::new(
            path,
            format!("invalid label key {key:?}: {why}"),
        ))
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > 253 {
            return bad("prefix part must be a non-empty DNS subdomain of at most 253 characters");
        }
        let ok = p.split('.').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !seg.starts_with('-')
                && !seg.ends_with('-')
        });
        if !ok {
            return bad("prefix part must be a lowercase DNS subdomain");
        }
    }
    if name.is_empty() || name.len() > 63 {
        return bad("name part must be non-empty and at most 63 characters");
    }
    if !is_label_name(name) {
        return bad("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character");
    }
    Ok(())
}

/// Checks a label value: empty, or at most 63 characters of the label-name alphabet.
pub fn validate_label_value(value: &str, path: &str) -> Result<(), SelectorError> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 || !is_label_name(value) {
        return Err(SelectorError::new(
            path,
            format!("invalid label value {value:?}: must be at most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric character"),
        ));
    }
    Ok(())
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            edge(f)
                && edge(l)
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
        }
        _ => false,
    }
}

/// One compiled NodeSelectorTerm: its label requirements and `metadata.name` field
/// requirements, ANDed. A term with neither matches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    pub labels: Vec<Requirement>,
    /// `metadata.name` requirements: `(In = true / NotIn = false, name)`.
    pub fields: Vec<(bool, String)>,
}

impl NodeSelectorTerm {
    fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        if self.labels.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.labels.iter().all(|r| r.matches(labels))
            && self
                .fields
                .iter()
                .all(|(is_in, name)| (name == node_name) == *is_in)
    }
}

/// A compiled `v1.NodeSelector`: terms ORed. Terms that failed to compile never match; their
/// errors are kept so the caller can report them (upstream's LazyErrorNodeSelector).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
    pub errors: Vec<SelectorError>,
}

impl NodeSelector {
    /// Compiles every term; errors are collected, not returned.
    pub fn compile(selector: &V1NodeSelector) -> Self {
        let mut out = NodeSelector::default();
        for (i, term) in selector.node_selector_terms.iter().enumerate() {
            let path = format!("nodeSelectorTerms[{i}]");
            match compile_term(
                term.match_expressions.as_deref().unwrap_or(&[]),
                term.match_fields.as_deref().unwrap_or(&[]),
                &path,
            ) {
                Ok(t) => out.terms.push(t),
                Err(e) => out.errors.push(e),
            }
        }
        out
    }

    /// Whether a node with these labels and this name matches some term.
    pub fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        self.terms.iter().any(|t| t.matches(labels, node_name))
    }
}

/// Compiles one node selector term (also used for preferred scheduling terms).
pub fn compile_term(
    expressions: &[NodeSelectorRequirement],
    fields: &[NodeSelectorRequirement],
    path: &str,
) -> Result<NodeSelectorTerm, SelectorError> {
    let mut term = NodeSelectorTerm {
        labels: Vec::with_capacity(expressions.len()),
        fields: Vec::with_capacity(fields.len()),
    };
    for (j, expr) in expressions.iter().enumerate() {
        let p = format!("{path}.matchExpressions[{j}]");
        let op = match expr.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            other => {
                return Err(SelectorError::new(
                    format!("{p}.operator"),
                    format!("{other:?} is not a valid node selector operator"),
                ))
            }
        };
        term.labels.push(requirement(
            &expr.key,
            op,
            expr.values.as_deref().unwrap_or(&[]),
            &p,
        )?);
    }
    for (j, field) in fields.iter().enumerate() {
        let p = format!("{path}.matchFields[{j}]");
        if field.key != "metadata.name" {
            return Err(SelectorError::new(
                format!("{p}.key"),
                format!(
                    "{:?} is not a valid field selector key: only metadata.name is supported",
                    field.key
                ),
            ));
        }
        let is_in = match field.operator.as_str() {
            "In" => true,
            "NotIn" => false,
            other => {
                return Err(SelectorError::new(
                    format!("{p}.operator"),
                    format!("{other:?} is not a valid node field selector operator"),
                ))
            }
        };
        let values = field.values.as_deref().unwrap_or(&[]);
        let [value] = values else {
            return Err(SelectorError::new(
                format!("{p}.values"),
                format!(
                    "unexpected number of value ({}) for node field selector operator {:?}",
                    values.len(),
                    field.operator
                ),
            ));
        };
        term.fields.push((is_in, value.clone()));
    }
    Ok(term)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSelectorTerm as V1Term;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use rstest::rstest;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn selector(ml: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> V1LabelSelector {
        V1LabelSelector {
            match_labels: Some(labels(ml)),
            match_expressions: Some(exprs),
        }
    }

    #[rstest]
    #[case::match_labels_hit(selector(&[("app", "web")], vec![]), &[("app", "web")], true)]
    #[case::match_labels_miss(selector(&[("app", "web")], vec![]), &[("app", "db")], false)]
    #[case::in_hit(selector(&[], vec![expr("tier", "In", &["a", "b"])]), &[("tier", "b")], true)]
    #[case::in_absent(selector(&[], vec![expr("tier", "In", &["a"])]), &[], false)]
    #[case::notin_absent_matches(selector(&[], vec![expr("tier", "NotIn", &["a"])]), &[], true)]
    #[case::notin_hit(selector(&[], vec![expr("tier", "NotIn", &["a"])]), &[("tier", "a")], false)]
    #[case::exists(selector(&[], vec![expr("gpu", "Exists", &[])]), &[("gpu", "")], true)]
    #[case::does_not_exist(selector(&[], vec![expr("gpu", "DoesNotExist", &[])]), &[("gpu", "x")], false)]
    #[case::empty_selector_matches_all(selector(&[], vec![]), &[("x", "y")], true)]
    fn label_selector_matches(
        #[case] sel: V1LabelSelector,
        #[case] node_labels: &[(&str, &str)],
        #[case] want: bool,
    ) {
        let compiled = LabelSelector::compile(Some(&sel)).map(|s| s.matches(&labels(node_labels)));
        assert_eq!(compiled, Ok(want));
    }

    #[test]
    fn nil_selector_matches_nothing() {
        assert_eq!(
            LabelSelector::compile(None).map(|s| s.matches(&BTreeMap::new())),
            Ok(false)
        );
    }

    #[rstest]
    #[case::bad_operator(expr("a", "Foo", &[]), "matchExpressions[0].operator: \"Foo\" is not a valid label selector operator")]
    #[case::in_without_values(expr("a", "In", &[]), "matchExpressions[0].values: for 'In', 'NotIn' operators, values set can't be empty")]
    #[case::exists_with_values(expr("a", "Exists", &["x"]), "matchExpressions[0].values: values set must be empty for exists and does not exist")]
    #[case::bad_key(expr("-a", "Exists", &[]), "matchExpressions[0].key: invalid label key \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")]
    fn label_selector_errors(#[case] e: LabelSelectorRequirement, #[case] want: &str) {
        let got = LabelSelector::compile(Some(&selector(&[], vec![e]))).map_err(|e| e.to_string());
        assert_eq!(got, Err(want.to_string()));
    }

    fn nreq(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn node_selector(
        terms: Vec<(Vec<NodeSelectorRequirement>, Vec<NodeSelectorRequirement>)>,
    ) -> V1NodeSelector {
        V1NodeSelector {
            node_selector_terms: terms
                .into_iter()
                .map(|(e, f)| V1Term {
                    match_expressions: Some(e),
                    match_fields: Some(f),
                })
                .collect(),
        }
    }

    #[rstest]
    #[case::gt_hit(node_selector(vec![(vec![nreq("cores", "Gt", &["4"])], vec![])]), &[("cores", "8")], "n1", true)]
    #[case::gt_not_integer(node_selector(vec![(vec![nreq("cores", "Gt", &["4"])], vec![])]), &[("cores", "many")], "n1", false)]
    #[case::lt_hit(node_selector(vec![(vec![nreq("cores", "Lt", &["4"])], vec![])]), &[("cores", "2")], "n1", true)]
    #[case::terms_are_ored(node_selector(vec![(vec![nreq("a", "Exists", &[])], vec![]), (vec![nreq("b", "Exists", &[])], vec![])]), &[("b", "1")], "n1", true)]
    #[case::field_name_in(node_selector(vec![(vec![], vec![nreq("metadata.name", "In", &["n1"])])]), &[], "n1", true)]
    #[case::field_name_notin(node_selector(vec![(vec![], vec![nreq("metadata.name", "NotIn", &["n1"])])]), &[], "n1", false)]
    #[case::empty_term_matches_nothing(node_selector(vec![(vec![], vec![])]), &[("a", "b")], "n1", false)]
    #[case::bad_term_never_matches(node_selector(vec![(vec![nreq("a", "Bogus", &[])], vec![])]), &[("a", "b")], "n1", false)]
    fn node_selector_matches(
        #[case] sel: V1NodeSelector,
        #[case] node_labels: &[(&str, &str)],
        #[case] name: &str,
        #[case] want: bool,
    ) {
        assert_eq!(
            NodeSelector::compile(&sel).matches(&labels(node_labels), name),
            want
        );
    }

    #[test]
    fn node_selector_keeps_errors() {
        let sel = node_selector(vec![(vec![nreq("a", "Bogus", &[])], vec![])]);
        assert_eq!(
            NodeSelector::compile(&sel).errors,
            vec![SelectorError::new(
                "nodeSelectorTerms[0].matchExpressions[0].operator",
                "\"Bogus\" is not a valid node selector operator"
            )]
        );
    }
}

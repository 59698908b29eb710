use std::sync::Arc;

use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventObject, EventResource, Handle, NodeInfo,
    NodeScore, PodInfo, PreFilterResult, QueueingHint, Snapshot, Status,
};
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity as V1NodeAffinity, NodeSelector as V1NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm as V1NodeSelectorTerm, Pod, PodSpec,
    PreferredSchedulingTerm,
};
use rstest::rstest;
use serde_json::{json, Value};

use super::*;

// ---- builders ----

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: op.to_string(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

fn term(
    expressions: Vec<NodeSelectorRequirement>,
    fields: Vec<NodeSelectorRequirement>,
) -> V1NodeSelectorTerm {
    V1NodeSelectorTerm {
        match_expressions: Some(expressions),
        match_fields: Some(fields),
    }
}

fn node_affinity(p: &mut Pod) -> &mut V1NodeAffinity {
    p.spec
        .get_or_insert_with(PodSpec::default)
        .affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(V1NodeAffinity::default)
}

/// A pod whose required node affinity has exactly these terms.
fn pod_requiring(terms: Vec<V1NodeSelectorTerm>) -> PodBuilder {
    make_pod("p").with(move |p| {
        node_affinity(p).required_during_scheduling_ignored_during_execution =
            Some(V1NodeSelector {
                node_selector_terms: terms,
            });
    })
}

/// A pod with these preferred terms.
fn pod_preferring(terms: Vec<(i32, V1NodeSelectorTerm)>) -> PodBuilder {
    make_pod("p").with(move |p| {
        node_affinity(p).preferred_during_scheduling_ignored_during_execution = Some(
            terms
                .into_iter()
                .map(|(weight, preference)| PreferredSchedulingTerm { weight, preference })
                .collect(),
        );
    })
}

/// The plugin built from `args`, which must be valid.
fn plugin_with(args: Value) -> NodeAffinity {
    let decoded: Result<NodeAffinityArgs, ArgsError> = decode_args(Some(&args));
    assert_eq!(decoded.as_ref().err(), None, "test args must decode");
    let built = NodeAffinity::from_args(&decoded.unwrap_or_default());
    assert_eq!(built.as_ref().err(), None, "test args must compile");
    built.unwrap_or_default()
}

fn plugin() -> NodeAffinity {
    NodeAffinity::default()
}

fn snapshot() -> Snapshot {
    Snapshot::default()
}

// ---- PreFilter ----

fn names(n: &[&str]) -> Option<PreFilterResult> {
    Some(PreFilterResult::nodes(n.iter().copied()))
}

fn name_in(values: &[&str]) -> NodeSelectorRequirement {
    req("metadata.name", "In", values)
}

#[rstest]
#[case::nothing_to_check_skips(json!({}), make_pod("p"), None, Status::skip())]
#[case::empty_node_selector_map_does_not_skip(json!({}), make_pod("p").with(|p| { p.spec.get_or_insert_with(PodSpec::default).node_selector = Some(Default::default()); }), None, Status::success())]
#[case::node_selector(json!({}), make_pod("p").node_selector("zone", "a"), None, Status::success())]
#[case::added_required_affinity_does_not_skip(
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}),
    make_pod("p"),
    None,
    Status::success()
)]
#[case::added_preferred_affinity_alone_skips(
    json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}),
    make_pod("p"),
    None,
    Status::skip()
)]
#[case::preferred_affinity_alone_skips(json!({}), make_pod("p").preferred_node_affinity(1, "zone", "Exists", &[]), None, Status::skip())]
#[case::label_terms_only(json!({}), make_pod("p").node_affinity_term("zone", "In", &["a"]), None, Status::success())]
#[case::no_terms(json!({}), pod_requiring(vec![]), None, Status::success())]
#[case::one_term_pinning_names(json!({}), pod_requiring(vec![term(vec![], vec![name_in(&["n1"])])]), names(&["n1"]), Status::success())]
#[case::terms_unite(
    json!({}),
    pod_requiring(vec![term(vec![], vec![name_in(&["n1"])]), term(vec![], vec![name_in(&["n2"])])]),
    names(&["n1", "n2"]),
    Status::success()
)]
#[case::requirements_in_a_term_intersect(
    json!({}),
    pod_requiring(vec![term(vec![], vec![name_in(&["n1"]), name_in(&["n1", "n2"])])]),
    names(&["n1"]),
    Status::success()
)]
#[case::a_term_without_names_allows_every_node(
    json!({}),
    pod_requiring(vec![term(vec![], vec![name_in(&["n1"])]), term(vec![req("zone", "In", &["a"])], vec![])]),
    None,
    Status::success()
)]
#[case::disjoint_names_in_a_term_conflict(
    json!({}),
    pod_requiring(vec![term(vec![], vec![name_in(&["n1"]), name_in(&["n2"])])]),
    None,
    Status::unresolvable(ERR_REASON_CONFLICT)
)]
#[case::conflict_in_one_term_is_fine_when_another_names_nodes(
    json!({}),
    pod_requiring(vec![term(vec![], vec![name_in(&["n1"]), name_in(&["n2"])]), term(vec![], vec![name_in(&["n3"])])]),
    names(&["n3"]),
    Status::success()
)]
#[case::not_in_names_do_not_pin(
    json!({}),
    pod_requiring(vec![term(vec![], vec![req("metadata.name", "NotIn", &["n1"])])]),
    None,
    Status::success()
)]
#[case::names_pinned_alongside_labels(
    json!({}),
    pod_requiring(vec![term(vec![req("zone", "In", &["a"])], vec![name_in(&["n1"])])]),
    names(&["n1"]),
    Status::success()
)]
#[case::names_pinned_even_when_the_term_does_not_compile(
    json!({}),
    pod_requiring(vec![term(vec![req("zone", "Bogus", &[])], vec![name_in(&["n1"])])]),
    names(&["n1"]),
    Status::success()
)]
fn pre_filter(
    #[case] args: Value,
    #[case] pod: PodBuilder,
    #[case] want_result: Option<PreFilterResult>,
    #[case] want_status: Status,
) {
    let got = plugin_with(args).pre_filter(&mut CycleState::new(), &pod.info(), &snapshot());
    assert_eq!(got, (want_result, want_status));
}

// ---- Filter ----

/// PreFilter then Filter, as the framework runs them (Filter is not run after a Skip).
fn run_filter(pl: &NodeAffinity, pod: &PodInfo, node: &NodeInfo) -> Status {
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, pod, &snapshot());
    if status.is_skip() {
        return Status::success();
    }
    if !status.is_success() {
        return status;
    }
    pl.filter(&state, pod, node)
}

fn no_match() -> Status {
    Status::unresolvable(ERR_REASON_POD)
}

#[rstest]
#[case::no_selector_or_affinity(make_pod("p"), make_node("n"), Status::success())]
#[case::node_selector_missing_label(make_pod("p").node_selector("foo", "bar"), make_node("n"), no_match())]
#[case::node_selector_matches(make_pod("p").node_selector("foo", "bar"), make_node("n").label("foo", "bar"), Status::success())]
#[case::node_selector_needs_every_pair(make_pod("p").node_selector("foo", "bar").node_selector("baz", "blah"), make_node("n").label("foo", "bar"), no_match())]
#[case::in_matches(make_pod("p").node_affinity_term("foo", "In", &["bar", "value2"]), make_node("n").label("foo", "bar"), Status::success())]
#[case::in_other_value(make_pod("p").node_affinity_term("foo", "In", &["bar"]), make_node("n").label("foo", "baz"), no_match())]
#[case::not_in_absent_label_matches(make_pod("p").node_affinity_term("foo", "NotIn", &["bar"]), make_node("n"), Status::success())]
#[case::not_in_listed_value(make_pod("p").node_affinity_term("foo", "NotIn", &["bar"]), make_node("n").label("foo", "bar"), no_match())]
#[case::exists(make_pod("p").node_affinity_term("foo", "Exists", &[]), make_node("n").label("foo", ""), Status::success())]
#[case::does_not_exist(make_pod("p").node_affinity_term("foo", "DoesNotExist", &[]), make_node("n").label("foo", "x"), no_match())]
#[case::gt_matches(make_pod("p").node_affinity_term("cores", "Gt", &["4"]), make_node("n").label("cores", "8"), Status::success())]
#[case::lt_equal_does_not_match(make_pod("p").node_affinity_term("cores", "Lt", &["8"]), make_node("n").label("cores", "8"), no_match())]
#[case::gt_non_integer_label(make_pod("p").node_affinity_term("cores", "Gt", &["4"]), make_node("n").label("cores", "many"), no_match())]
#[case::expressions_in_a_term_are_anded(
    pod_requiring(vec![term(vec![req("foo", "Exists", &[]), req("bar", "Exists", &[])], vec![])]),
    make_node("n").label("foo", "x"),
    no_match()
)]
#[case::terms_are_ored(
    pod_requiring(vec![term(vec![req("foo", "Exists", &[])], vec![]), term(vec![req("bar", "Exists", &[])], vec![])]),
    make_node("n").label("bar", "x"),
    Status::success()
)]
#[case::no_terms_match_nothing(pod_requiring(vec![]), make_node("n").label("foo", "bar"), no_match())]
#[case::empty_term_matches_nothing(pod_requiring(vec![term(vec![], vec![])]), make_node("n").label("foo", "bar"), no_match())]
#[case::node_selector_and_affinity_both_needed(
    make_pod("p").node_selector("foo", "bar").node_affinity_term("zone", "In", &["a"]),
    make_node("n").label("foo", "bar"),
    no_match()
)]
#[case::node_selector_and_affinity_both_match(
    make_pod("p").node_selector("foo", "bar").node_affinity_term("zone", "In", &["a"]),
    make_node("n").label("foo", "bar").label("zone", "a"),
    Status::success()
)]
#[case::match_fields_name(pod_requiring(vec![term(vec![], vec![name_in(&["n"])])]), make_node("n"), Status::success())]
#[case::match_fields_other_name(pod_requiring(vec![term(vec![], vec![name_in(&["m"])])]), make_node("n"), no_match())]
#[case::match_fields_and_labels_are_anded(
    pod_requiring(vec![term(vec![req("zone", "In", &["a"])], vec![name_in(&["n"])])]),
    make_node("n").label("zone", "b"),
    no_match()
)]
#[case::invalid_operator_never_matches(
    pod_requiring(vec![term(vec![req("foo", "Bogus", &["bar"])], vec![])]),
    make_node("n").label("foo", "bar"),
    no_match()
)]
#[case::invalid_term_does_not_hide_a_valid_one(
    pod_requiring(vec![term(vec![req("foo", "Bogus", &["bar"])], vec![]), term(vec![req("foo", "In", &["bar"])], vec![])]),
    make_node("n").label("foo", "bar"),
    Status::success()
)]
#[case::invalid_key_never_matches(
    pod_requiring(vec![term(vec![req("-foo", "Exists", &[])], vec![])]),
    make_node("n").label("-foo", "bar"),
    no_match()
)]
fn filter(#[case] pod: PodBuilder, #[case] node: NodeBuilder, #[case] want: Status) {
    assert_eq!(
        run_filter(&plugin(), &pod.info(), &node.info_with(&[])),
        want
    );
}

fn added_zone_a() -> Value {
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }}})
}

#[rstest]
#[case::both_match(added_zone_a(), make_pod("p").node_selector("foo", "bar"), make_node("n").label("zone", "a").label("foo", "bar"), Status::success())]
#[case::added_affinity_rejects_first(added_zone_a(), make_pod("p").node_selector("foo", "bar"), make_node("n").label("zone", "b").label("foo", "bar"), Status::unresolvable(ERR_REASON_ENFORCED))]
#[case::added_affinity_rejects_a_pod_without_affinity(
    added_zone_a(),
    make_pod("p"),
    make_node("n"),
    Status::unresolvable(ERR_REASON_ENFORCED)
)]
#[case::pod_affinity_still_applies(added_zone_a(), make_pod("p").node_selector("foo", "bar"), make_node("n").label("zone", "a"), no_match())]
#[case::added_selector_without_terms_matches_nothing(
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
    make_pod("p"),
    make_node("n"),
    Status::unresolvable(ERR_REASON_ENFORCED)
)]
fn filter_with_added_affinity(
    #[case] args: Value,
    #[case] pod: PodBuilder,
    #[case] node: NodeBuilder,
    #[case] want: Status,
) {
    assert_eq!(
        run_filter(&plugin_with(args), &pod.info(), &node.info_with(&[])),
        want
    );
}

#[rstest]
#[case::matches(make_node("n").label("foo", "bar"), Status::success())]
#[case::does_not_match(make_node("n"), no_match())]
fn filter_without_pre_filter_compiles_on_the_spot(#[case] node: NodeBuilder, #[case] want: Status) {
    let pod = make_pod("p").node_selector("foo", "bar").info();
    assert_eq!(
        plugin().filter(&CycleState::new(), &pod, &node.info_with(&[])),
        want
    );
}

// ---- PreScore / Score / NormalizeScore ----

/// PreScore, Score on every node and NormalizeScore. `Err` carries a non-success PreScore
/// status or a Score error.
fn run_scoring(pl: &NodeAffinity, pod: &PodInfo, nodes: &[NodeInfo]) -> Result<Vec<i64>, Status> {
    let mut state = CycleState::new();
    let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
    let status = pl.pre_score(&mut state, pod, &snapshot(), &arcs);
    if !status.is_success() {
        return Err(status);
    }
    let mut scores = Vec::with_capacity(nodes.len());
    for node in nodes {
        scores.push(NodeScore {
            node,
            score: pl.score(&state, pod, node)?,
        });
    }
    let status = pl.normalize_score(&state, pod, &mut scores);
    if !status.is_success() {
        return Err(status);
    }
    Ok(scores.iter().map(|s| s.score).collect())
}

fn weighted_pod() -> PodBuilder {
    pod_preferring(vec![
        (2, term(vec![req("foo", "In", &["bar"])], vec![])),
        (4, term(vec![req("key", "Exists", &[])], vec![])),
        (
            5,
            term(
                vec![req("foo", "In", &["bar"]), req("key", "Exists", &[])],
                vec![],
            ),
        ),
    ])
}

fn added_preferred_zone_a(weight: i32) -> Value {
    json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
    ]}})
}

#[rstest]
#[case::no_preferred_terms_skips(json!({}), make_pod("p").node_affinity_term("foo", "Exists", &[]), vec![make_node("n1")], Err(Status::skip()))]
#[case::sum_of_matching_weights(
    json!({}),
    weighted_pod(),
    vec![
        make_node("n1").label("foo", "bar"),
        make_node("n2").label("key", "value"),
        make_node("n3").label("foo", "bar").label("key", "value"),
        make_node("n4"),
    ],
    Ok(vec![18, 36, 100, 0])
)]
#[case::nothing_matches_all_zero(json!({}), weighted_pod(), vec![make_node("n1"), make_node("n2")], Ok(vec![0, 0]))]
#[case::zero_weight_and_empty_terms_are_ignored(
    json!({}),
    pod_preferring(vec![(0, term(vec![req("foo", "Exists", &[])], vec![])), (3, term(vec![], vec![])), (1, term(vec![req("bar", "Exists", &[])], vec![]))]),
    vec![make_node("n1").label("foo", "x"), make_node("n2").label("bar", "x")],
    Ok(vec![0, 100])
)]
#[case::invalid_zero_weight_term_is_ignored(
    json!({}),
    pod_preferring(vec![(0, term(vec![req("foo", "Bogus", &[])], vec![])), (1, term(vec![req("bar", "Exists", &[])], vec![]))]),
    vec![make_node("n1"), make_node("n2").label("bar", "x")],
    Ok(vec![0, 100])
)]
#[case::empty_preferred_list_still_scores(json!({}), pod_preferring(vec![]), vec![make_node("n1")], Ok(vec![0]))]
#[case::preferred_node_name(
    json!({}),
    pod_preferring(vec![(7, term(vec![], vec![name_in(&["n2"])]))]),
    vec![make_node("n1"), make_node("n2")],
    Ok(vec![0, 100])
)]
#[case::added_preferred_terms_alone(
    added_preferred_zone_a(3),
    make_pod("p"),
    vec![make_node("n1").label("zone", "a"), make_node("n2")],
    Ok(vec![100, 0])
)]
#[case::added_and_pod_terms_add_up(
    added_preferred_zone_a(3),
    pod_preferring(vec![(1, term(vec![req("ssd", "Exists", &[])], vec![]))]),
    vec![make_node("n1").label("zone", "a").label("ssd", ""), make_node("n2").label("zone", "a"), make_node("n3").label("ssd", "")],
    Ok(vec![100, 75, 25])
)]
#[case::invalid_preferred_term_fails_pre_score(
    json!({}),
    pod_preferring(vec![(1, term(vec![req("foo", "Bogus", &[])], vec![]))]),
    vec![make_node("n1")],
    Err(Status::error(r#"[0].matchExpressions[0].operator: Unsupported value: "Bogus": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt""#))
)]
#[case::several_invalid_preferred_terms_are_all_reported(
    json!({}),
    pod_preferring(vec![(1, term(vec![req("foo", "Bogus", &[])], vec![])), (2, term(vec![req("bar", "In", &[])], vec![]))]),
    vec![make_node("n1")],
    Err(Status::error(r#"[[0].matchExpressions[0].operator: Unsupported value: "Bogus": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", [1].matchExpressions[0].values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty]"#))
)]
fn scores(
    #[case] args: Value,
    #[case] pod: PodBuilder,
    #[case] nodes: Vec<NodeBuilder>,
    #[case] want: Result<Vec<i64>, Status>,
) {
    let nodes: Vec<NodeInfo> = nodes.into_iter().map(|n| n.info_with(&[])).collect();
    assert_eq!(run_scoring(&plugin_with(args), &pod.info(), &nodes), want);
}

#[test]
fn score_without_pre_score_compiles_on_the_spot() {
    let pod = pod_preferring(vec![(5, term(vec![req("foo", "Exists", &[])], vec![]))]).info();
    let node = make_node("n").label("foo", "x").info_with(&[]);
    assert_eq!(plugin().score(&CycleState::new(), &pod, &node), Ok(5));
}

// ---- args ----

#[rstest]
#[case::absent(None, Ok(NodeAffinityArgs::default()))]
#[case::empty_object(Some(json!({})), Ok(NodeAffinityArgs::default()))]
#[case::api_version_and_kind(Some(json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeAffinityArgs"})), Ok(NodeAffinityArgs::default()))]
#[case::added_affinity(
    Some(json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}})),
    Ok(NodeAffinityArgs { added_affinity: Some(V1NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(V1NodeSelector {
            node_selector_terms: vec![V1NodeSelectorTerm { match_expressions: None, match_fields: Some(vec![name_in(&["n1"])]) }],
        }),
        preferred_during_scheduling_ignored_during_execution: None,
    }) })
)]
#[case::unknown_field(Some(json!({"addedAfinity": {}})), Err(ArgsError::new("addedAfinity", "unknown field `addedAfinity`, expected `addedAffinity`")))]
#[case::wrong_type(
    Some(json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "heavy"}]}})),
    Err(ArgsError::new("addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "invalid type: string \"heavy\", expected i32"))
)]
fn decodes_args(#[case] args: Option<Value>, #[case] want: Result<NodeAffinityArgs, ArgsError>) {
    assert_eq!(decode_args::<NodeAffinityArgs>(args.as_ref()), want);
}

const REQUIRED: &str = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution";
const LABEL_OPS: &str = r#"supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt""#;
const QUALIFIED_NAME_REGEX: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn required_args(expressions: Value, fields: Value) -> Value {
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions, "matchFields": fields}]
    }}})
}

fn err(path: &str, message: &str) -> ArgsError {
    ArgsError::new(path, message)
}

#[rstest]
#[case::no_added_affinity(json!({}), vec![])]
#[case::valid_added_affinity(
    json!({"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/zone", "operator": "In", "values": ["a", "b"]}], "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}}]
    }}),
    vec![]
)]
#[case::unsupported_operator(
    required_args(json!([{"key": "zone", "operator": "Bogus"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator"), &format!(r#"Unsupported value: "Bogus": {LABEL_OPS}"#))]
)]
#[case::in_without_values(
    required_args(json!([{"key": "zone", "operator": "In"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values"), "Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty")]
)]
#[case::not_in_with_empty_values(
    required_args(json!([{"key": "zone", "operator": "NotIn", "values": []}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values"), "Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty")]
)]
#[case::exists_with_values(
    required_args(json!([{"key": "zone", "operator": "Exists", "values": ["a"]}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values"), r#"Invalid value: []string{"a"}: values set must be empty for exists and does not exist"#)]
)]
#[case::gt_with_two_non_integer_values(
    required_args(json!([{"key": "cores", "operator": "Gt", "values": ["4", "x"]}]), json!([])),
    vec![
        err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values"), r#"Invalid value: []string{"4", "x"}: for 'Gt', 'Lt' operators, exactly one value is required"#),
        err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values[1]"), r#"Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer"#),
    ]
)]
#[case::invalid_key(
    required_args(json!([{"key": "-zone", "operator": "Exists"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key"), &format!(r#"Invalid value: "-zone": name part {QUALIFIED_NAME_REGEX}"#))]
)]
#[case::key_with_empty_prefix(
    required_args(json!([{"key": "/zone", "operator": "Exists"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key"), r#"Invalid value: "/zone": prefix part must be non-empty"#)]
)]
#[case::key_with_uppercase_prefix(
    required_args(json!([{"key": "Example.com/zone", "operator": "Exists"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key"), r#"Invalid value: "Example.com/zone": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#)]
)]
#[case::empty_key(
    required_args(json!([{"key": "", "operator": "Exists"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key"), &format!(r#"Invalid value: "": name part must be non-empty; name part {QUALIFIED_NAME_REGEX}"#))]
)]
#[case::key_with_two_slashes(
    required_args(json!([{"key": "a/b/c", "operator": "Exists"}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key"), &format!(r#"Invalid value: "a/b/c": a qualified name {QUALIFIED_NAME_REGEX} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#))]
)]
#[case::invalid_value(
    required_args(json!([{"key": "zone", "operator": "In", "values": ["ok", "not ok"]}]), json!([])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values[1][zone]"), r#"Invalid value: "not ok": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#)]
)]
#[case::field_operator(
    required_args(json!([]), json!([{"key": "metadata.name", "operator": "Exists"}])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchFields[0].operator"), r#"Unsupported value: "Exists": supported values: "In", "NotIn""#)]
)]
#[case::field_with_two_values(
    required_args(json!([]), json!([{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}])),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchFields[0].values"), r#"Invalid value: []string{"n1", "n2"}: must have one element"#)]
)]
#[case::empty_terms_are_not_validated(
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}, {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}]}}}),
    vec![err(&format!("{REQUIRED}.nodeSelectorTerms[1].matchExpressions[0].operator"), &format!(r#"Unsupported value: "Bogus": {LABEL_OPS}"#))]
)]
#[case::preferred_term(
    json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}},
        {"weight": 2, "preference": {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}}
    ]}}),
    vec![err(&format!("{PREFERRED}[1].matchExpressions[0].operator"), &format!(r#"Unsupported value: "Bogus": {LABEL_OPS}"#))]
)]
#[case::zero_weight_preferred_term_is_not_validated(
    json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}}
    ]}}),
    vec![]
)]
#[case::every_error_is_reported(
    json!({"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Bogus"}, {"key": "rack", "operator": "DoesNotExist", "values": ["r1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In"}]}}]
    }}),
    vec![
        err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator"), &format!(r#"Unsupported value: "Bogus": {LABEL_OPS}"#)),
        err(&format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[1].values"), r#"Invalid value: []string{"r1"}: values set must be empty for exists and does not exist"#),
        err(&format!("{PREFERRED}[0].matchFields[0].values"), "Invalid value: []string(nil): must have one element"),
    ]
)]
fn validates_args(#[case] args: Value, #[case] want: Vec<ArgsError>) {
    let decoded: Result<NodeAffinityArgs, ArgsError> = decode_args(Some(&args));
    assert_eq!(decoded.map(|a| a.validate()), Ok(want));
}

#[test]
fn new_refuses_invalid_args() {
    let args = required_args(json!([{"key": "zone", "operator": "Bogus"}]), json!([]));
    let got = new(Some(&args), &Handle::offline()).map(|p| p.name());
    assert_eq!(
        got,
        Err(vec![err(
            &format!("{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator"),
            &format!(r#"Unsupported value: "Bogus": {LABEL_OPS}"#)
        )])
    );
}

#[test]
fn new_refuses_undecodable_args() {
    let args = json!({"addedAffinity": 3});
    let got = new(Some(&args), &Handle::offline()).map(|p| p.name());
    assert_eq!(
        got,
        Err(vec![err(
            "addedAffinity",
            "invalid type: integer `3`, expected NodeAffinity"
        )])
    );
}

#[test]
fn new_builds_with_valid_args() {
    let got = new(Some(&added_zone_a()), &Handle::offline()).map(|p| p.name());
    assert_eq!(got, Ok(NAME));
}

// ---- events and hints ----

#[test]
fn registers_node_add_and_label_update_with_hint() {
    let events: Vec<(ClusterEvent, bool)> = plugin()
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![(
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL
            ),
            true
        )]
    );
}

fn node_obj(b: NodeBuilder) -> EventObject {
    EventObject::Node(Arc::new(b.obj()))
}

#[rstest]
#[case::added_node_matches(json!({}), make_pod("p").node_selector("foo", "bar"), None, Some(node_obj(make_node("n").label("foo", "bar"))), Ok(QueueingHint::Queue))]
#[case::added_node_does_not_match(json!({}), make_pod("p").node_selector("foo", "bar"), None, Some(node_obj(make_node("n"))), Ok(QueueingHint::QueueSkip))]
#[case::pod_without_affinity_any_added_node(json!({}), make_pod("p"), None, Some(node_obj(make_node("n"))), Ok(QueueingHint::Queue))]
#[case::label_added_to_match(
    json!({}),
    make_pod("p").node_affinity_term("foo", "In", &["bar"]),
    Some(node_obj(make_node("n"))),
    Some(node_obj(make_node("n").label("foo", "bar"))),
    Ok(QueueingHint::Queue)
)]
#[case::already_matched(
    json!({}),
    make_pod("p").node_affinity_term("foo", "In", &["bar"]),
    Some(node_obj(make_node("n").label("foo", "bar"))),
    Some(node_obj(make_node("n").label("foo", "bar").label("x", "y"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::still_not_matching(
    json!({}),
    make_pod("p").node_affinity_term("foo", "In", &["bar"]),
    Some(node_obj(make_node("n"))),
    Some(node_obj(make_node("n").label("foo", "baz"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::added_affinity_not_matched(added_zone_a(), make_pod("p"), None, Some(node_obj(make_node("n").label("zone", "b"))), Ok(QueueingHint::QueueSkip))]
#[case::added_affinity_matched(added_zone_a(), make_pod("p"), None, Some(node_obj(make_node("n").label("zone", "a"))), Ok(QueueingHint::Queue))]
#[case::pod_terms_that_do_not_compile(
    json!({}),
    pod_requiring(vec![term(vec![req("foo", "Bogus", &[])], vec![])]),
    None,
    Some(node_obj(make_node("n"))),
    Err("nodeSelectorTerms[0].matchExpressions[0].operator: \"Bogus\" is not a valid node selector operator".to_string())
)]
#[case::not_a_node(json!({}), make_pod("p"), None, Some(EventObject::Pod(Arc::new(make_pod("q").obj()))), Err("expected Node, but got Pod".to_string()))]
fn node_change_hint(
    #[case] args: Value,
    #[case] pod: PodBuilder,
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let events = plugin_with(args).events_to_register();
    let got = match events.first().and_then(|e| e.hint.clone()) {
        Some(hint) => hint(&pod.obj(), old.as_ref(), new.as_ref()),
        None => Err("no hint registered".to_string()),
    };
    assert_eq!(got, want);
}

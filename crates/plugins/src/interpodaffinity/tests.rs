use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventObject, EventResource, Handle, NodeInfo,
    NodeScore, Parallelizer, PreFilterExtensions, QueueingHint, ScoreExtensions, ScorePlugin,
    Snapshot, Status,
};
use k8s_openapi::api::core::v1::{
    Affinity, Node, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time,
};
use rstest::rstest;
use serde_json::{json, Value};

use super::*;
use crate::helper::node_cache::DomainTable;

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "zone";

// ---- builders ----

/// A term selecting pods with all of `labels`, in the owner's namespace, over `topology`.
fn term(labels: &[(&str, &str)], topology: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            match_expressions: None,
        }),
        topology_key: topology.to_string(),
        ..Default::default()
    }
}

/// A term whose selector is one `key op values` expression.
fn term_expr(key: &str, op: &str, values: &[&str], topology: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.to_string(),
                operator: op.to_string(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
        }),
        topology_key: topology.to_string(),
        ..Default::default()
    }
}

fn in_namespaces(mut t: PodAffinityTerm, namespaces: &[&str]) -> PodAffinityTerm {
    t.namespaces = Some(namespaces.iter().map(|n| n.to_string()).collect());
    t
}

fn with_namespace_selector(mut t: PodAffinityTerm, labels: &[(&str, &str)]) -> PodAffinityTerm {
    t.namespace_selector = Some(LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    });
    t
}

fn with_namespace_expr(mut t: PodAffinityTerm, key: &str, op: &str) -> PodAffinityTerm {
    t.namespace_selector = Some(LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.to_string(),
            operator: op.to_string(),
            values: None,
        }]),
    });
    t
}

fn affinity_of(p: &mut Pod) -> &mut Affinity {
    p.spec
        .get_or_insert_with(PodSpec::default)
        .affinity
        .get_or_insert_with(Affinity::default)
}

fn weighted(terms: Vec<(i32, PodAffinityTerm)>) -> Vec<WeightedPodAffinityTerm> {
    terms
        .into_iter()
        .map(|(weight, pod_affinity_term)| WeightedPodAffinityTerm {
            weight,
            pod_affinity_term,
        })
        .collect()
}

/// Affinity setters for the pod builder.
trait AffinityExt {
    fn affinity(self, terms: Vec<PodAffinityTerm>) -> Self;
    fn anti_affinity(self, terms: Vec<PodAffinityTerm>) -> Self;
    fn preferred_affinity(self, terms: Vec<(i32, PodAffinityTerm)>) -> Self;
    fn preferred_anti_affinity(self, terms: Vec<(i32, PodAffinityTerm)>) -> Self;
    fn terminating(self) -> Self;
}

impl AffinityExt for PodBuilder {
    fn affinity(self, terms: Vec<PodAffinityTerm>) -> Self {
        self.with(|p| {
            affinity_of(p)
                .pod_affinity
                .get_or_insert_with(PodAffinity::default)
                .required_during_scheduling_ignored_during_execution = Some(terms);
        })
    }
    fn anti_affinity(self, terms: Vec<PodAffinityTerm>) -> Self {
        self.with(|p| {
            affinity_of(p)
                .pod_anti_affinity
                .get_or_insert_with(PodAntiAffinity::default)
                .required_during_scheduling_ignored_during_execution = Some(terms);
        })
    }
    fn preferred_affinity(self, terms: Vec<(i32, PodAffinityTerm)>) -> Self {
        self.with(|p| {
            affinity_of(p)
                .pod_affinity
                .get_or_insert_with(PodAffinity::default)
                .preferred_during_scheduling_ignored_during_execution = Some(weighted(terms));
        })
    }
    fn preferred_anti_affinity(self, terms: Vec<(i32, PodAffinityTerm)>) -> Self {
        self.with(|p| {
            affinity_of(p)
                .pod_anti_affinity
                .get_or_insert_with(PodAntiAffinity::default)
                .preferred_during_scheduling_ignored_during_execution = Some(weighted(terms));
        })
    }
    fn terminating(self) -> Self {
        self.with(|p| {
            p.metadata.deletion_timestamp = Some(Time(Default::default()));
        })
    }
}

/// The incoming pod: `web` in `default`.
fn web() -> PodBuilder {
    make_pod("web").label("app", "web")
}

/// An existing pod named `name` with `app=<app>`, on `node`.
fn running(name: &str, app: &str, node: &str) -> PodBuilder {
    make_pod(name).label("app", app).node(node)
}

fn zoned(name: &str, zone: &str) -> NodeBuilder {
    make_node(name).label(ZONE, zone)
}

fn plugin_with(args: InterPodAffinityArgs, parallelizer: Parallelizer) -> InterPodAffinity {
    InterPodAffinity {
        args,
        parallelizer,
        cache: filtering::CountCache::default(),
        existing_cache: filtering::ExistingCountCache::default(),
        term_keys: filtering::TermKeys::new(filtering::TermSource::RequiredAntiAffinity),
        score_cache: scoring::ScoreCache::default(),
        score_term_keys: filtering::TermKeys::new(filtering::TermSource::Scoring),
    }
}

fn plugin() -> InterPodAffinity {
    plugin_with(InterPodAffinityArgs::default(), Parallelizer::sequential())
}

fn snapshot(nodes: &[NodeBuilder], pods: Vec<PodBuilder>) -> Snapshot {
    Snapshot::new(
        nodes.iter().map(|n| Arc::new(n.clone().obj())).collect(),
        pods.into_iter().map(PodBuilder::info),
    )
}

fn node_named<'a>(snap: &'a Snapshot, name: &str) -> &'a NodeInfo {
    match snap.get(name) {
        Some(n) => n,
        None => panic!("no node {name} in the snapshot"),
    }
}

fn node_names(nodes: &[NodeBuilder]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| n.clone().obj().metadata.name.unwrap_or_default())
        .collect()
}

/// Runs PreFilter, then Filter on every node (in the given order) when PreFilter succeeded.
fn check_filter(
    pl: &InterPodAffinity,
    pod: PodBuilder,
    pods: Vec<PodBuilder>,
    nodes: &[NodeBuilder],
    namespace_labels: &[(&str, &[(&str, &str)])],
) -> (Status, Vec<Status>) {
    let mut snap = snapshot(nodes, pods);
    snap.set_namespace_labels(ns_labels(namespace_labels));
    let pod = pod.info();
    let mut state = CycleState::new();
    let (result, status) = pl.pre_filter(&mut state, &pod, &snap);
    assert_eq!(
        result, None,
        "InterPodAffinity never restricts the node set"
    );
    if !status.is_success() {
        return (status, Vec::new());
    }
    let statuses = node_names(nodes)
        .iter()
        .map(|n| pl.filter(&state, &pod, node_named(&snap, n)))
        .collect();
    (status, statuses)
}

fn ns_labels(spec: &[(&str, &[(&str, &str)])]) -> HashMap<String, BTreeMap<String, String>> {
    spec.iter()
        .map(|(ns, labels)| {
            (
                ns.to_string(),
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        })
        .collect()
}

fn ok() -> Status {
    Status::success()
}

fn affinity_no() -> Status {
    Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
}

fn anti_no() -> Status {
    Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
}

fn existing_no() -> Status {
    Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
}

fn two_zones() -> Vec<NodeBuilder> {
    vec![zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b")]
}

// ---- PreFilter and Filter ----

#[rstest]
#[case::nothing_to_check_skips(
    web(),
    vec![running("db", "db", "n1")],
    two_zones(),
    Status::skip(),
    vec![]
)]
#[case::affinity_satisfied_in_the_matching_pods_zone(
    web().affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n1")],
    two_zones(),
    ok(),
    vec![ok(), ok(), affinity_no()]
)]
#[case::affinity_on_hostname_needs_the_pod_on_that_node(
    web().affinity(vec![term(&[("app", "db")], HOST)]),
    vec![running("db", "db", "n2")],
    two_zones(),
    ok(),
    vec![affinity_no(), ok(), affinity_no()]
)]
#[case::node_without_the_topology_key_fails_affinity(
    web().affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n1")],
    vec![zoned("n1", "a"), make_node("bare")],
    ok(),
    vec![ok(), affinity_no()]
)]
#[case::all_affinity_terms_must_match_one_pod(
    web().affinity(vec![term(&[("app", "db")], ZONE), term(&[("tier", "backend")], ZONE)]),
    vec![running("db", "db", "n1"), running("api", "api", "n3").label("tier", "backend")],
    two_zones(),
    ok(),
    vec![affinity_no(), affinity_no(), affinity_no()]
)]
#[case::one_pod_matching_all_terms_satisfies_each(
    web().affinity(vec![term(&[("app", "db")], ZONE), term(&[("tier", "backend")], HOST)]),
    vec![running("db", "db", "n1").label("tier", "backend")],
    two_zones(),
    ok(),
    vec![ok(), affinity_no(), affinity_no()]
)]
#[case::first_pod_of_a_group_may_go_anywhere_with_the_keys(
    web().affinity(vec![term(&[("app", "web")], ZONE)]),
    vec![running("db", "db", "n1")],
    vec![zoned("n1", "a"), zoned("n3", "b"), make_node("bare")],
    ok(),
    vec![ok(), ok(), affinity_no()]
)]
#[case::first_pod_rule_needs_the_pod_to_match_its_own_terms(
    web().affinity(vec![term(&[("app", "cache")], ZONE)]),
    vec![running("db", "db", "n1")],
    two_zones(),
    ok(),
    vec![affinity_no(), affinity_no(), affinity_no()]
)]
#[case::first_pod_rule_is_off_once_a_matching_pod_exists(
    web().affinity(vec![term(&[("app", "web")], ZONE)]),
    vec![running("web-0", "web", "n3")],
    two_zones(),
    ok(),
    vec![affinity_no(), affinity_no(), ok()]
)]
#[case::anti_affinity_rejects_the_whole_zone(
    web().anti_affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n1")],
    vec![zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b"), make_node("bare")],
    ok(),
    vec![anti_no(), anti_no(), ok(), ok()]
)]
#[case::anti_affinity_on_hostname_rejects_only_that_node(
    web().anti_affinity(vec![term(&[("app", "db")], HOST)]),
    vec![running("db", "db", "n1")],
    two_zones(),
    ok(),
    vec![anti_no(), ok(), ok()]
)]
#[case::anti_affinity_matching_no_pod_passes(
    web().anti_affinity(vec![term(&[("app", "cache")], HOST)]),
    vec![running("db", "db", "n1")],
    two_zones(),
    ok(),
    vec![ok(), ok(), ok()]
)]
#[case::existing_pods_anti_affinity_rejects_its_zone(
    web(),
    vec![running("db", "db", "n1").anti_affinity(vec![term(&[("app", "web")], ZONE)])],
    vec![zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b"), make_node("bare")],
    ok(),
    vec![existing_no(), existing_no(), ok(), ok()]
)]
#[case::existing_pods_anti_affinity_on_a_label_the_others_lack(
    web().label("pod-name", "a"),
    vec![
        running("db", "db", "n1").anti_affinity(vec![term(&[("app", "web")], HOST)]),
        running("api", "api", "n3").anti_affinity(vec![term(&[("pod-name", "a")], ZONE)]),
    ],
    vec![zoned("n1", "a").label(HOST, "n1"), zoned("n2", "a"), zoned("n3", "b"), make_node("bare")],
    ok(),
    vec![existing_no(), ok(), existing_no(), ok()]
)]
#[case::existing_anti_affinity_not_matching_the_pod_skips(
    web(),
    vec![running("db", "db", "n1").anti_affinity(vec![term(&[("app", "cache")], ZONE)])],
    two_zones(),
    Status::skip(),
    vec![]
)]
#[case::affinity_is_checked_before_anti_affinity(
    web()
        .affinity(vec![term(&[("app", "db")], HOST)])
        .anti_affinity(vec![term(&[("app", "cache")], ZONE)]),
    vec![running("db", "db", "n3"), running("cache", "cache", "n1")],
    two_zones(),
    ok(),
    vec![affinity_no(), affinity_no(), ok()]
)]
#[case::anti_affinity_is_checked_before_existing_pods_anti_affinity(
    web().anti_affinity(vec![term(&[("app", "db")], HOST)]),
    vec![running("db", "db", "n1").anti_affinity(vec![term(&[("app", "web")], ZONE)])],
    two_zones(),
    ok(),
    vec![anti_no(), existing_no(), ok()]
)]
#[case::terms_select_the_pods_own_namespace_by_default(
    web().affinity(vec![term(&[("app", "db")], HOST)]),
    vec![running("db", "db", "n1").namespace("other"), running("db", "db", "n2")],
    two_zones(),
    ok(),
    vec![affinity_no(), ok(), affinity_no()]
)]
#[case::terms_select_the_listed_namespaces(
    web().anti_affinity(vec![in_namespaces(term(&[("app", "db")], HOST), &["ns1"])]),
    vec![running("db", "db", "n1").namespace("ns1"), running("db", "db", "n2")],
    two_zones(),
    ok(),
    vec![anti_no(), ok(), ok()]
)]
#[case::terminating_pods_still_count(
    web().anti_affinity(vec![term(&[("app", "db")], HOST)]),
    vec![running("db", "db", "n1").terminating()],
    two_zones(),
    ok(),
    vec![anti_no(), ok(), ok()]
)]
#[case::match_label_keys_narrow_the_selector_to_the_pods_value(
    web()
        .label("version", "v1")
        .anti_affinity(vec![PodAffinityTerm {
            match_label_keys: Some(vec!["version".to_string()]),
            ..term(&[("app", "web")], HOST)
        }]),
    vec![
        running("old", "web", "n1").label("version", "v0"),
        running("same", "web", "n2").label("version", "v1"),
    ],
    two_zones(),
    ok(),
    vec![ok(), anti_no(), ok()]
)]
#[case::mismatch_label_keys_exclude_the_pods_value(
    web()
        .label("tenant", "t1")
        .affinity(vec![PodAffinityTerm {
            mismatch_label_keys: Some(vec!["tenant".to_string()]),
            ..term(&[("app", "db")], HOST)
        }]),
    vec![
        running("mine", "db", "n1").label("tenant", "t1"),
        running("theirs", "db", "n2").label("tenant", "t2"),
    ],
    two_zones(),
    ok(),
    vec![affinity_no(), ok(), affinity_no()]
)]
#[case::unparsable_term_is_unresolvable(
    web().affinity(vec![term_expr("app", "Bogus", &["db"], HOST)]),
    vec![],
    two_zones(),
    Status::unresolvable("parsing pod: requiredAffinityTerms[0]: matchExpressions[0].operator: \"Bogus\" is not a valid label selector operator"),
    vec![]
)]
#[case::unparsable_preferred_term_is_unresolvable_too(
    web().preferred_anti_affinity(vec![(1, term_expr("app", "In", &[], HOST))]),
    vec![],
    two_zones(),
    Status::unresolvable("parsing pod: preferredAntiAffinityTerms[0]: matchExpressions[0].values: for 'In', 'NotIn' operators, values set can't be empty"),
    vec![]
)]
fn filters(
    #[case] pod: PodBuilder,
    #[case] pods: Vec<PodBuilder>,
    #[case] nodes: Vec<NodeBuilder>,
    #[case] want_pre_filter: Status,
    #[case] want: Vec<Status>,
) {
    assert_eq!(
        check_filter(&plugin(), pod, pods, &nodes, &[]),
        (want_pre_filter, want)
    );
}

fn namespaces_ab() -> Vec<(&'static str, &'static [(&'static str, &'static str)])> {
    vec![
        ("ns-a", &[("team", "a")]),
        ("ns-b", &[("team", "b")]),
        ("ns-plain", &[]),
    ]
}

#[rstest]
#[case::namespace_selector_picks_namespaces_by_label(
    web().anti_affinity(vec![with_namespace_selector(term(&[("app", "db")], HOST), &[("team", "a")])]),
    vec![running("db-a", "db", "n1").namespace("ns-a"), running("db-b", "db", "n2").namespace("ns-b")],
    vec![anti_no(), ok(), ok()]
)]
#[case::empty_namespace_selector_selects_every_namespace(
    web().anti_affinity(vec![with_namespace_selector(term(&[("app", "db")], HOST), &[])]),
    vec![running("db-a", "db", "n1").namespace("ns-a"), running("db-x", "db", "n2").namespace("unlabelled")],
    vec![anti_no(), anti_no(), ok()]
)]
#[case::namespace_without_known_labels_is_not_selected(
    web().anti_affinity(vec![with_namespace_expr(term(&[("app", "db")], HOST), "team", "DoesNotExist")]),
    vec![running("db-x", "db", "n1").namespace("unlabelled"), running("db-p", "db", "n2").namespace("ns-plain")],
    vec![ok(), anti_no(), ok()]
)]
#[case::namespaces_and_selector_add_up(
    web().affinity(vec![in_namespaces(
        with_namespace_selector(term(&[("app", "db")], HOST), &[("team", "b")]),
        &["ns-a"],
    )]),
    vec![
        running("db-a", "db", "n1").namespace("ns-a"),
        running("db-b", "db", "n2").namespace("ns-b"),
        running("db-d", "db", "n3"),
    ],
    vec![ok(), ok(), affinity_no()]
)]
#[case::existing_pods_namespace_selector_reads_the_incoming_pods_namespace(
    web().namespace("ns-a"),
    vec![
        running("db1", "db", "n1")
            .anti_affinity(vec![with_namespace_selector(term(&[("app", "web")], HOST), &[("team", "a")])]),
        running("db2", "db", "n2")
            .anti_affinity(vec![with_namespace_selector(term(&[("app", "web")], HOST), &[("team", "b")])]),
    ],
    vec![existing_no(), ok(), ok()]
)]
fn filters_by_namespace(
    #[case] pod: PodBuilder,
    #[case] pods: Vec<PodBuilder>,
    #[case] want: Vec<Status>,
) {
    assert_eq!(
        check_filter(&plugin(), pod, pods, &two_zones(), &namespaces_ab()),
        (ok(), want)
    );
}

#[test]
fn filter_without_pre_filter_state_is_an_error() {
    let node = make_node("n1").info_with(&[]);
    assert_eq!(
        plugin().filter(&CycleState::new(), &web().info(), &node),
        Status::error("error reading \"PreFilterInterPodAffinity\" from cycleState: not found")
    );
}

#[test]
fn parallel_scan_counts_every_node() {
    // Enough nodes for the scan to run in chunks on the pool: a db pod on every third
    // node, and pods with anti-affinity against web on every fifth.
    let nodes: Vec<NodeBuilder> = (0..1500)
        .map(|i| zoned(&format!("n{i}"), &format!("z{}", i % 500)))
        .collect();
    let mut pods = Vec::new();
    for i in (0..1500).step_by(3) {
        pods.push(running(&format!("db{i}"), "db", &format!("n{i}")));
    }
    for i in (0..1500).step_by(5) {
        pods.push(
            running(&format!("guard{i}"), "guard", &format!("n{i}"))
                .anti_affinity(vec![term(&[("app", "web")], HOST)]),
        );
    }
    let pl = plugin_with(InterPodAffinityArgs::default(), Parallelizer::new(2));
    let (status, statuses) = check_filter(
        &pl,
        web().anti_affinity(vec![term(&[("app", "db")], HOST)]),
        pods,
        &nodes,
        &[],
    );
    let count = |want: &Status| statuses.iter().filter(|s| *s == want).count();
    // Multiples of 3 are rejected by the pod's anti-affinity (checked first); the other
    // multiples of 5 by the guards' anti-affinity.
    assert_eq!(
        (
            status,
            count(&anti_no()),
            count(&existing_no()),
            count(&ok())
        ),
        (ok(), 500, 200, 800)
    );
}

// ---- AddPod / RemovePod ----

#[derive(Debug, Clone, Copy)]
enum Change {
    Add,
    Remove,
}

#[rstest]
#[case::adding_a_pod_the_pod_repels(
    web().anti_affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("cache", "cache", "n3")],
    Change::Add, running("db", "db", "n1"), "n2",
    ok(), anti_no()
)]
#[case::removing_the_pod_the_pod_repels(
    web().anti_affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n1")],
    Change::Remove, running("db", "db", "n1"), "n2",
    anti_no(), ok()
)]
#[case::adding_a_pod_whose_anti_affinity_repels_the_pod(
    web().affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n1")],
    Change::Add, running("guard", "guard", "n1").anti_affinity(vec![term(&[("app", "web")], HOST)]), "n1",
    ok(), existing_no()
)]
#[case::removing_a_pod_whose_anti_affinity_repelled_the_pod(
    web(),
    vec![running("guard", "guard", "n1").anti_affinity(vec![term(&[("app", "web")], ZONE)])],
    Change::Remove, running("guard", "guard", "n1").anti_affinity(vec![term(&[("app", "web")], ZONE)]), "n2",
    existing_no(), ok()
)]
#[case::adding_the_pod_the_affinity_needs(
    web().affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n3")],
    Change::Add, running("db2", "db", "n2"), "n1",
    affinity_no(), ok()
)]
#[case::removing_the_pod_the_affinity_needed(
    web().affinity(vec![term(&[("app", "db")], ZONE)]),
    vec![running("db", "db", "n1"), running("db3", "db", "n3")],
    Change::Remove, running("db", "db", "n1"), "n2",
    ok(), affinity_no()
)]
#[case::removing_the_last_match_brings_the_first_pod_rule_back(
    web().affinity(vec![term(&[("app", "web")], ZONE)]),
    vec![running("web-0", "web", "n3")],
    Change::Remove, running("web-0", "web", "n3"), "n1",
    affinity_no(), ok()
)]
fn pre_filter_extensions_update_the_counts(
    #[case] pod: PodBuilder,
    #[case] pods: Vec<PodBuilder>,
    #[case] change: Change,
    #[case] changed: PodBuilder,
    #[case] node: &str,
    #[case] before: Status,
    #[case] after: Status,
) {
    let pl = plugin();
    let snap = snapshot(&two_zones(), pods);
    let pod = pod.info();
    let changed = changed.info();
    let changed_node = node_named(&snap, changed.node_name().unwrap_or_default());
    let mut state = CycleState::new();
    let (_, pre_filter) = pl.pre_filter(&mut state, &pod, &snap);
    let target = node_named(&snap, node);
    let got_before = pl.filter(&state, &pod, target);
    let update = match change {
        Change::Add => pl.add_pod(&mut state, &pod, &changed, changed_node),
        Change::Remove => pl.remove_pod(&mut state, &pod, &changed, changed_node),
    };
    let got_after = pl.filter(&state, &pod, target);
    assert_eq!(
        (pre_filter, got_before, update, got_after),
        (ok(), before, ok(), after)
    );
}

#[test]
fn add_pod_without_pre_filter_state_is_an_error() {
    let node = make_node("n1").info_with(&[]);
    let other = running("db", "db", "n1").info();
    assert_eq!(
        plugin().add_pod(&mut CycleState::new(), &web().info(), &other, &node),
        Status::error("error reading \"PreFilterInterPodAffinity\" from cycleState: not found")
    );
}

// ---- PreScore, Score, NormalizeScore ----

/// Runs PreScore, then Score and NormalizeScore on every node (in the given order) when
/// PreScore succeeded; returns the raw and the normalized scores.
fn check_score(
    args: InterPodAffinityArgs,
    pod: PodBuilder,
    pods: Vec<PodBuilder>,
    nodes: &[NodeBuilder],
) -> (Status, Vec<i64>, Vec<i64>) {
    let pl = plugin_with(args, Parallelizer::sequential());
    let mut snap = snapshot(nodes, pods);
    snap.set_namespace_labels(ns_labels(&namespaces_ab()));
    let pod = pod.info();
    let infos: Vec<Arc<NodeInfo>> = node_names(nodes)
        .iter()
        .map(|n| Arc::new(node_named(&snap, n).clone()))
        .collect();
    let mut state = CycleState::new();
    let status = pl.pre_score(&mut state, &pod, &snap, &infos);
    if !status.is_success() {
        return (status, Vec::new(), Vec::new());
    }
    let raw: Vec<i64> = infos
        .iter()
        .map(|n| pl.score(&state, &pod, n).unwrap_or(i64::MIN))
        .collect();
    let mut scores: Vec<NodeScore<'_>> = infos
        .iter()
        .zip(&raw)
        .map(|(node, &score)| NodeScore { node, score })
        .collect();
    let normalized = pl.normalize_score(&state, &pod, &mut scores);
    assert_eq!(normalized, ok());
    (status, raw, scores.iter().map(|s| s.score).collect())
}

fn defaults() -> InterPodAffinityArgs {
    InterPodAffinityArgs::default()
}

fn hard_weight(w: i32) -> InterPodAffinityArgs {
    InterPodAffinityArgs {
        hard_pod_affinity_weight: w,
        ..Default::default()
    }
}

fn ignoring_existing() -> InterPodAffinityArgs {
    InterPodAffinityArgs {
        ignore_preferred_terms_of_existing_pods: true,
        ..Default::default()
    }
}

fn four_hosts() -> Vec<NodeBuilder> {
    vec![
        zoned("n1", "a"),
        zoned("n2", "a"),
        zoned("n3", "b"),
        make_node("bare"),
    ]
}

#[rstest]
#[case::nothing_preferred_anywhere_skips(
    defaults(),
    web(),
    vec![running("db", "db", "n1")],
    Status::skip(), vec![], vec![],
    four_hosts()
)]
#[case::preferred_affinity_favours_the_matching_zone(
    defaults(),
    web().preferred_affinity(vec![(5, term(&[("app", "db")], ZONE))]),
    vec![running("db", "db", "n1")],
    ok(), vec![5, 5, 0, 0], vec![100, 100, 0, 0],
    four_hosts()
)]
#[case::preferred_anti_affinity_scores_negative(
    defaults(),
    web().preferred_anti_affinity(vec![(5, term(&[("app", "db")], ZONE))]),
    vec![running("db", "db", "n1")],
    ok(), vec![-5, -5, 0, 0], vec![0, 0, 100, 100],
    four_hosts()
)]
#[case::weights_add_up_per_pod_and_term(
    defaults(),
    web()
        .preferred_affinity(vec![(8, term(&[("app", "db")], HOST))])
        .preferred_anti_affinity(vec![(4, term(&[("app", "cache")], HOST))]),
    vec![
        running("db1", "db", "n1"),
        running("cache2", "cache", "n2"),
        running("db3", "db", "n3"),
        running("cache3", "cache", "n3"),
    ],
    ok(), vec![8, -4, 4, 0], vec![100, 0, 66, 33],
    four_hosts()
)]
#[case::matching_pods_count_once_each(
    defaults(),
    web().preferred_affinity(vec![(3, term(&[("app", "db")], ZONE))]),
    vec![running("db1", "db", "n1"), running("db2", "db", "n2"), running("db3", "db", "n3")],
    ok(), vec![6, 6, 3, 0], vec![100, 100, 50, 0],
    four_hosts()
)]
#[case::existing_required_affinity_counts_with_the_hard_weight(
    defaults(),
    web(),
    vec![running("db", "db", "n1").affinity(vec![term(&[("app", "web")], HOST)])],
    ok(), vec![1, 0, 0, 0], vec![100, 0, 0, 0],
    four_hosts()
)]
#[case::hard_weight_scales_existing_required_affinity(
    hard_weight(10),
    web(),
    vec![
        running("db", "db", "n1").affinity(vec![term(&[("app", "web")], ZONE)]),
        running("api", "api", "n3").preferred_affinity(vec![(7, term(&[("app", "web")], ZONE))]),
    ],
    ok(), vec![10, 10, 7, 0], vec![100, 100, 70, 0],
    four_hosts()
)]
#[case::zero_hard_weight_ignores_existing_required_affinity(
    hard_weight(0),
    web(),
    vec![running("db", "db", "n1").affinity(vec![term(&[("app", "web")], HOST)])],
    Status::skip(), vec![], vec![],
    four_hosts()
)]
#[case::existing_preferred_terms_count_towards_the_pod(
    defaults(),
    web(),
    vec![
        running("fan", "fan", "n1").preferred_affinity(vec![(20, term(&[("app", "web")], ZONE))]),
        running("foe", "foe", "n3").preferred_anti_affinity(vec![(10, term(&[("app", "web")], ZONE))]),
    ],
    ok(), vec![20, 20, -10, 0], vec![100, 100, 0, 33],
    four_hosts()
)]
#[case::ignoring_existing_preferred_terms_skips_a_pod_without_preferences(
    ignoring_existing(),
    web(),
    vec![running("fan", "fan", "n1").preferred_affinity(vec![(20, term(&[("app", "web")], ZONE))])],
    Status::skip(), vec![], vec![],
    four_hosts()
)]
#[case::ignoring_existing_preferred_terms_still_reads_them_for_a_pod_with_preferences(
    ignoring_existing(),
    web().preferred_affinity(vec![(5, term(&[("app", "db")], HOST))]),
    vec![
        running("db", "db", "n3"),
        running("fan", "fan", "n1").preferred_affinity(vec![(20, term(&[("app", "web")], ZONE))]),
    ],
    ok(), vec![20, 20, 5, 0], vec![100, 100, 25, 0],
    four_hosts()
)]
#[case::existing_terms_not_selecting_the_pod_count_nothing(
    defaults(),
    web(),
    vec![running("fan", "fan", "n1").preferred_affinity(vec![(20, term(&[("app", "cache")], ZONE))])],
    Status::skip(), vec![], vec![],
    four_hosts()
)]
#[case::equal_scores_normalize_to_zero(
    defaults(),
    web().preferred_affinity(vec![(5, term(&[("app", "db")], ZONE))]),
    vec![running("db", "db", "n1")],
    ok(), vec![5, 5], vec![0, 0],
    vec![zoned("n1", "a"), zoned("n2", "a")]
)]
#[case::preferred_terms_honour_namespace_selectors(
    defaults(),
    web().preferred_affinity(vec![(
        4,
        with_namespace_selector(term(&[("app", "db")], HOST), &[("team", "b")]),
    )]),
    vec![running("db-a", "db", "n1").namespace("ns-a"), running("db-b", "db", "n2").namespace("ns-b")],
    ok(), vec![0, 4, 0, 0], vec![0, 100, 0, 0],
    four_hosts()
)]
fn scores(
    #[case] args: InterPodAffinityArgs,
    #[case] pod: PodBuilder,
    #[case] pods: Vec<PodBuilder>,
    #[case] want_pre_score: Status,
    #[case] want_raw: Vec<i64>,
    #[case] want_normalized: Vec<i64>,
    #[case] nodes: Vec<NodeBuilder>,
) {
    assert_eq!(
        check_score(args, pod, pods, &nodes),
        (want_pre_score, want_raw, want_normalized)
    );
}

#[test]
fn unparsable_pod_is_an_error_at_pre_score() {
    let pl = plugin();
    let snap = snapshot(&two_zones(), vec![]);
    let pod = web()
        .preferred_affinity(vec![(1, term_expr("app", "Bogus", &["db"], HOST))])
        .info();
    assert_eq!(
        pl.pre_score(&mut CycleState::new(), &pod, &snap, &[]),
        Status::error("failed to parse pod: preferredAffinityTerms[0]: matchExpressions[0].operator: \"Bogus\" is not a valid label selector operator")
    );
}

#[test]
fn score_without_pre_score_state_is_an_error() {
    let node = make_node("n1").info_with(&[]);
    assert_eq!(
        plugin().score(&CycleState::new(), &web().info(), &node),
        Err(Status::error(
            "failed to read \"PreScoreInterPodAffinity\" from cycleState: not found"
        ))
    );
}

fn normalize_with(summed: scoring::PreScoreState, raw: &[i64]) -> (Status, Vec<i64>) {
    let mut state = CycleState::new();
    state.write(PRE_SCORE_STATE_KEY, summed);
    let nodes: Vec<NodeInfo> = raw
        .iter()
        .enumerate()
        .map(|(i, _)| make_node(&format!("n{i}")).info_with(&[]))
        .collect();
    let mut scores: Vec<NodeScore<'_>> = nodes
        .iter()
        .zip(raw)
        .map(|(node, &score)| NodeScore { node, score })
        .collect();
    let status = plugin().normalize_score(&state, &web().info(), &mut scores);
    (status, scores.iter().map(|s| s.score).collect())
}

fn summed(columns: &[(&str, &[(&str, i64)])]) -> scoring::PreScoreState {
    scoring::PreScoreState {
        columns: columns
            .iter()
            .map(|(key, sums)| (key.to_string(), DomainTable::from_sums(sums)))
            .collect(),
        domains: Default::default(),
    }
}

fn some_scores() -> scoring::PreScoreState {
    summed(&[(ZONE, &[("a", 1)])])
}

#[rstest]
#[case::min_max_scaling(vec![-10, 0, 10], vec![0, 50, 100])]
#[case::only_positive(vec![0, 1, 3], vec![0, 33, 100])]
#[case::only_negative(vec![-3, -1, -2], vec![0, 100, 50])]
#[case::all_equal(vec![7, 7, 7], vec![0, 0, 0])]
#[case::all_equal_negative(vec![-4, -4], vec![0, 0])]
#[case::truncates(vec![0, 2, 3], vec![0, 66, 100])]
#[case::no_nodes(vec![], vec![])]
fn normalizes(#[case] raw: Vec<i64>, #[case] want: Vec<i64>) {
    assert_eq!(normalize_with(some_scores(), &raw), (ok(), want));
}

#[test]
fn normalize_leaves_scores_when_nothing_was_summed() {
    assert_eq!(normalize_with(summed(&[]), &[3, 1]), (ok(), vec![3, 1]));
}

// ---- args ----

fn err(path: &str, message: &str) -> ArgsError {
    ArgsError::new(path, message)
}

#[rstest]
#[case::absent_is_default(None, Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }))]
#[case::empty_is_default(Some(json!({})), Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }))]
#[case::null_weight_is_default(Some(json!({"hardPodAffinityWeight": null})), Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }))]
#[case::values(Some(json!({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": true})), Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 0, ignore_preferred_terms_of_existing_pods: true }))]
#[case::api_version_and_kind(Some(json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs", "hardPodAffinityWeight": 100})), Ok(InterPodAffinityArgs { hard_pod_affinity_weight: 100, ignore_preferred_terms_of_existing_pods: false }))]
fn decodes_args(
    #[case] args: Option<Value>,
    #[case] want: Result<InterPodAffinityArgs, ArgsError>,
) {
    assert_eq!(decode_args::<InterPodAffinityArgs>(args.as_ref()), want);
}

#[rstest]
#[case::in_range(json!({"hardPodAffinityWeight": 50}), vec![])]
#[case::negative(json!({"hardPodAffinityWeight": -1}), vec![err("hardPodAffinityWeight", "Invalid value: -1: not in valid range [0-100]")])]
#[case::above_100(json!({"hardPodAffinityWeight": 101}), vec![err("hardPodAffinityWeight", "Invalid value: 101: not in valid range [0-100]")])]
fn validates_args(#[case] args: Value, #[case] want: Vec<ArgsError>) {
    assert_eq!(
        new(Some(&args), &Handle::offline()).map(|p| p.name()),
        if want.is_empty() { Ok(NAME) } else { Err(want) }
    );
}

#[rstest]
#[case::unknown_field(json!({"hardPodAffinityWeigth": 2}), "hardPodAffinityWeigth")]
#[case::wrong_type(json!({"ignorePreferredTermsOfExistingPods": "yes"}), "ignorePreferredTermsOfExistingPods")]
fn rejects_malformed_args(#[case] args: Value, #[case] want_path: &str) {
    assert_eq!(
        new(Some(&args), &Handle::offline())
            .map(|p| p.name())
            .map_err(|e| e.into_iter().map(|e| e.path).collect::<Vec<_>>()),
        Err(vec![want_path.to_string()])
    );
}

// ---- events and queueing hints ----

#[test]
fn registers_pod_and_node_events() {
    let events: Vec<(ClusterEvent, bool)> = plugin()
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                ClusterEvent::new(
                    EventResource::Pod,
                    ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE
                ),
                true
            ),
            (
                ClusterEvent::new(
                    EventResource::Node,
                    ActionType::ADD | ActionType::UPDATE_NODE_LABEL
                ),
                true
            ),
        ]
    );
}

fn pod_obj(p: PodBuilder) -> Option<EventObject> {
    Some(EventObject::Pod(Arc::new(p.obj())))
}

fn node_obj(n: NodeBuilder) -> Option<EventObject> {
    Some(EventObject::Node(Arc::new(n.obj())))
}

fn pending_with_both() -> PodBuilder {
    web()
        .affinity(vec![term(&[("app", "db")], ZONE)])
        .anti_affinity(vec![
            term(&[("app", "cache")], HOST),
            term(&[("app", "queue")], HOST),
        ])
}

#[rstest]
#[case::added_pod_matching_affinity(
    None,
    pod_obj(running("db", "db", "n1")),
    Ok(QueueingHint::Queue)
)]
#[case::added_pod_not_matching_affinity(
    None,
    pod_obj(running("api", "api", "n1")),
    Ok(QueueingHint::QueueSkip)
)]
#[case::added_unassigned_pod(None, pod_obj(make_pod("db").label("app", "db")), Ok(QueueingHint::QueueSkip))]
#[case::relabelled_to_match_affinity(
    pod_obj(running("x", "api", "n1")),
    pod_obj(running("x", "db", "n1")),
    Ok(QueueingHint::Queue)
)]
#[case::relabelled_away_from_anti_affinity(
    pod_obj(running("x", "cache", "n1")),
    pod_obj(running("x", "api", "n1")),
    Ok(QueueingHint::Queue)
)]
#[case::relabelled_from_one_anti_affinity_match_to_another(
    pod_obj(running("x", "cache", "n1")),
    pod_obj(running("x", "queue", "n1")),
    Ok(QueueingHint::QueueSkip)
)]
#[case::relabelled_without_effect(
    pod_obj(running("x", "api", "n1")), pod_obj(running("x", "api", "n1").label("v", "2")), Ok(QueueingHint::QueueSkip)
)]
#[case::deleted_pod_matching_one_anti_affinity_term(
    pod_obj(running("x", "queue", "n1")),
    None,
    Ok(QueueingHint::Queue)
)]
#[case::deleted_pod_whose_anti_affinity_repelled_the_pod(
    pod_obj(running("x", "api", "n1").anti_affinity(vec![term(&[("app", "web")], HOST)])), None, Ok(QueueingHint::Queue)
)]
#[case::deleted_pod_without_relation(
    pod_obj(running("x", "db", "n1")),
    None,
    Ok(QueueingHint::QueueSkip)
)]
#[case::pending_pod_relabelled_itself(
    None, pod_obj(pending_with_both().label("app", "db")), Ok(QueueingHint::Queue)
)]
#[case::not_a_pod(None, node_obj(make_node("n1")), Err("expected Pod, but got Node".to_string()))]
fn pod_hint(
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pending = pending_with_both().obj();
    assert_eq!(
        is_schedulable_after_pod_change(&pending, old.as_ref(), new.as_ref()),
        want
    );
}

#[rstest]
#[case::affinity_key_on_added_node(web().affinity(vec![term(&[("app", "db")], ZONE)]), None, node_obj(zoned("n9", "c")), Ok(QueueingHint::Queue))]
#[case::added_node_without_affinity_key(web().affinity(vec![term(&[("app", "db")], ZONE)]), None, node_obj(make_node("n9")), Ok(QueueingHint::QueueSkip))]
#[case::affinity_key_gained(web().affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(make_node("n9")), node_obj(zoned("n9", "c")), Ok(QueueingHint::Queue))]
#[case::affinity_key_value_changed(web().affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(zoned("n9", "b")), node_obj(zoned("n9", "c")), Ok(QueueingHint::Queue))]
#[case::affinity_key_unchanged(web().affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(zoned("n9", "c")), node_obj(zoned("n9", "c").label("x", "y")), Ok(QueueingHint::QueueSkip))]
#[case::affinity_key_lost(web().affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(zoned("n9", "c")), node_obj(make_node("n9")), Ok(QueueingHint::QueueSkip))]
#[case::any_added_node_for_anti_affinity(web().anti_affinity(vec![term(&[("app", "db")], ZONE)]), None, node_obj(make_node("n9")), Ok(QueueingHint::Queue))]
#[case::anti_affinity_key_lost(web().anti_affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(zoned("n9", "c")), node_obj(make_node("n9")), Ok(QueueingHint::Queue))]
#[case::anti_affinity_key_value_changed(web().anti_affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(zoned("n9", "b")), node_obj(zoned("n9", "c")), Ok(QueueingHint::Queue))]
#[case::anti_affinity_key_gained(web().anti_affinity(vec![term(&[("app", "db")], ZONE)]), node_obj(make_node("n9")), node_obj(zoned("n9", "c")), Ok(QueueingHint::QueueSkip))]
#[case::pod_without_terms(web(), None, node_obj(zoned("n9", "c")), Ok(QueueingHint::QueueSkip))]
#[case::broken_term_queues_with_an_error(web().affinity(vec![term_expr("app", "Bogus", &["db"], ZONE)]), None, node_obj(zoned("n9", "c")), Err("matchExpressions[0].operator: \"Bogus\" is not a valid label selector operator".to_string()))]
fn node_hint(
    #[case] pod: PodBuilder,
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        is_schedulable_after_node_change(&pod.obj(), old.as_ref(), new.as_ref()),
        want
    );
}

// ---- topology counts ----

#[test]
fn counts_drop_pairs_that_reach_zero() {
    let mut c = TopologyCounts::default();
    c.add(ZONE, "a", 2);
    c.add(ZONE, "b", 1);
    c.add(ZONE, "a", -2);
    let after_a = (c.get(ZONE, "a"), c.get(ZONE, "b"), c.is_empty());
    c.add(ZONE, "b", -1);
    assert_eq!(
        (after_a, c.is_empty(), c),
        ((0, 1, false), true, TopologyCounts::default())
    );
}

#[test]
fn nodes_are_scored_by_their_own_pairs() {
    let sums = summed(&[(HOST, &[("n1", -1), ("n2", 0)]), (ZONE, &[("a", 3)])]);
    let n1: Node = zoned("n1", "a").label(HOST, "n1").obj();
    let n2: Node = zoned("n2", "b").label(HOST, "n2").obj();
    let n3: Node = make_node("n3").obj();
    let score = |n: &Node| {
        let mut state = CycleState::new();
        state.write(PRE_SCORE_STATE_KEY, sums.clone());
        plugin().score(&state, &web().info(), &NodeInfo::new(Arc::new(n.clone())))
    };
    assert_eq!((score(&n1), score(&n2), score(&n3)), (Ok(2), Ok(0), Ok(0)));
}

#[test]
fn cycle_changes_are_looked_up_by_the_node_pairs() {
    let mut c = filtering::PairCounts::default();
    c.add(ZONE, "a", 1);
    c.add(HOST, "n2", 1);
    c.add(HOST, "n2", -1);
    let n1: Node = zoned("n1", "a").obj();
    let n2: Node = zoned("n2", "b").label(HOST, "n2").obj();
    let labels = |n: &Node| n.metadata.labels.clone().unwrap_or_default();
    let positive = (
        c.any_positive_on(&labels(&n1)),
        c.any_positive_on(&labels(&n2)),
    );
    c.add(ZONE, "a", -1);
    assert_eq!((positive, c.is_empty()), ((true, false), true));
}

// ---- counts kept across cycles ----

/// What one cycle observes for `pod`: PreFilter's status, its counts (affinity,
/// anti-affinity, existing pods' anti-affinity) and Filter on every node; then the same
/// after AddPod of `extra` on the first node and RemovePod of the first pod of the last
/// node (changes to the cycle, not to the cache).
type Pairs = Vec<(String, String, i64)>;
type CycleView = (Status, Vec<[Pairs; 3]>, Vec<Vec<Status>>);

fn cycle_view(
    pl: &InterPodAffinity,
    pod: &PodInfo,
    extra: &Arc<PodInfo>,
    snap: &Snapshot,
) -> CycleView {
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, pod, snap);
    let filter_all = |state: &CycleState| -> Vec<Status> {
        snap.node_infos()
            .iter()
            .map(|n| pl.filter(state, pod, n))
            .collect()
    };
    let counts = |state: &CycleState| -> [Pairs; 3] {
        match state.read::<filtering::PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => [
                s.affinity_counts.sorted(),
                s.anti_affinity_counts.sorted(),
                s.existing_anti_affinity_counts.sorted(),
            ],
            None => Default::default(),
        }
    };
    if !status.is_success() {
        return (status, Vec::new(), Vec::new());
    }
    let mut seen = vec![counts(&state)];
    let mut filtered = vec![filter_all(&state)];
    let nodes = snap.node_infos();
    if let (Some(first), Some(last)) = (nodes.first(), nodes.last()) {
        let _ = pl.add_pod(&mut state, pod, extra, first);
        if let Some(gone) = last.pods.first() {
            let _ = pl.remove_pod(&mut state, pod, gone, last);
        }
    }
    seen.push(counts(&state));
    filtered.push(filter_all(&state));
    (status, seen, filtered)
}

/// One plugin kept across cycles against a fresh plugin each cycle, for eight incoming pods
/// (more than the cache keeps), while pods are assumed and removed, older snapshots sharing
/// nodes are scheduled against again, a node is relabelled and namespace labels change.
#[test]
fn cached_counts_equal_fresh_counts_across_cycles() {
    let nodes: Vec<NodeBuilder> = (0..9)
        .map(|i| zoned(&format!("n{i}"), &format!("z{}", i % 3)).label(HOST, &format!("n{i}")))
        .chain([make_node("bare")])
        .collect();
    let mut snap = snapshot(
        &nodes,
        vec![
            running("d0", "db", "n0"),
            running("w0", "web", "n1").label("tier", "x"),
            running("c0", "cache", "bare"),
            running("o0", "db", "n4").namespace("other"),
            running("a0", "api", "n2").anti_affinity(vec![term(&[("app", "web")], ZONE)]),
            running("a2", "api", "n7").anti_affinity(vec![term(&[("pod-name", "a")], ZONE)]),
            running("a1", "api", "n5")
                .namespace("other")
                .anti_affinity(vec![with_namespace_selector(
                    term(&[("app", "web")], HOST),
                    &[("team", "a")],
                )]),
        ],
    );
    snap.set_namespace_labels(ns_labels(&[("other", &[("team", "a")])]));
    let incoming = [
        web()
            .affinity(vec![term(&[("app", "db")], ZONE)])
            .anti_affinity(vec![term(&[("app", "web")], HOST)]),
        web().anti_affinity(vec![
            term(&[("app", "db")], ZONE),
            term(&[("app", "cache")], ZONE),
            term(&[("app", "web")], HOST),
        ]),
        web().affinity(vec![
            term(&[("app", "web")], ZONE),
            term(&[("tier", "x")], ZONE),
        ]),
        web().anti_affinity(vec![with_namespace_selector(
            term(&[("app", "db")], ZONE),
            &[("team", "a")],
        )]),
        web().affinity(vec![in_namespaces(
            term(&[("app", "db")], HOST),
            &["other"],
        )]),
        web().affinity(vec![term(&[("app", "web")], HOST)]),
        make_pod("other").label("app", "db"),
        web().label("pod-name", "a"),
        web().label("pod-name", "b").label("tier", "x"),
    ]
    .map(PodBuilder::info);
    let extra = running("extra", "web", "n0").label("tier", "x").info();
    let cached = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let mut older: Vec<Snapshot> = Vec::new();
    for step in 0..30_usize {
        let pod = &incoming[step % incoming.len()];
        let at = |s: &Snapshot| {
            (
                cycle_view(&cached, pod, &extra, s),
                cycle_view(&plugin(), pod, &extra, s),
            )
        };
        let (g, w) = at(&snap);
        got.push(g);
        want.push(w);
        if let Some(old) = older.get(step % 3) {
            let (g, w) = at(old);
            got.push(g);
            want.push(w);
        }
        if step % 4 == 0 {
            older.push(snap.clone());
        }
        let node = format!("n{}", (step * 5) % 9);
        let name = format!("q{step}");
        let app = ["db", "web", "cache"][step % 3];
        match step % 5 {
            0 | 1 => {
                snap.assume_pod(running(&name, app, &node).info(), &node);
            }
            2 => {
                // From step 7 on, a label key no earlier term selects on.
                let first = if step >= 7 {
                    ("tier", "x")
                } else {
                    ("app", "web")
                };
                let repelling = running(&name, "api", &node)
                    .anti_affinity(vec![term(&[first], HOST), term(&[("app", app)], ZONE)]);
                snap.assume_pod(repelling.info(), &node);
            }
            3 => {
                snap.remove_pod(
                    &format!("default/q{}", step - 3),
                    &format!("n{}", ((step - 3) * 5) % 9),
                );
            }
            _ => {
                snap.assume_pod(
                    running(&name, app, "bare").namespace("other").info(),
                    "bare",
                );
            }
        }
        if step == 12 {
            snap.set_namespace_labels(ns_labels(&[("default", &[("team", "a")])]));
        }
        if step == 20 {
            // A relabelled node: every node is new to the cache.
            let relabelled: Vec<NodeBuilder> = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    if i == 2 {
                        n.clone().label(ZONE, "z0")
                    } else {
                        n.clone()
                    }
                })
                .collect();
            let pods: Vec<Arc<PodInfo>> = snap
                .node_infos()
                .iter()
                .flat_map(|n| n.pods.iter().cloned())
                .collect();
            let labels = ns_labels(&[("default", &[("team", "a")])]);
            snap = Snapshot::new(
                relabelled
                    .iter()
                    .map(|n| Arc::new(n.clone().obj()))
                    .collect(),
                pods,
            );
            snap.set_namespace_labels(labels);
        }
    }
    assert_eq!(got, want);
    // Every kind of count was seen, and AddPod/RemovePod changed some Filter outcomes.
    for kind in 0..3 {
        assert!(got.iter().flat_map(|v| &v.1).any(|c| !c[kind].is_empty()));
    }
    assert!(got.iter().any(|v| v.2.first() != v.2.last()));
}

/// PreScore's outcome, summed pairs and every node's raw score.
type ScoreView = (Status, Vec<(String, String, i64)>, Vec<i64>);

fn score_view(pl: &InterPodAffinity, pod: &PodInfo, snap: &Snapshot) -> ScoreView {
    let mut state = CycleState::new();
    let nodes = snap.node_infos();
    let status = pl.pre_score(&mut state, pod, snap, nodes);
    let Some(summed) = state.read::<scoring::PreScoreState>(PRE_SCORE_STATE_KEY) else {
        return (status, Vec::new(), Vec::new());
    };
    let scores = nodes
        .iter()
        .map(|n| pl.score(&state, pod, n).unwrap_or(i64::MIN))
        .collect();
    (status, summed.sorted(), scores)
}

/// PreScore and Score of one plugin kept across cycles against a fresh plugin each cycle,
/// for nine incoming pods (more than the cache keeps) twice each, while pods with and without terms
/// are assumed and removed, older snapshots are scored against again, a node is
/// relabelled and namespace labels change.
#[test]
fn cached_sums_equal_fresh_sums_across_cycles() {
    let nodes: Vec<NodeBuilder> = (0..9)
        .map(|i| zoned(&format!("n{i}"), &format!("z{}", i % 3)).label(HOST, &format!("n{i}")))
        .chain([make_node("bare")])
        .collect();
    let mut snap = snapshot(
        &nodes,
        vec![
            running("d0", "db", "n0"),
            running("w0", "web", "n1").label("tier", "x"),
            running("c0", "cache", "bare"),
            running("o0", "db", "n4").namespace("other"),
            running("a0", "api", "n2").affinity(vec![term(&[("app", "web")], ZONE)]),
            running("p0", "api", "n7")
                .preferred_affinity(vec![(3, term(&[("pod-name", "a")], HOST))]),
            running("p1", "api", "n5")
                .namespace("other")
                .preferred_anti_affinity(vec![(
                    7,
                    with_namespace_selector(term(&[("app", "web")], ZONE), &[("team", "a")]),
                )]),
        ],
    );
    snap.set_namespace_labels(ns_labels(&[("other", &[("team", "a")])]));
    let incoming = [
        web().preferred_affinity(vec![(5, term(&[("app", "db")], ZONE))]),
        web().preferred_anti_affinity(vec![
            (2, term(&[("app", "db")], ZONE)),
            (4, term(&[("app", "web")], HOST)),
        ]),
        // Weights that cancel: the pairs exist with a sum of zero.
        web()
            .preferred_affinity(vec![(5, term(&[("app", "db")], HOST))])
            .preferred_anti_affinity(vec![(5, term(&[("app", "db")], HOST))]),
        web().preferred_affinity(vec![(
            1,
            with_namespace_selector(term(&[("app", "db")], ZONE), &[("team", "a")]),
        )]),
        web().preferred_affinity(vec![(
            9,
            in_namespaces(term(&[("app", "db")], HOST), &["other"]),
        )]),
        // No preferred terms: only existing pods' terms count.
        web(),
        make_pod("other").label("app", "db"),
        web().label("pod-name", "a"),
        web().label("pod-name", "b").label("tier", "x"),
    ]
    .map(PodBuilder::info);
    let cached = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let mut older: Vec<Snapshot> = Vec::new();
    for step in 0..40_usize {
        // Each pod twice in a row, so that the second cycle refreshes the first's sums.
        let pod = &incoming[(step / 2) % incoming.len()];
        let mut at = |s: &Snapshot| {
            got.push(score_view(&cached, pod, s));
            want.push(score_view(&plugin(), pod, s));
        };
        at(&snap);
        if let Some(old) = older.get(step % 3) {
            at(old);
        }
        if step % 4 == 0 {
            older.push(snap.clone());
        }
        let node = format!("n{}", (step * 5) % 9);
        let name = format!("q{step}");
        let app = ["db", "web", "cache"][step % 3];
        match step % 5 {
            0 => {
                snap.assume_pod(running(&name, app, &node).info(), &node);
            }
            1 => {
                let attracting = running(&name, "api", &node)
                    .affinity(vec![term(&[("app", app)], HOST)])
                    .preferred_affinity(vec![(2, term(&[("app", "web")], ZONE))]);
                snap.assume_pod(attracting.info(), &node);
            }
            2 => {
                // From step 7 on, a label key no earlier term selects on.
                let first = if step >= 7 {
                    ("tier", "x")
                } else {
                    ("app", "web")
                };
                let repelling = running(&name, "api", &node)
                    .preferred_anti_affinity(vec![(6, term(&[first], HOST))]);
                snap.assume_pod(repelling.info(), &node);
            }
            3 => {
                snap.remove_pod(
                    &format!("default/q{}", step - 3),
                    &format!("n{}", ((step - 3) * 5) % 9),
                );
            }
            _ => {
                snap.assume_pod(
                    running(&name, app, "bare").namespace("other").info(),
                    "bare",
                );
            }
        }
        if step == 12 {
            snap.set_namespace_labels(ns_labels(&[("default", &[("team", "a")])]));
        }
        if step == 20 {
            // A relabelled node: every node is new to the cache.
            let relabelled: Vec<NodeBuilder> = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    if i == 2 {
                        n.clone().label(ZONE, "z0")
                    } else {
                        n.clone()
                    }
                })
                .collect();
            let pods: Vec<Arc<PodInfo>> = snap
                .node_infos()
                .iter()
                .flat_map(|n| n.pods.iter().cloned())
                .collect();
            let labels = ns_labels(&[("default", &[("team", "a")])]);
            snap = Snapshot::new(
                relabelled
                    .iter()
                    .map(|n| Arc::new(n.clone().obj()))
                    .collect(),
                pods,
            );
            snap.set_namespace_labels(labels);
        }
    }
    assert_eq!(got, want);
    // Sums were seen, including a pair summing to zero, and PreScore skipped at times.
    assert!(got
        .iter()
        .any(|v| v.0.is_success() && v.2.iter().any(|&s| s != 0)));
    assert!(got.iter().any(|v| v.1.iter().any(|p| p.2 == 0)));
    assert!(got.iter().any(|v| v.0 == Status::skip()));
}

// ---- by topology-value ids ----

/// Filter on every node of `snap`, by the ids of the rows' positions (`filter_with_row`,
/// as the runtime calls it) and by the nodes' labels (`filter`).
fn filter_by_ids_and_by_labels(
    pl: &InterPodAffinity,
    state: &CycleState,
    pod: &PodInfo,
    snap: &Snapshot,
) -> (Vec<Status>, Vec<Status>) {
    let nodes = snap.node_infos();
    let by_ids: Vec<Status> = nodes
        .iter()
        .zip(snap.rows())
        .map(|(n, row)| pl.filter_with_row(state, pod, n, row))
        .collect();
    // The runtime's filter pass decides a run of rows at once, the state read once.
    assert_eq!(
        framework::testing::filter_rows_of(pl, state, pod, snap),
        by_ids
    );
    (
        by_ids,
        nodes.iter().map(|n| pl.filter(state, pod, n)).collect(),
    )
}

/// Every node's raw score, by the ids of the rows' positions (`score_rows`) and by the
/// nodes' labels (`score`).
fn score_by_ids_and_by_labels(
    pl: &InterPodAffinity,
    state: &CycleState,
    pod: &PodInfo,
    snap: &Snapshot,
) -> (Result<Vec<i64>, Status>, Result<Vec<i64>, Status>) {
    let nodes = snap.node_infos();
    let mut by_ids = vec![0; nodes.len()];
    let by_ids = pl
        .score_rows(state, pod, nodes, snap.rows(), &mut by_ids)
        .map(|()| by_ids);
    let by_labels = nodes.iter().map(|n| pl.score(state, pod, n)).collect();
    (by_ids, by_labels)
}

/// Nine nodes in three zones with hostname labels, one with only a hostname label and one
/// with no label at all. Zones are numbered apart from the hosts (three neighbours per
/// zone), so that reading one key's id in another key's column shows.
fn id_nodes() -> Vec<NodeBuilder> {
    (0..9)
        .map(|i| zoned(&format!("n{i}"), &format!("z{}", i / 3)).label(HOST, &format!("n{i}")))
        .chain([
            make_node("host-only").label(HOST, "host-only"),
            make_node("bare"),
        ])
        .collect()
}

/// Changes the snapshot as cycles do: pods (with and without anti-affinity) land and leave,
/// and a node leaves (positions shift) or joins.
fn next_cycle(snap: &mut Snapshot, step: usize) {
    let node = format!("n{}", (step * 5) % 9);
    let name = format!("q{step}");
    let app = ["db", "web", "cache"][step % 3];
    match step % 5 {
        0 | 1 => {
            snap.assume_pod(running(&name, app, &node).info(), &node);
        }
        2 => {
            let repelling = running(&name, "api", &node).anti_affinity(vec![
                term(&[("app", "web")], HOST),
                term(&[("app", app)], ZONE),
            ]);
            snap.assume_pod(repelling.info(), &node);
        }
        3 => {
            snap.remove_pod(
                &format!("default/q{}", step - 3),
                &format!("n{}", ((step - 3) * 5) % 9),
            );
        }
        _ => {
            let mut list = snap.node_infos().to_vec();
            if step % 10 == 4 {
                list.remove(step % list.len());
            } else {
                let joined = zoned(&format!("m{step}"), "z1").label(HOST, &format!("m{step}"));
                list.push(Arc::new(NodeInfo::new(Arc::new(joined.obj()))));
            }
            snap.set_node_infos(list);
        }
    }
}

/// One plugin kept across cycles decides by ids as by labels for pods with required
/// affinity, anti-affinity, both, or none (existing pods' anti-affinity only), also after
/// AddPod and RemovePod changed the cycle's counts, while the snapshot changes.
#[test]
fn filter_by_topology_ids_decides_as_by_labels_across_cycles() {
    let mut snap = snapshot(
        &id_nodes(),
        vec![
            running("d0", "db", "n0"),
            running("w0", "web", "n1"),
            running("c0", "cache", "host-only"),
            running("a0", "api", "n2").anti_affinity(vec![term(&[("app", "web")], ZONE)]),
            running("a1", "api", "n4").anti_affinity(vec![term(&[("app", "web")], HOST)]),
        ],
    );
    let incoming = [
        web().affinity(vec![term(&[("app", "db")], ZONE)]),
        web().anti_affinity(vec![term(&[("app", "web")], HOST)]),
        web()
            .affinity(vec![term(&[("app", "db")], ZONE)])
            .anti_affinity(vec![
                term(&[("app", "cache")], ZONE),
                term(&[("app", "web")], HOST),
            ]),
        web().affinity(vec![term(&[("app", "web")], HOST)]),
        // Affinity and anti-affinity over different keys: columns of their own.
        web()
            .affinity(vec![term(&[("app", "web")], HOST)])
            .anti_affinity(vec![term(&[("app", "cache")], ZONE)]),
        web(),
    ]
    .map(PodBuilder::info);
    let extra = running("extra", "web", "n0").info();
    let pl = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for step in 0..25_usize {
        for pod in &incoming {
            let mut state = CycleState::new();
            let (_, status) = pl.pre_filter(&mut state, pod, &snap);
            let fresh = filter_by_ids_and_by_labels(&pl, &state, pod, &snap);
            let mut changed = state.clone();
            let nodes = snap.node_infos();
            if let (Some(first), Some(last)) = (nodes.first(), nodes.last()) {
                let _ = pl.add_pod(&mut changed, pod, &extra, first);
                if let Some(gone) = last.pods.first() {
                    let _ = pl.remove_pod(&mut changed, pod, gone, last);
                }
            }
            let after = filter_by_ids_and_by_labels(&pl, &changed, pod, &snap);
            got.push((status.clone(), fresh.0, after.0));
            want.push((status, fresh.1, after.1));
        }
        next_cycle(&mut snap, step);
    }
    assert_eq!(got, want);
    // Each kind of rejection happened.
    for reject in [affinity_no(), anti_no(), existing_no()] {
        assert!(got.iter().flat_map(|g| &g.1).any(|s| *s == reject));
    }
}

/// One plugin kept across cycles scores by ids as by labels for pods with preferred
/// affinity, anti-affinity, weights that cancel, or none (existing pods' terms only),
/// while the snapshot changes.
#[test]
fn score_by_topology_ids_equals_score_by_labels_across_cycles() {
    let mut snap = snapshot(
        &id_nodes(),
        vec![
            running("d0", "db", "n0"),
            running("w0", "web", "n1"),
            running("c0", "cache", "host-only"),
            running("a0", "api", "n2").affinity(vec![term(&[("app", "web")], ZONE)]),
            running("p0", "api", "n7")
                .preferred_anti_affinity(vec![(3, term(&[("app", "web")], HOST))]),
        ],
    );
    let incoming = [
        web().preferred_affinity(vec![(5, term(&[("app", "db")], ZONE))]),
        web().preferred_anti_affinity(vec![
            (2, term(&[("app", "db")], ZONE)),
            (4, term(&[("app", "web")], HOST)),
        ]),
        web()
            .preferred_affinity(vec![(5, term(&[("app", "db")], HOST))])
            .preferred_anti_affinity(vec![(5, term(&[("app", "db")], HOST))]),
        web(),
    ]
    .map(PodBuilder::info);
    let pl = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for step in 0..25_usize {
        for pod in &incoming {
            let mut state = CycleState::new();
            let status = pl.pre_score(&mut state, pod, &snap, snap.node_infos());
            let (by_ids, by_labels) = score_by_ids_and_by_labels(&pl, &state, pod, &snap);
            got.push((status.clone(), by_ids));
            want.push((status, by_labels));
        }
        next_cycle(&mut snap, step);
    }
    assert_eq!(got, want);
    // Scores differed between nodes, both ways.
    let scores: Vec<i64> = got
        .iter()
        .filter_map(|g| g.1.as_ref().ok())
        .flatten()
        .copied()
        .collect();
    assert!(scores.iter().any(|&s| s > 0) && scores.iter().any(|&s| s < 0));
}

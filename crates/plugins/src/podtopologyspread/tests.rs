use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use framework::testing::{make_node, make_pod, PodBuilder};
use framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventObject, EventResource, Handle, NodeInfo,
    NodeRow, NodeScore, Parallelizer, PodInfo, PreFilterExtensions, QueueingHint, ScoreExtensions,
    ScorePlugin, Snapshot, Status, Workloads,
};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Node, Pod, PodSpec, ReplicationController, ReplicationControllerSpec, Service, ServiceSpec,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as V1LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};
use rstest::rstest;
use serde_json::{json, Value};

use super::common::{default_selector, LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
use super::filtering::{PreFilterState, PRE_FILTER_STATE_KEY};
use super::scoring::{PreScoreState, PRE_SCORE_STATE_KEY};
use super::*;

// ---- builders ----

const HARD: &str = "DoNotSchedule";
const SOFT: &str = "ScheduleAnyway";

fn exists(key: &str) -> Option<V1LabelSelector> {
    Some(V1LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.to_string(),
            operator: "Exists".to_string(),
            values: None,
        }]),
        match_labels: None,
    })
}

fn label_is(key: &str, value: &str) -> Option<V1LabelSelector> {
    Some(V1LabelSelector {
        match_labels: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
        match_expressions: None,
    })
}

/// A constraint with the defaults of everything else.
fn tsc(
    max_skew: i32,
    key: &str,
    when: &str,
    selector: Option<V1LabelSelector>,
) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        when_unsatisfiable: when.to_string(),
        label_selector: selector,
        ..Default::default()
    }
}

fn spread(b: PodBuilder, constraints: Vec<TopologySpreadConstraint>) -> PodBuilder {
    b.with(move |p| {
        p.spec
            .get_or_insert_with(PodSpec::default)
            .topology_spread_constraints = Some(constraints);
    })
}

/// The incoming pod `p`, labelled `foo=""`, with these constraints.
fn incoming(constraints: Vec<TopologySpreadConstraint>) -> PodBuilder {
    spread(make_pod("p").label("foo", ""), constraints)
}

/// An assigned pod on `node` labelled `foo=""`.
fn foo_on(name: &str, node: &str) -> PodBuilder {
    make_pod(name).node(node).label("foo", "")
}

fn terminating(b: PodBuilder) -> PodBuilder {
    b.with(|p| {
        p.metadata.deletion_timestamp = serde_json::from_value(json!("2025-01-01T00:00:00Z")).ok();
    })
}

fn owned_by(b: PodBuilder, api_version: &str, kind: &str, name: &str) -> PodBuilder {
    let owner = OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        block_owner_deletion: None,
    };
    b.with(move |p| p.metadata.owner_references = Some(vec![owner]))
}

/// A node labelled only with `labels` (no hostname label unless given).
fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let mut n = make_node(name).obj();
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

/// A node with `zone=<zone>` and its hostname label.
fn zoned(name: &str, zone: &str) -> Node {
    node(name, &[("zone", zone), (LABEL_HOSTNAME, name)])
}

/// A node with only its hostname label.
fn host(name: &str) -> Node {
    node(name, &[(LABEL_HOSTNAME, name)])
}

/// `n` with one more taint `key:effect`.
fn with_taint(mut n: Node, key: &str, effect: &str) -> Node {
    let tainted = make_node("x").taint(key, "", effect).obj();
    n.spec = tainted.spec;
    n
}

fn snapshot(nodes: Vec<Node>, pods: Vec<PodBuilder>) -> Snapshot {
    Snapshot::new(
        nodes.into_iter().map(Arc::new).collect(),
        pods.into_iter().map(PodBuilder::info),
    )
}

fn with_workloads(mut snap: Snapshot, workloads: Workloads) -> Snapshot {
    snap.set_workloads(Arc::new(workloads));
    snap
}

fn in_default<T>(items: Vec<T>) -> HashMap<String, Vec<Arc<T>>> {
    HashMap::from([(
        "default".to_string(),
        items.into_iter().map(Arc::new).collect(),
    )])
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some("default".to_string()),
        ..Default::default()
    }
}

fn service(name: &str, selector: Option<&[(&str, &str)]>) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            selector: selector.map(|s| {
                s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn replica_set(name: &str, selector: Option<V1LabelSelector>) -> ReplicaSet {
    ReplicaSet {
        metadata: meta(name),
        spec: Some(ReplicaSetSpec {
            selector: selector.unwrap_or_default(),
            ..Default::default()
        }),
        status: None,
    }
}

fn stateful_set(name: &str, selector: Option<V1LabelSelector>) -> StatefulSet {
    StatefulSet {
        metadata: meta(name),
        spec: Some(StatefulSetSpec {
            selector: selector.unwrap_or_default(),
            ..Default::default()
        }),
        status: None,
    }
}

fn replication_controller(name: &str, selector: &[(&str, &str)]) -> ReplicationController {
    ReplicationController {
        metadata: meta(name),
        spec: Some(ReplicationControllerSpec {
            selector: Some(
                selector
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

fn services(list: Vec<Service>) -> Workloads {
    Workloads {
        services: in_default(list),
        ..Default::default()
    }
}

/// The plugin built from `args`, which must be valid, counting on the calling thread.
fn plugin_with(args: Value) -> PodTopologySpread {
    plugin_on(args, &Handle::offline())
}

fn plugin_on(args: Value, handle: &Handle) -> PodTopologySpread {
    let decoded = PodTopologySpreadArgs::decode(Some(&args));
    assert_eq!(decoded.as_ref().err(), None, "test args must be valid");
    PodTopologySpread::from_args(&decoded.unwrap_or_default(), handle)
}

/// The plugin with upstream's default args (system defaulting).
fn plugin() -> PodTopologySpread {
    plugin_with(json!({}))
}

fn list_defaults(constraints: Value) -> PodTopologySpread {
    plugin_with(json!({"defaultingType": "List", "defaultConstraints": constraints}))
}

fn ok() -> Status {
    Status::success()
}

fn over() -> Status {
    Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
}

fn missing() -> Status {
    Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
}

fn by_node(v: Vec<(&str, Status)>) -> Vec<(String, Status)> {
    v.into_iter().map(|(n, s)| (n.to_string(), s)).collect()
}

/// PreFilter, then Filter on every node of `snap`; the statuses sorted by node name.
fn filter_all(
    pl: &PodTopologySpread,
    pod: &PodInfo,
    snap: &Snapshot,
) -> (Status, Vec<(String, Status)>) {
    let mut state = CycleState::new();
    let (_, pre) = pl.pre_filter(&mut state, pod, snap);
    (pre, filter_each(pl, &state, pod, snap))
}

fn filter_each(
    pl: &PodTopologySpread,
    state: &CycleState,
    pod: &PodInfo,
    snap: &Snapshot,
) -> Vec<(String, Status)> {
    let mut out: Vec<(String, Status)> = snap
        .node_infos()
        .iter()
        .map(|n| (n.name().to_string(), pl.filter(state, pod, n)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Per constraint, its domains with their counts, and its global minimum.
type Counts = Vec<(BTreeMap<String, i64>, i64)>;

/// The PreFilter counts per constraint (sorted) and each constraint's global minimum.
fn counts_of(state: &CycleState) -> Option<Counts> {
    let s = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY)?;
    Some(
        s.constraints
            .iter()
            .zip(&s.domains)
            .map(|(c, d)| {
                (
                    d.sorted().into_iter().collect(),
                    d.min_match_num(c.min_domains),
                )
            })
            .collect(),
    )
}

fn counts(entries: &[(&str, i64)], min: i64) -> (BTreeMap<String, i64>, i64) {
    (
        entries.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        min,
    )
}

// ---- PreFilter: what it counts ----

#[rstest]
#[case::no_constraints_and_system_defaults_skip(
    plugin(),
    make_pod("p").label("foo", ""),
    vec![],
    Status::skip(),
    None
)]
#[case::only_schedule_anyway_constraints_skip(
    plugin(),
    incoming(vec![tsc(1, "zone", SOFT, exists("foo"))]),
    vec![],
    Status::skip(),
    None
)]
#[case::counts_matching_pods_per_zone(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("a2", "a"), foo_on("b1", "b"), foo_on("y1", "y"), make_pod("y2").node("y").label("bar", "")],
    ok(),
    Some(vec![counts(&[("zone1", 3), ("zone2", 1)], 1)])
)]
#[case::empty_domains_count_zero(
    plugin(),
    incoming(vec![tsc(1, LABEL_HOSTNAME, HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("a2", "a"), foo_on("y1", "y")],
    ok(),
    Some(vec![counts(&[("a", 2), ("b", 0), ("x", 0), ("y", 1)], 0)])
)]
#[case::terminating_pods_do_not_count(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![terminating(foo_on("a1", "a")), foo_on("x1", "x")],
    ok(),
    Some(vec![counts(&[("zone1", 0), ("zone2", 1)], 0)])
)]
#[case::pods_of_other_namespaces_do_not_count(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a").namespace("other"), foo_on("x1", "x")],
    ok(),
    Some(vec![counts(&[("zone1", 0), ("zone2", 1)], 0)])
)]
#[case::a_selector_selecting_everything_counts_nothing(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, Some(V1LabelSelector::default()))]),
    vec![foo_on("a1", "a"), foo_on("x1", "x")],
    ok(),
    Some(vec![counts(&[("zone1", 0), ("zone2", 0)], 0)])
)]
#[case::match_label_keys_narrow_the_selector(
    plugin(),
    incoming(vec![TopologySpreadConstraint { match_label_keys: Some(vec!["version".into()]), ..tsc(1, "zone", HARD, exists("foo")) }]).label("version", "v2"),
    vec![foo_on("a1", "a").label("version", "v1"), foo_on("a2", "a").label("version", "v2"), foo_on("x1", "x").label("version", "v1")],
    ok(),
    Some(vec![counts(&[("zone1", 1), ("zone2", 0)], 0)])
)]
#[case::match_label_keys_without_the_label_change_nothing(
    plugin(),
    incoming(vec![TopologySpreadConstraint { match_label_keys: Some(vec!["version".into()]), ..tsc(1, "zone", HARD, exists("foo")) }]),
    vec![foo_on("a1", "a").label("version", "v1"), foo_on("x1", "x")],
    ok(),
    Some(vec![counts(&[("zone1", 1), ("zone2", 1)], 1)])
)]
#[case::two_constraints_are_counted_apart(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, exists("foo")), tsc(1, LABEL_HOSTNAME, HARD, exists("bar"))]),
    vec![foo_on("a1", "a").label("bar", ""), foo_on("b1", "b"), make_pod("y1").node("y").label("bar", "")],
    ok(),
    Some(vec![
        counts(&[("zone1", 2), ("zone2", 0)], 0),
        counts(&[("a", 1), ("b", 0), ("x", 0), ("y", 1)], 0),
    ])
)]
#[case::invalid_selector_is_an_error(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, Some(V1LabelSelector { match_expressions: Some(vec![LabelSelectorRequirement { key: "foo".into(), operator: "Bogus".into(), values: None }]), match_labels: None }))]),
    vec![],
    Status::error("get constraints from pod: obtaining pod's hard topology spread constraints: \"Bogus\" is not a valid label selector operator"),
    None
)]
fn pre_filter_counts(
    #[case] pl: PodTopologySpread,
    #[case] pod: PodBuilder,
    #[case] existing: Vec<PodBuilder>,
    #[case] want_status: Status,
    #[case] want_counts: Option<Counts>,
) {
    let snap = snapshot(
        vec![
            zoned("a", "zone1"),
            zoned("b", "zone1"),
            zoned("x", "zone2"),
            zoned("y", "zone2"),
        ],
        existing,
    );
    let mut state = CycleState::new();
    let (result, status) = pl.pre_filter(&mut state, &pod.info(), &snap);
    assert_eq!(
        (result, status, counts_of(&state)),
        (None, want_status, want_counts)
    );
}

#[rstest]
#[case::nodes_missing_a_key_are_not_domains(
    incoming(vec![tsc(1, "zone", HARD, exists("foo")), tsc(1, "rack", HARD, exists("foo"))]),
    vec![
        counts(&[("zone1", 1)], 1),
        counts(&[("r1", 1)], 1),
    ]
)]
#[case::node_affinity_honored_by_default(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]).node_selector("disk", "ssd"),
    vec![counts(&[("zone1", 1)], 1)]
)]
#[case::node_affinity_ignored(
    incoming(vec![TopologySpreadConstraint { node_affinity_policy: Some("Ignore".into()), ..tsc(1, "zone", HARD, exists("foo")) }]).node_selector("disk", "ssd"),
    vec![counts(&[("zone1", 1), ("zone2", 2), ("zone3", 4)], 1)]
)]
#[case::required_node_affinity_honored(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]).node_affinity_term("zone", "In", &["zone2"]),
    vec![counts(&[("zone2", 2)], 2)]
)]
#[case::taints_ignored_by_default(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![counts(&[("zone1", 1), ("zone2", 2), ("zone3", 4)], 1)]
)]
#[case::untolerated_taints_honored(
    incoming(vec![TopologySpreadConstraint { node_taints_policy: Some("Honor".into()), ..tsc(1, "zone", HARD, exists("foo")) }]),
    vec![counts(&[("zone1", 1), ("zone2", 2)], 1)]
)]
#[case::tolerated_taints_honored(
    incoming(vec![TopologySpreadConstraint { node_taints_policy: Some("Honor".into()), ..tsc(1, "zone", HARD, exists("foo")) }]).toleration("dedicated", "Exists", "", "NoSchedule"),
    vec![counts(&[("zone1", 1), ("zone2", 2), ("zone3", 4)], 1)]
)]
fn pre_filter_eligible_nodes(#[case] pod: PodBuilder, #[case] want: Counts) {
    // a: zone1, ssd, rack r1; b: zone2, no rack; c: zone3, tainted, no rack.
    let snap = snapshot(
        vec![
            node("a", &[("zone", "zone1"), ("disk", "ssd"), ("rack", "r1")]),
            node("b", &[("zone", "zone2")]),
            with_taint(node("c", &[("zone", "zone3")]), "dedicated", "NoSchedule"),
        ],
        vec![
            foo_on("a1", "a"),
            foo_on("b1", "b"),
            foo_on("b2", "b"),
            foo_on("c1", "c"),
            foo_on("c2", "c"),
            foo_on("c3", "c"),
            foo_on("c4", "c"),
        ],
    );
    let mut state = CycleState::new();
    let (_, status) = plugin().pre_filter(&mut state, &pod.info(), &snap);
    assert_eq!((status, counts_of(&state)), (ok(), Some(want)));
}

/// With taints honored, a node counts unless it has an untolerated NoSchedule or NoExecute
/// taint; PreferNoSchedule taints do not matter.
#[rstest]
#[case::no_schedule("NoSchedule", vec![counts(&[("zone1", 1)], 1)])]
#[case::no_execute("NoExecute", vec![counts(&[("zone1", 1)], 1)])]
#[case::prefer_no_schedule("PreferNoSchedule", vec![counts(&[("zone1", 1), ("zone2", 0)], 0)])]
fn honored_taint_effects(#[case] effect: &str, #[case] want: Counts) {
    let snap = snapshot(
        vec![
            zoned("a", "zone1"),
            with_taint(zoned("b", "zone2"), "dedicated", effect),
        ],
        vec![foo_on("a1", "a")],
    );
    let pod = incoming(vec![TopologySpreadConstraint {
        node_taints_policy: Some("Honor".into()),
        ..tsc(1, "zone", HARD, exists("foo"))
    }]);
    let state = prefiltered(&plugin(), &pod.info(), &snap);
    assert_eq!(counts_of(&state), Some(want));
}

#[test]
fn parallel_counts_equal_sequential_counts() {
    let nodes: Vec<Node> = (0..1500)
        .map(|i| zoned(&format!("n{i:04}"), &format!("zone{}", i % 3)))
        .collect();
    let pods: Vec<PodBuilder> = (0..1500)
        .filter(|i| i % 7 != 0)
        .map(|i| foo_on(&format!("p{i}"), &format!("n{:04}", (i * 13) % 1500)))
        .collect();
    let snap = snapshot(nodes, pods);
    let pod = incoming(vec![
        tsc(1, "zone", HARD, exists("foo")),
        tsc(1, LABEL_HOSTNAME, HARD, exists("foo")),
    ])
    .info();
    let run = |handle: &Handle| {
        let mut state = CycleState::new();
        let (_, status) = plugin_on(json!({}), handle).pre_filter(&mut state, &pod, &snap);
        (status, counts_of(&state))
    };
    let parallel = Handle::new(
        Parallelizer::new(4),
        Arc::new(framework::handle::NoopClient),
    );
    let sequential = run(&Handle::offline());
    assert_eq!(
        (run(&parallel), sequential.1.as_ref().map(|c| c[0].clone())),
        (
            sequential.clone(),
            Some(counts(
                &[("zone0", 428), ("zone1", 428), ("zone2", 429)],
                428
            ))
        )
    );
}

// ---- Filter ----

#[rstest]
#[case::skew_within_max_across_zones(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("x1", "x")],
    vec![("a", ok()), ("b", ok()), ("x", ok()), ("y", ok())]
)]
#[case::skew_over_max_rejects_the_fuller_zone(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("b1", "b"), foo_on("x1", "x")],
    vec![("a", over()), ("b", over()), ("x", ok()), ("y", ok())]
)]
#[case::larger_max_skew_tolerates_more(
    incoming(vec![tsc(2, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("b1", "b"), foo_on("x1", "x")],
    vec![("a", ok()), ("b", ok()), ("x", ok()), ("y", ok())]
)]
#[case::skew_over_max_across_hostnames(
    incoming(vec![tsc(1, LABEL_HOSTNAME, HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("b1", "b"), foo_on("x1", "x")],
    vec![("a", over()), ("b", over()), ("x", over()), ("y", ok())]
)]
#[case::a_pod_its_selector_does_not_match_adds_no_skew(
    spread(make_pod("p"), vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("b1", "b"), foo_on("x1", "x")],
    vec![("a", ok()), ("b", ok()), ("x", ok()), ("y", ok())]
)]
#[case::node_missing_the_key_is_unresolvable(
    incoming(vec![tsc(1, "rack", HARD, exists("foo"))]),
    vec![],
    vec![("a", missing()), ("b", missing()), ("x", missing()), ("y", missing())]
)]
#[case::every_constraint_must_hold(
    incoming(vec![tsc(1, "zone", HARD, exists("foo")), tsc(1, LABEL_HOSTNAME, HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), foo_on("x1", "x"), foo_on("x2", "x")],
    vec![("a", over()), ("b", ok()), ("x", over()), ("y", over())]
)]
#[case::terminating_pods_do_not_count(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![foo_on("a1", "a"), terminating(foo_on("b1", "b")), foo_on("x1", "x")],
    vec![("a", ok()), ("b", ok()), ("x", ok()), ("y", ok())]
)]
#[case::match_label_keys_count_only_the_same_version(
    incoming(vec![TopologySpreadConstraint { match_label_keys: Some(vec!["version".into()]), ..tsc(1, "zone", HARD, exists("foo")) }]).label("version", "v2"),
    vec![foo_on("a1", "a").label("version", "v1"), foo_on("b1", "b").label("version", "v1"), foo_on("x1", "x").label("version", "v2")],
    vec![("a", ok()), ("b", ok()), ("x", over()), ("y", over())]
)]
#[case::min_domains_unmet_makes_the_global_minimum_zero(
    incoming(vec![TopologySpreadConstraint { min_domains: Some(3), ..tsc(1, "zone", HARD, exists("foo")) }]),
    vec![foo_on("a1", "a"), foo_on("x1", "x")],
    vec![("a", over()), ("b", over()), ("x", over()), ("y", over())]
)]
#[case::min_domains_met_uses_the_real_minimum(
    incoming(vec![TopologySpreadConstraint { min_domains: Some(2), ..tsc(1, "zone", HARD, exists("foo")) }]),
    vec![foo_on("a1", "a"), foo_on("x1", "x")],
    vec![("a", ok()), ("b", ok()), ("x", ok()), ("y", ok())]
)]
fn filter_decides_each_node(
    #[case] pod: PodBuilder,
    #[case] existing: Vec<PodBuilder>,
    #[case] want: Vec<(&str, Status)>,
) {
    let snap = snapshot(
        vec![
            zoned("a", "zone1"),
            zoned("b", "zone1"),
            zoned("x", "zone2"),
            zoned("y", "zone2"),
        ],
        existing,
    );
    assert_eq!(
        filter_all(&plugin(), &pod.info(), &snap),
        (ok(), by_node(want))
    );
}

/// Upstream's minDomains case: pods spread 2/2/1 over three eligible nodes (node-0 excluded
/// by affinity), maxSkew 2, minDomains 4: only the third node fits.
#[test]
fn min_domains_larger_than_the_domains_only_the_emptiest_fits() {
    let nodes = (0..4)
        .map(|i| {
            let name = format!("node-{i}");
            let zone = format!("zone-{}", i / 2);
            node(&name, &[("node", &name), ("zone", &zone)])
        })
        .collect();
    let snap = snapshot(
        nodes,
        vec![
            foo_on("p1a", "node-1"),
            foo_on("p1b", "node-1"),
            foo_on("p2a", "node-2"),
            foo_on("p2b", "node-2"),
            foo_on("p3", "node-3"),
        ],
    );
    let pod = incoming(vec![TopologySpreadConstraint {
        min_domains: Some(4),
        ..tsc(2, "node", HARD, exists("foo"))
    }])
    .node_affinity_term("node", "NotIn", &["node-0"]);
    assert_eq!(
        filter_all(&plugin(), &pod.info(), &snap),
        (
            ok(),
            by_node(vec![
                ("node-0", ok()),
                ("node-1", over()),
                ("node-2", over()),
                ("node-3", ok()),
            ])
        )
    );
}

/// a: zone1, ssd; b: zone2, ssd; c: zone3, tainted; one matching pod on a and b each.
#[rstest]
#[case::affinity_honored_leaves_out_the_unselected_zone(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]).node_selector("disk", "ssd"),
    vec![("a", ok()), ("b", ok()), ("c", ok())]
)]
#[case::affinity_ignored_counts_the_empty_zone(
    incoming(vec![TopologySpreadConstraint { node_affinity_policy: Some("Ignore".into()), ..tsc(1, "zone", HARD, exists("foo")) }]).node_selector("disk", "ssd"),
    vec![("a", over()), ("b", over()), ("c", ok())]
)]
#[case::taints_ignored_counts_the_tainted_zone(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    vec![("a", over()), ("b", over()), ("c", ok())]
)]
#[case::taints_honored_leaves_out_the_tainted_zone(
    incoming(vec![TopologySpreadConstraint { node_taints_policy: Some("Honor".into()), ..tsc(1, "zone", HARD, exists("foo")) }]),
    vec![("a", ok()), ("b", ok()), ("c", ok())]
)]
#[case::taints_honored_but_tolerated(
    incoming(vec![TopologySpreadConstraint { node_taints_policy: Some("Honor".into()), ..tsc(1, "zone", HARD, exists("foo")) }]).toleration("dedicated", "Equal", "", "NoSchedule"),
    vec![("a", over()), ("b", over()), ("c", ok())]
)]
fn filter_with_node_inclusion_policies(#[case] pod: PodBuilder, #[case] want: Vec<(&str, Status)>) {
    let snap = snapshot(
        vec![
            node("a", &[("zone", "zone1"), ("disk", "ssd")]),
            node("b", &[("zone", "zone2"), ("disk", "ssd")]),
            with_taint(node("c", &[("zone", "zone3")]), "dedicated", "NoSchedule"),
        ],
        vec![foo_on("a1", "a"), foo_on("b1", "b")],
    );
    assert_eq!(
        filter_all(&plugin(), &pod.info(), &snap),
        (ok(), by_node(want))
    );
}

#[test]
fn filter_without_pre_filter_state_is_an_error() {
    let snap = snapshot(vec![zoned("a", "zone1")], vec![]);
    let pod = incoming(vec![tsc(1, "zone", HARD, exists("foo"))]).info();
    assert_eq!(
        filter_each(&plugin(), &CycleState::new(), &pod, &snap),
        by_node(vec![(
            "a",
            Status::error("reading \"PreFilterPodTopologySpread\" from cycleState: not found")
        )])
    );
}

// ---- default constraints ----

/// Three nodes in zones; a matching pod (`app=web`) on a, none elsewhere; the List default
/// constraint is a hard zone constraint with maxSkew 1.
#[rstest]
#[case::service_selects_the_group(
    make_pod("p").label("app", "web"),
    services(vec![service("web", Some(&[("app", "web")]))]),
    Status::success(),
    vec![("a", over()), ("b", ok()), ("c", ok())]
)]
#[case::service_of_another_group_does_not_apply(
    make_pod("p").label("app", "web"),
    services(vec![service("db", Some(&[("app", "db")]))]),
    Status::skip(),
    vec![]
)]
#[case::service_without_selector_does_not_apply(
    make_pod("p").label("app", "web"),
    services(vec![service("headless", None)]),
    Status::skip(),
    vec![]
)]
#[case::no_workloads_no_defaults(make_pod("p").label("app", "web"), Workloads::default(), Status::skip(), vec![])]
#[case::replica_set_owner(
    owned_by(make_pod("p").label("app", "web"), "apps/v1", "ReplicaSet", "rs1"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", label_is("app", "web"))]), ..Default::default() },
    Status::success(),
    vec![("a", over()), ("b", ok()), ("c", ok())]
)]
#[case::stateful_set_owner(
    owned_by(make_pod("p").label("app", "web"), "apps/v1", "StatefulSet", "ss1"),
    Workloads { stateful_sets: in_default(vec![stateful_set("ss1", exists("app"))]), ..Default::default() },
    Status::success(),
    vec![("a", over()), ("b", ok()), ("c", ok())]
)]
#[case::replication_controller_owner(
    owned_by(make_pod("p").label("app", "web"), "v1", "ReplicationController", "rc1"),
    Workloads { replication_controllers: in_default(vec![replication_controller("rc1", &[("app", "web")])]), ..Default::default() },
    Status::success(),
    vec![("a", over()), ("b", ok()), ("c", ok())]
)]
#[case::pod_with_own_constraints_ignores_defaults(
    spread(make_pod("p").label("app", "web"), vec![tsc(1, "zone", SOFT, exists("app"))]),
    services(vec![service("web", Some(&[("app", "web")]))]),
    Status::skip(),
    vec![]
)]
fn list_default_constraints_filter(
    #[case] pod: PodBuilder,
    #[case] workloads: Workloads,
    #[case] want_pre: Status,
    #[case] want: Vec<(&str, Status)>,
) {
    let pl = list_defaults(
        json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
    );
    let snap = with_workloads(
        snapshot(
            vec![zoned("a", "z1"), zoned("b", "z2"), zoned("c", "z3")],
            vec![make_pod("w1").node("a").label("app", "web")],
        ),
        workloads,
    );
    let (pre, statuses) = filter_all(&pl, &pod.info(), &snap);
    let statuses = if pre.is_success() { statuses } else { vec![] };
    assert_eq!((pre, statuses), (want_pre, by_node(want)));
}

/// Which of these label sets the deduced selector selects.
fn selects(selector: Option<framework::labels::LabelSelector>) -> Option<Vec<bool>> {
    let candidates: [&[(&str, &str)]; 4] = [
        &[("app", "web")],
        &[("app", "web"), ("tier", "front")],
        &[("app", "db"), ("tier", "front")],
        &[("tier", "front")],
    ];
    selector.map(|s| {
        candidates
            .iter()
            .map(|labels| {
                s.matches(
                    &labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
            })
            .collect()
    })
}

#[rstest]
#[case::matching_services_merge(
    make_pod("p").label("app", "web").label("tier", "front"),
    services(vec![service("s1", Some(&[("app", "web")])), service("s2", Some(&[("tier", "front")]))]),
    Some(vec![false, true, false, false])
)]
#[case::services_not_matching_the_pod_are_left_out(
    make_pod("p").label("app", "web"),
    services(vec![service("s1", Some(&[("app", "web")])), service("s2", Some(&[("tier", "front")]))]),
    Some(vec![true, true, false, false])
)]
#[case::services_of_other_namespaces_are_left_out(
    make_pod("p").namespace("other").label("app", "web"),
    services(vec![service("s1", Some(&[("app", "web")]))]),
    None
)]
#[case::empty_service_selector_adds_nothing(
    make_pod("p").label("app", "web"),
    services(vec![service("s1", Some(&[]))]),
    None
)]
#[case::replica_set_requirements_are_anded(
    owned_by(make_pod("p").label("app", "web").label("tier", "front"), "apps/v1", "ReplicaSet", "rs1"),
    Workloads { services: in_default(vec![service("s1", Some(&[("app", "web")]))]), replica_sets: in_default(vec![replica_set("rs1", exists("tier"))]), ..Default::default() },
    Some(vec![false, true, false, false])
)]
#[case::replica_set_with_another_name_is_not_found(
    owned_by(make_pod("p").label("app", "web"), "apps/v1", "ReplicaSet", "rs2"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("tier"))]), ..Default::default() },
    None
)]
#[case::replica_set_of_another_api_group_is_not_a_controller_kind(
    owned_by(make_pod("p").label("app", "web"), "extensions/v1beta1", "ReplicaSet", "rs1"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("tier"))]), ..Default::default() },
    None
)]
#[case::non_controller_owner_is_ignored(
    owned_by(make_pod("p").label("app", "web"), "apps/v1", "ReplicaSet", "rs1").with(|p| {
        if let Some(r) = p.metadata.owner_references.as_mut().and_then(|r| r.first_mut()) { r.controller = None; }
    }),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("tier"))]), ..Default::default() },
    None
)]
#[case::replication_controller_selector_merges(
    owned_by(make_pod("p").label("app", "web"), "v1", "ReplicationController", "rc1"),
    Workloads { replication_controllers: in_default(vec![replication_controller("rc1", &[("tier", "front")])]), ..Default::default() },
    Some(vec![false, true, true, true])
)]
#[case::stateful_set_selector(
    owned_by(make_pod("p").label("app", "web"), "apps/v1", "StatefulSet", "ss1"),
    Workloads { stateful_sets: in_default(vec![stateful_set("ss1", label_is("app", "web"))]), ..Default::default() },
    Some(vec![true, true, false, false])
)]
fn default_selector_is_deduced_from_services_and_controller(
    #[case] pod: PodBuilder,
    #[case] workloads: Workloads,
    #[case] want: Option<Vec<bool>>,
) {
    assert_eq!(selects(default_selector(&pod.obj(), &workloads)), want);
}

// ---- AddPod / RemovePod ----

fn prefiltered(pl: &PodTopologySpread, pod: &PodInfo, snap: &Snapshot) -> CycleState {
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, pod, snap);
    assert_eq!(status, ok());
    state
}

/// Zones z1 (a), z2 (b); one matching pod on a; hard zone constraint maxSkew 1.
#[rstest]
#[case::adding_a_matching_pod_fills_the_empty_zone(
    true,
    foo_on("new", "b"),
    "b",
    vec![("a", ok()), ("b", ok())],
    vec![counts(&[("z1", 1), ("z2", 1)], 1)]
)]
#[case::adding_another_to_the_full_zone_rejects_it(
    true,
    foo_on("new", "a"),
    "a",
    vec![("a", over()), ("b", ok())],
    vec![counts(&[("z1", 2), ("z2", 0)], 0)]
)]
#[case::adding_a_pod_of_another_namespace_changes_nothing(
    true,
    foo_on("new", "a").namespace("other"),
    "a",
    vec![("a", over()), ("b", ok())],
    vec![counts(&[("z1", 1), ("z2", 0)], 0)]
)]
#[case::adding_a_pod_the_selector_does_not_match_changes_nothing(
    true,
    make_pod("new").node("a").label("bar", ""),
    "a",
    vec![("a", over()), ("b", ok())],
    vec![counts(&[("z1", 1), ("z2", 0)], 0)]
)]
#[case::removing_the_matching_pod_empties_the_zone(
    false,
    foo_on("a1", "a"),
    "a",
    vec![("a", ok()), ("b", ok())],
    vec![counts(&[("z1", 0), ("z2", 0)], 0)]
)]
fn add_and_remove_pod_update_the_counts(
    #[case] add: bool,
    #[case] changed: PodBuilder,
    #[case] on: &str,
    #[case] want: Vec<(&str, Status)>,
    #[case] want_counts: Counts,
) {
    let pl = plugin();
    let snap = snapshot(
        vec![zoned("a", "z1"), zoned("b", "z2")],
        vec![foo_on("a1", "a")],
    );
    let pod = incoming(vec![tsc(1, "zone", HARD, exists("foo"))]).info();
    let mut state = prefiltered(&pl, &pod, &snap);
    let node = snap
        .get(on)
        .cloned()
        .unwrap_or_else(|| Arc::new(make_node(on).info_with(&[])));
    let changed = changed.info();
    let status = if add {
        pl.add_pod(&mut state, &pod, &changed, &node)
    } else {
        pl.remove_pod(&mut state, &pod, &changed, &node)
    };
    assert_eq!(
        (
            status,
            filter_each(&pl, &state, &pod, &snap),
            counts_of(&state)
        ),
        (ok(), by_node(want), Some(want_counts))
    );
}

#[test]
fn removing_a_pod_on_a_copy_leaves_the_original_state_alone() {
    let pl = plugin();
    let snap = snapshot(
        vec![zoned("a", "z1"), zoned("b", "z2")],
        vec![foo_on("a1", "a"), foo_on("a2", "a")],
    );
    let pod = incoming(vec![tsc(2, "zone", HARD, exists("foo"))]).info();
    let state = prefiltered(&pl, &pod, &snap);
    let mut copy = state.clone();
    let node = snap.get("a").cloned();
    let status = node.map(|n| pl.remove_pod(&mut copy, &pod, &foo_on("a1", "a").info(), &n));
    assert_eq!(
        (
            status,
            filter_each(&pl, &state, &pod, &snap),
            filter_each(&pl, &copy, &pod, &snap)
        ),
        (
            Some(ok()),
            by_node(vec![("a", over()), ("b", ok())]),
            by_node(vec![("a", ok()), ("b", ok())])
        )
    );
}

/// PreFilter's counts and the normalized scores of two workloads, from `pl`.
fn counts_and_scores(
    pl: &PodTopologySpread,
    hard: &PodInfo,
    soft: &PodInfo,
    snap: &Snapshot,
) -> (Option<Counts>, Vec<(String, i64)>) {
    let state = prefiltered(pl, hard, snap);
    let names: Vec<&str> = snap.node_infos().iter().map(|n| n.name()).collect();
    (counts_of(&state), score_all(pl, soft, snap, &names).1)
}

/// One plugin kept across cycles (its counts refreshed for the nodes that changed) against
/// a fresh plugin each cycle, while pods come and go one node at a time.
#[test]
fn cached_counts_equal_fresh_counts_across_cycles() {
    let nodes = (0..12)
        .map(|i| zoned(&format!("n{i:02}"), &format!("zone{}", i % 3)))
        .collect();
    let mut snap = snapshot(nodes, vec![foo_on("p0", "n00"), foo_on("p1", "n04")]);
    let hard = incoming(vec![
        tsc(1, "zone", HARD, exists("foo")),
        tsc(2, LABEL_HOSTNAME, HARD, exists("foo")),
    ])
    .info();
    let soft = spread(
        make_pod("s").label("bar", ""),
        vec![tsc(1, "zone", SOFT, exists("bar"))],
    )
    .info();
    let cached = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for step in 0..24_usize {
        got.push(counts_and_scores(&cached, &hard, &soft, &snap));
        want.push(counts_and_scores(&plugin(), &hard, &soft, &snap));
        let node = format!("n{:02}", (step * 5) % 12);
        let name = format!("q{step}");
        match step % 4 {
            0 => snap.assume_pod(foo_on(&name, &node).info(), &node),
            1 => snap.assume_pod(make_pod(&name).node(&node).label("bar", "").info(), &node),
            2 => snap.assume_pod(foo_on(&name, &node).namespace("other").info(), &node),
            _ => snap.remove_pod(
                &format!("default/q{}", step - 3),
                &format!("n{:02}", ((step - 3) * 5) % 12),
            ),
        };
    }
    assert_eq!(got, want);
}

#[test]
fn critical_paths_follow_updates() {
    let mut paths = filtering::CriticalPaths::new(String::new());
    let mut seen = Vec::new();
    for (value, num) in [("z1", 3), ("z2", 1), ("z3", 2), ("z2", 4), ("z3", 5)] {
        paths.update(value, num, str::to_string);
        seen.push((paths.0[0].0.clone(), paths.min()));
    }
    assert_eq!(
        seen,
        vec![
            ("z1".to_string(), 3),
            ("z2".to_string(), 1),
            ("z2".to_string(), 1),
            ("z3".to_string(), 2),
            // z1 (3) is the true minimum now, but only two domains are tracked.
            ("z2".to_string(), 4),
        ]
    );
}

#[test]
fn add_pod_without_pre_filter_state_is_an_error() {
    let node = make_node("a").info_with(&[]);
    let pod = make_pod("p").info();
    assert_eq!(
        plugin().add_pod(
            &mut CycleState::new(),
            &pod,
            &foo_on("x", "a").info(),
            &node
        ),
        Status::error("reading \"PreFilterPodTopologySpread\" from cycleState: not found")
    );
}

// ---- Score ----

/// PreScore over the feasible nodes `feasible`, Score on each, NormalizeScore.
fn score_all(
    pl: &PodTopologySpread,
    pod: &PodInfo,
    snap: &Snapshot,
    feasible: &[&str],
) -> (Status, Vec<(String, i64)>) {
    let nodes: Vec<Arc<NodeInfo>> = feasible
        .iter()
        .filter_map(|n| snap.get(n).cloned())
        .collect();
    let mut state = CycleState::new();
    let status = pl.pre_score(&mut state, pod, snap, &nodes);
    if !status.is_success() {
        return (status, Vec::new());
    }
    let mut scores: Vec<NodeScore<'_>> = nodes
        .iter()
        .map(|n| NodeScore {
            node: n,
            score: pl.score(&state, pod, n).unwrap_or(-1),
        })
        .collect();
    let status = pl.normalize_score(&state, pod, &mut scores);
    (
        status,
        scores
            .iter()
            .map(|s| (s.name().to_string(), s.score))
            .collect(),
    )
}

fn scores(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

fn four_hosts() -> Vec<Node> {
    vec![
        host("node-a"),
        host("node-b"),
        host("node-c"),
        host("node-d"),
    ]
}

fn four_zoned() -> Vec<Node> {
    vec![
        zoned("node-a", "zone1"),
        zoned("node-b", "zone1"),
        zoned("node-x", "zone2"),
        zoned("node-y", "zone2"),
    ]
}

/// `n` pods labelled `foo` on `node`, named after it.
fn foos(node: &str, n: usize) -> Vec<PodBuilder> {
    (1..=n)
        .map(|i| foo_on(&format!("{node}-{i}"), node))
        .collect()
}

fn concat(groups: Vec<Vec<PodBuilder>>) -> Vec<PodBuilder> {
    groups.into_iter().flatten().collect()
}

/// The cases of upstream's TestPodTopologySpreadScore, with the scores it expects.
#[rstest]
#[case::one_constraint_on_node_no_existing_pods(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), host("node-b")],
    vec![],
    &["node-a", "node-b"],
    &[("node-a", 100), ("node-b", 100)]
)]
#[case::only_one_node_is_candidate(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), host("node-b")],
    concat(vec![foos("node-a", 2), foos("node-b", 1)]),
    &["node-a"],
    &[("node-a", 100)]
)]
#[case::all_nodes_have_the_same_number_of_matching_pods(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), host("node-b")],
    concat(vec![foos("node-a", 1), foos("node-b", 1)]),
    &["node-a", "node-b"],
    &[("node-a", 100), ("node-b", 100)]
)]
#[case::hostname_spread_2_1_0_3(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    four_hosts(),
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-d", 3)]),
    &["node-a", "node-b", "node-c", "node-d"],
    &[("node-a", 20), ("node-b", 60), ("node-c", 100), ("node-d", 0)]
)]
#[case::null_selector(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, None)]),
    four_hosts(),
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-d", 3)]),
    &["node-a", "node-b", "node-c", "node-d"],
    &[("node-a", 100), ("node-b", 100), ("node-c", 100), ("node-d", 100)]
)]
#[case::max_skew_2(
    incoming(vec![tsc(2, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    four_hosts(),
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-d", 3)]),
    &["node-a", "node-b", "node-c", "node-d"],
    &[("node-a", 33), ("node-b", 66), ("node-c", 100), ("node-d", 16)]
)]
#[case::max_skew_3(
    incoming(vec![tsc(3, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    four_hosts(),
    concat(vec![foos("node-a", 4), foos("node-b", 3), foos("node-c", 2), foos("node-d", 1)]),
    &["node-a", "node-b", "node-c", "node-d"],
    &[("node-a", 44), ("node-b", 66), ("node-c", 77), ("node-d", 100)]
)]
#[case::three_of_four_nodes_are_candidates(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), host("node-b"), host("node-x"), host("node-y")],
    concat(vec![foos("node-a", 4), foos("node-b", 2), foos("node-x", 1), foos("node-y", 3)]),
    &["node-a", "node-b", "node-x"],
    &[("node-a", 33), ("node-b", 83), ("node-x", 100)]
)]
#[case::candidate_missing_the_key_scores_zero(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), node("node-b", &[("n", "node-b")]), host("node-x"), host("node-y")],
    concat(vec![foos("node-a", 4), foos("node-b", 2), foos("node-x", 1), foos("node-y", 3)]),
    &["node-a", "node-b", "node-x"],
    &[("node-a", 16), ("node-b", 0), ("node-x", 100)]
)]
#[case::zone_three_of_four_candidates(
    incoming(vec![tsc(1, "zone", SOFT, exists("foo"))]),
    four_zoned(),
    concat(vec![foos("node-a", 4), foos("node-b", 2), foos("node-x", 1), foos("node-y", 3)]),
    &["node-a", "node-b", "node-x"],
    &[("node-a", 75), ("node-b", 75), ("node-x", 100)]
)]
#[case::zone_and_node_two_of_four_candidates(
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    four_zoned(),
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-x", 2), foos("node-y", 4)]),
    &["node-a", "node-x"],
    &[("node-a", 100), ("node-x", 63)]
)]
#[case::two_zone_constraints_with_different_selectors(
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, "zone", SOFT, exists("bar"))]).label("bar", ""),
    vec![node("node-a", &[("zone", "zone1")]), node("node-b", &[("zone", "zone1")]), node("node-x", &[("zone", "zone2")]), node("node-y", &[("zone", "zone2")])],
    vec![foo_on("a1", "node-a").label("bar", ""), foo_on("a2", "node-a"), foo_on("b1", "node-b").label("bar", ""), foo_on("y1", "node-y"), foo_on("y2", "node-y").label("bar", ""), foo_on("y3", "node-y")],
    &["node-a", "node-x"],
    &[("node-a", 85), ("node-x", 100)]
)]
#[case::zone_and_node_with_different_selectors(
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, LABEL_HOSTNAME, SOFT, exists("bar"))]).label("bar", ""),
    four_zoned(),
    vec![foo_on("a1", "node-a"), foo_on("b1", "node-b").label("bar", ""), foo_on("y1", "node-y"), make_pod("y2").node("node-y").label("bar", "")],
    &["node-a", "node-b", "node-x", "node-y"],
    &[("node-a", 60), ("node-b", 20), ("node-x", 100), ("node-y", 60)]
)]
#[case::zone_and_node_with_different_selectors_some_nodes_empty(
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, LABEL_HOSTNAME, SOFT, exists("bar"))]).label("bar", ""),
    four_zoned(),
    vec![make_pod("b1").node("node-b").label("bar", ""), foo_on("x1", "node-x"), foo_on("y1", "node-y").label("bar", "")],
    &["node-a", "node-b", "node-x", "node-y"],
    &[("node-a", 100), ("node-b", 60), ("node-x", 40), ("node-y", 0)]
)]
#[case::zone_and_node_with_different_selectors_three_candidates(
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, LABEL_HOSTNAME, SOFT, exists("bar"))]).label("bar", ""),
    four_zoned(),
    vec![foo_on("a1", "node-a"), foo_on("b1", "node-b").label("bar", ""), foo_on("y1", "node-y"), make_pod("y2").node("node-y").label("bar", "")],
    &["node-a", "node-b", "node-x"],
    &[("node-a", 50), ("node-b", 25), ("node-x", 100)]
)]
#[case::pods_of_other_namespaces_do_not_count(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), host("node-b")],
    vec![foo_on("a1", "node-a").namespace("ns1"), foo_on("a2", "node-a"), foo_on("b1", "node-b"), foo_on("b2", "node-b")],
    &["node-a", "node-b"],
    &[("node-a", 100), ("node-b", 33)]
)]
#[case::terminating_pods_do_not_count(
    incoming(vec![tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![host("node-a"), host("node-b")],
    vec![terminating(foo_on("a1", "node-a")), foo_on("b1", "node-b")],
    &["node-a", "node-b"],
    &[("node-a", 100), ("node-b", 0)]
)]
#[case::min_domains_has_no_effect_when_scoring(
    incoming(vec![TopologySpreadConstraint { min_domains: Some(10), ..tsc(2, "node", SOFT, exists("foo")) }]),
    vec![node("node-a", &[("node", "node-a")]), node("node-b", &[("node", "node-b")]), node("node-c", &[("node", "node-c")])],
    concat(vec![foos("node-a", 2), foos("node-b", 2), foos("node-c", 1)]),
    &["node-a", "node-b", "node-c"],
    &[("node-a", 75), ("node-b", 75), ("node-c", 100)]
)]
#[case::node_affinity_policy_honored_with_node_selector(
    incoming(vec![tsc(1, "node", SOFT, exists("foo"))]).node_selector("foo", ""),
    vec![node("node-a", &[("node", "node-a"), ("foo", "")]), node("node-b", &[("node", "node-b"), ("foo", "")]), node("node-c", &[("node", "node-c")])],
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)]),
    &["node-a", "node-b", "node-c"],
    &[("node-a", 0), ("node-b", 33), ("node-c", 100)]
)]
#[case::node_affinity_policy_ignored_with_node_selector(
    incoming(vec![TopologySpreadConstraint { node_affinity_policy: Some("Ignore".into()), ..tsc(1, "node", SOFT, exists("foo")) }]).node_selector("foo", ""),
    vec![node("node-a", &[("node", "node-a"), ("foo", "")]), node("node-b", &[("node", "node-b"), ("foo", "")]), node("node-c", &[("node", "node-c")])],
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)]),
    &["node-a", "node-b", "node-c"],
    &[("node-a", 66), ("node-b", 100), ("node-c", 100)]
)]
#[case::node_affinity_policy_honored_with_node_affinity(
    incoming(vec![tsc(1, "node", SOFT, exists("foo"))]).node_affinity_term("foo", "In", &[""]),
    vec![node("node-a", &[("node", "node-a"), ("foo", "")]), node("node-b", &[("node", "node-b"), ("foo", "")]), node("node-c", &[("node", "node-c")])],
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)]),
    &["node-a", "node-b", "node-c"],
    &[("node-a", 0), ("node-b", 33), ("node-c", 100)]
)]
#[case::node_taints_policy_honored(
    incoming(vec![TopologySpreadConstraint { node_taints_policy: Some("Honor".into()), ..tsc(1, "node", SOFT, exists("foo")) }]),
    vec![node("node-a", &[("node", "node-a")]), node("node-b", &[("node", "node-b")]), with_taint(node("node-c", &[("node", "node-c")]), "node.kubernetes.io/unschedulable", "NoSchedule")],
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)]),
    &["node-a", "node-b", "node-c"],
    &[("node-a", 0), ("node-b", 33), ("node-c", 100)]
)]
#[case::node_taints_policy_ignored(
    incoming(vec![tsc(1, "node", SOFT, exists("foo"))]),
    vec![node("node-a", &[("node", "node-a")]), node("node-b", &[("node", "node-b")]), with_taint(node("node-c", &[("node", "node-c")]), "node.kubernetes.io/unschedulable", "NoSchedule")],
    concat(vec![foos("node-a", 2), foos("node-b", 1), foos("node-c", 1)]),
    &["node-a", "node-b", "node-c"],
    &[("node-a", 66), ("node-b", 100), ("node-c", 100)]
)]
#[case::match_label_keys_anded_with_an_empty_selector(
    incoming(vec![
        TopologySpreadConstraint { match_label_keys: Some(vec!["foo".into()]), ..tsc(1, "zone", SOFT, Some(V1LabelSelector::default())) },
        TopologySpreadConstraint { match_label_keys: Some(vec!["bar".into()]), ..tsc(1, LABEL_HOSTNAME, SOFT, Some(V1LabelSelector::default())) },
    ]).label("bar", ""),
    vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-c", "zone2"), zoned("node-d", "zone2")],
    vec![foo_on("a1", "node-a"), foo_on("b1", "node-b").label("bar", ""), foo_on("c1", "node-c"), make_pod("c2").node("node-c").label("bar", "")],
    &["node-a", "node-b", "node-c", "node-d"],
    &[("node-a", 60), ("node-b", 20), ("node-c", 60), ("node-d", 100)]
)]
#[case::match_label_keys_anded_with_a_selector(
    incoming(vec![
        tsc(1, "zone", SOFT, exists("foo")),
        TopologySpreadConstraint { match_label_keys: Some(vec!["baz".into()]), ..tsc(1, LABEL_HOSTNAME, SOFT, exists("bar")) },
    ]).label("bar", "").label("baz", ""),
    vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-c", "zone2"), zoned("node-d", "zone2")],
    vec![foo_on("a1", "node-a"), foo_on("b1", "node-b").label("bar", "").label("baz", ""), foo_on("c1", "node-c"), make_pod("c2").node("node-c").label("bar", ""), make_pod("c3").node("node-c").label("bar", "").label("baz", "")],
    &["node-a", "node-b", "node-c", "node-d"],
    &[("node-a", 60), ("node-b", 20), ("node-c", 60), ("node-d", 100)]
)]
fn score_matches_upstream(
    #[case] pod: PodBuilder,
    #[case] nodes: Vec<Node>,
    #[case] existing: Vec<PodBuilder>,
    #[case] feasible: &[&str],
    #[case] want: &[(&str, i64)],
) {
    let snap = snapshot(nodes, existing);
    assert_eq!(
        score_all(&plugin(), &pod.info(), &snap, feasible),
        (ok(), scores(want))
    );
}

/// System default constraints: the selector comes from the Service or ReplicaSet; nodes
/// without a zone are still scored (they form the "" zone).
#[rstest]
#[case::service_on_nodes_without_zones(
    make_pod("p").label("foo", ""),
    four_hosts(),
    services(vec![service("svc", Some(&[("foo", "")]))]),
    &[("node-a", 44), ("node-b", 66), ("node-c", 77), ("node-d", 100)]
)]
#[case::replica_set_with_nodes_half_zoned(
    owned_by(make_pod("p").label("foo", "").label("baz", "sup"), "apps/v1", "ReplicaSet", "rs1"),
    vec![
        node("node-a", &[(LABEL_HOSTNAME, "node-a"), (LABEL_TOPOLOGY_ZONE, "mars")]),
        node("node-b", &[(LABEL_HOSTNAME, "node-b"), (LABEL_TOPOLOGY_ZONE, "mars")]),
        host("node-c"),
        host("node-d"),
    ],
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]), ..Default::default() },
    // hostname weight ln 6, zone weight ln 4 over domains "mars" (7 pods) and "" (3 pods):
    // raw 23, 21, 6, 4; c and d carry no zone label, so only their hostname counts.
    &[("node-a", 17), ("node-b", 26), ("node-c", 91), ("node-d", 100)]
)]
fn system_default_constraints_score(
    #[case] pod: PodBuilder,
    #[case] nodes: Vec<Node>,
    #[case] workloads: Workloads,
    #[case] want: &[(&str, i64)],
) {
    let snap = with_workloads(
        snapshot(
            nodes,
            concat(vec![
                foos("node-a", 4),
                foos("node-b", 3),
                foos("node-c", 2),
                foos("node-d", 1),
            ]),
        ),
        workloads,
    );
    assert_eq!(
        score_all(
            &plugin(),
            &pod.info(),
            &snap,
            &["node-a", "node-b", "node-c", "node-d"]
        ),
        (ok(), scores(want))
    );
}

/// Per constraint, its domains and their counts, in order.
type DomainCounts<K> = Vec<Vec<(K, i64)>>;

/// What PreScore keeps: domains of the feasible nodes with their counts, and the weights.
#[rstest]
#[case::zone_and_hostname(
    plugin(),
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, LABEL_HOSTNAME, SOFT, exists("foo"))]),
    vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")],
    Workloads::default(),
    (vec![vec![("zone1", 2), ("zone2", 1)], vec![]], vec![4.0_f64.ln(), 5.0_f64.ln()])
)]
#[case::node_missing_a_key_is_ignored(
    plugin(),
    incoming(vec![tsc(1, "zone", SOFT, exists("foo")), tsc(1, LABEL_HOSTNAME, SOFT, exists("bar"))]),
    vec![zoned("node-a", "zone1"), zoned("node-b", "zone1"), host("node-x")],
    Workloads::default(),
    (vec![vec![("zone1", 2)], vec![]], vec![3.0_f64.ln(), 4.0_f64.ln()])
)]
#[case::system_defaults_count_a_missing_zone_as_a_domain(
    plugin(),
    owned_by(make_pod("p").label("foo", "tar"), "apps/v1", "ReplicaSet", "rs1"),
    vec![
        node("node-a", &[(LABEL_HOSTNAME, "node-a"), (LABEL_TOPOLOGY_ZONE, "mars")]),
        node("node-b", &[(LABEL_HOSTNAME, "node-b"), (LABEL_TOPOLOGY_ZONE, "mars")]),
        host("node-c"),
        host("node-x"),
    ],
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]), ..Default::default() },
    (vec![vec![], vec![("", 2), ("mars", 2)]], vec![6.0_f64.ln(), 4.0_f64.ln()])
)]
#[case::list_defaults_keep_only_schedule_anyway(
    list_defaults(json!([
        {"maxSkew": 1, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
    ])),
    owned_by(make_pod("p").label("foo", "tar"), "apps/v1", "ReplicaSet", "rs1"),
    vec![node("node-a", &[("rack", "rack1"), (LABEL_HOSTNAME, "node-a"), ("zone", "mars")])],
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]), ..Default::default() },
    (vec![vec![], vec![("mars", 1)]], vec![3.0_f64.ln(), 3.0_f64.ln()])
)]
fn pre_score_state(
    #[case] pl: PodTopologySpread,
    #[case] pod: PodBuilder,
    #[case] nodes: Vec<Node>,
    #[case] workloads: Workloads,
    #[case] want: (DomainCounts<&str>, Vec<f64>),
) {
    let names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let existing = concat(names.iter().map(|n| foos(n, 1)).collect());
    let snap = with_workloads(snapshot(nodes, existing), workloads);
    let feasible: Vec<Arc<NodeInfo>> = snap.node_infos().to_vec();
    let mut state = CycleState::new();
    let status = pl.pre_score(&mut state, &pod.info(), &snap, &feasible);
    let got = state
        .read::<Arc<PreScoreState>>(PRE_SCORE_STATE_KEY)
        .map(|s| {
            (
                s.counts.iter().map(|t| t.sorted()).collect::<Vec<_>>(),
                s.weights.clone(),
            )
        });
    let want = (
        want.0
            .into_iter()
            .map(|m| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            .collect::<DomainCounts<String>>(),
        want.1,
    );
    assert_eq!((status, got), (ok(), Some(want)));
}

#[rstest]
#[case::no_schedule_anyway_constraints(
    plugin(),
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]),
    Workloads::default()
)]
#[case::no_constraints_and_list_defaulting_without_defaults(
    plugin_with(json!({"defaultingType": "List"})),
    make_pod("p").label("foo", ""),
    Workloads::default()
)]
#[case::default_constraints_without_a_selector(
    plugin(),
    make_pod("p").label("foo", ""),
    services(vec![service("other", Some(&[("app", "db")]))])
)]
#[case::default_constraints_and_a_replica_set_that_is_not_the_owner(
    list_defaults(json!([{"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway"}])),
    owned_by(make_pod("p").label("foo", "bar"), "apps/v1", "ReplicaSet", "rs2"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("tar"))]), ..Default::default() }
)]
fn pre_score_skips(
    #[case] pl: PodTopologySpread,
    #[case] pod: PodBuilder,
    #[case] workloads: Workloads,
) {
    let snap = with_workloads(snapshot(vec![zoned("node-a", "zone1")], vec![]), workloads);
    assert_eq!(
        score_all(&pl, &pod.info(), &snap, &["node-a"]),
        (Status::skip(), vec![])
    );
}

#[test]
fn pre_score_skips_without_nodes() {
    let pod = incoming(vec![tsc(1, "zone", SOFT, exists("foo"))]).info();
    assert_eq!(
        score_all(&plugin(), &pod, &Snapshot::default(), &[]),
        (Status::skip(), vec![])
    );
}

#[test]
fn parallel_pre_score_equals_sequential() {
    let nodes: Vec<Node> = (0..1200)
        .map(|i| zoned(&format!("n{i:04}"), &format!("zone{}", i % 5)))
        .collect();
    let pods: Vec<PodBuilder> = (0..3000)
        .map(|i| foo_on(&format!("p{i}"), &format!("n{:04}", (i * 7) % 1200)))
        .collect();
    let snap = snapshot(nodes, pods);
    let pod = incoming(vec![tsc(1, "zone", SOFT, exists("foo"))]).info();
    let feasible: Vec<&str> = snap
        .node_infos()
        .iter()
        .take(300)
        .map(|n| n.name())
        .collect();
    let parallel = Handle::new(
        Parallelizer::new(4),
        Arc::new(framework::handle::NoopClient),
    );
    let sequential = score_all(&plugin(), &pod, &snap, &feasible);
    assert_eq!(
        score_all(&plugin_on(json!({}), &parallel), &pod, &snap, &feasible),
        sequential
    );
}

#[test]
fn score_without_pre_score_state_is_an_error() {
    let node = make_node("a").info_with(&[]);
    let want =
        Status::error("error reading \"PreScorePodTopologySpread\" from cycleState: not found");
    let mut scores = [NodeScore {
        node: &node,
        score: 1,
    }];
    let pod = make_pod("p").info();
    assert_eq!(
        (
            plugin().score(&CycleState::new(), &pod, &node),
            plugin().normalize_score(&CycleState::new(), &pod, &mut scores)
        ),
        (Err(want.clone()), want)
    );
}

/// Raw scores of nodes in zone `z` (or without a zone label, `None`: ignored), all of them
/// feasible (PreScore sees them).
#[rstest]
#[case::inverted_between_min_and_max(&[(3, Some("z")), (2, Some("z")), (0, Some("z")), (4, Some("z"))], &[25, 50, 100, 0])]
#[case::all_zero_scores_all_get_the_maximum(&[(0, Some("z")), (0, Some("z"))], &[100, 100])]
#[case::equal_scores_all_get_the_maximum(&[(5, Some("z")), (5, Some("z"))], &[100, 100])]
#[case::integer_division_truncates(&[(3, Some("z")), (2, Some("z")), (1, Some("z"))], &[33, 66, 100])]
#[case::ignored_nodes_get_zero_and_are_left_out_of_min_and_max(&[(3, Some("z")), (9, None), (1, Some("z"))], &[33, 0, 100])]
#[case::only_ignored_nodes(&[(3, None)], &[0])]
fn normalize_score_inverts(#[case] raw: &[(i64, Option<&str>)], #[case] want: &[i64]) {
    let pl = plugin();
    let nodes: Vec<Node> = raw
        .iter()
        .enumerate()
        .map(|(i, (_, zone))| match zone {
            Some(z) => zoned(&format!("n{i}"), z),
            None => host(&format!("n{i}")),
        })
        .collect();
    let mut state = CycleState::new();
    let snap = snapshot(nodes, vec![]);
    let pod = incoming(vec![tsc(1, "zone", SOFT, exists("foo"))]).info();
    let feasible: Vec<Arc<NodeInfo>> = (0..raw.len())
        .filter_map(|i| snap.get(&format!("n{i}")).cloned())
        .collect();
    assert_eq!(pl.pre_score(&mut state, &pod, &snap, &feasible), ok());
    let mut scores: Vec<NodeScore<'_>> = feasible
        .iter()
        .zip(raw)
        .map(|(n, &(score, _))| NodeScore { node: n, score })
        .collect();
    let status = pl.normalize_score(&state, &pod, &mut scores);
    assert_eq!(
        (status, scores.iter().map(|s| s.score).collect::<Vec<_>>()),
        (ok(), want.to_vec())
    );
}

// ---- args ----

fn defaults_of(args: &PodTopologySpreadArgs) -> (Vec<TopologySpreadConstraint>, bool) {
    let d = args.defaults();
    (d.constraints, d.system_defaulted)
}

fn system() -> (Vec<TopologySpreadConstraint>, bool) {
    (
        vec![
            tsc(3, LABEL_HOSTNAME, SOFT, None),
            tsc(5, LABEL_TOPOLOGY_ZONE, SOFT, None),
        ],
        true,
    )
}

#[rstest]
#[case::absent_args_use_system_defaults(None, system())]
#[case::empty_args_use_system_defaults(Some(json!({})), system())]
#[case::empty_defaulting_type_means_system(Some(json!({"defaultingType": ""})), system())]
#[case::explicit_system(Some(json!({"defaultingType": "System", "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "PodTopologySpreadArgs"})), system())]
#[case::list_without_constraints(Some(json!({"defaultingType": "List"})), (vec![], false))]
#[case::list_with_constraints(
    Some(json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2, "nodeTaintsPolicy": "Honor"}]})),
    (vec![TopologySpreadConstraint { min_domains: Some(2), node_taints_policy: Some("Honor".into()), ..tsc(1, "zone", HARD, None) }], false)
)]
fn args_defaults(#[case] args: Option<Value>, #[case] want: (Vec<TopologySpreadConstraint>, bool)) {
    let decoded = PodTopologySpreadArgs::decode(args.as_ref());
    assert_eq!(decoded.map(|a| defaults_of(&a)), Ok(want));
}

fn err(path: &str, message: &str) -> ArgsError {
    ArgsError::new(path, message)
}

const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

#[rstest]
#[case::unsupported_defaulting_type(
    json!({"defaultingType": "Random"}),
    vec![err("defaultingType", "Unsupported value: \"Random\": supported values: \"System\", \"List\"")]
)]
#[case::system_with_constraints(
    json!({"defaultingType": "System", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
    vec![err("defaultingType", "Invalid value: \"System\": when .defaultConstraints are not empty")]
)]
#[case::constraints_default_to_system_and_are_refused(
    json!({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
    vec![err("defaultingType", "Invalid value: \"System\": when .defaultConstraints are not empty")]
)]
#[case::max_skew_not_positive(
    json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}, {"maxSkew": -1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]}),
    vec![
        err("defaultConstraints[0].maxSkew", "Invalid value: 0: not in valid range (0, inf)"),
        err("defaultConstraints[1].maxSkew", "Invalid value: -1: not in valid range (0, inf)"),
    ]
)]
#[case::topology_key_required(
    json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}),
    vec![err("defaultConstraints[0].topologyKey", "Required value: can not be empty")]
)]
#[case::topology_key_invalid(
    json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "-zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
    vec![err("defaultConstraints[0].topologyKey", &format!("Invalid value: \"-zone\": name part {NAME_RULE}"))]
)]
#[case::when_unsatisfiable_required(
    json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]}),
    vec![err("defaultConstraints[0].whenUnsatisfiable", "Required value: can not be empty")]
)]
#[case::when_unsatisfiable_unsupported(
    json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]}),
    vec![err("defaultConstraints[0].whenUnsatisfiable", "Unsupported value: \"Sometimes\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"")]
)]
#[case::label_selector_forbidden(
    json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}),
    vec![err("defaultConstraints[0].labelSelector", "Forbidden: constraint must not define a selector, as they deduced for each pod")]
)]
#[case::duplicate_key_and_action(
    json!({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 3, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
    ]}),
    vec![err("defaultConstraints[2]", "Duplicate value: \"{zone, DoNotSchedule}\"")]
)]
#[case::every_error_in_order(
    json!({"defaultingType": "Other", "defaultConstraints": [{"maxSkew": 0, "labelSelector": {}}]}),
    vec![
        err("defaultingType", "Unsupported value: \"Other\": supported values: \"System\", \"List\""),
        err("defaultConstraints[0].maxSkew", "Invalid value: 0: not in valid range (0, inf)"),
        err("defaultConstraints[0].topologyKey", "Required value: can not be empty"),
        err("defaultConstraints[0].whenUnsatisfiable", "Required value: can not be empty"),
        err("defaultConstraints[0].labelSelector", "Forbidden: constraint must not define a selector, as they deduced for each pod"),
    ]
)]
fn args_validation(#[case] args: Value, #[case] want: Vec<ArgsError>) {
    assert_eq!(
        new(Some(&args), &Handle::offline()).map(|p| p.name()),
        Err(want)
    );
}

#[rstest]
#[case::unknown_field(json!({"bogus": 1}), "bogus")]
#[case::unknown_constraint_field(json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "bogus": 1}]}), "defaultConstraints[0].bogus")]
#[case::wrong_type(json!({"defaultConstraints": [{"maxSkew": "one"}]}), "defaultConstraints[0].maxSkew")]
fn args_decoding_errors_name_the_field(#[case] args: Value, #[case] want_path: &str) {
    let got = new(Some(&args), &Handle::offline())
        .map(|p| p.name())
        .map_err(|errs| errs.into_iter().map(|e| e.path).collect::<Vec<_>>());
    assert_eq!(got, Err(vec![want_path.to_string()]));
}

#[test]
fn valid_args_build_the_plugin() {
    let args = json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]});
    assert_eq!(
        new(Some(&args), &Handle::offline()).map(|p| p.name()),
        Ok(NAME)
    );
}

// ---- events and queueing hints ----

#[test]
fn registers_pod_and_node_events_with_hints() {
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
                    ActionType::ADD
                        | ActionType::UPDATE_POD_LABEL
                        | ActionType::UPDATE_POD_TOLERATIONS
                        | ActionType::DELETE
                ),
                true
            ),
            (
                ClusterEvent::new(
                    EventResource::Node,
                    ActionType::ADD
                        | ActionType::DELETE
                        | ActionType::UPDATE_NODE_LABEL
                        | ActionType::UPDATE_NODE_TAINT
                ),
                true
            ),
        ]
    );
}

fn pod_obj(b: PodBuilder) -> EventObject {
    EventObject::Pod(Arc::new(b.obj()))
}

fn node_obj(n: Node) -> EventObject {
    EventObject::Node(Arc::new(n))
}

/// Calls `pl`'s hint registered for `resource`.
fn hint(
    pl: &PodTopologySpread,
    resource: EventResource,
    pod: &Pod,
    old: Option<EventObject>,
    new: Option<EventObject>,
) -> Result<QueueingHint, String> {
    let events = pl.events_to_register();
    let Some(f) = events
        .iter()
        .find(|e| e.event.resource == resource)
        .and_then(|e| e.hint.clone())
    else {
        return Err(format!("no hint registered for {resource:?}"));
    };
    f(pod, old.as_ref(), new.as_ref())
}

/// The pending pod: hard zone constraint on `foo`.
fn pending() -> PodBuilder {
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))])
}

fn pending_honoring_taints() -> PodBuilder {
    incoming(vec![TopologySpreadConstraint {
        node_taints_policy: Some("Honor".into()),
        ..tsc(1, "zone", HARD, exists("foo"))
    }])
}

#[rstest]
#[case::assigned_matching_pod_added(
    pending(),
    None,
    Some(pod_obj(foo_on("q", "a"))),
    Ok(QueueingHint::Queue)
)]
#[case::assigned_pod_not_matching_added(pending(), None, Some(pod_obj(make_pod("q").node("a"))), Ok(QueueingHint::QueueSkip))]
#[case::unscheduled_pod_added(pending(), None, Some(pod_obj(make_pod("q").label("foo", ""))), Ok(QueueingHint::QueueSkip))]
#[case::pod_of_another_namespace_added(pending(), None, Some(pod_obj(foo_on("q", "a").namespace("other"))), Ok(QueueingHint::QueueSkip))]
#[case::assigned_matching_pod_deleted(
    pending(),
    Some(pod_obj(foo_on("q", "a"))),
    None,
    Ok(QueueingHint::Queue)
)]
#[case::assigned_pod_not_matching_deleted(pending(), Some(pod_obj(make_pod("q").node("a"))), None, Ok(QueueingHint::QueueSkip))]
#[case::label_update_into_the_selector(pending(), Some(pod_obj(make_pod("q").node("a"))), Some(pod_obj(foo_on("q", "a"))), Ok(QueueingHint::Queue))]
#[case::label_update_out_of_the_selector(pending(), Some(pod_obj(foo_on("q", "a"))), Some(pod_obj(make_pod("q").node("a").label("bar", ""))), Ok(QueueingHint::Queue))]
#[case::label_update_unrelated_to_the_selector(pending(), Some(pod_obj(foo_on("q", "a"))), Some(pod_obj(foo_on("q", "a").label("bar", ""))), Ok(QueueingHint::QueueSkip))]
#[case::update_without_label_change(pending(), Some(pod_obj(foo_on("q", "a"))), Some(pod_obj(foo_on("q", "a").priority(3))), Ok(QueueingHint::QueueSkip))]
#[case::pending_pod_tolerates_more_and_taints_are_honored(
    pending_honoring_taints(),
    Some(pod_obj(pending_honoring_taints())),
    Some(pod_obj(pending_honoring_taints().toleration("dedicated", "Exists", "", "NoSchedule"))),
    Ok(QueueingHint::Queue)
)]
#[case::pending_pod_tolerates_more_and_taints_are_ignored(
    pending(),
    Some(pod_obj(pending())),
    Some(pod_obj(pending().toleration("dedicated", "Exists", "", "NoSchedule"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::pod_without_constraints_system_defaults(make_pod("p").label("foo", ""), None, Some(pod_obj(foo_on("q", "a"))), Ok(QueueingHint::QueueSkip))]
#[case::not_a_pod(pending(), None, Some(node_obj(host("n"))), Err("expected Pod, but got Node".to_string()))]
fn pod_change_hint(
    #[case] pod: PodBuilder,
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        hint(&plugin(), EventResource::Pod, &pod.obj(), old, new),
        want
    );
}

#[test]
fn pod_hint_queues_when_default_constraints_need_workloads() {
    let pl = list_defaults(
        json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
    );
    let pod = make_pod("p").label("foo", "").obj();
    assert_eq!(
        hint(
            &pl,
            EventResource::Pod,
            &pod,
            None,
            Some(pod_obj(make_pod("q").node("a")))
        ),
        Ok(QueueingHint::Queue)
    );
}

fn tainted(n: Node) -> Node {
    with_taint(n, "dedicated", "NoSchedule")
}

#[rstest]
#[case::node_with_the_key_added(None, Some(zoned("n", "z1")), Ok(QueueingHint::Queue))]
#[case::node_without_the_key_added(None, Some(host("n")), Ok(QueueingHint::QueueSkip))]
#[case::node_with_the_key_deleted(Some(zoned("n", "z1")), None, Ok(QueueingHint::Queue))]
#[case::node_without_the_key_deleted(Some(host("n")), None, Ok(QueueingHint::QueueSkip))]
#[case::node_gains_the_key(Some(host("n")), Some(zoned("n", "z1")), Ok(QueueingHint::Queue))]
#[case::node_loses_the_key(Some(zoned("n", "z1")), Some(host("n")), Ok(QueueingHint::Queue))]
#[case::node_changes_zone(
    Some(zoned("n", "z1")),
    Some(zoned("n", "z2")),
    Ok(QueueingHint::Queue)
)]
#[case::node_changes_taints(
    Some(zoned("n", "z1")),
    Some(tainted(zoned("n", "z1"))),
    Ok(QueueingHint::Queue)
)]
#[case::node_without_the_key_changes_taints(
    Some(host("n")),
    Some(tainted(host("n"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::unrelated_label_change(Some(zoned("n", "z1")), Some(node("n", &[("zone", "z1"), ("disk", "ssd")])), Ok(QueueingHint::QueueSkip))]
#[case::no_object(None, None, Err("expected Node, but got nothing".to_string()))]
fn node_change_hint(
    #[case] old: Option<Node>,
    #[case] new: Option<Node>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        hint(
            &plugin(),
            EventResource::Node,
            &pending().obj(),
            old.map(node_obj),
            new.map(node_obj)
        ),
        want
    );
}

#[test]
fn node_hint_rejects_a_pod_object() {
    assert_eq!(
        hint(
            &plugin(),
            EventResource::Node,
            &pending().obj(),
            None,
            Some(pod_obj(make_pod("q")))
        ),
        Err("expected Node, but got Pod".to_string())
    );
}

#[test]
fn node_hint_for_a_pod_without_hard_constraints_queues_every_node() {
    assert_eq!(
        hint(
            &plugin(),
            EventResource::Node,
            &make_pod("p").obj(),
            None,
            Some(node_obj(host("n")))
        ),
        Ok(QueueingHint::Queue)
    );
}

/// Each node's Filter status, by node name.
type NodeStatuses = Vec<(String, Status)>;

/// Filter on every node of `snap` twice: by the domain ids of the rows' positions
/// (`filter_with_row`, as the runtime calls it) and by the nodes' labels (`filter`).
fn filter_by_ids_and_by_labels(
    pl: &PodTopologySpread,
    state: &CycleState,
    pod: &PodInfo,
    snap: &Snapshot,
) -> (NodeStatuses, NodeStatuses) {
    let mut by_ids: Vec<(String, Status)> = snap
        .node_infos()
        .iter()
        .zip(snap.rows())
        .map(|(n, row)| (n.name().to_string(), pl.filter_with_row(state, pod, n, row)))
        .collect();
    // The runtime's filter pass decides a run of rows at once, the state read once.
    let in_one_run = framework::testing::filter_rows_of(pl, state, pod, snap);
    assert_eq!(
        in_one_run,
        by_ids.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>()
    );
    by_ids.sort_by(|a, b| a.0.cmp(&b.0));
    (by_ids, filter_each(pl, state, pod, snap))
}

/// Which nodes the id path decides without falling back to the labels, per constraint.
fn decided_by_ids(state: &CycleState, snap: &Snapshot) -> Vec<(String, Vec<bool>)> {
    let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
        return Vec::new();
    };
    snap.node_infos()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let columns = (0..s.constraints.len())
                .map(|c| s.node_domains.domain(i, c).is_some())
                .collect();
            (n.name().to_string(), columns)
        })
        .collect()
}

/// Nodes in zones zone1 (a, b), zone2 (x, y) and zone3 (c, tainted), a node without a
/// zone label (bare) and one the pods' node selector leaves out (hdd); matching pods
/// spread unevenly.
fn id_fixture() -> Snapshot {
    snapshot(
        vec![
            node(
                "a",
                &[("zone", "zone1"), (LABEL_HOSTNAME, "a"), ("disk", "ssd")],
            ),
            node(
                "b",
                &[("zone", "zone1"), (LABEL_HOSTNAME, "b"), ("disk", "ssd")],
            ),
            node(
                "x",
                &[("zone", "zone2"), (LABEL_HOSTNAME, "x"), ("disk", "ssd")],
            ),
            node(
                "y",
                &[("zone", "zone2"), (LABEL_HOSTNAME, "y"), ("disk", "ssd")],
            ),
            with_taint(
                node(
                    "c",
                    &[("zone", "zone3"), (LABEL_HOSTNAME, "c"), ("disk", "ssd")],
                ),
                "dedicated",
                "NoSchedule",
            ),
            node("bare", &[(LABEL_HOSTNAME, "bare"), ("disk", "ssd")]),
            node(
                "hdd",
                &[("zone", "zone2"), (LABEL_HOSTNAME, "hdd"), ("disk", "hdd")],
            ),
        ],
        vec![
            foo_on("a1", "a"),
            foo_on("a2", "a"),
            foo_on("b1", "b"),
            foo_on("x1", "x"),
            foo_on("h1", "hdd"),
            foo_on("h2", "hdd"),
        ],
    )
}

#[rstest]
#[case::zone_and_hostname(incoming(vec![
    tsc(1, "zone", HARD, exists("foo")),
    tsc(1, LABEL_HOSTNAME, HARD, exists("foo")),
]))]
#[case::node_selector_leaves_out_a_node(
    incoming(vec![tsc(1, "zone", HARD, exists("foo"))]).node_selector("disk", "ssd")
)]
#[case::taints_honored(incoming(vec![TopologySpreadConstraint {
    node_taints_policy: Some("Honor".into()),
    ..tsc(1, "zone", HARD, exists("foo"))
}]))]
#[case::min_domains_unmet(incoming(vec![TopologySpreadConstraint {
    min_domains: Some(5),
    ..tsc(2, "zone", HARD, exists("foo"))
}]))]
fn filter_by_domain_ids_decides_as_by_labels(#[case] pod: PodBuilder) {
    let pl = plugin();
    let snap = id_fixture();
    let pod = pod.info();
    let state = prefiltered(&pl, &pod, &snap);
    let fresh = filter_by_ids_and_by_labels(&pl, &state, &pod, &snap);
    // Preemption's view: a matching pod added on y, then one removed from a.
    let mut added = state.clone();
    let y = snap.get("y").cloned();
    let a = snap.get("a").cloned();
    let add = y.map(|n| pl.add_pod(&mut added, &pod, &foo_on("new", "y").info(), &n));
    let after_add = filter_by_ids_and_by_labels(&pl, &added, &pod, &snap);
    let mut removed = added.clone();
    let remove = a.map(|n| pl.remove_pod(&mut removed, &pod, &foo_on("a1", "a").info(), &n));
    let after_remove = filter_by_ids_and_by_labels(&pl, &removed, &pod, &snap);
    assert_eq!(
        (add, remove, fresh.0, after_add.0, after_remove.0),
        (Some(ok()), Some(ok()), fresh.1, after_add.1, after_remove.1)
    );
}

/// The id path is taken for every node that counted for a domain, and only for those.
#[test]
fn only_nodes_without_a_domain_fall_back_to_labels() {
    let pl = plugin();
    let snap = id_fixture();
    let pod = incoming(vec![
        tsc(1, "zone", HARD, exists("foo")),
        tsc(1, LABEL_HOSTNAME, HARD, exists("foo")),
    ])
    .node_selector("disk", "ssd")
    .info();
    let state = prefiltered(&pl, &pod, &snap);
    let mut decided = decided_by_ids(&state, &snap);
    decided.sort();
    let both = vec![true, true];
    let neither = vec![false, false];
    assert_eq!(
        decided,
        vec![
            ("a".to_string(), both.clone()),
            ("b".to_string(), both.clone()),
            ("bare".to_string(), neither.clone()),
            ("c".to_string(), both.clone()),
            ("hdd".to_string(), neither),
            ("x".to_string(), both.clone()),
            ("y".to_string(), both),
        ]
    );
}

/// Step `step` of the churn the id tests run between cycles: a pod placed (two steps in
/// four), the pod of two steps before removed, or a node leaving (positions shift) or
/// coming back.
fn change_snapshot(snap: &mut Snapshot, step: usize) {
    let node = format!("n{:02}", (step * 5) % 12);
    let name = format!("q{step}");
    match step % 4 {
        0 | 1 => {
            snap.assume_pod(foo_on(&name, &node).info(), &node);
        }
        2 => {
            snap.remove_pod(
                &format!("uid-q{}", step - 2),
                &format!("n{:02}", ((step - 2) * 5) % 12),
            );
        }
        _ => {
            let mut list = snap.node_infos().to_vec();
            if step % 8 == 3 {
                list.remove(step % list.len());
            } else {
                list.push(Arc::new(NodeInfo::new(Arc::new(zoned(
                    &format!("m{step}"),
                    "zone1",
                )))));
            }
            snap.set_node_infos(list);
        }
    }
}

/// One plugin kept across cycles decides by ids as by labels while pods land, leave and
/// nodes come and go (the counts refreshed for the changed nodes, or recounted).
#[test]
fn filter_by_domain_ids_follows_the_snapshot_across_cycles() {
    let nodes = (0..12)
        .map(|i| zoned(&format!("n{i:02}"), &format!("zone{}", i % 3)))
        .collect();
    let mut snap = snapshot(nodes, vec![foo_on("p0", "n00"), foo_on("p1", "n04")]);
    let pod = incoming(vec![
        tsc(1, "zone", HARD, exists("foo")),
        tsc(2, LABEL_HOSTNAME, HARD, exists("foo")),
    ])
    .info();
    let pl = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for step in 0..24_usize {
        let state = prefiltered(&pl, &pod, &snap);
        let (by_ids, by_labels) = filter_by_ids_and_by_labels(&pl, &state, &pod, &snap);
        got.push(by_ids);
        want.push(by_labels);
        change_snapshot(&mut snap, step);
    }
    assert_eq!(got, want);
}

/// Raw and normalized scores, by node name.
type ScoreRun = (Status, Vec<(String, i64)>, Vec<(String, i64)>);

/// PreScore, Score and NormalizeScore over the nodes named `feasible` (in that order),
/// twice: with the snapshot's own nodes and their rows (PreScore finds their positions,
/// `score_rows` reads the domain ids, as the runtime calls it) and with copies of the nodes
/// (no position: labels, `score`).
fn scores_by_ids_and_by_labels(
    pl: &PodTopologySpread,
    pod: &PodInfo,
    snap: &Snapshot,
    feasible: &[String],
) -> (ScoreRun, ScoreRun) {
    let own: Vec<(Arc<NodeInfo>, NodeRow)> = feasible
        .iter()
        .filter_map(|n| {
            let i = snap.position(n)?;
            Some((snap.node_infos().get(i)?.clone(), *snap.rows().get(i)?))
        })
        .collect();
    let nodes: Vec<Arc<NodeInfo>> = own.iter().map(|(n, _)| n.clone()).collect();
    let rows: Vec<NodeRow> = own.iter().map(|(_, r)| *r).collect();
    let copies: Vec<Arc<NodeInfo>> = nodes.iter().map(|n| Arc::new((**n).clone())).collect();
    let run = |nodes: &[Arc<NodeInfo>], by_ids: bool| -> ScoreRun {
        let mut state = CycleState::new();
        let status = pl.pre_score(&mut state, pod, snap, nodes);
        if !status.is_success() {
            return (status, Vec::new(), Vec::new());
        }
        let mut raw = vec![0; nodes.len()];
        let scored = if by_ids {
            pl.score_rows(&state, pod, nodes, &rows, &mut raw)
        } else {
            nodes
                .iter()
                .zip(raw.iter_mut())
                .try_for_each(|(n, o)| pl.score(&state, pod, n).map(|s| *o = s))
        };
        if let Err(e) = scored {
            return (e, Vec::new(), Vec::new());
        }
        let mut scores: Vec<NodeScore<'_>> = nodes
            .iter()
            .zip(&raw)
            .map(|(n, &score)| NodeScore { node: n, score })
            .collect();
        let status = pl.normalize_score(&state, pod, &mut scores);
        let named = |v: Vec<(&str, i64)>| v.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
        (
            status,
            named(
                nodes
                    .iter()
                    .map(|n| n.name())
                    .zip(raw.iter().copied())
                    .collect(),
            ),
            named(scores.iter().map(|s| (s.name(), s.score)).collect()),
        )
    };
    (run(&nodes, true), run(&copies, false))
}

/// `snap` with the `zone` label of its nodes renamed to the well-known zone key (the one
/// system default spreading uses).
fn with_standard_zones(snap: Snapshot) -> Snapshot {
    let nodes = snap
        .node_infos()
        .iter()
        .map(|n| {
            let mut node = n.node().clone();
            if let Some(labels) = node.metadata.labels.as_mut() {
                if let Some(zone) = labels.remove("zone") {
                    labels.insert(LABEL_TOPOLOGY_ZONE.to_string(), zone);
                }
            }
            Arc::new(node)
        })
        .collect();
    let pods: Vec<Arc<PodInfo>> = snap
        .node_infos()
        .iter()
        .flat_map(|n| n.pods.iter().cloned())
        .collect();
    Snapshot::new(nodes, pods)
}

/// The snapshot's node names from position `start` on, wrapping, every `step`-th: a
/// feasible list as the runtime makes it (a rotating start, nodes left out).
fn rotated(snap: &Snapshot, start: usize, step: usize) -> Vec<String> {
    let all = snap.node_infos();
    (0..all.len())
        .map(|i| (start + i) % all.len())
        .filter(|i| i % step.max(1) == 0 || *i == start)
        .filter_map(|i| all.get(i).map(|n| n.name().to_string()))
        .collect()
}

#[rstest]
#[case::zone_and_hostname(
    plugin(),
    spread(make_pod("p").label("foo", ""), vec![
        tsc(1, "zone", SOFT, exists("foo")),
        tsc(2, LABEL_HOSTNAME, SOFT, exists("foo")),
    ]),
    Workloads::default(),
    id_fixture()
)]
#[case::node_selector_leaves_out_a_node(
    plugin(),
    spread(make_pod("p").label("foo", ""), vec![tsc(1, "zone", SOFT, exists("foo"))])
        .node_selector("disk", "ssd"),
    Workloads::default(),
    id_fixture()
)]
#[case::taints_honored(
    plugin(),
    spread(make_pod("p").label("foo", ""), vec![TopologySpreadConstraint {
        node_taints_policy: Some("Honor".into()),
        ..tsc(1, "zone", SOFT, exists("foo"))
    }]),
    Workloads::default(),
    id_fixture()
)]
#[case::system_defaults_with_a_node_without_a_zone(
    plugin(),
    owned_by(make_pod("p").label("foo", "tar"), "apps/v1", "ReplicaSet", "rs1"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]), ..Default::default() },
    with_standard_zones(id_fixture())
)]
#[case::system_defaults_without_zone_labels(
    plugin(),
    owned_by(make_pod("p").label("foo", "tar"), "apps/v1", "ReplicaSet", "rs1"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]), ..Default::default() },
    id_fixture()
)]
#[case::list_defaults_requiring_every_key(
    list_defaults(json!([
        {"maxSkew": 1, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
    ])),
    owned_by(make_pod("p").label("foo", "tar"), "apps/v1", "ReplicaSet", "rs1"),
    Workloads { replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]), ..Default::default() },
    id_fixture()
)]
fn score_by_domain_ids_equals_score_by_labels(
    #[case] pl: PodTopologySpread,
    #[case] pod: PodBuilder,
    #[case] workloads: Workloads,
    #[case] fixture: Snapshot,
) {
    let snap = with_workloads(fixture, workloads);
    let pod = pod.info();
    let runs: Vec<(ScoreRun, ScoreRun)> = [(0, 1), (3, 1), (5, 2)]
        .iter()
        .map(|&(start, step)| {
            scores_by_ids_and_by_labels(&pl, &pod, &snap, &rotated(&snap, start, step))
        })
        .collect();
    let (by_ids, by_labels): (Vec<ScoreRun>, Vec<ScoreRun>) = runs.into_iter().unzip();
    assert_eq!(by_ids, by_labels);
    // The fixture's matching pods make the scores differ between nodes.
    assert!(by_ids
        .iter()
        .any(|(_, raw, _)| raw.iter().any(|(_, s)| *s != raw[0].1)));
}

/// One plugin kept across cycles scores by ids as by labels while pods land and leave and
/// nodes come and go (the counts refreshed for the changed nodes, or recounted), for the
/// pod's own constraints and for system defaults.
#[test]
fn score_by_domain_ids_follows_the_snapshot_across_cycles() {
    let nodes = (0..12)
        .map(|i| {
            if i == 7 {
                host("n07")
            } else {
                zoned(&format!("n{i:02}"), &format!("zone{}", i % 3))
            }
        })
        .collect();
    let workloads = Workloads {
        replica_sets: in_default(vec![replica_set("rs1", exists("foo"))]),
        ..Default::default()
    };
    let mut snap = with_workloads(
        snapshot(nodes, vec![foo_on("p0", "n00"), foo_on("p1", "n04")]),
        workloads.clone(),
    );
    let own = spread(
        make_pod("s").label("foo", ""),
        vec![
            tsc(1, "zone", SOFT, exists("foo")),
            tsc(2, LABEL_HOSTNAME, SOFT, exists("foo")),
        ],
    )
    .info();
    let defaulted = owned_by(
        make_pod("d").label("foo", "tar"),
        "apps/v1",
        "ReplicaSet",
        "rs1",
    )
    .info();
    let pl = plugin();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    for step in 0..24_usize {
        for pod in [&own, &defaulted] {
            let feasible = rotated(&snap, step * 7, 1 + step % 3);
            let (by_ids, by_labels) = scores_by_ids_and_by_labels(&pl, pod, &snap, &feasible);
            got.push(by_ids);
            want.push(by_labels);
        }
        change_snapshot(&mut snap, step);
    }
    assert_eq!(got, want);
}

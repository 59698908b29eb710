use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::types::{namespaced_name, HostPort, ImageStateSummary};
use framework::{NodeInfo, PodKey, Resource, Snapshot};
use k8s_openapi::api::core::v1::{
    Affinity, Node, Pod, PodAffinityTerm, PodAntiAffinity, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rstest::rstest;

use super::*;
use crate::clock::FakeClock;

fn cache(ttl_secs: u64) -> (Cache, FakeClock) {
    let clock = FakeClock::new();
    (
        Cache::new(Duration::from_secs(ttl_secs), Arc::new(clock.clone())),
        clock,
    )
}

fn node(name: &str) -> Arc<Node> {
    Arc::new(
        make_node(name)
            .capacity(&[("cpu", "4"), ("pods", "110")])
            .obj(),
    )
}

fn zoned(name: &str, zone: &str) -> Arc<Node> {
    Arc::new(
        make_node(name)
            .label("topology.kubernetes.io/zone", zone)
            .obj(),
    )
}

fn pod(name: &str, node: &str) -> Arc<Pod> {
    Arc::new(make_pod(name).req(&[("cpu", "100m")]).node(node).obj())
}

fn info(name: &str, node: &str) -> Arc<PodInfo> {
    make_pod(name).req(&[("cpu", "100m")]).node(node).info()
}

fn terminal(p: PodBuilder, phase: &str) -> Arc<Pod> {
    let phase = phase.to_string();
    Arc::new(
        p.with(|p| {
            p.status = Some(PodStatus {
                phase: Some(phase),
                ..Default::default()
            })
        })
        .obj(),
    )
}

/// `(node, has node object, pod keys)` rows of the dump.
fn nodes_of(c: &Cache) -> Vec<(String, bool, Vec<String>)> {
    c.dump().nodes
}

fn row(n: &str, has: bool, pods: &[&str]) -> (String, bool, Vec<String>) {
    (
        n.to_string(),
        has,
        pods.iter().map(|p| format!("default/{p}")).collect(),
    )
}

fn snap_names(s: &Snapshot) -> Vec<String> {
    s.node_infos()
        .iter()
        .map(|n| n.name().to_string())
        .collect()
}

#[test]
fn assume_finish_binding_then_add_confirms() {
    let (mut c, _) = cache(30);
    c.add_node(node("n1"));
    c.assume_pod(info("web-1", "n1")).unwrap();
    assert!(c.is_assumed_pod("uid-web-1"));
    c.finish_binding("uid-web-1").unwrap();
    c.add_pod(pod("web-1", "n1")).unwrap();
    assert_eq!(
        (
            c.is_assumed_pod("uid-web-1"),
            c.pod_count(),
            c.assumed_pod_count(),
            nodes_of(&c)
        ),
        (false, 1, 0, vec![row("n1", true, &["web-1"])])
    );
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    assert_eq!(s.get("n1").map(|n| n.requested.milli_cpu), Some(100));
    // Once confirmed, it can no longer be forgotten or assumed again.
    assert_eq!(
        (c.forget_pod("uid-web-1"), c.assume_pod(info("web-1", "n1"))),
        (
            Err(CacheError::NotAssumed {
                pod: "default/web-1".into()
            }),
            Err(CacheError::AlreadyAdded {
                pod: "default/web-1".into(),
                node: "n1".into()
            })
        )
    );
}

/// Confirming an assumed pod puts the API server's object on the node in the assumed copy's
/// place (a new NodeInfo for the snapshot), and the node's sums follow the confirmed spec.
#[rstest]
#[case::same_spec(make_pod("web-1").req(&[("cpu", "100m")]).node("n1"), 100)]
#[case::changed_spec(make_pod("web-1").req(&[("cpu", "300m")]).node("n1"), 300)]
fn confirmation_of_an_assumed_pod(#[case] confirmed: PodBuilder, #[case] want_milli_cpu: i64) {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.assume_pod(info("web-1", "n1")).unwrap();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    let before = s.get("n1").cloned().unwrap();
    let confirmed = Arc::new(confirmed.obj());
    c.add_pod(confirmed.clone()).unwrap();
    c.update_snapshot(&mut s);
    let after = s.get("n1").cloned().unwrap();
    let holds = |n: &NodeInfo| n.pods.first().map(|p| Arc::ptr_eq(&p.pod, &confirmed));
    assert_eq!(
        (
            Arc::ptr_eq(&before, &after),
            holds(&before),
            holds(&after),
            after.pods.len(),
            after.requested.milli_cpu,
            c.is_assumed_pod("uid-web-1"),
            c.get_pod("uid-web-1")
                .map(|p| Arc::ptr_eq(&p.pod, &confirmed)),
            nodes_of(&c),
        ),
        (
            false,
            Some(false),
            Some(true),
            1,
            want_milli_cpu,
            false,
            Some(true),
            vec![row("n1", true, &["web-1"])]
        )
    );
}

#[test]
fn assume_then_forget_frees_the_node() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.assume_pod(info("web-1", "n1")).unwrap();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    assert_eq!(s.get("n1").map(|n| n.pods.len()), Some(1));
    c.forget_pod("uid-web-1").unwrap();
    c.update_snapshot(&mut s);
    assert_eq!(
        (
            s.get("n1").map(|n| (n.pods.len(), n.requested.milli_cpu)),
            c.pod_count(),
            c.forget_pod("uid-web-1")
        ),
        (
            Some((0, 0)),
            0,
            Err(CacheError::PodNotFound {
                uid: "uid-web-1".into()
            })
        )
    );
}

#[test]
fn errors_name_the_pod() {
    let (mut c, _) = cache(0);
    c.assume_pod(info("web-1", "n3")).unwrap();
    let errs: Vec<String> = [
        c.assume_pod(info("web-1", "n3")),
        c.assume_pod(make_pod("nowhere").info()),
        c.update_pod(&pod("web-1", "n3"), pod("web-1", "n3")),
        c.finish_binding("uid-missing"),
        c.remove_node(&node("n9")),
    ]
    .into_iter()
    .map(|r| r.map_or_else(|e| e.to_string(), |()| "ok".into()))
    .collect();
    assert_eq!(
        errs,
        vec![
            "pod default/web-1 is already assumed on node n3",
            "pod default/nowhere has no node name",
            "assumed pod default/web-1 cannot be updated before its add event",
            "pod with uid uid-missing is not in the cache",
            "node n9 is not in the cache",
        ]
    );
}

#[rstest]
#[case::not_yet_expired(30, true, 29, 1)]
#[case::expired_after_ttl(30, true, 31, 0)]
#[case::binding_not_finished_never_expires(30, false, 3600, 1)]
#[case::zero_ttl_never_expires(0, true, 3600, 1)]
fn assumed_pod_expiry(
    #[case] ttl: u64,
    #[case] finish: bool,
    #[case] advance: u64,
    #[case] pods_left: usize,
) {
    let (mut c, clock) = cache(ttl);
    c.add_node(node("n1"));
    c.assume_pod(info("web-1", "n1")).unwrap();
    if finish {
        c.finish_binding("uid-web-1").unwrap();
    }
    clock.advance(Duration::from_secs(advance));
    let expired: Vec<String> = c
        .cleanup_assumed_pods()
        .iter()
        .map(|p| p.key.clone())
        .collect();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    assert_eq!(
        (
            expired.len(),
            c.pod_count(),
            s.get("n1").map(|n| n.pods.len())
        ),
        (1 - pods_left, pods_left, Some(pods_left))
    );
}

#[test]
fn expired_pod_comes_back_with_its_add_event() {
    let (mut c, clock) = cache(10);
    c.add_node(node("n1"));
    c.assume_pod(info("web-1", "n1")).unwrap();
    c.finish_binding("uid-web-1").unwrap();
    clock.advance(Duration::from_secs(11));
    assert_eq!(c.cleanup_assumed_pods().len(), 1);
    c.add_pod(pod("web-1", "n1")).unwrap();
    assert_eq!(nodes_of(&c), vec![row("n1", true, &["web-1"])]);
}

#[test]
fn assumed_pod_confirmed_on_another_node_moves() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.add_node(node("n2"));
    c.assume_pod(info("web-1", "n1")).unwrap();
    c.add_pod(pod("web-1", "n2")).unwrap();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    assert_eq!(
        (
            nodes_of(&c),
            s.get("n1").map(|n| n.requested.milli_cpu),
            s.get("n2").map(|n| n.requested.milli_cpu),
            c.is_assumed_pod("uid-web-1"),
        ),
        (
            vec![row("n1", true, &[]), row("n2", true, &["web-1"])],
            Some(0),
            Some(100),
            false
        )
    );
}

#[test]
fn pods_before_their_node_are_kept_and_shown_once_it_arrives() {
    let (mut c, _) = cache(0);
    c.add_pod(pod("web-1", "late")).unwrap();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    assert_eq!(
        (nodes_of(&c), snap_names(&s), c.node_count()),
        (vec![row("late", false, &["web-1"])], vec![], 0)
    );
    c.add_node(node("late"));
    c.update_snapshot(&mut s);
    assert_eq!(
        (
            snap_names(&s),
            s.get("late")
                .map(|n| (n.pods.len(), n.allocatable.milli_cpu))
        ),
        (vec!["late".to_string()], Some((1, 4000)))
    );
}

#[test]
fn removed_node_keeps_its_pods_until_they_go() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.add_node(node("n2"));
    c.add_pod(pod("web-1", "n1")).unwrap();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    c.remove_node(&node("n1")).unwrap();
    c.update_snapshot(&mut s);
    assert_eq!(
        (nodes_of(&c), snap_names(&s), c.node_count()),
        (
            vec![row("n1", false, &["web-1"]), row("n2", true, &[])],
            vec!["n2".to_string()],
            1
        )
    );
    c.remove_pod(&pod("web-1", "n1")).unwrap();
    c.update_snapshot(&mut s);
    assert_eq!(
        (nodes_of(&c), snap_names(&s), c.pod_count()),
        (vec![row("n2", true, &[])], vec!["n2".to_string()], 0)
    );
}

#[test]
fn terminal_pods_are_not_counted() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.add_pod(terminal(make_pod("done").node("n1"), "Succeeded"))
        .unwrap();
    c.add_pod(pod("web-1", "n1")).unwrap();
    c.update_pod(
        &pod("web-1", "n1"),
        terminal(make_pod("web-1").node("n1"), "Failed"),
    )
    .unwrap();
    assert_eq!(
        (nodes_of(&c), c.pod_count()),
        (vec![row("n1", true, &[])], 0)
    );
}

#[test]
fn unknown_update_adds_and_unknown_delete_changes_nothing() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.update_pod(&pod("web-1", "n1"), pod("web-1", "n1"))
        .unwrap();
    let before = c.dump();
    let err = c.remove_pod(&pod("ghost", "n1"));
    assert_eq!(
        (before.clone(), err, c.dump()),
        (
            CacheDump {
                nodes: vec![row("n1", true, &["web-1"])],
                assumed_pods: vec![],
            },
            Err(CacheError::PodNotFound {
                uid: "uid-ghost".into()
            }),
            before
        )
    );
}

#[test]
fn pod_update_changes_requests() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.add_pod(pod("web-1", "n1")).unwrap();
    let bigger = Arc::new(make_pod("web-1").req(&[("cpu", "1")]).node("n1").obj());
    c.update_pod(&pod("web-1", "n1"), bigger).unwrap();
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    assert_eq!(
        s.get("n1").map(|n| (n.pods.len(), n.requested.milli_cpu)),
        Some((1, 1000))
    );
}

enum Op {
    Add(&'static str, &'static str),
    Update(&'static str, &'static str),
    Remove(&'static str),
}

#[rstest]
#[case::zones_interleave(
    vec![Op::Add("a1", "a"), Op::Add("a2", "a"), Op::Add("b1", "b"), Op::Add("c1", "c"), Op::Add("a3", "a"), Op::Add("c2", "c")],
    vec!["a1", "b1", "c1", "a2", "c2", "a3"],
)]
#[case::removing_keeps_order_within_zone(
    vec![Op::Add("a1", "a"), Op::Add("a2", "a"), Op::Add("a3", "a"), Op::Add("b1", "b"), Op::Remove("a1")],
    vec!["a2", "b1", "a3"],
)]
#[case::emptied_zone_is_dropped_and_comes_back_last(
    vec![Op::Add("a1", "a"), Op::Add("b1", "b"), Op::Add("c1", "c"), Op::Remove("a1"), Op::Add("a2", "a")],
    vec!["b1", "c1", "a2"],
)]
#[case::zone_change_moves_the_node(
    vec![Op::Add("a1", "a"), Op::Add("a2", "a"), Op::Add("b1", "b"), Op::Update("a1", "b")],
    vec!["a2", "b1", "a1"],
)]
#[case::re_add_in_same_zone_is_a_no_op(
    vec![Op::Add("a1", "a"), Op::Add("a2", "a"), Op::Add("a1", "a")],
    vec!["a1", "a2"],
)]
fn node_tree_lists_zones_round_robin(#[case] ops: Vec<Op>, #[case] want: Vec<&str>) {
    let (mut c, _) = cache(0);
    let mut s = Snapshot::default();
    for op in ops {
        match op {
            Op::Add(n, z) => c.add_node(zoned(n, z)),
            Op::Update(n, z) => c.update_node(&zoned(n, "?"), zoned(n, z)),
            Op::Remove(n) => c.remove_node(&zoned(n, "?")).unwrap(),
        }
        // Update after every step so that the incremental path is what is checked.
        c.update_snapshot(&mut s);
    }
    assert_eq!(
        (c.node_tree_list(), snap_names(&s)),
        (
            want.clone(),
            want.iter().map(|n| n.to_string()).collect::<Vec<_>>()
        )
    );
}

#[test]
fn update_snapshot_hands_over_only_changed_nodes() {
    let (mut c, _) = cache(0);
    for n in ["n1", "n2", "n3"] {
        c.add_node(node(n));
    }
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    let before = s.clone();
    c.add_pod(pod("web-1", "n2")).unwrap();
    c.update_snapshot(&mut s);
    let same: Vec<bool> = before
        .node_infos()
        .iter()
        .zip(s.node_infos())
        .map(|(a, b)| Arc::ptr_eq(a, b))
        .collect();
    assert_eq!(same, vec![true, false, true]);
    // The old snapshot still sees n2 as it was: the cache copied instead of writing.
    assert_eq!(
        (
            before.get("n2").map(|n| n.pods.len()),
            s.get("n2").map(|n| n.pods.len())
        ),
        (Some(0), Some(1))
    );
    // Nothing changed: nothing is handed over.
    let again = s.clone();
    c.update_snapshot(&mut s);
    assert!(again
        .node_infos()
        .iter()
        .zip(s.node_infos())
        .all(|(a, b)| Arc::ptr_eq(a, b)));
}

#[test]
fn image_states_count_nodes_across_the_cluster() {
    let (mut c, _) = cache(0);
    c.add_node(Arc::new(make_node("n1").image(&["nginx"], 10).obj()));
    c.add_node(Arc::new(
        make_node("n2").image(&["nginx", "redis"], 10).obj(),
    ));
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    let count = |s: &Snapshot, n: &str| {
        s.get(n)
            .and_then(|n| n.image_states.get("nginx").copied())
            .map(|i| i.num_nodes)
    };
    assert_eq!((count(&s, "n1"), count(&s, "n2")), (Some(2), Some(2)));
    c.remove_node(&make_node("n2").obj()).unwrap();
    c.update_snapshot(&mut s);
    assert_eq!(count(&s, "n1"), Some(1));
    c.update_node(
        &make_node("n1").obj(),
        Arc::new(make_node("n1").image(&["redis"], 5).obj()),
    );
    c.update_snapshot(&mut s);
    assert_eq!(
        s.get("n1").map(|n| n.image_states.clone()),
        Some(HashMap::from([(
            "redis".to_string(),
            ImageStateSummary {
                size: 5,
                num_nodes: 1
            }
        )]))
    );
}

// ---- property test: incremental snapshot == snapshot rebuilt from scratch ----

fn anti_affinity(p: PodBuilder, required: bool) -> PodBuilder {
    p.with(|p| {
        let term = PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            }),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        };
        let anti = if required {
            PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term]),
                ..Default::default()
            }
        } else {
            PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    k8s_openapi::api::core::v1::WeightedPodAffinityTerm {
                        weight: 1,
                        pod_affinity_term: term,
                    },
                ]),
                ..Default::default()
            }
        };
        if let Some(spec) = p.spec.as_mut() {
            spec.affinity = Some(Affinity {
                pod_anti_affinity: Some(anti),
                ..Default::default()
            });
        }
    })
}

fn random_node(rng: &mut SmallRng, i: usize) -> Arc<Node> {
    let mut b: NodeBuilder = make_node(&format!("n{i}")).capacity(&[
        ("cpu", &format!("{}", rng.random_range(1..8))),
        ("pods", "110"),
    ]);
    if rng.random_bool(0.8) {
        b = b.label(
            "topology.kubernetes.io/zone",
            ["z1", "z2", "z3"][rng.random_range(0..3)],
        );
    }
    if rng.random_bool(0.5) {
        b = b.image(&[["nginx", "redis", "etcd"][rng.random_range(0..3)]], 100);
    }
    Arc::new(b.obj())
}

/// The claims random pods use; `none` is never used.
const RANDOM_CLAIMS: [&str; 3] = ["data", "logs", "cache"];

fn random_pod(rng: &mut SmallRng, i: usize, nodes: usize) -> Arc<Pod> {
    let mut b = make_pod(&format!("p{i}"))
        .label("app", "web")
        .req(&[("cpu", &format!("{}m", rng.random_range(1..500)))])
        .node(&format!("n{}", rng.random_range(0..nodes)));
    if rng.random_bool(0.1) {
        b = b.host_port("TCP", "", 8080);
    }
    if rng.random_bool(0.3) {
        b = b.pvc(RANDOM_CLAIMS[rng.random_range(0..RANDOM_CLAIMS.len())]);
    }
    match rng.random_range(0..6) {
        0 => b = anti_affinity(b, true),
        1 => b = anti_affinity(b, false),
        _ => {}
    }
    Arc::new(b.obj())
}

#[derive(Debug, PartialEq)]
struct NodeView {
    name: String,
    pods: Vec<String>,
    requested: Resource,
    non_zero_requested: Resource,
    allocatable: Resource,
    ports: Vec<HostPort>,
    images: BTreeMap<String, (i64, usize)>,
    with_affinity: usize,
    with_required_anti: usize,
    pvc_ref_counts: BTreeMap<String, u32>,
}

fn view(ni: &NodeInfo) -> NodeView {
    let mut pods: Vec<String> = ni.pods.iter().map(|p| p.key.clone()).collect();
    pods.sort();
    let mut ports = ni.used_ports.clone();
    ports.sort();
    NodeView {
        name: ni.name().to_string(),
        pods,
        requested: ni.requested.clone(),
        non_zero_requested: ni.non_zero_requested.clone(),
        allocatable: ni.allocatable.clone(),
        ports,
        images: ni
            .image_states
            .iter()
            .map(|(k, v)| (k.clone(), (v.size, v.num_nodes)))
            .collect(),
        with_affinity: ni.pods_with_affinity.len(),
        with_required_anti: ni.pods_with_required_anti_affinity.len(),
        pvc_ref_counts: ni
            .pvc_ref_counts
            .iter()
            .map(|(k, n)| (k.clone(), *n))
            .collect(),
    }
}

#[derive(Debug, PartialEq)]
struct SnapView {
    nodes: Vec<NodeView>,
    with_affinity: Vec<String>,
    with_required_anti: Vec<String>,
    /// Which of the random pods' claims (and one nobody uses) the snapshot reports used.
    used_pvcs: Vec<&'static str>,
}

fn snap_view(s: &Snapshot) -> SnapView {
    SnapView {
        nodes: s.node_infos().iter().map(|n| view(n)).collect(),
        with_affinity: s
            .have_pods_with_affinity()
            .map(|n| n.name().to_string())
            .collect(),
        with_required_anti: s
            .have_pods_with_required_anti_affinity()
            .map(|n| n.name().to_string())
            .collect(),
        used_pvcs: RANDOM_CLAIMS
            .iter()
            .chain(&["none"])
            .copied()
            .filter(|c| s.is_pvc_used_by_pods(&format!("default/{c}")))
            .collect(),
    }
}

/// What the cluster holds according to the operations applied: the model the cache must
/// agree with.
#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Arc<Node>>,
    /// Pods counted (added or assumed), by name.
    pods: BTreeMap<String, Arc<Pod>>,
    assumed: BTreeMap<String, Arc<Pod>>,
    /// Assumed pods whose binding finished, with their deadline in seconds of fake time.
    deadlines: BTreeMap<String, u64>,
    now: u64,
}

/// The TTL of the property test's cache, in seconds.
const TTL: u64 = 10;

#[rstest]
#[case(1)]
#[case(2)]
#[case(3)]
#[case(4)]
fn incremental_snapshot_equals_full_rebuild(#[case] seed: u64) {
    const NODES: usize = 8;
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut c, clock) = cache(TTL);
    let mut m = Model::default();
    let mut s = Snapshot::default();
    let mut next_pod = 0;
    for step in 0..400 {
        match rng.random_range(0..12) {
            0 | 1 => {
                let i = rng.random_range(0..NODES);
                let n = random_node(&mut rng, i);
                let name = node_name(&n).to_string();
                match m.nodes.get(&name) {
                    Some(old) => c.update_node(old, n.clone()),
                    None => c.add_node(n.clone()),
                }
                m.nodes.insert(name, n);
            }
            2 => {
                let name = format!("n{}", rng.random_range(0..NODES));
                let res = c.remove_node(&make_node(&name).obj());
                assert_eq!(res.is_ok(), m.nodes.remove(&name).is_some(), "step {step}");
            }
            3 | 4 => {
                let p = random_pod(&mut rng, next_pod, NODES);
                next_pod += 1;
                if rng.random_bool(0.5) {
                    c.add_pod(p.clone()).unwrap();
                } else {
                    c.assume_pod(Arc::new(PodInfo::new(p.clone()))).unwrap();
                    m.assumed.insert(namespaced_name(&p), p.clone());
                }
                m.pods.insert(namespaced_name(&p), p);
            }
            5 => {
                // Update a counted pod: new requests and maybe a new node if it was assumed
                // (confirmation elsewhere); plain updates keep the node.
                let Some(key) = pick(&mut rng, &m.pods) else {
                    continue;
                };
                let old = m.pods[&key].clone();
                let name = old.metadata.name.clone().unwrap_or_default();
                let idx: usize = name[1..].parse().unwrap();
                let mut new = random_pod(&mut rng, idx, NODES);
                if m.assumed.remove(&key).is_some() {
                    m.deadlines.remove(&key);
                    c.add_pod(new.clone()).unwrap();
                } else {
                    let mut obj = (*new).clone();
                    if let (Some(s), Some(o)) = (obj.spec.as_mut(), old.spec.as_ref()) {
                        s.node_name = o.node_name.clone();
                    }
                    new = Arc::new(obj);
                    c.update_pod(&old, new.clone()).unwrap();
                }
                m.pods.insert(key, new);
            }
            6 => {
                let Some(key) = pick(&mut rng, &m.pods) else {
                    continue;
                };
                let p = m.pods.remove(&key).unwrap();
                m.assumed.remove(&key);
                m.deadlines.remove(&key);
                c.remove_pod(&p).unwrap();
            }
            7 => {
                let Some(key) = pick(&mut rng, &m.assumed) else {
                    continue;
                };
                let p = m.assumed.remove(&key).unwrap();
                m.pods.remove(&key);
                m.deadlines.remove(&key);
                c.forget_pod(&PodKey::of(&p)).unwrap();
            }
            8 => {
                let Some(key) = pick(&mut rng, &m.assumed) else {
                    continue;
                };
                c.finish_binding(&PodKey::of(&m.assumed[&key])).unwrap();
                m.deadlines.insert(key, m.now + TTL);
            }
            9 => {
                let secs = rng.random_range(1..6);
                clock.advance(Duration::from_secs(secs));
                m.now += secs;
                let mut expired: Vec<String> = c
                    .cleanup_assumed_pods()
                    .iter()
                    .map(|p| p.key.clone())
                    .collect();
                expired.sort();
                let want: Vec<String> = m
                    .deadlines
                    .iter()
                    .filter(|(_, d)| m.now > **d)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &want {
                    m.deadlines.remove(k);
                    m.assumed.remove(k);
                    m.pods.remove(k);
                }
                assert_eq!(expired, want, "step {step}");
            }
            _ => {
                c.update_snapshot(&mut s);
                check(&c, &m, &s, step);
            }
        }
    }
    c.update_snapshot(&mut s);
    check(&c, &m, &s, 400);
}

fn pick<V>(rng: &mut SmallRng, map: &BTreeMap<String, V>) -> Option<String> {
    if map.is_empty() {
        return None;
    }
    map.keys().nth(rng.random_range(0..map.len())).cloned()
}

fn check(c: &Cache, m: &Model, s: &Snapshot, step: usize) {
    // The set of nodes is the model's; their order is the cache's node tree.
    let mut names = snap_names(s);
    let order = names.clone();
    names.sort();
    assert_eq!(
        names,
        m.nodes.keys().cloned().collect::<Vec<_>>(),
        "step {step}"
    );
    assert_eq!(
        order,
        c.node_tree_list()
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>(),
        "step {step}"
    );
    // Content equals a snapshot built from scratch from the model, in the same order.
    let nodes: Vec<Arc<Node>> = order.iter().map(|n| m.nodes[n].clone()).collect();
    let pods = m.pods.values().map(|p| Arc::new(PodInfo::new(p.clone())));
    let fresh = Snapshot::new(nodes, pods);
    assert_eq!(snap_view(s), snap_view(&fresh), "step {step}");
    // And equals what a brand-new snapshot gets from the cache in one update.
    let mut whole = Snapshot::default();
    let mut c2 = Cache {
        ttl: c.ttl,
        clock: c.clock.clone(),
        nodes: c.nodes.clone(),
        by_generation: c.by_generation.clone(),
        pods: c.pods.clone(),
        tree: c.tree.clone(),
        tree_generation: c.tree_generation,
        images: c.images.clone(),
        dirty_images: c.dirty_images.clone(),
    };
    c2.update_snapshot(&mut whole);
    assert_eq!(snap_view(s), snap_view(&whole), "step {step}");
    assert_eq!(c.pod_count(), m.pods.len(), "step {step}");
    assert_eq!(c.assumed_pod_count(), m.assumed.len(), "step {step}");
}

#[test]
fn node_update_with_the_same_images_touches_no_other_node() {
    let (mut c, _) = cache(0);
    let n1 = Arc::new(make_node("n1").image(&["nginx"], 10).obj());
    c.add_node(n1.clone());
    c.add_node(Arc::new(make_node("n2").image(&["nginx"], 10).obj()));
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    let before = s.clone();
    c.update_node(
        &n1,
        Arc::new(make_node("n1").image(&["nginx"], 10).label("x", "y").obj()),
    );
    c.update_snapshot(&mut s);
    let same: Vec<bool> = before
        .node_infos()
        .iter()
        .zip(s.node_infos())
        .map(|(a, b)| Arc::ptr_eq(a, b))
        .collect();
    assert_eq!(
        (same, s.get("n1").map(|n| n.labels().get("x").cloned())),
        (vec![false, true], Some(Some("y".to_string())))
    );
}

#[test]
fn update_clearing_the_node_name_is_refused_and_changes_nothing() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.add_pod(pod("web-1", "n1")).unwrap();
    let before = c.dump();
    let res = c.update_pod(&pod("web-1", "n1"), Arc::new(make_pod("web-1").obj()));
    assert_eq!(
        (res, c.dump()),
        (
            Err(CacheError::NotAssigned {
                pod: "default/web-1".into()
            }),
            before
        )
    );
}

#[test]
fn a_snapshot_edited_outside_the_cache_is_refreshed_whole() {
    let (mut c, _) = cache(0);
    c.add_node(node("n1"));
    c.add_node(node("n2"));
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s);
    // A cycle placed a pod in its snapshot but the cache never heard of it.
    s.assume_pod(info("web-1", "n1"), "n1");
    c.update_snapshot(&mut s);
    assert_eq!(s.get("n1").map(|n| n.pods.len()), Some(0));
}

/// Whether the snapshot taken from `c` reports claim `default/data` used.
fn data_used(c: &mut Cache, s: &mut Snapshot) -> bool {
    c.update_snapshot(s);
    s.is_pvc_used_by_pods("default/data")
}

#[test]
fn a_claim_is_used_while_an_assumed_or_added_pod_uses_it() {
    let (mut c, _) = cache(0);
    let mut s = Snapshot::default();
    c.add_node(node("n1"));
    c.add_node(node("n2"));
    let user = make_pod("a").pvc("data").node("n1");
    let before = data_used(&mut c, &mut s);
    c.assume_pod(user.clone().info()).unwrap();
    let assumed = data_used(&mut c, &mut s);
    c.forget_pod("uid-a").unwrap();
    let forgotten = data_used(&mut c, &mut s);
    c.assume_pod(user.clone().info()).unwrap();
    // Bound elsewhere than assumed: the claim moves with the pod.
    c.add_pod(Arc::new(user.clone().node("n2").obj())).unwrap();
    let confirmed = (
        data_used(&mut c, &mut s),
        s.get("n1").map(|n| n.pvc_ref_counts.len()),
    );
    let labelled = Arc::new(user.clone().node("n2").label("app", "db").obj());
    c.update_pod(&user.clone().node("n2").obj(), labelled.clone())
        .unwrap();
    let updated = data_used(&mut c, &mut s);
    c.remove_pod(&labelled).unwrap();
    assert_eq!(
        (
            before,
            assumed,
            forgotten,
            confirmed,
            updated,
            data_used(&mut c, &mut s)
        ),
        (false, true, false, (true, Some(0)), true, false)
    );
}

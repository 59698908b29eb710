//! Opportunistic batching through whole scheduling cycles, with the in-tree plugins.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::testing::{make_node, make_pod};
use framework::{CycleState, PodInfo, Snapshot};
use k8s_openapi::api::core::v1::{
    Node, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::builder::SchedulerBuilder;
use crate::clock::FakeClock;
use crate::metrics::NoopRecorder;
use crate::runtime::batch::Batching;
use crate::runtime::Framework;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// The default profile, but PodTopologySpread without default constraints: upstream signs
/// no pod while a profile has them (system defaulting included).
const NO_DEFAULT_SPREAD: &str = "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n";

fn framework(profiles_yaml: &str) -> Framework {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{profiles_yaml}"
    );
    let cfg = crate::config::load_str(&text, "test").unwrap_or_else(|e| panic!("{e}"));
    let mut profiles = SchedulerBuilder::new(cfg, "test")
        .seed(1)
        .parallelism(1)
        .build_profiles()
        .unwrap_or_else(|e| panic!("{e}"));
    profiles.frameworks.remove(0)
}

/// What a run placed: each pod's node (`None`: unschedulable) and how many pods took a hint.
#[derive(Debug)]
struct Run {
    nodes: Vec<Option<String>>,
    batched: u64,
    placed: Vec<Arc<PodInfo>>,
}

/// Schedules `pods` one by one on `nodes`, each placed pod counted by the next cycles (as
/// the cache's assumed pods are). The clock stands still, so no batch expires.
fn run(fwk: &Framework, nodes: &[Arc<Node>], pods: &[Arc<PodInfo>], batching: bool) -> Run {
    let mut algo = ScheduleAlgorithm::new(1, None);
    if batching {
        algo.set_batching(Some(Batching::new(
            Arc::new(FakeClock::new()),
            Arc::new(NoopRecorder),
            1,
        )));
    }
    let mut placed: Vec<Arc<PodInfo>> = Vec::new();
    let mut out = Vec::new();
    for pod in pods {
        let snapshot = Snapshot::new(nodes.to_vec(), placed.iter().cloned());
        let mut state = CycleState::new();
        match algo.schedule_pod(fwk, &mut state, pod, &snapshot, None) {
            Ok(r) => {
                placed.push(Arc::new(pod.with_node(&r.suggested_host)));
                out.push(Some(r.suggested_host));
            }
            Err(_) => out.push(None),
        }
    }
    let batched = algo
        .batching()
        .and_then(|b| b.profile(fwk.profile_name()))
        .map_or(0, |b| b.batched_pods());
    Run {
        nodes: out,
        batched,
        placed,
    }
}

/// Ten identical nodes ranked 1..=10 by a label, and pods that prefer higher ranks and
/// take a host port (one per node): every node scores differently, so no tie is broken.
fn ranked_nodes() -> Vec<Arc<Node>> {
    (1..=10)
        .map(|i| {
            let name = format!("n{i}");
            Arc::new(
                make_node(&name)
                    .label("rank", &i.to_string())
                    .label(HOSTNAME, &name)
                    .capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
                    .obj(),
            )
        })
        .collect()
}

fn ranked_pod(name: &str) -> Arc<PodInfo> {
    let mut b = make_pod(name)
        .label("app", "web")
        .req(&[("cpu", "100m"), ("memory", "128Mi")])
        .host_port("TCP", "", 8080);
    for rank in 1..=10 {
        b = b.preferred_node_affinity(rank, "rank", "In", &[&rank.to_string()]);
    }
    b.info()
}

fn expected_ranked(pods: usize) -> Vec<Option<String>> {
    (0..pods)
        .map(|i| (i < 10).then(|| format!("n{}", 10 - i)))
        .collect()
}

#[test]
fn identical_pods_one_per_node_land_where_they_land_without_batching() {
    let fwk = framework(NO_DEFAULT_SPREAD);
    let nodes = ranked_nodes();
    let pods: Vec<Arc<PodInfo>> = (0..12).map(|i| ranked_pod(&format!("web-{i}"))).collect();
    let with = run(&fwk, &nodes, &pods, true);
    let without = run(&fwk, &nodes, &pods, false);
    assert_eq!(with.nodes, expected_ranked(12));
    assert_eq!(without.nodes, with.nodes);
    // The first pod is scored; the next nine take the kept list's nodes in order.
    assert_eq!((with.batched, without.batched), (9, 0));
}

#[test]
fn pods_that_fit_again_on_the_chosen_node_are_not_batched() {
    // Without the host port every pod fits on n10 again: the kept list's order is unknown
    // once n10's score changes, so no pod takes a hint.
    let fwk = framework(NO_DEFAULT_SPREAD);
    let nodes = ranked_nodes();
    let pods: Vec<Arc<PodInfo>> = (0..5)
        .map(|i| {
            let mut b = make_pod(&format!("small-{i}"))
                .label("app", "small")
                .req(&[("cpu", "100m"), ("memory", "128Mi")]);
            for rank in 1..=10 {
                b = b.preferred_node_affinity(rank, "rank", "In", &[&rank.to_string()]);
            }
            b.info()
        })
        .collect();
    let with = run(&fwk, &nodes, &pods, true);
    let without = run(&fwk, &nodes, &pods, false);
    assert_eq!(with.nodes, vec![Some("n10".to_string()); 5]);
    assert_eq!((without.nodes, with.batched), (with.nodes, 0));
}

#[test]
fn the_default_profile_never_batches_because_of_default_spreading() {
    let fwk = framework("");
    let pods: Vec<Arc<PodInfo>> = (0..12).map(|i| ranked_pod(&format!("web-{i}"))).collect();
    let r = run(&fwk, &ranked_nodes(), &pods, true);
    assert_eq!((r.nodes, r.batched), (expected_ranked(12), 0));
    assert_eq!(fwk.sign_pod(&pods[0]), None);
}

#[test]
fn explained_cycles_never_batch_and_filter_every_node() {
    let fwk = framework(NO_DEFAULT_SPREAD);
    let nodes = ranked_nodes();
    let mut algo = ScheduleAlgorithm::new(1, None);
    algo.set_batching(Some(Batching::new(
        Arc::new(FakeClock::new()),
        Arc::new(NoopRecorder),
        1,
    )));
    let mut placed: Vec<Arc<PodInfo>> = Vec::new();
    let mut filtered = Vec::new();
    for i in 0..3 {
        let pod = ranked_pod(&format!("web-{i}"));
        let snapshot = Snapshot::new(nodes.clone(), placed.iter().cloned());
        let mut explanation = Explanation::default();
        let r = algo
            .schedule_pod(
                &fwk,
                &mut CycleState::new(),
                &pod,
                &snapshot,
                Some(&mut explanation),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        placed.push(Arc::new(pod.with_node(&r.suggested_host)));
        filtered.push(explanation.filter.len());
    }
    assert_eq!(filtered, [10, 10, 10]);
    let batched = algo
        .batching()
        .and_then(|b| b.profile(fwk.profile_name()))
        .map_or(0, |b| b.batched_pods());
    assert_eq!(batched, 0);
}

#[test]
fn a_hint_that_no_longer_fits_sends_the_pod_through_all_nodes() {
    // The kept list's next node (n9) fills up between the cycles (another scheduler's pod
    // took its port): Filter rejects the hint and the pod goes to the best node left.
    let fwk = framework(NO_DEFAULT_SPREAD);
    let nodes = ranked_nodes();
    let mut algo = ScheduleAlgorithm::new(1, None);
    algo.set_batching(Some(Batching::new(
        Arc::new(FakeClock::new()),
        Arc::new(NoopRecorder),
        1,
    )));
    let first = ranked_pod("web-0");
    let r = algo
        .schedule_pod(
            &fwk,
            &mut CycleState::new(),
            &first,
            &Snapshot::new(nodes.clone(), []),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.suggested_host, "n10");
    let intruder = Arc::new(
        make_pod("other")
            .host_port("TCP", "", 8080)
            .info()
            .with_node("n9"),
    );
    let placed = [Arc::new(first.with_node("n10")), intruder];
    let second = ranked_pod("web-1");
    let r = algo
        .schedule_pod(
            &fwk,
            &mut CycleState::new(),
            &second,
            &Snapshot::new(nodes, placed),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.suggested_host.as_str(), r.feasible_nodes), ("n8", 8));
}

/// Fifty nodes in four zones and a seeded stream of pods in runs of one shape: one-per-node
/// web pods (host port), small and big pods (many per node), zone-spread pods and pods
/// with required anti-affinity.
fn seeded_workload(seed: u64, count: usize) -> (Vec<Arc<Node>>, Vec<Arc<PodInfo>>) {
    let nodes: Vec<Arc<Node>> = (0..50)
        .map(|i| {
            let name = format!("node-{i:02}");
            Arc::new(
                make_node(&name)
                    .label(ZONE, &format!("zone-{}", i % 4))
                    .label(HOSTNAME, &name)
                    .capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "20")])
                    .obj(),
            )
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut pods = Vec::new();
    while pods.len() < count {
        let shape = rng.random_range(0..5u8);
        let run_len = rng.random_range(1..=12usize);
        for _ in 0..run_len {
            let name = format!("p{}", pods.len());
            let pod = match shape {
                0 => make_pod(&name)
                    .label("app", "web")
                    .req(&[("cpu", "500m"), ("memory", "512Mi")])
                    .host_port("TCP", "", 8080),
                1 => make_pod(&name)
                    .label("app", "small")
                    .req(&[("cpu", "100m"), ("memory", "128Mi")]),
                2 => make_pod(&name)
                    .label("app", "big")
                    .req(&[("cpu", "1500m"), ("memory", "2Gi")]),
                3 => make_pod(&name)
                    .label("app", "spread")
                    .req(&[("cpu", "200m"), ("memory", "256Mi")])
                    .with(|p| {
                        if let Some(spec) = p.spec.as_mut() {
                            spec.topology_spread_constraints =
                                Some(vec![TopologySpreadConstraint {
                                    max_skew: 1,
                                    topology_key: ZONE.into(),
                                    when_unsatisfiable: "DoNotSchedule".into(),
                                    label_selector: Some(app_selector("spread")),
                                    ..Default::default()
                                }]);
                        }
                    }),
                _ => make_pod(&name)
                    .label("app", "anti")
                    .req(&[("cpu", "300m"), ("memory", "256Mi")])
                    .with(|p| {
                        if let Some(spec) = p.spec.as_mut() {
                            let affinity = spec.affinity.get_or_insert_with(Default::default);
                            affinity.pod_anti_affinity = Some(PodAntiAffinity {
                                required_during_scheduling_ignored_during_execution: Some(vec![
                                    PodAffinityTerm {
                                        label_selector: Some(app_selector("anti")),
                                        topology_key: HOSTNAME.into(),
                                        ..Default::default()
                                    },
                                ]),
                                ..Default::default()
                            });
                        }
                    }),
            };
            pods.push(pod.info());
        }
    }
    pods.truncate(count);
    (nodes, pods)
}

fn app_selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
        ..Default::default()
    }
}

/// Every way `placed` could break the nodes' capacity or a pod's required constraints.
fn violations(nodes: &[Arc<Node>], placed: &[Arc<PodInfo>]) -> Vec<String> {
    let app = |p: &PodInfo| {
        p.labels()
            .and_then(|l| l.get("app"))
            .cloned()
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut zone_spread: BTreeMap<String, i64> = nodes
        .iter()
        .filter_map(|n| n.metadata.labels.as_ref()?.get(ZONE).cloned())
        .map(|z| (z, 0))
        .collect();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let on: Vec<&Arc<PodInfo>> = placed
            .iter()
            .filter(|p| p.node_name() == Some(name.as_str()))
            .collect();
        let cpu: i64 = on.iter().map(|p| p.requests.milli_cpu).sum();
        let memory: i64 = on.iter().map(|p| p.requests.memory).sum();
        if cpu > 4000 || memory > 8 << 30 || on.len() > 20 {
            out.push(format!(
                "{name} overcommitted: {cpu}m cpu, {memory} memory, {} pods",
                on.len()
            ));
        }
        for shape in ["web", "anti"] {
            let n = on.iter().filter(|p| app(p) == shape).count();
            if n > 1 {
                out.push(format!("{name} holds {n} {shape} pods"));
            }
        }
        let zone = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ZONE))
            .cloned();
        if let Some(count) = zone.and_then(|z| zone_spread.get_mut(&z)) {
            *count += on.iter().filter(|p| app(p) == "spread").count() as i64;
        }
    }
    let (min, max) = (
        zone_spread.values().copied().min().unwrap_or(0),
        zone_spread.values().copied().max().unwrap_or(0),
    );
    if max - min > 1 {
        out.push(format!("spread pods skewed across zones: {zone_spread:?}"));
    }
    out
}

#[test]
fn a_seeded_workload_with_batching_overcommits_nothing_and_keeps_every_constraint() {
    let fwk = framework(NO_DEFAULT_SPREAD);
    for seed in [1, 2, 3] {
        let (nodes, pods) = seeded_workload(seed, 400);
        let r = run(&fwk, &nodes, &pods, true);
        assert_eq!(
            violations(&nodes, &r.placed),
            Vec::<String>::new(),
            "seed {seed}"
        );
        assert!(
            r.batched > 0,
            "seed {seed}: no pod took a hint, the test proves nothing"
        );
        // The cluster holds more than it is asked for at first: most pods are placed.
        assert!(
            r.placed.len() > 300,
            "seed {seed}: only {} placed",
            r.placed.len()
        );
    }
}

fn web(name: &str) -> framework::testing::PodBuilder {
    make_pod(name)
        .label("app", "web")
        .req(&[("cpu", "100m"), ("memory", "128Mi")])
}

/// A `web` pod with a `DoNotSchedule` zone spreading constraint of its own.
fn spread_by_zone(name: &str) -> framework::testing::PodBuilder {
    web(name).with(|p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: ZONE.into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                ..Default::default()
            }]);
        }
    })
}

/// Whether the profile signs `a`, and whether `a` and `b` get the same signature.
#[rstest::rstest]
#[case::identical_pods_with_other_names_share_a_signature(web("a"), web("b"), (true, true))]
#[case::other_requests_sign_differently(web("a"), web("b").req(&[("cpu", "1")]), (true, false))]
#[case::other_labels_sign_differently(web("a"), web("b").label("tier", "x"), (true, false))]
#[case::other_scheduler_names_sign_differently(
    web("a"),
    web("b").scheduler_name("default-scheduler-2"),
    (true, false)
)]
#[case::tolerations_in_any_order_sign_alike(
    web("a").toleration("k1", "Exists", "", "NoSchedule").toleration("k2", "Exists", "", "NoSchedule"),
    web("b").toleration("k2", "Exists", "", "NoSchedule").toleration("k1", "Exists", "", "NoSchedule"),
    (true, true)
)]
#[case::a_pod_with_spread_constraints_is_not_signed(
    spread_by_zone("a"),
    web("b"),
    (false, false)
)]
#[case::a_pod_with_anti_affinity_is_not_signed(
    web("a").with(|p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.affinity.get_or_insert_with(Default::default).pod_anti_affinity =
                Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(app_selector("web")),
                            topology_key: HOSTNAME.into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                });
        }
    }),
    web("b"),
    (false, false)
)]
#[case::a_pod_with_resource_claims_is_not_signed(
    web("a").with(|p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.resource_claims = Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_name: Some("gpu-claim".into()),
                ..Default::default()
            }]);
        }
    }),
    web("b"),
    (false, false)
)]
#[case::a_pod_asking_for_an_extended_resource_is_not_signed(
    web("a").req(&[("example.com/gpu", "1")]),
    web("b"),
    (false, false)
)]
fn signatures(
    #[case] a: framework::testing::PodBuilder,
    #[case] b: framework::testing::PodBuilder,
    #[case] want: (bool, bool),
) {
    let fwk = framework(NO_DEFAULT_SPREAD);
    let (a, b) = (fwk.sign_pod(&a.info()), fwk.sign_pod(&b.info()));
    assert_eq!((a.is_some(), a.is_some() && a == b), want);
}

#[test]
fn a_profile_with_a_plugin_that_cannot_sign_signs_no_pod() {
    assert!(framework(NO_DEFAULT_SPREAD).signs_pods());
    let registry =
        crate::testing::FakeRegistry::with(vec![
            crate::testing::Fake::named("Unsigned").rejecting(&[])
        ]);
    let mut spec = crate::runtime::ProfileSpec {
        scheduler_name: "test".into(),
        ..Default::default()
    };
    for (i, n) in ["Sort", "Bind", "Unsigned"].iter().enumerate() {
        spec.multi_point.enabled.push((n.to_string(), 1));
        spec.plugin_args
            .insert(n.to_string(), (i, serde_json::json!({ "fake": n })));
    }
    let (unsigned, _) = Framework::build(&spec, &registry, framework::Handle::offline(), &[])
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        (unsigned.signs_pods(), unsigned.sign_pod(&web("a").info())),
        (false, None)
    );
}

/// The plugin that refused the last pod is asked first next time; what a pod's signature
/// is, and whether it has one, stay the same whichever plugin refused before it.
#[test]
fn signatures_do_not_depend_on_the_pod_signed_before() {
    let spread = spread_by_zone("spread");
    let gpu = web("gpu").req(&[("example.com/gpu", "1")]);
    let plain = web("a").toleration("k1", "Exists", "", "NoSchedule");
    let fresh = framework(NO_DEFAULT_SPREAD).sign_pod(&plain.clone().info());
    let fwk = framework(NO_DEFAULT_SPREAD);
    let got: Vec<Option<framework::PodSignature>> = [
        spread.clone(),
        plain.clone(),
        gpu.clone(),
        plain.clone(),
        spread,
        gpu,
        plain,
    ]
    .into_iter()
    .map(|p| fwk.sign_pod(&p.info()))
    .collect();
    assert!(fresh.is_some());
    let want = vec![None, fresh.clone(), None, fresh.clone(), None, None, fresh];
    assert_eq!(got, want);
}

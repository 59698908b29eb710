use std::collections::{BTreeMap, HashMap};

use super::*;

use framework::testing::{make_node, make_pod, PodBuilder};
use framework::PodKey;
use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, PodAntiAffinity, PodStatus};
use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as V1LabelSelector, Time};
use rstest::rstest;

/// The profile's plugins as the runtime would run them for a PostFilter: NodeResourcesFit
/// and InterPodAffinity (whose PreFilter extensions preemption must call), the pods
/// nominated to nodes, and a fixed "random" offset.
struct Runner {
    plugins: Vec<Arc<dyn Plugin>>,
    nominated: HashMap<String, Vec<Arc<PodInfo>>>,
    offset: usize,
}

impl Runner {
    fn new(nominated: &[(&str, Arc<PodInfo>)], offset: usize) -> Self {
        let handle = Handle::offline();
        let plugins = vec![
            crate::noderesources::new_fit(None, &handle).unwrap_or_else(|e| unreachable!("{e:?}")),
            crate::interpodaffinity::new(None, &handle).unwrap_or_else(|e| unreachable!("{e:?}")),
        ];
        let mut by_node: HashMap<String, Vec<Arc<PodInfo>>> = HashMap::new();
        for (node, p) in nominated {
            by_node.entry(node.to_string()).or_default().push(p.clone());
        }
        Runner {
            plugins,
            nominated: by_node,
            offset,
        }
    }

    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) {
        let mut skip = Vec::new();
        for pl in &self.plugins {
            if let Some(p) = pl.as_pre_filter() {
                if p.pre_filter(state, pod, snapshot).1.is_skip() {
                    skip.push(pl.name());
                }
            }
        }
        state.set_skip_filter_plugins(skip);
    }

    fn filters(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for pl in &self.plugins {
            if state.skip_filter_plugins().contains(&pl.name()) {
                continue;
            }
            if let Some(f) = pl.as_filter() {
                let s = f.filter(state, pod, node);
                if !s.is_success() {
                    return s;
                }
            }
        }
        Status::success()
    }
}

impl PluginsRunner for Runner {
    fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        let nominated: Vec<&Arc<PodInfo>> = self
            .nominated
            .get(node.name())
            .into_iter()
            .flatten()
            .filter(|p| p.priority() >= pod.priority() && p.key != pod.key)
            .collect();
        if !nominated.is_empty() {
            let mut with_state = state.clone();
            let mut with_node = node.clone();
            for p in nominated {
                with_node.add_pod(p.clone());
                let s = self.run_pre_filter_extension_add_pod(&mut with_state, pod, p, &with_node);
                if !s.is_success() {
                    return s;
                }
            }
            let s = self.filters(&with_state, pod, &with_node);
            if !s.is_success() {
                return s;
            }
        }
        self.filters(state, pod, node)
    }

    fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        for pl in &self.plugins {
            if state.skip_filter_plugins().contains(&pl.name()) {
                continue;
            }
            if let Some(ext) = pl.as_pre_filter().and_then(|p| p.pre_filter_extensions()) {
                let s = ext.add_pod(state, pod, to_add, node);
                if !s.is_success() {
                    return s;
                }
            }
        }
        Status::success()
    }

    fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        for pl in &self.plugins {
            if state.skip_filter_plugins().contains(&pl.name()) {
                continue;
            }
            if let Some(ext) = pl.as_pre_filter().and_then(|p| p.pre_filter_extensions()) {
                let s = ext.remove_pod(state, pod, to_remove, node);
                if !s.is_success() {
                    return s;
                }
            }
        }
        Status::success()
    }

    fn nominated_node_name(&self, pod: &PodInfo) -> Option<String> {
        self.nominated
            .iter()
            .find(|(_, pods)| pods.iter().any(|p| p.key == pod.key))
            .map(|(node, _)| node.clone())
    }

    fn random_index(&self, n: usize) -> usize {
        self.offset % n.max(1)
    }
}

/// A node with 2 CPUs and room for 10 pods.
fn node(name: &str) -> Arc<k8s_openapi::api::core::v1::Node> {
    Arc::new(
        make_node(name)
            .capacity(&[("cpu", "2"), ("pods", "10")])
            .obj(),
    )
}

/// A pod of `priority` requesting `cpu`, on `node` (empty: pending).
fn pod(name: &str, priority: i32, cpu: &str, node: &str) -> PodBuilder {
    let p = make_pod(name).priority(priority).req(&[("cpu", cpu)]);
    if node.is_empty() {
        p
    } else {
        p.node(node)
    }
}

fn started(p: PodBuilder, second: i64) -> PodBuilder {
    p.with(|pod| {
        pod.status = Some(PodStatus {
            start_time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(second)
                    .unwrap_or_else(|e| unreachable!("{e}")),
            )),
            ..Default::default()
        });
    })
}

fn anti_affine_to(p: PodBuilder, app: &str) -> PodBuilder {
    let app = app.to_string();
    p.with(move |pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.affinity = Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(V1LabelSelector {
                                match_labels: Some(BTreeMap::from([("app".to_string(), app)])),
                                ..Default::default()
                            }),
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
    })
}

/// A PDB over `app=<app>` in `default` allowing `allowed` disruptions.
fn pdb(app: &str, allowed: i32) -> Arc<PodDisruptionBudget> {
    Arc::new(PodDisruptionBudget {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(format!("pdb-{app}")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(V1LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: allowed,
            ..Default::default()
        }),
    })
}

/// The nominated node, the victims, and the status of a PostFilter call.
type Outcome = (Option<String>, Vec<String>, Status);

/// Runs a cycle like the scheduler's over `nodes` holding `existing`: PreFilter, Filter on
/// every node (recording statuses), then DefaultPreemption's PostFilter.
fn check(
    preemptor: PodBuilder,
    nodes: &[&str],
    existing: Vec<PodBuilder>,
    pdbs: Vec<Arc<PodDisruptionBudget>>,
    nominated: &[(&str, Arc<PodInfo>)],
    offset: usize,
) -> Outcome {
    check_with(
        DefaultPreemption::from_args(None).unwrap_or_else(|e| unreachable!("{e:?}")),
        preemptor,
        nodes,
        existing,
        pdbs,
        nominated,
        offset,
    )
}

fn check_with(
    plugin: DefaultPreemption,
    preemptor: PodBuilder,
    nodes: &[&str],
    existing: Vec<PodBuilder>,
    pdbs: Vec<Arc<PodDisruptionBudget>>,
    nominated: &[(&str, Arc<PodInfo>)],
    offset: usize,
) -> Outcome {
    let mut snapshot = Snapshot::new(
        nodes.iter().map(|n| node(n)).collect(),
        existing.into_iter().map(PodBuilder::info),
    );
    snapshot.set_pdbs(Arc::new(pdbs));
    let runner = Runner::new(nominated, offset);
    let pod = preemptor.info();
    let mut state = CycleState::new();
    runner.pre_filter(&mut state, &pod, &snapshot);
    let mut statuses = NodeToStatus::new(Status::unresolvable("absent"));
    for n in snapshot.node_infos() {
        let s = runner.run_filter_plugins_with_nominated_pods(&state, &pod, n);
        assert!(
            !s.is_success(),
            "node {} must reject the preemptor",
            n.name()
        );
        statuses.set(n.name(), s);
    }
    let (result, status) = plugin.post_filter(&mut state, &pod, &snapshot, &statuses, &runner);
    (
        result.as_ref().map(|r| r.nominated_node_name.clone()),
        result
            .map(|r| r.victims.iter().map(|v| v.key.clone()).collect())
            .unwrap_or_default(),
        status,
    )
}

fn nominated_to(node: &str) -> Option<String> {
    Some(node.to_string())
}

fn victims(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| format!("default/{k}")).collect()
}

#[rstest]
#[case::lowest_priority_pod_is_evicted_and_the_higher_one_reprieved(
    pod("hi", 10, "1", ""),
    &["n1"],
    vec![pod("low", 1, "1", "n1"), pod("mid", 2, "1", "n1")],
    vec![],
    (nominated_to("n1"), victims(&["low"]), Status::success())
)]
#[case::every_lower_pod_is_evicted_when_all_are_needed(
    pod("hi", 10, "2", ""),
    &["n1"],
    vec![pod("low", 1, "1", "n1"), pod("mid", 2, "1", "n1")],
    vec![],
    (nominated_to("n1"), victims(&["mid", "low"]), Status::success())
)]
#[case::pods_of_equal_priority_are_never_victims(
    pod("hi", 10, "1", ""),
    &["n1"],
    vec![pod("a", 10, "1", "n1"), pod("b", 10, "1", "n1")],
    vec![],
    (
        nominated_to(""),
        vec![],
        Status::unschedulable("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    )
)]
#[case::a_pod_larger_than_the_node_is_not_helped(
    pod("hi", 10, "3", ""),
    &["n1"],
    vec![pod("low", 1, "1", "n1")],
    vec![],
    (
        nominated_to(""),
        vec![],
        Status::unschedulable("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    )
)]
#[case::higher_priority_pods_left_on_the_node_keep_it_full(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![
        pod("low", 1, "1", "n1"),
        pod("top", 100, "1", "n1"),
        pod("top2", 100, "2", "n2"),
    ],
    vec![],
    (
        nominated_to(""),
        vec![],
        Status::unschedulable("preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod.")
    )
)]
#[case::pdb_protected_pods_are_reprieved_first(
    pod("hi", 10, "1", ""),
    &["n1"],
    vec![pod("free", 1, "1", "n1"), pod("guarded", 1, "1", "n1").label("app", "db")],
    vec![pdb("db", 0)],
    (nominated_to("n1"), victims(&["free"]), Status::success())
)]
#[case::the_node_without_pdb_violations_wins(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![
        pod("guarded", 1, "2", "n1").label("app", "db"),
        pod("free", 5, "2", "n2"),
    ],
    vec![pdb("db", 0)],
    (nominated_to("n2"), victims(&["free"]), Status::success())
)]
#[case::the_node_with_the_lowest_highest_victim_priority_wins(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![pod("five", 5, "2", "n1"), pod("one", 1, "1", "n2"), pod("two", 1, "1", "n2")],
    vec![],
    (nominated_to("n2"), victims(&["one", "two"]), Status::success())
)]
#[case::the_node_with_the_smallest_priority_sum_wins(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![
        pod("a", 3, "1", "n1"),
        pod("b", 3, "1", "n1"),
        pod("c", 3, "1", "n2"),
        pod("d", 2, "1", "n2"),
    ],
    vec![],
    (nominated_to("n2"), victims(&["c", "d"]), Status::success())
)]
#[case::the_node_with_fewer_victims_wins(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![pod("a", 1, "1", "n1"), pod("b", 1, "1", "n1"), pod("c", 1, "2", "n2")],
    vec![],
    (nominated_to("n2"), victims(&["c"]), Status::success())
)]
#[case::the_node_whose_victims_started_last_wins(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![started(pod("old", 1, "2", "n1"), 100), started(pod("new", 1, "2", "n2"), 200)],
    vec![],
    (nominated_to("n2"), victims(&["new"]), Status::success())
)]
#[case::a_full_tie_takes_the_first_node_examined(
    pod("hi", 10, "2", ""),
    &["n1", "n2"],
    vec![pod("a", 1, "2", "n1"), pod("b", 1, "2", "n2")],
    vec![],
    (nominated_to("n1"), victims(&["a"]), Status::success())
)]
#[case::evicting_the_anti_affine_lower_pod_makes_room(
    anti_affine_to(pod("hi", 10, "1", ""), "web"),
    &["n1"],
    vec![pod("web", 1, "100m", "n1").label("app", "web"), pod("other", 1, "100m", "n1")],
    vec![],
    (nominated_to("n1"), victims(&["web"]), Status::success())
)]
#[case::preemption_policy_never_does_not_preempt(
    pod("hi", 10, "1", "").with(|p| {
        if let Some(s) = p.spec.as_mut() {
            s.preemption_policy = Some("Never".into());
        }
    }),
    &["n1"],
    vec![pod("low", 1, "2", "n1")],
    vec![],
    (
        None,
        vec![],
        Status::unschedulable("preemption: not eligible due to preemptionPolicy=Never.")
    )
)]
fn post_filter(
    #[case] preemptor: PodBuilder,
    #[case] nodes: &[&str],
    #[case] existing: Vec<PodBuilder>,
    #[case] pdbs: Vec<Arc<PodDisruptionBudget>>,
    #[case] want: Outcome,
) {
    assert_eq!(check(preemptor, nodes, existing, pdbs, &[], 0), want);
}

#[test]
fn pods_nominated_to_a_node_keep_their_room() {
    // n1 could take the preemptor by evicting `low`, but an equal-priority pod is already
    // nominated there: n2 is chosen.
    let waiting = pod("waiting", 10, "1", "").info();
    let got = check(
        pod("hi", 10, "2", ""),
        &["n1", "n2"],
        vec![pod("low", 1, "1", "n1"), pod("low2", 1, "2", "n2")],
        vec![],
        &[("n1", waiting)],
        0,
    );
    assert_eq!(
        got,
        (nominated_to("n2"), victims(&["low2"]), Status::success())
    );
}

#[test]
fn the_dry_run_starts_at_the_random_offset_and_stops_at_enough_candidates() {
    // One candidate is enough (percentage 0, absolute 1): the node examined first wins.
    let plugin = DefaultPreemption::from_args(Some(&serde_json::json!({
        "minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1
    })))
    .unwrap_or_else(|e| unreachable!("{e:?}"));
    let got = check_with(
        plugin,
        pod("hi", 10, "2", ""),
        &["n1", "n2", "n3"],
        vec![
            pod("a", 1, "2", "n1"),
            pod("b", 1, "2", "n2"),
            pod("c", 5, "2", "n3"),
        ],
        vec![],
        &[],
        2,
    );
    assert_eq!(
        got,
        (nominated_to("n3"), victims(&["c"]), Status::success())
    );
}

#[test]
fn a_terminating_victim_on_the_nominated_node_makes_the_pod_wait() {
    let preemptor = pod("hi", 10, "2", "").with(|p| {
        p.status = Some(PodStatus {
            nominated_node_name: Some("n1".into()),
            ..Default::default()
        });
    });
    let terminating = pod("low", 1, "2", "n1").with(|p| {
        p.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    });
    let got = check(preemptor, &["n1"], vec![terminating], vec![], &[], 0);
    assert_eq!(
        got,
        (
            None,
            vec![],
            Status::unschedulable(
                "preemption: not eligible due to a terminating pod on the nominated node."
            )
        )
    );
}

/// A victim chosen by a running preemption whose deletion the snapshot does not show yet
/// counts as terminating: the preemptor's retry must not pick a second victim for the room
/// the first is about to free.
#[rstest]
#[case::a_victim_not_yet_seen_deleted_makes_the_pod_wait(
    &["uid-low"],
    (
        None,
        vec![],
        Status::unschedulable(
            "preemption: not eligible due to a terminating pod on the nominated node."
        )
    )
)]
#[case::once_gone_the_pod_may_preempt_again(&[], (nominated_to("n1"), victims(&["low"]), Status::success()))]
#[case::a_pod_created_again_under_a_victims_name_is_another_pod(
    &["uid-low-deleted"],
    (nominated_to("n1"), victims(&["low"]), Status::success())
)]
fn victims_in_flight_hold_the_preemptor_back(#[case] in_flight: &[&str], #[case] want: Outcome) {
    let preemptor = pod("hi", 10, "2", "").with(|p| {
        p.status = Some(PodStatus {
            nominated_node_name: Some("n1".into()),
            ..Default::default()
        });
    });
    let plugin = DefaultPreemption::from_args(None).unwrap_or_else(|e| unreachable!("{e:?}"));
    plugin
        .preempting
        .add_victims(in_flight.iter().map(|k| PodKey::from(*k)));
    let got = check_with(
        plugin,
        preemptor,
        &["n1"],
        vec![pod("low", 1, "2", "n1")],
        vec![],
        &[],
        0,
    );
    assert_eq!(got, want);
}

#[rstest]
#[case::no_pdb(vec![], vec!["a", "b", "c"], (vec![], vec!["a", "b", "c"]))]
#[case::budget_of_one_lets_the_first_go(
    vec![pdb("db", 1)],
    vec!["a", "b", "c"],
    (vec!["b", "c"], vec!["a"])
)]
#[case::empty_selector_matches_nothing(
    vec![Arc::new(PodDisruptionBudget {
        metadata: Default::default(),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(V1LabelSelector::default()),
            ..Default::default()
        }),
        status: None,
    })],
    vec!["a"],
    (vec![], vec!["a"])
)]
#[case::other_namespace_does_not_count(
    vec![Arc::new(PodDisruptionBudget {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: Some("prod".into()),
            ..Default::default()
        },
        ..(*pdb("db", 0)).clone()
    })],
    vec!["a"],
    (vec![], vec!["a"])
)]
#[case::already_disrupted_pods_do_not_count(
    vec![Arc::new(PodDisruptionBudget {
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: 0,
            disrupted_pods: Some(BTreeMap::from([(
                "a".to_string(),
                Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            )])),
            ..Default::default()
        }),
        ..(*pdb("db", 0)).clone()
    })],
    vec!["a", "b"],
    (vec!["b"], vec!["a"])
)]
fn pdb_violations(
    #[case] pdbs: Vec<Arc<PodDisruptionBudget>>,
    #[case] pods: Vec<&str>,
    #[case] want: (Vec<&str>, Vec<&str>),
) {
    let infos: Vec<Arc<PodInfo>> = pods
        .iter()
        .map(|n| make_pod(n).label("app", "db").info())
        .collect();
    let (v, nv) = split_by_pdb_violation(infos, &pdbs);
    let names =
        |l: Vec<Arc<PodInfo>>| -> Vec<String> { l.iter().map(|p| p.name().to_string()).collect() };
    let want_names = |l: Vec<&str>| -> Vec<String> { l.into_iter().map(String::from).collect() };
    assert_eq!(
        (names(v), names(nv)),
        (want_names(want.0), want_names(want.1))
    );
}

#[rstest]
#[case::defaults(None, Ok(DefaultPreemptionArgs {
    min_candidate_nodes_percentage: 10,
    min_candidate_nodes_absolute: 100,
}))]
#[case::nulls_are_defaults(
    Some(serde_json::json!({"minCandidateNodesPercentage": null, "minCandidateNodesAbsolute": null})),
    Ok(DefaultPreemptionArgs::default())
)]
#[case::set(
    Some(serde_json::json!({"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 5})),
    Ok(DefaultPreemptionArgs { min_candidate_nodes_percentage: 20, min_candidate_nodes_absolute: 5 })
)]
#[case::percentage_out_of_range(
    Some(serde_json::json!({"minCandidateNodesPercentage": 101})),
    Err(vec![ArgsError::new("minCandidateNodesPercentage", "Invalid value: 101: not in valid range [0, 100]")])
)]
#[case::negative_absolute(
    Some(serde_json::json!({"minCandidateNodesAbsolute": -1})),
    Err(vec![ArgsError::new("minCandidateNodesAbsolute", "Invalid value: -1: not in valid range [0, inf)")])
)]
#[case::both_zero(
    Some(serde_json::json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})),
    Err(vec![
        ArgsError::new("minCandidateNodesPercentage", "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
        ArgsError::new("minCandidateNodesAbsolute", "Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"),
    ])
)]
fn args_decode_and_validate(
    #[case] args: Option<serde_json::Value>,
    #[case] want: Result<DefaultPreemptionArgs, Vec<ArgsError>>,
) {
    assert_eq!(
        DefaultPreemption::from_args(args.as_ref()).map(|p| p.args().clone()),
        want
    );
}

#[test]
fn unknown_args_fields_are_rejected() {
    let got = DefaultPreemption::from_args(Some(&serde_json::json!({"minCandidates": 1})))
        .map(|p| p.args().clone())
        .map_err(|e| {
            e.iter()
                .map(|e| e.message.starts_with("unknown field `minCandidates`"))
                .collect::<Vec<_>>()
        });
    assert_eq!(got, Err(vec![true]));
}

#[rstest]
#[case::absolute_dominates_small_clusters(DefaultPreemptionArgs::default(), 50, 50)]
#[case::absolute_floor(DefaultPreemptionArgs::default(), 500, 100)]
#[case::percentage_dominates_large_clusters(DefaultPreemptionArgs::default(), 5000, 500)]
#[case::percentage_only(
    DefaultPreemptionArgs { min_candidate_nodes_percentage: 50, min_candidate_nodes_absolute: 0 },
    7,
    3
)]
fn number_of_candidates(
    #[case] args: DefaultPreemptionArgs,
    #[case] nodes: usize,
    #[case] want: usize,
) {
    assert_eq!(args.num_candidates(nodes), want);
}

#[rstest]
#[case::a_pod_without_running_preemption_passes("other", Status::success())]
#[case::a_preemptor_waits_for_its_victims(
    "hi",
    Status::unresolvable("waiting for the preemption for this pod to be finished")
)]
fn pre_enqueue_holds_back_a_running_preemption(#[case] preempting: &str, #[case] want: Status) {
    let handle = Handle::offline();
    let plugin = new(None, &handle).unwrap_or_else(|e| unreachable!("{e:?}"));
    handle
        .preempting_pods
        .start(&PodKey::from(format!("uid-{preempting}").as_str()));
    let got = plugin
        .as_pre_enqueue()
        .map(|p| p.pre_enqueue(&pod("hi", 10, "1", "").info()));
    assert_eq!(got, Some(want));
}

/// `(deletionTimestamp set, DisruptionTarget condition as (status, reason))`.
#[rstest]
#[case::running(false, None, false)]
#[case::terminating_without_condition(true, None, true)]
#[case::terminating_preempted_by_a_scheduler(true, Some(("True", "PreemptionByScheduler")), true)]
#[case::terminating_for_another_reason(true, Some(("True", "EvictionByEvictionAPI")), false)]
fn terminating_by_preemption_reads_the_disruption_target(
    #[case] deleting: bool,
    #[case] condition: Option<(&str, &str)>,
    #[case] want: bool,
) {
    let p = make_pod("v")
        .with(|p| {
            if deleting {
                p.metadata.deletion_timestamp =
                    Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
            }
            if let Some((status, reason)) = condition {
                p.status = Some(PodStatus {
                    conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                        type_: "DisruptionTarget".into(),
                        status: status.into(),
                        reason: Some(reason.into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                });
            }
        })
        .obj();
    assert_eq!(terminating_by_preemption(&p), want);
}

use std::sync::Arc;

use framework::testing::{make_node, make_pod};
use framework::{Code, CycleState, Handle, Parallelizer, Snapshot, Status};
use rstest::rstest;

use super::*;
use crate::runtime::{Framework, ProfileSpec};
use crate::testing::{Fake, FakeRegistry};

#[rstest]
#[case::tiny_cluster_checks_all(50, None, 50)]
#[case::just_below_minimum(99, None, 99)]
#[case::hundred_nodes(100, None, 100)]
#[case::five_hundred(500, None, 230)]
#[case::thousand(1000, None, 420)]
#[case::five_thousand(5000, None, 500)]
#[case::fifteen_thousand_floors_at_five_percent(15000, None, 750)]
#[case::explicit_percentage(1000, Some(30), 300)]
#[case::explicit_percentage_floors_at_minimum(1000, Some(1), 100)]
#[case::zero_means_adaptive(5000, Some(0), 500)]
fn feasible_nodes_to_find(#[case] nodes: usize, #[case] pct: Option<i32>, #[case] want: usize) {
    assert_eq!(num_feasible_nodes_to_find(pct, nodes), want);
}

fn framework_with(fakes: Vec<Fake>, parallelizer: Parallelizer) -> Framework {
    let names: Vec<&'static str> = fakes.iter().map(|f| f.name).collect();
    let registry = FakeRegistry::with(fakes);
    let mut spec = ProfileSpec {
        scheduler_name: "test".into(),
        ..Default::default()
    };
    for (i, n) in ["Sort", "Bind"].iter().chain(names.iter()).enumerate() {
        spec.multi_point.enabled.push((n.to_string(), 1));
        spec.plugin_args
            .insert(n.to_string(), (i, serde_json::json!({ "fake": n })));
    }
    let handle = Handle::new(parallelizer, Arc::new(framework::handle::NoopClient));
    match Framework::build(&spec, &registry, handle, &[]) {
        Ok((f, _)) => f,
        Err(e) => panic!("building test framework: {e:?}"),
    }
}

fn snapshot(n: usize) -> Snapshot {
    Snapshot::new(
        (0..n)
            .map(|i| Arc::new(make_node(&format!("n{i}")).obj()))
            .collect(),
        [],
    )
}

fn fit_message(fakes: Vec<Fake>, nodes: usize) -> String {
    let f = framework_with(fakes, Parallelizer::sequential());
    let snap = snapshot(nodes);
    let pod = make_pod("p").info();
    match ScheduleAlgorithm::new(1, None).schedule_pod(
        &f,
        &mut CycleState::new(),
        &pod,
        &snap,
        None,
    ) {
        Err(e) => e.to_string(),
        Ok(r) => format!("scheduled on {}", r.suggested_host),
    }
}

#[test]
fn histogram_sorts_entries_as_strings() {
    let mut rejects: Vec<(String, Status)> = Vec::new();
    for i in 0..10 {
        rejects.push((format!("n{i}"), Status::unschedulable("Insufficient cpu")));
    }
    for i in 10..12 {
        rejects.push((
            format!("n{i}"),
            Status::unresolvable("node(s) had untolerated taint(s)"),
        ));
    }
    let refs: Vec<(&str, Status)> = rejects
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    assert_eq!(
        fit_message(vec![Fake::named("A").rejecting(&refs)], 12),
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s)."
    );
}

#[test]
fn every_reason_of_a_node_counts() {
    let two = Status::with_reasons(
        Code::Unschedulable,
        ["Insufficient cpu", "Insufficient memory"],
    );
    assert_eq!(
        fit_message(
            vec![Fake::named("A").rejecting(&[("n0", two.clone()), ("n1", two)])],
            2
        ),
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
    );
}

#[test]
fn pre_filter_rejection_replaces_the_histogram() {
    assert_eq!(
        fit_message(
            vec![Fake::named("A").pre_filtering(None, Status::unresolvable("pod has unbound PVCs"))],
            3
        ),
        "0/3 nodes are available: pod has unbound PVCs."
    );
}

#[test]
fn nodes_excluded_by_pre_filter_result_count_as_absent() {
    let fakes = vec![
        Fake::named("P").pre_filtering(
            Some(framework::PreFilterResult::nodes(["n0"])),
            Status::success(),
        ),
        Fake::named("F").rejecting(&[("n0", Status::unschedulable("Too many pods"))]),
    ];
    assert_eq!(
        fit_message(fakes, 3),
        "0/3 nodes are available: 1 Too many pods, 2 node(s) didn't satisfy plugin(s) [P]."
    );
}

#[test]
fn no_nodes_is_an_error() {
    assert_eq!(
        fit_message(vec![], 0),
        "no nodes available to schedule pods"
    );
}

#[test]
fn fit_error_appends_post_filter_message_without_period() {
    let mut d = Diagnosis::new();
    d.node_to_status
        .set("n0", Status::unschedulable("Insufficient cpu"));
    d.post_filter_msg =
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
            .into();
    let e = FitError {
        num_all_nodes: 1,
        diagnosis: d,
    };
    assert_eq!(
        e.to_string(),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

#[test]
fn highest_total_wins() {
    let f = framework_with(
        vec![Fake::named("S").scoring(&[("n0", 10), ("n1", 90), ("n2", 50)])],
        Parallelizer::sequential(),
    );
    let r = ScheduleAlgorithm::new(7, None).schedule_pod(
        &f,
        &mut CycleState::new(),
        &make_pod("p").info(),
        &snapshot(3),
        None,
    );
    assert_eq!(
        r.map_err(|e| e.to_string()),
        Ok(ScheduleResult {
            suggested_host: "n1".into(),
            evaluated_nodes: 3,
            feasible_nodes: 3
        })
    );
}

#[test]
fn ties_are_broken_across_all_tied_nodes() {
    let f = framework_with(
        vec![Fake::named("S").scoring(&[("n0", 50), ("n1", 50), ("n2", 50), ("n3", 10)])],
        Parallelizer::sequential(),
    );
    let snap = snapshot(4);
    let pod = make_pod("p").info();
    let mut chosen = std::collections::BTreeSet::new();
    for seed in 0..64 {
        if let Ok(r) = ScheduleAlgorithm::new(seed, None).schedule_pod(
            &f,
            &mut CycleState::new(),
            &pod,
            &snap,
            None,
        ) {
            chosen.insert(r.suggested_host);
        }
    }
    assert_eq!(
        chosen.into_iter().collect::<Vec<_>>(),
        vec!["n0", "n1", "n2"]
    );
}

#[test]
fn filtering_resumes_round_robin_where_the_last_cycle_stopped() {
    let f = framework_with(
        vec![Fake::named("F").rejecting(&[])],
        Parallelizer::sequential(),
    );
    let snap = snapshot(250);
    let pod = make_pod("p").info();
    let mut algo = ScheduleAlgorithm::new(1, Some(40));
    let mut explained = Vec::new();
    for _ in 0..3 {
        let mut e = Explanation::default();
        let _ = algo.schedule_pod(&f, &mut CycleState::new(), &pod, &snap, Some(&mut e));
        explained.push((e.filter.len(), e.filter.first().map(|(n, _)| n.clone())));
    }
    // 40% of 250 is 100 nodes per cycle: n0.., then n100.., then n200.. wrapping.
    assert_eq!(
        explained,
        vec![
            (100, Some("n0".into())),
            (100, Some("n100".into())),
            (100, Some("n200".into()))
        ]
    );
}

/// What a user can observe of a cycle: the host and feasible count, or the message; and
/// how many nodes were looked at.
type Observed = (Result<(String, usize), String>, usize);

/// Runs four cycles over `nodes` nodes where node `i` passes when `fits(i)`.
fn four_cycles(
    par: Parallelizer,
    nodes: usize,
    fits: fn(usize) -> bool,
    pct: Option<i32>,
) -> Vec<Observed> {
    let rejects: Vec<(String, Status)> = (0..nodes)
        .filter(|&i| !fits(i))
        .map(|i| (format!("n{i}"), Status::unschedulable("Too many pods")))
        .collect();
    let refs: Vec<(&str, Status)> = rejects
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    let f = framework_with(
        vec![
            Fake::named("F").rejecting(&refs),
            Fake::named("S").scoring(&[("n0", 3), ("n1500", 3), ("n2900", 3)]),
        ],
        par,
    );
    let snap = snapshot(nodes);
    let pod = make_pod("p").info();
    let mut algo = ScheduleAlgorithm::new(3, pct);
    (0..4)
        .map(|_| {
            let r = algo.schedule_pod(&f, &mut CycleState::new(), &pod, &snap, None);
            (
                r.as_ref()
                    .map(|r| (r.suggested_host.clone(), r.feasible_nodes))
                    .map_err(|e| e.to_string()),
                r.map(|r| r.evaluated_nodes).unwrap_or(0),
            )
        })
        .collect()
}

#[rstest]
#[case::most_nodes_fit(3000, |_| true, None)]
#[case::every_second_node_fits(3000, |i| i % 2 == 0, Some(50))]
#[case::pass_completes_inside_a_parallel_chunk(3000, |i| i >= 1500 || i % 2 == 0, Some(40))]
#[case::few_nodes_fit_so_waves_grow(3000, |i| i % 50 == 0, None)]
#[case::only_the_first_node_fits(3000, |i| i == 0, None)]
fn parallel_and_sequential_filtering_agree(
    #[case] nodes: usize,
    #[case] fits: fn(usize) -> bool,
    #[case] pct: Option<i32>,
) {
    assert_eq!(
        four_cycles(Parallelizer::new(4), nodes, fits, pct),
        four_cycles(Parallelizer::sequential(), nodes, fits, pct)
    );
}

#[test]
fn the_cycle_tells_plugins_how_many_nodes_there_are() {
    let f = framework_with(
        vec![Fake::named("S").scoring(&[])],
        Parallelizer::sequential(),
    );
    let mut state = CycleState::new();
    let _ = ScheduleAlgorithm::new(1, None).schedule_pod(
        &f,
        &mut state,
        &make_pod("p").info(),
        &snapshot(7),
        None,
    );
    assert_eq!(state.num_all_nodes(), 7);
}

/// With `status.nominatedNodeName`, or a nomination only the nominator holds yet (its
/// status write not landed), the nominated node is tried first and taken when it passes,
/// even if another node scores higher; when it does not pass, every node is evaluated as
/// usual.
#[rstest]
#[case::a_fitting_nominated_node_is_taken(Some("n0"), None, Ok(("n0".to_string(), 1, 1)))]
#[case::a_rejecting_nominated_node_falls_back_to_all(Some("n2"), None, Ok(("n1".to_string(), 3, 2)))]
#[case::an_unknown_nominated_node_is_ignored(Some("gone"), None, Ok(("n1".to_string(), 3, 2)))]
#[case::a_nomination_not_yet_in_the_status_is_tried_first(
    None,
    Some("n0"),
    Ok(("n0".to_string(), 1, 1))
)]
#[case::the_status_wins_over_the_nominator(Some("n0"), Some("n1"), Ok(("n0".to_string(), 1, 1)))]
#[case::without_a_nomination_the_best_score_wins(None, None, Ok(("n1".to_string(), 3, 2)))]
fn the_nominated_node_is_tried_first(
    #[case] in_status: Option<&str>,
    #[case] in_nominator: Option<&str>,
    #[case] want: Result<(String, usize, usize), String>,
) {
    let f = framework_with(
        vec![
            Fake::named("F").rejecting(&[("n2", Status::unschedulable("no"))]),
            Fake::named("S").scoring(&[("n0", 10), ("n1", 90), ("n2", 50)]),
        ],
        Parallelizer::sequential(),
    );
    let pod = make_pod("p")
        .with(|p| {
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                nominated_node_name: in_status.map(String::from),
                ..Default::default()
            })
        })
        .info();
    let mut algo = ScheduleAlgorithm::new(7, None);
    if let Some(node) = in_nominator {
        algo.set_nominated_pods(NominatedPods::from([(node.to_string(), vec![pod.clone()])]));
    }
    let r = algo.schedule_pod(&f, &mut CycleState::new(), &pod, &snapshot(3), None);
    assert_eq!(
        r.map(|r| (r.suggested_host, r.evaluated_nodes, r.feasible_nodes))
            .map_err(|e| e.to_string()),
        want
    );
}

/// What a pass over all nodes should hand Score, by the plain rule: from the round-robin
/// start, the first `to_find` nodes that fit, in list order; the next cycle starts after
/// the last node looked at.
fn expected_feasible(
    n: usize,
    fits: fn(usize) -> bool,
    to_find: usize,
    start: usize,
) -> (Vec<String>, usize) {
    let (mut found, mut looked) = (Vec::new(), 0);
    for i in 0..n {
        if found.len() >= to_find {
            break;
        }
        looked += 1;
        if fits((start + i) % n) {
            found.push(format!("n{}", (start + i) % n));
        }
    }
    (found, (start + looked) % n)
}

/// The feasible list Score gets (taken from the snapshot's node list when it is one run of
/// it, cloned otherwise) holds the nodes, in the order, and with the rows of the plain
/// rule, and the round-robin start moves on the same, over cycles that wrap around the
/// list's end, sequential or parallel.
#[rstest]
#[case::every_node_fits(250, |_| true, Some(40), Parallelizer::sequential())]
#[case::every_node_fits_and_the_pass_wraps(250, |_| true, Some(60), Parallelizer::sequential())]
#[case::some_nodes_are_rejected(250, |i| i % 7 != 3, Some(40), Parallelizer::sequential())]
#[case::every_node_fits_in_parallel(3000, |_| true, Some(40), Parallelizer::new(4))]
#[case::some_rejected_in_parallel(3000, |i| i % 5 != 0, Some(40), Parallelizer::new(4))]
fn the_feasible_list_and_the_round_robin_start_follow_the_plain_rule(
    #[case] nodes: usize,
    #[case] fits: fn(usize) -> bool,
    #[case] pct: Option<i32>,
    #[case] par: Parallelizer,
) {
    let rejects: Vec<(String, Status)> = (0..nodes)
        .filter(|&i| !fits(i))
        .map(|i| (format!("n{i}"), Status::unschedulable("Too many pods")))
        .collect();
    let refs: Vec<(&str, Status)> = rejects
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    let f = framework_with(vec![Fake::named("F").rejecting(&refs)], par);
    let snap = snapshot(nodes);
    let pod = make_pod("p").info();
    let to_find = num_feasible_nodes_to_find(pct, nodes);
    let mut algo = ScheduleAlgorithm::new(1, pct);
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let mut start = 0;
    for _ in 0..5 {
        let (names, next) = expected_feasible(nodes, fits, to_find, start);
        let rows: Vec<NodeRow> = names
            .iter()
            .filter_map(|n| snap.position(n))
            .map(|i| snap.rows()[i])
            .collect();
        want.push((names, Some(rows), next));
        start = next;
        let mut state = CycleState::new();
        let (feasible, _) = algo
            .find_nodes_that_fit_pod(&f, &mut state, &pod, &snap, None, None)
            .unwrap_or_else(|e| panic!("cycle failed: {e}"));
        got.push((
            feasible
                .nodes(snap.node_infos())
                .iter()
                .map(|n| n.name().to_string())
                .collect::<Vec<_>>(),
            feasible.rows.clone(),
            algo.next_start_node_index,
        ));
    }
    assert_eq!(got, want);
}

/// What a filter pass over `nodes` nodes gave: the feasible nodes, each rejected node with
/// its plugin and reasons (by name), the unschedulable plugins and the next round-robin
/// start; or the cycle's error.
type PassOutcome = Result<(Vec<String>, Vec<(String, String)>, Vec<&'static str>, usize), String>;

fn filter_pass(fakes: Vec<Fake>, nodes: usize, par: Parallelizer, sampled: bool) -> PassOutcome {
    let f = framework_with(fakes, par);
    let snap = snapshot(nodes);
    let pod = make_pod("p").info();
    let mut algo = ScheduleAlgorithm::new(1, Some(40));
    let mut state = CycleState::new();
    state.set_record_plugin_metrics(sampled);
    let (feasible, diagnosis) = algo
        .find_nodes_that_fit_pod(&f, &mut state, &pod, &snap, None, None)
        .map_err(|e| e.to_string())?;
    let mut rejected: Vec<(String, String)> = diagnosis
        .node_to_status
        .explicit()
        .map(|(n, s)| {
            (
                n.to_string(),
                format!(
                    "{}: {:?} {}",
                    s.plugin().unwrap_or("-"),
                    s.code(),
                    s.message()
                ),
            )
        })
        .collect();
    rejected.sort();
    Ok((
        feasible
            .nodes(snap.node_infos())
            .iter()
            .map(|n| n.name().to_string())
            .collect(),
        rejected,
        diagnosis.unschedulable_plugins.into_iter().collect(),
        algo.next_start_node_index,
    ))
}

/// The rejected nodes with their plugin and reasons, the unschedulable plugins and the
/// next start a pass should give; or the cycle's error.
type WantedPass = Result<(Vec<(&'static str, &'static str)>, Vec<&'static str>, usize), String>;

/// An unsampled cycle decides the nodes plugin by plugin, a sampled one node by node (each
/// call timed): both give the same feasible nodes, the status of each rejected node from
/// the first plugin that rejects it, the same plugins and the same next start. Of 250
/// nodes, 100 are needed: the first wave takes 100 nodes, the next 64, and the pass stops
/// at the 100th node that fits; an error on a node after that is never seen, one before it
/// fails the cycle.
#[rstest]
#[case::first_rejection_wins(
    &[("n3", Status::unschedulable("a")), ("n10", Status::unschedulable("a"))],
    &[("n10", Status::unschedulable("b")), ("n20", Status::unresolvable("c"))],
    Ok((
        vec![("n10", "A: Unschedulable a"), ("n20", "B: UnschedulableAndUnresolvable c"), ("n3", "A: Unschedulable a")],
        vec!["A", "B"],
        103,
    ))
)]
#[case::a_later_plugin_rejecting_an_earlier_node(
    &[("n5", Status::unschedulable("a")), ("n130", Status::unschedulable("a"))],
    &[("n100", Status::unschedulable("b"))],
    Ok((vec![("n100", "B: Unschedulable b"), ("n5", "A: Unschedulable a")], vec!["A", "B"], 102))
)]
#[case::an_error_after_the_last_node_needed_is_not_seen(
    &[("n1", Status::unschedulable("a"))],
    &[("n200", Status::error("broken"))],
    Ok((vec![("n1", "A: Unschedulable a")], vec!["A"], 101))
)]
#[case::an_error_before_it_fails_the_cycle(
    &[("n1", Status::unschedulable("a"))],
    &[("n50", Status::error("broken"))],
    Err("running \"B\" filter plugin: broken".to_string())
)]
#[case::an_error_on_a_node_an_earlier_plugin_rejected_is_not_seen(
    &[("n50", Status::unschedulable("a"))],
    &[("n50", Status::error("broken"))],
    Ok((vec![("n50", "A: Unschedulable a")], vec!["A"], 101))
)]
fn deciding_nodes_plugin_by_plugin_equals_node_by_node(
    #[case] a: &[(&str, Status)],
    #[case] b: &[(&str, Status)],
    #[case] want: WantedPass,
) {
    let fakes = || vec![Fake::named("A").rejecting(a), Fake::named("B").rejecting(b)];
    let columns = filter_pass(fakes(), 250, Parallelizer::sequential(), false);
    let rows = filter_pass(fakes(), 250, Parallelizer::sequential(), true);
    assert_eq!(columns, rows);
    let got = columns.map(|(feasible, rejected, plugins, next)| {
        assert_eq!(feasible.len(), 100);
        (rejected, plugins, next)
    });
    let want = want.map(|(rejected, plugins, next)| {
        (
            rejected
                .into_iter()
                .map(|(n, s)| (n.to_string(), s.to_string()))
                .collect::<Vec<_>>(),
            plugins,
            next,
        )
    });
    assert_eq!(got, want);
}

/// The same in parallel chunks: of 3,000 nodes 1,200 are needed, so the first wave (1,200
/// nodes) is filtered in parallel, each chunk plugin by plugin in an unsampled cycle and node
/// by node in a sampled one; rejections by both plugins fall on both sides of chunk
/// boundaries and of the last node needed.
#[test]
fn deciding_nodes_plugin_by_plugin_in_parallel_equals_node_by_node() {
    let a: Vec<(String, Status)> = [5, 299, 300, 301, 1190, 1250]
        .iter()
        .map(|i| (format!("n{i}"), Status::unschedulable("a")))
        .collect();
    let b: Vec<(String, Status)> = [3, 300, 600, 1199, 1203, 1300]
        .iter()
        .map(|i| (format!("n{i}"), Status::unresolvable("b")))
        .collect();
    fn refs(v: &[(String, Status)]) -> Vec<(&str, Status)> {
        v.iter().map(|(n, s)| (n.as_str(), s.clone())).collect()
    }
    let fakes = || {
        vec![
            Fake::named("A").rejecting(&refs(&a)),
            Fake::named("B").rejecting(&refs(&b)),
        ]
    };
    let columns = filter_pass(fakes(), 3000, Parallelizer::new(4), false);
    let rows = filter_pass(fakes(), 3000, Parallelizer::new(4), true);
    let sequential = filter_pass(fakes(), 3000, Parallelizer::sequential(), true);
    assert_eq!(columns, rows);
    assert_eq!(columns, sequential);
    let got = columns
        .map(|(feasible, rejected, plugins, next)| (feasible.len(), rejected.len(), plugins, next));
    assert_eq!(got, Ok((1200, 9, vec!["A", "B"], 1209)));
}

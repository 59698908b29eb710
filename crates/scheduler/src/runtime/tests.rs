use framework::{Code, Handle, Status};
use rstest::rstest;

use super::*;
use crate::testing::{Fake, FakeRegistry};

/// A profile spec: `multi` enabled at multiPoint, plus per-point sets; every named plugin
/// gets its fake name in args so the fake registry can build it.
/// `(point, enabled with weights, disabled)`.
type PointSet<'a> = (ExtensionPoint, &'a [(&'a str, i32)], &'a [&'a str]);

fn spec(multi: &[(&str, i32)], points: &[PointSet<'_>]) -> ProfileSpec {
    let mut s = ProfileSpec {
        scheduler_name: "test".into(),
        ..Default::default()
    };
    s.multi_point.enabled = multi.iter().map(|(n, w)| (n.to_string(), *w)).collect();
    for (p, en, dis) in points {
        s.points.insert(
            *p,
            PluginSetSpec {
                enabled: en.iter().map(|(n, w)| (n.to_string(), *w)).collect(),
                disabled: dis.iter().map(|n| n.to_string()).collect(),
            },
        );
    }
    let mut names: Vec<String> = s
        .multi_point
        .enabled
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    for set in s.points.values() {
        names.extend(set.enabled.iter().map(|(n, _)| n.clone()));
    }
    for (i, n) in names.into_iter().enumerate() {
        s.plugin_args
            .insert(n.clone(), (i, serde_json::json!({ "fake": n })));
    }
    s
}

fn fakes() -> Vec<Fake> {
    vec![
        Fake::named("F1").rejecting(&[]),
        Fake::named("F2").rejecting(&[]),
        Fake::named("S1").scoring(&[]),
        Fake::named("FS").rejecting(&[]).scoring(&[]),
    ]
}

fn build(s: &ProfileSpec) -> Result<(Framework, Vec<String>), Vec<BuildError>> {
    Framework::build(
        s,
        &FakeRegistry::with(fakes()),
        Handle::offline(),
        &["NotYet"],
    )
}

type Layout = (Vec<&'static str>, Vec<(&'static str, i64)>);

fn layout(f: &Framework) -> Layout {
    (f.plugin_names(ExtensionPoint::Filter), f.score_weights())
}

#[rstest]
#[case::multipoint_expands_to_implemented_points(
    spec(&[("Sort", 0), ("Bind", 0), ("F1", 0), ("FS", 3), ("S1", 0)], &[]),
    (vec!["F1", "FS"], vec![("FS", 3), ("S1", 1)])
)]
#[case::point_override_goes_first_and_wins_weight(
    spec(&[("Sort", 0), ("Bind", 0), ("F1", 0), ("FS", 3), ("S1", 0)], &[(ExtensionPoint::Filter, &[("F2", 0), ("FS", 0)], &[]), (ExtensionPoint::Score, &[("FS", 7)], &[])]),
    (vec!["FS", "F1", "F2"], vec![("FS", 7), ("S1", 1)])
)]
#[case::disabled_at_a_point(
    spec(&[("Sort", 0), ("Bind", 0), ("F1", 0), ("FS", 3)], &[(ExtensionPoint::Filter, &[], &["F1"])]),
    (vec!["FS"], vec![("FS", 3)])
)]
#[case::star_disables_multipoint_at_that_point(
    spec(&[("Sort", 0), ("Bind", 0), ("F1", 0), ("FS", 3)], &[(ExtensionPoint::Filter, &[("F2", 0)], &["*"])]),
    (vec!["F2"], vec![("FS", 3)])
)]
fn builds(#[case] s: ProfileSpec, #[case] want: Layout) {
    let got = build(&s)
        .map(|(f, _)| layout(&f))
        .map_err(|e| e.iter().map(|e| e.to_string()).collect::<Vec<_>>());
    assert_eq!(got, Ok(want));
}

#[rstest]
#[case::point_not_implemented(
    spec(&[("Sort", 0), ("Bind", 0)], &[(ExtensionPoint::Score, &[("F1", 0)], &[])]),
    vec!["plugins.score.enabled[0]: plugin \"F1\" does not extend ScorePlugin plugin"]
)]
#[case::duplicate_at_a_point(
    spec(&[("Sort", 0), ("Bind", 0)], &[(ExtensionPoint::Filter, &[("F1", 0), ("F1", 0)], &[])]),
    vec!["plugins.filter.enabled[1]: plugin \"F1\" already registered as \"FilterPlugin\""]
)]
#[case::no_queue_sort(
    spec(&[("Bind", 0), ("F1", 0)], &[]),
    vec!["plugins.queueSort: only one queue sort plugin required for profile with scheduler name \"test\", but got 0"]
)]
#[case::no_bind(
    spec(&[("Sort", 0), ("F1", 0)], &[]),
    vec!["plugins.bind: at least one bind plugin is needed for profile with scheduler name \"test\""]
)]
#[case::unknown_plugin(
    spec(&[("Sort", 0), ("Bind", 0), ("Nope", 0)], &[]),
    vec!["plugins.multiPoint.enabled[2]: plugin \"Nope\" does not exist"]
)]
fn rejects(#[case] s: ProfileSpec, #[case] want: Vec<&str>) {
    let got = build(&s)
        .map(|_| ())
        .map_err(|e| e.iter().map(|e| e.to_string()).collect::<Vec<_>>());
    assert_eq!(got, Err(want.into_iter().map(String::from).collect()));
}

#[test]
fn args_errors_are_reported_under_plugin_config() {
    let mut s = spec(&[("Sort", 0), ("Bind", 0), ("F1", 0)], &[]);
    s.plugin_args
        .insert("F1".into(), (4, serde_json::json!({"fake": "broken"})));
    let got = build(&s)
        .map(|_| ())
        .map_err(|e| e.iter().map(|e| e.to_string()).collect::<Vec<_>>());
    assert_eq!(
        got,
        Err(vec![
            "pluginConfig[4].args.weight: initializing plugin \"F1\": must be positive".to_string()
        ])
    );
}

#[test]
fn unimplemented_upstream_plugins_are_left_out_with_a_warning() {
    let s = spec(&[("Sort", 0), ("Bind", 0), ("F1", 0), ("NotYet", 2)], &[]);
    let got = build(&s).map(|(f, w)| (layout(&f), w)).map_err(|e| e.len());
    assert_eq!(
        got,
        Ok((
            (vec!["F1"], vec![]),
            vec!["profile \"test\": upstream plugins not implemented by kubesched yet are left out: NotYet".to_string()]
        ))
    );
}

#[test]
fn filter_stops_at_first_rejection_and_attributes_plugin() {
    let registry = FakeRegistry::with(vec![
        Fake::named("A").rejecting(&[("n1", Status::unschedulable("a says no"))]),
        Fake::named("B").rejecting(&[("n1", Status::unschedulable("b says no"))]),
    ]);
    let s = spec(&[("Sort", 0), ("Bind", 0), ("A", 0), ("B", 0)], &[]);
    let (f, _) = Framework::build(&s, &registry, Handle::offline(), &[])
        .map_err(|e| e.len())
        .unwrap_or_else(|n| panic!("{n} errors"));
    let node = framework::testing::make_node("n1").info_with(&[]);
    let pod = framework::testing::make_pod("p").info();
    let mut rec = Vec::new();
    let status =
        f.run_filter_plugins_explained(&framework::CycleState::new(), &pod, &node, &mut rec);
    assert_eq!(
        (status.clone(), status.plugin(), rec),
        (
            Status::unschedulable("a says no").with_plugin("A"),
            Some("A"),
            vec![("A", Status::unschedulable("a says no").with_plugin("A"))]
        )
    );
}

#[test]
fn filter_errors_other_than_rejections_become_errors() {
    let registry = FakeRegistry::with(vec![
        Fake::named("A").rejecting(&[("n1", Status::new(Code::Wait, "huh"))])
    ]);
    let s = spec(&[("Sort", 0), ("Bind", 0), ("A", 0)], &[]);
    let (f, _) =
        Framework::build(&s, &registry, Handle::offline(), &[]).unwrap_or_else(|e| panic!("{e:?}"));
    let node = framework::testing::make_node("n1").info_with(&[]);
    let pod = framework::testing::make_pod("p").info();
    let status = f.run_filter_plugins(&framework::CycleState::new(), &pod, &node);
    assert_eq!(
        status,
        Status::error("running \"A\" filter plugin: huh").with_plugin("A")
    );
}

#[test]
fn scores_are_normalized_then_weighted() {
    let mut normalized = Fake::named("N").scoring(&[("n1", 5), ("n2", 10)]);
    normalized.normalize = true;
    let registry = FakeRegistry::with(vec![
        normalized,
        Fake::named("R").scoring(&[("n1", 30), ("n2", 20)]),
    ]);
    let s = spec(&[("Sort", 0), ("Bind", 0), ("N", 2), ("R", 1)], &[]);
    let (f, _) =
        Framework::build(&s, &registry, Handle::offline(), &[]).unwrap_or_else(|e| panic!("{e:?}"));
    let nodes: Vec<_> = ["n1", "n2"]
        .iter()
        .map(|n| std::sync::Arc::new(framework::testing::make_node(n).info_with(&[])))
        .collect();
    let pod = framework::testing::make_pod("p").info();
    let got = f.run_score_plugins(&framework::CycleState::new(), &pod, &nodes);
    assert_eq!(
        got,
        Ok(NodeScores {
            plugins: vec!["N", "R"],
            scores: vec![50, 30, 100, 20],
            totals: vec![130, 220],
        })
    );
}

#[test]
fn parallel_scoring_gives_the_sequential_scores() {
    // Above PARALLEL_SCORE_MIN_NODES the nodes are scored in chunks on the pool and the
    // chunks' columns merged back: the result must be the one-thread result.
    let n = super::PARALLEL_SCORE_MIN_NODES + 500;
    let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
    let scores = |m: i64| -> Vec<(&str, i64)> {
        names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.as_str(), (i as i64 * m) % 101))
            .collect()
    };
    let mut normalized = Fake::named("N").scoring(&scores(7));
    normalized.normalize = true;
    let registry = FakeRegistry::with(vec![normalized, Fake::named("R").scoring(&scores(13))]);
    let s = spec(&[("Sort", 0), ("Bind", 0), ("N", 2), ("R", 1)], &[]);
    let nodes: Vec<_> = names
        .iter()
        .map(|n| std::sync::Arc::new(framework::testing::make_node(n).info_with(&[])))
        .collect();
    let pod = framework::testing::make_pod("p").info();
    let run = |handle: Handle| {
        let (f, _) =
            Framework::build(&s, &registry, handle, &[]).unwrap_or_else(|e| panic!("{e:?}"));
        f.run_score_plugins(&framework::CycleState::new(), &pod, &nodes)
    };
    let parallel = Handle::new(
        framework::Parallelizer::new(4),
        Handle::offline().client.clone(),
    );
    let sequential = run(Handle::offline());
    assert_eq!(sequential.as_ref().map(|s| s.totals.len()), Ok(n));
    assert_eq!(run(parallel), sequential);
}

#[test]
fn out_of_range_scores_are_errors() {
    let registry = FakeRegistry::with(vec![Fake::named("R").scoring(&[("n1", 101)])]);
    let s = spec(&[("Sort", 0), ("Bind", 0), ("R", 1)], &[]);
    let (f, _) =
        Framework::build(&s, &registry, Handle::offline(), &[]).unwrap_or_else(|e| panic!("{e:?}"));
    let nodes = vec![std::sync::Arc::new(
        framework::testing::make_node("n1").info_with(&[]),
    )];
    let pod = framework::testing::make_pod("p").info();
    let got = f
        .run_score_plugins(&framework::CycleState::new(), &pod, &nodes)
        .map_err(|s| s.message());
    assert_eq!(
        got,
        Err("applying score defaultWeights on Score plugins: plugin \"R\" returns an invalid score 101, it should in the range of [0, 100] after normalizing".to_string())
    );
}

#[test]
fn pre_filter_unschedulable_runs_the_rest_and_unresolvable_stops() {
    let registry = FakeRegistry::with(vec![
        Fake::named("U").pre_filtering(None, Status::unschedulable("u")),
        Fake::named("X").pre_filtering(None, Status::unresolvable("x")),
        Fake::named("Z").pre_filtering(None, Status::success()),
    ]);
    let s = spec(
        &[("Sort", 0), ("Bind", 0), ("U", 0), ("X", 0), ("Z", 0)],
        &[],
    );
    let (f, _) =
        Framework::build(&s, &registry, Handle::offline(), &[]).unwrap_or_else(|e| panic!("{e:?}"));
    let pod = framework::testing::make_pod("p").info();
    let snap = framework::Snapshot::default();
    let mut ran = Vec::new();
    let (_, status, _) = f.run_pre_filter_plugins(
        &mut framework::CycleState::new(),
        &pod,
        &snap,
        Some(&mut ran),
    );
    let ran: Vec<&str> = ran.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        (status, ran),
        (Status::unresolvable("x").with_plugin("X"), vec!["U", "X"])
    );
}

#[test]
fn pre_filter_results_that_exclude_every_node_are_unresolvable() {
    let registry = FakeRegistry::with(vec![
        Fake::named("A").pre_filtering(
            Some(framework::PreFilterResult::nodes(["n1"])),
            Status::success(),
        ),
        Fake::named("B").pre_filtering(
            Some(framework::PreFilterResult::nodes(["n2"])),
            Status::success(),
        ),
    ]);
    let s = spec(&[("Sort", 0), ("Bind", 0), ("A", 0), ("B", 0)], &[]);
    let (f, _) =
        Framework::build(&s, &registry, Handle::offline(), &[]).unwrap_or_else(|e| panic!("{e:?}"));
    let pod = framework::testing::make_pod("p").info();
    let (_, status, plugins) = f.run_pre_filter_plugins(
        &mut framework::CycleState::new(),
        &pod,
        &framework::Snapshot::default(),
        None,
    );
    assert_eq!(
        (status, plugins),
        (
            Status::unresolvable("node(s) didn't satisfy plugin(s) [A B] simultaneously"),
            vec!["A", "B"]
        )
    );
}

/// What a PostFilter plugin gets: the cycle's filters (a fake here: the nominated pods'
/// effect is tested with real plugins in DefaultPreemption's and the loop's tests), the
/// scheduler's own nominations, and draws from the cycle's seeded RNG.
#[test]
fn cycle_runner_runs_filters_answers_nominations_and_draws_from_the_seeded_rng() {
    use framework::testing::{make_node, make_pod};
    use framework::{CycleState, PluginsRunner};
    use rand::SeedableRng;

    let (f, _) = build(&spec(&[("Sort", 0), ("Bind", 0), ("F1", 0)], &[]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let pod = make_pod("p").priority(10).info();
    let nominated: NominatedPods = HashMap::from([(
        "n1".to_string(),
        vec![make_pod("other").priority(10).info(), pod.clone()],
    )]);
    let state = CycleState::new();
    let node = make_node("n1").info_with(&[]);
    let draws = |seed: u64| {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let runner = CycleRunner::new(&f, &state, &nominated, &mut rng);
        (
            runner.run_filter_plugins_with_nominated_pods(&state, &pod, &node),
            runner.nominated_node_name(&pod),
            runner.nominated_node_name(&make_pod("stranger").info()),
            (0..8).map(|_| runner.random_index(5)).collect::<Vec<_>>(),
        )
    };
    let (a, b) = (draws(3), draws(3));
    assert_eq!(
        (a.0, a.1, a.2, a.3.iter().all(|&i| i < 5), a.3 == b.3),
        (Status::success(), Some("n1".to_string()), None, true, true)
    );
}

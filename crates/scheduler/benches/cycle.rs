//! One scheduling cycle over a 5,000-node cluster (4 CPU / 32Gi / 110 pods per node, 3
//! zones) with the default profile: upstream scheduler_perf's node and pod templates,
//! without the API server. Cases:
//! - `basic`: a pause pod (100m / 500Mi), 1,000 running pods (SchedulingBasic);
//! - `one_feasible_node`: a pod that fits one node only, so Filter scans all 5,000
//!   (the shape of SchedulingDaemonset);
//! - `topology_spreading` / `preferred_topology_spreading`: 5,000 running pods of one
//!   group, a pod spreading over zones with DoNotSchedule / ScheduleAnyway
//!   (TopologySpreading, PreferredTopologySpreading);
//! - `pod_anti_affinity`: 5,000 running pods, 1,000 of them in a group with required
//!   anti-affinity on hostname, and a pod of that group (SchedulingPodAntiAffinity);
//! - `preferred_pod_affinity`: 5,000 running pods, a pod preferring their zone
//!   (SchedulingPreferredPodAffinity);
//! - `basic_sampled` / `one_feasible_node_sampled`: the first two in a cycle sampled for
//!   plugin metrics (each plugin call timed into the Prometheus recorder), as one cycle in
//!   ten is;
//! - `basic_explained` / `basic_recorded`: `basic` with every plugin's verdict and score
//!   recorded (`Explanation`), and then also kept in a decision log as JSON, as the
//!   scheduler does with `--web`.
//!
//! Run: `cargo bench -p kubesched-scheduler --bench cycle`. Numbers: docs/performance.md.

// A benchmark whose setup fails has nothing to measure: stopping loudly is right.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use framework::testing::{make_node, make_pod, PodBuilder};
use framework::{CycleState, PodInfo, Snapshot};
use k8s_openapi::api::core::v1::{
    Affinity, PodAffinity, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use scheduler::builder::SchedulerBuilder;
use scheduler::config;
use scheduler::decisions::Decisions;
use scheduler::metrics::PrometheusRecorder;
use scheduler::schedule_one::{Explanation, ScheduleAlgorithm};
use scheduler::scheduler::{Attempt, AttemptOutcome};

const NODES: usize = 5000;
const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn selector(k: &str, v: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
        match_expressions: None,
    })
}

fn pause(name: &str) -> PodBuilder {
    make_pod(name).req(&[("cpu", "100m"), ("memory", "500Mi")])
}

fn spread(p: PodBuilder, when: &str) -> PodBuilder {
    let when = when.to_string();
    p.label("color", "blue").with(move |p| {
        p.spec
            .get_or_insert_with(Default::default)
            .topology_spread_constraints = Some(vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: ZONE.into(),
            when_unsatisfiable: when,
            label_selector: selector("color", "blue"),
            ..Default::default()
        }]);
    })
}

fn anti_affinity(p: PodBuilder) -> PodBuilder {
    p.label("color", "green").with(|p| {
        p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: selector("color", "green"),
                    topology_key: HOSTNAME.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
    })
}

fn preferred_affinity(p: PodBuilder) -> PodBuilder {
    p.with(|p| {
        p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
            pod_affinity: Some(PodAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    WeightedPodAffinityTerm {
                        weight: 1,
                        pod_affinity_term: PodAffinityTerm {
                            label_selector: selector("color", "red"),
                            topology_key: ZONE.into(),
                            ..Default::default()
                        },
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        });
    })
}

/// The cluster with `pods` running pods, pod `i` on node `i % NODES`, built by `make(i)`.
fn cluster(pods: usize, make: impl Fn(usize) -> PodBuilder) -> Snapshot {
    let node_objs = (0..NODES)
        .map(|i| {
            Arc::new(
                make_node(&format!("node-{i}"))
                    .label(ZONE, &format!("zone-{}", i % 3))
                    .capacity(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")])
                    .obj(),
            )
        })
        .collect();
    let running = (0..pods).map(|i| {
        Arc::new(PodInfo::new(Arc::new(
            make(i).node(&format!("node-{}", i % NODES)).obj(),
        )))
    });
    Snapshot::new(node_objs, running)
}

fn info(p: PodBuilder) -> Arc<PodInfo> {
    Arc::new(PodInfo::new(Arc::new(p.obj())))
}

fn bench_cycle(c: &mut Criterion) {
    let cfg = match config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "bench",
    ) {
        Ok(cfg) => cfg,
        Err(e) => panic!("default configuration: {e}"),
    };
    let basic = cluster(1000, |i| pause(&format!("init-{i}")));
    let grouped = cluster(5000, |i| {
        let p = pause(&format!("init-{i}"));
        match i % 5 {
            0 => anti_affinity(p),
            1 => p.label("color", "red"),
            _ => p.label("color", "blue"),
        }
    });
    let cases: Vec<(&str, &Snapshot, Arc<PodInfo>)> = vec![
        ("basic", &basic, info(pause("measured"))),
        (
            "one_feasible_node",
            &basic,
            info(pause("picky").node_selector(HOSTNAME, "node-4321")),
        ),
        (
            "topology_spreading",
            &grouped,
            info(spread(pause("measured"), "DoNotSchedule")),
        ),
        (
            "preferred_topology_spreading",
            &grouped,
            info(spread(pause("measured"), "ScheduleAnyway")),
        ),
        (
            "pod_anti_affinity",
            &grouped,
            info(anti_affinity(pause("measured"))),
        ),
        (
            "preferred_pod_affinity",
            &grouped,
            info(preferred_affinity(pause("measured"))),
        ),
    ];
    let mut group = c.benchmark_group("schedule_pod_5000_nodes");
    for parallelism in [1usize, 16] {
        let mut profiles = match SchedulerBuilder::new(cfg.clone(), "bench")
            .parallelism(parallelism)
            .build_profiles()
        {
            Ok(p) => p,
            Err(e) => panic!("profiles: {e}"),
        };
        let fwk = &profiles.frameworks[0];
        for (name, snapshot, pod) in &cases {
            let mut algo = ScheduleAlgorithm::new(1, None);
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/parallelism"), parallelism),
                &parallelism,
                |b, _| {
                    b.iter(|| {
                        let mut state = CycleState::new();
                        let r = algo.schedule_pod(fwk, &mut state, pod, snapshot, None);
                        if let Err(e) = &r {
                            panic!("{name}: the measured pod must fit: {e}");
                        }
                        r
                    })
                },
            );
        }
        profiles.frameworks[0].set_metrics(Arc::new(PrometheusRecorder::new()));
        let fwk = &profiles.frameworks[0];
        for (name, snapshot, pod) in cases.iter().take(2) {
            let mut algo = ScheduleAlgorithm::new(1, None);
            group.bench_with_input(
                BenchmarkId::new(format!("{name}_sampled/parallelism"), parallelism),
                &parallelism,
                |b, _| {
                    b.iter(|| {
                        let mut state = CycleState::new();
                        state.set_record_plugin_metrics(true);
                        let r = algo.schedule_pod(fwk, &mut state, pod, snapshot, None);
                        if let Err(e) = &r {
                            panic!("{name}: the measured pod must fit: {e}");
                        }
                        r
                    })
                },
            );
        }
        let (_, snapshot, pod) = &cases[0];
        for record in [false, true] {
            let mut algo = ScheduleAlgorithm::new(1, None);
            let log = Decisions::default();
            let name = if record {
                "basic_recorded"
            } else {
                "basic_explained"
            };
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/parallelism"), parallelism),
                &parallelism,
                |b, _| {
                    b.iter(|| {
                        let mut state = CycleState::new();
                        let mut explanation = Explanation::default();
                        let r = algo.schedule_pod(
                            fwk,
                            &mut state,
                            pod,
                            snapshot,
                            Some(&mut explanation),
                        );
                        let node = match r {
                            Ok(r) => r.suggested_host,
                            Err(e) => panic!("{name}: the measured pod must fit: {e}"),
                        };
                        if record {
                            let attempt = Attempt {
                                pod: pod.clone(),
                                profile: "default-scheduler".to_string(),
                                outcome: AttemptOutcome::Assumed { node },
                            };
                            log.record_attempt(attempt, explanation, snapshot);
                        }
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench_cycle
}
criterion_main!(benches);

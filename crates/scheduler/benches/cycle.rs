//! One scheduling cycle of a pause pod (100m CPU / 500Mi) over a 5,000-node cluster
//! (4 CPU / 32Gi / 110 pods per node, 3 zones, 1,000 running pods) with the default
//! profile: upstream scheduler_perf's SchedulingBasic shape, without the API server
//! (`basic`); and of a pod that fits one node only, so that Filter scans all 5,000 nodes
//! (`one_feasible_node`, the shape of SchedulingDaemonset).
//!
//! Run: `cargo bench -p kubesched-scheduler --bench cycle`. Numbers: docs/performance.md.

// A benchmark whose setup fails has nothing to measure: stopping loudly is right.
#![allow(clippy::panic)]

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use framework::testing::{make_node, make_pod};
use framework::{CycleState, Handle, Parallelizer, PodInfo, Snapshot};
use scheduler::config;
use scheduler::profile::Profiles;
use scheduler::schedule_one::ScheduleAlgorithm;

fn cluster(nodes: usize, pods: usize) -> Snapshot {
    let node_objs = (0..nodes)
        .map(|i| {
            Arc::new(
                make_node(&format!("node-{i}"))
                    .label("topology.kubernetes.io/zone", &format!("zone-{}", i % 3))
                    .capacity(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")])
                    .obj(),
            )
        })
        .collect();
    let running = (0..pods).map(|i| {
        Arc::new(PodInfo::new(Arc::new(
            make_pod(&format!("init-{i}"))
                .req(&[("cpu", "100m"), ("memory", "500Mi")])
                .node(&format!("node-{}", i % nodes))
                .obj(),
        )))
    });
    Snapshot::new(node_objs, running)
}

fn bench_cycle(c: &mut Criterion) {
    let cfg = match config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "bench",
    ) {
        Ok(cfg) => cfg,
        Err(e) => panic!("default configuration: {e}"),
    };
    let snapshot = cluster(5000, 1000);
    let pod = Arc::new(PodInfo::new(Arc::new(
        make_pod("measured")
            .req(&[("cpu", "100m"), ("memory", "500Mi")])
            .obj(),
    )));
    // Fits one node only (a label no other node has): the filter pass scans every node.
    let picky = Arc::new(PodInfo::new(Arc::new(
        make_pod("picky")
            .req(&[("cpu", "100m"), ("memory", "500Mi")])
            .node_selector("kubernetes.io/hostname", "node-4321")
            .obj(),
    )));
    let mut group = c.benchmark_group("schedule_pod_5000_nodes");
    for parallelism in [1usize, 16] {
        let handle = Handle::new(
            Parallelizer::new(parallelism),
            Arc::new(framework::handle::NoopClient),
        );
        let profiles = match Profiles::build(&cfg, &plugins::in_tree_registry(), &handle, "bench") {
            Ok(p) => p,
            Err(e) => panic!("profiles: {e}"),
        };
        let fwk = &profiles.frameworks[0];
        let mut algo = ScheduleAlgorithm::new(1, None);
        group.bench_with_input(
            BenchmarkId::new("basic/parallelism", parallelism),
            &parallelism,
            |b, _| {
                b.iter(|| {
                    let mut state = CycleState::new();
                    algo.schedule_pod(fwk, &mut state, &pod, &snapshot, None)
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("one_feasible_node/parallelism", parallelism),
            &parallelism,
            |b, _| {
                b.iter(|| {
                    let mut state = CycleState::new();
                    algo.schedule_pod(fwk, &mut state, &picky, &snapshot, None)
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(4));
    targets = bench_cycle
}
criterion_main!(benches);

//! The decision log: bounds (oldest out by count and by bytes), replacement, forgetting, the
//! events subscribers see; and the scheduling loop recording into it, the JSON compared whole
//! with `simulate`'s for the same cluster.

use std::sync::Arc;
use std::time::Duration;

use framework::testing::{make_node, make_pod};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::Value;

use super::*;
use crate::builder::SchedulerBuilder;
use crate::memory::MemoryCluster;
use crate::simulate::{ClusterInput, PodResult, Simulation};

fn report(name: &str, result: PodResult, message: Option<&str>) -> PodReport {
    PodReport {
        namespace: "default".to_string(),
        name: name.to_string(),
        scheduler_name: "default-scheduler".to_string(),
        node: (result == PodResult::Scheduled).then(|| "n1".to_string()),
        result,
        message: message.map(str::to_string),
        bound_by: None,
        reason_counts: Vec::new(),
        explanation: None,
        nominated_node: None,
        victims: Vec::new(),
        preemption: Vec::new(),
        volumes: Vec::new(),
        volume_reasons: Vec::new(),
        devices: Vec::new(),
        device_reasons: Vec::new(),
    }
}

fn names(log: &Decisions) -> Vec<String> {
    log.list().into_iter().map(|o| o.name).collect()
}

fn drain(rx: &mut broadcast::Receiver<DecisionEvent>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(match e {
            DecisionEvent::Recorded(o) => {
                format!("recorded {}/{} {}", o.namespace, o.name, o.result)
            }
            DecisionEvent::Forgotten { namespace, name } => format!("forgotten {namespace}/{name}"),
        });
    }
    out
}

#[test]
fn past_max_pods_the_oldest_attempt_goes_first() {
    let log = Decisions::new(2, usize::MAX);
    let mut rx = log.subscribe();
    for name in ["a", "b", "c"] {
        log.record(&report(name, PodResult::Unschedulable, Some("no")));
    }
    assert_eq!(names(&log), ["b", "c"]);
    assert_eq!(
        drain(&mut rx),
        [
            "recorded default/a Unschedulable",
            "recorded default/b Unschedulable",
            "recorded default/c Unschedulable",
            "forgotten default/a",
        ]
    );
}

#[test]
fn a_new_attempt_replaces_the_pods_entry_and_makes_it_the_newest() {
    let log = Decisions::new(2, usize::MAX);
    log.record(&report(
        "a",
        PodResult::Unschedulable,
        Some("0/1 nodes are available"),
    ));
    log.record(&report(
        "b",
        PodResult::Unschedulable,
        Some("0/1 nodes are available"),
    ));
    log.record(&report("a", PodResult::Scheduled, None));
    log.record(&report("c", PodResult::Scheduled, None));
    let outcomes: Vec<(String, &str, Option<String>)> = log
        .list()
        .into_iter()
        .map(|o| (o.name, o.result, o.node))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("a".to_string(), "Scheduled", Some("n1".to_string())),
            ("c".to_string(), "Scheduled", Some("n1".to_string())),
        ]
    );
}

#[test]
fn past_max_bytes_the_oldest_go_but_the_newest_stays() {
    let one = output::pod_to_json(&report("a", PodResult::Scheduled, None)).len();
    // Room for two entries of this size, not three.
    let log = Decisions::new(100, 2 * one + one / 2);
    for name in ["a", "b", "c"] {
        log.record(&report(name, PodResult::Scheduled, None));
    }
    assert_eq!(names(&log), ["b", "c"]);
    // An entry larger than the whole bound is still kept, alone.
    let tiny = Decisions::new(100, 1);
    tiny.record(&report("a", PodResult::Scheduled, None));
    tiny.record(&report("b", PodResult::Scheduled, None));
    assert_eq!(names(&tiny), ["b"]);
}

#[test]
fn forget_drops_the_entry_once_and_says_so() {
    let log = Decisions::default();
    log.record(&report("a", PodResult::Scheduled, None));
    let mut rx = log.subscribe();
    log.forget("default", "a");
    log.forget("default", "a");
    assert_eq!(
        (log.get("default", "a"), log.len(), drain(&mut rx)),
        (None, 0, vec!["forgotten default/a".to_string()])
    );
}

#[test]
fn get_gives_simulates_per_pod_json() {
    let log = Decisions::default();
    let r = report(
        "a",
        PodResult::Unschedulable,
        Some("0/1 nodes are available"),
    );
    log.record(&r);
    let want: Value =
        serde_json::from_str(&output::pod_to_json(&r)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(log.get("default", "a"), Some(want));
}

// ---- the scheduling loop recording ------------------------------------------------------

fn cluster_objects() -> (Vec<Node>, Pod) {
    let capacity = [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")];
    (
        vec![
            make_node("n1").capacity(&capacity).obj(),
            make_node("n2")
                .capacity(&capacity)
                .taint("dedicated", "db", "NoSchedule")
                .obj(),
        ],
        make_pod("web").req(&[("cpu", "100m")]).obj(),
    )
}

fn config() -> crate::config::KubeSchedulerConfiguration {
    crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "test",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// What `simulate -o json` says of the pod on the same cluster.
fn simulated() -> Value {
    let (nodes, pod) = cluster_objects();
    let mut input = ClusterInput::default();
    input.nodes = nodes.into_iter().map(Arc::new).collect();
    input.pods = vec![Arc::new(pod)];
    let sim = Simulation::new(
        SchedulerBuilder::new(config(), "test")
            .seed(1)
            .parallelism(1),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let report = sim.run(&input);
    let doc: Value =
        serde_json::from_str(&output::to_json(&report)).unwrap_or_else(|e| panic!("{e}"));
    doc["pods"][0].clone()
}

/// Waits (bounded) for the next event of the log.
fn next_event(
    rt: &tokio::runtime::Runtime,
    rx: &mut broadcast::Receiver<DecisionEvent>,
) -> DecisionEvent {
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(20), rx.recv()).await })
        .unwrap_or_else(|_| panic!("no decision event within 20 s"))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_loop_records_each_attempt_as_simulate_explains_it_and_forgets_deleted_pods() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let cluster = MemoryCluster::new();
    let log = Decisions::default();
    let sched = SchedulerBuilder::new(config(), "test")
        .seed(1)
        .parallelism(1)
        .client(cluster.clone())
        .decisions(log.clone())
        .build(rt.handle().clone())
        .unwrap_or_else(|e| panic!("{e}"))
        .scheduler;
    cluster.connect(sched.weak_event_handler());
    let mut rx = log.subscribe();
    let (nodes, pod) = cluster_objects();
    for n in nodes {
        cluster.apply_node(n);
    }
    cluster.apply_pod(pod);
    sched.event_handler().synced();
    let thread = sched.start().unwrap_or_else(|e| panic!("{e}"));

    let recorded = next_event(&rt, &mut rx);
    let live = log.get("default", "web");
    cluster.remove_pod("default", "web");
    let forgotten = next_event(&rt, &mut rx);
    sched.stop();
    let _ = thread.join();

    assert_eq!(
        recorded,
        DecisionEvent::Recorded(PodOutcome {
            namespace: "default".to_string(),
            name: "web".to_string(),
            result: "Scheduled",
            node: Some("n1".to_string()),
            message: None,
            nominated_node: None,
            attempt: 0,
        })
    );
    assert_eq!(live, Some(simulated()));
    assert_eq!(
        (forgotten, log.get("default", "web")),
        (
            DecisionEvent::Forgotten {
                namespace: "default".to_string(),
                name: "web".to_string()
            },
            None
        )
    );
}

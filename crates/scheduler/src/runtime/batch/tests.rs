//! Upstream's TestBatchBasic cases (batch_test.go), by name, with the attempt and flush
//! counts its newer version checks, and the age limit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use framework::{Code, PodSignature};
use rstest::rstest;

use super::*;
use crate::metrics::{ExtensionPointLabel, PendingPods};

/// Counts batch attempts and flushes by label value.
#[derive(Debug, Default)]
struct Counts(Mutex<BTreeMap<String, u32>>);

impl Counts {
    fn inc(&self, key: String) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_insert(0) += 1;
    }
    fn take(&self) -> BTreeMap<String, u32> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl MetricsRecorder for Counts {
    fn observe_attempt(&self, _: &str, _: crate::metrics::AttemptResult, _: Duration) {}
    fn observe_pod_scheduled(&self, _: u32, _: Duration) {}
    fn observe_extension_point(&self, _: &str, _: ExtensionPointLabel, _: Code, _: Duration) {}
    fn observe_plugin_execution(
        &self,
        _: &'static str,
        _: ExtensionPointLabel,
        _: Code,
        _: Duration,
    ) {
    }
    fn set_pending_pods(&self, _: PendingPods) {}
    fn inc_queue_incoming_pods(&self, _: &'static str, _: &str) {}
    fn observe_preemption(&self, _: usize) {}
    fn set_cache_size(&self, _: usize, _: usize, _: usize) {}
    fn inc_batch_attempt(&self, profile: &str, result: BatchAttemptResult) {
        self.inc(format!("attempt {profile} {}", result.as_str()));
    }
    fn inc_batch_cache_flushed(&self, profile: &str, reason: BatchFlushReason) {
        self.inc(format!("flush {profile} {}", reason.as_str()));
    }
}

/// One case: a first pod, maybe stored, then a second pod.
#[derive(Debug, Clone)]
struct Case {
    /// Pods whose id starts with `b` block each other: a node holds one of them (upstream's
    /// batchTest filter plugin).
    first_blocking: bool,
    first_sig: &'static str,
    first_scheduled: bool,
    first_chosen: &'static str,
    first_other_nodes: Vec<&'static str>,
    /// Another profile's pod was scheduled between the two.
    skip_pod: bool,
    second_blocking: bool,
    second_nominated: bool,
    second_sig: &'static str,
    second_chosen: &'static str,
    /// How long after the first cycle the second one runs.
    gap: Duration,
    /// The first pod's node is still in the snapshot.
    first_node_present: bool,
}

const BASE: Case = Case {
    first_blocking: true,
    first_sig: "sig",
    first_scheduled: true,
    first_chosen: "n3",
    first_other_nodes: Vec::new(),
    skip_pod: false,
    second_blocking: true,
    second_nominated: false,
    second_sig: "sig",
    second_chosen: "n1",
    gap: Duration::from_millis(1),
    first_node_present: true,
};

fn case(f: impl FnOnce(&mut Case)) -> Case {
    let mut c = BASE.clone();
    c.first_other_nodes = vec!["n1"];
    f(&mut c);
    c
}

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs
        .iter()
        .map(|(k, v)| (k.replacen(' ', " default-scheduler ", 1), *v))
        .collect()
}

#[rstest]
#[case::a_second_pod_with_the_same_signature_gets_a_hint(
    case(|_| {}),
    Some("n1"), None,
    counts(&[("attempt no_hint", 1), ("attempt hint_used", 1)])
)]
#[case::a_second_pod_with_a_different_signature_doesnt_get_a_hint(
    case(|c| { c.first_blocking = false; c.second_blocking = false; c.second_sig = "sig2"; }),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush pod_incompatible", 1), ("flush empty_list", 1)])
)]
#[case::a_second_pod_doesnt_get_a_hint_if_its_not_1_pod_per_node(
    case(|c| { c.first_blocking = false; c.second_blocking = false; }),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush node_not_full", 1), ("flush empty_list", 1)])
)]
#[case::pod_doesnt_get_hint_if_previous_pod_didnt_scheduled(
    case(|c| c.first_scheduled = false),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush empty_list", 1)])
)]
#[case::empty_list(
    case(|c| { c.first_other_nodes = Vec::new(); c.second_chosen = "n4"; }),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush empty_list", 2)])
)]
#[case::pod_doesnt_get_hint_because_the_previous_pod_is_to_a_different_profile(
    case(|c| c.skip_pod = true),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush pod_skipped", 1), ("flush empty_list", 1)])
)]
#[case::pod_uses_batch_from_preceding_pod_and_leaves_remaining_batch_to_next_pod(
    case(|c| c.first_other_nodes = vec!["n1", "n2"]),
    Some("n1"), Some(("sig", vec!["n2"])),
    counts(&[("attempt no_hint", 1), ("attempt hint_used", 1)])
)]
#[case::a_second_pod_with_a_nominated_node_does_not_get_a_hint(
    case(|c| c.second_nominated = true),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush pod_nominated", 1), ("flush empty_list", 1)])
)]
#[case::a_batch_older_than_max_batch_age_is_not_used(
    case(|c| c.gap = MAX_BATCH_AGE + Duration::from_millis(1)),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush expired", 1), ("flush empty_list", 1)])
)]
#[case::a_batch_whose_last_node_is_gone_is_not_used(
    case(|c| c.first_node_present = false),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush node_missing", 1), ("flush empty_list", 1)])
)]
#[case::a_second_pod_without_signature_does_not_get_a_hint(
    case(|c| c.second_sig = ""),
    None, None,
    counts(&[("attempt no_hint", 2), ("flush pod_incompatible", 1), ("flush empty_list", 1)])
)]
fn batch_basic(
    #[case] c: Case,
    #[case] expected_hint: Option<&str>,
    #[case] expected_state: Option<(&str, Vec<&str>)>,
    #[case] expected_counts: BTreeMap<String, u32>,
) {
    let metrics = Arc::new(Counts::default());
    let mut batch = OpportunisticBatch::new("default-scheduler", metrics.clone());
    let sig = |s: &str| (!s.is_empty()).then(|| PodSignature::from_text(s));
    let t0 = Instant::now();

    let no_positions = |_: u64, _: u32| None;
    let hint = batch.get_node_hint(
        sig(c.first_sig).as_ref(),
        false,
        1,
        t0,
        |_| LastNode::Rejects,
        no_positions,
    );
    assert_eq!(hint, None, "first pod");
    if c.first_scheduled {
        let others = SortedScoredNodes::ordered(&c.first_other_nodes);
        batch.store_schedule_results(
            sig(c.first_sig),
            None,
            c.first_chosen,
            others.len(),
            || others,
            1,
            t0,
        );
    }

    let cycle = if c.skip_pod { 3 } else { 2 };
    let t1 = t0 + c.gap;
    let mut asked = None;
    let hint = batch.get_node_hint(
        sig(c.second_sig).as_ref(),
        c.second_nominated,
        cycle,
        t1,
        |node| {
            asked = Some(node.to_string());
            if !c.first_node_present {
                LastNode::Missing
            } else if c.first_blocking && c.second_blocking {
                LastNode::Rejects
            } else {
                LastNode::Fits
            }
        },
        no_positions,
    );
    assert_eq!(hint.as_deref(), expected_hint);
    if expected_hint.is_some() {
        assert_eq!(asked.as_deref(), Some(c.first_chosen), "the node checked");
    }
    batch.store_schedule_results(
        sig(c.second_sig),
        hint.as_deref(),
        c.second_chosen,
        0,
        SortedScoredNodes::default,
        cycle,
        t1,
    );

    let state = batch
        .signature()
        .filter(|_| !batch.remaining_nodes().is_empty())
        .map(|s| (s.as_str().to_string(), batch.remaining_nodes()));
    let want = expected_state.map(|(s, nodes)| {
        (
            s.to_string(),
            nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        )
    });
    assert_eq!(state, want);
    assert_eq!(metrics.take(), expected_counts);
    assert_eq!(batch.batched_pods(), u64::from(expected_hint.is_some()));
}

#[test]
fn sorted_scored_nodes_pop_the_highest_total_then_the_highest_tie_break() {
    let mut nodes = SortedScoredNodes::new([
        (Arc::from("a"), 10, 1),
        (Arc::from("b"), 30, 0),
        (Arc::from("c"), 10, 7),
        (Arc::from("d"), 20, 0),
    ]);
    assert_eq!(nodes.names(), ["b", "d", "c", "a"]);
    let popped: Vec<String> =
        std::iter::from_fn(|| nodes.pop(|_, _| None).map(|n| n.to_string())).collect();
    assert_eq!(popped, ["b", "d", "c", "a"]);
}

/// Nodes kept by position are named at the first pop, through the list version they were
/// taken under (the snapshot's list, or the one a rebuild just replaced), and pop in the
/// order the same nodes kept by name would; a list that cannot be named is dropped.
#[rstest::rstest]
#[case::named_through_the_current_list(true, false, Some(vec!["n1", "n3", "n0", "n2"]))]
#[case::named_through_the_list_a_rebuild_replaced(false, false, Some(vec!["n1", "n3", "n0", "n2"]))]
#[case::dropped_when_the_version_is_unknown(false, true, None)]
fn nodes_kept_by_position_are_named_when_first_used(
    #[case] same_list: bool,
    #[case] unknown_version: bool,
    #[case] want: Option<Vec<&str>>,
) {
    use framework::testing::make_node;
    let nodes = |names: &[&str]| -> Vec<Arc<k8s_openapi::api::core::v1::Node>> {
        names.iter().map(|n| Arc::new(make_node(n).obj())).collect()
    };
    let mut snap = framework::Snapshot::new(nodes(&["n0", "n1", "n2", "n3"]), []);
    let mut version = snap.list_version();
    if !same_list {
        // A node is added: the list is rebuilt, positions move.
        let infos = nodes(&["n4", "n0", "n1", "n2", "n3"])
            .into_iter()
            .map(|n| Arc::new(framework::NodeInfo::new(n)))
            .collect();
        snap.set_node_infos(infos);
        assert_ne!(snap.list_version(), version);
    }
    if unknown_version {
        version = framework::Snapshot::new(nodes(&["n0"]), []).list_version();
    }
    let scored = [(0, 50, 1), (1, 70, 0), (2, 50, 0), (3, 60, 0)];
    let mut kept = SortedScoredNodes::at_positions(version, scored);
    assert_eq!(kept.len(), 4);
    let name_at = |v: u64, p: u32| snap.name_at(v, p as usize).cloned();
    let first = kept.pop(name_at);
    let got = first.map(|n| {
        let mut all = vec![n.to_string()];
        all.extend(std::iter::from_fn(|| kept.pop(name_at)).map(|n| n.to_string()));
        all
    });
    assert_eq!(
        got,
        want.map(|w| w.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    );
    assert!(kept.is_empty());
}

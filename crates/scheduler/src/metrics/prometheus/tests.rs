//! The recorder is checked through what Prometheus would read: every test encodes, parses
//! the text back with a small OpenMetrics parser, and compares whole values.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use framework::Code;

/// One sample line: name, labels (sorted by name: their order carries no meaning), value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// What a family declares: `(type, help)` by family name.
type Families = BTreeMap<String, (String, String)>;

/// Parses the subset of OpenMetrics text that prometheus-client writes: `# HELP`, `# TYPE`,
/// samples with optional labels, and the final `# EOF` (which must be the last line).
fn parse(text: &str) -> (Families, Vec<Sample>) {
    let mut help = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"# EOF"),
        "exposition must end with # EOF"
    );
    assert!(text.ends_with("# EOF\n"));
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').expect("HELP has a name and text");
            help.insert(name.to_string(), text.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a name and type");
            types.insert(name.to_string(), kind.to_string());
        } else {
            assert!(!line.starts_with('#'), "unexpected comment {line:?}");
            samples.push(parse_sample(line));
        }
    }
    assert_eq!(
        help.keys().collect::<Vec<_>>(),
        types.keys().collect::<Vec<_>>(),
        "every family has both HELP and TYPE"
    );
    let families = types
        .into_iter()
        .map(|(name, kind)| {
            let text = help[&name].clone();
            (name, (kind, text))
        })
        .collect();
    (families, samples)
}

fn parse_sample(line: &str) -> Sample {
    let (series, value) = line.rsplit_once(' ').expect("sample has a value");
    let value: f64 = value.parse().expect("sample value is a number");
    let Some((name, labels)) = series.split_once('{') else {
        return Sample {
            name: series.to_string(),
            labels: Vec::new(),
            value,
        };
    };
    let mut rest = labels.strip_suffix('}').expect("labels end with }");
    let mut parsed = Vec::new();
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").expect("label is key=\"value\"");
        let mut chars = after.char_indices();
        let mut label = String::new();
        let end = loop {
            match chars.next().expect("label value is closed") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape is complete").1 {
                    'n' => label.push('\n'),
                    c => label.push(c),
                },
                (_, c) => label.push(c),
            }
        };
        // `le` bounds are compared as numbers: "1.0" and "1" are the same bound, and so are
        // two spellings of one float.
        if key == "le" && label != "+Inf" {
            let bound: f64 = label.parse().expect("le is a number");
            label = bound.to_string();
        }
        parsed.push((key.to_string(), label));
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    parsed.sort();
    Sample {
        name: name.to_string(),
        labels: parsed,
        value,
    }
}

/// The samples of one family (its name and its `_total`, `_bucket`, `_sum`, `_count` lines).
fn family(samples: &[Sample], name: &str) -> Vec<Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                || ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| s.name.strip_suffix(suffix) == Some(name))
        })
        .cloned()
        .collect()
}

fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> Sample {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    Sample {
        name: name.to_string(),
        labels,
        value,
    }
}

/// Samples in a canonical order, so that families can be compared whole.
fn sorted(mut samples: Vec<Sample>) -> Vec<Sample> {
    samples.sort_by(|a, b| {
        (&a.name, &a.labels)
            .partial_cmp(&(&b.name, &b.labels))
            .expect("names and labels compare")
    });
    samples
}

/// The full histogram a family exposes for one label set: `_sum`, `_count`, then one
/// cumulative `_bucket` per bound and `+Inf`, each with the label set followed by `le`.
fn histogram(
    name: &str,
    labels: &[(&str, &str)],
    bounds: &[f64],
    observations: &[f64],
) -> Vec<Sample> {
    let sum = observations.iter().fold(0.0, |sum, o| sum + o);
    let mut out = vec![
        sample(&format!("{name}_sum"), labels, sum),
        sample(&format!("{name}_count"), labels, observations.len() as f64),
    ];
    let les = bounds
        .iter()
        .map(|b| (b.to_string(), *b))
        .chain([("+Inf".to_string(), f64::INFINITY)]);
    for (le, bound) in les {
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        with_le.push(("le", &le));
        let count = observations.iter().filter(|o| **o <= bound).count();
        out.push(sample(&format!("{name}_bucket"), &with_le, count as f64));
    }
    out
}

/// The `le` bounds of a family's histogram for its first label set, in exposition order.
fn bounds_of(samples: &[Sample], name: &str) -> Vec<f64> {
    let bucket = format!("{name}_bucket");
    let without_le = |s: &Sample| -> Vec<(String, String)> {
        s.labels
            .iter()
            .filter(|(k, _)| k != "le")
            .cloned()
            .collect()
    };
    let first = samples
        .iter()
        .find(|s| s.name == bucket)
        .map(without_le)
        .expect("family has buckets");
    samples
        .iter()
        .filter(|s| s.name == bucket && without_le(s) == first)
        .map(|s| {
            let (_, le) = s.labels.iter().find(|(k, _)| k == "le").expect("le label");
            if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le is a number")
            }
        })
        .collect()
}

// Upstream's bounds as kube-scheduler prints them (Go's shortest float formatting of
// ExponentialBuckets): the same binary numbers must come back from our `le` labels.
const ATTEMPT_BOUNDS: [f64; 15] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384,
];
const SLI_BOUNDS: [f64; 20] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84,
    327.68, 655.36, 1310.72, 2621.44, 5242.88,
];
const EXTENSION_POINT_BOUNDS: [f64; 12] = [
    0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048,
];
const PLUGIN_BOUNDS: [f64; 20] = [
    1e-05,
    1.5000000000000002e-05,
    2.2500000000000005e-05,
    3.375000000000001e-05,
    5.062500000000001e-05,
    7.593750000000002e-05,
    0.00011390625000000003,
    0.00017085937500000006,
    0.0002562890625000001,
    0.00038443359375000017,
    0.0005766503906250003,
    0.0008649755859375004,
    0.0012974633789062506,
    0.0019461950683593758,
    0.0029192926025390638,
    0.004378938903808595,
    0.006568408355712893,
    0.009852612533569338,
    0.014778918800354007,
    0.02216837820053101,
];
const VICTIM_BOUNDS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
const POD_ATTEMPT_BOUNDS: [f64; 5] = [1.0, 2.0, 4.0, 8.0, 16.0];

fn with_inf(bounds: &[f64]) -> Vec<f64> {
    bounds.iter().copied().chain([f64::INFINITY]).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Records one of everything, so that every labelled family is declared.
fn record_one_of_each(recorder: &PrometheusRecorder) {
    recorder.observe_attempt("kubesched", AttemptResult::Scheduled, ms(1));
    recorder.observe_pod_scheduled(1, ms(1));
    recorder.observe_extension_point(
        "kubesched",
        ExtensionPointLabel::Score,
        Code::Success,
        ms(1),
    );
    recorder.observe_plugin_execution(
        "ImageLocality",
        ExtensionPointLabel::Score,
        Code::Success,
        ms(1),
    );
    recorder.inc_queue_incoming_pods("active", "PodAdd");
    recorder.observe_preemption(1);
}

#[test]
fn every_upstream_family_is_declared_with_its_type_and_help() {
    let recorder = PrometheusRecorder::new();
    record_one_of_each(&recorder);
    let (families, _) = parse(&recorder.encode());
    let expected: Families = [
        ("scheduler_schedule_attempts", "counter", "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem."),
        ("scheduler_scheduling_attempt_duration_seconds", "histogram", "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)"),
        ("scheduler_preemption_victims", "histogram", "[STABLE] Number of selected preemption victims"),
        ("scheduler_preemption_attempts", "counter", "[STABLE] Total preemption attempts in the cluster till now"),
        ("scheduler_pending_pods", "gauge", "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated."),
        ("scheduler_pod_scheduling_sli_duration_seconds", "histogram", "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts."),
        ("scheduler_pod_scheduling_attempts", "histogram", "[STABLE] Number of attempts to successfully schedule a pod."),
        ("scheduler_framework_extension_point_duration_seconds", "histogram", "[STABLE] Latency for running all plugins of a specific extension point."),
        ("scheduler_plugin_execution_duration_seconds", "histogram", "[ALPHA] Duration for running a plugin at a specific extension point."),
        ("scheduler_queue_incoming_pods", "counter", "[STABLE] Number of pods added to scheduling queues by event and queue type."),
        ("scheduler_cache_size", "gauge", "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache."),
    ]
    .into_iter()
    .map(|(name, kind, help)| (name.to_string(), (kind.to_string(), help.to_string())))
    .collect();
    assert_eq!(families, expected);
}

#[test]
fn a_fresh_recorder_exposes_gauges_at_zero_and_unlabelled_series_empty() {
    let (families, samples) = parse(&PrometheusRecorder::new().encode());
    assert_eq!(
        families.keys().map(String::as_str).collect::<Vec<_>>(),
        vec![
            "scheduler_cache_size",
            "scheduler_pending_pods",
            "scheduler_pod_scheduling_attempts",
            "scheduler_preemption_attempts",
            "scheduler_preemption_victims",
        ],
        "labelled families are declared once they have a series, as upstream"
    );
    let mut expected = vec![sample("scheduler_preemption_attempts_total", &[], 0.0)];
    expected.extend(histogram(
        "scheduler_preemption_victims",
        &[],
        &VICTIM_BOUNDS,
        &[],
    ));
    expected.extend(histogram(
        "scheduler_pod_scheduling_attempts",
        &[],
        &POD_ATTEMPT_BOUNDS,
        &[],
    ));
    for queue in ["active", "backoff", "unschedulable", "gated"] {
        expected.push(sample("scheduler_pending_pods", &[("queue", queue)], 0.0));
    }
    for kind in ["nodes", "pods", "assumed_pods"] {
        expected.push(sample("scheduler_cache_size", &[("type", kind)], 0.0));
    }
    assert_eq!(sorted(samples), sorted(expected));
}

#[test]
fn attempts_are_counted_and_timed_by_result_and_profile() {
    let recorder = PrometheusRecorder::new();
    recorder.observe_attempt("default-scheduler", AttemptResult::Scheduled, ms(3));
    recorder.observe_attempt("default-scheduler", AttemptResult::Scheduled, ms(20));
    recorder.observe_attempt("default-scheduler", AttemptResult::Unschedulable, ms(2000));
    recorder.observe_attempt("kubesched", AttemptResult::Error, ms(0));
    let (_, samples) = parse(&recorder.encode());

    let total = |result, profile, n| {
        sample(
            "scheduler_schedule_attempts_total",
            &[("result", result), ("profile", profile)],
            n,
        )
    };
    assert_eq!(
        sorted(family(&samples, "scheduler_schedule_attempts")),
        sorted(vec![
            total("error", "kubesched", 1.0),
            total("scheduled", "default-scheduler", 2.0),
            total("unschedulable", "default-scheduler", 1.0),
        ])
    );

    let name = "scheduler_scheduling_attempt_duration_seconds";
    let mut expected = histogram(
        name,
        &[("result", "scheduled"), ("profile", "default-scheduler")],
        &ATTEMPT_BOUNDS,
        &[0.003, 0.02],
    );
    expected.extend(histogram(
        name,
        &[
            ("result", "unschedulable"),
            ("profile", "default-scheduler"),
        ],
        &ATTEMPT_BOUNDS,
        &[2.0],
    ));
    expected.extend(histogram(
        name,
        &[("result", "error"), ("profile", "kubesched")],
        &ATTEMPT_BOUNDS,
        &[0.0],
    ));
    assert_eq!(sorted(family(&samples, name)), sorted(expected));
}

#[test]
fn scheduled_pods_feed_the_sli_by_attempts_capped_at_15_and_the_attempts_histogram() {
    let recorder = PrometheusRecorder::new();
    recorder.observe_pod_scheduled(1, ms(50));
    recorder.observe_pod_scheduled(3, Duration::from_secs(90));
    recorder.observe_pod_scheduled(15, Duration::from_secs(600));
    recorder.observe_pod_scheduled(40, Duration::from_secs(7000));
    let (_, samples) = parse(&recorder.encode());

    let name = "scheduler_pod_scheduling_sli_duration_seconds";
    let mut expected = Vec::new();
    for (attempts, observed) in [
        ("1", vec![0.05]),
        ("3", vec![90.0]),
        ("15+", vec![600.0, 7000.0]),
    ] {
        expected.extend(histogram(
            name,
            &[("attempts", attempts)],
            &SLI_BOUNDS,
            &observed,
        ));
    }
    assert_eq!(sorted(family(&samples, name)), sorted(expected));

    assert_eq!(
        sorted(family(&samples, "scheduler_pod_scheduling_attempts")),
        sorted(histogram(
            "scheduler_pod_scheduling_attempts",
            &[],
            &POD_ATTEMPT_BOUNDS,
            &[1.0, 3.0, 15.0, 40.0],
        ))
    );
}

#[test]
fn extension_points_and_plugins_are_timed_with_their_labels() {
    let recorder = PrometheusRecorder::new();
    recorder.observe_extension_point(
        "kubesched",
        ExtensionPointLabel::PreFilter,
        Code::Success,
        Duration::from_micros(150),
    );
    recorder.observe_extension_point(
        "kubesched",
        ExtensionPointLabel::PreFilter,
        Code::Success,
        Duration::from_micros(900),
    );
    recorder.observe_plugin_execution(
        "NodeResourcesFit",
        ExtensionPointLabel::Filter,
        Code::Unschedulable,
        Duration::from_micros(12),
    );
    let (_, samples) = parse(&recorder.encode());

    let name = "scheduler_framework_extension_point_duration_seconds";
    assert_eq!(
        sorted(family(&samples, name)),
        sorted(histogram(
            name,
            &[
                ("extension_point", "PreFilter"),
                ("status", "Success"),
                ("profile", "kubesched")
            ],
            &EXTENSION_POINT_BOUNDS,
            &[0.00015, 0.0009],
        ))
    );
    let name = "scheduler_plugin_execution_duration_seconds";
    assert_eq!(
        sorted(family(&samples, name)),
        sorted(histogram(
            name,
            &[
                ("plugin", "NodeResourcesFit"),
                ("extension_point", "Filter"),
                ("status", "Unschedulable")
            ],
            &PLUGIN_BOUNDS,
            &[0.000012],
        ))
    );
}

#[test]
fn every_histogram_has_upstreams_bucket_bounds() {
    let recorder = PrometheusRecorder::new();
    record_one_of_each(&recorder);
    let (_, samples) = parse(&recorder.encode());
    let names = [
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_pod_scheduling_sli_duration_seconds",
        "scheduler_framework_extension_point_duration_seconds",
        "scheduler_plugin_execution_duration_seconds",
        "scheduler_preemption_victims",
        "scheduler_pod_scheduling_attempts",
    ];
    let got: Vec<(&str, Vec<f64>)> = names
        .into_iter()
        .map(|name| (name, bounds_of(&samples, name)))
        .collect();
    let expected: Vec<(&str, Vec<f64>)> = names
        .into_iter()
        .zip([
            with_inf(&ATTEMPT_BOUNDS),
            with_inf(&SLI_BOUNDS),
            with_inf(&EXTENSION_POINT_BOUNDS),
            with_inf(&PLUGIN_BOUNDS),
            with_inf(&VICTIM_BOUNDS),
            with_inf(&POD_ATTEMPT_BOUNDS),
        ])
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn gauges_hold_the_latest_sizes() {
    let recorder = PrometheusRecorder::new();
    recorder.set_pending_pods(PendingPods {
        active: 9,
        backoff: 1,
        unschedulable: 100,
        gated: 0,
    });
    recorder.set_pending_pods(PendingPods {
        active: 7,
        backoff: 2,
        unschedulable: 3,
        gated: 4,
    });
    recorder.set_cache_size(5000, 1200, 8);
    let (_, samples) = parse(&recorder.encode());
    let pending = |queue, n| sample("scheduler_pending_pods", &[("queue", queue)], n);
    assert_eq!(
        sorted(family(&samples, "scheduler_pending_pods")),
        sorted(vec![
            pending("active", 7.0),
            pending("backoff", 2.0),
            pending("unschedulable", 3.0),
            pending("gated", 4.0),
        ])
    );
    let cache = |kind, n| sample("scheduler_cache_size", &[("type", kind)], n);
    assert_eq!(
        sorted(family(&samples, "scheduler_cache_size")),
        sorted(vec![
            cache("nodes", 5000.0),
            cache("pods", 1200.0),
            cache("assumed_pods", 8.0),
        ])
    );
}

#[test]
fn incoming_pods_are_counted_by_queue_and_event() {
    let recorder = PrometheusRecorder::new();
    recorder.inc_queue_incoming_pods("active", "PodAdd");
    recorder.inc_queue_incoming_pods("active", "PodAdd");
    recorder.inc_queue_incoming_pods("unschedulable", "ScheduleAttemptFailure");
    recorder.inc_queue_incoming_pods("active", &String::from("NodeAdd"));
    let (_, samples) = parse(&recorder.encode());
    let total = |queue, event, n| {
        sample(
            "scheduler_queue_incoming_pods_total",
            &[("queue", queue), ("event", event)],
            n,
        )
    };
    assert_eq!(
        sorted(family(&samples, "scheduler_queue_incoming_pods")),
        sorted(vec![
            total("active", "NodeAdd", 1.0),
            total("active", "PodAdd", 2.0),
            total("unschedulable", "ScheduleAttemptFailure", 1.0),
        ])
    );
}

#[test]
fn preemption_counts_every_attempt_and_observes_victims_of_chosen_candidates() {
    let recorder = PrometheusRecorder::new();
    recorder.observe_preemption(2);
    recorder.observe_preemption(0);
    recorder.observe_preemption(70);
    let (_, samples) = parse(&recorder.encode());
    assert_eq!(
        family(&samples, "scheduler_preemption_attempts"),
        vec![sample("scheduler_preemption_attempts_total", &[], 3.0)]
    );
    assert_eq!(
        sorted(family(&samples, "scheduler_preemption_victims")),
        sorted(histogram(
            "scheduler_preemption_victims",
            &[],
            &VICTIM_BOUNDS,
            &[2.0, 70.0]
        ))
    );
}

#[test]
fn the_text_is_what_prometheus_reads_line_for_line() {
    let recorder = PrometheusRecorder::new();
    recorder.observe_preemption(3);
    let text = recorder.encode();
    let expected = "\
# HELP scheduler_preemption_victims [STABLE] Number of selected preemption victims
# TYPE scheduler_preemption_victims histogram
scheduler_preemption_victims_sum 3.0
scheduler_preemption_victims_count 1
scheduler_preemption_victims_bucket{le=\"1.0\"} 0
scheduler_preemption_victims_bucket{le=\"2.0\"} 0
scheduler_preemption_victims_bucket{le=\"4.0\"} 1
scheduler_preemption_victims_bucket{le=\"8.0\"} 1
scheduler_preemption_victims_bucket{le=\"16.0\"} 1
scheduler_preemption_victims_bucket{le=\"32.0\"} 1
scheduler_preemption_victims_bucket{le=\"64.0\"} 1
scheduler_preemption_victims_bucket{le=\"+Inf\"} 1
# HELP scheduler_preemption_attempts [STABLE] Total preemption attempts in the cluster till now
# TYPE scheduler_preemption_attempts counter
scheduler_preemption_attempts_total 1
";
    assert!(
        text.contains(expected),
        "expected snippet not found in:\n{text}"
    );
}

#[test]
fn label_values_are_escaped() {
    let recorder = PrometheusRecorder::new();
    recorder.inc_queue_incoming_pods("active", "we\"ird\\event\nx");
    let text = recorder.encode();
    assert!(text.contains(
        "scheduler_queue_incoming_pods_total{queue=\"active\",event=\"we\\\"ird\\\\event\\nx\"} 1\n"
    ));
    let (_, samples) = parse(&text);
    assert_eq!(
        family(&samples, "scheduler_queue_incoming_pods"),
        vec![sample(
            "scheduler_queue_incoming_pods_total",
            &[("queue", "active"), ("event", "we\"ird\\event\nx")],
            1.0
        )]
    );
}

/// The framework runtime observes its own plugin calls: a sampled cycle run through it,
/// with no timing by the caller, leaves samples in the plugin family.
#[test]
fn plugin_execution_family_has_samples_after_a_sampled_cycle() {
    use crate::runtime::{Framework, ProfileSpec};
    use crate::testing::{Fake, FakeRegistry};

    let registry = FakeRegistry::with(vec![Fake::named("FS")
        .rejecting(&[("n2", framework::Status::unschedulable("full"))])
        .scoring(&[("n1", 10)])]);
    let mut spec = ProfileSpec {
        scheduler_name: "kubesched".into(),
        ..Default::default()
    };
    for (i, name) in ["Sort", "Bind", "FS"].into_iter().enumerate() {
        spec.multi_point.enabled.push((name.to_string(), 0));
        spec.plugin_args
            .insert(name.to_string(), (i, serde_json::json!({ "fake": name })));
    }
    let (mut fwk, _) = Framework::build(&spec, &registry, framework::Handle::offline(), &[])
        .unwrap_or_else(|e| panic!("{e:?}"));
    let recorder = Arc::new(PrometheusRecorder::new());
    fwk.set_metrics(recorder.clone());
    let pod = framework::testing::make_pod("p").info();
    let nodes: Vec<_> = ["n1", "n2"]
        .iter()
        .map(|n| Arc::new(framework::testing::make_node(n).info_with(&[])))
        .collect();
    let mut state = framework::CycleState::new();
    state.set_record_plugin_metrics(true);
    let filtered: Vec<Code> = nodes
        .iter()
        .map(|n| fwk.run_filter_plugins(&state, &pod, n).code())
        .collect();
    assert_eq!(filtered, vec![Code::Success, Code::Unschedulable]);
    let scores = fwk.run_score_plugins(&state, &pod, &nodes[..1]);
    assert_eq!(scores.map(|s| s.totals), Ok(vec![10]));

    let (_, samples) = parse(&recorder.encode());
    let name = "scheduler_plugin_execution_duration_seconds";
    let counts: Vec<Sample> = family(&samples, name)
        .into_iter()
        .filter(|s| s.name.ends_with("_count"))
        .collect();
    let count = |point: &str, status: &str| {
        sample(
            &format!("{name}_count"),
            &[
                ("plugin", "FS"),
                ("extension_point", point),
                ("status", status),
            ],
            1.0,
        )
    };
    assert_eq!(
        sorted(counts),
        sorted(vec![
            count("Filter", "Success"),
            count("Filter", "Unschedulable"),
            count("Score", "Success"),
        ])
    );
}

/// The framework built from fake plugins `Sort`, `Bind` and `FS` (filtering and scoring),
/// recording into a fresh Prometheus recorder.
fn fake_framework(
    fs: crate::testing::Fake,
    handle: framework::Handle,
) -> (crate::runtime::Framework, Arc<PrometheusRecorder>) {
    use crate::runtime::{Framework, ProfileSpec};
    use crate::testing::FakeRegistry;

    let registry = FakeRegistry::with(vec![fs]);
    let mut spec = ProfileSpec {
        scheduler_name: "kubesched".into(),
        ..Default::default()
    };
    for (i, name) in ["Sort", "Bind", "FS"].into_iter().enumerate() {
        spec.multi_point.enabled.push((name.to_string(), 0));
        spec.plugin_args
            .insert(name.to_string(), (i, serde_json::json!({ "fake": name })));
    }
    let (mut fwk, _) =
        Framework::build(&spec, &registry, handle, &[]).unwrap_or_else(|e| panic!("{e:?}"));
    let recorder = Arc::new(PrometheusRecorder::new());
    fwk.set_metrics(recorder.clone());
    (fwk, recorder)
}

/// The plugin family with the `_sum` lines apart: a batch adds its durations up in whole
/// nanoseconds, one by one adds seconds, so the sums agree only to rounding.
fn without_sums(samples: Vec<Sample>) -> (Vec<Sample>, Vec<f64>) {
    let (sums, rest): (Vec<Sample>, Vec<Sample>) =
        samples.into_iter().partition(|s| s.name.ends_with("_sum"));
    (
        sorted(rest),
        sorted(sums).into_iter().map(|s| s.value).collect(),
    )
}

/// A batch is tallied per label set before it reaches the histograms: each call still lands
/// in the bucket upstream's `le` bounds give it, a duration equal to a bound included.
#[test]
fn a_batch_of_plugin_calls_is_exposed_as_the_calls_one_by_one() {
    let nanos = [
        0,
        9_999,
        10_000, // the first bound, 1e-05 s
        10_001,
        15_000, // the second, 1.5000000000000002e-05 s
        15_001,
        22_168_378, // just under the last bound
        22_168_379, // +Inf
        1_000_000_000,
    ];
    let mut batch = Vec::new();
    for (i, n) in nanos.iter().enumerate() {
        // Label sets interleaved, as Filter calls on successive nodes are.
        let (plugin, status) = match i % 3 {
            0 => ("NodeResourcesFit", Code::Success),
            1 => ("TaintToleration", Code::Success),
            _ => ("NodeResourcesFit", Code::Unschedulable),
        };
        batch.push(PluginSample {
            plugin,
            extension_point: ExtensionPointLabel::Filter,
            status,
            duration: Duration::from_nanos(*n),
        });
    }
    let batched = PrometheusRecorder::new();
    batched.observe_plugin_executions(&batch);
    let name = "scheduler_plugin_execution_duration_seconds";
    let (_, samples) = parse(&batched.encode());
    let (got, got_sums) = without_sums(family(&samples, name));

    let mut want = Vec::new();
    for (plugin, status, first) in [
        ("NodeResourcesFit", "Success", 0),
        ("TaintToleration", "Success", 1),
        ("NodeResourcesFit", "Unschedulable", 2),
    ] {
        let secs: Vec<f64> = nanos
            .iter()
            .skip(first)
            .step_by(3)
            .map(|n| Duration::from_nanos(*n).as_secs_f64())
            .collect();
        want.extend(histogram(
            name,
            &[
                ("plugin", plugin),
                ("extension_point", "Filter"),
                ("status", status),
            ],
            &PLUGIN_BOUNDS,
            &secs,
        ));
    }
    let (want, want_sums) = without_sums(want);
    assert_eq!(got, want);
    assert_eq!(got_sums.len(), want_sums.len());
    for (got, want) in got_sums.iter().zip(&want_sums) {
        assert!((got - want).abs() < 1e-12, "sum {got} against {want}");
    }
}

/// In a sampled cycle whose Filter pass runs in parallel chunks, every call of every chunk
/// reaches the recorder: each worker's buffer is recorded when its chunk is merged.
#[test]
fn sampled_parallel_filter_pass_records_every_call() {
    use crate::schedule_one::{ScheduleAlgorithm, PARALLEL_FILTER_MIN_NODES};

    let handle = framework::Handle::new(
        framework::Parallelizer::new(2),
        Arc::new(framework::handle::NoopClient),
    );
    let (fwk, recorder) = fake_framework(crate::testing::Fake::named("FS").rejecting(&[]), handle);
    let n = PARALLEL_FILTER_MIN_NODES + 100;
    let nodes = (0..n)
        .map(|i| Arc::new(framework::testing::make_node(&format!("n{i}")).obj()))
        .collect();
    let snapshot = framework::Snapshot::new(nodes, Vec::new());
    let pod = framework::testing::make_pod("p").info();
    let mut state = framework::CycleState::new();
    state.set_record_plugin_metrics(true);
    // Every node is looked at: percentageOfNodesToScore 100.
    let mut algo = ScheduleAlgorithm::new(1, Some(100));
    let r = algo.schedule_pod(&fwk, &mut state, &pod, &snapshot, None);
    assert!(r.is_ok(), "{r:?}");

    let (_, samples) = parse(&recorder.encode());
    let name = "scheduler_plugin_execution_duration_seconds";
    let filter_count: Vec<Sample> = family(&samples, name)
        .into_iter()
        .filter(|s| {
            s.name.ends_with("_count")
                && s.labels
                    .contains(&("extension_point".to_string(), "Filter".to_string()))
        })
        .collect();
    assert_eq!(
        filter_count,
        vec![sample(
            &format!("{name}_count"),
            &[
                ("plugin", "FS"),
                ("extension_point", "Filter"),
                ("status", "Success"),
            ],
            n as f64,
        )]
    );
}

#[test]
fn batch_attempts_and_flushes_are_counted_by_profile_with_upstreams_names() {
    let recorder = PrometheusRecorder::new();
    recorder.inc_batch_attempt("default-scheduler", BatchAttemptResult::NoHint);
    recorder.inc_batch_attempt("default-scheduler", BatchAttemptResult::HintUsed);
    recorder.inc_batch_attempt("default-scheduler", BatchAttemptResult::HintUsed);
    recorder.inc_batch_attempt("other", BatchAttemptResult::HintNotUsed);
    recorder.inc_batch_cache_flushed("default-scheduler", BatchFlushReason::NodeNotFull);
    let (families, samples) = parse(&recorder.encode());
    let declared = |name: &str| families.get(name).cloned();
    assert_eq!(
        (
            declared("scheduler_batch_attempts"),
            declared("scheduler_batch_cache_flushed")
        ),
        (
            Some((
                "counter".to_string(),
                "[ALPHA] Counts of results when we attempt to use batching.".to_string()
            )),
            Some((
                "counter".to_string(),
                "[ALPHA] Counts of cache flushes by reason.".to_string()
            ))
        )
    );
    let attempts = |profile, result, n| {
        sample(
            "scheduler_batch_attempts_total",
            &[("profile", profile), ("result", result)],
            n,
        )
    };
    assert_eq!(
        sorted(family(&samples, "scheduler_batch_attempts")),
        sorted(vec![
            attempts("default-scheduler", "hint_used", 2.0),
            attempts("default-scheduler", "no_hint", 1.0),
            attempts("other", "hint_not_used", 1.0),
        ])
    );
    assert_eq!(
        family(&samples, "scheduler_batch_cache_flushed"),
        vec![sample(
            "scheduler_batch_cache_flushed_total",
            &[
                ("profile", "default-scheduler"),
                ("reason", "node_not_full")
            ],
            1.0
        )]
    );
}

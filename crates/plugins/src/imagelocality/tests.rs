use super::*;

use framework::testing::{make_node, make_pod, NodeBuilder, PodBuilder};
use framework::Code;
use k8s_openapi::api::core::v1::{Container, ImageVolumeSource, Volume};
use rstest::rstest;

fn plugin() -> Arc<dyn Plugin> {
    let Ok(p) = new(None, &Handle::offline()) else {
        unreachable!("ImageLocality takes no args")
    };
    p
}

fn snapshot(nodes: Vec<NodeBuilder>) -> Snapshot {
    Snapshot::new(nodes.into_iter().map(|n| Arc::new(n.obj())).collect(), [])
}

/// PreScore over `feasible` (all nodes when `None`), then Score on each feasible node.
fn scores(
    pod: PodBuilder,
    snap: &Snapshot,
    feasible: Option<&[&str]>,
) -> Vec<(String, Result<i64, Status>)> {
    let p = plugin();
    let pod = pod.info();
    let nodes: Vec<Arc<NodeInfo>> = snap
        .node_infos()
        .iter()
        .filter(|n| feasible.is_none_or(|names| names.contains(&n.name())))
        .cloned()
        .collect();
    let mut state = CycleState::new();
    let pre = p
        .as_pre_score()
        .map(|ps| ps.pre_score(&mut state, &pod, snap, &nodes));
    assert_eq!(pre, Some(Status::success()));
    let each: Vec<(String, Result<i64, Status>)> = nodes
        .iter()
        .map(|n| {
            let score = match p.as_score() {
                Some(s) => s.score(&state, &pod, n),
                None => Err(Status::error("ImageLocality is a Score plugin")),
            };
            (n.name().to_string(), score)
        })
        .collect();
    // Scoring all nodes in one call gives the same scores.
    if let (Some(s), true) = (p.as_score(), each.iter().all(|(_, r)| r.is_ok())) {
        let mut batch = vec![0; nodes.len()];
        assert_eq!(s.score_nodes(&state, &pod, &nodes, &mut batch), Ok(()));
        let want: Vec<i64> = each.iter().filter_map(|(_, r)| r.clone().ok()).collect();
        assert_eq!(batch, want);
    }
    each
}

fn ok(list: &[(&str, i64)]) -> Vec<(String, Result<i64, Status>)> {
    list.iter().map(|&(n, s)| (n.to_string(), Ok(s))).collect()
}

/// Node 1 of upstream's tests: a 40 MiB, a 300 MiB and a 2000 MiB image.
fn node_40_300_2000() -> NodeBuilder {
    make_node("n1")
        .image(&["gcr.io/40:latest", "gcr.io/40:v1"], 40 * MB)
        .image(&["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB)
        .image(&["gcr.io/2000:latest"], 2000 * MB)
}

/// Node 2 of upstream's tests: a 250 MiB and a 10 MiB image.
fn node_250_10() -> NodeBuilder {
    make_node("n2")
        .image(&["gcr.io/250:latest"], 250 * MB)
        .image(&["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)
}

fn images(names: &[&str]) -> PodBuilder {
    names.iter().fold(make_pod("p"), |p, name| p.image(name))
}

fn init_image(p: PodBuilder, image: &str) -> PodBuilder {
    p.with(|pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.init_containers
                .get_or_insert_with(Vec::new)
                .push(Container {
                    name: "init".to_string(),
                    image: Some(image.to_string()),
                    ..Default::default()
                });
        }
    })
}

fn image_volume(p: PodBuilder, reference: &str) -> PodBuilder {
    p.with(|pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                name: "artifacts".to_string(),
                image: Some(ImageVolumeSource {
                    reference: Some(reference.to_string()),
                    pull_policy: None,
                }),
                ..Default::default()
            });
        }
    })
}

// Expected scores, by upstream's formula (MiB = 2^20 bytes, integer division):
//   sum = Σ trunc(size × nodesWithImage / totalNodes) over the pod's images on the node,
//   clamped to [23 MiB, 1000 MiB × images]; score = 100 × (sum − 23 MiB) / (max − 23 MiB).
#[rstest]
// n1: 40/2 = 20 MiB < 23 MiB → 0. n2: 250/2 = 125 MiB → 100 × 102 / 1977 = 5.
#[case::small_image_scores_zero_larger_one_scores(
    images(&["gcr.io/40", "gcr.io/250"]),
    vec![node_40_300_2000(), node_250_10()],
    ok(&[("n1", 0), ("n2", 5)])
)]
// n1: (40 + 300)/2 = 170 MiB → 100 × 147 / 1977 = 7.
#[case::two_present_images_add_up(
    images(&["gcr.io/40", "gcr.io/300"]),
    vec![node_40_300_2000(), node_250_10()],
    ok(&[("n1", 7), ("n2", 0)])
)]
// n1: 2000/2 = 1000 MiB → 100 × 977 / 1977 = 49; n2: 10/2 = 5 MiB → 0.
#[case::large_image_is_bounded_by_two_image_maximum(
    images(&["gcr.io/2000", "gcr.io/10"]),
    vec![node_40_300_2000(), node_250_10()],
    ok(&[("n1", 49), ("n2", 0)])
)]
// n1: trunc(2000 MiB / 3) = 699050666 bytes → 100 × (699050666 − 24117248) / 2073034752 = 32.
#[case::node_without_images_counts_in_the_cluster_size(
    images(&["gcr.io/2000", "gcr.io/10"]),
    vec![node_40_300_2000(), node_250_10(), make_node("n3")],
    ok(&[("n1", 32), ("n2", 0), ("n3", 0)])
)]
// One image of 2000 MiB on the only node: clamped to 1000 MiB → 100.
#[case::above_maximum_scores_hundred(
    images(&["gcr.io/2000:latest"]),
    vec![node_40_300_2000()],
    ok(&[("n1", 100)])
)]
// 500 MiB on 2 of 3 nodes: trunc(500 MiB × 2/3) → 31; on 1 of 3 → 14.
#[case::shared_image_scores_higher_than_rare_one(
    images(&["nginx:1.25", "redis:7"]),
    vec![
        make_node("n1").image(&["nginx:1.25"], 500 * MB),
        make_node("n2").image(&["nginx:1.25"], 500 * MB),
        make_node("n3").image(&["redis:7"], 500 * MB),
    ],
    // Two images: n1 = 100 × (333.3 − 23) / 1977 = 15; n3 = 100 × (166.7 − 23) / 1977 = 7.
    ok(&[("n1", 15), ("n2", 15), ("n3", 7)])
)]
#[case::shared_single_image(
    images(&["nginx:1.25"]),
    vec![
        make_node("n1").image(&["nginx:1.25"], 500 * MB),
        make_node("n2").image(&["nginx:1.25"], 500 * MB),
        make_node("n3").image(&["redis:7"], 500 * MB),
    ],
    ok(&[("n1", 31), ("n2", 31), ("n3", 0)])
)]
// The same image in two containers counts twice: 1600 MiB of 2000 → 100 × 1577 / 1977 = 79.
#[case::repeated_image_counts_twice(
    images(&["big:1", "big:1"]),
    vec![make_node("n1").image(&["big:1"], 800 * MB)],
    ok(&[("n1", 79)])
)]
// 500 MiB on the only node, one image: 100 × 477 / 977 = 48.
#[case::untagged_image_matches_latest(
    images(&["app"]),
    vec![make_node("n1").image(&["app:latest"], 500 * MB)],
    ok(&[("n1", 48)])
)]
#[case::untagged_image_does_not_match_other_tag(
    images(&["app"]),
    vec![make_node("n1").image(&["app:v1"], 500 * MB)],
    ok(&[("n1", 0)])
)]
#[case::registry_port_is_not_a_tag(
    images(&["registry:5000/app"]),
    vec![make_node("n1").image(&["registry:5000/app:latest"], 500 * MB)],
    ok(&[("n1", 48)])
)]
#[case::digest_is_kept(
    images(&["app@sha256:0123"]),
    vec![make_node("n1").image(&["app@sha256:0123"], 500 * MB)],
    ok(&[("n1", 48)])
)]
// Init container 300 MiB + container 600 MiB, two images: 100 × 877 / 1977 = 44.
#[case::init_container_image_counts(
    init_image(images(&["app:2"]), "setup:1"),
    vec![make_node("n1").image(&["setup:1"], 300 * MB).image(&["app:2"], 600 * MB)],
    ok(&[("n1", 44)])
)]
// An absent init image still raises the maximum: 600 MiB of 2000 → 100 × 577 / 1977 = 29.
#[case::absent_init_image_raises_the_maximum(
    init_image(images(&["app:2"]), "setup:1"),
    vec![make_node("n1").image(&["app:2"], 600 * MB)],
    ok(&[("n1", 29)])
)]
// Image volume 300 MiB + container 600 MiB, two images: 44.
#[case::image_volume_counts(
    image_volume(images(&["app:2"]), "data:1"),
    vec![make_node("n1").image(&["data:1"], 300 * MB).image(&["app:2"], 600 * MB)],
    ok(&[("n1", 44)])
)]
#[case::pod_without_images_scores_zero(
    make_pod("p"),
    vec![node_40_300_2000()],
    ok(&[("n1", 0)])
)]
fn score(
    #[case] pod: PodBuilder,
    #[case] nodes: Vec<NodeBuilder>,
    #[case] want: Vec<(String, Result<i64, Status>)>,
) {
    assert_eq!(scores(pod, &snapshot(nodes), None), want);
}

#[test]
fn cluster_size_is_every_snapshot_node_not_only_feasible_ones() {
    // Only n1 is feasible, but the image's spread is 1 of 2 nodes: 250 MiB / 2 = 125 MiB,
    // one image → 100 × 102 / 977 = 10 (it would be 23 with a cluster of one).
    let snap = snapshot(vec![
        make_node("n1").image(&["gcr.io/250:latest"], 250 * MB),
        make_node("n2"),
    ]);
    assert_eq!(
        scores(images(&["gcr.io/250"]), &snap, Some(&["n1"])),
        ok(&[("n1", 10)])
    );
}

#[test]
fn score_without_pre_score_and_without_node_count_is_an_error() {
    let p = plugin();
    let pod = images(&["app"]).info();
    let node = make_node("n1").info_with(&[]);
    assert_eq!(
        p.as_score()
            .map(|s| s.score(&CycleState::new(), &pod, &node)),
        Some(Err(Status::new(
            Code::Error,
            "reading \"PreScoreImageLocality\" from cycleState: not found"
        )))
    );
}

#[test]
fn score_enabled_without_pre_score_gives_the_same_scores() {
    // A profile may enable ImageLocality at Score only; the runtime's node count is enough.
    let snap = snapshot(vec![node_40_300_2000(), make_node("n2")]);
    let pod = images(&["gcr.io/40", "gcr.io/300"]);
    let with_pre_score = scores(pod.clone(), &snap, None);
    let p = plugin();
    let info = pod.info();
    let mut state = CycleState::new();
    state.set_num_all_nodes(snap.num_nodes());
    let without: Vec<(String, Result<i64, Status>)> = snap
        .node_infos()
        .iter()
        .map(|n| {
            let score = match p.as_score() {
                Some(s) => s.score(&state, &info, n),
                None => Err(Status::error("ImageLocality is a Score plugin")),
            };
            (n.name().to_string(), score)
        })
        .collect();
    assert_eq!(without, with_pre_score);
}

#[rstest]
#[case::bare_name_gets_latest("root", "root:latest")]
#[case::registry_port_is_not_a_tag("gcr.io:5000/root", "gcr.io:5000/root:latest")]
#[case::path_gets_latest("gcr.io/team/root", "gcr.io/team/root:latest")]
#[case::tag_is_kept("root:tag", "root:tag")]
#[case::tag_after_registry_port_is_kept("gcr.io:5000/root:tag", "gcr.io:5000/root:tag")]
#[case::digest_is_kept("root@sha256:abcd", "root@sha256:abcd")]
#[case::empty_gets_latest("", ":latest")]
fn normalizes_image_names(#[case] name: &str, #[case] want: &str) {
    assert_eq!(normalized_image_name(name), want);
}

#[rstest]
#[case::below_minimum(0, 1, 0)]
#[case::at_minimum(MIN_THRESHOLD, 1, 0)]
#[case::at_maximum(MAX_CONTAINER_THRESHOLD, 1, 100)]
#[case::maximum_scales_with_images(MAX_CONTAINER_THRESHOLD, 2, 49)]
#[case::no_images(0, 0, 0)]
fn priority(#[case] sum: i64, #[case] num_images: usize, #[case] want: i64) {
    assert_eq!(calculate_priority(sum, num_images), want);
}

#[test]
fn is_a_pre_score_and_score_plugin_without_normalize() {
    let p = plugin();
    assert_eq!(
        (
            p.name(),
            p.as_pre_score().is_some(),
            p.as_score().map(|s| s.score_extensions().is_some()),
            p.as_filter().is_some(),
        ),
        (names::IMAGE_LOCALITY, true, Some(false), false)
    );
}

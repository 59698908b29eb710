//! ImageLocality: prefers nodes that already hold the images the pod needs, so it starts
//! without pulling.
//!
//! Upstream: pkg/scheduler/framework/plugins/imagelocality. The images are those of the
//! init containers, the containers and the image volumes, each counted once per use
//! (a repeated image counts again), named as the container runtime reports them (`:latest`
//! added to a name without tag or digest). Each image present on the node adds its size
//! scaled by the share of the cluster's nodes holding it, so an image cached on one node of
//! many barely counts (this keeps a popular image from piling every pod onto the first node
//! that pulled it). The sum is clamped to 23 MiB ..= 1000 MiB × number of images and
//! mapped linearly onto 0..=100. The cluster size is every node of the snapshot, not only
//! the feasible ones.

use std::sync::Arc;

use framework::{
    ArgsError, CycleState, Handle, NodeInfo, NodeRow, Plugin, PodInfo, PreScorePlugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use framework::{SignFragment, SignPlugin};

use crate::names;

pub const NAME: &str = names::IMAGE_LOCALITY;

/// CycleState key of what PreScore computes for the pod.
const PRE_SCORE_STATE_KEY: &str = "PreScoreImageLocality";

/// Score ran without the state PreScore writes.
const ERR_NO_PRE_SCORE_STATE: &str = "reading \"PreScoreImageLocality\" from cycleState: not found";

const MB: i64 = 1024 * 1024;
/// Below this (scaled) total, a node scores 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per image: at or above this many (scaled) bytes per image, a node scores 100. Together
/// with [`MIN_THRESHOLD`] it spans the sizes of about 90 % of images in public registries.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// Upstream: pkg/scheduler/framework/plugins/imagelocality.ImageLocality.
#[derive(Debug, Default)]
pub struct ImageLocality;

/// Builds the plugin; it takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Handle,
) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    Ok(Arc::new(ImageLocality))
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        Some(self)
    }
}

impl SignPlugin for ImageLocality {
    /// Scores depend on the pod's images, each use counted.
    fn sign_pod(&self, pod: &PodInfo) -> Result<Vec<SignFragment>, Status> {
        let mut images: Vec<String> = pod_images(pod).map(normalized_image_name).collect();
        images.sort_unstable();
        Ok(vec![SignFragment::new(
            framework::sign::IMAGE_NAMES_SIGNER,
            serde_json::Value::from(images),
        )])
    }
}

impl PreScorePlugin for ImageLocality {
    /// Normalizes the pod's image names once and records the cluster size, so that Score
    /// only looks names up. (Upstream has no PreScore: it recomputes both for every node.)
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState {
                images: pod_images(pod).map(normalized_image_name).collect(),
                total_num_nodes: snapshot.num_nodes(),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            // A profile may enable ImageLocality at Score only (upstream has no PreScore):
            // compute per node what PreScore would have, from the runtime's node count.
            if state.num_all_nodes() == 0 {
                return Err(Status::error(ERR_NO_PRE_SCORE_STATE));
            }
            let computed = PreScoreState {
                images: pod_images(pod).map(normalized_image_name).collect(),
                total_num_nodes: state.num_all_nodes(),
            };
            return Ok(score_with(&computed, node));
        };
        Ok(score_with(s, node))
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        out: &mut [i64],
    ) -> Result<(), Status> {
        framework::score_nodes_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            out,
            score_with,
        )
    }

    /// A node reporting no images (the row says so) is scored without reading the node.
    fn score_rows(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        rows: &[NodeRow],
        out: &mut [i64],
    ) -> Result<(), Status> {
        framework::score_rows_with_state(
            self,
            PRE_SCORE_STATE_KEY,
            state,
            pod,
            nodes,
            rows,
            out,
            |s: &PreScoreState, node, row| {
                if row.has_images {
                    score_with(s, node)
                } else {
                    calculate_priority(0, s.images.len())
                }
            },
        )
    }
}

/// The node's score from the pod's normalized images and the cluster size.
fn score_with(s: &PreScoreState, node: &NodeInfo) -> i64 {
    {
        // Most nodes of a big cluster report no images: skip hashing the names then.
        if node.image_states.is_empty() {
            return calculate_priority(0, s.images.len());
        }
        let sum = s
            .images
            .iter()
            .filter_map(|name| node.image_states.get(name))
            .map(|image| scaled_image_score(image.size, image.num_nodes, s.total_num_nodes))
            .fold(0_i64, i64::saturating_add);
        calculate_priority(sum, s.images.len())
    }
}

/// What PreScore computes for the pod.
#[derive(Debug, Clone)]
struct PreScoreState {
    /// One entry per image use: init containers, containers, image volumes.
    images: Vec<String>,
    /// Nodes in the snapshot.
    total_num_nodes: usize,
}

/// The image references of the pod, one per use, as written in the spec (empty when unset).
fn pod_images(pod: &PodInfo) -> impl Iterator<Item = &str> {
    let spec = pod.pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|c| c.image.as_deref().unwrap_or(""));
    let containers = spec
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| c.image.as_deref().unwrap_or(""));
    let volumes = spec
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.image.as_ref())
        .map(|i| i.reference.as_deref().unwrap_or(""));
    init.chain(containers).chain(volumes)
}

/// The name a container runtime reports for `name`: `:latest` added when it carries
/// neither tag nor digest (no `:` after the last `/`).
fn normalized_image_name(name: &str) -> String {
    let has_tag_or_digest = match (name.rfind(':'), name.rfind('/')) {
        (Some(colon), Some(slash)) => colon > slash,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if has_tag_or_digest {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// An image's size scaled by the share of nodes holding it. Computed in floating point and
/// truncated, exactly as upstream does, so scores agree to the unit.
fn scaled_image_score(size: i64, num_nodes: usize, total_num_nodes: usize) -> i64 {
    if total_num_nodes == 0 {
        return 0;
    }
    let spread = num_nodes as f64 / total_num_nodes as f64;
    (size as f64 * spread) as i64
}

/// Maps the summed image scores onto 0..=100 between the thresholds.
fn calculate_priority(sum_scores: i64, num_images: usize) -> i64 {
    let max_threshold =
        MAX_CONTAINER_THRESHOLD.saturating_mul(i64::try_from(num_images).unwrap_or(i64::MAX));
    // Upstream clamps in this order: with no images the maximum (0) is below the minimum,
    // and the sum (0) lifts to the minimum, which scores 0.
    let clamped = if sum_scores < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else if sum_scores > max_threshold {
        max_threshold
    } else {
        sum_scores
    };
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
}

#[cfg(test)]
mod tests;

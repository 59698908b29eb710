//! Helpers shared by several plugins.
//!
//! Upstream: pkg/scheduler/framework/plugins/helper.

pub mod events;
pub mod node_cache;
pub mod storage;
pub mod taints;
pub mod validation;

use framework::{NodeScore, Status, MAX_NODE_SCORE};

/// Scales scores so that the highest becomes `max_priority` (and, with `reverse`, inverts
/// them: the lowest raw score gets the highest). When every score is 0, all become 0, or
/// `max_priority` with `reverse`. Upstream: helper.DefaultNormalizeScore.
pub fn default_normalize_score(
    max_priority: i64,
    reverse: bool,
    scores: &mut [NodeScore<'_>],
) -> Status {
    let max = scores.iter().map(|s| s.score).max().unwrap_or(0).max(0);
    if max == 0 {
        if reverse {
            for s in scores.iter_mut() {
                s.score = max_priority;
            }
        }
        return Status::success();
    }
    for s in scores.iter_mut() {
        let mut v = max_priority * s.score / max;
        if reverse {
            v = max_priority - v;
        }
        s.score = v;
    }
    Status::success()
}

/// [`default_normalize_score`] with the framework's maximum score.
pub fn normalize_to_max(reverse: bool, scores: &mut [NodeScore<'_>]) -> Status {
    default_normalize_score(MAX_NODE_SCORE, reverse, scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::testing::make_node;
    use rstest::rstest;

    #[rstest]
    #[case::scaled(vec![10, 5, 0], false, vec![100, 50, 0])]
    #[case::reversed(vec![10, 5, 0], true, vec![0, 50, 100])]
    #[case::all_zero(vec![0, 0], false, vec![0, 0])]
    #[case::all_zero_reversed(vec![0, 0], true, vec![100, 100])]
    #[case::integer_division(vec![3, 1], false, vec![100, 33])]
    fn normalizes(#[case] raw: Vec<i64>, #[case] reverse: bool, #[case] want: Vec<i64>) {
        let node = make_node("n").info_with(&[]);
        let mut scores: Vec<NodeScore<'_>> = raw
            .iter()
            .map(|&s| NodeScore {
                node: &node,
                score: s,
            })
            .collect();
        default_normalize_score(100, reverse, &mut scores);
        assert_eq!(scores.iter().map(|s| s.score).collect::<Vec<_>>(), want);
    }
}

use super::*;

use std::time::{Duration, Instant};

use framework::testing::{make_pod, PodBuilder};
use rstest::rstest;

fn plugin() -> Arc<dyn Plugin> {
    let Ok(p) = new(None, &Handle::offline()) else {
        unreachable!("PrioritySort takes no args")
    };
    p
}

/// A queued pod stamped `secs` seconds after `base`.
fn queued(pod: PodBuilder, base: Instant, secs: u64) -> QueuedPodInfo {
    QueuedPodInfo::new(pod.info(), base + Duration::from_secs(secs))
}

#[rstest]
#[case::higher_priority_first(make_pod("a").priority(100), 10, make_pod("b").priority(1), 0, (true, false))]
#[case::higher_priority_first_even_when_queued_later(make_pod("a").priority(2), 60, make_pod("b").priority(1), 0, (true, false))]
#[case::equal_priority_earlier_first(make_pod("a").priority(5), 0, make_pod("b").priority(5), 1, (true, false))]
#[case::unset_priority_is_zero(make_pod("a"), 0, make_pod("b").priority(0), 1, (true, false))]
#[case::negative_priority_after_unset(make_pod("a"), 10, make_pod("b").priority(-1), 0, (true, false))]
#[case::same_priority_and_time_is_neither_less(make_pod("a").priority(3), 0, make_pod("b").priority(3), 0, (false, false))]
fn less(
    #[case] a: PodBuilder,
    #[case] a_secs: u64,
    #[case] b: PodBuilder,
    #[case] b_secs: u64,
    #[case] want: (bool, bool),
) {
    let base = Instant::now();
    let (a, b) = (queued(a, base, a_secs), queued(b, base, b_secs));
    let p = plugin();
    let got = p
        .as_queue_sort()
        .map(|qs| (qs.less(&a, &b), qs.less(&b, &a)));
    assert_eq!(got, Some(want));
}

#[test]
fn sorts_a_queue_by_priority_then_arrival() {
    let base = Instant::now();
    let mut pods = [
        queued(make_pod("low-early"), base, 0),
        queued(make_pod("high-late").priority(1000), base, 30),
        queued(make_pod("mid-late").priority(10), base, 20),
        queued(make_pod("high-early").priority(1000), base, 5),
        queued(make_pod("mid-early").priority(10), base, 1),
        queued(make_pod("low-late"), base, 40),
    ];
    let p = plugin();
    let Some(qs) = p.as_queue_sort() else {
        unreachable!("PrioritySort is a QueueSort plugin")
    };
    pods.sort_by(|a, b| {
        if qs.less(a, b) {
            std::cmp::Ordering::Less
        } else if qs.less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    let order: Vec<&str> = pods.iter().map(|q| q.pod_info.name()).collect();
    assert_eq!(
        order,
        vec![
            "high-early",
            "high-late",
            "mid-early",
            "mid-late",
            "low-early",
            "low-late"
        ]
    );
}

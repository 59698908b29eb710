//! Binding cycles handed from the scheduling loop's thread to the runtime in small groups.
//!
//! Spawning a task from a thread outside the runtime wakes an idle worker (a syscall and,
//! on a busy machine, a context switch on the loop's thread) when every worker is parked,
//! which between two cycles they usually are. The loop keeps the binding cycles of a few
//! consecutive pods and hands them over as one group: one task, spawned from the loop's
//! thread, that spawns the group's cycles from a worker, so the loop's thread wakes one
//! worker per group. Each binding cycle is still a task of its own, so bindings run
//! concurrently as before. A group is handed over when it is full, when its first pod has
//! waited [`MAX_DELAY`] (checked after each cycle), after a cycle that itself took that
//! long, and before the loop waits for a pod. So only fast cycles group their binding
//! cycles, and a binding cycle waits at most [`MAX_DELAY`] and the scheduling cycle running
//! when that has passed.

use std::time::{Duration, Instant};

/// Binding cycles kept before they are handed over.
pub(super) const MAX_GROUP: usize = 8;

/// How long the first binding cycle of a group may wait for the group to fill.
pub(super) const MAX_DELAY: Duration = Duration::from_micros(250);

/// Binding cycles not yet handed to the runtime, oldest first.
#[derive(Debug)]
pub(super) struct Handoff<T> {
    pending: Vec<T>,
    /// When the oldest pending cycle was kept.
    since: Option<Instant>,
}

impl<T> Default for Handoff<T> {
    fn default() -> Self {
        Handoff {
            pending: Vec::with_capacity(MAX_GROUP),
            since: None,
        }
    }
}

impl<T> Handoff<T> {
    /// Keeps `task`; hands the group to `spawn` when it is full.
    pub fn push(&mut self, task: T, now: Instant, spawn: impl FnOnce(Vec<T>)) {
        self.since.get_or_insert(now);
        self.pending.push(task);
        if self.pending.len() >= MAX_GROUP {
            self.flush(spawn);
        }
    }

    /// After a scheduling cycle that began at `began`: hands the group to `spawn` when its
    /// oldest cycle has waited [`MAX_DELAY`], or when this scheduling cycle took that long
    /// (a wake-up costs little next to such a cycle, and the next one may be as slow).
    pub fn cycle_done(&mut self, began: Instant, now: Instant, spawn: impl FnOnce(Vec<T>)) {
        let waited = |t: Instant| now.saturating_duration_since(t) >= MAX_DELAY;
        if self.since.is_some_and(waited) || (!self.is_empty() && waited(began)) {
            self.flush(spawn);
        }
    }

    /// Hands every kept cycle to `spawn` as one group, oldest first (nothing when none is
    /// kept).
    pub fn flush(&mut self, spawn: impl FnOnce(Vec<T>)) {
        self.since = None;
        if !self.pending.is_empty() {
            spawn(std::mem::replace(
                &mut self.pending,
                Vec::with_capacity(MAX_GROUP),
            ));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each step hands over, step by step.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        Push(u32, Duration),
        /// A scheduling cycle that began and ended at these offsets.
        CycleDone(Duration, Duration),
        Flush,
    }

    #[rstest::rstest]
    #[case::kept_until_the_group_is_full(
        (0..MAX_GROUP as u32).map(|i| Step::Push(i, Duration::ZERO)).collect(),
        {
            let mut want = vec![Vec::new(); MAX_GROUP - 1];
            want.push((0..MAX_GROUP as u32).collect());
            want
        }
    )]
    #[case::handed_over_once_the_oldest_waited_long_enough(
        vec![
            Step::Push(1, Duration::ZERO),
            Step::Push(2, MAX_DELAY / 2),
            Step::CycleDone(MAX_DELAY / 2, MAX_DELAY - Duration::from_nanos(1)),
            Step::CycleDone(MAX_DELAY / 2, MAX_DELAY),
            Step::Push(3, MAX_DELAY * 2),
            Step::CycleDone(MAX_DELAY * 2, MAX_DELAY * 2 + MAX_DELAY / 2),
            Step::CycleDone(MAX_DELAY * 2 + MAX_DELAY / 2, MAX_DELAY * 3),
        ],
        vec![vec![], vec![], vec![], vec![1, 2], vec![], vec![], vec![3]]
    )]
    #[case::flush_hands_over_everything_in_order(
        vec![
            Step::Push(7, Duration::ZERO),
            Step::Push(5, Duration::ZERO),
            Step::Flush,
            Step::Flush,
            Step::CycleDone(Duration::ZERO, MAX_DELAY * 10),
        ],
        vec![vec![], vec![], vec![7, 5], vec![], vec![]]
    )]
    #[case::a_slow_cycle_hands_its_binding_cycle_over_at_once(
        vec![
            Step::Push(1, MAX_DELAY - Duration::from_nanos(1)),
            Step::CycleDone(Duration::ZERO, MAX_DELAY - Duration::from_nanos(1)),
            Step::Flush,
            Step::Push(2, MAX_DELAY * 3),
            Step::CycleDone(MAX_DELAY * 2, MAX_DELAY * 3),
        ],
        vec![vec![], vec![], vec![1], vec![], vec![2]]
    )]
    fn binding_cycles_are_handed_over_in_order(
        #[case] steps: Vec<Step>,
        #[case] want: Vec<Vec<u32>>,
    ) {
        let t0 = Instant::now();
        let mut h = Handoff::default();
        let mut got = Vec::new();
        for step in steps {
            let mut spawned = Vec::new();
            match step {
                Step::Push(t, at) => h.push(t, t0 + at, |g| spawned.push(g)),
                Step::CycleDone(began, at) => {
                    h.cycle_done(t0 + began, t0 + at, |g| spawned.push(g))
                }
                Step::Flush => h.flush(|g| spawned.push(g)),
            }
            got.push(spawned);
        }
        // Each step hands over at most one group, and never an empty one.
        let want: Vec<Vec<Vec<u32>>> = want
            .into_iter()
            .map(|g| if g.is_empty() { vec![] } else { vec![g] })
            .collect();
        assert_eq!(got, want);
        assert!(h.is_empty());
    }
}

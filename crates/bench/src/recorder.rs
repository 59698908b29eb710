//! A [`MetricsRecorder`] that keeps what the benchmark reports: how many pods were bound,
//! and how long each scheduling attempt took.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use framework::Code;
use scheduler::metrics::{AttemptResult, ExtensionPointLabel, MetricsRecorder, PendingPods};

/// Counts bound pods, notes when the last one was bound, and keeps attempt durations (in
/// microseconds). Called on the scheduling loop and binding tasks: two atomics per bound pod
/// and one short lock per attempt.
#[derive(Debug)]
pub struct BenchRecorder {
    epoch: Instant,
    scheduled: AtomicU64,
    /// When the last pod was bound, in nanoseconds since `epoch`.
    last_scheduled_ns: AtomicU64,
    attempts_us: Mutex<Vec<u64>>,
}

impl Default for BenchRecorder {
    fn default() -> Self {
        BenchRecorder {
            epoch: Instant::now(),
            scheduled: AtomicU64::new(0),
            last_scheduled_ns: AtomicU64::new(0),
            attempts_us: Mutex::new(Vec::new()),
        }
    }
}

impl BenchRecorder {
    /// When the last pod was bound (the recorder's creation when none was), so that a run's
    /// end does not depend on how often it is polled.
    pub fn last_scheduled_at(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.last_scheduled_ns.load(Ordering::Acquire))
    }

    /// Pods bound since the start.
    pub fn scheduled(&self) -> u64 {
        self.scheduled.load(Ordering::Acquire)
    }

    /// Forgets the attempts recorded so far (the initial pods').
    pub fn clear_attempts(&self) {
        self.attempts().clear();
    }

    /// Attempt durations recorded since the last [`BenchRecorder::clear_attempts`], in µs.
    pub fn attempt_durations_us(&self) -> Vec<u64> {
        self.attempts().clone()
    }

    fn attempts(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.attempts_us.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl MetricsRecorder for BenchRecorder {
    fn observe_attempt(&self, _profile: &str, _result: AttemptResult, duration: Duration) {
        let us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.attempts().push(us);
    }

    fn observe_pod_scheduled(&self, _attempts: u32, _since_first_attempt: Duration) {
        let ns = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_scheduled_ns.fetch_max(ns, Ordering::AcqRel);
        self.scheduled.fetch_add(1, Ordering::AcqRel);
    }

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
}

//! Time, injected: the runtime asks a [`Clock`] instead of calling `Instant::now()`, so that
//! backoff, assumed-pod expiry and permit timeouts are tested with a [`FakeClock`] moved by
//! hand, never with sleeps.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Clone)]
pub struct FakeClock {
    base: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl Default for FakeClock {
    fn default() -> Self {
        FakeClock::new()
    }
}

impl FakeClock {
    /// A clock standing at an arbitrary instant; clones share the same time.
    pub fn new() -> Self {
        FakeClock {
            base: Instant::now(),
            offset: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut o = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        *o += d;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.base + *self.offset.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_advanced_and_clones_share_it() {
        let c = FakeClock::new();
        let t0 = c.now();
        let other = c.clone();
        other.advance(Duration::from_secs(3));
        assert_eq!(
            (c.now() - t0, c.now() - t0),
            (Duration::from_secs(3), Duration::from_secs(3))
        );
    }
}

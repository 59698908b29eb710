//! The client's request rate limit: a token bucket refilled at `qps` tokens a second that
//! holds at most `burst`.
//!
//! Upstream: client-go's flowcontrol token-bucket limiter, set from
//! `clientConnection.qps`/`burst` (50/100 by default). As upstream, only requests the
//! scheduler makes are limited; watch streams are not.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket shared by every writer of one client. A `qps` of zero or less disables it.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens (at least one) refilled at `qps` per second.
    pub fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps: f64::from(qps),
            burst,
            state: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// No limit.
    pub fn unlimited() -> Self {
        RateLimiter::new(0.0, 1)
    }

    /// Waits until a request may be sent and takes its token.
    pub async fn acquire(&self) {
        if self.qps <= 0.0 {
            return;
        }
        let wait = {
            let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let refill = now.saturating_duration_since(b.last).as_secs_f64() * self.qps;
            b.tokens = (b.tokens + refill).min(self.burst);
            b.last = now;
            // Take the token now, even into debt: concurrent callers queue up behind each
            // other instead of all waking at the same instant.
            b.tokens -= 1.0;
            if b.tokens >= 0.0 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(-b.tokens / self.qps)
            }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

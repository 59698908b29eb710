//! Leader election on a coordination.k8s.io/v1 Lease: of the replicas started with
//! `--leader-elect`, one schedules; the others wait to take over.
//!
//! A replica takes the lease when nobody holds it or when its holder stopped renewing it:
//! the lease is expired when this replica has seen the same record for
//! `leaseDurationSeconds`, measured on its own monotonic clock from the moment it first saw
//! that record. The times written in the record are never compared with the local clock, so
//! a holder whose clock is behind or ahead keeps the lease for as long as it keeps renewing
//! (each renewal changes the record), and a replica that starts next to a lease abandoned
//! long ago waits one lease duration before taking it, as client-go's elector does.
//! Every write carries the resourceVersion read: a `409 Conflict` means
//! another replica wrote first, and the next round reads again. The leader renews every retry
//! period; when no renewal succeeded for the renew deadline, or another replica holds the
//! lease, leadership is lost and [`Leader`] says so at once.
//!
//! Upstream: client-go tools/leaderelection (LeaderElector, LeaseLock) with the defaults of
//! kube-scheduler's `--leader-elect-*` flags.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use thiserror::Error;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How and where to elect a leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// `--leader-elect-resource-namespace` (`kube-system`).
    pub namespace: String,
    /// `--leader-elect-resource-name` (`kube-scheduler`).
    pub name: String,
    /// This replica's `holderIdentity` (`<hostname>_<unique id>` by default).
    pub identity: String,
    /// `--leader-elect-lease-duration` (15 s): how long others wait after the last renewal.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline` (10 s): how long the leader keeps trying to renew.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period` (2 s): the pause between attempts.
    pub retry_period: Duration,
    /// Give the lease up on a clean stop, so that another replica takes over at once.
    pub release_on_cancel: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            namespace: "kube-system".to_string(),
            name: "kube-scheduler".to_string(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

/// A leader election that cannot work as configured.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LeaderElectionError {
    /// The durations are not ordered `lease duration > renew deadline > retry period > 0`.
    #[error(
        "leader election durations must satisfy lease duration ({lease:?}) > renew deadline \
         ({renew:?}) > retry period ({retry:?}) > 0"
    )]
    Durations {
        lease: Duration,
        renew: Duration,
        retry: Duration,
    },
    /// The identity is empty.
    #[error("leader election identity must not be empty")]
    EmptyIdentity,
}

impl LeaderElectionConfig {
    /// Checks the durations and identity as upstream's elector does before it starts.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let ordered = self.lease_duration > self.renew_deadline
            && self.renew_deadline > self.retry_period
            && !self.retry_period.is_zero();
        if !ordered {
            return Err(LeaderElectionError::Durations {
                lease: self.lease_duration,
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        if self.identity.is_empty() {
            return Err(LeaderElectionError::EmptyIdentity);
        }
        Ok(())
    }
}

/// This machine's host name (`localhost` when it cannot be read).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".to_string())
}

/// `<hostname>_<random id in UUID form>`: unique per process, as upstream's identity.
pub fn default_identity() -> String {
    // RandomState is seeded from the OS once per process; mixing in time and pid makes two
    // identities of one process differ too.
    let word = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u32(std::process::id());
        h.write_u128(Timestamp::now().as_nanosecond().unsigned_abs());
        h.finish()
    };
    let (a, b) = (word(1), word(2));
    format!(
        "{}_{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hostname(),
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// What one attempt to take or renew the lease found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the lease now.
    Held,
    /// Another replica holds it and it has not expired.
    HeldBy(String),
    /// Another replica wrote between our read and our write.
    Conflict,
}

/// Takes part in the election for one Lease.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The lease record seen last and when it was first seen.
    observed: ObservedRecord,
}

/// The lease record a replica saw last and the local time it first saw it: what expiry is
/// judged by (upstream: `observedRecord` and `observedTime` of client-go's LeaderElector).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ObservedRecord {
    seen: Option<(LeaseSpec, Instant)>,
}

impl ObservedRecord {
    /// Remembers `spec`, seen at `now`; the time moves only when the record changed.
    pub(crate) fn observe(&mut self, spec: LeaseSpec, now: Instant) {
        match &self.seen {
            Some((seen, _)) if *seen == spec => {}
            _ => self.seen = Some((spec, now)),
        }
    }

    /// Whether the holder of the observed record has stopped renewing it at `now`: the
    /// record has not changed for its `leaseDurationSeconds` (`default` when unset) of local
    /// time. Nothing observed yet: not expired.
    pub(crate) fn expired(&self, now: Instant, default: Duration) -> bool {
        let Some((spec, since)) = &self.seen else {
            return false;
        };
        let duration = spec.lease_duration_seconds.map_or(default, |s| {
            Duration::from_secs(u64::try_from(s).unwrap_or(0))
        });
        now.saturating_duration_since(*since) >= duration
    }
}

impl LeaderElector {
    /// An elector for `config.namespace/config.name`.
    pub fn new(
        client: kube::Client,
        config: LeaderElectionConfig,
    ) -> Result<Self, LeaderElectionError> {
        config.validate()?;
        Ok(LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: ObservedRecord::default(),
        })
    }

    /// Waits until this replica holds the lease (trying every retry period), then renews it
    /// on a spawned task. The returned [`Leader`] says the instant leadership is lost. Cancel
    /// the wait by dropping the future.
    ///
    /// ```no_run
    /// # async fn schedule() {}
    /// # async fn f(client: kube::Client) -> Result<(), scheduler::client::leader::LeaderElectionError> {
    /// use scheduler::client::leader::{LeaderElectionConfig, LeaderElector};
    /// let leader = LeaderElector::new(client, LeaderElectionConfig::default())?.run().await;
    /// tokio::select! {
    ///     () = leader.lost() => { /* stop scheduling at once, exit non-zero */ }
    ///     () = schedule() => leader.stop().await, // clean shutdown releases the lease
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run(mut self) -> Leader {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held) => break,
                Ok(Attempt::HeldBy(holder)) => {
                    tracing::debug!(%holder, lease = %self.lease_name(), "lease held by another replica");
                }
                Ok(Attempt::Conflict) => {
                    tracing::debug!(lease = %self.lease_name(), "lease written concurrently; reading again");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.lease_name(), error = %e, "acquiring the lease failed");
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
        tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "acquired the lease: leading");
        let leading = Arc::new(watch::Sender::new(true));
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(self.renew_loop(leading.clone(), stopped));
        Leader {
            leading,
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Renews every retry period until stopped or until leadership is lost.
    async fn renew_loop(
        mut self,
        leading: Arc<watch::Sender<bool>>,
        mut stopped: oneshot::Receiver<()>,
    ) {
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = &mut stopped => {
                    if self.config.release_on_cancel {
                        self.release().await;
                    }
                    leading.send_replace(false);
                    return;
                }
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            // A request that hangs must not outlive the renew deadline.
            let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Held)) => renewed = Instant::now(),
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    tracing::warn!(lease = %self.lease_name(), %holder, "lease taken by another replica: leadership lost");
                    leading.send_replace(false);
                    return;
                }
                Ok(Ok(Attempt::Conflict)) => {
                    tracing::debug!(lease = %self.lease_name(), "lease written concurrently; reading again");
                }
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.lease_name(), error = %e, "renewing the lease failed");
                }
                Err(_) => {
                    tracing::warn!(lease = %self.lease_name(), "renewing the lease timed out");
                }
            }
            if renewed.elapsed() >= self.config.renew_deadline {
                tracing::warn!(lease = %self.lease_name(), deadline = ?self.config.renew_deadline, "failed to renew the lease within the renew deadline: leadership lost");
                leading.send_replace(false);
                return;
            }
        }
    }

    /// One round: read the lease, and take or renew it if it is ours to take.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let now = Timestamp::now();
        let Some(current) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.record(now, None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec.unwrap_or_default());
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
                Err(e) => Err(e),
            };
        };
        let spec = current.spec.clone().unwrap_or_default();
        self.observe(spec.clone());
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let expired = self
            .observed
            .expired(Instant::now(), self.config.lease_duration);
        if !holder.is_empty() && holder != self.config.identity && !expired {
            return Ok(Attempt::HeldBy(holder));
        }
        let mut next = current;
        next.spec = Some(self.record(now, Some(&spec)));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                if holder != self.config.identity {
                    tracing::info!(lease = %self.lease_name(), previous = %holder, "took over the lease");
                }
                self.observe(written.spec.unwrap_or_default());
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// The record this replica writes at `now` over `previous` (`None`: a new lease).
    fn record(&self, now: Timestamp, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let lease_seconds =
            i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let held_by_us = previous
            .is_some_and(|p| p.holder_identity.as_deref() == Some(self.config.identity.as_str()));
        let (acquire_time, transitions) = match previous {
            None => (MicroTime(now), 0),
            Some(p) if held_by_us => (
                p.acquire_time.clone().unwrap_or(MicroTime(now)),
                p.lease_transitions.unwrap_or(0),
            ),
            Some(p) => (
                MicroTime(now),
                p.lease_transitions.unwrap_or(0).saturating_add(1),
            ),
        };
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(lease_seconds),
            acquire_time: Some(acquire_time),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn observe(&mut self, spec: LeaseSpec) {
        self.observed.observe(spec, Instant::now());
    }

    /// Gives the lease up if this replica still holds it: no holder, a one-second duration.
    async fn release(&mut self) {
        let current = match self.api.get_opt(&self.config.name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(lease = %self.lease_name(), error = %e, "releasing the lease: reading it failed");
                return;
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let now = MicroTime(Timestamp::now());
        let mut next = current;
        next.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.lease_name(), "released the lease"),
            Err(e) => {
                tracing::warn!(lease = %self.lease_name(), error = %e, "releasing the lease failed")
            }
        }
    }
}

/// Leadership held: the lease is renewed on a background task while this value lives.
#[derive(Debug)]
pub struct Leader {
    /// `true` while leading; shared with the renew task, which clears it on loss.
    leading: Arc<watch::Sender<bool>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Leader {
    /// Whether this replica still leads.
    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// A receiver that turns `false` the instant leadership is lost (for the scheduling loop
    /// to stop on).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Resolves when leadership is lost (the renew deadline passed, or another replica took
    /// the lease).
    pub async fn lost(&self) {
        // The sender lives in `self`: the channel cannot close while this waits.
        let _ = self.leading.subscribe().wait_for(|leading| !leading).await;
    }

    /// Stops renewing and, when configured, releases the lease (a clean shutdown).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Leader {
    /// Dropped without [`Leader::stop`]: stop renewing without releasing (the lease expires);
    /// subscribers see leadership end.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.leading.send_replace(false);
    }
}

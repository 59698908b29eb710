//! The decision log: each pod's last scheduling attempt, explained per node and per plugin
//! in `simulate`'s per-pod JSON ([`crate::simulate::output::pod_to_json`]), for the web
//! view, its JSON endpoints and the scenario runner.
//!
//! The scheduling loop records an attempt when the scheduler was built with a log
//! ([`crate::SchedulerBuilder::decisions`]); without one it runs its cycles unexplained,
//! which is cheaper (docs/performance.md). A pod's entry is replaced by its next attempt and
//! dropped when the pod is deleted.
//!
//! **Invariant:** memory is bounded. At most `max_pods` entries and `max_bytes` of JSON are
//! kept; past either, the entries recorded longest ago go first.
//!
//! Every change is also sent to subscribers ([`Decisions::subscribe`]) as a
//! [`DecisionEvent`]: the web page's live stream and the annotation writer read them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use framework::Snapshot;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::schedule_one::Explanation;
use crate::scheduler::Attempt;
use crate::simulate::{output, PodReport};

/// Pods whose last attempt is kept, by default.
pub const DEFAULT_MAX_PODS: usize = 1000;

/// Bytes of explanation JSON kept, by default: an attempt on a large cluster explains
/// hundreds of nodes (tens of kilobytes to a few megabytes), so the count alone does not
/// bound memory.
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// Events a subscriber may fall behind by before it misses some (it is then told how many
/// it missed and should read the list again). A page reads them as they come; the bound
/// keeps a stalled reader from holding memory.
const EVENT_BUFFER: usize = 1024;

/// What the last attempt did with a pod, without the per-node detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodOutcome {
    pub namespace: String,
    pub name: String,
    /// `Scheduled`, `Unschedulable`, `Error` or `Skipped` (simulate's results).
    pub result: &'static str,
    /// The node chosen (the binding cycle may still fail; the pod is then tried again).
    pub node: Option<String>,
    /// The FailedScheduling message, or why the pod errored or was skipped.
    pub message: Option<String>,
    /// The node preemption nominated the pod to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated_node: Option<String>,
    /// Increases with every attempt recorded: the newest attempt has the highest.
    pub attempt: u64,
}

/// A change of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DecisionEvent {
    /// A pod's attempt was recorded (replacing its previous one).
    Recorded(PodOutcome),
    /// A pod was deleted, or its entry was the oldest past a bound.
    Forgotten { namespace: String, name: String },
}

/// The decision log. Cloning shares it.
#[derive(Clone)]
pub struct Decisions {
    inner: Arc<Inner>,
}

struct Inner {
    log: Mutex<Log>,
    events: broadcast::Sender<DecisionEvent>,
    max_pods: usize,
    max_bytes: usize,
}

#[derive(Default)]
struct Log {
    /// By `namespace/name`.
    entries: HashMap<String, Entry>,
    /// `attempt` → key: the order entries are evicted in.
    order: BTreeMap<u64, String>,
    bytes: usize,
    next_attempt: u64,
}

struct Entry {
    outcome: PodOutcome,
    json: Arc<str>,
}

impl std::fmt::Debug for Decisions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decisions")
            .field("pods", &self.len())
            .field("max_pods", &self.inner.max_pods)
            .field("max_bytes", &self.inner.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Default for Decisions {
    fn default() -> Self {
        Decisions::new(DEFAULT_MAX_PODS, DEFAULT_MAX_BYTES)
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Decisions {
    /// A log keeping at most `max_pods` pods (at least one) and `max_bytes` of JSON.
    pub fn new(max_pods: usize, max_bytes: usize) -> Decisions {
        Decisions {
            inner: Arc::new(Inner {
                log: Mutex::new(Log::default()),
                events: broadcast::Sender::new(EVENT_BUFFER),
                max_pods: max_pods.max(1),
                max_bytes,
            }),
        }
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        // The log is left consistent between statements: a panic elsewhere while holding
        // the lock leaves nothing half-done worth refusing to read.
        self.inner.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pod's last attempt, in `simulate -o json`'s per-pod shape.
    pub fn get(&self, namespace: &str, name: &str) -> Option<serde_json::Value> {
        let json = self.get_json(namespace, name)?;
        serde_json::from_str(&json).ok()
    }

    /// [`Decisions::get`] as the JSON text it is kept as.
    pub fn get_json(&self, namespace: &str, name: &str) -> Option<Arc<str>> {
        self.log()
            .entries
            .get(&key(namespace, name))
            .map(|e| e.json.clone())
    }

    /// Every pod's last outcome, oldest attempt first.
    pub fn list(&self) -> Vec<PodOutcome> {
        let log = self.log();
        log.order
            .values()
            .filter_map(|k| log.entries.get(k))
            .map(|e| e.outcome.clone())
            .collect()
    }

    /// Pods in the log.
    pub fn len(&self) -> usize {
        self.log().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<DecisionEvent> {
        self.inner.events.subscribe()
    }

    /// Records a scheduling loop's attempt; `snapshot` is the one its cycle read (for
    /// explaining claims per node).
    pub fn record_attempt(&self, attempt: Attempt, explanation: Explanation, snapshot: &Snapshot) {
        // Its delete event may already have been handled: recorded now, the entry would
        // stay until evicted.
        if attempt.pod.pod.metadata.deletion_timestamp.is_some() {
            return;
        }
        let mut report = PodReport::from_attempt(attempt, explanation);
        report.explain_claims(|name| snapshot.get(name).map(|n| n.node()));
        self.record(&report);
    }

    /// Records `report` as its pod's last attempt.
    pub fn record(&self, report: &PodReport) {
        let json: Arc<str> = output::pod_to_json(report).into();
        let k = key(&report.namespace, &report.name);
        let mut events = Vec::with_capacity(1);
        {
            let mut log = self.log();
            let attempt = log.next_attempt;
            log.next_attempt += 1;
            let outcome = PodOutcome {
                namespace: report.namespace.clone(),
                name: report.name.clone(),
                result: report.result.as_str(),
                node: report.node.clone(),
                message: report.message.clone(),
                nominated_node: report.nominated_node.clone(),
                attempt,
            };
            log.remove(&k);
            log.bytes += json.len();
            log.order.insert(attempt, k.clone());
            log.entries.insert(
                k,
                Entry {
                    outcome: outcome.clone(),
                    json,
                },
            );
            events.push(DecisionEvent::Recorded(outcome));
            // The newest entry stays even when it alone is past the byte bound: a page asking
            // about the pod just scheduled finds it.
            while log.entries.len() > self.inner.max_pods
                || (log.bytes > self.inner.max_bytes && log.entries.len() > 1)
            {
                let Some((_, oldest)) = log.order.pop_first() else {
                    break;
                };
                if let Some(e) = log.entries.remove(&oldest) {
                    log.bytes -= e.json.len();
                    events.push(DecisionEvent::Forgotten {
                        namespace: e.outcome.namespace,
                        name: e.outcome.name,
                    });
                }
            }
        }
        for e in events {
            // No subscriber is not an error: nobody is watching.
            let _ = self.inner.events.send(e);
        }
    }

    /// Drops a deleted pod's entry.
    pub fn forget(&self, namespace: &str, name: &str) {
        let removed = self.log().remove(&key(namespace, name));
        if removed {
            let _ = self.inner.events.send(DecisionEvent::Forgotten {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
    }
}

impl Log {
    /// Removes `key`'s entry; `true` when there was one.
    fn remove(&mut self, key: &str) -> bool {
        let Some(e) = self.entries.remove(key) else {
            return false;
        };
        self.order.remove(&e.outcome.attempt);
        self.bytes -= e.json.len();
        true
    }
}

#[cfg(test)]
mod tests;

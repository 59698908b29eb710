//! Pods that a Permit plugin told to wait: the binding cycle holds them until every waiting
//! plugin allows them, one rejects them, or a plugin's timeout passes.
//!
//! Upstream: pkg/scheduler/framework/runtime/waiting_pods_map.go (waitingPodsMap,
//! waitingPod) and the Handle methods GetWaitingPod / IterateOverWaitingPods /
//! RejectWaitingPod. Plugins reach the map through [`crate::Handle::waiting_pods`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, watch};

use crate::status::{Code, Status};
use crate::types::{PodInfo, PodKey};

/// A pod held at Permit.
#[derive(Debug)]
pub struct WaitingPod {
    pod: Arc<PodInfo>,
    node: String,
    inner: Mutex<Pending>,
}

#[derive(Debug)]
struct Pending {
    /// Plugins that have not allowed the pod yet, with how long each lets it wait.
    plugins: BTreeMap<&'static str, Duration>,
    /// Taken by the first verdict; later verdicts are ignored.
    verdict: Option<oneshot::Sender<Status>>,
}

impl WaitingPod {
    /// A pod waiting on `plugins` (name and timeout each); the returned receiver gets the
    /// verdict: success once all allowed, or the first rejection.
    pub fn new(
        pod: Arc<PodInfo>,
        node: impl Into<String>,
        plugins: impl IntoIterator<Item = (&'static str, Duration)>,
    ) -> (Arc<WaitingPod>, oneshot::Receiver<Status>) {
        let (tx, rx) = oneshot::channel();
        let wp = WaitingPod {
            pod,
            node: node.into(),
            inner: Mutex::new(Pending {
                plugins: plugins.into_iter().collect(),
                verdict: Some(tx),
            }),
        };
        (Arc::new(wp), rx)
    }

    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }

    /// The node the pod was assumed on.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A poisoned lock only means a plugin panicked mid-call; the data is still a map.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Plugins still to allow the pod, by name.
    pub fn pending_plugins(&self) -> Vec<&'static str> {
        self.lock().plugins.keys().copied().collect()
    }

    /// The plugin with the shortest timeout, and that timeout: when it passes, that plugin
    /// rejects the pod. `None` once no plugin is pending.
    pub fn first_timeout(&self) -> Option<(&'static str, Duration)> {
        self.lock()
            .plugins
            .iter()
            .min_by_key(|(name, t)| (**t, **name))
            .map(|(n, t)| (*n, *t))
    }

    /// `plugin` allows the pod; when it was the last one pending, the pod goes on to bind.
    pub fn allow(&self, plugin: &str) {
        let mut p = self.lock();
        p.plugins.remove(plugin);
        if p.plugins.is_empty() {
            if let Some(tx) = p.verdict.take() {
                let _ = tx.send(Status::success());
            }
        }
    }

    /// `plugin` rejects the pod with `message`: the binding cycle fails with
    /// `Unschedulable` from that plugin.
    pub fn reject(&self, plugin: &str, message: &str) {
        let mut p = self.lock();
        if let Some(tx) = p.verdict.take() {
            let plugin = p
                .plugins
                .keys()
                .copied()
                .find(|n| *n == plugin)
                .unwrap_or("");
            let mut s = Status::new(Code::Unschedulable, message.to_string());
            if !plugin.is_empty() {
                s = s.with_plugin(plugin);
            }
            let _ = tx.send(s);
        }
    }

    /// `plugin`'s timeout passed: the pod is rejected in that plugin's name with `message`.
    pub fn reject_on_timeout(&self, plugin: &'static str, message: String) {
        let mut p = self.lock();
        if let Some(tx) = p.verdict.take() {
            let _ = tx.send(Status::new(Code::Unschedulable, message).with_plugin(plugin));
        }
    }
}

/// The pods waiting at Permit, by [`PodKey`]. Cloning shares the map.
#[derive(Debug, Clone, Default)]
pub struct WaitingPods {
    pods: Arc<Mutex<HashMap<PodKey, Arc<WaitingPod>>>>,
}

impl WaitingPods {
    fn lock(&self) -> MutexGuard<'_, HashMap<PodKey, Arc<WaitingPod>>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiting pod under its key.
    pub fn add(&self, id: PodKey, pod: Arc<WaitingPod>) {
        self.lock().insert(id, pod);
    }

    /// Forgets the pod (its wait is over).
    pub fn remove(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.lock().remove(uid)
    }

    /// The waiting pod with `uid`.
    pub fn get(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.lock().get(uid).cloned()
    }

    /// Every waiting pod (a copy of the list: callbacks may allow or reject freely).
    pub fn list(&self) -> Vec<Arc<WaitingPod>> {
        self.lock().values().cloned().collect()
    }

    /// Rejects the waiting pod with `uid`; `false` when no such pod waits. Upstream:
    /// RejectWaitingPod (used when a waiting pod is deleted or preempted).
    pub fn reject(&self, uid: &str, plugin: &str, message: &str) -> bool {
        match self.get(uid) {
            Some(wp) => {
                wp.reject(plugin, message);
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// Pods whose binding cycle waits on something outside the scheduler (VolumeBinding's PreBind
/// waits for the PV controller). Deleting such a pod ends the wait at once instead of at its
/// timeout, as upstream's PreBind does when its pod lister no longer has the pod. Cloning
/// shares the map.
#[derive(Debug, Clone, Default)]
pub struct BindingPods {
    pods: Arc<Mutex<HashMap<PodKey, Registration>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

/// A registration's number (a pod's binding may start again) and its deletion signal.
type Registration = (u64, watch::Sender<bool>);

/// One registration in [`BindingPods`]; dropping it forgets the pod.
#[derive(Debug)]
pub struct BindingPod {
    pods: BindingPods,
    key: PodKey,
    id: u64,
    deleted: watch::Receiver<bool>,
}

impl BindingPods {
    fn lock(&self) -> MutexGuard<'_, HashMap<PodKey, Registration>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `key` for the length of a wait.
    pub fn register(&self, key: PodKey) -> BindingPod {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = watch::channel(false);
        self.lock().insert(key.clone(), (id, tx));
        BindingPod {
            pods: self.clone(),
            key,
            id,
            deleted: rx,
        }
    }

    /// The pod `key` was deleted: its wait, if any, ends.
    pub fn deleted(&self, key: &str) {
        if let Some((_, tx)) = self.lock().get(key) {
            tx.send_replace(true);
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

impl BindingPod {
    /// Resolves once the pod is deleted (never, while it exists).
    pub async fn deleted(&mut self) {
        // An error means the map dropped the sender; only this registration's drop does
        // that, so waiting forever is right.
        if self.deleted.wait_for(|d| *d).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for BindingPod {
    fn drop(&mut self) {
        let mut pods = self.pods.lock();
        if pods.get(&self.key).is_some_and(|(id, _)| *id == self.id) {
            pods.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::make_pod;

    fn waiting(plugins: &[(&'static str, u64)]) -> (Arc<WaitingPod>, oneshot::Receiver<Status>) {
        WaitingPod::new(
            make_pod("p").info(),
            "n1",
            plugins.iter().map(|(n, s)| (*n, Duration::from_secs(*s))),
        )
    }

    #[test]
    fn verdict_is_success_only_after_every_plugin_allows() {
        let (wp, mut rx) = waiting(&[("A", 10), ("B", 5)]);
        wp.allow("A");
        assert_eq!(wp.pending_plugins(), vec!["B"]);
        assert!(rx.try_recv().is_err(), "one plugin still pending");
        wp.allow("B");
        assert_eq!(rx.try_recv(), Ok(Status::success()));
    }

    #[test]
    fn first_rejection_wins_and_names_the_plugin() {
        let (wp, mut rx) = waiting(&[("A", 10), ("B", 5)]);
        wp.reject("B", "quota exhausted");
        wp.reject("A", "ignored");
        wp.allow("A");
        assert_eq!(
            rx.try_recv(),
            Ok(Status::new(Code::Unschedulable, "quota exhausted").with_plugin("B"))
        );
    }

    #[test]
    fn timeout_names_the_plugin_with_the_shortest_wait() {
        let (wp, mut rx) = waiting(&[("A", 10), ("B", 5)]);
        assert_eq!(wp.first_timeout(), Some(("B", Duration::from_secs(5))));
        wp.reject_on_timeout("B", "timed out".into());
        wp.allow("A");
        assert_eq!(
            rx.try_recv(),
            Ok(Status::new(Code::Unschedulable, "timed out").with_plugin("B"))
        );
    }

    #[test]
    fn map_rejects_by_uid() {
        let map = WaitingPods::default();
        let (wp, mut rx) = waiting(&[("A", 10)]);
        map.add(PodKey::from("uid-1"), wp);
        assert!(!map.reject("uid-2", "", "gone"));
        assert!(map.reject("uid-1", "", "pod deleted"));
        assert_eq!(
            rx.try_recv(),
            Ok(Status::new(Code::Unschedulable, "pod deleted"))
        );
        assert_eq!(
            map.len(),
            1,
            "rejecting does not remove: the binding cycle does"
        );
    }

    #[tokio::test]
    async fn deleting_a_binding_pod_ends_its_wait_and_only_its() {
        let pods = BindingPods::default();
        let mut db = pods.register(PodKey::from("uid-db"));
        let mut web = pods.register(PodKey::from("uid-web"));
        pods.deleted("uid-db");
        pods.deleted("uid-other");
        let db_ended = tokio::time::timeout(Duration::from_secs(5), db.deleted())
            .await
            .is_ok();
        let web_ended = tokio::time::timeout(Duration::from_millis(50), web.deleted())
            .await
            .is_ok();
        assert_eq!((db_ended, web_ended, pods.len()), (true, false, 2));
    }

    #[test]
    fn a_finished_wait_forgets_its_pod_but_not_a_newer_registration() {
        let pods = BindingPods::default();
        let first = pods.register(PodKey::from("uid-db"));
        let second = pods.register(PodKey::from("uid-db"));
        drop(first);
        let after_first = pods.len();
        drop(second);
        assert_eq!((after_first, pods.len()), (1, 0));
    }
}

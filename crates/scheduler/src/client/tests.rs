//! Tests of the client layer: pure parts (diff, informer state, patch and event bodies, rate
//! limit) without a socket; the rest against the local API server started in process on
//! 127.0.0.1:0 with a real kube-rs client.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use framework::testing::{make_node, make_pod};
use framework::{
    Binding, ClientError, ClusterClient, EventType, Nomination, PodEvent, PodRef, PodStatusUpdate,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, EventSource, Node, ObjectReference, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::Resource;
use rstest::rstest;
use serde_json::json;

use super::informers::{diff, Informer};
use super::leader::{LeaderElectionConfig, LeaderElector};
use super::writer::{
    core_event, status_patch, truncate_message, Job, PendingStatus, Queue, MAX_EVENT_MESSAGE_BYTES,
    SERIES_FINISH,
};
use super::*;
use crate::source::{Change, EventHandler, ObjectEvent};

// ---------------------------------------------------------------------------------------
// Helpers

/// The local API server and a kube-rs client for it.
async fn cluster() -> (apiserver::Server, kube::Client) {
    cluster_without(&[]).await
}

/// [`cluster`] with the API groups `disabled` not served.
async fn cluster_without(disabled: &[&str]) -> (apiserver::Server, kube::Client) {
    let config = apiserver::Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        disabled_api_groups: disabled.iter().map(|g| (*g).to_string()).collect(),
        ..apiserver::Config::default()
    };
    let server = apiserver::Server::start(config)
        .await
        .expect("API server starts");
    let url = server.url().parse().expect("server URL");
    let client = kube::Client::try_from(kube::Config::new(url)).expect("kube client");
    (server, client)
}

/// Polls `check` every 20 ms until it returns `Some`, for at most `within`.
async fn poll<T, F, Fut>(within: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pod object as the tests describe it: `name@step` (the `step` label, `-` if none).
fn describe<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let step = meta
        .labels
        .as_ref()
        .and_then(|l| l.get("step"))
        .map_or("-", String::as_str);
    format!("{}@{step}", informers::key_of(obj))
}

/// A change as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    Added(String),
    Updated(String, String),
    Deleted(String),
    Synced,
}

fn seen<K: Resource>(change: &Change<K>) -> Seen {
    match change {
        Change::Added(o) => Seen::Added(describe(&**o)),
        Change::Updated { old, new } => Seen::Updated(describe(&**old), describe(&**new)),
        Change::Deleted(o) => Seen::Deleted(describe(&**o)),
    }
}

/// A storage change, its keys prefixed by `kind` so they sort apart from pods and nodes.
fn kind_seen(kind: &str, s: Seen) -> Seen {
    match s {
        Seen::Added(k) => Seen::Added(format!("{kind} {k}")),
        Seen::Updated(o, n) => Seen::Updated(format!("{kind} {o}"), format!("{kind} {n}")),
        Seen::Deleted(k) => Seen::Deleted(format!("{kind} {k}")),
        Seen::Synced => Seen::Synced,
    }
}

/// Records pod, node and storage changes (the kinds the test creates) and `synced`, in order.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    fn snapshot(&self) -> Vec<Seen> {
        self.seen.lock().expect("recorder lock").clone()
    }
}

impl EventHandler for Recorder {
    fn handle(&self, event: ObjectEvent) {
        let s = match &event {
            ObjectEvent::Pod(c) => seen(c),
            ObjectEvent::Node(c) => seen(c),
            ObjectEvent::PersistentVolume(c) => kind_seen("pv", seen(c)),
            ObjectEvent::PersistentVolumeClaim(c) => kind_seen("pvc", seen(c)),
            ObjectEvent::StorageClass(c) => kind_seen("sc", seen(c)),
            ObjectEvent::CSINode(c) => kind_seen("csinode", seen(c)),
            ObjectEvent::CSIDriver(c) => kind_seen("csidriver", seen(c)),
            ObjectEvent::CSIStorageCapacity(c) => kind_seen("capacity", seen(c)),
            ObjectEvent::VolumeAttachment(c) => kind_seen("va", seen(c)),
            ObjectEvent::ResourceClaim(c) => kind_seen("resourceclaim", seen(c)),
            ObjectEvent::ResourceSlice(c) => kind_seen("resourceslice", seen(c)),
            ObjectEvent::DeviceClass(c) => kind_seen("deviceclass", seen(c)),
            _ => return,
        };
        self.seen.lock().expect("recorder lock").push(s);
    }

    fn synced(&self) {
        self.seen.lock().expect("recorder lock").push(Seen::Synced);
    }
}

fn with_rv<K: Resource>(mut obj: K, rv: &str) -> K {
    obj.meta_mut().resource_version = Some(rv.to_string());
    obj
}

fn pod_rv(name: &str, step: &str, rv: &str) -> Arc<Pod> {
    Arc::new(with_rv(make_pod(name).label("step", step).obj(), rv))
}

// ---------------------------------------------------------------------------------------
// Informers: pure

fn store(pods: &[Arc<Pod>]) -> HashMap<String, Arc<Pod>> {
    pods.iter()
        .map(|p| (informers::key_of(&**p), p.clone()))
        .collect()
}

#[rstest]
#[case::empty_store_lists_everything_as_added(
    vec![],
    vec![pod_rv("a", "1", "1"), pod_rv("b", "1", "2")],
    vec![Seen::Added("default/a@1".into()), Seen::Added("default/b@1".into())])]
#[case::unchanged_resource_version_yields_nothing(
    vec![pod_rv("a", "1", "1")],
    vec![pod_rv("a", "1", "1")],
    vec![])]
#[case::changed_resource_version_is_an_update_with_the_delivered_old(
    vec![pod_rv("a", "1", "1")],
    vec![pod_rv("a", "2", "5")],
    vec![Seen::Updated("default/a@1".into(), "default/a@2".into())])]
#[case::objects_gone_while_disconnected_are_deleted_first(
    vec![pod_rv("a", "1", "1"), pod_rv("z", "1", "2")],
    vec![pod_rv("b", "1", "7"), pod_rv("z", "2", "8")],
    vec![
        Seen::Deleted("default/a@1".into()),
        Seen::Added("default/b@1".into()),
        Seen::Updated("default/z@1".into(), "default/z@2".into()),
    ])]
#[case::empty_list_deletes_everything(
    vec![pod_rv("a", "1", "1"), pod_rv("b", "1", "2")],
    vec![],
    vec![Seen::Deleted("default/a@1".into()), Seen::Deleted("default/b@1".into())])]
fn relist_diff(
    #[case] before: Vec<Arc<Pod>>,
    #[case] listed: Vec<Arc<Pod>>,
    #[case] want: Vec<Seen>,
) {
    let got: Vec<Seen> = diff(&store(&before), &store(&listed))
        .iter()
        .map(seen)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn informer_keeps_the_delivered_version_and_reconciles_a_relist() {
    let mut inf = Informer::<Pod>::default();
    let mut run = |events: Vec<watcher::Event<Pod>>| -> Vec<Seen> {
        events
            .into_iter()
            .flat_map(|e| inf.apply(e))
            .map(|c| seen(&c))
            .collect()
    };
    let p =
        |name: &str, step: &str, rv: &str| with_rv(make_pod(name).label("step", step).obj(), rv);
    // Initial list: nothing is delivered before InitDone, then all as added.
    assert_eq!(
        run(vec![
            watcher::Event::Init,
            watcher::Event::InitApply(p("a", "1", "1")),
            watcher::Event::InitApply(p("b", "1", "2")),
        ]),
        vec![]
    );
    assert_eq!(
        run(vec![watcher::Event::InitDone]),
        vec![
            Seen::Added("default/a@1".into()),
            Seen::Added("default/b@1".into())
        ]
    );
    // Watch events: update carries the delivered version; a repeat of the same version and
    // a delete of an unknown object deliver nothing.
    assert_eq!(
        run(vec![
            watcher::Event::Apply(p("a", "2", "3")),
            watcher::Event::Apply(p("a", "2", "3")),
            watcher::Event::Apply(p("c", "1", "4")),
            watcher::Event::Delete(p("b", "1", "2")),
            watcher::Event::Delete(p("x", "1", "9")),
        ]),
        vec![
            Seen::Updated("default/a@1".into(), "default/a@2".into()),
            Seen::Added("default/c@1".into()),
            Seen::Deleted("default/b@1".into()),
        ]
    );
    // A relist after a 410: c vanished, a changed, d is new.
    assert_eq!(
        run(vec![
            watcher::Event::Init,
            watcher::Event::InitApply(p("a", "3", "10")),
            watcher::Event::InitApply(p("d", "1", "11")),
            watcher::Event::InitDone,
        ]),
        vec![
            Seen::Deleted("default/c@1".into()),
            Seen::Updated("default/a@2".into(), "default/a@3".into()),
            Seen::Added("default/d@1".into()),
        ]
    );
    // The store now holds the relisted versions: the next update's old is a@3.
    assert_eq!(
        run(vec![watcher::Event::Apply(p("a", "4", "12"))]),
        vec![Seen::Updated("default/a@3".into(), "default/a@4".into())]
    );
}

/// A pod with every part the scheduler reads set, and `managedFields` as a real API server
/// writes them.
fn full_pod(managed_fields: bool) -> Pod {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-1", "namespace": "team", "uid": "uid-1", "resourceVersion": "42",
            "generation": 3, "creationTimestamp": "2026-01-02T03:04:05Z",
            "deletionTimestamp": "2026-01-02T03:05:05Z", "deletionGracePeriodSeconds": 30,
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"kubesched.io/note": "x"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "rs-1", "controller": true}]
        },
        "spec": {
            "schedulerName": "default-scheduler", "priorityClassName": "high", "priority": 1000,
            "preemptionPolicy": "PreemptLowerPriority", "nodeName": "n1",
            "nodeSelector": {"disk": "ssd"},
            "schedulingGates": [{"name": "wait"}],
            "containers": [{"name": "c", "image": "registry.example/app:1",
                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                    "limits": {"cpu": "1"}}}],
            "initContainers": [{"name": "i", "image": "busybox", "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}}}],
            "overhead": {"cpu": "10m"},
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v",
                "effect": "NoSchedule"}],
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"}}}}]}
            },
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
        },
        "status": {
            "phase": "Pending", "nominatedNodeName": "n2",
            "conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/3 nodes are available",
                "lastTransitionTime": "2026-01-02T03:04:06Z"}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
        }
    });
    if managed_fields {
        v["metadata"]["managedFields"] = json!([{
            "manager": "kubectl-client-side-apply", "operation": "Update",
            "apiVersion": "v1", "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}}}}}
        }]);
    }
    serde_json::from_value(v).expect("pod")
}

#[rstest]
#[case::added(vec![watcher::Event::Apply(full_pod(true))])]
#[case::listed(vec![
    watcher::Event::Init,
    watcher::Event::InitApply(full_pod(true)),
    watcher::Event::InitDone,
])]
fn informer_delivers_the_pod_without_managed_fields_and_every_other_field_as_decoded(
    #[case] events: Vec<watcher::Event<Pod>>,
) {
    let mut inf = Informer::<Pod>::default();
    let delivered: Vec<Pod> = events
        .into_iter()
        .flat_map(|e| inf.apply(e))
        .map(|c| match c {
            Change::Added(p) | Change::Deleted(p) | Change::Updated { new: p, .. } => (*p).clone(),
        })
        .collect();
    assert_eq!(delivered, vec![full_pod(false)]);
}

// ---------------------------------------------------------------------------------------
// Writes: pure

#[rstest]
#[case::short_message_is_kept("abc", 5, "abc")]
#[case::ascii_is_cut_at_the_limit("abcdef", 4, "abcd")]
#[case::a_multibyte_char_is_not_split("aéé", 4, "aé")]
#[case::exact_fit_is_kept("aé", 3, "aé")]
fn truncate_message_cuts_on_a_char_boundary(
    #[case] message: &str,
    #[case] max: usize,
    #[case] want: &str,
) {
    assert_eq!(truncate_message(message, max), want);
}

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn status_update(condition: bool, nomination: Nomination) -> PodStatusUpdate {
    PodStatusUpdate {
        pod: PodRef {
            namespace: "default".into(),
            name: "web".into(),
            uid: None,
        },
        condition: condition.then(|| framework::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: "Unschedulable".into(),
            message: "0/3 nodes are available".into(),
        }),
        nomination,
    }
}

#[rstest]
#[case::condition_only(status_update(true, Nomination::Keep), Some(json!({"status": {
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"}]}})))]
#[case::condition_and_nomination(status_update(true, Nomination::Set("n1".into())), Some(json!({"status": {
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"}],
    "nominatedNodeName": "n1"}})))]
#[case::clearing_the_nomination_sends_null(status_update(false, Nomination::Clear),
    Some(json!({"status": {"nominatedNodeName": null}})))]
#[case::nothing_to_write(status_update(false, Nomination::Keep), None)]
fn status_patch_body(#[case] update: PodStatusUpdate, #[case] want: Option<serde_json::Value>) {
    assert_eq!(
        status_patch(&PendingStatus::new(&update), ts("2026-01-02T03:04:05Z")),
        want
    );
}

fn pod_event(message: &str) -> PodEvent {
    PodEvent {
        regarding: PodRef {
            namespace: "team".into(),
            name: "web-1".into(),
            uid: Some("uid-1".into()),
        },
        resource_version: Some("7".into()),
        event_type: EventType::Warning,
        reason: "FailedScheduling".into(),
        action: "Scheduling".into(),
        message: message.into(),
        reporting_controller: "default-scheduler".into(),
    }
}

/// One step of an event series case, at a time in seconds from the case's start.
#[derive(Debug, Clone, Copy)]
enum SeriesStep {
    /// The pod `web-1` gets an event of this type and reason.
    Record(EventType, &'static str, u64),
    /// The heartbeat ([`super::writer::SERIES_REFRESH`]) fires.
    Heartbeat,
    /// The finish timer fires.
    Finish(u64),
}

/// A write sent for an Event object (numbered in the order first written): its series as
/// `(count, lastObservedTime in seconds from the case's start)`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SeriesWrite {
    Post {
        object: usize,
        reason: String,
        series: Option<(i32, u64)>,
    },
    Patch {
        object: usize,
        series: (i32, u64),
    },
}

use EventType::{Normal, Warning};
use SeriesStep::{Finish, Heartbeat, Record};

fn post(object: usize, reason: &str) -> SeriesWrite {
    SeriesWrite::Post {
        object,
        reason: reason.into(),
        series: None,
    }
}

fn patch(object: usize, count: i32, last: u64) -> SeriesWrite {
    SeriesWrite::Patch {
        object,
        series: (count, last),
    }
}

/// Numbers Event objects by the order their names are first seen, so that cases name
/// them 0, 1, ... instead of by their generated names.
#[derive(Default)]
struct ObjectNumbers(Vec<String>);

impl ObjectNumbers {
    fn of(&mut self, name: &str) -> usize {
        match self.0.iter().position(|o| o == name) {
            Some(i) => i,
            None => {
                self.0.push(name.to_string());
                self.0.len() - 1
            }
        }
    }
}

#[rstest]
#[case::first_event_is_posted(vec![Record(Warning, "FailedScheduling", 0)],
    vec![post(0, "FailedScheduling")])]
#[case::isomorphic_event_within_the_window_patches_series_count_2(
    vec![Record(Warning, "FailedScheduling", 0), Record(Warning, "FailedScheduling", 10)],
    vec![post(0, "FailedScheduling"), patch(0, 2, 10)])]
#[case::third_and_later_occurrences_are_only_counted(
    vec![Record(Warning, "FailedScheduling", 0), Record(Warning, "FailedScheduling", 10),
         Record(Warning, "FailedScheduling", 20), Record(Warning, "FailedScheduling", 30)],
    vec![post(0, "FailedScheduling"), patch(0, 2, 10)])]
#[case::different_reason_posts_a_new_event(
    vec![Record(Warning, "FailedScheduling", 0), Record(Normal, "Scheduled", 10)],
    vec![post(0, "FailedScheduling"), post(1, "Scheduled")])]
#[case::different_type_posts_a_new_event(
    vec![Record(Warning, "FailedScheduling", 0), Record(Normal, "FailedScheduling", 10)],
    vec![post(0, "FailedScheduling"), post(1, "FailedScheduling")])]
#[case::heartbeat_patches_the_current_count_of_each_series(
    vec![Record(Warning, "FailedScheduling", 0), Record(Warning, "FailedScheduling", 10),
         Record(Warning, "FailedScheduling", 20), Record(Warning, "FailedScheduling", 30),
         Heartbeat],
    vec![post(0, "FailedScheduling"), patch(0, 2, 10), patch(0, 4, 30)])]
#[case::heartbeat_leaves_singletons_alone(
    vec![Record(Warning, "FailedScheduling", 0), Heartbeat],
    vec![post(0, "FailedScheduling")])]
#[case::finished_series_gets_its_final_count_and_the_next_occurrence_posts_anew(
    vec![Record(Warning, "FailedScheduling", 0), Record(Warning, "FailedScheduling", 10),
         Record(Warning, "FailedScheduling", 20), Finish(20 + SERIES_FINISH.as_secs()),
         Record(Warning, "FailedScheduling", 400)],
    vec![post(0, "FailedScheduling"), patch(0, 2, 10), patch(0, 3, 20),
         post(1, "FailedScheduling")])]
#[case::series_observed_within_the_window_is_not_finished(
    vec![Record(Warning, "FailedScheduling", 0), Record(Warning, "FailedScheduling", 10),
         Finish(300), Record(Warning, "FailedScheduling", 310)],
    vec![post(0, "FailedScheduling"), patch(0, 2, 10)])]
#[case::finished_singleton_is_forgotten_and_the_next_occurrence_posts_anew(
    vec![Record(Warning, "FailedScheduling", 0), Finish(SERIES_FINISH.as_secs()),
         Record(Warning, "FailedScheduling", 400)],
    vec![post(0, "FailedScheduling"), post(1, "FailedScheduling")])]
fn event_series_writes_follow_upstreams_broadcaster(
    #[case] steps: Vec<SeriesStep>,
    #[case] want: Vec<SeriesWrite>,
) {
    let queue = Queue::new(100, None);
    let start = ts("2026-01-02T03:00:00Z");
    let base = tokio::time::Instant::now();
    let secs = |t: &MicroTime| {
        u64::try_from(t.0.duration_since(start).as_secs()).expect("after the start")
    };
    let mut objects = ObjectNumbers::default();
    let series_of = |patch: &serde_json::Value| {
        let s: k8s_openapi::api::core::v1::EventSeries =
            serde_json::from_value(patch["series"].clone()).expect("series patch");
        (
            s.count.expect("count"),
            secs(&s.last_observed_time.expect("lastObservedTime")),
        )
    };
    let mut got = Vec::new();
    for step in steps {
        match step {
            Record(event_type, reason, t) => {
                let now = start + Duration::from_secs(t);
                let event = PodEvent {
                    event_type,
                    reason: reason.into(),
                    ..pod_event("m")
                };
                queue.push_event(&event, now, base + Duration::from_secs(t));
            }
            Heartbeat => queue.refresh_series(),
            Finish(t) => queue.finish_series(base + Duration::from_secs(t)),
        }
        while let Some(job) = queue.take("replica-1") {
            match job {
                Job::CreateEvent(key, body) => {
                    got.push(SeriesWrite::Post {
                        object: objects.of(body.metadata.name.as_deref().unwrap_or("")),
                        reason: body.reason.clone().unwrap_or_default(),
                        series: body.series.as_ref().map(|s| {
                            (
                                s.count.unwrap_or(0),
                                secs(s.last_observed_time.as_ref().expect("time")),
                            )
                        }),
                    });
                    queue.event_done(key, true);
                }
                Job::PatchEvent {
                    key,
                    object: name,
                    patch,
                    ..
                } => {
                    got.push(SeriesWrite::Patch {
                        object: objects.of(&name),
                        series: series_of(&patch),
                    });
                    queue.event_done(key, true);
                }
                Job::FinalPatch {
                    object: name,
                    patch,
                    ..
                } => got.push(SeriesWrite::Patch {
                    object: objects.of(&name),
                    series: series_of(&patch),
                }),
                Job::Status(key, _) => queue.status_done(key),
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn waiting_status_writes_are_taken_before_waiting_event_writes() {
    let queue = Queue::new(100, None);
    let now = ts("2026-01-02T03:00:00Z");
    let seen = tokio::time::Instant::now();
    queue.push_event(&pod_event("a"), now, seen);
    queue.push_event(
        &PodEvent {
            reason: "Scheduled".into(),
            ..pod_event("b")
        },
        now,
        seen,
    );
    queue.push_status(&status_update(true, Nomination::Keep));
    let kinds: Vec<&str> = std::iter::from_fn(|| queue.take("replica-1"))
        .map(|job| match job {
            Job::Status(..) => "status",
            Job::CreateEvent(..) => "post",
            Job::PatchEvent { .. } | Job::FinalPatch { .. } => "patch",
        })
        .collect();
    assert_eq!(kinds, vec!["status", "post", "post"]);
}

/// What one write of an event series does: a POST (object, note, the pod version it names)
/// or a PATCH of an object.
#[derive(Debug, PartialEq)]
enum VersionedWrite {
    Post(usize, &'static str, &'static str),
    Patch(usize),
    /// A status write or a series' final count: none is expected here.
    Other,
}

/// As upstream's broadcaster, which keys a series by the whole `regarding` reference: an
/// event about another version of the pod (a status write came between the attempts) is a
/// new Event object with its own message, and the same version's next event joins that
/// version's series.
#[rstest]
#[case::same_version_joins_the_series(
    vec![("7", "first"), ("7", "second")],
    vec![VersionedWrite::Post(0, "first", "7"), VersionedWrite::Patch(0)])]
#[case::new_version_is_a_new_object_with_its_message(
    vec![("7", "first"), ("8", "second")],
    vec![VersionedWrite::Post(0, "first", "7"), VersionedWrite::Post(1, "second", "8")])]
#[case::later_events_of_the_new_version_join_its_series(
    vec![("7", "first"), ("8", "second"), ("8", "third")],
    vec![VersionedWrite::Post(0, "first", "7"), VersionedWrite::Post(1, "second", "8"),
         VersionedWrite::Patch(1)])]
fn events_about_another_version_of_the_pod_are_new_objects(
    #[case] records: Vec<(&'static str, &'static str)>,
    #[case] want: Vec<VersionedWrite>,
) {
    let queue = Queue::new(100, None);
    let now = ts("2026-01-02T03:00:00Z");
    let seen = tokio::time::Instant::now();
    let notes: Vec<&'static str> = records.iter().map(|(_, m)| *m).collect();
    let versions: Vec<&'static str> = records.iter().map(|(v, _)| *v).collect();
    let mut objects = ObjectNumbers::default();
    let mut got = Vec::new();
    for (version, message) in &records {
        let event = PodEvent {
            resource_version: Some((*version).to_string()),
            ..pod_event(message)
        };
        queue.push_event(&event, now, seen);
        while let Some(job) = queue.take("replica-1") {
            match job {
                Job::CreateEvent(key, body) => {
                    let note = body.message.clone().unwrap_or_default();
                    let version = body.involved_object.resource_version.clone();
                    got.push(VersionedWrite::Post(
                        objects.of(body.metadata.name.as_deref().unwrap_or("")),
                        notes.iter().copied().find(|n| *n == note).unwrap_or("?"),
                        versions
                            .iter()
                            .copied()
                            .find(|v| version.as_deref() == Some(*v))
                            .unwrap_or("?"),
                    ));
                    queue.event_done(key, true);
                }
                Job::PatchEvent {
                    key, object: name, ..
                } => {
                    got.push(VersionedWrite::Patch(objects.of(&name)));
                    queue.event_done(key, true);
                }
                Job::Status(..) | Job::FinalPatch { .. } => got.push(VersionedWrite::Other),
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn core_event_carries_what_kubectl_shows() {
    let now = ts("2026-01-02T03:04:05.123456Z");
    let got = core_event(&pod_event(&"é".repeat(600)), "host_1", now);
    let name = got.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("web-1."), "{name}");
    let want = CoreEvent {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some("team".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("team".into()),
            name: Some("web-1".into()),
            uid: Some("uid-1".into()),
            resource_version: Some("7".into()),
            ..ObjectReference::default()
        },
        // 600 two-byte chars cut at 1024 bytes: 512 chars.
        message: Some("é".repeat(512)),
        reason: Some("FailedScheduling".into()),
        type_: Some("Warning".into()),
        action: Some("Scheduling".into()),
        reporting_component: Some("default-scheduler".into()),
        reporting_instance: Some("host_1".into()),
        source: Some(EventSource {
            component: Some("default-scheduler".into()),
            host: None,
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        ..CoreEvent::default()
    };
    assert_eq!(got, want);
}

#[test]
fn event_names_are_unique_within_a_nanosecond() {
    let now = ts("2026-01-02T03:04:05Z");
    let a = core_event(&pod_event("m"), "i", now).metadata.name;
    let b = core_event(&pod_event("m"), "i", now).metadata.name;
    assert_ne!(a, b);
}

#[tokio::test(start_paused = true)]
async fn rate_limiter_allows_a_burst_then_the_rate() {
    let limiter = RateLimiter::new(10.0, 2);
    let start = tokio::time::Instant::now();
    let mut at = Vec::new();
    for _ in 0..5 {
        limiter.acquire().await;
        at.push(start.elapsed().as_millis());
    }
    assert_eq!(at, vec![0, 0, 100, 200, 300]);
}

#[tokio::test(start_paused = true)]
async fn rate_limiter_with_zero_qps_is_unlimited() {
    let limiter = RateLimiter::new(0.0, 1);
    let start = tokio::time::Instant::now();
    for _ in 0..1000 {
        limiter.acquire().await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[rstest]
#[case::defaults_are_upstreams(LeaderElectionConfig::default(), true)]
#[case::renew_deadline_must_be_below_the_lease(
    LeaderElectionConfig { renew_deadline: Duration::from_secs(15), ..LeaderElectionConfig::default() },
    false)]
#[case::retry_must_be_below_the_renew_deadline(
    LeaderElectionConfig { retry_period: Duration::from_secs(10), ..LeaderElectionConfig::default() },
    false)]
#[case::identity_is_required(
    LeaderElectionConfig { identity: String::new(), ..LeaderElectionConfig::default() },
    false)]
fn leader_election_config_validation(#[case] config: LeaderElectionConfig, #[case] ok: bool) {
    assert_eq!(config.validate().is_ok(), ok, "{:?}", config.validate());
}

#[test]
fn leader_election_defaults() {
    let c = LeaderElectionConfig::default();
    assert_eq!(
        (
            c.namespace.as_str(),
            c.name.as_str(),
            c.lease_duration,
            c.renew_deadline,
            c.retry_period
        ),
        (
            "kube-system",
            "kube-scheduler",
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert!(c.identity.starts_with(&format!("{}_", leader::hostname())));
    assert_ne!(c.identity, LeaderElectionConfig::default().identity);
}

// ---------------------------------------------------------------------------------------
// Against the local API server

const WAIT: Duration = Duration::from_secs(10);

/// Informers running on a client, reporting to `recorder`.
struct Informers {
    recorder: Arc<Recorder>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Informers {
    /// Starts them and waits until they have synced; returns them and what the recorder saw
    /// up to then (the initial lists and `Synced`).
    async fn synced(client: kube::Client) -> (Informers, Vec<Seen>) {
        Informers::synced_with(client, InformerOptions::default()).await
    }

    /// [`Informers::synced`] with `options`.
    async fn synced_with(client: kube::Client, options: InformerOptions) -> (Informers, Vec<Seen>) {
        let recorder = Arc::new(Recorder::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run_informers(client, recorder.clone(), options, async {
            let _ = stopped.await;
        }));
        let seen = poll(WAIT, || async {
            let s = recorder.snapshot();
            s.contains(&Seen::Synced).then_some(s)
        })
        .await
        .expect("synced within the deadline");
        (
            Informers {
                recorder,
                stop,
                task,
            },
            seen,
        )
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("informers stop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_deliver_add_update_delete_in_order_and_sync_once() {
    let (server, client) = cluster().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    nodes
        .create(&pp, &make_node("n1").label("step", "1").obj())
        .await
        .expect("node");
    pods.create(&pp, &make_pod("a").label("step", "1").obj())
        .await
        .expect("pod a");

    let (informers, synced) = Informers::synced(client.clone()).await;
    let recorder = informers.recorder.clone();
    let mut initial = synced.clone();
    initial.sort();
    assert_eq!(
        initial,
        vec![
            Seen::Added("default/a@1".into()),
            Seen::Added("n1@1".into()),
            Seen::Synced
        ]
    );
    assert_eq!(synced.last(), Some(&Seen::Synced));

    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"step": "2"}}})),
        )
        .await
        .expect("node patched");
    pods.delete("a", &Default::default())
        .await
        .expect("pod a deleted");
    pods.create(&pp, &make_pod("b").label("step", "1").obj())
        .await
        .expect("pod b");
    // A finished pod leaves the unfinished-pods watch: the informer sees it deleted.
    pods.patch_status(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("pod b succeeded");

    let want_pods = vec![
        Seen::Deleted("default/a@1".into()),
        Seen::Added("default/b@1".into()),
        Seen::Deleted("default/b@1".into()),
    ];
    let want_nodes = vec![Seen::Updated("n1@1".into(), "n1@2".into())];
    let split = |all: &[Seen]| {
        let after: Vec<Seen> = all.iter().skip(3).cloned().collect();
        let (p, n): (Vec<Seen>, Vec<Seen>) = after.into_iter().partition(|s| match s {
            Seen::Added(k) | Seen::Deleted(k) | Seen::Updated(k, _) => k.starts_with("default/"),
            Seen::Synced => true,
        });
        (p, n)
    };
    let got = poll(WAIT, || async {
        let all = recorder.snapshot();
        let (p, n) = split(&all);
        (p.len() >= want_pods.len() && n.len() >= want_nodes.len()).then_some((p, n))
    })
    .await;
    let all = recorder.snapshot();
    assert_eq!(got, Some((want_pods, want_nodes)), "all events: {all:?}");
    assert_eq!(all.iter().filter(|s| **s == Seen::Synced).count(), 1);

    informers.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_deliver_volumes_claims_and_classes() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;
    let (server, client) = cluster().await;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pp = PostParams::default();
    fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("object")
    }
    classes
        .create(
            &pp,
            &decode(json!({"metadata": {"name": "fast"}, "provisioner": "p",
                "volumeBindingMode": "WaitForFirstConsumer"})),
        )
        .await
        .expect("class");
    pvs.create(
        &pp,
        &decode(
            json!({"metadata": {"name": "pv-a", "labels": {"step": "1"}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/data"}}}),
        ),
    )
    .await
    .expect("volume");
    pvcs.create(
        &pp,
        &decode(
            json!({"metadata": {"name": "data", "labels": {"step": "1"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
    )
    .await
    .expect("claim");

    let (informers, mut initial) = Informers::synced(client.clone()).await;
    let recorder = informers.recorder.clone();
    initial.sort();
    assert_eq!(
        initial,
        vec![
            Seen::Added("pv pv-a@1".into()),
            Seen::Added("pvc default/data@1".into()),
            Seen::Added("sc fast@-".into()),
            Seen::Synced
        ]
    );

    pvs.patch(
        "pv-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"step": "2"}}})),
    )
    .await
    .expect("volume patched");
    pvcs.delete("data", &Default::default())
        .await
        .expect("claim deleted");
    classes
        .delete("fast", &Default::default())
        .await
        .expect("class deleted");
    let mut want = vec![
        Seen::Updated("pv pv-a@1".into(), "pv pv-a@2".into()),
        Seen::Deleted("pvc default/data@1".into()),
        Seen::Deleted("sc fast@-".into()),
    ];
    want.sort();
    let got = poll(WAIT, || async {
        let mut after: Vec<Seen> = recorder.snapshot().into_iter().skip(4).collect();
        after.sort();
        (after.len() >= want.len()).then_some(after)
    })
    .await;
    assert_eq!(got, Some(want), "all events: {:?}", recorder.snapshot());

    informers.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_deliver_csi_nodes_drivers_capacities_and_attachments() {
    use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, VolumeAttachment};
    let (server, client) = cluster().await;
    let csi_nodes: Api<CSINode> = Api::all(client.clone());
    let drivers: Api<CSIDriver> = Api::all(client.clone());
    let capacities: Api<CSIStorageCapacity> = Api::namespaced(client.clone(), "default");
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let pp = PostParams::default();
    fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("object")
    }
    csi_nodes
        .create(
            &pp,
            &decode(json!({"metadata": {"name": "n1", "labels": {"step": "1"}},
                "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1",
                    "allocatable": {"count": 2}}]}})),
        )
        .await
        .expect("csinode");
    drivers
        .create(
            &pp,
            &decode(json!({"metadata": {"name": "ebs.csi.aws.com"},
                "spec": {"attachRequired": true}})),
        )
        .await
        .expect("csidriver");
    capacities
        .create(
            &pp,
            &decode(
                json!({"metadata": {"name": "cap-a"}, "storageClassName": "fast",
                "capacity": "10Gi"}),
            ),
        )
        .await
        .expect("capacity");
    attachments
        .create(
            &pp,
            &decode(json!({"metadata": {"name": "va-1"},
                "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                    "source": {"persistentVolumeName": "pv-a"}}})),
        )
        .await
        .expect("attachment");

    let (informers, mut initial) = Informers::synced(client.clone()).await;
    let recorder = informers.recorder.clone();
    initial.sort();
    assert_eq!(
        initial,
        vec![
            Seen::Added("capacity default/cap-a@-".into()),
            Seen::Added("csidriver ebs.csi.aws.com@-".into()),
            Seen::Added("csinode n1@1".into()),
            Seen::Added("va va-1@-".into()),
            Seen::Synced
        ]
    );

    csi_nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"step": "2"}}})),
        )
        .await
        .expect("csinode patched");
    drivers
        .delete("ebs.csi.aws.com", &Default::default())
        .await
        .expect("csidriver deleted");
    capacities
        .delete("cap-a", &Default::default())
        .await
        .expect("capacity deleted");
    attachments
        .delete("va-1", &Default::default())
        .await
        .expect("attachment deleted");
    let mut want = vec![
        Seen::Updated("csinode n1@1".into(), "csinode n1@2".into()),
        Seen::Deleted("csidriver ebs.csi.aws.com@-".into()),
        Seen::Deleted("capacity default/cap-a@-".into()),
        Seen::Deleted("va va-1@-".into()),
    ];
    want.sort();
    let got = poll(WAIT, || async {
        let mut after: Vec<Seen> = recorder.snapshot().into_iter().skip(5).collect();
        after.sort();
        (after.len() >= want.len()).then_some(after)
    })
    .await;
    assert_eq!(got, Some(want), "all events: {:?}", recorder.snapshot());

    informers.stop().await;
    server.shutdown().await;
}

#[rstest]
#[case::served(&[], true)]
#[case::resource_group_not_served(&["resource.k8s.io"], false)]
#[case::other_group_not_served(&["storage.k8s.io"], true)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_tells_whether_dynamic_resources_are_served(
    #[case] disabled: &[&str],
    #[case] want: bool,
) {
    let (server, client) = cluster_without(disabled).await;
    let got = serves_dynamic_resources(&client).await.expect("discovery");
    assert_eq!(got, want);
    server.shutdown().await;
}

/// Without resource.k8s.io the informers of its kinds could never list; with them left out,
/// the others sync and deliver as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_sync_without_resource_k8s_io_when_its_kinds_are_left_out() {
    let (server, client) = cluster_without(&["resource.k8s.io"]).await;
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &make_node("n1").obj())
        .await
        .expect("node");
    let options = InformerOptions {
        dynamic_resources: false,
        ..InformerOptions::default()
    };
    let (informers, seen) = Informers::synced_with(client, options).await;
    assert_eq!(seen, vec![Seen::Added("n1@-".into()), Seen::Synced]);
    informers.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_deliver_device_classes_resource_slices_and_claims() {
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
    let (server, client) = cluster().await;
    let classes: Api<DeviceClass> = Api::all(client.clone());
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("object")
    }
    classes
        .create(
            &pp,
            &decode(
                json!({"metadata": {"name": "gpu.example.com", "labels": {"step": "1"}},
                "spec": {}}),
            ),
        )
        .await
        .expect("deviceclass");
    slices
        .create(
            &pp,
            &decode(json!({"metadata": {"name": "n1-gpu"},
                "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                    "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}]}})),
        )
        .await
        .expect("resourceslice");
    claims
        .create(
            &pp,
            &decode(json!({"metadata": {"name": "gpu"},
                "spec": {"devices": {"requests": [{"name": "gpu",
                    "exactly": {"deviceClassName": "gpu.example.com"}}]}}})),
        )
        .await
        .expect("resourceclaim");

    let (informers, mut initial) = Informers::synced(client.clone()).await;
    let recorder = informers.recorder.clone();
    initial.sort();
    assert_eq!(
        initial,
        vec![
            Seen::Added("deviceclass gpu.example.com@1".into()),
            Seen::Added("resourceclaim default/gpu@-".into()),
            Seen::Added("resourceslice n1-gpu@-".into()),
            Seen::Synced
        ]
    );

    classes
        .patch(
            "gpu.example.com",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"step": "2"}}})),
        )
        .await
        .expect("deviceclass patched");
    slices
        .delete("n1-gpu", &Default::default())
        .await
        .expect("resourceslice deleted");
    claims
        .delete("gpu", &Default::default())
        .await
        .expect("resourceclaim deleted");
    let mut want = vec![
        Seen::Updated(
            "deviceclass gpu.example.com@1".into(),
            "deviceclass gpu.example.com@2".into(),
        ),
        Seen::Deleted("resourceslice n1-gpu@-".into()),
        Seen::Deleted("resourceclaim default/gpu@-".into()),
    ];
    want.sort();
    let got = poll(WAIT, || async {
        let mut after: Vec<Seen> = recorder.snapshot().into_iter().skip(4).collect();
        after.sort();
        (after.len() >= want.len()).then_some(after)
    })
    .await;
    assert_eq!(got, Some(want), "all events: {:?}", recorder.snapshot());

    informers.stop().await;
    server.shutdown().await;
}

async fn pod_and_node(client: &kube::Client, name: &str) -> Pod {
    let pp = PostParams::default();
    Api::<Node>::all(client.clone())
        .create(&pp, &make_node("n1").obj())
        .await
        .expect("node");
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&pp, &make_pod(name).obj())
        .await
        .expect("pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_writes_the_node_and_a_second_bind_is_a_conflict() {
    let (server, client) = cluster().await;
    let pod = pod_and_node(&client, "web").await;
    let kc = KubeClusterClient::new(client.clone(), WriterOptions::default());
    let binding = Binding {
        namespace: "default".into(),
        name: "web".into(),
        uid: pod.metadata.uid.clone(),
        node: "n1".into(),
    };
    assert_eq!(kc.bind(&binding).await, Ok(()));
    let bound = Api::<Pod>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .expect("pod");
    assert_eq!(bound.spec.and_then(|s| s.node_name), Some("n1".to_string()));
    let again = kc.bind(&binding).await;
    assert!(
        matches!(again, Err(ClientError::Api { code: 409, .. })),
        "{again:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_with_a_stale_uid_is_refused() {
    let (server, client) = cluster().await;
    pod_and_node(&client, "web").await;
    let kc = KubeClusterClient::new(client.clone(), WriterOptions::default());
    let binding = Binding {
        namespace: "default".into(),
        name: "web".into(),
        uid: Some("not-the-pods-uid".into()),
        node: "n1".into(),
    };
    let got = kc.bind(&binding).await;
    assert!(
        matches!(got, Err(ClientError::Api { code: 409, .. })),
        "{got:?}"
    );
    server.shutdown().await;
}

fn conditions(pod: &Pod) -> Vec<(String, String, Option<String>)> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn nominated(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_update_sets_pod_scheduled_and_nomination_and_keeps_other_conditions() {
    let (server, client) = cluster().await;
    pod_and_node(&client, "web").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let ready = PodCondition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: Some("ContainersNotReady".into()),
        ..PodCondition::default()
    };
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [ready]}})),
    )
    .await
    .expect("ready condition");

    let kc = KubeClusterClient::new(client.clone(), WriterOptions::default());
    let update = PodStatusUpdate {
        pod: PodRef {
            namespace: "default".into(),
            name: "web".into(),
            uid: None,
        },
        condition: Some(framework::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: "Unschedulable".into(),
            message: "0/1 nodes are available: 1 Insufficient cpu.".into(),
        }),
        nomination: Nomination::Set("n1".into()),
    };
    assert_eq!(kc.update_pod_status(&update).await, Ok(()));
    let want = vec![
        (
            "Ready".to_string(),
            "False".to_string(),
            Some("ContainersNotReady".to_string()),
        ),
        (
            "PodScheduled".to_string(),
            "False".to_string(),
            Some("Unschedulable".to_string()),
        ),
    ];
    let got = poll(WAIT, || async {
        let p = pods.get("web").await.ok()?;
        nominated(&p).is_some().then_some(p)
    })
    .await
    .expect("status written");
    assert_eq!(
        (conditions(&got), nominated(&got)),
        (want.clone(), Some("n1".into()))
    );
    let message = got
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.message.clone());
    assert_eq!(
        message.as_deref(),
        Some("0/1 nodes are available: 1 Insufficient cpu.")
    );

    let clear = PodStatusUpdate {
        condition: None,
        nomination: Nomination::Clear,
        ..update
    };
    assert_eq!(kc.update_pod_status(&clear).await, Ok(()));
    let got = poll(WAIT, || async {
        let p = pods.get("web").await.ok()?;
        nominated(&p).is_none().then_some(p)
    })
    .await
    .expect("nomination cleared");
    assert_eq!(conditions(&got), want);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_event_is_listed_with_the_truncated_message() {
    let (server, client) = cluster().await;
    let pod = pod_and_node(&client, "web").await;
    let kc = KubeClusterClient::new(
        client.clone(),
        WriterOptions {
            reporting_instance: "replica-1".into(),
            ..WriterOptions::default()
        },
    );
    let event = PodEvent {
        regarding: PodRef::of(&pod),
        resource_version: pod.metadata.resource_version.clone(),
        event_type: EventType::Warning,
        reason: "FailedScheduling".into(),
        action: "Scheduling".into(),
        message: format!("0/1 nodes are available: {}", "x".repeat(2000)),
        reporting_controller: "default-scheduler".into(),
    };
    assert_eq!(kc.record_event(&event).await, Ok(()));
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let got = poll(WAIT, || async {
        events.list(&ListParams::default()).await.ok()?.items.pop()
    })
    .await
    .expect("event listed");
    let project = |e: &CoreEvent| {
        (
            e.involved_object.clone(),
            e.reason.clone(),
            e.message.clone(),
            e.type_.clone(),
            e.action.clone(),
            e.reporting_component.clone(),
            e.reporting_instance.clone(),
            e.source.as_ref().and_then(|s| s.component.clone()),
            e.count,
        )
    };
    let mut message = event.message.clone();
    message.truncate(MAX_EVENT_MESSAGE_BYTES);
    assert_eq!(
        project(&got),
        (
            ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some("default".into()),
                name: Some("web".into()),
                uid: pod.metadata.uid.clone(),
                resource_version: pod.metadata.resource_version.clone(),
                ..ObjectReference::default()
            },
            Some("FailedScheduling".into()),
            Some(message),
            Some("Warning".into()),
            Some("Scheduling".into()),
            Some("default-scheduler".into()),
            Some("replica-1".into()),
            Some("default-scheduler".into()),
            Some(1),
        )
    );
    assert!(
        got.first_timestamp.is_some() && got.last_timestamp.is_some() && got.event_time.is_some()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failed_scheduling_of_a_pod_is_one_event_with_a_series() {
    let (server, client) = cluster().await;
    let pod = pod_and_node(&client, "web").await;
    let kc = KubeClusterClient::new(client.clone(), WriterOptions::default());
    let failed = PodEvent {
        regarding: PodRef::of(&pod),
        resource_version: pod.metadata.resource_version.clone(),
        event_type: EventType::Warning,
        reason: "FailedScheduling".into(),
        action: "Scheduling".into(),
        message: "0/1 nodes are available: 1 Insufficient cpu.".into(),
        reporting_controller: "default-scheduler".into(),
    };
    let scheduled = PodEvent {
        event_type: EventType::Normal,
        reason: "Scheduled".into(),
        action: "Binding".into(),
        message: "Successfully assigned default/web to n1".into(),
        ..failed.clone()
    };
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let until = |want: Vec<EventRow>| {
        let events = events.clone();
        async move {
            poll(WAIT, || async {
                let got = listed_events(&events).await;
                (got == want).then_some(())
            })
            .await
        }
    };
    let row = |e: &PodEvent, count: i32, series: Option<i32>| {
        (
            "web".to_string(),
            e.reason.clone(),
            e.message.clone(),
            Some(count),
            series,
        )
    };

    // The first occurrence is POSTed, the second PATCHes a series of 2 onto it.
    assert_eq!(kc.record_event(&failed).await, Ok(()));
    assert_eq!(until(vec![row(&failed, 1, None)]).await, Some(()));
    assert_eq!(kc.record_event(&failed).await, Ok(()));
    assert_eq!(until(vec![row(&failed, 2, Some(2))]).await, Some(()));
    // The third is only counted: the next write, a new reason's POST, finds the series at 2.
    assert_eq!(kc.record_event(&failed).await, Ok(()));
    assert_eq!(kc.record_event(&scheduled).await, Ok(()));
    let mut want = vec![row(&failed, 2, Some(2)), row(&scheduled, 1, None)];
    want.sort();
    assert_eq!(until(want).await, Some(()));
    // The heartbeat writes the count as it is.
    kc.refresh_event_series();
    let mut want = vec![row(&failed, 3, Some(3)), row(&scheduled, 1, None)];
    want.sort();
    assert_eq!(until(want).await, Some(()));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_pod_honours_the_uid_precondition() {
    let (server, client) = cluster().await;
    let pod = pod_and_node(&client, "victim").await;
    let kc = KubeClusterClient::new(client.clone(), WriterOptions::default());
    let mut r = PodRef::of(&pod);
    r.uid = Some("someone-else".into());
    let got = kc.delete_pod(&r).await;
    assert!(
        matches!(got, Err(ClientError::Api { code: 409, .. })),
        "{got:?}"
    );
    assert_eq!(kc.delete_pod(&PodRef::of(&pod)).await, Ok(()));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        pods.get_opt("victim").await.map(|p| p.is_none()).ok(),
        Some(true)
    );
    server.shutdown().await;
}

fn fast_election(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_string(),
        // Short, with room for a loaded 2-core machine: a renewal may take a while.
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaderElectionConfig::default()
    }
}

async fn lease(client: &kube::Client) -> (Option<String>, Option<i32>) {
    let l = Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get("kube-scheduler")
        .await
        .expect("lease");
    let spec = l.spec.unwrap_or_default();
    (spec.holder_identity, spec.lease_transitions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_the_other_takes_over_when_renewals_stop() {
    let (server, client) = cluster().await;
    let a = LeaderElector::new(client.clone(), fast_election("a")).expect("config");
    let b = LeaderElector::new(client.clone(), fast_election("b")).expect("config");
    let leader_a = tokio::time::timeout(WAIT, a.run()).await.expect("a leads");
    assert_eq!(lease(&client).await, (Some("a".into()), Some(0)));
    let mut b_run = tokio::spawn(b.run());
    // b keeps trying for well over a lease duration while a renews: it must not lead.
    assert!(
        tokio::time::timeout(Duration::from_secs(3), &mut b_run)
            .await
            .is_err(),
        "b acquired a lease a was renewing"
    );
    assert!(leader_a.is_leading());
    // a stops renewing without releasing (a crash): b takes over after the lease expires.
    let a_leading = leader_a.subscribe();
    drop(leader_a);
    assert!(!*a_leading.borrow());
    let leader_b = tokio::time::timeout(WAIT, b_run)
        .await
        .expect("b takes over within the deadline")
        .expect("b's task");
    assert!(leader_b.is_leading());
    assert_eq!(lease(&client).await, (Some("b".into()), Some(1)));
    leader_b.stop().await;
    server.shutdown().await;
}

/// A lease record as a holder writes it: renewed at `renew`, held for 15 s.
fn held_record(holder: &str, renew: Timestamp) -> k8s_openapi::api::coordination::v1::LeaseSpec {
    k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(MicroTime(renew)),
        renew_time: Some(MicroTime(renew)),
        ..Default::default()
    }
}

/// What a candidate concludes, read after read, from a holder whose clock is `behind`
/// seconds behind the candidate's: each read is (seconds of local time since the first read,
/// whether the holder renewed since the previous read), and `want` is the expiry the
/// candidate judges after each read.
#[rstest]
#[case::holder_with_a_clock_20s_behind_that_keeps_renewing_never_expires(
    20,
    &[(0, true), (2, true), (4, true), (16, true), (30, true), (60, true)],
    &[false, false, false, false, false, false]
)]
#[case::holder_that_stops_renewing_expires_after_the_lease_duration_of_local_time(
    0,
    &[(0, true), (2, true), (10, false), (16, false), (17, false)],
    &[false, false, false, false, true]
)]
#[case::a_long_abandoned_lease_first_seen_now_is_waited_out_once(
    3600,
    &[(0, false), (14, false), (15, false)],
    &[false, false, true]
)]
#[case::holder_with_a_clock_ahead_that_stops_renewing_still_expires(
    -3600,
    &[(0, true), (14, false), (15, false)],
    &[false, false, true]
)]
fn lease_expiry_is_judged_by_local_time_since_the_record_changed(
    #[case] behind: i64,
    #[case] reads: &[(u64, bool)],
    #[case] want: &[bool],
) {
    use k8s_openapi::jiff::SignedDuration;
    let start = tokio::time::Instant::now();
    let wall = Timestamp::now();
    let mut observed = super::leader::ObservedRecord::default();
    let mut renewed_at = 0;
    let got: Vec<bool> = reads
        .iter()
        .map(|&(at, renewed)| {
            if renewed {
                renewed_at = at;
            }
            // The holder's renewTime: its own clock at its last renewal.
            let holder_clock = wall
                .checked_add(SignedDuration::from_secs(
                    i64::try_from(renewed_at).unwrap_or(0) - behind,
                ))
                .expect("timestamp in range");
            let now = start + Duration::from_secs(at);
            observed.observe(held_record("holder", holder_clock), now);
            observed.expired(now, Duration::from_secs(15))
        })
        .collect();
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_with_a_skewed_clock_keeps_the_lease_while_it_renews() {
    let (server, client) = cluster().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    // The holder writes renewTime from a clock 20 s behind, far beyond the 2 s lease.
    let skewed = || {
        Timestamp::now()
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(20))
            .expect("timestamp in range")
    };
    let mut record = held_record("skewed", skewed());
    record.lease_duration_seconds = Some(2);
    leases
        .create(
            &PostParams::default(),
            &Lease {
                metadata: ObjectMeta {
                    name: Some("kube-scheduler".into()),
                    namespace: Some("kube-system".into()),
                    ..ObjectMeta::default()
                },
                spec: Some(record),
            },
        )
        .await
        .expect("lease created");
    let renewing = {
        let leases = leases.clone();
        tokio::spawn(async move {
            // Bounded: 100 renewals at most, far more than the test waits for.
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let patch = json!({"spec": {"renewTime": MicroTime(skewed())}});
                if leases
                    .patch(
                        "kube-scheduler",
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                    .is_err()
                {
                    return;
                }
            }
        })
    };
    let b = LeaderElector::new(client.clone(), fast_election("b")).expect("config");
    let mut b_run = tokio::spawn(b.run());
    // Well over a lease duration of renewals: b must not take the lease.
    assert!(
        tokio::time::timeout(Duration::from_secs(3), &mut b_run)
            .await
            .is_err(),
        "b took a lease its holder was renewing"
    );
    assert_eq!(lease(&client).await, (Some("skewed".into()), None));
    // The holder stops: b takes over once the record has not changed for a lease duration.
    renewing.abort();
    let leader_b = tokio::time::timeout(WAIT, b_run)
        .await
        .expect("b takes over within the deadline")
        .expect("b's task");
    assert_eq!(lease(&client).await, (Some("b".into()), Some(1)));
    leader_b.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_whose_lease_is_taken_loses_leadership_at_once() {
    let (server, client) = cluster().await;
    let a = LeaderElector::new(client.clone(), fast_election("a")).expect("config");
    let leader = tokio::time::timeout(WAIT, a.run()).await.expect("a leads");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    leases
        .patch(
            "kube-scheduler",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "intruder",
                "renewTime": MicroTime(Timestamp::now()), "leaseDurationSeconds": 60}})),
        )
        .await
        .expect("lease overwritten");
    tokio::time::timeout(WAIT, leader.lost())
        .await
        .expect("a notices within the deadline");
    assert!(!leader.is_leading());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_releases_the_lease_for_an_immediate_takeover() {
    let (server, client) = cluster().await;
    let a = LeaderElector::new(
        client.clone(),
        LeaderElectionConfig {
            // Long enough that only a release explains a takeover within the wait below.
            lease_duration: Duration::from_secs(30),
            renew_deadline: Duration::from_secs(20),
            ..fast_election("a")
        },
    )
    .expect("config");
    let leader = tokio::time::timeout(WAIT, a.run()).await.expect("a leads");
    let rx = leader.subscribe();
    leader.stop().await;
    assert!(!*rx.borrow());
    assert_eq!(lease(&client).await, (None, Some(0)));
    let b = LeaderElector::new(client.clone(), fast_election("b")).expect("config");
    let leader_b = tokio::time::timeout(Duration::from_secs(5), b.run())
        .await
        .expect("b takes the released lease");
    assert_eq!(lease(&client).await, (Some("b".into()), Some(1)));
    leader_b.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_reads_the_given_kubeconfig() {
    let (server, _) = cluster().await;
    let dir = std::env::temp_dir().join(format!("kubesched-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("kubeconfig");
    std::fs::write(&path, server.kubeconfig()).expect("kubeconfig");
    let client = connect(Some(&path)).await.expect("client");
    let ns = Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
        .get("kube-system")
        .await
        .expect("namespace");
    assert_eq!(ns.metadata.name.as_deref(), Some("kube-system"));
    let missing = connect(Some(&dir.join("missing"))).await.err();
    assert!(
        matches!(missing, Some(ConnectError::Kubeconfig { .. })),
        "{missing:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    server.shutdown().await;
}

/// A TCP proxy in front of the API server whose connections the test can cut: an in-process
/// server's shutdown leaves open watch connections running, so a dropped connection is made
/// here.
struct Proxy {
    addr: SocketAddr,
    up: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn({
            let (up, conns) = (up.clone(), conns.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if !up.load(std::sync::atomic::Ordering::SeqCst) {
                        continue; // dropped: connection closed
                    }
                    let conn = tokio::spawn(async move {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    conns.lock().expect("proxy lock").push(conn);
                }
            }
        });
        Proxy {
            addr,
            up,
            conns,
            accept,
        }
    }

    fn client(&self) -> kube::Client {
        let url = format!("http://{}", self.addr).parse().expect("proxy URL");
        kube::Client::try_from(kube::Config::new(url)).expect("kube client")
    }

    /// Closes every connection and refuses new ones until [`Proxy::restore`].
    fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        for c in self.conns.lock().expect("proxy lock").drain(..) {
            c.abort();
        }
    }

    fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// Pods a and z exist and are synced through a proxy; the connection drops; meanwhile a is
/// deleted, z changed, b, c and d created; then the connection comes back. Returns the pod
/// events delivered after `synced`.
async fn pods_after_a_dropped_connection(log_capacity: usize) -> Option<Vec<Seen>> {
    let server = apiserver::Server::start(apiserver::Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        event_log_capacity: log_capacity,
        ..apiserver::Config::default()
    })
    .await
    .expect("API server starts");
    let proxy = Proxy::start(server.local_addr()).await;
    let direct =
        kube::Client::try_from(kube::Config::new(server.url().parse().expect("server URL")))
            .expect("kube client");
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(direct, "default");
    for name in ["a", "z"] {
        pods.create(&pp, &make_pod(name).label("step", "1").obj())
            .await
            .expect("pod");
    }
    let (informers, _) = Informers::synced(proxy.client()).await;
    let recorder = informers.recorder.clone();

    proxy.cut();
    pods.delete("a", &Default::default())
        .await
        .expect("pod a deleted");
    pods.patch(
        "z",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"step": "2"}}})),
    )
    .await
    .expect("pod z changed");
    for name in ["b", "c", "d"] {
        pods.create(&pp, &make_pod(name).label("step", "1").obj())
            .await
            .expect("pod");
    }
    proxy.restore();

    let got = poll(Duration::from_secs(30), || async {
        let s = recorder.snapshot();
        let after: Vec<Seen> = s.iter().skip(3).cloned().collect();
        (after.len() >= 5).then_some(after)
    })
    .await;
    informers.stop().await;
    drop(proxy);
    server.shutdown().await;
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_resume_a_dropped_watch_from_where_they_were() {
    // The server's event log still holds the missed events: they arrive in order.
    assert_eq!(
        pods_after_a_dropped_connection(100_000).await,
        Some(vec![
            Seen::Deleted("default/a@1".into()),
            Seen::Updated("default/z@1".into(), "default/z@2".into()),
            Seen::Added("default/b@1".into()),
            Seen::Added("default/c@1".into()),
            Seen::Added("default/d@1".into()),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_relist_after_410_and_deliver_the_difference() {
    // A two-event log: the resumed watch is 410 Expired, the informer relists and diffs
    // (deletions first, then by key).
    assert_eq!(
        pods_after_a_dropped_connection(2).await,
        Some(vec![
            Seen::Deleted("default/a@1".into()),
            Seen::Added("default/b@1".into()),
            Seen::Added("default/c@1".into()),
            Seen::Added("default/d@1".into()),
            Seen::Updated("default/z@1".into(), "default/z@2".into()),
        ])
    );
}

#[tokio::test]
async fn status_and_event_writes_return_at_once_and_only_new_event_series_beyond_capacity_are_dropped_and_counted(
) {
    use futures_util::FutureExt;
    // Nothing listens there, and on this single-threaded runtime the workers do not run
    // before the test yields: every call below must complete without any I/O.
    let url = "http://127.0.0.1:9".parse().expect("URL");
    let client = kube::Client::try_from(kube::Config::new(url)).expect("kube client");
    let metrics = Arc::new(crate::metrics::PrometheusRecorder::new());
    let kc = KubeClusterClient::new(
        client,
        WriterOptions {
            queue_capacity: 2,
            metrics: Some(metrics.clone()),
            ..WriterOptions::default()
        },
    );
    let event_about = |pod: &str| PodEvent {
        regarding: PodRef {
            namespace: "default".into(),
            name: pod.into(),
            uid: None,
        },
        ..pod_event("m")
    };
    let update = status_update(true, Nomination::Keep);
    // Repeats of one series and status writes take no room; the third series finds none.
    let mut got: Vec<_> = (0..5)
        .flat_map(|_| {
            [
                kc.record_event(&event_about("a")).now_or_never(),
                kc.record_event(&event_about("b")).now_or_never(),
                kc.update_pod_status(&update).now_or_never(),
            ]
        })
        .collect();
    got.push(kc.record_event(&event_about("c")).now_or_never());
    assert_eq!(got, vec![Some(Ok(())); 16]);
    let dropped: Vec<String> = metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("scheduler_background_writes_dropped_total{"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        dropped,
        vec![r#"scheduler_background_writes_dropped_total{kind="event",reason="queue_full"} 1"#]
    );
}

fn unscheduled(pod: &str, message: &str, nomination: Nomination) -> PodStatusUpdate {
    PodStatusUpdate {
        pod: PodRef {
            namespace: "default".into(),
            name: pod.into(),
            uid: None,
        },
        condition: Some(framework::PodCondition::unscheduled(
            "Unschedulable",
            message,
        )),
        nomination,
    }
}

fn disruption(pod: &str) -> PodStatusUpdate {
    PodStatusUpdate {
        condition: Some(framework::PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: "PreemptionByScheduler".into(),
            message: "default-scheduler: preempting to accommodate a higher priority pod".into(),
        }),
        ..unscheduled(pod, "", Nomination::Keep)
    }
}

#[rstest]
#[case::a_later_condition_of_the_same_type_replaces_the_earlier(
    vec![unscheduled("p", "1", Nomination::Keep), unscheduled("p", "2", Nomination::Keep)],
    vec![unscheduled("p", "2", Nomination::Keep).condition.expect("condition")],
    Nomination::Keep
)]
#[case::a_condition_only_update_keeps_a_pending_nomination(
    vec![unscheduled("p", "1", Nomination::Set("n1".into())), unscheduled("p", "2", Nomination::Keep)],
    vec![unscheduled("p", "2", Nomination::Keep).condition.expect("condition")],
    Nomination::Set("n1".into())
)]
#[case::a_later_clear_replaces_a_pending_set(
    vec![unscheduled("p", "1", Nomination::Set("n1".into())), PodStatusUpdate { condition: None, ..unscheduled("p", "", Nomination::Clear) }],
    vec![unscheduled("p", "1", Nomination::Keep).condition.expect("condition")],
    Nomination::Clear
)]
#[case::conditions_of_different_types_are_both_kept(
    vec![disruption("p"), unscheduled("p", "1", Nomination::Keep)],
    vec![
        disruption("p").condition.expect("condition"),
        unscheduled("p", "1", Nomination::Keep).condition.expect("condition"),
    ],
    Nomination::Keep
)]
fn pending_status_merges_updates_to_the_effect_of_applying_them_in_order(
    #[case] updates: Vec<PodStatusUpdate>,
    #[case] conditions: Vec<framework::PodCondition>,
    #[case] nomination: Nomination,
) {
    let mut got = PendingStatus::new(&updates[0]);
    for u in &updates[1..] {
        got.merge(u);
    }
    assert_eq!(
        got,
        PendingStatus {
            pod: updates[0].pod.clone(),
            conditions,
            nomination,
        }
    );
}

/// Per pod: the PodScheduled message and the nomination.
async fn scheduled_statuses(pods: &Api<Pod>) -> Vec<(String, Option<String>, Option<String>)> {
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return Vec::new();
    };
    let mut got: Vec<_> = list
        .items
        .iter()
        .map(|p| {
            let message = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
                .and_then(|c| c.message.clone());
            (
                p.metadata.name.clone().unwrap_or_default(),
                message,
                nominated(p),
            )
        })
        .collect();
    got.sort();
    got
}

/// An Event object as listed: pod, reason, message, count and series count.
type EventRow = (String, String, String, Option<i32>, Option<i32>);

/// Per Event object: pod, reason, message, count and series count.
async fn listed_events(events: &Api<CoreEvent>) -> Vec<EventRow> {
    let Ok(list) = events.list(&ListParams::default()).await else {
        return Vec::new();
    };
    let mut got: Vec<_> = list
        .items
        .iter()
        .map(|e| {
            (
                e.involved_object.name.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
                e.count,
                e.series.as_ref().and_then(|s| s.count),
            )
        })
        .collect();
    got.sort();
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failed_attempts_under_a_rate_limit_keep_every_pods_last_status_and_aggregate_events(
) {
    const PODS: usize = 4;
    const ATTEMPTS: usize = 25;
    let (server, client) = cluster().await;
    let pp = PostParams::default();
    Api::<Node>::all(client.clone())
        .create(&pp, &make_node("n1").obj())
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let names: Vec<String> = (0..PODS).map(|i| format!("p{i}")).collect();
    for name in &names {
        pods.create(&pp, &make_pod(name).obj()).await.expect("pod");
    }
    // A slow client and little room: 200 writes asked for at once, far more than the
    // capacity and than the rate lets out while they are asked for.
    let kc = KubeClusterClient::new(
        client.clone(),
        WriterOptions {
            qps: 20.0,
            burst: 1,
            queue_capacity: 16,
            ..WriterOptions::default()
        },
    );
    let failed = |name: &str, attempt: usize| PodEvent {
        regarding: PodRef {
            namespace: "default".into(),
            name: name.into(),
            uid: None,
        },
        resource_version: None,
        event_type: EventType::Warning,
        reason: "FailedScheduling".into(),
        action: "Scheduling".into(),
        message: format!("attempt {attempt}"),
        reporting_controller: "default-scheduler".into(),
    };
    for attempt in 0..ATTEMPTS {
        for name in &names {
            // The nomination is asked for once, on the first attempt only.
            let nomination = if attempt == 0 {
                Nomination::Set("n1".into())
            } else {
                Nomination::Keep
            };
            let update = unscheduled(name, &format!("attempt {attempt}"), nomination);
            assert_eq!(kc.update_pod_status(&update).await, Ok(()));
            assert_eq!(kc.record_event(&failed(name, attempt)).await, Ok(()));
        }
    }
    for name in &names {
        let scheduled = PodEvent {
            event_type: EventType::Normal,
            reason: "Scheduled".into(),
            action: "Binding".into(),
            message: format!("Successfully assigned default/{name} to n1"),
            ..failed(name, 0)
        };
        assert_eq!(kc.record_event(&scheduled).await, Ok(()));
    }
    // Occurrences after the second are written by the heartbeat.
    kc.refresh_event_series();

    let want_statuses: Vec<_> = names
        .iter()
        .map(|n| {
            (
                n.clone(),
                Some(format!("attempt {}", ATTEMPTS - 1)),
                Some("n1".to_string()),
            )
        })
        .collect();
    let count = i32::try_from(ATTEMPTS).expect("small");
    let mut want_events: Vec<_> = names
        .iter()
        .flat_map(|n| {
            [
                (
                    n.clone(),
                    "FailedScheduling".to_string(),
                    "attempt 0".to_string(),
                    Some(count),
                    Some(count),
                ),
                (
                    n.clone(),
                    "Scheduled".to_string(),
                    format!("Successfully assigned default/{n} to n1"),
                    Some(1),
                    None,
                ),
            ]
        })
        .collect();
    want_events.sort();
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let got = loop {
        let got = (
            scheduled_statuses(&pods).await,
            listed_events(&events).await,
        );
        if got == (want_statuses.clone(), want_events.clone())
            || tokio::time::Instant::now() >= deadline
        {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(got, (want_statuses, want_events));
    server.shutdown().await;
}

/// A PriorityClass `name` of `value`.
fn priority_class(name: &str, value: i32) -> k8s_openapi::api::scheduling::v1::PriorityClass {
    k8s_openapi::api::scheduling::v1::PriorityClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        value,
        ..Default::default()
    }
}

/// The pod `name` asking for one CPU, with priority class `class`.
fn prioritized_pod(name: &str, class: &str) -> Pod {
    make_pod(name)
        .req(&[("cpu", "1")])
        .with(|p| {
            if let Some(spec) = p.spec.as_mut() {
                spec.priority_class_name = Some(class.into());
            }
        })
        .obj()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempted_victim_carries_disruption_target_when_its_deletion_is_seen() {
    use futures_util::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};

    let (server, client) = cluster().await;
    let pp = PostParams::default();
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    for (name, value) in [("low", 10), ("high", 1000)] {
        classes
            .create(&pp, &priority_class(name, value))
            .await
            .expect("priority class");
    }
    Api::<Node>::all(client.clone())
        .create(
            &pp,
            &make_node("n1")
                .capacity(&[("cpu", "1"), ("pods", "10")])
                .obj(),
        )
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut victim = prioritized_pod("victim", "low");
    if let Some(spec) = victim.spec.as_mut() {
        spec.node_name = Some("n1".into());
    }
    let victim = pods.create(&pp, &victim).await.expect("victim");

    let cfg = crate::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        "test",
    )
    .expect("default configuration");
    let options = crate::app::RunOptions {
        config: cfg,
        config_source: "test".into(),
        bind_address: SocketAddr::from(([127, 0, 0, 1], 0)),
        leader_election: None,
        seed: 1,
        extra_metrics: None,
        decisions: None,
        simulator_annotations: false,
        feature_gates: crate::features::FeatureGates::default(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run_client = client.clone();
    let run = tokio::spawn(async move {
        let registry = plugins::in_tree_registry();
        crate::app::run(run_client, options, &registry, |_| {}, async {
            let _ = stopped.await;
        })
        .await
    });

    let rv = victim.metadata.resource_version.clone().unwrap_or_default();
    let mut watch = pods
        .watch(&WatchParams::default().fields("metadata.name=victim"), &rv)
        .await
        .expect("watch")
        .boxed();
    pods.create(&pp, &prioritized_pod("preemptor", "high"))
        .await
        .expect("preemptor");
    // The victim as it was when its deletion showed: the DELETED object, or the first
    // update with a deletion timestamp (graceful deletion).
    let at_deletion = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(event)) = watch.try_next().await {
            match event {
                WatchEvent::Deleted(p) => return Some(p),
                WatchEvent::Modified(p) if p.metadata.deletion_timestamp.is_some() => {
                    return Some(p)
                }
                _ => {}
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .expect("the victim's deletion is seen");
    let disruption: Vec<_> = at_deletion
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == "DisruptionTarget")
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone(),
                c.message.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        disruption,
        vec![(
            "True".to_string(),
            Some("PreemptionByScheduler".to_string()),
            "default-scheduler: preempting to accommodate a higher priority pod".to_string(),
        )]
    );
    let _ = stop.send(());
    let _ = run.await;
    server.shutdown().await;
}

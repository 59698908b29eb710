//! kube-rs 5.0, the scheduler's own client: typed Api, watcher, binding, event Recorder.

use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, ObjectReference, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use rstest::rstest;
use serde_json::{json, Value};

use crate::harness::Cluster;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
    .expect("pod")
}

fn binding(pod: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
           "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

fn reason(err: &kube::Error) -> Option<(u16, String)> {
    match err {
        kube::Error::Api(s) => Some((s.code, s.reason.clone())),
        _ => None,
    }
}

#[test]
fn typed_api_create_get_list_replace_patch_bind_delete() {
    let c = Cluster::start();
    let client = c.kube_client();
    c.block_on(async {
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).expect("node");
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("node created");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let created = pods
            .create(&PostParams::default(), &pod("a"))
            .await
            .expect("pod created");
        assert_eq!(
            created
                .spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref()),
            Some("default-scheduler")
        );
        let again = pods
            .create(&PostParams::default(), &pod("a"))
            .await
            .expect_err("exists");
        assert_eq!(reason(&again), Some((409, "AlreadyExists".to_string())));
        assert_eq!(
            pods.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .len(),
            1
        );

        let mut stale = created.clone();
        stale.metadata.resource_version = Some("1".to_string());
        let err = pods
            .replace("a", &PostParams::default(), &stale)
            .await
            .expect_err("stale");
        assert_eq!(reason(&err), Some((409, "Conflict".to_string())));

        let patched = pods
            .patch(
                "a",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
            )
            .await
            .expect("merge patch");
        assert_eq!(
            patched
                .metadata
                .labels
                .and_then(|l| l.get("app").cloned())
                .as_deref(),
            Some("web")
        );

        let status: Value = pods
            .create_subresource("binding", "a", &PostParams::default(), &binding("a", "n1"))
            .await
            .expect("bound");
        assert_eq!(status["status"], "Success");
        let bound = pods.get("a").await.expect("get");
        assert_eq!(bound.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
        let err = pods
            .create_subresource::<_, Value>(
                "binding",
                "a",
                &PostParams::default(),
                &binding("a", "n2"),
            )
            .await
            .expect_err("already bound");
        assert_eq!(reason(&err), Some((409, "Conflict".to_string())));

        // A bound pod is deleted gracefully: marked, then gone with grace period 0.
        let marked = pods
            .delete("a", &DeleteParams::default())
            .await
            .expect("marked")
            .left()
            .and_then(|p| p.metadata.deletion_grace_period_seconds);
        assert_eq!(marked, Some(30));
        assert!(pods.get_opt("a").await.expect("get_opt").is_some());
        let deleted = pods
            .delete("a", &DeleteParams::default().grace_period(0))
            .await
            .expect("deleted");
        assert!(deleted.is_left());
        assert!(pods.get_opt("a").await.expect("get_opt").is_none());
    });
}

#[rstest]
#[case::list_then_watch(watcher::Config::default())]
#[case::streaming_list(watcher::Config::default().streaming_lists())]
fn watcher_sees_an_unscheduled_pod_leave_when_bound(#[case] config: watcher::Config) {
    let c = Cluster::start();
    let client = c.kube_client();
    c.block_on(async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("before")).await.expect("created");
        let mut events = watcher(pods.clone(), config.fields("spec.nodeName=")).boxed();
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(10), events.try_next())
                .await
                .expect("an event within 10s")
                .expect("watch ok")
                .expect("stream open")
        };
        assert!(matches!(next().await, watcher::Event::Init));
        assert!(matches!(next().await, watcher::Event::InitApply(p) if p.metadata.name.as_deref() == Some("before")));
        assert!(matches!(next().await, watcher::Event::InitDone));
        pods.create(&PostParams::default(), &pod("after")).await.expect("created");
        assert!(matches!(next().await, watcher::Event::Apply(p) if p.metadata.name.as_deref() == Some("after")));
        let _: Value = pods
            .create_subresource("binding", "after", &PostParams::default(), &binding("after", "n1"))
            .await
            .expect("bound");
        assert!(matches!(next().await, watcher::Event::Delete(p) if p.metadata.name.as_deref() == Some("after")));
    });
}

#[test]
fn recorder_events_are_readable_as_core_events() {
    let c = Cluster::start();
    let client = c.kube_client();
    c.block_on(async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let p = pods
            .create(&PostParams::default(), &pod("a"))
            .await
            .expect("created");
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: p.metadata.name.clone(),
            namespace: p.metadata.namespace.clone(),
            uid: p.metadata.uid.clone(),
            ..Default::default()
        };
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "kubesched".into(),
                instance: None,
            },
        );
        let ev = Event {
            type_: EventType::Normal,
            reason: "Scheduled".into(),
            note: Some("Successfully assigned default/a to n1".into()),
            action: "Binding".into(),
            secondary: None,
        };
        recorder.publish(&ev, &reference).await.expect("published");
        // A repeat is a merge patch of the series.
        recorder
            .publish(&ev, &reference)
            .await
            .expect("published again");
        let core: Api<CoreEvent> = Api::namespaced(client, "default");
        let list = core
            .list(&ListParams::default().fields("involvedObject.name=a"))
            .await
            .expect("core events");
        assert_eq!(list.items.len(), 1);
        assert_eq!(
            list.items[0].message.as_deref(),
            Some("Successfully assigned default/a to n1")
        );
        assert_eq!(
            list.items[0].reporting_component.as_deref(),
            Some("kubesched")
        );
    });
}

#[test]
fn status_patches_merge_conditions_and_leases_use_optimistic_concurrency() {
    use k8s_openapi::api::coordination::v1::Lease;

    let c = Cluster::start();
    let client = c.kube_client();
    c.block_on(async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("a")).await.expect("created");
        // What a scheduler sends for an unschedulable pod, twice with different conditions.
        let unschedulable = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/1 nodes are available"}]}});
        pods.patch_status("a", &PatchParams::default(), &Patch::Strategic(unschedulable))
            .await
            .expect("status patched");
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}],
                                      "nominatedNodeName": "n1"}});
        let p = pods
            .patch_status("a", &PatchParams::default(), &Patch::Strategic(ready))
            .await
            .expect("status patched");
        let status = p.status.expect("status");
        let types: Vec<String> = status.conditions.unwrap_or_default().into_iter().map(|c| c.type_).collect();
        assert_eq!(types, ["PodScheduled", "Ready"]);
        assert_eq!(status.nominated_node_name.as_deref(), Some("n1"));

        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
        let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "kube-scheduler"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}}))
        .expect("lease");
        let created = leases.create(&PostParams::default(), &lease).await.expect("lease created");
        let mut mine = created.clone();
        mine.spec.get_or_insert_default().holder_identity = Some("b".into());
        leases.replace("kube-scheduler", &PostParams::default(), &mine).await.expect("took over");
        // A contender still holding the first resourceVersion loses.
        let mut late = created;
        late.spec.get_or_insert_default().holder_identity = Some("c".into());
        let err = leases.replace("kube-scheduler", &PostParams::default(), &late).await.expect_err("stale");
        assert_eq!(reason(&err), Some((409, "Conflict".to_string())));
        let again = leases.create(&PostParams::default(), &lease).await.expect_err("exists");
        assert_eq!(reason(&again), Some((409, "AlreadyExists".to_string())));
    });
}

/// kube-rs lists in pages of 500 and its watcher follows `continue` to the end.
#[test]
fn list_pages_and_the_watcher_see_more_than_500_pods() {
    let c = Cluster::start();
    c.seed_pods("default", 1201);
    let client = c.kube_client();
    let (first, watched) = c.block_on(async {
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let first = pods
            .list(&ListParams::default().limit(500))
            .await
            .expect("first page");
        let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
        let mut seen = 0;
        while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(20), events.try_next())
            .await
            .expect("in time")
        {
            match event {
                watcher::Event::InitApply(_) => seen += 1,
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        (first, seen)
    });
    assert_eq!(
        (
            first.items.len(),
            first.metadata.continue_.is_some(),
            first.metadata.remaining_item_count,
            watched
        ),
        (500, true, Some(701), 1201)
    );
}

/// A bound pod's nodeName cannot be changed by an update (only binding sets it): 422 with
/// one `FieldValueForbidden` cause on `spec`.
#[test]
fn replacing_a_bound_pods_node_name_is_invalid() {
    let c = Cluster::start();
    let client = c.kube_client();
    let (reason, causes) = c.block_on(async {
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let mut p = pod("a");
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = Some("n1".into());
        }
        let mut created = pods
            .create(&PostParams::default(), &p)
            .await
            .expect("created");
        if let Some(spec) = created.spec.as_mut() {
            spec.node_name = Some("n2".into());
        }
        let err = pods
            .replace("a", &PostParams::default(), &created)
            .await
            .expect_err("invalid");
        let causes = match &err {
            kube::Error::Api(s) => s
                .details
                .as_ref()
                .map(|d| {
                    d.causes
                        .iter()
                        .map(|c| (c.reason.clone(), c.field.clone()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        (reason(&err), causes)
    });
    assert_eq!(
        (reason, causes),
        (
            Some((422, "Invalid".to_string())),
            vec![("FieldValueForbidden".to_string(), "spec".to_string())]
        )
    );
}

//! The in-memory cluster applies writes as the API server would and delivers the updates.

use std::sync::{Arc, Mutex};

use framework::testing::make_pod;
use framework::{ClientError, Nomination, PodCondition, PodRef, PodStatusUpdate};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use rstest::rstest;

use super::MemoryCluster;
use crate::source::{Change, EventHandler, ObjectEvent};

/// Pod events as `(change, name, nominatedNodeName, terminating, [(condition, status)])`.
type Seen = (
    &'static str,
    String,
    Option<String>,
    bool,
    Vec<(String, String)>,
);

#[derive(Default)]
struct Recorder(Mutex<Vec<Seen>>);

impl EventHandler for Recorder {
    fn handle(&self, event: ObjectEvent) {
        let ObjectEvent::Pod(c) = event else { return };
        let kind = match &c {
            Change::Added(_) => "Added",
            Change::Updated { .. } => "Updated",
            Change::Deleted(_) => "Deleted",
        };
        let p = c.object();
        let status = p.status.clone().unwrap_or_default();
        let conditions = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.status))
            .collect();
        if let Ok(mut seen) = self.0.lock() {
            seen.push((
                kind,
                p.metadata.name.clone().unwrap_or_default(),
                status.nominated_node_name,
                p.metadata.deletion_timestamp.is_some(),
                conditions,
            ));
        }
    }

    fn synced(&self) {}
}

impl Recorder {
    fn take(&self) -> Vec<Seen> {
        self.0
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

/// A cluster holding `pods`, and what it delivers from now on.
fn cluster(pods: Vec<Pod>) -> (Arc<MemoryCluster>, Arc<Recorder>) {
    let c = MemoryCluster::new();
    let rec = Arc::new(Recorder::default());
    let handler: Arc<dyn EventHandler> = rec.clone();
    // The cluster holds the handler weakly; `rec`, the same allocation, keeps it alive.
    c.connect(Arc::downgrade(&handler));
    for p in pods {
        c.apply_pod(p);
    }
    rec.take();
    (c, rec)
}

fn pod_ref(name: &str) -> PodRef {
    PodRef {
        namespace: "default".into(),
        name: name.into(),
        uid: Some(format!("uid-{name}")),
    }
}

fn nominated(name: &str, node: &str) -> Pod {
    make_pod(name)
        .with(|p| {
            p.status = Some(PodStatus {
                nominated_node_name: Some(node.into()),
                ..Default::default()
            })
        })
        .obj()
}

fn unschedulable() -> Option<PodCondition> {
    Some(PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: "Unschedulable".into(),
        message: "0/1 nodes are available".into(),
    })
}

fn seen(name: &str, nnn: Option<&str>, conditions: &[(&str, &str)]) -> Vec<Seen> {
    vec![(
        "Updated",
        name.to_string(),
        nnn.map(String::from),
        false,
        conditions
            .iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect(),
    )]
}

#[rstest]
#[case::a_nomination_and_condition_are_set(
    make_pod("a").obj(),
    unschedulable(),
    Nomination::Set("n1".into()),
    Ok(()),
    seen("a", Some("n1"), &[("PodScheduled", "False")])
)]
#[case::a_condition_write_keeps_the_nomination(
    nominated("a", "n1"),
    unschedulable(),
    Nomination::Keep,
    Ok(()),
    seen("a", Some("n1"), &[("PodScheduled", "False")])
)]
#[case::a_nomination_is_cleared(
    nominated("a", "n1"),
    None,
    Nomination::Clear,
    Ok(()),
    seen("a", None, &[])
)]
#[case::a_write_that_changes_nothing_delivers_nothing(
    nominated("a", "n1"),
    None,
    Nomination::Set("n1".into()),
    Ok(()),
    vec![]
)]
#[case::a_pod_that_is_gone_is_not_found(
    make_pod("other").obj(),
    unschedulable(),
    Nomination::Keep,
    Err(ClientError::Api { code: 404, message: "pods \"a\" not found".into() }),
    vec![]
)]
fn status_writes_update_the_pod(
    #[case] pod: Pod,
    #[case] condition: Option<PodCondition>,
    #[case] nomination: Nomination,
    #[case] want: Result<(), ClientError>,
    #[case] want_seen: Vec<Seen>,
) {
    let (c, rec) = cluster(vec![pod]);
    let got = c.update_status_now(&PodStatusUpdate {
        pod: pod_ref("a"),
        condition,
        nomination,
    });
    assert_eq!((got, rec.take()), (want, want_seen));
}

#[test]
fn a_graceful_delete_marks_the_pod_until_its_termination_is_finished() {
    let (c, rec) = cluster(vec![make_pod("a").node("n1").obj()]);
    c.set_graceful_deletion(true);
    let first = c.delete_now(&pod_ref("a"));
    let again = c.delete_now(&pod_ref("a"));
    let marked = rec.take();
    let finished = c.finish_terminating();
    let gone = rec.take();
    let kinds: Vec<(&str, bool)> = marked
        .iter()
        .chain(&gone)
        .map(|(k, _, _, terminating, _)| (*k, *terminating))
        .collect();
    assert_eq!(
        (
            first,
            again,
            finished,
            kinds,
            c.pod("default", "a").is_some()
        ),
        (
            Ok(()),
            Ok(()),
            vec!["default/a".to_string()],
            vec![("Updated", true), ("Deleted", true)],
            false
        )
    );
}

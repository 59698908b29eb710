use std::sync::Arc;

use framework::testing::{make_node, make_pod, PodBuilder};
use framework::{
    ActionType, ClusterEvent, CycleState, EventObject, EventResource, PodInfo, QueueingHint,
    Snapshot, Status, StorageListers,
};
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, GCEPersistentDiskVolumeSource, ISCSIVolumeSource,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, RBDVolumeSource, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rstest::rstest;

use super::*;

// ---- objects ----------------------------------------------------------------------------

fn gce(pd_name: &str, read_only: bool) -> Volume {
    Volume {
        name: "gce".into(),
        gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
            pd_name: pd_name.into(),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn aws(volume_id: &str) -> Volume {
    Volume {
        name: "aws".into(),
        aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
            volume_id: volume_id.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn rbd(monitors: &[&str], pool: Option<&str>, image: &str, read_only: bool) -> Volume {
    Volume {
        name: "rbd".into(),
        rbd: Some(RBDVolumeSource {
            monitors: monitors.iter().map(|m| m.to_string()).collect(),
            pool: pool.map(str::to_string),
            image: image.into(),
            fs_type: Some("ext4".into()),
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn iscsi(iqn: &str, read_only: bool) -> Volume {
    Volume {
        name: "iscsi".into(),
        iscsi: Some(ISCSIVolumeSource {
            target_portal: "127.0.0.1:3260".into(),
            iqn: iqn.into(),
            fs_type: Some("ext4".into()),
            lun: 0,
            read_only: Some(read_only),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A volume of a kind the disk rules do not cover.
fn empty_dir() -> Volume {
    Volume {
        name: "volume with no restriction".into(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    }
}

fn with_volumes(name: &str, volumes: &[Volume]) -> PodBuilder {
    volumes
        .iter()
        .fold(make_pod(name), |p, v| p.volume(v.clone()))
}

fn claim(name: &str, mode: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![mode.into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Upstream's claims: two ReadWriteOncePod, one ReadWriteMany.
fn claims() -> Vec<PersistentVolumeClaim> {
    vec![
        claim("claim-with-rwop-1", "ReadWriteOncePod"),
        claim("claim-with-rwop-2", "ReadWriteOncePod"),
        claim("claim-with-rwx", "ReadWriteMany"),
    ]
}

/// A snapshot of node-1 running `running`, with `claims`.
fn snapshot(running: &[PodBuilder], claims: Vec<PersistentVolumeClaim>) -> Snapshot {
    let mut snap = Snapshot::new(
        vec![Arc::new(make_node("node-1").obj())],
        running.iter().map(|p| p.clone().node("node-1").info()),
    );
    let mut storage = StorageListers::default();
    for c in claims {
        let key = format!("default/{}", c.metadata.name.clone().unwrap_or_default());
        storage.persistent_volume_claims.insert(key, Arc::new(c));
    }
    snap.set_storage(Arc::new(storage));
    snap
}

/// PreFilter's status and, when it succeeds, Filter's on node-1.
fn run(pod: PodBuilder, snap: &Snapshot) -> (Status, Option<Status>) {
    let pod = PodInfo::new(Arc::new(pod.obj()));
    let mut state = CycleState::new();
    let (_, pre) = VolumeRestrictions.pre_filter(&mut state, &pod, snap);
    let filtered = pre.is_success().then(|| {
        let node = snap.get("node-1").expect("node-1 is in every snapshot");
        VolumeRestrictions.filter(&state, &pod, node)
    });
    (pre, filtered)
}

fn disk_conflict() -> Option<Status> {
    Some(Status::unschedulable(ERR_REASON_DISK_CONFLICT))
}

fn rwop_conflict() -> Option<Status> {
    Some(Status::unschedulable(
        ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    ))
}

// ---- in-tree disks ----------------------------------------------------------------------

const MONITORS_AB: &[&str] = &["a", "b"];
const MONITORS_CD: &[&str] = &["c", "d"];
const IQN_1: &str = "iqn.2016-12.server:storage.target01";
const IQN_2: &str = "iqn.2017-12.server:storage.target01";

/// Upstream's four disk tables (nothing, one state, same state, different state) plus the
/// read-only and overlap rules each kind has.
#[rstest]
#[case::nothing(&[], &[], Status::skip(), None)]
#[case::pod_without_volumes_next_to_a_gce_disk(&[], &[gce("foo", false)], Status::skip(), None)]
#[case::volume_without_restrictions(&[empty_dir()], &[gce("foo", false)], Status::skip(), None)]
#[case::gce_same_disk(&[gce("foo", false)], &[gce("foo", false)], Status::success(), disk_conflict())]
#[case::gce_different_disk(&[gce("bar", false)], &[gce("foo", false)], Status::success(), Some(Status::success()))]
#[case::gce_same_disk_both_read_only(&[gce("foo", true)], &[gce("foo", true)], Status::success(), Some(Status::success()))]
#[case::gce_same_disk_one_read_only(&[gce("foo", true)], &[gce("foo", false)], Status::success(), disk_conflict())]
#[case::pod_without_volumes_next_to_an_aws_disk(&[], &[aws("foo")], Status::skip(), None)]
#[case::aws_same_volume(&[aws("foo")], &[aws("foo")], Status::success(), disk_conflict())]
#[case::aws_different_volume(&[aws("bar")], &[aws("foo")], Status::success(), Some(Status::success()))]
#[case::pod_without_volumes_next_to_an_rbd_image(&[], &[rbd(MONITORS_AB, Some("foo"), "bar", false)], Status::skip(), None)]
#[case::rbd_same_image(&[rbd(MONITORS_AB, Some("foo"), "bar", false)], &[rbd(MONITORS_AB, Some("foo"), "bar", false)], Status::success(), disk_conflict())]
#[case::rbd_no_shared_monitor(&[rbd(MONITORS_CD, Some("foo"), "bar", false)], &[rbd(MONITORS_AB, Some("foo"), "bar", false)], Status::success(), Some(Status::success()))]
#[case::rbd_one_shared_monitor(&[rbd(&["b", "c"], Some("foo"), "bar", false)], &[rbd(MONITORS_AB, Some("foo"), "bar", false)], Status::success(), disk_conflict())]
#[case::rbd_other_pool(&[rbd(MONITORS_AB, Some("baz"), "bar", false)], &[rbd(MONITORS_AB, Some("foo"), "bar", false)], Status::success(), Some(Status::success()))]
#[case::rbd_unset_pool_is_the_default_pool(&[rbd(MONITORS_AB, None, "bar", false)], &[rbd(MONITORS_AB, Some("rbd"), "bar", false)], Status::success(), disk_conflict())]
#[case::rbd_other_image(&[rbd(MONITORS_AB, Some("foo"), "baz", false)], &[rbd(MONITORS_AB, Some("foo"), "bar", false)], Status::success(), Some(Status::success()))]
#[case::rbd_same_image_both_read_only(&[rbd(MONITORS_AB, Some("foo"), "bar", true)], &[rbd(MONITORS_AB, Some("foo"), "bar", true)], Status::success(), Some(Status::success()))]
#[case::pod_without_volumes_next_to_an_iscsi_disk(&[], &[iscsi(IQN_1, false)], Status::skip(), None)]
#[case::iscsi_same_iqn(&[iscsi(IQN_1, false)], &[iscsi(IQN_1, false)], Status::success(), disk_conflict())]
#[case::iscsi_different_iqn(&[iscsi(IQN_2, false)], &[iscsi(IQN_1, false)], Status::success(), Some(Status::success()))]
#[case::iscsi_same_iqn_both_read_only(&[iscsi(IQN_1, true)], &[iscsi(IQN_1, true)], Status::success(), Some(Status::success()))]
#[case::iscsi_same_iqn_one_read_only(&[iscsi(IQN_1, false)], &[iscsi(IQN_1, true)], Status::success(), disk_conflict())]
#[case::different_kinds_never_conflict(&[aws("foo")], &[gce("foo", false)], Status::success(), Some(Status::success()))]
fn disk_conflicts(
    #[case] pod_volumes: &[Volume],
    #[case] running_volumes: &[Volume],
    #[case] want_pre_filter: Status,
    #[case] want_filter: Option<Status>,
) {
    let snap = snapshot(&[with_volumes("running", running_volumes)], Vec::new());
    assert_eq!(
        run(with_volumes("pod", pod_volumes), &snap),
        (want_pre_filter, want_filter)
    );
}

// ---- ReadWriteOncePod -------------------------------------------------------------------

/// Upstream's access-mode table: the pod uses ReadWriteOncePod claims that pods on node-1
/// may already use.
#[rstest]
#[case::nothing(make_pod("pod"), &[], claims(), Status::skip(), None)]
#[case::failed_to_get_pvc(
    make_pod("pod").pvc("claim-with-rwop-1"),
    &[],
    Vec::new(),
    Status::unresolvable("persistentvolumeclaim \"claim-with-rwop-1\" not found"),
    None
)]
#[case::no_access_mode_conflict(
    make_pod("pod").pvc("claim-with-rwop-1"),
    &[make_pod("pod-with-rwx").pvc("claim-with-rwx")],
    claims(),
    Status::skip(),
    None
)]
#[case::access_mode_conflict_unschedulable(
    make_pod("pod").pvc("claim-with-rwop-1"),
    &[make_pod("pod-with-one-pvc").pvc("claim-with-rwop-1"), make_pod("pod-with-rwx").pvc("claim-with-rwx")],
    claims(),
    Status::success(),
    rwop_conflict()
)]
#[case::two_conflicts_unschedulable(
    make_pod("pod").pvc("claim-with-rwop-1").pvc("claim-with-rwop-2"),
    &[make_pod("pod-with-two-pvcs").pvc("claim-with-rwop-1").pvc("claim-with-rwop-2"), make_pod("pod-with-rwx").pvc("claim-with-rwx")],
    claims(),
    Status::success(),
    rwop_conflict()
)]
#[case::shared_read_write_many_claim_is_no_conflict(
    make_pod("pod").pvc("claim-with-rwx"),
    &[make_pod("pod-with-rwx").pvc("claim-with-rwx")],
    claims(),
    Status::skip(),
    None
)]
#[case::same_claim_name_in_another_namespace_is_no_conflict(
    make_pod("pod").pvc("claim-with-rwop-1"),
    &[make_pod("other").namespace("other").pvc("claim-with-rwop-1")],
    claims(),
    Status::skip(),
    None
)]
#[case::missing_claim_fails_even_without_read_write_once_pod(
    make_pod("pod").pvc("claim-with-rwx").pvc("gone"),
    &[],
    claims(),
    Status::unresolvable("persistentvolumeclaim \"gone\" not found"),
    None
)]
#[case::disk_conflict_is_reported_before_the_claim(
    make_pod("pod").pvc("claim-with-rwop-1").volume(aws("foo")),
    &[make_pod("pod-with-one-pvc").pvc("claim-with-rwop-1").volume(aws("foo"))],
    claims(),
    Status::success(),
    disk_conflict()
)]
fn access_mode_conflicts(
    #[case] pod: PodBuilder,
    #[case] running: &[PodBuilder],
    #[case] claims: Vec<PersistentVolumeClaim>,
    #[case] want_pre_filter: Status,
    #[case] want_filter: Option<Status>,
) {
    let snap = snapshot(running, claims);
    assert_eq!(run(pod, &snap), (want_pre_filter, want_filter));
}

/// Preemption's dry run: removing the user of the claim lets the pod pass Filter, adding a
/// user (a nominated pod) back makes it fail again.
#[test]
fn removing_the_user_frees_the_claim_and_adding_one_takes_it() {
    let user = make_pod("user").pvc("claim-with-rwop-1").node("node-1");
    let snap = snapshot(std::slice::from_ref(&user), claims());
    let pod = PodInfo::new(Arc::new(make_pod("pod").pvc("claim-with-rwop-1").obj()));
    let node = snap.get("node-1").expect("node-1 is in the snapshot");
    let mut state = CycleState::new();
    let (_, pre) = VolumeRestrictions.pre_filter(&mut state, &pod, &snap);
    let before = VolumeRestrictions.filter(&state, &pod, node);
    let removed = VolumeRestrictions.remove_pod(&mut state, &pod, &user.clone().info(), node);
    let after_remove = VolumeRestrictions.filter(&state, &pod, node);
    // A pod without the claim changes nothing.
    let unrelated = make_pod("unrelated").pvc("claim-with-rwx").info();
    let added_unrelated = VolumeRestrictions.add_pod(&mut state, &pod, &unrelated, node);
    let after_unrelated = VolumeRestrictions.filter(&state, &pod, node);
    let added = VolumeRestrictions.add_pod(&mut state, &pod, &user.info(), node);
    let after_add = VolumeRestrictions.filter(&state, &pod, node);
    assert_eq!(
        (
            pre,
            before,
            removed,
            after_remove,
            added_unrelated,
            after_unrelated,
            added,
            after_add
        ),
        (
            Status::success(),
            Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
            Status::success(),
            Status::success(),
            Status::success(),
            Status::success(),
            Status::success(),
            Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
        )
    );
}

#[test]
fn filter_and_extensions_without_pre_filter_state_are_errors() {
    let pod = PodInfo::new(Arc::new(make_pod("pod").pvc("claim-with-rwop-1").obj()));
    let other = make_pod("other").info();
    let node = make_node("node-1").info_with(&[]);
    let mut state = CycleState::new();
    let error = Status::error(ERR_NO_PRE_FILTER_STATE);
    assert_eq!(
        (
            VolumeRestrictions.filter(&state, &pod, &node),
            VolumeRestrictions.add_pod(&mut state, &pod, &other, &node),
            VolumeRestrictions.remove_pod(&mut state, &pod, &other, &node),
        ),
        (error.clone(), error.clone(), error)
    );
}

// ---- events and queueing hints ----------------------------------------------------------

#[test]
fn registers_upstreams_events() {
    let events: Vec<(ClusterEvent, bool)> = VolumeRestrictions
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                true
            ),
            (
                ClusterEvent::new(EventResource::Node, ActionType::ADD),
                false
            ),
            (
                ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
                true
            ),
        ]
    );
}

fn pod_obj(p: PodBuilder) -> Option<EventObject> {
    Some(EventObject::Pod(Arc::new(p.obj())))
}

fn node_obj() -> Option<EventObject> {
    Some(EventObject::Node(Arc::new(make_node("n").obj())))
}

/// Upstream's deleted-pod table (a conflicting disk of each kind queues, a different one
/// skips; the same claim queues, another skips) plus namespaces and wrong objects.
#[rstest]
#[case::queue_gce_disk_conflict(with_volumes("pod", &[gce("foo", false)]), pod_obj(with_volumes("deleted", &[gce("foo", false)])), Ok(QueueingHint::Queue))]
#[case::skip_gce_disk_no_conflict(with_volumes("pod", &[gce("foo", false)]), pod_obj(with_volumes("deleted", &[gce("bar", false)])), Ok(QueueingHint::QueueSkip))]
#[case::queue_aws_disk_conflict(with_volumes("pod", &[aws("foo")]), pod_obj(with_volumes("deleted", &[aws("foo")])), Ok(QueueingHint::Queue))]
#[case::skip_aws_disk_no_conflict(with_volumes("pod", &[aws("foo")]), pod_obj(with_volumes("deleted", &[aws("bar")])), Ok(QueueingHint::QueueSkip))]
#[case::queue_rbd_disk_conflict(with_volumes("pod", &[rbd(MONITORS_AB, Some("foo"), "bar", false)]), pod_obj(with_volumes("deleted", &[rbd(MONITORS_AB, Some("foo"), "bar", false)])), Ok(QueueingHint::Queue))]
#[case::skip_rbd_disk_no_conflict(with_volumes("pod", &[rbd(MONITORS_AB, Some("foo"), "bar", false)]), pod_obj(with_volumes("deleted", &[rbd(MONITORS_CD, Some("foo"), "bar", false)])), Ok(QueueingHint::QueueSkip))]
#[case::queue_iscsi_disk_conflict(with_volumes("pod", &[iscsi(IQN_1, false)]), pod_obj(with_volumes("deleted", &[iscsi(IQN_1, false)])), Ok(QueueingHint::Queue))]
#[case::skip_iscsi_disk_no_conflict(with_volumes("pod", &[iscsi(IQN_1, false)]), pod_obj(with_volumes("deleted", &[iscsi(IQN_2, false)])), Ok(QueueingHint::QueueSkip))]
#[case::queue_has_same_claim(make_pod("pod1").pvc("claim-rwop"), pod_obj(make_pod("pod2").pvc("claim-rwop")), Ok(QueueingHint::Queue))]
#[case::skip_no_same_claim(make_pod("pod1").pvc("claim-1-rwop"), pod_obj(make_pod("pod2").pvc("claim-2-rwop")), Ok(QueueingHint::QueueSkip))]
#[case::skip_same_claim_name_in_another_namespace(make_pod("pod1").pvc("claim-rwop"), pod_obj(make_pod("pod2").namespace("other").pvc("claim-rwop")), Ok(QueueingHint::QueueSkip))]
#[case::skip_pod_without_volumes_deleted(make_pod("pod1").pvc("claim-rwop"), pod_obj(make_pod("pod2")), Ok(QueueingHint::QueueSkip))]
#[case::wrong_old_object(make_pod("pod1").pvc("claim-rwop"), node_obj(), Err("expected the deleted Pod, but got Node".to_string()))]
#[case::no_old_object(make_pod("pod1").pvc("claim-rwop"), None, Err("expected the deleted Pod, but got nothing".to_string()))]
fn assigned_pod_deleted_hint(
    #[case] pod: PodBuilder,
    #[case] deleted: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        is_schedulable_after_assigned_pod_deleted(&pod.obj(), deleted.as_ref(), None),
        want
    );
}

fn claim_obj(ns: &str, name: &str) -> Option<EventObject> {
    let mut c = claim(name, "ReadWriteMany");
    c.metadata.namespace = Some(ns.into());
    Some(EventObject::PersistentVolumeClaim(Arc::new(c)))
}

/// Upstream's claim-added table plus wrong objects.
#[rstest]
#[case::queue_new_object_pvc_belong_pod(make_pod("pod").pvc("claim-with-rwx-1").pvc("claim-with-rwx-2"), claim_obj("default", "claim-with-rwx-1"), Ok(QueueingHint::Queue))]
#[case::skip_new_object_unused(make_pod("pod").pvc("claim-with-rwx-1"), claim_obj("default", "claim-with-rwx-2"), Ok(QueueingHint::QueueSkip))]
#[case::skip_new_object_namespace_not_equal_pod(make_pod("pod").namespace("kube-system").pvc("claim-with-rwx-1"), claim_obj("default", "claim-with-rwx-1"), Ok(QueueingHint::QueueSkip))]
#[case::skip_pod_without_claims(
    make_pod("pod"),
    claim_obj("default", "claim-with-rwx-1"),
    Ok(QueueingHint::QueueSkip)
)]
#[case::wrong_new_object(make_pod("pod").pvc("claim-with-rwx-1"), node_obj(), Err("expected PersistentVolumeClaim, but got Node".to_string()))]
#[case::no_new_object(make_pod("pod").pvc("claim-with-rwx-1"), None, Err("expected PersistentVolumeClaim, but got nothing".to_string()))]
fn claim_added_hint(
    #[case] pod: PodBuilder,
    #[case] added: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        is_schedulable_after_persistent_volume_claim_added(&pod.obj(), None, added.as_ref()),
        want
    );
}

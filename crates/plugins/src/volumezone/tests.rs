use std::collections::HashMap;
use std::sync::Arc;

use framework::testing::make_node;
use framework::{
    ActionType, ClusterEvent, CycleState, EventObject, EventResource, PodInfo, QueueingHint,
    Snapshot, Status, StorageListers,
};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rstest::rstest;

use super::*;

const BETA_ZONE: &str = LABEL_FAILURE_DOMAIN_BETA_ZONE;
const BETA_REGION: &str = LABEL_FAILURE_DOMAIN_BETA_REGION;
const ZONE: &str = LABEL_TOPOLOGY_ZONE;
const REGION: &str = LABEL_TOPOLOGY_REGION;

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn pv(name: &str, labels: &[(&str, &str)]) -> PersistentVolume {
    PersistentVolume {
        metadata: meta(name, labels),
        ..Default::default()
    }
}

/// A claim in `default`, bound to `volume` (empty: unbound) and asking for `class`.
fn pvc(name: &str, volume: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut m = meta(name, &[]);
    m.namespace = Some("default".into());
    PersistentVolumeClaim {
        metadata: m,
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: (!volume.is_empty()).then(|| volume.to_string()),
            storage_class_name: class.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn class(name: &str, mode: Option<&str>) -> StorageClass {
    StorageClass {
        metadata: meta(name, &[]),
        provisioner: "p".into(),
        volume_binding_mode: mode.map(str::to_string),
        ..Default::default()
    }
}

/// A pod in `default` with one volume per claim name.
fn pod_with_claims(claims: &[&str]) -> Pod {
    let mut pod = framework::testing::make_pod("pod_1")
        .namespace("default")
        .obj();
    let volumes = claims
        .iter()
        .enumerate()
        .map(|(i, c)| Volume {
            name: format!("v{i}"),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: c.to_string(),
                read_only: None,
            }),
            ..Default::default()
        })
        .collect::<Vec<_>>();
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = (!volumes.is_empty()).then_some(volumes);
    }
    pod
}

/// The volumes, claims and classes of upstream's single-zone, multi-zone and binding tables.
fn storage() -> Snapshot {
    let mut s = StorageListers::default();
    for v in [
        pv("Vol_1", &[(BETA_ZONE, "us-west1-a")]),
        pv(
            "Vol_2",
            &[(BETA_REGION, "us-west1"), ("uselessLabel", "none")],
        ),
        pv("Vol_3", &[(BETA_ZONE, "us-west1-c__us-west1-a")]),
        pv("Vol_Stable_1", &[(ZONE, "us-west1-a")]),
        pv(
            "Vol_Stable_2",
            &[(REGION, "us-west1"), ("uselessLabel", "none")],
        ),
        pv(
            "Vol_Stable_3",
            &[(ZONE, "us-west1-a"), (REGION, "us-west1-a")],
        ),
        pv("Vol_Stable_Multi", &[(ZONE, "us-west1-c__us-west1-a")]),
        pv("Vol_Bad_Value", &[(ZONE, "us-west1-c____us-west1-a")]),
    ] {
        s.persistent_volumes
            .insert(v.metadata.name.clone().unwrap_or_default(), Arc::new(v));
    }
    for c in [
        pvc("PVC_1", "Vol_1", None),
        pvc("PVC_2", "Vol_2", None),
        pvc("PVC_3", "Vol_3", None),
        pvc("PVC_4", "Vol_not_exist", None),
        pvc("PVC_Stable_1", "Vol_Stable_1", None),
        pvc("PVC_Stable_2", "Vol_Stable_2", None),
        pvc("PVC_Stable_3", "Vol_Stable_3", None),
        pvc("PVC_Stable_Multi", "Vol_Stable_Multi", None),
        pvc("PVC_Bad_Value", "Vol_Bad_Value", None),
        pvc("PVC_NoSC", "", Some("Class_0")),
        pvc("PVC_EmptySC", "", None),
        pvc("PVC_WaitSC", "", Some("Class_Wait")),
        pvc("PVC_ImmediateSC", "", Some("Class_Immediate")),
        pvc("PVC_NoModeSC", "", Some("Class_NoMode")),
    ] {
        let key = format!("default/{}", c.metadata.name.clone().unwrap_or_default());
        s.persistent_volume_claims.insert(key, Arc::new(c));
    }
    for c in [
        class("Class_Wait", Some("WaitForFirstConsumer")),
        class("Class_Immediate", Some("Immediate")),
        class("Class_NoMode", None),
    ] {
        s.storage_classes
            .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
    }
    let mut snap = Snapshot::default();
    snap.set_storage(Arc::new(s));
    snap
}

fn conflict() -> Status {
    Status::unresolvable(ERR_REASON_CONFLICT)
}

#[rstest]
#[case::pod_without_volume_skips(&[], &[(BETA_ZONE, "us-west1-a")], Status::skip(), None)]
#[case::node_without_labels(&["PVC_1"], &[], Status::success(), Some(Status::success()))]
#[case::beta_zone_label_matched(&["PVC_1"], &[(BETA_ZONE, "us-west1-a"), ("uselessLabel", "none")], Status::success(), Some(Status::success()))]
#[case::beta_region_label_matched(&["PVC_2"], &[(BETA_REGION, "us-west1"), ("uselessLabel", "none")], Status::success(), Some(Status::success()))]
#[case::beta_region_label_does_not_match(&["PVC_2"], &[(BETA_REGION, "no_us-west1"), ("uselessLabel", "none")], Status::success(), Some(conflict()))]
#[case::beta_zone_label_does_not_match(&["PVC_1"], &[(BETA_ZONE, "no_us-west1-a"), ("uselessLabel", "none")], Status::success(), Some(conflict()))]
#[case::zone_label_matched(&["PVC_Stable_1"], &[(ZONE, "us-west1-a"), ("uselessLabel", "none")], Status::success(), Some(Status::success()))]
#[case::region_label_matched(&["PVC_Stable_2"], &[(REGION, "us-west1"), ("uselessLabel", "none")], Status::success(), Some(Status::success()))]
#[case::region_label_does_not_match(&["PVC_Stable_2"], &[(REGION, "no_us-west1"), ("uselessLabel", "none")], Status::success(), Some(conflict()))]
#[case::zone_label_does_not_match(&["PVC_Stable_1"], &[(ZONE, "no_us-west1-a"), ("uselessLabel", "none")], Status::success(), Some(conflict()))]
#[case::pv_with_zone_and_region_node_with_only_zone(&["PVC_Stable_3"], &[(ZONE, "us-west1-a")], Status::success(), Some(conflict()))]
#[case::pv_with_ga_zone_node_with_beta_zone(&["PVC_Stable_1"], &[(BETA_ZONE, "us-west1-a")], Status::success(), Some(conflict()))]
#[case::pv_with_beta_zone_node_with_ga_zone_matched(&["PVC_1"], &[(ZONE, "us-west1-a")], Status::success(), Some(Status::success()))]
#[case::pv_with_beta_zone_node_with_ga_zone_does_not_match(&["PVC_1"], &[(ZONE, "us-west1-b")], Status::success(), Some(conflict()))]
#[case::multi_zone_beta_value_matched(&["PVC_3"], &[(BETA_ZONE, "us-west1-a"), ("uselessLabel", "none")], Status::success(), Some(Status::success()))]
#[case::multi_zone_node_without_labels(&["PVC_3"], &[], Status::success(), Some(Status::success()))]
#[case::multi_zone_beta_value_does_not_match(&["PVC_1"], &[(BETA_ZONE, "us-west1-b")], Status::success(), Some(conflict()))]
#[case::multi_zone_ga_value_matched(&["PVC_Stable_Multi"], &[(ZONE, "us-west1-a")], Status::success(), Some(Status::success()))]
#[case::multi_zone_ga_value_does_not_match(&["PVC_Stable_1"], &[(ZONE, "us-west1-b")], Status::success(), Some(conflict()))]
#[case::unparsable_zone_value_is_ignored(&["PVC_Bad_Value"], &[(ZONE, "elsewhere")], Status::skip(), None)]
#[case::every_claim_must_match(&["PVC_1", "PVC_Stable_2"], &[(ZONE, "us-west1-a"), (REGION, "elsewhere")], Status::success(), Some(conflict()))]
#[case::bound_claim_matched_with_binding_table_node(&["PVC_1"], &[(BETA_ZONE, "us-west1-a"), ("uselessLabel", "none")], Status::success(), Some(Status::success()))]
#[case::unbound_claim_without_class(&["PVC_EmptySC"], &[(BETA_ZONE, "us-west1-a")], Status::unresolvable("PersistentVolumeClaim had no pv name and storageClass name"), None)]
#[case::unbound_claim_of_missing_class(&["PVC_NoSC"], &[(BETA_ZONE, "us-west1-a")], Status::unresolvable("storageclass.storage.k8s.io \"Class_0\" not found"), None)]
#[case::unbound_claim_of_class_without_binding_mode(&["PVC_NoModeSC"], &[(BETA_ZONE, "us-west1-a")], Status::unresolvable("VolumeBindingMode not set for StorageClass \"Class_NoMode\""), None)]
#[case::unbound_claim_of_immediate_class(&["PVC_ImmediateSC"], &[(BETA_ZONE, "us-west1-a")], Status::unresolvable("PersistentVolume had no name"), None)]
#[case::unbound_claim_of_wait_for_first_consumer_class_skips(&["PVC_WaitSC"], &[(BETA_ZONE, "us-west1-a")], Status::skip(), None)]
#[case::missing_claim(&["PVC_nope"], &[(ZONE, "us-west1-a")], Status::unresolvable("persistentvolumeclaim \"PVC_nope\" not found"), None)]
#[case::claim_without_name(&[""], &[(ZONE, "us-west1-a")], Status::unresolvable("PersistentVolumeClaim had no name"), None)]
#[case::claim_bound_to_missing_volume(&["PVC_4"], &[(ZONE, "us-west1-a")], Status::unresolvable("persistentvolume \"Vol_not_exist\" not found"), None)]
fn pre_filter_then_filter(
    #[case] claims: &[&str],
    #[case] node_labels: &[(&str, &str)],
    #[case] want_pre_filter: Status,
    #[case] want_filter: Option<Status>,
) {
    let pod = PodInfo::new(Arc::new(pod_with_claims(claims)));
    let mut node = make_node("host1");
    for (k, v) in node_labels {
        node = node.label(k, v);
    }
    let node = node.info_with(&[]);
    let mut state = CycleState::new();
    let (_, got) = VolumeZone.pre_filter(&mut state, &pod, &storage());
    assert_eq!(got, want_pre_filter);
    let filtered = got
        .is_success()
        .then(|| VolumeZone.filter(&state, &pod, &node));
    assert_eq!(filtered, want_filter);
}

#[test]
fn filter_without_pre_filter_state_is_an_error() {
    let pod = PodInfo::new(Arc::new(pod_with_claims(&["PVC_1"])));
    let node = make_node("host1").label(ZONE, "us-west1-a").info_with(&[]);
    assert_eq!(
        VolumeZone.filter(&CycleState::new(), &pod, &node),
        Status::error(ERR_NO_PRE_FILTER_STATE)
    );
}

#[test]
fn registers_upstreams_events() {
    let events: Vec<(ClusterEvent, bool)> = VolumeZone
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                ClusterEvent::new(EventResource::StorageClass, ActionType::ADD),
                true
            ),
            (
                ClusterEvent::new(
                    EventResource::Node,
                    ActionType::ADD | ActionType::UPDATE_NODE_LABEL
                ),
                false
            ),
            (
                ClusterEvent::new(
                    EventResource::PersistentVolumeClaim,
                    ActionType::ADD | ActionType::UPDATE
                ),
                true
            ),
            (
                ClusterEvent::new(
                    EventResource::PersistentVolume,
                    ActionType::ADD | ActionType::UPDATE
                ),
                true
            ),
        ]
    );
}

fn claim_obj(ns: &str, name: &str, volume: &str) -> Option<EventObject> {
    let mut c = pvc(name, volume, None);
    c.metadata.namespace = Some(ns.into());
    Some(EventObject::PersistentVolumeClaim(Arc::new(c)))
}

fn node_obj() -> Option<EventObject> {
    Some(EventObject::Node(Arc::new(make_node("n").obj())))
}

#[rstest]
#[case::wrong_new_object(&["PVC_1"], None, node_obj(), Err("expected PersistentVolumeClaim, but got Node".to_string()))]
#[case::claim_added_but_pod_has_no_claims(&[], None, claim_obj("default", "PVC_1", "Vol_1"), Ok(QueueingHint::QueueSkip))]
#[case::claim_added_but_pod_uses_another(&["PVC_2"], None, claim_obj("default", "PVC_1", "Vol_1"), Ok(QueueingHint::QueueSkip))]
#[case::claim_added_in_another_namespace(&["PVC_1"], None, claim_obj("ns1", "PVC_1", "Vol_1"), Ok(QueueingHint::QueueSkip))]
#[case::claim_of_the_pod_added(&["PVC_1"], None, claim_obj("default", "PVC_1", "Vol_1"), Ok(QueueingHint::Queue))]
#[case::claim_of_the_pod_updated(&["PVC_1"], claim_obj("default", "PVC_1", ""), claim_obj("default", "PVC_1", "Vol_1"), Ok(QueueingHint::Queue))]
#[case::claim_updated_but_pod_has_no_claims(&[], claim_obj("default", "PVC_1", ""), claim_obj("default", "PVC_1", "Vol_1"), Ok(QueueingHint::QueueSkip))]
fn claim_change_hint(
    #[case] claims: &[&str],
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pod = pod_with_claims(claims);
    assert_eq!(
        is_schedulable_after_claim_change(&pod, old.as_ref(), new.as_ref()),
        want
    );
}

fn class_obj(mode: Option<&str>) -> Option<EventObject> {
    Some(EventObject::StorageClass(Arc::new(class("SC_1", mode))))
}

#[rstest]
#[case::wrong_new_object(node_obj(), Err("expected StorageClass, but got Node".to_string()))]
#[case::class_without_binding_mode(class_obj(None), Ok(QueueingHint::QueueSkip))]
#[case::immediate_class(class_obj(Some("Immediate")), Ok(QueueingHint::QueueSkip))]
#[case::wait_for_first_consumer_class(
    class_obj(Some("WaitForFirstConsumer")),
    Ok(QueueingHint::Queue)
)]
fn storage_class_added_hint(
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pod = pod_with_claims(&["PVC_1"]);
    assert_eq!(
        is_schedulable_after_storage_class_added(&pod, None, new.as_ref()),
        want
    );
}

fn volume_obj(labels: &[(&str, &str)]) -> Option<EventObject> {
    Some(EventObject::PersistentVolume(Arc::new(pv("Vol_1", labels))))
}

#[rstest]
#[case::wrong_new_object(None, node_obj(), Err("expected PersistentVolume, but got Node".to_string()))]
#[case::wrong_old_object(node_obj(), volume_obj(&[]), Err("expected PersistentVolume, but got Node".to_string()))]
#[case::volume_added(None, volume_obj(&[(BETA_ZONE, "us-west1-b")]), Ok(QueueingHint::Queue))]
#[case::volume_topology_changed(volume_obj(&[(BETA_ZONE, "us-west1-a")]), volume_obj(&[(BETA_ZONE, "us-west1-b")]), Ok(QueueingHint::Queue))]
#[case::volume_topology_label_added(volume_obj(&[(BETA_ZONE, "us-west1-a")]), volume_obj(&[(BETA_ZONE, "us-west1-a"), (ZONE, "zone")]), Ok(QueueingHint::Queue))]
#[case::volume_updated_topology_unchanged(volume_obj(&[(BETA_ZONE, "us-west1-a"), (ZONE, "zone")]), volume_obj(&[(BETA_ZONE, "us-west1-a"), (ZONE, "zone"), ("other", "x")]), Ok(QueueingHint::QueueSkip))]
fn volume_change_hint(
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pod = pod_with_claims(&["PVC_1"]);
    assert_eq!(
        is_schedulable_after_volume_change(&pod, old.as_ref(), new.as_ref()),
        want
    );
}

#[test]
fn zone_values_split_on_double_underscore_and_trim() {
    let got: HashMap<&str, Option<Vec<String>>> = [
        ("a", label_zones_to_set("a")),
        ("a__b", label_zones_to_set("a__b")),
        (" a __ b ", label_zones_to_set(" a __ b ")),
        ("a____b", label_zones_to_set("a____b")),
        ("", label_zones_to_set("")),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.map(|s| s.into_iter().collect())))
    .collect();
    let want: HashMap<&str, Option<Vec<String>>> = [
        ("a", Some(vec!["a".to_string()])),
        ("a__b", Some(vec!["a".to_string(), "b".to_string()])),
        (" a __ b ", Some(vec!["a".to_string(), "b".to_string()])),
        ("a____b", None),
        ("", None),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);
}

#[rstest]
#[case::zone_matches(&["PVC_Stable_1"], &[(ZONE, "us-west1-a")], vec![])]
#[case::node_without_topology_labels(&["PVC_Stable_1"], &[], vec![])]
#[case::other_zone(
    &["PVC_Stable_1"], &[(ZONE, "us-west1-b")],
    vec![("default/PVC_Stable_1", "bound volume Vol_Stable_1 is in topology.kubernetes.io/zone us-west1-a, node host1 is in us-west1-b")]
)]
#[case::node_without_the_volumes_label(
    &["PVC_Stable_3"], &[(ZONE, "us-west1-a")],
    vec![("default/PVC_Stable_3", "bound volume Vol_Stable_3 is in topology.kubernetes.io/region us-west1-a, node host1 has no such label")]
)]
#[case::beta_label_against_the_nodes_ga_label_multi_zone(
    &["PVC_3", "PVC_1"], &[(ZONE, "us-west1-b")],
    vec![
        ("default/PVC_3", "bound volume Vol_3 is in failure-domain.beta.kubernetes.io/zone us-west1-a or us-west1-c, node host1 is in us-west1-b"),
        ("default/PVC_1", "bound volume Vol_1 is in failure-domain.beta.kubernetes.io/zone us-west1-a, node host1 is in us-west1-b"),
    ]
)]
fn filter_rejections_are_explained_per_claim(
    #[case] claims: &[&str],
    #[case] node_labels: &[(&str, &str)],
    #[case] want: Vec<(&str, &str)>,
) {
    let pod = PodInfo::new(Arc::new(pod_with_claims(claims)));
    let mut node = make_node("host1");
    for (k, v) in node_labels {
        node = node.label(k, v);
    }
    let mut state = CycleState::new();
    let _ = VolumeZone.pre_filter(&mut state, &pod, &storage());
    let got = explain_filter(&state, &node.obj());
    let got: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.claim.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(got, want);
}

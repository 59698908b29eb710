use std::collections::BTreeMap;
use std::sync::Arc;

use framework::handle::NoopClient;
use framework::testing::{make_node, make_pod};
use framework::{
    ClientError, ClusterClient, CycleState, EventObject, NodeInfo, PodInfo, QueueingHint, Snapshot,
    Status, StorageListers,
};
use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, TopologySelectorLabelRequirement, TopologySelectorTerm, Volume,
    VolumeNodeAffinity, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec, CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as V1LabelSelector, ObjectMeta, OwnerReference, Time,
};
use rstest::rstest;

use super::args::VolumeBindingArgs;
use super::assume_cache::{AssumeCache, AssumeError};
use super::binder::{
    find_pod_volumes, CapacityInfo, PodVolumeClaims, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE, ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST,
};
use super::*;

const WAIT: &str = "wait-sc";
const IMMEDIATE: &str = "immediate-sc";
const PROVISION: &str = "provision-sc";
const TOPOLOGY: &str = "topology-sc";
const NO_MODE: &str = "no-mode-sc";
const GIB: i64 = 1 << 30;

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        resource_version: Some("1".into()),
        ..Default::default()
    }
}

fn class(name: &str, mode: Option<&str>, provisioner: &str) -> StorageClass {
    StorageClass {
        metadata: meta(name),
        provisioner: provisioner.into(),
        volume_binding_mode: mode.map(str::to_string),
        ..Default::default()
    }
}

/// An Available volume of `class` with `gib` GiB, optionally only on nodes with `foo=<value>`.
fn pv(name: &str, class: &str, gib: i64, node_foo: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        metadata: meta(name),
        spec: Some(PersistentVolumeSpec {
            storage_class_name: Some(class.into()),
            capacity: Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity(format!("{gib}Gi")),
            )])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            node_affinity: node_foo.map(|v| VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "foo".into(),
                            operator: "In".into(),
                            values: Some(vec![v.into()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some("Available".into()),
            ..Default::default()
        }),
    }
}

/// `pv` bound to the claim `pvc-<claim>` of `default`.
fn bound_pv(name: &str, class: &str, claim: &str) -> PersistentVolume {
    let mut v = pv(name, class, 10, None);
    if let Some(s) = v.spec.as_mut() {
        s.claim_ref = Some(ObjectReference {
            namespace: Some("default".into()),
            name: Some(claim.into()),
            uid: Some(format!("uid-{claim}")),
            ..Default::default()
        });
    }
    if let Some(s) = v.status.as_mut() {
        s.phase = Some("Bound".into());
    }
    v
}

/// A claim in `default` asking `gib` GiB of `class`, ReadWriteOnce.
fn pvc(name: &str, class: &str, gib: i64) -> PersistentVolumeClaim {
    let mut m = meta(name);
    m.namespace = Some("default".into());
    m.uid = Some(format!("uid-{name}"));
    PersistentVolumeClaim {
        metadata: m,
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: Some(class.into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(format!("{gib}Gi")),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// `pvc` bound to `volume` by the PV controller.
fn bound_pvc(name: &str, class: &str, volume: &str) -> PersistentVolumeClaim {
    let mut c = pvc(name, class, 10);
    if let Some(s) = c.spec.as_mut() {
        s.volume_name = Some(volume.into());
    }
    c.metadata.annotations = Some(BTreeMap::from([(
        ANN_BIND_COMPLETED.to_string(),
        "yes".to_string(),
    )]));
    c.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Bound".into()),
        ..Default::default()
    });
    c
}

fn with_volume(mut c: PersistentVolumeClaim, volume: &str) -> PersistentVolumeClaim {
    if let Some(s) = c.spec.as_mut() {
        s.volume_name = Some(volume.into());
    }
    c
}

/// A pod `pod-a` in `default` with one volume per claim.
fn pod_with_claims(claims: &[&str]) -> Pod {
    let mut pod = make_pod("pod-a").obj();
    let volumes = claims
        .iter()
        .enumerate()
        .map(|(i, c)| Volume {
            name: format!("vol-{i}"),
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

/// A pod `pod-a` with one generic ephemeral volume `scratch` (claim `pod-a-scratch`).
fn pod_with_ephemeral() -> Pod {
    let mut pod = make_pod("pod-a").obj();
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = Some(vec![Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        }]);
    }
    pod
}

fn node(name: &str, foo: &str) -> Arc<Node> {
    Arc::new(make_node(name).label("foo", foo).obj())
}

fn storage(
    pvs: Vec<PersistentVolume>,
    pvcs: Vec<PersistentVolumeClaim>,
    classes: Vec<StorageClass>,
) -> StorageListers {
    let mut s = StorageListers::default();
    for v in pvs {
        s.persistent_volumes
            .insert(v.metadata.name.clone().unwrap_or_default(), Arc::new(v));
    }
    for c in pvcs {
        s.persistent_volume_claims.insert(
            format!("default/{}", c.metadata.name.clone().unwrap_or_default()),
            Arc::new(c),
        );
    }
    for c in classes {
        s.storage_classes
            .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
    }
    s
}

fn default_classes() -> Vec<StorageClass> {
    let mut topology = class(TOPOLOGY, Some("WaitForFirstConsumer"), "example.com/csi");
    topology.allowed_topologies = Some(vec![TopologySelectorTerm {
        match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
            key: "foo".into(),
            values: vec!["barbar".into()],
        }]),
    }]);
    vec![
        class(
            WAIT,
            Some("WaitForFirstConsumer"),
            NOT_SUPPORTED_PROVISIONER,
        ),
        class(IMMEDIATE, Some("Immediate"), NOT_SUPPORTED_PROVISIONER),
        class(PROVISION, Some("WaitForFirstConsumer"), "example.com/csi"),
        class(NO_MODE, None, "example.com/csi"),
        topology,
    ]
}

use super::binder::NOT_SUPPORTED_PROVISIONER;

fn plugin() -> VolumeBinding {
    VolumeBinding::from_args(&VolumeBindingArgs::default(), None, Arc::new(NoopClient))
}

fn snapshot(nodes: &[Arc<Node>], s: StorageListers) -> Snapshot {
    let mut snap = Snapshot::new(nodes.to_vec(), Vec::<Arc<PodInfo>>::new());
    snap.set_storage(Arc::new(s));
    snap
}

/// What the plugin says about `pod`: PreFilter's status, then Filter's status and Score's
/// score on each node (in `nodes` order) when PreFilter passed.
fn check(
    pl: &VolumeBinding,
    pod: Pod,
    nodes: &[Arc<Node>],
    s: StorageListers,
) -> (Status, Vec<(Status, i64)>, CycleState) {
    let snap = snapshot(nodes, s);
    let pod = PodInfo::new(Arc::new(pod));
    let mut state = CycleState::new();
    let (_, pre) = pl.pre_filter(&mut state, &pod, &snap);
    if !pre.is_success() {
        return (pre, Vec::new(), state);
    }
    let infos: Vec<Arc<NodeInfo>> = nodes
        .iter()
        .map(|n| Arc::new(NodeInfo::new(n.clone())))
        .collect();
    let filtered: Vec<Status> = infos.iter().map(|n| pl.filter(&state, &pod, n)).collect();
    let pre_score = pl.pre_score(&mut state, &pod, &snap, &infos);
    let out = infos
        .iter()
        .zip(filtered)
        .map(|(n, f)| {
            let score = if pre_score.is_success() && f.is_success() {
                pl.score(&state, &pod, n).unwrap_or(-1)
            } else {
                0
            };
            (f, score)
        })
        .collect();
    (pre, out, state)
}

fn unresolvable(reasons: &[&'static str]) -> Status {
    Status::with_reasons(Code::UnschedulableAndUnresolvable, reasons.iter().copied())
}

#[rstest]
#[case::pod_without_claims_is_skipped(
    pod_with_claims(&[]),
    storage(vec![], vec![], vec![]),
    Status::skip(),
    vec![]
)]
#[case::all_bound(
    pod_with_claims(&["pvc-a"]),
    storage(vec![bound_pv("pv-a", WAIT, "pvc-a")], vec![bound_pvc("pvc-a", WAIT, "pv-a")], default_classes()),
    Status::success(),
    vec![(Status::success(), 0)]
)]
#[case::missing_claim(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![], default_classes()),
    Status::unresolvable("persistentvolumeclaim \"pvc-a\" not found"),
    vec![]
)]
#[case::part_of_claims_missing(
    pod_with_claims(&["pvc-a", "pvc-b"]),
    storage(vec![bound_pv("pv-a", WAIT, "pvc-a")], vec![bound_pvc("pvc-a", WAIT, "pv-a")], default_classes()),
    Status::unresolvable("persistentvolumeclaim \"pvc-b\" not found"),
    vec![]
)]
#[case::missing_ephemeral_claim_waits_for_its_controller(
    pod_with_ephemeral(),
    storage(vec![], vec![], default_classes()),
    Status::unresolvable("waiting for ephemeral volume controller to create the persistentvolumeclaim \"pod-a-scratch\""),
    vec![]
)]
#[case::ephemeral_claim_of_another_pod(
    pod_with_ephemeral(),
    storage(vec![], vec![pvc("pod-a-scratch", PROVISION, 1)], default_classes()),
    Status::unresolvable("PVC default/pod-a-scratch was not created for pod default/pod-a (pod is not owner)"),
    vec![]
)]
#[case::ephemeral_claim_of_the_pod_is_provisioned(
    pod_with_ephemeral(),
    storage(vec![], vec![owned_by_pod(pvc("pod-a-scratch", PROVISION, 1))], default_classes()),
    Status::success(),
    vec![(Status::success(), 0)]
)]
#[case::lost_claim(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![lost(with_volume(pvc("pvc-a", WAIT, 1), "pv-a"))], default_classes()),
    Status::unresolvable("persistentvolumeclaim \"pvc-a\" bound to non-existent persistentvolume \"pv-a\""),
    vec![]
)]
#[case::claim_being_deleted(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![deleting(pvc("pvc-a", WAIT, 1))], default_classes()),
    Status::unresolvable("persistentvolumeclaim \"pvc-a\" is being deleted"),
    vec![]
)]
#[case::unbound_immediate_claim(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![pvc("pvc-a", IMMEDIATE, 1)], default_classes()),
    Status::unresolvable(ERR_UNBOUND_IMMEDIATE),
    vec![]
)]
#[case::claim_without_class_is_immediate(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![pvc("pvc-a", "", 1)], default_classes()),
    Status::unresolvable(ERR_UNBOUND_IMMEDIATE),
    vec![]
)]
#[case::prebound_claim_is_immediate(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![with_volume(pvc("pvc-a", WAIT, 1), "pv-a")], default_classes()),
    Status::unresolvable(ERR_UNBOUND_IMMEDIATE),
    vec![]
)]
#[case::class_without_binding_mode_is_an_error(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![pvc("pvc-a", NO_MODE, 1)], default_classes()),
    Status::error("VolumeBindingMode not set for StorageClass \"no-mode-sc\""),
    vec![]
)]
#[case::unbound_claim_without_match_nor_provisioner(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![pvc("pvc-a", WAIT, 1)], default_classes()),
    Status::success(),
    vec![(unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0)]
)]
#[case::bound_volume_elsewhere_and_no_match(
    pod_with_claims(&["pvc-a", "pvc-b"]),
    storage(
        vec![with_affinity(bound_pv("pv-a", WAIT, "pvc-a"), "barbar")],
        vec![bound_pvc("pvc-a", WAIT, "pv-a"), pvc("pvc-b", WAIT, 1)],
        default_classes()
    ),
    Status::success(),
    vec![(unresolvable(&[ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]), 0)]
)]
#[case::bound_volume_missing(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![bound_pvc("pvc-a", WAIT, "pv-a")], default_classes()),
    Status::success(),
    vec![(unresolvable(&[ERR_REASON_PV_NOT_EXIST]), 0)]
)]
#[case::smallest_fitting_volume_on_the_node(
    pod_with_claims(&["pvc-a"]),
    storage(
        vec![pv("pv-small", WAIT, 5, Some("bar")), pv("pv-big", WAIT, 50, Some("bar")), pv("pv-elsewhere", WAIT, 10, Some("barbar"))],
        vec![pvc("pvc-a", WAIT, 5)],
        default_classes()
    ),
    Status::success(),
    vec![(Status::success(), 0)]
)]
#[case::volume_of_another_class_does_not_match(
    pod_with_claims(&["pvc-a"]),
    storage(vec![pv("pv-a", PROVISION, 10, None)], vec![pvc("pvc-a", WAIT, 5)], default_classes()),
    Status::success(),
    vec![(unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0)]
)]
#[case::provisioning_outside_allowed_topologies(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![pvc("pvc-a", TOPOLOGY, 5)], default_classes()),
    Status::success(),
    vec![(unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0)]
)]
#[case::claim_selected_for_another_node(
    pod_with_claims(&["pvc-a"]),
    storage(vec![], vec![selected(pvc("pvc-a", PROVISION, 5), "node-b")], default_classes()),
    Status::success(),
    vec![(unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0)]
)]
fn pre_filter_and_filter(
    #[case] pod: Pod,
    #[case] s: StorageListers,
    #[case] want_pre: Status,
    #[case] want: Vec<(Status, i64)>,
) {
    let (pre, got, _) = check(&plugin(), pod, &[node("node-a", "bar")], s);
    assert_eq!((pre, got), (want_pre, want));
}

fn with_affinity(mut v: PersistentVolume, foo: &str) -> PersistentVolume {
    let with = pv("x", "", 1, Some(foo));
    if let (Some(s), Some(w)) = (v.spec.as_mut(), with.spec) {
        s.node_affinity = w.node_affinity;
    }
    v
}

fn owned_by_pod(mut c: PersistentVolumeClaim) -> PersistentVolumeClaim {
    c.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "pod-a".into(),
        uid: "uid-pod-a".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    c
}

fn lost(mut c: PersistentVolumeClaim) -> PersistentVolumeClaim {
    c.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Lost".into()),
        ..Default::default()
    });
    c
}

fn deleting(mut c: PersistentVolumeClaim) -> PersistentVolumeClaim {
    c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    c
}

fn selected(mut c: PersistentVolumeClaim, node: &str) -> PersistentVolumeClaim {
    c.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANN_SELECTED_NODE.into(), node.into());
    c
}

#[test]
fn each_node_gets_its_own_volume_and_fuller_volumes_score_lower() {
    let s = storage(
        vec![
            pv("pv-a", WAIT, 10, Some("bar")),
            pv("pv-b", WAIT, 20, Some("barbar")),
        ],
        vec![pvc("pvc-a", WAIT, 10)],
        default_classes(),
    );
    let (_, got, state) = check(
        &plugin(),
        pod_with_claims(&["pvc-a"]),
        &[
            node("node-a", "bar"),
            node("node-b", "barbar"),
            node("node-c", "baz"),
        ],
        s,
    );
    let chosen: BTreeMap<String, Vec<String>> = state
        .read::<StateData>(STATE_KEY)
        .map(|d| {
            d.0.by_node
                .lock()
                .map(|m| {
                    m.iter()
                        .map(|(n, v)| {
                            let names = v
                                .static_bindings
                                .iter()
                                .map(|b| b.pv.metadata.name.clone().unwrap_or_default())
                                .collect();
                            (n.clone(), names)
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .unwrap_or_default();
    assert_eq!(
        (got, chosen),
        (
            vec![
                (Status::success(), 0),
                (Status::success(), 50),
                (unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0),
            ],
            BTreeMap::from([
                ("node-a".to_string(), vec!["pv-a".to_string()]),
                ("node-b".to_string(), vec!["pv-b".to_string()]),
            ])
        )
    );
}

#[test]
fn a_custom_shape_scores_utilization_its_way() {
    let args: VolumeBindingArgs = decode_args(Some(&serde_json::json!({
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    })))
    .unwrap_or_default();
    let pl = VolumeBinding::from_args(&args, None, Arc::new(NoopClient));
    let s = storage(
        vec![
            pv("pv-a", WAIT, 10, Some("bar")),
            pv("pv-b", WAIT, 40, Some("barbar")),
        ],
        vec![pvc("pvc-a", WAIT, 10)],
        default_classes(),
    );
    let (_, got, _) = check(
        &pl,
        pod_with_claims(&["pvc-a"]),
        &[node("node-a", "bar"), node("node-b", "barbar")],
        s,
    );
    assert_eq!(got, vec![(Status::success(), 100), (Status::success(), 25)]);
}

/// One PV, two pods whose claims both match it: the first reserves it, so the second finds
/// no volume until the first is unreserved.
#[test]
fn two_pods_never_get_the_only_matching_volume() {
    let pl = plugin();
    let s = storage(
        vec![pv("pv-a", WAIT, 10, None)],
        vec![pvc("pvc-a", WAIT, 5), pvc("pvc-b", WAIT, 5)],
        default_classes(),
    );
    let nodes = [node("node-a", "bar")];
    let (_, first, mut state_a) = check(&pl, pod_with_claims(&["pvc-a"]), &nodes, s.clone());
    let pod_a = PodInfo::new(Arc::new(pod_with_claims(&["pvc-a"])));
    let reserved = pl.reserve(&mut state_a, &pod_a, "node-a");
    let (_, second, _) = check(&pl, second_pod(), &nodes, s.clone());
    pl.unreserve(&mut state_a, &pod_a, "node-a");
    let (_, after_unreserve, _) = check(&pl, second_pod(), &nodes, s);
    assert_eq!(
        (first, reserved, second, after_unreserve),
        (
            vec![(Status::success(), 50)],
            Status::success(),
            vec![(unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0)],
            vec![(Status::success(), 50)],
        )
    );
}

fn second_pod() -> Pod {
    let mut p = pod_with_claims(&["pvc-b"]);
    p.metadata.name = Some("pod-b".into());
    p
}

/// The informer's object wins once it is newer than the assumed one (the write landed).
#[test]
fn assumed_volume_is_seen_until_the_informer_has_a_newer_one() {
    let pl = plugin();
    let s = storage(
        vec![pv("pv-a", WAIT, 10, None)],
        vec![pvc("pvc-a", WAIT, 5), pvc("pvc-b", WAIT, 5)],
        default_classes(),
    );
    let nodes = [node("node-a", "bar")];
    let (_, _, mut state) = check(&pl, pod_with_claims(&["pvc-a"]), &nodes, s.clone());
    let pod_a = PodInfo::new(Arc::new(pod_with_claims(&["pvc-a"])));
    let _ = pl.reserve(&mut state, &pod_a, "node-a");
    // The PV controller released the volume again, at a newer version.
    let mut released = s.clone();
    let mut newer = pv("pv-a", WAIT, 10, None);
    newer.metadata.resource_version = Some("3".into());
    released
        .persistent_volumes
        .insert("pv-a".into(), Arc::new(newer));
    let (_, got, _) = check(&pl, second_pod(), &nodes, released);
    assert_eq!(got, vec![(Status::success(), 50)]);
}

mod assume_cache_tests {
    use super::*;

    fn versioned(rv: &str, class: &str) -> Arc<PersistentVolume> {
        let mut v = pv("pv-a", class, 1, None);
        v.metadata.resource_version = Some(rv.into());
        Arc::new(v)
    }

    #[test]
    fn assumed_object_overlays_the_same_version() {
        let mut c = AssumeCache::new("v1.PersistentVolume");
        let informer = versioned("5", "old");
        let assumed = versioned("5", "new");
        let r = c.assume("pv-a", assumed.clone(), Some(&informer));
        assert_eq!((r, c.get("pv-a", Some(&informer))), (Ok(()), Some(assumed)));
    }

    #[test]
    fn newer_informer_object_ends_the_assumption() {
        let mut c = AssumeCache::new("v1.PersistentVolume");
        let _ = c.assume("pv-a", versioned("5", "new"), Some(&versioned("5", "old")));
        let newer = versioned("6", "api");
        c.prune(|_| Some(newer.clone()));
        assert_eq!((c.get("pv-a", Some(&newer)), c.len()), (Some(newer), 0));
    }

    #[test]
    fn object_gone_from_the_informer_is_gone() {
        let mut c = AssumeCache::new("v1.PersistentVolume");
        let _ = c.assume("pv-a", versioned("5", "new"), Some(&versioned("5", "old")));
        assert_eq!(c.get("pv-a", None), None);
    }

    #[test]
    fn objects_without_resource_version_can_be_assumed() {
        let mut c = AssumeCache::new("v1.PersistentVolume");
        let informer = versioned("", "old");
        let assumed = versioned("", "new");
        let r = c.assume("pv-a", assumed.clone(), Some(&informer));
        assert_eq!((r, c.get("pv-a", Some(&informer))), (Ok(()), Some(assumed)));
    }

    #[test]
    fn restore_shows_the_informer_object_again() {
        let mut c = AssumeCache::new("v1.PersistentVolume");
        let informer = versioned("5", "old");
        let _ = c.assume("pv-a", versioned("5", "new"), Some(&informer));
        c.restore("pv-a");
        assert_eq!(c.get("pv-a", Some(&informer)), Some(informer));
    }

    #[rstest]
    #[case::older_than_seen(
        Some(versioned("5", "old")),
        versioned("4", "new"),
        Err(AssumeError::OutOfSync { description: "v1.PersistentVolume", name: "pv-a".into(), stored: 5, assumed: 4 }),
        "v1.PersistentVolume \"pv-a\" is out of sync (stored: 5, assume: 4)"
    )]
    #[case::unknown_object(
        None,
        versioned("4", "new"),
        Err(AssumeError::NotFound { description: "v1.PersistentVolume", name: "pv-a".into() }),
        "could not find v1.PersistentVolume \"pv-a\""
    )]
    #[case::unparsable_version(
        Some(versioned("5", "old")),
        versioned("x", "new"),
        Err(AssumeError::BadVersion { description: "v1.PersistentVolume", name: "pv-a".into(), version: "x".into() }),
        "error parsing ResourceVersion \"x\" for v1.PersistentVolume \"pv-a\""
    )]
    fn refused_assumptions_change_nothing(
        #[case] informer: Option<Arc<PersistentVolume>>,
        #[case] obj: Arc<PersistentVolume>,
        #[case] want: Result<(), AssumeError>,
        #[case] message: &str,
    ) {
        let mut c = AssumeCache::new("v1.PersistentVolume");
        let got = c.assume("pv-a", obj, informer.as_ref());
        let text = got.as_ref().err().map(ToString::to_string);
        assert_eq!((got, text, c.len()), (want, Some(message.to_string()), 0));
    }
}

#[rstest]
#[case::absent_args_are_upstream_defaults(None, Ok(VolumeBindingArgs { bind_timeout_seconds: 600, shape: None }))]
#[case::zero_timeout_is_kept(
    Some(serde_json::json!({"bindTimeoutSeconds": 0})),
    Ok(VolumeBindingArgs { bind_timeout_seconds: 0, shape: None })
)]
#[case::negative_timeout(
    Some(serde_json::json!({"bindTimeoutSeconds": -10})),
    Err(vec![ArgsError::new("bindTimeoutSeconds", "Invalid value: -10: invalid BindTimeoutSeconds, should not be a negative value")])
)]
#[case::unsorted_shape(
    Some(serde_json::json!({"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]})),
    Err(vec![ArgsError::new("shape[1].utilization", "Invalid value: 10: values must be sorted in increasing order")])
)]
#[case::shape_out_of_range(
    Some(serde_json::json!({"shape": [{"utilization": -1, "score": 11}]})),
    Err(vec![
        ArgsError::new("shape[0].utilization", "Invalid value: -1: not in valid range [0, 100]"),
        ArgsError::new("shape[0].score", "Invalid value: 11: not in valid range [0, 10]"),
    ])
)]
fn args_are_defaulted_and_validated(
    #[case] raw: Option<serde_json::Value>,
    #[case] want: Result<VolumeBindingArgs, Vec<ArgsError>>,
) {
    let got = decode_args::<VolumeBindingArgs>(raw.as_ref())
        .map_err(|e| vec![e])
        .and_then(|a| {
            let errs = a.validate();
            if errs.is_empty() {
                Ok(a)
            } else {
                Err(errs)
            }
        });
    assert_eq!(got, want);
}

#[test]
fn unknown_arg_is_refused() {
    let got = decode_args::<VolumeBindingArgs>(Some(&serde_json::json!({"bogus": 1})))
        .map_err(|e| e.message.starts_with("unknown field `bogus`"));
    assert_eq!(got, Err(true));
}

fn driver(name: &str, tracks: bool) -> (String, Arc<CSIDriver>) {
    (
        name.to_string(),
        Arc::new(CSIDriver {
            metadata: meta(name),
            spec: CSIDriverSpec {
                storage_capacity: Some(tracks),
                ..Default::default()
            },
        }),
    )
}

fn capacity(class: &str, foo: &str, capacity: &str, max: Option<&str>) -> Arc<CSIStorageCapacity> {
    Arc::new(CSIStorageCapacity {
        metadata: meta(&format!("cap-{foo}")),
        storage_class_name: class.into(),
        capacity: Some(Quantity(capacity.into())),
        maximum_volume_size: max.map(|m| Quantity(m.into())),
        node_topology: Some(V1LabelSelector {
            match_labels: Some(BTreeMap::from([("foo".to_string(), foo.to_string())])),
            ..Default::default()
        }),
    })
}

/// Claims to provision with `provision-sc` (driver `example.com/csi`) under `info`.
fn provisioning(info: CapacityInfo, gib: i64) -> PodVolumeClaims {
    let classes = default_classes();
    PodVolumeClaims {
        unbound_delay_binding: vec![Arc::new(pvc("pvc-a", PROVISION, gib))],
        classes: classes
            .into_iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    Some(Arc::new(c)),
                )
            })
            .collect(),
        capacity: info,
        ..Default::default()
    }
}

#[rstest]
#[case::driver_without_capacity_tracking(
    CapacityInfo { drivers: [driver("example.com/csi", false)].into(), capacities: vec![] },
    5, (vec![], vec![None])
)]
#[case::unknown_driver_is_not_checked(CapacityInfo::default(), 5, (vec![], vec![None]))]
#[case::no_capacity_reported(
    CapacityInfo { drivers: [driver("example.com/csi", true)].into(), capacities: vec![] },
    5, (vec![ERR_REASON_NOT_ENOUGH_SPACE], vec![])
)]
#[case::enough_capacity_on_the_node(
    CapacityInfo { drivers: [driver("example.com/csi", true)].into(), capacities: vec![capacity(PROVISION, "bar", "20Gi", None)] },
    5, (vec![], vec![Some(20 * GIB)])
)]
#[case::capacity_of_another_node(
    CapacityInfo { drivers: [driver("example.com/csi", true)].into(), capacities: vec![capacity(PROVISION, "barbar", "20Gi", None)] },
    5, (vec![ERR_REASON_NOT_ENOUGH_SPACE], vec![])
)]
#[case::capacity_of_another_class(
    CapacityInfo { drivers: [driver("example.com/csi", true)].into(), capacities: vec![capacity(WAIT, "bar", "20Gi", None)] },
    5, (vec![ERR_REASON_NOT_ENOUGH_SPACE], vec![])
)]
#[case::maximum_volume_size_wins_over_capacity(
    CapacityInfo { drivers: [driver("example.com/csi", true)].into(), capacities: vec![capacity(PROVISION, "bar", "20Gi", Some("4Gi"))] },
    5, (vec![ERR_REASON_NOT_ENOUGH_SPACE], vec![])
)]
fn storage_capacity_is_checked_for_drivers_that_track_it(
    #[case] info: CapacityInfo,
    #[case] gib: i64,
    #[case] want: (Vec<&'static str>, Vec<Option<i64>>),
) {
    let found = find_pod_volumes(&provisioning(info, gib), &node("node-a", "bar"));
    let got = found.map(|f| {
        (
            f.reasons,
            f.volumes
                .dynamic_provisions
                .iter()
                .map(|p| p.capacity)
                .collect::<Vec<_>>(),
        )
    });
    assert_eq!(got, Ok(want));
}

#[test]
fn provisioned_volumes_score_by_the_capacity_they_draw_from() {
    let info = CapacityInfo {
        drivers: [driver("example.com/csi", true)].into(),
        capacities: vec![capacity(PROVISION, "bar", "20Gi", None)],
    };
    let found = find_pod_volumes(&provisioning(info, 5), &node("node-a", "bar"));
    let score = found.map(|f| scorer::score(&plugin().shape, &class_resources(&f.volumes)));
    // 5 of 20 GiB used: 25 % under the default shape (0 % → 100, 100 % → 0).
    assert_eq!(score, Ok(75));
}

fn claim_with(f: impl FnOnce(&mut PersistentVolumeClaimSpec)) -> PersistentVolumeClaim {
    let mut c = pvc("pvc-a", WAIT, 5);
    if let Some(s) = c.spec.as_mut() {
        f(s);
    }
    c
}

fn volume_with(f: impl FnOnce(&mut PersistentVolume)) -> PersistentVolume {
    let mut v = pv("pv-a", WAIT, 10, None);
    f(&mut v);
    v
}

#[rstest]
#[case::matching_volume(pvc("pvc-a", WAIT, 5), pv("pv-a", WAIT, 10, None), Ok(true))]
#[case::too_small(pvc("pvc-a", WAIT, 20), pv("pv-a", WAIT, 10, None), Ok(false))]
#[case::missing_access_mode(
    claim_with(|s| s.access_modes = Some(vec!["ReadWriteMany".into()])),
    pv("pv-a", WAIT, 10, None),
    Ok(false)
)]
#[case::block_claim_filesystem_volume(
    claim_with(|s| s.volume_mode = Some("Block".into())),
    pv("pv-a", WAIT, 10, None),
    Ok(false)
)]
#[case::selector_not_matching(
    claim_with(|s| s.selector = Some(V1LabelSelector {
        match_labels: Some(BTreeMap::from([("tier".to_string(), "fast".to_string())])),
        ..Default::default()
    })),
    pv("pv-a", WAIT, 10, None),
    Ok(false)
)]
#[case::selector_matching(
    claim_with(|s| s.selector = Some(V1LabelSelector {
        match_labels: Some(BTreeMap::from([("tier".to_string(), "fast".to_string())])),
        ..Default::default()
    })),
    volume_with(|v| v.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "fast".to_string())]))),
    Ok(true)
)]
#[case::bad_selector_is_an_error(
    claim_with(|s| s.selector = Some(V1LabelSelector {
        match_labels: Some(BTreeMap::from([("bad key!".to_string(), "x".to_string())])),
        ..Default::default()
    })),
    pv("pv-a", WAIT, 10, None),
    Err(true)
)]
#[case::volume_not_available(
    pvc("pvc-a", WAIT, 5),
    volume_with(|v| v.status = Some(PersistentVolumeStatus { phase: Some("Released".into()), ..Default::default() })),
    Ok(false)
)]
#[case::volume_being_deleted(
    pvc("pvc-a", WAIT, 5),
    volume_with(|v| v.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))),
    Ok(false)
)]
#[case::volume_bound_to_another_claim(
    pvc("pvc-a", WAIT, 5),
    bound_pv("pv-a", WAIT, "pvc-other"),
    Ok(false)
)]
#[case::volume_prebound_to_the_claim_whatever_its_phase(
    pvc("pvc-a", WAIT, 5),
    bound_pv("pv-a", WAIT, "pvc-a"),
    Ok(true)
)]
#[case::volume_prebound_to_the_claim_on_another_node(
    pvc("pvc-a", WAIT, 5),
    with_affinity(bound_pv("pv-a", WAIT, "pvc-a"), "barbar"),
    Ok(false)
)]
#[case::volume_elsewhere(pvc("pvc-a", WAIT, 5), pv("pv-a", WAIT, 10, Some("barbar")), Ok(false))]
fn matching_volumes(
    #[case] claim: PersistentVolumeClaim,
    #[case] volume: PersistentVolume,
    #[case] want: Result<bool, bool>,
) {
    let labels = BTreeMap::from([("foo".to_string(), "bar".to_string())]);
    let got = binder::find_matching_volume(
        &claim,
        &[Arc::new(volume)],
        &labels,
        &std::collections::HashSet::new(),
    );
    assert_eq!(
        got.map(|v| v.is_some())
            .map_err(|e| e
                .starts_with("error creating internal label selector for claim: default/pvc-a: ")),
        want
    );
}

#[test]
fn bind_volume_to_claim_sets_claim_ref_and_bound_by_controller() {
    let (got, dirty) =
        binder::bind_volume_to_claim(&pv("pv-a", WAIT, 10, None), &pvc("pvc-a", WAIT, 5));
    let mut want = pv("pv-a", WAIT, 10, None);
    want.metadata.annotations = Some(BTreeMap::from([(
        ANN_BOUND_BY_CONTROLLER.to_string(),
        "yes".to_string(),
    )]));
    if let Some(s) = want.spec.as_mut() {
        s.claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some("default".into()),
            name: Some("pvc-a".into()),
            uid: Some("uid-pvc-a".into()),
            resource_version: Some("1".into()),
            ..Default::default()
        });
    }
    assert_eq!((got, dirty), (want, true));
}

fn class_event(topology: Option<&str>) -> EventObject {
    let mut c = class(WAIT, Some("WaitForFirstConsumer"), "p");
    c.allowed_topologies = topology.map(|v| {
        vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: "foo".into(),
                values: vec![v.into()],
            }]),
        }]
    });
    EventObject::StorageClass(Arc::new(c))
}

fn claim_event(namespace: &str, name: &str) -> EventObject {
    let mut c = pvc(name, WAIT, 1);
    c.metadata.namespace = Some(namespace.into());
    EventObject::PersistentVolumeClaim(Arc::new(c))
}

#[rstest]
#[case::class_added(None, Some(class_event(None)), Ok(QueueingHint::Queue))]
#[case::class_topologies_changed(
    Some(class_event(None)),
    Some(class_event(Some("bar"))),
    Ok(QueueingHint::Queue)
)]
#[case::class_updated_otherwise(
    Some(class_event(Some("bar"))),
    Some(class_event(Some("bar"))),
    Ok(QueueingHint::QueueSkip)
)]
#[case::class_hint_given_a_claim(None, Some(claim_event("default", "pvc-a")), Err("expected StorageClass, but got PersistentVolumeClaim".to_string()))]
fn storage_class_hints(
    #[case] old: Option<EventObject>,
    #[case] new: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pod = pod_with_claims(&["pvc-a"]);
    assert_eq!(
        is_schedulable_after_storage_class_change(&pod, old.as_ref(), new.as_ref()),
        want
    );
}

#[rstest]
#[case::claim_of_the_pod(pod_with_claims(&["pvc-a"]), claim_event("default", "pvc-a"), Ok(QueueingHint::Queue))]
#[case::claim_of_an_ephemeral_volume(
    pod_with_ephemeral(),
    claim_event("default", "pod-a-scratch"),
    Ok(QueueingHint::Queue)
)]
#[case::same_name_other_namespace(pod_with_claims(&["pvc-a"]), claim_event("other", "pvc-a"), Ok(QueueingHint::QueueSkip))]
#[case::another_claim(pod_with_claims(&["pvc-a"]), claim_event("default", "pvc-b"), Ok(QueueingHint::QueueSkip))]
#[case::claim_hint_given_a_class(pod_with_claims(&["pvc-a"]), class_event(None), Err("expected PersistentVolumeClaim, but got StorageClass".to_string()))]
fn claim_hints(
    #[case] pod: Pod,
    #[case] new: EventObject,
    #[case] want: Result<QueueingHint, String>,
) {
    assert_eq!(
        is_schedulable_after_claim_change(&pod, None, Some(&new)),
        want
    );
}

/// A client that records volume and claim writes and answers them with the object one
/// version newer, or with `fail`.
#[derive(Default)]
struct RecordingClient {
    pvs: std::sync::Mutex<Vec<PersistentVolume>>,
    pvcs: std::sync::Mutex<Vec<PersistentVolumeClaim>>,
    fail: Option<ClientError>,
}

fn bumped(meta: &ObjectMeta) -> Option<String> {
    let v: i64 = meta.resource_version.as_deref()?.parse().ok()?;
    Some((v + 1).to_string())
}

impl ClusterClient for RecordingClient {
    fn bind<'a>(
        &'a self,
        binding: &'a framework::Binding,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        NoopClient.bind(binding)
    }

    fn update_pod_status<'a>(
        &'a self,
        update: &'a framework::PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        NoopClient.update_pod_status(update)
    }

    fn record_event<'a>(
        &'a self,
        event: &'a framework::PodEvent,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        NoopClient.record_event(event)
    }

    fn delete_pod<'a>(
        &'a self,
        pod: &'a framework::PodRef,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        NoopClient.delete_pod(pod)
    }

    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, ClientError>> {
        Box::pin(async move {
            if let Some(e) = &self.fail {
                return Err(e.clone());
            }
            if let Ok(mut w) = self.pvs.lock() {
                w.push(pv.clone());
            }
            let mut out = pv.clone();
            out.metadata.resource_version = bumped(&pv.metadata);
            Ok(out)
        })
    }

    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, ClientError>> {
        Box::pin(async move {
            if let Some(e) = &self.fail {
                return Err(e.clone());
            }
            if let Ok(mut w) = self.pvcs.lock() {
                w.push(pvc.clone());
            }
            let mut out = pvc.clone();
            out.metadata.resource_version = bumped(&pvc.metadata);
            Ok(out)
        })
    }

    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::resource::v1::ResourceClaim, ClientError>> {
        NoopClient.update_resource_claim(claim)
    }

    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> BoxFuture<'a, Result<k8s_openapi::api::resource::v1::ResourceClaim, ClientError>> {
        NoopClient.update_resource_claim_status(claim)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("test runtime: {e}"),
    }
}

/// A plugin writing through `client`, waiting on `watch` when given, with `timeout` seconds.
fn binding_plugin(
    client: Arc<RecordingClient>,
    watch: Option<framework::StorageWatch>,
    timeout: i64,
) -> VolumeBinding {
    let args = VolumeBindingArgs {
        bind_timeout_seconds: timeout,
        shape: None,
    };
    VolumeBinding::from_args(&args, watch, client)
}

/// Runs the scheduling cycle of `pod` on `node-a` through Reserve.
fn reserved(pl: &VolumeBinding, pod: Pod, s: StorageListers) -> (CycleState, PodInfo, Status) {
    let (_, _, mut state) = check(pl, pod.clone(), &[node("node-a", "bar")], s);
    let info = PodInfo::new(Arc::new(pod));
    let r = pl.reserve(&mut state, &info, "node-a");
    (state, info, r)
}

fn provisioning_storage() -> StorageListers {
    storage(vec![], vec![pvc("pvc-a", PROVISION, 5)], default_classes())
}

#[test]
fn offline_pre_bind_writes_the_claim_ref_and_does_not_wait() {
    let client = Arc::new(RecordingClient::default());
    let pl = binding_plugin(client.clone(), None, 600);
    let s = storage(
        vec![pv("pv-a", WAIT, 10, None)],
        vec![pvc("pvc-a", WAIT, 5)],
        default_classes(),
    );
    let (state, pod, _) = reserved(&pl, pod_with_claims(&["pvc-a"]), s);
    let status = runtime().block_on(pl.pre_bind(&state, &pod, "node-a"));
    let (want_pv, _) =
        binder::bind_volume_to_claim(&pv("pv-a", WAIT, 10, None), &pvc("pvc-a", WAIT, 5));
    let written = client.pvs.lock().map(|w| w.clone()).unwrap_or_default();
    assert_eq!((status, written), (Status::success(), vec![want_pv]));
}

#[test]
fn offline_pre_bind_writes_the_selected_node_for_provisioning() {
    let client = Arc::new(RecordingClient::default());
    let pl = binding_plugin(client.clone(), None, 600);
    let (state, pod, _) = reserved(&pl, pod_with_claims(&["pvc-a"]), provisioning_storage());
    let status = runtime().block_on(pl.pre_bind(&state, &pod, "node-a"));
    let written = client.pvcs.lock().map(|w| w.clone()).unwrap_or_default();
    assert_eq!(
        (status, written),
        (
            Status::success(),
            vec![selected(pvc("pvc-a", PROVISION, 5), "node-a")]
        )
    );
}

#[test]
fn pre_bind_of_bound_claims_writes_nothing() {
    let client = Arc::new(RecordingClient::default());
    let pl = binding_plugin(client.clone(), None, 600);
    let s = storage(
        vec![bound_pv("pv-a", WAIT, "pvc-a")],
        vec![bound_pvc("pvc-a", WAIT, "pv-a")],
        default_classes(),
    );
    let (state, pod, _) = reserved(&pl, pod_with_claims(&["pvc-a"]), s);
    let status = runtime().block_on(pl.pre_bind(&state, &pod, "node-a"));
    let writes = (
        client.pvs.lock().map(|w| w.len()).unwrap_or(99),
        client.pvcs.lock().map(|w| w.len()).unwrap_or(99),
    );
    assert_eq!((status, writes), (Status::success(), (0, 0)));
}

/// The claim as the PV controller leaves it after provisioning `pv-new` for `node-a`, at
/// version 2 (the scheduler's write made version 2).
fn provisioned_claim(selected_node: Option<&str>, bound: bool) -> PersistentVolumeClaim {
    let mut c = pvc("pvc-a", PROVISION, 5);
    c.metadata.resource_version = Some("2".into());
    let mut annotations = BTreeMap::new();
    if let Some(n) = selected_node {
        annotations.insert(ANN_SELECTED_NODE.to_string(), n.to_string());
    }
    if bound {
        annotations.insert(ANN_BIND_COMPLETED.to_string(), "yes".to_string());
        if let Some(s) = c.spec.as_mut() {
            s.volume_name = Some("pv-new".into());
        }
    }
    c.metadata.annotations = Some(annotations);
    c
}

/// PreBind of a provisioned claim, with the informer view replaced by `later` once PreBind
/// waits.
fn pre_bind_with_view_change(later: StorageListers, timeout: i64) -> Status {
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(provisioning_storage()));
    let client = Arc::new(RecordingClient::default());
    let pl = binding_plugin(client, Some(rx), timeout);
    let (state, pod, _) = reserved(&pl, pod_with_claims(&["pvc-a"]), provisioning_storage());
    runtime().block_on(async {
        let (status, ()) = tokio::join!(pl.pre_bind(&state, &pod, "node-a"), async {
            tokio::task::yield_now().await;
            tx.send_replace(Arc::new(later));
        });
        status
    })
}

#[test]
fn pre_bind_waits_until_the_pv_controller_binds_the_claim() {
    let later = storage(
        vec![pv("pv-new", PROVISION, 5, None)],
        vec![provisioned_claim(Some("node-a"), true)],
        default_classes(),
    );
    assert_eq!(pre_bind_with_view_change(later, 600), Status::success());
}

#[test]
fn pre_bind_fails_when_the_provisioner_clears_the_selected_node() {
    let later = storage(
        vec![],
        vec![provisioned_claim(None, false)],
        default_classes(),
    );
    assert_eq!(
        pre_bind_with_view_change(later, 600),
        Status::error("binding volumes: provisioning failed for PVC \"pvc-a\"")
    );
}

#[test]
fn pre_bind_gives_up_after_the_bind_timeout() {
    let later = storage(
        vec![],
        vec![provisioned_claim(Some("node-a"), false)],
        default_classes(),
    );
    assert_eq!(
        pre_bind_with_view_change(later, 0),
        Status::error("binding volumes: context deadline exceeded")
    );
}

#[test]
fn failed_write_releases_the_assumed_volume() {
    let client = Arc::new(RecordingClient {
        fail: Some(ClientError::Api {
            code: 409,
            message: "conflict".into(),
        }),
        ..Default::default()
    });
    let pl = binding_plugin(client, None, 600);
    let s = storage(
        vec![pv("pv-a", WAIT, 10, None)],
        vec![pvc("pvc-a", WAIT, 5), pvc("pvc-b", WAIT, 5)],
        default_classes(),
    );
    let (state, pod, _) = reserved(&pl, pod_with_claims(&["pvc-a"]), s.clone());
    let status = runtime().block_on(pl.pre_bind(&state, &pod, "node-a"));
    let (_, second, _) = check(&pl, second_pod(), &[node("node-a", "bar")], s);
    assert_eq!(
        (status, second),
        (
            Status::error("api error 409: conflict"),
            vec![(Status::success(), 50)]
        )
    );
}

#[test]
fn pre_filter_reads_drivers_and_capacities_for_provisioning() {
    let mut s = storage(vec![], vec![pvc("pvc-a", PROVISION, 5)], default_classes());
    let (name, d) = driver("example.com/csi", true);
    s.csi_drivers.insert(name, d);
    s.csi_storage_capacities.insert(
        "default/cap-bar".into(),
        capacity(PROVISION, "bar", "20Gi", None),
    );
    let (_, got, _) = check(
        &plugin(),
        pod_with_claims(&["pvc-a"]),
        &[node("node-a", "bar"), node("node-b", "barbar")],
        s,
    );
    assert_eq!(
        got,
        vec![
            (Status::success(), 75),
            (unresolvable(&[ERR_REASON_NOT_ENOUGH_SPACE]), 0)
        ]
    );
}

fn csi_node_event(migrated: Option<&str>) -> EventObject {
    let mut n = k8s_openapi::api::storage::v1::CSINode {
        metadata: meta("node-a"),
        ..Default::default()
    };
    n.metadata.annotations = migrated
        .map(|m| BTreeMap::from([(MIGRATED_PLUGINS_ANNOTATION.to_string(), m.to_string())]));
    EventObject::CSINode(Arc::new(n))
}

fn driver_event(tracks: Option<bool>) -> EventObject {
    let (_, mut d) = driver("example.com/csi", false);
    Arc::make_mut(&mut d).spec.storage_capacity = tracks;
    EventObject::CSIDriver(d)
}

fn capacity_event(capacity_value: &str, max: Option<&str>) -> EventObject {
    EventObject::CSIStorageCapacity(capacity(PROVISION, "bar", capacity_value, max))
}

/// A pod with an inline CSI volume of driver `example.com/csi`.
fn pod_with_inline_csi() -> Pod {
    let mut pod = make_pod("pod-a").obj();
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = Some(vec![Volume {
            name: "inline".into(),
            csi: Some(k8s_openapi::api::core::v1::CSIVolumeSource {
                driver: "example.com/csi".into(),
                ..Default::default()
            }),
            ..Default::default()
        }]);
    }
    pod
}

#[rstest]
#[case::csi_node_added(None, csi_node_event(None), Ok(QueueingHint::Queue))]
#[case::csi_node_migrated_plugins_changed(
    Some(csi_node_event(None)),
    csi_node_event(Some("kubernetes.io/gce-pd")),
    Ok(QueueingHint::Queue)
)]
#[case::csi_node_updated_otherwise(
    Some(csi_node_event(Some("a"))),
    csi_node_event(Some("a")),
    Ok(QueueingHint::QueueSkip)
)]
fn csi_node_hints(
    #[case] old: Option<EventObject>,
    #[case] new: EventObject,
    #[case] want: Result<QueueingHint, String>,
) {
    let pod = pod_with_claims(&["pvc-a"]);
    assert_eq!(
        is_schedulable_after_csi_node_change(&pod, old.as_ref(), Some(&new)),
        want
    );
}

#[rstest]
#[case::driver_stops_tracking_capacity(
    pod_with_inline_csi(),
    driver_event(Some(true)),
    driver_event(None),
    QueueingHint::Queue
)]
#[case::driver_starts_tracking_capacity(
    pod_with_inline_csi(),
    driver_event(Some(false)),
    driver_event(Some(true)),
    QueueingHint::QueueSkip
)]
#[case::pod_without_the_driver(pod_with_claims(&["pvc-a"]), driver_event(Some(true)), driver_event(Some(false)), QueueingHint::QueueSkip)]
fn csi_driver_hints(
    #[case] pod: Pod,
    #[case] old: EventObject,
    #[case] new: EventObject,
    #[case] want: QueueingHint,
) {
    assert_eq!(
        is_schedulable_after_csi_driver_change(&pod, Some(&old), Some(&new)),
        Ok(want)
    );
}

#[rstest]
#[case::capacity_added(None, capacity_event("1Gi", None), QueueingHint::Queue)]
#[case::capacity_grew(
    Some(capacity_event("1Gi", None)),
    capacity_event("2Gi", None),
    QueueingHint::Queue
)]
#[case::capacity_shrank(
    Some(capacity_event("2Gi", None)),
    capacity_event("1Gi", None),
    QueueingHint::QueueSkip
)]
#[case::maximum_volume_size_grew(
    Some(capacity_event("10Gi", Some("1Gi"))),
    capacity_event("10Gi", Some("2Gi")),
    QueueingHint::Queue
)]
#[case::capacity_grew_under_the_same_maximum(
    Some(capacity_event("10Gi", Some("1Gi"))),
    capacity_event("20Gi", Some("1Gi")),
    QueueingHint::QueueSkip
)]
fn csi_storage_capacity_hints(
    #[case] old: Option<EventObject>,
    #[case] new: EventObject,
    #[case] want: QueueingHint,
) {
    let pod = pod_with_claims(&["pvc-a"]);
    assert_eq!(
        is_schedulable_after_csi_storage_capacity_change(&pod, old.as_ref(), Some(&new)),
        Ok(want)
    );
}

/// What PreFilter would gather for a pod: `bound` claims with their volumes, `waiting`
/// claims of WaitForFirstConsumer classes, `volumes` by class, the default classes.
fn gathered(
    bound: Vec<(PersistentVolumeClaim, Option<PersistentVolume>)>,
    waiting: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    capacity: CapacityInfo,
) -> PodVolumeClaims {
    let mut volumes_by_class: std::collections::HashMap<String, Vec<Arc<PersistentVolume>>> =
        std::collections::HashMap::new();
    for v in volumes {
        volumes_by_class
            .entry(volume_class(&v).to_string())
            .or_default()
            .push(Arc::new(v));
    }
    PodVolumeClaims {
        bound: bound
            .into_iter()
            .map(|(c, v)| (Arc::new(c), v.map(Arc::new)))
            .collect(),
        unbound_delay_binding: waiting.into_iter().map(Arc::new).collect(),
        volumes_by_class,
        classes: default_classes()
            .into_iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    Some(Arc::new(c)),
                )
            })
            .collect(),
        capacity,
    }
}

fn tracked(capacities: Vec<Arc<CSIStorageCapacity>>) -> CapacityInfo {
    CapacityInfo {
        drivers: [driver("example.com/csi", true)].into(),
        capacities,
    }
}

fn pv_with(name: &str, gib: i64, f: impl FnOnce(&mut PersistentVolume)) -> PersistentVolume {
    let mut v = pv(name, WAIT, gib, None);
    f(&mut v);
    v
}

fn selector(value: &str) -> Option<V1LabelSelector> {
    Some(V1LabelSelector {
        match_labels: Some(BTreeMap::from([("tier".to_string(), value.to_string())])),
        ..Default::default()
    })
}

#[rstest]
#[case::every_claim_fits(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)], vec![pv("pv-a", WAIT, 10, None)], CapacityInfo::default()),
    vec![]
)]
#[case::bound_volume_missing(
    gathered(vec![(bound_pvc("pvc-a", WAIT, "pv-gone"), None)], vec![], vec![], CapacityInfo::default()),
    vec![("default/pvc-a", "bound volume pv-gone does not exist")]
)]
#[case::bound_volume_elsewhere(
    gathered(
        vec![(bound_pvc("pvc-a", WAIT, "pv-a"), Some(with_affinity(bound_pv("pv-a", WAIT, "pvc-a"), "barbar")))],
        vec![], vec![], CapacityInfo::default(),
    ),
    vec![("default/pvc-a", "bound volume pv-a's node affinity does not match node node-a")]
)]
#[case::provisioning_for_another_node(
    gathered(vec![], vec![selected(pvc("pvc-a", PROVISION, 5), "node-b")], vec![], CapacityInfo::default()),
    vec![("default/pvc-a", "its volume is being provisioned for node node-b")]
)]
#[case::selected_node_of_a_class_that_cannot_provision(
    gathered(vec![], vec![selected(pvc("pvc-a", WAIT, 5), "node-a")], vec![], CapacityInfo::default()),
    vec![("default/pvc-a", "StorageClass wait-sc cannot provision volumes")]
)]
#[case::no_volume_of_the_class(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)], vec![], CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (there are none)")]
)]
#[case::volumes_bound_elsewhere_or_too_small_by_name(
    gathered(
        vec![],
        vec![pvc("pvc-a", WAIT, 5)],
        vec![pv("pv-b", WAIT, 1, None), bound_pv("pv-a", WAIT, "pvc-other")],
        CapacityInfo::default(),
    ),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a is bound to default/pvc-other; pv-b is smaller than 5Gi)")]
)]
#[case::volume_matched_to_another_claim_of_the_pod(
    gathered(
        vec![],
        vec![pvc("pvc-b", WAIT, 8), pvc("pvc-a", WAIT, 5)],
        vec![pv("pv-a", WAIT, 10, None)],
        CapacityInfo::default(),
    ),
    vec![("default/pvc-b", "no available PersistentVolume of class wait-sc (pv-a is matched to default/pvc-a)")]
)]
#[case::volume_mode(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)],
        vec![pv_with("pv-a", 10, |v| if let Some(s) = v.spec.as_mut() { s.volume_mode = Some("Block".into()) })],
        CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a has volume mode Block, not Filesystem)")]
)]
#[case::volume_attributes_class(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)],
        vec![pv_with("pv-a", 10, |v| if let Some(s) = v.spec.as_mut() { s.volume_attributes_class_name = Some("gold".into()) })],
        CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a has volume attributes class \"gold\", not \"\")")]
)]
#[case::volume_being_deleted(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)],
        vec![pv_with("pv-a", 10, |v| v.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)))],
        CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a is being deleted)")]
)]
#[case::volume_prebound_to_the_claim_elsewhere(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)],
        vec![with_affinity(bound_pv("pv-a", WAIT, "pvc-a"), "barbar"), pv("pv-b", WAIT, 10, None)],
        CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a is pre-bound to the claim, but its node affinity does not match node node-a)")]
)]
#[case::volume_not_available(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)],
        vec![pv_with("pv-a", 10, |v| v.status = Some(PersistentVolumeStatus { phase: Some("Released".into()), ..Default::default() }))],
        CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a is Released)")]
)]
#[case::selector(
    gathered(vec![], vec![claim_with(|s| s.selector = selector("fast"))], vec![pv("pv-a", WAIT, 10, None)], CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a does not match the claim's selector)")]
)]
#[case::bad_selector(
    gathered(vec![], vec![claim_with(|s| s.selector = Some(V1LabelSelector {
        match_labels: Some(BTreeMap::from([("bad key!".to_string(), "x".to_string())])),
        ..Default::default()
    }))], vec![pv("pv-a", WAIT, 10, None)], CapacityInfo::default()),
    vec![("default/pvc-a", "error creating internal label selector for claim: default/pvc-a: matchLabels[bad key!]: invalid label key \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")]
)]
#[case::volume_node_affinity(
    gathered(vec![], vec![pvc("pvc-a", WAIT, 5)], vec![pv("pv-a", WAIT, 10, Some("barbar"))], CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a's node affinity does not match node node-a)")]
)]
#[case::access_modes(
    gathered(vec![], vec![claim_with(|s| s.access_modes = Some(vec!["ReadWriteOnce".into(), "ReadWriteMany".into()]))],
        vec![pv("pv-a", WAIT, 10, None)], CapacityInfo::default()),
    vec![("default/pvc-a", "no available PersistentVolume of class wait-sc (pv-a does not offer access modes ReadWriteOnce, ReadWriteMany)")]
)]
#[case::missing_class(
    gathered(vec![], vec![pvc("pvc-a", "gone-sc", 5)], vec![], CapacityInfo::default()),
    vec![("default/pvc-a", "StorageClass gone-sc not found")]
)]
#[case::allowed_topologies(
    gathered(vec![], vec![pvc("pvc-a", TOPOLOGY, 5)], vec![], CapacityInfo::default()),
    vec![("default/pvc-a", "StorageClass topology-sc's allowedTopologies exclude node node-a")]
)]
#[case::provisioning_fits_when_no_volume_does(
    gathered(vec![], vec![pvc("pvc-a", PROVISION, 5)], vec![], tracked(vec![capacity(PROVISION, "bar", "20Gi", None)])),
    vec![]
)]
#[case::not_enough_capacity(
    gathered(vec![], vec![pvc("pvc-a", PROVISION, 5)], vec![],
        tracked(vec![capacity(PROVISION, "bar", "1Gi", None), capacity(PROVISION, "barbar", "20Gi", None)])),
    vec![("default/pvc-a", "CSIStorageCapacity for class provision-sc has 1Gi, needs 5Gi")]
)]
#[case::maximum_volume_size_too_small(
    gathered(vec![], vec![pvc("pvc-a", PROVISION, 5)], vec![], tracked(vec![capacity(PROVISION, "bar", "20Gi", Some("4Gi"))])),
    vec![("default/pvc-a", "CSIStorageCapacity for class provision-sc has a maximum volume size of 4Gi, needs 5Gi")]
)]
#[case::no_capacity_reaches_the_node(
    gathered(vec![], vec![pvc("pvc-a", PROVISION, 5)], vec![], tracked(vec![capacity(PROVISION, "barbar", "20Gi", None)])),
    vec![("default/pvc-a", "no CSIStorageCapacity for class provision-sc reaches node node-a")]
)]
#[case::each_failing_claim_is_named(
    gathered(
        vec![(bound_pvc("pvc-c", WAIT, "pv-gone"), None)],
        vec![pvc("pvc-a", TOPOLOGY, 5), pvc("pvc-b", WAIT, 5)],
        vec![],
        CapacityInfo::default(),
    ),
    vec![
        ("default/pvc-c", "bound volume pv-gone does not exist"),
        ("default/pvc-a", "StorageClass topology-sc's allowedTopologies exclude node node-a"),
        ("default/pvc-b", "no available PersistentVolume of class wait-sc (there are none)"),
    ]
)]
fn filter_rejections_are_explained_per_claim(
    #[case] claims: PodVolumeClaims,
    #[case] want: Vec<(&str, &str)>,
) {
    let got = explain::explain_pod_volumes(&claims, &node("node-a", "bar"));
    let got: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.claim.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(got, want);
}

/// The explanation reads the state PreFilter wrote, so a volume Reserve assumed for an
/// earlier pod shows as bound to that pod's claim.
#[test]
fn explanation_sees_volumes_assumed_for_earlier_pods() {
    let pl = plugin();
    let s = storage(
        vec![pv("pv-a", WAIT, 10, None)],
        vec![pvc("pvc-a", WAIT, 5), pvc("pvc-b", WAIT, 5)],
        default_classes(),
    );
    let node_a = node("node-a", "bar");
    let nodes = [node_a.clone()];
    let (_, _, mut state_a) = check(&pl, pod_with_claims(&["pvc-a"]), &nodes, s.clone());
    let pod_a = PodInfo::new(Arc::new(pod_with_claims(&["pvc-a"])));
    let reserved = pl.reserve(&mut state_a, &pod_a, "node-a");
    let (_, second, state_b) = check(&pl, second_pod(), &nodes, s);
    let explained = explain_filter(&state_b, &node_a);
    assert_eq!(
        (reserved, second, explained),
        (
            Status::success(),
            vec![(unresolvable(&[ERR_REASON_BIND_CONFLICT]), 0)],
            vec![explain::ClaimReason {
                claim: "default/pvc-b".into(),
                reason: "no available PersistentVolume of class wait-sc (pv-a is bound to default/pvc-a)".into(),
            }],
        )
    );
}

#[test]
fn nothing_to_explain_without_pre_filter_state() {
    assert_eq!(
        explain_filter(&CycleState::new(), &node("node-a", "bar")),
        vec![]
    );
}

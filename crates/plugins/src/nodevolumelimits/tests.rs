use std::collections::BTreeMap;
use std::sync::Arc;

use framework::testing::{make_node, make_pod};
use framework::{
    ActionType, ClusterEvent, CycleState, EventObject, EventResource, PodInfo, QueueingHint,
    Snapshot, Status, StorageListers,
};
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, AzureDiskVolumeSource, AzureFileVolumeSource,
    CSIPersistentVolumeSource, CinderVolumeSource, ConfigMapVolumeSource, EphemeralVolumeSource,
    GCEPersistentDiskVolumeSource, HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, Pod,
    PortworxVolumeSource, SecretVolumeSource, Volume, VsphereVirtualDiskVolumeSource,
};
use k8s_openapi::api::storage::v1::{
    CSINode, CSINodeDriver, CSINodeSpec, StorageClass, VolumeAttachment, VolumeAttachmentSource,
    VolumeAttachmentSpec, VolumeNodeResources,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use rstest::rstest;

use super::translation::*;
use super::*;

const EBS: &str = AWS_EBS_DRIVER_NAME;
const GCE: &str = GCE_PD_DRIVER_NAME;
const AWS_IN_TREE: &str = AWS_EBS_IN_TREE_PLUGIN_NAME;
const HOSTPATH_IN_TREE: &str = "kubernetes.io/hostpath";
const NODE: &str = "node-for-max-pd-test-1";
const SC_NAME: &str = "csi-sc";

// ---- objects of upstream's csi_test.go ---------------------------------------------------

fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: ns.map(str::to_string),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn pod_with_volumes(name: &str, volumes: Vec<Volume>) -> Pod {
    make_pod(name)
        .with(|p| {
            if let Some(s) = p.spec.as_mut() {
                s.volumes = Some(volumes);
            }
        })
        .obj()
}

fn claim_volume(claim: &str) -> Volume {
    Volume {
        name: format!("vol-{claim}"),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: None,
        }),
        ..Default::default()
    }
}

fn ephemeral_volume(name: &str) -> Volume {
    Volume {
        name: name.into(),
        ephemeral: Some(EphemeralVolumeSource::default()),
        ..Default::default()
    }
}

fn aws_inline(volume_id: &str) -> Volume {
    Volume {
        name: "aws".into(),
        aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
            volume_id: volume_id.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn config_map_volume() -> Volume {
    Volume {
        name: "cm".into(),
        config_map: Some(ConfigMapVolumeSource::default()),
        ..Default::default()
    }
}

fn secret_volume() -> Volume {
    Volume {
        name: "secret".into(),
        secret: Some(SecretVolumeSource::default()),
        ..Default::default()
    }
}

/// A pod in `default` using `claims`.
fn pvc_pod(name: &str, claims: &[&str]) -> Pod {
    pod_with_volumes(name, claims.iter().map(|c| claim_volume(c)).collect())
}

fn running_pod() -> Pod {
    pvc_pod("running", &["csi-ebs.csi.aws.com-3"])
}
fn pending_volume_pod() -> Pod {
    pvc_pod("pending", &["csi-4"])
}
/// Another pod using the same unbound claim as `pending_volume_pod`.
fn unbound_pvc_pod_2() -> Pod {
    pvc_pod("pending-2", &["csi-4"])
}
fn missing_pv_pod() -> Pod {
    pvc_pod("missing-pv", &["csi-6"])
}
fn no_sc_pvc_pod() -> Pod {
    pvc_pod("no-sc", &["csi-5"])
}
fn gce_two_vol_pod() -> Pod {
    pvc_pod(
        "gce-two",
        &["csi-pd.csi.storage.gke.io-1", "csi-pd.csi.storage.gke.io-2"],
    )
}
fn in_tree_one_vol_pod() -> Pod {
    pvc_pod("in-tree-one", &["csi-kubernetes.io/aws-ebs-0"])
}
fn in_tree_two_vol_pod() -> Pod {
    pvc_pod(
        "in-tree-two",
        &["csi-kubernetes.io/aws-ebs-1", "csi-kubernetes.io/aws-ebs-2"],
    )
}
fn csi_ebs_one_vol_pod() -> Pod {
    pvc_pod("ebs-one", &["csi-ebs.csi.aws.com-0"])
}
fn csi_ebs_two_vol_pod() -> Pod {
    pvc_pod(
        "ebs-two",
        &["csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2"],
    )
}
fn in_tree_non_migratable_one_vol_pod() -> Pod {
    pvc_pod("hostpath-one", &["csi-kubernetes.io/hostpath-0"])
}
fn ephemeral_volume_pod() -> Pod {
    let mut p = pod_with_volumes("abc", vec![ephemeral_volume("xyz")]);
    p.metadata.namespace = Some("test".into());
    p.metadata.uid = Some("12345".into());
    p
}
fn ephemeral_two_volume_pod() -> Pod {
    let mut p = pod_with_volumes("abc", vec![ephemeral_volume("x"), ephemeral_volume("y")]);
    p.metadata.namespace = Some("test".into());
    p.metadata.uid = Some("12345II".into());
    p
}
fn in_tree_inline_vol_pod() -> Pod {
    pod_with_volumes("inline", vec![aws_inline("aws-inline1")])
}
fn in_tree_inline_vol_pod_with_same_csi_volume_id() -> Pod {
    pod_with_volumes("inline-same-id", vec![aws_inline("csi-ebs.csi.aws.com-1")])
}
fn only_configmap_and_secret_vol_pod() -> Pod {
    pod_with_volumes("cm-secret", vec![config_map_volume(), secret_volume()])
}
fn pvc_pod_with_configmap_and_secret() -> Pod {
    pod_with_volumes(
        "cm-secret-pvc",
        vec![
            config_map_volume(),
            secret_volume(),
            claim_volume("csi-ebs.csi.aws.com-0"),
        ],
    )
}
fn ephemeral_pod_with_configmap_and_secret() -> Pod {
    let mut p = pod_with_volumes(
        "abc",
        vec![
            config_map_volume(),
            secret_volume(),
            ephemeral_volume("xyz"),
        ],
    );
    p.metadata.namespace = Some("test".into());
    p
}
fn inline_migratable_pod_with_configmap_and_secret() -> Pod {
    pod_with_volumes(
        "cm-secret-inline",
        vec![
            config_map_volume(),
            secret_volume(),
            aws_inline("aws-inline1"),
        ],
    )
}

/// The claim `<pod>-<volume>` of an ephemeral volume in `test`, in class `csi-sc`,
/// controlled by the pod with `owner_uid` (none: no owner).
fn ephemeral_claim(name: &str, owner_uid: Option<&str>) -> PersistentVolumeClaim {
    let mut m = meta(Some("test"), name);
    m.owner_references = owner_uid.map(|uid| {
        vec![OwnerReference {
            kind: "Pod".into(),
            name: "abc".into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        }]
    });
    PersistentVolumeClaim {
        metadata: m,
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: Some(SC_NAME.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the node's limits come from.
#[derive(Debug, Clone, Copy)]
enum LimitSource {
    /// A CSINode listing every driver with this limit.
    CsiNode(i32),
    /// A CSINode listing every driver without a limit.
    CsiNodeWithNoLimit,
    /// No CSINode.
    None,
}

fn csi_node(drivers: &[&str], limit: Option<i32>) -> CSINode {
    let mut m = meta(None, NODE);
    // Upstream's table enables migration of AWS EBS on the node.
    m.annotations = Some(BTreeMap::from([(
        MIGRATED_PLUGINS_ANNOTATION.to_string(),
        AWS_IN_TREE.to_string(),
    )]));
    CSINode {
        metadata: m,
        spec: CSINodeSpec {
            drivers: drivers
                .iter()
                .map(|d| CSINodeDriver {
                    name: d.to_string(),
                    node_id: NODE.into(),
                    allocatable: limit.map(|c| VolumeNodeResources { count: Some(c) }),
                    ..Default::default()
                })
                .collect(),
        },
    }
}

fn volume_attachment(name: &str, node: &str, attacher: &str, pv: &str) -> VolumeAttachment {
    VolumeAttachment {
        metadata: meta(None, name),
        spec: VolumeAttachmentSpec {
            attacher: attacher.into(),
            node_name: node.into(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some(pv.into()),
                ..Default::default()
            },
        },
        status: None,
    }
}

/// Upstream's listers: per driver four volumes `csi-<driver>-<i>` (AWS EBS and host path
/// ones for those in-tree names, CSI ones otherwise) with claims of the same names; claims
/// `csi-4` (unbound, class `csi-sc`), `csi-5` (unbound, no class) and `csi-6` (class
/// `csi-sc`, bound to a missing volume); the class `csi-sc` provisioned by the first
/// driver; `va_count` attachments per driver to the test node; and the CSINode.
fn listers(
    drivers: &[&str],
    extra_claims: &[PersistentVolumeClaim],
    va_count: usize,
    limit_source: LimitSource,
) -> StorageListers {
    let mut s = StorageListers::default();
    for driver in drivers {
        for j in 0..4 {
            let name = format!("csi-{driver}-{j}");
            let spec = match *driver {
                AWS_IN_TREE => PersistentVolumeSpec {
                    aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                        volume_id: name.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                HOSTPATH_IN_TREE => PersistentVolumeSpec {
                    host_path: Some(HostPathVolumeSource {
                        path: "/tmp".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                _ => PersistentVolumeSpec {
                    csi: Some(CSIPersistentVolumeSource {
                        driver: driver.to_string(),
                        volume_handle: name.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            };
            s.persistent_volumes.insert(
                name.clone(),
                Arc::new(PersistentVolume {
                    metadata: meta(None, &name),
                    spec: Some(spec),
                    ..Default::default()
                }),
            );
            insert_claim(&mut s, claim(&name, Some(&name), None));
        }
        for j in 0..va_count {
            let va = volume_attachment(
                &format!("va-{driver}-{j}"),
                NODE,
                driver,
                &format!("csi-{driver}-{j}"),
            );
            s.volume_attachments
                .insert(va.metadata.name.clone().unwrap_or_default(), Arc::new(va));
        }
    }
    insert_claim(&mut s, claim("csi-4", None, Some(SC_NAME)));
    insert_claim(&mut s, claim("csi-5", None, None));
    insert_claim(
        &mut s,
        claim("csi-6", Some("missing-in-action"), Some(SC_NAME)),
    );
    for c in extra_claims {
        insert_claim(&mut s, c.clone());
    }
    s.storage_classes.insert(
        SC_NAME.into(),
        Arc::new(StorageClass {
            metadata: meta(None, SC_NAME),
            provisioner: drivers.first().copied().unwrap_or_default().to_string(),
            ..Default::default()
        }),
    );
    let node = match limit_source {
        LimitSource::CsiNode(max_vols) => Some(csi_node(drivers, Some(max_vols))),
        LimitSource::CsiNodeWithNoLimit => Some(csi_node(drivers, None)),
        LimitSource::None => None,
    };
    if let Some(n) = node {
        s.csi_nodes.insert(NODE.into(), Arc::new(n));
    }
    s
}

/// A claim in `default` bound to `volume` and asking for `class`.
fn claim(name: &str, volume: Option<&str>, class: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(Some("default"), name),
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: volume.map(str::to_string),
            storage_class_name: class.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn insert_claim(s: &mut StorageListers, c: PersistentVolumeClaim) {
    let key = format!(
        "{}/{}",
        c.metadata.namespace.as_deref().unwrap_or(""),
        c.metadata.name.as_deref().unwrap_or("")
    );
    s.persistent_volume_claims.insert(key, Arc::new(c));
}

fn snapshot_of(s: StorageListers) -> Snapshot {
    let mut snap = Snapshot::default();
    snap.set_storage(Arc::new(s));
    snap
}

/// PreFilter's status, and Filter's on the test node holding `existing` when PreFilter
/// did not skip.
fn run(pod: Pod, existing: Vec<Pod>, storage: StorageListers) -> (Status, Option<Status>) {
    let plugin = CSILimits::default();
    let pod = PodInfo::new(Arc::new(pod));
    let existing: Vec<Arc<PodInfo>> = existing
        .into_iter()
        .map(|p| Arc::new(PodInfo::new(Arc::new(p))))
        .collect();
    let node = make_node(NODE).info_with(&existing);
    let mut state = CycleState::new();
    let (_, pre) = plugin.pre_filter(&mut state, &pod, &snapshot_of(storage));
    let filtered =
        (pre.code() != framework::Code::Skip).then(|| plugin.filter(&state, &pod, &node));
    (pre, filtered)
}

fn exceeded() -> Option<Status> {
    Some(Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED))
}

fn fits() -> Option<Status> {
    Some(Status::success())
}

fn missing_ephemeral_claim() -> Option<Status> {
    Some(Status::unresolvable(
        "looking up PVC test/abc-xyz: persistentvolumeclaim \"abc-xyz\" not found",
    ))
}

// ---- upstream's TestCSILimits -------------------------------------------------------------

#[rstest]
#[case::should_count_volume_attachments_towards_volume_limit_when_no_pods_exist(
    csi_ebs_one_vol_pod(), vec![], vec![], &[EBS], LimitSource::CsiNode(2), 2, exceeded())]
#[case::should_schedule_pod_when_volume_attachments_count_does_not_exceed_limit(
    csi_ebs_one_vol_pod(), vec![], vec![], &[EBS], LimitSource::CsiNode(2), 1, fits())]
#[case::fits_when_node_volume_limit_ge_new_pods_csi_volume(
    csi_ebs_one_vol_pod(), vec![running_pod(), csi_ebs_two_vol_pod()], vec![], &[EBS], LimitSource::CsiNode(4), 0, fits())]
#[case::does_not_fit_when_node_volume_limit_le_pods_csi_volume(
    csi_ebs_one_vol_pod(), vec![running_pod(), csi_ebs_two_vol_pod()], vec![], &[EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::fits_when_driver_does_not_support_volume_limits(
    csi_ebs_one_vol_pod(), vec![running_pod(), csi_ebs_two_vol_pod()], vec![], &[EBS], LimitSource::CsiNodeWithNoLimit, 0, fits())]
#[case::count_pending_pvcs_towards_volume_limit(
    csi_ebs_one_vol_pod(), vec![pending_volume_pod(), csi_ebs_two_vol_pod()], vec![], &[EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::count_multiple_pending_pvcs_of_one_claim_once(
    csi_ebs_one_vol_pod(), vec![pending_volume_pod(), unbound_pvc_pod_2(), csi_ebs_two_vol_pod()], vec![], &[EBS], LimitSource::CsiNode(4), 0, fits())]
#[case::should_count_pvcs_with_invalid_pv_name_but_valid_sc(
    csi_ebs_one_vol_pod(), vec![missing_pv_pod(), csi_ebs_two_vol_pod()], vec![], &[EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::do_not_count_pvcs_with_missing_sc(
    csi_ebs_one_vol_pod(), vec![running_pod(), no_sc_pvc_pod()], vec![], &[EBS], LimitSource::CsiNode(2), 0, fits())]
#[case::count_pvcs_with_the_same_type_towards_volume_limit(
    csi_ebs_one_vol_pod(), vec![gce_two_vol_pod(), csi_ebs_two_vol_pod()], vec![], &[EBS, GCE], LimitSource::CsiNode(2), 0, exceeded())]
#[case::do_not_count_pvcs_with_different_type_towards_volume_limit(
    gce_two_vol_pod(), vec![csi_ebs_two_vol_pod(), running_pod()], vec![], &[EBS, GCE], LimitSource::CsiNode(2), 0, fits())]
#[case::should_count_in_tree_volumes_if_migration_is_enabled(
    in_tree_one_vol_pod(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::nil_csi_node(
    in_tree_inline_vol_pod(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::None, 0, fits())]
#[case::should_count_unbound_in_tree_volumes_if_migration_is_enabled(
    pending_volume_pod(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::should_not_limit_pod_if_volume_used_does_not_report_limits(
    in_tree_one_vol_pod(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNodeWithNoLimit, 0, fits())]
#[case::should_not_count_non_migratable_in_tree_volumes(
    in_tree_non_migratable_one_vol_pod(), vec![csi_ebs_two_vol_pod()], vec![], &[HOSTPATH_IN_TREE, EBS], LimitSource::CsiNode(2), 0, fits())]
#[case::should_count_in_tree_inline_volumes_if_migration_is_enabled(
    in_tree_inline_vol_pod(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::should_count_in_tree_and_csi_volumes_when_scheduling_in_tree_volumes(
    in_tree_one_vol_pod(), vec![csi_ebs_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::should_count_in_tree_inline_and_csi_volumes_when_scheduling_in_tree_volumes(
    in_tree_inline_vol_pod(), vec![csi_ebs_two_vol_pod(), in_tree_one_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(3), 0, exceeded())]
#[case::should_not_count_an_inline_volume_with_the_handle_of_a_csi_volume_on_the_node(
    in_tree_inline_vol_pod_with_same_csi_volume_id(), vec![csi_ebs_two_vol_pod(), in_tree_one_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(3), 0, fits())]
#[case::should_count_in_tree_and_csi_volumes_when_scheduling_csi_volumes(
    csi_ebs_one_vol_pod(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::ephemeral_volume_missing(
    ephemeral_volume_pod(), vec![], vec![], &[EBS], LimitSource::CsiNodeWithNoLimit, 0, missing_ephemeral_claim())]
#[case::ephemeral_volume_not_owned(
    ephemeral_volume_pod(), vec![], vec![ephemeral_claim("abc-xyz", None)], &[EBS], LimitSource::CsiNodeWithNoLimit, 0,
    Some(Status::error("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)")))]
#[case::ephemeral_volume_unbound(
    ephemeral_volume_pod(), vec![], vec![ephemeral_claim("abc-xyz", Some("12345"))], &[EBS], LimitSource::CsiNodeWithNoLimit, 0, fits())]
#[case::ephemeral_does_not_fit_when_node_volume_limit_le_pods_csi_volume(
    ephemeral_volume_pod(), vec![running_pod(), csi_ebs_two_vol_pod()], vec![ephemeral_claim("abc-xyz", Some("12345"))], &[EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::does_not_fit_when_node_volume_limit_le_pods_ephemeral_csi_volume(
    csi_ebs_one_vol_pod(), vec![running_pod(), ephemeral_two_volume_pod()],
    vec![ephemeral_claim("abc-x", Some("12345II")), ephemeral_claim("abc-y", Some("12345II"))],
    &[EBS], LimitSource::CsiNode(2), 0, exceeded())]
#[case::persistent_does_not_fit_when_node_volume_limit_le_ephemeral_and_persistent_volumes(
    csi_ebs_one_vol_pod(), vec![running_pod(), ephemeral_volume_pod(), csi_ebs_two_vol_pod()],
    vec![ephemeral_claim("abc-xyz", Some("12345"))], &[EBS], LimitSource::CsiNode(3), 0, exceeded())]
#[case::persistent_fits_when_node_volume_limit_gt_ephemeral_and_persistent_volumes(
    csi_ebs_one_vol_pod(), vec![running_pod(), ephemeral_volume_pod(), csi_ebs_two_vol_pod()],
    vec![ephemeral_claim("abc-xyz", Some("12345"))], &[EBS], LimitSource::CsiNode(5), 0, fits())]
#[case::skip_filter_when_the_pod_only_uses_secrets_and_configmaps(
    only_configmap_and_secret_vol_pod(), vec![], vec![], &[EBS], LimitSource::CsiNode(2), 0, None)]
#[case::do_not_skip_filter_when_the_pod_has_pvcs(
    pvc_pod_with_configmap_and_secret(), vec![], vec![], &[EBS], LimitSource::CsiNode(2), 0, fits())]
#[case::do_not_skip_filter_when_the_pod_has_ephemeral_volumes(
    ephemeral_pod_with_configmap_and_secret(), vec![], vec![], &[EBS], LimitSource::CsiNodeWithNoLimit, 0, missing_ephemeral_claim())]
#[case::do_not_skip_filter_when_the_pod_has_inline_migratable_volumes(
    inline_migratable_pod_with_configmap_and_secret(), vec![in_tree_two_vol_pod()], vec![], &[AWS_IN_TREE, EBS], LimitSource::CsiNode(2), 0, exceeded())]
// Beyond upstream's table: a volume the node already uses costs nothing more.
#[case::a_bound_volume_shared_with_a_pod_on_the_node_counts_once(
    csi_ebs_one_vol_pod(), vec![pvc_pod("sharer", &["csi-ebs.csi.aws.com-0"])], vec![], &[EBS], LimitSource::CsiNode(1), 0, fits())]
fn csi_limits(
    #[case] new_pod: Pod,
    #[case] existing: Vec<Pod>,
    #[case] extra_claims: Vec<PersistentVolumeClaim>,
    #[case] drivers: &[&str],
    #[case] limit_source: LimitSource,
    #[case] va_count: usize,
    #[case] want_filter: Option<Status>,
) {
    let storage = listers(drivers, &extra_claims, va_count, limit_source);
    let want_pre_filter = if want_filter.is_some() {
        Status::success()
    } else {
        Status::skip()
    };
    assert_eq!(
        run(new_pod, existing, storage),
        (want_pre_filter, want_filter)
    );
}

#[test]
fn a_pod_without_volumes_is_skipped_at_pre_filter() {
    let storage = listers(&[EBS], &[], 0, LimitSource::CsiNode(0));
    assert_eq!(
        run(make_pod("plain").obj(), vec![], storage),
        (Status::skip(), None)
    );
}

#[rstest]
#[case::attachment_to_the_node_counts(NODE, "csi-ebs.csi.aws.com-3", exceeded())]
#[case::attachment_to_another_node_does_not_count("other-node", "csi-ebs.csi.aws.com-3", fits())]
#[case::attachment_of_a_volume_a_pod_on_the_node_uses_counts_once(
    NODE,
    "csi-ebs.csi.aws.com-1",
    fits()
)]
#[case::attachment_of_a_missing_volume_does_not_count(NODE, "no-such-volume", fits())]
fn volume_attachments_count_once_per_node(
    #[case] node: &str,
    #[case] pv: &str,
    #[case] want: Option<Status>,
) {
    // Limit 2: the pod on the node uses one volume, the new pod brings one more.
    let mut storage = listers(&[EBS], &[], 0, LimitSource::CsiNode(2));
    storage.volume_attachments.insert(
        "va".into(),
        Arc::new(volume_attachment("va", node, EBS, pv)),
    );
    let existing = vec![pvc_pod("one", &["csi-ebs.csi.aws.com-1"])];
    assert_eq!(
        run(csi_ebs_one_vol_pod(), existing, storage),
        (Status::success(), want)
    );
}

// ---- in-tree volumes as their CSI drivers -----------------------------------------------

fn inline(vol: Volume) -> Pod {
    pod_with_volumes("inline", vec![vol])
}

fn gce_inline() -> Volume {
    Volume {
        name: "gce".into(),
        gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
            pd_name: "disk-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn azure_disk_inline() -> Volume {
    Volume {
        name: "azure-disk".into(),
        azure_disk: Some(AzureDiskVolumeSource {
            disk_name: "d".into(),
            disk_uri: "/subscriptions/s/disks/d".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn cinder_inline() -> Volume {
    Volume {
        name: "cinder".into(),
        cinder: Some(CinderVolumeSource {
            volume_id: "c-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn portworx_inline() -> Volume {
    Volume {
        name: "px".into(),
        portworx_volume: Some(PortworxVolumeSource {
            volume_id: "px-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn azure_file_inline() -> Volume {
    Volume {
        name: "azure-file".into(),
        azure_file: Some(AzureFileVolumeSource {
            secret_name: "s".into(),
            share_name: "share".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn vsphere_inline() -> Volume {
    Volume {
        name: "vsphere".into(),
        vsphere_volume: Some(VsphereVirtualDiskVolumeSource {
            volume_path: "[ds] v.vmdk".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A node whose CSINode gives `driver` room for no volume, with `migrated` in its
/// migrated-plugins annotation.
fn zero_limit(driver: &str, migrated: &str) -> StorageListers {
    let mut node = csi_node(&[driver], Some(0));
    node.metadata.annotations = Some(BTreeMap::from([(
        MIGRATED_PLUGINS_ANNOTATION.to_string(),
        migrated.to_string(),
    )]));
    let mut s = StorageListers::default();
    s.csi_nodes.insert(NODE.into(), Arc::new(node));
    s
}

#[rstest]
#[case::aws_ebs_counts_as_ebs_csi_aws_com(aws_inline("vol-1"), EBS, "", exceeded())]
#[case::gce_pd_counts_as_pd_csi_storage_gke_io(gce_inline(), GCE, "", exceeded())]
#[case::azure_disk_counts_as_disk_csi_azure_com(
    azure_disk_inline(),
    AZURE_DISK_DRIVER_NAME,
    "",
    exceeded()
)]
#[case::cinder_counts_as_cinder_csi_openstack_org(
    cinder_inline(),
    CINDER_DRIVER_NAME,
    "",
    exceeded()
)]
#[case::portworx_counts_as_pxd_portworx_com_when_the_node_migrated_it(
    portworx_inline(),
    PORTWORX_DRIVER_NAME,
    PORTWORX_IN_TREE_PLUGIN_NAME,
    exceeded()
)]
#[case::portworx_does_not_count_when_the_node_did_not_migrate_it(
    portworx_inline(),
    PORTWORX_DRIVER_NAME,
    AWS_IN_TREE,
    fits()
)]
#[case::azure_file_never_counts(
    azure_file_inline(),
    AZURE_FILE_DRIVER_NAME,
    AZURE_FILE_IN_TREE_PLUGIN_NAME,
    fits()
)]
#[case::vsphere_never_counts(
    vsphere_inline(),
    VSPHERE_DRIVER_NAME,
    VSPHERE_IN_TREE_PLUGIN_NAME,
    fits()
)]
#[case::a_malformed_aws_volume_url_is_an_error(aws_inline("aws://us-east-1a/not-a-volume"), EBS, "",
    Some(Status::error("converting volume(aws) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://us-east-1a/not-a-volume)")))]
fn in_tree_inline_volumes_count_against_their_csi_driver(
    #[case] vol: Volume,
    #[case] driver: &str,
    #[case] migrated: &str,
    #[case] want: Option<Status>,
) {
    assert_eq!(
        run(inline(vol), vec![], zero_limit(driver, migrated)),
        (Status::success(), want)
    );
}

#[rstest]
#[case::bare_id(aws_inline("vol-0abc"), Ok(Some("vol-0abc".to_string())))]
#[case::url_with_zone(aws_inline("aws://us-east-1a/vol-0abc"), Ok(Some("vol-0abc".to_string())))]
#[case::gce_inline_zone_unspecified(gce_inline(), Ok(Some("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-1".to_string())))]
#[case::azure_disk_uri(azure_disk_inline(), Ok(Some("/subscriptions/s/disks/d".to_string())))]
#[case::azure_file_has_none(azure_file_inline(), Ok(None))]
fn inline_volume_handles(#[case] vol: Volume, #[case] want: Result<Option<String>, String>) {
    let source = translation::inline_source(&vol);
    assert_eq!(source.map(inline_volume_handle), Some(want));
}

fn gce_pv(labels: &[(&str, &str)]) -> PersistentVolume {
    let mut m = meta(None, "gce");
    m.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    PersistentVolume {
        metadata: m,
        spec: Some(PersistentVolumeSpec {
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                pd_name: "disk-1".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[rstest]
#[case::zonal(&[("topology.kubernetes.io/zone", "us-central1-a")],
    Ok(Some("projects/UNSPECIFIED/zones/us-central1-a/disks/disk-1".to_string())))]
#[case::regional(&[("failure-domain.beta.kubernetes.io/zone", "us-central1-a__us-central1-b")],
    Ok(Some("projects/UNSPECIFIED/regions/us-central1/disks/disk-1".to_string())))]
#[case::no_zone(&[], Ok(Some("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-1".to_string())))]
#[case::zones_of_two_regions(&[("topology.kubernetes.io/zone", "us-central1-a__europe-west1-b")],
    Err("multiple or no regions gotten from zones".to_string()))]
fn gce_pd_volume_handles(
    #[case] labels: &[(&str, &str)],
    #[case] want: Result<Option<String>, String>,
) {
    let pv = gce_pv(labels);
    let source = pv.spec.as_ref().and_then(translation::pv_source);
    assert_eq!(source.map(|s| pv_volume_handle(&pv, s)), Some(want));
}

// ---- events and queueing hints ------------------------------------------------------------

#[test]
fn registers_upstream_events() {
    let got: Vec<(ClusterEvent, bool)> = CSILimits::default()
        .events_to_register()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                ClusterEvent::new(EventResource::CSINode, ActionType::ADD),
                false
            ),
            (
                ClusterEvent::new(EventResource::CSINode, ActionType::UPDATE),
                true
            ),
            (
                ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
                true
            ),
            (
                ClusterEvent::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
                true
            ),
            (
                ClusterEvent::new(EventResource::VolumeAttachment, ActionType::DELETE),
                true
            ),
        ]
    );
}

fn pod_obj(p: Pod) -> EventObject {
    EventObject::Pod(Arc::new(p))
}

fn on_node(mut p: Pod, node: &str) -> Pod {
    if let Some(s) = p.spec.as_mut() {
        s.node_name = (!node.is_empty()).then(|| node.to_string());
    }
    p
}

#[rstest]
#[case::a_deleted_pod_with_a_pvc(on_node(pvc_pod("gone", &["placeholder"]), NODE), QueueingHint::Queue)]
#[case::a_deleted_pod_with_an_inline_migratable_volume(
    on_node(pod_with_volumes("gone", vec![aws_inline("")]), NODE), QueueingHint::Queue)]
#[case::a_deleted_pod_without_volumes(on_node(make_pod("gone").obj(), NODE), QueueingHint::QueueSkip)]
#[case::a_deleted_pod_not_scheduled(
    on_node(pvc_pod("gone", &["csi-ebs.csi.aws.com-0"]), ""), QueueingHint::QueueSkip)]
#[case::a_deleted_pod_with_only_a_config_map(
    on_node(only_configmap_and_secret_vol_pod(), NODE),
    QueueingHint::QueueSkip
)]
fn pod_deleted_hint(#[case] deleted: Pod, #[case] want: QueueingHint) {
    let pending = pvc_pod("pending", &["csi-ebs.csi.aws.com-2"]);
    assert_eq!(
        is_schedulable_after_pod_deleted(&pending, Some(&pod_obj(deleted)), None),
        Ok(want)
    );
}

fn in_ns(mut p: Pod, ns: &str) -> Pod {
    p.metadata.namespace = Some(ns.into());
    p
}

fn claim_in(ns: &str, name: &str) -> EventObject {
    EventObject::PersistentVolumeClaim(Arc::new(PersistentVolumeClaim {
        metadata: meta(Some(ns), name),
        ..Default::default()
    }))
}

#[rstest]
#[case::a_pod_in_another_namespace(in_ns(make_pod("p").obj(), "ns1"), claim_in("ns2", "pvc1"), QueueingHint::QueueSkip)]
#[case::a_pod_using_the_added_pvc(in_ns(pvc_pod("p", &["pvc1"]), "ns1"), claim_in("ns1", "pvc1"), QueueingHint::Queue)]
#[case::a_pod_with_an_ephemeral_volume_of_the_added_pvc(
    in_ns(pod_with_volumes("pod1", vec![ephemeral_volume("ephemeral")]), "ns1"),
    claim_in("ns1", "pod1-ephemeral"), QueueingHint::Queue)]
#[case::a_pod_using_another_pvc(in_ns(pvc_pod("p", &["pvc1"]), "ns1"), claim_in("ns1", "pvc2"), QueueingHint::QueueSkip)]
#[case::a_pod_without_pvcs(in_ns(make_pod("p").obj(), "ns1"), claim_in("ns1", "pvc2"), QueueingHint::QueueSkip)]
fn pvc_added_hint(#[case] pod: Pod, #[case] added: EventObject, #[case] want: QueueingHint) {
    assert_eq!(
        is_schedulable_after_pvc_added(&pod, None, Some(&added)),
        Ok(want)
    );
}

fn inline_attachment(attacher: &str) -> VolumeAttachment {
    VolumeAttachment {
        metadata: meta(None, "volumeattachment1"),
        spec: VolumeAttachmentSpec {
            attacher: attacher.into(),
            node_name: "fake-node".into(),
            source: VolumeAttachmentSource {
                inline_volume_spec: Some(PersistentVolumeSpec {
                    csi: Some(CSIPersistentVolumeSource {
                        driver: attacher.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
        status: None,
    }
}

fn pv1_attachment() -> VolumeAttachment {
    volume_attachment(
        "volumeattachment1",
        "fake-node",
        "test.storage.gke.io",
        "pv1",
    )
}

#[rstest]
#[case::a_pod_whose_pvc_is_bound_to_the_detached_volume(
    vec![claim_volume("pvc1")], pv1_attachment(), QueueingHint::Queue)]
#[case::an_inline_aws_ebs_volume_and_an_ebs_attachment(
    vec![aws_inline("test")], inline_attachment(EBS), QueueingHint::Queue)]
#[case::an_inline_gce_pd_volume_and_an_ebs_attachment(
    vec![gce_inline()], inline_attachment(EBS), QueueingHint::QueueSkip)]
#[case::an_inline_aws_ebs_volume_and_a_pvc_and_an_ebs_attachment(
    vec![aws_inline("test"), claim_volume("pvc1")], inline_attachment(EBS), QueueingHint::Queue)]
#[case::an_inline_aws_ebs_volume_and_a_pvc_bound_to_the_detached_volume(
    vec![aws_inline("test"), claim_volume("pvc1")], pv1_attachment(), QueueingHint::Queue)]
#[case::a_pod_without_pvcs(vec![], pv1_attachment(), QueueingHint::QueueSkip)]
#[case::a_pod_whose_pvc_is_bound_to_another_volume(
    vec![claim_volume("pvc2")], pv1_attachment(), QueueingHint::QueueSkip)]
fn volume_attachment_deleted_hint(
    #[case] volumes: Vec<Volume>,
    #[case] deleted: VolumeAttachment,
    #[case] want: QueueingHint,
) {
    let pod = in_ns(pod_with_volumes("p", volumes), "ns1");
    let mut storage = StorageListers::default();
    let mut pvc1 = claim("pvc1", Some("pv1"), None);
    pvc1.metadata.namespace = Some("ns1".into());
    insert_claim(&mut storage, pvc1);
    let mut pvc2 = claim("pvc2", Some("pv2"), None);
    pvc2.metadata.namespace = Some("ns1".into());
    insert_claim(&mut storage, pvc2);
    let old = EventObject::VolumeAttachment(Arc::new(deleted));
    assert_eq!(
        is_schedulable_after_volume_attachment_deleted(Some(&storage), &pod, Some(&old), None),
        Ok(want)
    );
}

fn csi_node_with(limits: &[(&str, Option<i32>)], annotation: &str) -> EventObject {
    let mut node = csi_node(&[], None);
    node.metadata.annotations = Some(BTreeMap::from([(
        MIGRATED_PLUGINS_ANNOTATION.to_string(),
        annotation.to_string(),
    )]));
    node.spec.drivers = limits
        .iter()
        .map(|(d, c)| CSINodeDriver {
            name: d.to_string(),
            node_id: NODE.into(),
            allocatable: c.map(|c| VolumeNodeResources { count: Some(c) }),
            ..Default::default()
        })
        .collect();
    EventObject::CSINode(Arc::new(node))
}

#[rstest]
#[case::a_limit_grew(&[(EBS, Some(1))], &[(EBS, Some(2))], QueueingHint::Queue)]
#[case::a_limit_was_lifted(&[(EBS, Some(1))], &[(EBS, None)], QueueingHint::Queue)]
#[case::a_driver_with_a_limit_left(&[(EBS, Some(1)), (GCE, Some(1))], &[(GCE, Some(1))], QueueingHint::Queue)]
#[case::a_limit_shrank(&[(EBS, Some(2))], &[(EBS, Some(1))], QueueingHint::QueueSkip)]
#[case::limits_unchanged(&[(EBS, Some(2))], &[(EBS, Some(2))], QueueingHint::QueueSkip)]
#[case::a_driver_with_a_limit_arrived(&[(EBS, Some(2))], &[(EBS, Some(2)), (GCE, Some(1))], QueueingHint::QueueSkip)]
fn csi_node_updated_hint(
    #[case] before: &[(&str, Option<i32>)],
    #[case] after: &[(&str, Option<i32>)],
    #[case] want: QueueingHint,
) {
    let pod = csi_ebs_one_vol_pod();
    assert_eq!(
        is_schedulable_after_csi_node_updated(
            &pod,
            Some(&csi_node_with(before, AWS_IN_TREE)),
            Some(&csi_node_with(after, "")),
        ),
        Ok(want)
    );
}

#[test]
fn hints_name_the_object_they_did_not_expect() {
    let pod = csi_ebs_one_vol_pod();
    let node = EventObject::Node(Arc::new(make_node("n").obj()));
    assert_eq!(
        (
            is_schedulable_after_csi_node_updated(&pod, Some(&node), Some(&node)),
            is_schedulable_after_pod_deleted(&pod, Some(&node), None),
            is_schedulable_after_pvc_added(&pod, None, Some(&node)),
            is_schedulable_after_volume_attachment_deleted(None, &pod, Some(&node), None),
        ),
        (
            Err("expected CSINode, but got Node".to_string()),
            Err("expected Pod, but got Node".to_string()),
            Err("expected PersistentVolumeClaim, but got Node".to_string()),
            Err("expected VolumeAttachment, but got Node".to_string()),
        )
    );
}

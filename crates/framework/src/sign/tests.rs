use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, Volume};
use rstest::rstest;
use serde_json::{json, Value};

use super::*;
use crate::testing::make_pod;

#[rstest]
#[case::ports_sorted_and_deduplicated(
    make_pod("p").host_port("TCP", "", 8080).host_port("UDP", "", 53).host_port("TCP", "127.0.0.1", 8080).obj(),
    json!([53, 8080])
)]
#[case::no_ports_is_an_empty_list(make_pod("p").obj(), json!([]))]
fn host_ports_signer_lists_each_port_once(#[case] pod: Pod, #[case] want: Value) {
    assert_eq!(host_ports_signer(&pod), want);
}

#[test]
fn tolerations_signer_does_not_depend_on_their_order() {
    let a = make_pod("a")
        .toleration("b", "Equal", "1", "NoSchedule")
        .toleration("a", "Equal", "2", "NoSchedule")
        .obj();
    let b = make_pod("b")
        .toleration("a", "Equal", "2", "NoSchedule")
        .toleration("b", "Equal", "1", "NoSchedule")
        .obj();
    assert_eq!(tolerations_signer(&a), tolerations_signer(&b));
}

#[test]
fn volumes_signer_leaves_out_config_maps_secrets_and_volume_names() {
    let config_map = Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: "cm-a".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let a = make_pod("a").volume(config_map).pvc("data").obj();
    let b = make_pod("b").pvc("data").obj();
    assert_eq!(volumes_signer(&a), volumes_signer(&b));
    assert_ne!(
        volumes_signer(&b),
        volumes_signer(&make_pod("c").pvc("other").obj())
    );
}

#[test]
fn signature_text_is_ordered_by_signer_name() {
    let fragments = BTreeMap::from([
        (TOLERATIONS_SIGNER, json!([])),
        (NODE_NAME_SIGNER, json!("")),
    ]);
    assert_eq!(
        PodSignature::from_fragments(fragments).as_str(),
        r#"{"v1.Pod.Spec.NodeName":"","v1.Pod.Spec.Tolerations":[]}"#
    );
}

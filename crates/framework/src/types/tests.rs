use super::*;
use crate::testing::{make_node, make_pod};
use rstest::rstest;

fn res(cpu: i64, mem: i64) -> Resource {
    Resource {
        milli_cpu: cpu,
        memory: mem,
        ..Default::default()
    }
}

#[rstest]
#[case::single_container(make_pod("p").req(&[("cpu", "100m"), ("memory", "500Mi")]).info(), res(100, 500 << 20), 100, 500 << 20)]
#[case::containers_are_summed(make_pod("p").req(&[("cpu", "100m")]).req(&[("cpu", "200m")]).info(), res(300, 0), 300, 2 * DEFAULT_MEMORY_REQUEST)]
#[case::no_requests_counts_defaults_for_scoring(make_pod("p").image("nginx").info(), res(0, 0), DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)]
#[case::init_container_larger_than_containers(make_pod("p").req(&[("cpu", "100m")]).init_req(&[("cpu", "1")]).info(), res(1000, 0), 1000, DEFAULT_MEMORY_REQUEST)]
#[case::init_container_smaller_than_containers(make_pod("p").req(&[("cpu", "2")]).init_req(&[("cpu", "1")]).info(), res(2000, 0), 2000, DEFAULT_MEMORY_REQUEST)]
#[case::sidecar_adds_to_containers(make_pod("p").req(&[("cpu", "1")]).sidecar_req(&[("cpu", "500m")]).info(), res(1500, 0), 1500, 2 * DEFAULT_MEMORY_REQUEST)]
#[case::init_after_sidecar_runs_beside_it(make_pod("p").req(&[("cpu", "100m")]).sidecar_req(&[("cpu", "500m")]).init_req(&[("cpu", "2")]).info(), res(2500, 0), 2500, 2 * DEFAULT_MEMORY_REQUEST)]
#[case::overhead_is_added(make_pod("p").req(&[("cpu", "1")]).overhead(&[("cpu", "250m"), ("memory", "120Mi")]).info(), res(1250, 120 << 20), 1250, DEFAULT_MEMORY_REQUEST + (120 << 20))]
#[case::limits_default_requests(make_pod("p").limits(&[("cpu", "2"), ("memory", "1Gi")]).info(), res(2000, 1 << 30), 2000, 1 << 30)]
fn pod_requests(
    #[case] pod: Arc<PodInfo>,
    #[case] want: Resource,
    #[case] non0_cpu: i64,
    #[case] non0_mem: i64,
) {
    assert_eq!(
        (pod.requests.clone(), pod.non0_cpu, pod.non0_mem),
        (want, non0_cpu, non0_mem)
    );
}

#[test]
fn extended_resources_are_scalar() {
    let pod = make_pod("p")
        .req(&[
            ("example.com/gpu", "2"),
            ("hugepages-2Mi", "4Mi"),
            ("unknown", "1"),
        ])
        .info();
    assert_eq!(
        pod.requests.scalar_resources,
        BTreeMap::from([
            ("example.com/gpu".to_string(), 2),
            ("hugepages-2Mi".to_string(), 4 << 20)
        ])
    );
}

#[test]
fn bad_quantity_is_recorded() {
    let pod = make_pod("p").req(&[("cpu", "lots")]).info();
    assert_eq!((pod.requests.milli_cpu, pod.parse_errors.len()), (0, 1));
}

#[test]
fn host_ports_default_ip_and_protocol() {
    let pod = make_pod("p")
        .host_port("UDP", "", 53)
        .host_port("TCP", "10.0.0.1", 80)
        .info();
    assert_eq!(
        pod.host_ports,
        vec![
            HostPort {
                ip: "0.0.0.0".into(),
                protocol: "UDP".into(),
                port: 53
            },
            HostPort {
                ip: "10.0.0.1".into(),
                protocol: "TCP".into(),
                port: 80
            },
        ]
    );
}

#[rstest]
#[case::same(("0.0.0.0", "TCP", 80), ("0.0.0.0", "TCP", 80), true)]
#[case::wildcard_vs_specific(("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80), true)]
#[case::different_ips(("10.0.0.2", "TCP", 80), ("10.0.0.1", "TCP", 80), false)]
#[case::different_protocols(("0.0.0.0", "UDP", 80), ("0.0.0.0", "TCP", 80), false)]
#[case::different_ports(("0.0.0.0", "TCP", 81), ("0.0.0.0", "TCP", 80), false)]
fn host_port_conflicts(
    #[case] a: (&str, &str, i32),
    #[case] b: (&str, &str, i32),
    #[case] want: bool,
) {
    let hp = |(ip, proto, port): (&str, &str, i32)| HostPort {
        ip: ip.into(),
        protocol: proto.into(),
        port,
    };
    assert_eq!(hp(a).conflicts_with(&hp(b)), want);
}

#[test]
fn node_info_accounts_pods_and_undoes_on_remove() {
    // The host-port container requests nothing, so it counts the defaults when scoring.
    let p1 = make_pod("a")
        .req(&[("cpu", "1"), ("memory", "1Gi")])
        .host_port("TCP", "", 80)
        .info();
    let p2 = make_pod("b").image("nginx").info();
    let mut ni = make_node("n1")
        .capacity(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")])
        .info_with(&[p1.clone(), p2.clone()]);
    let after_add = (
        ni.requested.clone(),
        ni.non_zero_requested.clone(),
        ni.used_ports.len(),
        ni.pods.len(),
    );
    let gen = ni.generation;
    let removed = ni.remove_pod("uid-a");
    assert_eq!(
        (
            after_add,
            removed,
            ni.requested.clone(),
            ni.non_zero_requested.clone(),
            ni.used_ports.len(),
            ni.generation > gen
        ),
        (
            (
                res(1000, 1 << 30),
                res(
                    1000 + 2 * DEFAULT_MILLI_CPU_REQUEST,
                    (1 << 30) + 2 * DEFAULT_MEMORY_REQUEST
                ),
                1,
                2
            ),
            true,
            res(0, 0),
            res(DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
            0,
            true
        )
    );
}

#[test]
fn allocatable_is_parsed() {
    let ni = make_node("n1")
        .capacity(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")])
        .info_with(&[]);
    assert_eq!(
        ni.allocatable,
        Resource {
            milli_cpu: 4000,
            memory: 32 << 30,
            ephemeral_storage: 0,
            allowed_pod_number: 110,
            scalar_resources: BTreeMap::new()
        }
    );
}

#[test]
fn match_and_mismatch_label_keys_are_merged_into_affinity_selectors() {
    use k8s_openapi::api::core::v1::{Affinity, PodAffinity, PodAffinityTerm};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as V1LabelSelector;
    let pod = make_pod("p")
        .label("app", "web")
        .label("rev", "v2")
        .label("tenant", "a")
        .with(|p| {
            p.spec.get_or_insert_with(Default::default).affinity = Some(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(V1LabelSelector {
                                match_labels: Some(BTreeMap::from([(
                                    "app".to_string(),
                                    "web".to_string(),
                                )])),
                                match_expressions: None,
                            }),
                            topology_key: "kubernetes.io/hostname".into(),
                            match_label_keys: Some(vec!["rev".into(), "absent".into()]),
                            mismatch_label_keys: Some(vec!["tenant".into()]),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            })
        })
        .info();
    let term = &pod.required_affinity_terms[0];
    let other = |pairs: &[(&str, &str)]| {
        make_pod("o")
            .with(|p| {
                p.metadata.labels = Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
            })
            .obj()
    };
    assert_eq!(
        (
            term.matches(
                &other(&[("app", "web"), ("rev", "v2"), ("tenant", "b")]),
                None
            ),
            term.matches(
                &other(&[("app", "web"), ("rev", "v1"), ("tenant", "b")]),
                None
            ),
            term.matches(
                &other(&[("app", "web"), ("rev", "v2"), ("tenant", "a")]),
                None
            ),
        ),
        (true, false, false)
    );
}

/// `unschedulable()` and `taints()` answer from flags kept beside the node object; they
/// must follow the node through `set_node`.
#[rstest]
#[case::plain(make_node("n").obj(), false, 0)]
#[case::cordoned(make_node("n").unschedulable(true).obj(), true, 0)]
#[case::tainted(make_node("n").taint("k", "v", "NoSchedule").obj(), false, 1)]
#[case::both(
    make_node("n").unschedulable(true).taint("k", "v", "NoSchedule").taint("x", "", "NoExecute").obj(),
    true,
    2
)]
fn node_flags_follow_the_node(#[case] node: Node, #[case] cordoned: bool, #[case] taints: usize) {
    let fresh = NodeInfo::new(Arc::new(node.clone()));
    let mut updated = NodeInfo::new(Arc::new(
        make_node("n")
            .unschedulable(!cordoned)
            .taint("old", "", "NoSchedule")
            .obj(),
    ));
    updated.set_node(Arc::new(node));
    assert_eq!(
        (
            (fresh.unschedulable(), fresh.taints().len()),
            (updated.unschedulable(), updated.taints().len())
        ),
        ((cordoned, taints), (cordoned, taints))
    );
}

/// The claim counts of `ni`, sorted.
fn pvc_counts(ni: &NodeInfo) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = ni
        .pvc_ref_counts
        .iter()
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    v.sort();
    v
}

#[test]
fn pvc_ref_counts_follow_pods_added_and_removed() {
    let mut ni = make_node("n1").info_with(&[
        make_pod("a").pvc("data").pvc("logs").info(),
        make_pod("b").pvc("data").info(),
        make_pod("c").namespace("other").pvc("data").info(),
        make_pod("d").image("nginx").info(),
    ]);
    let after_add = pvc_counts(&ni);
    ni.remove_pod("uid-a");
    let after_removing_a = pvc_counts(&ni);
    ni.remove_pod("uid-b");
    ni.remove_pod("uid-c");
    assert_eq!(
        (after_add, after_removing_a, pvc_counts(&ni)),
        (
            vec![
                ("default/data".to_string(), 2),
                ("default/logs".to_string(), 1),
                ("other/data".to_string(), 1),
            ],
            vec![
                ("default/data".to_string(), 1),
                ("other/data".to_string(), 1),
            ],
            vec![],
        )
    );
}
